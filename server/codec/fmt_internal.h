/* fmt_internal.h -- private to fmt.c (printing) and fmt_parse.c (parsing):
 * what both directions need, named fmt__*: the small bignum that computes
 * their tables of powers of five exactly, once, at first use, and the
 * 128-bit type, the inlining macro and the 5^q test of their hot paths.
 * Nothing outside server/fmt*.c includes this; the public API is fmt.h. */
#ifndef NORMD_FMT_INTERNAL_H
#define NORMD_FMT_INTERNAL_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

__extension__ typedef unsigned __int128 fmt__u128;

/* Printing and parsing run once per number: their helpers are inlined so
 * that the values stay in registers. */
#define FMT__HOT static inline __attribute__((always_inline))

/* How far NORM_SIMD lets the SIMD paths of both directions go (read as
 * core/kern.c reads it, at their tables' first use): 0 "base" (none), 1
 * "avx2" (up to AVX2), 2 any other or unset (what the CPU has). */
static inline int fmt__simd_cap(void) {
  const char *want = getenv("NORM_SIMD");
  if (want && strcmp(want, "base") == 0) return 0;
  return want && strcmp(want, "avx2") == 0 ? 1 : 2;
}

/* Unsigned bignum, 32-bit limbs, little-endian; 5^342 (the largest power
 * the parser needs) has 795 bits, and a remainder below it doubled 796. */
#define FMT__BIG_LIMBS 26
typedef struct {
  uint32_t w[FMT__BIG_LIMBS];
} fmt__big_t;

static inline int fmt__big_bits(const fmt__big_t *b) {
  for (int i = FMT__BIG_LIMBS - 1; i >= 0; i--)
    if (b->w[i]) return 32 * i + 32 - __builtin_clz(b->w[i]);
  return 0;
}

/* 128 bits of b starting at bit `shift` (shift may be negative: << -shift). */
static inline fmt__u128 fmt__big_window(const fmt__big_t *b, int shift) {
  fmt__u128 r = 0;
  for (int bit = 127; bit >= 0; bit--) {
    int at = shift + bit;
    int one =
        at >= 0 && at < 32 * FMT__BIG_LIMBS && (b->w[at / 32] >> (at % 32) & 1);
    r = r << 1 | (fmt__u128)one;
  }
  return r;
}

static inline int fmt__big_cmp(const fmt__big_t *a, const fmt__big_t *b) {
  for (int i = FMT__BIG_LIMBS - 1; i >= 0; i--)
    if (a->w[i] != b->w[i]) return a->w[i] < b->w[i] ? -1 : 1;
  return 0;
}

static inline void fmt__big_sub(fmt__big_t *a,
                                const fmt__big_t *b) { /* a -= b, a >= b */
  uint64_t borrow = 0;
  for (int i = 0; i < FMT__BIG_LIMBS; i++) {
    uint64_t d = (uint64_t)a->w[i] - b->w[i] - borrow;
    a->w[i] = (uint32_t)d;
    borrow = d >> 63;
  }
}

static inline void fmt__big_shl1(fmt__big_t *a) {
  for (int i = FMT__BIG_LIMBS - 1; i > 0; i--)
    a->w[i] = a->w[i] << 1 | a->w[i - 1] >> 31;
  a->w[0] <<= 1;
}

static inline void fmt__big_mul_small(fmt__big_t *a, uint32_t m) {
  uint64_t carry = 0;
  for (int i = 0; i < FMT__BIG_LIMBS; i++) {
    uint64_t p = (uint64_t)a->w[i] * m + carry;
    a->w[i] = (uint32_t)p;
    carry = p >> 32;
  }
}

/* floor(2^(bits - 1 + prec) / p), where bits is the bit length of p, by
 * restoring division: the remainder starts at 2^(bits - 1) <= p and doubles
 * prec times. The quotient lies in (2^(prec - 1), 2^prec) unless p = 1, so
 * prec may be 128 for p > 1. */
static inline fmt__u128 fmt__big_reciprocal(const fmt__big_t *p, int bits,
                                            int prec) {
  fmt__big_t r = {{0}};
  r.w[(bits - 1) / 32] = 1u << ((bits - 1) % 32);
  fmt__u128 q = 0;
  for (int step = 0; step <= prec; step++) {
    if (step) fmt__big_shl1(&r);
    q <<= 1;
    if (fmt__big_cmp(&r, p) >= 0) {
      fmt__big_sub(&r, p);
      q |= 1;
    }
  }
  return q;
}

static inline int fmt__pow5_factor(uint64_t v) {
  int n = 0;
  while (v != 0 && v % 5 == 0) {
    v /= 5;
    n++;
  }
  return n;
}
static inline int fmt__pow5_divides(uint64_t v, int q) {
  return q == 0 || fmt__pow5_factor(v) >= q;
}

#endif
