/* compute.h -- runs a decoded request through core/ and fills a result.
 * Called on a worker thread; allocates the result's buffers (freed by
 * result_free) and nothing else. */
#ifndef NORMD_COMPUTE_H
#define NORMD_COMPUTE_H

#include "problem.h"
#include "request.h"

/* The compute pool's thread count for large requests (compute.c): call
 * once before the first compute_run; without it, one thread per CPU. */
void compute_init(int threads);

/* Computes req (the function of its row in OPS_MAP) into *res, which holds
 * everything the answer needs (batch norm's updated running statistics
 * too). req is only read, but for its input's memory, which the output
 * may take over (res->output_in_input). Returns 0, or -1 with *prob set
 * (422 for invalid parameters, 500 for out of memory). */
int compute_run(const request_t *req, result_t *res, problem_t *prob);

#endif
