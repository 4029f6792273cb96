/* kern.c -- picks the kern_t for this CPU once (cpuid through GCC's
 * __builtin_cpu_supports, which also checks that the OS saves the wide
 * registers), honouring NORM_SIMD for tests and benchmarks. */
#include "kern.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static _Atomic(const kern_t *) active;

static const kern_t *best(void) {
#ifdef KERN_X86
  __builtin_cpu_init();
  const char *want = getenv("NORM_SIMD");
  int v4 = __builtin_cpu_supports("x86-64-v4");
  int v3 = __builtin_cpu_supports("x86-64-v3");
  if (want && strcmp(want, "base") == 0) return &kern_base;
  int bf16 = v4 && __builtin_cpu_supports("avx512bf16");
  if (want && strcmp(want, "avx2") == 0 && v3) return &kern_avx2;
  if (want && strcmp(want, "avx512") == 0 && v4) return &kern_avx512;
  if (bf16) return &kern_avx512bf16;
  if (v4) return &kern_avx512;
  if (v3) return &kern_avx2;
#endif
  return &kern_base;
}

const kern_t *kern_get(void) {
  const kern_t *k = atomic_load_explicit(&active, memory_order_acquire);
  if (k == NULL) { /* racing first calls all store the same table */
    k = best();
    atomic_store_explicit(&active, k, memory_order_release);
  }
  return k;
}

const char *norm_simd_name(void) { return kern_get()->name; }
