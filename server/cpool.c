/* cpool.c -- the compute pool of cpool.h.
 *
 * DESIGN. A big request must use every core, but it arrives on one libuv
 * worker, and a libuv worker must not wait for other libuv work items: when
 * every worker is doing the same, none is left to run them (deadlock). So
 * the split runs on a separate set of threads-1 helpers, and the caller
 * takes part in its own task: ranges are claimed with one atomic counter
 * (`next`), by the helpers and by the caller alike, and the caller only
 * waits for ranges already claimed, i.e. running on a live helper. If all
 * helpers are busy with other tasks, the caller computes every range
 * itself: no wait on anything that is not already running, no deadlock,
 * and a request is never slower than single-threaded by more than the cost
 * of posting the task. Tasks live on the caller's stack; a helper joins a
 * task only under the lock and leaves it (active--) under the lock, and
 * the caller removes the task from the queue and waits for active == 0
 * before returning, so no helper touches a finished task.
 *
 * A helper that finds no work spins for up to SPIN_NS (watching `pending`
 * without the lock) before it sleeps on the condition variable: splits come
 * in bursts (one per large request, or back to back), and a sleeping
 * thread can take far longer than one range to be scheduled again when the
 * machine is busy, leaving the caller to do every range itself.
 *
 * Locking: one mutex guards the queue and every task's `active`; ranges
 * run with no lock held.
 */
#include "cpool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

enum { SPIN_NS = 100000 }; /* how long an idle helper polls before sleeping */

typedef struct task {
  cpool_fn fn;
  void *arg;
  size_t n, parts;
  atomic_size_t next; /* next range to claim */
  atomic_int err;     /* first error */
  int active;         /* helpers inside the task; guarded by the pool lock */
  int queued;         /* still in the queue; guarded by the pool lock */
  struct task *qnext;
} task_t;

struct cpool {
  pthread_mutex_t lock;
  pthread_cond_t work; /* a task was queued, or stop */
  pthread_cond_t idle; /* a helper left a task */
  task_t *head, *tail; /* tasks with unclaimed ranges */
  atomic_int pending;  /* tasks in the queue, for peeking without the lock */
  atomic_int stop;
  int nhelpers;
  pthread_t *helpers;
};

/* Claims and runs ranges of t until none is left. */
static void work_on(task_t *t) {
  size_t i;
  while ((i = atomic_fetch_add(&t->next, 1)) < t->parts) {
    size_t begin = t->n * i / t->parts, end = t->n * (i + 1) / t->parts;
    int e = t->fn(t->arg, begin, end);
    int zero = 0;
    if (e != 0) atomic_compare_exchange_strong(&t->err, &zero, e);
  }
}

/* With the lock held: takes t out of the queue if it is there. */
static void unqueue(cpool_t *p, task_t *t) {
  if (!t->queued) return;
  task_t **pp = &p->head, *prev = NULL;
  while (*pp != t) {
    prev = *pp;
    pp = &(*pp)->qnext;
  }
  *pp = t->qnext;
  if (p->tail == t) p->tail = prev;
  t->queued = 0;
  atomic_fetch_sub(&p->pending, 1);
}

static void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

static long long now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Without the lock: polls for a queued task (or stop) for up to SPIN_NS. */
static void spin_for_work(cpool_t *p) {
  long long start = now_ns();
  for (unsigned i = 1;; i++) {
    if (atomic_load_explicit(&p->pending, memory_order_relaxed) > 0 ||
        atomic_load_explicit(&p->stop, memory_order_relaxed))
      return;
    cpu_relax();
    if (i % 256 == 0 && now_ns() - start > SPIN_NS) return;
  }
}

static void *helper_main(void *arg) {
  cpool_t *p = arg;
  pthread_mutex_lock(&p->lock);
  for (;;) {
    if (!p->stop && p->head == NULL) {
      pthread_mutex_unlock(&p->lock);
      spin_for_work(p);
      pthread_mutex_lock(&p->lock);
      while (!p->stop && p->head == NULL) pthread_cond_wait(&p->work, &p->lock);
    }
    if (p->stop) break;
    task_t *t = p->head;
    if (atomic_load(&t->next) >= t->parts) { /* all claimed: drop it */
      unqueue(p, t);
      continue;
    }
    t->active++;
    pthread_mutex_unlock(&p->lock);
    work_on(t);
    pthread_mutex_lock(&p->lock);
    unqueue(p, t);
    if (--t->active == 0) pthread_cond_broadcast(&p->idle);
  }
  pthread_mutex_unlock(&p->lock);
  return NULL;
}

cpool_t *cpool_start(int threads) {
  cpool_t *p = calloc(1, sizeof *p);
  if (p == NULL) return NULL;
  int want = threads > 1 ? threads - 1 : 0;
  p->helpers = calloc(want ? (size_t)want : 1, sizeof *p->helpers);
  if (p->helpers == NULL) goto err;
  if (pthread_mutex_init(&p->lock, NULL) != 0) goto err;
  pthread_cond_init(&p->work, NULL);
  pthread_cond_init(&p->idle, NULL);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 1u << 20); /* kernels use < 100 KiB */
  for (int i = 0; i < want; i++)
    if (pthread_create(&p->helpers[p->nhelpers], &attr, helper_main, p) == 0)
      p->nhelpers++;
  pthread_attr_destroy(&attr);
  return p;
err:
  free(p->helpers);
  free(p);
  return NULL;
}

int cpool_threads(const cpool_t *p) { return p ? p->nhelpers + 1 : 1; }

int cpool_run(cpool_t *p, size_t n, size_t parts, cpool_fn fn, void *arg) {
  if (parts > n) parts = n;
  if (p == NULL || p->nhelpers == 0 || parts <= 1) return n ? fn(arg, 0, n) : 0;
  task_t t = {.fn = fn, .arg = arg, .n = n, .parts = parts, .queued = 1};
  atomic_init(&t.next, 0);
  atomic_init(&t.err, 0);
  pthread_mutex_lock(&p->lock);
  if (p->tail) p->tail->qnext = &t;
  else p->head = &t;
  p->tail = &t;
  atomic_fetch_add(&p->pending, 1);
  if (parts - 1 >= (size_t)p->nhelpers) pthread_cond_broadcast(&p->work);
  else for (size_t i = 0; i < parts - 1; i++) pthread_cond_signal(&p->work);
  pthread_mutex_unlock(&p->lock);

  work_on(&t);

  pthread_mutex_lock(&p->lock);
  unqueue(p, &t);
  while (t.active > 0) pthread_cond_wait(&p->idle, &p->lock);
  pthread_mutex_unlock(&p->lock);
  return atomic_load(&t.err);
}

void cpool_stop(cpool_t *p) {
  if (p == NULL) return;
  pthread_mutex_lock(&p->lock);
  p->stop = 1;
  pthread_cond_broadcast(&p->work);
  pthread_mutex_unlock(&p->lock);
  for (int i = 0; i < p->nhelpers; i++) pthread_join(p->helpers[i], NULL);
  pthread_cond_destroy(&p->work);
  pthread_cond_destroy(&p->idle);
  pthread_mutex_destroy(&p->lock);
  free(p->helpers);
  free(p);
}

static int shared_threads; /* cpool_shared_init's; 0: one per CPU */
static pthread_once_t shared_once = PTHREAD_ONCE_INIT;
static cpool_t *shared_pool;

void cpool_shared_init(int threads) { shared_threads = threads; }

static void shared_start(void) {
  long n = shared_threads > 0 ? shared_threads : sysconf(_SC_NPROCESSORS_ONLN);
  shared_pool = cpool_start(n < 1 ? 1 : n > 1024 ? 1024 : (int)n);
}

cpool_t *cpool_shared(void) {
  pthread_once(&shared_once, shared_start);
  return shared_pool;
}
