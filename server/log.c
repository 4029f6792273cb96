/* log.c -- timestamped, leveled lines on stderr, as text or JSON, each
 * built whole in a buffer. What a client chose is escaped for the format,
 * so it can neither end a line nor forge one.
 *
 * DESIGN. Once log_start() has run, a line is not written by the thread
 * that logs it (an access line per request: a write(2) on the request
 * path, ~8% of the small requests' throughput) but copied, under a mutex
 * held for that copy only, into the fill buffer; the writer thread swaps
 * it with its spare one every FLUSH_MS (sooner when half full, or when
 * log_flush asks) and writes the batch. Logging never waits for stderr: a
 * line that finds the buffer full is dropped and counted
 * (log_lines_dropped, normd_log_lines_dropped_total) and the writer says
 * how many in a warn line. log_stop (main, and atexit) writes what is
 * left. Before log_start, and after log_stop, each line is one fwrite of
 * the whole line (stderr is unbuffered: one write(2), stdio's lock keeps
 * threads' lines apart). */
#include "log.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static atomic_int threshold = LOG_INFO;
static const char *const names[] = {"error", "warn", "info", "debug"};

enum { FORMAT_TEXT, FORMAT_JSON };
static atomic_int format = FORMAT_TEXT;

int log_set_level(const char *name) {
  for (int i = 0; i <= LOG_DEBUG; i++)
    if (strcmp(name, names[i]) == 0) {
      atomic_store(&threshold, i);
      return 0;
    }
  return -1;
}

int log_enabled(log_level_t level) { return (int)level <= atomic_load(&threshold); }

int log_set_format(const char *name) {
  if (strcmp(name, "text") == 0) atomic_store(&format, FORMAT_TEXT);
  else if (strcmp(name, "json") == 0) atomic_store(&format, FORMAT_JSON);
  else return -1;
  return 0;
}

/* ---- escaping ---- */

/* The length of the well-formed UTF-8 sequence of 2-4 bytes at s (RFC 3629:
 * no overlong forms, no surrogates, nothing past U+10FFFF), or 0. */
static size_t utf8_len(const unsigned char *s) {
  unsigned char c = s[0], lo = 0x80, hi = 0xbf;
  size_t n;
  if (c >= 0xc2 && c <= 0xdf) n = 2;
  else if (c >= 0xe0 && c <= 0xef) n = 3;
  else if (c >= 0xf0 && c <= 0xf4) n = 4;
  else return 0;
  if (c == 0xe0) lo = 0xa0;
  else if (c == 0xed) hi = 0x9f;
  else if (c == 0xf0) lo = 0x90;
  else if (c == 0xf4) hi = 0x8f;
  if (s[1] < lo || s[1] > hi) return 0;
  for (size_t i = 2; i < n; i++)
    if (s[i] < 0x80 || s[i] > 0xbf) return 0;
  return n;
}

/* The character at s as both escapers see it: n bytes that pass as they
 * are (plain) or are escaped, and for an escaped one the code point (the
 * byte's own value for a byte outside well-formed UTF-8). Escaped beyond
 * ASCII's controls, '"' and '\\': the C1 controls U+0080-U+009F (U+009B is
 * a terminal's CSI) and U+2028 / U+2029, which Python's splitlines and
 * JavaScript take as line ends. */
typedef struct {
  size_t n;
  int plain;
  unsigned cp;
} unit_t;

static inline unit_t next_unit(const unsigned char *s) {
  unsigned char c = s[0];
  if (c < 0x80)
    return (unit_t){1, c >= 0x20 && c < 0x7f && c != '"' && c != '\\', c};
  size_t n = utf8_len(s);
  if (n == 0) return (unit_t){1, 0, c};
  if (c == 0xc2 && s[1] < 0xa0) return (unit_t){2, 0, s[1]};
  if (c == 0xe2 && s[1] == 0x80 && (s[2] == 0xa8 || s[2] == 0xa9))
    return (unit_t){3, 0, 0x2000u | (s[2] - 0x80u)};
  return (unit_t){n, 1, 0};
}

static const char hex[] = "0123456789abcdef";

/* An escaped unit's text (at most 16 bytes), its length returned. */
typedef size_t (*escape_fn)(const unsigned char *s, unit_t u, char out[16]);

/* The text format's: \xHH per byte. */
static size_t escape_text(const unsigned char *s, unit_t u, char out[16]) {
  for (size_t i = 0; i < u.n; i++) {
    out[4 * i] = '\\';
    out[4 * i + 1] = 'x';
    out[4 * i + 2] = hex[s[i] >> 4];
    out[4 * i + 3] = hex[s[i] & 15];
  }
  return 4 * u.n;
}

/* JSON's: \" \\ \n \r \t, else \uXXXX of the code point. */
static size_t escape_json(const unsigned char *s, unit_t u, char out[16]) {
  (void)s;
  out[0] = '\\';
  if (u.cp == '"' || u.cp == '\\' || u.cp == '\n' || u.cp == '\r' ||
      u.cp == '\t') {
    out[1] = u.cp == '\n' ? 'n' : u.cp == '\r' ? 'r' : u.cp == '\t' ? 't'
                                                                  : (char)u.cp;
    return 2;
  }
  out[1] = 'u';
  out[2] = hex[(u.cp >> 12) & 15];
  out[3] = hex[(u.cp >> 8) & 15];
  out[4] = hex[(u.cp >> 4) & 15];
  out[5] = hex[u.cp & 15];
  return 6;
}

/* src into dst (cap bytes, NUL-terminated), each unit whole or not at all:
 * plain ones as they are, the others as `escape` writes them. Returns the
 * length written. */
static size_t escape_into(char *dst, size_t cap, const char *src,
                          escape_fn escape) {
  const unsigned char *s = (const unsigned char *)src;
  size_t o = 0;
  while (*s) {
    /* the common case, printable ASCII, a byte at a time */
    if (*s >= 0x20 && *s < 0x7f && *s != '"' && *s != '\\') {
      if (o + 1 >= cap) break;
      dst[o++] = (char)*s++;
      continue;
    }
    unit_t u = next_unit(s);
    char esc[16];
    size_t need = u.plain ? u.n : escape(s, u, esc);
    if (o + need >= cap) break;
    memcpy(dst + o, u.plain ? (const char *)s : esc, need);
    o += need;
    s += u.n;
  }
  dst[o] = '\0';
  return o;
}

char *log_escape(char *dst, size_t cap, const char *src) {
  escape_into(dst, cap, src, escape_text);
  return dst;
}

size_t log_json_escape(char *dst, size_t cap, const char *src) {
  return escape_into(dst, cap, src, escape_json);
}

/* ---- lines ---- */

/* A line being built; an append that does not fit is left out whole (the
 * buffers below are sized so that none is). */
typedef struct {
  char *buf;
  size_t len, cap;
} line_t;

static void put(line_t *l, const char *s) {
  size_t n = strlen(s);
  if (l->len + n >= l->cap) return;
  memcpy(l->buf + l->len, s, n + 1);
  l->len += n;
}

/* ,"key":"<v escaped>" */
static void put_json_string(line_t *l, const char *key, const char *v) {
  put(l, ",\"");
  put(l, key);
  put(l, "\":\"");
  /* room for the closing quote and what follows it */
  if (l->len + 8 < l->cap)
    l->len += log_json_escape(l->buf + l->len, l->cap - l->len - 8, v);
  put(l, "\"");
}

/* v in decimal, zero-padded to at least `width` digits. By hand, as the
 * rest of the line: snprintf was most of an access line's cost. */
static void put_uint(line_t *l, uint64_t v, int width) {
  char d[24];
  int n = 0;
  do {
    d[n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v != 0 || n < width);
  if (l->len + (size_t)n >= l->cap) return;
  while (n > 0) l->buf[l->len++] = d[--n];
  l->buf[l->len] = '\0';
}

/* Milliseconds with three decimals (what %.3f writes for ms >= 0). */
static void put_ms(line_t *l, double ms) {
  uint64_t us = ms > 0 ? (uint64_t)(ms * 1000.0 + 0.5) : 0;
  put_uint(l, us / 1000, 1);
  put(l, ".");
  put_uint(l, us % 1000, 3);
}

/* RFC 3339 in UTC with milliseconds: 2025-01-31T12:34:56.789Z. */
static void put_timestamp(line_t *l) {
  struct timespec ts;
  struct tm tm;
  clock_gettime(CLOCK_REALTIME, &ts);
  gmtime_r(&ts.tv_sec, &tm);
  put_uint(l, (uint64_t)tm.tm_year + 1900, 4);
  put(l, "-");
  put_uint(l, (uint64_t)tm.tm_mon + 1, 2);
  put(l, "-");
  put_uint(l, (uint64_t)tm.tm_mday, 2);
  put(l, "T");
  put_uint(l, (uint64_t)tm.tm_hour, 2);
  put(l, ":");
  put_uint(l, (uint64_t)tm.tm_min, 2);
  put(l, ":");
  put_uint(l, (uint64_t)tm.tm_sec, 2);
  put(l, ".");
  put_uint(l, (uint64_t)(ts.tv_nsec / 1000000), 3);
  put(l, "Z");
}

/* {"ts":"...","level":"..." */
static void put_json_head(line_t *l, log_level_t level) {
  put(l, "{\"ts\":\"");
  put_timestamp(l);
  put(l, "\"");
  put_json_string(l, "level", names[level]);
}

/* ---- the buffer and its writer ---- */

enum { FLUSH_MS = 5 };

static struct {
  pthread_mutex_t lock;     /* guards every field below but thread */
  pthread_cond_t wake;      /* the writer: lines waiting, a flush, a stop */
  pthread_cond_t written;   /* log_flush: a batch is out */
  char *fill, *spare;       /* the lines being added; the writer's */
  size_t len, cap;          /* of fill; both buffers are cap bytes */
  int running;              /* the writer takes the lines */
  int stop;                 /* log_stop asks it to write all and leave */
  int idle;                 /* it waits for a first line */
  uint64_t flush_asked;     /* log_flush calls so far */
  uint64_t flushed;         /* the last of them whose lines are written */
  uint64_t dropped_unsaid;  /* dropped since the writer last said so */
  pthread_t thread;
} ring = {.lock = PTHREAD_MUTEX_INITIALIZER};

static atomic_ullong dropped_total;

uint64_t log_lines_dropped(void) { return atomic_load(&dropped_total); }

/* All n bytes to stderr, or as many as it takes (an error loses the rest:
 * there is nowhere to report it). */
static void write_all(const char *p, size_t n) {
  while (n > 0) {
    ssize_t w = write(STDERR_FILENO, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    p += w;
    n -= (size_t)w;
  }
}

/* The warn line saying n lines were dropped, in the format's form. */
static void say_dropped(uint64_t n) {
  char buf[256], msg[160];
  line_t l = {buf, 0, sizeof buf};
  buf[0] = '\0';
  snprintf(msg, sizeof msg,
           "log buffer full (stderr not keeping up): %llu line%s dropped",
           (unsigned long long)n, n == 1 ? "" : "s");
  if (atomic_load_explicit(&format, memory_order_relaxed) == FORMAT_JSON) {
    put_json_head(&l, LOG_WARN);
    put(&l, ",\"msg\":\"");
    put(&l, msg);
    put(&l, "\"}\n");
  } else {
    put_timestamp(&l);
    put(&l, " warn ");
    put(&l, msg);
    put(&l, "\n");
  }
  write_all(buf, l.len);
}

/* Waits, lock held, until `ms` have passed or a flush or stop is asked. */
static void gather(int ms) {
  struct timespec until;
  clock_gettime(CLOCK_MONOTONIC, &until);
  until.tv_nsec += ms * 1000000L;
  until.tv_sec += until.tv_nsec / 1000000000L;
  until.tv_nsec %= 1000000000L;
  while (!ring.stop && ring.flushed == ring.flush_asked &&
         ring.len <= ring.cap / 2 &&
         pthread_cond_timedwait(&ring.wake, &ring.lock, &until) == 0) {
  }
}

static void *writer_main(void *arg) {
  (void)arg;
  pthread_mutex_lock(&ring.lock);
  for (;;) {
    while (ring.len == 0 && ring.dropped_unsaid == 0 && !ring.stop &&
           ring.flushed == ring.flush_asked) {
      ring.idle = 1; /* the next line wakes it */
      pthread_cond_wait(&ring.wake, &ring.lock);
    }
    ring.idle = 0;
    gather(FLUSH_MS); /* a batch, not a write(2) per line */
    uint64_t asked = ring.flush_asked, dropped = ring.dropped_unsaid;
    char *batch = ring.fill;
    size_t n = ring.len;
    ring.fill = ring.spare;
    ring.spare = batch;
    ring.len = 0;
    ring.dropped_unsaid = 0;
    pthread_mutex_unlock(&ring.lock);
    write_all(batch, n);
    if (dropped > 0) say_dropped(dropped);
    pthread_mutex_lock(&ring.lock);
    ring.flushed = asked;
    pthread_cond_broadcast(&ring.written);
    if (ring.stop && ring.len == 0 && ring.dropped_unsaid == 0) break;
  }
  ring.running = 0; /* from here lines are written by their threads */
  pthread_mutex_unlock(&ring.lock);
  return NULL;
}

static void stop_at_exit(void) { log_stop(); }

int log_start(size_t buffer_bytes) {
  pthread_mutex_lock(&ring.lock);
  if (ring.running) {
    pthread_mutex_unlock(&ring.lock);
    return 0;
  }
  ring.fill = malloc(buffer_bytes);
  ring.spare = malloc(buffer_bytes);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* gather's waits */
  pthread_cond_init(&ring.wake, &ca);
  pthread_condattr_destroy(&ca);
  pthread_cond_init(&ring.written, NULL);
  ring.cap = buffer_bytes;
  ring.len = 0;
  ring.stop = ring.idle = 0;
  ring.running = ring.fill != NULL && ring.spare != NULL &&
                 pthread_create(&ring.thread, NULL, writer_main, NULL) == 0;
  int started = ring.running;
  if (!started) {
    free(ring.fill);
    free(ring.spare);
    ring.fill = ring.spare = NULL;
  }
  pthread_mutex_unlock(&ring.lock);
  static atomic_flag registered = ATOMIC_FLAG_INIT;
  if (started && !atomic_flag_test_and_set(&registered)) atexit(stop_at_exit);
  return started ? 0 : -1;
}

void log_flush(void) {
  pthread_mutex_lock(&ring.lock);
  if (ring.running) {
    uint64_t mine = ++ring.flush_asked;
    pthread_cond_signal(&ring.wake);
    while (ring.running && ring.flushed < mine)
      pthread_cond_wait(&ring.written, &ring.lock);
  }
  pthread_mutex_unlock(&ring.lock);
}

void log_stop(void) {
  pthread_mutex_lock(&ring.lock);
  if (!ring.running || ring.stop) { /* not started, or another stops it */
    pthread_mutex_unlock(&ring.lock);
    return;
  }
  ring.stop = 1;
  pthread_cond_signal(&ring.wake);
  pthread_mutex_unlock(&ring.lock);
  pthread_join(ring.thread, NULL);
  pthread_mutex_lock(&ring.lock);
  free(ring.fill);
  free(ring.spare);
  ring.fill = ring.spare = NULL;
  ring.cap = ring.len = 0;
  ring.stop = 0;
  pthread_cond_destroy(&ring.wake);
  pthread_cond_destroy(&ring.written);
  pthread_mutex_unlock(&ring.lock);
}

/* The line into the buffer, or straight to stderr when no writer runs. */
static void emit(line_t *l) {
  if (l->len + 1 < l->cap) l->buf[l->len++] = '\n';
  else l->buf[l->len - 1] = '\n'; /* cut: still one whole line */
  pthread_mutex_lock(&ring.lock);
  if (!ring.running) {
    pthread_mutex_unlock(&ring.lock);
    fwrite(l->buf, 1, l->len, stderr);
    return;
  }
  if (ring.len + l->len <= ring.cap) {
    int was_under_half = ring.len <= ring.cap / 2;
    memcpy(ring.fill + ring.len, l->buf, l->len);
    ring.len += l->len;
    /* a wake per batch, not per line: the writer waits for a first line,
     * or gathers until the buffer is half full */
    if (ring.idle || (was_under_half && ring.len > ring.cap / 2)) {
      ring.idle = 0;
      pthread_cond_signal(&ring.wake);
    }
  } else {
    ring.dropped_unsaid++;
    atomic_fetch_add(&dropped_total, 1);
  }
  pthread_mutex_unlock(&ring.lock);
}

enum { MSG_MAX = 1024 };

void log_msg(log_level_t level, const char *fmt, ...) {
  if (!log_enabled(level)) return;
  char msg[MSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  char buf[6 * MSG_MAX + 128]; /* every byte escaped as \u00XX, and the keys */
  line_t l = {buf, 0, sizeof buf};
  buf[0] = '\0';
  if (atomic_load_explicit(&format, memory_order_relaxed) == FORMAT_JSON) {
    put_json_head(&l, level);
    put_json_string(&l, "msg", msg);
    put(&l, "}");
  } else {
    put_timestamp(&l);
    put(&l, " ");
    put(&l, names[level]);
    put(&l, " ");
    put(&l, msg);
  }
  emit(&l);
}

/* What the fields of an access line may hold before escaping: the method
 * and path are cut by http.c to 16 and 128 bytes, the id to
 * REQUEST_ID_MAX, an address to INET6_ADDRSTRLEN, the user agent here to
 * UA_MAX, the note is short. Escaped, each byte takes at most 6 (JSON's
 * \u00XX); the keys and numbers fit in 512. */
enum {
  UA_MAX = 128,
  ACCESS_FIELDS_MAX = 16 + 128 + 129 + 64 + UA_MAX + 64,
  ACCESS_LINE_MAX = 6 * ACCESS_FIELDS_MAX + 512
};

void log_access(const log_access_t *a) {
  char buf[ACCESS_LINE_MAX], ua[UA_MAX + 1];
  /* a user agent can be kilobytes: its first UA_MAX bytes say who it is */
  size_t ua_len = strnlen(a->user_agent, UA_MAX);
  memcpy(ua, a->user_agent, ua_len);
  ua[ua_len] = '\0';
  line_t l = {buf, 0, sizeof buf};
  buf[0] = '\0';
  if (atomic_load_explicit(&format, memory_order_relaxed) == FORMAT_JSON) {
    put_json_head(&l, LOG_INFO);
    put(&l, ",\"msg\":\"request\"");
    put_json_string(&l, "method", a->method);
    put_json_string(&l, "path", a->path);
    put(&l, ",\"status\":");
    put_uint(&l, (uint64_t)a->status, 1);
    put(&l, ",\"bytes_in\":");
    put_uint(&l, a->bytes_in, 1);
    put(&l, ",\"bytes_out\":");
    put_uint(&l, a->bytes_out, 1);
    put(&l, ",\"duration_ms\":");
    put_ms(&l, a->duration_ms);
    put_json_string(&l, "request_id", a->request_id);
    put_json_string(&l, "remote", a->remote);
    put_json_string(&l, "user_agent", ua);
    if (a->note[0]) put_json_string(&l, "note", a->note);
    put(&l, "}");
  } else {
    /* every field escaped (log_escape), so spaces split them */
    char field[4 * 129];
    put_timestamp(&l);
    put(&l, " info ");
    put(&l, log_escape(field, sizeof field, a->method));
    put(&l, " ");
    put(&l, log_escape(field, sizeof field, a->path));
    put(&l, " ");
    put_uint(&l, (uint64_t)a->status, 1);
    put(&l, " in=");
    put_uint(&l, a->bytes_in, 1);
    put(&l, " out=");
    put_uint(&l, a->bytes_out, 1);
    put(&l, " ");
    put_ms(&l, a->duration_ms);
    put(&l, "ms id=");
    put(&l, log_escape(field, sizeof field, a->request_id));
    put(&l, " remote=");
    put(&l, a->remote[0] ? log_escape(field, sizeof field, a->remote) : "-");
    put(&l, " ua=\""); /* quoted: it has spaces; log_escape escapes '"' */
    put(&l, log_escape(field, sizeof field, ua));
    put(&l, "\"");
    if (a->note[0]) {
      put(&l, " (");
      put(&l, log_escape(field, sizeof field, a->note));
      put(&l, ")");
    }
  }
  emit(&l);
}
