/* cpool.h -- a small pthread pool that splits one computation over index
 * ranges, so one large request uses every core.
 *
 * cpool_run() posts a task of `parts` ranges and then works on it itself:
 * the calling thread claims ranges from the same counter as the helpers and
 * only ever waits for ranges a helper has already started. A busy or absent
 * helper therefore never blocks a caller (it simply computes more ranges
 * itself), which is why the libuv workers may call it: no libuv work item
 * ever waits on another one. See cpool.c for the design note.
 */
#ifndef NORMD_CPOOL_H
#define NORMD_CPOOL_H

#include <stddef.h>

typedef struct cpool cpool_t;

/* One range of a task: items [begin, end). Returns 0 or an error code; the
 * first non-zero code of a task is what cpool_run returns. Called from any
 * thread of the pool, concurrently for disjoint ranges. */
typedef int (*cpool_fn)(void *arg, size_t begin, size_t end);

/* Starts threads - 1 helper threads (the caller of cpool_run is the last
 * one). threads <= 1 gives a pool that runs everything on the caller. NULL
 * when out of memory (a helper that cannot be created is just left out). */
cpool_t *cpool_start(int threads);

/* Threads that may work on one task (helpers + the caller). */
int cpool_threads(const cpool_t *p);

/* Runs fn over [0, n) split into at most `parts` ranges of near-equal size
 * and returns when all are done. p may be NULL (runs fn(arg, 0, n) on the
 * caller). Thread-safe: many callers may run tasks at once. */
int cpool_run(cpool_t *p, size_t n, size_t parts, cpool_fn fn, void *arg);

/* Stops and joins the helpers; no task may be running. */
void cpool_stop(cpool_t *p);

/* The daemon's one compute pool, shared by everything that splits a large
 * request (compute.c's kernels, the JSON codec's parallel parse and print):
 * started on the first cpool_shared() with cpool_shared_init's thread
 * count (the daemon's `threads`; 0 or never called: one per CPU), then
 * kept for the life of the process. cpool_shared_init must come before the
 * first cpool_shared() to count. NULL when out of memory (callers then run
 * on their own thread: cpool_run takes NULL). Thread-safe. */
void cpool_shared_init(int threads);
cpool_t *cpool_shared(void);

#endif
