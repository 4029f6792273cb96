/* kern_backward_impl.h -- the backward's loops of kern.h (bw_sums,
 * bw_row_sums, bw_dx), included by kern_impl.h and built with its helpers
 * (VW, KFN, the ld_ / st_ / e_ / s_ conversions, vfma, hsum) once per
 * target ISA. One set per dtype, x, dy and dx all of it; engine_backward
 * (backward.c) runs mixed dtypes as float64 chunks through the float64
 * set. Everything is in double lanes, as the scalar loops they replace
 * (bench/check_kern compares every table with a scalar reference).
 *
 * The helpers take their cases (a weight vector or not, which gradients,
 * the spread term, streaming stores) as constants once inlined, so each
 * loop is compiled without per-element tests of them. */

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
      vd d0 = ld_##dt(dy + i), d1 = ld_##dt(dy + i + VW);                      \
      vd d2 = ld_##dt(dy + i + 2 * VW), d3 = ld_##dt(dy + i + 3 * VW);         \
      g0 += d0;                                                                \
      g1 += d1;                                                                \
      g2 += d2;                                                                \
      g3 += d3;                                                                \
      p0 = vfma(d0, ld_##dt(x + i) - shift, p0);                               \
      p1 = vfma(d1, ld_##dt(x + i + VW) - shift, p1);                          \
      p2 = vfma(d2, ld_##dt(x + i + 2 * VW) - shift, p2);                      \
      p3 = vfma(d3, ld_##dt(x + i + 3 * VW) - shift, p3);                      \
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
      vd d0 = ld_##dt(dy + i), d1 = ld_##dt(dy + i + VW);                      \
      vd h0 = (ld_##dt(x + i) - shift) * s;                                    \
      vd h1 = (ld_##dt(x + i + VW) - shift) * s;                               \
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
    /* the cases of layer norm (both gradients, or none) and RMS norm (the  \
     * weight's only), with and without a weight; the rest in one loop */     \
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
 * gets dx = 0. Rounded once into the dtype. */
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
    const vd vw = (vd){0} + w;                                                 \
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
                                 wv ? ld_f64(wv + i) : (vd){0} + w, vfma_s));  \
    for (; i < n; i++)                                                         \
      s_##dt(dx + i, BW_DX_ELEM(e_##dt(x + i), e_##dt(dy + i),                 \
                                wv ? wv[i] : w, sfma));                        \
  }

/* vfma with a scalar b, broadcast */
KINLINE vd vfma_s(vd a, double b, vd c) { return vfma(a, (vd){0} + b, c); }

#define DEF_BACKWARD(dt, T)                                                    \
  DEF_BW_SUMS(dt, T)                                                           \
  DEF_BW_ROW_SUMS(dt, T)                                                       \
  DEF_BW_DX(dt, T)

DEF_BACKWARD(f32, float)
DEF_BACKWARD(f64, double)
DEF_BACKWARD(f16, uint16_t)
DEF_BACKWARD(bf16, uint16_t)

/* The entries of the table (kern_impl.h's KERN_TABLE). */
#define KERN_BACKWARD_ENTRIES                                                  \
  .bw_sums = KVEC(bw_sums), .bw_row_sums = KVEC(bw_row_sums),                  \
  .bw_dx = KVEC(bw_dx),
