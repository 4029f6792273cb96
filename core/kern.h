/* kern.h -- internal: the vectorized inner loops under engine.c.
 *
 * A kern_t is one table of loops over a contiguous run of n elements, for
 * every input dtype (and every input x output dtype pair where a loop
 * writes). Three tables are built from one source (kern_impl.h) with
 * different target ISAs: kern_avx512bf16 (x86-64-v4 + AVX512-BF16),
 * kern_avx512 (x86-64-v4), kern_avx2 (x86-64-v3: AVX2, FMA, F16C) and
 * kern_base (baseline x86-64, or any other CPU).
 * kern_get() picks the best one the CPU and OS support, once.
 *
 * Numerics: every loop converts elements to double and accumulates in
 * double lanes (several independent accumulators, summed at the end), so
 * only the summation order differs from a scalar loop. Half-precision
 * outputs are rounded from double once (round-to-odd to float, then RNE),
 * bit-identical to norm_f16_from_double / norm_bf16_from_double.
 * Not part of the public API.
 */
#ifndef NORM_KERN_H
#define NORM_KERN_H

#include <stddef.h>
#include <stdint.h>

#include "norm.h"

#define KDT NORM_DTYPE_COUNT

typedef struct {
  const char *name; /* "avx512bf16", "avx512", "avx2", "base" */
  /* sum(x) */
  double (*sum[KDT])(const void *x, size_t n);
  /* sum(x^2); `ahead` as centered's, below */
  double (*sumsq[KDT])(const void *x, size_t n, ptrdiff_t ahead);
  /* out[0] = sum(x - mu), out[1] = sum((x - mu)^2).
   * `ahead` (here and in the backward's statistics passes below): 0, or
   * the distance in elements from x (and dy) to the chunk the caller reads
   * next in a tensor streamed from memory, whose n elements are prefetched
   * toward L2 at the pace x is read, so that memory keeps reading while
   * the caller applies this chunk from the caches (no effect on the
   * results). */
  void (*centered[KDT])(const void *x, size_t n, double mu, ptrdiff_t ahead,
                        double out[2]);
  /* dst[i] = x[i] as double */
  void (*to_double[KDT])(const void *x, size_t n, double *dst);
  /* y = (x - shift) * a + c, indexed [x dtype][y dtype]. With `stream`,
   * y is written with streaming stores where the table has them (for
   * outputs larger than the caches: no read for ownership). */
  void (*axpb[KDT][KDT])(const void *x, void *y, size_t n, double shift,
                         double a, double c, int stream);
  /* y = (x - shift) * scale * w[i] + b[i]; w or b (not both) may be NULL */
  void (*affine[KDT][KDT])(const void *x, void *y, size_t n, double shift,
                           double scale, const double *w, const double *b,
                           int stream);
  /* float32 -> float32 y = (x - shift) * scale * w[i] + b[i] in float
   * lanes (w or b, not both, may be NULL), for the callers that proved the
   * error bound of engine_apply's float path; rounds differently from
   * `affine`, within 2^-22 (|(x - shift) * scale * w| + |y|). */
  void (*affine_f32)(const float *x, float *y, size_t n, double shift,
                     double scale, const float *w, const float *b, int stream);
  /* The same with one weight and bias for the whole run (the channel
   * norms' runs; 1 and 0 for none): y = (x - shift) * scale * w + b, the
   * same float steps and bound as affine_f32. */
  void (*axpb_f32)(const float *x, float *y, size_t n, double shift,
                   double scale, float w, float b, int stream);
  /* bfloat16 -> bfloat16 `affine` in float lanes with float weights and
   * biases, bit-identical to affine[NORM_BF16][NORM_BF16] given their
   * doubles (each lane proves it rounds as the double path, else takes
   * it). w_max is max |w[i]| or more (DBL_MAX when unknown): RMS norm's
   * rows (shift 0, weights only) bound their error by it. In every table
   * but base (NULL there). */
  void (*affine_bf16)(const uint16_t *x, uint16_t *y, size_t n, double shift,
                      double scale, const float *w, const float *b,
                      double w_max, int stream);
  /* The backward's loops (engine_backward; kern_backward_impl.h), x, dy
   * and dx all of the index's dtype, in double lanes.
   * bw_sums, over a run sharing one weight entry: out[0] = sum(dy),
   * out[1] = sum(dy * (x - shift)).
   * bw_row_sums, a weight per element (w; NULL: 1) and xhat = (x - shift)
   * * s: out[0] = sum(w dy), out[1] = sum(w dy xhat); gw[i] += dy xhat and
   * gb[i] += dy where they are not NULL.
   * bw_dx: dx = s (w dy - mean_g) - xhat c (no last term without
   * `spread`), w = wv[i], or the scalar w where wv is NULL; rounded once
   * into the dtype, as axpb's stores; `stream` as axpb's. dx may alias
   * dy. */
  void (*bw_sums[KDT])(const void *x, const void *dy, size_t n, double shift,
                       double out[2]);
  /* bw_centered_sums: centered's out (the same bits) and, around the same
   * mu, bw_sums' two sums over [0, cut) in sums[0..1] and over [cut, n) in
   * sums[2..3], in one pass (the backward's moments with its sums). */
  void (*bw_centered_sums[KDT])(const void *x, const void *dy, size_t n,
                                double mu, size_t cut, ptrdiff_t ahead,
                                double out[2], double sums[4]);
  /* bw_centered_row_sums: centered's out (the same bits) and, around the
   * same mu, sums[0] = sum(w dy), sums[1] = sum(w dy (x - mu)), a weight
   * per element, in one pass (layer norm's moments with its sums). The
   * weights as floats (wf) where they are exact in float, else as doubles
   * (w), else none (both NULL: 1): the same products either way, but
   * float weights are half the bytes beside the two streams from memory
   * (a 4096-element row's double weights took 40% of the pass). */
  void (*bw_centered_row_sums[KDT])(const void *x, const void *dy, size_t n,
                                    double mu, const double *w,
                                    const float *wf, ptrdiff_t ahead,
                                    double out[2], double sums[2]);
  /* bw_sumsq_row_sums: sumsq's result (the same bits) and sums[0] =
   * sum(w dy), sums[1] = sum(w dy x), the weights as above, in one pass
   * (RMS norm's mean square with its sums). */
  double (*bw_sumsq_row_sums[KDT])(const void *x, const void *dy, size_t n,
                                   const double *w, const float *wf,
                                   ptrdiff_t ahead, double sums[2]);
  void (*bw_row_sums[KDT])(const void *x, const void *dy, size_t n,
                           double shift, double s, const double *w, double *gw,
                           double *gb, double out[2]);
  void (*bw_dx[KDT])(const void *x, const void *dy, void *dx, size_t n,
                     double shift, double s, double w, const double *wv,
                     double mean_g, double c, int spread, int stream);
  /* bw_dx_grads: bw_dx for rows with the spread term, and on the way
   * bw_row_sums' gw[i] += dy xhat, gb[i] += dy (either NULL), the same
   * bits as those (the rows' sums taken with the moments). The weights as
   * floats (wf) where exact, else doubles (wv), else none (both NULL: w =
   * 1), as bw_centered_row_sums takes them. */
  void (*bw_dx_grads[KDT])(const void *x, const void *dy, void *dx, size_t n,
                           double shift, double s, const double *wv,
                           const float *wf, double mean_g, double c,
                           double *gw, double *gb, int stream);
} kern_t;

extern const kern_t kern_base;
#if defined(__x86_64__) && defined(__GNUC__)
#define KERN_X86 1
extern const kern_t kern_avx2;
extern const kern_t kern_avx512;
extern const kern_t kern_avx512bf16;
#endif

/* The table for this CPU: the best supported, unless the environment
 * variable NORM_SIMD names a supported lower one ("base", "avx2",
 * "avx512", "avx512bf16"; for tests and benchmarks). Chosen on first use; thread-safe. */
const kern_t *kern_get(void);

#endif
