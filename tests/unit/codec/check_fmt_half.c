/* check_fmt_half.c -- fmt_parse_f16 / fmt_parse_bf16, exhaustively: every
 * one of the 65,536 bit patterns of each format printed (shortest float32
 * text, %.17g, the exact decimal) and parsed back to the same bits; every
 * midpoint between neighbours (and past the largest finite value), exactly
 * and with long tails just below and above it, against the neighbour the
 * construction says; the grammar contract; fmt_*_from_double_exact and
 * core's once-rounding from double (numarray's fast path) next to every
 * midpoint, and on random texts. The reference values come from the bits by
 * ldexp, not from the code under test. Loops report only failures
 * (ck_abort_msg). */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmt.h"
#include "norm.h"

/* ---- helpers ------------------------------------------------------------- */

typedef struct {
  const char *name;
  int sig_bits, bias; /* 11, 15 / 8, 127 */
  size_t (*parse)(const char *, size_t, uint16_t *);
  int (*exact)(double);
  uint16_t (*from_double)(double); /* core's, rounding once from double */
  uint16_t max_finite, inf;
} half_format_t;

static const half_format_t f16 = {.name = "float16",
                                  .sig_bits = 11,
                                  .bias = 15,
                                  .parse = fmt_parse_f16,
                                  .exact = fmt_f16_from_double_exact,
                                  .from_double = norm_f16_from_double,
                                  .max_finite = 0x7BFF,
                                  .inf = 0x7C00};
static const half_format_t bf16 = {.name = "bfloat16",
                                   .sig_bits = 8,
                                   .bias = 127,
                                   .parse = fmt_parse_bf16,
                                   .exact = fmt_bf16_from_double_exact,
                                   .from_double = norm_bf16_from_double,
                                   .max_finite = 0x7F7F,
                                   .inf = 0x7F80};

/* The value of finite, non-negative bits h (h <= inf: inf's "value" is the
 * one the next binade would start with, 2^(emax + 1)). */
static double half_value(const half_format_t *f, uint32_t h) {
  uint32_t field = h >> (f->sig_bits - 1);
  uint32_t frac = h & ((1u << (f->sig_bits - 1)) - 1);
  if (field == 0) return ldexp(frac, 1 - f->bias - (f->sig_bits - 1));
  return ldexp(frac | 1u << (f->sig_bits - 1),
               (int)field - f->bias - (f->sig_bits - 1));
}

static uint16_t parse_all(const half_format_t *f, const char *text) {
  uint16_t h = 0xDEAD;
  size_t n = f->parse(text, strlen(text), &h);
  if (n != strlen(text))
    ck_abort_msg("%s: \"%s\" took %zu bytes of %zu", f->name, text, n,
                 strlen(text));
  return h;
}

/* The exact decimal of d (a half value or midpoint: at most 140 digits) as
 * significant digits without trailing zeros and the exponent of the first:
 * d = digits[0].digits[1..] x 10^*exp10. */
static void exact_decimal(double d, char *digits, int *exp10) {
  char buf[256];
  snprintf(buf, sizeof buf, "%.180e", d); /* glibc prints exactly */
  char *e = strchr(buf, 'e');
  *exp10 = atoi(e + 1);
  int n = 0;
  for (char *p = buf; p < e; p++)
    if (*p != '.') digits[n++] = *p;
  while (n > 1 && digits[n - 1] == '0') n--;
  digits[n] = '\0';
}

/* digits as a JSON number d.ddd<tail>e<exp10>, with a sign. */
static void number_text(char *out, size_t cap, int neg, const char *digits,
                        const char *tail, int exp10) {
  snprintf(out, cap, "%s%c%s%s%se%d", neg ? "-" : "", digits[0],
           digits[1] || tail[0] ? "." : "", digits + 1, tail, exp10);
}

/* ---- round trips --------------------------------------------------------- */

static void check_roundtrip(const half_format_t *f) {
  for (uint32_t h = 0; h <= 0xFFFF; h++) {
    uint32_t mag = h & 0x7FFF;
    if (mag >= f->inf) continue; /* infinities and NaN are not numbers */
    double x = half_value(f, mag) * (h >> 15 ? -1 : 1);
    char text[FMT_NUMBER_MAX], g17[40], exact[256];
    fmt_float((float)x, text); /* exact: x is a float */
    snprintf(g17, sizeof g17, "%.17g", x);
    snprintf(exact, sizeof exact, "%.160g", x);
    const char *texts[] = {text, g17, exact};
    for (int i = 0; i < 3; i++) {
      uint16_t got = parse_all(f, texts[i]);
      if (got != h)
        ck_abort_msg("%s 0x%04x: \"%s\" parsed to 0x%04x", f->name, h, texts[i],
                     got);
    }
  }
}

START_TEST(test_f16_roundtrip_all) { check_roundtrip(&f16); }
END_TEST

START_TEST(test_bf16_roundtrip_all) { check_roundtrip(&bf16); }
END_TEST

/* ---- midpoints ----------------------------------------------------------- */

/* Between h and h + 1 (h + 1 may be infinity) for every finite h >= 0: the
 * exact midpoint goes to the even one, a tail of 10^-40 relative below it
 * to h, above it to h + 1; the same negated. Tails far below half a
 * double's ulp: the double of each text is the midpoint itself. */
static void check_midpoints(const half_format_t *f) {
  static const char *const zeros = "0000000000000000000000000000000000000000";
  static const char *const nines = "9999999999999999999999999999999999999999";
  for (uint32_t h = 0; h <= f->max_finite; h++) {
    double mid = (half_value(f, h) + half_value(f, h + 1)) / 2; /* exact */
    char digits[256], below[256], tail[64], text[400];
    int exp10;
    exact_decimal(mid, digits, &exp10);
    /* below: the last digit (not 0) less one, then nines */
    strcpy(below, digits);
    below[strlen(below) - 1]--;
    snprintf(tail, sizeof tail, "%s1", zeros);
    for (int neg = 0; neg <= 1; neg++) {
      uint16_t sign = (uint16_t)(neg << 15);
      struct {
        const char *digits, *tail;
        uint16_t want;
      } cases[] = {
          {digits, "", (uint16_t)(h & 1 ? h + 1 : h)},
          {digits, tail, (uint16_t)(h + 1)},
          {below, nines, (uint16_t)h},
      };
      for (int c = 0; c < 3; c++) {
        number_text(text, sizeof text, neg, cases[c].digits, cases[c].tail,
                    exp10);
        /* "0e-..." and friends are fine: a leading zero stands alone */
        uint16_t got = parse_all(f, text);
        uint16_t want = sign | cases[c].want;
        if (got != want)
          ck_abort_msg("%s midpoint above 0x%04x: \"%s\" parsed to 0x%04x, "
                       "want 0x%04x",
                       f->name, h, text, got, want);
      }
    }
    /* the doubles next to a midpoint are exact, and core rounds them once */
    double lo = nextafter(mid, 0), hi = nextafter(mid, INFINITY);
    if (f->exact(mid) || !f->exact(lo) || !f->exact(hi) ||
        f->from_double(lo) != h || f->from_double(hi) != h + 1)
      ck_abort_msg("%s: from_double_exact or core wrong around the midpoint "
                   "%.17g",
                   f->name, mid);
  }
}

START_TEST(test_f16_midpoints_all) { check_midpoints(&f16); }
END_TEST

START_TEST(test_bf16_midpoints_all) { check_midpoints(&bf16); }
END_TEST

/* ---- known values and the contract --------------------------------------- */

START_TEST(test_f16_known) {
  static const struct {
    const char *text;
    uint16_t want;
  } cases[] = {
      {"0", 0x0000},
      {"-0", 0x8000},
      {"-0.0e5", 0x8000},
      {"1", 0x3C00},
      {"-2", 0xC000},
      {"65504", 0x7BFF},
      {"65519.99999999999999999999999999", 0x7BFF},
      {"65520", 0x7C00}, /* the tie goes to even: infinity */
      {"65520.000000000000000000000000001", 0x7C00},
      {"-65520", 0xFC00},
      {"1e5", 0x7C00},
      {"1e400", 0x7C00},
      {"-1e400", 0xFC00},
      {"1.00048828125", 0x3C00}, /* 1 + 2^-11: a tie, to even */
      {"1.00048828125000000000000000001", 0x3C01},
      {"1.00048828124999999999999999999", 0x3C00},
      {"1.00146484375", 0x3C02},          /* 1 + 3 * 2^-11: a tie, to even */
      {"5.9604644775390625e-8", 0x0001},  /* 2^-24, the smallest subnormal */
      {"2.98023223876953125e-8", 0x0000}, /* half of it: a tie, to 0 */
      {"2.98023223876953125000000000000001e-8", 0x0001},
      {"-2.98023223876953125e-8", 0x8000},
      {"8.94069671630859375e-8", 0x0002},      /* 3 * 2^-25: a tie, to 2^-23 */
      {"6.1035156250e-5", 0x0400},             /* 2^-14, the smallest normal */
      {"0.0000610053539276123046875", 0x0400}, /* 2^-14 - 2^-25: a tie */
      {"0.0000610053539276123046874999999999", 0x03FF},
      {"1e-400", 0x0000},
      {"-1e-400", 0x8000},
      {"0.000000000000000000000000000000000000000000000000001", 0x0000},
      {"3.140625", 0x4248},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    uint16_t got = parse_all(&f16, cases[i].text);
    ck_assert_msg(got == cases[i].want, "\"%s\": 0x%04x, want 0x%04x",
                  cases[i].text, got, cases[i].want);
  }
}
END_TEST

START_TEST(test_bf16_known) {
  static const struct {
    const char *text;
    uint16_t want;
  } cases[] = {
      {"1", 0x3F80},
      {"-0", 0x8000},
      {"1.00390625", 0x3F80}, /* 1 + 2^-8: a tie, to even */
      {"1.00390625000000000000000000000000000001", 0x3F81},
      {"1.01171875", 0x3F82},            /* 1 + 3 * 2^-8: a tie, to even */
      {"3.3895313892515355e38", 0x7F7F}, /* the largest finite */
      /* (2^8 - 1/2) * 2^120, the midpoint past it: a tie, to infinity */
      {"339617752923046005526922703901628039168", 0x7F80},
      {"339617752923046005526922703901628039167.99999999999999", 0x7F7F},
      {"1e39", 0x7F80},
      {"9.183549615799121e-41", 0x0001},              /* 2^-133 */
      {"4.5917748078995605780028770985e-41", 0x0000}, /* < 2^-134 */
      {"4.5917748078995605780028770986e-41", 0x0001}, /* > 2^-134 */
      {"4.59177480789956057800287709852439717897916233114096688089356135265"
       "0067419745028018951416015625e-41",
       0x0000}, /* 2^-134: a tie, to 0 */
      {"1e-50", 0x0000},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    uint16_t got = parse_all(&bf16, cases[i].text);
    ck_assert_msg(got == cases[i].want, "\"%s\": 0x%04x, want 0x%04x",
                  cases[i].text, got, cases[i].want);
  }
}
END_TEST

/* The longest valid prefix, as fmt_parse_double: its length, 0 and *out
 * untouched when there is none. */
START_TEST(test_half_grammar) {
  static const struct {
    const char *text;
    size_t len;
  } cases[] = {{"01", 1},      {"1.", 1}, {"1e", 1}, {"2e+x", 1},
               {"-1.5e3]", 6}, {"-", 0},  {"+1", 0}, {".5", 0},
               {"NaN", 0},     {"", 0},   {"-x", 0}, {"65520,", 5}};
  const half_format_t *fs[] = {&f16, &bf16};
  for (int k = 0; k < 2; k++)
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
      uint16_t h = 0xDEAD;
      size_t n = fs[k]->parse(cases[i].text, strlen(cases[i].text), &h);
      ck_assert_msg(n == cases[i].len, "%s \"%s\": %zu, want %zu", fs[k]->name,
                    cases[i].text, n, cases[i].len);
      if (n == 0) ck_assert_uint_eq(h, 0xDEAD);
    }
  /* len bounds the read: "1.5" cut to 1 byte is "1" */
  uint16_t h;
  ck_assert_uint_eq(fmt_parse_f16("1.5", 1, &h), 1);
  ck_assert_uint_eq(h, 0x3C00);
}
END_TEST

/* splitmix64 */
static uint64_t rand_u64(uint64_t *state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* Random texts of 1..17 digits over both formats' ranges: whenever the
 * double is no midpoint, the text's value is core's once-rounding of it. */
START_TEST(test_half_random_agree_with_core) {
  uint64_t seed = 42;
  const half_format_t *fs[] = {&f16, &bf16};
  for (int i = 0; i < 400000; i++) {
    const half_format_t *f = fs[i & 1];
    uint64_t r = rand_u64(&seed);
    int nd = 1 + (int)(r % 17);
    int span = f == &f16 ? 14 : 50;
    int exp10 = (int)((r >> 8) % (uint64_t)(2 * span)) - span - nd;
    uint64_t low = 1; /* nd digits: [10^(nd - 1), 10^nd) */
    for (int k = 1; k < nd; k++) low *= 10;
    char text[64];
    snprintf(text, sizeof text, "%s%llue%d", (r >> 40) & 1 ? "-" : "",
             (unsigned long long)(low + rand_u64(&seed) % (9 * low)), exp10);
    double d;
    fmt_parse_double(text, strlen(text), &d);
    if (!f->exact(d)) continue;
    uint16_t got = parse_all(f, text), want = f->from_double(d);
    if (got != want)
      ck_abort_msg("%s \"%s\": 0x%04x, core 0x%04x", f->name, text, got, want);
  }
}
END_TEST

Suite *fmt_half_suite(void) {
  Suite *s = suite_create("fmt_half");
  TCase *tc = tcase_create("Core");
  tcase_add_test(tc, test_f16_known);
  tcase_add_test(tc, test_bf16_known);
  tcase_add_test(tc, test_half_grammar);
  suite_add_tcase(s, tc);

  tc = tcase_create("Exhaustive");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_f16_roundtrip_all);
  tcase_add_test(tc, test_bf16_roundtrip_all);
  tcase_add_test(tc, test_f16_midpoints_all);
  tcase_add_test(tc, test_bf16_midpoints_all);
  tcase_add_test(tc, test_half_random_agree_with_core);
  suite_add_tcase(s, tc);
  return s;
}
