/* Strs and strict UTF-8 both ways, for the Cython twins.  zjc_units_of_utf8 makes a new str's characters
   of valid UTF-8 (the JSON writer's big texts, which it makes without the GIL).  zjc_utf8_of_ucs makes the
   strict UTF-8 of a str's characters, for the encoder: its BINUNICODE payloads and the load path's str
   input.  CPython's own encoder (PyUnicode_AsUTF8AndSize) takes a character a step, allocates its copy and
   keeps it in the str for the str's life; this writes into the caller's buffer and keeps nothing.

   zjc_utf8_of_ucs takes a str's characters as CPython stores them (kind 1, 2 or 4 bytes each).  On x86-64
   CPUs with SSSE3, 2- and 4-byte strs go 8 characters a step (zjc_bmp_block8_ssse3: any mix of one-, two-
   and three-byte characters, as simdutf's UTF-16 to UTF-8 transcoder does it; a block of a 4-byte str with
   a character past U+FFFF, a character at a time).  In 1-byte strs (mostly ASCII), ASCII goes a block of 16
   characters a step (SSE2) and the others one by one; elsewhere, every character one by one. */

#ifndef ZJC_UCS_UTF8_H
#define ZJC_UCS_UTF8_H

#include "_primitives.h"

/* The characters of s if it is a compact ASCII str, which are its UTF-8 (nearly every key and many values
   of a record), with their number in *n; else NULL.  One test of the str's state, where PyUnicode_DATA
   tests for the other layouts too. */
ZJC_ALWAYS_INLINE const unsigned char *zjc_ascii_chars(PyObject *s, Py_ssize_t *n) {
    if (!PyUnicode_IS_COMPACT_ASCII(s))
        return NULL;
    *n = PyUnicode_GET_LENGTH(s);
    return (const unsigned char *)(((PyASCIIObject *)s) + 1);
}

/* memcpy(o, p, n), up to 16 bytes (most keys and many values) with two fixed-size moves that may overlap:
   a few instructions where a call to memcpy costs more than the copy. */
ZJC_ALWAYS_INLINE void zjc_copy_short(unsigned char *o, const unsigned char *p, Py_ssize_t n) {
    uint64_t head, tail;
    uint32_t head4, tail4;
    if (n > 16) {
        memcpy(o, p, (size_t)n);
    } else if (n >= 8) {
        memcpy(&head, p, 8);
        memcpy(&tail, p + n - 8, 8);
        memcpy(o, &head, 8);
        memcpy(o + n - 8, &tail, 8);
    } else if (n >= 4) {
        memcpy(&head4, p, 4);
        memcpy(&tail4, p + n - 4, 4);
        memcpy(o, &head4, 4);
        memcpy(o + n - 4, &tail4, 4);
    } else if (n > 0) {  /* 1 to 3 bytes: the first, the middle and the last, without a loop */
        o[0] = p[0];
        o[n / 2] = p[n / 2];
        o[n - 1] = p[n - 1];
    }
}

/* The bytes zjc_utf8_of_ucs may write for n characters of kind bytes each: 2, 3 or 4 a character at most,
   and 16 for the stores of its blocks. */
static inline Py_ssize_t zjc_utf8_room(int kind, Py_ssize_t n) {
    return n * (kind < 4 ? kind + 1 : 4) + 16;
}

/* c as UTF-8 at o (a surrogate too: the caller decides about those); the end. */
static inline unsigned char *zjc_code_point(unsigned char *o, uint32_t c) {
    if (c < 0x80) {
        *o = (unsigned char)c;
        return o + 1;
    }
    if (c < 0x800) {
        o[0] = (unsigned char)(0xC0 | (c >> 6));
        o[1] = (unsigned char)(0x80 | (c & 0x3F));
        return o + 2;
    }
    if (c < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (c >> 12));
        o[1] = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (c & 0x3F));
        return o + 3;
    }
    o[0] = (unsigned char)(0xF0 | (c >> 18));
    o[1] = (unsigned char)(0x80 | ((c >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (c & 0x3F));
    return o + 4;
}

/* The 16 1-byte characters at p copied to o (room for 16 bytes): how many of them lead up to the first
   that is not ASCII (16: none is). */
static inline int zjc_ascii_run16(const Py_UCS1 *p, unsigned char *o) {
#ifdef ZJC_X86_SIMD
    __m128i x = _mm_loadu_si128((const __m128i *)p);
    int mask = _mm_movemask_epi8(x);
    _mm_storeu_si128((__m128i *)o, x);
    return mask ? __builtin_ctz((unsigned int)mask) : 16;
#else
    int k = 0;
    while (k < 16 && p[k] < 0x80) {
        o[k] = p[k];
        k++;
    }
    return k;
#endif
}

#ifdef ZJC_X86_SIMD
/* For each way four characters can be one, two or three UTF-8 bytes long (index: two bits a character,
   the low one "one byte", the high one "one or two"), how many bytes they make and the byte shuffle that
   picks them, in order, from the 16 bytes zjc_bmp_block8_ssse3 makes for them (4 a character: the
   one-byte form, the last byte, the first of three, the first of two or the second of three). */
static unsigned char zjc_pack_123[256][17];

static inline void zjc_build_pack_123(void) {
    int index, j, k;
    for (index = 0; index < 256; index++) {
        unsigned char *row = zjc_pack_123[index];
        k = 1;
        for (j = 0; j < 4; j++) {
            if (index >> (2 * j) & 1) {                /* one byte */
                row[k++] = (unsigned char)(4 * j);
            } else if (index >> (2 * j + 1) & 1) {     /* two */
                row[k++] = (unsigned char)(4 * j + 3);
                row[k++] = (unsigned char)(4 * j + 1);
            } else {                                   /* three */
                row[k++] = (unsigned char)(4 * j + 2);
                row[k++] = (unsigned char)(4 * j + 3);
                row[k++] = (unsigned char)(4 * j + 1);
            }
        }
        row[0] = (unsigned char)(k - 1);
        while (k < 17) row[k++] = 0x80;                /* a zero byte: past the count, junk anyway */
    }
}

/* The UTF-8 of 8 characters below U+10000 (in, 16 bits each) at o (room for 28 bytes; the bytes past the
   count are junk): how many bytes, or -1 if a surrogate is among them.  Each character is widened to 32
   bits holding all its possible bytes, then each half of the block is packed by a shuffle from
   zjc_pack_123. */
__attribute__((target("ssse3")))
static inline int zjc_bmp_block8_ssse3(__m128i in, unsigned char *o) {
    const __m128i zero = _mm_setzero_si128();
    const __m128i ascii = _mm_cmpeq_epi16(_mm_and_si128(in, _mm_set1_epi16((short)0xFF80)), zero);
    const unsigned int ascii_mask = (unsigned int)_mm_movemask_epi8(ascii);
    __m128i top, short_, last, first, pair, out0, out1;
    unsigned int mask;
    const unsigned char *row0, *row1;
    if (ascii_mask == 0xFFFFu) {
        _mm_storel_epi64((__m128i *)o, _mm_packus_epi16(in, in));
        return 8;
    }
    top = _mm_and_si128(in, _mm_set1_epi16((short)0xF800));
    if (_mm_movemask_epi8(_mm_cmpeq_epi16(top, _mm_set1_epi16((short)0xD800)))) return -1;
    short_ = _mm_cmpeq_epi16(top, zero);  /* one or two bytes: below U+0800 */
    /* low byte: the character itself (ASCII), high byte: 10cccccc, the last byte of two or three */
    last = _mm_shuffle_epi8(in, _mm_setr_epi8(0, 0, 2, 2, 4, 4, 6, 6, 8, 8, 10, 10, 12, 12, 14, 14));
    last = _mm_or_si128(_mm_and_si128(last, _mm_set1_epi16(0x3F7F)), _mm_set1_epi16((short)0x8000));
    /* low byte: 1110aaaa, the first of three; high byte: 110bbbbb (first of two) or 10bbbbbb (second of
       three): [0000aaaa bbbbbb00] multiplied byte-wise into [00bbbbbb 0000aaaa], then the prefix bits */
    first = _mm_and_si128(_mm_srli_epi16(in, 4), _mm_set1_epi16(0x0FFC));
    first = _mm_maddubs_epi16(first, _mm_set1_epi16(0x0140));
    first = _mm_or_si128(first, _mm_set1_epi16((short)0xC0E0));
    first = _mm_xor_si128(first, _mm_andnot_si128(short_, _mm_set1_epi16(0x4000)));
    out0 = _mm_unpacklo_epi16(last, first);
    out1 = _mm_unpackhi_epi16(last, first);
    mask = (ascii_mask & 0x5555u) | ((unsigned int)_mm_movemask_epi8(short_) & 0xAAAAu);
    row0 = zjc_pack_123[mask & 0xFF];
    row1 = zjc_pack_123[mask >> 8];
    pair = _mm_shuffle_epi8(out0, _mm_loadu_si128((const __m128i *)(row0 + 1)));
    _mm_storeu_si128((__m128i *)o, pair);
    pair = _mm_shuffle_epi8(out1, _mm_loadu_si128((const __m128i *)(row1 + 1)));
    _mm_storeu_si128((__m128i *)(o + row0[0]), pair);
    return row0[0] + row1[0];
}

/* zjc_bmp_block8_ssse3 of the 8 characters of a 4-byte str at p; -2 (nothing done) if one is past U+FFFF. */
__attribute__((target("ssse3")))
static int zjc_ucs4_block8_ssse3(const Py_UCS4 *p, unsigned char *o) {
    const __m128i a = _mm_loadu_si128((const __m128i *)p), b = _mm_loadu_si128((const __m128i *)(p + 4));
    const __m128i low_halves = _mm_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1);
    if (_mm_movemask_epi8(_mm_cmpeq_epi16(_mm_srli_epi32(_mm_or_si128(a, b), 16), _mm_setzero_si128()))
            != 0xFFFF) return -2;
    return zjc_bmp_block8_ssse3(_mm_unpacklo_epi64(_mm_shuffle_epi8(a, low_halves),
                                                   _mm_shuffle_epi8(b, low_halves)), o);
}

/* Whether zjc_utf8_of_ucs may take a 2- or 4-byte str 8 characters a step (the table is built, the CPU can). */
static int zjc_bmp_blocks = 0;
#endif

/* Call once before zjc_utf8_of_ucs (module initialisation: no thread can be converting yet). */
static inline int zjc_ucs_utf8_init(void) {
#ifdef ZJC_X86_SIMD
    if (__builtin_cpu_supports("ssse3")) {
        zjc_build_pack_123();
        zjc_bmp_blocks = 1;
    }
#endif
    return 0;
}

/* The UTF-8 of a str's n characters of kind bytes each at out (room for zjc_utf8_room bytes): its size, or
   -1 at a surrogate, which strict UTF-8 refuses (a str holds no pairs).  Always inlined, for one loop per
   width with the kind a constant in each. */
ZJC_ALWAYS_INLINE Py_ssize_t zjc_utf8_of_width(int kind, const void *data, Py_ssize_t n, unsigned char *out) {
    const Py_UCS1 *p1 = (const Py_UCS1 *)data;
    const Py_UCS2 *p2 = (const Py_UCS2 *)data;
    const Py_UCS4 *p4 = (const Py_UCS4 *)data;
    Py_ssize_t i = 0, k;
    unsigned char *o = out;
    uint32_t c;
#ifdef ZJC_X86_SIMD
    if (kind != 1 && zjc_bmp_blocks) {
        for (; i + 8 <= n; i += 8) {
            k = kind == 2 ? zjc_bmp_block8_ssse3(_mm_loadu_si128((const __m128i *)(p2 + i)), o)
                          : zjc_ucs4_block8_ssse3(p4 + i, o);
            if (k >= 0) {
                o += k;
                continue;
            }
            if (k == -1) return -1;  /* a surrogate */
            for (k = 0; k < 8; k++) {  /* -2: a character past U+FFFF among them (a 4-byte str) */
                c = p4[i + k];
                if (c >= 0xD800 && c <= 0xDFFF) return -1;
                o = zjc_code_point(o, c);
            }
        }
    }
#endif
    while (i < n) {
        c = kind == 1 ? p1[i] : kind == 2 ? p2[i] : p4[i];
        if (kind == 1 && c < 0x80 && i + 16 <= n) {  /* mostly ASCII: as far as a block of 16 is, at once */
            k = zjc_ascii_run16(p1 + i, o);
            o += k;
            i += k;
            continue;
        }
        if (c >= 0xD800 && c <= 0xDFFF) return -1;
        o = zjc_code_point(o, c);
        i++;
    }
    return o - out;
}

static inline Py_ssize_t zjc_utf8_of_ucs(int kind, const void *data, Py_ssize_t n, unsigned char *out) {
    if (kind == 1) return zjc_utf8_of_width(1, data, n, out);
    if (kind == 2) return zjc_utf8_of_width(2, data, n, out);
    return zjc_utf8_of_width(4, data, n, out);
}

/* ---- UTF-8 to a str's code units ---- */

/* The character of the strict UTF-8 sequence at p, and its length in *size. */
static inline Py_UCS4 zjc_sequence(const unsigned char *p, int *size) {
    const unsigned char c = p[0];
    if (c < 0x80) { *size = 1; return c; }
    if (c < 0xE0) { *size = 2; return (Py_UCS4)(c & 0x1F) << 6 | (p[1] & 0x3F); }
    if (c < 0xF0) { *size = 3; return (Py_UCS4)(c & 0x0F) << 12 | (Py_UCS4)(p[1] & 0x3F) << 6 | (p[2] & 0x3F); }
    *size = 4;
    return (Py_UCS4)(c & 0x07) << 18 | (Py_UCS4)(p[1] & 0x3F) << 12 | (Py_UCS4)(p[2] & 0x3F) << 6 | (p[3] & 0x3F);
}

/* The code units, kind bytes each, of the strict UTF-8 p[0:n] into a new str's data, which holds exactly its
   chars characters: from an ASCII byte, the ASCII a block of 16 bytes begins with in one step (SSE2; while 16
   more units fit), the other characters one by one. */
ZJC_ALWAYS_INLINE void zjc_units_of_width(int kind, const unsigned char *p, Py_ssize_t n, void *data,
                                          Py_ssize_t chars) {
    Py_UCS1 *o1 = (Py_UCS1 *)data;
    Py_UCS2 *o2 = (Py_UCS2 *)data;
    Py_UCS4 *o4 = (Py_UCS4 *)data;
    Py_ssize_t i = 0, j = 0;
    int size;
    Py_UCS4 c;
#ifndef ZJC_X86_SIMD
    (void)chars;  /* only the 16-byte steps need it */
#endif
    while (i < n) {
#ifdef ZJC_X86_SIMD
        if (p[i] < 0x80 && i + 16 <= n && j + 16 <= chars) {
            const __m128i x = _mm_loadu_si128((const __m128i *)(p + i)), zero = _mm_setzero_si128();
            const int mask = _mm_movemask_epi8(x);
            const int k = mask ? __builtin_ctz((unsigned int)mask) : 16;  /* the ASCII bytes it begins with */
            {
                if (kind == 1) {
                    _mm_storeu_si128((__m128i *)(o1 + j), x);
                } else if (kind == 2) {
                    _mm_storeu_si128((__m128i *)(o2 + j), _mm_unpacklo_epi8(x, zero));
                    _mm_storeu_si128((__m128i *)(o2 + j + 8), _mm_unpackhi_epi8(x, zero));
                } else {
                    const __m128i lo = _mm_unpacklo_epi8(x, zero), hi = _mm_unpackhi_epi8(x, zero);
                    _mm_storeu_si128((__m128i *)(o4 + j), _mm_unpacklo_epi16(lo, zero));
                    _mm_storeu_si128((__m128i *)(o4 + j + 4), _mm_unpackhi_epi16(lo, zero));
                    _mm_storeu_si128((__m128i *)(o4 + j + 8), _mm_unpacklo_epi16(hi, zero));
                    _mm_storeu_si128((__m128i *)(o4 + j + 12), _mm_unpackhi_epi16(hi, zero));
                }
                i += k;
                j += k;
                continue;
            }
        }
#endif
        c = zjc_sequence(p + i, &size);
        if (kind == 1) o1[j] = (Py_UCS1)c;
        else if (kind == 2) o2[j] = (Py_UCS2)c;
        else o4[j] = c;
        i += size;
        j++;
    }
}

static inline void zjc_units_of_utf8(int kind, const unsigned char *p, Py_ssize_t n, void *data, Py_ssize_t chars) {
    if (kind == 1) zjc_units_of_width(1, p, n, data, chars);
    else if (kind == 2) zjc_units_of_width(2, p, n, data, chars);
    else zjc_units_of_width(4, p, n, data, chars);
}

#endif
