/* check_torch_fixtures.c -- every core kernel and its backward pass against
 * PyTorch, on the cases in tests/fixtures/torch_fixtures.json (written by
 * gen_torch_fixtures.py; its "notes" and "backward_notes" describe the
 * format). Prints the worst relative error per kind, forward and backward,
 * the figures quoted in release notes. Reads the fixture by a path relative to
 * the repository root, so run the test binary from there.
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "testutil.h"

#define FIXTURE_PATH "tests/fixtures/torch_fixtures.json"

/* |got - want| <= REL_TOL * max(|want|, floor). Outputs and running stats are
 * rounded to their dtype and of unit scale, so near zero they must agree to
 * ~1e-7 absolute (one float32 ulp at 1.0). Stats are double on both sides. */
#define REL_TOL 1e-5
#define FLOOR_TENSOR 1e-2
#define FLOOR_STATS 1e-8
#define MAX_REPORTED 10

static const char *const kinds[] = {"layer", "rms", "batch", "group",
                                    "instance"};
#define NKINDS (sizeof kinds / sizeof kinds[0])

/* Worst errors and failures over the cases of one kind. */
typedef struct {
  double output, stats, running;
  int cases, failures;
  char first[400];
} tally_t;

/* One fixture case, loaded into guarded buffers the kernel writes into. */
typedef struct {
  const json_t *j;
  const char *name;
  size_t index;
  norm_tensor_t x, y, weight, bias, rmean, rvar;
  int has_weight, has_bias, has_running;
  size_t groups;
  double *mean, *var, *rstd, *rms;
} fx_case_t;

static json_t *load_fixtures(void) {
  json_error_t err;
  json_t *root = json_load_file(FIXTURE_PATH, 0, &err);
  ck_assert_msg(root != NULL,
                "%s:%d: %s (run from the repository root; `make fixtures` "
                "regenerates it)",
                FIXTURE_PATH, err.line, err.text);
  ck_assert_msg(json_is_array(json_object_get(root, "cases")),
                "%s: no \"cases\" array", FIXTURE_PATH);
  return root;
}

static size_t elem_size(norm_dtype_t dt) {
  return dt == NORM_F32 ? sizeof(float) : sizeof(double);
}

/* Element access kept local, so a bug in norm_tensor_get/set cannot hide. */
static double elem_get(const norm_tensor_t *t, size_t i) {
  return t->dtype == NORM_F32 ? (double)((const float *)t->data)[i]
                              : ((const double *)t->data)[i];
}

static void elem_set(norm_tensor_t *t, size_t i, double v) {
  if (t->dtype == NORM_F32)
    ((float *)t->data)[i] = (float)v;
  else
    ((double *)t->data)[i] = v;
}

static size_t numel(const norm_tensor_t *t) {
  size_t n = 1;
  for (int i = 0; i < t->rank; i++)
    n *= (size_t)t->shape[i];
  return n;
}

static void tensor_free(norm_tensor_t *t) {
  if (t->data == NULL)
    return;
  tu_free_guarded(t->data, numel(t) * elem_size(t->dtype));
  t->data = NULL;
}

static const char *str_field(const json_t *obj, const char *key) {
  return json_string_value(json_object_get(obj, key));
}

/* A {"shape", "dtype", "data"} object as a guarded tensor of its dtype; with
 * data == 0 the buffer is left zeroed. */
static norm_tensor_t tensor_from_json(const char *name, const json_t *j,
                                      int data) {
  norm_tensor_t t;
  memset(&t, 0, sizeof t);
  const json_t *shape = json_object_get(j, "shape");
  const json_t *values = json_object_get(j, "data");
  const char *dtype = str_field(j, "dtype");
  ck_assert_msg(json_is_array(shape) && json_array_size(shape) >= 1 &&
                    json_array_size(shape) <= NORM_MAX_RANK,
                "%s: bad tensor shape", name);
  ck_assert_msg(dtype != NULL && (strcmp(dtype, "float32") == 0 ||
                                  strcmp(dtype, "float64") == 0),
                "%s: bad tensor dtype", name);
  t.dtype = strcmp(dtype, "float32") == 0 ? NORM_F32 : NORM_F64;
  t.rank = (int)json_array_size(shape);
  for (int i = 0; i < t.rank; i++) {
    const json_t *d = json_array_get(shape, (size_t)i);
    ck_assert_msg(json_is_integer(d) && json_integer_value(d) > 0 &&
                      json_integer_value(d) < 1000000,
                  "%s: bad dimension %d", name, i);
    t.shape[i] = (int64_t)json_integer_value(d);
  }
  size_t n = numel(&t);
  ck_assert_msg(json_is_array(values) && json_array_size(values) == n,
                "%s: data has %zu values, shape wants %zu", name,
                json_array_size(values), n);
  t.data = tu_alloc_guarded(n * elem_size(t.dtype));
  for (size_t i = 0; data && i < n; i++) {
    const json_t *v = json_array_get(values, i);
    ck_assert_msg(json_is_number(v), "%s: data[%zu] is not a number", name, i);
    elem_set(&t, i, json_number_value(v));
  }
  return t;
}

static double num_param(const fx_case_t *c, const char *key) {
  const json_t *v = json_object_get(json_object_get(c->j, "params"), key);
  ck_assert_msg(json_is_number(v), "%s: params.%s missing", c->name, key);
  return json_number_value(v);
}

static const char *str_param(const fx_case_t *c, const char *key) {
  const char *s = str_field(json_object_get(c->j, "params"), key);
  ck_assert_msg(s != NULL, "%s: params.%s missing", c->name, key);
  return s;
}

/* params.normalized_shape as normalized_ndim for x. */
static int normalized_ndim(const fx_case_t *c) {
  const json_t *a =
      json_object_get(json_object_get(c->j, "params"), "normalized_shape");
  int64_t shape[NORM_MAX_RANK];
  size_t n = json_array_size(a);
  ck_assert_msg(json_is_array(a) && n >= 1 && n <= NORM_MAX_RANK,
                "%s: bad normalized_shape", c->name);
  for (size_t i = 0; i < n; i++)
    shape[i] = (int64_t)json_integer_value(json_array_get(a, i));
  int nd = 0;
  int rc = norm_ndim_from_shape(&c->x, shape, (int)n, &nd);
  ck_assert_msg(rc == NORM_OK, "%s: norm_ndim_from_shape: %s", c->name,
                norm_err_name(rc));
  return nd;
}

static void case_load(fx_case_t *c, const json_t *j, size_t index) {
  memset(c, 0, sizeof *c);
  c->j = j;
  c->index = index;
  c->name = str_field(j, "name");
  ck_assert_msg(c->name != NULL, "case %zu has no name", index);
  const json_t *expected = json_object_get(j, "expected");
  ck_assert_msg(json_is_object(expected), "%s: no expected", c->name);
  c->x = tensor_from_json(c->name, json_object_get(j, "input"), 1);
  c->y = tensor_from_json(c->name, json_object_get(expected, "output"), 0);
  c->has_weight = json_object_get(j, "weight") != NULL;
  c->has_bias = json_object_get(j, "bias") != NULL;
  c->has_running = json_object_get(j, "running_mean") != NULL;
  if (c->has_weight)
    c->weight = tensor_from_json(c->name, json_object_get(j, "weight"), 1);
  if (c->has_bias)
    c->bias = tensor_from_json(c->name, json_object_get(j, "bias"), 1);
  if (c->has_running) {
    c->rmean = tensor_from_json(c->name, json_object_get(j, "running_mean"), 1);
    c->rvar = tensor_from_json(c->name, json_object_get(j, "running_var"), 1);
  }
  /* Every statistic the fixture lists has one entry per group. */
  const json_t *rstd = json_object_get(expected, "rstd");
  ck_assert_msg(json_is_array(rstd) && json_array_size(rstd) > 0,
                "%s: expected.rstd missing", c->name);
  c->groups = json_array_size(rstd);
  c->mean = tu_doubles(c->groups);
  c->var = tu_doubles(c->groups);
  c->rstd = tu_doubles(c->groups);
  c->rms = tu_doubles(c->groups);
}

static void case_free(fx_case_t *c) {
  tensor_free(&c->x);
  tensor_free(&c->y);
  tensor_free(&c->weight);
  tensor_free(&c->bias);
  tensor_free(&c->rmean);
  tensor_free(&c->rvar);
  tu_doubles_free(c->mean, c->groups);
  tu_doubles_free(c->var, c->groups);
  tu_doubles_free(c->rstd, c->groups);
  tu_doubles_free(c->rms, c->groups);
}

static void record_failure(tally_t *t, const fx_case_t *c, const char *msg) {
  t->failures++;
  if (t->failures <= MAX_REPORTED)
    printf("torch fixtures: FAIL case %zu '%s': %s\n", c->index, c->name, msg);
  if (t->first[0] == '\0')
    snprintf(t->first, sizeof t->first, "case %zu '%s': %s", c->index, c->name,
             msg);
}

/* Relative error with an absolute floor; NaN anywhere is an infinite error. */
static double rel_err(double got, double want, double floor) {
  if (isnan(got) || isnan(want))
    return INFINITY;
  if (got == want)
    return 0.0;
  return fabs(got - want) / fmax(fabs(want), floor);
}

/* Compares n values, from tensor t or else from arr, with `want` (a JSON
 * array, or a tensor object's data); raises *worst, records mismatches. */
static void compare(tally_t *tally, const fx_case_t *c, const char *what,
                    const json_t *want, const norm_tensor_t *t,
                    const double *arr, size_t n, double floor, double *worst) {
  char msg[300];
  if (json_is_object(want))
    want = json_object_get(want, "data");
  if (!json_is_array(want) || json_array_size(want) != n) {
    snprintf(msg, sizeof msg, "%s: expected %zu values, fixture has %zu", what,
             n, json_array_size(want));
    record_failure(tally, c, msg);
    return;
  }
  for (size_t i = 0; i < n; i++) {
    double w = json_number_value(json_array_get(want, i));
    double g = t != NULL ? elem_get(t, i) : arr[i];
    double e = rel_err(g, w, floor);
    if (e > *worst || isnan(*worst))
      *worst = e;
    if (!(e <= REL_TOL)) {
      snprintf(msg, sizeof msg, "%s[%zu] got %.17g want %.17g (rel err %.2e)",
               what, i, g, w, e);
      record_failure(tally, c, msg);
    }
  }
}

/* Calls the case's kernel, whole or (split) as two _rows halves. */
static int run_kernel(const char *kind, fx_case_t *c, int split,
                      int64_t *ngroups) {
  const norm_tensor_t *w = c->has_weight ? &c->weight : NULL;
  const norm_tensor_t *b = c->has_bias ? &c->bias : NULL;
  norm_stats_t st = {c->mean, c->var, c->rstd, NULL};
  size_t mid = c->groups / 2; /* split: [0, mid) then [mid, groups) */
  int rc;

  if (strcmp(kind, "layer") == 0) {
    norm_layer_params_t p;
    p.normalized_ndim = normalized_ndim(c);
    p.eps = num_param(c, "eps");
    const char *v = str_param(c, "variance");
    const char *e = str_param(c, "eps_placement");
    ck_assert_msg(!strcmp(v, "biased") || !strcmp(v, "unbiased"),
                  "%s: variance %s", c->name, v);
    ck_assert_msg(!strcmp(e, "inside_sqrt") || !strcmp(e, "outside_sqrt"),
                  "%s: eps_placement %s", c->name, e);
    p.variance =
        strcmp(v, "unbiased") == 0 ? NORM_VAR_UNBIASED : NORM_VAR_BIASED;
    p.eps_placement = strcmp(e, "outside_sqrt") == 0 ? NORM_EPS_OUTSIDE_SQRT
                                                     : NORM_EPS_INSIDE_SQRT;
    *ngroups = norm_layer_groups(&c->x, &p);
    if (!split)
      return norm_layer(&c->x, w, b, &p, &c->y, &st);
    rc = mid == 0 ? NORM_OK
                  : norm_layer_rows(&c->x, w, b, &p, &c->y, &st, 0, mid);
    return rc ? rc
              : norm_layer_rows(&c->x, w, b, &p, &c->y, &st, mid, c->groups);
  }
  if (strcmp(kind, "rms") == 0) {
    norm_rms_params_t p;
    p.normalized_ndim = normalized_ndim(c);
    p.eps = num_param(c, "eps");
    st.mean = st.var = NULL;
    st.rms = c->rms;
    *ngroups = norm_rms_groups(&c->x, &p);
    if (!split)
      return norm_rms(&c->x, w, &p, &c->y, &st);
    rc = mid == 0 ? NORM_OK : norm_rms_rows(&c->x, w, &p, &c->y, &st, 0, mid);
    return rc ? rc : norm_rms_rows(&c->x, w, &p, &c->y, &st, mid, c->groups);
  }
  if (strcmp(kind, "batch") == 0) {
    norm_batch_params_t p;
    memset(&p, 0, sizeof p);
    const char *mode = str_param(c, "mode");
    ck_assert_msg(!strcmp(mode, "train") || !strcmp(mode, "eval"),
                  "%s: mode %s", c->name, mode);
    p.mode = strcmp(mode, "eval") == 0 ? NORM_EVAL : NORM_TRAIN;
    p.eps = num_param(c, "eps");
    const json_t *m =
        json_object_get(json_object_get(c->j, "params"), "momentum");
    ck_assert_msg(json_is_null(m) || json_is_number(m), "%s: momentum",
                  c->name);
    p.cumulative = json_is_null(m);
    p.momentum = p.cumulative ? 0.0 : json_number_value(m);
    /* The fixture stores torch's count before the batch; norm.h wants it
     * already incremented. */
    if (json_object_get(json_object_get(c->j, "params"),
                        "num_batches_tracked")) {
      p.num_batches_tracked = (int64_t)num_param(c, "num_batches_tracked") + 1;
      ck_assert_msg(p.num_batches_tracked ==
                        (int64_t)num_param(c, "num_batches_tracked_after"),
                    "%s: num_batches_tracked_after", c->name);
    }
    norm_tensor_t *rm = c->has_running ? &c->rmean : NULL;
    norm_tensor_t *rv = c->has_running ? &c->rvar : NULL;
    *ngroups = norm_batch_groups(&c->x);
    if (!split)
      return norm_batch(&c->x, w, b, rm, rv, &p, &c->y, &st);
    rc = mid == 0
             ? NORM_OK
             : norm_batch_rows(&c->x, w, b, rm, rv, &p, &c->y, &st, 0, mid);
    return rc ? rc
              : norm_batch_rows(&c->x, w, b, rm, rv, &p, &c->y, &st, mid,
                                c->groups);
  }
  if (strcmp(kind, "group") == 0) {
    norm_group_params_t p;
    p.num_groups = (int64_t)num_param(c, "num_groups");
    p.eps = num_param(c, "eps");
    *ngroups = norm_group_groups(&c->x, &p);
    if (!split)
      return norm_group(&c->x, w, b, &p, &c->y, &st);
    rc = mid == 0 ? NORM_OK
                  : norm_group_rows(&c->x, w, b, &p, &c->y, &st, 0, mid);
    return rc ? rc
              : norm_group_rows(&c->x, w, b, &p, &c->y, &st, mid, c->groups);
  }
  ck_assert_msg(strcmp(kind, "instance") == 0, "%s: unknown kind %s", c->name,
                kind);
  norm_instance_params_t p;
  p.eps = num_param(c, "eps");
  *ngroups = norm_instance_groups(&c->x);
  if (!split)
    return norm_instance(&c->x, w, b, &p, &c->y, &st);
  rc = mid == 0 ? NORM_OK
                : norm_instance_rows(&c->x, w, b, &p, &c->y, &st, 0, mid);
  return rc ? rc
            : norm_instance_rows(&c->x, w, b, &p, &c->y, &st, mid, c->groups);
}

static void check_case(tally_t *t, const char *kind, fx_case_t *c, int split) {
  const json_t *exp = json_object_get(c->j, "expected");
  int64_t ngroups = -1;
  char msg[300];
  int rc = run_kernel(kind, c, split, &ngroups);
  if (rc != NORM_OK) {
    snprintf(msg, sizeof msg, "kernel returned %d (%s)", rc, norm_err_name(rc));
    record_failure(t, c, msg);
    return;
  }
  if (ngroups != (int64_t)c->groups) {
    snprintf(msg, sizeof msg, "norm_%s_groups gave %lld, fixture has %zu", kind,
             (long long)ngroups, c->groups);
    record_failure(t, c, msg);
    return;
  }
  compare(t, c, "output", json_object_get(exp, "output"), &c->y, NULL,
          numel(&c->y), FLOOR_TENSOR, &t->output);
  static const char *const stat_keys[] = {"mean", "var", "rstd", "rms"};
  const double *stat_arrs[] = {c->mean, c->var, c->rstd, c->rms};
  for (size_t k = 0; k < 4; k++) {
    const json_t *want = json_object_get(exp, stat_keys[k]);
    if (want != NULL)
      compare(t, c, stat_keys[k], want, NULL, stat_arrs[k], c->groups,
              FLOOR_STATS, &t->stats);
  }
  if (json_object_get(exp, "running_mean") != NULL || c->has_running) {
    if (!c->has_running || json_object_get(exp, "running_mean") == NULL) {
      record_failure(t, c,
                     "running stats given but not expected, or the reverse");
      return;
    }
    compare(t, c, "running_mean", json_object_get(exp, "running_mean"),
            &c->rmean, NULL, numel(&c->rmean), FLOOR_TENSOR, &t->running);
    compare(t, c, "running_var", json_object_get(exp, "running_var"), &c->rvar,
            NULL, numel(&c->rvar), FLOOR_TENSOR, &t->running);
  }
}

/* Runs every case of `kind`; returns the tally. */
static tally_t run_kind(const char *kind, int split) {
  tally_t t;
  memset(&t, 0, sizeof t);
  json_t *root = load_fixtures();
  const json_t *cases = json_object_get(root, "cases");
  for (size_t i = 0; i < json_array_size(cases); i++) {
    const json_t *j = json_array_get(cases, i);
    const char *k = str_field(j, "kind");
    if (k == NULL || strcmp(k, kind) != 0)
      continue;
    fx_case_t c;
    case_load(&c, j, i);
    check_case(&t, kind, &c, split);
    case_free(&c);
    t.cases++;
  }
  json_decref(root);
  ck_assert_msg(t.cases > 0, "no %s cases in %s", kind, FIXTURE_PATH);
  return t;
}

static void report(const char *kind, const tally_t *t) {
  double worst = fmax(t->output, fmax(t->stats, t->running));
  printf("torch fixtures: %s worst rel err %.1e over %d cases (output %.1e, "
         "stats %.1e",
         kind, worst, t->cases, t->output, t->stats);
  if (strcmp(kind, "batch") == 0)
    printf(", running stats %.1e", t->running);
  printf(")\n");
  fflush(stdout);
}

static void check_kind(const char *kind, int split) {
  tally_t t = run_kind(kind, split);
  if (!split)
    report(kind, &t);
  ck_assert_msg(t.failures == 0, "%s%s: %d mismatches against torch; first: %s",
                kind, split ? " (two _rows calls)" : "", t.failures, t.first);
}

START_TEST(test_fixture_file) {
  json_t *root = load_fixtures();
  ck_assert_msg(json_is_string(json_object_get(root, "generator")) &&
                    json_is_string(json_object_get(root, "torch_version")),
                "fixture lacks generator / torch_version");
  const json_t *cases = json_object_get(root, "cases");
  int count[NKINDS] = {0};
  for (size_t i = 0; i < json_array_size(cases); i++) {
    const json_t *c = json_array_get(cases, i);
    const char *name = str_field(c, "name");
    const char *kind = str_field(c, "kind");
    ck_assert_msg(name != NULL && kind != NULL, "case %zu: name/kind", i);
    ck_assert_msg(json_is_object(json_object_get(c, "input")) &&
                      json_is_object(json_object_get(c, "params")) &&
                      json_is_object(json_object_get(
                          json_object_get(c, "expected"), "output")),
                  "case %zu '%s': input/params/expected.output", i, name);
    size_t k = 0;
    while (k < NKINDS && strcmp(kinds[k], kind) != 0)
      k++;
    ck_assert_msg(k < NKINDS, "case %zu '%s': unknown kind %s", i, name, kind);
    count[k]++;
    for (size_t j = 0; j < i; j++)
      ck_assert_msg(strcmp(name, str_field(json_array_get(cases, j), "name")),
                    "case %zu: duplicate name %s", i, name);
  }
  for (size_t k = 0; k < NKINDS; k++)
    ck_assert_msg(count[k] > 0, "no %s case in %s", kinds[k], FIXTURE_PATH);
  json_decref(root);
}
END_TEST

START_TEST(test_kind) { check_kind(kinds[_i], 0); }
END_TEST

/* ---- backward ---------------------------------------------------------------
 * "backward_cases": x, grad_output dy (and weight, running stats) through
 * norm_*_backward_rows into a float64 dx and double gradient arrays, against
 * torch.autograd's float64 gradients (or, where the case's grad_source says
 * "exact", the exact ones: see the fixture's backward_notes). Error
 * |got - want| / max(|want|, 1e-3 scale), scale the fixture's per tensor;
 * allowed BW_TOL + BW_COND_TOL * condition (the mean's rounding as it moves
 * xhat, for |mean| >> std). Run whole, and as two _rows halves with
 * gradient arrays of their own, summed. */
#define BW_TOL 1e-12
#define BW_COND_TOL 1e-14
#define BW_FLOOR 1e-3
/* Cases of at most this condition (|mean| rstd, the fixture's) count as
 * well-conditioned in the report. */
#define BW_WELL_CONDITIONED 10.0

static const char *const bw_tensors[] = {"grad_input", "grad_weight",
                                         "grad_bias"};

/* Worst errors over the cases of one kind: the well-conditioned ones per
 * tensor (all against torch), and the others (|mean| >> std) against torch
 * and against the exact gradients (their "exact", or their expected ones
 * where grad_source is "exact"). */
typedef struct {
  double worst[3], worst_ill_torch, worst_ill_exact;
  double max_condition;
  int cases, ill_cases, failures;
  char first[400];
} bw_tally_t;

typedef struct {
  fx_case_t c; /* x, weight, running stats, params */
  norm_tensor_t dy, dx;
  size_t nw;
  double *gw, *gb;
} bw_case_t;

static void bw_load(bw_case_t *b, const json_t *j, size_t index) {
  memset(b, 0, sizeof *b);
  fx_case_t *c = &b->c;
  c->j = j;
  c->index = index;
  c->name = str_field(j, "name");
  ck_assert_msg(c->name != NULL, "backward case %zu has no name", index);
  ck_assert_msg(json_is_object(json_object_get(j, "expected")) &&
                    json_is_object(json_object_get(j, "scale")) &&
                    json_is_number(json_object_get(j, "condition")),
                "%s: expected / scale / condition missing", c->name);
  c->x = tensor_from_json(c->name, json_object_get(j, "input"), 1);
  b->dy = tensor_from_json(c->name, json_object_get(j, "grad_output"), 1);
  b->dx = tensor_from_json(c->name, json_object_get(j, "grad_output"), 0);
  ck_assert_msg(b->dy.rank == c->x.rank &&
                    memcmp(b->dy.shape, c->x.shape,
                           (size_t)c->x.rank * sizeof c->x.shape[0]) == 0,
                "%s: grad_output is not of the input's shape", c->name);
  c->has_weight = json_object_get(j, "weight") != NULL;
  c->has_running = json_object_get(j, "running_mean") != NULL;
  if (c->has_weight)
    c->weight = tensor_from_json(c->name, json_object_get(j, "weight"), 1);
  if (c->has_running) {
    c->rmean = tensor_from_json(c->name, json_object_get(j, "running_mean"), 1);
    c->rvar = tensor_from_json(c->name, json_object_get(j, "running_var"), 1);
  }
}

static void bw_free(bw_case_t *b) {
  tensor_free(&b->c.x);
  tensor_free(&b->c.weight);
  tensor_free(&b->c.rmean);
  tensor_free(&b->c.rvar);
  tensor_free(&b->dy);
  tensor_free(&b->dx);
  if (b->gw) tu_doubles_free(b->gw, b->nw);
  if (b->gb) tu_doubles_free(b->gb, b->nw);
}

/* The case's backward on groups [lo, hi) into b->dx, adding into gw and gb
 * (gb NULL for rms); *ngroups and b->nw (the gradient arrays' length) from
 * the case's kind. */
static int bw_run(const char *kind, bw_case_t *b, size_t lo, size_t hi,
                  double *gw, double *gb, int64_t *ngroups) {
  fx_case_t *c = &b->c;
  const norm_tensor_t *w = c->has_weight ? &c->weight : NULL;
  norm_grads_t gr = {gw, gb};
  if (strcmp(kind, "layer") == 0 || strcmp(kind, "rms") == 0) {
    int nd = normalized_ndim(c);
    b->nw = 1;
    for (int i = c->x.rank - nd; i < c->x.rank; i++)
      b->nw *= (size_t)c->x.shape[i];
    if (strcmp(kind, "rms") == 0) {
      norm_rms_params_t p = {nd, num_param(c, "eps")};
      *ngroups = norm_rms_groups(&c->x, &p);
      gr.bias = NULL;
      return hi == 0 ? NORM_OK
                     : norm_rms_backward_rows(&c->x, &b->dy, w, &p, &b->dx, &gr,
                                              NULL, lo, hi);
    }
    norm_layer_params_t p;
    p.normalized_ndim = nd;
    p.eps = num_param(c, "eps");
    p.variance = strcmp(str_param(c, "variance"), "unbiased") == 0
                     ? NORM_VAR_UNBIASED
                     : NORM_VAR_BIASED;
    p.eps_placement = strcmp(str_param(c, "eps_placement"), "outside_sqrt") == 0
                          ? NORM_EPS_OUTSIDE_SQRT
                          : NORM_EPS_INSIDE_SQRT;
    *ngroups = norm_layer_groups(&c->x, &p);
    return hi == 0 ? NORM_OK
                   : norm_layer_backward_rows(&c->x, &b->dy, w, &p, &b->dx, &gr,
                                              NULL, lo, hi);
  }
  b->nw = (size_t)c->x.shape[1];
  if (strcmp(kind, "batch") == 0) {
    norm_batch_params_t p;
    memset(&p, 0, sizeof p);
    p.mode = strcmp(str_param(c, "mode"), "eval") == 0 ? NORM_EVAL : NORM_TRAIN;
    p.eps = num_param(c, "eps");
    p.momentum = num_param(c, "momentum");
    const norm_tensor_t *rm = c->has_running ? &c->rmean : NULL;
    const norm_tensor_t *rv = c->has_running ? &c->rvar : NULL;
    *ngroups = norm_batch_groups(&c->x);
    return hi == 0 ? NORM_OK
                   : norm_batch_backward_rows(&c->x, &b->dy, w, rm, rv, &p,
                                              &b->dx, &gr, NULL, lo, hi);
  }
  if (strcmp(kind, "group") == 0) {
    norm_group_params_t p = {(int64_t)num_param(c, "num_groups"),
                             num_param(c, "eps")};
    *ngroups = norm_group_groups(&c->x, &p);
    return hi == 0 ? NORM_OK
                   : norm_group_backward_rows(&c->x, &b->dy, w, &p, &b->dx, &gr,
                                              NULL, lo, hi);
  }
  ck_assert_msg(strcmp(kind, "instance") == 0, "%s: unknown kind %s", c->name,
                kind);
  norm_instance_params_t p = {num_param(c, "eps")};
  *ngroups = norm_instance_groups(&c->x);
  return hi == 0 ? NORM_OK
                 : norm_instance_backward_rows(&c->x, &b->dy, w, &p, &b->dx,
                                               &gr, NULL, lo, hi);
}

static void bw_failure(bw_tally_t *t, const bw_case_t *b, const char *msg) {
  t->failures++;
  if (t->failures <= MAX_REPORTED)
    printf("torch fixtures: FAIL backward case %zu '%s': %s\n", b->c.index,
           b->c.name, msg);
  if (t->first[0] == '\0')
    snprintf(t->first, sizeof t->first, "case %zu '%s': %s", b->c.index,
             b->c.name, msg);
}

/* n values (from dx, or else arr) against expected tensor k of the case
 * (with `exact`, against the case's "exact" one, when it has it). */
static void bw_compare_to(bw_tally_t *t, const bw_case_t *b, int k,
                          const norm_tensor_t *dx, const double *arr, size_t n,
                          const char *how, int exact) {
  const json_t *j = b->c.j;
  const json_t *want = json_object_get(
      json_object_get(j, exact ? "exact" : "expected"), bw_tensors[k]);
  if (want == NULL) return; /* no weight: torch has no such gradient */
  if (json_is_object(want)) want = json_object_get(want, "data");
  char msg[300];
  if (!json_is_array(want) || json_array_size(want) != n) {
    snprintf(msg, sizeof msg, "%s: expected %zu values, fixture has %zu",
             bw_tensors[k], n, json_array_size(want));
    bw_failure(t, b, msg);
    return;
  }
  double cond = json_number_value(json_object_get(j, "condition"));
  double scale = json_number_value(
      json_object_get(json_object_get(j, "scale"), bw_tensors[k]));
  double tol = BW_TOL + BW_COND_TOL * cond;
  for (size_t i = 0; i < n; i++) {
    double w = json_number_value(json_array_get(want, i));
    double g = dx != NULL ? elem_get(dx, i) : arr[i];
    double e = g == w ? 0.0 : fabs(g - w) / fmax(fabs(w), BW_FLOOR * scale);
    if (isnan(e)) e = INFINITY;
    const char *src = str_field(j, "grad_source");
    int vs_exact = exact || (src != NULL && strcmp(src, "exact") == 0);
    double *worst = cond <= BW_WELL_CONDITIONED ? &t->worst[k]
                    : vs_exact                  ? &t->worst_ill_exact
                                                : &t->worst_ill_torch;
    if (e > *worst) *worst = e;
    if (!(e <= tol)) {
      snprintf(msg, sizeof msg,
               "%s%s[%zu] got %.17g want %.17g (rel err %.2e, allowed %.1e)",
               bw_tensors[k], how, i, g, w, e, tol);
      bw_failure(t, b, msg);
    }
  }
}

static void bw_compare(bw_tally_t *t, const bw_case_t *b, int k,
                       const norm_tensor_t *dx, const double *arr, size_t n,
                       const char *how) {
  bw_compare_to(t, b, k, dx, arr, n, how, 0);
  if (json_object_get(b->c.j, "exact") != NULL)
    bw_compare_to(t, b, k, dx, arr, n, how, 1);
}

static void bw_check_case(bw_tally_t *t, const char *kind, bw_case_t *b) {
  int64_t ng = -1;
  char msg[300];
  bw_run(kind, b, 0, 0, NULL, NULL, &ng); /* sizes only */
  if (ng < 1) {
    snprintf(msg, sizeof msg, "norm_%s_groups gave %lld", kind, (long long)ng);
    bw_failure(t, b, msg);
    return;
  }
  size_t nw = b->nw, groups = (size_t)ng, mid = groups / 2;
  int rms = strcmp(kind, "rms") == 0;
  b->gw = tu_doubles(nw);
  b->gb = tu_doubles(nw);
  int rc = bw_run(kind, b, 0, groups, b->gw, rms ? NULL : b->gb, &ng);
  if (rc != NORM_OK) {
    snprintf(msg, sizeof msg, "backward returned %d (%s)", rc,
             norm_err_name(rc));
    bw_failure(t, b, msg);
    return;
  }
  bw_compare(t, b, 0, &b->dx, NULL, numel(&b->dx), "");
  bw_compare(t, b, 1, NULL, b->gw, nw, "");
  if (!rms) bw_compare(t, b, 2, NULL, b->gb, nw, "");
  /* two _rows halves, gradient arrays of their own, summed */
  double *w2 = tu_doubles(nw), *b2 = tu_doubles(nw);
  double *w3 = tu_doubles(nw), *b3 = tu_doubles(nw);
  memset(b->dx.data, 0, numel(&b->dx) * sizeof(double));
  rc = bw_run(kind, b, 0, mid, w2, rms ? NULL : b2, &ng);
  if (rc == NORM_OK)
    rc = bw_run(kind, b, mid, groups, w3, rms ? NULL : b3, &ng);
  if (rc != NORM_OK) {
    snprintf(msg, sizeof msg, "backward halves returned %d (%s)", rc,
             norm_err_name(rc));
    bw_failure(t, b, msg);
  } else {
    for (size_t i = 0; i < nw; i++) w2[i] += w3[i], b2[i] += b3[i];
    bw_compare(t, b, 0, &b->dx, NULL, numel(&b->dx), " (halves)");
    bw_compare(t, b, 1, NULL, w2, nw, " (halves)");
    if (!rms) bw_compare(t, b, 2, NULL, b2, nw, " (halves)");
  }
  tu_doubles_free(w2, nw), tu_doubles_free(b2, nw);
  tu_doubles_free(w3, nw), tu_doubles_free(b3, nw);
  double cond = json_number_value(json_object_get(b->c.j, "condition"));
  if (cond > BW_WELL_CONDITIONED) t->ill_cases++;
  if (cond > t->max_condition) t->max_condition = cond;
}

START_TEST(test_backward_kind) {
  const char *kind = kinds[_i];
  bw_tally_t t;
  memset(&t, 0, sizeof t);
  json_t *root = load_fixtures();
  const json_t *cases = json_object_get(root, "backward_cases");
  ck_assert_msg(json_is_array(cases), "%s: no \"backward_cases\" array",
                FIXTURE_PATH);
  for (size_t i = 0; i < json_array_size(cases); i++) {
    const json_t *j = json_array_get(cases, i);
    const char *k = str_field(j, "kind");
    if (k == NULL || strcmp(k, kind) != 0) continue;
    bw_case_t b;
    bw_load(&b, j, i);
    bw_check_case(&t, kind, &b);
    bw_free(&b);
    t.cases++;
  }
  json_decref(root);
  ck_assert_msg(t.cases > 0, "no %s backward cases in %s", kind, FIXTURE_PATH);
  printf("torch fixtures: %s backward worst rel err %.1e over %d "
         "well-conditioned cases (grad_input %.1e, grad_weight %.1e",
         kind, fmax(t.worst[0], fmax(t.worst[1], t.worst[2])),
         t.cases - t.ill_cases, t.worst[0], t.worst[1]);
  if (strcmp(kind, "rms") != 0) printf(", grad_bias %.1e", t.worst[2]);
  printf(")");
  if (t.ill_cases > 0)
    printf("; %d ill-conditioned (|mean| rstd up to %.1e: |mean| >> std, "
           "constant groups): %.1e vs torch, %.1e vs the exact gradients",
           t.ill_cases, t.max_condition, t.worst_ill_torch, t.worst_ill_exact);
  printf("\n");
  fflush(stdout);
  ck_assert_msg(t.failures == 0, "%s backward: %d mismatches; first: %s", kind,
                t.failures, t.first);
}
END_TEST

START_TEST(test_kind_rows) { check_kind(kinds[_i], 1); }
END_TEST

Suite *torch_fixtures_suite(void) {
  Suite *s = suite_create("torch_fixtures");
  TCase *fixture = tcase_create("Fixture");
  tcase_add_test(fixture, test_fixture_file);
  suite_add_tcase(s, fixture);
  TCase *core = tcase_create("Core");
  tcase_add_loop_test(core, test_kind, 0, (int)NKINDS);
  suite_add_tcase(s, core);
  TCase *rows = tcase_create("Rows");
  tcase_add_loop_test(rows, test_kind_rows, 0, (int)NKINDS);
  suite_add_tcase(s, rows);
  TCase *backward = tcase_create("Backward");
  tcase_add_loop_test(backward, test_backward_kind, 0, (int)NKINDS);
  suite_add_tcase(s, backward);
  return s;
}
