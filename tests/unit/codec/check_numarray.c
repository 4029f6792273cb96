/* check_numarray.c -- the JSON numeric-array fast path (server/codec/numarray.c):
 * which arrays the scanner takes out of the text and which it leaves to
 * jansson, the skeleton it writes, and numbers parsed into tensors bit for
 * bit as strtof / strtod read them (float16 / bfloat16: as fmt_parse_f16 /
 * fmt_parse_bf16, midpoint texts included). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "fmt.h"
#include "numarray.h"
#include "testutil.h"

/* Extracts json; the caller frees a. */
static void extract(const char *json, numarrays_t *a) {
  ck_assert_int_eq(numarray_extract(json, strlen(json), a), 0);
}

/* The one placeholder of json's skeleton must be taken out, or none. */
static void expect_taken(const char *json, size_t count, int rank) {
  numarrays_t a;
  extract(json, &a);
  ck_assert_msg(a.count == 1, "not taken: %s", json);
  ck_assert_uint_eq(a.arrays[0].count, count);
  ck_assert_int_eq(a.arrays[0].rank, rank);
  numarray_free(&a);
}

static void expect_left(const char *json) {
  numarrays_t a;
  extract(json, &a);
  ck_assert_msg(a.count == 0 && a.skeleton == NULL, "taken: %s", json);
  numarray_free(&a);
}

#define ROW16 "[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]"

START_TEST(test_skeleton) {
  const char *json = "{\"input\": {\"shape\": [2, 16], \"data\": [" ROW16 ",\n"
                     ROW16 "]}, \"weight\": " ROW16 ", \"eps\": 1e-5}";
  numarrays_t a;
  extract(json, &a);
  ck_assert_uint_eq(a.count, 2);
  ck_assert_str_eq(a.skeleton, "{\"input\": {\"shape\": [2, 16], \"data\": "
                               "\"\\u00010\"}, \"weight\": \"\\u00011\", "
                               "\"eps\": 1e-5}");
  ck_assert_uint_eq(a.skeleton_len, strlen(a.skeleton));
  ck_assert_int_eq(a.depth, 4); /* { "input": { "data": [[ */
  ck_assert_int_eq(a.arrays[0].rank, 2);
  ck_assert_int_eq(a.arrays[0].shape[0], 2);
  ck_assert_int_eq(a.arrays[0].shape[1], 16);
  ck_assert_uint_eq(a.arrays[0].count, 32);
  ck_assert_int_eq(a.arrays[1].rank, 1);
  ck_assert_uint_eq(a.arrays[1].count, 16);
  /* The skeleton parses, and its placeholders lead back to the arrays. */
  json_t *doc = json_loads(a.skeleton, 0, NULL);
  ck_assert_ptr_nonnull(doc);
  const json_t *data = json_object_get(json_object_get(doc, "input"), "data");
  ck_assert_ptr_eq(numarray_of(&a, data), &a.arrays[0]);
  ck_assert_ptr_eq(numarray_of(&a, json_object_get(doc, "weight")), &a.arrays[1]);
  ck_assert_ptr_null(numarray_of(&a, json_object_get(doc, "eps")));
  ck_assert_ptr_null(numarray_of(NULL, data));
  json_t *fake = json_string("\x01" "7");
  ck_assert_ptr_null(numarray_of(&a, fake));
  json_decref(fake);
  json_decref(doc);
  numarray_free(&a);
}
END_TEST

/* Placeholders longer than the arrays they replace: the skeleton grows. */
START_TEST(test_skeleton_longer_than_body) {
  const char *json = "{\"input\":[[1]],\"weight\":[2],\"bias\":[3],\"eps\":0}";
  numarrays_t a;
  extract(json, &a);
  ck_assert_uint_eq(a.count, 3);
  ck_assert_str_eq(a.skeleton, "{\"input\":\"\\u00010\",\"weight\":\"\\u00011\","
                               "\"bias\":\"\\u00012\",\"eps\":0}");
  ck_assert_uint_eq(a.skeleton_len, strlen(a.skeleton));
  ck_assert(a.skeleton_len > strlen(json));
  ck_assert(a.arrays[0].values[0] == 1 && a.arrays[1].values[0] == 2 &&
            a.arrays[2].values[0] == 3);
  numarray_free(&a);
}
END_TEST

START_TEST(test_taken) {
  expect_taken("{\"data\":[1,2,3]}", 3, 1); /* short: the placeholder is longer */
  expect_taken("{\"weight\":[7]}", 1, 1);
  expect_taken("{\"data\":" ROW16 "}", 16, 1);
  expect_taken("{\"input\":[[-0.5e+3,1E-2,0,-0],[\"NaN\",\"Infinity\",\"-Infinity\","
               "\"+Infinity\"]]}", 8, 2);
  expect_taken("{\"running_var\":[ 1 , 2 , 3 , 4 , 5 , 6 , 7 , 8 , 9 , 10 ]}", 10, 1);
  expect_taken("{\"inputs\":[{\"name\":\"input\",\"data\":" ROW16 "}]}", 16, 1);
  expect_taken("{\"input\":[[[[1,2,3,4,5,6,7,8,9]]],[[[1,2,3,4,5,6,7,8,9]]]]}", 18, 4);
  /* Keys and spellings are compared as jansson reads them. */
  expect_taken("{\"d\\u0061ta\":" ROW16 "}", 16, 1);
  expect_taken("{\"\\u0069nput\":" ROW16 "}", 16, 1);
  expect_taken("{\"data\":[\"\\u004eaN\",\"-Infinit\\u0079\",1]}", 3, 1);
  expect_left("{\"d\\u00e1ta\":" ROW16 "}"); /* not ASCII: not a tensor key */
  expect_taken("{\"grad_output\":" ROW16 "}", 16, 1);
  expect_taken("{\"residual\":" ROW16 "}", 16, 1);
  expect_taken("{\"input\":{},\"mean\":" ROW16 "}", 16, 1); /* batch norm's name */
  expect_left("{\"data\":[\"N\\u0000aN\",1]}");
  /* A run of numbers (each right after a ',') ends at whitespace, a
   * bracket or a string, and goes on after them. */
  expect_taken("{\"data\":[[-1,2,-3,\"NaN\",-5],[6, -7,8 ,9,-1e1]]}", 10, 2);
  expect_taken("{\"data\":[-0.000123,0e5,-0,12345678901234567890,0.12345678,1]}", 6, 1);
  /* ... and after ", " too (json.dumps' separator); two spaces, or a
   * space before the ',', end it */
  expect_taken("{\"data\": [[0.5, -1.25, 3e2, 4, \"NaN\", 6], [7,  8 , 9, -0, 1,2]]}", 12, 2);
}
END_TEST

/* A client string holding the mark \u0001 (here three in a row, and one
 * that looks like a placeholder of the usual length) does not turn the
 * path off: the placeholders get one mark more than the longest run, so
 * no string of the client's can be taken for one. */
START_TEST(test_marked_strings) {
  const char *json = "{\"id\":\"\\u0001\\u0001\\u00010\",\"x\":\"\\u00010\","
                     "\"data\":[1,2]}";
  numarrays_t a;
  extract(json, &a);
  ck_assert_uint_eq(a.count, 1);
  ck_assert_int_eq(a.mark_len, 4);
  ck_assert_str_eq(a.skeleton, "{\"id\":\"\\u0001\\u0001\\u00010\",\"x\":\"\\u00010\","
                               "\"data\":\"\\u0001\\u0001\\u0001\\u00010\"}");
  json_t *doc = json_loads(a.skeleton, 0, NULL);
  ck_assert_ptr_nonnull(doc);
  ck_assert_ptr_eq(numarray_of(&a, json_object_get(doc, "data")), &a.arrays[0]);
  ck_assert_ptr_null(numarray_of(&a, json_object_get(doc, "id")));
  ck_assert_ptr_null(numarray_of(&a, json_object_get(doc, "x")));
  json_decref(doc);
  numarray_free(&a);
  /* A lone mark with no array to take: no skeleton, as for any body. */
  expect_left("{\"x\":\"\\u0001\"}");
}
END_TEST

START_TEST(test_left_to_jansson) {
  expect_left("{\"shape\":" ROW16 "}");                      /* not tensor data */
  expect_left("{\"parts\":[{\"mean\":" ROW16 "}]}");
  expect_left("{\"data\":[[1,2,3,4,5,6,7,8],[1,2,3,4,5,6,7]]}"); /* ragged */
  expect_left("{\"data\":[[1,2,3,4,5,6,7,8],9,10,11,12,13,14,15]}");
  expect_left("{\"data\":[[],[],[],[],[],[],[],[],[],[],[],[],[]]}");
  expect_left("{\"data\":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,015]}");
  expect_left("{\"data\":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15.]}");
  expect_left("{\"data\":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,.15]}");
  expect_left("{\"data\":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,+15]}");
  expect_left("{\"data\":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,1e]}");
  expect_left("{\"data\":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,]}");
  expect_left("{\"data\":[1,2,3,4,5,6,7,8,9,10,11,12,13,14 15]}");
  expect_left("{\"data\":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,true]}");
  expect_left("{\"data\":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,\"nan\"]}");
  expect_left("{\"data\":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15"); /* unterminated */
  expect_left("{\"data\":[[[[[[[[[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]]]]]]]]]}");
  expect_left("{\"data\":\"" ROW16 "\"}"); /* inside a string */
  /* in a run: '/' and '.' pass its test for a number's start, the parse
   * refuses them; a number past float64's range mid-run */
  expect_left("{\"data\":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,/15]}");
  expect_left("{\"data\":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,-]}");
  expect_left("{\"data\":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,-.5]}");
  expect_left("{\"data\":[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, -]}");
  expect_left("{\"data\":[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 015]}");
  expect_left("{\"data\":[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, ]}");
  expect_left("{\"data\":[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,]}");
  expect_left("{\"data\":[1,1e999,3,4,5,6,7,8,9,10,11,12,13,14,15]}");
  expect_left("{\"data\" " ROW16 "}");      /* no colon: not a key */
}
END_TEST

/* Random float32 and float64 values in the spellings clients use. */
static void random_number_text(uint64_t *state, char *buf, size_t size, int f64) {
  uint64_t bits = tu_rand_u64(state);
  double v;
  if (f64) {
    memcpy(&v, &bits, 8);
  } else {
    uint32_t b32 = (uint32_t)bits;
    float f;
    memcpy(&f, &b32, 4);
    v = f;
  }
  if (!isfinite(v)) v = (double)(bits % 2000001) / 1000 - 1000;
  static const char *const formats[] = {"%.17g", "%.9g", "%.6g", "%.3e", "%.4f", "%.12E"};
  int format = (int)((bits >> 40) % 6);
  if (format == 4 && fabs(v) > 1e15) format = 0; /* %f of 1e300: 300 digits */
  snprintf(buf, size, formats[format], v);
}

enum { FILL_N = 20000 };
static char fill_text[FILL_N * 40 + 64];
static char fill_numbers[FILL_N][40];

/* Extracts {"data": [fill_numbers...]} and fills a dtype tensor from it:
 * every element must be bit for bit strtof's (float32), strtod's (float64)
 * or fmt_parse_f16's / fmt_parse_bf16's (float16, bfloat16; check_fmt_half.c
 * holds those to the exact decimal). */
static void fill_and_compare(norm_dtype_t dtype, int n) {
  size_t len = (size_t)sprintf(fill_text, "{\"data\":[");
  for (int i = 0; i < n; i++)
    len += (size_t)sprintf(fill_text + len, "%s%s", i ? "," : "", fill_numbers[i]);
  sprintf(fill_text + len, "]}");
  numarrays_t a;
  extract(fill_text, &a);
  ck_assert_uint_eq(a.count, 1);
  ck_assert_uint_eq(a.arrays[0].count, (size_t)n);
  norm_tensor_t t = tu_tensor(dtype, 1, (int64_t)n);
  numarray_fill(&a.arrays[0], &t);
  for (int i = 0; i < n; i++) {
    int same;
    if (dtype == NORM_F32) {
      float want = strtof(fill_numbers[i], NULL);
      same = memcmp(&want, (float *)t.data + i, 4) == 0;
    } else if (dtype == NORM_F64) {
      double want = strtod(fill_numbers[i], NULL);
      same = memcmp(&want, (double *)t.data + i, 8) == 0;
    } else {
      uint16_t want = 0;
      size_t n = strlen(fill_numbers[i]);
      if (dtype == NORM_F16) fmt_parse_f16(fill_numbers[i], n, &want);
      else fmt_parse_bf16(fill_numbers[i], n, &want);
      same = want == ((uint16_t *)t.data)[i];
    }
    if (!same) ck_abort_msg("%s: element %d (%s) differs", norm_dtype_name(dtype), i,
                            fill_numbers[i]);
  }
  tu_tensor_free(&t);
  numarray_free(&a);
}

/* Random bit patterns: float32 ones include subnormals, so the float32
 * fill re-reads these arrays' text. */
static void check_fill(norm_dtype_t dtype) {
  uint64_t state = 12345 + dtype;
  for (int i = 0; i < FILL_N; i++)
    random_number_text(&state, fill_numbers[i], sizeof fill_numbers[i],
                       dtype == NORM_F64);
  fill_and_compare(dtype, FILL_N);
}

/* float32 rounded from the exact doubles: normal floats only, and the texts
 * where rounding twice (to double, then to float) goes wrong -- a text
 * just off a midpoint between two floats whose double is that midpoint. */
static void check_fill_float_via_double(void) {
  uint64_t state = 777;
  for (int i = 0; i < FILL_N; i++) {
    uint32_t b32 = (uint32_t)tu_rand_u64(&state);
    b32 = (b32 & 0x807FFFFFu) | (1 + b32 % 254u) << 23; /* a normal float */
    float f;
    memcpy(&f, &b32, 4);
    random_number_text(&state, fill_numbers[i], sizeof fill_numbers[i], 0);
    if (i % 3 == 0) snprintf(fill_numbers[i], sizeof fill_numbers[i], "%.9g", f);
  }
  fill_and_compare(NORM_F32, FILL_N); /* no midpoint in these: all via doubles */
  /* 1 + 2^-24 is the midpoint between 1 and the next float; a text just
   * above it reads as that double, but strtof rounds it up. */
  static const char *const traps[] = {
      "1.000000059604644775390625",  /* the midpoint itself: ties to even */
      "1.0000000596046448",          /* just above, its double the midpoint */
      "1.0000000596046447",          /* just below */
      "6958044373267251e1",          /* a known double-rounding case */
      "16777217",                    /* 2^24 + 1, a midpoint */
      "1e-40", "-1.401298464324817e-45", "7.006492321624085e-46", /* subnormal */
      "7.0064923216240854e-46",      /* just above 2^-150, its double 2^-150 */
      "2.1019476964872256e-45",      /* just below 3 x 2^-150, likewise */
      "1.1754942e-38",               /* just below the normal floats */
      "340282356779733661637539395458142568448", /* the overflow midpoint */
  };
  int n = (int)(sizeof traps / sizeof traps[0]);
  /* alone among normal ones, in each lane of the fill's four-wide steps
   * (36-39) and in its scalar tail (40-42 of 43) */
  for (int k = 0; k < n; k++) {
    for (int at = 36; at < 43; at++) {
      for (int i = 0; i < 43; i++) snprintf(fill_numbers[i], 40, "%d.5", i);
      snprintf(fill_numbers[at], 40, "%s", traps[k]);
      fill_and_compare(NORM_F32, 43);
    }
  }
}

/* float16 and bfloat16 from texts whose double is a midpoint of the dtype
 * but which are not that midpoint: rounding the double again would tie to
 * even, the text says otherwise (the last element of 41, after ones whose
 * doubles serve). */
static void check_fill_half_midpoints(void) {
  static const struct {
    norm_dtype_t dtype;
    const char *text;
    uint16_t want;
  } traps[] = {
      {NORM_F16, "1.00048828125", 0x3C00}, /* 1 + 2^-11: a tie, to even */
      {NORM_F16, "1.00048828125000000000000000001", 0x3C01},
      {NORM_F16, "-1.00048828125000000000000000001", 0xBC01},
      {NORM_F16, "1.00146484374999999999999999999", 0x3C01},
      {NORM_F16, "65519.999999999999999999999", 0x7BFF}, /* not infinity */
      {NORM_F16, "65520", 0x7C00},
      {NORM_F16, "2.98023223876953125000000000001e-8", 0x0001}, /* 2^-25+ */
      {NORM_BF16, "1.00390625000000000000000000000000000001", 0x3F81},
      {NORM_BF16, "1.01171874999999999999999999999999999999", 0x3F81},
      {NORM_BF16, "339617752923046005526922703901628039167.9999999999", 0x7F7F},
  };
  for (size_t k = 0; k < sizeof traps / sizeof traps[0]; k++) {
    for (int i = 0; i < 40; i++) snprintf(fill_numbers[i], 40, "%d.5", i);
    snprintf(fill_numbers[40], 40, "%s", traps[k].text);
    fill_and_compare(traps[k].dtype, 41);
    numarrays_t a;
    snprintf(fill_text, sizeof fill_text, "{\"data\":[1.5,%s]}", traps[k].text);
    extract(fill_text, &a);
    norm_tensor_t t = tu_tensor(traps[k].dtype, 1, (int64_t)2);
    numarray_fill(&a.arrays[0], &t);
    uint16_t got = ((uint16_t *)t.data)[1];
    ck_assert_msg(got == traps[k].want, "%s %s: 0x%04x, want 0x%04x",
                  norm_dtype_name(traps[k].dtype), traps[k].text, got,
                  traps[k].want);
    tu_tensor_free(&t);
    numarray_free(&a);
  }
}

/* The depth counts every [ and { outside strings, taken arrays included. */
START_TEST(test_depth) {
  static const struct {
    const char *json;
    int depth;
  } cases[] = {
      {"{}", 1},
      {"{\"a\":\"[[[[\"}", 1},
      {"{\"a\":[[[1]]],\"b\":{}}", 4},
      {"{\"input\":[[[1,2,3,4,5,6,7,8,9,10],[1,2,3,4,5,6,7,8,9,10]]]}", 4},
      {"{\"x\":\"\\u0001\",\"input\":[[[1,2,3,4,5,6,7,8,9,10,11,12,13,14]]]}", 4},
      {"{\"x\":\"\\u0001\",\"a\":[[[[1]]]]}", 5},
      {"[[[[[[[[[[", 10},
      {"{\"a\":\"\\\"[[[\"}", 1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    numarrays_t a;
    extract(cases[i].json, &a);
    ck_assert_msg(a.depth == cases[i].depth, "%s: depth %d, want %d", cases[i].json,
                  a.depth, cases[i].depth);
    numarray_free(&a);
  }
}
END_TEST

START_TEST(test_fill_exact) {
  check_fill(NORM_F32);
  check_fill_float_via_double();
  check_fill(NORM_F64);
  check_fill(NORM_F16);
  check_fill(NORM_BF16);
  check_fill_half_midpoints();
}
END_TEST

START_TEST(test_fill_nonfinite_and_range) {
  const char *json = "{\"data\":[\"NaN\",\"Infinity\",\"-Infinity\",-0,1e39,"
                     "4.9e-324,1e-50,3.4028235e38]}";
  numarrays_t a;
  extract(json, &a);
  ck_assert_uint_eq(a.count, 1);
  norm_tensor_t t = tu_tensor(NORM_F32, 1, (int64_t)8);
  numarray_fill(&a.arrays[0], &t);
  const float *y = t.data;
  ck_assert(isnan(y[0]) && y[1] == INFINITY && y[2] == -INFINITY);
  ck_assert(y[3] == 0 && signbit(y[3]));
  ck_assert(y[4] == INFINITY); /* past float32's range: rounds to infinity */
  ck_assert(y[5] == 0 && y[6] == 0 && y[7] == 3.4028235e38f);
  tu_tensor_free(&t);
  numarray_free(&a);
  /* Past float64's range the array is left to jansson, which refuses it
   * and says where; an integer past 64 bits is only a big number here. */
  expect_left("{\"data\":[1,2,3,4,5,6,7,8,9,10,11,12,-1e400,14]}");
  expect_taken("{\"data\":[99999999999999999999]}", 1, 1);
}
END_TEST

/* A random token for test_random_runs: mostly a number of random shape
 * (sign, 1..8 integer digits, a leading zero now and then, a fraction of
 * 1..14 digits, rarely an exponent), now and then a short run of random
 * number characters (most of them not numbers: "-", "1.", "01", ".5",
 * "1e+", "1.2.3"). Returns its length. */
static size_t random_token(uint64_t *s, char *out) {
  static const char chars[] = "-0123456789.eE+";
  size_t n = 0;
  if (tu_rand_u64(s) % 16 == 0) {
    size_t len = 1 + tu_rand_u64(s) % 6;
    while (n < len) out[n++] = chars[tu_rand_u64(s) % (sizeof chars - 1)];
    return n;
  }
  if (tu_rand_u64(s) % 2) out[n++] = '-';
  size_t ints = tu_rand_u64(s) % 8 == 0 ? 1 + tu_rand_u64(s) % 8 : 1;
  for (size_t i = 0; i < ints; i++)
    out[n++] = (char)('0' + (i == 0 && tu_rand_u64(s) % 4 ? 1 + tu_rand_u64(s) % 9 : tu_rand_u64(s) % 10));
  if (tu_rand_u64(s) % 8) {
    out[n++] = '.';
    size_t fraction = 1 + tu_rand_u64(s) % 14;
    for (size_t i = 0; i < fraction; i++) out[n++] = (char)('0' + tu_rand_u64(s) % 10);
  }
  if (tu_rand_u64(s) % 16 == 0) {
    out[n++] = tu_rand_u64(s) % 2 ? 'e' : 'E';
    if (tu_rand_u64(s) % 2) out[n++] = tu_rand_u64(s) % 2 ? '-' : '+';
    size_t digits = 1 + tu_rand_u64(s) % 3;
    for (size_t i = 0; i < digits; i++) out[n++] = (char)('0' + tu_rand_u64(s) % 10);
  }
  return n;
}

/* The body json (a run of `tokens` leaves as its "data") taken with
 * want's values bit for bit, or, with want NULL, left to jansson. */
static void expect_run(const char *json, size_t len, size_t tokens, const double *want,
                       int round) {
  numarrays_t a;
  ck_assert_int_eq(numarray_extract(json, len, &a), 0);
  if (want == NULL) {
    ck_assert_msg(a.count == 0, "round %d taken: %.300s", round, json);
  } else {
    ck_assert_msg(a.count == 1 && a.arrays[0].count == tokens, "round %d not taken: %.300s",
                  round, json);
    for (size_t i = 0; i < tokens; i++)
      ck_assert_msg(memcmp(&a.arrays[0].values[i], &want[i], sizeof want[i]) == 0,
                    "round %d element %zu: %.17g, want %.17g: %.300s", round, i,
                    a.arrays[0].values[i], want[i], json);
  }
  numarray_free(&a);
}

/* Runs of random tokens, "," or ", " between them: the array is taken
 * exactly when every token is a number as fmt_parse_double reads it (the
 * whole token, finite), and then holds fmt_parse_double's values bit for
 * bit -- whichever way numarray.c's run parser reads each (its short
 * parser for a short number between two ','s, the general one for the
 * rest), under every NORM_SIMD table. */
START_TEST(test_random_runs) {
  enum { TOKENS_MAX = 200, TOKEN_MAX = 32 };
  static char json[64 + TOKENS_MAX * (TOKEN_MAX + 2)];
  double want[TOKENS_MAX];
  uint64_t seed = 20261203;
  size_t taken = 0, left = 0;
  for (int round = 0; round < 3000; round++) {
    size_t tokens = 1 + tu_rand_u64(&seed) % TOKENS_MAX, len = 0;
    int all_numbers = 1;
    len += (size_t)sprintf(json, "{\"data\":[");
    for (size_t i = 0; i < tokens; i++) {
      if (i > 0) len += (size_t)sprintf(json + len, tu_rand_u64(&seed) % 4 ? "," : ", ");
      size_t n = random_token(&seed, json + len);
      if (fmt_parse_double(json + len, n, &want[i]) != n || isinf(want[i])) all_numbers = 0;
      len += n;
    }
    len += (size_t)sprintf(json + len, "]}");
    *(all_numbers ? &taken : &left) += 1;
    expect_run(json, len, tokens, all_numbers ? want : NULL, round);
  }
  ck_assert(taken > 100 && left > 100); /* both kinds of runs were tried */
}
END_TEST

/* A token for test_long_runs: mostly a short number as tensors are printed
 * (a sign now and then, 1..3 integer digits, a fraction of 1..12 digits,
 * an integer now and then), and once in a while one of the texts four at
 * a time must not take, or must take the same way: 15, 16 and 17 bytes,
 * "0", "-0", "1e5", "-1.5E-3", "1 " (a space before the ','), and with
 * any_odd also texts that are not numbers ("00", "01.5", "-", "1.", ".5",
 * "1.2.3", "+1", ...). Returns its length. */
static size_t long_run_token(uint64_t *s, int any_odd, char *out) {
  static const char *const odd[] = {
      /* numbers */
      "0", "-0", "0.0", "1e5", "-1.5E-3", "1 ", "9007199254740993", "123456789012345",
      "1234567890123456", "-12345678901234", "0.12345678901234", "1.234567890123456",
      /* not numbers */
      "00", "01.5", "-", "1.", ".5", "1.2.3", "+1", "0x1", "-.5"};
  if (tu_rand_u64(s) % 64 == 0) {
    const char *t = odd[tu_rand_u64(s) % (any_odd ? sizeof odd / sizeof odd[0] : 12)];
    memcpy(out, t, strlen(t));
    return strlen(t);
  }
  size_t n = 0;
  if (tu_rand_u64(s) % 2) out[n++] = '-';
  size_t ints = 1 + (tu_rand_u64(s) % 8 == 0 ? tu_rand_u64(s) % 3 : 0);
  for (size_t i = 0; i < ints; i++)
    out[n++] = (char)('0' + (i == 0 && ints > 1 ? 1 + tu_rand_u64(s) % 9 : tu_rand_u64(s) % 10));
  if (tu_rand_u64(s) % 16) {
    out[n++] = '.';
    size_t fraction = 1 + tu_rand_u64(s) % 12;
    for (size_t i = 0; i < fraction; i++) out[n++] = (char)('0' + tu_rand_u64(s) % 10);
  }
  return n;
}

/* Long runs of short numbers, one separator ("," or ", ") per run or a
 * random one per gap: the runs numarray.c's parse_run takes four numbers
 * at a time (under NORM_SIMD=avx512, on a CPU with AVX-512), with now and
 * then a text that breaks a four. Taken exactly when every token is a
 * number, and then fmt_parse_double's values bit for bit, as in
 * test_random_runs. */
START_TEST(test_long_runs) {
  enum { TOKENS_MAX = 3000, TOKEN_MAX = 24 };
  static char json[64 + TOKENS_MAX * (TOKEN_MAX + 2)];
  static double want[TOKENS_MAX];
  uint64_t seed = 20261204;
  size_t taken = 0, left = 0;
  for (int round = 0; round < 600; round++) {
    size_t tokens = 1 + tu_rand_u64(&seed) % TOKENS_MAX, len = 0;
    int separators = (int)(tu_rand_u64(&seed) % 3); /* ",", ", ", either */
    int any_odd = round % 3 == 0; /* else only the odd texts that are numbers */
    int all_numbers = 1;
    len += (size_t)sprintf(json, "{\"data\":[");
    for (size_t i = 0; i < tokens; i++) {
      if (i > 0) {
        int spaced = separators == 2 ? (int)(tu_rand_u64(&seed) % 2) : separators;
        len += (size_t)sprintf(json + len, spaced ? ", " : ",");
      }
      size_t n = long_run_token(&seed, any_odd, json + len);
      size_t read = fmt_parse_double(json + len, n, &want[i]);
      /* "1 " is a number and then whitespace: JSON, though not the
       * fast loop's kind */
      if (!(read == n || (read == n - 1 && json[len + n - 1] == ' ')) || isinf(want[i]))
        all_numbers = 0;
      len += n;
    }
    len += (size_t)sprintf(json + len, "]}");
    *(all_numbers ? &taken : &left) += 1;
    expect_run(json, len, tokens, all_numbers ? want : NULL, round);
  }
  ck_assert(taken > 50 && left > 50); /* both kinds of runs were tried */
}
END_TEST

Suite *numarray_suite(void) {
  Suite *s = suite_create("numarray");
  TCase *core = tcase_create("Core");
  tcase_add_test(core, test_skeleton);
  tcase_add_test(core, test_skeleton_longer_than_body);
  tcase_add_test(core, test_taken);
  tcase_add_test(core, test_left_to_jansson);
  tcase_add_test(core, test_marked_strings);
  tcase_add_test(core, test_depth);
  tcase_add_test(core, test_fill_exact);
  tcase_add_test(core, test_fill_nonfinite_and_range);
  tcase_add_test(core, test_random_runs);
  tcase_add_test(core, test_long_runs);
  suite_add_tcase(s, core);
  return s;
}
