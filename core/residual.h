/* residual.h -- the Pre-Norm vs Post-Norm experiment, part of the core
 * library (kept beside norm.h, whose error codes it returns).
 *
 * A stack of L residual blocks on a (tokens, d) stream x_0 ~ N(0, 1), each
 * with a random two-layer ReLU sublayer F_t(h) = W2_t relu(W1_t h) (W1 ~
 * N(0, 2/d), W2 ~ N(0, gain^2/d)), and a norm without affine (layer or RMS,
 * per token) placed
 *   pre:  x_{t+1} = x_t + F_t(Norm(x_t))
 *   post: x_{t+1} = Norm(x_t + F_t(x_t))
 * For each t it reports the stream's RMS, the relative update
 * ||x_{t+1} - x_t|| / ||x_t||, the cosine between x_t and x_{t+1}, and the
 * cosine between x_0 and x_{t+1}. Weights and x_0 depend only on the seed
 * (and t), so both placements see the same sublayers. Deterministic, no
 * allocation: the caller passes a workspace of norm_residual_workspace()
 * doubles. */
#ifndef NORM_RESIDUAL_H
#define NORM_RESIDUAL_H

#include <stddef.h>
#include <stdint.h>

#include "norm.h"

typedef enum { NORM_RESIDUAL_LAYER = 0, NORM_RESIDUAL_RMS = 1 } norm_residual_norm_t;
typedef enum { NORM_RESIDUAL_PRE = 0, NORM_RESIDUAL_POST = 1 } norm_residual_placement_t;

typedef struct {
  int64_t tokens, d, layers;
  norm_residual_norm_t norm;
  norm_residual_placement_t placement;
  uint64_t seed;
  double eps;  /* of the norm */
  double gain; /* scale of each sublayer's output */
} norm_residual_params_t;

/* Largest work the simulation accepts: layers * tokens * d * d. */
#define NORM_RESIDUAL_MAX_WORK (INT64_C(1) << 30)

/* Doubles of workspace needed, or a negative error: NORM_E_ARG for sizes
 * below 1 (d below 2), or work past NORM_RESIDUAL_MAX_WORK; NORM_E_EPS;
 * NORM_E_ARG for a gain that is not finite and >= 0. */
int64_t norm_residual_workspace(const norm_residual_params_t *p);

/* Runs the stack. rms and cos_to_input get layers + 1 entries (index 0 is
 * x_0), rel_update and cosine get layers entries (index t: from x_t to
 * x_{t+1}). Any output may be NULL. */
int norm_residual_simulate(const norm_residual_params_t *p, double *workspace,
                           size_t workspace_len, double *rms,
                           double *rel_update, double *cosine,
                           double *cos_to_input);

#endif
