/* buf.c -- growable byte buffer with sticky out-of-memory; see buf.h. */
#include "buf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void buf_init(buf_t *b) { memset(b, 0, sizeof *b); }

void buf_free(buf_t *b) {
  for (int i = 0; i < b->nsealed; i++) free(b->sealed[i].data);
  free(b->sealed);
  free(b->data);
  buf_init(b);
}

/* Appends one run to the sealed list; frees it on failure. */
static void seal_run(buf_t *b, char *data, size_t len) {
  if (b->nsealed == b->sealed_cap) {
    int want = b->sealed_cap ? 2 * b->sealed_cap : 8;
    buf_seg_t *grown = realloc(b->sealed, (size_t)want * sizeof *grown);
    if (grown == NULL) {
      free(data);
      b->failed = 1;
      return;
    }
    b->sealed = grown;
    b->sealed_cap = want;
  }
  b->sealed[b->nsealed++] = (buf_seg_t){data, len};
  b->sealed_len += len;
}

void buf_seal(buf_t *b, char *owned, size_t len) {
  if (b->failed) {
    free(owned);
    return;
  }
  if (b->len > 0) {
    seal_run(b, b->data, b->len);
    b->data = NULL;
    b->len = b->cap = 0;
  }
  if (len > 0) seal_run(b, owned, len);
  else free(owned);
}

int buf_steal_segments(buf_t *b, buf_seg_t **segs, int *n) {
  if (b->failed) {
    buf_free(b);
    return -1;
  }
  buf_seg_t *all = b->sealed;
  int count = b->nsealed;
  if (b->len > 0 || count == 0) {
    if (count == b->sealed_cap) {
      all = realloc(b->sealed, ((size_t)count + 1) * sizeof *all);
      if (all == NULL) {
        buf_free(b);
        return -1;
      }
    }
    if (b->data == NULL && buf_reserve(b, 0) == 0) b->data[0] = '\0';
    if (b->data == NULL) { /* an empty text is one empty run */
      b->sealed = all;
      buf_free(b);
      return -1;
    }
    all[count++] = (buf_seg_t){b->data, b->len};
  } else {
    free(b->data); /* room reserved after the last seal, never written */
  }
  *segs = all;
  *n = count;
  buf_init(b);
  return 0;
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

/* Copies the sealed runs in front of data: one run again. */
static void unseal(buf_t *b) {
  size_t front = b->sealed_len;
  if (buf_reserve(b, front) != 0) return;
  memmove(b->data + front, b->data, b->len);
  size_t at = 0;
  for (int i = 0; i < b->nsealed; i++) {
    memcpy(b->data + at, b->sealed[i].data, b->sealed[i].len);
    at += b->sealed[i].len;
    free(b->sealed[i].data);
  }
  free(b->sealed);
  b->sealed = NULL;
  b->nsealed = b->sealed_cap = 0;
  b->sealed_len = 0;
  b->len += front;
  b->data[b->len] = '\0';
}

char *buf_steal(buf_t *b, size_t *len) {
  if (b->nsealed > 0) unseal(b);
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
