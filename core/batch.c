/* batch.c -- batch norm on (N, C, *), train and eval, with PyTorch's running
 * statistics update (momentum or cumulative moving average). */
#include <math.h>

#include "engine.h"

static int batch_check(const norm_tensor_t *x, const norm_tensor_t *weight,
                       const norm_tensor_t *bias, const norm_tensor_t *rmean,
                       const norm_tensor_t *rvar, const norm_batch_params_t *p,
                       const norm_tensor_t *y) {
  if (p == NULL) return NORM_E_NULL;
  int err = engine_check_channel_norm(x, y, p->eps);
  if (err != NORM_OK) return err;
  if ((unsigned)p->mode > NORM_EVAL) return NORM_E_ARG;
  if (!p->cumulative && !(p->momentum >= 0.0 && p->momentum <= 1.0))
    return NORM_E_MOMENTUM;
  /* 1 / num_batches_tracked is only taken when running stats are updated. */
  if (p->cumulative && p->mode == NORM_TRAIN && rmean != NULL &&
      p->num_batches_tracked < 1)
    return NORM_E_ARG;
  if ((err = engine_check_channel_affine(x, weight, bias)) != NORM_OK)
    return err;
  const int64_t *c = &x->shape[1];
  if ((rmean == NULL) != (rvar == NULL)) return NORM_E_RUNNING;
  if (p->mode == NORM_EVAL && rmean == NULL) return NORM_E_RUNNING;
  if ((err = engine_check_vector(rmean, c, 1, NORM_E_RUNNING)) != NORM_OK)
    return err;
  if ((err = engine_check_vector(rvar, c, 1, NORM_E_RUNNING)) != NORM_OK)
    return err;
  layout_t l = engine_layout_channels(x);
  if (p->mode == NORM_TRAIN && engine_layout_count(&l) < 2)
    return NORM_E_TOO_FEW;
  return NORM_OK;
}

int64_t norm_batch_groups(const norm_tensor_t *x) {
  if (x == NULL) return NORM_E_NULL;
  int err = norm_tensor_check(x, NULL, NULL);
  if (err == NORM_OK) err = engine_check_channels(x);
  return err != NORM_OK ? err : x->shape[1];
}

/* y = (x - mean_c) / sqrt(var_c + eps) * w_c + b_c, per channel c
 * (train: batch statistics; eval: running statistics) */
int norm_batch_rows(const norm_tensor_t *x, const norm_tensor_t *weight,
                    const norm_tensor_t *bias, norm_tensor_t *running_mean,
                    norm_tensor_t *running_var, const norm_batch_params_t *p,
                    norm_tensor_t *y, const norm_stats_t *stats, size_t begin,
                    size_t end) {
  int err = batch_check(x, weight, bias, running_mean, running_var, p, y);
  if (err != NORM_OK) return err;
  layout_t l = engine_layout_channels(x);
  if ((err = engine_check_range(begin, end, l.groups)) != NORM_OK) return err;
  double count = (double)engine_layout_count(&l);
  int update = p->mode == NORM_TRAIN && running_mean != NULL;
  double factor = p->cumulative && update ? 1.0 / (double)p->num_batches_tracked
                                          : p->momentum;
  affine_t aff;
  engine_affine_init(&aff, &l, weight, bias);
  for (size_t c = begin; c < end; c++) {
    double mean, var;
    /* engine_apply's float path wants |x - mean| <= 1e37 and |x - mean| *
     * rstd <= sqrt(count): true of the channel's own moments (train), not
     * of running ones (eval) */
    int bounded = 0;
    if (p->mode == NORM_EVAL) {
      mean = norm_tensor_get(running_mean, c);
      var = norm_tensor_get(running_var, c);
    } else {
      double m2;
      engine_moments(x, &l, c, &mean, &m2);
      bounded = fabs(mean) <= 1e37 && sqrt(m2) <= 1e37;
      var = m2 / count;
      if (update) {
        double rm = norm_tensor_get(running_mean, c);
        double rv = norm_tensor_get(running_var, c);
        norm_tensor_set(running_mean, c, (1.0 - factor) * rm + factor * mean);
        norm_tensor_set(running_var, c,
                        (1.0 - factor) * rv + factor * (m2 / (count - 1.0)));
      }
    }
    double rstd = engine_rstd(var, p->eps);
    engine_apply(x, y, &l, c, mean, engine_scale(var, p->eps, rstd), &aff,
                 bounded);
    engine_stats_put(stats, c, mean, var, rstd);
  }
  return NORM_OK;
}

int norm_batch(const norm_tensor_t *x, const norm_tensor_t *weight,
               const norm_tensor_t *bias, norm_tensor_t *running_mean,
               norm_tensor_t *running_var, const norm_batch_params_t *p,
               norm_tensor_t *y, const norm_stats_t *stats) {
  int64_t groups = norm_batch_groups(x);
  if (groups < 0) return (int)groups;
  return norm_batch_rows(x, weight, bias, running_mean, running_var, p, y,
                         stats, 0, (size_t)groups);
}

/* Train: dx = rstd * (g - mean(g)) - xhat * rstd * mean(g * xhat),
 * g = w_c * dy, per channel c over the batch; eval: dx = rstd * g (the
 * running statistics are constants) */
int norm_batch_backward_rows(const norm_tensor_t *x, const norm_tensor_t *dy,
                             const norm_tensor_t *weight,
                             const norm_tensor_t *running_mean,
                             const norm_tensor_t *running_var,
                             const norm_batch_params_t *p, norm_tensor_t *dx,
                             const norm_grads_t *grads,
                             const norm_stats_t *stats, size_t begin,
                             size_t end) {
  int err = batch_check(x, weight, NULL, running_mean, running_var, p, dx);
  if (err == NORM_OK) err = engine_check_grad(x, dy);
  if (err != NORM_OK) return err;
  layout_t l = engine_layout_channels(x);
  if ((err = engine_check_range(begin, end, l.groups)) != NORM_OK) return err;
  double count = (double)engine_layout_count(&l);
  affine_t aff;
  engine_affine_init(&aff, &l, weight, NULL);
  for (size_t c = begin; c < end; c++) {
    double mean, var;
    int train = p->mode == NORM_TRAIN;
    engine_run_sums_t sums, *pre = NULL;
    if (train) {
      double m2;
      pre = &sums;
      if (!engine_moments_sums(x, dy, &aff, &l, c, &mean, &m2, pre)) {
        engine_moments(x, &l, c, &mean, &m2);
        pre = NULL;
      }
      var = m2 / count;
    } else {
      mean = norm_tensor_get(running_mean, c);
      var = norm_tensor_get(running_var, c);
    }
    double rstd = engine_rstd(var, p->eps), s = engine_scale(var, p->eps, rstd);
    engine_backward(x, dy, &aff, dx, &l, c, mean, s,
                    train ? ENGINE_BW_MEAN | ENGINE_BW_SPREAD : 0,
                    train ? s / count : 0.0, grads, pre);
    engine_stats_put(stats, c, mean, var, rstd);
  }
  return NORM_OK;
}
