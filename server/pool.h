/* pool.h -- the worker pool: libuv's thread pool driven by one loop thread.
 *
 * Any thread reserves a slot (bounded: past max_inflight it is refused, the
 * caller answers 503) and submits a job; the job crosses to the loop thread
 * through a mutex-guarded queue plus uv_async_send (which coalesces, so the
 * loop drains the whole queue), is started with uv_queue_work, runs on a
 * worker (run), then finishes on the loop thread (done), which releases the
 * slot. The pool never frees jobs: `done` owns the job from then on.
 */
#ifndef NORMD_POOL_H
#define NORMD_POOL_H

#include <uv.h>

typedef struct pool pool_t;

typedef struct pool_job {
  void (*run)(struct pool_job *job);  /* on a worker thread */
  void (*done)(struct pool_job *job); /* on the loop thread, after run */
  /* private to the pool */
  uv_work_t work;
  struct pool_job *next;
  pool_t *pool;
} pool_job_t;

/* Starts the loop thread. threads = worker threads (sets UV_THREADPOOL_SIZE,
 * which libuv reads once per process). NULL on failure. */
pool_t *pool_start(int threads, int max_inflight);

/* Takes one of max_inflight slots: 0, or -1 when the pool is full. */
int pool_try_reserve(pool_t *p);
/* Gives back a reserved slot without submitting. */
void pool_release(pool_t *p);
/* Submits a job on a reserved slot. Thread-safe. */
void pool_submit(pool_t *p, pool_job_t *job);

/* Jobs reserved and not yet done. */
int pool_inflight(pool_t *p);

/* Stops the loop thread and frees the pool. Call only when no job is in
 * flight (the caller drains first). */
void pool_stop(pool_t *p);

#endif
