# cython: language_level=3, embedsignature=True
# cython: boundscheck=False, wraparound=False, cdivision=True
"""Cython twin of ``_jsontext_python`` (which is normative) for the PostgreSQL JSON text.

``pg_json_text`` writes the common case (the decoder's flags say nothing
needs special spelling) as UTF-8 into one buffer, exactly as the Python twin's
``json.dumps`` fast path and its ``\\b``/``\\f`` fix spell it; everything
else (and any value this writer does not expect) goes to the Python twin.
"""

from cpython.mem cimport PyMem_Free, PyMem_Malloc, PyMem_Realloc
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport uint64_t
from libc.math cimport fabs, signbit
from libc.string cimport memcpy

from . import _jsontext_python
from ._jsontext_python import pretty_json_text, sanitize_for_pg  # noqa: F401 (re-exported for _decode_cython)

cdef extern from "Python.h":
    long long PyLong_AsLongLongAndOverflow(object v, int* overflow) except? -1
    const char* PyUnicode_AsUTF8AndSize(object s, Py_ssize_t* size) except NULL
    char* PyOS_double_to_string(double val, char format_code, int precision, int flags, int* ptype) except NULL
    int Py_DTSF_ADD_DOT_0

# What a byte of UTF-8 text becomes inside a JSON string: 0 itself, 1 a
# two-character escape, 2 a \u00XX escape (json.dumps' choices, with \b and
# \f as the PostgreSQL writer spells them).
cdef unsigned char ESCAPE[256]
for _i in range(256):
    ESCAPE[_i] = 2 if _i < 0x20 else 0
for _c in (34, 92, 10, 13, 9):  # " \\ \n \r \t
    ESCAPE[_c] = 1
ESCAPE[0x08] = 2
ESCAPE[0x0C] = 2

cdef const char* HEX = b"0123456789abcdef"
cdef Py_ssize_t DEPTH_LIMIT = _jsontext_python.JSON_DEPTH_LIMIT  # deeper: the Python twin's writer decides


cdef enum:
    INLINE_CAPACITY = 4096  # most states' text fits: no heap buffer


cdef struct Buffer:
    char* data            # inline, until the text outgrows it
    Py_ssize_t size
    Py_ssize_t capacity
    char inline[INLINE_CAPACITY]


cdef int _reserve(Buffer* out, Py_ssize_t extra) except -1:
    cdef Py_ssize_t want = out.size + extra
    cdef Py_ssize_t capacity
    cdef char* grown
    if want <= out.capacity:
        return 0
    capacity = out.capacity * 2
    while capacity < want:
        capacity *= 2
    if out.data == out.inline:
        grown = <char*>PyMem_Malloc(capacity)
        if grown != NULL:
            memcpy(grown, out.inline, out.size)
    else:
        grown = <char*>PyMem_Realloc(out.data, capacity)
    if grown == NULL:
        raise MemoryError()
    out.data = grown
    out.capacity = capacity
    return 0


cdef inline int _write(Buffer* out, const char* text, Py_ssize_t n) except -1:
    if out.size + n > out.capacity:
        _reserve(out, n)
    memcpy(out.data + out.size, text, n)
    out.size += n
    return 0


cdef inline int _write_char(Buffer* out, char c) except -1:
    if out.size + 1 > out.capacity:
        _reserve(out, 1)
    out.data[out.size] = c
    out.size += 1
    return 0


cdef inline bint _needs_escape(uint64_t x):
    """Does any of these 8 bytes need escaping (< 0x20, '"' or backslash)?  Word-at-a-time tests."""
    cdef uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL
    cdef uint64_t quote = x ^ (ones * 34), backslash = x ^ (ones * 92)
    return ((((x - ones * 0x20) & ~x) | ((quote - ones) & ~quote) | ((backslash - ones) & ~backslash)) & highs) != 0


cdef int _write_string(Buffer* out, str s) except -1:
    cdef Py_ssize_t n, i = 0, run = 0
    cdef const unsigned char* p = <const unsigned char*>PyUnicode_AsUTF8AndSize(s, &n)
    cdef unsigned char c, kind
    cdef uint64_t word
    _reserve(out, n + 2)
    out.data[out.size] = 34  # "
    out.size += 1
    while i < n:
        if i + 8 <= n:
            memcpy(&word, p + i, 8)
            if not _needs_escape(word):
                i += 8
                continue
        c = p[i]
        kind = ESCAPE[c]
        if kind:
            _write(out, <const char*>p + run, i - run)
            run = i + 1
            if kind == 1:
                _reserve(out, 2)
                out.data[out.size] = 92  # backslash
                out.data[out.size + 1] = (34 if c == 34 else 92 if c == 92 else
                                          110 if c == 10 else 114 if c == 13 else 116)
                out.size += 2
            else:
                _write(out, b"\\u00", 4)
                _reserve(out, 2)
                out.data[out.size] = HEX[c >> 4]
                out.data[out.size + 1] = HEX[c & 15]
                out.size += 2
        i += 1
    _write(out, <const char*>p + run, n - run)
    _write_char(out, 34)
    return 0


cdef inline char* _digits_before(char* end, unsigned long long u) noexcept:
    """Write the decimal digits of u just before end; where they start."""
    while True:
        end -= 1
        end[0] = <char>(48 + u % 10)
        u //= 10
        if u == 0:
            return end


cdef int _write_int(Buffer* out, object v) except -1:
    """Decimal digits of an int, as int.__repr__ writes them."""
    cdef int overflow = 0
    cdef long long x = PyLong_AsLongLongAndOverflow(v, &overflow)
    cdef unsigned long long u
    cdef char digits[24]
    cdef int i
    cdef Py_ssize_t n
    if overflow:
        text = repr(v)
        return _write(out, PyUnicode_AsUTF8AndSize(text, &n), n)
    u = <unsigned long long>(-(x + 1)) + 1 if x < 0 else <unsigned long long>x
    i = <int>(_digits_before(digits + 24, u) - digits)
    if x < 0:
        i -= 1
        digits[i] = 45  # -
    return _write(out, digits + i, 24 - i)


cdef double POW10[23]
for _i in range(23):
    POW10[_i] = 10.0 ** _i  # exact: powers of ten up to 1e22 are doubles
cdef double TWO_50 = 2.0 ** 50


cdef int _write_float(Buffer* out, double x) except -1:
    """repr(x), as json.dumps writes a float; 1 when only the Python twin's writer may write it."""
    cdef double ax = fabs(x), t
    cdef long long m
    cdef int d, n
    cdef char* text
    if (1e-4 <= ax < 1e16) or (ax == 0.0 and not signbit(x)):
        # The fewest decimals d whose rounding m of x * 10**d reads back as x.
        # Below 2**50, that product is within 1/8 of an integer when such an m
        # exists, so no other m can qualify: it is repr's shortest digit string.
        for d in range(23):
            t = ax * POW10[d]
            if t >= TWO_50:
                break
            m = <long long>(t + 0.5)
            if <double>m / POW10[d] == ax:
                return _write_decimal(out, m, d, x < 0)
    text = PyOS_double_to_string(x, b'r', 0, Py_DTSF_ADD_DOT_0, NULL)
    try:
        n = 0
        while text[n]:
            if text[n] == 101 or text[n] == 110 or text[n] == 105:  # e, nan, inf: the Python twin's
                return 1
            n += 1
        _write(out, text, n)
    finally:
        PyMem_Free(text)
    return 0


cdef int _write_decimal(Buffer* out, long long m, int d, bint negative) except -1:
    """m / 10**d with d decimals (at least one), as repr spells it."""
    cdef char digits[64]
    cdef int end = 64, i, point
    i = <int>(_digits_before(digits + 64, <unsigned long long>m) - digits)
    while 64 - i <= d:  # 0.000ddd: the zeros between the point and the digits, and the 0 before it
        i -= 1
        digits[i] = 48
    if negative:
        _write_char(out, 45)
    if d == 0:
        _write(out, digits + i, end - i)
        return _write(out, b".0", 2)
    point = end - d
    _write(out, digits + i, point - i)
    _write_char(out, 46)
    return _write(out, digits + point, d)


cdef int _write_value(Buffer* out, object v, Py_ssize_t depth) except -1:
    """Write v; 1 when it holds something only the Python twin writes (nothing is kept then)."""
    cdef Py_ssize_t n
    cdef bint first
    cdef char* text
    if type(v) is str:
        return _write_string(out, <str>v)
    if type(v) is dict:
        if depth > DEPTH_LIMIT:
            return 1
        _write_char(out, 123)  # {
        first = True
        for k, x in (<dict>v).items():
            if type(k) is not str:
                return 1
            if not first:
                _write_char(out, 44)  # ,
            first = False
            _write_string(out, <str>k)
            _write_char(out, 58)  # :
            if _write_value(out, x, depth + 1):
                return 1
        _write_char(out, 125)  # }
        return 0
    if type(v) is list:
        if depth > DEPTH_LIMIT:
            return 1
        _write_char(out, 91)  # [
        first = True
        for x in <list>v:
            if not first:
                _write_char(out, 44)
            first = False
            if _write_value(out, x, depth + 1):
                return 1
        _write_char(out, 93)  # ]
        return 0
    if v is None:
        return _write(out, b"null", 4)
    if v is True:
        return _write(out, b"true", 4)
    if v is False:
        return _write(out, b"false", 5)
    if type(v) is int:
        return _write_int(out, v)
    if type(v) is float:
        return _write_float(out, <double>v)
    return 1


cpdef str pg_json_text(object state, int special):
    """The compact PostgreSQL JSON text of a decoded state (see ``_jsontext_python.pg_json_text``)."""
    cdef Buffer out
    if special:
        return _jsontext_python.pg_json_text(state, special)
    out.data = out.inline
    out.size = 0
    out.capacity = INLINE_CAPACITY
    try:
        if _write_value(&out, state, 0):
            return _jsontext_python.pg_json_text(state, special)
        return PyUnicode_DecodeUTF8(out.data, out.size, NULL)
    finally:
        if out.data != out.inline:
            PyMem_Free(out.data)
