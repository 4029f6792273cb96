/* http.c -- the libmicrohttpd front: routing, body accumulation with limits,
 * CORS, small GET routes, and the hand-off of compute requests to the pool.
 *
 * DESIGN. The access handler never parses a body. For a compute route it
 * accumulates the body (413 on Content-Length before reading; a chunked
 * body past the limit is read and dropped, and its 413 goes out when the
 * upload ends, as MHD 0.9 cannot answer mid-body), reserves a pool slot
 * (503 + Retry-After when full: from the headers alone when the pool is
 * already full, else when the body is in), suspends the connection and
 * submits a job. The worker runs service_handle(); the loop thread stores
 * the reply on the connection and resumes it; MHD calls the handler again,
 * which queues the reply. Every request ends in on_completed(), which logs,
 * counts and frees. A compute request counts as open (server.accepted, what
 * a drain waits for) from its first call, when its headers are in: an
 * upload in progress at SIGTERM is read, computed and answered (within
 * drain_timeout_s and request_timeout_s).
 *
 * Slow and vanished clients. MHD's connection timeout is an idle timeout:
 * a client sending one byte every few seconds is never idle. So each
 * connection carries a request clock (conn_t), and a sweeper thread looks
 * at every connection four times a second: a request still arriving
 * request_timeout_s after its first byte is cut (shutdown() of the socket,
 * which MHD then sees and closes; the handler also checks the deadline on
 * every body chunk). The sweeper also cuts a connection whose client sent
 * its FIN while a request was arriving or between requests: MHD's epoll is
 * edge-triggered and it stops reading after a short read, so a FIN queued
 * behind the last data raises no new event and MHD would notice it only at
 * connection_timeout_s. No answer is sent on a cut: MHD 0.9 cannot queue a
 * response before the whole body is in, and the sweeper does not own the
 * socket's output.
 */
#include "http.h"

#include <arpa/inet.h>
#include <malloc.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "auth.h"
#include "buf.h"
#include "kserve.h"
#include "log.h"
#include "metrics.h"
#include "norm.h"
#include "pool.h"
#include "problem.h"
#include "router.h"
#include "service.h"

/* A connection's request clock: a phase and the millisecond (CLOCK_MONOTONIC)
 * it began, in one word, so that the HTTP thread and the sweeper move it
 * with one compare-and-swap and a cut can never cross a transition. */
enum {
  CONN_WAITING,   /* no request byte yet: since accept or the last answer */
  CONN_RECEIVING, /* a request is arriving; its deadline counts from `since` */
  CONN_BUSY,      /* the request is in: computing or answering, not timed */
  CONN_CUT_LATE,  /* cut: still arriving past request_timeout_s */
  CONN_CUT_GONE,  /* cut: the client sent its FIN and MHD missed it */
};
enum { SWEEP_MS = 250, FIN_SWEEPS = 2, IDLE_TRIM_MS = 1000 };

/* libmicrohttpd's memory per connection (its default is 32 KiB): the
 * request line and headers, and the read buffer a body arrives through,
 * so it sets how many bytes one recv() and one call of the access handler
 * take. See bench/http_bench.sh for the effect on large bodies. */
#ifndef CONNECTION_MEMORY
#define CONNECTION_MEMORY (128 * 1024)
#endif

/* One TCP connection, MHD's socket_context: created by the STARTED
 * notification, freed by CLOSED. Linked in server.conns under conns_lock;
 * MHD closes the socket only after CLOSED, which unlinks under that lock,
 * so the sweeper may use `fd` while it holds the lock. */
typedef struct conn {
  struct conn *prev, *next;
  MHD_socket fd;
  atomic_llong clock;     /* clock_make(phase, since) */
  atomic_ullong rx_mark;  /* bytes received when CONN_WAITING began */
  int fin_sweeps;         /* sweeper only: sweeps in a row that saw a FIN */
} conn_t;

struct server {
  struct MHD_Daemon *mhd;
  auth_t *auth;        /* API keys; disabled when none are configured */
  char *tls_cert_pem;  /* kept while MHD runs (it does not copy them) */
  char *tls_key_pem;
  pool_t *pool;
  const config_t *cfg;
  limits_t limits;
  atomic_int draining;
  atomic_long accepted; /* compute requests from their first handler call
                           (headers in) until answered or closed: what a
                           drain waits for, so uploads in progress finish */
  atomic_llong last_busy_ms; /* when `accepted` last changed (CLOCK_MONOTONIC) */
  long long trimmed_ms;        /* sweeper only: when it last trimmed the heap */
  uint16_t port;
  pthread_mutex_t conns_lock; /* guards conns and sweeper_stop */
  conn_t *conns;              /* every open connection */
  pthread_cond_t sweeper_wake;
  pthread_t sweeper;
  int sweeper_running;
  int sweeper_stop;
};

static long long now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* A request body as it arrives. The bytes are placed so that data +
 * align_at is BODY_ALIGN-aligned: align_at is the JSON header's length of
 * a framed body (Inference-Header-Content-Length), so the raw tensors after
 * it are aligned and the decoder uses the input in place instead of
 * copying it. mem is the allocation (what free() takes). */
enum { BODY_ALIGN = 64 };
typedef struct {
  char *mem;
  char *data;
  size_t len, cap;
  size_t align_at;
} body_t;

static void body_free(body_t *b) {
  free(b->mem);
  memset(b, 0, sizeof *b);
}

/* Bodies of at least STREAM_BODY_MIN bytes are written with streaming
 * (non-temporal) stores: under load a worker reads a large body long after
 * it arrived, by when it has left the cache anyway, and plain stores would
 * first read every destination line from memory. bench/http_bench.sh,
 * 512x2048 framed at 16 connections, A/B in one run: 373-407 req/s with
 * memcpy, 421-431 with this; a lone client loses 1-3% (its body would
 * still have been in the cache). */
enum { STREAM_BODY_MIN = 1 << 20 };

static void copy_streaming(char *dst, const char *src, size_t n) {
#ifdef __SSE2__
  size_t i = (size_t)(-(uintptr_t)dst & 63); /* whole lines from here on */
  if (i > n) i = n;
  memcpy(dst, src, i);
  for (; i + 64 <= n; i += 64)
    for (int k = 0; k < 64; k += 16)
      _mm_stream_si128((__m128i *)(dst + i + k),
                       _mm_loadu_si128((const __m128i *)(src + i + k)));
  _mm_sfence(); /* before the worker thread reads them */
  memcpy(dst + i, src + i, n - i);
#else
  memcpy(dst, src, n);
#endif
}

/* Appends n bytes; the first call sizes the buffer for `expected` bytes
 * (Content-Length, already checked against the limit), chunked bodies grow
 * by doubling. Returns 0 or -1 when out of memory. */
static int body_append(body_t *b, const char *bytes, size_t n, size_t expected) {
  if (b->len + n > b->cap) {
    size_t cap = b->cap ? b->cap : expected > 0 ? expected : 4096;
    while (cap < b->len + n) cap *= 2;
    char *mem = malloc(cap + BODY_ALIGN);
    if (mem == NULL) return -1;
    char *data = mem + (BODY_ALIGN - ((uintptr_t)mem + b->align_at) % BODY_ALIGN) %
                           BODY_ALIGN;
    if (b->len) memcpy(data, b->data, b->len);
    free(b->mem);
    b->mem = mem;
    b->data = data;
    b->cap = cap;
  }
  if (expected >= STREAM_BODY_MIN) copy_streaming(b->data + b->len, bytes, n);
  else memcpy(b->data + b->len, bytes, n);
  b->len += n;
  return 0;
}

/* One HTTP request's state, owned by MHD's per-request pointer: created on
 * the first handler call, freed in on_completed(). While suspended, only the
 * job's done callback touches it (then resumes). */
typedef struct {
  server_t *srv;
  struct MHD_Connection *mhd_conn;
  const route_t *route; /* NULL: no such path */
  route_match_t match;
  char method[16];
  char path[128];
  struct timespec start;
  body_t body;
  uint64_t bytes_in;
  int reply_ready; /* reply holds the answer to queue */
  reply_t reply;
  int status_sent;
  uint64_t bytes_out;
  int accepted; /* counted in server.accepted (a compute route) */
  size_t expected; /* Content-Length, 0 if absent */
  conn_t *conn;    /* its connection; NULL if that had no memory for one */
  long long deadline_ms; /* all of it must be in by then; 0 = no limit */
  int received;          /* all of it is in (the clock says CONN_BUSY) */
  int timed_out;         /* closed unanswered at the deadline */
} request_state_t;

/* A compute request crossing the pool. The HTTP thread creates it and moves
 * the body into it; the worker fills `reply` and frees the body; the done
 * callback moves the reply to the request state, resumes the connection and
 * frees the job. */
typedef struct {
  pool_job_t base;
  request_state_t *rs;
  body_t body;
  op_t op;
  int kserve;
  char *content_type; /* copies of the headers, NULL when absent */
  char *accept;
  char *header_length;
  query_param_t *query; /* copies of the query parameters */
  size_t nquery;
  limits_t limits;
  reply_t reply;
} job_t;

static double elapsed_s(const struct timespec *since) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (double)(now.tv_sec - since->tv_sec) +
         (double)(now.tv_nsec - since->tv_nsec) * 1e-9;
}

static const char *header(struct MHD_Connection *c, const char *name) {
  return MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
}

/* ---- replies ---- */

static void problem_now(request_state_t *rs, problem_code_t id,
                        const char *fmt, const char *arg) {
  problem_t p;
  memset(&p, 0, sizeof p);
  problem_set(&p, id, NULL, fmt, arg);
  if (rs->route && rs->route->kserve) problem_reply_kserve(&p, &rs->reply);
  else problem_reply(&p, &rs->reply);
  rs->reply_ready = 1;
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
  const char *origin = header(rs->mhd_conn, "Origin");
  int listed = origins[0] != '\0' && strcmp(origins, "*") != 0;
  /* With a list, every answer depends on Origin (allowed or not, or none):
   * a cache must not hand one origin's answer to another. */
  if (listed) MHD_add_response_header(resp, "Vary", "Origin");
  if (!origin_allowed(origins, origin)) return;
  if (listed)
    MHD_add_response_header(resp, "Access-Control-Allow-Origin", origin);
  else
    MHD_add_response_header(resp, "Access-Control-Allow-Origin", "*");
  MHD_add_response_header(resp, "Access-Control-Expose-Headers",
                          "Retry-After, Inference-Header-Content-Length");
  if (strcmp(rs->method, "OPTIONS") == 0 && rs->route != NULL) {
    MHD_add_response_header(resp, "Access-Control-Allow-Methods",
                            rs->route->allow);
    const char *asked =
        header(rs->mhd_conn, "Access-Control-Request-Headers");
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
    resp = MHD_create_response_from_buffer(r->len, r->body, MHD_RESPMEM_MUST_FREE);
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

static enum MHD_Result send_reply(request_state_t *rs) {
  reply_t *r = &rs->reply;
  size_t bytes = r->len + r->parts_len;
  struct MHD_Response *resp = response_of(r);
  if (resp == NULL) return MHD_NO;
  if (r->content_type)
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, r->content_type);
  if (r->retry_after_s > 0) {
    char s[16];
    snprintf(s, sizeof s, "%d", r->retry_after_s);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, s);
  }
  if (r->allow) MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, r->allow);
  if (r->close) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
  if (r->unauthorized)
    MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
                            "Bearer realm=\"normd\"");
  if (r->header_length > 0) {
    char n[24];
    snprintf(n, sizeof n, "%lld", (long long)r->header_length);
    MHD_add_response_header(resp, "Inference-Header-Content-Length", n);
  }
  add_cors(rs, resp);
  rs->status_sent = r->status;
  rs->bytes_out = bytes;
  enum MHD_Result ok = MHD_queue_response(rs->mhd_conn, (unsigned)r->status, resp);
  MHD_destroy_response(resp);
  return ok;
}

/* ---- small GET routes, answered on the HTTP thread ---- */

static void read_file_reply(request_state_t *rs, const char *path,
                            const char *content_type) {
  FILE *f = fopen(path, "rb");
  char *data = NULL;
  long size = -1;
  if (f && fseek(f, 0, SEEK_END) == 0 && (size = ftell(f)) >= 0 &&
      fseek(f, 0, SEEK_SET) == 0 && (data = malloc((size_t)size + 1)) != NULL &&
      fread(data, 1, (size_t)size, f) == (size_t)size) {
    reply_free(&rs->reply);
    rs->reply = (reply_t){.status = 200, .content_type = content_type,
                          .body = data, .len = (size_t)size};
    rs->reply_ready = 1;
  } else {
    free(data);
    problem_now(rs, PROBLEM_NOT_FOUND, "%s is not available on this server", path);
  }
  if (f) fclose(f);
}

static void info_reply(request_state_t *rs) {
  const config_t *cfg = rs->srv->cfg;
  buf_t b;
  buf_init(&b);
  buf_printf(&b,
             "{\"name\":\"normd\",\"version\":\"%s\",\"revision\":\"%s\","
             "\"limits\":{\"max_body_bytes\":%lld,\"max_elements\":%lld,"
             "\"max_inflight\":%lld,\"max_json_depth\":%lld,\"max_rank\":%d,"
             "\"max_explain_elements\":%lld,\"request_timeout_s\":%lld},"
             "\"threads\":%lld,\"dtypes\":[",
             NORMD_VERSION, NORMD_REVISION, (long long)cfg->max_body_bytes,
             (long long)cfg->max_elements, (long long)cfg->max_inflight,
             (long long)cfg->max_json_depth, NORM_MAX_RANK,
             (long long)cfg->max_explain_elements,
             (long long)cfg->request_timeout_s, (long long)cfg->threads);
  for (int d = 0; d < NORM_DTYPE_COUNT; d++)
    buf_printf(&b, "%s\"%s\"", d ? "," : "", norm_dtype_name((norm_dtype_t)d));
  buf_puts(&b, "],\"norms\":[\"layer\",\"rms\",\"batch\",\"group\",\"instance\"],"
               "\"content_types\":[\"application/json\",\"application/octet-stream\","
               "\"application/x-npy\"],\"routes\":[");
  for (size_t i = 0; i < router_count; i++)
    buf_printf(&b, "%s{\"path\":\"%s\",\"methods\":\"%s\"}", i ? "," : "",
               router_routes[i].path, router_routes[i].allow);
  buf_puts(&b, "]}");
  size_t len;
  char *body = buf_steal(&b, &len);
  if (body == NULL) {
    problem_now(rs, PROBLEM_OUT_OF_MEMORY, "%s", "out of memory");
    return;
  }
  reply_free(&rs->reply);
  rs->reply = (reply_t){.status = 200, .content_type = "application/json",
                        .body = body, .len = len};
  rs->reply_ready = 1;
}

/* A 200 JSON reply written by fill(). */
static void json_reply(request_state_t *rs,
                       void (*fill)(const request_state_t *, buf_t *)) {
  buf_t b;
  buf_init(&b);
  fill(rs, &b);
  size_t len;
  char *body = buf_steal(&b, &len);
  if (body == NULL) {
    problem_now(rs, PROBLEM_OUT_OF_MEMORY, "%s", "out of memory");
    return;
  }
  reply_free(&rs->reply);
  rs->reply = (reply_t){.status = 200, .content_type = "application/json",
                        .body = body, .len = len};
  rs->reply_ready = 1;
}

/* KServe v2 health: the status is the answer, the body is empty. */
static void empty_reply(request_state_t *rs, int status) {
  reply_free(&rs->reply);
  rs->reply = (reply_t){.status = status};
  rs->reply_ready = 1;
}

static void kserve_server_metadata(const request_state_t *rs, buf_t *b) {
  (void)rs;
  buf_printf(b, "{\"name\":\"normd\",\"version\":\"%s\","
                "\"extensions\":[\"binary_tensor_data\"]}", NORMD_VERSION);
}

static void model_metadata(const request_state_t *rs, buf_t *b) {
  kserve_model_metadata(rs->match.op, b);
}

static void get_reply(request_state_t *rs) {
  server_t *srv = rs->srv;
  char path[1100];
  switch (rs->route->handler) {
  case H_HEALTHZ:
    reply_text(&rs->reply, 200, "application/json", "{\"status\":\"ok\"}");
    rs->reply_ready = 1;
    break;
  case H_READYZ:
    if (atomic_load(&srv->draining)) {
      problem_now(rs, PROBLEM_DRAINING, "%s", "normd is shutting down");
      rs->reply.retry_after_s = (int)srv->cfg->retry_after_s;
    } else {
      reply_text(&rs->reply, 200, "application/json", "{\"status\":\"ready\"}");
      rs->reply_ready = 1;
    }
    break;
  case H_METRICS: {
    char *text = metrics_render();
    if (text == NULL) {
      problem_now(rs, PROBLEM_OUT_OF_MEMORY, "%s", "out of memory");
      break;
    }
    reply_free(&rs->reply);
    rs->reply = (reply_t){.status = 200,
                          .content_type = "text/plain; version=0.0.4; charset=utf-8",
                          .body = text, .len = strlen(text)};
    rs->reply_ready = 1;
    break;
  }
  case H_INFO: info_reply(rs); break;
  case H_OPENAPI:
    read_file_reply(rs, srv->cfg->openapi_path, "application/yaml");
    break;
  case H_WEB:
    snprintf(path, sizeof path, "%s/index.html", srv->cfg->web_root);
    read_file_reply(rs, path, "text/html; charset=utf-8");
    break;
  case H_V2_SERVER: json_reply(rs, kserve_server_metadata); break;
  case H_V2_LIVE: empty_reply(rs, 200); break;
  case H_V2_READY:
  case H_V2_MODEL_READY: /* every model is loaded while the server is up */
    empty_reply(rs, atomic_load(&srv->draining) ? 503 : 200);
    break;
  case H_V2_MODEL: json_reply(rs, model_metadata); break;
  case H_COMPUTE: break; /* not a GET route */
  }
}

static void preflight_reply(request_state_t *rs) {
  reply_free(&rs->reply);
  rs->reply = (reply_t){.status = 204};
  rs->reply_ready = 1;
}

/* ---- the compute path ---- */

static void job_run(pool_job_t *base) {
  job_t *job = (job_t *)base;
  service_input_t in = {
      .op = job->op, .body = job->body.data, .len = job->body.len,
      .body_mem = job->body.mem, .content_type = job->content_type,
      .accept = job->accept, .header_length = job->header_length,
      .query = job->query, .nquery = job->nquery, .kserve = job->kserve,
      .by_reference = 1};
  job->body = (body_t){0}; /* the service owns it now */
  service_handle(&in, &job->limits, &job->reply);
}

static void job_free(job_t *job) {
  free(job->content_type);
  free(job->accept);
  free(job->header_length);
  for (size_t i = 0; i < job->nquery; i++) {
    free((char *)job->query[i].key);
    free((char *)job->query[i].value);
  }
  free(job->query);
  body_free(&job->body);
  free(job);
}

static void job_done(pool_job_t *base) {
  job_t *job = (job_t *)base;
  request_state_t *rs = job->rs;
  reply_free(&rs->reply);
  rs->reply = job->reply;
  rs->reply_ready = 1;
  struct MHD_Connection *c = rs->mhd_conn;
  job_free(job);
  MHD_resume_connection(c);
}

/* A copy of a header value (NULL stays NULL); -1 on out of memory. */
static int copy_header(char **dst, const char *value) {
  *dst = value ? strdup(value) : NULL;
  return (value != NULL && *dst == NULL) ? -1 : 0;
}

enum { MAX_QUERY_PARAMS = 64 };

/* MHD iterator: copies each query parameter into the job (values already
 * percent-decoded). Stops, leaving nquery past the limit, when there are
 * too many; a failed copy leaves a NULL key. */
static enum MHD_Result collect_query(void *cls, enum MHD_ValueKind kind,
                                     const char *key, const char *value) {
  (void)kind;
  job_t *job = cls;
  if (job->nquery == MAX_QUERY_PARAMS) {
    job->nquery++;
    return MHD_NO;
  }
  query_param_t *q = &job->query[job->nquery++];
  q->key = strdup(key);
  q->value = value ? strdup(value) : NULL;
  return (q->key && (value == NULL || q->value)) ? MHD_YES : MHD_NO;
}

static int copy_query(job_t *job, struct MHD_Connection *c) {
  job->query = calloc(MAX_QUERY_PARAMS + 1, sizeof *job->query);
  if (job->query == NULL) return -1;
  MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, collect_query, job);
  for (size_t i = 0; i < job->nquery && i < MAX_QUERY_PARAMS; i++)
    if (job->query[i].key == NULL) return -1;
  return 0;
}

/* 503: max_inflight jobs are queued or running. */
static void overloaded(request_state_t *rs) {
  problem_now(rs, PROBLEM_OVERLOADED,
              "%s", "too many requests in flight; retry after a moment");
  rs->reply.retry_after_s = (int)rs->srv->cfg->retry_after_s;
}

/* Body complete: hand it to the pool, or answer 503 at once. The request
 * was counted in server.accepted on its first call, so a drain that began
 * since waits for it. */
static enum MHD_Result submit_compute(request_state_t *rs) {
  server_t *srv = rs->srv;
  if (pool_try_reserve(srv->pool) != 0) { /* filled up while the body came */
    overloaded(rs);
    return send_reply(rs);
  }
  job_t *job = calloc(1, sizeof *job);
  struct MHD_Connection *c = rs->mhd_conn;
  if (job == NULL ||
      copy_header(&job->content_type, header(c, MHD_HTTP_HEADER_CONTENT_TYPE)) != 0 ||
      copy_header(&job->accept, header(c, MHD_HTTP_HEADER_ACCEPT)) != 0 ||
      copy_header(&job->header_length, header(c, "Inference-Header-Content-Length")) != 0 ||
      copy_query(job, c) != 0)
    goto err;
  if (job->nquery > MAX_QUERY_PARAMS) {
    job_free(job);
    pool_release(srv->pool);
    problem_now(rs, PROBLEM_TOO_MANY_PARAMETERS,
                "more than %s query parameters", "64");
    return send_reply(rs);
  }
  job->base.run = job_run;
  job->base.done = job_done;
  job->rs = rs;
  job->op = rs->match.op;
  job->kserve = rs->route->kserve;
  job->limits = srv->limits;
  job->body = rs->body; /* moves */
  memset(&rs->body, 0, sizeof rs->body);
  MHD_suspend_connection(rs->mhd_conn);
  pool_submit(srv->pool, &job->base);
  return MHD_YES;

err:
  if (job) job_free(job);
  pool_release(srv->pool);
  problem_now(rs, PROBLEM_OUT_OF_MEMORY, "%s", "out of memory");
  return send_reply(rs);
}

static void too_large(request_state_t *rs) {
  char limit[32];
  snprintf(limit, sizeof limit, "%lld", (long long)rs->srv->cfg->max_body_bytes);
  problem_now(rs, PROBLEM_BODY_TOO_LARGE,
              "request body larger than max_body_bytes (%s bytes)", limit);
  rs->reply.close = 1;
}

/* Whether a route asks for an API key: compute routes, or with scope
 * "all" every route but liveness and readiness. */
static int needs_key(const server_t *srv, const route_t *r) {
  if (!auth_enabled(srv->auth)) return 0;
  if (strcmp(srv->cfg->api_key_scope, "all") == 0)
    return r->handler != H_HEALTHZ && r->handler != H_READYZ &&
           r->handler != H_V2_LIVE && r->handler != H_V2_READY;
  return r->handler == H_COMPUTE;
}

/* What every header line says about where the body ends and how it is
 * coded (MHD_lookup_connection_value sees only the first of a repeated
 * header). */
typedef struct {
  const char *content_length; /* the first */
  int content_length_conflict; /* a later one says otherwise */
  int transfer_encodings;      /* Transfer-Encoding lines */
  int transfer_other;          /* one of them is not exactly "chunked" */
  const char *content_encoding; /* a value naming a coding but identity */
} framing_t;

/* Whether a Content-Encoding value (a list of codings) names one other
 * than identity; if so the value into *other. */
static int names_coding(const char *value, const char **other) {
  for (const char *p = value; *p;) {
    p += strspn(p, " \t,");
    size_t n = strcspn(p, " \t,");
    if (n > 0 && !(n == 8 && strncasecmp(p, "identity", 8) == 0)) {
      *other = value;
      return 1;
    }
    p += n;
  }
  return 0;
}

static enum MHD_Result look_framing(void *cls, enum MHD_ValueKind kind,
                                    const char *key, const char *value) {
  (void)kind;
  framing_t *f = cls;
  if (value == NULL) value = "";
  if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0) {
    if (f->content_length == NULL) f->content_length = value;
    else if (strcmp(f->content_length, value) != 0)
      f->content_length_conflict = 1;
  } else if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) {
    f->transfer_encodings++;
    if (strcasecmp(value, "chunked") != 0) f->transfer_other = 1;
  } else if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_ENCODING) == 0 &&
             f->content_encoding == NULL) {
    names_coding(value, &f->content_encoding);
  }
  return MHD_YES;
}

/* Framing normd does not guess at, refused on any route before routing,
 * with the connection closed so no byte of the body is read as a next
 * request: Content-Length lines that disagree (libmicrohttpd would use the
 * first, a proxy in front perhaps another: request smuggling), and a
 * Transfer-Encoding other than one "chunked" (libmicrohttpd would read
 * the body until the client closes, which it never does). Returns 1 when
 * it answered. */
static int refuse_framing(request_state_t *rs, const framing_t *f) {
  if (f->content_length_conflict) {
    problem_now(rs, PROBLEM_BAD_REQUEST, "%s",
                "Content-Length is given more than once with different "
                "values: send one");
  } else if (f->transfer_encodings > 1 || f->transfer_other) {
    problem_now(rs, PROBLEM_UNSUPPORTED_TRANSFER_ENCODING, "%s",
                "normd reads Transfer-Encoding: chunked only (one coding, "
                "in one header)");
  } else {
    return 0;
  }
  rs->reply.close = 1;
  return 1;
}

/* Decides on the first call, before any body byte is read, whether the
 * request can be answered at once (404, 405, OPTIONS, 413 by
 * Content-Length, 503 while draining or with max_inflight jobs queued or
 * running, GET routes). */
static void first_call(request_state_t *rs, const char *url, const char *method) {
  server_t *srv = rs->srv;
  framing_t framing = {0};
  MHD_get_connection_values(rs->mhd_conn, MHD_HEADER_KIND, look_framing,
                            &framing);
  router_match(url, &rs->match);
  rs->route = rs->match.route;
  if (refuse_framing(rs, &framing)) return;
  if (rs->route == NULL) {
    problem_now(rs, PROBLEM_NOT_FOUND, "no route %s; see GET /v1/info", url);
    return;
  }
  if (rs->route->kserve && strstr(rs->route->path, "{model}") &&
      !rs->match.model_known) {
    problem_now(rs, PROBLEM_UNKNOWN_MODEL,
                "unknown model or version: \"%s\" (models: layer_norm, "
                "rms_norm, batch_norm, group_norm, instance_norm; version 1)",
                rs->match.model);
    return;
  }
  if (!router_allows(rs->route, method)) {
    problem_now(rs, PROBLEM_METHOD_NOT_ALLOWED, "%s is not allowed here", method);
    rs->reply.allow = rs->route->allow;
    return;
  }
  if (strcmp(method, "OPTIONS") == 0) { /* preflights carry no credentials */
    preflight_reply(rs);
    return;
  }
  if (needs_key(srv, rs->route) &&
      !auth_check(srv->auth, header(rs->mhd_conn, MHD_HTTP_HEADER_AUTHORIZATION))) {
    problem_now(rs, PROBLEM_UNAUTHORIZED, "%s",
                "this route needs an API key: Authorization: Bearer <key>");
    rs->reply.unauthorized = 1;
    rs->reply.close = 1; /* answer now; do not read the body */
    return;
  }
  if (rs->route->handler != H_COMPUTE) {
    get_reply(rs);
    return;
  }
  if (framing.content_encoding != NULL) { /* a gzip body read as JSON: garbage */
    problem_now(rs, PROBLEM_UNSUPPORTED_MEDIA_TYPE, "%s",
                "normd does not decode Content-Encoding: send the body "
                "uncompressed (no Content-Encoding, or identity)");
    rs->reply.close = 1; /* answer now; do not read the body */
    return;
  }
  /* Count first, then look at draining: with both atomics sequentially
   * consistent, a drain either sees this request (and waits for its body,
   * its job and its answer) or this request sees the drain and is refused,
   * never neither. */
  atomic_fetch_add(&srv->accepted, 1);
  atomic_store(&srv->last_busy_ms, now_ms());
  rs->accepted = 1;
  if (atomic_load(&srv->draining)) {
    problem_now(rs, PROBLEM_DRAINING, "%s", "normd is shutting down");
    rs->reply.retry_after_s = (int)srv->cfg->retry_after_s;
    rs->reply.close = 1;
    return;
  }
  const char *cl = header(rs->mhd_conn, MHD_HTTP_HEADER_CONTENT_LENGTH);
  if (cl != NULL) {
    char *end;
    unsigned long long n = strtoull(cl, &end, 10);
    if (n > (unsigned long long)srv->cfg->max_body_bytes) too_large(rs);
    else if (*end == '\0') rs->expected = (size_t)n;
  }
  /* The pool is full: say so now rather than after the upload. This only
   * looks; the slot is reserved when the body is in (submit_compute), so a
   * pool that fills up meanwhile still answers 503 then. Queued before the
   * body is read, the answer makes MHD skip the body and close the
   * connection, hence Connection: close. */
  if (!rs->reply_ready && pool_inflight(srv->pool) >= srv->cfg->max_inflight) {
    overloaded(rs);
    rs->reply.close = 1;
  }
  /* A framed body's tensors follow its JSON header: align them (body_t). */
  const char *hl = header(rs->mhd_conn, "Inference-Header-Content-Length");
  if (hl != NULL) {
    char *end;
    unsigned long long n = strtoull(hl, &end, 10);
    if (*end == '\0' && n < (unsigned long long)srv->cfg->max_body_bytes)
      rs->body.align_at = (size_t)n;
  }
}

/* ---- request clocks and the sweeper ---- */

static long long clock_make(int phase, long long since_ms) {
  return since_ms * 8 + phase;
}
static int clock_phase(long long c) { return (int)(c & 7); }
static long long clock_since(long long c) { return c >> 3; }

/* glibc's struct tcp_info stops at tcpi_total_retrans; the kernel's goes
 * on (include/uapi/linux/tcp.h, an append-only ABI; tcpi_bytes_received
 * since Linux 4.1). <linux/tcp.h> clashes with <netinet/tcp.h>, which uv.h
 * includes, hence the tail spelled out here. */
typedef struct {
  struct tcp_info base;
  uint64_t pacing_rate, max_pacing_rate, bytes_acked;
  uint64_t bytes_received;
} tcp_info_ext_t;
_Static_assert(offsetof(tcp_info_ext_t, bytes_received) == 128,
               "struct tcp_info no longer matches the kernel's layout");

/* What the kernel knows of a connection: the bytes received so far and
 * whether the peer has sent its FIN. -1 when it cannot tell. */
static int tcp_look(MHD_socket fd, unsigned long long *rx, int *fin) {
  tcp_info_ext_t ti;
  socklen_t len = sizeof ti;
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0 ||
      len < sizeof ti)
    return -1;
  *rx = ti.bytes_received;
  *fin = ti.base.tcpi_state == TCP_CLOSE_WAIT;
  return 0;
}

/* MHD's connection notifications: link a new connection in server.conns
 * with its clock running if request bytes came before accept, and unlink
 * a closed one. */
static void on_connection(void *cls, struct MHD_Connection *c,
                          void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
  server_t *srv = cls;
  conn_t *conn = *socket_context;
  if (code == MHD_CONNECTION_NOTIFY_STARTED) {
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (ci == NULL || (conn = calloc(1, sizeof *conn)) == NULL)
      return; /* then only MHD's idle timeout applies to it */
    unsigned long long rx = 0;
    int fin = 0;
    conn->fd = ci->connect_fd;
    if (tcp_look(conn->fd, &rx, &fin) != 0) rx = 0;
    atomic_init(&conn->clock,
                clock_make(rx > 0 ? CONN_RECEIVING : CONN_WAITING, now_ms()));
    atomic_init(&conn->rx_mark, rx);
    pthread_mutex_lock(&srv->conns_lock);
    conn->next = srv->conns;
    if (srv->conns) srv->conns->prev = conn;
    srv->conns = conn;
    pthread_mutex_unlock(&srv->conns_lock);
    *socket_context = conn;
    return;
  }
  if (conn == NULL) return;
  pthread_mutex_lock(&srv->conns_lock);
  if (conn->prev) conn->prev->next = conn->next;
  else srv->conns = conn->next;
  if (conn->next) conn->next->prev = conn->prev;
  pthread_mutex_unlock(&srv->conns_lock);
  free(conn);
  *socket_context = NULL;
}

static int past_deadline(request_state_t *rs, long long now) {
  if (rs->deadline_ms == 0 || now <= rs->deadline_ms) return 0;
  rs->timed_out = 1;
  return 1;
}

/* The request's headers are in: its deadline counts from its first byte,
 * as the sweeper saw it (at most a sweep late), else from now. -1 when the
 * deadline has passed or the sweeper cut the connection. */
static int deadline_begin(request_state_t *rs) {
  long long now = now_ms(), since = now;
  conn_t *conn = rs->conn;
  if (conn != NULL) {
    long long c = atomic_load(&conn->clock);
    for (;;) {
      int phase = clock_phase(c);
      if (phase >= CONN_CUT_LATE) return -1;
      if (phase == CONN_RECEIVING) {
        since = clock_since(c);
        break;
      }
      if (atomic_compare_exchange_weak(&conn->clock, &c,
                                       clock_make(CONN_RECEIVING, now)))
        break;
    }
  }
  int64_t timeout_s = rs->srv->cfg->request_timeout_s;
  rs->deadline_ms = timeout_s > 0 ? since + timeout_s * 1000 : 0;
  return past_deadline(rs, now) ? -1 : 0;
}

/* The whole request is in, or is answered before its body is read: its
 * clock stops. -1 when it came too late or the sweeper cut it meanwhile. */
static int request_received(request_state_t *rs) {
  if (rs->received) return 0;
  if (past_deadline(rs, now_ms())) return -1;
  if (rs->conn != NULL) {
    long long c = atomic_load(&rs->conn->clock);
    do {
      if (clock_phase(c) >= CONN_CUT_LATE) return -1;
    } while (!atomic_compare_exchange_weak(&rs->conn->clock, &c,
                                           clock_make(CONN_BUSY, 0)));
  }
  rs->received = 1;
  return 0;
}

/* The request is over; the connection waits for the next one (or closes).
 * Records the bytes received so far, so that the sweeper can tell when the
 * next request's first byte comes. Returns the phase it leaves. */
static int request_over(request_state_t *rs) {
  conn_t *conn = rs->conn;
  if (conn == NULL) return CONN_BUSY;
  unsigned long long rx = 0;
  int fin = 0;
  if (tcp_look(conn->fd, &rx, &fin) != 0) rx = ~0ULL; /* sweeper: unknown */
  atomic_store(&conn->rx_mark, rx);
  long long c = atomic_load(&conn->clock);
  do {
    if (clock_phase(c) >= CONN_CUT_LATE) return clock_phase(c);
  } while (!atomic_compare_exchange_weak(&conn->clock, &c,
                                         clock_make(CONN_WAITING, now_ms())));
  return clock_phase(c);
}

/* Whether all the client's bytes have been read and only its FIN is left:
 * what MHD's edge-triggered epoll can miss (after a short read MHD waits
 * for the next event, and a FIN that came with the data raises none). */
static int fin_unread(MHD_socket fd) {
  char b;
  return recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

/* Moves the clock from c to a cut (CONN_CUT_*) and shuts the socket down
 * both ways; MHD sees that, closes the connection and ends its request.
 * 0, or -1 when the clock had moved from c meanwhile. */
static int conn_cut(conn_t *conn, long long c, int why, long long now) {
  if (!atomic_compare_exchange_strong(&conn->clock, &c, clock_make(why, now)))
    return -1;
  shutdown(conn->fd, SHUT_RDWR);
  return 0;
}

/* One look at one connection, conns_lock held (so conn->fd is open).
 * Returns the phase it cut the connection to, or 0. */
static int sweep_one(const server_t *srv, conn_t *conn, long long now) {
  long long c = atomic_load(&conn->clock);
  int phase = clock_phase(c);
  unsigned long long rx = 0;
  int fin = 0, known = 0;
  if (phase != CONN_WAITING && phase != CONN_RECEIVING) {
    conn->fin_sweeps = 0;
    return 0;
  }
  known = tcp_look(conn->fd, &rx, &fin) == 0;
  long long timeout_ms = srv->cfg->request_timeout_s * 1000;
  if (phase == CONN_WAITING && timeout_ms > 0 &&
      (!known || rx > atomic_load(&conn->rx_mark))) {
    /* A request's first byte came since the previous look. Its clock
     * starts now: never before the byte, at most one sweep after it. */
    long long armed = clock_make(CONN_RECEIVING, now);
    if (!atomic_compare_exchange_strong(&conn->clock, &c, armed))
      return 0; /* it moved meanwhile: look again next time */
    c = armed;
    phase = CONN_RECEIVING;
  }
  int cut = 0;
  if (phase == CONN_RECEIVING && timeout_ms > 0 &&
      now - clock_since(c) > timeout_ms)
    cut = CONN_CUT_LATE;
  else if (known && fin && fin_unread(conn->fd)) {
    if (++conn->fin_sweeps >= FIN_SWEEPS)
      cut = CONN_CUT_GONE; /* MHD missed it for a whole sweep */
  } else {
    conn->fin_sweeps = 0;
  }
  return cut != 0 && conn_cut(conn, c, cut, now) == 0 ? cut : 0;
}

/* Big buffers (bodies, tensors, replies) stay in malloc's heap between
 * requests (main.c raises the mmap threshold: no page faults and zeroing
 * per request); once no compute request has been accepted or answered for
 * IDLE_TRIM_MS, and none is in flight, the heap's free memory goes back to
 * the system. */
static void trim_when_idle(server_t *srv, long long now) {
  long long last = atomic_load(&srv->last_busy_ms);
  if (last > srv->trimmed_ms && now - last >= IDLE_TRIM_MS &&
      atomic_load(&srv->accepted) == 0) {
    malloc_trim(0);
    srv->trimmed_ms = now;
  }
}

static void *sweeper_main(void *arg) {
  server_t *srv = arg;
  pthread_mutex_lock(&srv->conns_lock);
  while (!srv->sweeper_stop) {
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_nsec += SWEEP_MS * 1000000L;
    until.tv_sec += until.tv_nsec / 1000000000L;
    until.tv_nsec %= 1000000000L;
    pthread_cond_timedwait(&srv->sweeper_wake, &srv->conns_lock, &until);
    if (srv->sweeper_stop) break;
    long long now = now_ms();
    trim_when_idle(srv, now);
    int late = 0, gone = 0;
    for (conn_t *conn = srv->conns; conn != NULL; conn = conn->next) {
      int cut = sweep_one(srv, conn, now);
      late += cut == CONN_CUT_LATE;
      gone += cut == CONN_CUT_GONE;
    }
    if ((late || gone) && log_enabled(LOG_INFO)) {
      pthread_mutex_unlock(&srv->conns_lock);
      if (late)
        log_msg(LOG_INFO, "closed %d connection%s: request not in within "
                "request_timeout_s (%llds)", late, late == 1 ? "" : "s",
                (long long)srv->cfg->request_timeout_s);
      if (gone)
        log_msg(LOG_INFO, "closed %d connection%s whose client left (FIN) "
                "mid-request or between requests", gone, gone == 1 ? "" : "s");
      pthread_mutex_lock(&srv->conns_lock);
    }
  }
  pthread_mutex_unlock(&srv->conns_lock);
  return NULL;
}

static int sweeper_start(server_t *srv) {
  if (pthread_create(&srv->sweeper, NULL, sweeper_main, srv) != 0) return -1;
  srv->sweeper_running = 1;
  return 0;
}

static void sweeper_stop(server_t *srv) {
  if (!srv->sweeper_running) return;
  pthread_mutex_lock(&srv->conns_lock);
  srv->sweeper_stop = 1;
  pthread_cond_signal(&srv->sweeper_wake);
  pthread_mutex_unlock(&srv->conns_lock);
  pthread_join(srv->sweeper, NULL);
  srv->sweeper_running = 0;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c,
                                  const char *url, const char *method,
                                  const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **state) {
  (void)version;
  server_t *srv = cls;
  request_state_t *rs = *state;
  if (rs == NULL) {
    rs = calloc(1, sizeof *rs);
    if (rs == NULL) return MHD_NO;
    *state = rs;
    rs->srv = srv;
    rs->mhd_conn = c;
    clock_gettime(CLOCK_MONOTONIC, &rs->start);
    snprintf(rs->method, sizeof rs->method, "%s", method);
    snprintf(rs->path, sizeof rs->path, "%s", url);
    metrics_inflight_add(1);
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    rs->conn = ci ? ci->socket_context : NULL;
    if (deadline_begin(rs) != 0) return MHD_NO; /* closes, unanswered */
    first_call(rs, url, method);
    /* An error decided before the body is read goes out now (MHD then
     * closes the connection rather than read the body); anything else,
     * GET routes included, is sent on the next call, so keep-alive holds. */
    if (rs->reply_ready && rs->reply.close)
      return request_received(rs) == 0 ? send_reply(rs) : MHD_NO;
    return MHD_YES;
  }
  if (*upload_data_size > 0) {
    size_t n = *upload_data_size;
    *upload_data_size = 0;
    rs->bytes_in += n;
    long long now = now_ms();
    if (past_deadline(rs, now)) {
      /* cut as the sweeper does: MHD_NO would close too, but MHD would log
       * an "application error" for every slow client */
      if (rs->conn == NULL) return MHD_NO;
      long long clk = atomic_load(&rs->conn->clock);
      if (clock_phase(clk) == CONN_RECEIVING)
        conn_cut(rs->conn, clk, CONN_CUT_LATE, now);
      return MHD_YES; /* the rest is dropped until MHD sees the cut */
    }
    /* A refused body is read and dropped (no memory held): libmicrohttpd
     * 0.9 cannot queue a reply before the upload ends, and closing instead
     * would leave the client without its 413. */
    if (rs->reply_ready) return MHD_YES;
    if (rs->body.len + n > (size_t)srv->cfg->max_body_bytes) {
      body_free(&rs->body);
      too_large(rs);
      return MHD_YES;
    }
    if (body_append(&rs->body, upload_data, n, rs->expected) != 0) {
      problem_now(rs, PROBLEM_OUT_OF_MEMORY, "%s", "out of memory");
      rs->reply.close = 1;
    }
    return MHD_YES;
  }
  if (request_received(rs) != 0) return MHD_NO; /* too late, or cut */
  if (rs->reply_ready) return send_reply(rs); /* a finished job, or an error */
  return submit_compute(rs);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **state,
                         enum MHD_RequestTerminationCode toe) {
  (void)c;
  server_t *srv = cls;
  request_state_t *rs = *state;
  if (rs == NULL) return;
  *state = NULL;
  double secs = elapsed_s(&rs->start);
  int late = request_over(rs) == CONN_CUT_LATE || rs->timed_out;
  /* Unanswered, as nginx logs it: 408 cut at request_timeout_s or idle
   * past connection_timeout_s, 444 closed by the server (shutdown), 499
   * the client left. */
  int status = rs->status_sent;
  const char *why = "";
  if (late) {
    why = " (closed: request_timeout_s)";
  } else if (toe == MHD_REQUEST_TERMINATED_TIMEOUT_REACHED) {
    why = " (closed: connection_timeout_s)";
    late = 1;
  } else if (toe == MHD_REQUEST_TERMINATED_DAEMON_SHUTDOWN) {
    why = " (dropped: shutdown)";
  } else if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK) {
    why = " (aborted)";
  }
  if (status == 0)
    status = late ? 408 : toe == MHD_REQUEST_TERMINATED_DAEMON_SHUTDOWN ? 444 : 499;
  metrics_observe_request(router_index(rs->route), status, secs, rs->bytes_in,
                          rs->bytes_out);
  if (log_enabled(LOG_INFO)) {
    /* the client chose both: no raw newline, escape or quote in the log */
    char method[4 * sizeof rs->method], path[4 * sizeof rs->path];
    log_msg(LOG_INFO, "%s %s %d in=%llu out=%llu %.3fms%s",
            log_escape(method, sizeof method, rs->method),
            log_escape(path, sizeof path, rs->path), status,
            (unsigned long long)rs->bytes_in,
            (unsigned long long)rs->bytes_out, secs * 1e3, why);
  }
  body_free(&rs->body);
  reply_free(&rs->reply);
  if (rs->accepted) {
    atomic_fetch_sub(&srv->accepted, 1);
    atomic_store(&srv->last_busy_ms, now_ms());
  }
  free(rs);
  metrics_inflight_add(-1);
}

/* libmicrohttpd's own messages (MHD_OPTION_EXTERNAL_LOGGER): one warn line
 * each, timestamped like the rest, without MHD's trailing newline, and
 * escaped (a message may quote what a client sent). */
static void mhd_log(void *cls, const char *fmt, va_list ap) {
  (void)cls;
  if (!log_enabled(LOG_WARN)) return;
  char text[512], safe[1024];
  vsnprintf(text, sizeof text, fmt, ap);
  size_t n = strlen(text);
  while (n > 0 && (text[n - 1] == '\n' || text[n - 1] == '\r')) text[--n] = '\0';
  log_msg(LOG_WARN, "libmicrohttpd: %s", log_escape(safe, sizeof safe, text));
}

/* MHD's unescape callback: router_unescape (%00 stays undecoded). */
static size_t unescape(void *cls, struct MHD_Connection *c, char *s) {
  (void)cls;
  (void)c;
  return router_unescape(s);
}

/* ---- lifecycle ---- */

static int resolve(const char *host, uint16_t port, struct sockaddr_storage *ss,
                   int *ipv6) {
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                           .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
  struct addrinfo *res = NULL;
  char service[8];
  snprintf(service, sizeof service, "%u", port);
  if (getaddrinfo(host, service, &hints, &res) != 0 || res == NULL) return -1;
  memcpy(ss, res->ai_addr, res->ai_addrlen);
  *ipv6 = res->ai_family == AF_INET6;
  freeaddrinfo(res);
  return 0;
}

/* A whole file as a NUL-terminated string (PEM for GnuTLS), or NULL. */
static char *read_text_file(const char *path) {
  FILE *f = fopen(path, "rb");
  char *data = NULL;
  long size;
  if (f && fseek(f, 0, SEEK_END) == 0 && (size = ftell(f)) >= 0 &&
      fseek(f, 0, SEEK_SET) == 0 && (data = malloc((size_t)size + 1)) != NULL) {
    if (fread(data, 1, (size_t)size, f) == (size_t)size) {
      data[size] = '\0';
    } else {
      free(data);
      data = NULL;
    }
  }
  if (f) fclose(f);
  return data;
}

static void server_free(server_t *srv) {
  pthread_cond_destroy(&srv->sweeper_wake);
  pthread_mutex_destroy(&srv->conns_lock);
  auth_free(srv->auth);
  free(srv->tls_cert_pem);
  free(srv->tls_key_pem);
  free(srv);
}

/* What http_start checks before it listens, and --print-config with it
 * (http_check_config): the host resolves, the API keys and their file are
 * valid, tls_cert and tls_key are both set or both not, and readable. Fills
 * addr, ipv6, srv->auth and srv->tls_*_pem (NULL without TLS); on failure
 * the caller frees what was filled. 0, or -1 with a one-line err. */
static int server_prepare(server_t *srv, const config_t *cfg,
                          struct sockaddr_storage *addr, int *ipv6, char *err,
                          size_t errlen) {
  if (resolve(cfg->host, (uint16_t)cfg->port, addr, ipv6) != 0) {
    snprintf(err, errlen, "cannot resolve host \"%s\"", cfg->host);
    return -1;
  }
  srv->auth = auth_create(cfg->api_keys, cfg->api_keys_file, err, errlen);
  if (srv->auth == NULL) return -1;
  int tls = cfg->tls_cert[0] != '\0' || cfg->tls_key[0] != '\0';
  if (tls && (!cfg->tls_cert[0] || !cfg->tls_key[0])) {
    snprintf(err, errlen, "tls_cert and tls_key go together: set both or neither");
    return -1;
  }
  if (tls && (srv->tls_cert_pem = read_text_file(cfg->tls_cert)) == NULL) {
    snprintf(err, errlen, "tls_cert: cannot read %s", cfg->tls_cert);
    return -1;
  }
  if (tls && (srv->tls_key_pem = read_text_file(cfg->tls_key)) == NULL) {
    snprintf(err, errlen, "tls_key: cannot read %s", cfg->tls_key);
    return -1;
  }
  return 0;
}

int http_check_config(const config_t *cfg, char *err, size_t errlen) {
  server_t srv;
  memset(&srv, 0, sizeof srv);
  struct sockaddr_storage addr;
  int ipv6 = 0;
  int rc = server_prepare(&srv, cfg, &addr, &ipv6, err, errlen);
  auth_free(srv.auth);
  free(srv.tls_cert_pem);
  free(srv.tls_key_pem);
  return rc;
}

server_t *http_start(const config_t *cfg, pool_t *pool, char *err,
                     size_t errlen) {
  server_t *srv = calloc(1, sizeof *srv);
  if (srv == NULL) {
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  srv->cfg = cfg;
  srv->pool = pool;
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* the sweeper's waits */
  pthread_cond_init(&srv->sweeper_wake, &ca);
  pthread_condattr_destroy(&ca);
  pthread_mutex_init(&srv->conns_lock, NULL);
  srv->limits.max_elements = (size_t)cfg->max_elements;
  srv->limits.max_depth = (int)cfg->max_json_depth;
  srv->limits.max_explain_elements = (size_t)cfg->max_explain_elements;
  struct sockaddr_storage addr;
  int ipv6 = 0;
  if (server_prepare(srv, cfg, &addr, &ipv6, err, errlen) != 0) goto fail;
  int tls = srv->tls_cert_pem != NULL;

  unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL |
                   MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ITC | MHD_USE_ERROR_LOG;
  if (ipv6) flags |= MHD_USE_IPv6;
  if (tls) flags |= MHD_USE_TLS;
  struct MHD_OptionItem opts[14];
  int n = 0;
  /* first, or MHD prints what comes before it with its own logger */
  opts[n++] = (struct MHD_OptionItem){MHD_OPTION_EXTERNAL_LOGGER,
                                      (intptr_t)mhd_log, NULL};
  opts[n++] = (struct MHD_OptionItem){MHD_OPTION_SOCK_ADDR, 0, &addr};
  opts[n++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_LIMIT,
                                      (intptr_t)cfg->max_connections, NULL};
  opts[n++] = (struct MHD_OptionItem){MHD_OPTION_PER_IP_CONNECTION_LIMIT,
                                      (intptr_t)cfg->per_ip_connections, NULL};
  opts[n++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_TIMEOUT,
                                      (intptr_t)cfg->connection_timeout_s, NULL};
  opts[n++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_MEMORY_LIMIT,
                                      (intptr_t)CONNECTION_MEMORY, NULL};
  opts[n++] = (struct MHD_OptionItem){MHD_OPTION_NOTIFY_COMPLETED,
                                      (intptr_t)on_completed, srv};
  opts[n++] = (struct MHD_OptionItem){MHD_OPTION_NOTIFY_CONNECTION,
                                      (intptr_t)on_connection, srv};
  opts[n++] = (struct MHD_OptionItem){MHD_OPTION_UNESCAPE_CALLBACK,
                                      (intptr_t)unescape, NULL};
  if (tls) {
    opts[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0, srv->tls_cert_pem};
    opts[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0, srv->tls_key_pem};
  }
  if (cfg->http_threads > 1)
    opts[n++] = (struct MHD_OptionItem){MHD_OPTION_THREAD_POOL_SIZE,
                                        (intptr_t)cfg->http_threads, NULL};
  opts[n++] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
  srv->mhd = MHD_start_daemon(flags, 0, NULL, NULL, on_request, srv,
                              MHD_OPTION_ARRAY, opts, MHD_OPTION_END);
  if (srv->mhd == NULL) {
    snprintf(err, errlen, tls ? "cannot listen on %s:%lld (in use, not permitted, "
                                "or the TLS certificate/key is invalid)"
                              : "cannot listen on %s:%lld (in use, or not permitted)",
             cfg->host, (long long)cfg->port);
    goto fail;
  }
  const union MHD_DaemonInfo *info =
      MHD_get_daemon_info(srv->mhd, MHD_DAEMON_INFO_BIND_PORT);
  srv->port = info ? info->port : (uint16_t)cfg->port;
  if (sweeper_start(srv) != 0) {
    snprintf(err, errlen, "cannot start the connection sweeper thread");
    MHD_stop_daemon(srv->mhd);
    goto fail;
  }
  return srv;

fail:
  server_free(srv);
  return NULL;
}

int http_tls(const server_t *srv) { return srv->tls_cert_pem != NULL; }
int http_auth(const server_t *srv) { return auth_enabled(srv->auth); }

uint16_t http_port(const server_t *srv) { return srv->port; }

void http_begin_drain(server_t *srv) {
  atomic_store(&srv->draining, 1);
  MHD_socket fd = MHD_quiesce_daemon(srv->mhd);
  if (fd != MHD_INVALID_SOCKET) close(fd);
}

/* Connections with a request on its way in that no handler has seen yet:
 * its first bytes came (perhaps since the sweeper's last look) and it has
 * not been cut. The drain waits for these too, so that such a request is
 * answered (503 draining, from its headers) rather than reset by the exit. */
static long requests_arriving(server_t *srv) {
  long n = 0;
  pthread_mutex_lock(&srv->conns_lock);
  for (conn_t *conn = srv->conns; conn != NULL; conn = conn->next) {
    int phase = clock_phase(atomic_load(&conn->clock));
    unsigned long long rx = 0;
    int fin = 0;
    if (phase == CONN_RECEIVING ||
        (phase == CONN_WAITING && tcp_look(conn->fd, &rx, &fin) == 0 && !fin &&
         rx > atomic_load(&conn->rx_mark)))
      n++;
  }
  pthread_mutex_unlock(&srv->conns_lock);
  return n;
}

long http_wait_idle(server_t *srv, double timeout_s) {
  struct timespec start;
  clock_gettime(CLOCK_MONOTONIC, &start);
  long arriving = 0;
  while (atomic_load(&srv->accepted) > 0 || pool_inflight(srv->pool) > 0 ||
         (arriving = requests_arriving(srv)) > 0) {
    if (elapsed_s(&start) >= timeout_s) {
      long open = atomic_load(&srv->accepted) + arriving;
      return open > 0 ? open : 1;
    }
    struct timespec tick = {0, 10 * 1000 * 1000};
    nanosleep(&tick, NULL);
  }
  return 0;
}

void http_stop(server_t *srv) {
  sweeper_stop(srv);
  MHD_stop_daemon(srv->mhd);
  server_free(srv);
}
