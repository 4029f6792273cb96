/* testutil.h -- small helpers shared by the unit tests: guarded buffers that
 * catch writes past an output, tensor builders, and a seeded RNG. Header-only
 * (static functions) so each check_*.c stays self-contained. */
#ifndef TESTS_TESTUTIL_H
#define TESTS_TESTUTIL_H

#include <check.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "norm.h"

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

#endif
