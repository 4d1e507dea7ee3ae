"""Transaction metadata (user, description, extension) in the forms the copies keep it.

ZODB keeps user and description as bytes and the extension as a pickle of
a dict.  A dump line holds them as JSON (text, or ``{"@b": base64}`` for
bytes that are not UTF-8; the extension as the codec decodes it).
zodb-pgjsonb's ``transaction_log`` holds user and description as text and
the extension as bytes: the dict as JSON text, which it reads back with
``json.loads``, or, for a dict JSON cannot hold, the pickle itself (which it
reads with an unpickler of built-in types only).
"""

from __future__ import annotations

import base64
import json
from typing import Any

import zodb_json_codec as codec

from . import MAX_MESSAGE, CommandError


def text_json(raw: bytes) -> Any:
    """A transaction's user or description in a dump line: its text if it is UTF-8, else {"@b": base64}."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return {"@b": base64.b64encode(raw).decode("ascii")}


def extension_json(raw: bytes) -> Any:
    """A transaction's extension (a pickle of a dict, b"" for none) as the codec decodes it; one it cannot
    decode, or whose value JSON cannot hold, as {"@pkl": base64} (dict_to_pickle gives its bytes back)."""
    if not raw:
        return {}
    try:
        value = codec.pickle_to_dict(raw)
        json.dumps(value, allow_nan=False)
        return value
    except (ValueError, RecursionError):
        return {"@pkl": base64.b64encode(raw).decode("ascii")}


def pgjsonb_text(raw: bytes, what: str, where: str) -> str:
    """A user or description as transaction_log's text column holds it; CommandError for bytes PostgreSQL
    text cannot hold (not UTF-8, or a NUL)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = "\0"
    if "\0" in text:
        raise CommandError(f"{where}: its {what} is not text PostgreSQL can hold (not UTF-8, or a NUL byte): "
                           f"{raw!r}; zodb-pgjsonb's transaction_log keeps it as text (dump keeps it)"
                           [:MAX_MESSAGE])
    return text


def _plain(value: Any) -> bool:
    """Whether a decoded value is plain JSON: no marker, so json.loads gives what ZODB's unpickling gives."""
    if isinstance(value, dict):
        return all(not key.startswith("@") and _plain(item) for key, item in value.items())
    if isinstance(value, list):
        return all(map(_plain, value))
    return True


def pgjsonb_extension(raw: bytes) -> bytes:
    """transaction_log.extension of a pickled extension: the dict as JSON text, as zodb-pgjsonb writes it,
    when JSON holds it exactly; else the pickle as it is."""
    if not raw:
        return b""
    value = extension_json(raw)
    if isinstance(value, dict) and _plain(value):
        return json.dumps(value).encode("utf-8")
    return raw


def extension_from_pgjsonb(stored: bytes, where: str) -> bytes:
    """The extension pickle of a transaction_log.extension (JSON text or a pickle, as pgjsonb_extension
    and zodb-pgjsonb write it), written by the codec's encoder: a pickle edited in SQL is read by the
    codec, never unpickled, and written again only if the globals policy allows what it names."""
    if not stored:
        return b""
    try:
        value = json.loads(stored.decode("utf-8"))
    except ValueError:  # not JSON text: a pickle
        try:
            value = codec.pickle_to_dict(stored)
        except (ValueError, RecursionError) as exc:
            raise CommandError(f"{where}: its extension is neither JSON nor a pickle the codec reads: {exc}"
                               [:MAX_MESSAGE]) from None
    if not isinstance(value, dict):
        raise CommandError(f"{where}: its extension is not a dict but {type(value).__name__}")
    return extension_pickle(value, where)


def extension_pickle(value: dict, where: str) -> bytes:
    """The pickle of an extension read as a dict (b"" for an empty one), by the codec's encoder, whose
    globals policy refuses what would run code when ZODB reads it."""
    if not value:
        return b""
    try:
        return codec.dict_to_pickle(value)
    except ValueError as exc:
        raise CommandError(f"{where}: cannot encode its extension: {exc}"[:MAX_MESSAGE]) from None


def status_byte(status: Any, where: str) -> bytes:
    """A transaction's status as read: " ", or "p" for one a pack went through."""
    if status not in (" ", "p"):
        raise CommandError(f"{where}: the status must be \" \" or \"p\", not {status!r}"[:MAX_MESSAGE])
    return status.encode("latin-1")
