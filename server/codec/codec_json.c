/* codec_json.c -- the /v1 JSON wire format and its binary framing.
 *
 * JSON: the body is one object of request fields (decode.c). Framed
 * (application/octet-stream + Inference-Header-Content-Length: N, the
 * KServe v2 binary data extension): the first N bytes are that JSON object,
 * where any tensor may say "parameters": {"binary_data_size": bytes} instead
 * of "data", and the raw little-endian tensors follow in header order.
 * Responses are JSON, or framed when the request is framed, says
 * "binary_data_output": true, or Accept asks for application/octet-stream:
 * then output and running statistics travel as raw bytes and the small
 * statistics stay JSON arrays. */
#include <math.h>
#include <string.h>

#include "codec.h"
#include "decode.h"
#include "encode.h"

static int v1_decode(const codec_input_t *in, const limits_t *lim,
                     request_t *req, problem_t *prob) {
  decode_ctx_t ctx = {.lim = lim};
  size_t json_len;
  json_t *root;
  if (decode_frame(in->body, in->len, in->header_length, &ctx, &json_len,
                   prob) != 0)
    return -1;
  int rc = decode_json_root(&ctx, in->body, json_len, &root, prob);
  if (rc == 0) rc = decode_query(in->query, in->nquery, root, prob);
  if (rc == 0) rc = decode_request(&ctx, root, in->op, req, prob);
  json_decref(root);
  decode_ctx_release(&ctx);
  return rc;
}

static int framed_decode(const codec_input_t *in, const limits_t *lim,
                         request_t *req, problem_t *prob) {
  if (in->header_length < 0)
    return problem_set(prob, PROBLEM_MISSING_HEADER_LENGTH, NULL,
                       "application/octet-stream bodies need the header "
                       "Inference-Header-Content-Length (the size of the JSON "
                       "header that starts the body)");
  return v1_decode(in, lim, req, prob);
}

/* A tensor as {"shape","dtype","data"} or, framed, with its bytes in tail. */
static void put_tensor(buf_t *b, tail_t *tail, const norm_tensor_t *t) {
  buf_puts(b, "{\"shape\":");
  encode_shape(b, t->rank, t->shape);
  buf_printf(b, ",\"dtype\":\"%s\",", norm_dtype_name(t->dtype));
  if (tail != NULL) {
    buf_printf(b, "\"parameters\":{\"binary_data_size\":%zu}}",
               encode_tensor_bytes(tail, t));
  } else {
    buf_puts(b, "\"data\":");
    encode_tensor_data(b, t);
    buf_putc(b, '}');
  }
}

/* "name":{"shape":[...],"mean":[...],"var":[...],"rms":[...],"rstd":[...],
 * "norm":[...]} after *sep, with those of stats[] (in that order) that are
 * there; nothing when none is. */
static void put_stats(buf_t *b, const char **sep, const char *name,
                      const result_t *res, const double *const stats[5],
                      norm_dtype_t dtype) {
  static const char *const names[5] = {"mean", "var", "rms", "rstd", "norm"};
  int any = 0;
  for (int k = 0; k < 5; k++) any |= stats[k] != NULL;
  if (!any) return; /* local response norm has no per-group statistics */
  buf_printf(b, "%s\"%s\":{\"shape\":", *sep, name);
  encode_shape(b, res->stats_rank, res->stats_shape);
  for (int k = 0; k < 5; k++)
    if (stats[k] != NULL) {
      buf_printf(b, ",\"%s\":", names[k]);
      encode_doubles(b, stats[k], res->ngroups, dtype);
    }
  buf_putc(b, '}');
  *sep = ",";
}

static void put_moments(buf_t *b, const result_t *res) {
  size_t n = res->ngroups;
  buf_puts(b, "{\"shape\":");
  encode_shape(b, res->stats_rank, res->stats_shape);
  const char *names[] = {"count", "mean", "m2", "var"};
  for (int k = 0; k < 4; k++) {
    buf_printf(b, ",\"%s\":[", names[k]);
    for (size_t g = 0; g < n; g++) {
      const norm_moments_t *m = &res->moments[g];
      double v = k == 0 ? m->count : k == 1 ? m->mean : k == 2 ? m->m2
                 : m->count > 0 ? m->m2 / m->count : NAN;
      if (g) buf_putc(b, ',');
      encode_number(b, v, NORM_F64);
    }
    buf_putc(b, ']');
  }
  buf_putc(b, '}');
}

static void put_histogram(buf_t *b, const histogram_t *h, int64_t bins,
                          norm_dtype_t dtype) {
  buf_puts(b, "{\"edges\":[");
  for (int64_t k = 0; k <= bins; k++) {
    if (k) buf_putc(b, ',');
    /* in halves, as explain.c bins them, with the fraction of the span
     * taken first: no overflow where hi - lo passes DBL_MAX */
    double half_lo = h->lo * 0.5, half_span = h->hi * 0.5 - half_lo;
    encode_number(b, 2 * (half_lo + half_span * ((double)k / (double)bins)), dtype);
  }
  buf_puts(b, "],\"counts\":[");
  for (int64_t k = 0; k < bins; k++)
    buf_printf(b, "%s%llu", k ? "," : "", (unsigned long long)h->counts[k]);
  buf_printf(b, "],\"nonfinite\":%llu}", (unsigned long long)h->nonfinite);
}

/* "steps":[...], "histograms":{...} when asked for, each after *sep */
static void put_teaching(buf_t *b, const request_t *req, const result_t *res,
                         norm_dtype_t sdt, const char **sep) {
  if (req->ret & RET_STEPS) {
    buf_printf(b, "%s\"steps\":[", *sep);
    *sep = ",";
    for (int i = 0; i < res->nsteps; i++) {
      const step_t *st = &res->steps[i];
      buf_printf(b, "%s{\"name\":\"%s\",\"shape\":", i ? "," : "", st->name);
      encode_shape(b, st->rank, st->shape);
      buf_puts(b, ",\"data\":");
      encode_doubles(b, st->data, st->n, sdt);
      buf_putc(b, '}');
    }
    buf_putc(b, ']');
  }
  if (req->ret & RET_HISTOGRAMS) {
    buf_printf(b, "%s\"histograms\":{\"bins\":%lld,\"range\":\"%s\",\"input\":",
               *sep, (long long)res->bins,
               req->histogram_separate ? "separate" : "shared");
    *sep = ",";
    put_histogram(b, &res->hist_input, res->bins, sdt);
    buf_puts(b, ",\"output\":");
    put_histogram(b, &res->hist_output, res->bins, sdt);
    buf_putc(b, '}');
  }
}

static void put_residual(buf_t *b, const request_t *req, const result_t *res) {
  size_t layers = (size_t)req->residual.layers;
  buf_printf(b, "{\"tokens\":%lld,\"d\":%lld,\"layers\":%lld,\"norm\":\"%s\","
                "\"seed\":%llu",
             (long long)req->residual.tokens, (long long)req->residual.d,
             (long long)layers, req->residual.norm == 0 ? "layer" : "rms",
             (unsigned long long)req->residual.seed);
  if (req->residual.gradients)
    buf_printf(b, ",\"classes\":%lld", (long long)req->residual.classes);
  const char *names[RESIDUAL_PLACEMENTS] = {"pre", "post", "deepnorm"};
  for (int k = 0; k < RESIDUAL_PLACEMENTS; k++) {
    const residual_curves_t *c = &res->curves[k];
    if (c->rms == NULL) continue;
    buf_printf(b, ",\"%s\":{\"rms\":", names[k]);
    encode_doubles(b, c->rms, layers + 1, NORM_F32);
    buf_puts(b, ",\"rel_update\":");
    encode_doubles(b, c->rel_update, layers, NORM_F32);
    buf_puts(b, ",\"cosine\":");
    encode_doubles(b, c->cosine, layers, NORM_F32);
    buf_puts(b, ",\"cos_to_input\":");
    encode_doubles(b, c->cos_to_input, layers + 1, NORM_F32);
    if (c->grad_w1 != NULL) {
      buf_puts(b, ",\"loss\":");
      encode_number(b, c->loss, NORM_F32);
      buf_puts(b, ",\"grad_w1\":");
      encode_doubles(b, c->grad_w1, layers, NORM_F32);
      buf_puts(b, ",\"grad_w2\":");
      encode_doubles(b, c->grad_w2, layers, NORM_F32);
      buf_puts(b, ",\"grad_stream\":");
      encode_doubles(b, c->grad_stream, layers + 1, NORM_F32);
    }
    buf_putc(b, '}');
  }
  buf_putc(b, '}');
}

static void put_norm_result(buf_t *b, tail_t *tail, const request_t *req,
                            const result_t *res) {
  /* statistics in the precision of the input: float64 stays double */
  norm_dtype_t sdt = req->input.t.dtype == NORM_F64 ? NORM_F64 : NORM_F32;
  const char *sep = "";
  buf_putc(b, '{');
  if (req->ret & RET_OUTPUT) {
    buf_puts(b, "\"output\":");
    put_tensor(b, tail, &res->output);
    if (res->residual_out.data != NULL) { /* fused add: h, what was normalized */
      buf_puts(b, ",\"residual_out\":");
      put_tensor(b, tail, &res->residual_out);
    }
    sep = ",";
  }
  if (req->ret & RET_STATS) {
    const double *stats[] = {res->mean, res->var, res->rms, res->rstd, res->norm};
    put_stats(b, &sep, "stats", res, stats, sdt);
  }
  if (req->ret & RET_OUTPUT_STATS) {
    const double *stats[] = {res->out_mean, res->out_var, res->out_rms, NULL, NULL};
    put_stats(b, &sep, "output_stats", res, stats, sdt);
  }
  if ((req->ret & RET_RUNNING) && res->has_running) {
    buf_printf(b, "%s\"running_mean\":", sep);
    put_tensor(b, tail, &res->running_mean);
    buf_puts(b, ",\"running_var\":");
    put_tensor(b, tail, &res->running_var);
    buf_printf(b, ",\"num_batches_tracked\":%lld",
               (long long)res->num_batches_tracked);
    sep = ",";
  }
  put_teaching(b, req, res, sdt, &sep);
  buf_putc(b, '}');
}

/* A backward's answer: grad_input, grad_weight and grad_bias (when the
 * request has a weight / bias), stats, steps; the tensors framed when
 * binary. */
static void put_backward_result(buf_t *b, tail_t *tail, const request_t *req,
                                const result_t *res) {
  norm_dtype_t sdt = req->input.t.dtype == NORM_F64 ? NORM_F64 : NORM_F32;
  const char *sep = "";
  buf_putc(b, '{');
  const struct {
    unsigned bit;
    const char *name;
    const norm_tensor_t *t;
  } grads[] = {{RET_OUTPUT, "grad_input", &res->output},
               {RET_GRAD_WEIGHT, "grad_weight", &res->grad_weight},
               {RET_GRAD_BIAS, "grad_bias", &res->grad_bias}};
  for (size_t k = 0; k < sizeof grads / sizeof grads[0]; k++)
    if ((req->ret & grads[k].bit) && grads[k].t->data != NULL) {
      buf_printf(b, "%s\"%s\":", sep, grads[k].name);
      put_tensor(b, tail, grads[k].t);
      sep = ",";
    }
  if (req->ret & RET_STATS) {
    const double *stats[] = {res->mean, res->var, res->rms, res->rstd, res->norm};
    put_stats(b, &sep, "stats", res, stats, sdt);
  }
  put_teaching(b, req, res, sdt, &sep);
  buf_putc(b, '}');
}

static int encode_v1(const request_t *req, const result_t *res, int binary,
                     reply_t *out, problem_t *prob) {
  buf_t b;
  tail_t tail;
  buf_init(&b);
  tail_init(&tail);
  switch (op_info(req->op)->kind) { /* what the answer holds */
  case OP_KIND_NORM: put_norm_result(&b, binary ? &tail : NULL, req, res); break;
  case OP_KIND_BACKWARD:
    put_backward_result(&b, binary ? &tail : NULL, req, res);
    break;
  case OP_KIND_STATS:
    put_moments(&b, res);
    binary = 0; /* nothing tensor-sized to frame */
    break;
  case OP_KIND_EXPERIMENT:
    put_residual(&b, req, res);
    binary = 0;
    break;
  }
  return encode_finish_json(&b, binary ? &tail : NULL, out, prob);
}

static int json_encode(const request_t *req, const result_t *res, reply_t *out,
                       problem_t *prob) {
  return encode_v1(req, res, req->binary_output, out, prob);
}

static int framed_encode(const request_t *req, const result_t *res,
                         reply_t *out, problem_t *prob) {
  return encode_v1(req, res, 1, out, prob);
}

const codec_t codec_json = {
    .name = "json",
    .media_type = "application/json",
    .decode = v1_decode,
    .encode = json_encode,
};

const codec_t codec_framed = {
    .name = "framed",
    .media_type = "application/octet-stream",
    .decode = framed_decode,
    .encode = framed_encode,
};
