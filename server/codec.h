/* codec.h -- the one interface every wire format implements: decode a body
 * into a request_t, encode a result_t into a reply. JSON is the first codec;
 * binary formats join by adding an entry to the table in codec.c. */
#ifndef NORMD_CODEC_H
#define NORMD_CODEC_H

#include <stddef.h>

#include "problem.h"
#include "reply.h"
#include "request.h"

typedef struct codec {
  const char *name;       /* "json" */
  const char *media_type; /* "application/json" */
  /* Decodes body for op into req (request_init already applied). Returns 0,
   * or -1 with *prob set (400 malformed, 413/422 invalid). Never reads past
   * body + len; body need not be NUL-terminated. */
  int (*decode)(const char *body, size_t len, op_t op, const limits_t *lim,
                request_t *req, problem_t *prob);
  /* Encodes a successful result as a 200 reply. Returns 0, or -1 with
   * *prob set (500 on out of memory). */
  int (*encode)(const request_t *req, const result_t *res, reply_t *out,
                problem_t *prob);
} codec_t;

extern const codec_t codec_json;

/* The codec for a Content-Type header value (parameters such as charset
 * are ignored; NULL or empty means JSON). NULL when unsupported (415). */
const codec_t *codec_for_content_type(const char *content_type);

/* The codec to answer with for an Accept header: the first acceptable
 * media type we speak, honouring q=0 and wildcards; NULL or empty Accept
 * means `request_codec`. NULL when nothing acceptable (406). */
const codec_t *codec_for_accept(const char *accept,
                                const codec_t *request_codec);

#endif
