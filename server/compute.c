/* compute.c -- the bridge from a request_t to core/: one compute function
 * per operation (the compute column of OPS_MAP, ops.h), dispatched here.
 * The norms share one path (compute__run_norm): allocate outputs and
 * statistics, call the norm's kernel over its groups, derive output
 * statistics (the "mean 0, variance 1" check; "rms 1" for RMS norm) with
 * norm_moments over the same groups, then the teaching extras (explain.c).
 * Everything computed goes into the result; the request is only read (the
 * output may take over the input's memory, see output_memory).
 * A large tensor is split by group ranges across the compute pool. The
 * backward passes are compute_backward.c's, Lp / LRN / MVN
 * compute_family.c's; compute_internal.h holds what they share. */
#include "compute.h"
#include "compute_internal.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cpool.h"

#include "explain.h"
#include "metrics.h"
#include "simulate.h"

double *compute__alloc_doubles(size_t n, problem_t *prob) {
  double *p = calloc(n ? n : 1, sizeof *p);
  if (p == NULL) problem_set(prob, PROBLEM_OUT_OF_MEMORY, NULL, "out of memory");
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
 * the same element. The pool is cpool_shared(), with compute_init()'s
 * thread count (the daemon's `threads`, as many as the worker pool), or
 * one per CPU. */
enum { SPLIT_BYTES = 1 << 20 };

void compute_init(int threads) { cpool_shared_init(threads); }

static int backward_range(const split_t *s, size_t begin, size_t end) {
  if (!s->split || (s->gw == NULL && s->gb == NULL)) {
    norm_grads_t grads = {s->gw, s->gb};
    return s->backward->rows(s, &grads, begin, end);
  }
  double *mine = calloc(s->nw + s->nb ? s->nw + s->nb : 1, sizeof *mine);
  if (mine == NULL) return SPLIT_E_NOMEM;
  norm_grads_t grads = {s->gw ? mine : NULL, s->gb ? mine + s->nw : NULL};
  int err = s->backward->rows(s, &grads, begin, end);
  pthread_mutex_lock(s->lock);
  for (size_t i = 0; s->gw && i < s->nw; i++) s->gw[i] += mine[i];
  for (size_t i = 0; s->gb && i < s->nb; i++) s->gb[i] += mine[s->nw + i];
  pthread_mutex_unlock(s->lock);
  free(mine);
  return err;
}

static int split_range(void *arg, size_t begin, size_t end) {
  split_t *s = arg;
  if (s->m != NULL) return norm_moments_rows(s->x, s->mp, s->m, begin, end);
  if (s->backward != NULL) return backward_range(s, begin, end);
  return s->kernel->rows(s, begin, end);
}

/* Runs s over groups [0, groups) of an input of `bytes` bytes. */
int compute__split_run(split_t *s, size_t groups, size_t bytes) {
  if (bytes < SPLIT_BYTES || groups < 2) return split_range(s, 0, groups);
  s->split = 1;
  cpool_t *pool = cpool_shared();
  size_t parts = 2 * (size_t)cpool_threads(pool); /* evens out stragglers */
  return cpool_run(pool, groups, parts, split_range, s);
}

size_t compute__tensor_bytes(const norm_tensor_t *t) {
  size_t n = 0;
  return norm_tensor_check(t, NULL, &n) == NORM_OK ? n : 0;
}

/* norm_moments over all groups, split like the kernels. */
static int moments_split(const norm_tensor_t *x, const norm_moments_params_t *mp,
                         norm_moments_t *out, size_t groups) {
  split_t s = {.x = x, .mp = mp, .m = out};
  return compute__split_run(&s, groups, compute__tensor_bytes(x));
}

/* Output statistics: the output viewed as rows of `row_ndim` trailing dims,
 * or per channel for batch norm. With `with_rms` (RMS norm) also the
 * output's root mean square, sqrt(mean(y^2)) = sqrt(var + mean^2): what RMS
 * norm brings to ~1, where the others bring mean and variance to 0 and 1. */
static int output_moments(result_t *res, const norm_tensor_t *view,
                          norm_moments_params_t mp, int with_rms,
                          problem_t *prob) {
  norm_moments_t *m = malloc(res->ngroups * sizeof *m);
  res->out_mean = compute__alloc_doubles(res->ngroups, prob);
  res->out_var = compute__alloc_doubles(res->ngroups, prob);
  if (with_rms) res->out_rms = compute__alloc_doubles(res->ngroups, prob);
  if (m == NULL || res->out_mean == NULL || res->out_var == NULL ||
      (with_rms && res->out_rms == NULL)) {
    free(m);
    return problem_set(prob, PROBLEM_OUT_OF_MEMORY, NULL, "out of memory");
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
const char *compute__field_of(int err, const request_t *req) {
  switch (err) {
  case NORM_E_WEIGHT: return "weight";
  case NORM_E_BIAS: return "bias";
  case NORM_E_RUNNING: /* mode given's statistics stand in their place */
    return req->batch_given ? "mean" : "running_mean";
  case NORM_E_GROUPS: return "num_groups";
  case NORM_E_EPS: return "eps";
  case NORM_E_MOMENTUM: return "momentum";
  case NORM_E_GRAD_OUTPUT: return "grad_output";
  default: return "input";
  }
}

/* The output's memory: that of `in` -- the input, or a backward's
 * grad_output -- (y aliasing x, or dx aliasing dy, which core/ allows when
 * the dtypes match) when it may be written and nothing reads it after the
 * kernels (the steps and histograms do). A request then needs
 * one tensor's memory instead of two, and the kernels write the lines they
 * have just read. bench/http_bench.sh, 512x2048 framed: 16 concurrent
 * requests peaked at 72 MiB instead of 96. */
static int output_memory(const request_t *req, result_t *res, size_t numel,
                         const req_tensor_t *in) {
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

/* ---- the norms ----------------------------------------------------------- */

/* The result's statistics arrays for a norm's kind of stats. 0, or -1 with
 * a 500 problem. */
static int alloc_stats(result_t *res, stats_kind_t kind, size_t numel,
                       unsigned ret, problem_t *prob) {
  switch (kind) {
  case STATS_MEAN_VAR:
    res->mean = compute__alloc_doubles(res->ngroups, prob);
    res->var = compute__alloc_doubles(res->ngroups, prob);
    res->rstd = compute__alloc_doubles(res->ngroups, prob);
    break;
  case STATS_RMS:
    res->rms = compute__alloc_doubles(res->ngroups, prob);
    res->rstd = compute__alloc_doubles(res->ngroups, prob);
    break;
  case STATS_NORM: res->norm = compute__alloc_doubles(res->ngroups, prob); break;
  case STATS_NONE:
    if (ret & RET_STEPS) res->square_sum = compute__alloc_doubles(numel, prob);
    break;
  }
  return prob->status ? -1 : 0;
}

int compute__groups(const request_t *req, result_t *res, problem_t *prob,
                    const kernel_t *k, const norm_tensor_t *x, size_t *numel) {
  int err = norm_tensor_check(x, numel, NULL);
  if (err != NORM_OK) return problem_from_norm(prob, err, "input");
  int64_t groups = k->groups(req, x);
  if (groups < 0)
    return problem_from_norm(prob, (int)groups,
                             compute__field_of((int)groups, req));
  res->ngroups = (size_t)groups;
  return 0;
}

int compute__output(const request_t *req, result_t *res, problem_t *prob,
                    const kernel_t *k, const norm_tensor_t *x, size_t numel,
                    const req_tensor_t *over) {
  res->output = *x;
  res->output.dtype = req->output_dtype;
  if (output_memory(req, res, numel, over) != 0)
    return problem_set(prob, PROBLEM_OUT_OF_MEMORY, NULL, "out of memory");
  return alloc_stats(res, k->stats, numel, req->ret, prob);
}

/* Fused residual add (vLLM's fused_add_rms_norm, FlashAttention's
 * dropout_add_layer_norm without dropout): h = input + residual, each sum
 * rounded once to the input's dtype -- float32 and float64 added in their
 * own precision, float16 and bfloat16 exactly in double and rounded once
 * (the double sum of two of them rounds to the same half as the exact
 * one). h is written over the residual's memory (the request's, read
 * nowhere else) and is what the norm normalizes. */
static int fused_add(const request_t *req, result_t *res, problem_t *prob) {
  const norm_tensor_t *x = &req->input.t, *r = &req->residual_in.t;
  size_t n = 0;
  if (r->dtype != x->dtype || r->rank != x->rank ||
      memcmp(r->shape, x->shape, (size_t)x->rank * sizeof x->shape[0]) != 0 ||
      norm_tensor_check(x, &n, NULL) != NORM_OK)
    return problem_set(prob, PROBLEM_RESIDUAL_MISMATCH, "residual",
                       "residual must have the input's shape and dtype (%s)",
                       norm_dtype_name(x->dtype));
  res->residual_out = *r;
  if (x->dtype == NORM_F32) {
    const float *a = x->data;
    float *h = r->data;
    for (size_t i = 0; i < n; i++) h[i] = a[i] + h[i];
  } else if (x->dtype == NORM_F64) {
    const double *a = x->data;
    double *h = r->data;
    for (size_t i = 0; i < n; i++) h[i] = a[i] + h[i];
  } else {
    for (size_t i = 0; i < n; i++)
      norm_tensor_set(&res->residual_out, i,
                      norm_tensor_get(x, i) + norm_tensor_get(r, i));
  }
  return 0;
}

/* The path every norm takes; split carries what one norm adds (batch
 * norm's running statistics and parameters). With a residual, the norm
 * runs on h = input + residual (fused_add). */
int compute__run_norm(const request_t *req, result_t *res, problem_t *prob,
                    const kernel_t *k, split_t split) {
  if (k->no_output_stats && (req->ret & RET_OUTPUT_STATS))
    return problem_set(prob, PROBLEM_BAD_FIELD, "return",
                       "return \"output_stats\" is not answered by %s (its "
                       "groups are not rows or channels)",
                       op_name(req->op));
  if (req->residual_in.present && fused_add(req, res, prob) != 0) return -1;
  const norm_tensor_t *x =
      req->residual_in.present ? &res->residual_out : &req->input.t;
  size_t numel;
  if (compute__groups(req, res, prob, k, x, &numel) != 0 ||
      compute__output(req, res, prob, k, x, numel, &req->input) != 0)
    return -1;
  norm_stats_t st = {res->mean, res->var, res->rstd, res->rms};
  split.kernel = k;
  split.req = req;
  split.x = x;
  split.w = req->weight.present ? &req->weight.t : NULL;
  split.b = req->bias.present ? &req->bias.t : NULL;
  split.y = &res->output;
  split.st = &st;
  split.norms = res->norm;
  split.square_sum = res->square_sum;
  int err = compute__split_run(&split, res->ngroups, compute__tensor_bytes(x));
  norm_moments_params_t out_layout = {NORM_MOMENTS_ROWS, 1};
  k->layout(req, x, res, &out_layout);
  if (err != NORM_OK) return problem_from_norm(prob, err, compute__field_of(err, req));
  metrics_add_elements(op_info(req->op)->metric, numel);

  if (req->ret & RET_OUTPUT_STATS) {
    norm_tensor_t out_view = res->output;
    if (k->contiguous_groups) {
      out_view.rank = 2;
      out_view.shape[0] = (int64_t)res->ngroups;
      out_view.shape[1] = (int64_t)(numel / res->ngroups);
    }
    if (output_moments(res, &out_view, out_layout, k->stats == STATS_RMS, prob) != 0)
      return -1;
  }
  return explain_run(req, res, prob);
}

/* Layer and RMS norm: per row of the trailing normalized_ndim dims. */
static void rows_layout(int ndim, const norm_tensor_t *x, result_t *res,
                        norm_moments_params_t *out) {
  stats_shape_prefix(res, x, x->rank - ndim);
  out->normalized_ndim = ndim;
}

static int64_t layer_groups(const request_t *req, const norm_tensor_t *x) {
  return norm_layer_groups(x, &req->layer);
}
static int layer_rows(const split_t *s, size_t begin, size_t end) {
  return norm_layer_rows(s->x, s->w, s->b, &s->req->layer, s->y, s->st, begin,
                         end);
}
static void layer_layout(const request_t *req, const norm_tensor_t *x,
                         result_t *res, norm_moments_params_t *out) {
  rows_layout(req->layer.normalized_ndim, x, res, out);
}
const kernel_t compute__layer_kernel = {layer_groups, layer_rows, layer_layout, 0,
                                      STATS_MEAN_VAR, 0, 0};
int compute_layer(const request_t *req, result_t *res, problem_t *prob) {
  return compute__run_norm(req, res, prob, &compute__layer_kernel, (split_t){0});
}

static int64_t rms_groups(const request_t *req, const norm_tensor_t *x) {
  return norm_rms_groups(x, &req->rms);
}
static int rms_rows(const split_t *s, size_t begin, size_t end) {
  return norm_rms_rows(s->x, s->w, &s->req->rms, s->y, s->st, begin, end);
}
static void rms_layout(const request_t *req, const norm_tensor_t *x,
                       result_t *res, norm_moments_params_t *out) {
  rows_layout(req->rms.normalized_ndim, x, res, out);
}
const kernel_t compute__rms_kernel = {rms_groups, rms_rows, rms_layout, 0,
                                    STATS_RMS, 0, 0};
int compute_rms(const request_t *req, result_t *res, problem_t *prob) {
  return compute__run_norm(req, res, prob, &compute__rms_kernel, (split_t){0});
}

/* Batch norm: per channel. */
static int64_t batch_groups(const request_t *req, const norm_tensor_t *x) {
  (void)req;
  return norm_batch_groups(x);
}
static int batch_rows(const split_t *s, size_t begin, size_t end) {
  return norm_batch_rows(s->x, s->w, s->b, s->rm, s->rv, s->batch, s->y, s->st,
                         begin, end);
}
static void channel_layout(const request_t *req, const norm_tensor_t *x,
                           result_t *res, norm_moments_params_t *out) {
  (void)req;
  res->stats_rank = 1;
  res->stats_shape[0] = x->shape[1];
  out->layout = NORM_MOMENTS_CHANNELS;
}

/* A copy of a request tensor the result owns (the kernel may update it).
 * 0, or -1 out of memory. */
static int copy_tensor(norm_tensor_t *dst, const req_tensor_t *src) {
  *dst = src->t;
  size_t bytes = compute__tensor_bytes(&src->t);
  dst->data = malloc(bytes ? bytes : 1);
  if (dst->data == NULL) return -1;
  memcpy(dst->data, src->t.data, bytes);
  return 0;
}

/* The running statistics are the kernel's to read (eval) or update
 * (train), so it works on the result's copies: in train mode they are the
 * answer, with this batch counted (as torch's buffer counts it). */
/* This batch's parameters: in train mode it counts (as torch's buffer). */
norm_batch_params_t compute__batch_params(const request_t *req) {
  norm_batch_params_t p = req->batch;
  if (p.mode == NORM_TRAIN) {
    p.num_batches_tracked += 1;
    p.cumulative = req->batch_momentum_null;
  }
  return p;
}

const kernel_t compute__batch_kernel = {batch_groups, batch_rows, channel_layout,
                                      0, STATS_MEAN_VAR, 1, 0};

int compute_batch(const request_t *req, result_t *res, problem_t *prob) {
  norm_batch_params_t p = compute__batch_params(req);
  if ((req->running_mean.present &&
       copy_tensor(&res->running_mean, &req->running_mean) != 0) ||
      (req->running_var.present &&
       copy_tensor(&res->running_var, &req->running_var) != 0))
    return problem_set(prob, PROBLEM_OUT_OF_MEMORY, NULL, "out of memory");
  res->has_running = p.mode == NORM_TRAIN && req->running_mean.present;
  res->num_batches_tracked = p.num_batches_tracked;
  split_t split = {.batch = &p,
                   .rm = req->running_mean.present ? &res->running_mean : NULL,
                   .rv = req->running_var.present ? &res->running_var : NULL};
  return compute__run_norm(req, res, prob, &compute__batch_kernel, split);
}

/* Group and instance norm: per (n, group) and per (n, c), each group a
 * contiguous run. */
static int64_t group_groups(const request_t *req, const norm_tensor_t *x) {
  return norm_group_groups(x, &req->group);
}
static int group_rows(const split_t *s, size_t begin, size_t end) {
  return norm_group_rows(s->x, s->w, s->b, &s->req->group, s->y, s->st, begin,
                         end);
}
static void group_layout(const request_t *req, const norm_tensor_t *x,
                         result_t *res, norm_moments_params_t *out) {
  (void)out;
  res->stats_rank = 2;
  res->stats_shape[0] = x->shape[0];
  res->stats_shape[1] = req->group.num_groups;
}
const kernel_t compute__group_kernel = {group_groups, group_rows, group_layout, 1,
                                      STATS_MEAN_VAR, 1, 0};
int compute_group(const request_t *req, result_t *res, problem_t *prob) {
  return compute__run_norm(req, res, prob, &compute__group_kernel, (split_t){0});
}

static int64_t instance_groups(const request_t *req, const norm_tensor_t *x) {
  (void)req;
  return norm_instance_groups(x);
}
static int instance_rows(const split_t *s, size_t begin, size_t end) {
  return norm_instance_rows(s->x, s->w, s->b, &s->req->instance, s->y, s->st,
                            begin, end);
}
static void instance_layout(const request_t *req, const norm_tensor_t *x,
                            result_t *res, norm_moments_params_t *out) {
  (void)req;
  (void)out;
  stats_shape_prefix(res, x, 2);
}
const kernel_t compute__instance_kernel = {instance_groups, instance_rows,
                                         instance_layout, 1, STATS_MEAN_VAR,
                                         1, 0};
int compute_instance(const request_t *req, result_t *res,
                            problem_t *prob) {
  return compute__run_norm(req, res, prob, &compute__instance_kernel, (split_t){0});
}

/* ---- moments ------------------------------------------------------------- */

int compute_moments(const request_t *req, result_t *res,
                           problem_t *prob) {
  const norm_tensor_t *x = &req->input.t;
  size_t numel;
  int err = norm_tensor_check(x, &numel, NULL);
  if (err != NORM_OK) return problem_from_norm(prob, err, "input");
  int64_t groups = norm_moments_groups(x, &req->moments);
  if (groups < 0)
    return problem_from_norm(prob, (int)groups, compute__field_of((int)groups, req));
  res->ngroups = (size_t)groups;
  if (req->moments.layout == NORM_MOMENTS_CHANNELS) {
    res->stats_rank = 1;
    res->stats_shape[0] = x->shape[1];
  } else {
    stats_shape_prefix(res, x, x->rank - req->moments.normalized_ndim);
  }
  res->moments = malloc(res->ngroups * sizeof *res->moments);
  if (res->moments == NULL)
    return problem_set(prob, PROBLEM_OUT_OF_MEMORY, NULL, "out of memory");
  err = moments_split(x, &req->moments, res->moments, res->ngroups);
  if (err != NORM_OK) return problem_from_norm(prob, err, "input");
  metrics_add_elements(op_info(req->op)->metric, numel);
  return 0;
}

int compute_merge(const request_t *req, result_t *res, problem_t *prob) {
  res->ngroups = req->ngroups;
  res->stats_rank = 1;
  res->stats_shape[0] = (int64_t)req->ngroups;
  res->moments = calloc(req->ngroups ? req->ngroups : 1, sizeof *res->moments);
  if (res->moments == NULL)
    return problem_set(prob, PROBLEM_OUT_OF_MEMORY, NULL, "out of memory");
  for (size_t p = 0; p < req->nparts; p++)
    for (size_t g = 0; g < req->ngroups; g++)
      norm_moments_merge(&res->moments[g], &req->parts[p * req->ngroups + g]);
  return 0;
}

/* ---- dispatch ------------------------------------------------------------ */

typedef int (*compute_fn)(const request_t *req, result_t *res, problem_t *prob);
static const compute_fn computes[OP_COUNT] = {
#define OP_COMPUTE_(id, name, route, model, kind, norm, takes, answers, metric,      \
                    fields, check, compute)                                    \
  [OP_##id] = compute,
    OPS_MAP(OP_COMPUTE_)
#undef OP_COMPUTE_
};

int compute_run(const request_t *req, result_t *res, problem_t *prob) {
  memset(res, 0, sizeof *res);
  return computes[req->op](req, res, prob);
}
