# cython: language_level=3, embedsignature=True
# cython: boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Cython twin of ``_decode_python`` (which is normative): pickle bytes -> marker values.

The same opcode walk, values, flags, errors and messages as the Python twin,
with the input read through a ``const unsigned char*`` (every read checked
against the length first).  In C: the hot opcodes, strings, numbers, base64,
the memo, dicts, persistent references, objects under construction and the
known types and class forms ZODB writes; ``_load`` is a C switch over the
opcode calling one short ``_op_*`` handler each.  Records with the rare
opcodes (protocol 0's text opcodes and DICT, POP, DUP, EMPTY_SET...) and the
single-pickle functions are the Python twin's.  Shared with it
(``_decode_common``): generic calls and persistent ids other than ZODB's
(oid, class) pair.  Shared as well: rarer
known-type shapes (``_known``), the checks after the walk that find something
(``_decode_common``) and the PostgreSQL rewriting; ``_jsontext_cython`` writes the
JSON text.
"""

cimport cython
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_GetItem, PyDict_Next, PyDict_SetItem
from cpython.list cimport PyList_Append, PyList_GET_ITEM, PyList_GET_SIZE
from cpython.long cimport PyLong_AsLongLongAndOverflow, PyLong_FromLongLong
from cpython.pyport cimport PY_SSIZE_T_MAX
from cpython.exc cimport PyErr_Clear, PyErr_ExceptionMatches
from cpython.object cimport PyObject
from cpython.ref cimport Py_DECREF, Py_INCREF, Py_XDECREF
from libc.stdint cimport int32_t, int64_t, uint64_t
from libc.string cimport memchr, memcmp, memcpy
from libc.math cimport fabs, isinf, isnan, signbit

from ._classnames cimport BTREE_IS_MAP, BTREE_IS_TREE, btree_bits
from ._datetext cimport date_state_text, datetime_state_text, decimal_text, offset_text
from ._opcodes cimport *
from ._primitives cimport ZJC_B64_LENGTH, zjc_b64_decode, zjc_b64_encode, zjc_b64_size, zjc_hex_encode

from . import _decode_common, _decode_known, _known
from ._common import CodecError, b64encode, bytes_argument
from ._known import MAX_MARKER_KEYS, decimal_reads, marker_kind, timedelta_exists
from ._decode_common import (
    EXPANSION_FLOOR, EXPANSION_PER_BYTE, Unrepresentable, became_markers, check_class_names_at_offset_0,
    expansion_error, finish, generic_call, hashed_unfaithfully, instance_content, int_value, line_utf8,
    in_persistent_id, is_watched, may_become_a_marker, note_change, note_hashed, note_persistent_id, persistent_ref,
    weight,
)
from ._jsontext_cython cimport pg_json_text
from ._pickletext_cython cimport CLASS_GLOBAL, CLASS_NAMES, CLASS_NAMES_NONE, ClassForm, ClassPickle, lane_text
from . import _decode_python
# One pickle alone, rare beside whole records (no storage or report row calls them): the Python twin's.
from ._decode_python import pickle_to_dict, pickle_to_json


class _PythonTwin(Exception):
    """What only the Python twin reads (rare opcodes, far memo indices): the public function hands it the
    whole input (docs/design.md, "Two twins")."""

# '# window:' comments: what a function holds through a borrowed reference, an unchecked index or a raw buffer,
# and why no Python code runs meanwhile (scripts/windows_table.py: docs/design.md's table).  Kinds used often:
# window kind pickle_bytes: the pickle's bytes (`p`) | an exact, immutable `bytes` the caller holds for the whole call
# window kind new_text: a new `str`'s characters | nothing else can reach it before it is returned
# window kind stack_top: the stack's last slot | the size read again at each use (code may have run since a check)
# window kind one_key_dict: a one-key dict's key and value (borrowed) | compared, or referenced, before any code


cdef extern from "Python.h":
    ctypedef unsigned char Py_UCS1
    # PyUnicode_DecodeUTF8 without Cython's error check: NULL with the error set
    PyObject* _decode_utf8 "PyUnicode_DecodeUTF8"(const char* s, Py_ssize_t size, const char* errors)
    object PyUnicode_New(Py_ssize_t size, Py_UCS4 maxchar)
    Py_UCS1* PyUnicode_1BYTE_DATA(object o)
    Py_ssize_t PyUnicode_GET_LENGTH(object o)
    Py_UCS4 PyUnicode_READ_CHAR(object o, Py_ssize_t index)
    int PyUnicode_IS_ASCII(object o)
    object PyLong_FromVoidPtr(void* p)
    void PyObject_GC_UnTrack(void* op)
    int PyObject_IS_GC(PyObject* op)
    int PyObject_GC_IsTracked(object op)

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
        _decode_common.F_EXP_FLOAT, _decode_common.F_ESCAPED_KEY, _decode_known.REDUCE,
        _decode_known.NEWOBJ):
    raise ImportError("zodb_json_codec._decode_cython was built against other decoder flags")

# _decode_common.DEEP_CONTAINERS less one: references read at once (_fused_ref) are not counted as containers;
# each is a leaf of at most two levels ({"@ref": [oid, class]}), and one container's three allow for it.
cdef Py_ssize_t C_DEEP_CONTAINERS = _decode_common.DEEP_CONTAINERS - 1
cdef object _from_bytes = int.from_bytes
cdef Py_ssize_t C_MAX_MARKER_KEYS = MAX_MARKER_KEYS
cdef int C_WRITTEN_LONGER = _decode_common.F_WRITTEN_LONGER
cdef Py_ssize_t C_WRITTEN_RATIO = _decode_common.WRITTEN_RATIO


# Not tracked by the cycle collector (no decoded value refers to a context), and
# a few kept for reuse: one is made and dropped per call.
@cython.no_gc
@cython.freelist(8)
cdef class _Context:
    """Per-call decoding state (no module-level mutable state: thread safe)."""

    cdef public bint compact     # always: the pickle functions that write verbose references are the Python twin's
    cdef list memo               # memo entries by index (_MISSING where none; far ones: the Python twin)
    cdef Py_ssize_t memo_count   # distinct indices: what MEMOIZE numbers the next one
    cdef int lazy_class          # what the memo's _LAZY_CLASS entry stands for (see _lazy_class_memo)
    cdef public dict objs        # id(value) -> Obj, for REDUCE/NEWOBJ results (or None)
    cdef public dict dforms      # id(dict) -> dict, dicts switched to the @d pair form (or None)
    cdef list watched            # user dicts that may become marker-shaped (_set_items; or None)
    cdef public dict shared      # id -> value for mutable values fetched from the memo / DUP (or None)
    cdef public list pids        # persistent ids of lists or dicts not walked yet (in_persistent_id; or None)
    cdef public dict pid_parts   # id -> list or dict in the persistent ids walked (or None)
    cdef public list hashed      # sets' item lists and @d dicts made (_decode_common.note_hashed; or None)
    cdef public Py_ssize_t changes  # changes to shared values...
    cdef public dict changed     # ...and the values changed after a set or @d dict was made (or None)
    cdef public bint cyclic      # a shared value was mutated: the graph may have a cycle
    cdef public int flags
    cdef public list refs
    cdef public bint unrepresentable
    cdef public bint uncallable  # REDUCE/NEWOBJ of a value no unpickler could call
    cdef public Py_ssize_t containers  # container opcodes run: bounds the nesting depth
    cdef Py_ssize_t fetched      # the weight of the values fetched from the memo / DUP...
    cdef Py_ssize_t budget       # ...and what it may be (_decode_common.expansion_budget)
    cdef Py_ssize_t stop         # offset after the STOP that ended the last walk
    cdef list stack              # the pickle machine's stack...
    cdef list metastack          # ...and the stacks below its MARKs (or None)
    # What a record decodes to:
    cdef str module
    cdef str name
    cdef object state
    cdef Py_ssize_t state_offset
    # What makes the next reference cheaper (_persistent_ref): the last 8 bytes read and their @b text, the
    # names list of the last class a reference named, its two names and its "module.Name".
    cdef unsigned char oid_raw[8]
    cdef object oid_text
    cdef object ref_names
    cdef object ref_module
    cdef object ref_name
    cdef object ref_text


cdef _Context _new_context(Py_ssize_t size):
    """A context for a record of size bytes; the dicts that most records never need are made on first use."""
    cdef _Context ctx = _Context.__new__(_Context)
    ctx.compact = True
    ctx.budget = _budget(size)
    ctx.memo = []
    ctx.refs = []
    return ctx


cdef Py_ssize_t _EXPANSION_FLOOR = EXPANSION_FLOOR
cdef Py_ssize_t _EXPANSION_PER_BYTE = EXPANSION_PER_BYTE
# The largest size whose budget a Py_ssize_t holds, divided once here, not on every call (a 64-bit
# division takes dozens of cycles: small records' decode ran 5-9% slower for it).
cdef Py_ssize_t _BUDGET_SIZE_LIMIT = (PY_SSIZE_T_MAX - _EXPANSION_FLOOR) // _EXPANSION_PER_BYTE


cdef inline Py_ssize_t _budget(Py_ssize_t size) noexcept:
    """_decode_common.expansion_budget(size), at most PY_SSIZE_T_MAX (which no weight reaches)."""
    if size > _BUDGET_SIZE_LIMIT:
        return PY_SSIZE_T_MAX
    return _EXPANSION_FLOOR + _EXPANSION_PER_BYTE * size


cdef object _err(str msg, Py_ssize_t pos):
    return CodecError(f"{msg} at offset {pos}")


cdef object _eof(Py_ssize_t pos):
    return CodecError(f"unexpected end of pickle stream at offset {pos}")


# ---------------------------------------------------------------------------
# Strings, bytes, numbers
# ---------------------------------------------------------------------------

# Short ASCII texts made once and shared: a record's dict keys ("title", "creators") and class names come back
# in every record, and a shared str is one allocation less per use, its hash already known when it is put
# into a dict.  A slot holds the last text that hashed to it (a strong reference; 1024 strs of at most
# _SHARED_TEXT bytes, about 80 KB at most).  Only touched with the GIL held, and nothing between reading and
# writing a slot lets another thread run.  strs are immutable: sharing one is invisible but to `is`.
cdef enum:
    _SHARED_TEXT = 40
    _SHARED_SLOTS = 1024  # a power of 2

cdef PyObject* _shared_texts[_SHARED_SLOTS]


cdef inline bint _shareable(const unsigned char* p, Py_ssize_t n, Py_ssize_t* slot) noexcept:
    """Is p[0:n] 1 to _SHARED_TEXT bytes of ASCII without U+0000?  If so, *slot is its slot: the bytes read
    8 at a time (the last word padded with spaces), each checked and mixed into the hash as it goes."""
    cdef uint64_t h = <uint64_t>n * 0x9E3779B97F4A7C15ULL, w, bad = 0
    cdef Py_ssize_t i = 0
    if n < 1 or n > _SHARED_TEXT:
        return False
    while i < n:
        if n - i >= 8:
            memcpy(&w, p + i, 8)
        else:
            w = 0x2020202020202020ULL
            memcpy(&w, p + i, <size_t>(n - i))
        bad |= (w | ((w - 0x0101010101010101ULL) & ~w)) & 0x8080808080808080ULL  # a byte >= 0x80, or 0
        h = (h ^ w) * 0xFF51AFD7ED558CCDULL
        i += 8
    slot[0] = <Py_ssize_t>((h ^ (h >> 29)) & (_SHARED_SLOTS - 1))
    return bad == 0


cdef str _shared_ascii(const unsigned char* p, Py_ssize_t n, Py_ssize_t slot):
    """The str of the n ASCII bytes at p (_shareable's), from its slot of the table when it is there."""
    # window: a `_shared_texts` entry (borrowed) | making a str runs no code: the entry released is the one read
    cdef PyObject* old = _shared_texts[slot]
    if old != NULL and PyUnicode_GET_LENGTH(<object>old) == n and memcmp(PyUnicode_1BYTE_DATA(<object>old), p, n) == 0:
        return <str>old
    cdef str s = PyUnicode_New(n, 127)
    memcpy(PyUnicode_1BYTE_DATA(s), p, n)
    Py_INCREF(s)
    _shared_texts[slot] = <PyObject*>s
    Py_XDECREF(old)
    return s


cdef str _utf8(const unsigned char* p, Py_ssize_t n, _Context ctx):
    """Text of n UTF-8 bytes.  Lone surrogates (the Python twin reads them with surrogatepass and flags them)
    and invalid UTF-8 (its error) are rare: the Python twin's."""
    cdef Py_ssize_t slot
    if _shareable(p, n, &slot):
        return _shared_ascii(p, n, slot)
    if n and memchr(p, 0, n) != NULL:
        ctx.flags |= F_NUL
    # No try/except: a try block saves and restores the exception state, a cost on every string.
    cdef PyObject* s = _decode_utf8(<const char*>p, n, NULL)
    if s == NULL:
        _clear_decode_error()
        raise _PythonTwin()
    return _owned(s)


cdef inline int _clear_decode_error() except -1:
    """Forget the UnicodeDecodeError just raised; any other error (MemoryError) goes on."""
    if not PyErr_ExceptionMatches(UnicodeDecodeError):
        return -1
    PyErr_Clear()
    return 0


cdef inline str _owned(PyObject* s):
    """The str of a new reference (Cython's cast adds one: give it back)."""
    # window: a new reference handed over | Cython's cast takes a second one, given back: no count drops to 0
    cdef str result = <str>s
    Py_DECREF(result)
    return result


cdef str _b64(const unsigned char* p, Py_ssize_t n):
    """Standard base64 with padding, as binascii.b2a_base64(newline=False) writes it."""
    # window: new_text
    cdef str out = PyUnicode_New(ZJC_B64_LENGTH(n), 127)
    zjc_b64_encode(p, n, PyUnicode_1BYTE_DATA(out))
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


cdef inline uint64_t _be64(const unsigned char* p) noexcept:
    """The 8 bytes at p as a big-endian number: a BINFLOAT's bits, or an oid (signed, as the refs list and
    _decode_common have it)."""
    cdef uint64_t v = 0
    cdef int i
    for i in range(8):
        v = (v << 8) | p[i]
    return v


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
    return int_value(_from_bytes((<const char*>p)[:n], "little", signed=True), ctx)


# ---------------------------------------------------------------------------
# Objects under construction
# ---------------------------------------------------------------------------

cdef inline object _id(object v):
    return PyLong_FromVoidPtr(<void*>v)


cdef inline PyObject* _only_key(object v, PyObject** value) noexcept:
    """The key (borrowed) of v if v is a dict of one entry, its value in *value; else NULL: no hashing."""
    # window: one_key_dict
    cdef Py_ssize_t i = 0
    cdef PyObject* k
    if type(v) is not dict or len(<dict>v) != 1 or not PyDict_Next(<dict>v, &i, &k, value):
        return NULL
    return k


cdef inline bint _is_key(PyObject* k, str key) noexcept:
    """k == key for a key this decoder made: an exact str (a marker's is the module's own constant, so mostly the
    same object); a key of any other type equals no str."""
    # window: a dict's key (borrowed) | identity, type and an exact str's compare: nothing runs
    return k == <PyObject*>key or (type(<object>k) is str and <str>k == key)


cdef inline PyObject* _only_value(object v, str key) noexcept:
    """v[key] (borrowed) if v is a dict of that one key, else NULL."""
    # window: one_key_dict
    cdef PyObject* x
    cdef PyObject* k = _only_key(v, &x)
    return x if k != NULL and _is_key(k, key) else NULL


# Not tracked by the cycle collector: no decoded value ever refers to one.
@cython.no_gc
cdef class _CObj:
    """An object under construction: _decode_common.Obj with C fields (the same attribute names, so the shared _known
    functions read it alike).  items and appends stay None: SETITEMS and APPENDS on an object go to the Python twin."""

    cdef public dict value
    cdef public int kind
    cdef public object callable
    cdef public object args
    cdef public object state
    cdef public bint built
    cdef public object items
    cdef public object appends


cdef bint _may_be_callable(_Context ctx, object value):
    """A class, a reference, or an object built by the pickle: anything else cannot be called."""
    # window: one_key_dict
    cdef PyObject* x
    cdef PyObject* k
    if type(value) is not dict:
        return False
    k = _only_key(value, &x)
    if k != NULL and (_is_key(k, "@cls") or _is_key(k, "@ref") or _is_key(k, "@inst")):
        return True
    return _obj_of(ctx, value) is not None


cdef dict _new_obj(_Context ctx, int kind, object callable_, object args):
    if not _may_be_callable(ctx, callable_):
        ctx.uncallable = True
    cdef _CObj obj = _CObj.__new__(_CObj)
    obj.kind = kind
    obj.callable = callable_
    obj.args = args
    obj.value = _content(obj, ctx)  # a fresh dict: no need to clear one
    if ctx.objs is None:
        ctx.objs = {}
    ctx.objs[_id(obj.value)] = obj
    return obj.value


cdef void _render(_CObj obj, _Context ctx) except *:
    """Rewrite obj.value in place to the markers for what has been built so far."""
    cdef dict content = _content(obj, ctx)
    obj.value.clear()
    obj.value.update(content)


cdef object _global_names(object v):
    """(module, name) of a {"@cls": [module, name]}, as _known.global_name."""
    # window: one_key_dict
    cdef PyObject* found = _only_value(v, "@cls")
    if found == NULL:
        return None
    names = <object>found
    if (type(names) is list and len(<list>names) == 2 and type(names[0]) is str
            and type(names[1]) is str):
        return names
    return None


cdef dict _content(_CObj obj, _Context ctx):
    """_decode_common.obj_content's markers, with the known types ZODB writes most recognised in C and BTree states
    flattened in C (items and appends are None here: SETITEMS and APPENDS on an object go to the Python twin)."""
    cdef bint newobj = obj.kind == K_NEWOBJ
    callable_, args = obj.callable, obj.args
    if not obj.built:
        if not newobj:
            known = _recognize(callable_, args, ctx)
            if known is not None:
                return known
        return generic_call(obj)
    names = _global_names(callable_)
    items = _tuple_items(args) if names is not None else None
    if items is not None and (newobj or not items):
        module, name = names
        state = obj.state
        if newobj and not items and module == "uuid" and name == "UUID":
            uuid_text = _decode_known.uuid_from_state(state)
            if uuid_text is not None:
                return {"@uuid": uuid_text}
        kind = btree_bits(module, name)
        if kind:
            state = _btree_state(state, kind & BTREE_IS_TREE, kind & BTREE_IS_MAP)
        return instance_content(module, name, args, state, obj, newobj)
    return generic_call(obj)


cdef inline object _tuple_items(object v):
    """As _known.tuple_items: the items list of a {"@t": [...]}, else None."""
    # window: one_key_dict
    cdef PyObject* found = _only_value(v, "@t")
    if found != NULL and type(<object>found) is list:
        return <object>found
    return None


cdef object _btree_state(object state, bint is_tree, bint is_map):
    """_decode_known.btree_state in C: the flattened form of a BTree/bucket/set state, or the state itself."""
    # window: a state's items list | its items read into locals right after its size, before anything is made
    cdef Py_ssize_t n
    if state is None:
        return None
    items = _tuple_items(state)
    if items is None:
        return state
    # The state's items read now, before anything is made: making a list or dict may run code (a
    # collection's __del__) that changes the list (see _top).
    n = len(<list>items)
    if n != 1 and n != 2:
        return state
    first = (<list>items)[0]
    second = (<list>items)[1] if n == 2 else None
    found = _tuple_items(first)
    if found is None:
        return state
    if is_tree:
        if n == 1:
            if len(<list>found) == 1:
                found = _tuple_items((<list>found)[0])
                if found is not None and len(<list>found) == 1:
                    found = _tuple_items((<list>found)[0])
                    if found is not None:
                        out = _flat(<list>found, is_map)
                        if out is not None:
                            return out
        else:
            for c in <list>found:
                if _only_value(c, "@ref") != NULL:
                    return {"@children": found, "@first": second}
        return state
    out = _flat(<list>found, is_map)
    if out is None:
        return state
    if n == 2:
        (<dict>out)["@next"] = second
    return out


cdef object _flat(list flat, bint is_map):
    # window: a bucket's flat items list | its size read again before each pair (making a pair may run code)
    cdef Py_ssize_t n = len(flat), i
    cdef list pairs
    if not is_map:
        return {"@ks": flat}
    if n % 2:
        return None  # not a bucket ZODB writes: keep every item in the generic form
    cdef bint atoms = True
    pairs = []
    i = 0
    while i + 1 < PyList_GET_SIZE(flat):  # read again: making the lists may run code (see _top)
        key = <object>PyList_GET_ITEM(flat, i)
        value = <object>PyList_GET_ITEM(flat, i + 1)
        i += 2
        pair = [key, value]
        if _no_container(pair):
            _untracked(pair)
        else:
            atoms = False
        pairs.append(pair)
    if atoms:  # pairs of strs, ints...: nothing in the marker can lead back to it
        return _untracked({"@kv": _untracked(pairs)})
    return {"@kv": pairs}


# ---------------------------------------------------------------------------
# Known types in C (the common shapes; anything else asks _known)
# ---------------------------------------------------------------------------

cdef object _UNSURE = object()  # immutable sentinel: "let _known decide"


cdef Py_ssize_t _b64_small(object v, unsigned char* out, Py_ssize_t cap):
    """Bytes of a canonical {"@b": text} of at most cap bytes into out; -1: not one; -2: ask binascii."""
    # window: one_key_dict
    cdef PyObject* found = _only_value(v, "@b")
    if found == NULL:
        return -1
    text = <object>found
    if type(text) is not str:
        return -1
    if not PyUnicode_IS_ASCII(text):
        return -2
    cdef const unsigned char* t = PyUnicode_1BYTE_DATA(text)
    cdef Py_ssize_t size = zjc_b64_size(t, PyUnicode_GET_LENGTH(text))
    if size < 0 or size > cap or zjc_b64_decode(t, PyUnicode_GET_LENGTH(text), out) < 0:
        return -2
    return size


cdef inline bint _plain_text(object s):
    """As _decode_known._plain_text: ASCII without U+0000."""
    # window: an exact `str`'s characters | `memchr` only
    if type(s) is not str or not PyUnicode_IS_ASCII(s):
        return False
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(s)
    return n == 0 or memchr(PyUnicode_1BYTE_DATA(s), 0, n) == NULL


cdef object _pending_items(object v, _Context ctx, str module, str name):
    """Args items of an unbuilt REDUCE of module.name (as _decode_known._pending_call), else None."""
    # window: an unbuilt object (`ctx.objs`'s entry, borrowed) | referenced (`<_CObj>` into a local) at once
    if type(v) is not dict or not ctx.objs:
        return None
    cdef PyObject* found = PyDict_GetItem(ctx.objs, _id(v))
    if found == NULL:
        return None
    cdef _CObj obj = <_CObj>found
    if obj.value is not v or obj.kind != K_REDUCE or obj.built:
        return None
    names = _global_names(obj.callable)
    if names is None or names[0] != module or names[1] != name:
        return None
    return _tuple_items(obj.args)


cdef object _fixed_offset(object tz, _Context ctx):
    """"+HH:MM" of timezone(timedelta(d, s, us)) as _decode_known._tz_marker writes it; None: no zone;
    _UNSURE: another zone shape."""
    # window: a timezone's, a timedelta's arguments | sizes checked, then all read into a C array at once
    items = _pending_items(tz, ctx, "datetime", "timezone")
    if items is None or len(<list>items) != 1:
        return _UNSURE
    parts = _pending_items((<list>items)[0], ctx, "datetime", "timedelta")
    if parts is None or len(<list>parts) != 3:
        return _UNSURE
    cdef int64_t fields[3]
    cdef Py_ssize_t i
    for i in range(3):  # read into C at once: no index of the list after code may have run (see _top)
        x = (<list>parts)[i]
        if type(x) is not int or not -1000000 < x < 1000000000:  # as offset_field, for any int
            return _UNSURE
        fields[i] = <int64_t>x
    cdef char buf[32]
    cdef int n = offset_text(buf, fields[0], fields[1], fields[2])
    if n < 0:
        return None  # not a valid datetime.timezone
    return buf[:n].decode("ascii")


cdef inline int _state_bytes(object item, unsigned char* raw, Py_ssize_t size) except -1:
    """The @b state of a datetime or date call into raw: 1 if it is size bytes; -2 when
    _decode_known must decide (_b64_small's -2); 0 when it is not such a state."""
    cdef Py_ssize_t got = _b64_small(item, raw, size)
    return 1 if got == size else -2 if got == -2 else 0


cdef object _datetime_marker(list items, _Context ctx):
    # window: a datetime call's arguments | both read right after the size, before the text is made
    cdef unsigned char raw[10]
    cdef Py_ssize_t n = len(items)
    if n != 1 and n != 2:
        return None
    zone = items[1] if n == 2 else None  # read before the text is made (making it may run code: see _top)
    cdef int state = _state_bytes(items[0], raw, 10)
    if state != 1:
        return _UNSURE if state == -2 else None
    cdef char buf[40]
    cdef int length = datetime_state_text(buf, raw)
    if length < 0:
        return None  # includes the protocol 4 fold bit (month >= 128): keep the raw bytes
    text = buf[:length].decode("ascii")
    if n == 1:
        return {"@dt": text}
    offset = _fixed_offset(zone, ctx)
    if offset is _UNSURE:
        return _UNSURE
    if offset is None:
        return None
    return {"@dt": text + offset}


cdef object _date_marker(list items):
    # window: a date call's argument list | its one item read right after its size is read
    cdef unsigned char raw[4]
    if len(items) != 1:
        return None
    cdef int state = _state_bytes(items[0], raw, 4)
    if state != 1:
        return _UNSURE if state == -2 else None
    cdef char buf[16]
    cdef int length = date_state_text(buf, raw)
    if length < 0:
        return None
    return {"@date": buf[:length].decode("ascii")}


cdef object _recognize(object callable_, object args, _Context ctx):
    """_decode_known.recognize_reduce: the usual shapes here, the rest by it."""
    # window: a known call's arguments | each read right after the size, before its marker is made
    cdef int overflow, compact = True  # compact: timedelta parts it surely takes (each under 9 * 10**8)
    names = _global_names(callable_)
    if names is None:
        return None
    items = _tuple_items(args)
    if items is None:
        return None
    module, name = names
    known = _UNSURE
    if module == "datetime":
        if name == "datetime":
            known = _datetime_marker(<list>items, ctx)
        elif name == "date":
            known = _date_marker(<list>items)
        elif name != "timedelta":
            if name != "time":
                return None
        else:
            if len(<list>items) != 3:
                return None
            for x in <list>items:
                if type(x) is not int:
                    return None
                compact &= -900000000 <= PyLong_AsLongLongAndOverflow(x, &overflow) <= 900000000 and not overflow
            if not compact and not timedelta_exists(items):  # a timedelta that exists: the generic call else
                return None
            return _untracked({"@td": _untracked(list(<list>items))})
    elif module == "decimal":
        if name != "Decimal" or len(<list>items) != 1:
            return None
        text = (<list>items)[0]  # read before the marker is made (making it may run code: see _top)
        readable = _plain_text(text) and (decimal_text(PyUnicode_1BYTE_DATA(text), PyUnicode_GET_LENGTH(text))
                                          or decimal_reads(text))
        return {"@dec": text} if readable else None  # a number decimal.Decimal cannot read: the generic call
    elif module == "builtins":
        if (name != "set" and name != "frozenset") or len(<list>items) != 1:
            return None
        values = (<list>items)[0]
        if type(values) is not list:
            return None
        # A copy (list() reads the size after it allocated): the set holds what the list held at the call;
        # the pickle may fill the list later through the memo.
        return {"@set" if name == "set" else "@fset": _noted_set(ctx, list(values))}
    else:
        return None
    if known is _UNSURE:
        return _decode_known.recognize_reduce(callable_, args, ctx.objs or {})
    return known


cdef object _obj_of(_Context ctx, object value):
    # window: an object under construction (borrowed) | referenced (`<_CObj>`) before it is returned
    if type(value) is not dict or not ctx.objs:
        return None
    cdef PyObject* found = PyDict_GetItem(ctx.objs, _id(value))
    if found == NULL:
        return None
    if (<_CObj>found).value is value:
        return <_CObj>found
    return None


cdef inline void _note_mutation(_Context ctx, object target):
    if ctx.shared and _id(target) in ctx.shared:
        ctx.cyclic = True
        if (ctx.pids or ctx.pid_parts) and in_persistent_id(ctx, target):
            ctx.unrepresentable = True  # a persistent id changed after the unpickler read it
        ctx.changes += 1
        if ctx.hashed:
            note_change(ctx, target)


cdef int _share(_Context ctx, object value) except -1:
    if ctx.shared is None:
        ctx.shared = {}
    ctx.shared[_id(value)] = value
    return 0


cdef inline bint _maybe_marker(dict d):
    """False when marker_kind(d) is surely None: its first key is not a str starting with "@"."""
    # window: a dict's first key | a type and a character compared; nothing runs
    cdef Py_ssize_t n = len(d), i = 0
    cdef PyObject* key
    cdef PyObject* val
    if n == 0 or n > C_MAX_MARKER_KEYS:
        return False
    PyDict_Next(d, &i, &key, &val)
    return _at_text(key)


cdef inline bint _at_text(PyObject* k) noexcept:
    """k is a str starting with "@"."""
    # window: a dict's key (borrowed) | a type and a character compared; nothing runs
    return type(<object>k) is str and PyUnicode_GET_LENGTH(<object>k) > 0 and PyUnicode_READ_CHAR(<object>k, 0) == 64


# ---------------------------------------------------------------------------
# Dicts: plain while every key is a str and the dict cannot be taken for a marker
# ---------------------------------------------------------------------------

# The loops below that make lists (pairs) index items with bounds checks: an allocation may run code
# that changes the list (see _top); an index past its end is an IndexError, which _load reports.
@cython.boundscheck(True)
cdef int _set_items(_Context ctx, object target, list items, Py_ssize_t pos, str opname) except -1:
    # window: SETITEM(S)' items | the size read again before each pair; key and value held meanwhile
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
    if _obj_of(ctx, target) is not None:  # the items of a dict subclass (OrderedDict...): rare
        raise _PythonTwin()
    if ctx.dforms:
        dform = ctx.dforms.get(_id(target))
        if dform is not None and dform is target:
            pairs = d["@d"]
            for i in range(0, n, 2):
                pairs.append([items[i], items[i + 1]])
            return 0
    if len(d) == 1 and _maybe_marker(d) and marker_kind(d) is not None and not is_watched(ctx.watched, d):
        raise _err(f"invalid pickle data: {opname} on non-dict/non-object", pos)
    for i in range(0, n, 2):
        # The size read again each step: the checks above, or a dict growing, may run code (a collection's
        # __del__) that changed the list (see _top); key and value are held while the dict takes them.
        if i + 1 >= PyList_GET_SIZE(items):
            raise IndexError(i)
        k = <object>PyList_GET_ITEM(items, i)
        if type(k) is not str:
            _to_dform(ctx, d, items, i)
            return 0
        v = <object>PyList_GET_ITEM(items, i + 1)
        PyDict_SetItem(d, k, v)
    if _maybe_marker(d):
        if marker_kind(d, True) is not None:
            _to_dform(ctx, d, [], 0)
        elif may_become_a_marker(d):
            if ctx.watched is None:
                ctx.watched = []
            ctx.watched.append(d)
    return 0


cdef int _check_watched(_Context ctx) except -1:
    """As the Python twin's: dicts that became marker-shaped after they were filled become @d pairs."""
    for d in became_markers(ctx.watched, ctx.dforms):
        _to_dform(ctx, <dict>d, [], 0)
    return 0


@cython.boundscheck(True)
cdef void _to_dform(_Context ctx, dict target, list items, Py_ssize_t start) except *:
    # window: the rest of SETITEMS' items | bounds-checked: an item gone is an IndexError, which _load reports
    cdef list pairs = [[k, v] for k, v in target.items()]
    cdef Py_ssize_t i
    for i in range(start, len(items), 2):
        pairs.append([items[i], items[i + 1]])
    target.clear()
    target["@d"] = pairs
    if ctx.dforms is None:
        ctx.dforms = {}
    ctx.dforms[_id(target)] = target
    note_hashed(ctx, target)


cdef int _append(_Context ctx, object target, list items, Py_ssize_t pos, str opname) except -1:
    if type(target) is list:
        if ctx.shared:
            _note_mutation(ctx, target)
        (<list>target).extend(items)
        return 0
    if _obj_of(ctx, target) is None:
        raise _err(f"invalid pickle data: {opname} on non-list/non-object", pos)
    raise _PythonTwin()  # the items of a list subclass: rare


# ---------------------------------------------------------------------------
# Persistent references
# ---------------------------------------------------------------------------


cdef inline bint _no_container(list items) noexcept:
    """No item of items can hold a reference (strs, ints, floats, None...: no type the collector walks)."""
    # window: a list's items | `PyObject_IS_GC` only
    cdef Py_ssize_t i
    for i in range(PyList_GET_SIZE(items)):
        if PyObject_IS_GC(PyList_GET_ITEM(items, i)):
            return False
    return True


cdef inline object _untracked(object container):
    """container, untracked by the collector: a list no opcode can reach holding no container (the payloads
    of @ref, @cls, @td; a bucket's pairs of strs, ints), or its marker dict.  No cycle a pickle builds goes
    through one (docs/design.md, "Containers the collector skips": most of a record's containers)."""
    PyObject_GC_UnTrack(<void*>container)
    return container


cdef str _hex(const unsigned char* raw, Py_ssize_t n):
    # window: new_text
    cdef str out = PyUnicode_New(2 * n, 127)
    zjc_hex_encode(raw, n, PyUnicode_1BYTE_DATA(out))
    return out


cdef object _ref_class_text(_Context ctx, object klass):
    """The "module.Name" of a compact @ref's class marker, or None (not one, or a name with a dot).  The last
    one made is kept with its names list, compared by identity: a record's references repeat a few classes."""
    # window: the cached class names and list | compared by identity, no code between
    cdef PyObject* found = _only_value(klass, "@cls")
    if found == NULL:
        return None
    names = <object>found
    if (names is ctx.ref_names and names is not None and PyList_GET_SIZE(names) == 2
            and PyList_GET_ITEM(names, 0) == <PyObject*>ctx.ref_module
            and PyList_GET_ITEM(names, 1) == <PyObject*>ctx.ref_name):
        return ctx.ref_text
    names = _global_names(klass)
    if names is None:
        return None
    module, name = names
    ctx.ref_names = names
    ctx.ref_module = module
    ctx.ref_name = name
    ctx.ref_text = None if "." in name else f"{module}.{name}" if module else name
    return ctx.ref_text


cdef dict _persistent_ref(_Context ctx, object pid, Py_ssize_t pos):
    """The @ref marker of a persistent id; its oid goes into refs as ZODB's referencesf finds it."""
    # window: a pid tuple's items list | both items read right after its size is checked, before `refs` grows
    cdef unsigned char raw[8]
    cdef object items = None
    cdef PyObject* found = _only_value(pid, "@t")
    if found != NULL:
        items = <object>found
        if type(items) is list and len(<list>items) == 2:
            klass = (<list>items)[1]  # read before refs grows (which may run code: see _top)
            if _oid_bytes(ctx, (<list>items)[0], raw):  # ZODB's (oid, class) reference
                ctx.refs.append(<int64_t>_be64(raw))
                ref = _compact_ref(ctx, raw, klass)
                return note_persistent_id(ctx, pid) if ref is None else ref
    return persistent_ref(ctx, pid)


cdef inline bint _oid_bytes(_Context ctx, object first, unsigned char* raw) noexcept:
    """Is first the {"@b": ...} of 8 bytes (an oid)?  If so, they are in raw: the bytes SHORT_BINBYTES just
    read when first is their marker, else read back from its base64 (an oid from the memo)."""
    # window: one_key_dict
    if ctx.oid_text is not None and _only_value(first, "@b") == <PyObject*>ctx.oid_text:
        memcpy(raw, ctx.oid_raw, 8)
        return True
    return _b64_small(first, raw, 8) == 8


cdef dict _compact_ref(_Context ctx, const unsigned char* raw, object klass):
    """The compact @ref of an oid and its class (None: the oid alone), or None: a class that needs the generic form."""
    if klass is None:
        return {"@ref": _hex(raw, 8)}
    dotted = _ref_class_text(ctx, klass)
    if dotted is None:
        return None
    return _untracked({"@ref": _untracked([_hex(raw, 8), dotted])})


cdef inline Py_ssize_t _persid_after(const unsigned char* p, Py_ssize_t pos, Py_ssize_t end) noexcept:
    """The offset after a BINPERSID at pos, or after a BINPUT or LONG_BINPUT then BINPERSID; else -1."""
    if pos < end and p[pos] == BINPERSID:
        return pos + 1
    if pos + 2 < end and p[pos] == BINPUT and p[pos + 2] == BINPERSID:
        return pos + 3
    if pos + 5 < end and p[pos] == LONG_BINPUT and p[pos + 5] == BINPERSID:
        return pos + 6
    return -1


cdef inline Py_ssize_t _op_tuple2(_Context ctx, const unsigned char* p, Py_ssize_t pos, Py_ssize_t end,
                                  Py_ssize_t start) except -1:
    """TUPLE2; with the BINPERSID of ZODB's (oid, class) reference after it, the whole reference (_fused_ref)."""
    cdef Py_ssize_t after = _persid_after(p, pos, end)
    if after > 0 and _fused_ref(ctx, p, pos):
        return after
    _op_tuple_n(ctx, start, 2)
    return pos


cdef bint _fused_ref(_Context ctx, const unsigned char* p, Py_ssize_t pos) except -1:
    """TUPLE2, [LONG_]BINPUT, BINPERSID at once for an (oid, class or None) reference of compact form, without
    the pid tuple (memo: _LAZY_PID, which a GET hands to the Python twin): two containers fewer a reference."""
    # window: the stack's top two values | referenced into locals at once, after the size check
    cdef list stack = ctx.stack
    cdef Py_ssize_t size = PyList_GET_SIZE(stack)
    cdef unsigned char raw[8]
    if size < 2:
        return False
    first = <object>PyList_GET_ITEM(stack, size - 2)
    klass = <object>PyList_GET_ITEM(stack, size - 1)
    if not _oid_bytes(ctx, first, raw):
        return False
    ref = _compact_ref(ctx, raw, klass)
    if ref is None:
        return False
    # Not counted in ctx.containers: C_DEEP_CONTAINERS allows for it.
    ctx.refs.append(<int64_t>_be64(raw))
    if p[pos] != BINPERSID:
        _memo_put(ctx, p[pos + 1] if p[pos] == BINPUT else _le(p + pos + 1, 4), _LAZY_PID)
    stack.pop()  # Cython's pop is a size change; del would go through list slicing
    _set_top(stack, ref)
    return True


# ---------------------------------------------------------------------------
# Text-line opcodes (protocol 0), rare
# ---------------------------------------------------------------------------

cdef Py_ssize_t _line_end(const unsigned char* p, Py_ssize_t pos, Py_ssize_t end) except -1:
    """Offset of the newline ending the line at pos."""
    cdef const void* nl = NULL
    if end > pos:  # (no conditional expression: its temporary would be a void*, which a const memchr refuses)
        nl = memchr(p + pos, 10, end - pos)
    if nl == NULL:
        raise _eof(end)
    return <const unsigned char*>nl - p


cdef object _MISSING = object()  # immutable sentinel: no memo entry at this index
cdef object _LAZY_CLASS = object()  # the class pickle's class marker, made on first GET (_lazy_class_memo)
cdef object _LAZY_PID = object()  # a fused reference's pid tuple, which only the Python twin GETs (_fused_ref)


cdef int _memo_put(_Context ctx, uint64_t idx, object value) except -1:
    """memo[idx] = value in a list while indices are dense; the Python twin takes a record with a far one
    (its memo keeps them in a dict: no memory bomb)."""
    # window: a memo slot (`memo[idx]`) | the index compared with the size just read; nothing runs between
    cdef list memo = ctx.memo
    cdef Py_ssize_t n = PyList_GET_SIZE(memo), i
    if idx < <uint64_t>n:
        if <object>PyList_GET_ITEM(memo, <Py_ssize_t>idx) is _MISSING:
            ctx.memo_count += 1
        memo[<Py_ssize_t>idx] = value
        return 0
    if idx > <uint64_t>(2 * n + 256):
        raise _PythonTwin()
    for i in range(n, <Py_ssize_t>idx):
        PyList_Append(memo, _MISSING)
    PyList_Append(memo, value)
    ctx.memo_count += 1
    return 0


cdef object _memo_get(_Context ctx, uint64_t idx, Py_ssize_t start):
    # window: a memo entry (borrowed) | referenced before `_fetched` (which may allocate)
    cdef list memo = ctx.memo
    cdef PyObject* found = NULL
    if idx < <uint64_t>PyList_GET_SIZE(memo):
        found = PyList_GET_ITEM(memo, <Py_ssize_t>idx)
        if <object>found is _MISSING:
            found = NULL
    if found == NULL:
        raise _err(f"invalid pickle data: memo index {idx} not found", start)
    if <object>found is _LAZY_CLASS:
        return _fetched(ctx, _lazy_class_entry(ctx, idx), start)
    if <object>found is _LAZY_PID:
        raise _PythonTwin()
    value = <object>found  # held: _fetched may allocate (see _top)
    return _fetched(ctx, value, start)


@cython.boundscheck(True)
cdef object _lazy_class_entry(_Context ctx, uint64_t idx):
    """The marker the class pickle's GLOBAL (or TUPLE2 of two names) would have memoized, made now.  Stored
    with a bounds check: making it may run code (a collection's __del__) that changed the memo list."""
    # window: the memo slot it fills | stored bounds-checked after the marker is made (IndexError, _load reports)
    if ctx.lazy_class == _LAZY_GLOBAL:
        value = _untracked({"@cls": _untracked([ctx.module, ctx.name])})
    else:
        value = _untracked({"@t": _untracked([ctx.module, ctx.name])})
    ctx.memo[<Py_ssize_t>idx] = value  # 0 or 2: in the list, which the class pickle's entries began
    return value


cdef inline object _fetched(_Context ctx, object v, Py_ssize_t start):
    """_decode_python._fetched's twin: a str within the budget (most fetches) counted here, all else by
    _fetched_any: small enough for gcc to inline (docs/design.md, "Fast paths")."""
    if type(v) is str and ctx.fetched + 1 + PyUnicode_GET_LENGTH(v) <= ctx.budget:
        ctx.fetched += 1 + PyUnicode_GET_LENGTH(v)
        return v
    return _fetched_any(ctx, v, start)


cdef object _fetched_any(_Context ctx, object v, Py_ssize_t start):
    cdef Py_ssize_t weight
    if type(v) is str:
        ctx.fetched += 1 + PyUnicode_GET_LENGTH(v)
    elif type(v) is list or type(v) is dict:
        weight = _own_class_marker_weight(v)
        if weight < 0:
            _share(ctx, v)
        if not ctx.cyclic:  # else it may hold itself: _decode_common.finish weighs the whole value
            ctx.fetched += weight if weight >= 0 else _weight(v, ctx.budget - ctx.fetched)
    else:
        ctx.fetched += 1
    if ctx.fetched > ctx.budget:
        raise expansion_error(ctx.budget, start)
    return v


cdef Py_ssize_t _own_class_marker_weight(object v) noexcept:
    """The weight of a class marker this decoder made (nothing can change it: not shared), -1 for any other
    value.  A user's dict of that shape is tracked by the collector (a pickle's lists are; _untracked)."""
    # window: a class marker's names (borrowed) | types, tracking and lengths read; nothing runs
    cdef PyObject* names = _only_value(v, "@cls")
    if (names == NULL or PyObject_GC_IsTracked(<object>v) or type(<object>names) is not list
            or PyObject_GC_IsTracked(<object>names) or PyList_GET_SIZE(<object>names) != 2
            or type(<object>PyList_GET_ITEM(<object>names, 0)) is not str
            or type(<object>PyList_GET_ITEM(<object>names, 1)) is not str):
        return -1
    return (9 + PyUnicode_GET_LENGTH(<object>PyList_GET_ITEM(<object>names, 0))
            + PyUnicode_GET_LENGTH(<object>PyList_GET_ITEM(<object>names, 1)))


cdef struct _Part:      # a container being weighed, and where in it the walk is
    PyObject* container
    Py_ssize_t pos

cdef enum:
    _WEIGHED_DEPTH = 64


cdef Py_ssize_t _weight(object value, Py_ssize_t limit) except -1:
    """_decode_common.weight of a list or dict: _tree_weight's, or _decode_common.weight's for a value
    nested deeper than it walks (no record of the benchmarks fetches one)."""
    cdef Py_ssize_t total = _tree_weight(value, limit)
    return weight(value, limit) if total < 0 else total


cdef Py_ssize_t _tree_weight(object value, Py_ssize_t limit) noexcept:
    """_decode_common.weight of a list or dict in C (any number above limit once past it; -1 past
    _WEIGHED_DEPTH levels), read in place with an explicit stack: no code runs, nothing is made."""
    # window: the decoder's own lists and dicts | no code runs: `PyDict_Next`, indexing, a C array of parts
    cdef _Part parts[_WEIGHED_DEPTH]
    cdef Py_ssize_t top = 0, total = 1
    cdef PyObject* node
    cdef PyObject* key
    cdef PyObject* x
    parts[0].container = <PyObject*>value
    parts[0].pos = 0
    while top >= 0:
        node = parts[top].container
        if type(<object>node) is list:
            if parts[top].pos == PyList_GET_SIZE(<object>node):
                top -= 1
                continue
            x = PyList_GET_ITEM(<object>node, parts[top].pos)
            parts[top].pos += 1
        elif PyDict_Next(<object>node, &parts[top].pos, &key, &x):
            total += _leaf_weight(key)  # a dict's keys are strs or other atoms
        else:
            top -= 1
            continue
        if type(<object>x) is list or type(<object>x) is dict:
            total += 1
            top += 1
            if top == _WEIGHED_DEPTH:
                return -1
            parts[top].container = x
            parts[top].pos = 0
        else:
            total += _leaf_weight(x)
        if total > limit:
            return total
    return total


cdef inline Py_ssize_t _leaf_weight(PyObject* x) noexcept:
    """1, and a string's length in code points."""
    # window: a value _tree_weight reached (borrowed) | a type and a str's length read; nothing runs
    if type(<object>x) is str:
        return 1 + PyUnicode_GET_LENGTH(<object>x)
    return 1


cdef object _build(_Context ctx, object target, object state):
    obj = _obj_of(ctx, target)
    if obj is None or obj.built:  # BUILD on a class, a built object or a plain value: hand-made pickles
        raise _PythonTwin()
    if ctx.shared:
        _note_mutation(ctx, target)
    obj.built = True
    obj.state = state
    _render(<_CObj>obj, ctx)
    return target


# ---------------------------------------------------------------------------
# The opcode walk
# ---------------------------------------------------------------------------

# The stack is the decoder's own list, but the code that may run between a handler's checks and its use
# of the top (a REDUCE's rules in Python, a collection: a __del__ can reach any list through
# gc.get_objects()) could have emptied it: _top and _set_top look again rather than read below it.

# The raise is a call of its own, which keeps _top and _set_top small enough for gcc to inline where it
# counts (with it written in them, each GET and PUT paid a call to _top).
cdef int _underflow() except -1:
    raise CodecError("pickle stack underflow")


cdef inline object _top(list stack):
    # window: stack_top
    if PyList_GET_SIZE(stack) == 0:
        _underflow()
    return <object>PyList_GET_ITEM(stack, PyList_GET_SIZE(stack) - 1)


cdef inline list _pop_mark(_Context ctx, Py_ssize_t start, str opname):
    """The items pushed since the last MARK; the stack below it is current again."""
    cdef list items
    if not ctx.metastack:
        raise _err(f"pickle stack underflow (no MARK for {opname})", start)
    items = ctx.stack
    ctx.stack = ctx.metastack.pop()
    return items


cdef inline int _set_top(list stack, object value) except -1:
    # window: stack_top
    if PyList_GET_SIZE(stack) == 0:
        _underflow()
    stack[PyList_GET_SIZE(stack) - 1] = value
    return 0


cdef str _line_text(bytes data, const unsigned char* p, Py_ssize_t a, Py_ssize_t b, Py_ssize_t start,
                    _Context ctx):
    """line_utf8(data[a:b]): in C when the line is plain valid UTF-8."""
    cdef PyObject* s
    if memchr(p + a, 0, b - a) == NULL:
        s = _decode_utf8(<const char*>(p + a), b - a, NULL)
        if s != NULL:
            return _owned(s)
        _clear_decode_error()
    return line_utf8(data[a:b], start, ctx)


cdef inline int64_t _le_at(const unsigned char* p, Py_ssize_t pos, Py_ssize_t end, int width) except -1:
    """The unsigned little-endian number of width (1 to 4) bytes at pos, which must all be there."""
    if pos + width > end:
        raise _eof(pos)
    return <int64_t>_le(p + pos, width)


cdef inline Py_ssize_t _sized(const unsigned char* p, Py_ssize_t pos, Py_ssize_t end, int width,
                              Py_ssize_t* n) except -1:
    """The unsigned width-byte length at pos (BINUNICODE, BINBYTES, their short forms, BINUNICODE8, BYTEARRAY8),
    whose bytes must all follow, into *n; the offset after the length.  Compared unsigned with what is
    left before the cast: a 32-bit Py_ssize_t would take 2**31 and more as negative."""
    cdef uint64_t size
    if pos + width > end:
        raise _eof(pos)
    size = _le(p + pos, width)
    pos += width
    if size > <uint64_t>(end - pos):
        raise _eof(pos)
    n[0] = <Py_ssize_t>size
    return pos


cdef inline Py_ssize_t _signed_sized(const unsigned char* p, Py_ssize_t pos, Py_ssize_t end, int width,
                                     Py_ssize_t* n, str opname) except -1:
    """_sized for the length of LONG1 and SHORT_BINSTRING (width 1), or the signed one of LONG4 and BINSTRING
    (width 4), for which a negative length is an error of its own."""
    if width == 4 and pos + 4 <= end and p[pos + 3] & 0x80:
        raise _err(f"invalid pickle data: negative length in {opname}", pos - 1)
    return _sized(p, pos, end, width, n)


cdef inline Py_ssize_t _op_binput(_Context ctx, const unsigned char* p,
        Py_ssize_t pos, Py_ssize_t end, int width) except -1:
    """BINPUT (width 1), LONG_BINPUT (width 4) or MEMOIZE (width 0: the next index): the top of the stack into
    the memo."""
    cdef int64_t idx = _le_at(p, pos, end, width) if width else <int64_t>ctx.memo_count
    if not ctx.stack:
        raise _err("pickle stack underflow", pos - 1)
    _memo_put(ctx, idx, _top(ctx.stack))
    return pos + width


cdef inline Py_ssize_t _op_binunicode(_Context ctx, const unsigned char* p,
        Py_ssize_t pos, Py_ssize_t end, int width) except -1:
    """BINUNICODE (width 4), SHORT_BINUNICODE (1) or BINUNICODE8 (8): a str of that many UTF-8 bytes."""
    cdef Py_ssize_t n
    pos = _sized(p, pos, end, width, &n)
    PyList_Append(ctx.stack, _utf8(p + pos, n, ctx))
    return pos + n


cdef inline Py_ssize_t _op_binget(_Context ctx, const unsigned char* p,
        Py_ssize_t pos, Py_ssize_t end, int width) except -1:
    """BINGET (width 1) or LONG_BINGET (width 4)."""
    PyList_Append(ctx.stack, _memo_get(ctx, _le_at(p, pos, end, width), pos - 1))
    return pos + width


cdef inline int _op_setitems_or_appends(_Context ctx, Py_ssize_t start, unsigned char op) except -1:
    """SETITEMS or APPENDS: the values above the MARK put into the container below it.  One handler for
    both, so the MARK is popped in one place: gcc leaves _pop_mark a call in the hottest handlers."""
    if not ctx.metastack:
        raise _err(f"pickle stack underflow (no MARK for {'SETITEMS' if op == SETITEMS else 'APPENDS'})", start)
    cdef list items = ctx.stack
    ctx.stack = ctx.metastack.pop()
    if not ctx.stack:
        raise _err("pickle stack underflow", start)
    if op == APPENDS:
        return _append(ctx, _top(ctx.stack), items, start, "APPENDS")
    _set_items(ctx, _top(ctx.stack), items, start, "SETITEMS")
    return 0


cdef inline int _op_mark(_Context ctx, Py_ssize_t start) except -1:
    ctx.containers += 1
    if ctx.metastack is None:
        ctx.metastack = []
    ctx.metastack.append(ctx.stack)
    ctx.stack = []
    return 0


cdef inline int _op_setitem(_Context ctx, Py_ssize_t start) except -1:
    cdef list stack = ctx.stack
    if PyList_GET_SIZE(stack) < 3:
        raise _err("pickle stack underflow", start)
    v = stack.pop()
    k = stack.pop()
    _set_items(ctx, _top(stack), [k, v], start, "SETITEM")
    return 0


cdef inline Py_ssize_t _op_binfloat(_Context ctx, const unsigned char* p,
        Py_ssize_t pos, Py_ssize_t end) except -1:
    cdef double x
    if pos + 8 > end:
        raise _eof(pos)
    cdef uint64_t bits = _be64(p + pos)
    memcpy(&x, &bits, 8)
    pos += 8
    ctx.flags |= _float_flags(x)
    PyList_Append(ctx.stack, x)
    return pos


cdef inline Py_ssize_t _op_binint(_Context ctx, const unsigned char* p,
        Py_ssize_t pos, Py_ssize_t end, int width) except -1:
    """BININT1 and BININT2 (widths 1 and 2, unsigned) or BININT (width 4, signed)."""
    cdef int64_t v = _le_at(p, pos, end, width)
    PyList_Append(ctx.stack, <int32_t>v if width == 4 else v)
    return pos + width


cdef inline Py_ssize_t _op_binbytes(_Context ctx, const unsigned char* p,
        Py_ssize_t pos, Py_ssize_t end, int width) except -1:
    """SHORT_BINBYTES (width 1) or BINBYTES (4): bytes of that many bytes."""
    cdef Py_ssize_t n
    pos = _sized(p, pos, end, width, &n)
    marker = _bytes_marker(p + pos, n)
    if n == 8:  # an oid, mostly: _persistent_ref takes its bytes from here rather than from the base64
        memcpy(ctx.oid_raw, p + pos, 8)
        ctx.oid_text = (<dict>marker)["@b"]
    PyList_Append(ctx.stack, marker)
    pos += n
    return pos


cdef inline Py_ssize_t _op_global(_Context ctx, bytes data, const unsigned char* p,
        Py_ssize_t pos, Py_ssize_t end) except -1:
    cdef Py_ssize_t start = pos - 1
    cdef Py_ssize_t nl
    cdef Py_ssize_t nl2
    ctx.containers += 1
    nl = _line_end(p, pos, end)
    nl2 = _line_end(p, nl + 1, end)
    module = _line_text(data, p, pos, nl, start, ctx)
    name = _line_text(data, p, nl + 1, nl2, start, ctx)
    pos = nl2 + 1
    PyList_Append(ctx.stack, _untracked({"@cls": _untracked([module, name])}))
    return pos


cdef inline int _op_reduce_or_build(_Context ctx, Py_ssize_t start, unsigned char op) except -1:
    """REDUCE and NEWOBJ (the value below the top called with it) or BUILD (the top the state of the object
    below it)."""
    ctx.containers += 1
    if len(ctx.stack) < 2:
        raise _err("pickle stack underflow", start)
    arg = ctx.stack.pop()
    if op == BUILD:
        _set_top(ctx.stack, _build(ctx, _top(ctx.stack), arg))
    else:
        _set_top(ctx.stack, _new_obj(ctx, K_REDUCE if op == REDUCE else K_NEWOBJ, _top(ctx.stack), arg))
    return 0


cdef inline int _op_binpersid(_Context ctx, Py_ssize_t start) except -1:
    ctx.containers += 1
    if not ctx.stack:
        raise _err("pickle stack underflow", start)
    _set_top(ctx.stack, _persistent_ref(ctx, _top(ctx.stack), start))
    return 0


cdef inline Py_ssize_t _op_proto(_Context ctx, const unsigned char* p,
        Py_ssize_t pos, Py_ssize_t end) except -1:
    if _le_at(p, pos, end, 1) > 5:
        raise _err(f"unsupported pickle protocol: {p[pos]}", pos - 1)
    return pos + 1


cdef inline Py_ssize_t _op_frame(_Context ctx, Py_ssize_t pos, Py_ssize_t end) except -1:
    if pos + 8 > end:
        raise _eof(pos)
    pos += 8
    return pos


cdef inline Py_ssize_t _op_long(_Context ctx, const unsigned char* p, Py_ssize_t pos,
        Py_ssize_t end, int width) except -1:
    """LONG1 (width 1) or LONG4 (width 4): an int of that many two's complement bytes."""
    cdef Py_ssize_t n
    pos = _signed_sized(p, pos, end, width, &n, "LONG4")
    PyList_Append(ctx.stack, _signed_le(p + pos, n, ctx))
    return pos + n


cdef inline Py_ssize_t _op_stack_global(_Context ctx, Py_ssize_t pos) except -1:
    cdef Py_ssize_t start = pos - 1
    ctx.containers += 1
    if len(ctx.stack) < 2:
        raise _err("pickle stack underflow", start)
    name = ctx.stack.pop()
    module = _top(ctx.stack)
    if type(module) is not str:
        raise _err("invalid pickle data: STACK_GLOBAL: module is not a string", start)
    if type(name) is not str:
        raise _err("invalid pickle data: STACK_GLOBAL: name is not a string", start)
    _set_top(ctx.stack, _untracked({"@cls": _untracked([module, name])}))
    return pos


cdef inline int _op_append(_Context ctx, Py_ssize_t start) except -1:
    if len(ctx.stack) < 2:
        raise _err("pickle stack underflow", start)
    v = ctx.stack.pop()
    _append(ctx, _top(ctx.stack), [v], start, "APPEND")
    return 0


cdef inline Py_ssize_t _op_bytearray8(_Context ctx, const unsigned char* p,
        Py_ssize_t pos, Py_ssize_t end) except -1:
    """What protocol 5 writes for a bytearray: the call a protocol 2 pickle makes of it."""
    cdef Py_ssize_t n
    pos = _sized(p, pos, end, 8, &n)
    ctx.containers += 1
    PyList_Append(ctx.stack, _new_obj(ctx, K_REDUCE, {"@cls": ["builtins", "bytearray"]},
                                      {"@t": [_bytes_marker(p + pos, n)]}))
    return pos + n


cdef inline Py_ssize_t _op_binstring(_Context ctx, const unsigned char* p, Py_ssize_t pos,
        Py_ssize_t end, int width) except -1:
    """SHORT_BINSTRING (width 1) or BINSTRING (width 4): a Python 2 str (old databases hold many), kept as bytes."""
    cdef Py_ssize_t n
    pos = _signed_sized(p, pos, end, width, &n, "BINSTRING")
    PyList_Append(ctx.stack, _bytes_marker(p + pos, n))
    return pos + n


cdef list _noted_set(_Context ctx, list items):  # noted (note_hashed) if an item may copy unequal or change
    for x in items:
        if type(x) is dict or type(x) is list or type(x) is float:
            note_hashed(ctx, items)
            break
    return items


cdef int _op_collect(_Context ctx, Py_ssize_t start, unsigned char op) except -1:
    """TUPLE, LIST, FROZENSET: the items since the last MARK, as one value."""
    ctx.containers += 1
    items = _pop_mark(ctx, start, "TUPLE" if op == TUPLE else "LIST" if op == LIST else "FROZENSET")
    items = _noted_set(ctx, items) if op == FROZENSET else items
    PyList_Append(ctx.stack, {"@t": items} if op == TUPLE else items if op == LIST else {"@fset": items})
    return 0


cdef object _op_stop(_Context ctx, Py_ssize_t pos, Py_ssize_t start):
    """STOP: the value on top; the dicts filled before their values were (ctx.watched) looked at again.  A call
    of its own, once a pickle: kept out of _load, whose size decides what gcc inlines into it."""
    if not ctx.stack:
        raise _err("pickle stack underflow", start)
    if ctx.watched is not None:
        _check_watched(ctx)
    ctx.stop = pos
    return _top(ctx.stack)


cdef int _op_tuple_n(_Context ctx, Py_ssize_t start, Py_ssize_t n) except -1:
    """TUPLE1, TUPLE2, TUPLE3: the top n values as one tuple.  The items' list is made before the stack is
    read and filled without making anything (a slice reads the size, then allocates: code a collection runs
    there may have shrunk the stack, see _top)."""
    # window: the stack's top n values | the list made first, then filled with nothing made in between
    cdef list stack = ctx.stack
    cdef list items = [None] * n
    cdef Py_ssize_t size = PyList_GET_SIZE(stack), i
    ctx.containers += 1
    if size < n:
        raise _err("pickle stack underflow", start)
    for i in range(n):
        items[i] = <object>PyList_GET_ITEM(stack, size - n + i)
    for i in range(n - 1):
        stack.pop()
    _set_top(stack, {"@t": items})
    return 0


cdef list _first_refs(list refs, Py_ssize_t n):
    """A copy of refs[:n], made before refs is read (see _op_tuple_n)."""
    # window: `refs`'s first n items | the size read again before each item (appending may run code)
    cdef list out = []
    cdef Py_ssize_t i = 0
    while i < n and i < PyList_GET_SIZE(refs):  # appending may run code that changes refs: read again
        out.append(<object>PyList_GET_ITEM(refs, i))
        i += 1
    return out


cdef inline int _push_container(_Context ctx, object value) except -1:
    ctx.containers += 1
    return PyList_Append(ctx.stack, value)


cdef object _load(bytes data, Py_ssize_t pos, _Context ctx):
    """Run the pickle machine from pos to the first STOP: its value (ctx.stop: the offset after it)."""
    # window: pickle_bytes
    cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(data)
    cdef Py_ssize_t end = PyBytes_GET_SIZE(data), start = pos
    cdef unsigned char op
    ctx.stack = []
    ctx.metastack = None  # made at the first MARK
    try:
        while True:
            if pos >= end:
                raise _eof(pos)
            start = pos
            op = p[pos]
            pos += 1
            # A C switch over the opcode; each handler returns the offset after its argument.
            if op == BINPUT: pos = _op_binput(ctx, p, pos, end, 1)
            elif op == BINUNICODE or op == SHORT_BINUNICODE:
                pos = _op_binunicode(ctx, p, pos, end, 4 if op == BINUNICODE else 1)
            elif op == BINGET: pos = _op_binget(ctx, p, pos, end, 1)
            elif op == MEMOIZE: pos = _op_binput(ctx, p, pos, end, 0)
            elif op == BININT1: pos = _op_binint(ctx, p, pos, end, 1)
            elif op == SETITEMS: _op_setitems_or_appends(ctx, start, SETITEMS)
            elif op == MARK: _op_mark(ctx, start)
            elif op == EMPTY_DICT: _push_container(ctx, {})
            elif op == SETITEM: _op_setitem(ctx, start)
            elif op == TUPLE2: pos = _op_tuple2(ctx, p, pos, end, start)
            elif op == NONE: PyList_Append(ctx.stack, None)
            elif op == APPENDS: _op_setitems_or_appends(ctx, start, APPENDS)
            elif op == EMPTY_LIST: _push_container(ctx, [])
            elif op == BINFLOAT: pos = _op_binfloat(ctx, p, pos, end)
            elif op == BININT: pos = _op_binint(ctx, p, pos, end, 4)
            elif op == BININT2: pos = _op_binint(ctx, p, pos, end, 2)
            elif op == SHORT_BINBYTES or op == BINBYTES:
                pos = _op_binbytes(ctx, p, pos, end, 1 if op == SHORT_BINBYTES else 4)
            elif op == GLOBAL: pos = _op_global(ctx, data, p, pos, end)
            elif op == REDUCE or op == NEWOBJ or op == BUILD: _op_reduce_or_build(ctx, start, op)
            elif op == TUPLE1: _op_tuple_n(ctx, start, 1)
            elif op == BINPERSID: _op_binpersid(ctx, start)
            elif op == EMPTY_TUPLE: PyList_Append(ctx.stack, {"@t": []})
            elif op == TUPLE3: _op_tuple_n(ctx, start, 3)
            elif op == NEWTRUE: PyList_Append(ctx.stack, True)
            elif op == NEWFALSE: PyList_Append(ctx.stack, False)
            elif op == TUPLE or op == LIST or op == FROZENSET: _op_collect(ctx, start, op)
            elif op == PROTO: pos = _op_proto(ctx, p, pos, end)
            elif op == FRAME: pos = _op_frame(ctx, pos, end)
            elif op == STOP:
                return _op_stop(ctx, pos, start)
            elif op == LONG_BINPUT: pos = _op_binput(ctx, p, pos, end, 4)
            elif op == LONG_BINGET: pos = _op_binget(ctx, p, pos, end, 4)
            elif op == LONG1 or op == LONG4: pos = _op_long(ctx, p, pos, end, 1 if op == LONG1 else 4)
            elif op == STACK_GLOBAL: pos = _op_stack_global(ctx, pos)
            elif op == APPEND: _op_append(ctx, start)
            elif op == BINUNICODE8: pos = _op_binunicode(ctx, p, pos, end, 8)
            elif op == SHORT_BINSTRING or op == BINSTRING:
                pos = _op_binstring(ctx, p, pos, end, 1 if op == SHORT_BINSTRING else 4)
            elif op == BYTEARRAY8: pos = _op_bytearray8(ctx, p, pos, end)
            else:  # rare in ZODB records (protocol 0's, EMPTY_SET, BINBYTES8...) or unknown: the Python twin's
                raise _PythonTwin()
    except IndexError:  # as in the Python twin: a shape the checks above did not foresee
        raise _err("pickle stack underflow", start) from None


# ---------------------------------------------------------------------------
# After the walk
# ---------------------------------------------------------------------------

cdef object _finish(object value, _Context ctx, Py_ssize_t start):
    """_decode_common.finish where there is something to check: a value of more than C_DEEP_CONTAINERS container
    opcodes that _tree_weight cannot walk either is measured by the explicit-stack walk."""
    cdef bint maybe_deep = ctx.containers > C_DEEP_CONTAINERS
    if ctx.hashed and hashed_unfaithfully(ctx.hashed, ctx.changed, ctx.shared or ctx.flags & F_FLOAT):
        ctx.unrepresentable = True
    if (ctx.unrepresentable or ctx.cyclic or ctx.flags & F_ESCAPED_KEY
            or (ctx.flags & C_WRITTEN_LONGER and ctx.fetched * C_WRITTEN_RATIO > ctx.budget)
            or (maybe_deep and (type(value) is list or type(value) is dict)
                and _tree_weight(value, PY_SSIZE_T_MAX) < 0)):
        return finish(value, ctx.unrepresentable, ctx.cyclic, maybe_deep, ctx.flags, start,
                      ctx.budget, ctx.fetched)
    return value


cdef bint _has_escape_prefix(bytes data):
    """b"@ns:" in data or b"@su:" in data, in one pass."""
    # window: pickle_bytes
    cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(data)
    cdef const unsigned char* end = p + PyBytes_GET_SIZE(data)
    cdef const unsigned char* at
    while p < end:
        at = <const unsigned char*>memchr(p, 64, end - p)
        if at == NULL or end - at < 4:
            return False
        if at[3] == 58 and ((at[1] == 110 and at[2] == 115) or (at[1] == 115 and at[2] == 117)):
            return True
        p = at + 1
    return False


# ---------------------------------------------------------------------------
# The class pickle: read as bytes when it has one of the usual forms
# ---------------------------------------------------------------------------

cdef enum:
    _LAZY_GLOBAL = 1             # memo[0] stands for {"@cls": [module, name]}
    _LAZY_NAMES_TUPLE = 2        # memo[2] stands for {"@t": [module, name]}; memo[0] and [1] are the names


cdef int _lazy_class_memo(_Context ctx, tuple names, ClassPickle* klass) except -1:
    """The context after a class pickle read as bytes: ctx.stop is set after it and ctx.memo holds its
    entries, of which the class marker is only made if the state pickle GETs it (_lazy_class_entry):
    walking it took a quarter of btree_length's decode and an eighth of simple_flat_dict's."""
    ctx.stop = klass.stop
    if klass.form == CLASS_GLOBAL:
        ctx.memo = [_LAZY_CLASS]
        ctx.lazy_class = _LAZY_GLOBAL
        ctx.containers += 1  # the GLOBAL
    elif klass.form == CLASS_NAMES:
        ctx.memo = [names[0], names[1], _LAZY_CLASS]
        ctx.lazy_class = _LAZY_NAMES_TUPLE
        ctx.containers += 1  # the TUPLE2
    else:
        ctx.memo = []
        ctx.lazy_class = 0
        ctx.containers += 2  # the two TUPLE2
    ctx.memo_count = PyList_GET_SIZE(ctx.memo)
    return 0


cdef object _usual_class_names(bytes data, ClassPickle* klass):
    """(module, name) of a class pickle of one of these forms, with *klass saying which and where its
    parts are; else None (the pickle machine reads it).
      ZODB's:    PROTO 2|3, GLOBAL "module\nname\n", BINPUT 0, STOP
      as text:   PROTO 2|3, BINUNICODE module, BINPUT 0, BINUNICODE name, BINPUT 1, TUPLE2, BINPUT 2, STOP
      encoded:   PROTO 2|3, BINUNICODE module, BINUNICODE name, TUPLE2, NONE, TUPLE2, STOP (what
                 encode_zodb_record writes: every record a storage copies from a jsonb storage has it)
    The names are non-empty printable ASCII, which every way of reading them gives alike."""
    # window: pickle_bytes
    cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(data)
    cdef Py_ssize_t end = PyBytes_GET_SIZE(data), a, b
    if end < 8 or p[0] != PROTO or (p[1] != 2 and p[1] != 3):
        return None
    if p[2] == GLOBAL:
        a = _printable_end(p, 3, end)
        if a == 3 or a == end or p[a] != 10:
            return None
        b = _printable_end(p, a + 1, end)
        if b == a + 1 or b + 4 > end or memcmp(p + b, b"\nq\x00.", 4) != 0:
            return None
        _class_parts(klass, CLASS_GLOBAL, b + 4, 3, a - 3, a + 1, b - a - 1)
        return _ascii(p + 3, a - 3), _ascii(p + a + 1, b - a - 1)
    a = _name_end(p, 2, end)
    if a > 0 and a + 2 <= end and p[a] == BINPUT and p[a + 1] == 0:
        b = _name_end(p, a + 2, end)
        if b < 0 or b + 6 > end or memcmp(p + b, b"q\x01\x86q\x02.", 6) != 0:
            return None
        _class_parts(klass, CLASS_NAMES, b + 6, 7, a - 7, a + 7, b - a - 7)
    else:
        b = _name_end(p, a, end) if a > 0 else -1
        if b < 0 or b + 4 > end or memcmp(p + b, b"\x86N\x86.", 4) != 0:
            return None
        _class_parts(klass, CLASS_NAMES_NONE, b + 4, 7, a - 7, a + 5, b - a - 5)
    return _ascii(p + 7, klass.module_size), _ascii(p + klass.name_start, klass.name_size)


cdef inline void _class_parts(ClassPickle* klass, ClassForm form, Py_ssize_t stop, Py_ssize_t module_start,
                              Py_ssize_t module_size, Py_ssize_t name_start, Py_ssize_t name_size) noexcept:
    klass.form = form
    klass.stop = stop
    klass.module_start = module_start
    klass.module_size = module_size
    klass.name_start = name_start
    klass.name_size = name_size


cdef inline Py_ssize_t _printable_end(const unsigned char* p, Py_ssize_t pos, Py_ssize_t end) noexcept:
    """The offset of the first byte from pos on that is not printable ASCII (33-126), or end."""
    while pos < end and <unsigned char>(p[pos] - 33) < 94:
        pos += 1
    return pos


cdef Py_ssize_t _name_end(const unsigned char* p, Py_ssize_t pos, Py_ssize_t end) noexcept:
    """The end of BINUNICODE <non-empty printable ASCII> at pos, or -1."""
    cdef uint64_t n
    if end - pos < 5 or p[pos] != BINUNICODE:
        return -1
    n = _le(p + pos + 1, 4)
    if n == 0 or n > <uint64_t>(end - pos - 5) or _printable_end(p, pos + 5, pos + 5 + <Py_ssize_t>n) != pos + 5 + <Py_ssize_t>n:
        return -1
    return pos + 5 + <Py_ssize_t>n


cdef inline str _ascii(const unsigned char* p, Py_ssize_t n):
    """The str of n ASCII bytes, copied in (the UTF-8 decoder would look at each byte again); shared between
    records (_shared_ascii) when it is short: a class's names come again in every record of the class."""
    # window: new_text
    cdef Py_ssize_t slot
    if _shareable(p, n, &slot):
        return _shared_ascii(p, n, slot)
    cdef str s = PyUnicode_New(n, 127)
    memcpy(PyUnicode_1BYTE_DATA(s), p, n)
    return s


# ---------------------------------------------------------------------------
# Records and single pickles
# ---------------------------------------------------------------------------

cdef _Context _decode_record(object data, object names_read=None,
                             ClassPickle* class_read=NULL):
    """The context of a decoded ZODB record: module, name, state (compact references), refs, flags, state_offset (where
    the state pickle starts).  names_read and class_read: the class pickle already read by _usual_class_names."""
    if type(data) is not bytes:
        data = bytes_argument(data)
    cdef _Context ctx = _new_context(PyBytes_GET_SIZE(data))
    cdef _Context fresh
    cdef ClassPickle own_class
    cdef Py_ssize_t pos = 0
    cdef Py_ssize_t class_refs
    cdef str module = "", name = ""
    try:
        names = names_read
        if names is None:
            names = _usual_class_names(data, &own_class)
            class_read = &own_class
        if names is None:
            klass = _load(data, 0, ctx)
        else:
            klass = None
            _lazy_class_memo(ctx, names, class_read)
            ctx.module, ctx.name = names  # what _lazy_class_entry makes the class marker of
        pos = ctx.stop
        class_refs = len(ctx.refs)
        ctx.uncallable = False
        try:
            state = _load(data, pos, ctx)
            problem = None
        except CodecError as exc:
            problem = exc
        if problem is not None or ctx.uncallable:
            fresh = _load_state_with_own_memo(data, pos, ctx)
            if fresh is not None:
                fresh.refs = _first_refs(ctx.refs, class_refs) + fresh.refs
                state = fresh.state
                ctx = fresh
            elif problem is not None:
                raise problem
        if names is None:  # a class pickle of another form: _decode_known reads them all
            meta = _decode_known.class_metadata(klass)
            if meta is None:  # an object record (docs/format.md, "Class metadata"): rare
                raise _PythonTwin()
            ctx.module, ctx.name, args = meta
        else:
            args = None
            ctx.module, ctx.name = names
        module, name = ctx.module, ctx.name
        if names is None and ("\x00" in module or "\x00" in name):  # names read as bytes are printable
            ctx.flags |= F_NUL
        kind = btree_bits(module, name)
        if kind:
            state = _btree_state(state, kind & BTREE_IS_TREE, kind & BTREE_IS_MAP)
        if args is not None:
            state = {"@args": args, "@state": state}
        if _has_escape_prefix(data):
            ctx.flags |= F_ESCAPED_KEY
        state = _finish(state, ctx, pos)
    except Unrepresentable:
        state = {"@pkl": b64encode(data)}
        ctx.flags &= ~(F_FLOAT | F_EXP_FLOAT | F_SURROGATE | F_ESCAPED_KEY)
        if "\x00" not in module + name:
            ctx.flags &= ~F_NUL
    ctx.module = module
    ctx.name = name
    ctx.state = state
    ctx.state_offset = pos
    return ctx


cdef _Context _load_state_with_own_memo(bytes data, Py_ssize_t pos, _Context ctx):
    """A context whose state is the state pickle read with a memo of its own, or None (see _decode_python)."""
    cdef _Context fresh = _new_context(PyBytes_GET_SIZE(data))
    fresh.flags = ctx.flags
    fresh.containers = ctx.containers
    fresh.fetched = ctx.fetched
    try:
        fresh.state = _load(data, pos, fresh)
    except CodecError:
        return None
    if fresh.uncallable:
        return None
    return fresh


cdef int _check_class_names(str module, str name) except -1:
    """_decode_common.check_class_names_at_offset_0, skipped for plain ASCII names."""
    if not (_plain_text(module) and _plain_text(name)):
        check_class_names_at_offset_0(module, name)
    return 0


def decode_zodb_record(data):
    """A ZODB record as ``{"@cls": [module, name], "@s": state}``.
    Raises TypeError for a non-bytes argument and ValueError for bad data."""
    cdef _Context ctx
    try:
        ctx = _decode_record(data)
    except _PythonTwin:
        return _decode_python.decode_zodb_record(data)
    return {"@cls": _untracked([ctx.module, ctx.name]), "@s": ctx.state}


def decode_zodb_record_for_pg(data):
    """(module, name, state, refs) with state safe for a PostgreSQL jsonb column.
    Raises TypeError for a non-bytes argument and ValueError for bad data."""
    cdef _Context ctx
    try:
        ctx = _decode_record(data)
    except _PythonTwin:
        return _decode_python.decode_zodb_record_for_pg(data)
    _check_class_names(ctx.module, ctx.name)
    return ctx.module, ctx.name, _decode_python.pg_state(ctx.state, ctx.flags, ctx.state_offset), ctx.refs


def decode_zodb_record_for_pg_json(data):
    """(module, name, state_json, refs): the state as JSON text for PostgreSQL jsonb.
    Raises TypeError for a non-bytes argument and ValueError for bad data."""
    cdef ClassPickle klass
    cdef _Context ctx
    names = None
    if type(data) is bytes:
        names = _usual_class_names(<bytes>data, &klass)
        if names is not None:
            row = _lane_row(<bytes>data, names, &klass)
            if row is not None:
                return row
    try:
        ctx = _decode_record(data, names, &klass)
    except _PythonTwin:
        return _decode_python.decode_zodb_record_for_pg_json(data)
    _check_class_names(ctx.module, ctx.name)
    try:
        text = pg_json_text(ctx.state, ctx.flags & (F_NUL | F_SURROGATE | F_FLOAT | F_EXP_FLOAT))
    except CodecError as exc:  # as _decode_common.in_state words it
        raise CodecError(f"{exc} (state pickle at offset {ctx.state_offset})") from None
    return ctx.module, ctx.name, text, ctx.refs


cdef object _lane_row(bytes data, tuple names, ClassPickle* klass):
    """decode_zodb_record_for_pg_json's result by the direct lane, or None: the lane declined."""
    refs = []
    text = lane_text(data, klass, btree_bits(<str>names[0], <str>names[1]), refs, _budget(PyBytes_GET_SIZE(data)))
    return None if text is None else (names[0], names[1], text, refs)


def _direct_lane_record(bytes data not None):
    """For the tests: decode_zodb_record_for_pg_json's result by the direct lane alone, or None."""
    cdef ClassPickle klass
    names = _usual_class_names(data, &klass)
    return None if names is None else _lane_row(data, names, &klass)
