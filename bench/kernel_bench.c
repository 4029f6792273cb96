/* kernel_bench.c -- normd's kernels in GB/s (bytes of x read + bytes of y
 * written, per second) beside a scale-copy loop y = a * x + b over the
 * same number of bytes: the memory ceiling, measured in the same run.
 * Then the backward passes (layer, RMS, group, batch train, instance), in
 * GB/s of x and dy read + dx written, beside the three-stream loop
 * z = a * x + b * y over the same bytes (issue 20's ceiling), plain and
 * streaming, the weight and bias gradients summed as the server sums them
 * (per range, added under a lock: server/compute.c's backward_range).
 * 1 and 2 threads (through server/cpool.c, the split compute.c uses),
 * float32 and bfloat16. The scale-copy runs twice: plain stores (the
 * ceiling of the issue) and streaming stores (what normd uses for outputs
 * of 16 MiB or more). Prints one line per measurement for
 * bench/kernel_table.py, which adds PyTorch and prints the table:
 *   case|dtype|threads|normd_GBps|ceiling_GBps|streaming_ceiling_GBps
 * and for the backward passes the same fields after "bw|".
 * Arguments: [max threads, default 2] [only the cases whose "name dtype
 * forward|backward" contains each of these words, e.g. "eval bfloat16" or
 * "backward float32"].
 * Build with the release flags (-O2, no -march=native): `make bench`. */
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "cpool.h"
#include "norm.h"

enum { LAYER, RMS, GROUP, BATCH_TRAIN, BATCH_EVAL, INSTANCE };

typedef struct {
  const char *name;
  int op;
  int rank;
  int64_t shape[4];
} bcase_t;

static const bcase_t cases[] = {
    {"layer 4096x4096", LAYER, 2, {4096, 4096}},
    {"layer 64x768", LAYER, 2, {64, 768}},
    {"rms 4096x4096", RMS, 2, {4096, 4096}},
    {"rms 64x768", RMS, 2, {64, 768}},
    {"group G=32 8x64x56x56", GROUP, 4, {8, 64, 56, 56}},
    {"batch train 8x64x56x56", BATCH_TRAIN, 4, {8, 64, 56, 56}},
    {"batch eval 8x64x56x56", BATCH_EVAL, 4, {8, 64, 56, 56}},
    {"instance 8x64x56x56", INSTANCE, 4, {8, 64, 56, 56}},
};

typedef struct {
  int op;
  norm_tensor_t x, y, w, b, rm, rv;
  norm_stats_t st;
  norm_layer_params_t lp;
  norm_rms_params_t rp;
  norm_group_params_t gp;
  norm_batch_params_t bp;
  norm_instance_params_t ip;
  /* the backward's: grad_output, grad_input, and the weight / bias
   * gradients' element count (the sums themselves are per range) */
  norm_tensor_t dy, dx;
  size_t nw;
  double *gw, *gb; /* the ranges' sums, added under lock */
  pthread_mutex_t lock;
} job_t;

static int run_range(void *arg, size_t begin, size_t end) {
  job_t *j = arg;
  switch (j->op) {
  case LAYER:
    return norm_layer_rows(&j->x, &j->w, &j->b, &j->lp, &j->y, &j->st, begin, end);
  case RMS: return norm_rms_rows(&j->x, &j->w, &j->rp, &j->y, &j->st, begin, end);
  case GROUP:
    return norm_group_rows(&j->x, &j->w, &j->b, &j->gp, &j->y, &j->st, begin, end);
  case BATCH_TRAIN:
  case BATCH_EVAL:
    return norm_batch_rows(&j->x, &j->w, &j->b, &j->rm, &j->rv, &j->bp, &j->y,
                           &j->st, begin, end);
  default:
    return norm_instance_rows(&j->x, &j->w, &j->b, &j->ip, &j->y, &j->st, begin,
                              end);
  }
}

/* One range of a backward pass, its weight and bias gradients summed into
 * arrays of its own and added under the lock, as server/compute.c's
 * backward_range does for a split request. */
static int run_backward_range(void *arg, size_t begin, size_t end) {
  job_t *j = arg;
  double *mine = calloc(2 * j->nw, sizeof *mine);
  if (mine == NULL) {
    perror("calloc");
    exit(1);
  }
  norm_grads_t g = {mine, j->op == RMS ? NULL : mine + j->nw};
  int err;
  switch (j->op) {
  case LAYER:
    err = norm_layer_backward_rows(&j->x, &j->dy, &j->w, &j->lp, &j->dx, &g,
                                   &j->st, begin, end);
    break;
  case RMS:
    err = norm_rms_backward_rows(&j->x, &j->dy, &j->w, &j->rp, &j->dx, &g,
                                 &j->st, begin, end);
    break;
  case GROUP:
    err = norm_group_backward_rows(&j->x, &j->dy, &j->w, &j->gp, &j->dx, &g,
                                   &j->st, begin, end);
    break;
  case BATCH_TRAIN:
  case BATCH_EVAL:
    err = norm_batch_backward_rows(&j->x, &j->dy, &j->w, &j->rm, &j->rv, &j->bp,
                                   &j->dx, &g, &j->st, begin, end);
    break;
  default:
    err = norm_instance_backward_rows(&j->x, &j->dy, &j->w, &j->ip, &j->dx, &g,
                                      &j->st, begin, end);
  }
  pthread_mutex_lock(&j->lock);
  for (size_t i = 0; i < j->nw; i++) j->gw[i] += mine[i];
  for (size_t i = 0; g.bias && i < j->nw; i++) j->gb[i] += mine[j->nw + i];
  pthread_mutex_unlock(&j->lock);
  free(mine);
  return err;
}

static size_t groups_of(job_t *j) {
  switch (j->op) {
  case LAYER: return (size_t)norm_layer_groups(&j->x, &j->lp);
  case RMS: return (size_t)norm_rms_groups(&j->x, &j->rp);
  case GROUP: return (size_t)norm_group_groups(&j->x, &j->gp);
  case BATCH_TRAIN:
  case BATCH_EVAL: return (size_t)norm_batch_groups(&j->x);
  default: return (size_t)norm_instance_groups(&j->x);
  }
}

typedef struct {
  const float *x;
  float *y;
  float a, b;
} copy_t;

/* the ceiling: y = a * x + b (locals and restrict, so that -O2 vectorizes
 * it: reading the fields through c each time measured 35% lower) */
static int copy_range(void *arg, size_t begin, size_t end) {
  const copy_t *c = arg;
  const float *restrict x = c->x;
  float *restrict y = c->y;
  const float a = c->a, b = c->b;
  size_t i = begin;
#ifdef __SSE2__
  /* Vectorized by hand: -O2 leaves the plain loop scalar (one element per
   * cycle, and twice that when the loop straddles a 64-byte fetch line),
   * which measures the core, not the memory. */
  const __m128 va = _mm_set1_ps(a), vb = _mm_set1_ps(b);
  for (; i + 4 <= end; i += 4)
    _mm_storeu_ps(y + i, _mm_add_ps(_mm_mul_ps(_mm_loadu_ps(x + i), va), vb));
#endif
  for (; i < end; i++) y[i] = a * x[i] + b;
  return 0;
}

/* The same with streaming stores (no read for ownership of y), as normd
 * writes outputs of 16 MiB or more: the ceiling for those. */
static int copy_nt_range(void *arg, size_t begin, size_t end) {
  const copy_t *c = arg;
  const float *restrict x = c->x;
  float *restrict y = c->y;
  const float a = c->a, b = c->b;
  size_t i = begin;
#ifdef __SSE2__
  for (; i < end && i % 4; i++) y[i] = a * x[i] + b; /* buffers are 64-aligned */
  const __m128 va = _mm_set1_ps(a), vb = _mm_set1_ps(b);
  for (; i + 4 <= end; i += 4)
    _mm_stream_ps(y + i, _mm_add_ps(_mm_mul_ps(_mm_load_ps(x + i), va), vb));
  _mm_sfence();
#endif
  for (; i < end; i++) y[i] = a * x[i] + b;
  return 0;
}

typedef struct {
  const float *x, *y;
  float *z;
  float a, b;
} copy3_t;

/* The backward's ceiling: z = a * x + b * y, two streams read and one
 * written, as dx = f(x, dy); vectorized by hand as copy_range is. */
static int copy3_range(void *arg, size_t begin, size_t end) {
  const copy3_t *c = arg;
  const float *restrict x = c->x, *restrict y = c->y;
  float *restrict z = c->z;
  const float a = c->a, b = c->b;
  size_t i = begin;
#ifdef __SSE2__
  const __m128 va = _mm_set1_ps(a), vb = _mm_set1_ps(b);
  for (; i + 4 <= end; i += 4)
    _mm_storeu_ps(z + i, _mm_add_ps(_mm_mul_ps(_mm_loadu_ps(x + i), va),
                                    _mm_mul_ps(_mm_loadu_ps(y + i), vb)));
#endif
  for (; i < end; i++) z[i] = a * x[i] + b * y[i];
  return 0;
}

/* The same with streaming stores to z. */
static int copy3_nt_range(void *arg, size_t begin, size_t end) {
  const copy3_t *c = arg;
  const float *restrict x = c->x, *restrict y = c->y;
  float *restrict z = c->z;
  const float a = c->a, b = c->b;
  size_t i = begin;
#ifdef __SSE2__
  for (; i < end && i % 4; i++) z[i] = a * x[i] + b * y[i]; /* 64-aligned */
  const __m128 va = _mm_set1_ps(a), vb = _mm_set1_ps(b);
  for (; i + 4 <= end; i += 4)
    _mm_stream_ps(z + i, _mm_add_ps(_mm_mul_ps(_mm_load_ps(x + i), va),
                                    _mm_mul_ps(_mm_load_ps(y + i), vb)));
  _mm_sfence();
#endif
  for (; i < end; i++) z[i] = a * x[i] + b * y[i];
  return 0;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct {
  cpool_t *pool;
  size_t n, parts;
  cpool_fn fn;
  void *arg;
} timed_t;

/* Best time of repeated runs: at least 5 and at least 0.3 s. */
static double best_time(const timed_t *t) {
  double best = 1e30, start = now();
  cpool_run(t->pool, t->n, t->parts, t->fn, t->arg); /* warm up */
  for (int rep = 0; rep < 5 || now() - start < 0.3; rep++) {
    double t0 = now();
    int err = cpool_run(t->pool, t->n, t->parts, t->fn, t->arg);
    double dt = now() - t0;
    if (err) {
      fprintf(stderr, "kernel error %d: %s\n", err, norm_strerror(err));
      exit(1);
    }
    if (dt < best) best = dt;
  }
  return best;
}

static void *xalloc(size_t n) {
  void *p = aligned_alloc(64, (n + 63) / 64 * 64);
  if (!p) {
    perror("alloc");
    exit(1);
  }
  memset(p, 0, n);
  return p;
}

static norm_tensor_t tensor(norm_dtype_t dt, int rank, const int64_t *shape,
                            size_t *numel) {
  norm_tensor_t t = {.dtype = dt, .rank = rank};
  size_t n = 1;
  for (int i = 0; i < rank; i++) n *= (size_t)(t.shape[i] = shape[i]);
  t.data = xalloc(n * norm_dtype_size(dt));
  if (numel) *numel = n;
  return t;
}

static void fill(norm_tensor_t *t, size_t n, uint64_t seed, double lo, double hi) {
  for (size_t i = 0; i < n; i++) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    norm_tensor_set(t, i, lo + (hi - lo) * (double)(seed >> 11) * 0x1p-53);
  }
}

/* Whether every space-separated word of words occurs in text. */
static int has_all_words(const char *text, const char *words) {
  char w[64];
  for (const char *p = words; *p;) {
    size_t len = strcspn(p, " ");
    if (len > 0 && len < sizeof w) {
      memcpy(w, p, len);
      w[len] = 0;
      if (!strstr(text, w)) return 0;
    }
    p += len + (p[len] == ' ');
  }
  return 1;
}

int main(int argc, char **argv) {
  /* Every tensor its own mapping, whatever ran before. glibc raises its
   * mmap threshold when a mapped block is freed, so without this the
   * later cases' tensors came from the heap, at other offsets within a
   * page: with y 64 bytes past x modulo 4 KiB, each load of x waits on
   * the store to y just before it (4K aliasing), and the bfloat16 batch
   * eval loop ran at 27 GB/s instead of 33 when run after the float32
   * cases. Now x and y always sit at the same offset, as a lone run of a
   * case had them. */
  mallopt(M_MMAP_THRESHOLD, 128 << 10);
  int max_threads = argc > 1 ? atoi(argv[1]) : 2;
  const char *only = argc > 2 ? argv[2] : NULL; /* e.g. "eval bfloat16" */
  cpool_t *pools[3] = {NULL, cpool_start(1), cpool_start(2)};
  fprintf(stderr, "kernel_bench: simd=%s\n", norm_simd_name());
  printf("#simd|%s\n", norm_simd_name());
  norm_dtype_t dts[2] = {NORM_F32, NORM_BF16};
  for (int backward = 0; backward < 2; backward++) {
    for (int d = 0; d < 2; d++) {
      for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const bcase_t *bc = &cases[c];
        /* eval mode's backward is dx = rstd * w * dy, a scale: not a norm's */
        if (backward && bc->op == BATCH_EVAL) continue;
        char label[96];
        snprintf(label, sizeof label, "%s %s %s", bc->name,
                 norm_dtype_name(dts[d]), backward ? "backward" : "forward");
        if (only && !has_all_words(label, only)) continue;
        job_t j = {.op = bc->op};
        size_t n;
        j.x = tensor(dts[d], bc->rank, bc->shape, &n);
        j.y = tensor(dts[d], bc->rank, bc->shape, NULL);
        fill(&j.x, n, 42 + c, -2, 3);
        if (backward) {
          j.dy = tensor(dts[d], bc->rank, bc->shape, NULL);
          j.dx = tensor(dts[d], bc->rank, bc->shape, NULL);
          fill(&j.dy, n, 7 + c, -1, 1);
          pthread_mutex_init(&j.lock, NULL);
        }
        int64_t wshape[2];
        int wrank = 1;
        if (bc->op == LAYER || bc->op == RMS)
          wshape[0] = bc->shape[bc->rank - 1];
        else
          wshape[0] = bc->shape[1];
        size_t wn;
        j.w = tensor(dts[d], wrank, wshape, &wn);
        j.b = tensor(dts[d], wrank, wshape, NULL);
        j.rm = tensor(NORM_F32, wrank, wshape, NULL);
        j.rv = tensor(NORM_F32, wrank, wshape, NULL);
        fill(&j.w, wn, 1, 0.5, 1.5);
        fill(&j.b, wn, 2, -0.5, 0.5);
        fill(&j.rv, wn, 3, 0.5, 1.5);
        j.nw = wn;
        j.gw = xalloc(wn * sizeof(double));
        j.gb = xalloc(wn * sizeof(double));
        j.lp = (norm_layer_params_t){.normalized_ndim = 1, .eps = 1e-5};
        j.rp = (norm_rms_params_t){.normalized_ndim = 1, .eps = 1e-6};
        j.gp = (norm_group_params_t){.num_groups = 32, .eps = 1e-5};
        j.bp = (norm_batch_params_t){.mode = bc->op == BATCH_EVAL ? NORM_EVAL
                                                                  : NORM_TRAIN,
                                     .eps = 1e-5,
                                     .momentum = 0.1};
        j.ip = (norm_instance_params_t){.eps = 1e-5};
        size_t groups = groups_of(&j);
        j.st.mean = xalloc(groups * sizeof(double));
        j.st.var = xalloc(groups * sizeof(double));
        j.st.rstd = xalloc(groups * sizeof(double));
        j.st.rms = xalloc(groups * sizeof(double));
        size_t bytes = n * norm_dtype_size(dts[d]);
        /* streams: x and y (forward), x, dy and dx (backward) */
        double streams = backward ? 3.0 : 2.0;
        copy_t cp = {
            .x = xalloc(bytes), .y = xalloc(bytes), .a = 1.5f, .b = 0.25f};
        copy3_t cp3 = {.x = cp.x,
                       .y = backward ? xalloc(bytes) : NULL,
                       .z = cp.y,
                       .a = 1.5f,
                       .b = 0.25f};
        /* real data: pages of zeros may be shared by the host (one page,
         * cached), which flatters the ceiling */
        for (size_t i = 0; i < bytes / sizeof(float); i++) {
          ((float *)cp.x)[i] = (float)(i % 1000) * 0.001f;
          if (backward) ((float *)cp3.y)[i] = (float)(i % 777) * 0.002f;
        }
        for (int th = 1; th <= max_threads && th <= 2; th++) {
          /* the split compute.c makes: 2 ranges per thread */
          timed_t k = {pools[th], groups, (size_t)(2 * th),
                       backward ? run_backward_range : run_range, &j};
          timed_t m = {pools[th], bytes / sizeof(float), (size_t)(2 * th),
                       backward ? copy3_range : copy_range,
                       backward ? (void *)&cp3 : (void *)&cp};
          timed_t mnt = {pools[th], bytes / sizeof(float), (size_t)(2 * th),
                         backward ? copy3_nt_range : copy_nt_range,
                         backward ? (void *)&cp3 : (void *)&cp};
          double tk = best_time(&k), tm = best_time(&m), tnt = best_time(&mnt);
          printf("%s%s|%s|%d|%.2f|%.2f|%.2f\n", backward ? "bw|" : "", bc->name,
                 norm_dtype_name(dts[d]), th,
                 streams * (double)bytes / tk / 1e9,
                 streams * (double)bytes / tm / 1e9,
                 streams * (double)bytes / tnt / 1e9);
          fflush(stdout);
        }
        free(j.x.data), free(j.y.data), free(j.w.data), free(j.b.data);
        free(j.dy.data), free(j.dx.data), free(j.gw), free(j.gb);
        free(j.rm.data), free(j.rv.data);
        free(j.st.mean), free(j.st.var), free(j.st.rstd), free(j.st.rms);
        free((void *)cp.x), free(cp.y), free((void *)cp3.y);
        if (backward) pthread_mutex_destroy(&j.lock);
      }
    }
  }
  cpool_stop(pools[1]);
  cpool_stop(pools[2]);
  return 0;
}
