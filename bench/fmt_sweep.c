/* fmt_sweep.c -- every float32 bit pattern through fmt_float (server/codec/fmt.c):
 * the text must read back to the same bits (strtof) and be shortest: no
 * decimal with one digit fewer reads back. For n output digits D at
 * exponent e, the only (n-1)-digit candidates that can lie in the value's
 * rounding interval are the two multiples of 10^(e+1) around D * 10^e
 * (an interval holding D * 10^e and any multiple of 10^(e+1) holds one of
 * those two), so both are tried with strtof. Non-finite patterns must give
 * NaN / Infinity / -Infinity. Splits the 2^32 patterns over the CPUs;
 * takes minutes. Run: make bench-check (exit 1 on any failure). */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fmt.h"

typedef struct {
  uint64_t begin, end;
  uint64_t checked, failures;
  char first[160];
} part_t;

static int same_float(float a, float b) { return memcmp(&a, &b, 4) == 0; }

/* Significant digits (leading and trailing zeros dropped) and the exponent
 * of the last one; 0 for a zero value. */
static int parse(const char *s, uint64_t *digits, int *nd, int *exp) {
  uint64_t d = 0;
  int n = 0, frac = 0, seen_point = 0, e = 0;
  if (*s == '-') s++;
  for (; *s && *s != 'e'; s++) {
    if (*s == '.') {
      seen_point = 1;
      continue;
    }
    if (n == 0 && *s == '0') {
      if (seen_point) frac++;
      continue;
    }
    d = d * 10 + (uint64_t)(*s - '0');
    n++;
    if (seen_point) frac++;
  }
  if (*s == 'e') e = atoi(s + 1);
  if (n == 0) return 0;
  e -= frac;
  while (d % 10 == 0) {
    d /= 10;
    n--;
    e++;
  }
  *digits = d;
  *nd = n;
  *exp = e;
  return 1;
}

static int reads_back(int neg, uint64_t digits, int exp, float want) {
  char s[48], tmp[24];
  int n = 0, k = 0;
  if (neg) s[n++] = '-';
  do {
    tmp[k++] = (char)('0' + digits % 10);
    digits /= 10;
  } while (digits);
  while (k) s[n++] = tmp[--k];
  s[n++] = 'e';
  if (exp < 0) {
    s[n++] = '-';
    exp = -exp;
  }
  do {
    tmp[k++] = (char)('0' + exp % 10);
    exp /= 10;
  } while (exp);
  while (k) s[n++] = tmp[--k];
  s[n] = '\0';
  return same_float(strtof(s, NULL), want);
}

static void fail(part_t *p, uint32_t u, const char *text, const char *why) {
  if (p->failures++ == 0)
    snprintf(p->first, sizeof p->first, "%08x -> \"%s\": %s", (unsigned)u, text,
             why);
}

static void *run(void *arg) {
  part_t *p = arg;
  char buf[FMT_NUMBER_MAX];
  for (uint64_t i = p->begin; i < p->end; i++) {
    uint32_t u = (uint32_t)i;
    float f;
    memcpy(&f, &u, 4);
    fmt_float(f, buf);
    p->checked++;
    if (!isfinite(f)) {
      const char *want = isnan(f) ? "NaN" : f < 0 ? "-Infinity" : "Infinity";
      if (strcmp(buf, want) != 0) fail(p, u, buf, "non-finite spelling");
      continue;
    }
    if (!same_float(strtof(buf, NULL), f)) {
      fail(p, u, buf, "does not read back");
      continue;
    }
    uint64_t d;
    int n, e;
    if (!parse(buf, &d, &n, &e)) {
      if (f != 0) fail(p, u, buf, "zero text for a non-zero value");
      continue;
    }
    if (n > 1 && (reads_back(u >> 31, d / 10, e + 1, f) ||
                  reads_back(u >> 31, d / 10 + 1, e + 1, f)))
      fail(p, u, buf, "a shorter decimal reads back");
  }
  return NULL;
}

int main(void) {
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  int nt = ncpu < 1 ? 1 : ncpu > 64 ? 64 : (int)ncpu;
  enum { SLICES = 256 }; /* progress granularity */
  uint64_t total = 1ull << 32, checked = 0, failures = 0;
  char first[160] = "";
  for (int s = 0; s < SLICES; s += nt) {
    part_t parts[64];
    pthread_t tid[64];
    int k = 0;
    for (; k < nt && s + k < SLICES; k++) {
      parts[k] = (part_t){.begin = total / SLICES * (uint64_t)(s + k),
                          .end = total / SLICES * (uint64_t)(s + k + 1)};
      pthread_create(&tid[k], NULL, run, &parts[k]);
    }
    for (int t = 0; t < k; t++) {
      pthread_join(tid[t], NULL);
      checked += parts[t].checked;
      failures += parts[t].failures;
      if (!first[0] && parts[t].first[0]) memcpy(first, parts[t].first, sizeof first);
    }
    fprintf(stderr, "\rfmt_sweep: %3d%%", (s + k) * 100 / SLICES);
  }
  fprintf(stderr, "\n");
  printf("fmt_sweep: %llu float32 patterns, %llu failures%s%s\n",
         (unsigned long long)checked, (unsigned long long)failures,
         failures ? "; first: " : " (all round-trip and are shortest)", first);
  printf("%llu passed, %llu failed\n", (unsigned long long)(checked - failures),
         (unsigned long long)failures);
  return failures != 0;
}
