/* fuzz_inflate.c -- the compressed-body path (Content-Encoding: gzip or
 * deflate): the streaming inflater into the body buffer, as http.c feeds it
 * chunk by chunk, under a small max_body_bytes. The first byte selects the
 * coding, the chunk size and the framed-body alignment; the rest is the
 * compressed body. Checked whatever the input: the buffer never holds more
 * than the limit + 1 bytes, data + align_at stays aligned, and a stream
 * that ends cleanly recompresses (encoding_compress_reply) and inflates
 * back to the same bytes. The same bytes, as text, go through the
 * Content-Encoding and Accept-Encoding parsers. */
#include <zlib.h>

#include "encoding.h"
#include "fuzz_common.h"
#include "http_internal.h"

enum { LIMIT = 64 * 1024 };

static const size_t chunks[8] = {1, 2, 5, 64, 511, 4096, 65536, 1 << 20};

static void check_round_trip(const body_t *b, encoding_t e) {
  reply_t r = {.status = 200};
  r.body = malloc(b->len + 1);
  if (r.body == NULL) return;
  memcpy(r.body, b->data, b->len);
  r.len = b->len;
  if (encoding_compress_reply(&r, e, ENCODING_LEVEL) != 0) {
    reply_free(&r);
    return;
  }
  inflater_t *z = inflater_new(e);
  body_t again = {0};
  if (z == NULL) abort();
  if (http__body_inflate(&again, z, r.body, r.len, r.len, LIMIT) != 0 ||
      !inflater_finished(z) || again.len != b->len ||
      (b->len > 0 && memcmp(again.data, b->data, b->len) != 0)) {
    fprintf(stderr, "round trip through %s changed the body\n",
            encoding_name(e));
    abort();
  }
  inflater_free(z);
  http__body_free(&again);
  reply_free(&r);
}

static void parse_headers(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  if (text == NULL) return;
  memcpy(text, data, size);
  text[size] = '\0';
  encoding_t e;
  int rc = encoding_parse_content(text, &e);
  if (rc != 0 && rc != ENCODING_E_UNKNOWN && rc != ENCODING_E_STACKED) abort();
  e = encoding_negotiate(text);
  if (e != ENCODING_IDENTITY && e != ENCODING_GZIP && e != ENCODING_DEFLATE)
    abort();
  free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  parse_headers(data + 1, size - 1);
  uint8_t sel = data[0];
  encoding_t e = sel & 1 ? ENCODING_DEFLATE : ENCODING_GZIP;
  size_t chunk = chunks[(sel >> 1) & 7];
  body_t b = {.align_at = (sel >> 4) * 7};
  inflater_t *z = inflater_new(e);
  if (z == NULL) return 0;
  const char *in = (const char *)data + 1;
  size_t n = size - 1;
  int rc = 0;
  for (size_t at = 0; at < n && rc == 0; at += chunk) {
    size_t len = n - at < chunk ? n - at : chunk;
    rc = http__body_inflate(&b, z, in + at, len, n, LIMIT);
    if (b.cap > (size_t)LIMIT + 1 || b.len > b.cap) {
      fprintf(stderr, "body grew to %zu of %zu bytes past the limit\n", b.len,
              b.cap);
      abort();
    }
    if (b.mem && ((uintptr_t)b.data + b.align_at) % BODY_ALIGN != 0) abort();
  }
  if (rc != 0 && rc != BODY_TOO_LARGE && rc != BODY_CORRUPT) abort();
  if (rc == BODY_TOO_LARGE && b.len != (size_t)LIMIT + 1) abort();
  if (rc == 0 && inflater_finished(z)) check_round_trip(&b, e);
  inflater_free(z);
  http__body_free(&b);
  return 0;
}
