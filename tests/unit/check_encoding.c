/* check_encoding.c -- server/encoding.c and the body inflater of
 * http_body.c: Content-Encoding and Accept-Encoding parsing, replies
 * compressed as one stream (zlib's own inflate is the reference), and the
 * streaming inflater fed in every chunk size, with its size bound, the
 * body's alignment, and corrupt, truncated and trailing streams. */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "encoding.h"
#include "http_internal.h"
#include "suites.h"

/* ---- header parsing ---- */

START_TEST(test_content_encoding) {
  static const struct {
    const char *value;
    int rc;
    encoding_t coding;
  } cases[] = {
      {NULL, 0, ENCODING_IDENTITY},
      {"", 0, ENCODING_IDENTITY},
      {"identity", 0, ENCODING_IDENTITY},
      {"gzip", 0, ENCODING_GZIP},
      {"X-GZIP", 0, ENCODING_GZIP},
      {" deflate ", 0, ENCODING_DEFLATE},
      {"identity, Deflate", 0, ENCODING_DEFLATE},
      {"gzip,identity", 0, ENCODING_GZIP},
      {"br", ENCODING_E_UNKNOWN, ENCODING_IDENTITY},
      {"gzipx", ENCODING_E_UNKNOWN, ENCODING_IDENTITY},
      {"gzip, br", ENCODING_E_UNKNOWN, ENCODING_IDENTITY},
      {"gzip, gzip", ENCODING_E_STACKED, ENCODING_IDENTITY},
      {"deflate, gzip", ENCODING_E_STACKED, ENCODING_IDENTITY},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    encoding_t got;
    int rc = encoding_parse_content(cases[i].value, &got);
    ck_assert_msg(rc == cases[i].rc, "%s: rc %d", cases[i].value, rc);
    if (rc == 0)
      ck_assert_msg(got == cases[i].coding, "%s: %d", cases[i].value, got);
  }
}
END_TEST

START_TEST(test_accept_encoding) {
  static const struct {
    const char *value;
    encoding_t want;
  } cases[] = {
      {NULL, ENCODING_IDENTITY},
      {"", ENCODING_IDENTITY},
      {"gzip", ENCODING_GZIP},
      {"deflate", ENCODING_DEFLATE},
      {"gzip, deflate", ENCODING_GZIP},
      {"deflate, gzip", ENCODING_GZIP}, /* a tie: gzip */
      {"gzip;q=0.5, deflate", ENCODING_DEFLATE},
      {"gzip; q=0.9 , deflate;q=0.95", ENCODING_DEFLATE},
      {"gzip;Q=1.000, deflate;q=1", ENCODING_GZIP},
      {"*", ENCODING_GZIP},
      {"*;q=0.3, gzip;q=0.2", ENCODING_DEFLATE}, /* "*" gives deflate 0.3 */
      {"br, *;q=0.1", ENCODING_GZIP},
      {"gzip;q=0", ENCODING_IDENTITY},
      {"gzip;q=0.000", ENCODING_IDENTITY},
      {"gzip;q=0.001", ENCODING_GZIP},
      {"gzip;q=0.1, identity", ENCODING_IDENTITY},
      {"gzip;q=0.5, identity;q=0.5", ENCODING_GZIP},
      {"gzip;q=0.5, *", ENCODING_DEFLATE}, /* * is deflate's q too */
      {"identity", ENCODING_IDENTITY},
      {"identity;q=0", ENCODING_IDENTITY},        /* nothing else: identity */
      {"identity;q=0, *;q=0", ENCODING_IDENTITY}, /* RFC 9110: not 406 */
      {"br", ENCODING_IDENTITY},
      {"x-gzip", ENCODING_GZIP},
      {"gzip;q=2", ENCODING_IDENTITY},     /* malformed: ignored */
      {"gzip;q=0.5000", ENCODING_IDENTITY}, /* four decimals: malformed */
      {"gzip;level=9", ENCODING_IDENTITY}, /* no such parameter */
      {"gzip;q=0, gzip", ENCODING_GZIP},   /* a repeat: the kinder one */
      {",,gzip,,", ENCODING_GZIP},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    encoding_t got = encoding_negotiate(cases[i].value);
    ck_assert_msg(got == cases[i].want, "\"%s\": got %d, want %d",
                  cases[i].value ? cases[i].value : "(none)", got,
                  cases[i].want);
  }
}
END_TEST

/* ---- compressing replies ---- */

/* n bytes of JSON-like text: compressible, not trivially so */
static char *sample_text(size_t n, unsigned seed) {
  char *s = malloc(n + 1);
  for (size_t i = 0; i < n; i++) {
    seed = seed * 1103515245u + 12345u;
    s[i] = "0123456789.,-e"[(seed >> 16) % 14];
  }
  s[n] = '\0';
  return s;
}

/* zlib's inflate over the whole of data (gzip or zlib wrapper) */
static char *reference_inflate(const char *data, size_t n, size_t *out_len,
                               encoding_t e) {
  z_stream zs;
  memset(&zs, 0, sizeof zs);
  ck_assert_int_eq(inflateInit2(&zs, e == ENCODING_GZIP ? 31 : 15), Z_OK);
  size_t cap = 1 << 22;
  char *out = malloc(cap);
  zs.next_in = (Bytef *)(uintptr_t)data;
  zs.avail_in = (uInt)n;
  zs.next_out = (Bytef *)out;
  zs.avail_out = (uInt)cap;
  ck_assert_int_eq(inflate(&zs, Z_FINISH), Z_STREAM_END);
  *out_len = zs.total_out;
  inflateEnd(&zs);
  return out;
}

START_TEST(test_compress_reply_with_parts) {
  encoding_t e = _i ? ENCODING_DEFLATE : ENCODING_GZIP;
  char *head = sample_text(300, 1), *p1 = sample_text(5000, 2),
       *p2 = sample_text(70000, 3);
  reply_t r = {.status = 200, .content_type = "application/octet-stream",
               .header_length = 300};
  r.body = strdup(head);
  r.len = 300;
  r.parts[0] = (reply_part_t){.data = p1, .len = 5000, .owned = p1};
  r.parts[1] = (reply_part_t){.data = p2, .len = 70000, .owned = p2};
  r.nparts = 2;
  r.parts_len = 75000;
  ck_assert_int_eq(encoding_compress_reply(&r, e, ENCODING_LEVEL), 0);
  ck_assert_int_eq(r.nparts, 0);
  ck_assert_int_eq(r.parts_len, 0);
  ck_assert_int_eq(r.header_length, 300); /* still the uncompressed header's */
  ck_assert_str_eq(r.content_encoding, e == ENCODING_GZIP ? "gzip" : "deflate");
  ck_assert_uint_lt(r.len, 75300 * 3 / 4); /* 14 symbols: ~3.8 bits each */
  size_t n;
  char *plain = reference_inflate(r.body, r.len, &n, e);
  ck_assert_uint_eq(n, 75300);
  ck_assert(memcmp(plain, head, 300) == 0);
  char *again1 = sample_text(5000, 2), *again2 = sample_text(70000, 3);
  ck_assert(memcmp(plain + 300, again1, 5000) == 0);
  ck_assert(memcmp(plain + 5300, again2, 70000) == 0);
  free(plain);
  free(again1);
  free(again2);
  free(head);
  reply_free(&r);
}
END_TEST

/* ---- the streaming inflater, through the body buffer ---- */

enum { WRAP_GZIP, WRAP_ZLIB, WRAP_RAW };

static char *compress_as(int wrap, const char *data, size_t n, size_t *out_len) {
  z_stream zs;
  memset(&zs, 0, sizeof zs);
  int bits = wrap == WRAP_GZIP ? 31 : wrap == WRAP_ZLIB ? 15 : -15;
  ck_assert_int_eq(deflateInit2(&zs, 6, Z_DEFLATED, bits, 8, Z_DEFAULT_STRATEGY),
                   Z_OK);
  size_t cap = deflateBound(&zs, (uLong)n);
  char *out = malloc(cap);
  zs.next_in = (Bytef *)(uintptr_t)data;
  zs.avail_in = (uInt)n;
  zs.next_out = (Bytef *)out;
  zs.avail_out = (uInt)cap;
  ck_assert_int_eq(deflate(&zs, Z_FINISH), Z_STREAM_END);
  *out_len = zs.total_out;
  deflateEnd(&zs);
  return out;
}

/* Feeds z in chunks of `chunk` bytes; returns the last result (0 when all
 * went in). */
static int feed(body_t *b, inflater_t *z, const char *data, size_t n,
                size_t chunk, size_t limit) {
  for (size_t at = 0; at < n; at += chunk) {
    size_t len = n - at < chunk ? n - at : chunk;
    int rc = http__body_inflate(b, z, data + at, len, n, limit);
    if (rc != 0) return rc;
  }
  return 0;
}

static const size_t chunk_sizes[] = {1, 2, 3, 7, 100, 4096, 1 << 20};

/* Every wrapper, every chunk size: the bytes that went in come out, and
 * data + align_at stays BODY_ALIGN-aligned however the buffer grew. */
START_TEST(test_inflate_round_trip) {
  int wrap = _i % 3;
  size_t chunk = chunk_sizes[_i / 3];
  size_t n = 200000;
  char *text = sample_text(n, 7);
  size_t packed_len;
  char *packed = compress_as(wrap, text, n, &packed_len);
  inflater_t *z =
      inflater_new(wrap == WRAP_GZIP ? ENCODING_GZIP : ENCODING_DEFLATE);
  body_t b = {.align_at = 37};
  ck_assert_int_eq(feed(&b, z, packed, packed_len, chunk, n), 0);
  ck_assert(inflater_finished(z));
  ck_assert_uint_eq(b.len, n);
  ck_assert(memcmp(b.data, text, n) == 0);
  ck_assert_uint_eq(((uintptr_t)b.data + b.align_at) % BODY_ALIGN, 0);
  ck_assert_uint_le(b.cap, n + 1);
  http__body_free(&b);
  inflater_free(z);
  free(packed);
  free(text);
}
END_TEST

START_TEST(test_gzip_members) {
  char *text = sample_text(3000, 9);
  size_t l1, l2;
  char *m1 = compress_as(WRAP_GZIP, text, 1000, &l1);
  char *m2 = compress_as(WRAP_GZIP, text + 1000, 2000, &l2);
  char *both = malloc(l1 + l2);
  memcpy(both, m1, l1);
  memcpy(both + l1, m2, l2);
  inflater_t *z = inflater_new(ENCODING_GZIP);
  body_t b = {0};
  ck_assert_int_eq(feed(&b, z, both, l1 + l2, 5, 1 << 20), 0);
  ck_assert(inflater_finished(z));
  ck_assert_uint_eq(b.len, 3000);
  ck_assert(memcmp(b.data, text, 3000) == 0);
  http__body_free(&b);
  inflater_free(z);
  free(both);
  free(m1);
  free(m2);
  free(text);
}
END_TEST

/* A bomb: 8 MiB of zeros, limit 64 KiB. BODY_TOO_LARGE, and the buffer
 * never held more than limit + 1 bytes. */
START_TEST(test_inflate_bound) {
  size_t n = 8 << 20, limit = 64 << 10;
  char *zeros = calloc(1, n);
  size_t packed_len;
  char *packed = compress_as(_i % 3, zeros, n, &packed_len);
  inflater_t *z = inflater_new(_i % 3 == WRAP_GZIP ? ENCODING_GZIP
                                                   : ENCODING_DEFLATE);
  body_t b = {0};
  ck_assert_int_eq(feed(&b, z, packed, packed_len, _i < 3 ? 1 : 4096, limit),
                   BODY_TOO_LARGE);
  ck_assert_uint_le(b.cap, limit + 1);
  ck_assert_uint_eq(b.len, limit + 1);
  http__body_free(&b);
  inflater_free(z);
  /* exactly the limit is fine */
  packed = (free(packed), compress_as(WRAP_GZIP, zeros, limit, &packed_len));
  z = inflater_new(ENCODING_GZIP);
  ck_assert_int_eq(feed(&b, z, packed, packed_len, 999, limit), 0);
  ck_assert(inflater_finished(z));
  ck_assert_uint_eq(b.len, limit);
  http__body_free(&b);
  inflater_free(z);
  free(packed);
  free(zeros);
}
END_TEST

START_TEST(test_inflate_errors) {
  char *text = sample_text(5000, 11);
  size_t len;
  char *packed = compress_as(WRAP_GZIP, text, 5000, &len);
  body_t b = {0};
  /* truncated: all of it in without error, but not finished */
  inflater_t *z = inflater_new(ENCODING_GZIP);
  ck_assert_int_eq(feed(&b, z, packed, len - 4, 13, 1 << 20), 0);
  ck_assert(!inflater_finished(z));
  inflater_free(z);
  http__body_free(&b);
  /* corrupt: the CRC or the data does not check */
  char *bad = malloc(len);
  memcpy(bad, packed, len);
  for (size_t i = 30; i < 40; i++) bad[i] ^= 0x33;
  z = inflater_new(ENCODING_GZIP);
  ck_assert_int_eq(feed(&b, z, bad, len, 64, 1 << 20), BODY_CORRUPT);
  inflater_free(z);
  http__body_free(&b);
  /* not gzip at all */
  z = inflater_new(ENCODING_GZIP);
  ck_assert_int_eq(feed(&b, z, "{\"input\": [1]}", 14, 14, 1 << 20),
                   BODY_CORRUPT);
  inflater_free(z);
  http__body_free(&b);
  /* bytes after a deflate stream's end */
  free(packed);
  packed = compress_as(WRAP_ZLIB, text, 5000, &len);
  char *more = malloc(len + 2);
  memcpy(more, packed, len);
  memcpy(more + len, "{}", 2);
  z = inflater_new(ENCODING_DEFLATE);
  ck_assert_int_eq(feed(&b, z, more, len + 2, 3, 1 << 20), BODY_CORRUPT);
  inflater_free(z);
  http__body_free(&b);
  /* a deflate body of one byte: never finished */
  z = inflater_new(ENCODING_DEFLATE);
  ck_assert_int_eq(feed(&b, z, packed, 1, 1, 1 << 20), 0);
  ck_assert(!inflater_finished(z));
  inflater_free(z);
  http__body_free(&b);
  free(more);
  free(bad);
  free(packed);
  free(text);
}
END_TEST

Suite *encoding_suite(void) {
  Suite *s = suite_create("encoding");
  TCase *core = tcase_create("Core");
  tcase_add_test(core, test_content_encoding);
  tcase_add_test(core, test_accept_encoding);
  tcase_add_loop_test(core, test_compress_reply_with_parts, 0, 2);
  tcase_add_loop_test(core, test_inflate_round_trip, 0,
                      3 * (int)(sizeof chunk_sizes / sizeof chunk_sizes[0]));
  tcase_add_test(core, test_gzip_members);
  suite_add_tcase(s, core);
  TCase *limits = tcase_create("Limits");
  tcase_set_timeout(limits, 30);
  tcase_add_loop_test(limits, test_inflate_bound, 0, 6);
  suite_add_tcase(s, limits);
  TCase *errors = tcase_create("Errors");
  tcase_add_test(errors, test_inflate_errors);
  suite_add_tcase(s, errors);
  return s;
}
