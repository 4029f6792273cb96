/* check_problem.c -- the problem codes (server/problem.h's PROBLEM_MAP and
 * core's NORM_ERRNO_MAP) against the ProblemCode enum of api/openapi.yaml,
 * both ways: every code a /v1 problem document can carry is in the enum,
 * and every code of the enum is one normd sends. Also what problem_set and
 * problem_from_norm record. */
#include <check.h>
#include <string.h>

#include "norm.h"
#include "problem.h"
#include "spec.h"
#include "suites.h"

static const int core_errors[] = {
#define CORE_CODE_(name, code, short_name, msg) code,
    NORM_ERRNO_MAP(CORE_CODE_)
#undef CORE_CODE_
};
#define NCORE (sizeof core_errors / sizeof core_errors[0])

/* The codes /v1 may send: the list's v1 rows and core's client errors. */
static void sent_codes(names_t *out) {
  for (int id = 0; id < PROBLEM_COUNT; id++)
    if (problem_on_v1((problem_code_t)id) &&
        !names_has(out, problem_code((problem_code_t)id)))
      names_add(out, problem_code((problem_code_t)id),
                strlen(problem_code((problem_code_t)id)));
  for (size_t k = 0; k < NCORE; k++)
    if (core_errors[k] != NORM_OK && !problem_norm_internal(core_errors[k]) &&
        !names_has(out, norm_err_name(core_errors[k])))
      names_add(out, norm_err_name(core_errors[k]),
                strlen(norm_err_name(core_errors[k])));
}

START_TEST(test_codes_match_spec) {
  char *text = spec_text();
  static names_t spec, sent;
  spec.n = sent.n = 0;
  spec_schema_enum(text, "ProblemCode", &spec);
  sent_codes(&sent);
  ck_assert_int_gt(spec.n, 0);
  for (int i = 0; i < sent.n; i++)
    ck_assert_msg(names_has(&spec, sent.name[i]),
                  "normd sends %s, which the ProblemCode enum of %s lacks",
                  sent.name[i], SPEC_PATH);
  for (int i = 0; i < spec.n; i++)
    ck_assert_msg(names_has(&sent, spec.name[i]),
                  "%s lists %s, which no row of PROBLEM_MAP (server/problem.h) "
                  "nor core's NORM_ERRNO_MAP sends on /v1",
                  SPEC_PATH, spec.name[i]);
  ck_assert_int_eq(spec.n, sent.n);
  free(text);
}
END_TEST

/* A code standing twice says the same status each time it is a core code
 * too (unknown_dtype: 422 both ways). */
START_TEST(test_list_agrees_with_core) {
  for (int id = 0; id < PROBLEM_COUNT; id++) {
    const char *code = problem_code((problem_code_t)id);
    ck_assert_int_ge(problem_status((problem_code_t)id), 400);
    ck_assert_int_le(problem_status((problem_code_t)id), 599);
    ck_assert_str_ne(problem_title(problem_status((problem_code_t)id)), "Error");
    for (size_t k = 1; k < NCORE; k++)
      if (strcmp(norm_err_name(core_errors[k]), code) == 0)
        ck_assert_int_eq(problem_status((problem_code_t)id), 422);
  }
}
END_TEST

START_TEST(test_set_records_the_row) {
  problem_t p;
  memset(&p, 0, sizeof p);
  ck_assert_int_eq(problem_set(&p, PROBLEM_BINARY_LEFT_OVER, "input", "%d left", 3), -1);
  ck_assert_int_eq(p.status, 400);
  ck_assert_str_eq(p.code, "binary_size_mismatch");
  ck_assert_str_eq(p.field, "input");
  ck_assert_str_eq(p.detail, "3 left");
  /* the first problem wins */
  problem_set(&p, PROBLEM_OUT_OF_MEMORY, NULL, "out of memory");
  ck_assert_int_eq(p.status, 400);
  memset(&p, 0, sizeof p);
  problem_set(&p, PROBLEM_BINARY_SIZE_MISMATCH, NULL, "x");
  ck_assert_int_eq(p.status, 422);
  ck_assert_str_eq(p.code, "binary_size_mismatch");
  memset(&p, 0, sizeof p);
  problem_from_norm(&p, NORM_E_SHAPE, "normalized_shape");
  ck_assert_int_eq(p.status, 422);
  ck_assert_str_eq(p.code, "shape_mismatch");
  memset(&p, 0, sizeof p);
  problem_from_norm(&p, NORM_E_NULL, NULL);
  ck_assert_int_eq(p.status, 500);
}
END_TEST

Suite *problem_suite(void) {
  Suite *s = suite_create("problem");
  TCase *tc = tcase_create("Core");
  tcase_add_test(tc, test_codes_match_spec);
  tcase_add_test(tc, test_list_agrees_with_core);
  tcase_add_test(tc, test_set_records_the_row);
  suite_add_tcase(s, tc);
  return s;
}
