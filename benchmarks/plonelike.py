"""Content classes shaped like Plone's, for the generated large-text sets (benchmarks/largetext.py).

The records name this module as their class's module, so the pickle
baseline can import the classes and be timed on the same records as the
codecs. The attributes follow what a Plone 6 site stores for its content
(Dexterity items and containers, plone.app.textfield's RichTextValue,
workflow history, a catalog's metadata); only the state matters here, so
the classes have no behaviour.
"""

from __future__ import annotations

from persistent import Persistent


class RichTextValue:
    """A rich-text field value, pickled inside its document's state (not persistent), as Plone's is."""

    def __init__(self, raw: str, mime_type: str = "text/html", output_mime_type: str = "text/x-html-safe") -> None:
        self._raw = raw
        self._mimeType = mime_type
        self._outputMimeType = output_mime_type
        self._encoding = "utf-8"


class Document(Persistent):
    """A page: title, description, a rich-text body, dates, references, workflow history."""


class NewsItem(Document):
    """A news item: a document with a lead image caption."""


class Event(Document):
    """An event: a document with start and end as timezone-aware datetimes."""


class Folder(Persistent):
    """A container whose children live in an OOBTree of id -> object, as in plone.folder."""


class File(Persistent):
    """A file-like object holding one large text, for the load-path set."""
