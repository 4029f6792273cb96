/* check_explain.c -- the teaching API through service_handle(): the "steps"
 * of every norm ("explain"), input/output histograms, and the Pre-Norm vs
 * Post-Norm experiment (POST /v1/residual/simulate), each checked against a
 * reference computed here in double precision. Inputs are float64 so the
 * response carries doubles (shortest round-trip text) and the references
 * can be tight. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "service.h"
#include "testutil.h"

static const limits_t limits = {.max_elements = 1u << 20, .max_depth = 16,
                                .max_explain_elements = 4096};

/* Runs body against op with the given limits; returns the parsed response
 * (caller decrefs) and the status in *status. */
static json_t *call_lim(op_t op, const char *body, const limits_t *lim,
                        int *status) {
  reply_t r;
  service_input_t in = {.op = op, .body = body, .len = strlen(body),
                        .content_type = "application/json"};
  service_handle(&in, lim, &r);
  *status = r.status;
  json_error_t err;
  json_t *doc = json_loadb(r.body, r.len, 0, &err);
  ck_assert_msg(doc != NULL, "response is not JSON: %.*s", (int)r.len, r.body);
  reply_free(&r);
  return doc;
}

static json_t *call(op_t op, const char *body, int *status) {
  return call_lim(op, body, &limits, status);
}

/* A 200 response to body. */
static json_t *ok(op_t op, const char *body) {
  int status;
  json_t *doc = call(op, body, &status);
  if (status != 200) {
    char *text = json_dumps(doc, JSON_COMPACT);
    ck_abort_msg("%s -> %d %s", body, status, text);
  }
  return doc;
}

static void expect_problem(op_t op, const char *body, const limits_t *lim,
                           int status, const char *code, const char *field) {
  int got;
  json_t *doc = call_lim(op, body, lim, &got);
  ck_assert_msg(got == status, "%s: status %d, want %d", body, got, status);
  ck_assert_str_eq(json_string_value(json_object_get(doc, "code")), code);
  if (field)
    ck_assert_str_eq(json_string_value(json_object_get(doc, "field")), field);
  json_decref(doc);
}

static double num(const json_t *v) {
  if (json_is_string(v)) {
    const char *s = json_string_value(v);
    return strcmp(s, "NaN") == 0 ? NAN : s[0] == '-' ? -INFINITY : INFINITY;
  }
  ck_assert_msg(json_is_number(v), "not a number");
  return json_number_value(v);
}

static double at(const json_t *arr, size_t i) {
  ck_assert_msg(i < json_array_size(arr), "index %zu past %zu", i,
                json_array_size(arr));
  return num(json_array_get(arr, i));
}

/* Writes n doubles as a JSON list into out. */
static void put_list(char *out, size_t cap, const double *v, size_t n) {
  size_t len = (size_t)snprintf(out, cap, "[");
  for (size_t i = 0; i < n; i++) {
    if (isnan(v[i]))
      len += (size_t)snprintf(out + len, cap - len, "%s\"NaN\"", i ? "," : "");
    else if (isinf(v[i]))
      len += (size_t)snprintf(out + len, cap - len, "%s\"%sInfinity\"",
                              i ? "," : "", v[i] < 0 ? "-" : "");
    else
      len += (size_t)snprintf(out + len, cap - len, "%s%.17g", i ? "," : "", v[i]);
    ck_assert(len < cap);
  }
  snprintf(out + len, cap - len, "]");
}

static void expect_shape(const json_t *shape, int rank, const int64_t *dims) {
  ck_assert_int_eq((int)json_array_size(shape), rank);
  for (int i = 0; i < rank; i++)
    ck_assert_int_eq(json_integer_value(json_array_get(shape, (size_t)i)), dims[i]);
}

/* The step called name, checked to be at position index. */
static const json_t *step(const json_t *doc, size_t index, const char *name) {
  const json_t *steps = json_object_get(doc, "steps");
  ck_assert_msg(json_is_array(steps), "no steps");
  const json_t *s = json_array_get(steps, index);
  ck_assert_msg(s != NULL, "no step %zu (%s)", index, name);
  ck_assert_str_eq(json_string_value(json_object_get(s, "name")), name);
  return s;
}

static void expect_values(const json_t *s, const double *want, size_t n,
                          double tol) {
  const json_t *data = json_object_get(s, "data");
  ck_assert_int_eq(json_array_size(data), n);
  for (size_t i = 0; i < n; i++)
    ck_assert_msg(tu_close(at(data, i), want[i], tol), "%s[%zu] = %.17g, want %.17g",
                  json_string_value(json_object_get(s, "name")), i,
                  at(data, i), want[i]);
}

/* ---- steps --------------------------------------------------------------- */

/* Reference of the mean/var family: group[i] says which statistic element i
 * uses, aff[i] which weight/bias entry (or -1 without affine). */
typedef struct {
  double mean[16], var[16], std[16];
  double centered[64], normalized[64], scaled[64], output[64];
} ref_t;

static void ref_moments(const double *x, size_t n, const size_t *group,
                        size_t ngroups, double eps, int unbiased, int outside,
                        const double *w, const double *b, const size_t *aff,
                        ref_t *r) {
  double count[16] = {0};
  memset(r, 0, sizeof *r);
  for (size_t i = 0; i < n; i++) {
    r->mean[group[i]] += x[i];
    count[group[i]] += 1;
  }
  for (size_t g = 0; g < ngroups; g++) r->mean[g] /= count[g];
  for (size_t i = 0; i < n; i++) {
    r->centered[i] = x[i] - r->mean[group[i]];
    r->var[group[i]] += r->centered[i] * r->centered[i];
  }
  for (size_t g = 0; g < ngroups; g++) {
    r->var[g] /= unbiased ? count[g] - 1 : count[g];
    r->std[g] = outside ? sqrt(r->var[g]) + eps : sqrt(r->var[g] + eps);
  }
  for (size_t i = 0; i < n; i++) {
    r->normalized[i] = r->centered[i] / r->std[group[i]];
    r->scaled[i] = w ? w[aff[i]] * r->normalized[i] : r->normalized[i];
    r->output[i] = r->scaled[i] + (b ? b[aff[i]] : 0.0);
  }
}

static void fill_data(double *x, size_t n, uint64_t seed, double lo, double hi) {
  for (size_t i = 0; i < n; i++) x[i] = tu_rand_range(&seed, lo, hi);
}

START_TEST(test_layer_steps) {
  /* (2, 3, 4) over the last dim, weight and bias of shape [4] */
  double x[24], w[4] = {0.5, 2, -1, 3}, b[4] = {0.25, -1, 0, 4};
  fill_data(x, 24, 11, -3, 7);
  char xs[1024], ws[128], bs[128], body[2048];
  put_list(xs, sizeof xs, x, 24);
  put_list(ws, sizeof ws, w, 4);
  put_list(bs, sizeof bs, b, 4);
  snprintf(body, sizeof body,
           "{\"input\": {\"shape\": [2,3,4], \"dtype\": \"float64\", \"data\": %s},"
           " \"weight\": %s, \"bias\": %s, \"eps\": 0.001, \"return\": [\"steps\"]}",
           xs, ws, bs);
  json_t *doc = ok(OP_LAYER, body);
  /* only what was asked for */
  ck_assert_ptr_null(json_object_get(doc, "output"));
  ck_assert_ptr_null(json_object_get(doc, "stats"));
  ck_assert_int_eq(json_array_size(json_object_get(doc, "steps")), 7);

  size_t group[24], aff[24];
  for (size_t i = 0; i < 24; i++) {
    group[i] = i / 4;
    aff[i] = i % 4;
  }
  ref_t r;
  ref_moments(x, 24, group, 6, 0.001, 0, 0, w, b, aff, &r);
  const int64_t full[] = {2, 3, 4}, stats[] = {2, 3};
  const char *names[] = {"mean", "centered", "var", "std", "normalized",
                         "scaled", "output"};
  const double *want[] = {r.mean, r.centered, r.var, r.std, r.normalized,
                          r.scaled, r.output};
  for (size_t k = 0; k < 7; k++) {
    const json_t *s = step(doc, k, names[k]);
    int is_full = k == 1 || k >= 4;
    expect_shape(json_object_get(s, "shape"), is_full ? 3 : 2,
                 is_full ? full : stats);
    expect_values(s, want[k], is_full ? 24 : 6, 1e-12);
  }
  json_decref(doc);
}
END_TEST

START_TEST(test_layer_steps_options) {
  /* unbiased variance, eps outside the sqrt (the Annotated Transformer),
   * over the trailing two dims; no affine: no "scaled" step */
  double x[12];
  fill_data(x, 12, 5, 100, 101); /* |mean| >> std */
  char xs[512], body[1024];
  put_list(xs, sizeof xs, x, 12);
  snprintf(body, sizeof body,
           "{\"input\": {\"shape\": [2,2,3], \"dtype\": \"float64\", \"data\": %s},"
           " \"normalized_shape\": [2,3], \"variance\": \"unbiased\","
           " \"eps_placement\": \"outside_sqrt\", \"eps\": 0.01, \"explain\": true}",
           xs);
  json_t *doc = ok(OP_LAYER, body);
  /* explain: true adds steps to the default output and stats */
  ck_assert_ptr_nonnull(json_object_get(doc, "output"));
  ck_assert_ptr_nonnull(json_object_get(doc, "stats"));
  ck_assert_int_eq(json_array_size(json_object_get(doc, "steps")), 6);
  size_t group[12];
  for (size_t i = 0; i < 12; i++) group[i] = i / 6;
  ref_t r;
  ref_moments(x, 12, group, 2, 0.01, 1, 1, NULL, NULL, NULL, &r);
  expect_values(step(doc, 0, "mean"), r.mean, 2, 1e-13);
  expect_values(step(doc, 1, "centered"), r.centered, 12, 1e-9);
  expect_values(step(doc, 2, "var"), r.var, 2, 1e-9);
  expect_values(step(doc, 3, "std"), r.std, 2, 1e-9);
  expect_values(step(doc, 4, "normalized"), r.normalized, 12, 1e-9);
  expect_values(step(doc, 5, "output"), r.output, 12, 1e-9);
  /* the last step is the output the response carries */
  const json_t *out = json_object_get(json_object_get(doc, "output"), "data");
  const json_t *last = json_object_get(step(doc, 5, "output"), "data");
  ck_assert(json_equal(out, last));
  json_decref(doc);
}
END_TEST

START_TEST(test_rms_steps) {
  double x[10], w[5] = {1, 2, 0.5, -1, 3};
  fill_data(x, 10, 3, -2, 5);
  char xs[512], ws[128], body[1024];
  put_list(xs, sizeof xs, x, 10);
  put_list(ws, sizeof ws, w, 5);
  snprintf(body, sizeof body,
           "{\"input\": {\"shape\": [2,5], \"dtype\": \"float64\", \"data\": %s},"
           " \"weight\": %s, \"eps\": 0.5, \"return\": [\"stats\", \"steps\"]}",
           xs, ws);
  json_t *doc = ok(OP_RMS, body);
  ck_assert_int_eq(json_array_size(json_object_get(doc, "steps")), 5);
  double ms[2] = {0}, rms[2], normalized[10], scaled[10];
  for (size_t i = 0; i < 10; i++) ms[i / 5] += x[i] * x[i] / 5;
  for (size_t g = 0; g < 2; g++) rms[g] = sqrt(ms[g] + 0.5);
  for (size_t i = 0; i < 10; i++) {
    normalized[i] = x[i] / rms[i / 5];
    scaled[i] = w[i % 5] * normalized[i];
  }
  const int64_t stats[] = {2};
  expect_shape(json_object_get(step(doc, 0, "mean_square"), "shape"), 1, stats);
  expect_values(step(doc, 0, "mean_square"), ms, 2, 1e-12);
  expect_values(step(doc, 1, "rms"), rms, 2, 1e-12);
  expect_values(step(doc, 2, "normalized"), normalized, 10, 1e-12);
  expect_values(step(doc, 3, "scaled"), scaled, 10, 1e-12);
  expect_values(step(doc, 4, "output"), scaled, 10, 1e-12);
  /* the stats agree with the steps: rstd = 1 / rms step */
  const json_t *st = json_object_get(doc, "stats");
  for (size_t g = 0; g < 2; g++)
    ck_assert(tu_close(at(json_object_get(st, "rstd"), g), 1 / rms[g], 1e-12));
  json_decref(doc);
}
END_TEST

START_TEST(test_channel_norm_steps) {
  /* (N, C, L) = (2, 4, 3): batch (per channel), group (2 groups per
   * sample), instance (per sample and channel); bias without weight */
  double x[24], w[4] = {1, -2, 0.5, 3}, b[4] = {1, 2, 3, 4};
  fill_data(x, 24, 17, -4, 9);
  char xs[1024], ws[128], bs[128], body[2048];
  put_list(xs, sizeof xs, x, 24);
  put_list(ws, sizeof ws, w, 4);
  put_list(bs, sizeof bs, b, 4);
  const struct {
    op_t op;
    const char *extra;
    size_t ngroups;
    int weighted;
  } cases[] = {
      {OP_BATCH, "", 4, 1},
      {OP_GROUP, ", \"num_groups\": 2", 4, 1},
      {OP_INSTANCE, "", 8, 0},
  };
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    char weight[160] = "";
    if (cases[k].weighted) snprintf(weight, sizeof weight, " \"weight\": %s,", ws);
    snprintf(body, sizeof body,
             "{\"input\": {\"shape\": [2,4,3], \"dtype\": \"float64\", \"data\": %s},"
             "%s \"bias\": %s, \"eps\": 0.0001, \"return\": \"steps\"%s}",
             xs, weight, bs, cases[k].extra);
    json_t *doc = ok(cases[k].op, body);
    size_t group[24], aff[24];
    for (size_t i = 0; i < 24; i++) {
      size_t n = i / 12, c = (i / 3) % 4;
      aff[i] = c;
      group[i] = cases[k].op == OP_BATCH ? c
                 : cases[k].op == OP_GROUP ? n * 2 + c / 2
                                           : i / 3;
    }
    ref_t r;
    ref_moments(x, 24, group, cases[k].ngroups, 0.0001, 0, 0,
                cases[k].weighted ? w : NULL, b, aff, &r);
    size_t s = 0;
    expect_values(step(doc, s++, "mean"), r.mean, cases[k].ngroups, 1e-12);
    expect_values(step(doc, s++, "centered"), r.centered, 24, 1e-12);
    expect_values(step(doc, s++, "var"), r.var, cases[k].ngroups, 1e-12);
    expect_values(step(doc, s++, "std"), r.std, cases[k].ngroups, 1e-12);
    expect_values(step(doc, s++, "normalized"), r.normalized, 24, 1e-12);
    if (cases[k].weighted)
      expect_values(step(doc, s++, "scaled"), r.scaled, 24, 1e-12);
    expect_values(step(doc, s++, "output"), r.output, 24, 1e-12);
    ck_assert_int_eq(json_array_size(json_object_get(doc, "steps")), s);
    json_decref(doc);
  }
}
END_TEST

START_TEST(test_batch_eval_steps) {
  /* eval: the steps use the running statistics */
  json_t *doc = ok(OP_BATCH,
                   "{\"input\": {\"shape\": [2,2], \"dtype\": \"float64\","
                   " \"data\": [1,2,3,4]}, \"mode\": \"eval\", \"eps\": 0,"
                   " \"running_mean\": [1,-1], \"running_var\": [4,0.25],"
                   " \"explain\": true}");
  const double mean[] = {1, -1}, var[] = {4, 0.25}, std[] = {2, 0.5};
  const double centered[] = {0, 3, 2, 5}, normalized[] = {0, 6, 1, 10};
  expect_values(step(doc, 0, "mean"), mean, 2, 0);
  expect_values(step(doc, 1, "centered"), centered, 4, 0);
  expect_values(step(doc, 2, "var"), var, 2, 0);
  expect_values(step(doc, 3, "std"), std, 2, 1e-15);
  expect_values(step(doc, 4, "normalized"), normalized, 4, 1e-15);
  expect_values(step(doc, 5, "output"), normalized, 4, 1e-15);
  json_decref(doc);
}
END_TEST

START_TEST(test_steps_float32_and_constant) {
  /* float32 input: steps in float32 text; a constant row normalizes to 0 */
  json_t *doc = ok(OP_LAYER, "{\"input\": [[3,3,3,3],[1,2,3,4]], \"explain\": true}");
  const json_t *norm = json_object_get(step(doc, 4, "normalized"), "data");
  for (size_t i = 0; i < 4; i++) ck_assert(at(norm, i) == 0.0);
  double want = (1 - 2.5) / sqrt(1.25 + 1e-5);
  ck_assert(tu_close(at(norm, 4), want, 1e-6));
  json_decref(doc);
  doc = ok(OP_LAYER, "{\"input\": [[3,3,3,3]], \"eps\": 0, \"explain\": true}");
  norm = json_object_get(step(doc, 4, "normalized"), "data");
  for (size_t i = 0; i < 4; i++) ck_assert(at(norm, i) == 0.0);
  json_decref(doc);
}
END_TEST

/* ---- the rest of the family: Lp, local response, mean-variance ---- */

/* (2, 3, 4) float64 data as a JSON body with `extra` fields. */
static json_t *family_steps(op_t op, const double *x, const char *extra) {
  char xs[1024], body[1600];
  put_list(xs, sizeof xs, x, 24);
  snprintf(body, sizeof body,
           "{\"input\": {\"shape\": [2,3,4], \"dtype\": \"float64\", \"data\": %s},"
           " \"explain\": true%s}", xs, extra);
  return ok(op, body);
}

/* The answer's output, which the last step must repeat. */
static void expect_output_step(const json_t *doc, size_t index, size_t n) {
  const json_t *out = json_object_get(json_object_get(doc, "output"), "data");
  const json_t *last = json_object_get(step(doc, index, "output"), "data");
  ck_assert_int_eq(json_array_size(last), n);
  for (size_t i = 0; i < n; i++) ck_assert(at(last, i) == at(out, i));
  ck_assert_int_eq(json_array_size(json_object_get(doc, "steps")), index + 1);
}

START_TEST(test_mvn_steps) {
  /* (2, 3, 4) over axes {0, 2}: one group per channel, its elements not
   * contiguous; std is the biased sqrt(var), eps added outside it */
  double x[24];
  fill_data(x, 24, 41, -5, 3);
  json_t *doc = family_steps(OP_MVN, x, ", \"axes\": [0, -1], \"eps\": 0.01");
  double mean[3] = {0}, var[3] = {0}, std[3], centered[24], normalized[24];
  for (size_t i = 0; i < 24; i++) mean[(i / 4) % 3] += x[i] / 8;
  for (size_t i = 0; i < 24; i++) {
    centered[i] = x[i] - mean[(i / 4) % 3];
    var[(i / 4) % 3] += centered[i] * centered[i] / 8;
  }
  for (size_t g = 0; g < 3; g++) std[g] = sqrt(var[g]);
  for (size_t i = 0; i < 24; i++)
    normalized[i] = centered[i] / (std[(i / 4) % 3] + 0.01);
  const int64_t stats[] = {3}, full[] = {2, 3, 4};
  expect_shape(json_object_get(step(doc, 0, "mean"), "shape"), 1, stats);
  expect_values(step(doc, 0, "mean"), mean, 3, 1e-13);
  expect_shape(json_object_get(step(doc, 1, "centered"), "shape"), 3, full);
  expect_values(step(doc, 1, "centered"), centered, 24, 1e-13);
  expect_values(step(doc, 2, "var"), var, 3, 1e-13);
  expect_values(step(doc, 3, "std"), std, 3, 1e-13);
  expect_values(step(doc, 4, "normalized"), normalized, 24, 1e-13);
  expect_values(step(doc, 5, "output"), normalized, 24, 1e-13);
  expect_output_step(doc, 5, 24);
  json_decref(doc);
  /* a constant group with eps = 0 normalizes to 0, as the kernel does */
  doc = ok(OP_MVN, "{\"input\": [[2,2],[1,3]], \"axes\": [1], \"eps\": 0,"
                   " \"explain\": true}");
  const double zero_then[] = {0, 0, -1, 1};
  expect_values(step(doc, 4, "normalized"), zero_then, 4, 1e-15);
  expect_output_step(doc, 5, 4);
  json_decref(doc);
}
END_TEST

START_TEST(test_lp_steps) {
  /* (2, 3, 4) over axes {0, 2} (non-trailing) for p = 3 and the max norm,
   * and an all-zero slice: norm 0, output 0 (x / eps) */
  double x[24];
  fill_data(x, 24, 43, -2, 6);
  for (size_t i = 0; i < 24; i++)
    if ((i / 4) % 3 == 1) x[i] = 0.0;
  const struct {
    const char *extra;
    double p;
  } cases[] = {{", \"axis\": [0, 2], \"p\": 3", 3.0},
               {", \"axis\": [2, 0], \"p\": \"Infinity\"", INFINITY}};
  for (size_t k = 0; k < 2; k++) {
    json_t *doc = family_steps(OP_LP, x, cases[k].extra);
    double norm[3] = {0}, output[24];
    for (size_t i = 0; i < 24; i++) {
      double a = fabs(x[i]);
      size_t c = (i / 4) % 3;
      norm[c] = isinf(cases[k].p) ? fmax(norm[c], a) : norm[c] + pow(a, 3.0);
    }
    for (size_t c = 0; !isinf(cases[k].p) && c < 3; c++)
      norm[c] = pow(norm[c], 1.0 / 3.0);
    for (size_t i = 0; i < 24; i++)
      output[i] = x[i] / fmax(norm[(i / 4) % 3], 1e-12);
    const int64_t stats[] = {3};
    expect_shape(json_object_get(step(doc, 0, "norm"), "shape"), 1, stats);
    expect_values(step(doc, 0, "norm"), norm, 3, 1e-14);
    ck_assert(at(json_object_get(step(doc, 0, "norm"), "data"), 1) == 0.0);
    expect_values(step(doc, 1, "output"), output, 24, 1e-14);
    expect_output_step(doc, 1, 24);
    json_decref(doc);
  }
}
END_TEST

START_TEST(test_lrn_steps) {
  /* (2, 3, 4) = (N, C, L), an even size 2 and an odd 3: torch's window
   * [c - size / 2, c + (size - 1) / 2], ONNX's [c - (size - 1) / 2,
   * c + ceil((size - 1) / 2)], clipped to [0, C) */
  double x[24];
  fill_data(x, 24, 47, -3, 3);
  const struct {
    const char *convention;
    int64_t size;
  } cases[] = {{"torch", 2}, {"onnx", 2}, {"torch", 3}, {"onnx", 3}};
  double even_sum[2][24];
  for (size_t k = 0; k < 4; k++) {
    char extra[160];
    snprintf(extra, sizeof extra,
             ", \"size\": %lld, \"alpha\": 0.5, \"beta\": 0.75, \"k\": 2,"
             " \"convention\": \"%s\"",
             (long long)cases[k].size, cases[k].convention);
    json_t *doc = family_steps(OP_LRN, x, extra);
    int64_t size = cases[k].size, onnx = cases[k].convention[0] == 'o';
    int64_t before = onnx ? (size - 1) / 2 : size / 2;
    int64_t after = onnx ? size / 2 : (size - 1) / 2;
    double sum[24], den[24], output[24];
    for (int64_t i = 0; i < 24; i++) {
      int64_t n = i / 12, c = (i / 4) % 3, l = i % 4;
      sum[i] = 0.0;
      for (int64_t d = c - before; d <= c + after; d++)
        if (d >= 0 && d < 3) sum[i] += x[(n * 3 + d) * 4 + l] * x[(n * 3 + d) * 4 + l];
      den[i] = pow(2.0 + 0.5 / (double)size * sum[i], 0.75);
      output[i] = x[i] / den[i];
    }
    if (size == 2) memcpy(even_sum[onnx], sum, sizeof sum);
    const int64_t full[] = {2, 3, 4};
    expect_shape(json_object_get(step(doc, 0, "square_sum"), "shape"), 3, full);
    expect_values(step(doc, 0, "square_sum"), sum, 24, 1e-14);
    expect_values(step(doc, 1, "denominator"), den, 24, 1e-14);
    expect_values(step(doc, 2, "output"), output, 24, 1e-14);
    expect_output_step(doc, 2, 24);
    json_decref(doc);
  }
  /* the two conventions place an even window differently */
  ck_assert(memcmp(even_sum[0], even_sum[1], sizeof even_sum[0]) != 0);
}
END_TEST

START_TEST(test_family_return) {
  /* return picks among output, stats, steps and histograms; output_stats
   * (the output's moments over rows or channels) has no such view here */
  json_t *doc = ok(OP_LP, "{\"input\": [[3,4],[0,2]], \"return\": \"stats\"}");
  ck_assert_ptr_null(json_object_get(doc, "output"));
  const double norms[] = {5, 2};
  const json_t *st = json_object_get(json_object_get(doc, "stats"), "norm");
  for (size_t i = 0; i < 2; i++) ck_assert(at(st, i) == norms[i]);
  json_decref(doc);
  doc = ok(OP_MVN, "{\"input\": [[3,4],[0,2]], \"axes\": [0], \"return\": []}");
  ck_assert_int_eq(json_object_size(doc), 0);
  json_decref(doc);
  const struct {
    op_t op;
    const char *body;
  } refused[] = {
      {OP_LP, "{\"input\": [1,2], \"return\": \"output_stats\"}"},
      {OP_LRN, "{\"input\": [[1,2]], \"size\": 1, \"return\": [\"output\", \"output_stats\"]}"},
      {OP_MVN, "{\"input\": [[1,2]], \"axes\": [1], \"return\": \"output_stats\"}"},
  };
  for (size_t k = 0; k < 3; k++)
    expect_problem(refused[k].op, refused[k].body, &limits, 422, "bad_field",
                   "return");
  /* the backwards of the family take no explain (grad_input and stats) */
  expect_problem(OP_LP_BACKWARD,
                 "{\"input\": [1,2], \"grad_output\": [1,1], \"explain\": true}",
                 &limits, 422, "unknown_field", "explain");
}
END_TEST

START_TEST(test_explain_cap) {
  limits_t lim = limits;
  lim.max_explain_elements = 8;
  int status;
  json_t *doc = call_lim(OP_LAYER, "{\"input\": [[1,2,3,4],[5,6,7,8]], \"explain\": true}",
                         &lim, &status);
  ck_assert_int_eq(status, 200);
  json_decref(doc);
  expect_problem(OP_LAYER, "{\"input\": [[1,2,3],[4,5,6],[7,8,9]], \"explain\": true}",
                 &lim, 422, "explain_too_large", "explain");
  expect_problem(OP_GROUP, "{\"input\": {\"shape\": [1,3,3], \"data\": [1,2,3,4,5,6,7,8,9]},"
                 " \"num_groups\": 3, \"return\": [\"output\", \"steps\"]}",
                 &lim, 422, "explain_too_large", "explain");
  /* the cap is on steps only: the same input without steps is fine */
  doc = call_lim(OP_LAYER, "{\"input\": [[1,2,3],[4,5,6],[7,8,9]], \"return\": [\"histograms\"]}",
                 &lim, &status);
  ck_assert_int_eq(status, 200);
  ck_assert_ptr_nonnull(json_object_get(doc, "histograms"));
  json_decref(doc);
  /* explain must be a boolean; false adds nothing */
  expect_problem(OP_LAYER, "{\"input\": [1,2], \"explain\": 1}", &limits, 422,
                 "bad_field", "explain");
  expect_problem(OP_LAYER, "{\"input\": [1,2], \"return\": [\"stepz\"]}", &limits,
                 422, "bad_field", "return");
  doc = ok(OP_LAYER, "{\"input\": [1,2], \"explain\": false}");
  ck_assert_ptr_null(json_object_get(doc, "steps"));
  json_decref(doc);
  /* explain applies to the norms only */
  expect_problem(OP_MOMENTS, "{\"input\": [1,2], \"explain\": true}", &limits,
                 422, "unknown_field", "explain");
}
END_TEST

/* ---- histograms ---------------------------------------------------------- */

/* Reference binning: [lo, hi] in bins equal parts, the maximum in the last
 * bin, non-finite values apart. */
static void ref_histogram(const double *v, size_t n, double lo, double hi,
                          int bins, uint64_t *counts, uint64_t *nonfinite) {
  memset(counts, 0, (size_t)bins * sizeof *counts);
  *nonfinite = 0;
  double width = (hi - lo) / bins;
  for (size_t i = 0; i < n; i++) {
    if (!isfinite(v[i])) {
      (*nonfinite)++;
      continue;
    }
    int k = (int)floor((v[i] - lo) / width);
    if (k < 0) k = 0;
    if (k >= bins) k = bins - 1;
    counts[k]++;
  }
}

static void finite_minmax(const double *v, size_t n, double *lo, double *hi) {
  for (size_t i = 0; i < n; i++)
    if (isfinite(v[i])) {
      if (v[i] < *lo) *lo = v[i];
      if (v[i] > *hi) *hi = v[i];
    }
}

static void expect_histogram(const json_t *h, const double *v, size_t n,
                             double lo, double hi, int bins) {
  uint64_t counts[64], nonfinite;
  ref_histogram(v, n, lo, hi, bins, counts, &nonfinite);
  const json_t *edges = json_object_get(h, "edges");
  const json_t *got = json_object_get(h, "counts");
  ck_assert_int_eq(json_array_size(edges), bins + 1);
  ck_assert_int_eq(json_array_size(got), bins);
  ck_assert(tu_close(at(edges, 0), lo, 1e-15));
  ck_assert(tu_close(at(edges, (size_t)bins), hi, 1e-15));
  for (int k = 0; k <= bins; k++)
    ck_assert(tu_close(at(edges, (size_t)k), lo + (hi - lo) * k / bins, 1e-14));
  uint64_t total = 0;
  for (int k = 0; k < bins; k++) {
    uint64_t c = (uint64_t)json_integer_value(json_array_get(got, (size_t)k));
    ck_assert_msg(c == counts[k], "bin %d: %llu, want %llu", k,
                  (unsigned long long)c, (unsigned long long)counts[k]);
    total += c;
  }
  ck_assert_int_eq(json_integer_value(json_object_get(h, "nonfinite")), nonfinite);
  ck_assert_int_eq(total + nonfinite, n);
}

/* The response's output data as doubles (n values). */
static void output_values(const json_t *doc, double *out, size_t n) {
  const json_t *data = json_object_get(json_object_get(doc, "output"), "data");
  ck_assert_int_eq(json_array_size(data), n);
  for (size_t i = 0; i < n; i++) out[i] = at(data, i);
}

START_TEST(test_histograms_reference) {
  /* 4 rows of 10: one row with an outlier, one with a NaN, one with +Inf
   * (its output is NaN everywhere) */
  double x[40];
  fill_data(x, 40, 23, -2, 3);
  x[7] = 40;
  x[15] = NAN;
  x[33] = INFINITY;
  char xs[2048], body[2600];
  put_list(xs, sizeof xs, x, 40);
  for (int separate = 0; separate < 2; separate++) {
    snprintf(body, sizeof body,
             "{\"input\": {\"shape\": [4,10], \"dtype\": \"float64\", \"data\": %s},"
             " \"return\": [\"output\", \"histograms\"], \"histogram_bins\": 7%s}",
             xs, separate ? ", \"histogram_range\": \"separate\"" : "");
    json_t *doc = ok(OP_LAYER, body);
    double y[40];
    output_values(doc, y, 40);
    const json_t *h = json_object_get(doc, "histograms");
    ck_assert_int_eq(json_integer_value(json_object_get(h, "bins")), 7);
    ck_assert_str_eq(json_string_value(json_object_get(h, "range")),
                     separate ? "separate" : "shared");
    double in_lo = INFINITY, in_hi = -INFINITY, out_lo = INFINITY, out_hi = -INFINITY;
    finite_minmax(x, 40, &in_lo, &in_hi);
    finite_minmax(y, 40, &out_lo, &out_hi);
    if (!separate) {
      in_lo = out_lo = fmin(in_lo, out_lo);
      in_hi = out_hi = fmax(in_hi, out_hi);
    }
    expect_histogram(json_object_get(h, "input"), x, 40, in_lo, in_hi, 7);
    expect_histogram(json_object_get(h, "output"), y, 40, out_lo, out_hi, 7);
    /* nan row -> 10 NaN outputs; inf row -> 10 NaN outputs */
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(h, "output"),
                                                        "nonfinite")), 20);
    json_decref(doc);
  }
}
END_TEST

START_TEST(test_histograms_every_norm) {
  double x[48];
  fill_data(x, 48, 31, -1, 4);
  char xs[2048], body[2600];
  put_list(xs, sizeof xs, x, 48);
  const struct {
    op_t op;
    const char *extra;
  } cases[] = {{OP_LAYER, ""}, {OP_RMS, ""}, {OP_BATCH, ""},
               {OP_GROUP, ", \"num_groups\": 2"}, {OP_INSTANCE, ""},
               {OP_LP, ", \"axis\": [0, 2], \"p\": 1"},
               {OP_LRN, ", \"size\": 2, \"alpha\": 1"},
               {OP_MVN, ", \"axes\": [0, 2]"}};
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    snprintf(body, sizeof body,
             "{\"input\": {\"shape\": [3,4,4], \"dtype\": \"float64\", \"data\": %s},"
             " \"return\": [\"output\", \"histograms\"]%s}", xs, cases[k].extra);
    json_t *doc = ok(cases[k].op, body);
    double y[48];
    output_values(doc, y, 48);
    const json_t *h = json_object_get(doc, "histograms");
    /* default: 32 bins, one range for both */
    ck_assert_int_eq(json_integer_value(json_object_get(h, "bins")), 32);
    ck_assert_str_eq(json_string_value(json_object_get(h, "range")), "shared");
    double lo = INFINITY, hi = -INFINITY;
    finite_minmax(x, 48, &lo, &hi);
    finite_minmax(y, 48, &lo, &hi);
    expect_histogram(json_object_get(h, "input"), x, 48, lo, hi, 32);
    expect_histogram(json_object_get(h, "output"), y, 48, lo, hi, 32);
    ck_assert_ptr_null(json_object_get(doc, "stats"));
    json_decref(doc);
  }
}
END_TEST

START_TEST(test_histogram_edge_cases) {
  /* constant input, separate ranges: [v - 0.5, v + 0.5], all in the middle */
  json_t *doc = ok(OP_LAYER,
                   "{\"input\": {\"shape\": [2,3], \"dtype\": \"float64\","
                   " \"data\": [5,5,5,5,5,5]}, \"return\": \"histograms\","
                   " \"histogram_bins\": 4, \"histogram_range\": \"separate\"}");
  const json_t *h = json_object_get(doc, "histograms");
  double five[6] = {5, 5, 5, 5, 5, 5}, zero[6] = {0};
  expect_histogram(json_object_get(h, "input"), five, 6, 4.5, 5.5, 4);
  expect_histogram(json_object_get(h, "output"), zero, 6, -0.5, 0.5, 4);
  json_decref(doc);
  /* nothing finite: an empty histogram around 0, everything non-finite */
  doc = ok(OP_RMS, "{\"input\": {\"shape\": [3], \"dtype\": \"float64\","
                   " \"data\": [\"NaN\", \"Infinity\", \"-Infinity\"]},"
                   " \"return\": [\"histograms\"], \"histogram_bins\": 1}");
  h = json_object_get(doc, "histograms");
  double bad[3] = {NAN, INFINITY, -INFINITY};
  expect_histogram(json_object_get(h, "input"), bad, 3, -0.5, 0.5, 1);
  ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(h, "input"),
                                                      "nonfinite")), 3);
  json_decref(doc);
  /* the largest bin count is allowed, past it is not */
  doc = ok(OP_LAYER, "{\"input\": [1,2,3], \"return\": \"histograms\","
                     " \"histogram_bins\": 1024}");
  h = json_object_get(doc, "histograms");
  ck_assert_int_eq(json_array_size(json_object_get(json_object_get(h, "input"), "counts")),
                   1024);
  json_decref(doc);
  const char *bad_bodies[] = {
      "{\"input\": [1,2], \"histogram_bins\": 0}",
      "{\"input\": [1,2], \"histogram_bins\": 1025}",
      "{\"input\": [1,2], \"histogram_bins\": 2.5}",
      "{\"input\": [1,2], \"histogram_bins\": \"8\"}",
  };
  for (size_t i = 0; i < sizeof bad_bodies / sizeof bad_bodies[0]; i++)
    expect_problem(OP_LAYER, bad_bodies[i], &limits, 422, "bad_field",
                   "histogram_bins");
  expect_problem(OP_LAYER, "{\"input\": [1,2], \"histogram_range\": \"both\"}",
                 &limits, 422, "bad_field", "histogram_range");
}
END_TEST

/* ---- the residual experiment --------------------------------------------- */

/* The reference stack, written from residual.h's description: x_0 and each
 * layer's W1 (N(0, 2/d)) and W2 (N(0, gain^2/d)) from splitmix64 streams
 * (x_0 from the seed; layer t from seed ^ (0xD1B54A32D192ED03 * (t + 1))),
 * standard normals by Box-Muller (one per pair of draws). */
static uint64_t ref_mix(uint64_t *s) { return tu_rand_u64(s); }

static double ref_gauss(uint64_t *s) {
  double u1 = ((double)(ref_mix(s) >> 11) + 0.5) / 9007199254740992.0;
  double u2 = (double)(ref_mix(s) >> 11) / 9007199254740992.0;
  return sqrt(-2 * log(u1)) * cos(2 * M_PI * u2);
}

enum { RT = 3, RD = 5, RL = 6 };

static void ref_norm(const double x[RT][RD], double y[RT][RD], int rms, double eps) {
  for (int r = 0; r < RT; r++) {
    double mean = 0, var = 0;
    if (!rms) {
      for (int j = 0; j < RD; j++) mean += x[r][j] / RD;
    }
    for (int j = 0; j < RD; j++) var += (x[r][j] - mean) * (x[r][j] - mean) / RD;
    for (int j = 0; j < RD; j++) y[r][j] = (x[r][j] - mean) / sqrt(var + eps);
  }
}

static void ref_sublayer(const double w1[RD][RD], const double w2[RD][RD],
                         const double x[RT][RD], double y[RT][RD]) {
  for (int r = 0; r < RT; r++) {
    double h[RD];
    for (int i = 0; i < RD; i++) {
      h[i] = 0;
      for (int j = 0; j < RD; j++) h[i] += w1[i][j] * x[r][j];
      if (h[i] < 0) h[i] = 0;
    }
    for (int i = 0; i < RD; i++) {
      y[r][i] = 0;
      for (int j = 0; j < RD; j++) y[r][i] += w2[i][j] * h[j];
    }
  }
}

static double ref_dot(const double a[RT][RD], const double b[RT][RD]) {
  double s = 0;
  for (int r = 0; r < RT; r++)
    for (int j = 0; j < RD; j++) s += a[r][j] * b[r][j];
  return s;
}

typedef struct {
  double rms[RL + 1], rel_update[RL], cosine[RL], cos_to_input[RL + 1];
} ref_curves_t;

static void ref_residual(uint64_t seed, int rms_norm, int post, double eps,
                         double gain, ref_curves_t *c) {
  double x0[RT][RD], x[RT][RD], next[RT][RD], h[RT][RD], w1[RD][RD], w2[RD][RD];
  uint64_t s = seed;
  for (int r = 0; r < RT; r++)
    for (int j = 0; j < RD; j++) x0[r][j] = ref_gauss(&s);
  memcpy(x, x0, sizeof x);
  c->rms[0] = sqrt(ref_dot(x0, x0) / (RT * RD));
  c->cos_to_input[0] = 1;
  for (int t = 0; t < RL; t++) {
    uint64_t ws = seed ^ (0xD1B54A32D192ED03ull * (uint64_t)(t + 1));
    for (int i = 0; i < RD; i++)
      for (int j = 0; j < RD; j++) w1[i][j] = sqrt(2.0 / RD) * ref_gauss(&ws);
    for (int i = 0; i < RD; i++)
      for (int j = 0; j < RD; j++) w2[i][j] = gain / sqrt((double)RD) * ref_gauss(&ws);
    if (!post) {
      ref_norm(x, h, rms_norm, eps);
      ref_sublayer(w1, w2, h, next);
      for (int r = 0; r < RT; r++)
        for (int j = 0; j < RD; j++) next[r][j] += x[r][j];
    } else {
      ref_sublayer(w1, w2, x, h);
      for (int r = 0; r < RT; r++)
        for (int j = 0; j < RD; j++) h[r][j] += x[r][j];
      ref_norm(h, next, rms_norm, eps);
    }
    double diff[RT][RD];
    for (int r = 0; r < RT; r++)
      for (int j = 0; j < RD; j++) diff[r][j] = next[r][j] - x[r][j];
    double xx = ref_dot(x, x), nn = ref_dot(next, next);
    c->rms[t + 1] = sqrt(nn / (RT * RD));
    c->rel_update[t] = sqrt(ref_dot(diff, diff) / xx);
    c->cosine[t] = ref_dot(x, next) / sqrt(xx * nn);
    c->cos_to_input[t + 1] = ref_dot(x0, next) / sqrt(ref_dot(x0, x0) * nn);
    memcpy(x, next, sizeof x);
  }
}

static void expect_curve(const json_t *curves, const char *name, const double *want,
                         size_t n, double tol) {
  const json_t *got = json_object_get(curves, name);
  ck_assert_msg(json_array_size(got) == n, "%s has %zu entries, want %zu", name,
                json_array_size(got), n);
  for (size_t i = 0; i < n; i++)
    ck_assert_msg(tu_close(at(got, i), want[i], tol), "%s[%zu] = %.9g, want %.9g",
                  name, i, at(got, i), want[i]);
}

START_TEST(test_simulate_reference) {
  const char *norms[] = {"layer", "rms"};
  for (int nm = 0; nm < 2; nm++) {
    char body[256];
    snprintf(body, sizeof body,
             "{\"tokens\": %d, \"d\": %d, \"layers\": %d, \"norm\": \"%s\","
             " \"seed\": 42, \"gain\": 1.5, \"eps\": 0.001}", RT, RD, RL, norms[nm]);
    json_t *doc = ok(OP_RESIDUAL, body);
    ck_assert_int_eq(json_integer_value(json_object_get(doc, "tokens")), RT);
    ck_assert_int_eq(json_integer_value(json_object_get(doc, "d")), RD);
    ck_assert_int_eq(json_integer_value(json_object_get(doc, "layers")), RL);
    ck_assert_int_eq(json_integer_value(json_object_get(doc, "seed")), 42);
    ck_assert_str_eq(json_string_value(json_object_get(doc, "norm")), norms[nm]);
    for (int post = 0; post < 2; post++) {
      ref_curves_t c;
      ref_residual(42, nm, post, 0.001, 1.5, &c);
      const json_t *curves = json_object_get(doc, post ? "post" : "pre");
      ck_assert_ptr_nonnull(curves);
      /* float32 text: 1e-6 relative */
      expect_curve(curves, "rms", c.rms, RL + 1, 1e-6);
      expect_curve(curves, "rel_update", c.rel_update, RL, 1e-6);
      expect_curve(curves, "cosine", c.cosine, RL, 1e-6);
      expect_curve(curves, "cos_to_input", c.cos_to_input, RL + 1, 1e-6);
    }
    json_decref(doc);
  }
}
END_TEST

START_TEST(test_simulate_defaults_and_determinism) {
  json_t *a = ok(OP_RESIDUAL, "{}");
  ck_assert_int_eq(json_integer_value(json_object_get(a, "tokens")), 16);
  ck_assert_int_eq(json_integer_value(json_object_get(a, "d")), 64);
  ck_assert_int_eq(json_integer_value(json_object_get(a, "layers")), 24);
  ck_assert_int_eq(json_integer_value(json_object_get(a, "seed")), 1);
  ck_assert_str_eq(json_string_value(json_object_get(a, "norm")), "layer");
  const char *names[] = {"pre", "post"};
  for (int k = 0; k < 2; k++) {
    const json_t *c = json_object_get(a, names[k]);
    ck_assert_int_eq(json_array_size(json_object_get(c, "rms")), 25);
    ck_assert_int_eq(json_array_size(json_object_get(c, "cos_to_input")), 25);
    ck_assert_int_eq(json_array_size(json_object_get(c, "rel_update")), 24);
    ck_assert_int_eq(json_array_size(json_object_get(c, "cosine")), 24);
    ck_assert(at(json_object_get(c, "cos_to_input"), 0) == 1.0);
  }
  /* the same seed gives the same numbers; a placement alone gives the
   * same curves as in "both"; another seed gives others */
  json_t *b = ok(OP_RESIDUAL, "{\"seed\": 1, \"placement\": \"both\"}");
  ck_assert(json_equal(a, b));
  json_t *pre = ok(OP_RESIDUAL, "{\"placement\": \"pre\"}");
  ck_assert_ptr_null(json_object_get(pre, "post"));
  ck_assert(json_equal(json_object_get(pre, "pre"), json_object_get(a, "pre")));
  json_t *post = ok(OP_RESIDUAL, "{\"placement\": \"post\"}");
  ck_assert_ptr_null(json_object_get(post, "pre"));
  ck_assert(json_equal(json_object_get(post, "post"), json_object_get(a, "post")));
  json_t *other = ok(OP_RESIDUAL, "{\"seed\": 2}");
  ck_assert(!json_equal(json_object_get(other, "pre"), json_object_get(a, "pre")));
  json_decref(a);
  json_decref(b);
  json_decref(pre);
  json_decref(post);
  json_decref(other);
}
END_TEST

/* Facts that hold whatever the random draws: the law of cosines ties the
 * four curves together; Post-Norm keeps the stream at RMS 1; Pre-Norm's
 * stream grows and each layer moves it relatively less. */
START_TEST(test_simulate_invariants) {
  const char *norms[] = {"layer", "rms"};
  for (int nm = 0; nm < 2; nm++) {
    char body[128];
    snprintf(body, sizeof body, "{\"layers\": 48, \"norm\": \"%s\", \"seed\": 7}",
             norms[nm]);
    json_t *doc = ok(OP_RESIDUAL, body);
    for (int k = 0; k < 2; k++) {
      const json_t *c = json_object_get(doc, k ? "post" : "pre");
      const json_t *rms = json_object_get(c, "rms"), *rel = json_object_get(c, "rel_update"),
                   *cos = json_object_get(c, "cosine"), *c0 = json_object_get(c, "cos_to_input");
      for (size_t t = 0; t < 48; t++) {
        double q = at(rms, t + 1) / at(rms, t), r = at(rel, t), ct = at(cos, t);
        ck_assert_msg(fabs(r * r - (1 + q * q - 2 * q * ct)) < 1e-5,
                      "%s %s layer %zu: law of cosines", norms[nm], k ? "post" : "pre", t);
        ck_assert(ct >= -1 && ct <= 1 + 1e-6);
        ck_assert(at(c0, t + 1) >= -1 && at(c0, t + 1) <= 1 + 1e-6);
        ck_assert(r >= 0);
        /* post: every layer ends in a norm without affine */
        if (k == 1) ck_assert_msg(fabs(at(rms, t + 1) - 1) < 1e-4, "post rms %g",
                                  at(rms, t + 1));
      }
      if (k == 0) {
        ck_assert(at(rms, 48) > 2 * at(rms, 0));
        ck_assert(at(rel, 47) < at(rel, 0));
        ck_assert(at(cos, 47) > at(cos, 0));
      }
    }
    json_decref(doc);
  }
}
END_TEST

START_TEST(test_simulate_gain_zero) {
  /* F_t = 0: Pre-Norm leaves the stream alone; Post-Norm normalizes once
   * and then stays put (Norm(Norm(x)) = Norm(x) up to eps) */
  json_t *doc = ok(OP_RESIDUAL, "{\"gain\": 0, \"layers\": 5, \"tokens\": 4, \"d\": 8}");
  const json_t *pre = json_object_get(doc, "pre"), *post = json_object_get(doc, "post");
  double rms0 = at(json_object_get(pre, "rms"), 0);
  for (size_t t = 0; t < 5; t++) {
    ck_assert(tu_close(at(json_object_get(pre, "rms"), t + 1), rms0, 1e-6));
    ck_assert(at(json_object_get(pre, "rel_update"), t) == 0);
    ck_assert(tu_close(at(json_object_get(pre, "cosine"), t), 1, 1e-7));
    ck_assert(tu_close(at(json_object_get(pre, "cos_to_input"), t + 1), 1, 1e-7));
    ck_assert(tu_close(at(json_object_get(post, "rms"), t + 1), 1, 1e-4));
    if (t > 0) {
      ck_assert(at(json_object_get(post, "rel_update"), t) < 1e-4);
      ck_assert(tu_close(at(json_object_get(post, "cosine"), t), 1, 1e-7));
    }
  }
  json_decref(doc);
}
END_TEST

START_TEST(test_simulate_errors) {
  const struct {
    const char *body, *code, *field;
  } cases[] = {
      {"{\"d\": 1}", "bad_field", "d"},
      {"{\"d\": 4097}", "bad_field", "d"},
      {"{\"layers\": 0}", "bad_field", "layers"},
      {"{\"tokens\": 4097}", "bad_field", "tokens"},
      {"{\"tokens\": 2.5}", "bad_field", "tokens"},
      {"{\"norm\": \"batch\"}", "bad_field", "norm"},
      {"{\"placement\": \"middle\"}", "bad_field", "placement"},
      {"{\"seed\": -1}", "bad_field", "seed"},
      {"{\"gain\": -1}", "bad_field", "gain"},
      {"{\"gain\": \"big\"}", "bad_field", "gain"},
      {"{\"input\": [1, 2]}", "unknown_field", "input"},
      {"{\"layers\": 4096, \"tokens\": 4096, \"d\": 4096}", "simulation_too_large", NULL},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    expect_problem(OP_RESIDUAL, cases[i].body, &limits, 422, cases[i].code,
                   cases[i].field);
  int status;
  json_t *doc = call(OP_RESIDUAL, "{\"eps\": -1}", &status);
  ck_assert_int_eq(status, 422);
  json_decref(doc);
}
END_TEST

Suite *explain_suite(void) {
  Suite *s = suite_create("explain");
  TCase *steps = tcase_create("Steps");
  tcase_add_test(steps, test_layer_steps);
  tcase_add_test(steps, test_layer_steps_options);
  tcase_add_test(steps, test_rms_steps);
  tcase_add_test(steps, test_channel_norm_steps);
  tcase_add_test(steps, test_batch_eval_steps);
  tcase_add_test(steps, test_steps_float32_and_constant);
  tcase_add_test(steps, test_mvn_steps);
  tcase_add_test(steps, test_lp_steps);
  tcase_add_test(steps, test_lrn_steps);
  tcase_add_test(steps, test_family_return);
  tcase_add_test(steps, test_explain_cap);
  suite_add_tcase(s, steps);
  TCase *hist = tcase_create("Histograms");
  tcase_add_test(hist, test_histograms_reference);
  tcase_add_test(hist, test_histograms_every_norm);
  tcase_add_test(hist, test_histogram_edge_cases);
  suite_add_tcase(s, hist);
  TCase *sim = tcase_create("Simulate");
  tcase_add_test(sim, test_simulate_reference);
  tcase_add_test(sim, test_simulate_defaults_and_determinism);
  tcase_add_test(sim, test_simulate_invariants);
  tcase_add_test(sim, test_simulate_gain_zero);
  tcase_add_test(sim, test_simulate_errors);
  tcase_set_timeout(sim, 30);
  suite_add_tcase(s, sim);
  return s;
}
