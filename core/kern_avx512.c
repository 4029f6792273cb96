/* kern_avx512.c -- the kern.h loops for x86-64-v4 (AVX-512 F/BW/DQ/VL, with
 * F16C: Skylake-X, Ice Lake, Zen 4 and later). Only called after kern_get()
 * has checked the CPU. */
#if defined(__x86_64__) && defined(__GNUC__)
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma,f16c")
#define VW 8
#define KFN(name) name##_avx512
#define KERN_F16C 1
#define KERN_TABLE kern_avx512
#define KERN_NAME "avx512"
#include "kern_impl.h"
#else
typedef int kern_avx512_unused; /* not an x86-64 build */
#endif
