# cython: language_level=3, embedsignature=True
# cython: boundscheck=False, wraparound=False, cdivision=True
"""Cython twin of ``_jsontext_python`` (which is normative) for the PostgreSQL JSON text.

``pg_json_text`` writes the common case (the decoder's flags say nothing
needs special spelling) as UTF-8 into one buffer, exactly as the Python twin's
``json.dumps`` fast path and its ``\\b``/``\\f`` fix spell it; everything
else (and any value this writer does not expect) goes to the Python twin.

Big strings are escaped, and big texts decoded, with the GIL released,
into a buffer of the C allocator (which needs no GIL).
"""

cimport cython
from cpython.pyport cimport PY_SSIZE_T_MAX
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.stdint cimport uint32_t, uint64_t
from libc.stdlib cimport free, malloc, realloc
from libc.math cimport fabs, isinf, isnan, signbit
from libc.string cimport memcpy

from ._primitives cimport zjc_json_run, zjc_units_of_utf8

from . import _jsontext_python
from ._common import C_WALK_DEPTH, float_text
from ._jsontext_python import pretty_json_text, sanitize_for_pg  # noqa: F401 (re-exported for _decode_cython)

cdef extern from "Python.h":
    long long PyLong_AsLongLongAndOverflow(object v, int* overflow) except? -1
    const char* PyUnicode_AsUTF8AndSize(object s, Py_ssize_t* size) except NULL
    object PyUnicode_New(Py_ssize_t size, Py_UCS4 maxchar)
    void* PyUnicode_DATA(object o)

# What a byte of UTF-8 text becomes inside a JSON string: 0 itself, 1 a two-character escape, 2 a \u00XX
# escape (json.dumps' choices, with \b and \f as the PostgreSQL writer spells them).
cdef unsigned char ESCAPE[256]
for _i in range(256):
    ESCAPE[_i] = 2 if _i < 0x20 else 0
for _c in (34, 92, 10, 13, 9):  # " \\ \n \r \t
    ESCAPE[_c] = 1
ESCAPE[0x08] = 2
ESCAPE[0x0C] = 2

cdef const char* HEX = b"0123456789abcdef"
cdef Py_ssize_t DEPTH_LIMIT = C_WALK_DEPTH  # deeper: the Python twin's writer (no deep C recursion here)
cdef int F_NUL = _jsontext_python.F_NUL  # the decoder flag of U+0000 in some text
cdef int F_EXP_FLOAT = _jsontext_python.F_EXP_FLOAT  # of a float that repr writes with an exponent


cdef int _grow(Buffer* out, Py_ssize_t extra) noexcept nogil:
    """Room for extra more bytes; -1 when memory runs out (the C allocator: no GIL needed), or when the size
    would pass what a Py_ssize_t holds (a 32-bit build's 2 GiB)."""
    cdef Py_ssize_t want, capacity
    cdef char* grown
    if extra > PY_SSIZE_T_MAX - out.size:
        return -1
    want = out.size + extra
    if want <= out.capacity:
        return 0
    capacity = out.capacity
    while capacity < want:
        if capacity > PY_SSIZE_T_MAX // 2:
            return -1
        capacity *= 2
    if out.data == out.inline:
        grown = <char*>malloc(capacity)
        if grown != NULL:
            memcpy(grown, out.inline, out.size)
    else:
        grown = <char*>realloc(out.data, capacity)
    if grown == NULL:
        return -1
    out.data = grown
    out.capacity = capacity
    return 0


cdef inline bint _needs_escape(uint64_t x) noexcept nogil:
    """Does any of these 8 bytes need escaping (< 0x20, '"' or backslash)?  Word-at-a-time tests."""
    cdef uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL
    cdef uint64_t quote = x ^ (ones * 34), backslash = x ^ (ones * 92)
    return ((((x - ones * 0x20) & ~x) | ((quote - ones) & ~quote) | ((backslash - ones) & ~backslash)) & highs) != 0


cdef inline bint _copied_short(char* to, const unsigned char* p, Py_ssize_t n) noexcept nogil:
    """Copy a string of at most 16 bytes that needs no escape (most keys and many values) with
    fixed-size moves, which compile to a few instructions where a memcpy call of n bytes does not;
    False, having copied nothing, when it needs an escape."""
    cdef uint64_t head, tail
    cdef uint32_t head4, tail4
    cdef Py_ssize_t i
    if n >= 8:  # two words that overlap when n < 16
        memcpy(&head, p, 8)
        memcpy(&tail, p + n - 8, 8)
        if _needs_escape(head) or _needs_escape(tail):
            return False
        memcpy(to, &head, 8)
        memcpy(to + n - 8, &tail, 8)
    elif n >= 4:
        memcpy(&head4, p, 4)
        memcpy(&tail4, p + n - 4, 4)
        if _needs_escape(head4 | (<uint64_t>tail4 << 32)):
            return False
        memcpy(to, &head4, 4)
        memcpy(to + n - 4, &tail4, 4)
    else:
        for i in range(n):
            if ESCAPE[p[i]]:
                return False
        for i in range(n):
            to[i] = <char>p[i]
    return True


cdef int _escape_utf8(Buffer* out, const unsigned char* p, Py_ssize_t n) noexcept nogil:
    """Valid UTF-8 as a JSON string, quotes included, the runs between escapes copied whole (zjc_json_run:
    32 bytes a step with AVX2); -1: out of memory."""
    cdef Py_ssize_t i = 0, k
    cdef int unused = 0
    if _reserve(out, n + 2) < 0:
        return -1
    out.data[out.size] = 34  # "
    out.size += 1
    if n <= 16 and _copied_short(out.data + out.size, p, n):
        out.size += n
        out.data[out.size] = 34
        out.size += 1
        return 0
    while True:
        # Room for the rest as it is, one escape (at most 6 bytes for 1) and the closing quote.
        if _reserve(out, n - i + 7) < 0:
            return -1
        k = zjc_json_run(p + i, n - i, <unsigned char*>out.data + out.size, 0, &unused)
        out.size += k
        i += k
        if i == n:
            break
        _escape_char(out, p[i])
        i += 1
    out.data[out.size] = 34
    out.size += 1
    return 0


cdef inline void _escape_char(Buffer* out, unsigned char c) noexcept nogil:
    """The escape of c, one of the characters ESCAPE marks (room for 6 bytes: \\u00XX)."""
    out.data[out.size] = 92  # backslash
    if ESCAPE[c] == 1:
        out.data[out.size + 1] = (34 if c == 34 else 92 if c == 92 else 110 if c == 10 else 114 if c == 13 else 116)
        out.size += 2
    else:
        memcpy(out.data + out.size + 1, b"u00", 3)
        out.data[out.size + 4] = HEX[c >> 4]
        out.data[out.size + 5] = HEX[c & 15]
        out.size += 6


cdef enum:
    NOGIL_BYTES = 4096  # from this size on, work on raw bytes is done with the GIL released


cdef int _write_utf8(Buffer* out, const unsigned char* p, Py_ssize_t n) except -1:
    """A JSON string of n bytes of valid UTF-8; big ones without the GIL (p must stay alive: the
    caller holds what owns it)."""
    cdef int failed
    if n < NOGIL_BYTES:
        failed = _escape_utf8(out, p, n)
    else:
        with nogil:
            failed = _escape_utf8(out, p, n)
    if failed:
        raise MemoryError()
    return 0


cdef inline int _write_string(Buffer* out, str s) except -1:
    # window: a `str`'s cached UTF-8 | the caller holds the str; escaping runs no code
    cdef Py_ssize_t n
    cdef const unsigned char* p = <const unsigned char*>PyUnicode_AsUTF8AndSize(s, &n)
    return _write_utf8(out, p, n)


cdef int _write_int(Buffer* out, object v) except -1:
    """Decimal digits of an int, as int.__repr__ writes them."""
    # window: a big int's `repr` text's UTF-8 | the text is a local made here
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


cdef int _write_float(Buffer* out, double x) noexcept nogil:
    """A finite float as docs/format.md's "Float spelling" says for the PostgreSQL text (repr's shortest
    digits; integral ones positional with .0, exponents without a plus); 1 for NaN and infinities, -1 when
    memory runs out.  Without the GIL but for the rare float the loop below cannot spell."""
    cdef double ax = fabs(x), t
    cdef long long m
    cdef int d
    if (1e-4 <= ax < 1e16) or (ax == 0.0 and not signbit(x)):
        # The fewest decimals d whose rounding m of x * 10**d reads back as x.  Below 2**50, that product is
        # within 1/8 of an integer when such an m exists, so no other m can qualify: repr's shortest digits.
        for d in range(23):
            t = ax * POW10[d]
            if t >= TWO_50:
                break
            m = <long long>(t + 0.5)
            if <double>m / POW10[d] == ax:
                return _write_decimal(out, m, d, x < 0)
    with gil:
        return _float_text(out, x)


cdef int _float_text(Buffer* out, double x) noexcept:
    """The rare float _write_float's loop cannot spell, as the Python twin spells it (_common.float_text);
    1 for NaN and infinities, -1 when memory runs out."""
    # window: a float's `repr` text's UTF-8 | the text is a local made here
    cdef Py_ssize_t n
    cdef const char* p
    if isnan(x) or isinf(x):
        return 1
    try:
        text = float_text(x, False, True)  # held while its UTF-8 is copied
        p = PyUnicode_AsUTF8AndSize(text, &n)
    except MemoryError:
        return -1
    return _put(out, p, n)


cdef int _write_decimal(Buffer* out, long long m, int d, bint negative) noexcept nogil:
    """m / 10**d with d decimals (at least one), as repr spells it; -1 when memory runs out."""
    cdef char digits[64]
    cdef int end = 64, i, point
    i = <int>(_digits_before(digits + 64, <unsigned long long>m) - digits)
    while 64 - i <= d:  # 0.000ddd: the zeros between the point and the digits, and the 0 before it
        i -= 1
        digits[i] = 48
    if _reserve(out, 72) < 0:
        return -1
    if negative:
        _put_char(out, 45)
    if d == 0:
        _put(out, digits + i, end - i)
        return _put(out, b".0", 2)
    point = end - d
    _put(out, digits + i, point - i)
    _put_char(out, 46)
    return _put(out, digits + point, d)


# ---------------------------------------------------------------------------
# Values
# ---------------------------------------------------------------------------

cdef int _write_value(Buffer* out, object v, Py_ssize_t depth) except -1:
    """Write v; 1 when it holds something only the Python twin writes (nothing is kept then)."""
    cdef Py_ssize_t n
    cdef int status
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
        status = _write_float(out, <double>v)
        if status < 0:
            raise MemoryError()
        return status
    return 1


cdef Py_UCS4 _max_char(const unsigned char* p, Py_ssize_t n, Py_ssize_t* length) noexcept nogil:
    """The code point count of valid UTF-8 (in length), and the largest code point's class:
    127, 255, 0xFFFF or 0x10FFFF, as PyUnicode_New wants it.  Branch-free, so that it vectorizes:
    the largest byte is a lead byte (a continuation byte is never above its lead)."""
    cdef Py_ssize_t i, count = 0
    cdef unsigned char c, top = 0
    for i in range(n):
        c = p[i]
        count += (c & 0xC0) != 0x80
        top = c if c > top else top
    length[0] = count
    return 127 if top < 0x80 else 255 if top < 0xC4 else 0xFFFF if top < 0xF0 else 0x10FFFF


cdef enum:
    # Below, CPython's own decoder makes the str, with the GIL held (two threads on plone_large_text
    # stored 1.42x the records of one with 16 KB here, 1.83x with 4 KB).
    NOGIL_TEXT_BYTES = 4096


cdef str _text(Buffer* out):
    """The buffer (valid UTF-8: written from strs and the lane's checked texts) as a str; a big one decoded
    with the GIL released."""
    # window: the writer's UTF-8 buffer | the writer's own C memory
    cdef const unsigned char* p = <const unsigned char*>out.data
    cdef Py_ssize_t n = out.size, length
    cdef Py_UCS4 maxchar
    cdef str text
    cdef void* units
    if n < NOGIL_TEXT_BYTES:
        return PyUnicode_DecodeUTF8(out.data, n, NULL)
    with nogil:
        maxchar = _max_char(p, n, &length)
    text = PyUnicode_New(length, maxchar)
    units = PyUnicode_DATA(text)
    with nogil:
        if maxchar == 127:
            memcpy(units, p, n)
        else:
            zjc_units_of_utf8(1 if maxchar == 255 else 2 if maxchar == 0xFFFF else 4, p, n, units, length)
    return text


cpdef str pg_json_text(object state, int special):
    """The compact PostgreSQL JSON text of a decoded state (see ``_jsontext_python.pg_json_text``).

    A state whose only special text is U+0000 is rewritten by the Python twin's
    ``sanitize_for_pg`` (its strings and keys become ``@ns`` markers) and
    then written here: what is left is text of the common case.
    """
    cdef Buffer out
    if special & ~(F_NUL | F_EXP_FLOAT):  # @f and @su: the Python twin
        return _jsontext_python.pg_json_text(state, special)
    out.data = out.inline
    out.size = 0
    out.capacity = INLINE_CAPACITY
    try:
        written = sanitize_for_pg(state, surrogates=False) if special & F_NUL else state
        if _write_value(&out, written, 0):
            return _jsontext_python.pg_json_text(state, special)
        return _text(&out)
    finally:
        if out.data != out.inline:
            free(out.data)
