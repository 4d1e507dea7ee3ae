# cython: language_level=3
# What _decode_cython.pyx uses of the store path's direct lane (_pickletext_cython.pyx).


cdef struct ClassPickle:  # a record's class pickle of a usual form, as _decode_cython._usual_class_names read it
    bint is_global        # GLOBAL "module\nname\n" (memo 0: the class), else two BINUNICODE names (memo 0, 1)
    Py_ssize_t stop       # where the state pickle starts
    Py_ssize_t module_start
    Py_ssize_t module_size
    Py_ssize_t name_start
    Py_ssize_t name_size


cdef object plain_state_text(bytes data, ClassPickle* klass, int btree, list refs)
cdef object lane_text(bytes data, ClassPickle* klass, int btree, list refs)
