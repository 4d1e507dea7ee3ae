/* A dict's items in order, as PyDict_Next gives them, for the Cython encoder's walk.

   PyDict_Next is a call into CPython that re-checks the argument's type and the table's form on every
   item: about 50 instructions an item, a third of encode_zodb_record's time on a wide dict of short
   strings (benchmarks/instructions.py SET encode counts it).  zjc_dict_next reads
   the same entries where CPython keeps them, for the CPython versions whose layout is known here (3.11 to
   3.14 with the GIL: one layout, that of Include/internal/pycore_dict.h), and calls PyDict_Next everywhere
   else: older and newer CPythons, free-threaded builds, split tables (an instance's __dict__).

   It is the same walk as PyDict_Next's (CPython 3.11-3.14, Objects/dictobject.c, _PyDict_Next): the table is
   read afresh at every step, so code that changes the dict between two steps (a value's own __str__, say)
   sees what PyDict_Next would have given.  When the encoder is imported, it compares the walks
   (zjc_dict_walks_agree: zjc_dict_run's too) on dicts of every form the fast walk reads (text keys and other
   keys, with deleted entries, with 1- and 2-byte indices) and keeps PyDict_Next if they differ in anything:
   a CPython whose layout has changed without its version saying so gets the slow walk, not a wrong one. */

#ifndef ZJC_DICTNEXT_H
#define ZJC_DICTNEXT_H

#include <stddef.h>
#include <stdint.h>
#include "Python.h"

#if !defined(PYPY_VERSION) && !defined(Py_GIL_DISABLED) && !defined(Py_LIMITED_API) \
    && PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030F0000
#define ZJC_DICT_LAYOUT 1

/* struct _dictkeysobject of CPython 3.11-3.14 (without Py_GIL_DISABLED's dk_mutex). */
typedef struct {
    Py_ssize_t dk_refcnt;
    uint8_t dk_log2_size;
    uint8_t dk_log2_index_bytes;
    uint8_t dk_kind;            /* 0: DICT_KEYS_GENERAL, else text keys only (UNICODE, SPLIT) */
    uint32_t dk_version;
    Py_ssize_t dk_usable;
    Py_ssize_t dk_nentries;     /* entries used so far, deleted ones included (their value is NULL) */
    char dk_indices[];          /* 1 << dk_log2_index_bytes bytes, then the entries */
} zjc_dict_keys;

typedef struct { Py_hash_t me_hash; PyObject *me_key; PyObject *me_value; } zjc_general_entry;
typedef struct { PyObject *me_key; PyObject *me_value; } zjc_text_entry;

#endif

/* 1 once the encoder found the layout above to be this CPython's (zjc_dict_walks_agree). */
static int zjc_dict_direct = 0;

/* A dict's entries from some position on, read one after another without going back to the dict for each:
   _plain_dict's walk over items whose writing runs no code.  Where code may have run, the run is opened again
   from the position reached, so the table is read afresh.  Where the layout is not known, or the table is
   split, the run calls PyDict_Next. */
typedef struct {
    PyObject *d;
    const char *at;     /* the next entry's me_key, or NULL: PyDict_Next */
    const char *end;    /* past the last entry's me_key */
    size_t step;        /* an entry's size */
} zjc_dict_run;

static inline void zjc_dict_run_open(PyObject *d, Py_ssize_t pos, zjc_dict_run *r) {
    r->d = d;
    r->at = r->end = NULL;
    r->step = 0;
#ifdef ZJC_DICT_LAYOUT
    if (zjc_dict_direct && ((PyDictObject *)d)->ma_values == NULL && pos >= 0) {
        /* A combined table: its entries start after its 1 << dk_log2_index_bytes bytes of indices. */
        zjc_dict_keys *keys = (zjc_dict_keys *)((PyDictObject *)d)->ma_keys;
        const char *entries = keys->dk_indices + ((size_t)1 << keys->dk_log2_index_bytes);
        size_t key_at = keys->dk_kind != 0 ? offsetof(zjc_text_entry, me_key) : offsetof(zjc_general_entry, me_key);
        r->step = keys->dk_kind != 0 ? sizeof(zjc_text_entry) : sizeof(zjc_general_entry);
        r->at = entries + key_at + (size_t)pos * r->step;
        r->end = entries + key_at + (size_t)(keys->dk_nentries > pos ? keys->dk_nentries : pos) * r->step;
    }
#else
    (void)pos;  /* PyDict_Next keeps the position */
#endif
}

/* The run's next item (borrowed references) and *pos past it, as PyDict_Next: 1, or 0 at the dict's end. */
static inline int zjc_dict_run_next(zjc_dict_run *r, Py_ssize_t *pos, PyObject **key, PyObject **value) {
    if (r->at == NULL)
        return PyDict_Next(r->d, pos, key, value);
    while (r->at < r->end) {
        PyObject *const *entry = (PyObject *const *)r->at;  /* me_key, then me_value */
        r->at += r->step;
        *pos += 1;
        if (entry[1] != NULL) {
            *key = entry[0];
            *value = entry[1];
            return 1;
        }
    }
    return 0;
}

/* PyDict_Next(d, pos, key, value) for a dict or a subclass of it (borrowed references): a run of one step,
   the table read afresh at each. */
static inline int zjc_dict_next(PyObject *d, Py_ssize_t *pos, PyObject **key, PyObject **value) {
    zjc_dict_run run;
    zjc_dict_run_open(d, *pos, &run);
    return zjc_dict_run_next(&run, pos, key, value);
}

/* The two items of d (borrowed references), in order, when the walk reads CPython's entries and d's table
   holds exactly two, none deleted (a record as json.loads or a dict display makes it): 1; else 0, and the
   caller walks d.  One look instead of a walk's three steps: about a fifth of a one-number record's encode. */
static inline int zjc_dict_pair(PyObject *d, PyObject **k0, PyObject **v0, PyObject **k1, PyObject **v1) {
    zjc_dict_run run;
    PyObject *const *entry;
    if (PyDict_GET_SIZE(d) != 2)
        return 0;
    zjc_dict_run_open(d, 0, &run);
    if (run.at == NULL || run.end - run.at != 2 * (Py_ssize_t)run.step)
        return 0;  /* PyDict_Next's walk, or a deleted entry among them */
    entry = (PyObject *const *)run.at;
    *k0 = entry[0];
    *v0 = entry[1];
    entry = (PyObject *const *)(run.at + run.step);
    *k1 = entry[0];
    *v1 = entry[1];
    return 1;
}

/* Do zjc_dict_next, a run opened once and PyDict_Next give d's items alike, the first two reading CPython's
   entries?  The encoder asks it at import, of dicts of every form the fast walk reads, with zjc_dict_direct set. */
static int zjc_dict_walks_agree(PyObject *d) {
    Py_ssize_t a = 0, b = 0, c = 0;
    PyObject *ka, *va, *kb, *vb, *kc, *vc;
    int more_a, more_b, more_c;
    zjc_dict_run run;
    zjc_dict_run_open(d, 0, &run);
    if (run.at == NULL)
        return 0;  /* the layout is not known here: PyDict_Next it is */
    do {
        more_a = zjc_dict_next(d, &a, &ka, &va);
        more_b = PyDict_Next(d, &b, &kb, &vb);
        more_c = zjc_dict_run_next(&run, &c, &kc, &vc);
        if (more_a != more_b || more_c != more_b
                || (more_a && (ka != kb || va != vb || a != b || kc != kb || vc != vb || c != b)))
            return 0;
    } while (more_a);
    return 1;
}

#endif
