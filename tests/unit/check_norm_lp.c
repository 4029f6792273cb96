/* check_norm_lp.c -- norm_lp_rows and norm_lp_backward_rows against a naive
 * long-double reference (every dtype pair, contiguous and non-contiguous
 * axes sets, p = 1, 2, 0.5, 3, INFINITY), torch's values at the edges
 * (p = INFINITY ties, zero slices, n == eps), cruel magnitudes, NaN / Inf,
 * central differences, errors, range splits and aliasing. */
#include "testutil.h"

static const norm_dtype_t dtypes[] = {NORM_F32, NORM_F64, NORM_F16, NORM_BF16};
static const double ps[] = {1.0, 2.0, 0.5, 3.0, INFINITY};

/* Shapes and axes sets: the last dim, a leading one, a non-contiguous
 * pair of a rank-3 input, all of it, and two of a rank-4 one. */
typedef struct {
  int rank;
  int64_t shape[4];
  unsigned axes;
} lp_shape_t;
static const lp_shape_t shapes[] = {
    {1, {7}, 1u},          {2, {3, 5}, 2u},       {2, {3, 5}, 1u},
    {3, {2, 3, 4}, 5u},    {3, {2, 3, 4}, 7u},    {4, {4, 1, 3, 2}, 10u},
    {3, {3, 17, 2}, 2u},
};

/* ||x||_p of every group, and y = x / max(n, eps) (y = 0 where both are
 * 0), in long double straight from the definitions. */
static void ref_lp(const norm_tensor_t *x, unsigned axes, double p, double eps,
                   double *y, double *norms) {
  size_t n = tu_numel(x), ng = tu_axes_groups(x->rank, x->shape, axes);
  long double *acc = calloc(ng, sizeof *acc);
  int *nan = calloc(ng, sizeof *nan);
  ck_assert(acc && nan);
  for (size_t i = 0; i < n; i++) {
    size_t g = tu_axes_group(x->rank, x->shape, axes, i);
    long double v = fabsl((long double)norm_tensor_get(x, i));
    if (isnan(v)) nan[g] = 1;
    if (isinf(p))
      acc[g] = v > acc[g] ? v : acc[g];
    else
      acc[g] += powl(v, (long double)p);
  }
  for (size_t g = 0; g < ng; g++)
    norms[g] = nan[g]        ? NAN
               : isinf(p)    ? (double)acc[g]
                             : (double)powl(acc[g], 1.0L / (long double)p);
  for (size_t i = 0; i < n; i++) {
    size_t g = tu_axes_group(x->rank, x->shape, axes, i);
    double d = norms[g] < eps ? eps : norms[g];
    y[i] = d == 0 ? 0.0 : (double)((long double)norm_tensor_get(x, i) / d);
  }
  free(acc);
  free(nan);
}

/* dx as torch.autograd gives it (see norm.h), in long double. */
static void ref_lp_backward(const norm_tensor_t *x, const norm_tensor_t *dy,
                            unsigned axes, double p, double eps, double *dx) {
  size_t n = tu_numel(x), ng = tu_axes_groups(x->rank, x->shape, axes);
  double *y = malloc(n * sizeof *y), *nr = malloc(ng * sizeof *nr);
  long double *s = calloc(ng, sizeof *s), *ties = calloc(ng, sizeof *ties);
  ck_assert(y && nr && s && ties);
  ref_lp(x, axes, p, eps, y, nr);
  for (size_t i = 0; i < n; i++) {
    size_t g = tu_axes_group(x->rank, x->shape, axes, i);
    long double xi = norm_tensor_get(x, i);
    s[g] += (long double)norm_tensor_get(dy, i) * xi;
    if (isinf(p) && fabsl(xi) == nr[g]) ties[g] += 1;
  }
  for (size_t i = 0; i < n; i++) {
    size_t g = tu_axes_group(x->rank, x->shape, axes, i);
    long double xi = norm_tensor_get(x, i), d = norm_tensor_get(dy, i);
    long double nn = nr[g];
    if (nn == 0 && eps == 0) {
      dx[i] = 0;
    } else if (nn < eps) {
      dx[i] = (double)(d / eps);
    } else {
      long double dn; /* d n / d x_i */
      if (xi == 0)
        dn = 0;
      else if (isinf(p))
        dn = fabsl(xi) == nn ? (xi > 0 ? 1 : -1) / ties[g] : 0;
      else
        dn = (xi > 0 ? 1 : -1) * powl(fabsl(xi) / nn, (long double)p - 1);
      dx[i] = (double)(d / nn - s[g] / (nn * nn) * dn);
    }
  }
  free(y), free(nr), free(s), free(ties);
}

static norm_tensor_t mk_shape(norm_dtype_t dt, const lp_shape_t *s) {
  return tu_mk(dt, s->rank, s->shape);
}

/* One forward case: y and norms against ref_lp. */
static void run_forward(norm_tensor_t *x, norm_dtype_t yt, unsigned axes,
                        double p, double eps, double tol64) {
  norm_tensor_t y = tu_mk(yt, x->rank, x->shape);
  size_t n = tu_numel(x), ng = tu_axes_groups(x->rank, x->shape, axes);
  double *ref = malloc(n * sizeof *ref), *rn = malloc(ng * sizeof *rn);
  double *norms = tu_doubles(ng);
  ck_assert(ref && rn);
  norm_lp_params_t prm = {p, eps, axes};
  ck_assert_int_eq(norm_lp_groups(x, &prm), (int64_t)ng);
  EXPECT_RC(norm_lp_rows(x, &prm, &y, norms, 0, ng), NORM_OK);
  ref_lp(x, axes, p, eps, ref, rn);
  tu_check_output("y", &y, ref, 1e-6, tol64);
  for (size_t g = 0; g < ng; g++)
    ck_assert_msg(tu_rel_close(norms[g], rn[g], 1e-12),
                  "norm[%zu] = %.17g want %.17g (p %g)", g, norms[g], rn[g], p);
  free(ref), free(rn);
  tu_doubles_free(norms, ng);
  tu_tensor_free(&y);
}

START_TEST(test_reference_every_dtype) {
  for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
    for (size_t pi = 0; pi < sizeof ps / sizeof ps[0]; pi++)
      for (int xt = 0; xt < 4; xt++)
        for (int yt = 0; yt < 4; yt++) {
          norm_tensor_t x = mk_shape(dtypes[xt], &shapes[si]);
          tu_fill_uniform(&x, 100 + si * 7 + pi, -3, 3);
          run_forward(&x, dtypes[yt], shapes[si].axes, ps[pi], 1e-12, 1e-13);
          tu_tensor_free(&x);
        }
}
END_TEST

/* 1e30 and 1e-30 (float32: squares only exist in double), float32 and
 * float64 subnormals, float64 1e300 (whose squares overflow double). */
START_TEST(test_cruel_magnitudes) {
  static const struct {
    norm_dtype_t dt;
    double scale, eps;
  } c[] = {{NORM_F32, 1e30, 1e-12}, {NORM_F32, 1e-30, 0},
           {NORM_F32, 1e-40, 0},    {NORM_BF16, 1e-38, 0},
           {NORM_F64, 1e300, 1e-12}, {NORM_F64, 1e-300, 0},
           {NORM_F64, 1e-310, 0},   {NORM_F16, 1e-6, 0}};
  lp_shape_t s = {3, {2, 3, 4}, 5u};
  for (size_t k = 0; k < sizeof c / sizeof c[0]; k++)
    for (size_t pi = 0; pi < sizeof ps / sizeof ps[0]; pi++) {
      norm_tensor_t x = mk_shape(c[k].dt, &s);
      tu_fill_uniform(&x, 200 + k, -c[k].scale, c[k].scale);
      run_forward(&x, c[k].dt, s.axes, ps[pi], c[k].eps, 1e-12);
      run_forward(&x, NORM_F64, s.axes, ps[pi], c[k].eps, 1e-12);
      tu_tensor_free(&x);
    }
}
END_TEST

/* An all-zero group gives y = 0 (not NaN) for every p and eps, 0 too; its
 * gradient is dy / eps (torch), 0 with eps = 0. */
START_TEST(test_zero_slice) {
  for (size_t pi = 0; pi < sizeof ps / sizeof ps[0]; pi++)
    for (int e = 0; e < 2; e++) {
      double eps = e ? 1e-12 : 0.0;
      norm_tensor_t x = tu_tensor(NORM_F32, 2, (int64_t)3, (int64_t)4);
      tu_fill_uniform(&x, 7, -1, 1);
      for (size_t j = 4; j < 8; j++) norm_tensor_set(&x, j, 0.0);
      norm_tensor_t y = tu_tensor(NORM_F32, 2, (int64_t)3, (int64_t)4);
      norm_lp_params_t prm = {ps[pi], eps, 2u};
      double norms[3];
      EXPECT_RC(norm_lp_rows(&x, &prm, &y, norms, 0, 3), NORM_OK);
      ck_assert(norms[1] == 0.0);
      for (size_t j = 4; j < 8; j++) {
        float v = ((float *)y.data)[j];
        ck_assert_msg(v == 0.0f && !signbit(v), "y[%zu] = %g", j, v);
      }
      norm_tensor_t dy = tu_tensor(NORM_F64, 2, (int64_t)3, (int64_t)4);
      norm_tensor_t dx = tu_tensor(NORM_F64, 2, (int64_t)3, (int64_t)4);
      tu_fill_uniform(&dy, 8, -1, 1);
      EXPECT_RC(norm_lp_backward_rows(&x, &dy, &prm, &dx, NULL, 0, 3),
                NORM_OK);
      for (size_t j = 4; j < 8; j++) {
        double want = eps > 0 ? norm_tensor_get(&dy, j) / eps : 0.0;
        ck_assert_msg(norm_tensor_get(&dx, j) == want, "dx[%zu] = %g want %g",
                      j, norm_tensor_get(&dx, j), want);
      }
      tu_tensor_free(&x), tu_tensor_free(&y);
      tu_tensor_free(&dy), tu_tensor_free(&dx);
    }
}
END_TEST

/* The values torch 1.13's autograd gives (float64, printed with repr):
 * F.normalize(x, p, dim=0, eps) backward with dy = (0.5, -1.25, 2). */
START_TEST(test_torch_edges) {
  static const struct {
    double p, eps, x[3], dx[3];
    int n;
  } c[] = {
      /* p = inf, a tie of 3 and -3: each gets half of d n */
      {INFINITY, 1e-12, {3, -3, 1},
       {-0.23611111111111108, -0.01388888888888895, 0.6666666666666666}, 3},
      {INFINITY, 1e-12, {3, 3, 3},
       {0.02777777777777779, -0.5555555555555556, 0.5277777777777778}, 3},
      {INFINITY, 1e-12, {2, -1, 2}, {-0.53125, -0.625, 0.21875}, 3},
      /* zero slice: dy / eps; below eps too */
      {INFINITY, 1e-12, {0, 0, 0}, {5e11, -1.25e12, 2e12}, 3},
      {INFINITY, 1e-12, {1e-13, 0, -1e-13}, {5e11, -1.25e12, 2e12}, 3},
      {2, 1e-12, {0, 0, 0}, {5e11, -1.25e12, 2e12}, 3},
      /* zero elements with p < 2: torch's norm_backward masks them to 0 */
      {0.5, 1e-12, {0, 1, -2},
       {0.08578643762690495, 0.15863991822648268, 0.07931995911324136}, 3},
      {1, 1e-12, {0, 1, -2},
       {0.16666666666666666, 0.16666666666666657, 0.08333333333333337}, 3},
      {3, 1e-12, {0, 1, -2},
       {0.24037492838456806, -0.32049990451275745, -0.1602499522563786}, 3},
      /* n == eps: clamp_min passes the gradient to n */
      {2, 2.0, {2, 0}, {0.0, -0.625}, 2},
  };
  static const double dyv[3] = {0.5, -1.25, 2};
  for (size_t k = 0; k < sizeof c / sizeof c[0]; k++) {
    int64_t n = c[k].n;
    norm_tensor_t x = tu_tensor(NORM_F64, 1, n), dy = tu_tensor(NORM_F64, 1, n),
                  dx = tu_tensor(NORM_F64, 1, n);
    for (int i = 0; i < n; i++) {
      norm_tensor_set(&x, (size_t)i, c[k].x[i]);
      norm_tensor_set(&dy, (size_t)i, dyv[i]);
    }
    norm_lp_params_t prm = {c[k].p, c[k].eps, 1u};
    EXPECT_RC(norm_lp_backward_rows(&x, &dy, &prm, &dx, NULL, 0, 1), NORM_OK);
    for (int i = 0; i < n; i++)
      ck_assert_msg(tu_close(norm_tensor_get(&dx, (size_t)i), c[k].dx[i],
                             1e-14),
                    "case %zu: dx[%d] = %.17g, torch %.17g", k, i,
                    norm_tensor_get(&dx, (size_t)i), c[k].dx[i]);
    tu_tensor_free(&x), tu_tensor_free(&dy), tu_tensor_free(&dx);
  }
}
END_TEST

/* A NaN makes its group's norm and y NaN; an Inf gives NaN at itself and 0
 * (of the right sign) elsewhere in its group, as x / inf in torch. Other
 * groups are untouched. */
START_TEST(test_nan_inf) {
  for (size_t pi = 0; pi < sizeof ps / sizeof ps[0]; pi++)
    for (int inf = 0; inf < 2; inf++) {
      norm_tensor_t x = tu_tensor(NORM_F32, 2, (int64_t)3, (int64_t)5);
      norm_tensor_t y = tu_tensor(NORM_F32, 2, (int64_t)3, (int64_t)5);
      tu_fill_uniform(&x, 9, 0.5, 1);
      norm_tensor_set(&x, 6, inf ? INFINITY : NAN);
      norm_lp_params_t prm = {ps[pi], 1e-12, 2u};
      double norms[3], ref[15], rn[3];
      EXPECT_RC(norm_lp_rows(&x, &prm, &y, norms, 0, 3), NORM_OK);
      ref_lp(&x, 2u, ps[pi], 1e-12, ref, rn);
      ck_assert(inf ? isinf(norms[1]) : isnan(norms[1]));
      for (size_t i = 0; i < 15; i++) {
        double got = norm_tensor_get(&y, i);
        if (i >= 5 && i < 10 && (!inf || i == 6))
          ck_assert_msg(isnan(got), "y[%zu] = %g", i, got);
        else if (i >= 5 && i < 10)
          ck_assert_msg(got == 0.0, "y[%zu] = %g", i, got);
        else
          ck_assert(tu_close(got, ref[i], 1e-6));
      }
      tu_tensor_free(&x), tu_tensor_free(&y);
    }
}
END_TEST

/* Backward against the reference for mixed dtypes of x, dy and dx. */
START_TEST(test_backward_reference) {
  for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
    for (size_t pi = 0; pi < sizeof ps / sizeof ps[0]; pi++)
      for (int k = 0; k < 4; k++) {
        norm_dtype_t xt = dtypes[k], dt = dtypes[(k + 1) % 4],
                     ot = dtypes[(k + si) % 4];
        norm_tensor_t x = mk_shape(xt, &shapes[si]);
        norm_tensor_t dy = mk_shape(dt, &shapes[si]);
        norm_tensor_t dx = mk_shape(ot, &shapes[si]);
        tu_fill_uniform(&x, 300 + si, -2, 2);
        tu_fill_uniform(&dy, 400 + si, -1, 1);
        norm_lp_params_t prm = {ps[pi], 1e-12, shapes[si].axes};
        size_t n = tu_numel(&x), ng = tu_axes_groups(x.rank, x.shape, prm.axes);
        double *ref = malloc(n * sizeof *ref);
        ck_assert_ptr_nonnull(ref);
        EXPECT_RC(norm_lp_backward_rows(&x, &dy, &prm, &dx, NULL, 0, ng),
                  NORM_OK);
        ref_lp_backward(&x, &dy, prm.axes, ps[pi], 1e-12, ref);
        tu_check_output("dx", &dx, ref, 1e-6, 1e-12);
        free(ref);
        tu_tensor_free(&x), tu_tensor_free(&dy), tu_tensor_free(&dx);
      }
}
END_TEST

typedef struct {
  norm_lp_params_t p;
  const norm_tensor_t *x; /* backward: the input */
} lp_ctx_t;

static int lp_forward_fn(void *ctx, const norm_tensor_t *x, norm_tensor_t *y) {
  lp_ctx_t *c = ctx;
  int64_t ng = norm_lp_groups(x, &c->p);
  return norm_lp_rows(x, &c->p, y, NULL, 0, (size_t)ng);
}

START_TEST(test_backward_central_differences) {
  for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
    for (size_t pi = 0; pi < sizeof ps / sizeof ps[0]; pi++) {
      norm_tensor_t x = mk_shape(NORM_F64, &shapes[si]);
      norm_tensor_t dy = mk_shape(NORM_F64, &shapes[si]);
      norm_tensor_t dx = mk_shape(NORM_F64, &shapes[si]);
      tu_fill_uniform(&x, 500 + si, 0.2, 2); /* away from 0 and ties */
      size_t n = tu_numel(&x);
      for (size_t i = 0; i < n; i += 2)
        norm_tensor_set(&x, i, -norm_tensor_get(&x, i));
      tu_fill_uniform(&dy, 600 + si, -1, 1);
      lp_ctx_t c = {{ps[pi], 1e-12, shapes[si].axes}, NULL};
      size_t ng = tu_axes_groups(x.rank, x.shape, c.p.axes);
      EXPECT_RC(norm_lp_backward_rows(&x, &dy, &c.p, &dx, NULL, 0, ng),
                NORM_OK);
      tu_family_fd(lp_forward_fn, &c, &x, dy.data, &dx, 1e-6, 1e-7);
      tu_tensor_free(&x), tu_tensor_free(&dy), tu_tensor_free(&dx);
    }
}
END_TEST

static int lp_rows_fn(void *ctx, const norm_tensor_t *in, norm_tensor_t *out,
                      double *aux, size_t lo, size_t hi) {
  lp_ctx_t *c = ctx;
  return norm_lp_rows(in, &c->p, out, aux, lo, hi);
}

static int lp_backward_fn(void *ctx, const norm_tensor_t *in,
                          norm_tensor_t *out, double *aux, size_t lo,
                          size_t hi) {
  lp_ctx_t *c = ctx;
  return norm_lp_backward_rows(c->x, in, &c->p, out, aux, lo, hi);
}

START_TEST(test_split_and_alias) {
  for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
    for (int k = 0; k < 4; k++) {
      norm_tensor_t x = mk_shape(dtypes[k], &shapes[si]);
      norm_tensor_t dy = mk_shape(dtypes[k], &shapes[si]);
      tu_fill_uniform(&x, 700 + si, -2, 2);
      tu_fill_uniform(&dy, 800 + si, -1, 1);
      lp_ctx_t c = {{ps[(si + k) % 5], 1e-12, shapes[si].axes}, &x};
      size_t ng = tu_axes_groups(x.rank, x.shape, c.p.axes);
      tu_family_split(lp_rows_fn, &c, &x, &x, ng, ng);
      tu_family_alias(lp_rows_fn, &c, &x, ng, ng);
      tu_family_split(lp_backward_fn, &c, &dy, &dy, ng, ng);
      tu_family_alias(lp_backward_fn, &c, &dy, ng, ng);
      tu_tensor_free(&x), tu_tensor_free(&dy);
    }
}
END_TEST

START_TEST(test_errors) {
  norm_tensor_t x = tu_tensor(NORM_F32, 3, (int64_t)2, (int64_t)3, (int64_t)4);
  norm_tensor_t y = tu_tensor(NORM_F16, 3, (int64_t)2, (int64_t)3, (int64_t)4);
  norm_tensor_t bad = tu_tensor(NORM_F32, 3, (int64_t)2, (int64_t)3, (int64_t)5);
  norm_lp_params_t p = {2, 1e-12, 5u};
  ck_assert_int_eq(norm_lp_groups(&x, &p), 3);
  EXPECT_RC(norm_lp_rows(NULL, &p, &y, NULL, 0, 3), NORM_E_NULL);
  EXPECT_RC(norm_lp_rows(&x, NULL, &y, NULL, 0, 3), NORM_E_NULL);
  EXPECT_RC(norm_lp_rows(&x, &p, NULL, NULL, 0, 3), NORM_E_NULL);
  EXPECT_RC(norm_lp_rows(&x, &p, &bad, NULL, 0, 3), NORM_E_OUTPUT);
  EXPECT_RC(norm_lp_rows(&x, &p, &y, NULL, 0, 4), NORM_E_RANGE);
  EXPECT_RC(norm_lp_rows(&x, &p, &y, NULL, 2, 1), NORM_E_RANGE);
  EXPECT_RC(norm_lp_rows(&x, &p, &y, NULL, 3, 3), NORM_OK);
  static const double bad_p[] = {0.0, -1.0, NAN, -INFINITY};
  for (size_t i = 0; i < 4; i++) {
    norm_lp_params_t q = {bad_p[i], 1e-12, 5u};
    EXPECT_RC(norm_lp_rows(&x, &q, &y, NULL, 0, 3), NORM_E_ARG);
  }
  static const double bad_eps[] = {-1e-12, INFINITY, NAN};
  for (size_t i = 0; i < 3; i++) {
    norm_lp_params_t q = {2, bad_eps[i], 5u};
    EXPECT_RC(norm_lp_rows(&x, &q, &y, NULL, 0, 3), NORM_E_EPS);
  }
  static const unsigned bad_axes[] = {0u, 8u, 9u, 1u << 31};
  for (size_t i = 0; i < 4; i++) {
    norm_lp_params_t q = {2, 1e-12, bad_axes[i]};
    EXPECT_RC(norm_lp_rows(&x, &q, &y, NULL, 0, 3), NORM_E_AXIS);
    ck_assert_int_eq(norm_lp_groups(&x, &q), NORM_E_AXIS);
  }
  EXPECT_RC(norm_lp_backward_rows(&x, &bad, &p, &y, NULL, 0, 3),
            NORM_E_GRAD_OUTPUT);
  EXPECT_RC(norm_lp_backward_rows(&x, NULL, &p, &y, NULL, 0, 3), NORM_E_NULL);
  EXPECT_RC(norm_lp_backward_rows(&x, &x, &p, &y, NULL, 0, 4), NORM_E_RANGE);
  ck_assert_int_eq(norm_lp_groups(NULL, &p), NORM_E_NULL);
  tu_tensor_free(&x), tu_tensor_free(&y), tu_tensor_free(&bad);
}
END_TEST

Suite *norm_lp_suite(void) {
  Suite *s = suite_create("norm_lp");
  TCase *core = tcase_create("Core");
  tcase_add_test(core, test_reference_every_dtype);
  tcase_add_test(core, test_torch_edges);
  tcase_add_test(core, test_backward_reference);
  tcase_add_test(core, test_backward_central_differences);
  tcase_add_test(core, test_split_and_alias);
  suite_add_tcase(s, core);
  TCase *limits = tcase_create("Limits");
  tcase_add_test(limits, test_cruel_magnitudes);
  tcase_add_test(limits, test_zero_slice);
  tcase_add_test(limits, test_nan_inf);
  suite_add_tcase(s, limits);
  TCase *errors = tcase_create("Errors");
  tcase_add_test(errors, test_errors);
  suite_add_tcase(s, errors);
  return s;
}
