"""Hand-made records of every shape the Rust codec's releases changed, for scripts/rust_vectors.py.

Each shape is a ZODB record (class pickle + state pickle from one pickler,
sharing the memo, as ZODB writes them) holding one construct that the Rust
codec 1.7.0 writes differently from 1.6.1, or reads differently: instances
made by ``REDUCE(cls, ())`` then ``BUILD`` (``"@newobj": false``),
``NEWOBJ`` with arguments and no ``BUILD``, ``NEWOBJ_EX`` (the
``copyreg.__newobj_ex__`` form), ``BUILD`` after a call of something that
is not a global (the old ``@inst``), ``BUILD`` on a plain value, dict and
list subclasses, ``POP_MARK`` and recursive tuples, protocol 0 ``STRING``
and ``UNICODE`` escapes, bare-oid, weak and cross-database references, keys
that look like escaped keys, and the usual values beside them.

The records name the classes below by this module's name (``rustshapes``);
nothing imports them when the records are read (the tests compare objects
with stand-ins, ``zodb_json_codec._db.fidelity``).  The records themselves
are stored in the vector files, so a change here changes nothing the tests
read until the vectors are made again.
"""

from __future__ import annotations

import collections
import copyreg
import datetime
import decimal
import functools
import io
import pickle
import uuid
from typing import Any, Iterator, List, Tuple


class Counted:
    """``__reduce__`` returns ``(cls, (), state)``: unpickling calls ``cls()``."""

    def __init__(self) -> None:
        self.x = 0

    def __reduce__(self) -> Any:
        return (Counted, (), {"x": self.x})


class Plain:
    """The default reduce: NEWOBJ then BUILD."""


class ODSub(collections.OrderedDict):
    """``OrderedDict.__reduce__``: REDUCE, SETITEMS, then BUILD when it has a ``__dict__``."""


class LSub(list):
    """A list subclass with attributes: NEWOBJ, APPENDS, BUILD."""


class DSub(dict):
    """A dict subclass with attributes: NEWOBJ, SETITEMS, BUILD."""


class Both(list):
    """``__reduce__`` with state, list items and dict items: all five instance keys."""

    def __setitem__(self, key: Any, value: Any) -> None:
        self.extra[key] = value  # type: ignore[attr-defined]

    def __reduce__(self) -> Any:
        return (Both, (), {"tag": self.tag}, iter(list(self)), iter(self.extra.items()))  # type: ignore[attr-defined]


class WithArgs:
    """``__getnewargs__``: NEWOBJ with arguments, then BUILD."""

    def __new__(cls, *args: Any) -> "WithArgs":
        self = object.__new__(cls)
        self.args = args
        return self

    def __getnewargs__(self) -> tuple:
        return self.args


class NoState:
    """NEWOBJ with arguments and no state (an empty ``__dict__``, no slots): no BUILD."""

    __slots__ = ("_v",)

    def __new__(cls, v: Any) -> "NoState":
        self = object.__new__(cls)
        return self

    def __getnewargs__(self) -> tuple:
        return (1, "two")

    def __getstate__(self) -> Any:
        return None


class ReducedWithArgs:
    """``__reduce__`` returns ``(cls, args, state)``: REDUCE with arguments, then BUILD."""

    def __init__(self, a: Any = None, b: Any = None) -> None:
        self.a, self.b = a, b

    def __reduce__(self) -> Any:
        return (ReducedWithArgs, (self.a, self.b), {"c": 3})


class KwNew:
    """``__getnewargs_ex__`` with keyword arguments: protocol 4 writes NEWOBJ_EX."""

    def __new__(cls, a: Any, *, k: Any = None) -> "KwNew":
        self = object.__new__(cls)
        self.a, self.k = a, k
        return self

    def __getnewargs_ex__(self) -> tuple:
        return ((self.a,), {"k": self.k})

    def __getstate__(self) -> Any:
        return None


class KwNewWithState(KwNew):
    def __getstate__(self) -> Any:
        return {"extra": self.extra}  # type: ignore[attr-defined]


class EmptyBoth:
    """NEWOBJ_EX with empty arguments and keywords (only a ``__reduce_ex__`` writes it)."""

    def __reduce_ex__(self, protocol: Any) -> Any:
        return (copyreg.__newobj_ex__, (EmptyBoth, (), {}), {"tag": "t"})  # type: ignore[attr-defined]


class KwOnly:
    def __reduce_ex__(self, protocol: Any) -> Any:
        return (copyreg.__newobj_ex__, (KwOnly, (), {"k": 9}))  # type: ignore[attr-defined]


def make(n: Any) -> Any:
    return ReducedWithArgs(n)


class ViaPartial:
    """``__reduce__`` returns a callable that is not a global: a ``functools.partial``."""

    def __reduce__(self) -> Any:
        return (functools.partial(make, 1), (), {"extra": 2})


def _record(state: Any, protocol: int = 3, klass: Any = ("persistent.mapping", "PersistentMapping")) -> bytes:
    """A ZODB record: the class pickle and the state pickle from one pickler."""
    buf = io.BytesIO()
    pickler = pickle.Pickler(buf, protocol=protocol)
    pickler.dump(klass)
    pickler.dump(state)
    return buf.getvalue()


def _raw(state_pickle: bytes) -> bytes:
    """A record whose state pickle is given as bytes (shapes no pickler writes)."""
    return pickle.dumps(("persistent.mapping", "PersistentMapping"), 3) + state_pickle


def _objects() -> Iterator[Tuple[str, Any]]:
    """(name, value) of each object the records hold as state ``{"data": {"v": value}}``."""
    c = Counted()
    c.x = 7
    yield "reduce_empty_args_build", c
    p = Plain()
    p.x = 1
    yield "newobj_build", p
    od = ODSub([("z", 1), ("a", 2)])
    od.attr = "kept"
    yield "ordereddict_subclass_with_dict", od
    yield "ordereddict_subclass_plain", ODSub([("k", [1, 2])])
    yield "ordereddict", collections.OrderedDict([("b", 1), ("a", 2)])
    dd = collections.defaultdict(list)
    dd["x"].append(1)
    yield "defaultdict", dd
    yield "deque", collections.deque([1, "two", 3.0])
    lsub = LSub([1, 2, 3])
    lsub.tag = "l"
    yield "list_subclass_with_dict", lsub
    dsub = DSub(a=1)
    dsub.tag = "d"
    yield "dict_subclass_with_dict", dsub
    both = Both([4, 5])
    both.extra = {"k": "v"}
    both.tag = "both"
    yield "reduce_five_keys", both
    w = WithArgs(1, "a")
    w.more = True
    yield "newobj_args_build", w
    yield "newobj_args_no_build", NoState(0)
    yield "reduce_args_build", ReducedWithArgs("x", [1])
    yield "partial_build", ViaPartial()
    yield "set_frozenset", [{1, 2}, frozenset(["a"])]
    yield "known_types", [datetime.datetime(2024, 5, 1, 12, 30, tzinfo=datetime.timezone.utc),
                          datetime.date(2024, 2, 29), datetime.timedelta(1, 2, 3),
                          decimal.Decimal("9.90"), uuid.UUID(int=12345)]
    yield "nul_texts", {"a\x00b": "c\x00d", "@ns:plain": "x", "@ns:AA==": 1, "@su:x": 2}
    yield "marker_lookalikes", [{"@t": [1]}, {"@cls": ["a", "b"]}, {"@newobj": False},
                                {"@cls": ["a", "b"], "@s": {}, "@newobj": False},
                                {"@reduce": {"callable": 1, "args": 2}}]
    rec: list = [1]
    rec.append(rec)
    yield "self_containing_list", rec


def _objects_ex() -> Iterator[Tuple[str, Any]]:
    """Objects that only protocol 4 pickles with NEWOBJ_EX."""
    yield "newobj_ex", KwNew(1, k="v")
    yield "newobj_ex_empty_kwargs", KwNew((), k=None)
    s = KwNewWithState(7, k="kw")
    s.extra = "state"
    yield "newobj_ex_state", s
    yield "newobj_ex_empty_both", EmptyBoth()
    yield "newobj_ex_kwonly", KwOnly()


def _recursive_tuples() -> Iterator[Tuple[str, Any]]:
    """Tuples that contain themselves (through a list): picklers write POP_MARK or POPs for them."""
    for n in (1, 2, 3, 4, 5):
        inner: list = []
        t = tuple([inner] + list(range(n - 1)))
        inner.append(t)
        yield f"recursive_tuple_{n}", t


# Hand-written state pickles: shapes from old picklers and hand-made pickles.
_HANDMADE = {
    # protocol 0 STRING with escapes (a Python 2 str), UNICODE with \u escapes and Latin-1
    "p0_string_escapes": b"(dp0\nS'data'\np1\n(dp2\nS'v'\np3\nS'a\\'b\\\\c\\x00\\n\\xff'\np4\nss.",
    "p0_unicode_escapes": b"(dp0\nS'data'\np1\n(dp2\nS'v'\np3\nV\\u00e9t\\u00e9 caf\xe9 \\u20ac\np4\nss.",
    "p0_unicode_ns_key": b"(dp0\nVdata\np1\n(dp2\nV\\u0040ns:AA==\np3\nI1\nss.",
    # BUILD on a plain dict (an anonymous instance of the old @inst)
    "build_on_dict": b"\x80\x03}q\x00(X\x04\x00\x00\x00dataq\x01}q\x02}q\x03b.",
    # INST and OBJ (protocols 0 and 1)
    "p0_inst": b"(dp0\nS'data'\np1\n(imyapp\nThing\np2\n(dp3\nS'x'\np4\nI1\nsbs.",
    "p1_obj": b"}q\x00(U\x04dataq\x01(cmyapp\nThing\nq\x02o}q\x03U\x01xK\x01sbu.",
    # DUP and POP
    "dup_pop": b"\x80\x03}q\x00X\x04\x00\x00\x00dataq\x01]q\x022K\x0100s.",
}


def shapes() -> List[Tuple[str, bytes]]:
    """(name, record) of every shape, in a fixed order."""
    out: List[Tuple[str, bytes]] = []
    for name, value in _objects():
        for protocol in (2, 3):
            out.append((f"{name}_p{protocol}", _record({"data": {"v": value}}, protocol)))
    for name, value in _objects_ex():
        out.append((name, _record({"data": {"v": value}}, 4)))
        out.append((f"{name}_toplevel", _record(value, 4, klass=type(value))))
    for name, value in _recursive_tuples():
        for protocol in (0, 1, 2, 3):
            out.append((f"{name}_p{protocol}", _record({"data": value}, protocol)))
    out.extend(_references_pickled())
    for name, state in _HANDMADE.items():
        out.append((name, _raw(state)))
    out.append(("reduce_empty_args_build_as_record", _record(_state_of(Counted()), 3, klass=Counted)))
    return out


def _state_of(obj: Any) -> Any:
    return obj.__reduce__()[2]


def _references_pickled() -> Iterator[Tuple[str, bytes]]:
    """The reference forms, each twice in a state (the second a memo GET of the first's pid)."""
    oid = b"\x00\x00\x00\x00\x00\x00\x00\x05"
    folder = b"cmyapp\nFolder\n"
    pids = {
        "ref_oid_class": b"C\x08" + oid + folder + b"\x86",
        "ref_oid_none": b"C\x08" + oid + b"N\x86",
        "ref_bare_oid": b"C\x08" + oid,
        "ref_weak": b"](X\x01\x00\x00\x00wC\x08" + oid + b"\x85e",
        "ref_weak_db": b"](X\x01\x00\x00\x00wC\x08" + oid + b"X\x05\x00\x00\x00other\x86e",
        "ref_cross_m": b"](X\x01\x00\x00\x00mX\x05\x00\x00\x00otherC\x08" + oid + folder + b"\x87e",
        "ref_cross_n": b"](X\x01\x00\x00\x00nX\x05\x00\x00\x00otherC\x08" + oid + b"\x86e",
    }
    for name, pid in pids.items():
        state = (b"\x80\x03}q\x00X\x04\x00\x00\x00dataq\x01}q\x02(X\x01\x00\x00\x00vq\x03"
                 + pid + b"QX\x01\x00\x00\x00wq\x04" + pid + b"Qus.")
        yield name, _raw(state)
