/* service.c -- bytes in, reply out: negotiation, decode, compute, encode. */
#include "service.h"

#include <string.h>

#include "codec.h"
#include "compute.h"

void service_handle(const service_input_t *in, const limits_t *lim,
                    reply_t *out) {
  problem_t prob;
  memset(&prob, 0, sizeof prob);
  memset(out, 0, sizeof *out);
  request_t req;
  result_t res;
  request_init(&req, in->op);
  memset(&res, 0, sizeof res);

  const codec_t *decoder = codec_for_content_type(in->content_type);
  const codec_t *encoder = decoder ? codec_for_accept(in->accept, decoder) : NULL;
  if (decoder == NULL) {
    problem_set(&prob, 415, "unsupported_media_type", NULL,
                "Content-Type %s is not supported; send application/json",
                in->content_type);
  } else if (encoder == NULL) {
    problem_set(&prob, 406, "not_acceptable", NULL,
                "cannot answer with any type in Accept: %s; normd answers "
                "application/json", in->accept);
  } else if (decoder->decode(in->body, in->len, in->op, lim, &req, &prob) == 0 &&
             compute_run(&req, &res, &prob) == 0) {
    encoder->encode(&req, &res, out, &prob);
  }
  if (prob.status != 0) problem_reply(&prob, out);
  result_free(&res);
  request_free(&req);
}
