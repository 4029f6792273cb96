/* http_internal.h -- private to the http_*.c files (the HTTP server of
 * http.h, split by job): the server, its connections and requests, and the
 * functions one of those files offers the others, each named http__*.
 * Nothing outside server/http*.c includes this; the public API is http.h. */
#ifndef NORMD_HTTP_INTERNAL_H
#define NORMD_HTTP_INTERNAL_H

#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "auth.h"
#include "config.h"
#include "encoding.h"
#include "http.h"
#include "pool.h"
#include "problem.h"
#include "reply.h"
#include "request.h"
#include "request_id.h"
#include "router.h"

/* A connection's request clock: a phase and the millisecond (CLOCK_MONOTONIC)
 * it began, in one word, so that the HTTP thread and the sweeper move it
 * with one compare-and-swap and a cut can never cross a transition. */
enum {
  CONN_WAITING,   /* no request byte yet: since accept or the last answer */
  CONN_RECEIVING, /* a request is arriving; its deadline counts from `since` */
  CONN_BUSY,      /* the request is in: computing or answering, not timed */
  CONN_CUT_LATE,  /* cut: still arriving past request_timeout_s */
};

/* One TCP connection, MHD's socket_context: created by the STARTED
 * notification, freed by CLOSED. Linked in server.conns under conns_lock;
 * MHD closes the socket only after CLOSED, which unlinks under that lock,
 * so the sweeper may use `fd` while it holds the lock. */
typedef struct conn {
  struct conn *prev, *next;
  MHD_socket fd;
  atomic_llong clock;    /* clock_make(phase, since) */
  atomic_ullong rx_mark; /* bytes received when CONN_WAITING began */
} conn_t;

struct server {
  struct MHD_Daemon *mhd;
  auth_t *auth;       /* API keys; disabled when none are configured */
  char *tls_cert_pem; /* kept while MHD runs (it does not copy them) */
  char *tls_key_pem;
  pool_t *pool;
  const config_t *cfg;
  limits_t limits;
  atomic_int draining;
  /* compute requests from their first handler call (headers in) until
   * answered or closed: what a drain waits for, so uploads in progress
   * finish */
  atomic_long accepted;
  atomic_llong last_busy_ms; /* when `accepted` last changed (monotonic) */
  long long trimmed_ms;      /* sweeper only: when it last trimmed the heap */
  uint16_t port;
  pthread_mutex_t conns_lock; /* guards conns and sweeper_stop */
  conn_t *conns;              /* every open connection */
  pthread_cond_t sweeper_wake;
  pthread_t sweeper;
  int sweeper_running;
  int sweeper_stop;
};

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
  char request_id[REQUEST_ID_MAX + 1]; /* X-Request-Id: echoed, logged */
  char user_agent[128]; /* for the access log, cut; "" when absent */
  struct timespec start;
  body_t body;
  inflater_t *inflater; /* a compressed body's decoder, NULL for identity */
  uint64_t bytes_in;
  int reply_ready; /* reply holds the answer to queue */
  reply_t reply;
  int status_sent;
  uint64_t bytes_out;
  int accepted;    /* counted in server.accepted (a compute route) */
  size_t expected; /* Content-Length, 0 if absent */
  conn_t *conn;    /* its connection; NULL if that had no memory for one */
  long long deadline_ms; /* all of it must be in by then; 0 = no limit */
  int received;          /* all of it is in (the clock says CONN_BUSY) */
  int timed_out;         /* closed unanswered at the deadline */
} request_state_t;

/* The first value of a request header, or NULL. */
static inline const char *http__header(struct MHD_Connection *c,
                                       const char *name) {
  return MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
}

/* ---- http_clock.c: request clocks and the sweeper ---- */

/* Milliseconds of CLOCK_MONOTONIC. */
long long http__now_ms(void);
/* MHD_OPTION_NOTIFY_CONNECTION: links a new connection in server.conns
 * (cls) and unlinks and frees a closed one. */
void http__on_connection(void *cls, struct MHD_Connection *c,
                         void **socket_context,
                         enum MHD_ConnectionNotificationCode code);
/* The request's headers are in: its deadline starts. -1 when it has passed
 * or the sweeper cut the connection (close it unanswered). */
int http__deadline_begin(request_state_t *rs);
/* A body chunk came: 0 within the deadline; past it, 1 when the connection
 * is cut (drop the rest until MHD sees the cut), -1 when it has no clock to
 * cut (close it with MHD_NO). */
int http__chunk_late(request_state_t *rs);
/* The whole request is in (or is answered unread): its clock stops. -1
 * when it came too late or the sweeper cut it. */
int http__request_received(request_state_t *rs);
/* The request is over: its connection waits for the next. Returns the
 * phase (CONN_*) the clock leaves. */
int http__request_over(request_state_t *rs);
/* Connections with a request arriving that no handler has seen yet. */
long http__requests_arriving(server_t *srv);
/* The sweeper thread: 0 or -1; stop joins it (a no-op if never started). */
int http__sweeper_start(server_t *srv);
void http__sweeper_stop(server_t *srv);

/* ---- http_body.c: body accumulation ---- */

void http__body_free(body_t *b);
/* Appends n bytes (the first call sizes the buffer for `expected`, the
 * checked Content-Length). 0, or -1 when out of memory. */
int http__body_append(body_t *b, const char *bytes, size_t n, size_t expected);
/* Inflates a compressed body's next n bytes into b as they arrive, growing
 * it by doubling but never past limit + 1 bytes (`expected` is the
 * Content-Length, of compressed bytes: only a first guess at the size).
 * 0, or BODY_TOO_LARGE (the decompressed body passed limit), BODY_CORRUPT
 * (not a valid stream) or BODY_NOMEM. */
enum { BODY_TOO_LARGE = -1, BODY_CORRUPT = -2, BODY_NOMEM = -3 };
int http__body_inflate(body_t *b, inflater_t *z, const char *bytes, size_t n,
                       size_t expected, size_t limit);

/* ---- http_reply.c: replies and CORS ---- */

/* rs->reply becomes a problem (RFC 9457, or {"error"} on /v2), ready. */
void http__problem_now(request_state_t *rs, problem_code_t id, const char *fmt,
                       const char *arg);
/* The coding rs's answer may be sent in: from Accept-Encoding, identity
 * when the `compression` key is off. */
encoding_t http__answer_coding(const request_state_t *rs);
/* Compresses r (body and binary parts as one stream) in `coding` when it is
 * not identity and r holds at least ENCODING_MIN_BYTES; out of memory
 * leaves r uncompressed. Touches only r: the pool's workers call it. */
void http__compress_reply(reply_t *r, encoding_t coding);
/* Queues rs->reply with its headers (Content-Encoding, Vary) and CORS; MHD
 * owns its memory after. GET routes' answers are compressed here. */
enum MHD_Result http__send_reply(request_state_t *rs);

/* ---- http_get.c: routes answered on the HTTP thread ---- */

/* A whole file, NUL-terminated, its size in *len (len may be NULL); NULL
 * when it cannot be read. The caller frees it. */
char *http__read_file(const char *path, size_t *len);
/* Answers a route served on the HTTP thread (rs->route->handler !=
 * H_COMPUTE: the GET routes and the v2 repository) into rs->reply. */
void http__get_reply(request_state_t *rs);
/* Answers a CORS preflight (OPTIONS): 204. */
void http__preflight_reply(request_state_t *rs);

/* ---- http_admit.c: admission and the hand-off to the pool ---- */

/* The first handler call, before any body byte is read: refuses bad
 * framing, routes, checks method and API key, answers GET routes, and
 * admits a compute request or readies its refusal in rs->reply. */
void http__first_call(request_state_t *rs, const char *url, const char *method);
/* The body is in: computes a small one here and queues its reply, or hands
 * the job to the pool (suspending the connection), or sends a 503 / 400 /
 * 500 at once. Either way it holds a pool slot while it computes. */
enum MHD_Result http__submit_compute(request_state_t *rs);
/* rs->reply becomes 413 body_too_large (Connection: close). */
void http__too_large(request_state_t *rs);

#endif
