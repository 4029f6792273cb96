/* explain.c -- what a teaching page asks for beyond the result: the named
 * intermediate tensors of a normalization ("steps") and histograms of input
 * and output. Steps are rebuilt in double from the input and the statistics
 * the kernel returned, following the kernel's formula term by term:
 *   layer, batch, group, instance: mean, centered = x - mean, var, std,
 *     normalized = centered / std, [scaled = w * normalized], output (+ b)
 *   rms: mean_square, rms = sqrt(mean_square + eps), normalized = x / rms,
 *     [scaled = w * normalized], output
 *   mvn: mean, centered, var, std = sqrt(var), normalized = centered /
 *     (std + eps) (ONNX's eps is outside the root), output
 *   lp: norm = ||x||_p (unclamped), output = x / max(norm, eps)
 *   lrn: square_sum (the window's, per element, from the kernel),
 *     denominator = (k + alpha / size * square_sum)^beta, output
 * `scaled` is there only when the request has a weight (a bias alone adds
 * no step: output = normalized + b). The last step is the kernel's own
 * output, so the page shows what was really returned. */
#include "explain.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Which statistic (group) and which weight entry element i uses. Every
 * norm's groups are a set of dims of a view of the input (layer / rms: the
 * row of (rows, row); batch: C of (N, C, *); group: G of (N, G, C / G * *);
 * instance: (n, c) of (N C, *); Lp and MVN: their own axes of x itself),
 * so one core map (norm_axes_groups, the kernels' element order) gives
 * group_of for all; local response norm has no groups (NULL). */
typedef struct {
  size_t *group_of; /* malloc'd, one entry per element, or NULL */
  size_t row;       /* layer/rms: elements per row (the weight's index) */
  size_t spatial;   /* (N, C, *) norms: product of the * dims */
  size_t channels;  /* C */
} index_map_t;

/* The view of x whose dims `*axes` are each group's, for the norms with
 * groups. 0, or -1 for an op without groups (local response norm). */
static int grouped_view(const request_t *req, const norm_tensor_t *x,
                        const index_map_t *m, norm_tensor_t *view,
                        unsigned *axes) {
  size_t numel = 0;
  norm_tensor_check(x, &numel, NULL);
  *view = *x;
  int64_t n = x->rank >= 2 ? x->shape[0] : 1;
  switch (op_info(req->op)->norm) {
  case OP_LP: *axes = req->lp.axes; return 0;
  case OP_MVN: *axes = req->mvn.axes; return 0;
  case OP_LRN: return -1;
  case OP_BATCH:
    view->rank = 3;
    view->shape[0] = n, view->shape[1] = (int64_t)m->channels;
    view->shape[2] = (int64_t)m->spatial;
    *axes = 1u << 0 | 1u << 2;
    return 0;
  case OP_GROUP: {
    int64_t groups = req->group.num_groups;
    view->rank = 3;
    view->shape[0] = n, view->shape[1] = groups;
    view->shape[2] = (int64_t)(numel / (size_t)n / (size_t)groups);
    *axes = 1u << 2;
    return 0;
  }
  case OP_INSTANCE:
    view->rank = 2;
    view->shape[0] = (int64_t)(numel / m->spatial);
    view->shape[1] = (int64_t)m->spatial;
    *axes = 1u << 1;
    return 0;
  default: /* layer, rms: rows of the trailing dims */
    view->rank = 2;
    view->shape[0] = (int64_t)(numel / m->row);
    view->shape[1] = (int64_t)m->row;
    *axes = 1u << 1;
    return 0;
  }
}

/* 0, or -1 with a problem (out of memory; a view the kernel accepted
 * cannot fail the map). */
static int index_map_init(const request_t *req, const norm_tensor_t *x,
                          index_map_t *m, problem_t *prob) {
  *m = (index_map_t){.row = 1, .spatial = 1, .channels = 1};
  op_t norm = op_info(req->op)->norm;
  int ndim = norm == OP_LAYER ? req->layer.normalized_ndim
             : norm == OP_RMS ? req->rms.normalized_ndim
                              : 0;
  for (int i = x->rank - ndim; i < x->rank && ndim > 0; i++)
    m->row *= (size_t)x->shape[i];
  if (x->rank >= 2) {
    m->channels = (size_t)x->shape[1];
    for (int i = 2; i < x->rank; i++) m->spatial *= (size_t)x->shape[i];
  }
  norm_tensor_t view;
  unsigned axes = 0;
  if (grouped_view(req, x, m, &view, &axes) != 0) return 0;
  size_t numel = 0;
  norm_tensor_check(x, &numel, NULL);
  m->group_of = malloc(numel * sizeof *m->group_of);
  if (m->group_of == NULL)
    return problem_set(prob, PROBLEM_OUT_OF_MEMORY, NULL, "out of memory");
  int err = norm_axes_groups(&view, axes, m->group_of);
  if (err != NORM_OK) {
    free(m->group_of);
    m->group_of = NULL;
    return problem_from_norm(prob, err, NULL);
  }
  return 0;
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

/* The eps of the request's normalization (local response norm has none). */
static double eps_of(const request_t *req) {
  switch (op_info(req->op)->norm) {
  case OP_LAYER: return req->layer.eps;
  case OP_RMS: return req->rms.eps;
  case OP_BATCH: return req->batch.eps;
  case OP_GROUP: return req->group.eps;
  case OP_LP: return req->lp.eps;
  case OP_MVN: return req->mvn.eps;
  case OP_INSTANCE: return req->instance.eps;
  default: return 0.0;
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

/* The last step: the kernel's own output. */
static int output_step(result_t *res, const norm_tensor_t *x, size_t numel,
                       problem_t *prob) {
  double *output = add_step(res, "output", 1, x, numel, prob);
  if (output == NULL) return -1;
  for (size_t i = 0; i < numel; i++) output[i] = norm_tensor_get(&res->output, i);
  return 0;
}

/* Lp: the norm of each slice, as the kernel returned it, then output. */
static int lp_steps(result_t *res, const norm_tensor_t *x, size_t numel,
                    problem_t *prob) {
  double *norm = add_step(res, "norm", 0, x, numel, prob);
  if (norm == NULL) return -1;
  memcpy(norm, res->norm, res->ngroups * sizeof *norm);
  return output_step(res, x, numel, prob);
}

/* Local response norm: the kernel's window sums, the power they divide by
 * (alpha / size as lrn.c forms it), then output. */
static int lrn_steps(const request_t *req, result_t *res,
                     const norm_tensor_t *x, size_t numel, problem_t *prob) {
  const norm_lrn_params_t *p = &req->lrn;
  double *sum = add_step(res, "square_sum", 1, x, numel, prob);
  double *den = sum ? add_step(res, "denominator", 1, x, numel, prob) : NULL;
  if (den == NULL) return -1;
  double a = p->alpha / (double)p->size;
  for (size_t i = 0; i < numel; i++) {
    sum[i] = res->square_sum[i];
    den[i] = pow(p->k + a * sum[i], p->beta);
  }
  return output_step(res, x, numel, prob);
}

static int steps_run(const request_t *req, result_t *res, problem_t *prob) {
  const norm_tensor_t *x = normalized(req, res);
  const norm_tensor_t *w = req->weight.present ? &req->weight.t : NULL;
  size_t numel = 0, g_n = res->ngroups;
  norm_tensor_check(x, &numel, NULL);
  op_t norm = op_info(req->op)->norm;
  if (norm == OP_LP) return lp_steps(res, x, numel, prob);
  if (norm == OP_LRN) return lrn_steps(req, res, x, numel, prob);
  index_map_t m;
  if (index_map_init(req, x, &m, prob) != 0) return -1;
  int rc = -1;
  double eps = eps_of(req);
  /* per group: subtracted (NULL: nothing), and divided by spread + outside
   * (mvn's eps outside the root; the others' eps is inside spread) */
  double *center = NULL, *spread = NULL, outside = 0.0;
  if (norm == OP_RMS) {
    double *ms = add_step(res, "mean_square", 0, x, numel, prob);
    double *rms = ms ? add_step(res, "rms", 0, x, numel, prob) : NULL;
    if (rms == NULL) goto done;
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
    if (std == NULL) goto done;
    memcpy(mean, res->mean, g_n * sizeof *mean);
    memcpy(var, res->var, g_n * sizeof *var);
    for (size_t g = 0; g < g_n; g++)
      std[g] = norm == OP_MVN ? sqrt(var[g]) : 1.0 / res->rstd[g];
    if (norm == OP_MVN) outside = eps;
    for (size_t i = 0; i < numel; i++)
      centered[i] = norm_tensor_get(x, i) - mean[m.group_of[i]];
    center = mean;
    spread = std;
  }
  double *normalized = add_step(res, "normalized", 1, x, numel, prob);
  if (normalized == NULL) goto done;
  for (size_t i = 0; i < numel; i++) {
    size_t g = m.group_of[i];
    double d = norm_tensor_get(x, i) - (center ? center[g] : 0.0);
    /* a constant group with eps = 0 normalizes to 0, as the kernel does */
    normalized[i] = (d == 0.0 && eps == 0.0) ? 0.0 : d / (spread[g] + outside);
  }
  if (w != NULL) {
    double *scaled = add_step(res, "scaled", 1, x, numel, prob);
    if (scaled == NULL) goto done;
    for (size_t i = 0; i < numel; i++)
      scaled[i] = normalized[i] * norm_tensor_get(w, affine_of(req, &m, i));
  }
  rc = output_step(res, x, numel, prob); /* output already holds + b */
done:
  free(m.group_of);
  return rc;
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
  index_map_t m;
  if (index_map_init(req, x, &m, prob) != 0) return -1;
  op_t norm = op_info(req->op)->norm;
  int centered = norm != OP_RMS;
  int constant = norm == OP_BATCH && req->batch.mode == NORM_EVAL;
  int rc = -1;
  double *g = add_step(res, "g", 1, x, numel, prob);
  if (g == NULL) goto done;
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
    if (mean_gx == NULL) goto done;
    for (size_t k = 0; k < g_n; k++) {
      mean_gx[k] = 0.0;
      if (mean_g) mean_g[k] = 0.0;
    }
    for (size_t i = 0; i < numel; i++) {
      size_t k = m.group_of[i];
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
  if (out == NULL) goto done;
  for (size_t i = 0; i < numel; i++) out[i] = norm_tensor_get(&res->output, i);
  rc = 0;
done:
  free(m.group_of);
  return rc;
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
  } else if (lo == hi) { /* one value: a range of 1 around it, wider where
                            * 0.5 is below its precision (3e35 +- 0.5 is 3e35) */
    double half = fmax(0.5, fabs(lo) * 0x1p-20);
    lo -= half;
    hi += half;
  }
  h->lo = lo;
  h->hi = hi;
  size_t numel = 0;
  norm_tensor_check(t, &numel, NULL);
  /* in halves: the same bins (halving is exact, but for subnormals),
   * and no overflow where hi - lo passes DBL_MAX */
  double half_lo = lo * 0.5, half_width = (hi * 0.5 - half_lo) / (double)bins;
  for (size_t i = 0; i < numel; i++) {
    double v = norm_tensor_get(t, i);
    if (!isfinite(v)) {
      h->nonfinite++;
      continue;
    }
    /* clamped before the conversion, which a NaN (a width of 0 between
     * two subnormals) or a value past int64_t would make undefined; the
     * maximum falls in the last bin */
    double at = (v * 0.5 - half_lo) / half_width;
    int64_t k = at >= (double)bins ? bins - 1 : at > 0 ? (int64_t)at : 0;
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
