# cython: language_level=3
# What _decode_cython.pyx and _pickletext_cython.pyx use of the compiled JSON text writer, C to C.

from libc.string cimport memcpy


cpdef str pg_json_text(object state, int special)


# The output buffer, shared with _pickletext_cython (which writes JSON text straight from a pickle).
cdef enum:
    INLINE_CAPACITY = 4096  # most states' text fits: no heap buffer


cdef struct Buffer:
    char* data            # inline, until the text outgrows it
    Py_ssize_t size
    Py_ssize_t capacity
    char inline[INLINE_CAPACITY]


cdef int _grow(Buffer* out, Py_ssize_t extra) noexcept nogil
cdef int _write_utf8(Buffer* out, const unsigned char* p, Py_ssize_t n) except -1
cdef int _write_float(Buffer* out, double x) noexcept nogil
cdef int _escape_utf8(Buffer* out, const unsigned char* p, Py_ssize_t n) noexcept nogil
cdef str _text(Buffer* out)


# Without the GIL: -1 when memory runs out (nothing raised).
cdef inline int _reserve(Buffer* out, Py_ssize_t extra) noexcept nogil:
    """Room for extra more bytes: the usual case (there is room) inline, _grow otherwise."""
    return 0 if extra <= out.capacity - out.size else _grow(out, extra)


cdef inline int _put(Buffer* out, const char* text, Py_ssize_t n) noexcept nogil:
    if _reserve(out, n) < 0:
        return -1
    memcpy(out.data + out.size, text, n)
    out.size += n
    return 0


cdef inline int _put_char(Buffer* out, char c) noexcept nogil:
    if out.size == out.capacity and _grow(out, 1) < 0:
        return -1
    out.data[out.size] = c
    out.size += 1
    return 0


# With the GIL: MemoryError when memory runs out.
cdef inline int _write(Buffer* out, const char* text, Py_ssize_t n) except -1:
    if _put(out, text, n) < 0:
        raise MemoryError()
    return 0


cdef inline int _write_char(Buffer* out, char c) except -1:
    if _put_char(out, c) < 0:
        raise MemoryError()
    return 0


cdef inline char* _digits_before(char* end, unsigned long long u) noexcept nogil:
    """Write the decimal digits of u just before end; where they start."""
    while True:
        end -= 1
        end[0] = <char>(48 + u % 10)
        u //= 10
        if u == 0:
            return end
