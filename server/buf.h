/* buf.h -- a growable byte buffer for building responses. Out of memory is
 * sticky: appends after a failure are ignored and buf_ok() turns false, so
 * writers check once at the end instead of after every append. */
#ifndef NORMD_BUF_H
#define NORMD_BUF_H

#include <stdarg.h>
#include <stddef.h>

typedef struct {
  char *data; /* NUL-terminated while ok; owned by the buffer */
  size_t len;
  size_t cap;
  int failed; /* an allocation failed */
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
/* Hands the bytes to the caller (free() them); the buffer is reset.
 * Returns NULL if an allocation failed (the bytes are freed then). */
char *buf_steal(buf_t *b, size_t *len);

#endif
