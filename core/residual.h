/* residual.h -- the Pre-Norm vs Post-Norm experiment, part of the core
 * library (kept beside norm.h, whose error codes it returns).
 *
 * A stack of L residual blocks on a (tokens, d) stream x_0 ~ N(0, 1), each
 * with a random two-layer ReLU sublayer F_t(h) = W2_t relu(W1_t h) (W1 ~
 * N(0, 2/d), W2 ~ N(0, gain^2/d)), and a norm without affine (layer or RMS,
 * per token) placed
 *   pre:      x_{t+1} = x_t + F_t(Norm(x_t))
 *   post:     x_{t+1} = Norm(x_t + F_t(x_t))
 *   deepnorm: x_{t+1} = Norm(alpha x_t + F_t(x_t)), alpha = (2L)^(1/4), and
 *             W1, W2 scaled by beta = (8L)^(-1/4): the constants of Wang et
 *             al. 2022 (DeepNet, arXiv 2203.00555, Table 1) for an L-layer
 *             encoder-only stack (a block here is one sublayer).
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
typedef enum {
  NORM_RESIDUAL_PRE = 0,
  NORM_RESIDUAL_POST = 1,
  NORM_RESIDUAL_DEEPNORM = 2
} norm_residual_placement_t;

typedef struct {
  int64_t tokens, d, layers;
  norm_residual_norm_t norm;
  norm_residual_placement_t placement;
  uint64_t seed;
  double eps;  /* of the norm */
  double gain; /* scale of each sublayer's output */
  int64_t classes; /* norm_residual_gradients: the readout's classes, >= 2 */
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

/* ---- gradients at initialization -----------------------------------------
 * The final stream (Pre-Norm: after a final Norm, as GPT-2 and Xiong et al.
 * 2020's Pre-LN have; Post-Norm and DeepNorm end normalized) goes through a
 * fixed random readout W_out (classes x d, N(0, 1/d)) to logits, and the
 * loss is the mean cross-entropy over tokens against seeded random labels.
 * Backpropagation through the whole stack, in double, gives
 *   loss, the loss at initialization,
 *   grad_w1[t], grad_w2[t]: ||d loss / d W1_t||_F, ||d loss / d W2_t||_F,
 *   grad_stream[t]: ||d loss / d x_t||_F for t = 0..layers (x_0 the input).
 * Weights, x_0, W_out and the labels depend only on the seed: the same for
 * every placement (DeepNorm's scaled by beta). The activations of every
 * block are kept in the workspace, which is bounded. */

/* Largest workspace of norm_residual_gradients, in doubles (128 MiB). */
#define NORM_RESIDUAL_MAX_GRAD_WORKSPACE (INT64_C(1) << 24)

/* Doubles of workspace norm_residual_gradients needs, or a negative error:
 * those of norm_residual_workspace, NORM_E_ARG for classes outside
 * 2..1024, and NORM_E_OVERFLOW past NORM_RESIDUAL_MAX_GRAD_WORKSPACE. */
int64_t norm_residual_grad_workspace(const norm_residual_params_t *p);

/* The experiment's random parts, as the functions above draw them, so that
 * a caller (a test, a notebook) can rebuild the stack exactly: x_0
 * (tokens x d), block t's W1 and W2 (d x d, row-major, DeepNorm's scaled
 * by beta), the readout W_out (classes x d) and the labels (tokens, in
 * 0..classes-1). p must pass norm_residual_grad_workspace (the labels and
 * readout need classes). */
void norm_residual_input(const norm_residual_params_t *p, double *x0);
void norm_residual_weights(const norm_residual_params_t *p, int64_t t,
                           double *w1, double *w2);
void norm_residual_readout(const norm_residual_params_t *p, double *w_out,
                           int64_t *labels);
/* DeepNorm's alpha for p (1 for the other placements). */
double norm_residual_alpha(const norm_residual_params_t *p);

/* loss (one double), grad_w1 and grad_w2 (layers entries), grad_stream
 * (layers + 1); any output may be NULL. */
int norm_residual_gradients(const norm_residual_params_t *p, double *workspace,
                            size_t workspace_len, double *loss,
                            double *grad_w1, double *grad_w2,
                            double *grad_stream);

#endif
