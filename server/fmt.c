/* fmt.c -- shortest round-trip decimal text for float32 / float64, and the
 * non-finite spellings. The digits come from a simple exact method: one
 * correctly rounded snprintf("%.*e"), shorter candidates rounded from it, a
 * search over the digit count, each candidate verified with strtof_l /
 * strtod_l in the C locale. A Ryu-style generator can later replace
 * shortest_digits() alone; layout() and the public functions stay. */
#include "fmt.h"

#include <assert.h>
#include <errno.h>
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FLOAT_MAX_DIGITS 9   /* every float round-trips with 9 digits */
#define DOUBLE_MAX_DIGITS 17 /* every double with 17 */

/* A finite non-zero decimal: neg ? -1 : 1 times d[0].d[1]...d[n-1] x 10^exp,
 * with d[0] != 0 and each d[i] an ASCII digit. */
typedef struct {
  int neg;
  int n;
  int exp;
  char d[DOUBLE_MAX_DIGITS + 4]; /* up to maxp + WIDE_EXTRA */
} decimal_t;

/* ---- the C locale for reading candidates back ---------------------------- */

/* Created once (the only allocation fmt ever makes). If newlocale fails,
 * the process locale is used: normd never calls setlocale, so that is "C"
 * too; under a ',' locale the output would stay exact but not shortest. */
static pthread_once_t c_locale_once = PTHREAD_ONCE_INIT;
static locale_t c_locale; /* (locale_t)0 if newlocale failed */

static void c_locale_init(void) {
  c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
}

/* Reads s back as a float (as_float) or a double and compares the bits with
 * v (which, for a float, holds the float exactly). strtof is used for
 * floats, not strtod + cast, which would round twice. */
static int reads_back(const char *s, double v, int as_float) {
  if (as_float) {
    float want = (float)v;
    float got = c_locale ? strtof_l(s, NULL, c_locale) : strtof(s, NULL);
    return memcmp(&got, &want, sizeof got) == 0;
  }
  double got = c_locale ? strtod_l(s, NULL, c_locale) : strtod(s, NULL);
  return memcmp(&got, &v, sizeof got) == 0;
}

/* ---- decimals ------------------------------------------------------------ */

/* The p-digit decimal nearest to v (finite, non-zero), correctly rounded by
 * glibc's printf. The radix character is whatever the locale says (',' in
 * some); it is skipped, never copied, so the result does not depend on it. */
static void nearest_decimal(double v, int p, decimal_t *out) {
  char tmp[64];
  snprintf(tmp, sizeof tmp, "%.*e", p - 1, v);
  const char *s = tmp;
  out->neg = *s == '-';
  if (out->neg) s++;
  out->n = 0;
  for (; *s && *s != 'e'; s++)
    if (*s >= '0' && *s <= '9' && out->n < p) out->d[out->n++] = *s;
  int esign = 1, e = 0;
  if (*s == 'e') s++;
  if (*s == '-' || *s == '+') esign = *s++ == '-' ? -1 : 1;
  for (; *s >= '0' && *s <= '9'; s++) e = e * 10 + (*s - '0');
  out->exp = esign * e;
}

/* Adds one unit in the last digit (away from zero), carrying; 9.99 becomes
 * 1.00 x 10^(exp+1), still n digits. */
static void decimal_increment(decimal_t *dec) {
  int i = dec->n - 1;
  while (i >= 0 && dec->d[i] == '9') dec->d[i--] = '0';
  if (i >= 0) {
    dec->d[i]++;
  } else {
    dec->d[0] = '1';
    dec->exp++;
  }
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

/* ---- shortest digits ----------------------------------------------------- */

/* One number being formatted: its value, its width and a wide rounding of
 * it (maxp + WIDE_EXTRA digits from one snprintf) from which the shorter
 * candidates are derived without calling snprintf again. */
#define WIDE_EXTRA 3
typedef struct {
  double v;     /* the value; a float is held exactly */
  int as_float; /* read candidates back with strtof, not strtod */
  int boundary; /* mantissa field 0 above the smallest exponent: the gap
                   below v is half the gap above */
  decimal_t wide;
} subject_t;

/* The p-digit decimal nearest to the subject, rounded from the wide one.
 * That is exact unless the dropped digits are exactly 50...0: only then can
 * a p-digit midpoint lie between v and the wide rounding (it would be the
 * wide rounding itself, which is the nearest decimal of its length), so only
 * then (about once in 10^(WIDE_EXTRA + 1) probes) does it ask snprintf for
 * p digits directly. */
static void nearest_from_wide(const subject_t *sub, int p, decimal_t *out) {
  const decimal_t *w = &sub->wide;
  *out = *w;
  out->n = p;
  char first = w->d[p];
  int rest = 0;
  for (int i = p + 1; i < w->n; i++) rest |= w->d[i] != '0';
  if (first == '5' && !rest) {
    nearest_decimal(sub->v, p, out);
    return;
  }
  if (first > '5' || (first == '5' && rest)) decimal_increment(out);
}

/* Is there a p-digit decimal that reads back as v? If so, writes the one
 * nearest to v into buf. The nearest p-digit decimal D is the only
 * candidate, except on a binade boundary: there D can lie just below the
 * narrow lower half-gap while the next p-digit decimal above v is still
 * inside the wide upper one. Any other p-digit decimal is farther from v
 * than one of these two on the same side, so it cannot read back. */
static int try_digits(const subject_t *sub, int p, char *buf) {
  decimal_t dec;
  nearest_from_wide(sub, p, &dec);
  layout(&dec, buf);
  if (reads_back(buf, sub->v, sub->as_float)) return 1;
  if (!sub->boundary) return 0;
  decimal_increment(&dec); /* away from zero == up in magnitude */
  layout(&dec, buf);
  return reads_back(buf, sub->v, sub->as_float);
}

/* The fewest digits: "some p-digit decimal reads back" is monotone in p (a
 * p-digit decimal is also a (p+1)-digit one) and true at maxp, where the
 * nearest decimal always reads back. Most values of real data need maxp - 2
 * to maxp digits, so p walks down from maxp a few steps before a binary
 * search takes over. Invariant: hi works (its text is in buf once hi <
 * maxp); in the binary search no p < lo works. */
#define LINEAR_STEPS 3
static int shortest_digits(double v, int maxp, int as_float, int boundary,
                           char *buf) {
  int saved_errno = errno; /* strtof sets ERANGE on denormals */
  pthread_once(&c_locale_once, c_locale_init);
  subject_t sub = {.v = v, .as_float = as_float, .boundary = boundary};
  nearest_decimal(v, maxp + WIDE_EXTRA, &sub.wide);
  char tmp[FMT_NUMBER_MAX];
  int hi = maxp, lo = 1;
  for (int step = 0; step < LINEAR_STEPS; step++, hi--) {
    if (!try_digits(&sub, hi - 1, tmp)) {
      lo = hi;
      break;
    }
    memcpy(buf, tmp, sizeof tmp);
  }
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2;
    if (try_digits(&sub, mid, tmp)) {
      hi = mid;
      memcpy(buf, tmp, sizeof tmp);
    } else {
      lo = mid + 1;
    }
  }
  if (hi == maxp) {
    decimal_t dec;
    nearest_from_wide(&sub, maxp, &dec);
    layout(&dec, buf);
  }
  errno = saved_errno;
  return (int)strlen(buf);
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
  int n = special(f, buf);
  if (n >= 0) return n;
  uint32_t bits;
  memcpy(&bits, &f, sizeof bits);
  /* mantissa field 0 and not the smallest normal exponent: uneven gaps */
  int boundary = (bits & 0x7FFFFFu) == 0 && (bits >> 23 & 0xFFu) > 1;
  return shortest_digits(f, FLOAT_MAX_DIGITS, 1, boundary, buf);
}

int fmt_double(double d, char *buf) {
  int n = special(d, buf);
  if (n >= 0) return n;
  uint64_t bits;
  memcpy(&bits, &d, sizeof bits);
  int boundary = (bits & 0xFFFFFFFFFFFFFull) == 0 && (bits >> 52 & 0x7FFu) > 1;
  return shortest_digits(d, DOUBLE_MAX_DIGITS, 0, boundary, buf);
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
