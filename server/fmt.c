/* fmt.c -- exact number text, both ways, and the non-finite spellings.
 *
 * Printing: the shortest decimal that reads back to the same float32 /
 * float64, from an exact Ryu-style generator (Adams, "Ryu: fast
 * float-to-string conversion", PLDI 2018), written here from the paper: the
 * rounding interval of the value is scaled by one power of ten with 125-bit
 * fixed-point multipliers (exact floors), digits are removed while the
 * interval still holds two candidates, and the last one is rounded to
 * nearest, ties to even. No snprintf, no locale. That is for the values
 * on binade boundaries and the subnormals; the others, nearly all, take a
 * shortcut with the same result (Giulietti's Schubfach: 64-bit multipliers
 * for float, 128-bit for double, no loop), as number text is on the hot
 * path of JSON responses. The text is assembled in 64-bit registers.
 *
 * Parsing: a JSON number's text to the nearest float64 / float32. The scan
 * keeps the first 19 significant digits w and the exponent q (value
 * w * 10^q); then Clinger's fast path (one exact operation in double) when
 * w and 10^q are exact doubles, else Eisel-Lemire (Lemire, "Number Parsing
 * at a Gigabyte per Second", 2021): w times a 128-bit truncation of 5^q,
 * with a bound on the error that says when the product decides the
 * rounding. The rare text it cannot decide goes to strtod / strtof.
 *
 * The tables of both directions (powers of five and their reciprocals) are
 * computed once, exactly, with a small bignum (pthread_once).
 * bench/fmt_sweep.c and bench/parse_sweep.c check all 2^32 float32 bit
 * patterns (the shortcuts were also checked against the plain Ryu path:
 * the same text for all 2^32 floats and for 10^8 random doubles). */
#include "fmt.h"

#include <assert.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>


/* ---- the multiplier tables ------------------------------------------------ */

__extension__ typedef unsigned __int128 u128;

#define MUL_BITS 125   /* precision of every multiplier (Ryu's bound for binary64) */
#define POW5_COUNT 326 /* 5^i for i < 326: e2 < 0, i = -e2 - q <= 325 */
#define INV_COUNT 292  /* 5^-q for q < 292: e2 >= 0, q <= 290 */

static u128 pow5_mul[POW5_COUNT]; /* 5^i scaled to exactly MUL_BITS bits, floor */
static u128 pow5_inv[INV_COUNT];  /* floor(2^(bits(5^q) - 1 + MUL_BITS) / 5^q) + 1 */
static int pow5_len[POW5_COUNT];  /* bit length of 5^i */

/* fmt_float()'s scaling, one entry per exponent field of a normal float
 * c * 2^q (c the 24-bit significand): 10^-k for k = floor(log10(2^q)),
 * as g = floor(10^-k * 2^(63 - b)) + 1 in [2^63, 2^64) where
 * 2^b <= 10^-k < 2^(b + 1), and the shift h = q + b + 32 that makes the
 * upper half of g * (x << h) about x * 2^q * 10^-k * 2^31. */
typedef struct {
  uint64_t g;
  int16_t k;
  uint8_t h;
} float_scale_t;
#define FLOAT_POW5_COUNT 46 /* |k| <= 45 */
static float_scale_t float_scale[255];

/* The same for double, c * 2^q with c of 53 bits: g = floor(10^-k *
 * 2^(127 - b)) + 1 in [2^127, 2^128), one per k, and per exponent field k
 * and the shift h = q + b + 1 that makes the upper 64 bits of the 192-bit
 * g * (x << h) about x * 2^q * 10^-k. */
#define DOUBLE_K_MIN (-324) /* k for the smallest normal exponent, q = -1074 */
#define DOUBLE_K_MAX 292    /* and for the largest, q = 971 */
static u128 double_g[DOUBLE_K_MAX - DOUBLE_K_MIN + 1];
static struct {
  int16_t k;
  uint8_t h;
} double_scale[2047];

static pthread_once_t tables_once = PTHREAD_ONCE_INIT;
static int tables_ready; /* set (release) once tables_init has run */

/* Unsigned bignum, 32-bit limbs, little-endian; 5^342 (the largest power
 * the parser needs) has 795 bits, and a remainder below it doubled 796. */
#define BIG_LIMBS 26
typedef struct {
  uint32_t w[BIG_LIMBS];
} big_t;

static int big_bits(const big_t *b) {
  for (int i = BIG_LIMBS - 1; i >= 0; i--)
    if (b->w[i]) return 32 * i + 32 - __builtin_clz(b->w[i]);
  return 0;
}

/* 128 bits of b starting at bit `shift` (shift may be negative: << -shift). */
static u128 big_window(const big_t *b, int shift) {
  u128 r = 0;
  for (int bit = 127; bit >= 0; bit--) {
    int at = shift + bit;
    int one = at >= 0 && at < 32 * BIG_LIMBS && (b->w[at / 32] >> (at % 32) & 1);
    r = r << 1 | (u128)one;
  }
  return r;
}

static int big_cmp(const big_t *a, const big_t *b) {
  for (int i = BIG_LIMBS - 1; i >= 0; i--)
    if (a->w[i] != b->w[i]) return a->w[i] < b->w[i] ? -1 : 1;
  return 0;
}

static void big_sub(big_t *a, const big_t *b) { /* a -= b, a >= b */
  uint64_t borrow = 0;
  for (int i = 0; i < BIG_LIMBS; i++) {
    uint64_t d = (uint64_t)a->w[i] - b->w[i] - borrow;
    a->w[i] = (uint32_t)d;
    borrow = d >> 63;
  }
}

static void big_shl1(big_t *a) {
  for (int i = BIG_LIMBS - 1; i > 0; i--) a->w[i] = a->w[i] << 1 | a->w[i - 1] >> 31;
  a->w[0] <<= 1;
}

static void big_mul_small(big_t *a, uint32_t m) {
  uint64_t carry = 0;
  for (int i = 0; i < BIG_LIMBS; i++) {
    uint64_t p = (uint64_t)a->w[i] * m + carry;
    a->w[i] = (uint32_t)p;
    carry = p >> 32;
  }
}

/* floor(2^(bits - 1 + prec) / p), where bits is the bit length of p, by
 * restoring division: the remainder starts at 2^(bits - 1) <= p and doubles
 * prec times. The quotient lies in (2^(prec - 1), 2^prec) unless p = 1, so
 * prec may be 128 for p > 1. */
static u128 big_reciprocal(const big_t *p, int bits, int prec) {
  big_t r = {{0}};
  r.w[(bits - 1) / 32] = 1u << ((bits - 1) % 32);
  u128 q = 0;
  for (int step = 0; step <= prec; step++) {
    if (step) big_shl1(&r);
    q <<= 1;
    if (big_cmp(&r, p) >= 0) {
      big_sub(&r, p);
      q |= 1;
    }
  }
  return q;
}

/* floor(log10(2^e)) for 0 <= e <= 1650; floor(log10(5^e)) for e <= 2619 */
static int log10_pow2(int e) { return (int)(((uint32_t)e * 78913u) >> 18); }
static int log10_pow5(int e) { return (int)(((uint32_t)e * 732923u) >> 20); }

static void tables_init(void) {
  uint64_t window[FLOAT_POW5_COUNT], inverse[FLOAT_POW5_COUNT];
  big_t p = {{1}}; /* 5^i */
  for (int i = 0; i < POW5_COUNT; i++) {
    int bits = big_bits(&p);
    pow5_len[i] = bits;
    pow5_mul[i] = big_window(&p, bits - MUL_BITS);
    if (i < INV_COUNT) pow5_inv[i] = big_reciprocal(&p, bits, MUL_BITS) + 1;
    if (i < FLOAT_POW5_COUNT) {
      window[i] = (uint64_t)big_window(&p, bits - 64);          /* 5^i * 2^(64 - bits) */
      inverse[i] = (uint64_t)big_reciprocal(&p, bits, 64); /* 2^(bits + 63) / 5^i */
    }
    /* 10^-k for k = -i: 5^i * 2^(128 - bits) (times 2^-b * 2^(127 - b));
     * for k = i: 2^(bits + 127) / 5^i */
    if (i <= -DOUBLE_K_MIN) double_g[-i - DOUBLE_K_MIN] = big_window(&p, bits - 128) + 1;
    if (i > 0 && i <= DOUBLE_K_MAX) {
      double_g[i - DOUBLE_K_MIN] = big_reciprocal(&p, bits, 128) + 1;
      assert(double_g[i - DOUBLE_K_MIN] >> 127 == 1);
    }
    big_mul_small(&p, 5);
  }
  for (int field = 1; field < 2047; field++) {
    int q = field - 1023 - 52;
    int k = q >= 0 ? log10_pow2(q) : -log10_pow2(-q) - 1;
    int b = k <= 0 ? pow5_len[-k] - 1 - k : -pow5_len[k] - k;
    int h = q + b + 1;
    assert(k >= DOUBLE_K_MIN && k <= DOUBLE_K_MAX && h >= 0 && h + 55 <= 64);
    double_scale[field].k = (int16_t)k;
    double_scale[field].h = (uint8_t)h;
  }
  for (int field = 1; field < 255; field++) {
    int q = field - 127 - 23;
    int k = q >= 0 ? log10_pow2(q) : -log10_pow2(-q) - 1;
    int b; /* 2^b <= 10^-k < 2^(b + 1) */
    uint64_t g;
    if (k <= 0) { /* 10^-k = 5^-k * 2^-k */
      b = pow5_len[-k] - 1 - k;
      g = window[-k] + 1;
    } else { /* 10^-k = 2^-k / 5^k */
      b = -pow5_len[k] - k;
      g = inverse[k] + 1;
    }
    int h = q + b + 32;
    assert(-k < FLOAT_POW5_COUNT && k < FLOAT_POW5_COUNT && g >> 63 == 1);
    assert(h >= 0 && h + 26 <= 64);
    float_scale[field] = (float_scale_t){.g = g, .k = (int16_t)k, .h = (uint8_t)h};
  }
  __atomic_store_n(&tables_ready, 1, __ATOMIC_RELEASE);
}

/* pthread_once is a call into libc; the flag makes the usual case one load. */
static void tables_need(void) {
  if (!__atomic_load_n(&tables_ready, __ATOMIC_ACQUIRE))
    pthread_once(&tables_once, tables_init);
}

/* ---- Ryu ------------------------------------------------------------------ */

/* Printing and parsing run once per number: their helpers are inlined so
 * that the values stay in registers. */
#define HOT static inline __attribute__((always_inline))

/* floor(m * mul / 2^j), j >= 64; m < 2^58 so nothing overflows. */
static uint64_t mul_shift(uint64_t m, u128 mul, int j) {
  u128 lo = (u128)m * (uint64_t)mul;
  u128 hi = (u128)m * (uint64_t)(mul >> 64);
  return (uint64_t)((hi + (lo >> 64)) >> (j - 64));
}

static int pow5_factor(uint64_t v) {
  int n = 0;
  while (v != 0 && v % 5 == 0) {
    v /= 5;
    n++;
  }
  return n;
}
static int pow5_divides(uint64_t v, int q) { return q == 0 || pow5_factor(v) >= q; }
static int pow2_divides(uint64_t v, int q) {
  return q == 0 || (q < 64 && (v & ((1ull << q) - 1)) == 0);
}

/* The upper half of a * b. */
HOT uint64_t mul_high(uint64_t a, uint64_t b) { return (uint64_t)(((u128)a * b) >> 64); }

/* The last step of ryu(): vr, vp and vm are the value and the bounds of
 * its rounding interval scaled by 10^-e10 (floors; vp already lowered when
 * the upper bound is exact and excluded); vr_tz says vr is exact, vm_tz
 * that the lower bound is exact and included. Removes digits while the
 * interval still holds two candidates, rounds the last one to nearest,
 * ties to even, and returns it; adds the count removed to *exp10. */
HOT uint64_t shorten(uint64_t vr, uint64_t vp, uint64_t vm, int vr_tz,
                     int vm_tz, int *exp10) {
  int removed = 0, last = 0;
  if (!vm_tz && !vr_tz) { /* the common case: no exact bound, no tie */
    while (vp / 100 > vm / 100) { /* two digits at a time */
      last = (int)(vr % 100 / 10);
      vr /= 100;
      vp /= 100;
      vm /= 100;
      removed += 2;
    }
    while (vp / 10 > vm / 10) {
      last = (int)(vr % 10);
      vr /= 10;
      vp /= 10;
      vm /= 10;
      removed++;
    }
    *exp10 += removed;
    return vr + (vr == vm || last >= 5);
  }
  while (vp / 10 > vm / 10) {
    vm_tz &= vm % 10 == 0;
    vr_tz &= last == 0;
    last = (int)(vr % 10);
    vr /= 10;
    vp /= 10;
    vm /= 10;
    removed++;
  }
  if (vm_tz) /* the lower bound itself is shorter still */
    while (vm % 10 == 0) {
      vr_tz &= last == 0;
      last = (int)(vr % 10);
      vr /= 10;
      vp /= 10;
      vm /= 10;
      removed++;
    }
  if (vr_tz && last == 5 && vr % 2 == 0) last = 4; /* exact tie: to even */
  *exp10 += removed;
  return vr + ((vr == vm && !vm_tz) || last >= 5);
}

/* The shortest decimal in the rounding interval of m2 * 2^e2 (m2 the full
 * significand, e2 its binary exponent; lower_gap_half: the gap below is
 * half the gap above, at a binade boundary), and of those the nearest to
 * the value, ties to even. Returns the digits and writes the exponent of
 * the last digit. */
static uint64_t ryu(uint64_t m2, int e2, int lower_gap_half, int *exp10) {
  int accept = (m2 & 1) == 0; /* a tie rounds to the even significand */
  int mm_shift = !lower_gap_half;
  /* In quarter units: value 4 m2, interval (4 m2 - 1 - mm_shift, 4 m2 + 2). */
  uint64_t mv = 4 * m2, mp = mv + 2, mm = mv - 1 - (uint64_t)mm_shift;
  e2 -= 2;
  uint64_t vr, vp, vm;
  int vr_exact, vm_exact, vp_exact;
  if (e2 >= 0) {
    /* divide by 10^q: multiply by 2^e2 and by the inverse of 5^q */
    int q = log10_pow2(e2) - (e2 > 3);
    int j = -e2 + q + MUL_BITS + pow5_len[q] - 1;
    *exp10 = q;
    vr = mul_shift(mv, pow5_inv[q], j);
    vp = mul_shift(mp, pow5_inv[q], j);
    vm = mul_shift(mm, pow5_inv[q], j);
    /* x * 2^e2 / 10^q is an integer iff 5^q divides x (e2 >= q) */
    vr_exact = pow5_divides(mv, q);
    vm_exact = pow5_divides(mm, q);
    vp_exact = pow5_divides(mp, q);
  } else {
    /* x * 2^e2 / 10^(e2 + q) = x * 5^i / 2^q with i = -e2 - q */
    int q = log10_pow5(-e2) - (-e2 > 1);
    int i = -e2 - q;
    int j = q - (pow5_len[i] - MUL_BITS);
    *exp10 = q + e2;
    vr = mul_shift(mv, pow5_mul[i], j);
    vp = mul_shift(mp, pow5_mul[i], j);
    vm = mul_shift(mm, pow5_mul[i], j);
    vr_exact = pow2_divides(mv, q);
    vm_exact = pow2_divides(mm, q);
    vp_exact = pow2_divides(mp, q);
  }
  if (!accept && vp_exact) vp--; /* the upper bound is out */
  return shorten(vr, vp, vm, vr_exact, accept && vm_exact, exp10);
}

/* ---- layout -------------------------------------------------------------- */

/* The text of a decimal, JSON number syntax in Python repr style:
 * positional notation when its exponent exp (of the first digit) is in
 * [-4, 16) ("3", "0.0001", "1234.5"), otherwise scientific with a signed
 * exponent of at least two digits ("1e-05", "3.4028235e+38"); trailing
 * zero digits dropped. The digits come left aligned with zeros added, 9
 * for a float (d9 in [10^8, 10^9)) and 17 for a double, and are kept in
 * registers: the first, c, and the ones after it in 64-bit words as ASCII
 * (the first in the lowest byte), stored 8 bytes at a time and overwritten
 * in place. Every store stays within FMT_NUMBER_MAX bytes of buf; what
 * lies past the NUL is garbage. */

/* 10^k for k <= 17 */
static const uint64_t pow10_64[18] = {
    1ull,           10ull,           100ull,           1000ull,           10000ull,
    100000ull,      1000000ull,      10000000ull,      100000000ull,      1000000000ull,
    10000000000ull, 100000000000ull, 1000000000000ull, 10000000000000ull, 100000000000000ull,
    1000000000000000ull, 10000000000000000ull, 100000000000000000ull};

/* The number of decimal digits of 0 < v < 10^17: t or t + 1, t from its
 * bit length. */
HOT int decimal_length(uint64_t v) {
  int t = (64 - __builtin_clzll(v)) * 1233 >> 12;
  return t + (v >= pow10_64[t]);
}

/* The 8 digits of v - c * 10^8 < 10^8 (c: v's digit before them, or 0)
 * as byte values, in order from the lowest byte: they split into 4 + 4, each
 * half into 2 + 2, each pair into 1 + 1, all lanes at once (x / 100 =
 * x * 10486 >> 20 for x < 10^4, x / 10 = x * 103 >> 10 for x < 100). Each
 * step puts the quotient q of a lane x in its lower half and the
 * remainder in its upper half: (x << h) - q * (d << h) + q. */
HOT uint64_t digits8(uint32_t v, uint32_t c) {
  uint32_t q = v / 10000;
  uint64_t x = ((uint64_t)v << 32) - q * ((10000ull << 32) - 1) - c * 10000;
  uint64_t q2 = (x * 10486 >> 20) & 0x0000007F0000007Full;
  x = (x << 16) - q2 * ((100ull << 16) - 1);
  uint64_t q1 = (x * 103 >> 10) & 0x000F000F000F000Full;
  return (x << 8) - q1 * ((10ull << 8) - 1);
}

/* Stores v's 8 bytes at p, the lowest first. */
HOT void store8(char *p, uint64_t v) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  v = __builtin_bswap64(v);
#endif
  memcpy(p, &v, sizeof v);
}

#define ASCII_ZEROS 0x3030303030303030ull /* '0' in all 8 bytes */

/* "e+dd" / "e-dd" / "e+ddd" at p; returns the length. */
HOT int exponent_text(int e, char *p) {
  p[0] = 'e';
  p[1] = e < 0 ? '-' : '+';
  e = e < 0 ? -e : e;
  int hundreds = e >= 100;
  p[2] = (char)('0' + e / 100);
  p[2 + hundreds] = (char)('0' + e / 10 % 10);
  p[3 + hundreds] = (char)('0' + e % 10);
  return 4 + hundreds;
}

/* The text of (neg ? -1 : 1) * d9 * 10^(exp - 8), d9 in [10^8, 10^9);
 * returns its length. */
HOT int layout_float(int neg, uint32_t d9, int exp, char *buf) {
  uint32_t c = d9 / 100000000u;
  uint64_t w = digits8(d9, c);
  /* the digits up to the last non-zero one: 1, or 2 + the index in w of
   * its last non-zero byte (bits 4..7 of every byte are 0) */
  int n = (67 - __builtin_clzll(w << 4 | 1)) / 8 + 1;
  c += '0';
  w |= ASCII_ZEROS;

  char *p = buf;
  *p = '-';
  p += neg;
  int k = exp + 1; /* digits before the point */
  if (k >= -3 && k < n) {
    /* "0." -k zeros c w (small), or c w with '.' over w's digit k - 1
     * and w stored again one place on, from that digit */
    int small = k <= 0;
    int at = small ? 2 - k : 0; /* where c goes */
    int dot = small ? 1 : k;    /* where '.' goes */
    memcpy(p, "0.000000", 8);
    p[at] = (char)c;
    store8(p + at + 1, w);
    p[dot] = '.';
    store8(p + at + dot + 1 - small, w >> (small ? 0 : 8 * (k - 1))); /* small: at + 1 */
    p += at + n + 1 - small;
  } else if (k >= n && k <= 16) { /* an integer: the digits, then zeros */
    *p = (char)c;
    store8(p + 1, w);
    store8(p + 9, ASCII_ZEROS);
    p += k;
  } else { /* c '.' w e+XX */
    p[0] = (char)c;
    p[1] = '.';
    store8(p + 2, w);
    p += n > 1 ? n + 1 : 1;
    p += exponent_text(exp, p);
  }
  *p = '\0';
  return (int)(p - buf);
}

/* The text of (neg ? -1 : 1) * d17 * 10^(exp - 16), d17 in [10^16,
 * 10^17); returns its length. */
HOT int layout_double(int neg, uint64_t d17, int exp, char *buf) {
  uint64_t c = d17 / 10000000000000000ull, rest = d17 - c * 10000000000000000ull;
  uint32_t hi = (uint32_t)(rest / 100000000u);
  uint64_t w1 = digits8(hi, 0), w2 = digits8((uint32_t)(rest - hi * 100000000ull), 0);
  /* the digits up to the last non-zero one (as in layout_float) */
  int n = w2 ? 9 + (67 - __builtin_clzll(w2 << 4 | 1)) / 8
             : (67 - __builtin_clzll(w1 << 4 | 1)) / 8 + 1;
  c += '0';
  w1 |= ASCII_ZEROS;
  w2 |= ASCII_ZEROS;

  char *p = buf;
  *p = '-';
  p += neg;
  int k = exp + 1; /* digits before the point */
  if (k >= -3 && k <= 0) { /* "0.", -k zeros, the digits */
    memcpy(p, "0.000000", 8);
    p[2 - k] = (char)c;
    store8(p + 3 - k, w1);
    store8(p + 11 - k, w2);
    p += 2 - k + n;
  } else if (k > 0 && k < n) { /* the digits with '.' after k of them */
    *p = (char)c;
    store8(p + 1, w1);
    store8(p + 9, w2);
    p[k] = '.';
    u128 after = ((u128)w2 << 64 | w1) >> (8 * (k - 1)); /* digits k.. */
    store8(p + k + 1, (uint64_t)after);
    if (k <= 8) store8(p + k + 9, (uint64_t)(after >> 64));
    p += n + 1;
  } else if (k >= n && k <= 16) { /* an integer: the digits, then zeros */
    *p = (char)c;
    store8(p + 1, w1);
    store8(p + 9, w2);
    p += k;
  } else { /* c '.' w1 w2 e+XX */
    p[0] = (char)c;
    p[1] = '.';
    store8(p + 2, w1);
    store8(p + 10, w2);
    p += n > 1 ? n + 1 : 1;
    p += exponent_text(exp, p);
  }
  *p = '\0';
  return (int)(p - buf);
}

/* ---- parsing: the scan ---------------------------------------------------- */

#define W_DIGITS 19          /* significant digits that always fit a uint64_t */
#define EXP_CAP 1000000000000000 /* exponents stop growing here: a text would
                                  * need 10^15 digits to bring such a number
                                  * back into range */

/* A JSON number's text as w * 10^q (up to the dropped digits). */
typedef struct {
  uint64_t w;    /* the first W_DIGITS significant digits, or all of them */
  int64_t q;     /* the exponent of w's last digit */
  int neg;       /* a leading '-' */
  int truncated; /* a non-zero digit after the first W_DIGITS was dropped:
                  * the value lies strictly between w and w + 1 (x 10^q) */
} scan_t;

static int is_digit(char c) { return (unsigned char)(c - '0') < 10; }

/* Up to eight digits at once (SWAR): the 8 bytes at p as a little-endian
 * word (the first byte lowest), how many of them lead as ASCII digits, and
 * the value of those. */
#define BYTES_OF(b) (0x0101010101010101ull * (b))
static uint64_t load8(const char *p) {
  uint64_t v;
  memcpy(&v, p, sizeof v);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  v = __builtin_bswap64(v);
#endif
  return v;
}

/* A digit byte is 0x30..0x39: high nibble 3, and still 3 after adding 6.
 * A carry out of a non-digit byte (>= 0xFA) can only spoil the bytes
 * after it, which the count never looks at. */
HOT int leading_digits8(uint64_t v) {
  uint64_t bad = ((v & BYTES_OF(0xF0)) ^ BYTES_OF(0x30)) |
                 (((v + BYTES_OF(0x06)) & BYTES_OF(0xF0)) ^ BYTES_OF(0x30));
  return bad ? __builtin_ctzll(bad) / 8 : 8;
}

/* The value of the first n (1..8) digit bytes of v. */
HOT uint32_t leading_value8(uint64_t v, int n) {
  /* Digits to values (a borrow out of a later non-digit byte only spoils
   * the bytes after it), then those n to the top: the bytes shifted in
   * below them are leading zeros. */
  v = (v - BYTES_OF('0')) << (8 * (8 - n));
  /* byte 2j becomes 10 * d(2j) + d(2j+1) (< 100: no carry) */
  v = v * 10 + (v >> 8);
  /* the four pairs p0..p3 sit in bytes 0, 2, 4, 6; multiplying p0 and p2
   * (bytes 0, 4) by 100 + 10^6 * 2^32 and p1 and p3 by 1 + 10^4 * 2^32
   * adds up p0 * 10^6 + p1 * 10^4 + p2 * 100 + p3 in the upper half. */
  uint64_t p02 = v & 0x000000FF000000FFull;
  uint64_t p13 = (v >> 16) & 0x000000FF000000FFull;
  return (uint32_t)((p02 * (100 + (1000000ull << 32)) +
                     p13 * (1 + (10000ull << 32))) >> 32);
}

/* Appends the digits at p to w, up to W_DIGITS in all (*nd counts them),
 * and returns the end of the run of digits; *extra counts the digits past
 * W_DIGITS and *truncated says whether one of them was not 0. */
HOT const char *scan_digits(const char *p, const char *end, uint64_t *w,
                            int *nd, int64_t *extra, int *truncated) {
  static const uint32_t pow10_u32[9] = {
      1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000};
  while (end - p >= 8) {
    uint64_t v = load8(p);
    int n = leading_digits8(v);
    if (n == 8 && *nd <= W_DIGITS - 8) { /* a whole word of digits */
      *w = *w * 100000000 + leading_value8(v, 8);
      *nd += 8;
      p += 8;
    } else if (n < 8 && *nd + n <= W_DIGITS) { /* the run ends here */
      if (n > 0) *w = *w * pow10_u32[n] + leading_value8(v, n);
      *nd += n;
      return p + n;
    } else {
      break;
    }
  }
  for (; *nd < W_DIGITS && p < end && is_digit(*p); p++, ++*nd)
    *w = *w * 10 + (uint64_t)(*p - '0');
  const char *rest = p;
  for (; p < end && is_digit(*p); p++) *truncated |= *p != '0';
  *extra += p - rest;
  return p;
}

/* The length of the longest prefix of s[0, len) in JSON number syntax (0 if
 * none), and its w, q, sign. */
HOT size_t scan_number(const char *s, size_t len, scan_t *out) {
  const char *p = s, *end = s + len;
  uint64_t w = 0;
  int64_t q = 0, extra = 0;
  int nd = 0, truncated = 0; /* nd: significant digits kept in w */
  int neg = p < end && *p == '-';
  p += neg;
  if (p == end || !is_digit(*p)) return 0;
  if (*p == '0') /* a leading 0 stands alone: "01" is "0", then "1" */
    p++;
  else
    p = scan_digits(p, end, &w, &nd, &extra, &truncated);
  q += extra; /* integer digits past W_DIGITS scale w up */
  if (end - p >= 2 && *p == '.' && is_digit(p[1])) {
    p++;
    if (nd == 0) { /* "0.000123": zeros before the first significant digit */
      const char *zeros = p;
      while (p < end && *p == '0') p++;
      q -= p - zeros;
    }
    int before = nd;
    p = scan_digits(p, end, &w, &nd, &extra, &truncated);
    q -= nd - before; /* fraction digits kept in w scale it down (those
                       * dropped do not: extra is not used again) */
  }
  if (end - p >= 2 && (*p | 0x20) == 'e') { /* 'e' or 'E' */
    const char *e = p + 1;
    int exp_neg = 0;
    if (*e == '+' || *e == '-') exp_neg = *e++ == '-';
    if (e < end && is_digit(*e)) {
      int64_t x = 0;
      for (; e < end && is_digit(*e); e++)
        if (x < EXP_CAP) x = x * 10 + (*e - '0');
      q += exp_neg ? -x : x;
      p = e;
    }
  }
  *out = (scan_t){.w = w, .q = q, .neg = neg, .truncated = truncated};
  return (size_t)(p - s);
}

/* ---- parsing: Eisel-Lemire ------------------------------------------------ */

#define POW10_MIN (-342) /* 10^19 * 10^-343 is below half of 2^-1074 */
#define POW10_MAX 308    /* 10^309 is above DBL_MAX */
#define POW10_COUNT (POW10_MAX - POW10_MIN + 1)
#define EXACT_Q_MAX 27 /* 5^27 < 2^64: its 128-bit form ends in 64 zero bits */

/* 5^q = pow5_128[q - POW10_MIN] * 2^pow5_128_exp2[q - POW10_MIN], the
 * significand scaled into [2^127, 2^128): for q >= 0 the floor (exact for
 * q <= 55), for q < 0 the ceiling of 2^(127 + bits(5^-q)) / 5^-q. */
static u128 pow5_128[POW10_COUNT];
static int16_t pow5_128_exp2[POW10_COUNT];
static pthread_once_t parse_tables_once = PTHREAD_ONCE_INIT;

static void parse_tables_init(void) {
  big_t p = {{1}}; /* 5^k */
  for (int k = 0; k <= -POW10_MIN; k++) {
    int bits = big_bits(&p);
    if (k <= POW10_MAX) {
      pow5_128[k - POW10_MIN] = big_window(&p, bits - 128);
      pow5_128_exp2[k - POW10_MIN] = (int16_t)(bits - 128);
    }
    if (k > 0) { /* never exact: the ceiling is the floor + 1 */
      u128 r = big_reciprocal(&p, bits, 128) + 1;
      assert(r >> 127 == 1);
      pow5_128[-k - POW10_MIN] = r;
      pow5_128_exp2[-k - POW10_MIN] = (int16_t)(-127 - bits);
    }
    big_mul_small(&p, 5);
  }
}

/* An IEEE binary format, and where w * 10^q (w < 2^64) surely rounds to 0
 * (q < min_q) or to infinity (q > max_q, since w >= 1). */
typedef struct {
  int sig_bits;  /* significand bits with the hidden one: 53, 24 */
  int bias;      /* exponent bias: 1023, 127 */
  int max_field; /* the exponent field of infinity: 2047, 255 */
  int min_q, max_q;
} binary_format_t;

static const binary_format_t binary64 = {53, 1023, 2047, POW10_MIN, POW10_MAX};
/* 10^19 * 10^-65 is below half of 2^-149; 10^39 is above FLT_MAX */
static const binary_format_t binary32 = {24, 127, 255, -64, 38};

/* Rounds X = w * 10^q, scaled so that it lies in [2^126, 2^128), to the
 * format, from an approximation g with g - 1 < X < g + hi (X = g when
 * exact). field126 is the biased exponent of the value X = 2^126 stands
 * for. Stores the bits (no sign) and returns 1 when every X in that range
 * rounds the same, that is when no midpoint between two neighbours in the
 * format lies in it (they are at least 2^72 apart in this scale, and g
 * shows which one is near); returns 0 otherwise. */
HOT int round_product(u128 g, u128 hi, int exact, int field126,
                      const binary_format_t *f, uint64_t *bits) {
  const uint64_t inf_bits = (uint64_t)f->max_field << (f->sig_bits - 1);
  int upper = (int)(g >> 127);  /* g's leading bit is 127 or 126 */
  int field = field126 + upper; /* the biased exponent of g's leading bit */
  if (field >= f->max_field) {
    *bits = inf_bits;
    return 1;
  }
  /* The round bit: just below sig_bits bits from the leading one, or for a
   * subnormal, the same absolute position as for the smallest normal. */
  int round_pos = 126 + upper - f->sig_bits + (field < 1 ? 1 - field : 0);
  if (round_pos >= 128) { /* below half the smallest subnormal */
    if (round_pos == 128 && g + hi < g) return 0; /* X may reach it */
    *bits = 0;
    return 1;
  }
  /* round_pos >= 126 - 53 is in g's upper word: 64-bit shifts do */
  int shift = round_pos - 64;
  uint64_t g_hi = (uint64_t)(g >> 64);
  uint64_t kept = g_hi >> shift; /* significand, round bit */
  u128 unit = (u128)(1ull << shift) << 64;
  u128 rest = (u128)(g_hi & ((1ull << shift) - 1)) << 64 | (uint64_t)g;
  uint64_t m = kept >> 1;
  if (!(kept & 1)) {
    if (rest + hi > unit) return 0; /* X may reach the midpoint above */
  } else {
    if (rest == 0 && !exact) return 0; /* a tie, or just below or above? */
    if (rest != 0 || (m & 1)) m++;     /* to nearest, ties to even */
  }
  /* The hidden bit of m adds 1 to the field; a carry out of the
   * significand moves to the next binade, possibly infinity. */
  uint64_t v = ((uint64_t)(field < 1 ? 0 : field - 1) << (f->sig_bits - 1)) + m;
  *bits = v < inf_bits ? v : inf_bits;
  return 1;
}

/* Eisel-Lemire: the bits (no sign) of w * 10^q rounded to the format, from
 * the product of w (normalized to wn in [2^63, 2^64)) and 5^q's 128-bit
 * form t: first with t's upper 64 bits alone, then if need be all of t.
 * For q in [0, EXACT_Q_MAX] the first product is exact. Otherwise t is
 * within 1 of the exact scaled 5^q, so wn * t is within wn < 2^64 of the
 * exact product, and its upper 128 bits g have g - 1 < X < g + 2 (X >= g
 * for q >= 0, where t is a floor; X < g + 1 for q < 0, a ceiling); with
 * t's upper half alone, X < g + 2^64 + 1. For q < 0, an integer X (an
 * exact value, or a tie) thus equals the full g; X is an integer when 5^-q
 * divides w. (For q > EXACT_Q_MAX there are no ties: the 54 or 25 bits of
 * a midpoint cannot hold 5^q.) Returns 0 when the rounding stays
 * undecided: a text within about 2^-70 of a midpoint (rare), or a tie with
 * q < 0 past 19 digits. */
HOT int eisel_lemire(uint64_t w, int64_t q, const binary_format_t *f,
                     uint64_t *bits) {
  if (w == 0 || q < f->min_q) {
    *bits = 0;
    return 1;
  }
  if (q > f->max_q) {
    *bits = (uint64_t)f->max_field << (f->sig_bits - 1);
    return 1;
  }
  int lz = __builtin_clzll(w);
  uint64_t wn = w << lz;
  u128 t = pow5_128[q - POW10_MIN];
  /* w * 10^q = wn * 2^-lz * t * 2^exp2(5^q) * 2^q, and the upper 128 bits
   * of wn * t (from 2^64 on) start at 2^126: 2^(126 + 64) in wn * t. */
  int field126 = 190 + pow5_128_exp2[q - POW10_MIN] + (int)q - lz + f->bias;
  u128 g = (u128)wn * (uint64_t)(t >> 64);
  if (q >= 0 && q <= EXACT_Q_MAX)
    return round_product(g, 0, 1, field126, f, bits);
  if (round_product(g, ((u128)1 << 64) + 1, 0, field126, f, bits)) return 1;
  g += ((u128)wn * (uint64_t)t) >> 64; /* now the exact upper 128 bits */
  int exact = q < 0 && q >= -EXACT_Q_MAX && pow5_divides(w, (int)-q);
  return round_product(g, exact ? 0 : 2, exact, field126, f, bits);
}

/* w * 10^q, or when digits were dropped, (w, w + 1) * 10^q: both ends must
 * round the same. Returns 0 when the exact path is needed. */
static int decimal_to_binary(const scan_t *d, const binary_format_t *f,
                             uint64_t *bits) {
  uint64_t up;
  if (!eisel_lemire(d->w, d->q, f, bits)) return 0;
  return !d->truncated || (eisel_lemire(d->w + 1, d->q, f, &up) && up == *bits);
}

/* ---- parsing: the fast and the exact path --------------------------------- */

/* Clinger's fast path: w and 10^q (|q| <= 22: 5^22 < 2^53) are exact
 * doubles, so one multiply or divide rounds once, correctly. Needs double
 * arithmetic in double (not x87 extended) and the default rounding mode. */
#if FLT_EVAL_METHOD == 0
#define CLINGER_W_MAX (1ull << 53)
#else
#define CLINGER_W_MAX 0ull /* never */
#endif
HOT int clinger(const scan_t *d, double *out) {
  static const double exact_pow10[23] = {
      1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
      1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
  if (d->truncated || d->w > CLINGER_W_MAX || d->q < -22 || d->q > 22) return 0;
  double x = (double)d->w;
  *out = d->q < 0 ? x / exact_pow10[-d->q] : x * exact_pow10[d->q];
  return 1;
}

/* The exact path: strtod / strtof on the number's digits rewritten as
 * "[-]DDD...De<exp>", which has no decimal point for a locale to misread.
 * A text with more than SLOW_DIGITS significant digits keeps the first
 * SLOW_DIGITS and, if a non-zero one was dropped, a final '1': both values
 * lie strictly inside the same SLOW_DIGITS-digit step, which holds no
 * midpoint between two doubles (those have at most 767 significant
 * digits), so both round the same. */
#define SLOW_DIGITS 800
#define SLOW_TEXT (SLOW_DIGITS + 32) /* sign, sticky digit, "e", exponent */

static void slow_text(const char *s, size_t n, char *buf) {
  const char *p = s, *end = s + n;
  char *o = buf;
  int64_t exp10 = 0;
  int kept = 0, sticky = 0, after_point = 0;
  if (*p == '-') *o++ = *p++;
  for (; p < end && (*p | 0x20) != 'e'; p++) {
    if (*p == '.') {
      after_point = 1;
    } else if (kept == 0 && *p == '0') {
      exp10 -= after_point;
    } else if (kept < SLOW_DIGITS) {
      *o++ = *p;
      kept++;
      exp10 -= after_point;
    } else {
      sticky |= *p != '0';
      exp10 += !after_point;
    }
  }
  if (kept == 0) *o++ = '0';
  if (sticky) {
    *o++ = '1';
    exp10--;
  }
  if (p < end) { /* the validated exponent: e[+-]digits */
    p++;
    int exp_neg = *p == '-';
    if (*p == '+' || *p == '-') p++;
    int64_t x = 0;
    for (; p < end; p++)
      if (x < EXP_CAP) x = x * 10 + (*p - '0');
    exp10 += exp_neg ? -x : x;
  }
  *o++ = 'e';
  if (exp10 < 0) *o++ = '-';
  uint64_t u = exp10 < 0 ? 0 - (uint64_t)exp10 : (uint64_t)exp10;
  char digits[24];
  int nd = 0;
  do {
    digits[nd++] = (char)('0' + u % 10);
    u /= 10;
  } while (u);
  while (nd) *o++ = digits[--nd];
  *o = '\0';
}

static double slow_double(const char *s, size_t n) {
  char buf[SLOW_TEXT];
  slow_text(s, n, buf);
  int saved = errno; /* ERANGE on overflow and underflow */
  double v = strtod(buf, NULL);
  errno = saved;
  return v;
}

static float slow_float(const char *s, size_t n) {
  char buf[SLOW_TEXT];
  slow_text(s, n, buf);
  int saved = errno;
  float v = strtof(buf, NULL);
  errno = saved;
  return v;
}

/* ---- public -------------------------------------------------------------- */

/* Zero and non-finite values, shared by both widths; -1 if v is neither. */
static int special(double v, char *buf) {
  const char *s = NULL;
  if (isnan(v))
    s = "NaN";
  else if (isinf(v))
    s = v < 0 ? "-Infinity" : "Infinity";
  else if (v == 0)
    s = signbit(v) ? "-0" : "0";
  if (!s) return -1;
  size_t n = strlen(s);
  memcpy(buf, s, n + 1);
  return (int)n;
}

/* fmt_float() for the floats its shortcut leaves: those at a binade
 * boundary and the subnormals, by the generic ryu(). */
__attribute__((noinline)) static int fmt_float_general(uint32_t bits, char *buf) {
  uint32_t field = bits >> 23 & 0xFFu, m = bits & 0x7FFFFFu;
  tables_need();
  int exp10;
  uint64_t digits;
  if (field == 0)
    digits = ryu(m, 1 - 127 - 23, 0, &exp10);
  else
    digits = ryu(m | 1u << 23, (int)field - 127 - 23, m == 0 && field > 1, &exp10);
  int t = decimal_length(digits);
  assert(t <= 9); /* every float has a decimal of 9 digits */
  return layout_float((int)(bits >> 31), (uint32_t)(digits * pow10_64[9 - t]),
                      exp10 + t - 1, buf);
}

/* x * 2^q * 10^-k * 4 (x = 4c, 4c - 2, 4c + 2), truncated to an integer
 * and made odd when inexact (round to odd): compared with multiples of 2
 * it says exactly whether x * 2^q * 10^-k lies below, on or above them.
 * The truncation happens at bit 31 of the upper half of g * (x << h). */
HOT uint64_t scaled_to_odd(uint64_t g, uint64_t x) {
  uint64_t upper = mul_high(g, x);
  return upper >> 31 | ((upper & 0xFFFFFFFFu) + 0xFFFFFFFFu) >> 32;
}

/* The shortcut, for normal floats c * 2^q off binade boundaries (their
 * rounding interval is symmetric, [c - 1/2, c + 1/2] * 2^q, bounds
 * included when c is even): the Schubfach way (Giulietti, "The Schubfach
 * way to render doubles", 2020), with k chosen so that the interval is 1
 * to 10 units of 10^k wide. Then it holds at most one multiple of 10
 * units, the only candidate with fewer digits than s = floor(v / 10^k)
 * (it holds any shorter decimal in the interval): if it holds one, that is
 * the result (its trailing zeros are dropped later); otherwise the integer
 * nearest to v / 10^k, ties to even, which the interval (centred on v, at
 * least 1 unit wide) holds. That is the shortest decimal in the interval
 * and of those the nearest, ties to even: what ryu() finds. */
int fmt_float(float f, char *buf) {
  uint32_t bits;
  memcpy(&bits, &f, sizeof bits);
  if ((bits & 0x7FFFFFFFu) - 1 >= 0x7F7FFFFFu) /* zero, infinite or NaN */
    return special(f, buf);
  uint32_t field = bits >> 23 & 0xFFu, m = bits & 0x7FFFFFu;
  if (m == 0 || field == 0) return fmt_float_general(bits, buf);
  tables_need();
  const float_scale_t *sc = &float_scale[field];
  uint64_t c = m | 1u << 23, odd = c & 1; /* odd: the bounds are excluded */
  uint64_t vb = scaled_to_odd(sc->g, c << 2 << sc->h);
  uint64_t vbl = scaled_to_odd(sc->g, ((c << 2) - 2) << sc->h);
  uint64_t vbr = scaled_to_odd(sc->g, ((c << 2) + 2) << sc->h);
  uint64_t s = vb >> 2, s10 = s / 10 * 10; /* s < 10 c < 2^28 */
  uint64_t digits;
  if (vbl + odd <= s10 << 2)
    digits = s10;
  else if (((s10 + 10) << 2) + odd <= vbr)
    digits = s10 + 10;
  else /* the nearest: up from s at 3/4, or at 1/2 when s is odd */
    digits = (vb + 1 + (s & 1)) >> 2;
  int t = decimal_length(digits);
  return layout_float((int)(bits >> 31), (uint32_t)(digits * pow10_64[9 - t]),
                      sc->k + t - 1, buf);
}

/* fmt_double() for the doubles its shortcut leaves: those at a binade
 * boundary and the subnormals, by ryu(). */
__attribute__((noinline)) static int fmt_double_general(uint64_t bits, char *buf) {
  uint32_t field = (uint32_t)(bits >> 52 & 0x7FFu);
  uint64_t m = bits & 0xFFFFFFFFFFFFFull;
  tables_need();
  int exp10;
  uint64_t digits;
  if (field == 0)
    digits = ryu(m, 1 - 1023 - 52, 0, &exp10);
  else
    digits = ryu(m | 1ull << 52, (int)field - 1023 - 52, m == 0 && field > 1, &exp10);
  int t = decimal_length(digits);
  assert(t <= 17); /* every double has a decimal of 17 digits */
  return layout_double((int)(bits >> 63), digits * pow10_64[17 - t], exp10 + t - 1, buf);
}

/* scaled_to_odd() with a 128-bit g: the upper 64 bits of the 192-bit
 * g * x, made odd when the 64 below them are not all 0 (the lowest 64 are
 * not computed). */
HOT uint64_t scaled_to_odd128(u128 g, uint64_t x) {
  u128 low = (u128)(uint64_t)g * x, high = (u128)(uint64_t)(g >> 64) * x;
  u128 mid = (u128)(uint64_t)high + (uint64_t)(low >> 64);
  uint64_t upper = (uint64_t)(high >> 64) + (uint64_t)(mid >> 64);
  return upper | ((uint64_t)mid != 0);
}

/* fmt_float()'s shortcut for doubles c * 2^q (c of 53 bits), with g of
 * 128 bits: the same steps, the same result as ryu(). */
int fmt_double(double d, char *buf) {
  uint64_t bits;
  memcpy(&bits, &d, sizeof bits);
  if ((bits & 0x7FFFFFFFFFFFFFFFull) - 1 >= 0x7FEFFFFFFFFFFFFFull) /* 0, inf, NaN */
    return special(d, buf);
  uint32_t field = (uint32_t)(bits >> 52 & 0x7FFu);
  uint64_t m = bits & 0xFFFFFFFFFFFFFull;
  if (m == 0 || field == 0) return fmt_double_general(bits, buf);
  tables_need();
  int k = double_scale[field].k, h = double_scale[field].h;
  u128 g = double_g[k - DOUBLE_K_MIN];
  uint64_t c = m | 1ull << 52, odd = c & 1; /* odd: the bounds are excluded */
  uint64_t vb = scaled_to_odd128(g, c << 2 << h);
  uint64_t vbl = scaled_to_odd128(g, ((c << 2) - 2) << h);
  uint64_t vbr = scaled_to_odd128(g, ((c << 2) + 2) << h);
  uint64_t s = vb >> 2, s10 = s / 10 * 10; /* s < 10 c < 2^57 */
  uint64_t digits;
  if (vbl + odd <= s10 << 2)
    digits = s10;
  else if (((s10 + 10) << 2) + odd <= vbr)
    digits = s10 + 10;
  else
    digits = (vb + 1 + (s & 1)) >> 2;
  int t = decimal_length(digits);
  return layout_double((int)(bits >> 63), digits * pow10_64[17 - t], k + t - 1, buf);
}

int fmt_parse_nonfinite(const char *s, double *out) {
  double v;
  if (!s) return 0;
  if (strcmp(s, "NaN") == 0)
    v = NAN;
  else if (strcmp(s, "Infinity") == 0 || strcmp(s, "+Infinity") == 0)
    v = INFINITY;
  else if (strcmp(s, "-Infinity") == 0)
    v = -INFINITY;
  else
    return 0;
  if (out) *out = v;
  return 1;
}

size_t fmt_parse_double(const char *s, size_t len, double *out) {
  scan_t d;
  size_t n = scan_number(s, len, &d);
  if (n == 0) return 0;
  double v;
  uint64_t bits;
  if (clinger(&d, &v)) {
    *out = d.neg ? -v : v;
    return n;
  }
  pthread_once(&parse_tables_once, parse_tables_init);
  if (!decimal_to_binary(&d, &binary64, &bits)) {
    *out = slow_double(s, n);
    return n;
  }
  bits |= (uint64_t)d.neg << 63;
  memcpy(out, &bits, sizeof bits);
  return n;
}

size_t fmt_parse_float(const char *s, size_t len, float *out) {
  scan_t d;
  size_t n = scan_number(s, len, &d);
  if (n == 0) return 0;
  double v;
  uint64_t bits;
  /* Clinger's double is correctly rounded, so it serves unless rounding it
   * again could differ (Figueroa's theorem, 53 >= 2 * 24 + 2, makes every
   * w <= 2^24, |q| <= 10 safe; the check lets the others through too). */
  if (clinger(&d, &v) && fmt_float_from_double_exact(v)) {
    *out = (float)(d.neg ? -v : v);
    return n;
  }
  pthread_once(&parse_tables_once, parse_tables_init);
  if (!decimal_to_binary(&d, &binary32, &bits)) {
    *out = slow_float(s, n);
    return n;
  }
  uint32_t b32 = (uint32_t)bits | (uint32_t)d.neg << 31;
  memcpy(out, &b32, sizeof b32);
  return n;
}
