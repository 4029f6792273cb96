/* router.h -- the route table: every path normd serves, its methods, and
 * what answers it. Routes are also the label set of the request metrics. */
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
} handler_t;

typedef struct {
  const char *path;
  const char *allow; /* value of the Allow header */
  handler_t handler;
  op_t op; /* H_COMPUTE only */
} route_t;

extern const route_t router_routes[];
extern const size_t router_count;

/* The route for an exact path (query string excluded), or NULL. */
const route_t *router_match(const char *path);
/* Whether the route takes this method (HEAD where GET is; OPTIONS always). */
int router_allows(const route_t *r, const char *method);
/* Index of r in router_routes (router_count for NULL: "other"). */
size_t router_index(const route_t *r);
/* Metric labels: every path, then "other"; router_count + 1 entries. */
const char *const *router_labels(void);

#endif
