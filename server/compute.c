/* compute.c -- the bridge from a request_t to core/: one compute function
 * per operation (the compute column of OPS_MAP, ops.h). The norms share
 * one path (run_norm): allocate outputs and statistics, call the norm's
 * kernel over its groups, derive output statistics (the "mean 0, variance
 * 1" check; "rms 1" for RMS norm) with norm_moments over the same groups,
 * then the teaching extras (explain.c). Everything computed goes into the
 * result; the request is only read (the output may take over the input's
 * memory, see output_memory).
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
 * the same element. The pool has compute_init()'s thread count (the
 * daemon's `threads`, as many as the worker pool), or one per CPU. */
enum { SPLIT_BYTES = 1 << 20 };

static int split_threads; /* compute_init's; 0: one per CPU */
static pthread_once_t split_once = PTHREAD_ONCE_INIT;
static cpool_t *split_pool; /* NULL: everything runs on the caller */

void compute_init(int threads) { split_threads = threads; }

static void split_pool_start(void) {
  long n = split_threads > 0 ? split_threads : sysconf(_SC_NPROCESSORS_ONLN);
  split_pool = cpool_start(n < 1 ? 1 : n > 1024 ? 1024 : (int)n);
}

typedef struct kernel kernel_t;

/* Which statistics a norm answers per group. */
typedef enum {
  STATS_MEAN_VAR, /* mean, var, rstd */
  STATS_RMS,      /* rms, rstd */
  STATS_NORM,     /* Lp: the norm */
  STATS_NONE,     /* local response norm: a window per element, no group */
} stats_kind_t;

typedef struct backward backward_t;

/* One kernel call over a range of groups: a norm's (kernel), a backward's
 * (backward) or, with m set, norm_moments. */
typedef struct {
  const kernel_t *kernel;
  const backward_t *backward;
  const request_t *req;
  const norm_tensor_t *x, *w, *b;
  norm_tensor_t *rm, *rv, *y; /* batch norm: running stats (the result's) */
  const norm_batch_params_t *batch; /* batch norm: this batch's parameters */
  const norm_stats_t *st;
  double *norms;                   /* Lp norm: the result's norm */
  const norm_moments_params_t *mp; /* moments: layout and output */
  norm_moments_t *m;
  /* Backward: grad_output, and the weight and bias gradients (double
   * sums of nw / nb entries, NULL when not wanted). Ranges run on the pool
   * (split) sum into arrays of their own and add them under lock. */
  const norm_tensor_t *dy;
  double *gw, *gb;
  size_t nw, nb;
  int split;
  pthread_mutex_t *lock;
} split_t;

/* A norm's part of run_norm: its group count, its kernel over a range of
 * groups, and the shape of its statistics with the view of the output
 * that gives per-group output statistics. */
struct kernel {
  int64_t (*groups)(const request_t *req, const norm_tensor_t *x);
  int (*rows)(const split_t *s, size_t begin, size_t end);
  /* Sets res's stats shape and *out, the layout for the output's moments
   * (rows of trailing dims, or channels). */
  void (*layout)(const request_t *req, const norm_tensor_t *x, result_t *res,
                 norm_moments_params_t *out);
  /* Each group is one contiguous run of elements: the output's moments
   * view it as rows of a 2-D (groups, run) tensor. */
  int contiguous_groups;
  stats_kind_t stats;
  /* Per-channel weight and bias, shape (C); else the normalized shape. */
  int channel_affine;
};

/* A backward's part of run_backward: its kernel over a range of groups
 * (the forward's kernel_t gives the groups and the stats' layout). */
struct backward {
  const kernel_t *forward;
  int (*rows)(const split_t *s, const norm_grads_t *grads, size_t begin,
              size_t end);
};

/* Out of memory in a range of a split backward (no core error means it). */
enum { SPLIT_E_NOMEM = -1000 };

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
static int split_run(split_t *s, size_t groups, size_t bytes) {
  if (bytes < SPLIT_BYTES || groups < 2) return split_range(s, 0, groups);
  s->split = 1;
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
static const char *field_of(int err, const request_t *req) {
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
static int alloc_stats(result_t *res, stats_kind_t kind, problem_t *prob) {
  switch (kind) {
  case STATS_MEAN_VAR:
    res->mean = alloc_doubles(res->ngroups, prob);
    res->var = alloc_doubles(res->ngroups, prob);
    res->rstd = alloc_doubles(res->ngroups, prob);
    break;
  case STATS_RMS:
    res->rms = alloc_doubles(res->ngroups, prob);
    res->rstd = alloc_doubles(res->ngroups, prob);
    break;
  case STATS_NORM: res->norm = alloc_doubles(res->ngroups, prob); break;
  case STATS_NONE: break;
  }
  return prob->status ? -1 : 0;
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
static int run_norm(const request_t *req, result_t *res, problem_t *prob,
                    const kernel_t *k, split_t split) {
  if (req->residual_in.present && fused_add(req, res, prob) != 0) return -1;
  const norm_tensor_t *x =
      req->residual_in.present ? &res->residual_out : &req->input.t;
  size_t numel;
  int err = norm_tensor_check(x, &numel, NULL);
  if (err != NORM_OK) return problem_from_norm(prob, err, "input");
  int64_t groups = k->groups(req, x);
  if (groups < 0)
    return problem_from_norm(prob, (int)groups, field_of((int)groups, req));
  res->ngroups = (size_t)groups;

  res->output = *x;
  res->output.dtype = req->output_dtype;
  if (output_memory(req, res, numel, &req->input) != 0)
    return problem_set(prob, PROBLEM_OUT_OF_MEMORY, NULL, "out of memory");
  if (alloc_stats(res, k->stats, prob) != 0) return -1;
  norm_stats_t st = {res->mean, res->var, res->rstd, res->rms};
  split.kernel = k;
  split.req = req;
  split.x = x;
  split.w = req->weight.present ? &req->weight.t : NULL;
  split.b = req->bias.present ? &req->bias.t : NULL;
  split.y = &res->output;
  split.st = &st;
  split.norms = res->norm;
  err = split_run(&split, res->ngroups, tensor_bytes(x));
  norm_moments_params_t out_layout = {NORM_MOMENTS_ROWS, 1};
  k->layout(req, x, res, &out_layout);
  if (err != NORM_OK) return problem_from_norm(prob, err, field_of(err, req));
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
static const kernel_t layer_kernel = {layer_groups, layer_rows, layer_layout, 0,
                                      STATS_MEAN_VAR, 0};
static int compute_layer(const request_t *req, result_t *res, problem_t *prob) {
  return run_norm(req, res, prob, &layer_kernel, (split_t){0});
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
static const kernel_t rms_kernel = {rms_groups, rms_rows, rms_layout, 0,
                                    STATS_RMS, 0};
static int compute_rms(const request_t *req, result_t *res, problem_t *prob) {
  return run_norm(req, res, prob, &rms_kernel, (split_t){0});
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
  size_t bytes = tensor_bytes(&src->t);
  dst->data = malloc(bytes ? bytes : 1);
  if (dst->data == NULL) return -1;
  memcpy(dst->data, src->t.data, bytes);
  return 0;
}

/* The running statistics are the kernel's to read (eval) or update
 * (train), so it works on the result's copies: in train mode they are the
 * answer, with this batch counted (as torch's buffer counts it). */
/* This batch's parameters: in train mode it counts (as torch's buffer). */
static norm_batch_params_t batch_params(const request_t *req) {
  norm_batch_params_t p = req->batch;
  if (p.mode == NORM_TRAIN) {
    p.num_batches_tracked += 1;
    p.cumulative = req->batch_momentum_null;
  }
  return p;
}

static const kernel_t batch_kernel = {batch_groups, batch_rows, channel_layout,
                                      0, STATS_MEAN_VAR, 1};

static int compute_batch(const request_t *req, result_t *res, problem_t *prob) {
  norm_batch_params_t p = batch_params(req);
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
  return run_norm(req, res, prob, &batch_kernel, split);
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
static const kernel_t group_kernel = {group_groups, group_rows, group_layout, 1,
                                      STATS_MEAN_VAR, 1};
static int compute_group(const request_t *req, result_t *res, problem_t *prob) {
  return run_norm(req, res, prob, &group_kernel, (split_t){0});
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
static const kernel_t instance_kernel = {instance_groups, instance_rows,
                                         instance_layout, 1, STATS_MEAN_VAR,
                                         1};
static int compute_instance(const request_t *req, result_t *res,
                            problem_t *prob) {
  return run_norm(req, res, prob, &instance_kernel, (split_t){0});
}

/* ---- the backward passes ------------------------------------------------- */

/* A gradient of `like`'s shape and dtype from its double sums, or an empty
 * tensor when not wanted. 0, or -1 out of memory. */
static int grad_tensor(norm_tensor_t *out, const norm_tensor_t *like,
                       const double *sums, size_t n) {
  if (sums == NULL) return 0;
  *out = *like;
  out->data = malloc(n * norm_dtype_size(like->dtype));
  if (out->data == NULL) return -1;
  for (size_t i = 0; i < n; i++) norm_tensor_set(out, i, sums[i]);
  return 0;
}

/* Whether t has the affine shape of the norm on x: (C) for the channel
 * norms, the normalized (trailing) dims for layer and RMS norm; *numel its
 * element count. */
static int affine_shaped(const request_t *req, const kernel_t *k,
                         const norm_tensor_t *x, const norm_tensor_t *t,
                         size_t *numel) {
  int rank = k->channel_affine
                 ? 1
                 : (k->stats == STATS_RMS ? req->rms.normalized_ndim
                                          : req->layer.normalized_ndim);
  const int64_t *dims = k->channel_affine ? &x->shape[1] : x->shape + x->rank - rank;
  return x->rank >= rank && norm_tensor_check(t, numel, NULL) == NORM_OK &&
         t->rank == rank &&
         memcmp(t->shape, dims, (size_t)rank * sizeof dims[0]) == 0;
}

/* The path every backward takes: grad_input into the result's output (over
 * grad_output's memory when it may), the weight and bias gradients summed
 * in double and answered in their tensors' dtypes, the forward's stats. */
static int run_backward(const request_t *req, result_t *res, problem_t *prob,
                        const backward_t *k, split_t split) {
  const norm_tensor_t *x = &req->input.t;
  size_t numel, nw = 0, nb = 0;
  int err = norm_tensor_check(x, &numel, NULL);
  if (err != NORM_OK) return problem_from_norm(prob, err, "input");
  int64_t groups = k->forward->groups(req, x);
  if (groups < 0)
    return problem_from_norm(prob, (int)groups, field_of((int)groups, req));
  res->ngroups = (size_t)groups;
  err = norm_tensor_check(&req->grad_output.t, NULL, NULL);
  if (err == NORM_OK && (req->grad_output.t.rank != x->rank ||
                         memcmp(req->grad_output.t.shape, x->shape,
                                (size_t)x->rank * sizeof x->shape[0]) != 0))
    err = NORM_E_GRAD_OUTPUT;
  if (err != NORM_OK) return problem_from_norm(prob, err, "grad_output");
  const norm_tensor_t *w = req->weight.present ? &req->weight.t : NULL;
  const norm_tensor_t *b = req->bias.present ? &req->bias.t : NULL;
  /* The weight and bias gradients are sized from their tensors, which must
   * have the forward's affine shape (core checks the weight's again; the
   * bias only says a gradient is wanted, so its shape is checked here). */
  if (w && !affine_shaped(req, k->forward, x, w, &nw))
    return problem_from_norm(prob, NORM_E_WEIGHT, "weight");
  if (b && !affine_shaped(req, k->forward, x, b, &nb))
    return problem_from_norm(prob, NORM_E_BIAS, "bias");

  res->output = *x;
  res->output.dtype = req->output_dtype;
  if (output_memory(req, res, numel, &req->grad_output) != 0)
    return problem_set(prob, PROBLEM_OUT_OF_MEMORY, NULL, "out of memory");
  alloc_stats(res, k->forward->stats, prob);
  double *gw = w ? alloc_doubles(nw, prob) : NULL;
  double *gb = b ? alloc_doubles(nb, prob) : NULL;
  if (prob->status) {
    free(gw);
    free(gb);
    return -1;
  }
  norm_stats_t st = {res->mean, res->var, res->rstd, res->rms};
  pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  split.backward = k;
  split.req = req;
  split.x = x;
  split.w = w;
  split.b = b;
  split.dy = &req->grad_output.t;
  split.y = &res->output;
  split.st = &st;
  split.norms = res->norm;
  split.gw = gw;
  split.gb = gb;
  split.nw = nw;
  split.nb = nb;
  split.lock = &lock;
  err = split_run(&split, res->ngroups, tensor_bytes(x));
  norm_moments_params_t unused;
  k->forward->layout(req, x, res, &unused);
  if (err == NORM_OK &&
      ((w && grad_tensor(&res->grad_weight, w, gw, nw) != 0) ||
       (b && grad_tensor(&res->grad_bias, b, gb, nb) != 0)))
    err = SPLIT_E_NOMEM;
  free(gw);
  free(gb);
  if (err == SPLIT_E_NOMEM)
    return problem_set(prob, PROBLEM_OUT_OF_MEMORY, NULL, "out of memory");
  if (err != NORM_OK) return problem_from_norm(prob, err, field_of(err, req));
  metrics_add_elements(op_info(req->op)->metric, numel);
  return explain_run(req, res, prob);
}

static int layer_backward_rows(const split_t *s, const norm_grads_t *grads,
                               size_t begin, size_t end) {
  return norm_layer_backward_rows(s->x, s->dy, s->w, &s->req->layer, s->y,
                                  grads, s->st, begin, end);
}
static int compute_layer_backward(const request_t *req, result_t *res,
                                  problem_t *prob) {
  static const backward_t k = {&layer_kernel, layer_backward_rows};
  return run_backward(req, res, prob, &k, (split_t){0});
}

static int rms_backward_rows(const split_t *s, const norm_grads_t *grads,
                             size_t begin, size_t end) {
  return norm_rms_backward_rows(s->x, s->dy, s->w, &s->req->rms, s->y, grads,
                                s->st, begin, end);
}
static int compute_rms_backward(const request_t *req, result_t *res,
                                problem_t *prob) {
  static const backward_t k = {&rms_kernel, rms_backward_rows};
  return run_backward(req, res, prob, &k, (split_t){0});
}

/* The running statistics are constants of eval mode, read, never updated. */
static int batch_backward_rows(const split_t *s, const norm_grads_t *grads,
                               size_t begin, size_t end) {
  const request_t *r = s->req;
  return norm_batch_backward_rows(
      s->x, s->dy, s->w, r->running_mean.present ? &r->running_mean.t : NULL,
      r->running_var.present ? &r->running_var.t : NULL, s->batch, s->y, grads,
      s->st, begin, end);
}
static int compute_batch_backward(const request_t *req, result_t *res,
                                  problem_t *prob) {
  static const backward_t k = {&batch_kernel, batch_backward_rows};
  norm_batch_params_t p = batch_params(req);
  return run_backward(req, res, prob, &k, (split_t){.batch = &p});
}

static int group_backward_rows(const split_t *s, const norm_grads_t *grads,
                               size_t begin, size_t end) {
  return norm_group_backward_rows(s->x, s->dy, s->w, &s->req->group, s->y,
                                  grads, s->st, begin, end);
}
static int compute_group_backward(const request_t *req, result_t *res,
                                  problem_t *prob) {
  static const backward_t k = {&group_kernel, group_backward_rows};
  return run_backward(req, res, prob, &k, (split_t){0});
}

static int instance_backward_rows(const split_t *s, const norm_grads_t *grads,
                                  size_t begin, size_t end) {
  return norm_instance_backward_rows(s->x, s->dy, s->w, &s->req->instance, s->y,
                                     grads, s->st, begin, end);
}
static int compute_instance_backward(const request_t *req, result_t *res,
                                     problem_t *prob) {
  static const backward_t k = {&instance_kernel, instance_backward_rows};
  return run_backward(req, res, prob, &k, (split_t){0});
}

/* ---- the rest of the family: Lp, local response, mean-variance --------- */

/* Stats over the dims not in `axes`, in order (rank 0 when all reduce). */
static void kept_layout(unsigned axes, const norm_tensor_t *x, result_t *res) {
  res->stats_rank = 0;
  for (int i = 0; i < x->rank; i++)
    if (!(axes & (1u << i))) res->stats_shape[res->stats_rank++] = x->shape[i];
}

static int64_t lp_groups(const request_t *req, const norm_tensor_t *x) {
  return norm_lp_groups(x, &req->lp);
}
static int lp_rows(const split_t *s, size_t begin, size_t end) {
  return norm_lp_rows(s->x, &s->req->lp, s->y, s->norms, begin, end);
}
static void lp_layout(const request_t *req, const norm_tensor_t *x,
                      result_t *res, norm_moments_params_t *out) {
  (void)out;
  kept_layout(req->lp.axes, x, res);
}
static const kernel_t lp_kernel = {lp_groups, lp_rows, lp_layout, 0, STATS_NORM,
                                   0};
static int compute_lp(const request_t *req, result_t *res, problem_t *prob) {
  return run_norm(req, res, prob, &lp_kernel, (split_t){0});
}

/* Groups are (n, spatial position) pairs; no per-group statistics. */
static int64_t lrn_groups(const request_t *req, const norm_tensor_t *x) {
  (void)req;
  return norm_lrn_groups(x);
}
static int lrn_rows(const split_t *s, size_t begin, size_t end) {
  return norm_lrn_rows(s->x, &s->req->lrn, s->y, NULL, begin, end);
}
static void lrn_layout(const request_t *req, const norm_tensor_t *x,
                       result_t *res, norm_moments_params_t *out) {
  (void)req;
  (void)out;
  res->stats_rank = 1;
  res->stats_shape[0] = 0;
  (void)x;
}
static const kernel_t lrn_kernel = {lrn_groups, lrn_rows, lrn_layout, 0,
                                    STATS_NONE, 0};
static int compute_lrn(const request_t *req, result_t *res, problem_t *prob) {
  return run_norm(req, res, prob, &lrn_kernel, (split_t){0});
}

static int64_t mvn_groups(const request_t *req, const norm_tensor_t *x) {
  return norm_mvn_groups(x, &req->mvn);
}
static int mvn_rows(const split_t *s, size_t begin, size_t end) {
  return norm_mvn_rows(s->x, &s->req->mvn, s->y, s->st, begin, end);
}
static void mvn_layout(const request_t *req, const norm_tensor_t *x,
                       result_t *res, norm_moments_params_t *out) {
  (void)out;
  kept_layout(req->mvn.axes, x, res);
}
static const kernel_t mvn_kernel = {mvn_groups, mvn_rows, mvn_layout, 0,
                                    STATS_MEAN_VAR, 0};
static int compute_mvn(const request_t *req, result_t *res, problem_t *prob) {
  return run_norm(req, res, prob, &mvn_kernel, (split_t){0});
}

static int lp_backward_rows(const split_t *s, const norm_grads_t *grads,
                            size_t begin, size_t end) {
  (void)grads;
  return norm_lp_backward_rows(s->x, s->dy, &s->req->lp, s->y, s->norms, begin,
                               end);
}
static int compute_lp_backward(const request_t *req, result_t *res,
                               problem_t *prob) {
  static const backward_t k = {&lp_kernel, lp_backward_rows};
  return run_backward(req, res, prob, &k, (split_t){0});
}

static int lrn_backward_rows(const split_t *s, const norm_grads_t *grads,
                             size_t begin, size_t end) {
  (void)grads;
  return norm_lrn_backward_rows(s->x, s->dy, &s->req->lrn, s->y, begin, end);
}
static int compute_lrn_backward(const request_t *req, result_t *res,
                                problem_t *prob) {
  static const backward_t k = {&lrn_kernel, lrn_backward_rows};
  return run_backward(req, res, prob, &k, (split_t){0});
}

static int mvn_backward_rows(const split_t *s, const norm_grads_t *grads,
                             size_t begin, size_t end) {
  (void)grads;
  return norm_mvn_backward_rows(s->x, s->dy, &s->req->mvn, s->y, s->st, begin,
                                end);
}
static int compute_mvn_backward(const request_t *req, result_t *res,
                                problem_t *prob) {
  static const backward_t k = {&mvn_kernel, mvn_backward_rows};
  return run_backward(req, res, prob, &k, (split_t){0});
}

/* ---- moments ------------------------------------------------------------- */

static int compute_moments(const request_t *req, result_t *res,
                           problem_t *prob) {
  const norm_tensor_t *x = &req->input.t;
  size_t numel;
  int err = norm_tensor_check(x, &numel, NULL);
  if (err != NORM_OK) return problem_from_norm(prob, err, "input");
  int64_t groups = norm_moments_groups(x, &req->moments);
  if (groups < 0)
    return problem_from_norm(prob, (int)groups, field_of((int)groups, req));
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

static int compute_merge(const request_t *req, result_t *res, problem_t *prob) {
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
