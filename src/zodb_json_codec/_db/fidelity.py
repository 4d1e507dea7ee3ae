"""Do two ZODB records hold the same objects?  Compared without importing application classes.

Used by ``zodb-json-codec verify``.  Both pickles of a record (class, state)
are loaded with one unpickler, sharing the memo as ZODB does.  Every global
becomes an inert stand-in class that records its arguments, its state and
whether it was made by calling the class (REDUCE) or by ``__new__`` alone
(NEWOBJ); only a short list of harmless value types (datetime, Decimal,
UUID, set, ...) is rebuilt for real, so that two spellings of one value
compare equal.  Persistent references load as ``("REF", pid)``.
"""

from __future__ import annotations

import datetime
import decimal
import io
import math
import pickle
from typing import Any, Dict, Optional, Set, Tuple

_RENAMED_MODULES = {"__builtin__": "builtins", "copy_reg": "copyreg"}

#: Globals rebuilt for real (after the Python 2 renames above).
REAL_GLOBALS = frozenset(
    {
        ("datetime", "datetime"),
        ("datetime", "date"),
        ("datetime", "time"),
        ("datetime", "timedelta"),
        ("datetime", "timezone"),
        ("decimal", "Decimal"),
        ("uuid", "UUID"),
        ("builtins", "set"),
        ("builtins", "frozenset"),
        ("builtins", "bytearray"),
        ("builtins", "complex"),
        ("builtins", "object"),
        ("builtins", "slice"),
        ("builtins", "range"),
        ("copyreg", "_reconstructor"),
        ("copyreg", "__newobj__"),
        ("copyreg", "__newobj_ex__"),
        ("_codecs", "encode"),
        ("pytz", "_p"),
        ("pytz", "_UTC"),
    }
)


class Inert:
    """Stand-in for a class that must not be imported."""

    _args: tuple = ()
    _kw: dict = {}
    _state: Any = None
    _called = False
    _items: Any = None    # SETITEM(S) on it: a dict subclass's contents, in order
    _appends: Any = None  # APPEND(S) on it: a list subclass's contents

    def __new__(cls, *args: Any, **kw: Any) -> "Inert":
        self = object.__new__(cls)
        self._args, self._kw, self._state = args, kw, None
        return self

    def __init__(self, *args: Any, **kw: Any) -> None:
        # Only runs when the pickle called the class (REDUCE, INST/OBJ with
        # arguments), not when it used cls.__new__ (NEWOBJ, _reconstructor).
        self._called = True

    def __setstate__(self, state: Any) -> None:
        self._state = state

    def __setitem__(self, key: Any, value: Any) -> None:
        if self._items is None:
            self._items = []
        self._items.append((key, value))

    def append(self, value: Any) -> None:
        if self._appends is None:
            self._appends = []
        self._appends.append(value)

    def extend(self, values: Any) -> None:
        for value in values:
            self.append(value)

    def __call__(self, *args: Any, **kw: Any) -> "Inert":
        # A stand-in used as a callable, as in REDUCE of getattr(cls, "name"):
        # the result records the call.
        return _Call(self, *args, **kw)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and same(self, other)

    def __hash__(self) -> int:
        return hash(type(self).__qualname__)

    def __repr__(self) -> str:
        return f"<{type(self).__qualname__} {self._args!r} {self._state!r}>"


class _Call(Inert):
    """The result of calling a stand-in object; its first argument is the callee."""


class _TzStandIn(datetime.tzinfo):
    """Lets a real datetime or time carry a stand-in tzinfo (zoneinfo.ZoneInfo, dateutil, ...)."""

    def __init__(self, inner: Inert) -> None:
        self.inner = inner

    def utcoffset(self, dt: Any) -> None:
        return None

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and same(self.inner, other.inner)  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash(type(self.inner).__qualname__)


def _tz_stand_in(cls: type) -> Any:
    def build(*args: Any) -> Any:
        return cls(*(_TzStandIn(a) if isinstance(a, Inert) else a for a in args))

    build.__qualname__ = build.__name__ = cls.__name__
    build.__module__ = cls.__module__
    return build


#: Made once, so that two loads give the identical object for these globals.
def _bytearray_of_bytes(*args: Any) -> bytearray:
    """bytearray() of what a pickle gives it: bytes, or Python 2's text and encoding; never a size (a number
    from the data would make verify allocate that many bytes)."""
    if not args or (len(args) == 1 and type(args[0]) is bytes) or (
            len(args) == 2 and type(args[0]) is str and type(args[1]) is str):
        return bytearray(*args)
    raise ValueError(f"bytearray{tuple(type(a).__name__ for a in args)}: not the bytes a pickle holds")


_REAL_OVERRIDES = {
    ("datetime", "datetime"): _tz_stand_in(datetime.datetime),
    ("datetime", "time"): _tz_stand_in(datetime.time),
    ("builtins", "bytearray"): _bytearray_of_bytes,
}

_INERT: Dict[Tuple[str, str], type] = {}


def inert_class(module: str, name: str) -> type:
    """The one stand-in class for module.name (so identity comparisons hold)."""
    key = (module, name)
    cls = _INERT.get(key)
    if cls is None:
        cls = _INERT[key] = type(name, (Inert,), {"__qualname__": f"{module}.{name}", "__module__": "inert"})
    return cls


class Loader(pickle._Unpickler):  # type: ignore[name-defined]
    """Loads pickles into stand-ins; imports nothing but the real value types."""

    def find_class(self, module: Any, name: Any) -> Any:
        # Python 2 names are normalised as Python 3's unpickler does, so that
        # both spellings of a global compare equal.
        module = _RENAMED_MODULES.get(_text(module), _text(module))
        name = _text(name)
        key = (module, name)
        if key in REAL_GLOBALS:
            if key in _REAL_OVERRIDES:
                return _REAL_OVERRIDES[key]
            try:
                return super().find_class(module, name)
            except ImportError:  # e.g. pytz not installed: compare its values inertly
                pass
        return inert_class(module, name)

    def persistent_load(self, pid: Any) -> Any:
        return ("REF", pid)


def _text(name: Any) -> Any:
    # Python 2 pickles name globals with byte strings under encoding="bytes".
    if isinstance(name, (bytes, bytearray)):
        return bytes(name).decode("utf-8", "surrogateescape")
    return name


def class_name(meta: Any) -> Tuple[Any, Any]:
    """ZODB has written class metadata in several equivalent forms; name them alike.

    Returns ``("module.name", args)``; args is None unless the metadata
    carries constructor arguments.
    """
    args = None
    if isinstance(meta, tuple) and len(meta) == 2 and isinstance(meta[0], (tuple, type)):
        meta, args = meta  # ((module, name), args) or (class, args)
    if isinstance(meta, tuple) and len(meta) == 2 and all(isinstance(p, (str, bytes)) for p in meta):
        return f"{_text(meta[0])}.{_text(meta[1])}", args
    if isinstance(meta, type):
        if issubclass(meta, Inert):
            return meta.__qualname__, args
        return f"{meta.__module__}.{meta.__qualname__}", args
    return meta, args


def load_record(data: bytes, as_written: bool = False) -> Tuple[Tuple[Any, Any], Any]:
    """((class name, class args), state) of a record; raises whatever the unpickler raises.

    Both pickles are read with one unpickler, so the state may use the class
    pickle's memo, as ZODB reads them.  With as_written, a record that cannot
    be read so is read again with one unpickler per pickle: some writers
    (hand-assembled protocol 4 and 5 records) restart the memo numbering for
    the state pickle, and that is the only reading that makes sense of them.
    """
    try:
        loader = Loader(io.BytesIO(data), encoding="bytes")
        klass = loader.load()
        state = loader.load()
    except Exception:
        if not as_written:
            raise
        f = io.BytesIO(data)
        try:
            klass = Loader(f, encoding="bytes").load()
            state = Loader(f, encoding="bytes").load()
        except Exception:  # noqa: BLE001 - report why the ZODB reading failed
            pass
        else:
            return class_name(klass), state
        raise
    return class_name(klass), state


def same(a: Any, b: Any) -> bool:
    """Structural equality of two loaded graphs.

    Stricter than ``==`` where a value would change: -0.0 is not 0.0,
    Decimal('1.0') is not Decimal('1'), a datetime keeps its fold and its
    timezone's name.  Iterative (deep nesting needs no recursion) and
    terminating on shared and recursive structures.
    """
    seen: Set[Tuple[int, int]] = set()
    todo = [(a, b)]
    while todo:
        a, b = todo.pop()
        if isinstance(a, float) and isinstance(b, float):
            if not (math.isnan(a) and math.isnan(b)) and not (
                a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
            ):
                return False
            continue
        if type(a) is not type(b):
            return False
        if isinstance(a, (str, bytes, int, type(None))):
            if a != b:
                return False
            continue
        if isinstance(a, decimal.Decimal):
            if str(a) != str(b):
                return False
            continue
        if isinstance(a, (datetime.datetime, datetime.time)):
            if not (
                a.replace(tzinfo=None) == b.replace(tzinfo=None)
                and a.fold == b.fold
                and _same_tzinfo(a.tzinfo, b.tzinfo)
            ):
                return False
            continue
        if isinstance(a, (set, frozenset)):
            # == would recurse into nested sets: pair the items here and compare the pairs.
            pairs = _paired_items(a, b)
            if pairs is None:
                return False
            todo += pairs
            continue
        if not isinstance(a, (list, tuple, dict, Inert)):
            try:
                if not a == b:
                    return False
            except Exception:  # noqa: BLE001 - values that cannot be compared differ
                return False
            continue
        # Containers and stand-ins may be shared or contain themselves: a
        # pair met again is already being compared.  Only objects held by
        # the two graphs get here, so their ids stay valid meanwhile.
        pair = (id(a), id(b))
        if pair in seen:
            continue
        seen.add(pair)
        if isinstance(a, Inert):
            if a._called != b._called:
                return False
            todo += ((a._args, b._args), (a._kw, b._kw), (a._state, b._state), (a._items, b._items),
                     (a._appends, b._appends))
        elif isinstance(a, dict):
            if len(a) != len(b):
                return False
            if all(k in b for k in a):
                todo += ((v, b[k]) for k, v in a.items())
                continue
            # A key holding a NaN is found by identity only: the keys are paired as a set's items are.
            pairs = _paired_items(a, b)
            if pairs is None:
                return False
            todo += pairs
            todo += ((a[x], b[y]) for x, y in pairs)
        else:
            if len(a) != len(b):
                return False
            todo += zip(a, b)
    return True


def _paired_items(a: Any, b: Any) -> Any:
    """The items of two sets paired by hash (then by ==, or same, for items whose hashes collide), or None.

    The hash is _item_hash: a NaN's own hash is its identity's (Python 3.10+), and so is that of a tuple or
    set holding one, so two loads of one set would not pair.
    """
    if len(a) != len(b):
        return None
    by_hash: Dict[int, list] = {}
    for y in b:
        by_hash.setdefault(_item_hash(y), []).append(y)
    pairs = []
    for x in a:
        candidates = by_hash.get(_item_hash(x))
        if not candidates:
            return None
        if len(candidates) == 1:
            pairs.append((x, candidates.pop()))
            continue
        match = next((i for i, y in enumerate(candidates) if y == x), None)
        if match is None:
            match = next((i for i, y in enumerate(candidates) if same(x, y)), None)
            if match is None:
                return None
        pairs.append((x, candidates.pop(match)))
    return pairs


def _item_hash(x: Any) -> int:
    """hash(x), with every NaN hashing alike, also inside tuples and frozensets (walked without recursion)."""
    h = _leaf_hash(x)
    if h is not None:
        return h
    stack = [(x, iter(x), [])]
    while True:
        node, items, hashes = stack[-1]
        for item in items:
            h = _leaf_hash(item)
            if h is None:
                stack.append((item, iter(item), []))
                break
            hashes.append(h)
        else:
            stack.pop()
            h = hash(tuple(hashes)) if type(node) is tuple else hash(frozenset(hashes))
            if not stack:
                return h
            stack[-1][2].append(h)


def _leaf_hash(x: Any) -> Optional[int]:
    """hash(x) of anything but a tuple or frozenset (None), the same for every NaN."""
    t = type(x)
    if t is tuple or t is frozenset:
        return None
    if (t is float and x != x) or (t is decimal.Decimal and x.is_nan()):
        return 0x7FF8
    return hash(x)


def _is_utc(tz: Any) -> bool:
    """datetime.timezone.utc, pytz.utc, or pytz.utc's stand-in where pytz is not installed."""
    if tz is datetime.timezone.utc:
        return True
    if type(tz).__module__.startswith("pytz") and type(tz).__name__ == "UTC":
        return True
    inner = getattr(tz, "inner", None) if type(tz) is _TzStandIn else None
    return type(inner).__qualname__ == "pytz._UTC" and not inner._args and inner._state is None


def _same_tzinfo(a: Any, b: Any) -> bool:
    # pytz.utc and datetime.timezone.utc are both written "+00:00", as the
    # Rust codec writes them (docs/format.md, "Differences from the Rust
    # codec", last paragraph): the same value for this comparison.
    if _is_utc(a) and _is_utc(b):
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, datetime.timezone):
        # timezone equality ignores the name; a renamed zone is a changed value.
        return a == b and a.tzname(None) == b.tzname(None)
    return same(a, b)
