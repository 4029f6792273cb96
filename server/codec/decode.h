/* decode.h -- from a request body to a request_t: the document (framing,
 * parse, query string: decode_body.c), its fields (decode.c) and its tensors
 * (decode_tensor.c), shared by every codec. JSON bodies,
 * the binary framing (JSON header + raw tensor bytes), .npy query parameters
 * and KServe v2 requests all end up here, so a field means the same thing
 * in every format and is validated in one place. */
#ifndef NORMD_DECODE_H
#define NORMD_DECODE_H

#include <jansson.h>
#include <stddef.h>

#include "codec.h"
#include "numarray.h"
#include "problem.h"
#include "request.h"

/* Decoding state: the limits, the binary tail of a framed body (the raw
 * tensor bytes after the JSON header), consumed in the order tensors appear
 * in the header (bin == NULL when the body has no binary part), and the
 * numeric arrays decode_json_root took out of the JSON text for the fast
 * path (numarray.h). Initialize with {.lim = ...}; decode_ctx_release
 * frees what decoding left in it. */
typedef struct {
  const limits_t *lim;
  const char *bin;
  size_t bin_len;
  size_t bin_pos;
  numarrays_t arrays;
} decode_ctx_t;

void decode_ctx_release(decode_ctx_t *ctx);

/* Splits a framed body: with header_length >= 0 (the
 * Inference-Header-Content-Length), the first header_length bytes are the
 * JSON and the rest becomes ctx's binary tail; -1 means all JSON. 400
 * binary_truncated when the header is longer than the body. */
int decode_frame(const char *body, size_t len, int64_t header_length,
                 decode_ctx_t *ctx, size_t *json_len, problem_t *prob);

/* Parses body as one JSON object: nesting depth checked first (jansson has
 * no limit of its own), duplicate keys refused. Big numeric arrays are not
 * parsed by jansson but kept in ctx as placeholders for decode_tensor (the
 * body must outlive ctx). *root is the caller's to json_decref. 400
 * (malformed_json, duplicate_key, too_deep) or 422 (not_an_object) on
 * failure. */
int decode_json_root(decode_ctx_t *ctx, const char *body, size_t len,
                     json_t **root, problem_t *prob);

/* A tensor: {"shape", "dtype", "data"} with data flat or nested, or
 * {"shape", "dtype", "parameters": {"binary_data_size": n}} whose n bytes
 * come from the binary tail, or a bare nested array (float32). `field`
 * names it in errors. Allocates out->t.data. */
int decode_tensor(decode_ctx_t *ctx, const json_t *v, const char *field,
                  req_tensor_t *out, problem_t *prob);

/* Every field of obj into req for op (only the fields of op's field set,
 * OPS_MAP), then the checks across fields (input present, its row's check:
 * normalized_shape against the input, mode "given", ...). If the
 * input arrived another way (.npy body), req->input is already present and
 * obj must not carry one. Framed bodies must use up the binary tail. */
int decode_request(decode_ctx_t *ctx, const json_t *obj, op_t op,
                   request_t *req, problem_t *prob);

/* Query string parameters as request fields, added to obj: every route
 * takes them (?explain=true, ?eps=1e-3; a .npy request has no other way).
 * A value is read as JSON when it parses (numbers, null, true), as text
 * otherwise, and a value with commas is a list (normalized_shape=2,768).
 * Tensors cannot come this way (422), nor a field the body also has (422
 * conflicting_fields), nor the same parameter twice (400 duplicate_key). */
int decode_query(const query_param_t *query, size_t n, json_t *obj,
                 problem_t *prob);

/* A JSON number, or a non-finite spelling ("NaN", "Infinity", "-Infinity"). */
int decode_number(const json_t *v, double *out);

#endif
