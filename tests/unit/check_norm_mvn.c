/* check_norm_mvn.c -- norm_mvn_rows and norm_mvn_backward_rows against a
 * naive long-double reference over axes sets (ONNX's default {0, 2, 3}
 * included), every dtype pair, constant groups, cruel magnitudes, NaN,
 * central differences, errors, range splits and aliasing. */
#include "testutil.h"

static const norm_dtype_t dtypes[] = {NORM_F32, NORM_F64, NORM_F16, NORM_BF16};

typedef struct {
  int rank;
  int64_t shape[4];
  unsigned axes;
} mvn_shape_t;
static const mvn_shape_t shapes[] = {
    {4, {2, 3, 4, 2}, 13u}, /* ONNX's default axes {0, 2, 3} */
    {3, {2, 3, 4}, 5u},     {2, {4, 6}, 2u},  {2, {4, 6}, 1u},
    {1, {9}, 1u},           {3, {3, 2, 5}, 7u},
};

/* mean, biased var and rstd = 1 / (std + eps) per group; y. */
static void ref_mvn(const norm_tensor_t *x, unsigned axes, double eps,
                    double *y, double *mean, double *var, double *rstd) {
  size_t n = tu_numel(x), ng = tu_axes_groups(x->rank, x->shape, axes);
  long double *s = calloc(ng, sizeof *s), *q = calloc(ng, sizeof *q);
  ck_assert(s && q);
  double cnt = (double)(n / ng);
  for (size_t i = 0; i < n; i++)
    s[tu_axes_group(x->rank, x->shape, axes, i)] += norm_tensor_get(x, i);
  for (size_t g = 0; g < ng; g++) mean[g] = (double)(s[g] / cnt);
  for (size_t i = 0; i < n; i++) {
    size_t g = tu_axes_group(x->rank, x->shape, axes, i);
    long double d = norm_tensor_get(x, i) - (s[g] / cnt);
    q[g] += d * d;
  }
  for (size_t g = 0; g < ng; g++) {
    var[g] = (double)(q[g] / cnt);
    rstd[g] = (double)(1.0L / (sqrtl(q[g] / cnt) + eps));
  }
  for (size_t i = 0; i < n; i++) {
    size_t g = tu_axes_group(x->rank, x->shape, axes, i);
    long double d = norm_tensor_get(x, i) - (s[g] / cnt);
    y[i] = q[g] == 0 && eps == 0 ? 0.0
                                   : (double)(d / (sqrtl(q[g] / cnt) + eps));
  }
  free(s), free(q);
}

/* dx from the chain rule, term by term: through x directly, the mean, and
 * the std (d std / d x_i = (x_i - mean) / (n std), 0 where std = 0). */
static void ref_mvn_backward(const norm_tensor_t *x, const norm_tensor_t *dy,
                             unsigned axes, double eps, double *dx) {
  size_t n = tu_numel(x), ng = tu_axes_groups(x->rank, x->shape, axes);
  double *y = malloc(n * sizeof *y), *m = malloc(ng * sizeof *m),
         *v = malloc(ng * sizeof *v), *r = malloc(ng * sizeof *r);
  long double *sg = calloc(ng, sizeof *sg), *sgd = calloc(ng, sizeof *sgd);
  ck_assert(y && m && v && r && sg && sgd);
  ref_mvn(x, axes, eps, y, m, v, r);
  long double cnt = (long double)(n / ng);
  for (size_t i = 0; i < n; i++) {
    size_t g = tu_axes_group(x->rank, x->shape, axes, i);
    long double d = norm_tensor_get(dy, i);
    sg[g] += d;
    sgd[g] += d * (norm_tensor_get(x, i) - (long double)m[g]);
  }
  for (size_t i = 0; i < n; i++) {
    size_t g = tu_axes_group(x->rank, x->shape, axes, i);
    long double sd = sqrtl((long double)v[g]), den = sd + eps;
    if (sd == 0 && eps == 0) {
      dx[i] = 0;
      continue;
    }
    long double xi = norm_tensor_get(x, i) - (long double)m[g];
    /* L = sum dy (x - m) / den: d/dx_i = (dy_i - mean(dy)) / den
     *  - sum(dy (x - m)) / den^2 * d sd / d x_i */
    long double dsd = sd > 0 ? xi / (cnt * sd) : 0;
    dx[i] = (double)((norm_tensor_get(dy, i) - sg[g] / cnt) / den -
                     sgd[g] / (den * den) * dsd);
  }
  free(y), free(m), free(v), free(r), free(sg), free(sgd);
}

static void run_forward(norm_tensor_t *x, norm_dtype_t yt, unsigned axes,
                        double eps, double tol64) {
  norm_tensor_t y = tu_mk(yt, x->rank, x->shape);
  size_t n = tu_numel(x), ng = tu_axes_groups(x->rank, x->shape, axes);
  double *ref = malloc(n * sizeof *ref), *rm = malloc(ng * sizeof *rm),
         *rv = malloc(ng * sizeof *rv), *rr = malloc(ng * sizeof *rr);
  double *m = tu_doubles(ng), *v = tu_doubles(ng), *r = tu_doubles(ng);
  ck_assert(ref && rm && rv && rr);
  norm_mvn_params_t p = {eps, axes};
  ck_assert_int_eq(norm_mvn_groups(x, &p), (int64_t)ng);
  norm_stats_t st = {m, v, r, NULL};
  EXPECT_RC(norm_mvn_rows(x, &p, &y, &st, 0, ng), NORM_OK);
  ref_mvn(x, axes, eps, ref, rm, rv, rr);
  tu_check_output("y", &y, ref, 1e-6, tol64);
  tu_check_stats(&st, rm, rv, rr, ng, 1e-12);
  free(ref), free(rm), free(rv), free(rr);
  tu_doubles_free(m, ng), tu_doubles_free(v, ng), tu_doubles_free(r, ng);
  tu_tensor_free(&y);
}

START_TEST(test_reference_every_dtype) {
  for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
    for (int xt = 0; xt < 4; xt++)
      for (int yt = 0; yt < 4; yt++)
        for (int e = 0; e < 2; e++) {
          norm_tensor_t x = tu_mk(dtypes[xt], shapes[si].rank, shapes[si].shape);
          tu_fill_uniform(&x, 10 + si, -3, 2);
          run_forward(&x, dtypes[yt], shapes[si].axes, e ? 1e-9 : 0.1, 1e-12);
          tu_tensor_free(&x);
        }
}
END_TEST

/* Constant groups: y = 0 exactly (eps > 0: 0 / eps; eps = 0: the library's
 * convention rather than 0 / 0), var 0, dx = dy - mean(dy) over eps (0
 * with eps = 0). */
START_TEST(test_constant_groups) {
  for (int e = 0; e < 2; e++) {
    double eps = e ? 1e-9 : 0.0;
    norm_tensor_t x = tu_tensor(NORM_F32, 2, (int64_t)3, (int64_t)4);
    norm_tensor_t y = tu_tensor(NORM_F32, 2, (int64_t)3, (int64_t)4);
    norm_tensor_t dy = tu_tensor(NORM_F64, 2, (int64_t)3, (int64_t)4);
    norm_tensor_t dx = tu_tensor(NORM_F64, 2, (int64_t)3, (int64_t)4);
    tu_fill_uniform(&x, 1, -1, 1);
    tu_fill_uniform(&dy, 2, -1, 1);
    for (size_t j = 4; j < 8; j++) norm_tensor_set(&x, j, 1e4 + 0.125);
    double m[3], v[3], r[3];
    norm_stats_t st = {m, v, r, NULL};
    norm_mvn_params_t p = {eps, 2u};
    EXPECT_RC(norm_mvn_rows(&x, &p, &y, &st, 0, 3), NORM_OK);
    ck_assert(v[1] == 0.0 && m[1] == 1e4 + 0.125);
    for (size_t j = 4; j < 8; j++) ck_assert(norm_tensor_get(&y, j) == 0.0);
    EXPECT_RC(norm_mvn_backward_rows(&x, &dy, &p, &dx, NULL, 0, 3), NORM_OK);
    double ref[12];
    ref_mvn_backward(&x, &dy, 2u, eps, ref);
    tu_check_output("dx", &dx, ref, 1e-6, 1e-12);
    tu_tensor_free(&x), tu_tensor_free(&y), tu_tensor_free(&dy),
        tu_tensor_free(&dx);
  }
}
END_TEST

START_TEST(test_cruel_magnitudes) {
  static const struct {
    norm_dtype_t dt;
    double lo, hi, eps;
  } c[] = {{NORM_F32, -1e30, 1e30, 1e-9},   {NORM_F32, -1e-30, 1e-30, 0},
           {NORM_F32, -1e-40, 3e-40, 0},    {NORM_F64, -1e300, 1e300, 1e-9},
           {NORM_F64, -1e-310, 1e-310, 0},  {NORM_F32, 1e4 - 0.01, 1e4 + 0.01, 0},
           {NORM_BF16, -1e-38, 1e-38, 0}};
  mvn_shape_t s = {4, {2, 3, 4, 2}, 13u};
  for (size_t k = 0; k < sizeof c / sizeof c[0]; k++) {
    norm_tensor_t x = tu_mk(c[k].dt, s.rank, s.shape);
    tu_fill_uniform(&x, 90 + k, c[k].lo, c[k].hi);
    run_forward(&x, NORM_F64, s.axes, c[k].eps, k == 5 ? 1e-8 : 1e-12);
    run_forward(&x, c[k].dt, s.axes, c[k].eps, 1e-8);
    tu_tensor_free(&x);
  }
}
END_TEST

START_TEST(test_nan_inf) {
  for (int inf = 0; inf < 2; inf++) {
    norm_tensor_t x = tu_tensor(NORM_F64, 2, (int64_t)3, (int64_t)4);
    norm_tensor_t y = tu_tensor(NORM_F64, 2, (int64_t)3, (int64_t)4);
    tu_fill_uniform(&x, 4, -1, 1);
    norm_tensor_set(&x, 5, inf ? INFINITY : NAN);
    norm_mvn_params_t p = {1e-9, 2u};
    EXPECT_RC(norm_mvn_rows(&x, &p, &y, NULL, 0, 3), NORM_OK);
    for (size_t i = 0; i < 12; i++)
      ck_assert_msg(isfinite(norm_tensor_get(&y, i)) == (i < 4 || i >= 8),
                    "y[%zu] = %g", i, norm_tensor_get(&y, i));
    tu_tensor_free(&x), tu_tensor_free(&y);
  }
}
END_TEST

START_TEST(test_backward_reference) {
  for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
    for (int k = 0; k < 4; k++) {
      norm_tensor_t x = tu_mk(dtypes[k], shapes[si].rank, shapes[si].shape);
      norm_tensor_t dy =
          tu_mk(dtypes[(k + 1) % 4], shapes[si].rank, shapes[si].shape);
      norm_tensor_t dx =
          tu_mk(dtypes[(k + si) % 4], shapes[si].rank, shapes[si].shape);
      tu_fill_uniform(&x, 20 + si, -2, 3);
      tu_fill_uniform(&dy, 30 + si, -1, 1);
      norm_mvn_params_t p = {k % 2 ? 1e-9 : 0.05, shapes[si].axes};
      size_t n = tu_numel(&x), ng = tu_axes_groups(x.rank, x.shape, p.axes);
      double *ref = malloc(n * sizeof *ref);
      ck_assert_ptr_nonnull(ref);
      EXPECT_RC(norm_mvn_backward_rows(&x, &dy, &p, &dx, NULL, 0, ng), NORM_OK);
      ref_mvn_backward(&x, &dy, p.axes, p.eps, ref);
      tu_check_output("dx", &dx, ref, 1e-6, 1e-12);
      free(ref);
      tu_tensor_free(&x), tu_tensor_free(&dy), tu_tensor_free(&dx);
    }
}
END_TEST

typedef struct {
  norm_mvn_params_t p;
  const norm_tensor_t *x;
} mvn_ctx_t;

static int mvn_forward_fn(void *ctx, const norm_tensor_t *x, norm_tensor_t *y) {
  mvn_ctx_t *c = ctx;
  return norm_mvn_rows(x, &c->p, y, NULL, 0, (size_t)norm_mvn_groups(x, &c->p));
}

START_TEST(test_backward_central_differences) {
  for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
    for (int e = 0; e < 2; e++) {
      norm_tensor_t x = tu_mk(NORM_F64, shapes[si].rank, shapes[si].shape);
      norm_tensor_t dy = tu_mk(NORM_F64, shapes[si].rank, shapes[si].shape);
      norm_tensor_t dx = tu_mk(NORM_F64, shapes[si].rank, shapes[si].shape);
      tu_fill_uniform(&x, 40 + si, -2, 3);
      tu_fill_uniform(&dy, 50 + si, -1, 1);
      mvn_ctx_t c = {{e ? 1e-9 : 0.3, shapes[si].axes}, NULL};
      size_t ng = tu_axes_groups(x.rank, x.shape, c.p.axes);
      EXPECT_RC(norm_mvn_backward_rows(&x, &dy, &c.p, &dx, NULL, 0, ng),
                NORM_OK);
      tu_family_fd(mvn_forward_fn, &c, &x, dy.data, &dx, 1e-6, 1e-7);
      tu_tensor_free(&x), tu_tensor_free(&dy), tu_tensor_free(&dx);
    }
}
END_TEST

/* aux: mean, var, rstd of the ng groups, one after another */
static int mvn_rows_fn(void *ctx, const norm_tensor_t *in, norm_tensor_t *out,
                       double *aux, size_t lo, size_t hi) {
  mvn_ctx_t *c = ctx;
  size_t ng = (size_t)norm_mvn_groups(in, &c->p);
  norm_stats_t st = {aux, aux + ng, aux + 2 * ng, NULL};
  return norm_mvn_rows(in, &c->p, out, &st, lo, hi);
}

static int mvn_backward_fn(void *ctx, const norm_tensor_t *in,
                           norm_tensor_t *out, double *aux, size_t lo,
                           size_t hi) {
  mvn_ctx_t *c = ctx;
  size_t ng = (size_t)norm_mvn_groups(c->x, &c->p);
  norm_stats_t st = {aux, aux + ng, aux + 2 * ng, NULL};
  return norm_mvn_backward_rows(c->x, in, &c->p, out, &st, lo, hi);
}

START_TEST(test_split_and_alias) {
  for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
    for (int k = 0; k < 4; k++) {
      norm_tensor_t x = tu_mk(dtypes[k], shapes[si].rank, shapes[si].shape);
      norm_tensor_t dy = tu_mk(dtypes[k], shapes[si].rank, shapes[si].shape);
      tu_fill_uniform(&x, 60 + si, -2, 2);
      tu_fill_uniform(&dy, 70 + si, -1, 1);
      mvn_ctx_t c = {{1e-9, shapes[si].axes}, &x};
      size_t ng = tu_axes_groups(x.rank, x.shape, c.p.axes);
      tu_family_split(mvn_rows_fn, &c, &x, &x, 3 * ng, ng);
      tu_family_alias(mvn_rows_fn, &c, &x, 3 * ng, ng);
      tu_family_split(mvn_backward_fn, &c, &dy, &dy, 3 * ng, ng);
      tu_family_alias(mvn_backward_fn, &c, &dy, 3 * ng, ng);
      tu_tensor_free(&x), tu_tensor_free(&dy);
    }
}
END_TEST

START_TEST(test_errors) {
  norm_tensor_t x = tu_tensor(NORM_F32, 3, (int64_t)2, (int64_t)3, (int64_t)4);
  norm_tensor_t y = tu_tensor(NORM_F64, 3, (int64_t)2, (int64_t)3, (int64_t)4);
  norm_tensor_t bad = tu_tensor(NORM_F32, 2, (int64_t)6, (int64_t)4);
  norm_mvn_params_t p = {1e-9, 5u};
  ck_assert_int_eq(norm_mvn_groups(&x, &p), 3);
  ck_assert_int_eq(norm_mvn_groups(NULL, &p), NORM_E_NULL);
  EXPECT_RC(norm_mvn_rows(&x, NULL, &y, NULL, 0, 3), NORM_E_NULL);
  EXPECT_RC(norm_mvn_rows(&x, &p, &bad, NULL, 0, 3), NORM_E_OUTPUT);
  EXPECT_RC(norm_mvn_rows(&x, &p, &y, NULL, 0, 4), NORM_E_RANGE);
  static const unsigned bad_axes[] = {0u, 8u, 15u};
  for (size_t i = 0; i < 3; i++) {
    norm_mvn_params_t q = {1e-9, bad_axes[i]};
    EXPECT_RC(norm_mvn_rows(&x, &q, &y, NULL, 0, 3), NORM_E_AXIS);
    ck_assert_int_eq(norm_mvn_groups(&x, &q), NORM_E_AXIS);
  }
  static const double bad_eps[] = {-1.0, INFINITY, NAN};
  for (size_t i = 0; i < 3; i++) {
    norm_mvn_params_t q = {bad_eps[i], 5u};
    EXPECT_RC(norm_mvn_rows(&x, &q, &y, NULL, 0, 3), NORM_E_EPS);
    EXPECT_RC(norm_mvn_backward_rows(&x, &x, &q, &y, NULL, 0, 3), NORM_E_EPS);
  }
  EXPECT_RC(norm_mvn_backward_rows(&x, &bad, &p, &y, NULL, 0, 3),
            NORM_E_GRAD_OUTPUT);
  EXPECT_RC(norm_mvn_backward_rows(&x, &x, &p, &y, NULL, 1, 0), NORM_E_RANGE);
  tu_tensor_free(&x), tu_tensor_free(&y), tu_tensor_free(&bad);
}
END_TEST

Suite *norm_mvn_suite(void) {
  Suite *s = suite_create("norm_mvn");
  TCase *core = tcase_create("Core");
  tcase_add_test(core, test_reference_every_dtype);
  tcase_add_test(core, test_backward_reference);
  tcase_add_test(core, test_backward_central_differences);
  tcase_add_test(core, test_split_and_alias);
  suite_add_tcase(s, core);
  TCase *limits = tcase_create("Limits");
  tcase_add_test(limits, test_constant_groups);
  tcase_add_test(limits, test_cruel_magnitudes);
  tcase_add_test(limits, test_nan_inf);
  suite_add_tcase(s, limits);
  TCase *errors = tcase_create("Errors");
  tcase_add_test(errors, test_errors);
  suite_add_tcase(s, errors);
  return s;
}
