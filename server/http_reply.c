/* http_reply.c -- how a request's reply_t goes out: problems readied on the
 * HTTP thread, the answer's content coding (Accept-Encoding, `compression`),
 * the reply turned into an MHD response without copying its bytes (body and
 * binary parts as an I/O vector), its headers, and CORS (cors_origins). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http_internal.h"
#include "problem.h"

void http__problem_now(request_state_t *rs, problem_code_t id, const char *fmt,
                       const char *arg) {
  problem_t p;
  memset(&p, 0, sizeof p);
  problem_set(&p, id, NULL, fmt, arg);
  p.request_id = rs->request_id;
  if (router_is_v2(rs->path)) /* the one decision of the error's form */
    problem_reply_kserve(&p, &rs->reply);
  else
    problem_reply(&p, &rs->reply);
  rs->reply_ready = 1;
}

encoding_t http__answer_coding(const request_state_t *rs) {
  if (!rs->srv->cfg->compression) return ENCODING_IDENTITY;
  return encoding_negotiate(
      http__header(rs->mhd_conn, MHD_HTTP_HEADER_ACCEPT_ENCODING));
}

void http__compress_reply(reply_t *r, encoding_t coding) {
  if (coding == ENCODING_IDENTITY || r->content_encoding != NULL ||
      r->len + r->parts_len < ENCODING_MIN_BYTES)
    return;
  /* out of memory: the reply goes out as it is, uncompressed */
  (void)encoding_compress_reply(r, coding, ENCODING_LEVEL);
}

/* Whether origin may call us: "*" allows all; else a listed origin. */
static int origin_allowed(const char *origins, const char *origin) {
  if (origins[0] == '\0' || origin == NULL) return 0;
  if (strcmp(origins, "*") == 0) return 1;
  size_t n = strlen(origin);
  for (const char *p = origins; *p;) {
    while (*p == ' ' || *p == ',') p++;
    size_t len = strcspn(p, ",");
    size_t trimmed = len;
    while (trimmed > 0 && p[trimmed - 1] == ' ') trimmed--;
    if (trimmed == n && strncmp(p, origin, n) == 0) return 1;
    p += len;
  }
  return 0;
}

static void add_cors(request_state_t *rs, struct MHD_Response *resp) {
  const char *origins = rs->srv->cfg->cors_origins;
  const char *origin = http__header(rs->mhd_conn, "Origin");
  int listed = origins[0] != '\0' && strcmp(origins, "*") != 0;
  if (!origin_allowed(origins, origin)) return;
  if (listed)
    MHD_add_response_header(resp, "Access-Control-Allow-Origin", origin);
  else
    MHD_add_response_header(resp, "Access-Control-Allow-Origin", "*");
  MHD_add_response_header(resp, "Access-Control-Expose-Headers",
                          "Retry-After, Inference-Header-Content-Length, "
                          "X-Request-Id");
  if (strcmp(rs->method, "OPTIONS") == 0 && rs->route != NULL) {
    MHD_add_response_header(resp, "Access-Control-Allow-Methods",
                            rs->route->allow);
    const char *asked =
        http__header(rs->mhd_conn, "Access-Control-Request-Headers");
    MHD_add_response_header(resp, "Access-Control-Allow-Headers",
                            asked ? asked : "Content-Type, Accept");
    MHD_add_response_header(resp, "Access-Control-Max-Age", "600");
  }
}

/* MHD's free callback of a response sent by reference. */
static void free_sent_reply(void *cls) {
  reply_free(cls);
  free(cls);
}

/* r's bytes as an MHD response without copying them: the body alone, or
 * the body and the parts (binary tensors) as an I/O vector. MHD owns the
 * memory afterwards; r keeps its headers' fields. */
static struct MHD_Response *response_of(reply_t *r) {
  struct MHD_Response *resp;
  if (r->nparts == 0) {
    resp =
        MHD_create_response_from_buffer(r->len, r->body, MHD_RESPMEM_MUST_FREE);
    if (resp != NULL) r->body = NULL;
    return resp;
  }
  struct MHD_IoVec iov[1 + REPLY_MAX_PARTS];
  iov[0] = (struct MHD_IoVec){.iov_base = r->body, .iov_len = r->len};
  for (int i = 0; i < r->nparts; i++)
    iov[1 + i] = (struct MHD_IoVec){.iov_base = r->parts[i].data,
                                    .iov_len = r->parts[i].len};
  reply_t *held = malloc(sizeof *held);
  if (held == NULL) return NULL;
  resp = MHD_create_response_from_iovec(iov, (unsigned)(1 + r->nparts),
                                        free_sent_reply, held);
  if (resp == NULL) {
    free(held);
    return NULL;
  }
  *held = *r; /* the memory moves to the response */
  r->body = NULL;
  r->nparts = 0;
  r->keep = NULL;
  r->keep_free = NULL;
  return resp;
}

enum MHD_Result http__send_reply(request_state_t *rs) {
  reply_t *r = &rs->reply;
  /* a compute answer was compressed on its worker; the GET routes' answers
   * (the page, /openapi.yaml, /metrics: small or quick) are compressed here */
  int compressible = rs->route != NULL && rs->srv->cfg->compression;
  if (compressible && rs->route->handler != H_COMPUTE)
    http__compress_reply(r, http__answer_coding(rs));
  size_t bytes = r->len + r->parts_len;
  struct MHD_Response *resp = response_of(r);
  if (resp == NULL) return MHD_NO;
  if (r->content_type)
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                            r->content_type);
  if (r->retry_after_s > 0) {
    char s[16];
    snprintf(s, sizeof s, "%d", r->retry_after_s);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, s);
  }
  if (r->allow) MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, r->allow);
  if (r->close)
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
  if (r->unauthorized)
    MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
                            "Bearer realm=\"normd\"");
  if (r->header_length > 0) {
    char n[24];
    snprintf(n, sizeof n, "%lld", (long long)r->header_length);
    MHD_add_response_header(resp, "Inference-Header-Content-Length", n);
  }
  if (r->content_encoding)
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_ENCODING,
                            r->content_encoding);
  /* What a cache must key the answer on, in one Vary: Origin when CORS
   * names origins (every answer then depends on it, allowed or not, or
   * none, so one origin's answer is never handed to another), and
   * Accept-Encoding where the answer may be compressed. */
  const char *origins = rs->srv->cfg->cors_origins;
  int by_origin = origins[0] != '\0' && strcmp(origins, "*") != 0;
  const char *vary = by_origin && compressible ? "Origin, Accept-Encoding"
                     : by_origin               ? "Origin"
                     : compressible            ? "Accept-Encoding"
                                               : NULL;
  if (vary) MHD_add_response_header(resp, MHD_HTTP_HEADER_VARY, vary);
  /* every answer, so a client and the access log name the same request */
  MHD_add_response_header(resp, "X-Request-Id", rs->request_id);
  add_cors(rs, resp);
  rs->status_sent = r->status;
  rs->bytes_out = bytes;
  enum MHD_Result ok =
      MHD_queue_response(rs->mhd_conn, (unsigned)r->status, resp);
  MHD_destroy_response(resp);
  return ok;
}
