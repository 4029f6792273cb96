/* compute.h -- runs a decoded request through core/ and fills a result.
 * Called on a worker thread; allocates the result's buffers (freed by
 * result_free) and nothing else. */
#ifndef NORMD_COMPUTE_H
#define NORMD_COMPUTE_H

#include "problem.h"
#include "request.h"

/* Returns 0, or -1 with *prob set (422 for invalid parameters, 500 for out
 * of memory). Batch norm running stats are updated inside req. */
int compute_run(request_t *req, result_t *res, problem_t *prob);

#endif
