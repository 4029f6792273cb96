/* residual.c -- the Pre-Norm vs Post-Norm residual stack; see residual.h.
 * Everything in double: it is an experiment about directions and scales,
 * not a kernel, and the sizes are bounded. */
#include "residual.h"

#include <float.h>
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
      (unsigned)p->placement > NORM_RESIDUAL_DEEPNORM)
    return NORM_E_ARG;
  int64_t limit = NORM_RESIDUAL_MAX_WORK;
  if (p->d > limit / p->d || p->layers > limit / (p->d * p->d) ||
      p->tokens > limit / (p->layers * p->d * p->d))
    return NORM_E_ARG;
  /* x0, x, next, h, hidden: tokens * d each; W1, W2: d * d each */
  return 5 * p->tokens * p->d + 2 * p->d * p->d;
}

/* Layer or RMS norm of each row of a (tokens, d) matrix, no affine; each
 * row's 1 / sqrt(var + eps) into rstd unless NULL. */
static void normalize_rows(const norm_residual_params_t *p, const double *in,
                           double *out, double *rstd) {
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
    if (rstd) rstd[r] = scale;
  }
}

/* The residual's weight alpha and the weights' scale beta: DeepNorm's
 * (2L)^(1/4) and (8L)^(-1/4), else 1. */
static double alpha_of(const norm_residual_params_t *p) {
  return p->placement == NORM_RESIDUAL_DEEPNORM ? pow(2.0 * (double)p->layers, 0.25)
                                                : 1.0;
}
static double beta_of(const norm_residual_params_t *p) {
  return p->placement == NORM_RESIDUAL_DEEPNORM
             ? pow(8.0 * (double)p->layers, -0.25)
             : 1.0;
}

/* Block t's W1 and W2 (d x d, row-major), from (seed, t) alone. */
static void block_weights(const norm_residual_params_t *p, int64_t t,
                          double *w1, double *w2) {
  size_t dd = (size_t)(p->d * p->d);
  double beta = beta_of(p);
  double s1 = sqrt(2.0 / (double)p->d) * beta, s2 = p->gain / sqrt((double)p->d) * beta;
  uint64_t ws = p->seed ^ (0xD1B54A32D192ED03ull * (uint64_t)(t + 1));
  for (size_t i = 0; i < dd; i++) w1[i] = s1 * gaussian(&ws);
  for (size_t i = 0; i < dd; i++) w2[i] = s2 * gaussian(&ws);
}

/* out = W2 relu(W1 in), row by row (each token independently); hidden
 * gets relu(W1 in), and pre (unless NULL) W1 in itself. */
static void sublayer(const norm_residual_params_t *p, const double *w1,
                     const double *w2, const double *in, double *hidden,
                     double *out, double *pre) {
  size_t d = (size_t)p->d;
  for (int64_t r = 0; r < p->tokens; r++) {
    const double *x = in + (size_t)r * d;
    double *h = hidden + (size_t)r * d;
    double *y = out + (size_t)r * d;
    for (size_t i = 0; i < d; i++) {
      double acc = 0.0;
      for (size_t j = 0; j < d; j++) acc += w1[i * d + j] * x[j];
      h[i] = acc > 0 ? acc : 0;
      if (pre) pre[(size_t)r * d + i] = acc;
    }
    for (size_t i = 0; i < d; i++) {
      double acc = 0.0;
      for (size_t j = 0; j < d; j++) acc += w2[i * d + j] * h[j];
      y[i] = acc;
    }
  }
}

/* Block t's forward with weights w1, w2: next = x + F(Norm(x)) (pre) or
 * next = Norm(alpha x + F(x)) (post, deepnorm). h receives the sublayer's
 * input for pre (Norm(x)), and the sum alpha x + F(x) otherwise; hidden is
 * a scratch; pre_act (may be NULL) receives W1 times the sublayer's input,
 * rstd (may be NULL) the block norm's per-token rstd. The one definition of
 * a block, for the curves and for the gradients. */
static void block_forward(const norm_residual_params_t *p, const double *w1,
                          const double *w2, double alpha, const double *x,
                          double *h, double *hidden, double *next,
                          double *pre_act, double *rstd) {
  size_t n = (size_t)(p->tokens * p->d);
  if (p->placement == NORM_RESIDUAL_PRE) {
    normalize_rows(p, x, h, rstd);                 /* h = Norm(x_t) */
    sublayer(p, w1, w2, h, hidden, next, pre_act); /* next = F_t(h) */
    for (size_t i = 0; i < n; i++) next[i] += x[i];
  } else {
    sublayer(p, w1, w2, x, hidden, h, pre_act); /* h = F_t(x_t) */
    for (size_t i = 0; i < n; i++) h[i] += alpha * x[i];
    normalize_rows(p, h, next, rstd); /* next = Norm(alpha x_t + h) */
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

  norm_residual_input(p, x0);
  memcpy(x, x0, n * sizeof *x);
  double norm0 = sqrt(dot(x0, x0, n));
  if (rms) rms[0] = norm0 / sqrt((double)n);
  if (cos_to_input) cos_to_input[0] = 1.0;

  double alpha = alpha_of(p);
  for (int64_t t = 0; t < p->layers; t++) {
    block_weights(p, t, w1, w2);
    block_forward(p, w1, w2, alpha, x, h, hidden, next, NULL, NULL);
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

/* ---- gradients at initialization ---------------------------------------- */

int64_t norm_residual_grad_workspace(const norm_residual_params_t *p) {
  int64_t base = norm_residual_workspace(p);
  if (base < 0) return base;
  if (p->classes < 2 || p->classes > 1024) return NORM_E_ARG;
  /* Per block: x_t, the sublayer's input (Pre-Norm's Norm(x_t); Post-Norm's
   * input is x_t itself, and its slot goes unused, so that the bound is one
   * formula for every placement) and its pre-activation (tokens * d each),
   * the norm's rstd (tokens); then x_L, the final z and its rstd,
   * three gradients of the stream, W1, W2 and their gradients, W_out, the
   * logits and the labels. Every term is below the forward's work bound,
   * so none overflows. */
  int64_t n = p->tokens * p->d, dd = p->d * p->d, L = p->layers;
  int64_t need = L * (3 * n + p->tokens) + 2 * n + p->tokens + 3 * n + 4 * dd +
                 p->classes * p->d + p->tokens * p->classes + p->tokens;
  return need > NORM_RESIDUAL_MAX_GRAD_WORKSPACE ? NORM_E_OVERFLOW : need;
}

/* d loss / d in of a row normalization out = Norm(in), from out and each
 * row's rstd: rstd * (g - mean(g) - out * mean(g * out)), without the
 * mean(g) term for RMS norm. Written into dx (may alias g). */
static void normalize_rows_backward(const norm_residual_params_t *p,
                                    const double *out, const double *rstd,
                                    const double *g, double *dx) {
  size_t d = (size_t)p->d;
  for (int64_t r = 0; r < p->tokens; r++) {
    const double *y = out + (size_t)r * d, *gr = g + (size_t)r * d;
    double *o = dx + (size_t)r * d;
    double mean_g = 0.0, mean_gy = 0.0;
    for (size_t j = 0; j < d; j++) {
      mean_g += gr[j];
      mean_gy += gr[j] * y[j];
    }
    mean_g = p->norm == NORM_RESIDUAL_LAYER ? mean_g / (double)d : 0.0;
    mean_gy /= (double)d;
    for (size_t j = 0; j < d; j++)
      o[j] = rstd[r] * (gr[j] - mean_g - y[j] * mean_gy);
  }
}

/* The sublayer's backward for d loss / d out = g: gw1, gw2 += its weight
 * gradients (summed over tokens), din = d loss / d in. da is a scratch
 * (tokens * d). */
static void sublayer_backward(const norm_residual_params_t *p, const double *w1,
                              const double *w2, const double *in,
                              const double *pre, const double *g, double *gw1,
                              double *gw2, double *din, double *da) {
  size_t d = (size_t)p->d;
  for (int64_t r = 0; r < p->tokens; r++) {
    const double *x = in + (size_t)r * d, *u = pre + (size_t)r * d,
                 *gr = g + (size_t)r * d;
    double *a = da + (size_t)r * d, *o = din + (size_t)r * d;
    for (size_t i = 0; i < d; i++) { /* gw2 += g relu(u)^T */
      for (size_t j = 0; j < d; j++) gw2[i * d + j] += gr[i] * (u[j] > 0 ? u[j] : 0);
    }
    for (size_t j = 0; j < d; j++) { /* da = (W2^T g) * relu'(u) */
      double acc = 0.0;
      for (size_t i = 0; i < d; i++) acc += w2[i * d + j] * gr[i];
      a[j] = u[j] > 0 ? acc : 0.0;
    }
    for (size_t i = 0; i < d; i++) /* gw1 += da x^T */
      for (size_t j = 0; j < d; j++) gw1[i * d + j] += a[i] * x[j];
    for (size_t j = 0; j < d; j++) { /* din = W1^T da */
      double acc = 0.0;
      for (size_t i = 0; i < d; i++) acc += w1[i * d + j] * a[i];
      o[j] = acc;
    }
  }
}

int norm_residual_gradients(const norm_residual_params_t *p, double *workspace,
                            size_t workspace_len, double *loss,
                            double *grad_w1, double *grad_w2,
                            double *grad_stream) {
  int64_t need = norm_residual_grad_workspace(p);
  if (need < 0) return (int)need;
  if (workspace == NULL) return NORM_E_NULL;
  if (workspace_len < (size_t)need) return NORM_E_RANGE;
  size_t T = (size_t)p->tokens, d = (size_t)p->d, n = T * d, dd = d * d;
  size_t L = (size_t)p->layers, C = (size_t)p->classes;
  double *X = workspace;            /* x_0 .. x_L: (L + 1) n */
  double *H = X + (L + 1) * n;      /* pre: block t's Norm(x_t): L n */
  double *U = H + L * n;            /* block t's pre-activation W1 h: L n */
  double *R = U + L * n;            /* block t's norm rstd: L T */
  double *Z = R + L * T, *RZ = Z + n; /* the readout's input, its rstd */
  double *g = RZ + T, *g2 = g + n, *scratch = g2 + n;
  double *w1 = scratch + n, *w2 = w1 + dd, *gw1 = w2 + dd, *gw2 = gw1 + dd;
  double *wout = gw2 + dd, *logits = wout + C * d, *labels = logits + T * C;

  /* forward, keeping every block's activations */
  norm_residual_input(p, X);
  double alpha = alpha_of(p);
  for (size_t t = 0; t < L; t++) {
    double *x = X + t * n;
    block_weights(p, (int64_t)t, w1, w2);
    /* pre keeps Norm(x_t) for the backward; post's sum is a scratch (its
     * sublayer input is x_t itself) */
    block_forward(p, w1, w2, alpha, x,
                  p->placement == NORM_RESIDUAL_PRE ? H + t * n : g, scratch,
                  x + n, U + t * n, R + t * T);
  }
  if (p->placement == NORM_RESIDUAL_PRE)
    normalize_rows(p, X + L * n, Z, RZ);
  else
    memcpy(Z, X + L * n, n * sizeof *Z);

  /* readout and loss; d loss / d logits = (softmax - onehot) / T */
  int64_t *label_of = (int64_t *)labels; /* a double's room for each */
  norm_residual_readout(p, wout, label_of);
  double total = 0.0;
  for (size_t t = 0; t < T; t++) {
    double *lg = logits + t * C, top = -DBL_MAX, sum = 0.0;
    for (size_t c = 0; c < C; c++) {
      lg[c] = dot(wout + c * d, Z + t * d, d);
      if (lg[c] > top) top = lg[c];
    }
    for (size_t c = 0; c < C; c++) sum += exp(lg[c] - top);
    size_t label = (size_t)label_of[t];
    total += log(sum) + top - lg[label];
    for (size_t c = 0; c < C; c++)
      lg[c] = (exp(lg[c] - top) / sum - (c == label)) / (double)T;
  }
  if (loss) *loss = total / (double)T;
  for (size_t t = 0; t < T; t++) /* g = d loss / d z = dlogits W_out */
    for (size_t j = 0; j < d; j++) {
      double acc = 0.0;
      for (size_t c = 0; c < C; c++) acc += logits[t * C + c] * wout[c * d + j];
      g[t * d + j] = acc;
    }
  if (p->placement == NORM_RESIDUAL_PRE) normalize_rows_backward(p, Z, RZ, g, g);

  /* backward through the blocks: g holds d loss / d x_{t+1} */
  if (grad_stream) grad_stream[L] = sqrt(dot(g, g, n));
  for (size_t t = L; t-- > 0;) {
    double *x = X + t * n, *u = U + t * n;
    block_weights(p, (int64_t)t, w1, w2);
    memset(gw1, 0, 2 * dd * sizeof *gw1);
    if (p->placement == NORM_RESIDUAL_PRE) {
      /* x_{t+1} = x_t + F(Norm(x_t)) */
      double *h = H + t * n; /* Norm(x_t), the sublayer's input */
      sublayer_backward(p, w1, w2, h, u, g, gw1, gw2, g2, scratch);
      normalize_rows_backward(p, h, R + t * T, g2, g2);
      for (size_t i = 0; i < n; i++) g[i] += g2[i];
    } else {
      /* x_{t+1} = Norm(s), s = alpha x_t + F(x_t) */
      normalize_rows_backward(p, x + n, R + t * T, g, g); /* d loss / d s */
      sublayer_backward(p, w1, w2, x, u, g, gw1, gw2, g2, scratch);
      for (size_t i = 0; i < n; i++) g[i] = alpha * g[i] + g2[i];
    }
    if (grad_w1) grad_w1[t] = sqrt(dot(gw1, gw1, dd));
    if (grad_w2) grad_w2[t] = sqrt(dot(gw2, gw2, dd));
    if (grad_stream) grad_stream[t] = sqrt(dot(g, g, n));
  }
  return NORM_OK;
}

void norm_residual_input(const norm_residual_params_t *p, double *x0) {
  uint64_t state = p->seed;
  for (int64_t i = 0; i < p->tokens * p->d; i++) x0[i] = gaussian(&state);
}

void norm_residual_weights(const norm_residual_params_t *p, int64_t t,
                           double *w1, double *w2) {
  block_weights(p, t, w1, w2);
}

void norm_residual_readout(const norm_residual_params_t *p, double *w_out,
                           int64_t *labels) {
  uint64_t rs = p->seed ^ 0x5851F42D4C957F2Dull;
  for (int64_t i = 0; i < p->classes * p->d; i++)
    w_out[i] = gaussian(&rs) / sqrt((double)p->d);
  for (int64_t t = 0; t < p->tokens; t++)
    labels[t] = (int64_t)(mix(&rs) % (uint64_t)p->classes);
}

double norm_residual_alpha(const norm_residual_params_t *p) { return alpha_of(p); }
