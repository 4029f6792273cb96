/* mvn.c -- mean-variance normalization over a set of axes (ONNX
 * MeanVarianceNormalization: (x - mean) / (std + eps), std biased) and its
 * gradient. Scalar double loops over the groups of engine_axes_*; the
 * variance is a corrected two-pass sum, not the E[x^2] - E[x]^2 of ONNX's
 * function body (the same value, without its cancellation). */
#include <math.h>

#include "engine.h"

static int mvn_check(const norm_tensor_t *x, const norm_mvn_params_t *p,
                     const norm_tensor_t *y, axes_t *a) {
  if (p == NULL) return NORM_E_NULL;
  int err = engine_check_in_out(x, y);
  if (err == NORM_OK) err = engine_axes_init(a, x, p->axes);
  return err != NORM_OK ? err : engine_check_eps(p->eps);
}

int64_t norm_mvn_groups(const norm_tensor_t *x, const norm_mvn_params_t *p) {
  if (x == NULL || p == NULL) return NORM_E_NULL;
  axes_t a;
  int err = norm_tensor_check(x, NULL, NULL);
  if (err == NORM_OK) err = engine_axes_init(&a, x, p->axes);
  return err != NORM_OK ? err : (int64_t)a.groups;
}

/* The moments of group g, taken on x * 2^-e with 2^e near max |x| (so
 * that squares of huge inputs do not overflow nor those of subnormal ones
 * vanish; the scaling is exact): mean and sd of the scaled values, and
 * the mean and biased variance of x (stats: may round to 0 or Inf). Sums,
 * then the centered sums with the mean's rounding error folded back in. */
typedef struct {
  int e;
  double mean_s, sd_s, mean, var;
} mvn_moments_t;

static double scaled(const norm_tensor_t *x, const axes_t *a, size_t g,
                     size_t j, int e) {
  return ldexp(norm_tensor_get(x, engine_axes_elem(a, g, j)), -e);
}

static mvn_moments_t mvn_moments(const norm_tensor_t *x, const axes_t *a,
                                 size_t g) {
  mvn_moments_t m = {0, 0.0, 0.0, 0.0, 0.0};
  double n = (double)a->count, top = 0.0;
  for (size_t j = 0; j < a->count; j++) {
    double v = fabs(norm_tensor_get(x, engine_axes_elem(a, g, j)));
    top = v > top || isnan(v) ? v : top;
  }
  if (isfinite(top) && top > 0.0) frexp(top, &m.e);
  double s = 0.0;
  for (size_t j = 0; j < a->count; j++) s += scaled(x, a, g, j, m.e);
  double mu = s / n, d1 = 0.0, d2 = 0.0;
  for (size_t j = 0; j < a->count; j++) {
    double d = scaled(x, a, g, j, m.e) - mu;
    d1 += d, d2 += d * d;
  }
  double m2 = d2 - d1 * d1 / n, var_s = (m2 < 0.0 ? 0.0 : m2) / n;
  m.mean_s = mu + d1 / n;
  m.sd_s = sqrt(var_s); /* NaN stays NaN */
  m.mean = ldexp(m.mean_s, m.e);
  m.var = ldexp(var_s, 2 * m.e);
  return m;
}

/* The factor applied to x * 2^-e - mean_s: 1 / (sd_s + eps 2^-e), and 0
 * for a constant group with eps = 0 (y = 0 rather than 0 / 0). */
static double mvn_scale(const mvn_moments_t *m, double eps) {
  if (m->sd_s == 0.0 && eps == 0.0) return 0.0;
  return 1.0 / (m->sd_s + ldexp(eps, -m->e));
}

/* y = (x - mean) / (std + eps) per group, std = sqrt(biased var) */
int norm_mvn_rows(const norm_tensor_t *x, const norm_mvn_params_t *p,
                  norm_tensor_t *y, const norm_stats_t *stats, size_t begin,
                  size_t end) {
  axes_t a;
  int err = mvn_check(x, p, y, &a);
  if (err == NORM_OK) err = engine_check_range(begin, end, a.groups);
  if (err != NORM_OK) return err;
  for (size_t g = begin; g < end; g++) {
    mvn_moments_t m = mvn_moments(x, &a, g);
    double s = mvn_scale(&m, p->eps);
    for (size_t j = 0; j < a.count; j++) {
      size_t i = engine_axes_elem(&a, g, j);
      norm_tensor_set(y, i, (scaled(x, &a, g, j, m.e) - m.mean_s) * s);
    }
    double rstd = ldexp(1.0 / (m.sd_s + ldexp(p->eps, -m.e)), -m.e);
    engine_stats_put(stats, g, m.mean, m.var, rstd);
  }
  return NORM_OK;
}

/* dx = rstd * (dy - mean(dy)) - xhat * sum(dy * xhat) / (count * std),
 * xhat = (x - mean) * rstd; the last term 0 for a constant group (std = 0)
 * and dx = 0 where eps = 0 as well (the forward's constant 0) */
int norm_mvn_backward_rows(const norm_tensor_t *x, const norm_tensor_t *dy,
                           const norm_mvn_params_t *p, norm_tensor_t *dx,
                           const norm_stats_t *stats, size_t begin,
                           size_t end) {
  axes_t a;
  int err = mvn_check(x, p, dx, &a);
  if (err == NORM_OK) err = engine_check_grad(x, dy);
  if (err == NORM_OK) err = engine_check_range(begin, end, a.groups);
  if (err != NORM_OK) return err;
  double n = (double)a.count;
  for (size_t g = begin; g < end; g++) {
    mvn_moments_t m = mvn_moments(x, &a, g);
    double s = mvn_scale(&m, p->eps); /* xhat = (x 2^-e - mean_s) * s */
    double rstd = ldexp(s, -m.e);    /* 1 / (std + eps), or 0 */
    double sum_g = 0.0, sum_gx = 0.0;
    for (size_t j = 0; j < a.count; j++) {
      double gi = norm_tensor_get(dy, engine_axes_elem(&a, g, j));
      sum_g += gi;
      sum_gx += gi * (scaled(x, &a, g, j, m.e) - m.mean_s) * s;
    }
    /* d std / d var = 1 / (2 std), taken as 0 where std = 0 (torch's std):
     * coef = sum(g * xhat) / (n * std) */
    double coef = m.sd_s > 0.0    ? ldexp(sum_gx / (n * m.sd_s), -m.e)
                  : m.sd_s == 0.0 ? 0.0
                                  : NAN;
    double mean_g = sum_g / n;
    for (size_t j = 0; j < a.count; j++) {
      size_t i = engine_axes_elem(&a, g, j);
      double xhat = (scaled(x, &a, g, j, m.e) - m.mean_s) * s;
      norm_tensor_set(dx, i,
                      rstd * (norm_tensor_get(dy, i) - mean_g) - xhat * coef);
    }
    engine_stats_put(stats, g, m.mean, m.var,
                     ldexp(1.0 / (m.sd_s + ldexp(p->eps, -m.e)), -m.e));
  }
  return NORM_OK;
}
