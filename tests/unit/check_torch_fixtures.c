/* check_torch_fixtures.c -- every core kernel against PyTorch, on the cases
 * in tests/fixtures/torch_fixtures.json (written by gen_torch_fixtures.py;
 * its "notes" describe the format). Prints the worst relative error per kind,
 * the figure quoted in release notes. Reads the fixture by a path relative to
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
  return s;
}
