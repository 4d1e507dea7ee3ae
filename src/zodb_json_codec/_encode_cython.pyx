# cython: language_level=3, embedsignature=True
"""Compiled encoder, the Cython twin of ``_encode_python`` (normative): marker values -> pickle bytes."""

# One walk over the value tree, as in _encode_python, writing opcodes into one growing C buffer (on the C
# stack until it outgrows it).  Every branch mirrors a branch of the Python twin in the same order, so that
# the same inputs give the same bytes and the same first error.  Plain values, the markers real records hold
# and the markers' common shapes are written here in C; rare shapes call the shared rules in _common and _known.

from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.float cimport PyFloat_AS_DOUBLE, PyFloat_FromDouble
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.long cimport PyLong_AsLongLongAndOverflow
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.object cimport PyObject
from cpython.pyport cimport PY_SSIZE_T_MAX
from cpython.ref cimport Py_INCREF
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_New, PyTuple_SET_ITEM
from cpython.unicode cimport (
    PyUnicode_DATA, PyUnicode_DecodeASCII, PyUnicode_FindChar, PyUnicode_GET_LENGTH, PyUnicode_KIND,
    PyUnicode_READ_CHAR,
)
from libc.stdint cimport uint8_t, uint32_t, uint64_t
from libc.string cimport memchr, memcpy, memmove, memset

from ._classnames cimport BTREE_IS_TREE, ascii_at, btree_bits, same_bytes
from ._datetext cimport date_exists, decimal_text
from ._opcodes cimport *
from ._primitives cimport (zjc_ascii_chars, zjc_b64_decode, zjc_b64_size, zjc_code_point, zjc_copy_short,
                           zjc_json_run, zjc_ucs_utf8_init, zjc_unhex, zjc_utf8_of_ucs, zjc_utf8_prefix, zjc_utf8_room)

from . import _encode_known
from ._common import C_WALK_DEPTH, CodecError, b64decode, decimal_to_int
from . import _encode_python, _globals
from ._globals import (CALL, CLASS, VALUE, GlobalsPolicy, check_callable, check_instance_class,
                       check_pickle_globals, located_in_record)
from ._encode_python import (generic_ref_classes, instance_parts, public_functions, record_from_json, record_parts,
                             reduce_parts, str_too_long)
from ._known import MAX_MARKER_KEYS

# '# window:' comments: what a function holds through a borrowed reference, an unchecked index or a raw buffer,
# and why no Python code runs meanwhile (scripts/windows_table.py: docs/design.md's table).  Kinds used often:
# window kind str_chars: a `str`'s characters | held by the caller, immutable; only C and the writer's buffer run
# window kind json_text covers r.p: the JSON text's UTF-8 (`r.p`) | an exact `bytes` or `str` the caller holds
# window kind writer_bytes: the writer's `bytes` (`w.owner`) | the writer's alone until `_result` hands it over


cdef extern from "Python.h":
    bint PyUnicode_IS_ASCII(object o)
    Py_ssize_t PyDict_GET_SIZE(object o)

cdef extern from *:
    """
    #if PY_VERSION_HEX < 0x030C0000
    #define zjc_unicode_ready(o) PyUnicode_READY(o)
    #else
    #define zjc_unicode_ready(o) 0
    #endif

    #if defined(__SSE2__) && defined(__GNUC__) && !defined(ZJC_NO_SIMD)
    #include <emmintrin.h>
    #endif

    /* The value of an int of at most one digit (CPython's "compact" ints): 1, else 0. */
    static int zjc_compact_long(PyObject *v, long long *out) {
    #if PY_VERSION_HEX >= 0x030C0000
        if (PyUnstable_Long_IsCompact((PyLongObject *)v)) {
            *out = (long long)PyUnstable_Long_CompactValue((PyLongObject *)v);
            return 1;
        }
        return 0;
    #else
        Py_ssize_t size = Py_SIZE(v);
        if (size == 0) { *out = 0; return 1; }
        if (size == 1) { *out = (long long)((PyLongObject *)v)->ob_digit[0]; return 1; }
        if (size == -1) { *out = -(long long)((PyLongObject *)v)->ob_digit[0]; return 1; }
        return 0;
    #endif
    }

    /* The offset of the first byte of p[0:n] that is not printable ASCII, or is '"' or a backslash; else n
       (16 bytes at a time where SSE2 is there). */
    static Py_ssize_t zjc_plain_run(const unsigned char *p, Py_ssize_t n) {
        Py_ssize_t i = 0;
        unsigned char c;
    #if defined(__SSE2__) && defined(__GNUC__) && !defined(ZJC_NO_SIMD)
        const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8(92);
        const __m128i space = _mm_set1_epi8(0x20), width = _mm_set1_epi8(0x7E - 0x20), ones = _mm_set1_epi8(-1);
        for (; i + 16 <= n; i += 16) {
            __m128i x = _mm_loadu_si128((const __m128i *)(p + i));
            __m128i above = _mm_sub_epi8(x, space);  /* printable: 0 to 0x5E */
            __m128i printable = _mm_cmpeq_epi8(_mm_min_epu8(above, width), above);
            __m128i stop = _mm_or_si128(_mm_xor_si128(printable, ones),
                                        _mm_or_si128(_mm_cmpeq_epi8(x, quote), _mm_cmpeq_epi8(x, backslash)));
            int mask = _mm_movemask_epi8(stop);
            if (mask) return i + __builtin_ctz((unsigned int)mask);
        }
    #endif
        for (; i < n; i++) {
            c = p[i];
            if (c < 0x20 || c >= 0x7F || c == '"' || c == 92) return i;
        }
        return n;
    }
    """
    int zjc_unicode_ready(object o) except -1
    int zjc_compact_long(object v, long long* out) noexcept
    Py_ssize_t zjc_plain_run(const unsigned char* p, Py_ssize_t n) noexcept


zjc_ucs_utf8_init()


cdef extern from "_dictnext.h":
    int zjc_dict_direct
    bint zjc_dict_walks_agree(object d) noexcept
    bint zjc_dict_next(object d, Py_ssize_t* pos, PyObject** key, PyObject** value) noexcept
    ctypedef struct zjc_dict_run:
        pass
    void zjc_dict_run_open(object d, Py_ssize_t pos, zjc_dict_run* run) noexcept
    bint zjc_dict_run_next(zjc_dict_run* run, Py_ssize_t* pos, PyObject** key, PyObject** value) noexcept
    bint zjc_dict_pair(object d, PyObject** k0, PyObject** v0, PyObject** k1, PyObject** v1) noexcept


cdef void _choose_dict_walk() except *:
    """Lets the walk read CPython's entries only if it gives what PyDict_Next gives on dicts of every form it reads
    (text keys and int keys, every third one deleted or not, 1- and 2-byte indices): _dictnext.h."""
    global zjc_dict_direct
    cdef bint agree = True
    zjc_dict_direct = 1  # for the walks compared: they read the entries
    for size in (0, 1, 5, 6, 40, 300):
        for text_keys in (False, True):
            for holes in (False, True):
                d = {}
                for i in range(size):
                    k = f"k{i}" if text_keys else i
                    d[k] = i + 1000
                    if holes and i % 3 == 1:
                        del d[k]
                agree = agree and zjc_dict_walks_agree(d)
    zjc_dict_direct = agree


_choose_dict_walk()


# The walk recurses in C at most this deep (_common.C_WALK_DEPTH): a value nested deeper is encoded by the
# Python twin, whose walk keeps its stack on the heap (and says where MAX_DEPTH is passed).
cdef Py_ssize_t _C_WALK = C_WALK_DEPTH


class _PythonTwin(Exception):
    """A value nested deeper than the C walk goes, or one only the Python twin writes (Python values other
    than exact tuples and bytes, lone surrogates, the rare markers and shapes docs/design.md's "Two twins"
    lists): the public function hands it to the Python twin."""


cdef object _PYTHON_TWIN = _PythonTwin
# The Python twin's functions that take such values (zjc_encode).
cdef object _python_pickle_value = _encode_python.pickle_value


cdef int _python_twin() except -1:
    raise _PythonTwin()


_PythonWriter = _encode_python._Writer


cdef extern from *:
    """
    /* f(arg, policy), or fallback(arg, policy) where f raised twin; a ValueError from either is replaced by
       locate(error, arg) (a GlobalRefused says where it stands).  No try statement: it shows on small records. */
    static PyObject *zjc_encode(PyObject *(*f)(PyObject *, PyObject *), PyObject *arg, PyObject *policy,
                                PyObject *twin, PyObject *fallback, PyObject *locate) {
        PyObject *result = f(arg, policy);
        if (result == NULL && PyErr_ExceptionMatches(twin)) {
            PyErr_Clear();
            result = PyObject_CallFunctionObjArgs(fallback, arg, policy, NULL);
        }
        if (result == NULL && locate != NULL && PyErr_Occurred() && PyErr_ExceptionMatches(PyExc_ValueError)) {
            PyObject *type, *value, *tb, *located;
            PyErr_Fetch(&type, &value, &tb);
            PyErr_NormalizeException(&type, &value, &tb);
            located = PyObject_CallFunctionObjArgs(locate, value, arg, NULL);
            if (located == NULL) {
                Py_XDECREF(type); Py_XDECREF(value); Py_XDECREF(tb);
                return NULL;
            }
            if (located == value) {
                Py_DECREF(located);
                PyErr_Restore(type, value, tb);
                return NULL;
            }
            Py_XDECREF(type); Py_XDECREF(value); Py_XDECREF(tb);
            PyErr_SetObject((PyObject *)Py_TYPE(located), located);
            Py_DECREF(located);
        }
        return result;
    }
    #ifdef Py_GIL_DISABLED
    #define ZJC_SHARED_TABLES 0   /* free-threaded: no table shared between threads without a lock */
    #else
    #define ZJC_SHARED_TABLES 1
    #endif
    """
    object zjc_encode(object (*f)(object, object), object arg, object policy, PyObject* twin, PyObject* fallback,
                      PyObject* locate)
    int ZJC_SHARED_TABLES
    int memcmp(const void* a, const void* b, size_t n)

cdef object _python_record = _encode_python._record


def _located_in_record(refusal, record):
    """A GlobalRefused from an encode of record with its place in the value; any other ValueError as it is."""
    if isinstance(refusal, _globals.GlobalRefused):
        return located_in_record(refusal, record)
    return refusal


# ---------------------------------------------------------------------------
# The globals policy: a table of the names it allowed (docs/security.md)
# ---------------------------------------------------------------------------

# The rules are _globals.GlobalsPolicy.check's; a name it allowed by the name alone is kept here (one slot a
# hash), for that policy, so the next record naming it pays a hash and a compare.
cdef enum:
    ROLE_CALL, ROLE_CLASS, ROLE_VALUE
    _ALLOWED_SLOTS = 1024   # a power of two

cdef tuple _ROLE_NAMES = (CALL, CLASS, VALUE)
cdef str _REF = "the class of a reference"
cdef str _INST = "the class of an instance"
cdef str _REDUCE = "the callable of a @reduce"

cdef struct _Allowed:
    uint64_t hash           # of the role and both names; 0: an empty slot
    Py_ssize_t module_size
    Py_ssize_t name_size
    unsigned char* text     # the module's bytes, then the name's (PyMem)

cdef _Allowed _allowed[_ALLOWED_SLOTS]
cdef object _allowed_policy = None  # the policy the table's names were allowed by (held: its id stays its own)
cdef list _default_policy = _globals.DEFAULT  # [the process default, or None]: read without a call


cdef object _policy_of(object policy):
    """The policy= argument, or the process default."""
    if policy is None:
        policy = _default_policy[0]
        return policy if policy is not None else _globals.get_globals_policy()
    if type(policy) is not GlobalsPolicy:
        raise TypeError(f"argument 'policy': expected GlobalsPolicy, not {type(policy).__name__}")
    return policy


cdef inline uint64_t _span_mix(uint64_t h, const unsigned char* p, Py_ssize_t n) noexcept:
    """h mixed with a name's first and last 8 bytes (all of a shorter one): the table compares whole names, so
    names alike at both ends only share a slot, and no name costs more to hash than a short one."""
    cdef uint64_t first = 0, last = 0
    cdef Py_ssize_t i
    if n >= 8:
        memcpy(&first, p, 8)
        memcpy(&last, p + n - 8, 8)
    for i in range(n if n < 8 else 0):
        first = (first << 8) | p[i]
    h = (h ^ first) * <uint64_t>0xff51afd7ed558ccd
    h = (h ^ (h >> 32) ^ last) * <uint64_t>0xc4ceb9fe1a85ec53
    return h ^ (h >> 29)


cdef inline _Allowed* _allowed_slot(int role, const unsigned char* m, Py_ssize_t mn, const unsigned char* n,
                                    Py_ssize_t nn, uint64_t* h) noexcept:
    h[0] = _span_mix(_span_mix(<uint64_t>0x9E3779B97F4A7C15 ^ <uint64_t>role ^ (<uint64_t>mn << 8), m, mn), n, nn) | 1
    return &_allowed[h[0] & (_ALLOWED_SLOTS - 1)]


cdef bint _known_allowed(object policy, int role, const unsigned char* m, Py_ssize_t mn,
                         const unsigned char* n, Py_ssize_t nn) noexcept:
    cdef uint64_t h
    cdef _Allowed* slot = _allowed_slot(role, m, mn, n, nn, &h)
    return (ZJC_SHARED_TABLES and policy is _allowed_policy and slot.hash == h and slot.module_size == mn
            and slot.name_size == nn and memcmp(slot.text, m, <size_t>mn) == 0
            and memcmp(slot.text + mn, n, <size_t>nn) == 0)


cdef void _remember_allowed(object policy, int role, const unsigned char* m, Py_ssize_t mn,
                            const unsigned char* n, Py_ssize_t nn) noexcept:
    global _allowed_policy
    cdef uint64_t h
    cdef Py_ssize_t k
    cdef _Allowed* slot = _allowed_slot(role, m, mn, n, nn, &h)
    cdef unsigned char* text = <unsigned char*>PyMem_Malloc(<size_t>(mn + nn + 1))
    if not ZJC_SHARED_TABLES or text == NULL:
        PyMem_Free(text)
        return  # not kept: asked again next time
    if policy is not _allowed_policy:  # another policy: what the table holds is not its
        for k in range(_ALLOWED_SLOTS):
            _allowed[k].hash = 0
        _allowed_policy = policy
    memcpy(text, m, <size_t>mn)
    memcpy(text + mn, n, <size_t>nn)
    PyMem_Free(slot.text)
    slot.text, slot.module_size, slot.name_size, slot.hash = text, mn, nn, h


cdef int _allow_spans(Writer* w, int role, const unsigned char* m, Py_ssize_t mn, const unsigned char* n,
                      Py_ssize_t nn, str context, object args=None) except -1:
    """The policy allows the ASCII names m[:mn] and n[:nn] in role, or raises: from the table, else by its
    rules (kept when the names alone decided, not a call's arguments).  The bytes are the caller's, alive
    across the call: the caller holds the text or strs that own them."""
    if _known_allowed(<object>w.policy, role, m, mn, n, nn):
        return 0
    if (<object>w.policy).check(_ROLE_NAMES[role], PyUnicode_DecodeASCII(<const char*>m, mn, NULL),
                                PyUnicode_DecodeASCII(<const char*>n, nn, NULL), context, args):
        _remember_allowed(<object>w.policy, role, m, mn, n, nn)
    return 0


cdef int _allow(Writer* w, int role, object module, object name, str context, object args=None) except -1:
    """_allow_spans of two strs; names that are not ASCII, or not strs, are decided by the rules each time."""
    # window: str_chars
    cdef Py_ssize_t mn, nn
    cdef const unsigned char* m = zjc_ascii_chars(<PyObject*>module, &mn) if type(module) is str else NULL
    cdef const unsigned char* n = zjc_ascii_chars(<PyObject*>name, &nn) if type(name) is str else NULL
    if m != NULL and n != NULL:
        return _allow_spans(w, role, m, mn, n, nn, context, args)
    (<object>w.policy).check(_ROLE_NAMES[role], module, name, context, args)
    return 0


cdef inline bint _record_class_allowed(Writer* w, object module, object name) except -1:
    """_allow of a record's class, False where the policy refuses it: the Python twin then decides, after the
    state it may take verbatim (a "@pkl" key that is a str subclass, which this twin leaves to it)."""
    # window: str_chars
    cdef Py_ssize_t mn, nn
    cdef const unsigned char* m = zjc_ascii_chars(<PyObject*>module, &mn)
    cdef const unsigned char* n = zjc_ascii_chars(<PyObject*>name, &nn)
    if m != NULL and n != NULL and _known_allowed(<object>w.policy, ROLE_CLASS, m, mn, n, nn):
        return True
    return (<object>w.policy).decision(CLASS, module, name) is None and _allow(w, ROLE_CLASS, module, name, "") == 0


cdef inline bint _copyreg(object module) noexcept:
    return type(module) is str and (<str>module == "copyreg" or <str>module == "copy_reg")


cdef bint _plain_callable(object callable_) except -1:
    """A @reduce's callable is a bare @cls of two strs, not copyreg's (whose class arguments the rules check)."""
    # window: a names list's two items | read right after its size is checked; nothing runs
    if type(callable_) is not dict or PyDict_GET_SIZE(callable_) != 1:
        return False
    names = (<dict>callable_).get("@cls")
    return (type(names) is list and PyList_GET_SIZE(names) == 2 and type((<list>names)[0]) is str
            and type((<list>names)[1]) is str and not _copyreg((<list>names)[0]))


cdef int _mark_checked(Writer* w, list markers) except -1:
    """The @cls markers a rule of _globals checked in their role: not checked again as values (held here, so
    that no other dict takes one's id while the writer runs)."""
    if markers:
        if w.checked == NULL:
            checked = {}
            Py_INCREF(checked)
            w.checked = <PyObject*>checked
        for marker in markers:
            (<dict>w.checked)[id(marker)] = marker
    return 0


cdef inline bint _is_checked(Writer* w, object marker) except -1:
    return w.checked != NULL and id(marker) in <dict>w.checked


# ---------------------------------------------------------------------------
# The output buffer
# ---------------------------------------------------------------------------

cdef enum:
    _STACK_BUFFER = 4096
    _FIRST_HEAP_BUFFER = 65536

# What a 4-byte length holds no more: compared as unsigned 64-bit numbers (a 32-bit build's Py_ssize_t
# cannot even hold it).
cdef uint64_t _U32_LIMIT = (<uint64_t>1) << 32

cdef struct Writer:
    unsigned char* buf
    Py_ssize_t pos
    Py_ssize_t cap
    bint expand_refs     # read the compact @ref forms of decode_zodb_record
    PyObject* owner      # the bytes object whose buffer buf is (the result, without a last copy), or NULL
                         # while buf is the caller's stack array
    PyObject* policy     # the GlobalsPolicy (the public function's own reference)
    PyObject* checked    # {id: marker} of @cls markers checked in their role already (_mark_checked), or NULL
    PyObject* ref_class  # the last reference class allowed (a str of our own), or NULL


cdef extern from "Python.h":
    int _PyBytes_Resize(PyObject** bytes, Py_ssize_t size) except -1
    char* zjc_bytes_data "PyBytes_AS_STRING"(PyObject* o)
    PyObject* zjc_new_bytes "PyBytes_FromStringAndSize"(const char* s, Py_ssize_t size) except NULL
    void Py_XDECREF(PyObject* o)


cdef inline void _init(Writer* w, unsigned char* stack, bint expand_refs, object policy) noexcept:
    w.buf = stack
    w.pos = 0
    w.cap = _STACK_BUFFER
    w.expand_refs = expand_refs
    w.owner = NULL
    w.policy = <PyObject*>policy
    w.checked = NULL
    w.ref_class = NULL


cdef int _init_sized(Writer* w, unsigned char* stack, bint expand_refs, object policy,
                     Py_ssize_t expected) except -1:
    """_init, with the output written straight into a bytes object when it will outgrow the stack buffer: large
    results are not copied once more at the end."""
    # window: writer_bytes
    _init(w, stack, expand_refs, policy)
    if expected > _STACK_BUFFER:
        w.owner = zjc_new_bytes(NULL, expected)
        w.buf = <unsigned char*>zjc_bytes_data(w.owner)
        w.cap = expected
    return 0


cdef inline void _release(Writer* w) noexcept:
    Py_XDECREF(w.owner)
    w.owner = NULL
    Py_XDECREF(w.checked)
    w.checked = NULL
    Py_XDECREF(w.ref_class)
    w.ref_class = NULL


cdef int _grow(Writer* w, Py_ssize_t need) except -1:
    """Room for need more bytes, in the result's own bytes object once the stack array is outgrown (not copied
    at the end), of _FIRST_HEAP_BUFFER bytes first: records that outgrow the stack are mostly tens of KB."""
    # window: writer_bytes
    cdef Py_ssize_t cap = w.cap
    if w.owner == NULL and cap < _FIRST_HEAP_BUFFER:
        cap = _FIRST_HEAP_BUFFER
    while cap - w.pos < need:
        if cap > PY_SSIZE_T_MAX // 2:
            raise MemoryError()
        cap *= 2
    if w.owner == NULL:
        w.owner = zjc_new_bytes(NULL, cap)
        memcpy(zjc_bytes_data(w.owner), w.buf, <size_t>w.pos)
    else:
        _PyBytes_Resize(&w.owner, cap)
    w.buf = <unsigned char*>zjc_bytes_data(w.owner)
    w.cap = cap
    return 0


cdef inline int _reserve(Writer* w, Py_ssize_t need) except -1:
    if w.cap - w.pos < need:
        return _grow(w, need)
    return 0


cdef inline int _op(Writer* w, uint8_t op) except -1:
    if w.pos >= w.cap:
        _grow(w, 1)
    w.buf[w.pos] = op
    w.pos += 1
    return 0


cdef inline int _op2(Writer* w, uint8_t a, uint8_t b) except -1:
    if w.cap - w.pos < 2:
        _grow(w, 2)
    w.buf[w.pos] = a
    w.buf[w.pos + 1] = b
    w.pos += 2
    return 0


cdef inline int _raw(Writer* w, const void* data, Py_ssize_t n) except -1:
    if w.cap - w.pos < n:
        _grow(w, n)
    memcpy(w.buf + w.pos, data, <size_t>n)
    w.pos += n
    return 0


cdef inline void _le32(unsigned char* o, uint64_t v) noexcept:
    o[0] = <uint8_t>v
    o[1] = <uint8_t>(v >> 8)
    o[2] = <uint8_t>(v >> 16)
    o[3] = <uint8_t>(v >> 24)


cdef inline bytes _result(Writer* w):
    if w.owner != NULL:
        _PyBytes_Resize(&w.owner, w.pos)
        return <bytes>w.owner     # a reference of the caller's; _release drops the writer's
    return PyBytes_FromStringAndSize(<char*>w.buf, w.pos)


# ---------------------------------------------------------------------------
# Scalars
# ---------------------------------------------------------------------------

cdef inline int _int64(Writer* w, long long x) except -1:
    cdef unsigned char* o
    if w.cap - w.pos < 12:
        _grow(w, 12)
    o = w.buf + w.pos
    if 0 <= x < 256:
        o[0] = BININT1
        o[1] = <uint8_t>x
        w.pos += 2
    elif 0 <= x < 65536:
        o[0] = BININT2
        o[1] = <uint8_t>x
        o[2] = <uint8_t>(x >> 8)
        w.pos += 3
    elif -2147483648 <= x <= 2147483647:
        o[0] = BININT
        _le32(o + 1, <uint64_t><uint32_t>x)
        w.pos += 5
    else:
        _long1(w, x < 0, 0, (<uint64_t>0 - <uint64_t>x) if x < 0 else <uint64_t>x)
    return 0


cdef int _written_by(Writer* w, object writer) except -1:
    """The opcodes a Python twin's _Writer wrote, copied in."""
    opcodes = b"".join(writer.parts)
    return _raw(w, <const char*>opcodes, len(opcodes))


cdef int _int(Writer* w, object v) except -1:
    """An exact int; one outside the signed 64-bit range (rare) as the Python twin writes it, whose int methods
    may allocate, and so start the collector (the caller holds v)."""
    if not _int_in_64_bits(w, v):
        writer = _PythonWriter(False, None)
        writer.write_int(v)
        _written_by(w, writer)
    return 0


cdef inline bint _int_in_64_bits(Writer* w, object v) except -1:
    """Writes the exact int v if it fits 64 bits, running no code: True; else False, nothing written."""
    cdef int overflow = 0
    cdef long long x
    if zjc_compact_long(v, &x):
        _int64(w, x)
        return True
    x = PyLong_AsLongLongAndOverflow(v, &overflow)
    if overflow:
        return False
    _int64(w, x)
    return True


cdef int _m_bi(Writer* w, object text) except -1:
    """The int of an @bi text: a magnitude of up to 64 bits read here (the ints applications store past int64:
    unsigned 64-bit ones), the rest, and every error, as _common.decimal_to_int."""
    # window: str_chars
    cdef const unsigned char* p
    cdef Py_ssize_t n, i
    cdef uint64_t magnitude = 0, most = ~(<uint64_t>0)
    if type(text) is str and PyUnicode_IS_ASCII(text) and 0 < PyUnicode_GET_LENGTH(text) <= 21:
        n = PyUnicode_GET_LENGTH(text)
        p = <const unsigned char*>PyUnicode_DATA(text)
        i = 1 if n > 1 and (p[0] == b"+" or p[0] == b"-") else 0
        while i < n and 48 <= p[i] <= 57 and magnitude <= (most - (p[i] - 48)) // 10:  # times 10 plus it fits
            magnitude = magnitude * 10 + (p[i] - 48)
            i += 1
        if i == n:
            return _int128(w, p[0] == b"-", 0, magnitude)
    return _int(w, decimal_to_int(text))


cdef int _int128(Writer* w, bint negative, uint64_t hi, uint64_t lo) except -1:
    """An int of magnitude hi:lo (up to 128 bits), negative or not (a UUID's, an @bi text's), as _int writes it."""
    if hi == 0 and (lo < (<uint64_t>1 << 63) or (negative and lo == (<uint64_t>1 << 63))):
        return _int64(w, <long long>(<uint64_t>0 - lo) if negative else <long long>lo)
    return _long1(w, negative, hi, lo)


cdef int _long1(Writer* w, bint negative, uint64_t hi, uint64_t lo) except -1:
    """LONG1 of the int of magnitude hi:lo: its shortest two's complement bytes, which are what the Python twin's
    (bit_length >> 3) + 1 bytes, less a redundant 0xff sign byte, come to."""
    cdef unsigned char* o
    cdef int nbytes = 17, i
    cdef uint8_t fill = 0xFF if negative else 0
    if negative:  # the two's complement of hi:lo
        lo = ~lo + 1
        hi = ~hi + (1 if lo == 0 else 0)
    _reserve(w, 2 + nbytes)
    o = w.buf + w.pos
    for i in range(nbytes):
        o[2 + i] = <uint8_t>(lo >> (8 * i) if i < 8 else hi >> (8 * (i - 8)) if i < 16 else fill)
    while nbytes > 1 and o[1 + nbytes] == fill and (o[nbytes] & 0x80) == (fill & 0x80):  # a sign byte too many
        nbytes -= 1
    o[0] = LONG1
    o[1] = <uint8_t>nbytes
    w.pos += 2 + nbytes
    return 0


cdef inline int _float(Writer* w, double d) except -1:
    cdef uint64_t u
    cdef unsigned char* o
    cdef int i
    memcpy(&u, &d, 8)
    _reserve(w, 9)
    o = w.buf + w.pos
    o[0] = BINFLOAT
    for i in range(8):
        o[1 + i] = <uint8_t>(u >> (56 - 8 * i))
    w.pos += 9
    return 0


cdef int _bytes_header(Writer* w, Py_ssize_t n) except -1:
    cdef unsigned char* o
    _reserve(w, 9)
    o = w.buf + w.pos
    if n < 256:
        o[0] = SHORT_BINBYTES
        o[1] = <uint8_t>n
        w.pos += 2
    elif <uint64_t>n < _U32_LIMIT:
        o[0] = BINBYTES
        _le32(o + 1, <uint64_t>n)
        w.pos += 5
    else:
        return _python_twin()  # 4 GiB or more (BINBYTES8)
    return 0


cdef int _bytes(Writer* w, bytes raw) except -1:
    cdef Py_ssize_t n = len(raw)
    _bytes_header(w, n)
    return _raw(w, <const char*>raw, n)


cdef inline int _str(Writer* w, str s) except -1:
    """BINUNICODE of an exact str."""
    # window: str_chars
    cdef Py_ssize_t n
    cdef const unsigned char* chars = zjc_ascii_chars(<PyObject*>s, &n)
    if chars != NULL and <uint64_t>n < _U32_LIMIT:
        return _ascii(w, chars, n)
    return _str_utf8(w, s)


cdef inline int _ascii(Writer* w, const unsigned char* chars, Py_ssize_t n) except -1:
    """BINUNICODE of n ASCII characters (n < 4 GiB)."""
    cdef unsigned char* o
    if w.cap - w.pos < n + 5:
        _grow(w, n + 5)
    o = w.buf + w.pos
    o[0] = BINUNICODE
    _le32(o + 1, <uint64_t>n)
    zjc_copy_short(o + 5, chars, n)
    w.pos += n + 5
    return 0


cdef inline Py_ssize_t _text_start(Writer* w) except -1:
    """Room for a BINUNICODE header, filled by _text_end once the UTF-8 after it is written: its offset."""
    _reserve(w, 5)
    w.pos += 5
    return w.pos - 5


cdef inline Py_ssize_t _text_end(Writer* w, Py_ssize_t start) noexcept:
    """The header at start for the UTF-8 written since: its size; -1 (the text dropped) if over 4 GiB."""
    cdef Py_ssize_t size = w.pos - start - 5
    if <uint64_t>size >= _U32_LIMIT:
        w.pos = start
        return -1
    w.buf[start] = BINUNICODE
    _le32(w.buf + start + 1, <uint64_t>size)
    return size


cdef int _str_utf8(Writer* w, str s) except -1:
    """BINUNICODE of a str that is not ASCII, its UTF-8 made straight into the output and not kept (a storage encodes
    what json.loads just made: CPython's encoder would take a character a step, allocate the copy and keep it)."""
    # window: str_chars
    cdef Py_ssize_t start, size, n
    cdef int kind
    zjc_unicode_ready(s)
    if <uint64_t>PyUnicode_GET_LENGTH(s) >= _U32_LIMIT:  # its UTF-8 is longer still: nothing written
        raise str_too_long()
    start = _text_start(w)
    n = PyUnicode_GET_LENGTH(s)
    kind = PyUnicode_KIND(s)
    _reserve(w, zjc_utf8_room(kind, n))
    size = zjc_utf8_of_ucs(kind, PyUnicode_DATA(s), n, w.buf + w.pos)
    if size < 0:
        return _python_twin()  # lone surrogates (Python 2 era data)
    w.pos += size
    if _text_end(w, start) < 0:
        raise str_too_long()
    return 0


cdef int _global(Writer* w, object module, object name) except -1:
    """GLOBAL of a class whose module and name are ASCII strs without a newline; any other (rare: a name that is
    not ASCII, or an error) as the Python twin writes it."""
    # window: str_chars
    if (type(module) is str and type(name) is str and PyUnicode_IS_ASCII(module) and PyUnicode_IS_ASCII(name)
            and memchr(PyUnicode_DATA(module), 10, <size_t>PyUnicode_GET_LENGTH(module)) == NULL
            and memchr(PyUnicode_DATA(name), 10, <size_t>PyUnicode_GET_LENGTH(name)) == NULL):
        _op(w, GLOBAL)
        _raw(w, PyUnicode_DATA(module), PyUnicode_GET_LENGTH(module))
        _op(w, 10)
        _raw(w, PyUnicode_DATA(name), PyUnicode_GET_LENGTH(name))
        return _op(w, 10)
    writer = _PythonWriter(False, None)
    writer.write_global(module, name)
    return _written_by(w, writer)


cdef int _global_dotted(Writer* w, str dotted) except -1:
    """GLOBAL of ``module.Name`` split at its last dot (the compact @ref class); the Python twin writes a name
    that is not ASCII."""
    # window: str_chars
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(dotted), i, at
    cdef unsigned char* o
    cdef const unsigned char* p = <const unsigned char*>PyUnicode_DATA(dotted)
    if not PyUnicode_IS_ASCII(dotted):
        return _python_twin()
    i = PyUnicode_FindChar(dotted, 46, 0, n, -1)  # its last dot, or -1
    if <PyObject*>dotted != w.ref_class:  # a record's references name a few classes, each again and again
        _allow_spans(w, ROLE_CLASS, p, i if i > 0 else 0, p + i + 1, n - i - 1, _REF)
        Py_INCREF(dotted)
        Py_XDECREF(w.ref_class)
        w.ref_class = <PyObject*>dotted
    if memchr(p, 10, <size_t>n) != NULL:
        raise CodecError("invalid pickle data: class module or name contains a newline")
    at = 1 if i >= 0 else 2  # "cmodule\nName\n", the dot made the newline; no dot: "c\nName\n", an empty module
    _reserve(w, n + 3)
    o = w.buf + w.pos
    o[0] = GLOBAL
    memcpy(o + at, p, <size_t>n)
    o[at + i] = 10  # the dot's place, or (no dot) o[1]
    o[at + n] = 10
    w.pos += at + n + 1
    return 0


# ---------------------------------------------------------------------------
# Markers: the C twin of _common.marker_kind
# ---------------------------------------------------------------------------

# Marker keys, as bit numbers of a key set.
cdef enum Key:
    KEY_T, KEY_B, KEY_D, KEY_F, KEY_S,
    KEY_BI, KEY_DT, KEY_TD, KEY_NS, KEY_SU, KEY_TZ, KEY_KV, KEY_KS,
    KEY_SET, KEY_REF, KEY_PKL, KEY_DEC, KEY_CLS, KEY_OBJ,
    KEY_FSET, KEY_DATE, KEY_TIME, KEY_UUID, KEY_INST, KEY_ARGS, KEY_NEXT,
    KEY_ITEMS, KEY_STATE, KEY_FIRST,
    KEY_REDUCE, KEY_NEWOBJ, KEY_KWARGS,
    KEY_APPENDS,
    KEY_CALLABLE, KEY_CHILDREN,
    _KEY_COUNT

# The kind of a dict (_marker_kind): the Key of the marker it is (KEY_DT also for {"@dt": ..., "@tz": ...},
# KEY_KV also for a bucket's {"@kv": ..., "@next": ...}...), or one of these.
cdef enum:
    K_NONE = _KEY_COUNT     # a plain dict
    K_WRAPPER               # {"@args": ..., "@state": ...} and the other wrappers: written as a plain dict
    K_INSTANCE              # {"@cls": ..., "@s": ...}


cdef Py_ssize_t C_MAX_MARKER_KEYS = MAX_MARKER_KEYS


cdef inline uint64_t _bit(int key) noexcept:
    return (<uint64_t>1) << key


# The text after "@" of each Key, in Key order.
_KEY_TEXTS = (
    b"t", b"b", b"d", b"f", b"s",
    b"bi", b"dt", b"td", b"ns", b"su", b"tz", b"kv", b"ks",
    b"set", b"ref", b"pkl", b"dec", b"cls", b"obj",
    b"fset", b"date", b"time", b"uuid", b"inst", b"args", b"next",
    b"items", b"state", b"first",
    b"reduce", b"newobj", b"kwargs",
    b"appends",
    b"callable", b"children",
)
cdef enum:
    _KEY_MAX = 8    # the longest text
    _SLOTS = 128    # open-addressing table of the keys, more than 3x their number (a power of 2)
cdef char _key_text[_KEY_COUNT][_KEY_MAX]
cdef Py_ssize_t _key_length[_KEY_COUNT]
cdef signed char _key_slot[_SLOTS]


cdef inline int _marker_key_hash(const char* p, Py_ssize_t m) noexcept:
    return <int>((m * 37 + <unsigned char>p[0] * 5 + <unsigned char>p[m - 1]) & (_SLOTS - 1))


cdef int _fill_key_table() except -1:
    cdef Py_ssize_t m
    cdef int key, slot
    if len(_KEY_TEXTS) != _KEY_COUNT:
        raise RuntimeError("_KEY_TEXTS does not match the Key enum")
    for slot in range(_SLOTS):
        _key_slot[slot] = -1
    for key in range(<int>_KEY_COUNT):
        text = _KEY_TEXTS[key]
        m = len(text)
        memcpy(_key_text[key], <const char*>text, m)
        _key_length[key] = m
        slot = _marker_key_hash(<const char*>text, m)
        while _key_slot[slot] != -1:
            slot = (slot + 1) & (_SLOTS - 1)
        _key_slot[slot] = <signed char>key


_fill_key_table()


cdef int _key(object k) noexcept:
    """The Key of an exact str, or -1 if it is not one of them."""
    # window: str_chars
    if not PyUnicode_IS_ASCII(k):
        return -1
    return _key_of(<const char*>PyUnicode_DATA(k), PyUnicode_GET_LENGTH(k))


cdef inline int _key_of(const char* p, Py_ssize_t n) noexcept:
    """The Key of the n bytes at p, or -1: a hash of (length, first and last letter) picks the candidate, a
    byte compare confirms it (6-15% faster than a dict lookup of the str)."""
    cdef Py_ssize_t m = n - 1  # letters after the "@"
    cdef int key
    if m < 1 or m > _KEY_MAX or p[0] != b"@":
        return -1
    p += 1
    cdef int slot = _marker_key_hash(p, m)
    while True:
        key = _key_slot[slot]
        if key < 0:
            return -1
        if _key_length[key] == m and same_bytes(_key_text[key], p, m):  # a loop: a memcmp call costs more
            return key
        slot = (slot + 1) & (_SLOTS - 1)


# One-key markers: what the value of each key must be.
cdef enum Want:
    W_NOTHING       # not a one-key marker
    W_ANY
    W_STR           # isinstance(v, str)
    W_LIST          # isinstance(v, list)
    W_DICT          # isinstance(v, dict)
    W_CLS           # [module, name]
    W_BTREE_LIST    # type(v) is list, only as a BTree state

cdef signed char _ONE_WANT[_KEY_COUNT]


cdef void _init_one_key_markers():
    cdef int key
    for key in range(<int>_KEY_COUNT):
        _ONE_WANT[key] = W_NOTHING
    for key, want in (
        (KEY_T, W_LIST), (KEY_REF, W_ANY), (KEY_B, W_STR), (KEY_DT, W_STR), (KEY_DEC, W_STR), (KEY_FSET, W_LIST),
        (KEY_SET, W_LIST), (KEY_DATE, W_STR), (KEY_TD, W_LIST), (KEY_UUID, W_STR), (KEY_TIME, W_STR),
        (KEY_BI, W_STR), (KEY_D, W_LIST), (KEY_PKL, W_STR), (KEY_CLS, W_CLS), (KEY_REDUCE, W_DICT),
        (KEY_NEWOBJ, W_DICT), (KEY_INST, W_ANY), (KEY_NS, W_STR), (KEY_SU, W_STR), (KEY_F, W_STR),
        (KEY_KV, W_BTREE_LIST), (KEY_KS, W_BTREE_LIST),
    ):
        _ONE_WANT[key] = want


_init_one_key_markers()


cdef inline bint _wanted(int want, object v, bint btree) noexcept:
    """Is v what a one-key marker whose key asks for want holds?"""
    if want == W_STR:
        return isinstance(v, str)
    if want == W_LIST:
        return isinstance(v, list)
    if want == W_DICT:
        return isinstance(v, dict)
    if want == W_CLS:
        return _is_cls_value(v)
    if want == W_BTREE_LIST:
        return btree and type(v) is list
    return want == W_ANY


cdef int _one_key_kind(PyObject* k, PyObject* v, bint btree) noexcept:
    # window: a one-key dict's key and value (borrowed) | types, characters and sizes compared; nothing runs
    cdef int key
    if not _at_str(k):
        return K_NONE
    key = _key(<object>k)
    if key < 0 or not _wanted(_ONE_WANT[key], <object>v, btree):
        return K_NONE
    return key


cdef inline bint _at_str(PyObject* k) noexcept:
    """``type(k) is str and k[:1] == "@"``."""
    # window: str_chars
    cdef Py_ssize_t n
    cdef const unsigned char* chars
    if type(<object>k) is not str:
        return False
    chars = zjc_ascii_chars(k, &n)
    if chars != NULL:  # nearly every key: its first byte, without PyUnicode_READ_CHAR's questions of kind
        return n > 0 and chars[0] == 64
    return PyUnicode_GET_LENGTH(<object>k) > 0 and PyUnicode_READ_CHAR(<object>k, 0) == 64


cdef inline bint _is_cls_value(object v) noexcept:
    # window: a class marker's two names (borrowed) | type checks only (Cython's `isinstance(x, str)`)
    return (type(v) is list and PyList_GET_SIZE(v) == 2
            and isinstance(<object>PyList_GET_ITEM(v, 0), str)
            and isinstance(<object>PyList_GET_ITEM(v, 1), str))


cdef int _marker_kind(dict d, bint btree, PyObject** first) noexcept:
    """_common.marker_kind, as a kind (never raises: it only looks at types).

    *first is set to the value of a one-key dict (borrowed), saving a lookup.
    """
    # window: a dict's entries, `*first` | types and keys compared; `_marker`'s callers reference `*first`
    cdef Py_ssize_t n = PyDict_GET_SIZE(d), pos = 0
    cdef PyObject* k = NULL
    cdef PyObject* v = NULL
    cdef uint64_t keys = 0
    cdef int key
    if n == 0 or n > C_MAX_MARKER_KEYS:
        return K_NONE
    if n == 1:
        zjc_dict_next(d, &pos, &k, &v)
        first[0] = v
        return _one_key_kind(k, v, btree)
    while zjc_dict_next(d, &pos, &k, &v):
        if not _at_str(k):
            return K_NONE
        key = _key(<object>k)
        if key < 0:
            return K_NONE  # no key set holds it
        keys |= _bit(key)
    # An instance: "@cls" and "@s" with any of "@newobj", "@items", "@appends"; without "@s" but with one of
    # them, an instance _instance refuses (_known._instance_shapes).
    if (keys & ~(_bit(KEY_ITEMS) | _bit(KEY_APPENDS) | _bit(KEY_NEWOBJ) | _bit(KEY_S)) == _bit(KEY_CLS)
            and keys != _bit(KEY_CLS)):
        return K_INSTANCE if _is_cls_value(d["@cls"]) else K_NONE
    if keys == _bit(KEY_DT) | _bit(KEY_TZ):
        return KEY_DT if isinstance(d["@dt"], str) and isinstance(d["@tz"], dict) else K_NONE
    if keys == _bit(KEY_TIME) | _bit(KEY_TZ):
        return KEY_TIME if isinstance(d["@time"], str) and isinstance(d["@tz"], dict) else K_NONE
    if (keys == _bit(KEY_ARGS) | _bit(KEY_STATE) or keys == _bit(KEY_OBJ) | _bit(KEY_STATE)
            or keys == _bit(KEY_CALLABLE) | _bit(KEY_ARGS) | _bit(KEY_STATE)
            or keys == _bit(KEY_ARGS) | _bit(KEY_KWARGS)):
        return K_WRAPPER
    if btree:
        if keys == _bit(KEY_KV) | _bit(KEY_NEXT):
            return KEY_KV
        if keys == _bit(KEY_KS) | _bit(KEY_NEXT):
            return KEY_KS
        if keys == _bit(KEY_CHILDREN) | _bit(KEY_FIRST):
            return KEY_CHILDREN
    return K_NONE


cdef inline PyObject* _one_key_value(object v, int key) noexcept:
    """The value of v if v is a dict of one entry whose key is the exact str of that Key, borrowed; else NULL."""
    # window: a one-key dict's value (borrowed) | its callers compare or reference it before any code
    cdef Py_ssize_t pos = 0
    cdef PyObject* k = NULL
    cdef PyObject* x = NULL
    if type(v) is not dict or PyDict_GET_SIZE(v) != 1:
        return NULL
    zjc_dict_next(v, &pos, &k, &x)
    if type(<object>k) is str and _key(<object>k) == key:
        return x
    return NULL


cdef inline int _btree_class(str module, str name) except -2:
    """_common.btree_kind for exact strs: 1 tree, 0 bucket or set, -1 not a BTree class."""
    cdef int bits = btree_bits(module, name)
    if bits == 0:
        return -1
    return 1 if bits & BTREE_IS_TREE else 0


# ---------------------------------------------------------------------------
# The walk
# ---------------------------------------------------------------------------

cdef inline int _value(Writer* w, object v, Py_ssize_t depth) except -1:
    """Any value, the commonest written here rather than through a call."""
    if _scalar(w, v):
        return 0
    return _not_scalar(w, v, depth)


cdef int _not_scalar(Writer* w, object v, Py_ssize_t depth) except -1:
    """A value _scalar does not write: a dict, list, int of more than 64 bits or other Python value."""
    # type(v) is compared at each test, not kept in a variable: Cython would take a reference to the type
    # object for it, a write to str's or int's count per value that every thread's encode shares.
    cdef int kind
    cdef PyObject* first = NULL
    if type(v) is dict:
        if depth > _C_WALK:
            return _python_twin()
        # _dict, one C frame fewer for each level of nesting
        kind = _marker_kind(<dict>v, False, &first)
        if kind == K_NONE or kind == K_WRAPPER:
            return _plain_dict(w, <dict>v, depth)
        return _marker(w, <dict>v, kind, first, depth)
    if type(v) is list:
        if depth > _C_WALK:
            return _python_twin()
        _op(w, EMPTY_LIST)
        if PyList_GET_SIZE(v):
            _op(w, MARK)
            _list_items(w, <list>v, depth + 1)
            _op(w, APPENDS)
        return 0
    if type(v) is int:
        return _int(w, v)  # past 64 bits
    return _native(w, v, depth)


cdef inline int _scalar(Writer* w, object v) except -1:
    """Writes v if it is an exact str, 64-bit int, float, None, True or False (most items), which runs no code:
    1; else 0, nothing written.  Callers read v through its container's reference (docs/design.md)."""
    if type(v) is str:
        _str(w, <str>v)
    elif type(v) is int:
        return _int_in_64_bits(w, v)
    elif type(v) is float:
        _float(w, PyFloat_AS_DOUBLE(v))
    elif v is None:
        _op(w, NONE)
    elif v is True:
        _op(w, NEWTRUE)
    elif v is False:
        _op(w, NEWFALSE)
    else:
        return 0
    return 1


cdef inline int _list_items(Writer* w, list v, Py_ssize_t depth) except -1:
    """Each item of v at depth, read as a list iterator reads them: a value's own code may change v."""
    # window: a list's items | scalars (which run nothing) read in place, others referenced; size read each step
    cdef Py_ssize_t i = 0
    while i < PyList_GET_SIZE(v):
        if not _scalar(w, <object>PyList_GET_ITEM(v, i)):  # as in _plain_dict: no code runs for these
            x = <object>PyList_GET_ITEM(v, i)  # a reference of our own while code may run
            _not_scalar(w, x, depth)
        i += 1
    return 0


cdef int _tuple(Writer* w, object items, Py_ssize_t depth) except -1:
    # window: a tuple's items, a list's size | a tuple cannot change; a resized list: the Python twin's opcode
    cdef Py_ssize_t n = len(items), i
    if n == 0:
        return _op(w, EMPTY_TUPLE)
    if n > 3:
        _op(w, MARK)
    if type(items) is tuple:  # a native tuple: its items cannot change
        for i in range(n):
            _value(w, <object>PyTuple_GET_ITEM(items, i), depth + 1)
    elif type(items) is list:
        _list_items(w, <list>items, depth + 1)
    else:
        return _python_twin()  # another iterable (a list subclass...)
    return _op(w, TUPLE1 if n == 1 else TUPLE2 if n == 2 else TUPLE3 if n == 3 else TUPLE)


cdef int _plain_dict(Writer* w, dict d, Py_ssize_t depth) except -1:
    # window: the dict walk's pointers | only scalars read in place; else referenced, size checked, run reopened
    cdef Py_ssize_t pos = 0, size = PyDict_GET_SIZE(d), left = size
    cdef PyObject* kp
    cdef PyObject* xp
    cdef zjc_dict_run run
    _op(w, EMPTY_DICT)
    if not size:
        return 0
    _op(w, MARK)
    zjc_dict_run_open(d, 0, &run)
    while zjc_dict_run_next(&run, &pos, &kp, &xp):
        if left == 0:
            raise RuntimeError("dictionary keys changed during iteration")
        left -= 1
        # Exact strs, ints, floats, None and booleans are written without running any code that could
        # change the dict, so they are read through the dict's own references (no count taken and
        # dropped on each key and value of a wide dict), one entry after the other.
        if not _plain_key(w, kp):
            return _python_twin()  # an escaped key or a key of another type (no report set has them)
        if _scalar(w, <object>xp):
            continue
        x = <object>xp  # a reference of our own: a value's code may change the dict
        _not_scalar(w, x, depth + 1)
        # As the Python twin's dict iterator: the code that ran may have changed the dict.
        if PyDict_GET_SIZE(d) != size:
            raise RuntimeError("dictionary changed size during iteration")
        zjc_dict_run_open(d, pos, &run)
    return _op(w, SETITEMS)


cdef inline int _plain_key(Writer* w, PyObject* k) except -1:
    """Writes k if it is an exact str the PostgreSQL form did not escape: 1; else 0, nothing written."""
    # window: str_chars
    cdef Py_ssize_t n
    cdef const unsigned char* chars
    if type(<object>k) is not str:
        return 0
    chars = zjc_ascii_chars(k, &n)
    if chars != NULL and <uint64_t>n < _U32_LIMIT and (n < 4 or chars[0] != 64):  # the usual key: ASCII, no "@"
        _ascii(w, chars, n)
        return 1
    if (<str>k).startswith(("@ns:", "@su:")):
        return 0  # a key the PostgreSQL form escaped
    _str(w, <str>k)
    return 1


cdef int _marker(Writer* w, dict d, int kind, PyObject* first, Py_ssize_t depth) except -1:
    """The markers of _encode_python._MARKERS; first is the value of a one-key marker, as d[key] gives it."""
    # window: a one-key marker's value (`first`, borrowed) | referenced (`value`) before anything is written
    cdef object value = <object>first if first != NULL else None  # our own reference while code may run
    if kind == KEY_REF:
        return _ref(w, value, depth)
    if kind == KEY_T:
        return _tuple(w, value, depth)
    if kind == KEY_DT:
        if PyDict_GET_SIZE(d) == 1:
            return _m_dt(w, value, None, depth)
        return _m_dt(w, d["@dt"], d["@tz"], depth)
    if kind == KEY_DEC:
        return _m_dec(w, value)
    if kind == KEY_SET or kind == KEY_FSET:
        _raw(w, b"cbuiltins\nset\n" if kind == KEY_SET else b"cbuiltins\nfrozenset\n", 14 if kind == KEY_SET else 20)
        _value(w, value, depth)
        return _op2(w, TUPLE1, REDUCE)
    if kind == KEY_B:
        return _b64(w, value, "@b")
    if kind == KEY_DATE:
        return _m_date(w, value)
    if kind == KEY_TD:
        return _m_td(w, value)
    if kind == KEY_UUID:
        return _m_uuid(w, value)
    if kind == K_INSTANCE:
        return _instance(w, d, depth)
    return _rare_marker(w, d, kind, depth)


cdef int _rare_marker(Writer* w, dict d, int kind, Py_ssize_t depth) except -1:
    # Kept apart so that the frames of the common markers' recursion stay small.
    if kind == KEY_TIME:
        return _m_time(w, d)
    if kind == KEY_CLS:
        cls = <list>d["@cls"]
        module, name = cls[0], cls[1]
        if not _is_checked(w, d):
            _allow(w, ROLE_VALUE, module, name, "a class or function kept as a value")
        return _global(w, module, name)
    if kind == KEY_BI:
        return _m_bi(w, d["@bi"])
    if kind == KEY_D:
        _op(w, EMPTY_DICT)
        if d["@d"]:
            _pairs(w, d["@d"], depth, "@d")
        return 0
    if kind == KEY_PKL:
        return _b64(w, d["@pkl"], "@pkl")  # nested: bytes, as the Rust codec wrote it
    if kind == KEY_REDUCE or kind == KEY_NEWOBJ:
        return _reduce(w, d, depth)
    return _python_twin()  # @inst, @ns, @su, @f: no report set has them, the Python twin writes them


cdef int _b64(Writer* w, object text, str what) except -1:
    """Bytes of a strict base64 text; anything the C decoder refuses goes to _common.b64decode."""
    # window: str_chars
    cdef Py_ssize_t n, size, start
    cdef const unsigned char* p
    if type(text) is str and PyUnicode_IS_ASCII(text):
        n = PyUnicode_GET_LENGTH(text)
        p = <const unsigned char*>PyUnicode_DATA(text)
        size = zjc_b64_size(p, n)
        if size >= 0:
            start = w.pos
            _bytes_header(w, size)
            _reserve(w, size)
            if zjc_b64_decode(p, n, w.buf + w.pos) == 0:
                w.pos += size
                return 0
            w.pos = start
    return _bytes(w, b64decode(text, what))


cdef int _hex_bytes(Writer* w, str text) except -1:
    """Bytes of an oid's hex digits: 1 written, 0 (nothing written) if _known.is_hex refuses the text."""
    # window: str_chars
    cdef Py_ssize_t start = w.pos
    cdef const unsigned char* digits = <const unsigned char*>PyUnicode_DATA(text)
    if PyUnicode_IS_ASCII(text) and _write_oid(w, digits, PyUnicode_GET_LENGTH(text)):
        return 1
    w.pos = start
    return 0


cdef int _ref(Writer* w, object v, Py_ssize_t depth) except -1:
    """``{"@ref": v}`` at depth: its id is one level below it."""
    # window: a reference's oid and class name | both referenced before anything is written
    if _one_key_value(v, KEY_REF) != NULL:
        return _python_twin()  # a reference whose id is a reference (no report set has one)
    if w.expand_refs and type(v) is str and _hex_bytes(w, <str>v):
        _raw(w, b"N\x86Q", 3)  # no class: NONE, TUPLE2, BINPERSID
    elif (w.expand_refs and type(v) is list and PyList_GET_SIZE(v) == 2
          and type(<object>PyList_GET_ITEM(v, 0)) is str and type(<object>PyList_GET_ITEM(v, 1)) is str):
        oid = <str>PyList_GET_ITEM(v, 0)
        dotted = <str>PyList_GET_ITEM(v, 1)  # held: its UTF-8 may raise (lone surrogates), which allocates
        if not _hex_bytes(w, oid):
            raise CodecError(f"JSON error: hex decode: invalid oid {oid[:40]!r}")
        _global_dotted(w, dotted)
        _op2(w, TUPLE2, BINPERSID)
    else:
        if not _no_class_inside(v, 0):  # (a weak reference's id: none to check, no call)
            _mark_checked(w, generic_ref_classes(<object>w.policy, v, w.expand_refs))
        _value(w, v, depth + 1)
        _op(w, BINPERSID)
    return 0


cdef bint _no_class_inside(object v, int depth) noexcept:
    """generic_ref_classes would find nothing in v: lists and "@t" tuples (three deep) of {"@b": text} and of
    texts but an oid's 16 digits, such as a weak reference's id, ["w", {"@t": [{"@b": oid}]}]."""
    # window: one-key dicts' values (borrowed) | looked at by type and size only; nothing runs
    cdef PyObject* b = _one_key_value(v, KEY_B)
    cdef PyObject* t = _one_key_value(v, KEY_T)
    if type(v) is str or b != NULL:
        return PyUnicode_GET_LENGTH(v) != 16 if b == NULL else type(<object>b) is str
    items = <object>t if t != NULL else v
    return type(items) is list and depth < 3 and all(_no_class_inside(x, depth + 1) for x in <list>items)


cdef int _instance(Writer* w, dict d, Py_ssize_t depth) except -1:
    cdef int bt
    cdef bint newobj = True
    cls = <list>d["@cls"]
    module = cls[0]
    name = cls[1]
    state = d.get("@s")
    args = None
    if (PyDict_GET_SIZE(d) != 2 or "@s" not in d
            or (type(state) is dict and PyDict_GET_SIZE(state) == 2 and "@args" in <dict>state
                and "@state" in <dict>state)):
        state, args, kwargs, newobj = instance_parts(d)  # checks the keys and the flag
        if kwargs is not None:
            return _python_twin()  # the Rust codec's NEWOBJ_EX before 1.7.0 (no report set has it)
    # Python 2 pickles build these by REDUCE; the Rust codec wrote them as instances.
    reduced = not newobj or (<str>name == "_reconstructor" and (<str>module == "copy_reg" or <str>module == "copyreg"))
    if _copyreg(module):  # a reconstructor: the classes among its arguments are checked by the rules
        _mark_checked(w, check_instance_class(<object>w.policy, module, name, args, reduced))
    else:
        _allow(w, ROLE_CALL if reduced else ROLE_CLASS, module, name, _INST, args)
    _global(w, module, name)
    if args is None:
        _op(w, EMPTY_TUPLE)
    else:
        _value(w, args, depth + 1)
    _op(w, REDUCE if reduced else NEWOBJ)
    if PyDict_GET_SIZE(d) > 2:  # else neither "@appends" nor "@items"
        _contents(w, d.get("@appends"), d.get("@items"), depth)
    bt = _btree_class(<str>module, <str>name)
    if bt >= 0:
        _btree_state(w, state, bt, depth + 1)
    else:
        _value(w, state, depth + 1)
    return _op(w, BUILD)


cdef int _contents(Writer* w, object appends, object items, Py_ssize_t depth) except -1:
    """List and dict subclass contents, written before the state as CPython does."""
    if appends:
        if type(appends) is not list:
            raise CodecError("invalid pickle data: appends must be a list")
        _op(w, MARK)
        for x in <list>appends:
            _value(w, x, depth + 1)
        _op(w, APPENDS)
    if items:
        _pairs(w, items, depth, "items")
    return 0


cdef int _pairs(Writer* w, object pairs, Py_ssize_t depth, str what) except -1:
    """MARK key value ... SETITEMS from a list of [key, value] pairs."""
    # window: a [key, value] pair's items | both referenced after the size check, before either is written
    if type(pairs) is not list:
        raise CodecError(f"invalid pickle data: {what} must be a list of [key, value] pairs")
    _op(w, MARK)
    for pair in <list>pairs:
        if type(pair) is not list or PyList_GET_SIZE(pair) != 2:
            raise CodecError(f"invalid pickle data: {what} must be a list of [key, value] pairs")
        key, value = (<list>pair)[0], (<list>pair)[1]  # both held: writing the key may run code that changes pair
        _value(w, key, depth + 1)
        _value(w, value, depth + 1)
    return _op(w, SETITEMS)


cdef int _reduce(Writer* w, dict d, Py_ssize_t depth) except -1:
    inner, newobj, args, kwargs = reduce_parts(d)
    callable_ = inner["callable"]
    names = None  # a plain callable's, allowed here and written as its GLOBAL (not checked as a value)
    if _is_checked(w, d):  # the callable of a call, checked with it
        pass
    elif _plain_callable(callable_):  # most calls: from the table of allowed names
        names = (<dict>callable_)["@cls"]
        _allow(w, ROLE_CLASS if newobj or kwargs is not None else ROLE_CALL, names[0], names[1], _REDUCE, args)
    else:
        _mark_checked(w, check_callable(<object>w.policy, callable_, args,
                                        CLASS if newobj or kwargs is not None else CALL, _REDUCE))
    if kwargs is not None:  # copyreg.__newobj_ex__(cls, args, kwargs): NEWOBJ_EX as protocol 3 writes it
        _raw(w, b"ccopyreg\n__newobj_ex__\n", 23)
        _value(w, callable_, depth + 1) if names is None else _global(w, names[0], names[1])
        _value(w, args, depth + 1)
        _value(w, kwargs, depth + 1)
        _op2(w, TUPLE3, REDUCE)
    else:
        _value(w, callable_, depth + 1) if names is None else _global(w, names[0], names[1])
        _value(w, args, depth + 1)
        _op(w, NEWOBJ if newobj else REDUCE)
    _contents(w, inner.get("appends"), inner.get("items"), depth)
    if "state" in inner:
        _value(w, inner["state"], depth + 1)
        _op(w, BUILD)
    return 0


cdef int _kv_direct(Writer* w, object pairs) except -1:
    """_tuple(w, _flatten(pairs)) without the copy, for @kv pairs of plain keys and values; 0 (nothing
    written) if not such."""
    # window: @kv pairs and items | written only while scalars (which run nothing); else taken back
    cdef Py_ssize_t i, n, start = w.pos
    cdef PyObject* pair
    if type(pairs) is not list:
        return 0
    n = PyList_GET_SIZE(pairs)
    if n == 0:
        return 0  # _tuple's EMPTY_TUPLE
    if n > 1:
        _op(w, MARK)
    # One pass, writing as it checks: a scalar is written without running anyone's code (the list cannot
    # change), so a pair of any other kind only takes back what was written (_flatten's way then).
    for i in range(n):
        pair = PyList_GET_ITEM(pairs, i)
        if (type(<object>pair) is not list or PyList_GET_SIZE(<object>pair) != 2
                or not _scalar(w, <object>PyList_GET_ITEM(<object>pair, 0))
                or not _scalar(w, <object>PyList_GET_ITEM(<object>pair, 1))):
            w.pos = start
            return 0
    _op(w, TUPLE2 if n == 1 else TUPLE)
    return 1


cdef tuple _flatten(object pairs):
    """(k, v, k, v...) of the @kv pairs, each checked: what the Python twin's list holds."""
    # window: @kv pairs and items | the tuple made first, then copied in a loop that allocates nothing
    cdef Py_ssize_t i, n = PyList_GET_SIZE(pairs) if type(pairs) is list else -1
    if n < 0:
        _python_twin()  # pairs in another iterable than a list
    # The tuple first: making it may start the cycle collector, whose __del__ methods may change the pairs (the
    # Python twin then takes them as they are now).  The loop after it makes nothing: no code runs while it reads.
    cdef tuple flat = PyTuple_New(2 * n)
    if PyList_GET_SIZE(pairs) != n:
        _python_twin()
    for i in range(n):
        pair = <object>PyList_GET_ITEM(pairs, i)
        if type(pair) is not list or PyList_GET_SIZE(pair) != 2:
            raise CodecError("invalid pickle data: @kv pair must be [k, v]")
        x = <object>PyList_GET_ITEM(pair, 0)
        Py_INCREF(x)
        PyTuple_SET_ITEM(flat, 2 * i, x)
        x = <object>PyList_GET_ITEM(pair, 1)
        Py_INCREF(x)
        PyTuple_SET_ITEM(flat, 2 * i + 1, x)
    return flat


cdef int _btree_state(Writer* w, object state, int is_tree, Py_ssize_t depth) except -1:
    # window: a one-key BTree state's value (borrowed) | referenced (`items`) before anything is written
    cdef bint has_next
    cdef PyObject* first = NULL
    cdef int kind = _marker_kind(<dict>state, True, &first) if type(state) is dict else K_NONE
    if kind == KEY_KV or kind == KEY_KS:
        # {"@kv": ...} or {"@kv": ..., "@next": ...} (exact str keys, so the size tells)
        has_next = PyDict_GET_SIZE(state) == 2
        items = (<dict>state)["@kv" if kind == KEY_KV else "@ks"] if has_next else <object>first
        if kind == KEY_KV:
            if not _kv_direct(w, items):
                _tuple(w, _flatten(items), depth)
        else:
            _tuple(w, items, depth)
        if is_tree:
            if has_next:
                raise CodecError("invalid pickle data: @next in the state of a BTree")
            _op2(w, TUPLE1, TUPLE1)
            _op(w, TUPLE1)
        elif has_next:
            _value(w, (<dict>state)["@next"], depth + 1)
            _op(w, TUPLE2)
        else:
            _op(w, TUPLE1)
    elif kind == KEY_CHILDREN:
        if not is_tree:
            raise CodecError("invalid pickle data: @children in the state of a bucket")
        _tuple(w, (<dict>state)["@children"], depth)
        _value(w, (<dict>state)["@first"], depth + 1)
        _op(w, TUPLE2)
    else:
        _value(w, state, depth)
    return 0


# ---------------------------------------------------------------------------
# Known types: common shapes in C, the rest through _known's calls
# ---------------------------------------------------------------------------

cdef int _call(Writer* w, object call) except -1:
    """A ``_encode_known.Call`` (a known type's value in a shape the C readers below do not take), as the Python
    twin's _Writer.call writes it: the arguments are scalars, globals and calls."""
    writer = _PythonWriter(False, None)
    writer.call(call)
    return _written_by(w, writer)


cdef inline Py_ssize_t _digits(const unsigned char* p, Py_ssize_t i, Py_ssize_t n) noexcept:
    while i < n and 48 <= p[i] <= 57:
        i += 1
    return i


cdef inline long _number(const unsigned char* p, Py_ssize_t i, Py_ssize_t j) noexcept:
    cdef long v = 0
    while i < j:
        v = v * 10 + (p[i] - 48)
        i += 1
    return v


cdef inline long _fraction(const unsigned char* p, Py_ssize_t i, Py_ssize_t j) noexcept:
    """_encode_known._fraction: the first six digits, right-padded with zeros."""
    cdef long v = 0
    cdef int k
    for k in range(6):
        v = v * 10 + ((p[i] - 48) if i < j else 0)
        i += 1
    return v


cdef int _offset(const unsigned char* p, Py_ssize_t i, Py_ssize_t n, long long* total) noexcept:
    """_encode_known._offset_us of p[i:n]: 0 none, 1 an offset in *total, -1 not a shape handled here."""
    cdef long long t
    if i == n:
        return 0
    if n - i < 6 or (p[i] != b"+" and p[i] != b"-") or _digits(p, i + 1, n) != i + 3 or p[i + 3] != b":":
        return -1
    if _digits(p, i + 4, n) != i + 6 or _number(p, i + 1, i + 3) > 23 or p[i + 4] > b"5":  # under 24 hours
        return -1
    t = (_number(p, i + 1, i + 3) * 60 + _number(p, i + 4, i + 6)) * 60
    if i + 6 < n:
        if n - i < 9 or p[i + 6] != b":" or _digits(p, i + 7, n) != i + 9 or p[i + 7] > b"5":
            return -1
        t = (t + _number(p, i + 7, i + 9)) * 1000000
        if i + 9 < n:
            if p[i + 9] != b"." or _digits(p, i + 10, n) != n or n - (i + 10) < 1 or n - (i + 10) > 6:
                return -1
            t += _fraction(p, i + 10, n)
    else:
        t *= 1000000
    total[0] = -t if p[i] == b"-" else t
    return 1


cdef int _timezone(Writer* w, long long total) except -1:
    """_encode_known.timezone_call(total): datetime.timezone(datetime.timedelta(microseconds=total))."""
    cdef long long rest = total % 86400000000LL  # Python's floor division, as timedelta's days and the rest
    _raw(w, b"cdatetime\ntimezone\ncdatetime\ntimedelta\n", 39)
    _int64(w, total // 86400000000LL)
    _int64(w, rest // 1000000)
    _int64(w, rest % 1000000)
    _op2(w, TUPLE3, REDUCE)
    return _op2(w, TUPLE1, REDUCE)


cdef inline long _fixed(const unsigned char* p, Py_ssize_t width) noexcept:
    """p[0:width] as a number if they are all ASCII digits, else -1."""
    cdef long v = 0
    cdef Py_ssize_t k
    for k in range(width):
        if <unsigned char>(p[k] - 48) >= 10:
            return -1
        v = v * 10 + (p[k] - 48)
    return v


cdef inline Py_ssize_t _three_numbers(const unsigned char* p, Py_ssize_t i, Py_ssize_t n, unsigned char sep,
                                      Py_ssize_t width, long* out) noexcept:
    """``a<sep>b<sep>c`` at i, a of width digits, b and c of 2, no digit after (YYYY-MM-DD, HH:MM:SS): the numbers
    into out[0:3], the offset after c; -1 for any other text (the Python rules read every spelling)."""
    cdef Py_ssize_t j = i + width
    if j + 6 > n or p[j] != sep or p[j + 3] != sep or (j + 6 < n and <unsigned char>(p[j + 6] - 48) < 10):
        return -1
    out[0], out[1], out[2] = _fixed(p + i, width), _fixed(p + j + 1, 2), _fixed(p + j + 4, 2)
    return j + 6 if (out[0] | out[1] | out[2]) >= 0 else -1


cdef int _clock(const unsigned char* p, Py_ssize_t i, Py_ssize_t n, uint8_t* out, Py_ssize_t* end) noexcept:
    """``HH:MM:SS[.f*]`` of the @dt/@time regexes from i, a time of day: state bytes into out[0:6], 0; -1 if not."""
    cdef long hms[3]
    cdef long us = 0
    cdef Py_ssize_t j = _three_numbers(p, i, n, b":", 2, hms)
    if j < 0 or hms[0] > 23 or hms[1] > 59 or hms[2] > 59:
        return -1
    if j < n and p[j] == b".":
        i = j + 1
        j = _digits(p, i, n)
        us = _fraction(p, i, j)
    out[0] = <uint8_t>hms[0]
    out[1] = <uint8_t>hms[1]
    out[2] = <uint8_t>hms[2]
    out[3] = <uint8_t>(us >> 16)
    out[4] = <uint8_t>(us >> 8)
    out[5] = <uint8_t>us
    end[0] = j
    return 0


cdef inline int _date_part(const unsigned char* p, Py_ssize_t n, uint8_t* out, Py_ssize_t* end) noexcept:
    """``Y-M-D`` of the @dt/@date regexes, a date that exists: state bytes into out[0:4], 0; -1 if not."""
    cdef long ymd[3]
    cdef Py_ssize_t j = _three_numbers(p, 0, n, b"-", 4, ymd)
    if j < 0 or not date_exists(ymd[0], ymd[1], ymd[2]):
        return -1
    out[0] = <uint8_t>(ymd[0] >> 8)
    out[1] = <uint8_t>ymd[0]
    out[2] = <uint8_t>ymd[1]
    out[3] = <uint8_t>ymd[2]
    end[0] = j
    return 0


cdef bint _zoned_call(Writer* w, const char* call, Py_ssize_t call_size, const uint8_t* state,
                      Py_ssize_t state_size, const unsigned char* p, Py_ssize_t end, Py_ssize_t n) except -1:
    """A datetime or time: the call (GLOBAL and the state's opcode), the state, and the offset at
    p[end:n] as a timezone argument if there is one, then REDUCE: True; False (nothing written) when
    the text there is not an offset _offset reads."""
    cdef long long total
    cdef int offset = _offset(p, end, n, &total)
    if offset < 0:
        return False
    _raw(w, call, call_size)
    _raw(w, state, state_size)
    if offset:
        _timezone(w, total)
        _op2(w, TUPLE2, REDUCE)
    else:
        _op2(w, TUPLE1, REDUCE)
    return True


cdef int _m_dt(Writer* w, object text, object tz, Py_ssize_t depth) except -1:
    # window: str_chars
    cdef const unsigned char* p
    cdef Py_ssize_t n, end
    cdef uint8_t state[10]
    cdef PyObject* zone = _pytz_arguments(tz) if tz is not None else NULL
    if (tz is None or zone != NULL) and type(text) is str and PyUnicode_IS_ASCII(text):
        # datetime.datetime(state[, zone]), as _encode_known.datetime_call builds it: the zone a
        # timezone(timedelta(...)) of the text's offset, or pytz's (a naive text: the decoder's form).
        n = PyUnicode_GET_LENGTH(text)
        p = <const unsigned char*>PyUnicode_DATA(text)
        if (_date_part(p, n, state, &end) == 0 and end < n and p[end] == b"T"
                and _clock(p, end + 1, n, state + 4, &end) == 0):
            if tz is None and _zoned_call(w, b"cdatetime\ndatetime\nC\n", 21, state, 10, p, end, n):
                return 0
            if zone != NULL and end == n and _pytz_offsets_fit(<object>zone):
                arguments = <list>zone  # held: a big int among them runs code (a collection) as it is written
                _raw(w, b"cdatetime\ndatetime\nC\n", 21)
                _raw(w, state, 10)
                _raw(w, b"cpytz\n_p\n", 9)  # pytz._p(*arguments), as _Writer.call writes tz_call's Call
                _tuple(w, arguments, depth)
                _op(w, REDUCE)
                return _op2(w, TUPLE2, REDUCE)
    return _call(w, _encode_known.datetime_call(text, tz))


cdef PyObject* _pytz_arguments(object tz) noexcept:
    """The list of a ``{"pytz": [...], "name": ...}`` zone whose items are all exact strs and ints (pytz's
    zone names and offsets: the only arguments _encode_known.tz_call takes, and code-free to write), borrowed;
    NULL for any other zone (the Python rules then say what it is, or what is wrong with it)."""
    # window: a pytz zone's entries (borrowed) | type checks only; `_m_dt` references the list
    cdef Py_ssize_t pos = 0, i
    cdef PyObject* k
    cdef PyObject* v
    cdef PyObject* found = NULL
    cdef int names = 0
    if type(tz) is not dict or PyDict_GET_SIZE(tz) != 2:
        return NULL
    while zjc_dict_next(tz, &pos, &k, &v):
        if type(<object>k) is not str:
            return NULL
        if _is_text(<str>k, b"pytz", 4):
            found = v
        elif _is_text(<str>k, b"name", 4):
            names += 1
    if found == NULL or names != 1 or type(<object>found) is not list or PyList_GET_SIZE(<object>found) == 0:
        return NULL
    for i in range(PyList_GET_SIZE(<object>found)):
        v = PyList_GET_ITEM(<object>found, i)
        if type(<object>v) is not str and type(<object>v) is not int:
            return NULL
    return found


cdef bint _pytz_offsets_fit(object arguments) except -1:
    """pytz._p(zone, utcoffset, dstoffset, tzname)'s offsets under 24 hours either way, as _encode_known.tz_call
    takes them (else the Python rule says what is wrong); allocates nothing (`_m_dt` holds the list after it)."""
    for i in range(1, min(len(arguments), 3)):
        if type(arguments[i]) is int and not -86399 <= arguments[i] <= 86399:
            return False
    return True


cdef int _m_time(Writer* w, dict d) except -1:
    # window: str_chars
    cdef const unsigned char* p
    cdef Py_ssize_t n, end
    cdef uint8_t state[6]
    text = d["@time"]
    if PyDict_GET_SIZE(d) == 1 and type(text) is str and PyUnicode_IS_ASCII(text):
        n = PyUnicode_GET_LENGTH(text)
        p = <const unsigned char*>PyUnicode_DATA(text)
        if (_clock(p, 0, n, state, &end) == 0
                and _zoned_call(w, b"cdatetime\ntime\nC\x06", 17, state, 6, p, end, n)):
            return 0
    return _call(w, _encode_known.time_call(text, d.get("@tz")))


cdef int _m_date(Writer* w, object text) except -1:
    # window: str_chars
    cdef const unsigned char* p
    cdef Py_ssize_t n, end
    cdef uint8_t state[4]
    if type(text) is str and PyUnicode_IS_ASCII(text):
        n = min(PyUnicode_GET_LENGTH(text), 10)  # date_call matches the first ten characters only
        p = <const unsigned char*>PyUnicode_DATA(text)
        if _date_part(p, n, state, &end) == 0 and end == n:
            _raw(w, b"cdatetime\ndate\nC\x04", 17)
            _raw(w, state, 4)
            return _op2(w, TUPLE1, REDUCE)
    return _call(w, _encode_known.date_call(text))


cdef int _m_td(Writer* w, object parts) except -1:
    # window: a timedelta's three numbers | 64-bit ints, whose writing runs nothing; else the Python call
    cdef Py_ssize_t start = w.pos, i
    cdef PyObject* x
    cdef long long v
    if type(parts) is list and PyList_GET_SIZE(parts) == 3:
        _raw(w, b"cdatetime\ntimedelta\n", 20)
        for i in range(3):  # ints of 64 bits, whose writing runs no code; any other shape through the call
            x = PyList_GET_ITEM(parts, i)  # in range for sure: compact (under 2**30), days under 999,900,000
            if (type(<object>x) is not int or not zjc_compact_long(<object>x, &v)
                    or (i == 0 and not -999900000 < v < 999900000) or not _int_in_64_bits(w, <object>x)):
                w.pos = start
                return _call(w, _encode_known.timedelta_call(parts))
        return _op2(w, TUPLE3, REDUCE)
    return _call(w, _encode_known.timedelta_call(parts))


cdef int _m_dec(Writer* w, object text) except -1:
    cdef Py_ssize_t start = w.pos
    if type(text) is str:
        _raw(w, b"cdecimal\nDecimal\n", 17)
        _str(w, <str>text)  # BINUNICODE: a 5-byte header, then the text's UTF-8, read back here
        if decimal_text(w.buf + start + 22, w.pos - start - 22):
            return _op2(w, TUPLE1, REDUCE)
        w.pos = start
    return _call(w, _encode_known.decimal_call(text))


cdef int _uuid_head(Writer* w) except -1:
    return _raw(w, b"cuuid\nUUID\n)\x81}X\x03\x00\x00\x00int", 22)


cdef int _m_uuid(Writer* w, object text) except -1:
    # window: str_chars
    cdef const unsigned char* p
    cdef uint8_t raw[16]
    cdef uint64_t hi = 0, lo = 0
    cdef int i
    if type(text) is str and PyUnicode_IS_ASCII(text) and PyUnicode_GET_LENGTH(text) == 36:
        # The canonical 8-4-4-4-12 spelling; anything else through _encode_known.uuid_int.
        p = <const unsigned char*>PyUnicode_DATA(text)
        if (p[8] == p[13] == p[18] == p[23] == b"-" and zjc_unhex(p, 8, raw) == 0 and zjc_unhex(p + 9, 4, raw + 4) == 0
                and zjc_unhex(p + 14, 4, raw + 6) == 0 and zjc_unhex(p + 19, 4, raw + 8) == 0
                and zjc_unhex(p + 24, 12, raw + 10) == 0):
            for i in range(8):
                hi = hi << 8 | raw[i]
                lo = lo << 8 | raw[8 + i]
            _uuid_head(w)
            _int128(w, False, hi, lo)
            return _op2(w, SETITEM, BUILD)
    value = _encode_known.uuid_int(text)  # other spellings; its errors before anything is written
    _uuid_head(w)
    _int(w, value)
    return _op2(w, SETITEM, BUILD)


# ---------------------------------------------------------------------------
# Native Python values (docs/format.md, "Differences from the Rust codec": Encoders)
# ---------------------------------------------------------------------------

cdef int _native(Writer* w, object v, Py_ssize_t depth) except -1:
    """Exact tuples and bytes; every other Python value (subclasses, sets, datetimes...) the Python twin writes."""
    if type(v) is tuple and depth <= _C_WALK:
        return _tuple(w, v, depth)
    if type(v) is bytes:
        return _bytes(w, <bytes>v)
    return _python_twin()


def _dict_items_walked(d, Py_ssize_t reopen=0):
    """[(key, value), ...] as the walk reads d (zjc_dict_next), and whether it read CPython's entries itself:
    for the tests (tests/test_dict_walk.py).  With reopen, as a zjc_dict_run reads it instead, opened again
    after every reopen items (as _plain_dict does after a value's code)."""
    # window: a dict's entries (for the tests) | copied with references into a tuple made before the walk
    cdef Py_ssize_t pos = 0
    cdef PyObject* k = NULL
    cdef PyObject* v = NULL
    cdef zjc_dict_run run
    cdef Py_ssize_t n = 0, i, size = PyDict_GET_SIZE(d) if isinstance(d, dict) else 0
    if not isinstance(d, dict):
        raise TypeError("a dict")
    # The entries as read, with references of their own, into a tuple made first: making anything while the walk
    # reads may start the collector, whose __del__ methods could change the dict under it (as _flatten).
    cdef tuple read = PyTuple_New(2 * size)
    zjc_dict_run_open(d, 0, &run)
    while n < size and (zjc_dict_run_next(&run, &pos, &k, &v) if reopen > 0 else zjc_dict_next(d, &pos, &k, &v)):
        Py_INCREF(<object>k)
        PyTuple_SET_ITEM(read, 2 * n, <object>k)
        Py_INCREF(<object>v)
        PyTuple_SET_ITEM(read, 2 * n + 1, <object>v)
        n += 1
        if reopen > 0 and n % reopen == 0:
            zjc_dict_run_open(d, pos, &run)
    return [(read[2 * i], read[2 * i + 1]) for i in range(n)], zjc_dict_direct != 0


def _dict_pair_read(d):
    """[(key, value), (key, value)] as zjc_dict_pair reads d, or None where it leaves d to the walk: for the
    tests (tests/test_dict_walk.py)."""
    # window: a dict's two entries (for the tests) | referenced into locals before any tuple or list is made
    cdef PyObject* k0 = NULL
    cdef PyObject* v0 = NULL
    cdef PyObject* k1 = NULL
    cdef PyObject* v1 = NULL
    if not isinstance(d, dict):
        raise TypeError("a dict")
    if not zjc_dict_pair(d, &k0, &v0, &k1, &v1):
        return None
    key0, value0, key1, value1 = <object>k0, <object>v0, <object>k1, <object>v1  # held before the list is made
    return [(key0, value0), (key1, value1)]


# ---------------------------------------------------------------------------
# Public functions
# ---------------------------------------------------------------------------

cdef object _verbatim(object value, object policy):
    """The original pickle bytes of a top-level ``@pkl`` (docs/format.md, "The verbatim fallback"), its globals
    allowed by the policy; else None.  (A key of another type than str that equals "@pkl" is not seen here:
    the walk hands such a key to the Python twin, whose rule sees it.)"""
    # window: the `@pkl` text (borrowed) | referenced before it is decoded
    cdef PyObject* p = _one_key_value(value, KEY_PKL)
    if p != NULL and type(<object>p) is str:
        text = <object>p  # held: decoding it allocates
        data = b64decode(text, "@pkl")
        check_pickle_globals(policy, data, "a name inside a @pkl")
        return data
    return None


cdef inline bint _is_text(str k, const char* text, Py_ssize_t n) noexcept:
    """The exact str k is the n ASCII characters at text (a compare the compiler unrolls; _key hashes)."""
    return PyUnicode_GET_LENGTH(k) == n and ascii_at(k, 0, text, n)


cdef inline bint _is_empty(object s) except -1:
    """s == "" (a str subclass compares itself)."""
    if type(s) is str:
        return PyUnicode_GET_LENGTH(s) == 0
    return s == ""


cdef bint _usual_record(dict d, PyObject** cls, PyObject** state) noexcept:
    """d.get("@cls"), d.get("@s") (borrowed) of the usual record, "@cls" first, then "@s": True; else False
    (record_parts looks the keys up): a look at its two entries beats hashing."""
    # window: a record's two values (borrowed) | keys compared; `_record` references both before any code
    cdef PyObject* k
    cdef PyObject* k1
    return (zjc_dict_pair(d, &k, cls, &k1, state) and type(<object>k) is str and type(<object>k1) is str
            and _is_text(<str>k, b"@cls", 4) and _is_text(<str>k1, b"@s", 2))


cdef int _record_head(Writer* w, str module, str name, object args) except -1:
    """The class pickle, ``((module, name), args)``, and the state pickle's PROTO."""
    _op2(w, PROTO, 3)
    _str(w, module)
    _str(w, name)
    if args is None:  # nearly every record
        return _raw(w, b"\x86N\x86.\x80\x03", 6)  # TUPLE2 NONE TUPLE2 STOP, then the state's PROTO 3
    _op(w, TUPLE2)
    _value(w, args, 1)
    return _raw(w, b"\x86.\x80\x03", 4)


def encode_zodb_record(obj, *, policy=None):
    """A ZODB record (class pickle + state pickle) from ``{"@cls": [module, name], "@s": state}``.

    ``policy``: the globals policy (docs/security.md); the process default when None.  Raises TypeError
    for a non-dict argument or an unencodable Python value, ValueError for malformed markers, and
    ``GlobalRefused`` (a ValueError) for a global the policy refuses.
    """
    # a value deeper than the C walk goes: the Python twin's function
    return zjc_encode(_record, obj, _policy_of(policy), <PyObject*>_PYTHON_TWIN, <PyObject*>_python_record,
                      <PyObject*>_located_in_record)


cdef inline int _record_state(Writer* w, object state, int bt) except -1:
    """The state pickle after its PROTO: a BTree's (bt: _btree_class of the record's names) or any value's."""
    if bt >= 0:
        _btree_state(w, state, bt, 0)
    else:
        _value(w, state, 0)
    return _op(w, STOP)


cdef object _record(object obj, object policy):
    """encode_zodb_record of a value within the C walk's depth; class names of str subclasses and the
    object records of docs/format.md (an empty module and name) are the Python twin's."""
    # window: the class marker's list and its two names | referenced into locals before any code
    cdef unsigned char stack[_STACK_BUFFER]
    cdef Writer w
    cdef PyObject* p
    cdef PyObject* s
    if type(obj) is dict and _usual_record(<dict>obj, &p, &s) and _is_cls_value(<object>p):
        module = <object>PyList_GET_ITEM(<object>p, 0)
        name = <object>PyList_GET_ITEM(<object>p, 1)
        state = <object>s
    else:
        module, name, state = record_parts(obj)  # other shapes, and their errors
    if type(module) is not str or type(name) is not str:
        return _python_twin()
    verbatim = _verbatim(state, policy)
    if verbatim is not None:
        return verbatim
    if PyUnicode_GET_LENGTH(module) == 0 and PyUnicode_GET_LENGTH(name) == 0:
        return _python_twin()
    args = None
    if (type(state) is dict and PyDict_GET_SIZE(state) == 2 and "@args" in <dict>state
            and "@state" in <dict>state):
        args = (<dict>state)["@args"]
        state = (<dict>state)["@state"]
    _init(&w, stack, True, policy)
    try:
        if not _record_class_allowed(&w, module, name):
            return _python_twin()  # its rules say what to do: a state it takes verbatim, or the refusal
        _record_head(&w, <str>module, <str>name, args)
        Py_XDECREF(w.checked)  # the state is another pickle: what the class pickle's rules checked is not its
        w.checked = NULL       # (the Python twin writes each with a writer of its own)
        _record_state(&w, state, _btree_class(<str>module, <str>name))
        return _result(&w)
    finally:
        _release(&w)


cdef object _pickle(object value, object policy):
    """One pickle of value within the C walk's depth, references in their verbose form."""
    cdef unsigned char stack[_STACK_BUFFER]
    cdef Writer w
    _init(&w, stack, False, policy)
    try:
        _op2(&w, PROTO, 3)
        _value(&w, value, 0)
        _op(&w, STOP)
        return _result(&w)
    finally:
        _release(&w)


def _pickle_value(value, policy):
    # a value deeper than the C walk goes: the Python twin's function (public_functions locates a refusal)
    return zjc_encode(_pickle, value, policy, <PyObject*>_PYTHON_TWIN, <PyObject*>_python_pickle_value, NULL)


dict_to_pickle, json_to_pickle = public_functions(_pickle_value)


# ---------------------------------------------------------------------------
# JSON text straight to opcodes (encode_zodb_record_from_pg_json)
# ---------------------------------------------------------------------------

# One pass over UTF-8 JSON text writing what the walk above writes for the value json.loads would give:
# plain values, and the markers real records hold most (references, @kv states, tuples, instances), are
# written as they are read; the common one-key markers' values and any other dict whose first key starts
# with "@" are built as Python values and handed to the walk (at the top: to the record's own rules).  Anything else (an error, a duplicate or
# escaped key, a number of more than 418 characters, nesting deeper than the C walk) makes the reader
# give up (_Bail), and the caller takes the normative way (_jsonread + the encoder), which gives the
# same bytes or the exact error.  Strings longer than 64 KB are copied with the GIL released.

cdef extern from "Python.h":
    double PyOS_string_to_double(const char* s, char** endptr, PyObject* overflow_exception) except? -1.0
    object PyLong_FromString(const char* s, char** pend, int base)
    object PyUnicode_DecodeUTF8(const char* s, Py_ssize_t size, const char* errors)
    object PyUnicode_FromStringAndSize(const char* s, Py_ssize_t size)

cdef enum:
    _KEY_SLOTS = 64              # the duplicate-key table on the C stack; grows on the heap
    _NOGIL_RUN = 1 << 16         # strings longer than this are copied without the GIL
    _FAST_INT_DIGITS = 18        # integers of up to this many digits fit a long long


class _Bail(Exception):
    """The one-pass reader gives up: the normative way decides."""


cdef struct KeySlot:
    Py_ssize_t serial            # the dict the key belongs to (0: empty slot)
    Py_ssize_t pos               # its UTF-8 in the output buffer
    Py_ssize_t size
    uint64_t hash


cdef struct ClassHead:  # where the two strings of ["module", "name"] (or a reference's ["oid", "module.Name"]) are
    Py_ssize_t module_at
    Py_ssize_t module_size
    Py_ssize_t name_at
    Py_ssize_t name_size


cdef struct Reader:
    const unsigned char* p
    Py_ssize_t n
    Py_ssize_t i
    bint check_utf8              # bytes input: strings are checked to be strict UTF-8
    KeySlot* keys
    Py_ssize_t keys_cap          # a power of 2
    Py_ssize_t keys_used
    bint keys_heap
    Py_ssize_t serial            # dicts opened so far
    Py_ssize_t str_pos           # the last string's UTF-8 in the output buffer
    Py_ssize_t str_size


cdef inline int _bail() except -1:
    raise _Bail()  # a new one each time: a raised instance keeps its traceback, which would grow


cdef inline void _ws(Reader* r) noexcept nogil:
    cdef const unsigned char* p = r.p
    cdef Py_ssize_t i = r.i, n = r.n
    while i < n and p[i] <= 32 and (p[i] == 32 or p[i] == 10 or p[i] == 13 or p[i] == 9):  # most often none
        i += 1
    r.i = i


cdef inline int _hex4(const unsigned char* p, Py_ssize_t i, Py_ssize_t n) noexcept nogil:
    """The code unit of the 4 hex digits at p[i], or -1."""
    cdef unsigned char unit[2]
    if i + 4 > n or zjc_unhex(p + i, 4, unit) < 0:
        return -1
    return unit[0] << 8 | unit[1]


cdef unsigned char _UNESCAPED[256]  # what an escape's letter stands for; 0 (a C array starts zeroed): no escape
for _k, _c in ((34, 34), (92, 92), (47, 47), (98, 8), (102, 12), (110, 10), (114, 13), (116, 9)):
    _UNESCAPED[_k] = _c


cdef int _unescape(const unsigned char* p, Py_ssize_t* at, Py_ssize_t n, Py_ssize_t limit, bint check_utf8,
                   unsigned char** out) noexcept nogil:
    """String bytes from p[*at] unescaped into *out (room for what is left of the text: nothing grows), as
    _jsonread reads them: 0 at the closing quote (*at after it), 1 when past limit (*at where to go on), -1 if
    the text is not what json.loads reads (a control character, bad UTF-8, a bad escape, no closing quote)."""
    cdef Py_ssize_t i = at[0], start
    cdef unsigned char* o = out[0]
    cdef unsigned char c, e
    cdef int unit, low, bad = 0
    cdef int status = -1
    while True:
        if i >= limit:
            status = 1
            break
        # The run up to the next quote, backslash or control character, copied (and checked) at once.
        start = i
        i += zjc_json_run(p + i, n - i, o, check_utf8, &bad)
        if bad:
            i = start + zjc_utf8_prefix(p + start, i - start, 0)  # where the bad UTF-8 is
            break
        o += i - start
        if i >= n:
            break
        c = p[i]
        if c == 34:
            i += 1
            status = 0
            break
        if c != 92 or i + 1 >= n:
            break
        e = p[i + 1]
        if e == b'u':
            unit = _hex4(p, i + 2, n)
            if unit < 0:
                break
            i += 6
            if 0xD800 <= unit <= 0xDBFF and i + 1 < n and p[i] == 92 and p[i + 1] == b'u':
                low = _hex4(p, i + 2, n)
                if 0xDC00 <= low <= 0xDFFF:  # a surrogate pair: one character
                    unit = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)
                    i += 6
            o = zjc_code_point(o, <uint32_t>unit)
        elif _UNESCAPED[e]:
            o[0] = _UNESCAPED[e]
            o += 1
            i += 2
        else:
            break
    at[0] = i
    out[0] = o
    return status


cdef int _string_payload(Reader* r, Writer* w) except -1:
    """The UTF-8 of the string whose opening quote is at r.i into w; r.i after its closing quote.  Unescaped text
    is never longer than its JSON: room for the rest of the text is all it needs."""
    cdef Py_ssize_t i = r.i + 1
    cdef unsigned char* o
    cdef int status
    _reserve(w, r.n - i)
    o = w.buf + w.pos
    status = _unescape(r.p, &i, r.n, i + _NOGIL_RUN, r.check_utf8, &o)
    if status == 1:
        with nogil:
            status = _unescape(r.p, &i, r.n, r.n + 1, r.check_utf8, &o)
    w.pos = o - w.buf
    if status != 0:
        return _bail()
    r.i = i
    return 0


cdef int _json_string(Reader* r, Writer* w) except -1:
    """BINUNICODE of the string at r.i; r.str_pos/str_size say where its UTF-8 is."""
    cdef Py_ssize_t start = _text_start(w), size
    _string_payload(r, w)
    size = _text_end(w, start)
    if size < 0:
        return _bail()
    r.str_pos = start + 5
    r.str_size = size
    return 0


cdef double _POW10[23]
for _k in range(23):
    _POW10[_k] = 10.0 ** _k  # exact: the powers of ten up to 1e22 are doubles


cdef bint _fast_decimal(const unsigned char* p, Py_ssize_t i, Py_ssize_t end, bint negative, double* out) noexcept:
    """The double of the digits, fraction and exponent p[i:end] (syntax already checked) when they hold at most 15
    significant digits and the power of ten is within 1e-22..1e22: both are then exact doubles, and the one
    multiply or divide rounds correctly, as strtod does (Clinger's fast path).  Else False."""
    cdef uint64_t m = 0
    cdef int digits = 0, e10 = 0, exponent = 0, sign = 1
    cdef bint after_point = False
    cdef double v
    while i < end and p[i] != b'e' and p[i] != b'E':
        if p[i] == b'.':
            after_point = True
        else:
            if m or p[i] != 48:  # leading zeros are not significant
                digits += 1
                if digits > 15:
                    return False
                m = m * 10 + (p[i] - 48)
            e10 -= after_point
        i += 1
    if i < end:  # the exponent
        i += 1
        if p[i] == b'-' or p[i] == b'+':
            sign = -1 if p[i] == b'-' else 1
            i += 1
        while i < end:
            exponent = exponent * 10 + (p[i] - 48)
            if exponent > 400:
                return False
            i += 1
        e10 += sign * exponent
    if m == 0:
        out[0] = -0.0 if negative else 0.0
        return True
    if e10 < -22 or e10 > 22:
        return False
    v = <double>m * _POW10[e10] if e10 >= 0 else <double>m / _POW10[-e10]
    out[0] = -v if negative else v
    return True


cdef object _number_value(Reader* r, bint* is_float, long long* small, double* real):
    """The number at r.i: *small set (None returned) for an int of few digits, *real set (None returned) for a float
    of few digits, else an int or float object (*is_float says which)."""
    cdef const unsigned char* p = r.p
    cdef Py_ssize_t i = r.i, n = r.n, start = r.i, digits_start, k
    cdef long long x = 0
    cdef bint negative = False, fraction = False
    cdef char buf[420]
    if i < n and p[i] == b'-':
        negative = True
        i += 1
    digits_start = i
    i = _digits(p, i, n)
    if i == digits_start or (p[digits_start] == b'0' and i > digits_start + 1):
        _bail()  # no digits, or a leading zero
    if i < n and p[i] == b'.':
        fraction = True
        k = i + 1
        i = _digits(p, k, n)
        if i == k:
            _bail()
    if i < n and (p[i] == b'e' or p[i] == b'E'):
        fraction = True
        k = i + 2 if i + 1 < n and (p[i + 1] == b'+' or p[i + 1] == b'-') else i + 1
        i = _digits(p, k, n)
        if i == k:
            _bail()
    r.i = i
    is_float[0] = fraction
    if not fraction and i - digits_start <= _FAST_INT_DIGITS:
        for k in range(digits_start, i):
            x = x * 10 + (p[k] - 48)
        small[0] = -x if negative else x
        return None
    if fraction and _fast_decimal(p, digits_start, i, negative, real):
        return None
    if i - start >= (<Py_ssize_t>sizeof(buf)) - 1:
        _bail()  # a number of 419 characters or more: left to _jsonread
    memcpy(buf, p + start, <size_t>(i - start))
    buf[i - start] = 0
    if fraction:
        return PyOS_string_to_double(buf, NULL, NULL)
    return PyLong_FromString(buf, NULL, 10)


cdef int _json_number(Reader* r, Writer* w) except -1:
    cdef bint is_float = False
    cdef long long small = 0
    cdef double real = 0.0
    v = _number_value(r, &is_float, &small, &real)
    if v is None:
        return _float(w, real) if is_float else _int64(w, small)
    if is_float:
        return _float(w, <double>v)
    return _int(w, v)


cdef inline bint _literal(Reader* r, const char* word, Py_ssize_t m) noexcept:
    if r.i + m <= r.n and same_bytes(<const char*>r.p + r.i, word, m):
        r.i += m
        return True
    return False


cdef inline bint _marker_ahead(Reader* r) noexcept:
    """At a '{': does its first key start with "@" (or an escape, which might be one)?"""
    cdef Py_ssize_t save = r.i
    cdef bint found
    r.i += 1
    _ws(r)
    found = r.i + 1 < r.n and r.p[r.i] == 34 and (r.p[r.i + 1] == 64 or r.p[r.i + 1] == 92)
    r.i = save
    return found


cdef int _json_value(Reader* r, Writer* w, Py_ssize_t depth) except -1:
    """Write the value at r.i (whitespace skipped) as _value writes it at depth."""
    cdef unsigned char c
    if r.i >= r.n:
        return _bail()
    c = r.p[r.i]
    if c == 34:
        return _json_string(r, w)
    if c == b'{':
        if depth > _C_WALK:
            return _bail()
        if _marker_ahead(r):
            if _json_one_key_marker(r, w, depth) or _json_instance(r, w, depth):
                return 0
            return _value(w, _json_build(r, w, depth), depth)  # the levels built count from here on
        return _json_dict(r, w, depth)
    if c == b'[':
        return _json_list(r, w, depth)
    if c == b'-' or b'0' <= c <= b'9':
        return _json_number(r, w)
    if _literal(r, b"null", 4):
        return _op(w, NONE)
    if _literal(r, b"true", 4):
        return _op(w, NEWTRUE)
    if _literal(r, b"false", 5):
        return _op(w, NEWFALSE)
    return _bail()


cdef inline Py_ssize_t _json_items(Reader* r, Writer* w, Py_ssize_t depth) except -1:
    """The items of the list whose '[' is at r.i, each written at depth, r.i after its ']': how many."""
    cdef Py_ssize_t count = 0
    if not _empty(r, b']'):
        while True:
            _json_value(r, w, depth)
            count += 1
            if not _more(r, b']'):
                break
    return count


cdef int _json_list(Reader* r, Writer* w, Py_ssize_t depth) except -1:
    if depth > _C_WALK:
        return _bail()
    _op2(w, EMPTY_LIST, MARK)
    if _json_items(r, w, depth + 1):
        return _op(w, APPENDS)
    w.pos -= 1  # no items: no MARK
    return 0


cdef int _json_dict(Reader* r, Writer* w, Py_ssize_t depth) except -1:
    """A dict whose first key does not start with "@": a plain dict (no marker has such a key)."""
    cdef Py_ssize_t serial
    _op(w, EMPTY_DICT)  # (depth: checked by _json_value)
    if _empty(r, b'}'):
        return 0
    _op(w, MARK)
    r.serial += 1
    serial = r.serial
    while True:
        if r.i >= r.n or r.p[r.i] != 34:
            return _bail()
        _json_string(r, w)
        if r.str_size >= 4 and w.buf[r.str_pos] == 64 and w.buf[r.str_pos + 3] == 58:
            return _bail()       # "@ns:..." / "@su:..." maybe: an escaped key
        _new_key(r, w, serial)
        if not _expect(r, b':'):
            return _bail()
        _json_value(r, w, depth + 1)
        if not _more(r, b'}'):
            return _op(w, SETITEMS)


# The markers of real records written as they are read: references in the forms decode_zodb_record_for_pg_json
# writes, {"@ref": "<hex>"} and {"@ref": ["<hex>", "module.Name"]}, and a BTree's or bucket's @kv state.
# Any other spelling is left to the built value (the reader is put back).

cdef inline bint _at_key(Reader* r, const char* quoted, Py_ssize_t m) noexcept:
    """Is the key quoted (with its quotes) at r.i, then ':'?  r.i after the ':' and whitespace if so."""
    cdef Py_ssize_t save = r.i
    if r.i + m <= r.n and same_bytes(<const char*>r.p + r.i, quoted, m):
        r.i += m
        _ws(r)
        if r.i < r.n and r.p[r.i] == b':':
            r.i += 1
            _ws(r)
            return True
    r.i = save
    return False


cdef inline bint _expect(Reader* r, unsigned char c) noexcept:
    """Whitespace, then c (r.i after it): True, else False."""
    _ws(r)
    if r.i < r.n and r.p[r.i] == c:
        r.i += 1
        _ws(r)
        return True
    return False


cdef inline bint _empty(Reader* r, unsigned char close) noexcept:
    """Past the opening bracket at r.i and whitespace: True, and past close too, if close follows."""
    r.i += 1
    _ws(r)
    if r.i < r.n and r.p[r.i] == close:
        r.i += 1
        return True
    return False


cdef inline bint _more(Reader* r, unsigned char close) except -1:
    """After an item: True past a ',' (and whitespace), False past close; anything else gives up."""
    if _expect(r, b','):
        return True
    if r.i < r.n and r.p[r.i] == close:
        r.i += 1
        return False
    return _bail()


cdef inline Py_ssize_t _quoted_run(Reader* r) noexcept:
    """The length of the string at r.i (r.i after it) if it is printable ASCII without escapes; else -1."""
    cdef Py_ssize_t start = r.i + 1, k
    if r.i >= r.n or r.p[r.i] != 34:
        return -1
    k = zjc_plain_run(r.p + start, r.n - start)
    if start + k < r.n and r.p[start + k] == 34:
        r.i = start + k + 1
        return k
    return -1


cdef int _json_ref(Reader* r, Writer* w) except -1:
    """A reference's id at r.i (after its "@ref":) in a decoder's compact form, and the '}', written as _ref writes
    the reference: 1; else 0, nothing read or written."""
    cdef Py_ssize_t save_i = r.i, save_pos = w.pos, oid_at = r.i + 1, oid_size, dot
    cdef ClassHead pair
    if r.i < r.n and r.p[r.i] == 34:
        oid_size = _quoted_run(r)
        if oid_size >= 0 and _expect(r, b'}') and _write_oid(w, r.p + oid_at, oid_size):
            _raw(w, b"N\x86Q", 3)              # no class: NONE, TUPLE2, BINPERSID
            return 1
    elif _json_pair(r, &pair) and _expect(r, b'}') and _write_oid(w, r.p + pair.module_at, pair.module_size):
        dot = pair.name_size - 1  # the class "module.Name" as GLOBAL "module\nName\n" (_global_dotted)
        while dot >= 0 and r.p[pair.name_at + dot] != b'.':
            dot -= 1
        _global_at(w, w.pos, r.p + pair.name_at, dot if dot > 0 else 0, r.p + pair.name_at + dot + 1,
                   pair.name_size - dot - 1, b"\x86Q", 2)  # TUPLE2, BINPERSID
        return 1
    r.i = save_i
    w.pos = save_pos
    return 0


# The one-key markers the reader writes from their value, built as json.loads builds it (a tuple's and a set's
# items are written as they are read: a tuple holds references and instances).  _marker writes these kinds from the
# value alone.
cdef uint64_t _SHORT_MARKERS = (_bit(KEY_B) | _bit(KEY_DT) | _bit(KEY_DEC) | _bit(KEY_DATE) | _bit(KEY_UUID)
                                | _bit(KEY_T) | _bit(KEY_SET) | _bit(KEY_FSET) | _bit(KEY_TD) | _bit(KEY_NS)
                                | _bit(KEY_REF))


cdef int _short_marker_key(Reader* r) noexcept:
    """The Key of the one-key marker of _SHORT_MARKERS whose key (plain, unescaped) is at r.i, r.i after the
    ':' and whitespace; else -1, r.i unchanged."""
    cdef Py_ssize_t save = r.i, start = r.i + 1, size = _quoted_run(r)
    cdef int key = _key_of(<const char*>r.p + start, size) if size >= 0 else -1
    if key >= 0 and _bit(key) & _SHORT_MARKERS and _expect(r, b':'):
        return key
    r.i = save
    return -1


cdef int _json_one_key_marker(Reader* r, Writer* w, Py_ssize_t depth) except -1:
    """A one-key marker of _SHORT_MARKERS at r.i (a '{') written as _marker writes it: 1; else 0, nothing read
    or written.  (depth <= C_WALK_DEPTH: the dict's own depth check has passed.)"""
    cdef Py_ssize_t save_i = r.i, save_pos = w.pos
    cdef int key
    r.i += 1
    _ws(r)
    key = _short_marker_key(r)
    if key == KEY_REF and _json_ref(r, w):
        return 1
    if key == KEY_T:  # written as _tuple writes a list at depth (its items one below)
        if r.i < r.n and r.p[r.i] == b'[':
            _op(w, MARK)
            _close_tuple(w, save_pos, _json_items(r, w, depth + 1))
            if _expect(r, b'}'):
                return 1
    elif key == KEY_NS:
        if _json_ns(r, w):
            return 1
    elif key == KEY_SET or key == KEY_FSET:
        if r.i < r.n and r.p[r.i] == b'[':
            _raw(w, b"cbuiltins\nset\n" if key == KEY_SET else b"cbuiltins\nfrozenset\n", 14 if key == KEY_SET else 20)
            _json_list(r, w, depth)
            if _expect(r, b'}'):
                return _op2(w, TUPLE1, REDUCE) + 1
    elif key >= 0:
        value = _json_build(r, w, depth + 1)
        if _expect(r, b'}') and _wanted(_ONE_WANT[key], value, False):
            if key == KEY_DT:
                _m_dt(w, value, None, depth)  # _marker would ask the dict for an "@tz"
            else:
                _marker(w, None, key, <PyObject*>value, depth)
            return 1
    r.i = save_i
    w.pos = save_pos
    return 0


# A persistent object's non-persistent parts (a RichTextValue holding a Plone page's whole text, a DateTime)
# are {"@cls": [module, name], "@s": state}: written as _instance writes them, whichever key comes first
# (jsonb puts "@s" first: keys in order of length), so a big text in the state is copied, not made a str.

cdef int _json_instance(Reader* r, Writer* w, Py_ssize_t depth) except -1:
    """{"@cls": [module, name], "@s": state} at r.i (a '{'), both names printable ASCII, the class neither a
    BTree's nor copyreg's _reconstructor, the state no @args/@state wrapper: 1; else 0, nothing read or written
    (depth <= C_WALK_DEPTH: the dict's check passed).  The state is written first, the class's GLOBAL put in
    front of it; the class is kept as offsets into the text, not copied into this recursive frame."""
    cdef Py_ssize_t save_i = r.i, save_pos = w.pos
    cdef ClassHead head
    cdef bint class_first
    r.i += 1
    _ws(r)
    class_first = _at_key(r, b'"@cls"', 6)
    if ((not class_first or (_json_class_head(r, &head) and _expect(r, b','))) and _at_key(r, b'"@s"', 4)
            and _plain_state_ahead(r)):
        _json_value(r, w, depth + 1)
        if ((class_first or (_expect(r, b',') and _at_key(r, b'"@cls"', 6) and _json_class_head(r, &head)))
                and _expect(r, b'}')):
            _global_at(w, save_pos, r.p + head.module_at, head.module_size, r.p + head.name_at, head.name_size,
                       b")\x81", 2)  # EMPTY_TUPLE, NEWOBJ
            return _op(w, BUILD) + 1
    r.i = save_i
    w.pos = save_pos
    return 0


cdef bint _json_pair(Reader* r, ClassHead* head) noexcept:
    """["a", "b"] at r.i, two strings of printable ASCII without escapes, into *head: True, r.i after the ']';
    else False."""
    if r.i >= r.n or r.p[r.i] != b'[':
        return False
    r.i += 1
    _ws(r)
    head.module_at = r.i + 1
    head.module_size = _quoted_run(r)
    if head.module_size < 0 or not _expect(r, b','):
        return False
    head.name_at = r.i + 1
    head.name_size = _quoted_run(r)
    return head.name_size >= 0 and _expect(r, b']')


cdef bint _json_class_head(Reader* r, ClassHead* head) noexcept:
    """The class of an instance at r.i, ["module", "name"], into *head: True, r.i after it; False for any
    class _instance treats otherwise, or another spelling."""
    # A BTree's state has its own form; copyreg's _reconstructor is a REDUCE.
    return (_json_pair(r, head) and head.module_size > 0 and head.name_size > 0
            and not ((head.module_size >= 7 and same_bytes(<const char*>r.p + head.module_at, b"BTrees.", 7))
                     or (head.name_size == 14 and same_bytes(<const char*>r.p + head.name_at, b"_reconstructor", 14))))


cdef int _global_at(Writer* w, Py_ssize_t at, const unsigned char* module, Py_ssize_t module_size,
                    const unsigned char* name, Py_ssize_t name_size, const char* tail, Py_ssize_t tail_size) except -1:
    """GLOBAL "module\nname\n" of a class the policy allows, and tail, put at offset at (what follows moved up)."""
    cdef Py_ssize_t size = module_size + name_size + 3 + tail_size
    cdef unsigned char* o
    _allow_spans(w, ROLE_CLASS, module, module_size, name, name_size, _REF if <unsigned char>tail[0] == 0x86 else _INST)
    _reserve(w, size)
    memmove(w.buf + at + size, w.buf + at, <size_t>(w.pos - at))
    o = w.buf + at
    o[0] = GLOBAL
    memcpy(o + 1, module, <size_t>module_size)
    o[1 + module_size] = 10
    memcpy(o + 2 + module_size, name, <size_t>name_size)
    o[2 + module_size + name_size] = 10
    memcpy(o + 3 + module_size + name_size, tail, <size_t>tail_size)
    w.pos += size
    return 0


cdef inline bint _plain_state_ahead(Reader* r) noexcept:
    """False if the state at r.i is a dict whose first key is "@args", "@state" or escaped: an @args/@state
    wrapper maybe, which _instance reads apart."""
    cdef Py_ssize_t save = r.i
    cdef bint plain = True
    if r.i < r.n and r.p[r.i] == b'{':
        r.i += 1
        _ws(r)
        plain = not (_at_key(r, b'"@args"', 7) or _at_key(r, b'"@state"', 8)
                     or (r.i + 1 < r.n and r.p[r.i] == 34 and r.p[r.i + 1] == 92))
        r.i = save
    return plain


cdef int _json_ns(Reader* r, Writer* w) except -1:
    """The base64 string of an @ns marker at r.i decoded straight into a BINUNICODE (then '}'): 1, if it is canonical
    base64 of strict UTF-8 (what ns_text accepts); else 0 (the caller puts everything back)."""
    cdef Py_ssize_t start = r.i + 1, n = _quoted_run(r), size, head
    if n < 0 or not _expect(r, b'}'):
        return 0
    size = zjc_b64_size(r.p + start, n)
    if size < 0 or <uint64_t>size >= _U32_LIMIT:
        return 0
    _reserve(w, size + 5)
    head = w.pos
    if (zjc_b64_decode(r.p + start, n, w.buf + head + 5) != 0
            or zjc_utf8_prefix(w.buf + head + 5, size, 0) != size):
        return 0
    w.buf[head] = BINUNICODE
    _le32(w.buf + head + 1, <uint64_t>size)
    w.pos = head + 5 + size
    return 1


cdef int _close_tuple(Writer* w, Py_ssize_t start, Py_ssize_t count) except -1:
    """The tuple of the count items written after the MARK at start, as _tuple writes it (MARK only for more
    than three)."""
    if count == 0:
        w.pos = start
        return _op(w, EMPTY_TUPLE)
    if count > 3:
        return _op(w, TUPLE)
    memmove(w.buf + start, w.buf + start + 1, <size_t>(w.pos - start - 1))
    w.pos -= 1
    return _op(w, TUPLE1 if count == 1 else TUPLE2 if count == 2 else TUPLE3)


cdef int _write_oid(Writer* w, const unsigned char* hexdigits, Py_ssize_t n) except -1:
    """The oid whose hex digits are hexdigits[0:n] as a bytes opcode: 1; 0 (the caller puts w back) if they are not
    an even number of hex digits."""
    _bytes_header(w, n // 2)
    _reserve(w, n // 2)
    if zjc_unhex(hexdigits, n, w.buf + w.pos) < 0:
        return 0
    w.pos += n // 2
    return 1


cdef int _json_kv_state(Reader* r, Writer* w, int is_tree) except -1:
    """A BTree's or bucket's ``{"@kv": [[k, v]...]}`` (a bucket's with "@next" after it) at r.i, as _btree_state
    writes it at depth 0: 1; else 0, nothing read."""
    cdef Py_ssize_t save_i = r.i, start = w.pos, pairs = 0
    r.i += 1
    _ws(r)
    if not _at_key(r, b'"@kv"', 5) or r.i >= r.n or r.p[r.i] != b'[':
        r.i = save_i
        return 0
    _op(w, MARK)
    if not _empty(r, b']'):
        while True:
            if r.i >= r.n or r.p[r.i] != b'[' or _json_items(r, w, 1) != 2:
                return _bail()
            pairs += 1
            if not _more(r, b']'):
                break
    _close_tuple(w, start, 2 * pairs)  # the flattened pairs
    if _expect(r, b'}'):
        if is_tree:
            _op2(w, TUPLE1, TUPLE1)
        return _op(w, TUPLE1) + 1
    if not is_tree and _expect(r, b',') and _at_key(r, b'"@next"', 7):
        _json_value(r, w, 1)
        if _expect(r, b'}'):
            return _op(w, TUPLE2) + 1
    return _bail()


# Duplicate keys: json.loads keeps the last value at the first key's place, which the text cannot be written
# in the order it is read; such a dict makes the reader give up.  Keys are found again by a hash of their UTF-8.

cdef inline uint64_t _key_hash(const unsigned char* s, Py_ssize_t n, Py_ssize_t serial) noexcept:
    cdef uint64_t h = 14695981039346656037ULL ^ (<uint64_t>serial * 0x9E3779B97F4A7C15ULL)
    cdef Py_ssize_t k
    for k in range(n):
        h = (h ^ s[k]) * 1099511628211ULL
    return h


cdef int _new_key(Reader* r, Writer* w, Py_ssize_t serial) except -1:
    cdef uint64_t h = _key_hash(w.buf + r.str_pos, r.str_size, serial)
    cdef Py_ssize_t mask, k
    cdef KeySlot* slot
    if 2 * (r.keys_used + 1) > r.keys_cap:
        _grow_keys(r)
    mask = r.keys_cap - 1
    k = <Py_ssize_t>(h & <uint64_t>mask)
    while True:
        slot = &r.keys[k]
        if slot.serial == 0:
            slot.serial = serial
            slot.pos = r.str_pos
            slot.size = r.str_size
            slot.hash = h
            r.keys_used += 1
            return 0
        if (slot.hash == h and slot.serial == serial and slot.size == r.str_size
                and same_bytes(<const char*>w.buf + slot.pos, <const char*>w.buf + r.str_pos, r.str_size)):
            return _bail()
        k = (k + 1) & mask


cdef int _grow_keys(Reader* r) except -1:
    cdef Py_ssize_t cap = r.keys_cap * 2, k, j
    cdef KeySlot* keys = <KeySlot*>PyMem_Malloc(<size_t>cap * sizeof(KeySlot))
    if keys == NULL:
        raise MemoryError()
    for k in range(cap):
        keys[k].serial = 0
    for k in range(r.keys_cap):
        if r.keys[k].serial:
            j = <Py_ssize_t>(r.keys[k].hash & <uint64_t>(cap - 1))
            while keys[j].serial:
                j = (j + 1) & (cap - 1)
            keys[j] = r.keys[k]
    if r.keys_heap:
        PyMem_Free(r.keys)
    r.keys = keys
    r.keys_cap = cap
    r.keys_heap = True
    return 0


# Values of marker dicts, built as json.loads builds them.

cdef object _json_build(Reader* r, Writer* w, Py_ssize_t level):
    """The value at r.i as json.loads builds it; a string's UTF-8 is unescaped past w.pos, nothing written."""
    cdef unsigned char c
    cdef Py_ssize_t start = w.pos, size
    cdef bint is_float = False
    cdef long long small = 0
    cdef double real = 0.0
    if level > _C_WALK or r.i >= r.n:
        _bail()
    c = r.p[r.i]
    if c == 34:
        size = _quoted_run(r)
        if size >= 0:  # printable ASCII without escapes, most strings: made from the text itself
            return PyUnicode_FromStringAndSize(<const char*>r.p + r.i - 1 - size, size)
        _string_payload(r, w)
        size = w.pos - start
        w.pos = start
        return PyUnicode_DecodeUTF8(<const char*>w.buf + start, size, b"surrogatepass")
    if c == b'{':
        return _build_dict(r, w, level)
    if c == b'[':
        return _build_list(r, w, level)
    if c == b'-' or b'0' <= c <= b'9':
        v = _number_value(r, &is_float, &small, &real)
        if v is None:
            return PyFloat_FromDouble(real) if is_float else small
        return v
    if _literal(r, b"null", 4):
        return None
    if _literal(r, b"true", 4):
        return True
    if _literal(r, b"false", 5):
        return False
    _bail()


cdef list _build_list(Reader* r, Writer* w, Py_ssize_t level):
    cdef list out = []
    if _empty(r, b']'):
        return out
    while True:
        out.append(_json_build(r, w, level + 1))
        if not _more(r, b']'):
            return out


cdef dict _build_dict(Reader* r, Writer* w, Py_ssize_t level):
    cdef dict out = {}
    if _empty(r, b'}'):
        return out
    while True:
        if r.i >= r.n or r.p[r.i] != 34:
            _bail()
        key = _json_build(r, w, level + 1)
        if not _expect(r, b':'):
            _bail()
        out[key] = _json_build(r, w, level + 1)
        if not _more(r, b'}'):
            return out


cdef object _json_top(Writer* w, const unsigned char* p, Py_ssize_t n, bint check_utf8, int btree):
    """The one value of the text p[0:n] written at depth 0 (None returned).  A marker at the top has the record's
    own rules: it is built and returned, nothing written, but for a BTree's or bucket's @kv state (btree:
    _btree_class), which is written."""
    cdef KeySlot keys[_KEY_SLOTS]
    cdef Reader r
    memset(&r, 0, sizeof(r))  # at 0, no dict opened, no key kept, the table not on the heap
    r.p = p
    r.n = n
    r.check_utf8 = check_utf8
    r.keys = keys
    r.keys_cap = _KEY_SLOTS
    memset(keys, 0, sizeof(keys))  # serial 0: an empty slot
    try:
        _ws(&r)
        state = None
        if r.i < n and p[r.i] == b'{' and _marker_ahead(&r):
            if btree < 0 or not _json_kv_state(&r, w, btree):
                state = _json_build(&r, w, 0)
        else:
            _json_value(&r, w, 0)
        _ws(&r)
        if r.i != n:
            _bail()
        return state
    finally:
        if r.keys_heap:
            PyMem_Free(r.keys)


cdef const unsigned char* _utf8_of(object text, Py_ssize_t* n, unsigned char** scratch) except? NULL:
    """The UTF-8 the reader reads: a bytes object's own, an ASCII str's own characters, else written into
    *scratch (the caller frees it); NULL: lone surrogates."""
    # window: str_chars
    cdef int kind
    cdef Py_ssize_t length
    cdef const void* data
    if type(text) is bytes:
        n[0] = len(<bytes>text)
        return <const unsigned char*><const char*>(<bytes>text)
    zjc_unicode_ready(text)
    length = PyUnicode_GET_LENGTH(text)
    if PyUnicode_IS_ASCII(text):
        n[0] = length
        return <const unsigned char*>PyUnicode_DATA(text)
    kind = PyUnicode_KIND(text)
    # A driver hands each row over as a new str: its UTF-8 is made here, not by CPython's encoder (see _ucs_utf8.h).
    scratch[0] = <unsigned char*>PyMem_Malloc(<size_t>zjc_utf8_room(kind, length))
    if scratch[0] == NULL:
        raise MemoryError()
    data = PyUnicode_DATA(text)
    if length > _NOGIL_RUN:
        with nogil:
            n[0] = zjc_utf8_of_ucs(kind, data, length, scratch[0])
    else:
        n[0] = zjc_utf8_of_ucs(kind, data, length, scratch[0])
    return scratch[0] if n[0] >= 0 else NULL


cdef bytes _from_text(object text, bint check_utf8, str module, str name, object policy):
    """The record of the class module.name whose state is the JSON text (a str, or bytes: check_utf8), read in
    one pass.  None: lone surrogates in a str (the normative path says so)."""
    cdef Py_ssize_t n = 0
    cdef unsigned char* scratch = NULL
    cdef const unsigned char* p
    cdef unsigned char stack[_STACK_BUFFER]
    cdef Writer w
    _init(&w, stack, False, policy)
    try:
        p = _utf8_of(text, &n, &scratch)
        if p == NULL:
            return None
        _init_sized(&w, stack, True, policy, n + n // 8 + 256)
        _allow(&w, ROLE_CLASS, module, name, "the record's class")
        _op2(&w, PROTO, 3)
        _str(&w, module)
        _str(&w, name)
        _raw(&w, b"\x86N\x86.\x80\x03", 6)     # TUPLE2, no args, TUPLE2, STOP, PROTO 3
        state = _json_top(&w, p, n, check_utf8, _btree_class(module, name))
        if state is not None:
            record = {"@cls": [module, name], "@s": state}  # own line: check-c takes a call of a dict literal for GCC C
            return encode_zodb_record(record, policy=policy)
        _op(&w, STOP)
        return _result(&w)
    finally:
        _release(&w)
        PyMem_Free(scratch)


def _one_pass_record(str class_mod not None, str class_name not None, state_json, policy=None):
    """encode_zodb_record_from_pg_json's one pass alone, without the normative way it falls back to on any
    error or unusual input (None: not taken).  For the tests: a fallback hides a bug of the pass from them."""
    if type(state_json) is not bytes and type(state_json) is not str:
        return None
    return _from_text(state_json, type(state_json) is bytes, class_mod, class_name, _policy_of(policy))


def encode_zodb_record_from_pg_json(class_mod, class_name, state_json, *, policy=None):
    """A ZODB record from a PostgreSQL row: class module and name, and the state as JSON text.

    ``state_json`` is ``str`` or UTF-8 ``bytes``/``bytearray``/``memoryview`` (the ``jsonb`` column fetched as
    text).  The result is exactly what ``encode_zodb_record`` gives for ``{"@cls": [class_mod, class_name],
    "@s": json.loads(state_json)}``.  Raises TypeError for arguments of the wrong type, ValueError (naming the
    offset) for bad JSON or UTF-8, and as encode_zodb_record for markers and globals."""
    policy = _policy_of(policy)
    # A bytearray or memoryview (no driver hands one over) and the class-less record go the normative way.
    if (type(class_mod) is str and type(class_name) is str and not (_is_empty(class_mod) and _is_empty(class_name))
            and (type(state_json) is bytes or type(state_json) is str)):
        try:
            result = _from_text(state_json, type(state_json) is bytes, <str>class_mod, <str>class_name, policy)
        except Exception:
            result = None    # the normative way gives the same bytes, or says what is wrong
        if result is not None:
            return result
    return record_from_json(class_mod, class_name, state_json, encode_zodb_record, policy)

