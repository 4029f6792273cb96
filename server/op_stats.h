/* op_stats.h -- per-operation inference statistics, the numbers of Triton's
 * statistics extension (triton-inference-server/server
 * docs/protocol/extension_statistics.md): for each OPS_MAP row, /v1 and /v2
 * requests alike, the count and cumulative nanoseconds of successful and
 * failed requests and of the stages of a successful one -- time waiting in
 * the pool queue, decode (compute_input), compute (compute_infer) and
 * encode (compute_output). The worker records with relaxed atomics (no
 * lock on the hot path); readers see each counter whole, not a snapshot of
 * all at one instant. */
#ifndef NORMD_OP_STATS_H
#define NORMD_OP_STATS_H

#include <stdint.h>

#include "ops.h"

/* One request's stages, in nanoseconds (0 for a stage it did not reach). */
typedef struct {
  uint64_t queue_ns;  /* handed to the pool until a worker took it */
  uint64_t input_ns;  /* negotiation and decode */
  uint64_t infer_ns;  /* the computation */
  uint64_t output_ns; /* encode (or the error's rendering) */
} op_timing_t;

typedef struct {
  uint64_t count, ns;
} op_duration_t;

/* What op_stats_read gives: Triton's $model_stat numbers. */
typedef struct {
  uint64_t last_inference_ms; /* ms since the epoch; 0: none yet */
  uint64_t inference_count;   /* successful requests (normd never batches) */
  uint64_t execution_count;   /* successful executions: the same */
  op_duration_t success, fail; /* requests, their whole duration */
  /* the stages of the successful requests */
  op_duration_t queue, compute_input, compute_infer, compute_output;
} op_stats_t;

/* CLOCK_MONOTONIC in nanoseconds: the clock timings are taken with. */
uint64_t op_stats_now_ns(void);

/* Records one request of op that reached the service: ok 1 for a success
 * (its stages counted), 0 for a failure (counted in fail with the time it
 * took). Thread-safe, lock-free; op >= OP_COUNT is ignored. */
void op_stats_record(op_t op, const op_timing_t *t, int ok);

/* The numbers of op so far (op < OP_COUNT). Thread-safe. */
void op_stats_read(op_t op, op_stats_t *out);

/* Zeroes every counter (for tests). */
void op_stats_reset(void);

#endif
