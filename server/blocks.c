/* blocks.c -- per-thread reuse of request-sized blocks (blocks.h). */
#include "blocks.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { CLASSES = 6, UNCACHED = CLASSES, MIN_CLASS = 2048 };

/* In front of each block: its class and how many bytes it holds. Two
 * words, so that the payload keeps malloc's 16-byte alignment. */
typedef struct {
  size_t cls, cap;
} header_t;

/* The blocks this thread freed, by class; `closed` once the thread's exit
 * has returned them (a later destructor freeing blocks frees them). */
typedef struct {
  void *kept[CLASSES][BLOCKS_KEEP];
  unsigned count[CLASSES];
  int registered, closed;
} cache_t;

static _Thread_local cache_t cache;
static pthread_key_t exit_key;
static int exit_key_ok;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;

static header_t *header_of(void *p) { return (header_t *)p - 1; }

static void cache_release(void *arg) {
  cache_t *c = arg;
  for (int k = 0; k < CLASSES; k++)
    while (c->count[k] > 0) free(header_of(c->kept[k][--c->count[k]]));
  c->closed = 1;
}

static void exit_key_create(void) {
  exit_key_ok = pthread_key_create(&exit_key, cache_release) == 0;
}

/* The class holding n bytes (2 KiB << class), or UNCACHED: up to 1 KiB
 * (glibc's own per-thread cache takes those) and past BLOCKS_MAX. */
static size_t class_of(size_t n) {
  if (n <= 1024 || n > BLOCKS_MAX) return UNCACHED;
  size_t k = 0;
  while (((size_t)MIN_CLASS << k) < n) k++;
  return k;
}

void *blocks_alloc(size_t n) {
  size_t k = class_of(n);
  if (k != UNCACHED && cache.count[k] > 0) return cache.kept[k][--cache.count[k]];
  size_t cap = k != UNCACHED ? (size_t)MIN_CLASS << k : n;
  if (cap > SIZE_MAX - sizeof(header_t)) return NULL;
  header_t *h = malloc(sizeof *h + cap);
  if (h == NULL) return NULL;
  h->cls = k;
  h->cap = cap;
  return h + 1;
}

void *blocks_calloc(size_t n) {
  void *p = blocks_alloc(n);
  if (p != NULL) memset(p, 0, n);
  return p;
}

void *blocks_realloc(void *p, size_t n) {
  if (p == NULL) return blocks_alloc(n);
  header_t *h = header_of(p);
  if (n <= h->cap) return p;
  if (h->cls == UNCACHED && class_of(n) == UNCACHED) { /* large: in place if it can */
    if (n > SIZE_MAX - sizeof *h) return NULL;
    header_t *grown = realloc(h, sizeof *h + n);
    if (grown == NULL) return NULL;
    grown->cap = n;
    return grown + 1;
  }
  void *q = blocks_alloc(n);
  if (q == NULL) return NULL;
  memcpy(q, p, h->cap);
  blocks_free(p);
  return q;
}

void blocks_free(void *p) {
  if (p == NULL) return;
  header_t *h = header_of(p);
  size_t k = h->cls;
  if (k != UNCACHED && !cache.closed && cache.count[k] < BLOCKS_KEEP) {
    if (!cache.registered) { /* its blocks go back when the thread ends */
      pthread_once(&exit_once, exit_key_create);
      cache.registered = 1;
      if (!exit_key_ok || pthread_setspecific(exit_key, &cache) != 0) {
        cache.closed = 1;
        free(h);
        return;
      }
    }
    cache.kept[k][cache.count[k]++] = p;
    return;
  }
  free(h);
}
