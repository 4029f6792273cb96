/* check_codec_framed.c -- the binary tensor framing of /v1 (the KServe v2
 * binary data extension: Inference-Header-Content-Length bytes of JSON,
 * then raw little-endian tensors in header order) through service_handle():
 * every tensor field binary, binary and JSON tensors mixed, half precision,
 * binary responses and their byte layout, and every size error.
 *
 * Bodies end at an inaccessible page (optionally a few bytes before it, to
 * move the binary tail off its natural alignment), so an over-read crashes
 * the test instead of passing by luck. Loops assert once, at the end. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "codec.h"
#include "service.h"
#include "testutil.h"

static const limits_t limits = {.max_elements = 100000, .max_depth = 16};

/* ---- bodies ---- */

typedef struct {
  char *data;
  size_t len;
  size_t header_len; /* the JSON part */
} body_t;

static body_t body_new(void) {
  body_t b = {malloc(1 << 16), 0, 0};
  ck_assert_ptr_nonnull(b.data);
  return b;
}

static void body_json(body_t *b, const char *json) {
  size_t n = strlen(json);
  memcpy(b->data + b->len, json, n);
  b->len += n;
  b->header_len = b->len;
}

static void body_bytes(body_t *b, const void *p, size_t n) {
  memcpy(b->data + b->len, p, n);
  b->len += n;
}

/* ---- calling the service, the body before a guard page ---- */

typedef struct {
  op_t op;
  const char *content_type; /* default application/octet-stream */
  const char *accept;
  const char *header_length; /* default: the body's JSON length; "" = none */
  int kserve;
  size_t slack; /* bytes between the body's end and the guard page */
} call_t;

static void call_framed(const call_t *c, const body_t *b, reply_t *r) {
  size_t pg = (size_t)sysconf(_SC_PAGESIZE);
  size_t need = b->len + c->slack;
  size_t pages = (need + pg - 1) / pg + 1;
  char *map = mmap(NULL, (pages + 1) * pg, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ck_assert_ptr_ne(map, MAP_FAILED);
  ck_assert_int_eq(mprotect(map + pages * pg, pg, PROT_NONE), 0);
  char *p = map + pages * pg - c->slack - b->len;
  memcpy(p, b->data, b->len);
  char hl[32];
  snprintf(hl, sizeof hl, "%zu", b->header_len);
  const char *header_length = c->header_length == NULL ? hl
                              : c->header_length[0] == '\0' ? NULL
                                                            : c->header_length;
  service_input_t in = {
      .op = c->op, .body = p, .len = b->len,
      .content_type = c->content_type ? c->content_type : "application/octet-stream",
      .accept = c->accept, .header_length = header_length, .kserve = c->kserve};
  service_handle(&in, &limits, r);
  munmap(map, (pages + 1) * pg);
}

static int is_problem(const reply_t *r, int status, const char *code,
                      char *why, size_t cap) {
  if (r->status != status) {
    snprintf(why, cap, "status %d, want %d: %.*s", r->status, status,
             (int)r->len, r->body ? r->body : "");
    return 0;
  }
  json_t *doc = json_loadb(r->body, r->len, 0, NULL);
  const char *got = json_string_value(json_object_get(doc, "code"));
  int ok = r->content_type && strcmp(r->content_type, "application/problem+json") == 0 &&
           got != NULL && strcmp(got, code) == 0 && r->header_length <= 0;
  if (!ok)
    snprintf(why, cap, "code %s, want %s: %.*s", got ? got : "(none)", code,
             (int)r->len, r->body);
  json_decref(doc);
  return ok;
}

/* ---- reading a framed response ---- */

typedef struct {
  json_t *header;
  const char *tail;
  size_t tail_len;
  size_t pos; /* bytes of the tail claimed so far */
} framed_t;

/* Splits a 200 framed reply; fails the test unless the layout holds. */
static framed_t framed_open(const reply_t *r) {
  ck_assert_msg(r->status == 200, "status %d: %.*s", r->status, (int)r->len,
                r->body ? r->body : "");
  ck_assert_str_eq(r->content_type, "application/octet-stream");
  ck_assert_msg(r->header_length > 0 && (size_t)r->header_length <= r->len,
                "header_length %lld, body %zu", (long long)r->header_length, r->len);
  framed_t f;
  json_error_t err;
  f.header = json_loadb(r->body, (size_t)r->header_length, 0, &err);
  ck_assert_msg(f.header != NULL, "the first header_length bytes are not JSON: %s",
                err.text);
  f.tail = r->body + r->header_length;
  f.tail_len = r->len - (size_t)r->header_length;
  f.pos = 0;
  return f;
}

/* The bytes of the tensor object t (which must say binary_data_size), the
 * next ones in the tail. */
static const char *framed_take(framed_t *f, const json_t *t, size_t want) {
  const json_t *size = json_object_get(json_object_get(t, "parameters"), "binary_data_size");
  ck_assert_msg(json_is_integer(size), "tensor without binary_data_size");
  ck_assert_uint_eq((size_t)json_integer_value(size), want);
  ck_assert_msg(json_object_get(t, "data") == NULL, "binary tensor also has data");
  ck_assert_uint_le(f->pos + want, f->tail_len);
  const char *p = f->tail + f->pos;
  f->pos += want;
  return p;
}

static void framed_close(framed_t *f) {
  ck_assert_msg(f->pos == f->tail_len, "the tail has %zu bytes, the tensors %zu",
                f->tail_len, f->pos);
  json_decref(f->header);
}

/* JSON text of n floats, exactly (9 significant digits). */
static void json_floats(char *out, size_t cap, const float *v, size_t n) {
  size_t k = (size_t)snprintf(out, cap, "[");
  for (size_t i = 0; i < n; i++)
    k += (size_t)snprintf(out + k, cap - k, "%s%.9g", i ? "," : "", (double)v[i]);
  snprintf(out + k, cap - k, "]");
}

/* Whether a JSON array holds exactly the floats v. */
static int same_floats(const json_t *arr, const float *v, size_t n) {
  if (json_array_size(arr) != n) return 0;
  for (size_t i = 0; i < n; i++)
    if ((float)json_number_value(json_array_get(arr, i)) != v[i]) return 0;
  return 1;
}

static void fill(float *v, size_t n, uint64_t seed, double lo, double hi) {
  for (size_t i = 0; i < n; i++) v[i] = (float)tu_rand_range(&seed, lo, hi);
}

/* ---- every tensor binary ---- */

/* Batch norm in train mode with input, weight, bias and both running
 * statistics binary: the answer equals the JSON request's bit for bit, and
 * output, running_mean and running_var come back binary in that order. */
START_TEST(test_all_binary_batch_train) {
  float x[24], w[3], bias[3], rm[3], rv[3];
  fill(x, 24, 1, -2, 3);
  fill(w, 3, 2, 0.5, 2);
  fill(bias, 3, 3, -1, 1);
  fill(rm, 3, 4, -0.5, 0.5);
  fill(rv, 3, 5, 0.5, 2);
  for (size_t slack = 0; slack < 4; slack++) {
    body_t b = body_new();
    body_json(&b, "{\"input\": {\"shape\": [4,3,2], \"dtype\": \"float32\", "
                  "\"parameters\": {\"binary_data_size\": 96}},"
                  " \"weight\": {\"shape\": [3], \"parameters\": {\"binary_data_size\": 12}},"
                  " \"bias\": {\"shape\": [3], \"parameters\": {\"binary_data_size\": 12}},"
                  " \"running_mean\": {\"shape\": [3], \"parameters\": {\"binary_data_size\": 12}},"
                  " \"running_var\": {\"shape\": [3], \"parameters\": {\"binary_data_size\": 12}},"
                  " \"momentum\": 0.2}");
    body_bytes(&b, x, sizeof x);
    body_bytes(&b, w, sizeof w);
    body_bytes(&b, bias, sizeof bias);
    body_bytes(&b, rm, sizeof rm);
    body_bytes(&b, rv, sizeof rv);
    call_t c = {.op = OP_BATCH, .slack = slack};
    reply_t r;
    call_framed(&c, &b, &r);

    /* the same request in JSON */
    char xs[1024], ws[256], bs[256], rms[256], rvs[256], json[4096];
    json_floats(xs, sizeof xs, x, 24);
    json_floats(ws, sizeof ws, w, 3);
    json_floats(bs, sizeof bs, bias, 3);
    json_floats(rms, sizeof rms, rm, 3);
    json_floats(rvs, sizeof rvs, rv, 3);
    snprintf(json, sizeof json,
             "{\"input\": {\"shape\": [4,3,2], \"data\": %s}, \"weight\": %s, \"bias\": %s,"
             " \"running_mean\": %s, \"running_var\": %s, \"momentum\": 0.2}",
             xs, ws, bs, rms, rvs);
    reply_t rj;
    service_input_t in = {.op = OP_BATCH, .body = json, .len = strlen(json)};
    service_handle(&in, &limits, &rj);
    ck_assert_int_eq(rj.status, 200);
    json_t *jd = json_loadb(rj.body, rj.len, 0, NULL);

    framed_t f = framed_open(&r);
    const json_t *out = json_object_get(f.header, "output");
    ck_assert_str_eq(json_string_value(json_object_get(out, "dtype")), "float32");
    const float *y = (const float *)(const void *)framed_take(&f, out, 96);
    const float *nrm = (const float *)(const void *)framed_take(
        &f, json_object_get(f.header, "running_mean"), 12);
    const float *nrv = (const float *)(const void *)framed_take(
        &f, json_object_get(f.header, "running_var"), 12);
    float yv[24], nrmv[3], nrvv[3];
    memcpy(yv, y, sizeof yv); /* the tail need not be aligned */
    memcpy(nrmv, nrm, sizeof nrmv);
    memcpy(nrvv, nrv, sizeof nrvv);
    ck_assert(same_floats(json_object_get(json_object_get(jd, "output"), "data"), yv, 24));
    ck_assert(same_floats(json_object_get(json_object_get(jd, "running_mean"), "data"), nrmv, 3));
    ck_assert(same_floats(json_object_get(json_object_get(jd, "running_var"), "data"), nrvv, 3));
    /* small statistics stay JSON, and agree */
    ck_assert(json_equal(json_object_get(f.header, "stats"), json_object_get(jd, "stats")));
    ck_assert_int_eq(json_integer_value(json_object_get(f.header, "num_batches_tracked")), 1);
    /* the running stats moved with momentum 0.2 */
    ck_assert(nrmv[0] != rm[0]);
    framed_close(&f);
    json_decref(jd);
    reply_free(&rj);
    reply_free(&r);
    free(b.data);
  }
}
END_TEST

/* Eval mode (running stats binary, read only) and every other norm with
 * its affine tensors binary, for every alignment of the tail. */
START_TEST(test_all_binary_other_norms) {
  float x[24], w[12], bias[12], rm[3], rv[3];
  fill(x, 24, 6, -2, 3);
  fill(w, 12, 7, 0.5, 2);
  fill(bias, 12, 8, -1, 1);
  fill(rm, 3, 9, -0.5, 0.5);
  fill(rv, 3, 10, 0.5, 2);
  static const struct {
    op_t op;
    const char *header;
    int nw; /* weight/bias elements, 0 for none */
    int with_bias, with_running;
  } cases[] = {
      {OP_BATCH, "{\"input\": {\"shape\": [4,3,2], \"parameters\": {\"binary_data_size\": 96}},"
                 " \"running_mean\": {\"shape\": [3], \"parameters\": {\"binary_data_size\": 12}},"
                 " \"running_var\": {\"shape\": [3], \"parameters\": {\"binary_data_size\": 12}},"
                 " \"mode\": \"eval\"}", 0, 0, 1},
      {OP_LAYER, "{\"input\": {\"shape\": [2,12], \"parameters\": {\"binary_data_size\": 96}},"
                 " \"weight\": {\"shape\": [12], \"parameters\": {\"binary_data_size\": 48}},"
                 " \"bias\": {\"shape\": [12], \"parameters\": {\"binary_data_size\": 48}}}", 12, 1, 0},
      {OP_RMS, "{\"input\": {\"shape\": [2,12], \"parameters\": {\"binary_data_size\": 96}},"
               " \"weight\": {\"shape\": [12], \"parameters\": {\"binary_data_size\": 48}}}", 12, 0, 0},
      {OP_GROUP, "{\"input\": {\"shape\": [2,12,1], \"parameters\": {\"binary_data_size\": 96}},"
                 " \"weight\": {\"shape\": [12], \"parameters\": {\"binary_data_size\": 48}},"
                 " \"bias\": {\"shape\": [12], \"parameters\": {\"binary_data_size\": 48}},"
                 " \"num_groups\": 4}", 12, 1, 0},
      {OP_INSTANCE, "{\"input\": {\"shape\": [2,3,4], \"parameters\": {\"binary_data_size\": 96}},"
                    " \"weight\": {\"shape\": [3], \"parameters\": {\"binary_data_size\": 12}},"
                    " \"bias\": {\"shape\": [3], \"parameters\": {\"binary_data_size\": 12}}}", 3, 1, 0},
  };
  int failures = 0;
  char first[1024] = "";
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    reply_t first_reply;
    memset(&first_reply, 0, sizeof first_reply);
    for (size_t slack = 0; slack < 8; slack++) {
      body_t b = body_new();
      body_json(&b, cases[k].header);
      body_bytes(&b, x, sizeof x);
      if (cases[k].nw) body_bytes(&b, w, (size_t)cases[k].nw * 4);
      if (cases[k].with_bias) body_bytes(&b, bias, (size_t)cases[k].nw * 4);
      if (cases[k].with_running) {
        body_bytes(&b, rm, sizeof rm);
        body_bytes(&b, rv, sizeof rv);
      }
      call_t c = {.op = cases[k].op, .slack = slack};
      reply_t r;
      call_framed(&c, &b, &r);
      free(b.data);
      if (r.status != 200 || r.header_length <= 0 ||
          (size_t)r.header_length + 96 != r.len) {
        if (failures++ == 0)
          snprintf(first, sizeof first, "case %zu slack %zu: status %d, %zu bytes: %.*s",
                   k, slack, r.status, r.len, (int)r.len, r.body ? r.body : "");
        reply_free(&r);
        continue;
      }
      if (slack == 0) {
        first_reply = r;
      } else {
        if ((r.len != first_reply.len || memcmp(r.body, first_reply.body, r.len) != 0) &&
            failures++ == 0)
          snprintf(first, sizeof first, "case %zu: slack %zu changes the answer", k, slack);
        reply_free(&r);
      }
    }
    reply_free(&first_reply);
  }
  ck_assert_msg(failures == 0, "%d failures; first: %s", failures, first);
}
END_TEST

/* JSON and binary tensors in one header: only the binary ones take tail
 * bytes, in header order (whatever the field order). */
START_TEST(test_mixed_json_and_binary) {
  float x[6] = {1, 2, 4, 8, -1, 0.5f}, bias[3] = {0.5f, -0.5f, 2};
  body_t b = body_new();
  body_json(&b, "{\"bias\": {\"shape\": [3], \"parameters\": {\"binary_data_size\": 12}},"
                " \"weight\": [2, 3, 4],"
                " \"input\": {\"shape\": [2,3], \"parameters\": {\"binary_data_size\": 24}},"
                " \"eps\": 0}");
  body_bytes(&b, bias, sizeof bias); /* bias first: it comes first in the header */
  body_bytes(&b, x, sizeof x);
  call_t c = {.op = OP_LAYER, .accept = "application/json"};
  reply_t r;
  call_framed(&c, &b, &r);
  ck_assert_msg(r.status == 200, "%.*s", (int)r.len, r.body);
  ck_assert_str_eq(r.content_type, "application/json");
  ck_assert_int_le(r.header_length, 0);
  json_t *doc = json_loadb(r.body, r.len, 0, NULL);
  json_t *data = json_object_get(json_object_get(doc, "output"), "data");
  /* row [1,2,4]: mean 7/3, var 14/9 */
  double rstd = 1 / sqrt(14.0 / 9);
  ck_assert(tu_close(json_number_value(json_array_get(data, 0)),
                     2 * (1 - 7.0 / 3) * rstd + 0.5, 1e-6));
  ck_assert(tu_close(json_number_value(json_array_get(data, 2)),
                     4 * (4 - 7.0 / 3) * rstd + 2, 1e-6));
  json_decref(doc);
  reply_free(&r);
  free(b.data);

  /* the input JSON and the weight binary */
  b = body_new();
  float w[3] = {2, 3, 4};
  body_json(&b, "{\"input\": [[1,2,4],[8,-1,0.5]],"
                " \"weight\": {\"shape\": [3], \"dtype\": \"float32\","
                " \"parameters\": {\"binary_data_size\": 12}}, \"eps\": 0,"
                " \"bias\": [0.5, -0.5, 2]}");
  body_bytes(&b, w, sizeof w);
  call_framed(&c, &b, &r);
  ck_assert_int_eq(r.status, 200);
  doc = json_loadb(r.body, r.len, 0, NULL);
  data = json_object_get(json_object_get(doc, "output"), "data");
  ck_assert(tu_close(json_number_value(json_array_get(data, 2)),
                     4 * (4 - 7.0 / 3) * rstd + 2, 1e-6));
  json_decref(doc);
  reply_free(&r);
  free(b.data);
}
END_TEST

/* float64, float16 and bfloat16 as raw bytes: the output keeps the dtype
 * and its element size; statistics of float64 stay double. */
START_TEST(test_binary_dtypes) {
  static const struct {
    const char *name;
    norm_dtype_t dtype;
    size_t size;
  } cases[] = {{"float64", NORM_F64, 8}, {"float16", NORM_F16, 2},
               {"bfloat16", NORM_BF16, 2}, {"float32", NORM_F32, 4}};
  for (size_t k = 0; k < 4; k++) {
    unsigned char raw[64];
    norm_tensor_t t = {.dtype = cases[k].dtype, .rank = 2, .shape = {2, 4}, .data = raw};
    double x[8] = {1, 2, 3, 5, -4, 0.5, 0.25, 8};
    for (size_t i = 0; i < 8; i++) norm_tensor_set(&t, i, x[i]);
    char header[256];
    snprintf(header, sizeof header,
             "{\"input\": {\"shape\": [2,4], \"dtype\": \"%s\", "
             "\"parameters\": {\"binary_data_size\": %zu}}}", cases[k].name,
             8 * cases[k].size);
    for (size_t slack = 0; slack < 2; slack++) {
      body_t b = body_new();
      body_json(&b, header);
      body_bytes(&b, raw, 8 * cases[k].size);
      call_t c = {.op = OP_LAYER, .slack = slack};
      reply_t r;
      call_framed(&c, &b, &r);
      framed_t f = framed_open(&r);
      const json_t *out = json_object_get(f.header, "output");
      ck_assert_str_eq(json_string_value(json_object_get(out, "dtype")), cases[k].name);
      const char *y = framed_take(&f, out, 8 * cases[k].size);
      unsigned char yb[64];
      memcpy(yb, y, 8 * cases[k].size);
      norm_tensor_t yt = {.dtype = cases[k].dtype, .rank = 2, .shape = {2, 4}, .data = yb};
      /* row 0: [1,2,3,5] mean 2.75 var 2.1875 */
      double want = (5 - 2.75) / sqrt(2.1875 + 1e-5);
      double tol = cases[k].size == 2 ? 1e-2 : 1e-6;
      ck_assert_msg(tu_close(norm_tensor_get(&yt, 3), want, tol), "%s: %g, want %g",
                    cases[k].name, norm_tensor_get(&yt, 3), want);
      if (cases[k].dtype == NORM_F64) /* statistics written as doubles */
        ck_assert_double_eq(json_number_value(json_array_get(
                                json_object_get(json_object_get(f.header, "stats"), "var"), 0)),
                            2.1875);
      framed_close(&f);
      reply_free(&r);
      free(b.data);
    }
  }
}
END_TEST

/* ---- binary responses to JSON requests ---- */

START_TEST(test_binary_responses) {
  const char *json = "{\"input\": [[1,2,3],[4,5,7]], \"binary_data_output\": true}";
  service_input_t in = {.op = OP_LAYER, .body = json, .len = strlen(json)};
  reply_t r;
  service_handle(&in, &limits, &r);
  framed_t f = framed_open(&r);
  float y[6];
  memcpy(y, framed_take(&f, json_object_get(f.header, "output"), 24), sizeof y);
  ck_assert(tu_close(y[0], -1.2247357, 1e-6));
  ck_assert(tu_close(y[5], 1.3363019, 1e-6));
  /* header_length is exactly the JSON part */
  ck_assert_int_eq(r.body[r.header_length - 1], '}');
  framed_close(&f);
  reply_free(&r);

  /* Accept: application/octet-stream does the same for a plain JSON request */
  const char *plain = "{\"input\": [[1,2,3],[4,5,7]]}";
  in = (service_input_t){.op = OP_LAYER, .body = plain, .len = strlen(plain),
                         .content_type = "application/json",
                         .accept = "application/octet-stream"};
  reply_t r2;
  service_handle(&in, &limits, &r2);
  ck_assert_int_eq(r2.status, 200);
  ck_assert_str_eq(r2.content_type, "application/octet-stream");
  service_handle(&(service_input_t){.op = OP_LAYER, .body = json, .len = strlen(json)},
                 &limits, &r);
  ck_assert_int_eq(r.header_length, r2.header_length);
  ck_assert(r.len == r2.len && memcmp(r.body, r2.body, r.len) == 0);
  reply_free(&r);
  reply_free(&r2);

  /* false, or absent: JSON */
  const char *no = "{\"input\": [[1,2,3]], \"binary_data_output\": false}";
  service_handle(&(service_input_t){.op = OP_LAYER, .body = no, .len = strlen(no)},
                 &limits, &r);
  ck_assert_int_eq(r.status, 200);
  ck_assert_str_eq(r.content_type, "application/json");
  ck_assert_int_le(r.header_length, 0);
  reply_free(&r);
  const char *bad = "{\"input\": [[1,2,3]], \"binary_data_output\": 1}";
  service_handle(&(service_input_t){.op = OP_LAYER, .body = bad, .len = strlen(bad)},
                 &limits, &r);
  char why[768];
  ck_assert_msg(is_problem(&r, 422, "bad_field", why, sizeof why), "%s", why);
  reply_free(&r);

  /* a framed request answers framed by default, JSON when asked */
  float x[3] = {1, 2, 3};
  body_t b = body_new();
  body_json(&b, "{\"input\": {\"shape\": [1,3], \"parameters\": {\"binary_data_size\": 12}},"
                " \"return\": [\"output\", \"output_stats\"]}");
  body_bytes(&b, x, sizeof x);
  call_t c = {.op = OP_LAYER};
  call_framed(&c, &b, &r);
  f = framed_open(&r);
  framed_take(&f, json_object_get(f.header, "output"), 12);
  ck_assert_ptr_null(json_object_get(f.header, "stats"));
  ck_assert_ptr_nonnull(json_object_get(f.header, "output_stats"));
  framed_close(&f);
  reply_free(&r);
  c.accept = "application/json";
  call_framed(&c, &b, &r);
  ck_assert_int_eq(r.status, 200);
  ck_assert_str_eq(r.content_type, "application/json");
  reply_free(&r);
  /* stats only: nothing binary, an empty tail */
  free(b.data);
  b = body_new();
  body_json(&b, "{\"input\": {\"shape\": [1,3], \"parameters\": {\"binary_data_size\": 12}},"
                " \"return\": \"stats\"}");
  body_bytes(&b, x, sizeof x);
  c.accept = NULL;
  call_framed(&c, &b, &r);
  ck_assert_int_eq(r.status, 200);
  ck_assert_ptr_null(strstr(r.body, "binary_data_size"));
  json_t *doc = json_loadb(r.body, r.header_length > 0 ? (size_t)r.header_length : r.len, 0, NULL);
  ck_assert_ptr_nonnull(json_object_get(doc, "stats"));
  json_decref(doc);
  reply_free(&r);
  free(b.data);
}
END_TEST

/* A framed request may omit Content-Type (as Triton's client does) or say
 * application/json: the header length alone marks the framing. */
START_TEST(test_framing_without_octet_stream) {
  float x[3] = {1, 2, 3};
  static const char *const types[] = {"application/json", "", NULL};
  for (int k = 0; k < 3; k++) {
    body_t b = body_new();
    body_json(&b, "{\"input\": {\"shape\": [3], \"parameters\": {\"binary_data_size\": 12}}}");
    body_bytes(&b, x, sizeof x);
    reply_t r;
    char hl[16];
    snprintf(hl, sizeof hl, "%zu", b.header_len);
    service_input_t in = {.op = OP_LAYER, .body = b.data, .len = b.len,
                          .content_type = types[k], .header_length = hl,
                          .accept = "application/json"};
    service_handle(&in, &limits, &r);
    ck_assert_msg(r.status == 200, "content type %s: %.*s", types[k] ? types[k] : "(none)",
                  (int)r.len, r.body);
    reply_free(&r);
    free(b.data);
  }
}
END_TEST

/* ---- errors ---- */

START_TEST(test_framing_errors) {
  float x[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  static const struct {
    const char *header;
    size_t tail;               /* bytes of x after it */
    const char *content_type;  /* NULL: octet-stream */
    const char *header_length; /* NULL: the JSON length; "": none */
    int status;
    const char *code;
  } cases[] = {
      /* binary_data_size != shape x dtype */
      {"{\"input\": {\"shape\": [2,3], \"parameters\": {\"binary_data_size\": 20}}}", 20, NULL, NULL, 422, "binary_size_mismatch"},
      {"{\"input\": {\"shape\": [2,3], \"parameters\": {\"binary_data_size\": 28}}}", 28, NULL, NULL, 422, "binary_size_mismatch"},
      {"{\"input\": {\"shape\": [2,3], \"dtype\": \"float64\", \"parameters\": {\"binary_data_size\": 24}}}", 24, NULL, NULL, 422, "binary_size_mismatch"},
      {"{\"input\": {\"shape\": [2,3], \"dtype\": \"float16\", \"parameters\": {\"binary_data_size\": 24}}}", 24, NULL, NULL, 422, "binary_size_mismatch"},
      {"{\"input\": {\"shape\": [2,3], \"parameters\": {\"binary_data_size\": 0}}}", 0, NULL, NULL, 422, "binary_size_mismatch"},
      /* the tail shorter than the header says: truncated */
      {"{\"input\": {\"shape\": [2,3], \"parameters\": {\"binary_data_size\": 24}}}", 20, NULL, NULL, 400, "binary_truncated"},
      {"{\"input\": {\"shape\": [2,3], \"parameters\": {\"binary_data_size\": 24}}}", 0, NULL, NULL, 400, "binary_truncated"},
      {"{\"input\": {\"shape\": [2,3], \"parameters\": {\"binary_data_size\": 24}},"
       " \"weight\": {\"shape\": [3], \"parameters\": {\"binary_data_size\": 12}}}", 32, NULL, NULL, 400, "binary_truncated"},
      /* bytes no tensor claims */
      {"{\"input\": {\"shape\": [2,3], \"parameters\": {\"binary_data_size\": 24}}}", 25, NULL, NULL, 400, "binary_size_mismatch"},
      {"{\"input\": {\"shape\": [2,3], \"parameters\": {\"binary_data_size\": 24}}}", 32, NULL, NULL, 400, "binary_size_mismatch"},
      {"{\"input\": [[1,2,3],[4,5,6]]}", 4, NULL, NULL, 400, "binary_size_mismatch"},
      /* header length past the body */
      {"{\"input\": [[1,2,3]]}", 0, NULL, "21", 400, "binary_truncated"},
      {"{\"input\": [[1,2,3]]}", 0, NULL, "99999999", 400, "binary_truncated"},
      {"{\"input\": [[1,2,3]]}", 0, NULL, "18446744073709551615", 400, "binary_truncated"},
      {"{\"input\": [[1,2,3]]}", 0, NULL, "99999999999999999999999", 400, "binary_truncated"},
      /* header length cuts the JSON, or is zero */
      {"{\"input\": [[1,2,3]]}", 0, NULL, "10", 400, "malformed_json"},
      {"{\"input\": [[1,2,3]]}", 0, NULL, "0", 400, "malformed_json"},
      /* octet-stream without a header length */
      {"{\"input\": [[1,2,3]]}", 0, NULL, "", 400, "missing_header_length"},
      {"{\"input\": {\"shape\": [2,3], \"parameters\": {\"binary_data_size\": 24}}}", 24, NULL, "", 400, "missing_header_length"},
      /* header lengths that are not byte counts */
      {"{\"input\": [[1,2,3]]}", 0, NULL, "abc", 400, "bad_header_length"},
      {"{\"input\": [[1,2,3]]}", 0, NULL, "-1", 400, "bad_header_length"},
      {"{\"input\": [[1,2,3]]}", 0, NULL, "12x", 400, "bad_header_length"},
      {"{\"input\": [[1,2,3]]}", 0, NULL, "1.5", 400, "bad_header_length"},
      {"{\"input\": [[1,2,3]]}", 0, NULL, " 12", 400, "bad_header_length"},
      {"{\"input\": [[1,2,3]]}", 0, NULL, "0x10", 400, "bad_header_length"},
      {"{\"input\": [[1,2,3]]}", 0, NULL, "+20", 400, "bad_header_length"},
      /* binary_data_size in a body that is not framed */
      {"{\"input\": {\"shape\": [2,3], \"parameters\": {\"binary_data_size\": 24}}}", 0, "application/json", "", 400, "binary_without_framing"},
      {"{\"input\": {\"shape\": [2,3], \"parameters\": {\"binary_data_size\": 24}}}", 24, "application/json", "", 400, "malformed_json"},
      /* bad binary_data_size values and parameters */
      {"{\"input\": {\"shape\": [2,3], \"parameters\": {\"binary_data_size\": -24}}}", 24, NULL, NULL, 422, "bad_field"},
      {"{\"input\": {\"shape\": [2,3], \"parameters\": {\"binary_data_size\": \"24\"}}}", 24, NULL, NULL, 422, "bad_field"},
      {"{\"input\": {\"shape\": [2,3], \"parameters\": {\"binary_data_size\": 24.0}}}", 24, NULL, NULL, 422, "bad_field"},
      {"{\"input\": {\"shape\": [2,3], \"parameters\": {}}}", 24, NULL, NULL, 422, "bad_field"},
      {"{\"input\": {\"shape\": [2,3], \"parameters\": {\"binary_data_size\": 24, \"x\": 1}}}", 24, NULL, NULL, 422, "unknown_field"},
      {"{\"input\": {\"shape\": [2,3], \"parameters\": [24]}}", 24, NULL, NULL, 422, "bad_tensor"},
      {"{\"input\": {\"shape\": [2,3], \"data\": [1,2,3,4,5,6], \"parameters\": {\"binary_data_size\": 24}}}", 24, NULL, NULL, 422, "bad_tensor"},
      /* shapes checked before any byte is read */
      {"{\"input\": {\"shape\": [2,-3], \"parameters\": {\"binary_data_size\": 24}}}", 24, NULL, NULL, 422, "negative_dim"},
      {"{\"input\": {\"shape\": [4611686018427387904, 4], \"parameters\": {\"binary_data_size\": 24}}}", 24, NULL, NULL, 422, "size_overflow"},
      {"{\"input\": {\"shape\": [100001], \"parameters\": {\"binary_data_size\": 400004}}}", 24, NULL, NULL, 413, "too_many_elements"},
      {"{\"input\": {\"shape\": [2,3], \"dtype\": \"int32\", \"parameters\": {\"binary_data_size\": 24}}}", 24, NULL, NULL, 422, "unknown_dtype"},
      /* the header itself */
      {"[1, 2, 3]", 0, NULL, NULL, 422, "not_an_object"},
      {"{\"input\": {\"shape\": [2,3], \"parameters\": {\"binary_data_size\": 24}}, \"input\": 1}", 24, NULL, NULL, 400, "duplicate_key"},
      {"{\"input\": {\"shape\": [2,3], \"parameters\": {\"binary_data_size\": 24}}, \"epsilon\": 1}", 24, NULL, NULL, 422, "unknown_field"},
      /* a binary tensor the op does not take */
      {"{\"input\": {\"shape\": [2,3], \"parameters\": {\"binary_data_size\": 24}},"
       " \"running_mean\": {\"shape\": [3], \"parameters\": {\"binary_data_size\": 12}}}", 32, NULL, NULL, 422, "unknown_field"},
  };
  int failures = 0;
  char first[1536] = "";
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    body_t b = body_new();
    body_json(&b, cases[k].header);
    body_bytes(&b, x, cases[k].tail);
    call_t c = {.op = OP_LAYER, .content_type = cases[k].content_type,
                .header_length = cases[k].header_length};
    reply_t r;
    char why[768];
    call_framed(&c, &b, &r);
    if (!is_problem(&r, cases[k].status, cases[k].code, why, sizeof why) && failures++ == 0)
      snprintf(first, sizeof first, "case %zu <%s> + %zu bytes: %s", k, cases[k].header,
               cases[k].tail, why);
    reply_free(&r);
    free(b.data);
  }
  ck_assert_msg(failures == 0, "%d framing cases failed; first: %s", failures, first);
}
END_TEST

/* Mutated framed bodies and header lengths: never a crash or an over-read,
 * always a definite status. */
START_TEST(test_framing_mutations) {
  float x[24];
  for (int i = 0; i < 24; i++) x[i] = (float)(i % 5) - 2;
  const char *header =
      "{\"input\": {\"shape\": [4,3,2], \"parameters\": {\"binary_data_size\": 96}},"
      " \"weight\": {\"shape\": [3], \"parameters\": {\"binary_data_size\": 12}},"
      " \"running_mean\": [0,0,0], \"running_var\": {\"shape\": [3], \"dtype\": \"float32\","
      " \"parameters\": {\"binary_data_size\": 12}}}";
  body_t seed = body_new();
  body_json(&seed, header);
  body_bytes(&seed, x, sizeof x);
  body_bytes(&seed, x, 12);
  body_bytes(&seed, x + 8, 12);
  uint64_t rng = 77;
  int bad = 0;
  char first[512] = "";
  body_t b = body_new();
  for (int iter = 0; iter < 10000; iter++) {
    memcpy(b.data, seed.data, seed.len);
    b.len = seed.len;
    b.header_len = seed.header_len;
    int edits = (int)(tu_rand_u64(&rng) % 4);
    for (int e = 0; e < edits; e++) {
      size_t at = tu_rand_u64(&rng) % seed.len;
      b.data[at] = tu_rand_u64(&rng) % 2 ? "0123456789{}[],:\" -"[tu_rand_u64(&rng) % 19]
                                         : (char)tu_rand_u64(&rng);
    }
    if (tu_rand_u64(&rng) % 4 == 0) b.len = tu_rand_u64(&rng) % (seed.len + 1);
    char hl[32];
    uint64_t mode = tu_rand_u64(&rng) % 6;
    if (mode == 0) snprintf(hl, sizeof hl, "%llu", (unsigned long long)(tu_rand_u64(&rng) % (b.len + 8)));
    else if (mode == 1) snprintf(hl, sizeof hl, "%zu", seed.header_len + (size_t)(tu_rand_u64(&rng) % 5) - 2);
    else snprintf(hl, sizeof hl, "%zu", seed.header_len);
    call_t c = {.op = OP_BATCH, .header_length = hl, .slack = tu_rand_u64(&rng) % 4};
    reply_t r;
    call_framed(&c, &b, &r);
    if (r.status != 200 && r.status != 400 && r.status != 413 && r.status != 422 &&
        bad++ == 0)
      snprintf(first, sizeof first, "iteration %d: status %d %.*s", iter, r.status,
               (int)r.len, r.body ? r.body : "");
    reply_free(&r);
  }
  free(b.data);
  free(seed.data);
  ck_assert_msg(bad == 0, "%d mutated bodies got an unexpected status; first: %s", bad, first);
}
END_TEST

Suite *codec_framed_suite(void) {
  Suite *s = suite_create("codec_framed");
  TCase *valid = tcase_create("Valid");
  tcase_add_test(valid, test_all_binary_batch_train);
  tcase_add_test(valid, test_all_binary_other_norms);
  tcase_add_test(valid, test_mixed_json_and_binary);
  tcase_add_test(valid, test_binary_dtypes);
  tcase_add_test(valid, test_binary_responses);
  tcase_add_test(valid, test_framing_without_octet_stream);
  suite_add_tcase(s, valid);
  TCase *errors = tcase_create("Errors");
  tcase_add_test(errors, test_framing_errors);
  tcase_set_timeout(errors, 60);
  tcase_add_test(errors, test_framing_mutations);
  suite_add_tcase(s, errors);
  return s;
}
