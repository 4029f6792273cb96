/* fmt_ab.c -- the number printer (server/codec/fmt.c) against a previous
 * revision of itself, linked into one program: `make fmt-ab` takes
 * FMT_AB_BASE's fmt.c from git and renames its global symbols with a
 * prev_ prefix (objcopy), so a printer change can be proved byte-identical
 * and timed against the code it replaces.
 *
 *   fmt_ab check [threads [every]]
 *                           all 2^32 float32 patterns through
 *                           fmt_float_list, 4096 consecutive patterns per
 *                           list (so separators are compared too), and
 *                           10^8 random doubles through fmt_double_list;
 *                           exit 1 on any byte that differs (every > 1:
 *                           only every every-th list, a quick look)
 *   fmt_ab time [rounds]    thread CPU time per number of both, alternating
 *                           (2^18 N(0,1) float32 values a call)
 *   fmt_ab count prev|new   one fmt_float_list call on those values, for
 *                           valgrind --tool=callgrind
 *                           --toggle-collect=fmt_float_list (or
 *                           prev_fmt_float_list) */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fmt.h"

/* FMT_AB_BASE's printer (prev_ symbols, from the Makefile's objcopy) */
int prev_fmt_float(float f, char *buf);
int prev_fmt_double(double d, char *buf);
size_t prev_fmt_float_list(const float *v, size_t n, char *out);
size_t prev_fmt_double_list(const double *v, size_t n, char *out);

#define LIST 4096                 /* numbers per list */
#define DOUBLE_LISTS 24415        /* 24415 * 4096 > 10^8 random doubles */
#define FLOAT_LISTS (1u << 20)    /* 2^32 / LIST */
#define TIMED_COUNT (1u << 18)    /* numbers per timed call */

static uint64_t xorshift(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

/* A normal deviate (Box-Muller), as bench/codec_bench.c's. */
static double gauss(uint64_t *s) {
  double u0 = ((double)(xorshift(s) >> 11) + 0.5) / 9007199254740992.0;
  double u1 = ((double)(xorshift(s) >> 11) + 0.5) / 9007199254740992.0;
  return sqrt(-2 * log(u0)) * cos(6.283185307179586 * u1);
}

/* A random double of one of four kinds, a quarter each: any bit pattern
 * (NaN, infinities, subnormals and every binade), N(0,1), a float32
 * widened (short texts), a significand at a binary exponent in [-64, 64)
 * (the positional forms). */
static double random_double(uint64_t *s) {
  uint64_t r = xorshift(s), bits;
  double d;
  switch (r >> 62) {
  case 0:
    bits = xorshift(s);
    memcpy(&d, &bits, sizeof d);
    return d;
  case 1: return gauss(s);
  case 2: {
    uint32_t f32 = (uint32_t)xorshift(s);
    float f;
    memcpy(&f, &f32, sizeof f);
    return (double)f;
  }
  default:
    bits = (xorshift(s) & 0x800FFFFFFFFFFFFFull) | (uint64_t)(1023 - 64 + (r & 127)) << 52;
    memcpy(&d, &bits, sizeof d);
    return d;
  }
}

/* ---- check --------------------------------------------------------------- */

typedef struct {
  uint32_t every;                             /* lists taken: 0, every, ... */
  uint32_t next_float_list, next_double_list; /* atomics: the next to take */
  uint64_t floats, doubles, float_diffs, double_diffs;
  pthread_mutex_t lock;
  char first[400];
} check_t;

/* Records a list whose texts differ: the first element that does. */
static void report(check_t *c, int is_float, const char *want, size_t want_len,
                   const char *got, size_t got_len, uint64_t id) {
  size_t at = 0;
  while (at < want_len && at < got_len && want[at] == got[at]) at++;
  size_t from = at;
  while (from > 0 && want[from - 1] != ',') from--;
  pthread_mutex_lock(&c->lock);
  if (is_float) c->float_diffs++;
  else c->double_diffs++;
  if (!c->first[0])
    snprintf(c->first, sizeof c->first,
             "%s list %llu, byte %zu: prev \"%.40s\", new \"%.40s\"",
             is_float ? "float" : "double", (unsigned long long)id, at,
             want + from, got + from);
  pthread_mutex_unlock(&c->lock);
}

static void *check_part(void *arg) {
  check_t *c = arg;
  float *f = malloc(LIST * sizeof *f);
  double *d = malloc(LIST * sizeof *d);
  char *want = malloc(LIST * FMT_ELEMENT_MAX), *got = malloc(LIST * FMT_ELEMENT_MAX);
  if (!f || !d || !want || !got) {
    fprintf(stderr, "fmt_ab: out of memory\n");
    exit(2);
  }
  uint64_t floats = 0, doubles = 0;
  for (;;) {
    uint32_t list = __atomic_fetch_add(&c->next_float_list, c->every, __ATOMIC_RELAXED);
    if (list >= FLOAT_LISTS) break;
    for (uint32_t i = 0; i < LIST; i++) {
      uint32_t bits = list * LIST + i;
      memcpy(&f[i], &bits, sizeof bits);
    }
    size_t nw = prev_fmt_float_list(f, LIST, want), ng = fmt_float_list(f, LIST, got);
    if (nw != ng || memcmp(want, got, nw) != 0) report(c, 1, want, nw, got, ng, list);
    floats += LIST;
    if (list % (4096 * c->every) == 0)
      fprintf(stderr, "\rfmt_ab: float32 patterns from %08x", (unsigned)(list * LIST));
  }
  for (;;) {
    uint32_t list = __atomic_fetch_add(&c->next_double_list, c->every, __ATOMIC_RELAXED);
    if (list >= DOUBLE_LISTS) break;
    uint64_t seed = 0x9E3779B97F4A7C15ull * (list + 1);
    for (int i = 0; i < LIST; i++) d[i] = random_double(&seed);
    size_t nw = prev_fmt_double_list(d, LIST, want), ng = fmt_double_list(d, LIST, got);
    if (nw != ng || memcmp(want, got, nw) != 0) report(c, 0, want, nw, got, ng, list);
    doubles += LIST;
  }
  pthread_mutex_lock(&c->lock);
  c->floats += floats;
  c->doubles += doubles;
  pthread_mutex_unlock(&c->lock);
  free(f);
  free(d);
  free(want);
  free(got);
  return NULL;
}

static int check(int threads, uint32_t every) {
  check_t c = {.every = every, .lock = PTHREAD_MUTEX_INITIALIZER};
  pthread_t tid[64];
  for (int t = 0; t < threads; t++) pthread_create(&tid[t], NULL, check_part, &c);
  for (int t = 0; t < threads; t++) pthread_join(tid[t], NULL);
  fprintf(stderr, "\n");
  printf("fmt_ab check: %llu float32 patterns (lists of %d), %llu differ; "
         "%llu random doubles, %llu differ%s%s\n",
         (unsigned long long)c.floats, LIST,
         (unsigned long long)c.float_diffs,
         (unsigned long long)c.doubles, (unsigned long long)c.double_diffs,
         c.first[0] ? "; first: " : " (byte-identical)", c.first);
  return c.float_diffs || c.double_diffs || (every == 1 && c.floats != 1ull << 32);
}

/* ---- time and count ------------------------------------------------------ */

static float *timed_values(void) {
  float *v = malloc(TIMED_COUNT * sizeof *v);
  if (!v) exit(2);
  uint64_t seed = 88172645463325252ull;
  for (uint32_t i = 0; i < TIMED_COUNT; i++) v[i] = (float)gauss(&seed);
  return v;
}

static double thread_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static int time_both(int rounds) {
  float *v = timed_values();
  char *a = malloc(TIMED_COUNT * FMT_ELEMENT_MAX), *b = malloc(TIMED_COUNT * FMT_ELEMENT_MAX);
  double *tp = malloc((size_t)rounds * sizeof *tp), *tn = malloc((size_t)rounds * sizeof *tn);
  if (!a || !b || !tp || !tn) return 2;
  size_t na = prev_fmt_float_list(v, TIMED_COUNT, a), nb = fmt_float_list(v, TIMED_COUNT, b);
  if (na != nb || memcmp(a, b, na) != 0) {
    printf("fmt_ab time: the texts differ\n");
    return 1;
  }
  for (int r = 0; r < rounds; r++)
    for (int which = 0; which < 2; which++) { /* the order alternates too */
      int is_new = which ^ (r & 1);
      double t0 = thread_seconds();
      if (is_new) fmt_float_list(v, TIMED_COUNT, b);
      else prev_fmt_float_list(v, TIMED_COUNT, a);
      double t = thread_seconds() - t0;
      (is_new ? tn : tp)[r] = t;
    }
  qsort(tp, (size_t)rounds, sizeof *tp, cmp_double);
  qsort(tn, (size_t)rounds, sizeof *tn, cmp_double);
  double scale = 1e9 / TIMED_COUNT;
  printf("fmt_ab time: fmt_float_list, %u N(0,1) float32 a call, %d rounds "
         "alternating, thread CPU ns/number\n"
         "  prev: median %.2f  min %.2f\n  new:  median %.2f  min %.2f\n"
         "  new/prev: median %.3f  min %.3f\n",
         TIMED_COUNT, rounds, tp[rounds / 2] * scale, tp[0] * scale, tn[rounds / 2] * scale,
         tn[0] * scale, tn[rounds / 2] / tp[rounds / 2], tn[0] / tp[0]);
  free(v);
  free(a);
  free(b);
  free(tp);
  free(tn);
  return 0;
}

static int count(int is_new) {
  float *v = timed_values();
  char *out = malloc(TIMED_COUNT * FMT_ELEMENT_MAX), warm[FMT_NUMBER_MAX];
  if (!out) return 2;
  /* the tables are built at the first use, outside the counted call */
  if (is_new) fmt_float(1.5f, warm);
  else prev_fmt_float(1.5f, warm);
  size_t n = is_new ? fmt_float_list(v, TIMED_COUNT, out) : prev_fmt_float_list(v, TIMED_COUNT, out);
  printf("fmt_ab count: %s fmt_float_list, %u numbers, %zu bytes\n", is_new ? "new" : "prev",
         TIMED_COUNT, n);
  free(v);
  free(out);
  return 0;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "check";
  if (strcmp(mode, "check") == 0) {
    int threads = argc > 2 ? atoi(argv[2]) : 2, every = argc > 3 ? atoi(argv[3]) : 1;
    return check(threads < 1 ? 1 : threads > 64 ? 64 : threads, every < 1 ? 1 : (uint32_t)every);
  }
  if (strcmp(mode, "time") == 0) {
    int rounds = argc > 2 ? atoi(argv[2]) : 41;
    return time_both(rounds < 1 ? 1 : rounds);
  }
  if (strcmp(mode, "count") == 0 && argc > 2)
    return count(strcmp(argv[2], "new") == 0);
  fprintf(stderr, "usage: fmt_ab check [threads [every]] | time [rounds] | count prev|new\n");
  return 2;
}
