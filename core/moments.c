/* moments.c -- per-group count, mean and M2, and Chan et al.'s merge of
 * partial moments (how shards combine into one batch norm statistic). */
#include "engine.h"

static int moments_layout(const norm_tensor_t *x,
                          const norm_moments_params_t *p, layout_t *l) {
  if (x == NULL || p == NULL) return NORM_E_NULL;
  int err = norm_tensor_check(x, NULL, NULL);
  if (err != NORM_OK) return err;
  switch (p->layout) {
  case NORM_MOMENTS_ROWS:
    if (p->normalized_ndim < 1 || p->normalized_ndim > x->rank) return NORM_E_ARG;
    *l = engine_layout_rows(x, p->normalized_ndim);
    return NORM_OK;
  case NORM_MOMENTS_CHANNELS:
    if ((err = engine_check_channels(x)) != NORM_OK) return err;
    *l = engine_layout_channels(x);
    return NORM_OK;
  }
  return NORM_E_ARG;
}

int64_t norm_moments_groups(const norm_tensor_t *x,
                            const norm_moments_params_t *p) {
  layout_t l;
  int err = moments_layout(x, p, &l);
  return err != NORM_OK ? err : (int64_t)l.groups;
}

/* count = |group|, mean = sum(x) / count, m2 = sum((x - mean)^2), per group */
int norm_moments_rows(const norm_tensor_t *x, const norm_moments_params_t *p,
                      norm_moments_t *out, size_t begin, size_t end) {
  layout_t l;
  int err = moments_layout(x, p, &l);
  if (err != NORM_OK) return err;
  if (out == NULL || x->data == NULL) return NORM_E_NULL;
  if ((err = engine_check_range(begin, end, l.groups)) != NORM_OK) return err;
  for (size_t g = begin; g < end; g++) {
    out[g].count = (double)engine_layout_count(&l);
    engine_moments(x, &l, g, &out[g].mean, &out[g].m2);
  }
  return NORM_OK;
}

int norm_moments(const norm_tensor_t *x, const norm_moments_params_t *p,
                 norm_moments_t *out) {
  int64_t groups = norm_moments_groups(x, p);
  if (groups < 0) return (int)groups;
  return norm_moments_rows(x, p, out, 0, (size_t)groups);
}

/* n = na + nb, delta = mb - ma, mean = ma + delta * nb / n,
 * M2 = M2a + M2b + delta^2 * na * nb / n */
void norm_moments_merge(norm_moments_t *acc, const norm_moments_t *part) {
  if (part->count == 0) return;
  if (acc->count == 0) {
    *acc = *part;
    return;
  }
  double n = acc->count + part->count;
  double delta = part->mean - acc->mean;
  acc->mean += delta * (part->count / n);
  acc->m2 += part->m2 + delta * delta * (acc->count * part->count / n);
  acc->count = n;
}
