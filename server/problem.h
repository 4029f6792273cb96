/* problem.h -- RFC 9457 problem details: every error the service reports,
 * with its HTTP status and a stable machine-readable `code`, from one list
 * (PROBLEM_MAP) and core's (NORM_ERRNO_MAP). The mapping from codes to
 * statuses lives here and only here. */
#ifndef NORMD_PROBLEM_H
#define NORMD_PROBLEM_H

#include "reply.h"

/* Every problem code the server sends, beside core's own (NORM_ERRNO_MAP
 * in norm.h, which problem_from_norm sends as 422, or 500 for the codes
 * that mean a bug in normd). Columns: the id (PROBLEM_<id>), the code on
 * the wire, the HTTP status (the title is the status's reason phrase,
 * problem_title), and v1: 1 when a /v1 problem document may carry it (the
 * ProblemCode enum of api/openapi.yaml lists exactly those and core's
 * non-internal codes: tests/unit/check_problem.c), 0 for the codes of /v2
 * routes only, whose {"error"} answers show no code. One code may stand
 * twice with two statuses, each id saying which case it is. */
#define PROBLEM_MAP(X)                                                         \
  /* 400: the body cannot be read */                                           \
  X(MALFORMED_JSON, "malformed_json", 400, 1)                                  \
  X(DUPLICATE_KEY, "duplicate_key", 400, 1)                                    \
  X(TOO_DEEP, "too_deep", 400, 1)                                              \
  X(TOO_MANY_PARAMETERS, "too_many_parameters", 400, 1)                        \
  X(BAD_REQUEST, "bad_request", 400, 1) /* Content-Length twice, differing */  \
  X(MISSING_HEADER_LENGTH, "missing_header_length", 400, 1)                    \
  X(BAD_HEADER_LENGTH, "bad_header_length", 400, 1)                            \
  X(BINARY_TRUNCATED, "binary_truncated", 400, 1)                              \
  X(BINARY_LEFT_OVER, "binary_size_mismatch", 400, 1) /* bytes after them */   \
  X(BINARY_WITHOUT_FRAMING, "binary_without_framing", 400, 1)                  \
  X(NPY_BAD_MAGIC, "npy_bad_magic", 400, 1)                                    \
  X(NPY_BAD_VERSION, "npy_bad_version", 400, 1)                                \
  X(NPY_BAD_HEADER, "npy_bad_header", 400, 1)                                  \
  X(NPY_TRUNCATED, "npy_truncated", 400, 1)                                    \
  X(NPY_SIZE_MISMATCH, "npy_size_mismatch", 400, 1)                            \
  X(BAD_INFERENCE_REQUEST, "bad_inference_request", 400, 0)                    \
  X(BAD_CONTENT_ENCODING, "bad_content_encoding", 400, 1) /* corrupt, cut */   \
  X(MODELS_BUILT_IN, "models_built_in", 400, 0) /* v2 load / unload */         \
  /* 401, 404, 405, 406 */                                                     \
  X(UNAUTHORIZED, "unauthorized", 401, 1)                                      \
  X(NOT_FOUND, "not_found", 404, 1)                                            \
  X(UNKNOWN_MODEL, "unknown_model", 404, 0)                                    \
  X(METHOD_NOT_ALLOWED, "method_not_allowed", 405, 1)                          \
  X(NOT_ACCEPTABLE, "not_acceptable", 406, 1)                                  \
  /* 413, 415 */                                                               \
  X(BODY_TOO_LARGE, "body_too_large", 413, 1)                                  \
  X(TOO_MANY_ELEMENTS, "too_many_elements", 413, 1)                            \
  X(UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type", 415, 1)                  \
  X(NPY_UNSUPPORTED_DTYPE, "npy_unsupported_dtype", 415, 1)                    \
  /* 422: request structure */                                                 \
  X(NOT_AN_OBJECT, "not_an_object", 422, 1)                                    \
  X(UNKNOWN_FIELD, "unknown_field", 422, 1)                                    \
  X(MISSING_FIELD, "missing_field", 422, 1)                                    \
  X(BAD_FIELD, "bad_field", 422, 1)                                            \
  X(CONFLICTING_FIELDS, "conflicting_fields", 422, 1)                          \
  X(BAD_MOMENTS, "bad_moments", 422, 1)                                        \
  /* 422: tensors */                                                           \
  X(BAD_TENSOR, "bad_tensor", 422, 1)                                          \
  X(RAGGED_TENSOR, "ragged_tensor", 422, 1)                                    \
  X(BAD_NUMBER, "bad_number", 422, 1)                                          \
  X(BAD_SHAPE, "bad_shape", 422, 1)                                            \
  X(DATA_LENGTH, "data_length", 422, 1)                                        \
  X(UNKNOWN_DTYPE, "unknown_dtype", 422, 1) /* also core's NORM_E_DTYPE */     \
  X(BINARY_SIZE_MISMATCH, "binary_size_mismatch", 422, 1) /* size != shape */  \
  X(RESIDUAL_MISMATCH, "residual_mismatch", 422, 1) /* not input's shape */   \
  /* 422: semantics */                                                         \
  X(EXPLAIN_TOO_LARGE, "explain_too_large", 422, 1)                            \
  X(SIMULATION_TOO_LARGE, "simulation_too_large", 422, 1)                      \
  /* 500, 501, 503 */                                                          \
  X(OUT_OF_MEMORY, "out_of_memory", 500, 1)                                    \
  X(UNSUPPORTED_TRANSFER_ENCODING, "unsupported_transfer_encoding", 501, 1)    \
  X(UNSUPPORTED_EXTENSION, "unsupported_extension", 501, 0) /* v2 trace... */  \
  X(OVERLOADED, "overloaded", 503, 1)                                          \
  X(DRAINING, "draining", 503, 1)

typedef enum {
#define PROBLEM_ENUM_(id, code, status, v1) PROBLEM_##id,
  PROBLEM_MAP(PROBLEM_ENUM_)
#undef PROBLEM_ENUM_
  PROBLEM_COUNT
} problem_code_t;

/* The code and status of a problem_code_t, and whether /v1 may send it. */
const char *problem_code(problem_code_t id);
int problem_status(problem_code_t id);
int problem_on_v1(problem_code_t id);

typedef struct {
  int status;       /* 0 = no problem recorded */
  const char *code; /* static, e.g. "shape_mismatch" */
  char field[64];   /* offending request field, "" if none */
  char detail[512];
  /* The request's id (request_id.h), written as `instance`:
   * urn:normd:request:<id> (RFC 9457 section 3.1.5); NULL: no instance.
   * Not owned; problem_set leaves it alone. */
  const char *request_id;
} problem_t;

/* Records a problem from the list (the first one wins: later calls are
 * ignored, so the innermost, most specific error is reported). Returns -1
 * for `return problem_set(...)` convenience. */
int problem_set(problem_t *p, problem_code_t id, const char *field,
                const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* A core error (norm_err_t) as a problem: 422 with the error's short name
 * as code and its message as detail, or 500 for the codes no request can
 * cause (problem_norm_internal: a NULL argument, a bad group range, an
 * invalid enum or output tensor, all built by the server itself). */
int problem_from_norm(problem_t *p, int norm_err, const char *field);
int problem_norm_internal(int norm_err);

/* Renders the problem as application/problem+json into *r. Out of memory
 * leaves a bodyless reply with the problem's status. */
void problem_reply(const problem_t *p, reply_t *r);

/* The same problem in the KServe v2 protocol's form: {"error": detail}
 * with the problem's status. */
void problem_reply_kserve(const problem_t *p, reply_t *r);

/* The reason phrase for a status ("Unprocessable Content"). */
const char *problem_title(int status);

#endif
