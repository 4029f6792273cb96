/* blocks.h -- malloc for the blocks every request allocates and frees on
 * one thread: its state, its body, the parsed values of a JSON body.
 *
 * Why: normd runs glibc malloc with one arena (main.c: so that
 * malloc_trim can give a big request's memory back once idle), and the
 * blocks of a small request, 1.5 to 8 KiB, are larger than the per-thread
 * cache in front of it (at most 1032 bytes): each of them took the arena's
 * lock, for which the libmicrohttpd threads answering small requests at
 * once waited in futex calls (perf under wrk, 1x768 JSON). Here each
 * thread keeps a few of the blocks it freed, by size class, and hands them
 * out again without a lock.
 *
 * A block of at most BLOCKS_MAX bytes is rounded up to its class (2 KiB to
 * 64 KiB, powers of two); a thread keeps at most BLOCKS_KEEP of each class
 * (at most 252 KiB a thread, returned to malloc when the thread ends).
 * Larger blocks are plain malloc. A block from here is freed by
 * blocks_free only (never free()): each carries a 16-byte header with its
 * class, which also keeps malloc's 16-byte alignment. */
#ifndef NORMD_BLOCKS_H
#define NORMD_BLOCKS_H

#include <stddef.h>

enum { BLOCKS_MAX = 64 * 1024, BLOCKS_KEEP = 2 };

/* As malloc, calloc and realloc (realloc keeps the block where its class
 * still holds n bytes); NULL when out of memory. */
void *blocks_alloc(size_t n);
void *blocks_calloc(size_t n);
void *blocks_realloc(void *p, size_t n);
/* As free (NULL is ignored). */
void blocks_free(void *p);

#endif
