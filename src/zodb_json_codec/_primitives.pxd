# cython: language_level=3
# The byte primitives in C, cimported by every Cython module that writes or reads them: base64 and hex
# both ways (_primitives.h); strict UTF-8 checked and JSON string runs copied (_utf8.h); a str's
# characters to UTF-8 and back (_ucs_utf8.h).

from cpython.object cimport PyObject
from libc.stdint cimport uint32_t

cdef extern from "_primitives.h":
    Py_ssize_t ZJC_B64_LENGTH(Py_ssize_t n) noexcept nogil
    void zjc_b64_encode(const unsigned char* p, Py_ssize_t n, unsigned char* out) noexcept nogil
    Py_ssize_t zjc_b64_size(const unsigned char* text, Py_ssize_t n) noexcept nogil
    int zjc_b64_decode(const unsigned char* text, Py_ssize_t n, unsigned char* out) noexcept nogil
    void zjc_hex_encode(const unsigned char* p, Py_ssize_t n, unsigned char* out) noexcept nogil
    int zjc_hexval(unsigned char c) noexcept nogil
    int zjc_unhex(const unsigned char* p, Py_ssize_t n, unsigned char* out) noexcept nogil

cdef extern from "_utf8.h":
    Py_ssize_t zjc_utf8_prefix(const unsigned char* p, Py_ssize_t n, int no_nul) noexcept nogil
    Py_ssize_t zjc_json_run(const unsigned char* p, Py_ssize_t n, unsigned char* o, int check_utf8,
                            int* bad) noexcept nogil

cdef extern from "_ucs_utf8.h":
    int zjc_ucs_utf8_init() noexcept
    Py_ssize_t zjc_utf8_room(int kind, Py_ssize_t n) noexcept nogil
    Py_ssize_t zjc_utf8_of_ucs(int kind, const void* data, Py_ssize_t n, unsigned char* out) noexcept nogil
    unsigned char* zjc_code_point(unsigned char* o, uint32_t c) noexcept nogil
    const unsigned char* zjc_ascii_chars(PyObject* s, Py_ssize_t* n) noexcept
    void zjc_copy_short(unsigned char* o, const unsigned char* p, Py_ssize_t n) noexcept nogil
    void zjc_units_of_utf8(int kind, const unsigned char* p, Py_ssize_t n, void* data, Py_ssize_t chars) noexcept nogil
