/* compute.c -- the bridge from a request_t to core/: allocates outputs and
 * statistics, calls the kernel for the op, and derives output statistics
 * (the "mean 0, variance 1" check; "rms 1" for RMS norm) with norm_moments
 * over the same groups.
 * A large tensor is split by group ranges across the compute pool. */
#include "compute.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cpool.h"

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

/* ---- one large request across every core ---------------------------------
 * Inputs of at least SPLIT_BYTES run as ranges of groups (rows, channels,
 * (n, g) or (n, c) pairs) on the compute pool, the calling worker taking
 * its share (cpool.c explains why that cannot deadlock); smaller ones run
 * on the worker alone, with no split overhead. Groups are independent, and
 * batch norm's running statistics are per channel, so ranges never write
 * the same element. The pool has as many threads as the libuv pool
 * (config `threads`, which pool_start() publishes as UV_THREADPOOL_SIZE). */
enum { SPLIT_BYTES = 1 << 20 };

static pthread_once_t split_once = PTHREAD_ONCE_INIT;
static cpool_t *split_pool; /* NULL: everything runs on the caller */

static void split_pool_start(void) {
  const char *env = getenv("UV_THREADPOOL_SIZE");
  long n = env ? strtol(env, NULL, 10) : 0;
  if (n < 1) n = sysconf(_SC_NPROCESSORS_ONLN);
  split_pool = cpool_start(n < 1 ? 1 : n > 1024 ? 1024 : (int)n);
}

/* One kernel call over a range of groups. */
typedef struct {
  op_t op;
  request_t *req;
  const norm_tensor_t *x, *w, *b;
  norm_tensor_t *rm, *rv, *y;
  const norm_stats_t *st;
  const norm_moments_params_t *mp; /* moments: layout and output */
  norm_moments_t *m;
} split_t;

static int split_range(void *arg, size_t begin, size_t end) {
  split_t *s = arg;
  request_t *r = s->req;
  if (s->m != NULL) return norm_moments_rows(s->x, s->mp, s->m, begin, end);
  switch (s->op) {
  case OP_LAYER:
    return norm_layer_rows(s->x, s->w, s->b, &r->layer, s->y, s->st, begin, end);
  case OP_RMS: return norm_rms_rows(s->x, s->w, &r->rms, s->y, s->st, begin, end);
  case OP_BATCH:
    return norm_batch_rows(s->x, s->w, s->b, s->rm, s->rv, &r->batch, s->y,
                           s->st, begin, end);
  case OP_GROUP:
    return norm_group_rows(s->x, s->w, s->b, &r->group, s->y, s->st, begin, end);
  case OP_INSTANCE:
    return norm_instance_rows(s->x, s->w, s->b, &r->instance, s->y, s->st,
                              begin, end);
  default: return NORM_E_ARG;
  }
}

/* Runs s over groups [0, groups) of an input of `bytes` bytes. */
static int split_run(split_t *s, size_t groups, size_t bytes) {
  if (bytes < SPLIT_BYTES || groups < 2) return split_range(s, 0, groups);
  pthread_once(&split_once, split_pool_start);
  size_t parts = 2 * (size_t)cpool_threads(split_pool); /* evens out stragglers */
  return cpool_run(split_pool, groups, parts, split_range, s);
}

static size_t tensor_bytes(const norm_tensor_t *t) {
  size_t n = 0;
  return norm_tensor_check(t, NULL, &n) == NORM_OK ? n : 0;
}

/* norm_moments over all groups, split like the kernels. */
static int moments_split(const norm_tensor_t *x, const norm_moments_params_t *mp,
                         norm_moments_t *out, size_t groups) {
  split_t s = {.x = x, .mp = mp, .m = out};
  return split_run(&s, groups, tensor_bytes(x));
}

/* Output statistics: the output viewed as rows of `row_ndim` trailing dims,
 * or per channel for batch norm. With `with_rms` (RMS norm) also the
 * output's root mean square, sqrt(mean(y^2)) = sqrt(var + mean^2): what RMS
 * norm brings to ~1, where the others bring mean and variance to 0 and 1. */
static int output_moments(result_t *res, const norm_tensor_t *view,
                          norm_moments_params_t mp, int with_rms,
                          problem_t *prob) {
  norm_moments_t *m = malloc(res->ngroups * sizeof *m);
  res->out_mean = alloc_doubles(res->ngroups, prob);
  res->out_var = alloc_doubles(res->ngroups, prob);
  if (with_rms) res->out_rms = alloc_doubles(res->ngroups, prob);
  if (m == NULL || res->out_mean == NULL || res->out_var == NULL ||
      (with_rms && res->out_rms == NULL)) {
    free(m);
    return problem_set(prob, 500, "out_of_memory", NULL, "out of memory");
  }
  int err = moments_split(view, &mp, m, res->ngroups);
  for (size_t g = 0; err == NORM_OK && g < res->ngroups; g++) {
    res->out_mean[g] = m[g].mean;
    res->out_var[g] = m[g].m2 / m[g].count;
    if (with_rms)
      res->out_rms[g] = sqrt(res->out_var[g] + m[g].mean * m[g].mean);
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

/* The output's memory: the input's own (y aliasing x, which core/ allows
 * when the dtypes match) when the input may be written and nothing reads
 * it after the kernels (the steps and histograms do). A request then needs
 * one tensor's memory instead of two, and the kernels write the lines they
 * have just read. bench/http_bench.sh, 512x2048 framed: 16 concurrent
 * requests peaked at 72 MiB instead of 96. */
static int output_memory(request_t *req, result_t *res, size_t numel) {
  const req_tensor_t *in = &req->input;
  int writable = !in->borrowed || req->body_mem != NULL;
  if (writable && req->output_dtype == in->t.dtype &&
      !(req->ret & (RET_STEPS | RET_HISTOGRAMS))) {
    res->output.data = in->t.data;
    res->output_in_input = true;
    return 0;
  }
  res->output.data = malloc(numel * norm_dtype_size(req->output_dtype));
  return res->output.data != NULL ? 0 : -1;
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
    err = moments_split(x, &req->moments, res->moments, res->ngroups);
    if (err != NORM_OK) return problem_from_norm(prob, err, "input");
    metrics_add_elements("moments", numel);
    return 0;
  }

  res->output = *x;
  res->output.dtype = req->output_dtype;
  if (output_memory(req, res, numel) != 0)
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
  split_t split = {.op = req->op, .req = req, .x = x, .w = w, .b = b,
                   .y = &res->output, .st = &st};
  size_t in_bytes = tensor_bytes(x);

  norm_moments_params_t out_layout = {NORM_MOMENTS_ROWS, 1};
  switch (req->op) {
  case OP_LAYER:
    err = split_run(&split, res->ngroups, in_bytes);
    stats_shape_prefix(res, x, x->rank - req->layer.normalized_ndim);
    out_layout.normalized_ndim = req->layer.normalized_ndim;
    break;
  case OP_RMS:
    err = split_run(&split, res->ngroups, in_bytes);
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
    split.rm = rm;
    split.rv = rv;
    err = split_run(&split, res->ngroups, in_bytes);
    res->stats_rank = 1;
    res->stats_shape[0] = x->shape[1];
    out_layout.layout = NORM_MOMENTS_CHANNELS;
    break;
  }
  case OP_GROUP:
    err = split_run(&split, res->ngroups, in_bytes);
    res->stats_rank = 2;
    res->stats_shape[0] = x->shape[0];
    res->stats_shape[1] = req->group.num_groups;
    break;
  case OP_INSTANCE:
    err = split_run(&split, res->ngroups, in_bytes);
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
    int with_rms = req->op == OP_RMS;
    if (output_moments(res, &out_view, out_layout, with_rms, prob) != 0)
      return -1;
  }
  return explain_run(req, res, prob);
}
