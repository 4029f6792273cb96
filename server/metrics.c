/* metrics.c -- process-wide Prometheus metrics, text exposition format 0.0.4.
 * DESIGN: every number lives in one static state_t guarded by one mutex;
 * observers only add to fixed arrays (no malloc, no I/O). metrics_render
 * copies the state under the lock and formats the copy unlocked into a
 * growable buffer, then appends the process_* metrics read from /proc. */
#include "metrics.h"

#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "buf.h"
#include "fmt.h"
#include "log.h"
#include "ops.h"

#define MAX_ROUTES 64

/* Status codes 100..599 each have a slot; anything else is "other". */
#define STATUS_MIN 100
#define STATUS_MAX 599
#define STATUS_OTHER (STATUS_MAX - STATUS_MIN + 1)
#define NSTATUS (STATUS_OTHER + 1)

/* Upper bounds (le) of the histogram buckets; +Inf is implicit. */
static const double duration_bounds[] = {0.0005, 0.001, 0.0025, 0.005, 0.01,
                                         0.025,  0.05,  0.1,    0.25,  0.5,
                                         1,      2.5,   5,      10};
#define NDURATION (sizeof duration_bounds / sizeof duration_bounds[0])

/* 256 B .. 256 MiB in steps of 4x. */
static const double bytes_bounds[] = {256,      1024,     4096,     16384,
                                      65536,    262144,   1048576,  4194304,
                                      16777216, 67108864, 268435456};
#define NBYTES (sizeof bytes_bounds / sizeof bytes_bounds[0])

/* normd_elements_normalized_total's kinds: the metric column of the
 * operation list (ops.h), NULL for operations that count no elements. */
static const char *const element_kinds[] = {
#define OP_METRIC_(id, name, route, model, kind, norm, takes, answers, metric, ...)  \
  metric,
    OPS_MAP(OP_METRIC_)
#undef OP_METRIC_
};
#define NKINDS (sizeof element_kinds / sizeof element_kinds[0])

/* Bucket arrays hold per-bucket (not cumulative) counts; the last slot is
 * for observations above every bound. The count of a histogram is the sum
 * of its buckets, so it is not stored. */
typedef struct {
  uint64_t status[NSTATUS];
  uint64_t duration[NDURATION + 1];
  double duration_sum;
} route_stats_t;

typedef struct {
  route_stats_t route[MAX_ROUTES];
  uint64_t in_bytes[NBYTES + 1], out_bytes[NBYTES + 1];
  uint64_t in_bytes_sum, out_bytes_sum;
  int64_t inflight;
  int64_t queue_depth;
  int64_t jobs;
  uint64_t elements[NKINDS];
} state_t;

/* Everything below is guarded by lock. routes, version and revision point
 * at the caller's static strings. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static const char *const *routes;
static size_t nroutes;
static const char *version = "unknown";
static const char *revision = "unknown";
static state_t state;

int metrics_init(const char *const *route_names, size_t n, const char *ver,
                 const char *rev) {
  if (!route_names || n == 0 || n > MAX_ROUTES || !ver || !rev) return -1;
  for (size_t i = 0; i < n; i++)
    if (!route_names[i]) return -1;
  pthread_mutex_lock(&lock);
  routes = route_names;
  nroutes = n;
  version = ver;
  revision = rev;
  memset(&state, 0, sizeof state);
  pthread_mutex_unlock(&lock);
  return 0;
}

/* Index of the first bucket whose bound is >= v (NaN lands in the last). */
static size_t bucket_of(const double *bounds, size_t n, double v) {
  size_t i = 0;
  while (i < n && !(v <= bounds[i])) i++;
  return i;
}

void metrics_observe_request(size_t route, int status, double seconds,
                             uint64_t bytes_in, uint64_t bytes_out) {
  size_t code = status >= STATUS_MIN && status <= STATUS_MAX
                    ? (size_t)(status - STATUS_MIN)
                    : STATUS_OTHER;
  if (!(seconds >= 0)) seconds = 0; /* negative or NaN: a clock glitch */
  size_t dur = bucket_of(duration_bounds, NDURATION, seconds);
  size_t in = bucket_of(bytes_bounds, NBYTES, (double)bytes_in);
  size_t out = bucket_of(bytes_bounds, NBYTES, (double)bytes_out);
  pthread_mutex_lock(&lock);
  if (nroutes > 0) { /* before metrics_init there is nowhere to count */
    route_stats_t *r = &state.route[route < nroutes ? route : nroutes - 1];
    r->status[code]++;
    r->duration[dur]++;
    r->duration_sum += seconds;
    state.in_bytes[in]++;
    state.in_bytes_sum += bytes_in;
    state.out_bytes[out]++;
    state.out_bytes_sum += bytes_out;
  }
  pthread_mutex_unlock(&lock);
}

void metrics_add_elements(const char *kind, uint64_t n) {
  if (!kind) return;
  for (size_t k = 0; k < NKINDS; k++)
    if (element_kinds[k] != NULL && strcmp(kind, element_kinds[k]) == 0) {
      pthread_mutex_lock(&lock);
      state.elements[k] += n;
      pthread_mutex_unlock(&lock);
      return;
    }
}

void metrics_inflight_add(int delta) {
  pthread_mutex_lock(&lock);
  state.inflight += delta;
  pthread_mutex_unlock(&lock);
}

void metrics_queue_depth_set(int64_t depth) {
  pthread_mutex_lock(&lock);
  state.queue_depth = depth;
  pthread_mutex_unlock(&lock);
}

void metrics_jobs_add(int delta) {
  pthread_mutex_lock(&lock);
  state.jobs += delta;
  pthread_mutex_unlock(&lock);
}

/* Counters, histograms and both gauges go back to zero; the routes and the
 * build info stay. */
void metrics_reset(void) {
  pthread_mutex_lock(&lock);
  memset(&state, 0, sizeof state);
  pthread_mutex_unlock(&lock);
}

/* A label value, escaped as the format requires: \ " and newline. */
static void put_label(buf_t *b, const char *s) {
  for (; *s; s++) {
    if (*s == '\\')
      buf_puts(b, "\\\\");
    else if (*s == '"')
      buf_puts(b, "\\\"");
    else if (*s == '\n')
      buf_puts(b, "\\n");
    else
      buf_append(b, s, 1);
  }
}

/* A sample value: the shortest round-trip decimal, or the format's own
 * spellings of the non-finite values. */
static void put_value(buf_t *b, double v) {
  char num[FMT_NUMBER_MAX];
  if (isnan(v))
    buf_puts(b, "NaN");
  else if (isinf(v))
    buf_puts(b, v > 0 ? "+Inf" : "-Inf");
  else {
    fmt_double(v, num);
    buf_puts(b, num);
  }
}

static void family(buf_t *b, const char *name, const char *type,
                   const char *help) {
  buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* One histogram: cumulative _bucket lines ending with +Inf, then _sum and
 * _count. label_name (NULL for none) and the raw label_value go on every
 * line. */
static void histogram(buf_t *b, const char *name, const char *label_name,
                      const char *label_value, const double *bounds,
                      size_t nbounds, const uint64_t *counts, double sum) {
  uint64_t cumulative = 0;
  char le[FMT_NUMBER_MAX];
  for (size_t i = 0; i <= nbounds; i++) {
    cumulative += counts[i];
    buf_printf(b, "%s_bucket{", name);
    if (label_name) {
      buf_printf(b, "%s=\"", label_name);
      put_label(b, label_value);
      buf_puts(b, "\",");
    }
    if (i < nbounds)
      fmt_double(bounds[i], le);
    else
      strcpy(le, "+Inf");
    buf_printf(b, "le=\"%s\"} %" PRIu64 "\n", le, cumulative);
  }
  const char *suffix[2] = {"_sum", "_count"};
  for (int k = 0; k < 2; k++) {
    buf_printf(b, "%s%s", name, suffix[k]);
    if (label_name) {
      buf_printf(b, "{%s=\"", label_name);
      put_label(b, label_value);
      buf_puts(b, "\"}");
    }
    buf_puts(b, " ");
    if (k == 0)
      put_value(b, sum);
    else
      buf_printf(b, "%" PRIu64, cumulative);
    buf_puts(b, "\n");
  }
}

/* ---- process metrics from /proc ------------------------------------------ */

/* Reads a whole small /proc file into buf (NUL-terminated); length or -1. */
static ssize_t read_small_file(const char *path, char *buf, size_t size) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  size_t len = 0;
  while (len + 1 < size) {
    ssize_t n = read(fd, buf + len, size - 1 - len);
    if (n < 0) {
      close(fd);
      return -1;
    }
    if (n == 0) break;
    len += (size_t)n;
  }
  close(fd);
  buf[len] = '\0';
  return (ssize_t)len;
}

/* btime from /proc/stat (seconds since the epoch), or -1. The file can be
 * long (the intr line grows with the interrupt count), so it is read in
 * chunks and btime is matched only at the start of a line. */
static double read_boot_time(void) {
  FILE *f = fopen("/proc/stat", "re");
  if (!f) return -1;
  char chunk[256];
  int at_line_start = 1;
  double btime = -1;
  while (fgets(chunk, sizeof chunk, f)) {
    if (at_line_start && strncmp(chunk, "btime ", 6) == 0) {
      btime = (double)strtoull(chunk + 6, NULL, 10);
      break;
    }
    at_line_start = strchr(chunk, '\n') != NULL;
  }
  fclose(f);
  return btime;
}

typedef struct {
  double cpu_seconds;
  double start_time;
  uint64_t vsize, rss_bytes;
} proc_stat_t;

/* /proc/self/stat fields (1-based, proc(5)): 14 utime, 15 stime, 22
 * starttime (clock ticks since boot), 23 vsize (bytes), 24 rss (pages).
 * Field 2 (comm) may hold spaces and parentheses, so counting starts after
 * the last ')', which ends field 2. start_time is -1 if unknown. */
static int read_proc_stat(proc_stat_t *ps) {
  char buf[1024];
  if (read_small_file("/proc/self/stat", buf, sizeof buf) < 0) return -1;
  char *s = strrchr(buf, ')');
  if (!s) return -1;
  s++;
  unsigned long long field[25] = {0};
  for (int f = 3; f <= 24; f++) {
    while (*s == ' ') s++;
    if (!*s) return -1;
    char *end;
    field[f] = strtoull(s, &end, 10); /* field 3 (state) is a letter: 0 */
    while (*end && *end != ' ') end++;
    s = end;
  }
  long tick = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
  if (tick <= 0 || page <= 0) return -1;
  ps->cpu_seconds = (double)(field[14] + field[15]) / (double)tick;
  ps->vsize = field[23];
  ps->rss_bytes = field[24] * (uint64_t)page;

  ps->start_time = -1;
  double btime = read_boot_time();
  if (btime >= 0) ps->start_time = btime + (double)field[22] / (double)tick;
  return 0;
}

/* Entries of /proc/self/fd, minus the one opendir itself holds. */
static long count_open_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  if (!d) return -1;
  long n = 0;
  int own = dirfd(d);
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    if (atoi(e->d_name) != own) n++;
  }
  closedir(d);
  return n;
}

static void render_process(buf_t *b) {
  proc_stat_t ps;
  if (read_proc_stat(&ps) == 0) {
    family(b, "process_cpu_seconds_total", "counter",
           "Total user and system CPU time spent in seconds.");
    buf_puts(b, "process_cpu_seconds_total ");
    put_value(b, ps.cpu_seconds);
    buf_puts(b, "\n");
    family(b, "process_resident_memory_bytes", "gauge",
           "Resident memory size in bytes.");
    buf_printf(b, "process_resident_memory_bytes %" PRIu64 "\n", ps.rss_bytes);
    family(b, "process_virtual_memory_bytes", "gauge",
           "Virtual memory size in bytes.");
    buf_printf(b, "process_virtual_memory_bytes %" PRIu64 "\n", ps.vsize);
    if (ps.start_time >= 0) {
      family(b, "process_start_time_seconds", "gauge",
             "Start time of the process since unix epoch in seconds.");
      buf_puts(b, "process_start_time_seconds ");
      put_value(b, ps.start_time);
      buf_puts(b, "\n");
    }
  }
  long fds = count_open_fds();
  if (fds >= 0) {
    family(b, "process_open_fds", "gauge", "Number of open file descriptors.");
    buf_printf(b, "process_open_fds %ld\n", fds);
  }
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
    family(b, "process_max_fds", "gauge",
           "Maximum number of open file descriptors.");
    buf_printf(b, "process_max_fds %llu\n", (unsigned long long)rl.rlim_cur);
  }
}

/* ---- render -------------------------------------------------------------- */

char *metrics_render(void) {
  state_t *snap = malloc(sizeof *snap);
  if (!snap) return NULL;
  pthread_mutex_lock(&lock);
  *snap = state;
  const char *const *rnames = routes;
  size_t nr = nroutes;
  const char *ver = version, *rev = revision;
  pthread_mutex_unlock(&lock);

  buf_t b;
  buf_init(&b);
  family(&b, "normd_build_info", "gauge",
         "Build information; the value is always 1.");
  buf_puts(&b, "normd_build_info{version=\"");
  put_label(&b, ver);
  buf_puts(&b, "\",revision=\"");
  put_label(&b, rev);
  buf_puts(&b, "\"} 1\n");

  family(&b, "normd_requests_total", "counter",
         "HTTP requests answered, by route and status code.");
  for (size_t r = 0; r < nr; r++)
    for (size_t c = 0; c < NSTATUS; c++) {
      uint64_t n = snap->route[r].status[c];
      if (n == 0) continue; /* series appear once observed */
      buf_puts(&b, "normd_requests_total{route=\"");
      put_label(&b, rnames[r]);
      if (c == STATUS_OTHER)
        buf_puts(&b, "\",code=\"other\"}");
      else
        buf_printf(&b, "\",code=\"%zu\"}", c + STATUS_MIN);
      buf_printf(&b, " %" PRIu64 "\n", n);
    }

  family(&b, "normd_request_duration_seconds", "histogram",
         "Time to answer an HTTP request in seconds, by route.");
  for (size_t r = 0; r < nr; r++)
    histogram(&b, "normd_request_duration_seconds", "route", rnames[r],
              duration_bounds, NDURATION, snap->route[r].duration,
              snap->route[r].duration_sum);

  family(&b, "normd_request_body_bytes", "histogram",
         "Size of HTTP request bodies in bytes.");
  histogram(&b, "normd_request_body_bytes", NULL, NULL, bytes_bounds, NBYTES,
            snap->in_bytes, (double)snap->in_bytes_sum);
  family(&b, "normd_response_body_bytes", "histogram",
         "Size of HTTP response bodies in bytes.");
  histogram(&b, "normd_response_body_bytes", NULL, NULL, bytes_bounds, NBYTES,
            snap->out_bytes, (double)snap->out_bytes_sum);

  family(&b, "normd_inflight_requests", "gauge",
         "Requests accepted and not yet answered.");
  buf_printf(&b, "normd_inflight_requests %" PRId64 "\n", snap->inflight);
  family(&b, "normd_queue_depth", "gauge", "Jobs waiting for a worker thread.");
  buf_printf(&b, "normd_queue_depth %" PRId64 "\n", snap->queue_depth);
  family(&b, "normd_jobs_inflight", "gauge",
         "Compute jobs holding one of max_inflight slots: queued, running, or "
         "computed where they arrived.");
  buf_printf(&b, "normd_jobs_inflight %" PRId64 "\n", snap->jobs);

  family(&b, "normd_elements_normalized_total", "counter",
         "Tensor elements normalized, by kind of normalization.");
  for (size_t k = 0; k < NKINDS; k++)
    if (element_kinds[k] != NULL)
      buf_printf(&b,
                 "normd_elements_normalized_total{kind=\"%s\"} %" PRIu64 "\n",
                 element_kinds[k], snap->elements[k]);
  free(snap);

  family(&b, "normd_log_lines_dropped_total", "counter",
         "Log lines dropped because the log buffer was full (stderr not "
         "keeping up).");
  buf_printf(&b, "normd_log_lines_dropped_total %" PRIu64 "\n",
             log_lines_dropped());

  render_process(&b);
  size_t len;
  return buf_steal(&b, &len); /* NULL when an append failed */
}
