/* simulate.c -- runs core's residual experiment for the requested
 * placements with one workspace. */
#include "simulate.h"

#include <stdlib.h>

#include "residual.h"

int simulate_run(const request_t *req, result_t *res, problem_t *prob) {
  norm_residual_params_t p = {
      .tokens = req->residual.tokens, .d = req->residual.d,
      .layers = req->residual.layers,
      .norm = (norm_residual_norm_t)req->residual.norm,
      .seed = req->residual.seed, .eps = req->residual.eps,
      .gain = req->residual.gain};
  int64_t need = norm_residual_workspace(&p);
  if (need == NORM_E_EPS) return problem_from_norm(prob, (int)need, "eps");
  if (need < 0)
    return problem_set(prob, PROBLEM_SIMULATION_TOO_LARGE, "layers",
                       "layers x tokens x d x d must stay under %lld",
                       (long long)NORM_RESIDUAL_MAX_WORK);
  double *ws = malloc((size_t)need * sizeof *ws);
  if (ws == NULL)
    return problem_set(prob, PROBLEM_OUT_OF_MEMORY, NULL, "out of memory");
  size_t layers = (size_t)p.layers;
  int rc = 0;
  for (int k = 0; k < 2 && rc == 0; k++) {
    if (!(req->residual.placements & (1u << k))) continue;
    residual_curves_t *c = &res->curves[k];
    c->rms = malloc((layers + 1) * sizeof *c->rms);
    c->cos_to_input = malloc((layers + 1) * sizeof *c->cos_to_input);
    c->rel_update = malloc(layers * sizeof *c->rel_update);
    c->cosine = malloc(layers * sizeof *c->cosine);
    if (!c->rms || !c->cos_to_input || !c->rel_update || !c->cosine) {
      rc = problem_set(prob, PROBLEM_OUT_OF_MEMORY, NULL, "out of memory");
      break;
    }
    p.placement = k == 0 ? NORM_RESIDUAL_PRE : NORM_RESIDUAL_POST;
    int err = norm_residual_simulate(&p, ws, (size_t)need, c->rms, c->rel_update,
                                     c->cosine, c->cos_to_input);
    if (err != NORM_OK) rc = problem_from_norm(prob, err, NULL);
  }
  free(ws);
  return rc;
}
