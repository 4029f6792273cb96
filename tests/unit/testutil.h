/* testutil.h -- small helpers shared by the unit tests: guarded buffers that
 * catch writes past an output, tensor builders, a seeded RNG, tolerant
 * comparisons, and the naive double reference of the (N, C, *) norms.
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

/* Relative closeness for double statistics; a NaN reference wants NaN. */
static inline int tu_rel_close(double got, double want, double tol) {
  if (isnan(want)) return isnan(got);
  if (got == want) return 1;
  return fabs(got - want) <= tol * fabs(want) + 1e-300;
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

#endif
