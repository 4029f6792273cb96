/* codec_bench.c -- the JSON codec alone, no HTTP: a 512x2048 layer-norm
 * request decoded (body text -> tensor) and its output encoded (tensor ->
 * text), in MB of JSON per second and ns per number, beside jansson
 * parsing the same body (what decoding cost before the numeric-array fast
 * path: one json_t per number) and beside memcpy of the same bytes. Three
 * bodies: float32 data as Python writes rounded values (6 decimals),
 * float32 data in shortest round-trip form, float64 data with 17 digits.
 * Decode and encode each on one thread and on the compute pool (two
 * pieces per CPU: numarray.h, encode.h). Best of several runs, the
 * one-thread rows by the thread's CPU time (a shared machine's waits for
 * a core left out), the pool's by the wall clock. Build
 * with the release flags:
 * `make bench` runs it. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "buf.h"
#include "codec.h"
#include "cpool.h"
#include "encode.h"
#include "fmt.h"
#include "numarray.h"
#include "request.h"

enum { ROWS = 512, COLS = 2048, N = ROWS * COLS, RUNS = 7 };

/* the single-threaded scan, beside the pool's (numarray.h) */
static const numarray_split_t one_pass = {.min_bytes = (size_t)-1};
static const encode_split_t print_one_pass = {.min_numel = (size_t)-1};

/* The clock a row is timed by: the calling thread's CPU time where one
 * thread does the work (steady on a shared machine: time spent waiting
 * for a core is not counted), the wall clock where the pool does. */
static clockid_t row_clock = CLOCK_THREAD_CPUTIME_ID;

static double now(void) {
  struct timespec ts;
  clock_gettime(row_clock, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* A normal deviate (Box-Muller) from a fixed-seed xorshift generator. */
static double gauss(uint64_t *s) {
  double u[2];
  for (int k = 0; k < 2; k++) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    u[k] = ((double)(*s >> 11) + 0.5) / 9007199254740992.0;
  }
  return sqrt(-2 * log(u[0])) * cos(6.283185307179586 * u[1]);
}

typedef enum { ROUNDED6, SHORTEST32, DIGITS17 } style_t;

static char *make_body(style_t style, size_t *len) {
  buf_t b;
  buf_init(&b);
  buf_printf(&b, "{\"input\":{\"shape\":[%d,%d],\"dtype\":\"%s\",\"data\":[", ROWS,
             COLS, style == DIGITS17 ? "float64" : "float32");
  uint64_t seed = 88172645463325252ull;
  char text[FMT_NUMBER_MAX];
  for (int i = 0; i < N; i++) {
    double v = gauss(&seed);
    if (i) buf_putc(&b, ',');
    if (style == ROUNDED6) buf_printf(&b, "%.6f", v);
    else if (style == SHORTEST32) buf_append(&b, text, (size_t)fmt_float((float)v, text));
    else buf_printf(&b, "%.17g", v);
  }
  buf_puts(&b, "]}}");
  return buf_steal(&b, len);
}

/* Seconds of the best of RUNS calls of fn, by row_clock. */
#define BEST(seconds, body)                                                    \
  do {                                                                         \
    seconds = 1e30;                                                            \
    for (int run_ = 0; run_ < RUNS; run_++) {                                  \
      double t0_ = now();                                                      \
      body;                                                                    \
      double dt_ = now() - t0_;                                                \
      if (dt_ < seconds) seconds = dt_;                                        \
    }                                                                          \
  } while (0)

static void row(const char *what, size_t bytes, double seconds) {
  printf("| %-44s | %8.0f | %7.1f |\n", what, (double)bytes / seconds / 1e6,
         seconds / N * 1e9);
}

/* `codec_bench decode` only decodes the first body, 50 times: for perf. */
static int profile_decode(const limits_t *lim) {
  size_t len;
  char *body = make_body(ROUNDED6, &len);
  codec_input_t in = {.op = OP_LAYER, .body = body, .len = len, .header_length = -1};
  for (int i = 0; i < 50; i++) {
    request_t req;
    problem_t prob;
    request_init(&req, OP_LAYER);
    if (codec_json.decode(&in, lim, &req, &prob) != 0) return 1;
    request_free(&req);
  }
  free(body);
  return 0;
}

int main(int argc, char **argv) {
  static const char *const names[] = {"float32, %.6f text", "float32, shortest text",
                                      "float64, %.17g text"};
  static const limits_t lim = {.max_elements = N, .max_depth = 64,
                               .max_explain_elements = 0};
  if (argc > 1 && strcmp(argv[1], "decode") == 0) return profile_decode(&lim);
  printf("JSON codec, %dx%d layer-norm request, 1 thread and the pool of %d "
         "(best of %d; 1-thread rows by thread CPU time, pool rows by the "
         "wall clock)\n\n",
         ROWS, COLS, cpool_threads(cpool_shared()), RUNS);
  printf("| %-44s | %8s | %7s |\n", "step", "MB/s", "ns/num");
  printf("|%s|%s|%s|\n", "----------------------------------------------",
         "----------", "---------");
  for (style_t style = ROUNDED6; style <= DIGITS17; style++) {
    size_t len;
    char *body = make_body(style, &len);
    char *copy = malloc(len);
    char label[96];
    double s;
    BEST(s, memcpy(copy, body, len));
    snprintf(label, sizeof label, "memcpy of the body (%s)", names[style]);
    row(label, len, s);

    BEST(s, {
      json_t *doc = json_loadb(body, len, 0, NULL);
      json_decref(doc);
    });
    snprintf(label, sizeof label, "jansson parse only (%s)", names[style]);
    row(label, len, s);

    request_t req;
    problem_t prob;
    codec_input_t in = {.op = OP_LAYER, .body = body, .len = len, .header_length = -1};
    for (int pooled = 0; pooled <= 1; pooled++) {
      numarray_split_configure(pooled ? NULL : &one_pass);
      row_clock = pooled ? CLOCK_MONOTONIC : CLOCK_THREAD_CPUTIME_ID;
      BEST(s, {
        request_init(&req, OP_LAYER);
        if (codec_json.decode(&in, &lim, &req, &prob) != 0) {
          fprintf(stderr, "decode failed: %s\n", prob.detail);
          return 1;
        }
        request_free(&req);
      });
      snprintf(label, sizeof label, "normd decode, %s (%s)",
               pooled ? "pool" : "1 thread", names[style]);
      row(label, len, s);
    }
    numarray_split_configure(NULL);
    row_clock = CLOCK_THREAD_CPUTIME_ID;

    request_init(&req, OP_LAYER);
    codec_json.decode(&in, &lim, &req, &prob);
    size_t out_len = 0;
    for (int pooled = 0; pooled <= 1; pooled++) {
      encode_split_configure(pooled ? NULL : &print_one_pass);
      row_clock = pooled ? CLOCK_MONOTONIC : CLOCK_THREAD_CPUTIME_ID;
      BEST(s, {
        buf_t b;
        buf_init(&b);
        encode_tensor_data(&b, &req.input.t);
        out_len = buf_total(&b);
        buf_free(&b);
      });
      snprintf(label, sizeof label, "normd encode, %s (%s)",
               pooled ? "pool" : "1 thread",
               style == DIGITS17 ? "float64, shortest" : "float32, shortest");
      row(label, out_len, s);
    }
    encode_split_configure(NULL);
    row_clock = CLOCK_THREAD_CPUTIME_ID;
    request_free(&req);
    free(copy);
    free(body);
  }
  return 0;
}
