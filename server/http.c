/* http.c -- the server's lifecycle (start with its TLS setup, drain, wait
 * until idle, stop) and the libmicrohttpd callbacks that carry each request
 * through the other http_*.c files: on_request, on_completed, the logger.
 * The public API is http.h; what the files share is http_internal.h.
 *
 * DESIGN. The access handler never parses a body. For a compute route it
 * accumulates the body (413 on Content-Length before reading; a chunked
 * body past the limit is read and dropped, and its 413 goes out when the
 * upload ends, as MHD 0.9 cannot answer mid-body), reserves a pool slot
 * (503 + Retry-After when full: from the headers alone when the pool is
 * already full, else when the body is in). A small body (inline_body_bytes)
 * is then computed right there, in the handler call, and its reply queued;
 * a larger one suspends the connection and becomes a job: the worker runs
 * service_handle(); the loop thread stores the reply on the connection and
 * resumes it; MHD calls the handler again, which queues the reply. Every request ends in on_completed(), which logs,
 * counts and frees. A compute request counts as open (server.accepted, what
 * a drain waits for) from its first call, when its headers are in: an
 * upload in progress at SIGTERM is read, computed and answered (within
 * drain_timeout_s and request_timeout_s). Slow and vanished clients are
 * cut by the sweeper (http_clock.c).
 *
 * The files: http_admit.c (the first call's decisions, the job handed to
 * the pool), http_body.c (body accumulation), http_clock.c (request clocks,
 * the sweeper), http_get.c (GET routes answered here), http_reply.c
 * (replies, CORS).
 */
#include "http.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "blocks.h"
#include "http_internal.h"
#include "log.h"
#include "metrics.h"

/* libmicrohttpd's memory per connection (its default is 32 KiB): the
 * request line and headers, and the read buffer a body arrives through,
 * so it sets how many bytes one recv() and one call of the access handler
 * take. But MHD zeroes all of it after every request of a kept-alive
 * connection (MHD_pool_reset, 0.9.75): at 128 KiB that memset was 6.6% of
 * the daemon's CPU for 1x768 JSON requests, at 64 KiB 4.7%, at 32 KiB 2.5%
 * (perf record under wrk); 64 KiB keeps large bodies' reads big. See
 * bench/http_bench.sh for the effect on large bodies. */
#ifndef CONNECTION_MEMORY
#define CONNECTION_MEMORY (64 * 1024)
#endif

static double elapsed_s(const struct timespec *since) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (double)(now.tv_sec - since->tv_sec) +
         (double)(now.tv_nsec - since->tv_nsec) * 1e-9;
}

/* The body cannot be taken (rc: BODY_TOO_LARGE, BODY_CORRUPT, BODY_NOMEM):
 * its memory goes at once, the rest of it is read and dropped, and the
 * answer goes out when the upload ends. */
static void body_refused(request_state_t *rs, int rc) {
  http__body_free(&rs->body);
  if (rc == BODY_TOO_LARGE) {
    http__too_large(rs);
    return;
  }
  if (rc == BODY_CORRUPT)
    http__problem_now(rs, PROBLEM_BAD_CONTENT_ENCODING,
                      "the body is not a valid %s stream (corrupt, or cut "
                      "short)",
                      encoding_name(inflater_coding(rs->inflater)));
  else
    http__problem_now(rs, PROBLEM_OUT_OF_MEMORY, "%s", "out of memory");
  rs->reply.close = 1;
}

/* The client's IP address as text ("" when MHD cannot say). */
static const char *client_address(struct MHD_Connection *c, char *out,
                                  size_t cap) {
  out[0] = '\0';
  const union MHD_ConnectionInfo *ci =
      c ? MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS) : NULL;
  const struct sockaddr *sa = ci ? ci->client_addr : NULL;
  if (sa == NULL) return out;
  const void *addr;
  if (sa->sa_family == AF_INET6)
    addr = &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;
  else
    addr = &((const struct sockaddr_in *)(const void *)sa)->sin_addr;
  if (inet_ntop(sa->sa_family, addr, out, (socklen_t)cap) == NULL)
    out[0] = '\0';
  return out;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c,
                                  const char *url, const char *method,
                                  const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **state) {
  (void)version;
  server_t *srv = cls;
  request_state_t *rs = *state;
  if (rs == NULL) {
    rs = blocks_calloc(sizeof *rs);
    if (rs == NULL) return MHD_NO;
    *state = rs;
    rs->srv = srv;
    rs->mhd_conn = c;
    clock_gettime(CLOCK_MONOTONIC, &rs->start);
    snprintf(rs->method, sizeof rs->method, "%s", method);
    snprintf(rs->path, sizeof rs->path, "%s", url);
    request_id_take(http__header(c, "X-Request-Id"), rs->request_id);
    /* copied now: by on_completed MHD may have reset the headers */
    const char *ua = http__header(c, MHD_HTTP_HEADER_USER_AGENT);
    if (ua != NULL) {
      size_t n = strnlen(ua, sizeof rs->user_agent - 1);
      memcpy(rs->user_agent, ua, n);
      rs->user_agent[n] = '\0';
    }
    metrics_inflight_add(1);
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    rs->conn = ci ? ci->socket_context : NULL;
    if (http__deadline_begin(rs) != 0) return MHD_NO; /* closes, unanswered */
    http__first_call(rs, url, method);
    /* An error decided before the body is read goes out now (MHD then
     * closes the connection rather than read the body); anything else,
     * GET routes included, is sent on the next call, so keep-alive holds. */
    if (rs->reply_ready && rs->reply.close)
      return http__request_received(rs) == 0 ? http__send_reply(rs) : MHD_NO;
    return MHD_YES;
  }
  if (*upload_data_size > 0) {
    size_t n = *upload_data_size;
    *upload_data_size = 0;
    rs->bytes_in += n;
    /* Past the deadline the connection is cut, as the sweeper does, and
     * the rest is dropped until MHD sees the cut; no clock: close it. */
    int late = http__chunk_late(rs);
    if (late != 0) return late > 0 ? MHD_YES : MHD_NO;
    /* A refused body is read and dropped (no memory held): libmicrohttpd
     * 0.9 cannot queue a reply before the upload ends, and closing instead
     * would leave the client without its 413. */
    if (rs->reply_ready) return MHD_YES;
    size_t limit = (size_t)srv->cfg->max_body_bytes;
    /* a compressed body: max_body_bytes bounds both what arrives and what
     * it inflates to, checked as each chunk is inflated */
    if (rs->inflater != NULL) {
      int rc = rs->bytes_in > limit ? BODY_TOO_LARGE
                                    : http__body_inflate(&rs->body, rs->inflater,
                                                         upload_data, n,
                                                         rs->expected, limit);
      if (rc != 0) body_refused(rs, rc);
      return MHD_YES;
    }
    if (rs->body.len + n > limit) {
      body_refused(rs, BODY_TOO_LARGE);
      return MHD_YES;
    }
    if (http__body_append(&rs->body, upload_data, n, rs->expected) != 0)
      body_refused(rs, BODY_NOMEM);
    return MHD_YES;
  }
  if (http__request_received(rs) != 0) return MHD_NO; /* too late, or cut */
  if (!rs->reply_ready && rs->inflater != NULL &&
      !inflater_finished(rs->inflater))
    body_refused(rs, BODY_CORRUPT); /* the stream stopped short of its end */
  if (rs->reply_ready)
    return http__send_reply(rs); /* a finished job, or an error */
  return http__submit_compute(rs);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **state,
                         enum MHD_RequestTerminationCode toe) {
  server_t *srv = cls;
  request_state_t *rs = *state;
  if (rs == NULL) return;
  *state = NULL;
  double secs = elapsed_s(&rs->start);
  int late = http__request_over(rs) == CONN_CUT_LATE || rs->timed_out;
  /* Unanswered, as nginx logs it: 408 cut at request_timeout_s or idle
   * past connection_timeout_s, 444 closed by the server (shutdown), 499
   * the client left. */
  int status = rs->status_sent;
  const char *why = "";
  if (late) {
    why = "closed: request_timeout_s";
  } else if (toe == MHD_REQUEST_TERMINATED_TIMEOUT_REACHED) {
    why = "closed: connection_timeout_s";
    late = 1;
  } else if (toe == MHD_REQUEST_TERMINATED_DAEMON_SHUTDOWN) {
    why = "dropped: shutdown";
  } else if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK) {
    why = "aborted";
  }
  if (status == 0) {
    int dropped = toe == MHD_REQUEST_TERMINATED_DAEMON_SHUTDOWN;
    status = late ? 408 : dropped ? 444 : 499;
  }
  metrics_observe_request(router_index(rs->route), status, secs, rs->bytes_in,
                          rs->bytes_out);
  if (log_enabled(LOG_INFO)) {
    char remote[INET6_ADDRSTRLEN];
    log_access(&(log_access_t){
        .method = rs->method,
        .path = rs->path,
        .status = status,
        .bytes_in = rs->bytes_in,
        .bytes_out = rs->bytes_out,
        .duration_ms = secs * 1e3,
        .request_id = rs->request_id,
        .remote = client_address(c, remote, sizeof remote),
        .user_agent = rs->user_agent,
        .note = why});
  }
  http__body_free(&rs->body);
  inflater_free(rs->inflater);
  reply_free(&rs->reply);
  if (rs->accepted) {
    atomic_fetch_sub(&srv->accepted, 1);
    atomic_store(&srv->last_busy_ms, http__now_ms());
  }
  blocks_free(rs);
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
  while (n > 0 && (text[n - 1] == '\n' || text[n - 1] == '\r'))
    text[--n] = '\0';
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
  struct addrinfo hints = {.ai_family = AF_UNSPEC,
                           .ai_socktype = SOCK_STREAM,
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
    snprintf(err, errlen,
             "tls_cert and tls_key go together: set both or neither");
    return -1;
  }
  if (tls &&
      (srv->tls_cert_pem = http__read_file(cfg->tls_cert, NULL)) == NULL) {
    snprintf(err, errlen, "tls_cert: cannot read %s", cfg->tls_cert);
    return -1;
  }
  if (tls && (srv->tls_key_pem = http__read_file(cfg->tls_key, NULL)) == NULL) {
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

  /* poll(), not epoll: libmicrohttpd 0.9.75's MHD_quiesce_daemon (the
   * drain) races with its own epoll loop. Both remove the listening socket
   * from a polling thread's epoll set, reading was_quiesced and
   * listen_socket_in_epoll without a lock, and the loser's epoll_ctl gets
   * ENOENT, which MHD_PANIC turns into abort() (daemon.c:5531 in
   * MHD_quiesce_daemon, 4966 in MHD_epoll): SIGTERM under traffic, or just
   * after a connection closed, exited by SIGABRT in about 1 of 110 tries
   * here with epoll, 0 of 1000 with poll (an idle daemon, one request,
   * SIGINT, both cores busy). Under poll the drain only sets the flag and
   * wakes each thread, which leaves the listening socket out of its next
   * poll set. poll also reads a FIN queued behind a request's last bytes
   * at once (level-triggered), which MHD's edge-triggered epoll missed
   * until connection_timeout_s. Measured with bench/http_bench.sh (BASE
   * A/B, one run): 1x768 JSON 27-30k req/s with epoll, 33-41k with poll;
   * 512x2048 rows within noise; with 900 idle connections open as well,
   * 26-33k both ways. poll's price: each wake-up walks every connection
   * of its thread. With idle keep-alive connections open beside the load
   * (1x768 JSON, wrk -c16, alternating runs on another host): 1000 idle,
   * 20.7-21.3k req/s with poll against 22.5-27.4k with epoll; 2000,
   * 13.5-15.2k against 19.3-29.3k; 4000, 9.1-11.8k against 28.6-33.2k
   * (README: more replicas, not a max_connections far above its 1024). */
  unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL |
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
  opts[n++] = (struct MHD_OptionItem){
      MHD_OPTION_CONNECTION_TIMEOUT, (intptr_t)cfg->connection_timeout_s, NULL};
  opts[n++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_MEMORY_LIMIT,
                                      (intptr_t)CONNECTION_MEMORY, NULL};
  opts[n++] = (struct MHD_OptionItem){MHD_OPTION_NOTIFY_COMPLETED,
                                      (intptr_t)on_completed, srv};
  opts[n++] = (struct MHD_OptionItem){MHD_OPTION_NOTIFY_CONNECTION,
                                      (intptr_t)http__on_connection, srv};
  opts[n++] = (struct MHD_OptionItem){MHD_OPTION_UNESCAPE_CALLBACK,
                                      (intptr_t)unescape, NULL};
  if (tls) {
    opts[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0,
                                        srv->tls_cert_pem};
    opts[n++] =
        (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0, srv->tls_key_pem};
  }
  if (cfg->http_threads > 1)
    opts[n++] = (struct MHD_OptionItem){MHD_OPTION_THREAD_POOL_SIZE,
                                        (intptr_t)cfg->http_threads, NULL};
  opts[n++] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
  srv->mhd = MHD_start_daemon(flags, 0, NULL, NULL, on_request, srv,
                              MHD_OPTION_ARRAY, opts, MHD_OPTION_END);
  if (srv->mhd == NULL) {
    snprintf(err, errlen,
             tls ? "cannot listen on %s:%lld (in use, not permitted, "
                   "or the TLS certificate/key is invalid)"
                 : "cannot listen on %s:%lld (in use, or not permitted)",
             cfg->host, (long long)cfg->port);
    goto fail;
  }
  const union MHD_DaemonInfo *info =
      MHD_get_daemon_info(srv->mhd, MHD_DAEMON_INFO_BIND_PORT);
  srv->port = info ? info->port : (uint16_t)cfg->port;
  if (http__sweeper_start(srv) != 0) {
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

long http_wait_idle(server_t *srv, double timeout_s) {
  struct timespec start;
  clock_gettime(CLOCK_MONOTONIC, &start);
  long arriving = 0;
  while (atomic_load(&srv->accepted) > 0 || pool_inflight(srv->pool) > 0 ||
         (arriving = http__requests_arriving(srv)) > 0) {
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
  http__sweeper_stop(srv);
  MHD_stop_daemon(srv->mhd);
  server_free(srv);
}
