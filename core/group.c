/* group.c -- group norm (Wu & He) on (N, C, *): statistics over the C / G
 * channels of each group of each sample, affine per channel. */
#include "engine.h"

/* The C channels of x, (N, C, *), split into num_groups equal groups. */
static int check_num_groups(const norm_tensor_t *x,
                            const norm_group_params_t *p) {
  return (p->num_groups >= 1 && x->shape[1] % p->num_groups == 0)
             ? NORM_OK
             : NORM_E_GROUPS;
}

static int group_check(const norm_tensor_t *x, const norm_tensor_t *weight,
                       const norm_tensor_t *bias, const norm_group_params_t *p,
                       const norm_tensor_t *y) {
  if (p == NULL) return NORM_E_NULL;
  int err = engine_check_channel_norm(x, y, p->eps);
  if (err == NORM_OK) err = check_num_groups(x, p);
  return err != NORM_OK ? err : engine_check_channel_affine(x, weight, bias);
}

int64_t norm_group_groups(const norm_tensor_t *x, const norm_group_params_t *p) {
  if (x == NULL || p == NULL) return NORM_E_NULL;
  int err = norm_tensor_check(x, NULL, NULL);
  if (err == NORM_OK) err = engine_check_channels(x);
  if (err == NORM_OK) err = check_num_groups(x, p);
  if (err != NORM_OK) return err;
  return (int64_t)engine_layout_groups(x, (size_t)p->num_groups).groups;
}

/* y = (x - mean_ng) / sqrt(var_ng + eps) * w_c + b_c, per (sample, group) */
int norm_group_rows(const norm_tensor_t *x, const norm_tensor_t *weight,
                    const norm_tensor_t *bias, const norm_group_params_t *p,
                    norm_tensor_t *y, const norm_stats_t *stats, size_t begin,
                    size_t end) {
  int err = group_check(x, weight, bias, p, y);
  if (err != NORM_OK) return err;
  layout_t l = engine_layout_groups(x, (size_t)p->num_groups);
  if ((err = engine_check_range(begin, end, l.groups)) != NORM_OK) return err;
  engine_standardize(x, y, &l, begin, end, p->eps, 0, NORM_EPS_INSIDE_SQRT,
                     weight, bias, stats);
  return NORM_OK;
}

int norm_group(const norm_tensor_t *x, const norm_tensor_t *weight,
               const norm_tensor_t *bias, const norm_group_params_t *p,
               norm_tensor_t *y, const norm_stats_t *stats) {
  int64_t groups = norm_group_groups(x, p);
  if (groups < 0) return (int)groups;
  return norm_group_rows(x, weight, bias, p, y, stats, 0, (size_t)groups);
}

/* dx = rstd * (g - mean(g)) - xhat * rstd * mean(g * xhat), g = w_c * dy,
 * per (sample, group) */
int norm_group_backward_rows(const norm_tensor_t *x, const norm_tensor_t *dy,
                             const norm_tensor_t *weight,
                             const norm_group_params_t *p, norm_tensor_t *dx,
                             const norm_grads_t *grads,
                             const norm_stats_t *stats, size_t begin,
                             size_t end) {
  int err = group_check(x, weight, NULL, p, dx);
  if (err == NORM_OK) err = engine_check_grad(x, dy);
  if (err != NORM_OK) return err;
  layout_t l = engine_layout_groups(x, (size_t)p->num_groups);
  if ((err = engine_check_range(begin, end, l.groups)) != NORM_OK) return err;
  engine_standardize_backward(x, dy, weight, dx, &l, begin, end, p->eps, 0,
                              NORM_EPS_INSIDE_SQRT, grads, stats);
  return NORM_OK;
}
