/* check_moments.c -- norm_moments (ROWS and CHANNELS layouts), its _rows
 * variant and norm_moments_merge, against a naive two-pass double
 * reference: count/mean/M2 per group, merging halves, empty sides and many
 * random splits back into the moments of the whole, and a large |mean|. */
#include <math.h>

#include "testutil.h"

static norm_moments_t *mom_alloc(size_t n) {
  return tu_alloc_guarded(n * sizeof(norm_moments_t));
}
static void mom_free(norm_moments_t *m, size_t n) {
  tu_free_guarded(m, n * sizeof(norm_moments_t));
}

/* Mean within tol of the reference on the scale |mean| + std; M2 relative. */
static void check_moments(const char *what, size_t g, norm_moments_t got,
                          norm_moments_t want, double tol_mean, double tol_m2) {
  double sd = want.count > 0 ? sqrt(want.m2 / want.count) : 0;
  ck_assert_msg(got.count == want.count, "%s[%zu]: count %.17g want %.17g",
                what, g, got.count, want.count);
  ck_assert_msg(fabs(got.mean - want.mean) <= tol_mean * (fabs(want.mean) + sd),
                "%s[%zu]: mean %.17g want %.17g", what, g, got.mean, want.mean);
  ck_assert_msg(fabs(got.m2 - want.m2) <= tol_m2 * want.m2,
                "%s[%zu]: m2 %.17g want %.17g", what, g, got.m2, want.m2);
}

/* ---- reference ----------------------------------------------------------- */

/* Two passes in double over x[at(i)], i < n. */
static norm_moments_t ref_strided(const norm_tensor_t *x, size_t n,
                                  size_t seg_len, size_t seg_stride,
                                  size_t first) {
  double s = 0, ss = 0;
  for (size_t i = 0; i < n; i++)
    s += norm_tensor_get(x, first + (i / seg_len) * seg_stride + i % seg_len);
  double m = s / (double)n;
  for (size_t i = 0; i < n; i++) {
    double d =
        norm_tensor_get(x, first + (i / seg_len) * seg_stride + i % seg_len) -
        m;
    ss += d * d;
  }
  norm_moments_t r = {(double)n, m, ss};
  return r;
}

/* ROWS: groups are contiguous rows of the trailing `nd` dims. */
static void ref_rows(const norm_tensor_t *x, int nd, norm_moments_t *out,
                     size_t *groups) {
  size_t row = 1, total = tu_numel(x);
  for (int i = x->rank - nd; i < x->rank; i++)
    row *= (size_t)x->shape[i];
  *groups = total / row;
  for (size_t g = 0; g < *groups; g++)
    out[g] = ref_strided(x, row, row, row, g * row);
}

/* CHANNELS: group c is x[n, c, :] for every n. */
static void ref_channels(const norm_tensor_t *x, norm_moments_t *out,
                         size_t *groups) {
  size_t N = (size_t)x->shape[0], C = (size_t)x->shape[1];
  size_t S = tu_numel(x) / (N * C);
  *groups = C;
  for (size_t c = 0; c < C; c++)
    out[c] = ref_strided(x, N * S, S, C * S, c * S);
}

static void run_moments(const norm_tensor_t *x, norm_moments_layout_t layout,
                        int nd, double tol) {
  size_t G;
  norm_moments_t ref[256];
  if (layout == NORM_MOMENTS_ROWS)
    ref_rows(x, nd, ref, &G);
  else
    ref_channels(x, ref, &G);
  ck_assert(G <= 256);
  norm_moments_params_t p = {layout, nd};
  ck_assert_int_eq(norm_moments_groups(x, &p), (int64_t)G);
  norm_moments_t *out = mom_alloc(G);
  EXPECT_RC(norm_moments(x, &p, out), NORM_OK);
  for (size_t g = 0; g < G; g++)
    check_moments("moments", g, out[g], ref[g], tol, tol);
  mom_free(out, G);
}

/* ---- Core ---------------------------------------------------------------- */

START_TEST(test_rows_layout) {
  norm_dtype_t dts[4] = {NORM_F32, NORM_F64, NORM_F16, NORM_BF16};
  for (int d = 0; d < 4; d++) {
    norm_tensor_t x = tu_mk(dts[d], 3, SHAPE(4, 5, 6));
    tu_fill_uniform(&x, 10 + (uint64_t)d, -3, 7);
    for (int nd = 1; nd <= 3; nd++)
      run_moments(&x, NORM_MOMENTS_ROWS, nd, 1e-12);
    tu_tensor_free(&x);
  }
  norm_tensor_t v = tu_mk(NORM_F32, 1, SHAPE(37));
  tu_fill_uniform(&v, 3, 0, 1);
  run_moments(&v, NORM_MOMENTS_ROWS, 1, 1e-12);
  tu_tensor_free(&v);
}
END_TEST

START_TEST(test_channels_layout) {
  norm_dtype_t dts[4] = {NORM_F32, NORM_F64, NORM_F16, NORM_BF16};
  for (int d = 0; d < 4; d++) {
    norm_tensor_t x = tu_mk(dts[d], 4, SHAPE(3, 5, 2, 4));
    tu_fill_uniform(&x, 20 + (uint64_t)d, -2, 1);
    run_moments(&x, NORM_MOMENTS_CHANNELS, 0, 1e-12);
    tu_tensor_free(&x);
  }
  norm_tensor_t x2 = tu_mk(NORM_F32, 2, SHAPE(9, 4));
  tu_fill_uniform(&x2, 5, -1, 1);
  run_moments(&x2, NORM_MOMENTS_CHANNELS, 0, 1e-12);
  tu_tensor_free(&x2);
  norm_tensor_t x3 = tu_mk(NORM_F64, 3, SHAPE(4, 3, 5));
  tu_fill_uniform(&x3, 6, -1, 1);
  run_moments(&x3, NORM_MOMENTS_CHANNELS, 0, 1e-12);
  tu_tensor_free(&x3);
}
END_TEST

/* One value per group: count 1, mean = x, M2 = 0. */
START_TEST(test_single_values) {
  norm_tensor_t x = tu_mk(NORM_F64, 2, SHAPE(5, 1));
  tu_fill_uniform(&x, 4, -9, 9);
  norm_moments_params_t p = {NORM_MOMENTS_ROWS, 1};
  norm_moments_t out[5];
  EXPECT_RC(norm_moments(&x, &p, out), NORM_OK);
  for (size_t g = 0; g < 5; g++) {
    ck_assert(out[g].count == 1 && out[g].m2 == 0);
    ck_assert(out[g].mean == norm_tensor_get(&x, g));
  }
  tu_tensor_free(&x);
}
END_TEST

/* Constant rows: M2 is (essentially) 0 and never negative or NaN. */
START_TEST(test_constant_rows) {
  norm_tensor_t x = tu_mk(NORM_F32, 2, SHAPE(3, 50));
  double vals[3] = {0.1, -12345.67, 3e30};
  for (size_t i = 0; i < 150; i++)
    norm_tensor_set(&x, i, vals[i / 50]);
  norm_moments_params_t p = {NORM_MOMENTS_ROWS, 1};
  norm_moments_t out[3];
  EXPECT_RC(norm_moments(&x, &p, out), NORM_OK);
  for (size_t g = 0; g < 3; g++) {
    double v = norm_tensor_get(&x, g * 50);
    ck_assert_msg(out[g].m2 >= 0 && out[g].m2 <= 1e-25 * v * v, "m2[%zu] = %g",
                  g, out[g].m2);
    ck_assert(tu_close(out[g].mean, v, 1e-15));
  }
  tu_tensor_free(&x);
}
END_TEST

/* ---- Cruel -----------------------------------------------------------------
 */

/* |mean| 1e4, std 1e-2: sum(x^2) - n * mean^2 would be off by ~1e-4. */
START_TEST(test_large_mean) {
  norm_tensor_t x = tu_mk(NORM_F32, 2, SHAPE(4, 300));
  tu_fill_uniform(&x, 7, 1e4 - 0.017, 1e4 + 0.017);
  run_moments(&x, NORM_MOMENTS_ROWS, 1, 1e-10);
  run_moments(&x, NORM_MOMENTS_ROWS, 2, 1e-10);
  tu_tensor_free(&x);
  norm_tensor_t x64 = tu_mk(NORM_F64, 3, SHAPE(6, 3, 40));
  tu_fill_uniform(&x64, 8, -1e6 - 1e-3, -1e6 + 1e-3);
  run_moments(&x64, NORM_MOMENTS_CHANNELS, 0, 1e-8);
  tu_tensor_free(&x64);
}
END_TEST

START_TEST(test_nan_isolated) {
  norm_tensor_t x = tu_mk(NORM_F32, 2, SHAPE(3, 8));
  tu_fill_uniform(&x, 9, -1, 1);
  norm_tensor_set(&x, 8 + 3, NAN);
  norm_moments_params_t p = {NORM_MOMENTS_ROWS, 1};
  norm_moments_t out[3], ref[3];
  size_t G;
  ref_rows(&x, 1, ref, &G);
  EXPECT_RC(norm_moments(&x, &p, out), NORM_OK);
  check_moments("row0", 0, out[0], ref[0], 1e-12, 1e-12);
  check_moments("row2", 2, out[2], ref[2], 1e-12, 1e-12);
  ck_assert(out[1].count == 8 && isnan(out[1].mean) && isnan(out[1].m2));
  tu_tensor_free(&x);
}
END_TEST

/* ---- Rows ---------------------------------------------------------------- */

/* Split ranges give bit-identical moments; `end` entries are enough. */
static void rows_split(const norm_tensor_t *x, norm_moments_params_t p) {
  int64_t G64 = norm_moments_groups(x, &p);
  ck_assert_int_gt(G64, 0);
  size_t G = (size_t)G64;
  norm_moments_t *whole = mom_alloc(G);
  EXPECT_RC(norm_moments(x, &p, whole), NORM_OK);
  size_t cuts[4] = {0, 1, G / 2, G - 1};
  for (int k = 3; k >= 0; k--) {
    size_t lo = cuts[k], hi = k < 3 ? cuts[k + 1] : G;
    norm_moments_t *part = mom_alloc(hi);
    for (size_t g = 0; g < hi; g++)
      part[g].count = -1;
    EXPECT_RC(norm_moments_rows(x, &p, part, lo, hi), NORM_OK);
    for (size_t g = lo; g < hi; g++)
      ck_assert_msg(memcmp(&part[g], &whole[g], sizeof part[g]) == 0,
                    "group %zu of range [%zu,%zu) differs", g, lo, hi);
    for (size_t g = 0; g < lo; g++)
      ck_assert_msg(part[g].count == -1, "range [%zu,%zu) wrote group %zu", lo,
                    hi, g);
    mom_free(part, hi);
  }
  mom_free(whole, G);
}

START_TEST(test_rows_split) {
  norm_tensor_t x = tu_mk(NORM_F32, 3, SHAPE(4, 5, 6));
  tu_fill_uniform(&x, 11, -1, 4);
  norm_moments_params_t rows = {NORM_MOMENTS_ROWS, 1};
  rows_split(&x, rows);
  rows.normalized_ndim = 2;
  rows_split(&x, rows);
  norm_moments_params_t ch = {NORM_MOMENTS_CHANNELS, 0};
  rows_split(&x, ch);
  tu_tensor_free(&x);
}
END_TEST

START_TEST(test_rows_bad_range) {
  norm_tensor_t x = tu_mk(NORM_F32, 2, SHAPE(4, 6));
  norm_moments_params_t p = {NORM_MOMENTS_ROWS, 1};
  norm_moments_t out[8];
  EXPECT_RC(norm_moments_rows(&x, &p, out, 0, 5), NORM_E_RANGE);
  EXPECT_RC(norm_moments_rows(&x, &p, out, 3, 2), NORM_E_RANGE);
  EXPECT_RC(norm_moments_rows(&x, &p, out, 5, 5), NORM_E_RANGE);
  p.layout = NORM_MOMENTS_CHANNELS;
  EXPECT_RC(norm_moments_rows(&x, &p, out, 0, 7), NORM_E_RANGE);
  EXPECT_RC(norm_moments_rows(&x, &p, out, 6, 6), NORM_OK);
  tu_tensor_free(&x);
}
END_TEST

START_TEST(test_groups_count) {
  norm_tensor_t x = {NORM_F32, 4, {2, 3, 4, 5}, NULL};
  norm_moments_params_t p = {NORM_MOMENTS_ROWS, 1};
  ck_assert_int_eq(norm_moments_groups(&x, &p), 24);
  p.normalized_ndim = 3;
  ck_assert_int_eq(norm_moments_groups(&x, &p), 2);
  p.normalized_ndim = 4;
  ck_assert_int_eq(norm_moments_groups(&x, &p), 1);
  p.layout = NORM_MOMENTS_CHANNELS;
  ck_assert_int_eq(norm_moments_groups(&x, &p), 3);
  x.rank = 1;
  ck_assert_int_eq(norm_moments_groups(&x, &p), NORM_E_CHANNELS);
  ck_assert_int_lt(norm_moments_groups(NULL, &p), 0);
}
END_TEST

/* ---- Merge --------------------------------------------------------------- */

/* A rank-1 f64 view of v[off, off + n). */
static norm_tensor_t view(double *v, size_t off, size_t n) {
  norm_tensor_t t = {NORM_F64, 1, {(int64_t)n}, v + off};
  return t;
}

static norm_moments_t moments_of(double *v, size_t off, size_t n) {
  norm_tensor_t t = view(v, off, n);
  norm_moments_params_t p = {NORM_MOMENTS_ROWS, 1};
  norm_moments_t m;
  EXPECT_RC(norm_moments(&t, &p, &m), NORM_OK);
  return m;
}

static double *random_doubles(size_t n, uint64_t seed, double lo, double hi) {
  double *v = malloc(n * sizeof *v);
  ck_assert_ptr_nonnull(v);
  for (size_t i = 0; i < n; i++)
    v[i] = tu_rand_range(&seed, lo, hi);
  return v;
}

START_TEST(test_merge_halves) {
  size_t sizes[4] = {2, 17, 400, 1001};
  for (int k = 0; k < 4; k++) {
    size_t n = sizes[k];
    double *v = random_doubles(n, 100 + (uint64_t)k, -5, 3);
    norm_tensor_t t = view(v, 0, n);
    norm_moments_t ref[1];
    size_t G;
    ref_rows(&t, 1, ref, &G);
    norm_moments_t whole = moments_of(v, 0, n);
    check_moments("whole", n, whole, ref[0], 1e-12, 1e-12);
    for (size_t cut = 1; cut < n; cut += (n + 6) / 7) {
      norm_moments_t a = moments_of(v, 0, cut), b = moments_of(v, cut, n - cut);
      norm_moments_t ab = a, ba = b;
      norm_moments_merge(&ab, &b);
      norm_moments_merge(&ba, &a);
      check_moments("a+b", cut, ab, ref[0], 1e-12, 1e-12);
      check_moments("b+a", cut, ba, ref[0], 1e-12, 1e-12);
    }
    free(v);
  }
}
END_TEST

START_TEST(test_merge_empty) {
  norm_moments_t part = {12, -3.25, 7.5};
  norm_moments_t acc = {0, 0, 0};
  norm_moments_merge(&acc, &part);
  ck_assert(memcmp(&acc, &part, sizeof acc) == 0);

  norm_moments_t empty = {0, 0, 0};
  acc = part;
  norm_moments_merge(&acc, &empty);
  ck_assert(memcmp(&acc, &part, sizeof acc) == 0);

  /* An empty side's mean and M2 are not looked at. */
  norm_moments_t junk = {0, NAN, 1e300};
  acc = part;
  norm_moments_merge(&acc, &junk);
  ck_assert(memcmp(&acc, &part, sizeof acc) == 0);
  acc = junk;
  norm_moments_merge(&acc, &part);
  ck_assert(memcmp(&acc, &part, sizeof acc) == 0);

  acc = empty;
  norm_moments_merge(&acc, &empty);
  ck_assert(acc.count == 0 && !isnan(acc.mean) && !isnan(acc.m2));
}
END_TEST

/* Merging single values one at a time is Welford's update. */
START_TEST(test_merge_singletons) {
  double *v = random_doubles(257, 5, 10, 11);
  norm_tensor_t t = view(v, 0, 257);
  norm_moments_t ref[1], acc = {0, 0, 0};
  size_t G;
  ref_rows(&t, 1, ref, &G);
  for (size_t i = 0; i < 257; i++) {
    norm_moments_t one = {1, v[i], 0};
    norm_moments_merge(&acc, &one);
  }
  check_moments("singletons", 0, acc, ref[0], 1e-12, 1e-12);
  free(v);
}
END_TEST

/* Random partitions into 2..16 pieces, merged left to right and as a random
 * tree, with empty pieces thrown in, all give the whole's moments. */
static void random_splits(double *v, size_t n, uint64_t seed, double tol_m2) {
  norm_tensor_t t = view(v, 0, n);
  norm_moments_t ref[1];
  size_t G;
  ref_rows(&t, 1, ref, &G);
  for (int trial = 0; trial < 40; trial++) {
    size_t k = 2 + tu_rand_u64(&seed) % 15, cut[17], npieces = 0;
    norm_moments_t piece[32];
    cut[0] = 0;
    for (size_t i = 1; i < k; i++)
      cut[i] = 1 + tu_rand_u64(&seed) % (n - 1);
    cut[k] = n;
    for (size_t i = 1; i < k; i++) /* sort the cut points */
      for (size_t j = i; j > 1 && cut[j] < cut[j - 1]; j--) {
        size_t s = cut[j];
        cut[j] = cut[j - 1];
        cut[j - 1] = s;
      }
    for (size_t i = 0; i < k; i++) {
      if (cut[i + 1] > cut[i])
        piece[npieces++] = moments_of(v, cut[i], cut[i + 1] - cut[i]);
      if (tu_rand_u64(&seed) % 4 == 0) {
        norm_moments_t empty = {0, 0, 0};
        piece[npieces++] = empty;
      }
    }
    norm_moments_t seq = {0, 0, 0};
    for (size_t i = 0; i < npieces; i++)
      norm_moments_merge(&seq, &piece[i]);
    check_moments("sequential", (size_t)trial, seq, ref[0], 1e-12, tol_m2);
    while (npieces > 1) { /* merge random neighbours into a tree */
      size_t i = tu_rand_u64(&seed) % (npieces - 1);
      norm_moments_merge(&piece[i], &piece[i + 1]);
      memmove(&piece[i + 1], &piece[i + 2],
              (npieces - i - 2) * sizeof piece[0]);
      npieces--;
    }
    check_moments("tree", (size_t)trial, piece[0], ref[0], 1e-12, tol_m2);
  }
}

START_TEST(test_merge_random_splits) {
  double *v = random_doubles(600, 31, -2, 2);
  random_splits(v, 600, 32, 1e-12);
  free(v);
  v = random_doubles(50, 33, 0, 1);
  random_splits(v, 50, 34, 1e-12);
  free(v);
}
END_TEST

/* |mean| 1e4, std 1e-2: the merge must combine centered M2s (Chan), not
 * sums of squares. The delta term's rounding bounds M2 to ~1e-11. */
START_TEST(test_merge_large_mean) {
  double *v = random_doubles(500, 41, 1e4 - 0.017, 1e4 + 0.017);
  random_splits(v, 500, 42, 1e-9);
  free(v);
  v = random_doubles(500, 43, -1e4 - 0.017, -1e4 + 0.017);
  norm_tensor_t t = view(v, 0, 500);
  norm_moments_t ref[1];
  size_t G;
  ref_rows(&t, 1, ref, &G);
  norm_moments_t a = moments_of(v, 0, 250), b = moments_of(v, 250, 250);
  norm_moments_merge(&a, &b);
  check_moments("halves", 0, a, ref[0], 1e-12, 1e-9);
  free(v);
}
END_TEST

/* ---- Errors ------------------------------------------------------------- */

START_TEST(test_err_args) {
  norm_tensor_t x = tu_mk(NORM_F32, 3, SHAPE(2, 3, 4));
  norm_moments_params_t p = {NORM_MOMENTS_ROWS, 1};
  norm_moments_t out[24];
  EXPECT_RC(norm_moments(NULL, &p, out), NORM_E_NULL);
  EXPECT_RC(norm_moments(&x, NULL, out), NORM_E_NULL);
  EXPECT_RC(norm_moments(&x, &p, NULL), NORM_E_NULL);
  EXPECT_RC(norm_moments_rows(&x, &p, NULL, 0, 1), NORM_E_NULL);
  p.layout = (norm_moments_layout_t)5;
  EXPECT_RC(norm_moments(&x, &p, out), NORM_E_ARG);
  ck_assert_int_eq(norm_moments_groups(&x, &p), NORM_E_ARG);
  p.layout = NORM_MOMENTS_ROWS;
  int bad_nd[3] = {0, 4, -1};
  for (int i = 0; i < 3; i++) {
    p.normalized_ndim = bad_nd[i];
    EXPECT_RC(norm_moments(&x, &p, out), NORM_E_ARG); /* as norm_layer */
    ck_assert_int_eq(norm_moments_groups(&x, &p), NORM_E_ARG);
  }
  tu_tensor_free(&x);

  norm_tensor_t v = tu_mk(NORM_F32, 1, SHAPE(4));
  norm_moments_params_t ch = {NORM_MOMENTS_CHANNELS, 0};
  EXPECT_RC(norm_moments(&v, &ch, out), NORM_E_CHANNELS);
  tu_tensor_free(&v);
}
END_TEST

START_TEST(test_err_tensor) {
  static float buf[64];
  norm_tensor_t x = {NORM_F32, 3, {2, 3, 4}, buf};
  norm_moments_params_t p = {NORM_MOMENTS_ROWS, 1};
  norm_moments_t out[64];
  x.rank = 9;
  EXPECT_RC(norm_moments(&x, &p, out), NORM_E_RANK);
  x.rank = 0;
  EXPECT_RC(norm_moments(&x, &p, out), NORM_E_RANK);
  x.rank = 3;
  x.shape[1] = -3;
  EXPECT_RC(norm_moments(&x, &p, out), NORM_E_DIM);
  x.shape[1] = 0;
  EXPECT_RC(norm_moments(&x, &p, out), NORM_E_EMPTY);
  p.layout = NORM_MOMENTS_CHANNELS;
  EXPECT_RC(norm_moments(&x, &p, out), NORM_E_EMPTY);
  x.shape[0] = INT64_C(1) << 62;
  x.shape[1] = 3;
  EXPECT_RC(norm_moments(&x, &p, out), NORM_E_OVERFLOW);
  x.shape[0] = 2;
  x.dtype = NORM_DTYPE_COUNT;
  EXPECT_RC(norm_moments(&x, &p, out), NORM_E_DTYPE);
  x.dtype = NORM_F32;
  x.data = NULL;
  EXPECT_RC(norm_moments(&x, &p, out), NORM_E_NULL);
}
END_TEST

Suite *moments_suite(void) {
  Suite *s = suite_create("moments");
  TCase *tc = tcase_create("Core");
  tcase_add_test(tc, test_rows_layout);
  tcase_add_test(tc, test_channels_layout);
  tcase_add_test(tc, test_single_values);
  tcase_add_test(tc, test_constant_rows);
  suite_add_tcase(s, tc);

  tc = tcase_create("Cruel");
  tcase_add_test(tc, test_large_mean);
  tcase_add_test(tc, test_nan_isolated);
  suite_add_tcase(s, tc);

  tc = tcase_create("Rows");
  tcase_add_test(tc, test_rows_split);
  tcase_add_test(tc, test_rows_bad_range);
  tcase_add_test(tc, test_groups_count);
  suite_add_tcase(s, tc);

  tc = tcase_create("Merge");
  tcase_add_test(tc, test_merge_halves);
  tcase_add_test(tc, test_merge_empty);
  tcase_add_test(tc, test_merge_singletons);
  tcase_add_test(tc, test_merge_random_splits);
  tcase_add_test(tc, test_merge_large_mean);
  suite_add_tcase(s, tc);

  tc = tcase_create("Errors");
  tcase_add_test(tc, test_err_args);
  tcase_add_test(tc, test_err_tensor);
  suite_add_tcase(s, tc);
  return s;
}
