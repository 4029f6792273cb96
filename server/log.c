/* log.c -- timestamped, leveled lines on stderr. */
#include "log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static atomic_int threshold = LOG_INFO;
static const char *const names[] = {"error", "warn", "info", "debug"};

int log_set_level(const char *name) {
  for (int i = 0; i <= LOG_DEBUG; i++)
    if (strcmp(name, names[i]) == 0) {
      atomic_store(&threshold, i);
      return 0;
    }
  return -1;
}

int log_enabled(log_level_t level) { return (int)level <= atomic_load(&threshold); }

void log_msg(log_level_t level, const char *fmt, ...) {
  if (!log_enabled(level)) return;
  char line[1024];
  struct timespec ts;
  struct tm tm;
  clock_gettime(CLOCK_REALTIME, &ts);
  gmtime_r(&ts.tv_sec, &tm);
  int n = snprintf(line, sizeof line, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s ",
                   tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                   tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000, names[level]);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
  va_end(ap);
  fprintf(stderr, "%s\n", line);
}
