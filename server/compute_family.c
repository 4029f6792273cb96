/* compute_family.c -- the rest of the family: Lp (F.normalize, ONNX
 * LpNormalization), local response (F.local_response_norm, ONNX LRN) and
 * mean-variance normalization (ONNX), forward through compute.c's run_norm
 * and backward through compute_backward.c's run_backward. */
#include "compute.h"
#include "compute_internal.h"

/* ---- the rest of the family: Lp, local response, mean-variance --------- */

/* Stats over the dims not in `axes`, in order (rank 0 when all reduce). */
static void kept_layout(unsigned axes, const norm_tensor_t *x, result_t *res) {
  res->stats_rank = 0;
  for (int i = 0; i < x->rank; i++)
    if (!(axes & (1u << i))) res->stats_shape[res->stats_rank++] = x->shape[i];
}

static int64_t lp_groups(const request_t *req, const norm_tensor_t *x) {
  return norm_lp_groups(x, &req->lp);
}
static int lp_rows(const split_t *s, size_t begin, size_t end) {
  return norm_lp_rows(s->x, &s->req->lp, s->y, s->norms, begin, end);
}
static void lp_layout(const request_t *req, const norm_tensor_t *x,
                      result_t *res, norm_moments_params_t *out) {
  (void)out;
  kept_layout(req->lp.axes, x, res);
}
static const kernel_t lp_kernel = {lp_groups, lp_rows, lp_layout, 0,
                                   STATS_NORM, 0, 1};
int compute_lp(const request_t *req, result_t *res, problem_t *prob) {
  return compute__run_norm(req, res, prob, &lp_kernel, (split_t){0});
}

/* Groups are (n, spatial position) pairs; no per-group statistics. */
static int64_t lrn_groups(const request_t *req, const norm_tensor_t *x) {
  (void)req;
  return norm_lrn_groups(x);
}
static int lrn_rows(const split_t *s, size_t begin, size_t end) {
  return norm_lrn_rows(s->x, &s->req->lrn, s->y, s->square_sum, begin, end);
}
static void lrn_layout(const request_t *req, const norm_tensor_t *x,
                       result_t *res, norm_moments_params_t *out) {
  (void)req;
  (void)out;
  res->stats_rank = 1;
  res->stats_shape[0] = 0;
  (void)x;
}
static const kernel_t lrn_kernel = {lrn_groups, lrn_rows, lrn_layout, 0,
                                    STATS_NONE, 0, 1};
int compute_lrn(const request_t *req, result_t *res, problem_t *prob) {
  return compute__run_norm(req, res, prob, &lrn_kernel, (split_t){0});
}

static int64_t mvn_groups(const request_t *req, const norm_tensor_t *x) {
  return norm_mvn_groups(x, &req->mvn);
}
static int mvn_rows(const split_t *s, size_t begin, size_t end) {
  return norm_mvn_rows(s->x, &s->req->mvn, s->y, s->st, begin, end);
}
static void mvn_layout(const request_t *req, const norm_tensor_t *x,
                       result_t *res, norm_moments_params_t *out) {
  (void)out;
  kept_layout(req->mvn.axes, x, res);
}
static const kernel_t mvn_kernel = {mvn_groups, mvn_rows, mvn_layout, 0,
                                    STATS_MEAN_VAR, 0, 1};
int compute_mvn(const request_t *req, result_t *res, problem_t *prob) {
  return compute__run_norm(req, res, prob, &mvn_kernel, (split_t){0});
}

static int lp_backward_rows(const split_t *s, const norm_grads_t *grads,
                            size_t begin, size_t end) {
  (void)grads;
  return norm_lp_backward_rows(s->x, s->dy, &s->req->lp, s->y, s->norms, begin,
                               end);
}
int compute_lp_backward(const request_t *req, result_t *res,
                               problem_t *prob) {
  static const backward_t k = {&lp_kernel, lp_backward_rows};
  return compute__run_backward(req, res, prob, &k, (split_t){0});
}

static int lrn_backward_rows(const split_t *s, const norm_grads_t *grads,
                             size_t begin, size_t end) {
  (void)grads;
  return norm_lrn_backward_rows(s->x, s->dy, &s->req->lrn, s->y, begin, end);
}
int compute_lrn_backward(const request_t *req, result_t *res,
                                problem_t *prob) {
  static const backward_t k = {&lrn_kernel, lrn_backward_rows};
  return compute__run_backward(req, res, prob, &k, (split_t){0});
}

static int mvn_backward_rows(const split_t *s, const norm_grads_t *grads,
                             size_t begin, size_t end) {
  (void)grads;
  return norm_mvn_backward_rows(s->x, s->dy, &s->req->mvn, s->y, s->st, begin,
                                end);
}
int compute_mvn_backward(const request_t *req, result_t *res,
                                problem_t *prob) {
  static const backward_t k = {&mvn_kernel, mvn_backward_rows};
  return compute__run_backward(req, res, prob, &k, (split_t){0});
}
