/* reply.h -- a finished HTTP answer, independent of libmicrohttpd: what the
 * service computes on a worker and what http_reply.c turns into an MHD
 * response. The body is malloc'd and owned by the reply until handed to
 * MHD. */
#ifndef NORMD_REPLY_H
#define NORMD_REPLY_H

#include <stddef.h>
#include <stdint.h>

/* Bytes sent after the body without being copied into it: a binary
 * answer's tensors, a JSON answer's text printed in pieces (encode.h). */
enum { REPLY_MAX_PARTS = 32 };
typedef struct {
  const void *data;
  size_t len;
  void *owned; /* freed with the reply; NULL when `keep` owns data */
} reply_part_t;

typedef struct {
  int status;
  const char *content_type; /* static string */
  char *body;               /* malloc'd, may be NULL when len == 0 */
  size_t len;
  /* The raw tensors of a binary answer (framed, .npy), sent after body by
   * reference: they point into buffers the part owns or `keep` owns (the
   * request and result they came from), released with the reply; and the
   * pieces of a long JSON array printed at once, each owned. */
  reply_part_t parts[REPLY_MAX_PARTS];
  int nparts;
  size_t parts_len;
  void *keep;
  void (*keep_free)(void *keep);
  int retry_after_s;        /* > 0: send Retry-After */
  const char *allow;        /* non-NULL: send Allow (405) */
  int close;                /* ask the client to close the connection */
  int unauthorized;         /* 401: send WWW-Authenticate: Bearer */
  int64_t header_length;    /* > 0: Inference-Header-Content-Length (binary
                               framing: the JSON header's size in body) */
  const char *content_encoding; /* static: "gzip" or "deflate" when body is
                                   compressed (encoding.h), else NULL */
} reply_t;

/* Whether a part points into memory it does not own (what `keep` must
 * then hold alive, or reply_flatten copy). */
int reply_borrows(const reply_t *r);
/* Frees the body, the parts and what `keep` holds. */
void reply_free(reply_t *r);
/* Copies the parts into the body (one buffer of len bytes) and releases
 * what they pointed into. Returns 0, or -1 when out of memory (the reply is
 * then freed). */
int reply_flatten(reply_t *r);
/* A body copied from a static string. Returns 0 or -1 on out of memory. */
int reply_text(reply_t *r, int status, const char *content_type,
               const char *text);

#endif
