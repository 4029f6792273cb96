/* buf.h -- a growable byte buffer for building responses. Out of memory is
 * sticky: appends after a failure are ignored and buf_ok() turns false, so
 * writers check once at the end instead of after every append. */
#ifndef NORMD_BUF_H
#define NORMD_BUF_H

#include <stdarg.h>
#include <stddef.h>

/* A finished run of bytes, malloc'd. */
typedef struct {
  char *data;
  size_t len;
} buf_seg_t;

typedef struct {
  char *data; /* NUL-terminated while ok; owned by the buffer */
  size_t len;
  size_t cap;
  int failed; /* an allocation failed */
  /* The bytes written before data, when a writer handed over text it
   * made elsewhere (buf_seal: a long array printed in pieces at once):
   * in order, owned by the buffer; none for most buffers. */
  buf_seg_t *sealed;
  int nsealed, sealed_cap;
  size_t sealed_len;
} buf_t;

void buf_init(buf_t *b);
void buf_free(buf_t *b);
/* Ensures room for n more bytes (plus a NUL). Returns 0 or -1. */
int buf_reserve(buf_t *b, size_t n);
void buf_append(buf_t *b, const void *data, size_t n);
/* For writers that format in place: room for up to n bytes at the end
 * (NULL after an allocation failure), then buf_commit with the bytes
 * actually written. */
char *buf_space(buf_t *b, size_t n);
void buf_commit(buf_t *b, size_t written);
void buf_puts(buf_t *b, const char *s);
void buf_putc(buf_t *b, char c);
void buf_printf(buf_t *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static inline int buf_ok(const buf_t *b) { return !b->failed; }
/* Ends the text written so far as a sealed segment and puts `owned` (len
 * bytes, malloc'd; the buffer takes it, also on failure) after it, without
 * copying either; writing goes on after them. */
void buf_seal(buf_t *b, char *owned, size_t len);
/* Every byte written: the sealed segments' and data's. */
static inline size_t buf_total(const buf_t *b) { return b->sealed_len + b->len; }
/* The sealed segments and then data, each run by itself: *segs (the
 * caller frees it and each run's data) holds *n runs, data's last unless
 * empty. The buffer is reset. -1 (everything freed) if an allocation
 * failed. */
int buf_steal_segments(buf_t *b, buf_seg_t **segs, int *n);
/* Hands the bytes to the caller (free() them), sealed segments copied in
 * front into one run; the buffer is reset. Returns NULL if an allocation
 * failed (the bytes are freed then). */
char *buf_steal(buf_t *b, size_t *len);

#endif
