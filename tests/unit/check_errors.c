/* check_errors.c -- the error list: every code has a distinct name and a
 * message, and unknown codes are named as such. */
#include <string.h>

#include "testutil.h"

static const int all_codes[] = {
#define CODE_(name, code, short_name, msg) code,
    NORM_ERRNO_MAP(CODE_)
#undef CODE_
};
enum { NCODES = sizeof all_codes / sizeof all_codes[0] };

START_TEST(test_names_distinct) {
  for (int i = 0; i < NCODES; i++) {
    ck_assert_int_le(all_codes[i], 0);
    ck_assert_str_ne(norm_strerror(all_codes[i]), "unknown error");
    for (int j = i + 1; j < NCODES; j++) {
      ck_assert_int_ne(all_codes[i], all_codes[j]);
      ck_assert_str_ne(norm_err_name(all_codes[i]), norm_err_name(all_codes[j]));
    }
  }
}
END_TEST

START_TEST(test_unknown) {
  ck_assert_str_eq(norm_strerror(12345), "unknown error");
  ck_assert_str_eq(norm_err_name(-999), "unknown_error");
  ck_assert_str_eq(norm_err_name(NORM_OK), "ok");
  ck_assert_str_eq(norm_err_name(NORM_E_GROUPS), "bad_num_groups");
}
END_TEST

Suite *errors_suite(void) {
  Suite *s = suite_create("errors");
  TCase *tc = tcase_create("Core");
  tcase_add_test(tc, test_names_distinct);
  tcase_add_test(tc, test_unknown);
  suite_add_tcase(s, tc);
  return s;
}
