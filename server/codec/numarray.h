/* numarray.h -- the fast path for the big numeric arrays of a JSON body.
 *
 * jansson makes one json_t per number; for tensor data that is most of the
 * time a JSON request takes. numarray_extract scans the JSON text once and
 * writes a skeleton: the same document with every numeric array that holds
 * tensor data replaced by a short placeholder string. jansson parses the
 * skeleton (small). The scan parses each number of those arrays on the way
 * to its exact double (fmt_parse_double: bit for bit strtod's); decode.c
 * recognizes a placeholder where tensor data belongs and numarray_fill
 * rounds the array's doubles into the tensor buffer.
 *
 * Only what the scanner accepts exactly is replaced: an array that is the
 * value of "data" or of a tensor field ("input", "grad_output",
 * "residual", "weight", "bias", "running_mean", "running_var", and
 * "mean" and "var" as members of the body's own object; keys
 * compared with their escapes decoded), rectangular, non-empty, holding
 * only JSON numbers within float64's range and the non-finite spellings
 * ("NaN", "Infinity", "-Infinity", "+Infinity", escapes decoded). Bodies
 * whose strings hold the escape \u0001 (the placeholders' mark) get
 * longer placeholders. Anything else -- bad syntax,
 * other values, ragged nesting, numbers too big -- stays in the skeleton
 * for jansson and the slow path, so every error is still reported by one
 * piece of code. */
#ifndef NORMD_NUMARRAY_H
#define NORMD_NUMARRAY_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "cpool.h"
#include "norm.h"

/* One replaced array: its text in the original body (from '[' to ']'),
 * its nesting (rank and shape; [[1,2],[3,4]] has rank 2, shape {2,2}), its
 * element count and their values, each the exact double of its text
 * (bit for bit strtod's), row-major. */
typedef struct {
  const char *text;
  size_t len;
  int rank;
  int64_t shape[NORM_MAX_RANK];
  size_t count;
  const double *values; /* count of them, in numarrays_t.values */
  size_t first;         /* values' index in numarrays_t.values */
} numarray_t;

/* The skeleton of one JSON text and the arrays it replaced. The arrays
 * point into the original text, which must outlive this. Owned by the
 * caller: numarray_free releases it (also after a failed extract). */
typedef struct {
  char *skeleton; /* NUL-terminated; NULL when nothing was replaced */
  size_t skeleton_len;
  numarray_t *arrays;
  size_t count;
  double *values; /* all the arrays' values, one after another */
  int depth; /* the deepest nesting of [ and { in the whole text */
  int mark_len; /* a placeholder's \x01 marks (numarray.c) */
} numarrays_t;

/* Scans json (len bytes, not necessarily NUL-terminated) and fills out,
 * measuring the nesting depth on the way (jansson has no limit of its own:
 * the caller checks it before any parse). When nothing is worth replacing,
 * out->skeleton is NULL and the caller parses json itself. Returns 0, or
 * -1 when out of memory (out is then empty). A long array is parsed on
 * the compute pool (numarray_extract_split, NUMARRAY_SPLIT_BYTES). */
int numarray_extract(const char *json, size_t len, numarrays_t *out);
void numarray_free(numarrays_t *a);

/* How numarray_extract_split scans a long array on a compute pool: its
 * text cut at commas into pieces parsed at once, then joined (numarray.c
 * explains why the answer is the one-pass scan's, whatever the cuts). An
 * array shorter than min_bytes, or a pool of one thread, is scanned in
 * one pass. pool NULL: cpool_shared(). piece_bytes 0: the text in two
 * pieces per thread; else each cut is at the first ',' at or past the
 * next multiple of piece_bytes (the tests place cuts with it). */
typedef struct {
  cpool_t *pool;
  size_t min_bytes;
  size_t piece_bytes;
} numarray_split_t;

/* numarray_extract's threshold: arrays of this much text or more are
 * split. Chosen, not yet measured (the machine it was written on was
 * saturated): at 256 KiB a piece of two per core still parses for ~100 us,
 * far above the pool's hand-off; bench/codec_bench.c compares 1 thread
 * with the pool at 10 MiB. */
enum { NUMARRAY_SPLIT_BYTES = 256 << 10 };

/* numarray_extract with arrays split as `split` says; out is bit for bit
 * the same as with any other split. */
int numarray_extract_split(const char *json, size_t len,
                           const numarray_split_t *split, numarrays_t *out);

/* The split numarray_extract uses from now on (NULL: the default, the
 * shared pool above NUMARRAY_SPLIT_BYTES); for the tests and the bench,
 * which compare one pass with pieces through the whole codec. Not
 * thread-safe: call it while no request is decoded. */
void numarray_split_configure(const numarray_split_t *split);

/* The replaced array that v (a value of the parsed skeleton) stands for,
 * or NULL when v is not a placeholder of a. a may be NULL. */
const numarray_t *numarray_of(const numarrays_t *a, const json_t *v);

/* The count numbers of a into t->data, row-major, rounded to t's dtype:
 * float64 and float32 bit for bit as strtod / strtof read the text (a
 * float32 is the double rounded once more where that is the same, else
 * parsed from the text again), float16 and bfloat16 from the exact double.
 * t->data must hold a->count elements. (Text beyond float64's range is
 * never taken out of the document: jansson refuses it, as for any other
 * number.) */
void numarray_fill(const numarray_t *a, norm_tensor_t *t);

#endif
