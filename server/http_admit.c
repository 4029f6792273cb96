/* http_admit.c -- what a request's first handler call decides before any
 * body byte is read (framing that smells of smuggling, route, method, API
 * key, GET routes, draining, 413 by Content-Length, a full pool), and, once
 * an admitted compute request's body is in, its job: copied headers and
 * query, handed to the pool, resumed with the reply. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http_internal.h"
#include "kserve.h"
#include "op_stats.h"
#include "service.h"

/* A compute request crossing the pool. The HTTP thread creates it and moves
 * the body into it; the worker fills `reply` and frees the body; the done
 * callback moves the reply to the request state, resumes the connection and
 * frees the job. */
typedef struct {
  pool_job_t base;
  request_state_t *rs;
  body_t body;
  /* request_input's, its header values, query parameters and request id
   * the job's own copies (job_free frees them) */
  service_input_t in;
  query_param_t *query; /* in.query, writable */
  encoding_t answer_coding; /* the reply's, from Accept-Encoding */
  limits_t limits;
  uint64_t submitted_ns; /* op_stats_now_ns() when handed to the pool */
  char request_id[REQUEST_ID_MAX + 1]; /* the problem's instance */
  reply_t reply;
} job_t;

/* ---- the compute path ---- */

/* The service's input for rs but its body (compute's), the header values
 * and query parameters borrowed from libmicrohttpd: valid while the
 * handler call lasts. */
static service_input_t request_input(request_state_t *rs,
                                     const query_param_t *query,
                                     size_t nquery) {
  struct MHD_Connection *c = rs->mhd_conn;
  return (service_input_t){
      .op = rs->match.op,
      .content_type = http__header(c, MHD_HTTP_HEADER_CONTENT_TYPE),
      .accept = http__header(c, MHD_HTTP_HEADER_ACCEPT),
      .header_length = http__header(c, "Inference-Header-Content-Length"),
      .query = query,
      .nquery = nquery,
      .kserve = router_is_v2(rs->path),
      .by_reference = 1,
      .request_id = rs->request_id};
}

/* The request computed: in on body (which it takes), its op_stats queue
 * time counted from submitted_ns, the answer into *out compressed as
 * `coding` asks. On a worker for a job (a large answer takes milliseconds
 * to compress: bench/compression_bench.sh), in the handler call for a
 * small request. */
static void compute(service_input_t in, body_t *body, uint64_t submitted_ns,
                    const limits_t *limits, encoding_t coding, reply_t *out) {
  in.body = body->data;
  in.len = body->len;
  in.body_mem = body->mem;
  in.queue_ns = op_stats_now_ns() - submitted_ns;
  *body = (body_t){0}; /* the service owns it now */
  service_handle(&in, limits, out);
  http__compress_reply(out, coding);
}

static void job_run(pool_job_t *base) {
  job_t *job = (job_t *)base;
  compute(job->in, &job->body, job->submitted_ns, &job->limits,
          job->answer_coding, &job->reply);
}

static void job_free(job_t *job) {
  free((char *)job->in.content_type);
  free((char *)job->in.accept);
  free((char *)job->in.header_length);
  for (size_t i = 0; i < job->in.nquery; i++) {
    free((char *)job->query[i].key);
    free((char *)job->query[i].value);
  }
  free(job->query);
  http__body_free(&job->body);
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
static int copy_header(const char **dst, const char *value) {
  *dst = value ? strdup(value) : NULL;
  return (value != NULL && *dst == NULL) ? -1 : 0;
}

enum { MAX_QUERY_PARAMS = 64 };

/* The query parameters as MHD holds them (values already percent-decoded),
 * borrowed: valid while the request's handler call lasts. n passes
 * MAX_QUERY_PARAMS when there are too many. */
typedef struct {
  query_param_t param[MAX_QUERY_PARAMS];
  size_t n;
} query_view_t;

static enum MHD_Result view_param(void *cls, enum MHD_ValueKind kind,
                                  const char *key, const char *value) {
  (void)kind;
  query_view_t *v = cls;
  if (v->n == MAX_QUERY_PARAMS) {
    v->n++;
    return MHD_NO;
  }
  v->param[v->n++] = (query_param_t){.key = key, .value = value};
  return MHD_YES;
}

/* Fills v; -1 (and rs->reply readied: 400) when there are too many. */
static int view_query(request_state_t *rs, query_view_t *v) {
  v->n = 0;
  MHD_get_connection_values(rs->mhd_conn, MHD_GET_ARGUMENT_KIND, view_param,
                            v);
  if (v->n <= MAX_QUERY_PARAMS) return 0;
  http__problem_now(rs, PROBLEM_TOO_MANY_PARAMETERS,
                    "more than %s query parameters", "64");
  return -1;
}

/* The job's own copies of the query parameters: the worker runs after the
 * handler call has returned. */
static int copy_query(job_t *job, const query_view_t *v) {
  job->query = calloc(v->n > 0 ? v->n : 1, sizeof *job->query);
  if (job->query == NULL) return -1;
  job->in.query = job->query;
  for (size_t i = 0; i < v->n; i++) {
    query_param_t *q = &job->query[job->in.nquery++]; /* job_free frees it */
    q->key = strdup(v->param[i].key);
    q->value = v->param[i].value ? strdup(v->param[i].value) : NULL;
    if (q->key == NULL || (v->param[i].value && q->value == NULL)) return -1;
  }
  return 0;
}

/* 503: max_inflight jobs are queued or running. */
static void overloaded(request_state_t *rs) {
  http__problem_now(rs, PROBLEM_OVERLOADED, "%s",
                    "too many requests in flight; retry after a moment");
  rs->reply.retry_after_s = (int)rs->srv->cfg->retry_after_s;
}

/* Whether the request is computed on this HTTP thread rather than in the
 * pool: a body of at most inline_body_bytes (0: none), whose work is in
 * proportion to it. The residual experiment is not: a few bytes of JSON
 * can ask for many layers of large matrices, which would hold up every
 * other connection of this thread. */
static int computes_here(const request_state_t *rs) {
  int64_t limit = rs->srv->cfg->inline_body_bytes;
  return limit > 0 && rs->body.len <= (uint64_t)limit &&
         op_info(rs->match.op)->kind != OP_KIND_EXPERIMENT;
}

/* A small request, answered in this handler call: the pool's four thread
 * hand-offs (suspend, queue, worker, loop, resume) cost more than its
 * decode, compute and encode (bench/http_bench.sh). It holds a pool slot
 * meanwhile, so max_inflight, the 503 and a drain's wait count it as they
 * count a job. */
static enum MHD_Result compute_here(request_state_t *rs,
                                    const query_view_t *query,
                                    uint64_t submitted_ns) {
  server_t *srv = rs->srv;
  /* op_stats' "queue": from the body's end to the decode, as for a job
   * (here only the slot and the query: well under a microsecond) */
  compute(request_input(rs, query->param, query->n), &rs->body, submitted_ns,
          &srv->limits, http__answer_coding(rs), &rs->reply);
  pool_release(srv->pool); /* as the pool does: before the answer goes out */
  rs->reply_ready = 1;
  return http__send_reply(rs);
}

/* Body complete: compute it here (computes_here) or hand it to the pool,
 * or answer 503 at once. The request was counted in server.accepted on its
 * first call, so a drain that began since waits for it. */
enum MHD_Result http__submit_compute(request_state_t *rs) {
  server_t *srv = rs->srv;
  uint64_t submitted_ns = op_stats_now_ns();
  if (pool_try_reserve(srv->pool) != 0) { /* filled up while the body came */
    overloaded(rs);
    return http__send_reply(rs);
  }
  query_view_t query;
  if (view_query(rs, &query) != 0) {
    pool_release(srv->pool);
    return http__send_reply(rs);
  }
  if (computes_here(rs)) return compute_here(rs, &query, submitted_ns);
  job_t *job = calloc(1, sizeof *job);
  if (job == NULL) goto err;
  /* the borrowed values replaced by the job's copies, each NULL until
   * copied so that job_free frees only those */
  service_input_t borrowed = request_input(rs, query.param, query.n);
  job->in = borrowed;
  job->in.content_type = job->in.accept = job->in.header_length = NULL;
  job->in.query = NULL;
  job->in.nquery = 0;
  job->in.request_id = job->request_id;
  memcpy(job->request_id, rs->request_id, sizeof job->request_id);
  if (copy_header(&job->in.content_type, borrowed.content_type) != 0 ||
      copy_header(&job->in.accept, borrowed.accept) != 0 ||
      copy_header(&job->in.header_length, borrowed.header_length) != 0 ||
      copy_query(job, &query) != 0)
    goto err;
  job->base.run = job_run;
  job->base.done = job_done;
  job->rs = rs;
  job->limits = srv->limits;
  job->answer_coding = http__answer_coding(rs);
  job->body = rs->body; /* moves */
  memset(&rs->body, 0, sizeof rs->body);
  MHD_suspend_connection(rs->mhd_conn);
  job->submitted_ns = op_stats_now_ns(); /* its time in the queue starts */
  pool_submit(srv->pool, &job->base);
  return MHD_YES;

err:
  if (job) job_free(job);
  pool_release(srv->pool);
  http__problem_now(rs, PROBLEM_OUT_OF_MEMORY, "%s", "out of memory");
  return http__send_reply(rs);
}

void http__too_large(request_state_t *rs) {
  char limit[32];
  snprintf(limit, sizeof limit, "%lld",
           (long long)rs->srv->cfg->max_body_bytes);
  http__problem_now(rs, PROBLEM_BODY_TOO_LARGE,
                    "request body larger than max_body_bytes (%s bytes)",
                    limit);
  rs->reply.close = 1;
}

/* ---- admission ---- */

/* Whether a request asks for an API key: a POST (the compute routes, and
 * Triton's POST routes: repository index and load, trace and log settings,
 * shared memory registration), or with scope "all" every route but
 * liveness and readiness. */
static int needs_key(const server_t *srv, const route_t *r,
                     const char *method) {
  if (!auth_enabled(srv->auth)) return 0;
  if (strcmp(srv->cfg->api_key_scope, "all") == 0)
    return r->handler != H_HEALTHZ && r->handler != H_READYZ &&
           r->handler != H_V2_LIVE && r->handler != H_V2_READY;
  return strcmp(method, "POST") == 0;
}

/* What every header line says about where the body ends and how it is
 * coded (MHD_lookup_connection_value sees only the first of a repeated
 * header). */
typedef struct {
  const char *content_length;   /* the first */
  int content_length_conflict;  /* a later one says otherwise */
  int transfer_encodings;       /* Transfer-Encoding lines */
  int transfer_other;           /* one of them is not exactly "chunked" */
  const char *content_encoding; /* a value naming a coding but identity */
  int content_encoding_lines;   /* how many lines name one */
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
    if (f->content_length == NULL)
      f->content_length = value;
    else if (strcmp(f->content_length, value) != 0)
      f->content_length_conflict = 1;
  } else if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) {
    f->transfer_encodings++;
    if (strcasecmp(value, "chunked") != 0) f->transfer_other = 1;
  } else if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_ENCODING) == 0 &&
             names_coding(value, &value)) {
    if (f->content_encoding_lines++ == 0) f->content_encoding = value;
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
    http__problem_now(rs, PROBLEM_BAD_REQUEST, "%s",
                      "Content-Length is given more than once with different "
                      "values: send one");
  } else if (f->transfer_encodings > 1 || f->transfer_other) {
    http__problem_now(rs, PROBLEM_UNSUPPORTED_TRANSFER_ENCODING, "%s",
                      "normd reads Transfer-Encoding: chunked only (one "
                      "coding, in one header)");
  } else {
    return 0;
  }
  rs->reply.close = 1;
  return 1;
}

/* A compressed body gets its inflater (http.c feeds it each chunk); a
 * coding normd does not read, or two stacked ("gzip, gzip", or two header
 * lines), is refused with 415 before the body is read, and the connection
 * closed. Returns -1 when it answered. */
static int admit_coding(request_state_t *rs, const framing_t *f) {
  encoding_t coding = ENCODING_IDENTITY;
  int rc = f->content_encoding_lines > 1
               ? ENCODING_E_STACKED
               : encoding_parse_content(f->content_encoding, &coding);
  if (rc == 0 && coding != ENCODING_IDENTITY &&
      (rs->inflater = inflater_new(coding)) == NULL) {
    http__problem_now(rs, PROBLEM_OUT_OF_MEMORY, "%s", "out of memory");
  } else if (rc == ENCODING_E_UNKNOWN) {
    http__problem_now(rs, PROBLEM_UNSUPPORTED_MEDIA_TYPE,
                      "Content-Encoding %s is not one normd decodes: send "
                      "gzip, deflate or identity",
                      f->content_encoding);
  } else if (rc == ENCODING_E_STACKED) {
    http__problem_now(rs, PROBLEM_UNSUPPORTED_MEDIA_TYPE, "%s",
                      "normd decodes one Content-Encoding per body (gzip or "
                      "deflate), not several stacked");
  } else {
    return 0;
  }
  rs->reply.close = 1; /* answer now; do not read the body */
  return -1;
}

/* Decides on the first call, before any body byte is read, whether the
 * request can be answered at once (404, 405, OPTIONS, 413 by
 * Content-Length, 503 while draining or with max_inflight jobs queued or
 * running, GET routes). */
void http__first_call(request_state_t *rs, const char *url,
                      const char *method) {
  server_t *srv = rs->srv;
  framing_t framing = {0};
  MHD_get_connection_values(rs->mhd_conn, MHD_HEADER_KIND, look_framing,
                            &framing);
  router_match(url, &rs->match);
  rs->route = rs->match.route;
  if (refuse_framing(rs, &framing)) return;
  if (rs->route == NULL) {
    /* each protocol points at its own list of what there is */
    http__problem_now(rs, PROBLEM_NOT_FOUND,
                      router_is_v2(url) ? "no route %s; the models are listed "
                                          "by POST /v2/repository/index"
                                        : "no route %s; see GET /v1/info",
                      url);
    return;
  }
  if (strstr(rs->route->path, "{model}") &&
      !rs->match.model_known) {
    char detail[1024];
    snprintf(detail, sizeof detail,
             "unknown model or version: \"%s\" (models: %s; version 1)",
             rs->match.model, kserve_model_list());
    http__problem_now(rs, PROBLEM_UNKNOWN_MODEL, "%s", detail);
    return;
  }
  if (!router_allows(rs->route, method)) {
    http__problem_now(rs, PROBLEM_METHOD_NOT_ALLOWED, "%s is not allowed here",
                      method);
    rs->reply.allow = rs->route->allow;
    return;
  }
  if (strcmp(method, "OPTIONS") == 0) { /* preflights carry no credentials */
    http__preflight_reply(rs);
    return;
  }
  if (needs_key(srv, rs->route, method) &&
      !auth_check(srv->auth,
                  http__header(rs->mhd_conn, MHD_HTTP_HEADER_AUTHORIZATION))) {
    http__problem_now(rs, PROBLEM_UNAUTHORIZED, "%s",
                      "this route needs an API key: Authorization: Bearer "
                      "<key>");
    rs->reply.unauthorized = 1;
    rs->reply.close = 1; /* answer now; do not read the body */
    return;
  }
  if (rs->route->handler != H_COMPUTE) {
    http__get_reply(rs);
    return;
  }
  if (admit_coding(rs, &framing) != 0) return;
  /* Count first, then look at draining: with both atomics sequentially
   * consistent, a drain either sees this request (and waits for its body,
   * its job and its answer) or this request sees the drain and is refused,
   * never neither. */
  atomic_fetch_add(&srv->accepted, 1);
  atomic_store(&srv->last_busy_ms, http__now_ms());
  rs->accepted = 1;
  if (atomic_load(&srv->draining)) {
    http__problem_now(rs, PROBLEM_DRAINING, "%s", "normd is shutting down");
    rs->reply.retry_after_s = (int)srv->cfg->retry_after_s;
    rs->reply.close = 1;
    return;
  }
  const char *cl = http__header(rs->mhd_conn, MHD_HTTP_HEADER_CONTENT_LENGTH);
  if (cl != NULL) {
    char *end;
    unsigned long long n = strtoull(cl, &end, 10);
    if (n > (unsigned long long)srv->cfg->max_body_bytes)
      http__too_large(rs);
    else if (*end == '\0')
      rs->expected = (size_t)n;
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
  const char *hl =
      http__header(rs->mhd_conn, "Inference-Header-Content-Length");
  if (hl != NULL) {
    char *end;
    unsigned long long n = strtoull(hl, &end, 10);
    if (*end == '\0' && n < (unsigned long long)srv->cfg->max_body_bytes)
      rs->body.align_at = (size_t)n;
  }
}
