/* check_norm_layer.c -- norm_layer / norm_layer_rows against a naive
 * two-pass double reference: every dtype and option, ill-conditioned rows
 * (large mean, constant, single element, subnormal, huge, non-finite),
 * row-range splitting, and each error code the layer norm can return.
 * Every output and stats buffer is guarded; the guard is checked on free. */
#include <float.h>
#include <math.h>

#include "testutil.h"

#define F32_TOL 1e-6
#define F64_TOL 1e-12
#define STATS_TOL 1e-12

/* ---- helpers ------------------------------------------------------------ */

/* Naive reference: two passes in double over the double values of x. */
static void ref_layer(const norm_tensor_t *x, const norm_tensor_t *w,
                      const norm_tensor_t *b, const norm_layer_params_t *p,
                      double *y, double *mean, double *var, double *rstd) {
  size_t n = tu_row_len(x, p->normalized_ndim), rows = tu_numel(x) / n;
  for (size_t r = 0; r < rows; r++) {
    const size_t o = r * n;
    double s = 0, m2 = 0;
    for (size_t i = 0; i < n; i++) s += norm_tensor_get(x, o + i);
    double m = s / (double)n;
    for (size_t i = 0; i < n; i++) {
      double d = norm_tensor_get(x, o + i) - m;
      m2 += d * d;
    }
    double v = m2 / (double)(p->variance == NORM_VAR_UNBIASED ? n - 1 : n);
    double rs = p->eps_placement == NORM_EPS_INSIDE_SQRT
                    ? 1.0 / sqrt(v + p->eps)
                    : 1.0 / (sqrt(v) + p->eps);
    for (size_t i = 0; i < n; i++) {
      double d = norm_tensor_get(x, o + i) - m;
      double yn = d == 0 ? 0 : d * rs; /* a constant row gives 0 */
      y[o + i] = yn * (w ? norm_tensor_get(w, i) : 1.0) +
                 (b ? norm_tensor_get(b, i) : 0.0);
    }
    mean[r] = m;
    var[r] = v;
    rstd[r] = rs;
  }
}

static double default_tol(norm_dtype_t dtype) {
  return dtype == NORM_F64 ? F64_TOL : F32_TOL;
}

/* One configuration: build, run, compare against the reference, free. */
typedef struct {
  norm_dtype_t x, w, b, y; /* w, b: TU_NO_DTYPE for none */
  int rank;
  int64_t shape[NORM_MAX_RANK];
  norm_layer_params_t p;
  double lo, hi; /* x uniform in [lo, hi) */
  double tol, stats_tol; /* 0: defaults */
  uint64_t seed;
} lcase_t;

static void run_case(const lcase_t *c) {
  norm_tensor_t x = tu_mk(c->x, c->rank, c->shape);
  norm_tensor_t y = tu_mk(c->y, c->rank, c->shape);
  const int64_t *tail = c->shape + c->rank - c->p.normalized_ndim;
  norm_tensor_t w = {0}, b = {0};
  if (c->w != TU_NO_DTYPE) {
    w = tu_mk(c->w, c->p.normalized_ndim, tail);
    tu_fill_uniform(&w, c->seed + 1, 0.5, 2.0);
  }
  if (c->b != TU_NO_DTYPE) {
    b = tu_mk(c->b, c->p.normalized_ndim, tail);
    tu_fill_uniform(&b, c->seed + 2, -1.0, 1.0);
  }
  tu_fill_uniform(&x, c->seed, c->lo, c->hi);
  size_t n = tu_numel(&x), rows = n / tu_row_len(&x, c->p.normalized_ndim);
  double *mean = tu_doubles(rows), *var = tu_doubles(rows),
         *rstd = tu_doubles(rows);
  double *ry = malloc(n * sizeof *ry), *rm = malloc(rows * sizeof *rm),
         *rv = malloc(rows * sizeof *rv), *rr = malloc(rows * sizeof *rr);
  ck_assert(ry && rm && rv && rr);
  const norm_tensor_t *wp = c->w != TU_NO_DTYPE ? &w : NULL;
  const norm_tensor_t *bp = c->b != TU_NO_DTYPE ? &b : NULL;
  ck_assert_int_eq(norm_layer_groups(&x, &c->p), (int64_t)rows);

  norm_stats_t st = {.mean = mean, .var = var, .rstd = rstd};
  ck_assert_int_eq(norm_layer(&x, wp, bp, &c->p, &y, &st), NORM_OK);
  ref_layer(&x, wp, bp, &c->p, ry, rm, rv, rr);
  tu_expect_tensor(&y, ry, c->tol > 0 ? c->tol : default_tol(c->y));
  double stol = c->stats_tol > 0 ? c->stats_tol : STATS_TOL;
  tu_expect_doubles("mean", mean, rm, rows, stol, 0);
  tu_expect_doubles("var", var, rv, rows, stol, 1);
  tu_expect_doubles("rstd", rstd, rr, rows, stol, 1);

  free(ry), free(rm), free(rv), free(rr);
  tu_doubles_free(mean, rows), tu_doubles_free(var, rows);
  tu_doubles_free(rstd, rows);
  if (wp) tu_tensor_free(&w);
  if (bp) tu_tensor_free(&b);
  tu_tensor_free(&x), tu_tensor_free(&y);
}

static lcase_t base_case(norm_dtype_t dt) {
  return (lcase_t){.x = dt, .w = dt, .b = dt, .y = dt, .rank = 2,
                   .shape = {6, 37}, .p = {.normalized_ndim = 1, .eps = 1e-5},
                   .lo = -2.0, .hi = 3.0, .seed = 42};
}

static const norm_dtype_t all_dtypes[] = {NORM_F32, NORM_F64, NORM_F16,
                                          NORM_BF16};

/* base_case(dt) on x of `shape`, normalized over its last ndim dims. */
static void run_shape(norm_dtype_t dt, int rank, const int64_t *shape,
                      int ndim) {
  lcase_t c = base_case(dt);
  c.rank = rank, c.p.normalized_ndim = ndim;
  memcpy(c.shape, shape, (size_t)rank * sizeof *shape);
  run_case(&c);
}

/* ---- Core ----------------------------------------------------------------- */

START_TEST(test_each_dtype) {
  lcase_t c = base_case(all_dtypes[_i]);
  run_case(&c);
  c.w = c.b = TU_NO_DTYPE;
  run_case(&c);
  c.w = all_dtypes[_i];
  run_case(&c);
  c.w = TU_NO_DTYPE, c.b = all_dtypes[_i];
  run_case(&c);
}
END_TEST

START_TEST(test_mixed_dtypes) {
  static const norm_dtype_t mix[][4] = {
      /* x, w, b, y */
      {NORM_F32, NORM_F64, NORM_BF16, NORM_F32},
      {NORM_F16, NORM_BF16, NORM_F64, NORM_F32},
      {NORM_F32, NORM_F16, NORM_F16, NORM_F64},
      {NORM_F64, NORM_F32, NORM_F32, NORM_F32},
      {NORM_F32, NORM_F32, NORM_F32, NORM_BF16},
      {NORM_BF16, NORM_F32, NORM_F64, NORM_F16},
      {NORM_F64, NORM_F64, NORM_F64, NORM_F16},
  };
  for (size_t k = 0; k < sizeof mix / sizeof mix[0]; k++) {
    lcase_t c = base_case(mix[k][0]);
    c.w = mix[k][1], c.b = mix[k][2], c.y = mix[k][3], c.seed = 100 + k;
    if (c.x != NORM_F64 && c.y == NORM_F64) c.tol = 1e-12;
    run_case(&c);
  }
}
END_TEST

START_TEST(test_normalized_ndim_2) {
  norm_tensor_t x = tu_tensor(NORM_F32, 3, (int64_t)3, (int64_t)4, (int64_t)5);
  int nd = 0;
  const int64_t s45[] = {4, 5}, s5[] = {5}, s345[] = {3, 4, 5};
  ck_assert_int_eq(norm_ndim_from_shape(&x, s45, 2, &nd), NORM_OK);
  ck_assert_int_eq(nd, 2);
  ck_assert_int_eq(norm_ndim_from_shape(&x, s5, 1, &nd), NORM_OK);
  ck_assert_int_eq(nd, 1);
  ck_assert_int_eq(norm_ndim_from_shape(&x, s345, 3, &nd), NORM_OK);
  ck_assert_int_eq(nd, 3);
  tu_tensor_free(&x);

  for (int k = 0; k < 4; k++) {
    run_shape(all_dtypes[k], 3, SHAPE(3, 4, 5), 2);
    run_shape(all_dtypes[k], 3, SHAPE(3, 4, 5), 3);
  }
}
END_TEST

START_TEST(test_ndim_from_axis) {
  norm_tensor_t x = tu_tensor(NORM_F32, 3, (int64_t)2, (int64_t)3, (int64_t)4);
  static const struct { int64_t axis; int ndim; } want[] = {
      {0, 3}, {1, 2}, {2, 1}, {-1, 1}, {-2, 2}, {-3, 3}};
  for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
    int nd = -1;
    ck_assert_int_eq(norm_ndim_from_axis(&x, want[k].axis, &nd), NORM_OK);
    ck_assert_int_eq(nd, want[k].ndim);
  }
  tu_tensor_free(&x);

  lcase_t c = base_case(NORM_F32);
  c.rank = 3, c.shape[0] = 2, c.shape[1] = 3, c.shape[2] = 4;
  norm_tensor_t probe = tu_mk(NORM_F32, 3, c.shape);
  ck_assert_int_eq(norm_ndim_from_axis(&probe, -2, &c.p.normalized_ndim),
                   NORM_OK);
  tu_tensor_free(&probe);
  run_case(&c);
}
END_TEST

START_TEST(test_variance_and_eps_placement) {
  for (int k = 0; k < 4; k++) {
    for (int v = 0; v < 2; v++) {
      for (int pl = 0; pl < 2; pl++) {
        lcase_t c = base_case(all_dtypes[k]);
        c.p.variance = (norm_variance_t)v;
        c.p.eps_placement = (norm_eps_placement_t)pl;
        c.p.eps = 0.05; /* large enough for the placement to matter */
        c.seed = 7 + (uint64_t)(k * 4 + v * 2 + pl);
        run_case(&c);
      }
    }
  }
}
END_TEST

/* The Annotated Transformer's formula, spelled out on a tiny row. */
START_TEST(test_annotated_transformer_formula) {
  norm_tensor_t x = tu_tensor(NORM_F64, 1, (int64_t)4);
  norm_tensor_t y = tu_tensor(NORM_F64, 1, (int64_t)4);
  const double xs[] = {1, 2, 3, 6}; /* mean 3, unbiased var 14/3 */
  memcpy(x.data, xs, sizeof xs);
  double *rstd = tu_doubles(1), *var = tu_doubles(1);
  norm_layer_params_t p = {1, 0.25, NORM_VAR_UNBIASED, NORM_EPS_OUTSIDE_SQRT};
  norm_stats_t st = {.var = var, .rstd = rstd};
  ck_assert_int_eq(norm_layer(&x, NULL, NULL, &p, &y, &st), NORM_OK);
  double sd = sqrt(14.0 / 3.0);
  ck_assert(tu_close(var[0], 14.0 / 3.0, 1e-15));
  ck_assert(tu_close(rstd[0], 1.0 / (sd + 0.25), 1e-15));
  for (int i = 0; i < 4; i++)
    ck_assert(tu_close(((double *)y.data)[i], (xs[i] - 3) / (sd + 0.25), 1e-15));
  tu_doubles_free(rstd, 1), tu_doubles_free(var, 1);
  tu_tensor_free(&x), tu_tensor_free(&y);
}
END_TEST

/* NULL stats, or only some stats arrays: same output, only asked-for
 * arrays written. */
START_TEST(test_null_stats) {
  norm_tensor_t x = tu_tensor(NORM_F32, 2, (int64_t)5, (int64_t)19);
  norm_tensor_t w = tu_tensor(NORM_F32, 1, (int64_t)19);
  norm_tensor_t y0 = tu_tensor(NORM_F32, 2, (int64_t)5, (int64_t)19);
  norm_tensor_t y1 = tu_tensor(NORM_F32, 2, (int64_t)5, (int64_t)19);
  norm_tensor_t y2 = tu_tensor(NORM_F32, 2, (int64_t)5, (int64_t)19);
  tu_fill_uniform(&x, 3, -1, 1);
  tu_fill_uniform(&w, 4, 0.5, 1.5);
  norm_layer_params_t p = {.normalized_ndim = 1, .eps = 1e-5};
  double *mean = tu_doubles(5), *var = tu_doubles(5), *rstd = tu_doubles(5);
  norm_stats_t all = {.mean = mean, .var = var, .rstd = rstd};
  ck_assert_int_eq(norm_layer(&x, &w, NULL, &p, &y0, &all), NORM_OK);
  ck_assert_int_eq(norm_layer(&x, &w, NULL, &p, &y1, NULL), NORM_OK);
  ck_assert_mem_eq(y0.data, y1.data, tu_nbytes(&y0));

  double *rstd2 = tu_doubles(5), *rms = tu_doubles(5);
  for (int i = 0; i < 5; i++) rms[i] = -7.0;
  norm_stats_t some = {.rstd = rstd2, .rms = rms};
  ck_assert_int_eq(norm_layer(&x, &w, NULL, &p, &y2, &some), NORM_OK);
  ck_assert_mem_eq(y0.data, y2.data, tu_nbytes(&y0));
  ck_assert_mem_eq(rstd, rstd2, 5 * sizeof(double));
  for (int i = 0; i < 5; i++) ck_assert(rms[i] == -7.0); /* layer: not ours */

  tu_doubles_free(mean, 5), tu_doubles_free(var, 5);
  tu_doubles_free(rstd, 5), tu_doubles_free(rstd2, 5), tu_doubles_free(rms, 5);
  tu_tensor_free(&x), tu_tensor_free(&w);
  tu_tensor_free(&y0), tu_tensor_free(&y1), tu_tensor_free(&y2);
}
END_TEST

/* y aliasing x (same dtype) gives the out-of-place result bit for bit. */
START_TEST(test_in_place) {
  norm_dtype_t dt = all_dtypes[_i];
  /* rows longer than any internal block size */
  const int64_t shape[] = {3, 1000};
  norm_tensor_t x = tu_mk(dt, 2, shape), w = tu_mk(dt, 1, shape + 1),
                b = tu_mk(dt, 1, shape + 1), y = tu_mk(dt, 2, shape);
  tu_fill_uniform(&x, 11, -3, 5);
  tu_fill_uniform(&w, 12, 0.5, 2);
  tu_fill_uniform(&b, 13, -1, 1);
  norm_layer_params_t p = {.normalized_ndim = 1, .eps = 1e-5};
  double *m0 = tu_doubles(3), *m1 = tu_doubles(3);
  norm_stats_t s0 = {.mean = m0}, s1 = {.mean = m1};
  ck_assert_int_eq(norm_layer(&x, &w, &b, &p, &y, &s0), NORM_OK);
  norm_tensor_t alias = x;
  ck_assert_int_eq(norm_layer(&x, &w, &b, &p, &alias, &s1), NORM_OK);
  ck_assert_mem_eq(x.data, y.data, tu_nbytes(&x));
  ck_assert_mem_eq(m0, m1, 3 * sizeof(double));
  tu_doubles_free(m0, 3), tu_doubles_free(m1, 3);
  tu_tensor_free(&x), tu_tensor_free(&w), tu_tensor_free(&b);
  tu_tensor_free(&y);
}
END_TEST

START_TEST(test_rank1_and_rank8) { tu_row_ranks(run_shape); }
END_TEST

/* ---- Cruel ---------------------------------------------------------------- */

/* |mean| = 1e4, std 1e-2: E[x^2] - E[x]^2 would lose everything. */
static void large_mean_case(norm_dtype_t dt, double tol, double stats_tol) {
  const int64_t shape[] = {4, 1000};
  norm_tensor_t x = tu_mk(dt, 2, shape), y = tu_mk(dt, 2, shape);
  norm_tensor_t w = tu_mk(dt, 1, shape + 1), b = tu_mk(dt, 1, shape + 1);
  uint64_t rng = 99;
  for (size_t i = 0; i < 4000; i++) {
    double center = (i / 1000) % 2 ? -1e4 : 1e4;
    norm_tensor_set(&x, i, center + 1e-2 * tu_rand_range(&rng, -1.7, 1.7));
  }
  tu_fill_uniform(&w, 5, 0.5, 2);
  tu_fill_uniform(&b, 6, -1, 1);
  norm_layer_params_t p = {.normalized_ndim = 1, .eps = 1e-9};
  double *mean = tu_doubles(4), *var = tu_doubles(4), *rstd = tu_doubles(4);
  double ry[4000], rm[4], rv[4], rr[4];
  norm_stats_t st = {mean, var, rstd, NULL};
  ck_assert_int_eq(norm_layer(&x, &w, &b, &p, &y, &st), NORM_OK);
  ref_layer(&x, &w, &b, &p, ry, rm, rv, rr);
  for (int r = 0; r < 4; r++) ck_assert(rv[r] > 0.5e-4 && rv[r] < 2e-4);
  tu_expect_tensor(&y, ry, tol);
  tu_expect_doubles("mean", mean, rm, 4, 1e-12, 1);
  tu_expect_doubles("var", var, rv, 4, stats_tol, 1);
  tu_expect_doubles("rstd", rstd, rr, 4, stats_tol, 1);
  tu_doubles_free(mean, 4), tu_doubles_free(var, 4), tu_doubles_free(rstd, 4);
  tu_tensor_free(&x), tu_tensor_free(&y), tu_tensor_free(&w);
  tu_tensor_free(&b);
}

START_TEST(test_large_mean_f32) { large_mean_case(NORM_F32, F32_TOL, 1e-9); }
END_TEST

START_TEST(test_large_mean_f64) { large_mean_case(NORM_F64, 1e-7, 1e-7); }
END_TEST

/* Constant rows normalize to exactly 0 (= bias), not NaN, also with eps 0,
 * for both eps placements. */
START_TEST(test_constant_rows) {
  norm_dtype_t dt = all_dtypes[_i];
  const double values[] = {0.0, 3.0, -0.1, 1e4, 65504.0 / 8};
  const int64_t shape[] = {5, 33};
  norm_tensor_t x = tu_mk(dt, 2, shape), b = tu_mk(NORM_F32, 1, shape + 1);
  norm_tensor_t w = tu_mk(dt, 1, shape + 1);
  tu_fill_uniform(&b, 21, -1, 1);
  tu_fill_uniform(&w, 22, 0.5, 2);
  for (size_t i = 0; i < 5 * 33; i++) norm_tensor_set(&x, i, values[i / 33]);
  const double eps[] = {1e-5, 0.0};
  for (int e = 0; e < 2; e++) {
    for (int pl = 0; pl < 2; pl++) {
      for (int affine = 0; affine < 2; affine++) {
        norm_tensor_t y = tu_mk(dt, 2, shape);
        double *mean = tu_doubles(5), *var = tu_doubles(5),
               *rstd = tu_doubles(5);
        norm_stats_t st = {mean, var, rstd, NULL};
        norm_layer_params_t p = {1, eps[e], NORM_VAR_BIASED,
                                 (norm_eps_placement_t)pl};
        ck_assert_int_eq(norm_layer(&x, affine ? &w : NULL,
                                    affine ? &b : NULL, &p, &y, &st),
                         NORM_OK);
        for (size_t i = 0; i < 5 * 33; i++) {
          double want = affine ? norm_tensor_get(&b, i % 33) : 0.0;
          if (dt == NORM_F16 || dt == NORM_BF16) want = tu_round_half(want, dt);
          ck_assert_msg(norm_tensor_get(&y, i) == want,
                        "%s eps %g placement %d affine %d: y[%zu] = %g, want %g",
                        norm_dtype_name(dt), eps[e], pl, affine, i,
                        norm_tensor_get(&y, i), want);
        }
        for (int r = 0; r < 5; r++) {
          ck_assert(mean[r] == norm_tensor_get(&x, (size_t)r * 33));
          ck_assert(var[r] == 0.0);
          double want = eps[e] == 0 ? INFINITY
                        : pl == 0  ? 1 / sqrt(eps[e])
                                   : 1 / eps[e];
          ck_assert_msg(rstd[r] == want, "rstd[%d] = %g, want %g", r, rstd[r],
                        want);
        }
        tu_doubles_free(mean, 5), tu_doubles_free(var, 5);
        tu_doubles_free(rstd, 5);
        tu_tensor_free(&y);
      }
    }
  }
  tu_tensor_free(&x), tu_tensor_free(&b), tu_tensor_free(&w);
}
END_TEST

/* A one-element row has variance 0: output 0 (= bias). */
START_TEST(test_single_element_rows) {
  norm_tensor_t x = tu_tensor(NORM_F32, 2, (int64_t)4, (int64_t)1);
  norm_tensor_t y = tu_tensor(NORM_F32, 2, (int64_t)4, (int64_t)1);
  norm_tensor_t b = tu_tensor(NORM_F32, 1, (int64_t)1);
  tu_fill_uniform(&x, 31, -10, 10);
  ((float *)b.data)[0] = 0.25f;
  double *mean = tu_doubles(4), *var = tu_doubles(4), *rstd = tu_doubles(4);
  norm_stats_t st = {mean, var, rstd, NULL};
  for (int e = 0; e < 2; e++) {
    norm_layer_params_t p = {.normalized_ndim = 1, .eps = e ? 0.0 : 1e-5};
    ck_assert_int_eq(norm_layer(&x, NULL, &b, &p, &y, &st), NORM_OK);
    for (int i = 0; i < 4; i++) {
      ck_assert(((float *)y.data)[i] == 0.25f);
      ck_assert(mean[i] == ((float *)x.data)[i]);
      ck_assert(var[i] == 0.0);
    }
  }
  tu_doubles_free(mean, 4), tu_doubles_free(var, 4), tu_doubles_free(rstd, 4);
  tu_tensor_free(&x), tu_tensor_free(&y), tu_tensor_free(&b);
}
END_TEST

/* Unbiased variance of one element is 0/0: NaN, as torch's x.std() (the
 * implementation's choice; norm.h does not spell it out). */
START_TEST(test_single_element_unbiased_is_nan) {
  norm_tensor_t x = tu_tensor(NORM_F64, 2, (int64_t)3, (int64_t)1);
  norm_tensor_t y = tu_tensor(NORM_F64, 2, (int64_t)3, (int64_t)1);
  tu_fill_uniform(&x, 32, -1, 1);
  double *mean = tu_doubles(3), *var = tu_doubles(3), *rstd = tu_doubles(3);
  norm_stats_t st = {mean, var, rstd, NULL};
  for (int pl = 0; pl < 2; pl++) {
    norm_layer_params_t p = {1, 1e-5, NORM_VAR_UNBIASED,
                             (norm_eps_placement_t)pl};
    ck_assert_int_eq(norm_layer(&x, NULL, NULL, &p, &y, &st), NORM_OK);
    for (int i = 0; i < 3; i++) {
      ck_assert(mean[i] == ((double *)x.data)[i]);
      ck_assert(isnan(var[i]) && isnan(rstd[i]));
      ck_assert(isnan(((double *)y.data)[i]));
    }
  }
  tu_doubles_free(mean, 3), tu_doubles_free(var, 3), tu_doubles_free(rstd, 3);
  tu_tensor_free(&x), tu_tensor_free(&y);
}
END_TEST

START_TEST(test_million_element_row) {
  lcase_t c = base_case(NORM_F32);
  c.rank = 1, c.shape[0] = 1000000, c.seed = 5;
  c.stats_tol = 1e-9;
  run_case(&c);
  c.x = NORM_BF16, c.rank = 2, c.shape[0] = 2, c.shape[1] = 500000;
  run_case(&c);
}
END_TEST

/* float32 subnormal inputs with eps = 0: var ~ 1e-80 only exists in double. */
START_TEST(test_subnormal_inputs) {
  lcase_t c = base_case(NORM_F32);
  c.lo = -1e-39, c.hi = 3e-39, c.p.eps = 0.0;
  run_case(&c);
  c.w = c.b = TU_NO_DTYPE, c.y = NORM_F64;
  run_case(&c);
  c.p.eps = 1e-5, c.y = NORM_F32;
  run_case(&c);
}
END_TEST

/* Values near FLT_MAX: squares overflow float but not double. */
START_TEST(test_huge_f32_inputs) {
  lcase_t c = base_case(NORM_F32);
  c.lo = -3e38, c.hi = 3.3e38;
  run_case(&c);
  c.x = NORM_BF16;
  run_case(&c);
}
END_TEST

/* A NaN or an Inf poisons its own row only; other rows are bit-identical
 * to a clean run. */
START_TEST(test_non_finite_rows) {
  const double bad[] = {NAN, INFINITY, -INFINITY};
  norm_dtype_t dt = all_dtypes[_i];
  const int64_t shape[] = {4, 300};
  for (int k = 0; k < 3; k++) {
    norm_tensor_t x = tu_mk(dt, 2, shape), y = tu_mk(dt, 2, shape),
                  y0 = tu_mk(dt, 2, shape);
    norm_tensor_t w = tu_mk(NORM_F32, 1, shape + 1),
                  b = tu_mk(NORM_F32, 1, shape + 1);
    tu_fill_uniform(&x, 41, -1, 2);
    tu_fill_uniform(&w, 42, 0.5, 2);
    tu_fill_uniform(&b, 43, -1, 1);
    double *m0 = tu_doubles(4), *v0 = tu_doubles(4), *r0 = tu_doubles(4);
    double *m = tu_doubles(4), *v = tu_doubles(4), *r = tu_doubles(4);
    norm_layer_params_t p = {.normalized_ndim = 1, .eps = 1e-5};
    norm_stats_t s0 = {m0, v0, r0, NULL}, s = {m, v, r, NULL};
    ck_assert_int_eq(norm_layer(&x, &w, &b, &p, &y0, &s0), NORM_OK);
    norm_tensor_set(&x, 300 + 17, bad[k]); /* row 1 */
    norm_tensor_set(&x, 600 + 299, bad[k]); /* row 2, last element */
    ck_assert_int_eq(norm_layer(&x, &w, &b, &p, &y, &s), NORM_OK);
    size_t es = norm_dtype_size(dt);
    for (int row = 0; row < 4; row++) {
      if (row == 0 || row == 3) {
        ck_assert_mem_eq((char *)y.data + (size_t)row * 300 * es,
                         (char *)y0.data + (size_t)row * 300 * es, 300 * es);
        ck_assert(m[row] == m0[row] && v[row] == v0[row] && r[row] == r0[row]);
        continue;
      }
      for (size_t i = 0; i < 300; i++)
        ck_assert_msg(isnan(norm_tensor_get(&y, (size_t)row * 300 + i)),
                      "bad %g: y[%d][%zu] = %g", bad[k], row, i,
                      norm_tensor_get(&y, (size_t)row * 300 + i));
      ck_assert(!isfinite(m[row]) && isnan(v[row]) && isnan(r[row]));
    }
    tu_doubles_free(m0, 4), tu_doubles_free(v0, 4), tu_doubles_free(r0, 4);
    tu_doubles_free(m, 4), tu_doubles_free(v, 4), tu_doubles_free(r, 4);
    tu_tensor_free(&x), tu_tensor_free(&y), tu_tensor_free(&y0);
    tu_tensor_free(&w), tu_tensor_free(&b);
  }
}
END_TEST

/* ---- Limits --------------------------------------------------------------- */

START_TEST(test_extreme_eps) {
  lcase_t c = base_case(NORM_F64);
  c.p.eps = 1e12; /* output ~ (x - mean) * 1e-6 */
  run_case(&c);
  c.p.eps = DBL_MAX;
  run_case(&c);
  c.p.eps = DBL_MIN;
  run_case(&c);
  c.p.eps_placement = NORM_EPS_OUTSIDE_SQRT;
  c.p.eps = 1e12;
  run_case(&c);
}
END_TEST

/* Half-precision outputs saturate to Inf rather than wrap. */
START_TEST(test_f16_output_overflow) {
  norm_tensor_t x = tu_tensor(NORM_F32, 1, (int64_t)2);
  norm_tensor_t y = tu_tensor(NORM_F16, 1, (int64_t)2);
  norm_tensor_t w = tu_tensor(NORM_F64, 1, (int64_t)2);
  ((float *)x.data)[0] = -1, ((float *)x.data)[1] = 1; /* y = -1, 1 */
  ((double *)w.data)[0] = 1e6, ((double *)w.data)[1] = 1e6;
  norm_layer_params_t p = {.normalized_ndim = 1, .eps = 0};
  ck_assert_int_eq(norm_layer(&x, &w, NULL, &p, &y, NULL), NORM_OK);
  ck_assert(norm_tensor_get(&y, 0) == -INFINITY);
  ck_assert(norm_tensor_get(&y, 1) == INFINITY);
  tu_tensor_free(&x), tu_tensor_free(&y), tu_tensor_free(&w);
}
END_TEST

/* ---- Rows ----------------------------------------------------------------- */

static void fill_bytes(norm_tensor_t *t, unsigned char v) {
  memset(t->data, v, tu_nbytes(t));
}

/* [0, k) then [k, n) equals the whole call bit for bit; the first call
 * gets stats arrays of exactly k entries, and writes nothing past its rows. */
static void split_case(norm_dtype_t dt, int rank, const int64_t *shape,
                       int ndim) {
  norm_tensor_t x = tu_mk(dt, rank, shape), y = tu_mk(dt, rank, shape);
  const int64_t *tail = shape + rank - ndim;
  norm_tensor_t w = tu_mk(NORM_F32, ndim, tail),
                b = tu_mk(NORM_F64, ndim, tail);
  tu_fill_uniform(&x, 51, -4, 4);
  tu_fill_uniform(&w, 52, 0.5, 2);
  tu_fill_uniform(&b, 53, -1, 1);
  norm_layer_params_t p = {ndim, 1e-5, NORM_VAR_UNBIASED, NORM_EPS_INSIDE_SQRT};
  int64_t groups = norm_layer_groups(&x, &p);
  ck_assert_int_eq(groups, (int64_t)(tu_numel(&x) / tu_row_len(&x, ndim)));
  size_t n = (size_t)groups, es = norm_dtype_size(dt),
         rl = tu_row_len(&x, ndim);
  double *m = tu_doubles(n), *v = tu_doubles(n), *r = tu_doubles(n);
  norm_stats_t st = {m, v, r, NULL};
  ck_assert_int_eq(norm_layer(&x, &w, &b, &p, &y, &st), NORM_OK);

  for (size_t k = 0; k <= n; k++) {
    norm_tensor_t y2 = tu_mk(dt, rank, shape);
    fill_bytes(&y2, 0xEE);
    double *m1 = tu_doubles(k), *v1 = tu_doubles(k), *r1 = tu_doubles(k);
    double *m2 = tu_doubles(n), *v2 = tu_doubles(n), *r2 = tu_doubles(n);
    norm_stats_t s1 = {m1, v1, r1, NULL}, s2 = {m2, v2, r2, NULL};
    memset(m2, 0xEE, n * sizeof(double));
    ck_assert_int_eq(norm_layer_rows(&x, &w, &b, &p, &y2, &s1, 0, k), NORM_OK);
    ck_assert(
        tu_bytes_are((char *)y2.data + k * rl * es, (n - k) * rl * es, 0xEE));
    ck_assert_int_eq(norm_layer_rows(&x, &w, &b, &p, &y2, &s2, k, n), NORM_OK);
    ck_assert(tu_bytes_are(m2, k * sizeof(double), 0xEE));
    ck_assert_mem_eq(y2.data, y.data, tu_nbytes(&y));
    ck_assert_mem_eq(m1, m, k * sizeof(double));
    ck_assert_mem_eq(v1, v, k * sizeof(double));
    ck_assert_mem_eq(r1, r, k * sizeof(double));
    ck_assert_mem_eq(m2 + k, m + k, (n - k) * sizeof(double));
    ck_assert_mem_eq(v2 + k, v + k, (n - k) * sizeof(double));
    ck_assert_mem_eq(r2 + k, r + k, (n - k) * sizeof(double));
    tu_doubles_free(m1, k), tu_doubles_free(v1, k), tu_doubles_free(r1, k);
    tu_doubles_free(m2, n), tu_doubles_free(v2, n), tu_doubles_free(r2, n);
    tu_tensor_free(&y2);
  }
  tu_doubles_free(m, n), tu_doubles_free(v, n), tu_doubles_free(r, n);
  tu_tensor_free(&x), tu_tensor_free(&y), tu_tensor_free(&w);
  tu_tensor_free(&b);
}

START_TEST(test_rows_split) { tu_row_splits(all_dtypes[_i], split_case); }
END_TEST

/* Many small ranges in reverse order still give the whole result. */
START_TEST(test_rows_one_at_a_time) {
  const int64_t shape[] = {2, 3, 5, 8};
  norm_tensor_t x = tu_mk(NORM_BF16, 4, shape), y = tu_mk(NORM_F32, 4, shape),
                y2 = tu_mk(NORM_F32, 4, shape);
  tu_fill_uniform(&x, 61, -1, 1);
  norm_layer_params_t p = {.normalized_ndim = 2, .eps = 1e-5};
  ck_assert_int_eq(norm_layer_groups(&x, &p), 6);
  double *r = tu_doubles(6), *r2 = tu_doubles(6);
  norm_stats_t st = {.rstd = r}, st2 = {.rstd = r2};
  ck_assert_int_eq(norm_layer(&x, NULL, NULL, &p, &y, &st), NORM_OK);
  for (size_t g = 6; g-- > 0;) {
    ck_assert_int_eq(norm_layer_rows(&x, NULL, NULL, &p, &y2, &st2, g, g + 1),
                     NORM_OK);
    ck_assert_int_eq(norm_layer_rows(&x, NULL, NULL, &p, &y2, &st2, g, g),
                     NORM_OK);
  }
  ck_assert_mem_eq(y.data, y2.data, tu_nbytes(&y));
  ck_assert_mem_eq(r, r2, 6 * sizeof(double));
  tu_doubles_free(r, 6), tu_doubles_free(r2, 6);
  tu_tensor_free(&x), tu_tensor_free(&y), tu_tensor_free(&y2);
}
END_TEST

START_TEST(test_groups) {
  const int64_t shape[] = {2, 3, 4, 5};
  norm_tensor_t x = tu_mk(NORM_F32, 4, shape);
  const int64_t want[] = {0, 24, 6, 2, 1};
  for (int nd = 1; nd <= 4; nd++) {
    norm_layer_params_t p = {.normalized_ndim = nd};
    ck_assert_int_eq(norm_layer_groups(&x, &p), want[nd]);
  }
  norm_layer_params_t p = {.normalized_ndim = 1};
  ck_assert_int_eq(norm_layer_groups(NULL, &p), NORM_E_NULL);
  ck_assert_int_eq(norm_layer_groups(&x, NULL), NORM_E_NULL);
  p.normalized_ndim = 5;
  ck_assert_int_eq(norm_layer_groups(&x, &p), NORM_E_ARG);
  p.normalized_ndim = 0;
  ck_assert_int_eq(norm_layer_groups(&x, &p), NORM_E_ARG);
  p.normalized_ndim = 1;
  x.rank = 0;
  ck_assert_int_eq(norm_layer_groups(&x, &p), NORM_E_RANK);
  x.rank = 4;
  x.shape[2] = 0;
  ck_assert_int_eq(norm_layer_groups(&x, &p), NORM_E_EMPTY);
  x.shape[2] = 4;
  tu_tensor_free(&x);
}
END_TEST

START_TEST(test_rows_bad_range) {
  const int64_t shape[] = {4, 8};
  norm_tensor_t x = tu_mk(NORM_F32, 2, shape), y = tu_mk(NORM_F32, 2, shape);
  tu_fill_uniform(&x, 71, -1, 1);
  norm_layer_params_t p = {.normalized_ndim = 1, .eps = 1e-5};
  double *m = tu_doubles(4);
  norm_stats_t st = {.mean = m};
  const size_t bad[][2] = {{3, 2}, {0, 5}, {4, 5}, {5, 5}, {2, SIZE_MAX},
                           {SIZE_MAX, 1}};
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++)
    ck_assert_int_eq(
        norm_layer_rows(&x, NULL, NULL, &p, &y, &st, bad[k][0], bad[k][1]),
        NORM_E_RANGE);
  ck_assert(tu_bytes_are(y.data, tu_nbytes(&y), 0));
  ck_assert(tu_bytes_are(m, 4 * sizeof(double), 0));
  ck_assert_int_eq(norm_layer_rows(&x, NULL, NULL, &p, &y, &st, 4, 4), NORM_OK);
  ck_assert_int_eq(norm_layer_rows(&x, NULL, NULL, &p, &y, &st, 0, 0), NORM_OK);
  ck_assert(tu_bytes_are(y.data, tu_nbytes(&y), 0));
  tu_doubles_free(m, 4);
  tu_tensor_free(&x), tu_tensor_free(&y);
}
END_TEST

/* ---- Streaming ----------------------------------------------------------- */

/* Outputs of 16 MiB and more are written with streaming stores (engine.c's
 * STREAM_BYTES; on the AVX-512 tables: `make unit-test` runs every ISA).
 * x is `rows` rows of 3001 elements, so each row of y starts at another
 * alignment, and y itself sits one element past a 64-byte-unaligned
 * address: the aligned head, the streamed body and the tail must match the
 * reference, the bytes before y and the guard after it stay untouched. */
static void stream_case(norm_dtype_t xdt, norm_dtype_t ydt, int64_t rows,
                        int affine) {
  const int64_t shape[] = {rows, 3001};
  size_t es = norm_dtype_size(ydt), n = (size_t)rows * 3001;
  ck_assert_uint_ge(n * es, (size_t)16 << 20);
  norm_tensor_t x = tu_mk(xdt, 2, shape);
  norm_tensor_t w = tu_mk(NORM_F32, 1, shape + 1),
                b = tu_mk(NORM_F32, 1, shape + 1);
  tu_fill_uniform(&x, 91, -2, 3);
  tu_fill_uniform(&w, 92, 0.5, 2);
  tu_fill_uniform(&b, 93, -1, 1);
  unsigned char *buf = tu_alloc_guarded(es + n * es); /* zeroed */
  norm_tensor_t y = {ydt, 2, {rows, 3001}, buf + es};
  ck_assert_uint_ne((uintptr_t)y.data % 64, 0);
  const norm_tensor_t *wp = affine ? &w : NULL, *bp = affine ? &b : NULL;
  norm_layer_params_t p = {.normalized_ndim = 1, .eps = 1e-5};
  double *ry = malloc(n * sizeof *ry), *rm = malloc((size_t)rows * sizeof *rm),
         *rv = malloc((size_t)rows * sizeof *rv),
         *rr = malloc((size_t)rows * sizeof *rr);
  ck_assert(ry && rm && rv && rr);
  ck_assert_int_eq(norm_layer(&x, wp, bp, &p, &y, NULL), NORM_OK);
  ref_layer(&x, wp, bp, &p, ry, rm, rv, rr);
  tu_expect_tensor(&y, ry, default_tol(ydt));
  ck_assert_msg(tu_bytes_are(buf, es, 0), "wrote before y");
  tu_free_guarded(buf, es + n * es); /* fails if the guard after y changed */
  free(ry), free(rm), free(rv), free(rr);
  tu_tensor_free(&x), tu_tensor_free(&w), tu_tensor_free(&b);
}

/* float32 -> float32, 4.5M elements: the float lanes with weight and bias,
 * and the double axpb loop without them. */
START_TEST(test_streamed_output_f32) {
  stream_case(NORM_F32, NORM_F32, 1500, 1);
  stream_case(NORM_F32, NORM_F32, 1500, 0);
}
END_TEST

/* float32 -> float64 with weight and bias (the double affine loop; 2.25M
 * elements are 18 MB), and bfloat16 -> bfloat16 (8.4M elements, 16.8 MB:
 * the AVX512-BF16 axpb loop where the CPU has it). */
START_TEST(test_streamed_output_f64_bf16) {
  stream_case(NORM_F32, NORM_F64, 750, 1);
  stream_case(NORM_BF16, NORM_BF16, 2800, 0);
}
END_TEST

/* ---- Errors --------------------------------------------------------------- */

/* A valid call: x (2, 3, 4) f32, weight/bias (4), y (2, 3, 4). Each error
 * test breaks one thing; a failed call must leave y and stats untouched. */
typedef struct {
  norm_tensor_t x, w, b, y;
  norm_layer_params_t p;
  double *mean;
  norm_stats_t st;
} fix_t;

static void fix_init(fix_t *f) {
  f->x = tu_tensor(NORM_F32, 3, (int64_t)2, (int64_t)3, (int64_t)4);
  f->y = tu_tensor(NORM_F32, 3, (int64_t)2, (int64_t)3, (int64_t)4);
  f->w = tu_tensor(NORM_F32, 1, (int64_t)4);
  f->b = tu_tensor(NORM_F32, 1, (int64_t)4);
  tu_fill_uniform(&f->x, 81, -1, 1);
  tu_fill_uniform(&f->w, 82, 0.5, 2);
  f->p = (norm_layer_params_t){.normalized_ndim = 1, .eps = 1e-5};
  f->mean = tu_doubles(6);
  f->st = (norm_stats_t){.mean = f->mean};
}

static void fix_free(fix_t *f) {
  tu_tensor_free(&f->x), tu_tensor_free(&f->y);
  tu_tensor_free(&f->w), tu_tensor_free(&f->b);
  tu_doubles_free(f->mean, 6);
}

/* The call fails with `want` (both entry points) and writes nothing. */
static void expect_err(fix_t *f, int want) {
  ck_assert_int_eq(norm_layer(&f->x, &f->w, &f->b, &f->p, &f->y, &f->st), want);
  ck_assert_int_eq(
      norm_layer_rows(&f->x, &f->w, &f->b, &f->p, &f->y, &f->st, 0, 1), want);
  ck_assert(tu_bytes_are(f->y.data, 24 * sizeof(float), 0));
  ck_assert(tu_bytes_are(f->mean, 6 * sizeof(double), 0));
}

static void expect_err_cb(void *f, int want) { expect_err(f, want); }

START_TEST(test_err_valid_fixture) {
  fix_t f;
  fix_init(&f);
  ck_assert_int_eq(norm_layer(&f.x, &f.w, &f.b, &f.p, &f.y, &f.st), NORM_OK);
  fix_free(&f);
}
END_TEST

START_TEST(test_err_null) {
  fix_t f;
  fix_init(&f);
  ck_assert_int_eq(norm_layer(NULL, &f.w, &f.b, &f.p, &f.y, &f.st), NORM_E_NULL);
  ck_assert_int_eq(norm_layer(&f.x, &f.w, &f.b, NULL, &f.y, &f.st), NORM_E_NULL);
  ck_assert_int_eq(norm_layer(&f.x, &f.w, &f.b, &f.p, NULL, &f.st), NORM_E_NULL);
  ck_assert_int_eq(norm_layer_rows(NULL, NULL, NULL, &f.p, &f.y, NULL, 0, 1),
                   NORM_E_NULL);
  ck_assert_int_eq(norm_layer_rows(&f.x, NULL, NULL, NULL, &f.y, NULL, 0, 1),
                   NORM_E_NULL);
  ck_assert_int_eq(norm_layer_rows(&f.x, NULL, NULL, &f.p, NULL, NULL, 0, 1),
                   NORM_E_NULL);
  void *data = f.x.data;
  f.x.data = NULL;
  expect_err(&f, NORM_E_NULL);
  f.x.data = data;
  data = f.y.data;
  f.y.data = NULL;
  ck_assert_int_eq(norm_layer(&f.x, NULL, NULL, &f.p, &f.y, NULL), NORM_E_NULL);
  f.y.data = data;
  data = f.w.data;
  f.w.data = NULL;
  expect_err(&f, NORM_E_NULL);
  f.w.data = data;
  data = f.b.data;
  f.b.data = NULL;
  expect_err(&f, NORM_E_NULL);
  f.b.data = data;
  fix_free(&f);
}
END_TEST

START_TEST(test_err_rank) {
  fix_t f;
  fix_init(&f);
  const int ranks[] = {0, -1, 9, 1000};
  for (int k = 0; k < 4; k++) {
    f.x.rank = ranks[k];
    expect_err(&f, NORM_E_RANK);
  }
  f.x.rank = 3;
  fix_free(&f);
}
END_TEST

START_TEST(test_err_dim_empty_overflow) {
  fix_t f;
  fix_init(&f);
  f.x.shape[1] = -3;
  f.y.shape[1] = -3;
  expect_err(&f, NORM_E_DIM);
  f.x.shape[1] = INT64_MIN;
  expect_err(&f, NORM_E_DIM);
  f.x.shape[1] = 0;
  f.y.shape[1] = 0;
  expect_err(&f, NORM_E_EMPTY);
  f.x.shape[1] = 3;
  f.y.shape[1] = 3;
  /* element count overflows; then byte size overflows */
  tu_expect_overflow_shapes(&f.x, &f.y, expect_err_cb, &f);
  fix_free(&f);
}
END_TEST

START_TEST(test_err_dtype) {
  fix_t f;
  fix_init(&f);
  const int bad[] = {99, -1, NORM_DTYPE_COUNT};
  for (int k = 0; k < 3; k++) {
    f.x.dtype = (norm_dtype_t)bad[k];
    expect_err(&f, NORM_E_DTYPE);
    f.x.dtype = NORM_F32;
    f.y.dtype = (norm_dtype_t)bad[k];
    expect_err(&f, NORM_E_DTYPE);
    f.y.dtype = NORM_F32;
    f.w.dtype = (norm_dtype_t)bad[k];
    expect_err(&f, NORM_E_DTYPE);
    f.w.dtype = NORM_F32;
    f.b.dtype = (norm_dtype_t)bad[k];
    expect_err(&f, NORM_E_DTYPE);
    f.b.dtype = NORM_F32;
  }
  fix_free(&f);
}
END_TEST

START_TEST(test_err_shape) {
  fix_t f;
  fix_init(&f);
  int nd = 77;
  const int64_t s35[] = {3, 5}, s4[] = {4}, s1234[] = {1, 2, 3, 4},
                s234[] = {2, 3, 4};
  ck_assert_int_eq(norm_ndim_from_shape(&f.x, s35, 2, &nd), NORM_E_SHAPE);
  ck_assert_int_eq(norm_ndim_from_shape(&f.x, s1234, 4, &nd), NORM_E_SHAPE);
  ck_assert_int_eq(norm_ndim_from_shape(&f.x, s4, 0, &nd), NORM_E_SHAPE);
  ck_assert_int_eq(norm_ndim_from_shape(&f.x, s234, 1, &nd), NORM_E_SHAPE);
  ck_assert_int_eq(nd, 77); /* untouched on error */
  ck_assert_int_eq(norm_ndim_from_shape(NULL, s4, 1, &nd), NORM_E_NULL);
  ck_assert_int_eq(norm_ndim_from_shape(&f.x, NULL, 1, &nd), NORM_E_NULL);
  ck_assert_int_eq(norm_ndim_from_shape(&f.x, s4, 1, NULL), NORM_E_NULL);
  f.x.rank = 9;
  ck_assert_int_eq(norm_ndim_from_shape(&f.x, s4, 1, &nd), NORM_E_RANK);
  f.x.rank = 3;
  fix_free(&f);
}
END_TEST

START_TEST(test_err_axis) {
  fix_t f;
  fix_init(&f);
  int nd = 77;
  const int64_t bad[] = {3, -4, 100, INT64_MIN, INT64_MAX,
                         (int64_t)1 << 32, -((int64_t)1 << 32)};
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++)
    ck_assert_int_eq(norm_ndim_from_axis(&f.x, bad[k], &nd), NORM_E_AXIS);
  ck_assert_int_eq(nd, 77);
  ck_assert_int_eq(norm_ndim_from_axis(NULL, 0, &nd), NORM_E_NULL);
  ck_assert_int_eq(norm_ndim_from_axis(&f.x, 0, NULL), NORM_E_NULL);
  f.x.rank = 0;
  ck_assert_int_eq(norm_ndim_from_axis(&f.x, 0, &nd), NORM_E_RANK);
  f.x.rank = 3;
  fix_free(&f);
}
END_TEST

START_TEST(test_err_output) {
  fix_t f;
  fix_init(&f);
  f.y.shape[2] = 5;
  expect_err(&f, NORM_E_OUTPUT);
  f.y.shape[2] = 4;
  f.y.rank = 2; /* (2, 3) */
  expect_err(&f, NORM_E_OUTPUT);
  f.y.rank = 4; /* (2, 3, 4, 0) */
  expect_err(&f, NORM_E_OUTPUT);
  f.y.rank = 3;
  /* same element count, different shape */
  const int64_t flat[] = {6, 4}, good[] = {2, 3, 4};
  memcpy(f.y.shape, flat, sizeof flat);
  f.y.rank = 2;
  expect_err(&f, NORM_E_OUTPUT);
  memcpy(f.y.shape, good, sizeof good);
  f.y.rank = 3;
  fix_free(&f);
}
END_TEST

/* x float16 [2^61] is 2^62 bytes, valid; y float64 of the same shape would
 * be 2^64 bytes: the output's byte size is checked too (data never read). */
START_TEST(test_err_output_bytes_overflow) {
  static float buf[4];
  norm_tensor_t x = {NORM_F16, 1, {(int64_t)1 << 61}, buf};
  norm_tensor_t y = {NORM_F64, 1, {(int64_t)1 << 61}, buf};
  norm_layer_params_t p = {.normalized_ndim = 1, .eps = 1e-5};
  ck_assert_int_eq(norm_tensor_check(&x, NULL, NULL), NORM_OK);
  ck_assert_int_eq(norm_tensor_check(&y, NULL, NULL), NORM_E_OVERFLOW);
  ck_assert_int_eq(norm_layer_rows(&x, NULL, NULL, &p, &y, NULL, 0, 0),
                   NORM_E_OVERFLOW);
  ck_assert_int_eq(norm_layer(&x, NULL, NULL, &p, &y, NULL), NORM_E_OVERFLOW);
  y.dtype = NORM_F32; /* 2^63 bytes: over PTRDIFF_MAX as well */
  ck_assert_int_eq(norm_layer_rows(&x, NULL, NULL, &p, &y, NULL, 0, 0),
                   NORM_E_OVERFLOW);
}
END_TEST

START_TEST(test_err_weight_bias) {
  fix_t f;
  fix_init(&f);
  const struct { int rank; int64_t shape[2]; } bad[] = {
      {1, {5, 0}}, {1, {3, 0}}, {2, {1, 4}}, {2, {3, 4}}, {1, {-4, 0}},
      {1, {0, 0}}, {0, {4, 0}}, {2, {4, 1}}};
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    norm_tensor_t keep = f.w;
    f.w.rank = bad[k].rank;
    memcpy(f.w.shape, bad[k].shape, sizeof bad[k].shape);
    expect_err(&f, NORM_E_WEIGHT);
    f.w = keep;
    keep = f.b;
    f.b.rank = bad[k].rank;
    memcpy(f.b.shape, bad[k].shape, sizeof bad[k].shape);
    expect_err(&f, NORM_E_BIAS);
    f.b = keep;
  }
  /* (3, 4) is right once two dims are normalized */
  f.p.normalized_ndim = 2;
  expect_err(&f, NORM_E_WEIGHT);
  fix_free(&f);
}
END_TEST

START_TEST(test_err_eps) {
  fix_t f;
  fix_init(&f);
  const double bad[] = {-1e-9, -DBL_MIN, -INFINITY, INFINITY, NAN, -NAN};
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    f.p.eps = bad[k];
    expect_err(&f, NORM_E_EPS);
  }
  fix_free(&f);
}
END_TEST

START_TEST(test_err_arg) {
  fix_t f;
  fix_init(&f);
  f.p.variance = (norm_variance_t)2;
  expect_err(&f, NORM_E_ARG);
  f.p.variance = (norm_variance_t)-1;
  expect_err(&f, NORM_E_ARG);
  f.p.variance = NORM_VAR_BIASED;
  f.p.eps_placement = (norm_eps_placement_t)2;
  expect_err(&f, NORM_E_ARG);
  f.p.eps_placement = (norm_eps_placement_t)-1;
  expect_err(&f, NORM_E_ARG);
  f.p.eps_placement = NORM_EPS_INSIDE_SQRT;
  const int nd[] = {0, -1, 4, 9, 1 << 30};
  for (int k = 0; k < 5; k++) {
    f.p.normalized_ndim = nd[k];
    expect_err(&f, NORM_E_ARG);
  }
  fix_free(&f);
}
END_TEST

Suite *norm_layer_suite(void) {
  Suite *s = suite_create("norm_layer");
  TCase *tc = tcase_create("Core");
  tcase_add_loop_test(tc, test_each_dtype, 0, 4);
  tcase_add_test(tc, test_mixed_dtypes);
  tcase_add_test(tc, test_normalized_ndim_2);
  tcase_add_test(tc, test_ndim_from_axis);
  tcase_add_test(tc, test_variance_and_eps_placement);
  tcase_add_test(tc, test_annotated_transformer_formula);
  tcase_add_test(tc, test_null_stats);
  tcase_add_loop_test(tc, test_in_place, 0, 4);
  tcase_add_test(tc, test_rank1_and_rank8);
  suite_add_tcase(s, tc);

  tc = tcase_create("Cruel");
  tcase_add_test(tc, test_large_mean_f32);
  tcase_add_test(tc, test_large_mean_f64);
  tcase_add_loop_test(tc, test_constant_rows, 0, 4);
  tcase_add_test(tc, test_single_element_rows);
  tcase_add_test(tc, test_single_element_unbiased_is_nan);
  tcase_add_test(tc, test_million_element_row);
  tcase_add_test(tc, test_subnormal_inputs);
  tcase_add_test(tc, test_huge_f32_inputs);
  tcase_add_loop_test(tc, test_non_finite_rows, 0, 4);
  suite_add_tcase(s, tc);

  tc = tcase_create("Limits");
  tcase_add_test(tc, test_extreme_eps);
  tcase_add_test(tc, test_f16_output_overflow);
  suite_add_tcase(s, tc);

  tc = tcase_create("Streaming");
  tcase_add_test(tc, test_streamed_output_f32);
  tcase_add_test(tc, test_streamed_output_f64_bf16);
  suite_add_tcase(s, tc);

  tc = tcase_create("Rows");
  tcase_add_loop_test(tc, test_rows_split, 0, 4);
  tcase_add_test(tc, test_rows_one_at_a_time);
  tcase_add_test(tc, test_groups);
  tcase_add_test(tc, test_rows_bad_range);
  suite_add_tcase(s, tc);

  tc = tcase_create("Errors");
  tcase_add_test(tc, test_err_valid_fixture);
  tcase_add_test(tc, test_err_null);
  tcase_add_test(tc, test_err_rank);
  tcase_add_test(tc, test_err_dim_empty_overflow);
  tcase_add_test(tc, test_err_dtype);
  tcase_add_test(tc, test_err_shape);
  tcase_add_test(tc, test_err_axis);
  tcase_add_test(tc, test_err_output);
  tcase_add_test(tc, test_err_output_bytes_overflow);
  tcase_add_test(tc, test_err_weight_bias);
  tcase_add_test(tc, test_err_eps);
  tcase_add_test(tc, test_err_arg);
  suite_add_tcase(s, tc);
  return s;
}
