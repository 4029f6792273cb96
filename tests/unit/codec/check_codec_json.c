/* check_codec_json.c -- the JSON codec through service_handle(): every
 * request field, both tensor forms, number formatting, and every error
 * code the decoder can produce, without a socket. */
#include <jansson.h>
#include <math.h>
#include <string.h>

#include "codec.h"
#include "service.h"
#include "testutil.h"

static const limits_t limits = {.max_elements = 1000, .max_depth = 16};

/* Runs body against op; returns the parsed response (caller decrefs) and
 * the status in *status. */
static json_t *call(op_t op, const char *body, int *status) {
  reply_t r;
  service_input_t in = {.op = op, .body = body, .len = strlen(body),
                        .content_type = "application/json", .accept = NULL};
  service_handle(&in, &limits, &r);
  *status = r.status;
  json_error_t err;
  json_t *doc = json_loadb(r.body, r.len, 0, &err);
  ck_assert_msg(doc != NULL, "response is not JSON: %.*s", (int)r.len, r.body);
  if (r.status != 200)
    ck_assert_str_eq(r.content_type, "application/problem+json");
  reply_free(&r);
  return doc;
}

/* The raw response text, for checks on number spelling. */
static char *call_text(op_t op, const char *body, int *status) {
  reply_t r;
  service_input_t in = {.op = op, .body = body, .len = strlen(body)};
  service_handle(&in, &limits, &r);
  *status = r.status;
  return r.body; /* caller frees */
}

static void expect_problem(op_t op, const char *body, int status,
                           const char *code, const char *field) {
  int got;
  json_t *doc = call(op, body, &got);
  ck_assert_msg(got == status, "%s: status %d, want %d", body, got, status);
  ck_assert_str_eq(json_string_value(json_object_get(doc, "code")), code);
  ck_assert_int_eq(json_integer_value(json_object_get(doc, "status")), status);
  ck_assert_ptr_nonnull(json_string_value(json_object_get(doc, "title")));
  ck_assert_ptr_nonnull(json_string_value(json_object_get(doc, "detail")));
  ck_assert_ptr_nonnull(json_string_value(json_object_get(doc, "type")));
  if (field)
    ck_assert_str_eq(json_string_value(json_object_get(doc, "field")), field);
  json_decref(doc);
}

static double at(const json_t *arr, size_t i) {
  const json_t *v = json_array_get(arr, i);
  if (json_is_string(v)) {
    const char *s = json_string_value(v);
    return strcmp(s, "NaN") == 0 ? NAN : s[0] == '-' ? -INFINITY : INFINITY;
  }
  return json_number_value(v);
}

START_TEST(test_layer_textbook) {
  int status;
  char *text = call_text(OP_LAYER, "{\"input\": [[1,2,3,4,5],[2,4,6,8,10]]}",
                         &status);
  ck_assert_int_eq(status, 200);
  /* shortest float32 spelling, as torch prints it */
  ck_assert_ptr_nonnull(strstr(text, "\"data\":[-1.4142101,-0.70710504,0,"));
  ck_assert_ptr_nonnull(strstr(text, "\"stats\":{\"shape\":[2],\"mean\":[3,6],"
                                     "\"var\":[2,8],\"rstd\":[0.70710504,"));
  free(text);
}
END_TEST

START_TEST(test_tensor_forms_agree) {
  int s1, s2;
  json_t *a = call(OP_LAYER, "{\"input\": [[1,2,3],[4,5,7]]}", &s1);
  json_t *b = call(OP_LAYER,
                   "{\"input\": {\"shape\": [2,3], \"dtype\": \"float32\", "
                   "\"data\": [1,2,3,4,5,7]}}", &s2);
  ck_assert_int_eq(s1, 200);
  ck_assert_int_eq(s2, 200);
  ck_assert(json_equal(a, b));
  json_decref(a);
  json_decref(b);
}
END_TEST

START_TEST(test_fields) {
  int status;
  json_t *doc = call(OP_LAYER,
                     "{\"input\": {\"shape\": [1,2,2], \"data\": [1,2,3,5]},"
                     " \"normalized_shape\": [2,2], \"eps\": 0,"
                     " \"weight\": [[2,2],[2,2]], \"bias\": [[1,1],[1,1]],"
                     " \"variance\": \"unbiased\", \"eps_placement\": \"outside_sqrt\","
                     " \"output_dtype\": \"float64\","
                     " \"return\": [\"output\", \"output_stats\"]}", &status);
  ck_assert_int_eq(status, 200);
  ck_assert_ptr_null(json_object_get(doc, "stats"));
  json_t *out = json_object_get(doc, "output");
  ck_assert_str_eq(json_string_value(json_object_get(out, "dtype")), "float64");
  /* mean 2.75, unbiased std sqrt(2.9166...) */
  double sd = sqrt(((1 - 2.75) * (1 - 2.75) + (2 - 2.75) * (2 - 2.75) +
                    (3 - 2.75) * (3 - 2.75) + (5 - 2.75) * (5 - 2.75)) / 3);
  json_t *data = json_object_get(out, "data");
  ck_assert(tu_close(at(data, 0), 2 * (1 - 2.75) / sd + 1, 1e-6));
  ck_assert(tu_close(at(data, 3), 2 * (5 - 2.75) / sd + 1, 1e-6));
  json_t *os = json_object_get(doc, "output_stats");
  ck_assert(tu_close(at(json_object_get(os, "mean"), 0), 1.0, 1e-6));
  json_decref(doc);

  doc = call(OP_LAYER, "{\"input\": [[1,2],[3,5]], \"axis\": -1, \"return\": \"stats\"}",
             &status);
  ck_assert_int_eq(status, 200);
  ck_assert_ptr_null(json_object_get(doc, "output"));
  ck_assert(tu_close(at(json_object_get(json_object_get(doc, "stats"), "mean"), 1), 4, 1e-9));
  json_decref(doc);
}
END_TEST

/* output_stats: mean and var for every norm; for RMS norm also rms, the
 * output's sqrt(mean(y^2)) -- 1 with eps 0, sqrt(ms / (ms + eps)) else. */
START_TEST(test_output_stats_rms) {
  int status;
  json_t *doc = call(OP_RMS,
                     "{\"input\": [[1,2,3,4,5],[2,4,6,8,10]], \"eps\": 0,"
                     " \"return\": \"output_stats\"}", &status);
  ck_assert_int_eq(status, 200);
  json_t *os = json_object_get(doc, "output_stats");
  json_t *mean = json_object_get(os, "mean"), *var = json_object_get(os, "var");
  json_t *rms = json_object_get(os, "rms");
  ck_assert_uint_eq(json_array_size(rms), 2);
  for (size_t g = 0; g < 2; g++) {
    ck_assert(tu_close(at(rms, g), 1.0, 1e-6));
    /* y = x / sqrt(11 (g + 1)^2): mean 3 / sqrt(11), the same for both rows */
    ck_assert(tu_close(at(mean, g), 3 / sqrt(11), 1e-6));
    ck_assert(tu_close(at(var, g), 1 - 9.0 / 11, 1e-6));
  }
  json_decref(doc);

  doc = call(OP_RMS, "{\"input\": [[1,2,3,4,5]], \"eps\": 1,"
                     " \"return\": \"output_stats\"}", &status);
  ck_assert_int_eq(status, 200);
  rms = json_object_get(json_object_get(doc, "output_stats"), "rms");
  ck_assert(tu_close(at(rms, 0), sqrt(11.0 / 12), 1e-6));
  json_decref(doc);

  doc = call(OP_LAYER, "{\"input\": [[1,2,3,4,5]], \"return\": \"output_stats\"}",
             &status);
  ck_assert_int_eq(status, 200);
  os = json_object_get(doc, "output_stats");
  ck_assert_ptr_nonnull(json_object_get(os, "var"));
  ck_assert_ptr_null(json_object_get(os, "rms")); /* RMS norm only */
  json_decref(doc);
}
END_TEST

START_TEST(test_nonfinite_and_half) {
  int status;
  char *text = call_text(OP_RMS,
                         "{\"input\": {\"shape\": [2,2], \"dtype\": \"float16\","
                         " \"data\": [1, \"Infinity\", 3, 4]}}", &status);
  ck_assert_int_eq(status, 200);
  ck_assert_ptr_nonnull(strstr(text, "\"dtype\":\"float16\""));
  ck_assert_ptr_nonnull(strstr(text, "\"NaN\"")); /* Inf / Inf */
  /* 3 / sqrt(12.5 + 1e-6) = 0.8485..., shortest float16 text */
  ck_assert_ptr_nonnull(strstr(text, "0.8486"));
  free(text);
}
END_TEST

START_TEST(test_batch_running) {
  int status;
  json_t *doc = call(OP_BATCH,
                     "{\"input\": [[1,2],[3,4],[5,9]], \"running_mean\": [0,0],"
                     " \"running_var\": [1,1], \"momentum\": null,"
                     " \"num_batches_tracked\": 1}", &status);
  ck_assert_int_eq(status, 200);
  /* cumulative: factor 1/2 */
  json_t *rm = json_object_get(json_object_get(doc, "running_mean"), "data");
  ck_assert(tu_close(at(rm, 0), 1.5, 1e-7));
  ck_assert(tu_close(at(rm, 1), 2.5, 1e-7));
  ck_assert_int_eq(json_integer_value(json_object_get(doc, "num_batches_tracked")), 2);
  json_decref(doc);

  doc = call(OP_BATCH, "{\"input\": [[1,2],[3,4]], \"mode\": \"eval\","
                       " \"running_mean\": [2,3], \"running_var\": [4,4], \"eps\": 0}",
             &status);
  ck_assert_int_eq(status, 200);
  ck_assert(tu_close(at(json_object_get(json_object_get(doc, "output"), "data"), 0), -0.5, 1e-7));
  ck_assert_ptr_null(json_object_get(doc, "running_mean"));
  json_decref(doc);

  /* mode "given": the caller's mean and var, e.g. merged across shards */
  doc = call(OP_BATCH, "{\"input\": [[1,2],[3,4]], \"mode\": \"given\","
                       " \"mean\": [2,3], \"var\": [4,4], \"eps\": 0}", &status);
  ck_assert_int_eq(status, 200);
  ck_assert(tu_close(at(json_object_get(json_object_get(doc, "output"), "data"), 3), 0.5, 1e-7));
  ck_assert(tu_close(at(json_object_get(json_object_get(doc, "stats"), "var"), 1), 4, 0));
  ck_assert_ptr_null(json_object_get(doc, "running_mean"));
  json_decref(doc);
  expect_problem(OP_BATCH, "{\"input\": [[1,2],[3,4]], \"mode\": \"given\", \"mean\": [2,3]}",
                 422, "missing_field", "var");
  expect_problem(OP_BATCH, "{\"input\": [[1,2],[3,4]], \"var\": [2,3]}",
                 422, "conflicting_fields", "var");
  expect_problem(OP_BATCH, "{\"input\": [[1,2],[3,4]], \"mode\": \"given\", \"mean\": [2,3],"
                 " \"var\": [1,1], \"running_mean\": [0,0], \"running_var\": [1,1]}",
                 422, "conflicting_fields", "running_mean");
  expect_problem(OP_BATCH, "{\"input\": [[1,2],[3,4]], \"mode\": \"given\", \"mean\": [2,3,4],"
                 " \"var\": [1,1,1]}", 422, "running_stats_shape", "mean");
}
END_TEST

START_TEST(test_moments_roundtrip) {
  int status;
  json_t *m = call(OP_MOMENTS, "{\"input\": [[1,2,3],[4,5,6]], \"layout\": \"channels\"}",
                   &status);
  ck_assert_int_eq(status, 200);
  ck_assert(tu_close(at(json_object_get(m, "mean"), 1), 3.5, 1e-12));
  /* a moments response is a valid merge part */
  char *part = json_dumps(m, JSON_COMPACT);
  char body[1024];
  snprintf(body, sizeof body, "{\"parts\": [%s, %s]}", part, part);
  free(part);
  json_t *merged = call(OP_MOMENTS_MERGE, body, &status);
  ck_assert_int_eq(status, 200);
  ck_assert(tu_close(at(json_object_get(merged, "count"), 0), 4, 0));
  ck_assert(tu_close(at(json_object_get(merged, "m2"), 0),
                     2 * at(json_object_get(m, "m2"), 0), 1e-12));
  json_decref(m);
  json_decref(merged);
}
END_TEST

START_TEST(test_errors_syntax) {
  expect_problem(OP_LAYER, "{\"input\": [1,2", 400, "malformed_json", NULL);
  expect_problem(OP_LAYER, "", 400, "malformed_json", NULL);
  expect_problem(OP_LAYER, "{\"input\": [1,2], \"input\": [3,4]}", 400,
                 "duplicate_key", NULL);
  expect_problem(OP_LAYER, "{\"input\": [[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]}",
                 400, "too_deep", NULL);
  expect_problem(OP_LAYER, "[1,2,3]", 422, "not_an_object", NULL);
}
END_TEST

START_TEST(test_errors_fields) {
  expect_problem(OP_LAYER, "{\"input\": [1,2], \"epsilon\": 1}", 422, "unknown_field", "epsilon");
  expect_problem(OP_RMS, "{\"input\": [1,2], \"bias\": [1,2]}", 422, "unknown_field", "bias");
  expect_problem(OP_LAYER, "{\"eps\": 1}", 422, "missing_field", "input");
  expect_problem(OP_GROUP, "{\"input\": [[1,2]]}", 422, "missing_field", "num_groups");
  expect_problem(OP_MOMENTS_MERGE, "{}", 422, "missing_field", "parts");
  expect_problem(OP_LAYER, "{\"input\": [1,2], \"eps\": \"small\"}", 422, "bad_field", "eps");
  expect_problem(OP_LAYER, "{\"input\": [1,2], \"variance\": \"sample\"}", 422, "bad_field", "variance");
  expect_problem(OP_LAYER, "{\"input\": [1,2], \"return\": [\"everything\"]}", 422, "bad_field", "return");
  expect_problem(OP_BATCH, "{\"input\": [[1,2]], \"mode\": \"test\"}", 422, "bad_field", "mode");
  expect_problem(OP_LAYER, "{\"input\": [1,2], \"output_dtype\": \"int8\"}", 422, "unknown_dtype", "output_dtype");
  expect_problem(OP_LAYER, "{\"input\": [1,2], \"axis\": 0, \"normalized_shape\": [2]}",
                 422, "conflicting_fields", "axis");
  expect_problem(OP_GROUP, "{\"input\": [[1,2]], \"num_groups\": 1.5}", 422, "bad_field", "num_groups");
  expect_problem(OP_BATCH, "{\"input\": [[1,2],[3,4]], \"num_batches_tracked\": -1}",
                 422, "bad_field", "num_batches_tracked");
}
END_TEST

START_TEST(test_errors_tensors) {
  expect_problem(OP_LAYER, "{\"input\": [[1,2],[3]]}", 422, "ragged_tensor", "input");
  expect_problem(OP_LAYER, "{\"input\": [[1,2],3]}", 422, "ragged_tensor", "input");
  expect_problem(OP_LAYER, "{\"input\": [1, \"two\"]}", 422, "bad_number", "input");
  expect_problem(OP_LAYER, "{\"input\": [1, null]}", 422, "bad_number", "input");
  expect_problem(OP_LAYER, "{\"input\": []}", 422, "empty_tensor", "input");
  expect_problem(OP_LAYER, "{\"input\": 3}", 422, "bad_tensor", "input");
  expect_problem(OP_LAYER, "{\"input\": {\"shape\": [2], \"data\": [1,2,3]}}", 422, "data_length", "input");
  expect_problem(OP_LAYER, "{\"input\": {\"shape\": [-2], \"data\": []}}", 422, "negative_dim", "input");
  expect_problem(OP_LAYER, "{\"input\": {\"shape\": [0], \"data\": []}}", 422, "empty_tensor", "input");
  expect_problem(OP_LAYER, "{\"input\": {\"shape\": [], \"data\": []}}", 422, "bad_rank", "input");
  expect_problem(OP_LAYER, "{\"input\": {\"shape\": [1,1,1,1,1,1,1,1,1], \"data\": [1]}}", 422, "bad_rank", "input");
  expect_problem(OP_LAYER, "{\"input\": [[[[[[[[[1]]]]]]]]]}", 422, "bad_rank", "input");
  expect_problem(OP_LAYER, "{\"input\": {\"shape\": [2.5], \"data\": [1,2]}}", 422, "bad_shape", "input");
  expect_problem(OP_LAYER, "{\"input\": {\"shape\": [2], \"dtype\": \"int32\", \"data\": [1,2]}}", 422, "unknown_dtype", "input");
  expect_problem(OP_LAYER, "{\"input\": {\"shape\": [2], \"data\": [1,2], \"strides\": [1]}}", 422, "unknown_field", "input");
  expect_problem(OP_LAYER, "{\"input\": {\"shape\": [4611686018427387904, 4], \"data\": []}}", 422, "size_overflow", "input");
  expect_problem(OP_LAYER, "{\"input\": {\"shape\": [1001], \"data\": []}}", 413, "too_many_elements", "input");
}
END_TEST

/* A tensor object's data is flat, or nested exactly as its shape; both
 * decode paths (numarray's, and jansson's for arrays it leaves, here forced
 * by a non-finite spelled with an escape) read and refuse alike. */
START_TEST(test_object_nested_data) {
  static const char *const mismatched[] = {
      "{\"input\": {\"shape\": [2,2], \"data\": [[1,2,3,4]]}}",
      "{\"input\": {\"shape\": [2,2], \"data\": [[1,2,3,\"\\u004eaN\"]]}}",
      "{\"input\": {\"shape\": [4], \"data\": [[1,2],[3,4]]}}",
      "{\"input\": {\"shape\": [4], \"data\": [[1,2],[3,\"\\u004eaN\"]]}}",
      "{\"input\": {\"shape\": [2,2], \"data\": [[[1,2],[3,4]]]}}",
      "{\"input\": {\"shape\": [2,2], \"data\": [[[1,2],[3,\"\\u004eaN\"]]]}}",
      "{\"input\": {\"shape\": [1,2,2], \"data\": [[1,2],[3,4]]}}",
      "{\"input\": {\"shape\": [2,1], \"data\": [[[[[[[[[1]]]]]]]],[[[[[[[[2]]]]]]]]]}}",
  };
  for (size_t i = 0; i < sizeof mismatched / sizeof mismatched[0]; i++) {
    int status;
    json_t *doc = call(OP_LAYER, mismatched[i], &status);
    ck_assert_msg(status == 422, "%s: status %d", mismatched[i], status);
    ck_assert_str_eq(json_string_value(json_object_get(doc, "code")), "data_length");
    ck_assert_str_eq(json_string_value(json_object_get(doc, "field")), "input");
    const char *detail = json_string_value(json_object_get(doc, "detail"));
    ck_assert_msg(strstr(detail, "data is nested as ") != NULL, "%s", detail);
    json_decref(doc);
  }
  /* the two paths' messages are the same text */
  int s1, s2;
  json_t *fast = call(OP_LAYER, mismatched[0], &s1);
  json_t *slow = call(OP_LAYER, mismatched[1], &s2);
  ck_assert(json_equal(fast, slow));
  json_decref(fast);
  json_decref(slow);
  /* ragged or mixed data in an object */
  expect_problem(OP_LAYER, "{\"input\": {\"shape\": [2,2], \"data\": [[1,2],[3]]}}",
                 422, "ragged_tensor", "input");
  expect_problem(OP_LAYER, "{\"input\": {\"shape\": [2], \"data\": [1,[2]]}}",
                 422, "ragged_tensor", "input");
  expect_problem(OP_LAYER, "{\"input\": {\"shape\": [3], \"data\": [1,[2,3]]}}",
                 422, "data_length", "input");
  /* nested as the shape, and flat: the same answer on either path */
  static const char *const same[] = {
      "{\"input\": {\"shape\": [2,2], \"data\": [1,2,3,\"NaN\"]}}",
      "{\"input\": {\"shape\": [2,2], \"data\": [1,2,3,\"\\u004eaN\"]}}",
      "{\"input\": {\"shape\": [2,2], \"data\": [[1,2],[3,\"NaN\"]]}}",
      "{\"input\": {\"shape\": [2,2], \"data\": [[1,2],[3,\"\\u004eaN\"]]}}",
  };
  json_t *first = call(OP_LAYER, same[0], &s1);
  ck_assert_int_eq(s1, 200);
  for (size_t i = 1; i < sizeof same / sizeof same[0]; i++) {
    json_t *doc = call(OP_LAYER, same[i], &s2);
    ck_assert_msg(s2 == 200 && json_equal(first, doc), "%s", same[i]);
    json_decref(doc);
  }
  json_decref(first);
}
END_TEST

START_TEST(test_errors_semantics) {
  expect_problem(OP_LAYER, "{\"input\": [[1,2]], \"normalized_shape\": [3]}", 422, "shape_mismatch", "normalized_shape");
  expect_problem(OP_LAYER, "{\"input\": [[1,2]], \"axis\": 2}", 422, "bad_axis", "axis");
  expect_problem(OP_LAYER, "{\"input\": [[1,2]], \"weight\": [1,2,3]}", 422, "weight_shape", "weight");
  expect_problem(OP_LAYER, "{\"input\": [[1,2]], \"bias\": [[1,2]]}", 422, "bias_shape", "bias");
  expect_problem(OP_LAYER, "{\"input\": [[1,2]], \"eps\": -1}", 422, "bad_eps", "eps");
  expect_problem(OP_GROUP, "{\"input\": [[1,2,3]], \"num_groups\": 2}", 422, "bad_num_groups", "num_groups");
  expect_problem(OP_BATCH, "{\"input\": [[1,2]]}", 422, "too_few_values", "input");
  expect_problem(OP_BATCH, "{\"input\": [[1,2],[3,4]], \"mode\": \"eval\"}", 422, "running_stats_shape", "running_mean");
  expect_problem(OP_BATCH, "{\"input\": [[1,2],[3,4]], \"momentum\": 2}", 422, "bad_momentum", "momentum");
  expect_problem(OP_INSTANCE, "{\"input\": [1,2]}", 422, "needs_channels", "input");
  expect_problem(OP_MOMENTS, "{\"input\": [[1,2]], \"layout\": \"channels\", \"axis\": 1}", 422, "conflicting_fields", "axis");
  expect_problem(OP_MOMENTS_MERGE, "{\"parts\": [{\"count\": [1], \"mean\": [1], \"m2\": [-1]}]}", 422, "bad_moments", "parts");
  expect_problem(OP_MOMENTS_MERGE, "{\"parts\": [{\"count\": [1,2], \"mean\": [1], \"m2\": [0]}]}", 422, "bad_field", "parts");
}
END_TEST

START_TEST(test_negotiation) {
  reply_t r;
  const char *body = "{\"input\": [1,2]}";
  service_input_t in = {.op = OP_LAYER, .body = body, .len = strlen(body),
                        .content_type = "text/plain"};
  service_handle(&in, &limits, &r);
  ck_assert_int_eq(r.status, 415);
  reply_free(&r);
  in.content_type = "application/json; charset=utf-8";
  in.accept = "text/csv, application/json;q=0";
  service_handle(&in, &limits, &r);
  ck_assert_int_eq(r.status, 406);
  reply_free(&r);
  in.accept = "text/html, */*;q=0.1";
  service_handle(&in, &limits, &r);
  ck_assert_int_eq(r.status, 200);
  reply_free(&r);
  ck_assert_ptr_eq(codec_for_accept("application/*", NULL), NULL);
  ck_assert_ptr_eq(codec_for_accept("APPLICATION/JSON", NULL), &codec_json);
  ck_assert_ptr_eq(codec_for_content_type(""), &codec_json);
}
END_TEST

/* Random and mutated bodies never crash and always get a problem or 200. */
START_TEST(test_garbage) {
  const char *seed = "{\"input\": {\"shape\": [2,3], \"data\": [1,2,3,4,5,\"NaN\"]},"
                     " \"normalized_shape\": [3], \"eps\": 1e-5, \"return\": [\"stats\"]}";
  size_t n = strlen(seed);
  char body[256];
  uint64_t rng = 5;
  for (int iter = 0; iter < 20000; iter++) {
    memcpy(body, seed, n + 1);
    int edits = 1 + (int)(tu_rand_u64(&rng) % 4);
    for (int e = 0; e < edits; e++)
      body[tu_rand_u64(&rng) % n] = (char)(tu_rand_u64(&rng) % 128);
    size_t len = tu_rand_u64(&rng) % 8 == 0 ? tu_rand_u64(&rng) % n : n;
    reply_t r;
    service_input_t in = {.op = (op_t)(tu_rand_u64(&rng) % OP_COUNT),
                          .body = body, .len = len};
    service_handle(&in, &limits, &r);
    if (r.status != 200 && r.status != 400 && r.status != 413 && r.status != 422)
      ck_abort_msg("status %d for %.*s", r.status, (int)len, body);
    reply_free(&r);
  }
}
END_TEST

Suite *codec_json_suite(void) {
  Suite *s = suite_create("codec_json");
  TCase *core = tcase_create("Core");
  tcase_add_test(core, test_layer_textbook);
  tcase_add_test(core, test_tensor_forms_agree);
  tcase_add_test(core, test_fields);
  tcase_add_test(core, test_output_stats_rms);
  tcase_add_test(core, test_nonfinite_and_half);
  tcase_add_test(core, test_batch_running);
  tcase_add_test(core, test_moments_roundtrip);
  tcase_add_test(core, test_negotiation);
  suite_add_tcase(s, core);
  TCase *errors = tcase_create("Errors");
  tcase_add_test(errors, test_errors_syntax);
  tcase_add_test(errors, test_errors_fields);
  tcase_add_test(errors, test_errors_tensors);
  tcase_add_test(errors, test_object_nested_data);
  tcase_add_test(errors, test_errors_semantics);
  tcase_set_timeout(errors, 30);
  tcase_add_test(errors, test_garbage);
  suite_add_tcase(s, errors);
  return s;
}
