"""Reference decoder (normative; ``_decode_cython.pyx`` is its Cython twin): pickle bytes -> marker values.

One walk over the opcodes, as CPython's ``pickle._Unpickler`` does, building
the JSON-ready values directly: tuples become ``{"@t": [...]}``, bytes
``{"@b": ...}``, REDUCE/NEWOBJ results dicts that BUILD, SETITEMS and APPENDS
rewrite in place (so memo references follow the object, as in CPython).
Nothing is imported or called.  Rare constructs (known types, BTree states,
class metadata) live in ``_known`` and ``_common``.
"""

from __future__ import annotations

import binascii
import struct
from typing import Any, List, Optional, Tuple

from . import _decode_known, _known
from ._common import (
    I64_MAX, I64_MIN, MAX_BIGINT_BITS, CodecError, b64encode, bytes_argument,
    decimal_to_int, float_marker, int_to_decimal,
)
from ._known import btree_kind, marker_kind
from ._decode_common import (
    DEEP_CONTAINERS, F_ESCAPED_KEY, F_EXP_FLOAT, F_FLOAT, F_NUL, F_SHALLOW, F_SURROGATE, NEWOBJ, REDUCE,
    SHALLOW_CONTAINERS, Obj, Unrepresentable, check_class_names_at_offset_0, decode_string_escapes, finish,
    in_state, is_global, object_record_state, render_obj,
)
from ._jsontext_python import pg_json_text, pretty_json_text, sanitize_for_pg

_from_bytes = int.from_bytes
_b2a = binascii.b2a_base64
_unpack_double = struct.Struct(">d").unpack_from

class _Context:
    """Per-call decoding state (no module-level mutable state: thread safe)."""

    __slots__ = ("compact", "memo", "objs", "dforms", "shared", "cyclic", "flags", "refs",
                 "unrepresentable", "uncallable", "data", "containers")

    def __init__(self, data: bytes, compact: bool) -> None:
        self.data = data
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


def _err(msg: str, pos: int) -> CodecError:
    return CodecError(f"{msg} at offset {pos}")


def _eof(pos: int) -> CodecError:
    return CodecError(f"unexpected end of pickle stream at offset {pos}")


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


def _float_flags(x: float) -> int:
    if x == 0.0 or x - x != 0.0:
        return F_FLOAT if float_marker(x) else 0
    ax = -x if x < 0 else x
    if ax >= 1e16 or ax < 1e-4:
        return F_EXP_FLOAT
    return 0


def _int_value(v: int, ctx: "_Context") -> Any:
    if I64_MIN <= v <= I64_MAX:
        return v
    if v.bit_length() > MAX_BIGINT_BITS:
        ctx.unrepresentable = True  # kept verbatim rather than spelled out (see MAX_BIGINT_BITS)
        return {"@bi": "0"}
    return {"@bi": int_to_decimal(v)}


def _may_be_callable(ctx: _Context, value: Any) -> bool:
    """A class, a reference, or an object built by the pickle: anything else cannot be called."""
    if type(value) is not dict:
        return False
    if len(value) == 1 and ("@cls" in value or "@ref" in value or "@inst" in value):
        return True
    return _obj_of(ctx, value) is not None


def _new_obj(ctx: _Context, kind: int, callable_: Any, args: Any, kwargs: Any = None) -> dict:
    if not _may_be_callable(ctx, callable_):
        ctx.uncallable = True
    value: dict = {}
    obj = Obj(value, kind, callable_, args, kwargs)
    ctx.objs[id(value)] = obj
    render_obj(obj, ctx.objs)
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


def _note_shared(ctx: _Context, value: Any) -> None:
    t = type(value)
    if t is list or t is dict:
        ctx.shared[id(value)] = value


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
    if len(target) == 1 and marker_kind(target) is not None:
        raise _err(f"invalid pickle data: {opname} on non-dict/non-object", pos)
    for i in range(0, len(items), 2):
        k = items[i]
        if type(k) is not str:
            _to_dform(ctx, target, items, i)
            return
        target[k] = items[i + 1]
    if len(target) <= 4 and marker_kind(target, True) is not None:
        _to_dform(ctx, target, [], 0)


def _to_dform(ctx: _Context, target: dict, items: list, start: int) -> None:
    pairs = [[k, v] for k, v in target.items()]
    for i in range(start, len(items), 2):
        pairs.append([items[i], items[i + 1]])
    target.clear()
    target["@d"] = pairs
    ctx.dforms[id(target)] = target


def _new_dict(ctx: _Context, items: list, pos: int) -> dict:
    d: dict = {}
    if items:
        _set_items(ctx, d, items, pos, "DICT")
    return d


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
# Persistent references
# ---------------------------------------------------------------------------

def _persistent_ref(ctx: _Context, pid: Any, pos: int) -> dict:
    """The @ref marker of a persistent id; its oid goes into refs as ZODB's referencesf finds it."""
    oid = None
    first = None
    if type(pid) is dict and len(pid) == 1:
        if "@t" in pid:
            items = pid["@t"]
            if type(items) is list and items:
                first = items[0]
        elif type(pid.get("@b")) is str:
            oid = binascii.a2b_base64(pid["@b"])  # a bare oid (__getnewargs__ classes)
        if type(first) is dict and len(first) == 1 and type(first.get("@b")) is str:
            oid = binascii.a2b_base64(first["@b"])  # (oid, klass)
    elif type(pid) is str and len(pid) == 8 and pid.isascii():
        oid = pid.encode("ascii")  # referencesf takes an ASCII text id as an oid
    if oid is not None and len(oid) == 8:
        ctx.refs.append(_from_bytes(oid, "big", signed=True))
    if not ctx.compact:
        return {"@ref": pid}
    if first is not None and oid is not None and len(pid["@t"]) == 2:
        klass = pid["@t"][1]
        if klass is None:
            return {"@ref": oid.hex()}
        if is_global(klass):
            module, name = klass["@cls"]
            if "." not in name:  # "module.Name" is split at its last dot on the way back
                return {"@ref": [oid.hex(), f"{module}.{name}" if module else name]}
    elif type(pid) is str:
        if _known.is_hex(pid):
            ctx.unrepresentable = True  # would read back as an oid
    elif type(pid) is list and len(pid) == 2 and type(pid[0]) is str and type(pid[1]) is str:
        ctx.unrepresentable = True  # would read back as [oid, class]
    return {"@ref": pid}


# ---------------------------------------------------------------------------
# The opcode walk
# ---------------------------------------------------------------------------

def _load(data: bytes, pos: int, ctx: _Context) -> Tuple[Any, int]:
    """Run the pickle machine from pos to the first STOP; (value, offset after STOP)."""
    end = len(data)
    stack: list = []
    metastack: list = []
    memo = ctx.memo
    push = stack.append
    pop = stack.pop
    b2a = _b2a
    from_bytes = _from_bytes
    unpack_double = _unpack_double
    containers = 0  # container opcodes run: they bound the depth of what is built
    while True:
        if pos >= end:
            raise _eof(pos)
        op = data[pos]
        start = pos
        pos += 1
        try:
            if op == 0x71:  # BINPUT
                if pos >= end:
                    raise _eof(pos)
                if not stack:
                    raise _err("pickle stack underflow", start)
                memo[data[pos]] = stack[-1]
                pos += 1
            elif op == 0x58:  # BINUNICODE
                if pos + 4 > end:
                    raise _eof(pos)
                n = from_bytes(data[pos:pos + 4], "little")
                pos += 4
                if pos + n > end:
                    raise _eof(pos)
                raw = data[pos:pos + n]
                pos += n
                try:
                    s = raw.decode("utf-8")
                    if "\x00" in s:
                        ctx.flags |= F_NUL
                except UnicodeDecodeError:
                    s = _decode_utf8(raw, start, ctx)
                push(s)
            elif op == 0x8C:  # SHORT_BINUNICODE
                if pos >= end:
                    raise _eof(pos)
                n = data[pos]
                pos += 1
                if pos + n > end:
                    raise _eof(pos)
                raw = data[pos:pos + n]
                pos += n
                try:
                    s = raw.decode("utf-8")
                    if "\x00" in s:
                        ctx.flags |= F_NUL
                except UnicodeDecodeError:
                    s = _decode_utf8(raw, start, ctx)
                push(s)
            elif op == 0x68:  # BINGET
                if pos >= end:
                    raise _eof(pos)
                idx = data[pos]
                pos += 1
                try:
                    v = memo[idx]
                except KeyError:
                    raise _err(f"invalid pickle data: memo index {idx} not found", start) from None
                t = type(v)
                if t is list or t is dict:
                    ctx.shared[id(v)] = v
                push(v)
            elif op == 0x94:  # MEMOIZE
                if not stack:
                    raise _err("pickle stack underflow", start)
                memo[len(memo)] = stack[-1]
            elif op == 0x4B:  # BININT1
                if pos >= end:
                    raise _eof(pos)
                push(data[pos])
                pos += 1
            elif op == 0x75:  # SETITEMS
                if not metastack:
                    raise _err("pickle stack underflow (no MARK for SETITEMS)", start)
                items = stack
                stack = metastack.pop()
                push = stack.append
                pop = stack.pop
                if not stack:
                    raise _err("pickle stack underflow", start)
                _set_items(ctx, stack[-1], items, start, "SETITEMS")
            elif op == 0x28:  # MARK
                metastack.append(stack)
                stack = []
                push = stack.append
                pop = stack.pop
            elif op == 0x7D:  # EMPTY_DICT
                containers += 1
                push({})
            elif op == 0x73:  # SETITEM
                if len(stack) < 3:
                    raise _err("pickle stack underflow", start)
                v = pop()
                k = pop()
                _set_items(ctx, stack[-1], [k, v], start, "SETITEM")
            elif op == 0x86:  # TUPLE2
                containers += 1
                if len(stack) < 2:
                    raise _err("pickle stack underflow", start)
                b = pop()
                stack[-1] = {"@t": [stack[-1], b]}
            elif op == 0x4E:  # NONE
                push(None)
            elif op == 0x65:  # APPENDS
                if not metastack:
                    raise _err("pickle stack underflow (no MARK for APPENDS)", start)
                items = stack
                stack = metastack.pop()
                push = stack.append
                pop = stack.pop
                if not stack:
                    raise _err("pickle stack underflow", start)
                _append(ctx, stack[-1], items, start, "APPENDS")
            elif op == 0x5D:  # EMPTY_LIST
                containers += 1
                push([])
            elif op == 0x47:  # BINFLOAT
                if pos + 8 > end:
                    raise _eof(pos)
                x = unpack_double(data, pos)[0]
                pos += 8
                if x == 0.0 or x - x != 0.0 or not (1e-4 <= (x if x > 0 else -x) < 1e16):
                    ctx.flags |= _float_flags(x)
                push(x)
            elif op == 0x4A:  # BININT
                if pos + 4 > end:
                    raise _eof(pos)
                push(from_bytes(data[pos:pos + 4], "little", signed=True))
                pos += 4
            elif op == 0x4D:  # BININT2
                if pos + 2 > end:
                    raise _eof(pos)
                push(data[pos] | (data[pos + 1] << 8))
                pos += 2
            elif op == 0x43:  # SHORT_BINBYTES
                if pos >= end:
                    raise _eof(pos)
                n = data[pos]
                pos += 1
                if pos + n > end:
                    raise _eof(pos)
                push({"@b": b2a(data[pos:pos + n], newline=False).decode("ascii")})
                pos += n
            elif op == 0x63:  # GLOBAL
                module, pos = _text_line(data, pos, start)
                name, pos = _text_line(data, pos, start)
                push({"@cls": [_line_utf8(module, start, ctx), _line_utf8(name, start, ctx)]})
            elif op == 0x52:  # REDUCE
                containers += 1
                if len(stack) < 2:
                    raise _err("pickle stack underflow", start)
                args = pop()
                stack[-1] = _new_obj(ctx, REDUCE, stack[-1], args)
            elif op == 0x81:  # NEWOBJ
                containers += 1
                if len(stack) < 2:
                    raise _err("pickle stack underflow", start)
                args = pop()
                stack[-1] = _new_obj(ctx, NEWOBJ, stack[-1], args)
            elif op == 0x62:  # BUILD
                containers += 1
                if len(stack) < 2:
                    raise _err("pickle stack underflow", start)
                state = pop()
                stack[-1] = _build(ctx, stack[-1], state)
            elif op == 0x85:  # TUPLE1
                containers += 1
                if not stack:
                    raise _err("pickle stack underflow", start)
                stack[-1] = {"@t": [stack[-1]]}
            elif op == 0x51:  # BINPERSID
                containers += 1
                if not stack:
                    raise _err("pickle stack underflow", start)
                stack[-1] = _persistent_ref(ctx, stack[-1], start)
            elif op == 0x42:  # BINBYTES
                if pos + 4 > end:
                    raise _eof(pos)
                n = from_bytes(data[pos:pos + 4], "little")
                pos += 4
                if pos + n > end:
                    raise _eof(pos)
                push({"@b": b2a(data[pos:pos + n], newline=False).decode("ascii")})
                pos += n
            elif op == 0x29:  # EMPTY_TUPLE
                containers += 1
                push({"@t": []})
            elif op == 0x87:  # TUPLE3
                containers += 1
                if len(stack) < 3:
                    raise _err("pickle stack underflow", start)
                c = pop()
                b = pop()
                stack[-1] = {"@t": [stack[-1], b, c]}
            elif op == 0x88:  # NEWTRUE
                push(True)
            elif op == 0x89:  # NEWFALSE
                push(False)
            elif op == 0x74:  # TUPLE
                containers += 1
                if not metastack:
                    raise _err("pickle stack underflow (no MARK for TUPLE)", start)
                items = stack
                stack = metastack.pop()
                push = stack.append
                pop = stack.pop
                push({"@t": items})
            elif op == 0x80:  # PROTO
                if pos >= end:
                    raise _eof(pos)
                if data[pos] > 5:
                    raise _err(f"unsupported pickle protocol: {data[pos]}", start)
                pos += 1
            elif op == 0x95:  # FRAME
                if pos + 8 > end:
                    raise _eof(pos)
                pos += 8
            elif op == 0x2E:  # STOP
                if not stack:
                    raise _err("pickle stack underflow", start)
                ctx.containers += containers
                return stack[-1], pos
            elif op == 0x72:  # LONG_BINPUT
                if pos + 4 > end:
                    raise _eof(pos)
                if not stack:
                    raise _err("pickle stack underflow", start)
                memo[from_bytes(data[pos:pos + 4], "little")] = stack[-1]
                pos += 4
            elif op == 0x6A:  # LONG_BINGET
                if pos + 4 > end:
                    raise _eof(pos)
                idx = from_bytes(data[pos:pos + 4], "little")
                pos += 4
                push(_memo_get(ctx, idx, start))
            elif op == 0x8A:  # LONG1
                if pos >= end:
                    raise _eof(pos)
                n = data[pos]
                pos += 1
                if pos + n > end:
                    raise _eof(pos)
                push(_int_value(from_bytes(data[pos:pos + n], "little", signed=True), ctx))
                pos += n
            elif op == 0x8B:  # LONG4
                if pos + 4 > end:
                    raise _eof(pos)
                n = from_bytes(data[pos:pos + 4], "little", signed=True)
                pos += 4
                if n < 0:
                    raise _err("invalid pickle data: negative length in LONG4", start)
                if pos + n > end:
                    raise _eof(pos)
                push(_int_value(from_bytes(data[pos:pos + n], "little", signed=True), ctx))
                pos += n
            elif op == 0x93:  # STACK_GLOBAL
                if len(stack) < 2:
                    raise _err("pickle stack underflow", start)
                name = pop()
                module = stack[-1]
                if type(module) is not str:
                    raise _err("invalid pickle data: STACK_GLOBAL: module is not a string", start)
                if type(name) is not str:
                    raise _err("invalid pickle data: STACK_GLOBAL: name is not a string", start)
                stack[-1] = {"@cls": [module, name]}
            elif op == 0x30:  # POP
                if stack:
                    pop()
                elif metastack:
                    stack = metastack.pop()
                    push = stack.append
                    pop = stack.pop
                else:
                    raise _err("pickle stack underflow", start)
            elif op == 0x31:  # POP_MARK
                if not metastack:
                    raise _err("pickle stack underflow (no MARK for POP_MARK)", start)
                stack = metastack.pop()
                push = stack.append
                pop = stack.pop
            elif op == 0x32:  # DUP
                if not stack:
                    raise _err("pickle stack underflow", start)
                v = stack[-1]
                _note_shared(ctx, v)
                push(v)
            elif op == 0x61:  # APPEND
                if len(stack) < 2:
                    raise _err("pickle stack underflow", start)
                v = pop()
                _append(ctx, stack[-1], [v], start, "APPEND")
            elif op == 0x6C:  # LIST
                containers += 1
                if not metastack:
                    raise _err("pickle stack underflow (no MARK for LIST)", start)
                items = stack
                stack = metastack.pop()
                push = stack.append
                pop = stack.pop
                push(items)
            elif op == 0x64:  # DICT
                containers += 1
                if not metastack:
                    raise _err("pickle stack underflow (no MARK for DICT)", start)
                items = stack
                stack = metastack.pop()
                push = stack.append
                pop = stack.pop
                push(_new_dict(ctx, items, start))
            elif op == 0x8F:  # EMPTY_SET
                containers += 1
                push({"@set": []})
            elif op == 0x90:  # ADDITEMS
                if not metastack:
                    raise _err("pickle stack underflow (no MARK for ADDITEMS)", start)
                items = stack
                stack = metastack.pop()
                push = stack.append
                pop = stack.pop
                if not stack:
                    raise _err("pickle stack underflow", start)
                target = stack[-1]
                if not (type(target) is dict and len(target) == 1 and "@set" in target):
                    raise _err("invalid pickle data: ADDITEMS on non-set", start)
                if ctx.shared:
                    _note_mutation(ctx, target)
                target["@set"].extend(items)
            elif op == 0x91:  # FROZENSET
                containers += 1
                if not metastack:
                    raise _err("pickle stack underflow (no MARK for FROZENSET)", start)
                items = stack
                stack = metastack.pop()
                push = stack.append
                pop = stack.pop
                push({"@fset": items})
            elif op == 0x92:  # NEWOBJ_EX
                containers += 1
                if len(stack) < 3:
                    raise _err("pickle stack underflow", start)
                kwargs = pop()
                args = pop()
                if type(kwargs) is dict and not kwargs:
                    kwargs = None  # NEWOBJ_EX without keywords is NEWOBJ
                stack[-1] = _new_obj(ctx, NEWOBJ, stack[-1], args, kwargs)
            elif op == 0x8D or op == 0x8E:  # BINUNICODE8 / BINBYTES8
                if pos + 8 > end:
                    raise _eof(pos)
                n = from_bytes(data[pos:pos + 8], "little")
                pos += 8
                if pos + n > end:
                    raise _eof(pos)
                raw = data[pos:pos + n]
                pos += n
                if op == 0x8D:
                    push(_decode_utf8(raw, start, ctx))
                else:
                    push({"@b": b64encode(raw)})
            elif op == 0x96:  # BYTEARRAY8: what protocol 4 writes for a bytearray
                containers += 1
                if pos + 8 > end:
                    raise _eof(pos)
                n = from_bytes(data[pos:pos + 8], "little")
                pos += 8
                if pos + n > end:
                    raise _eof(pos)
                raw_b = {"@b": b64encode(data[pos:pos + n])}
                pos += n
                push(_new_obj(ctx, REDUCE, {"@cls": ["builtins", "bytearray"]}, {"@t": [raw_b]}))
            elif op == 0x54:  # BINSTRING
                if pos + 4 > end:
                    raise _eof(pos)
                n = from_bytes(data[pos:pos + 4], "little", signed=True)
                pos += 4
                if n < 0:
                    raise _err("invalid pickle data: negative length in BINSTRING", start)
                if pos + n > end:
                    raise _eof(pos)
                push({"@b": b64encode(data[pos:pos + n])})
                pos += n
            elif op == 0x55:  # SHORT_BINSTRING
                if pos >= end:
                    raise _eof(pos)
                n = data[pos]
                pos += 1
                if pos + n > end:
                    raise _eof(pos)
                push({"@b": b64encode(data[pos:pos + n])})
                pos += n
            elif op == 0x70:  # PUT
                line, pos = _text_line(data, pos, start)
                if not stack:
                    raise _err("pickle stack underflow", start)
                memo[_memo_index(line, start, "PUT")] = stack[-1]
            elif op == 0x67:  # GET
                line, pos = _text_line(data, pos, start)
                push(_memo_get(ctx, _memo_index(line, start, "GET"), start))
            elif op == 0x49:  # INT
                line, pos = _text_line(data, pos, start)
                if line == b"00":
                    push(False)
                elif line == b"01":
                    push(True)
                else:
                    push(_int_value(_parse_int(line, start, "INT"), ctx))
            elif op == 0x4C:  # LONG
                line, pos = _text_line(data, pos, start)
                if line[-1:] == b"L":
                    line = line[:-1]
                if len(line) > 10000:
                    raise _err("invalid pickle data: LONG value too large", start)
                push(_int_value(_parse_int(line, start, "LONG"), ctx))
            elif op == 0x46:  # FLOAT
                line, pos = _text_line(data, pos, start)
                try:
                    x = float(line.decode("ascii"))
                except (ValueError, UnicodeDecodeError):
                    raise _err(f"invalid pickle data: FLOAT parse: {line[:40]!r}", start) from None
                ctx.flags |= _float_flags(x)
                push(x)
            elif op == 0x53:  # STRING: Python 2 str, escapes decoded as CPython does
                line, pos = _text_line(data, pos, start)
                if len(line) >= 2 and line[0] == line[-1] and line[0] in b"\"'":
                    line = line[1:-1]
                else:
                    raise _err("invalid pickle data: the STRING opcode argument must be quoted", start)
                try:
                    raw = decode_string_escapes(line)
                except CodecError as exc:
                    raise _err(f"invalid pickle data: STRING escape: {exc}", start) from None
                push({"@b": b64encode(raw)})
            elif op == 0x56:  # UNICODE
                line, pos = _text_line(data, pos, start)
                try:
                    s = line.decode("raw-unicode-escape")
                except UnicodeDecodeError as exc:
                    raise _err(f"invalid pickle data: UNICODE escape: {exc.reason}", start) from None
                push(_checked_text(s, ctx))
            elif op == 0x50:  # PERSID
                containers += 1
                line, pos = _text_line(data, pos, start)
                try:
                    pid = line.decode("ascii")
                except UnicodeDecodeError:
                    raise _err("invalid pickle data: persistent IDs in protocol 0 must be ASCII strings",
                               start) from None
                if "\x00" in pid:
                    ctx.flags |= F_NUL
                push(_persistent_ref(ctx, pid, start))
            elif op == 0x69:  # INST
                containers += 1
                module, pos = _text_line(data, pos, start)
                name, pos = _text_line(data, pos, start)
                if not metastack:
                    raise _err("pickle stack underflow (no MARK for INST)", start)
                items = stack
                stack = metastack.pop()
                push = stack.append
                pop = stack.pop
                klass = {"@cls": [_line_utf8(module, start, ctx), _line_utf8(name, start, ctx)]}
                push(_instantiate(ctx, klass, items))
            elif op == 0x6F:  # OBJ
                containers += 1
                if not metastack:
                    raise _err("pickle stack underflow (no MARK for OBJ)", start)
                items = stack
                stack = metastack.pop()
                push = stack.append
                pop = stack.pop
                if not items:
                    raise _err("pickle stack underflow", start)
                push(_instantiate(ctx, items[0], items[1:]))
            elif op == 0x82 or op == 0x83 or op == 0x84:  # EXT1/2/4: extension registry
                width = {0x82: 1, 0x83: 2, 0x84: 4}[op]
                if pos + width > end:
                    raise _eof(pos)
                code = from_bytes(data[pos:pos + width], "little")
                pos += width
                if code <= 0:
                    raise _err("invalid pickle data: EXT code must be positive", start)
                ctx.unrepresentable = True
                push({"@ext": code})
            elif op == 0x97:  # NEXT_BUFFER: out-of-band data JSON cannot hold
                ctx.unrepresentable = True
                push({"@buffer": None})
            elif op == 0x98:  # READONLY_BUFFER
                if not stack:
                    raise _err("pickle stack underflow", start)
            else:
                raise _err(f"unknown pickle opcode: 0x{op:02x}", start)
        except IndexError:
            raise _err("pickle stack underflow", start) from None


def _text_line(data: bytes, pos: int, start: int) -> Tuple[bytes, int]:
    nl = data.find(b"\n", pos)
    if nl < 0:
        raise _eof(len(data))
    return data[pos:nl], nl + 1


def _line_utf8(line: bytes, start: int, ctx: _Context) -> str:
    try:
        s = line.decode("utf-8")
    except UnicodeDecodeError:
        raise _err("invalid UTF-8 in pickle string", start) from None
    if "\x00" in s:
        ctx.flags |= F_NUL
    return s


def _checked_text(s: str, ctx: _Context) -> str:
    if "\x00" in s:
        ctx.flags |= F_NUL
    if not s.isascii():
        try:
            s.encode("utf-8")
        except UnicodeEncodeError:
            ctx.flags |= F_SURROGATE
    return s


def _memo_index(line: bytes, start: int, what: str) -> int:
    try:
        idx = int(line.decode("ascii"))
    except (ValueError, UnicodeDecodeError):
        raise _err(f"invalid pickle data: {what} index: {line[:40]!r}", start) from None
    if idx < 0:
        raise _err(f"invalid pickle data: {what} index: negative", start)
    return idx


def _memo_get(ctx: _Context, idx: int, start: int) -> Any:
    try:
        v = ctx.memo[idx]
    except KeyError:
        raise _err(f"invalid pickle data: memo index {idx} not found", start) from None
    _note_shared(ctx, v)
    return v


def _parse_int(line: bytes, start: int, what: str) -> int:
    """Text digits as CPython's INT/LONG read them; long texts without int()'s digit limit."""
    try:
        text = line.decode("ascii")
        if len(text) > 4000:
            return decimal_to_int(text.strip(), what)
        return int(text, 0)
    except (ValueError, UnicodeDecodeError):  # CodecError is a ValueError too
        raise _err(f"invalid pickle data: {what} parse: {line[:40]!r}", start) from None


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
    return {"@inst": {"@obj": target, "@state": state}}


# ---------------------------------------------------------------------------
# After the walk: depth, cycles, escapes
# ---------------------------------------------------------------------------

# ---------------------------------------------------------------------------
# After the walk
# ---------------------------------------------------------------------------

def _finish(value: Any, ctx: _Context, start: int) -> Any:
    if ctx.containers <= SHALLOW_CONTAINERS:
        ctx.flags |= F_SHALLOW
    return finish(value, ctx.unrepresentable, ctx.cyclic, ctx.containers > DEEP_CONTAINERS, ctx.flags, start)


# ---------------------------------------------------------------------------
# Records and single pickles
# ---------------------------------------------------------------------------

def _decode_record(data: Any, compact: bool = True) -> Tuple[str, str, Any, List[int], int, int]:
    """(module, name, state, refs, flags, offset of the state pickle) of a ZODB record."""
    data = bytes_argument(data)
    ctx = _Context(data, compact)
    try:
        klass, pos = _load(data, 0, ctx)
        class_refs = len(ctx.refs)
        class_unrepresentable, class_cyclic = ctx.unrepresentable, ctx.cyclic
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
                                        ctx.flags)
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
    fresh = _Context(data, ctx.compact)
    fresh.flags = ctx.flags
    fresh.containers = ctx.containers  # the class pickle's arguments are part of the value
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
    if flags & (F_NUL | F_SURROGATE | F_FLOAT | F_EXP_FLOAT):
        state = in_state(sanitize_for_pg, start, state, True, True)
    return module, name, state, refs


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
    ctx = _Context(data, False)
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
