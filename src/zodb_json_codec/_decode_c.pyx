# cython: language_level=3, freethreading_compatible=True, embedsignature=True
# cython: boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Cython twin of ``_decode_py`` (which is normative): pickle bytes -> marker values.

The same opcode walk, values, flags, errors and messages as the pure twin,
with the input read through a ``const unsigned char*`` (every read checked
against the length first) and the hot opcodes, strings, numbers, base64,
dicts and persistent references done in C.  Objects under construction, the
checks after the walk and the JSON text writers are shared
(``_decode_common``, ``_jsontext_c``).
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_GetItem, PyDict_Next, PyDict_SetItem
from cpython.list cimport PyList_Append, PyList_GET_ITEM, PyList_GET_SIZE
from cpython.long cimport PyLong_FromLongLong, PyLong_FromSize_t
from cpython.object cimport PyObject
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport int32_t, int64_t, uint32_t, uint64_t
from libc.string cimport memchr, memcpy
from libc.math cimport fabs, isinf, isnan, signbit

from ._opcodes cimport *

import binascii

from . import _known
from ._common import (
    I64_MAX, I64_MIN, MAX_BIGINT_BITS, MAX_DEPTH, CodecError, b64encode, btree_kind, bytes_argument,
    decimal_to_int, float_marker, int_to_decimal, marker_kind,
)
from . import _decode_common
from ._decode_common import (
    Obj, Unrepresentable, check_class_names_at_offset_0, finish, in_state, render_obj,
)
from ._jsontext_py import pg_json_text, pretty_json_text, sanitize_for_pg

cdef extern from "Python.h":
    ctypedef unsigned char Py_UCS1
    object PyUnicode_New(Py_ssize_t size, Py_UCS4 maxchar)
    Py_UCS1* PyUnicode_1BYTE_DATA(object o)
    Py_ssize_t PyUnicode_GET_LENGTH(object o)
    Py_UCS4 PyUnicode_READ_CHAR(object o, Py_ssize_t index)
    int PyUnicode_IS_ASCII(object o)
    object PyLong_FromVoidPtr(void* p)

# The decoder flags, as in _decode_common (checked at import below).
cdef enum:
    F_NUL = 1
    F_SURROGATE = 2
    F_FLOAT = 4
    F_EXP_FLOAT = 8
    F_ESCAPED_KEY = 16
    K_REDUCE = 0
    K_NEWOBJ = 1

if (F_NUL, F_SURROGATE, F_FLOAT, F_EXP_FLOAT, F_ESCAPED_KEY, K_REDUCE, K_NEWOBJ) != (
        _decode_common.F_NUL, _decode_common.F_SURROGATE, _decode_common.F_FLOAT,
        _decode_common.F_EXP_FLOAT, _decode_common.F_ESCAPED_KEY, _decode_common.REDUCE,
        _decode_common.NEWOBJ):
    raise ImportError("zodb_json_codec._decode_c was built against other decoder flags")

cdef Py_ssize_t C_MAX_DEPTH = MAX_DEPTH
cdef const char* B64_ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
cdef object _a2b = binascii.a2b_base64
cdef object _from_bytes = int.from_bytes


cdef class _Context:
    """Per-call decoding state (no module-level mutable state: thread safe)."""

    cdef public bint compact
    cdef public dict memo
    cdef public dict objs        # id(value) -> Obj, for REDUCE/NEWOBJ results
    cdef public dict dforms      # id(dict) -> dict, dicts switched to the @d pair form
    cdef public dict shared      # id -> value for mutable values fetched from the memo / DUP
    cdef public bint cyclic      # a shared value was mutated: the graph may have a cycle
    cdef public int flags
    cdef public list refs
    cdef public bint unrepresentable
    cdef public bint uncallable  # REDUCE/NEWOBJ of a value no unpickler could call
    cdef public Py_ssize_t containers  # container opcodes run: bounds the nesting depth

    def __init__(self, bint compact):
        self.compact = compact
        self.memo = {}
        self.objs = {}
        self.dforms = {}
        self.shared = {}
        self.cyclic = False
        self.flags = 0
        self.refs = []
        self.unrepresentable = False
        self.uncallable = False
        self.containers = 0


cdef object _err(str msg, Py_ssize_t pos):
    return CodecError(f"{msg} at offset {pos}")


cdef object _eof(Py_ssize_t pos):
    return CodecError(f"unexpected end of pickle stream at offset {pos}")


# ---------------------------------------------------------------------------
# Strings, bytes, numbers
# ---------------------------------------------------------------------------

cdef str _utf8(const unsigned char* p, Py_ssize_t n, Py_ssize_t start, _Context ctx):
    """Text of n UTF-8 bytes; lone surrogates (surrogatepass) are flagged, anything else invalid."""
    cdef str s
    if n and memchr(p, 0, n) != NULL:
        ctx.flags |= F_NUL
    try:
        return PyUnicode_DecodeUTF8(<const char*>p, n, NULL)
    except UnicodeDecodeError:
        pass
    try:
        s = PyUnicode_DecodeUTF8(<const char*>p, n, "surrogatepass")
    except UnicodeDecodeError:
        raise _err("invalid UTF-8 in pickle string", start) from None
    ctx.flags |= F_SURROGATE
    return s


cdef str _b64(const unsigned char* p, Py_ssize_t n):
    """Standard base64 with padding, as binascii.b2a_base64(newline=False) writes it."""
    cdef Py_ssize_t full = n // 3, rest = n - full * 3, i
    cdef str out = PyUnicode_New(((n + 2) // 3) * 4, 127)
    cdef Py_UCS1* o = PyUnicode_1BYTE_DATA(out)
    cdef uint32_t v
    for i in range(full):
        v = (<uint32_t>p[0] << 16) | (<uint32_t>p[1] << 8) | p[2]
        o[0] = B64_ALPHABET[v >> 18]
        o[1] = B64_ALPHABET[(v >> 12) & 63]
        o[2] = B64_ALPHABET[(v >> 6) & 63]
        o[3] = B64_ALPHABET[v & 63]
        p += 3
        o += 4
    if rest == 1:
        v = <uint32_t>p[0] << 16
        o[0] = B64_ALPHABET[v >> 18]
        o[1] = B64_ALPHABET[(v >> 12) & 63]
        o[2] = 61  # '='
        o[3] = 61
    elif rest == 2:
        v = (<uint32_t>p[0] << 16) | (<uint32_t>p[1] << 8)
        o[0] = B64_ALPHABET[v >> 18]
        o[1] = B64_ALPHABET[(v >> 12) & 63]
        o[2] = B64_ALPHABET[(v >> 6) & 63]
        o[3] = 61
    return out


cdef inline dict _bytes_marker(const unsigned char* p, Py_ssize_t n):
    return {"@b": _b64(p, n)}


cdef inline uint64_t _le(const unsigned char* p, int width):
    cdef uint64_t v = 0
    cdef int i
    for i in range(width - 1, -1, -1):
        v = (v << 8) | p[i]
    return v


cdef inline int _float_flags(double x):
    if x == 0.0:
        return F_FLOAT if signbit(x) else 0
    if isnan(x) or isinf(x):
        return F_FLOAT
    cdef double ax = fabs(x)
    if ax >= 1e16 or ax < 1e-4:
        return F_EXP_FLOAT
    return 0


cdef inline double _be_double(const unsigned char* p):
    cdef uint64_t bits = 0
    cdef double x
    cdef int i
    for i in range(8):
        bits = (bits << 8) | p[i]
    memcpy(&x, &bits, 8)
    return x


cdef object _int_value(object v, _Context ctx):
    if I64_MIN <= v <= I64_MAX:
        return v
    if v.bit_length() > MAX_BIGINT_BITS:
        ctx.unrepresentable = True  # kept verbatim rather than spelled out (see MAX_BIGINT_BITS)
        return {"@bi": "0"}
    return {"@bi": int_to_decimal(v)}


cdef object _signed_le(const unsigned char* p, Py_ssize_t n, _Context ctx):
    """A LONG1/LONG4 payload: C arithmetic up to 8 bytes (always within int64)."""
    cdef uint64_t u
    cdef int64_t v
    if n == 0:
        return 0
    if n <= 8:
        u = _le(p, <int>n)
        if n < 8 and (p[n - 1] & 0x80):
            u |= (~<uint64_t>0) << (8 * n)  # sign-extend
        v = <int64_t>u
        return PyLong_FromLongLong(v)
    return _int_value(_from_bytes((<const char*>p)[:n], "little", signed=True), ctx)


# ---------------------------------------------------------------------------
# Objects under construction
# ---------------------------------------------------------------------------

cdef inline object _id(object v):
    return PyLong_FromVoidPtr(<void*>v)


cdef inline bint _is_one_key(object v, str key):
    return type(v) is dict and len(<dict>v) == 1 and key in <dict>v


cdef bint _may_be_callable(_Context ctx, object value):
    """A class, a reference, or an object built by the pickle: anything else cannot be called."""
    if type(value) is not dict:
        return False
    cdef dict d = <dict>value
    if len(d) == 1 and ("@cls" in d or "@ref" in d or "@inst" in d):
        return True
    return _obj_of(ctx, value) is not None


cdef object _new_obj(_Context ctx, int kind, object callable_, object args, object kwargs=None):
    if not _may_be_callable(ctx, callable_):
        ctx.uncallable = True
    cdef dict value = {}
    obj = Obj(value, kind, callable_, args, kwargs)
    ctx.objs[_id(value)] = obj
    render_obj(obj, ctx.objs)
    return value


cdef object _obj_of(_Context ctx, object value):
    if type(value) is not dict or not ctx.objs:
        return None
    cdef PyObject* found = PyDict_GetItem(ctx.objs, _id(value))
    if found == NULL:
        return None
    obj = <object>found
    if obj.value is value:
        return obj
    return None


cdef inline void _note_mutation(_Context ctx, object target):
    if ctx.shared and _id(target) in ctx.shared:
        ctx.cyclic = True


cdef inline void _note_shared(_Context ctx, object value):
    if type(value) is list or type(value) is dict:
        ctx.shared[_id(value)] = value


cdef inline bint _maybe_marker(dict d):
    """False when marker_kind(d) is surely None: its first key is not a str starting with "@"."""
    cdef Py_ssize_t n = len(d), i = 0
    cdef PyObject* key
    cdef PyObject* val
    if n == 0 or n > 4:
        return False
    PyDict_Next(d, &i, &key, &val)
    k = <object>key
    return type(k) is str and PyUnicode_GET_LENGTH(k) > 0 and PyUnicode_READ_CHAR(k, 0) == 64  # "@"


# ---------------------------------------------------------------------------
# Dicts: plain while every key is a str and the dict cannot be taken for a marker
# ---------------------------------------------------------------------------

cdef int _set_items(_Context ctx, object target, list items, Py_ssize_t pos, str opname) except -1:
    cdef Py_ssize_t n = len(items), i
    cdef dict d
    cdef list pairs
    if n % 2:
        raise _err("invalid pickle data: odd number of items for dict", pos)
    if type(target) is not dict:
        raise _err(f"invalid pickle data: {opname} on non-dict/non-object", pos)
    d = <dict>target
    if ctx.shared:
        _note_mutation(ctx, target)
    obj = _obj_of(ctx, target)
    if obj is not None:
        pairs = obj.items
        if pairs is None:
            pairs = obj.items = []
        for i in range(0, n, 2):
            pairs.append([items[i], items[i + 1]])
        render_obj(obj, ctx.objs)
        return 0
    if ctx.dforms:
        dform = ctx.dforms.get(_id(target))
        if dform is not None and dform is target:
            pairs = d["@d"]
            for i in range(0, n, 2):
                pairs.append([items[i], items[i + 1]])
            return 0
    if len(d) == 1 and _maybe_marker(d) and marker_kind(d) is not None:
        raise _err(f"invalid pickle data: {opname} on non-dict/non-object", pos)
    for i in range(0, n, 2):
        k = <object>PyList_GET_ITEM(items, i)
        if type(k) is not str:
            _to_dform(ctx, d, items, i)
            return 0
        PyDict_SetItem(d, k, <object>PyList_GET_ITEM(items, i + 1))
    if _maybe_marker(d) and marker_kind(d, True) is not None:
        _to_dform(ctx, d, [], 0)
    return 0


cdef int _set_item(_Context ctx, object target, object k, object v, Py_ssize_t pos) except -1:
    """SETITEM: the common case (a plain dict, a str key) without a list of two."""
    if (type(target) is dict and type(k) is str and not ctx.shared and not ctx.objs and not ctx.dforms
            and len(<dict>target) != 1 and len(<dict>target) < 4):
        PyDict_SetItem(<dict>target, k, v)
        if _maybe_marker(<dict>target) and marker_kind(target, True) is not None:
            _to_dform(ctx, <dict>target, [], 0)
        return 0
    return _set_items(ctx, target, [k, v], pos, "SETITEM")


cdef void _to_dform(_Context ctx, dict target, list items, Py_ssize_t start) except *:
    cdef list pairs = [[k, v] for k, v in target.items()]
    cdef Py_ssize_t i
    for i in range(start, len(items), 2):
        pairs.append([items[i], items[i + 1]])
    target.clear()
    target["@d"] = pairs
    ctx.dforms[_id(target)] = target


cdef int _append(_Context ctx, object target, list items, Py_ssize_t pos, str opname) except -1:
    if type(target) is list:
        if ctx.shared:
            _note_mutation(ctx, target)
        (<list>target).extend(items)
        return 0
    obj = _obj_of(ctx, target)
    if obj is None:
        raise _err(f"invalid pickle data: {opname} on non-list/non-object", pos)
    if ctx.shared:
        _note_mutation(ctx, target)
    if obj.appends is None:
        obj.appends = []
    obj.appends.extend(items)
    render_obj(obj, ctx.objs)
    return 0


# ---------------------------------------------------------------------------
# Persistent references
# ---------------------------------------------------------------------------

cdef dict _persistent_ref(_Context ctx, object pid, Py_ssize_t pos):
    """The @ref marker of a persistent id; its oid goes into refs as ZODB's referencesf finds it."""
    cdef object oid = None
    cdef object first = None
    cdef list items
    if type(pid) is dict and len(<dict>pid) == 1:
        if "@t" in <dict>pid:
            items = (<dict>pid)["@t"]
            if items:
                first = items[0]
        elif "@b" in <dict>pid:
            oid = _a2b((<dict>pid)["@b"])  # a bare oid (__getnewargs__ classes)
        if _is_one_key(first, "@b"):
            oid = _a2b((<dict>first)["@b"])  # (oid, klass)
    elif type(pid) is str and len(<str>pid) == 8 and (<str>pid).isascii():
        oid = (<str>pid).encode("ascii")  # referencesf takes an ASCII text id as an oid
    if oid is not None and len(oid) == 8:
        ctx.refs.append(_from_bytes(oid, "big", signed=True))
    if not ctx.compact:
        return {"@ref": pid}
    if first is not None and oid is not None and len((<dict>pid)["@t"]) == 2:
        klass = (<dict>pid)["@t"][1]
        if klass is None:
            return {"@ref": oid.hex()}
        if _is_one_key(klass, "@cls"):
            module, name = (<dict>klass)["@cls"]
            if "." not in name:  # "module.Name" is split at its last dot on the way back
                return {"@ref": [oid.hex(), f"{module}.{name}" if module else name]}
    elif type(pid) is str:
        if _known.is_hex(pid):
            ctx.unrepresentable = True  # would read back as an oid
    elif type(pid) is list and len(<list>pid) == 2 and type(pid[0]) is str and type(pid[1]) is str:
        ctx.unrepresentable = True  # would read back as [oid, class]
    return {"@ref": pid}


# ---------------------------------------------------------------------------
# Text-line opcodes (protocol 0), rare
# ---------------------------------------------------------------------------

cdef Py_ssize_t _line_end(const unsigned char* p, Py_ssize_t pos, Py_ssize_t end) except -1:
    """Offset of the newline ending the line at pos."""
    cdef const void* nl = memchr(p + pos, 10, end - pos) if end > pos else NULL
    if nl == NULL:
        raise _eof(end)
    return <const unsigned char*>nl - p


cdef str _line_utf8(bytes line, Py_ssize_t start, _Context ctx):
    try:
        s = line.decode("utf-8")
    except UnicodeDecodeError:
        raise _err("invalid UTF-8 in pickle string", start) from None
    if "\x00" in s:
        ctx.flags |= F_NUL
    return s


cdef str _checked_text(str s, _Context ctx):
    if "\x00" in s:
        ctx.flags |= F_NUL
    if not s.isascii():
        try:
            s.encode("utf-8")
        except UnicodeEncodeError:
            ctx.flags |= F_SURROGATE
    return s


cdef object _memo_index(bytes line, Py_ssize_t start, str what):
    try:
        idx = int(line.decode("ascii"))
    except (ValueError, UnicodeDecodeError):
        raise _err(f"invalid pickle data: {what} index: {line[:40]!r}", start) from None
    if idx < 0:
        raise _err(f"invalid pickle data: {what} index: negative", start)
    return idx


cdef object _memo_get(_Context ctx, object idx, Py_ssize_t start):
    cdef PyObject* found = PyDict_GetItem(ctx.memo, idx)
    if found == NULL:
        raise _err(f"invalid pickle data: memo index {idx} not found", start)
    v = <object>found
    _note_shared(ctx, v)
    return v


cdef object _parse_int(bytes line, Py_ssize_t start, str what):
    """Text digits as CPython's INT/LONG read them; long texts without int()'s digit limit."""
    try:
        text = line.decode("ascii")
        if len(text) > 4000:
            return decimal_to_int(text.strip(), what)
        return int(text, 0)
    except (ValueError, UnicodeDecodeError):  # CodecError is a ValueError too
        raise _err(f"invalid pickle data: {what} parse: {line[:40]!r}", start) from None


cdef object _instantiate(_Context ctx, object klass, list args):
    """INST/OBJ: CPython calls the class when there are arguments, else only __new__."""
    if args:
        return _new_obj(ctx, K_REDUCE, klass, {"@t": args})
    return _new_obj(ctx, K_NEWOBJ, klass, {"@t": []})


cdef object _build(_Context ctx, object target, object state):
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
# The opcode walk
# ---------------------------------------------------------------------------

cdef inline object _top(list stack):
    return <object>PyList_GET_ITEM(stack, PyList_GET_SIZE(stack) - 1)


cdef tuple _load(bytes data, Py_ssize_t pos, _Context ctx):
    """Run the pickle machine from pos to the first STOP; (value, offset after STOP)."""
    cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(data)
    cdef Py_ssize_t end = PyBytes_GET_SIZE(data)
    cdef Py_ssize_t start, n, nl, nl2
    cdef unsigned char op
    cdef int64_t sv
    cdef uint64_t un
    cdef double x
    cdef int width
    cdef list stack = []
    cdef list metastack = []
    cdef list items
    cdef dict memo = ctx.memo
    cdef PyObject* found
    start = pos
    try:
        while True:
            if pos >= end:
                raise _eof(pos)
            op = p[pos]
            start = pos
            pos += 1
            if op == BINPUT:
                if pos >= end:
                    raise _eof(pos)
                if not stack:
                    raise _err("pickle stack underflow", start)
                PyDict_SetItem(memo, p[pos], _top(stack))
                pos += 1
            elif op == BINUNICODE or op == SHORT_BINUNICODE:
                if op == BINUNICODE:
                    if pos + 4 > end:
                        raise _eof(pos)
                    n = <Py_ssize_t>_le(p + pos, 4)
                    pos += 4
                else:
                    if pos >= end:
                        raise _eof(pos)
                    n = p[pos]
                    pos += 1
                if n > end - pos:
                    raise _eof(pos)
                PyList_Append(stack, _utf8(p + pos, n, start, ctx))
                pos += n
            elif op == BINGET:
                if pos >= end:
                    raise _eof(pos)
                found = PyDict_GetItem(memo, p[pos])
                if found == NULL:
                    raise _err(f"invalid pickle data: memo index {p[pos]} not found", start)
                pos += 1
                v = <object>found
                if type(v) is list or type(v) is dict:
                    ctx.shared[_id(v)] = v
                PyList_Append(stack, v)
            elif op == MEMOIZE:
                if not stack:
                    raise _err("pickle stack underflow", start)
                PyDict_SetItem(memo, len(memo), _top(stack))
            elif op == BININT1:
                if pos >= end:
                    raise _eof(pos)
                PyList_Append(stack, p[pos])
                pos += 1
            elif op == SETITEMS:
                if not metastack:
                    raise _err("pickle stack underflow (no MARK for SETITEMS)", start)
                items = stack
                stack = metastack.pop()
                if not stack:
                    raise _err("pickle stack underflow", start)
                _set_items(ctx, _top(stack), items, start, "SETITEMS")
            elif op == MARK:
                ctx.containers += 1
                metastack.append(stack)
                stack = []
            elif op == EMPTY_DICT:
                ctx.containers += 1
                PyList_Append(stack, {})
            elif op == SETITEM:
                if len(stack) < 3:
                    raise _err("pickle stack underflow", start)
                v = stack.pop()
                k = stack.pop()
                _set_item(ctx, _top(stack), k, v, start)
            elif op == TUPLE2:
                ctx.containers += 1
                if len(stack) < 2:
                    raise _err("pickle stack underflow", start)
                b = stack.pop()
                stack[len(stack) - 1] = {"@t": [_top(stack), b]}
            elif op == NONE:
                PyList_Append(stack, None)
            elif op == APPENDS:
                if not metastack:
                    raise _err("pickle stack underflow (no MARK for APPENDS)", start)
                items = stack
                stack = metastack.pop()
                if not stack:
                    raise _err("pickle stack underflow", start)
                _append(ctx, _top(stack), items, start, "APPENDS")
            elif op == EMPTY_LIST:
                ctx.containers += 1
                PyList_Append(stack, [])
            elif op == BINFLOAT:
                if pos + 8 > end:
                    raise _eof(pos)
                x = _be_double(p + pos)
                pos += 8
                ctx.flags |= _float_flags(x)
                PyList_Append(stack, x)
            elif op == BININT:
                if pos + 4 > end:
                    raise _eof(pos)
                PyList_Append(stack, <int32_t>_le(p + pos, 4))
                pos += 4
            elif op == BININT2:
                if pos + 2 > end:
                    raise _eof(pos)
                PyList_Append(stack, <long>(p[pos] | (p[pos + 1] << 8)))
                pos += 2
            elif op == SHORT_BINBYTES or op == BINBYTES:
                if op == SHORT_BINBYTES:
                    if pos >= end:
                        raise _eof(pos)
                    n = p[pos]
                    pos += 1
                else:
                    if pos + 4 > end:
                        raise _eof(pos)
                    n = <Py_ssize_t>_le(p + pos, 4)
                    pos += 4
                if n > end - pos:
                    raise _eof(pos)
                PyList_Append(stack, _bytes_marker(p + pos, n))
                pos += n
            elif op == GLOBAL:
                ctx.containers += 1
                nl = _line_end(p, pos, end)
                nl2 = _line_end(p, nl + 1, end)
                module = _line_utf8(data[pos:nl], start, ctx)
                name = _line_utf8(data[nl + 1:nl2], start, ctx)
                pos = nl2 + 1
                PyList_Append(stack, {"@cls": [module, name]})
            elif op == REDUCE or op == NEWOBJ:
                ctx.containers += 1
                if len(stack) < 2:
                    raise _err("pickle stack underflow", start)
                args = stack.pop()
                stack[len(stack) - 1] = _new_obj(ctx, K_REDUCE if op == REDUCE else K_NEWOBJ, _top(stack), args)
            elif op == BUILD:
                ctx.containers += 1
                if len(stack) < 2:
                    raise _err("pickle stack underflow", start)
                state = stack.pop()
                stack[len(stack) - 1] = _build(ctx, _top(stack), state)
            elif op == TUPLE1:
                ctx.containers += 1
                if not stack:
                    raise _err("pickle stack underflow", start)
                stack[len(stack) - 1] = {"@t": [_top(stack)]}
            elif op == BINPERSID:
                ctx.containers += 1
                if not stack:
                    raise _err("pickle stack underflow", start)
                stack[len(stack) - 1] = _persistent_ref(ctx, _top(stack), start)
            elif op == EMPTY_TUPLE:
                PyList_Append(stack, {"@t": []})
            elif op == TUPLE3:
                ctx.containers += 1
                if len(stack) < 3:
                    raise _err("pickle stack underflow", start)
                c = stack.pop()
                b = stack.pop()
                stack[len(stack) - 1] = {"@t": [_top(stack), b, c]}
            elif op == NEWTRUE:
                PyList_Append(stack, True)
            elif op == NEWFALSE:
                PyList_Append(stack, False)
            elif op == TUPLE:
                ctx.containers += 1
                if not metastack:
                    raise _err("pickle stack underflow (no MARK for TUPLE)", start)
                items = stack
                stack = metastack.pop()
                PyList_Append(stack, {"@t": items})
            elif op == PROTO:
                if pos >= end:
                    raise _eof(pos)
                if p[pos] > 5:
                    raise _err(f"unsupported pickle protocol: {p[pos]}", start)
                pos += 1
            elif op == FRAME:
                if pos + 8 > end:
                    raise _eof(pos)
                pos += 8
            elif op == STOP:
                if not stack:
                    raise _err("pickle stack underflow", start)
                return _top(stack), pos
            elif op == LONG_BINPUT:
                if pos + 4 > end:
                    raise _eof(pos)
                if not stack:
                    raise _err("pickle stack underflow", start)
                PyDict_SetItem(memo, PyLong_FromSize_t(<size_t>_le(p + pos, 4)), _top(stack))
                pos += 4
            elif op == LONG_BINGET:
                if pos + 4 > end:
                    raise _eof(pos)
                idx = PyLong_FromSize_t(<size_t>_le(p + pos, 4))
                pos += 4
                PyList_Append(stack, _memo_get(ctx, idx, start))
            elif op == LONG1:
                if pos >= end:
                    raise _eof(pos)
                n = p[pos]
                pos += 1
                if n > end - pos:
                    raise _eof(pos)
                PyList_Append(stack, _signed_le(p + pos, n, ctx))
                pos += n
            elif op == LONG4:
                if pos + 4 > end:
                    raise _eof(pos)
                n = <int32_t>_le(p + pos, 4)
                pos += 4
                if n < 0:
                    raise _err("invalid pickle data: negative length in LONG4", start)
                if n > end - pos:
                    raise _eof(pos)
                PyList_Append(stack, _signed_le(p + pos, n, ctx))
                pos += n
            elif op == STACK_GLOBAL:
                ctx.containers += 1
                if len(stack) < 2:
                    raise _err("pickle stack underflow", start)
                name = stack.pop()
                module = _top(stack)
                if type(module) is not str:
                    raise _err("invalid pickle data: STACK_GLOBAL: module is not a string", start)
                if type(name) is not str:
                    raise _err("invalid pickle data: STACK_GLOBAL: name is not a string", start)
                stack[len(stack) - 1] = {"@cls": [module, name]}
            elif op == POP:
                if stack:
                    stack.pop()
                elif metastack:
                    stack = metastack.pop()
                else:
                    raise _err("pickle stack underflow", start)
            elif op == POP_MARK:
                if not metastack:
                    raise _err("pickle stack underflow (no MARK for POP_MARK)", start)
                stack = metastack.pop()
            elif op == DUP:
                if not stack:
                    raise _err("pickle stack underflow", start)
                v = _top(stack)
                _note_shared(ctx, v)
                PyList_Append(stack, v)
            elif op == APPEND:
                if len(stack) < 2:
                    raise _err("pickle stack underflow", start)
                v = stack.pop()
                _append(ctx, _top(stack), [v], start, "APPEND")
            elif op == LIST:
                ctx.containers += 1
                if not metastack:
                    raise _err("pickle stack underflow (no MARK for LIST)", start)
                items = stack
                stack = metastack.pop()
                PyList_Append(stack, items)
            elif op == DICT:
                ctx.containers += 1
                if not metastack:
                    raise _err("pickle stack underflow (no MARK for DICT)", start)
                items = stack
                stack = metastack.pop()
                d = {}
                if items:
                    _set_items(ctx, d, items, start, "DICT")
                PyList_Append(stack, d)
            elif op == EMPTY_SET:
                ctx.containers += 1
                PyList_Append(stack, {"@set": []})
            elif op == ADDITEMS:
                if not metastack:
                    raise _err("pickle stack underflow (no MARK for ADDITEMS)", start)
                items = stack
                stack = metastack.pop()
                if not stack:
                    raise _err("pickle stack underflow", start)
                target = _top(stack)
                if not _is_one_key(target, "@set"):
                    raise _err("invalid pickle data: ADDITEMS on non-set", start)
                if ctx.shared:
                    _note_mutation(ctx, target)
                (<dict>target)["@set"].extend(items)
            elif op == FROZENSET:
                ctx.containers += 1
                if not metastack:
                    raise _err("pickle stack underflow (no MARK for FROZENSET)", start)
                items = stack
                stack = metastack.pop()
                PyList_Append(stack, {"@fset": items})
            elif op == NEWOBJ_EX:
                ctx.containers += 1
                if len(stack) < 3:
                    raise _err("pickle stack underflow", start)
                kwargs = stack.pop()
                args = stack.pop()
                if type(kwargs) is dict and not kwargs:
                    kwargs = None  # NEWOBJ_EX without keywords is NEWOBJ
                stack[len(stack) - 1] = _new_obj(ctx, K_NEWOBJ, _top(stack), args, kwargs)
            elif op == BINUNICODE8 or op == BINBYTES8 or op == BYTEARRAY8:
                if pos + 8 > end:
                    raise _eof(pos)
                un = _le(p + pos, 8)
                pos += 8
                if un > <uint64_t>(end - pos):
                    raise _eof(pos)
                n = <Py_ssize_t>un
                if op == BINUNICODE8:
                    PyList_Append(stack, _utf8(p + pos, n, start, ctx))
                elif op == BINBYTES8:
                    PyList_Append(stack, _bytes_marker(p + pos, n))
                else:  # what protocol 4 writes for a bytearray
                    ctx.containers += 1
                    PyList_Append(stack, _new_obj(ctx, K_REDUCE, {"@cls": ["builtins", "bytearray"]},
                                                  {"@t": [_bytes_marker(p + pos, n)]}))
                pos += n
            elif op == BINSTRING:
                if pos + 4 > end:
                    raise _eof(pos)
                n = <int32_t>_le(p + pos, 4)
                pos += 4
                if n < 0:
                    raise _err("invalid pickle data: negative length in BINSTRING", start)
                if n > end - pos:
                    raise _eof(pos)
                PyList_Append(stack, _bytes_marker(p + pos, n))
                pos += n
            elif op == SHORT_BINSTRING:
                if pos >= end:
                    raise _eof(pos)
                n = p[pos]
                pos += 1
                if n > end - pos:
                    raise _eof(pos)
                PyList_Append(stack, _bytes_marker(p + pos, n))
                pos += n
            elif op == PUT:
                nl = _line_end(p, pos, end)
                line = data[pos:nl]
                pos = nl + 1
                if not stack:
                    raise _err("pickle stack underflow", start)
                memo[_memo_index(line, start, "PUT")] = _top(stack)
            elif op == GET:
                nl = _line_end(p, pos, end)
                line = data[pos:nl]
                pos = nl + 1
                PyList_Append(stack, _memo_get(ctx, _memo_index(line, start, "GET"), start))
            elif op == INT:
                nl = _line_end(p, pos, end)
                line = data[pos:nl]
                pos = nl + 1
                if line == b"00":
                    PyList_Append(stack, False)
                elif line == b"01":
                    PyList_Append(stack, True)
                else:
                    PyList_Append(stack, _int_value(_parse_int(line, start, "INT"), ctx))
            elif op == LONG:
                nl = _line_end(p, pos, end)
                line = data[pos:nl]
                pos = nl + 1
                if line.endswith(b"L"):
                    line = line[:len(line) - 1]
                if len(line) > 10000:
                    raise _err("invalid pickle data: LONG value too large", start)
                PyList_Append(stack, _int_value(_parse_int(line, start, "LONG"), ctx))
            elif op == FLOAT:
                nl = _line_end(p, pos, end)
                line = data[pos:nl]
                pos = nl + 1
                try:
                    x = float(line.decode("ascii"))
                except (ValueError, UnicodeDecodeError):
                    raise _err(f"invalid pickle data: FLOAT parse: {line[:40]!r}", start) from None
                ctx.flags |= _float_flags(x)
                PyList_Append(stack, x)
            elif op == STRING:  # Python 2 str, escapes decoded as CPython does
                nl = _line_end(p, pos, end)
                line = data[pos:nl]
                pos = nl + 1
                if len(line) >= 2 and line[0] == line[len(line) - 1] and line[0] in b"\"'":
                    line = line[1:len(line) - 1]
                else:
                    raise _err("invalid pickle data: the STRING opcode argument must be quoted", start)
                try:
                    raw = _escape_decode(line)[0]
                except ValueError as exc:
                    raise _err(f"invalid pickle data: STRING escape: {exc}", start) from None
                PyList_Append(stack, {"@b": b64encode(raw)})
            elif op == UNICODE:
                nl = _line_end(p, pos, end)
                line = data[pos:nl]
                pos = nl + 1
                try:
                    s = line.decode("raw-unicode-escape")
                except UnicodeDecodeError as exc:
                    raise _err(f"invalid pickle data: UNICODE escape: {exc.reason}", start) from None
                PyList_Append(stack, _checked_text(s, ctx))
            elif op == PERSID:
                ctx.containers += 1
                nl = _line_end(p, pos, end)
                line = data[pos:nl]
                pos = nl + 1
                try:
                    pid = line.decode("ascii")
                except UnicodeDecodeError:
                    raise _err("invalid pickle data: persistent IDs in protocol 0 must be ASCII strings",
                               start) from None
                if "\x00" in pid:
                    ctx.flags |= F_NUL
                PyList_Append(stack, _persistent_ref(ctx, pid, start))
            elif op == INST:
                ctx.containers += 1
                nl = _line_end(p, pos, end)
                nl2 = _line_end(p, nl + 1, end)
                module_line = data[pos:nl]
                name_line = data[nl + 1:nl2]
                pos = nl2 + 1
                if not metastack:
                    raise _err("pickle stack underflow (no MARK for INST)", start)
                items = stack
                stack = metastack.pop()
                klass = {"@cls": [_line_utf8(module_line, start, ctx), _line_utf8(name_line, start, ctx)]}
                PyList_Append(stack, _instantiate(ctx, klass, items))
            elif op == OBJ:
                ctx.containers += 1
                if not metastack:
                    raise _err("pickle stack underflow (no MARK for OBJ)", start)
                items = stack
                stack = metastack.pop()
                if not items:
                    raise _err("pickle stack underflow", start)
                PyList_Append(stack, _instantiate(ctx, items[0], items[1:]))
            elif op == EXT1 or op == EXT2 or op == EXT4:  # extension registry
                width = 1 if op == EXT1 else 2 if op == EXT2 else 4
                if pos + width > end:
                    raise _eof(pos)
                un = _le(p + pos, width)
                pos += width
                if un == 0:
                    raise _err("invalid pickle data: EXT code must be positive", start)
                ctx.unrepresentable = True
                PyList_Append(stack, {"@ext": un})
            elif op == NEXT_BUFFER:  # out-of-band data JSON cannot hold
                ctx.unrepresentable = True
                PyList_Append(stack, {"@buffer": None})
            elif op == READONLY_BUFFER:
                if not stack:
                    raise _err("pickle stack underflow", start)
            else:
                raise _err(f"unknown pickle opcode: 0x{op:02x}", start)

    except IndexError:  # as in the pure twin: a shape the checks above did not foresee
        raise _err("pickle stack underflow", start) from None

import codecs
_escape_decode = codecs.escape_decode


# ---------------------------------------------------------------------------
# After the walk
# ---------------------------------------------------------------------------

cdef object _finish(object value, _Context ctx, Py_ssize_t start):
    # Every nesting level comes from a container opcode; known types and
    # BTree states at most double the levels, hence the margin.
    cdef bint maybe_deep = ctx.containers > C_MAX_DEPTH // 2
    return finish(value, ctx.unrepresentable, ctx.cyclic, maybe_deep, ctx.flags, start)


# ---------------------------------------------------------------------------
# Records and single pickles
# ---------------------------------------------------------------------------

cdef tuple _class_metadata(object klass):
    """(module, name, args): ZODB's ((module, name) class, args) form in C, the rest by _known."""
    cdef list items
    cdef object names
    if _is_one_key(klass, "@t"):
        items = (<dict>klass)["@t"]
        if len(items) == 2:
            first = items[0]
            if _is_one_key(first, "@cls"):
                names = (<dict>first)["@cls"]
                if (type(names) is list and len(<list>names) == 2 and type(names[0]) is str
                        and type(names[1]) is str):
                    return names[0], names[1], items[1]
    return _known.class_metadata(klass)


cdef tuple _decode_record(object data, bint compact=True):
    """(module, name, state, refs, flags, offset of the state pickle) of a ZODB record."""
    data = bytes_argument(data)
    cdef _Context ctx = _Context(compact)
    cdef Py_ssize_t pos = 0
    cdef Py_ssize_t class_refs
    module = name = ""
    try:
        klass, pos = _load(data, 0, ctx)
        class_refs = len(ctx.refs)
        ctx.uncallable = False
        try:
            state, _ = _load(data, pos, ctx)
            problem = None
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
        module, name, args = _class_metadata(klass)
        if "\x00" in module or "\x00" in name:
            ctx.flags |= F_NUL
        if module.startswith("BTrees."):
            kind = btree_kind(module, name)
            if kind is not None:
                state = _known.btree_state(state, kind[0], kind[1])
        if args is not None:
            state = {"@args": args, "@state": state}
        if b"@ns:" in data or b"@su:" in data:
            ctx.flags |= F_ESCAPED_KEY
        state = _finish(state, ctx, pos)
    except Unrepresentable:
        state = {"@pkl": b64encode(data)}
        ctx.flags &= ~(F_FLOAT | F_EXP_FLOAT | F_SURROGATE | F_ESCAPED_KEY)
        if "\x00" not in module + name:
            ctx.flags &= ~F_NUL
    except RecursionError:
        raise CodecError("maximum nesting depth exceeded") from None
    return module, name, state, ctx.refs, ctx.flags, pos


cdef object _load_state_with_own_memo(bytes data, Py_ssize_t pos, _Context ctx):
    """(state, context) of a state pickle read with a memo of its own, or None (see _decode_py)."""
    cdef _Context fresh = _Context(ctx.compact)
    fresh.flags = ctx.flags
    fresh.containers = ctx.containers
    try:
        state, _ = _load(data, pos, fresh)
    except CodecError:
        return None
    if fresh.uncallable:
        return None
    return state, fresh


def decode_zodb_record(data):
    """A ZODB record as ``{"@cls": [module, name], "@s": state}``.

    Raises TypeError for a non-bytes argument and ValueError for bad data.
    """
    module, name, state, _, _, _ = _decode_record(data)
    return {"@cls": [module, name], "@s": state}


def decode_zodb_record_for_pg(data):
    """(module, name, state, refs) with state safe for a PostgreSQL jsonb column.

    Raises TypeError for a non-bytes argument and ValueError for bad data.
    """
    module, name, state, refs, flags, start = _decode_record(data)
    check_class_names_at_offset_0(module, name)
    if flags & (F_NUL | F_SURROGATE | F_FLOAT | F_EXP_FLOAT):
        state = in_state(sanitize_for_pg, start, state, True, True)
    return module, name, state, refs


def decode_zodb_record_for_pg_json(data):
    """(module, name, state_json, refs): the state as JSON text for PostgreSQL jsonb.

    Raises TypeError for a non-bytes argument and ValueError for bad data.
    """
    module, name, state, refs, flags, start = _decode_record(data)
    check_class_names_at_offset_0(module, name)
    special = flags & (F_NUL | F_SURROGATE | F_FLOAT | F_EXP_FLOAT)
    return module, name, in_state(pg_json_text, start, state, special), refs


cdef tuple _decode_pickle(object data):
    data = bytes_argument(data)
    cdef _Context ctx = _Context(False)
    cdef Py_ssize_t stop = len(data)
    try:
        value, stop = _load(data, 0, ctx)
        if b"@ns:" in data or b"@su:" in data:
            ctx.flags |= F_ESCAPED_KEY
        return _finish(value, ctx, 0), ctx.flags
    except Unrepresentable:
        return {"@pkl": b64encode(data[:stop])}, 0
    except RecursionError:
        raise CodecError("maximum nesting depth exceeded") from None


def pickle_to_dict(data):
    """One pickle as marker values (references in their verbose form).

    Raises TypeError for a non-bytes argument and ValueError for bad data.
    """
    return _decode_pickle(data)[0]


def pickle_to_json(data):
    """One pickle as pretty JSON text (2-space indent, sorted keys).

    Raises TypeError for a non-bytes argument and ValueError for bad data.
    """
    value, flags = _decode_pickle(data)
    return pretty_json_text(value, flags & (F_FLOAT | F_EXP_FLOAT | F_SURROGATE))
