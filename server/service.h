/* service.h -- the whole compute path without sockets: content negotiation,
 * decode, compute, encode, and every failure as an error reply. It runs on
 * a worker thread for the daemon and is called directly by in-process tests
 * (and fuzzers). Thread-safe: no shared state but the metrics and the
 * per-operation statistics (op_stats.h), which it records. */
#ifndef NORMD_SERVICE_H
#define NORMD_SERVICE_H

#include <stddef.h>
#include <stdint.h>

#include "codec.h"
#include "reply.h"
#include "request.h"

typedef struct {
  op_t op;
  const char *body; /* need not be NUL-terminated */
  size_t len;
  /* The allocation holding body when the caller hands it over: the service
   * frees it (with the reply when that sends by reference), and may write
   * into it. NULL: body stays the caller's and is only read. */
  void *body_mem;
  const char *content_type;  /* header values, or NULL when absent */
  const char *accept;
  const char *header_length; /* Inference-Header-Content-Length */
  const query_param_t *query;
  size_t nquery;
  int kserve; /* a /v2 route: KServe v2 protocol, {"error": ...} errors */
  /* nanoseconds it waited in the pool queue (op_stats: "queue"); 0 when
   * called directly */
  uint64_t queue_ns;
  /* The reply may send binary tensors by reference (reply_t parts, kept
   * alive with the reply) instead of copying them into its body. */
  int by_reference;
  /* The request's id (X-Request-Id), given in a problem document as its
   * `instance`; NULL: none. */
  const char *request_id;
} service_input_t;

/* Always fills *out (a 200 result or an error); the caller frees it with
 * reply_free. */
void service_handle(const service_input_t *in, const limits_t *lim,
                    reply_t *out);

#endif
