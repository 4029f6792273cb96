/* check_norm_batch.c -- norm_batch and norm_batch_rows against a naive
 * two-pass double reference: train and eval modes on (N, C, *), per-channel
 * stats, running-stat updates (momentum and cumulative, PyTorch's unbiased
 * convention), cruel data, split ranges, and every error code. */
#include <math.h>

#include "testutil.h"

/* ---- reference ----------------------------------------------------------- */

/* Per channel over N and spatial (testutil.h's tu_ref_nc); eval takes
 * mean / var from rm / rv. */
static void ref_batch(const double *x, size_t N, size_t C, size_t S,
                      const double *w, const double *b, double eps, int eval,
                      const double *rm, const double *rv, double *y,
                      double *mean, double *var, double *rstd) {
  tu_nc_t l = {N, C, S, C, 1};
  tu_ref_nc(x, &l, w, b, eps, eval ? rm : NULL, eval ? rv : NULL, y, mean, var,
            rstd);
}

/* running = (1 - f) * running + f * batch, batch var unbiased. */
static void ref_running(size_t C, size_t count, double f, const double *mean,
                        const double *var, double *rm, double *rv) {
  for (size_t c = 0; c < C; c++) {
    rm[c] = (1 - f) * rm[c] + f * mean[c];
    rv[c] = (1 - f) * rv[c] + f * var[c] * (double)count / (double)(count - 1);
  }
}

/* ---- one configurable case --------------------------------------------- */

/* The (N, C, *) case of testutil.h, first (run_nc hands the cases of its
 * shared sequences back as a bcase_t), and batch norm's own fields. */
typedef struct {
  tu_nccase_t nc;  /* groups 0: one per channel, over all samples */
  norm_dtype_t rt; /* running stats */
  int running;
  norm_mode_t mode;
  double momentum;
  int cumulative;
  int64_t nbt;
} bcase_t;

/* x uniform in [-3, 5) from seed 42; train, momentum 0.1, no running stats
 * (of dtype dt when asked for). */
static bcase_t bcase(norm_dtype_t dt, int rank, const int64_t *shape) {
  bcase_t c;
  memset(&c, 0, sizeof c);
  c.nc = tu_nccase(dt, rank, shape, -3, 5, 42);
  c.rt = dt;
  c.mode = NORM_TRAIN;
  c.momentum = 0.1;
  return c;
}

/* c's buffers: running stats in [-1, 1) and [0.5, 3) (seed + 3, + 4)
 * when c keeps them or reads them (eval). */
static void bfix_init(tu_ncfix_t *f, const bcase_t *c) {
  tu_ncfix_init(f, c->nc.xt, c->nc.yt, c->nc.rank, c->nc.shape,
                (size_t)c->nc.shape[1], 1);
  tu_fill_uniform(&f->x, c->nc.seed, c->nc.lo, c->nc.hi);
  if (c->nc.affine) tu_ncfix_affine(f, c->nc.wt, c->nc.seed, 0.5, 2);
  if (c->running || c->mode == NORM_EVAL) {
    f->rm = tu_mk(c->rt, 1, SHAPE(c->nc.shape[1]));
    f->rv = tu_mk(c->rt, 1, SHAPE(c->nc.shape[1]));
    tu_fill_uniform(&f->rm, c->nc.seed + 3, -1, 1);
    tu_fill_uniform(&f->rv, c->nc.seed + 4, 0.5, 3);
  }
}

static norm_batch_params_t bparams(const bcase_t *c) {
  norm_batch_params_t p = {c->mode, c->nc.eps, c->momentum, c->cumulative,
                           c->nbt};
  return p;
}

/* Runs norm_batch on case c and checks y, stats and running stats. */
static void run_bcase(const bcase_t *c) {
  tu_ncfix_t f;
  bfix_init(&f, c);
  norm_batch_params_t p = bparams(c);
  norm_stats_t st = {f.mean, f.var, f.rstd, NULL};
  /* the running stats as they were before the call updates them */
  double *rm = f.rm.data ? tu_to_doubles(&f.rm) : NULL;
  double *rv = f.rv.data ? tu_to_doubles(&f.rv) : NULL;
  size_t C = f.l.C;
  double *mean = malloc(C * sizeof *mean), *var = malloc(C * sizeof *var);
  ck_assert(mean && var);

  EXPECT_RC(norm_batch(&f.x, c->nc.affine ? &f.w : NULL,
                       c->nc.affine ? &f.b : NULL, f.rm.data ? &f.rm : NULL,
                       f.rv.data ? &f.rv : NULL, &p, &f.y, &st),
            NORM_OK);
  int eval = c->mode == NORM_EVAL;
  tu_ncfix_check(&f, c->nc.eps, eval ? rm : NULL, eval ? rv : NULL, 1e-6,
                 c->nc.tol64, mean, var);

  if (rm) {
    if (c->mode == NORM_TRAIN) {
      double fac = c->cumulative ? 1.0 / (double)c->nbt : c->momentum;
      ref_running(C, f.l.N * f.l.S, fac, mean, var, rm, rv);
    }
    /* eval: unchanged, compared against the values read before the call */
    tu_check_output("running_mean", &f.rm, rm, 1e-6, 1e-12);
    tu_check_output("running_var", &f.rv, rv, 1e-6, 1e-12);
    free(rm);
    free(rv);
  }
  free(mean);
  free(var);
  tu_ncfix_free(&f);
}

/* run_bcase for testutil.h's shared sequences, on a bcase_t's nc. */
static void run_nc(const tu_nccase_t *c) { run_bcase((const bcase_t *)c); }

/* ---- Core ---------------------------------------------------------------- */

START_TEST(test_train_nc) {
  bcase_t c = bcase(NORM_F32, 2, SHAPE(16, 5));
  run_bcase(&c);
  c.running = 1;
  run_bcase(&c);
}
END_TEST

START_TEST(test_train_ncl) {
  bcase_t c = bcase(NORM_F32, 3, SHAPE(4, 3, 7));
  c.running = 1;
  c.momentum = 0.3;
  run_bcase(&c);
}
END_TEST

START_TEST(test_train_nchw) {
  bcase_t c = bcase(NORM_F32, 4, SHAPE(2, 3, 4, 5));
  c.running = 1;
  run_bcase(&c);
  c = bcase(NORM_F32, 5, SHAPE(2, 4, 3, 2, 3)); /* (N, C, D, H, W) */
  c.running = 1;
  run_bcase(&c);
}
END_TEST

START_TEST(test_train_f64) {
  bcase_t c = bcase(NORM_F64, 4, SHAPE(3, 4, 5, 2));
  c.running = 1;
  run_bcase(&c);
  c.nc.affine = 0;
  c.running = 0;
  run_bcase(&c);
}
END_TEST

START_TEST(test_train_half) {
  norm_dtype_t dts[2] = {NORM_F16, NORM_BF16};
  for (int i = 0; i < 2; i++) {
    bcase_t c = bcase(dts[i], 3, SHAPE(4, 3, 9));
    c.running = 1;
    run_bcase(&c);
    c.rt = NORM_F32; /* half input, float running stats */
    c.nc.wt = NORM_F32;
    run_bcase(&c);
  }
}
END_TEST

START_TEST(test_mixed_dtypes) {
  bcase_t c = bcase(NORM_F32, 3, SHAPE(3, 4, 5));
  c.nc.yt = NORM_F64;
  c.nc.wt = NORM_F16;
  c.rt = NORM_F64;
  c.running = 1;
  run_bcase(&c);
  c = bcase(NORM_F64, 3, SHAPE(3, 4, 5));
  c.nc.yt = NORM_BF16;
  c.nc.wt = NORM_F32;
  run_bcase(&c);
}
END_TEST

START_TEST(test_no_affine) {
  bcase_t c = bcase(NORM_F32, 3, SHAPE(5, 2, 6));
  c.nc.affine = 0;
  c.running = 1;
  run_bcase(&c);
}
END_TEST

/* Weight given, bias absent and vice versa. */
START_TEST(test_weight_or_bias_only) {
  norm_tensor_t x = tu_mk(NORM_F32, 3, SHAPE(3, 2, 4));
  norm_tensor_t y = tu_mk(NORM_F32, 3, SHAPE(3, 2, 4));
  norm_tensor_t wb = tu_mk(NORM_F32, 1, SHAPE(2));
  tu_fill_uniform(&x, 7, -1, 1);
  tu_fill_uniform(&wb, 8, 1, 2);
  double *xd = tu_to_doubles(&x), *wd = tu_to_doubles(&wb), ref[24], m[2], v[2],
         r[2];
  norm_batch_params_t p = {NORM_TRAIN, 1e-5, 0.1, 0, 0};
  norm_stats_t st = {NULL, NULL, NULL, NULL};
  EXPECT_RC(norm_batch(&x, &wb, NULL, NULL, NULL, &p, &y, &st), NORM_OK);
  ref_batch(xd, 3, 2, 4, wd, NULL, 1e-5, 0, NULL, NULL, ref, m, v, r);
  tu_check_output("y(w)", &y, ref, 1e-6, 1e-12);
  EXPECT_RC(norm_batch(&x, NULL, &wb, NULL, NULL, &p, &y, &st), NORM_OK);
  ref_batch(xd, 3, 2, 4, NULL, wd, 1e-5, 0, NULL, NULL, ref, m, v, r);
  tu_check_output("y(b)", &y, ref, 1e-6, 1e-12);
  free(xd);
  free(wd);
  tu_tensor_free(&x);
  tu_tensor_free(&y);
  tu_tensor_free(&wb);
}
END_TEST

START_TEST(test_momentum_edges) {
  bcase_t c = bcase(NORM_F64, 3, SHAPE(4, 3, 5));
  c.running = 1;
  c.momentum = 0; /* running stats unchanged */
  run_bcase(&c);
  c.momentum = 1; /* running stats = batch mean / unbiased var */
  run_bcase(&c);
}
END_TEST

/* p.cumulative: f = 1 / num_batches_tracked, the count already incremented
 * by the caller. nbt = 1 copies the batch stats; nbt = 4 weighs it 1/4. */
START_TEST(test_cumulative) {
  bcase_t c = bcase(NORM_F64, 3, SHAPE(4, 3, 5));
  c.running = 1;
  c.cumulative = 1;
  c.momentum = 0.1;
  c.nbt = 1;
  run_bcase(&c);
  c.nbt = 4;
  run_bcase(&c);
  c.rt = NORM_F32;
  c.nbt = 7;
  run_bcase(&c);
}
END_TEST

/* Three batches with the caller incrementing the count from 1: the running
 * mean is the plain average of the batch means (PyTorch's momentum=None). */
START_TEST(test_cumulative_average) {
  const size_t C = 3;
  norm_tensor_t rm = tu_mk(NORM_F64, 1, SHAPE(3)),
                rv = tu_mk(NORM_F64, 1, SHAPE(3));
  for (size_t c = 0; c < C; c++) {
    norm_tensor_set(&rm, c, 0.0);
    norm_tensor_set(&rv, c, 1.0);
  }
  double sum_m[3] = {0}, sum_v[3] = {0};
  for (int k = 0; k < 3; k++) {
    norm_tensor_t x = tu_mk(NORM_F64, 3, SHAPE(2, 3, 4));
    norm_tensor_t y = tu_mk(NORM_F64, 3, SHAPE(2, 3, 4));
    tu_fill_uniform(&x, 100 + (uint64_t)k, -2.0 + k, 3.0 + 2 * k);
    double m[3], v[3];
    norm_stats_t st = {m, v, NULL, NULL};
    norm_batch_params_t p = {NORM_TRAIN, 1e-5, 0.5, 1, k + 1};
    EXPECT_RC(norm_batch(&x, NULL, NULL, &rm, &rv, &p, &y, &st), NORM_OK);
    for (size_t c = 0; c < C; c++) {
      sum_m[c] += m[c];
      sum_v[c] += v[c] * 8.0 / 7.0;
    }
    tu_tensor_free(&x);
    tu_tensor_free(&y);
  }
  for (size_t c = 0; c < C; c++) {
    ck_assert_msg(tu_close(norm_tensor_get(&rm, c), sum_m[c] / 3, 1e-12),
                  "running_mean[%zu] %.17g vs %.17g", c,
                  norm_tensor_get(&rm, c), sum_m[c] / 3);
    ck_assert_msg(tu_close(norm_tensor_get(&rv, c), sum_v[c] / 3, 1e-12),
                  "running_var[%zu] %.17g vs %.17g", c, norm_tensor_get(&rv, c),
                  sum_v[c] / 3);
  }
  tu_tensor_free(&rm);
  tu_tensor_free(&rv);
}
END_TEST

START_TEST(test_eval) {
  bcase_t c = bcase(NORM_F32, 4, SHAPE(2, 3, 2, 3));
  c.mode = NORM_EVAL;
  run_bcase(&c);
  c.nc.xt = c.nc.yt = c.nc.wt = NORM_F64;
  c.nc.affine = 0;
  run_bcase(&c);
  c = bcase(NORM_BF16, 3, SHAPE(3, 4, 2));
  c.mode = NORM_EVAL;
  run_bcase(&c);
}
END_TEST

/* A single value per channel cannot be trained on but is fine in eval. */
START_TEST(test_eval_single_value) {
  bcase_t c = bcase(NORM_F32, 2, SHAPE(1, 4));
  c.mode = NORM_EVAL;
  run_bcase(&c);
  c = bcase(NORM_F32, 4, SHAPE(1, 3, 1, 1));
  c.mode = NORM_EVAL;
  run_bcase(&c);
}
END_TEST

/* N * spatial == 2 is the smallest trainable case (unbiased factor 2). */
START_TEST(test_train_two_values) {
  bcase_t c = bcase(NORM_F64, 2, SHAPE(2, 3));
  c.running = 1;
  run_bcase(&c);
  c = bcase(NORM_F32, 3, SHAPE(1, 3, 2));
  c.running = 1;
  run_bcase(&c);
}
END_TEST

START_TEST(test_in_place) {
  norm_tensor_t x = tu_mk(NORM_F32, 3, SHAPE(3, 4, 5));
  tu_fill_uniform(&x, 9, -4, 4);
  double *xd = tu_to_doubles(&x), ref[60], m[4], v[4], r[4];
  norm_batch_params_t p = {NORM_TRAIN, 1e-5, 0.1, 0, 0};
  norm_stats_t st = {NULL, NULL, NULL, NULL};
  EXPECT_RC(norm_batch(&x, NULL, NULL, NULL, NULL, &p, &x, &st), NORM_OK);
  ref_batch(xd, 3, 4, 5, NULL, NULL, 1e-5, 0, NULL, NULL, ref, m, v, r);
  tu_check_output("y", &x, ref, 1e-6, 1e-12);
  free(xd);
  tu_tensor_free(&x);
}
END_TEST

/* ---- Cruel -----------------------------------------------------------------
 */

/* |mean| 1e4 with std 1e-2: E[x^2] - E[x]^2 would lose every digit. */
START_TEST(test_large_mean) {
  bcase_t c32 = bcase(NORM_F32, 3, SHAPE(8, 3, 16));
  bcase_t c64 = bcase(NORM_F64, 3, SHAPE(8, 3, 16));
  c32.running = c64.running = 1;
  tu_nccase_large_mean(&c32.nc, &c64.nc, run_nc);
}
END_TEST

/* Constant channels: var 0, output 0 (+ bias), never NaN. */
START_TEST(test_constant_channels) {
  norm_dtype_t dts[4] = {NORM_F32, NORM_F64, NORM_F16, NORM_BF16};
  double vals[3] = {0.1, -7.25, 12345.678};
  for (int d = 0; d < 4; d++)
    for (int k = 0; k < 3; k++) {
      norm_tensor_t x = tu_mk(dts[d], 3, SHAPE(5, 2, 7));
      norm_tensor_t y = tu_mk(dts[d], 3, SHAPE(5, 2, 7));
      norm_tensor_t rm = tu_mk(NORM_F64, 1, SHAPE(2)),
                    rv = tu_mk(NORM_F64, 1, SHAPE(2));
      for (size_t i = 0; i < 70; i++)
        norm_tensor_set(&x, i, vals[k]);
      double m[2], v[2], r[2];
      norm_stats_t st = {m, v, r, NULL};
      norm_batch_params_t p = {NORM_TRAIN, 1e-5, 0.1, 0, 0};
      EXPECT_RC(norm_batch(&x, NULL, NULL, &rm, &rv, &p, &y, &st), NORM_OK);
      for (size_t i = 0; i < 70; i++) {
        double g = norm_tensor_get(&y, i);
        ck_assert_msg(fabs(g) <= 1e-6, "y[%zu] = %g for constant %g (%s)", i, g,
                      vals[k], norm_dtype_name(dts[d]));
      }
      for (int c = 0; c < 2; c++) {
        ck_assert_msg(v[c] >= 0 && v[c] < 1e-20, "var %g", v[c]);
        ck_assert(tu_rel_close(r[c], 1 / sqrt(v[c] + 1e-5), 1e-12));
        ck_assert(tu_close(m[c], norm_tensor_get(&x, 0), 1e-15));
        ck_assert(isfinite(norm_tensor_get(&rv, (size_t)c)));
      }
      tu_tensor_free(&x);
      tu_tensor_free(&y);
      tu_tensor_free(&rm);
      tu_tensor_free(&rv);
    }
}
END_TEST

/* A constant channel with bias gives exactly the bias, also with eps = 0
 * (0, not NaN); eps = 0 is allowed on data with spread. */
START_TEST(test_constant_with_bias_and_zero_eps) {
  norm_tensor_t x = tu_mk(NORM_F32, 2, SHAPE(4, 2));
  norm_tensor_t y = tu_mk(NORM_F32, 2, SHAPE(4, 2));
  norm_tensor_t b = tu_mk(NORM_F32, 1, SHAPE(2));
  for (size_t i = 0; i < 8; i++)
    norm_tensor_set(&x, i, 3.0);
  norm_tensor_set(&b, 0, 0.5);
  norm_tensor_set(&b, 1, -2.0);
  norm_batch_params_t p = {NORM_TRAIN, 1e-5, 0.1, 0, 0};
  EXPECT_RC(norm_batch(&x, NULL, &b, NULL, NULL, &p, &y, NULL), NORM_OK);
  for (size_t i = 0; i < 8; i++)
    ck_assert(norm_tensor_get(&y, i) == (i % 2 ? -2.0 : 0.5));
  p.eps = 0;
  memset(y.data, 0, tu_nbytes(&y));
  EXPECT_RC(norm_batch(&x, NULL, &b, NULL, NULL, &p, &y, NULL), NORM_OK);
  for (size_t i = 0; i < 8; i++)
    ck_assert_msg(norm_tensor_get(&y, i) == (i % 2 ? -2.0 : 0.5),
                  "eps 0: y[%zu] = %g", i, norm_tensor_get(&y, i));
  tu_tensor_free(&x);
  tu_tensor_free(&y);
  tu_tensor_free(&b);

  bcase_t c = bcase(NORM_F64, 3, SHAPE(3, 2, 4));
  c.nc.eps = 0;
  run_bcase(&c);
}
END_TEST

/* NaN or Inf in one channel poisons that channel only (and its running
 * stats). */
static void poison_case(double bad) {
  const size_t C = 4, S = 5, at = (1 * C + 2) * S + 3; /* channel 2 */
  norm_tensor_t x = tu_mk(NORM_F32, 3, SHAPE(3, 4, 5));
  norm_tensor_t y = tu_mk(NORM_F32, 3, SHAPE(3, 4, 5));
  norm_tensor_t rm = tu_mk(NORM_F32, 1, SHAPE(4)),
                rv = tu_mk(NORM_F32, 1, SHAPE(4));
  tu_fill_uniform(&x, 11, -1, 1);
  tu_fill_uniform(&rv, 12, 1, 2);
  norm_tensor_set(&x, at, bad);
  double gm[4], gv[4], gr[4];
  norm_stats_t st = {gm, gv, gr, NULL};
  norm_batch_params_t p = {NORM_TRAIN, 1e-5, 0.1, 0, 0};
  EXPECT_RC(norm_batch(&x, NULL, NULL, &rm, &rv, &p, &y, &st), NORM_OK);
  tu_nc_t l = {3, C, S, C, 1};
  tu_check_poisoned(&l, &x, at, 1e-5, &y, &st);
  for (size_t c = 0; c < C; c++) {
    if (c == 2)
      ck_assert(!isfinite(norm_tensor_get(&rm, c)));
    else
      ck_assert(isfinite(norm_tensor_get(&rm, c)) &&
                isfinite(norm_tensor_get(&rv, c)));
  }
  tu_tensor_free(&x);
  tu_tensor_free(&y);
  tu_tensor_free(&rm);
  tu_tensor_free(&rv);
}

START_TEST(test_nan_isolated) { poison_case(NAN); }
END_TEST

START_TEST(test_inf_isolated) {
  poison_case(INFINITY);
  poison_case(-INFINITY);
}
END_TEST

/* Channels of 1e6 values (N * spatial), far from 0: a float accumulator
 * would be off by far more than the 1e-10 the stats are held to. */
START_TEST(test_million_value_channels) {
  bcase_t c = bcase(NORM_F32, 3, SHAPE(4, 2, 250000));
  c.nc.lo = 100;
  c.nc.hi = 1000;
  c.running = 1;
  run_bcase(&c);
  c = bcase(NORM_BF16, 4, SHAPE(2, 2, 1000, 500));
  c.nc.wt = c.rt = NORM_F32;
  run_bcase(&c);
}
END_TEST

/* float32 subnormal inputs with eps = 0: var ~ 1e-78 only exists in double. */
START_TEST(test_subnormal_inputs) {
  bcase_t c = bcase(NORM_F32, 3, SHAPE(4, 3, 50));
  tu_nccase_subnormal(&c.nc, run_nc);
}
END_TEST

START_TEST(test_too_few) {
  norm_batch_params_t p = {NORM_TRAIN, 1e-5, 0.1, 0, 0};
  const int64_t *shapes[3] = {SHAPE(1, 3), SHAPE(1, 3, 1), SHAPE(1, 2, 1, 1)};
  int ranks[3] = {2, 3, 4};
  for (int k = 0; k < 3; k++) {
    norm_tensor_t x = tu_mk(NORM_F32, ranks[k], shapes[k]);
    norm_tensor_t y = tu_mk(NORM_F32, ranks[k], shapes[k]);
    norm_tensor_t rm = tu_mk(NORM_F32, 1, SHAPE(x.shape[1]));
    norm_tensor_t rv = tu_mk(NORM_F32, 1, SHAPE(x.shape[1]));
    tu_fill_uniform(&rm, 1, 0, 1);
    tu_fill_uniform(&rv, 2, 1, 2);
    norm_tensor_t rm0 = tu_mk_copy(&rm), rv0 = tu_mk_copy(&rv);
    EXPECT_RC(norm_batch(&x, NULL, NULL, NULL, NULL, &p, &y, NULL),
              NORM_E_TOO_FEW);
    EXPECT_RC(norm_batch(&x, NULL, NULL, &rm, &rv, &p, &y, NULL),
              NORM_E_TOO_FEW);
    ck_assert_msg(memcmp(rm.data, rm0.data, tu_nbytes(&rm)) == 0 &&
                      memcmp(rv.data, rv0.data, tu_nbytes(&rv)) == 0,
                  "running stats changed by a failed call");
    EXPECT_RC(norm_batch_rows(&x, NULL, NULL, NULL, NULL, &p, &y, NULL, 0, 1),
              NORM_E_TOO_FEW);
    tu_tensor_free(&x);
    tu_tensor_free(&y);
    tu_tensor_free(&rm);
    tu_tensor_free(&rv);
    tu_tensor_free(&rm0);
    tu_tensor_free(&rv0);
  }
}
END_TEST

/* ---- Rows ---------------------------------------------------------------- */

/* One range of rows_case: norm_batch_rows into part's y and running stats. */
typedef struct {
  tu_ncfix_t *part;
  const bcase_t *c;
} brows_t;

static int batch_rows(void *ctx, norm_stats_t *st, size_t lo, size_t hi) {
  brows_t *r = ctx;
  tu_ncfix_t *f = r->part;
  norm_batch_params_t p = bparams(r->c);
  return norm_batch_rows(&f->x, r->c->nc.affine ? &f->w : NULL,
                         r->c->nc.affine ? &f->b : NULL,
                         f->rm.data ? &f->rm : NULL, f->rv.data ? &f->rv : NULL,
                         &p, &f->y, st, lo, hi);
}

/* Splitting the channels into ranges gives bit-identical y, stats and
 * running stats (tu_check_split). */
static void rows_case(const bcase_t *c) {
  tu_ncfix_t whole, part;
  bfix_init(&whole, c);
  bfix_init(&part, c);
  norm_batch_params_t p = bparams(c);
  const norm_tensor_t *w = c->nc.affine ? &whole.w : NULL;
  const norm_tensor_t *b = c->nc.affine ? &whole.b : NULL;
  norm_tensor_t *rm = whole.rm.data ? &whole.rm : NULL;
  norm_tensor_t *rv = whole.rv.data ? &whole.rv : NULL;
  norm_stats_t st = {whole.mean, whole.var, whole.rstd, NULL};
  EXPECT_RC(norm_batch(&whole.x, w, b, rm, rv, &p, &whole.y, &st), NORM_OK);
  ck_assert_int_eq(norm_batch_groups(&whole.x), (int64_t)whole.l.C);

  size_t C = whole.l.C, cuts[3] = {0, C / 3, C - 1};
  brows_t r = {&part, c};
  tu_check_split(&whole.l, batch_rows, &r, &part.y, &whole.y, &st, cuts, 3);
  if (rm) {
    ck_assert(memcmp(part.rm.data, whole.rm.data, tu_nbytes(rm)) == 0);
    ck_assert(memcmp(part.rv.data, whole.rv.data, tu_nbytes(rv)) == 0);
  }
  tu_ncfix_free(&whole);
  tu_ncfix_free(&part);
}

START_TEST(test_rows_split) {
  bcase_t c = bcase(NORM_F32, 4, SHAPE(3, 7, 2, 3));
  c.running = 1;
  rows_case(&c);
  c.mode = NORM_EVAL;
  rows_case(&c);
  c = bcase(NORM_F16, 3, SHAPE(2, 5, 4));
  c.running = 1;
  rows_case(&c);
  c = bcase(NORM_F64, 2, SHAPE(9, 6));
  c.nc.affine = 0;
  rows_case(&c);
  c = bcase(NORM_F64, 3, SHAPE(2, 6, 3));
  c.running = 1;
  c.cumulative = 1;
  c.nbt = 3;
  rows_case(&c);
}
END_TEST

START_TEST(test_rows_empty_range) {
  norm_tensor_t x = tu_mk(NORM_F32, 3, SHAPE(2, 3, 4));
  norm_tensor_t y = tu_mk(NORM_F32, 3, SHAPE(2, 3, 4));
  tu_fill_uniform(&x, 3, -1, 1);
  norm_batch_params_t p = {NORM_TRAIN, 1e-5, 0.1, 0, 0};
  EXPECT_RC(norm_batch_rows(&x, NULL, NULL, NULL, NULL, &p, &y, NULL, 2, 2),
            NORM_OK);
  EXPECT_RC(norm_batch_rows(&x, NULL, NULL, NULL, NULL, &p, &y, NULL, 3, 3),
            NORM_OK);
  for (size_t i = 0; i < 24; i++)
    ck_assert(norm_tensor_get(&y, i) == 0.0);
  tu_tensor_free(&x);
  tu_tensor_free(&y);
}
END_TEST

START_TEST(test_rows_bad_range) {
  norm_tensor_t x = tu_mk(NORM_F32, 3, SHAPE(2, 3, 4));
  norm_tensor_t y = tu_mk(NORM_F32, 3, SHAPE(2, 3, 4));
  norm_batch_params_t p = {NORM_TRAIN, 1e-5, 0.1, 0, 0};
  EXPECT_RC(norm_batch_rows(&x, NULL, NULL, NULL, NULL, &p, &y, NULL, 0, 4),
            NORM_E_RANGE);
  EXPECT_RC(norm_batch_rows(&x, NULL, NULL, NULL, NULL, &p, &y, NULL, 2, 1),
            NORM_E_RANGE);
  EXPECT_RC(norm_batch_rows(&x, NULL, NULL, NULL, NULL, &p, &y, NULL, 4, 4),
            NORM_E_RANGE);
  EXPECT_RC(
      norm_batch_rows(&x, NULL, NULL, NULL, NULL, &p, &y, NULL, 0, SIZE_MAX),
      NORM_E_RANGE);
  tu_tensor_free(&x);
  tu_tensor_free(&y);
}
END_TEST

START_TEST(test_groups_count) {
  norm_tensor_t x = {NORM_F32, 4, {2, 7, 3, 3}, NULL};
  ck_assert_int_eq(norm_batch_groups(&x), 7);
  x.rank = 2;
  ck_assert_int_eq(norm_batch_groups(&x), 7);
  x.rank = 1;
  ck_assert_int_eq(norm_batch_groups(&x), NORM_E_CHANNELS);
  x.rank = 3;
  x.shape[1] = 0;
  ck_assert_int_eq(norm_batch_groups(&x), NORM_E_EMPTY);
  x.shape[1] = -2;
  ck_assert_int_eq(norm_batch_groups(&x), NORM_E_DIM);
  ck_assert_int_lt(norm_batch_groups(NULL), 0);
}
END_TEST

/* ---- Errors ------------------------------------------------------------- */

START_TEST(test_err_null) {
  norm_tensor_t x = tu_mk(NORM_F32, 2, SHAPE(3, 2));
  norm_tensor_t y = tu_mk(NORM_F32, 2, SHAPE(3, 2));
  norm_batch_params_t p = {NORM_TRAIN, 1e-5, 0.1, 0, 0};
  EXPECT_RC(norm_batch(NULL, NULL, NULL, NULL, NULL, &p, &y, NULL),
            NORM_E_NULL);
  EXPECT_RC(norm_batch(&x, NULL, NULL, NULL, NULL, NULL, &y, NULL),
            NORM_E_NULL);
  EXPECT_RC(norm_batch(&x, NULL, NULL, NULL, NULL, &p, NULL, NULL),
            NORM_E_NULL);
  void *d = x.data;
  x.data = NULL;
  EXPECT_RC(norm_batch(&x, NULL, NULL, NULL, NULL, &p, &y, NULL), NORM_E_NULL);
  x.data = d;
  tu_tensor_free(&x);
  tu_tensor_free(&y);
}
END_TEST

START_TEST(test_err_shape) {
  norm_batch_params_t p = {NORM_TRAIN, 1e-5, 0.1, 0, 0};
  norm_tensor_t x = tu_mk(NORM_F32, 1, SHAPE(6));
  norm_tensor_t y = tu_mk(NORM_F32, 1, SHAPE(6));
  EXPECT_RC(norm_batch(&x, NULL, NULL, NULL, NULL, &p, &y, NULL),
            NORM_E_CHANNELS);
  p.mode = NORM_EVAL;
  EXPECT_RC(norm_batch(&x, NULL, NULL, NULL, NULL, &p, &y, NULL),
            NORM_E_CHANNELS);
  p.mode = NORM_TRAIN;
  tu_tensor_free(&x);
  tu_tensor_free(&y);

  static float buf[64];
  norm_tensor_t bx = {NORM_F32, 3, {2, 3, 4}, buf};
  norm_tensor_t by = {NORM_F32, 3, {2, 3, 4}, buf};
  bx.rank = 9;
  EXPECT_RC(norm_batch(&bx, NULL, NULL, NULL, NULL, &p, &by, NULL),
            NORM_E_RANK);
  bx.rank = 0;
  EXPECT_RC(norm_batch(&bx, NULL, NULL, NULL, NULL, &p, &by, NULL),
            NORM_E_RANK);
  bx.rank = 3;
  bx.shape[2] = -4;
  EXPECT_RC(norm_batch(&bx, NULL, NULL, NULL, NULL, &p, &by, NULL), NORM_E_DIM);
  bx.shape[2] = 0;
  EXPECT_RC(norm_batch(&bx, NULL, NULL, NULL, NULL, &p, &by, NULL),
            NORM_E_EMPTY);
  bx.shape[0] = INT64_C(1) << 40;
  bx.shape[1] = INT64_C(1) << 40;
  bx.shape[2] = 64;
  by.shape[0] = bx.shape[0];
  by.shape[1] = bx.shape[1];
  by.shape[2] = bx.shape[2];
  EXPECT_RC(norm_batch(&bx, NULL, NULL, NULL, NULL, &p, &by, NULL),
            NORM_E_OVERFLOW);
  bx.shape[0] = 2;
  bx.shape[1] = 3;
  bx.shape[2] = 4;
  bx.dtype = (norm_dtype_t)7;
  EXPECT_RC(norm_batch(&bx, NULL, NULL, NULL, NULL, &p, &by, NULL),
            NORM_E_DTYPE);
}
END_TEST

START_TEST(test_err_output) {
  norm_batch_params_t p = {NORM_TRAIN, 1e-5, 0.1, 0, 0};
  norm_tensor_t x = tu_mk(NORM_F32, 3, SHAPE(2, 3, 4));
  norm_tensor_t y1 = tu_mk(NORM_F32, 3, SHAPE(2, 3, 5));
  norm_tensor_t y2 = tu_mk(NORM_F32, 2, SHAPE(2, 12));
  norm_tensor_t y3 = tu_mk(NORM_F32, 4, SHAPE(2, 3, 4, 1));
  norm_tensor_t y4 = tu_mk(NORM_F32, 3, SHAPE(3, 2, 4));
  EXPECT_RC(norm_batch(&x, NULL, NULL, NULL, NULL, &p, &y1, NULL),
            NORM_E_OUTPUT);
  EXPECT_RC(norm_batch(&x, NULL, NULL, NULL, NULL, &p, &y2, NULL),
            NORM_E_OUTPUT);
  EXPECT_RC(norm_batch(&x, NULL, NULL, NULL, NULL, &p, &y3, NULL),
            NORM_E_OUTPUT);
  EXPECT_RC(norm_batch(&x, NULL, NULL, NULL, NULL, &p, &y4, NULL),
            NORM_E_OUTPUT);
  EXPECT_RC(norm_batch_rows(&x, NULL, NULL, NULL, NULL, &p, &y1, NULL, 0, 1),
            NORM_E_OUTPUT);
  y1.dtype = (norm_dtype_t)9;
  y1.shape[2] = 4;
  ck_assert_int_lt(norm_batch(&x, NULL, NULL, NULL, NULL, &p, &y1, NULL), 0);
  y1.dtype = NORM_F32;
  y1.shape[2] = 5;
  tu_tensor_free(&x);
  tu_tensor_free(&y1);
  tu_tensor_free(&y2);
  tu_tensor_free(&y3);
  tu_tensor_free(&y4);
}
END_TEST

/* A valid float16 x whose float64 output would be 2^64 bytes. */
START_TEST(test_err_output_bytes_overflow) {
  static float buf[4];
  norm_tensor_t x = {NORM_F16, 2, {(int64_t)1 << 59, 4}, buf};
  norm_tensor_t y = {NORM_F64, 2, {(int64_t)1 << 59, 4}, buf};
  norm_batch_params_t p = {NORM_TRAIN, 1e-5, 0.1, 0, 0};
  EXPECT_RC(norm_batch_rows(&x, NULL, NULL, NULL, NULL, &p, &y, NULL, 0, 0),
            NORM_E_OVERFLOW);
  EXPECT_RC(norm_batch(&x, NULL, NULL, NULL, NULL, &p, &y, NULL),
            NORM_E_OVERFLOW);
}
END_TEST

START_TEST(test_err_weight_bias) {
  norm_batch_params_t p = {NORM_TRAIN, 1e-5, 0.1, 0, 0};
  norm_tensor_t x = tu_mk(NORM_F32, 3, SHAPE(2, 3, 4));
  norm_tensor_t y = tu_mk(NORM_F32, 3, SHAPE(2, 3, 4));
  norm_tensor_t ok = tu_mk(NORM_F32, 1, SHAPE(3));
  norm_tensor_t w4 = tu_mk(NORM_F32, 1, SHAPE(4));
  norm_tensor_t w2 = tu_mk(NORM_F32, 1, SHAPE(2));
  norm_tensor_t w34 = tu_mk(NORM_F32, 2, SHAPE(3, 4));
  EXPECT_RC(norm_batch(&x, &w4, NULL, NULL, NULL, &p, &y, NULL), NORM_E_WEIGHT);
  EXPECT_RC(norm_batch(&x, &w2, &ok, NULL, NULL, &p, &y, NULL), NORM_E_WEIGHT);
  EXPECT_RC(norm_batch(&x, &w34, NULL, NULL, NULL, &p, &y, NULL),
            NORM_E_WEIGHT);
  EXPECT_RC(norm_batch(&x, &ok, &w4, NULL, NULL, &p, &y, NULL), NORM_E_BIAS);
  EXPECT_RC(norm_batch(&x, NULL, &w2, NULL, NULL, &p, &y, NULL), NORM_E_BIAS);
  EXPECT_RC(norm_batch(&x, NULL, &w34, NULL, NULL, &p, &y, NULL), NORM_E_BIAS);
  p.mode = NORM_EVAL;
  EXPECT_RC(norm_batch(&x, &w4, NULL, &ok, &ok, &p, &y, NULL), NORM_E_WEIGHT);
  tu_tensor_free(&x);
  tu_tensor_free(&y);
  tu_tensor_free(&ok);
  tu_tensor_free(&w4);
  tu_tensor_free(&w2);
  tu_tensor_free(&w34);
}
END_TEST

START_TEST(test_err_running) {
  norm_batch_params_t p = {NORM_TRAIN, 1e-5, 0.1, 0, 0};
  norm_tensor_t x = tu_mk(NORM_F32, 3, SHAPE(2, 3, 4));
  norm_tensor_t y = tu_mk(NORM_F32, 3, SHAPE(2, 3, 4));
  norm_tensor_t r = tu_mk(NORM_F32, 1, SHAPE(3));
  norm_tensor_t r4 = tu_mk(NORM_F32, 1, SHAPE(4));
  norm_tensor_t r13 = tu_mk(NORM_F32, 2, SHAPE(1, 3));
  norm_tensor_t r0 = tu_mk_copy(&r);
  EXPECT_RC(norm_batch(&x, NULL, NULL, &r, NULL, &p, &y, NULL), NORM_E_RUNNING);
  EXPECT_RC(norm_batch(&x, NULL, NULL, NULL, &r, &p, &y, NULL), NORM_E_RUNNING);
  EXPECT_RC(norm_batch(&x, NULL, NULL, &r4, &r, &p, &y, NULL), NORM_E_RUNNING);
  EXPECT_RC(norm_batch(&x, NULL, NULL, &r, &r4, &p, &y, NULL), NORM_E_RUNNING);
  EXPECT_RC(norm_batch(&x, NULL, NULL, &r13, &r, &p, &y, NULL), NORM_E_RUNNING);
  ck_assert(memcmp(r.data, r0.data, tu_nbytes(&r)) == 0);
  p.mode = NORM_EVAL;
  EXPECT_RC(norm_batch(&x, NULL, NULL, NULL, NULL, &p, &y, NULL),
            NORM_E_RUNNING);
  EXPECT_RC(norm_batch(&x, NULL, NULL, &r, NULL, &p, &y, NULL), NORM_E_RUNNING);
  EXPECT_RC(norm_batch(&x, NULL, NULL, NULL, &r, &p, &y, NULL), NORM_E_RUNNING);
  EXPECT_RC(norm_batch(&x, NULL, NULL, &r, &r4, &p, &y, NULL), NORM_E_RUNNING);
  EXPECT_RC(norm_batch_rows(&x, NULL, NULL, NULL, NULL, &p, &y, NULL, 0, 1),
            NORM_E_RUNNING);
  tu_tensor_free(&x);
  tu_tensor_free(&y);
  tu_tensor_free(&r);
  tu_tensor_free(&r4);
  tu_tensor_free(&r13);
  tu_tensor_free(&r0);
}
END_TEST

START_TEST(test_err_momentum) {
  norm_tensor_t x = tu_mk(NORM_F32, 3, SHAPE(2, 3, 4));
  norm_tensor_t y = tu_mk(NORM_F32, 3, SHAPE(2, 3, 4));
  norm_tensor_t rm = tu_mk(NORM_F32, 1, SHAPE(3)),
                rv = tu_mk(NORM_F32, 1, SHAPE(3));
  tu_fill_uniform(&rv, 5, 1, 2);
  norm_tensor_t rv0 = tu_mk_copy(&rv);
  double bad[5] = {NAN, -0.1, 1.5, INFINITY, -INFINITY};
  for (int i = 0; i < 5; i++) {
    norm_batch_params_t p = {NORM_TRAIN, 1e-5, bad[i], 0, 0};
    EXPECT_RC(norm_batch(&x, NULL, NULL, &rm, &rv, &p, &y, NULL),
              NORM_E_MOMENTUM);
    EXPECT_RC(norm_batch_rows(&x, NULL, NULL, &rm, &rv, &p, &y, NULL, 0, 3),
              NORM_E_MOMENTUM);
  }
  ck_assert_msg(memcmp(rv.data, rv0.data, tu_nbytes(&rv)) == 0,
                "running stats changed by a failed call");
  tu_tensor_free(&x);
  tu_tensor_free(&y);
  tu_tensor_free(&rm);
  tu_tensor_free(&rv);
  tu_tensor_free(&rv0);
}
END_TEST

START_TEST(test_err_eps_mode) {
  norm_tensor_t x = tu_mk(NORM_F32, 3, SHAPE(2, 3, 4));
  norm_tensor_t y = tu_mk(NORM_F32, 3, SHAPE(2, 3, 4));
  norm_tensor_t r = tu_mk(NORM_F32, 1, SHAPE(3));
  double bad[4] = {-1e-5, NAN, INFINITY, -INFINITY};
  for (int i = 0; i < 4; i++) {
    norm_batch_params_t p = {NORM_TRAIN, bad[i], 0.1, 0, 0};
    EXPECT_RC(norm_batch(&x, NULL, NULL, NULL, NULL, &p, &y, NULL), NORM_E_EPS);
    p.mode = NORM_EVAL;
    EXPECT_RC(norm_batch(&x, NULL, NULL, &r, &r, &p, &y, NULL), NORM_E_EPS);
    EXPECT_RC(norm_batch_rows(&x, NULL, NULL, &r, &r, &p, &y, NULL, 0, 3),
              NORM_E_EPS);
  }
  norm_batch_params_t p = {(norm_mode_t)2, 1e-5, 0.1, 0, 0};
  EXPECT_RC(norm_batch(&x, NULL, NULL, NULL, NULL, &p, &y, NULL), NORM_E_ARG);
  tu_tensor_free(&x);
  tu_tensor_free(&y);
  tu_tensor_free(&r);
}
END_TEST

/* The cumulative factor 1 / num_batches_tracked needs a positive count
 * when it updates running stats (train mode with them); a failed call
 * leaves them as they were. */
START_TEST(test_err_cumulative_count) {
  norm_tensor_t x = tu_mk(NORM_F32, 3, SHAPE(2, 3, 4));
  norm_tensor_t y = tu_mk(NORM_F32, 3, SHAPE(2, 3, 4));
  norm_tensor_t rm = tu_mk(NORM_F32, 1, SHAPE(3)),
                rv = tu_mk(NORM_F32, 1, SHAPE(3));
  tu_fill_uniform(&x, 6, -1, 1);
  tu_fill_uniform(&rv, 5, 1, 2);
  norm_tensor_t rv0 = tu_mk_copy(&rv);
  int64_t bad[3] = {0, -3, INT64_MIN};
  for (int i = 0; i < 3; i++) {
    norm_batch_params_t p = {NORM_TRAIN, 1e-5, 0.1, 1, bad[i]};
    EXPECT_RC(norm_batch(&x, NULL, NULL, &rm, &rv, &p, &y, NULL), NORM_E_ARG);
    EXPECT_RC(norm_batch_rows(&x, NULL, NULL, &rm, &rv, &p, &y, NULL, 0, 3),
              NORM_E_ARG);
    p.momentum = NAN; /* ignored when cumulative */
    EXPECT_RC(norm_batch(&x, NULL, NULL, &rm, &rv, &p, &y, NULL), NORM_E_ARG);
  }
  ck_assert_msg(memcmp(rv.data, rv0.data, tu_nbytes(&rv)) == 0,
                "running stats changed by a failed call");
  tu_tensor_free(&x);
  tu_tensor_free(&y);
  tu_tensor_free(&rm);
  tu_tensor_free(&rv);
  tu_tensor_free(&rv0);
}
END_TEST

/* Without a running-stat update (eval mode, or train without running
 * stats) num_batches_tracked is never used: any value is accepted and the
 * result is the plain one. */
START_TEST(test_cumulative_count_unused) {
  int64_t counts[3] = {0, -3, INT64_MIN};
  for (int i = 0; i < 3; i++) {
    bcase_t c = bcase(NORM_F32, 3, SHAPE(4, 3, 5));
    c.cumulative = 1;
    c.nbt = counts[i];
    c.mode = NORM_EVAL; /* running stats given, read only */
    run_bcase(&c);
    c.mode = NORM_TRAIN; /* no running stats */
    run_bcase(&c);
    c.nc.xt = c.nc.yt = NORM_F64;
    c.nc.affine = 0;
    c.mode = NORM_EVAL;
    run_bcase(&c);
  }
}
END_TEST

Suite *norm_batch_suite(void) {
  Suite *s = suite_create("norm_batch");
  TCase *tc = tcase_create("Core");
  tcase_add_test(tc, test_train_nc);
  tcase_add_test(tc, test_train_ncl);
  tcase_add_test(tc, test_train_nchw);
  tcase_add_test(tc, test_train_f64);
  tcase_add_test(tc, test_train_half);
  tcase_add_test(tc, test_mixed_dtypes);
  tcase_add_test(tc, test_no_affine);
  tcase_add_test(tc, test_weight_or_bias_only);
  tcase_add_test(tc, test_momentum_edges);
  tcase_add_test(tc, test_cumulative);
  tcase_add_test(tc, test_cumulative_average);
  tcase_add_test(tc, test_cumulative_count_unused);
  tcase_add_test(tc, test_eval);
  tcase_add_test(tc, test_eval_single_value);
  tcase_add_test(tc, test_train_two_values);
  tcase_add_test(tc, test_in_place);
  suite_add_tcase(s, tc);

  tc = tcase_create("Cruel");
  tcase_add_test(tc, test_large_mean);
  tcase_add_test(tc, test_constant_channels);
  tcase_add_test(tc, test_constant_with_bias_and_zero_eps);
  tcase_add_test(tc, test_nan_isolated);
  tcase_add_test(tc, test_inf_isolated);
  tcase_add_test(tc, test_too_few);
  tcase_add_test(tc, test_million_value_channels);
  tcase_add_test(tc, test_subnormal_inputs);
  suite_add_tcase(s, tc);

  tc = tcase_create("Rows");
  tcase_add_test(tc, test_rows_split);
  tcase_add_test(tc, test_rows_empty_range);
  tcase_add_test(tc, test_rows_bad_range);
  tcase_add_test(tc, test_groups_count);
  suite_add_tcase(s, tc);

  tc = tcase_create("Errors");
  tcase_add_test(tc, test_err_null);
  tcase_add_test(tc, test_err_shape);
  tcase_add_test(tc, test_err_output);
  tcase_add_test(tc, test_err_output_bytes_overflow);
  tcase_add_test(tc, test_err_weight_bias);
  tcase_add_test(tc, test_err_running);
  tcase_add_test(tc, test_err_momentum);
  tcase_add_test(tc, test_err_eps_mode);
  tcase_add_test(tc, test_err_cumulative_count);
  suite_add_tcase(s, tc);
  return s;
}
