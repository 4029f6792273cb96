/* check_metrics.c -- the Prometheus exposition: counters, gauges and
 * histograms after known observations (values parsed back out of the
 * rendered text), cumulative buckets, label escaping, the catch-all route,
 * reset, concurrent observers, the process_* metrics, and `promtool check
 * metrics` (a declared test dependency: Debian package prometheus) on the
 * rendered text. */
#include <check.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "metrics.h"

static const char *const routes[] = {"/v1/norm/layer", "/v1/norm/rms",
                                     "/healthz", "other"};
#define NROUTES (sizeof routes / sizeof routes[0])

static void init_default(void) {
  ck_assert_int_eq(metrics_init(routes, NROUTES, "0.1.0", "abc123"), 0);
}

static char *render(void) {
  char *text = metrics_render();
  ck_assert_ptr_nonnull(text);
  return text;
}

/* The value of the sample whose name and labels are exactly series (e.g.
 * `normd_requests_total{route="/healthz",code="200"}`); 1 if found. */
static int sample(const char *text, const char *series, double *value) {
  size_t n = strlen(series);
  for (const char *line = text; *line;) {
    if (strncmp(line, series, n) == 0 && line[n] == ' ') {
      char *end;
      *value = strtod(line + n + 1, &end);
      return end != line + n + 1 && *end == '\n';
    }
    const char *nl = strchr(line, '\n');
    if (!nl) break;
    line = nl + 1;
  }
  return 0;
}

/* The value of series, failing the test if it is absent. */
static double value_of(const char *text, const char *series) {
  double v;
  if (!sample(text, series, &v)) {
    fprintf(stderr, "---- exposition ----\n%s----\n", text);
    ck_abort_msg("no sample %s in the exposition (printed on stderr)", series);
  }
  return v;
}

#define DURATION_LES                                                           \
  {                                                                            \
    "0.0005", "0.001", "0.0025", "0.005", "0.01", "0.025", "0.05", "0.1",      \
        "0.25", "0.5", "1", "2.5", "5", "10", "+Inf"                           \
  }
#define BYTES_LES                                                              \
  {                                                                            \
    "256", "1024", "4096", "16384", "65536", "262144", "1048576", "4194304",   \
        "16777216", "67108864", "268435456", "+Inf"                            \
  }

static double duration_bucket(const char *text, const char *route,
                              const char *le) {
  char series[256];
  snprintf(series, sizeof series,
           "normd_request_duration_seconds_bucket{route=\"%s\",le=\"%s\"}",
           route, le);
  return value_of(text, series);
}

static double requests(const char *text, const char *route, const char *code) {
  char series[256];
  snprintf(series, sizeof series,
           "normd_requests_total{route=\"%s\",code=\"%s\"}", route, code);
  return value_of(text, series);
}

/* ---- Core ---------------------------------------------------------------- */

START_TEST(test_counters) {
  init_default();
  metrics_observe_request(0, 200, 0.01, 100, 200);
  metrics_observe_request(0, 200, 0.02, 100, 200);
  metrics_observe_request(0, 422, 0.001, 50, 300);
  metrics_observe_request(2, 200, 0.0001, 0, 2);
  char *text = render();
  ck_assert(requests(text, "/v1/norm/layer", "200") == 2);
  ck_assert(requests(text, "/v1/norm/layer", "422") == 1);
  ck_assert(requests(text, "/healthz", "200") == 1);
  double v;
  /* series appear once observed */
  ck_assert(!sample(
      text, "normd_requests_total{route=\"/v1/norm/rms\",code=\"200\"}", &v));
  ck_assert(
      value_of(
          text,
          "normd_request_duration_seconds_count{route=\"/v1/norm/layer\"}") ==
      3);
  ck_assert(
      fabs(value_of(
               text,
               "normd_request_duration_seconds_sum{route=\"/v1/norm/layer\"}") -
           0.031) < 1e-12);
  /* a route with no requests still has its (zero) histogram */
  ck_assert(
      value_of(
          text,
          "normd_request_duration_seconds_count{route=\"/v1/norm/rms\"}") == 0);
  ck_assert(value_of(text, "normd_request_body_bytes_count") == 4);
  ck_assert(value_of(text, "normd_request_body_bytes_sum") == 250);
  ck_assert(value_of(text, "normd_response_body_bytes_sum") == 702);
  ck_assert(strstr(text, "# TYPE normd_requests_total counter\n"));
  ck_assert(strstr(text, "# HELP normd_requests_total "));
  free(text);
}
END_TEST

/* Buckets are cumulative, end with +Inf == _count, and bounds are
 * inclusive (an observation equal to le counts in that bucket). */
START_TEST(test_duration_buckets) {
  init_default();
  const double obs[] = {0.0001, 0.0005, 0.003, 0.003, 0.7, 10, 20, INFINITY};
  for (size_t i = 0; i < sizeof obs / sizeof obs[0]; i++)
    metrics_observe_request(1, 200, obs[i], 0, 0);
  metrics_observe_request(1, 200, -1, 0, 0);  /* clamped to 0 */
  metrics_observe_request(1, 200, NAN, 0, 0); /* clamped to 0 */
  char *text = render();
  const char *les[] = DURATION_LES;
  const double want[] = {4, 4, 4, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 8, 10};
  for (size_t i = 0; i < sizeof les / sizeof les[0]; i++) {
    double got = duration_bucket(text, "/v1/norm/rms", les[i]);
    ck_assert_msg(got == want[i], "le=%s: %g, want %g", les[i], got, want[i]);
  }
  ck_assert(
      value_of(
          text,
          "normd_request_duration_seconds_count{route=\"/v1/norm/rms\"}") ==
      10);
  ck_assert(strstr(
      text,
      "normd_request_duration_seconds_sum{route=\"/v1/norm/rms\"} +Inf\n"));
  free(text);
}
END_TEST

START_TEST(test_bytes_buckets) {
  init_default();
  const uint64_t in[] = {0, 256, 257, 1024, 300u << 20, UINT64_C(1) << 40};
  for (size_t i = 0; i < sizeof in / sizeof in[0]; i++)
    metrics_observe_request(0, 200, 0, in[i], 4096);
  char *text = render();
  const char *les[] = BYTES_LES;
  const double want_in[] = {2, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 6};
  char series[128];
  for (size_t i = 0; i < sizeof les / sizeof les[0]; i++) {
    snprintf(series, sizeof series,
             "normd_request_body_bytes_bucket{le=\"%s\"}", les[i]);
    ck_assert_msg(value_of(text, series) == want_in[i], "%s", series);
    snprintf(series, sizeof series,
             "normd_response_body_bytes_bucket{le=\"%s\"}", les[i]);
    ck_assert_msg(value_of(text, series) == (i < 2 ? 0 : 6), "%s", series);
  }
  ck_assert(
      value_of(text, "normd_request_body_bytes_sum") ==
      (double)(0 + 256 + 257 + 1024 + (300u << 20) + (UINT64_C(1) << 40)));
  ck_assert(value_of(text, "normd_response_body_bytes_count") == 6);
  free(text);
}
END_TEST

/* Every _bucket series of the output is non-decreasing in le order and its
 * +Inf bucket equals the matching _count. */
START_TEST(test_buckets_monotone) {
  init_default();
  uint64_t seed = 12345;
  for (int i = 0; i < 2000; i++) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    double secs = (double)(seed >> 40) / (double)(1 << 24) * 12; /* 0..12 s */
    metrics_observe_request((size_t)(seed >> 20) % 6, 200 + (int)(seed % 3),
                            secs, seed >> 36, seed >> 38);
  }
  char *text = render();
  const char *les[] = DURATION_LES;
  for (size_t r = 0; r < NROUTES; r++) {
    double prev = 0;
    for (size_t i = 0; i < sizeof les / sizeof les[0]; i++) {
      double v = duration_bucket(text, routes[r], les[i]);
      ck_assert_msg(v >= prev, "%s le=%s decreased", routes[r], les[i]);
      prev = v;
    }
    char series[128];
    snprintf(series, sizeof series,
             "normd_request_duration_seconds_count{route=\"%s\"}", routes[r]);
    ck_assert(value_of(text, series) == prev);
  }
  free(text);
}
END_TEST

START_TEST(test_route_out_of_range) {
  init_default();
  metrics_observe_request(NROUTES, 404, 0.001, 0, 10);
  metrics_observe_request(1000, 404, 0.001, 0, 10);
  metrics_observe_request((size_t)-1, 405, 0.001, 0, 10);
  metrics_observe_request(3, 404, 0.001, 0, 10);
  char *text = render();
  ck_assert(requests(text, "other", "404") == 3);
  ck_assert(requests(text, "other", "405") == 1);
  ck_assert(
      value_of(text, "normd_request_duration_seconds_count{route=\"other\"}") ==
      4);
  free(text);
}
END_TEST

START_TEST(test_status_other) {
  init_default();
  metrics_observe_request(0, 99, 0, 0, 0);
  metrics_observe_request(0, 600, 0, 0, 0);
  metrics_observe_request(0, -1, 0, 0, 0);
  metrics_observe_request(0, 100, 0, 0, 0);
  metrics_observe_request(0, 599, 0, 0, 0);
  char *text = render();
  ck_assert(requests(text, "/v1/norm/layer", "other") == 3);
  ck_assert(requests(text, "/v1/norm/layer", "100") == 1);
  ck_assert(requests(text, "/v1/norm/layer", "599") == 1);
  free(text);
}
END_TEST

START_TEST(test_gauges_and_elements) {
  init_default();
  metrics_inflight_add(3);
  metrics_inflight_add(-1);
  metrics_queue_depth_set(7);
  metrics_queue_depth_set(5);
  metrics_jobs_add(5);
  metrics_jobs_add(-1);
  metrics_add_elements("layer", 1000);
  metrics_add_elements("layer", 24);
  metrics_add_elements("rms", 5);
  metrics_add_elements("moments", UINT64_C(1) << 40);
  metrics_add_elements("bogus", 3); /* ignored */
  metrics_add_elements("Layer", 3); /* ignored: kinds are exact */
  metrics_add_elements(NULL, 3);    /* ignored */
  char *text = render();
  ck_assert(value_of(text, "normd_inflight_requests") == 2);
  ck_assert(value_of(text, "normd_queue_depth") == 5);
  ck_assert(value_of(text, "normd_jobs_inflight") == 4);
  ck_assert(value_of(text, "normd_elements_normalized_total{kind=\"layer\"}") ==
            1024);
  ck_assert(value_of(text, "normd_elements_normalized_total{kind=\"rms\"}") ==
            5);
  ck_assert(value_of(text, "normd_elements_normalized_total{kind=\"batch\"}") ==
            0);
  ck_assert(value_of(text, "normd_elements_normalized_total{kind=\"group\"}") ==
            0);
  ck_assert(
      value_of(text, "normd_elements_normalized_total{kind=\"instance\"}") ==
      0);
  ck_assert(
      value_of(text, "normd_elements_normalized_total{kind=\"moments\"}") ==
      (double)(UINT64_C(1) << 40));
  ck_assert(!strstr(text, "bogus"));
  ck_assert(strstr(text, "# TYPE normd_inflight_requests gauge\n"));
  ck_assert(strstr(text, "# TYPE normd_queue_depth gauge\n"));
  ck_assert(strstr(text, "# TYPE normd_elements_normalized_total counter\n"));
  free(text);
  /* gauges may go negative through misuse; they are reported as they are */
  metrics_inflight_add(-5);
  text = render();
  ck_assert(value_of(text, "normd_inflight_requests") == -3);
  free(text);
}
END_TEST

START_TEST(test_build_info_and_escaping) {
  static const char *const odd[] = {"/v1/\"quoted\"", "back\\slash",
                                    "new\nline"};
  ck_assert_int_eq(metrics_init(odd, 3, "1.0 \"beta\"", "a\\b\nc"), 0);
  metrics_observe_request(0, 200, 0, 0, 0);
  metrics_observe_request(1, 200, 0, 0, 0);
  metrics_observe_request(2, 200, 0, 0, 0);
  char *text = render();
  ck_assert(value_of(text, "normd_build_info{version=\"1.0 "
                           "\\\"beta\\\"\",revision=\"a\\\\b\\nc\"}") == 1);
  ck_assert(requests(text, "/v1/\\\"quoted\\\"", "200") == 1);
  ck_assert(requests(text, "back\\\\slash", "200") == 1);
  ck_assert(requests(text, "new\\nline", "200") == 1);
  ck_assert(strstr(text, "# TYPE normd_build_info gauge\n"));
  free(text);
}
END_TEST

START_TEST(test_reset) {
  init_default();
  metrics_observe_request(0, 200, 0.5, 1000, 1000);
  metrics_inflight_add(2);
  metrics_queue_depth_set(4);
  metrics_add_elements("batch", 9);
  metrics_reset();
  char *text = render();
  double v;
  ck_assert(!sample(
      text, "normd_requests_total{route=\"/v1/norm/layer\",code=\"200\"}", &v));
  ck_assert(duration_bucket(text, "/v1/norm/layer", "+Inf") == 0);
  ck_assert(
      value_of(
          text,
          "normd_request_duration_seconds_sum{route=\"/v1/norm/layer\"}") == 0);
  ck_assert(value_of(text, "normd_request_body_bytes_count") == 0);
  ck_assert(value_of(text, "normd_response_body_bytes_sum") == 0);
  ck_assert(value_of(text, "normd_inflight_requests") == 0);
  ck_assert(value_of(text, "normd_queue_depth") == 0);
  ck_assert(value_of(text, "normd_elements_normalized_total{kind=\"batch\"}") ==
            0);
  /* routes and build info survive a reset */
  ck_assert(
      value_of(text,
               "normd_build_info{version=\"0.1.0\",revision=\"abc123\"}") == 1);
  free(text);
  metrics_observe_request(0, 200, 0.5, 0, 0);
  text = render();
  ck_assert(requests(text, "/v1/norm/layer", "200") == 1);
  free(text);
}
END_TEST

START_TEST(test_init_errors) {
  static const char *const with_null[] = {"/a", NULL, "other"};
  static const char *many[1000];
  for (size_t i = 0; i < 1000; i++) many[i] = "r";
  ck_assert_int_eq(metrics_init(NULL, 3, "v", "r"), -1);
  ck_assert_int_eq(metrics_init(routes, 0, "v", "r"), -1);
  ck_assert_int_eq(metrics_init(with_null, 3, "v", "r"), -1);
  ck_assert_int_eq(metrics_init(many, 1000, "v", "r"), -1);
  ck_assert_int_eq(metrics_init(routes, NROUTES, NULL, "r"), -1);
  ck_assert_int_eq(metrics_init(routes, NROUTES, "v", NULL), -1);
  ck_assert_int_eq(metrics_init(routes, 1, "v", "r"),
                   0); /* one route is fine */
  metrics_observe_request(5, 200, 0.1, 1, 1);
  char *text = render();
  ck_assert(requests(text, "/v1/norm/layer", "200") == 1);
  free(text);
}
END_TEST

/* ---- Process ------------------------------------------------------------- */

START_TEST(test_process_metrics) {
  init_default();
  char *text = render();
  double cpu = value_of(text, "process_cpu_seconds_total");
  double rss = value_of(text, "process_resident_memory_bytes");
  double fds = value_of(text, "process_open_fds");
  double start = value_of(text, "process_start_time_seconds");
  double maxfds = value_of(text, "process_max_fds");
  ck_assert(strstr(text, "# TYPE process_cpu_seconds_total counter\n"));
  ck_assert(strstr(text, "# TYPE process_start_time_seconds gauge\n"));
  free(text);
  ck_assert(cpu >= 0);
  ck_assert(rss > 0);
  ck_assert(fds >= 1);
  struct rlimit rl;
  ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
  ck_assert(maxfds == (double)rl.rlim_cur);
  /* this process (a fork, in Check's default mode) started moments ago */
  double now = (double)time(NULL);
  ck_assert_msg(start <= now + 2 && start >= now - 600,
                "process_start_time_seconds %.2f, now %.0f", start, now);

  /* three more descriptors are seen as three more */
  int extra[3];
  for (int i = 0; i < 3; i++)
    ck_assert_int_ge(extra[i] = open("/dev/null", O_RDONLY), 0);
  /* burn 50 ms of CPU so the counter moves (1/CLK_TCK resolution) */
  clock_t c0 = clock();
  while ((double)(clock() - c0) / CLOCKS_PER_SEC < 0.05) continue;
  text = render();
  ck_assert(value_of(text, "process_open_fds") == fds + 3);
  ck_assert(value_of(text, "process_cpu_seconds_total") > cpu);
  free(text);
  for (int i = 0; i < 3; i++) close(extra[i]);
}
END_TEST

/* ---- Concurrency --------------------------------------------------------- */

#define THREADS 4
#define PER_THREAD 50000

static void *hammer(void *arg) {
  size_t id = (size_t)(uintptr_t)arg;
  for (int i = 0; i < PER_THREAD; i++) {
    metrics_inflight_add(1);
    metrics_observe_request(id % NROUTES, 200, 0.001, 10, 20);
    metrics_add_elements("group", 2);
    metrics_inflight_add(-1);
  }
  return NULL;
}

/* Renders while the hammer threads run, too: a render must never see a
 * torn state (every _count equals its +Inf bucket). */
START_TEST(test_concurrent_observers) {
  init_default();
  pthread_t tid[THREADS];
  for (size_t t = 0; t < THREADS; t++)
    ck_assert_int_eq(
        pthread_create(&tid[t], NULL, hammer, (void *)(uintptr_t)t), 0);
  for (int k = 0; k < 20; k++) {
    char *text = render();
    double inf = value_of(text, "normd_request_body_bytes_bucket{le=\"+Inf\"}");
    double count = value_of(text, "normd_request_body_bytes_count");
    double sum = value_of(text, "normd_request_body_bytes_sum");
    free(text);
    if (inf != count || sum != 10 * count) ck_abort_msg("torn snapshot");
  }
  for (size_t t = 0; t < THREADS; t++) pthread_join(tid[t], NULL);
  char *text = render();
  ck_assert(value_of(text, "normd_request_body_bytes_count") ==
            THREADS * PER_THREAD);
  ck_assert(value_of(text, "normd_response_body_bytes_sum") ==
            20.0 * THREADS * PER_THREAD);
  ck_assert(value_of(text, "normd_elements_normalized_total{kind=\"group\"}") ==
            2.0 * THREADS * PER_THREAD);
  ck_assert(value_of(text, "normd_inflight_requests") == 0);
  for (size_t t = 0; t < THREADS; t++)
    ck_assert(requests(text, routes[t % NROUTES], "200") == PER_THREAD);
  free(text);
}
END_TEST

/* ---- promtool ------------------------------------------------------------ */

/* Pipes text into `promtool check metrics`; returns its exit status with
 * its combined output in out. A missing promtool fails the test: it is a
 * declared test dependency, not an optional one. */
static int promtool_check(const char *text, char *out, size_t outlen) {
  if (system("command -v promtool >/dev/null 2>&1") != 0)
    ck_abort_msg("promtool not found on PATH; it is a test dependency: install "
                 "the Debian package 'prometheus' (/usr/bin/promtool)");
  char path[] = "/tmp/normd-promtool-XXXXXX";
  int fd = mkstemp(path);
  ck_assert_int_ge(fd, 0);
  close(fd);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "promtool check metrics >'%s' 2>&1", path);
  signal(SIGPIPE, SIG_IGN); /* a promtool that dies early must not kill us */
  FILE *p = popen(cmd, "w");
  ck_assert_ptr_nonnull(p);
  fputs(text, p);
  int status = pclose(p);
  FILE *f = fopen(path, "r");
  size_t n = f ? fread(out, 1, outlen - 1, f) : 0;
  out[n] = '\0';
  if (f) fclose(f);
  unlink(path);
  ck_assert_msg(status != -1 && WIFEXITED(status), "promtool did not run");
  return WEXITSTATUS(status);
}

/* Check's failure messages are short (a few KiB), so the exposition goes
 * to stderr and only promtool's own words go into the message. */
static void lint_failure(int rc, const char *out, const char *text) {
  fprintf(stderr, "---- exposition rejected by promtool ----\n%s----\n", text);
  ck_abort_msg("promtool check metrics exited %d: %.1500s", rc, out);
}

START_TEST(test_promtool_lint) {
  static const char *const odd[] = {"/v1/norm/layer", "/v1/\"q\"\\x\ny",
                                    "other"};
  ck_assert_int_eq(metrics_init(odd, 3, "0.1.0 \"dev\"", "abc\\def"), 0);
  char out[4096];

  char *text = render(); /* nothing observed yet */
  int rc = promtool_check(text, out, sizeof out);
  if (rc != 0) lint_failure(rc, out, text);
  free(text);

  const int codes[] = {200, 400, 404, 413, 422, 503, 1000};
  for (int i = 0; i < 200; i++)
    metrics_observe_request((size_t)i % 5, codes[i % 7], i * 0.013,
                            (uint64_t)i << 12, (uint64_t)i << 14);
  metrics_observe_request(1, 200, INFINITY, 0, 0);
  metrics_add_elements("layer", 12345);
  metrics_inflight_add(3);
  metrics_queue_depth_set(2);
  text = render();
  rc = promtool_check(text, out, sizeof out);
  if (rc != 0) lint_failure(rc, out, text);
  free(text);
}
END_TEST

/* The checker itself must catch a bad exposition, or the lint test above
 * proves nothing. */
START_TEST(test_promtool_catches_problems) {
  char out[4096];
  int rc = promtool_check("# HELP x_requests a counter without _total\n"
                          "# TYPE x_requests counter\nx_requests 1\n",
                          out, sizeof out);
  ck_assert_msg(rc != 0, "promtool accepted a lint problem: %.1500s", out);
  rc = promtool_check("not{valid 1\n", out, sizeof out);
  ck_assert_msg(rc != 0, "promtool accepted a parse error: %.1500s", out);
}
END_TEST

Suite *metrics_suite(void) {
  Suite *s = suite_create("metrics");
  TCase *tc = tcase_create("Core");
  tcase_add_test(tc, test_counters);
  tcase_add_test(tc, test_duration_buckets);
  tcase_add_test(tc, test_bytes_buckets);
  tcase_add_test(tc, test_buckets_monotone);
  tcase_add_test(tc, test_route_out_of_range);
  tcase_add_test(tc, test_status_other);
  tcase_add_test(tc, test_gauges_and_elements);
  tcase_add_test(tc, test_build_info_and_escaping);
  tcase_add_test(tc, test_reset);
  tcase_add_test(tc, test_init_errors);
  suite_add_tcase(s, tc);

  tc = tcase_create("Process");
  tcase_add_test(tc, test_process_metrics);
  suite_add_tcase(s, tc);

  tc = tcase_create("Concurrency");
  tcase_add_test(tc, test_concurrent_observers);
  suite_add_tcase(s, tc);

  tc = tcase_create("Promtool");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, test_promtool_lint);
  tcase_add_test(tc, test_promtool_catches_problems);
  suite_add_tcase(s, tc);
  return s;
}
