/* codec.c -- the table of wire formats and content negotiation. */
#include "codec.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const codec_t *const codecs_all[] = {&codec_json, &codec_framed, &codec_npy,
                                     NULL};
const codec_t *const codecs_no_npy[] = {&codec_json, &codec_framed, NULL};

/* Length of the media type at s, without parameters or surrounding space. */
static size_t media_type_span(const char *s, const char **start) {
  while (*s == ' ' || *s == '\t') s++;
  *start = s;
  size_t n = strcspn(s, ";,");
  while (n > 0 && isspace((unsigned char)s[n - 1])) n--;
  return n;
}

static const codec_t *codec_matching(const char *type, size_t n) {
  for (int i = 0; codecs_all[i] != NULL; i++) {
    const char *mt = codecs_all[i]->media_type;
    if (strlen(mt) == n && strncasecmp(mt, type, n) == 0) return codecs_all[i];
  }
  return NULL;
}

const codec_t *codec_for_content_type(const char *content_type) {
  if (content_type == NULL) return &codec_json;
  const char *type;
  size_t n = media_type_span(content_type, &type);
  if (n == 0) return &codec_json;
  return codec_matching(type, n);
}

/* The q value among the parameters [params, end) of one Accept element
 * (1 when absent); params is NULL or points at the first ';'. */
static double quality(const char *params, const char *end) {
  const char *p = params;
  while (p != NULL && p < end) {
    p++; /* past ';' */
    while (p < end && *p == ' ') p++;
    if (end - p >= 2 && (*p == 'q' || *p == 'Q') && p[1] == '=')
      return strtod(p + 2, NULL);
    p = memchr(p, ';', (size_t)(end - p));
  }
  return 1.0;
}

static int listed(const codec_t *c, const codec_t *const *list) {
  for (; c != NULL && *list != NULL; list++)
    if (*list == c) return 1;
  return 0;
}

const codec_t *codec_for_accept(const char *accept,
                                const codec_t *request_codec) {
  return codec_for_accept_among(accept, request_codec, codecs_all);
}

const codec_t *codec_for_accept_among(const char *accept,
                                      const codec_t *request_codec,
                                      const codec_t *const *answers) {
  /* what no Accept and the wildcards stand for */
  const codec_t *any = request_codec != NULL && !listed(request_codec, answers)
                           ? answers[0]
                           : request_codec;
  if (accept == NULL || accept[strspn(accept, " \t")] == '\0') return any;
  /* the acceptable type in `answers` with the highest q; the first on ties */
  const codec_t *best = NULL;
  double best_q = 0.0;
  const char *s = accept;
  while (*s) {
    const char *type;
    size_t n = media_type_span(s, &type);
    const char *end = type + strcspn(type, ",");
    const char *params = memchr(type, ';', (size_t)(end - type));
    double q = n > 0 ? quality(params, end) : 0.0;
    if (q > best_q) {
      const codec_t *c = (n == 3 && strncmp(type, "*/*", 3) == 0) ||
                                 (n == 13 && strncasecmp(type, "application/*", 13) == 0)
                             ? any
                             : codec_matching(type, n);
      if (listed(c, answers)) {
        best = c;
        best_q = q;
      }
    }
    s = *end ? end + 1 : end;
  }
  return best;
}
