/* fuzz_common.h -- shared by the libFuzzer targets in tests/fuzz: the limits
 * the decoders run under, and the checks every reply must pass whatever the
 * input (the contract's promises, turned into aborts the fuzzer reports).
 *
 * A reply is wrong when: its status is not one the contract documents for a
 * compute route (500 means a server bug here: the limits keep allocations
 * small, so out of memory cannot be the reason); an error body is not a
 * valid problem document (or {"error": ...} on /v2); a 200 body does not
 * parse as what its Content-Type says. */
#ifndef NORMD_FUZZ_COMMON_H
#define NORMD_FUZZ_COMMON_H

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kserve.h"
#include "metrics.h"
#include "router.h"
#include "service.h"

/* Small tensors keep each execution fast; the limit checks run all the
 * same (413 past it). */
static const limits_t fuzz_limits = {
    .max_elements = 4096, .max_depth = 32, .max_explain_elements = 256};

#define FUZZ_ASSERT(cond, reply)                                             \
  do {                                                                       \
    if (!(cond)) fuzz_fail(#cond, __FILE__, __LINE__, (reply));              \
  } while (0)

static inline void fuzz_fail(const char *what, const char *file, int line,
                      const reply_t *r) {
  fprintf(stderr, "%s:%d: reply check failed: %s\nstatus %d, type %s, %zu "
                  "bytes: %.*s\n", file, line, what, r->status,
          r->content_type ? r->content_type : "(none)", r->len,
          (int)(r->len < 2000 ? r->len : 2000), r->body ? r->body : "");
  abort();
}

/* The daemon registers metrics before serving; so do the fuzzers. */
static inline void fuzz_init_once(void) {
  static int done;
  if (!done) {
    metrics_init(router_labels(), router_count + 1, "fuzz", "fuzz");
    done = 1;
  }
}

static inline int fuzz_is(const char *a, const char *b) {
  return a != NULL && strcmp(a, b) == 0;
}

/* A JSON object with a string member `key`. */
static inline int has_string(const json_t *doc, const char *key) {
  const json_t *v = json_object_get(doc, key);
  return json_is_string(v) && json_string_length(v) > 0;
}

/* Checks one reply of service_handle (see the file comment). */
static inline void fuzz_check_reply(const reply_t *r, int kserve) {
  int s = r->status;
  FUZZ_ASSERT(s == 200 || s == 400 || s == 406 || s == 413 || s == 415 ||
                  s == 422,
              r);
  FUZZ_ASSERT(r->len == 0 || r->body != NULL, r);
  FUZZ_ASSERT(r->body != NULL && r->len > 0, r); /* every answer has a body */
  FUZZ_ASSERT(r->content_type != NULL, r);
  if (s != 200) {
    json_error_t err;
    json_t *doc = json_loadb(r->body, r->len, JSON_REJECT_DUPLICATES, &err);
    FUZZ_ASSERT(json_is_object(doc), r);
    if (kserve) {
      FUZZ_ASSERT(fuzz_is(r->content_type, "application/json"), r);
      FUZZ_ASSERT(has_string(doc, "error"), r);
    } else {
      FUZZ_ASSERT(fuzz_is(r->content_type, "application/problem+json"), r);
      FUZZ_ASSERT(has_string(doc, "type") && has_string(doc, "title") &&
                      has_string(doc, "detail") && has_string(doc, "code"),
                  r);
      FUZZ_ASSERT(json_integer_value(json_object_get(doc, "status")) == s, r);
      char type[160];
      snprintf(type, sizeof type, "urn:normd:problem:%s",
               json_string_value(json_object_get(doc, "code")));
      FUZZ_ASSERT(fuzz_is(json_string_value(json_object_get(doc, "type")), type),
                  r);
    }
    json_decref(doc);
    return;
  }
  if (fuzz_is(r->content_type, "application/json")) {
    json_t *doc = json_loadb(r->body, r->len, 0, NULL);
    FUZZ_ASSERT(json_is_object(doc), r);
    json_decref(doc);
  } else if (fuzz_is(r->content_type, "application/octet-stream")) {
    FUZZ_ASSERT(r->header_length > 0 && (uint64_t)r->header_length <= r->len,
                r);
    json_t *doc = json_loadb(r->body, (size_t)r->header_length, 0, NULL);
    FUZZ_ASSERT(json_is_object(doc), r);
    json_decref(doc);
  } else if (fuzz_is(r->content_type, "application/x-npy")) {
    FUZZ_ASSERT(r->len >= 10 && memcmp(r->body, "\x93NUMPY", 6) == 0, r);
    size_t header = (size_t)(unsigned char)r->body[8] |
                    (size_t)(unsigned char)r->body[9] << 8;
    FUZZ_ASSERT((10 + header) % 64 == 0 && 10 + header <= r->len, r);
  } else {
    FUZZ_ASSERT(!"a 200 reply of an unknown content type", r);
  }
}

/* The operation an input's op byte names: the byte modulo OP_COUNT, so
 * every row of OPS_MAP is reached however many there are (a bit field of
 * a fixed width stops short as the list grows: four bits left the
 * family's backwards, ops 16-18, unfuzzed) and every byte names one. */
static inline op_t fuzz_op(uint8_t byte) { return (op_t)(byte % OP_COUNT); }

/* Whether op has a /v2 model (the daemon sends only those to codec_kserve). */
static inline int fuzz_op_has_model(op_t op) {
  op_t back;
  return kserve_model_op(kserve_model_name(op), &back) == 0 && back == op;
}

/* Whether a residual simulation body asks for more work than one fuzzer
 * execution can afford: the server allows up to NORM_RESIDUAL_MAX_WORK
 * (2^30 multiply-adds; even the defaults, 16 x 64 x 64 x 24, take 0.4 s
 * under ASan), so the fuzzers skip bodies past tokens x d x d x layers =
 * 2^16 (the decoding is the same either way). Values missing or not
 * integers count as the defaults. */
static inline int fuzz_residual_too_big(op_t op, const char *body, size_t len) {
  if (op != OP_RESIDUAL) return 0;
  json_t *doc = json_loadb(body, len, JSON_DISABLE_EOF_CHECK, NULL);
  if (doc == NULL) return 0; /* (a framed body: its JSON header) */
  static const char *const names[] = {"tokens", "d", "d", "layers"};
  static const double defaults[] = {16, 64, 64, 24};
  double work = 1;
  for (int i = 0; i < 4; i++) {
    const json_t *v = json_object_get(doc, names[i]);
    work *= json_is_integer(v) ? (double)json_integer_value(v) : defaults[i];
  }
  json_decref(doc);
  return work > (double)(1 << 16);
}

/* Runs one request through the whole service and checks the reply. */
static inline void fuzz_service(const service_input_t *in) {
  if (fuzz_residual_too_big(in->op, in->body, in->len)) return;
  reply_t r;
  service_handle(in, &fuzz_limits, &r);
  fuzz_check_reply(&r, in->kserve);
  reply_free(&r);
}

#endif
