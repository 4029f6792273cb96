/* dtype.c -- element types: sizes, names, and the float16 / bfloat16
 * conversions (round-to-nearest-even, NaN and Inf preserved) that every
 * kernel and codec uses. Pure bit manipulation; no FPU mode assumptions. */
#include <math.h>
#include <string.h>

#include "norm.h"

static const struct {
  const char *name;
  size_t size;
} dtype_info[NORM_DTYPE_COUNT] = {
    [NORM_F32] = {"float32", 4},
    [NORM_F64] = {"float64", 8},
    [NORM_F16] = {"float16", 2},
    [NORM_BF16] = {"bfloat16", 2},
};

size_t norm_dtype_size(norm_dtype_t dtype) {
  return (unsigned)dtype < NORM_DTYPE_COUNT ? dtype_info[dtype].size : 0;
}

const char *norm_dtype_name(norm_dtype_t dtype) {
  return (unsigned)dtype < NORM_DTYPE_COUNT ? dtype_info[dtype].name : NULL;
}

int norm_dtype_from_name(const char *name, norm_dtype_t *out) {
  if (name == NULL || out == NULL) return NORM_E_NULL;
  for (int i = 0; i < NORM_DTYPE_COUNT; i++) {
    if (strcmp(name, dtype_info[i].name) == 0) {
      *out = (norm_dtype_t)i;
      return NORM_OK;
    }
  }
  return NORM_E_DTYPE;
}

static uint32_t float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static float bits_float(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* binary32 -> binary16: 1 sign, 5 exponent (bias 15), 10 mantissa bits. */
uint16_t norm_f16_from_float(float f) {
  uint32_t u = float_bits(f);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  uint32_t exp = (u >> 23) & 0xFFu;
  uint32_t man = u & 0x7FFFFFu;

  if (exp == 0xFF) /* Inf stays Inf; NaN keeps its top payload bits, quiet */
    return (uint16_t)(sign | 0x7C00u | (man ? 0x200u | (man >> 13) : 0));

  int32_t e = (int32_t)exp - 127 + 15; /* rebiased exponent */
  if (e >= 31) return (uint16_t)(sign | 0x7C00u); /* overflow -> Inf */

  if (e <= 0) { /* subnormal half (or zero) */
    if (e < -10) return sign; /* below half the smallest subnormal: +-0 */
    man |= 0x800000u;         /* implicit leading one */
    uint32_t shift = (uint32_t)(14 - e);
    uint32_t half = man >> shift;
    uint32_t rest = man & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (half & 1u))) half++;
    return (uint16_t)(sign | half); /* a carry into the exponent is right */
  }

  uint32_t half = ((uint32_t)e << 10) | (man >> 13);
  uint32_t rest = man & 0x1FFFu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) half++; /* may carry to Inf */
  return (uint16_t)(sign | half);
}

float norm_float_from_f16(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t man = h & 0x3FFu;
  if (exp == 0x1F) return bits_float(sign | 0x7F800000u | (man << 13));
  if (exp == 0) {
    if (man == 0) return bits_float(sign);
    /* subnormal: man * 2^-24, exact in float */
    float v = (float)man * 0x1p-24f;
    return sign ? -v : v;
  }
  return bits_float(sign | ((exp - 15 + 127) << 23) | (man << 13));
}

uint16_t norm_bf16_from_float(float f) {
  uint32_t u = float_bits(f);
  if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x7FFFFFu)) /* NaN: quiet it */
    return (uint16_t)((u >> 16) | 0x40u);
  uint32_t rounding = 0x7FFFu + ((u >> 16) & 1u); /* ties to even */
  return (uint16_t)((u + rounding) >> 16);         /* may round up to Inf */
}

float norm_float_from_bf16(uint16_t b) { return bits_float((uint32_t)b << 16); }

/* double -> float rounded to odd: truncate toward zero, then set the last
 * bit if anything was lost. A second rounding of this float to a format
 * with at least two fewer bits equals rounding d once (the classic
 * round-to-odd argument), so the half conversions below are exact. */
static float float_round_to_odd(double d) {
  float f = (float)d;
  if ((double)f == d || isnan(d)) return f;
  if (fabs((double)f) > fabs(d)) f = nextafterf(f, 0.0f);
  uint32_t u = float_bits(f) | 1u;
  return bits_float(u);
}

uint16_t norm_f16_from_double(double d) {
  return norm_f16_from_float(float_round_to_odd(d));
}

uint16_t norm_bf16_from_double(double d) {
  return norm_bf16_from_float(float_round_to_odd(d));
}
