/* kern_base.c -- the kern.h loops for any CPU: baseline x86-64 (SSE2, two
 * double lanes) or whatever the compiler targets elsewhere. */
#define VW 2
#define KFN(name) name##_base
#define KERN_F16C 0
#define KERN_TABLE kern_base
#define KERN_NAME "base"
#include "kern_impl.h"
