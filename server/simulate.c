/* simulate.c -- runs core's residual experiment (core/residual.h) for the
 * requested placements with one workspace each pass: the forward curves,
 * and with "gradients" the loss and gradient norms at initialization. */
#include "simulate.h"

#include <stdlib.h>

#include "residual.h"

/* malloc'd arrays of n doubles, or NULL with a 500 problem. */
static double *doubles(size_t n, problem_t *prob) {
  double *p = malloc((n ? n : 1) * sizeof *p);
  if (p == NULL) problem_set(prob, PROBLEM_OUT_OF_MEMORY, NULL, "out of memory");
  return p;
}

/* The workspace size for p, or -1 with the problem (eps, or too large). */
static int64_t workspace(const norm_residual_params_t *p, int gradients,
                         problem_t *prob) {
  int64_t need = gradients ? norm_residual_grad_workspace(p)
                           : norm_residual_workspace(p);
  if (need == NORM_E_EPS) return problem_from_norm(prob, (int)need, "eps");
  if (need < 0)
    return problem_set(prob, PROBLEM_SIMULATION_TOO_LARGE, "layers",
                       gradients
                           ? "layers x tokens x d x d must stay under %lld, "
                             "and with gradients the workspace (about 3 x "
                             "layers x tokens x d + 4 x d x d doubles, for "
                             "every block's activations and one block's "
                             "weights and their gradients) under %lld doubles"
                           : "layers x tokens x d x d must stay under %lld",
                       (long long)NORM_RESIDUAL_MAX_WORK,
                       (long long)NORM_RESIDUAL_MAX_GRAD_WORKSPACE);
  return need;
}

int simulate_run(const request_t *req, result_t *res, problem_t *prob) {
  norm_residual_params_t p = {
      .tokens = req->residual.tokens, .d = req->residual.d,
      .layers = req->residual.layers,
      .norm = (norm_residual_norm_t)req->residual.norm,
      .seed = req->residual.seed, .eps = req->residual.eps,
      .gain = req->residual.gain, .classes = req->residual.classes};
  int gradients = req->residual.gradients;
  /* sizes are checked for every placement alike before anything runs */
  int64_t need = workspace(&p, 0, prob), grad_need = 0;
  if (need < 0 || (gradients && (grad_need = workspace(&p, 1, prob)) < 0))
    return -1;
  double *ws = doubles((size_t)(grad_need > need ? grad_need : need), prob);
  if (ws == NULL) return -1;
  size_t layers = (size_t)p.layers;
  int rc = 0;
  for (int k = 0; k < RESIDUAL_PLACEMENTS && rc == 0; k++) {
    if (!(req->residual.placements & (1u << k))) continue;
    residual_curves_t *c = &res->curves[k];
    p.placement = (norm_residual_placement_t)k;
    if (!(c->rms = doubles(layers + 1, prob)) ||
        !(c->cos_to_input = doubles(layers + 1, prob)) ||
        !(c->rel_update = doubles(layers, prob)) ||
        !(c->cosine = doubles(layers, prob))) {
      rc = -1;
      break;
    }
    int err = norm_residual_simulate(&p, ws, (size_t)need, c->rms, c->rel_update,
                                     c->cosine, c->cos_to_input);
    if (err == NORM_OK && gradients) {
      if (!(c->grad_w1 = doubles(layers, prob)) ||
          !(c->grad_w2 = doubles(layers, prob)) ||
          !(c->grad_stream = doubles(layers + 1, prob))) {
        rc = -1;
        break;
      }
      err = norm_residual_gradients(&p, ws, (size_t)grad_need, &c->loss,
                                    c->grad_w1, c->grad_w2, c->grad_stream);
    }
    if (err != NORM_OK) rc = problem_from_norm(prob, err, NULL);
  }
  free(ws);
  return rc;
}
