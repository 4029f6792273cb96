/* check_kern.c -- checks that every kern.h table (base, avx2, avx512 where
 * the CPU has them) converts exactly like the scalar reference in dtype.c:
 * all 65536 half / bfloat16 patterns in, and millions of doubles out
 * (random bit patterns, values near half-format ties, overflow, denormals,
 * NaN, Inf), rounded once to float16 / bfloat16 / float32.
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
    k->axpb[NORM_F64][NORM_F16](ref, out16, 65536, 0.0, 1.0, 0.0);
    for (int i = 0; i < 65536; i++)
      if (out16[i] != norm_f16_from_double(ref[i]) && bad++ < 5)
        printf("  %s f16 %a: %04x want %04x\n", k->name, ref[i], out16[i],
               norm_f16_from_double(ref[i]));
    k->axpb[NORM_F64][NORM_BF16](ref, out16, 65536, 0.0, 1.0, 0.0);
    for (int i = 0; i < 65536; i++)
      if (out16[i] != norm_bf16_from_double(ref[i]) && bad++ < 5)
        printf("  %s bf16 %a: %04x want %04x\n", k->name, ref[i], out16[i],
               norm_bf16_from_double(ref[i]));
    k->axpb[NORM_F64][NORM_F32](ref, out32, 65536, 0.0, 1.0, 0.0);
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

int main(void) {
  int bad = check(&kern_base);
#ifdef KERN_X86
  __builtin_cpu_init();
  if (__builtin_cpu_supports("x86-64-v3")) bad += check(&kern_avx2);
  else printf("avx2    not supported by this CPU: skipped\n");
  if (__builtin_cpu_supports("x86-64-v4")) bad += check(&kern_avx512);
  else printf("avx512  not supported by this CPU: skipped\n");
  if (__builtin_cpu_supports("x86-64-v4") &&
      __builtin_cpu_supports("avx512bf16"))
    bad += check(&kern_avx512bf16);
  else printf("avx512bf16 not supported by this CPU: skipped\n");
#endif
  return bad != 0;
}
