/* lp.c -- Lp normalization over a set of axes (torch F.normalize, ONNX
 * LpNormalization) and its gradient, as torch.autograd takes it through
 * x / x.norm(p).clamp_min(eps). Scalar double loops over the groups of
 * engine_axes_*: the norm is taken in double around a power of two near
 * max |x|, so neither huge nor subnormal inputs overflow or vanish. */
#include <math.h>

#include "engine.h"

static int lp_check(const norm_tensor_t *x, const norm_lp_params_t *p,
                    const norm_tensor_t *y, axes_t *a) {
  if (p == NULL) return NORM_E_NULL;
  int err = engine_check_in_out(x, y);
  if (err == NORM_OK) err = engine_axes_init(a, x, p->axes);
  if (err == NORM_OK && !(p->p > 0.0)) err = NORM_E_ARG; /* NaN too */
  return err != NORM_OK ? err : engine_check_eps(p->eps);
}

int64_t norm_lp_groups(const norm_tensor_t *x, const norm_lp_params_t *p) {
  if (x == NULL || p == NULL) return NORM_E_NULL;
  axes_t a;
  int err = norm_tensor_check(x, NULL, NULL);
  if (err == NORM_OK) err = engine_axes_init(&a, x, p->axes);
  return err != NORM_OK ? err : (int64_t)a.groups;
}

/* ||x||_p of group g; NaN if any element is NaN (torch's amax and sums).
 * With m = max |x| = 2^e * f (f in [0.5, 1)), n = 2^e (sum (|x| 2^-e)^p)^(1/p):
 * the scaling is exact, and each term is at most 1. */
static double lp_norm(const norm_tensor_t *x, const axes_t *a, size_t g,
                      double p) {
  double m = 0.0;
  for (size_t j = 0; j < a->count; j++) {
    double v = fabs(norm_tensor_get(x, engine_axes_elem(a, g, j)));
    if (isnan(v)) return NAN;
    if (v > m) m = v;
  }
  if (isinf(p) || m == 0.0 || isinf(m)) return m;
  int e;
  frexp(m, &e);
  double s = 0.0;
  for (size_t j = 0; j < a->count; j++) {
    double v = ldexp(fabs(norm_tensor_get(x, engine_axes_elem(a, g, j))), -e);
    s += p == 1.0 ? v : p == 2.0 ? v * v : pow(v, p);
  }
  double r = p == 1.0 ? s : p == 2.0 ? sqrt(s) : pow(s, 1.0 / p);
  return ldexp(r, e);
}

/* y = x / max(||x||_p, eps) per group (p = INFINITY: ||x|| = max |x|) */
int norm_lp_rows(const norm_tensor_t *x, const norm_lp_params_t *p,
                 norm_tensor_t *y, double *norms, size_t begin, size_t end) {
  axes_t a;
  int err = lp_check(x, p, y, &a);
  if (err == NORM_OK) err = engine_check_range(begin, end, a.groups);
  if (err != NORM_OK) return err;
  for (size_t g = begin; g < end; g++) {
    double n = lp_norm(x, &a, g, p->p);
    double d = n < p->eps ? p->eps : n; /* torch's clamp_min; NaN stays */
    for (size_t j = 0; j < a.count; j++) {
      size_t i = engine_axes_elem(&a, g, j);
      /* an all-zero group with eps = 0: y = 0 (torch: 0 / 0) */
      norm_tensor_set(y, i, d == 0.0 ? 0.0 : norm_tensor_get(x, i) / d);
    }
    if (norms) norms[g] = n;
  }
  return NORM_OK;
}

/* with u = x / n, n = ||x||_p >= eps:
 *   dx = (dy - sgn(u) |u|^(p-1) * sum(dy * u)) / n
 * (|u|^(p-1) taken as 0 where u = 0; p = INFINITY: sgn(u) / ties on the
 * elements with |x| = n, 0 elsewhere); n < eps: dx = dy / eps */
int norm_lp_backward_rows(const norm_tensor_t *x, const norm_tensor_t *dy,
                          const norm_lp_params_t *p, norm_tensor_t *dx,
                          double *norms, size_t begin, size_t end) {
  axes_t a;
  int err = lp_check(x, p, dx, &a);
  if (err == NORM_OK) err = engine_check_grad(x, dy);
  if (err == NORM_OK) err = engine_check_range(begin, end, a.groups);
  if (err != NORM_OK) return err;
  double q = p->p;
  for (size_t g = begin; g < end; g++) {
    double n = lp_norm(x, &a, g, q);
    if (norms) norms[g] = n;
    int clamped = n < p->eps, zero = n == 0.0 && p->eps == 0.0;
    double s = 0.0, ties = 0.0;
    for (size_t j = 0; !clamped && !zero && j < a.count; j++) {
      size_t i = engine_axes_elem(&a, g, j);
      double xi = norm_tensor_get(x, i);
      s += norm_tensor_get(dy, i) * (xi / n);
      if (isinf(q) && fabs(xi) == n) ties += 1.0;
    }
    for (size_t j = 0; j < a.count; j++) {
      size_t i = engine_axes_elem(&a, g, j);
      double dyi = norm_tensor_get(dy, i), d;
      if (zero) {
        d = 0.0; /* the forward's y = 0 is a constant */
      } else if (clamped) {
        d = dyi / p->eps;
      } else {
        double u = norm_tensor_get(x, i) / n, w; /* w = d n / d x_i */
        if (u == 0.0)
          w = 0.0;
        else if (isinf(q))
          w = fabs(u) == 1.0 ? copysign(1.0, u) / ties : 0.0;
        else if (q == 1.0)
          w = copysign(1.0, u);
        else if (q == 2.0)
          w = u;
        else
          w = copysign(pow(fabs(u), q - 1.0), u);
        if (isnan(u)) w = NAN;
        d = (dyi - w * s) / n;
      }
      norm_tensor_set(dx, i, d);
    }
  }
  return NORM_OK;
}
