/* log.h -- leveled logging to stderr, one line per event, safe from any
 * thread (each line is written with a single fprintf). */
#ifndef NORMD_LOG_H
#define NORMD_LOG_H

typedef enum { LOG_ERROR = 0, LOG_WARN, LOG_INFO, LOG_DEBUG } log_level_t;

/* Sets the threshold from "error", "warn", "info" or "debug"; returns 0 or
 * -1 for an unknown name. */
int log_set_level(const char *name);
int log_enabled(log_level_t level);
void log_msg(log_level_t level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
