/* layer.c -- layer norm over the trailing dims (torch.nn.LayerNorm and the
 * Annotated Transformer's variant), and the normalized_shape / axis helpers
 * shared with RMS norm and moments. */
#include "engine.h"

int norm_ndim_from_shape(const norm_tensor_t *x, const int64_t *shape, int n,
                         int *normalized_ndim) {
  if (x == NULL || shape == NULL || normalized_ndim == NULL) return NORM_E_NULL;
  if (x->rank < 1 || x->rank > NORM_MAX_RANK) return NORM_E_RANK;
  if (n < 1 || n > x->rank) return NORM_E_SHAPE;
  for (int i = 0; i < n; i++)
    if (shape[i] != x->shape[x->rank - n + i]) return NORM_E_SHAPE;
  *normalized_ndim = n;
  return NORM_OK;
}

int norm_ndim_from_axis(const norm_tensor_t *x, int64_t axis,
                        int *normalized_ndim) {
  if (x == NULL || normalized_ndim == NULL) return NORM_E_NULL;
  if (x->rank < 1 || x->rank > NORM_MAX_RANK) return NORM_E_RANK;
  if (axis < -(int64_t)x->rank || axis >= x->rank) return NORM_E_AXIS;
  if (axis < 0) axis += x->rank;
  *normalized_ndim = x->rank - (int)axis;
  return NORM_OK;
}

static int check_ndim(const norm_tensor_t *x, int normalized_ndim) {
  return (normalized_ndim >= 1 && normalized_ndim <= x->rank) ? NORM_OK
                                                              : NORM_E_ARG;
}

static int layer_check(const norm_tensor_t *x, const norm_tensor_t *weight,
                       const norm_tensor_t *bias, const norm_layer_params_t *p,
                       const norm_tensor_t *y) {
  if (p == NULL) return NORM_E_NULL;
  int err = engine_check_in_out(x, y);
  if (err == NORM_OK) err = check_ndim(x, p->normalized_ndim);
  if (err == NORM_OK) err = engine_check_eps(p->eps);
  if (err == NORM_OK && (unsigned)p->variance > NORM_VAR_UNBIASED) err = NORM_E_ARG;
  if (err == NORM_OK && (unsigned)p->eps_placement > NORM_EPS_OUTSIDE_SQRT)
    err = NORM_E_ARG;
  if (err != NORM_OK) return err;
  const int64_t *tail = x->shape + x->rank - p->normalized_ndim;
  err = engine_check_vector(weight, tail, p->normalized_ndim, NORM_E_WEIGHT);
  if (err == NORM_OK)
    err = engine_check_vector(bias, tail, p->normalized_ndim, NORM_E_BIAS);
  return err;
}

int64_t norm_layer_groups(const norm_tensor_t *x, const norm_layer_params_t *p) {
  if (x == NULL || p == NULL) return NORM_E_NULL;
  int err = norm_tensor_check(x, NULL, NULL);
  if (err == NORM_OK) err = check_ndim(x, p->normalized_ndim);
  if (err != NORM_OK) return err;
  return (int64_t)engine_layout_rows(x, p->normalized_ndim).groups;
}

/* y = (x - mean) / sqrt(var + eps) * w + b, per row
 * (outside_sqrt: y = (x - mean) / (std + eps) * w + b) */
int norm_layer_rows(const norm_tensor_t *x, const norm_tensor_t *weight,
                    const norm_tensor_t *bias, const norm_layer_params_t *p,
                    norm_tensor_t *y, const norm_stats_t *stats, size_t begin,
                    size_t end) {
  int err = layer_check(x, weight, bias, p, y);
  if (err != NORM_OK) return err;
  layout_t l = engine_layout_rows(x, p->normalized_ndim);
  if ((err = engine_check_range(begin, end, l.groups)) != NORM_OK) return err;
  engine_standardize(x, y, &l, begin, end, p->eps,
                     p->variance == NORM_VAR_UNBIASED, p->eps_placement, weight,
                     bias, stats);
  return NORM_OK;
}

int norm_layer(const norm_tensor_t *x, const norm_tensor_t *weight,
               const norm_tensor_t *bias, const norm_layer_params_t *p,
               norm_tensor_t *y, const norm_stats_t *stats) {
  int64_t groups = norm_layer_groups(x, p);
  if (groups < 0) return (int)groups;
  return norm_layer_rows(x, weight, bias, p, y, stats, 0, (size_t)groups);
}

/* dx = rstd * (g - mean(g)) - xhat * rstd * sum(g * xhat) / D, g = w * dy,
 * per row (D = count, or count - 1 unbiased; outside_sqrt: the last factor
 * is sum(g * xhat) / (D * std)) */
int norm_layer_backward_rows(const norm_tensor_t *x, const norm_tensor_t *dy,
                             const norm_tensor_t *weight,
                             const norm_layer_params_t *p, norm_tensor_t *dx,
                             const norm_grads_t *grads,
                             const norm_stats_t *stats, size_t begin,
                             size_t end) {
  int err = layer_check(x, weight, NULL, p, dx);
  if (err == NORM_OK) err = engine_check_grad(x, dy);
  if (err != NORM_OK) return err;
  layout_t l = engine_layout_rows(x, p->normalized_ndim);
  if ((err = engine_check_range(begin, end, l.groups)) != NORM_OK) return err;
  engine_standardize_backward(x, dy, weight, dx, &l, begin, end, p->eps,
                              p->variance == NORM_VAR_UNBIASED,
                              p->eps_placement, grads, stats);
  return NORM_OK;
}
