# cython: language_level=3
# Class-name tests both Cython twins make on every record (_decode_cython.pyx,
# _encode_cython.pyx), inline so that they cost a few compares: _common.btree_kind
# in C.  Cold rules on names stay in Python (_common, _known).

from libc.string cimport memcmp

from cpython.unicode cimport PyUnicode_DATA, PyUnicode_GET_LENGTH, PyUnicode_KIND, PyUnicode_READ


cdef extern from "Python.h":
    bint PyUnicode_IS_ASCII(object o)


cdef enum BTreeBits:
    BTREE_IS_TREE = 1
    BTREE_IS_MAP = 2
    BTREE_FAMILY = 4  # any BTrees class the state rules know


cdef inline bint same_bytes(const char* a, const char* b, Py_ssize_t n) noexcept:
    """memcmp(a, b, n) == 0 for a few bytes whose number is known only at run time, without a call."""
    cdef Py_ssize_t i
    for i in range(n):
        if a[i] != b[i]:
            return False
    return True


cdef inline bint ascii_at(str s, Py_ssize_t at, const char* text, Py_ssize_t m) noexcept:
    """s[at:at + m] is the m ASCII characters at text, for a str of any character width."""
    cdef int kind
    cdef void* data
    cdef Py_ssize_t i
    if at < 0 or at + m > PyUnicode_GET_LENGTH(s):
        return False
    if PyUnicode_IS_ASCII(s):  # nearly every name and key: the bytes themselves
        # m is a constant where this is inlined: compilers compare a word at a time, without a call (a byte
        # loop here was a tenth of a one-number record's encode).
        return memcmp(<const char*>PyUnicode_DATA(s) + at, text, m) == 0
    kind = PyUnicode_KIND(s)
    data = PyUnicode_DATA(s)
    for i in range(m):
        if PyUnicode_READ(kind, data, at + i) != <Py_UCS4>text[i]:
            return False
    return True


cdef inline int btree_bits(str module, str name) noexcept:
    """_common.btree_kind of exact strs as BTreeBits: 0 for any other class."""
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(module)
    if not ascii_at(module, 0, b"BTrees.", 7) or (n == 13 and ascii_at(module, 7, b"Length", 6)):
        return 0
    n = PyUnicode_GET_LENGTH(name)
    if ascii_at(name, n - 5, b"BTree", 5):
        return BTREE_FAMILY | BTREE_IS_TREE | BTREE_IS_MAP
    if ascii_at(name, n - 6, b"Bucket", 6):
        return BTREE_FAMILY | BTREE_IS_MAP
    if ascii_at(name, n - 7, b"TreeSet", 7):
        return BTREE_FAMILY | BTREE_IS_TREE
    if ascii_at(name, n - 3, b"Set", 3):
        return BTREE_FAMILY
    return 0
