/* codec.h -- the one interface every wire format implements: decode a body
 * into a request_t, encode a result_t into a reply. The /v1 formats are
 * chosen by Content-Type and Accept (JSON, the binary framing, .npy); the
 * KServe v2 routes always speak codec_kserve. A new format joins by adding
 * a codec_t and an entry in codec.c's table. */
#ifndef NORMD_CODEC_H
#define NORMD_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "problem.h"
#include "reply.h"
#include "request.h"

typedef struct {
  const char *key;
  const char *value;
} query_param_t;

/* What a decoder sees of an HTTP request. */
typedef struct {
  op_t op;
  const char *body; /* need not be NUL-terminated */
  size_t len;
  const query_param_t *query; /* decoded query string parameters */
  size_t nquery;
  int64_t header_length; /* Inference-Header-Content-Length; -1 if absent */
  const char *model;     /* KServe v2 model name, or NULL */
} codec_input_t;

typedef struct codec {
  const char *name;       /* "json" */
  const char *media_type; /* "application/json" */
  /* Decodes in->body for in->op into req (request_init already applied).
   * Returns 0, or -1 with *prob set (400 malformed, 413/415/422 invalid).
   * Never reads past body + len. */
  int (*decode)(const codec_input_t *in, const limits_t *lim, request_t *req,
                problem_t *prob);
  /* Encodes a successful result as a 200 reply. Returns 0, or -1 with
   * *prob set (500 on out of memory). */
  int (*encode)(const request_t *req, const result_t *res, reply_t *out,
                problem_t *prob);
} codec_t;

extern const codec_t codec_json;   /* application/json */
extern const codec_t codec_framed; /* application/octet-stream: JSON header
                                      + raw tensors (KServe binary framing) */
extern const codec_t codec_npy;    /* application/x-npy */
extern const codec_t codec_kserve; /* KServe v2 inference protocol */

/* The /v1 formats an operation takes and answers (NULL-terminated; the
 * `takes` and `answers` columns of OPS_MAP): all three, or all but .npy
 * (for operations with no input tensor to carry, or no output tensor to
 * answer with). */
extern const codec_t *const codecs_all[];
extern const codec_t *const codecs_no_npy[];

/* The codec for a Content-Type header value (parameters such as charset
 * are ignored; NULL or empty means JSON). NULL when unsupported (415). */
const codec_t *codec_for_content_type(const char *content_type);

/* The codec to answer with for an Accept header: the first acceptable
 * media type we speak, honouring q=0 and wildcards; NULL or empty Accept
 * means `request_codec`. NULL when nothing acceptable (406). */
const codec_t *codec_for_accept(const char *accept,
                                const codec_t *request_codec);

/* The same among the codecs of `answers` (NULL-terminated, not empty)
 * only: an acceptable type outside it is skipped like one normd does not
 * speak, and no Accept or a wildcard means request_codec, or answers[0]
 * when request_codec is not among them. NULL when nothing acceptable (406). */
const codec_t *codec_for_accept_among(const char *accept,
                                      const codec_t *request_codec,
                                      const codec_t *const *answers);

#endif
