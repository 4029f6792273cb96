/* explain.h -- steps ("explain") and histograms for teaching pages. */
#ifndef NORMD_EXPLAIN_H
#define NORMD_EXPLAIN_H

#include "problem.h"
#include "request.h"

/* After a norm was computed into res: adds res->steps when req asks for
 * RET_STEPS and the histograms for RET_HISTOGRAMS; after a backward, its
 * steps (g, xhat, mean_g, mean_g_xhat, grad_input) for RET_STEPS. 0, or -1
 * with a 500 problem (out of memory). Other ops: nothing to do. */
int explain_run(const request_t *req, result_t *res, problem_t *prob);

#endif
