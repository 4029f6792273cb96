/* instance.c -- instance norm (Ulyanov et al.) on (N, C, *): statistics over
 * the spatial positions of each (sample, channel), optional affine. */
#include "engine.h"

static int instance_check(const norm_tensor_t *x, const norm_tensor_t *weight,
                          const norm_tensor_t *bias,
                          const norm_instance_params_t *p,
                          const norm_tensor_t *y) {
  if (p == NULL) return NORM_E_NULL;
  int err = engine_check_channel_norm(x, y, p->eps);
  return err != NORM_OK ? err : engine_check_channel_affine(x, weight, bias);
}

int64_t norm_instance_groups(const norm_tensor_t *x) {
  if (x == NULL) return NORM_E_NULL;
  int err = norm_tensor_check(x, NULL, NULL);
  if (err == NORM_OK) err = engine_check_channels(x);
  return err != NORM_OK ? err : (int64_t)engine_layout_instances(x).groups;
}

/* y = (x - mean_nc) / sqrt(var_nc + eps) * w_c + b_c, per (sample, channel) */
int norm_instance_rows(const norm_tensor_t *x, const norm_tensor_t *weight,
                       const norm_tensor_t *bias,
                       const norm_instance_params_t *p, norm_tensor_t *y,
                       const norm_stats_t *stats, size_t begin, size_t end) {
  int err = instance_check(x, weight, bias, p, y);
  if (err != NORM_OK) return err;
  layout_t l = engine_layout_instances(x);
  if ((err = engine_check_range(begin, end, l.groups)) != NORM_OK) return err;
  engine_standardize(x, y, &l, begin, end, p->eps, 0, NORM_EPS_INSIDE_SQRT,
                     weight, bias, stats);
  return NORM_OK;
}

int norm_instance(const norm_tensor_t *x, const norm_tensor_t *weight,
                  const norm_tensor_t *bias, const norm_instance_params_t *p,
                  norm_tensor_t *y, const norm_stats_t *stats) {
  int64_t groups = norm_instance_groups(x);
  if (groups < 0) return (int)groups;
  return norm_instance_rows(x, weight, bias, p, y, stats, 0, (size_t)groups);
}

/* dx = rstd * (g - mean(g)) - xhat * rstd * mean(g * xhat), g = w_c * dy,
 * per (sample, channel) */
int norm_instance_backward_rows(const norm_tensor_t *x, const norm_tensor_t *dy,
                                const norm_tensor_t *weight,
                                const norm_instance_params_t *p,
                                norm_tensor_t *dx, const norm_grads_t *grads,
                                const norm_stats_t *stats, size_t begin,
                                size_t end) {
  int err = instance_check(x, weight, NULL, p, dx);
  if (err == NORM_OK) err = engine_check_grad(x, dy);
  if (err != NORM_OK) return err;
  layout_t l = engine_layout_instances(x);
  if ((err = engine_check_range(begin, end, l.groups)) != NORM_OK) return err;
  engine_standardize_backward(x, dy, weight, dx, &l, begin, end, p->eps, 0,
                              NORM_EPS_INSIDE_SQRT, grads, stats);
  return NORM_OK;
}
