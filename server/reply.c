/* reply.c -- a finished answer's memory: body, by-reference parts; see
 * reply.h. */
#include "reply.h"

#include <stdlib.h>
#include <string.h>

static void release_parts(reply_t *r) {
  for (int i = 0; i < r->nparts; i++) free(r->parts[i].owned);
  if (r->keep_free != NULL) r->keep_free(r->keep);
  r->nparts = 0;
  r->parts_len = 0;
  r->keep = NULL;
  r->keep_free = NULL;
}

int reply_borrows(const reply_t *r) {
  for (int i = 0; i < r->nparts; i++)
    if (r->parts[i].owned == NULL) return 1;
  return 0;
}

void reply_free(reply_t *r) {
  free(r->body);
  r->body = NULL;
  r->len = 0;
  release_parts(r);
}

int reply_flatten(reply_t *r) {
  if (r->nparts == 0) return 0;
  char *body = realloc(r->body, r->len + r->parts_len + 1);
  if (body == NULL) {
    reply_free(r);
    return -1;
  }
  r->body = body;
  for (int i = 0; i < r->nparts; i++) {
    memcpy(r->body + r->len, r->parts[i].data, r->parts[i].len);
    r->len += r->parts[i].len;
  }
  r->body[r->len] = '\0';
  release_parts(r);
  return 0;
}

int reply_text(reply_t *r, int status, const char *content_type,
               const char *text) {
  size_t n = strlen(text);
  char *body = malloc(n + 1);
  r->status = status;
  r->content_type = content_type;
  if (body == NULL) return -1;
  memcpy(body, text, n + 1);
  reply_free(r);
  r->body = body;
  r->len = n;
  return 0;
}

