/* check_numarray_split.c -- a long numeric array parsed in pieces on the
 * compute pool (server/codec/numarray.c, numarray_extract_split): for many
 * random arrays (every rank, dtype spelling, whitespace, the exotic
 * spellings the fast path takes) and for arrays with an error placed at,
 * before and after every cut, the result is the one-pass scan's bit for
 * bit -- the same skeleton, shapes and values, and through the whole codec
 * the same tensor or the same problem, naming the same first bad element. */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "buf.h"
#include "cpool.h"
#include "fmt.h"
#include "numarray.h"
#include "service.h"
#include "testutil.h"

static const numarray_split_t one_pass = {.min_bytes = SIZE_MAX};

static cpool_t *pool2(void) {
  static cpool_t *pool;
  if (pool == NULL) pool = cpool_start(2);
  ck_assert_ptr_nonnull(pool);
  return pool;
}

/* Pieces of about piece_bytes (0: two per thread), from the first byte. */
static numarray_split_t pieces_of(size_t piece_bytes) {
  return (numarray_split_t){.pool = pool2(), .min_bytes = 0,
                            .piece_bytes = piece_bytes};
}

/* a and b hold the same skeleton and the same arrays, values bit for bit. */
static void expect_same(const numarrays_t *a, const numarrays_t *b,
                        const char *json, size_t piece_bytes) {
  ck_assert_msg(a->count == b->count, "piece_bytes %zu: %zu arrays, one pass %zu: %.200s",
                piece_bytes, b->count, a->count, json);
  ck_assert_int_eq(a->depth, b->depth);
  ck_assert_int_eq(a->mark_len, b->mark_len);
  ck_assert_uint_eq(a->skeleton_len, b->skeleton_len);
  if (a->skeleton != NULL) {
    ck_assert_ptr_nonnull(b->skeleton);
    ck_assert(memcmp(a->skeleton, b->skeleton, a->skeleton_len + 1) == 0);
  } else {
    ck_assert_ptr_null(b->skeleton);
  }
  for (size_t i = 0; i < a->count; i++) {
    const numarray_t *x = &a->arrays[i], *y = &b->arrays[i];
    ck_assert_ptr_eq(x->text, y->text);
    ck_assert_uint_eq(x->len, y->len);
    ck_assert_int_eq(x->rank, y->rank);
    for (int d = 0; d < x->rank; d++) ck_assert_int_eq(x->shape[d], y->shape[d]);
    ck_assert_uint_eq(x->count, y->count);
    ck_assert_uint_eq(x->first, y->first);
    ck_assert(memcmp(x->values, y->values, x->count * sizeof *x->values) == 0);
  }
}

/* json extracted in one pass and in pieces of every size in sizes[]: the
 * same answer each time. Returns whether the one pass took an array. */
static int check_splits(const char *json, size_t len, const size_t *sizes,
                        size_t nsizes) {
  numarrays_t want;
  ck_assert_int_eq(numarray_extract_split(json, len, &one_pass, &want), 0);
  for (size_t k = 0; k < nsizes; k++) {
    numarray_split_t split = pieces_of(sizes[k]);
    numarrays_t got;
    ck_assert_int_eq(numarray_extract_split(json, len, &split, &got), 0);
    expect_same(&want, &got, json, sizes[k]);
    numarray_free(&got);
  }
  int taken = want.count > 0;
  numarray_free(&want);
  return taken;
}

/* ---- random bodies --------------------------------------------------------- */

static size_t pick(uint64_t *s, size_t n) { return (size_t)(tu_rand_u64(s) % n); }

static void put_ws(buf_t *b, uint64_t *s) {
  static const char *const blanks[] = {"", "", "", " ", "\n", "\t", "\r\n  "};
  buf_puts(b, blanks[pick(s, sizeof blanks / sizeof blanks[0])]);
}

/* One element in one of the spellings the fast path takes. */
static void put_leaf(buf_t *b, uint64_t *s) {
  static const char *const odd[] = {
      "\"NaN\"", "\"Infinity\"", "\"-Infinity\"", "\"+Infinity\"",
      "\"\\u004eaN\"", "\"-Infinit\\u0079\"", "-0", "0", "1E+5", "-2.5e-3",
      "1e-400", "0.1000000000000000055511151231257827", "65504", "65520",
      "3.4028235677973366e38", "1.00000005960464477539062500001",
      "123456789012345678901234567890", "4.9e-324", "-1.5E3"};
  char text[FMT_NUMBER_MAX];
  double v = tu_rand_range(s, -4, 4);
  switch (pick(s, 6)) {
  case 0: buf_puts(b, odd[pick(s, sizeof odd / sizeof odd[0])]); break;
  case 1: buf_printf(b, "%.6f", v); break;
  case 2: buf_append(b, text, (size_t)fmt_float((float)v, text)); break;
  case 3: buf_printf(b, "%.17g", v); break;
  case 4: buf_printf(b, "%lld", (long long)(v * 1000)); break;
  default: buf_printf(b, "%.3e", v * 1e10); break;
  }
}

/* A nested array of the given shape, row-major. */
static void put_array(buf_t *b, uint64_t *s, int rank, const int64_t *shape) {
  buf_putc(b, '[');
  for (int64_t i = 0; i < shape[0]; i++) {
    if (i) buf_putc(b, ',');
    put_ws(b, s);
    if (rank == 1) put_leaf(b, s);
    else put_array(b, s, rank - 1, shape + 1);
    put_ws(b, s);
  }
  buf_putc(b, ']');
}

/* A request with one or two tensor arrays of random shape (the nested form
 * for a bare "input", flat "data" of a tensor object). */
static char *random_body(uint64_t *s, size_t *len) {
  buf_t b;
  buf_init(&b);
  int rank = 1 + (int)pick(s, 4);
  int64_t shape[4];
  for (int d = 0; d < rank; d++) shape[d] = 1 + (int64_t)pick(s, rank == 1 ? 300 : 9);
  static const char *const dtypes[] = {"float32", "float64", "float16", "bfloat16"};
  if (pick(s, 2)) {
    buf_puts(&b, "{\"input\":");
    put_ws(&b, s);
    put_array(&b, s, rank, shape);
  } else {
    int64_t numel = 1;
    for (int d = 0; d < rank; d++) numel *= shape[d];
    buf_printf(&b, "{\"input\":{\"dtype\":\"%s\",\"d\\u0061ta\": ",
               dtypes[pick(s, 4)]);
    put_array(&b, s, 1, &numel);
    buf_puts(&b, "}");
  }
  if (pick(s, 2)) {
    int64_t n = 1 + (int64_t)pick(s, 40);
    buf_puts(&b, ", \"weight\" :");
    put_array(&b, s, 1, &n);
  }
  buf_puts(&b, ",\"eps\":1e-5}");
  return buf_steal(&b, len);
}

static const size_t sweep[] = {0, 1, 2, 3, 5, 7, 8, 13, 16, 31, 64, 100, 257, 1000};
#define NSWEEP (sizeof sweep / sizeof sweep[0])

START_TEST(test_random_arrays) {
  uint64_t seed = 0x5eed0001u + (uint64_t)_i;
  for (int round = 0; round < 40; round++) {
    size_t len;
    char *json = random_body(&seed, &len);
    ck_assert_ptr_nonnull(json);
    ck_assert_msg(check_splits(json, len, sweep, NSWEEP), "not taken: %.300s", json);
    free(json);
  }
}
END_TEST

/* Each mutation breaks the array (or leaves it to jansson); placed at every
 * byte near every comma, with cuts at those commas. */
static const char *const breakers[] = {
    ",", ",,", "]", "[", "]]", "[[", "true", "\"Na,N\"", "\"[\"", "\"]\"",
    "01", "1.", "1e", "1e999", "NaN", "\"x", "\"", "-", " ] , [ ", "{}", "\\"};

START_TEST(test_errors_at_cuts) {
  uint64_t seed = 0xbad5eed0u + (uint64_t)_i;
  for (int round = 0; round < 3; round++) {
    size_t len;
    char *json = random_body(&seed, &len);
    /* insert each breaker right before, at and right after commas */
    size_t checked = 0;
    for (size_t at = 0; at < len && checked < 60; at++) {
      if (json[at] != ',' || pick(&seed, 3) != 0) continue;
      checked++;
      for (int shift = -1; shift <= 1; shift++) {
        size_t where = (size_t)((ptrdiff_t)at + shift);
        const char *brk = breakers[pick(&seed, sizeof breakers / sizeof breakers[0])];
        size_t n = strlen(brk);
        char *bad = malloc(len + n + 1);
        memcpy(bad, json, where);
        memcpy(bad + where, brk, n);
        memcpy(bad + where + n, json + where, len - where + 1);
        /* cuts right at, before and after the mutation too */
        size_t near[] = {0, 1, 2, 3, 4, 6, where, where + 1, where > 1 ? where - 1 : 1,
                         where / 2, where / 3 + 1};
        check_splits(bad, len + n, near, sizeof near / sizeof near[0]);
        free(bad);
      }
    }
    free(json);
  }
}
END_TEST

/* Commas replaced and brackets moved: ragged rows, leaves at two depths,
 * an array that ends early, at every cut. */
START_TEST(test_structure_errors) {
  const char *bodies[] = {
      "{\"input\":[[1,2],[3,4],[5,6,7],[8,9]]}",
      "{\"input\":[[1,2],[3,4],[5],[8,9]]}",
      "{\"input\":[[1,2],[3,[4]],[5,6]]}",
      "{\"input\":[[1,2],3,[5,6]]}",
      "{\"input\":[[1,2]],[3,4]]}",
      "{\"input\":[[1,2],[3,4]]]}",
      "{\"input\":[[1,2],[3,4]}",
      "{\"input\":[[[1,2],[3,4]],[[5,6]]]}",
      "{\"input\":[[[1,2],[3,4]],[[5,6],[7,8]],[9,10]]}",
      "{\"input\":[[1,2],[],[3,4]]}",
      "{\"input\":[[1,2],[3,4],]}",
      "{\"input\":[1,2,3,\"NaN\",\"Na\\u004e\"]}",
      "{\"input\":[1,2,3,4],\"weight\":[1,2,[3]],\"bias\":[1,2]}",
      "{\"input\":[[1,2],[3,4]],\"weight\":[[1],[2]]}",
      "{\"x\":\"[[[\",\"input\":[1,2,3],\"y\":\"]]]\"}",
      "{\"input\":[[[[[[[[[1]]]]]]]]]}",
      "{\"input\":[[[[[[[[1]]]]]]]]}",
      "{\"input\":[1,2,3,4]",
      "{\"input\":[1,2,3,4",
      "{\"input\":[1,2,3,4,\"",
  };
  size_t all[64];
  for (size_t i = 0; i < 64; i++) all[i] = i;
  for (size_t k = 0; k < sizeof bodies / sizeof bodies[0]; k++)
    check_splits(bodies[k], strlen(bodies[k]), all, 64);
}
END_TEST

/* Arrays exactly at the threshold and one byte short of it: split and one
 * pass, the same answer. */
START_TEST(test_threshold) {
  buf_t b;
  buf_init(&b);
  buf_puts(&b, "{\"input\":");
  const char *start = NULL;
  buf_puts(&b, "[1");
  while (b.len < 5000) buf_puts(&b, ",2.5");
  buf_puts(&b, "]}");
  size_t len;
  char *json = buf_steal(&b, &len);
  start = strchr(json, '[');
  size_t array_len = (size_t)(strrchr(json, ']') - start) + 1;
  numarrays_t want;
  ck_assert_int_eq(numarray_extract_split(json, len, &one_pass, &want), 0);
  for (size_t min = array_len - 1; min <= array_len + 1; min++) {
    numarray_split_t split = {.pool = pool2(), .min_bytes = min};
    numarrays_t got;
    ck_assert_int_eq(numarray_extract_split(json, len, &split, &got), 0);
    expect_same(&want, &got, json, min);
    numarray_free(&got);
  }
  numarray_free(&want);
  free(json);
}
END_TEST

/* ---- through the whole codec ---------------------------------------------- */

static const limits_t limits = {.max_elements = 1 << 22, .max_depth = 32};

/* The reply of a layer-norm request, with the process's split set. */
static void run(const char *body, size_t len, const numarray_split_t *split,
                reply_t *r) {
  numarray_split_configure(split);
  service_input_t in = {.op = OP_LAYER, .body = body, .len = len,
                        .content_type = "application/json"};
  memset(r, 0, sizeof *r);
  service_handle(&in, &limits, r);
  numarray_split_configure(NULL);
  ck_assert_int_eq(reply_flatten(r), 0);
}

/* One pass and pieces answer json with the same bytes (a problem without
 * an instance: service_handle gives no request id). */
static void expect_same_reply(const char *json, size_t len, size_t piece_bytes) {
  reply_t want, got;
  run(json, len, &one_pass, &want);
  numarray_split_t split = pieces_of(piece_bytes);
  run(json, len, &split, &got);
  ck_assert_int_eq(got.status, want.status);
  ck_assert_msg(got.len == want.len && memcmp(got.body, want.body, got.len) == 0,
                "piece_bytes %zu:\n%.300s\none pass:\n%.300s", piece_bytes,
                got.body, want.body);
  reply_free(&want);
  reply_free(&got);
}

START_TEST(test_codec_same_answer) {
  uint64_t seed = 0xc0dec0u + (uint64_t)_i;
  for (int round = 0; round < 10; round++) {
    size_t len;
    char *json = random_body(&seed, &len);
    expect_same_reply(json, len, sweep[pick(&seed, NSWEEP)]);
    free(json);
  }
}
END_TEST

/* A bad element in a long array, at and next to cuts: the problem names
 * it, the same as one pass. */
START_TEST(test_codec_first_bad_element) {
  enum { N = 4000 };
  static const char *const bad[] = {"true", "null", "\"nan\"", "[1]", "{}", "1e999"};
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    for (int where = 1; where < N; where += 997) {
      buf_t b;
      buf_init(&b);
      buf_puts(&b, "{\"input\":{\"shape\":[4,1000],\"data\":[");
      for (int i = 0; i < N; i++) {
        if (i) buf_putc(&b, ',');
        if (i == where || i == where + 2) buf_puts(&b, bad[k]);
        else buf_printf(&b, "%d.25", i % 10);
      }
      buf_puts(&b, "]}}");
      size_t len;
      char *json = buf_steal(&b, &len);
      for (size_t piece = 1; piece < 12; piece += 5) expect_same_reply(json, len, piece);
      /* the cut right at the bad element's comma */
      reply_t r;
      numarray_split_t split = pieces_of(0);
      run(json, len, &split, &r);
      ck_assert_int_ne(r.status, 200);
      char name[32];
      snprintf(name, sizeof name, "data[%d]", where);
      ck_assert_msg(strstr(r.body, name) != NULL,
                    "%s at %d: %.300s", bad[k], where, r.body);
      reply_free(&r);
      free(json);
    }
  }
}
END_TEST

/* The default split of numarray_extract: a body of twice the threshold is
 * read on the shared pool, the same as one pass. */
START_TEST(test_default_threshold) {
  buf_t b;
  buf_init(&b);
  size_t n = NUMARRAY_SPLIT_BYTES / 2; /* 4 bytes or more each: twice the threshold */
  buf_printf(&b, "{\"input\":{\"shape\":[%zu],\"dtype\":\"float16\",\"data\":[0.5", n);
  for (size_t i = 1; i < n; i++) buf_printf(&b, ",%zu.%zu", i % 97, i % 13);
  buf_puts(&b, "]}}");
  size_t len;
  char *json = buf_steal(&b, &len);
  numarrays_t want, got;
  ck_assert_int_eq(numarray_extract_split(json, len, &one_pass, &want), 0);
  ck_assert_int_eq(numarray_extract(json, len, &got), 0);
  expect_same(&want, &got, "(long)", 0);
  ck_assert_uint_eq(got.arrays[0].count, n);
  numarray_free(&want);
  numarray_free(&got);
  reply_t r1, r2;
  run(json, len, &one_pass, &r1);
  run(json, len, NULL, &r2);
  ck_assert_int_eq(r1.status, 200);
  ck_assert(r1.len == r2.len && memcmp(r1.body, r2.body, r1.len) == 0);
  reply_free(&r1);
  reply_free(&r2);
  free(json);
}
END_TEST

Suite *numarray_split_suite(void) {
  Suite *s = suite_create("numarray_split");
  TCase *core = tcase_create("Core");
  tcase_set_timeout(core, 60);
  tcase_add_loop_test(core, test_random_arrays, 0, 8);
  tcase_add_test(core, test_threshold);
  tcase_add_test(core, test_default_threshold);
  tcase_add_loop_test(core, test_codec_same_answer, 0, 4);
  suite_add_tcase(s, core);
  TCase *errors = tcase_create("Errors");
  tcase_set_timeout(errors, 60);
  tcase_add_loop_test(errors, test_errors_at_cuts, 0, 6);
  tcase_add_test(errors, test_structure_errors);
  tcase_add_test(errors, test_codec_first_bad_element);
  suite_add_tcase(s, errors);
  return s;
}
