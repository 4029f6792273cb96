/* cpool_stress.c -- server/cpool.c under load: 4 callers run 3000 tasks
 * each at once on a pool of 3 threads (more callers than helpers, as when
 * every libuv worker splits a request), with random sizes and part counts.
 * Every item must be run exactly once, and a range that fails must make
 * cpool_run return its error. Build with -fsanitize=thread to look for
 * races (make bench-check runs the plain build). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "cpool.h"

enum { MAX_ITEMS = 257, CALLERS = 4, TASKS = 3000 };

typedef struct {
  atomic_int hits[MAX_ITEMS];
  size_t fail_at; /* the range holding this item returns -7; MAX_ITEMS: none */
} task_arg_t;

static cpool_t *pool;
static atomic_long bad;

static int run_range(void *arg, size_t begin, size_t end) {
  task_arg_t *t = arg;
  for (size_t i = begin; i < end; i++) atomic_fetch_add(&t->hits[i], 1);
  return begin <= t->fail_at && t->fail_at < end ? -7 : 0;
}

static void *caller(void *arg) {
  unsigned seed = (unsigned)(size_t)arg;
  for (int r = 0; r < TASKS; r++) {
    task_arg_t t;
    memset(&t, 0, sizeof t);
    seed = seed * 1103515245u + 12345u;
    size_t n = 1 + (seed >> 8) % MAX_ITEMS;
    size_t parts = 1 + (seed >> 20) % 8;
    t.fail_at = (seed >> 4) % 4 == 0 ? (seed >> 12) % n : MAX_ITEMS;
    int err = cpool_run(pool, n, parts, run_range, &t);
    for (size_t i = 0; i < n; i++)
      if (atomic_load(&t.hits[i]) != 1) atomic_fetch_add(&bad, 1);
    if (err != (t.fail_at < n ? -7 : 0)) atomic_fetch_add(&bad, 1);
  }
  return NULL;
}

int main(void) {
  pool = cpool_start(3);
  if (pool == NULL) return 1;
  pthread_t th[CALLERS];
  for (size_t i = 0; i < CALLERS; i++)
    pthread_create(&th[i], NULL, caller, (void *)(i + 1));
  for (int i = 0; i < CALLERS; i++) pthread_join(th[i], NULL);
  cpool_stop(pool);
  long b = atomic_load(&bad);
  printf("cpool_stress: %d tasks on %d callers: %s\n", CALLERS * TASKS, CALLERS,
         b ? "FAILED" : "every item once, errors returned");
  printf("%d passed, %ld failed\n", b ? 0 : 1, b ? 1L : 0L);
  return b != 0;
}
