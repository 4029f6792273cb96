/* request.h -- a decoded request and its computed result: the structs that
 * carry data from a codec's decoder through compute to a codec's encoder.
 * Every format (JSON, the binary framing, .npy, KServe v2) decodes into
 * request_t and encodes from result_t; compute never sees bytes or text,
 * and encoders read the answer from result_t alone (the request only says
 * what was asked). */
#ifndef NORMD_REQUEST_H
#define NORMD_REQUEST_H

#include <stdbool.h>
#include <stddef.h>

#include "norm.h"
#include "ops.h"

/* Every request field of every operation: its id (FLD_<id>) and its name
 * in JSON bodies, query strings and KServe v2 parameters. Which operation
 * takes which is the `fields` column of OPS_MAP (ops.h). */
#define REQUEST_FIELDS(X)                                                      \
  X(INPUT, "input")                                                            \
  X(GRAD_OUTPUT, "grad_output")                                                \
  X(RESIDUAL, "residual")                                                      \
  X(WEIGHT, "weight")                                                          \
  X(BIAS, "bias")                                                              \
  X(RUNNING_MEAN, "running_mean")                                              \
  X(RUNNING_VAR, "running_var")                                                \
  X(MEAN, "mean")                                                              \
  X(VAR, "var")                                                                \
  X(EPS, "eps")                                                                \
  X(NORMALIZED_SHAPE, "normalized_shape")                                      \
  X(AXIS, "axis")                                                              \
  X(VARIANCE, "variance")                                                      \
  X(EPS_PLACEMENT, "eps_placement")                                            \
  X(NUM_GROUPS, "num_groups")                                                  \
  X(MODE, "mode")                                                              \
  X(MOMENTUM, "momentum")                                                      \
  X(NUM_BATCHES_TRACKED, "num_batches_tracked")                                \
  X(OUTPUT_DTYPE, "output_dtype")                                              \
  X(RETURN, "return")                                                          \
  X(LAYOUT, "layout")                                                          \
  X(PARTS, "parts")                                                            \
  X(BINARY_DATA_OUTPUT, "binary_data_output")                                  \
  X(EXPLAIN, "explain")                                                        \
  X(HISTOGRAM_BINS, "histogram_bins")                                          \
  X(HISTOGRAM_RANGE, "histogram_range")                                        \
  X(TOKENS, "tokens")                                                          \
  X(D, "d")                                                                    \
  X(LAYERS, "layers")                                                          \
  X(NORM, "norm")                                                              \
  X(PLACEMENT, "placement")                                                    \
  X(SEED, "seed")                                                              \
  X(GAIN, "gain")                                                              \
  X(GRADIENTS, "gradients")                                                    \
  X(CLASSES, "classes")                                                        \
  X(P, "p")                                                                    \
  X(SIZE, "size")                                                              \
  X(ALPHA, "alpha")                                                            \
  X(BETA, "beta")                                                              \
  X(K, "k")                                                                    \
  X(CONVENTION, "convention")                                                  \
  X(AXES, "axes")

typedef enum {
#define FIELD_ENUM_(id, name) FLD_##id,
  REQUEST_FIELDS(FIELD_ENUM_)
#undef FIELD_ENUM_
  FLD_COUNT
} field_id_t;

/* A set of fields, as the `fields` column of OPS_MAP writes it. */
#define FIELD(id) (UINT64_C(1) << FLD_##id)

/* What the response carries ("return" field). */
enum {
  RET_OUTPUT = 1u << 0,
  RET_STATS = 1u << 1,
  RET_OUTPUT_STATS = 1u << 2, /* per-group mean/var of the output */
  RET_RUNNING = 1u << 3,      /* updated running stats (batch, train) */
  RET_STEPS = 1u << 4,        /* the intermediate tensors ("explain") */
  RET_HISTOGRAMS = 1u << 5,   /* input and output histograms */
  /* backward: RET_OUTPUT is grad_input */
  RET_GRAD_WEIGHT = 1u << 6,
  RET_GRAD_BIAS = 1u << 7,
};

/* KServe v2 output names, as bits. */
enum {
  V2_OUT_OUTPUT = 1u << 0,
  V2_OUT_MEAN = 1u << 1,
  V2_OUT_VAR = 1u << 2,
  V2_OUT_RSTD = 1u << 3,
  V2_OUT_RMS = 1u << 4,
  V2_OUT_RUNNING_MEAN = 1u << 5,
  V2_OUT_RUNNING_VAR = 1u << 6,
  V2_OUT_GRAD_INPUT = 1u << 7,
  V2_OUT_GRAD_WEIGHT = 1u << 8,
  V2_OUT_GRAD_BIAS = 1u << 9,
  V2_OUT_RESIDUAL_OUT = 1u << 10,
  V2_OUT_NORM = 1u << 11,
};

/* Limits the decoder enforces before allocating. */
typedef struct {
  size_t max_elements;         /* per tensor */
  int max_depth;               /* JSON nesting */
  size_t max_explain_elements; /* largest input "steps" may be asked for */
} limits_t;

/* A tensor of the request; data is malloc'd and owned by the request, or
 * (the input of a binary body, when aligned) borrowed from the body, which
 * outlives the request or is owned by it (body_mem). present == false
 * means the field was absent. */
typedef struct {
  bool present;
  bool borrowed; /* t.data points into the request body: not freed */
  norm_tensor_t t;
} req_tensor_t;

typedef struct {
  op_t op;
  req_tensor_t input, weight, bias, running_mean, running_var;
  req_tensor_t grad_output; /* backward: d loss / d output, input's shape */
  req_tensor_t residual_in; /* "residual": layer / rms fused add, input's shape */
  norm_dtype_t output_dtype; /* defaults to input's dtype */
  unsigned ret;              /* RET_* bits */
  /* The body's allocation when the request owns it (freed with it), else
   * NULL (the caller's, read only). Then a borrowed input may be written. */
  void *body_mem;
  /* Parameters: one set per op, filled with the design's defaults. The
   * trailing-dims form of layer/rms/moments arrives as normalized_shape or
   * axis and is resolved against the input into normalized_ndim. */
  norm_layer_params_t layer;
  norm_rms_params_t rms;
  norm_batch_params_t batch;
  bool batch_momentum_null; /* momentum: null -> cumulative average */
  bool batch_given;         /* mode "given": running_* hold the given mean/var */
  bool binary_output;       /* answer with the binary framing */
  /* KServe v2: the request id to echo, and which outputs to return
   * (V2_OUT_* bits) and which of them as binary data. */
  char *v2_id;
  unsigned v2_outputs, v2_binary;
  norm_group_params_t group;
  norm_instance_params_t instance;
  norm_lp_params_t lp;   /* axes resolved from "axis" against the input */
  norm_lrn_params_t lrn; /* size 0 until given (required) */
  norm_mvn_params_t mvn; /* axes resolved from "axes" against the input */
  norm_moments_params_t moments;
  /* Histograms: bin count, and one range for input and output or each its
   * own. */
  int64_t histogram_bins;
  bool histogram_separate;
  /* OP_RESIDUAL; placements: bit k for norm_residual_placement_t k (pre,
   * post, deepnorm); gradients: backpropagate, with a readout of
   * `classes`. */
  struct {
    int64_t tokens, d, layers;
    int norm; /* norm_residual_norm_t */
    unsigned placements;
    uint64_t seed;
    double eps, gain;
    bool gradients;
    int64_t classes;
  } residual;
  /* OP_MOMENTS_MERGE: nparts arrays of ngroups partial moments, part-major. */
  size_t nparts, ngroups;
  norm_moments_t *parts;
} request_t;

/* One named intermediate tensor of the computation ("explain"). */
typedef struct {
  const char *name; /* static: "mean", "centered", ... */
  int rank;
  int64_t shape[NORM_MAX_RANK];
  size_t n;
  double *data; /* malloc'd */
} step_t;

enum { MAX_STEPS = 8 };

/* A histogram over [lo, hi] in `bins` equal bins; non-finite values are
 * counted apart. */
typedef struct {
  double lo, hi;
  uint64_t *counts; /* malloc'd, bins entries */
  uint64_t nonfinite;
} histogram_t;

/* One placement's curves of the residual experiment, and with gradients
 * its loss and gradient norms (all malloc'd; NULL when not asked). */
typedef struct {
  double *rms, *rel_update, *cosine, *cos_to_input;
  double loss;
  double *grad_w1, *grad_w2, *grad_stream;
} residual_curves_t;

/* The placements of the residual experiment (norm_residual_placement_t). */
enum { RESIDUAL_PLACEMENTS = 3 };

typedef struct {
  /* The output (a backward's grad_input), present when RET_OUTPUT: data
   * malloc'd, or output_in_input: the memory of the tensor it was
   * computed over in place (the input, or a backward's grad_output; owned
   * by the request, freed with it). */
  norm_tensor_t output;
  bool output_in_input;
  /* Backward: d loss / d weight and / d bias (data malloc'd, NULL when the
   * request has no weight / bias), in the weight's / bias's dtype. */
  norm_tensor_t grad_weight, grad_bias;
  /* Fused residual add (layer and RMS norm with a residual): h = input +
   * residual rounded to the input's dtype, the tensor that was normalized,
   * answered as residual_out. Its data is the residual's memory, computed
   * in place (owned by the request); NULL without a residual. */
  norm_tensor_t residual_out;
  size_t ngroups;       /* one stat per normalized group */
  int stats_rank;
  int64_t stats_shape[NORM_MAX_RANK];
  double *mean, *var, *rstd, *rms;  /* NULL when not applicable */
  double *norm;                     /* Lp norm: ||x||_p per slice */
  double *square_sum; /* local response norm, RET_STEPS: window sums, per element */
  double *out_mean, *out_var;       /* RET_OUTPUT_STATS */
  double *out_rms;                  /* RET_OUTPUT_STATS, RMS norm only */
  /* Batch norm in train mode with running statistics: them updated
   * (data malloc'd, the request's own left as they came) and the count of
   * batches, this one included. */
  bool has_running;
  norm_tensor_t running_mean, running_var;
  int64_t num_batches_tracked;
  norm_moments_t *moments;          /* OP_MOMENTS / OP_MOMENTS_MERGE */
  step_t steps[MAX_STEPS];          /* RET_STEPS, in order */
  int nsteps;
  int64_t bins;                     /* RET_HISTOGRAMS */
  histogram_t hist_input, hist_output;
  residual_curves_t curves[RESIDUAL_PLACEMENTS]; /* OP_RESIDUAL, by placement */
} result_t;

/* Defaults for op (eps and friends per the design's table). */
void request_init(request_t *req, op_t op);
void request_free(request_t *req);
void result_free(result_t *res);

#endif
