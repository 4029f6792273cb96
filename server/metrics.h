/* metrics.h -- process-wide Prometheus metrics (text format 0.0.4). All
 * functions are thread-safe; observation is cheap (one mutex, no malloc).
 * Routes are small integer ids registered once at startup, so label
 * cardinality is bounded by the route table. */
#ifndef NORMD_METRICS_H
#define NORMD_METRICS_H

#include <stddef.h>
#include <stdint.h>

/* Registers route labels (e.g. "/v1/norm/layer"; the last one should be a
 * catch-all such as "other") and the build info. Call once before any other
 * metrics_* function; the strings must outlive the process (static). Returns
 * 0, or -1 on bad arguments. */
int metrics_init(const char *const *routes, size_t nroutes, const char *version,
                 const char *revision);

/* One finished HTTP request: counts normd_requests_total{route,code},
 * observes normd_request_duration_seconds{route}, and the request / response
 * body byte histograms. route >= nroutes is counted under the last route. */
void metrics_observe_request(size_t route, int status, double seconds,
                             uint64_t bytes_in, uint64_t bytes_out);

/* normd_elements_normalized_total{kind}: kind is one of "layer", "rms",
 * "batch", "group", "instance", "moments" (others are ignored). */
void metrics_add_elements(const char *kind, uint64_t n);

/* Gauges: normd_inflight_requests (accepted, not yet answered: a request
 * counts from its headers on, before its body is in), normd_queue_depth
 * (jobs waiting for a worker) and normd_jobs_inflight (the slots
 * max_inflight bounds: pool.c's reserved jobs, inline ones included). */
void metrics_inflight_add(int delta);
void metrics_queue_depth_set(int64_t depth);
void metrics_jobs_add(int delta);

/* The whole exposition as a malloc'd NUL-terminated string (caller frees),
 * including process_cpu_seconds_total, process_resident_memory_bytes,
 * process_open_fds, process_start_time_seconds (read from /proc/self), and
 * normd_build_info{version,revision} 1, and normd_log_lines_dropped_total
 * (log_lines_dropped()). NULL on out of memory. */
char *metrics_render(void);

/* Resets every counter (for tests). */
void metrics_reset(void);

#endif
