/* kern_impl.h -- the loops of kern.h, written once with GCC vector
 * extensions and compiled once per target ISA. The including file sets:
 *   VW          double lanes per vector (8 for AVX-512, 4 for AVX2, 2 base)
 *   KFN(name)   a per-ISA name for each loop
 *   KERN_F16C   1 when F16C conversions may be used
 *   KERN_BF16NE 1 when AVX512-BF16 may round float to bfloat16 (optional)
 *   KERN_TABLE  the kern_t to define
 * and any `#pragma GCC target` before including this (and so before the
 * intrinsics headers). Every helper is static and always inlined, so no
 * vector type crosses a function boundary (no ABI question).
 *
 * Each loop handles 4 * VW elements per step with 4 independent
 * accumulators, then VW at a time, then a scalar tail that uses the same
 * formulas and the same conversions as the vector body.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#if KERN_F16C
#include <immintrin.h>
#endif
#ifndef KERN_BF16NE
#define KERN_BF16NE 0
#endif

#include "kern.h"

#define KINLINE static inline __attribute__((always_inline))

/* The absolute slack the float-lane error bounds add for results in the
 * subnormal floats (each rounding there errs by up to 2^-150, absolute):
 * FLT_MIN, the smallest normal float, bounds it and is not subnormal
 * itself. A subnormal constant (2^-140 .. 2^-146 were used) makes every
 * FMA it enters take a microcode assist on Intel cores: on a Sapphire
 * Rapids host bfloat16 rms 64x768 forward ran at 1.3 GB/s against layer
 * norm's 7.8, whose other terms kept the sum normal, and 10.4 without
 * it (the AMD Zen 4 hosts of earlier sessions showed no such cost). A
 * larger bound only sends more lanes to the double path, and only lanes
 * whose result is within 2^-126 of a rounding boundary: the bits are
 * those of the double path either way. */
#define KERN_SUBNORMAL_SLACK 0x1p-126

typedef double vd __attribute__((vector_size(VW * 8)));
typedef int64_t vl __attribute__((vector_size(VW * 8)));
typedef float vf __attribute__((vector_size(VW * 4)));
typedef int32_t vi __attribute__((vector_size(VW * 4)));
typedef uint32_t vu __attribute__((vector_size(VW * 4)));
typedef uint16_t vh __attribute__((vector_size(VW * 2)));

/* float lanes <-> double lanes (GCC 12 splits the generic 512-bit form). */
KINLINE vd f2d(vf f) {
#if KERN_F16C && VW == 8
  return (vd)_mm512_cvtps_pd((__m256)f);
#elif KERN_F16C && VW == 4
  return (vd)_mm256_cvtps_pd((__m128)f);
#else
  return __builtin_convertvector(f, vd);
#endif
}

/* ---- loads: VW elements of a dtype -> VW doubles -------------------------- */

KINLINE vd ld_f32(const float *p) {
  vf f;
  memcpy(&f, p, sizeof f);
  return f2d(f);
}

KINLINE vd ld_f64(const double *p) {
  vd d;
  memcpy(&d, p, sizeof d);
  return d;
}

#if KERN_F16C && VW == 8
/* The float bits of n <= 32 bfloat16 at once (their 16 bits moved up a
 * word, the words below zeroed): one masked permute where zero-extending
 * and shifting took two instructions on the ports the conversions to
 * double also need (AVX-512 BW; the word order is kept). The loads are
 * 16 or 32 bytes, of the elements read only. */
KINLINE __m256i bf16_bits8(const uint16_t *p) {
  const __m256i idx = _mm256_set_epi16(7, 0, 6, 0, 5, 0, 4, 0, 3, 0, 2, 0, 1,
                                       0, 0, 0);
  __m128i raw = _mm_loadu_si128((const __m128i *)p);
  return _mm256_maskz_permutexvar_epi16(0xAAAAu, idx,
                                        _mm256_castsi128_si256(raw));
}
KINLINE __m512i bf16_bits16(const uint16_t *p) {
  const __m512i idx = _mm512_set_epi16(
      15, 0, 14, 0, 13, 0, 12, 0, 11, 0, 10, 0, 9, 0, 8, 0, 7, 0, 6, 0, 5, 0,
      4, 0, 3, 0, 2, 0, 1, 0, 0, 0);
  __m256i raw = _mm256_loadu_si256((const __m256i *)p);
  return _mm512_maskz_permutexvar_epi16(0xAAAAAAAAu, idx,
                                        _mm512_castsi256_si512(raw));
}
#endif

#if KERN_F16C
/* 8 bfloat16 as floats, in order. */
KINLINE __m256 bf16_widen8(const uint16_t *x) {
#if VW == 8
  return _mm256_castsi256_ps(bf16_bits8(x));
#else
  __m256i raw = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)x));
  return _mm256_castsi256_ps(_mm256_slli_epi32(raw, 16));
#endif
}
#endif
#if KERN_F16C && VW == 8
/* 16 bfloat16 as floats, in order. */
KINLINE __m512 bf16_widen16(const uint16_t *x) {
  return _mm512_castsi512_ps(bf16_bits16(x));
}
#endif

KINLINE vd ld_bf16(const uint16_t *p) {
#if KERN_F16C && VW == 8
  return f2d((vf)bf16_widen8(p));
#elif KERN_F16C && VW == 4
  /* zeros interleaved below each element: its float bits (x << 16) in one
   * unpack, where zero-extending and shifting took two */
  return f2d((vf)_mm_unpacklo_epi16(_mm_setzero_si128(),
                                    _mm_loadl_epi64((const __m128i *)p)));
#else
  vh h;
  memcpy(&h, p, sizeof h);
  vu u = __builtin_convertvector(h, vu);
  return f2d((vf)(u << 16));
#endif
}

KINLINE vd ld_f16(const uint16_t *p) {
  vf f;
#if KERN_F16C && VW == 8
  f = (vf)_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
#elif KERN_F16C && VW == 4
  f = (vf)_mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)p));
#else
  for (int i = 0; i < VW; i++) f[i] = norm_float_from_f16(p[i]);
#endif
  return f2d(f);
}

/* 2 VW consecutive elements as two vectors of doubles (lo: the first
 * VW), the same values as two ld_ calls. For bfloat16 one load: widened
 * to float once, then each half converted. */
#define DEF_LD2(dt, T)                                                         \
  KINLINE void ld2_##dt(const T *p, vd *lo, vd *hi) {                          \
    *lo = ld_##dt(p);                                                          \
    *hi = ld_##dt(p + VW);                                                     \
  }
DEF_LD2(f32, float)
DEF_LD2(f64, double)
DEF_LD2(f16, uint16_t)
#if KERN_F16C && VW == 8
KINLINE void ld2_bf16(const uint16_t *p, vd *lo, vd *hi) {
  __m512 f = bf16_widen16(p);
  *lo = (vd)_mm512_cvtps_pd(_mm512_castps512_ps256(f));
  *hi = (vd)_mm512_cvtps_pd(_mm512_extractf32x8_ps(f, 1));
}
#elif KERN_F16C && VW == 4
KINLINE void ld2_bf16(const uint16_t *p, vd *lo, vd *hi) {
  __m256 f = bf16_widen8(p);
  *lo = (vd)_mm256_cvtps_pd(_mm256_castps256_ps128(f));
  *hi = (vd)_mm256_cvtps_pd(_mm256_extractf128_ps(f, 1));
}
#else
DEF_LD2(bf16, uint16_t)
#endif

/* ---- stores: VW doubles -> a dtype, rounded once -------------------------- */

KINLINE void st_f32(float *p, vd v) {
  vf f = __builtin_convertvector(v, vf);
  memcpy(p, &f, sizeof f);
}

KINLINE void st_f64(double *p, vd v) { memcpy(p, &v, sizeof v); }

/* Float bits of v rounded to odd: round to nearest, step one unit toward
 * zero where that overshot |v|, and set the last bit if inexact (as
 * float_round_to_odd in dtype.c; a NaN may gain a low payload bit, which
 * no half format keeps). */
KINLINE vu round_odd(vd v) {
#if KERN_F16C && VW == 8 /* AVX-512: truncate, then mark inexact lanes */
  __m256 t = _mm512_cvt_roundpd_ps((__m512d)v,
                                   _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  __mmask8 k = _mm512_cmp_pd_mask(_mm512_cvtps_pd(t), (__m512d)v,
                                  _CMP_NEQ_UQ);
  __m256i u = _mm256_castps_si256(t);
  return (vu)_mm256_mask_or_epi32(u, k, u, _mm256_set1_epi32(1));
#else
  vf f = __builtin_convertvector(v, vf);
  vd back = f2d(f);
  const vl abs_mask = (vl){0} + INT64_MAX;
  vl over = (vl)((vd)((vl)back & abs_mask) > (vd)((vl)v & abs_mask));
  vl inexact = (vl)(back != v);
  vu u = (vu)f;
  u += (vu)__builtin_convertvector(over, vi); /* -1 where it overshot */
  u |= (vu)__builtin_convertvector(inexact, vi) & 1u;
  return u;
#endif
}

/* Does any lane of m have a bit set? */
KINLINE int any_set(vu m) {
#if KERN_F16C && VW == 8
  return !_mm256_testz_si256((__m256i)m, (__m256i)m);
#elif KERN_F16C && VW == 4
  return !_mm_testz_si128((__m128i)m, (__m128i)m);
#else
  uint32_t acc = 0;
  for (int i = 0; i < VW; i++) acc |= m[i];
  return acc != 0;
#endif
}

/* Half outputs are rounded from double once. Rounding to float first (to
 * nearest) and then to the half format gives the same result unless the
 * float lands exactly on a midpoint of the half format (the one case where
 * double rounding can differ); only vectors with such a lane take the
 * round-to-odd path, which is exact always. For bfloat16 the midpoint test
 * is exact (low 16 bits 0x8000); for float16 it is a superset (low 12 bits
 * zero covers the midpoints of normal and subnormal halves alike). */
KINLINE vu bf16_from_float_bits(vu u) {
  vu nan = (vu)((vf)u != (vf)u);
  vu hi = u >> 16;
  vu r = (u + 0x7FFFu + (hi & 1u)) >> 16;
  return ((hi | 0x40u) & nan) | (r & ~nan);
}

KINLINE vh bf16_pack(vd v) {
  vu u = (vu)__builtin_convertvector(v, vf);
#if KERN_BF16NE
  /* vcvtneps2bf16 rounds to nearest even and quiets NaN exactly as
   * norm_bf16_from_float does, but flushes subnormal floats to zero:
   * vectors with a subnormal lane take the integer path below. */
  vu tiny = (vu)(((u & 0x7FFFFFFFu) - 1u) < 0x7FFFFFu);
  vu tie = (vu)((u & 0xFFFFu) == 0x8000u);
  if (__builtin_expect(!any_set(tiny | tie), 1))
    return (vh)_mm256_cvtneps_pbh((__m256)u);
#endif
  if (__builtin_expect(any_set((vu)((u & 0xFFFFu) == 0x8000u)), 0))
    u = round_odd(v);
  return __builtin_convertvector(bf16_from_float_bits(u), vh);
}

KINLINE void st_bf16(uint16_t *p, vd v) {
  vh h = bf16_pack(v);
  memcpy(p, &h, sizeof h);
}

KINLINE void st_f16(uint16_t *p, vd v) {
  vu u = (vu)__builtin_convertvector(v, vf);
  if (__builtin_expect(any_set((vu)((u & 0xFFFu) == 0)), 0)) u = round_odd(v);
#if KERN_F16C && VW == 8
  _mm_storeu_si128((__m128i *)p,
                   _mm256_cvtps_ph((__m256)u, _MM_FROUND_TO_NEAREST_INT |
                                                  _MM_FROUND_NO_EXC));
#elif KERN_F16C && VW == 4
  _mm_storel_epi64((__m128i *)p,
                   _mm_cvtps_ph((__m128)u, _MM_FROUND_TO_NEAREST_INT |
                                               _MM_FROUND_NO_EXC));
#else
  vf f = (vf)u;
  for (int i = 0; i < VW; i++) p[i] = norm_f16_from_float(f[i]);
#endif
}

/* Streaming stores (no read for ownership, no cache pollution) for outputs
 * larger than the caches, on AVX-512 tables; p must be aligned to the
 * vector (head_to_align). Elsewhere they are the plain stores. */
#if KERN_F16C && VW == 8
#define KERN_NT 1
KINLINE void st_f32_nt(float *p, vd v) {
  _mm256_stream_ps(p, (__m256)__builtin_convertvector(v, vf));
}
KINLINE void st_f64_nt(double *p, vd v) { _mm512_stream_pd(p, (__m512d)v); }
KINLINE void st_bf16_nt(uint16_t *p, vd v) {
  _mm_stream_si128((__m128i *)p, (__m128i)bf16_pack(v));
}
KINLINE void stream_fence(void) { _mm_sfence(); }
#else
#define KERN_NT 0
#define st_f32_nt st_f32
#define st_f64_nt st_f64
#define st_bf16_nt st_bf16
KINLINE void stream_fence(void) {}
#endif
#define st_f16_nt st_f16 /* float16 outputs are rare: plain stores */

/* Elements of size `size` before p + that * size is 64-byte aligned (at
 * most n). */
KINLINE size_t head_to_align(const void *p, size_t size, size_t n) {
  size_t mis = (size_t)(-(uintptr_t)p & 63);
  size_t k = mis % size == 0 ? mis / size : n; /* unreachable: all scalar */
  return k < n ? k : n;
}

/* Bytes [p, p + bytes) on their way into L2 (a hint: an address past the
 * end of an array is not read and cannot fault). */
KINLINE void prefetch_l2(const void *p, size_t bytes) {
  for (size_t o = 0; o < bytes; o += 64)
    __builtin_prefetch((const char *)p + o, 0, 2);
}

/* The statistics passes' prefetch of the chunk read next (kern.h's
 * `ahead`, a variable of the loop: 0 for none), one step of 4 VW elements
 * of the stream p at i. centered and sumsq call their loops with a literal
 * 0 where there is none, so that the test folds away there. */
#define PREFETCH_AHEAD(p, i)                                                   \
  do {                                                                         \
    if (ahead) prefetch_l2((p) + (i) + ahead, 4 * VW * sizeof *(p));           \
  } while (0)

/* ---- scalar element access for the tails ---------------------------------- */

KINLINE double e_f32(const float *p) { return *p; }
KINLINE double e_f64(const double *p) { return *p; }
KINLINE double e_bf16(const uint16_t *p) { return norm_float_from_bf16(*p); }
KINLINE double e_f16(const uint16_t *p) { return norm_float_from_f16(*p); }
KINLINE void s_f32(float *p, double v) { *p = (float)v; }
KINLINE void s_f64(double *p, double v) { *p = v; }
KINLINE void s_bf16(uint16_t *p, double v) { *p = norm_bf16_from_double(v); }
KINLINE void s_f16(uint16_t *p, double v) { *p = norm_f16_from_double(v); }

/* a * b + c, fused where the ISA has it */
/* b in every lane, its sign kept: (vd){0} + b would turn -0 into +0, and
 * a vector body would then give a zero result another sign than its scalar
 * tail (a scale, bias or weight of -0). */
KINLINE vd splat_d(double b) { return b - (vd){0}; }

KINLINE vd vfma(vd a, vd b, vd c) {
#if KERN_F16C && VW == 8
  return (vd)_mm512_fmadd_pd((__m512d)a, (__m512d)b, (__m512d)c);
#elif KERN_F16C && VW == 4
  return (vd)_mm256_fmadd_pd((__m256d)a, (__m256d)b, (__m256d)c);
#else
  return a * b + c;
#endif
}

/* a + b on the multiply-add units: fma(a, 1, b) rounds as a + b (every
 * input, signed zeros included), but where the loops are bound by their
 * adds and conversions (which share ports on Zen 4) this moves work to the
 * FMA ports. The 1 goes through an empty asm so that GCC does not fold
 * the product back into an add. */
KINLINE vd vadd_fma(vd a, vd b) {
#if KERN_F16C
  vd one = splat_d(1.0);
  __asm__("" : "+v"(one));
  return vfma(a, one, b);
#else
  return a + b;
#endif
}

/* The scalar twin of vfma, so that tails round like vector bodies (and a
 * result does not depend on where a vector starts). */
KINLINE double sfma(double a, double b, double c) {
#if KERN_F16C
  return __builtin_fma(a, b, c);
#else
  return a * b + c;
#endif
}

KINLINE double hsum(vd v) {
  double s = 0.0;
  for (int i = 0; i < VW; i++) s += v[i];
  return s;
}

/* The lowest lane set in *bad, cleared there: the float-lane paths redo
 * their unsafe lanes by walking the mask's set bits (a step of 32 lanes
 * with one unsafe is one call, not 32 tests: layer norm's bfloat16 apply
 * has one in about 15 steps). */
KINLINE unsigned next_lane(uint32_t *bad) {
  unsigned j = (unsigned)__builtin_ctz(*bad);
  *bad &= *bad - 1;
  return j;
}

/* The element of a 32-element step that lane j holds where one 64-byte
 * load was split into its even elements (lanes 0-15) and odd ones (16-31). */
KINLINE unsigned split_lane_element(unsigned j) {
  return j < 16 ? 2 * j : 2 * (j - 16) + 1;
}

/* ---- reductions, one set per input dtype ---------------------------------- */

/* Why bfloat16 (and float16) inputs take their statistics in double lanes
 * too (issue 20 asked for float lanes): the tests hold the moments to
 * 1e-12 relative (STATS_TOL in check_norm_layer.c), ~40 bits, which float
 * lanes reach only with double-word accumulators: TwoSum is 6 float
 * operations per addend and a square's exact error 2 more, ~17 vector
 * operations per 16 elements for both sums, against 9 here (a widening
 * permute, 2 conversions, 2 subtractions, 2 adds, 2 fmas): more work per
 * element, not less. Exact integer sums would need every element of a
 * chunk in a narrow window of binades; a chunk of N(0, 1) draws spans 13
 * or more below its largest (the draws near 0), too wide for 32-bit lanes,
 * and the squares need 64-bit products on half the lanes. Measured on
 * Zen 5 (kernel_bench, 1 thread, group norm 8x64x56x56): with this pass
 * skipped outright, bfloat16 goes from 29 to 52 GB/s (0.29 -> 0.52 of
 * the ceiling), so a pass at half its cost would reach ~0.37; per element
 * bfloat16 already runs about as fast as float32 (7 and 8.5 G elements/s),
 * with half the bytes. */

/* centered's tail from i on: its four accumulators merged, the last
 * whole vectors, the scalar rest, into out[0] = sum(x - mu), out[1] =
 * sum((x - mu)^2). bw_centered_sums and bw_centered_row_sums
 * (kern_backward_impl.h) end with it too: S1 and S2 with centered's bits. */
#define CENTERED_TAIL(dt)                                                      \
  do {                                                                         \
    d0 += d2;                                                                  \
    d1 += d3;                                                                  \
    q0 += q2;                                                                  \
    q1 += q3;                                                                  \
    for (; i + VW <= n; i += VW) {                                             \
      vd v = ld_##dt(x + i) - mu;                                              \
      d0 += v;                                                                 \
      q0 = vfma(v, v, q0);                                                     \
    }                                                                          \
    double dev = hsum(d0 + d1), sq = hsum(q0 + q1);                            \
    for (; i < n; i++) {                                                       \
      double v = e_##dt(x + i) - mu;                                           \
      dev += v;                                                                \
      sq = sfma(v, v, sq);                                                     \
    }                                                                          \
    out[0] = dev;                                                              \
    out[1] = sq;                                                               \
  } while (0)

#define DEF_READ(dt, T)                                                        \
  static double KFN(sum_##dt)(const void *xv, size_t n) {                      \
    const T *x = xv;                                                           \
    vd a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};                                 \
    size_t i = 0;                                                              \
    for (; i + 4 * VW <= n; i += 4 * VW) {                                     \
      a0 += ld_##dt(x + i);                                                    \
      a1 += ld_##dt(x + i + VW);                                               \
      a2 += ld_##dt(x + i + 2 * VW);                                           \
      a3 += ld_##dt(x + i + 3 * VW);                                           \
    }                                                                          \
    for (; i + VW <= n; i += VW) a0 += ld_##dt(x + i);                         \
    double s = hsum((a0 + a1) + (a2 + a3));                                    \
    for (; i < n; i++) s += e_##dt(x + i);                                     \
    return s;                                                                  \
  }                                                                            \
  KINLINE double KFN(sumsq_loop_##dt)(const T *x, size_t n, ptrdiff_t ahead) {\
    vd a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};                                 \
    size_t i = 0;                                                              \
    for (; i + 4 * VW <= n; i += 4 * VW) {                                     \
      PREFETCH_AHEAD(x, i);                                                    \
      vd v0, v1, v2, v3;                                                       \
      ld2_##dt(x + i, &v0, &v1);                                               \
      ld2_##dt(x + i + 2 * VW, &v2, &v3);                                      \
      a0 += v0 * v0;                                                           \
      a1 += v1 * v1;                                                           \
      a2 += v2 * v2;                                                           \
      a3 += v3 * v3;                                                           \
    }                                                                          \
    for (; i + VW <= n; i += VW) {                                             \
      vd v = ld_##dt(x + i);                                                   \
      a0 += v * v;                                                             \
    }                                                                          \
    double s = hsum((a0 + a1) + (a2 + a3));                                    \
    for (; i < n; i++) {                                                       \
      double v = e_##dt(x + i);                                                \
      s += v * v;                                                              \
    }                                                                          \
    return s;                                                                  \
  }                                                                            \
  static double KFN(sumsq_##dt)(const void *x, size_t n, ptrdiff_t ahead) {    \
    return ahead ? KFN(sumsq_loop_##dt)(x, n, ahead)                           \
                 : KFN(sumsq_loop_##dt)(x, n, 0);                              \
  }                                                                            \
  KINLINE void KFN(centered_loop_##dt)(const T *x, size_t n, double mu,        \
                                       ptrdiff_t ahead, double out[2]) {       \
    vd d0 = {0}, d1 = {0}, d2 = {0}, d3 = {0};                                 \
    vd q0 = {0}, q1 = {0}, q2 = {0}, q3 = {0};                                 \
    size_t i = 0;                                                              \
    for (; i + 4 * VW <= n; i += 4 * VW) {                                     \
      PREFETCH_AHEAD(x, i);                                                    \
      vd v0, v1, v2, v3;                                                       \
      ld2_##dt(x + i, &v0, &v1);                                               \
      ld2_##dt(x + i + 2 * VW, &v2, &v3);                                      \
      v0 -= mu, v1 -= mu, v2 -= mu, v3 -= mu;                                  \
      d0 = vadd_fma(v0, d0);                                                   \
      d1 = vadd_fma(v1, d1);                                                   \
      d2 = vadd_fma(v2, d2);                                                   \
      d3 = vadd_fma(v3, d3);                                                   \
      q0 = vfma(v0, v0, q0);                                                   \
      q1 = vfma(v1, v1, q1);                                                   \
      q2 = vfma(v2, v2, q2);                                                   \
      q3 = vfma(v3, v3, q3);                                                   \
    }                                                                          \
    CENTERED_TAIL(dt);                                                         \
  }                                                                            \
  static void KFN(centered_##dt)(const void *x, size_t n, double mu,           \
                                 ptrdiff_t ahead, double out[2]) {             \
    if (ahead)                                                                 \
      KFN(centered_loop_##dt)(x, n, mu, ahead, out);                           \
    else /* ahead a constant 0: the loop without PREFETCH_AHEAD's test */      \
      KFN(centered_loop_##dt)(x, n, mu, 0, out);                               \
  }                                                                            \
  static void KFN(to_double_##dt)(const void *xv, size_t n, double *dst) {     \
    const T *x = xv;                                                           \
    size_t i = 0;                                                              \
    for (; i + VW <= n; i += VW) st_f64(dst + i, ld_##dt(x + i));              \
    for (; i < n; i++) dst[i] = e_##dt(x + i);                                 \
  }

DEF_READ(f32, float)
DEF_READ(f64, double)
DEF_READ(f16, uint16_t)
DEF_READ(bf16, uint16_t)

/* ---- y = f(x), one pair of loops per (input, output) dtype ---------------- */

/* The vector loops of the apply kernels, with STORE a normal or a
 * streaming store. */
#define AXPB_LOOPS(xt, STORE)                                                  \
  for (; i + 2 * VW <= n; i += 2 * VW) {                                       \
    vd v0 = ld_##xt(x + i), v1 = ld_##xt(x + i + VW);                          \
    STORE(y + i, vfma(v0 - shift, va, vc));                                    \
    STORE(y + i + VW, vfma(v1 - shift, va, vc));                               \
  }                                                                            \
  for (; i + VW <= n; i += VW) STORE(y + i, vfma(ld_##xt(x + i) - shift, va, vc));
#define AFFINE_LOOPS(xt, STORE)                                                \
  if (w && b) {                                                                \
    for (; i + VW <= n; i += VW)                                               \
      STORE(y + i, vfma((ld_##xt(x + i) - shift) * scale, ld_f64(w + i),       \
                        ld_f64(b + i)));                                       \
  } else if (w) {                                                              \
    for (; i + VW <= n; i += VW)                                               \
      STORE(y + i, (ld_##xt(x + i) - shift) * scale * ld_f64(w + i));          \
  } else {                                                                     \
    for (; i + VW <= n; i += VW)                                               \
      STORE(y + i, vfma(ld_##xt(x + i) - shift, splat_d(scale),                \
                        ld_f64(b + i)));                                       \
  }

#define DEF_WRITE(xt, XT, yt, YT)                                              \
  static void KFN(axpb_##xt##_##yt)(const void *xv, void *yv, size_t n,        \
                                    double shift, double a, double c,          \
                                    int stream) {                              \
    const XT *x = xv;                                                          \
    YT *y = yv;                                                                \
    size_t i = 0;                                                              \
    const vd va = splat_d(a), vc = splat_d(c);                                 \
    if (stream && KERN_NT) {                                                   \
      i = head_to_align(y, sizeof(YT), n);                                     \
      KFN(axpb_##xt##_##yt)(x, y, i, shift, a, c, 0);                          \
      AXPB_LOOPS(xt, st_##yt##_nt)                                             \
      stream_fence();                                                          \
    } else {                                                                   \
      AXPB_LOOPS(xt, st_##yt)                                                  \
    }                                                                          \
    for (; i < n; i++) s_##yt(y + i, sfma(e_##xt(x + i) - shift, a, c));       \
  }                                                                            \
  static void KFN(affine_##xt##_##yt)(const void *xv, void *yv, size_t n,      \
                                      double shift, double scale,              \
                                      const double *w, const double *b,        \
                                      int stream) {                            \
    const XT *x = xv;                                                          \
    YT *y = yv;                                                                \
    size_t i = 0;                                                              \
    if (stream && KERN_NT) {                                                   \
      i = head_to_align(y, sizeof(YT), n);                                     \
      KFN(affine_##xt##_##yt)(x, y, i, shift, scale, w, b, 0);                 \
      AFFINE_LOOPS(xt, st_##yt##_nt)                                           \
      stream_fence();                                                          \
    } else {                                                                   \
      AFFINE_LOOPS(xt, st_##yt)                                                \
    }                                                                          \
    for (; i < n; i++) {                                                       \
      double t = e_##xt(x + i) - shift;                                        \
      s_##yt(y + i, w && b ? sfma(t * scale, w[i], b[i])                       \
                    : w    ? t * scale * w[i]                                  \
                           : sfma(t, scale, b[i]));                            \
    }                                                                          \
  }

#define DEF_WRITE_FROM(xt, XT)                                                 \
  DEF_WRITE(xt, XT, f32, float)                                                \
  DEF_WRITE(xt, XT, f64, double)                                               \
  DEF_WRITE(xt, XT, f16, uint16_t)                                             \
  DEF_WRITE(xt, XT, bf16, uint16_t)

DEF_WRITE_FROM(f32, float)
DEF_WRITE_FROM(f64, double)
DEF_WRITE_FROM(f16, uint16_t)
DEF_WRITE_FROM(bf16, uint16_t)

/* 2^-20.5 and 2^-21.5 (the float below each), for the error bounds of the
 * bfloat16 float-lane paths below */
#define KERN_2_M20_5 0x1.6a09e6p-21f
#define KERN_2_M21_5 0x1.6a09e6p-22f

#if KERN_BF16NE

/* The bfloat16 float-lane paths work on 32 elements at a time, as two
 * float vectors that vcvtne2ps2bf16 rounds at once: the first vector's 16
 * results, then the second's. axpb splits one 64-byte load into the even
 * elements (raw << 16) and the odd ones (raw & 0xFFFF0000), and
 * bf16_interleave puts the results back in order; the affine path loads
 * two runs of 16 in order (bf16_widen16). */
KINLINE __m512i bf16_round2(__m512 second, __m512 first) {
  return (__m512i)_mm512_cvtne2ps_pbh(second, first);
}

KINLINE __m512i bf16_interleave(__m512i halves) {
  const __m512i idx = _mm512_set_epi16(
      31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8,
      23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  return _mm512_permutexvar_epi16(idx, halves);
}

/* The 32 bfloat16 of r_first and r_second (bf16_round2's order) in *out,
 * and the mask of the lanes where that is provably what the double path
 * gives, from |r - t| < e (t: the double result):
 * r - e and r + e round to one bfloat16, so all between them does, t too.
 * An end that vcvtne2ps2bf16 flushes (subnormal) or a sign change makes
 * them differ; a zero or subnormal r itself is not taken either (the
 * exponent field of its bfloat16 is 0). A NaN r passes (r - e and r + e
 * are NaN alike): callers whose r can be NaN where t is not (inf * 0 after
 * a float overflow) test for it themselves.
 * What the proof costs (Zen 5, 1 thread, kernel_bench with throwaway
 * hacks, not kept): bfloat16 group norm 8x64x56x56 runs at 26 GB/s; with
 * the statistics pass skipped, 51-53; with the proof skipped as well
 * (r rounded and stored unchecked), 89-91, the ceiling itself (92). So
 * the statistics take about half the time, the proof about a fifth, the
 * apply itself a quarter. In L1 (a microbenchmark of this loop's body)
 * the step of 32 costs 0.7 ns unchecked and 1.8 ns checked: both about 3
 * vector operations a cycle, ~8 of them against ~20 with the proof (e: 4,
 * r - e, r + e: 4, two more roundings, the normal test and the compare).
 * Cheaper-looking forms were not: the distance of r to its bfloat16
 * midpoint (low half-word 0x8000, one ternary-logic op) against e, with
 * the check that e stays below 2^-10 |r| (no second midpoint in reach),
 * is ~28 operations a step, 2.5 ns. */
KINLINE __mmask32 bf16_safe_lanes(__m512 r_second, __m512 r_first,
                                   __m512 e_second, __m512 e_first,
                                   __m512i *out) {
  __m512i got = bf16_round2(r_second, r_first);
  __m512i lo = bf16_round2(_mm512_sub_ps(r_second, e_second),
                           _mm512_sub_ps(r_first, e_first));
  __m512i hi = bf16_round2(_mm512_add_ps(r_second, e_second),
                           _mm512_add_ps(r_first, e_first));
  __mmask32 normal = _mm512_test_epi16_mask(got, _mm512_set1_epi16(0x7F80));
  *out = got;
  return _mm512_mask_cmpeq_epi16_mask(normal, lo, hi);
}

/* bfloat16 -> bfloat16 y = (x - shift) * a + c in float lanes, with a
 * proof that the result rounds like the double path, else the double path.
 * Two ways to r, with a bound on |r - t| (t: the double result):
 * - folded, r = fma(x, A, C) with A = a and C = fma(-shift, a, c) (in
 *   double) each rounded to float: |r - t| < 2^-23 M (1 + 2^-20) + 2^-51
 *   with M = |x A| + |C|, as for the 8-lane form below, whose proof this
 *   is; the 2^-51 is t's own roundings, not small beside M where C nearly
 *   cancels and x is tiny (shift 1, a 1, c 1, x = 2^-60: the double
 *   path's x - shift is -1, its t 0, r is x).
 *   Where x a and C nearly cancel (|shift a| large: |mean| >> std), M is
 *   much larger than |r| and few lanes would pass, so then
 * - centered, d = (x - sh) - sl with shift = sh + sl (+ 2^-48 |shift|), p =
 *   d * (float)a, r = p + (float)c: |r - t| < 2^-21 M with M = |p| + |c|
 *   (about five float roundings and the dropped tail of shift, which for
 *   bfloat16 data is far below |d|, plus a factor 4).
 * e is twice the bound in the centered form, and in the folded one e =
 * 2^-21.5 M + 2^-48 (5.66 u M, u = 2^-24). Unsafe lanes (rare) take the
 * double path.
 * bench/check_kern compares both forms with the double path. */
typedef struct {
  __m512 fa, fc, e_fa, e_fc; /* folded: A, C, 2^-21.5 |A|, 2^-21.5 |C| + 2^-48 */
  __m512 sh, sl, cf, e_c;    /* centered: shift = sh + sl, c, 2^-20 |c| */
} bf16_consts_t;

KINLINE bf16_consts_t bf16_consts(double shift, double a, double c) {
  const float shf = (float)shift;
  const float fa = (float)a, fc = (float)fma(-shift, a, c), cf = (float)c;
  return (bf16_consts_t){
      .fa = _mm512_set1_ps(fa), .fc = _mm512_set1_ps(fc),
      .e_fa = _mm512_set1_ps(KERN_2_M21_5 * fabsf(fa)),
      .e_fc = _mm512_set1_ps(KERN_2_M21_5 * fabsf(fc) + 0x1p-48f),
      .sh = _mm512_set1_ps(shf), .sl = _mm512_set1_ps((float)(shift - (double)shf)),
      .cf = _mm512_set1_ps(cf), .e_c = _mm512_set1_ps(0x1p-20f * fabsf(cf))};
}

/* r and its e for one float vector of x, in one of the two forms. */
KINLINE __m512 bf16_lane_result(const bf16_consts_t *k, __m512 xf, int folded,
                                __m512 *e) {
  if (folded) {
    *e = _mm512_fmadd_ps(_mm512_abs_ps(xf), k->e_fa, k->e_fc);
    return _mm512_fmadd_ps(xf, k->fa, k->fc);
  }
  __m512 p = _mm512_mul_ps(_mm512_sub_ps(_mm512_sub_ps(xf, k->sh), k->sl), k->fa);
  *e = _mm512_fmadd_ps(_mm512_abs_ps(p), _mm512_set1_ps(0x1p-20f), k->e_c);
  return _mm512_add_ps(p, k->cf);
}

/* The vector loop of axpb_bf16_bf16_f over [i, n) in steps of 32, for one
 * form and one kind of store (constants once inlined, so each of the four
 * loops has no per-step test of them); returns where it stopped. An
 * unsafe lane is done again by the double path. */
KINLINE size_t bf16_apply_loop(const uint16_t *x, uint16_t *y, size_t i,
                               size_t n, double shift, double a, double c,
                               const int folded, const int stream) {
  const bf16_consts_t k = bf16_consts(shift, a, c);
  for (; i + 32 <= n; i += 32) {
    __m512i raw = _mm512_loadu_si512((const void *)(x + i));
    __m512 x_even = _mm512_castsi512_ps(_mm512_slli_epi32(raw, 16));
    __m512 x_odd = _mm512_castsi512_ps(_mm512_and_si512(raw, _mm512_set1_epi32((int)0xFFFF0000u)));
    __m512 e_even, e_odd;
    __m512 r_even = bf16_lane_result(&k, x_even, folded, &e_even);
    __m512 r_odd = bf16_lane_result(&k, x_odd, folded, &e_odd);
    __m512i halves;
    __mmask32 good = bf16_safe_lanes(r_odd, r_even, e_odd, e_even, &halves);
    __m512i out = bf16_interleave(halves);
    if (__builtin_expect(good != 0xFFFFFFFFu, 0)) {
      /* the lanes not taken (split_lane_element), one by one by the
       * double path's scalar tail, before the store: y may be x */
      uint16_t lanes[32];
      memcpy(lanes, &out, sizeof lanes);
      for (uint32_t bad = ~good; bad;) {
        unsigned e = split_lane_element(next_lane(&bad));
        KFN(axpb_bf16_bf16)(x + i + e, lanes + e, 1, shift, a, c, 0);
      }
      memcpy(&out, lanes, sizeof lanes);
    }
    if (stream) _mm512_stream_si512((void *)(y + i), out);
    else _mm512_storeu_si512((void *)(y + i), out);
  }
  return i;
}

static void KFN(axpb_bf16_bf16_f)(const void *xv, void *yv, size_t n,
                                  double shift, double a, double c,
                                  int stream) {
  const uint16_t *x = xv;
  uint16_t *y = yv;
  size_t i = 0;
  /* The bounds take a as a normal float (relative rounding error 2^-24);
   * a tiny or non-finite scale goes to the double path whole. */
  if (!(fabs(a) >= 0x1p-100 && fabs(a) <= 0x1p100)) {
    KFN(axpb_bf16_bf16)(x, y, n, shift, a, c, stream);
    return;
  }
  if (stream) { /* align y for 64-byte streaming stores */
    i = head_to_align(y, 2, n);
    KFN(axpb_bf16_bf16)(x, y, i, shift, a, c, 0);
  }
  if (fabs(shift * a) <= 4.0) /* NaN: centered */
    i = stream ? bf16_apply_loop(x, y, i, n, shift, a, c, 1, 1)
               : bf16_apply_loop(x, y, i, n, shift, a, c, 1, 0);
  else
    i = stream ? bf16_apply_loop(x, y, i, n, shift, a, c, 0, 1)
               : bf16_apply_loop(x, y, i, n, shift, a, c, 0, 0);
  if (stream) _mm_sfence();
  KFN(axpb_bf16_bf16)(x + i, y + i, n - i, shift, a, c, 0);
}

/* The affine path below loads its input in order (bf16_widen16), because
 * its weights and biases come in order too (splitting them as well would
 * take two permutes each); axpb's even/odd split is 3-7% faster than that
 * (A/B, kernel_bench bf16 group/batch/instance). */

/* bfloat16 -> bfloat16 y = (x - shift) * scale * w[i] + b[i] (w or b, not
 * both, may be NULL) in float lanes, bit-identical to affine_bf16_bf16
 * given the doubles of w and b (floats: the caller's exact copies). With
 * d = (x - sh) - sl (shift = sh + sl + tau, |tau| <= 2^-48 |shift|), p =
 * d * (float)scale and r = fma(p, w, b) (r = p * w without b, p + b
 * without w), u = 2^-24: four roundings in p w (two in d, sf, d sf), one
 * in the fma, and the dropped tail of shift give |r - t| <= 5u |p w| + u
 * |b| + 2^-47 |scale shift w| (t: the double result, whose own error is
 * of order 2^-52 (|p w| + |b|)). e = 2^-20.5 |p w| + 2^-22 |b| + 2^-46
 * |scale shift w|: less the 2^-24 |r| <= u (|p w| + |b|) (1 + u) by which
 * bf16_safe_lanes' roundings of r - e and r + e may shrink it, still
 * twice the bound, term by term. And 2^-126 (|w| + 1) more for a p in the
 * subnormal floats (the second 2^-126 added by the fma with |w|, so that
 * no term of e is subnormal where x is zero); lanes where r - e and r + e
 * round apart
 * (bf16_safe_lanes), or r is NaN, take the double path, each on its own
 * (a whole step of 32 redone cost 15% of the loop's time with bfloat16
 * weights). bench/check_kern compares it with the double path. */
typedef struct {
  __m512 sh, sl, sf;
  __m512 e_pw, e_b, e_tail; /* 2^-20.5, 2^-22, 2^-46 |scale shift| + 2^-126 */
  __m512 e_sub;             /* scaled_bf16_lanes': max(2^-126, 2^-148 w_max) */
} affine_bf16_consts_t;

/* RMS norm's form, shift 0 and weights only: d = x, p = x * (float)scale
 * and r = p * w, three float roundings, so |r - t| <= 2^-22.4 |r| plus
 * 2^-149 for an r in the subnormal floats, and for a p in them 2^-150 |w|
 * <= 2^-150 w_max. e = 2^-21 |r| + e_sub, e_sub = max(2^-126, 2^-148
 * w_max), less the 2^-24 |r| of the roundings of r - e and r + e, is more
 * than twice that, from r alone: the bound needs neither |p| nor |w|. */
KINLINE __m512 scaled_bf16_lanes(const affine_bf16_consts_t *k,
                                 const uint16_t *x, const float *w, __m512 *e) {
  __m512 r = _mm512_mul_ps(_mm512_mul_ps(bf16_widen16(x), k->sf), _mm512_loadu_ps(w));
  *e = _mm512_fmadd_ps(_mm512_abs_ps(r), _mm512_set1_ps(0x1p-21f), k->e_sub);
  return r;
}

/* r and its e for the 16 elements at x, weights and biases at w and b. */
KINLINE __m512 affine_bf16_lanes(const affine_bf16_consts_t *k,
                                 const uint16_t *x, const float *w,
                                 const float *b, __m512 *e) {
  __m512 d = _mm512_sub_ps(_mm512_sub_ps(bf16_widen16(x), k->sh), k->sl);
  __m512 p = _mm512_mul_ps(d, k->sf);
  __m512 t = _mm512_fmadd_ps(_mm512_abs_ps(p), k->e_pw, k->e_tail);
  __m512 r;
  if (w) {
    __m512 wv = _mm512_loadu_ps(w);
    t = _mm512_fmadd_ps(_mm512_abs_ps(wv), t,
                        _mm512_set1_ps((float)KERN_SUBNORMAL_SLACK));
    r = b ? _mm512_fmadd_ps(p, wv, _mm512_loadu_ps(b)) : _mm512_mul_ps(p, wv);
  } else {
    r = _mm512_add_ps(p, _mm512_loadu_ps(b));
  }
  *e = b ? _mm512_fmadd_ps(_mm512_abs_ps(_mm512_loadu_ps(b)), k->e_b, t) : t;
  return r;
}

/* The double path (affine_bf16_bf16) for m <= 32 elements, given the
 * float weights and biases. */
static void KFN(affine_bf16_double)(const uint16_t *x, uint16_t *y, size_t m,
                                    double shift, double scale, const float *w,
                                    const float *b) {
  double wd[32], bd[32];
  for (size_t j = 0; j < m; j++) {
    wd[j] = w ? w[j] : 0;
    bd[j] = b ? b[j] : 0;
  }
  KFN(affine_bf16_bf16)(x, y, m, shift, scale, w ? wd : NULL, b ? bd : NULL, 0);
}

/* The vector loop of affine_bf16_bf16_f over [i, n) in steps of 32, for
 * one form (w, b or both) and one kind of store; returns where it
 * stopped. An unsafe lane is done again by the double path. (It used to
 * prefetch the next row streaming, layer 9.5 -> 12.9, rms 13.7 -> 18.2
 * GB/s for bfloat16 4096x4096 forward at 1 thread; the statistics pass
 * does that now, kern.h's `ahead`, and this loop's own prefetch on top
 * gained nothing: medians of 5 alternating runs 14.6 / 14.7 and 21.7 /
 * 21.7 GB/s with and without.) */
KINLINE size_t affine_bf16_loop(const uint16_t *x, uint16_t *y, size_t i,
                                size_t n, const affine_bf16_consts_t *k,
                                double shift, double scale, const float *w,
                                const float *b, const int scaled,
                                const int stream) {
  for (; i + 32 <= n; i += 32) {
    __m512 e0, e1, r0, r1;
    if (scaled) { /* shift 0, weights only (the caller checked) */
      r0 = scaled_bf16_lanes(k, x + i, w + i, &e0);
      r1 = scaled_bf16_lanes(k, x + i + 16, w + i + 16, &e1);
    } else {
      r0 = affine_bf16_lanes(k, x + i, w ? w + i : NULL, b ? b + i : NULL, &e0);
      r1 = affine_bf16_lanes(k, x + i + 16, w ? w + i + 16 : NULL,
                             b ? b + i + 16 : NULL, &e1);
    }
    __m512i out;
    /* p = inf (float overflow) times w = 0 is NaN, the double path's t
     * not: NaN lanes take the double path (NaN elements too); a NaN in
     * either of r0[j], r1[j] marks elements j and j + 16 */
    __mmask16 nan = _mm512_cmp_ps_mask(r0, r1, _CMP_UNORD_Q);
    __mmask32 good = bf16_safe_lanes(r1, r0, e1, e0, &out) &
                     ~((__mmask32)nan | (__mmask32)nan << 16);
    if (__builtin_expect(good != 0xFFFFFFFFu, 0)) {
      /* the lanes not taken, one by one by the double path (its scalar
       * tail: the same bits as its body), before the store: y may be x */
      uint16_t lanes[32];
      memcpy(lanes, &out, sizeof lanes);
      for (uint32_t bad = ~good; bad;) {
        unsigned j = next_lane(&bad);
        KFN(affine_bf16_double)(x + i + j, lanes + j, 1, shift, scale,
                                w ? w + i + j : NULL, b ? b + i + j : NULL);
      }
      memcpy(&out, lanes, sizeof lanes);
    }
    if (stream) _mm512_stream_si512((void *)(y + i), out);
    else _mm512_storeu_si512((void *)(y + i), out);
  }
  return i;
}

static void KFN(affine_bf16_bf16_f)(const uint16_t *x, uint16_t *y, size_t n,
                                    double shift, double scale, const float *w,
                                    const float *b, double w_max, int stream) {
  size_t i = 0;
  double tail = 0x1p-46 * fabs(scale * shift) + KERN_SUBNORMAL_SLACK;
  /* max(2^-126, 2^-148 w_max); a NaN or huge w_max: no RMS form below */
  double e_sub = w_max <= 0x1p22 ? KERN_SUBNORMAL_SLACK : 0x1p-148 * w_max;
  /* The bounds take scale as a normal float; a tiny, huge or non-finite
   * one (or shift) goes to the double path whole, as does a tail term
   * beyond float. */
  int fast = fabs(scale) >= 0x1p-100 && fabs(scale) <= 0x1p100 && tail <= 0x1p100;
  const float shf = (float)shift;
  const affine_bf16_consts_t k = {
      .sh = _mm512_set1_ps(shf), .sl = _mm512_set1_ps((float)(shift - (double)shf)),
      .sf = _mm512_set1_ps((float)scale), .e_pw = _mm512_set1_ps(KERN_2_M20_5),
      .e_b = _mm512_set1_ps(0x1p-22f),
      .e_sub = _mm512_set1_ps((float)fmin(e_sub, 0x1p100)),
      .e_tail = _mm512_set1_ps((float)tail)};
  if (fast && stream) { /* align y for 64-byte streaming stores */
    i = head_to_align(y, 2, n);
    KFN(affine_bf16_bf16_f)(x, y, i, shift, scale, w, b, w_max, 0);
  }
  if (fast) {
    if (w && b)
      i = stream ? affine_bf16_loop(x, y, i, n, &k, shift, scale, w, b, 0, 1)
                 : affine_bf16_loop(x, y, i, n, &k, shift, scale, w, b, 0, 0);
    else if (w && shift == 0 && e_sub <= 0x1p100) /* RMS norm's */
      i = stream ? affine_bf16_loop(x, y, i, n, &k, shift, scale, w, NULL, 1, 1)
                 : affine_bf16_loop(x, y, i, n, &k, shift, scale, w, NULL, 1, 0);
    else if (w)
      i = stream ? affine_bf16_loop(x, y, i, n, &k, shift, scale, w, NULL, 0, 1)
                 : affine_bf16_loop(x, y, i, n, &k, shift, scale, w, NULL, 0, 0);
    else
      i = stream ? affine_bf16_loop(x, y, i, n, &k, shift, scale, NULL, b, 0, 1)
                 : affine_bf16_loop(x, y, i, n, &k, shift, scale, NULL, b, 0, 0);
    if (stream) _mm_sfence();
  }
  for (; i < n; i += 32) /* the tail, or everything */
    KFN(affine_bf16_double)(x + i, y + i, n - i < 32 ? n - i : 32, shift, scale,
                            w ? w + i : NULL, b ? b + i : NULL);
}
#endif

#if KERN_F16C
/* ---- bfloat16 -> bfloat16 axpb in float lanes, AVX2 ---------------------- */

/* The 8-lane helpers below (bf16_widen8 to float_at_least) serve every
 * table with AVX2: the axpb and affine paths after them and the
 * backward's bfloat16 dx pass (kern_backward_impl.h) of the avx2 and
 * avx512 tables; the avx512bf16 table has 16-lane forms of all three (the
 * axpb and affine ones above) and uses only float_at_least. */

/* y = (x - shift) * a + c for bfloat16 x and y in 8 float lanes, with the
 * same bits as the double path (axpb_bf16_bf16, whose result is
 * RNE_bf16(t), t = fma(x - shift, a, c) in double), or that path.
 *
 * r = fma(x, A, C) in float, A = (float)a, C = (float)fma(-shift, a, c).
 * Bound, with M = |x A| + |C| (x is exact in float):
 *   |x A + C - ((x - shift) a + c)| <= 2^-24 |x a| + (2^-24 + 2^-53) |C|,
 *   the float fma's rounding 2^-24 |r| <= 2^-24 M (1 + 2^-24),
 *   t's own roundings: 2^-53 (|x - shift| |a| + |t|) <= 2^-53 (|x a| + 4
 *   + |t|), taken only while |shift a| <= 4 (else the double path whole),
 * so |r - t| < 2^-23 M (1 + 2^-20) + 2^-51. e = 2^-21.5 M + 2^-48 is more
 * than twice that even after its own three float roundings (eA and eC
 * 2^-24 each, and the fma), and since e >= 2^-21.5 |r| > 2 ulp(r) (or >=
 * 2^-48 near zero), the
 * float lo = r - e and hi = r + e round outward of r -+ e / 2 by less
 * than ulp / 2 each: t lies strictly inside [lo, hi].
 *
 * Rounding: on float bits, (u + 0x8000) >> 16 is round-half-away on the
 * magnitude (sign kept), monotone in the real value within one sign.
 * When lo and hi land in the same such bin B, no bfloat16 midpoint lies
 * strictly inside (lo, hi), so every value there, t and r included, has
 * RNE_bf16 = B (a midpoint at lo itself rounds away, to B as well; one at
 * hi would put hi in the next bin). That covers subnormals (the bfloat16
 * grid is the float bits with 16 low zeros there too) and overflow (a
 * finite hi past the last midpoint 0x7F7F8000 bins to infinity, as
 * RNE_bf16(t) does for every t beyond it). A lane whose r is NaN or
 * infinite (a NaN or infinite x, or a float overflow the bound does not
 * cover) is not taken either. A lane not taken is done again with the
 * double path's formula (on the bench's rows about one in 200: where x A
 * and C nearly cancel, e is large beside |r|). bench/check_kern compares
 * it bit for bit with the double formula. */
KINLINE __m256 abs8(__m256 v) {
  return _mm256_and_ps(v, _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF)));
}

/* The lane check of the comment above, shared by axpb and affine: given r
 * and e for 8 lanes, the bins (u + 0x8000) >> 16 of lo = r - e (the
 * bfloat16 of each lane when it is taken); *bad gains a bit in the high
 * halves where lo and hi = r + e bin apart or r is NaN or infinite. */
KINLINE __m256i bf16_bins8(__m256 r, __m256 e, __m256i *bad) {
  const __m256i half = _mm256_set1_epi32(0x8000);
  __m256i lo = _mm256_add_epi32(_mm256_castps_si256(_mm256_sub_ps(r, e)), half);
  __m256i hi = _mm256_add_epi32(_mm256_castps_si256(_mm256_add_ps(r, e)), half);
  /* |r| > FLT_MAX or NaN: all bits set */
  __m256 wild = _mm256_cmp_ps(abs8(r), _mm256_set1_ps(3.40282347e38f), _CMP_NLE_UQ);
  *bad = _mm256_or_si256(*bad, _mm256_or_si256(_mm256_xor_si256(lo, hi),
                                               _mm256_castps_si256(wild)));
  return _mm256_srli_epi32(lo, 16);
}

/* Stores at y the 16 bfloat16 of the bins b0 (elements 0-7) and b1 (8-15),
 * after redo(ctx, j, &lane) has written lane j by the double path for each
 * lane not taken (bad0, bad1 from bf16_bins8); redo reads x before the
 * store, so y may be x. Lanes not taken are rare: redo runs cold. */
KINLINE void bf16_store16(uint16_t *y, __m256i b0, __m256i b1, __m256i bad0,
                          __m256i bad1,
                          void (*redo)(const void *ctx, unsigned j, uint16_t *lane),
                          const void *ctx) {
  const __m256i high = _mm256_set1_epi32((int)0xFFFF0000u);
  /* packus interleaves the 128-bit halves: put them back in order */
  __m256i out = _mm256_permute4x64_epi64(_mm256_packus_epi32(b0, b1), 0xD8);
  if (__builtin_expect(!_mm256_testz_si256(_mm256_or_si256(bad0, bad1), high), 0)) {
    const __m256i zero = _mm256_setzero_si256();
    unsigned good =
        (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(
            _mm256_cmpeq_epi32(_mm256_and_si256(bad0, high), zero))) |
        (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(
            _mm256_cmpeq_epi32(_mm256_and_si256(bad1, high), zero))) << 8;
    uint16_t lanes[16];
    memcpy(lanes, &out, sizeof lanes);
    for (uint32_t bad = ~good & 0xFFFFu; bad;) {
      unsigned j = next_lane(&bad);
      redo(ctx, j, lanes + j);
    }
    memcpy(&out, lanes, sizeof lanes);
  }
  _mm256_storeu_si256((__m256i *)y, out);
}

/* The least float >= d (d >= 0 and below FLT_MAX) */
KINLINE float float_at_least(double d) {
  float f = (float)d;
  return (double)f < d ? nextafterf(f, INFINITY) : f;
}

#endif /* KERN_F16C: the 8-lane helpers */

#if KERN_F16C && !KERN_BF16NE
/* r and e for axpb's 8 elements at x: r = fma(x, A, C), e = 2^-21.5 M + 2^-48. */
KINLINE __m256 axpb_bf16_lanes8(const uint16_t *x, __m256 va, __m256 vc,
                                __m256 ea, __m256 ec, __m256 *e) {
  __m256 xf = bf16_widen8(x);
  *e = _mm256_fmadd_ps(abs8(xf), ea, ec);
  return _mm256_fmadd_ps(xf, va, vc);
}

/* One lane of axpb by the double path (its scalar tail: the same bits as
 * its body), for bf16_store16; x points at the 16 elements of the step. */
typedef struct {
  const uint16_t *x;
  double shift, a, c;
} axpb_bf16_redo_t;

static void KFN(axpb_bf16_redo)(const void *ctx, unsigned j, uint16_t *lane) {
  const axpb_bf16_redo_t *r = ctx;
  KFN(axpb_bf16_bf16)(r->x + j, lane, 1, r->shift, r->a, r->c, 0);
}

static void KFN(axpb_bf16_bf16_f)(const void *xv, void *yv, size_t n,
                                  double shift, double a, double c,
                                  int stream) {
  const uint16_t *x = xv;
  uint16_t *y = yv;
  size_t i = 0;
  /* The bound takes A as a normal float well inside the range, |shift a|
   * <= 4 (NaN fails) and a finite C; other rows take the double path. */
  double cd = fma(-shift, a, c);
  if (fabs(a) >= 0x1p-100 && fabs(a) <= 0x1p100 && fabs(shift * a) <= 4.0 &&
      fabs(cd) <= 0x1p100) {
    const float fa = (float)a, fc = (float)cd;
    const __m256 va = _mm256_set1_ps(fa), vc = _mm256_set1_ps(fc);
    const __m256 ea = _mm256_set1_ps(KERN_2_M21_5 * fabsf(fa));
    const __m256 ec = _mm256_set1_ps(KERN_2_M21_5 * fabsf(fc) + 0x1p-48f);
    for (; i + 16 <= n; i += 16) {
      __m256i bad0 = _mm256_setzero_si256(), bad1 = _mm256_setzero_si256();
      __m256 e0, e1;
      __m256 r0 = axpb_bf16_lanes8(x + i, va, vc, ea, ec, &e0);
      __m256 r1 = axpb_bf16_lanes8(x + i + 8, va, vc, ea, ec, &e1);
      __m256i b0 = bf16_bins8(r0, e0, &bad0), b1 = bf16_bins8(r1, e1, &bad1);
      const axpb_bf16_redo_t redo = {x + i, shift, a, c};
      bf16_store16(y + i, b0, b1, bad0, bad1, KFN(axpb_bf16_redo), &redo);
    }
  }
  KFN(axpb_bf16_bf16)(x + i, y + i, n - i, shift, a, c, stream);
}

/* ---- bfloat16 -> bfloat16 affine in float lanes, AVX2 -------------------- */

/* y = (x - shift) * scale * w[i] + b[i] for bfloat16 x and y (w or b, not
 * both, may be NULL; floats, the exact copies of the doubles the double
 * path affine_bf16_bf16 gets) in 8 float lanes, with the same bits as
 * that path, or that path. It computes T = fl(P w + b) in double, P =
 * fl(D scale), D = fl(x - shift) (without b: fl(P w); without w: fl(D
 * scale + b), one rounding fewer), then RNE_bf16(T).
 *
 * Float lanes, u = 2^-24: shift = sh + sl + tau (sh, sl floats; tau and
 * shift - sh are exact in double by Sterbenz, as |shift| <= 2^100), sf =
 * fl(scale) (normal: 2^-100 <= |scale| <= 2^100), d = fl(fl(x - sh) - sl),
 * p = fl(d sf), r = fl(p w + b) by one fma (p w, p + b: w = 1 or b = 0
 * below). With X = x - shift, Q = X scale, V = Q w + b (exact reals):
 * - d = (X + tau)(1 + delta), |delta| <= 2u (1 + 2^-21): fl(x - sh) is
 *   exact unless |x - sh| >= |sh| / 2 (Sterbenz), and then |sl| <= 2^-23
 *   |x - sh| (float subtractions do not underflow inexactly);
 * - p = (Q + tau scale)(1 + delta') + xi, |delta'| <= 4u (1 + 2^-20), |xi|
 *   <= 2^-150 (p subnormal), so |p - Q| <= 4.001u (|p| + 2^-150) + |tau
 *   scale| + 2^-150;
 * - |r - V| <= |p - Q| |w| + u |p w + b| + 2^-150;
 * - the double path: |T - V| <= 2^-51 (|Q w| + |b|) + 2^-1074 (1 + |w|).
 * So |r - T| <= B = 5.01u |p w| + 1.01u |b| + 1.001 |tau scale| |w| +
 * 1.001 2^-150 (|w| + 1). The lanes compute
 *   e = fl(fl(fl(|p| 2^-20.5 + E_tail) |w| + 2^-126) + |b| 2^-22),
 *   E_tail = 2.01 |tau scale| + 2^-126 (rounded up to a float),
 * (without w: fl(fl(|p| 2^-20.5 + E_tail + 2^-126) + |b| 2^-22); without
 * b: no last step; 2^-20.5 = 11.3 u, 2^-22 = 4 u). Each of its three float
 * steps loses at most u of its result plus 2^-150, so e >= (1 - 3u)
 * (11.3u |p w| + 4u |b| + (E_tail (1 - 2^-4)) |w| + 2^-126) - 3 2^-150 >
 * 2 B, and e > 2 (u |r| + 2^-150),
 * so that lo = fl(r - e) and hi = fl(r + e) are off r -+ e by less than e
 * / 2: T lies strictly inside [lo, hi]. From there the bins argument of
 * axpb above (bf16_bins8) gives RNE_bf16(T) where lo and hi bin alike. A
 * NaN or infinite x, w or b, and a float overflow of p or r, make r NaN or
 * infinite: those lanes, and those whose bins differ (T near a bfloat16
 * midpoint, or r near zero: e >= 2^-126 makes lo and hi straddle it, so a
 * zero T, whatever its sign, is never taken), are redone one element at a
 * time by the double path. Rows outside the ranges above (and a tail term
 * E_tail beyond 2^100) take the double path whole. bench/check_kern
 * compares it bit for bit with affine[NORM_BF16][NORM_BF16]. */
typedef struct {
  __m256 sh, sl, sf, e_tail; /* e_tail: E_tail (+ 2^-126 without w) */
} affine_bf16_consts8_t;

/* r and e for the 8 elements at x, weights and biases at w and b. */
KINLINE __m256 affine_bf16_lanes8(const affine_bf16_consts8_t *k,
                                  const uint16_t *x, const float *w,
                                  const float *b, __m256 *e) {
  __m256 d = _mm256_sub_ps(_mm256_sub_ps(bf16_widen8(x), k->sh), k->sl);
  __m256 p = _mm256_mul_ps(d, k->sf);
  __m256 t = _mm256_fmadd_ps(abs8(p), _mm256_set1_ps(KERN_2_M20_5), k->e_tail);
  __m256 r;
  if (w) {
    __m256 wv = _mm256_loadu_ps(w);
    t = _mm256_fmadd_ps(abs8(wv), t,
                        _mm256_set1_ps((float)KERN_SUBNORMAL_SLACK));
    r = b ? _mm256_fmadd_ps(p, wv, _mm256_loadu_ps(b)) : _mm256_mul_ps(p, wv);
  } else {
    r = _mm256_add_ps(p, _mm256_loadu_ps(b));
  }
  *e = b ? _mm256_fmadd_ps(abs8(_mm256_loadu_ps(b)), _mm256_set1_ps(0x1p-22f), t) : t;
  return r;
}

/* One lane of affine by the double path (its scalar tail: the same bits as
 * its body), for bf16_store16; x, w and b point at the step's 16. */
typedef struct {
  const uint16_t *x;
  const float *w, *b;
  double shift, scale;
} affine_bf16_redo_t;

static void KFN(affine_bf16_redo)(const void *ctx, unsigned j, uint16_t *lane) {
  const affine_bf16_redo_t *r = ctx;
  double wd = r->w ? r->w[j] : 0, bd = r->b ? r->b[j] : 0;
  KFN(affine_bf16_bf16)(r->x + j, lane, 1, r->shift, r->scale,
                        r->w ? &wd : NULL, r->b ? &bd : NULL, 0);
}

/* The vector loop of affine_bf16_bf16_f over [i, n) in steps of 16 for
 * one form (w, b or both: constants once inlined); returns where it
 * stopped. */
KINLINE size_t affine_bf16_loop8(const uint16_t *x, uint16_t *y, size_t i,
                                 size_t n, const affine_bf16_consts8_t *k,
                                 double shift, double scale, const float *w,
                                 const float *b) {
  for (; i + 16 <= n; i += 16) {
    const float *w0 = w ? w + i : NULL, *b0 = b ? b + i : NULL;
    const float *w1 = w ? w + i + 8 : NULL, *b1 = b ? b + i + 8 : NULL;
    __m256i bad0 = _mm256_setzero_si256(), bad1 = _mm256_setzero_si256();
    __m256 e0, e1;
    __m256 r0 = affine_bf16_lanes8(k, x + i, w0, b0, &e0);
    __m256 r1 = affine_bf16_lanes8(k, x + i + 8, w1, b1, &e1);
    __m256i lo0 = bf16_bins8(r0, e0, &bad0), lo1 = bf16_bins8(r1, e1, &bad1);
    const affine_bf16_redo_t redo = {x + i, w0, b0, shift, scale};
    bf16_store16(y + i, lo0, lo1, bad0, bad1, KFN(affine_bf16_redo), &redo);
  }
  return i;
}

static void KFN(affine_bf16_bf16_f)(const uint16_t *x, uint16_t *y, size_t n,
                                    double shift, double scale, const float *w,
                                    const float *b, double w_max, int stream) {
  (void)w_max; /* the 16-lane path's RMS form only */
  size_t i = 0;
  /* NaN fails every test */
  if (fabs(scale) >= 0x1p-100 && fabs(scale) <= 0x1p100 &&
      fabs(shift) <= 0x1p100) {
    const float sh = (float)shift, sl = (float)(shift - (double)sh);
    double tau = (shift - (double)sh) - (double)sl; /* exact */
    double tail = 2.01 * (fabs(tau) * fabs(scale)) + KERN_SUBNORMAL_SLACK +
                  (w ? 0 : KERN_SUBNORMAL_SLACK);
    if (tail <= 0x1p100) {
      const affine_bf16_consts8_t k = {
          .sh = _mm256_set1_ps(sh), .sl = _mm256_set1_ps(sl),
          .sf = _mm256_set1_ps((float)scale),
          .e_tail = _mm256_set1_ps(float_at_least(tail))};
      i = w && b ? affine_bf16_loop8(x, y, i, n, &k, shift, scale, w, b)
          : w    ? affine_bf16_loop8(x, y, i, n, &k, shift, scale, w, NULL)
                 : affine_bf16_loop8(x, y, i, n, &k, shift, scale, NULL, b);
    }
  }
  /* the tail, or everything, by the double path */
  for (; i < n; i += 16) {
    size_t m = n - i < 16 ? n - i : 16;
    double wd[16], bd[16];
    for (size_t j = 0; j < m; j++) {
      wd[j] = w ? w[i + j] : 0;
      bd[j] = b ? b[i + j] : 0;
    }
    KFN(affine_bf16_bf16)(x + i, y + i, m, shift, scale, w ? wd : NULL,
                          b ? bd : NULL, stream);
  }
}
#endif

/* ---- float32 apply in float lanes ------------------------------------------ */

typedef float vF __attribute__((vector_size(VW * 8))); /* 2 VW float lanes */
#define FW (2 * VW)

KINLINE vF ld_vF(const float *p) {
  vF v;
  memcpy(&v, p, sizeof v);
  return v;
}

KINLINE vF fmaF(vF a, vF b, vF c) {
#if KERN_F16C && VW == 8
  return (vF)_mm512_fmadd_ps((__m512)a, (__m512)b, (__m512)c);
#elif KERN_F16C && VW == 4
  return (vF)_mm256_fmadd_ps((__m256)a, (__m256)b, (__m256)c);
#else
  return a * b + c;
#endif
}

KINLINE float sfmaf(float a, float b, float c) {
#if KERN_F16C
  return __builtin_fmaf(a, b, c);
#else
  return a * b + c;
#endif
}

KINLINE void stF(float *p, vF v, int stream) {
#if KERN_NT
  if (stream) {
    _mm512_stream_ps(p, (__m512)v);
    return;
  }
#endif
  (void)stream;
  memcpy(p, &v, sizeof v);
}

/* The vector loops of affine_f32f over [i, n), for one kind of store (a
 * constant once inlined: no per-step test of it); returns where they
 * stopped. The next row is prefetched by the statistics pass (kern.h's
 * `ahead`), not here: layer norm's loop, x, w and b filling the 48 KiB L1
 * of a Zen 5 core, lost 25% to a prefetch of its own (to L2 or L3);
 * RMS norm's weight-only loop gained 14% from one (29.3 -> 33.5 GB/s,
 * rms 4096x4096 float32 forward, 1 thread) until sumsq prefetched, and
 * nothing on top of that since (medians of 5 alternating runs 34.9 /
 * 35.0 GB/s with and without). */
KINLINE size_t affine_f32f_loop(const float *x, float *y, size_t i, size_t n,
                                vF vhi, vF vlo, vF vsc, const float *w,
                                const float *b, const int stream) {
  if (w && b) {
    for (; i + FW <= n; i += FW)
      stF(y + i, fmaF((ld_vF(x + i) - vhi - vlo) * vsc, ld_vF(w + i), ld_vF(b + i)),
          stream);
  } else if (w) {
    for (; i + FW <= n; i += FW)
      stF(y + i, (ld_vF(x + i) - vhi - vlo) * vsc * ld_vF(w + i), stream);
  } else {
    for (; i + FW <= n; i += FW)
      stF(y + i, fmaF(ld_vF(x + i) - vhi - vlo, vsc, ld_vF(b + i)), stream);
  }
  return i;
}

/* d = (x - hi) - lo with shift = hi + lo split in two floats, then
 * y = fma(d * scale, w, b) (or d * scale * w, or fma(d, scale, b)). */
static void KFN(affine_f32f)(const float *x, float *y, size_t n, double shift,
                             double scale, const float *w, const float *b,
                             int stream) {
  const float hi = (float)shift, lo = (float)(shift - (double)hi);
  const float sc = (float)scale;
  const vF vhi = (vF){0} + hi, vlo = (vF){0} + lo, vsc = (vF){0} + sc;
  size_t i = 0;
  if (stream && KERN_NT) {
    i = head_to_align(y, sizeof(float), n);
    KFN(affine_f32f)(x, y, i, shift, scale, w, b, 0);
  }
  i = stream && KERN_NT ? affine_f32f_loop(x, y, i, n, vhi, vlo, vsc, w, b, 1)
                        : affine_f32f_loop(x, y, i, n, vhi, vlo, vsc, w, b, 0);
  if (stream) stream_fence();
  for (; i < n; i++) {
    float d = (x[i] - hi) - lo;
    y[i] = w && b ? sfmaf(d * sc, w[i], b[i])
           : w    ? d * sc * w[i]
                  : sfmaf(d, sc, b[i]);
  }
}

/* affine_f32f with a scalar w and b: y = fma(d * scale, w, b). */
static void KFN(axpb_f32f)(const float *x, float *y, size_t n, double shift,
                           double scale, float w, float b, int stream) {
  const float hi = (float)shift, lo = (float)(shift - (double)hi);
  const float sc = (float)scale;
  const vF vhi = (vF){0} + hi, vlo = (vF){0} + lo, vsc = (vF){0} + sc;
  const vF vw = w - (vF){0}, vb = b - (vF){0}; /* their -0 kept */
  size_t i = 0;
  if (stream && KERN_NT) {
    i = head_to_align(y, sizeof(float), n);
    KFN(axpb_f32f)(x, y, i, shift, scale, w, b, 0);
    for (; i + FW <= n; i += FW)
      stF(y + i, fmaF((ld_vF(x + i) - vhi - vlo) * vsc, vw, vb), 1);
    stream_fence();
  } else {
    for (; i + FW <= n; i += FW)
      stF(y + i, fmaF((ld_vF(x + i) - vhi - vlo) * vsc, vw, vb), 0);
  }
  for (; i < n; i++) y[i] = sfmaf(((x[i] - hi) - lo) * sc, w, b);
}

#include "kern_backward_impl.h"

/* ---- the table ------------------------------------------------------------ */

#define KROW(op, xt)                                                           \
  [NORM_F32] = KFN(op##_##xt##_f32), [NORM_F64] = KFN(op##_##xt##_f64),        \
  [NORM_F16] = KFN(op##_##xt##_f16), [NORM_BF16] = KFN(op##_##xt##_bf16)
#define KMAT(op)                                                               \
  {                                                                            \
    [NORM_F32] = {KROW(op, f32)}, [NORM_F64] = {KROW(op, f64)},                \
    [NORM_F16] = {KROW(op, f16)}, [NORM_BF16] = {KROW(op, bf16)},              \
  }
#define KVEC(op)                                                               \
  {                                                                            \
    [NORM_F32] = KFN(op##_f32), [NORM_F64] = KFN(op##_f64),                    \
    [NORM_F16] = KFN(op##_f16), [NORM_BF16] = KFN(op##_bf16),                  \
  }

const kern_t KERN_TABLE = {
    .name = KERN_NAME,
    .sum = KVEC(sum),
    .sumsq = KVEC(sumsq),
    .centered = KVEC(centered),
    .to_double = KVEC(to_double),
#if KERN_BF16NE
    .axpb = {[NORM_F32] = {KROW(axpb, f32)}, [NORM_F64] = {KROW(axpb, f64)},
             [NORM_F16] = {KROW(axpb, f16)},
             [NORM_BF16] = {[NORM_F32] = KFN(axpb_bf16_f32),
                            [NORM_F64] = KFN(axpb_bf16_f64),
                            [NORM_F16] = KFN(axpb_bf16_f16),
                            [NORM_BF16] = KFN(axpb_bf16_bf16_f)}},
#elif KERN_F16C
    .axpb = {[NORM_F32] = {KROW(axpb, f32)}, [NORM_F64] = {KROW(axpb, f64)},
             [NORM_F16] = {KROW(axpb, f16)},
             [NORM_BF16] = {[NORM_F32] = KFN(axpb_bf16_f32),
                            [NORM_F64] = KFN(axpb_bf16_f64),
                            [NORM_F16] = KFN(axpb_bf16_f16),
                            [NORM_BF16] = KFN(axpb_bf16_bf16_f)}},
#else
    .axpb = KMAT(axpb),
#endif
    .affine = KMAT(affine),
    .affine_f32 = KFN(affine_f32f),
    .axpb_f32 = KFN(axpb_f32f),
    KERN_BACKWARD_ENTRIES
#if KERN_F16C
    .affine_bf16 = KFN(affine_bf16_bf16_f),
#endif
};
