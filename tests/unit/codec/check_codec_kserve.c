/* check_codec_kserve.c -- the KServe v2 / Open Inference Protocol codec
 * through service_handle() (kserve = 1, as the /v2/models/{model}/infer
 * route calls it), without a socket. The requests are written by hand from
 * the protocol's text: an inference request is
 *   {"id": string, "parameters": {...}, "inputs": [{"name", "shape",
 *    "datatype", "parameters", "data"}], "outputs": [{"name",
 *    "parameters": {"binary_data": bool}}]}
 * and a response {"model_name", "model_version", "id", "parameters",
 * "outputs": [{"name", "shape", "datatype", "parameters", "data"}]}; errors
 * are {"error": string}. The binary data extension moves tensors after a
 * JSON header of Inference-Header-Content-Length bytes. Unknown models are
 * refused by the router (HTTP level), so they are not tested here. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "buf.h"
#include "codec.h"
#include "kserve.h"
#include "service.h"
#include "testutil.h"

static const limits_t limits = {.max_elements = 100000, .max_depth = 32};

static const struct {
  const char *name;
  op_t op;
} models[] = {{"layer_norm", OP_LAYER}, {"rms_norm", OP_RMS},
              {"batch_norm", OP_BATCH}, {"group_norm", OP_GROUP},
              {"instance_norm", OP_INSTANCE}};

/* ---- calls ---- */

static void v2_call(op_t op, const char *body, size_t len, const char *header_length,
                    const char *content_type, reply_t *r) {
  service_input_t in = {.op = op, .body = body, .len = len,
                        .content_type = content_type ? content_type : "application/json",
                        .header_length = header_length, .kserve = 1};
  service_handle(&in, &limits, r);
}

/* A 200 JSON response as a document (caller decrefs); fails otherwise. */
static json_t *v2_ok(op_t op, const char *body) {
  reply_t r;
  v2_call(op, body, strlen(body), NULL, NULL, &r);
  ck_assert_msg(r.status == 200, "status %d: %.*s\nfor %s", r.status, (int)r.len,
                r.body ? r.body : "", body);
  ck_assert_str_eq(r.content_type, "application/json");
  json_error_t err;
  json_t *doc = json_loadb(r.body, r.len, 0, &err);
  ck_assert_msg(doc != NULL, "response is not JSON: %s", err.text);
  reply_free(&r);
  return doc;
}

/* Whether r is the protocol's error: {"error": "..."} alone, JSON. */
static int is_v2_error(const reply_t *r, int status, char *why, size_t cap) {
  if (r->status != status) {
    snprintf(why, cap, "status %d, want %d: %.*s", r->status, status, (int)r->len,
             r->body ? r->body : "");
    return 0;
  }
  json_t *doc = json_loadb(r->body, r->len, 0, NULL);
  int ok = r->content_type && strcmp(r->content_type, "application/json") == 0 &&
           json_is_object(doc) && json_object_size(doc) == 1 &&
           json_is_string(json_object_get(doc, "error")) &&
           json_string_length(json_object_get(doc, "error")) > 0;
  if (!ok)
    snprintf(why, cap, "not {\"error\": ...} (%s): %.*s",
             r->content_type ? r->content_type : "no content type", (int)r->len,
             r->body ? r->body : "");
  json_decref(doc);
  return ok;
}

/* The output named name in a response, or NULL. */
static const json_t *output_named(const json_t *doc, const char *name) {
  const json_t *outs = json_object_get(doc, "outputs");
  for (size_t i = 0; i < json_array_size(outs); i++) {
    const json_t *o = json_array_get(outs, i);
    if (strcmp(json_string_value(json_object_get(o, "name")), name) == 0) return o;
  }
  return NULL;
}

static int shape_is(const json_t *o, int rank, const int64_t *dims) {
  const json_t *s = json_object_get(o, "shape");
  if ((int)json_array_size(s) != rank) return 0;
  for (int i = 0; i < rank; i++)
    if (json_integer_value(json_array_get(s, (size_t)i)) != dims[i]) return 0;
  return 1;
}

/* ---- reference norms on (N, C, L) in double ---- */

typedef struct {
  double y[256], mean[64], var[64], rstd[64], rms[64];
  size_t ngroups;
} ref_t;

static void reference(op_t op, const double *x, int N, int C, int L, int G,
                      double eps, const double *w, const double *b, ref_t *r) {
  memset(r, 0, sizeof *r);
  r->ngroups = op == OP_BATCH ? (size_t)C : op == OP_GROUP ? (size_t)(N * G) : (size_t)(N * C);
  double sum[64] = {0}, sq[64] = {0}, cnt[64] = {0};
  for (int pass = 0; pass < 2; pass++)
    for (int n = 0; n < N; n++)
      for (int c = 0; c < C; c++)
        for (int l = 0; l < L; l++) {
          size_t i = (size_t)((n * C + c) * L + l);
          size_t g = op == OP_BATCH ? (size_t)c
                     : op == OP_GROUP ? (size_t)(n * G + c / (C / G))
                                      : (size_t)(n * C + c);
          if (pass == 0) {
            sum[g] += x[i];
            cnt[g] += 1;
            sq[g] += x[i] * x[i];
          } else {
            r->mean[g] = sum[g] / cnt[g];
          }
        }
  for (size_t g = 0; g < r->ngroups; g++) {
    double m2 = 0;
    for (int n = 0; n < N; n++)
      for (int c = 0; c < C; c++)
        for (int l = 0; l < L; l++) {
          size_t i = (size_t)((n * C + c) * L + l);
          size_t gg = op == OP_BATCH ? (size_t)c
                      : op == OP_GROUP ? (size_t)(n * G + c / (C / G))
                                       : (size_t)(n * C + c);
          if (gg == g) m2 += (x[i] - r->mean[g]) * (x[i] - r->mean[g]);
        }
    r->var[g] = m2 / cnt[g];
    r->rms[g] = sqrt(sq[g] / cnt[g]);
    r->rstd[g] = op == OP_RMS ? 1 / sqrt(sq[g] / cnt[g] + eps) : 1 / sqrt(r->var[g] + eps);
  }
  for (int n = 0; n < N; n++)
    for (int c = 0; c < C; c++)
      for (int l = 0; l < L; l++) {
        size_t i = (size_t)((n * C + c) * L + l);
        size_t g = op == OP_BATCH ? (size_t)c
                   : op == OP_GROUP ? (size_t)(n * G + c / (C / G))
                                    : (size_t)(n * C + c);
        size_t a = op == OP_LAYER || op == OP_RMS ? (size_t)l : (size_t)c;
        double y = op == OP_RMS ? x[i] * r->rstd[g] : (x[i] - r->mean[g]) * r->rstd[g];
        if (w) y *= w[a];
        if (b) y += b[a];
        r->y[i] = y;
      }
}

static double num(const json_t *v) { return json_number_value(v); }

/* Whether the JSON array arr (flat) holds want within tol; *at gets the
 * first index that does not. */
static int data_close(const json_t *arr, const double *want, size_t n, double tol,
                      size_t *at) {
  if (json_array_size(arr) != n) {
    *at = (size_t)-1;
    return 0;
  }
  for (size_t i = 0; i < n; i++)
    if (!tu_close(num(json_array_get(arr, i)), want[i], tol)) {
      *at = i;
      return 0;
    }
  return 1;
}

static void json_doubles(buf_t *b, const double *v, size_t n) {
  buf_putc(b, '[');
  for (size_t i = 0; i < n; i++) buf_printf(b, "%s%.17g", i ? "," : "", v[i]);
  buf_putc(b, ']');
}

/* ---- every model, a request as the spec writes it ---- */

START_TEST(test_spec_request_every_model) {
  enum { N = 2, C = 4, L = 3 };
  double x[N * C * L], wl[L] = {1.5, 0.5, -1}, bl[L] = {0.25, 0, -0.5};
  double wc[C] = {2, 1, 0.5, -1}, bc[C] = {0, 1, -1, 0.5};
  uint64_t seed = 3;
  for (size_t i = 0; i < N * C * L; i++) x[i] = (float)tu_rand_range(&seed, -2, 4);
  for (size_t m = 0; m < 5; m++) {
    op_t op = models[m].op;
    int per_l = op == OP_LAYER || op == OP_RMS;
    const double *w = per_l ? wl : wc, *bias = op == OP_RMS ? NULL : per_l ? bl : bc;
    int nw = per_l ? L : C;
    buf_t b;
    buf_init(&b);
    buf_printf(&b, "{\"id\": \"req-%s\", \"parameters\": {\"eps\": 0.001", models[m].name);
    if (op == OP_GROUP) buf_puts(&b, ", \"num_groups\": 2");
    buf_puts(&b, "}, \"inputs\": [{\"name\": \"input\", \"shape\": [2, 4, 3], "
                 "\"datatype\": \"FP32\", \"data\": ");
    json_doubles(&b, x, N * C * L);
    buf_printf(&b, "}, {\"name\": \"weight\", \"shape\": [%d], \"datatype\": \"FP32\", \"data\": ", nw);
    json_doubles(&b, w, (size_t)nw);
    buf_putc(&b, '}');
    if (bias) {
      buf_printf(&b, ", {\"name\": \"bias\", \"shape\": [%d], \"datatype\": \"FP32\", \"data\": ", nw);
      json_doubles(&b, bias, (size_t)nw);
      buf_putc(&b, '}');
    }
    buf_puts(&b, "], \"outputs\": [{\"name\": \"output\"}, {\"name\": \"rstd\"}, ");
    buf_puts(&b, op == OP_RMS ? "{\"name\": \"rms\"}]}" : "{\"name\": \"mean\"}, {\"name\": \"var\"}]}");
    json_t *doc = v2_ok(op, b.data);
    buf_free(&b);

    ref_t ref;
    reference(op, x, N, C, L, 2, 0.001, w, bias, &ref);
    ck_assert_str_eq(json_string_value(json_object_get(doc, "model_name")), models[m].name);
    ck_assert_str_eq(json_string_value(json_object_get(doc, "model_version")), "1");
    char id[64];
    snprintf(id, sizeof id, "req-%s", models[m].name);
    ck_assert_str_eq(json_string_value(json_object_get(doc, "id")), id);
    ck_assert_int_eq(json_array_size(json_object_get(doc, "outputs")), op == OP_RMS ? 3 : 4);

    const json_t *out = output_named(doc, "output");
    ck_assert_ptr_nonnull(out);
    ck_assert_str_eq(json_string_value(json_object_get(out, "datatype")), "FP32");
    int64_t xs[3] = {N, C, L};
    ck_assert(shape_is(out, 3, xs));
    size_t at = 0;
    ck_assert_msg(data_close(json_object_get(out, "data"), ref.y, N * C * L, 2e-6, &at),
                  "%s output[%zu]", models[m].name, at);
    const json_t *rstd = output_named(doc, "rstd");
    ck_assert_str_eq(json_string_value(json_object_get(rstd, "datatype")), "FP32");
    ck_assert_msg(data_close(json_object_get(rstd, "data"), ref.rstd, ref.ngroups, 2e-6, &at),
                  "%s rstd[%zu]", models[m].name, at);
    /* statistics shapes: rows (N, C) for layer/rms/instance, (C) for
     * batch, (N, G) for group */
    int64_t ss[2] = {N, op == OP_GROUP ? 2 : C};
    int64_t sb[1] = {C};
    ck_assert(op == OP_BATCH ? shape_is(rstd, 1, sb) : shape_is(rstd, 2, ss));
    if (op == OP_RMS) {
      ck_assert_msg(data_close(json_object_get(output_named(doc, "rms"), "data"), ref.rms,
                               ref.ngroups, 2e-6, &at), "rms[%zu]", at);
    } else {
      ck_assert_msg(data_close(json_object_get(output_named(doc, "mean"), "data"), ref.mean,
                               ref.ngroups, 2e-6, &at), "%s mean[%zu]", models[m].name, at);
      ck_assert_msg(data_close(json_object_get(output_named(doc, "var"), "data"), ref.var,
                               ref.ngroups, 2e-6, &at), "%s var[%zu]", models[m].name, at);
    }
    json_decref(doc);
  }
}
END_TEST

/* Without "outputs" every output comes back; with it, only those named.
 * Without "id" there is none in the answer. */
START_TEST(test_outputs_subset) {
  const char *all = "{\"inputs\": [{\"name\": \"input\", \"shape\": [2, 3], "
                    "\"datatype\": \"FP32\", \"data\": [1, 2, 3, 4, 5, 7]}]}";
  json_t *doc = v2_ok(OP_LAYER, all);
  ck_assert_ptr_null(json_object_get(doc, "id"));
  ck_assert_int_eq(json_array_size(json_object_get(doc, "outputs")), 4);
  static const char *const names[] = {"output", "mean", "var", "rstd"};
  for (int i = 0; i < 4; i++) ck_assert_ptr_nonnull(output_named(doc, names[i]));
  json_decref(doc);

  doc = v2_ok(OP_RMS, all);
  ck_assert_int_eq(json_array_size(json_object_get(doc, "outputs")), 3);
  ck_assert_ptr_nonnull(output_named(doc, "rms"));
  ck_assert_ptr_null(output_named(doc, "mean"));
  json_decref(doc);

  doc = v2_ok(OP_LAYER, "{\"inputs\": [{\"name\": \"input\", \"shape\": [2, 3], "
                        "\"datatype\": \"FP32\", \"data\": [1, 2, 3, 4, 5, 7]}],"
                        " \"outputs\": [{\"name\": \"rstd\"}]}");
  ck_assert_int_eq(json_array_size(json_object_get(doc, "outputs")), 1);
  const json_t *rstd = output_named(doc, "rstd");
  ck_assert(tu_close(num(json_array_get(json_object_get(rstd, "data"), 0)),
                     1 / sqrt(2.0 / 3 + 1e-5), 1e-6));
  json_decref(doc);

  /* batch norm, train, running stats given: they come back updated */
  doc = v2_ok(OP_BATCH,
              "{\"parameters\": {\"momentum\": 0.5},"
              " \"inputs\": [{\"name\": \"input\", \"shape\": [2, 2], \"datatype\": \"FP32\","
              " \"data\": [1, 2, 3, 6]},"
              " {\"name\": \"running_mean\", \"shape\": [2], \"datatype\": \"FP32\", \"data\": [0, 0]},"
              " {\"name\": \"running_var\", \"shape\": [2], \"datatype\": \"FP32\", \"data\": [1, 1]}],"
              " \"outputs\": [{\"name\": \"running_mean\"}, {\"name\": \"running_var\"}]}");
  ck_assert_int_eq(json_array_size(json_object_get(doc, "outputs")), 2);
  const json_t *rm = json_object_get(output_named(doc, "running_mean"), "data");
  const json_t *rv = json_object_get(output_named(doc, "running_var"), "data");
  ck_assert(tu_close(num(json_array_get(rm, 0)), 1.0, 1e-6));  /* 0.5 * 2 */
  ck_assert(tu_close(num(json_array_get(rm, 1)), 2.0, 1e-6));  /* 0.5 * 4 */
  ck_assert(tu_close(num(json_array_get(rv, 1)), 0.5 + 0.5 * 8, 1e-6)); /* unbiased 8 */
  ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(doc, "parameters"),
                                                      "num_batches_tracked")), 1);
  json_decref(doc);
}
END_TEST

/* FP32, FP64, FP16, BF16 in JSON data: the output keeps the datatype,
 * statistics are FP64 for FP64 and FP32 otherwise; half values are the
 * reference rounded once (one ulp of slack). */
START_TEST(test_datatypes) {
  static const struct {
    const char *v2;
    norm_dtype_t dtype;
    const char *stats;
  } cases[] = {{"FP32", NORM_F32, "FP32"}, {"FP64", NORM_F64, "FP64"},
               {"FP16", NORM_F16, "FP32"}, {"BF16", NORM_BF16, "FP32"}};
  double x[8] = {1.5, -2.25, 3, 0.125, 7, 6.5, -1, 2};
  for (size_t k = 0; k < 4; k++) {
    unsigned char raw[64];
    norm_tensor_t t = {.dtype = cases[k].dtype, .rank = 1, .shape = {8}, .data = raw};
    double xs[8];
    for (size_t i = 0; i < 8; i++) {
      norm_tensor_set(&t, i, x[i]);
      xs[i] = norm_tensor_get(&t, i);
    }
    char body[512];
    snprintf(body, sizeof body,
             "{\"inputs\": [{\"name\": \"input\", \"shape\": [2, 4], \"datatype\": \"%s\","
             " \"data\": [1.5, -2.25, 3, 0.125, 7, 6.5, -1, 2]}]}", cases[k].v2);
    json_t *doc = v2_ok(OP_LAYER, body);
    ref_t ref;
    reference(OP_LAYER, xs, 2, 1, 4, 1, 1e-5, NULL, NULL, &ref);
    const json_t *out = output_named(doc, "output");
    ck_assert_str_eq(json_string_value(json_object_get(out, "datatype")), cases[k].v2);
    ck_assert_str_eq(json_string_value(json_object_get(output_named(doc, "mean"), "datatype")),
                     cases[k].stats);
    const json_t *data = json_object_get(out, "data");
    ck_assert_int_eq(json_array_size(data), 8);
    int bad = -1;
    for (size_t i = 0; i < 8 && bad < 0; i++) {
      double got = num(json_array_get(data, i));
      if (cases[k].dtype == NORM_F16 || cases[k].dtype == NORM_BF16) {
        uint16_t g, w;
        norm_tensor_t one = {.dtype = cases[k].dtype, .rank = 1, .shape = {1}, .data = &g};
        norm_tensor_set(&one, 0, got);
        one.data = &w;
        norm_tensor_set(&one, 0, ref.y[i]);
        if (abs((int)g - (int)w) > 1) bad = (int)i;
      } else if (!tu_close(got, ref.y[i], cases[k].dtype == NORM_F64 ? 1e-14 : 2e-6)) {
        bad = (int)i;
      }
    }
    ck_assert_msg(bad < 0, "%s output[%d]", cases[k].v2, bad);
    json_decref(doc);
  }
}
END_TEST

/* "data" may be nested as the shape (the spec allows both forms). */
START_TEST(test_nested_data) {
  json_t *flat = v2_ok(OP_INSTANCE,
                       "{\"inputs\": [{\"name\": \"input\", \"shape\": [2, 2, 3], \"datatype\": \"FP32\","
                       " \"data\": [1, 2, 3, 4, 5, 7, 0, 0, 1, 2, 2, 9]}]}");
  json_t *nested = v2_ok(OP_INSTANCE,
                         "{\"inputs\": [{\"name\": \"input\", \"shape\": [2, 2, 3], \"datatype\": \"FP32\","
                         " \"data\": [[[1, 2, 3], [4, 5, 7]], [[0, 0, 1], [2, 2, 9]]]}]}");
  ck_assert(json_equal(flat, nested));
  json_decref(flat);
  json_decref(nested);
}
END_TEST

/* ---- the binary data extension ---- */

typedef struct {
  char data[8192];
  size_t len, header_len;
} body_t;

static void body_header(body_t *b, const char *json) {
  b->len = b->header_len = strlen(json);
  memcpy(b->data, json, b->len);
}

static void body_append(body_t *b, const void *p, size_t n) {
  memcpy(b->data + b->len, p, n);
  b->len += n;
}

static void v2_binary_call(op_t op, const body_t *b, reply_t *r) {
  char hl[32];
  snprintf(hl, sizeof hl, "%zu", b->header_len);
  /* an exact-size copy: valgrind/ASan see any over-read */
  char *copy = malloc(b->len ? b->len : 1);
  memcpy(copy, b->data, b->len);
  v2_call(op, copy, b->len, hl, "application/octet-stream", r);
  free(copy);
}

/* Batch norm with every input binary gives the JSON request's answer. */
START_TEST(test_binary_inputs) {
  float x[12] = {1, 2, 3, 4, 5, 7, -1, 0.5f, 2, 8, 1, 1};
  float w[2] = {2, 0.5f}, bias[2] = {0.25f, -1}, rm[2] = {0.5f, -0.5f}, rv[2] = {1, 2};
  body_t b;
  body_header(&b, "{\"id\": \"bin\", \"parameters\": {\"momentum\": 0.1},"
                  " \"inputs\": ["
                  "{\"name\": \"input\", \"shape\": [3, 2, 2], \"datatype\": \"FP32\","
                  " \"parameters\": {\"binary_data_size\": 48}},"
                  "{\"name\": \"weight\", \"shape\": [2], \"datatype\": \"FP32\","
                  " \"parameters\": {\"binary_data_size\": 8}},"
                  "{\"name\": \"bias\", \"shape\": [2], \"datatype\": \"FP32\","
                  " \"parameters\": {\"binary_data_size\": 8}},"
                  "{\"name\": \"running_mean\", \"shape\": [2], \"datatype\": \"FP32\","
                  " \"parameters\": {\"binary_data_size\": 8}},"
                  "{\"name\": \"running_var\", \"shape\": [2], \"datatype\": \"FP32\","
                  " \"parameters\": {\"binary_data_size\": 8}}]}");
  body_append(&b, x, sizeof x);
  body_append(&b, w, sizeof w);
  body_append(&b, bias, sizeof bias);
  body_append(&b, rm, sizeof rm);
  body_append(&b, rv, sizeof rv);
  reply_t r;
  v2_binary_call(OP_BATCH, &b, &r);
  ck_assert_msg(r.status == 200, "%.*s", (int)r.len, r.body);
  ck_assert_str_eq(r.content_type, "application/json"); /* no binary output asked */
  json_t *bin = json_loadb(r.body, r.len, 0, NULL);
  reply_free(&r);
  json_t *js = v2_ok(OP_BATCH,
                     "{\"id\": \"bin\", \"parameters\": {\"momentum\": 0.1},"
                     " \"inputs\": ["
                     "{\"name\": \"input\", \"shape\": [3, 2, 2], \"datatype\": \"FP32\","
                     " \"data\": [1, 2, 3, 4, 5, 7, -1, 0.5, 2, 8, 1, 1]},"
                     "{\"name\": \"weight\", \"shape\": [2], \"datatype\": \"FP32\", \"data\": [2, 0.5]},"
                     "{\"name\": \"bias\", \"shape\": [2], \"datatype\": \"FP32\", \"data\": [0.25, -1]},"
                     "{\"name\": \"running_mean\", \"shape\": [2], \"datatype\": \"FP32\", \"data\": [0.5, -0.5]},"
                     "{\"name\": \"running_var\", \"shape\": [2], \"datatype\": \"FP32\", \"data\": [1, 2]}]}");
  ck_assert(json_equal(bin, js));
  ck_assert_int_eq(json_array_size(json_object_get(js, "outputs")), 6);
  json_decref(bin);
  json_decref(js);
}
END_TEST

/* Binary outputs: per output ("parameters": {"binary_data": true}) or all
 * ("binary_data_output": true); the JSON header says binary_data_size and
 * the bytes follow in the order of the header's outputs. */
START_TEST(test_binary_outputs) {
  const char *json_all =
      "{\"inputs\": [{\"name\": \"input\", \"shape\": [2, 3], \"datatype\": \"FP32\","
      " \"data\": [1, 2, 3, 4, 5, 7]}]}";
  json_t *ref = v2_ok(OP_LAYER, json_all);

  static const char *const bodies[] = {
      "{\"inputs\": [{\"name\": \"input\", \"shape\": [2, 3], \"datatype\": \"FP32\","
      " \"data\": [1, 2, 3, 4, 5, 7]}],"
      " \"outputs\": [{\"name\": \"output\", \"parameters\": {\"binary_data\": true}},"
      " {\"name\": \"mean\"}, {\"name\": \"rstd\", \"parameters\": {\"binary_data\": true}}]}",
      "{\"parameters\": {\"binary_data_output\": true},"
      " \"inputs\": [{\"name\": \"input\", \"shape\": [2, 3], \"datatype\": \"FP32\","
      " \"data\": [1, 2, 3, 4, 5, 7]}]}",
  };
  for (int k = 0; k < 2; k++) {
    reply_t r;
    v2_call(OP_LAYER, bodies[k], strlen(bodies[k]), NULL, NULL, &r);
    ck_assert_msg(r.status == 200, "%.*s", (int)r.len, r.body);
    ck_assert_str_eq(r.content_type, "application/octet-stream");
    ck_assert(r.header_length > 0 && (size_t)r.header_length < r.len);
    json_t *h = json_loadb(r.body, (size_t)r.header_length, 0, NULL);
    ck_assert_ptr_nonnull(h);
    const json_t *outs = json_object_get(h, "outputs");
    size_t pos = (size_t)r.header_length, nbin = 0;
    for (size_t i = 0; i < json_array_size(outs); i++) {
      const json_t *o = json_array_get(outs, i);
      const char *name = json_string_value(json_object_get(o, "name"));
      const json_t *want = json_object_get(output_named(ref, name), "data");
      const json_t *size = json_object_get(json_object_get(o, "parameters"), "binary_data_size");
      if (size == NULL) { /* JSON data, as without binary */
        ck_assert(json_equal(json_object_get(o, "data"), want));
        continue;
      }
      nbin++;
      ck_assert_ptr_null(json_object_get(o, "data"));
      ck_assert_str_eq(json_string_value(json_object_get(o, "datatype")), "FP32");
      size_t n = json_array_size(want);
      ck_assert_int_eq(json_integer_value(size), (json_int_t)(4 * n));
      ck_assert_uint_le(pos + 4 * n, r.len);
      for (size_t e = 0; e < n; e++) {
        float f;
        memcpy(&f, r.body + pos + 4 * e, 4);
        ck_assert_msg(f == (float)num(json_array_get(want, e)), "%s[%zu]", name, e);
      }
      pos += 4 * n;
    }
    ck_assert_uint_eq(pos, r.len);
    ck_assert_uint_eq(nbin, k == 0 ? 2 : 4);
    if (k == 0) ck_assert_int_eq(json_array_size(outs), 3);
    json_decref(h);
    reply_free(&r);
  }
  json_decref(ref);
}
END_TEST

/* The binary data extension's text: "binary_data_output" asks for every
 * output in binary "unless overridden by \"binary_data\" on a specific
 * output"; and its example request carries "model_name". */
START_TEST(test_spec_details) {
  const char *body =
      "{\"parameters\": {\"binary_data_output\": true},"
      " \"inputs\": [{\"name\": \"input\", \"shape\": [2, 2], \"datatype\": \"FP32\","
      " \"data\": [1, 2, 3, 5]}],"
      " \"outputs\": [{\"name\": \"output\", \"parameters\": {\"binary_data\": false}},"
      " {\"name\": \"rstd\"}]}";
  reply_t r;
  v2_call(OP_LAYER, body, strlen(body), NULL, NULL, &r);
  ck_assert_msg(r.status == 200, "%.*s", (int)r.len, r.body);
  ck_assert_msg(r.header_length > 0, "rstd should be binary");
  json_t *h = json_loadb(r.body, (size_t)r.header_length, 0, NULL);
  ck_assert_ptr_nonnull(h);
  const json_t *out = output_named(h, "output");
  ck_assert_msg(json_object_get(out, "data") != NULL,
                "binary_data false on \"output\" must override binary_data_output: %.*s",
                (int)r.header_length, r.body);
  const json_t *rstd = output_named(h, "rstd");
  ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(rstd, "parameters"),
                                                      "binary_data_size")), 8);
  ck_assert_uint_eq(r.len, (size_t)r.header_length + 8);
  json_decref(h);
  reply_free(&r);

  /* everything JSON: the answer is plain JSON */
  body = "{\"parameters\": {\"binary_data_output\": true},"
         " \"inputs\": [{\"name\": \"input\", \"shape\": [2, 2], \"datatype\": \"FP32\","
         " \"data\": [1, 2, 3, 5]}],"
         " \"outputs\": [{\"name\": \"output\", \"parameters\": {\"binary_data\": false}}]}";
  v2_call(OP_LAYER, body, strlen(body), NULL, NULL, &r);
  ck_assert_int_eq(r.status, 200);
  ck_assert_str_eq(r.content_type, "application/json");
  ck_assert_int_le(r.header_length, 0);
  reply_free(&r);

  /* the example's shape of request: model_name beside the inputs */
  json_t *doc = v2_ok(OP_LAYER,
                      "{\"model_name\": \"layer_norm\","
                      " \"inputs\": [{\"name\": \"input\", \"shape\": [2, 2], \"datatype\": \"FP32\","
                      " \"data\": [1, 2, 3, 5]}],"
                      " \"outputs\": [{\"name\": \"output\", \"parameters\": {\"binary_data\": false}}]}");
  ck_assert_str_eq(json_string_value(json_object_get(doc, "model_name")), "layer_norm");
  json_decref(doc);
}
END_TEST

/* Half precision as raw 2-byte values both ways: FP16 and BF16. */
START_TEST(test_binary_half) {
  static const struct {
    const char *v2;
    norm_dtype_t dtype;
  } cases[] = {{"FP16", NORM_F16}, {"BF16", NORM_BF16}, {"FP64", NORM_F64}};
  double x[6] = {1, 2, 3, 4, 5, 7};
  for (size_t k = 0; k < 3; k++) {
    size_t size = norm_dtype_size(cases[k].dtype);
    unsigned char raw[48];
    norm_tensor_t t = {.dtype = cases[k].dtype, .rank = 1, .shape = {6}, .data = raw};
    for (size_t i = 0; i < 6; i++) norm_tensor_set(&t, i, x[i]);
    char header[512];
    snprintf(header, sizeof header,
             "{\"inputs\": [{\"name\": \"input\", \"shape\": [2, 3], \"datatype\": \"%s\","
             " \"parameters\": {\"binary_data_size\": %zu}}],"
             " \"outputs\": [{\"name\": \"output\", \"parameters\": {\"binary_data\": true}}]}",
             cases[k].v2, 6 * size);
    body_t b;
    body_header(&b, header);
    body_append(&b, raw, 6 * size);
    reply_t r;
    v2_binary_call(OP_LAYER, &b, &r);
    ck_assert_msg(r.status == 200, "%s: %.*s", cases[k].v2, (int)r.len, r.body);
    ck_assert_uint_eq(r.len, (size_t)r.header_length + 6 * size);
    json_t *h = json_loadb(r.body, (size_t)r.header_length, 0, NULL);
    const json_t *o = json_array_get(json_object_get(h, "outputs"), 0);
    ck_assert_str_eq(json_string_value(json_object_get(o, "datatype")), cases[k].v2);
    unsigned char yb[48];
    memcpy(yb, r.body + r.header_length, 6 * size);
    norm_tensor_t y = {.dtype = cases[k].dtype, .rank = 1, .shape = {6}, .data = yb};
    ref_t ref;
    reference(OP_LAYER, x, 2, 1, 3, 1, 1e-5, NULL, NULL, &ref);
    for (size_t i = 0; i < 6; i++)
      ck_assert_msg(tu_close(norm_tensor_get(&y, i), ref.y[i],
                             cases[k].dtype == NORM_F64 ? 1e-12 : 1e-2),
                    "%s[%zu]: %g, want %g", cases[k].v2, i, norm_tensor_get(&y, i), ref.y[i]);
    json_decref(h);
    reply_free(&r);
  }
}
END_TEST

/* ---- errors: the protocol's {"error": ...} with the right status ---- */

START_TEST(test_errors) {
  static const struct {
    op_t op;
    const char *body;
    int status;
  } cases[] = {
      /* unknown names */
      {OP_LAYER, "{\"inputs\": [{\"name\": \"x\", \"shape\": [3], \"datatype\": \"FP32\", \"data\": [1,2,3]}]}", 400},
      {OP_LAYER, "{\"inputs\": [{\"name\": \"INPUT\", \"shape\": [3], \"datatype\": \"FP32\", \"data\": [1,2,3]}]}", 400},
      {OP_LAYER, "{\"inputs\": [{\"name\": \"input\", \"shape\": [3], \"datatype\": \"FP32\", \"data\": [1,2,3]}],"
                 " \"outputs\": [{\"name\": \"y\"}]}", 400},
      {OP_LAYER, "{\"inputs\": [{\"name\": \"input\", \"shape\": [3], \"datatype\": \"FP32\", \"data\": [1,2,3]}],"
                 " \"outputs\": [{\"name\": \"rms\"}]}", 400},
      {OP_RMS, "{\"inputs\": [{\"name\": \"input\", \"shape\": [3], \"datatype\": \"FP32\", \"data\": [1,2,3]}],"
               " \"outputs\": [{\"name\": \"mean\"}]}", 400},
      {OP_LAYER, "{\"inputs\": [{\"name\": \"input\", \"shape\": [3], \"datatype\": \"FP32\", \"data\": [1,2,3]}],"
                 " \"outputs\": [{\"name\": \"running_mean\"}]}", 400},
      {OP_BATCH, "{\"inputs\": [{\"name\": \"input\", \"shape\": [2,2], \"datatype\": \"FP32\", \"data\": [1,2,3,4]}],"
                 " \"outputs\": [{\"name\": \"running_var\"}]}", 400},
      /* an output of the model without the input it comes from: 422 */
      {OP_LAYER, "{\"inputs\": [{\"name\": \"input\", \"shape\": [3], \"datatype\": \"FP32\", \"data\": [1,2,3]}],"
                 " \"outputs\": [{\"name\": \"residual_out\"}]}", 422},
      {OP_LAYER_BACKWARD, "{\"inputs\": [{\"name\": \"input\", \"shape\": [3], \"datatype\": \"FP32\", \"data\": [1,2,3]},"
                          " {\"name\": \"grad_output\", \"shape\": [3], \"datatype\": \"FP32\", \"data\": [1,0,0]}],"
                          " \"outputs\": [{\"name\": \"grad_bias\"}]}", 422},
      {OP_LAYER, "{\"inputs\": [{\"name\": \"input\", \"shape\": [3], \"datatype\": \"FP32\", \"data\": [1,2,3]}],"
                 " \"outputs\": [{\"parameters\": {}}]}", 400},
      {OP_LAYER, "{\"inputs\": [{\"name\": \"input\", \"shape\": [3], \"datatype\": \"FP32\", \"data\": [1,2,3]}],"
                 " \"outputs\": {\"name\": \"output\"}}", 400},
      /* malformed inputs */
      {OP_LAYER, "{\"inputs\": [{\"name\": \"input\", \"shape\": [3], \"datatype\": \"FP32\", \"data\": [1,2,3]},"
                 " {\"name\": \"input\", \"shape\": [3], \"datatype\": \"FP32\", \"data\": [1,2,3]}]}", 400},
      {OP_LAYER, "{\"inputs\": [{\"name\": \"input\", \"shape\": [3], \"datatype\": \"INT32\", \"data\": [1,2,3]}]}", 400},
      {OP_LAYER, "{\"inputs\": [{\"name\": \"input\", \"shape\": [3], \"datatype\": \"fp32\", \"data\": [1,2,3]}]}", 400},
      {OP_LAYER, "{\"inputs\": [{\"name\": \"input\", \"shape\": [3], \"datatype\": \"BYTES\", \"data\": [1,2,3]}]}", 400},
      {OP_LAYER, "{\"inputs\": [{\"shape\": [3], \"datatype\": \"FP32\", \"data\": [1,2,3]}]}", 400},
      {OP_LAYER, "{\"inputs\": [{\"name\": \"input\", \"datatype\": \"FP32\", \"data\": [1,2,3]}]}", 400},
      {OP_LAYER, "{\"inputs\": [{\"name\": \"input\", \"shape\": [3], \"data\": [1,2,3]}]}", 400},
      {OP_LAYER, "{\"inputs\": [{\"name\": 7, \"shape\": [3], \"datatype\": \"FP32\", \"data\": [1,2,3]}]}", 400},
      {OP_LAYER, "{\"inputs\": [[1,2,3]]}", 400},
      {OP_LAYER, "{\"inputs\": []}", 400},
      {OP_LAYER, "{\"inputs\": {\"name\": \"input\"}}", 400},
      {OP_LAYER, "{}", 400},
      {OP_LAYER, "{\"input\": [1,2,3]}", 400}, /* a /v1 body */
      {OP_LAYER, "{\"inputs\": [{\"name\": \"input\", \"shape\": [3], \"datatype\": \"FP32\", \"data\": [1,2,3]}],"
                 " \"model\": \"layer_norm\"}", 400},
      /* model_name (as in the protocol's example) must be the URL's model */
      {OP_LAYER, "{\"inputs\": [{\"name\": \"input\", \"shape\": [3], \"datatype\": \"FP32\", \"data\": [1,2,3]}],"
                 " \"model_name\": \"rms_norm\"}", 400},
      {OP_LAYER, "{\"inputs\": [{\"name\": \"input\", \"shape\": [3], \"datatype\": \"FP32\", \"data\": [1,2,3]}],"
                 " \"model_name\": 1}", 400},
      {OP_LAYER, "{\"id\": 5, \"inputs\": [{\"name\": \"input\", \"shape\": [3], \"datatype\": \"FP32\", \"data\": [1,2,3]}]}", 400},
      {OP_LAYER, "{\"parameters\": [1], \"inputs\": [{\"name\": \"input\", \"shape\": [3], \"datatype\": \"FP32\", \"data\": [1,2,3]}]}", 400},
      {OP_LAYER, "{\"parameters\": {\"weight\": [1,1,1]}, \"inputs\": [{\"name\": \"input\", \"shape\": [3], \"datatype\": \"FP32\", \"data\": [1,2,3]},"
                 " {\"name\": \"weight\", \"shape\": [3], \"datatype\": \"FP32\", \"data\": [1,1,1]}]}", 400},
      /* JSON syntax */
      {OP_LAYER, "{\"inputs\": [", 400},
      {OP_LAYER, "", 400},
      {OP_LAYER, "{\"inputs\": [], \"inputs\": []}", 400},
      /* binary data without the framing */
      {OP_LAYER, "{\"inputs\": [{\"name\": \"input\", \"shape\": [3], \"datatype\": \"FP32\","
                 " \"parameters\": {\"binary_data_size\": 12}}]}", 400},
      /* valid syntax, invalid request: 422 */
      {OP_LAYER, "{\"inputs\": [{\"name\": \"input\", \"shape\": [4], \"datatype\": \"FP32\", \"data\": [1,2,3]}]}", 422},
      {OP_LAYER, "{\"inputs\": [{\"name\": \"input\", \"shape\": [2], \"datatype\": \"FP32\", \"data\": [1,2,3]}]}", 422},
      {OP_LAYER, "{\"inputs\": [{\"name\": \"input\", \"shape\": [3], \"datatype\": \"FP32\", \"data\": [1,\"x\",3]}]}", 422},
      {OP_LAYER, "{\"inputs\": [{\"name\": \"input\", \"shape\": [-3], \"datatype\": \"FP32\", \"data\": [1,2,3]}]}", 422},
      {OP_LAYER, "{\"inputs\": [{\"name\": \"input\", \"shape\": \"3\", \"datatype\": \"FP32\", \"data\": [1,2,3]}]}", 422},
      {OP_LAYER, "{\"parameters\": {\"eps\": -1}, \"inputs\": [{\"name\": \"input\", \"shape\": [3], \"datatype\": \"FP32\", \"data\": [1,2,3]}]}", 422},
      {OP_LAYER, "{\"parameters\": {\"epsilon\": 1}, \"inputs\": [{\"name\": \"input\", \"shape\": [3], \"datatype\": \"FP32\", \"data\": [1,2,3]}]}", 422},
      {OP_LAYER, "{\"parameters\": {\"normalized_shape\": 4}, \"inputs\": [{\"name\": \"input\", \"shape\": [3], \"datatype\": \"FP32\", \"data\": [1,2,3]}]}", 422},
      {OP_LAYER, "{\"inputs\": [{\"name\": \"input\", \"shape\": [3], \"datatype\": \"FP32\", \"data\": [1,2,3]},"
                 " {\"name\": \"weight\", \"shape\": [2], \"datatype\": \"FP32\", \"data\": [1,2]}]}", 422},
      {OP_RMS, "{\"inputs\": [{\"name\": \"input\", \"shape\": [3], \"datatype\": \"FP32\", \"data\": [1,2,3]},"
               " {\"name\": \"bias\", \"shape\": [3], \"datatype\": \"FP32\", \"data\": [1,2,3]}]}", 422},
      {OP_GROUP, "{\"inputs\": [{\"name\": \"input\", \"shape\": [1,4,2], \"datatype\": \"FP32\", \"data\": [1,2,3,4,5,6,7,8]}]}", 422},
      {OP_GROUP, "{\"parameters\": {\"num_groups\": 3}, \"inputs\": [{\"name\": \"input\", \"shape\": [1,4,2], \"datatype\": \"FP32\", \"data\": [1,2,3,4,5,6,7,8]}]}", 422},
      {OP_BATCH, "{\"parameters\": {\"mode\": \"eval\"}, \"inputs\": [{\"name\": \"input\", \"shape\": [2,2], \"datatype\": \"FP32\", \"data\": [1,2,3,4]}]}", 422},
      {OP_INSTANCE, "{\"inputs\": [{\"name\": \"input\", \"shape\": [3], \"datatype\": \"FP32\", \"data\": [1,2,3]}]}", 422},
      {OP_LAYER, "{\"inputs\": [{\"name\": \"input\", \"shape\": [100001], \"datatype\": \"FP32\", \"data\": []}]}", 413},
  };
  int failures = 0;
  char first[1536] = "";
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    reply_t r;
    char why[768];
    v2_call(cases[k].op, cases[k].body, strlen(cases[k].body), NULL, NULL, &r);
    if (!is_v2_error(&r, cases[k].status, why, sizeof why) && failures++ == 0)
      snprintf(first, sizeof first, "case %zu <%s>: %s", k, cases[k].body, why);
    reply_free(&r);
  }
  ck_assert_msg(failures == 0, "%d error cases failed; first: %s", failures, first);
}
END_TEST

/* Framing and negotiation errors in the protocol's form too. */
START_TEST(test_transport_errors) {
  const char *body = "{\"inputs\": [{\"name\": \"input\", \"shape\": [3], \"datatype\": \"FP32\","
                     " \"parameters\": {\"binary_data_size\": 12}}]}";
  char why[768];
  reply_t r;
  float x[4] = {1, 2, 3, 4};
  body_t b;
  struct {
    size_t tail;
    const char *header_length;
    const char *content_type;
    int status;
  } cases[] = {
      {12, NULL, NULL, 200},
      {8, NULL, NULL, 400},                      /* truncated */
      {16, NULL, NULL, 400},                     /* extra bytes */
      {12, "100000", NULL, 400},                 /* header length past the body */
      {12, "abc", NULL, 400},                    /* not a number */
      {12, "-1", NULL, 400},
      {12, NULL, "application/x-npy", 415},      /* v2 speaks JSON or framing */
      {12, NULL, "text/plain", 415},
  };
  int failures = 0;
  char first[1024] = "";
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    body_header(&b, body);
    body_append(&b, x, cases[k].tail);
    char hl[32];
    snprintf(hl, sizeof hl, "%zu", b.header_len);
    v2_call(OP_LAYER, b.data, b.len, cases[k].header_length ? cases[k].header_length : hl,
            cases[k].content_type ? cases[k].content_type : "application/octet-stream", &r);
    int ok = cases[k].status == 200 ? r.status == 200
                                    : is_v2_error(&r, cases[k].status, why, sizeof why);
    if (!ok && failures++ == 0)
      snprintf(first, sizeof first, "case %zu: status %d: %.*s", k, r.status, (int)r.len,
               r.body ? r.body : "");
    reply_free(&r);
  }
  /* a binary size that disagrees with shape x datatype: 422 */
  const char *mismatch = "{\"inputs\": [{\"name\": \"input\", \"shape\": [3], \"datatype\": \"FP16\","
                         " \"parameters\": {\"binary_data_size\": 12}}]}";
  body_header(&b, mismatch);
  body_append(&b, x, 12);
  v2_binary_call(OP_LAYER, &b, &r);
  if (!is_v2_error(&r, 422, why, sizeof why) && failures++ == 0)
    snprintf(first, sizeof first, "size mismatch: %s", why);
  reply_free(&r);
  ck_assert_msg(failures == 0, "%d transport cases failed; first: %s", failures, first);
}
END_TEST

/* ---- metadata ---- */

/* GET /v2/models/{model}: the inputs each model takes and outputs it gives,
 * with -1 dims; the declared ranks are the ranks an inference with an input
 * of the declared rank returns. */
START_TEST(test_model_metadata) {
  for (size_t m = 0; m < 5; m++) {
    buf_t b;
    buf_init(&b);
    kserve_model_metadata(models[m].op, &b);
    json_error_t err;
    json_t *meta = json_loadb(b.data, b.len, 0, &err);
    ck_assert_msg(meta != NULL, "%s metadata is not JSON: %s", models[m].name, err.text);
    buf_free(&b);
    ck_assert_str_eq(json_string_value(json_object_get(meta, "name")), models[m].name);
    ck_assert_ptr_nonnull(json_string_value(json_object_get(meta, "platform")));
    ck_assert_str_eq(json_string_value(json_array_get(json_object_get(meta, "versions"), 0)), "1");
    const json_t *inputs = json_object_get(meta, "inputs");
    const json_t *outputs = json_object_get(meta, "outputs");
    /* layer and rms norm also take the fused add's residual */
    size_t want_in = models[m].op == OP_RMS     ? 3
                     : models[m].op == OP_BATCH ? 5
                     : models[m].op == OP_LAYER ? 4
                                                : 3;
    ck_assert_uint_eq(json_array_size(inputs), want_in);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(inputs, 0), "name")), "input");
    const json_t *in_shape = json_object_get(json_array_get(inputs, 0), "shape");
    int in_rank = (int)json_array_size(in_shape);
    for (int i = 0; i < in_rank; i++)
      ck_assert_int_eq(json_integer_value(json_array_get(in_shape, (size_t)i)), -1);

    /* an inference with an input of the declared rank */
    char body[512];
    snprintf(body, sizeof body,
             "{\"parameters\": {%s}, \"inputs\": [{\"name\": \"input\", \"shape\": %s,"
             " \"datatype\": \"FP32\", \"data\": [1, 2, 3, 4, 5, 7, 0, 9]}%s]}",
             models[m].op == OP_GROUP ? "\"num_groups\": 2" : "",
             in_rank == 2 ? "[2, 4]" : "[2, 2, 2]",
             models[m].op == OP_BATCH
                 ? ", {\"name\": \"running_mean\", \"shape\": [2], \"datatype\": \"FP32\", \"data\": [0, 0]},"
                   " {\"name\": \"running_var\", \"shape\": [2], \"datatype\": \"FP32\", \"data\": [1, 1]}"
                 : models[m].op == OP_LAYER || models[m].op == OP_RMS
                 ? ", {\"name\": \"residual\", \"shape\": [2, 4], \"datatype\": \"FP32\","
                   " \"data\": [1, 0, 0, 0, 0, 0, 0, 1]}"
                 : "");
    json_t *doc = v2_ok(models[m].op, body);
    size_t nout = json_array_size(json_object_get(doc, "outputs"));
    ck_assert_uint_eq(json_array_size(outputs), nout);
    for (size_t i = 0; i < json_array_size(outputs); i++) {
      const json_t *o = json_array_get(outputs, i);
      const char *name = json_string_value(json_object_get(o, "name"));
      const json_t *got = output_named(doc, name);
      ck_assert_msg(got != NULL, "%s: metadata output %s is not returned", models[m].name, name);
      ck_assert_msg(json_array_size(json_object_get(o, "shape")) ==
                        json_array_size(json_object_get(got, "shape")),
                    "%s: output %s is declared with rank %zu but has rank %zu",
                    models[m].name, name, json_array_size(json_object_get(o, "shape")),
                    json_array_size(json_object_get(got, "shape")));
    }
    json_decref(doc);
    json_decref(meta);
  }
}
END_TEST

/* Mutated v2 requests (JSON and framed) always get an answer in the
 * protocol's form, never a crash. */
START_TEST(test_mutations) {
  const char *seed =
      "{\"id\": \"m\", \"parameters\": {\"eps\": 1e-5, \"num_groups\": 2, \"binary_data_output\": true},"
      " \"inputs\": [{\"name\": \"input\", \"shape\": [2, 4, 1], \"datatype\": \"FP32\","
      " \"parameters\": {\"binary_data_size\": 32}},"
      " {\"name\": \"weight\", \"shape\": [4], \"datatype\": \"FP16\", \"data\": [1, 2, 3, 4]}],"
      " \"outputs\": [{\"name\": \"output\"}, {\"name\": \"mean\", \"parameters\": {\"binary_data\": false}}]}";
  float x[8] = {1, 2, 3, 4, 5, 7, 0, 9};
  body_t b;
  uint64_t rng = 19;
  int bad = 0;
  char first[512] = "";
  for (int iter = 0; iter < 8000; iter++) {
    body_header(&b, seed);
    body_append(&b, x, sizeof x);
    int edits = (int)(tu_rand_u64(&rng) % 4);
    for (int e = 0; e < edits; e++)
      b.data[tu_rand_u64(&rng) % b.len] =
          tu_rand_u64(&rng) % 2 ? "0123456789{}[],:\" -"[tu_rand_u64(&rng) % 19]
                                : (char)tu_rand_u64(&rng);
    if (tu_rand_u64(&rng) % 5 == 0) b.len = tu_rand_u64(&rng) % (b.len + 1);
    if (tu_rand_u64(&rng) % 5 == 0) b.header_len = tu_rand_u64(&rng) % (b.len + 4);
    op_t op = models[tu_rand_u64(&rng) % 5].op;
    reply_t r;
    v2_binary_call(op, &b, &r);
    char why[768];
    int ok = r.status == 200 || is_v2_error(&r, r.status, why, sizeof why);
    if ((!ok || (r.status != 200 && r.status != 400 && r.status != 413 && r.status != 422)) &&
        bad++ == 0)
      snprintf(first, sizeof first, "iteration %d: status %d %.*s", iter, r.status,
               (int)r.len, r.body ? r.body : "");
    reply_free(&r);
  }
  ck_assert_msg(bad == 0, "%d mutated requests failed; first: %s", bad, first);
}
END_TEST

Suite *codec_kserve_suite(void) {
  Suite *s = suite_create("codec_kserve");
  TCase *infer = tcase_create("Infer");
  tcase_add_test(infer, test_spec_request_every_model);
  tcase_add_test(infer, test_outputs_subset);
  tcase_add_test(infer, test_datatypes);
  tcase_add_test(infer, test_nested_data);
  tcase_add_test(infer, test_binary_inputs);
  tcase_add_test(infer, test_binary_outputs);
  tcase_add_test(infer, test_binary_half);
  tcase_add_test(infer, test_spec_details);
  tcase_add_test(infer, test_model_metadata);
  suite_add_tcase(s, infer);
  TCase *errors = tcase_create("Errors");
  tcase_add_test(errors, test_errors);
  tcase_add_test(errors, test_transport_errors);
  tcase_set_timeout(errors, 60);
  tcase_add_test(errors, test_mutations);
  suite_add_tcase(s, errors);
  return s;
}
