/* ops.h -- the one list of operations. Everything that enumerates
 * operations reads OPS_MAP: the op_t enum (below), the /v1 routes
 * (router.c), the KServe v2 models (codec_kserve.c), the body formats each
 * takes and answers (service.c), the metrics label (metrics.c), the request
 * fields it accepts (decode.c), its cross-field check and its compute
 * function (compute.c), and /v1/info. tests/unit/check_ops.c checks the
 * list against api/openapi.yaml.
 *
 * To add an operation: one row here, its fields in REQUEST_FIELDS
 * (request.h) if it has new ones, its check in decode.c (or NULL) and its
 * compute function in compute.c. Nothing else lists operations. */
#ifndef NORMD_OPS_H
#define NORMD_OPS_H

/* The columns of a row:
 *   id       OP_<id> in op_t (the column lists below are the macro's
 *            parameters, in order)
 *   name     the op's name in logs, errors and /v1/info ("layer")
 *   route    its POST route under /v1
 *   model    its KServe v2 model name, or NULL (no /v2 model)
 *   kind     OP_KIND_NORM (a normalization: listed in /v1/info "norms",
 *            may explain itself), OP_KIND_BACKWARD (a normalization's
 *            gradients: grad_output in, grad_input, grad_weight, grad_bias
 *            out), OP_KIND_STATS (moments), or OP_KIND_EXPERIMENT (the
 *            residual stack)
 *   norm     the op whose normalization this is: the op itself, or for a
 *            backward the forward it differentiates (its parameters, its
 *            groups and its explain view are the forward's)
 *   takes    the body formats it reads (codec.h: codecs_all: JSON, framed,
 *            .npy; codecs_no_npy: JSON and framed, for ops with no input
 *            tensor, where a .npy body would have nothing to be, or with
 *            more than one, which one .npy file cannot hold)
 *   answers  the formats it answers (codecs_no_npy for ops with no output
 *            tensor: a .npy answer would have nothing to hold)
 *   metric   its kind label in normd_elements_normalized_total, or NULL
 *   fields   the request fields it accepts, FIELD(...) bits of
 *            REQUEST_FIELDS (request.h); any other field is 422
 *            unknown_field
 *   check    decode.c: its checks across fields once all are read (what is
 *            required beyond "input", what must agree with what), or NULL
 *   compute  compute.c (or simulate.c): request in, result out */
#define OPS_MAP(X)                                                              \
  X(LAYER, "layer", "/v1/norm/layer", "layer_norm", OP_KIND_NORM, LAYER,        \
    codecs_all, codecs_all, "layer", FIELDS_LAYER | FIELD(RESIDUAL),            \
    decode_check_trailing, compute_layer)                                                              \
  X(RMS, "rms", "/v1/norm/rms", "rms_norm", OP_KIND_NORM, RMS, codecs_all,      \
    codecs_all, "rms", FIELDS_RMS | FIELD(RESIDUAL), decode_check_trailing,     \
    compute_rms)                                                                \
  X(BATCH, "batch", "/v1/norm/batch", "batch_norm", OP_KIND_NORM, BATCH,        \
    codecs_all, codecs_all, "batch", FIELDS_BATCH, decode_check_given,          \
    compute_batch)                                                              \
  X(GROUP, "group", "/v1/norm/group", "group_norm", OP_KIND_NORM, GROUP,        \
    codecs_all, codecs_all, "group", FIELDS_GROUP, decode_check_groups,         \
    compute_group)                                                              \
  X(INSTANCE, "instance", "/v1/norm/instance", "instance_norm", OP_KIND_NORM,   \
    INSTANCE, codecs_all, codecs_all, "instance", FIELDS_INSTANCE, NULL,        \
    compute_instance)                                                           \
  X(MOMENTS, "moments", "/v1/moments", NULL, OP_KIND_STATS, MOMENTS,            \
    codecs_all, codecs_no_npy, "moments", FIELDS_MOMENTS,                       \
    decode_check_trailing, compute_moments)                                     \
  X(MOMENTS_MERGE, "moments_merge", "/v1/moments/merge", NULL, OP_KIND_STATS,   \
    MOMENTS_MERGE, codecs_no_npy, codecs_no_npy, NULL, FIELD(PARTS),            \
    decode_check_parts, compute_merge)                                          \
  X(RESIDUAL, "residual", "/v1/residual/simulate", NULL, OP_KIND_EXPERIMENT,    \
    RESIDUAL, codecs_no_npy, codecs_no_npy, NULL, FIELDS_RESIDUAL, NULL,        \
    simulate_run)                                                               \
  X(LAYER_BACKWARD, "layer_backward", "/v1/norm/layer/backward",                \
    "layer_norm_backward", OP_KIND_BACKWARD, LAYER, codecs_no_npy,              \
    codecs_no_npy, "layer_backward", FIELDS_LAYER | FIELD(GRAD_OUTPUT),         \
    decode_check_trailing, compute_layer_backward)                              \
  X(RMS_BACKWARD, "rms_backward", "/v1/norm/rms/backward", "rms_norm_backward", \
    OP_KIND_BACKWARD, RMS, codecs_no_npy, codecs_no_npy, "rms_backward",        \
    FIELDS_RMS | FIELD(GRAD_OUTPUT), decode_check_trailing,                     \
    compute_rms_backward)                                                       \
  X(BATCH_BACKWARD, "batch_backward", "/v1/norm/batch/backward",                \
    "batch_norm_backward", OP_KIND_BACKWARD, BATCH, codecs_no_npy,              \
    codecs_no_npy, "batch_backward", FIELDS_BATCH | FIELD(GRAD_OUTPUT),         \
    decode_check_given, compute_batch_backward)                                 \
  X(GROUP_BACKWARD, "group_backward", "/v1/norm/group/backward",                \
    "group_norm_backward", OP_KIND_BACKWARD, GROUP, codecs_no_npy,              \
    codecs_no_npy, "group_backward", FIELDS_GROUP | FIELD(GRAD_OUTPUT),         \
    decode_check_groups, compute_group_backward)                                \
  X(INSTANCE_BACKWARD, "instance_backward", "/v1/norm/instance/backward",       \
    "instance_norm_backward", OP_KIND_BACKWARD, INSTANCE, codecs_no_npy,        \
    codecs_no_npy, "instance_backward", FIELDS_INSTANCE | FIELD(GRAD_OUTPUT),   \
    NULL, compute_instance_backward)                                            \
  X(LP, "lp", "/v1/norm/lp", "lp_norm", OP_KIND_NORM, LP, codecs_all,           \
    codecs_all, "lp", FIELDS_LP | FIELDS_EXPLAIN,                               \
    decode_check_lp, compute_lp)                                                \
  X(LRN, "lrn", "/v1/norm/lrn", "lrn", OP_KIND_NORM, LRN, codecs_all,           \
    codecs_all, "lrn", FIELDS_LRN | FIELDS_EXPLAIN,                             \
    decode_check_lrn, compute_lrn)                                              \
  X(MVN, "mvn", "/v1/norm/mvn", "mvn", OP_KIND_NORM, MVN, codecs_all,           \
    codecs_all, "mvn", FIELDS_MVN | FIELDS_EXPLAIN,                             \
    decode_check_mvn, compute_mvn)                                              \
  X(LP_BACKWARD, "lp_backward", "/v1/norm/lp/backward", "lp_norm_backward",     \
    OP_KIND_BACKWARD, LP, codecs_no_npy, codecs_no_npy, "lp_backward",          \
    FIELDS_LP | FIELD(GRAD_OUTPUT), decode_check_lp, compute_lp_backward)       \
  X(LRN_BACKWARD, "lrn_backward", "/v1/norm/lrn/backward", "lrn_backward",      \
    OP_KIND_BACKWARD, LRN, codecs_no_npy, codecs_no_npy, "lrn_backward",        \
    FIELDS_LRN | FIELD(GRAD_OUTPUT), decode_check_lrn, compute_lrn_backward)    \
  X(MVN_BACKWARD, "mvn_backward", "/v1/norm/mvn/backward", "mvn_backward",      \
    OP_KIND_BACKWARD, MVN, codecs_no_npy, codecs_no_npy, "mvn_backward",        \
    FIELDS_MVN | FIELD(GRAD_OUTPUT), decode_check_mvn, compute_mvn_backward)

/* The field sets of the rows. */
/* What a forward norm may be asked for beyond its output (explain.c). */
#define FIELDS_EXPLAIN                                                         \
  (FIELD(RETURN) | FIELD(EXPLAIN) | FIELD(HISTOGRAM_BINS) |                    \
   FIELD(HISTOGRAM_RANGE))
#define FIELDS_NORM                                                            \
  (FIELD(INPUT) | FIELD(WEIGHT) | FIELD(EPS) | FIELD(OUTPUT_DTYPE) |           \
   FIELD(BINARY_DATA_OUTPUT) | FIELDS_EXPLAIN)
#define FIELDS_TRAILING (FIELD(NORMALIZED_SHAPE) | FIELD(AXIS))
#define FIELDS_LAYER                                                           \
  (FIELDS_NORM | FIELDS_TRAILING | FIELD(BIAS) | FIELD(VARIANCE) |             \
   FIELD(EPS_PLACEMENT))
#define FIELDS_RMS (FIELDS_NORM | FIELDS_TRAILING)
#define FIELDS_BATCH                                                           \
  (FIELDS_NORM | FIELD(BIAS) | FIELD(RUNNING_MEAN) | FIELD(RUNNING_VAR) |      \
   FIELD(MEAN) | FIELD(VAR) | FIELD(MODE) | FIELD(MOMENTUM) |                  \
   FIELD(NUM_BATCHES_TRACKED))
#define FIELDS_GROUP (FIELDS_NORM | FIELD(BIAS) | FIELD(NUM_GROUPS))
#define FIELDS_INSTANCE (FIELDS_NORM | FIELD(BIAS))
/* The rest of the family has no weight and bias. Its forwards take
 * FIELDS_EXPLAIN as the five do (their rows add it); its backwards answer
 * grad_input and the stats, with no return or explain steps. */
#define FIELDS_FAMILY                                                          \
  (FIELD(INPUT) | FIELD(OUTPUT_DTYPE) | FIELD(BINARY_DATA_OUTPUT))
#define FIELDS_LP (FIELDS_FAMILY | FIELD(EPS) | FIELD(P) | FIELD(AXIS))
#define FIELDS_LRN                                                             \
  (FIELDS_FAMILY | FIELD(SIZE) | FIELD(ALPHA) | FIELD(BETA) | FIELD(K) |       \
   FIELD(CONVENTION))
#define FIELDS_MVN (FIELDS_FAMILY | FIELD(EPS) | FIELD(AXES))
#define FIELDS_MOMENTS (FIELD(INPUT) | FIELDS_TRAILING | FIELD(LAYOUT))
#define FIELDS_RESIDUAL                                                        \
  (FIELD(EPS) | FIELD(TOKENS) | FIELD(D) | FIELD(LAYERS) | FIELD(NORM) |       \
   FIELD(PLACEMENT) | FIELD(SEED) | FIELD(GAIN) | FIELD(GRADIENTS) |           \
   FIELD(CLASSES))

typedef enum {
#define OP_ENUM_(id, ...) OP_##id,
  OPS_MAP(OP_ENUM_)
#undef OP_ENUM_
  OP_COUNT
} op_t;

typedef enum {
  OP_KIND_NORM,
  OP_KIND_BACKWARD,
  OP_KIND_STATS,
  OP_KIND_EXPERIMENT
} op_kind_t;

/* The data columns of a row (the function columns are read where they are
 * called: decode.c, compute.c). */
typedef struct {
  const char *name, *route, *model;
  op_kind_t kind;
  op_t norm;
  const char *metric;
  unsigned long long fields; /* FIELD(...) bits */
} op_info_t;

/* The row of op (op < OP_COUNT). */
const op_info_t *op_info(op_t op);

/* The op's name in URLs, metrics and info: "layer", ..., "moments";
 * "unknown" past the list. */
const char *op_name(op_t op);


#endif
