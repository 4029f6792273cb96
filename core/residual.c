/* residual.c -- the Pre-Norm vs Post-Norm residual stack; see residual.h.
 * Everything in double: it is an experiment about directions and scales,
 * not a kernel, and the sizes are bounded. */
#include "residual.h"

#include <math.h>
#include <string.h>

/* splitmix64: a counter-based stream, so layer t's weights depend on
 * (seed, t) alone. */
static uint64_t mix(uint64_t *state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* Standard normal by Box-Muller (one value per call; the pair's second is
 * dropped to keep the stream simple). */
static double gaussian(uint64_t *state) {
  double u1 = ((double)(mix(state) >> 11) + 0.5) * 0x1p-53; /* (0, 1) */
  double u2 = (double)(mix(state) >> 11) * 0x1p-53;
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

int64_t norm_residual_workspace(const norm_residual_params_t *p) {
  if (p == NULL) return NORM_E_NULL;
  if (p->tokens < 1 || p->d < 2 || p->layers < 1) return NORM_E_ARG;
  if (!(isfinite(p->eps) && p->eps >= 0)) return NORM_E_EPS;
  if (!(isfinite(p->gain) && p->gain >= 0)) return NORM_E_ARG;
  if ((unsigned)p->norm > NORM_RESIDUAL_RMS ||
      (unsigned)p->placement > NORM_RESIDUAL_POST)
    return NORM_E_ARG;
  int64_t limit = NORM_RESIDUAL_MAX_WORK;
  if (p->d > limit / p->d || p->layers > limit / (p->d * p->d) ||
      p->tokens > limit / (p->layers * p->d * p->d))
    return NORM_E_ARG;
  /* x0, x, next, h, hidden: tokens * d each; W1, W2: d * d each */
  return 5 * p->tokens * p->d + 2 * p->d * p->d;
}

/* Layer or RMS norm of each row of a (tokens, d) matrix, no affine. */
static void normalize_rows(const norm_residual_params_t *p, const double *in,
                           double *out) {
  size_t d = (size_t)p->d;
  for (int64_t r = 0; r < p->tokens; r++) {
    const double *x = in + (size_t)r * d;
    double *y = out + (size_t)r * d;
    double mean = 0.0, sq = 0.0;
    if (p->norm == NORM_RESIDUAL_LAYER) {
      for (size_t j = 0; j < d; j++) mean += x[j];
      mean /= (double)d;
    }
    for (size_t j = 0; j < d; j++) sq += (x[j] - mean) * (x[j] - mean);
    double scale = 1.0 / sqrt(sq / (double)d + p->eps);
    for (size_t j = 0; j < d; j++) y[j] = (x[j] - mean) * scale;
  }
}

/* out = W2 relu(W1 in), row by row (each token independently). */
static void sublayer(const norm_residual_params_t *p, const double *w1,
                     const double *w2, const double *in, double *hidden,
                     double *out) {
  size_t d = (size_t)p->d;
  for (int64_t r = 0; r < p->tokens; r++) {
    const double *x = in + (size_t)r * d;
    double *h = hidden + (size_t)r * d;
    double *y = out + (size_t)r * d;
    for (size_t i = 0; i < d; i++) {
      double acc = 0.0;
      for (size_t j = 0; j < d; j++) acc += w1[i * d + j] * x[j];
      h[i] = acc > 0 ? acc : 0;
    }
    for (size_t i = 0; i < d; i++) {
      double acc = 0.0;
      for (size_t j = 0; j < d; j++) acc += w2[i * d + j] * h[j];
      y[i] = acc;
    }
  }
}

static double dot(const double *a, const double *b, size_t n) {
  double s = 0.0;
  for (size_t i = 0; i < n; i++) s += a[i] * b[i];
  return s;
}

int norm_residual_simulate(const norm_residual_params_t *p, double *workspace,
                           size_t workspace_len, double *rms,
                           double *rel_update, double *cosine,
                           double *cos_to_input) {
  int64_t need = norm_residual_workspace(p);
  if (need < 0) return (int)need;
  if (workspace == NULL) return NORM_E_NULL;
  if (workspace_len < (size_t)need) return NORM_E_RANGE;
  size_t n = (size_t)(p->tokens * p->d), dd = (size_t)(p->d * p->d);
  double *x0 = workspace, *x = x0 + n, *next = x + n, *h = next + n,
         *hidden = h + n, *w1 = hidden + n, *w2 = w1 + dd;

  uint64_t state = p->seed;
  for (size_t i = 0; i < n; i++) x0[i] = gaussian(&state);
  memcpy(x, x0, n * sizeof *x);
  double norm0 = sqrt(dot(x0, x0, n));
  if (rms) rms[0] = norm0 / sqrt((double)n);
  if (cos_to_input) cos_to_input[0] = 1.0;

  double s1 = sqrt(2.0 / (double)p->d), s2 = p->gain / sqrt((double)p->d);
  for (int64_t t = 0; t < p->layers; t++) {
    uint64_t ws = p->seed ^ (0xD1B54A32D192ED03ull * (uint64_t)(t + 1));
    for (size_t i = 0; i < dd; i++) w1[i] = s1 * gaussian(&ws);
    for (size_t i = 0; i < dd; i++) w2[i] = s2 * gaussian(&ws);
    if (p->placement == NORM_RESIDUAL_PRE) {
      normalize_rows(p, x, h);                /* h = Norm(x_t) */
      sublayer(p, w1, w2, h, hidden, next);   /* next = F_t(h) */
      for (size_t i = 0; i < n; i++) next[i] += x[i];
    } else {
      sublayer(p, w1, w2, x, hidden, h);      /* h = F_t(x_t) */
      for (size_t i = 0; i < n; i++) h[i] += x[i];
      normalize_rows(p, h, next);             /* next = Norm(x_t + h) */
    }
    double xx = dot(x, x, n), nn = dot(next, next, n), xn = dot(x, next, n);
    double diff = 0.0; /* ||next - x||^2, directly: the update may be tiny */
    for (size_t i = 0; i < n; i++) diff += (next[i] - x[i]) * (next[i] - x[i]);
    if (rms) rms[t + 1] = sqrt(nn / (double)n);
    if (rel_update) rel_update[t] = sqrt(diff) / sqrt(xx);
    if (cosine) cosine[t] = xn / sqrt(xx * nn);
    if (cos_to_input) cos_to_input[t + 1] = dot(x0, next, n) / (norm0 * sqrt(nn));
    double *swap = x;
    x = next;
    next = swap;
  }
  return NORM_OK;
}
