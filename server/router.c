/* router.c -- the route table and path matching: exact paths, and
 * templates whose {name} segments match one segment (the KServe v2 model
 * paths /v2/models/{model}[/versions/1]/..., Triton's extensions). */
#include "router.h"

#include <stdio.h>
#include <string.h>

#include "kserve.h"
#include "ops.h"

#define POST_ROUTES "POST, OPTIONS"
#define GET_ROUTES "GET, HEAD, OPTIONS"
#define GET_POST_ROUTES "GET, HEAD, POST, OPTIONS"

/* The compute routes come from the operation list (ops.h), in its order.
 * The Triton extensions are those of triton-inference-server/server
 * docs/protocol/extension_*.md; the ones normd does not have (trace,
 * logging, system and CUDA shared memory) are routed so that their
 * clients get a v2 error saying so (501), not a bare 404. */
const route_t router_routes[] = {
#define OP_ROUTE_(id, name, route, ...) {route, POST_ROUTES, H_COMPUTE, OP_##id},
    OPS_MAP(OP_ROUTE_)
#undef OP_ROUTE_
    {"/healthz", GET_ROUTES, H_HEALTHZ, OP_COUNT},
    {"/readyz", GET_ROUTES, H_READYZ, OP_COUNT},
    {"/metrics", GET_ROUTES, H_METRICS, OP_COUNT},
    {"/v1/info", GET_ROUTES, H_INFO, OP_COUNT},
    {"/openapi.yaml", GET_ROUTES, H_OPENAPI, OP_COUNT},
    {"/", GET_ROUTES, H_WEB, OP_COUNT},
    {"/normd.js", GET_ROUTES, H_WEB_SCRIPT, OP_COUNT},
    {"/normd.mjs", GET_ROUTES, H_WEB_SCRIPT, OP_COUNT},
    {"/v2", GET_ROUTES, H_V2_SERVER, OP_COUNT},
    {"/v2/health/live", GET_ROUTES, H_V2_LIVE, OP_COUNT},
    {"/v2/health/ready", GET_ROUTES, H_V2_READY, OP_COUNT},
    {"/v2/models/{model}", GET_ROUTES, H_V2_MODEL, OP_COUNT},
    {"/v2/models/{model}/ready", GET_ROUTES, H_V2_MODEL_READY, OP_COUNT},
    {"/v2/models/{model}/infer", POST_ROUTES, H_COMPUTE, OP_COUNT},
    {"/v2/models/{model}/config", GET_ROUTES, H_V2_MODEL_CONFIG, OP_COUNT},
    {"/v2/models/stats", GET_ROUTES, H_V2_STATS, OP_COUNT},
    {"/v2/models/{model}/stats", GET_ROUTES, H_V2_MODEL_STATS, OP_COUNT},
    {"/v2/repository/index", POST_ROUTES, H_V2_REPOSITORY_INDEX, OP_COUNT},
    {"/v2/repository/models/{model}/load", POST_ROUTES, H_V2_REPOSITORY_LOAD,
     OP_COUNT},
    {"/v2/repository/models/{model}/unload", POST_ROUTES, H_V2_REPOSITORY_LOAD,
     OP_COUNT},
    {"/v2/trace/setting", GET_POST_ROUTES, H_V2_UNSUPPORTED, OP_COUNT},
    {"/v2/models/{model}/trace/setting", GET_POST_ROUTES, H_V2_UNSUPPORTED,
     OP_COUNT},
    {"/v2/logging", GET_POST_ROUTES, H_V2_UNSUPPORTED, OP_COUNT},
#define SHARED_MEMORY_ROUTES_(kind)                                            \
  {"/v2/" kind "/status", GET_ROUTES, H_V2_UNSUPPORTED, OP_COUNT},             \
      {"/v2/" kind "/region/{region}/status", GET_ROUTES, H_V2_UNSUPPORTED,    \
       OP_COUNT},                                                              \
      {"/v2/" kind "/region/{region}/register", POST_ROUTES, H_V2_UNSUPPORTED, \
       OP_COUNT},                                                              \
      {"/v2/" kind "/region/{region}/unregister", POST_ROUTES,                 \
       H_V2_UNSUPPORTED, OP_COUNT},                                            \
      {"/v2/" kind "/unregister", POST_ROUTES, H_V2_UNSUPPORTED, OP_COUNT}
    SHARED_MEMORY_ROUTES_("systemsharedmemory"),
    SHARED_MEMORY_ROUTES_("cudasharedmemory"),
#undef SHARED_MEMORY_ROUTES_
};
const size_t router_count = sizeof router_routes / sizeof router_routes[0];

static const char *labels[sizeof router_routes / sizeof router_routes[0] + 1];

int router_is_v2(const char *path) {
  return strncmp(path, "/v2", 3) == 0 && (path[3] == '\0' || path[3] == '/');
}

/* Whether path fits a template, segment by segment: {model} takes a model
 * name into m->model, followed on /v2/models/ paths by an optional
 * /versions/<v> (*version_ok: it is 1, the only version); any other {name}
 * takes one non-empty segment. */
static int fits(const char *tpl, const char *path, route_match_t *m,
                int *version_ok) {
  int versioned = strncmp(tpl, "/v2/models/", 11) == 0;
  *version_ok = 1;
  while (*tpl == '/' && *path == '/') {
    tpl++;
    path++;
    size_t tl = strcspn(tpl, "/"), pl = strcspn(path, "/");
    if (tpl[0] == '{') {
      if (pl == 0) return 0;
      if (tl == 7 && strncmp(tpl, "{model}", 7) == 0) {
        if (pl >= sizeof m->model) return 0;
        memcpy(m->model, path, pl);
        m->model[pl] = '\0';
        const char *rest = path + pl;
        if (versioned && strncmp(rest, "/versions/", 10) == 0) {
          size_t vl = strcspn(rest + 10, "/");
          if (vl == 0) return 0;
          *version_ok = vl == 1 && rest[10] == '1';
          pl += 10 + vl;
        }
      }
    } else if (tl != pl || strncmp(tpl, path, tl) != 0) {
      return 0;
    }
    tpl += tl;
    path += pl;
  }
  return *tpl == '\0' && *path == '\0';
}

void router_match(const char *path, route_match_t *m) {
  memset(m, 0, sizeof *m);
  m->op = OP_COUNT;
  /* exact paths first: /v2/models/stats is not the model "stats" */
  for (size_t i = 0; i < router_count; i++)
    if (strcmp(router_routes[i].path, path) == 0) {
      m->route = &router_routes[i];
      m->op = m->route->op;
      return;
    }
  for (size_t i = 0; i < router_count; i++) {
    const route_t *r = &router_routes[i];
    int version_ok;
    if (strchr(r->path, '{') == NULL) continue;
    memset(m->model, 0, sizeof m->model);
    if (!fits(r->path, path, m, &version_ok)) continue;
    m->route = r;
    if (strstr(r->path, "{model}"))
      m->model_known = version_ok && kserve_model_op(m->model, &m->op) == 0;
    return;
  }
  memset(m->model, 0, sizeof m->model);
}

int router_allows(const route_t *r, const char *method) {
  size_t n = strlen(method);
  for (const char *p = r->allow; *p;) {
    p += strspn(p, ", ");
    size_t len = strcspn(p, ", ");
    if (len == n && n > 0 && strncmp(p, method, n) == 0) return 1;
    p += len;
  }
  return 0;
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
