/* check_torch_family.c -- Lp, local response and mean-variance
 * normalization, forward and backward, against the "family_cases" of
 * tests/fixtures/torch_fixtures.json: torch's F.normalize and
 * F.local_response_norm, and ONNX's LRN and MeanVarianceNormalization
 * written in torch from their definitions (gen_torch_fixtures.py; its
 * "family_notes" describe the format). Prints the worst relative error per
 * norm, forward and backward. Run from the repository root.
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "testutil.h"

#define FIXTURE_PATH "tests/fixtures/torch_fixtures.json"
#define TOL64 1e-12
#define TOL32 1e-5
#define FLOOR_OUT 1e-2
#define TOL_STATS 1e-12
#define TOL_GRAD 1e-10
#define FLOOR_GRAD 1e-3

static const char *const kinds[] = {"lp", "lrn", "mvn"};

typedef struct {
  double out, out32, stats, grad; /* out: float64 cases */
  int cases, grad_cases, failures;
  char first[400];
} tally_t;

static void mismatch(tally_t *t, const char *name, const char *fmt, double got,
                 double want, size_t i) {
  t->failures++;
  if (t->first[0] == '\0')
    snprintf(t->first, sizeof t->first, "%s: %s[%zu] got %.17g want %.17g",
             name, fmt, i, got, want);
}

/* {"shape", "dtype", "data"} as a guarded tensor (float32 or float64). */
static norm_tensor_t load_tensor(const char *name, const json_t *j) {
  const json_t *shape = json_object_get(j, "shape");
  const json_t *data = json_object_get(j, "data");
  const char *dt = json_string_value(json_object_get(j, "dtype"));
  ck_assert_msg(json_is_array(shape) && json_is_array(data) && dt,
                "%s: bad tensor", name);
  int64_t dims[NORM_MAX_RANK];
  int rank = (int)json_array_size(shape);
  ck_assert(rank >= 1 && rank <= NORM_MAX_RANK);
  for (int i = 0; i < rank; i++)
    dims[i] = json_integer_value(json_array_get(shape, (size_t)i));
  norm_tensor_t t =
      tu_mk(strcmp(dt, "float32") == 0 ? NORM_F32 : NORM_F64, rank, dims);
  ck_assert_msg(json_array_size(data) == tu_numel(&t), "%s: data size", name);
  for (size_t i = 0; i < tu_numel(&t); i++)
    norm_tensor_set(&t, i, json_number_value(json_array_get(data, i)));
  return t;
}

static double param(const json_t *c, const char *key) {
  const json_t *v = json_object_get(json_object_get(c, "params"), key);
  ck_assert_msg(json_is_number(v), "params.%s", key);
  return json_number_value(v);
}

/* A list of dims as axes bits. */
static unsigned axes_bits(const json_t *c, const char *key) {
  const json_t *a = json_object_get(json_object_get(c, "params"), key);
  unsigned bits = 0;
  for (size_t i = 0; i < json_array_size(a); i++)
    bits |= 1u << json_integer_value(json_array_get(a, i));
  return bits;
}

/* values against a JSON array (or tensor object) of want, |got - want| /
 * max(|want|, floor) <= tol; raises *worst. */
static void compare(tally_t *t, const char *name, const char *what,
                    const json_t *want, const norm_tensor_t *ten,
                    const double *arr, size_t n, double tol, double floor,
                    double *worst) {
  if (json_is_object(want)) want = json_object_get(want, "data");
  if (json_array_size(want) != n) {
    mismatch(t, name, what, (double)n, (double)json_array_size(want), 0);
    return;
  }
  for (size_t i = 0; i < n; i++) {
    double w = json_number_value(json_array_get(want, i));
    double g = ten ? norm_tensor_get(ten, i) : arr[i];
    double e = g == w ? 0.0 : fabs(g - w) / fmax(fabs(w), floor);
    if (isnan(e)) e = INFINITY;
    if (e > *worst) *worst = e;
    if (!(e <= tol)) mismatch(t, name, what, g, w, i);
  }
}

/* The largest |v| of a tensor object's data. */
static double max_abs(const json_t *j) {
  const json_t *d = json_object_get(j, "data");
  double m = 0.0;
  for (size_t i = 0; i < json_array_size(d); i++)
    m = fmax(m, fabs(json_number_value(json_array_get(d, i))));
  return m;
}

static void run_case(tally_t *t, const char *kind, const json_t *c) {
  const char *name = json_string_value(json_object_get(c, "name"));
  const json_t *exp = json_object_get(c, "expected");
  norm_tensor_t x = load_tensor(name, json_object_get(c, "input"));
  norm_tensor_t y = tu_mk(x.dtype, x.rank, x.shape);
  size_t n = tu_numel(&x);
  const json_t *gy = json_object_get(c, "grad_output");
  norm_tensor_t dy, dx;
  memset(&dy, 0, sizeof dy), memset(&dx, 0, sizeof dx);
  if (gy) {
    dy = load_tensor(name, gy);
    dx = tu_mk(NORM_F64, x.rank, x.shape);
  }
  double tol = x.dtype == NORM_F64 ? TOL64 : TOL32;
  double *aux = tu_doubles(3 * n); /* stats: at most 3 per element */
  int rc, brc = NORM_OK;
  size_t ng = 0;
  if (strcmp(kind, "lp") == 0) {
    const json_t *pj = json_object_get(json_object_get(c, "params"), "p");
    norm_lp_params_t p = {json_is_string(pj) ? INFINITY : json_number_value(pj),
                          param(c, "eps"), axes_bits(c, "dim")};
    ng = (size_t)norm_lp_groups(&x, &p);
    rc = norm_lp_rows(&x, &p, &y, aux, 0, ng);
    if (rc == NORM_OK)
      compare(t, name, "norms", json_object_get(exp, "norms"), NULL, aux, ng,
              TOL_STATS, 1e-300, &t->stats);
    if (gy) brc = norm_lp_backward_rows(&x, &dy, &p, &dx, NULL, 0, ng);
  } else if (strcmp(kind, "lrn") == 0) {
    const char *conv = json_string_value(
        json_object_get(json_object_get(c, "params"), "convention"));
    norm_lrn_params_t p = {(int64_t)param(c, "size"), param(c, "alpha"),
                           param(c, "beta"), param(c, "k"),
                           strcmp(conv, "onnx") == 0 ? NORM_LRN_ONNX
                                                     : NORM_LRN_TORCH};
    ng = (size_t)norm_lrn_groups(&x);
    rc = norm_lrn_rows(&x, &p, &y, aux, 0, ng);
    if (rc == NORM_OK)
      compare(t, name, "square_sum", json_object_get(exp, "square_sum"), NULL,
              aux, n, TOL_STATS, 1e-300, &t->stats);
    if (gy) brc = norm_lrn_backward_rows(&x, &dy, &p, &dx, 0, ng);
  } else {
    norm_mvn_params_t p = {param(c, "eps"), axes_bits(c, "axes")};
    ng = (size_t)norm_mvn_groups(&x, &p);
    norm_stats_t st = {aux, aux + ng, aux + 2 * ng, NULL};
    rc = norm_mvn_rows(&x, &p, &y, &st, 0, ng);
    static const char *const keys[] = {"mean", "var", "rstd"};
    for (int k = 0; rc == NORM_OK && k < 3; k++)
      compare(t, name, keys[k], json_object_get(exp, keys[k]), NULL,
              aux + (size_t)k * ng, ng, TOL_STATS, 1e-300, &t->stats);
    if (gy) brc = norm_mvn_backward_rows(&x, &dy, &p, &dx, NULL, 0, ng);
  }
  if (rc != NORM_OK || brc != NORM_OK) {
    mismatch(t, name, "return code", rc, brc, 0);
  } else {
    compare(t, name, "output", json_object_get(exp, "output"), &y, NULL, n,
            tol, FLOOR_OUT, x.dtype == NORM_F64 ? &t->out : &t->out32);
    if (gy) {
      const json_t *gi = json_object_get(exp, "grad_input");
      compare(t, name, "grad_input", gi, &dx, NULL, n, TOL_GRAD,
              FLOOR_GRAD * max_abs(gi), &t->grad);
      t->grad_cases++;
    }
  }
  t->cases++;
  tu_doubles_free(aux, 3 * n);
  tu_tensor_free(&x), tu_tensor_free(&y);
  if (gy) tu_tensor_free(&dy), tu_tensor_free(&dx);
}

START_TEST(test_family_kind) {
  const char *kind = kinds[_i];
  json_error_t err;
  json_t *root = json_load_file(FIXTURE_PATH, 0, &err);
  ck_assert_msg(root != NULL, "%s:%d: %s", FIXTURE_PATH, err.line, err.text);
  const json_t *cases = json_object_get(root, "family_cases");
  ck_assert_msg(json_is_array(cases), "%s: no family_cases", FIXTURE_PATH);
  tally_t t;
  memset(&t, 0, sizeof t);
  for (size_t i = 0; i < json_array_size(cases); i++) {
    const json_t *c = json_array_get(cases, i);
    const char *k = json_string_value(json_object_get(c, "kind"));
    if (k != NULL && strcmp(k, kind) == 0) run_case(&t, kind, c);
  }
  json_decref(root);
  ck_assert_msg(t.cases > 0, "no %s family cases", kind);
  printf("torch fixtures: %s worst rel err %.1e over %d cases (output %.1e "
         "float64, %.1e float32; stats %.1e); %s backward worst rel err %.1e "
         "over %d float64 cases\n",
         kind, fmax(fmax(t.out, t.out32), t.stats), t.cases, t.out, t.out32,
         t.stats, kind, t.grad, t.grad_cases);
  fflush(stdout);
  ck_assert_msg(t.failures == 0, "%s: %d mismatches; first: %s", kind,
                t.failures, t.first);
}
END_TEST

Suite *torch_family_suite(void) {
  Suite *s = suite_create("torch_family");
  TCase *core = tcase_create("Core");
  tcase_add_loop_test(core, test_family_kind, 0, 3);
  suite_add_tcase(s, core);
  return s;
}
