/* backward.c -- internal: the one mechanism behind every norm's gradient
 * (engine.h). A normalization is y = (x - shift) * s * w + b over each
 * group of its layout; its backward needs, in double, the sums of g = w *
 * dy and of g * xhat, then dx element by element (with the weight and
 * bias gradients), each the vector loops of kern.h (bw_*) over runs that
 * share one weight entry (a scalar w) or over rows with a weight per
 * element. Where the caller took the sums in its moments' pass (`pre`,
 * engine_moments_sums / engine_sumsq_sums: around that pass's shift, moved
 * here to the mean), x and dy are read twice per group -- moments with the
 * sums, then dx, which for rows also adds up the weight gradients
 * (bw_dx_grads); otherwise (non-finite sums, mixed dtypes, unprepared row
 * weights, bfloat16 rows) a sums pass of its own comes first, three reads.
 * Each norm's own file says what shift, s and the coefficient of its
 * variance term are. */
#include <math.h>
#include <string.h>

#include "engine.h"
#include "kern.h"

/* Elements converted to double per step where x, dy and dx are not all of
 * one dtype (the kernels' fused loops take them in place otherwise), and
 * per-element weights that engine_affine_init could not prepare: small
 * enough for the stack and L1, large enough for the vector loops. */
enum { BW_CHUNK = 512 };

/* Sums that are all finite: elsewhere (an Inf in dy) moving them to the
 * shift could turn an Inf into NaN, so the sums pass takes them. */
static int run_sums_finite(const engine_run_sums_t *r) {
  for (size_t i = 0; i < r->runs; i++)
    if (!isfinite(r->dy[i]) || !isfinite(r->dyx[i])) return 0;
  return 1;
}

static const char *at(const norm_tensor_t *t, size_t off) {
  return (const char *)t->data + off * norm_dtype_size(t->dtype);
}

void engine_backward(const norm_tensor_t *x, const norm_tensor_t *dy,
                     const affine_t *a, norm_tensor_t *dx, const layout_t *l,
                     size_t g, double shift, double s, int terms, double coef,
                     const norm_grads_t *grads, const engine_run_sums_t *pre) {
  const kern_t *k = kern_get();
  const norm_tensor_t *weight = a->weight;
  double *gw = grads ? grads->weight : NULL, *gbias = grads ? grads->bias : NULL;
  size_t first = (g % l->affine_mod) * l->affine_mul;
  /* rows: a weight entry per element (layer and RMS norm); else runs of
   * affine_period elements share one (the channel norms) */
  int rows = l->affine_period == 1;
  /* x, dy and dx of one dtype run in place; any other mix as float64
   * chunks converted here (dx from a chunk of doubles, rounded once) */
  int fused = x->dtype == dy->dtype && dy->dtype == dx->dtype;
  norm_dtype_t kd = fused ? x->dtype : NORM_F64;
  int stream = fused && engine_streamed(l, dx->dtype);
  const float *wf = fused ? engine_row_wf(a, l, dx->dtype) : NULL;
  int chunked = !fused || (rows && weight && a->w == NULL);
  double xb[BW_CHUNK], gb[BW_CHUNK], wb[BW_CHUNK];
  double sum_g = 0.0, sum_gx = 0.0, mean_g = 0.0, c = 0.0;
  int spread = (terms & ENGINE_BW_SPREAD) != 0;
  if (pre && !run_sums_finite(pre)) pre = NULL; /* as the sums pass has it */
  /* rows whose sums came with the moments get their gradients in the dx
   * pass (bw_dx_grads: rows with the spread term, in place) */
  if (pre && rows && (!fused || chunked || !spread)) pre = NULL;
  int grads_in_dx = pre && rows && (gw || gbias);
  for (int pass = 0; pass < 2; pass++) {
    if (pass == 0 && terms == 0 && gw == NULL && gbias == NULL)
      continue; /* dx = s * w * dy needs no sums */
    if (pass == 0 && pre) { /* taken with the moments: moved to the shift */
      double d = shift - pre->ref;
      if (rows) { /* sum(w dy), sum(w dy xhat) */
        sum_g = pre->dy[0];
        sum_gx = s * (pre->dyx[0] - d * pre->dy[0]);
        continue;
      }
      for (size_t r = 0; r < pre->runs; r++) {
        size_t entry = first + r;
        double w = weight ? norm_tensor_get(weight, entry) : 1.0;
        double o0 = pre->dy[r], o1 = pre->dyx[r] - d * o0;
        sum_g += w * o0;
        sum_gx += w * s * o1;
        if (gw) gw[entry] += s * o1;
        if (gbias) gbias[entry] += o0;
      }
      continue;
    }
    if (pass == 1) {
      mean_g =
          terms & ENGINE_BW_MEAN ? sum_g / (double)engine_layout_count(l) : 0.0;
      c = coef * sum_gx;
    }
    for (size_t seg = 0; seg < l->nseg; seg++) {
      size_t base = g * l->group_stride + seg * l->seg_stride;
      for (size_t j = 0, run; j < l->seg_len; j += run) {
        /* [j, j + run): the whole row, or one weight entry's run */
        size_t entry = first + (rows ? 0 : j / l->affine_period);
        run = rows ? l->seg_len : (j / l->affine_period + 1) * l->affine_period - j;
        if (run > l->seg_len - j) run = l->seg_len - j;
        double w = !rows && weight ? norm_tensor_get(weight, entry) : 1.0;
        size_t step = chunked ? BW_CHUNK : run;
        for (size_t i = 0; i < run; i += step) {
          size_t n = run - i < step ? run - i : step, e = base + j + i;
          const void *xp = at(x, e), *dyp = at(dy, e);
          if (!fused) {
            k->to_double[x->dtype](xp, n, xb);
            k->to_double[dy->dtype](dyp, n, gb);
            xp = xb, dyp = gb;
          }
          const double *wv = NULL; /* rows: their weights, from entry j + i */
          const float *wvf = NULL; /* as floats (engine_row_wf) */
          if (rows && weight) {
            if (a->w) {
              wv = a->w + first + j + i;
              wvf = wf ? wf + first + j + i : NULL;
            } else {
              k->to_double[weight->dtype](at(weight, first + j + i), n, wb);
              wv = wb;
            }
          }
          if (pass == 0 && rows) {
            double o[2]; /* sum(w dy), sum(w dy xhat) */
            k->bw_row_sums[kd](xp, dyp, n, shift, s, wv,
                               gw ? gw + first + j + i : NULL,
                               gbias ? gbias + first + j + i : NULL, o);
            sum_g += o[0];
            sum_gx += o[1];
          } else if (pass == 0) {
            double o[2]; /* sum(dy), sum(dy (x - shift)) */
            k->bw_sums[kd](xp, dyp, n, shift, o);
            sum_g += w * o[0];
            sum_gx += w * s * o[1];
            if (gw) gw[entry] += s * o[1];
            if (gbias) gbias[entry] += o[0];
          } else if (grads_in_dx) {
            k->bw_dx_grads[kd](xp, dyp, (char *)at(dx, e), n, shift, s,
                               wvf ? NULL : wv, wvf, mean_g, c,
                               gw ? gw + first + j + i : NULL,
                               gbias ? gbias + first + j + i : NULL, stream);
          } else if (fused) {
            k->bw_dx[kd](xp, dyp, (char *)at(dx, e), n, shift, s, w, wv,
                         mean_g, c, spread, stream);
          } else { /* into the x chunk, then rounded once into dx */
            k->bw_dx[NORM_F64](xb, gb, xb, n, shift, s, w, wv, mean_g, c,
                               spread, 0);
            k->axpb[NORM_F64][dx->dtype](xb, (char *)at(dx, e), n, 0.0, 1.0,
                                         0.0, 0);
          }
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
  affine_t aff; /* the weight, prepared once (rows) */
  engine_affine_init(&aff, l, weight, NULL);
  double divisor = (double)engine_layout_count(l) - ddof; /* 0 -> NaN, as torch */
  for (size_t g = begin; g < end; g++) {
    double mean, m2;
    engine_run_sums_t sums, *pre = &sums;
    if (!engine_moments_sums(x, dy, &aff, l, g, &mean, &m2, pre)) {
      engine_moments(x, l, g, &mean, &m2);
      pre = NULL;
    }
    double var = m2 / divisor, std = sqrt(var), rstd, coef;
    if (placement == NORM_EPS_INSIDE_SQRT) {
      rstd = engine_rstd(var, eps);
      coef = engine_scale(var, eps, rstd) / divisor;
    } else { /* d std / d var = 1 / (2 std), taken as 0 where std = 0 */
      rstd = 1.0 / (std + eps);
      coef = std > 0.0 ? 1.0 / (divisor * std) : std == 0.0 ? 0.0 : NAN;
    }
    engine_backward(x, dy, &aff, dx, l, g, mean, engine_scale(var, eps, rstd),
                    ENGINE_BW_MEAN | ENGINE_BW_SPREAD, coef, grads, pre);
    engine_stats_put(stats, g, mean, var, rstd);
  }
}
