/* http_get.c -- the small routes, answered on the HTTP thread without the
 * pool: health and readiness (/v1 and /v2), /metrics, /v1/info, the files
 * (/openapi.yaml, the page at /, its JavaScript client /normd.js and
 * /normd.mjs), v2 server and model metadata, Triton's
 * model configuration, statistics and repository (a POST whose body does
 * not matter), the extensions normd does not have, and CORS preflights. Also the one whole-file reader (http.c reads the TLS
 * certificate and key with it). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "codec.h"
#include "http_internal.h"
#include "kserve.h"
#include "metrics.h"
#include "norm.h"
#include "ops.h"

char *http__read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  char *data = NULL;
  long size;
  if (f && fseek(f, 0, SEEK_END) == 0 && (size = ftell(f)) >= 0 &&
      fseek(f, 0, SEEK_SET) == 0 && (data = malloc((size_t)size + 1)) != NULL) {
    if (fread(data, 1, (size_t)size, f) == (size_t)size) {
      data[size] = '\0';
      if (len) *len = (size_t)size;
    } else {
      free(data);
      data = NULL;
    }
  }
  if (f) fclose(f);
  return data;
}

/* A 200 with a file's bytes, or 404 when it cannot be read. */
static void file_reply(request_state_t *rs, const char *path,
                       const char *content_type) {
  size_t len = 0;
  char *data = http__read_file(path, &len);
  if (data == NULL) {
    http__problem_now(rs, PROBLEM_NOT_FOUND,
                      "%s is not available on this server", path);
    return;
  }
  reply_free(&rs->reply);
  rs->reply = (reply_t){
      .status = 200, .content_type = content_type, .body = data, .len = len};
  rs->reply_ready = 1;
}

/* /v1/info */
static void info_body(const server_t *srv, buf_t *b) {
  const config_t *cfg = srv->cfg;
  buf_printf(b,
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
    buf_printf(b, "%s\"%s\"", d ? "," : "", norm_dtype_name((norm_dtype_t)d));
  /* the normalizations of the operation list, the /v1 formats, the routes */
  buf_puts(b, "],\"norms\":[");
  for (int op = 0, n = 0; op < OP_COUNT; op++)
    if (op_info((op_t)op)->kind == OP_KIND_NORM)
      buf_printf(b, "%s\"%s\"", n++ ? "," : "", op_name((op_t)op));
  buf_puts(b, "],\"content_types\":[");
  for (int i = 0; codecs_all[i] != NULL; i++)
    buf_printf(b, "%s\"%s\"", i ? "," : "", codecs_all[i]->media_type);
  buf_puts(b, "],\"routes\":[");
  for (size_t i = 0; i < router_count; i++)
    buf_printf(b, "%s{\"path\":\"%s\",\"methods\":\"%s\"}", i ? "," : "",
               router_routes[i].path, router_routes[i].allow);
  buf_puts(b, "]}");
}

/* GET /v2: the KServe v2 server metadata. The extensions are those normd
 * implements, by Triton's names (docs/protocol/README.md): the binary
 * tensor data, the model repository (index; load and unload answer that
 * the models are built in), model configuration and statistics, and
 * request and response parameters. */
static void kserve_server_metadata(buf_t *b) {
  buf_printf(b,
             "{\"name\":\"normd\",\"version\":\"%s\","
             "\"extensions\":[\"binary_tensor_data\",\"model_repository\","
             "\"model_configuration\",\"statistics\",\"parameters\"]}",
             NORMD_VERSION);
}

/* A 200 JSON reply of what b holds (b is left empty), or 500 when building
 * it ran out of memory. */
static void json_reply(request_state_t *rs, buf_t *b) {
  size_t len;
  char *body = buf_steal(b, &len);
  if (body == NULL) {
    http__problem_now(rs, PROBLEM_OUT_OF_MEMORY, "%s", "out of memory");
    return;
  }
  reply_free(&rs->reply);
  rs->reply = (reply_t){.status = 200,
                        .content_type = "application/json",
                        .body = body,
                        .len = len};
  rs->reply_ready = 1;
}

/* KServe v2 health: the status is the answer, the body is empty. */
static void empty_reply(request_state_t *rs, int status) {
  reply_free(&rs->reply);
  rs->reply = (reply_t){.status = status};
  rs->reply_ready = 1;
}

void http__get_reply(request_state_t *rs) {
  server_t *srv = rs->srv;
  char path[1100];
  buf_t b;
  buf_init(&b);
  switch (rs->route->handler) {
  case H_HEALTHZ:
    reply_text(&rs->reply, 200, "application/json", "{\"status\":\"ok\"}");
    rs->reply_ready = 1;
    break;
  case H_READYZ:
    if (atomic_load(&srv->draining)) {
      http__problem_now(rs, PROBLEM_DRAINING, "%s", "normd is shutting down");
      rs->reply.retry_after_s = (int)srv->cfg->retry_after_s;
    } else {
      reply_text(&rs->reply, 200, "application/json", "{\"status\":\"ready\"}");
      rs->reply_ready = 1;
    }
    break;
  case H_METRICS: {
    char *text = metrics_render();
    if (text == NULL) {
      http__problem_now(rs, PROBLEM_OUT_OF_MEMORY, "%s", "out of memory");
      break;
    }
    reply_free(&rs->reply);
    rs->reply =
        (reply_t){.status = 200,
                  .content_type = "text/plain; version=0.0.4; charset=utf-8",
                  .body = text,
                  .len = strlen(text)};
    rs->reply_ready = 1;
    break;
  }
  case H_INFO:
    info_body(srv, &b);
    json_reply(rs, &b);
    break;
  case H_OPENAPI:
    file_reply(rs, srv->cfg->openapi_path, "application/yaml");
    break;
  case H_WEB:
    snprintf(path, sizeof path, "%s/index.html", srv->cfg->web_root);
    file_reply(rs, path, "text/html; charset=utf-8");
    break;
  case H_WEB_SCRIPT: /* the route is the file's name under web_root */
    snprintf(path, sizeof path, "%s%s", srv->cfg->web_root, rs->route->path);
    file_reply(rs, path, "text/javascript; charset=utf-8");
    break;
  case H_V2_SERVER:
    kserve_server_metadata(&b);
    json_reply(rs, &b);
    break;
  case H_V2_LIVE: empty_reply(rs, 200); break;
  case H_V2_READY:
  case H_V2_MODEL_READY: /* every model is loaded while the server is up */
    empty_reply(rs, atomic_load(&srv->draining) ? 503 : 200);
    break;
  case H_V2_MODEL:
    kserve_model_metadata(rs->match.op, &b);
    json_reply(rs, &b);
    break;
  case H_V2_MODEL_CONFIG:
    kserve_model_config(rs->match.op, &b);
    json_reply(rs, &b);
    break;
  case H_V2_STATS:
  case H_V2_MODEL_STATS:
    kserve_model_stats(rs->route->handler == H_V2_STATS ? OP_COUNT
                                                        : rs->match.op,
                       &b);
    json_reply(rs, &b);
    break;
  case H_V2_REPOSITORY_INDEX:
    /* every model is ready: {"ready": true} or not, the list is the same,
     * so the body (if any) is read and dropped unparsed */
    kserve_repository_index(&b);
    json_reply(rs, &b);
    break;
  case H_V2_REPOSITORY_LOAD:
    http__problem_now(rs, PROBLEM_MODELS_BUILT_IN,
                      "%s cannot be loaded or unloaded: normd's models are "
                      "built in, always loaded",
                      rs->match.model);
    break;
  case H_V2_UNSUPPORTED:
    http__problem_now(rs, PROBLEM_UNSUPPORTED_EXTENSION,
                      "normd does not implement this extension (%s); GET /v2 "
                      "lists the ones it has",
                      rs->route->path);
    break;
  case H_COMPUTE: break; /* not a GET route */
  }
}

void http__preflight_reply(request_state_t *rs) {
  reply_free(&rs->reply);
  rs->reply = (reply_t){.status = 204};
  rs->reply_ready = 1;
}
