/* fmt.c -- printing exact number text: the shortest decimal that reads
 * back to the same float32 / float64 bits (fmt_float, fmt_double), on the
 * hot path of every JSON response. Parsing, the other direction, is in
 * fmt_parse.c; what both share (the bignum behind their tables, 128-bit
 * helpers) is in fmt_internal.h. */
#include "fmt.h"

#include <assert.h>
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fmt_internal.h"

/* fmt_float_list() has an AVX2 path for x86-64 CPUs that have it, picked
 * at the first use (as core/kern.c picks the kernels; NORM_SIMD=base keeps
 * the portable one). */
#if defined(__x86_64__) && defined(__GNUC__)
#define FMT_AVX2 1
#include <immintrin.h>
#define AVX2_FN __attribute__((target("avx2")))
/* and float_list_avx512's layout, where the CPU has AVX-512 BW, VL, CD
 * and VBMI2 (vpcompressb) and NORM_SIMD is neither base nor avx2 */
#define AVX512_FN \
  __attribute__((target("avx2,avx512f,avx512bw,avx512vl,avx512cd,avx512vbmi2")))
#endif

/* How: an exact Ryu-style generator (Adams, "Ryu: fast float-to-string
 * conversion", PLDI 2018), written here from the paper: the rounding
 * interval of the value is scaled by one power of ten with 125-bit
 * fixed-point multipliers (exact floors), digits are removed while the
 * interval still holds two candidates, and the last one is rounded to
 * nearest, ties to even. No snprintf, no locale. That is for the values
 * on binade boundaries and the subnormals; the others, nearly all, take a
 * shortcut with the same result (Giulietti's Schubfach: 64-bit multipliers
 * for float, 128-bit for double, no loop), as number text is on the hot
 * path of JSON responses. The text is assembled in 64-bit registers.
 *
 * The multiplier tables (powers of five and their reciprocals) are
 * computed once, exactly, with fmt_internal.h's bignum (pthread_once).
 * bench/fmt_sweep.c checks all 2^32 float32 bit patterns (the shortcuts
 * were also checked against the plain Ryu path: the same text for all
 * 2^32 floats and for 10^8 random doubles), and bench/fmt_ab.c (make
 * fmt-ab) that a change leaves every list's text as it was. */

/* ---- the multiplier tables ----------------------------------------------- */

/* the precision of every multiplier (Ryu's bound for binary64) */
#define MUL_BITS 125
#define POW5_COUNT 326 /* 5^i for i < 326: e2 < 0, i = -e2 - q <= 325 */
#define INV_COUNT 292  /* 5^-q for q < 292: e2 >= 0, q <= 290 */

/* 5^i scaled to exactly MUL_BITS bits, floor; 5^-q as
 * floor(2^(bits(5^q) - 1 + MUL_BITS) / 5^q) + 1; the bit length of 5^i */
static fmt__u128 pow5_mul[POW5_COUNT];
static fmt__u128 pow5_inv[INV_COUNT];
static int pow5_len[POW5_COUNT];

/* fmt_float()'s scaling, one entry per exponent field of a normal float
 * c * 2^q (c the 24-bit significand): 10^-k for k = floor(log10(2^q)),
 * as g = floor(10^-k * 2^(63 - b)) + 1 in [2^63, 2^64) where
 * 2^b <= 10^-k < 2^(b + 1), and the shift h = q + b + 32 that makes the
 * upper half of g * (x << h) about x * 2^q * 10^-k * 2^31; and
 * g * (2 << h), the same scaling of half the rounding interval, as two
 * 64-bit halves. */
typedef struct {
  uint64_t g, half_lo, half_hi;
  int16_t k;
  uint8_t h;
} float_scale_t;
#define FLOAT_POW5_COUNT 46 /* |k| <= 45 */
static float_scale_t float_scale[256]; /* 0 and 255 unused: all 0 */

/* The same for double, c * 2^q with c of 53 bits: g = floor(10^-k *
 * 2^(127 - b)) + 1 in [2^127, 2^128), one per k, and per exponent field k
 * and the shift h = q + b + 1 that makes the upper 64 bits of the 192-bit
 * g * (x << h) about x * 2^q * 10^-k. */
#define DOUBLE_K_MIN (-324) /* k for the smallest normals, q = -1074 */
#define DOUBLE_K_MAX 292    /* and for the largest, q = 971 */
static fmt__u128 double_g[DOUBLE_K_MAX - DOUBLE_K_MIN + 1];
static struct {
  int16_t k;
  uint8_t h;
} double_scale[2047];

static pthread_once_t tables_once = PTHREAD_ONCE_INIT;
#ifdef FMT_AVX2
/* fmt_float_list() takes float_list_avx2() (1) or float_list_avx512() (2) */
static int list_simd;
#endif
static int tables_ready; /* set (release) once tables_init has run */

/* floor(log10(2^e)) for 0 <= e <= 1650; floor(log10(5^e)) for e <= 2619 */
static int log10_pow2(int e) { return (int)(((uint32_t)e * 78913u) >> 18); }
static int log10_pow5(int e) { return (int)(((uint32_t)e * 732923u) >> 20); }

static void tables_init(void) {
  uint64_t window[FLOAT_POW5_COUNT], inverse[FLOAT_POW5_COUNT];
  fmt__big_t p = {{1}}; /* 5^i */
  for (int i = 0; i < POW5_COUNT; i++) {
    int bits = fmt__big_bits(&p);
    pow5_len[i] = bits;
    pow5_mul[i] = fmt__big_window(&p, bits - MUL_BITS);
    if (i < INV_COUNT)
      pow5_inv[i] = fmt__big_reciprocal(&p, bits, MUL_BITS) + 1;
    if (i < FLOAT_POW5_COUNT) {
      window[i] =
          (uint64_t)fmt__big_window(&p, bits - 64); /* 5^i * 2^(64 - bits) */
      inverse[i] =
          (uint64_t)fmt__big_reciprocal(&p, bits, 64); /* 2^(bits + 63) / 5^i */
    }
    /* 10^-k for k = -i: 5^i * 2^(128 - bits) (times 2^-b * 2^(127 - b));
     * for k = i: 2^(bits + 127) / 5^i */
    if (i <= -DOUBLE_K_MIN)
      double_g[-i - DOUBLE_K_MIN] = fmt__big_window(&p, bits - 128) + 1;
    if (i > 0 && i <= DOUBLE_K_MAX) {
      double_g[i - DOUBLE_K_MIN] = fmt__big_reciprocal(&p, bits, 128) + 1;
      assert(double_g[i - DOUBLE_K_MIN] >> 127 == 1);
    }
    fmt__big_mul_small(&p, 5);
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
    fmt__u128 half = (fmt__u128)g << (h + 1);
    float_scale[field] = (float_scale_t){.g = g,
                                         .half_lo = (uint64_t)half,
                                         .half_hi = (uint64_t)(half >> 64),
                                         .k = (int16_t)k,
                                         .h = (uint8_t)h};
  }
#ifdef FMT_AVX2
  __builtin_cpu_init();
  int cap = fmt__simd_cap();
  int avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512cd") &&
               __builtin_cpu_supports("avx512vbmi2");
  if (cap == 2 && avx512) list_simd = 2;
  else list_simd = cap >= 1 && __builtin_cpu_supports("avx2") ? 1 : 0;
#endif
  __atomic_store_n(&tables_ready, 1, __ATOMIC_RELEASE);
}

/* pthread_once is a call into libc; the flag makes the usual case one load. */
static void tables_need(void) {
  if (!__atomic_load_n(&tables_ready, __ATOMIC_ACQUIRE))
    pthread_once(&tables_once, tables_init);
}

/* ---- Ryu ----------------------------------------------------------------- */

/* floor(m * mul / 2^j), j >= 64; m < 2^58 so nothing overflows. */
static uint64_t mul_shift(uint64_t m, fmt__u128 mul, int j) {
  fmt__u128 lo = (fmt__u128)m * (uint64_t)mul;
  fmt__u128 hi = (fmt__u128)m * (uint64_t)(mul >> 64);
  return (uint64_t)((hi + (lo >> 64)) >> (j - 64));
}

static int pow2_divides(uint64_t v, int q) {
  return q == 0 || (q < 64 && (v & ((1ull << q) - 1)) == 0);
}

/* The last step of ryu(): vr, vp and vm are the value and the bounds of
 * its rounding interval scaled by 10^-e10 (floors; vp already lowered when
 * the upper bound is exact and excluded); vr_tz says vr is exact, vm_tz
 * that the lower bound is exact and included. Removes digits while the
 * interval still holds two candidates, rounds the last one to nearest,
 * ties to even, and returns it; adds the count removed to *exp10. */
FMT__HOT uint64_t shorten(uint64_t vr, uint64_t vp, uint64_t vm, int vr_tz,
                          int vm_tz, int *exp10) {
  int removed = 0, last = 0;
  if (!vm_tz && !vr_tz) {         /* the common case: no exact bound, no tie */
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
    vr_exact = fmt__pow5_divides(mv, q);
    vm_exact = fmt__pow5_divides(mm, q);
    vp_exact = fmt__pow5_divides(mp, q);
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
static const uint64_t pow10_64[18] = {1ull,
                                      10ull,
                                      100ull,
                                      1000ull,
                                      10000ull,
                                      100000ull,
                                      1000000ull,
                                      10000000ull,
                                      100000000ull,
                                      1000000000ull,
                                      10000000000ull,
                                      100000000000ull,
                                      1000000000000ull,
                                      10000000000000ull,
                                      100000000000000ull,
                                      1000000000000000ull,
                                      10000000000000000ull,
                                      100000000000000000ull};

/* The number of decimal digits of 0 < v < 10^17: t or t + 1, t from its
 * bit length. */
FMT__HOT int decimal_length(uint64_t v) {
  int t = (64 - __builtin_clzll(v)) * 1233 >> 12;
  return t + (v >= pow10_64[t]);
}

/* The 8 digits of v - c * 10^8 < 10^8 (c: v's digit before them, or 0)
 * as byte values, in order from the lowest byte: they split into 4 + 4, each
 * half into 2 + 2, each pair into 1 + 1, all lanes at once (x / 100 =
 * x * 10486 >> 20 for x < 10^4, x / 10 = x * 103 >> 10 for x < 100). Each
 * step puts the quotient q of a lane x in its lower half and the
 * remainder in its upper half: (x << h) - q * (d << h) + q. */
FMT__HOT uint64_t digits8(uint32_t v, uint32_t c) {
  uint32_t q = v / 10000;
  uint64_t x = ((uint64_t)v << 32) - q * ((10000ull << 32) - 1) - c * 10000;
  uint64_t q2 = (x * 10486 >> 20) & 0x0000007F0000007Full;
  x = (x << 16) - q2 * ((100ull << 16) - 1);
  uint64_t q1 = (x * 103 >> 10) & 0x000F000F000F000Full;
  return (x << 8) - q1 * ((10ull << 8) - 1);
}

/* Stores v's 8 bytes at p, the lowest first. */
FMT__HOT void store8(char *p, uint64_t v) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  v = __builtin_bswap64(v);
#endif
  memcpy(p, &v, sizeof v);
}

#define ASCII_ZEROS 0x3030303030303030ull /* '0' in all 8 bytes */
/* "0.000000" as store8() writes it */
#define ZEROS_AFTER_POINT (ASCII_ZEROS ^ (uint64_t)('0' ^ '.') << 8)

/* "e+dd" / "e-dd" / "e+ddd" at p; returns the length. */
FMT__HOT int exponent_text(int e, char *p) {
  p[0] = 'e';
  p[1] = e < 0 ? '-' : '+';
  e = e < 0 ? -e : e;
  int hundreds = e >= 100;
  p[2] = (char)('0' + e / 100);
  p[2 + hundreds] = (char)('0' + e / 10 % 10);
  p[3 + hundreds] = (char)('0' + e % 10);
  return 4 + hundreds;
}

/* The text of (neg ? -1 : 1) * c.w * 10^exp: c the first digit (1..9), w
 * the ones after it as byte values (the first in the lowest byte, zeros to
 * the end); returns its length. */
FMT__HOT int layout_float(int neg, uint32_t c, uint64_t w, int exp, char *buf) {
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
    /* three stores, the same for both forms: "0." -k zeros c w (small),
     * from "0.000000", c over its byte 2 - k and w after it; or c w with
     * '.' over w's digit k - 1 and w stored again one place on, from that
     * digit. GCC picks the form's values with a branch, which the data
     * decides (a third of values around 1 take the other form); selecting
     * them branch-free (masks, or a table by k) cost 12 to 21 more
     * instructions per number and was no faster in fmt_ab time. */
    int small = k <= 0;
    uint64_t head = small ? ZEROS_AFTER_POINT : c | w << 8;
    int at = small ? 2 - k : k;
    char mark = (char)(small ? c : '.');
    int shift = small ? 0 : 8 * (k - 1);
    store8(p, head);
    p[at] = mark;
    store8(p + at + 1, w >> shift);
    p += n + 1 + (small ? 1 - k : 0);
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
FMT__HOT int layout_double(int neg, uint64_t d17, int exp, char *buf) {
  uint64_t c = d17 / 10000000000000000ull,
           rest = d17 - c * 10000000000000000ull;
  uint32_t hi = (uint32_t)(rest / 100000000u);
  uint64_t w1 = digits8(hi, 0),
           w2 = digits8((uint32_t)(rest - hi * 100000000ull), 0);
  /* the digits up to the last non-zero one (as in layout_float) */
  int n = w2 ? 9 + (67 - __builtin_clzll(w2 << 4 | 1)) / 8
             : (67 - __builtin_clzll(w1 << 4 | 1)) / 8 + 1;
  c += '0';
  w1 |= ASCII_ZEROS;
  w2 |= ASCII_ZEROS;

  char *p = buf;
  *p = '-';
  p += neg;
  int k = exp + 1;         /* digits before the point */
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
    fmt__u128 after =
        ((fmt__u128)w2 << 64 | w1) >> (8 * (k - 1)); /* digits k.. */
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
__attribute__((noinline)) static int fmt_float_general(uint32_t bits,
                                                       char *buf) {
  uint32_t field = bits >> 23 & 0xFFu, m = bits & 0x7FFFFFu;
  tables_need();
  int exp10;
  uint64_t digits;
  if (field == 0)
    digits = ryu(m, 1 - 127 - 23, 0, &exp10);
  else
    digits =
        ryu(m | 1u << 23, (int)field - 127 - 23, m == 0 && field > 1, &exp10);
  int t = decimal_length(digits);
  assert(t <= 9); /* every float has a decimal of 9 digits */
  uint32_t d9 = (uint32_t)(digits * pow10_64[9 - t]), c = d9 / 100000000u;
  return layout_float((int)(bits >> 31), c, digits8(d9, c), exp10 + t - 1,
                      buf);
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
 * and of those the nearest, ties to even: what ryu() finds.
 *
 * The value and the two bounds, x * 2^q * 10^-k for x = 4c and 4c -+ 2 in
 * quarter units, are u, lower and upper: the upper halves of the exact
 * 128-bit products g * (x << h), units of 10^k at bit 33 (g is rounded up,
 * and its error stays below bit 31 of them). One multiply makes all three:
 * g * ((4c -+ 2) << h) = g * (4c << h) -+ g * (2 << h), and both terms are
 * below 2^128 ((4c + 2) << h < 2^64), so the sum and the difference, with
 * carry and borrow, are those products exactly. They are compared whole,
 * where the previous code (and Schubfach) compared their round to odd at
 * bit 31, vb, vbl and vbr, with multiples of 4: for an even multiple m of
 * 2^31, and r the round to odd of x at bit 31, r <= m / 2^31 exactly when
 * x <= m, and r < m / 2^31 exactly when x < m, so vbl + odd <= s10 << 2
 * is lower + odd <= s10 << 33, ((s10 + 10) << 2) + odd <= vbr is
 * ((s10 + 10) << 33) + odd <= upper, and the nearest, (vb + 1 + (s & 1)) >> 2,
 * is (u + 2^32 - 1 + (s & 1)) >> 33 (bits 0..32 of u past 2^32, or at 2^32
 * with s odd, carry into bit 33). bench/fmt_ab.c found the text of all 2^32
 * floats unchanged.
 *
 * The digits: v / 10^k lies in [c, 10 c) with c in [2^23, 2^24), so the
 * result has 7 to 9 digits, 9 only from 10^8 on; scaled to 9 digits, the
 * first and the 8 after it (digits8()) make the text. */
static const uint32_t to_nine_digits[3] = {100, 10, 1};

FMT__HOT int float_text(uint32_t bits, char *buf) {
  uint32_t field = bits >> 23 & 0xFFu;
  const float_scale_t *sc = &float_scale[field];
  uint64_t c = (bits & 0x7FFFFFu) | 1u << 23, odd = c & 1; /* odd: bounds out */
  fmt__u128 value = (fmt__u128)sc->g * (c << 2 << sc->h);
  uint64_t u = (uint64_t)(value >> 64), below = (uint64_t)value;
  /* the upper halves of value -+ half, with the borrow and the carry */
  uint64_t lower = u - sc->half_hi - (below < sc->half_lo),
           upper = u + sc->half_hi + (below + sc->half_lo < below);
  uint64_t s = u >> 33, s10 = (uint32_t)s / 10 * 10; /* s < 10 c < 2^28 */
  /* s10 if in, else s10 + 10 if in, else the nearest (up from s past
   * 1/2, or at 1/2 when s is odd) */
  uint64_t digits = (u + 0xFFFFFFFFu + (s & 1)) >> 33;
  /* masks, not branches: the data decides */
  uint64_t up = 0 - (uint64_t)(((s10 + 10) << 33) + odd <= upper);
  uint64_t down = 0 - (uint64_t)(lower + odd <= s10 << 33);
  digits = (digits & ~up) | ((s10 + 10) & up);
  digits = (digits & ~down) | (s10 & down);
  /* 7, 8 or 9 digits: scaled by 100, 10 or 1 */
  int longer = (digits >= 10000000u) + (digits >= 100000000u);
  uint32_t d9 = (uint32_t)digits * to_nine_digits[longer];
  uint32_t first = d9 / 100000000u;
  return layout_float((int)(bits >> 31), first, digits8(d9, first),
                      sc->k + 6 + longer, buf);
}

/* Whether a float's bits take float_text(): normal, off binade
 * boundaries. */
static int float_shortcut(uint32_t bits) {
  return (bits & 0x7FFFFFu) != 0 && ((bits >> 23 & 0xFFu) - 1) < 0xFEu;
}

int fmt_float(float f, char *buf) {
  uint32_t bits;
  memcpy(&bits, &f, sizeof bits);
  if ((bits & 0x7FFFFFFFu) - 1 >= 0x7F7FFFFFu) /* zero, infinite or NaN */
    return special(f, buf);
  if (!float_shortcut(bits)) return fmt_float_general(bits, buf);
  tables_need();
  return float_text(bits, buf);
}

/* fmt_double() for the doubles its shortcut leaves: those at a binade
 * boundary and the subnormals, by ryu(). */
__attribute__((noinline)) static int fmt_double_general(uint64_t bits,
                                                        char *buf) {
  uint32_t field = (uint32_t)(bits >> 52 & 0x7FFu);
  uint64_t m = bits & 0xFFFFFFFFFFFFFull;
  tables_need();
  int exp10;
  uint64_t digits;
  if (field == 0)
    digits = ryu(m, 1 - 1023 - 52, 0, &exp10);
  else
    digits = ryu(m | 1ull << 52, (int)field - 1023 - 52, m == 0 && field > 1,
                 &exp10);
  int t = decimal_length(digits);
  assert(t <= 17); /* every double has a decimal of 17 digits */
  return layout_double((int)(bits >> 63), digits * pow10_64[17 - t],
                       exp10 + t - 1, buf);
}

/* The scaled value for double_text(): the upper 64 bits of the 192-bit
 * g * x, made odd when the 64 below them are not all 0 (round to odd; the
 * lowest 64 are not computed). */
FMT__HOT uint64_t scaled_to_odd128(fmt__u128 g, uint64_t x) {
  fmt__u128 low = (fmt__u128)(uint64_t)g * x,
            high = (fmt__u128)(uint64_t)(g >> 64) * x;
  fmt__u128 mid = (fmt__u128)(uint64_t)high + (uint64_t)(low >> 64);
  uint64_t upper = (uint64_t)(high >> 64) + (uint64_t)(mid >> 64);
  return upper | ((uint64_t)mid != 0);
}

/* fmt_float()'s shortcut for doubles c * 2^q (c of 53 bits), with g of
 * 128 bits: the same steps, the same result as ryu(). */
FMT__HOT int double_text(uint64_t bits, char *buf) {
  uint32_t field = (uint32_t)(bits >> 52 & 0x7FFu);
  int k = double_scale[field].k, h = double_scale[field].h;
  fmt__u128 g = double_g[k - DOUBLE_K_MIN];
  uint64_t c = (bits & 0xFFFFFFFFFFFFFull) | 1ull << 52,
           odd = c & 1; /* odd: the bounds are excluded */
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
  return layout_double((int)(bits >> 63), digits * pow10_64[17 - t], k + t - 1,
                       buf);
}

/* Whether a double's bits take double_text(): normal, off binade
 * boundaries. */
static int double_shortcut(uint64_t bits) {
  return (bits & 0xFFFFFFFFFFFFFull) != 0 &&
         ((bits >> 52 & 0x7FFu) - 1) < 0x7FEu;
}

int fmt_double(double d, char *buf) {
  uint64_t bits;
  memcpy(&bits, &d, sizeof bits);
  if ((bits & 0x7FFFFFFFFFFFFFFFull) - 1 >=
      0x7FEFFFFFFFFFFFFFull) /* 0, inf, NaN */
    return special(d, buf);
  if (!double_shortcut(bits)) return fmt_double_general(bits, buf);
  tables_need();
  return double_text(bits, buf);
}

/* ---- JSON arrays --------------------------------------------------------- */

/* A JSON array element: fmt_float's / fmt_double's text, or a non-finite
 * value's spelling as a string. Out of line: the lists' rare values. */
__attribute__((noinline)) static int element_text(double v, int is_float,
                                                  char *out) {
  if (isfinite(v)) return is_float ? fmt_float((float)v, out) : fmt_double(v, out);
  const char *s = isnan(v) ? "\"NaN\"" : v > 0 ? "\"Infinity\"" : "\"-Infinity\"";
  size_t n = strlen(s);
  memcpy(out, s, n);
  return (int)n;
}

/* Elements [i, n) of fmt_float_list()'s list, at p (a ',' before all but
 * the very first); returns the end. The shortcut stays inline: a call per
 * number and its register saves were a fifth of the time of its text. */
FMT__HOT char *float_elements(const float *v, size_t i, size_t n, char *p) {
  for (; i < n; i++) {
    uint32_t bits;
    memcpy(&bits, &v[i], sizeof bits);
    *p = ',';
    p += i != 0;
    if (float_shortcut(bits))
      p += float_text(bits, p);
    else
      p += element_text(v[i], 1, p);
  }
  return p;
}

#ifdef FMT_AVX2
/* float_text()'s digits for 4 floats at once, in 64-bit lanes: for each,
 * the first digit, the 8 after it as digits8() makes them and the
 * exponent, what layout_float() takes; garbage for the floats that
 * float_text() does not take. The same steps, exactly: the three scaled
 * values from 32 x 32-bit products (below), the choice of digits with
 * 64-bit compares (all the values compared are below 2^62), the divisions
 * by constants by the multipliers GCC uses for float_text(), and digits8()
 * in 32- and 16-bit lanes (its lanes never carry into each other). */
typedef struct {
  uint64_t first[4], w[4], exp[4]; /* exp in the lower 32 bits */
} digits4_t;

/* floor(g * y * 2^(h + 1) / 2^64) for y < 2^25, from the two products
 * g_lo * y and g_hi * y of 32 bits each: with H = g_hi * y + (g_lo * y >>
 * 32) and m = 63 - h in [25, 63], g * y = H * 2^32 + (g_lo * y mod 2^32),
 * and the result H >> (m - 32) when m >= 32, else H << (32 - m) | (g_lo *
 * y mod 2^32) >> m. vpsllvq and vpsrlvq make 0 of shifts by 64 or more
 * (the negative ones too), so all three shifted terms or'ed together are
 * it. */
static inline __attribute__((always_inline)) AVX2_FN __m256i
scaled4(__m256i g, __m256i g_hi, __m256i y, __m256i left, __m256i right, __m256i low_right) {
  __m256i low = _mm256_mul_epu32(g, y), high = _mm256_mul_epu32(g_hi, y);
  __m256i h = _mm256_add_epi64(high, _mm256_srli_epi64(low, 32));
  low = _mm256_and_si256(low, _mm256_set1_epi64x(0xFFFFFFFF));
  return _mm256_or_si256(_mm256_or_si256(_mm256_sllv_epi64(h, left), _mm256_srlv_epi64(h, right)),
                         _mm256_srlv_epi64(low, low_right));
}

static AVX2_FN void float_digits4(const float *v, digits4_t *out) {
  const __m256i one = _mm256_set1_epi64x(1);
  __m128i bits32 = _mm_loadu_si128((const __m128i *)v);
  /* float_scale[] entries are 32 bytes: 4 units of 8 */
  __m128i at = _mm_slli_epi32(_mm_and_si128(_mm_srli_epi32(bits32, 23), _mm_set1_epi32(0xFF)), 2);
  __m256i g = _mm256_i32gather_epi64((const long long *)&float_scale[0].g, at, 8);
  __m256i kh = _mm256_i32gather_epi64(
      (const long long *)((const char *)float_scale + offsetof(float_scale_t, k)), at, 8);
  __m256i h = _mm256_and_si256(_mm256_srli_epi64(kh, 16), _mm256_set1_epi64x(0xFF));
  __m256i bits = _mm256_cvtepu32_epi64(bits32);
  __m256i c = _mm256_or_si256(_mm256_and_si256(bits, _mm256_set1_epi64x(0x7FFFFF)),
                              _mm256_set1_epi64x(1 << 23));
  __m256i odd = _mm256_and_si256(c, one), c2 = _mm256_add_epi64(c, c);
  /* the shifts of scaled4(): 32 - m = h - 31, m - 32 = 31 - h, m = 63 - h */
  __m256i left = _mm256_sub_epi64(h, _mm256_set1_epi64x(31)),
          right = _mm256_sub_epi64(_mm256_set1_epi64x(31), h),
          low_right = _mm256_sub_epi64(_mm256_set1_epi64x(63), h);
  __m256i g_hi = _mm256_srli_epi64(g, 32);
  /* float_text()'s u, lower and upper: g * (4c, 4c - 2, 4c + 2) * 2^h */
  __m256i u = scaled4(g, g_hi, c2, left, right, low_right);
  __m256i lower = scaled4(g, g_hi, _mm256_sub_epi64(c2, one), left, right, low_right);
  __m256i upper = scaled4(g, g_hi, _mm256_add_epi64(c2, one), left, right, low_right);
  __m256i s = _mm256_srli_epi64(u, 33);
  __m256i s10 = _mm256_srli_epi64(_mm256_mul_epu32(s, _mm256_set1_epi64x(0xCCCCCCCD)), 35);
  s10 = _mm256_add_epi64(_mm256_slli_epi64(s10, 3), _mm256_slli_epi64(s10, 1));
  __m256i t10 = _mm256_add_epi64(s10, _mm256_set1_epi64x(10));
  __m256i digits = _mm256_srli_epi64(
      _mm256_add_epi64(_mm256_add_epi64(u, _mm256_set1_epi64x(0xFFFFFFFF)), _mm256_and_si256(s, one)),
      33);
  __m256i up_out = _mm256_cmpgt_epi64(_mm256_add_epi64(_mm256_slli_epi64(t10, 33), odd), upper);
  digits = _mm256_blendv_epi8(t10, digits, up_out);
  __m256i down_out = _mm256_cmpgt_epi64(_mm256_add_epi64(lower, odd), _mm256_slli_epi64(s10, 33));
  digits = _mm256_blendv_epi8(s10, digits, down_out);
  /* 7, 8 or 9 digits: scaled by 100, 10 or 1 (the masks are -1) */
  __m256i ge7 = _mm256_cmpgt_epi64(digits, _mm256_set1_epi64x(9999999)),
          ge8 = _mm256_cmpgt_epi64(digits, _mm256_set1_epi64x(99999999));
  __m256i scale = _mm256_blendv_epi8(_mm256_set1_epi64x(100), _mm256_set1_epi64x(10), ge7);
  scale = _mm256_blendv_epi8(scale, one, ge8);
  __m256i d9 = _mm256_mul_epu32(digits, scale);
  /* sc->k + 6 + longer, in 32 bits: k sign-extended from kh's low 16 */
  __m256i k = _mm256_srai_epi32(_mm256_slli_epi32(kh, 16), 16);
  __m256i exp = _mm256_sub_epi32(_mm256_sub_epi32(_mm256_add_epi32(k, _mm256_set1_epi32(6)), ge7), ge8);
  __m256i first = _mm256_srli_epi64(_mm256_mul_epu32(d9, _mm256_set1_epi64x(0x55E63B89)), 57);
  /* digits8(d9, first) */
  __m256i q = _mm256_srli_epi64(_mm256_mul_epu32(d9, _mm256_set1_epi64x(0xD1B71759)), 45);
  __m256i tenk = _mm256_set1_epi64x(10000);
  __m256i x = _mm256_or_si256(
      _mm256_sub_epi64(q, _mm256_mul_epu32(first, tenk)),
      _mm256_slli_epi64(_mm256_sub_epi64(d9, _mm256_mul_epu32(q, tenk)), 32));
  __m256i q2 = _mm256_srli_epi32(_mm256_mullo_epi32(x, _mm256_set1_epi32(10486)), 20);
  x = _mm256_sub_epi32(_mm256_slli_epi32(x, 16), _mm256_mullo_epi32(q2, _mm256_set1_epi32((100 << 16) - 1)));
  __m256i q1 = _mm256_srli_epi16(_mm256_mullo_epi16(x, _mm256_set1_epi16(103)), 10);
  x = _mm256_sub_epi16(_mm256_slli_epi16(x, 8), _mm256_mullo_epi16(q1, _mm256_set1_epi16((10 << 8) - 1)));
  _mm256_storeu_si256((__m256i *)out->first, first);
  _mm256_storeu_si256((__m256i *)out->w, x);
  _mm256_storeu_si256((__m256i *)out->exp, exp);
}

/* float_digits4() for 8 floats at once in the 8 64-bit lanes of AVX-512,
 * the first 4 into d[0], the rest into d[1]: the same steps, line for line
 * (scaled8 as scaled4; the compares give masks, the blends take them; the
 * exponent's +1 for 8 and 9 digits a masked add in 64-bit lanes, whose
 * lower 32 bits are the 32-bit sums float_digits4() makes). One call does
 * the work of two with the same chain of dependent steps, on the two ports
 * of 512-bit integer work where two calls had three of 256. */
static inline __attribute__((always_inline)) AVX512_FN __m512i
scaled8(__m512i g, __m512i g_hi, __m512i y, __m512i left, __m512i right, __m512i low_right) {
  __m512i low = _mm512_mul_epu32(g, y), high = _mm512_mul_epu32(g_hi, y);
  __m512i h = _mm512_add_epi64(high, _mm512_srli_epi64(low, 32));
  low = _mm512_and_si512(low, _mm512_set1_epi64(0xFFFFFFFF));
  return _mm512_or_si512(_mm512_or_si512(_mm512_sllv_epi64(h, left), _mm512_srlv_epi64(h, right)),
                         _mm512_srlv_epi64(low, low_right));
}

static inline __attribute__((always_inline)) AVX512_FN void
float_digits8(const float *v, digits4_t out[2]) {
  const __m512i one = _mm512_set1_epi64(1);
  __m256i bits32 = _mm256_loadu_si256((const __m256i *)(const void *)v);
  __m256i at = _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(bits32, 23), _mm256_set1_epi32(0xFF)), 2);
  __m512i g = _mm512_i32gather_epi64(at, (const void *)&float_scale[0].g, 8);
  __m512i kh = _mm512_i32gather_epi64(
      at, (const void *)((const char *)float_scale + offsetof(float_scale_t, k)), 8);
  __m512i h = _mm512_and_si512(_mm512_srli_epi64(kh, 16), _mm512_set1_epi64(0xFF));
  __m512i bits = _mm512_cvtepu32_epi64(bits32);
  __m512i c = _mm512_or_si512(_mm512_and_si512(bits, _mm512_set1_epi64(0x7FFFFF)),
                              _mm512_set1_epi64(1 << 23));
  __m512i odd = _mm512_and_si512(c, one), c2 = _mm512_add_epi64(c, c);
  __m512i left = _mm512_sub_epi64(h, _mm512_set1_epi64(31)),
          right = _mm512_sub_epi64(_mm512_set1_epi64(31), h),
          low_right = _mm512_sub_epi64(_mm512_set1_epi64(63), h);
  __m512i g_hi = _mm512_srli_epi64(g, 32);
  __m512i u = scaled8(g, g_hi, c2, left, right, low_right);
  __m512i lower = scaled8(g, g_hi, _mm512_sub_epi64(c2, one), left, right, low_right);
  __m512i upper = scaled8(g, g_hi, _mm512_add_epi64(c2, one), left, right, low_right);
  __m512i s = _mm512_srli_epi64(u, 33);
  __m512i s10 = _mm512_srli_epi64(_mm512_mul_epu32(s, _mm512_set1_epi64(0xCCCCCCCD)), 35);
  s10 = _mm512_add_epi64(_mm512_slli_epi64(s10, 3), _mm512_slli_epi64(s10, 1));
  __m512i t10 = _mm512_add_epi64(s10, _mm512_set1_epi64(10));
  __m512i digits = _mm512_srli_epi64(
      _mm512_add_epi64(_mm512_add_epi64(u, _mm512_set1_epi64(0xFFFFFFFF)), _mm512_and_si512(s, one)),
      33);
  __mmask8 up_out = _mm512_cmpgt_epi64_mask(_mm512_add_epi64(_mm512_slli_epi64(t10, 33), odd), upper);
  digits = _mm512_mask_blend_epi64(up_out, t10, digits);
  __mmask8 down_out = _mm512_cmpgt_epi64_mask(_mm512_add_epi64(lower, odd), _mm512_slli_epi64(s10, 33));
  digits = _mm512_mask_blend_epi64(down_out, s10, digits);
  __mmask8 ge7 = _mm512_cmpgt_epi64_mask(digits, _mm512_set1_epi64(9999999)),
           ge8 = _mm512_cmpgt_epi64_mask(digits, _mm512_set1_epi64(99999999));
  __m512i scale = _mm512_mask_blend_epi64(ge7, _mm512_set1_epi64(100), _mm512_set1_epi64(10));
  scale = _mm512_mask_blend_epi64(ge8, scale, one);
  __m512i d9 = _mm512_mul_epu32(digits, scale);
  __m512i k = _mm512_srai_epi32(_mm512_slli_epi32(kh, 16), 16);
  __m512i exp = _mm512_add_epi32(k, _mm512_set1_epi32(6));
  exp = _mm512_mask_add_epi64(exp, ge7, exp, one);
  exp = _mm512_mask_add_epi64(exp, ge8, exp, one);
  __m512i first = _mm512_srli_epi64(_mm512_mul_epu32(d9, _mm512_set1_epi64(0x55E63B89)), 57);
  __m512i q = _mm512_srli_epi64(_mm512_mul_epu32(d9, _mm512_set1_epi64(0xD1B71759)), 45);
  __m512i tenk = _mm512_set1_epi64(10000);
  __m512i x = _mm512_or_si512(
      _mm512_sub_epi64(q, _mm512_mul_epu32(first, tenk)),
      _mm512_slli_epi64(_mm512_sub_epi64(d9, _mm512_mul_epu32(q, tenk)), 32));
  __m512i q2 = _mm512_srli_epi32(_mm512_mullo_epi32(x, _mm512_set1_epi32(10486)), 20);
  x = _mm512_sub_epi32(_mm512_slli_epi32(x, 16), _mm512_mullo_epi32(q2, _mm512_set1_epi32((100 << 16) - 1)));
  __m512i q1 = _mm512_srli_epi16(_mm512_mullo_epi16(x, _mm512_set1_epi16(103)), 10);
  x = _mm512_sub_epi16(_mm512_slli_epi16(x, 8), _mm512_mullo_epi16(q1, _mm512_set1_epi16((10 << 8) - 1)));
  _mm256_storeu_si256((__m256i *)(void *)out[0].first, _mm512_castsi512_si256(first));
  _mm256_storeu_si256((__m256i *)(void *)out[1].first, _mm512_extracti64x4_epi64(first, 1));
  _mm256_storeu_si256((__m256i *)(void *)out[0].w, _mm512_castsi512_si256(x));
  _mm256_storeu_si256((__m256i *)(void *)out[1].w, _mm512_extracti64x4_epi64(x, 1));
  _mm256_storeu_si256((__m256i *)(void *)out[0].exp, _mm512_castsi512_si256(exp));
  _mm256_storeu_si256((__m256i *)(void *)out[1].exp, _mm512_extracti64x4_epi64(exp, 1));
}

/* fmt_float_list() with the digits of 4 floats at a time from
 * float_digits4(), the text of each from layout_float(): byte for byte
 * the same list (bench/fmt_ab.c checks all 2^32 floats), in about half the
 * time on N(0,1) values. */
/* float_elements() for v[i, i + 4), d their float_digits4(), at p. */
static inline __attribute__((always_inline)) char *digits_elements(const digits4_t *d,
                                                                   const float *v, size_t i,
                                                                   char *p) {
  for (int j = 0; j < 4; j++) {
    uint32_t bits;
    memcpy(&bits, &v[i + j], sizeof bits);
    *p = ',';
    p += i + j != 0;
    if (float_shortcut(bits))
      p += layout_float((int)(bits >> 31), (uint32_t)d->first[j], d->w[j], (int32_t)d->exp[j], p);
    else
      p += element_text(v[i + j], 1, p);
  }
  return p;
}

static AVX2_FN size_t float_list_avx2(const float *v, size_t n, char *out) {
  char *p = out;
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    digits4_t d;
    float_digits4(v + i, &d);
    p = digits_elements(&d, v, i, p);
  }
  return (size_t)(float_elements(v, i, n, p) - out); /* the last 0 to 3 */
}

/* layout_float() for the 4 numbers of d, one in each 128-bit lane of the
 * result: each's text with the ',' before it, in its lane's first bytes
 * (*lens: how many, a bit per byte of the 64), for numbers whose k (the
 * digits before the point, exp + 1) is in [-3, 9], which layout_float()
 * writes as "0." -k zeros and the digits (k <= 0), the digits with '.'
 * after k of them (k < n, the count of digits up to the last non-zero
 * one), or the k digits of an integer (k >= n): one byte shuffle per lane
 * from its alphabet ',' '-' '0' '.' and the 9 digits, no branch. A text
 * is at most 16 bytes: ",-0.000" and 9 digits. */
static inline __attribute__((always_inline)) AVX512_FN __m512i
layout4_avx512(const digits4_t *d, const float *v, __mmask64 *lens) {
  __m256i c = _mm256_loadu_si256((const __m256i *)(const void *)d->first);
  __m256i w = _mm256_loadu_si256((const __m256i *)(const void *)d->w);
  __m256i exp = _mm256_loadu_si256((const __m256i *)(const void *)d->exp);
  __m256i neg = _mm256_srli_epi64(
      _mm256_cvtepu32_epi64(_mm_loadu_si128((const __m128i *)(const void *)v)), 31);
  /* layout_float()'s n: 1, or 2 + the index of w's last non-zero byte */
  __m256i n = _mm256_add_epi64(
      _mm256_srli_epi64(_mm256_sub_epi64(_mm256_set1_epi64x(67),
                                         _mm256_lzcnt_epi64(_mm256_or_si256(
                                             _mm256_slli_epi64(w, 4), _mm256_set1_epi64x(1)))),
                        3),
      _mm256_set1_epi64x(1));
  __m256i k = _mm256_add_epi64(_mm256_srai_epi64(_mm256_slli_epi64(exp, 32), 32),
                               _mm256_set1_epi64x(1));
  /* the text's length after the ',' and sign: 2 - k + n, k, or n + 1 */
  __m256i len = _mm256_mask_blend_epi64(
      _mm256_cmpgt_epi64_mask(k, _mm256_setzero_si256()),
      _mm256_sub_epi64(_mm256_add_epi64(_mm256_set1_epi64x(2), n), k),
      _mm256_mask_blend_epi64(_mm256_cmpge_epi64_mask(k, n),
                              _mm256_add_epi64(n, _mm256_set1_epi64x(1)), k));
  __m256i total = _mm256_add_epi64(_mm256_add_epi64(len, neg), _mm256_set1_epi64x(1));
  /* k, neg and the length in bytes 0, 1, 2 of each number's lane, then
   * each over its 128-bit lane's 16 bytes */
  __m256i meta = _mm256_or_si256(
      _mm256_and_si256(k, _mm256_set1_epi64x(0xFF)),
      _mm256_or_si256(_mm256_slli_epi64(neg, 8), _mm256_slli_epi64(total, 16)));
  __m512i lanes = _mm512_permutexvar_epi64(_mm512_set_epi64(3, 3, 2, 2, 1, 1, 0, 0),
                                           _mm512_castsi256_si512(meta));
  __m512i kb = _mm512_shuffle_epi8(lanes, _mm512_set1_epi8(0));
  __m512i negb = _mm512_shuffle_epi8(lanes, _mm512_set1_epi8(1));
  __m512i totalb = _mm512_shuffle_epi8(lanes, _mm512_set1_epi8(2));
  /* the alphabet: ',' '-' '0' '.' in bytes 0..3, the digits in 4..12 */
  __m256i ascii_w = _mm256_or_si256(w, _mm256_set1_epi64x((long long)ASCII_ZEROS));
  __m256i lo = _mm256_or_si256(
      _mm256_or_si256(_mm256_set1_epi64x(0x2E302D2C),
                      _mm256_slli_epi64(_mm256_add_epi64(c, _mm256_set1_epi64x('0')), 32)),
      _mm256_slli_epi64(ascii_w, 40));
  __m256i hi = _mm256_srli_epi64(ascii_w, 24);
  __m512i alphabet = _mm512_permutex2var_epi64(_mm512_castsi256_si512(lo),
                                               _mm512_set_epi64(11, 3, 10, 2, 9, 1, 8, 0),
                                               _mm512_castsi256_si512(hi));
  /* byte j of a lane, b = j - 1 - neg its place in the number's text */
  const __m512i iota = _mm512_set4_epi32(0x0F0E0D0C, 0x0B0A0908, 0x07060504, 0x03020100);
  const __m512i one = _mm512_set1_epi8(1), two = _mm512_set1_epi8(2);
  __m512i b = _mm512_sub_epi8(_mm512_sub_epi8(iota, one), negb);
  /* k >= 1: digit b (4 + b) before the point, '.' at b = k, digit b - 1 after */
  __m512i at_pos = _mm512_add_epi8(b, _mm512_set1_epi8(3));
  at_pos = _mm512_mask_add_epi8(at_pos, _mm512_cmplt_epi8_mask(b, kb), at_pos, one);
  at_pos = _mm512_mask_mov_epi8(at_pos, _mm512_cmpeq_epi8_mask(b, kb), _mm512_set1_epi8(3));
  /* k <= 0: '0' '.' (b + 2 for b < 2), -k zeros, then digit b - 2 + k */
  __m512i bk = _mm512_add_epi8(b, kb);
  __m512i at_small = _mm512_add_epi8(bk, two);
  at_small = _mm512_mask_mov_epi8(at_small, _mm512_cmplt_epi8_mask(bk, two), two);
  at_small = _mm512_mask_mov_epi8(at_small, _mm512_cmplt_epi8_mask(b, two), _mm512_add_epi8(b, two));
  __m512i at = _mm512_mask_blend_epi8(_mm512_cmpgt_epi8_mask(kb, _mm512_setzero_si512()),
                                      at_small, at_pos);
  /* the ',' in byte 0, the '-' in byte 1 of a negative number's lane */
  const __mmask64 byte0 = 0x0001000100010001ull;
  at = _mm512_mask_mov_epi8(at, byte0, _mm512_setzero_si512());
  at = _mm512_mask_mov_epi8(at, _mm512_test_epi8_mask(negb, negb) & (byte0 << 1), one);
  *lens = _mm512_cmplt_epi8_mask(iota, totalb);
  return _mm512_shuffle_epi8(alphabet, at);
}

/* float_list_avx2() with 8 numbers at a time laid out by
 * layout4_avx512() where all 8 are float_text()'s with k in [-3, 9] (all
 * but ~0.1% of 8 N(0,1) values), their texts packed together with
 * vpcompressb: no branch per number (layout_float()'s choice of form is
 * mispredicted on about a third of N(0,1) values). Byte for byte the same
 * list (bench/fmt_ab.c). The 64-byte stores reach at most 128 bytes past
 * the start of 8 numbers, within their 8 * FMT_ELEMENT_MAX of room. */
static AVX512_FN size_t float_list_avx512(const float *v, size_t n, char *out) {
  char *p = out;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    digits4_t d[2];
    float_digits8(v + i, d);
    /* float_shortcut() and k in [-3, 9] (exp + 4 in [0, 12]) for all 8 */
    __m256i bits = _mm256_loadu_si256((const __m256i *)(const void *)(v + i));
    __m256i field = _mm256_and_si256(_mm256_srli_epi32(bits, 23), _mm256_set1_epi32(0xFF));
    __mmask8 usual =
        _mm256_test_epi32_mask(bits, _mm256_set1_epi32(0x7FFFFF)) &
        _mm256_cmplt_epu32_mask(_mm256_sub_epi32(field, _mm256_set1_epi32(1)),
                                _mm256_set1_epi32(0xFE));
    __m512i exps = _mm512_inserti64x4(
        _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(const void *)d[0].exp)),
        _mm256_loadu_si256((const __m256i *)(const void *)d[1].exp), 1);
    __mmask16 in_range = _mm512_cmple_epu32_mask(_mm512_add_epi32(exps, _mm512_set1_epi32(4)),
                                                 _mm512_set1_epi32(12));
    if (usual != 0xFF || (in_range & 0x5555) != 0x5555) {
      p = digits_elements(&d[0], v, i, p);
      p = digits_elements(&d[1], v, i + 4, p);
      continue;
    }
    for (int half = 0; half < 2; half++) {
      __mmask64 lens;
      __m512i text = layout4_avx512(&d[half], v + i + 4 * half, &lens);
      if (i == 0 && half == 0) lens &= ~1ull; /* the list's first number: no ',' */
      _mm512_storeu_si512((void *)p, _mm512_maskz_compress_epi8(lens, text));
      p += __builtin_popcountll(lens);
    }
  }
  return (size_t)(float_elements(v, i, n, p) - out); /* the last 0 to 7 */
}
#endif

/* The tables are checked once per list. */
size_t fmt_float_list(const float *v, size_t n, char *out) {
  tables_need();
#ifdef FMT_AVX2
  if (list_simd == 2) return float_list_avx512(v, n, out);
  if (list_simd == 1) return float_list_avx2(v, n, out);
#endif
  return (size_t)(float_elements(v, 0, n, out) - out);
}

size_t fmt_double_list(const double *v, size_t n, char *out) {
  tables_need();
  char *p = out;
  for (size_t i = 0; i < n; i++) {
    uint64_t bits;
    memcpy(&bits, &v[i], sizeof bits);
    *p = ',';
    p += i != 0;
    if (double_shortcut(bits))
      p += double_text(bits, p);
    else
      p += element_text(v[i], 0, p);
  }
  return (size_t)(p - out);
}
