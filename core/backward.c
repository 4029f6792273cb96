/* backward.c -- internal: the one mechanism behind every norm's gradient
 * (engine.h). A normalization is y = (x - shift) * s * w + b over each
 * group of its layout; its backward is two passes over the group in
 * double: the sums of g = w * dy and of g * xhat (with the weight and
 * bias gradients on the way), then dx element by element. Each norm's own
 * file says what shift, s and the coefficient of its variance term are. */
#include <math.h>
#include <string.h>

#include "engine.h"
#include "kern.h"

/* Elements converted to double per step: small enough for the stack and
 * L1, large enough for the kernels' vector loops. */
enum { BW_CHUNK = 512 };

static const char *at(const norm_tensor_t *t, size_t off) {
  return (const char *)t->data + off * norm_dtype_size(t->dtype);
}

/* The weight entries of elements [j0, j0 + n) of a segment of group g
 * into wb (1 without a weight). */
static void weights_of(const norm_tensor_t *w, const layout_t *l, size_t g,
                       size_t j0, size_t n, double *wb) {
  size_t first = (g % l->affine_mod) * l->affine_mul;
  if (w == NULL) {
    for (size_t i = 0; i < n; i++) wb[i] = 1.0;
  } else if (l->affine_period == 1) {
    kern_get()->to_double[w->dtype](at(w, first + j0), n, wb);
  } else {
    size_t last = (size_t)-1;
    double v = 0.0;
    for (size_t i = 0; i < n; i++) {
      size_t a = first + (j0 + i) / l->affine_period;
      if (a != last) v = norm_tensor_get(w, last = a);
      wb[i] = v;
    }
  }
}

void engine_backward(const norm_tensor_t *x, const norm_tensor_t *dy,
                     const norm_tensor_t *weight, norm_tensor_t *dx,
                     const layout_t *l, size_t g, double shift, double s,
                     int terms, double coef, const norm_grads_t *grads) {
  const kern_t *k = kern_get();
  double xb[BW_CHUNK], gb[BW_CHUNK], wb[BW_CHUNK];
  double *gw = grads ? grads->weight : NULL, *gbias = grads ? grads->bias : NULL;
  size_t first = (g % l->affine_mod) * l->affine_mul;
  double sum_g = 0.0, sum_gx = 0.0, mean_g = 0.0, c = 0.0;
  int spread = terms & ENGINE_BW_SPREAD;
  for (int pass = 0; pass < 2; pass++) {
    if (pass == 1) {
      mean_g =
          terms & ENGINE_BW_MEAN ? sum_g / (double)engine_layout_count(l) : 0.0;
      c = coef * sum_gx;
    }
    for (size_t seg = 0; seg < l->nseg; seg++) {
      size_t base = g * l->group_stride + seg * l->seg_stride;
      for (size_t j0 = 0; j0 < l->seg_len; j0 += BW_CHUNK) {
        size_t n = l->seg_len - j0 < BW_CHUNK ? l->seg_len - j0 : BW_CHUNK;
        k->to_double[x->dtype](at(x, base + j0), n, xb);
        k->to_double[dy->dtype](at(dy, base + j0), n, gb); /* dy, for now */
        weights_of(weight, l, g, j0, n, wb);
        if (pass == 0) {
          for (size_t i = 0; i < n; i++) {
            double xhat = (xb[i] - shift) * s, gi = wb[i] * gb[i];
            sum_g += gi;
            sum_gx += gi * xhat;
            size_t a = first + (j0 + i) / l->affine_period;
            if (gw) gw[a] += gb[i] * xhat;
            if (gbias) gbias[a] += gb[i];
          }
        } else {
          for (size_t i = 0; i < n; i++) {
            double xhat = (xb[i] - shift) * s;
            double dxi = s * (wb[i] * gb[i] - mean_g);
            xb[i] = spread ? dxi - xhat * c : dxi; /* dx */
          }
          /* rounded once from double into dx's dtype (dy's chunk was read) */
          k->axpb[NORM_F64][dx->dtype](xb, (char *)at(dx, base + j0), n, 0.0,
                                       1.0, 0.0, 0);
        }
      }
    }
  }
}

int engine_check_grad(const norm_tensor_t *x, const norm_tensor_t *dy) {
  if (dy == NULL) return NORM_E_NULL;
  int err = norm_tensor_check(dy, NULL, NULL);
  if (err == NORM_E_DTYPE) return err;
  if (err != NORM_OK || dy->rank != x->rank ||
      memcmp(dy->shape, x->shape, (size_t)x->rank * sizeof x->shape[0]) != 0)
    return NORM_E_GRAD_OUTPUT;
  return dy->data == NULL ? NORM_E_NULL : NORM_OK;
}

void engine_standardize_backward(const norm_tensor_t *x, const norm_tensor_t *dy,
                                 const norm_tensor_t *weight, norm_tensor_t *dx,
                                 const layout_t *l, size_t begin, size_t end,
                                 double eps, int ddof,
                                 norm_eps_placement_t placement,
                                 const norm_grads_t *grads,
                                 const norm_stats_t *stats) {
  double divisor = (double)engine_layout_count(l) - ddof; /* 0 -> NaN, as torch */
  for (size_t g = begin; g < end; g++) {
    double mean, m2;
    engine_moments(x, l, g, &mean, &m2);
    double var = m2 / divisor, std = sqrt(var), rstd, coef;
    if (placement == NORM_EPS_INSIDE_SQRT) {
      rstd = engine_rstd(var, eps);
      coef = engine_scale(var, eps, rstd) / divisor;
    } else { /* d std / d var = 1 / (2 std), taken as 0 where std = 0 */
      rstd = 1.0 / (std + eps);
      coef = std > 0.0 ? 1.0 / (divisor * std) : std == 0.0 ? 0.0 : NAN;
    }
    engine_backward(x, dy, weight, dx, l, g, mean, engine_scale(var, eps, rstd),
                    ENGINE_BW_MEAN | ENGINE_BW_SPREAD, coef, grads);
    engine_stats_put(stats, g, mean, var, rstd);
  }
}
