/* output_hash.c -- one hash of what layer and RMS norm return (forward
 * and backward: y, dx, the weight and bias gradients, the statistics and
 * the return codes) over 3000 seeded random cases: every dtype for x, dy,
 * dx and y, every weight dtype, with and without a weight, rows from 1 to
 * 5000 elements, a few tensors large enough to be streamed (>= 16 MiB),
 * an Inf in dy now and then. For changes meant to keep every bit (a
 * faster loop, a prefetch, another weight layout): build it on the old
 * and the new revision and compare the printed hashes under each
 * NORM_SIMD table, e.g.
 *   git worktree add /tmp/base REV && make -C /tmp/base build/output_hash
 *   for s in base avx2 avx512 avx512bf16; do
 *     NORM_SIMD=$s /tmp/base/build/output_hash; NORM_SIMD=$s build/output_hash
 *   done
 * Not a test by itself (it has no expected value); check_unit and
 * check_kern say whether the results are right. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "norm.h"

static uint64_t rng_state = 88172645463325252ull;
static uint64_t rng(void) { /* xorshift64 */
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}
static double unit(void) { return (double)(rng() >> 11) * 0x1p-53; }

static uint64_t hash = 1469598103934665603ull; /* FNV-1a */
static void mix(const void *p, size_t n) {
  const unsigned char *c = p;
  for (size_t i = 0; i < n; i++) hash = (hash ^ c[i]) * 1099511628211ull;
}

static void *xcalloc(size_t n, size_t size) {
  void *p = calloc(n, size);
  if (p == NULL) {
    perror("output_hash");
    exit(1);
  }
  return p;
}

int main(void) {
  const norm_dtype_t dts[4] = {NORM_F32, NORM_F64, NORM_F16, NORM_BF16};
  for (int it = 0; it < 3000; it++) {
    norm_dtype_t dt = dts[rng() % 4], wdt = dts[rng() % 4];
    int64_t rows = 1 + (int64_t)(rng() % 9);
    int64_t cols = 1 + (int64_t)(rng() % (it % 3 == 0 ? 5000 : 700));
    if (it % 50 == 0) cols = 4096;
    if (it % 300 == 7) rows = 1100, cols = 4096;  /* streamed if float32 */
    if (it % 300 == 9) rows = 2300, cols = 2000, dt = NORM_F32; /* streamed */
    size_t n = (size_t)(rows * cols), size = norm_dtype_size(dt);
    norm_tensor_t x = {dt, 2, {rows, cols}, xcalloc(n, size)};
    norm_tensor_t dy = {dt, 2, {rows, cols}, xcalloc(n, size)};
    norm_tensor_t dx = {dt, 2, {rows, cols}, xcalloc(n, size)};
    norm_tensor_t w = {wdt, 1, {cols}, xcalloc((size_t)cols, norm_dtype_size(wdt))};
    double mean = (unit() - 0.5) * pow(10, (int)(rng() % 6) - 2);
    double sd = ldexp(1.0, (int)(rng() % 8) - 4);
    for (size_t i = 0; i < n; i++) {
      norm_tensor_set(&x, i, mean + sd * (unit() - 0.5) * 3);
      norm_tensor_set(&dy, i, unit() * 2 - 1);
    }
    if (rng() % 20 == 0) norm_tensor_set(&dy, rng() % n, INFINITY);
    for (int64_t i = 0; i < cols; i++)
      norm_tensor_set(&w, (size_t)i, rng() % 3 ? 0.5 + unit() : 1.0);
    double *gw = xcalloc((size_t)cols, sizeof(double));
    double *gb = xcalloc((size_t)cols, sizeof(double));
    double *st[4];
    for (int j = 0; j < 4; j++) st[j] = xcalloc((size_t)rows, sizeof(double));
    int rms = rng() % 2, weighted = rng() % 4 != 0, rc;
    const norm_tensor_t *wp = weighted ? &w : NULL;
    if (rms) {
      norm_rms_params_t p = {.normalized_ndim = 1, .eps = 1e-6};
      norm_grads_t g = {gw, NULL};
      norm_stats_t s = {NULL, NULL, st[0], st[1]};
      rc = norm_rms_backward_rows(&x, &dy, wp, &p, &dx, &g, &s, 0, (size_t)rows);
    } else {
      norm_layer_params_t p = {.normalized_ndim = 1, .eps = 1e-5};
      norm_grads_t g = {gw, gb};
      norm_stats_t s = {st[0], st[1], st[2], NULL};
      rc = norm_layer_backward_rows(&x, &dy, wp, &p, &dx, &g, &s, 0, (size_t)rows);
    }
    mix(&rc, sizeof rc);
    mix(dx.data, n * size);
    mix(gw, (size_t)cols * sizeof(double));
    mix(gb, (size_t)cols * sizeof(double));
    for (int j = 0; j < 4; j++) mix(st[j], (size_t)rows * sizeof(double));
    /* the forward into dx */
    if (rms) {
      norm_rms_params_t p = {.normalized_ndim = 1, .eps = 1e-6};
      norm_stats_t s = {NULL, NULL, st[0], st[1]};
      rc = norm_rms(&x, wp, &p, &dx, &s);
    } else {
      norm_layer_params_t p = {.normalized_ndim = 1, .eps = 1e-5};
      norm_stats_t s = {st[0], st[1], st[2], NULL};
      rc = norm_layer(&x, wp, NULL, &p, &dx, &s);
    }
    mix(&rc, sizeof rc);
    mix(dx.data, n * size);
    for (int j = 0; j < 4; j++) mix(st[j], (size_t)rows * sizeof(double));
    free(x.data), free(dy.data), free(dx.data), free(w.data);
    free(gw), free(gb);
    for (int j = 0; j < 4; j++) free(st[j]);
  }
  printf("%016llx\n", (unsigned long long)hash);
  return 0;
}
