/* encode.h -- the writing half shared by every codec: exact JSON numbers
 * (shortest round-trip text in the precision of a dtype), shapes, arrays,
 * tensors, and the raw little-endian bytes of a binary tail. Everything
 * appends to a buf_t (sticky out-of-memory: check buf_ok once at the end). */
#ifndef NORMD_ENCODE_H
#define NORMD_ENCODE_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "cpool.h"
#include "norm.h"
#include "problem.h"
#include "reply.h"

/* One number as the shortest text that reads back to the same value of
 * dtype; non-finite values as "NaN", "Infinity", "-Infinity" (quoted). */
void encode_number(buf_t *b, double v, norm_dtype_t dtype);
/* [d0,d1,...] */
void encode_shape(buf_t *b, int rank, const int64_t *shape);
/* [v0,v1,...] in the precision of dtype. */
void encode_doubles(buf_t *b, const double *v, size_t n, norm_dtype_t dtype);
/* [x0,x1,...]: every element of t, flat, row-major. */
void encode_tensor_data(buf_t *b, const norm_tensor_t *t);

/* How encode_doubles and encode_tensor_data print a long array: from
 * min_numel numbers on, in `pieces` pieces at once on `pool` (NULL:
 * cpool_shared(); pieces 0: two per thread, at most ENCODE_MAX_PIECES),
 * sealed into the buffer (buf_seal) rather than copied; the bytes are the
 * same as one pass's. */
typedef struct {
  cpool_t *pool;
  size_t min_numel;
  size_t pieces;
} encode_split_t;
enum { ENCODE_MAX_PIECES = 8 };
/* The default threshold, chosen like numarray.h's (not yet measured):
 * ~300 KiB of text, a piece of two per core still ~100 us of printing. */
enum { ENCODE_SPLIT_NUMEL = 32768 };

/* The split used from now on (NULL: the default above); for the tests and
 * the bench. Not thread-safe: call it while nothing is encoded. */
void encode_split_configure(const encode_split_t *split);
/* A JSON string literal with escapes. */
void encode_string(buf_t *b, const char *s);

/* The binary tail of a response: the raw little-endian tensors that follow
 * its header (framed JSON, or .npy), kept as references to the result's
 * buffers (or owned conversions); encode_finish hands them to the reply. */
enum { TAIL_MAX_SEGMENTS = 16 };
typedef struct {
  struct {
    const void *data;
    size_t len;
    void *owned; /* freed by encode_finish / tail_free */
  } seg[TAIL_MAX_SEGMENTS];
  int n;
  size_t len;
  int failed;
} tail_t;

void tail_init(tail_t *t);
void tail_free(tail_t *t);
/* Appends t's raw bytes (its dtype) by reference: t must outlive
 * encode_finish. Returns the bytes appended. */
size_t encode_tensor_bytes(tail_t *tail, const norm_tensor_t *t);
/* Appends n doubles converted to dtype's raw bytes. Returns the bytes. */
size_t encode_doubles_bytes(tail_t *tail, const double *v, size_t n,
                            norm_dtype_t dtype);

/* Elements of t (t is valid: it came through the decoder or compute). */
size_t encode_numel(const norm_tensor_t *t);

/* Finishes a 200 reply of content_type: head's bytes, then, when tail is
 * non-NULL, its tensors as the reply's parts, by reference, not copied
 * (and head's sealed pieces as parts before them, owned by the reply):
 * whatever they point into must outlive the reply (service.c keeps the
 * request and result with it) or the reply must be flattened first. Takes
 * both. Returns 0, or -1 with a 500 problem. */
int encode_finish(buf_t *head, tail_t *tail, const char *content_type,
                  reply_t *out, problem_t *prob);
/* A JSON document (application/json), or with a tail the KServe v2 binary
 * framing: application/octet-stream, the JSON's length in
 * Inference-Header-Content-Length. */
int encode_finish_json(buf_t *json, tail_t *tail, reply_t *out, problem_t *prob);

#endif
