/* check_encode_split.c -- long arrays printed in pieces on the compute pool
 * (server/codec/encode.c, encode_split_t): for random tensors of every
 * dtype (non-finite values, -0, subnormals, random bit patterns) and every
 * piece count, the bytes are one pass's; arrays at the threshold; a whole
 * answer sent as parts (what libmicrohttpd gets as an I/O vector) and its
 * gzip coding read back to the one-pass answer. */
#include <jansson.h>
#include <stdint.h>
#include <string.h>

#include "buf.h"
#include "cpool.h"
#include "encode.h"
#include "encoding.h"
#include "service.h"
#include "testutil.h"

static const encode_split_t one_pass = {.min_numel = SIZE_MAX};

static cpool_t *pool2(void) {
  static cpool_t *pool;
  if (pool == NULL) pool = cpool_start(2);
  ck_assert_ptr_nonnull(pool);
  return pool;
}

static const norm_dtype_t dtypes[] = {NORM_F32, NORM_F64, NORM_F16, NORM_BF16};

/* Random bits, with the special values mixed in. */
static void fill_random(norm_tensor_t *t, size_t n, uint64_t *s) {
  static const double special[] = {NAN, INFINITY, -INFINITY, -0.0, 0.0,
                                   1e-40, 5e-324, 65504, 1e38, -3.5};
  size_t size = norm_dtype_size(t->dtype);
  for (size_t i = 0; i < n; i++) {
    uint64_t r = tu_rand_u64(s);
    if (r % 5 == 0) {
      norm_tensor_set(t, i, special[(r >> 8) % (sizeof special / sizeof special[0])]);
    } else if (r % 5 == 1) {
      memcpy((char *)t->data + i * size, &r, size); /* any bit pattern */
    } else {
      norm_tensor_set(t, i, tu_rand_range(s, -10, 10));
    }
  }
}

/* The text of fn with the split given, as one string (sealed runs
 * joined); *sealed: how many runs it was sealed into. */
typedef void (*print_fn)(buf_t *b, const void *arg);

static char *print_with(const encode_split_t *how, print_fn fn, const void *arg,
                        size_t *len, int *sealed) {
  encode_split_configure(how);
  buf_t b;
  buf_init(&b);
  fn(&b, arg);
  encode_split_configure(NULL);
  *sealed = b.nsealed;
  size_t total = buf_total(&b);
  char *text = buf_steal(&b, len);
  ck_assert_ptr_nonnull(text);
  ck_assert_uint_eq(*len, total);
  return text;
}

static void print_tensor(buf_t *b, const void *arg) { encode_tensor_data(b, arg); }

typedef struct {
  const double *v;
  size_t n;
  norm_dtype_t dtype;
} doubles_arg_t;

static void print_doubles(buf_t *b, const void *arg) {
  const doubles_arg_t *d = arg;
  buf_puts(b, "{\"x\":"); /* text before and after the pieces */
  encode_doubles(b, d->v, d->n, d->dtype);
  buf_puts(b, "}");
}

/* fn in one pass and in 2..ENCODE_MAX_PIECES pieces: the same bytes, and
 * pieces sealed, not copied. */
static void expect_same_text(print_fn fn, const void *arg, size_t n) {
  size_t want_len, got_len;
  int sealed;
  char *want = print_with(&one_pass, fn, arg, &want_len, &sealed);
  ck_assert_int_eq(sealed, 0);
  for (size_t pieces = 2; pieces <= ENCODE_MAX_PIECES; pieces += 3) {
    encode_split_t how = {.pool = pool2(), .min_numel = 0, .pieces = pieces};
    char *got = print_with(&how, fn, arg, &got_len, &sealed);
    ck_assert_msg(got_len == want_len && memcmp(got, want, want_len) == 0,
                  "%zu numbers in %zu pieces:\n%.200s\none pass:\n%.200s", n,
                  pieces, got, want);
    if (n >= 2) ck_assert_int_ge(sealed, 2);
    free(got);
  }
  free(want);
}

START_TEST(test_random_tensors) {
  uint64_t seed = 0xe7c0de00u + (uint64_t)_i;
  for (int round = 0; round < 30; round++) {
    norm_dtype_t dtype = dtypes[round % 4];
    size_t n = 1 + (size_t)(tu_rand_u64(&seed) % (round < 10 ? 20 : 5000));
    void *data = malloc(n * norm_dtype_size(dtype));
    norm_tensor_t t = {.dtype = dtype, .rank = 2, .shape = {1, (int64_t)n}, .data = data};
    fill_random(&t, n, &seed);
    expect_same_text(print_tensor, &t, n);
    free(data);
  }
}
END_TEST

START_TEST(test_random_doubles) {
  uint64_t seed = 0xd0b1e500u + (uint64_t)_i;
  for (int round = 0; round < 20; round++) {
    size_t n = 1 + (size_t)(tu_rand_u64(&seed) % 3000);
    double *v = malloc(n * sizeof *v);
    norm_tensor_t t = {.dtype = NORM_F64, .rank = 1, .shape = {(int64_t)n}, .data = v};
    fill_random(&t, n, &seed);
    doubles_arg_t arg = {v, n, dtypes[round % 4]};
    expect_same_text(print_doubles, &arg, n);
    free(v);
  }
}
END_TEST

/* One number short of the threshold: one pass; at it: pieces. */
START_TEST(test_threshold) {
  enum { MIN = 1000 };
  float data[MIN];
  for (int i = 0; i < MIN; i++) data[i] = (float)i / 7;
  encode_split_t how = {.pool = pool2(), .min_numel = MIN};
  for (int64_t n = MIN - 1; n <= MIN; n++) {
    norm_tensor_t t = {.dtype = NORM_F32, .rank = 1, .shape = {n}, .data = data};
    size_t len_one, len_split;
    int sealed;
    char *want = print_with(&one_pass, print_tensor, &t, &len_one, &sealed);
    char *got = print_with(&how, print_tensor, &t, &len_split, &sealed);
    ck_assert_int_eq(sealed > 0, n == MIN);
    ck_assert(len_one == len_split && memcmp(want, got, len_one) == 0);
    free(want);
    free(got);
  }
}
END_TEST

/* ---- a whole answer -------------------------------------------------------- */

static const limits_t limits = {.max_elements = 1 << 20, .max_depth = 32};

/* A layer-norm answer with output, stats and output_stats of 3000 groups
 * (encode_doubles in pieces too), taken as parts (by_reference). */
static void answer(const char *body, const encode_split_t *how, reply_t *r) {
  encode_split_configure(how);
  service_input_t in = {.op = OP_LAYER, .body = body, .len = strlen(body),
                        .content_type = "application/json", .by_reference = 1};
  service_handle(&in, &limits, r);
  encode_split_configure(NULL);
  ck_assert_int_eq(r->status, 200);
}

static char *join_reply(const reply_t *r, size_t *len) {
  char *all = malloc(r->len + r->parts_len + 1);
  memcpy(all, r->body, r->len);
  size_t at = r->len;
  for (int i = 0; i < r->nparts; i++) {
    memcpy(all + at, r->parts[i].data, r->parts[i].len);
    at += r->parts[i].len;
  }
  *len = at;
  return all;
}

/* gzip's bytes decoded with the daemon's own inflater. */
static char *gunzip(const reply_t *r, size_t want, size_t *len) {
  inflater_t *z = inflater_new(ENCODING_GZIP);
  char *out = malloc(want + 1);
  const char *in = r->body;
  size_t in_len = r->len;
  *len = 0;
  while (in_len > 0) {
    size_t produced;
    ck_assert_int_eq(inflater_run(z, &in, &in_len, out + *len, want + 1 - *len, &produced),
                     INFLATE_OK);
    *len += produced;
  }
  ck_assert(inflater_finished(z));
  inflater_free(z);
  return out;
}

START_TEST(test_answer_as_parts) {
  buf_t b;
  buf_init(&b);
  buf_puts(&b, "{\"return\":[\"output\",\"stats\",\"output_stats\"],"
               "\"input\":{\"shape\":[3000,4],\"data\":[");
  uint64_t seed = 7;
  for (int i = 0; i < 12000; i++)
    buf_printf(&b, "%s%.5f", i ? "," : "", tu_rand_range(&seed, -3, 3));
  buf_puts(&b, "]}}");
  char *body = buf_steal(&b, NULL);
  reply_t want, got;
  memset(&want, 0, sizeof want);
  memset(&got, 0, sizeof got);
  answer(body, &one_pass, &want);
  ck_assert_int_eq(want.nparts, 0);
  encode_split_t how = {.pool = pool2(), .min_numel = 0, .pieces = 4};
  answer(body, &how, &got);
  ck_assert_int_gt(got.nparts, 4); /* output, and the statistics, in pieces */
  ck_assert(!reply_borrows(&got));
  size_t len;
  char *joined = join_reply(&got, &len);
  ck_assert_uint_eq(len, want.len);
  ck_assert(memcmp(joined, want.body, len) == 0);
  /* compressed as one stream over the parts: reads back the same */
  ck_assert_int_eq(encoding_compress_reply(&got, ENCODING_GZIP, 1), 0);
  ck_assert_int_eq(got.nparts, 0);
  size_t plain_len;
  char *plain = gunzip(&got, want.len, &plain_len);
  ck_assert_uint_eq(plain_len, want.len);
  ck_assert(memcmp(plain, want.body, want.len) == 0);
  /* flattened (a caller that takes one body): the same bytes */
  reply_t flat;
  memset(&flat, 0, sizeof flat);
  answer(body, &how, &flat);
  ck_assert_int_eq(reply_flatten(&flat), 0);
  ck_assert(flat.len == want.len && memcmp(flat.body, want.body, want.len) == 0);
  reply_free(&flat);
  free(plain);
  free(joined);
  reply_free(&want);
  reply_free(&got);
  free(body);
}
END_TEST

/* More pieces than a reply's parts hold: the text is joined, the answer
 * the same. */
START_TEST(test_many_arrays) {
  enum { ARRAYS = 12 };
  float data[64];
  for (int i = 0; i < 64; i++) data[i] = (float)i * 0.25f;
  norm_tensor_t t = {.dtype = NORM_F32, .rank = 1, .shape = {64}, .data = data};
  reply_t replies[2];
  for (int k = 0; k < 2; k++) {
    encode_split_t how = {.pool = pool2(), .min_numel = k ? 0 : SIZE_MAX, .pieces = 4};
    encode_split_configure(&how);
    buf_t b;
    buf_init(&b);
    for (int a = 0; a < ARRAYS; a++) encode_tensor_data(&b, &t);
    encode_split_configure(NULL);
    problem_t prob;
    memset(&replies[k], 0, sizeof replies[k]);
    ck_assert_int_eq(encode_finish_json(&b, NULL, &replies[k], &prob), 0);
    ck_assert_int_le(replies[k].nparts, REPLY_MAX_PARTS);
  }
  size_t len;
  char *joined = join_reply(&replies[1], &len);
  ck_assert(len == replies[0].len && memcmp(joined, replies[0].body, len) == 0);
  free(joined);
  reply_free(&replies[0]);
  reply_free(&replies[1]);
}
END_TEST

Suite *encode_split_suite(void) {
  Suite *s = suite_create("encode_split");
  TCase *core = tcase_create("Core");
  tcase_set_timeout(core, 60);
  tcase_add_loop_test(core, test_random_tensors, 0, 4);
  tcase_add_loop_test(core, test_random_doubles, 0, 2);
  tcase_add_test(core, test_threshold);
  tcase_add_test(core, test_answer_as_parts);
  tcase_add_test(core, test_many_arrays);
  suite_add_tcase(s, core);
  return s;
}
