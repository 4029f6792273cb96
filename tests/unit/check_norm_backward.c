/* check_norm_backward.c -- the backward passes (norm_*_backward_rows) of
 * every norm against a naive double reference written from the textbook
 * chain rule (dvar, dmean, then dx), against central differences of the
 * forward in float64, on cruel inputs (|mean| >> std, constant and
 * single-element groups, subnormals, NaN / Inf, a 2^16-element row), and
 * their contract: gradients accumulate, ranges split, dx may alias dy,
 * stats equal the forward's, and each error code. */
#include <float.h>
#include <math.h>
#include <stdio.h>

#include "testutil.h"

/* float64 dx and the double weight / bias gradients: within
 * (F64_TOL + KAPPA_TOL * |mean| * rstd) of the reference's rounding scale
 * (the sum of the magnitudes of the terms that make the value), plus
 * ABS_FLOOR for subnormal results. The second part is the mean's own
 * rounding (|mean| * 2^-53) as it moves every xhat: what |mean| >> std
 * costs any implementation. (Measured: the worst error is below 1/10 of
 * that band.) */
#define F64_TOL 1e-13
#define KAPPA_TOL 1e-15
#define ABS_FLOOR 1e-300
#define FD_TOL 1e-7

typedef enum { K_LAYER, K_RMS, K_BATCH, K_GROUP, K_INSTANCE, K_COUNT } kind_t;
static const char *const kind_names[K_COUNT] = {"layer", "rms", "batch",
                                                "group", "instance"};
static const norm_dtype_t all_dtypes[] = {NORM_F32, NORM_F64, NORM_F16,
                                          NORM_BF16};

/* ---- cases ----------------------------------------------------------------
 */

/* One backward call's configuration. A weight (and a bias for the forward)
 * when `weight`; batch norm's running stats when `running` (always in eval
 * mode). x is uniform in [lo, hi), dy in [-1, 1), w in [-1.5, 2). */
typedef struct {
  kind_t kind;
  int rank;
  int64_t shape[NORM_MAX_RANK];
  int ndim;                       /* layer, rms */
  norm_variance_t variance;       /* layer */
  norm_eps_placement_t placement; /* layer */
  norm_mode_t mode;               /* batch */
  int64_t G;                      /* group */
  int weight, running;
  double eps;
  norm_dtype_t xt, dyt, dxt, wt;
  double lo, hi;
  uint64_t seed;
} bcase_t;

static bcase_t bcase(kind_t kind, int rank, const int64_t *shape) {
  bcase_t c;
  memset(&c, 0, sizeof c);
  c.kind = kind;
  c.rank = rank;
  memcpy(c.shape, shape, (size_t)rank * sizeof shape[0]);
  c.ndim = 1;
  c.G = 1;
  c.weight = 1;
  c.eps = 1e-5;
  c.xt = c.dyt = c.dxt = c.wt = NORM_F64;
  c.lo = -2;
  c.hi = 3;
  c.seed = 1;
  return c;
}

static void case_name(const bcase_t *c, char *buf, size_t n) {
  char shape[80];
  size_t at = 0;
  for (int i = 0; i < c->rank; i++)
    at += (size_t)snprintf(shape + at, sizeof shape - at, "%s%lld",
                           i ? "x" : "", (long long)c->shape[i]);
  snprintf(buf, n, "%s %s nd%d %s %s %s G%lld w%d eps %g x %s dy %s dx %s w %s",
           kind_names[c->kind], shape, c->ndim,
           c->variance == NORM_VAR_UNBIASED ? "unbiased" : "biased",
           c->placement == NORM_EPS_OUTSIDE_SQRT ? "outside" : "inside",
           c->mode == NORM_EVAL ? "eval" : "train", (long long)c->G, c->weight,
           c->eps, norm_dtype_name(c->xt), norm_dtype_name(c->dyt),
           norm_dtype_name(c->dxt), norm_dtype_name(c->wt));
}

/* The layout of c, computed here from the definitions (not by core): a
 * row of the trailing ndim dims (layer, rms), or (N, C, S). */
static size_t row_len(const bcase_t *c) {
  size_t n = 1;
  for (int i = c->rank - c->ndim; i < c->rank; i++) n *= (size_t)c->shape[i];
  return n;
}
static size_t case_numel(const bcase_t *c) {
  size_t n = 1;
  for (int i = 0; i < c->rank; i++) n *= (size_t)c->shape[i];
  return n;
}
static size_t dim_n(const bcase_t *c) { return (size_t)c->shape[0]; }
static size_t dim_c(const bcase_t *c) { return (size_t)c->shape[1]; }
static size_t dim_s(const bcase_t *c) {
  size_t s = 1;
  for (int i = 2; i < c->rank; i++) s *= (size_t)c->shape[i];
  return s;
}
static int row_kind(const bcase_t *c) {
  return c->kind == K_LAYER || c->kind == K_RMS;
}

static size_t case_groups(const bcase_t *c) {
  switch (c->kind) {
  case K_LAYER:
  case K_RMS: return case_numel(c) / row_len(c);
  case K_BATCH: return dim_c(c);
  case K_GROUP: return dim_n(c) * (size_t)c->G;
  default: return dim_n(c) * dim_c(c);
  }
}

/* Entries of the weight (and of the gradient arrays). */
static size_t case_nw(const bcase_t *c) {
  return row_kind(c) ? row_len(c) : dim_c(c);
}

/* The group of element i, and the weight entry it uses. */
static size_t group_of(const bcase_t *c, size_t i) {
  if (row_kind(c)) return i / row_len(c);
  size_t S = dim_s(c), C = dim_c(c), ch = i / S % C, n = i / (S * C);
  switch (c->kind) {
  case K_BATCH: return ch;
  case K_GROUP: return n * (size_t)c->G + ch / (C / (size_t)c->G);
  default: return n * C + ch;
  }
}
static size_t widx_of(const bcase_t *c, size_t i) {
  return row_kind(c) ? i % row_len(c) : i / dim_s(c) % dim_c(c);
}

/* ---- fixture --------------------------------------------------------------
 */

typedef struct {
  const bcase_t *c;
  norm_tensor_t x, dy, dx, w, b, rm, rv; /* absent: data NULL */
  size_t numel, ngroups, nw;
  double *gw, *gb;                 /* guarded, nw each, zeroed */
  double *mean, *var, *rstd, *rms; /* guarded, ngroups each */
} bfix_t;

static void bfix_init(bfix_t *f, const bcase_t *c) {
  memset(f, 0, sizeof *f);
  f->c = c;
  f->x = tu_mk(c->xt, c->rank, c->shape);
  f->dy = tu_mk(c->dyt, c->rank, c->shape);
  f->dx = tu_mk(c->dxt, c->rank, c->shape);
  tu_fill_uniform(&f->x, c->seed, c->lo, c->hi);
  tu_fill_uniform(&f->dy, c->seed + 3, -1, 1);
  f->numel = case_numel(c);
  f->ngroups = case_groups(c);
  f->nw = case_nw(c);
  int64_t wshape[NORM_MAX_RANK];
  int wrank = row_kind(c) ? c->ndim : 1;
  if (row_kind(c))
    memcpy(wshape, c->shape + c->rank - c->ndim,
           (size_t)c->ndim * sizeof wshape[0]);
  else
    wshape[0] = c->shape[1];
  if (c->weight) {
    f->w = tu_mk(c->wt, wrank, wshape);
    f->b = tu_mk(c->wt, wrank, wshape);
    tu_fill_uniform(&f->w, c->seed + 1, -1.5, 2);
    tu_fill_uniform(&f->b, c->seed + 2, -1, 1);
  }
  if (c->kind == K_BATCH && (c->running || c->mode == NORM_EVAL)) {
    f->rm = tu_mk(c->wt, 1, wshape);
    f->rv = tu_mk(c->wt, 1, wshape);
    tu_fill_uniform(&f->rm, c->seed + 4, -0.5, 0.5);
    tu_fill_uniform(&f->rv, c->seed + 5, 0.2, 2);
  }
  f->gw = tu_doubles(f->nw);
  f->gb = tu_doubles(f->nw);
  f->mean = tu_doubles(f->ngroups);
  f->var = tu_doubles(f->ngroups);
  f->rstd = tu_doubles(f->ngroups);
  f->rms = tu_doubles(f->ngroups);
}

static void bfix_free(bfix_t *f) {
  norm_tensor_t *ts[] = {&f->x, &f->dy, &f->dx, &f->w, &f->b, &f->rm, &f->rv};
  for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
    if (ts[i]->data) tu_tensor_free(ts[i]);
  tu_doubles_free(f->gw, f->nw);
  tu_doubles_free(f->gb, f->nw);
  double *st[] = {f->mean, f->var, f->rstd, f->rms};
  for (int i = 0; i < 4; i++) tu_doubles_free(st[i], f->ngroups);
}

static const norm_tensor_t *opt(const norm_tensor_t *t) {
  return t->data ? t : NULL;
}

static norm_layer_params_t layer_params(const bcase_t *c) {
  return (norm_layer_params_t){c->ndim, c->eps, c->variance, c->placement};
}
static norm_batch_params_t batch_params(const bcase_t *c) {
  return (norm_batch_params_t){.mode = c->mode, .eps = c->eps, .momentum = 0.1};
}

/* The backward of c's norm on the given tensors (any may be NULL). */
static int bw_raw(const bcase_t *c, const norm_tensor_t *x,
                  const norm_tensor_t *dy, const norm_tensor_t *w,
                  const norm_tensor_t *rm, const norm_tensor_t *rv,
                  norm_tensor_t *dx, const norm_grads_t *gr,
                  const norm_stats_t *st, size_t lo, size_t hi) {
  switch (c->kind) {
  case K_LAYER: {
    norm_layer_params_t p = layer_params(c);
    return norm_layer_backward_rows(x, dy, w, &p, dx, gr, st, lo, hi);
  }
  case K_RMS: {
    norm_rms_params_t p = {c->ndim, c->eps};
    return norm_rms_backward_rows(x, dy, w, &p, dx, gr, st, lo, hi);
  }
  case K_BATCH: {
    norm_batch_params_t p = batch_params(c);
    return norm_batch_backward_rows(x, dy, w, rm, rv, &p, dx, gr, st, lo, hi);
  }
  case K_GROUP: {
    norm_group_params_t p = {c->G, c->eps};
    return norm_group_backward_rows(x, dy, w, &p, dx, gr, st, lo, hi);
  }
  default: {
    norm_instance_params_t p = {c->eps};
    return norm_instance_backward_rows(x, dy, w, &p, dx, gr, st, lo, hi);
  }
  }
}

/* The fixture's backward into dx (f->dx unless given) and grads. */
static int bw_call(bfix_t *f, const norm_tensor_t *dy, norm_tensor_t *dx,
                   const norm_grads_t *gr, const norm_stats_t *st, size_t lo,
                   size_t hi) {
  return bw_raw(f->c, &f->x, dy ? dy : &f->dy, opt(&f->w), opt(&f->rm),
                opt(&f->rv), dx ? dx : &f->dx, gr, st, lo, hi);
}

/* The whole backward with f's grads and stats. */
static int bw_whole(bfix_t *f) {
  norm_grads_t gr = {f->gw, f->gb};
  norm_stats_t st = {f->mean, f->var, f->rstd, f->rms};
  if (f->c->kind == K_RMS)
    gr.bias = NULL, st.mean = st.var = NULL;
  else
    st.rms = NULL;
  return bw_call(f, NULL, NULL, &gr, &st, 0, f->ngroups);
}

/* The forward of c's norm on x with f's weight and bias (and, in eval mode,
 * running stats; train mode updates none), into y. */
static int fw_call(const bfix_t *f, const norm_tensor_t *x, norm_tensor_t *y,
                   const norm_stats_t *st) {
  const bcase_t *c = f->c;
  const norm_tensor_t *w = opt(&f->w), *b = opt(&f->b);
  switch (c->kind) {
  case K_LAYER: {
    norm_layer_params_t p = layer_params(c);
    return norm_layer(x, w, b, &p, y, st);
  }
  case K_RMS: {
    norm_rms_params_t p = {c->ndim, c->eps};
    return norm_rms(x, w, &p, y, st);
  }
  case K_BATCH: {
    norm_batch_params_t p = batch_params(c);
    norm_tensor_t rm = f->rm, rv = f->rv; /* eval reads them only */
    int eval = c->mode == NORM_EVAL;
    return norm_batch(x, w, b, eval ? &rm : NULL, eval ? &rv : NULL, &p, y, st);
  }
  case K_GROUP: {
    norm_group_params_t p = {c->G, c->eps};
    return norm_group(x, w, b, &p, y, st);
  }
  default: {
    norm_instance_params_t p = {c->eps};
    return norm_instance(x, w, b, &p, y, st);
  }
  }
}

static int64_t groups_call(const bcase_t *c, const norm_tensor_t *x) {
  switch (c->kind) {
  case K_LAYER: {
    norm_layer_params_t p = layer_params(c);
    return norm_layer_groups(x, &p);
  }
  case K_RMS: {
    norm_rms_params_t p = {c->ndim, c->eps};
    return norm_rms_groups(x, &p);
  }
  case K_BATCH: return norm_batch_groups(x);
  case K_GROUP: {
    norm_group_params_t p = {c->G, c->eps};
    return norm_group_groups(x, &p);
  }
  default: return norm_instance_groups(x);
  }
}

/* ---- the reference ---------------------------------------------------------
 * Straight from the chain rule, per group, in double, on the dtype-rounded
 * values of x, dy, w (none of core's algebra): with g = w * dy,
 *   inside:  r = (var + eps)^-1/2, dvar = sum(g (x - mu)) * -1/2 r^3
 *   outside: r = 1 / (std + eps),  dstd = -sum(g (x - mu)) r^2,
 *            dvar = dstd / (2 std) (0 at std = 0, torch's mask)
 *   dmean = -sum(g) r + dvar * -2 sum(x - mu) / D
 *   dx = g r + dvar * 2 (x - mu) / D + dmean / n      (var = M2 / D)
 *   rms: r = (ms + eps)^-1/2, dms = sum(g x) * -1/2 r^3, dx = g r + dms 2x / n
 *   batch eval: dx = g r with the running stats.
 * A group with eps = 0 and no spread (the forward gives its bias) has
 * xhat = 0 and dx = 0. Sums run in element order in long double (on x86
 * 64-bit mantissas: a 2^16-term sum stays far below double's rounding),
 * and the mean gets its correction (mu += sum(x - mu) / n), so the
 * reference is accurate to about one double rounding per operation.
 * scale[] holds each value's rounding scale, sum |term|; err[] what the
 * mean's own rounding adds (KAPPA_TOL * |mu| r times the scale). */
typedef struct {
  double *dx, *dx_scale, *dx_err;                 /* numel */
  double *gw, *gb, *gw_scale, *gw_err, *gb_scale; /* nw */
  double *mean, *var, *rstd;                      /* ngroups */
} bref_t;

static void *zalloc(size_t n) {
  void *p = calloc(n ? n : 1, sizeof(long double));
  ck_assert_ptr_nonnull(p);
  return p;
}

static void ref_backward(const bfix_t *f, bref_t *r) {
  typedef long double ld;
  const bcase_t *c = f->c;
  size_t n = f->numel, ng = f->ngroups, nw = f->nw;
  double *x = tu_to_doubles(&f->x), *dy = tu_to_doubles(&f->dy);
  double *w = f->w.data ? tu_to_doubles(&f->w) : NULL;
  double *rm = f->rm.data ? tu_to_doubles(&f->rm) : NULL;
  double *rv = f->rv.data ? tu_to_doubles(&f->rv) : NULL;
  size_t *grp = malloc(n * sizeof *grp), *wi = malloc(n * sizeof *wi);
  ck_assert(grp && wi);
  for (size_t i = 0; i < n; i++) grp[i] = group_of(c, i), wi[i] = widx_of(c, i);
  r->dx = zalloc(n), r->dx_scale = zalloc(n), r->dx_err = zalloc(n);
  r->gw = zalloc(nw), r->gb = zalloc(nw), r->gw_scale = zalloc(nw);
  r->gw_err = zalloc(nw), r->gb_scale = zalloc(nw);
  r->mean = zalloc(ng), r->var = zalloc(ng), r->rstd = zalloc(ng);
  ld *gw = zalloc(nw), *gb = zalloc(nw);
  ld *acc = zalloc(ng), *dvar = zalloc(ng), *adv = zalloc(ng),
     *dmean = zalloc(ng), *adm = zalloc(ng), *sdev = zalloc(ng);
  double *cnt = zalloc(ng), *kap = zalloc(ng);
  int rms = c->kind == K_RMS, eval = c->kind == K_BATCH && c->mode == NORM_EVAL;
  int outside = c->kind == K_LAYER && c->placement == NORM_EPS_OUTSIDE_SQRT;
  int ddof = c->kind == K_LAYER && c->variance == NORM_VAR_UNBIASED;
#define G_ grp[i]
#define GI_ (w ? w[wi[i]] * dy[i] : dy[i])
  for (size_t i = 0; i < n; i++) cnt[G_] += 1, acc[G_] += x[i];
  for (size_t g = 0; g < ng; g++)
    r->mean[g] = (double)(acc[g] / cnt[g]), acc[g] = 0;
  for (size_t i = 0; i < n; i++) acc[G_] += x[i] - r->mean[G_];
  for (size_t g = 0; g < ng; g++)
    r->mean[g] += (double)(acc[g] / cnt[g]), acc[g] = 0;
  for (size_t i = 0; i < n; i++) {
    double d = rms ? x[i] : x[i] - r->mean[G_];
    acc[G_] += (ld)d * d;
  }
  for (size_t g = 0; g < ng; g++) {
    double D = rms ? cnt[g] : cnt[g] - ddof;
    if (eval)
      r->mean[g] = rm[g], r->var[g] = rv[g];
    else
      r->var[g] = (double)(acc[g] / D);
    if (rms) r->mean[g] = 0;
    double v = r->var[g];
    r->rstd[g] = outside ? 1.0 / (sqrt(v) + c->eps) : 1.0 / sqrt(v + c->eps);
    int degenerate = c->eps == 0 && v == 0;
    kap[g] = rms || eval || degenerate
                 ? 0.0
                 : KAPPA_TOL * fabs(r->mean[g]) * r->rstd[g];
  }
  /* the sums of the chain rule (of the degenerate groups too: unused) */
  for (size_t i = 0; i < n; i++) {
    size_t g = G_;
    double gi = GI_, d = x[i] - r->mean[g], rs = r->rstd[g];
    if (rms) {
      dvar[g] += (ld)gi * x[i] * -0.5 * rs * rs * rs;
      adv[g] += fabs(gi * x[i]) * 0.5 * rs * rs * rs;
    } else if (outside) {
      dvar[g] += (ld)-gi * d * rs * rs; /* dstd for now */
      adv[g] += fabs(gi * d) * rs * rs;
    } else {
      dvar[g] += (ld)gi * d * -0.5 * rs * rs * rs;
      adv[g] += fabs(gi * d) * 0.5 * rs * rs * rs;
    }
    dmean[g] += (ld)-gi * rs;
    adm[g] += fabs(gi * rs);
    sdev[g] += d;
  }
  for (size_t g = 0; g < ng; g++) {
    double D = rms ? cnt[g] : cnt[g] - ddof;
    if (outside) {
      double sd = sqrt(r->var[g]);
      dvar[g] = sd > 0 ? dvar[g] / (2 * sd) : sd == 0 ? 0.0 : NAN;
      adv[g] = sd > 0 ? adv[g] / (2 * sd) : 0.0;
    }
    ld t = dvar[g] * -2.0 * sdev[g] / D;
    dmean[g] += t;
    adm[g] += fabsl(t);
  }
  for (size_t i = 0; i < n; i++) {
    size_t g = G_;
    double gi = GI_, rs = r->rstd[g], D = rms ? cnt[g] : cnt[g] - ddof;
    double d = rms ? x[i] : x[i] - r->mean[g];
    int degenerate = c->eps == 0 && r->var[g] == 0;
    double xhat = degenerate ? 0.0 : d * rs;
    ld dx, sc;
    if (degenerate) {
      dx = sc = 0;
    } else if (eval) {
      dx = (ld)gi * rs;
      sc = fabsl(dx);
    } else if (rms) {
      dx = (ld)gi * rs + dvar[g] * 2 * x[i] / cnt[g];
      sc = fabs(gi * rs) + adv[g] * 2 * fabs(x[i]) / cnt[g];
    } else {
      dx = (ld)gi * rs + dvar[g] * 2 * d / D + dmean[g] / cnt[g];
      sc = fabs(gi * rs) + adv[g] * 2 * fabs(d) / D + adm[g] / cnt[g];
    }
    r->dx[i] = (double)dx;
    r->dx_scale[i] = (double)sc;
    r->dx_err[i] = kap[g] * (double)sc;
    gw[wi[i]] += (ld)dy[i] * xhat;
    r->gw_scale[wi[i]] += fabs(dy[i] * xhat);
    r->gw_err[wi[i]] += fabs(dy[i]) * kap[g];
    gb[wi[i]] += dy[i];
    r->gb_scale[wi[i]] += fabs(dy[i]);
  }
  for (size_t j = 0; j < nw; j++)
    r->gw[j] = (double)gw[j], r->gb[j] = (double)gb[j];
#undef G_
#undef GI_
  free(x), free(dy), free(w), free(rm), free(rv), free(grp), free(wi);
  free(cnt), free(acc), free(dvar), free(adv), free(dmean), free(adm);
  free(sdev), free(kap), free(gw), free(gb);
}

static void bref_free(bref_t *r) {
  double *p[] = {r->dx,     r->dx_scale, r->dx_err, r->gw,  r->gb,  r->gw_scale,
                 r->gw_err, r->gb_scale, r->mean,   r->var, r->rstd};
  for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) free(p[i]);
}

/* ---- comparisons ----------------------------------------------------------
 */

/* v rounded to dtype dt as a kernel stores it (rounded once). */
static double round_to(norm_dtype_t dt, double v) {
  uint64_t buf = 0;
  norm_tensor_t t = {.dtype = dt, .rank = 1, .shape = {1}, .data = &buf};
  norm_tensor_set(&t, 0, v);
  return norm_tensor_get(&t, 0);
}

/* Element i of dx against ref, whose double value is uncertain by `band`:
 * float64 within it; the narrower dtypes as tu_out_close (1e-6 relative
 * for float32, 1 ulp for the half formats) of some value in
 * [ref - band, ref + band], or the Inf that value rounds to. A NaN
 * reference wants NaN, an infinite one the same infinity; with `loose`,
 * any non-finite reference wants any non-finite value. */
static int dx_ok(const norm_tensor_t *dx, size_t i, double ref, double band,
                 int loose) {
  double got = norm_tensor_get(dx, i);
  if (!isfinite(ref)) {
    if (loose) return !isfinite(got);
    return isnan(ref) ? isnan(got) : got == ref;
  }
  if (dx->dtype == NORM_F64) return fabs(got - ref) <= band;
  if (tu_out_close(dx, i, ref, 1e-6, 0) ||
      tu_out_close(dx, i, ref - band, 1e-6, 0) ||
      tu_out_close(dx, i, ref + band, 1e-6, 0))
    return 1;
  double lo = round_to(dx->dtype, ref - band),
         hi = round_to(dx->dtype, ref + band);
  return (isinf(lo) && got == lo) || (isinf(hi) && got == hi);
}

static double dx_band(const bref_t *r, size_t i, double tol) {
  return tol * r->dx_scale[i] + r->dx_err[i] + ABS_FLOOR;
}

/* Every element of dx against the reference; the first mismatch fails. */
static void check_dx(const char *what, const norm_tensor_t *dx, const bref_t *r,
                     double tol, int loose) {
  size_t n = tu_numel(dx);
  for (size_t i = 0; i < n; i++)
    if (!dx_ok(dx, i, r->dx[i], dx_band(r, i, tol), loose))
      ck_abort_msg("%s: dx[%zu] (%s) = %.17g, want %.17g (scale %.3g)", what, i,
                   norm_dtype_name(dx->dtype), norm_tensor_get(dx, i), r->dx[i],
                   r->dx_scale[i]);
}

/* n double gradients against the reference within tol * scale + err. */
static void check_grads(const char *what, const char *which, const double *got,
                        const double *want, const double *scale,
                        const double *err, size_t n, double tol, int loose) {
  for (size_t j = 0; j < n; j++) {
    double band = tol * scale[j] + (err ? err[j] : 0.0) + ABS_FLOOR;
    int ok;
    if (!isfinite(want[j]))
      ok = loose            ? !isfinite(got[j])
           : isnan(want[j]) ? isnan(got[j])
                            : got[j] == want[j];
    else
      ok = fabs(got[j] - want[j]) <= band;
    if (!ok)
      ck_abort_msg("%s: %s[%zu] = %.17g, want %.17g (scale %.3g)", what, which,
                   j, got[j], want[j], scale[j]);
  }
}

/* The backward's stats equal the forward's bit for bit (on a y of dx's
 * dtype); the ones a norm does not write stay as preset. */
static void check_stats_match_forward(const char *what, bfix_t *f) {
  size_t ng = f->ngroups;
  norm_tensor_t y = tu_mk(f->c->dxt, f->c->rank, f->c->shape);
  double *m = tu_doubles(ng), *v = tu_doubles(ng), *r = tu_doubles(ng),
         *q = tu_doubles(ng);
  norm_stats_t st = {m, v, r, q};
  EXPECT_RC(fw_call(f, &f->x, &y, &st), NORM_OK);
  int rms = f->c->kind == K_RMS;
  for (size_t g = 0; g < ng; g++) {
    int same = rms ? memcmp(&q[g], &f->rms[g], 8) == 0 &&
                         memcmp(&r[g], &f->rstd[g], 8) == 0
                   : memcmp(&m[g], &f->mean[g], 8) == 0 &&
                         memcmp(&v[g], &f->var[g], 8) == 0 &&
                         memcmp(&r[g], &f->rstd[g], 8) == 0;
    ck_assert_msg(same, "%s: stats of group %zu differ from the forward's",
                  what, g);
  }
  tu_tensor_free(&y);
  tu_doubles_free(m, ng), tu_doubles_free(v, ng), tu_doubles_free(r, ng);
  tu_doubles_free(q, ng);
}

/* A case through the whole backward against the reference: dx, both
 * gradients, the stats against the forward's. `prep` may change x or dy
 * first. */
typedef void (*prep_fn)(bfix_t *f);

static void run_case_tol(const bcase_t *c, prep_fn prep, double tol) {
  char what[300];
  case_name(c, what, sizeof what);
  bfix_t f;
  bfix_init(&f, c);
  if (prep) prep(&f);
  EXPECT_RC(bw_whole(&f), NORM_OK);
  ck_assert_int_eq(groups_call(c, &f.x), (int64_t)f.ngroups);
  bref_t r;
  ref_backward(&f, &r);
  check_dx(what, &f.dx, &r, tol, 0);
  check_grads(what, "grad_weight", f.gw, r.gw, r.gw_scale, r.gw_err, f.nw, tol,
              0);
  if (c->kind != K_RMS)
    check_grads(what, "grad_bias", f.gb, r.gb, r.gb_scale, NULL, f.nw, tol, 0);
  check_stats_match_forward(what, &f);
  bref_free(&r);
  bfix_free(&f);
}

static void run_case(const bcase_t *c, prep_fn prep) {
  run_case_tol(c, prep, F64_TOL);
}

/* ---- the configurations ---------------------------------------------------
 */

/* Every norm and option on small shapes: layer (ndim 1 and 2, biased and
 * unbiased, eps inside and outside, with and without weight), rms (ndim 1
 * and 2, with and without weight), batch train and eval (with and without
 * weight; rank 2 and 3), group (G 1, 2, 3, 6), instance (rank 3 and 4). */
enum { NCONFIGS = 16 + 4 + 4 + 4 + 2 };

static bcase_t config(int k) {
  bcase_t c;
  if (k < 16) {
    c = bcase(K_LAYER, 3, SHAPE(3, 4, 5));
    c.ndim = 1 + (k & 1);
    c.variance = (k >> 1) & 1 ? NORM_VAR_UNBIASED : NORM_VAR_BIASED;
    c.placement = (k >> 2) & 1 ? NORM_EPS_OUTSIDE_SQRT : NORM_EPS_INSIDE_SQRT;
    c.weight = !((k >> 3) & 1);
  } else if ((k -= 16) < 4) {
    c = bcase(K_RMS, 3, SHAPE(3, 4, 5));
    c.ndim = 1 + (k & 1);
    c.weight = !(k >> 1);
    c.eps = 1e-6;
  } else if ((k -= 4) < 4) {
    c = k & 1 ? bcase(K_BATCH, 2, SHAPE(6, 3))
              : bcase(K_BATCH, 3, SHAPE(4, 3, 5));
    c.mode = k < 2 ? NORM_TRAIN : NORM_EVAL;
    c.weight = k != 1;
  } else if ((k -= 4) < 4) {
    static const int64_t Gs[4] = {1, 2, 3, 6};
    c = bcase(K_GROUP, 3, SHAPE(2, 6, 5));
    c.G = Gs[k];
    c.weight = k != 2;
  } else {
    k -= 4;
    c = k ? bcase(K_INSTANCE, 4, SHAPE(2, 3, 4, 2))
          : bcase(K_INSTANCE, 3, SHAPE(3, 2, 7));
    c.weight = k == 0;
  }
  c.seed = 1000 + 17 * (uint64_t)k;
  return c;
}

/* Each configuration with every (x, dy, dx) dtype triple (64), the weight's
 * dtype rotating through the four. */
START_TEST(test_reference_all_dtypes) {
  bcase_t c = config(_i);
  for (int t = 0; t < 64; t++) {
    c.xt = all_dtypes[t & 3];
    c.dyt = all_dtypes[(t >> 2) & 3];
    c.dxt = all_dtypes[(t >> 4) & 3];
    c.wt = all_dtypes[(t + (t >> 4)) & 3];
    c.seed = 7919 * (uint64_t)(_i + 1) + (uint64_t)t;
    run_case(&c, NULL);
  }
}
END_TEST

/* Groups longer than the backward's 512-element chunks and than the
 * weight prepared up front, with odd tails. */
START_TEST(test_reference_long_groups) {
  bcase_t c = bcase(K_LAYER, 2, SHAPE(3, 1300));
  for (int v = 0; v < 2; v++)
    for (int pl = 0; pl < 2; pl++) {
      c.variance = (norm_variance_t)v;
      c.placement = (norm_eps_placement_t)pl;
      c.xt = c.dxt = NORM_F32;
      run_case(&c, NULL);
      c.xt = c.dxt = NORM_F64;
      run_case(&c, NULL);
    }
  /* rows across moments chunks (4096 floats, 2048 doubles): the sums
   * taken with the moments are moved from each chunk's shift to the
   * first's, then to the mean */
  c = bcase(K_LAYER, 2, SHAPE(2, 9000));
  c.xt = c.dxt = NORM_F32;
  run_case(&c, NULL);
  c.xt = c.dxt = NORM_F64;
  run_case(&c, NULL);
  c = bcase(K_RMS, 2, SHAPE(2, 5000));
  run_case(&c, NULL);
  c.xt = NORM_BF16, c.wt = NORM_F16;
  run_case(&c, NULL);
  c = bcase(K_BATCH, 3, SHAPE(3, 2, 700));
  run_case(&c, NULL);
  c.mode = NORM_EVAL;
  run_case(&c, NULL);
  c = bcase(K_GROUP, 3, SHAPE(2, 4, 333));
  c.G = 2;
  run_case(&c, NULL);
  c = bcase(K_INSTANCE, 3, SHAPE(2, 2, 1025));
  c.xt = NORM_F16;
  run_case(&c, NULL);
  /* Weight-entry runs across the moments' 16 KiB chunks, where the sums
   * are taken with the moments (around each chunk's own shift, moved to
   * the mean after), also with |mean| >> std; and runs so short that the
   * chunks hold several run ends (the sums pass then). */
  for (int d = 0; d < 3; d++)
    for (int far = 0; far < 2; far++) {
      c = bcase(K_GROUP, 3, SHAPE(2, 4, 3000));
      c.G = 2;
      c.xt = c.dyt = c.dxt = (norm_dtype_t[]){NORM_F32, NORM_F64, NORM_BF16}[d];
      if (far) c.lo = 1e3 - 1, c.hi = 1e3 + 1;
      run_case(&c, NULL);
      c = bcase(K_BATCH, 3, SHAPE(3, 2, 5000));
      c.xt = c.dyt = c.dxt = (norm_dtype_t[]){NORM_F32, NORM_F64, NORM_BF16}[d];
      if (far) c.lo = 1e3 - 1, c.hi = 1e3 + 1;
      run_case(&c, NULL);
    }
  c = bcase(K_GROUP, 3, SHAPE(2, 4, 700));
  c.xt = c.dyt = c.dxt = NORM_F32;
  run_case(&c, NULL);
}
END_TEST

/* ---- central differences ---------------------------------------------------
 * float64 tensors, loss = sum(dy * y) through the forward as core computes
 * it: the fourth-order central difference
 * (-L(v + 2h) + 8 L(v + h) - 8 L(v - h) + L(v - 2h)) / 12h, h = 1e-3 (the
 * data are of unit scale), for every element of x, w and b, against
 * dx, grad_weight and grad_bias. Error |fd - analytic| / max(1, |analytic|). */

static double loss_of(const bfix_t *f, norm_tensor_t *y) {
  EXPECT_RC(fw_call(f, &f->x, y, NULL), NORM_OK);
  double s = 0;
  for (size_t i = 0; i < f->numel; i++)
    s += norm_tensor_get(&f->dy, i) * norm_tensor_get(y, i);
  return s;
}

static double fd_of(bfix_t *f, norm_tensor_t *t, size_t i, norm_tensor_t *y) {
  const double h = 1e-3, v = norm_tensor_get(t, i), k[4] = {2, 1, -1, -2},
               c[4] = {-1, 8, -8, 1};
  double s = 0;
  for (int j = 0; j < 4; j++) {
    norm_tensor_set(t, i, v + k[j] * h);
    s += c[j] * loss_of(f, y);
  }
  norm_tensor_set(t, i, v);
  return s / (12 * h);
}

static double fd_err(double fd, double an) {
  return fabs(fd - an) / fmax(1.0, fabs(an));
}

/* Worst errors of one case: dx, grad_weight, grad_bias. */
static void fd_case(const bcase_t *c, double worst[3]) {
  bfix_t f;
  bfix_init(&f, c);
  EXPECT_RC(bw_whole(&f), NORM_OK);
  norm_tensor_t y = tu_mk(NORM_F64, c->rank, c->shape);
  for (size_t i = 0; i < f.numel; i++)
    worst[0] = fmax(worst[0],
                    fd_err(fd_of(&f, &f.x, i, &y), norm_tensor_get(&f.dx, i)));
  for (size_t j = 0; c->weight && j < f.nw; j++) {
    worst[1] = fmax(worst[1], fd_err(fd_of(&f, &f.w, j, &y), f.gw[j]));
    if (c->kind != K_RMS)
      worst[2] = fmax(worst[2], fd_err(fd_of(&f, &f.b, j, &y), f.gb[j]));
  }
  tu_tensor_free(&y);
  bfix_free(&f);
}

/* Every configuration of a kind (with its weight), float64, on its small
 * shape and, for the row kinds, a longer row; prints the worst errors. */
START_TEST(test_finite_differences) {
  kind_t kind = (kind_t)_i;
  double worst[3] = {0, 0, 0};
  int cases = 0;
  for (int k = 0; k < NCONFIGS; k++) {
    bcase_t c = config(k);
    if (c.kind != kind) continue;
    c.weight = 1;
    c.lo = -1, c.hi = 1;
    fd_case(&c, worst);
    cases++;
    if (row_kind(&c)) {
      bcase_t l = c;
      l.rank = 2, l.shape[0] = 2, l.shape[1] = 67, l.ndim = 1;
      l.seed += 5;
      fd_case(&l, worst);
      cases++;
    }
  }
  printf("norm_backward: %s central differences (float64, %d cases): worst "
         "err dx %.1e, grad_weight %.1e, grad_bias %.1e\n",
         kind_names[kind], cases, worst[0], worst[1],
         kind == K_RMS ? 0.0 : worst[2]);
  fflush(stdout);
  ck_assert_msg(worst[0] <= FD_TOL && worst[1] <= FD_TOL && worst[2] <= FD_TOL,
                "%s: central differences: worst dx %.3g, grad_weight %.3g, "
                "grad_bias %.3g (limit %g)",
                kind_names[kind], worst[0], worst[1], worst[2], FD_TOL);
}
END_TEST

/* ---- cruel cases ------------------------------------------------------------
 */

/* One configuration per kind and option at (dtype, dtype) with x moved by
 * `prep` or a new [lo, hi). */
static void each_kind(norm_dtype_t xt, norm_dtype_t dxt, double lo, double hi,
                      double eps, prep_fn prep) {
  for (int k = 0; k < NCONFIGS; k++) {
    bcase_t c = config(k);
    c.xt = xt, c.dxt = dxt;
    if (lo < hi) c.lo = lo, c.hi = hi;
    if (eps >= 0) c.eps = eps;
    run_case(&c, prep);
  }
}

/* |mean| = 1e6 with std ~ 1, both signs: the tolerance grows by
 * KAPPA_TOL * |mean| / std only (the mean's rounding). */
START_TEST(test_large_mean) {
  each_kind(NORM_F64, NORM_F64, 1e6 - 1, 1e6 + 1, -1, NULL);
  each_kind(NORM_F64, NORM_F32, -1e6 - 1, -1e6 + 1, -1, NULL);
  each_kind(NORM_F32, NORM_F64, 1e6 - 1, 1e6 + 1, -1, NULL);
  each_kind(NORM_F64, NORM_F64, 3e9 - 1e-3, 3e9 + 1e-3, -1, NULL);
}
END_TEST

/* Group 0 (or, with prep_all_constant, every group) holds one value, 0.75
 * (exact in every dtype, and so are its sums): eps > 0 gives
 * dx = rstd (g - mean(g)) (outside_sqrt: std's gradient taken as 0), eps = 0
 * gives dx = 0, as the reference says; grad_weight gets nothing from it. */
static void prep_group0_constant(bfix_t *f) {
  for (size_t i = 0; i < f->numel; i++)
    if (group_of(f->c, i) == 0) norm_tensor_set(&f->x, i, 0.75);
}
static void prep_all_constant(bfix_t *f) {
  for (size_t i = 0; i < f->numel; i++) norm_tensor_set(&f->x, i, -2.5);
}

START_TEST(test_constant_groups) {
  norm_dtype_t dt = all_dtypes[_i];
  for (int e = 0; e < 2; e++) {
    each_kind(dt, dt, 0, 0, e ? 0.0 : 1e-5, prep_group0_constant);
    each_kind(dt, NORM_F64, 0, 0, e ? 0.0 : 1e-5, prep_all_constant);
  }
  /* and explicitly: eps = 0 gives dx = 0 exactly, eps > 0 a finite dx */
  for (int k = 0; k < NCONFIGS; k++) {
    bcase_t c = config(k);
    if (c.kind == K_BATCH && c.mode == NORM_EVAL) continue;
    for (int e = 0; e < 2; e++) {
      c.eps = e ? 0.0 : 1e-3;
      bfix_t f;
      bfix_init(&f, &c);
      prep_group0_constant(&f);
      if (c.kind == K_RMS) /* rms: no spread is all zeros */
        for (size_t i = 0; i < f.numel; i++)
          if (group_of(&c, i) == 0) norm_tensor_set(&f.x, i, 0.0);
      EXPECT_RC(bw_whole(&f), NORM_OK);
      for (size_t i = 0; i < f.numel; i++) {
        if (group_of(&c, i) != 0) continue;
        double d = norm_tensor_get(&f.dx, i);
        ck_assert_msg(e ? d == 0 : isfinite(d) && d != 0,
                      "%s eps %g: dx[%zu] = %g", kind_names[c.kind], c.eps, i,
                      d);
      }
      bfix_free(&f);
    }
  }
}
END_TEST

/* Batch eval with a running_var of 0 and eps = 0: the forward gives the
 * bias, the backward dx = 0 and xhat = 0. */
START_TEST(test_eval_zero_running_var) {
  bcase_t c = bcase(K_BATCH, 3, SHAPE(4, 3, 5));
  c.mode = NORM_EVAL;
  c.eps = 0;
  bfix_t f;
  bfix_init(&f, &c);
  norm_tensor_set(&f.rv, 1, 0.0);
  EXPECT_RC(bw_whole(&f), NORM_OK);
  for (size_t i = 0; i < f.numel; i++)
    if (group_of(&c, i) == 1) ck_assert(norm_tensor_get(&f.dx, i) == 0.0);
  ck_assert(f.gw[1] == 0.0);
  bfix_free(&f);
  c.seed = 77;
  run_case(&c, NULL); /* the other channels as the reference */
}
END_TEST

/* Single-element groups: layer rows of 1 (biased: dx = 0, grad_weight 0,
 * grad_bias dy; unbiased: NaN, as torch), instance norm on 1 x 1 spatial,
 * group norm of one channel and no spatial dims, and batch train at its
 * minimum of two values per channel (one is NORM_E_TOO_FEW). */
START_TEST(test_single_element_groups) {
  bcase_t c = bcase(K_LAYER, 2, SHAPE(7, 1));
  for (int dt = 0; dt < 4; dt++) {
    c.xt = c.dyt = c.dxt = all_dtypes[dt];
    for (int e = 0; e < 2; e++) {
      c.eps = e ? 0.0 : 1e-5;
      for (int pl = 0; pl < 2; pl++) {
        c.placement = (norm_eps_placement_t)pl;
        c.variance = NORM_VAR_BIASED;
        run_case(&c, NULL);
        bfix_t f;
        bfix_init(&f, &c);
        EXPECT_RC(bw_whole(&f), NORM_OK);
        double sum_dy = 0;
        for (size_t i = 0; i < 7; i++) {
          ck_assert(norm_tensor_get(&f.dx, i) == 0.0);
          sum_dy += norm_tensor_get(&f.dy, i);
        }
        ck_assert(f.gw[0] == 0.0 && f.gb[0] == sum_dy);
        bfix_free(&f);
        c.variance = NORM_VAR_UNBIASED;
        bfix_init(&f, &c);
        EXPECT_RC(bw_whole(&f), NORM_OK);
        for (size_t i = 0; i < 7; i++)
          ck_assert(isnan(norm_tensor_get(&f.dx, i)));
        bfix_free(&f);
      }
    }
  }
  c = bcase(K_INSTANCE, 4, SHAPE(3, 4, 1, 1));
  run_case(&c, NULL);
  c = bcase(K_GROUP, 2, SHAPE(3, 4));
  c.G = 4;
  run_case(&c, NULL);
  c = bcase(K_RMS, 2, SHAPE(5, 1)); /* rms: dx = g eps / (x^2 + eps)^3/2 */
  run_case(&c, NULL);
  c = bcase(K_BATCH, 2, SHAPE(2, 5));
  run_case(&c, NULL);
  c = bcase(K_BATCH, 3, SHAPE(1, 3, 2));
  run_case(&c, NULL);
  c = bcase(K_BATCH, 3, SHAPE(1, 3, 1));
  bfix_t f;
  bfix_init(&f, &c);
  EXPECT_RC(bw_whole(&f), NORM_E_TOO_FEW);
  bfix_free(&f);
  c.mode = NORM_EVAL; /* eval has no minimum */
  run_case(&c, NULL);
}
END_TEST

/* float32 / bfloat16 / float16 subnormal x (normal in double) with eps 0
 * and 1e-5, into float64 and float32 dx (which may overflow to Inf, as the
 * reference rounds); float64 subnormals (whose squares underflow to 0:
 * var 0) with eps 1e-5, and with eps 0 (no spread: dx = 0). */
START_TEST(test_subnormal_inputs) {
  for (int e = 0; e < 2; e++) {
    double eps = e ? 1e-5 : 0.0;
    each_kind(NORM_F32, NORM_F64, -1e-39, 3e-39, eps, NULL);
    each_kind(NORM_F32, NORM_F32, -1e-39, 3e-39, eps, NULL);
    each_kind(NORM_BF16, NORM_F32, -1e-39, 3e-39, eps, NULL);
    each_kind(NORM_F16, NORM_F16, -3e-5, 5e-5, eps, NULL);
    each_kind(NORM_F64, NORM_F64, -1e-310, 3e-310, eps, NULL);
  }
}
END_TEST

/* A NaN or Inf in x, or in dy, of one group: that group's dx is non-finite,
 * every other group's matches the reference; in batch eval mode dx is
 * elementwise (dx = rstd * g), so only the poisoned dy's element is. */
static size_t poison_at;
static double poison_value;
static int poison_dy;
static void prep_poison(bfix_t *f) {
  norm_tensor_set(poison_dy ? &f->dy : &f->x, poison_at, poison_value);
}

START_TEST(test_non_finite) {
  const double bad[3] = {NAN, INFINITY, -INFINITY};
  for (int k = 0; k < NCONFIGS; k++) {
    bcase_t c = config(k);
    int eval = c.kind == K_BATCH && c.mode == NORM_EVAL;
    for (int b = 0; b < 3; b++)
      for (poison_dy = 0; poison_dy < 2; poison_dy++) {
        char what[300];
        case_name(&c, what, sizeof what);
        bfix_t f;
        bfix_init(&f, &c);
        poison_at = f.numel / 2 + 1;
        poison_value = bad[b];
        prep_poison(&f);
        EXPECT_RC(bw_whole(&f), NORM_OK);
        bref_t r;
        ref_backward(&f, &r);
        size_t pg = group_of(&c, poison_at);
        for (size_t i = 0; i < f.numel; i++) {
          double got = norm_tensor_get(&f.dx, i);
          int poisoned =
              eval ? poison_dy && i == poison_at : group_of(&c, i) == pg;
          if (poisoned)
            ck_assert_msg(!isfinite(got), "%s: %s %g at %zu: dx[%zu] = %g",
                          what, poison_dy ? "dy" : "x", bad[b], poison_at, i,
                          got);
          else
            ck_assert_msg(isfinite(got) && dx_ok(&f.dx, i, r.dx[i],
                                                 dx_band(&r, i, F64_TOL), 0),
                          "%s: %s %g at %zu: dx[%zu] = %.17g, want %.17g", what,
                          poison_dy ? "dy" : "x", bad[b], poison_at, i, got,
                          r.dx[i]);
        }
        check_grads(what, "grad_weight", f.gw, r.gw, r.gw_scale, r.gw_err, f.nw,
                    F64_TOL, 1);
        if (c.kind != K_RMS)
          check_grads(what, "grad_bias", f.gb, r.gb, r.gb_scale, NULL, f.nw,
                      F64_TOL, 1);
        bref_free(&r);
        bfix_free(&f);
      }
  }
}
END_TEST

/* A 2^16-element row (layer, both variances and placements, and rms), a
 * channel of 2^16 values (batch) and an instance of 2^16 against the
 * reference, at 10 x F64_TOL for the sums of 2^16 terms. */
START_TEST(test_huge_groups) {
  const double tol = 1e-12;
  bcase_t c = bcase(K_LAYER, 2, SHAPE(1, 1 << 16));
  for (int v = 0; v < 4; v++) {
    c.variance = (norm_variance_t)(v & 1);
    c.placement = (norm_eps_placement_t)(v >> 1);
    c.xt = c.dxt = NORM_F32;
    run_case_tol(&c, NULL, tol);
    c.xt = c.dxt = NORM_F64;
    c.lo = 1e3, c.hi = 1e3 + 1;
    run_case_tol(&c, NULL, tol);
    c.lo = -2, c.hi = 3;
  }
  c = bcase(K_RMS, 2, SHAPE(2, 1 << 16));
  c.xt = NORM_BF16, c.dxt = NORM_F32;
  run_case_tol(&c, NULL, tol);
  c = bcase(K_BATCH, 3, SHAPE(16, 2, 1 << 12));
  run_case_tol(&c, NULL, tol);
  c = bcase(K_INSTANCE, 3, SHAPE(1, 2, 1 << 16));
  c.xt = NORM_F16, c.dxt = NORM_F16;
  run_case_tol(&c, NULL, tol);
}
END_TEST

/* A float32 tensor of 16 MiB (rows of 1024, float32 weights) is streamed:
 * its rows read their weights as floats and prefetch the next row, the
 * same products and sums as the double weights of a row alone. Layer and
 * RMS norm over it give the same dx, gradient and stats bits as the same
 * rows one call each (gradients added in the same order). */
START_TEST(test_streamed_rows_as_single_rows) {
  enum { R = 4096, C = 1024 };
  norm_tensor_t x = tu_mk(NORM_F32, 2, SHAPE(R, C));
  norm_tensor_t dy = tu_mk(NORM_F32, 2, SHAPE(R, C));
  norm_tensor_t dx = tu_mk(NORM_F32, 2, SHAPE(R, C));
  norm_tensor_t dx1 = tu_mk(NORM_F32, 2, SHAPE(R, C));
  norm_tensor_t w = tu_mk(NORM_F32, 1, SHAPE(C));
  tu_fill_uniform(&x, 11, 2.0, 5.0);
  tu_fill_uniform(&dy, 12, -1.0, 1.0);
  tu_fill_uniform(&w, 13, 0.5, 1.5);
  double *g[2][2], *st[2][3];
  for (int k = 0; k < 2; k++) {
    for (int j = 0; j < 2; j++) g[k][j] = calloc(C, sizeof(double));
    for (int j = 0; j < 3; j++) st[k][j] = calloc(R, sizeof(double));
    ck_assert(g[k][0] && g[k][1] && st[k][0] && st[k][1] && st[k][2]);
  }
  for (int rms = 0; rms < 2; rms++) {
    for (int k = 0; k < 2; k++) { /* k = 0: the whole tensor, 1: row by row */
      memset(g[k][0], 0, C * sizeof(double));
      memset(g[k][1], 0, C * sizeof(double));
      norm_grads_t gr = {g[k][0], rms ? NULL : g[k][1]};
      norm_tensor_t *out = k ? &dx1 : &dx;
      for (size_t r = 0; r < (k ? (size_t)R : 1); r++) {
        size_t rows = k ? 1 : R, at = r * C * sizeof(float);
        norm_tensor_t xr = x, dyr = dy, dxr = *out;
        xr.shape[0] = dyr.shape[0] = dxr.shape[0] = (int64_t)rows;
        xr.data = (char *)x.data + at;
        dyr.data = (char *)dy.data + at;
        dxr.data = (char *)out->data + at;
        if (rms) { /* rstd and rms */
          norm_stats_t sr = {NULL, NULL, st[k][0] + r, st[k][1] + r};
          norm_rms_params_t p = {.normalized_ndim = 1, .eps = 1e-6};
          EXPECT_RC(norm_rms_backward_rows(&xr, &dyr, &w, &p, &dxr, &gr, &sr,
                                           0, rows), NORM_OK);
        } else {
          norm_stats_t sr = {st[k][0] + r, st[k][1] + r, st[k][2] + r, NULL};
          norm_layer_params_t p = {.normalized_ndim = 1, .eps = 1e-5};
          EXPECT_RC(norm_layer_backward_rows(&xr, &dyr, &w, &p, &dxr, &gr,
                                             &sr, 0, rows), NORM_OK);
        }
      }
    }
    ck_assert_msg(memcmp(dx.data, dx1.data, tu_nbytes(&dx)) == 0,
                  "%s: dx of the streamed rows differs", rms ? "rms" : "layer");
    for (int j = 0; j < 2 - rms; j++)
      ck_assert_msg(memcmp(g[0][j], g[1][j], C * sizeof(double)) == 0,
                    "%s: gradient %d differs", rms ? "rms" : "layer", j);
    for (int j = 0; j < 3; j++)
      ck_assert_msg(memcmp(st[0][j], st[1][j], R * sizeof(double)) == 0,
                    "%s: stats %d differ", rms ? "rms" : "layer", j);
  }
  for (int k = 0; k < 2; k++) {
    for (int j = 0; j < 2; j++) free(g[k][j]);
    for (int j = 0; j < 3; j++) free(st[k][j]);
  }
  tu_tensor_free(&x);
  tu_tensor_free(&dy);
  tu_tensor_free(&dx);
  tu_tensor_free(&dx1);
  tu_tensor_free(&w);
}
END_TEST

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>

/* The MXCSR flags an SSE / AVX instruction sets when one of its operands
 * is a subnormal float or double (DAZ off), and when its result is tiny
 * and inexact (a subnormal, or a zero from one: underflow). */
enum { MXCSR_DENORMAL_OPERAND = 0x02, MXCSR_UNDERFLOW = 0x10 };
enum { MXCSR_SUBNORMAL = MXCSR_DENORMAL_OPERAND | MXCSR_UNDERFLOW };

/* On ordinary data -- exact zeros among x (ReLU outputs), weights below
 * one -- no float or double operation of the forward or the backward of
 * any norm takes or makes a subnormal: on Intel cores each such operation
 * is a microcode assist (a subnormal slack constant in the bfloat16 error
 * bounds once made rms 64x768 bfloat16 forward 8x slower there, with the
 * same bits). The flag, unlike a timing, does not depend on the machine's
 * load. Every dtype, weights in it or in float32, under the table in use
 * (NORM_SIMD). float16 results below 2^-14 are its own subnormals, which
 * ordinary gradients reach (the conversion reports underflow for them):
 * float16 checks the operand flag only. */
START_TEST(test_no_subnormals) {
  const size_t ndt = sizeof all_dtypes / sizeof all_dtypes[0];
  for (int kind = 0; kind < K_COUNT; kind++)
    for (size_t d = 0; d < ndt; d++)
      for (int wf32 = 0; wf32 < 2; wf32++)
        for (int eval = 0; eval < 1 + (kind == K_BATCH); eval++) {
          bcase_t c = kind < K_BATCH ? bcase(kind, 2, SHAPE(8, 768))
                                     : bcase(kind, 3, SHAPE(4, 8, 96));
          c.G = 4;
          c.mode = eval ? NORM_EVAL : NORM_TRAIN;
          c.xt = c.dyt = c.dxt = all_dtypes[d];
          c.wt = wf32 ? NORM_F32 : all_dtypes[d];
          bfix_t f;
          bfix_init(&f, &c);
          for (size_t i = 0; i < f.numel; i += 5) norm_tensor_set(&f.x, i, 0.0);
          char name[256];
          case_name(&c, name, sizeof name);
          unsigned flags = all_dtypes[d] == NORM_F16 ? MXCSR_DENORMAL_OPERAND
                                                     : MXCSR_SUBNORMAL;
          _mm_setcsr(_mm_getcsr() & ~(unsigned)MXCSR_SUBNORMAL);
          EXPECT_RC(fw_call(&f, &f.x, &f.dx, NULL), NORM_OK);
          ck_assert_msg(!(_mm_getcsr() & flags),
                        "%s: the forward took or made a subnormal", name);
          EXPECT_RC(bw_whole(&f), NORM_OK);
          ck_assert_msg(!(_mm_getcsr() & flags),
                        "%s: the backward took or made a subnormal", name);
          bfix_free(&f);
        }
}
END_TEST
#endif

/* ---- contract -------------------------------------------------------------
 */

/* Gradients are added: two calls give twice one call's (within the
 * rounding of the sums), arrays preset to P give P + one call's; dx and
 * the stats are the same bits each time, and do not depend on which
 * gradients are wanted (NULL grads, either array NULL). */
START_TEST(test_grads_accumulate) {
  bcase_t c = config(_i);
  c.weight = 1;
  bfix_t f;
  bfix_init(&f, &c);
  EXPECT_RC(bw_whole(&f), NORM_OK);
  size_t nw = f.nw, dxb = tu_nbytes(&f.dx);
  double *gw1 = malloc(nw * 8), *gb1 = malloc(nw * 8);
  unsigned char *dx1 = malloc(dxb);
  ck_assert(gw1 && gb1 && dx1);
  memcpy(gw1, f.gw, nw * 8), memcpy(gb1, f.gb, nw * 8);
  memcpy(dx1, f.dx.data, dxb);
  EXPECT_RC(bw_whole(&f), NORM_OK);
  bref_t r; /* for the rounding scales of the sums */
  ref_backward(&f, &r);
  for (size_t j = 0; j < nw; j++) {
    double sw = F64_TOL * r.gw_scale[j], sb = F64_TOL * r.gb_scale[j];
    ck_assert_msg(fabs(f.gw[j] - 2 * gw1[j]) <= 2 * sw,
                  "grad_weight[%zu]: %.17g after two calls, %.17g after one", j,
                  f.gw[j], gw1[j]);
    ck_assert_msg(fabs(f.gb[j] - 2 * gb1[j]) <= 2 * sb,
                  "grad_bias[%zu]: %.17g after two calls, %.17g after one", j,
                  f.gb[j], gb1[j]);
  }
  ck_assert(memcmp(dx1, f.dx.data, dxb) == 0);
  for (size_t j = 0; j < nw; j++) f.gw[j] = 0.5 + (double)j, f.gb[j] = -3.0;
  EXPECT_RC(bw_whole(&f), NORM_OK);
  for (size_t j = 0; j < nw; j++) {
    double sw = F64_TOL * (r.gw_scale[j] + 0.5 + (double)j);
    double sb = F64_TOL * (r.gb_scale[j] + 3.0);
    ck_assert(fabs(f.gw[j] - (0.5 + (double)j + gw1[j])) <= sw);
    ck_assert(fabs(f.gb[j] - (-3.0 + gb1[j])) <= sb);
  }
  bref_free(&r);
  /* which gradients are wanted changes neither dx nor the other gradient */
  double *g2 = tu_doubles(nw);
  norm_grads_t only_w = {g2, NULL}, only_b = {NULL, g2}, none = {NULL, NULL};
  const norm_grads_t *variants[4] = {NULL, &none, &only_w, &only_b};
  for (int v = 0; v < 4; v++) {
    if (c.kind == K_RMS && v == 3) {
      EXPECT_RC(bw_call(&f, NULL, NULL, variants[v], NULL, 0, f.ngroups),
                NORM_E_ARG);
      continue;
    }
    memset(f.dx.data, 0, dxb);
    memset(g2, 0, nw * 8);
    EXPECT_RC(bw_call(&f, NULL, NULL, variants[v], NULL, 0, f.ngroups),
              NORM_OK);
    ck_assert_msg(memcmp(dx1, f.dx.data, dxb) == 0, "grads variant %d: dx", v);
    if (v >= 2) ck_assert(memcmp(g2, v == 2 ? gw1 : gb1, nw * 8) == 0);
  }
  tu_doubles_free(g2, nw);
  free(gw1), free(gb1), free(dx1);
  bfix_free(&f);
}
END_TEST

/* [0, groups) split at 0, 1, half and the last, each range (last first)
 * with gradient arrays of its own and stats arrays of exactly `hi`
 * entries preset to -12345: dx equals the whole call's bit for bit and no
 * range writes outside its groups; stats match the whole call's bit for
 * bit and nothing below lo is written; the ranges' gradients summed equal
 * the whole call's (within rounding; batch norm, one group per entry,
 * exactly). */
START_TEST(test_ranges) {
  bcase_t c = config(_i);
  c.dxt = all_dtypes[_i % 4];
  bfix_t whole;
  bfix_init(&whole, &c);
  EXPECT_RC(bw_whole(&whole), NORM_OK);
  bfix_t f;
  bfix_init(&f, &c);
  size_t ng = f.ngroups, nw = f.nw, es = norm_dtype_size(c.dxt);
  size_t dxb = tu_nbytes(&f.dx);
  memset(f.dx.data, 0x5A, dxb);
  size_t cuts[4] = {0, 1, ng / 2, ng - 1};
  double *sw = zalloc(nw), *sb = zalloc(nw);
  unsigned char *before = malloc(dxb);
  ck_assert_ptr_nonnull(before);
  int rms = c.kind == K_RMS;
  for (size_t k = 4; k-- > 0;) {
    size_t lo = cuts[k], hi = k < 3 ? cuts[k + 1] : ng;
    if (lo >= hi) continue;
    double *gw = tu_doubles(nw), *gb = tu_doubles(nw);
    double *s[4];
    for (int q = 0; q < 4; q++) {
      s[q] = tu_doubles(hi);
      for (size_t g = 0; g < hi; g++) s[q][g] = -12345.0;
    }
    norm_grads_t gr = {gw, rms ? NULL : gb};
    norm_stats_t st = {s[0], s[1], s[2], s[3]};
    memcpy(before, f.dx.data, dxb);
    EXPECT_RC(bw_call(&f, NULL, NULL, &gr, &st, lo, hi), NORM_OK);
    for (size_t i = 0; i < f.numel; i++) {
      size_t g = group_of(&c, i);
      if (g < lo || g >= hi)
        ck_assert_msg(
            memcmp((char *)f.dx.data + i * es, before + i * es, es) == 0,
            "range [%zu, %zu) wrote dx[%zu] of group %zu", lo, hi, i, g);
    }
    for (size_t g = 0; g < hi; g++) {
      const double *w[4] = {whole.mean, whole.var, whole.rstd, whole.rms};
      for (int q = 0; q < 4; q++) {
        int written = g >= lo && (rms ? q >= 2 : q < 3);
        if (written)
          ck_assert_msg(memcmp(&s[q][g], &w[q][g], 8) == 0,
                        "range [%zu, %zu): stat %d of group %zu", lo, hi, q, g);
        else
          ck_assert_msg(s[q][g] == -12345.0,
                        "range [%zu, %zu) wrote stat %d of group %zu", lo, hi,
                        q, g);
      }
    }
    for (size_t j = 0; j < nw; j++) sw[j] += gw[j], sb[j] += gb[j];
    tu_doubles_free(gw, nw), tu_doubles_free(gb, nw);
    for (int q = 0; q < 4; q++) tu_doubles_free(s[q], hi);
  }
  ck_assert_msg(memcmp(f.dx.data, whole.dx.data, dxb) == 0,
                "split dx differs from the whole call");
  bref_t r;
  ref_backward(&whole, &r);
  for (size_t j = 0; j < nw; j++) {
    double tol = c.kind == K_BATCH ? 0.0 : 1e-14;
    ck_assert_msg(fabs(sw[j] - whole.gw[j]) <= tol * r.gw_scale[j],
                  "grad_weight[%zu]: ranges %.17g, whole %.17g", j, sw[j],
                  whole.gw[j]);
    if (!rms)
      ck_assert_msg(fabs(sb[j] - whole.gb[j]) <= tol * r.gb_scale[j],
                    "grad_bias[%zu]: ranges %.17g, whole %.17g", j, sb[j],
                    whole.gb[j]);
  }
  bref_free(&r);
  /* an empty range writes nothing */
  memcpy(before, f.dx.data, dxb);
  double *gw = tu_doubles(nw);
  norm_grads_t gr = {gw, NULL};
  EXPECT_RC(bw_call(&f, NULL, NULL, &gr, NULL, 1, 1), NORM_OK);
  ck_assert(memcmp(before, f.dx.data, dxb) == 0 && tu_bytes_are(gw, nw * 8, 0));
  tu_doubles_free(gw, nw);
  free(sw), free(sb), free(before);
  bfix_free(&f);
  bfix_free(&whole);
}
END_TEST

/* dx aliasing dy (the same dtype) gives the out-of-place dx, gradients
 * and stats bit for bit, at sizes past the 512-element chunks. */
START_TEST(test_dx_aliases_dy) {
  for (int k = 0; k < NCONFIGS; k++) {
    bcase_t c = config(k);
    if (row_kind(&c))
      c.shape[2] = 301;
    else
      c.shape[c.rank - 1] = 263;
    for (int d = 0; d < 4; d++) {
      c.dyt = c.dxt = all_dtypes[d];
      c.xt = all_dtypes[(d + k) % 4];
      bfix_t f, a;
      bfix_init(&f, &c);
      bfix_init(&a, &c);
      EXPECT_RC(bw_whole(&f), NORM_OK);
      norm_grads_t gr = {a.gw, c.kind == K_RMS ? NULL : a.gb};
      norm_stats_t st = {a.mean, a.var, a.rstd, a.rms};
      EXPECT_RC(bw_call(&a, &a.dy, &a.dy, &gr, &st, 0, a.ngroups), NORM_OK);
      ck_assert_msg(memcmp(a.dy.data, f.dx.data, tu_nbytes(&f.dx)) == 0,
                    "%s %s: in-place dx differs", kind_names[c.kind],
                    norm_dtype_name(c.dxt));
      ck_assert(memcmp(a.gw, f.gw, f.nw * 8) == 0);
      ck_assert(memcmp(a.gb, f.gb, f.nw * 8) == 0);
      ck_assert(memcmp(a.rstd, f.rstd, f.ngroups * 8) == 0);
      bfix_free(&f);
      bfix_free(&a);
    }
  }
}
END_TEST

/* The stats a backward writes are the forward's bit for bit (run_case
 * checks that everywhere); here the ones it must not write: rms leaves
 * mean and var, the others rms, as preset. Batch norm's running stats are
 * read in eval mode and never written, in either mode. No weight is a
 * weight of ones, bit for bit. */
START_TEST(test_stats_and_running) {
  for (int k = 0; k < NCONFIGS; k++) {
    bcase_t c = config(k);
    c.running = 1;
    bfix_t f;
    bfix_init(&f, &c);
    size_t ng = f.ngroups;
    double *s[4];
    for (int q = 0; q < 4; q++) {
      s[q] = tu_doubles(ng);
      memset(s[q], 0x77, ng * 8);
    }
    norm_stats_t st = {s[0], s[1], s[2], s[3]};
    norm_tensor_t rm0 = f.rm.data ? tu_mk_copy(&f.rm) : (norm_tensor_t){0};
    norm_tensor_t rv0 = f.rv.data ? tu_mk_copy(&f.rv) : (norm_tensor_t){0};
    EXPECT_RC(bw_call(&f, NULL, NULL, NULL, &st, 0, ng), NORM_OK);
    int rms = c.kind == K_RMS;
    for (int q = 0; q < 4; q++) {
      int unwritten = rms ? q < 2 : q == 3;
      ck_assert_msg(tu_bytes_are(s[q], ng * 8, 0x77) == unwritten,
                    "%s: stat %d", kind_names[c.kind], q);
    }
    if (f.rm.data) {
      ck_assert(memcmp(rm0.data, f.rm.data, tu_nbytes(&f.rm)) == 0);
      ck_assert(memcmp(rv0.data, f.rv.data, tu_nbytes(&f.rv)) == 0);
      tu_tensor_free(&rm0), tu_tensor_free(&rv0);
    }
    for (int q = 0; q < 4; q++) tu_doubles_free(s[q], ng);
    /* the weight of ones */
    if (c.weight) {
      size_t dxb = tu_nbytes(&f.dx);
      unsigned char *with = malloc(dxb);
      ck_assert_ptr_nonnull(with);
      for (size_t j = 0; j < f.nw; j++) norm_tensor_set(&f.w, j, 1.0);
      EXPECT_RC(bw_call(&f, NULL, NULL, NULL, NULL, 0, ng), NORM_OK);
      memcpy(with, f.dx.data, dxb);
      EXPECT_RC(bw_raw(&c, &f.x, &f.dy, NULL, opt(&f.rm), opt(&f.rv), &f.dx,
                       NULL, NULL, 0, ng),
                NORM_OK);
      ck_assert_msg(memcmp(with, f.dx.data, dxb) == 0,
                    "%s: a weight of ones differs from none",
                    kind_names[c.kind]);
      free(with);
    }
    bfix_free(&f);
  }
}
END_TEST

/* ---- limits -----------------------------------------------------------------
 */

/* Extreme eps (1e-300, 1e300), float16 dx past its range (Inf, as the
 * reference rounds), and rank 8 with every normalized_ndim. */
START_TEST(test_limits) {
  for (int k = 0; k < NCONFIGS; k++) {
    bcase_t c = config(k);
    c.eps = 1e300;
    run_case(&c, NULL);
    c.eps = 1e-300;
    run_case(&c, NULL);
    c.eps = 1e-5;
    c.dxt = NORM_F16;
    c.lo = -1e-4, c.hi = 1e-4; /* rstd ~ 1e4: dx up to ~1e5 > 65504 */
    run_case(&c, NULL);
  }
  bcase_t c = bcase(K_LAYER, 8, SHAPE(2, 3, 2, 3, 2, 3, 2, 3));
  for (int nd = 1; nd <= 8; nd++) {
    c.ndim = nd;
    c.kind = K_LAYER;
    run_case(&c, NULL);
    c.kind = K_RMS;
    run_case(&c, NULL);
  }
  c = bcase(K_GROUP, 8, SHAPE(2, 4, 2, 1, 3, 1, 2, 2));
  c.G = 2;
  run_case(&c, NULL);
  c.kind = K_BATCH;
  run_case(&c, NULL);
  c.kind = K_INSTANCE;
  run_case(&c, NULL);
}
END_TEST

/* ---- errors -----------------------------------------------------------------
 */

/* c's call on a fresh fixture, after `mut` changed it, returns want and
 * leaves dx and the gradients untouched. */
typedef void (*mut_fn)(bcase_t *c, bfix_t *f);

static void expect_err(const bcase_t *c0, mut_fn mut, int want,
                       const norm_tensor_t *dy_override, int dy_null) {
  bcase_t c = *c0;
  bfix_t f;
  bfix_init(&f, &c);
  size_t dxb = tu_nbytes(&f.dx);
  memset(f.dx.data, 0x3C, dxb);
  memset(f.gw, 0x3C, f.nw * 8), memset(f.gb, 0x3C, f.nw * 8);
  bfix_t saved = f; /* mut changes tensor fields only: restored below */
  if (mut) mut(&c, &f);
  norm_grads_t gr = {f.gw, c.kind == K_RMS ? NULL : f.gb};
  int rc =
      bw_raw(&c, &f.x,
             dy_null       ? NULL
             : dy_override ? dy_override
                           : &f.dy,
             opt(&f.w), opt(&f.rm), opt(&f.rv), &f.dx, &gr, NULL, 0, f.ngroups);
  f = saved;
  char what[300];
  case_name(&c, what, sizeof what);
  ck_assert_msg(rc == want, "%s: got %d (%s), want %d (%s)", what, rc,
                norm_err_name(rc), want, norm_err_name(want));
  ck_assert_msg(tu_bytes_are(f.dx.data, dxb, 0x3C), "%s: error wrote dx", what);
  ck_assert_msg(tu_bytes_are(f.gw, f.nw * 8, 0x3C) &&
                    tu_bytes_are(f.gb, f.nw * 8, 0x3C),
                "%s: error wrote the gradients", what);
  bfix_free(&f);
}

/* dy of another shape, rank or dtype, or NULL: NORM_E_GRAD_OUTPUT,
 * NORM_E_DTYPE, NORM_E_NULL, for every norm. */
START_TEST(test_err_grad_output) {
  for (int k = 0; k < NCONFIGS; k++) {
    bcase_t c = config(k);
    bfix_t f;
    bfix_init(&f, &c);
    norm_tensor_t dy = f.dy;
    dy.shape[c.rank - 1] += 1; /* a dim differs */
    expect_err(&c, NULL, NORM_E_GRAD_OUTPUT, &dy, 0);
    dy = f.dy;
    dy.rank = 1, dy.shape[0] = (int64_t)f.numel; /* the same numel, flat */
    expect_err(&c, NULL, NORM_E_GRAD_OUTPUT, &dy, 0);
    dy = f.dy;
    dy.rank = c.rank + 1, dy.shape[c.rank] = 1; /* an extra trailing 1 */
    expect_err(&c, NULL, NORM_E_GRAD_OUTPUT, &dy, 0);
    dy = f.dy;
    dy.shape[0] = -dy.shape[0];
    expect_err(&c, NULL, NORM_E_GRAD_OUTPUT, &dy, 0);
    dy = f.dy;
    dy.rank = 0;
    expect_err(&c, NULL, NORM_E_GRAD_OUTPUT, &dy, 0);
    dy = f.dy;
    dy.dtype = NORM_DTYPE_COUNT;
    expect_err(&c, NULL, NORM_E_DTYPE, &dy, 0);
    dy = f.dy;
    dy.data = NULL;
    expect_err(&c, NULL, NORM_E_NULL, &dy, 0);
    expect_err(&c, NULL, NORM_E_NULL, NULL, 1);
    bfix_free(&f);
  }
}
END_TEST

static void mut_dx_shape(bcase_t *c, bfix_t *f) {
  (void)c, f->dx.shape[0] += 1;
}
static void mut_eps_nan(bcase_t *c, bfix_t *f) { (void)f, c->eps = NAN; }
static void mut_eps_neg(bcase_t *c, bfix_t *f) { (void)f, c->eps = -1e-5; }
static void mut_eps_inf(bcase_t *c, bfix_t *f) { (void)f, c->eps = INFINITY; }
static void mut_weight_shape(bcase_t *c, bfix_t *f) {
  (void)c, f->w.shape[f->w.rank - 1] += 1;
}
static void mut_weight_dtype(bcase_t *c, bfix_t *f) {
  (void)c, f->w.dtype = (norm_dtype_t)7;
}
static void mut_x_null(bcase_t *c, bfix_t *f) { (void)c, f->x.data = NULL; }
static void mut_dx_null(bcase_t *c, bfix_t *f) { (void)c, f->dx.data = NULL; }

/* The forward's argument errors, for every norm: dx of another shape,
 * eps NaN / negative / Inf, weight of another shape or dtype, NULL data,
 * a bad range, NULL params. */
START_TEST(test_err_forward_checks) {
  for (int k = 0; k < NCONFIGS; k++) {
    bcase_t c = config(k);
    c.weight = 1;
    void *saved;
    expect_err(&c, mut_dx_shape, NORM_E_OUTPUT, NULL, 0);
    expect_err(&c, mut_eps_nan, NORM_E_EPS, NULL, 0);
    expect_err(&c, mut_eps_neg, NORM_E_EPS, NULL, 0);
    expect_err(&c, mut_eps_inf, NORM_E_EPS, NULL, 0);
    expect_err(&c, mut_weight_shape, NORM_E_WEIGHT, NULL, 0);
    expect_err(&c, mut_weight_dtype, NORM_E_DTYPE, NULL, 0);
    bfix_t f;
    bfix_init(&f, &c);
    saved = f.x.data;
    mut_x_null(&c, &f);
    EXPECT_RC(bw_call(&f, NULL, NULL, NULL, NULL, 0, 1), NORM_E_NULL);
    f.x.data = saved;
    saved = f.dx.data;
    mut_dx_null(&c, &f);
    EXPECT_RC(bw_call(&f, NULL, NULL, NULL, NULL, 0, 1), NORM_E_NULL);
    f.dx.data = saved;
    EXPECT_RC(bw_call(&f, NULL, NULL, NULL, NULL, 0, f.ngroups + 1),
              NORM_E_RANGE);
    EXPECT_RC(bw_call(&f, NULL, NULL, NULL, NULL, 2, 1), NORM_E_RANGE);
    EXPECT_RC(
        bw_raw(&c, NULL, &f.dy, NULL, NULL, NULL, &f.dx, NULL, NULL, 0, 1),
        NORM_E_NULL);
    EXPECT_RC(bw_raw(&c, &f.x, &f.dy, NULL, opt(&f.rm), opt(&f.rv), NULL, NULL,
                     NULL, 0, 1),
              NORM_E_NULL);
    bfix_free(&f);
  }
  /* NULL params */
  bcase_t c = config(0);
  bfix_t f;
  bfix_init(&f, &c);
  EXPECT_RC(norm_layer_backward_rows(&f.x, &f.dy, NULL, NULL, &f.dx, NULL, NULL,
                                     0, 1),
            NORM_E_NULL);
  EXPECT_RC(
      norm_rms_backward_rows(&f.x, &f.dy, NULL, NULL, &f.dx, NULL, NULL, 0, 1),
      NORM_E_NULL);
  EXPECT_RC(norm_group_backward_rows(&f.x, &f.dy, NULL, NULL, &f.dx, NULL, NULL,
                                     0, 1),
            NORM_E_NULL);
  EXPECT_RC(norm_instance_backward_rows(&f.x, &f.dy, NULL, NULL, &f.dx, NULL,
                                        NULL, 0, 1),
            NORM_E_NULL);
  EXPECT_RC(norm_batch_backward_rows(&f.x, &f.dy, NULL, NULL, NULL, NULL, &f.dx,
                                     NULL, NULL, 0, 1),
            NORM_E_NULL);
  bfix_free(&f);
}
END_TEST

static void mut_ndim0(bcase_t *c, bfix_t *f) { (void)f, c->ndim = 0; }
static void mut_ndim_big(bcase_t *c, bfix_t *f) {
  (void)f, c->ndim = c->rank + 1;
}
static void mut_variance(bcase_t *c, bfix_t *f) {
  (void)f, c->variance = (norm_variance_t)2;
}
static void mut_placement(bcase_t *c, bfix_t *f) {
  (void)f, c->placement = (norm_eps_placement_t)2;
}
static void mut_mode(bcase_t *c, bfix_t *f) {
  (void)f, c->mode = (norm_mode_t)2;
}
static void mut_no_running(bcase_t *c, bfix_t *f) {
  (void)c, f->rm.data = f->rv.data = NULL;
}
static void mut_running_mean_only(bcase_t *c, bfix_t *f) {
  (void)c, f->rv.data = NULL;
}
static void mut_running_shape(bcase_t *c, bfix_t *f) {
  (void)c, f->rv.shape[0] += 1;
}
static void mut_groups_4(bcase_t *c, bfix_t *f) { (void)f, c->G = 4; }
static void mut_groups_0(bcase_t *c, bfix_t *f) { (void)f, c->G = 0; }
static void mut_groups_neg(bcase_t *c, bfix_t *f) { (void)f, c->G = -2; }

/* Each norm's own: layer's normalized_ndim / variance / placement, rms's
 * bias gradient, batch norm's running stats, mode, too few values, rank;
 * group norm's num_groups. */
START_TEST(test_err_own_checks) {
  bcase_t c = config(0);
  expect_err(&c, mut_ndim0, NORM_E_ARG, NULL, 0);
  expect_err(&c, mut_ndim_big, NORM_E_ARG, NULL, 0);
  expect_err(&c, mut_variance, NORM_E_ARG, NULL, 0);
  expect_err(&c, mut_placement, NORM_E_ARG, NULL, 0);
  c = config(16);
  expect_err(&c, mut_ndim0, NORM_E_ARG, NULL, 0);
  expect_err(&c, mut_ndim_big, NORM_E_ARG, NULL, 0);
  { /* rms has no bias: grads->bias is NORM_E_ARG, with or without weight's */
    bfix_t f;
    bfix_init(&f, &c);
    norm_grads_t both = {f.gw, f.gb}, bias = {NULL, f.gb};
    memset(f.gb, 0x3C, f.nw * 8);
    EXPECT_RC(bw_call(&f, NULL, NULL, &both, NULL, 0, f.ngroups), NORM_E_ARG);
    EXPECT_RC(bw_call(&f, NULL, NULL, &bias, NULL, 0, f.ngroups), NORM_E_ARG);
    EXPECT_RC(bw_raw(&c, &f.x, &f.dy, NULL, NULL, NULL, &f.dx, &bias, NULL, 0,
                     f.ngroups),
              NORM_E_ARG);
    ck_assert(tu_bytes_are(f.gw, f.nw * 8, 0) &&
              tu_bytes_are(f.gb, f.nw * 8, 0x3C));
    bfix_free(&f);
  }
  c = bcase(K_BATCH, 3, SHAPE(4, 3, 5));
  c.mode = NORM_EVAL;
  expect_err(&c, mut_no_running, NORM_E_RUNNING, NULL, 0);
  expect_err(&c, mut_running_mean_only, NORM_E_RUNNING, NULL, 0);
  expect_err(&c, mut_running_shape, NORM_E_RUNNING, NULL, 0);
  expect_err(&c, mut_mode, NORM_E_ARG, NULL, 0);
  c.mode = NORM_TRAIN;
  c.running = 1;
  expect_err(&c, mut_running_mean_only, NORM_E_RUNNING, NULL, 0);
  expect_err(&c, mut_running_shape, NORM_E_RUNNING, NULL, 0);
  { /* momentum, cumulative without a count, too few values, rank 1 */
    bfix_t f;
    bfix_init(&f, &c);
    norm_batch_params_t p = batch_params(&c);
    p.momentum = 1.5;
    EXPECT_RC(norm_batch_backward_rows(&f.x, &f.dy, NULL, NULL, NULL, &p, &f.dx,
                                       NULL, NULL, 0, 3),
              NORM_E_MOMENTUM);
    p.momentum = 0.1, p.cumulative = 1, p.num_batches_tracked = 0;
    EXPECT_RC(norm_batch_backward_rows(&f.x, &f.dy, NULL, &f.rm, &f.rv, &p,
                                       &f.dx, NULL, NULL, 0, 3),
              NORM_E_ARG);
    bfix_free(&f);
    norm_tensor_t x1 = tu_tensor(NORM_F32, 1, (int64_t)5);
    norm_tensor_t d1 = tu_tensor(NORM_F32, 1, (int64_t)5);
    p = batch_params(&c);
    EXPECT_RC(norm_batch_backward_rows(&x1, &x1, NULL, NULL, NULL, &p, &d1,
                                       NULL, NULL, 0, 1),
              NORM_E_CHANNELS);
    norm_group_params_t gp = {1, 1e-5};
    EXPECT_RC(
        norm_group_backward_rows(&x1, &x1, NULL, &gp, &d1, NULL, NULL, 0, 1),
        NORM_E_CHANNELS);
    norm_instance_params_t ip = {1e-5};
    EXPECT_RC(
        norm_instance_backward_rows(&x1, &x1, NULL, &ip, &d1, NULL, NULL, 0, 1),
        NORM_E_CHANNELS);
    tu_tensor_free(&x1), tu_tensor_free(&d1);
  }
  c = bcase(K_BATCH, 3, SHAPE(1, 3, 1));
  expect_err(&c, NULL, NORM_E_TOO_FEW, NULL, 0);
  c = bcase(K_GROUP, 3, SHAPE(2, 6, 5));
  c.G = 2;
  expect_err(&c, mut_groups_4, NORM_E_GROUPS, NULL, 0);
  expect_err(&c, mut_groups_0, NORM_E_GROUPS, NULL, 0);
  expect_err(&c, mut_groups_neg, NORM_E_GROUPS, NULL, 0);
}
END_TEST

Suite *norm_backward_suite(void) {
  Suite *s = suite_create("norm_backward");
  TCase *tc = tcase_create("Core");
  tcase_add_loop_test(tc, test_reference_all_dtypes, 0, NCONFIGS);
  tcase_add_test(tc, test_reference_long_groups);
  tcase_add_loop_test(tc, test_finite_differences, 0, K_COUNT);
  tcase_set_timeout(tc, 60);
  suite_add_tcase(s, tc);

  tc = tcase_create("Cruel");
  tcase_add_test(tc, test_large_mean);
  tcase_add_loop_test(tc, test_constant_groups, 0, 4);
  tcase_add_test(tc, test_eval_zero_running_var);
  tcase_add_test(tc, test_single_element_groups);
  tcase_add_test(tc, test_subnormal_inputs);
  tcase_add_test(tc, test_non_finite);
  tcase_add_test(tc, test_huge_groups);
  tcase_add_test(tc, test_streamed_rows_as_single_rows);
#if defined(__x86_64__) || defined(__i386__)
  tcase_add_test(tc, test_no_subnormals);
#endif
  tcase_set_timeout(tc, 60);
  suite_add_tcase(s, tc);

  tc = tcase_create("Contract");
  tcase_add_loop_test(tc, test_grads_accumulate, 0, NCONFIGS);
  tcase_add_loop_test(tc, test_ranges, 0, NCONFIGS);
  tcase_add_test(tc, test_dx_aliases_dy);
  tcase_add_test(tc, test_stats_and_running);
  suite_add_tcase(s, tc);

  tc = tcase_create("Limits");
  tcase_add_test(tc, test_limits);
  suite_add_tcase(s, tc);

  tc = tcase_create("Errors");
  tcase_add_test(tc, test_err_grad_output);
  tcase_add_test(tc, test_err_forward_checks);
  tcase_add_test(tc, test_err_own_checks);
  suite_add_tcase(s, tc);
  return s;
}
