# cython: language_level=3
# What _decode_cython.pyx uses of the store path's direct lane (_pickletext_cython.pyx).


cdef enum ClassForm:      # the usual forms of a record's class pickle, and what each leaves in the memo
    CLASS_GLOBAL = 1      # GLOBAL "module\nname\n" (ZODB's): memo 0 is the class
    CLASS_NAMES = 2       # (module, name) as two BINUNICODE: memo 0 and 1 the names, memo 2 their tuple
    CLASS_NAMES_NONE = 3  # ((module, name), None), as both codecs' encode_zodb_record write it: no memo


cdef struct ClassPickle:  # a record's class pickle of a usual form, as _decode_cython._usual_class_names read it
    ClassForm form
    Py_ssize_t stop       # where the state pickle starts
    Py_ssize_t module_start
    Py_ssize_t module_size
    Py_ssize_t name_start
    Py_ssize_t name_size


cdef object lane_text(bytes data, ClassPickle* klass, int btree, list refs, Py_ssize_t budget)
