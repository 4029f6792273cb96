/* norm.h -- the public interface of normd's core library.
 *
 * Five normalizations (layer, RMS, batch, group, instance) plus moments, on
 * plain buffers described by norm_tensor_t. The caller owns every buffer;
 * nothing here allocates, does I/O, or knows about threads. Every function
 * returns NORM_OK (0) or a negative norm_err_t code; norm_strerror() names it.
 */
#ifndef NORM_H
#define NORM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- errors --------------------------------------------------------------
 * One list, one enum. Codes are stable: the server maps each to an HTTP
 * status and a machine-readable problem code (the lowercase short name). */
#define NORM_ERRNO_MAP(X)                                                      \
  X(OK, 0, "ok", "success")                                                    \
  X(E_NULL, -1, "null_argument", "a required pointer argument is NULL")        \
  X(E_DTYPE, -2, "unknown_dtype", "unknown or unsupported dtype")              \
  X(E_RANK, -3, "bad_rank", "tensor rank must be between 1 and 8")             \
  X(E_DIM, -4, "negative_dim", "tensor dimension is negative")                 \
  X(E_EMPTY, -5, "empty_tensor", "tensor has a zero-size dimension")           \
  X(E_OVERFLOW, -6, "size_overflow", "element count or byte size overflows")   \
  X(E_SHAPE, -7, "shape_mismatch",                                             \
    "normalized shape does not match the input's trailing dimensions")         \
  X(E_AXIS, -8, "bad_axis", "axis is out of range for the input's rank")       \
  X(E_OUTPUT, -9, "output_mismatch", "output tensor shape does not match input") \
  X(E_WEIGHT, -10, "weight_shape", "weight shape does not match")              \
  X(E_BIAS, -11, "bias_shape", "bias shape does not match")                    \
  X(E_RUNNING, -12, "running_stats_shape",                                     \
    "running_mean / running_var missing or of the wrong shape")                \
  X(E_GROUPS, -13, "bad_num_groups",                                           \
    "num_groups must be positive and divide the channel count")                \
  X(E_EPS, -14, "bad_eps", "eps must be finite and >= 0")                      \
  X(E_MOMENTUM, -15, "bad_momentum", "momentum must be finite, in [0, 1]")     \
  X(E_TOO_FEW, -16, "too_few_values",                                          \
    "expected more than 1 value per channel when training")                    \
  X(E_CHANNELS, -17, "needs_channels",                                         \
    "input must have shape (N, C, *) with rank >= 2")                          \
  X(E_RANGE, -18, "bad_range", "group range [begin, end) is out of bounds")    \
  X(E_ARG, -19, "bad_argument", "invalid enum or parameter value")             \
  X(E_GRAD_OUTPUT, -20, "grad_output_shape",                                   \
    "grad_output must have the input's shape")

typedef enum {
#define NORM_ENUM_(name, code, short_name, msg) NORM_##name = code,
  NORM_ERRNO_MAP(NORM_ENUM_)
#undef NORM_ENUM_
} norm_err_t;

/* Human-readable message for a code; never NULL ("unknown error" if not ours). */
const char *norm_strerror(int err);
/* Stable lowercase short name ("shape_mismatch"); never NULL. */
const char *norm_err_name(int err);

/* ---- dtypes and tensors ------------------------------------------------- */

typedef enum {
  NORM_F32 = 0,
  NORM_F64 = 1,
  NORM_F16 = 2,  /* IEEE 754 binary16 */
  NORM_BF16 = 3, /* bfloat16: the top half of a float32 */
  NORM_DTYPE_COUNT
} norm_dtype_t;

/* Bytes per element, or 0 for an unknown dtype. */
size_t norm_dtype_size(norm_dtype_t dtype);
/* "float32", "float64", "float16", "bfloat16"; NULL for an unknown dtype. */
const char *norm_dtype_name(norm_dtype_t dtype);
/* Parses a name above; returns NORM_OK or NORM_E_DTYPE. */
int norm_dtype_from_name(const char *name, norm_dtype_t *out);

/* Conversions with round-to-nearest-even; NaN stays NaN (quiet), Inf stays
 * Inf, overflow rounds to Inf, tiny values to subnormals or signed zero. */
uint16_t norm_f16_from_float(float f);
float norm_float_from_f16(uint16_t h);
uint16_t norm_bf16_from_float(float f);
float norm_float_from_bf16(uint16_t b);
/* Narrowing straight from double, rounded once (no double rounding through
 * float): what kernels and codecs use for half-precision outputs. */
uint16_t norm_f16_from_double(double d);
uint16_t norm_bf16_from_double(double d);

#define NORM_MAX_RANK 8

/* A dense row-major tensor view. Does not own data. Dimensions are int64_t
 * so that negative sizes from the network are caught (NORM_E_DIM) rather
 * than wrapped. */
typedef struct {
  norm_dtype_t dtype;
  int rank;
  int64_t shape[NORM_MAX_RANK];
  void *data;
} norm_tensor_t;

/* Validates dtype, rank and dims, then stores the element count in *numel
 * and the byte size in *nbytes (either may be NULL). Zero-size dims give
 * NORM_E_EMPTY; products that overflow size_t (or exceed PTRDIFF_MAX bytes)
 * give NORM_E_OVERFLOW. data is not looked at. */
int norm_tensor_check(const norm_tensor_t *t, size_t *numel, size_t *nbytes);

/* Element i of t as a double / stored from a double (rounded to t's dtype).
 * No bounds checks: for tests, codecs and slow paths, not kernels. */
double norm_tensor_get(const norm_tensor_t *t, size_t i);
void norm_tensor_set(norm_tensor_t *t, size_t i, double v);

/* ---- statistics outputs -------------------------------------------------
 * One entry per normalized group, in double precision. Every pointer may be
 * NULL when that statistic is not wanted; non-NULL arrays must hold
 * norm_*_groups() entries (or, with the _rows variants, at least `end`
 * entries: group g is written at index g). */
typedef struct {
  double *mean; /* layer, batch, group, instance */
  double *var;  /* biased or unbiased as requested (layer); biased otherwise */
  double *rstd; /* 1 / sqrt(var + eps), or 1 / (std + eps) outside_sqrt */
  double *rms;  /* rms norm only: sqrt(mean(x^2)) */
} norm_stats_t;

/* ---- layer norm ---------------------------------------------------------- */

typedef enum { NORM_VAR_BIASED = 0, NORM_VAR_UNBIASED = 1 } norm_variance_t;
typedef enum {
  NORM_EPS_INSIDE_SQRT = 0,  /* (x - mean) / sqrt(var + eps)   torch */
  NORM_EPS_OUTSIDE_SQRT = 1, /* (x - mean) / (sqrt(var) + eps) Annotated Transformer */
} norm_eps_placement_t;

typedef struct {
  int normalized_ndim; /* how many trailing dims form one row, 1..rank */
  double eps;
  norm_variance_t variance;
  norm_eps_placement_t eps_placement;
} norm_layer_params_t;

/* normalized_ndim from a normalized_shape: it must equal x's trailing dims
 * (NORM_E_SHAPE otherwise). */
int norm_ndim_from_shape(const norm_tensor_t *x, const int64_t *shape, int n,
                         int *normalized_ndim);
/* normalized_ndim from an ONNX-style axis in [-rank, rank): the dims from
 * axis to the end are normalized. NORM_E_AXIS when out of range. */
int norm_ndim_from_axis(const norm_tensor_t *x, int64_t axis,
                        int *normalized_ndim);

/* y = (x - mean) / sqrt(var + eps) * w + b, per row of the trailing dims.
 * weight and bias are optional (NULL) and have the normalized shape, any
 * dtype. y has x's shape, any dtype; it may alias x when the dtypes match
 * (so may every normalization's y below). Stats are per row. Groups are
 * rows: norm_layer_groups() of them. */
int norm_layer(const norm_tensor_t *x, const norm_tensor_t *weight,
               const norm_tensor_t *bias, const norm_layer_params_t *p,
               norm_tensor_t *y, const norm_stats_t *stats);
int norm_layer_rows(const norm_tensor_t *x, const norm_tensor_t *weight,
                    const norm_tensor_t *bias, const norm_layer_params_t *p,
                    norm_tensor_t *y, const norm_stats_t *stats, size_t begin,
                    size_t end);
/* Number of rows (independent groups), or a negative error. */
int64_t norm_layer_groups(const norm_tensor_t *x, const norm_layer_params_t *p);

/* ---- RMS norm ------------------------------------------------------------ */

typedef struct {
  int normalized_ndim;
  double eps;
} norm_rms_params_t;

/* y = x / sqrt(mean(x^2) + eps) * w, per row. Fills stats->rms and
 * stats->rstd (mean and var are ignored). Otherwise as norm_layer. */
int norm_rms(const norm_tensor_t *x, const norm_tensor_t *weight,
             const norm_rms_params_t *p, norm_tensor_t *y,
             const norm_stats_t *stats);
int norm_rms_rows(const norm_tensor_t *x, const norm_tensor_t *weight,
                  const norm_rms_params_t *p, norm_tensor_t *y,
                  const norm_stats_t *stats, size_t begin, size_t end);
int64_t norm_rms_groups(const norm_tensor_t *x, const norm_rms_params_t *p);

/* ---- batch norm ---------------------------------------------------------- */

typedef enum { NORM_TRAIN = 0, NORM_EVAL = 1 } norm_mode_t;

typedef struct {
  norm_mode_t mode;
  double eps;
  /* Train mode with running stats: running = (1 - f) * running + f * batch,
   * batch var unbiased (n / (n - 1)). f = momentum, or when cumulative is
   * set, f = 1 / num_batches_tracked after it has been incremented (the
   * caller increments it once per batch; see norm_batch()). */
  double momentum;
  int cumulative;
  int64_t num_batches_tracked;
} norm_batch_params_t;

/* Train: y = (x - mean_c) / sqrt(var_c + eps) * w_c + b_c with mean_c, var_c
 * (biased) over N and all spatial positions of channel c; running_mean and
 * running_var (both or neither, shape (C)) are updated in place. N * spatial
 * == 1 is NORM_E_TOO_FEW.
 * Eval: the same formula with mean_c = running_mean, var_c = running_var
 * (both required, NORM_E_RUNNING otherwise); stats report them.
 * Momentum outside [0, 1] (or NaN) is NORM_E_MOMENTUM unless cumulative;
 * with cumulative, num_batches_tracked < 1 is NORM_E_ARG only when the
 * running stats are updated (train mode with running stats), and ignored
 * otherwise.
 * Groups are channels. */
int norm_batch(const norm_tensor_t *x, const norm_tensor_t *weight,
               const norm_tensor_t *bias, norm_tensor_t *running_mean,
               norm_tensor_t *running_var, const norm_batch_params_t *p,
               norm_tensor_t *y, const norm_stats_t *stats);
int norm_batch_rows(const norm_tensor_t *x, const norm_tensor_t *weight,
                    const norm_tensor_t *bias, norm_tensor_t *running_mean,
                    norm_tensor_t *running_var, const norm_batch_params_t *p,
                    norm_tensor_t *y, const norm_stats_t *stats, size_t begin,
                    size_t end);
int64_t norm_batch_groups(const norm_tensor_t *x);

/* ---- group norm ---------------------------------------------------------- */

typedef struct {
  int64_t num_groups;
  double eps;
} norm_group_params_t;

/* y = (x - mean_ng) / sqrt(var_ng + eps) * w_c + b_c, statistics over the
 * C / G channels of group g (and all spatial positions) of sample n; weight
 * and bias per channel (C). Groups are (n, g) pairs: N * G of them, index
 * n * G + g. */
int norm_group(const norm_tensor_t *x, const norm_tensor_t *weight,
               const norm_tensor_t *bias, const norm_group_params_t *p,
               norm_tensor_t *y, const norm_stats_t *stats);
int norm_group_rows(const norm_tensor_t *x, const norm_tensor_t *weight,
                    const norm_tensor_t *bias, const norm_group_params_t *p,
                    norm_tensor_t *y, const norm_stats_t *stats, size_t begin,
                    size_t end);
int64_t norm_group_groups(const norm_tensor_t *x, const norm_group_params_t *p);

/* ---- instance norm ------------------------------------------------------- */

typedef struct {
  double eps;
} norm_instance_params_t;

/* y = (x - mean_nc) / sqrt(var_nc + eps) * w_c + b_c, statistics over the
 * spatial positions of each (n, c). Groups: N * C, index n * C + c. */
int norm_instance(const norm_tensor_t *x, const norm_tensor_t *weight,
                  const norm_tensor_t *bias, const norm_instance_params_t *p,
                  norm_tensor_t *y, const norm_stats_t *stats);
int norm_instance_rows(const norm_tensor_t *x, const norm_tensor_t *weight,
                       const norm_tensor_t *bias,
                       const norm_instance_params_t *p, norm_tensor_t *y,
                       const norm_stats_t *stats, size_t begin, size_t end);
int64_t norm_instance_groups(const norm_tensor_t *x);

/* ---- moments ------------------------------------------------------------- */

typedef enum {
  NORM_MOMENTS_ROWS = 0,     /* per row of the trailing normalized_ndim dims */
  NORM_MOMENTS_CHANNELS = 1, /* per channel c of (N, C, *), as batch norm */
} norm_moments_layout_t;

typedef struct {
  norm_moments_layout_t layout;
  int normalized_ndim; /* ROWS only */
} norm_moments_params_t;

/* Partial moments of one group: count, mean, and M2 = sum((x - mean)^2). */
typedef struct {
  double count;
  double mean;
  double m2;
} norm_moments_t;

/* Fills out[g] for every group g (norm_moments_groups() of them). */
int norm_moments(const norm_tensor_t *x, const norm_moments_params_t *p,
                 norm_moments_t *out);
int norm_moments_rows(const norm_tensor_t *x, const norm_moments_params_t *p,
                      norm_moments_t *out, size_t begin, size_t end);
int64_t norm_moments_groups(const norm_tensor_t *x,
                            const norm_moments_params_t *p);

/* Chan et al.'s pairwise merge: *acc becomes the moments of the union of
 * acc's and part's samples. An empty side (count 0) leaves the other. */
void norm_moments_merge(norm_moments_t *acc, const norm_moments_t *part);

/* ---- the rest of the family: Lp, local response, mean-variance ----------
 * Reductions over an arbitrary set of axes (`axes`: bit i set = dim i is
 * reduced, at least one, all below x's rank): a group is one choice of
 * the other dims, N_groups = product of the kept dims, index = the kept
 * dims' row-major index. Double accumulation, any dtypes; y may alias x
 * when the dtypes match. */

/* group_of[i] = the group (the statistic's index, as above) of x's flat
 * element i, for every element: the map from elements to the statistics
 * of a reduction over `axes` (norm_lp_rows, norm_mvn_rows; any norm whose
 * groups are a set of dims of some view of x). The caller owns group_of,
 * one entry per element of x; x's data is not read. NORM_E_AXIS as Lp. */
int norm_axes_groups(const norm_tensor_t *x, unsigned axes, size_t *group_of);

typedef struct {
  double p;      /* > 0 (may be INFINITY); NaN or <= 0: NORM_E_ARG */
  double eps;    /* >= 0, finite */
  unsigned axes; /* reduced dims, as bits */
} norm_lp_params_t;

/* y = x / max(||x||_p, eps) per group (torch F.normalize, ONNX
 * LpNormalization; p = INFINITY: max |x|); norms[g] = ||x||_p, unclamped
 * (may be NULL). A NaN in a group makes its norm and y NaN. An all-zero
 * group gives y = 0, also with eps = 0 (where torch divides 0 by 0).
 * NORM_E_AXIS for an empty or out-of-range axes set. */
int64_t norm_lp_groups(const norm_tensor_t *x, const norm_lp_params_t *p);
int norm_lp_rows(const norm_tensor_t *x, const norm_lp_params_t *p,
                 norm_tensor_t *y, double *norms, size_t begin, size_t end);

typedef enum {
  NORM_LRN_TORCH = 0, /* window [c - size/2, c + (size-1)/2], zero padded */
  NORM_LRN_ONNX = 1,  /* window [c - floor((size-1)/2), c + ceil((size-1)/2)] */
} norm_lrn_convention_t;

typedef struct {
  int64_t size; /* >= 1 */
  double alpha, beta, k;
  norm_lrn_convention_t convention;
} norm_lrn_params_t;

/* y_c = x_c / (k + alpha / size * sum_{c' in window(c)} x_c'^2)^beta on
 * (N, C, *) (torch F.local_response_norm, ONNX LRN), window clipped to
 * [0, C). Groups are (n, spatial position) pairs: N * prod(*), index
 * n * prod(*) + s; square_sum (may be NULL) gets, per element, the window
 * sum (x's shape). NORM_E_CHANNELS for rank < 2, NORM_E_ARG for size < 1,
 * a non-finite alpha, beta, k, an unknown convention, or (C > 4096 only)
 * a clipped window of more than 4096 channels. Cost: C * min(size, 2C)
 * terms per group. */
int64_t norm_lrn_groups(const norm_tensor_t *x);
int norm_lrn_rows(const norm_tensor_t *x, const norm_lrn_params_t *p,
                  norm_tensor_t *y, double *square_sum, size_t begin,
                  size_t end);

typedef struct {
  double eps;    /* >= 0, finite */
  unsigned axes; /* reduced dims, as bits */
} norm_mvn_params_t;

/* y = (x - mean) / (std + eps) per group, std biased (ONNX
 * MeanVarianceNormalization's function body, whose eps is 1e-9); stats:
 * mean, var (biased), rstd = 1 / (std + eps). A constant group with
 * eps = 0 gives y = 0 (as the other norms' constant rows). NORM_E_AXIS and
 * NORM_E_EPS as Lp. */
int64_t norm_mvn_groups(const norm_tensor_t *x, const norm_mvn_params_t *p);
int norm_mvn_rows(const norm_tensor_t *x, const norm_mvn_params_t *p,
                  norm_tensor_t *y, const norm_stats_t *stats, size_t begin,
                  size_t end);

/* ---- backward passes ------------------------------------------------------
 * The gradients of each normalization above: exactly torch.autograd of the
 * forward as this library computes it, in double. Given x and grad_output
 * dy (x's shape, any dtype; NORM_E_GRAD_OUTPUT otherwise), with
 * g = w * dy (w = 1 without a weight) and xhat = (x - mean) * rstd per group:
 *   dx = rstd * (g - mean(g)) - xhat * c,  c = rstd * sum(g * xhat) / D
 * with D = count (biased variance) or count - 1 (unbiased); eps outside the
 * square root: c = sum(g * xhat) / (D * std), and 0 for a constant group
 * (std = 0: its gradient is taken as 0, as torch's std does). RMS norm has
 * no mean: xhat = x * rstd, dx = rstd * g - xhat * rstd * mean(g * xhat).
 * Batch norm in eval mode (and the server's mode "given") normalizes with
 * constants: dx = rstd * g. A group with eps = 0 and no spread, which the
 * forward maps to its bias, gets dx = 0.
 * dx has x's shape, any dtype, and may alias dy when the dtypes match.
 * grads->weight and grads->bias (either may be NULL, as grads may) receive
 * sum(dy * xhat) and sum(dy) per weight entry, ADDED into double arrays of
 * the weight's element count (the normalized shape's for layer and RMS
 * norm, C for the others): zero them first; ranges of groups may use
 * arrays of their own, summed after. RMS norm has no bias (grads->bias must
 * be NULL). Stats are written as the forward writes them. Running
 * statistics are read in eval mode, never updated. Groups and ranges as
 * the forward's (norm_*_groups). */
typedef struct {
  double *weight; /* d loss / d weight, accumulated; NULL: not wanted */
  double *bias;   /* d loss / d bias, accumulated; NULL: not wanted */
} norm_grads_t;

int norm_layer_backward_rows(const norm_tensor_t *x, const norm_tensor_t *dy,
                             const norm_tensor_t *weight,
                             const norm_layer_params_t *p, norm_tensor_t *dx,
                             const norm_grads_t *grads,
                             const norm_stats_t *stats, size_t begin,
                             size_t end);
int norm_rms_backward_rows(const norm_tensor_t *x, const norm_tensor_t *dy,
                           const norm_tensor_t *weight,
                           const norm_rms_params_t *p, norm_tensor_t *dx,
                           const norm_grads_t *grads, const norm_stats_t *stats,
                           size_t begin, size_t end);
int norm_batch_backward_rows(const norm_tensor_t *x, const norm_tensor_t *dy,
                             const norm_tensor_t *weight,
                             const norm_tensor_t *running_mean,
                             const norm_tensor_t *running_var,
                             const norm_batch_params_t *p, norm_tensor_t *dx,
                             const norm_grads_t *grads,
                             const norm_stats_t *stats, size_t begin,
                             size_t end);
int norm_group_backward_rows(const norm_tensor_t *x, const norm_tensor_t *dy,
                             const norm_tensor_t *weight,
                             const norm_group_params_t *p, norm_tensor_t *dx,
                             const norm_grads_t *grads,
                             const norm_stats_t *stats, size_t begin,
                             size_t end);
int norm_instance_backward_rows(const norm_tensor_t *x, const norm_tensor_t *dy,
                                const norm_tensor_t *weight,
                                const norm_instance_params_t *p,
                                norm_tensor_t *dx, const norm_grads_t *grads,
                                const norm_stats_t *stats, size_t begin,
                                size_t end);

/* The family's gradients (contract as above: dx may alias dy, any dtypes,
 * NORM_E_GRAD_OUTPUT for a dy of another shape; no weights; norms and
 * stats written as the forward writes them). Lp, as torch.autograd takes
 * x / x.norm(p).clamp_min(eps) (checked with torch 1.13): with
 * n = ||x||_p >= eps, dx = dy / n - x * |x|^(p-2) * sum(dy * x) / n^(p+1),
 * where x * |x|^(p-2) is 0 at x = 0 (also for p < 2, as torch's
 * norm_backward masks it); p = INFINITY: d n / d x = sgn(x) / t on the t
 * elements with |x| = n (ties share the gradient evenly), 0 elsewhere. Where
 * n < eps (strictly: at n == eps clamp_min passes the gradient to n),
 * dx = dy / eps. An all-zero group with eps = 0 gets dx = 0 (its y = 0 is
 * a constant; torch: NaN). LRN and MVN: exactly the gradient of their
 * formulas above (MVN: the std term taken as 0 for a constant group, as
 * torch's std does; dx = 0 there when eps = 0, the forward's y = 0). */
int norm_lp_backward_rows(const norm_tensor_t *x, const norm_tensor_t *dy,
                          const norm_lp_params_t *p, norm_tensor_t *dx,
                          double *norms, size_t begin, size_t end);
int norm_lrn_backward_rows(const norm_tensor_t *x, const norm_tensor_t *dy,
                           const norm_lrn_params_t *p, norm_tensor_t *dx,
                           size_t begin, size_t end);
int norm_mvn_backward_rows(const norm_tensor_t *x, const norm_tensor_t *dy,
                           const norm_mvn_params_t *p, norm_tensor_t *dx,
                           const norm_stats_t *stats, size_t begin,
                           size_t end);

/* ---- implementation ------------------------------------------------------ */

/* The instruction set the kernels run with: "avx512bf16", "avx512", "avx2"
 * or "base".
 * Chosen once from the CPU (the environment variable NORM_SIMD may name a
 * lower supported one, for tests and benchmarks). Thread-safe. */
const char *norm_simd_name(void);

#ifdef __cplusplus
}
#endif
#endif /* NORM_H */
