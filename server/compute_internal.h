/* compute_internal.h -- private to compute.c, compute_backward.c and
 * compute_family.c: the per-norm kernel descriptors and the split of one
 * request over the compute pool that the forward norms (compute.c), the
 * backward passes (compute_backward.c) and the rest of the family
 * (compute_family.c) share. Cross-file helpers are compute__*. */
#ifndef NORMD_COMPUTE_INTERNAL_H
#define NORMD_COMPUTE_INTERNAL_H

#include <pthread.h>
#include <stddef.h>

#include "problem.h"
#include "request.h"

typedef struct kernel kernel_t;

/* Which statistics a norm answers per group. */
typedef enum {
  STATS_MEAN_VAR, /* mean, var, rstd */
  STATS_RMS,      /* rms, rstd */
  STATS_NORM,     /* Lp: the norm */
  /* local response norm: a window per element, no group; with steps
   * asked, the kernel's window sums per element (res->square_sum) */
  STATS_NONE,
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
  double *square_sum; /* local response norm with steps: per element */
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
  /* Its groups are neither rows nor channels (Lp and mean-variance norm
   * over any axes, local response norm's windows), which norm_moments
   * cannot view: `return: output_stats` is refused. */
  int no_output_stats;
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

/* ---- compute.c ---- */
double *compute__alloc_doubles(size_t n, problem_t *prob);
/* Runs s over groups [0, groups) of an input of `bytes` bytes: on the
 * calling thread, or split across the compute pool for large inputs. */
int compute__split_run(split_t *s, size_t groups, size_t bytes);
size_t compute__tensor_bytes(const norm_tensor_t *t);
/* The request field a core error is about. */
const char *compute__field_of(int err, const request_t *req);
/* The start every norm's path shares: x valid and its groups
 * (res->ngroups; *numel its element count), then the output of x's shape
 * in the requested dtype over `over`'s memory when it may be (the input,
 * or a backward's grad_output), and the kernel's kind of stats. 0, or -1
 * with the problem. */
int compute__groups(const request_t *req, result_t *res, problem_t *prob,
                    const kernel_t *k, const norm_tensor_t *x, size_t *numel);
int compute__output(const request_t *req, result_t *res, problem_t *prob,
                    const kernel_t *k, const norm_tensor_t *x, size_t numel,
                    const req_tensor_t *over);
/* The path every forward norm takes (split: what one norm adds). */
int compute__run_norm(const request_t *req, result_t *res, problem_t *prob,
                      const kernel_t *k, split_t split);
norm_batch_params_t compute__batch_params(const request_t *req);
extern const kernel_t compute__layer_kernel, compute__rms_kernel,
    compute__batch_kernel, compute__group_kernel, compute__instance_kernel;

/* ---- compute_backward.c ---- */
/* The path every backward takes: k->forward's groups and stats, k->rows. */
int compute__run_backward(const request_t *req, result_t *res, problem_t *prob,
                          const backward_t *k, split_t split);

/* The compute column of OPS_MAP (ops.h), one per operation. */
#define COMPUTE_DECLARE_(id, name, route, model, kind, norm, takes, answers,   \
                         metric, fields, check, compute)                       \
  int compute(const request_t *req, result_t *res, problem_t *prob);
OPS_MAP(COMPUTE_DECLARE_)
#undef COMPUTE_DECLARE_

#endif
