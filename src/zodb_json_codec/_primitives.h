/* The byte primitives every Cython module writes and reads: base64 and hex, both ways, in C.

   The texts are the codec's: base64 with the standard alphabet and '=' padding as base64.b64encode writes
   it, read back only in its canonical spelling (what _common.b64decode accepts; anything else is left to
   it, for the same result or error); hex as bytes.hex() writes it, read back in either case (what
   _known.is_hex accepts). */

#ifndef ZJC_PRIMITIVES_H
#define ZJC_PRIMITIVES_H

#include <stdint.h>
#include <string.h>
#include "Python.h"

/* The SIMD loops of all the headers: x86-64 with GCC or clang, each loop chosen when it runs by what the CPU
   has (-DZJC_NO_SIMD: the plain C everywhere, as ARM and MSVC builds run it). */
#if defined(__GNUC__) && defined(__x86_64__) && !defined(ZJC_NO_SIMD)
#define ZJC_X86_SIMD 1
#include <tmmintrin.h>
#endif

#if defined(__GNUC__)
#define ZJC_ALWAYS_INLINE static inline __attribute__((always_inline))
#else
#define ZJC_ALWAYS_INLINE static inline
#endif

static const char zjc_b64_alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* The base64 text of every 12-bit value: two characters per lookup (docs/design.md, "Fast paths"). */
#define ZJC_A(v) ((v) < 26 ? 'A' + (v) : (v) < 52 ? 'a' + (v) - 26 : (v) < 62 ? '0' + (v) - 52 : (v) == 62 ? '+' : '/')
#define ZJC_PAIR(i) ZJC_A((i) >> 6), ZJC_A((i) & 63)
/* ZJC_Rn(f, i): f(i), f(i + 1) ... f(i + n - 1), for the tables below. */
#define ZJC_R4(f, i) f(i), f(i + 1), f(i + 2), f(i + 3)
#define ZJC_R16(f, i) ZJC_R4(f, i), ZJC_R4(f, i + 4), ZJC_R4(f, i + 8), ZJC_R4(f, i + 12)
#define ZJC_R64(f, i) ZJC_R16(f, i), ZJC_R16(f, i + 16), ZJC_R16(f, i + 32), ZJC_R16(f, i + 48)
#define ZJC_R256(f, i) ZJC_R64(f, i), ZJC_R64(f, i + 64), ZJC_R64(f, i + 128), ZJC_R64(f, i + 192)
#define ZJC_R1024(f, i) ZJC_R256(f, i), ZJC_R256(f, i + 256), ZJC_R256(f, i + 512), ZJC_R256(f, i + 768)
static const char zjc_b64_pairs[8192] = {
    ZJC_R1024(ZJC_PAIR, 0), ZJC_R1024(ZJC_PAIR, 1024), ZJC_R1024(ZJC_PAIR, 2048), ZJC_R1024(ZJC_PAIR, 3072)
};

/* Writes the base64 text of p[0:n] at out: ZJC_B64_LENGTH(n) characters, padded. */
#define ZJC_B64_LENGTH(n) (((n) + 2) / 3 * 4)
static inline void zjc_b64_encode(const unsigned char *p, Py_ssize_t n, unsigned char *out) {
    Py_ssize_t i = 0;
    uint32_t v;
    for (; i + 3 <= n; i += 3, out += 4) {
        v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
        memcpy(out, zjc_b64_pairs + 2 * (v >> 12), 2);
        memcpy(out + 2, zjc_b64_pairs + 2 * (v & 4095), 2);
    }
    if (i < n) {
        v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0);
        out[0] = (unsigned char)zjc_b64_alphabet[v >> 18];
        out[1] = (unsigned char)zjc_b64_alphabet[(v >> 12) & 63];
        out[2] = i + 1 < n ? (unsigned char)zjc_b64_alphabet[(v >> 6) & 63] : '=';
        out[3] = '=';
    }
}

/* Reading strict base64: the canonical spelling of some bytes (standard alphabet,
   '=' padding, zero trailing bits), as _common.b64decode accepts.  The
   tables give each character's bits already in place in the three output
   bytes (little-endian); bit 24 marks a character outside the alphabet. */
#define ZJC_V(c) ((c) >= 'A' && (c) <= 'Z' ? (c) - 'A' : (c) >= 'a' && (c) <= 'z' ? (c) - 'a' + 26 : \
                  (c) >= '0' && (c) <= '9' ? (c) - '0' + 52 : (c) == '+' ? 62 : (c) == '/' ? 63 : -1)
#define ZJC_BAD 0x01000000u
#define ZJC_D0(c) (ZJC_V(c) < 0 ? ZJC_BAD : (uint32_t)ZJC_V(c) << 2)
#define ZJC_D1(c) (ZJC_V(c) < 0 ? ZJC_BAD : ((uint32_t)ZJC_V(c) >> 4) | (((uint32_t)ZJC_V(c) & 15) << 12))
#define ZJC_D2(c) (ZJC_V(c) < 0 ? ZJC_BAD : ((uint32_t)ZJC_V(c) >> 2) << 8 | (((uint32_t)ZJC_V(c) & 3) << 22))
#define ZJC_D3(c) (ZJC_V(c) < 0 ? ZJC_BAD : (uint32_t)ZJC_V(c) << 16)
static const uint32_t zjc_d0[256] = { ZJC_R256(ZJC_D0, 0) };
static const uint32_t zjc_d1[256] = { ZJC_R256(ZJC_D1, 0) };
static const uint32_t zjc_d2[256] = { ZJC_R256(ZJC_D2, 0) };
static const uint32_t zjc_d3[256] = { ZJC_R256(ZJC_D3, 0) };

/* Decoded size of canonical base64 text of n characters, or -1. */
static inline Py_ssize_t zjc_b64_size(const unsigned char *in, Py_ssize_t n) {
    if (n % 4) return -1;
    if (n == 0) return 0;
    if (in[n - 1] != '=') return n / 4 * 3;
    if (in[n - 2] != '=') return n / 4 * 3 - 1;
    return n / 4 * 3 - 2;
}

/* Decodes into out (zjc_b64_size bytes, written exactly); 0, or -1 if not canonical. */
static inline int zjc_b64_decode(const unsigned char *in, Py_ssize_t n, unsigned char *out) {
    Py_ssize_t i = 0, full;
    int pads = 0;
    uint32_t x, bad = 0;
    if (n == 0) return 0;
    if (in[n - 1] == '=') pads = in[n - 2] == '=' ? 2 : 1;
    full = pads ? n - 4 : n;
    for (; i < full; i += 4) {
        x = zjc_d0[in[i]] | zjc_d1[in[i + 1]] | zjc_d2[in[i + 2]] | zjc_d3[in[i + 3]];
        bad |= x;
        out[0] = (unsigned char)x; out[1] = (unsigned char)(x >> 8); out[2] = (unsigned char)(x >> 16);
        out += 3;
    }
    if (pads) {
        /* "xx==" (the second character's low 4 bits unused) or "xxx=" (the third's low 2). */
        x = zjc_d0[in[i]] | zjc_d1[in[i + 1]];
        if (pads == 2) {
            if (x & 0xF000u) return -1;
        } else {
            x |= zjc_d2[in[i + 2]];
            if (x & 0xC00000u) return -1;
            out[1] = (unsigned char)(x >> 8);
        }
        bad |= x;
        out[0] = (unsigned char)x;
    }
    return (bad & 0xFF000000u) ? -1 : 0;
}

/* Writes the 2n lower-case hex digits of p[0:n] at out. */
static inline void zjc_hex_encode(const unsigned char *p, Py_ssize_t n, unsigned char *out) {
    static const char digits[] = "0123456789abcdef";
    Py_ssize_t i;
    for (i = 0; i < n; i++) {
        out[2 * i] = (unsigned char)digits[p[i] >> 4];
        out[2 * i + 1] = (unsigned char)digits[p[i] & 15];
    }
}

#define ZJC_H(c) ((c) >= '0' && (c) <= '9' ? (c) - '0' : (c) >= 'a' && (c) <= 'f' ? (c) - 'a' + 10 : \
                  (c) >= 'A' && (c) <= 'F' ? (c) - 'A' + 10 : 0x100)
static const uint16_t zjc_hex[256] = { ZJC_R256(ZJC_H, 0) };

static inline int zjc_hexval(unsigned char c) {
    return c < 128 && zjc_hex[c] < 16 ? zjc_hex[c] : -1;
}

/* Decodes n/2 bytes of hex digits into out: 0, or -1 (out is then
   garbage) unless n is even and all are ASCII hex digits, what
   _known.is_hex accepts. */
static inline int zjc_unhex(const unsigned char *p, Py_ssize_t n, unsigned char *out) {
    Py_ssize_t i;
    unsigned int bad = 0, hi, lo;
    if (n & 1) return -1;
    for (i = 0; i < n; i += 2) {
        hi = zjc_hex[p[i]];
        lo = zjc_hex[p[i + 1]];
        bad |= hi | lo;
        *out++ = (unsigned char)(hi << 4 | lo);
    }
    return bad & 0x100 ? -1 : 0;
}

#endif /* ZJC_PRIMITIVES_H */
