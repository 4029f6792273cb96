/* buf.c -- growable byte buffer with sticky out-of-memory; see buf.h. */
#include "buf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void buf_init(buf_t *b) { memset(b, 0, sizeof *b); }

void buf_free(buf_t *b) {
  free(b->data);
  buf_init(b);
}

int buf_reserve(buf_t *b, size_t n) {
  if (b->failed) return -1;
  if (n < b->cap - b->len) return 0; /* keeps one byte for the NUL */
  size_t want = b->len + n + 1;
  if (want < b->len) goto fail;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < want) {
    if (cap > ((size_t)-1) / 2) goto fail;
    cap *= 2;
  }
  char *p = realloc(b->data, cap);
  if (p == NULL) goto fail;
  b->data = p;
  b->cap = cap;
  return 0;
fail:
  b->failed = 1;
  return -1;
}

void buf_append(buf_t *b, const void *data, size_t n) {
  if (buf_reserve(b, n) != 0) return;
  memcpy(b->data + b->len, data, n);
  b->len += n;
  b->data[b->len] = '\0';
}

char *buf_space(buf_t *b, size_t n) {
  return buf_reserve(b, n) == 0 ? b->data + b->len : NULL;
}

void buf_commit(buf_t *b, size_t written) {
  b->len += written;
  b->data[b->len] = '\0';
}

void buf_puts(buf_t *b, const char *s) { buf_append(b, s, strlen(s)); }

void buf_putc(buf_t *b, char c) { buf_append(b, &c, 1); }

void buf_printf(buf_t *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char small[256];
  int n = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  if (n < 0) {
    b->failed = 1;
    return;
  }
  if ((size_t)n < sizeof small) {
    buf_append(b, small, (size_t)n);
    return;
  }
  if (buf_reserve(b, (size_t)n) != 0) return;
  va_start(ap, fmt);
  vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
}

char *buf_steal(buf_t *b, size_t *len) {
  if (b->failed) {
    buf_free(b);
    return NULL;
  }
  if (b->data == NULL && buf_reserve(b, 0) != 0) return NULL;
  char *p = b->data;
  if (len) *len = b->len;
  buf_init(b);
  return p;
}
