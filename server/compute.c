/* compute.c -- the bridge from a request_t to core/: allocates outputs and
 * statistics, calls the kernel for the op, and derives output statistics
 * (the "mean 0, variance 1" check) with norm_moments over the same groups. */
#include "compute.h"

#include <stdlib.h>
#include <string.h>

#include "explain.h"
#include "metrics.h"
#include "simulate.h"

static double *alloc_doubles(size_t n, problem_t *prob) {
  double *p = calloc(n ? n : 1, sizeof *p);
  if (p == NULL) problem_set(prob, 500, "out_of_memory", NULL, "out of memory");
  return p;
}

/* Stats shape: the leading `keep` dims of x. */
static void stats_shape_prefix(result_t *res, const norm_tensor_t *x, int keep) {
  res->stats_rank = keep;
  for (int i = 0; i < keep; i++) res->stats_shape[i] = x->shape[i];
}

/* Output statistics: the output viewed as rows of `row_ndim` trailing dims,
 * or per channel for batch norm. */
static int output_moments(result_t *res, const norm_tensor_t *view,
                          norm_moments_params_t mp, problem_t *prob) {
  norm_moments_t *m = malloc(res->ngroups * sizeof *m);
  res->out_mean = alloc_doubles(res->ngroups, prob);
  res->out_var = alloc_doubles(res->ngroups, prob);
  if (m == NULL || res->out_mean == NULL || res->out_var == NULL) {
    free(m);
    return problem_set(prob, 500, "out_of_memory", NULL, "out of memory");
  }
  int err = norm_moments(view, &mp, m);
  for (size_t g = 0; err == NORM_OK && g < res->ngroups; g++) {
    res->out_mean[g] = m[g].mean;
    res->out_var[g] = m[g].m2 / m[g].count;
  }
  free(m);
  return err == NORM_OK ? 0 : problem_from_norm(prob, err, NULL);
}

/* The request field a core error is about. */
static const char *field_of(int err) {
  switch (err) {
  case NORM_E_WEIGHT: return "weight";
  case NORM_E_BIAS: return "bias";
  case NORM_E_RUNNING: return "running_mean";
  case NORM_E_GROUPS: return "num_groups";
  case NORM_E_EPS: return "eps";
  case NORM_E_MOMENTUM: return "momentum";
  default: return "input";
  }
}

static int merge_parts(request_t *req, result_t *res, problem_t *prob) {
  res->ngroups = req->ngroups;
  res->stats_rank = 1;
  res->stats_shape[0] = (int64_t)req->ngroups;
  res->moments = calloc(req->ngroups ? req->ngroups : 1, sizeof *res->moments);
  if (res->moments == NULL)
    return problem_set(prob, 500, "out_of_memory", NULL, "out of memory");
  for (size_t p = 0; p < req->nparts; p++)
    for (size_t g = 0; g < req->ngroups; g++)
      norm_moments_merge(&res->moments[g], &req->parts[p * req->ngroups + g]);
  return 0;
}

int compute_run(request_t *req, result_t *res, problem_t *prob) {
  memset(res, 0, sizeof *res);
  if (req->op == OP_MOMENTS_MERGE) return merge_parts(req, res, prob);
  if (req->op == OP_RESIDUAL) return simulate_run(req, res, prob);

  norm_tensor_t *x = &req->input.t;
  const norm_tensor_t *w = req->weight.present ? &req->weight.t : NULL;
  const norm_tensor_t *b = req->bias.present ? &req->bias.t : NULL;
  size_t numel;
  int err = norm_tensor_check(x, &numel, NULL);
  if (err != NORM_OK) return problem_from_norm(prob, err, "input");

  int64_t groups;
  switch (req->op) {
  case OP_LAYER: groups = norm_layer_groups(x, &req->layer); break;
  case OP_RMS: groups = norm_rms_groups(x, &req->rms); break;
  case OP_BATCH: groups = norm_batch_groups(x); break;
  case OP_GROUP: groups = norm_group_groups(x, &req->group); break;
  case OP_INSTANCE: groups = norm_instance_groups(x); break;
  default: groups = norm_moments_groups(x, &req->moments); break;
  }
  if (groups < 0) return problem_from_norm(prob, (int)groups, field_of((int)groups));
  res->ngroups = (size_t)groups;

  if (req->op == OP_MOMENTS) {
    int keep = req->moments.layout == NORM_MOMENTS_ROWS
                   ? x->rank - req->moments.normalized_ndim
                   : 0;
    stats_shape_prefix(res, x, keep);
    if (req->moments.layout == NORM_MOMENTS_CHANNELS) {
      res->stats_rank = 1;
      res->stats_shape[0] = x->shape[1];
    }
    res->moments = malloc(res->ngroups * sizeof *res->moments);
    if (res->moments == NULL)
      return problem_set(prob, 500, "out_of_memory", NULL, "out of memory");
    err = norm_moments(x, &req->moments, res->moments);
    if (err != NORM_OK) return problem_from_norm(prob, err, "input");
    metrics_add_elements("moments", numel);
    return 0;
  }

  res->output = *x;
  res->output.dtype = req->output_dtype;
  res->output.data = malloc(numel * norm_dtype_size(req->output_dtype));
  if (res->output.data == NULL)
    return problem_set(prob, 500, "out_of_memory", NULL, "out of memory");
  if (req->op == OP_RMS) {
    res->rms = alloc_doubles(res->ngroups, prob);
  } else {
    res->mean = alloc_doubles(res->ngroups, prob);
    res->var = alloc_doubles(res->ngroups, prob);
  }
  res->rstd = alloc_doubles(res->ngroups, prob);
  if (prob->status) return -1;
  norm_stats_t st = {res->mean, res->var, res->rstd, res->rms};

  norm_moments_params_t out_layout = {NORM_MOMENTS_ROWS, 1};
  switch (req->op) {
  case OP_LAYER:
    err = norm_layer(x, w, b, &req->layer, &res->output, &st);
    stats_shape_prefix(res, x, x->rank - req->layer.normalized_ndim);
    out_layout.normalized_ndim = req->layer.normalized_ndim;
    break;
  case OP_RMS:
    err = norm_rms(x, w, &req->rms, &res->output, &st);
    stats_shape_prefix(res, x, x->rank - req->rms.normalized_ndim);
    out_layout.normalized_ndim = req->rms.normalized_ndim;
    break;
  case OP_BATCH: {
    norm_tensor_t *rm = req->running_mean.present ? &req->running_mean.t : NULL;
    norm_tensor_t *rv = req->running_var.present ? &req->running_var.t : NULL;
    if (req->batch.mode == NORM_TRAIN) { /* as torch's buffer: this batch counts */
      req->batch.num_batches_tracked += 1;
      req->batch.cumulative = req->batch_momentum_null;
    }
    err = norm_batch(x, w, b, rm, rv, &req->batch, &res->output, &st);
    res->stats_rank = 1;
    res->stats_shape[0] = x->shape[1];
    out_layout.layout = NORM_MOMENTS_CHANNELS;
    break;
  }
  case OP_GROUP:
    err = norm_group(x, w, b, &req->group, &res->output, &st);
    res->stats_rank = 2;
    res->stats_shape[0] = x->shape[0];
    res->stats_shape[1] = req->group.num_groups;
    break;
  case OP_INSTANCE:
    err = norm_instance(x, w, b, &req->instance, &res->output, &st);
    stats_shape_prefix(res, x, 2);
    break;
  default: err = NORM_E_ARG; break;
  }
  if (err != NORM_OK)
    return problem_from_norm(prob, err,
                             err == NORM_E_RUNNING && req->batch_given
                                 ? "mean" /* the given statistics */
                                 : field_of(err));
  metrics_add_elements(op_name(req->op), numel);

  if (req->ret & RET_OUTPUT_STATS) {
    norm_tensor_t out_view = res->output;
    if (req->op == OP_GROUP || req->op == OP_INSTANCE) {
      /* each (n, g) or (n, c) group is contiguous: rows of a 2-D view */
      out_view.rank = 2;
      out_view.shape[0] = (int64_t)res->ngroups;
      out_view.shape[1] = (int64_t)(numel / res->ngroups);
    }
    if (output_moments(res, &out_view, out_layout, prob) != 0) return -1;
  }
  return explain_run(req, res, prob);
}
