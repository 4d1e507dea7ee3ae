"""Reference encoder (normative; ``_encode_cython.pyx`` is its Cython twin): marker values -> pickle bytes.

One walk over the value tree writing opcodes into a list of byte strings,
with an explicit stack of frames rather than recursion, so that values as
deep as the format allows need no more of Python's stack than shallow ones.
Markers are recognised by ``_common.marker_kind`` (the decoder escapes any
user dict it would misread), known types become calls described by
``_known``.  Output is protocol 3 (what ZODB writes), without memo opcodes.
"""

from __future__ import annotations

import struct
from typing import Any, Callable, Iterator, List, Optional

from . import _encode_known, _globals, _known
from ._common import MAX_DEPTH, CodecError, b64decode, decimal_to_int, float_from_marker
from ._globals import CALL, CLASS, VALUE, GlobalRefused, GlobalsPolicy, policy_argument
from ._known import MAX_MARKER_KEYS, btree_kind, marker_kind, unescape_key
from ._jsonread import read_json, read_json_argument

_PROTO3 = b"\x80\x03"
_pack_I = struct.Struct("<I").pack
_pack_i = struct.Struct("<i").pack
_pack_H = struct.Struct("<H").pack
_pack_d = struct.Struct(">d").pack

_EMPTY_TUPLE, _TUPLE1, _TUPLE2, _TUPLE3 = b")", b"\x85", b"\x86", b"\x87"
_MARK, _TUPLE, _APPENDS, _SETITEMS = b"(", b"t", b"e", b"u"
_REDUCE, _NEWOBJ, _BUILD, _BINPERSID = b"R", b"\x81", b"b", b"Q"
_SMALL_INTS = [b"K" + bytes((i,)) for i in range(256)]

# Python 2 pickles build these by REDUCE; the Rust codec wrote them as instances.
_FUNCTIONS_NOT_CLASSES = {("copy_reg", "_reconstructor"), ("copyreg", "_reconstructor")}


def _is_scalar_marker(d: dict) -> bool:
    """``{"@b": "..."}``, ``{"@f": "nan"}``...: one value, not a level of nesting."""
    if len(d) != 1:
        return False
    for k, v in d.items():
        return type(v) is str and type(k) is str and k[:1] == "@"
    return False


# The Cython twin raises the same text (imported from here).
CLASS_NOT_UTF8 = "invalid pickle data: class module or name is not UTF-8 text (a lone surrogate)"


def str_too_long() -> CodecError:
    return CodecError("invalid pickle data: a string of 4 GiB or more of UTF-8 (protocol 3 cannot hold it)")


def _depth_error() -> CodecError:
    return CodecError("invalid pickle data: maximum nesting depth exceeded")


# ---------------------------------------------------------------------------
# Cold rules, called by both twins: argument checks and the rare markers' text
# ---------------------------------------------------------------------------

_REDUCE_KEYS = ("callable", "args", "items", "appends", "newobj", "state")
_NEWOBJ_KEYS = ("callable", "args", "kwargs", "state", "items", "appends")  # this codec's before 1.7.0's form


def check_arg(value: Any, what: str, want: type) -> None:
    """The TypeError of a public function's argument of the wrong type."""
    if not isinstance(value, want):
        raise TypeError(f"argument '{what}': expected {want.__name__}, not {type(value).__name__}")


def record_parts(obj: Any) -> tuple:
    """(module, name, state) of the argument of ``encode_zodb_record``, or the error its shape calls for."""
    check_arg(obj, "obj", dict)
    if "@cls" not in obj:
        raise CodecError("invalid pickle data: missing @cls in ZODB record")
    cls = obj["@cls"]
    if not isinstance(cls, list):
        raise CodecError("invalid pickle data: @cls must be a list")
    if len(cls) != 2:
        raise CodecError("invalid pickle data: @cls must be [module, name]")
    module, name = cls
    if not isinstance(module, str):
        raise CodecError("invalid pickle data: @cls[0] must be a string")
    if not isinstance(name, str):
        raise CodecError("invalid pickle data: @cls[1] must be a string")
    return module, name, obj.get("@s")


def _flag(value: Any, what: str) -> bool:
    if type(value) is not bool:
        raise CodecError(f"invalid pickle data: {what} must be true or false, not {type(value).__name__}")
    return value


def _keyword_call(args: Any) -> Optional[tuple]:
    """(args, kwargs) of the Rust codec's NEWOBJ_EX arguments before 1.7.0, ``{"@args": ..., "@kwargs": ...}``."""
    if type(args) is dict and len(args) == 2 and "@args" in args and "@kwargs" in args:
        return args["@args"], args["@kwargs"]
    return None


def reduce_parts(d: dict) -> tuple:
    """(inner, newobj, args, kwargs) of a ``@reduce`` or ``@newobj`` marker, its keys checked.

    ``kwargs`` is not None for ``cls.__new__(cls, *args, **kwargs)`` (NEWOBJ_EX) in the forms written before
    the Rust codec 1.7.0, which are read back as its ``copyreg.__newobj_ex__`` call (docs/format.md,
    "Markers").
    """
    inner = d["@reduce"] if "@reduce" in d else d["@newobj"]
    newobj = "@newobj" in d
    allowed = _NEWOBJ_KEYS if newobj else _REDUCE_KEYS
    for key in inner:
        if key not in allowed:
            raise CodecError(f"invalid pickle data: unexpected key {key!r} in {'@newobj' if newobj else '@reduce'}")
    if "callable" not in inner or "args" not in inner:
        raise CodecError("invalid pickle data: @reduce needs callable and args")
    if "newobj" in inner:
        newobj = _flag(inner["newobj"], "newobj in @reduce")
    args = inner["args"]
    kwargs = inner.get("kwargs")
    keyword_call = _keyword_call(args) if kwargs is None else None
    if keyword_call is not None:
        args, kwargs = keyword_call
    return inner, newobj, args, kwargs


def instance_parts(d: dict) -> tuple:
    """(state, args, kwargs, newobj) of an instance ``{"@cls": ..., "@s": ...}``, its keys checked.

    ``args`` (None: no arguments) and ``kwargs`` come from the ``@args``/``@state`` wrapper of the state,
    ``kwargs`` from the Rust codec's NEWOBJ_EX form before 1.7.0 (``@args`` holding ``@args`` and
    ``@kwargs``); ``newobj`` is False for ``"@newobj": false`` (REDUCE of the class without arguments).
    """
    if "@s" not in d:
        raise CodecError("invalid pickle data: @items/@appends/@newobj require an instance state (@s)")
    state = d["@s"]
    newobj = _flag(d["@newobj"], "@newobj") if "@newobj" in d else True
    args = kwargs = None
    if type(state) is dict and len(state) == 2 and "@args" in state and "@state" in state:
        args, state = state["@args"], state["@state"]
        keyword_call = _keyword_call(args)
        if keyword_call is not None:
            args, kwargs = keyword_call
    if kwargs is not None and not newobj:
        raise CodecError("invalid pickle data: @newobj false with keyword arguments")
    return state, args, kwargs, newobj


def generic_ref_classes(policy: GlobalsPolicy, pid: Any, expand_refs: bool) -> List[dict]:
    """A reference id the compact forms do not take (one call from either twin): where references are
    expanded, an oid and something else than a class path is a malformed ``[oid, class]``, as the Rust codec
    1.7.0 refuses it (the decoder writes no such id); then the classes in it, checked and returned
    (_globals.check_reference_classes)."""
    if expand_refs and type(pid) is list and len(pid) == 2 and type(pid[0]) is str and _known.is_oid_hex(pid[0]):
        raise CodecError("invalid pickle data: malformed compact @ref: [oid, class] needs a class path string")
    return _globals.check_reference_classes(policy, pid)


def ns_text(value: str) -> str:
    """The text of an ``@ns`` marker (base64 of UTF-8 holding U+0000)."""
    try:
        return b64decode(value, "@ns").decode("utf-8")
    except UnicodeDecodeError:
        raise CodecError("invalid pickle data: @ns is not UTF-8") from None


def su_text(value: str) -> str:
    """The text of an ``@su`` marker (base64 of UTF-8 with lone surrogates)."""
    try:
        return b64decode(value, "@su").decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        raise CodecError("invalid pickle data: @su is not UTF-8") from None


# Frames of the walk: (iterator, mode, depth, closing opcodes).  A VALUES
# frame gives values at `depth`, a PAIRS frame a plain dict's (key, value)
# items at `depth`, a STEPS frame (a marker's generator) gives (value, depth)
# to walk, or (_FRAME, frame) to walk a whole frame (a tuple's items).  The
# closing opcodes are written when the iterator is exhausted.  Generators
# write their own opcodes between steps: the walk finishes each step before
# it asks for the next, so everything is written in the order of a
# recursive walk, and the first error found is the one a recursive walk
# would find.
_VALUES, _PAIRS, _STEPS = 0, 1, 2
_FRAME = object()
_NO_OPS = b""
_TUPLE_CLOSE = (_EMPTY_TUPLE, _TUPLE1, _TUPLE2, _TUPLE3)
_SET_CLOSE = _TUPLE1 + _REDUCE


class _Writer:
    """Writes one pickle body; ``expand_refs`` reads the compact @ref forms of decode_zodb_record.

    ``policy`` decides the globals the value names (``_globals``); ``checked`` holds the ids of the
    ``@cls`` markers a marker writer has checked in their role already (a class given to a
    reconstructor), which are then written without being checked again as values."""

    __slots__ = ("parts", "expand_refs", "policy", "checked")

    def __init__(self, expand_refs: bool, policy: GlobalsPolicy) -> None:
        self.parts: List[bytes] = []
        self.expand_refs = expand_refs
        self.policy = policy
        self.checked: Optional[dict] = None

    def mark_checked(self, markers: List[dict]) -> None:
        """Markers checked in their role: held here, so that no other dict takes one's id meanwhile."""
        if markers:
            if self.checked is None:
                self.checked = {}
            self.checked.update((id(m), m) for m in markers)

    # -- scalars ---------------------------------------------------------------

    def write_int(self, v: int) -> None:
        ap = self.parts.append
        if 0 <= v < 256:
            ap(_SMALL_INTS[v])
        elif 0 <= v < 65536:
            ap(b"M" + _pack_H(v))
        elif -2147483648 <= v <= 2147483647:
            ap(b"J" + _pack_i(v))
        else:
            nbytes = (v.bit_length() >> 3) + 1
            raw = v.to_bytes(nbytes, "little", signed=True)
            if v < 0 and nbytes > 1 and raw[-1] == 0xFF and raw[-2] & 0x80:
                raw = raw[:-1]
            if len(raw) < 256:
                ap(b"\x8a" + bytes((len(raw),)) + raw)
            else:
                ap(b"\x8b" + _pack_i(len(raw)) + raw)

    def write_str(self, s: str) -> None:
        raw = s.encode("utf-8", "surrogatepass")
        self.parts.append(b"X" + _pack_I(len(raw)))
        self.parts.append(raw)

    def write_bytes(self, raw: bytes) -> None:
        n = len(raw)
        if n < 256:
            self.parts.append(b"C" + bytes((n,)))
        elif n < 1 << 32:
            self.parts.append(b"B" + _pack_I(n))
        else:
            self.parts.append(b"\x8e" + n.to_bytes(8, "little"))
        self.parts.append(raw)

    def write_global(self, module: Any, name: Any) -> None:
        if type(module) is not str or type(name) is not str:
            raise CodecError("invalid pickle data: @cls must be [module, name] strings")
        if "\n" in module or "\n" in name:
            raise CodecError("invalid pickle data: class module or name contains a newline")
        try:  # strict: a lone surrogate is no UTF-8 that a GLOBAL line can be read back as
            line = b"c" + module.encode("utf-8") + b"\n" + name.encode("utf-8") + b"\n"
        except UnicodeEncodeError:
            raise CodecError(CLASS_NOT_UTF8) from None
        self.parts.append(line)

    # -- the walk ----------------------------------------------------------------

    def value(self, v: Any, depth: int) -> None:
        """Write v, a value at depth."""
        if v is None:
            self.parts.append(b"N")
        else:
            self.walk(iter((v,)), _VALUES, depth, _NO_OPS)

    def walk(self, it: Iterator, mode: int, depth: int, close: bytes) -> None:
        """Write everything a frame gives, with an explicit stack of the frames under way.

        Strings, ints, plain dicts and lists, the commonest values, are
        written here (a call each would cost 5-8% on small records); the
        writer of each other type (``_WRITERS``, else ``native``) returns
        the frame of what the value holds, or None.
        """
        ap = self.parts.append
        pack_I = _pack_I
        small_ints = _SMALL_INTS
        stack: list = []
        push = stack.append
        while True:
            for v in it:
                if mode:
                    if mode == _PAIRS:
                        k, v = v
                        if type(k) is str:
                            if k[:1] == "@":
                                original = unescape_key(k)
                                if original is not None:
                                    k = original
                            raw = k.encode("utf-8", "surrogatepass")
                            ap(b"X" + pack_I(len(raw)))
                            ap(raw)
                        else:  # a key of another type is a value like any other
                            push((it, mode, depth, close))
                            it = iter(((k, depth), (v, depth)))
                            mode = _STEPS
                            close = _NO_OPS
                            break
                    else:
                        v, depth = v
                        if v is _FRAME:
                            push((it, mode, 0, close))
                            it, mode, depth, close = depth
                            break
                t = type(v)
                if t is str:
                    raw = v.encode("utf-8", "surrogatepass")
                    ap(b"X" + pack_I(len(raw)))
                    ap(raw)
                elif t is int:
                    if 0 <= v < 256:
                        ap(small_ints[v])
                    else:
                        self.write_int(v)
                elif t is dict:
                    if depth > MAX_DEPTH and not _is_scalar_marker(v):
                        raise _depth_error()
                    kind = marker_kind(v) if len(v) <= MAX_MARKER_KEYS else None
                    if kind is None or kind == "wrapper":
                        ap(b"}")
                        if v:
                            ap(_MARK)
                            push((it, mode, depth, close))
                            it = iter(v.items())
                            mode = _PAIRS
                            depth += 1
                            close = _SETITEMS
                            break
                    else:
                        inner = _MARKERS[kind](self, v, depth)
                        if inner is not None:
                            push((it, mode, depth, close))
                            it, mode, depth, close = inner
                            break
                elif t is list:
                    if depth > MAX_DEPTH:
                        raise _depth_error()
                    ap(b"]")
                    if v:
                        ap(_MARK)
                        push((it, mode, depth, close))
                        it = iter(v)
                        mode = _VALUES
                        depth += 1
                        close = _APPENDS
                        break
                elif t is float:
                    ap(b"G" + _pack_d(v))
                elif v is None:
                    ap(b"N")
                elif t is bool:
                    ap(b"\x88" if v else b"\x89")
                else:
                    inner = _WRITERS.get(t, _native)(self, v, depth)
                    if inner is not None:
                        push((it, mode, depth, close))
                        it, mode, depth, close = inner
                        break
            else:
                if close:
                    ap(close)
                if not stack:
                    return
                it, mode, depth, close = stack.pop()

    # -- writers by type: each writes v at depth, returns the frame still to walk or None

    def tuple_value(self, v: tuple, depth: int) -> Optional[tuple]:
        if depth > MAX_DEPTH:
            raise _depth_error()
        return self.open_tuple(v, depth)

    def bytes_value(self, v: bytes, depth: int) -> None:
        self.write_bytes(v)

    def open_tuple(self, items: Any, depth: int) -> Optional[tuple]:
        """A tuple of items at depth: its opening written, the frame of its items returned (None if empty)."""
        n = len(items)
        if n == 0:
            self.parts.append(_EMPTY_TUPLE)
            return None
        if n > 3:
            self.parts.append(_MARK)
            return iter(items), _VALUES, depth + 1, _TUPLE
        return iter(items), _VALUES, depth + 1, _TUPLE_CLOSE[n]

    # -- markers -----------------------------------------------------------------

    def call(self, call: Any) -> None:
        """A ``_encode_known.Call``: callable, arguments tuple, REDUCE.

        Calls stand for one value (a datetime, a decimal): their own few
        levels of callables and zones are not nesting, and their arguments
        are calls and scalars, written here.
        """
        callable_ = call.callable
        if type(callable_) is _encode_known.Global:
            self.write_global(callable_.module, callable_.name)
        else:
            self.call(callable_)
        args = call.args
        ap = self.parts.append
        n = len(args)
        if n > 3:
            ap(_MARK)
        for a in args:
            t = type(a)
            if t is str:
                self.write_str(a)
            elif t is bytes:
                self.write_bytes(a)
            elif t is int:
                self.write_int(a)
            elif t is _encode_known.Global:
                self.write_global(a.module, a.name)
            else:
                self.call(a)
        ap(_TUPLE_CLOSE[n] if n <= 3 else _TUPLE)
        ap(_REDUCE)

    def ref(self, d: dict, depth: int) -> Optional[tuple]:
        v = d["@ref"]
        if self.expand_refs:
            if type(v) is str and _known.is_hex(v):
                self.write_bytes(bytes.fromhex(v))
                self.parts.append(b"N" + _TUPLE2 + _BINPERSID)
                return None
            if type(v) is list and len(v) == 2 and type(v[0]) is str and type(v[1]) is str:
                if not _known.is_hex(v[0]):
                    raise CodecError(f"JSON error: hex decode: invalid oid {v[0][:40]!r}")
                self.write_bytes(bytes.fromhex(v[0]))
                module, _, name = v[1].rpartition(".")
                self.policy.check(CLASS, module, name, "the class of a reference")
                self.write_global(module, name)
                self.parts.append(_TUPLE2 + _BINPERSID)
                return None
        self.mark_checked(generic_ref_classes(self.policy, v, self.expand_refs))
        return iter((v,)), _VALUES, depth + 1, _BINPERSID  # the id is one level below the @ref marker

    def instance(self, d: dict, depth: int) -> tuple:
        return self.instance_steps(d, depth), _STEPS, depth, _NO_OPS

    def instance_steps(self, d: dict, depth: int) -> Iterator:
        module, name = d["@cls"]
        state, args, kwargs, newobj = instance_parts(d)
        ap = self.parts.append
        if kwargs is not None:
            self.policy.check(CLASS, module, name, "the class of an instance")
            cls = {"@cls": [module, name]}
            self.mark_checked([cls])
            yield from self.newobj_ex_steps(cls, args, kwargs, depth)
        else:
            reduced = not newobj or (module, name) in _FUNCTIONS_NOT_CLASSES
            self.mark_checked(_globals.check_instance_class(self.policy, module, name, args, reduced))
            self.write_global(module, name)
            if args is None:
                ap(_EMPTY_TUPLE)
            else:
                yield args, depth + 1
            ap(_NEWOBJ if newobj and (module, name) not in _FUNCTIONS_NOT_CLASSES else _REDUCE)
        yield from self.contents_steps(d.get("@appends"), d.get("@items"), depth)
        kind = btree_kind(module, name)
        if kind is not None:
            yield from self.btree_steps(state, kind[0], depth + 1)
        else:
            yield state, depth + 1
        ap(_BUILD)

    def newobj_ex_steps(self, cls: Any, args: Any, kwargs: Any, depth: int) -> Iterator:
        """``copyreg.__newobj_ex__(cls, args, kwargs)``: NEWOBJ_EX as protocol 3 writes it."""
        self.write_global("copyreg", "__newobj_ex__")
        yield cls, depth + 1
        yield args, depth + 1
        yield kwargs, depth + 1
        self.parts.append(_TUPLE3 + _REDUCE)

    def contents_steps(self, appends: Any, items: Any, depth: int) -> Iterator:
        """List and dict subclass contents, written before the state as CPython does."""
        if appends:
            if type(appends) is not list:
                raise CodecError("invalid pickle data: appends must be a list")
            self.parts.append(_MARK)
            yield _FRAME, (iter(appends), _VALUES, depth + 1, _APPENDS)
        if items:
            yield from self.pairs_steps(items, depth, "items")

    def pairs_steps(self, pairs: Any, depth: int, what: str) -> Iterator:
        """MARK key value ... SETITEMS from a list of [key, value] pairs."""
        if type(pairs) is not list:
            raise CodecError(f"invalid pickle data: {what} must be a list of [key, value] pairs")
        ap = self.parts.append
        ap(_MARK)
        depth += 1
        for pair in pairs:
            if type(pair) is not list or len(pair) != 2:
                raise CodecError(f"invalid pickle data: {what} must be a list of [key, value] pairs")
            key, value = pair  # both taken now, as the Cython twin takes them: writing the key may run code
            yield key, depth
            yield value, depth
        ap(_SETITEMS)

    def reduce(self, d: dict, depth: int) -> tuple:
        return self.reduce_steps(d, depth), _STEPS, depth, _NO_OPS

    def reduce_steps(self, d: dict, depth: int) -> Iterator:
        inner, newobj, args, kwargs = reduce_parts(d)
        if self.checked is None or id(d) not in self.checked:  # else the callable of a call, checked with it
            self.mark_checked(_globals.check_callable(self.policy, inner["callable"], args,
                                                      CLASS if newobj or kwargs is not None else CALL,
                                                      "the callable of a @reduce"))
        if kwargs is not None:
            yield from self.newobj_ex_steps(inner["callable"], args, kwargs, depth)
        else:
            yield inner["callable"], depth + 1
            yield args, depth + 1
            self.parts.append(_NEWOBJ if newobj else _REDUCE)
        yield from self.contents_steps(inner.get("appends"), inner.get("items"), depth)
        if "state" in inner:
            yield inner["state"], depth + 1
            self.parts.append(_BUILD)

    def inst(self, d: dict, depth: int) -> tuple:
        return self.inst_steps(d, depth), _STEPS, depth, _NO_OPS

    def inst_steps(self, d: dict, depth: int) -> Iterator:
        inner = d["@inst"]
        keys = set(inner) if type(inner) is dict else None
        if keys == {"@obj", "@state"}:
            _globals.check_build_target(self.policy, inner["@obj"], "the object of an @inst")
            yield inner["@obj"], depth + 1
        elif keys == {"@callable", "@args", "@state"}:
            self.mark_checked(_globals.check_callable(self.policy, inner["@callable"], inner["@args"], CALL,
                                                      "the @callable of an @inst"))
            yield inner["@callable"], depth + 1
            yield inner["@args"], depth + 1
            self.parts.append(_REDUCE)
        else:
            raise CodecError("invalid pickle data: @inst needs @obj/@state or @callable/@args/@state")
        yield inner["@state"], depth + 1
        self.parts.append(_BUILD)

    def btree_steps(self, state: Any, is_tree: bool, depth: int) -> Iterator:
        kind = marker_kind(state, btree=True) if type(state) is dict else None
        ap = self.parts.append
        if kind == "@kv" or kind == "@ks":
            if kind == "@kv":
                flat: list = []
                for pair in state["@kv"]:
                    if type(pair) is not list or len(pair) != 2:
                        raise CodecError("invalid pickle data: @kv pair must be [k, v]")
                    flat.extend(pair)
            else:
                flat = state["@ks"]
            items = self.open_tuple(flat, depth)
            if items is not None:
                yield _FRAME, items
            if is_tree:
                if "@next" in state:
                    raise CodecError("invalid pickle data: @next in the state of a BTree")
                ap(_TUPLE1 * 3)
            elif "@next" in state:
                yield state["@next"], depth + 1
                ap(_TUPLE2)
            else:
                ap(_TUPLE1)
        elif kind == "@children":
            if not is_tree:
                raise CodecError("invalid pickle data: @children in the state of a bucket")
            children = self.open_tuple(state["@children"], depth)
            if children is not None:
                yield _FRAME, children
            yield state["@first"], depth + 1
            ap(_TUPLE2)
        else:
            yield state, depth

    # -- native Python values (docs/format.md, "Differences from the Rust codec": Encoders)

    def native(self, v: Any, depth: int) -> Optional[tuple]:
        """Write a value of another type than the JSON ones; the frame of what is still to walk, or None."""
        t = type(v)
        if depth > MAX_DEPTH and isinstance(v, (tuple, list, dict, set, frozenset)):
            raise _depth_error()
        if isinstance(v, str):
            self.write_str(str(v))
        elif isinstance(v, bool):
            self.parts.append(b"\x88" if v else b"\x89")
        elif isinstance(v, int):
            self.write_int(int(v))
        elif isinstance(v, float):
            self.parts.append(b"G" + _pack_d(float(v)))
        elif isinstance(v, dict):
            return iter((dict(v),)), _VALUES, depth, _NO_OPS  # as a dict (no deeper: checked above)
        elif isinstance(v, list):
            return iter((list(v),)), _VALUES, depth, _NO_OPS
        elif isinstance(v, tuple):
            return self.open_tuple(tuple(v), depth)
        elif isinstance(v, (bytes, memoryview)):
            self.write_bytes(bytes(v))
        elif t is bytearray:
            self.write_global("builtins", "bytearray")
            self.write_bytes(bytes(v))
            self.parts.append(_TUPLE1 + _REDUCE)
        elif t is set or t is frozenset:
            # builtins.set([items]), as the @set marker: the list at the set's level, its items one below.
            self.write_global("builtins", "set" if t is set else "frozenset")
            return iter((list(v),)), _VALUES, depth, _SET_CLOSE
        else:
            known = _encode_known.native_call(v)
            if known is None:
                raise TypeError(f"cannot encode a value of type {t.__module__}.{t.__qualname__}")
            if type(known) is tuple:
                self.uuid(known[1])
            else:
                self.call(known)
        return None

    def uuid(self, value: int) -> None:
        self.write_global("uuid", "UUID")
        self.parts.append(_EMPTY_TUPLE + _NEWOBJ + b"}X\x03\x00\x00\x00int")
        self.write_int(value)
        self.parts.append(b"s" + _BUILD)


# Marker writers: write the marker at depth, or return the frame of what is left to walk.

def _m_tuple(w: _Writer, d: dict, depth: int) -> Optional[tuple]:
    return w.open_tuple(d["@t"], depth)


def _m_bytes(w: _Writer, d: dict, depth: int) -> None:
    w.write_bytes(b64decode(d["@b"], "@b"))


def _m_pkl(w: _Writer, d: dict, depth: int) -> None:
    w.write_bytes(b64decode(d["@pkl"], "@pkl"))  # nested: bytes, as the Rust codec wrote it


def _m_bigint(w: _Writer, d: dict, depth: int) -> None:
    w.write_int(decimal_to_int(d["@bi"]))


def _m_pairs(w: _Writer, d: dict, depth: int) -> Optional[tuple]:
    w.parts.append(b"}")
    if d["@d"]:
        return w.pairs_steps(d["@d"], depth, "@d"), _STEPS, depth, _NO_OPS
    return None


def _m_set(w: _Writer, d: dict, depth: int) -> tuple:
    # builtins.set([items]): the list stands at the marker's level, its items one below.
    w.write_global("builtins", "set" if "@set" in d else "frozenset")
    return iter((d["@set"] if "@set" in d else d["@fset"],)), _VALUES, depth, _SET_CLOSE


def _m_global(w: _Writer, d: dict, depth: int) -> None:
    module, name = d["@cls"]
    if w.checked is None or id(d) not in w.checked:
        w.policy.check(VALUE, module, name, "a class or function kept as a value")
    w.write_global(module, name)


def _m_dt(w: _Writer, d: dict, depth: int) -> None:
    w.call(_encode_known.datetime_call(d["@dt"], d.get("@tz")))


def _m_time(w: _Writer, d: dict, depth: int) -> None:
    w.call(_encode_known.time_call(d["@time"], d.get("@tz")))


def _m_date(w: _Writer, d: dict, depth: int) -> None:
    w.call(_encode_known.date_call(d["@date"]))


def _m_td(w: _Writer, d: dict, depth: int) -> None:
    w.call(_encode_known.timedelta_call(d["@td"]))


def _m_dec(w: _Writer, d: dict, depth: int) -> None:
    w.call(_encode_known.decimal_call(d["@dec"]))


def _m_uuid(w: _Writer, d: dict, depth: int) -> None:
    w.uuid(_encode_known.uuid_int(d["@uuid"]))


def _m_ns(w: _Writer, d: dict, depth: int) -> None:
    w.write_str(ns_text(d["@ns"]))


def _m_su(w: _Writer, d: dict, depth: int) -> None:
    w.write_str(su_text(d["@su"]))


def _m_float(w: _Writer, d: dict, depth: int) -> None:
    w.parts.append(b"G" + _pack_d(float_from_marker(d["@f"])))


_MARKERS: dict = {
    "@t": _m_tuple, "@b": _m_bytes, "@bi": _m_bigint, "@d": _m_pairs, "@set": _m_set, "@fset": _m_set,
    "@ref": _Writer.ref, "@pkl": _m_pkl, "@dt": _m_dt, "@date": _m_date, "@time": _m_time, "@td": _m_td,
    "@dec": _m_dec, "@uuid": _m_uuid, "@cls": _m_global, "instance": _Writer.instance,
    "@reduce": _Writer.reduce, "@newobj": _Writer.reduce, "@inst": _Writer.inst,
    "@ns": _m_ns, "@su": _m_su, "@f": _m_float,
}


_native = _Writer.native
_WRITERS: dict = {
    tuple: _Writer.tuple_value,
    bytes: _Writer.bytes_value,
}


def _pickle(write: Callable[[_Writer], None], expand_refs: bool, policy: GlobalsPolicy) -> bytes:
    w = _Writer(expand_refs, policy)
    w.parts.append(_PROTO3)
    try:
        write(w)
    except struct.error:  # a 4-byte length that cannot hold it: a string's (an int's would take longer)
        raise str_too_long() from None
    w.parts.append(b".")
    return b"".join(w.parts)


def _verbatim(value: Any, policy: GlobalsPolicy) -> Any:
    """The original pickle bytes of a top-level ``@pkl`` (docs/format.md, "The verbatim fallback"), its
    globals allowed by the policy; else None."""
    if type(value) is dict and len(value) == 1 and "@pkl" in value and type(value["@pkl"]) is str:
        data = b64decode(value["@pkl"], "@pkl")
        _globals.check_pickle_globals(policy, data, "a name inside a @pkl")
        return data
    return None


def encode_zodb_record(obj: Any, *, policy: Optional[GlobalsPolicy] = None) -> bytes:
    """A ZODB record (class pickle + state pickle) from ``{"@cls": [module, name], "@s": state}``.

    ``policy``: the globals policy (docs/security.md); the process default when None.  Raises TypeError
    for a non-dict argument or an unencodable Python value, ValueError for malformed markers, and
    ``GlobalRefused`` (a ValueError) for a global the policy refuses.
    """
    policy = policy_argument(policy)
    try:
        return _record(obj, policy)
    except GlobalRefused as refusal:
        raise _globals.located_in_record(refusal, obj) from None


def _record(obj: Any, policy: GlobalsPolicy) -> bytes:
    cls = obj.get("@cls") if type(obj) is dict else None
    if type(cls) is list and len(cls) == 2 and type(cls[0]) is str and type(cls[1]) is str:
        module, name = cls  # the common shape, checked inline: a call per record costs 3-4% on small ones
        state = obj.get("@s")
    else:
        module, name, state = record_parts(obj)
    verbatim = _verbatim(state, policy)
    if verbatim is not None:
        return verbatim
    if module == "" and name == "" and _known.is_object_record_state(state):
        first, state = state["@obj"], state["@state"]

        def write_first(w: _Writer) -> None:
            w.mark_checked(_globals.check_class_pickle(policy, first))
            w.value(first, 0)

        return _pickle(write_first, True, policy) + _pickle(lambda w: w.value(state, 0), True, policy)
    if module or name:  # ["", ""]: the Rust codec's class of an object record, which ZODB loads as Broken
        policy.check(CLASS, module, name, "the record's class")
    args = None
    if type(state) is dict and len(state) == 2 and "@args" in state and "@state" in state:
        args, state = state["@args"], state["@state"]

    def write_class(w: _Writer) -> None:
        w.write_str(str(module))
        w.write_str(str(name))
        w.parts.append(_TUPLE2)
        w.value(args, 1)
        w.parts.append(_TUPLE2)

    kind = btree_kind(module, name)

    def write_state(w: _Writer) -> None:
        if kind is not None:
            w.walk(w.btree_steps(state, kind[0], 0), _STEPS, 0, _NO_OPS)
        else:
            w.value(state, 0)

    return _pickle(write_class, True, policy) + _pickle(write_state, True, policy)


def public_functions(pickle_value: Callable[[Any, GlobalsPolicy], bytes]) -> tuple:
    """``dict_to_pickle`` and ``json_to_pickle`` of a twin whose ``pickle_value`` pickles one value."""

    def pickled(value: Any, policy: GlobalsPolicy) -> bytes:
        try:
            verbatim = _verbatim(value, policy)
            return verbatim if verbatim is not None else pickle_value(value, policy)
        except GlobalRefused as refusal:
            raise _globals.located(refusal, value) from None

    def dict_to_pickle(obj: Any, *, policy: Optional[GlobalsPolicy] = None) -> bytes:
        """One pickle of a marker value tree (references in their verbose form).

        Raises TypeError for a non-dict argument or an unencodable Python value,
        ValueError for malformed markers or a global the policy refuses (as encode_zodb_record).
        """
        check_arg(obj, "obj", dict)
        return pickled(obj, policy_argument(policy))

    def json_to_pickle(json_str: Any, *, policy: Optional[GlobalsPolicy] = None) -> bytes:
        """One pickle of JSON text in the marker format (key order kept, numbers exact).

        Raises TypeError for a non-str argument, ValueError for bad JSON, markers or a global the
        policy refuses (as encode_zodb_record).
        """
        check_arg(json_str, "json_str", str)
        policy = policy_argument(policy)
        return pickled(read_json(json_str), policy)

    return dict_to_pickle, json_to_pickle


def pickle_value(value: Any, policy: GlobalsPolicy) -> bytes:
    """One pickle of value (the Cython twin's for values nested deeper than its C walk goes)."""
    return _pickle(lambda w: w.value(value, 0), False, policy)


dict_to_pickle, json_to_pickle = public_functions(pickle_value)


def record_from_json(class_mod: Any, class_name: Any, state_json: Any, encode: Callable[..., bytes],
                     policy: Optional[GlobalsPolicy]) -> bytes:
    """``encode({"@cls": [class_mod, class_name], "@s": <state_json read>}, policy=policy)``: the
    definition of ``encode_zodb_record_from_pg_json``, with its argument checks (both twins call it)."""
    check_arg(class_mod, "class_mod", str)
    check_arg(class_name, "class_name", str)
    return encode({"@cls": [class_mod, class_name], "@s": read_json_argument(state_json, "state_json")},
                  policy=policy)


def encode_zodb_record_from_pg_json(class_mod: Any, class_name: Any, state_json: Any, *,
                                    policy: Optional[GlobalsPolicy] = None) -> bytes:
    """A ZODB record from a PostgreSQL row: class module and name, and the state as JSON text.

    ``state_json`` is ``str`` or UTF-8 ``bytes``/``bytearray``/``memoryview``
    (the ``jsonb`` column fetched as text).  The result is exactly what
    ``encode_zodb_record`` gives for ``{"@cls": [class_mod, class_name], "@s": json.loads(state_json)}``.
    Raises TypeError for arguments of the wrong type, ValueError (naming
    the offset) for bad JSON or UTF-8, and as encode_zodb_record for markers
    and globals.
    """
    return record_from_json(class_mod, class_name, state_json, encode_zodb_record, policy)
