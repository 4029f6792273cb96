/* main.c -- the normd daemon: configuration, the worker pool, the HTTP
 * server, and the SIGTERM/SIGINT drain. Everything else lives in modules. */
#include <jansson.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "compute.h"
#include "config.h"
#include "http.h"
#include "log.h"
#include "metrics.h"
#include "pool.h"
#include "router.h"

extern char **environ;

/* jansson's hash seed from the kernel, so colliding keys cannot be
 * precomputed by a client. */
static void seed_json_hash(void) {
  uint32_t seed = 0;
  if (getrandom(&seed, sizeof seed, 0) != (ssize_t)sizeof seed) seed = 0;
  json_object_seed(seed); /* 0 = jansson picks one from /dev/urandom */
}

/* CPUs this process may run on: its affinity mask (what a container's
 * cpuset allows), capped by a cgroup v2 CPU quota when there is one. */
static int64_t usable_cpus(void) {
  cpu_set_t set;
  int64_t n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set)
                                                          : sysconf(_SC_NPROCESSORS_ONLN);
  FILE *f = fopen("/sys/fs/cgroup/cpu.max", "r");
  if (f != NULL) {
    char quota[32];
    long long period;
    if (fscanf(f, "%31s %lld", quota, &period) == 2 && strcmp(quota, "max") != 0 &&
        period > 0) {
      int64_t q = (atoll(quota) + period - 1) / period; /* round up */
      if (q > 0 && q < n) n = q;
    }
    fclose(f);
  }
  return n > 0 ? n : 1;
}

int main(int argc, char **argv) {
  /* Static: worker and HTTP threads read it for the whole process life,
   * including after a drain timeout, when they are still running. */
  static config_t cfg;
  char err[512];
  switch (config_from_args(&cfg, argc, argv, environ, stdout, NORMD_VERSION,
                           err, sizeof err)) {
  case CONFIG_EXIT_OK: return 0;
  case CONFIG_EXIT_ERR: fprintf(stderr, "normd: %s\n", err); return 2;
  case CONFIG_PRINT: /* what startup would refuse, refused here too */
    if (http_check_config(&cfg, err, sizeof err) != 0) {
      fprintf(stderr, "normd: %s\n", err);
      return 2;
    }
    config_print(&cfg, stdout);
    return 0;
  case CONFIG_RUN: break;
  }
  log_set_level(cfg.log_level);
  log_set_format(cfg.log_format); /* before any other thread logs */
  if (cfg.threads == 0) cfg.threads = usable_cpus();

  /* Signals are taken synchronously by this thread only: block them before
   * any other thread starts, so every thread inherits the mask. */
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);
  signal(SIGPIPE, SIG_IGN);
  /* access lines are written by their own thread (log.c) */
  if (log_start(LOG_BUFFER_BYTES) != 0)
    log_msg(LOG_WARN, "cannot start the log writer: lines are written by "
                      "the threads that log them");

  /* Requests allocate and free buffers of megabytes. Kept in malloc's
   * heap they are reused without a page fault per 4 KiB (mmap'd ones come
   * back zeroed each time): ~900 faults per 4 MiB framed request before,
   * ~50 after, and +30% requests/s. One arena, because malloc_trim (which
   * http_clock.c calls once the server is idle, to give the memory back)
   * cannot shrink the heaps of the per-thread arenas (8 arenas: idle RSS
   * 27 -> 103 MiB after bench/http_bench.sh, against 6 -> 6). The blocks
   * every small request takes and gives back past glibc's per-thread cache
   * did contend for its lock; blocks.c keeps those per thread. 32 MiB is
   * the largest mmap threshold glibc takes. No fastbins (M_MXFAST 0): the
   * small blocks past the per-thread cache then go back to the heap at
   * once, instead of waiting in fastbins for the malloc_consolidate that
   * every larger malloc ran first (0.7-1.9% of the daemon's perf samples
   * under wrk, 1x768 JSON; 0 with them off, and _int_malloc + _int_free
   * 1.4-3.9% -> 1.7-2.0%). */
  mallopt(M_MXFAST, 0);
  mallopt(M_ARENA_MAX, 1);
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
  seed_json_hash();
  metrics_init(router_labels(), router_count + 1, NORMD_VERSION, NORMD_REVISION);
  compute_init((int)cfg.threads); /* large requests: as many as the workers */
  pool_t *pool = pool_start((int)cfg.threads, (int)cfg.max_inflight);
  if (pool == NULL) {
    fprintf(stderr, "normd: cannot start the worker pool\n");
    return 1;
  }
  server_t *srv = http_start(&cfg, pool, err, sizeof err);
  if (srv == NULL) {
    fprintf(stderr, "normd: %s\n", err);
    pool_stop(pool);
    return 1;
  }
  int ipv6 = strchr(cfg.host, ':') != NULL; /* a URL brackets its address */
  log_msg(LOG_INFO,
          "normd %s (%s) listening on %s://%s%s%s:%u threads=%lld "
          "http_threads=%lld max_body_bytes=%lld max_elements=%lld "
          "max_inflight=%lld max_json_depth=%lld max_connections=%lld "
          "per_ip_connections=%lld request_timeout_s=%lld "
          "connection_timeout_s=%lld drain_timeout_s=%lld api_keys=%s",
          NORMD_VERSION, NORMD_REVISION, http_tls(srv) ? "https" : "http",
          ipv6 ? "[" : "", cfg.host, ipv6 ? "]" : "", http_port(srv),
          (long long)cfg.threads, (long long)cfg.http_threads,
          (long long)cfg.max_body_bytes, (long long)cfg.max_elements,
          (long long)cfg.max_inflight, (long long)cfg.max_json_depth,
          (long long)cfg.max_connections, (long long)cfg.per_ip_connections,
          (long long)cfg.request_timeout_s, (long long)cfg.connection_timeout_s,
          (long long)cfg.drain_timeout_s,
          http_auth(srv) ? cfg.api_key_scope : "off");

  int sig = 0;
  sigwait(&stop_signals, &sig);
  log_msg(LOG_WARN, "signal %d: draining (up to %llds)", sig,
          (long long)cfg.drain_timeout_s);
  log_flush(); /* the lines before the drain are out before it waits */
  http_begin_drain(srv);
  long open = http_wait_idle(srv, (double)cfg.drain_timeout_s);
  if (open != 0) {
    /* MHD cannot stop with suspended connections; the process exit closes
     * them. _exit, not exit or return: workers are still running, and
     * exit-time cleanup (atexit handlers, the leak checker) must not race
     * with them. */
    log_msg(LOG_ERROR, "drain timeout: exiting with %ld request%s in flight "
            "(dropped unanswered)", open, open == 1 ? "" : "s");
    log_stop(); /* every access line of the drain, and the line above */
    fflush(NULL);
    _exit(1);
  }
  http_stop(srv);
  pool_stop(pool);
  log_msg(LOG_WARN, "drained, exiting");
  log_stop();
  return 0;
}
