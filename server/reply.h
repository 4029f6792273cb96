/* reply.h -- a finished HTTP answer, independent of libmicrohttpd: what the
 * service computes on a worker and what http.c turns into an MHD response.
 * The body is malloc'd and owned by the reply until handed to MHD. */
#ifndef NORMD_REPLY_H
#define NORMD_REPLY_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
  int status;
  const char *content_type; /* static string */
  char *body;               /* malloc'd, may be NULL when len == 0 */
  size_t len;
  int retry_after_s;        /* > 0: send Retry-After */
  const char *allow;        /* non-NULL: send Allow (405) */
  int close;                /* ask the client to close the connection */
  int unauthorized;         /* 401: send WWW-Authenticate: Bearer */
  int64_t header_length;    /* > 0: Inference-Header-Content-Length (binary
                               framing: the JSON header's size in body) */
} reply_t;

void reply_free(reply_t *r);
/* A body copied from a static string. Returns 0 or -1 on out of memory. */
int reply_text(reply_t *r, int status, const char *content_type,
               const char *text);

#endif
