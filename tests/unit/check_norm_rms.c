/* check_norm_rms.c -- norm_rms / norm_rms_rows against a naive double
 * reference (y = x / sqrt(mean(x^2) + eps) * w): every dtype, weight of any
 * dtype, ill-conditioned rows (zero, single element, subnormal, huge,
 * non-finite), row-range splitting, and each error code RMS norm can return.
 * Every output and stats buffer is guarded; the guard is checked on free. */
#include <float.h>
#include <math.h>

#include "testutil.h"

#define F32_TOL 1e-6
#define F64_TOL 1e-12
#define STATS_TOL 1e-12

/* ---- helpers ------------------------------------------------------------ */

/* Naive reference in double over the double values of x. */
static void ref_rms(const norm_tensor_t *x, const norm_tensor_t *w,
                    const norm_rms_params_t *p, double *y, double *rms,
                    double *rstd) {
  size_t n = tu_row_len(x, p->normalized_ndim), rows = tu_numel(x) / n;
  for (size_t r = 0; r < rows; r++) {
    const size_t o = r * n;
    double sq = 0;
    for (size_t i = 0; i < n; i++) {
      double v = norm_tensor_get(x, o + i);
      sq += v * v;
    }
    double ms = sq / (double)n, rs = 1.0 / sqrt(ms + p->eps);
    for (size_t i = 0; i < n; i++) {
      double v = norm_tensor_get(x, o + i);
      double yn = v == 0 ? 0 : v * rs; /* a zero row gives 0 */
      y[o + i] = yn * (w ? norm_tensor_get(w, i) : 1.0);
    }
    rms[r] = sqrt(ms);
    rstd[r] = rs;
  }
}

typedef struct {
  norm_dtype_t x, w, y; /* w: TU_NO_DTYPE for none */
  int rank;
  int64_t shape[NORM_MAX_RANK];
  norm_rms_params_t p;
  double lo, hi;         /* x uniform in [lo, hi) */
  double tol, stats_tol; /* 0: defaults */
  uint64_t seed;
} rcase_t;

/* Build, run, compare against the reference (mean/var must stay
 * untouched), free. */
static void run_case(const rcase_t *c) {
  norm_tensor_t x = tu_mk(c->x, c->rank, c->shape);
  norm_tensor_t y = tu_mk(c->y, c->rank, c->shape);
  norm_tensor_t w = {0};
  if (c->w != TU_NO_DTYPE) {
    w = tu_mk(c->w, c->p.normalized_ndim,
              c->shape + c->rank - c->p.normalized_ndim);
    tu_fill_uniform(&w, c->seed + 1, 0.5, 2.0);
  }
  const norm_tensor_t *wp = c->w != TU_NO_DTYPE ? &w : NULL;
  tu_fill_uniform(&x, c->seed, c->lo, c->hi);
  size_t n = tu_numel(&x), rows = n / tu_row_len(&x, c->p.normalized_ndim);
  double *rms = tu_doubles(rows), *rstd = tu_doubles(rows),
         *mean = tu_doubles(rows), *var = tu_doubles(rows);
  memset(mean, 0x5A, rows * sizeof *mean);
  memset(var, 0x5A, rows * sizeof *var);
  double *ry = malloc(n * sizeof *ry), *rr = malloc(rows * sizeof *rr),
         *rs = malloc(rows * sizeof *rs);
  ck_assert(ry && rr && rs);
  ck_assert_int_eq(norm_rms_groups(&x, &c->p), (int64_t)rows);

  norm_stats_t st = {.mean = mean, .var = var, .rstd = rstd, .rms = rms};
  ck_assert_int_eq(norm_rms(&x, wp, &c->p, &y, &st), NORM_OK);
  ref_rms(&x, wp, &c->p, ry, rr, rs);
  double tol = c->tol > 0 ? c->tol : c->y == NORM_F64 ? F64_TOL : F32_TOL;
  tu_expect_tensor(&y, ry, tol);
  double stol = c->stats_tol > 0 ? c->stats_tol : STATS_TOL;
  tu_expect_doubles("rms", rms, rr, rows, stol, 1);
  tu_expect_doubles("rstd", rstd, rs, rows, stol, 1);
  ck_assert(tu_bytes_are(mean, rows * sizeof *mean, 0x5A));
  ck_assert(tu_bytes_are(var, rows * sizeof *var, 0x5A));

  free(ry), free(rr), free(rs);
  tu_doubles_free(rms, rows), tu_doubles_free(rstd, rows);
  tu_doubles_free(mean, rows), tu_doubles_free(var, rows);
  if (wp) tu_tensor_free(&w);
  tu_tensor_free(&x), tu_tensor_free(&y);
}

static rcase_t base_case(norm_dtype_t dt) {
  return (rcase_t){.x = dt, .w = dt, .y = dt, .rank = 2, .shape = {6, 37},
                   .p = {.normalized_ndim = 1, .eps = 1e-6}, .lo = -2.0,
                   .hi = 3.0, .seed = 42};
}

static const norm_dtype_t all_dtypes[] = {NORM_F32, NORM_F64, NORM_F16,
                                          NORM_BF16};

/* base_case(dt) on x of `shape`, normalized over its last ndim dims. */
static void run_shape(norm_dtype_t dt, int rank, const int64_t *shape,
                      int ndim) {
  rcase_t c = base_case(dt);
  c.rank = rank, c.p.normalized_ndim = ndim;
  memcpy(c.shape, shape, (size_t)rank * sizeof *shape);
  run_case(&c);
}

/* ---- Core ----------------------------------------------------------------- */

START_TEST(test_each_dtype) {
  rcase_t c = base_case(all_dtypes[_i]);
  run_case(&c);
  c.w = TU_NO_DTYPE;
  run_case(&c);
  c.p.eps = 0.5; /* eps large enough to matter */
  run_case(&c);
}
END_TEST

START_TEST(test_mixed_dtypes) {
  static const norm_dtype_t mix[][3] = {
      /* x, w, y */
      {NORM_F32, NORM_F64, NORM_F32},  {NORM_F16, NORM_BF16, NORM_F32},
      {NORM_F32, NORM_F16, NORM_F64},  {NORM_F64, NORM_F32, NORM_F32},
      {NORM_F32, NORM_F32, NORM_BF16}, {NORM_BF16, NORM_F64, NORM_F16},
      {NORM_F64, NORM_F64, NORM_F16},
  };
  for (size_t k = 0; k < sizeof mix / sizeof mix[0]; k++) {
    rcase_t c = base_case(mix[k][0]);
    c.w = mix[k][1], c.y = mix[k][2], c.seed = 100 + k;
    run_case(&c);
  }
}
END_TEST

START_TEST(test_normalized_ndim) {
  const int64_t shape[] = {3, 4, 5}, s45[] = {4, 5};
  norm_tensor_t probe = tu_mk(NORM_F32, 3, shape);
  int nd = 0;
  ck_assert_int_eq(norm_ndim_from_shape(&probe, s45, 2, &nd), NORM_OK);
  ck_assert_int_eq(nd, 2);
  ck_assert_int_eq(norm_ndim_from_axis(&probe, -2, &nd), NORM_OK);
  ck_assert_int_eq(nd, 2);
  ck_assert_int_eq(norm_ndim_from_axis(&probe, 0, &nd), NORM_OK);
  ck_assert_int_eq(nd, 3);
  tu_tensor_free(&probe);
  for (int k = 0; k < 4; k++)
    for (int nd = 1; nd <= 3; nd++) run_shape(all_dtypes[k], 3, shape, nd);
}
END_TEST

/* x = (3, 4): mean(x^2) = 12.5, spelled out. */
START_TEST(test_formula) {
  norm_tensor_t x = tu_tensor(NORM_F64, 1, (int64_t)2);
  norm_tensor_t y = tu_tensor(NORM_F64, 1, (int64_t)2);
  norm_tensor_t w = tu_tensor(NORM_F64, 1, (int64_t)2);
  double *xs = x.data, *ws = w.data, *ys = y.data;
  xs[0] = 3, xs[1] = 4, ws[0] = 2, ws[1] = -1;
  double *rms = tu_doubles(1), *rstd = tu_doubles(1);
  norm_stats_t st = {.rms = rms, .rstd = rstd};
  norm_rms_params_t p = {.normalized_ndim = 1, .eps = 0.5};
  ck_assert_int_eq(norm_rms(&x, &w, &p, &y, &st), NORM_OK);
  ck_assert(tu_close(rms[0], sqrt(12.5), 1e-15));
  ck_assert(tu_close(rstd[0], 1 / sqrt(13.0), 1e-15));
  ck_assert(tu_close(ys[0], 6 / sqrt(13.0), 1e-15));
  ck_assert(tu_close(ys[1], -4 / sqrt(13.0), 1e-15));
  tu_doubles_free(rms, 1), tu_doubles_free(rstd, 1);
  tu_tensor_free(&x), tu_tensor_free(&y), tu_tensor_free(&w);
}
END_TEST

START_TEST(test_null_stats) {
  const int64_t shape[] = {5, 19};
  norm_tensor_t x = tu_mk(NORM_BF16, 2, shape),
                w = tu_mk(NORM_F32, 1, shape + 1);
  norm_tensor_t y0 = tu_mk(NORM_F32, 2, shape), y1 = tu_mk(NORM_F32, 2, shape),
                y2 = tu_mk(NORM_F32, 2, shape);
  tu_fill_uniform(&x, 3, -1, 1);
  tu_fill_uniform(&w, 4, 0.5, 1.5);
  norm_rms_params_t p = {.normalized_ndim = 1, .eps = 1e-6};
  double *rms = tu_doubles(5), *rstd = tu_doubles(5), *rstd2 = tu_doubles(5);
  norm_stats_t all = {.rms = rms, .rstd = rstd}, some = {.rstd = rstd2};
  ck_assert_int_eq(norm_rms(&x, &w, &p, &y0, &all), NORM_OK);
  ck_assert_int_eq(norm_rms(&x, &w, &p, &y1, NULL), NORM_OK);
  ck_assert_int_eq(norm_rms(&x, &w, &p, &y2, &some), NORM_OK);
  ck_assert_mem_eq(y0.data, y1.data, tu_nbytes(&y0));
  ck_assert_mem_eq(y0.data, y2.data, tu_nbytes(&y0));
  ck_assert_mem_eq(rstd, rstd2, 5 * sizeof(double));
  tu_doubles_free(rms, 5), tu_doubles_free(rstd, 5), tu_doubles_free(rstd2, 5);
  tu_tensor_free(&x), tu_tensor_free(&w);
  tu_tensor_free(&y0), tu_tensor_free(&y1), tu_tensor_free(&y2);
}
END_TEST

START_TEST(test_in_place) {
  norm_dtype_t dt = all_dtypes[_i];
  const int64_t shape[] = {3, 1000};
  norm_tensor_t x = tu_mk(dt, 2, shape), w = tu_mk(dt, 1, shape + 1),
                y = tu_mk(dt, 2, shape);
  tu_fill_uniform(&x, 11, -3, 5);
  tu_fill_uniform(&w, 12, 0.5, 2);
  norm_rms_params_t p = {.normalized_ndim = 1, .eps = 1e-6};
  double *r0 = tu_doubles(3), *r1 = tu_doubles(3);
  norm_stats_t s0 = {.rms = r0}, s1 = {.rms = r1};
  ck_assert_int_eq(norm_rms(&x, &w, &p, &y, &s0), NORM_OK);
  norm_tensor_t alias = x;
  ck_assert_int_eq(norm_rms(&x, &w, &p, &alias, &s1), NORM_OK);
  ck_assert_mem_eq(x.data, y.data, tu_nbytes(&x));
  ck_assert_mem_eq(r0, r1, 3 * sizeof(double));
  tu_doubles_free(r0, 3), tu_doubles_free(r1, 3);
  tu_tensor_free(&x), tu_tensor_free(&w), tu_tensor_free(&y);
}
END_TEST

START_TEST(test_rank1_and_rank8) { tu_row_ranks(run_shape); }
END_TEST

/* ---- Cruel ---------------------------------------------------------------- */

/* All-zero rows give exactly 0, not NaN, also with eps = 0. */
START_TEST(test_zero_rows) {
  norm_dtype_t dt = all_dtypes[_i];
  const int64_t shape[] = {3, 40};
  norm_tensor_t x = tu_mk(dt, 2, shape), w = tu_mk(NORM_F32, 1, shape + 1);
  tu_fill_uniform(&x, 21, -1, 1);
  tu_fill_uniform(&w, 22, 0.5, 2);
  for (size_t i = 40; i < 80; i++) norm_tensor_set(&x, i, 0.0); /* row 1 */
  const double eps[] = {1e-6, 0.0};
  for (int e = 0; e < 2; e++) {
    norm_tensor_t y = tu_mk(dt, 2, shape);
    double *rms = tu_doubles(3), *rstd = tu_doubles(3);
    norm_stats_t st = {.rms = rms, .rstd = rstd};
    norm_rms_params_t p = {.normalized_ndim = 1, .eps = eps[e]};
    ck_assert_int_eq(norm_rms(&x, &w, &p, &y, &st), NORM_OK);
    for (size_t i = 40; i < 80; i++)
      ck_assert_msg(norm_tensor_get(&y, i) == 0.0, "eps %g: y[%zu] = %g",
                    eps[e], i, norm_tensor_get(&y, i));
    ck_assert(rms[1] == 0.0);
    ck_assert(rstd[1] == (eps[e] > 0 ? 1 / sqrt(eps[e]) : INFINITY));
    for (size_t i = 0; i < 40; i++) {
      ck_assert(isfinite(norm_tensor_get(&y, i)));
      ck_assert(isfinite(norm_tensor_get(&y, 80 + i)));
    }
    tu_doubles_free(rms, 3), tu_doubles_free(rstd, 3);
    tu_tensor_free(&y);
  }
  tu_tensor_free(&x), tu_tensor_free(&w);
}
END_TEST

/* One element, eps = 0: x / sqrt(x^2) is exactly the sign of x. */
START_TEST(test_single_element_rows) {
  norm_tensor_t x = tu_tensor(NORM_F32, 2, (int64_t)6, (int64_t)1);
  norm_tensor_t y = tu_tensor(NORM_F32, 2, (int64_t)6, (int64_t)1);
  const float xs[] = {-3.5f, 1e-30f, 7.0f, -1e30f, 1e-44f, 0.0f};
  memcpy(x.data, xs, sizeof xs);
  double *rms = tu_doubles(6);
  norm_stats_t st = {.rms = rms};
  norm_rms_params_t p = {.normalized_ndim = 1, .eps = 0};
  ck_assert_int_eq(norm_rms(&x, NULL, &p, &y, &st), NORM_OK);
  for (int i = 0; i < 6; i++) {
    float want = xs[i] == 0 ? 0.0f : copysignf(1.0f, xs[i]);
    ck_assert_msg(((float *)y.data)[i] == want, "y[%d] = %g", i,
                  ((float *)y.data)[i]);
    ck_assert(rms[i] == fabs((double)xs[i]));
  }
  tu_doubles_free(rms, 6);
  tu_tensor_free(&x), tu_tensor_free(&y);
}
END_TEST

/* A float accumulator of 1e6 squares would be off by far more than 1e-6. */
START_TEST(test_million_element_row) {
  rcase_t c = base_case(NORM_F32);
  c.rank = 1, c.shape[0] = 1000000, c.lo = 100, c.hi = 1000;
  c.stats_tol = 1e-9;
  run_case(&c);
  c.x = NORM_F16, c.rank = 2, c.shape[0] = 2, c.shape[1] = 500000;
  run_case(&c);
}
END_TEST

/* float32 subnormals with eps = 0: mean(x^2) ~ 1e-78 only exists in double. */
START_TEST(test_subnormal_inputs) {
  rcase_t c = base_case(NORM_F32);
  c.lo = -1e-39, c.hi = 3e-39, c.p.eps = 0.0;
  run_case(&c);
  c.w = TU_NO_DTYPE, c.y = NORM_F64;
  run_case(&c);
  c.x = NORM_BF16, c.y = NORM_F32; /* bfloat16 has float32's range */
  run_case(&c);
}
END_TEST

START_TEST(test_huge_f32_inputs) {
  rcase_t c = base_case(NORM_F32);
  c.lo = -3e38, c.hi = 3.3e38;
  run_case(&c);
  c.x = NORM_BF16, c.y = NORM_F64, c.w = TU_NO_DTYPE;
  run_case(&c);
}
END_TEST

/* A NaN poisons its row. An Inf makes mean(x^2) Inf and rstd 0, so as in
 * torch the Inf element becomes NaN and the row's finite elements 0. Other
 * rows are bit-identical to a clean run. */
START_TEST(test_non_finite_rows) {
  const double bad[] = {NAN, INFINITY, -INFINITY};
  norm_dtype_t dt = all_dtypes[_i];
  const int64_t shape[] = {4, 300};
  for (int k = 0; k < 3; k++) {
    norm_tensor_t x = tu_mk(dt, 2, shape), y = tu_mk(dt, 2, shape),
                  y0 = tu_mk(dt, 2, shape), w = tu_mk(NORM_F64, 1, shape + 1);
    tu_fill_uniform(&x, 41, -1, 2);
    tu_fill_uniform(&w, 42, 0.5, 2);
    double *q0 = tu_doubles(4), *r0 = tu_doubles(4);
    double *q = tu_doubles(4), *r = tu_doubles(4);
    norm_rms_params_t p = {.normalized_ndim = 1, .eps = 1e-6};
    norm_stats_t s0 = {.rms = q0, .rstd = r0}, s = {.rms = q, .rstd = r};
    ck_assert_int_eq(norm_rms(&x, &w, &p, &y0, &s0), NORM_OK);
    norm_tensor_set(&x, 300 + 17, bad[k]);
    norm_tensor_set(&x, 600 + 299, bad[k]);
    ck_assert_int_eq(norm_rms(&x, &w, &p, &y, &s), NORM_OK);
    size_t es = norm_dtype_size(dt);
    for (int row = 0; row < 4; row += 3) {
      ck_assert_mem_eq((char *)y.data + (size_t)row * 300 * es,
                       (char *)y0.data + (size_t)row * 300 * es, 300 * es);
      ck_assert(q[row] == q0[row] && r[row] == r0[row]);
    }
    for (int row = 1; row < 3; row++) {
      size_t at = row == 1 ? 17 : 299;
      for (size_t i = 0; i < 300; i++) {
        double got = norm_tensor_get(&y, (size_t)row * 300 + i);
        int ok = isnan(bad[k]) || i == at ? isnan(got) : got == 0.0;
        ck_assert_msg(ok, "bad %g: y[%d][%zu] = %g", bad[k], row, i, got);
      }
      if (isnan(bad[k]))
        ck_assert(isnan(q[row]) && isnan(r[row]));
      else
        ck_assert(q[row] == INFINITY && r[row] == 0.0);
    }
    tu_doubles_free(q0, 4), tu_doubles_free(r0, 4);
    tu_doubles_free(q, 4), tu_doubles_free(r, 4);
    tu_tensor_free(&x), tu_tensor_free(&y), tu_tensor_free(&y0);
    tu_tensor_free(&w);
  }
}
END_TEST

/* ---- Limits --------------------------------------------------------------- */

START_TEST(test_extreme_eps) {
  rcase_t c = base_case(NORM_F64);
  const double eps[] = {1e12, DBL_MAX, DBL_MIN};
  for (int k = 0; k < 3; k++) {
    c.p.eps = eps[k];
    run_case(&c);
  }
}
END_TEST

/* ---- Rows ----------------------------------------------------------------- */

/* [0, k) then [k, n) equals the whole call bit for bit; the first call gets
 * stats arrays of exactly k entries and writes nothing past its rows. */
static void split_case(norm_dtype_t dt, int rank, const int64_t *shape,
                       int ndim) {
  norm_tensor_t x = tu_mk(dt, rank, shape), y = tu_mk(NORM_F32, rank, shape);
  norm_tensor_t w = tu_mk(NORM_BF16, ndim, shape + rank - ndim);
  tu_fill_uniform(&x, 51, -4, 4);
  tu_fill_uniform(&w, 52, 0.5, 2);
  norm_rms_params_t p = {.normalized_ndim = ndim, .eps = 1e-6};
  int64_t groups = norm_rms_groups(&x, &p);
  size_t rl = tu_row_len(&x, ndim);
  ck_assert_int_eq(groups, (int64_t)(tu_numel(&x) / rl));
  size_t n = (size_t)groups, es = sizeof(float);
  double *q = tu_doubles(n), *r = tu_doubles(n);
  norm_stats_t st = {.rms = q, .rstd = r};
  ck_assert_int_eq(norm_rms(&x, &w, &p, &y, &st), NORM_OK);

  for (size_t k = 0; k <= n; k++) {
    norm_tensor_t y2 = tu_mk(NORM_F32, rank, shape);
    memset(y2.data, 0xEE, tu_nbytes(&y2));
    double *q1 = tu_doubles(k), *r1 = tu_doubles(k);
    double *q2 = tu_doubles(n), *r2 = tu_doubles(n);
    memset(q2, 0xEE, n * sizeof(double));
    norm_stats_t s1 = {.rms = q1, .rstd = r1}, s2 = {.rms = q2, .rstd = r2};
    ck_assert_int_eq(norm_rms_rows(&x, &w, &p, &y2, &s1, 0, k), NORM_OK);
    ck_assert(
        tu_bytes_are((char *)y2.data + k * rl * es, (n - k) * rl * es, 0xEE));
    ck_assert_int_eq(norm_rms_rows(&x, &w, &p, &y2, &s2, k, n), NORM_OK);
    ck_assert(tu_bytes_are(q2, k * sizeof(double), 0xEE));
    ck_assert_mem_eq(y2.data, y.data, tu_nbytes(&y));
    ck_assert_mem_eq(q1, q, k * sizeof(double));
    ck_assert_mem_eq(r1, r, k * sizeof(double));
    ck_assert_mem_eq(q2 + k, q + k, (n - k) * sizeof(double));
    ck_assert_mem_eq(r2 + k, r + k, (n - k) * sizeof(double));
    tu_doubles_free(q1, k), tu_doubles_free(r1, k);
    tu_doubles_free(q2, n), tu_doubles_free(r2, n);
    tu_tensor_free(&y2);
  }
  tu_doubles_free(q, n), tu_doubles_free(r, n);
  tu_tensor_free(&x), tu_tensor_free(&y), tu_tensor_free(&w);
}

START_TEST(test_rows_split) { tu_row_splits(all_dtypes[_i], split_case); }
END_TEST

START_TEST(test_groups) {
  const int64_t shape[] = {2, 3, 4, 5};
  norm_tensor_t x = tu_mk(NORM_F16, 4, shape);
  const int64_t want[] = {0, 24, 6, 2, 1};
  norm_rms_params_t p = {.eps = 1e-6};
  for (p.normalized_ndim = 1; p.normalized_ndim <= 4; p.normalized_ndim++)
    ck_assert_int_eq(norm_rms_groups(&x, &p), want[p.normalized_ndim]);
  ck_assert_int_eq(norm_rms_groups(NULL, &p), NORM_E_NULL);
  ck_assert_int_eq(norm_rms_groups(&x, NULL), NORM_E_NULL);
  p.normalized_ndim = 5;
  ck_assert_int_eq(norm_rms_groups(&x, &p), NORM_E_ARG);
  p.normalized_ndim = 0;
  ck_assert_int_eq(norm_rms_groups(&x, &p), NORM_E_ARG);
  p.normalized_ndim = 1;
  x.dtype = (norm_dtype_t)99;
  ck_assert_int_eq(norm_rms_groups(&x, &p), NORM_E_DTYPE);
  x.dtype = NORM_F16;
  tu_tensor_free(&x);
}
END_TEST

START_TEST(test_rows_bad_range) {
  const int64_t shape[] = {4, 8};
  norm_tensor_t x = tu_mk(NORM_F32, 2, shape), y = tu_mk(NORM_F32, 2, shape);
  tu_fill_uniform(&x, 71, -1, 1);
  norm_rms_params_t p = {.normalized_ndim = 1, .eps = 1e-6};
  double *q = tu_doubles(4);
  norm_stats_t st = {.rms = q};
  const size_t bad[][2] = {{3, 2}, {0, 5}, {4, 5}, {5, 5}, {2, SIZE_MAX},
                           {SIZE_MAX, 1}};
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++)
    ck_assert_int_eq(norm_rms_rows(&x, NULL, &p, &y, &st, bad[k][0], bad[k][1]),
                     NORM_E_RANGE);
  ck_assert_int_eq(norm_rms_rows(&x, NULL, &p, &y, &st, 4, 4), NORM_OK);
  ck_assert_int_eq(norm_rms_rows(&x, NULL, &p, &y, &st, 2, 2), NORM_OK);
  ck_assert(tu_bytes_are(y.data, tu_nbytes(&y), 0));
  ck_assert(tu_bytes_are(q, 4 * sizeof(double), 0));
  tu_doubles_free(q, 4);
  tu_tensor_free(&x), tu_tensor_free(&y);
}
END_TEST

/* ---- Errors --------------------------------------------------------------- */

/* A valid call: x (2, 3, 4) f32, weight (4), y (2, 3, 4). Each error test
 * breaks one thing; a failed call must leave y and stats untouched. */
typedef struct {
  norm_tensor_t x, w, y;
  norm_rms_params_t p;
  double *rms;
  norm_stats_t st;
} fix_t;

static void fix_init(fix_t *f) {
  f->x = tu_tensor(NORM_F32, 3, (int64_t)2, (int64_t)3, (int64_t)4);
  f->y = tu_tensor(NORM_F32, 3, (int64_t)2, (int64_t)3, (int64_t)4);
  f->w = tu_tensor(NORM_F32, 1, (int64_t)4);
  tu_fill_uniform(&f->x, 81, -1, 1);
  tu_fill_uniform(&f->w, 82, 0.5, 2);
  f->p = (norm_rms_params_t){.normalized_ndim = 1, .eps = 1e-6};
  f->rms = tu_doubles(6);
  f->st = (norm_stats_t){.rms = f->rms};
}

static void fix_free(fix_t *f) {
  tu_tensor_free(&f->x), tu_tensor_free(&f->y), tu_tensor_free(&f->w);
  tu_doubles_free(f->rms, 6);
}

static void expect_err(fix_t *f, int want) {
  ck_assert_int_eq(norm_rms(&f->x, &f->w, &f->p, &f->y, &f->st), want);
  ck_assert_int_eq(norm_rms_rows(&f->x, &f->w, &f->p, &f->y, &f->st, 0, 1),
                   want);
  ck_assert(tu_bytes_are(f->y.data, 24 * sizeof(float), 0));
  ck_assert(tu_bytes_are(f->rms, 6 * sizeof(double), 0));
}

static void expect_err_cb(void *f, int want) { expect_err(f, want); }

START_TEST(test_err_valid_fixture) {
  fix_t f;
  fix_init(&f);
  ck_assert_int_eq(norm_rms(&f.x, &f.w, &f.p, &f.y, &f.st), NORM_OK);
  fix_free(&f);
}
END_TEST

START_TEST(test_err_null) {
  fix_t f;
  fix_init(&f);
  ck_assert_int_eq(norm_rms(NULL, &f.w, &f.p, &f.y, &f.st), NORM_E_NULL);
  ck_assert_int_eq(norm_rms(&f.x, &f.w, NULL, &f.y, &f.st), NORM_E_NULL);
  ck_assert_int_eq(norm_rms(&f.x, &f.w, &f.p, NULL, &f.st), NORM_E_NULL);
  ck_assert_int_eq(norm_rms_rows(NULL, NULL, &f.p, &f.y, NULL, 0, 1),
                   NORM_E_NULL);
  ck_assert_int_eq(norm_rms_rows(&f.x, NULL, NULL, &f.y, NULL, 0, 1),
                   NORM_E_NULL);
  ck_assert_int_eq(norm_rms_rows(&f.x, NULL, &f.p, NULL, NULL, 0, 1),
                   NORM_E_NULL);
  void *data = f.x.data;
  f.x.data = NULL;
  expect_err(&f, NORM_E_NULL);
  f.x.data = data;
  data = f.w.data;
  f.w.data = NULL;
  expect_err(&f, NORM_E_NULL);
  f.w.data = data;
  data = f.y.data;
  f.y.data = NULL;
  ck_assert_int_eq(norm_rms(&f.x, NULL, &f.p, &f.y, NULL), NORM_E_NULL);
  f.y.data = data;
  fix_free(&f);
}
END_TEST

START_TEST(test_err_rank_dim_empty_overflow) {
  fix_t f;
  fix_init(&f);
  const int ranks[] = {0, -1, 9};
  for (int k = 0; k < 3; k++) {
    f.x.rank = ranks[k];
    expect_err(&f, NORM_E_RANK);
  }
  f.x.rank = 3;
  f.x.shape[0] = -2;
  expect_err(&f, NORM_E_DIM);
  f.x.shape[0] = 0;
  expect_err(&f, NORM_E_EMPTY);
  tu_expect_overflow_shapes(&f.x, &f.y, expect_err_cb, &f);
  fix_free(&f);
}
END_TEST

START_TEST(test_err_dtype) {
  fix_t f;
  fix_init(&f);
  f.x.dtype = (norm_dtype_t)99;
  expect_err(&f, NORM_E_DTYPE);
  f.x.dtype = NORM_F32;
  f.y.dtype = (norm_dtype_t)99;
  expect_err(&f, NORM_E_DTYPE);
  f.y.dtype = NORM_F32;
  f.w.dtype = (norm_dtype_t)99;
  expect_err(&f, NORM_E_DTYPE);
  f.w.dtype = NORM_F32;
  fix_free(&f);
}
END_TEST

START_TEST(test_err_output) {
  fix_t f;
  fix_init(&f);
  f.y.shape[1] = 4;
  expect_err(&f, NORM_E_OUTPUT);
  f.y.shape[1] = 3;
  f.y.rank = 2;
  expect_err(&f, NORM_E_OUTPUT);
  f.y.rank = 3;
  fix_free(&f);
}
END_TEST

/* A valid float16 x whose float64 output would be 2^64 bytes. */
START_TEST(test_err_output_bytes_overflow) {
  static float buf[4];
  norm_tensor_t x = {NORM_F16, 2, {(int64_t)1 << 59, 4}, buf};
  norm_tensor_t y = {NORM_F64, 2, {(int64_t)1 << 59, 4}, buf};
  norm_rms_params_t p = {.normalized_ndim = 1, .eps = 1e-6};
  ck_assert_int_eq(norm_rms_rows(&x, NULL, &p, &y, NULL, 0, 0),
                   NORM_E_OVERFLOW);
  ck_assert_int_eq(norm_rms(&x, NULL, &p, &y, NULL), NORM_E_OVERFLOW);
}
END_TEST

START_TEST(test_err_weight) {
  fix_t f;
  fix_init(&f);
  const struct { int rank; int64_t shape[2]; } bad[] = {
      {1, {5, 0}}, {1, {3, 0}}, {2, {1, 4}}, {2, {4, 1}}, {1, {-4, 0}},
      {1, {0, 0}}, {0, {4, 0}}};
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    norm_tensor_t keep = f.w;
    f.w.rank = bad[k].rank;
    memcpy(f.w.shape, bad[k].shape, sizeof bad[k].shape);
    expect_err(&f, NORM_E_WEIGHT);
    f.w = keep;
  }
  f.p.normalized_ndim = 2;
  expect_err(&f, NORM_E_WEIGHT);
  fix_free(&f);
}
END_TEST

START_TEST(test_err_eps_and_ndim) {
  fix_t f;
  fix_init(&f);
  const double bad[] = {-1e-9, -INFINITY, INFINITY, NAN};
  for (int k = 0; k < 4; k++) {
    f.p.eps = bad[k];
    expect_err(&f, NORM_E_EPS);
  }
  f.p.eps = 1e-6;
  const int nd[] = {0, -1, 4, 9};
  for (int k = 0; k < 4; k++) {
    f.p.normalized_ndim = nd[k];
    expect_err(&f, NORM_E_ARG);
  }
  fix_free(&f);
}
END_TEST

Suite *norm_rms_suite(void) {
  Suite *s = suite_create("norm_rms");
  TCase *tc = tcase_create("Core");
  tcase_add_loop_test(tc, test_each_dtype, 0, 4);
  tcase_add_test(tc, test_mixed_dtypes);
  tcase_add_test(tc, test_normalized_ndim);
  tcase_add_test(tc, test_formula);
  tcase_add_test(tc, test_null_stats);
  tcase_add_loop_test(tc, test_in_place, 0, 4);
  tcase_add_test(tc, test_rank1_and_rank8);
  suite_add_tcase(s, tc);

  tc = tcase_create("Cruel");
  tcase_add_loop_test(tc, test_zero_rows, 0, 4);
  tcase_add_test(tc, test_single_element_rows);
  tcase_add_test(tc, test_million_element_row);
  tcase_add_test(tc, test_subnormal_inputs);
  tcase_add_test(tc, test_huge_f32_inputs);
  tcase_add_loop_test(tc, test_non_finite_rows, 0, 4);
  suite_add_tcase(s, tc);

  tc = tcase_create("Limits");
  tcase_add_test(tc, test_extreme_eps);
  suite_add_tcase(s, tc);

  tc = tcase_create("Rows");
  tcase_add_loop_test(tc, test_rows_split, 0, 4);
  tcase_add_test(tc, test_groups);
  tcase_add_test(tc, test_rows_bad_range);
  suite_add_tcase(s, tc);

  tc = tcase_create("Errors");
  tcase_add_test(tc, test_err_valid_fixture);
  tcase_add_test(tc, test_err_null);
  tcase_add_test(tc, test_err_rank_dim_empty_overflow);
  tcase_add_test(tc, test_err_dtype);
  tcase_add_test(tc, test_err_output);
  tcase_add_test(tc, test_err_output_bytes_overflow);
  tcase_add_test(tc, test_err_weight);
  tcase_add_test(tc, test_err_eps_and_ndim);
  suite_add_tcase(s, tc);
  return s;
}
