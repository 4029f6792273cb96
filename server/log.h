/* log.h -- leveled logging to stderr, one line per event, safe from any
 * thread (each line is written with a single fprintf). */
#ifndef NORMD_LOG_H
#define NORMD_LOG_H

#include <stddef.h>

typedef enum { LOG_ERROR = 0, LOG_WARN, LOG_INFO, LOG_DEBUG } log_level_t;

/* Sets the threshold from "error", "warn", "info" or "debug"; returns 0 or
 * -1 for an unknown name. */
int log_set_level(const char *name);
int log_enabled(log_level_t level);
void log_msg(log_level_t level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Copies src into dst (cap > 0 bytes, always NUL-terminated) so that it can
 * neither end nor forge a log line: bytes below 0x20, 0x7f, '"', '\\' and
 * every byte that is not part of well-formed UTF-8 become \xHH; other
 * characters pass. Cut at a whole character or escape when dst is full.
 * Returns dst. For client-chosen text (method, path) before logging. */
char *log_escape(char *dst, size_t cap, const char *src);

#endif
