/* lrn.c -- local response normalization across channels of (N, C, *)
 * (torch F.local_response_norm, ONNX LRN; they place an even window
 * differently) and its gradient. Scalar double loops over the channels of
 * a group: each window sum is summed afresh (a running sum's subtractions
 * would lose a small channel next to a huge one), C * w terms per group
 * for a window of w channels. Channels already written (y may alias x, dx
 * dy) are kept in rings of LRN_RING doubles on the stack, which bounds the
 * window: see lrn_check. */
#include <math.h>

#include "engine.h"

enum { LRN_RING = 4096 };

/* Element layout of x = (N, C, S): group (n, s), channel c. */
typedef struct {
  size_t C, S, groups;
  size_t lo, hi; /* window(c) = [c - lo, c + hi], clipped to [0, C) */
  double a;       /* alpha / size */
} lrn_t;

static int lrn_check(const norm_tensor_t *x, const norm_lrn_params_t *p,
                     const norm_tensor_t *y, lrn_t *l) {
  if (p == NULL) return NORM_E_NULL;
  int err = engine_check_in_out(x, y);
  if (err == NORM_OK) err = engine_check_channels(x);
  if (err != NORM_OK) return err;
  if (p->size < 1 || !isfinite(p->alpha) || !isfinite(p->beta) ||
      !isfinite(p->k) || (unsigned)p->convention > NORM_LRN_ONNX)
    return NORM_E_ARG;
  l->C = (size_t)x->shape[1];
  l->S = 1;
  for (int i = 2; i < x->rank; i++) l->S *= (size_t)x->shape[i];
  l->groups = (size_t)x->shape[0] * l->S;
  int64_t lo = p->size / 2, hi = (p->size - 1) / 2; /* torch */
  if (p->convention == NORM_LRN_ONNX) lo = (p->size - 1) / 2, hi = p->size / 2;
  /* Reaches beyond the channels are clipped: at most C - 1 either way. */
  l->lo = (size_t)(lo < (int64_t)l->C ? lo : (int64_t)l->C - 1);
  l->hi = (size_t)(hi < (int64_t)l->C ? hi : (int64_t)l->C - 1);
  l->a = p->alpha / (double)p->size;
  /* The rings hold channel c at c % LRN_RING: every channel of the group
   * (C <= LRN_RING), or the last window's worth. */
  if (l->C > LRN_RING && l->lo + l->hi + 1 > LRN_RING) return NORM_E_ARG;
  return NORM_OK;
}

int64_t norm_lrn_groups(const norm_tensor_t *x) {
  if (x == NULL) return NORM_E_NULL;
  int err = norm_tensor_check(x, NULL, NULL);
  if (err == NORM_OK) err = engine_check_channels(x);
  if (err != NORM_OK) return err;
  size_t s = 1;
  for (int i = 2; i < x->rank; i++) s *= (size_t)x->shape[i];
  return (int64_t)((size_t)x->shape[0] * s);
}

/* x's flat index of channel c of group g. */
static size_t lrn_at(const lrn_t *l, size_t g, size_t c) {
  return (g / l->S * l->C + c) * l->S + g % l->S;
}

/* sum_{c' in window(c)} x_c'^2, channels below `below` from ring (the
 * values x had before they were overwritten), the others from x. */
static double window_sum(const norm_tensor_t *x, const lrn_t *l, size_t g,
                         size_t c, size_t below, const double *ring) {
  size_t first = c > l->lo ? c - l->lo : 0;
  size_t last = l->C - 1 - c > l->hi ? c + l->hi : l->C - 1;
  double s = 0.0;
  for (size_t k = first; k <= last; k++) {
    double v = k < below ? ring[k % LRN_RING]
                         : norm_tensor_get(x, lrn_at(l, g, k));
    s += v * v;
  }
  return s;
}

/* y_c = x_c / (k + alpha / size * sum_{c' in window(c)} x_c'^2)^beta */
int norm_lrn_rows(const norm_tensor_t *x, const norm_lrn_params_t *p,
                  norm_tensor_t *y, double *square_sum, size_t begin,
                  size_t end) {
  lrn_t l;
  int err = lrn_check(x, p, y, &l);
  if (err == NORM_OK) err = engine_check_range(begin, end, l.groups);
  if (err != NORM_OK) return err;
  double ring[LRN_RING]; /* x of the channels written */
  for (size_t g = begin; g < end; g++) {
    for (size_t c = 0; c < l.C; c++) {
      size_t i = lrn_at(&l, g, c);
      double s = window_sum(x, &l, g, c, c, ring);
      double xc = ring[c % LRN_RING] = norm_tensor_get(x, i);
      norm_tensor_set(y, i, xc / pow(p->k + l.a * s, p->beta));
      if (square_sum) square_sum[i] = s;
    }
  }
  return NORM_OK;
}

/* with D_c = k + alpha / size * sum_{c' in window(c)} x_c'^2:
 *   dx_j = dy_j D_j^-beta
 *          - 2 beta alpha / size * x_j * sum_{c: j in window(c)} dy_c x_c D_c^(-beta-1) */
int norm_lrn_backward_rows(const norm_tensor_t *x, const norm_tensor_t *dy,
                           const norm_lrn_params_t *p, norm_tensor_t *dx,
                           size_t begin, size_t end) {
  lrn_t l;
  int err = lrn_check(x, p, dx, &l);
  if (err == NORM_OK) err = engine_check_grad(x, dy);
  if (err == NORM_OK) err = engine_check_range(begin, end, l.groups);
  if (err != NORM_OK) return err;
  /* channel c's D_c^-beta and t_c = dy_c x_c D_c^(-beta-1), computed while
   * dy_c is unwritten: when c = j + lo comes into reach */
  double pw[LRN_RING], t[LRN_RING];
  double f = 2.0 * p->beta * l.a;
  for (size_t g = begin; g < end; g++) {
    size_t next = 0; /* channels [0, next) have pw and t */
    for (size_t j = 0; j < l.C; j++) {
      size_t reach = l.C - 1 - j > l.lo ? j + l.lo : l.C - 1;
      for (; next <= reach; next++) {
        size_t i = lrn_at(&l, g, next);
        double d = p->k + l.a * window_sum(x, &l, g, next, 0, NULL);
        double q = pow(d, -p->beta);
        pw[next % LRN_RING] = q;
        t[next % LRN_RING] =
            norm_tensor_get(dy, i) * norm_tensor_get(x, i) * (q / d);
      }
      double s = 0.0;
      for (size_t c = j > l.hi ? j - l.hi : 0; c <= reach; c++)
        s += t[c % LRN_RING];
      size_t i = lrn_at(&l, g, j);
      norm_tensor_set(dx, i,
                      norm_tensor_get(dy, i) * pw[j % LRN_RING] -
                          f * norm_tensor_get(x, i) * s);
    }
  }
  return NORM_OK;
}
