/* check_dtype.c -- dtype names and sizes, and the float16 / bfloat16
 * conversions: exhaustive round trips over every 16-bit pattern, and
 * float -> half rounding against GCC's _Float16 (IEEE round-to-nearest-even)
 * and a brute-force nearest-bfloat16 reference. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "testutil.h"

static float bits_to_float(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

START_TEST(test_names) {
  norm_dtype_t d;
  const char *names[] = {"float32", "float64", "float16", "bfloat16"};
  const size_t sizes[] = {4, 8, 2, 2};
  for (int i = 0; i < NORM_DTYPE_COUNT; i++) {
    ck_assert_int_eq(norm_dtype_from_name(names[i], &d), NORM_OK);
    ck_assert_int_eq(d, i);
    ck_assert_str_eq(norm_dtype_name(d), names[i]);
    ck_assert_uint_eq(norm_dtype_size(d), sizes[i]);
  }
  ck_assert_int_eq(norm_dtype_from_name("float", &d), NORM_E_DTYPE);
  ck_assert_int_eq(norm_dtype_from_name("int8", &d), NORM_E_DTYPE);
  ck_assert_int_eq(norm_dtype_from_name(NULL, &d), NORM_E_NULL);
  ck_assert_ptr_null(norm_dtype_name((norm_dtype_t)99));
  ck_assert_uint_eq(norm_dtype_size((norm_dtype_t)99), 0);
}
END_TEST

/* Every half pattern widens exactly and narrows back to itself (NaNs come
 * back as quiet NaNs with the same sign). */
START_TEST(test_f16_roundtrip_all) {
  for (uint32_t h = 0; h < 65536; h++) {
    float f = norm_float_from_f16((uint16_t)h);
    uint16_t back = norm_f16_from_float(f);
    int ok = ((h & 0x7C00u) == 0x7C00u && (h & 0x3FFu))
                 ? isnan(f) && (back & 0xFE00u) == ((h & 0x8000u) | 0x7E00u)
                 : back == h && f == (float)(_Float16)f;
    if (!ok) ck_abort_msg("f16 round trip of %04x gave %04x", h, back);
  }
}
END_TEST

static void check_f16_against_gcc(float f) {
  _Float16 ref = (_Float16)f;
  uint16_t want;
  memcpy(&want, &ref, sizeof want);
  uint16_t got = norm_f16_from_float(f);
  /* ck_assert only on failure: each Check assertion costs a pipe write */
  if (isnan(f) ? (got & 0x7E00u) != 0x7E00u : got != want)
    ck_abort_msg("f16(%a) = %04x, want %04x", (double)f, got, want);
}

START_TEST(test_f16_rounding) {
  /* every float whose low 13 bits are at or next to a tie point, across
   * the whole exponent range, plus random patterns */
  for (uint32_t hi = 0; hi < (1u << 19); hi++) {
    uint32_t base = hi << 13;
    const uint32_t lows[] = {0, 1, 0x0FFF, 0x1000, 0x1001, 0x1FFF};
    for (size_t k = 0; k < sizeof lows / sizeof lows[0]; k++)
      check_f16_against_gcc(bits_to_float(base | lows[k]));
  }
  uint64_t seed = 42;
  for (int i = 0; i < 1000000; i++)
    check_f16_against_gcc(bits_to_float((uint32_t)tu_rand_u64(&seed)));
}
END_TEST

/* Nearest bfloat16 by brute force: the two candidates around f, nearer one
 * wins, ties go to the even pattern. */
static uint16_t bf16_reference(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  uint16_t lo = (uint16_t)(u >> 16);
  uint16_t hi = (uint16_t)(lo + 1);
  double dl = fabs((double)f - norm_float_from_bf16(lo));
  double dh = fabs((double)f - norm_float_from_bf16(hi));
  if ((hi & 0x7F80u) == 0x7F80u) /* rounding up reaches Inf: as if 2^128 */
    dh = fabs(fabs((double)f) - 0x1p128);
  if (dl < dh) return lo;
  if (dh < dl) return hi;
  return (lo & 1u) ? hi : lo;
}

START_TEST(test_bf16_rounding) {
  uint64_t seed = 7;
  for (int i = 0; i < 2000000; i++) {
    uint32_t u = (uint32_t)tu_rand_u64(&seed);
    if (i & 1) u = (u & 0xFFFF0000u) | 0x8000u | (u & 1u); /* ties and near */
    float f = bits_to_float(u);
    uint16_t got = norm_bf16_from_float(f);
    if (isnan(f)) {
      if (!isnan(norm_float_from_bf16(got))) ck_abort_msg("bf16 lost a NaN");
      continue;
    }
    if ((u & 0x7F800000u) == 0x7F800000u) continue; /* Inf: checked below */
    if (got != bf16_reference(f))
      ck_abort_msg("bf16(%a) = %04x, want %04x", (double)f, got,
                   bf16_reference(f));
  }
  ck_assert_uint_eq(norm_bf16_from_float(INFINITY), 0x7F80u);
  ck_assert_uint_eq(norm_bf16_from_float(-INFINITY), 0xFF80u);
  ck_assert_uint_eq(norm_bf16_from_float(FLT_MAX), 0x7F80u); /* rounds up */
  for (uint32_t b = 0; b < 65536; b++) {
    float f = norm_float_from_bf16((uint16_t)b);
    if (!isnan(f) && norm_bf16_from_float(f) != b)
      ck_abort_msg("bf16 round trip of %04x", b);
  }
}
END_TEST

START_TEST(test_special_values) {
  ck_assert_uint_eq(norm_f16_from_float(65504.0f), 0x7BFFu);
  ck_assert_uint_eq(norm_f16_from_float(65520.0f), 0x7C00u); /* ties up to Inf */
  ck_assert_uint_eq(norm_f16_from_float(-0.0f), 0x8000u);
  ck_assert_uint_eq(norm_f16_from_float(0x1p-24f), 0x0001u);
  ck_assert_uint_eq(norm_f16_from_float(0x1p-25f), 0x0000u); /* tie to even */
  ck_assert_uint_eq(norm_f16_from_float(0x1.8p-25f), 0x0001u);
  ck_assert_uint_eq(norm_f16_from_float(NAN) & 0x7E00u, 0x7E00u);
  ck_assert(isinf(norm_float_from_f16(0xFC00u)));
  ck_assert(norm_float_from_f16(0xFC00u) < 0);
  ck_assert(isnan(norm_float_from_bf16(norm_bf16_from_float(NAN))));
  ck_assert_uint_eq(norm_bf16_from_float(1.0f), 0x3F80u);
  /* a signalling NaN whose payload lives only in the low bits stays NaN */
  ck_assert(isnan(norm_float_from_bf16(norm_bf16_from_float(bits_to_float(0x7F800001u)))));
  ck_assert(isnan(norm_float_from_f16(norm_f16_from_float(bits_to_float(0x7F800001u)))));
}
END_TEST

/* Narrowing straight from double is rounded once: compare with GCC's
 * double -> _Float16 conversion, and with a brute-force bfloat16 nearest. */
START_TEST(test_from_double_single_rounding) {
  uint64_t seed = 99;
  for (int i = 0; i < 1000000; i++) {
    /* values near half / bfloat16 ties, the cases double rounding breaks */
    double base = norm_float_from_f16((uint16_t)(tu_rand_u64(&seed) & 0x7BFFu));
    double d = base * (1.0 + 0x1p-11 + (double)(int64_t)(tu_rand_u64(&seed) % 2001 - 1000) * 0x1p-40);
    _Float16 ref = (_Float16)d;
    uint16_t want;
    memcpy(&want, &ref, sizeof want);
    if (norm_f16_from_double(d) != want)
      ck_abort_msg("f16_from_double(%a) = %04x, want %04x", d,
                   norm_f16_from_double(d), want);
    double bb = norm_float_from_bf16((uint16_t)(tu_rand_u64(&seed) & 0x7F7Fu));
    double e = bb * (1.0 + 0x1p-8 + (double)(int64_t)(tu_rand_u64(&seed) % 2001 - 1000) * 0x1p-40);
    uint16_t got = norm_bf16_from_double(e);
    /* nearest by brute force over the two neighbours */
    uint16_t lo = norm_bf16_from_float((float)e) , best = lo;
    /* rounding to Inf happens as if Inf were 2^128 (unbounded exponent) */
#define BF16_VALUE(c) (((c) & 0x7FFFu) == 0x7F80u ? copysign(0x1p128, norm_float_from_bf16(c)) \
                                                 : (double)norm_float_from_bf16(c))
    double err = fabs(e - BF16_VALUE(lo));
    for (int k = -1; k <= 1; k += 2) {
      uint16_t c = (uint16_t)(lo + k);
      double ce = fabs(e - BF16_VALUE(c));
      if (ce < err || (ce == err && !(c & 1u))) { best = c; err = ce; }
    }
    if (got != best)
      ck_abort_msg("bf16_from_double(%a) = %04x, want %04x", e, got, best);
  }
  ck_assert(isnan(norm_float_from_f16(norm_f16_from_double(NAN))));
  ck_assert_uint_eq(norm_f16_from_double(1e300), 0x7C00u);
  ck_assert_uint_eq(norm_bf16_from_double(-1e300), 0xFF80u);
  ck_assert_uint_eq(norm_f16_from_double(1.0 + 0x1p-11 + 0x1p-40), 0x3C01u);
  ck_assert_uint_eq(norm_bf16_from_double(1.0 + 0x1p-8 + 0x1p-40), 0x3F81u);
}
END_TEST

Suite *dtype_suite(void) {
  Suite *s = suite_create("dtype");
  TCase *tc = tcase_create("Core");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_names);
  tcase_add_test(tc, test_f16_roundtrip_all);
  tcase_add_test(tc, test_f16_rounding);
  tcase_add_test(tc, test_bf16_rounding);
  tcase_add_test(tc, test_special_values);
  tcase_add_test(tc, test_from_double_single_rounding);
  suite_add_tcase(s, tc);
  return s;
}
