/* engine.c -- layouts, the passes shared by every kernel (over the
 * vectorized loops of kern.h), and the shared argument checks. See engine.h
 * for the model. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "engine.h"
#include "kern.h"

/* Moments are computed chunk by chunk: a chunk of CHUNK_BYTES stays in L1
 * while its passes run (one, or two when the guard in engine_moments asks
 * for it), so each element is read from memory once. */
enum { CHUNK_BYTES = 16384 };
/* Per-element weights in other dtypes than double are converted in blocks
 * of WBLOCK when they were not converted once up front (affine_t). */
enum { WBLOCK = 512 };

/* ---- layouts ---- */

static size_t dims_product(const norm_tensor_t *x, int from, int to) {
  size_t n = 1;
  for (int i = from; i < to; i++) n *= (size_t)x->shape[i];
  return n;
}

layout_t engine_layout_rows(const norm_tensor_t *x, int normalized_ndim) {
  size_t m = dims_product(x, x->rank - normalized_ndim, x->rank);
  return (layout_t){.groups = dims_product(x, 0, x->rank - normalized_ndim),
                    .group_stride = m, .nseg = 1, .seg_len = m, .seg_stride = 0,
                    .affine_period = 1, .affine_mod = 1, .affine_mul = 0};
}

layout_t engine_layout_channels(const norm_tensor_t *x) {
  size_t n = (size_t)x->shape[0], c = (size_t)x->shape[1];
  size_t s = dims_product(x, 2, x->rank);
  return (layout_t){.groups = c, .group_stride = s, .nseg = n, .seg_len = s,
                    .seg_stride = c * s, .affine_period = s, .affine_mod = c,
                    .affine_mul = 1};
}

layout_t engine_layout_groups(const norm_tensor_t *x, size_t num_groups) {
  size_t n = (size_t)x->shape[0], c = (size_t)x->shape[1];
  size_t s = dims_product(x, 2, x->rank);
  size_t per = c / num_groups;
  return (layout_t){.groups = n * num_groups, .group_stride = per * s,
                    .nseg = 1, .seg_len = per * s, .seg_stride = 0,
                    .affine_period = s, .affine_mod = num_groups,
                    .affine_mul = per};
}

layout_t engine_layout_instances(const norm_tensor_t *x) {
  size_t n = (size_t)x->shape[0], c = (size_t)x->shape[1];
  size_t s = dims_product(x, 2, x->rank);
  return (layout_t){.groups = n * c, .group_stride = s, .nseg = 1,
                    .seg_len = s, .seg_stride = 0, .affine_period = s,
                    .affine_mod = c, .affine_mul = 1};
}

int engine_streamed(const layout_t *l, norm_dtype_t dt) {
  return l->groups * engine_layout_count(l) >=
         ENGINE_STREAM_BYTES / norm_dtype_size(dt);
}

const float *engine_row_wf(const affine_t *a, const layout_t *l,
                           norm_dtype_t dt) {
  return a && a->w && a->wf && engine_streamed(l, dt) ? a->wf : NULL;
}

/* ---- passes ---- */

static const char *elem(const norm_tensor_t *t, size_t off) {
  return (const char *)t->data + off * norm_dtype_size(t->dtype);
}

/* kern.h's `ahead` for the statistics pass over the chunk at element j of
 * segment seg of group g, n elements: the distance to the chunk read
 * next (the rest of that segment, else the next segment, else the next
 * group's first) where x is streamed from memory, so that memory keeps
 * reading while the apply (or the dx pass) of this group runs from the
 * caches: 4096x4096 float32, 1 thread, layer norm forward ~28 -> ~40 GB/s
 * and backward +11%, RMS norm forward +20%. 0 past the tensor, or for a
 * tensor the caches hold (there it gained nothing). */
static ptrdiff_t chunk_ahead(const norm_tensor_t *x, const layout_t *l,
                             size_t g, size_t seg, size_t j, size_t n) {
  if (!engine_streamed(l, x->dtype)) return 0;
  size_t at = g * l->group_stride + seg * l->seg_stride + j;
  if ((j += n) >= l->seg_len) {
    j = 0;
    if (++seg == l->nseg) {
      seg = 0;
      if (++g == l->groups) return 0;
    }
  }
  return (ptrdiff_t)(g * l->group_stride + seg * l->seg_stride + j) -
         (ptrdiff_t)at;
}

/* One chunk of n elements at p: its moments around a shift (returned) near
 * its mean, c = {sum(x - mu), sum((x - mu)^2)} and *m2 its M2. With dy (dyp
 * not NULL, of x's dtype): also the sums of dy around the same shift over
 * [0, cut) and [cut, n), as bw_centered_sums gives them, in the same pass
 * (centered's bits: the moments are the same either way).
 * One pass around a shift K near the mean (the mean of the first few
 * elements): S1 = sum(x - K), S2 = sum((x - K)^2), M2 = S2 - S1^2 / n.
 * Each lane accumulator sums at most n / 4 terms, so S2 and S1^2 / n carry
 * relative errors below n / 4 * 2^-53 (2.3e-13 for the largest chunk, 8192
 * halves; a bound rarely approached) and M2 at most twice that while S2 <=
 * 2 * M2, i.e. while K is within one standard deviation of the mean
 * (random data: almost always). Otherwise (an outlier among the first
 * elements, NaN, Inf) the chunk gets the corrected two-pass from L1.
 * `ahead` (kern.h; 0: none): the chunk read next, prefetched by the first
 * pass. */
static double chunk_moments(const kern_t *k, norm_dtype_t dt, const char *p,
                            size_t n, ptrdiff_t ahead, const char *dyp,
                            size_t cut, int rows, const double *w,
                            const float *wf, double c[2], double *m2,
                            double sums[4]) {
  double count = (double)n;
  size_t head = n < 32 ? n : 32;
  double mu = k->sum[dt](p, head) / (double)head;
  for (int pass = 0; pass < 2; pass++, ahead = 0) {
    if (dyp && rows) /* one piece, the weights per element */
      k->bw_centered_row_sums[dt](p, dyp, n, mu, w, wf, ahead, c, sums);
    else if (dyp)
      k->bw_centered_sums[dt](p, dyp, n, mu, cut, ahead, c, sums);
    else
      k->centered[dt](p, n, mu, ahead, c);
    *m2 = c[1] - c[0] * c[0] / count;
    if (c[1] <= 2.0 * *m2) break;
    if (pass == 0) mu += c[0] / count;
  }
  return mu;
}

/* Rows of this dtype take their sums with the moments and their
 * gradients in the dx pass (bw_dx_grads, double lanes). Not bfloat16: its
 * dx pass has float lanes (bw_dx_bf16_f) and, compute-bound, loses more
 * to double lanes than the pass over x saves (kernel_bench, backward
 * layer / rms bfloat16 64x768: 4.3 -> 3.8, 4.7 -> 3.5 GB/s); it keeps the
 * sums pass. */
static int engine_row_sums_fused(norm_dtype_t dt) { return dt != NORM_BF16; }

void engine_moments(const norm_tensor_t *x, const layout_t *l, size_t g,
                    double *mean, double *m2) {
  engine_moments_sums(x, NULL, NULL, l, g, mean, m2, NULL);
}

int engine_moments_sums(const norm_tensor_t *x, const norm_tensor_t *dy,
                        const affine_t *a, const layout_t *l, size_t g,
                        double *mean, double *m2, engine_run_sums_t *rs) {
  const kern_t *k = kern_get();
  size_t chunk = CHUNK_BYTES / norm_dtype_size(x->dtype);
  size_t period = l->affine_period;
  int rows = period == 1;
  /* rows: their weights prepared as doubles (or none) */
  const double *w = rows && a && a->weight ? a->w : NULL;
  const float *wf = w ? engine_row_wf(a, l, x->dtype) : NULL; /* the same */
  if (dy && rows) { /* the whole segment one piece */
    if (dy->dtype != x->dtype || !engine_row_sums_fused(x->dtype) ||
        (a && a->weight && w == NULL))
      return 0;
    rs->runs = 1;
    rs->dy[0] = rs->dyx[0] = 0.0;
  } else if (dy) { /* runs of one weight entry, at most one run end inside a chunk */
    if (dy->dtype != x->dtype || l->seg_len % period != 0 ||
        l->seg_len / period > ENGINE_RUNS)
      return 0;
    for (size_t j = 0; j < l->seg_len; j += chunk) {
      size_t end = l->seg_len - j < chunk ? l->seg_len : j + chunk;
      if ((j / period + 2) * period < end) return 0;
    }
    rs->runs = l->seg_len / period;
    for (size_t r = 0; r < rs->runs; r++) rs->dy[r] = rs->dyx[r] = 0.0;
  }
  /* Chunk means are merged relative to the first chunk's estimate `shift`:
   * near it (|mean| >> std) the differences are exact (Sterbenz), so the
   * merge keeps the precision of the centered sums. The dy sums are moved
   * to the same shift: sum(dy (x - shift)) = sum(dy (x - mu)) - (shift -
   * mu) sum(dy), the difference exact there too. */
  norm_moments_t acc = {0.0, 0.0, 0.0};
  double shift = 0.0;
  for (size_t seg = 0; seg < l->nseg; seg++) {
    size_t base = g * l->group_stride + seg * l->seg_stride;
    for (size_t j = 0; j < l->seg_len; j += chunk) {
      size_t n = l->seg_len - j < chunk ? l->seg_len - j : chunk;
      ptrdiff_t ahead = chunk_ahead(x, l, g, seg, j, n);
      size_t run = dy && !rows ? j / period : 0;
      size_t cut = rows ? n : (run + 1) * period - j;
      double c[2], m, sums[4];
      size_t wat = (g % l->affine_mod) * l->affine_mul + j;
      const double *wj = w ? w + wat : NULL;
      const float *wfj = wf ? wf + wat : NULL;
      double mu = chunk_moments(k, x->dtype, elem(x, base + j), n, ahead,
                                dy ? elem(dy, base + j) : NULL,
                                cut < n ? cut : n, rows, wj, wfj, c, &m, sums);
      if (acc.count == 0) shift = mu;
      if (dy) {
        double d = shift - mu;
        rs->dy[run] += sums[0];
        rs->dyx[run] += sums[1] - d * sums[0];
        if (cut < n) {
          rs->dy[run + 1] += sums[2];
          rs->dyx[run + 1] += sums[3] - d * sums[2];
        }
      }
      double count = (double)n;
      /* c[0] / count is what mu misses of the chunk's mean. */
      norm_moments_t part = {count, (mu - shift) + c[0] / count, m < 0 ? 0 : m};
      norm_moments_merge(&acc, &part); /* NaN passes through */
    }
  }
  *mean = shift + acc.mean;
  *m2 = acc.m2;
  if (dy) rs->ref = shift;
  return 1;
}

int engine_sumsq_sums(const norm_tensor_t *x, const norm_tensor_t *dy,
                      const affine_t *a, const layout_t *l, size_t g,
                      double *sq, engine_run_sums_t *rs) {
  const double *w = a && a->weight ? a->w : NULL;
  if (dy->dtype != x->dtype || !engine_row_sums_fused(x->dtype) ||
      l->affine_period != 1 || (a && a->weight && w == NULL))
    return 0;
  const kern_t *k = kern_get();
  size_t wat = (g % l->affine_mod) * l->affine_mul;
  const double *wg = w ? w + wat : NULL;
  const float *wf = w ? engine_row_wf(a, l, x->dtype) : NULL; /* the same */
  const float *wfg = wf ? wf + wat : NULL;
  /* engine_sumsq's sum, segment by segment in its order */
  *sq = 0.0;
  rs->runs = 1;
  rs->ref = 0.0; /* RMS norm's shift: the sums need no moving */
  rs->dy[0] = rs->dyx[0] = 0.0;
  for (size_t seg = 0; seg < l->nseg; seg++) {
    size_t base = g * l->group_stride + seg * l->seg_stride;
    ptrdiff_t ahead = chunk_ahead(x, l, g, seg, 0, l->seg_len);
    double sums[2];
    *sq += k->bw_sumsq_row_sums[x->dtype](elem(x, base), elem(dy, base),
                                          l->seg_len, wg, wfg, ahead, sums);
    rs->dy[0] += sums[0];
    rs->dyx[0] += sums[1];
  }
  return 1;
}

double engine_sumsq(const norm_tensor_t *x, const layout_t *l, size_t g) {
  const kern_t *k = kern_get();
  double sq = 0.0;
  for (size_t seg = 0; seg < l->nseg; seg++)
    sq += k->sumsq[x->dtype](
        elem(x, g * l->group_stride + seg * l->seg_stride), l->seg_len,
        chunk_ahead(x, l, g, seg, 0, l->seg_len));
  return sq;
}

/* Float copies of a prepared weight / bias vector when they are exact
 * (float32, float16, bfloat16 entries, all finite; an absent tensor
 * counts), and in *max the largest |entry|; 0 if not. */
static int prepare_float(const norm_tensor_t *t, const double *d, float *out,
                         double *max) {
  *max = 0.0;
  if (t == NULL) return 1;
  if (d == NULL || t->dtype == NORM_F64) return 0; /* float64: not exact */
  size_t n;
  norm_tensor_check(t, &n, NULL);
  for (size_t i = 0; i < n; i++) {
    if (!isfinite(d[i])) return 0;
    if (fabs(d[i]) > *max) *max = fabs(d[i]);
    out[i] = (float)d[i]; /* exact: a float16/bfloat16/float */
  }
  return 1;
}

void engine_affine_init(affine_t *a, const layout_t *l,
                        const norm_tensor_t *weight,
                        const norm_tensor_t *bias) {
  a->weight = weight;
  a->bias = bias;
  a->w = a->b = NULL;
  a->float_ok = 0;
  a->w_max = DBL_MAX; /* unknown */
  a->wf = a->bf = NULL;
  if (l->affine_period != 1) return; /* one entry per run: read as scalars */
  const kern_t *k = kern_get();
  const norm_tensor_t *t[2] = {weight, bias};
  double *buf[2] = {a->wbuf, a->bbuf};
  const double **out[2] = {&a->w, &a->b};
  for (int i = 0; i < 2; i++) {
    size_t n;
    if (t[i] == NULL || norm_tensor_check(t[i], &n, NULL) != NORM_OK) continue;
    if (t[i]->dtype == NORM_F64) {
      *out[i] = t[i]->data;
    } else if (n <= ENGINE_PREP) {
      k->to_double[t[i]->dtype](t[i]->data, n, buf[i]);
      *out[i] = buf[i];
    }
  }
  double wmax, bmax;
  if (prepare_float(weight, a->w, a->wfbuf, &wmax) &&
      prepare_float(bias, a->b, a->bfbuf, &bmax)) {
    a->wf = weight ? a->wfbuf : NULL;
    a->bf = bias ? a->bfbuf : NULL;
    a->w_max = wmax;
    a->float_ok = wmax <= 1e30 && bmax <= 1.0;
  }
}

/* Whether a weight or bias entry may take engine_apply's float path: a
 * float exactly (float32, float16 or bfloat16 data), finite, |v| <= max
 * (prepare_float's float_ok conditions, for one entry). */
static int float_entry(double v, double max) {
  return (double)(float)v == v && fabs(v) <= max;
}

/* Weight or bias entries [at, at + n) as doubles: prepared, or converted
 * into tmp; NULL when the tensor is absent. */
static const double *affine_slice(const kern_t *k, const norm_tensor_t *t,
                                  const double *prepared, size_t at, size_t n,
                                  double *tmp) {
  if (t == NULL) return NULL;
  if (prepared) return prepared + at;
  k->to_double[t->dtype](elem(t, at), n, tmp);
  return tmp;
}

void engine_apply(const norm_tensor_t *x, norm_tensor_t *y, const layout_t *l,
                  size_t g, double shift, double scale, const affine_t *a,
                  int bounded) {
  const kern_t *k = kern_get();
  size_t first = (g % l->affine_mod) * l->affine_mul;
  int per_element = l->affine_period == 1 && (a->weight || a->bias);
  int stream = engine_streamed(l, y->dtype);
  /* float32 in and out, in float lanes (see engine.h) */
  int float_path = bounded && fabs(scale) <= 1e30 && x->dtype == NORM_F32 &&
                   y->dtype == NORM_F32;
  for (size_t seg = 0; seg < l->nseg; seg++) {
    size_t base = g * l->group_stride + seg * l->seg_stride;
    if (per_element && float_path && a->float_ok) {
      size_t at = base * sizeof(float);
      k->affine_f32((const float *)((const char *)x->data + at),
                    (float *)((char *)y->data + at), l->seg_len, shift, scale,
                    a->wf ? a->wf + first : NULL, a->bf ? a->bf + first : NULL,
                    stream);
      continue;
    }
    if (per_element && (a->wf || a->bf) && k->affine_bf16 &&
        x->dtype == NORM_BF16 && y->dtype == NORM_BF16) { /* exact */
      size_t at = base * sizeof(uint16_t);
      k->affine_bf16((const uint16_t *)((const char *)x->data + at),
                     (uint16_t *)((char *)y->data + at), l->seg_len, shift,
                     scale, a->wf ? a->wf + first : NULL,
                     a->bf ? a->bf + first : NULL, a->w_max, stream);
      continue;
    }
    if (per_element) {
      int whole = (a->weight == NULL || a->w) && (a->bias == NULL || a->b);
      size_t step = whole ? l->seg_len : WBLOCK;
      double wtmp[WBLOCK], btmp[WBLOCK];
      for (size_t j = 0; j < l->seg_len; j += step) {
        size_t n = l->seg_len - j < step ? l->seg_len - j : step;
        const double *w = affine_slice(k, a->weight, a->w, first + j, n, wtmp);
        const double *b = affine_slice(k, a->bias, a->b, first + j, n, btmp);
        k->affine[x->dtype][y->dtype](elem(x, base + j),
                                      (char *)elem(y, base + j), n, shift,
                                      scale, w, b, stream);
      }
      continue;
    }
    /* runs of one weight / bias entry (the whole segment without them) */
    int plain = a->weight == NULL && a->bias == NULL;
    for (size_t j = 0; j < l->seg_len;) {
      size_t kk = plain ? 0 : j / l->affine_period;
      size_t run = plain ? l->seg_len : (kk + 1) * l->affine_period - j;
      if (run > l->seg_len - j) run = l->seg_len - j;
      double w = a->weight ? norm_tensor_get(a->weight, first + kk) : 1.0;
      double b = a->bias ? norm_tensor_get(a->bias, first + kk) : 0.0;
      if (float_path && float_entry(w, 1e30) && float_entry(b, 1.0))
        k->axpb_f32((const float *)elem(x, base + j), (float *)elem(y, base + j),
                    run, shift, scale, (float)w, (float)b, stream);
      else
        k->axpb[x->dtype][y->dtype](elem(x, base + j),
                                    (char *)elem(y, base + j), run, shift,
                                    scale * w, b, stream);
      j += run;
    }
  }
}

double engine_rstd(double var, double eps) { return 1.0 / sqrt(var + eps); }

void engine_standardize(const norm_tensor_t *x, norm_tensor_t *y,
                        const layout_t *l, size_t begin, size_t end,
                        double eps, int ddof, norm_eps_placement_t placement,
                        const norm_tensor_t *weight, const norm_tensor_t *bias,
                        const norm_stats_t *stats) {
  /* 0 -> NaN var, as torch */
  double divisor = (double)engine_layout_count(l) - ddof;
  affine_t aff;
  engine_affine_init(&aff, l, weight, bias);
  for (size_t g = begin; g < end; g++) {
    double mean, m2;
    engine_moments(x, l, g, &mean, &m2);
    double var = m2 / divisor;
    double rstd = placement == NORM_EPS_INSIDE_SQRT ? engine_rstd(var, eps)
                                                    : 1.0 / (sqrt(var) + eps);
    int bounded = fabs(mean) <= 1e37 && sqrt(m2) <= 1e37;
    engine_apply(x, y, l, g, mean, engine_scale(var, eps, rstd), &aff,
                 bounded);
    engine_stats_put(stats, g, mean, var, rstd);
  }
}

double engine_scale(double var, double eps, double rstd) {
  return (var == 0.0 && eps == 0.0) ? 0.0 : rstd;
}

/* ---- reductions over a set of axes ---- */

int engine_axes_init(axes_t *a, const norm_tensor_t *x, unsigned axes) {
  if (axes == 0 || (x->rank < 32 && (axes >> x->rank) != 0)) return NORM_E_AXIS;
  memset(a, 0, sizeof *a);
  a->groups = a->count = 1;
  size_t stride = 1;
  for (int i = x->rank - 1; i >= 0; i--) { /* innermost first */
    size_t d = (size_t)x->shape[i];
    if (axes >> i & 1u) {
      a->red_dim[a->nred] = d, a->red_stride[a->nred++] = stride;
      a->count *= d;
    } else {
      a->kept_dim[a->nkept] = d, a->kept_stride[a->nkept++] = stride;
      a->groups *= d;
    }
    stride *= d;
  }
  return NORM_OK;
}

/* The flat offset of the index `k` of the dims dim[0..n) (innermost first). */
static size_t axes_offset(const size_t *dim, const size_t *stride, int n,
                          size_t k) {
  size_t off = 0;
  for (int i = 0; i < n; i++) {
    off += k % dim[i] * stride[i];
    k /= dim[i];
  }
  return off;
}

size_t engine_axes_elem(const axes_t *a, size_t g, size_t j) {
  return axes_offset(a->kept_dim, a->kept_stride, a->nkept, g) +
         axes_offset(a->red_dim, a->red_stride, a->nred, j);
}

/* The inverse of engine_axes_elem over the whole tensor: each element's
 * group, by walking every group's elements (the kernels' own order). */
int norm_axes_groups(const norm_tensor_t *x, unsigned axes, size_t *group_of) {
  if (x == NULL || group_of == NULL) return NORM_E_NULL;
  axes_t a;
  int err = norm_tensor_check(x, NULL, NULL);
  if (err == NORM_OK) err = engine_axes_init(&a, x, axes);
  if (err != NORM_OK) return err;
  for (size_t g = 0; g < a.groups; g++)
    for (size_t j = 0; j < a.count; j++) group_of[engine_axes_elem(&a, g, j)] = g;
  return NORM_OK;
}

/* ---- checks ---- */

int engine_check_eps(double eps) {
  return (isfinite(eps) && eps >= 0.0) ? NORM_OK : NORM_E_EPS;
}

int engine_check_in_out(const norm_tensor_t *x, const norm_tensor_t *y) {
  if (x == NULL || y == NULL) return NORM_E_NULL;
  int err = norm_tensor_check(x, NULL, NULL);
  if (err != NORM_OK) return err;
  if (norm_dtype_size(y->dtype) == 0) return NORM_E_DTYPE;
  if (y->rank != x->rank ||
      memcmp(y->shape, x->shape, (size_t)x->rank * sizeof x->shape[0]) != 0)
    return NORM_E_OUTPUT;
  /* Same shape, but a wider dtype may still overflow the byte size. */
  if ((err = norm_tensor_check(y, NULL, NULL)) != NORM_OK) return err;
  if (x->data == NULL || y->data == NULL) return NORM_E_NULL;
  return NORM_OK;
}

int engine_check_vector(const norm_tensor_t *t, const int64_t *shape, int rank,
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

int engine_check_channels(const norm_tensor_t *x) {
  return x->rank >= 2 ? NORM_OK : NORM_E_CHANNELS;
}

int engine_check_channel_norm(const norm_tensor_t *x, const norm_tensor_t *y,
                              double eps) {
  int err = engine_check_in_out(x, y);
  if (err == NORM_OK) err = engine_check_channels(x);
  return err != NORM_OK ? err : engine_check_eps(eps);
}

int engine_check_channel_affine(const norm_tensor_t *x,
                                const norm_tensor_t *weight,
                                const norm_tensor_t *bias) {
  const int64_t *c = &x->shape[1];
  int err = engine_check_vector(weight, c, 1, NORM_E_WEIGHT);
  return err != NORM_OK ? err : engine_check_vector(bias, c, 1, NORM_E_BIAS);
}

int engine_check_range(size_t begin, size_t end, size_t groups) {
  return (begin <= end && end <= groups) ? NORM_OK : NORM_E_RANGE;
}

void engine_stats_put(const norm_stats_t *s, size_t g, double mean, double var,
                      double rstd) {
  if (s == NULL) return;
  if (s->mean) s->mean[g] = mean;
  if (s->var) s->var[g] = var;
  if (s->rstd) s->rstd[g] = rstd;
}
