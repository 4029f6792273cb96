/* decode_tensor.c -- one tensor of a request from its JSON: a tensor object
 * (data flat or nested as its shape, or binary bytes from a framed body's
 * tail) or a bare nested array, checked against its shape and the limits
 * before anything is allocated. See decode_tensor in decode.h. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode.h"
#include "fmt.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "binary tensors are little-endian on the wire; this host is not"
#endif

/* One element: a JSON number or a non-finite spelling. jansson gives the
 * number as its correctly rounded double, and norm_tensor_set rounds that
 * once more to the dtype: exact unless the double is a midpoint of float32,
 * float16 or bfloat16 and the text is not (it lies within half a double's
 * ulp of one). Only the text can settle those, on numarray's fast path
 * (numarray_fill), which takes every well-formed tensor array (see
 * numarray.h); what comes here is data the fast path refused (empty,
 * ragged, or not numbers: the error is reported from here) and the arrays
 * of /v1/moments/merge's parts, which are float64. */
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
