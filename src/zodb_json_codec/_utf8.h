/* Strict UTF-8 validation for the Cython twins (the encoder's JSON reader and the decoder's text spans), and
   JSON string runs found, copied and (for the reader) checked in one pass: the reader's up to an escape or the
   closing quote, the JSON writer's between the characters it escapes.

   "Strict" is what bytes.decode("utf-8") accepts: no overlong forms, no surrogates (U+D800-U+DFFF), nothing
   past U+10FFFF, no truncated sequence at the end.  zjc_utf8_prefix gives the length of the longest valid
   prefix (the offset of the first error, for the error message); with no_nul, a zero byte counts as an error
   too (the decoder's text spans never hold U+0000: such text takes the @ns route).

   On x86-64 CPUs with AVX2 (chosen when it runs), texts of 32 bytes and more are first checked 32 bytes at a
   time with the table lookups of Keiser and Lemire ("Validating UTF-8 in less than one instruction per byte",
   Software: Practice and Experience, 2021; the algorithm of simdjson and simdutf): three 16-entry tables,
   indexed by the nibbles of each byte and of the byte before it, flag every two-byte pattern that cannot
   occur, and a comparison with the bytes two and three back checks the third and fourth bytes of long
   sequences.  Only when a text fails that check does the byte-at-a-time loop run, to find where.  The same
   32-byte steps make zjc_json_run, the loop of every JSON string.  Shorter texts, and other CPUs, take the
   plain C. */

#ifndef ZJC_UTF8_H
#define ZJC_UTF8_H

#include <stddef.h>
#include "_primitives.h"

/* The byte-at-a-time check: the length of the longest strict UTF-8 prefix of p[0:n] (n when all is). */
static Py_ssize_t zjc_utf8_prefix_bytewise(const unsigned char *p, Py_ssize_t n, int no_nul) {
    Py_ssize_t i = 0;
    unsigned char c, lo, hi;
    int m, k;
    while (i < n) {
        c = p[i];
        if (c < 0x80) {
            if (c == 0 && no_nul) return i;
            i++;
            continue;
        }
        /* The commonest first: two bytes (Latin, Greek, Cyrillic...), then three (most of the BMP). */
        if (c >= 0xC2 && c <= 0xDF && i + 2 <= n && (p[i + 1] & 0xC0) == 0x80) {
            i += 2;
            continue;
        }
        if ((c & 0xF0) == 0xE0 && c != 0xE0 && c != 0xED && i + 3 <= n
                && (p[i + 1] & 0xC0) == 0x80 && (p[i + 2] & 0xC0) == 0x80) {
            i += 3;
            continue;
        }
        lo = 0x80; hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) m = 2;
        else if (c >= 0xE0 && c <= 0xEF) { m = 3; if (c == 0xE0) lo = 0xA0; else if (c == 0xED) hi = 0x9F; }
        else if (c >= 0xF0 && c <= 0xF4) { m = 4; if (c == 0xF0) lo = 0x90; else if (c == 0xF4) hi = 0x8F; }
        else return i;
        if (i + m > n || p[i + 1] < lo || p[i + 1] > hi) return i;
        for (k = 2; k < m; k++) if ((p[i + k] & 0xC0) != 0x80) return i;
        i += m;
    }
    return n;
}

/* JSON string text: the offset of the first '"', backslash or control character in p[0:n], else n. */
static Py_ssize_t zjc_string_run(const unsigned char *p, Py_ssize_t n) {
    Py_ssize_t i = 0;
    for (; i < n; i++) {
        if (p[i] == '"' || p[i] == 92 || p[i] < 0x20) return i;
    }
    return n;
}

#if defined(ZJC_X86_SIMD) && !defined(ZJC_NO_AVX2)  /* -DZJC_NO_AVX2: the plain C, as a CPU without AVX2 runs it */
#define ZJC_UTF8_AVX2 1
#include <immintrin.h>

/* What a byte and the one before it may not be (the bits of the three tables below). */
#define ZJC_TOO_SHORT 1      /* a lead byte not followed by a continuation byte */
#define ZJC_TOO_LONG 2       /* ASCII followed by a continuation byte */
#define ZJC_OVERLONG_3 4     /* E0 80-9F */
#define ZJC_TOO_LARGE 8      /* F4 90-BF, F5-FF */
#define ZJC_SURROGATE 16     /* ED A0-BF */
#define ZJC_OVERLONG_2 32    /* C0-C1 */
#define ZJC_TOO_LARGE_1000 64 /* F5-FF 80-8F */
#define ZJC_OVERLONG_4 64    /* F0 80-8F */
#define ZJC_TWO_CONTS 128    /* two continuation bytes (an error unless the third or fourth of a sequence) */
#define ZJC_CARRY (ZJC_TOO_SHORT | ZJC_TOO_LONG | ZJC_TWO_CONTS)
#define ZJC_C(x) ((char)(unsigned char)(x))

/* The three tables, indexed by a nibble: the high and low nibbles of the byte before, the high nibble of the
   byte itself. */
#define ZJC_FIRST_HIGH \
    ZJC_TOO_LONG, ZJC_TOO_LONG, ZJC_TOO_LONG, ZJC_TOO_LONG, ZJC_TOO_LONG, ZJC_TOO_LONG, ZJC_TOO_LONG, \
    ZJC_TOO_LONG, ZJC_C(ZJC_TWO_CONTS), ZJC_C(ZJC_TWO_CONTS), ZJC_C(ZJC_TWO_CONTS), ZJC_C(ZJC_TWO_CONTS), \
    ZJC_TOO_SHORT | ZJC_OVERLONG_2, ZJC_TOO_SHORT, ZJC_TOO_SHORT | ZJC_OVERLONG_3 | ZJC_SURROGATE, \
    ZJC_TOO_SHORT | ZJC_TOO_LARGE | ZJC_TOO_LARGE_1000 | ZJC_OVERLONG_4
#define ZJC_FIRST_LOW \
    ZJC_C(ZJC_CARRY | ZJC_OVERLONG_3 | ZJC_OVERLONG_2 | ZJC_OVERLONG_4), ZJC_C(ZJC_CARRY | ZJC_OVERLONG_2), \
    ZJC_C(ZJC_CARRY), ZJC_C(ZJC_CARRY), ZJC_C(ZJC_CARRY | ZJC_TOO_LARGE), \
    ZJC_C(ZJC_CARRY | ZJC_TOO_LARGE | ZJC_TOO_LARGE_1000), ZJC_C(ZJC_CARRY | ZJC_TOO_LARGE | ZJC_TOO_LARGE_1000), \
    ZJC_C(ZJC_CARRY | ZJC_TOO_LARGE | ZJC_TOO_LARGE_1000), ZJC_C(ZJC_CARRY | ZJC_TOO_LARGE | ZJC_TOO_LARGE_1000), \
    ZJC_C(ZJC_CARRY | ZJC_TOO_LARGE | ZJC_TOO_LARGE_1000), ZJC_C(ZJC_CARRY | ZJC_TOO_LARGE | ZJC_TOO_LARGE_1000), \
    ZJC_C(ZJC_CARRY | ZJC_TOO_LARGE | ZJC_TOO_LARGE_1000), ZJC_C(ZJC_CARRY | ZJC_TOO_LARGE | ZJC_TOO_LARGE_1000), \
    ZJC_C(ZJC_CARRY | ZJC_TOO_LARGE | ZJC_TOO_LARGE_1000 | ZJC_SURROGATE), \
    ZJC_C(ZJC_CARRY | ZJC_TOO_LARGE | ZJC_TOO_LARGE_1000), ZJC_C(ZJC_CARRY | ZJC_TOO_LARGE | ZJC_TOO_LARGE_1000)
#define ZJC_SECOND_HIGH \
    ZJC_TOO_SHORT, ZJC_TOO_SHORT, ZJC_TOO_SHORT, ZJC_TOO_SHORT, ZJC_TOO_SHORT, ZJC_TOO_SHORT, ZJC_TOO_SHORT, \
    ZJC_TOO_SHORT, \
    ZJC_C(ZJC_TOO_LONG | ZJC_OVERLONG_2 | ZJC_TWO_CONTS | ZJC_OVERLONG_3 | ZJC_TOO_LARGE_1000 | ZJC_OVERLONG_4), \
    ZJC_C(ZJC_TOO_LONG | ZJC_OVERLONG_2 | ZJC_TWO_CONTS | ZJC_OVERLONG_3 | ZJC_TOO_LARGE), \
    ZJC_C(ZJC_TOO_LONG | ZJC_OVERLONG_2 | ZJC_TWO_CONTS | ZJC_SURROGATE | ZJC_TOO_LARGE), \
    ZJC_C(ZJC_TOO_LONG | ZJC_OVERLONG_2 | ZJC_TWO_CONTS | ZJC_SURROGATE | ZJC_TOO_LARGE), \
    ZJC_TOO_SHORT, ZJC_TOO_SHORT, ZJC_TOO_SHORT, ZJC_TOO_SHORT


/* Error bits of the 32 bytes x, given the 32 before them (prev), both 16-byte lanes at once as simdjson's AVX2
   kernel does it: the bytes one, two and three back come across the lanes from prev by a permute and an
   align. */
__attribute__((target("avx2")))
static inline __m256i zjc_utf8_block_errors_avx2(__m256i x, __m256i prev) {
    const __m256i nibble = _mm256_set1_epi8(0x0F);
    const __m256i first_high = _mm256_setr_epi8(ZJC_FIRST_HIGH, ZJC_FIRST_HIGH);
    const __m256i first_low = _mm256_setr_epi8(ZJC_FIRST_LOW, ZJC_FIRST_LOW);
    const __m256i second_high = _mm256_setr_epi8(ZJC_SECOND_HIGH, ZJC_SECOND_HIGH);
    __m256i across = _mm256_permute2x128_si256(prev, x, 0x21);  /* prev's high lane, x's low lane */
    __m256i prev1 = _mm256_alignr_epi8(x, across, 15);
    __m256i special = _mm256_and_si256(
        _mm256_and_si256(_mm256_shuffle_epi8(first_high, _mm256_and_si256(_mm256_srli_epi16(prev1, 4), nibble)),
                         _mm256_shuffle_epi8(first_low, _mm256_and_si256(prev1, nibble))),
        _mm256_shuffle_epi8(second_high, _mm256_and_si256(_mm256_srli_epi16(x, 4), nibble)));
    /* The third and fourth bytes of a sequence: two continuations there are right, anything else wrong. */
    __m256i third = _mm256_subs_epu8(_mm256_alignr_epi8(x, across, 14), _mm256_set1_epi8(ZJC_C(0xE0 - 0x80)));
    __m256i fourth = _mm256_subs_epu8(_mm256_alignr_epi8(x, across, 13), _mm256_set1_epi8(ZJC_C(0xF0 - 0x80)));
    __m256i must_continue = _mm256_and_si256(_mm256_or_si256(third, fourth), _mm256_set1_epi8(ZJC_C(0x80)));
    return _mm256_xor_si256(must_continue, special);
}

/* Nonzero where the 32 bytes prev end with a lead byte whose sequence they cannot finish. */
__attribute__((target("avx2")))
static inline __m256i zjc_utf8_unfinished_avx2(__m256i prev) {
    const char f = ZJC_C(0xFF);
    return _mm256_subs_epu8(prev, _mm256_setr_epi8(f, f, f, f, f, f, f, f, f, f, f, f, f, f, f, f, f, f, f, f, f, f,
        f, f, f, f, f, f, f, ZJC_C(0xF0 - 1), ZJC_C(0xE0 - 1), ZJC_C(0xC0 - 1)));
}

/* zjc_json_run 32 bytes at a time, for CPUs with AVX2 (x86-64 since about 2013): each block is looked at for
   the run's end, stored (o has room for n bytes) and checked as UTF-8 with the bytes from the run's end on
   replaced by spaces, which also ends a sequence truncated there as an error. */
__attribute__((target("avx2")))
static Py_ssize_t zjc_json_run_avx2(const unsigned char *p, Py_ssize_t n, unsigned char *o, int check_utf8,
                                    int *bad) {
    const __m256i quote = _mm256_set1_epi8('"'), backslash = _mm256_set1_epi8(92), c1f = _mm256_set1_epi8(0x1F);
    const __m256i spaces = _mm256_set1_epi8(' '), zero = _mm256_setzero_si256();
    const __m256i iota = _mm256_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19,
                                          20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31);
    __m256i prev = zero, errors = zero, x, keep;
    unsigned char tail[32];
    Py_ssize_t i = 0;
    unsigned int mask;
    int k, partial;
    while (i < n) {
        partial = i + 32 > n;
        if (partial) {
            memset(tail, ' ', 32);
            memcpy(tail, p + i, (size_t)(n - i));
            x = _mm256_loadu_si256((const __m256i *)tail);
        } else {
            x = _mm256_loadu_si256((const __m256i *)(p + i));
        }
        mask = (unsigned int)_mm256_movemask_epi8(_mm256_or_si256(
            _mm256_or_si256(_mm256_cmpeq_epi8(x, quote), _mm256_cmpeq_epi8(x, backslash)),
            _mm256_cmpeq_epi8(_mm256_min_epu8(x, c1f), x)));
        k = mask ? __builtin_ctz(mask) : partial ? (int)(n - i) : 32;
        if (partial) memcpy(o + i, p + i, (size_t)k);
        else _mm256_storeu_si256((__m256i *)(o + i), x);
        if (check_utf8) {
            if (k < 32) {
                keep = _mm256_cmpgt_epi8(_mm256_set1_epi8((char)k), iota);
                x = _mm256_blendv_epi8(spaces, x, keep);
            }
            errors = _mm256_or_si256(errors, _mm256_movemask_epi8(x) == 0 ? zjc_utf8_unfinished_avx2(prev)
                                                                          : zjc_utf8_block_errors_avx2(x, prev));
            prev = x;
        }
        i += k;
        if (k < 32) break;
    }
    if (check_utf8) {
        errors = _mm256_or_si256(errors, zjc_utf8_unfinished_avx2(prev));
        if (!_mm256_testz_si256(errors, errors)) *bad = 1;
    }
    return i;
}

/* Is p[0:n] strict UTF-8 (without zero bytes, with no_nul)?  32 bytes at a time; the last partial block is
   padded with spaces, which also ends a truncated sequence as an error. */
__attribute__((target("avx2")))
static int zjc_utf8_valid_avx2(const unsigned char *p, Py_ssize_t n, int no_nul) {
    const __m256i zero = _mm256_setzero_si256(), spaces = _mm256_set1_epi8(' ');
    __m256i prev = zero, errors = zero, x;
    unsigned char tail[32];
    Py_ssize_t i = 0;
    while (i < n) {
        if (i + 32 <= n) {
            x = _mm256_loadu_si256((const __m256i *)(p + i));
        } else {
            _mm256_storeu_si256((__m256i *)tail, spaces);
            memcpy(tail, p + i, (size_t)(n - i));
            x = _mm256_loadu_si256((const __m256i *)tail);
        }
        if (no_nul) errors = _mm256_or_si256(errors, _mm256_cmpeq_epi8(x, zero));
        errors = _mm256_or_si256(errors, _mm256_movemask_epi8(x) == 0 ? zjc_utf8_unfinished_avx2(prev)
                                                                      : zjc_utf8_block_errors_avx2(x, prev));
        prev = x;
        i += 32;
    }
    errors = _mm256_or_si256(errors, zjc_utf8_unfinished_avx2(prev));
    return _mm256_testz_si256(errors, errors);
}
#endif

/* The length of the longest strict UTF-8 prefix of p[0:n]: n when all of it is. */
static inline Py_ssize_t zjc_utf8_prefix(const unsigned char *p, Py_ssize_t n, int no_nul) {
#ifdef ZJC_UTF8_AVX2
    if (n >= 32 && __builtin_cpu_supports("avx2") && zjc_utf8_valid_avx2(p, n, no_nul)) return n;
#endif
    return zjc_utf8_prefix_bytewise(p, n, no_nul);
}

/* The run of JSON string text at p[0:n] up to its first '"', backslash or control character, copied to o (room
   for n bytes; whole blocks of 32 are stored as they are); its length.  With check_utf8, *bad is set when the
   run is not strict UTF-8 (zjc_utf8_prefix then says where). */
static inline Py_ssize_t zjc_json_run(const unsigned char *p, Py_ssize_t n, unsigned char *o, int check_utf8,
                                      int *bad) {
    Py_ssize_t k;
#ifdef ZJC_UTF8_AVX2
    /* A text shorter than a block would take AVX2's slower last-block path at once: most keys and values. */
    if (n >= 32 && __builtin_cpu_supports("avx2")) return zjc_json_run_avx2(p, n, o, check_utf8, bad);
#endif
    k = zjc_string_run(p, n);
    if (check_utf8 && zjc_utf8_prefix_bytewise(p, k, 0) != k) *bad = 1;
    memcpy(o, p, (size_t)k);
    return k;
}

#endif
