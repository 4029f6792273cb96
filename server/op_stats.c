/* op_stats.c -- per-operation statistics: one block of relaxed atomic
 * counters per OPS_MAP row. Relaxed is enough: each counter is exact on its
 * own, and nothing orders other memory by them. */
#include "op_stats.h"

#include <stdatomic.h>
#include <time.h>

typedef struct {
  atomic_uint_fast64_t count, ns;
} duration_t;

typedef struct {
  atomic_uint_fast64_t last_inference_ms;
  duration_t success, fail, queue, input, infer, output;
} counters_t;

static counters_t counters[OP_COUNT];

uint64_t op_stats_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t epoch_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void add(duration_t *d, uint64_t ns) {
  atomic_fetch_add_explicit(&d->count, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&d->ns, ns, memory_order_relaxed);
}

void op_stats_record(op_t op, const op_timing_t *t, int ok) {
  if ((unsigned)op >= OP_COUNT) return;
  counters_t *c = &counters[op];
  uint64_t total = t->queue_ns + t->input_ns + t->infer_ns + t->output_ns;
  if (ok) {
    add(&c->success, total);
    add(&c->queue, t->queue_ns);
    add(&c->input, t->input_ns);
    add(&c->infer, t->infer_ns);
    add(&c->output, t->output_ns);
  } else {
    add(&c->fail, total);
  }
  atomic_store_explicit(&c->last_inference_ms, epoch_ms(),
                        memory_order_relaxed);
}

static op_duration_t load(duration_t *d) {
  return (op_duration_t){
      atomic_load_explicit(&d->count, memory_order_relaxed),
      atomic_load_explicit(&d->ns, memory_order_relaxed)};
}

void op_stats_read(op_t op, op_stats_t *out) {
  counters_t *c = &counters[op];
  out->last_inference_ms =
      atomic_load_explicit(&c->last_inference_ms, memory_order_relaxed);
  out->success = load(&c->success);
  out->fail = load(&c->fail);
  out->queue = load(&c->queue);
  out->compute_input = load(&c->input);
  out->compute_infer = load(&c->infer);
  out->compute_output = load(&c->output);
  out->inference_count = out->success.count;
  out->execution_count = out->success.count;
}

static void zero(duration_t *d) {
  atomic_store(&d->count, 0);
  atomic_store(&d->ns, 0);
}

void op_stats_reset(void) {
  for (int i = 0; i < OP_COUNT; i++) {
    counters_t *c = &counters[i];
    atomic_store(&c->last_inference_ms, 0);
    zero(&c->success);
    zero(&c->fail);
    zero(&c->queue);
    zero(&c->input);
    zero(&c->infer);
    zero(&c->output);
  }
}
