/* tensor.c -- validation of tensor descriptors (overflow-safe sizes) and
 * element access by index, for codecs, tests and slow paths. */
#include <stdint.h>

#include "norm.h"

int norm_tensor_check(const norm_tensor_t *t, size_t *numel, size_t *nbytes) {
  if (t == NULL) return NORM_E_NULL;
  size_t elem = norm_dtype_size(t->dtype);
  if (elem == 0) return NORM_E_DTYPE;
  if (t->rank < 1 || t->rank > NORM_MAX_RANK) return NORM_E_RANK;
  for (int i = 0; i < t->rank; i++)
    if (t->shape[i] < 0) return NORM_E_DIM;
  for (int i = 0; i < t->rank; i++)
    if (t->shape[i] == 0) return NORM_E_EMPTY;
  size_t n = 1;
  const size_t max_bytes = (size_t)PTRDIFF_MAX;
  for (int i = 0; i < t->rank; i++) {
    uint64_t d = (uint64_t)t->shape[i];
    if (d > max_bytes || n > max_bytes / d) return NORM_E_OVERFLOW;
    n *= (size_t)d;
  }
  if (n > max_bytes / elem) return NORM_E_OVERFLOW;
  if (numel) *numel = n;
  if (nbytes) *nbytes = n * elem;
  return NORM_OK;
}

double norm_tensor_get(const norm_tensor_t *t, size_t i) {
  switch (t->dtype) {
  case NORM_F32: return ((const float *)t->data)[i];
  case NORM_F64: return ((const double *)t->data)[i];
  case NORM_F16: return norm_float_from_f16(((const uint16_t *)t->data)[i]);
  case NORM_BF16: return norm_float_from_bf16(((const uint16_t *)t->data)[i]);
  default: return 0.0;
  }
}

void norm_tensor_set(norm_tensor_t *t, size_t i, double v) {
  switch (t->dtype) {
  case NORM_F32: ((float *)t->data)[i] = (float)v; break;
  case NORM_F64: ((double *)t->data)[i] = v; break;
  case NORM_F16: ((uint16_t *)t->data)[i] = norm_f16_from_double(v); break;
  case NORM_BF16: ((uint16_t *)t->data)[i] = norm_bf16_from_double(v); break;
  default: break;
  }
}
