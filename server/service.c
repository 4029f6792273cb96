/* service.c -- bytes in, reply out: negotiation, decode, compute, encode. */
#include "service.h"

#include <stdlib.h>
#include <string.h>

#include "compute.h"
#include "op_stats.h"

/* Inference-Header-Content-Length: a plain decimal, or -1 when absent. */
static int parse_header_length(const char *text, int64_t *out,
                               problem_t *prob) {
  *out = -1;
  if (text == NULL) return 0;
  char *end;
  if (text[0] < '0' || text[0] > '9' ||
      (*out = (int64_t)strtoll(text, &end, 10)) < 0 || *end != '\0')
    return problem_set(prob, PROBLEM_BAD_HEADER_LENGTH, NULL,
                       "Inference-Header-Content-Length must be a byte count");
  return 0;
}

/* The wire formats of each /v1 operation (the takes / answers columns of
 * OPS_MAP); negotiation reads nothing else. Every operation takes and
 * answers JSON. A .npy body is the input tensor, so only the operations
 * with an input take one, and a .npy answer is the output tensor, so only
 * the norms give one. The framing is the JSON request with its tensors as
 * raw bytes after it: every operation takes it (merge and the experiment
 * have no tensors, so theirs is the JSON header alone), and those without
 * an output tensor answer a framed Accept with plain JSON (encode_v1). */
static const struct {
  const codec_t *const *takes, *const *answers;
} formats[OP_COUNT] = {
#define OP_FORMATS_(id, name, route, model, kind, norm, takes, answers, ...)          \
  [OP_##id] = {takes, answers},
    OPS_MAP(OP_FORMATS_)
#undef OP_FORMATS_
};

static int takes(op_t op, const codec_t *c) {
  for (const codec_t *const *t = formats[op].takes; *t != NULL; t++)
    if (*t == c) return 1;
  return 0;
}

/* What op answers, for a 406 detail. */
static const char *answers_text(op_t op) {
  op_kind_t kind = op_info(op)->kind;
  if (formats[op].answers == codecs_all)
    return "application/json, application/octet-stream or application/x-npy";
  /* framed answers carry tensors: a backward's gradients; moments and the
   * experiment answer a framed Accept with JSON */
  return kind == OP_KIND_BACKWARD
             ? "application/json or application/octet-stream (there is no "
               ".npy form: its answer holds several tensors)"
             : "application/json only (there is no .npy form)";
}

/* The decoder and encoder for this request, or a 415 / 406 problem. */
static int negotiate(const service_input_t *in, const codec_t **decoder,
                     const codec_t **encoder, problem_t *prob) {
  if (in->kserve) {
    const codec_t *c = codec_for_content_type(in->content_type);
    if (c != &codec_json && c != &codec_framed)
      return problem_set(prob, PROBLEM_UNSUPPORTED_MEDIA_TYPE, NULL,
                         "v2 inference takes application/json or "
                         "application/octet-stream");
    *decoder = *encoder = &codec_kserve;
    return 0;
  }
  *decoder = codec_for_content_type(in->content_type);
  if (*decoder == NULL)
    return problem_set(prob, PROBLEM_UNSUPPORTED_MEDIA_TYPE, NULL,
                       "Content-Type %s is not supported; send "
                       "application/json, application/octet-stream (binary "
                       "framing) or application/x-npy", in->content_type);
  if (!takes(in->op, *decoder))
    return problem_set(prob, PROBLEM_UNSUPPORTED_MEDIA_TYPE, NULL,
                       "%s takes no %s body (a .npy file is one input tensor, "
                       "and this operation %s); send application/json "
                       "or application/octet-stream (binary framing)",
                       op_info(in->op)->route, (*decoder)->media_type,
                       op_info(in->op)->fields & FIELD(INPUT)
                           ? "takes more tensors than that (input and "
                             "grad_output)"
                           : "has none");
  *encoder =
      codec_for_accept_among(in->accept, *decoder, formats[in->op].answers);
  if (*encoder != NULL) return 0;
  return problem_set(prob, PROBLEM_NOT_ACCEPTABLE, NULL,
                     "cannot answer with any type in Accept: %s; %s answers %s",
                     in->accept, op_info(in->op)->route, answers_text(in->op));
}

/* A request and its result, kept alive with a reply whose parts point
 * into them. */
typedef struct {
  request_t req;
  result_t res;
} kept_t;

static void kept_free(void *p) {
  kept_t *k = p;
  result_free(&k->res);
  request_free(&k->req);
  free(k);
}

/* Moves req and res into out->keep. Returns 0, or -1 (nothing moved). */
static int keep_with_reply(reply_t *out, request_t *req, result_t *res) {
  kept_t *k = malloc(sizeof *k);
  if (k == NULL) return -1;
  k->req = *req;
  k->res = *res;
  out->keep = k;
  out->keep_free = kept_free;
  return 0;
}

void service_handle(const service_input_t *in, const limits_t *lim,
                    reply_t *out) {
  problem_t prob;
  memset(&prob, 0, sizeof prob);
  memset(out, 0, sizeof *out);
  request_t req;
  result_t res;
  request_init(&req, in->op);
  req.body_mem = in->body_mem;
  memset(&res, 0, sizeof res);

  const codec_t *decoder = NULL, *encoder = NULL;
  codec_input_t msg = {.op = in->op, .body = in->body, .len = in->len,
                       .query = in->query, .nquery = in->nquery};
  /* each stage timed for op_stats: decode, compute, encode */
  op_timing_t timing = {.queue_ns = in->queue_ns};
  uint64_t mark = op_stats_now_ns(), now;
  int ok =
      parse_header_length(in->header_length, &msg.header_length, &prob) == 0 &&
      negotiate(in, &decoder, &encoder, &prob) == 0 &&
      decoder->decode(&msg, lim, &req, &prob) == 0;
  timing.input_ns = (now = op_stats_now_ns()) - mark;
  mark = now;
  if (ok) {
    ok = compute_run(&req, &res, &prob) == 0;
    timing.infer_ns = (now = op_stats_now_ns()) - mark;
    mark = now;
  }
  if (ok) encoder->encode(&req, &res, out, &prob);
  if (prob.status == 0 && out->nparts > 0) {
    /* binary tensors in the reply point into req and res (the pieces of
     * a long JSON array are the reply's own: nothing to keep for them,
     * and sent as they are when the caller takes parts) */
    int borrows = reply_borrows(out);
    if (in->by_reference && borrows && keep_with_reply(out, &req, &res) == 0) {
      timing.output_ns = op_stats_now_ns() - mark;
      op_stats_record(in->op, &timing, 1);
      return;
    }
    if ((borrows || !in->by_reference) && reply_flatten(out) != 0)
      problem_set(&prob, PROBLEM_OUT_OF_MEMORY, NULL, "out of memory");
  }
  if (prob.status != 0) {
    prob.request_id = in->request_id;
    if (in->kserve) problem_reply_kserve(&prob, out);
    else problem_reply(&prob, out);
  }
  timing.output_ns = op_stats_now_ns() - mark;
  op_stats_record(in->op, &timing, prob.status == 0);
  result_free(&res);
  request_free(&req);
}
