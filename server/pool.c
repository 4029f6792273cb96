/* pool.c -- libuv worker pool with a bounded, mutex-guarded submit queue.
 * Locking: `lock` guards only the pending list; it is never held while a
 * job runs or while calling into libuv, except uv_async_send (thread-safe). */
#include "pool.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "metrics.h"

struct pool {
  uv_loop_t loop;
  uv_async_t wake; /* new jobs pending */
  uv_async_t stop; /* leave the loop */
  uv_thread_t thread;
  uv_mutex_t lock;
  pool_job_t *head, *tail; /* pending, FIFO; guarded by lock */
  atomic_int inflight;     /* reserved slots */
  atomic_int queued;       /* submitted, not yet started on a worker */
  int max_inflight;
};

static void work_cb(uv_work_t *w) {
  pool_job_t *job = w->data;
  metrics_queue_depth_set(atomic_fetch_sub(&job->pool->queued, 1) - 1);
  job->run(job);
}

static void after_work_cb(uv_work_t *w, int status) {
  (void)status; /* jobs are never cancelled */
  pool_job_t *job = w->data;
  pool_t *p = job->pool;
  /* the slot is free before the answer goes out, so a client that sends
   * its next request on receipt never finds its own job still counted */
  pool_release(p);
  job->done(job); /* may free job */
}

static void wake_cb(uv_async_t *a) {
  pool_t *p = a->data;
  uv_mutex_lock(&p->lock);
  pool_job_t *job = p->head;
  p->head = p->tail = NULL;
  uv_mutex_unlock(&p->lock);
  while (job) {
    pool_job_t *next = job->next;
    job->work.data = job;
    uv_queue_work(&p->loop, &job->work, work_cb, after_work_cb);
    job = next;
  }
}

static void stop_cb(uv_async_t *a) {
  pool_t *p = a->data;
  uv_close((uv_handle_t *)&p->wake, NULL);
  uv_close((uv_handle_t *)&p->stop, NULL);
}

static void loop_main(void *arg) {
  pool_t *p = arg;
  uv_run(&p->loop, UV_RUN_DEFAULT);
}

pool_t *pool_start(int threads, int max_inflight) {
  char n[16];
  snprintf(n, sizeof n, "%d", threads);
  setenv("UV_THREADPOOL_SIZE", n, 1);
  pool_t *p = calloc(1, sizeof *p);
  if (p == NULL) return NULL;
  p->max_inflight = max_inflight;
  if (uv_loop_init(&p->loop) != 0) goto err_free;
  if (uv_mutex_init(&p->lock) != 0) goto err_loop;
  if (uv_async_init(&p->loop, &p->wake, wake_cb) != 0) goto err_mutex;
  if (uv_async_init(&p->loop, &p->stop, stop_cb) != 0) goto err_wake;
  p->wake.data = p->stop.data = p;
  if (uv_thread_create(&p->thread, loop_main, p) != 0) goto err_stop;
  return p;

err_stop:
  uv_close((uv_handle_t *)&p->stop, NULL);
err_wake:
  uv_close((uv_handle_t *)&p->wake, NULL);
  uv_run(&p->loop, UV_RUN_DEFAULT); /* let the closes finish */
err_mutex:
  uv_mutex_destroy(&p->lock);
err_loop:
  uv_loop_close(&p->loop);
err_free:
  free(p);
  return NULL;
}

int pool_try_reserve(pool_t *p) {
  int now = atomic_fetch_add(&p->inflight, 1);
  if (now >= p->max_inflight) {
    atomic_fetch_sub(&p->inflight, 1);
    return -1;
  }
  metrics_jobs_add(1);
  return 0;
}

void pool_release(pool_t *p) {
  atomic_fetch_sub(&p->inflight, 1);
  metrics_jobs_add(-1);
}

void pool_submit(pool_t *p, pool_job_t *job) {
  job->pool = p;
  job->next = NULL;
  metrics_queue_depth_set(atomic_fetch_add(&p->queued, 1) + 1);
  uv_mutex_lock(&p->lock);
  if (p->tail) p->tail->next = job;
  else p->head = job;
  p->tail = job;
  uv_mutex_unlock(&p->lock);
  uv_async_send(&p->wake);
}

int pool_inflight(pool_t *p) { return atomic_load(&p->inflight); }

void pool_stop(pool_t *p) {
  uv_async_send(&p->stop);
  uv_thread_join(&p->thread);
  uv_loop_close(&p->loop);
  uv_mutex_destroy(&p->lock);
  free(p);
}
