/* fmt.c -- shortest round-trip decimal text for float32 / float64, and the
 * non-finite spellings. The digits come from an exact Ryu-style generator
 * (Adams, "Ryu: fast float-to-string conversion", PLDI 2018), written here
 * from the paper: the rounding interval of the value is scaled by one
 * power of ten with 125-bit fixed-point multipliers (exact floors), digits
 * are removed while the interval still holds two candidates, and the last
 * one is rounded to nearest, ties to even. No strtod, no snprintf, no
 * locale; the multiplier tables are computed once, exactly, with a small
 * bignum (pthread_once). bench/fmt_sweep.c checks all 2^32 float32 bit
 * patterns. */
#include "fmt.h"

#include <assert.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#define FLOAT_MAX_DIGITS 9   /* every float round-trips with 9 digits */
#define DOUBLE_MAX_DIGITS 17 /* every double with 17 */

/* A finite non-zero decimal: neg ? -1 : 1 times d[0].d[1]...d[n-1] x 10^exp,
 * with d[0] != 0 and each d[i] an ASCII digit. */
typedef struct {
  int neg;
  int n;
  int exp;
  char d[DOUBLE_MAX_DIGITS + 4];
} decimal_t;

/* ---- the multiplier tables ------------------------------------------------ */

__extension__ typedef unsigned __int128 u128;

#define MUL_BITS 125   /* precision of every multiplier (Ryu's bound for binary64) */
#define POW5_COUNT 326 /* 5^i for i < 326: e2 < 0, i = -e2 - q <= 325 */
#define INV_COUNT 292  /* 5^-q for q < 292: e2 >= 0, q <= 290 */

static u128 pow5_mul[POW5_COUNT]; /* 5^i scaled to exactly MUL_BITS bits, floor */
static u128 pow5_inv[INV_COUNT];  /* floor(2^(bits(5^q) - 1 + MUL_BITS) / 5^q) + 1 */
static int pow5_len[POW5_COUNT];  /* bit length of 5^i */
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

/* Unsigned bignum, 32-bit limbs, little-endian; 5^325 has 755 bits. */
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

static void tables_init(void) {
  big_t p = {{1}}; /* 5^i */
  for (int i = 0; i < POW5_COUNT; i++) {
    int bits = big_bits(&p);
    pow5_len[i] = bits;
    pow5_mul[i] = big_window(&p, bits - MUL_BITS);
    if (i < INV_COUNT) {
      /* q = floor(2^(bits - 1 + MUL_BITS) / 5^i) by restoring division:
       * the remainder starts at 2^(bits - 1) <= 5^i and doubles MUL_BITS
       * times. */
      big_t r = {{0}};
      r.w[(bits - 1) / 32] = 1u << ((bits - 1) % 32);
      u128 q = 0;
      for (int step = 0; step <= MUL_BITS; step++) {
        if (step) big_shl1(&r);
        q <<= 1;
        if (big_cmp(&r, &p) >= 0) {
          big_sub(&r, &p);
          q |= 1;
        }
      }
      pow5_inv[i] = q + 1;
    }
    big_mul_small(&p, 5);
  }
}

/* ---- Ryu ------------------------------------------------------------------ */

/* floor(log10(2^e)) for 0 <= e <= 1650; floor(log10(5^e)) for e <= 2619 */
static int log10_pow2(int e) { return (int)(((uint32_t)e * 78913u) >> 18); }
static int log10_pow5(int e) { return (int)(((uint32_t)e * 732923u) >> 20); }

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

/* The shortest decimal in the rounding interval of m2 * 2^e2 (m2 the full
 * significand, e2 its binary exponent; lower_gap_half: the gap below is
 * half the gap above, at a binade boundary), and of those the nearest to
 * the value, ties to even. Writes digits and the exponent of the last
 * digit. */
static void ryu(uint64_t m2, int e2, int lower_gap_half, uint64_t *digits,
                int *exp10) {
  int accept = (m2 & 1) == 0; /* a tie rounds to the even significand */
  int mm_shift = !lower_gap_half;
  /* In quarter units: value 4 m2, interval (4 m2 - 1 - mm_shift, 4 m2 + 2). */
  uint64_t mv = 4 * m2, mp = mv + 2, mm = mv - 1 - (uint64_t)mm_shift;
  e2 -= 2;
  uint64_t vr, vp, vm;
  int e10, vr_exact, vm_exact, vp_exact;
  if (e2 >= 0) {
    /* divide by 10^q: multiply by 2^e2 and by the inverse of 5^q */
    int q = log10_pow2(e2) - (e2 > 3);
    int j = -e2 + q + MUL_BITS + pow5_len[q] - 1;
    e10 = q;
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
    e10 = q + e2;
    vr = mul_shift(mv, pow5_mul[i], j);
    vp = mul_shift(mp, pow5_mul[i], j);
    vm = mul_shift(mm, pow5_mul[i], j);
    vr_exact = pow2_divides(mv, q);
    vm_exact = pow2_divides(mm, q);
    vp_exact = pow2_divides(mp, q);
  }
  int vr_tz = vr_exact;           /* digits removed from vr so far are 0 */
  int vm_tz = accept && vm_exact; /* the lower bound is in and exact */
  if (!accept && vp_exact) vp--;  /* the upper bound is out */

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
    *digits = vr + (vr == vm || last >= 5);
    *exp10 = e10 + removed;
    return;
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
  *digits = vr + ((vr == vm && !vm_tz) || last >= 5);
  *exp10 = e10 + removed;
}

/* The decimal of ryu()'s digits. */
static void to_decimal(int neg, uint64_t digits, int exp10, decimal_t *dec) {
  static const char pairs[201] =
      "00010203040506070809101112131415161718192021222324252627282930313233343536"
      "37383940414243444546474849505152535455565758596061626364656667686970717273"
      "7475767778798081828384858687888990919293949596979899";
  static const uint64_t pow10[19] = {
      1ull, 10ull, 100ull, 1000ull, 10000ull, 100000ull, 1000000ull,
      10000000ull, 100000000ull, 1000000000ull, 10000000000ull,
      100000000000ull, 1000000000000ull, 10000000000000ull,
      100000000000000ull, 1000000000000000ull, 10000000000000000ull,
      100000000000000000ull, 1000000000000000000ull};
  /* digits has t or t + 1 decimal digits, t from its bit length */
  int t = (int)(((64 - __builtin_clzll(digits | 1)) * 1233) >> 12);
  int n = t + (digits >= pow10[t]); /* digits < 10^17: t <= 17 */
  /* Two digits at a time from the end; the digits are split in halves of
   * at most 8 first so that the two halves' divisions run side by side. */
  char *p = dec->d + n;
  uint32_t parts[3];
  int nparts = 0;
  while (digits >= 100000000u) {
    parts[nparts++] = (uint32_t)(digits % 100000000u);
    digits /= 100000000u;
  }
  for (int k = 0; k < nparts; k++) { /* full 8-digit groups, last first */
    uint32_t v = parts[k];
    for (int i = 0; i < 4; i++) {
      unsigned r = v % 100;
      v /= 100;
      *--p = pairs[2 * r + 1];
      *--p = pairs[2 * r];
    }
  }
  uint32_t v = (uint32_t)digits; /* the leading 1 to 8 digits */
  while (v >= 100) {
    unsigned r = v % 100;
    v /= 100;
    *--p = pairs[2 * r + 1];
    *--p = pairs[2 * r];
  }
  if (v >= 10) {
    *--p = pairs[2 * v + 1];
    *--p = pairs[2 * v];
  } else {
    *--p = (char)('0' + v);
  }
  dec->neg = neg;
  dec->n = n;
  dec->exp = exp10 + n - 1;
}

/* ---- layout -------------------------------------------------------------- */

/* Writes dec as JSON number text, Python repr style: positional notation
 * when -4 <= exp < 16 ("3", "0.0001", "1234.5"), otherwise scientific with
 * a signed exponent of at least two digits ("1e-05", "3.4028235e+38").
 * Trailing zero digits are dropped. Returns the length. */
static int layout(const decimal_t *dec, char *buf) {
  int n = dec->n;
  while (n > 1 && dec->d[n - 1] == '0') n--;
  char *p = buf;
  if (dec->neg) *p++ = '-';
  if (dec->exp >= -4 && dec->exp < 16) {
    if (dec->exp < 0) {
      *p++ = '0';
      *p++ = '.';
      for (int i = -1; i > dec->exp; i--) *p++ = '0';
      memcpy(p, dec->d, (size_t)n);
      p += n;
    } else {
      for (int i = 0; i <= dec->exp; i++) *p++ = i < n ? dec->d[i] : '0';
      if (n > dec->exp + 1) {
        *p++ = '.';
        memcpy(p, dec->d + dec->exp + 1, (size_t)(n - dec->exp - 1));
        p += n - dec->exp - 1;
      }
    }
  } else {
    *p++ = dec->d[0];
    if (n > 1) {
      *p++ = '.';
      memcpy(p, dec->d + 1, (size_t)(n - 1));
      p += n - 1;
    }
    int e = dec->exp < 0 ? -dec->exp : dec->exp;
    *p++ = 'e';
    *p++ = dec->exp < 0 ? '-' : '+';
    if (e >= 100) *p++ = (char)('0' + e / 100);
    *p++ = (char)('0' + e / 10 % 10);
    *p++ = (char)('0' + e % 10);
  }
  *p = '\0';
  assert(p - buf < FMT_NUMBER_MAX);
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

int fmt_float(float f, char *buf) {
  uint32_t bits;
  memcpy(&bits, &f, sizeof bits);
  uint32_t e = bits >> 23 & 0xFFu, m = bits & 0x7FFFFFu;
  if (e == 0xFF || (e == 0 && m == 0)) return special(f, buf);
  pthread_once(&tables_once, tables_init);
  uint64_t digits;
  int exp10;
  if (e == 0) /* subnormal */
    ryu(m, 1 - 127 - 23, 0, &digits, &exp10);
  else
    ryu(m | 1u << 23, (int)e - 127 - 23, m == 0 && e > 1, &digits, &exp10);
  decimal_t dec;
  to_decimal(bits >> 31, digits, exp10, &dec);
  return layout(&dec, buf);
}

int fmt_double(double d, char *buf) {
  uint64_t bits;
  memcpy(&bits, &d, sizeof bits);
  uint32_t e = (uint32_t)(bits >> 52 & 0x7FFu);
  uint64_t m = bits & 0xFFFFFFFFFFFFFull;
  if (e == 0x7FF || (e == 0 && m == 0)) return special(d, buf);
  pthread_once(&tables_once, tables_init);
  uint64_t digits;
  int exp10;
  if (e == 0)
    ryu(m, 1 - 1023 - 52, 0, &digits, &exp10);
  else
    ryu(m | 1ull << 52, (int)e - 1023 - 52, m == 0 && e > 1, &digits, &exp10);
  decimal_t dec;
  to_decimal((int)(bits >> 63), digits, exp10, &dec);
  return layout(&dec, buf);
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
