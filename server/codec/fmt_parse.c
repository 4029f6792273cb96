/* fmt_parse.c -- parsing exact number text: a JSON number's text to the
 * correctly rounded float64 / float32, bit for bit what strtod / strtof
 * give (fmt_parse_double, fmt_parse_float), to the correctly rounded
 * float16 / bfloat16 (fmt_parse_f16, fmt_parse_bf16), and the non-finite
 * spellings (fmt_parse_nonfinite). Printing, the other direction, is in fmt.c;
 * what both share (the bignum behind their tables, 128-bit helpers) is in
 * fmt_internal.h. fmt_scan.h holds the part of fmt_parse_double that
 * numarray.c's array scan inlines (the scan of a text of <= 19 digits,
 * Clinger's fast path); the rest of the parse is here. */
#include "fmt.h"

#include <assert.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fmt_internal.h"
#include "fmt_scan.h"

/* How: the scan keeps the first 19 significant digits w and the exponent
 * q (value w * 10^q); then Clinger's fast path (one exact operation in
 * double) when w and 10^q are exact doubles, else Eisel-Lemire (Lemire,
 * "Number Parsing at a Gigabyte per Second", 2021): w times a 128-bit
 * truncation of 5^q, with a bound on the error that says when the product
 * decides the rounding. The rare text it cannot decide goes to strtod /
 * strtof. Half precision narrows that double, and compares the text with
 * a midpoint exactly when the double is one (see fmt__narrow_exact).
 *
 * The table of 5^q (128 bits, for q < 0 from reciprocals) is computed
 * once, exactly, with fmt_internal.h's bignum (pthread_once).
 * bench/parse_sweep.c checks all 2^32 float32 bit patterns, and random
 * doubles and texts, against strtof / strtod. */

/* ---- parsing: the scan --------------------------------------------------- */

/* Appends the digits at p to w, up to FMT__W_DIGITS in all (*nd counts them),
 * and returns the end of the run of digits; *extra counts the digits past
 * FMT__W_DIGITS and *truncated says whether one of them was not 0. */
FMT__HOT const char *scan_digits(const char *p, const char *end, uint64_t *w,
                                 int *nd, int64_t *extra, int *truncated) {
  while (end - p >= 8) {
    uint64_t v = fmt__load8(p);
    int n = fmt__leading_digits8(v);
    if (n == 8 && *nd <= FMT__W_DIGITS - 8) { /* a whole word of digits */
      *w = *w * 100000000 + fmt__leading_value8(v, 8);
      *nd += 8;
      p += 8;
    } else if (n < 8 && *nd + n <= FMT__W_DIGITS) { /* the run ends here */
      if (n > 0) *w = *w * fmt__pow10_u32[n] + fmt__leading_value8(v, n);
      *nd += n;
      return p + n;
    } else {
      break;
    }
  }
  for (; *nd < FMT__W_DIGITS && p < end && fmt__is_digit(*p); p++, ++*nd)
    *w = *w * 10 + (uint64_t)(*p - '0');
  const char *rest = p;
  for (; p < end && fmt__is_digit(*p); p++) *truncated |= *p != '0';
  *extra += p - rest;
  return p;
}

/* fmt__scan_number for any number of digits: w keeps the first FMT__W_DIGITS
 * significant ones (leading zeros are not), `truncated` notes the rest.
 * Out of line, as fmt__parse_double_rest, to keep the common path lean. */
static __attribute__((noinline)) size_t scan_number_long(const char *s, size_t len, fmt__scan_t *out) {
  const char *p = s, *end = s + len;
  uint64_t w = 0;
  int64_t q = 0, extra = 0;
  int nd = 0, truncated = 0; /* nd: significant digits kept in w */
  int neg = p < end && *p == '-';
  p += neg;
  if (p == end || !fmt__is_digit(*p)) return 0;
  if (*p == '0') /* a leading 0 stands alone: "01" is "0", then "1" */
    p++;
  else
    p = scan_digits(p, end, &w, &nd, &extra, &truncated);
  q += extra; /* integer digits past FMT__W_DIGITS scale w up */
  if (end - p >= 2 && *p == '.' && fmt__is_digit(p[1])) {
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
  p = fmt__scan_exponent(p, end, &q);
  *out = (fmt__scan_t){.w = w, .q = q, .neg = neg, .truncated = truncated};
  return (size_t)(p - s);
}

/* fmt__scan_number for any text. */
static size_t scan_any(const char *s, size_t len, fmt__scan_t *out) {
  size_t n = fmt__scan_number(s, len, out);
  return n == FMT__SCAN_LONG ? scan_number_long(s, len, out) : n;
}

/* ---- parsing: Eisel-Lemire ----------------------------------------------- */

/* The tables of 5^q (fmt_scan.h declares them, for its inline first step
 * of Eisel-Lemire). */
fmt__u128 fmt__pow5_128[FMT__POW10_COUNT];
int16_t fmt__pow5_128_exp2[FMT__POW10_COUNT];
#ifdef FMT__SHORT_SIMD
uint8_t fmt__short_index[17][16][16];
int fmt__short_simd;
int fmt__short4_simd;
#endif
static pthread_once_t parse_tables_once = PTHREAD_ONCE_INIT;
atomic_int fmt__parse_tables_done;

static void parse_tables_init(void) {
  fmt__big_t p = {{1}}; /* 5^k */
  for (int k = 0; k <= -FMT__POW10_MIN; k++) {
    int bits = fmt__big_bits(&p);
    if (k <= FMT__POW10_MAX) {
      fmt__pow5_128[k - FMT__POW10_MIN] = fmt__big_window(&p, bits - 128);
      fmt__pow5_128_exp2[k - FMT__POW10_MIN] = (int16_t)(bits - 128);
    }
    if (k > 0) { /* never exact: the ceiling is the floor + 1 */
      fmt__u128 r = fmt__big_reciprocal(&p, bits, 128) + 1;
      assert(r >> 127 == 1);
      fmt__pow5_128[-k - FMT__POW10_MIN] = r;
      fmt__pow5_128_exp2[-k - FMT__POW10_MIN] = (int16_t)(-127 - bits);
    }
    fmt__big_mul_small(&p, 5);
  }
#ifdef FMT__SHORT_SIMD
  for (int dp = 0; dp <= 16; dp++)
    for (int fb = 0; fb < 16; fb++) {
      int has_dot = dp < 16, digits = 16 - fb - has_dot;
      for (int j = 0; j < 16; j++)
        fmt__short_index[dp][fb][j] =
            (uint8_t)(j < 16 - digits ? 0x80 : has_dot && j <= dp ? j - 1 : j);
    }
  __builtin_cpu_init();
  fmt__short_simd = fmt__simd_cap() >= 1 && __builtin_cpu_supports("sse4.1");
  fmt__short4_simd = fmt__simd_cap() == 2 && __builtin_cpu_supports("avx512f") &&
                     __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
                     __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512cd") &&
                     __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2") &&
                     __builtin_cpu_supports("popcnt");
#endif
}

void fmt__parse_tables_ready(void) {
  if (atomic_load_explicit(&fmt__parse_tables_done, memory_order_acquire)) return;
  pthread_once(&parse_tables_once, parse_tables_init);
  atomic_store_explicit(&fmt__parse_tables_done, 1, memory_order_release);
}

/* An IEEE binary format, and where w * 10^q (w < 2^64) surely rounds to 0
 * (q < min_q) or to infinity (q > max_q, since w >= 1). */
typedef struct {
  int sig_bits;  /* significand bits with the hidden one: 53, 24 */
  int bias;      /* exponent bias: 1023, 127 */
  int max_field; /* the exponent field of infinity: 2047, 255 */
  int min_q, max_q;
} binary_format_t;

static const binary_format_t binary64 = {53, 1023, 2047, FMT__POW10_MIN, FMT__POW10_MAX};
/* 10^19 * 10^-65 is below half of 2^-149; 10^39 is above FLT_MAX */
static const binary_format_t binary32 = {24, 127, 255, -64, 38};
/* Narrowed from the double, not by Eisel-Lemire; the bounds would be:
 * 10^19 * 10^-28 is below half of 2^-24 (10^-61, of 2^-133), 10^5 is above
 * 65520 (10^39, bfloat16's largest midpoint) */
static const binary_format_t binary16 = {11, 15, 31, -27, 4};
static const binary_format_t bfloat16 = {8, 127, 255, -60, 38};

/* Rounds X = w * 10^q, scaled so that it lies in [2^126, 2^128), to the
 * format, from an approximation g with g - 1 < X < g + hi (X = g when
 * exact). field126 is the biased exponent of the value X = 2^126 stands
 * for. Stores the bits (no sign) and returns 1 when every X in that range
 * rounds the same, that is when no midpoint between two neighbours in the
 * format lies in it (they are at least 2^72 apart in this scale, and g
 * shows which one is near); returns 0 otherwise. */
FMT__HOT int round_product(fmt__u128 g, fmt__u128 hi, int exact, int field126,
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
  fmt__u128 unit = (fmt__u128)(1ull << shift) << 64;
  fmt__u128 rest =
      (fmt__u128)(g_hi & ((1ull << shift) - 1)) << 64 | (uint64_t)g;
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
 * For q in [0, FMT__EXACT_Q_MAX] the first product is exact. Otherwise t is
 * within 1 of the exact scaled 5^q, so wn * t is within wn < 2^64 of the
 * exact product, and its upper 128 bits g have g - 1 < X < g + 2 (X >= g
 * for q >= 0, where t is a floor; X < g + 1 for q < 0, a ceiling); with
 * t's upper half alone, X < g + 2^64 + 1. For q < 0, an integer X (an
 * exact value, or a tie) thus equals the full g; X is an integer when 5^-q
 * divides w. (For q > FMT__EXACT_Q_MAX there are no ties: the 54 or 25 bits of
 * a midpoint cannot hold 5^q.) Returns 0 when the rounding stays
 * undecided: a text within about 2^-70 of a midpoint (rare), or a tie with
 * q < 0 past 19 digits. */
FMT__HOT int eisel_lemire(uint64_t w, int64_t q, const binary_format_t *f,
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
  fmt__u128 t = fmt__pow5_128[q - FMT__POW10_MIN];
  /* w * 10^q = wn * 2^-lz * t * 2^exp2(5^q) * 2^q, and the upper 128 bits
   * of wn * t (from 2^64 on) start at 2^126: 2^(126 + 64) in wn * t. */
  int field126 = 190 + fmt__pow5_128_exp2[q - FMT__POW10_MIN] + (int)q - lz + f->bias;
  fmt__u128 g = (fmt__u128)wn * (uint64_t)(t >> 64);
  if (q >= 0 && q <= FMT__EXACT_Q_MAX)
    return round_product(g, 0, 1, field126, f, bits);
  if (round_product(g, ((fmt__u128)1 << 64) + 1, 0, field126, f, bits))
    return 1;
  g += ((fmt__u128)wn * (uint64_t)t) >> 64; /* now the exact upper 128 bits */
  int exact = q < 0 && q >= -FMT__EXACT_Q_MAX && fmt__pow5_divides(w, (int)-q);
  return round_product(g, exact ? 0 : 2, exact, field126, f, bits);
}

/* w * 10^q, or when digits were dropped, (w, w + 1) * 10^q: both ends must
 * round the same. Returns 0 when the exact path is needed. */
FMT__HOT int decimal_to_binary(const fmt__scan_t *d, const binary_format_t *f,
                             uint64_t *bits) {
  uint64_t up;
  if (!eisel_lemire(d->w, d->q, f, bits)) return 0;
  return !d->truncated || (eisel_lemire(d->w + 1, d->q, f, &up) && up == *bits);
}

/* ---- parsing: the fast and the exact path -------------------------------- */

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
      if (x < FMT__EXP_CAP) x = x * 10 + (*p - '0');
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

/* ---- half precision: narrowing the double -------------------------------- */

/* a = a / d, returning the remainder (d > 0). */
static uint32_t big_divmod_small(fmt__big_t *a, uint32_t d) {
  uint64_t r = 0;
  for (int i = FMT__BIG_LIMBS - 1; i >= 0; i--) {
    uint64_t cur = r << 32 | a->w[i];
    a->w[i] = (uint32_t)(cur / d);
    r = cur % d;
  }
  return (uint32_t)r;
}

/* The significant digits of m (finite, > 0, sig * 2^k with |k| small
 * enough for the bignum: any midpoint of float16 or bfloat16) into digits,
 * without trailing zeros, NUL-terminated; returns their count and stores in
 * *point the power of ten of the place before the first: m = 0.d1d2... x
 * 10^point. Exact: m is sig * 2^k or (sig * 5^-k) * 10^k. */
#define MID_DIGITS 256 /* >= 32 * FMT__BIG_LIMBS * log10(2) */
static int exact_digits(double m, char *digits, int64_t *point) {
  int k;
  uint64_t sig = (uint64_t)ldexp(frexp(m, &k), 53);
  k -= 53;
  int tz = __builtin_ctzll(sig);
  sig >>= tz;
  k += tz;
  assert(k >= -300 && k <= 700); /* 5^300 and 2^700 times sig fit 832 bits */
  fmt__big_t n = {{(uint32_t)sig, (uint32_t)(sig >> 32)}};
  for (int i = 0; i < k; i++) fmt__big_shl1(&n);
  for (int i = 0; i < -k; i++) fmt__big_mul_small(&n, 5);
  char rev[MID_DIGITS];
  int len = 0;
  while (fmt__big_bits(&n) > 0) { /* nine digits at a time, lowest first */
    uint32_t r = big_divmod_small(&n, 1000000000);
    for (int i = 0; i < 9; i++, r /= 10) rev[len++] = (char)('0' + r % 10);
  }
  while (rev[len - 1] == '0') len--; /* the top chunk's leading zeros */
  int start = 0;
  while (rev[start] == '0') start++; /* trailing zeros */
  int nd = 0;
  for (int i = len - 1; i >= start; i--) digits[nd++] = rev[i];
  digits[nd] = '\0';
  *point = (int64_t)len + (k < 0 ? k : 0);
  return nd;
}

/* The sign of |x| - m, for x the value of the JSON number text s[0, n)
 * (already validated) and m an exact_digits double: both as 0.ddd x 10^p,
 * the powers first, then digit by digit. Any length of text. */
static int compare_text(const char *s, size_t n, double m) {
  char md[MID_DIGITS];
  int64_t mpoint;
  int mlen = exact_digits(m, md, &mpoint);
  const char *p = s, *end = s + n;
  if (*p == '-') p++;
  const char *mant = p;
  while (p < end && (*p | 0x20) != 'e') p++;
  const char *mant_end = p;
  int64_t exp10 = 0;
  if (p < end) { /* the validated exponent: e[+-]digits */
    int exp_neg = *++p == '-';
    if (*p == '+' || *p == '-') p++;
    for (; p < end; p++)
      if (exp10 < FMT__EXP_CAP) exp10 = exp10 * 10 + (*p - '0');
    if (exp_neg) exp10 = -exp10;
  }
  /* the digits, the point skipped: 0.ddd x 10^(integer digits + exp10),
   * then past the leading zeros */
  const char *dot = memchr(mant, '.', (size_t)(mant_end - mant));
  int64_t point = (dot ? dot : mant_end) - mant + exp10;
  for (p = mant; p < mant_end && (*p == '0' || *p == '.'); p++)
    point -= *p == '0';
  if (p == mant_end) return -1; /* x = 0 */
  if (point != mpoint) return point < mpoint ? -1 : 1;
  int i = 0;
  for (; p < mant_end; p++) {
    if (*p == '.') continue;
    if (i < mlen) {
      if (*p != md[i]) return *p < md[i] ? -1 : 1;
      i++;
    } else if (*p != '0') {
      return 1;
    }
  }
  return i < mlen ? -1 : 0; /* md's last digit is not 0 */
}

/* The bits of d rounded to the 16-bit format f, to nearest; a midpoint d
 * goes by `tie`, the sign of |x| - |d| for the exact value x that d stands
 * for (0: x is that midpoint, to even). */
static uint16_t narrow(double d, const binary_format_t *f, int tie) {
  uint64_t b;
  memcpy(&b, &d, sizeof b);
  const int p = f->sig_bits, emin = 1 - f->bias,
            emax = f->max_field - 1 - f->bias;
  const uint32_t inf_bits = (uint32_t)f->max_field << (p - 1);
  const uint16_t sign = (uint16_t)(b >> 63 << 15);
  int field = (int)(b >> 52 & 0x7ff);
  if (field == 0x7ff) /* infinity, or NaN (quiet) */
    return sign | inf_bits | (b << 12 ? 1u << (p - 2) : 0);
  if (field == 0) return sign; /* zero, or a double subnormal: far below */
  int e = field - 1023;
  if (e > emax) return sign | inf_bits;
  int drop = 53 - p + (e < emin ? emin - e : 0); /* as fmt__narrow_exact */
  if (drop > 53) return sign; /* below half the smallest subnormal */
  uint64_t sig = (b & ((1ull << 52) - 1)) | 1ull << 52;
  uint64_t kept = sig >> drop, rest = sig & ((1ull << drop) - 1);
  uint64_t half = 1ull << (drop - 1);
  if (rest > half || (rest == half && (tie > 0 || (tie == 0 && (kept & 1)))))
    kept++;
  /* kept's hidden bit adds 1 to the field; a carry out of the significand
   * moves to the next binade, possibly infinity */
  uint32_t v =
      (e < emin ? 0 : (uint32_t)(e - emin) << (p - 1)) + (uint32_t)kept;
  return sign | (uint16_t)(v < inf_bits ? v : inf_bits);
}

static size_t parse_half(const char *s, size_t len, const binary_format_t *f,
                         uint16_t *out) {
  double d;
  size_t n = fmt_parse_double(s, len, &d);
  if (n == 0) return 0;
  int tie =
      fmt__narrow_exact(d, f->sig_bits, 1 - f->bias, f->max_field - 1 - f->bias)
          ? 0
          : compare_text(s, n, fabs(d));
  *out = narrow(d, f, tie);
  return n;
}

/* ---- public -------------------------------------------------------------- */

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

/* fmt_parse_double past Clinger's fast path: w * 10^q (a text of at most
 * FMT__W_DIGITS digits, none dropped), the n bytes at s. Out of line and
 * reached by tail calls with the scan in registers, so that the fast path,
 * the one most tensor text takes, keeps nothing across a call and saves
 * no registers (cachegrind: 17 instructions of prologue and epilogue per
 * number with these inline). */
/* The double of the scanned text d (the n bytes at s) by Eisel-Lemire,
 * or when that cannot decide, by the exact path. */
FMT__HOT size_t double_past_clinger(const char *s, size_t n, const fmt__scan_t *d,
                                    double *out) {
  uint64_t bits;
  fmt__parse_tables_ready();
  if (!decimal_to_binary(d, &binary64, &bits)) {
    *out = slow_double(s, n);
    return n;
  }
  bits |= (uint64_t)d->neg << 63;
  memcpy(out, &bits, sizeof bits);
  return n;
}

__attribute__((noinline)) size_t fmt__parse_double_rest(const char *s, size_t n,
                                                          double *out, uint64_t w,
                                                          int64_t q, int neg) {
  const fmt__scan_t d = {.w = w, .q = q, .neg = neg, .truncated = 0};
  return double_past_clinger(s, n, &d, out);
}

/* fmt_parse_double for a text of more than FMT__W_DIGITS digits (leading zeros
 * counted). */
__attribute__((noinline)) size_t fmt__parse_double_long(const char *s, size_t len,
                                                          double *out) {
  fmt__scan_t d;
  size_t n = scan_number_long(s, len, &d);
  if (n == 0) return 0;
  double v;
  if (fmt__clinger(&d, &v)) {
    *out = fmt__with_sign(v, d.neg);
    return n;
  }
  return double_past_clinger(s, n, &d, out);
}

size_t fmt_parse_double(const char *s, size_t len, double *out) {
  return fmt__parse_double_hot(s, len, out);
}

size_t fmt_parse_float(const char *s, size_t len, float *out) {
  fmt__scan_t d;
  size_t n = scan_any(s, len, &d);
  if (n == 0) return 0;
  double v;
  uint64_t bits;
  /* Clinger's double is correctly rounded, so it serves unless rounding it
   * again could differ (Figueroa's theorem, 53 >= 2 * 24 + 2, makes every
   * w <= 2^24, |q| <= 10 safe; the check lets the others through too). */
  if (fmt__clinger(&d, &v) && fmt_float_from_double_exact(v)) {
    *out = (float)fmt__with_sign(v, d.neg);
    return n;
  }
  fmt__parse_tables_ready();
  if (!decimal_to_binary(&d, &binary32, &bits)) {
    *out = slow_float(s, n);
    return n;
  }
  uint32_t b32 = (uint32_t)bits | (uint32_t)d.neg << 31;
  memcpy(out, &b32, sizeof b32);
  return n;
}

size_t fmt_parse_f16(const char *s, size_t len, uint16_t *out) {
  return parse_half(s, len, &binary16, out);
}

size_t fmt_parse_bf16(const char *s, size_t len, uint16_t *out) {
  return parse_half(s, len, &bfloat16, out);
}
