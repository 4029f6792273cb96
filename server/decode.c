/* decode.c -- JSON documents to request_t: the field table of the /v1
 * routes, tensors (flat, nested, or binary from a framed body), and the
 * checks across fields. Shared by every codec; see decode.h. */
#include "decode.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmt.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "binary tensors are little-endian on the wire; this host is not"
#endif

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

/* One element: a JSON number or a non-finite spelling. */
int decode_number(const json_t *v, double *out) {
  if (json_is_number(v)) {
    *out = json_number_value(v);
    return 0;
  }
  if (json_is_string(v) && fmt_parse_nonfinite(json_string_value(v), out))
    return 0;
  return -1;
}

static int alloc_tensor_data(req_tensor_t *out, const char *field,
                             const limits_t *lim, size_t *numel,
                             problem_t *prob) {
  size_t nbytes;
  int err = norm_tensor_check(&out->t, numel, &nbytes);
  if (err != NORM_OK) return problem_from_norm(prob, err, field);
  if (*numel > lim->max_elements)
    return problem_set(prob, PROBLEM_TOO_MANY_ELEMENTS, field,
                       "%s has %zu elements; the limit is %zu", field, *numel,
                       lim->max_elements);
  out->t.data = malloc(nbytes);
  if (out->t.data == NULL)
    return problem_set(prob, PROBLEM_OUT_OF_MEMORY, field, "out of memory");
  out->present = true;
  return 0;
}

/* Nested arrays: infer the shape from the first element at each level. */
static int nested_shape(const json_t *v, norm_tensor_t *t, const char *field,
                        problem_t *prob) {
  t->rank = 0;
  while (json_is_array(v)) {
    if (t->rank == NORM_MAX_RANK)
      return problem_from_norm(prob, NORM_E_RANK, field);
    t->shape[t->rank++] = (int64_t)json_array_size(v);
    if (json_array_size(v) == 0) break;
    v = json_array_get(v, 0);
  }
  return 0;
}

/* Copies nested arrays into t (row-major), checking every level has the
 * inferred length (ragged arrays are refused). */
static int nested_fill(const json_t *v, norm_tensor_t *t, int dim, size_t *pos,
                       const char *field, problem_t *prob) {
  if (dim == t->rank) {
    double d;
    if (decode_number(v, &d) != 0)
      return problem_set(prob, PROBLEM_BAD_NUMBER, field,
                         "%s: element %zu is not a number", field, *pos);
    norm_tensor_set(t, (*pos)++, d);
    return 0;
  }
  if (!json_is_array(v) || (int64_t)json_array_size(v) != t->shape[dim])
    return problem_set(prob, PROBLEM_RAGGED_TENSOR, field,
                       "%s: nested arrays are ragged (expected %lld elements "
                       "at depth %d)", field, (long long)t->shape[dim], dim);
  for (size_t i = 0; i < json_array_size(v); i++)
    if (nested_fill(json_array_get(v, i), t, dim + 1, pos, field, prob) != 0)
      return -1;
  return 0;
}

/* data has `count` elements where the shape holds numel. */
static int data_length_problem(problem_t *prob, const char *field, size_t numel,
                               size_t count) {
  if (count > numel)
    return problem_set(prob, PROBLEM_DATA_LENGTH, field,
                       "%s: data has more than the %zu elements of its shape",
                       field, numel);
  return problem_set(prob, PROBLEM_DATA_LENGTH, field,
                     "%s: shape holds %zu elements but data has %zu", field,
                     numel, count);
}

/* "[2,2]" (with ",..." when more dims follow) into buf. */
static const char *dims_text(char *buf, size_t cap, const int64_t *dims, int n,
                             int more) {
  size_t o = (size_t)snprintf(buf, cap, "[");
  for (int i = 0; i < n && o < cap; i++)
    o += (size_t)snprintf(buf + o, cap - o, "%s%lld", i ? "," : "",
                          (long long)dims[i]);
  if (o < cap) snprintf(buf + o, cap - o, "%s]", more ? ",..." : "");
  return buf;
}

/* A tensor object's data nested as dims (rank levels; `more` when deeper
 * than those) must be flat (rank <= 1) or nested exactly as its shape:
 * 0, or the problem. One check and one message for both paths (numarray
 * and jansson), so they answer alike. */
static int nesting_check(problem_t *prob, const char *field,
                         const norm_tensor_t *t, const int64_t *dims, int rank,
                         int more) {
  if (rank <= 1 || (rank == t->rank && !more &&
                    memcmp(dims, t->shape, (size_t)rank * sizeof dims[0]) == 0))
    return 0;
  char got[192], want[192];
  return problem_set(prob, PROBLEM_DATA_LENGTH, field,
                     "%s: data is nested as %s but shape is %s; give data "
                     "flat (row-major) or nested exactly as the shape",
                     field, dims_text(got, sizeof got, dims, rank, more),
                     dims_text(want, sizeof want, t->shape, t->rank, 0));
}

/* A tensor object's jansson `data` into t (row-major): flat (an array of
 * numbers, product(shape) of them) or nested exactly as the shape, which
 * the lengths of the first element at each level must match (ragged
 * arrays below them are refused by nested_fill). */
static int data_fill(const json_t *data, norm_tensor_t *t, size_t numel,
                     const char *field, problem_t *prob) {
  int64_t dims[NORM_MAX_RANK] = {0};
  int rank = 0, more = 0;
  for (const json_t *v = data; json_is_array(v);
       v = json_array_size(v) ? json_array_get(v, 0) : NULL) {
    if (rank == NORM_MAX_RANK) {
      more = 1;
      break;
    }
    dims[rank++] = (int64_t)json_array_size(v);
  }
  size_t pos = 0;
  if (nesting_check(prob, field, t, dims, rank, more) != 0) return -1;
  if (rank > 1) return nested_fill(data, t, 0, &pos, field, prob);
  size_t count = json_array_size(data);
  if (count != numel) return data_length_problem(prob, field, numel, count);
  for (; pos < count; pos++) {
    const json_t *v = json_array_get(data, pos);
    double d;
    if (json_is_array(v))
      return problem_set(prob, PROBLEM_RAGGED_TENSOR, field,
                         "%s: data[%zu] is an array among numbers (give data "
                         "flat, or nested exactly as the shape)", field, pos);
    if (decode_number(v, &d) != 0)
      return problem_set(prob, PROBLEM_BAD_NUMBER, field,
                         "%s: data[%zu] is not a number (non-finite values "
                         "are written \"NaN\", \"Infinity\", \"-Infinity\")",
                         field, pos);
    norm_tensor_set(t, pos, d);
  }
  return 0;
}

/* The binary_data_size bytes of a tensor from the framed body's tail. */
static int binary_fill(decode_ctx_t *ctx, const json_t *params, req_tensor_t *out,
                       size_t nbytes, const char *field, problem_t *prob) {
  const char *key;
  json_t *item;
  json_object_foreach((json_t *)params, key, item) {
    if (strcmp(key, "binary_data_size") != 0)
      return problem_set(prob, PROBLEM_UNKNOWN_FIELD, field,
                         "%s.parameters: unknown parameter \"%s\"", field, key);
  }
  const json_t *size = json_object_get(params, "binary_data_size");
  if (!json_is_integer(size) || json_integer_value(size) < 0)
    return problem_set(prob, PROBLEM_BAD_FIELD, field,
                       "%s.parameters.binary_data_size must be an integer >= 0",
                       field);
  if (ctx->bin == NULL)
    return problem_set(prob, PROBLEM_BINARY_WITHOUT_FRAMING, field,
                       "%s has binary_data_size but the body has no binary "
                       "part (send Content-Type: application/octet-stream with "
                       "Inference-Header-Content-Length)", field);
  uint64_t n = (uint64_t)json_integer_value(size);
  if (n != nbytes)
    return problem_set(prob, PROBLEM_BINARY_SIZE_MISMATCH, field,
                       "%s: binary_data_size is %llu but shape x dtype is %zu "
                       "bytes", field, (unsigned long long)n, nbytes);
  if (nbytes > ctx->bin_len - ctx->bin_pos)
    return problem_set(prob, PROBLEM_BINARY_TRUNCATED, field,
                       "%s: needs %zu bytes but only %zu remain in the body",
                       field, nbytes, ctx->bin_len - ctx->bin_pos);
  const char *src = ctx->bin + ctx->bin_pos;
  ctx->bin_pos += nbytes;
  /* The input is only read, so an aligned one is used in place (no copy);
   * other tensors may be updated (running stats) and are copied. Bytes are
   * little-endian, as the host. */
  if (strcmp(field, "input") == 0 &&
      (uintptr_t)src % norm_dtype_size(out->t.dtype) == 0) {
    free(out->t.data);
    out->t.data = (void *)src;
    out->borrowed = true;
  } else {
    memcpy(out->t.data, src, nbytes);
  }
  return 0;
}

int decode_tensor(decode_ctx_t *ctx, const json_t *v, const char *field,
                  req_tensor_t *out, problem_t *prob) {
  size_t numel, nbytes, pos = 0;
  const limits_t *lim = ctx->lim;
  if (out->present)
    return problem_set(prob, PROBLEM_CONFLICTING_FIELDS, field,
                       "%s is given twice", field);
  out->t.dtype = NORM_F32;
  const numarray_t *text = numarray_of(&ctx->arrays, v);
  if (text != NULL) { /* a nested array on the fast path */
    out->t.rank = text->rank;
    memcpy(out->t.shape, text->shape, sizeof text->shape);
    if (alloc_tensor_data(out, field, lim, &numel, prob) != 0) return -1;
    numarray_fill(text, &out->t);
    return 0;
  }
  if (json_is_array(v)) {
    if (nested_shape(v, &out->t, field, prob) != 0) return -1;
    if (alloc_tensor_data(out, field, lim, &numel, prob) != 0) return -1;
    return nested_fill(v, &out->t, 0, &pos, field, prob);
  }
  if (!json_is_object(v))
    return problem_set(prob, PROBLEM_BAD_TENSOR, field,
                       "%s must be a tensor object {\"shape\", \"dtype\", "
                       "\"data\"} or a nested array of numbers", field);
  const char *key;
  json_t *item;
  json_object_foreach((json_t *)v, key, item) {
    if (strcmp(key, "shape") && strcmp(key, "dtype") && strcmp(key, "data") &&
        strcmp(key, "parameters"))
      return problem_set(prob, PROBLEM_UNKNOWN_FIELD, field,
                         "%s: unknown tensor field \"%s\" (expected shape, "
                         "dtype, data)", field, key);
  }
  const json_t *shape = json_object_get(v, "shape");
  const json_t *dtype = json_object_get(v, "dtype");
  const json_t *data = json_object_get(v, "data");
  const json_t *params = json_object_get(v, "parameters");
  if (params != NULL && !json_is_object(params))
    return problem_set(prob, PROBLEM_BAD_TENSOR, field,
                       "%s.parameters must be an object", field);
  const numarray_t *data_text = numarray_of(&ctx->arrays, data);
  if (!json_is_array(shape) || (data != NULL) == (params != NULL) ||
      (data != NULL && !json_is_array(data) && data_text == NULL))
    return problem_set(prob, PROBLEM_BAD_TENSOR, field,
                       "%s needs \"shape\" (array of integers) and either "
                       "\"data\" (array of numbers) or \"parameters\": "
                       "{\"binary_data_size\": bytes}", field);
  if (dtype != NULL) {
    if (!json_is_string(dtype) ||
        norm_dtype_from_name(json_string_value(dtype), &out->t.dtype) != NORM_OK)
      return problem_set(prob, PROBLEM_UNKNOWN_DTYPE, field,
                         "%s: dtype must be one of float32, float64, float16, "
                         "bfloat16", field);
  }
  size_t rank = json_array_size(shape);
  if (rank < 1 || rank > NORM_MAX_RANK)
    return problem_from_norm(prob, NORM_E_RANK, field);
  out->t.rank = (int)rank;
  for (size_t i = 0; i < rank; i++) {
    const json_t *d = json_array_get(shape, i);
    if (!json_is_integer(d))
      return problem_set(prob, PROBLEM_BAD_SHAPE, field,
                         "%s: shape[%zu] is not an integer", field, i);
    out->t.shape[i] = json_integer_value(d);
  }
  if (alloc_tensor_data(out, field, lim, &numel, prob) != 0) return -1;
  nbytes = numel * norm_dtype_size(out->t.dtype);
  if (params != NULL) return binary_fill(ctx, params, out, nbytes, field, prob);
  if (data_text != NULL) {
    if (nesting_check(prob, field, &out->t, data_text->shape, data_text->rank,
                      0) != 0)
      return -1;
    if (data_text->count != numel)
      return data_length_problem(prob, field, numel, data_text->count);
    numarray_fill(data_text, &out->t);
    return 0;
  }
  return data_fill(data, &out->t, numel, field, prob);
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
static int decode_return(const json_t *v, unsigned *ret, problem_t *prob) {
  static const char *const names[] = {"output", "stats", "output_stats",
                                      "running_stats", "steps", "histograms",
                                      NULL};
  static const unsigned bits[] = {RET_OUTPUT, RET_STATS, RET_OUTPUT_STATS,
                                  RET_RUNNING, RET_STEPS, RET_HISTOGRAMS};
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
    return bad_field(prob, "return", "a list of \"output\", \"stats\", "
                                     "\"output_stats\", \"running_stats\", "
                                     "\"steps\", \"histograms\"");
  }
  *ret = chosen | (*ret & RET_STEPS);
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
  static const char *const placements_residual[] = {"pre", "post", "both", NULL};
  double eps = 0;
  int64_t i64 = 0;
  int choice = 0;
  switch (id) {
  case FLD_INPUT: return decode_tensor(ctx, v, name, &req->input, prob);
  case FLD_WEIGHT: return decode_tensor(ctx, v, name, &req->weight, prob);
  case FLD_BIAS: return decode_tensor(ctx, v, name, &req->bias, prob);
  case FLD_RUNNING_MEAN:
    return decode_tensor(ctx, v, name, &req->running_mean, prob);
  case FLD_RUNNING_VAR:
    return decode_tensor(ctx, v, name, &req->running_var, prob);
  case FLD_EPS:
    if (get_number(v, name, &eps, prob) != 0) return -1;
    req->layer.eps = req->rms.eps = req->batch.eps = req->group.eps =
        req->instance.eps = req->residual.eps = eps;
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
  case FLD_PLACEMENT:
    if (get_choice(v, name, placements_residual, &choice, prob) != 0) return -1;
    req->residual.placements = choice == 0 ? 1u : choice == 1 ? 2u : 3u;
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
  case FLD_RETURN: return decode_return(v, &req->ret, prob);
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
#define OP_CHECK_(id, name, route, model, kind, takes, answers, metric, fields, \
                  check, ...)                                                   \
  [OP_##id] = check,
    OPS_MAP(OP_CHECK_)
#undef OP_CHECK_
};

static json_t *query_value(const char *value) {
  json_t *v = json_loads(value, JSON_DECODE_ANY, NULL);
  if (v != NULL) return v;
  if (strchr(value, ',') == NULL) return json_string(value);
  json_t *list = json_array();
  char *copy = strdup(value);
  if (list == NULL || copy == NULL) {
    free(copy);
    json_decref(list);
    return NULL;
  }
  char *save = NULL;
  for (char *item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
    json_t *x = json_loads(item, JSON_DECODE_ANY, NULL);
    json_array_append_new(list, x ? x : json_string(item));
  }
  free(copy);
  return list;
}

int decode_query(const query_param_t *query, size_t n, json_t *obj,
                 problem_t *prob) {
  static const char *const tensors[] = {"weight", "bias", "running_mean",
                                        "running_var", "mean", "var", "parts"};
  json_t *seen = json_object();
  int rc = seen ? 0 : problem_set(prob, PROBLEM_OUT_OF_MEMORY, NULL, "out of memory");
  for (size_t i = 0; rc == 0 && i < n; i++) {
    const char *key = query[i].key;
    const char *value = query[i].value ? query[i].value : "";
    for (size_t k = 0; rc == 0 && k < sizeof tensors / sizeof tensors[0]; k++)
      if (strcmp(key, tensors[k]) == 0)
        rc = problem_set(prob, PROBLEM_BAD_FIELD, key,
                         "%s is a tensor: it cannot travel in the query "
                         "string; send it in a JSON body or with the binary "
                         "framing (application/octet-stream)", key);
    if (rc != 0) break;
    if (strcmp(key, "input") == 0) {
      rc = problem_set(prob, PROBLEM_CONFLICTING_FIELDS, key,
                       "the input is the request body, not a query parameter");
    } else if (json_object_get(seen, key) != NULL) {
      rc = problem_set(prob, PROBLEM_DUPLICATE_KEY, key,
                       "query parameter %s is given twice", key);
    } else if (json_object_get(obj, key) != NULL) {
      rc = problem_set(prob, PROBLEM_CONFLICTING_FIELDS, key,
                       "%s is given in both the body and the query", key);
    } else {
      json_t *v = query_value(value);
      int bad = v == NULL || json_object_set(obj, key, v) != 0;
      if (bad) json_decref(v); /* (a key that is not UTF-8 is refused) */
      else bad = json_object_set_new(seen, key, v) != 0; /* takes v */
      if (bad)
        rc = problem_set(prob, PROBLEM_BAD_FIELD, key,
                         "query parameter %s is not valid text", key);
    }
  }
  json_decref(seen);
  return rc;
}

int decode_frame(const char *body, size_t len, int64_t header_length,
                 decode_ctx_t *ctx, size_t *json_len, problem_t *prob) {
  *json_len = len;
  if (header_length < 0) return 0;
  if ((uint64_t)header_length > len)
    return problem_set(prob, PROBLEM_BINARY_TRUNCATED, NULL,
                       "Inference-Header-Content-Length is %lld but the body "
                       "has %zu bytes", (long long)header_length, len);
  *json_len = (size_t)header_length;
  ctx->bin = body + *json_len;
  ctx->bin_len = len - *json_len;
  return 0;
}

/* Where the byte at pos of a JSON text lies, as a path like
 * `input.shape[0]` into path (cap bytes) and its top-level key into top
 * (""  when the byte is not inside a top-level member). Scans the text up to
 * pos only; the text is taken to be JSON up to there (jansson stopped at
 * pos). Keys are cut at 40 bytes; containers deeper than PATH_DEPTH are
 * left out of the path. */
enum { PATH_DEPTH = 16, PATH_KEY_MAX = 40 };
typedef struct {
  int object, want_key; /* an object, waiting for a key */
  size_t index;         /* an array: the element's index */
  const char *key;      /* an object: the member's key (not NUL-terminated) */
  size_t keylen;
} path_step_t;

static void json_path_at(const char *text, size_t len, size_t pos, char *path,
                         size_t cap, char *top, size_t topcap) {
  path_step_t st[PATH_DEPTH];
  int depth = 0; /* containers open; only the first PATH_DEPTH recorded */
  if (pos > len) pos = len;
  for (size_t i = 0; i < pos; i++) {
    char c = text[i];
    int in = depth >= 1 && depth <= PATH_DEPTH; /* st[depth - 1] recorded */
    if (c == '"') {
      size_t start = ++i;
      while (i < len && text[i] != '"') i += text[i] == '\\' ? 2 : 1;
      if (in && st[depth - 1].object && st[depth - 1].want_key) {
        st[depth - 1].key = text + start;
        st[depth - 1].keylen = (i < len ? i : len) - start;
      }
    } else if (c == '{' || c == '[') {
      if (depth < PATH_DEPTH)
        st[depth] = (path_step_t){.object = c == '{', .want_key = c == '{'};
      depth++;
    } else if (c == '}' || c == ']') {
      if (depth > 0) depth--;
    } else if (c == ':' && in && st[depth - 1].object) {
      st[depth - 1].want_key = 0;
    } else if (c == ',' && in) {
      if (st[depth - 1].object) {
        st[depth - 1].want_key = 1;
        st[depth - 1].key = NULL;
      } else {
        st[depth - 1].index++;
      }
    }
  }
  size_t o = 0;
  path[0] = top[0] = '\0';
  for (int d = 0; d < depth && d < PATH_DEPTH && o < cap; d++) {
    int n;
    if (!st[d].object)
      n = snprintf(path + o, cap - o, "[%zu]", st[d].index);
    else if (st[d].key != NULL && !st[d].want_key)
      n = snprintf(path + o, cap - o, "%s%.*s", o ? "." : "",
                   (int)(st[d].keylen < PATH_KEY_MAX ? st[d].keylen : PATH_KEY_MAX),
                   st[d].key);
    else
      break; /* between members: the object itself */
    if (d == 0 && st[0].object && topcap > 0) {
      size_t k = st[0].keylen < PATH_KEY_MAX ? st[0].keylen : PATH_KEY_MAX;
      if (k >= topcap) k = topcap - 1;
      memcpy(top, st[0].key, k);
      top[k] = '\0';
    }
    o += n > 0 ? (size_t)n : 0;
  }
}

/* Only blanks (or nothing): what a POST without a body sends. */
static int blank(const char *body, size_t len) {
  for (size_t i = 0; i < len; i++)
    if (body[i] != ' ' && body[i] != '\t' && body[i] != '\r' && body[i] != '\n')
      return 0;
  return 1;
}

int decode_json_root(decode_ctx_t *ctx, const char *body, size_t len,
                     json_t **root, problem_t *prob) {
  *root = NULL;
  if (blank(body, len))
    return problem_set(prob, PROBLEM_MALFORMED_JSON, NULL,
                       "the request body is empty: send a JSON object (with "
                       "a Content-Length, or chunked)");
  numarrays_t *arrays = &ctx->arrays;
  if (numarray_extract(body, len, arrays) != 0)
    return problem_set(prob, PROBLEM_OUT_OF_MEMORY, NULL, "out of memory");
  if (arrays->depth > ctx->lim->max_depth) {
    numarray_free(arrays);
    return problem_set(prob, PROBLEM_TOO_DEEP, NULL,
                       "JSON nesting deeper than %d levels", ctx->lim->max_depth);
  }
  json_error_t jerr;
  json_t *doc = NULL;
  if (arrays->skeleton != NULL)
    doc = json_loadb(arrays->skeleton, arrays->skeleton_len,
                     JSON_REJECT_DUPLICATES, &jerr);
  if (doc == NULL) {
    /* No skeleton, or a malformed document: jansson reads the client's
     * own text, so errors point at its lines and columns. */
    numarray_free(arrays);
    doc = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
  }
  if (doc == NULL && json_error_code(&jerr) == json_error_numeric_overflow) {
    /* jansson reads integers into 64 bits and reals into doubles; say
     * which field holds the number it could not */
    char path[128], top[sizeof prob->field];
    json_path_at(body, len, (size_t)jerr.position, path, sizeof path, top,
                 sizeof top);
    int integer = strncmp(jerr.text, "too big integer", 15) == 0;
    return problem_set(prob, PROBLEM_MALFORMED_JSON, top[0] ? top : NULL,
                       "%s%s%s at line %d, column %d (%s)", path,
                       path[0] ? ": " : "", jerr.text, jerr.line, jerr.column,
                       integer ? "a JSON integer must fit in 64 bits"
                               : "beyond the range of a float64");
  }
  if (doc == NULL) {
    int dup = json_error_code(&jerr) == json_error_duplicate_key;
    return problem_set(prob, dup ? PROBLEM_DUPLICATE_KEY : PROBLEM_MALFORMED_JSON,
                       NULL, "invalid JSON at line %d, column %d: %s",
                       jerr.line, jerr.column, jerr.text);
  }
  if (!json_is_object(doc)) {
    json_decref(doc);
    return problem_set(prob, PROBLEM_NOT_AN_OBJECT, NULL,
                       "the request body must be a JSON object");
  }
  *root = doc;
  return 0;
}

void decode_ctx_release(decode_ctx_t *ctx) { numarray_free(&ctx->arrays); }

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
