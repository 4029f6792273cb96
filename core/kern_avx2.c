/* kern_avx2.c -- the kern.h loops for x86-64-v3 (AVX2, FMA, F16C: Haswell,
 * Zen 1 and later). Only called after kern_get() has checked the CPU. */
#if defined(__x86_64__) && defined(__GNUC__)
#pragma GCC target("avx2,fma,f16c")
#define VW 4
#define KFN(name) name##_avx2
#define KERN_F16C 1
#define KERN_TABLE kern_avx2
#define KERN_NAME "avx2"
#include "kern_impl.h"
#else
typedef int kern_avx2_unused; /* not an x86-64 build */
#endif
