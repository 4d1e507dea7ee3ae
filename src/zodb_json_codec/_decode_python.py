"""Reference decoder (normative; ``_decode_cython.pyx`` is its Cython twin): pickle bytes -> marker values.

One walk over the opcodes, as CPython's ``pickle._Unpickler`` does, building
the JSON-ready values directly: tuples become ``{"@t": [...]}``, bytes
``{"@b": ...}``, REDUCE/NEWOBJ results dicts that BUILD, SETITEMS and APPENDS
rewrite in place (so memo references follow the object, as in CPython).
Nothing is imported or called.  One small handler per opcode, found in a
table keyed by the opcode byte (the two commonest run inline in ``_load``).
Rare constructs (known types, BTree states, class metadata) live in
``_known`` and ``_common``; protocol 0 text opcodes, error wording and
persistent ids other than ZODB's in ``_decode_common``, shared with the
Cython twin.
"""

from __future__ import annotations

import binascii
import struct
from typing import Any, List, Optional, Tuple

from . import _decode_known
from ._common import CodecError, b64encode, bytes_argument
from ._decode_known import NEWOBJ, newobj_ex_callable, REDUCE
from ._known import MAX_MARKER_KEYS, btree_kind, marker_kind
from ._decode_common import (
    DEEP_CONTAINERS, F_ESCAPED_KEY, F_EXP_FLOAT, F_FLOAT, F_NUL, F_SHALLOW, F_SURROGATE, SHALLOW_CONTAINERS, Obj,
    Unrepresentable, became_markers, check_class_names_at_offset_0, expansion_budget, expansion_error, finish,
    float_flags, float_line, global_lines, hashed_unfaithfully, in_persistent_id, in_state, is_watched, int_line,
    int_value, long_line, may_become_a_marker, memo_index, note_change, note_hashed, object_record_state, persid_line,
    rebuilt_target, render_obj, shares_a_rebuilt, string_line, text_line, unicode_line, weight,
)
from ._decode_common import decode_error as _err
from ._decode_common import eof_error as _eof
from ._decode_common import persistent_ref as _persistent_ref
from ._jsontext_python import pg_json_text, pretty_json_text, sanitize_for_pg

_from_bytes = int.from_bytes
_b2a = binascii.b2a_base64
_unpack_double = struct.Struct(">d").unpack_from
_unpack_u32 = struct.Struct("<I").unpack_from

class _Context:
    """Per-call decoding state (no module-level mutable state: thread safe)."""

    __slots__ = ("compact", "memo", "objs", "dforms", "shared", "cyclic", "flags", "refs",
                 "unrepresentable", "uncallable", "containers", "fetched", "budget", "stack", "metastack",
                 "rebuilt", "watched", "pids", "pid_parts", "hashed", "changes", "changed", "weights")

    def __init__(self, compact: bool, size: int) -> None:
        self.compact = compact
        self.memo: dict = {}
        self.objs: dict = {}        # id(value) -> Obj, for REDUCE/NEWOBJ results
        self.dforms: dict = {}      # id(dict) -> dict, dicts switched to the @d pair form
        self.shared: dict = {}      # id -> value for mutable values fetched from the memo / DUP
        self.cyclic = False         # a shared value was mutated: the graph may have a cycle
        self.flags = 0
        self.refs: List[int] = []
        self.unrepresentable = False
        self.uncallable = False     # REDUCE/NEWOBJ of a value no unpickler could call
        self.containers = 0         # container opcodes run (see _decode_common.DEEP_CONTAINERS)
        self.fetched = 0            # the weight of the values fetched from the memo / DUP...
        self.budget = expansion_budget(size)  # ...and what it may be (see _decode_common.EXPANSION_FLOOR)
        self.stack: list = []       # the pickle machine's stack...
        self.metastack: list = []   # ...and the stacks below its MARKs
        self.rebuilt: Optional[list] = None  # objects BUILD gave a second state (_build)
        self.watched: Optional[list] = None  # user dicts that may become marker-shaped (_set_items)
        self.pids: Optional[list] = None  # persistent ids of lists or dicts not walked yet (in_persistent_id)
        self.pid_parts: Optional[dict] = None  # id -> list or dict in the persistent ids walked
        self.hashed: Optional[list] = None  # sets' item lists and @d dicts made (_decode_common.note_hashed)
        self.changes = 0            # changes to shared values...
        self.changed: Optional[dict] = None  # ...and the values changed after a set or @d dict was made
        self.weights: dict = {}     # id -> (container, weight) of values fetched (_decode_common.weight's kept)


def _decode_utf8(raw: bytes, pos: int, ctx: _Context) -> str:
    try:
        s = raw.decode("utf-8")
    except UnicodeDecodeError:
        try:
            s = raw.decode("utf-8", "surrogatepass")
        except UnicodeDecodeError:
            raise _err("invalid UTF-8 in pickle string", pos) from None
        ctx.flags |= F_SURROGATE
    if "\x00" in s:
        ctx.flags |= F_NUL
    return s


def _may_be_callable(ctx: _Context, value: Any) -> bool:
    """A class, a reference, or an object built by the pickle: anything else cannot be called."""
    if type(value) is not dict:
        return False
    if len(value) == 1 and ("@cls" in value or "@ref" in value or "@inst" in value):
        return True
    return _obj_of(ctx, value) is not None


def _new_obj(ctx: _Context, kind: int, callable_: Any, args: Any) -> dict:
    if not _may_be_callable(ctx, callable_):
        ctx.uncallable = True
    value: dict = {}
    obj = Obj(value, kind, callable_, args)
    ctx.objs[id(value)] = obj
    render_obj(obj, ctx.objs)
    if len(value) == 1 and ("@set" in value or "@fset" in value):  # set(list): a known call
        note_hashed(ctx, value.get("@set", value.get("@fset")))
    return value


def _obj_of(ctx: _Context, value: Any) -> Optional[Obj]:
    if type(value) is not dict:
        return None
    obj = ctx.objs.get(id(value))
    if obj is not None and obj.value is value:
        return obj
    return None


def _note_mutation(ctx: _Context, target: Any) -> None:
    if ctx.shared and id(target) in ctx.shared:
        ctx.cyclic = True
        if (ctx.pids or ctx.pid_parts) and in_persistent_id(ctx, target):
            ctx.unrepresentable = True  # a persistent id changed after the unpickler read it
        ctx.changes += 1
        if ctx.hashed:
            note_change(ctx, target)


def _fetched(ctx: _Context, value: Any, start: int) -> None:
    """value was fetched from the memo (or DUP) at start: note it if it could be mutated later (a cycle),
    and count its weight against the expansion budget; once a shared value was changed (it may hold itself
    now), containers are weighed at the end instead (_decode_common.finish)."""
    t = type(value)
    if t is list or t is dict:
        ctx.shared[id(value)] = value
        if not ctx.cyclic:
            ctx.fetched += weight(value, ctx.budget - ctx.fetched, ctx.weights)
    else:
        ctx.fetched += 1 + len(value) if t is str else 1
    if ctx.fetched > ctx.budget:
        raise expansion_error(ctx.budget, start)


# ---------------------------------------------------------------------------
# Dicts: plain while every key is a str and the dict cannot be taken for a marker
# ---------------------------------------------------------------------------

def _set_items(ctx: _Context, target: Any, items: list, pos: int, opname: str) -> None:
    if len(items) % 2:
        raise _err("invalid pickle data: odd number of items for dict", pos)
    if type(target) is not dict:
        raise _err(f"invalid pickle data: {opname} on non-dict/non-object", pos)
    if ctx.shared:
        _note_mutation(ctx, target)
    obj = ctx.objs.get(id(target)) if ctx.objs else None
    if obj is not None and obj.value is target:
        pairs = obj.items
        if pairs is None:
            pairs = obj.items = []
        for i in range(0, len(items), 2):
            pairs.append([items[i], items[i + 1]])
        render_obj(obj, ctx.objs)
        return
    dform = ctx.dforms.get(id(target)) if ctx.dforms else None
    if dform is not None and dform is target:
        pairs = target["@d"]
        for i in range(0, len(items), 2):
            pairs.append([items[i], items[i + 1]])
        return
    if len(target) == 1 and marker_kind(target) is not None and not is_watched(ctx.watched, target):
        raise _err(f"invalid pickle data: {opname} on non-dict/non-object", pos)
    for i in range(0, len(items), 2):
        k = items[i]
        if type(k) is not str:
            _to_dform(ctx, target, items, i)
            return
        target[k] = items[i + 1]
    if len(target) <= MAX_MARKER_KEYS:
        if marker_kind(target, True) is not None:
            _to_dform(ctx, target, [], 0)
        elif may_become_a_marker(target):
            if ctx.watched is None:
                ctx.watched = []
            ctx.watched.append(target)


def _check_watched(ctx: _Context) -> None:
    """Dicts that became marker-shaped after they were filled (their "@cls" list filled later through the
    memo) are written as @d pairs after all (docs/format.md, "Markers and user data")."""
    for d in became_markers(ctx.watched, ctx.dforms):
        _to_dform(ctx, d, [], 0)


def _to_dform(ctx: _Context, target: dict, items: list, start: int) -> None:
    pairs = [[k, v] for k, v in target.items()]
    for i in range(start, len(items), 2):
        pairs.append([items[i], items[i + 1]])
    target.clear()
    target["@d"] = pairs
    ctx.dforms[id(target)] = target
    note_hashed(ctx, target)


def _append(ctx: _Context, target: Any, items: list, pos: int, opname: str) -> None:
    if type(target) is list:
        if ctx.shared:
            _note_mutation(ctx, target)
        target.extend(items)
        return
    obj = _obj_of(ctx, target)
    if obj is None:
        raise _err(f"invalid pickle data: {opname} on non-list/non-object", pos)
    if ctx.shared:
        _note_mutation(ctx, target)
    if obj.appends is None:
        obj.appends = []
    obj.appends.extend(items)
    render_obj(obj, ctx.objs)


# ---------------------------------------------------------------------------
# The opcode walk: one small handler per opcode, as in CPython's pickle.py
# ---------------------------------------------------------------------------
#
# A handler gets the context, the pickle and the offset after its opcode byte;
# it works on ctx.stack and returns the offset after its argument.  The
# opcode's own offset (for error messages) is pos - 1.

def _load(data: bytes, pos: int, ctx: _Context) -> Tuple[Any, int]:
    """Run the pickle machine from pos to the first STOP; (value, offset after STOP)."""
    ctx.stack = []
    ctx.metastack = []
    end = len(data)
    memo = ctx.memo
    dispatch = _DISPATCH
    unpack_u32 = _unpack_u32
    start = pos
    try:
        while True:
            if pos >= end:
                raise _eof(pos)
            start = pos
            op = data[pos]
            pos += 1
            # The commonest opcodes of ZODB records (BINPUT and BINUNICODE, half
            # of all; BININT1) run here, saving a call each; _binput, _binunicode
            # and _binint1 are their handlers.
            if op == 0x71:  # BINPUT
                if pos >= end or not ctx.stack:
                    return _binput(ctx, data, pos), None  # raises
                memo[data[pos]] = ctx.stack[-1]
                pos += 1
            elif op == 0x58 and pos + 4 <= end:  # BINUNICODE
                n = unpack_u32(data, pos)[0]
                pos += 4 + n
                if pos > end:
                    raise _eof(pos - n)
                try:
                    s = data[pos - n:pos].decode("utf-8")
                except UnicodeDecodeError:  # lone surrogates are flagged, anything else an error
                    s = _decode_utf8(data[pos - n:pos], start, ctx)
                if "\x00" in s:
                    ctx.flags |= F_NUL
                ctx.stack.append(s)
            elif op == 0x4B and pos < end:  # BININT1
                ctx.stack.append(data[pos])
                pos += 1
            elif op == 0x2E:  # STOP
                if ctx.watched:
                    _check_watched(ctx)
                break
            else:
                pos = dispatch[op](ctx, data, pos)
        if not ctx.stack:
            raise _err("pickle stack underflow", start)
        return ctx.stack[-1], pos
    except IndexError:  # a stack shape the handlers' checks did not foresee
        raise _err("pickle stack underflow", start) from None


def _pop_mark(ctx: _Context, pos: int, opname: str) -> list:
    """The items pushed since the last MARK; the stack below it is current again."""
    if not ctx.metastack:
        raise _err(f"pickle stack underflow (no MARK for {opname})", pos - 1)
    items = ctx.stack
    ctx.stack = ctx.metastack.pop()
    return items


def _need(ctx: _Context, count: int, pos: int) -> list:
    """The stack, which must hold at least count values."""
    stack = ctx.stack
    if len(stack) < count:
        raise _err("pickle stack underflow", pos - 1)
    return stack


def _length(data: bytes, pos: int, width: int, signed: bool = False) -> int:
    if pos + width > len(data):
        raise _eof(pos)
    return _from_bytes(data[pos:pos + width], "little", signed=signed)


def _take(data: bytes, pos: int, n: int) -> bytes:
    """The n bytes at pos, which must all be there."""
    if pos + n > len(data):
        raise _eof(pos)
    return data[pos:pos + n]


# Memo and stack

def _mark(ctx: _Context, data: bytes, pos: int) -> int:
    ctx.metastack.append(ctx.stack)
    ctx.stack = []
    return pos


def _pop(ctx: _Context, data: bytes, pos: int) -> int:
    if ctx.stack:
        ctx.stack.pop()
    elif ctx.metastack:
        ctx.stack = ctx.metastack.pop()
    else:
        raise _err("pickle stack underflow", pos - 1)
    return pos


def _pop_mark_op(ctx: _Context, data: bytes, pos: int) -> int:
    _pop_mark(ctx, pos, "POP_MARK")
    return pos


def _dup(ctx: _Context, data: bytes, pos: int) -> int:
    v = _need(ctx, 1, pos)[-1]
    _fetched(ctx, v, pos - 1)
    ctx.stack.append(v)
    return pos


def _binput(ctx: _Context, data: bytes, pos: int) -> int:
    if pos >= len(data):
        raise _eof(pos)
    stack = ctx.stack
    if not stack:
        raise _err("pickle stack underflow", pos - 1)
    ctx.memo[data[pos]] = stack[-1]
    return pos + 1


def _long_binput(ctx: _Context, data: bytes, pos: int) -> int:
    if pos + 4 > len(data):
        raise _eof(pos)
    stack = ctx.stack
    if not stack:
        raise _err("pickle stack underflow", pos - 1)
    ctx.memo[_unpack_u32(data, pos)[0]] = stack[-1]
    return pos + 4


def _memoize(ctx: _Context, data: bytes, pos: int) -> int:
    stack = ctx.stack
    if not stack:
        raise _err("pickle stack underflow", pos - 1)
    ctx.memo[len(ctx.memo)] = stack[-1]
    return pos


def _put(ctx: _Context, data: bytes, pos: int) -> int:
    start = pos - 1
    line, pos = text_line(data, pos)
    value = _need(ctx, 1, start + 1)[-1]
    ctx.memo[memo_index(line, start, "PUT")] = value
    return pos


def _binget(ctx: _Context, data: bytes, pos: int) -> int:
    if pos >= len(data):
        raise _eof(pos)
    idx = data[pos]
    try:
        v = ctx.memo[idx]
    except KeyError:
        raise _err(f"invalid pickle data: memo index {idx} not found", pos - 1) from None
    _fetched(ctx, v, pos - 1)
    ctx.stack.append(v)
    return pos + 1


def _long_binget(ctx: _Context, data: bytes, pos: int) -> int:
    ctx.stack.append(_memo_get(ctx, _length(data, pos, 4), pos - 1))
    return pos + 4


def _get(ctx: _Context, data: bytes, pos: int) -> int:
    start = pos - 1
    line, pos = text_line(data, pos)
    ctx.stack.append(_memo_get(ctx, memo_index(line, start, "GET"), start))
    return pos


# Framing

def _proto(ctx: _Context, data: bytes, pos: int) -> int:
    if pos >= len(data):
        raise _eof(pos)
    if data[pos] > 5:
        raise _err(f"unsupported pickle protocol: {data[pos]}", pos - 1)
    return pos + 1


def _frame(ctx: _Context, data: bytes, pos: int) -> int:
    _take(data, pos, 8)
    return pos + 8


def _unknown(ctx: _Context, data: bytes, pos: int) -> int:
    raise _err(f"unknown pickle opcode: 0x{data[pos - 1]:02x}", pos - 1)


# Numbers and constants

def _none(ctx: _Context, data: bytes, pos: int) -> int:
    ctx.stack.append(None)
    return pos


def _newtrue(ctx: _Context, data: bytes, pos: int) -> int:
    ctx.stack.append(True)
    return pos


def _newfalse(ctx: _Context, data: bytes, pos: int) -> int:
    ctx.stack.append(False)
    return pos


def _binint1(ctx: _Context, data: bytes, pos: int) -> int:
    if pos >= len(data):
        raise _eof(pos)
    ctx.stack.append(data[pos])
    return pos + 1


def _binint2(ctx: _Context, data: bytes, pos: int) -> int:
    if pos + 2 > len(data):
        raise _eof(pos)
    ctx.stack.append(data[pos] | (data[pos + 1] << 8))
    return pos + 2


def _binint(ctx: _Context, data: bytes, pos: int) -> int:
    ctx.stack.append(_length(data, pos, 4, True))
    return pos + 4


def _long1(ctx: _Context, data: bytes, pos: int) -> int:
    n = _length(data, pos, 1)
    ctx.stack.append(int_value(_from_bytes(_take(data, pos + 1, n), "little", signed=True), ctx))
    return pos + 1 + n


def _long4(ctx: _Context, data: bytes, pos: int) -> int:
    n = _length(data, pos, 4, True)
    if n < 0:
        raise _err("invalid pickle data: negative length in LONG4", pos - 1)
    ctx.stack.append(int_value(_from_bytes(_take(data, pos + 4, n), "little", signed=True), ctx))
    return pos + 4 + n


def _binfloat(ctx: _Context, data: bytes, pos: int) -> int:
    if pos + 8 > len(data):
        raise _eof(pos)
    x = _unpack_double(data, pos)[0]
    if x == 0.0 or x - x != 0.0 or not (1e-4 <= (x if x > 0 else -x) < 1e16):
        ctx.flags |= float_flags(x)
    ctx.stack.append(x)
    return pos + 8


def _text(read: Any) -> Any:
    def text(ctx: _Context, data: bytes, pos: int) -> int:
        """A protocol 0 text-line opcode (INT, LONG, FLOAT, STRING, UNICODE): _decode_common reads it."""
        value, pos = read(ctx, data, pos)
        ctx.stack.append(value)
        return pos
    return text


# Strings and bytes

def _binunicode(ctx: _Context, data: bytes, pos: int) -> int:
    if pos + 4 > len(data):
        raise _eof(pos)
    n = _from_bytes(data[pos:pos + 4], "little")
    return _push_text(ctx, data, pos + 4, n, pos - 1)


def _short_binunicode(ctx: _Context, data: bytes, pos: int) -> int:
    if pos >= len(data):
        raise _eof(pos)
    return _push_text(ctx, data, pos + 1, data[pos], pos - 1)


def _binunicode8(ctx: _Context, data: bytes, pos: int) -> int:
    return _push_text(ctx, data, pos + 8, _length(data, pos, 8), pos - 1)


def _push_text(ctx: _Context, data: bytes, pos: int, n: int, start: int) -> int:
    """Push the UTF-8 text of the n bytes at pos, for the opcode at start."""
    if pos + n > len(data):
        raise _eof(pos)
    raw = data[pos:pos + n]
    try:
        s = raw.decode("utf-8")
        if "\x00" in s:
            ctx.flags |= F_NUL
    except UnicodeDecodeError:
        s = _decode_utf8(raw, start, ctx)
    ctx.stack.append(s)
    return pos + n


def _short_binbytes(ctx: _Context, data: bytes, pos: int) -> int:
    if pos >= len(data):
        raise _eof(pos)
    n = data[pos]
    pos += 1
    if pos + n > len(data):
        raise _eof(pos)
    ctx.stack.append({"@b": _b2a(data[pos:pos + n], newline=False).decode("ascii")})
    return pos + n


def _binbytes(ctx: _Context, data: bytes, pos: int) -> int:
    n = _length(data, pos, 4)
    ctx.stack.append({"@b": _b2a(_take(data, pos + 4, n), newline=False).decode("ascii")})
    return pos + 4 + n


def _binbytes8(ctx: _Context, data: bytes, pos: int) -> int:
    n = _length(data, pos, 8)
    ctx.stack.append({"@b": b64encode(_take(data, pos + 8, n))})
    return pos + 8 + n


def _short_binstring(ctx: _Context, data: bytes, pos: int) -> int:
    n = _length(data, pos, 1)
    ctx.stack.append({"@b": b64encode(_take(data, pos + 1, n))})
    return pos + 1 + n


def _binstring(ctx: _Context, data: bytes, pos: int) -> int:
    n = _length(data, pos, 4, True)
    if n < 0:
        raise _err("invalid pickle data: negative length in BINSTRING", pos - 1)
    ctx.stack.append({"@b": b64encode(_take(data, pos + 4, n))})
    return pos + 4 + n


def _bytearray8(ctx: _Context, data: bytes, pos: int) -> int:
    """What protocol 4 writes for a bytearray."""
    ctx.containers += 1
    n = _length(data, pos, 8)
    raw_b = {"@b": b64encode(_take(data, pos + 8, n))}
    ctx.stack.append(_new_obj(ctx, REDUCE, {"@cls": ["builtins", "bytearray"]}, {"@t": [raw_b]}))
    return pos + 8 + n


# Containers

def _empty_list(ctx: _Context, data: bytes, pos: int) -> int:
    ctx.containers += 1
    ctx.stack.append([])
    return pos


def _empty_dict(ctx: _Context, data: bytes, pos: int) -> int:
    ctx.containers += 1
    ctx.stack.append({})
    return pos


def _empty_tuple(ctx: _Context, data: bytes, pos: int) -> int:
    ctx.containers += 1
    ctx.stack.append({"@t": []})
    return pos


def _empty_set(ctx: _Context, data: bytes, pos: int) -> int:
    ctx.containers += 1
    items: list = []
    note_hashed(ctx, items)
    ctx.stack.append({"@set": items})
    return pos


def _list(ctx: _Context, data: bytes, pos: int) -> int:
    ctx.containers += 1
    items = _pop_mark(ctx, pos, "LIST")
    ctx.stack.append(items)
    return pos


def _tuple(ctx: _Context, data: bytes, pos: int) -> int:
    ctx.containers += 1
    items = _pop_mark(ctx, pos, "TUPLE")
    ctx.stack.append({"@t": items})
    return pos


def _frozenset(ctx: _Context, data: bytes, pos: int) -> int:
    ctx.containers += 1
    items = _pop_mark(ctx, pos, "FROZENSET")
    note_hashed(ctx, items)
    ctx.stack.append({"@fset": items})
    return pos


def _dict(ctx: _Context, data: bytes, pos: int) -> int:
    ctx.containers += 1
    items = _pop_mark(ctx, pos, "DICT")
    d: dict = {}
    if items:
        _set_items(ctx, d, items, pos - 1, "DICT")
    ctx.stack.append(d)
    return pos


def _tuple_n(n: int) -> Any:
    def tuple_n(ctx: _Context, data: bytes, pos: int) -> int:
        """TUPLE1, TUPLE2, TUPLE3: the top n values as one tuple."""
        ctx.containers += 1
        stack = ctx.stack
        if len(stack) < n:
            raise _err("pickle stack underflow", pos - 1)
        items = _pop_items(stack, n)
        stack.append({"@t": items})
        return pos
    return tuple_n


def _pop_items(stack: list, n: int) -> list:
    """The top n values of the stack, popped.  Not a slice: on CPython 3.11 and earlier a collection may
    run inside the new list's allocation, and a __del__ that shrinks the stack then would make the slice
    copy freed items (the interpreter's own fault); pop() reads the size each time."""
    items = [stack.pop() for _ in range(n)]
    items.reverse()
    return items


def _into_top(put: Any, opname: str, count: int) -> Any:
    def into_top(ctx: _Context, data: bytes, pos: int) -> int:
        """SETITEM(S), APPEND(S): the last count items (all since the MARK for 0) go into the value below."""
        if count:
            items = _pop_items(_need(ctx, count + 1, pos), count)
        else:
            items = _pop_mark(ctx, pos, opname)
        put(ctx, _need(ctx, 1, pos)[-1], items, pos - 1, opname)
        return pos
    return into_top


def _additems(ctx: _Context, data: bytes, pos: int) -> int:
    items = _pop_mark(ctx, pos, "ADDITEMS")
    target = _need(ctx, 1, pos)[-1]
    if not (type(target) is dict and len(target) == 1 and "@set" in target):
        raise _err("invalid pickle data: ADDITEMS on non-set", pos - 1)
    if ctx.shared:
        _note_mutation(ctx, target)
    target["@set"].extend(items)
    return pos


# Classes, objects, references

def _global(ctx: _Context, data: bytes, pos: int) -> int:
    klass, pos = global_lines(ctx, data, pos)
    ctx.stack.append(klass)
    return pos


def _stack_global(ctx: _Context, data: bytes, pos: int) -> int:
    stack = _need(ctx, 2, pos)
    name = stack.pop()
    module = stack[-1]
    if type(module) is not str:
        raise _err("invalid pickle data: STACK_GLOBAL: module is not a string", pos - 1)
    if type(name) is not str:
        raise _err("invalid pickle data: STACK_GLOBAL: name is not a string", pos - 1)
    stack[-1] = {"@cls": [module, name]}
    return pos


def _call(kind: int) -> Any:
    def call(ctx: _Context, data: bytes, pos: int) -> int:
        """REDUCE / NEWOBJ: an object under construction from a callable and its arguments."""
        ctx.containers += 1
        stack = _need(ctx, 2, pos)
        args = stack.pop()
        stack[-1] = _new_obj(ctx, kind, stack[-1], args)
        return pos
    return call


def _newobj_ex(ctx: _Context, data: bytes, pos: int) -> int:
    """NEWOBJ_EX: ``cls.__new__(cls, *args, **kwargs)``, the call ``copyreg.__newobj_ex__(cls, args, kwargs)``
    that protocol 3 writes for it, as the Rust codec 1.7.0 reads it (docs/format.md, "Markers")."""
    ctx.containers += 1
    stack = _need(ctx, 3, pos)
    kwargs = stack.pop()
    args = stack.pop()
    if not _may_be_callable(ctx, stack[-1]):
        ctx.uncallable = True
    stack[-1] = _new_obj(ctx, REDUCE, newobj_ex_callable(), {"@t": [stack[-1], args, kwargs]})
    return pos


def _build_op(ctx: _Context, data: bytes, pos: int) -> int:
    ctx.containers += 1
    stack = _need(ctx, 2, pos)
    state = stack.pop()
    stack[-1] = _build(ctx, stack[-1], state)
    return pos


def _inst(ctx: _Context, data: bytes, pos: int) -> int:
    ctx.containers += 1
    start = pos - 1
    klass, pos = global_lines(ctx, data, pos)
    items = _pop_mark(ctx, start + 1, "INST")
    ctx.stack.append(_instantiate(ctx, klass, items))
    return pos


def _obj(ctx: _Context, data: bytes, pos: int) -> int:
    ctx.containers += 1
    args = list(_pop_mark(ctx, pos, "OBJ"))  # a copy, not a slice (see _pop_items)
    if not args:
        raise _err("pickle stack underflow", pos - 1)
    klass = args.pop(0)
    ctx.stack.append(_instantiate(ctx, klass, args))
    return pos


def _binpersid(ctx: _Context, data: bytes, pos: int) -> int:
    ctx.containers += 1
    stack = ctx.stack
    if not stack:
        raise _err("pickle stack underflow", pos - 1)
    stack[-1] = _persistent_ref(ctx, stack[-1])
    return pos


def _persid(ctx: _Context, data: bytes, pos: int) -> int:
    ctx.containers += 1
    pid, pos = persid_line(ctx, data, pos)
    ctx.stack.append(_persistent_ref(ctx, pid))
    return pos


def _ext(width: int) -> Any:
    def ext(ctx: _Context, data: bytes, pos: int) -> int:
        """EXT1/2/4: a code of the extension registry, which JSON cannot name."""
        code = _length(data, pos, width)
        if code <= 0:
            raise _err("invalid pickle data: EXT code must be positive", pos - 1)
        ctx.unrepresentable = True
        ctx.stack.append({"@ext": code})
        return pos + width
    return ext


def _next_buffer(ctx: _Context, data: bytes, pos: int) -> int:
    """Out-of-band data, which JSON cannot hold."""
    ctx.unrepresentable = True
    ctx.stack.append({"@buffer": None})
    return pos


def _readonly_buffer(ctx: _Context, data: bytes, pos: int) -> int:
    _need(ctx, 1, pos)
    return pos


_HANDLERS = {  # STOP (0x2E) ends the loop in _load
    0x28: _mark, 0x29: _empty_tuple, 0x30: _pop, 0x31: _pop_mark_op, 0x32: _dup,
    0x42: _binbytes, 0x43: _short_binbytes, 0x46: _text(float_line), 0x47: _binfloat,
    0x49: _text(int_line), 0x4A: _binint, 0x4B: _binint1, 0x4C: _text(long_line), 0x4D: _binint2,
    0x4E: _none, 0x50: _persid, 0x51: _binpersid, 0x52: _call(REDUCE), 0x53: _text(string_line),
    0x54: _binstring, 0x55: _short_binstring, 0x56: _text(unicode_line), 0x58: _binunicode,
    0x5D: _empty_list, 0x61: _into_top(_append, "APPEND", 1), 0x62: _build_op, 0x63: _global,
    0x64: _dict, 0x65: _into_top(_append, "APPENDS", 0), 0x67: _get, 0x68: _binget, 0x69: _inst,
    0x6A: _long_binget, 0x6C: _list, 0x6F: _obj, 0x70: _put, 0x71: _binput, 0x72: _long_binput,
    0x73: _into_top(_set_items, "SETITEM", 2), 0x74: _tuple, 0x75: _into_top(_set_items, "SETITEMS", 0),
    0x7D: _empty_dict, 0x80: _proto, 0x81: _call(NEWOBJ), 0x82: _ext(1), 0x83: _ext(2), 0x84: _ext(4),
    0x85: _tuple_n(1), 0x86: _tuple_n(2), 0x87: _tuple_n(3), 0x88: _newtrue, 0x89: _newfalse,
    0x8A: _long1, 0x8B: _long4, 0x8C: _short_binunicode, 0x8D: _binunicode8, 0x8E: _binbytes8,
    0x8F: _empty_set, 0x90: _additems, 0x91: _frozenset, 0x92: _newobj_ex, 0x93: _stack_global,
    0x94: _memoize, 0x95: _frame, 0x96: _bytearray8, 0x97: _next_buffer, 0x98: _readonly_buffer,
}
_DISPATCH = [_HANDLERS.get(op, _unknown) for op in range(256)]


def _memo_get(ctx: _Context, idx: int, start: int) -> Any:
    try:
        v = ctx.memo[idx]
    except KeyError:
        raise _err(f"invalid pickle data: memo index {idx} not found", start) from None
    _fetched(ctx, v, start)
    return v


def _instantiate(ctx: _Context, klass: Any, args: list) -> dict:
    """INST/OBJ: CPython calls the class when there are arguments, else only __new__."""
    if args:
        return _new_obj(ctx, REDUCE, klass, {"@t": args})
    return _new_obj(ctx, NEWOBJ, klass, {"@t": []})


def _build(ctx: _Context, target: Any, state: Any) -> Any:
    obj = _obj_of(ctx, target)
    if ctx.shared:
        _note_mutation(ctx, target)
    if obj is not None and not obj.built:
        obj.built = True
        obj.state = state
        render_obj(obj, ctx.objs)
        return target
    # BUILD on anything else (a class, a built object, a plain value).
    if rebuilt_target(target, obj):
        if ctx.rebuilt is None:
            ctx.rebuilt = []
        ctx.rebuilt.append(target)
    return {"@inst": {"@obj": target, "@state": state}}


# ---------------------------------------------------------------------------
# After the walk: depth, cycles, escapes
# ---------------------------------------------------------------------------

# ---------------------------------------------------------------------------
# After the walk
# ---------------------------------------------------------------------------

def _finish(value: Any, ctx: _Context, start: int) -> Any:
    if ctx.rebuilt is not None and shares_a_rebuilt(ctx.rebuilt, ctx.shared):
        ctx.unrepresentable = True
    if hashed_unfaithfully(ctx.hashed, ctx.changed, ctx.shared or ctx.flags & F_FLOAT):
        ctx.unrepresentable = True
    if ctx.containers <= SHALLOW_CONTAINERS:
        ctx.flags |= F_SHALLOW
    return finish(value, ctx.unrepresentable, ctx.cyclic, ctx.containers > DEEP_CONTAINERS, ctx.flags, start,
                  ctx.budget, ctx.fetched)


# ---------------------------------------------------------------------------
# Records and single pickles
# ---------------------------------------------------------------------------

def _decode_record(data: Any, compact: bool = True) -> Tuple[str, str, Any, List[int], int, int]:
    """(module, name, state, refs, flags, offset of the state pickle) of a ZODB record."""
    data = bytes_argument(data)
    ctx = _Context(compact, len(data))
    try:
        klass, pos = _load(data, 0, ctx)
        class_refs = len(ctx.refs)
        class_unrepresentable, class_cyclic = ctx.unrepresentable, ctx.cyclic
        if ctx.rebuilt is not None and shares_a_rebuilt(ctx.rebuilt, ctx.shared):
            class_unrepresentable = True  # (the state may be read with a memo of its own: no _finish sees it)
        ctx.uncallable = False
        try:
            state, _ = _load(data, pos, ctx)
            problem: Optional[CodecError] = None
        except CodecError as exc:
            problem = exc
        if problem is not None or ctx.uncallable:
            fresh = _load_state_with_own_memo(data, pos, ctx)
            if fresh is not None:
                class_ref_list = ctx.refs[:class_refs]
                state, ctx = fresh
                ctx.refs[:0] = class_ref_list
            elif problem is not None:
                raise problem
        meta = _decode_known.class_metadata(klass)
        if meta is None:  # an object record: the first pickle's value is kept in the state
            module = name = ""
            args = None
        else:
            module, name, args = meta
        if "\x00" in module or "\x00" in name:
            ctx.flags |= F_NUL
        kind = btree_kind(module, name)
        if kind is not None:
            state = _decode_known.btree_state(state, kind[0], kind[1])
        if args is not None:
            state = {"@args": args, "@state": state}
        if b"@ns:" in data or b"@su:" in data:
            ctx.flags |= F_ESCAPED_KEY
        state = _finish(state, ctx, pos)
        if meta is None:
            state = object_record_state(klass, state, class_unrepresentable, class_cyclic or ctx.cyclic,
                                        ctx.flags, ctx.budget)
    except Unrepresentable:
        state = {"@pkl": b64encode(data)}
        ctx.flags &= ~(F_FLOAT | F_EXP_FLOAT | F_SURROGATE | F_ESCAPED_KEY)
        if "\x00" not in module + name:
            ctx.flags &= ~F_NUL
    return module, name, state, ctx.refs, ctx.flags, pos


def _load_state_with_own_memo(data: bytes, pos: int, ctx: _Context) -> Optional[tuple]:
    """(state, context) of a state pickle read with a memo of its own, or None.

    ZODB reads both pickles of a record with one memo.  Tools that pickle the
    class and the state separately with protocol 4+ (MEMOIZE numbers entries
    by count) make records whose state, read that way, refers to the wrong
    memo entries: an error, or a call of something that cannot be called.
    Their state is intact when read as it was written, with its own memo; that
    reading is used when it is a sound one.
    """
    fresh = _Context(ctx.compact, len(data))
    fresh.flags = ctx.flags
    fresh.containers = ctx.containers  # the class pickle's arguments are part of the value
    fresh.fetched = ctx.fetched
    try:
        state, _ = _load(data, pos, fresh)
    except CodecError:
        return None
    if fresh.uncallable:
        return None
    return state, fresh


def decode_zodb_record(data: Any) -> dict:
    """A ZODB record as ``{"@cls": [module, name], "@s": state}``.

    Raises TypeError for a non-bytes argument and ValueError for bad data.
    """
    module, name, state, _, _, _ = _decode_record(data)
    return {"@cls": [module, name], "@s": state}


def decode_zodb_record_for_pg(data: Any) -> tuple:
    """(module, name, state, refs) with state safe for a PostgreSQL jsonb column.

    Raises TypeError for a non-bytes argument and ValueError for bad data.
    """
    module, name, state, refs, flags, start = _decode_record(data)
    check_class_names_at_offset_0(module, name)
    return module, name, pg_state(state, flags, start), refs


def pg_state(state: Any, flags: int, start: int) -> Any:
    """A decoded state (the Cython twin's too) rewritten where its flags say that jsonb could not store it."""
    if flags & (F_NUL | F_SURROGATE | F_FLOAT | F_EXP_FLOAT):
        return in_state(sanitize_for_pg, start, state, True, True)
    return state


def decode_zodb_record_for_pg_json(data: Any) -> tuple:
    """(module, name, state_json, refs): the state as JSON text for PostgreSQL jsonb.

    Raises TypeError for a non-bytes argument and ValueError for bad data.
    """
    module, name, state, refs, flags, start = _decode_record(data)
    check_class_names_at_offset_0(module, name)
    special = flags & (F_NUL | F_SURROGATE | F_FLOAT | F_EXP_FLOAT)
    return module, name, in_state(pg_json_text, start, state, special, flags & F_SHALLOW), refs


def _decode_pickle(data: Any) -> Any:
    data = bytes_argument(data)
    ctx = _Context(False, len(data))
    try:
        value, stop = _load(data, 0, ctx)
        if b"@ns:" in data or b"@su:" in data:
            ctx.flags |= F_ESCAPED_KEY
        return _finish(value, ctx, 0), ctx.flags
    except Unrepresentable:
        return {"@pkl": b64encode(data[:stop])}, 0


def pickle_to_dict(data: Any) -> Any:
    """One pickle as marker values (references in their verbose form).

    Raises TypeError for a non-bytes argument and ValueError for bad data.
    """
    return _decode_pickle(data)[0]


def pickle_to_json(data: Any) -> str:
    """One pickle as pretty JSON text (2-space indent, sorted keys).

    Raises TypeError for a non-bytes argument and ValueError for bad data.
    """
    value, flags = _decode_pickle(data)
    return pretty_json_text(value, flags & (F_FLOAT | F_EXP_FLOAT | F_SURROGATE))
