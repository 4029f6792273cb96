/* engine.h -- internal: the one mechanism behind every kernel.
 *
 * Each normalization is described by a layout_t: which elements form
 * normalization group g, and which weight/bias entry each element uses.
 * The engine then runs the same passes for all of them: moments of a group
 * (two passes in double over each cache-sized chunk), and
 * y = (x - shift) * scale * w + b over a group. The inner loops are the
 * vectorized ones of kern.h (AVX-512 / AVX2 / baseline, chosen at run
 * time), for any dtype mix; nothing allocates. Not part of the public API.
 */
#ifndef NORM_ENGINE_H
#define NORM_ENGINE_H

#include <stddef.h>

#include "norm.h"

/* Group g is `nseg` segments of `seg_len` contiguous elements; segment s
 * starts at element g * group_stride + s * seg_stride. Element j of a
 * segment uses weight/bias entry affine_first(g) + j / affine_period, with
 * affine_first(g) = (g % affine_mod) * affine_mul. */
typedef struct {
  size_t groups;
  size_t group_stride;
  size_t nseg, seg_len, seg_stride;
  size_t affine_period, affine_mod, affine_mul;
} layout_t;

/* Elements per group. */
static inline size_t engine_layout_count(const layout_t *l) {
  return l->nseg * l->seg_len;
}

/* Layouts of the kernels, from an already validated x: rows (layer and RMS
 * norm), channels (batch norm: group = c), groups, instances. */
layout_t engine_layout_rows(const norm_tensor_t *x, int normalized_ndim);
layout_t engine_layout_channels(const norm_tensor_t *x);
layout_t engine_layout_groups(const norm_tensor_t *x, size_t num_groups);
layout_t engine_layout_instances(const norm_tensor_t *x);

/* Mean and M2 = sum((x - mean)^2) of group g, in double. Chunk by chunk
 * (a chunk is at most 16 KiB, so it stays in L1 between its passes): sum,
 * then the centered sums with the rounding error of the mean folded back
 * in (corrected two-pass); chunks merge with Chan's formula. x is read
 * from memory once. */
void engine_moments(const norm_tensor_t *x, const layout_t *l, size_t g,
                    double *mean, double *m2);
/* The backward's sums of a group's weight-entry runs, taken with its
 * moments (engine_moments_sums): per run of the first segment (the same
 * entries repeat in every segment), over every segment, sum(dy) and
 * sum(dy (x - ref)). Rows (a weight per element: layer norm) are one run,
 * its sums sum(w dy) and sum(w dy (x - ref)). */
enum { ENGINE_RUNS = 64 };
typedef struct {
  size_t runs; /* runs per segment; 1 for rows */
  double ref;
  double dy[ENGINE_RUNS], dyx[ENGINE_RUNS];
} engine_run_sums_t;

/* sum(x^2) of group g, in double. */
double engine_sumsq(const norm_tensor_t *x, const layout_t *l, size_t g);

/* Weight and bias of one kernel call. When each element has its own entry
 * (affine_period 1: layer and RMS norm), vectors of up to ENGINE_PREP
 * entries are converted to double once here rather than once per group;
 * float64 ones are used in place. With the float copies below that is
 * 2 * ENGINE_PREP doubles and 2 * ENGINE_PREP floats, 96 KiB: an affine_t
 * lives on the caller's stack. */
enum { ENGINE_PREP = 4096 };
/* Outputs of at least this many bytes do not stay in the caches anyway:
 * they are written with streaming stores (no read for ownership, which
 * would add a stream to memory). */
#define ENGINE_STREAM_BYTES ((size_t)16 << 20)
/* Whether a tensor of layout l and dtype dt is that large. */
int engine_streamed(const layout_t *l, norm_dtype_t dt);
typedef struct {
  const norm_tensor_t *weight, *bias; /* NULL: w = 1, b = 0 */
  const double *w, *b;                /* prepared entries, or NULL */
  double wbuf[ENGINE_PREP], bbuf[ENGINE_PREP];
  /* The same as floats, when they are exact in float (float32, float16,
   * bfloat16, finite); NULL otherwise, or absent. The bfloat16 float path
   * of engine_apply takes them as they are; the float32 one only when
   * float_ok: |w| <= 1e30, |b| <= 1 besides (see engine_apply). */
  int float_ok;
  double w_max; /* max |w| of the float copies (kern.h's affine_bf16), or DBL_MAX */
  const float *wf, *bf;
  float wfbuf[ENGINE_PREP], bfbuf[ENGINE_PREP];
} affine_t;
/* The float copies of a's prepared row weights (wf) where the rows of a
 * tensor of layout l and dtype dt read them instead of the doubles (the
 * same products): streamed tensors, where they are half the bytes beside
 * the streams from memory (a 4096x4096 float32 layer norm backward, 1
 * thread: +12% with its prefetch); cache-resident rows, bound by their
 * arithmetic, lose more to the conversion than they gain (RMS norm
 * backward 64x768: -10%). NULL there, or where a has none. */
const float *engine_row_wf(const affine_t *a, const layout_t *l,
                           norm_dtype_t dt);
/* engine_moments, the same bits, and with dy not NULL the run sums of dy
 * in the same pass over x (it is read once for both); for rows weighted
 * by a's prepared weights (a NULL, or no weight: 1). Returns 0, having
 * computed nothing, where the layout does not allow that: dy of another
 * dtype than x, rows of bfloat16 or whose weight engine_affine_init did
 * not prepare, more
 * than ENGINE_RUNS runs per segment, or runs so short that a moments chunk
 * holds two run ends. */
int engine_moments_sums(const norm_tensor_t *x, const norm_tensor_t *dy,
                        const affine_t *a, const layout_t *l, size_t g,
                        double *mean, double *m2, engine_run_sums_t *rs);
/* engine_sumsq's sum (the same bits) in *sq, and RMS norm's row sums in
 * the same pass: sum(w dy) and sum(w dy x) (ref 0), weighted by a's
 * prepared weights (a NULL, or no weight: 1). Returns 0, having computed
 * nothing, for dy of another dtype than x, bfloat16 (as
 * engine_moments_sums), a layout other than rows, or a weight
 * engine_affine_init did not prepare. */
int engine_sumsq_sums(const norm_tensor_t *x, const norm_tensor_t *dy,
                      const affine_t *a, const layout_t *l, size_t g,
                      double *sq, engine_run_sums_t *rs);
void engine_affine_init(affine_t *a, const layout_t *l,
                        const norm_tensor_t *weight, const norm_tensor_t *bias);

/* y = (x - shift) * scale * w + b over group g. The group was usually just
 * read by engine_moments, so for a group that fits in L2 this pass reads
 * it from cache, not memory.
 *
 * Float path: float32 x and y run in float lanes when |scale| <= 1e30 and
 * `bounded` (the caller's proof that every |x - shift| <= 1e37, e.g. |mean|
 * and sqrt(M2) both <= 1e37, and |x - shift| * scale <= sqrt(count): the
 * group's own moments, not batch norm's running ones), and the weights and
 * biases are floats with |w| <= 1e30, |b| <= 1 (rows with per-element
 * weights: a->float_ok, kern.h's affine_f32; runs of one entry, the
 * channel norms: each run's own pair, axpb_f32). With
 * d = (x - hi) - lo (shift = hi + lo in floats) and y = fma(d * scale, w,
 * b), about five float roundings give |y - exact| <= 2^-22 (|d scale w| +
 * |y|) + 2^-48 |shift scale w| <= 2^-22 (2 |y| + |b|) + tiny, so with
 * |b| <= 1 the error stays below 5.4e-7 max(1, |y|): inside the 1e-6
 * max(1, |y|) contract of the tests, though not the same bits as the
 * double path (which half-precision outputs keep). No intermediate
 * overflows: |d| <= 1e37 and |d scale| <= sqrt(count).
 *
 * bfloat16 rows with per-element weights whose float copies exist (a->wf,
 * a->bf) run in float lanes too where the table has them (kern.h's
 * affine_bf16), with the same bits as the double path: each lane proves it
 * rounds alike or takes the double path. */
void engine_apply(const norm_tensor_t *x, norm_tensor_t *y, const layout_t *l,
                  size_t g, double shift, double scale, const affine_t *a,
                  int bounded);

/* The standardizing loop shared by layer, group and instance norm: for each
 * group g in [begin, end), var = M2 / (count - ddof), rstd from eps and its
 * placement, y = (x - mean) * rstd * w + b, and the stats written at g. */
void engine_standardize(const norm_tensor_t *x, norm_tensor_t *y,
                        const layout_t *l, size_t begin, size_t end,
                        double eps, int ddof, norm_eps_placement_t placement,
                        const norm_tensor_t *weight, const norm_tensor_t *bias,
                        const norm_stats_t *stats);

/* The terms of engine_backward: which of shift and s depend on x. */
enum {
  ENGINE_BW_MEAN = 1,   /* shift is the group's mean: the mean(g) term */
  ENGINE_BW_SPREAD = 2, /* s is the group's: the xhat * coef * ... term */
};

/* The backward of y = (x - shift) * s * w + b over group g (backward.c):
 * with g = w * dy and xhat = (x - shift) * s,
 *   dx = s * (g - mean(g)) - xhat * coef * sum(g * xhat)
 * with only the `terms` named (ENGINE_BW_*): a shift or s that is a
 * constant (batch norm's eval mode: neither) has no term, so dx = s * g
 * stays elementwise even where x or dy is not finite. The weight is
 * a->weight, prepared by engine_affine_init (with no bias) once per call
 * of the kernel, not per group. Rounded once into dx's dtype; grads (NULL, or either array NULL) get sum(dy * xhat) and
 * sum(dy) per weight entry added. dx may alias dy. pre (NULL: computed
 * here): the runs' sums, taken with the moments (engine_moments_sums). */
void engine_backward(const norm_tensor_t *x, const norm_tensor_t *dy,
                     const affine_t *a, norm_tensor_t *dx, const layout_t *l,
                     size_t g, double shift, double s, int terms, double coef,
                     const norm_grads_t *grads, const engine_run_sums_t *pre);

/* engine_standardize's backward, for layer, group and instance norm: per
 * group the moments again, then engine_backward with shift = mean and
 * coef = s / D (inside the square root) or 1 / (D std) (outside; 0 where
 * std = 0), D = count - ddof; the stats as the forward writes them. */
void engine_standardize_backward(const norm_tensor_t *x, const norm_tensor_t *dy,
                                 const norm_tensor_t *weight, norm_tensor_t *dx,
                                 const layout_t *l, size_t begin, size_t end,
                                 double eps, int ddof,
                                 norm_eps_placement_t placement,
                                 const norm_grads_t *grads,
                                 const norm_stats_t *stats);

/* 1 / sqrt(var + eps). */
double engine_rstd(double var, double eps);
/* The factor applied to (x - mean): rstd, except that a constant group
 * (var == 0) with eps == 0 gets 0, so its output is b rather than NaN. */
double engine_scale(double var, double eps, double rstd);

/* The elements of a reduction over an arbitrary set of axes (Lp and
 * mean-variance norm): bit i of `axes` set = dim i is reduced. Group g is
 * one index of the kept dims (row-major over them, so groups = their
 * product), element j of a group one index of the reduced dims (row-major
 * over them, count = their product). Offsets are found by division, one
 * element at a time: slow paths, not the vectorized kernels. */
typedef struct {
  size_t groups, count;
  int nkept, nred;
  size_t kept_dim[NORM_MAX_RANK], kept_stride[NORM_MAX_RANK];
  size_t red_dim[NORM_MAX_RANK], red_stride[NORM_MAX_RANK];
} axes_t;

/* From an already validated x: NORM_E_AXIS unless axes is non-empty and
 * names only dims below x's rank. */
int engine_axes_init(axes_t *a, const norm_tensor_t *x, unsigned axes);
/* x's flat index of element j of group g (j < count, g < groups). */
size_t engine_axes_elem(const axes_t *a, size_t g, size_t j);

/* ---- shared validation ---- */
int engine_check_eps(double eps);
/* x valid; y valid (byte size included) with the same shape, any dtype. */
int engine_check_in_out(const norm_tensor_t *x, const norm_tensor_t *y);
/* t is NULL, or a valid tensor of exactly the given shape; else `err`. */
int engine_check_vector(const norm_tensor_t *t, const int64_t *shape, int rank,
                        int err);
/* x is (N, C, *): rank >= 2. */
int engine_check_channels(const norm_tensor_t *x);
/* The checks batch, group and instance norm share, in two halves so that
 * each norm's own parameters are checked between them (that order decides
 * which error a call with several faults gets):
 * engine_check_channel_norm: x and y as engine_check_in_out, x of
 * (N, C, *), eps as engine_check_eps;
 * engine_check_channel_affine: weight and bias each NULL or of shape (C),
 * else NORM_E_WEIGHT / NORM_E_BIAS (x already checked). */
int engine_check_channel_norm(const norm_tensor_t *x, const norm_tensor_t *y,
                              double eps);
int engine_check_channel_affine(const norm_tensor_t *x,
                                const norm_tensor_t *weight,
                                const norm_tensor_t *bias);
int engine_check_range(size_t begin, size_t end, size_t groups);
/* dy (grad_output) valid and of x's shape: NORM_E_GRAD_OUTPUT otherwise. */
int engine_check_grad(const norm_tensor_t *x, const norm_tensor_t *dy);
void engine_stats_put(const norm_stats_t *s, size_t g, double mean, double var,
                      double rstd);

#endif
