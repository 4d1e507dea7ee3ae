# cython: language_level=3
# Class-name tests both Cython twins make on every record (_decode_cython.pyx,
# _encode_cython.pyx), inline so that they cost a few compares: _common.btree_kind
# in C.  Cold rules on names stay in Python (_common, _known).

from cpython.unicode cimport PyUnicode_DATA, PyUnicode_GET_LENGTH


cdef extern from "Python.h":
    bint PyUnicode_IS_ASCII(object o)


cdef enum BTreeBits:
    BTREE_IS_TREE = 1
    BTREE_IS_MAP = 2
    BTREE_FAMILY = 4  # any BTrees class the state rules know


cdef inline bint same_bytes(const char* a, const char* b, Py_ssize_t n) noexcept:
    """memcmp(a, b, n) == 0 for a few bytes, without a call."""
    cdef Py_ssize_t i
    for i in range(n):
        if a[i] != b[i]:
            return False
    return True


cdef inline bint _ends_with(const char* p, Py_ssize_t n, const char* suffix, Py_ssize_t m) noexcept:
    return n >= m and same_bytes(p + n - m, suffix, m)


cdef inline int _btree_bits_of_suffix(str name):
    if name.endswith("BTree"):
        return BTREE_FAMILY | BTREE_IS_TREE | BTREE_IS_MAP
    if name.endswith("Bucket"):
        return BTREE_FAMILY | BTREE_IS_MAP
    if name.endswith("TreeSet"):
        return BTREE_FAMILY | BTREE_IS_TREE
    if name.endswith("Set"):
        return BTREE_FAMILY
    return 0


cdef inline int btree_bits(str module, str name) except -1:
    """_common.btree_kind of exact strs as BTreeBits: 0 for any other class."""
    cdef const char* p
    cdef Py_ssize_t n
    if not PyUnicode_IS_ASCII(module) or not PyUnicode_IS_ASCII(name):
        if not module.startswith("BTrees.") or module == "BTrees.Length":
            return 0
        return _btree_bits_of_suffix(name)
    p = <const char*>PyUnicode_DATA(module)
    n = PyUnicode_GET_LENGTH(module)
    if n < 7 or not same_bytes(p, b"BTrees.", 7) or (n == 13 and same_bytes(p + 7, b"Length", 6)):
        return 0
    p = <const char*>PyUnicode_DATA(name)
    n = PyUnicode_GET_LENGTH(name)
    if _ends_with(p, n, b"BTree", 5):
        return BTREE_FAMILY | BTREE_IS_TREE | BTREE_IS_MAP
    if _ends_with(p, n, b"Bucket", 6):
        return BTREE_FAMILY | BTREE_IS_MAP
    if _ends_with(p, n, b"TreeSet", 7):
        return BTREE_FAMILY | BTREE_IS_TREE
    if _ends_with(p, n, b"Set", 3):
        return BTREE_FAMILY
    return 0
