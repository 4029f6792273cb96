/* encoding.c -- content codings with zlib: Content-Encoding and
 * Accept-Encoding, a reply compressed as one stream, and the streaming
 * request-body inflater; see encoding.h. */
#include "encoding.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>

const char *encoding_name(encoding_t e) {
  return e == ENCODING_GZIP ? "gzip" : e == ENCODING_DEFLATE ? "deflate" : NULL;
}

/* One list element of a header value: [p, p + n) with surrounding blanks
 * and the comma removed; returns where the next one starts. */
static const char *next_element(const char *p, const char **elem, size_t *n) {
  p += strspn(p, " \t,");
  size_t len = strcspn(p, ",");
  *elem = p;
  while (len > 0 && (p[len - 1] == ' ' || p[len - 1] == '\t')) len--;
  *n = len;
  return p + strcspn(p, ",");
}

static int token_is(const char *t, size_t n, const char *name) {
  return strlen(name) == n && strncasecmp(t, name, n) == 0;
}

/* A coding's name as an encoding_t; -1 when it is not one normd reads. */
static int coding_of(const char *t, size_t n) {
  if (token_is(t, n, "identity")) return ENCODING_IDENTITY;
  if (token_is(t, n, "gzip") || token_is(t, n, "x-gzip")) return ENCODING_GZIP;
  if (token_is(t, n, "deflate")) return ENCODING_DEFLATE;
  return -1;
}

int encoding_parse_content(const char *value, encoding_t *out) {
  *out = ENCODING_IDENTITY;
  if (value == NULL) return 0;
  int seen = 0;
  for (const char *p = value; *p;) {
    const char *t;
    size_t n;
    p = next_element(p, &t, &n);
    if (n == 0) continue;
    int c = coding_of(t, n);
    if (c < 0) return ENCODING_E_UNKNOWN;
    if (c == ENCODING_IDENTITY) continue;
    if (seen++) return ENCODING_E_STACKED;
    *out = (encoding_t)c;
  }
  return 0;
}

/* A weight (RFC 9110 12.4.2): "q=" then 0, 0.ddd, 1 or 1.000, in
 * thousandths; -1 when malformed. */
static int parse_qvalue(const char *s, size_t n) {
  if (n < 1 || (s[0] != '0' && s[0] != '1')) return -1;
  int q = (s[0] - '0') * 1000;
  if (n == 1) return q;
  if (s[1] != '.' || n > 5) return -1;
  int scale = 100;
  for (size_t i = 2; i < n; i++, scale /= 10) {
    if (s[i] < '0' || s[i] > '9') return -1;
    q += (s[i] - '0') * scale;
  }
  return q > 1000 ? -1 : q;
}

/* The weight of one Accept-Encoding element's parameters ("; q=0.5"), 1000
 * without one, -1 when malformed (the element is then ignored). */
static int element_weight(const char *params, size_t n) {
  const char *end = params + n;
  int q = 1000;
  while (params < end) {
    while (params < end && (*params == ';' || *params == ' ' || *params == '\t'))
      params++;
    size_t len = 0;
    while (params + len < end && params[len] != ';') len++;
    while (len > 0 && (params[len - 1] == ' ' || params[len - 1] == '\t')) len--;
    if (len >= 2 && (params[0] == 'q' || params[0] == 'Q') && params[1] == '=')
      q = parse_qvalue(params + 2, len - 2);
    else if (len > 0)
      return -1; /* Accept-Encoding defines no other parameter */
    if (q < 0) return -1;
    while (params < end && *params != ';') params++;
  }
  return q;
}

encoding_t encoding_negotiate(const char *accept_encoding) {
  if (accept_encoding == NULL) return ENCODING_IDENTITY;
  /* explicit weights, -1 = not named; star applies to codings not named */
  int gzip = -1, deflate = -1, identity = -1, star = -1;
  for (const char *p = accept_encoding; *p;) {
    const char *t;
    size_t n;
    p = next_element(p, &t, &n);
    if (n == 0) continue;
    size_t name = 0;
    while (name < n && t[name] != ';' && t[name] != ' ' && t[name] != '\t')
      name++;
    int q = element_weight(t + name, n - name);
    if (q < 0) continue;
    int *slot = token_is(t, name, "*")          ? &star
                : coding_of(t, name) == ENCODING_GZIP    ? &gzip
                : coding_of(t, name) == ENCODING_DEFLATE ? &deflate
                : coding_of(t, name) == ENCODING_IDENTITY ? &identity
                                                          : NULL;
    if (slot != NULL && q > *slot) *slot = q; /* a repeat: the kinder one */
  }
  if (gzip < 0) gzip = star > 0 ? star : 0;
  if (deflate < 0) deflate = star > 0 ? star : 0;
  /* identity is acceptable unless refused, by name or by "*" (12.5.3),
   * but unnamed it only stands behind the codings the client listed: it
   * wins only when named (or "*") with a higher weight */
  if (identity < 0) identity = star >= 0 ? star : 1;
  int best = gzip >= deflate ? gzip : deflate;
  if (best == 0 || identity > best) return ENCODING_IDENTITY;
  return gzip >= deflate ? ENCODING_GZIP : ENCODING_DEFLATE;
}

/* ---- answers ---- */

/* zlib's windowBits for a coding: 15 (a 32 KiB window) in the zlib
 * wrapper, +16 in the gzip one (zlib.h, deflateInit2). */
static int window_bits(encoding_t e) { return e == ENCODING_GZIP ? 15 + 16 : 15; }

int encoding_compress_reply(reply_t *r, encoding_t e, int level) {
  size_t total = r->len + r->parts_len;
  z_stream zs;
  memset(&zs, 0, sizeof zs);
  if (deflateInit2(&zs, level, Z_DEFLATED, window_bits(e), 8,
                   Z_DEFAULT_STRATEGY) != Z_OK)
    return -1;
  /* deflateBound holds for the whole input given in any number of calls
   * with no flush but the final Z_FINISH, so one buffer is enough */
  size_t cap = deflateBound(&zs, (uLong)total);
  char *out = malloc(cap + 1);
  if (out == NULL) {
    deflateEnd(&zs);
    return -1;
  }
  zs.next_out = (Bytef *)out;
  zs.avail_out = (uInt)cap;
  int rc = Z_OK;
  for (int i = -1; i < r->nparts && rc == Z_OK; i++) {
    const char *data = i < 0 ? r->body : r->parts[i].data;
    size_t len = i < 0 ? r->len : r->parts[i].len;
    int last = i + 1 == r->nparts;
    /* zlib's avail_in is a uInt: feed a long part in pieces */
    do {
      size_t piece = len > (1u << 30) ? (1u << 30) : len;
      zs.next_in = (Bytef *)(uintptr_t)data;
      zs.avail_in = (uInt)piece;
      data += piece;
      len -= piece;
      rc = deflate(&zs, last && len == 0 ? Z_FINISH : Z_NO_FLUSH);
    } while (len > 0 && rc == Z_OK);
  }
  size_t n = zs.total_out;
  deflateEnd(&zs);
  if (rc != Z_STREAM_END) { /* cannot happen within deflateBound */
    free(out);
    return -1;
  }
  out[n] = '\0';
  reply_free(r); /* the body, the parts and what they pointed into */
  r->body = out;
  r->len = n;
  r->content_encoding = encoding_name(e);
  return 0;
}

/* ---- requests: the streaming inflater ---- */

struct inflater {
  z_stream zs;
  encoding_t coding;
  int started;  /* inflateInit2 done (deflate waits for two bytes) */
  int finished; /* Z_STREAM_END seen and nothing after it (yet) */
  unsigned char head[2]; /* a deflate stream's first bytes, until started */
  size_t nhead;
};

inflater_t *inflater_new(encoding_t e) {
  inflater_t *z = calloc(1, sizeof *z);
  if (z == NULL) return NULL;
  z->coding = e;
  return z;
}

void inflater_free(inflater_t *z) {
  if (z == NULL) return;
  if (z->started) inflateEnd(&z->zs);
  free(z);
}

int inflater_finished(const inflater_t *z) { return z->finished; }
encoding_t inflater_coding(const inflater_t *z) { return z->coding; }

/* Whether two bytes open a zlib stream (RFC 1950 2.2): CM 8, a window of at
 * most 32 KiB (CINFO <= 7), and CMF * 256 + FLG a multiple of 31. A raw
 * deflate stream starts with a block header instead. */
static int zlib_header(const unsigned char h[2]) {
  return (h[0] & 0x0f) == 8 && (h[0] >> 4) <= 7 && (h[0] * 256 + h[1]) % 31 == 0;
}

/* inflateInit2 for the coding: gzip (with zlib's auto-detection of a zlib
 * wrapper too, 15 + 32, as some clients label zlib data "gzip"), zlib, or
 * raw deflate (-15). */
static int start(inflater_t *z) {
  int bits = z->coding == ENCODING_GZIP ? 15 + 32
             : zlib_header(z->head)     ? 15
                                        : -15;
  if (inflateInit2(&z->zs, bits) != Z_OK) return -1;
  z->started = 1;
  return 0;
}

/* One inflate call over [in, in + n) into [out, out + cap). */
static int step(inflater_t *z, const unsigned char *in, size_t n, char *out,
                size_t cap, size_t *used, size_t *produced) {
  z->zs.next_in = (Bytef *)(uintptr_t)in;
  z->zs.avail_in = (uInt)(n > (1u << 30) ? (1u << 30) : n);
  z->zs.next_out = (Bytef *)out;
  z->zs.avail_out = (uInt)(cap > (1u << 30) ? (1u << 30) : cap);
  uInt in_before = z->zs.avail_in, out_before = z->zs.avail_out;
  int rc = inflate(&z->zs, Z_NO_FLUSH);
  *used = in_before - z->zs.avail_in;
  *produced = out_before - z->zs.avail_out;
  return rc;
}

inflate_status_t inflater_run(inflater_t *z, const char **in, size_t *in_len,
                              char *out, size_t out_cap, size_t *produced) {
  *produced = 0;
  if (!z->started) {
    if (z->coding == ENCODING_DEFLATE) {
      while (z->nhead < 2 && *in_len > 0) {
        z->head[z->nhead++] = (unsigned char)**in;
        (*in)++;
        (*in_len)--;
      }
      if (z->nhead < 2) return INFLATE_OK;
    }
    if (start(z) != 0) return INFLATE_NOMEM;
  }
  /* the deflate stream's held first bytes go in before the rest */
  while (z->nhead > 0 && out_cap > *produced) {
    size_t used, got;
    int rc = step(z, z->head + (2 - z->nhead), z->nhead, out + *produced,
                  out_cap - *produced, &used, &got);
    z->nhead -= used;
    *produced += got;
    if (rc == Z_STREAM_END) z->finished = 1;
    else if (rc == Z_MEM_ERROR) return INFLATE_NOMEM;
    else if (rc != Z_OK && rc != Z_BUF_ERROR) return INFLATE_CORRUPT;
    if (used == 0 && got == 0) break;
  }
  while (*in_len > 0 || (!z->finished && out_cap > *produced)) {
    if (z->finished) {
      /* more after the end: a next gzip member, else not ours to read */
      if (z->coding != ENCODING_GZIP || inflateReset(&z->zs) != Z_OK)
        return INFLATE_CORRUPT;
      z->finished = 0;
    }
    size_t used, got;
    int rc = step(z, (const unsigned char *)*in, *in_len, out + *produced,
                  out_cap - *produced, &used, &got);
    *in += used;
    *in_len -= used;
    *produced += got;
    if (rc == Z_STREAM_END) z->finished = 1;
    else if (rc == Z_MEM_ERROR) return INFLATE_NOMEM;
    else if (rc == Z_BUF_ERROR) break; /* no progress possible: wants input or room */
    else if (rc != Z_OK) return INFLATE_CORRUPT; /* Z_DATA_ERROR, Z_NEED_DICT */
    if (out_cap == *produced) break; /* full: the caller makes room */
    if (used == 0 && got == 0) break;
  }
  return INFLATE_OK;
}
