/* engine.c -- layouts, the block-wise passes shared by every kernel, and the
 * shared argument checks. See engine.h for the model. */
#include <math.h>
#include <string.h>

#include "engine.h"

enum { BLOCK = 256 }; /* elements per stack block: 2 KiB of doubles */

/* ---- layouts ---- */

static size_t dims_product(const norm_tensor_t *x, int from, int to) {
  size_t n = 1;
  for (int i = from; i < to; i++) n *= (size_t)x->shape[i];
  return n;
}

layout_t layout_rows(const norm_tensor_t *x, int normalized_ndim) {
  size_t m = dims_product(x, x->rank - normalized_ndim, x->rank);
  return (layout_t){.groups = dims_product(x, 0, x->rank - normalized_ndim),
                    .group_stride = m, .nseg = 1, .seg_len = m, .seg_stride = 0,
                    .affine_period = 1, .affine_mod = 1, .affine_mul = 0};
}

layout_t layout_channels(const norm_tensor_t *x) {
  size_t n = (size_t)x->shape[0], c = (size_t)x->shape[1];
  size_t s = dims_product(x, 2, x->rank);
  return (layout_t){.groups = c, .group_stride = s, .nseg = n, .seg_len = s,
                    .seg_stride = c * s, .affine_period = s, .affine_mod = c,
                    .affine_mul = 1};
}

layout_t layout_groups(const norm_tensor_t *x, size_t num_groups) {
  size_t n = (size_t)x->shape[0], c = (size_t)x->shape[1];
  size_t s = dims_product(x, 2, x->rank);
  size_t per = c / num_groups;
  return (layout_t){.groups = n * num_groups, .group_stride = per * s,
                    .nseg = 1, .seg_len = per * s, .seg_stride = 0,
                    .affine_period = s, .affine_mod = num_groups,
                    .affine_mul = per};
}

layout_t layout_instances(const norm_tensor_t *x) {
  size_t n = (size_t)x->shape[0], c = (size_t)x->shape[1];
  size_t s = dims_product(x, 2, x->rank);
  return (layout_t){.groups = n * c, .group_stride = s, .nseg = 1,
                    .seg_len = s, .seg_stride = 0, .affine_period = s,
                    .affine_mod = c, .affine_mul = 1};
}

/* ---- blocks ---- */

static void load_block(const norm_tensor_t *t, size_t off, size_t n,
                       double *dst) {
  switch (t->dtype) {
  case NORM_F32: {
    const float *p = (const float *)t->data + off;
    for (size_t i = 0; i < n; i++) dst[i] = p[i];
    break;
  }
  case NORM_F64: memcpy(dst, (const double *)t->data + off, n * sizeof *dst); break;
  case NORM_F16: {
    const uint16_t *p = (const uint16_t *)t->data + off;
    for (size_t i = 0; i < n; i++) dst[i] = norm_float_from_f16(p[i]);
    break;
  }
  case NORM_BF16: {
    const uint16_t *p = (const uint16_t *)t->data + off;
    for (size_t i = 0; i < n; i++) dst[i] = norm_float_from_bf16(p[i]);
    break;
  }
  default: break; /* unreachable: dtypes are validated first */
  }
}

static void store_block(norm_tensor_t *t, size_t off, size_t n,
                        const double *src) {
  switch (t->dtype) {
  case NORM_F32: {
    float *p = (float *)t->data + off;
    for (size_t i = 0; i < n; i++) p[i] = (float)src[i];
    break;
  }
  case NORM_F64: memcpy((double *)t->data + off, src, n * sizeof *src); break;
  case NORM_F16: {
    uint16_t *p = (uint16_t *)t->data + off;
    for (size_t i = 0; i < n; i++) p[i] = norm_f16_from_double(src[i]);
    break;
  }
  case NORM_BF16: {
    uint16_t *p = (uint16_t *)t->data + off;
    for (size_t i = 0; i < n; i++) p[i] = norm_bf16_from_double(src[i]);
    break;
  }
  default: break;
  }
}

/* Weight (or bias) values for elements [j, j + n) of a segment of group g:
 * a contiguous slice when each element has its own entry, else runs of one
 * repeated entry. A NULL tensor gives `fallback`. */
static void affine_block(const norm_tensor_t *t, const layout_t *l, size_t g,
                         size_t j, size_t n, double fallback, double *dst) {
  if (t == NULL) {
    for (size_t i = 0; i < n; i++) dst[i] = fallback;
    return;
  }
  size_t first = (g % l->affine_mod) * l->affine_mul;
  if (l->affine_period == 1) {
    load_block(t, first + j, n, dst);
    return;
  }
  size_t i = 0;
  while (i < n) {
    size_t k = (j + i) / l->affine_period;
    size_t run = (k + 1) * l->affine_period - (j + i);
    if (run > n - i) run = n - i;
    double v = norm_tensor_get(t, first + k);
    for (size_t r = 0; r < run; r++) dst[i + r] = v;
    i += run;
  }
}

/* Calls body(off, j, n) for each block: element offset in the tensor,
 * index within the segment, and block length. */
#define FOR_EACH_BLOCK(l, g, off, j, n, body)                                  \
  for (size_t seg_ = 0; seg_ < (l)->nseg; seg_++) {                            \
    size_t base_ = (g) * (l)->group_stride + seg_ * (l)->seg_stride;           \
    for (size_t j = 0; j < (l)->seg_len; j += BLOCK) {                         \
      size_t n = (l)->seg_len - j < BLOCK ? (l)->seg_len - j : BLOCK;          \
      size_t off = base_ + j;                                                  \
      body                                                                     \
    }                                                                          \
  }

void engine_moments(const norm_tensor_t *x, const layout_t *l, size_t g,
                    double *mean, double *m2) {
  double buf[BLOCK];
  double sum = 0.0;
  FOR_EACH_BLOCK(l, g, off, j, n, {
    (void)j;
    load_block(x, off, n, buf);
    for (size_t i = 0; i < n; i++) sum += buf[i];
  })
  double count = (double)layout_count(l);
  double mu = sum / count;
  double sq = 0.0, dev = 0.0;
  FOR_EACH_BLOCK(l, g, off, j, n, {
    (void)j;
    load_block(x, off, n, buf);
    for (size_t i = 0; i < n; i++) {
      double d = buf[i] - mu;
      dev += d;
      sq += d * d;
    }
  })
  /* dev is the rounding error of mu times count; fold it back in. */
  *mean = mu + dev / count;
  double m = sq - dev * dev / count;
  *m2 = m < 0 ? 0 : m; /* NaN passes through */
}

double engine_sumsq(const norm_tensor_t *x, const layout_t *l, size_t g) {
  double buf[BLOCK];
  double sq = 0.0;
  FOR_EACH_BLOCK(l, g, off, j, n, {
    (void)j;
    load_block(x, off, n, buf);
    for (size_t i = 0; i < n; i++) sq += buf[i] * buf[i];
  })
  return sq;
}

void engine_apply(const norm_tensor_t *x, norm_tensor_t *y, const layout_t *l,
                  size_t g, double shift, double scale,
                  const norm_tensor_t *weight, const norm_tensor_t *bias) {
  double buf[BLOCK], w[BLOCK], b[BLOCK];
  FOR_EACH_BLOCK(l, g, off, j, n, {
    load_block(x, off, n, buf);
    affine_block(weight, l, g, j, n, 1.0, w);
    affine_block(bias, l, g, j, n, 0.0, b);
    for (size_t i = 0; i < n; i++) buf[i] = (buf[i] - shift) * scale * w[i] + b[i];
    store_block(y, off, n, buf);
  })
}

double engine_rstd(double var, double eps) { return 1.0 / sqrt(var + eps); }

void engine_standardize(const norm_tensor_t *x, norm_tensor_t *y,
                        const layout_t *l, size_t begin, size_t end,
                        double eps, int ddof, norm_eps_placement_t placement,
                        const norm_tensor_t *weight, const norm_tensor_t *bias,
                        const norm_stats_t *stats) {
  double divisor = (double)layout_count(l) - ddof; /* 0 -> NaN var, as torch */
  for (size_t g = begin; g < end; g++) {
    double mean, m2;
    engine_moments(x, l, g, &mean, &m2);
    double var = m2 / divisor;
    double rstd = placement == NORM_EPS_INSIDE_SQRT ? engine_rstd(var, eps)
                                                    : 1.0 / (sqrt(var) + eps);
    engine_apply(x, y, l, g, mean, engine_scale(var, eps, rstd), weight, bias);
    stats_put(stats, g, mean, var, rstd);
  }
}

double engine_scale(double var, double eps, double rstd) {
  return (var == 0.0 && eps == 0.0) ? 0.0 : rstd;
}

/* ---- checks ---- */

int check_eps(double eps) {
  return (isfinite(eps) && eps >= 0.0) ? NORM_OK : NORM_E_EPS;
}

int check_in_out(const norm_tensor_t *x, const norm_tensor_t *y) {
  if (x == NULL || y == NULL) return NORM_E_NULL;
  int err = norm_tensor_check(x, NULL, NULL);
  if (err != NORM_OK) return err;
  if (norm_dtype_size(y->dtype) == 0) return NORM_E_DTYPE;
  if (y->rank != x->rank ||
      memcmp(y->shape, x->shape, (size_t)x->rank * sizeof x->shape[0]) != 0)
    return NORM_E_OUTPUT;
  if (x->data == NULL || y->data == NULL) return NORM_E_NULL;
  return NORM_OK;
}

int check_vector(const norm_tensor_t *t, const int64_t *shape, int rank,
                 int err) {
  if (t == NULL) return NORM_OK;
  int e = norm_tensor_check(t, NULL, NULL);
  if (e == NORM_E_DTYPE) return e;
  if (e != NORM_OK || t->rank != rank ||
      memcmp(t->shape, shape, (size_t)rank * sizeof shape[0]) != 0)
    return err;
  if (t->data == NULL) return NORM_E_NULL;
  return NORM_OK;
}

int check_channels(const norm_tensor_t *x) {
  return x->rank >= 2 ? NORM_OK : NORM_E_CHANNELS;
}

int check_range(size_t begin, size_t end, size_t groups) {
  return (begin <= end && end <= groups) ? NORM_OK : NORM_E_RANGE;
}

void stats_put(const norm_stats_t *s, size_t g, double mean, double var,
               double rstd) {
  if (s == NULL) return;
  if (s->mean) s->mean[g] = mean;
  if (s->var) s->var[g] = var;
  if (s->rstd) s->rstd[g] = rstd;
}
