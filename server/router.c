/* router.c -- the route table and exact-path matching. */
#include "router.h"

#include <string.h>

#define POST_ROUTES "POST, OPTIONS"
#define GET_ROUTES "GET, HEAD, OPTIONS"

const route_t router_routes[] = {
    {"/v1/norm/layer", POST_ROUTES, H_COMPUTE, OP_LAYER},
    {"/v1/norm/rms", POST_ROUTES, H_COMPUTE, OP_RMS},
    {"/v1/norm/batch", POST_ROUTES, H_COMPUTE, OP_BATCH},
    {"/v1/norm/group", POST_ROUTES, H_COMPUTE, OP_GROUP},
    {"/v1/norm/instance", POST_ROUTES, H_COMPUTE, OP_INSTANCE},
    {"/v1/moments", POST_ROUTES, H_COMPUTE, OP_MOMENTS},
    {"/v1/moments/merge", POST_ROUTES, H_COMPUTE, OP_MOMENTS_MERGE},
    {"/healthz", GET_ROUTES, H_HEALTHZ, OP_COUNT},
    {"/readyz", GET_ROUTES, H_READYZ, OP_COUNT},
    {"/metrics", GET_ROUTES, H_METRICS, OP_COUNT},
    {"/v1/info", GET_ROUTES, H_INFO, OP_COUNT},
    {"/openapi.yaml", GET_ROUTES, H_OPENAPI, OP_COUNT},
    {"/", GET_ROUTES, H_WEB, OP_COUNT},
};
const size_t router_count = sizeof router_routes / sizeof router_routes[0];

static const char *labels[sizeof router_routes / sizeof router_routes[0] + 1];

const route_t *router_match(const char *path) {
  for (size_t i = 0; i < router_count; i++)
    if (strcmp(router_routes[i].path, path) == 0) return &router_routes[i];
  return NULL;
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
