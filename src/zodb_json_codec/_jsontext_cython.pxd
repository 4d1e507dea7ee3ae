# cython: language_level=3
# What _decode_cython.pyx uses of the compiled JSON text writer, C to C.

cimport cython


@cython.final
@cython.no_gc
cdef class TextSpan:
    """size bytes of valid UTF-8 without U+0000, from start in data: a string the writer copies
    from the pickle itself."""
    cdef bytes data
    cdef Py_ssize_t start
    cdef Py_ssize_t size


cdef TextSpan text_span(bytes data, Py_ssize_t start, Py_ssize_t size)
cdef str span_text(TextSpan span)
cdef bint clean_utf8(const unsigned char* p, Py_ssize_t n)
cpdef object materialized(object value)
cpdef str pg_json_text(object state, int special)
