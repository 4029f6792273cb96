/* compute_backward.c -- the backward passes of the five norms: grad_input
 * over the forward's groups (grad_output's memory when it may), the weight
 * and bias gradients summed in double per range and answered in their
 * tensors' dtypes, the forward's statistics. */
#include <stdlib.h>
#include <string.h>

#include "compute.h"
#include "compute_internal.h"
#include "explain.h"
#include "metrics.h"

/* ---- the backward passes ------------------------------------------------- */

/* A gradient of `like`'s shape and dtype from its double sums, or an empty
 * tensor when not wanted. 0, or -1 out of memory. */
static int grad_tensor(norm_tensor_t *out, const norm_tensor_t *like,
                       const double *sums, size_t n) {
  if (sums == NULL) return 0;
  *out = *like;
  out->data = malloc(n * norm_dtype_size(like->dtype));
  if (out->data == NULL) return -1;
  for (size_t i = 0; i < n; i++) norm_tensor_set(out, i, sums[i]);
  return 0;
}

/* Whether t has the affine shape of the norm on x: (C) for the channel
 * norms, the normalized (trailing) dims for layer and RMS norm; *numel its
 * element count. */
static int affine_shaped(const request_t *req, const kernel_t *k,
                         const norm_tensor_t *x, const norm_tensor_t *t,
                         size_t *numel) {
  int rank = k->channel_affine
                 ? 1
                 : (k->stats == STATS_RMS ? req->rms.normalized_ndim
                                          : req->layer.normalized_ndim);
  const int64_t *dims = k->channel_affine ? &x->shape[1] : x->shape + x->rank - rank;
  return x->rank >= rank && norm_tensor_check(t, numel, NULL) == NORM_OK &&
         t->rank == rank &&
         memcmp(t->shape, dims, (size_t)rank * sizeof dims[0]) == 0;
}

/* The path every backward takes: grad_input into the result's output (over
 * grad_output's memory when it may), the weight and bias gradients summed
 * in double and answered in their tensors' dtypes, the forward's stats. */
int compute__run_backward(const request_t *req, result_t *res, problem_t *prob,
                        const backward_t *k, split_t split) {
  const norm_tensor_t *x = &req->input.t;
  size_t numel, nw = 0, nb = 0;
  if (compute__groups(req, res, prob, k->forward, x, &numel) != 0) return -1;
  /* before grad_input may take over grad_output's memory, sized as x */
  int err = norm_tensor_check(&req->grad_output.t, NULL, NULL);
  if (err == NORM_OK && (req->grad_output.t.rank != x->rank ||
                         memcmp(req->grad_output.t.shape, x->shape,
                                (size_t)x->rank * sizeof x->shape[0]) != 0))
    err = NORM_E_GRAD_OUTPUT;
  if (err != NORM_OK) return problem_from_norm(prob, err, "grad_output");
  const norm_tensor_t *w = req->weight.present ? &req->weight.t : NULL;
  const norm_tensor_t *b = req->bias.present ? &req->bias.t : NULL;
  /* The weight and bias gradients are sized from their tensors, which must
   * have the forward's affine shape (core checks the weight's again; the
   * bias only says a gradient is wanted, so its shape is checked here). */
  if (w && !affine_shaped(req, k->forward, x, w, &nw))
    return problem_from_norm(prob, NORM_E_WEIGHT, "weight");
  if (b && !affine_shaped(req, k->forward, x, b, &nb))
    return problem_from_norm(prob, NORM_E_BIAS, "bias");

  if (compute__output(req, res, prob, k->forward, x, numel, &req->grad_output) != 0)
    return -1;
  double *gw = w ? compute__alloc_doubles(nw, prob) : NULL;
  double *gb = b ? compute__alloc_doubles(nb, prob) : NULL;
  if (prob->status) {
    free(gw);
    free(gb);
    return -1;
  }
  norm_stats_t st = {res->mean, res->var, res->rstd, res->rms};
  pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  split.backward = k;
  split.req = req;
  split.x = x;
  split.w = w;
  split.b = b;
  split.dy = &req->grad_output.t;
  split.y = &res->output;
  split.st = &st;
  split.norms = res->norm;
  split.gw = gw;
  split.gb = gb;
  split.nw = nw;
  split.nb = nb;
  split.lock = &lock;
  err = compute__split_run(&split, res->ngroups, compute__tensor_bytes(x));
  norm_moments_params_t unused;
  k->forward->layout(req, x, res, &unused);
  if (err == NORM_OK &&
      ((w && grad_tensor(&res->grad_weight, w, gw, nw) != 0) ||
       (b && grad_tensor(&res->grad_bias, b, gb, nb) != 0)))
    err = SPLIT_E_NOMEM;
  free(gw);
  free(gb);
  if (err == SPLIT_E_NOMEM)
    return problem_set(prob, PROBLEM_OUT_OF_MEMORY, NULL, "out of memory");
  if (err != NORM_OK) return problem_from_norm(prob, err, compute__field_of(err, req));
  metrics_add_elements(op_info(req->op)->metric, numel);
  return explain_run(req, res, prob);
}

static int layer_backward_rows(const split_t *s, const norm_grads_t *grads,
                               size_t begin, size_t end) {
  return norm_layer_backward_rows(s->x, s->dy, s->w, &s->req->layer, s->y,
                                  grads, s->st, begin, end);
}
int compute_layer_backward(const request_t *req, result_t *res,
                                  problem_t *prob) {
  static const backward_t k = {&compute__layer_kernel, layer_backward_rows};
  return compute__run_backward(req, res, prob, &k, (split_t){0});
}

static int rms_backward_rows(const split_t *s, const norm_grads_t *grads,
                             size_t begin, size_t end) {
  return norm_rms_backward_rows(s->x, s->dy, s->w, &s->req->rms, s->y, grads,
                                s->st, begin, end);
}
int compute_rms_backward(const request_t *req, result_t *res,
                                problem_t *prob) {
  static const backward_t k = {&compute__rms_kernel, rms_backward_rows};
  return compute__run_backward(req, res, prob, &k, (split_t){0});
}

/* The running statistics are constants of eval mode, read, never updated. */
static int batch_backward_rows(const split_t *s, const norm_grads_t *grads,
                               size_t begin, size_t end) {
  const request_t *r = s->req;
  return norm_batch_backward_rows(
      s->x, s->dy, s->w, r->running_mean.present ? &r->running_mean.t : NULL,
      r->running_var.present ? &r->running_var.t : NULL, s->batch, s->y, grads,
      s->st, begin, end);
}
int compute_batch_backward(const request_t *req, result_t *res,
                                  problem_t *prob) {
  static const backward_t k = {&compute__batch_kernel, batch_backward_rows};
  norm_batch_params_t p = compute__batch_params(req);
  return compute__run_backward(req, res, prob, &k, (split_t){.batch = &p});
}

static int group_backward_rows(const split_t *s, const norm_grads_t *grads,
                               size_t begin, size_t end) {
  return norm_group_backward_rows(s->x, s->dy, s->w, &s->req->group, s->y,
                                  grads, s->st, begin, end);
}
int compute_group_backward(const request_t *req, result_t *res,
                                  problem_t *prob) {
  static const backward_t k = {&compute__group_kernel, group_backward_rows};
  return compute__run_backward(req, res, prob, &k, (split_t){0});
}

static int instance_backward_rows(const split_t *s, const norm_grads_t *grads,
                                  size_t begin, size_t end) {
  return norm_instance_backward_rows(s->x, s->dy, s->w, &s->req->instance, s->y,
                                     grads, s->st, begin, end);
}
int compute_instance_backward(const request_t *req, result_t *res,
                                     problem_t *prob) {
  static const backward_t k = {&compute__instance_kernel, instance_backward_rows};
  return compute__run_backward(req, res, prob, &k, (split_t){0});
}
