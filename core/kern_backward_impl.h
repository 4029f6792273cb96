/* kern_backward_impl.h -- the backward's loops of kern.h (bw_sums,
 * bw_centered_sums, bw_row_sums, bw_dx), included by kern_impl.h and
 * built with its helpers (VW, KFN, the ld_ / st_ / e_ / s_ conversions,
 * vfma, hsum) once per target ISA. One set per dtype, x, dy and dx all of it; engine_backward
 * (backward.c) runs mixed dtypes as float64 chunks through the float64
 * set. Everything is in double lanes, as the scalar loops they replace
 * (bench/check_kern compares every table with a scalar reference).
 *
 * The helpers take their cases (a weight vector or not, which gradients,
 * the spread term, streaming stores) as constants once inlined, so each
 * loop is compiled without per-element tests of them. */

/* The rows' weights from element i, VW of them (LD_W) or one (E_W), with
 * hw a constant: 1 doubles, 2 floats (exact as doubles: the same
 * products). */
#define LD_W(hw, wp, i)                                                        \
  ((hw) == 2 ? ld_f32((const float *)(wp) + (i))                               \
             : ld_f64((const double *)(wp) + (i)))
#define E_W(hw, wp, i)                                                         \
  ((hw) == 2 ? (double)((const float *)(wp))[i] : ((const double *)(wp))[i])

/* The sums of a run of dy and x sharing one weight entry:
 * out[0] = sum(dy), out[1] = sum(dy * (x - shift)). */
#define DEF_BW_SUMS(dt, T)                                                     \
  static void KFN(bw_sums_##dt)(const void *xv, const void *dyv, size_t n,     \
                                double shift, double out[2]) {                 \
    const T *x = xv, *dy = dyv;                                                \
    vd g0 = {0}, g1 = {0}, g2 = {0}, g3 = {0};                                 \
    vd p0 = {0}, p1 = {0}, p2 = {0}, p3 = {0};                                 \
    size_t i = 0;                                                              \
    for (; i + 4 * VW <= n; i += 4 * VW) {                                     \
      vd d0, d1, d2, d3, x0, x1, x2, x3;                                       \
      ld2_##dt(dy + i, &d0, &d1);                                              \
      ld2_##dt(dy + i + 2 * VW, &d2, &d3);                                     \
      ld2_##dt(x + i, &x0, &x1);                                               \
      ld2_##dt(x + i + 2 * VW, &x2, &x3);                                      \
      g0 += d0;                                                                \
      g1 += d1;                                                                \
      g2 += d2;                                                                \
      g3 += d3;                                                                \
      p0 = vfma(d0, x0 - shift, p0);                                           \
      p1 = vfma(d1, x1 - shift, p1);                                           \
      p2 = vfma(d2, x2 - shift, p2);                                           \
      p3 = vfma(d3, x3 - shift, p3);                                           \
    }                                                                          \
    for (; i + VW <= n; i += VW) {                                             \
      vd d = ld_##dt(dy + i);                                                  \
      g0 += d;                                                                 \
      p0 = vfma(d, ld_##dt(x + i) - shift, p0);                                \
    }                                                                          \
    double sg = hsum((g0 + g1) + (g2 + g3)), sp = hsum((p0 + p1) + (p2 + p3)); \
    for (; i < n; i++) {                                                       \
      double d = e_##dt(dy + i);                                               \
      sg += d;                                                                 \
      sp = sfma(d, e_##dt(x + i) - shift, sp);                                 \
    }                                                                          \
    out[0] = sg;                                                               \
    out[1] = sp;                                                               \
  }

/* The statistics passes' prefetch (kern_impl.h's PREFETCH_AHEAD) of
 * both streams, x and dy. */
#define BW_AHEAD(i)                                                            \
  do {                                                                         \
    PREFETCH_AHEAD(x, i);                                                      \
    PREFETCH_AHEAD(dy, i);                                                     \
  } while (0)

/* centered (kern_impl.h) and bw_sums in one pass over a chunk: out[0] =
 * sum(x - mu), out[1] = sum((x - mu)^2) computed exactly as centered does
 * (the same four accumulators, merged in the same order, the same tails:
 * the same bits, so the backward's moments stay the forward's; check_kern
 * compares them with centered bit for bit), and beside them the sums of dy
 * around the same mu for the two pieces the chunk is cut into at `cut`
 * (0 <= cut <= n; a weight entry's run ends there): sums[0] = sum(dy),
 * sums[1] = sum(dy (x - mu)) over [0, cut), sums[2], sums[3] over [cut,
 * n). x is converted and centered once for both. */
/* One step of 4 VW elements of bw_centered_sums at i: centered's, and
 * with `dy_too` the dy sums' vector accumulators. In two halves, each
 * accumulator updated as centered does (their order among each other does
 * not change a bit), so that fewer values are live at once: the twelve
 * accumulators and mu stay in the sixteen AVX2 registers. */
#define BW_CENTERED_HALF(dt, dy_too, at, da, db, qa, qb)                       \
  BW_CENTERED_HALF_W(dt, dy_too, 0, (const double *)0, at, da, db, qa, qb)
/* ... and with `has_w` dy times the rows' weight w[i] (bw_centered_row_sums) */
#define BW_CENTERED_HALF_W(dt, dy_too, has_w, wp, at, da, db, qa, qb)          \
  do {                                                                         \
    vd va, vb;                                                                 \
    ld2_##dt(x + (at), &va, &vb);                                              \
    va -= mu, vb -= mu;                                                        \
    da = vadd_fma(va, da);                                                     \
    db = vadd_fma(vb, db);                                                     \
    qa = vfma(va, va, qa);                                                     \
    qb = vfma(vb, vb, qb);                                                     \
    if (dy_too) {                                                              \
      vd ea, eb;                                                               \
      ld2_##dt(dy + (at), &ea, &eb);                                           \
      if (has_w) { /* (through a variable: wp is a literal NULL without) */    \
        const void *w_ = (wp);                                                 \
        ea *= LD_W(has_w, w_, (at));                                           \
        eb *= LD_W(has_w, w_, (at) + VW);                                      \
      }                                                                        \
      g = vadd_fma(ea + eb, g);                                                \
      p0 = vfma(ea, va, p0);                                                   \
      p1 = vfma(eb, vb, p1);                                                   \
    }                                                                          \
  } while (0)
#define BW_CENTERED_STEP(dt, dy_too)                                           \
  do {                                                                         \
    BW_AHEAD(i);                                                               \
    BW_CENTERED_HALF(dt, dy_too, i, d0, d1, q0, q1);                           \
    BW_CENTERED_HALF(dt, dy_too, i + 2 * VW, d2, d3, q2, q3);                  \
  } while (0)
/* dy's sums of elements [from, to) one by one, each into its piece. */
#define BW_PIECES_SCALAR(dt, from, to)                                         \
  for (size_t t = (from); t < (to); t++) {                                     \
    double e = e_##dt(dy + t), v = e_##dt(x + t) - mu;                         \
    size_t k = t < cut ? 0 : 2;                                                \
    piece[k] += e;                                                             \
    piece[k + 1] = sfma(e, v, piece[k + 1]);                                   \
  }
#define DEF_BW_CENTERED_SUMS(dt, T)                                            \
  static void KFN(bw_centered_sums_##dt)(                                      \
      const void *xv, const void *dyv, size_t n, double mu, size_t cut,        \
      ptrdiff_t ahead, double out[2], double sums[4]) {                        \
    const T *x = xv, *dy = dyv;                                                \
    vd d0 = {0}, d1 = {0}, d2 = {0}, d3 = {0};                                 \
    vd q0 = {0}, q1 = {0}, q2 = {0}, q3 = {0};                                 \
    vd g = {0}, p0 = {0}, p1 = {0};                                            \
    double piece[4] = {0.0, 0.0, 0.0, 0.0};                                    \
    size_t at = 0, cb = cut - cut % (4 * VW), i = 0;                           \
    for (; i < cb && i + 4 * VW <= n; i += 4 * VW) /* the first piece */       \
      BW_CENTERED_STEP(dt, 1);                                                 \
    if (i == cb && i + 4 * VW <= n) { /* the step holding the cut */           \
      piece[0] = hsum(g);                                                      \
      piece[1] = hsum(p0 + p1);                                                \
      g = p0 = p1 = (vd){0};                                                   \
      at = 2;                                                                  \
      if (cut != cb) { /* straddled: dy element by element */                  \
        BW_CENTERED_STEP(dt, 0);                                               \
        BW_PIECES_SCALAR(dt, i, i + 4 * VW)                                    \
        i += 4 * VW;                                                           \
      }                                                                        \
    }                                                                          \
    for (; i + 4 * VW <= n; i += 4 * VW) /* the second */                      \
      BW_CENTERED_STEP(dt, 1);                                                 \
    piece[at] += hsum(g);                                                      \
    piece[at + 1] += hsum(p0 + p1);                                            \
    BW_PIECES_SCALAR(dt, i, n) /* dy's tail */                                 \
    CENTERED_TAIL(dt);                                                         \
    memcpy(sums, piece, sizeof piece);                                         \
  }

/* bw_centered_sums for a row with a weight per element (w; NULL: 1):
 * centered's out (the same bits, as above) and around the same mu
 * sums[0] = sum(w dy), sums[1] = sum(w dy (x - mu)), w dy rounded first as
 * bw_row_sums has it. Layer norm's moments with its sums in one pass. */
#define DEF_BW_CENTERED_ROW_SUMS(dt, T)                                        \
  KINLINE void KFN(bw_centered_row_sums_loop_##dt)(                            \
      const T *x, const T *dy, size_t n, double mu, const void *w,             \
      ptrdiff_t ahead, double out[2], double sums[2], const int has_w) {       \
    vd d0 = {0}, d1 = {0}, d2 = {0}, d3 = {0};                                 \
    vd q0 = {0}, q1 = {0}, q2 = {0}, q3 = {0};                                 \
    vd g = {0}, p0 = {0}, p1 = {0};                                            \
    size_t i = 0;                                                              \
    for (; i + 4 * VW <= n; i += 4 * VW) {                                     \
      BW_AHEAD(i);                                                             \
      BW_CENTERED_HALF_W(dt, 1, has_w, w, i, d0, d1, q0, q1);                  \
      BW_CENTERED_HALF_W(dt, 1, has_w, w, i + 2 * VW, d2, d3, q2, q3);         \
    }                                                                          \
    double sg = hsum(g), sp = hsum(p0 + p1);                                   \
    for (size_t t = i; t < n; t++) { /* dy's tail */                           \
      double e = e_##dt(dy + t), v = e_##dt(x + t) - mu;                       \
      if (has_w) e *= E_W(has_w, w, t);                                        \
      sg += e;                                                                 \
      sp = sfma(e, v, sp);                                                     \
    }                                                                          \
    CENTERED_TAIL(dt);                                                         \
    sums[0] = sg;                                                              \
    sums[1] = sp;                                                              \
  }                                                                            \
  static void KFN(bw_centered_row_sums_##dt)(                                  \
      const void *x, const void *dy, size_t n, double mu, const double *w,     \
      const float *wf, ptrdiff_t ahead, double out[2], double sums[2]) {       \
    if (wf)                                                                    \
      KFN(bw_centered_row_sums_loop_##dt)(x, dy, n, mu, wf, ahead, out, sums,  \
                                          2);                                  \
    else if (w)                                                                \
      KFN(bw_centered_row_sums_loop_##dt)(x, dy, n, mu, w, ahead, out, sums,   \
                                          1);                                  \
    else                                                                       \
      KFN(bw_centered_row_sums_loop_##dt)(x, dy, n, mu, w, ahead, out, sums,   \
                                          0);                                  \
  }

/* sumsq (kern_impl.h) and RMS norm's sums in one pass over a row: returns
 * sum(x^2) computed exactly as sumsq does (the same four accumulators,
 * merged in the same order, the same tails: the same bits, so the
 * backward's mean square stays the forward's; check_kern compares them),
 * and beside it sums[0] = sum(w dy), sums[1] = sum(w dy x), a weight per
 * element (w; NULL: 1), w dy rounded first as bw_row_sums has it. */
#define DEF_BW_SUMSQ_ROW_SUMS(dt, T)                                           \
  KINLINE double KFN(bw_sumsq_row_sums_loop_##dt)(                             \
      const T *x, const T *dy, size_t n, const void *w, ptrdiff_t ahead,       \
      double sums[2], const int has_w) {                                       \
    vd a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};                                 \
    vd g = {0}, p0 = {0}, p1 = {0};                                            \
    size_t i = 0;                                                              \
    for (; i + 4 * VW <= n; i += 4 * VW) {                                     \
      vd v0, v1, v2, v3, e0, e1, e2, e3;                                       \
      BW_AHEAD(i);                                                             \
      ld2_##dt(x + i, &v0, &v1);                                               \
      ld2_##dt(x + i + 2 * VW, &v2, &v3);                                      \
      a0 += v0 * v0;                                                           \
      a1 += v1 * v1;                                                           \
      a2 += v2 * v2;                                                           \
      a3 += v3 * v3;                                                           \
      ld2_##dt(dy + i, &e0, &e1);                                              \
      ld2_##dt(dy + i + 2 * VW, &e2, &e3);                                     \
      if (has_w) {                                                             \
        e0 *= LD_W(has_w, w, i);                                               \
        e1 *= LD_W(has_w, w, i + VW);                                          \
        e2 *= LD_W(has_w, w, i + 2 * VW);                                      \
        e3 *= LD_W(has_w, w, i + 3 * VW);                                      \
      }                                                                        \
      g += (e0 + e1) + (e2 + e3);                                              \
      p0 = vfma(e0, v0, p0);                                                   \
      p1 = vfma(e1, v1, p1);                                                   \
      p0 = vfma(e2, v2, p0);                                                   \
      p1 = vfma(e3, v3, p1);                                                   \
    }                                                                          \
    for (; i + VW <= n; i += VW) {                                             \
      vd v = ld_##dt(x + i), e = ld_##dt(dy + i);                              \
      a0 += v * v;                                                             \
      if (has_w) e *= LD_W(has_w, w, i);                                       \
      g += e;                                                                  \
      p0 = vfma(e, v, p0);                                                     \
    }                                                                          \
    double sq = hsum((a0 + a1) + (a2 + a3));                                   \
    double sg = hsum(g), sp = hsum(p0 + p1);                                   \
    for (; i < n; i++) {                                                       \
      double v = e_##dt(x + i), e = e_##dt(dy + i);                            \
      sq += v * v;                                                             \
      if (has_w) e *= E_W(has_w, w, i);                                        \
      sg += e;                                                                 \
      sp = sfma(e, v, sp);                                                     \
    }                                                                          \
    sums[0] = sg;                                                              \
    sums[1] = sp;                                                              \
    return sq;                                                                 \
  }                                                                            \
  static double KFN(bw_sumsq_row_sums_##dt)(                                   \
      const void *x, const void *dy, size_t n, const double *w,                \
      const float *wf, ptrdiff_t ahead, double sums[2]) {                      \
    return wf  ? KFN(bw_sumsq_row_sums_loop_##dt)(x, dy, n, wf, ahead, sums, 2) \
           : w ? KFN(bw_sumsq_row_sums_loop_##dt)(x, dy, n, w, ahead, sums, 1)  \
               : KFN(bw_sumsq_row_sums_loop_##dt)(x, dy, n, w, ahead, sums, 0); \
  }

/* The sums of a row with a weight per element (w; NULL: 1), xhat =
 * (x - shift) * s: out[0] = sum(w * dy), out[1] = sum(w * dy * xhat), and
 * per element gw[i] += dy * xhat, gb[i] += dy (where asked for). */
#define DEF_BW_ROW_SUMS(dt, T)                                                 \
  KINLINE void KFN(bw_row_sums_loop_##dt)(                                     \
      const T *x, const T *dy, size_t n, double shift, double s,               \
      const double *w, double *gw, double *gb, double out[2], const int has_w, \
      const int has_gw, const int has_gb) {                                    \
    vd g0 = {0}, g1 = {0}, p0 = {0}, p1 = {0};                                 \
    size_t i = 0;                                                              \
    for (; i + 2 * VW <= n; i += 2 * VW) {                                     \
      vd d0, d1, x0, x1;                                                       \
      ld2_##dt(dy + i, &d0, &d1);                                              \
      ld2_##dt(x + i, &x0, &x1);                                               \
      vd h0 = (x0 - shift) * s, h1 = (x1 - shift) * s;                         \
      if (has_gw) {                                                            \
        st_f64(gw + i, vfma(d0, h0, ld_f64(gw + i)));                          \
        st_f64(gw + i + VW, vfma(d1, h1, ld_f64(gw + i + VW)));                \
      }                                                                        \
      if (has_gb) {                                                            \
        st_f64(gb + i, ld_f64(gb + i) + d0);                                   \
        st_f64(gb + i + VW, ld_f64(gb + i + VW) + d1);                         \
      }                                                                        \
      if (has_w) {                                                             \
        d0 *= ld_f64(w + i);                                                   \
        d1 *= ld_f64(w + i + VW);                                              \
      }                                                                        \
      g0 += d0;                                                                \
      g1 += d1;                                                                \
      p0 = vfma(d0, h0, p0);                                                   \
      p1 = vfma(d1, h1, p1);                                                   \
    }                                                                          \
    double sg = hsum(g0 + g1), sp = hsum(p0 + p1);                             \
    for (; i < n; i++) {                                                       \
      double d = e_##dt(dy + i), h = (e_##dt(x + i) - shift) * s;              \
      if (has_gw) gw[i] = sfma(d, h, gw[i]);                                   \
      if (has_gb) gb[i] += d;                                                  \
      if (has_w) d *= w[i];                                                    \
      sg += d;                                                                 \
      sp = sfma(d, h, sp);                                                     \
    }                                                                          \
    out[0] = sg;                                                               \
    out[1] = sp;                                                               \
  }                                                                            \
  static void KFN(bw_row_sums_##dt)(const void *x, const void *dy, size_t n,   \
                                    double shift, double s, const double *w,   \
                                    double *gw, double *gb, double out[2]) {   \
    /* the cases of layer norm (both gradients, or none) and RMS norm (the     \
     * weight's only), with and without a weight; the rest in one loop */      \
    if (w && gw && gb)                                                         \
      KFN(bw_row_sums_loop_##dt)(x, dy, n, shift, s, w, gw, gb, out, 1, 1, 1); \
    else if (w && gw)                                                          \
      KFN(bw_row_sums_loop_##dt)(x, dy, n, shift, s, w, gw, gb, out, 1, 1, 0); \
    else if (w && !gb)                                                         \
      KFN(bw_row_sums_loop_##dt)(x, dy, n, shift, s, w, gw, gb, out, 1, 0, 0); \
    else if (!w && gw && gb)                                                   \
      KFN(bw_row_sums_loop_##dt)(x, dy, n, shift, s, w, gw, gb, out, 0, 1, 1); \
    else if (!w && !gw && !gb)                                                 \
      KFN(bw_row_sums_loop_##dt)(x, dy, n, shift, s, w, gw, gb, out, 0, 0, 0); \
    else                                                                       \
      KFN(bw_row_sums_loop_##dt)(x, dy, n, shift, s, w, gw, gb, out, w != 0,   \
                                 gw != 0, gb != 0);                            \
  }

/* dx = s * (w * dy - mean_g) - xhat * c, xhat = (x - shift) * s, without
 * the last term unless `spread`; w = wv[i], or the scalar w where wv is
 * NULL. As fma(x - shift, -(s c), s * (w * dy - mean_g)): s c folded once,
 * one fused step instead of two products (the vector loop was bound by its
 * multiplies), the first term exactly as before, so that a group whose
 * terms cancel exactly (a single element: w dy = mean_g, x = shift) still
 * gets dx = 0. Rounded once into the dtype.
 * Why float32 stays in double lanes here although it costs the group norm
 * backward its lead over PyTorch at 1 thread on Zen 5 (0.74-1.0x there,
 * ahead at 2 threads): a float-lane r could be proven to
 * round like the double path only with double-word arithmetic (its error
 * must stay below half a float ulp, not a bfloat16 one as in
 * bw_dx_bf16_f), ~35 operations per 16 elements against the 18 here. The
 * double lanes are bound by the conversions instead (x, dy in and dx out,
 * 6 per 16 elements; vcvtps2pd zmm runs about one a cycle on Zen 5), and a
 * scratch of the sums pass' doubles read back here was slower still (a
 * microbenchmark in L2: 0.25 against 0.20 ns per element for both passes). */
#define BW_DX_ELEM(X, DY, W, FMA_S)                                            \
  ({                                                                           \
    __typeof__(X) d_ = s * ((W) * (DY)-mean_g);                                \
    spread ? FMA_S((X)-shift, -sc, d_) : d_;                                   \
  })
#define DEF_BW_DX(dt, T)                                                       \
  KINLINE size_t KFN(bw_dx_loop_##dt)(                                         \
      const T *x, const T *dy, T *dx, size_t i, size_t n, double shift,        \
      double s, double w, const double *wv, double mean_g, double c,           \
      const int has_wv, const int spread, const int stream) {                  \
    const double sc = s * c;                                                   \
    const vd vw = splat_d(w);                                                  \
    for (; i + 2 * VW <= n; i += 2 * VW) {                                     \
      vd r0 = BW_DX_ELEM(ld_##dt(x + i), ld_##dt(dy + i),                      \
                         has_wv ? ld_f64(wv + i) : vw, vfma_s);                \
      vd r1 = BW_DX_ELEM(ld_##dt(x + i + VW), ld_##dt(dy + i + VW),            \
                         has_wv ? ld_f64(wv + i + VW) : vw, vfma_s);           \
      if (stream) {                                                            \
        st_##dt##_nt(dx + i, r0);                                              \
        st_##dt##_nt(dx + i + VW, r1);                                         \
      } else {                                                                 \
        st_##dt(dx + i, r0);                                                   \
        st_##dt(dx + i + VW, r1);                                              \
      }                                                                        \
    }                                                                          \
    return i;                                                                  \
  }                                                                            \
  static void KFN(bw_dx_##dt)(const void *xv, const void *dyv, void *dxv,      \
                              size_t n, double shift, double s, double w,      \
                              const double *wv, double mean_g, double c,       \
                              int spread, int stream) {                        \
    const T *x = xv, *dy = dyv;                                                \
    T *dx = dxv;                                                               \
    const double sc = s * c;                                                   \
    size_t i = 0, v = 0;                                                       \
    stream = stream && KERN_NT;                                                \
    if (stream) /* align dx for the streaming stores; the head is scalar */    \
      v = head_to_align(dx, sizeof(T), n);                                     \
    for (; i < v; i++)                                                         \
      s_##dt(dx + i, BW_DX_ELEM(e_##dt(x + i), e_##dt(dy + i),                 \
                                wv ? wv[i] : w, sfma));                        \
    int form = (wv != NULL) | (spread != 0) << 1 | (stream != 0) << 2;         \
    switch (form) {                                                            \
    case 0: i = KFN(bw_dx_loop_##dt)(x, dy, dx, i, n, shift, s, w, wv, mean_g, \
                                     c, 0, 0, 0); break;                       \
    case 1: i = KFN(bw_dx_loop_##dt)(x, dy, dx, i, n, shift, s, w, wv, mean_g, \
                                     c, 1, 0, 0); break;                       \
    case 2: i = KFN(bw_dx_loop_##dt)(x, dy, dx, i, n, shift, s, w, wv, mean_g, \
                                     c, 0, 1, 0); break;                       \
    case 3: i = KFN(bw_dx_loop_##dt)(x, dy, dx, i, n, shift, s, w, wv, mean_g, \
                                     c, 1, 1, 0); break;                       \
    case 4: i = KFN(bw_dx_loop_##dt)(x, dy, dx, i, n, shift, s, w, wv, mean_g, \
                                     c, 0, 0, 1); break;                       \
    case 5: i = KFN(bw_dx_loop_##dt)(x, dy, dx, i, n, shift, s, w, wv, mean_g, \
                                     c, 1, 0, 1); break;                       \
    case 6: i = KFN(bw_dx_loop_##dt)(x, dy, dx, i, n, shift, s, w, wv, mean_g, \
                                     c, 0, 1, 1); break;                       \
    default: i = KFN(bw_dx_loop_##dt)(x, dy, dx, i, n, shift, s, w, wv,        \
                                      mean_g, c, 1, 1, 1);                     \
    }                                                                          \
    if (stream) stream_fence();                                                \
    for (; i + VW <= n; i += VW) /* one vector left: plain store */            \
      st_##dt(dx + i, BW_DX_ELEM(ld_##dt(x + i), ld_##dt(dy + i),              \
                                 wv ? ld_f64(wv + i) : splat_d(w), vfma_s));   \
    for (; i < n; i++)                                                         \
      s_##dt(dx + i, BW_DX_ELEM(e_##dt(x + i), e_##dt(dy + i),                 \
                                wv ? wv[i] : w, sfma));                        \
  }

/* bw_dx for rows (layer and RMS norm: a weight per element, the spread
 * term always) and on the way the gradients of their weight and bias,
 * gw[i] += dy xhat and gb[i] += dy (either NULL), xhat = (x - shift) s as
 * bw_row_sums has them (the same bits from the same shift and s): dy and
 * x are in registers for dx anyway, so when the sums were taken with the
 * moments (bw_centered_row_sums) x and dy are read twice per row, not
 * three times. dx as bw_dx gives it (w = wv[i], or 1 where wv is NULL).
 * dx may alias dy. (It used to prefetch the next row's x and dy with
 * `stream`, +8% on 4096x4096 float32 layer backward at 1 thread; the
 * moments pass before it prefetching them instead, kern.h's `ahead`, gives
 * another +11%: medians of 6 alternating runs 19.6 -> 21.9 GB/s; RMS norm
 * the same either way.) */
#define BW_DX_GRADS_ELEM(dt, t)                                                \
  do {                                                                         \
    double xe = e_##dt(x + (t)), de = e_##dt(dy + (t));                        \
    if (gw) gw[t] = sfma(de, (xe - shift) * s, gw[t]);                         \
    if (gb) gb[t] += de;                                                       \
    s_##dt(dx + (t), BW_DX_ELEM(xe, de, wf ? (double)wf[t] : wv ? wv[t] : 1.0, \
                                sfma));                                        \
  } while (0)
#define BW_DX_GRADS_VEC(dt, at, xa, da, ra)                                    \
  do {                                                                         \
    if (has_gw)                                                                \
      st_f64(gw + (at), vfma(da, (xa - shift) * s, ld_f64(gw + (at))));        \
    if (has_gb) st_f64(gb + (at), vadd_fma(da, ld_f64(gb + (at))));            \
    if (stream)                                                                \
      st_##dt##_nt(dx + (at), ra);                                             \
    else                                                                       \
      st_##dt(dx + (at), ra);                                                  \
  } while (0)
/* bw_dx_grads' specialized loops for one gradient case (GW, GB) and
 * streaming or not (ST): float, double and (with both gradients) no
 * weights, as cases of its switch. */
#define BW_DX_GRADS_CASE(dt, HW, GW, GB, ST)                                   \
  case ((GB) ? 1 : 2) << 3 | (HW) << 1 | (ST):                                 \
    i = KFN(bw_dx_grads_loop_##dt)(x, dy, dx, i, n, shift, s, w_, mean_g, c,   \
                                   gw, gb, HW, GW, GB, ST);                    \
    break;
#define BW_DX_GRADS_CASES(dt, GW, GB, ST)                                      \
  BW_DX_GRADS_CASE(dt, 2, GW, GB, ST)                                          \
  BW_DX_GRADS_CASE(dt, 1, GW, GB, ST)                                          \
  BW_DX_GRADS_CASE_NONE_##GB(dt, ST)
#define BW_DX_GRADS_CASE_NONE_1(dt, ST) BW_DX_GRADS_CASE(dt, 0, 1, 1, ST)
#define BW_DX_GRADS_CASE_NONE_0(dt, ST)
#define DEF_BW_DX_GRADS(dt, T)                                                 \
  KINLINE size_t KFN(bw_dx_grads_loop_##dt)(                                   \
      const T *x, const T *dy, T *dx, size_t i, size_t n, double shift,        \
      double s, const void *wv, double mean_g, double c, double *gw,           \
      double *gb, const int has_wv, const int has_gw, const int has_gb,        \
      const int stream) {                                                      \
    const double sc = s * c;                                                   \
    const int spread = 1;                                                      \
    const vd one = splat_d(1.0);                                               \
    for (; i + 2 * VW <= n; i += 2 * VW) {                                     \
      vd x0 = ld_##dt(x + i), x1 = ld_##dt(x + i + VW);                        \
      vd d0 = ld_##dt(dy + i), d1 = ld_##dt(dy + i + VW);                      \
      vd w0 = has_wv ? LD_W(has_wv, wv, i) : one;                              \
      vd w1 = has_wv ? LD_W(has_wv, wv, i + VW) : one;                         \
      vd r0 = BW_DX_ELEM(x0, d0, w0, vfma_s);                                  \
      vd r1 = BW_DX_ELEM(x1, d1, w1, vfma_s);                                  \
      BW_DX_GRADS_VEC(dt, i, x0, d0, r0);                                      \
      BW_DX_GRADS_VEC(dt, i + VW, x1, d1, r1);                                 \
    }                                                                          \
    return i;                                                                  \
  }                                                                            \
  static void KFN(bw_dx_grads_##dt)(const void *xv, const void *dyv,           \
                                    void *dxv, size_t n, double shift,         \
                                    double s, const double *wv,                \
                                    const float *wf, double mean_g,            \
                                    double c, double *gw, double *gb,          \
                                    int stream) {                              \
    const T *x = xv, *dy = dyv;                                                \
    T *dx = dxv;                                                               \
    const double sc = s * c;                                                   \
    const int spread = 1;                                                      \
    size_t i = 0, v = 0;                                                       \
    stream = stream && KERN_NT;                                                \
    if (stream) /* align dx for the streaming stores; the head is scalar */    \
      v = head_to_align(dx, sizeof(T), n);                                     \
    for (; i < v; i++) BW_DX_GRADS_ELEM(dt, i);                                \
    /* layer norm's cases (float, double or no weights, both gradients)        \
     * and RMS norm's (weights, the weight's gradient only), streamed or       \
     * not, each a loop of its own; the rest in one loop */                    \
    const void *w_ = wf ? (const void *)wf : (const void *)wv;                 \
    int hw = wf ? 2 : wv != NULL, cs = (gw && gb) ? 1 : gw && hw ? 2 : 0;      \
    switch (cs << 3 | hw << 1 | (stream != 0)) {                               \
      BW_DX_GRADS_CASES(dt, 1, 1, 1)                                           \
      BW_DX_GRADS_CASES(dt, 1, 1, 0)                                           \
      BW_DX_GRADS_CASES(dt, 1, 0, 1)                                           \
      BW_DX_GRADS_CASES(dt, 1, 0, 0)                                           \
    default:                                                                   \
      i = KFN(bw_dx_grads_loop_##dt)(x, dy, dx, i, n, shift, s, w_, mean_g, c, \
                                     gw, gb, hw, gw != 0, gb != 0, stream);    \
    }                                                                          \
    if (stream) stream_fence();                                                \
    (void)sc, (void)spread;                                                    \
    for (; i < n; i++) BW_DX_GRADS_ELEM(dt, i);                                \
  }

/* vfma with a scalar b, broadcast */
KINLINE vd vfma_s(vd a, double b, vd c) { return vfma(a, splat_d(b), c); }

#define DEF_BACKWARD(dt, T)                                                    \
  DEF_BW_SUMS(dt, T)                                                           \
  DEF_BW_CENTERED_SUMS(dt, T)                                                  \
  DEF_BW_CENTERED_ROW_SUMS(dt, T)                                              \
  DEF_BW_SUMSQ_ROW_SUMS(dt, T)                                                 \
  DEF_BW_ROW_SUMS(dt, T)                                                       \
  DEF_BW_DX(dt, T)                                                             \
  DEF_BW_DX_GRADS(dt, T)

DEF_BACKWARD(f32, float)
DEF_BACKWARD(f64, double)
DEF_BACKWARD(f16, uint16_t)
DEF_BACKWARD(bf16, uint16_t)

#if KERN_F16C
/* ---- bfloat16 bw_dx in float lanes, AVX2 --------------------------------- */

/* In the avx512 table too, in 8 lanes, and in 16 in the avx512bf16 one
 * (below): there they replaced the double path (Zen 4, bw_dx of a
 * bfloat16 3136-element run in L1: 0.48 -> 0.27 ns per element in 8
 * lanes, 0.24 in 16). */

/* bw_dx for bfloat16 x, dy and dx in 8 float lanes, with the same bits as
 * the double path above (bw_dx_bf16: RNE_bf16(T), T = fma(fl(x - shift),
 * -sc, fl(s fl(fl(w dy) - mean_g))) in double, sc = fl(s c); without the
 * spread term T = fl(s fl(fl(w dy) - mean_g))), or that path per lane.
 *
 * As V = dy (s w) + x (-sc) + (sc shift - s mean_g) (exact reals, sc as
 * rounded), the lanes compute, u = 2^-24:
 *   r = fma(x, NSC, fma(dy, WS, K))   (without spread: fma(dy, WS, K)),
 * NSC = fl(-sc), K = fl(fl(fl(sc shift) - fl(s mean_g))) (no sc term
 * without spread), WS = fl(fl(s w)) (w scalar: a constant; per element:
 * wv[i] * s in double lanes, then to float). With Ck = |sc shift| + |s
 * mean_g| and the row taken only while |s| <= 2^100, sc = 0 or 2^-100 <=
 * |sc| <= 2^100, and Ck <= 2^100 (NaN fails), each piece's error:
 * - |NSC + sc| <= u |x NSC| / |x| (sc normal as a float), |K - Kd| <= u |K|
 *   + 2^-150 + 2^-51.4 Ck (Kd the exact constant), |WS - s w| <= 1.001 u
 *   |WS| + 2^-149 (WS may be subnormal or, past FLT_MAX, infinite: then r
 *   is Inf or NaN and the lane is not taken);
 * - the two float fmas: u (|fma(dy, WS, K)| + |r|) + 2 2^-150, with
 *   |fma(dy, WS, K)| <= (1 + 2u)(|dy WS| + |K|) + 2^-149;
 * - the double path itself: |T - V| <= 2^-53 |T| + 2^-51.4 (|s w dy| + |s
 *   mean_g|) + 2^-53 |x - shift| |sc| + 2^-970 (its underflows, |s| <=
 *   2^100), with |x - shift| |sc| <= |x NSC| (1 + u) + Ck.
 * Summed, with M = |dy WS| + |x NSC| + |K| + |r|:
 *   |r - T| < B = 2.05 u M + 1.01 2^-149 |dy| + 2^-49 Ck + 2^-147.
 * The lanes compute e = fl(fl(fl(|dy| AW + KE) + |x| NSC20) + |r| 2^-20)
 * (three fmas; no x term without spread), NSC20 = |NSC| 2^-20 (exact), AW
 * = fl(|WS| 2^-20 + 2^-126) (per element; for a scalar w rounded up), KE
 * = 2^-20 |K| + 2^-48 Ck + 2^-126 rounded up to a float. Each float step
 * loses at most u of its result plus 2^-150, so e >= (1 - 4u)(2^-20 M +
 * 2^-126 |dy| + 2^-48 Ck) + 2^-126 - 5 2^-150 > 2 B (2^-20 = 16 u), and e
 * > 2 (u |r| + 2^-150): lo = fl(r - e) and hi = fl(r + e) are off r -+ e
 * by less than e / 2, so T lies strictly inside [lo, hi]. From there the
 * bins argument of the axpb path (kern_impl.h, bf16_bins8) gives
 * RNE_bf16(T) where lo and hi bin alike; Inf / NaN in x, dy or w (or a
 * float overflow) make r Inf or NaN, and those lanes, with those whose
 * bins differ (T near a bfloat16 midpoint, or near zero: e >= 2^-126),
 * are redone by the double path's scalar tail, the same bits as its body.
 * Rows outside the ranges take the double path whole. bench/check_kern
 * compares it bit for bit with the double formula. */
typedef struct {
  __m256 nsc, nsc20; /* NSC, |NSC| 2^-20 */
  __m256 k, ke;      /* K, KE */
  __m256 ws, aw;     /* WS, AW for a scalar w */
} bw_dx_bf16_consts8_t;

/* r and e for the 8 elements at x, dy (and wv, or the scalar w). */
KINLINE __m256 bw_dx_bf16_lanes8(const bw_dx_bf16_consts8_t *k,
                                 const uint16_t *x, const uint16_t *dy,
                                 const double *wv, double s, const int spread,
                                 __m256 *e) {
  __m256 dyf = bf16_widen8(dy), ws = k->ws, aw = k->aw;
  if (wv) {
    const __m256d vs = _mm256_set1_pd(s);
    __m128 lo = _mm256_cvtpd_ps(_mm256_mul_pd(_mm256_loadu_pd(wv), vs));
    __m128 hi = _mm256_cvtpd_ps(_mm256_mul_pd(_mm256_loadu_pd(wv + 4), vs));
    ws = _mm256_set_m128(hi, lo);
    aw = _mm256_fmadd_ps(abs8(ws), _mm256_set1_ps(0x1p-20f),
                         _mm256_set1_ps((float)KERN_SUBNORMAL_SLACK));
  }
  __m256 r = _mm256_fmadd_ps(dyf, ws, k->k);
  __m256 t = _mm256_fmadd_ps(abs8(dyf), aw, k->ke);
  if (spread) {
    __m256 xf = bf16_widen8(x);
    r = _mm256_fmadd_ps(xf, k->nsc, r);
    t = _mm256_fmadd_ps(abs8(xf), k->nsc20, t);
  }
  *e = _mm256_fmadd_ps(abs8(r), _mm256_set1_ps(0x1p-20f), t);
  return r;
}

/* One lane of bw_dx by the double path (its scalar tail), for
 * bf16_store16; `at` is the step's first element. */
typedef struct {
  const uint16_t *x, *dy;
  const double *wv;
  double shift, s, w, mean_g, c;
  int spread;
  size_t at;
} bw_dx_bf16_redo_t;

static void KFN(bw_dx_bf16_redo)(const void *ctx, unsigned j, uint16_t *lane) {
  const bw_dx_bf16_redo_t *r = ctx;
  size_t i = r->at + j;
  KFN(bw_dx_bf16)(r->x + i, r->dy + i, lane, 1, r->shift, r->s, r->w,
                  r->wv ? r->wv + i : NULL, r->mean_g, r->c, r->spread, 0);
}

/* The vector loop of bw_dx_bf16_f over [i, n) in steps of 16 for one form
 * (wv or not, spread or not: constants once inlined); returns where it
 * stopped. With `ahead` (rows of a streamed tensor: a weight per element,
 * the spread term) the next row's x and dy, the n elements after these,
 * are prefetched into L2 for its passes: bfloat16 4096x4096 backward, 1
 * thread, layer 7.0 -> 9.9, rms 7.7 -> 11.2 GB/s (16-lane loop, medians of
 * 6 alternating runs). The other dtypes leave that to their statistics
 * pass (kern.h's `ahead`); bfloat16 rows have three passes, and the first
 * one's prefetch does not replace this one (without it, with the first
 * pass prefetching: layer 10.0 -> 7.2, rms 11.0 -> 7.4, medians of 5). */
KINLINE size_t bw_dx_bf16_loop8(const uint16_t *x, const uint16_t *dy,
                                uint16_t *dx, size_t i, size_t n,
                                const bw_dx_bf16_consts8_t *k,
                                bw_dx_bf16_redo_t *redo, const double *wv,
                                const int spread, const int ahead) {
  for (; i + 16 <= n; i += 16) {
    if (ahead && i % 32 == 0) { /* the next row's x and dy, a line each */
      prefetch_l2(x + i + n, 64);
      prefetch_l2(dy + i + n, 64);
    }
    __m256i bad0 = _mm256_setzero_si256(), bad1 = _mm256_setzero_si256();
    __m256 e0, e1;
    __m256 r0 = bw_dx_bf16_lanes8(k, x + i, dy + i, wv ? wv + i : NULL,
                                  redo->s, spread, &e0);
    __m256 r1 = bw_dx_bf16_lanes8(k, x + i + 8, dy + i + 8,
                                  wv ? wv + i + 8 : NULL, redo->s, spread, &e1);
    __m256i b0 = bf16_bins8(r0, e0, &bad0), b1 = bf16_bins8(r1, e1, &bad1);
    redo->at = i;
    bf16_store16(dx + i, b0, b1, bad0, bad1, KFN(bw_dx_bf16_redo), redo);
  }
  return i;
}

#if KERN_BF16NE
/* The same in 16 lanes (AVX-512): lane for lane the 8-lane steps above
 * (the same float operations on the same constants, so the same bound
 * and e), the bins and their check as bf16_bins8's in 512-bit integers,
 * lanes not taken redone as there. On Zen 4 in L1: 0.29 -> 0.24 ns per
 * element (bfloat16 3136-element run, spread, scalar w). */
typedef struct {
  __m512 nsc, nsc20, k, ke, ws, aw;
} bw_dx_bf16_consts16_t;

/* r and e for 16 lanes of x and dy as floats (xf unused without spread),
 * with ws and aw of their weights. */
KINLINE __m512 bw_dx_bf16_r16(const bw_dx_bf16_consts16_t *k, __m512 xf,
                              __m512 dyf, __m512 ws, __m512 aw,
                              const int spread, __m512 *e) {
  __m512 r = _mm512_fmadd_ps(dyf, ws, k->k);
  __m512 t = _mm512_fmadd_ps(_mm512_abs_ps(dyf), aw, k->ke);
  if (spread) {
    r = _mm512_fmadd_ps(xf, k->nsc, r);
    t = _mm512_fmadd_ps(_mm512_abs_ps(xf), k->nsc20, t);
  }
  *e = _mm512_fmadd_ps(_mm512_abs_ps(r), _mm512_set1_ps(0x1p-20f), t);
  return r;
}

/* ... for the 16 elements at x, dy, with their weights at wv. */
KINLINE __m512 bw_dx_bf16_lanes16(const bw_dx_bf16_consts16_t *k,
                                  const uint16_t *x, const uint16_t *dy,
                                  const double *wv, double s, const int spread,
                                  __m512 *e) {
  const __m512d vs = _mm512_set1_pd(s);
  __m256 lo = _mm512_cvtpd_ps(_mm512_mul_pd(_mm512_loadu_pd(wv), vs));
  __m256 hi = _mm512_cvtpd_ps(_mm512_mul_pd(_mm512_loadu_pd(wv + 8), vs));
  __m512 ws = _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1);
  __m512 aw = _mm512_fmadd_ps(_mm512_abs_ps(ws), _mm512_set1_ps(0x1p-20f),
                              _mm512_set1_ps((float)KERN_SUBNORMAL_SLACK));
  return bw_dx_bf16_r16(k, spread ? bf16_widen16(x) : ws, bf16_widen16(dy), ws,
                        aw, spread, e);
}

/* bf16_bins8 in 16 lanes: the bins of lo = r - e, and in *bad the lanes
 * where hi = r + e bins apart or r is NaN or infinite. */
KINLINE __m512i bf16_bins16(__m512 r, __m512 e, __mmask16 *bad) {
  const __m512i half = _mm512_set1_epi32(0x8000);
  __m512i lo = _mm512_add_epi32(_mm512_castps_si512(_mm512_sub_ps(r, e)), half);
  __m512i hi = _mm512_add_epi32(_mm512_castps_si512(_mm512_add_ps(r, e)), half);
  __mmask16 wild = _mm512_cmp_ps_mask(_mm512_abs_ps(r),
                                      _mm512_set1_ps(3.40282347e38f), _CMP_NLE_UQ);
  *bad = wild | _mm512_test_epi32_mask(_mm512_xor_si512(lo, hi),
                                       _mm512_set1_epi32((int)0xFFFF0000u));
  return _mm512_srli_epi32(lo, 16);
}

/* The loop for a weight per element (wv), 16 elements a step. */
KINLINE size_t bw_dx_bf16_loop16(const uint16_t *x, const uint16_t *dy,
                                 uint16_t *dx, size_t i, size_t n,
                                 const bw_dx_bf16_consts16_t *k,
                                 bw_dx_bf16_redo_t *redo, const double *wv,
                                 const int spread, const int ahead) {
  for (; i + 16 <= n; i += 16) {
    if (ahead && i % 32 == 0) { /* the next row's x and dy, a line each */
      prefetch_l2(x + i + n, 64);
      prefetch_l2(dy + i + n, 64);
    }
    __m512 e;
    __m512 r = bw_dx_bf16_lanes16(k, x + i, dy + i, wv + i, redo->s, spread, &e);
    __mmask16 bad;
    __m256i out = _mm512_cvtepi32_epi16(bf16_bins16(r, e, &bad));
    if (__builtin_expect(bad != 0, 0)) { /* before the store: dx may be dy */
      uint16_t lanes[16];
      memcpy(lanes, &out, sizeof lanes);
      redo->at = i;
      for (uint32_t left = bad; left;) {
        unsigned j = next_lane(&left);
        KFN(bw_dx_bf16_redo)(redo, j, lanes + j);
      }
      memcpy(&out, lanes, sizeof lanes);
    }
    _mm256_storeu_si256((__m256i *)(void *)(dx + i), out);
  }
  return i;
}

/* The loop for a scalar w, 32 elements a step, split as axpb's float
 * lanes are (kern_impl.h): one 64-byte load gives the even elements (raw
 * << 16) and the odd ones (raw & 0xFFFF0000), and the odd bins shifted
 * up over the even ones are the 32 results in order. */
KINLINE size_t bw_dx_bf16_loop32(const uint16_t *x, const uint16_t *dy,
                                 uint16_t *dx, size_t i, size_t n,
                                 const bw_dx_bf16_consts16_t *k,
                                 bw_dx_bf16_redo_t *redo, const int spread) {
  const __m512i high = _mm512_set1_epi32((int)0xFFFF0000u);
  for (; i + 32 <= n; i += 32) {
    __m512i rd = _mm512_loadu_si512((const void *)(dy + i));
    __m512i rx = spread ? _mm512_loadu_si512((const void *)(x + i)) : rd;
    __m512 e_even, e_odd;
    __m512 r_even = bw_dx_bf16_r16(k, _mm512_castsi512_ps(_mm512_slli_epi32(rx, 16)),
                                   _mm512_castsi512_ps(_mm512_slli_epi32(rd, 16)),
                                   k->ws, k->aw, spread, &e_even);
    __m512 r_odd = bw_dx_bf16_r16(k, _mm512_castsi512_ps(_mm512_and_si512(rx, high)),
                                  _mm512_castsi512_ps(_mm512_and_si512(rd, high)),
                                  k->ws, k->aw, spread, &e_odd);
    __mmask16 bad_even, bad_odd;
    __m512i b_even = bf16_bins16(r_even, e_even, &bad_even);
    __m512i b_odd = bf16_bins16(r_odd, e_odd, &bad_odd);
    __m512i out = _mm512_or_si512(b_even, _mm512_slli_epi32(b_odd, 16));
    if (__builtin_expect((bad_even | bad_odd) != 0, 0)) { /* before the store */
      uint16_t lanes[32];
      memcpy(lanes, &out, sizeof lanes);
      redo->at = i;
      for (uint32_t left = (uint32_t)bad_even | (uint32_t)bad_odd << 16; left;) {
        unsigned e = split_lane_element(next_lane(&left));
        KFN(bw_dx_bf16_redo)(redo, e, lanes + e);
      }
      memcpy(&out, lanes, sizeof lanes);
    }
    _mm512_storeu_si512((void *)(dx + i), out);
  }
  return i;
}
#endif

static void KFN(bw_dx_bf16_f)(const void *xv, const void *dyv, void *dxv,
                              size_t n, double shift, double s, double w,
                              const double *wv, double mean_g, double c,
                              int spread, int stream) {
  const uint16_t *x = xv, *dy = dyv;
  uint16_t *dx = dxv;
  size_t i = 0;
  const double sc = s * c, smg = s * mean_g;
  const double ck = spread ? fabs(sc * shift) + fabs(smg) : fabs(smg);
  int sc_ok = !spread || sc == 0.0 || (fabs(sc) >= 0x1p-100 && fabs(sc) <= 0x1p100);
  if (fabs(s) <= 0x1p100 && sc_ok && ck <= 0x1p100) { /* NaN fails */
    const float kf = (float)(spread ? sc * shift - smg : -smg);
    const float nsc = spread ? (float)-sc : 0.0f, ws = (float)(s * w);
    const float ke = float_at_least(0x1p-20 * fabsf(kf) + 0x1p-48 * ck +
                                    KERN_SUBNORMAL_SLACK);
    /* NaN or Inf w: r is NaN or Inf, every lane redone */
    const float aw = isfinite(ws) ? float_at_least(0x1p-20 * fabsf(ws) +
                                                   KERN_SUBNORMAL_SLACK)
                                  : ws;
    bw_dx_bf16_redo_t redo = {x, dy, wv, shift, s, w, mean_g, c, spread, 0};
#if KERN_BF16NE
    const bw_dx_bf16_consts16_t k = {
        .nsc = _mm512_set1_ps(nsc), .nsc20 = _mm512_set1_ps(fabsf(nsc) * 0x1p-20f),
        .k = _mm512_set1_ps(kf), .ke = _mm512_set1_ps(ke),
        .ws = _mm512_set1_ps(ws), .aw = _mm512_set1_ps(aw)};
    i = wv && spread && stream
            ? bw_dx_bf16_loop16(x, dy, dx, i, n, &k, &redo, wv, 1, 1)
        : wv && spread ? bw_dx_bf16_loop16(x, dy, dx, i, n, &k, &redo, wv, 1, 0)
        : wv           ? bw_dx_bf16_loop16(x, dy, dx, i, n, &k, &redo, wv, 0, 0)
        : spread     ? bw_dx_bf16_loop32(x, dy, dx, i, n, &k, &redo, 1)
                     : bw_dx_bf16_loop32(x, dy, dx, i, n, &k, &redo, 0);
#else
    const bw_dx_bf16_consts8_t k = {
        .nsc = _mm256_set1_ps(nsc), .nsc20 = _mm256_set1_ps(fabsf(nsc) * 0x1p-20f),
        .k = _mm256_set1_ps(kf), .ke = _mm256_set1_ps(ke),
        .ws = _mm256_set1_ps(ws), .aw = _mm256_set1_ps(aw)};
    i = wv && spread && stream
            ? bw_dx_bf16_loop8(x, dy, dx, i, n, &k, &redo, wv, 1, 1)
        : wv && spread ? bw_dx_bf16_loop8(x, dy, dx, i, n, &k, &redo, wv, 1, 0)
        : wv           ? bw_dx_bf16_loop8(x, dy, dx, i, n, &k, &redo, wv, 0, 0)
        : spread ? bw_dx_bf16_loop8(x, dy, dx, i, n, &k, &redo, NULL, 1, 0)
                 : bw_dx_bf16_loop8(x, dy, dx, i, n, &k, &redo, NULL, 0, 0);
#endif
  }
  /* the tail, or everything, by the double path */
  KFN(bw_dx_bf16)(x + i, dy + i, dx + i, n - i, shift, s, w, wv ? wv + i : NULL,
                  mean_g, c, spread, stream);
}
#define BW_DX_BF16 KFN(bw_dx_bf16_f)
#else
#define BW_DX_BF16 KFN(bw_dx_bf16)
#endif

/* The entries of the table (kern_impl.h's KERN_TABLE). */
#define KERN_BACKWARD_ENTRIES                                                  \
  .bw_sums = KVEC(bw_sums), .bw_centered_sums = KVEC(bw_centered_sums),        \
  .bw_centered_row_sums = KVEC(bw_centered_row_sums),                          \
  .bw_sumsq_row_sums = KVEC(bw_sumsq_row_sums),                                \
  .bw_row_sums = KVEC(bw_row_sums), .bw_dx_grads = KVEC(bw_dx_grads),          \
  .bw_dx = {[NORM_F32] = KFN(bw_dx_f32), [NORM_F64] = KFN(bw_dx_f64),          \
            [NORM_F16] = KFN(bw_dx_f16), [NORM_BF16] = BW_DX_BF16},
