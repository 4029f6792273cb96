/* parse_sweep.c -- fmt_parse_float / fmt_parse_double (server/codec/fmt_parse.c)
 * against the C library, at scale:
 *   1. every float32 bit pattern, printed by fmt_float and by "%.9g", must
 *      parse back to the same bits, as strtof does (non-finite patterns:
 *      their spellings are not JSON numbers, so the parse takes 0 bytes);
 *   2. random doubles (bit patterns, and values of ordinary size) printed
 *      shortest, "%.17g" and "%.{6..16}g": fmt_parse_double must agree with
 *      strtod, and fmt_parse_float with strtof;
 *   3. random decimal texts (1..40 digits, any exponent) and texts cut
 *      from the exact midpoints between neighbouring doubles and floats
 *      (the hardest cases for the error bound), against strtod / strtof;
 *   4. throughput, ns per number, against strtof / strtod on realistic
 *      JSON arrays parsed in sequence.
 * Splits the work over the CPUs; the float sweep takes tens of minutes.
 * Run: make bench-check (exit 1 on any failure), or
 *   parse_sweep [--bench] [--doubles N] [--strings N] [--float-slices K]
 *               [--float-from A] [--float-to B]
 * (--bench: throughput only; the float patterns in 256 slices: the first
 * K of them, or slices A..B-1).
 * Each text is parsed twice by fmt_parse_double: alone, and followed by
 * one of a few separators and more text, as in a long JSON array, where
 * the windowed scan (fmt_scan.h) reads it; both must agree. */
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fmt.h"

#define MAX_THREADS 64

/* splitmix64 */
static uint64_t rand_u64(uint64_t *state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static int same_float(float a, float b) { return memcmp(&a, &b, 4) == 0; }
static int same_double(double a, double b) { return memcmp(&a, &b, 8) == 0; }

/* One thread's share of a check, and what it found. */
typedef struct {
  uint64_t begin, end; /* a range of indices (float patterns, or seeds) */
  uint64_t seed;
  uint64_t checked, failures;
  char first[200];
} part_t;

static void fail(part_t *p, const char *text, const char *why) {
  if (p->failures++ == 0)
    snprintf(p->first, sizeof p->first, "\"%.80s\": %s", text, why);
}

/* fmt_parse_double of text (len bytes) followed by more text, as inside a
 * long array: the text of a number must end where it ends alone, with
 * the same double. The followers end no number: "e" and "." without a
 * digit after them are not part of it. */
static int padded_double(const char *text, size_t len, uint64_t pick, double *out) {
  static const char *const followers[] = {",", "]", ", ", "\n", "e,", "E+]", ".,", "}"};
  char buf[256];
  const char *f = followers[pick % (sizeof followers / sizeof followers[0])];
  size_t flen = strlen(f);
  if (len + flen + 64 > sizeof buf) return 1;
  memcpy(buf, text, len);
  memcpy(buf + len, f, flen);
  memset(buf + len + flen, '7', 64); /* more numbers' digits */
  return fmt_parse_double(buf, len + flen + 64, out) == len;
}

/* text must be taken whole by both parsers, and agree with strtod and
 * strtof; if want is given, the double must be *want. */
static void check_text(part_t *p, const char *text, const double *want) {
  size_t len = strlen(text);
  double d;
  float f;
  double in_array;
  p->checked++;
  if (fmt_parse_double(text, len, &d) != len || fmt_parse_float(text, len, &f) != len)
    fail(p, text, "not taken whole");
  else if (!padded_double(text, len, p->checked, &in_array) || !same_double(in_array, d))
    fail(p, text, "fmt_parse_double differs followed by more text");
  else if (!same_double(d, strtod(text, NULL)))
    fail(p, text, "fmt_parse_double differs from strtod");
  else if (!same_float(f, strtof(text, NULL)))
    fail(p, text, "fmt_parse_float differs from strtof");
  else if (want && !same_double(d, *want))
    fail(p, text, "does not parse back to its double");
}

static uint64_t all_checked, all_failures; /* over every run_parts */

/* Runs fn over [0, total) split into slices (slices from..to-1 of
 * them), nt at a time; prints progress and the result line; returns the
 * number of failures. */
static uint64_t run_parts(const char *name, void *(*fn)(void *), uint64_t total,
                          int slices, int from, int to, uint64_t seed, int nt) {
  uint64_t checked = 0, failures = 0;
  char first[200] = "";
  for (int s = from; s < to; s += nt) {
    part_t parts[MAX_THREADS];
    pthread_t tid[MAX_THREADS];
    int k = 0;
    for (; k < nt && s + k < to; k++) {
      parts[k] = (part_t){.begin = total / (uint64_t)slices * (uint64_t)(s + k),
                          .end = total / (uint64_t)slices * (uint64_t)(s + k + 1),
                          .seed = seed + 0x1000003ull * (uint64_t)(s + k)};
      if (s + k == slices - 1) parts[k].end = total;
      pthread_create(&tid[k], NULL, fn, &parts[k]);
    }
    for (int t = 0; t < k; t++) {
      pthread_join(tid[t], NULL);
      checked += parts[t].checked;
      failures += parts[t].failures;
      if (!first[0] && parts[t].first[0]) memcpy(first, parts[t].first, sizeof first);
    }
    fprintf(stderr, "\r%s: %3d%%", name, (s + k - from) * 100 / (to - from));
  }
  fprintf(stderr, "\n");
  all_checked += checked;
  all_failures += failures;
  printf("%s: %llu texts, %llu failures%s%s\n", name, (unsigned long long)checked,
         (unsigned long long)failures, failures ? "; first: " : "", first);
  fflush(stdout);
  return failures;
}

/* ---- 1. every float32 ------------------------------------------------------ */

static void *floats_run(void *arg) {
  part_t *p = arg;
  char text[2][48];
  for (uint64_t i = p->begin; i < p->end; i++) {
    uint32_t u = (uint32_t)i;
    float want;
    memcpy(&want, &u, 4);
    fmt_float(want, text[0]);
    snprintf(text[1], sizeof text[1], "%.9g", (double)want);
    for (int k = 0; k < 2; k++) {
      size_t len = strlen(text[k]);
      float f;
      p->checked++;
      if (!isfinite(want)) { /* "NaN", "-Infinity", "nan", "-inf" */
        if (fmt_parse_float(text[k], len, &f) != 0) fail(p, text[k], "taken as a number");
        continue;
      }
      double d;
      if (fmt_parse_float(text[k], len, &f) != len)
        fail(p, text[k], "not taken whole");
      else if (!same_float(f, want))
        fail(p, text[k], "does not parse back to its float");
      else if (!same_float(strtof(text[k], NULL), want))
        fail(p, text[k], "strtof disagrees");
      else if (!padded_double(text[k], len, i + (uint64_t)k, &d) ||
               !same_double(d, strtod(text[k], NULL)))
        fail(p, text[k], "fmt_parse_double in an array differs from strtod");
    }
  }
  return NULL;
}

/* ---- 2. random doubles ------------------------------------------------------ */

/* Half bit patterns (every exponent alike), half values of ordinary size:
 * 53 random bits times 10^[-12, 12], either sign. */
static double random_double(uint64_t *state) {
  uint64_t r = rand_u64(state);
  double x;
  if (r & 1) {
    uint64_t b = rand_u64(state);
    memcpy(&x, &b, 8);
    return x;
  }
  x = (double)(rand_u64(state) >> 11) * 0x1p-53 * pow(10, (double)(r >> 1 & 31) - 12);
  return r & 64 ? -x : x;
}

static void *doubles_run(void *arg) {
  part_t *p = arg;
  uint64_t state = p->seed;
  char text[48];
  for (uint64_t i = p->begin; i < p->end; i++) {
    double want = random_double(&state);
    if (!isfinite(want)) continue;
    fmt_double(want, text);
    check_text(p, text, &want);
    snprintf(text, sizeof text, "%.17g", want);
    check_text(p, text, &want);
    snprintf(text, sizeof text, "%.*g", 6 + (int)(i % 11), want);
    check_text(p, text, NULL);
  }
  return NULL;
}

/* ---- 3. random and near-midpoint decimal texts --------------------------- */

/* A random JSON number: 1..40 significant digits, a point anywhere or
 * none, sometimes "0.000" before them, an exponent in [-400, 400] or
 * none, either sign. */
static void random_text(uint64_t *state, char *out) {
  char *p = out;
  if (rand_u64(state) & 1) *p++ = '-';
  int nd = 1 + (int)(rand_u64(state) % 40);
  int point = (int)(rand_u64(state) % (uint64_t)(nd + 1));
  if (rand_u64(state) % 4 == 0) {
    *p++ = '0';
    *p++ = '.';
    for (int z = (int)(rand_u64(state) % 20); z > 0; z--) *p++ = '0';
    point = nd;
  }
  for (int i = 0; i < nd; i++) {
    if (i == point && i > 0) *p++ = '.';
    char c = (char)('0' + rand_u64(state) % 10);
    if (i == 0 && c == '0' && (p == out || p[-1] != '0')) c = '1';
    *p++ = c;
  }
  if (rand_u64(state) % 4) p += sprintf(p, "e%d", (int)(rand_u64(state) % 801) - 400);
  *p = '\0';
}

/* Texts cut from the exact midpoint above a random double (in long double,
 * where x86's 64-bit significand holds it exactly) or float (in double),
 * to 8..40 significant digits, rounded by printf; either sign. */
static void midpoint_text(uint64_t *state, char *out, int as_float) {
  int digits = 8 + (int)(rand_u64(state) % 33);
  uint64_t r = rand_u64(state);
  const char *sign = r >> 63 ? "-" : "";
  if (as_float) {
    uint32_t b = (uint32_t)r % 0x7F7FFFFFu; /* below FLT_MAX's bits */
    float a;
    memcpy(&a, &b, 4);
    double mid = ((double)a + (double)nextafterf(a, INFINITY)) / 2;
    sprintf(out, "%s%.*e", sign, digits - 1, mid);
    return;
  }
#if LDBL_MANT_DIG >= 64
  uint64_t b = (r & 0x7FFFFFFFFFFFFFFFull) % 0x7FEFFFFFFFFFFFFFull; /* below DBL_MAX's */
  double a;
  memcpy(&a, &b, 8);
  long double mid = ((long double)a + (long double)nextafter(a, INFINITY)) / 2;
  sprintf(out, "%s%.*Le", sign, digits - 1, mid);
#else
  random_text(state, out);
#endif
}

static void *strings_run(void *arg) {
  part_t *p = arg;
  uint64_t state = p->seed;
  char text[128];
  for (uint64_t i = p->begin; i < p->end; i++) {
    switch (i % 4) {
    case 0:
    case 1: random_text(&state, text); break;
    case 2: midpoint_text(&state, text, 0); break;
    default: midpoint_text(&state, text, 1);
    }
    check_text(p, text, NULL);
  }
  return NULL;
}

/* ---- 4. throughput ---------------------------------------------------------- */

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* N(0, 1) by Box-Muller */
static double gaussian(uint64_t *state) {
  double u1 = ((double)(rand_u64(state) >> 11) + 1) * 0x1p-53;
  double u2 = (double)(rand_u64(state) >> 11) * 0x1p-53;
  return sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2);
}

enum { STYLE_FLOAT_SHORTEST, STYLE_DOUBLE_17G, STYLE_DOUBLE_SHORTEST };

/* "[x0,x1,...]" with n values of N(0, 1) in the given style. */
static char *json_array(size_t n, int style, size_t *len) {
  char *text = malloc(n * 26 + 3);
  if (!text) exit(2);
  uint64_t state = 42;
  char *p = text;
  *p++ = '[';
  for (size_t i = 0; i < n; i++) {
    double x = gaussian(&state);
    if (style == STYLE_FLOAT_SHORTEST)
      p += fmt_float((float)x, p);
    else if (style == STYLE_DOUBLE_SHORTEST)
      p += fmt_double(x, p);
    else
      p += sprintf(p, "%.17g", x);
    *p++ = ',';
  }
  p[-1] = ']';
  *p = '\0';
  *len = (size_t)(p - text);
  return text;
}

/* Parses the array in sequence as a scanner would (each number starts
 * after the delimiter that ended the previous one); returns seconds. */
static double parse_array(const char *text, size_t len, size_t n, int use_fmt,
                          int as_float, void *out) {
  const char *p = text + 1, *end = text + len;
  double t = now();
  for (size_t i = 0; i < n; i++) {
    if (as_float) {
      float *o = out;
      if (use_fmt) {
        p += fmt_parse_float(p, (size_t)(end - p), &o[i]);
      } else {
        char *e;
        o[i] = strtof(p, &e);
        p = e;
      }
    } else {
      double *o = out;
      if (use_fmt) {
        p += fmt_parse_double(p, (size_t)(end - p), &o[i]);
      } else {
        char *e;
        o[i] = strtod(p, &e);
        p = e;
      }
    }
    p++; /* ',' or ']' */
  }
  return now() - t;
}

/* Best of 7 runs of each, interleaved so that both see the same load. */
static int throughput(void) {
  const size_t n = 1000000;
  static const struct {
    int style, as_float;
    const char *name, *ref;
  } rows[] = {
      {STYLE_FLOAT_SHORTEST, 1, "float32, shortest (fmt_float)", "strtof"},
      {STYLE_DOUBLE_SHORTEST, 0, "float64, shortest (fmt_double)", "strtod"},
      {STYLE_DOUBLE_17G, 0, "float64, %.17g", "strtod"},
  };
  int bad = 0;
  void *out_fmt = malloc(n * 8), *out_ref = malloc(n * 8);
  if (!out_fmt || !out_ref) exit(2);
  printf("parse_sweep: throughput, %zu values of N(0,1) in one JSON array, "
         "parsed in sequence (best of 7)\n",
         n);
  printf("  %-32s %10s %12s %8s\n", "text", "fmt ns/num", "libc ns/num", "speedup");
  for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
    size_t len;
    char *text = json_array(n, rows[r].style, &len);
    double best_fmt = 1e30, best_ref = 1e30;
    for (int k = 0; k < 7; k++) {
      double t = parse_array(text, len, n, 1, rows[r].as_float, out_fmt);
      if (t < best_fmt) best_fmt = t;
      t = parse_array(text, len, n, 0, rows[r].as_float, out_ref);
      if (t < best_ref) best_ref = t;
    }
    if (memcmp(out_fmt, out_ref, n * (rows[r].as_float ? 4 : 8)) != 0) bad = 1;
    printf("  %-32s %10.1f %7.1f %-4s %7.2fx\n", rows[r].name, best_fmt / (double)n * 1e9,
           best_ref / (double)n * 1e9, rows[r].ref, best_ref / best_fmt);
    free(text);
  }
  if (bad) printf("  (the parsed values differ from the C library's)\n");
  free(out_fmt);
  free(out_ref);
  fflush(stdout);
  return bad;
}

/* ---- main ------------------------------------------------------------------- */

int main(int argc, char **argv) {
  uint64_t n_doubles = 100000000, n_strings = 20000000;
  int float_from = 0, float_to = 256, bench_only = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--bench") == 0)
      bench_only = 1;
    else if (strcmp(argv[i], "--doubles") == 0 && i + 1 < argc)
      n_doubles = strtoull(argv[++i], NULL, 10);
    else if (strcmp(argv[i], "--strings") == 0 && i + 1 < argc)
      n_strings = strtoull(argv[++i], NULL, 10);
    else if (strcmp(argv[i], "--float-slices") == 0 && i + 1 < argc)
      float_to = atoi(argv[++i]);
    else if (strcmp(argv[i], "--float-from") == 0 && i + 1 < argc)
      float_from = atoi(argv[++i]);
    else if (strcmp(argv[i], "--float-to") == 0 && i + 1 < argc)
      float_to = atoi(argv[++i]);
    else {
      fprintf(stderr,
              "usage: %s [--bench] [--doubles N] [--strings N] [--float-slices K] "
              "[--float-from A] [--float-to B]\n",
              argv[0]);
      return 2;
    }
  }
  if (float_to < 0 || float_to > 256) float_to = 256;
  if (float_from < 0 || float_from > float_to) float_from = 0;
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  int nt = ncpu < 1 ? 1 : ncpu > MAX_THREADS ? MAX_THREADS : (int)ncpu;
  uint64_t failures = 0;
  if (!bench_only) {
    failures += run_parts("parse_sweep: random doubles", doubles_run, n_doubles,
                          64, 0, 64, 1, nt);
    failures += run_parts("parse_sweep: random and midpoint texts", strings_run,
                          n_strings, 64, 0, 64, 2, nt);
    char name[80];
    snprintf(name, sizeof name, "parse_sweep: float32, slices %d..%d of 256", float_from,
             float_to - 1);
    if (float_to > float_from)
      failures += run_parts(float_from == 0 && float_to == 256 ? "parse_sweep: every float32"
                                                               : name,
                            floats_run, 1ull << 32, 256, float_from, float_to, 0, nt);
  }
  int bad = throughput(); /* counts as one more check */
  printf("%llu passed, %llu failed\n",
         (unsigned long long)(all_checked - all_failures + !bad),
         (unsigned long long)(all_failures + bad));
  return failures != 0 || bad;
}
