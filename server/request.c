/* request.c -- request defaults (the design's table) and ownership of the
 * buffers a request and a result carry. */
#include "request.h"

#include <stdlib.h>
#include <string.h>

#include "blocks.h"

void request_init(request_t *req, op_t op) {
  memset(req, 0, sizeof *req);
  req->op = op;
  req->output_dtype = NORM_F32;
  req->ret = RET_OUTPUT | RET_STATS | RET_RUNNING;
  if (op_info(op)->kind == OP_KIND_BACKWARD)
    req->ret = RET_OUTPUT | RET_GRAD_WEIGHT | RET_GRAD_BIAS | RET_STATS;
  req->layer = (norm_layer_params_t){.normalized_ndim = 1, .eps = 1e-5};
  req->rms = (norm_rms_params_t){.normalized_ndim = 1, .eps = 1e-6};
  req->batch = (norm_batch_params_t){.mode = NORM_TRAIN, .eps = 1e-5,
                                     .momentum = 0.1};
  req->group = (norm_group_params_t){.num_groups = 0, .eps = 1e-5};
  req->instance = (norm_instance_params_t){.eps = 1e-5};
  req->lp = (norm_lp_params_t){.p = 2.0, .eps = 1e-12};
  req->lrn = (norm_lrn_params_t){.alpha = 1e-4, .beta = 0.75, .k = 1.0,
                                 .convention = NORM_LRN_TORCH};
  req->mvn = (norm_mvn_params_t){.eps = 1e-9};
  req->moments = (norm_moments_params_t){.layout = NORM_MOMENTS_ROWS,
                                         .normalized_ndim = 1};
  req->histogram_bins = 32;
  req->residual.tokens = 16;
  req->residual.d = 64;
  req->residual.layers = 24;
  req->residual.placements = 3; /* both */
  req->residual.seed = 1;
  req->residual.eps = 1e-5;
  req->residual.gain = 1.0;
  req->residual.classes = 16;
}

void request_free(request_t *req) {
  req_tensor_t *all[] = {&req->input,        &req->grad_output,
                         &req->residual_in,  &req->weight,
                         &req->bias,         &req->running_mean,
                         &req->running_var};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
    if (!all[i]->borrowed) free(all[i]->t.data);
    all[i]->borrowed = false;
    all[i]->t.data = NULL;
    all[i]->present = false;
  }
  free(req->parts);
  req->parts = NULL;
  blocks_free(req->body_mem); /* http_body.c's */
  req->body_mem = NULL;
  free(req->v2_id);
  req->v2_id = NULL;
}

void result_free(result_t *res) {
  if (!res->output_in_input) free(res->output.data);
  free(res->mean);
  free(res->var);
  free(res->rstd);
  free(res->rms);
  free(res->norm);
  free(res->square_sum);
  free(res->out_mean);
  free(res->out_var);
  free(res->out_rms);
  free(res->grad_weight.data);
  free(res->grad_bias.data);
  free(res->running_mean.data);
  free(res->running_var.data);
  free(res->moments);
  for (int i = 0; i < res->nsteps; i++) free(res->steps[i].data);
  free(res->hist_input.counts);
  free(res->hist_output.counts);
  for (int i = 0; i < RESIDUAL_PLACEMENTS; i++) {
    residual_curves_t *c = &res->curves[i];
    double *all[] = {c->rms,     c->rel_update, c->cosine,     c->cos_to_input,
                     c->grad_w1, c->grad_w2,    c->grad_stream};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) free(all[k]);
  }
  memset(res, 0, sizeof *res);
}
