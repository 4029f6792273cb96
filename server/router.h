/* router.h -- the route table: every path normd serves, its methods, and
 * what answers it. Routes are also the label set of the request metrics
 * (templates such as /v2/models/{model}/infer keep the label set bounded). */
#ifndef NORMD_ROUTER_H
#define NORMD_ROUTER_H

#include <stddef.h>

#include "request.h"

typedef enum {
  H_COMPUTE, /* POST: body -> worker pool -> reply */
  H_HEALTHZ,
  H_READYZ,
  H_METRICS,
  H_INFO,
  H_OPENAPI,
  H_WEB,
  H_WEB_SCRIPT, /* GET /normd.js, /normd.mjs: the JavaScript client */
  H_V2_SERVER,      /* GET /v2: server metadata */
  H_V2_LIVE,        /* GET /v2/health/live */
  H_V2_READY,       /* GET /v2/health/ready */
  H_V2_MODEL,       /* GET /v2/models/{model}: model metadata */
  H_V2_MODEL_READY, /* GET /v2/models/{model}/ready */
  /* Triton's extensions (triton-inference-server/server docs/protocol/) */
  H_V2_MODEL_CONFIG, /* GET /v2/models/{model}/config: model configuration */
  H_V2_STATS,        /* GET /v2/models/stats: every model's statistics */
  H_V2_MODEL_STATS,  /* GET /v2/models/{model}/stats */
  H_V2_REPOSITORY_INDEX, /* POST /v2/repository/index: model repository */
  H_V2_REPOSITORY_LOAD,  /* POST .../{model}/load and /unload: 400 */
  H_V2_UNSUPPORTED, /* trace, logging, shared memory: 501 */
} handler_t;

typedef struct {
  /* an exact path, or a template whose {name} segments match any one
   * segment ({model}: a model name, which a /versions/<v> may follow) */
  const char *path;
  const char *allow; /* the Allow header: the methods it takes */
  handler_t handler;
  op_t op; /* H_COMPUTE on /v1 */
} route_t;

/* A matched request path: the route, and for /v2/models/{model}/... the
 * model's op (model_known is 0 for an unknown model name: 404). */
typedef struct {
  const route_t *route;
  op_t op;
  int model_known;
  char model[64];
} route_match_t;

extern const route_t router_routes[];
extern const size_t router_count;

/* Whether a path is the KServe v2 / Open Inference Protocol's: "/v2" or
 * under "/v2/". The one place that decides between the protocols: every
 * answer to such a path, errors included (unknown routes too), is v2-shaped
 * ({"error": "..."}), every other answer's errors are RFC 9457. */
int router_is_v2(const char *path);

/* Fills *m for a path (query string excluded); m->route is NULL when no
 * route has this path. */
void router_match(const char *path, route_match_t *m);
/* Whether the route takes this method: one its Allow lists (HEAD where GET
 * is; OPTIONS always). */
int router_allows(const route_t *r, const char *method);
/* Index of r in router_routes (router_count for NULL: "other"). */
size_t router_index(const route_t *r);
/* Metric labels: every path, then "other"; router_count + 1 entries. */
const char *const *router_labels(void);

/* Percent-decodes a path or query value in place, as libmicrohttpd's own
 * decoder, except that %00 stays undecoded: a NUL would silently cut the
 * path short ("/healthz%00junk" must not be "/healthz"). Returns the new
 * length. */
size_t router_unescape(char *s);

#endif
