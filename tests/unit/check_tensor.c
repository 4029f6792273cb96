/* check_tensor.c -- tensor descriptor validation: ranks, negative and zero
 * dims, overflow-safe element and byte counts, element access. */
#include <float.h>
#include <math.h>

#include "testutil.h"

START_TEST(test_sizes) {
  norm_tensor_t t = {.dtype = NORM_F16, .rank = 3, .shape = {2, 3, 4}};
  size_t numel = 0, nbytes = 0;
  ck_assert_int_eq(norm_tensor_check(&t, &numel, &nbytes), NORM_OK);
  ck_assert_uint_eq(numel, 24);
  ck_assert_uint_eq(nbytes, 48);
  ck_assert_int_eq(norm_tensor_check(&t, NULL, NULL), NORM_OK);
}
END_TEST

START_TEST(test_errors) {
  norm_tensor_t t = {.dtype = NORM_F32, .rank = 2, .shape = {2, 3}};
  ck_assert_int_eq(norm_tensor_check(NULL, NULL, NULL), NORM_E_NULL);
  t.rank = 0;
  ck_assert_int_eq(norm_tensor_check(&t, NULL, NULL), NORM_E_RANK);
  t.rank = 9;
  ck_assert_int_eq(norm_tensor_check(&t, NULL, NULL), NORM_E_RANK);
  t.rank = 2;
  t.dtype = (norm_dtype_t)17;
  ck_assert_int_eq(norm_tensor_check(&t, NULL, NULL), NORM_E_DTYPE);
  t.dtype = NORM_F32;
  t.shape[1] = -3;
  ck_assert_int_eq(norm_tensor_check(&t, NULL, NULL), NORM_E_DIM);
  t.shape[0] = 0; /* negative wins over zero: both are reported as distinct */
  ck_assert_int_eq(norm_tensor_check(&t, NULL, NULL), NORM_E_DIM);
  t.shape[1] = 3;
  ck_assert_int_eq(norm_tensor_check(&t, NULL, NULL), NORM_E_EMPTY);
}
END_TEST

START_TEST(test_overflow) {
  norm_tensor_t t = {.dtype = NORM_F64, .rank = 2,
                     .shape = {INT64_C(1) << 32, INT64_C(1) << 32}};
  ck_assert_int_eq(norm_tensor_check(&t, NULL, NULL), NORM_E_OVERFLOW);
  /* element count fits, byte count does not */
  t.rank = 1;
  t.shape[0] = INT64_C(1) << 61;
  ck_assert_int_eq(norm_tensor_check(&t, NULL, NULL), NORM_E_OVERFLOW);
  t.shape[0] = INT64_MAX;
  ck_assert_int_eq(norm_tensor_check(&t, NULL, NULL), NORM_E_OVERFLOW);
  /* eight dims whose product wraps to a small number mod 2^64 */
  t.rank = 8;
  for (int i = 0; i < 8; i++) t.shape[i] = INT64_C(1) << 8;
  ck_assert_int_eq(norm_tensor_check(&t, NULL, NULL), NORM_E_OVERFLOW);
  t.dtype = NORM_F32;
  t.rank = 1;
  t.shape[0] = (int64_t)(PTRDIFF_MAX / 4);
  ck_assert_int_eq(norm_tensor_check(&t, NULL, NULL), NORM_OK);
  t.shape[0] += 1;
  ck_assert_int_eq(norm_tensor_check(&t, NULL, NULL), NORM_E_OVERFLOW);
}
END_TEST

START_TEST(test_get_set) {
  for (int d = 0; d < NORM_DTYPE_COUNT; d++) {
    norm_tensor_t t = tu_tensor((norm_dtype_t)d, 1, (int64_t)4);
    norm_tensor_set(&t, 0, 1.5);
    norm_tensor_set(&t, 1, -INFINITY);
    norm_tensor_set(&t, 2, NAN);
    norm_tensor_set(&t, 3, 0.25);
    ck_assert(norm_tensor_get(&t, 0) == 1.5);
    ck_assert(norm_tensor_get(&t, 1) == -INFINITY);
    ck_assert(isnan(norm_tensor_get(&t, 2)));
    ck_assert(norm_tensor_get(&t, 3) == 0.25);
    tu_tensor_free(&t);
  }
}
END_TEST

Suite *tensor_suite(void) {
  Suite *s = suite_create("tensor");
  TCase *core = tcase_create("Core");
  tcase_add_test(core, test_sizes);
  tcase_add_test(core, test_get_set);
  suite_add_tcase(s, core);
  TCase *limits = tcase_create("Limits");
  tcase_add_test(limits, test_errors);
  tcase_add_test(limits, test_overflow);
  suite_add_tcase(s, limits);
  return s;
}
