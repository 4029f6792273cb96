/* http_body.c -- a request body as it arrives (body_t): one buffer, sized
 * from Content-Length, grown by doubling for chunked bodies, placed so a
 * framed body's tensors are aligned, and written with streaming stores
 * when large (a worker reads it later, from memory anyway). A compressed
 * body is inflated into that buffer as each chunk arrives, the buffer
 * doubling up to max_body_bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "blocks.h"
#include "http_internal.h"

void http__body_free(body_t *b) {
  blocks_free(b->mem);
  memset(b, 0, sizeof *b);
}

/* Bodies of at least STREAM_BODY_MIN bytes are written with streaming
 * (non-temporal) stores: under load a worker reads a large body long after
 * it arrived, by when it has left the cache anyway, and plain stores would
 * first read every destination line from memory. bench/http_bench.sh,
 * 512x2048 framed at 16 connections, A/B in one run: 373-407 req/s with
 * memcpy, 421-431 with this; a lone client loses 1-3% (its body would
 * still have been in the cache). */
enum { STREAM_BODY_MIN = 1 << 20 };

static void copy_streaming(char *dst, const char *src, size_t n) {
#ifdef __SSE2__
  size_t i = (size_t)(-(uintptr_t)dst & 63); /* whole lines from here on */
  if (i > n) i = n;
  memcpy(dst, src, i);
  for (; i + 64 <= n; i += 64)
    for (int k = 0; k < 64; k += 16)
      _mm_stream_si128((__m128i *)(dst + i + k),
                       _mm_loadu_si128((const __m128i *)(src + i + k)));
  _mm_sfence(); /* before the worker thread reads them */
  memcpy(dst + i, src + i, n - i);
#else
  memcpy(dst, src, n);
#endif
}

/* Makes the buffer hold at least cap bytes, keeping what it has and the
 * alignment of data + align_at. 0, or -1 when out of memory. */
static int body_reserve(body_t *b, size_t cap) {
  if (cap <= b->cap) return 0;
  char *mem = cap <= SIZE_MAX - BODY_ALIGN ? blocks_alloc(cap + BODY_ALIGN) : NULL;
  if (mem == NULL) return -1;
  char *data =
      mem +
      (BODY_ALIGN - ((uintptr_t)mem + b->align_at) % BODY_ALIGN) % BODY_ALIGN;
  if (b->len) memcpy(data, b->data, b->len);
  blocks_free(b->mem);
  b->mem = mem;
  b->data = data;
  b->cap = cap;
  return 0;
}

/* Appends n bytes; the first call sizes the buffer for `expected` bytes
 * (Content-Length, already checked against the limit), chunked bodies grow
 * by doubling. Returns 0 or -1 when out of memory. */
int http__body_append(body_t *b, const char *bytes, size_t n, size_t expected) {
  if (b->len + n > b->cap) {
    size_t cap = b->cap ? b->cap : expected > 0 ? expected : 4096;
    while (cap < b->len + n) cap *= 2;
    if (body_reserve(b, cap) != 0) return -1;
  }
  if (expected >= STREAM_BODY_MIN)
    copy_streaming(b->data + b->len, bytes, n);
  else
    memcpy(b->data + b->len, bytes, n);
  b->len += n;
  return 0;
}

/* A compressed body's first buffer: Content-Length counts compressed bytes,
 * so it is a guess at the decompressed size, not a promise. JSON tensors
 * compress 3-10x (bench/compression_bench.sh), hence 4x the compressed
 * size, and never more than the limit allows: a bomb's few KiB do not buy
 * a large buffer, its output grows it by doubling. */
static size_t inflate_first_cap(size_t compressed, size_t ceiling) {
  size_t cap = compressed > ((size_t)-1) / 4 ? ceiling : compressed * 4;
  if (cap < 4096) cap = 4096;
  return cap < ceiling ? cap : ceiling;
}

int http__body_inflate(body_t *b, inflater_t *z, const char *bytes, size_t n,
                       size_t expected, size_t limit) {
  /* one byte past the limit tells a body of exactly `limit` bytes from a
   * larger one without holding more */
  size_t ceiling = limit + 1;
  for (;;) {
    if (b->len == b->cap) {
      size_t cap = b->cap ? b->cap * 2 : inflate_first_cap(expected, ceiling);
      if (cap > ceiling || cap < b->cap) cap = ceiling;
      if (cap <= b->len) return BODY_TOO_LARGE;
      if (body_reserve(b, cap) != 0) return BODY_NOMEM;
    }
    size_t got;
    inflate_status_t rc =
        inflater_run(z, &bytes, &n, b->data + b->len, b->cap - b->len, &got);
    b->len += got;
    if (b->len > limit) return BODY_TOO_LARGE;
    if (rc == INFLATE_CORRUPT) return BODY_CORRUPT;
    if (rc == INFLATE_NOMEM) return BODY_NOMEM;
    /* done with this chunk unless it stopped for room */
    if (b->len < b->cap && n == 0) return 0;
    if (got == 0 && b->len < b->cap) return 0; /* cannot happen: no progress */
  }
}
