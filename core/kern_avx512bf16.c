/* kern_avx512bf16.c -- the kern.h loops for x86-64-v4 with AVX512-BF16
 * (Cooper Lake, Sapphire Rapids, Zen 4): as kern_avx512.c, but bfloat16
 * outputs are rounded by vcvtneps2bf16. Only called after kern_get() has
 * checked the CPU. */
#if defined(__x86_64__) && defined(__GNUC__)
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,avx512bf16,avx2,fma,f16c")
#define VW 8
#define KFN(name) name##_avx512bf16
#define KERN_F16C 1
#define KERN_BF16NE 1
#define KERN_TABLE kern_avx512bf16
#define KERN_NAME "avx512bf16"
#include "kern_impl.h"
#else
typedef int kern_avx512bf16_unused; /* not an x86-64 build */
#endif
