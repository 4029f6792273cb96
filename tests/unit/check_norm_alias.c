/* check_norm_alias.c -- every normalization with y aliasing x (the same
 * dtype) gives the out-of-place output and statistics bit for bit, at sizes
 * that reach the vector loops (the float-lane bfloat16 and float32 apply
 * among them) and their scalar tails. server/compute.c computes in place
 * whenever nothing reads the input afterwards. */
#include <stdlib.h>
#include <string.h>

#include "norm.h"
#include "suites.h"
#include "testutil.h"

enum { LAYER, RMS, BATCH_TRAIN, BATCH_EVAL, GROUP, INSTANCE, NOPS };
static const char *const op_names[NOPS] = {"layer", "rms", "batch train",
                                           "batch eval", "group", "instance"};
static const norm_dtype_t dtypes[] = {NORM_F32, NORM_F64, NORM_F16, NORM_BF16};

/* (N, C, L) = (2, 4, 301): rows, channel segments and groups of 301 or more
 * elements, an odd length (a tail after every vector loop). */
static const int64_t shape[] = {2, 4, 301};

typedef struct {
  norm_tensor_t w, b, rm, rv; /* per channel, or per row element */
} params_t;

static int run(int op, const norm_tensor_t *x, const params_t *pp,
               norm_tensor_t *y, const norm_stats_t *st) {
  norm_tensor_t rm = pp->rm, rv = pp->rv; /* eval reads them only */
  switch (op) {
  case LAYER: {
    norm_layer_params_t p = {.normalized_ndim = 1, .eps = 1e-5};
    return norm_layer(x, &pp->w, &pp->b, &p, y, st);
  }
  case RMS: {
    norm_rms_params_t p = {.normalized_ndim = 1, .eps = 1e-6};
    return norm_rms(x, &pp->w, &p, y, st);
  }
  case BATCH_TRAIN:
  case BATCH_EVAL: {
    norm_batch_params_t p = {.mode = op == BATCH_EVAL ? NORM_EVAL : NORM_TRAIN,
                             .eps = 1e-5, .momentum = 0.1};
    return op == BATCH_EVAL
               ? norm_batch(x, &pp->w, &pp->b, &rm, &rv, &p, y, st)
               : norm_batch(x, &pp->w, &pp->b, NULL, NULL, &p, y, st);
  }
  case GROUP: {
    norm_group_params_t p = {.num_groups = 2, .eps = 1e-5};
    return norm_group(x, &pp->w, &pp->b, &p, y, st);
  }
  default: {
    norm_instance_params_t p = {.eps = 1e-5};
    return norm_instance(x, &pp->w, &pp->b, &p, y, st);
  }
  }
}

START_TEST(test_alias_bit_exact) {
  int op = _i / 4;
  norm_dtype_t dt = dtypes[_i % 4];
  int per_row = op == LAYER || op == RMS;
  const int64_t *pshape = per_row ? shape + 2 : shape + 1;
  params_t pp = {tu_mk(dt, 1, pshape), tu_mk(dt, 1, pshape),
                 tu_mk(NORM_F32, 1, pshape), tu_mk(NORM_F32, 1, pshape)};
  tu_fill_uniform(&pp.w, 2, 0.5, 1.5);
  tu_fill_uniform(&pp.b, 3, -0.5, 0.5);
  tu_fill_uniform(&pp.rm, 4, -1, 1);
  tu_fill_uniform(&pp.rv, 5, 0.5, 1.5);
  norm_tensor_t x = tu_mk(dt, 3, shape), y = tu_mk(dt, 3, shape);
  tu_fill_uniform(&x, 1 + (uint64_t)_i, -2, 3);
  size_t groups = 64; /* at least any op's count here */
  double *s0 = tu_doubles(4 * groups), *s1 = tu_doubles(4 * groups);
  memset(s0, 0, 4 * groups * sizeof(double)); /* not all are written */
  memset(s1, 0, 4 * groups * sizeof(double));
  norm_stats_t st0 = {s0, s0 + groups, s0 + 2 * groups, s0 + 3 * groups};
  norm_stats_t st1 = {s1, s1 + groups, s1 + 2 * groups, s1 + 3 * groups};
  ck_assert_int_eq(run(op, &x, &pp, &y, &st0), NORM_OK);
  norm_tensor_t alias = x;
  ck_assert_int_eq(run(op, &x, &pp, &alias, &st1), NORM_OK);
  ck_assert_msg(memcmp(x.data, y.data, tu_nbytes(&x)) == 0,
                "%s %s: the output in place differs", op_names[op],
                norm_dtype_name(dt));
  ck_assert_msg(memcmp(s0, s1, 4 * groups * sizeof(double)) == 0,
                "%s %s: the statistics in place differ", op_names[op],
                norm_dtype_name(dt));
  tu_doubles_free(s0, 4 * groups), tu_doubles_free(s1, 4 * groups);
  tu_tensor_free(&x), tu_tensor_free(&y);
  tu_tensor_free(&pp.w), tu_tensor_free(&pp.b);
  tu_tensor_free(&pp.rm), tu_tensor_free(&pp.rv);
}
END_TEST

Suite *norm_alias_suite(void) {
  Suite *s = suite_create("norm_alias");
  TCase *tc = tcase_create("core");
  tcase_add_loop_test(tc, test_alias_bit_exact, 0, NOPS * 4);
  suite_add_tcase(s, tc);
  return s;
}
