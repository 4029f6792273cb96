/* check_fmt.c -- fmt_float / fmt_double: known values (Ryu's test tables
 * among them), the text layout and JSON number syntax, round trips over
 * millions of random bit patterns (split across threads, which also
 * exercises thread safety), shortest-ness against a snprintf reference, and
 * the non-finite spellings. fmt_parse_double / fmt_parse_float: the grammar
 * and the lengths taken, hard values (overflow, underflow, subnormals,
 * ties), texts at and around exact midpoints up to 1100 digits, and random
 * texts against strtod / strtof. Loops report only failures (ck_abort_msg). */
#include <check.h>
#include <errno.h>
#include <float.h>
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fmt.h"

/* ---- helpers ------------------------------------------------------------- */

/* splitmix64 */
static uint64_t rand_u64(uint64_t *state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static float f_from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}
static double d_from_bits(uint64_t u) {
  double d;
  memcpy(&d, &u, sizeof d);
  return d;
}

static int same_float(float a, float b) {
  return memcmp(&a, &b, sizeof a) == 0;
}
static int same_double(double a, double b) {
  return memcmp(&a, &b, sizeof a) == 0;
}

/* A decimal in scientific form: digits (no leading or trailing zeros, at
 * least one), exponent of the first digit, sign. */
typedef struct {
  int neg;
  int n;
  int exp;
  char d[40];
} sci_t;

/* Parses any decimal text ("-0.00024414062", "4.1039004E3", "1e-05") into
 * scientific form; 0 on a zero value. */
static int to_sci(const char *s, sci_t *out) {
  char all[80];
  int n = 0, int_digits = -1, e = 0;
  out->neg = *s == '-';
  if (*s == '-' || *s == '+') s++;
  for (; *s && *s != 'e' && *s != 'E'; s++) {
    if (*s == '.')
      int_digits = n;
    else if (n < (int)sizeof all)
      all[n++] = *s;
  }
  if (int_digits < 0) int_digits = n;
  if (*s) e = atoi(s + 1);
  int first = 0;
  while (first < n && all[first] == '0') first++;
  if (first == n) return 0;
  int last = n;
  while (all[last - 1] == '0') last--;
  out->n = last - first;
  memcpy(out->d, all + first, (size_t)out->n);
  out->d[out->n] = '\0';
  out->exp = int_digits - 1 - first + e;
  return 1;
}

static int same_sci(const sci_t *a, const sci_t *b) {
  return a->neg == b->neg && a->n == b->n && a->exp == b->exp &&
         memcmp(a->d, b->d, (size_t)a->n) == 0;
}

/* JSON number grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
static int is_json_number(const char *s) {
  if (*s == '-') s++;
  if (*s == '0')
    s++;
  else if (*s >= '1' && *s <= '9')
    while (*s >= '0' && *s <= '9') s++;
  else
    return 0;
  if (*s == '.') {
    s++;
    if (!(*s >= '0' && *s <= '9')) return 0;
    while (*s >= '0' && *s <= '9') s++;
  }
  if (*s == 'e' || *s == 'E') {
    s++;
    if (*s == '+' || *s == '-') s++;
    if (!(*s >= '0' && *s <= '9')) return 0;
    while (*s >= '0' && *s <= '9') s++;
  }
  return *s == '\0';
}

/* ---- the reference for shortest-ness ------------------------------------- */

/* The p-digit decimal nearest to v, as digits "d0d1..." (exactly p of them)
 * and the exponent of d0, from glibc's correctly rounded printf. */
static void ref_nearest(double v, int p, char *digits, int *exp) {
  char tmp[64];
  snprintf(tmp, sizeof tmp, "%.*e", p - 1, fabs(v));
  int n = 0;
  const char *s = tmp;
  for (; *s != 'e'; s++)
    if (*s >= '0' && *s <= '9') digits[n++] = *s;
  digits[n] = '\0';
  *exp = atoi(s + 1);
}

/* Moves a p-digit decimal one unit in the last place up (dir 1) or down
 * (dir -1), staying on the p-digit grid across powers of ten. */
static void ref_step(char *digits, int p, int *exp, int dir) {
  int i = p - 1;
  if (dir > 0) {
    while (i >= 0 && digits[i] == '9') digits[i--] = '0';
    if (i >= 0) {
      digits[i]++;
    } else {
      digits[0] = '1';
      ++*exp;
    }
  } else {
    while (i >= 0 && digits[i] == '0') digits[i--] = '9';
    digits[i]--;
    if (digits[0] == '0') { /* 1000 - 1 = 0999 -> 9999 x 10^(exp-1) */
      memmove(digits, digits + 1, (size_t)p - 1);
      digits[p - 1] = '9';
      --*exp;
    }
  }
}

/* Does the decimal read back as v (sign taken from v)? */
static int ref_reads_back(const char *digits, int exp, double v, int as_float) {
  char tmp[64];
  snprintf(tmp, sizeof tmp, "%s%c.%se%d", signbit(v) ? "-" : "", digits[0],
           digits + 1, exp);
  if (as_float) return same_float(strtof(tmp, NULL), (float)v);
  return same_double(strtod(tmp, NULL), v);
}

/* Checks that text (fmt's output for v) reads back, is valid JSON, has the
 * fewest digits, and is the nearest decimal with that many digits. Returns
 * NULL or a static description of the first problem. */
static const char *check_shortest(double v, int as_float, const char *text) {
  sci_t got;
  if (!is_json_number(text)) return "not a JSON number";
  if (as_float ? !same_float(strtof(text, NULL), (float)v)
               : !same_double(strtod(text, NULL), v))
    return "does not read back";
  if (!to_sci(text, &got)) return v == 0 ? NULL : "zero text for non-zero";
  char digits[40];
  int exp;
  int n = got.n;
  if (n > 1) {
    /* the nearest (n-1)-digit decimal and its neighbours on both sides
     * are the only ones that could read back */
    ref_nearest(v, n - 1, digits, &exp);
    if (ref_reads_back(digits, exp, v, as_float))
      return "nearest shorter reads back";
    char up[40], down[40];
    int eup = exp, edown = exp;
    memcpy(up, digits, sizeof up);
    memcpy(down, digits, sizeof down);
    ref_step(up, n - 1, &eup, 1);
    ref_step(down, n - 1, &edown, -1);
    if (ref_reads_back(up, eup, v, as_float)) return "shorter (up) reads back";
    if (ref_reads_back(down, edown, v, as_float))
      return "shorter (down) reads back";
  }
  /* the output is the nearest n-digit decimal, or that one does not read
   * back and the output is its neighbour */
  ref_nearest(v, n, digits, &exp);
  sci_t near; /* compared as numbers: the nearest may end in zeros */
  char tmp[64];
  snprintf(tmp, sizeof tmp, "%s%c.%se%d", signbit(v) ? "-" : "", digits[0],
           digits + 1, exp);
  to_sci(tmp, &near);
  if (same_sci(&near, &got)) return NULL;
  if (ref_reads_back(digits, exp, v, as_float))
    return "not the nearest decimal of its length";
  char up[40], down[40];
  int eup = exp, edown = exp;
  memcpy(up, digits, sizeof up);
  memcpy(down, digits, sizeof down);
  ref_step(up, n, &eup, 1);
  ref_step(down, n, &edown, -1);
  if (!(eup == got.exp && strncmp(up, got.d, (size_t)n) == 0) &&
      !(edown == got.exp && strncmp(down, got.d, (size_t)n) == 0))
    return "neither the nearest decimal nor its neighbour";
  return NULL;
}

/* ---- known values -------------------------------------------------------- */

START_TEST(test_known_floats) {
  static const struct {
    float f;
    const char *want;
  } cases[] = {
      {1.3038095f, "1.3038095"},
      {0.1f, "0.1"},
      {1e-5f, "1e-05"},
      {3.0f, "3"},
      {0.0f, "0"},
      {-0.0f, "-0"},
      {-1.5f, "-1.5"},
      {0.3f, "0.3"},
      {2.5e-5f, "2.5e-05"},
      {100.0f, "100"},
      {1e7f, "10000000"},
      {16777216.0f, "16777216"},
      {123456.789f, "123456.79"},
      {0.0001f, "0.0001"},
      {FLT_MIN, "1.1754944e-38"},
      {FLT_MAX, "3.4028235e+38"},
      {-FLT_MAX, "-3.4028235e+38"},
      {1e-45f, "1e-45"}, /* the smallest denormal, 1.4e-45 */
      {FLT_TRUE_MIN * 3, "4e-45"},
      {1e-40f, "1e-40"},
      {1e15f, "1000000000000000"},
      {1e16f, "1e+16"},
      {0.007812537f, "0.007812537"},
      {(float)(1.0 / 3.0), "0.33333334"},
  };
  char buf[FMT_NUMBER_MAX];
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int n = fmt_float(cases[i].f, buf);
    ck_assert_msg(strcmp(buf, cases[i].want) == 0,
                  "fmt_float(%a) = \"%s\", want \"%s\"", (double)cases[i].f,
                  buf, cases[i].want);
    ck_assert_int_eq(n, (int)strlen(buf));
  }
}
END_TEST

START_TEST(test_known_doubles) {
  static const struct {
    double d;
    const char *want;
  } cases[] = {
      {0.1, "0.1"},
      {1.0 / 3.0, "0.3333333333333333"},
      {0.1 + 0.2, "0.30000000000000004"},
      {(double)0.1f, "0.10000000149011612"},
      {DBL_MAX, "1.7976931348623157e+308"},
      {DBL_MIN, "2.2250738585072014e-308"},
      {5e-324, "5e-324"},
      {-5e-324, "-5e-324"},
      {0.0, "0"},
      {-0.0, "-0"},
      {1e-7, "1e-07"},
      {1e23, "1e+23"},
      {1e100, "1e+100"},
      {1.5e-300, "1.5e-300"},
      {9007199254740992.0, "9007199254740992"},
      {1e15 + 0.5, "1000000000000000.5"},
      {-2.5, "-2.5"},
      {1e21, "1e+21"},
      {123456789012345680.0, "1.2345678901234568e+17"},
  };
  char buf[FMT_NUMBER_MAX];
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int n = fmt_double(cases[i].d, buf);
    ck_assert_msg(strcmp(buf, cases[i].want) == 0,
                  "fmt_double(%a) = \"%s\", want \"%s\"", cases[i].d, buf,
                  cases[i].want);
    ck_assert_int_eq(n, (int)strlen(buf));
  }
}
END_TEST

/* Expected digits from Ryu's f2s / d2s test tables (ulfjack/ryu), which
 * pin down the shortest *and nearest* choice on hard cases: exact
 * boundaries kept only for even mantissas, ties between two shortest
 * candidates, binade boundaries. Compared as (digits, exponent). */
START_TEST(test_ryu_floats) {
  static const struct {
    uint32_t bits; /* 0 = use f */
    float f;
    const char *want;
  } cases[] = {
      {0x7f7fffffu, 0, "3.4028235E38"},
      {0x00000001u, 0, "1E-45"},
      {0, 1.1754944E-38f, "1.1754944E-38"},
      {0, 3.355445E7f, "3.355445E7"},
      {0, 8.999999E9f, "9E9"},
      {0, 3.4366717E10f, "3.436672E10"},
      {0, 3.0540412E5f, "3.0540412E5"},
      {0, 8.0990312E3f, "8.0990312E3"},
      {0, 2.4414062E-4f, "2.4414062E-4"},
      {0, 2.4414062E-3f, "2.4414062E-3"},
      {0, 4.3945312E-3f, "4.3945312E-3"},
      {0, 6.3476562E-3f, "6.3476562E-3"},
      {0, 4.7223665E21f, "4.7223665E21"},
      {0, 8388608.0f, "8.388608E6"},
      {0, 1.6777216E7f, "1.6777216E7"},
      {0, 3.3554436E7f, "3.3554436E7"},
      {0, 6.7131496E7f, "6.7131496E7"},
      {0, 1.9310392E-38f, "1.9310392E-38"},
      {0, -2.47E-43f, "-2.47E-43"},
      {0, 1.993244E-38f, "1.993244E-38"},
      {0, 4103.9003f, "4.1039004E3"},
      {0, 5.3399997E9f, "5.3399997E9"},
      {0, 6.0898E-39f, "6.0898E-39"},
      {0, 0.0010310042f, "1.0310042E-3"},
      {0, 2.8823261E17f, "2.882326E17"},
      {0, 7.038531E-26f, "7.038531E-26"},
      {0, 9.2234038E17f, "9.223404E17"},
      {0, 6.7108872E7f, "6.710887E7"},
      {0, 1.0E-44f, "1E-44"},
      {0, 2.816025E14f, "2.816025E14"},
      {0, 9.223372E18f, "9.223372E18"},
      {0, 1.5846085E29f, "1.5846086E29"},
      {0, 1.1811161E19f, "1.1811161E19"},
      {0, 5.368709E18f, "5.368709E18"},
      {0, 4.6143165E18f, "4.6143166E18"},
      {0, 0.007812537f, "7.812537E-3"},
      {0, 1.4E-45f, "1E-45"},
      {0, 1.18697724E20f, "1.18697725E20"},
      {0, 1.00014165E-36f, "1.00014165E-36"},
      {0, 200.0f, "2E2"},
      {0, 3.3554432E7f, "3.3554432E7"},
      {0, 1.2345678f, "1.2345678E0"},
      {0, 1.23456735E-36f, "1.23456735E-36"},
  };
  char buf[FMT_NUMBER_MAX];
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    float f = cases[i].bits ? f_from_bits(cases[i].bits) : cases[i].f;
    fmt_float(f, buf);
    sci_t got, want;
    ck_assert(to_sci(buf, &got));
    ck_assert(to_sci(cases[i].want, &want));
    ck_assert_msg(same_sci(&got, &want), "fmt_float(%a) = \"%s\", want %s",
                  (double)f, buf, cases[i].want);
  }
}
END_TEST

static double d_from_parts(uint32_t exponent, uint64_t mantissa) {
  return d_from_bits((uint64_t)exponent << 52 | mantissa);
}

START_TEST(test_ryu_doubles) {
  const uint64_t max_mantissa =
      (1ull << 53) - 1; /* as in Ryu: bit 52 carries into the exponent */
  const struct {
    double d;
    const char *want;
  } cases[] = {
      {2.2250738585072014E-308, "2.2250738585072014E-308"},
      {d_from_bits(0x7fefffffffffffffull), "1.7976931348623157E308"},
      {d_from_bits(1), "5E-324"},
      {2.98023223876953125E-8, "2.9802322387695312E-8"},
      {-2.109808898695963E16, "-2.109808898695963E16"},
      {4.940656E-318, "4.940656E-318"},
      {1.18575755E-316, "1.18575755E-316"},
      {2.989102097996E-312, "2.989102097996E-312"},
      {9.0608011534336E15, "9.0608011534336E15"},
      {4.708356024711512E18, "4.708356024711512E18"},
      {9.409340012568248E18, "9.409340012568248E18"},
      {1.2345678, "1.2345678E0"},
      {d_from_bits(0x4830F0CF064DD592ull), "5.764607523034235E39"},
      {d_from_bits(0x4840F0CF064DD592ull), "1.152921504606847E40"},
      {d_from_bits(0x4850F0CF064DD592ull), "2.305843009213694E40"},
      {1.234567895, "1.234567895E0"},
      {1.2345678901234567, "1.2345678901234567E0"},
      {4.294967294, "4.294967294E0"},
      {4.294967297, "4.294967297E0"},
      {d_from_parts(4, 0), "1.7800590868057611E-307"},
      {d_from_parts(6, max_mantissa), "2.8480945388892175E-306"},
      {d_from_parts(41, 0), "2.446494580089078E-296"},
      {d_from_parts(40, max_mantissa), "4.8929891601781557E-296"},
      {d_from_parts(1077, 0), "1.8014398509481984E16"},
      {d_from_parts(1076, max_mantissa), "3.6028797018963964E16"},
      {d_from_parts(307, 0), "2.900835519859558E-216"},
      {d_from_parts(306, max_mantissa), "5.801671039719115E-216"},
      {d_from_parts(934, 0x000FA7161A4D6E0Cull), "3.196104012172126E-27"},
      {9007199254740991.0, "9.007199254740991E15"},
      {1.0e+15 + 1.0, "1.000000000000001E15"},
      {1.0e+15 + 1.0e+14, "1.1E15"},
      {536870912.0, "5.36870912E8"},
      {8796093022208.0e+3, "8.796093022208E15"},
  };
  char buf[FMT_NUMBER_MAX];
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    fmt_double(cases[i].d, buf);
    sci_t got, want;
    ck_assert(to_sci(buf, &got));
    ck_assert(to_sci(cases[i].want, &want));
    ck_assert_msg(same_sci(&got, &want), "fmt_double(%a) = \"%s\", want %s",
                  cases[i].d, buf, cases[i].want);
  }
}
END_TEST

/* Positional between 1e-4 and 1e16 (exclusive), scientific outside, with a
 * signed exponent of at least two digits. */
START_TEST(test_layout) {
  static const struct {
    double d;
    const char *want;
  } cases[] = {
      {1e-4, "0.0001"},
      {1.25e-4, "0.000125"},
      {9.5e-5, "9.5e-05"},
      {1e-5, "1e-05"},
      {1e15, "1000000000000000"},
      {9.5e15, "9500000000000000"},
      {1e16, "1e+16"},
      {1.5e16, "1.5e+16"},
      {12.5, "12.5"},
      {-1234.5, "-1234.5"},
      {1e-100, "1e-100"},
      {2e300, "2e+300"},
      {1, "1"},
      {10, "10"},
      {0.5, "0.5"},
      {-0.001, "-0.001"},
  };
  char buf[FMT_NUMBER_MAX];
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    fmt_double(cases[i].d, buf);
    ck_assert_str_eq(buf, cases[i].want);
  }
  fmt_float(1e-5f, buf);
  ck_assert_str_eq(buf, "1e-05");
  fmt_float(2.5e20f, buf);
  ck_assert_str_eq(buf, "2.5e+20");
  /* fmt_float assembles its text in registers: every place of the point,
   * zeros before and after the digits, both of its paths (3.0f and 1.0f
   * sit on binade boundaries, 1.1e-38f is subnormal) */
  static const struct {
    float f;
    const char *want;
  } floats[] = {
      {0.00022f, "0.00022"},       {0.0123f, "0.0123"},
      {0.1f, "0.1"},               {0.30000001f, "0.3"},
      {-0.5f, "-0.5"},             {1.0f, "1"},
      {3.0f, "3"},                 {12.375f, "12.375"},
      {-123.456f, "-123.456"},     {-123456.79f, "-123456.79"},
      {1234567.9f, "1234567.9"},   {8388607.5f, "8388607.5"},
      {16777215.0f, "16777215"},   {33554432.0f, "33554432"},
      {1.2345678e15f, "1234567800000000"}, {9.999999e15f, "9999999000000000"},
      {1e16f, "1e+16"},            {-1.2345678e-5f, "-1.2345678e-05"},
      {1.1e-38f, "1.1e-38"},       {7.0e-45f, "7e-45"},
  };
  for (size_t i = 0; i < sizeof floats / sizeof floats[0]; i++) {
    int n = fmt_float(floats[i].f, buf);
    ck_assert_str_eq(buf, floats[i].want);
    ck_assert_int_eq(n, (int)strlen(floats[i].want));
  }
  /* the same for fmt_double's 17 digits in two words: the point in the
   * first word, in the second, none; 2.0 sits on a binade boundary */
  static const struct {
    double d;
    const char *want;
  } doubles[] = {
      {0.000123, "0.000123"},
      {0.1 + 0.2, "0.30000000000000004"},
      {4.35, "4.35"},
      {-2.0, "-2"},
      {12345678.9, "12345678.9"},
      {123456789.123, "123456789.123"},
      {1234567890123.4, "1234567890123.4"},
      {123456789012345.67, "123456789012345.67"},
      {9007199254740992.0, "9007199254740992"},
      {1e22, "1e+22"},
  };
  for (size_t i = 0; i < sizeof doubles / sizeof doubles[0]; i++) {
    int n = fmt_double(doubles[i].d, buf);
    ck_assert_str_eq(buf, doubles[i].want);
    ck_assert_int_eq(n, (int)strlen(doubles[i].want));
  }
}
END_TEST

/* The longest texts the layouts can produce fit FMT_NUMBER_MAX. */
START_TEST(test_longest) {
  char buf[FMT_NUMBER_MAX + 8];
  memset(buf, 'x', sizeof buf);
  const double longest[] = {-1.2345678901234567e-100,
                            -1.2345678901234567e-5,
                            -0.00012345678901234567,
                            -1234567890123456.7,
                            -DBL_MIN,
                            -DBL_MAX};
  for (size_t i = 0; i < sizeof longest / sizeof longest[0]; i++) {
    int n = fmt_double(longest[i], buf);
    ck_assert_int_lt(n, FMT_NUMBER_MAX);
    ck_assert_int_eq(buf[n], '\0');
    ck_assert_int_eq(buf[FMT_NUMBER_MAX], 'x');
  }
  /* fmt_float stores 8 bytes at a time past its text, but within
   * FMT_NUMBER_MAX: the longest text of each layout */
  const float longest_floats[] = {-1.23456735E-36f, -1.2345678e-5f, -0.00012345678f,
                                  -123456.79f,      -12345678.0f,   -1.2345678e15f,
                                  -1.1754942e-38f};
  for (size_t i = 0; i < sizeof longest_floats / sizeof longest_floats[0]; i++) {
    memset(buf, 'x', sizeof buf);
    int n = fmt_float(longest_floats[i], buf);
    ck_assert_int_lt(n, FMT_NUMBER_MAX);
    ck_assert_int_eq(buf[n], '\0');
    ck_assert_int_eq(buf[FMT_NUMBER_MAX], 'x');
  }
  ck_assert_int_eq(fmt_double(-INFINITY, buf), 9);
}
END_TEST

START_TEST(test_nonfinite) {
  char buf[FMT_NUMBER_MAX];
  ck_assert_int_eq(fmt_float(NAN, buf), 3);
  ck_assert_str_eq(buf, "NaN");
  ck_assert_int_eq(fmt_float(-NAN, buf), 3);
  ck_assert_str_eq(buf, "NaN");
  ck_assert_int_eq(fmt_float(INFINITY, buf), 8);
  ck_assert_str_eq(buf, "Infinity");
  ck_assert_int_eq(fmt_float(-INFINITY, buf), 9);
  ck_assert_str_eq(buf, "-Infinity");
  fmt_double(NAN, buf);
  ck_assert_str_eq(buf, "NaN");
  fmt_double(INFINITY, buf);
  ck_assert_str_eq(buf, "Infinity");
  fmt_double(-INFINITY, buf);
  ck_assert_str_eq(buf, "-Infinity");

  double v = 0;
  ck_assert_int_eq(fmt_parse_nonfinite("NaN", &v), 1);
  ck_assert(isnan(v));
  ck_assert_int_eq(fmt_parse_nonfinite("Infinity", &v), 1);
  ck_assert(isinf(v) && v > 0);
  ck_assert_int_eq(fmt_parse_nonfinite("+Infinity", &v), 1);
  ck_assert(isinf(v) && v > 0);
  ck_assert_int_eq(fmt_parse_nonfinite("-Infinity", &v), 1);
  ck_assert(isinf(v) && v < 0);
  const char *bad[] = {"nan", "NAN",     "inf",       "-inf", "infinity",
                       "Inf", "-NaN",    "Infinity ", " NaN", "",
                       "1",   "Infinit", "Infinityy"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    v = 42;
    ck_assert_msg(fmt_parse_nonfinite(bad[i], &v) == 0, "accepted \"%s\"",
                  bad[i]);
    ck_assert(v == 42); /* untouched */
  }
  ck_assert_int_eq(fmt_parse_nonfinite(NULL, &v), 0);
}
END_TEST

/* fmt_float_list / fmt_double_list: the single texts joined with ',',
 * non-finite values quoted, for random bit patterns and the values off the
 * lists' shortcut (zeros, subnormals, binade boundaries, infinities, NaN),
 * into a buffer of exactly n * FMT_ELEMENT_MAX bytes (ASan sees a store
 * past it); lists of every length up to 40 and one of 4096. */
static void expect_joined(const char *got, size_t got_len, const char *want,
                          size_t want_len, const char *what, size_t n) {
  ck_assert_msg(got_len == want_len && memcmp(got, want, got_len) == 0,
                "%s of %zu: \"%.*s\", want \"%.*s\"", what, n,
                (int)(got_len < 200 ? got_len : 200), got,
                (int)(want_len < 200 ? want_len : 200), want);
}

static size_t joined_ref(const double *v, size_t n, int is_float,
                         char *out) {
  char *p = out;
  for (size_t i = 0; i < n; i++) {
    if (i) *p++ = ',';
    if (isnan(v[i]))
      p += sprintf(p, "\"NaN\"");
    else if (isinf(v[i]))
      p += sprintf(p, v[i] > 0 ? "\"Infinity\"" : "\"-Infinity\"");
    else
      p += is_float ? fmt_float((float)v[i], p) : fmt_double(v[i], p);
  }
  return (size_t)(p - out);
}

START_TEST(test_lists) {
  enum { LONG = 4096 };
  static const uint32_t float_odd[] = {
      0x00000000u, 0x80000000u, 0x00000001u, 0x807FFFFFu, 0x00800000u,
      0x3F800000u, 0xC0000000u, 0x7F7FFFFFu, 0x7F800000u, 0xFF800000u,
      0x7FC00000u, 0xFFC00001u, 0x4B000000u, 0x3DCCCCCDu};
  static const uint64_t double_odd[] = {
      0x0000000000000000ull, 0x8000000000000000ull, 0x0000000000000001ull,
      0x800FFFFFFFFFFFFFull, 0x0010000000000000ull, 0x3FF0000000000000ull,
      0x7FEFFFFFFFFFFFFFull, 0x7FF0000000000000ull, 0xFFF0000000000000ull,
      0x7FF8000000000000ull, 0x3FB999999999999Aull, 0x4330000000000000ull};
  float *f = malloc(LONG * sizeof *f);
  double *d = malloc(LONG * sizeof *d), *as_double = malloc(LONG * sizeof *d);
  char *want = malloc(LONG * FMT_ELEMENT_MAX);
  uint64_t seed = 0x9E3779B97F4A7C15ull;
  for (size_t round = 0; round < 300; round++) {
    size_t n = round < 41 ? round : LONG;
    for (size_t i = 0; i < n; i++) {
      seed ^= seed << 13;
      seed ^= seed >> 7;
      seed ^= seed << 17;
      uint32_t fb = (uint32_t)(seed >> 32);
      uint64_t db = seed;
      if (seed % 5 == 0) { /* a value off the shortcut, or near 1 */
        fb = float_odd[seed / 5 % (sizeof float_odd / sizeof float_odd[0])];
        db = double_odd[seed / 5 % (sizeof double_odd / sizeof double_odd[0])];
      } else if (seed % 5 == 1) {
        fb = (fb & 0x807FFFFFu) | (uint32_t)(120 + seed / 5 % 12) << 23;
        db = (db & 0x800FFFFFFFFFFFFFull) | (1017 + seed / 5 % 12) << 52;
      }
      memcpy(&f[i], &fb, sizeof fb);
      memcpy(&d[i], &db, sizeof db);
      as_double[i] = f[i];
    }
    char *got = malloc(n * FMT_ELEMENT_MAX + !n);
    expect_joined(got, fmt_float_list(f, n, got), want,
                  joined_ref(as_double, n, 1, want), "fmt_float_list", n);
    free(got);
    got = malloc(n * FMT_ELEMENT_MAX + !n);
    expect_joined(got, fmt_double_list(d, n, got), want,
                  joined_ref(d, n, 0, want), "fmt_double_list", n);
    free(got);
  }
  free(f);
  free(d);
  free(as_double);
  free(want);
}
END_TEST

/* strtof sets errno to ERANGE on denormals; fmt must not leak that. */
START_TEST(test_errno_untouched) {
  char buf[FMT_NUMBER_MAX];
  errno = 0;
  fmt_float(1e-45f, buf);
  fmt_double(5e-324, buf);
  fmt_double(DBL_MAX, buf);
  ck_assert_int_eq(errno, 0);
  errno = EINTR;
  fmt_float(FLT_TRUE_MIN, buf);
  ck_assert_int_eq(errno, EINTR);
}
END_TEST

/* Under a locale whose decimal separator is ',' the text does not change.
 * Minimal systems often have no such locale installed; then only the "C"
 * texts are checked (run with LOCPATH pointing at a localedef output to
 * exercise the ',' path on such a system). */
START_TEST(test_locale_independent) {
  static const char *const names[] = {"de_DE.UTF-8", "de_DE.utf8",
                                      "fr_FR.UTF-8", "ru_RU.UTF-8",
                                      "nl_NL.UTF-8", "de_DE"};
  const float fs[] = {1.3038095f, 0.1f, 1e-5f, 3.4028235e38f, -2.5f};
  const double ds[] = {1.0 / 3.0, 1e-7, 1e300, 123.456};
  char want[9][FMT_NUMBER_MAX], got[FMT_NUMBER_MAX];
  for (int i = 0; i < 5; i++) fmt_float(fs[i], want[i]);
  for (int i = 0; i < 4; i++) fmt_double(ds[i], want[5 + i]);
  for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
    if (!setlocale(LC_ALL, names[k])) continue;
    ck_assert_str_eq(localeconv()->decimal_point, ",");
    for (int i = 0; i < 5; i++) {
      fmt_float(fs[i], got);
      ck_assert_str_eq(got, want[i]);
    }
    for (int i = 0; i < 4; i++) {
      fmt_double(ds[i], got);
      ck_assert_str_eq(got, want[5 + i]);
    }
    uint64_t state = 5;
    for (int i = 0; i < 20000; i++) {
      float f = f_from_bits((uint32_t)rand_u64(&state));
      if (!isfinite(f)) continue;
      fmt_float(f, got);
      setlocale(LC_NUMERIC, "C");
      int ok = same_float(strtof(got, NULL), f) && !strchr(got, ',');
      setlocale(LC_NUMERIC, names[k]);
      if (!ok) ck_abort_msg("under %s: %a -> \"%s\"", names[k], (double)f, got);
    }
  }
  setlocale(LC_ALL, "C");
  ck_assert_str_eq(want[0], "1.3038095");
}
END_TEST

/* ---- round trips over random bit patterns -------------------------------- */

typedef struct {
  uint64_t seed;
  long count;
  int as_float;
  char failure[160]; /* empty if every value passed */
} sweep_t;

/* Runs on its own thread: no Check calls here, failures are returned. */
static void *sweep_run(void *arg) {
  sweep_t *sw = arg;
  char buf[FMT_NUMBER_MAX];
  uint64_t state = sw->seed;
  sw->failure[0] = '\0';
  for (long i = 0; i < sw->count; i++) {
    uint64_t r = rand_u64(&state);
    int bad;
    if (sw->as_float) {
      float f = f_from_bits((uint32_t)r);
      if (!isfinite(f)) continue;
      fmt_float(f, buf);
      bad = !same_float(strtof(buf, NULL), f) || strchr(buf, ',') != NULL;
      if (bad)
        snprintf(sw->failure, sizeof sw->failure, "float %08x -> \"%s\"",
                 (unsigned)(uint32_t)r, buf);
    } else {
      double d = d_from_bits(r);
      if (!isfinite(d)) continue;
      fmt_double(d, buf);
      bad = !same_double(strtod(buf, NULL), d) || strchr(buf, ',') != NULL;
      if (bad)
        snprintf(sw->failure, sizeof sw->failure, "double %016llx -> \"%s\"",
                 (unsigned long long)r, buf);
    }
    if (bad) break;
  }
  return NULL;
}

/* count values split over up to 4 threads (fmt is documented thread-safe;
 * the split also keeps the suite fast). */
static void sweep(long count, int as_float, uint64_t seed) {
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  int nthreads = ncpu < 1 ? 1 : ncpu > 4 ? 4 : (int)ncpu;
  sweep_t sw[4];
  pthread_t tid[4];
  for (int t = 0; t < nthreads; t++) {
    sw[t].seed = seed + 0x1000003ull * (uint64_t)t;
    sw[t].count = count / nthreads;
    sw[t].as_float = as_float;
    ck_assert_int_eq(pthread_create(&tid[t], NULL, sweep_run, &sw[t]), 0);
  }
  for (int t = 0; t < nthreads; t++) pthread_join(tid[t], NULL);
  for (int t = 0; t < nthreads; t++)
    if (sw[t].failure[0]) ck_abort_msg("round trip failed: %s", sw[t].failure);
}

START_TEST(test_roundtrip_random_floats) { sweep(2000000, 1, 1); }
END_TEST

START_TEST(test_roundtrip_random_doubles) { sweep(500000, 0, 2); }
END_TEST

/* ---- shortest-ness ------------------------------------------------------- */

static void shortest_float(float f) {
  char buf[FMT_NUMBER_MAX];
  fmt_float(f, buf);
  const char *why = check_shortest(f, 1, buf);
  if (why) ck_abort_msg("fmt_float(%a) = \"%s\": %s", (double)f, buf, why);
}

static void shortest_double(double d) {
  char buf[FMT_NUMBER_MAX];
  fmt_double(d, buf);
  const char *why = check_shortest(d, 0, buf);
  if (why) ck_abort_msg("fmt_double(%a) = \"%s\": %s", d, buf, why);
}

START_TEST(test_shortest_random) {
  uint64_t state = 3;
  for (int i = 0; i < 60000; i++) {
    float f = f_from_bits((uint32_t)rand_u64(&state));
    if (isfinite(f)) shortest_float(f);
  }
  for (int i = 0; i < 20000; i++) {
    double d = d_from_bits(rand_u64(&state));
    if (isfinite(d)) shortest_double(d);
  }
  /* values of ordinary size, as normalized tensors have */
  for (int i = 0; i < 20000; i++) {
    double x = (double)(rand_u64(&state) >> 11) * 0x1p-53 * 8 - 4;
    shortest_float((float)x);
    shortest_double(x);
  }
}
END_TEST

/* Binade boundaries (mantissa field 0, where the gap below is half the gap
 * above) and their neighbours, for every exponent, plus the denormals
 * nearest zero and the largest ones. */
START_TEST(test_shortest_boundaries) {
  for (uint32_t e = 0; e < 255; e++)
    for (int sgn = 0; sgn < 2; sgn++) {
      uint32_t base = (uint32_t)sgn << 31 | e << 23;
      const uint32_t lows[] = {0, 1, 2, 0x400000u, 0x7FFFFEu, 0x7FFFFFu};
      for (size_t k = 0; k < sizeof lows / sizeof lows[0]; k++) {
        float f = f_from_bits(base | lows[k]);
        if (f != 0) shortest_float(f);
      }
    }
  for (uint32_t u = 1; u < 20000; u++) {
    shortest_float(f_from_bits(u));
    shortest_float(f_from_bits(0x800000u - u));
  }
  for (uint64_t e = 0; e < 2047; e++) {
    const uint64_t lows[] = {0, 1, 0x8000000000000ull, 0xFFFFFFFFFFFFFull};
    for (size_t k = 0; k < sizeof lows / sizeof lows[0]; k++) {
      double d = d_from_bits(e << 52 | lows[k]);
      if (d != 0) shortest_double(d);
    }
  }
  for (uint64_t u = 1; u < 2000; u++) shortest_double(d_from_bits(u));
}
END_TEST

/* A decimal of at most FLT_DIG (6) significant digits survives a trip
 * through float unchanged (DBL_DIG = 15 for double), so the shortest text
 * of strtof(s) is s itself: what a client sends comes back as sent. */
START_TEST(test_decimal_in_decimal_out) {
  uint64_t state = 4;
  char in[64], out[FMT_NUMBER_MAX];
  for (int i = 0; i < 60000; i++) {
    int as_float = i & 1;
    int digits = 1 + (int)(rand_u64(&state) % (as_float ? FLT_DIG : DBL_DIG));
    int exp = (int)(rand_u64(&state) % 61) - 30;
    uint64_t mant = rand_u64(&state) % 1000000000000000ull; /* 15 digits */
    char ds[24];
    snprintf(ds, sizeof ds, "%015llu", (unsigned long long)mant);
    ds[0] = (char)('1' + rand_u64(&state) % 9);
    ds[digits] = '\0';
    while (digits > 1 && ds[digits - 1] == '0') ds[--digits] = '\0';
    snprintf(in, sizeof in, "%s%c.%se%d", (i & 2) ? "-" : "", ds[0], ds + 1,
             exp);
    if (as_float)
      fmt_float(strtof(in, NULL), out);
    else
      fmt_double(strtod(in, NULL), out);
    sci_t a, b;
    to_sci(in, &a);
    to_sci(out, &b);
    if (!same_sci(&a, &b)) ck_abort_msg("\"%s\" came back as \"%s\"", in, out);
  }
}
END_TEST

/* ---- parsing: fmt_parse_double / fmt_parse_float -------------------------- */

/* Parses text (NUL-terminated here) with both functions from a heap copy
 * of exactly its length, without the NUL, so that a read past len is an
 * ASan error; returns the length fmt_parse_double took and checks that
 * fmt_parse_float took the same. */
static size_t parse_both(const char *text, double *d, float *f) {
  size_t len = strlen(text);
  char *copy = malloc(len ? len : 1);
  ck_assert_ptr_nonnull(copy);
  memcpy(copy, text, len);
  size_t n = fmt_parse_double(copy, len, d);
  size_t nf = fmt_parse_float(copy, len, f);
  free(copy);
  if (n != nf)
    ck_abort_msg("\"%s\": parse_double took %zu, parse_float %zu", text, n, nf);
  return n;
}

static int is_digit_char(char c) { return c >= '0' && c <= '9'; }

/* The longest prefix in the grammar; 0 when there is none, and then the
 * output is left alone. */
START_TEST(test_parse_grammar) {
  static const struct {
    const char *text;
    size_t want;
  } cases[] = {
      {"0", 1},        {"-0", 2},         {"7", 1},          {"-7", 2},
      {"123", 3},      {"1.5", 3},        {"-1.5e3]", 6},    {"1e5", 3},
      {"1E+05", 5},    {"1e-5,", 4},      {"0.0", 3},        {"0e0", 3},
      {"0.25 ", 4},    {"12,3", 2},       {"1]", 1},         {"01", 1},
      {"00", 1},       {"-01", 2},        {"0123.5", 1},     {"1.", 1},
      {"1.e5", 1},     {"-1.]", 2},       {"1e", 1},         {"1e+", 1},
      {"1E-", 1},      {"1e+x", 1},       {"2.5e", 3},       {"1ee5", 1},
      {"1.2.3", 3},    {"1e5.5", 3},      {"1e5e5", 3},      {"0x10", 1},
      {"1_000", 1},    {"9.", 1},         {"-0.0e-0", 7},    {"5e0000012", 9},
      {"", 0},         {"-", 0},          {"+1", 0},         {".5", 0},
      {"-.5", 0},      {"abc", 0},        {"NaN", 0},        {"Infinity", 0},
      {"-Infinity", 0}, {" 1", 0},        {"- 1", 0},        {"--1", 0},
      {"e5", 0},       {"\xe2\x88\x92" "1", 0}, /* U+2212 minus */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    double d = 42;
    float f = 42;
    size_t n = parse_both(cases[i].text, &d, &f);
    ck_assert_msg(n == cases[i].want, "\"%s\": took %zu, want %zu",
                  cases[i].text, n, cases[i].want);
    if (n == 0) {
      ck_assert(d == 42 && f == 42); /* untouched */
      continue;
    }
    /* the value is that of the prefix */
    char prefix[64];
    memcpy(prefix, cases[i].text, n);
    prefix[n] = '\0';
    ck_assert_msg(same_double(d, strtod(prefix, NULL)), "\"%s\"", cases[i].text);
    ck_assert_msg(same_float(f, strtof(prefix, NULL)), "\"%s\"", cases[i].text);
  }
}
END_TEST

/* Only len bytes are read: the number ends at len, even mid-digits, and
 * no NUL is needed (the heap copies of parse_both have none). */
START_TEST(test_parse_bounded) {
  const char *text = "123456789012345678901234.5e+12";
  const size_t lens[] = {1, 7, 8, 9, 16, 17, 19, 20, 24, 25, 26, 27, 28, 29, 30};
  for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
    size_t len = lens[i];
    char *copy = malloc(len);
    ck_assert_ptr_nonnull(copy);
    memcpy(copy, text, len);
    char prefix[64];
    memcpy(prefix, text, len);
    prefix[len] = '\0';
    char *end;
    double want = strtod(prefix, &end);
    size_t want_len = (size_t)(end - prefix);
    if (prefix[want_len - 1] == '.') want_len--; /* strtod takes "1." */
    double d;
    float f;
    ck_assert_uint_eq(fmt_parse_double(copy, len, &d), want_len);
    ck_assert_uint_eq(fmt_parse_float(copy, len, &f), want_len);
    ck_assert_msg(same_double(d, want), "len %zu", len);
    ck_assert_msg(same_float(f, strtof(prefix, NULL)), "len %zu", len);
    free(copy);
  }
  double d = 42;
  ck_assert_uint_eq(fmt_parse_double("1", 0, &d), 0);
  ck_assert(d == 42);
}
END_TEST

/* A text inside a long array, where at least FMT__WINDOW (40) bytes
 * follow a number's start and fmt_scan.h's windowed scan reads it: each
 * text followed by a separator and 48 more bytes of other numbers must
 * parse as the text alone (the general scan: fewer bytes than the
 * window). The edges of the window: integer parts of 1 to 8 digits (8
 * leaves it), '.' at each byte of the first word, 8, 9, 16, 17, 19, 20
 * and 24 digits, exponents of 1 to 8 digits, and texts whose number ends
 * before a '.', 'e' or sign. */
START_TEST(test_parse_in_window) {
  static const char *const texts[] = {
      "0", "-0", "7", "12", "1234567", "12345678", "-123456789", "0.5", "-0.123456",
      "1.234567", "12.345678", "123.45678", "1234.5678", "12345.678", "123456.78",
      "1234567.8", "12345678.9", "0.12345678", "0.123456789", "-0.1234567890123456",
      "0.12345678901234567", "1.2345678901234567", "0.123456789012345678",
      "0.1234567890123456789", "1.234567890123456789", "0.12345678901234567890123",
      "1.5e3", "1.5E+3", "1.5e-05", "1e1234567", "1e12345678", "1e-1234567", "-0.0e-0",
      "5e0000012", "1.7976931348623157e308", "1.7976931348623159e308", "4.9e-324",
      "2.2250738585072011e-308", "2.2250738585072014e-308", "1e-400", "1e400",
      "9007199254740993", "9007199254740993.5", "1e22", "1e23", "0.000000", "-0.000000",
      "01", "00.5", "-01.5", "1.", "1.e5", "-1.]", "1e", "1e+", "1E-x", "1ee5", "1.2.3",
      "1e5.5", "0x10", "-", "+1", ".5", "-.5", "--1", "e5", "-e5", "1..5", "1.5e",
  };
  static const char *const separators[] = {",", "]", ", ", " ", "\n,", ",-", "e", ".", "E+"};
  for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
    size_t tlen = strlen(texts[i]);
    double alone = 42;
    size_t want = fmt_parse_double(texts[i], tlen, &alone);
    for (size_t s = 0; s < sizeof separators / sizeof separators[0]; s++) {
      char text[160];
      int len = snprintf(text, sizeof text, "%s%s%s", texts[i], separators[s],
                         "1.5,-0.25,3e5,1234567,0.000001,[1],2.75,-1,]]");
      double d = 42;
      size_t n = fmt_parse_double(text, (size_t)len, &d);
      /* a separator may extend no text of a whole number: "1" and "e"
       * are "1", but "1" and "." followed by "1.5" is "1.1" */
      char joined[160];
      snprintf(joined, sizeof joined, "%.*s", (int)n, text);
      double want_d = 42;
      size_t want_n = fmt_parse_double(joined, n, &want_d);
      ck_assert_msg(want_n == n && same_double(d, want_d), "\"%s\": took %zu", text, n);
      if (n <= tlen) /* the separator extended nothing */
        ck_assert_msg(n == want && same_double(d, alone), "\"%s\": took %zu, want %zu",
                      text, n, want);
    }
  }
}
END_TEST

/* The edges of scan_number's common path (<= 19 digits, leading zeros
 * counted) and where it hands over to the general scan: integer and
 * fraction parts of 7, 8, 9, 16, 19 and 20 digits (a word of eight digit
 * bytes, one more, one less), leading zeros, zero with an exponent, a
 * separator right after the number, and each text cut at every length
 * (the word read must stop at len). Each against strtod / strtof. */
START_TEST(test_parse_word_edges) {
  static const char *const texts[] = {
      "1234567", "12345678", "123456789", "1234567890123456",
      "1234567890123456789", "12345678901234567890", "0.1234567", "0.12345678",
      "0.123456789", "-0.1234567890123456", "0.123456789012345678",
      "0.1234567890123456789", "1.2345678901234567890", "12345678.12345678",
      "1234567890.123456789", "0.000123", "-0.00000000000000000123",
      "0.0000000000000000001234567", "-0", "-0.0", "0e5", "0E-5", "-0e+0",
      "1e22", "1e23", "9007199254740993", "9007199254740993.0", "1.5e-45",
      "3.4028235e38", "4.9e-324", "2.2250738585072011e-308", "1e-400",
      "123456.7e-3", "0.12345678e8", "0.00000000", "7.00000000",
      "1.00000000000000000001", "999999999999999999.9", "0.00000000001e11",
  };
  static const char *const separators[] = {"", ",", "]", " ", "\n", ",1", "]]"};
  for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
    size_t tlen = strlen(texts[i]);
    for (size_t s = 0; s < sizeof separators / sizeof separators[0]; s++) {
      char text[96];
      snprintf(text, sizeof text, "%s%s", texts[i], separators[s]);
      double d;
      float f;
      ck_assert_msg(parse_both(text, &d, &f) == tlen, "\"%s\"", text);
      ck_assert_msg(same_double(d, strtod(texts[i], NULL)), "\"%s\"", text);
      ck_assert_msg(same_float(f, strtof(texts[i], NULL)), "\"%s\"", text);
    }
    /* cut at every length: the longest prefix of the cut text */
    for (size_t len = 1; len < tlen; len++) {
      char *copy = malloc(len);
      ck_assert_ptr_nonnull(copy);
      memcpy(copy, texts[i], len);
      char prefix[96];
      memcpy(prefix, texts[i], len);
      prefix[len] = '\0';
      char *stop;
      double want = strtod(prefix, &stop);
      size_t want_len = (size_t)(stop - prefix);
      /* strtod takes "1." and "1e" no further than JSON, but "1." itself */
      if (want_len > 0 && prefix[want_len - 1] == '.') want_len--;
      if (prefix[0] == '0' && want_len > 1 && is_digit_char(prefix[1])) want_len = 1;
      double d = 42;
      size_t n = fmt_parse_double(copy, len, &d);
      if (want_len == 1 && prefix[0] == '-') want_len = 0;
      ck_assert_msg(n == want_len, "\"%s\" cut at %zu: took %zu, want %zu", texts[i],
                    len, n, want_len);
      if (n > 0) {
        prefix[n] = '\0';
        ck_assert_msg(same_double(d, strtod(prefix, NULL)), "\"%s\" cut at %zu", texts[i], len);
      }
      (void)want;
      free(copy);
    }
  }
}
END_TEST

typedef struct {
  const char *text;
  uint64_t bits;
} parsed_double_t;

static void check_parse_double(const char *text, uint64_t want) {
  double d;
  float f;
  size_t n = parse_both(text, &d, &f);
  uint64_t got;
  memcpy(&got, &d, sizeof got);
  if (n != strlen(text) || got != want)
    ck_abort_msg("\"%.60s...\" (%zu chars): took %zu, got %016llx, want %016llx",
                 text, strlen(text), n, (unsigned long long)got,
                 (unsigned long long)want);
  if (!same_double(d, strtod(text, NULL)))
    ck_abort_msg("\"%.60s\": differs from strtod", text);
  if (!same_float(f, strtof(text, NULL)))
    ck_abort_msg("\"%.60s\": fmt_parse_float differs from strtof", text);
}

static void check_parse_float(const char *text, uint32_t want) {
  double d;
  float f;
  size_t n = parse_both(text, &d, &f);
  uint32_t got;
  memcpy(&got, &f, sizeof got);
  if (n != strlen(text) || got != want)
    ck_abort_msg("\"%.60s\" (%zu chars): took %zu, got %08x, want %08x", text,
                 strlen(text), n, (unsigned)got, (unsigned)want);
  if (!same_float(f, strtof(text, NULL)))
    ck_abort_msg("\"%.60s\": differs from strtof", text);
}

START_TEST(test_parse_known_doubles) {
  static const parsed_double_t cases[] = {
      {"0", 0},
      {"-0", 0x8000000000000000ull},
      {"-0.0e-5", 0x8000000000000000ull},
      {"0.000000000000000000000000000000", 0},
      {"0e999999999999999999999", 0},
      {"1", 0x3FF0000000000000ull},
      {"-2.5", 0xC004000000000000ull},
      {"0.1", 0x3FB999999999999Aull},
      {"1e23", 0x44B52D02C7E14AF6ull},
      {"8.41e21", 0x447C7E83209E90B2ull},
      {"1e-400", 0},
      {"-1e-400", 0x8000000000000000ull},
      {"1e-99999999999999999999999", 0},
      {"1e400", 0x7FF0000000000000ull},
      {"-1e400", 0xFFF0000000000000ull},
      {"1e99999999999999999999999", 0x7FF0000000000000ull},
      {"0.00000000000000000000000000000000000000000001e44", 0x3FF0000000000000ull},
      /* DBL_MAX; the midpoint above it is 1.797693134862315807937...e308 */
      {"1.7976931348623157e308", 0x7FEFFFFFFFFFFFFFull},
      {"1.7976931348623158e308", 0x7FEFFFFFFFFFFFFFull},
      {"1.797693134862315807e308", 0x7FEFFFFFFFFFFFFFull},
      {"1.797693134862315808e308", 0x7FF0000000000000ull}, /* the first to overflow */
      {"-1.797693134862315808e308", 0xFFF0000000000000ull},
      /* DBL_TRUE_MIN = 4.94e-324; half of it is 2.4703282292062327208...e-324 */
      {"4.9406564584124654e-324", 1},
      {"5e-324", 1},
      {"-5e-324", 0x8000000000000001ull},
      {"2.4703282292062327e-324", 0},
      {"2.4703282292062328e-324", 1},
      {"7.4109846876186982e-324", 2}, /* just above the tie 1.5 * TRUE_MIN */
      {"7.4109846876186981e-324", 1},
      /* around DBL_MIN: the value that hung PHP and Java */
      {"2.2250738585072011e-308", 0x000FFFFFFFFFFFFFull},
      {"2.2250738585072012e-308", 0x0010000000000000ull},
      {"2.2250738585072014e-308", 0x0010000000000000ull},
      /* 2^53 + 1 is a tie: to the even 2^53 */
      {"9007199254740993", 0x4340000000000000ull},
      {"9007199254740995", 0x4340000000000002ull},
      {"9007199254740993.0000000000000000001", 0x4340000000000001ull},
      {"9007199254740992.9999999999999999999", 0x4340000000000000ull},
      {"4503599627370496.5", 0x4330000000000000ull}, /* tie, q < 0: even */
      {"4503599627370497.5", 0x4330000000000002ull},
      {"123456789012345678901234567890", 0x45F8EE90FF6C373Eull},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    check_parse_double(cases[i].text, cases[i].bits);
}
END_TEST

START_TEST(test_parse_known_floats) {
  static const struct {
    const char *text;
    uint32_t bits;
  } cases[] = {
      {"0", 0},
      {"-0", 0x80000000u},
      {"1", 0x3F800000u},
      {"0.1", 0x3DCCCCCDu},
      {"1.3038095", 0x3FA6E33Bu},
      /* 1 + 2^-24 is the tie between 1 and 1 + 2^-23 */
      {"1.00000005960464477539062499", 0x3F800000u},
      {"1.000000059604644775390625", 0x3F800000u},
      {"1.00000005960464477539062501", 0x3F800001u},
      {"1.000000178813934326171875", 0x3F800002u}, /* 1 + 3 * 2^-24: to even */
      /* FLT_MAX; the midpoint above it is 3.4028235677973366163...e38 */
      {"3.4028235e38", 0x7F7FFFFFu},
      {"3.4028235677973365e38", 0x7F7FFFFFu},
      {"3.4028235677973366e38", 0x7F7FFFFFu},
      {"3.4028235677973367e38", 0x7F800000u}, /* the first to overflow */
      {"-3.4028235677973367e38", 0xFF800000u},
      {"1e39", 0x7F800000u},
      /* FLT_TRUE_MIN = 1.4e-45; half of it is 7.0064923216240853546...e-46 */
      {"1.4e-45", 1},
      {"1e-45", 1},
      {"7.0064923216240854e-46", 1},
      {"7.0064923216240853e-46", 0},
      {"-7.0064923216240853e-46", 0x80000000u},
      {"2.1019476964872256e-45", 1}, /* just below the tie 1.5 * TRUE_MIN */
      {"2.1019476964872257e-45", 2},
      {"1e-46", 0},
      {"1.1754942e-38", 0x007FFFFFu}, /* largest subnormal */
      {"1.1754944e-38", 0x00800000u}, /* FLT_MIN */
      /* double rounding: the double nearest is a float midpoint, the text
       * is not; casting strtod's result would give 0x5B77330C */
      {"6958044373267251e1", 0x5B77330Bu},
      {"69580443732672510", 0x5B77330Bu},
      {"5397493346572698e1", 0x5B3FC1EBu},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    check_parse_float(cases[i].text, cases[i].bits);
}
END_TEST

/* ---- exact midpoints ------------------------------------------------------ */

/* A decimal bignum, base 10^9, little-endian: enough for m * 2^e with
 * m < 2^55 and e in [-1075, 971] (at most 770 digits). */
typedef struct {
  uint32_t limb[100];
  int n;
} dec_big_t;

static void dec_mul_small(dec_big_t *b, uint32_t k) {
  uint64_t carry = 0;
  for (int i = 0; i < b->n; i++) {
    uint64_t p = (uint64_t)b->limb[i] * k + carry;
    b->limb[i] = (uint32_t)(p % 1000000000u);
    carry = p / 1000000000u;
  }
  while (carry) {
    ck_assert_int_lt(b->n, 100);
    b->limb[b->n++] = (uint32_t)(carry % 1000000000u);
    carry /= 1000000000u;
  }
}

/* The exact decimal of m * 2^e: its significant digits (no leading or
 * trailing zeros) and the exponent of the first one. */
static void exact_decimal(uint64_t m, int e, char *digits, int *exp10) {
  dec_big_t b = {{0}, 0};
  for (uint64_t v = m; v; v /= 1000000000u) b.limb[b.n++] = (uint32_t)(v % 1000000000u);
  int shift10 = 0; /* m * 2^e = m * 5^-e * 10^e for e < 0 */
  for (int k = e; k > 0; k -= 28) dec_mul_small(&b, 1u << (k < 28 ? k : 28));
  for (int k = -e; k > 0; k -= 12) {
    uint32_t p5 = 1;
    for (int j = 0; j < (k < 12 ? k : 12); j++) p5 *= 5;
    dec_mul_small(&b, p5);
  }
  if (e < 0) shift10 = e;
  int len = sprintf(digits, "%u", b.limb[b.n - 1]);
  for (int i = b.n - 2; i >= 0; i--) len += sprintf(digits + len, "%09u", b.limb[i]);
  *exp10 = len - 1 + shift10;
  while (len > 1 && digits[len - 1] == '0') digits[--len] = '\0';
}

/* "d.ddd" + tail + "e<exp10>" */
static void sci_text(char *out, const char *digits, const char *tail, int exp10) {
  sprintf(out, "%c%s%s%se%d", digits[0], digits[1] || *tail ? "." : "", digits + 1,
          tail, exp10);
}

/* Texts at, just below and just above the midpoint m * 2^e between two
 * neighbours (bits lower and lower + 1; the even one wins a tie), from 17
 * to over 1000 digits; each must parse to the right side, as strtod or
 * strtof does. */
static void check_midpoint(uint64_t m, int e, uint64_t lower, int as_float) {
  static char digits[1200], tail[1200], text[2600];
  int exp10;
  exact_decimal(m, e, digits, &exp10);
  size_t nd = strlen(digits);
  uint64_t even = lower & 1 ? lower + 1 : lower;
  const size_t lengths[] = {nd, 790, 800, 801, 805, 1100};
  for (size_t k = 0; k < sizeof lengths / sizeof lengths[0]; k++) {
    size_t pad = lengths[k] > nd ? lengths[k] - nd : 0;
    /* the midpoint itself, padded with zeros */
    memset(tail, '0', pad);
    tail[pad] = '\0';
    sci_text(text, digits, tail, exp10);
    if (as_float) check_parse_float(text, (uint32_t)even);
    else check_parse_double(text, even);
    /* above: ...0001 */
    memset(tail, '0', pad + 1);
    tail[pad + 1] = '1';
    tail[pad + 2] = '\0';
    sci_text(text, digits, tail, exp10);
    if (as_float) check_parse_float(text, (uint32_t)lower + 1);
    else check_parse_double(text, lower + 1);
    /* below: the last digit one less, then 9s */
    char saved = digits[nd - 1];
    if (nd > 1 || saved > '1') {
      digits[nd - 1] = (char)(saved - 1);
      memset(tail, '9', pad + 1);
      tail[pad + 1] = '\0';
      sci_text(text, digits, tail, exp10);
      digits[nd - 1] = saved;
      if (as_float) check_parse_float(text, (uint32_t)lower);
      else check_parse_double(text, lower);
    }
  }
  /* cut to 17..25 significant digits, down and up: whatever strtod says */
  for (size_t cut = 17; cut <= 25 && cut < nd; cut++) {
    char head[32];
    memcpy(head, digits, cut);
    head[cut] = '\0';
    for (int up = 0; up < 2; up++) {
      if (up) { /* + 1 in the last place */
        int i = (int)cut - 1;
        while (i >= 0 && head[i] == '9') head[i--] = '0';
        if (i < 0) continue;
        head[i]++;
      }
      sci_text(text, head, "", exp10);
      double d;
      float f;
      parse_both(text, &d, &f);
      if (!same_double(d, strtod(text, NULL)) || !same_float(f, strtof(text, NULL)))
        ck_abort_msg("\"%s\": differs from strtod / strtof", text);
    }
  }
}

/* The midpoint above the double (float) with these bits, as m * 2^e. */
static void double_midpoint_above(uint64_t bits) {
  uint64_t field = bits >> 52, frac = bits & 0xFFFFFFFFFFFFFull;
  uint64_t sig = field ? frac | 1ull << 52 : frac;
  int e = field ? (int)field - 1075 : -1074;
  check_midpoint(2 * sig + 1, e - 1, bits, 0);
}
static void float_midpoint_above(uint32_t bits) {
  uint32_t field = bits >> 23, frac = bits & 0x7FFFFFu;
  uint64_t sig = field ? frac | 1u << 23 : frac;
  int e = field ? (int)field - 150 : -149;
  check_midpoint(2 * sig + 1, e - 1, bits, 1);
}

START_TEST(test_parse_midpoints) {
  const uint64_t doubles[] = {
      0,                     /* 0 | TRUE_MIN: the tie goes to 0 */
      1, 2,                  /* the smallest subnormals */
      0x000FFFFFFFFFFFFFull, /* the largest subnormal | DBL_MIN */
      0x0010000000000000ull, /* DBL_MIN */
      0x3FF0000000000000ull, /* 1 */
      0x433FFFFFFFFFFFFFull, /* 2^53 - 1 | 2^53 */
      0x4340000000000000ull, /* 2^53 | 2^53 + 2 */
      0x7FEFFFFFFFFFFFFEull,
      0x7FEFFFFFFFFFFFFFull, /* DBL_MAX | infinity: to infinity */
  };
  for (size_t i = 0; i < sizeof doubles / sizeof doubles[0]; i++)
    double_midpoint_above(doubles[i]);
  const uint32_t floats[] = {0,           1,           2,           0x007FFFFFu,
                             0x00800000u, 0x3F800000u, 0x4B7FFFFFu, 0x7F7FFFFEu,
                             0x7F7FFFFFu};
  for (size_t i = 0; i < sizeof floats / sizeof floats[0]; i++)
    float_midpoint_above(floats[i]);
  uint64_t state = 11;
  for (int i = 0; i < 40; i++) {
    uint64_t b = rand_u64(&state) & 0x7FFFFFFFFFFFFFFFull;
    if (b < 0x7FF0000000000000ull) double_midpoint_above(b);
    uint32_t b32 = (uint32_t)rand_u64(&state) & 0x7FFFFFFFu;
    if (b32 < 0x7F800000u) float_midpoint_above(b32);
  }
}
END_TEST

/* Digits far beyond what matters, and exponents that bring them back. */
START_TEST(test_parse_long) {
  static char text[12000];
  /* 1 followed by 5000 zeros, times 10^-5000 */
  text[0] = '1';
  memset(text + 1, '0', 5000);
  strcpy(text + 5001, "e-5000");
  check_parse_double(text, 0x3FF0000000000000ull);
  check_parse_float(text, 0x3F800000u);
  /* 0.000...0001 (5000 zeros) times 10^5001 */
  strcpy(text, "0.");
  memset(text + 2, '0', 5000);
  strcpy(text + 5002, "1e5001");
  check_parse_double(text, 0x3FF0000000000000ull);
  /* 10000 nines after "0.": rounds to 1 */
  strcpy(text, "0.");
  memset(text + 2, '9', 10000);
  text[10002] = '\0';
  check_parse_double(text, 0x3FF0000000000000ull);
  check_parse_float(text, 0x3F800000u);
  /* 2^-1074 written out in full (751 digits) stays itself */
  char digits[1200];
  int exp10;
  exact_decimal(1, -1074, digits, &exp10);
  sci_text(text, digits, "", exp10);
  check_parse_double(text, 1);
}
END_TEST

/* Only the "C" spelling counts, whatever the locale, and errno is left
 * alone even where strtod would set ERANGE. */
START_TEST(test_parse_errno_locale) {
  static char text[1300];
  char digits[1200];
  int exp10;
  /* the tie above 0: goes the exact (strtod) way, which underflows */
  exact_decimal(1, -1075, digits, &exp10);
  sci_text(text, digits, "1", exp10);
  const char *texts[] = {"1e-400", "1e400", "2.4703282292062328e-324", "1.5",
                         "-0.000123456789012345678901234", text};
  double want[6];
  float want_f[6];
  for (int i = 0; i < 6; i++) {
    want[i] = strtod(texts[i], NULL);
    want_f[i] = strtof(texts[i], NULL);
  }
  errno = 0;
  for (int i = 0; i < 6; i++) {
    double d;
    float f;
    parse_both(texts[i], &d, &f);
    ck_assert(same_double(d, want[i]) && same_float(f, want_f[i]));
  }
  ck_assert_int_eq(errno, 0);
  static const char *const names[] = {"de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8",
                                      "ru_RU.UTF-8", "nl_NL.UTF-8", "de_DE"};
  for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
    if (!setlocale(LC_ALL, names[k])) continue;
    for (int i = 0; i < 6; i++) {
      double d;
      float f;
      parse_both(texts[i], &d, &f);
      if (!same_double(d, want[i]) || !same_float(f, want_f[i]))
        ck_abort_msg("under %s: \"%.40s\"", names[k], texts[i]);
    }
  }
  setlocale(LC_ALL, "C");
}
END_TEST

/* ---- random texts against strtod / strtof --------------------------------- */

/* A random JSON number: 1..25 significant digits, a point anywhere or
 * none, leading "0.000" sometimes, an exponent sometimes. */
static void random_number_text(uint64_t *state, char *out) {
  char *p = out;
  if (rand_u64(state) & 1) *p++ = '-';
  int nd = 1 + (int)(rand_u64(state) % 25);
  int point = (int)(rand_u64(state) % (unsigned)(nd + 1)); /* nd: none */
  if (rand_u64(state) % 4 == 0) {
    p += sprintf(p, "0.");
    for (int z = (int)(rand_u64(state) % 12); z > 0; z--) *p++ = '0';
    point = nd;
  }
  for (int i = 0; i < nd; i++) {
    if (i == point && i > 0) *p++ = '.';
    char c = (char)('0' + rand_u64(state) % 10);
    if (i == 0 && c == '0' && (p == out || p[-1] != '0')) c = '1';
    *p++ = c;
  }
  if (rand_u64(state) % 3) {
    int exp = (int)(rand_u64(state) % 700) - 360;
    p += sprintf(p, "%s%d", rand_u64(state) & 1 ? "e" : "E", exp);
  }
  *p = '\0';
}

typedef struct {
  uint64_t seed;
  long count;
  char failure[200];
} parse_sweep_t;

/* On its own thread: no Check calls; the first failure is returned. */
static void *parse_sweep_run(void *arg) {
  parse_sweep_t *sw = arg;
  uint64_t state = sw->seed;
  char text[96];
  sw->failure[0] = '\0';
  for (long i = 0; i < sw->count; i++) {
    uint64_t r = rand_u64(&state);
    double x = d_from_bits(rand_u64(&state));
    float xf = f_from_bits((uint32_t)rand_u64(&state));
    switch (r % 5) {
    case 0:
    case 1: random_number_text(&state, text); break;
    case 2:
      if (!isfinite(x)) continue;
      snprintf(text, sizeof text, "%.*g", 1 + (int)(r / 8 % 17), x);
      break;
    case 3:
      if (!isfinite(x)) continue;
      fmt_double(x, text);
      break;
    default:
      if (!isfinite(xf)) continue;
      if (r & 8) fmt_float(xf, text);
      else snprintf(text, sizeof text, "%.*g", 1 + (int)(r / 16 % 9), (double)xf);
    }
    size_t len = strlen(text);
    double d;
    float f;
    size_t n = fmt_parse_double(text, len, &d);
    size_t nf = fmt_parse_float(text, len, &f);
    if (n != len || nf != len || !same_double(d, strtod(text, NULL)) ||
        !same_float(f, strtof(text, NULL))) {
      snprintf(sw->failure, sizeof sw->failure,
               "\"%s\": took %zu / %zu, got %a / %a, strtod %a / strtof %a", text, n,
               nf, d, (double)f, strtod(text, NULL), (double)strtof(text, NULL));
      break;
    }
  }
  return NULL;
}

/* Split over 4 threads, which also races the tables' first use. */
START_TEST(test_parse_random) {
  parse_sweep_t sw[4];
  pthread_t tid[4];
  for (int t = 0; t < 4; t++) {
    sw[t].seed = 100 + 0x1000003ull * (uint64_t)t;
    sw[t].count = 200000;
    ck_assert_int_eq(pthread_create(&tid[t], NULL, parse_sweep_run, &sw[t]), 0);
  }
  for (int t = 0; t < 4; t++) pthread_join(tid[t], NULL);
  for (int t = 0; t < 4; t++)
    if (sw[t].failure[0]) ck_abort_msg("%s", sw[t].failure);
}
END_TEST

Suite *fmt_suite(void) {
  Suite *s = suite_create("fmt");
  TCase *tc = tcase_create("Core");
  tcase_add_test(tc, test_known_floats);
  tcase_add_test(tc, test_known_doubles);
  tcase_add_test(tc, test_ryu_floats);
  tcase_add_test(tc, test_ryu_doubles);
  tcase_add_test(tc, test_layout);
  tcase_add_test(tc, test_longest);
  tcase_add_test(tc, test_nonfinite);
  tcase_add_test(tc, test_lists);
  tcase_add_test(tc, test_errno_untouched);
  tcase_add_test(tc, test_locale_independent);
  suite_add_tcase(s, tc);

  tc = tcase_create("Sweep");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_roundtrip_random_floats);
  tcase_add_test(tc, test_roundtrip_random_doubles);
  tcase_add_test(tc, test_shortest_random);
  tcase_add_test(tc, test_shortest_boundaries);
  tcase_add_test(tc, test_decimal_in_decimal_out);
  suite_add_tcase(s, tc);

  tc = tcase_create("Parse");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_parse_grammar);
  tcase_add_test(tc, test_parse_bounded);
  tcase_add_test(tc, test_parse_word_edges);
  tcase_add_test(tc, test_parse_in_window);
  tcase_add_test(tc, test_parse_known_doubles);
  tcase_add_test(tc, test_parse_known_floats);
  tcase_add_test(tc, test_parse_midpoints);
  tcase_add_test(tc, test_parse_long);
  tcase_add_test(tc, test_parse_errno_locale);
  tcase_add_test(tc, test_parse_random);
  suite_add_tcase(s, tc);
  return s;
}
