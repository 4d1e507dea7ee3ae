# cython: language_level=3
# What _decode_cython.pyx calls of the compiled JSON text writer, C to C.

cpdef str pg_json_text(object state, int special)
