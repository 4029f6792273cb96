/* simulate.h -- POST /v1/residual/simulate: the Pre-Norm vs Post-Norm
 * residual stack of core/residual.h, for one or both placements. */
#ifndef NORMD_SIMULATE_H
#define NORMD_SIMULATE_H

#include "problem.h"
#include "request.h"

/* Fills res->curves[0] (pre) and/or [1] (post). 0, or -1 with a 422 for
 * sizes past the work limit, 500 on out of memory. */
int simulate_run(const request_t *req, result_t *res, problem_t *prob);

#endif
