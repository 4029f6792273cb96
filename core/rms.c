/* rms.c -- RMS norm (Zhang & Sennrich; Llama's RMSNorm) over trailing dims. */
#include <math.h>

#include "engine.h"

static int rms_check(const norm_tensor_t *x, const norm_tensor_t *weight,
                     const norm_rms_params_t *p, const norm_tensor_t *y) {
  if (p == NULL) return NORM_E_NULL;
  int err = engine_check_in_out(x, y);
  if (err == NORM_OK && (p->normalized_ndim < 1 || p->normalized_ndim > x->rank))
    err = NORM_E_ARG;
  if (err == NORM_OK) err = engine_check_eps(p->eps);
  if (err == NORM_OK)
    err = engine_check_vector(weight, x->shape + x->rank - p->normalized_ndim,
                              p->normalized_ndim, NORM_E_WEIGHT);
  return err;
}

int64_t norm_rms_groups(const norm_tensor_t *x, const norm_rms_params_t *p) {
  if (p == NULL) return NORM_E_NULL;
  norm_layer_params_t lp = {.normalized_ndim = p->normalized_ndim};
  return norm_layer_groups(x, &lp);
}

/* y = x / sqrt(mean(x^2) + eps) * w, per row */
int norm_rms_rows(const norm_tensor_t *x, const norm_tensor_t *weight,
                  const norm_rms_params_t *p, norm_tensor_t *y,
                  const norm_stats_t *stats, size_t begin, size_t end) {
  int err = rms_check(x, weight, p, y);
  if (err != NORM_OK) return err;
  layout_t l = engine_layout_rows(x, p->normalized_ndim);
  if ((err = engine_check_range(begin, end, l.groups)) != NORM_OK) return err;
  affine_t aff;
  engine_affine_init(&aff, &l, weight, NULL);
  for (size_t g = begin; g < end; g++) {
    double ms = engine_sumsq(x, &l, g) / (double)engine_layout_count(&l);
    double rstd = engine_rstd(ms, p->eps);
    /* shift 0: |x| is a float, |x * rstd| <= sqrt(count) */
    engine_apply(x, y, &l, g, 0.0, engine_scale(ms, p->eps, rstd), &aff, 1);
    if (stats && stats->rms) stats->rms[g] = sqrt(ms);
    if (stats && stats->rstd) stats->rstd[g] = rstd;
  }
  return NORM_OK;
}

int norm_rms(const norm_tensor_t *x, const norm_tensor_t *weight,
             const norm_rms_params_t *p, norm_tensor_t *y,
             const norm_stats_t *stats) {
  int64_t groups = norm_rms_groups(x, p);
  if (groups < 0) return (int)groups;
  return norm_rms_rows(x, weight, p, y, stats, 0, (size_t)groups);
}

/* dx = rstd * g - xhat * rstd * mean(g * xhat), xhat = x * rstd, g = w * dy,
 * per row */
int norm_rms_backward_rows(const norm_tensor_t *x, const norm_tensor_t *dy,
                           const norm_tensor_t *weight,
                           const norm_rms_params_t *p, norm_tensor_t *dx,
                           const norm_grads_t *grads, const norm_stats_t *stats,
                           size_t begin, size_t end) {
  int err = rms_check(x, weight, p, dx);
  if (err == NORM_OK) err = engine_check_grad(x, dy);
  if (err == NORM_OK && grads && grads->bias) err = NORM_E_ARG; /* no bias */
  if (err != NORM_OK) return err;
  layout_t l = engine_layout_rows(x, p->normalized_ndim);
  if ((err = engine_check_range(begin, end, l.groups)) != NORM_OK) return err;
  double count = (double)engine_layout_count(&l);
  affine_t aff;
  engine_affine_init(&aff, &l, weight, NULL);
  for (size_t g = begin; g < end; g++) {
    double sq;
    engine_run_sums_t sums, *pre = &sums; /* taken with sum(x^2) */
    if (!engine_sumsq_sums(x, dy, &aff, &l, g, &sq, pre)) {
      sq = engine_sumsq(x, &l, g);
      pre = NULL;
    }
    double ms = sq / count;
    double rstd = engine_rstd(ms, p->eps), s = engine_scale(ms, p->eps, rstd);
    engine_backward(x, dy, &aff, dx, &l, g, 0.0, s, ENGINE_BW_SPREAD,
                    s / count, grads, pre);
    if (stats && stats->rms) stats->rms[g] = sqrt(ms);
    if (stats && stats->rstd) stats->rstd[g] = rstd;
  }
  return NORM_OK;
}
