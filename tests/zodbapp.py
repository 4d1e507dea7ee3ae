"""Application classes for the ZODB and property-based tests.

The records these tests feed the codec name these classes by module and
class (``zodbapp.Item``...), as a real application's records would.  The
codec never imports them, and neither does the object-graph comparison.
"""

from __future__ import annotations

from persistent import Persistent


class Item(Persistent):
    """A persistent object whose attributes the tests fill with every kind of value."""

    def __init__(self, **attrs):
        self.__dict__.update(attrs)


class Keyed(Persistent):
    """Defines ``__getnewargs__``: ZODB writes its class metadata as
    ``(class, args)`` and references to it as the bare oid (``['n', ...]``
    across databases)."""

    def __new__(cls, key=None):
        self = super().__new__(cls)
        self.key = key
        return self

    def __init__(self, key=None):
        self.key = key

    def __getnewargs__(self):
        return (self.key,)


class Slotted(Persistent):
    """No ``__dict__``: the state is ``(None, {slot: value})``."""

    __slots__ = ("a", "b")


class Plain:
    """A non-persistent object, pickled inside the state of its container."""

    def __init__(self, **attrs):
        self.__dict__.update(attrs)

    def __eq__(self, other):
        return type(other) is type(self) and other.__dict__ == self.__dict__

    def __repr__(self):
        return f"Plain({self.__dict__!r})"


class PlainSlots:
    """A non-persistent object with ``__slots__`` and a ``__dict__`` of its own."""

    __slots__ = ("x", "__dict__")


class AttrDict(dict):
    """A dict subclass with attributes: pickled as NEWOBJ, SETITEMS, then BUILD."""


class AttrList(list):
    """A list subclass with attributes: pickled as NEWOBJ, APPENDS, then BUILD."""


#: What record_call was called with (tests/test_globals_policy.py).
CALLS: list = []


def record_call(what: str) -> str:
    """A function a record can name as a @reduce callable: loading the record calls it."""
    CALLS.append(what)
    return what
