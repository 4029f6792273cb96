/* check_kern.c -- checks that every kern.h table (base, avx2, avx512 where
 * the CPU has them) converts exactly like the scalar reference in dtype.c:
 * all 65536 half / bfloat16 patterns in, and millions of doubles out
 * (random bit patterns, values near half-format ties, overflow, denormals,
 * NaN, Inf), rounded once to float16 / bfloat16 / float32; and the
 * backward's loops of every table against a scalar reference.
 * Run: make bench-check (prints one line per table; exit 1 on a mismatch). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "kern.h"

static uint64_t rng(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static double pick(uint64_t *s) {
  uint64_t r = rng(s);
  double d;
  switch (r & 7) {
  case 0: memcpy(&d, &r, 8); return d; /* any bit pattern */
  case 1: { /* a float16 value plus a tiny nudge: near ties */
    uint16_t h = (uint16_t)(r >> 8);
    double v = norm_float_from_f16(h), u = norm_float_from_f16((uint16_t)(h + 1));
    return v + (u - v) * (0.5 + ldexp((double)(int64_t)(r >> 40) - 8388608, -40));
  }
  case 2: { /* same for bfloat16 */
    uint16_t h = (uint16_t)(r >> 8);
    double v = norm_float_from_bf16(h), u = norm_float_from_bf16((uint16_t)(h + 1));
    return v + (u - v) * (0.5 + ldexp((double)(int64_t)(r >> 40) - 8388608, -40));
  }
  case 3: return ldexp((double)(r >> 11), -(int)(r % 200)); /* small / denormal */
  case 4: return ldexp((double)(r >> 11), (int)(r % 80)); /* overflow */
  case 5: { /* a float plus half an ulp: double-rounding traps */
    uint32_t f = (uint32_t)(r >> 16);
    float a, b;
    memcpy(&a, &f, 4);
    f++;
    memcpy(&b, &f, 4);
    return (double)a + ((double)b - (double)a) * 0.5;
  }
  default: return (double)(int64_t)r * 0x1p-60;
  }
}

static int check(const kern_t *k) {
  int bad = 0;
  static uint16_t h[65536];
  static double d[65536], ref[65536];
  for (int i = 0; i < 65536; i++) h[i] = (uint16_t)i;
  for (int t = 0; t < 2; t++) { /* loads */
    norm_dtype_t dt = t ? NORM_BF16 : NORM_F16;
    k->to_double[dt](h, 65536, d);
    for (int i = 0; i < 65536; i++) {
      double want = t ? norm_float_from_bf16(h[i]) : norm_float_from_f16(h[i]);
      if (memcmp(&want, &d[i], 8) && !(isnan(want) && isnan(d[i]))) {
        if (bad++ < 5) printf("  %s load %04x: %a want %a\n", k->name, i, d[i], want);
      }
    }
  }
  uint64_t s = 1;
  static uint16_t out16[65536];
  static float out32[65536];
  for (int round = 0; round < 100; round++) { /* stores */
    for (int i = 0; i < 65536; i++) ref[i] = pick(&s);
    k->axpb[NORM_F64][NORM_F16](ref, out16, 65536, 0.0, 1.0, 0.0, round & 1);
    for (int i = 0; i < 65536; i++)
      if (out16[i] != norm_f16_from_double(ref[i]) && bad++ < 5)
        printf("  %s f16 %a: %04x want %04x\n", k->name, ref[i], out16[i],
               norm_f16_from_double(ref[i]));
    k->axpb[NORM_F64][NORM_BF16](ref, out16, 65536, 0.0, 1.0, 0.0, round & 1);
    for (int i = 0; i < 65536; i++)
      if (out16[i] != norm_bf16_from_double(ref[i]) && bad++ < 5)
        printf("  %s bf16 %a: %04x want %04x\n", k->name, ref[i], out16[i],
               norm_bf16_from_double(ref[i]));
    k->axpb[NORM_F64][NORM_F32](ref, out32, 65536, 0.0, 1.0, 0.0, round & 1);
    for (int i = 0; i < 65536; i++) {
      float want = (float)ref[i];
      if (memcmp(&want, &out32[i], 4) && !(isnan(want) && isnan(out32[i])) &&
          bad++ < 5)
        printf("  %s f32 %a: %a want %a\n", k->name, ref[i], out32[i], want);
    }
  }
  printf("%-10s loads 2 x 65536, stores 3 x %d: %s\n", k->name, 100 * 65536,
         bad ? "MISMATCH" : "exact");
  return bad;
}

/* One random bfloat16 row for the float-lane checks: n elements, the mean
 * as shift, a scale a (1/sd times a factor) and an offset c; the cruel
 * kinds among them (see check_axpb_bf16). */
enum { BF16_ROW_MAX = 4099 };
static size_t bf16_row(uint64_t *s, uint16_t *x, double *shift, double *a,
                       double *c) {
  uint64_t k = rng(s);
  double mean = ldexp((double)(int64_t)rng(s) * 0x1p-63, (int)(k % 40) - 20);
  double sd = fabs(mean) * ldexp(1.0, -(int)(k >> 8) % 30) + 1e-30;
  if (k % 7 == 0) sd = ldexp(1.0, (int)(k >> 16) % 60 - 30);
  size_t n = 16 + rng(s) % 200;
  for (size_t i = 0; i < n; i++) {
    double u = ((double)(rng(s) >> 11) * 0x1p-53 - 0.5) * 3.4;
    x[i] = norm_bf16_from_double(mean + sd * u);
    uint64_t z = rng(s);
    if (z % 997 == 0) x[i] = (uint16_t)(z >> 16); /* any pattern */
    if (k % 11 == 0) x[i] = x[0];                 /* constant row */
  }
  double sum = 0;
  for (size_t i = 0; i < n; i++) sum += norm_float_from_bf16(x[i]);
  *shift = isfinite(sum) ? sum / (double)n : mean;
  *a = ((k >> 24) % 5 == 0 ? 1.0 : ldexp(1.0 + (double)(k % 1000) / 997.0,
                                         (int)(k >> 32) % 20 - 4)) /
       sd;
  if (k % 13 == 0) /* tiny scales: a itself subnormal as a float */
    *a = ldexp(1.0 + (double)(k % 1000) / 997.0, -(int)((k >> 20) % 40) - 110);
  *c = (k >> 40) % 3 == 0 ? 0.0
                          : ldexp((double)(int64_t)rng(s) * 0x1p-63,
                                  (int)(k >> 48) % 12 - 4);
  return n;
}

static void bf16_verdict(const char *what, const kern_t *fast,
                         const kern_t *ref, long rows, long bad) {
  printf("%-10s bf16 -> bf16 %s float lanes vs %s double lanes, %ld rows: %s\n",
         fast->name, what, ref->name, rows, bad ? "MISMATCH" : "identical");
}

/* Signed zeros through axpb and affine, every dtype pair: x = shift with a
 * negative scale gives (x - shift) * scale = -0, and with a bias of -0 the
 * result must be -0 in the vector body as in the scalar tail (a vector
 * splat of (vd){0} + c would make it +0). */
static int check_signed_zero(const kern_t *k) {
  static unsigned char x[64 * 8], y[64 * 8];
  static double wneg[64], bneg[64];
  int bad = 0;
  for (int i = 0; i < 64; i++) wneg[i] = -1.0, bneg[i] = -0.0;
  for (int xt = 0; xt < NORM_DTYPE_COUNT; xt++)
    for (int yt = 0; yt < NORM_DTYPE_COUNT; yt++) {
      for (int i = 0; i < 64; i++) norm_tensor_set(&(norm_tensor_t){.dtype = xt, .rank = 1, .shape = {64}, .data = x}, (size_t)i, 1.5);
      for (int form = 0; form < 3; form++) {
        memset(y, 0x55, sizeof y);
        if (form == 0) k->axpb[xt][yt](x, y, 37, 1.5, -2.0, -0.0, 0);
        else if (form == 1) k->affine[xt][yt](x, y, 37, 1.5, 2.0, wneg, bneg, 0);
        else k->affine[xt][yt](x, y, 37, 1.5, -2.0, NULL, bneg, 0);
        for (size_t i = 0; i < 37; i++) {
          double v = norm_tensor_get(&(norm_tensor_t){.dtype = yt, .rank = 1, .shape = {64}, .data = y}, i);
          if (!(v == 0.0 && signbit(v)) && bad++ < 5)
            printf("  %s %s %s -> %s [%zu]: %a, want -0\n", k->name,
                   form ? "affine" : "axpb", norm_dtype_name(xt), norm_dtype_name(yt), i, v);
        }
      }
    }
  printf("%-10s signed zeros through axpb / affine, every dtype pair: %s\n", k->name,
         bad ? "MISMATCH" : "ok");
  return bad != 0;
}

/* The bfloat16 -> bfloat16 axpb of `fast` (float lanes with a proof, see
 * kern_impl.h) against the double lanes of `ref`, bit for bit, on rows
 * like those of batch, group and instance norm with the statistics of
 * them (shift = the mean, a = scale * w, c = b), including |mean| >> std,
 * constant rows, huge and tiny scales (down to subnormal floats), NaN /
 * Inf / subnormal elements. */
static int check_axpb_bf16(const kern_t *ref, const kern_t *fast) {
  static uint16_t x[BF16_ROW_MAX], y0[BF16_ROW_MAX], y1[BF16_ROW_MAX + 8];
  uint64_t s = 7;
  long bad = 0, rows = 200000;
  for (long r = 0; r < rows; r++) {
    double shift, a, c;
    size_t n = bf16_row(&s, x, &shift, &a, &c);
    if (r % 53 == 0 && shift != 0 && isfinite(shift)) {
      /* c = shift a: C = c - shift a is 0 and r = x A, but the double
       * path's t rounds x - shift, and for x below 2^-53 |shift| it is 0
       * (folded form: |shift a| in [1, 4)) */
      a = ldexp(1.0 + (double)(r % 97) / 97.0, -ilogb(shift));
      c = shift * a;
      for (size_t i = 0; i < n; i += 3)
        x[i] = norm_bf16_from_double(ldexp(i & 1 ? -1.5 : 1.25,
                                           ilogb(shift) - 40 - (int)(i % 40)));
    }
    ref->axpb[NORM_BF16][NORM_BF16](x, y0, n, shift, a, c, 0);
    fast->axpb[NORM_BF16][NORM_BF16](x, y1 + (r & 7), n, shift, a, c, r & 1);
    memmove(y1, y1 + (r & 7), n * sizeof y1[0]); /* misaligned streaming too */
    for (size_t i = 0; i < n; i++)
      if (y0[i] != y1[i] && bad++ < 5)
        printf("  %s bf16 axpb x=%04x shift=%a a=%a c=%a: %04x want %04x\n",
               fast->name, x[i], shift, a, c, y1[i], y0[i]);
  }
  bf16_verdict("axpb", fast, ref, rows, bad);
  return bad != 0;
}

/* A weight or bias entry that the engine never passes (it keeps float
 * copies only of finite ones) but the loop must still get right: NaN,
 * +-Inf, a subnormal float, +-0. */
static float odd_entry(uint64_t z) {
  switch (z % 6) {
  case 0: return NAN;
  case 1: return INFINITY;
  case 2: return -INFINITY;
  case 3: return ldexp(1.0 + (double)(z >> 8 & 127) / 128.0, -140); /* subnormal */
  case 4: return 0.0f;
  default: return -0.0f;
  }
}

/* The same for layer and RMS norm's apply with a weight and a bias per
 * element (fast->affine_bf16, floats, against ref->affine with their
 * doubles): weights from subnormal to 2^127, biases from 0 to 2^127
 * and of either sign (products overflow floats), rows of zero weights,
 * NaN / Inf / subnormal / signed-zero entries among them, weight only
 * (RMS norm), bias only, and both; one row in four in place (y == x). */
static int check_affine_bf16(const kern_t *ref, const kern_t *fast) {
  static uint16_t x[BF16_ROW_MAX], y0[BF16_ROW_MAX], y1[BF16_ROW_MAX + 8];
  static float wf[BF16_ROW_MAX], bf[BF16_ROW_MAX];
  static double wd[BF16_ROW_MAX], bd[BF16_ROW_MAX];
  uint64_t s = 13;
  long bad = 0, rows = 200000;
  for (long r = 0; r < rows; r++) {
    double shift, scale, c;
    size_t n = bf16_row(&s, x, &shift, &scale, &c);
    uint64_t q = rng(&s);
    int we = (int)(q % 168) - 40, be = (int)(q >> 8) % 148 - 20;
    if (q % 17 == 0) we = -135; /* products in the subnormal floats */
    int zero_w = q % 19 == 0; /* a row of zero weights */
    unsigned odd_every = (q >> 44) % 3 == 0 ? 1 + (unsigned)(q >> 48) % 64 : 0;
    for (size_t i = 0; i < n; i++) {
      double u = (double)(rng(&s) >> 11) * 0x1p-53;
      wf[i] = zero_w ? 0.0f : norm_float_from_bf16(norm_bf16_from_double(ldexp(0.5 + u, we)));
      double v = ((double)(rng(&s) >> 11) * 0x1p-53 - 0.5) * 2;
      bf[i] = (q >> 20) % 4 == 0 ? 0.0f : norm_float_from_bf16(norm_bf16_from_double(ldexp(v, be)));
      uint64_t z = rng(&s);
      if (odd_every && z % odd_every == 0) {
        if (z >> 32 & 1) wf[i] = odd_entry(z >> 33);
        else bf[i] = odd_entry(z >> 33);
      }
      wd[i] = wf[i];
      bd[i] = bf[i];
    }
    int form = (int)((q >> 32) % 3); /* 0: both, 1: weight only, 2: bias only */
    const float *w = form == 2 ? NULL : wf, *b = form == 1 ? NULL : bf;
    double sh = form == 1 && (q >> 40) % 2 ? 0.0 : shift; /* RMS: no shift */
    ref->affine[NORM_BF16][NORM_BF16](x, y0, n, sh, scale, w ? wd : NULL,
                                      b ? bd : NULL, 0);
    /* max |w|, NaN if one is NaN; now and then a larger bound, or none */
    double w_max = 0;
    for (size_t i = 0; w && i < n; i++)
      w_max = isnan(w[i]) || isnan(w_max) ? NAN : fmax(w_max, fabs(w[i]));
    if (r % 5 == 1) w_max = r % 3 ? 4 * w_max : INFINITY;
    if (r % 4 == 3) { /* in place: y is x */
      memcpy(y1, x, n * sizeof y1[0]);
      fast->affine_bf16(y1, y1, n, sh, scale, w, b, w_max, (int)(r & 1));
    } else {
      fast->affine_bf16(x, y1 + (r & 7), n, sh, scale, w, b, w_max, (int)(r & 1));
      memmove(y1, y1 + (r & 7), n * sizeof y1[0]);
    }
    for (size_t i = 0; i < n; i++)
      if (y0[i] != y1[i] && bad++ < 5)
        printf("  %s bf16 affine x=%04x shift=%a scale=%a w=%a b=%a: %04x "
               "want %04x\n",
               fast->name, x[i], sh, scale, w ? w[i] : 1.0, b ? b[i] : 0.0,
               y1[i], y0[i]);
  }
  bf16_verdict("affine", fast, ref, rows, bad);
  return bad != 0;
}

/* The float-lane float32 apply against the exact result (in double) on
 * random rows, |mean| up to 1e6 std: every output within the bound that
 * engine.h proves, 5.4e-7 max(1, |y|), given |b| <= 1. Prints the largest
 * error seen relative to that scale. */
static int check_affine_f32(const kern_t *k) {
  enum { N = 1037 };
  static float x[N], y[N + 16], w[N], b[N];
  uint64_t s = 11;
  double worst = 0, worst_axpb = 0;
  long rows = 20000;
  for (long r = 0; r < rows; r++) {
    uint64_t q = rng(&s);
    double mean = ldexp((double)(int64_t)rng(&s) * 0x1p-63, (int)(q % 40) - 10);
    double sd = ldexp(1.0, (int)(q >> 8) % 30 - 15);
    size_t n = 1 + rng(&s) % N;
    double sum = 0, sq = 0;
    for (size_t i = 0; i < n; i++) {
      x[i] = (float)(mean + sd * ((double)(rng(&s) >> 11) * 0x1p-53 - 0.5) * 3.4);
      w[i] = (float)ldexp((double)(rng(&s) >> 11) * 0x1p-53 + 0.5, (int)(q >> 16) % 8 - 4);
      b[i] = (float)((double)(rng(&s) >> 11) * 0x1p-53 * 2 - 1);
      sum += x[i];
    }
    double mu = sum / (double)n;
    for (size_t i = 0; i < n; i++) sq += (x[i] - mu) * (x[i] - mu);
    double scale = 1.0 / sqrt(sq / (double)n + 1e-5);
    int with_b = (q >> 24) % 3 != 0, with_w = (q >> 24) % 3 != 1;
    float *yo = y + (r & 15); /* any alignment */
    k->affine_f32(x, yo, n, mu, scale, with_w ? w : NULL, with_b ? b : NULL,
                  (int)(r & 1));
    for (size_t i = 0; i < n; i++) {
      double t = (x[i] - mu) * scale * (with_w ? w[i] : 1.0) + (with_b ? b[i] : 0.0);
      double e = fabs(yo[i] - t) / fmax(1.0, fabs(t));
      if (!(e <= worst)) worst = e;
    }
    /* axpb_f32: one weight and bias for the run (a channel's) */
    float ws = with_w ? w[r % n] : 1.0f, bs = with_b ? b[r % n] : 0.0f;
    k->axpb_f32(x, yo, n, mu, scale, ws, bs, (int)(r >> 1 & 1));
    for (size_t i = 0; i < n; i++) {
      double t = (x[i] - mu) * scale * ws + bs;
      double e = fabs(yo[i] - t) / fmax(1.0, fabs(t));
      if (!(e <= worst_axpb)) worst_axpb = e;
    }
  }
  int bad = !(worst <= 5.4e-7) || !(worst_axpb <= 5.4e-7);
  printf("%-10s float32 apply in float lanes, %ld rows: max error %.2g (affine_f32), "
         "%.2g (axpb_f32) x max(1, |y|) (bound 5.4e-7): %s\n",
         k->name, rows, worst, worst_axpb, bad ? "EXCEEDED" : "ok");
  return bad;
}

/* The double path of the AVX2 table's bfloat16 axpb, one element at a
 * time: RNE_bf16(fma(x - shift, a, c)), what its vector body and tail
 * compute (kern_impl.h's AXPB_LOOPS and sfma), as the reference for that
 * table's float-lane path. */
static void axpb_bf16_fma_ref(const void *xv, void *yv, size_t n, double shift,
                              double a, double c, int stream) {
  const uint16_t *x = xv;
  uint16_t *y = yv;
  (void)stream;
  for (size_t i = 0; i < n; i++)
    y[i] = norm_bf16_from_double(
        fma((double)norm_float_from_bf16(x[i]) - shift, a, c));
}

/* The double path of the AVX2 table's bfloat16 bw_dx, one element at a
 * time: RNE_bf16(fma(x - shift, -(s c), s (w dy - mean_g))) (without the
 * spread term RNE_bf16(s (w dy - mean_g))), what its vector body and tail
 * compute (kern_backward_impl.h's BW_DX_ELEM), as the reference for that
 * table's float-lane path. */
static void bw_dx_bf16_fma_ref(const void *xv, const void *dyv, void *dxv,
                               size_t n, double shift, double s, double w,
                               const double *wv, double mean_g, double c,
                               int spread, int stream) {
  const uint16_t *x = xv, *dy = dyv;
  uint16_t *dx = dxv;
  (void)stream;
  for (size_t i = 0; i < n; i++) {
    double d = s * ((wv ? wv[i] : w) * norm_float_from_bf16(dy[i]) - mean_g);
    if (spread) d = fma(norm_float_from_bf16(x[i]) - shift, -(s * c), d);
    dx[i] = norm_bf16_from_double(d);
  }
}

/* Where two NaNs meet (a NaN w times a NaN dy), which payload an x86
 * product keeps follows the operand order the compiler chose, in the
 * kernel's scalar tail as here: any NaN matches any NaN. */
static int bf16_is_nan(uint16_t h) { return (h & 0x7FFF) > 0x7F80; }

/* The bfloat16 bw_dx of `fast` (float lanes with a proof, see
 * kern_backward_impl.h) against the double lanes of `ref`, bit for bit, on
 * bf16_row's cruel rows (|mean| >> std, constant rows, tiny and huge
 * scales, NaN / Inf / subnormal x) with dy of any scale (NaN / Inf /
 * subnormal among them), mean_g from the row's own w dy (a constant row's
 * terms cancel) or random, c from 0 and tiny to huge, a scalar w or one
 * per element (odd entries: NaN, Inf, subnormal, zero), each with and
 * without the spread term; one row in four in place (dx == dy). */
static int check_bw_dx_bf16(const kern_t *ref, const kern_t *fast) {
  static uint16_t x[BF16_ROW_MAX], dy[BF16_ROW_MAX], dx0[BF16_ROW_MAX],
      dx1[BF16_ROW_MAX + 8];
  static double wv[BF16_ROW_MAX];
  uint64_t s = 17;
  long bad = 0, rows = 200000;
  for (long r = 0; r < rows; r++) {
    double shift, scale, c;
    size_t n = bf16_row(&s, x, &shift, &scale, &c);
    uint64_t q = rng(&s);
    int de = (int)(q % 80) - 40, we = (int)(q >> 8) % 60 - 30;
    unsigned odd_every = (q >> 44) % 3 == 0 ? 1 + (unsigned)(q >> 48) % 64 : 0;
    int per = (q >> 16) & 1, spread = (q >> 17) & 1;
    double sum_g = 0;
    for (size_t i = 0; i < n; i++) {
      double u = (double)(rng(&s) >> 11) * 0x1p-53 - 0.5;
      dy[i] = norm_bf16_from_double(ldexp(u, de));
      if ((q >> 18) % 7 == 0) dy[i] = dy[0]; /* constant dy */
      wv[i] = ldexp(0.5 + (double)(rng(&s) >> 11) * 0x1p-53, we);
      uint64_t z = rng(&s);
      if (odd_every && z % odd_every == 0) {
        if (z >> 32 & 1) dy[i] = (uint16_t)(z >> 40); /* any pattern */
        else wv[i] = odd_entry(z >> 33);
      }
      sum_g += (per ? wv[i] : 1.0) * norm_float_from_bf16(dy[i]);
    }
    double w = per ? 1.0 : ldexp(0.5 + (double)(q >> 53) / 2048.0, we);
    if (!per && (q >> 30) % 11 == 0) w = odd_entry(q >> 33);
    double mean_g = (q >> 20) % 3 == 0 ? (double)(int64_t)rng(&s) * 0x1p-63
                                       : sum_g / (double)n * (per ? 1.0 : w);
    switch ((q >> 24) % 6) { /* c: the variance term's coefficient */
    case 0: c = 0.0; break;
    case 1: c = ldexp(c, -(int)(q >> 36) % 140); break; /* tiny */
    case 2: c = ldexp(c, (int)(q >> 36) % 120); break;  /* huge */
    default: break;
    }
    const double *wp = per ? wv : NULL;
    ref->bw_dx[NORM_BF16](x, dy, dx0, n, shift, scale, w, wp, mean_g, c,
                          spread, 0);
    if (r % 4 == 3) { /* in place: dx is dy */
      memcpy(dx1, dy, n * sizeof dx1[0]);
      fast->bw_dx[NORM_BF16](x, dx1, dx1, n, shift, scale, w, wp, mean_g, c,
                             spread, (int)(r & 1));
    } else {
      fast->bw_dx[NORM_BF16](x, dy, dx1 + (r & 7), n, shift, scale, w, wp,
                             mean_g, c, spread, (int)(r & 1));
      memmove(dx1, dx1 + (r & 7), n * sizeof dx1[0]);
    }
    for (size_t i = 0; i < n; i++)
      if (dx0[i] != dx1[i] && !(bf16_is_nan(dx0[i]) && bf16_is_nan(dx1[i])) &&
          bad++ < 5)
        printf("  %s bf16 bw_dx x=%04x dy=%04x shift=%a s=%a w=%a mean_g=%a "
               "c=%a spread=%d: %04x want %04x\n",
               fast->name, x[i], dy[i], shift, scale, wp ? wp[i] : w, mean_g,
               c, spread, dx1[i], dx0[i]);
  }
  bf16_verdict("bw_dx", fast, ref, rows, bad);
  return bad != 0;
}

/* ---- the backward's loops (bw_sums, bw_row_sums, bw_dx) ----------------- */

enum { BW_MAX = 1200 };

/* v rounded to dtype dt, stored at element i of p; its value back. */
static double bw_put(norm_dtype_t dt, void *p, size_t i, double v) {
  switch (dt) {
  case NORM_F32: return ((float *)p)[i] = (float)v;
  case NORM_F64: return ((double *)p)[i] = v;
  case NORM_F16:
    return norm_float_from_f16(((uint16_t *)p)[i] = norm_f16_from_double(v));
  default:
    return norm_float_from_bf16(((uint16_t *)p)[i] = norm_bf16_from_double(v));
  }
}

static double bw_get(norm_dtype_t dt, const void *p, size_t i) {
  switch (dt) {
  case NORM_F32: return ((const float *)p)[i];
  case NORM_F64: return ((const double *)p)[i];
  case NORM_F16: return norm_float_from_f16(((const uint16_t *)p)[i]);
  default: return norm_float_from_bf16(((const uint16_t *)p)[i]);
  }
}

static double unit(uint64_t *s) { return (double)(rng(s) >> 11) * 0x1p-53; }

/* |got - want| within the rounding of n double terms of magnitude sum_abs
 * (any order of summation, fused or not: n * 2^-52 of it), plus tiny. */
static int bw_close(double got, long double want, long double sum_abs, size_t n) {
  long double band = ((long double)n + 4) * 0x1p-52L * sum_abs + 1e-300L;
  return fabsl((long double)got - want) <= band;
}

/* Every table's backward loops against a scalar long double reference, for
 * each dtype (x, dy and dx of it), lengths 1 to BW_MAX (odd ones and
 * vector tails), dx at any alignment and with streaming stores asked for,
 * weights per element or one scalar, with and without the spread term
 * and each gradient. Sums must be within the rounding of their terms; dx
 * must be what the dtype rounds some value within 2^-50 of the terms'
 * magnitude around the exact one to (one rounding into the dtype, as the
 * double loops give). */
static int check_backward(const kern_t *k) {
  /* dx: room for the largest offset below, 31 elements of 8 bytes */
  static unsigned char x[BW_MAX * 8], dy[BW_MAX * 8], dx[BW_MAX * 8 + 32 * 8];
  static double xv[BW_MAX], dyv[BW_MAX], w[BW_MAX], gw[BW_MAX], gb[BW_MAX];
  static long double gw0[BW_MAX], gb0[BW_MAX];
  uint64_t s = 29;
  long bad = 0, runs = 0;
  for (int dti = 0; dti < 4; dti++) {
    norm_dtype_t dt = (norm_dtype_t[]){NORM_F32, NORM_F64, NORM_F16, NORM_BF16}[dti];
    size_t size = norm_dtype_size(dt);
    for (int r = 0; r < 3000; r++, runs++) {
      uint64_t q = rng(&s);
      size_t n = r < 64 ? (size_t)r + 1 : 1 + rng(&s) % BW_MAX;
      double mean = ldexp(unit(&s) - 0.5, (int)(q % 12) - 4);
      double sd = ldexp(0.5 + unit(&s), (int)(q >> 8) % 8 - 4);
      for (size_t i = 0; i < n; i++) {
        xv[i] = bw_put(dt, x, i, mean + sd * (unit(&s) - 0.5) * 3.4);
        dyv[i] = bw_put(dt, dy, i, unit(&s) * 2 - 1);
        w[i] = (q >> 16) % 4 ? 0.5 + unit(&s) * 1.5 : 1.0;
        gw0[i] = gw[i] = unit(&s) - 0.5;
        gb0[i] = gb[i] = unit(&s) - 0.5;
      }
      double shift = mean, sc = 1.0 / sd, mean_g = unit(&s) - 0.5;
      double c = ldexp(unit(&s) - 0.5, -(int)(q >> 20) % 12);
      int spread = (q >> 24) & 1, per = (q >> 25) & 1, stream = (q >> 26) & 1;
      int with_gw = (q >> 27) & 1, with_gb = (q >> 28) & 1;
      double ws = per ? 1.0 : 0.5 + unit(&s);
      /* bw_sums */
      double o[2];
      long double r0 = 0, r1 = 0, a0 = 0, a1 = 0;
      k->bw_sums[dt](x, dy, n, shift, o);
      for (size_t i = 0; i < n; i++) {
        long double d = dyv[i], t = d * ((long double)xv[i] - shift);
        r0 += d, a0 += fabsl(d), r1 += t, a1 += fabsl(t);
      }
      if ((!bw_close(o[0], r0, a0, n) || !bw_close(o[1], r1, a1, n)) && bad++ < 5)
        printf("  %s bw_sums %s n=%zu: %a %a want %La %La\n", k->name,
               norm_dtype_name(dt), n, o[0], o[1], r0, r1);
      /* bw_centered_sums: centered's bits, and bw_sums' two sums around
       * the same mu on either side of a cut anywhere in [0, n] */
      {
        size_t cut = r % 5 == 0 ? n : r % 5 == 1 ? 0 : rng(&s) % (n + 1);
        double mu = shift + sd * (unit(&s) - 0.5), c0[2], c1[2], p4[4];
        k->centered[dt](x, n, mu, 0, c0);
        k->bw_centered_sums[dt](x, dy, n, mu, cut, r % 2 ? 64 : 0, c1, p4);
        if (memcmp(c0, c1, sizeof c0) != 0 && bad++ < 5)
          printf("  %s bw_centered_sums %s n=%zu: %a %a, centered %a %a\n",
                 k->name, norm_dtype_name(dt), n, c1[0], c1[1], c0[0], c0[1]);
        k->centered[dt](x, n, mu, 64, c1); /* prefetching: the same bits */
        if (memcmp(c0, c1, sizeof c0) != 0 && bad++ < 5)
          printf("  %s centered %s n=%zu with ahead: %a %a, without %a %a\n",
                 k->name, norm_dtype_name(dt), n, c1[0], c1[1], c0[0], c0[1]);
        long double ps[4] = {0}, pa[4] = {0};
        for (size_t i = 0; i < n; i++) {
          size_t h = i < cut ? 0 : 2;
          long double d = dyv[i], t = d * ((long double)xv[i] - mu);
          ps[h] += d, pa[h] += fabsl(d), ps[h + 1] += t, pa[h + 1] += fabsl(t);
        }
        for (int h = 0; h < 4; h++)
          if (!bw_close(p4[h], ps[h], pa[h], n) && bad++ < 5)
            printf("  %s bw_centered_sums %s n=%zu cut=%zu [%d]: %a want %La\n",
                   k->name, norm_dtype_name(dt), n, cut, h, p4[h], ps[h]);
      }
      const double *wp = per ? w : NULL;
      /* bw_centered_row_sums: centered's bits, and sum(w dy), sum(w dy (x -
       * mu)) around the same mu */
      {
        double mu = shift + sd * (unit(&s) - 0.5), c0[2], c1[2], p2[2];
        k->centered[dt](x, n, mu, 0, c0);
        k->bw_centered_row_sums[dt](x, dy, n, mu, wp, NULL, r % 2 ? 64 : 0, c1, p2);
        if (memcmp(c0, c1, sizeof c0) != 0 && bad++ < 5)
          printf("  %s bw_centered_row_sums %s n=%zu: %a %a, centered %a %a\n",
                 k->name, norm_dtype_name(dt), n, c1[0], c1[1], c0[0], c0[1]);
        long double ps[2] = {0}, pa[2] = {0};
        for (size_t i = 0; i < n; i++) {
          long double d = dyv[i] * (wp ? w[i] : 1.0);
          long double t = d * ((long double)xv[i] - mu);
          ps[0] += d, pa[0] += fabsl(d), ps[1] += t, pa[1] += fabsl(t);
        }
        for (int h = 0; h < 2; h++)
          if (!bw_close(p2[h], ps[h], pa[h], n) && bad++ < 5)
            printf("  %s bw_centered_row_sums %s n=%zu [%d]: %a want %La\n",
                   k->name, norm_dtype_name(dt), n, h, p2[h], ps[h]);
      }
      /* bw_sumsq_row_sums: sumsq's bits, and sum(w dy), sum(w dy x) */
      {
        double p2[2], sq0 = k->sumsq[dt](x, n, r % 2 ? 64 : 0);
        double sq1 = k->bw_sumsq_row_sums[dt](x, dy, n, wp, NULL, r % 2 ? 64 : 0, p2);
        if (memcmp(&sq0, &sq1, sizeof sq0) != 0 && bad++ < 5)
          printf("  %s bw_sumsq_row_sums %s n=%zu: %a, sumsq %a\n", k->name,
                 norm_dtype_name(dt), n, sq1, sq0);
        long double ps[2] = {0}, pa[2] = {0};
        for (size_t i = 0; i < n; i++) {
          long double d = dyv[i] * (wp ? w[i] : 1.0), t = d * xv[i];
          ps[0] += d, pa[0] += fabsl(d), ps[1] += t, pa[1] += fabsl(t);
        }
        for (int h = 0; h < 2; h++)
          if (!bw_close(p2[h], ps[h], pa[h], n) && bad++ < 5)
            printf("  %s bw_sumsq_row_sums %s n=%zu [%d]: %a want %La\n",
                   k->name, norm_dtype_name(dt), n, h, p2[h], ps[h]);
      }
      /* the same two with the weights as floats: the bits of the same
       * weights as doubles (w rounded to float for both) */
      static float wfl[BW_MAX];
      static double wfd[BW_MAX];
      for (size_t i = 0; i < n; i++) wfd[i] = wfl[i] = (float)w[i];
      if (per) {
        double mu = shift + sd * (unit(&s) - 0.5), c0[2], c1[2], p0[2], p1[2];
        k->bw_centered_row_sums[dt](x, dy, n, mu, wfd, NULL, 0, c0, p0);
        k->bw_centered_row_sums[dt](x, dy, n, mu, NULL, wfl, 64, c1, p1);
        if ((memcmp(c0, c1, sizeof c0) || memcmp(p0, p1, sizeof p0)) &&
            bad++ < 5)
          printf("  %s bw_centered_row_sums %s n=%zu: float weights %a %a, "
                 "double %a %a\n", k->name, norm_dtype_name(dt), n, p1[0],
                 p1[1], p0[0], p0[1]);
        double q0 = k->bw_sumsq_row_sums[dt](x, dy, n, wfd, NULL, 0, p0);
        double q1 = k->bw_sumsq_row_sums[dt](x, dy, n, NULL, wfl, 64, p1);
        if ((memcmp(&q0, &q1, sizeof q0) || memcmp(p0, p1, sizeof p0)) &&
            bad++ < 5)
          printf("  %s bw_sumsq_row_sums %s n=%zu: float weights %a %a, "
                 "double %a %a\n", k->name, norm_dtype_name(dt), n, p1[0],
                 p1[1], p0[0], p0[1]);
      }
      /* bw_row_sums */
      static double gw1[BW_MAX], gb1[BW_MAX]; /* the gradients before it */
      memcpy(gw1, gw, n * sizeof gw[0]);
      memcpy(gb1, gb, n * sizeof gb[0]);
      k->bw_row_sums[dt](x, dy, n, shift, sc, wp, with_gw ? gw : NULL,
                         with_gb ? gb : NULL, o);
      r0 = r1 = a0 = a1 = 0;
      for (size_t i = 0; i < n; i++) {
        long double d = dyv[i], h = ((long double)xv[i] - shift) * sc;
        long double g = d * (wp ? w[i] : 1.0);
        r0 += g, a0 += fabsl(g), r1 += g * h, a1 += fabsl(g * h);
        if (with_gw && !bw_close(gw[i], gw0[i] + d * h, fabsl(gw0[i]) + fabsl(d * h), 2) &&
            bad++ < 5)
          printf("  %s bw_row_sums %s gw[%zu]: %a\n", k->name, norm_dtype_name(dt), i, gw[i]);
        if (with_gb && !bw_close(gb[i], gb0[i] + d, fabsl(gb0[i]) + fabsl(d), 2) &&
            bad++ < 5)
          printf("  %s bw_row_sums %s gb[%zu]: %a\n", k->name, norm_dtype_name(dt), i, gb[i]);
      }
      if ((!bw_close(o[0], r0, a0, n) || !bw_close(o[1], r1, a1, n)) && bad++ < 5)
        printf("  %s bw_row_sums %s n=%zu: %a %a want %La %La\n", k->name,
               norm_dtype_name(dt), n, o[0], o[1], r0, r1);
      /* bw_dx, dx at any element offset within a 64-byte line */
      unsigned char *out = dx + (rng(&s) % 32) * size;
      k->bw_dx[dt](x, dy, out, n, shift, sc, ws, wp, mean_g, c, spread, stream);
      for (size_t i = 0; i < n; i++) {
        long double wi = wp ? w[i] : ws, h = ((long double)xv[i] - shift) * sc;
        long double t1 = sc * (wi * dyv[i]), t2 = sc * (long double)mean_g;
        long double t3 = spread ? h * c : 0;
        long double want = t1 - t2 - t3;
        long double band = 0x1p-50L * (fabsl(t1) + fabsl(t2) + fabsl(t3)) + 1e-300L;
        double got = bw_get(dt, out, i);
        int ok;
        if (dt == NORM_F64) {
          ok = fabsl(got - want) <= band;
        } else { /* between the dtype's roundings of want -+ band */
          unsigned char lo[8], hi[8];
          double l = bw_put(dt, lo, 0, (double)(want - band));
          double u = bw_put(dt, hi, 0, (double)(want + band));
          ok = got >= l && got <= u;
        }
        if (!ok && bad++ < 5)
          printf("  %s bw_dx %s n=%zu [%zu] spread=%d per=%d: %a want %La\n",
                 k->name, norm_dtype_name(dt), n, i, spread, per, got, want);
      }
      /* bw_dx_grads: bw_dx's bits (spread, w = 1 without wp) and
       * bw_row_sums' gradients' bits, dx at an offset or in place of dy */
      {
        static unsigned char ref[BW_MAX * 8], dyc[BW_MAX * 8];
        /* every other run with per: the weights rounded to float, given
         * to bw_dx_grads as floats */
        int as_float = per && (r / 2) % 2;
        k->bw_dx[dt](x, dy, ref, n, shift, sc, 1.0, as_float ? wfd : wp, mean_g,
                     c, 1, 0);
        unsigned char *o2 = dx + (rng(&s) % 32) * size;
        const unsigned char *dyp = dy;
        if (r % 4 == 3) { /* in place */
          memcpy(dyc, dy, n * size);
          o2 = dyc, dyp = dyc;
        }
        k->bw_dx_grads[dt](x, dyp, o2, n, shift, sc, as_float ? NULL : wp,
                           as_float ? wfl : NULL, mean_g, c,
                           with_gw ? gw1 : NULL, with_gb ? gb1 : NULL, stream);
        if (memcmp(ref, o2, n * size) != 0 && bad++ < 5)
          printf("  %s bw_dx_grads %s n=%zu per=%d float=%d: dx differs from "
                 "bw_dx\n", k->name, norm_dtype_name(dt), n, per, as_float);
        if (((with_gw && memcmp(gw1, gw, n * sizeof gw[0]) != 0) ||
             (with_gb && memcmp(gb1, gb, n * sizeof gb[0]) != 0)) &&
            bad++ < 5)
          printf("  %s bw_dx_grads %s n=%zu: gradients differ from "
                 "bw_row_sums'\n", k->name, norm_dtype_name(dt), n);
      }
    }
  }
  printf("%-10s backward loops (bw_sums, bw_centered_sums, "
         "bw_centered_row_sums, bw_sumsq_row_sums, bw_row_sums, bw_dx, "
         "bw_dx_grads), 4 dtypes x %ld "
         "runs vs a long double reference: %s\n",
         k->name, runs / 4, bad ? "MISMATCH" : "ok");
  return bad != 0;
}

int main(void) {
  int bad = check(&kern_base) + check_affine_f32(&kern_base) +
            check_signed_zero(&kern_base) +
            check_backward(&kern_base);
#ifdef KERN_X86
  __builtin_cpu_init();
  /* the float-lane bfloat16 paths of the tables that have them against the
   * double formula, one element at a time (the AVX2 table's double path
   * for everything else: only its entries that are replaced are called) */
  kern_t ref = kern_avx2;
  ref.name = "fma-scalar";
  ref.axpb[NORM_BF16][NORM_BF16] = axpb_bf16_fma_ref;
  ref.bw_dx[NORM_BF16] = bw_dx_bf16_fma_ref;
  if (__builtin_cpu_supports("x86-64-v3")) {
    bad += check(&kern_avx2) + check_affine_f32(&kern_avx2) +
           check_axpb_bf16(&ref, &kern_avx2) + check_backward(&kern_avx2) +
           check_signed_zero(&kern_avx2) +
           check_bw_dx_bf16(&ref, &kern_avx2) +
           check_affine_bf16(&kern_avx2, &kern_avx2); /* its double lanes */
  } else printf("avx2    not supported by this CPU: skipped\n");
  if (__builtin_cpu_supports("x86-64-v4"))
    bad += check(&kern_avx512) + check_affine_f32(&kern_avx512) +
           check_backward(&kern_avx512) + check_signed_zero(&kern_avx512) +
           check_axpb_bf16(&ref, &kern_avx512) +
           check_bw_dx_bf16(&ref, &kern_avx512) +
           check_affine_bf16(&kern_avx512, &kern_avx512);
  else printf("avx512  not supported by this CPU: skipped\n");
  if (__builtin_cpu_supports("x86-64-v4") &&
      __builtin_cpu_supports("avx512bf16"))
    bad += check(&kern_avx512bf16) + check_affine_f32(&kern_avx512bf16) +
           check_backward(&kern_avx512bf16) +
           check_signed_zero(&kern_avx512bf16) +
           check_axpb_bf16(&ref, &kern_avx512bf16) +
           check_bw_dx_bf16(&ref, &kern_avx512bf16) +
           check_affine_bf16(&kern_avx512, &kern_avx512bf16);
  else printf("avx512bf16 not supported by this CPU: skipped\n");
#endif
  return bad != 0;
}
