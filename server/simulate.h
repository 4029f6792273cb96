/* simulate.h -- POST /v1/residual/simulate: the Pre-Norm, Post-Norm and
 * DeepNorm residual stacks of core/residual.h, forward and, asked, their
 * gradients at initialization. */
#ifndef NORMD_SIMULATE_H
#define NORMD_SIMULATE_H

#include "problem.h"
#include "request.h"

/* Fills res->curves[k] for each requested placement k (pre, post,
 * deepnorm), with the loss and gradient norms when req asks for
 * gradients. 0, or -1 with a 422 for sizes past the work or workspace
 * limit, 500 on out of memory. */
int simulate_run(const request_t *req, result_t *res, problem_t *prob);

#endif
