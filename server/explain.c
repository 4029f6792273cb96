/* explain.c -- what a teaching page asks for beyond the result: the named
 * intermediate tensors of a normalization ("steps") and histograms of input
 * and output. Steps are rebuilt in double from the input and the statistics
 * the kernel returned, following the kernel's formula term by term:
 *   layer, batch, group, instance: mean, centered = x - mean, var, std,
 *     normalized = centered / std, [scaled = w * normalized], output (+ b)
 *   rms: mean_square, rms = sqrt(mean_square + eps), normalized = x / rms,
 *     [scaled = w * normalized], output
 * `scaled` is there only when the request has a weight (a bias alone adds
 * no step: output = normalized + b). The last step is the kernel's own
 * output, so the page shows what was really returned. */
#include "explain.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Which statistic (group) and which weight entry element i uses. */
typedef struct {
  size_t row;      /* layer/rms: elements per row */
  size_t spatial;  /* (N, C, *) norms: product of the * dims */
  size_t channels; /* C */
  size_t per_group;/* group norm: C / G */
  int64_t groups;  /* group norm: G */
} index_map_t;

static index_map_t index_map(const request_t *req) {
  const norm_tensor_t *x = &req->input.t;
  index_map_t m = {.row = 1, .spatial = 1, .channels = 1, .per_group = 1};
  op_t norm = op_info(req->op)->norm;
  int ndim = norm == OP_LAYER ? req->layer.normalized_ndim
             : norm == OP_RMS ? req->rms.normalized_ndim
                              : 0;
  for (int i = x->rank - ndim; i < x->rank && ndim > 0; i++)
    m.row *= (size_t)x->shape[i];
  if (x->rank >= 2) {
    m.channels = (size_t)x->shape[1];
    for (int i = 2; i < x->rank; i++) m.spatial *= (size_t)x->shape[i];
  }
  if (norm == OP_GROUP) {
    m.groups = req->group.num_groups;
    m.per_group = m.channels / (size_t)m.groups;
  }
  return m;
}

static size_t group_of(const request_t *req, const index_map_t *m, size_t i) {
  size_t c = (i / m->spatial) % m->channels, n = i / (m->spatial * m->channels);
  switch (op_info(req->op)->norm) {
  case OP_BATCH: return c;
  case OP_GROUP: return n * (size_t)m->groups + c / m->per_group;
  case OP_INSTANCE: return i / m->spatial;
  default: return i / m->row;
  }
}

static size_t affine_of(const request_t *req, const index_map_t *m, size_t i) {
  op_t norm = op_info(req->op)->norm;
  if (norm == OP_LAYER || norm == OP_RMS) return i % m->row;
  return (i / m->spatial) % m->channels;
}

/* What the norm normalized: the input, or with a fused residual add h. */
static const norm_tensor_t *normalized(const request_t *req,
                                       const result_t *res) {
  return res->residual_out.data ? &res->residual_out : &req->input.t;
}

/* The eps of the request's normalization. */
static double eps_of(const request_t *req) {
  switch (op_info(req->op)->norm) {
  case OP_LAYER: return req->layer.eps;
  case OP_RMS: return req->rms.eps;
  case OP_BATCH: return req->batch.eps;
  case OP_GROUP: return req->group.eps;
  default: return req->instance.eps;
  }
}

/* A new step of the input's shape (full = 1) or the stats' shape. */
static double *add_step(result_t *res, const char *name, int full,
                        const norm_tensor_t *x, size_t numel, problem_t *prob) {
  step_t *s = &res->steps[res->nsteps];
  s->name = name;
  if (full) {
    s->rank = x->rank;
    memcpy(s->shape, x->shape, sizeof s->shape);
    s->n = numel;
  } else {
    s->rank = res->stats_rank;
    memcpy(s->shape, res->stats_shape, sizeof s->shape);
    s->n = res->ngroups;
  }
  s->data = malloc((s->n ? s->n : 1) * sizeof *s->data);
  if (s->data == NULL) {
    problem_set(prob, PROBLEM_OUT_OF_MEMORY, NULL, "out of memory");
    return NULL;
  }
  res->nsteps++;
  return s->data;
}

static int steps_run(const request_t *req, result_t *res, problem_t *prob) {
  const norm_tensor_t *x = normalized(req, res);
  const norm_tensor_t *w = req->weight.present ? &req->weight.t : NULL;
  const norm_tensor_t *b = req->bias.present ? &req->bias.t : NULL;
  size_t numel = 0, g_n = res->ngroups;
  norm_tensor_check(x, &numel, NULL);
  index_map_t m = index_map(req);
  double eps = eps_of(req);
  double *center = NULL, *spread = NULL; /* per group: subtracted, divided by */
  if (op_info(req->op)->norm == OP_RMS) {
    double *ms = add_step(res, "mean_square", 0, x, numel, prob);
    double *rms = ms ? add_step(res, "rms", 0, x, numel, prob) : NULL;
    if (rms == NULL) return -1;
    for (size_t g = 0; g < g_n; g++) {
      ms[g] = res->rms[g] * res->rms[g];
      rms[g] = 1.0 / res->rstd[g]; /* sqrt(mean_square + eps) */
    }
    spread = rms;
  } else {
    double *mean = add_step(res, "mean", 0, x, numel, prob);
    double *centered = mean ? add_step(res, "centered", 1, x, numel, prob) : NULL;
    double *var = centered ? add_step(res, "var", 0, x, numel, prob) : NULL;
    double *std = var ? add_step(res, "std", 0, x, numel, prob) : NULL;
    if (std == NULL) return -1;
    memcpy(mean, res->mean, g_n * sizeof *mean);
    memcpy(var, res->var, g_n * sizeof *var);
    for (size_t g = 0; g < g_n; g++) std[g] = 1.0 / res->rstd[g];
    for (size_t i = 0; i < numel; i++)
      centered[i] = norm_tensor_get(x, i) - mean[group_of(req, &m, i)];
    center = mean;
    spread = std;
  }
  double *normalized = add_step(res, "normalized", 1, x, numel, prob);
  if (normalized == NULL) return -1;
  for (size_t i = 0; i < numel; i++) {
    size_t g = group_of(req, &m, i);
    double d = norm_tensor_get(x, i) - (center ? center[g] : 0.0);
    /* a constant group with eps = 0 normalizes to 0, as the kernel does */
    normalized[i] = (d == 0.0 && eps == 0.0) ? 0.0 : d / spread[g];
  }
  if (w != NULL) {
    double *scaled = add_step(res, "scaled", 1, x, numel, prob);
    if (scaled == NULL) return -1;
    for (size_t i = 0; i < numel; i++)
      scaled[i] = normalized[i] * norm_tensor_get(w, affine_of(req, &m, i));
  }
  double *output = add_step(res, "output", 1, x, numel, prob);
  if (output == NULL) return -1;
  for (size_t i = 0; i < numel; i++) output[i] = norm_tensor_get(&res->output, i);
  (void)b; /* output already holds + b */
  return 0;
}

/* ---- the backward's steps ----
 * g = w * dy, xhat = (x - mean) * rstd (x * rstd for RMS norm), per group
 * mean_g and mean_g_xhat, then the kernel's grad_input:
 *   rstd * (g - mean_g - xhat * mean_g_xhat) for biased variance inside
 *   the root (unbiased: the last term times count / (count - 1); outside:
 *   rstd * (g - mean_g) - xhat * mean_g_xhat * count / (D * std)); RMS norm
 *   has no mean_g; batch norm in eval mode only g (grad_input = rstd * g). */
static int backward_steps(const request_t *req, result_t *res, problem_t *prob) {
  const norm_tensor_t *x = &req->input.t, *dy = &req->grad_output.t;
  const norm_tensor_t *w = req->weight.present ? &req->weight.t : NULL;
  size_t numel = 0, g_n = res->ngroups;
  norm_tensor_check(x, &numel, NULL);
  index_map_t m = index_map(req);
  op_t norm = op_info(req->op)->norm;
  int centered = norm != OP_RMS;
  int constant = norm == OP_BATCH && req->batch.mode == NORM_EVAL;
  double *g = add_step(res, "g", 1, x, numel, prob);
  if (g == NULL) return -1;
  for (size_t i = 0; i < numel; i++)
    g[i] = (w ? norm_tensor_get(w, affine_of(req, &m, i)) : 1.0) *
           norm_tensor_get(dy, i);
  if (!constant) {
    double *xhat = add_step(res, "xhat", 1, x, numel, prob);
    double *mean_g = xhat && centered ? add_step(res, "mean_g", 0, x, numel, prob)
                                      : NULL;
    double *mean_gx = xhat && (mean_g || !centered)
                          ? add_step(res, "mean_g_xhat", 0, x, numel, prob)
                          : NULL;
    if (mean_gx == NULL) return -1;
    for (size_t k = 0; k < g_n; k++) {
      mean_gx[k] = 0.0;
      if (mean_g) mean_g[k] = 0.0;
    }
    for (size_t i = 0; i < numel; i++) {
      size_t k = group_of(req, &m, i);
      double d = norm_tensor_get(x, i) - (centered ? res->mean[k] : 0.0);
      xhat[i] = d == 0.0 ? 0.0 : d * res->rstd[k]; /* 0, not 0 * inf */
      if (mean_g) mean_g[k] += g[i];
      mean_gx[k] += g[i] * xhat[i];
    }
    double count = (double)(numel / (g_n ? g_n : 1));
    for (size_t k = 0; k < g_n; k++) {
      mean_gx[k] /= count;
      if (mean_g) mean_g[k] /= count;
    }
  }
  double *out = add_step(res, "grad_input", 1, x, numel, prob);
  if (out == NULL) return -1;
  for (size_t i = 0; i < numel; i++) out[i] = norm_tensor_get(&res->output, i);
  return 0;
}

/* ---- histograms ---- */

static void finite_range(const norm_tensor_t *t, double *lo, double *hi) {
  size_t numel = 0;
  norm_tensor_check(t, &numel, NULL);
  for (size_t i = 0; i < numel; i++) {
    double v = norm_tensor_get(t, i);
    if (!isfinite(v)) continue;
    if (v < *lo) *lo = v;
    if (v > *hi) *hi = v;
  }
}

static int fill_histogram(const norm_tensor_t *t, int64_t bins, double lo,
                          double hi, histogram_t *h, problem_t *prob) {
  h->counts = calloc((size_t)bins, sizeof *h->counts);
  if (h->counts == NULL)
    return problem_set(prob, PROBLEM_OUT_OF_MEMORY, NULL, "out of memory");
  if (!(lo <= hi)) { /* nothing finite: an empty histogram around 0 */
    lo = -0.5;
    hi = 0.5;
  } else if (lo == hi) {
    lo -= 0.5;
    hi += 0.5;
  }
  h->lo = lo;
  h->hi = hi;
  size_t numel = 0;
  norm_tensor_check(t, &numel, NULL);
  double width = (hi - lo) / (double)bins;
  for (size_t i = 0; i < numel; i++) {
    double v = norm_tensor_get(t, i);
    if (!isfinite(v)) {
      h->nonfinite++;
      continue;
    }
    int64_t k = (int64_t)((v - lo) / width);
    if (k < 0) k = 0;
    if (k >= bins) k = bins - 1; /* the maximum falls in the last bin */
    h->counts[k]++;
  }
  return 0;
}

static int histograms_run(const request_t *req, result_t *res,
                          problem_t *prob) {
  double in_lo = INFINITY, in_hi = -INFINITY, out_lo = INFINITY, out_hi = -INFINITY;
  const norm_tensor_t *x = normalized(req, res);
  finite_range(x, &in_lo, &in_hi);
  finite_range(&res->output, &out_lo, &out_hi);
  if (!req->histogram_separate) {
    in_lo = out_lo = fmin(in_lo, out_lo);
    in_hi = out_hi = fmax(in_hi, out_hi);
  }
  res->bins = req->histogram_bins;
  if (fill_histogram(x, res->bins, in_lo, in_hi, &res->hist_input, prob) != 0)
    return -1;
  return fill_histogram(&res->output, res->bins, out_lo, out_hi, &res->hist_output, prob);
}

int explain_run(const request_t *req, result_t *res, problem_t *prob) {
  op_kind_t kind = op_info(req->op)->kind;
  if (kind == OP_KIND_BACKWARD)
    return (req->ret & RET_STEPS) ? backward_steps(req, res, prob) : 0;
  if (kind != OP_KIND_NORM) return 0; /* norms only */
  if ((req->ret & RET_STEPS) && steps_run(req, res, prob) != 0) return -1;
  if ((req->ret & RET_HISTOGRAMS) && histograms_run(req, res, prob) != 0) return -1;
  return 0;
}
