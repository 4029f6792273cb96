/* codec_kserve.c -- the KServe v2 / Open Inference Protocol: one model per
 * operation that has one in the operation list (ops.h: layer_norm, ...,
 * layer_norm_backward, ...).
 *
 * A v2 inference request names its tensors ("inputs": input, weight, bias,
 * running_mean, running_var, and mean/var for batch mode "given") and puts
 * the scalar settings in "parameters" (eps, normalized_shape, num_groups,
 * mode, ...). It is translated into the /v1 field object and decoded by
 * decode.c, so both protocols validate alike. Tensors may be JSON data
 * (flat or nested) or binary (binary data extension: "parameters":
 * {"binary_data_size": n} and the bytes after the JSON header). Outputs:
 * output, mean, var, rstd (rms and rstd for rms_norm), running_mean and
 * running_var; the request's "outputs" list chooses them and which come back
 * as binary data ("parameters": {"binary_data": true}, or the request
 * parameter "binary_data_output": true for all, which an output's own
 * "binary_data" overrides). A "model_name" in the request (as in the binary
 * data extension's example) must name the URL's model. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "codec.h"
#include "decode.h"
#include "encode.h"
#include "kserve.h"
#include "op_stats.h"

static const struct {
  const char *v2;
  norm_dtype_t dtype;
} datatypes[] = {
    {"FP32", NORM_F32}, {"FP64", NORM_F64}, {"FP16", NORM_F16}, {"BF16", NORM_BF16},
};

static const struct {
  const char *name;
  unsigned bit;
} output_names[] = {
    {"output", V2_OUT_OUTPUT},           {"mean", V2_OUT_MEAN},
    {"var", V2_OUT_VAR},                 {"rstd", V2_OUT_RSTD},
    {"rms", V2_OUT_RMS},                 {"running_mean", V2_OUT_RUNNING_MEAN},
    {"running_var", V2_OUT_RUNNING_VAR}, {"grad_input", V2_OUT_GRAD_INPUT},
    {"grad_weight", V2_OUT_GRAD_WEIGHT}, {"grad_bias", V2_OUT_GRAD_BIAS},
    {"residual_out", V2_OUT_RESIDUAL_OUT}, {"norm", V2_OUT_NORM},
};

/* The models are the model column of the operation list (ops.h). */
int kserve_model_op(const char *model, op_t *op) {
  for (int i = 0; i < OP_COUNT; i++) {
    const char *name = op_info((op_t)i)->model;
    if (name != NULL && strcmp(name, model) == 0) {
      *op = (op_t)i;
      return 0;
    }
  }
  return -1;
}

const char *kserve_model_name(op_t op) {
  const char *name = (unsigned)op < OP_COUNT ? op_info(op)->model : NULL;
  return name != NULL ? name : "unknown";
}

static char model_list[512];
static pthread_once_t model_list_once = PTHREAD_ONCE_INIT;

static void model_list_build(void) {
  size_t o = 0;
  for (int i = 0; i < OP_COUNT; i++) {
    const char *name = op_info((op_t)i)->model;
    if (name != NULL && o < sizeof model_list)
      o += (size_t)snprintf(model_list + o, sizeof model_list - o, "%s%s",
                            o ? ", " : "", name);
  }
}

const char *kserve_model_list(void) {
  pthread_once(&model_list_once, model_list_build);
  return model_list;
}

static const char *v2_datatype(norm_dtype_t dtype) {
  for (size_t i = 0; i < sizeof datatypes / sizeof datatypes[0]; i++)
    if (datatypes[i].dtype == dtype) return datatypes[i].v2;
  return "FP32";
}

/* The outputs an op can return (req NULL: any request's, for metadata). */
static unsigned outputs_of(op_t op, const request_t *req) {
  if (op_info(op)->kind == OP_KIND_BACKWARD) {
    unsigned all = V2_OUT_GRAD_INPUT;
    if ((op_info(op)->fields & FIELD(WEIGHT)) && (req == NULL || req->weight.present))
      all |= V2_OUT_GRAD_WEIGHT;
    if ((op_info(op)->fields & FIELD(BIAS)) && (req == NULL || req->bias.present))
      all |= V2_OUT_GRAD_BIAS;
    return all;
  }
  /* a fused residual add answers h too */
  unsigned fused = (op_info(op)->fields & FIELD(RESIDUAL)) &&
                           (req == NULL || req->residual_in.present)
                       ? V2_OUT_RESIDUAL_OUT
                       : 0;
  if (op == OP_RMS) return V2_OUT_OUTPUT | V2_OUT_RMS | V2_OUT_RSTD | fused;
  if (op == OP_LP) return V2_OUT_OUTPUT | V2_OUT_NORM;
  if (op == OP_LRN) return V2_OUT_OUTPUT;
  unsigned all = V2_OUT_OUTPUT | V2_OUT_MEAN | V2_OUT_VAR | V2_OUT_RSTD | fused;
  if (op == OP_BATCH && (req == NULL || (req->batch.mode == NORM_TRAIN &&
                                          req->running_mean.present)))
    all |= V2_OUT_RUNNING_MEAN | V2_OUT_RUNNING_VAR;
  return all;
}

/* ---- decoding: v2 request -> /v1 field object ---- */

static int v2_error(problem_t *prob, const char *field, const char *fmt,
                    const char *arg) {
  return problem_set(prob, PROBLEM_BAD_INFERENCE_REQUEST, field, fmt, arg);
}

/* One entry of "inputs" as a /v1 tensor object under its name. */
static int translate_input(const json_t *in, json_t *obj, problem_t *prob) {
  static const char *const names[] = {"input", "grad_output", "residual",
                                      "weight", "bias", "running_mean",
                                      "running_var", "mean", "var"};
  const char *name = json_string_value(json_object_get(in, "name"));
  const json_t *shape = json_object_get(in, "shape");
  const char *datatype = json_string_value(json_object_get(in, "datatype"));
  const json_t *data = json_object_get(in, "data");
  const json_t *params = json_object_get(in, "parameters");
  if (!json_is_object(in) || name == NULL || shape == NULL || datatype == NULL)
    return v2_error(prob, "inputs", "%s", "each input needs name, shape and datatype");
  size_t k = 0;
  while (k < sizeof names / sizeof names[0] && strcmp(names[k], name) != 0) k++;
  if (k == sizeof names / sizeof names[0])
    return v2_error(prob, name, "unknown input \"%s\" (expected input, "
                    "grad_output, residual, weight, bias, running_mean, "
                    "running_var, mean, var)", name);
  if (json_object_get(obj, name) != NULL)
    return v2_error(prob, name, "input \"%s\" is given twice", name);
  const char *dtype = NULL;
  for (size_t i = 0; i < sizeof datatypes / sizeof datatypes[0]; i++)
    if (strcmp(datatypes[i].v2, datatype) == 0) dtype = norm_dtype_name(datatypes[i].dtype);
  if (dtype == NULL)
    return v2_error(prob, name, "unsupported datatype %s (FP32, FP64, FP16, BF16)",
                    datatype);
  json_t *t = json_pack("{s:O, s:s}", "shape", shape, "dtype", dtype);
  const json_t *size = json_is_object(params) ? json_object_get(params, "binary_data_size") : NULL;
  if (t == NULL) return problem_set(prob, PROBLEM_OUT_OF_MEMORY, NULL, "out of memory");
  if (size != NULL)
    json_object_set_new(t, "parameters", json_pack("{s:O}", "binary_data_size", size));
  else if (data != NULL)
    json_object_set(t, "data", (json_t *)data);
  json_object_set_new(obj, name, t);
  return 0;
}

static int decode_outputs(const json_t *outputs, request_t *req,
                          problem_t *prob) {
  if (!json_is_array(outputs))
    return v2_error(prob, "outputs", "%s", "outputs must be a list");
  req->v2_outputs = 0;
  for (size_t i = 0; i < json_array_size(outputs); i++) {
    const json_t *o = json_array_get(outputs, i);
    const char *name = json_string_value(json_object_get(o, "name"));
    if (name == NULL) return v2_error(prob, "outputs", "%s", "each output needs a name");
    unsigned bit = 0;
    for (size_t k = 0; k < sizeof output_names / sizeof output_names[0]; k++)
      if (strcmp(output_names[k].name, name) == 0) bit = output_names[k].bit;
    if (bit == 0 || !(bit & outputs_of(req->op, NULL)))
      return v2_error(prob, name, "unknown output \"%s\" for this model", name);
    /* an output of this model that this request cannot have: it lacks the
     * input the output comes from (422 naming it, not "unknown") */
    const char *needs = bit == V2_OUT_RESIDUAL_OUT  ? "residual"
                        : bit == V2_OUT_GRAD_WEIGHT ? "weight"
                        : bit == V2_OUT_GRAD_BIAS   ? "bias"
                                                    : NULL;
    if (!(bit & outputs_of(req->op, req)) && needs != NULL)
      return problem_set(prob, PROBLEM_MISSING_FIELD, needs,
                         "output \"%s\" needs the input \"%s\"", name, needs);
    if (!(bit & outputs_of(req->op, req))) /* batch norm's running stats */
      return v2_error(prob, name, "output \"%s\" is not answered by this "
                      "request", name);
    req->v2_outputs |= bit;
    const json_t *params = json_object_get(o, "parameters");
    /* an output's own binary_data overrides binary_data_output */
    const json_t *binary = json_object_get(params, "binary_data");
    if (json_is_true(binary)) req->v2_binary |= bit;
    else if (json_is_false(binary)) req->v2_binary &= ~bit;
  }
  return 0;
}

static int kserve_decode(const codec_input_t *in, const limits_t *lim,
                         request_t *req, problem_t *prob) {
  decode_ctx_t ctx = {.lim = lim};
  size_t json_len;
  if (decode_frame(in->body, in->len, in->header_length, &ctx, &json_len,
                   prob) != 0)
    return -1;
  json_t *root = NULL, *obj = json_object();
  int rc = -1;
  if (obj == NULL) return problem_set(prob, PROBLEM_OUT_OF_MEMORY, NULL, "out of memory");
  if (decode_json_root(&ctx, in->body, json_len, &root, prob) != 0) goto done;
  const char *key;
  json_t *value;
  json_object_foreach(root, key, value) {
    if (strcmp(key, "id") && strcmp(key, "inputs") && strcmp(key, "outputs") &&
        strcmp(key, "parameters") && strcmp(key, "model_name")) {
      v2_error(prob, key, "unknown request field \"%s\"", key);
      goto done;
    }
  }
  const json_t *model_name = json_object_get(root, "model_name");
  if (model_name != NULL && (!json_is_string(model_name) ||
                             strcmp(json_string_value(model_name),
                                    kserve_model_name(in->op)) != 0)) {
    v2_error(prob, "model_name", "model_name must be \"%s\", the model of the URL",
             kserve_model_name(in->op));
    goto done;
  }
  const json_t *id = json_object_get(root, "id");
  if (id != NULL) {
    if (!json_is_string(id) || json_string_length(id) > 256) {
      v2_error(prob, "id", "%s", "id must be a string of at most 256 bytes");
      goto done;
    }
    req->v2_id = strdup(json_string_value(id));
  }
  const json_t *inputs = json_object_get(root, "inputs");
  if (!json_is_array(inputs) || json_array_size(inputs) == 0) {
    v2_error(prob, "inputs", "%s", "inputs must be a non-empty list");
    goto done;
  }
  for (size_t i = 0; i < json_array_size(inputs); i++)
    if (translate_input(json_array_get(inputs, i), obj, prob) != 0) goto done;
  const json_t *params = json_object_get(root, "parameters");
  if (params != NULL && !json_is_object(params)) {
    v2_error(prob, "parameters", "%s", "parameters must be an object");
    goto done;
  }
  json_object_foreach((json_t *)params, key, value) {
    if (strcmp(key, "binary_data_output") == 0) {
      req->binary_output = json_is_true(value);
      if (req->binary_output) req->v2_binary = ~0u;
    } else if (json_object_get(obj, key) != NULL) {
      v2_error(prob, key, "parameter \"%s\" is also an input", key);
      goto done;
    } else {
      json_object_set(obj, key, value);
    }
  }
  if (decode_request(&ctx, obj, in->op, req, prob) != 0) goto done;
  req->v2_outputs = outputs_of(in->op, req);
  const json_t *outputs = json_object_get(root, "outputs");
  if (outputs != NULL && decode_outputs(outputs, req, prob) != 0) goto done;
  req->ret = RET_OUTPUT | RET_STATS | RET_RUNNING | RET_GRAD_WEIGHT | RET_GRAD_BIAS;
  rc = 0;
done:
  json_decref(root);
  json_decref(obj);
  decode_ctx_release(&ctx);
  return rc;
}

/* ---- encoding ---- */

/* One output: JSON data, or binary bytes in tail when asked. */
static void put_output(buf_t *b, tail_t *tail, const request_t *req,
                       unsigned bit, const char *name, const norm_tensor_t *t,
                       const double *stats, int rank, const int64_t *shape,
                       norm_dtype_t stats_dtype, size_t n, int *first) {
  if (!(req->v2_outputs & bit)) return;
  norm_dtype_t dtype = t ? t->dtype : stats_dtype;
  buf_printf(b, "%s{\"name\":\"%s\",\"datatype\":\"%s\",\"shape\":", *first ? "" : ",",
             name, v2_datatype(dtype));
  *first = 0;
  encode_shape(b, t ? t->rank : rank, t ? t->shape : shape);
  if (req->v2_binary & bit) {
    size_t bytes = t ? encode_tensor_bytes(tail, t)
                     : encode_doubles_bytes(tail, stats, n, stats_dtype);
    buf_printf(b, ",\"parameters\":{\"binary_data_size\":%zu}}", bytes);
    return;
  }
  buf_puts(b, ",\"data\":");
  if (t) encode_tensor_data(b, t);
  else encode_doubles(b, stats, n, stats_dtype);
  buf_putc(b, '}');
}

static int kserve_encode(const request_t *req, const result_t *res,
                         reply_t *out, problem_t *prob) {
  buf_t b;
  tail_t tail;
  buf_init(&b);
  tail_init(&tail);
  norm_dtype_t sdt = req->input.t.dtype == NORM_F64 ? NORM_F64 : NORM_F32;
  buf_printf(&b, "{\"model_name\":\"%s\",\"model_version\":\"1\"",
             kserve_model_name(req->op));
  if (req->v2_id) {
    buf_puts(&b, ",\"id\":");
    encode_string(&b, req->v2_id);
  }
  if (res->has_running)
    buf_printf(&b, ",\"parameters\":{\"num_batches_tracked\":%lld}",
               (long long)res->num_batches_tracked);
  buf_puts(&b, ",\"outputs\":[");
  int first = 1;
  const int r = res->stats_rank;
  const int64_t *s = res->stats_shape;
  size_t n = res->ngroups;
  put_output(&b, &tail, req, V2_OUT_OUTPUT, "output", &res->output, NULL, 0, NULL, sdt, 0, &first);
  if (res->residual_out.data)
    put_output(&b, &tail, req, V2_OUT_RESIDUAL_OUT, "residual_out", &res->residual_out, NULL, 0, NULL, sdt, 0, &first);
  put_output(&b, &tail, req, V2_OUT_GRAD_INPUT, "grad_input", &res->output, NULL, 0, NULL, sdt, 0, &first);
  if (res->grad_weight.data)
    put_output(&b, &tail, req, V2_OUT_GRAD_WEIGHT, "grad_weight", &res->grad_weight, NULL, 0, NULL, sdt, 0, &first);
  if (res->grad_bias.data)
    put_output(&b, &tail, req, V2_OUT_GRAD_BIAS, "grad_bias", &res->grad_bias, NULL, 0, NULL, sdt, 0, &first);
  put_output(&b, &tail, req, V2_OUT_MEAN, "mean", NULL, res->mean, r, s, sdt, n, &first);
  put_output(&b, &tail, req, V2_OUT_VAR, "var", NULL, res->var, r, s, sdt, n, &first);
  put_output(&b, &tail, req, V2_OUT_RMS, "rms", NULL, res->rms, r, s, sdt, n, &first);
  put_output(&b, &tail, req, V2_OUT_RSTD, "rstd", NULL, res->rstd, r, s, sdt, n, &first);
  put_output(&b, &tail, req, V2_OUT_NORM, "norm", NULL, res->norm, r, s, sdt, n, &first);
  if (res->has_running) {
    put_output(&b, &tail, req, V2_OUT_RUNNING_MEAN, "running_mean",
               &res->running_mean, NULL, 0, NULL, sdt, 0, &first);
    put_output(&b, &tail, req, V2_OUT_RUNNING_VAR, "running_var",
               &res->running_var, NULL, 0, NULL, sdt, 0, &first);
  }
  buf_puts(&b, "]}");
  int binary = tail.n > 0;
  return encode_finish_json(&b, binary ? &tail : NULL, out, prob);
}

/* ---- metadata, configuration, repository, statistics ---- */

/* One tensor of a model's signature: its name, how many dims (each -1:
 * any size), and for inputs whether a request may leave it out. */
typedef struct {
  const char *name;
  int rank;
  int optional;
} model_tensor_t;

enum { MODEL_MAX_TENSORS = 16 };

/* A model's inputs (outputs 0) or outputs (1): the one source of what GET
 * /v2/models/{m} and its /config list. Shapes as an input of the usual
 * rank produces them: (N, D) for layer and rms norm (stats per row),
 * (N, C, L) for the channel norms (stats per channel, per (n, group) or per
 * (n, c)). Returns how many it wrote. */
static size_t model_tensors(op_t op, int outputs, model_tensor_t *t) {
  op_t norm = op_info(op)->norm;
  int input_rank = norm == OP_LAYER || norm == OP_RMS ? 2 : 3;
  int stats_rank = norm == OP_GROUP || norm == OP_INSTANCE ? 2 : 1;
  size_t n = 0;
  if (!outputs) {
    /* the op's tensor fields (mode given's mean and var are not listed);
     * input, and a backward's grad_output, are required */
    static const struct {
      const char *name;
      unsigned long long field;
      int full_rank, optional;
    } inputs[] = {{"input", FIELD(INPUT), 1, 0},
                  {"grad_output", FIELD(GRAD_OUTPUT), 1, 0},
                  {"residual", FIELD(RESIDUAL), 1, 1},
                  {"weight", FIELD(WEIGHT), 0, 1},
                  {"bias", FIELD(BIAS), 0, 1},
                  {"running_mean", FIELD(RUNNING_MEAN), 0, 1},
                  {"running_var", FIELD(RUNNING_VAR), 0, 1}};
    for (size_t i = 0; i < sizeof inputs / sizeof inputs[0]; i++)
      if (op_info(op)->fields & inputs[i].field)
        t[n++] = (model_tensor_t){inputs[i].name,
                                  inputs[i].full_rank ? input_rank : 1,
                                  inputs[i].optional};
    return n;
  }
  unsigned outs = outputs_of(op, NULL);
  for (size_t k = 0; k < sizeof output_names / sizeof output_names[0]; k++) {
    unsigned bit = output_names[k].bit;
    if (!(outs & bit)) continue;
    int rank = bit & (V2_OUT_OUTPUT | V2_OUT_GRAD_INPUT | V2_OUT_RESIDUAL_OUT)
                   ? input_rank
               : bit & (V2_OUT_RUNNING_MEAN | V2_OUT_RUNNING_VAR |
                        V2_OUT_GRAD_WEIGHT | V2_OUT_GRAD_BIAS)
                   ? 1
                   : stats_rank;
    t[n++] = (model_tensor_t){output_names[k].name, rank, 0};
  }
  return n;
}

/* [-1,-1,...] of rank dims */
static void put_any_shape(buf_t *b, int rank) {
  buf_putc(b, '[');
  for (int d = 0; d < rank; d++) buf_puts(b, d ? ",-1" : "-1");
  buf_putc(b, ']');
}

void kserve_model_metadata(op_t op, buf_t *b) {
  model_tensor_t t[MODEL_MAX_TENSORS];
  buf_printf(b, "{\"name\":\"%s\",\"versions\":[\"1\"],\"platform\":\"normd\",",
             kserve_model_name(op));
  for (int outputs = 0; outputs <= 1; outputs++) {
    size_t n = model_tensors(op, outputs, t);
    buf_puts(b, outputs ? "],\"outputs\":[" : "\"inputs\":[");
    for (size_t i = 0; i < n; i++) {
      buf_printf(b, "%s{\"name\":\"%s\",\"datatype\":\"FP32\",\"shape\":",
                 i ? "," : "", t[i].name);
      put_any_shape(b, t[i].rank);
      buf_putc(b, '}');
    }
  }
  buf_puts(b, "],\"parameters\":{\"datatypes\":[\"FP32\",\"FP64\",\"FP16\",\"BF16\"]}}");
}

/* Triton's model configuration (docs/protocol/extension_model_configuration.md:
 * the ModelConfig protobuf of model_config.proto in JSON, field names as
 * in the proto): the same tensors as the metadata, data types in config
 * form, no batching (max_batch_size 0: dims are the whole shape). */
void kserve_model_config(op_t op, buf_t *b) {
  model_tensor_t t[MODEL_MAX_TENSORS];
  buf_printf(b, "{\"name\":\"%s\",\"platform\":\"normd\",\"backend\":\"normd\","
                "\"version_policy\":{\"latest\":{\"num_versions\":1}},"
                "\"max_batch_size\":0,",
             kserve_model_name(op));
  for (int outputs = 0; outputs <= 1; outputs++) {
    size_t n = model_tensors(op, outputs, t);
    buf_puts(b, outputs ? "],\"output\":[" : "\"input\":[");
    for (size_t i = 0; i < n; i++) {
      buf_printf(b, "%s{\"name\":\"%s\",\"data_type\":\"TYPE_FP32\",\"dims\":",
                 i ? "," : "", t[i].name);
      put_any_shape(b, t[i].rank);
      if (!outputs) buf_printf(b, ",\"optional\":%s", t[i].optional ? "true" : "false");
      buf_putc(b, '}');
    }
  }
  buf_puts(b, "]}");
}

void kserve_repository_index(buf_t *b) {
  buf_putc(b, '[');
  for (int op = 0, n = 0; op < OP_COUNT; op++)
    if (op_info((op_t)op)->model != NULL)
      buf_printf(b, "%s{\"name\":\"%s\",\"version\":\"1\",\"state\":\"READY\"}",
                 n++ ? "," : "", op_info((op_t)op)->model);
  buf_putc(b, ']');
}

static void put_duration(buf_t *b, const char *name, op_duration_t d, int first) {
  buf_printf(b, "%s\"%s\":{\"count\":%llu,\"ns\":%llu}", first ? "" : ",", name,
             (unsigned long long)d.count, (unsigned long long)d.ns);
}

static void put_model_stat(buf_t *b, op_t op) {
  op_stats_t s;
  op_stats_read(op, &s);
  buf_printf(b,
             "{\"name\":\"%s\",\"version\":\"1\",\"last_inference\":%llu,"
             "\"inference_count\":%llu,\"execution_count\":%llu,"
             "\"inference_stats\":{",
             kserve_model_name(op), (unsigned long long)s.last_inference_ms,
             (unsigned long long)s.inference_count,
             (unsigned long long)s.execution_count);
  put_duration(b, "success", s.success, 1);
  put_duration(b, "fail", s.fail, 0);
  put_duration(b, "queue", s.queue, 0);
  put_duration(b, "compute_input", s.compute_input, 0);
  put_duration(b, "compute_infer", s.compute_infer, 0);
  put_duration(b, "compute_output", s.compute_output, 0);
  put_duration(b, "cache_hit", (op_duration_t){0, 0}, 0); /* no cache */
  buf_puts(b, "},\"batch_stats\":[]}");
}

void kserve_model_stats(op_t op, buf_t *b) {
  buf_puts(b, "{\"model_stats\":[");
  if (op < OP_COUNT) {
    put_model_stat(b, op);
  } else {
    for (int i = 0, n = 0; i < OP_COUNT; i++)
      if (op_info((op_t)i)->model != NULL) {
        if (n++) buf_putc(b, ',');
        put_model_stat(b, (op_t)i);
      }
  }
  buf_puts(b, "]}");
}

const codec_t codec_kserve = {
    .name = "kserve",
    .media_type = "application/json",
    .decode = kserve_decode,
    .encode = kserve_encode,
};
