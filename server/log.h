/* log.h -- leveled logging to stderr, one line per event, safe from any
 * thread, as text or as JSON (log_format). Lines are whole: written with a
 * single fwrite each, or, once log_start has run, batched by a writer
 * thread so that logging never waits for stderr. */
#ifndef NORMD_LOG_H
#define NORMD_LOG_H

#include <stddef.h>
#include <stdint.h>

typedef enum { LOG_ERROR = 0, LOG_WARN, LOG_INFO, LOG_DEBUG } log_level_t;

/* Sets the threshold from "error", "warn", "info" or "debug"; returns 0 or
 * -1 for an unknown name. */
int log_set_level(const char *name);
int log_enabled(log_level_t level);

/* Sets the line format from "text" (the default: `<ts> <level> <msg>`) or
 * "json" (one object per line: {"ts", "level", "msg"}, access lines with
 * their fields); returns 0 or -1 for an unknown name. Call it before other
 * threads log. */
int log_set_format(const char *name);

/* Starts the writer thread: from now on a line is copied into a buffer of
 * buffer_bytes (two are allocated: one fills while the other is written)
 * and written in batches every few milliseconds, off the logging thread.
 * A line that finds the buffer full is dropped, counted in
 * log_lines_dropped() and reported by a warn line. Call it before other
 * threads log, with the signals the process takes synchronously blocked
 * (the writer inherits the mask). 0, or -1 (out of memory, no thread:
 * lines are then written directly, as before). Registers log_stop with
 * atexit. */
enum { LOG_BUFFER_BYTES = 1024 * 1024 }; /* ~5000 access lines */
int log_start(size_t buffer_bytes);
/* Returns once every line logged before the call is written (a no-op
 * without a writer). */
void log_flush(void);
/* Writes every buffered line and stops the writer; lines logged after are
 * written directly. Idempotent; thread-safe. */
void log_stop(void);
/* Lines dropped because the buffer was full, since the process started. */
uint64_t log_lines_dropped(void);

/* One line of the formatted message. In json the whole message is escaped
 * (log_json_escape); in text it is written as it is, so client-chosen
 * arguments must be passed through log_escape first. */
void log_msg(log_level_t level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* One request, for the access log. Strings are raw (as the client sent
 * them, NUL-terminated): log_access escapes each for the format. */
typedef struct {
  const char *method, *path;
  int status;
  uint64_t bytes_in, bytes_out;
  double duration_ms;
  const char *request_id;
  const char *remote;     /* the client's address, "" when unknown */
  const char *user_agent; /* the User-Agent header, "" when absent */
  const char *note; /* why it ended unanswered or cut, "" when it did not */
} log_access_t;

/* Writes the request's access line at info level (the caller checks
 * log_enabled(LOG_INFO) first). text:
 *   <ts> info GET /healthz 200 in=0 out=3 0.052ms id=<id> remote=<addr>
 *   ua="<user agent>"
 * (one line) with ` (<note>)` after it when there is a note; json:
 *   {"ts":..,"level":"info","msg":"request","method":..,"path":..,
 *    "status":..,"bytes_in":..,"bytes_out":..,"duration_ms":..,
 *    "request_id":..,"remote":..,"user_agent":..[,"note":..]} */
void log_access(const log_access_t *a);

/* Copies src into dst (cap > 0 bytes, always NUL-terminated) so that it can
 * neither end nor forge a log line: bytes below 0x20, 0x7f, '"', '\\',
 * every byte that is not part of well-formed UTF-8, and the characters
 * that some readers take as a line break or a terminal control (C1
 * controls U+0080-U+009F, U+2028, U+2029) become \xHH, byte by byte;
 * other characters pass. Cut at a whole character or escape when dst is
 * full. Returns dst. For client-chosen text (method, path) before logging
 * in the text format. */
char *log_escape(char *dst, size_t cap, const char *src);

/* src as the inside of a JSON string (RFC 8259 section 7) into dst (cap > 0
 * bytes, always NUL-terminated), so that the line stays one valid JSON
 * object: '"' and '\\' are backslashed, \n \r \t written so, the other
 * bytes below 0x20, 0x7f and the characters log_escape escapes (C1,
 * U+2028, U+2029) become \u00XX / \u2028 / \u2029, and a byte that is not
 * part of well-formed UTF-8 becomes \u00XX of its value (so 0xff reads as
 * U+00FF: the byte is kept, the output stays valid UTF-8). Cut at a whole
 * character or escape when dst is full. Returns the length written. */
size_t log_json_escape(char *dst, size_t cap, const char *src);

#endif
