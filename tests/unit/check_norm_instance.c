/* check_norm_instance.c -- norm_instance and norm_instance_rows against a
 * naive two-pass double reference: stats per (n, c) at n * C + c, with and
 * without affine, spatial size 1 (var 0, output 0), cruel data, split
 * ranges, and the error codes. */
#include <math.h>

#include "testutil.h"

/* ---- reference ----------------------------------------------------------- */

/* Stats over the S spatial positions of each (n, c), at n * C + c
 * (testutil.h's tu_ref_nc). */
static void ref_instance(const double *x, size_t N, size_t C, size_t S,
                         const double *w, const double *b, double eps,
                         double *y, double *mean, double *var, double *rstd) {
  tu_nc_t l = {N, C, S, C, 0};
  tu_ref_nc(x, &l, w, b, eps, NULL, NULL, y, mean, var, rstd);
}

/* ---- one configurable case --------------------------------------------- */

/* norm_instance for testutil.h's case runners. */
static int instance_call(const tu_nccase_t *c, tu_ncfix_t *f, norm_stats_t *st,
                         int rows, size_t lo, size_t hi) {
  norm_instance_params_t p = {c->eps};
  const norm_tensor_t *w = c->affine ? &f->w : NULL;
  const norm_tensor_t *b = c->affine ? &f->b : NULL;
  return rows ? norm_instance_rows(&f->x, w, b, &p, &f->y, st, lo, hi)
              : norm_instance(&f->x, w, b, &p, &f->y, st);
}

static int64_t instance_groups(const tu_nccase_t *c, const norm_tensor_t *x) {
  (void)c;
  return norm_instance_groups(x);
}

static const tu_ncnorm_t instance = {instance_call, instance_groups};

/* x uniform in [-5, 3) from seed 99; one group per (n, c). */
static tu_nccase_t icase(norm_dtype_t dt, int rank, const int64_t *shape) {
  return tu_nccase(dt, rank, shape, -5, 3, 99);
}

static void run_icase(const tu_nccase_t *c, void (*prep)(norm_tensor_t *)) {
  tu_nccase_run(&instance, c, prep);
}

/* run_icase without prep, for testutil.h's shared sequences. */
static void run_plain(const tu_nccase_t *c) { run_icase(c, NULL); }

/* ---- Core ---------------------------------------------------------------- */

START_TEST(test_ncl) {
  tu_nccase_t c = icase(NORM_F32, 3, SHAPE(3, 4, 17));
  run_icase(&c, NULL);
  c.affine = 0;
  run_icase(&c, NULL);
}
END_TEST

START_TEST(test_nchw) {
  tu_nccase_t c = icase(NORM_F32, 4, SHAPE(2, 3, 5, 4));
  run_icase(&c, NULL);
  c = icase(NORM_F32, 5, SHAPE(2, 2, 3, 3, 2));
  c.affine = 0;
  run_icase(&c, NULL);
}
END_TEST

START_TEST(test_f64) {
  tu_nccase_t c = icase(NORM_F64, 4, SHAPE(3, 2, 4, 6));
  run_icase(&c, NULL);
  c.affine = 0;
  run_icase(&c, NULL);
}
END_TEST

START_TEST(test_half) {
  tu_nccase_t c = icase(NORM_F16, 3, SHAPE(2, 3, 11));
  run_icase(&c, NULL);
  c = icase(NORM_BF16, 4, SHAPE(2, 3, 3, 3));
  run_icase(&c, NULL);
  c.affine = 0;
  run_icase(&c, NULL);
}
END_TEST

START_TEST(test_mixed_dtypes) {
  tu_nccase_t c = icase(NORM_F16, 3, SHAPE(2, 3, 8));
  c.yt = NORM_F64;
  c.wt = NORM_F32;
  run_icase(&c, NULL);
  c = icase(NORM_F64, 3, SHAPE(2, 3, 8));
  c.yt = NORM_F32;
  c.wt = NORM_BF16;
  run_icase(&c, NULL);
}
END_TEST

/* Spatial size 1: var 0, y = 0 (+ bias), never NaN. */
START_TEST(test_spatial_one) {
  const int64_t *shapes[3] = {SHAPE(3, 4), SHAPE(3, 4, 1), SHAPE(3, 4, 1, 1)};
  int ranks[3] = {2, 3, 4};
  for (int k = 0; k < 3; k++) {
    tu_nccase_t c = icase(NORM_F32, ranks[k], shapes[k]);
    run_icase(&c, NULL);
    norm_tensor_t x = tu_mk(NORM_F32, ranks[k], shapes[k]);
    norm_tensor_t y = tu_mk(NORM_F32, ranks[k], shapes[k]);
    tu_fill_uniform(&x, 8, -100, 100);
    double m[12], v[12], r[12];
    norm_stats_t st = {m, v, r, NULL};
    norm_instance_params_t p = {1e-5};
    EXPECT_RC(norm_instance(&x, NULL, NULL, &p, &y, &st), NORM_OK);
    for (size_t i = 0; i < 12; i++) {
      ck_assert_msg(norm_tensor_get(&y, i) == 0, "y[%zu] = %g", i,
                    norm_tensor_get(&y, i));
      ck_assert(v[i] == 0 && m[i] == norm_tensor_get(&x, i));
      ck_assert(tu_rel_close(r[i], 1 / sqrt(1e-5), 1e-15));
    }
    p.eps = 0; /* still 0, not NaN */
    EXPECT_RC(norm_instance(&x, NULL, NULL, &p, &y, &st), NORM_OK);
    for (size_t i = 0; i < 12; i++)
      ck_assert_msg(norm_tensor_get(&y, i) == 0, "eps 0: y[%zu] = %g", i,
                    norm_tensor_get(&y, i));
    tu_tensor_free(&x);
    tu_tensor_free(&y);
  }
}
END_TEST

/* Stats land at n * C + c. */
START_TEST(test_stats_index) {
  norm_tensor_t x = tu_mk(NORM_F64, 3, SHAPE(3, 5, 4));
  norm_tensor_t y = tu_mk(NORM_F64, 3, SHAPE(3, 5, 4));
  for (size_t i = 0; i < 60; i++)
    norm_tensor_set(&x, i, (double)(i / 4) * 10 + (double)(i % 4));
  double m[15];
  norm_stats_t st = {m, NULL, NULL, NULL};
  norm_instance_params_t p = {1e-5};
  EXPECT_RC(norm_instance(&x, NULL, NULL, &p, &y, &st), NORM_OK);
  for (size_t g = 0; g < 15; g++)
    ck_assert(m[g] == (double)g * 10 + 1.5);
  tu_tensor_free(&x);
  tu_tensor_free(&y);
}
END_TEST

START_TEST(test_in_place) {
  norm_tensor_t x = tu_mk(NORM_BF16, 3, SHAPE(2, 3, 6));
  norm_tensor_t b = tu_mk(NORM_F32, 1, SHAPE(3));
  tu_fill_uniform(&x, 41, -3, 3);
  tu_fill_uniform(&b, 42, -1, 1);
  double *xd = tu_to_doubles(&x), *bd = tu_to_doubles(&b), ref[36], m[6], v[6],
         r[6];
  norm_instance_params_t p = {1e-5};
  EXPECT_RC(norm_instance(&x, NULL, &b, &p, &x, NULL), NORM_OK);
  ref_instance(xd, 2, 3, 6, NULL, bd, 1e-5, ref, m, v, r);
  for (size_t i = 0; i < 36; i++)
    ck_assert_msg(tu_out_close(&x, i, ref[i], 1e-6, 1e-12),
                  "y[%zu] = %g want %g", i, norm_tensor_get(&x, i), ref[i]);
  free(xd);
  free(bd);
  tu_tensor_free(&x);
  tu_tensor_free(&b);
}
END_TEST

/* ---- Cruel -----------------------------------------------------------------
 */

START_TEST(test_large_mean) {
  tu_nccase_t c32 = icase(NORM_F32, 3, SHAPE(2, 3, 64));
  tu_nccase_t c64 = icase(NORM_F64, 3, SHAPE(2, 3, 64));
  tu_nccase_large_mean(&c32, &c64, run_plain);
}
END_TEST

/* (0, 1) and (1, 2) constant: those instances normalize to b, not NaN. */
static void make_some_constant(norm_tensor_t *x) {
  size_t S = tu_numel(x) / (size_t)(x->shape[0] * x->shape[1]);
  size_t C = (size_t)x->shape[1];
  for (size_t i = 0; i < S; i++) {
    norm_tensor_set(x, 1 * S + i, 7.1);
    norm_tensor_set(x, (1 * C + 2) * S + i, -0.003);
  }
}

START_TEST(test_constant_instances) {
  norm_dtype_t dts[4] = {NORM_F32, NORM_F64, NORM_F16, NORM_BF16};
  for (int d = 0; d < 4; d++) {
    tu_nccase_t c = icase(dts[d], 3, SHAPE(2, 3, 9));
    run_icase(&c, make_some_constant);
    c.affine = 0;
    run_icase(&c, make_some_constant);
  }
  norm_tensor_t x = tu_mk(NORM_F32, 3, SHAPE(2, 3, 9));
  norm_tensor_t y = tu_mk(NORM_F32, 3, SHAPE(2, 3, 9));
  make_some_constant(&x);
  double v[6];
  norm_stats_t st = {NULL, v, NULL, NULL};
  norm_instance_params_t p = {1e-5};
  EXPECT_RC(norm_instance(&x, NULL, NULL, &p, &y, &st), NORM_OK);
  for (size_t i = 0; i < 54; i++)
    ck_assert_msg(fabs(norm_tensor_get(&y, i)) <= 1e-6, "y[%zu] = %g", i,
                  norm_tensor_get(&y, i));
  for (int g = 0; g < 6; g++)
    ck_assert(v[g] >= 0 && v[g] < 1e-20);
  tu_tensor_free(&x);
  tu_tensor_free(&y);
}
END_TEST

/* A non-finite value poisons its (n, c) instance only. */
static void poison_case(double bad) {
  const size_t C = 3, S = 5, at = (1 * C + 0) * S + 4; /* instance (1, 0) */
  tu_nccase_t c = tu_nccase(NORM_F32, 3, SHAPE(2, 3, 5), -1, 1, 51);
  c.affine = 0;
  tu_nccase_poisoned(&instance, &c, at, bad);
}

/* Instances of 1e6 values, far from 0 and in bfloat16: double
 * accumulation keeps the stats within 1e-10. */
START_TEST(test_million_value_instances) {
  tu_nccase_t c = icase(NORM_F32, 3, SHAPE(1, 2, 1000000));
  c.lo = 100;
  c.hi = 1000;
  run_icase(&c, NULL);
  c = icase(NORM_BF16, 4, SHAPE(2, 1, 1000, 1000));
  c.wt = NORM_F32;
  run_icase(&c, NULL);
}
END_TEST

/* float32 subnormal inputs with eps = 0: var ~ 1e-78 only exists in double. */
START_TEST(test_subnormal_inputs) {
  tu_nccase_t c = icase(NORM_F32, 3, SHAPE(2, 3, 40));
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

/* Splits of [0, N * C) give bit-identical y and stats (tu_nccase_split). */
static void rows_case(const tu_nccase_t *c) { tu_nccase_split(&instance, c); }

START_TEST(test_rows_split) {
  tu_nccase_t c = icase(NORM_F32, 4, SHAPE(3, 4, 2, 5));
  rows_case(&c);
  c = icase(NORM_F16, 3, SHAPE(2, 3, 7));
  c.affine = 0;
  rows_case(&c);
  c = icase(NORM_F64, 2, SHAPE(4, 3));
  rows_case(&c);
}
END_TEST

START_TEST(test_rows_bad_range) {
  norm_tensor_t x = tu_mk(NORM_F32, 3, SHAPE(2, 3, 4));
  norm_tensor_t y = tu_mk(NORM_F32, 3, SHAPE(2, 3, 4));
  norm_instance_params_t p = {1e-5};
  EXPECT_RC(norm_instance_rows(&x, NULL, NULL, &p, &y, NULL, 0, 7),
            NORM_E_RANGE);
  EXPECT_RC(norm_instance_rows(&x, NULL, NULL, &p, &y, NULL, 4, 3),
            NORM_E_RANGE);
  EXPECT_RC(norm_instance_rows(&x, NULL, NULL, &p, &y, NULL, 7, 7),
            NORM_E_RANGE);
  EXPECT_RC(norm_instance_rows(&x, NULL, NULL, &p, &y, NULL, SIZE_MAX, 1),
            NORM_E_RANGE);
  EXPECT_RC(norm_instance_rows(&x, NULL, NULL, &p, &y, NULL, 6, 6), NORM_OK);
  tu_tensor_free(&x);
  tu_tensor_free(&y);
}
END_TEST

START_TEST(test_groups_count) {
  norm_tensor_t x = {NORM_F32, 4, {3, 5, 2, 2}, NULL};
  ck_assert_int_eq(norm_instance_groups(&x), 15);
  x.rank = 2;
  ck_assert_int_eq(norm_instance_groups(&x), 15);
  x.rank = 1;
  ck_assert_int_eq(norm_instance_groups(&x), NORM_E_CHANNELS);
  x.rank = 3;
  x.shape[2] = -7;
  ck_assert_int_eq(norm_instance_groups(&x), NORM_E_DIM);
  ck_assert_int_lt(norm_instance_groups(NULL), 0);
}
END_TEST

/* ---- Errors ------------------------------------------------------------- */

START_TEST(test_err_eps) {
  norm_tensor_t x = tu_mk(NORM_F32, 3, SHAPE(2, 3, 4));
  norm_tensor_t y = tu_mk(NORM_F32, 3, SHAPE(2, 3, 4));
  double bad[4] = {-1e-5, -INFINITY, NAN, INFINITY};
  for (int i = 0; i < 4; i++) {
    norm_instance_params_t p = {bad[i]};
    EXPECT_RC(norm_instance(&x, NULL, NULL, &p, &y, NULL), NORM_E_EPS);
    EXPECT_RC(norm_instance_rows(&x, NULL, NULL, &p, &y, NULL, 0, 1),
              NORM_E_EPS);
  }
  tu_tensor_free(&x);
  tu_tensor_free(&y);
}
END_TEST

START_TEST(test_err_null_and_shape) {
  norm_instance_params_t p = {1e-5};
  norm_tensor_t x = tu_mk(NORM_F32, 3, SHAPE(2, 3, 4));
  norm_tensor_t y = tu_mk(NORM_F32, 3, SHAPE(2, 3, 4));
  EXPECT_RC(norm_instance(NULL, NULL, NULL, &p, &y, NULL), NORM_E_NULL);
  EXPECT_RC(norm_instance(&x, NULL, NULL, NULL, &y, NULL), NORM_E_NULL);
  EXPECT_RC(norm_instance(&x, NULL, NULL, &p, NULL, NULL), NORM_E_NULL);
  tu_tensor_free(&x);
  tu_tensor_free(&y);

  norm_tensor_t v = tu_mk(NORM_F32, 1, SHAPE(5));
  norm_tensor_t vy = tu_mk(NORM_F32, 1, SHAPE(5));
  EXPECT_RC(norm_instance(&v, NULL, NULL, &p, &vy, NULL), NORM_E_CHANNELS);
  tu_tensor_free(&v);
  tu_tensor_free(&vy);

  static float buf[64];
  norm_tensor_t bx = {NORM_F32, 3, {2, 3, 4}, buf};
  norm_tensor_t by = bx;
  bx.rank = 9;
  EXPECT_RC(norm_instance(&bx, NULL, NULL, &p, &by, NULL), NORM_E_RANK);
  bx.rank = -1;
  EXPECT_RC(norm_instance(&bx, NULL, NULL, &p, &by, NULL), NORM_E_RANK);
  bx.rank = 3;
  bx.shape[1] = -3;
  EXPECT_RC(norm_instance(&bx, NULL, NULL, &p, &by, NULL), NORM_E_DIM);
  bx.shape[1] = 0;
  EXPECT_RC(norm_instance(&bx, NULL, NULL, &p, &by, NULL), NORM_E_EMPTY);
  bx.shape[0] = INT64_MAX;
  bx.shape[1] = 3;
  by = bx;
  EXPECT_RC(norm_instance(&bx, NULL, NULL, &p, &by, NULL), NORM_E_OVERFLOW);
}
END_TEST

/* An unknown dtype on x, y, weight or bias is unknown_dtype, whole and
 * _rows, and nothing is written. */
START_TEST(test_err_dtype) {
  norm_instance_params_t p = {1e-5};
  norm_tensor_t x = tu_mk(NORM_F32, 3, SHAPE(2, 3, 4));
  norm_tensor_t y = tu_mk(NORM_F32, 3, SHAPE(2, 3, 4));
  norm_tensor_t w = tu_mk(NORM_F32, 1, SHAPE(3));
  norm_tensor_t b = tu_mk(NORM_F32, 1, SHAPE(3));
  tu_fill_uniform(&x, 61, -1, 1);
  norm_tensor_t *ts[4] = {&x, &y, &w, &b};
  const int bad[] = {-1, NORM_DTYPE_COUNT, 99};
  for (int t = 0; t < 4; t++)
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
      ts[t]->dtype = (norm_dtype_t)bad[k];
      EXPECT_RC(norm_instance(&x, &w, &b, &p, &y, NULL), NORM_E_DTYPE);
      EXPECT_RC(norm_instance_rows(&x, &w, &b, &p, &y, NULL, 0, 6),
                NORM_E_DTYPE);
      ts[t]->dtype = NORM_F32;
    }
  for (size_t i = 0; i < 24; i++)
    ck_assert(norm_tensor_get(&y, i) == 0);
  x.dtype = (norm_dtype_t)-1;
  EXPECT_RC(norm_instance_groups(&x), NORM_E_DTYPE);
  x.dtype = NORM_F32;
  EXPECT_RC(norm_instance(&x, &w, &b, &p, &y, NULL), NORM_OK);
  tu_tensor_free(&x);
  tu_tensor_free(&y);
  tu_tensor_free(&w);
  tu_tensor_free(&b);
}
END_TEST

/* A valid float16 x whose float64 output would be 2^64 bytes. */
START_TEST(test_err_output_bytes_overflow) {
  static float buf[4];
  norm_tensor_t x = {NORM_F16, 2, {(int64_t)1 << 59, 4}, buf};
  norm_tensor_t y = {NORM_F64, 2, {(int64_t)1 << 59, 4}, buf};
  norm_instance_params_t p = {1e-5};
  EXPECT_RC(norm_instance_rows(&x, NULL, NULL, &p, &y, NULL, 0, 0),
            NORM_E_OVERFLOW);
  EXPECT_RC(norm_instance(&x, NULL, NULL, &p, &y, NULL), NORM_E_OVERFLOW);
}
END_TEST

START_TEST(test_err_output_weight_bias) {
  norm_instance_params_t p = {1e-5};
  norm_tensor_t x = tu_mk(NORM_F32, 3, SHAPE(2, 3, 4));
  norm_tensor_t y = tu_mk(NORM_F32, 3, SHAPE(2, 3, 4));
  norm_tensor_t ybad = tu_mk(NORM_F32, 3, SHAPE(2, 4, 3));
  norm_tensor_t y4 = tu_mk(NORM_F32, 4, SHAPE(2, 3, 4, 1));
  norm_tensor_t ok = tu_mk(NORM_F32, 1, SHAPE(3));
  norm_tensor_t w4 = tu_mk(NORM_F32, 1, SHAPE(4));
  norm_tensor_t w23 = tu_mk(NORM_F32, 2, SHAPE(2, 3));
  EXPECT_RC(norm_instance(&x, NULL, NULL, &p, &ybad, NULL), NORM_E_OUTPUT);
  EXPECT_RC(norm_instance(&x, NULL, NULL, &p, &y4, NULL), NORM_E_OUTPUT);
  EXPECT_RC(norm_instance_rows(&x, NULL, NULL, &p, &ybad, NULL, 0, 1),
            NORM_E_OUTPUT);
  EXPECT_RC(norm_instance(&x, &w4, NULL, &p, &y, NULL), NORM_E_WEIGHT);
  EXPECT_RC(norm_instance(&x, &w23, &ok, &p, &y, NULL), NORM_E_WEIGHT);
  EXPECT_RC(norm_instance(&x, &ok, &w4, &p, &y, NULL), NORM_E_BIAS);
  EXPECT_RC(norm_instance(&x, NULL, &w23, &p, &y, NULL), NORM_E_BIAS);
  EXPECT_RC(norm_instance(&x, &ok, &ok, &p, &y, NULL), NORM_OK);
  tu_tensor_free(&x);
  tu_tensor_free(&y);
  tu_tensor_free(&ybad);
  tu_tensor_free(&y4);
  tu_tensor_free(&ok);
  tu_tensor_free(&w4);
  tu_tensor_free(&w23);
}
END_TEST

Suite *norm_instance_suite(void) {
  Suite *s = suite_create("norm_instance");
  TCase *tc = tcase_create("Core");
  tcase_add_test(tc, test_ncl);
  tcase_add_test(tc, test_nchw);
  tcase_add_test(tc, test_f64);
  tcase_add_test(tc, test_half);
  tcase_add_test(tc, test_mixed_dtypes);
  tcase_add_test(tc, test_spatial_one);
  tcase_add_test(tc, test_stats_index);
  tcase_add_test(tc, test_in_place);
  suite_add_tcase(s, tc);

  tc = tcase_create("Cruel");
  tcase_add_test(tc, test_large_mean);
  tcase_add_test(tc, test_constant_instances);
  tcase_add_test(tc, test_nan_isolated);
  tcase_add_test(tc, test_inf_isolated);
  tcase_add_test(tc, test_million_value_instances);
  tcase_add_test(tc, test_subnormal_inputs);
  suite_add_tcase(s, tc);

  tc = tcase_create("Rows");
  tcase_add_test(tc, test_rows_split);
  tcase_add_test(tc, test_rows_bad_range);
  tcase_add_test(tc, test_groups_count);
  suite_add_tcase(s, tc);

  tc = tcase_create("Errors");
  tcase_add_test(tc, test_err_eps);
  tcase_add_test(tc, test_err_null_and_shape);
  tcase_add_test(tc, test_err_output_weight_bias);
  tcase_add_test(tc, test_err_dtype);
  tcase_add_test(tc, test_err_output_bytes_overflow);
  suite_add_tcase(s, tc);
  return s;
}
