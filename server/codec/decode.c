/* decode.c -- a parsed JSON document to request_t: each field by its name
 * (REQUEST_FIELDS), taken only by the operations whose field set names it
 * (OPS_MAP), then the checks across fields (the check column). Shared by
 * every codec; see decode.h. Tensors are decode_tensor.c's, the document
 * itself (framing, parse, query string) decode_body.c's. */
#include "decode.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "residual.h"

/* The field names, by id (REQUEST_FIELDS, request.h). */
static const char *const field_names[FLD_COUNT] = {
#define FIELD_NAME_(id, name) [FLD_##id] = name,
    REQUEST_FIELDS(FIELD_NAME_)
#undef FIELD_NAME_
};

/* The element count of a valid tensor. */
static size_t numel_of(const norm_tensor_t *t) {
  size_t numel = 0;
  norm_tensor_check(t, &numel, NULL);
  return numel;
}

static int bad_field(problem_t *prob, const char *field, const char *what) {
  return problem_set(prob, PROBLEM_BAD_FIELD, field, "%s must be %s", field,
                     what);
}

static int get_number(const json_t *v, const char *field, double *out,
                      problem_t *prob) {
  if (!json_is_number(v)) return bad_field(prob, field, "a number");
  *out = json_number_value(v);
  return 0;
}

static int get_integer(const json_t *v, const char *field, int64_t *out,
                       problem_t *prob) {
  if (!json_is_integer(v)) return bad_field(prob, field, "an integer");
  *out = json_integer_value(v);
  return 0;
}

/* A string that must be one of `choices` (NULL-terminated); index out. */
static int get_choice(const json_t *v, const char *field,
                      const char *const *choices, int *out, problem_t *prob) {
  if (json_is_string(v))
    for (int i = 0; choices[i]; i++)
      if (strcmp(json_string_value(v), choices[i]) == 0) {
        *out = i;
        return 0;
      }
  char want[160] = "one of";
  for (int i = 0; choices[i]; i++)
    snprintf(want + strlen(want), sizeof want - strlen(want), "%s \"%s\"",
             i ? "," : "", choices[i]);
  return bad_field(prob, field, want);
}

/* "return": one name or a list; replaces the default set, keeping "steps"
 * if "explain": true came first. */
static int decode_return(const json_t *v, op_kind_t kind, unsigned *ret,
                         problem_t *prob) {
  static const char *const forward[] = {"output", "stats", "output_stats",
                                        "running_stats", "steps", "histograms",
                                        NULL};
  static const unsigned forward_bits[] = {RET_OUTPUT, RET_STATS,
                                          RET_OUTPUT_STATS, RET_RUNNING,
                                          RET_STEPS, RET_HISTOGRAMS};
  static const char *const backward[] = {"grad_input", "grad_weight",
                                         "grad_bias", "stats", "steps", NULL};
  static const unsigned backward_bits[] = {RET_OUTPUT, RET_GRAD_WEIGHT,
                                           RET_GRAD_BIAS, RET_STATS, RET_STEPS};
  int back = kind == OP_KIND_BACKWARD;
  const char *const *names = back ? backward : forward;
  const unsigned *bits = back ? backward_bits : forward_bits;
  unsigned chosen = 0;
  int i = 0;
  if (json_is_string(v)) {
    if (get_choice(v, "return", names, &i, prob) != 0) return -1;
    chosen = bits[i];
  } else if (json_is_array(v)) {
    for (size_t k = 0; k < json_array_size(v); k++) {
      if (get_choice(json_array_get(v, k), "return", names, &i, prob) != 0)
        return -1;
      chosen |= bits[i];
    }
  } else {
    return bad_field(prob, "return",
                     back ? "a list of \"grad_input\", \"grad_weight\", "
                            "\"grad_bias\", \"stats\", \"steps\""
                          : "a list of \"output\", \"stats\", "
                            "\"output_stats\", \"running_stats\", "
                            "\"steps\", \"histograms\"");
  }
  *ret = chosen | (*ret & RET_STEPS);
  return 0;
}

/* The residual experiment's placement: "pre", "post", "deepnorm", "both"
 * (pre and post), or a non-empty list of them. */
static int decode_placements(const json_t *v, request_t *req, problem_t *prob) {
  static const char *const names[] = {"pre", "post", "deepnorm", "both", NULL};
  static const unsigned bits[] = {1u << NORM_RESIDUAL_PRE,
                                  1u << NORM_RESIDUAL_POST,
                                  1u << NORM_RESIDUAL_DEEPNORM,
                                  1u << NORM_RESIDUAL_PRE | 1u << NORM_RESIDUAL_POST};
  int choice = 0;
  if (!json_is_array(v)) {
    if (get_choice(v, "placement", names, &choice, prob) != 0) return -1;
    req->residual.placements = bits[choice];
    return 0;
  }
  if (json_array_size(v) == 0)
    return bad_field(prob, "placement", "a placement or a non-empty list of "
                                        "\"pre\", \"post\", \"deepnorm\"");
  req->residual.placements = 0;
  for (size_t k = 0; k < json_array_size(v); k++) {
    if (get_choice(json_array_get(v, k), "placement", names, &choice, prob) != 0)
      return -1;
    req->residual.placements |= bits[choice];
  }
  return 0;
}

/* normalized_shape: an integer or a list of integers. */
static int decode_normalized_shape(const json_t *v, int64_t *dims, int *n,
                                   problem_t *prob) {
  if (json_is_integer(v)) {
    dims[0] = json_integer_value(v);
    *n = 1;
    return 0;
  }
  if (!json_is_array(v) || json_array_size(v) < 1 ||
      json_array_size(v) > NORM_MAX_RANK)
    return bad_field(prob, "normalized_shape",
                     "an integer or a list of 1 to 8 integers");
  *n = (int)json_array_size(v);
  for (int i = 0; i < *n; i++) {
    if (!json_is_integer(json_array_get(v, (size_t)i)))
      return bad_field(prob, "normalized_shape", "a list of integers");
    dims[i] = json_integer_value(json_array_get(v, (size_t)i));
  }
  return 0;
}

/* parts: [{"count": [...], "mean": [...], "m2": [...]}, ...], all of one
 * length. "shape" and "var" (as /v1/moments returns them) are allowed and
 * ignored, so a moments response can be passed back as a part. */
static int decode_parts(const json_t *v, const limits_t *lim, request_t *req,
                        problem_t *prob) {
  if (!json_is_array(v) || json_array_size(v) == 0)
    return bad_field(prob, "parts", "a non-empty list of partial moments");
  size_t nparts = json_array_size(v);
  const json_t *first = json_array_get(v, 0);
  const json_t *c0 = json_is_object(first) ? json_object_get(first, "count") : NULL;
  size_t ngroups = json_is_array(c0) ? json_array_size(c0) : 0;
  if (ngroups == 0 || nparts > lim->max_elements / ngroups)
    return problem_set(prob, PROBLEM_BAD_FIELD, "parts",
                       "parts: each part needs non-empty \"count\", \"mean\", "
                       "\"m2\" lists (at most %zu values in all)",
                       lim->max_elements);
  req->parts = calloc(nparts * ngroups, sizeof *req->parts);
  if (req->parts == NULL)
    return problem_set(prob, PROBLEM_OUT_OF_MEMORY, "parts", "out of memory");
  req->nparts = nparts;
  req->ngroups = ngroups;
  for (size_t p = 0; p < nparts; p++) {
    const json_t *part = json_array_get(v, p);
    if (!json_is_object(part))
      return bad_field(prob, "parts", "a list of objects");
    const char *key;
    json_t *item;
    json_object_foreach((json_t *)part, key, item) {
      if (strcmp(key, "count") && strcmp(key, "mean") && strcmp(key, "m2") &&
          strcmp(key, "shape") && strcmp(key, "var"))
        return problem_set(prob, PROBLEM_UNKNOWN_FIELD, "parts",
                           "parts[%zu]: unknown field \"%s\"", p, key);
    }
    const char *names[] = {"count", "mean", "m2"};
    for (int k = 0; k < 3; k++) {
      const json_t *arr = json_object_get(part, names[k]);
      if (!json_is_array(arr) || json_array_size(arr) != ngroups)
        return problem_set(prob, PROBLEM_BAD_FIELD, "parts",
                           "parts[%zu].%s must be a list of %zu numbers", p,
                           names[k], ngroups);
      for (size_t g = 0; g < ngroups; g++) {
        double d;
        if (decode_number(json_array_get(arr, g), &d) != 0)
          return problem_set(prob, PROBLEM_BAD_NUMBER, "parts",
                             "parts[%zu].%s[%zu] is not a number", p, names[k], g);
        norm_moments_t *m = &req->parts[p * ngroups + g];
        if (k == 0) m->count = d;
        else if (k == 1) m->mean = d;
        else m->m2 = d;
      }
    }
    for (size_t g = 0; g < ngroups; g++) {
      const norm_moments_t *m = &req->parts[p * ngroups + g];
      if (!(m->count >= 0) || !isfinite(m->count) || m->count != floor(m->count) || !(m->m2 >= 0) ||
          (m->count == 0 && (m->mean != 0 || m->m2 != 0)))
        return problem_set(prob, PROBLEM_BAD_MOMENTS, "parts",
                           "parts[%zu], group %zu: count must be a whole number "
                           ">= 0 and m2 >= 0 (an empty part has mean 0 and m2 0)",
                           p, g);
    }
  }
  return 0;
}

/* Fields that need the input to resolve, kept until all fields are read,
 * and the set of fields the request gave. */
typedef struct {
  const json_t *normalized_shape, *axis;
  const json_t *axes; /* mvn */
  const json_t *output_dtype;
  req_tensor_t mean, var; /* batch norm, mode "given"; moved into req */
  unsigned long long given; /* FIELD() bits */
} deferred_t;

static int decode_field(field_id_t id, const char *name, const json_t *v,
                        decode_ctx_t *ctx, request_t *req, deferred_t *later,
                        problem_t *prob) {
  static const char *const variances[] = {"biased", "unbiased", NULL};
  static const char *const placements[] = {"inside_sqrt", "outside_sqrt", NULL};
  static const char *const modes[] = {"train", "eval", "given", NULL};
  static const char *const layouts[] = {"rows", "channels", NULL};
  static const char *const ranges[] = {"shared", "separate", NULL};
  static const char *const residual_norms[] = {"layer", "rms", NULL};
  static const char *const conventions[] = {"torch", "onnx", NULL};
  double eps = 0;
  int64_t i64 = 0;
  int choice = 0;
  switch (id) {
  case FLD_INPUT: return decode_tensor(ctx, v, name, &req->input, prob);
  case FLD_GRAD_OUTPUT:
    return decode_tensor(ctx, v, name, &req->grad_output, prob);
  case FLD_RESIDUAL: return decode_tensor(ctx, v, name, &req->residual_in, prob);
  case FLD_WEIGHT: return decode_tensor(ctx, v, name, &req->weight, prob);
  case FLD_BIAS: return decode_tensor(ctx, v, name, &req->bias, prob);
  case FLD_RUNNING_MEAN:
    return decode_tensor(ctx, v, name, &req->running_mean, prob);
  case FLD_RUNNING_VAR:
    return decode_tensor(ctx, v, name, &req->running_var, prob);
  case FLD_EPS:
    if (get_number(v, name, &eps, prob) != 0) return -1;
    req->layer.eps = req->rms.eps = req->batch.eps = req->group.eps =
        req->instance.eps = req->residual.eps = req->lp.eps = req->mvn.eps = eps;
    return 0;
  case FLD_NORMALIZED_SHAPE: later->normalized_shape = v; return 0;
  case FLD_AXIS: later->axis = v; return 0;
  case FLD_OUTPUT_DTYPE: later->output_dtype = v; return 0;
  case FLD_VARIANCE:
    if (get_choice(v, name, variances, &choice, prob) != 0) return -1;
    req->layer.variance = (norm_variance_t)choice;
    return 0;
  case FLD_EPS_PLACEMENT:
    if (get_choice(v, name, placements, &choice, prob) != 0) return -1;
    req->layer.eps_placement = (norm_eps_placement_t)choice;
    return 0;
  case FLD_MODE:
    if (get_choice(v, name, modes, &choice, prob) != 0) return -1;
    /* "given" normalizes with the caller's mean and var: eval's formula */
    req->batch.mode = choice == 1 || choice == 2 ? NORM_EVAL : NORM_TRAIN;
    req->batch_given = choice == 2;
    return 0;
  case FLD_MEAN: return decode_tensor(ctx, v, name, &later->mean, prob);
  case FLD_VAR: return decode_tensor(ctx, v, name, &later->var, prob);
  case FLD_EXPLAIN:
    if (!json_is_boolean(v)) return bad_field(prob, name, "true or false");
    if (json_is_true(v)) req->ret |= RET_STEPS;
    return 0;
  case FLD_HISTOGRAM_BINS:
    if (get_integer(v, name, &i64, prob) != 0) return -1;
    if (i64 < 1 || i64 > 1024) return bad_field(prob, name, "an integer in 1..1024");
    req->histogram_bins = i64;
    return 0;
  case FLD_HISTOGRAM_RANGE:
    if (get_choice(v, name, ranges, &choice, prob) != 0) return -1;
    req->histogram_separate = choice == 1;
    return 0;
  case FLD_TOKENS:
  case FLD_D:
  case FLD_LAYERS:
    if (get_integer(v, name, &i64, prob) != 0) return -1;
    if (i64 < (id == FLD_D ? 2 : 1) || i64 > 4096)
      return bad_field(prob, name, id == FLD_D ? "an integer in 2..4096"
                                               : "an integer in 1..4096");
    *(id == FLD_TOKENS ? &req->residual.tokens
      : id == FLD_D    ? &req->residual.d
                       : &req->residual.layers) = i64;
    return 0;
  case FLD_NORM:
    if (get_choice(v, name, residual_norms, &choice, prob) != 0) return -1;
    req->residual.norm = choice;
    return 0;
  case FLD_PLACEMENT: return decode_placements(v, req, prob);
  case FLD_GRADIENTS:
    if (!json_is_boolean(v)) return bad_field(prob, name, "true or false");
    req->residual.gradients = json_is_true(v);
    return 0;
  case FLD_P:
    if (json_is_string(v) && strcmp(json_string_value(v), "Infinity") == 0) {
      req->lp.p = INFINITY;
      return 0;
    }
    if (!json_is_number(v) || !(json_number_value(v) > 0) ||
        !isfinite(json_number_value(v)))
      return bad_field(prob, name, "a positive finite number or \"Infinity\"");
    req->lp.p = json_number_value(v);
    return 0;
  case FLD_SIZE:
    if (get_integer(v, name, &i64, prob) != 0) return -1;
    if (i64 < 1 || i64 > INT32_MAX) return bad_field(prob, name, "an integer >= 1");
    req->lrn.size = i64;
    return 0;
  case FLD_ALPHA:
  case FLD_BETA:
  case FLD_K: {
    double *dst = id == FLD_ALPHA ? &req->lrn.alpha
                  : id == FLD_BETA ? &req->lrn.beta
                                   : &req->lrn.k;
    if (get_number(v, name, dst, prob) != 0) return -1;
    if (!isfinite(*dst)) return bad_field(prob, name, "a finite number");
    return 0;
  }
  case FLD_CONVENTION:
    if (get_choice(v, name, conventions, &choice, prob) != 0) return -1;
    req->lrn.convention = (norm_lrn_convention_t)choice;
    return 0;
  case FLD_AXES: later->axes = v; return 0;
  case FLD_CLASSES:
    if (get_integer(v, name, &i64, prob) != 0) return -1;
    if (i64 < 2 || i64 > 1024) return bad_field(prob, name, "an integer in 2..1024");
    req->residual.classes = i64;
    return 0;
  case FLD_SEED:
    if (get_integer(v, name, &i64, prob) != 0) return -1;
    if (i64 < 0) return bad_field(prob, name, "an integer >= 0");
    req->residual.seed = (uint64_t)i64;
    return 0;
  case FLD_GAIN:
    if (get_number(v, name, &req->residual.gain, prob) != 0) return -1;
    if (!(req->residual.gain >= 0 && req->residual.gain <= 100))
      return bad_field(prob, name, "a number in 0..100");
    return 0;
  case FLD_BINARY_DATA_OUTPUT:
    if (!json_is_boolean(v)) return bad_field(prob, name, "true or false");
    req->binary_output = json_is_true(v);
    return 0;
  case FLD_LAYOUT:
    if (get_choice(v, name, layouts, &choice, prob) != 0) return -1;
    req->moments.layout = (norm_moments_layout_t)choice;
    return 0;
  case FLD_NUM_GROUPS:
    if (get_integer(v, name, &i64, prob) != 0) return -1;
    req->group.num_groups = i64;
    return 0;
  case FLD_MOMENTUM:
    if (json_is_null(v)) {
      req->batch_momentum_null = true;
      return 0;
    }
    return get_number(v, name, &req->batch.momentum, prob);
  case FLD_NUM_BATCHES_TRACKED:
    if (get_integer(v, name, &i64, prob) != 0) return -1;
    if (i64 < 0 || i64 > INT64_MAX / 2)
      return bad_field(prob, name, "an integer in 0..4611686018427387903");
    req->batch.num_batches_tracked = i64;
    return 0;
  case FLD_RETURN:
    return decode_return(v, op_info(req->op)->kind, &req->ret, prob);
  case FLD_PARTS: return decode_parts(v, ctx->lim, req, prob);
  case FLD_COUNT: break;
  }
  return bad_field(prob, name, "known");
}

/* ---- the checks across fields (the check column of OPS_MAP) ----
 * Each runs once every field is read and, for an operation with an
 * input, once the input is known to be there. */

/* Layer and RMS norm, moments: normalized_shape / axis against the input,
 * the trailing dims to reduce (moments by channel reduce no trailing dims). */
static int decode_check_trailing(deferred_t *later, request_t *req,
                                 problem_t *prob) {
  if (req->moments.layout == NORM_MOMENTS_CHANNELS) {
    if (later->normalized_shape || later->axis)
      return problem_set(prob, PROBLEM_CONFLICTING_FIELDS,
                         later->axis ? "axis" : "normalized_shape",
                         "normalized_shape / axis apply to layout \"rows\" only");
    return 0;
  }
  if (later->normalized_shape && later->axis)
    return problem_set(prob, PROBLEM_CONFLICTING_FIELDS, "axis",
                       "give normalized_shape or axis, not both");
  int ndim = 1, err = NORM_OK;
  const norm_tensor_t *x = &req->input.t;
  if (later->normalized_shape) {
    int64_t dims[NORM_MAX_RANK];
    int n = 0;
    if (decode_normalized_shape(later->normalized_shape, dims, &n, prob) != 0)
      return -1;
    err = norm_ndim_from_shape(x, dims, n, &ndim);
    if (err != NORM_OK) return problem_from_norm(prob, err, "normalized_shape");
  } else if (later->axis) {
    int64_t axis = 0;
    if (get_integer(later->axis, "axis", &axis, prob) != 0) return -1;
    err = norm_ndim_from_axis(x, axis, &ndim);
    if (err != NORM_OK) return problem_from_norm(prob, err, "axis");
  }
  req->layer.normalized_ndim = req->rms.normalized_ndim =
      req->moments.normalized_ndim = ndim;
  return 0;
}

/* Batch norm mode "given": mean and var (per channel) stand where eval's
 * running statistics do, and nothing is updated. They belong to that mode
 * only, and running stats do not mix with it. Takes the given tensors out
 * of *later. */
static int decode_check_given(deferred_t *later, request_t *req,
                              problem_t *prob) {
  if (!req->batch_given) {
    if (later->mean.present || later->var.present)
      return problem_set(prob, PROBLEM_CONFLICTING_FIELDS,
                         later->mean.present ? "mean" : "var",
                         "mean and var are given with \"mode\": \"given\" only");
    return 0;
  }
  if (req->running_mean.present || req->running_var.present)
    return problem_set(prob, PROBLEM_CONFLICTING_FIELDS, "running_mean",
                       "mode \"given\" takes mean and var, not running stats");
  if (!later->mean.present || !later->var.present)
    return problem_set(prob, PROBLEM_MISSING_FIELD,
                       later->mean.present ? "var" : "mean",
                       "mode \"given\" needs both mean and var");
  req->running_mean = later->mean;
  req->running_var = later->var;
  memset(&later->mean, 0, sizeof later->mean);
  memset(&later->var, 0, sizeof later->var);
  return 0;
}

/* A set of distinct axes of x (an integer or a list; negative counts from
 * the end) as bits, from `v`, or `dflt` when v is NULL. */
static int axes_bits(const json_t *v, const norm_tensor_t *x, const char *field,
                     unsigned dflt, unsigned *out, problem_t *prob) {
  *out = 0;
  if (v == NULL) {
    *out = dflt;
    return 0;
  }
  size_t n = json_is_array(v) ? json_array_size(v) : 1;
  if (n == 0 || (!json_is_array(v) && !json_is_integer(v)))
    return bad_field(prob, field, "an integer or a non-empty list of distinct integers");
  for (size_t i = 0; i < n; i++) {
    const json_t *a = json_is_array(v) ? json_array_get(v, i) : v;
    if (!json_is_integer(a))
      return bad_field(prob, field, "an integer or a list of distinct integers");
    int64_t axis = json_integer_value(a);
    if (axis < -(int64_t)x->rank || axis >= x->rank)
      return problem_from_norm(prob, NORM_E_AXIS, field);
    if (axis < 0) axis += x->rank;
    if (*out & (1u << axis))
      return bad_field(prob, field, "a list of distinct axes");
    *out |= 1u << axis;
  }
  return 0;
}

/* Lp normalization: the axes of "axis" (default the last). */
static int decode_check_lp(deferred_t *later, request_t *req, problem_t *prob) {
  const norm_tensor_t *x = &req->input.t;
  return axes_bits(later->axis, x, "axis", 1u << (x->rank - 1), &req->lp.axes,
                   prob);
}

/* Local response norm: size has no default. */
static int decode_check_lrn(deferred_t *later, request_t *req, problem_t *prob) {
  if (!(later->given & FIELD(SIZE)))
    return problem_set(prob, PROBLEM_MISSING_FIELD, "size",
                       "\"size\" is required for local response norm (the "
                       "channel window)");
  if (req->input.t.rank >= 2 && req->input.t.shape[1] > 4096 && req->lrn.size > 4096)
    return bad_field(prob, "size", "at most 4096 when the input has more than 4096 channels");
  return 0;
}

/* Mean-variance normalization: "axes", by default ONNX's [0, 2, 3] for a
 * rank-4 input; other ranks name theirs. */
static int decode_check_mvn(deferred_t *later, request_t *req, problem_t *prob) {
  const norm_tensor_t *x = &req->input.t;
  if (later->axes == NULL && x->rank != 4)
    return problem_set(prob, PROBLEM_MISSING_FIELD, "axes",
                       "\"axes\" is required for a rank-%d input (the "
                       "default [0, 2, 3] is for rank 4)", x->rank);
  return axes_bits(later->axes, x, "axes", 1u | 4u | 8u, &req->mvn.axes, prob);
}

/* Group norm: num_groups has no default. */
static int decode_check_groups(deferred_t *later, request_t *req,
                               problem_t *prob) {
  (void)req;
  if (!(later->given & FIELD(NUM_GROUPS)))
    return problem_set(prob, PROBLEM_MISSING_FIELD, "num_groups",
                       "\"num_groups\" is required for group norm");
  return 0;
}

/* Moments merge: the parts are the request. */
static int decode_check_parts(deferred_t *later, request_t *req,
                              problem_t *prob) {
  (void)later;
  if (req->parts == NULL)
    return problem_set(prob, PROBLEM_MISSING_FIELD, "parts",
                       "\"parts\" is required");
  return 0;
}

typedef int (*check_fn)(deferred_t *later, request_t *req, problem_t *prob);
static const check_fn checks[OP_COUNT] = {
#define OP_CHECK_(id, name, route, model, kind, norm, takes, answers, metric, fields, \
                  check, ...)                                                   \
  [OP_##id] = check,
    OPS_MAP(OP_CHECK_)
#undef OP_CHECK_
};

int decode_request(decode_ctx_t *ctx, const json_t *root, op_t op,
                   request_t *req, problem_t *prob) {
  int rc = 0;
  deferred_t later;
  memset(&later, 0, sizeof later);
  const unsigned long long takes = op_info(op)->fields;
  int input_given = req->input.present; /* from a .npy body */
  if (input_given) later.given |= FIELD(INPUT);
  const char *key;
  json_t *value;
  json_object_foreach((json_t *)root, key, value) {
    int f = 0;
    while (f < FLD_COUNT &&
           !(strcmp(field_names[f], key) == 0 && (takes & (1ull << f))))
      f++;
    if (f == FLD_COUNT) {
      rc = problem_set(prob, PROBLEM_UNKNOWN_FIELD, key,
                       "unknown field \"%s\" for %s", key, op_name(op));
      goto done;
    }
    if (input_given && f == FLD_INPUT) {
      rc = problem_set(prob, PROBLEM_CONFLICTING_FIELDS, "input",
                       "the input is the body; it cannot also be a parameter");
      goto done;
    }
    later.given |= 1ull << f;
    if ((rc = decode_field((field_id_t)f, key, value, ctx, req, &later, prob)) != 0)
      goto done;
  }
  if (ctx->bin != NULL && ctx->bin_pos != ctx->bin_len) {
    rc = problem_set(prob, PROBLEM_BINARY_LEFT_OVER, NULL,
                     "the body has %zu binary bytes after the header but its "
                     "tensors use %zu", ctx->bin_len, ctx->bin_pos);
    goto done;
  }
  if (takes & FIELD(INPUT)) {
    if (!req->input.present) {
      rc = problem_set(prob, PROBLEM_MISSING_FIELD, "input", "\"input\" is required");
      goto done;
    }
    if ((takes & FIELD(GRAD_OUTPUT)) && !req->grad_output.present) {
      rc = problem_set(prob, PROBLEM_MISSING_FIELD, "grad_output",
                       "\"grad_output\" is required: d loss / d output, a "
                       "tensor of the input's shape");
      goto done;
    }
    req->output_dtype = req->input.t.dtype;
    if (later.output_dtype &&
        (!json_is_string(later.output_dtype) ||
         norm_dtype_from_name(json_string_value(later.output_dtype),
                              &req->output_dtype) != NORM_OK)) {
      rc = problem_set(prob, PROBLEM_UNKNOWN_DTYPE, "output_dtype",
                       "output_dtype must be one of float32, float64, float16, "
                       "bfloat16");
      goto done;
    }
    if ((req->ret & RET_STEPS) &&
        numel_of(&req->input.t) > ctx->lim->max_explain_elements) {
      rc = problem_set(prob, PROBLEM_EXPLAIN_TOO_LARGE, "explain",
                       "steps are returned for inputs of at most %zu elements "
                       "(max_explain_elements)", ctx->lim->max_explain_elements);
      goto done;
    }
  }
  if (checks[op] != NULL) rc = checks[op](&later, req, prob);
done:
  free(later.mean.t.data);
  free(later.var.t.data);
  return rc;
}
