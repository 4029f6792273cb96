/* testutil.h -- small helpers shared by the unit tests: guarded buffers that
 * catch writes past an output, tensor builders, a seeded RNG, tolerant
 * comparisons, the row norms' output checks and shared shapes, and for the
 * (N, C, *) norms the naive double reference, a fixture, split and poison
 * checks, and the cases and case runners their suites share.
 * Header-only (static functions) so each check_*.c stays self-contained. */
#ifndef TESTS_TESTUTIL_H
#define TESTS_TESTUTIL_H

#include <check.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "norm.h"

/* A shape literal: SHAPE(2, 3, 4). */
#define SHAPE(...) ((const int64_t[]){__VA_ARGS__})
/* A call returns `want`; the message names both codes. */
#define EXPECT_RC(call, want)                                                  \
  do {                                                                         \
    int rc_ = (call), want_ = (want);                                          \
    ck_assert_msg(rc_ == want_, "%s: got %d (%s), want %d (%s)", #call, rc_,   \
                  norm_err_name(rc_), want_, norm_err_name(want_));            \
  } while (0)

#define TU_GUARD_BYTES 64
#define TU_GUARD_BYTE 0xA5

/* A buffer of n bytes followed by TU_GUARD_BYTES of a known pattern. Free
 * with tu_free_guarded(), which fails the test if the guard was touched. */
static inline void *tu_alloc_guarded(size_t n) {
  unsigned char *p = malloc(n + TU_GUARD_BYTES);
  ck_assert_ptr_nonnull(p);
  memset(p, 0, n);
  memset(p + n, TU_GUARD_BYTE, TU_GUARD_BYTES);
  return p;
}

static inline int tu_guard_intact(const void *buf, size_t n) {
  const unsigned char *p = (const unsigned char *)buf + n;
  for (size_t i = 0; i < TU_GUARD_BYTES; i++)
    if (p[i] != TU_GUARD_BYTE) return 0;
  return 1;
}

static inline void tu_free_guarded(void *buf, size_t n) {
  ck_assert_msg(tu_guard_intact(buf, n), "write past the end of a buffer");
  free(buf);
}

/* A tensor of the given dtype and shape with a guarded, zeroed buffer.
 * Free with tu_tensor_free(). */
static inline norm_tensor_t tu_tensor(norm_dtype_t dtype, int rank, ...) {
  norm_tensor_t t;
  memset(&t, 0, sizeof t);
  t.dtype = dtype;
  t.rank = rank;
  va_list ap;
  va_start(ap, rank);
  size_t n = 1;
  for (int i = 0; i < rank; i++) {
    t.shape[i] = va_arg(ap, int64_t);
    n *= (size_t)t.shape[i];
  }
  va_end(ap);
  t.data = tu_alloc_guarded(n * norm_dtype_size(dtype));
  return t;
}

static inline size_t tu_numel(const norm_tensor_t *t) {
  size_t n = 1;
  for (int i = 0; i < t->rank; i++) n *= (size_t)t->shape[i];
  return n;
}

static inline void tu_tensor_free(norm_tensor_t *t) {
  tu_free_guarded(t->data, tu_numel(t) * norm_dtype_size(t->dtype));
  t->data = NULL;
}

/* tu_tensor() with the shape from an array. */
static inline norm_tensor_t tu_mk(norm_dtype_t dtype, int rank,
                                  const int64_t *shape) {
  norm_tensor_t t;
  memset(&t, 0, sizeof t);
  t.dtype = dtype;
  t.rank = rank;
  size_t n = 1;
  for (int i = 0; i < rank; i++) n *= (size_t)(t.shape[i] = shape[i]);
  t.data = tu_alloc_guarded(n * norm_dtype_size(dtype));
  return t;
}

static inline size_t tu_nbytes(const norm_tensor_t *t) {
  return tu_numel(t) * norm_dtype_size(t->dtype);
}

/* A guarded copy of src (shape, dtype and data). */
static inline norm_tensor_t tu_mk_copy(const norm_tensor_t *src) {
  norm_tensor_t t = tu_mk(src->dtype, src->rank, src->shape);
  memcpy(t.data, src->data, tu_nbytes(src));
  return t;
}

/* t's elements as a malloc'ed array of doubles (the caller frees it). */
static inline double *tu_to_doubles(const norm_tensor_t *t) {
  size_t n = tu_numel(t);
  double *d = malloc(n * sizeof *d);
  ck_assert_ptr_nonnull(d);
  for (size_t i = 0; i < n; i++) d[i] = norm_tensor_get(t, i);
  return d;
}

/* Guarded array of n doubles for statistics. */
static inline double *tu_doubles(size_t n) {
  return tu_alloc_guarded(n * sizeof(double));
}
static inline void tu_doubles_free(double *p, size_t n) {
  tu_free_guarded(p, n * sizeof(double));
}

/* splitmix64: deterministic, seedable, good enough for test data. */
static inline uint64_t tu_rand_u64(uint64_t *state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
/* Uniform in [0, 1). */
static inline double tu_rand_unit(uint64_t *state) {
  return (double)(tu_rand_u64(state) >> 11) * (1.0 / 9007199254740992.0);
}
/* Uniform in [lo, hi). */
static inline double tu_rand_range(uint64_t *state, double lo, double hi) {
  return lo + (hi - lo) * tu_rand_unit(state);
}

/* Fills t with uniform values in [lo, hi) (rounded to t's dtype). */
static inline void tu_fill_uniform(norm_tensor_t *t, uint64_t seed, double lo,
                                   double hi) {
  size_t n = tu_numel(t);
  for (size_t i = 0; i < n; i++)
    norm_tensor_set(t, i, tu_rand_range(&seed, lo, hi));
}

/* |got - want| <= tol * max(1, |want|), with NaN == NaN and equal infinities. */
static inline int tu_close(double got, double want, double tol) {
  if (got != got || want != want) return got != got && want != want;
  if (got == want) return 1;
  double scale = want < 0 ? -want : want;
  if (scale < 1) scale = 1;
  double d = got - want;
  if (d < 0) d = -d;
  return d <= tol * scale;
}
/* Sign-magnitude 16-bit pattern to a monotone integer (ulp distances). */
static inline int tu_ord16(uint16_t h) {
  return (h & 0x8000) ? -(int)(h & 0x7fff) : (int)h;
}

/* Output element i of y against the double reference: float32 within
 * tu_close(tol), float64 within tu_close(tol64), float16/bfloat16 within 1
 * ulp of the reference rounded to the format (or within 1e-6, for results
 * so close to 0 that the format's ulp is finer than float arithmetic).
 * A NaN reference wants a NaN. */
static inline int tu_out_close(const norm_tensor_t *y, size_t i, double ref,
                               double tol, double tol64) {
  double got = norm_tensor_get(y, i);
  if (isnan(ref)) return isnan(got);
  switch (y->dtype) {
  case NORM_F32: return tu_close(got, ref, tol);
  case NORM_F64: return tu_close(got, ref, tol64);
  case NORM_F16:
  case NORM_BF16: {
    uint16_t g = ((const uint16_t *)y->data)[i];
    uint16_t w = y->dtype == NORM_F16 ? norm_f16_from_float((float)ref)
                                      : norm_bf16_from_float((float)ref);
    if (isnan(got)) return 0;
    return abs(tu_ord16(g) - tu_ord16(w)) <= 1 || tu_close(got, ref, 1e-6);
  }
  default: return 0;
  }
}

/* Every element of y against ref[], as tu_out_close. One assertion for
 * the whole tensor (Check records each passing assertion, which for 1e6
 * elements would take seconds); the first mismatch is reported. */
static inline void tu_check_output(const char *what, const norm_tensor_t *y,
                                   const double *ref, double tol,
                                   double tol64) {
  size_t n = tu_numel(y), i = 0;
  while (i < n && tu_out_close(y, i, ref[i], tol, tol64)) i++;
  ck_assert_msg(i == n, "%s[%zu] (%s): got %.17g want %.17g", what, i,
                norm_dtype_name(y->dtype), i < n ? norm_tensor_get(y, i) : 0.0,
                i < n ? ref[i] : 0.0);
}

/* |got - want| <= tol * |want| + slack; a NaN reference wants NaN. */
static inline int tu_rel_close_slack(double got, double want, double tol,
                                     double slack) {
  if (isnan(want)) return isnan(got);
  if (got == want) return 1;
  return fabs(got - want) <= tol * fabs(want) + slack;
}

/* Relative closeness for double statistics; a NaN reference wants NaN. */
static inline int tu_rel_close(double got, double want, double tol) {
  return tu_rel_close_slack(got, want, tol, 1e-300);
}

/* Variance against the naive reference, whose own mean carries a rounding
 * error of ~1e-16 * |mean|: that adds up to ~(1e-16 * mean)^2 to its var. */
static inline int tu_var_close(double got, double want, double mean,
                               double tol) {
  return tu_rel_close(got, want, tol) ||
         fabs(got - want) <= 1e-28 * mean * mean;
}

/* A kernel's per-group statistics against the reference's: mean and rstd
 * within tu_rel_close(tol), var within tu_var_close(tol). */
static inline void tu_check_stats(const norm_stats_t *got, const double *mean,
                                  const double *var, const double *rstd,
                                  size_t n, double tol) {
  size_t g = 0;
  while (g < n && tu_rel_close(got->mean[g], mean[g], tol) &&
         tu_var_close(got->var[g], var[g], mean[g], tol) &&
         tu_rel_close(got->rstd[g], rstd[g], tol))
    g++;
  if (g < n)
    ck_abort_msg("stats[%zu]: got %.17g %.17g %.17g want %.17g %.17g %.17g", g,
                 got->mean[g], got->var[g], got->rstd[g], mean[g], var[g],
                 rstd[g]);
}

/* ---- the row norms' helpers (layer, rms) ----------------------------------
 * A row is the last `ndim` dims of x. For the half formats these checks
 * differ from tu_check_output: the reference is rounded straight from
 * double to the format, and no absolute 1e-6 is allowed near 0. */

/* In a case table: no tensor of this kind (no weight, no bias). */
#define TU_NO_DTYPE ((norm_dtype_t)-1)

/* Elements in one row: the product of x's last ndim dims. */
static inline size_t tu_row_len(const norm_tensor_t *x, int ndim) {
  size_t n = 1;
  for (int i = x->rank - ndim; i < x->rank; i++) n *= (size_t)x->shape[i];
  return n;
}

/* Every one of the n bytes at p is v. */
static inline int tu_bytes_are(const void *p, size_t n, unsigned char v) {
  for (size_t i = 0; i < n; i++)
    if (((const unsigned char *)p)[i] != v) return 0;
  return 1;
}

/* v rounded to nearest-even in float16 / bfloat16 (finite range only). */
static inline double tu_round_half(double v, norm_dtype_t dtype) {
  if (!isfinite(v) || v == 0) return v;
  int mant = dtype == NORM_F16 ? 10 : 7, emin = dtype == NORM_F16 ? -14 : -126;
  int e;
  frexp(v, &e);
  e = e - 1 < emin ? emin : e - 1;
  double q = ldexp(1.0, e - mant);
  return nearbyint(v / q) * q;
}

/* Half-format element i of y within 1 ulp of want rounded to the format;
 * NaN matches NaN only. */
static inline int tu_half_close(const norm_tensor_t *y, size_t i, double want) {
  double got = norm_tensor_get(y, i);
  if (isnan(got) || isnan(want)) return isnan(got) && isnan(want);
  double r = tu_round_half(want, y->dtype);
  uint16_t rb = y->dtype == NORM_F16 ? norm_f16_from_float((float)r)
                                     : norm_bf16_from_float((float)r);
  int d = tu_ord16(((const uint16_t *)y->data)[i]) - tu_ord16(rb);
  return d >= -1 && d <= 1;
}

/* Every element of y against want[]: float16 / bfloat16 as tu_half_close,
 * float32 / float64 within tu_close(tol). The first mismatch fails. */
static inline void tu_expect_tensor(const norm_tensor_t *y, const double *want,
                                    double tol) {
  size_t n = tu_numel(y);
  int half = y->dtype == NORM_F16 || y->dtype == NORM_BF16;
  for (size_t i = 0; i < n; i++) {
    double got = norm_tensor_get(y, i);
    int ok = half ? tu_half_close(y, i, want[i]) : tu_close(got, want[i], tol);
    if (!ok) /* ck_assert per element would cost a syscall each */
      ck_abort_msg("y[%zu] = %.17g, want %.17g (%s)", i, got, want[i],
                   norm_dtype_name(y->dtype));
  }
}

/* n statistics against want[]: with `rel`, |got - want| <= tol * |want|
 * (tu_rel_close_slack, no slack), else tu_close(tol). The first mismatch
 * fails, named `what`. */
static inline void tu_expect_doubles(const char *what, const double *got,
                                     const double *want, size_t n, double tol,
                                     int rel) {
  for (size_t i = 0; i < n; i++) {
    int ok = rel ? tu_rel_close_slack(got[i], want[i], tol, 0)
                 : tu_close(got[i], want[i], tol);
    if (!ok)
      ck_abort_msg("%s[%zu] = %.17g, want %.17g", what, i, got[i], want[i]);
  }
}

/* A row norm's case on x of dtype dt and `shape` (rank dims), normalized
 * over its last ndim dims; each suite builds the rest. */
typedef void (*tu_row_case_fn)(norm_dtype_t dt, int rank, const int64_t *shape,
                               int ndim);

/* The extreme ranks: float32 (300) over its one dim, and float64 of rank
 * 8 (2 x 3 x 2 x 3 x 2 x 3 x 2 x 3) over each ndim from 1 to 8. */
static inline void tu_row_ranks(tu_row_case_fn run) {
  run(NORM_F32, 1, SHAPE(300), 1);
  int64_t s8[8];
  for (int i = 0; i < 8; i++) s8[i] = 2 + i % 2;
  for (int nd = 1; nd <= 8; nd++) run(NORM_F64, 8, s8, nd);
}

/* The shapes the row norms' range splits run on, in dtype dt: (7, 300),
 * (3, 4, 5) over its last dim and its last two, and (41). */
static inline void tu_row_splits(norm_dtype_t dt, tu_row_case_fn split) {
  split(dt, 2, SHAPE(7, 300), 1);
  split(dt, 3, SHAPE(3, 4, 5), 1);
  split(dt, 3, SHAPE(3, 4, 5), 2);
  split(dt, 1, SHAPE(41), 1);
}

/* A suite's check that its call (on the fixture ctx) fails with `want`. */
typedef void (*tu_expect_fn)(void *ctx, int want);

/* x and y of a valid (2, 3, 4) call take shapes whose element count, or
 * byte size, overflows: expect(ctx, NORM_E_OVERFLOW) for each; then they
 * are (2, 3, 4) again. */
static inline void tu_expect_overflow_shapes(norm_tensor_t *x, norm_tensor_t *y,
                                             tu_expect_fn expect, void *ctx) {
  const int64_t big[][3] = {{INT64_MAX, 2, 4},
                            {(int64_t)1 << 31, (int64_t)1 << 31, 4},
                            {(int64_t)1 << 30, (int64_t)1 << 30, 4}};
  for (int k = 0; k < 3; k++) {
    memcpy(x->shape, big[k], sizeof big[k]);
    memcpy(y->shape, big[k], sizeof big[k]);
    expect(ctx, NORM_E_OVERFLOW);
  }
  const int64_t good[] = {2, 3, 4};
  memcpy(x->shape, good, sizeof good);
  memcpy(y->shape, good, sizeof good);
}

/* ---- the (N, C, *) norms' reference ---------------------------------------
 * x is (N, C, S) row-major (S = product of the spatial dims). Channel c of
 * sample n belongs to group n * G + c / (C / G); with `pooled`, to group
 * c / (C / G) of all samples together. Batch norm is G = C pooled, group
 * norm G, instance norm G = C. */
typedef struct {
  size_t N, C, S, G;
  int pooled;
} tu_nc_t;

static inline size_t tu_nc_groups(const tu_nc_t *l) {
  return l->pooled ? l->G : l->N * l->G;
}

/* The naive two-pass double reference: per group, mean = sum(x) / count,
 * var = sum((x - mean)^2) / count (biased), rstd = 1 / sqrt(var + eps);
 * then y = (x - mean) * rstd * w_c + b_c (w and b per channel, each may be
 * NULL). given_mean / given_var (batch norm's eval mode), when not NULL,
 * replace the statistics of x. mean, var and rstd hold tu_nc_groups()
 * entries; y holds N * C * S. Sums run in element order. */
static inline void tu_ref_nc(const double *x, const tu_nc_t *l,
                             const double *w, const double *b, double eps,
                             const double *given_mean,
                             const double *given_var, double *y, double *mean,
                             double *var, double *rstd) {
  size_t ng = tu_nc_groups(l), per = l->C / l->G;
  double count = (double)((l->pooled ? l->N : 1) * per * l->S);
#define TU_NC_GROUP_(n, c) ((l->pooled ? 0 : (n) * l->G) + (c) / per)
  for (size_t g = 0; g < ng; g++) {
    mean[g] = given_mean ? given_mean[g] : 0.0;
    var[g] = given_var ? given_var[g] : 0.0;
  }
  if (given_mean == NULL) {
    for (size_t n = 0; n < l->N; n++)
      for (size_t c = 0; c < l->C; c++) {
        const double *xs = x + (n * l->C + c) * l->S;
        double *s = &mean[TU_NC_GROUP_(n, c)];
        for (size_t k = 0; k < l->S; k++) *s += xs[k];
      }
    for (size_t g = 0; g < ng; g++) mean[g] /= count;
    for (size_t n = 0; n < l->N; n++)
      for (size_t c = 0; c < l->C; c++) {
        const double *xs = x + (n * l->C + c) * l->S;
        size_t g = TU_NC_GROUP_(n, c);
        for (size_t k = 0; k < l->S; k++) {
          double d = xs[k] - mean[g];
          var[g] += d * d;
        }
      }
    for (size_t g = 0; g < ng; g++) var[g] /= count;
  }
  for (size_t g = 0; g < ng; g++) rstd[g] = 1.0 / sqrt(var[g] + eps);
  for (size_t n = 0; n < l->N; n++)
    for (size_t c = 0; c < l->C; c++) {
      size_t g = TU_NC_GROUP_(n, c), at = (n * l->C + c) * l->S;
      for (size_t k = 0; k < l->S; k++)
        y[at + k] = (x[at + k] - mean[g]) * rstd[g] * (w ? w[c] : 1.0) +
                    (b ? b[c] : 0.0);
    }
#undef TU_NC_GROUP_
}

/* The group of element i of x (n, c, k), as tu_ref_nc counts them. */
static inline size_t tu_nc_group_of(const tu_nc_t *l, size_t i) {
  size_t c = i / l->S % l->C, g = c / (l->C / l->G);
  return l->pooled ? g : i / (l->C * l->S) * l->G + g;
}

/* ---- the (N, C, *) norms' fixture -----------------------------------------
 * The buffers of one call: guarded x and y of the case's shape, per-channel
 * w and b (tu_ncfix_affine), batch norm's running stats rm and rv (the test
 * allocates them), guarded mean / var / rstd of `ngroups` entries, and the
 * layout l of x for tu_ref_nc. Tensors not allocated have NULL data. */
typedef struct {
  norm_tensor_t x, y, w, b, rm, rv;
  double *mean, *var, *rstd;
  tu_nc_t l;
  size_t numel, ngroups;
} tu_ncfix_t;

/* x (zeroed) and y of `shape`, with G groups per sample (pooled: over all
 * samples, as batch norm's channels). Free with tu_ncfix_free(). */
static inline void tu_ncfix_init(tu_ncfix_t *f, norm_dtype_t xt,
                                 norm_dtype_t yt, int rank,
                                 const int64_t *shape, size_t G, int pooled) {
  memset(f, 0, sizeof *f);
  f->x = tu_mk(xt, rank, shape);
  f->y = tu_mk(yt, rank, shape);
  size_t S = 1;
  for (int i = 2; i < rank; i++) S *= (size_t)shape[i];
  f->l = (tu_nc_t){(size_t)shape[0], (size_t)shape[1], S, G, pooled};
  f->numel = f->l.N * f->l.C * S;
  f->ngroups = tu_nc_groups(&f->l);
  f->mean = tu_doubles(f->ngroups);
  f->var = tu_doubles(f->ngroups);
  f->rstd = tu_doubles(f->ngroups);
}

/* Per-channel w uniform in [wlo, whi) from seed + 1, b in [-1, 1) from
 * seed + 2, both of dtype wt. */
static inline void tu_ncfix_affine(tu_ncfix_t *f, norm_dtype_t wt,
                                   uint64_t seed, double wlo, double whi) {
  const int64_t C[1] = {(int64_t)f->l.C};
  f->w = tu_mk(wt, 1, C);
  f->b = tu_mk(wt, 1, C);
  tu_fill_uniform(&f->w, seed + 1, wlo, whi);
  tu_fill_uniform(&f->b, seed + 2, -1, 1);
}

static inline void tu_ncfix_free(tu_ncfix_t *f) {
  norm_tensor_t *ts[] = {&f->x, &f->y, &f->w, &f->b, &f->rm, &f->rv};
  for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
    if (ts[i]->data) tu_tensor_free(ts[i]);
  tu_doubles_free(f->mean, f->ngroups);
  tu_doubles_free(f->var, f->ngroups);
  tu_doubles_free(f->rstd, f->ngroups);
}

/* f's y and stats, as the kernel wrote them, against tu_ref_nc on f's x, w
 * and b (those allocated), eps and given_mean / given_var: y within
 * tu_check_output(tol, tol64), stats within tu_check_stats(1e-10). The
 * reference mean and var are copied to ref_mean / ref_var when not NULL. */
static inline void tu_ncfix_check(const tu_ncfix_t *f, double eps,
                                  const double *given_mean,
                                  const double *given_var, double tol,
                                  double tol64, double *ref_mean,
                                  double *ref_var) {
  size_t ng = f->ngroups;
  double *x = tu_to_doubles(&f->x);
  double *w = f->w.data ? tu_to_doubles(&f->w) : NULL;
  double *b = f->b.data ? tu_to_doubles(&f->b) : NULL;
  double *y = malloc(f->numel * sizeof *y), *m = malloc(ng * sizeof *m),
         *v = malloc(ng * sizeof *v), *r = malloc(ng * sizeof *r);
  ck_assert(y && m && v && r);
  tu_ref_nc(x, &f->l, w, b, eps, given_mean, given_var, y, m, v, r);
  tu_check_output("y", &f->y, y, tol, tol64);
  norm_stats_t st = {f->mean, f->var, f->rstd, NULL};
  tu_check_stats(&st, m, v, r, ng, 1e-10);
  if (ref_mean) memcpy(ref_mean, m, ng * sizeof *m);
  if (ref_var) memcpy(ref_var, v, ng * sizeof *v);
  free(x), free(w), free(b), free(y), free(m), free(v), free(r);
}

/* A kernel's _rows entry point on groups [lo, hi) with stats arrays st,
 * writing the output its ctx holds; returns the norm code. */
typedef int (*tu_rows_fn)(void *ctx, norm_stats_t *st, size_t lo, size_t hi);

/* Splits l's groups at cuts[0] = 0 < ... < cuts[ncuts - 1] and runs each
 * range through rows(ctx, ...), last range first, into y, which first
 * becomes 0x5A bytes. A call gets stats arrays of exactly hi entries, preset
 * to -12345; it must leave y outside its groups and the stats below lo
 * alone, and its stats for [lo, hi) must equal `whole`'s bit for bit. At
 * the end y must equal whole_y bit for bit. */
static inline void tu_check_split(const tu_nc_t *l, tu_rows_fn rows, void *ctx,
                                  norm_tensor_t *y,
                                  const norm_tensor_t *whole_y,
                                  const norm_stats_t *whole, const size_t *cuts,
                                  size_t ncuts) {
  size_t ng = tu_nc_groups(l), numel = l->N * l->C * l->S;
  size_t ybytes = tu_nbytes(y), es = norm_dtype_size(y->dtype);
  memset(y->data, 0x5A, ybytes);
  for (size_t k = ncuts; k-- > 0;) {
    size_t lo = cuts[k], hi = k + 1 < ncuts ? cuts[k + 1] : ng;
    double *m = tu_doubles(hi), *v = tu_doubles(hi), *r = tu_doubles(hi);
    for (size_t g = 0; g < hi; g++) m[g] = v[g] = r[g] = -12345.0;
    norm_stats_t sp = {m, v, r, NULL};
    unsigned char *before = malloc(ybytes);
    ck_assert_ptr_nonnull(before);
    memcpy(before, y->data, ybytes);
    EXPECT_RC(rows(ctx, &sp, lo, hi), NORM_OK);
    for (size_t i = 0; i < numel; i++) {
      size_t g = tu_nc_group_of(l, i);
      if (g < lo || g >= hi)
        ck_assert_msg(memcmp((const unsigned char *)y->data + i * es,
                             before + i * es, es) == 0,
                      "range [%zu,%zu) wrote y[%zu] of group %zu", lo, hi, i,
                      g);
    }
    for (size_t g = lo; g < hi; g++)
      ck_assert_msg(memcmp(&m[g], &whole->mean[g], sizeof(double)) == 0 &&
                        memcmp(&v[g], &whole->var[g], sizeof(double)) == 0 &&
                        memcmp(&r[g], &whole->rstd[g], sizeof(double)) == 0,
                    "stats of group %zu differ from the whole call", g);
    for (size_t g = 0; g < lo; g++)
      ck_assert_msg(m[g] == -12345.0 && v[g] == -12345.0 && r[g] == -12345.0,
                    "range [%zu,%zu) wrote stats[%zu]", lo, hi, g);
    free(before);
    tu_doubles_free(m, hi);
    tu_doubles_free(v, hi);
    tu_doubles_free(r, hi);
  }
  ck_assert_msg(memcmp(y->data, whole_y->data, ybytes) == 0,
                "split y differs from the whole call");
}

/* x (laid out as l) holds a NaN or an Inf at element `at`; y and st are
 * the kernel's output on it without weight or bias. The poisoned group is
 * non-finite in y, mean and rstd; every other group matches tu_ref_nc:
 * y within tu_close(1e-6), mean and var within tu_rel_close(1e-10). */
static inline void tu_check_poisoned(const tu_nc_t *l, const norm_tensor_t *x,
                                     size_t at, double eps,
                                     const norm_tensor_t *y,
                                     const norm_stats_t *st) {
  size_t ng = tu_nc_groups(l), n = l->N * l->C * l->S;
  size_t bad = tu_nc_group_of(l, at);
  double *xd = tu_to_doubles(x), *ref = malloc(n * sizeof *ref),
         *m = malloc(ng * sizeof *m), *v = malloc(ng * sizeof *v),
         *r = malloc(ng * sizeof *r);
  ck_assert(ref && m && v && r);
  tu_ref_nc(xd, l, NULL, NULL, eps, NULL, NULL, ref, m, v, r);
  for (size_t i = 0; i < n; i++) {
    double got = norm_tensor_get(y, i);
    if (tu_nc_group_of(l, i) == bad)
      ck_assert_msg(!isfinite(got), "y[%zu] = %g in the poisoned group", i,
                    got);
    else
      ck_assert_msg(tu_close(got, ref[i], 1e-6), "y[%zu] = %g want %g", i, got,
                    ref[i]);
  }
  for (size_t g = 0; g < ng; g++) {
    if (g == bad)
      ck_assert(!isfinite(st->mean[g]) && !isfinite(st->rstd[g]));
    else
      ck_assert(tu_rel_close(st->mean[g], m[g], 1e-10) &&
                tu_rel_close(st->var[g], v[g], 1e-10));
  }
  free(xd), free(ref), free(m), free(v), free(r);
}

/* ---- the (N, C, *) norms' cases -------------------------------------------
 * What a batch, group or instance norm case names: the dtypes, x's shape,
 * the statistics groups, affine or not, eps, and x's data. Group and
 * instance norm use it as it is; batch norm's case starts with one (nc, its
 * first member, so the sequences below hand it back). */
typedef struct {
  norm_dtype_t xt, yt, wt; /* x, y, and per-channel weight and bias */
  int rank;
  int64_t shape[5];
  int64_t groups;     /* per sample (group norm); 0: one per channel */
  int affine;         /* with weight and bias */
  double eps, lo, hi; /* x uniform in [lo, hi) from seed */
  uint64_t seed;
  double tol64; /* float64 outputs, tu_check_output's tol64 */
} tu_nccase_t;

/* xt = yt = wt = dt, the given shape, affine, eps 1e-5, tol64 1e-12; x
 * uniform in [lo, hi) from seed; groups 0. */
static inline tu_nccase_t tu_nccase(norm_dtype_t dt, int rank,
                                    const int64_t *shape, double lo, double hi,
                                    uint64_t seed) {
  tu_nccase_t c;
  memset(&c, 0, sizeof c);
  c.xt = c.yt = c.wt = dt;
  c.rank = rank;
  for (int i = 0; i < rank; i++) c.shape[i] = shape[i];
  c.affine = 1;
  c.eps = 1e-5;
  c.lo = lo;
  c.hi = hi;
  c.seed = seed;
  c.tol64 = 1e-12;
  return c;
}

/* A group or instance norm for the runners below. `call` runs it on f's x
 * and y, with f's w and b when c->affine, and stats st: the whole tensor,
 * or with `rows` norm_*_rows on [lo, hi); it returns the norm's code.
 * `groups` is its norm_*_groups(x). */
typedef struct {
  int (*call)(const tu_nccase_t *c, tu_ncfix_t *f, norm_stats_t *st, int rows,
              size_t lo, size_t hi);
  int64_t (*groups)(const tu_nccase_t *c, const norm_tensor_t *x);
} tu_ncnorm_t;

/* c's fixture, not pooled: x uniform as c says, and when c->affine w in
 * [-2, 2) and b (tu_ncfix_affine). Free with tu_ncfix_free(). */
static inline void tu_nccase_fix(tu_ncfix_t *f, const tu_nccase_t *c) {
  size_t G = c->groups ? (size_t)c->groups : (size_t)c->shape[1];
  tu_ncfix_init(f, c->xt, c->yt, c->rank, c->shape, G, 0);
  tu_fill_uniform(&f->x, c->seed, c->lo, c->hi);
  if (c->affine) tu_ncfix_affine(f, c->wt, c->seed, -2, 2);
}

/* Runs the norm on c's fixture (x changed by `prep` first, when given):
 * y and stats against the reference (tu_ncfix_check at 1e-6 and c->tol64),
 * and its _groups count is the fixture's. */
static inline void tu_nccase_run(const tu_ncnorm_t *norm, const tu_nccase_t *c,
                                 void (*prep)(norm_tensor_t *)) {
  tu_ncfix_t f;
  tu_nccase_fix(&f, c);
  if (prep) prep(&f.x);
  norm_stats_t st = {f.mean, f.var, f.rstd, NULL};
  EXPECT_RC(norm->call(c, &f, &st, 0, 0, 0), NORM_OK);
  ck_assert_int_eq(norm->groups(c, &f.x), (int64_t)f.ngroups);
  tu_ncfix_check(&f, c->eps, NULL, NULL, 1e-6, c->tol64, NULL, NULL);
  tu_ncfix_free(&f);
}

/* One range of tu_nccase_split: the norm's _rows into part's y. */
typedef struct {
  const tu_ncnorm_t *norm;
  const tu_nccase_t *c;
  tu_ncfix_t *part;
} tu_ncsplit_t;

static inline int tu_ncsplit_rows(void *ctx, norm_stats_t *st, size_t lo,
                                  size_t hi) {
  tu_ncsplit_t *r = ctx;
  return r->norm->call(r->c, r->part, st, 1, lo, hi);
}

/* Splits of the groups at 0, 1, half and the last give bit-identical y and
 * stats to the whole call (tu_check_split). */
static inline void tu_nccase_split(const tu_ncnorm_t *norm,
                                   const tu_nccase_t *c) {
  tu_ncfix_t whole, part;
  tu_nccase_fix(&whole, c);
  tu_nccase_fix(&part, c);
  norm_stats_t st = {whole.mean, whole.var, whole.rstd, NULL};
  EXPECT_RC(norm->call(c, &whole, &st, 0, 0, 0), NORM_OK);
  size_t ng = whole.ngroups, cuts[4] = {0, 1, ng / 2, ng - 1};
  tu_ncsplit_t r = {norm, c, &part};
  tu_check_split(&whole.l, tu_ncsplit_rows, &r, &part.y, &whole.y, &st, cuts,
                 4);
  tu_ncfix_free(&whole);
  tu_ncfix_free(&part);
}

/* x of c (rank 3, (N, C, S)) with `bad` at element `at`: the norm runs on
 * it without weight or bias (c->affine 0), and only the poisoned group is
 * non-finite (tu_check_poisoned). */
static inline void tu_nccase_poisoned(const tu_ncnorm_t *norm,
                                      const tu_nccase_t *c, size_t at,
                                      double bad) {
  tu_ncfix_t f;
  memset(&f, 0, sizeof f);
  f.x = tu_mk(c->xt, c->rank, c->shape);
  f.y = tu_mk(c->yt, c->rank, c->shape);
  tu_fill_uniform(&f.x, c->seed, c->lo, c->hi);
  norm_tensor_set(&f.x, at, bad);
  tu_nc_t l = {(size_t)c->shape[0], (size_t)c->shape[1], (size_t)c->shape[2],
               c->groups ? (size_t)c->groups : (size_t)c->shape[1], 0};
  size_t ng = tu_nc_groups(&l);
  double *m = malloc(ng * sizeof *m), *v = malloc(ng * sizeof *v),
         *r = malloc(ng * sizeof *r);
  ck_assert(m && v && r);
  norm_stats_t st = {m, v, r, NULL};
  EXPECT_RC(norm->call(c, &f, &st, 0, 0, 0), NORM_OK);
  tu_check_poisoned(&l, &f.x, at, c->eps, &f.y, &st);
  free(m), free(v), free(r);
  tu_tensor_free(&f.x);
  tu_tensor_free(&f.y);
}

/* The cases every (N, C, *) norm's suite runs through its own `run`. */
typedef void (*tu_nccase_fn)(const tu_nccase_t *c);

/* |mean| 1e4 with std 1e-2 (E[x^2] - E[x]^2 would lose every digit): f32
 * (a float32 case) around 1e4 and around -1e4, then f64 (a float64 one)
 * around 1e4, its tol64 scaled by the conditioning mean / std (summation
 * order). */
static inline void tu_nccase_large_mean(tu_nccase_t *f32, tu_nccase_t *f64,
                                        tu_nccase_fn run) {
  f32->lo = 1e4 - 0.017;
  f32->hi = 1e4 + 0.017;
  run(f32);
  f32->lo = -1e4 - 0.017;
  f32->hi = -1e4 + 0.017;
  run(f32);
  f64->lo = 1e4 - 0.017;
  f64->hi = 1e4 + 0.017;
  f64->tol64 = 1e-12 * 1e4 / 1e-2;
  run(f64);
}

/* float32 subnormal inputs with eps = 0 (var ~ 1e-78 only exists in
 * double), on a float32 case c: as c is, then without affine into float64,
 * then bfloat16 in (it has float32's range) and float32 out, then float32
 * in with eps 1e-5. */
static inline void tu_nccase_subnormal(tu_nccase_t *c, tu_nccase_fn run) {
  c->lo = -1e-39;
  c->hi = 3e-39;
  c->eps = 0;
  run(c);
  c->affine = 0;
  c->yt = NORM_F64;
  run(c);
  c->xt = NORM_BF16;
  c->yt = NORM_F32;
  run(c);
  c->xt = NORM_F32;
  c->eps = 1e-5;
  run(c);
}

/* ---- the family's helpers (Lp, LRN, MVN) ----------------------------------
 * Reductions over a set of axes, counted independently of the kernels:
 * element i's multi-index from its flat index, its group the row-major
 * index of the kept dims. */

/* The group of flat element i of a tensor of `shape` reduced over the dims
 * whose bits are set in `axes`. */
static inline size_t tu_axes_group(int rank, const int64_t *shape,
                                   unsigned axes, size_t i) {
  size_t idx[NORM_MAX_RANK];
  for (int d = rank - 1; d >= 0; d--) {
    idx[d] = i % (size_t)shape[d];
    i /= (size_t)shape[d];
  }
  size_t g = 0;
  for (int d = 0; d < rank; d++)
    if (!(axes >> d & 1u)) g = g * (size_t)shape[d] + idx[d];
  return g;
}

/* The number of groups: the product of the kept dims. */
static inline size_t tu_axes_groups(int rank, const int64_t *shape,
                                    unsigned axes) {
  size_t n = 1;
  for (int d = 0; d < rank; d++)
    if (!(axes >> d & 1u)) n *= (size_t)shape[d];
  return n;
}

/* One _rows call of a family kernel on groups [lo, hi): reads `in` (x, or
 * dy for a backward, the kernel's other inputs in ctx), writes `out` (y or
 * dx) and `aux` (norms, stats or square sums, naux doubles). */
typedef int (*tu_family_fn)(void *ctx, const norm_tensor_t *in,
                            norm_tensor_t *out, double *aux, size_t lo,
                            size_t hi);

/* The whole call against pieces [0, 1), [1, ng / 2), [ng / 2, ng) (run last
 * first, into an output preset to 0x5A bytes and aux preset to -12345): out
 * and aux bit for bit the same. */
static inline void tu_family_split(tu_family_fn fn, void *ctx,
                                   const norm_tensor_t *in,
                                   const norm_tensor_t *out_like, size_t naux,
                                   size_t ng) {
  norm_tensor_t a = tu_mk(out_like->dtype, out_like->rank, out_like->shape);
  norm_tensor_t b = tu_mk(out_like->dtype, out_like->rank, out_like->shape);
  double *xa = tu_doubles(naux ? naux : 1), *xb = tu_doubles(naux ? naux : 1);
  for (size_t k = 0; k < naux; k++) xa[k] = xb[k] = -12345.0;
  EXPECT_RC(fn(ctx, in, &a, naux ? xa : NULL, 0, ng), NORM_OK);
  memset(b.data, 0x5A, tu_nbytes(&b));
  size_t cuts[4] = {0, ng > 1 ? 1 : ng, ng / 2 > 1 ? ng / 2 : (ng > 1 ? 1 : ng),
                    ng};
  for (int k = 2; k >= 0; k--)
    EXPECT_RC(fn(ctx, in, &b, naux ? xb : NULL, cuts[k], cuts[k + 1]), NORM_OK);
  ck_assert_msg(memcmp(a.data, b.data, tu_nbytes(&a)) == 0,
                "split output differs from the whole call");
  ck_assert_msg(memcmp(xa, xb, naux * sizeof *xa) == 0,
                "split statistics differ from the whole call");
  tu_tensor_free(&a);
  tu_tensor_free(&b);
  tu_doubles_free(xa, naux ? naux : 1);
  tu_doubles_free(xb, naux ? naux : 1);
}

/* out over a copy of in (same dtype) equals the separate call bit for bit. */
static inline void tu_family_alias(tu_family_fn fn, void *ctx,
                                   const norm_tensor_t *in, size_t naux,
                                   size_t ng) {
  norm_tensor_t sep = tu_mk(in->dtype, in->rank, in->shape);
  norm_tensor_t al = tu_mk_copy(in);
  double *xa = tu_doubles(naux ? naux : 1), *xb = tu_doubles(naux ? naux : 1);
  EXPECT_RC(fn(ctx, in, &sep, naux ? xa : NULL, 0, ng), NORM_OK);
  EXPECT_RC(fn(ctx, &al, &al, naux ? xb : NULL, 0, ng), NORM_OK);
  ck_assert_msg(memcmp(sep.data, al.data, tu_nbytes(&sep)) == 0,
                "aliased output differs from the separate call");
  ck_assert_msg(memcmp(xa, xb, naux * sizeof *xa) == 0,
                "aliased statistics differ");
  tu_tensor_free(&sep);
  tu_tensor_free(&al);
  tu_doubles_free(xa, naux ? naux : 1);
  tu_doubles_free(xb, naux ? naux : 1);
}

/* Central differences in double of loss(x) = sum(dy * f(x)) against dx
 * (every element of x, a float64 tensor): forward(ctx, x, y) writes f(x)
 * into the float64 y. |dx - fd| <= tol * max(1, |fd|), step h * max(1, |x|). */
typedef int (*tu_forward_fn)(void *ctx, const norm_tensor_t *x,
                             norm_tensor_t *y);
static inline double tu_family_fd(tu_forward_fn forward, void *ctx,
                                  norm_tensor_t *x, const double *dy,
                                  const norm_tensor_t *dx, double h,
                                  double tol) {
  size_t n = tu_numel(x);
  norm_tensor_t y = tu_mk(NORM_F64, x->rank, x->shape);
  double *xd = x->data, worst = 0.0;
  for (size_t i = 0; i < n; i++) {
    double x0 = xd[i], step = h * (fabs(x0) > 1 ? fabs(x0) : 1), l[2];
    for (int s = 0; s < 2; s++) {
      xd[i] = x0 + (s ? -step : step);
      EXPECT_RC(forward(ctx, x, &y), NORM_OK);
      l[s] = 0.0;
      for (size_t k = 0; k < n; k++) l[s] += dy[k] * ((double *)y.data)[k];
    }
    xd[i] = x0;
    double fd = (l[0] - l[1]) / (2 * step), got = norm_tensor_get(dx, i);
    double e = fabs(got - fd) / (fabs(fd) > 1 ? fabs(fd) : 1);
    if (e > worst) worst = e;
    ck_assert_msg(e <= tol, "dx[%zu] = %.17g, central difference %.17g", i,
                  got, fd);
  }
  tu_tensor_free(&y);
  return worst;
}

#endif
