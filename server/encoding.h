/* encoding.h -- HTTP content codings (RFC 9110 section 8.4) with zlib:
 * reading a request's Content-Encoding, choosing an answer's coding from
 * Accept-Encoding (section 12.5.3), compressing a finished reply, and a
 * streaming inflater that decodes a request body chunk by chunk as it
 * arrives, so the decompressed size is bounded by the caller while the
 * bytes come in, never after. No libmicrohttpd here: the HTTP files call it
 * and so do the unit tests and the fuzzer. */
#ifndef NORMD_ENCODING_H
#define NORMD_ENCODING_H

#include <stddef.h>

#include "reply.h"

typedef enum {
  ENCODING_IDENTITY,
  ENCODING_GZIP,    /* RFC 1952; "x-gzip" is its alias (RFC 9110 8.4.1.3) */
  ENCODING_DEFLATE, /* the zlib format, RFC 1950 (RFC 9110 8.4.1.2); raw
                       RFC 1951 deflate is accepted too on requests */
} encoding_t;

/* The name on the wire ("gzip", "deflate"), NULL for identity. */
const char *encoding_name(encoding_t e);

/* Reads a Content-Encoding value (a comma-separated list of codings,
 * case-insensitive; identity counts as none). 0 with *out set when it names
 * at most one of gzip, x-gzip, deflate; ENCODING_E_UNKNOWN when a coding is
 * none of those; ENCODING_E_STACKED when it names more than one (normd
 * decodes one coding per body). NULL is identity. */
enum { ENCODING_E_UNKNOWN = -1, ENCODING_E_STACKED = -2 };
int encoding_parse_content(const char *value, encoding_t *out);

/* The coding to answer with for an Accept-Encoding value: gzip or deflate
 * when the client takes one with a q-value above 0 (an explicit entry, or
 * "*"), the higher q winning and gzip on a tie; identity when neither is
 * acceptable, when identity is named (or "*" stands for it) with a higher
 * q than both, or when value is NULL (no
 * header: RFC 9110 says any coding is acceptable, but clients that do not
 * ask would rarely decode it). A value that refuses identity as well
 * (identity;q=0 with nothing else acceptable) still gets identity: normd
 * answers uncompressed rather than 406, as RFC 9110 12.5.3 permits. */
encoding_t encoding_negotiate(const char *accept_encoding);

/* Answers smaller than this (body and binary parts together) are sent
 * uncompressed: a few hundred bytes gain little and gzip adds 18 bytes of
 * framing and a deflate stream's setup. */
enum { ENCODING_MIN_BYTES = 1024 };

/* zlib's compression level for answers; bench/compression_bench.sh shows
 * why 1 (it compresses the JSON answers nearly as well as 6, several times
 * faster). */
enum { ENCODING_LEVEL = 1 };

/* Compresses r's body and binary parts, as one stream, into one new body
 * and releases what the old ones held (parts and `keep`); r->len becomes
 * the compressed size, everything else (status, content type,
 * header_length, which keeps counting the uncompressed JSON header) stays.
 * Returns 0, or -1 when out of memory (r is then unchanged, to be sent
 * uncompressed). */
int encoding_compress_reply(reply_t *r, encoding_t e, int level);

/* A streaming decoder of one request body (gzip or deflate). Create it with
 * the coding, feed it the compressed bytes as they arrive with
 * inflater_run, ask inflater_finished at the end. Not thread-safe; one per
 * request. */
typedef struct inflater inflater_t;

/* NULL when out of memory. e is ENCODING_GZIP or ENCODING_DEFLATE. */
inflater_t *inflater_new(encoding_t e);
void inflater_free(inflater_t *z);

typedef enum {
  INFLATE_OK,      /* progress made; call again with more input or room */
  INFLATE_CORRUPT, /* not a valid stream, or bytes after its end */
  INFLATE_NOMEM,
} inflate_status_t;

/* Decodes from *in (*in_len bytes) into out (out_cap bytes): advances *in
 * and *in_len past what it consumed and sets *produced. Stops when the
 * input is used up or out is full; with out full, call again with more room
 * (zlib may still hold output for input it has consumed). A deflate stream
 * in the zlib format or raw is told apart by its first two bytes (a zlib
 * header is CM 8 with a valid check, RFC 1950 2.2); several gzip members
 * in a row are one body (RFC 1952 2.2), as gzip -d reads them. */
inflate_status_t inflater_run(inflater_t *z, const char **in, size_t *in_len,
                              char *out, size_t out_cap, size_t *produced);

/* The coding it decodes. */
encoding_t inflater_coding(const inflater_t *z);

/* Whether the stream has ended (its last block and checksum are in): a body
 * that ends before that is truncated. */
int inflater_finished(const inflater_t *z);

#endif
