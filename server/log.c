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

char *log_escape(char *dst, size_t cap, const char *src) {
  static const char hex[] = "0123456789abcdef";
  const unsigned char *s = (const unsigned char *)src;
  size_t o = 0;
  while (*s) {
    size_t n = 1;
    int plain = *s >= 0x20 && *s < 0x7f && *s != '"' && *s != '\\';
    if (*s >= 0x80 && (n = utf8_len(s)) != 0) plain = 1;
    else if (*s >= 0x80) n = 1;
    size_t need = plain ? n : 4;
    if (o + need >= cap) break;
    if (plain) {
      memcpy(dst + o, s, n);
    } else {
      dst[o] = '\\';
      dst[o + 1] = 'x';
      dst[o + 2] = hex[*s >> 4];
      dst[o + 3] = hex[*s & 15];
    }
    o += need;
    s += n;
  }
  dst[o] = '\0';
  return dst;
}
