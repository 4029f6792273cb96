/* router.c -- the route table and path matching: exact paths, plus the
 * KServe v2 model paths /v2/models/{model}[/versions/1][/ready|/infer]. */
#include "router.h"

#include <stdio.h>
#include <string.h>

#include "kserve.h"
#include "ops.h"

#define POST_ROUTES "POST, OPTIONS"
#define GET_ROUTES "GET, HEAD, OPTIONS"

/* The compute routes come from the operation list (ops.h), in its order. */
const route_t router_routes[] = {
#define OP_ROUTE_(id, name, route, ...) {route, POST_ROUTES, H_COMPUTE, OP_##id, 0},
    OPS_MAP(OP_ROUTE_)
#undef OP_ROUTE_
    {"/healthz", GET_ROUTES, H_HEALTHZ, OP_COUNT, 0},
    {"/readyz", GET_ROUTES, H_READYZ, OP_COUNT, 0},
    {"/metrics", GET_ROUTES, H_METRICS, OP_COUNT, 0},
    {"/v1/info", GET_ROUTES, H_INFO, OP_COUNT, 0},
    {"/openapi.yaml", GET_ROUTES, H_OPENAPI, OP_COUNT, 0},
    {"/", GET_ROUTES, H_WEB, OP_COUNT, 0},
    {"/v2", GET_ROUTES, H_V2_SERVER, OP_COUNT, 1},
    {"/v2/health/live", GET_ROUTES, H_V2_LIVE, OP_COUNT, 1},
    {"/v2/health/ready", GET_ROUTES, H_V2_READY, OP_COUNT, 1},
    {"/v2/models/{model}", GET_ROUTES, H_V2_MODEL, OP_COUNT, 1},
    {"/v2/models/{model}/ready", GET_ROUTES, H_V2_MODEL_READY, OP_COUNT, 1},
    {"/v2/models/{model}/infer", POST_ROUTES, H_COMPUTE, OP_COUNT, 1},
};
const size_t router_count = sizeof router_routes / sizeof router_routes[0];

static const char *labels[sizeof router_routes / sizeof router_routes[0] + 1];

static const route_t *route_by_path(const char *path) {
  for (size_t i = 0; i < router_count; i++)
    if (strcmp(router_routes[i].path, path) == 0) return &router_routes[i];
  return NULL;
}

/* /v2/models/{model}[/versions/1][/ready|/infer] */
static void match_model(const char *path, route_match_t *m) {
  const char *name = path + strlen("/v2/models/");
  size_t len = strcspn(name, "/");
  if (len == 0 || len >= sizeof m->model) return;
  memcpy(m->model, name, len);
  m->model[len] = '\0';
  const char *rest = name + len;
  int known_version = 1;
  if (strncmp(rest, "/versions/", 10) == 0) {
    size_t vlen = strcspn(rest + 10, "/");
    known_version = vlen == 1 && rest[10] == '1'; /* only version 1 exists */
    rest += 10 + vlen;
  }
  const char *template = *rest == '\0'                 ? "/v2/models/{model}"
                         : strcmp(rest, "/ready") == 0 ? "/v2/models/{model}/ready"
                         : strcmp(rest, "/infer") == 0 ? "/v2/models/{model}/infer"
                                                       : NULL;
  if (template == NULL) return;
  m->route = route_by_path(template);
  m->model_known = known_version && kserve_model_op(m->model, &m->op) == 0;
}

void router_match(const char *path, route_match_t *m) {
  memset(m, 0, sizeof *m);
  m->op = OP_COUNT;
  if (strncmp(path, "/v2/models/", 11) == 0) {
    match_model(path, m);
    return;
  }
  m->route = route_by_path(path);
  if (m->route) m->op = m->route->op;
}

int router_allows(const route_t *r, const char *method) {
  if (strcmp(method, "OPTIONS") == 0) return 1;
  if (r->handler == H_COMPUTE) return strcmp(method, "POST") == 0;
  return strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
}

size_t router_index(const route_t *r) {
  return r ? (size_t)(r - router_routes) : router_count;
}

const char *const *router_labels(void) {
  for (size_t i = 0; i < router_count; i++) labels[i] = router_routes[i].path;
  labels[router_count] = "other";
  return labels;
}

static int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

size_t router_unescape(char *s) {
  char *out = s;
  for (const char *in = s; *in; in++) {
    int hi, lo;
    if (in[0] == '%' && (hi = hex_value(in[1])) >= 0 &&
        (lo = hex_value(in[2])) >= 0 && (hi | lo) != 0) {
      *out++ = (char)(hi * 16 + lo);
      in += 2;
    } else {
      *out++ = *in;
    }
  }
  *out = '\0';
  return (size_t)(out - s);
}
