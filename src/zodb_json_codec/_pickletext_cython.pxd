# cython: language_level=3
# What _decode_cython.pyx uses of the store path's direct lane (_pickletext_cython.pyx).

cdef object plain_state_text(bytes data, Py_ssize_t pos)
cdef object lane_text(bytes data, Py_ssize_t pos)
