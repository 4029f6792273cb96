/* check_norm_lrn.c -- norm_lrn_rows and norm_lrn_backward_rows against a
 * naive long-double reference written from torch's padding and ONNX's
 * floor / ceil window, every dtype pair, odd and even sizes (where the two
 * conventions differ), sizes beyond C, cruel magnitudes, NaN, central
 * differences, errors, range splits and aliasing. */
#include "testutil.h"

static const norm_dtype_t dtypes[] = {NORM_F32, NORM_F64, NORM_F16, NORM_BF16};

/* channel window [*first, *last] of c, before clipping */
static void ref_window(const norm_lrn_params_t *p, int64_t c, int64_t *first,
                       int64_t *last) {
  double s = (double)p->size;
  if (p->convention == NORM_LRN_TORCH) { /* pad size/2 before, (size-1)/2 after */
    *first = c - (int64_t)floor(s / 2), *last = c + (int64_t)floor((s - 1) / 2);
  } else {
    *first = c - (int64_t)floor((s - 1) / 2);
    *last = c + (int64_t)ceil((s - 1) / 2);
  }
}

typedef struct {
  size_t N, C, S;
} nc_t;

static nc_t dims(const norm_tensor_t *x) {
  nc_t d = {(size_t)x->shape[0], (size_t)x->shape[1], 1};
  for (int i = 2; i < x->rank; i++) d.S *= (size_t)x->shape[i];
  return d;
}

/* D of element (n, c, s) in long double; sq gets the window sum. */
static long double ref_den(const norm_tensor_t *x, const norm_lrn_params_t *p,
                           nc_t d, size_t n, size_t c, size_t s,
                           long double *sq) {
  int64_t first, last;
  ref_window(p, (int64_t)c, &first, &last);
  long double sum = 0;
  for (int64_t k = first; k <= last; k++) {
    if (k < 0 || k >= (int64_t)d.C) continue; /* zero padding */
    long double v = norm_tensor_get(x, (n * d.C + (size_t)k) * d.S + s);
    sum += v * v;
  }
  if (sq) *sq = sum;
  return (long double)p->k + (long double)p->alpha / p->size * sum;
}

static void ref_lrn(const norm_tensor_t *x, const norm_lrn_params_t *p,
                    double *y, double *sq) {
  nc_t d = dims(x);
  for (size_t n = 0; n < d.N; n++)
    for (size_t c = 0; c < d.C; c++)
      for (size_t s = 0; s < d.S; s++) {
        size_t i = (n * d.C + c) * d.S + s;
        long double q;
        long double den = ref_den(x, p, d, n, c, s, &q);
        y[i] = (double)(norm_tensor_get(x, i) / powl(den, p->beta));
        sq[i] = (double)q;
      }
}

/* dx_j = sum_c dy_c d y_c / d x_j, the Jacobian from the formula. */
static void ref_lrn_backward(const norm_tensor_t *x, const norm_tensor_t *dy,
                             const norm_lrn_params_t *p, double *dx) {
  nc_t d = dims(x);
  long double a = (long double)p->alpha / p->size, b = p->beta;
  for (size_t n = 0; n < d.N; n++)
    for (size_t s = 0; s < d.S; s++)
      for (size_t j = 0; j < d.C; j++) {
        size_t ij = (n * d.C + j) * d.S + s;
        long double xj = norm_tensor_get(x, ij), acc = 0;
        for (size_t c = 0; c < d.C; c++) {
          size_t ic = (n * d.C + c) * d.S + s;
          int64_t first, last;
          ref_window(p, (int64_t)c, &first, &last);
          long double den = ref_den(x, p, d, n, c, s, NULL);
          long double xc = norm_tensor_get(x, ic), jac = 0;
          if (c == j) jac += powl(den, -b);
          if ((int64_t)j >= first && (int64_t)j <= last)
            jac -= b * xc * powl(den, -b - 1) * a * 2 * xj;
          acc += norm_tensor_get(dy, ic) * jac;
        }
        dx[ij] = (double)acc;
      }
}

typedef struct {
  int rank;
  int64_t shape[4];
} lrn_shape_t;
static const lrn_shape_t shapes[] = {
    {2, {3, 6}}, {3, {2, 5, 3}}, {4, {2, 4, 2, 3}}, {3, {1, 9, 1}}};
static const int64_t sizes[] = {1, 2, 3, 4, 5, 6, 11};

static void run_forward(norm_tensor_t *x, norm_dtype_t yt,
                        const norm_lrn_params_t *p, double tol64) {
  norm_tensor_t y = tu_mk(yt, x->rank, x->shape);
  size_t n = tu_numel(x), ng = (size_t)norm_lrn_groups(x);
  double *ref = malloc(n * sizeof *ref), *rsq = malloc(n * sizeof *rsq);
  double *sq = tu_doubles(n);
  ck_assert(ref && rsq);
  EXPECT_RC(norm_lrn_rows(x, p, &y, sq, 0, ng), NORM_OK);
  ref_lrn(x, p, ref, rsq);
  tu_check_output("y", &y, ref, 1e-6, tol64);
  for (size_t i = 0; i < n; i++)
    ck_assert_msg(tu_rel_close(sq[i], rsq[i], 1e-13), "square_sum[%zu]", i);
  free(ref), free(rsq);
  tu_doubles_free(sq, n);
  tu_tensor_free(&y);
}

START_TEST(test_reference_every_dtype) {
  for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
    for (size_t zi = 0; zi < sizeof sizes / sizeof sizes[0]; zi++)
      for (int conv = 0; conv < 2; conv++)
        for (int xt = 0; xt < 4; xt++)
          for (int yt = 0; yt < 4; yt++) {
            norm_tensor_t x = tu_mk(dtypes[xt], shapes[si].rank, shapes[si].shape);
            tu_fill_uniform(&x, 10 + si * 13 + zi, -3, 3);
            norm_lrn_params_t p = {sizes[zi], 1e-2 * (double)(zi + 1),
                                   0.75, 1.0 + 0.5 * (double)conv,
                                   (norm_lrn_convention_t)conv};
            run_forward(&x, dtypes[yt], &p, 1e-13);
            tu_tensor_free(&x);
          }
}
END_TEST

/* Odd sizes: the conventions agree bit for bit; even sizes: they differ
 * (the window leans back for torch, forward for ONNX). */
START_TEST(test_conventions) {
  for (int64_t size = 1; size <= 8; size++) {
    norm_tensor_t x = tu_tensor(NORM_F64, 3, (int64_t)2, (int64_t)7, (int64_t)3);
    norm_tensor_t yt = tu_tensor(NORM_F64, 3, (int64_t)2, (int64_t)7, (int64_t)3);
    norm_tensor_t yo = tu_tensor(NORM_F64, 3, (int64_t)2, (int64_t)7, (int64_t)3);
    tu_fill_uniform(&x, 77, -2, 2);
    norm_lrn_params_t pt = {size, 1.0, 0.75, 1.0, NORM_LRN_TORCH};
    norm_lrn_params_t po = pt;
    po.convention = NORM_LRN_ONNX;
    EXPECT_RC(norm_lrn_rows(&x, &pt, &yt, NULL, 0, 6), NORM_OK);
    EXPECT_RC(norm_lrn_rows(&x, &po, &yo, NULL, 0, 6), NORM_OK);
    int same = memcmp(yt.data, yo.data, tu_nbytes(&yt)) == 0;
    ck_assert_msg(same == (size % 2 == 1), "size %lld: conventions %s",
                  (long long)size, same ? "agree" : "differ");
    tu_tensor_free(&x), tu_tensor_free(&yt), tu_tensor_free(&yo);
  }
}
END_TEST

/* A window far beyond C (size 1001 over 4 channels): every channel sums
 * all of them, alpha / size still divides by 1001. */
START_TEST(test_size_beyond_channels) {
  for (int conv = 0; conv < 2; conv++) {
    norm_tensor_t x = tu_tensor(NORM_F32, 3, (int64_t)2, (int64_t)4, (int64_t)3);
    tu_fill_uniform(&x, 5, -2, 2);
    norm_lrn_params_t p = {1001, 3.0, 0.5, 2.0, (norm_lrn_convention_t)conv};
    run_forward(&x, NORM_F64, &p, 1e-13);
    tu_tensor_free(&x);
  }
}
END_TEST

START_TEST(test_cruel_magnitudes) {
  static const struct {
    norm_dtype_t dt;
    double scale, k;
  } c[] = {{NORM_F32, 1e30, 1.0},  {NORM_F32, 1e-30, 1e-60},
           {NORM_F32, 1e-40, 1.0}, {NORM_F64, 1e150, 2.0},
           {NORM_F64, 1e-310, 1.0}, {NORM_BF16, 1e35, 1.0}};
  for (size_t k = 0; k < sizeof c / sizeof c[0]; k++)
    for (int conv = 0; conv < 2; conv++) {
      norm_tensor_t x =
          tu_tensor(c[k].dt, 3, (int64_t)2, (int64_t)6, (int64_t)2);
      tu_fill_uniform(&x, 20 + k, -c[k].scale, c[k].scale);
      /* one huge channel beside small ones: no running-sum cancellation */
      norm_tensor_set(&x, 3, c[k].scale * 1e3 > 1e300 ? c[k].scale : c[k].scale * 1e3);
      norm_lrn_params_t p = {4, 1e-4, 0.75, c[k].k, (norm_lrn_convention_t)conv};
      run_forward(&x, NORM_F64, &p, 1e-12);
      run_forward(&x, c[k].dt, &p, 1e-12);
      tu_tensor_free(&x);
    }
}
END_TEST

/* A NaN reaches the outputs whose windows hold it, and only those. */
START_TEST(test_nan) {
  norm_tensor_t x = tu_tensor(NORM_F64, 3, (int64_t)1, (int64_t)9, (int64_t)2);
  norm_tensor_t y = tu_tensor(NORM_F64, 3, (int64_t)1, (int64_t)9, (int64_t)2);
  tu_fill_uniform(&x, 3, -1, 1);
  norm_tensor_set(&x, 4 * 2 + 1, NAN); /* channel 4, position 1 */
  norm_lrn_params_t p = {4, 1e-1, 0.75, 1.0, NORM_LRN_TORCH}; /* [c-2, c+1] */
  EXPECT_RC(norm_lrn_rows(&x, &p, &y, NULL, 0, 2), NORM_OK);
  for (size_t c = 0; c < 9; c++) {
    ck_assert(isfinite(norm_tensor_get(&y, c * 2)));
    int hit = c >= 3 && c <= 6; /* channels whose window holds 4 */
    ck_assert_msg(isnan(norm_tensor_get(&y, c * 2 + 1)) == hit, "channel %zu",
                  c);
  }
  tu_tensor_free(&x), tu_tensor_free(&y);
}
END_TEST

START_TEST(test_backward_reference) {
  for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
    for (size_t zi = 0; zi < sizeof sizes / sizeof sizes[0]; zi++)
      for (int conv = 0; conv < 2; conv++) {
        int k = (int)(si + zi) % 4;
        norm_tensor_t x = tu_mk(dtypes[k], shapes[si].rank, shapes[si].shape);
        norm_tensor_t dy =
            tu_mk(dtypes[(k + 1) % 4], shapes[si].rank, shapes[si].shape);
        norm_tensor_t dx =
            tu_mk(dtypes[(k + conv) % 4], shapes[si].rank, shapes[si].shape);
        tu_fill_uniform(&x, 30 + si, -2, 2);
        tu_fill_uniform(&dy, 40 + zi, -1, 1);
        norm_lrn_params_t p = {sizes[zi], 0.3, 0.75, 1.5,
                               (norm_lrn_convention_t)conv};
        size_t n = tu_numel(&x);
        double *ref = malloc(n * sizeof *ref);
        ck_assert_ptr_nonnull(ref);
        EXPECT_RC(norm_lrn_backward_rows(&x, &dy, &p, &dx, 0,
                                         (size_t)norm_lrn_groups(&x)),
                  NORM_OK);
        ref_lrn_backward(&x, &dy, &p, ref);
        tu_check_output("dx", &dx, ref, 1e-6, 1e-13);
        free(ref);
        tu_tensor_free(&x), tu_tensor_free(&dy), tu_tensor_free(&dx);
      }
}
END_TEST

typedef struct {
  norm_lrn_params_t p;
  const norm_tensor_t *x;
} lrn_ctx_t;

static int lrn_forward_fn(void *ctx, const norm_tensor_t *x, norm_tensor_t *y) {
  lrn_ctx_t *c = ctx;
  return norm_lrn_rows(x, &c->p, y, NULL, 0, (size_t)norm_lrn_groups(x));
}

START_TEST(test_backward_central_differences) {
  for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
    for (size_t zi = 0; zi < sizeof sizes / sizeof sizes[0]; zi++)
      for (int conv = 0; conv < 2; conv++) {
        norm_tensor_t x = tu_mk(NORM_F64, shapes[si].rank, shapes[si].shape);
        norm_tensor_t dy = tu_mk(NORM_F64, shapes[si].rank, shapes[si].shape);
        norm_tensor_t dx = tu_mk(NORM_F64, shapes[si].rank, shapes[si].shape);
        tu_fill_uniform(&x, 50 + si, -2, 2);
        tu_fill_uniform(&dy, 60 + zi, -1, 1);
        lrn_ctx_t c = {{sizes[zi], 0.5, 0.6, 1.2, (norm_lrn_convention_t)conv},
                       NULL};
        EXPECT_RC(norm_lrn_backward_rows(&x, &dy, &c.p, &dx, 0,
                                         (size_t)norm_lrn_groups(&x)),
                  NORM_OK);
        tu_family_fd(lrn_forward_fn, &c, &x, dy.data, &dx, 1e-6, 1e-7);
        tu_tensor_free(&x), tu_tensor_free(&dy), tu_tensor_free(&dx);
      }
}
END_TEST

static int lrn_rows_fn(void *ctx, const norm_tensor_t *in, norm_tensor_t *out,
                       double *aux, size_t lo, size_t hi) {
  lrn_ctx_t *c = ctx;
  return norm_lrn_rows(in, &c->p, out, aux, lo, hi);
}

static int lrn_backward_fn(void *ctx, const norm_tensor_t *in,
                           norm_tensor_t *out, double *aux, size_t lo,
                           size_t hi) {
  (void)aux;
  lrn_ctx_t *c = ctx;
  return norm_lrn_backward_rows(c->x, in, &c->p, out, lo, hi);
}

/* Splits and aliasing, also with more channels than the rings hold. */
START_TEST(test_split_and_alias) {
  static const lrn_shape_t more[] = {{3, {2, 5, 3}}, {3, {1, 4500, 2}}};
  for (size_t si = 0; si < 2; si++)
    for (int k = 0; k < 4; k++) {
      norm_tensor_t x = tu_mk(dtypes[k], more[si].rank, more[si].shape);
      norm_tensor_t dy = tu_mk(dtypes[k], more[si].rank, more[si].shape);
      tu_fill_uniform(&x, 70 + si, -2, 2);
      tu_fill_uniform(&dy, 80 + si, -1, 1);
      lrn_ctx_t c = {{si ? 9 : 4, 0.2, 0.75, 1.0, (norm_lrn_convention_t)(k % 2)},
                     &x};
      size_t ng = (size_t)norm_lrn_groups(&x), n = tu_numel(&x);
      tu_family_split(lrn_rows_fn, &c, &x, &x, n, ng);
      tu_family_alias(lrn_rows_fn, &c, &x, n, ng);
      tu_family_split(lrn_backward_fn, &c, &dy, &dy, 0, ng);
      tu_family_alias(lrn_backward_fn, &c, &dy, 0, ng);
      tu_tensor_free(&x), tu_tensor_free(&dy);
    }
}
END_TEST

START_TEST(test_errors) {
  norm_tensor_t x = tu_tensor(NORM_F32, 3, (int64_t)2, (int64_t)3, (int64_t)4);
  norm_tensor_t y = tu_tensor(NORM_BF16, 3, (int64_t)2, (int64_t)3, (int64_t)4);
  norm_tensor_t v = tu_tensor(NORM_F32, 1, (int64_t)5);
  norm_tensor_t bad = tu_tensor(NORM_F32, 3, (int64_t)2, (int64_t)4, (int64_t)3);
  norm_lrn_params_t p = {3, 1e-4, 0.75, 1.0, NORM_LRN_TORCH};
  ck_assert_int_eq(norm_lrn_groups(&x), 8);
  ck_assert_int_eq(norm_lrn_groups(&v), NORM_E_CHANNELS);
  ck_assert_int_eq(norm_lrn_groups(NULL), NORM_E_NULL);
  EXPECT_RC(norm_lrn_rows(&v, &p, &v, NULL, 0, 1), NORM_E_CHANNELS);
  EXPECT_RC(norm_lrn_rows(&x, NULL, &y, NULL, 0, 8), NORM_E_NULL);
  EXPECT_RC(norm_lrn_rows(&x, &p, &bad, NULL, 0, 8), NORM_E_OUTPUT);
  EXPECT_RC(norm_lrn_rows(&x, &p, &y, NULL, 0, 9), NORM_E_RANGE);
  EXPECT_RC(norm_lrn_rows(&x, &p, &y, NULL, 5, 4), NORM_E_RANGE);
  norm_lrn_params_t q[] = {{0, 1e-4, 0.75, 1, NORM_LRN_TORCH},
                           {-3, 1e-4, 0.75, 1, NORM_LRN_TORCH},
                           {3, NAN, 0.75, 1, NORM_LRN_TORCH},
                           {3, 1e-4, INFINITY, 1, NORM_LRN_TORCH},
                           {3, 1e-4, 0.75, -INFINITY, NORM_LRN_TORCH},
                           {3, 1e-4, 0.75, 1, (norm_lrn_convention_t)2}};
  for (size_t i = 0; i < sizeof q / sizeof q[0]; i++) {
    EXPECT_RC(norm_lrn_rows(&x, &q[i], &y, NULL, 0, 8), NORM_E_ARG);
    EXPECT_RC(norm_lrn_backward_rows(&x, &x, &q[i], &y, 0, 8), NORM_E_ARG);
  }
  EXPECT_RC(norm_lrn_backward_rows(&x, &bad, &p, &y, 0, 8), NORM_E_GRAD_OUTPUT);
  EXPECT_RC(norm_lrn_backward_rows(&x, &x, &p, &y, 0, 9), NORM_E_RANGE);
  /* C > 4096: a window of more than 4096 channels is refused, 4096 not */
  norm_tensor_t w = tu_tensor(NORM_F32, 3, (int64_t)1, (int64_t)5000, (int64_t)1);
  norm_lrn_params_t big = {4097, 1e-4, 0.75, 1, NORM_LRN_ONNX};
  EXPECT_RC(norm_lrn_rows(&w, &big, &w, NULL, 0, 1), NORM_E_ARG);
  big.size = 4096;
  EXPECT_RC(norm_lrn_rows(&w, &big, &w, NULL, 0, 1), NORM_OK);
  tu_tensor_free(&x), tu_tensor_free(&y), tu_tensor_free(&v);
  tu_tensor_free(&bad), tu_tensor_free(&w);
}
END_TEST

Suite *norm_lrn_suite(void) {
  Suite *s = suite_create("norm_lrn");
  TCase *core = tcase_create("Core");
  tcase_add_test(core, test_reference_every_dtype);
  tcase_add_test(core, test_conventions);
  tcase_add_test(core, test_size_beyond_channels);
  tcase_add_test(core, test_backward_reference);
  tcase_add_test(core, test_backward_central_differences);
  tcase_add_test(core, test_split_and_alias);
  suite_add_tcase(s, core);
  TCase *limits = tcase_create("Limits");
  tcase_add_test(limits, test_cruel_magnitudes);
  tcase_add_test(limits, test_nan);
  suite_add_tcase(s, limits);
  TCase *errors = tcase_create("Errors");
  tcase_add_test(errors, test_errors);
  suite_add_tcase(s, errors);
  return s;
}
