/* check_norm_group.c -- norm_group and norm_group_rows against a naive
 * two-pass double reference: several num_groups (1, divisors, C), stats per
 * (n, g) at n * G + g, per-channel affine, cruel data, split ranges, and
 * the error codes. */
#include <math.h>

#include "testutil.h"

/* ---- reference ----------------------------------------------------------- */

/* Stats over the C/G channels of group g and all spatial positions of
 * sample n, at n * G + g (testutil.h's tu_ref_nc). */
static void ref_group(const double *x, size_t N, size_t C, size_t S, size_t G,
                      const double *w, const double *b, double eps, double *y,
                      double *mean, double *var, double *rstd) {
  tu_nc_t l = {N, C, S, G, 0};
  tu_ref_nc(x, &l, w, b, eps, NULL, NULL, y, mean, var, rstd);
}

/* ---- one configurable case --------------------------------------------- */

/* norm_group for testutil.h's case runners. */
static int group_call(const tu_nccase_t *c, tu_ncfix_t *f, norm_stats_t *st,
                      int rows, size_t lo, size_t hi) {
  norm_group_params_t p = {c->groups, c->eps};
  const norm_tensor_t *w = c->affine ? &f->w : NULL;
  const norm_tensor_t *b = c->affine ? &f->b : NULL;
  return rows ? norm_group_rows(&f->x, w, b, &p, &f->y, st, lo, hi)
              : norm_group(&f->x, w, b, &p, &f->y, st);
}

static int64_t group_groups(const tu_nccase_t *c, const norm_tensor_t *x) {
  norm_group_params_t p = {c->groups, c->eps};
  return norm_group_groups(x, &p);
}

static const tu_ncnorm_t group = {group_call, group_groups};

/* x uniform in [-2, 6) from seed 1234, num_groups `groups`. */
static tu_nccase_t gcase(norm_dtype_t dt, int rank, const int64_t *shape,
                         int64_t groups) {
  tu_nccase_t c = tu_nccase(dt, rank, shape, -2, 6, 1234);
  c.groups = groups;
  return c;
}

/* Runs norm_group on c (x prepared by `prep` when given) and compares y and
 * stats to the reference (tu_nccase_run). */
static void run_gcase(const tu_nccase_t *c, void (*prep)(norm_tensor_t *)) {
  tu_nccase_run(&group, c, prep);
}

/* run_gcase without prep, for testutil.h's shared sequences. */
static void run_plain(const tu_nccase_t *c) { run_gcase(c, NULL); }

/* ---- Core ---------------------------------------------------------------- */

START_TEST(test_nchw_all_divisors) {
  int64_t gs[] = {1, 2, 3, 6};
  for (int i = 0; i < 4; i++) {
    tu_nccase_t c = gcase(NORM_F32, 4, SHAPE(2, 6, 3, 4), gs[i]);
    run_gcase(&c, NULL);
  }
}
END_TEST

START_TEST(test_ncl_and_nc) {
  tu_nccase_t c = gcase(NORM_F32, 3, SHAPE(3, 8, 5), 4);
  run_gcase(&c, NULL);
  c = gcase(NORM_F32, 2, SHAPE(5, 8), 2); /* (N, C): spatial size 1 */
  run_gcase(&c, NULL);
  c = gcase(NORM_F32, 5, SHAPE(2, 4, 2, 3, 2), 2);
  run_gcase(&c, NULL);
}
END_TEST

START_TEST(test_f64) {
  int64_t gs[] = {1, 5, 10};
  for (int i = 0; i < 3; i++) {
    tu_nccase_t c = gcase(NORM_F64, 3, SHAPE(3, 10, 7), gs[i]);
    run_gcase(&c, NULL);
  }
}
END_TEST

START_TEST(test_half) {
  tu_nccase_t c = gcase(NORM_F16, 4, SHAPE(2, 4, 3, 3), 2);
  run_gcase(&c, NULL);
  c = gcase(NORM_BF16, 4, SHAPE(2, 4, 3, 3), 4);
  run_gcase(&c, NULL);
  c = gcase(NORM_BF16, 3, SHAPE(2, 6, 5), 3);
  c.yt = NORM_F32;
  c.wt = NORM_F64;
  run_gcase(&c, NULL);
}
END_TEST

START_TEST(test_no_affine_mixed) {
  tu_nccase_t c = gcase(NORM_F32, 3, SHAPE(2, 6, 5), 3);
  c.affine = 0;
  run_gcase(&c, NULL);
  c.yt = NORM_F64;
  c.affine = 1;
  c.wt = NORM_BF16;
  run_gcase(&c, NULL);
  c = gcase(NORM_F64, 3, SHAPE(2, 6, 5), 2);
  c.yt = NORM_F16;
  run_gcase(&c, NULL);
}
END_TEST

/* G = C with spatial size 1: every group is one value -> var 0, y = b. */
START_TEST(test_single_value_groups) {
  tu_nccase_t c = gcase(NORM_F32, 2, SHAPE(3, 4), 4);
  run_gcase(&c, NULL);
  norm_tensor_t x = tu_mk(NORM_F32, 2, SHAPE(3, 4));
  norm_tensor_t y = tu_mk(NORM_F32, 2, SHAPE(3, 4));
  tu_fill_uniform(&x, 5, -9, 9);
  double v[12];
  norm_stats_t st = {NULL, v, NULL, NULL};
  norm_group_params_t p = {4, 1e-5};
  EXPECT_RC(norm_group(&x, NULL, NULL, &p, &y, &st), NORM_OK);
  for (size_t i = 0; i < 12; i++) {
    ck_assert(v[i] == 0);
    ck_assert(norm_tensor_get(&y, i) == 0);
  }
  tu_tensor_free(&x);
  tu_tensor_free(&y);
}
END_TEST

/* Stats land at n * G + g: give each (n, g) its own offset and check. */
START_TEST(test_stats_index) {
  const size_t N = 3, C = 6, S = 4, G = 3;
  norm_tensor_t x = tu_mk(NORM_F64, 3, SHAPE(3, 6, 4));
  norm_tensor_t y = tu_mk(NORM_F64, 3, SHAPE(3, 6, 4));
  uint64_t seed = 77;
  for (size_t n = 0; n < N; n++)
    for (size_t c = 0; c < C; c++)
      for (size_t k = 0; k < S; k++)
        norm_tensor_set(&x, (n * C + c) * S + k,
                        100.0 * (double)n + 10.0 * (double)(c / 2) +
                            tu_rand_range(&seed, -1, 1));
  double m[9];
  norm_stats_t st = {m, NULL, NULL, NULL};
  norm_group_params_t p = {(int64_t)G, 1e-5};
  EXPECT_RC(norm_group(&x, NULL, NULL, &p, &y, &st), NORM_OK);
  for (size_t n = 0; n < N; n++)
    for (size_t g = 0; g < G; g++)
      ck_assert_msg(fabs(m[n * G + g] - (100.0 * n + 10.0 * g)) < 1,
                    "mean[%zu] = %g", n * G + g, m[n * G + g]);
  tu_tensor_free(&x);
  tu_tensor_free(&y);
}
END_TEST

START_TEST(test_in_place) {
  norm_tensor_t x = tu_mk(NORM_F32, 3, SHAPE(2, 4, 5));
  norm_tensor_t w = tu_mk(NORM_F32, 1, SHAPE(4));
  tu_fill_uniform(&x, 21, -3, 3);
  tu_fill_uniform(&w, 22, 1, 2);
  double *xd = tu_to_doubles(&x), *wd = tu_to_doubles(&w), ref[40], m[4], v[4],
         r[4];
  norm_group_params_t p = {2, 1e-5};
  EXPECT_RC(norm_group(&x, &w, NULL, &p, &x, NULL), NORM_OK);
  ref_group(xd, 2, 4, 5, 2, wd, NULL, 1e-5, ref, m, v, r);
  for (size_t i = 0; i < 40; i++)
    ck_assert(tu_out_close(&x, i, ref[i], 1e-6, 1e-12));
  free(xd);
  free(wd);
  tu_tensor_free(&x);
  tu_tensor_free(&w);
}
END_TEST

/* ---- Cruel -----------------------------------------------------------------
 */

START_TEST(test_large_mean) {
  tu_nccase_t c32 = gcase(NORM_F32, 3, SHAPE(2, 4, 32), 2);
  tu_nccase_t c64 = gcase(NORM_F64, 3, SHAPE(2, 4, 32), 4);
  tu_nccase_large_mean(&c32, &c64, run_plain);
}
END_TEST

/* Sample 1 is constant: its groups normalize to b, not NaN. */
static void make_sample1_constant(norm_tensor_t *x) {
  size_t per = tu_numel(x) / (size_t)x->shape[0];
  for (size_t i = per; i < 2 * per; i++)
    norm_tensor_set(x, i, 0.3);
}

START_TEST(test_constant_groups) {
  norm_dtype_t dts[4] = {NORM_F32, NORM_F64, NORM_F16, NORM_BF16};
  for (int d = 0; d < 4; d++) {
    tu_nccase_t c = gcase(dts[d], 3, SHAPE(3, 4, 6), 2);
    run_gcase(&c, make_sample1_constant);
    c.affine = 0;
    run_gcase(&c, make_sample1_constant);
  }
  norm_tensor_t x = tu_mk(NORM_F32, 3, SHAPE(2, 4, 3));
  norm_tensor_t y = tu_mk(NORM_F32, 3, SHAPE(2, 4, 3));
  for (size_t i = 0; i < 24; i++)
    norm_tensor_set(&x, i, -1234.5678);
  double v[4], r[4];
  norm_stats_t st = {NULL, v, r, NULL};
  norm_group_params_t p = {2, 1e-5};
  EXPECT_RC(norm_group(&x, NULL, NULL, &p, &y, &st), NORM_OK);
  for (size_t i = 0; i < 24; i++)
    ck_assert_msg(fabs(norm_tensor_get(&y, i)) <= 1e-6, "y[%zu] = %g", i,
                  norm_tensor_get(&y, i));
  for (int g = 0; g < 4; g++)
    ck_assert(v[g] >= 0 && v[g] < 1e-20 && isfinite(r[g]));
  p.eps = 0; /* still 0, not NaN */
  EXPECT_RC(norm_group(&x, NULL, NULL, &p, &y, NULL), NORM_OK);
  for (size_t i = 0; i < 24; i++)
    ck_assert_msg(norm_tensor_get(&y, i) == 0, "eps 0: y[%zu] = %g", i,
                  norm_tensor_get(&y, i));
  tu_tensor_free(&x);
  tu_tensor_free(&y);
}
END_TEST

/* A non-finite value poisons its (n, g) group only. */
static void poison_case(double bad) {
  const size_t C = 6, S = 3;
  const size_t at = (1 * C + 3) * S + 1; /* n = 1, c = 3: g = 1 */
  tu_nccase_t c = tu_nccase(NORM_F32, 3, SHAPE(2, 6, 3), -1, 1, 31);
  c.groups = 3;
  c.affine = 0;
  tu_nccase_poisoned(&group, &c, at, bad);
}

/* Groups of 1e6 values (C / G channels times spatial), far from 0 and in
 * float16: double accumulation keeps the stats within 1e-10. */
START_TEST(test_million_value_groups) {
  tu_nccase_t c = gcase(NORM_F32, 3, SHAPE(1, 4, 500000), 2);
  c.lo = 100;
  c.hi = 1000;
  run_gcase(&c, NULL);
  c = gcase(NORM_F16, 4, SHAPE(2, 2, 1000, 500), 1);
  c.wt = NORM_F32;
  run_gcase(&c, NULL);
}
END_TEST

/* float32 subnormal inputs with eps = 0: var ~ 1e-78 only exists in double. */
START_TEST(test_subnormal_inputs) {
  tu_nccase_t c = gcase(NORM_F32, 4, SHAPE(2, 6, 4, 5), 3);
  tu_nccase_subnormal(&c, run_plain);
}
END_TEST

START_TEST(test_nan_isolated) { poison_case(NAN); }
END_TEST

START_TEST(test_inf_isolated) {
  poison_case(INFINITY);
  poison_case(-INFINITY);
}
END_TEST

/* ---- Rows ---------------------------------------------------------------- */

/* Splits of [0, N * G) give bit-identical y and stats (tu_nccase_split). */
static void rows_case(const tu_nccase_t *c) { tu_nccase_split(&group, c); }

START_TEST(test_rows_split) {
  tu_nccase_t c = gcase(NORM_F32, 4, SHAPE(3, 6, 2, 3), 3);
  rows_case(&c);
  c = gcase(NORM_BF16, 3, SHAPE(2, 4, 5), 4);
  rows_case(&c);
  c = gcase(NORM_F64, 3, SHAPE(4, 4, 3), 1);
  c.affine = 0;
  rows_case(&c);
}
END_TEST

START_TEST(test_rows_bad_range) {
  norm_tensor_t x = tu_mk(NORM_F32, 3, SHAPE(2, 4, 3));
  norm_tensor_t y = tu_mk(NORM_F32, 3, SHAPE(2, 4, 3));
  norm_group_params_t p = {2, 1e-5};
  EXPECT_RC(norm_group_rows(&x, NULL, NULL, &p, &y, NULL, 0, 5), NORM_E_RANGE);
  EXPECT_RC(norm_group_rows(&x, NULL, NULL, &p, &y, NULL, 3, 2), NORM_E_RANGE);
  EXPECT_RC(norm_group_rows(&x, NULL, NULL, &p, &y, NULL, 5, 5), NORM_E_RANGE);
  EXPECT_RC(norm_group_rows(&x, NULL, NULL, &p, &y, NULL, 1, SIZE_MAX),
            NORM_E_RANGE);
  EXPECT_RC(norm_group_rows(&x, NULL, NULL, &p, &y, NULL, 4, 4), NORM_OK);
  EXPECT_RC(norm_group_rows(&x, NULL, NULL, &p, &y, NULL, 0, 0), NORM_OK);
  tu_tensor_free(&x);
  tu_tensor_free(&y);
}
END_TEST

START_TEST(test_groups_count) {
  norm_tensor_t x = {NORM_F32, 4, {3, 6, 2, 2}, NULL};
  norm_group_params_t p = {3, 1e-5};
  ck_assert_int_eq(norm_group_groups(&x, &p), 9);
  p.num_groups = 6;
  ck_assert_int_eq(norm_group_groups(&x, &p), 18);
  p.num_groups = 1;
  ck_assert_int_eq(norm_group_groups(&x, &p), 3);
  p.num_groups = 4;
  ck_assert_int_eq(norm_group_groups(&x, &p), NORM_E_GROUPS);
  p.num_groups = 0;
  ck_assert_int_eq(norm_group_groups(&x, &p), NORM_E_GROUPS);
  p.num_groups = 3;
  x.rank = 1;
  ck_assert_int_eq(norm_group_groups(&x, &p), NORM_E_CHANNELS);
  x.rank = 4;
  x.shape[3] = 0;
  ck_assert_int_eq(norm_group_groups(&x, &p), NORM_E_EMPTY);
  ck_assert_int_lt(norm_group_groups(NULL, &p), 0);
  ck_assert_int_lt(norm_group_groups(&x, NULL), 0);
}
END_TEST

/* ---- Errors ------------------------------------------------------------- */

START_TEST(test_err_num_groups) {
  norm_tensor_t x = tu_mk(NORM_F32, 3, SHAPE(2, 6, 3));
  norm_tensor_t y = tu_mk(NORM_F32, 3, SHAPE(2, 6, 3));
  int64_t bad[] = {0, -1, -3, 4, 5, 7, 12, INT64_MAX, INT64_MIN};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    norm_group_params_t p = {bad[i], 1e-5};
    EXPECT_RC(norm_group(&x, NULL, NULL, &p, &y, NULL), NORM_E_GROUPS);
    EXPECT_RC(norm_group_rows(&x, NULL, NULL, &p, &y, NULL, 0, 1),
              NORM_E_GROUPS);
  }
  tu_tensor_free(&x);
  tu_tensor_free(&y);
}
END_TEST

START_TEST(test_err_eps) {
  norm_tensor_t x = tu_mk(NORM_F32, 3, SHAPE(2, 6, 3));
  norm_tensor_t y = tu_mk(NORM_F32, 3, SHAPE(2, 6, 3));
  double bad[4] = {-1e-5, -1.0, NAN, INFINITY};
  for (int i = 0; i < 4; i++) {
    norm_group_params_t p = {2, bad[i]};
    EXPECT_RC(norm_group(&x, NULL, NULL, &p, &y, NULL), NORM_E_EPS);
    EXPECT_RC(norm_group_rows(&x, NULL, NULL, &p, &y, NULL, 0, 1), NORM_E_EPS);
  }
  norm_group_params_t p = {2, 0.0}; /* eps = 0 is fine */
  EXPECT_RC(norm_group(&x, NULL, NULL, &p, &y, NULL), NORM_OK);
  tu_tensor_free(&x);
  tu_tensor_free(&y);
}
END_TEST

START_TEST(test_err_null_and_shape) {
  norm_group_params_t p = {2, 1e-5};
  norm_tensor_t x = tu_mk(NORM_F32, 3, SHAPE(2, 4, 3));
  norm_tensor_t y = tu_mk(NORM_F32, 3, SHAPE(2, 4, 3));
  EXPECT_RC(norm_group(NULL, NULL, NULL, &p, &y, NULL), NORM_E_NULL);
  EXPECT_RC(norm_group(&x, NULL, NULL, NULL, &y, NULL), NORM_E_NULL);
  EXPECT_RC(norm_group(&x, NULL, NULL, &p, NULL, NULL), NORM_E_NULL);
  tu_tensor_free(&x);
  tu_tensor_free(&y);

  norm_tensor_t v = tu_mk(NORM_F32, 1, SHAPE(4));
  norm_tensor_t vy = tu_mk(NORM_F32, 1, SHAPE(4));
  EXPECT_RC(norm_group(&v, NULL, NULL, &p, &vy, NULL), NORM_E_CHANNELS);
  tu_tensor_free(&v);
  tu_tensor_free(&vy);

  static float buf[64];
  norm_tensor_t bx = {NORM_F32, 3, {2, 4, 3}, buf};
  norm_tensor_t by = bx;
  bx.rank = 9;
  EXPECT_RC(norm_group(&bx, NULL, NULL, &p, &by, NULL), NORM_E_RANK);
  bx.rank = 0;
  EXPECT_RC(norm_group(&bx, NULL, NULL, &p, &by, NULL), NORM_E_RANK);
  bx.rank = 3;
  bx.shape[0] = -1;
  EXPECT_RC(norm_group(&bx, NULL, NULL, &p, &by, NULL), NORM_E_DIM);
  bx.shape[0] = 0;
  EXPECT_RC(norm_group(&bx, NULL, NULL, &p, &by, NULL), NORM_E_EMPTY);
  bx.shape[0] = INT64_C(1) << 31;
  bx.shape[2] = INT64_C(1) << 31;
  by = bx;
  EXPECT_RC(norm_group(&bx, NULL, NULL, &p, &by, NULL), NORM_E_OVERFLOW);
  bx.shape[0] = 2;
  bx.shape[2] = 3;
  bx.dtype = (norm_dtype_t)-1;
  by = bx;
  by.dtype = NORM_F32;
  EXPECT_RC(norm_group(&bx, NULL, NULL, &p, &by, NULL), NORM_E_DTYPE);
}
END_TEST

/* A valid float16 x whose float64 output would be 2^64 bytes. */
START_TEST(test_err_output_bytes_overflow) {
  static float buf[4];
  norm_tensor_t x = {NORM_F16, 2, {(int64_t)1 << 59, 4}, buf};
  norm_tensor_t y = {NORM_F64, 2, {(int64_t)1 << 59, 4}, buf};
  norm_group_params_t p = {2, 1e-5};
  EXPECT_RC(norm_group_rows(&x, NULL, NULL, &p, &y, NULL, 0, 0),
            NORM_E_OVERFLOW);
  EXPECT_RC(norm_group(&x, NULL, NULL, &p, &y, NULL), NORM_E_OVERFLOW);
}
END_TEST

START_TEST(test_err_output_weight_bias) {
  norm_group_params_t p = {2, 1e-5};
  norm_tensor_t x = tu_mk(NORM_F32, 3, SHAPE(2, 4, 3));
  norm_tensor_t y = tu_mk(NORM_F32, 3, SHAPE(2, 4, 3));
  norm_tensor_t ybad = tu_mk(NORM_F32, 3, SHAPE(2, 3, 4));
  norm_tensor_t yflat = tu_mk(NORM_F32, 2, SHAPE(2, 12));
  norm_tensor_t ok = tu_mk(NORM_F32, 1, SHAPE(4));
  norm_tensor_t w2 = tu_mk(NORM_F32, 1, SHAPE(2)); /* per group, not channel */
  norm_tensor_t w5 = tu_mk(NORM_F32, 1, SHAPE(5));
  EXPECT_RC(norm_group(&x, NULL, NULL, &p, &ybad, NULL), NORM_E_OUTPUT);
  EXPECT_RC(norm_group(&x, NULL, NULL, &p, &yflat, NULL), NORM_E_OUTPUT);
  EXPECT_RC(norm_group_rows(&x, NULL, NULL, &p, &ybad, NULL, 0, 1),
            NORM_E_OUTPUT);
  EXPECT_RC(norm_group(&x, &w2, NULL, &p, &y, NULL), NORM_E_WEIGHT);
  EXPECT_RC(norm_group(&x, &w5, &ok, &p, &y, NULL), NORM_E_WEIGHT);
  EXPECT_RC(norm_group(&x, &ok, &w2, &p, &y, NULL), NORM_E_BIAS);
  EXPECT_RC(norm_group(&x, NULL, &w5, &p, &y, NULL), NORM_E_BIAS);
  EXPECT_RC(norm_group(&x, &ok, &ok, &p, &y, NULL), NORM_OK);
  tu_tensor_free(&x);
  tu_tensor_free(&y);
  tu_tensor_free(&ybad);
  tu_tensor_free(&yflat);
  tu_tensor_free(&ok);
  tu_tensor_free(&w2);
  tu_tensor_free(&w5);
}
END_TEST

Suite *norm_group_suite(void) {
  Suite *s = suite_create("norm_group");
  TCase *tc = tcase_create("Core");
  tcase_add_test(tc, test_nchw_all_divisors);
  tcase_add_test(tc, test_ncl_and_nc);
  tcase_add_test(tc, test_f64);
  tcase_add_test(tc, test_half);
  tcase_add_test(tc, test_no_affine_mixed);
  tcase_add_test(tc, test_single_value_groups);
  tcase_add_test(tc, test_stats_index);
  tcase_add_test(tc, test_in_place);
  suite_add_tcase(s, tc);

  tc = tcase_create("Cruel");
  tcase_add_test(tc, test_large_mean);
  tcase_add_test(tc, test_constant_groups);
  tcase_add_test(tc, test_nan_isolated);
  tcase_add_test(tc, test_inf_isolated);
  tcase_add_test(tc, test_million_value_groups);
  tcase_add_test(tc, test_subnormal_inputs);
  suite_add_tcase(s, tc);

  tc = tcase_create("Rows");
  tcase_add_test(tc, test_rows_split);
  tcase_add_test(tc, test_rows_bad_range);
  tcase_add_test(tc, test_groups_count);
  suite_add_tcase(s, tc);

  tc = tcase_create("Errors");
  tcase_add_test(tc, test_err_num_groups);
  tcase_add_test(tc, test_err_eps);
  tcase_add_test(tc, test_err_null_and_shape);
  tcase_add_test(tc, test_err_output_weight_bias);
  tcase_add_test(tc, test_err_output_bytes_overflow);
  suite_add_tcase(s, tc);
  return s;
}
