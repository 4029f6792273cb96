/* check_log.c -- log_escape and log_json_escape: what a client puts in a
 * method, path, user agent or request id cannot break or forge a log line
 * in either format (controls, DEL, C1, U+2028/9, quotes, backslashes and
 * ill-formed UTF-8 are escaped; other UTF-8 passes), and neither writes
 * past its buffer; log_access's lines in both formats, a JSON one parsed
 * back with jansson; the writer thread (log_start): every line out by
 * log_stop, from several threads, in both formats, and a full buffer
 * drops lines without waiting, counts them and says so. */
#include <check.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

static const char *esc(const char *src) {
  static char out[256];
  return log_escape(out, sizeof out, src);
}

START_TEST(test_plain_text_passes) {
  ck_assert_str_eq(esc("/v1/norm/layer?x=1&y=%20"), "/v1/norm/layer?x=1&y=%20");
  ck_assert_str_eq(esc(""), "");
}
END_TEST

START_TEST(test_controls_and_quotes) {
  /* GET /a%0a%1b[31mred, as MHD hands it over once decoded */
  ck_assert_str_eq(esc("/a\n\x1b[31mred"), "/a\\x0a\\x1b[31mred");
  ck_assert_str_eq(esc("\r\t\x7f\"\\"), "\\x0d\\x09\\x7f\\x22\\x5c");
  ck_assert_str_eq(esc("\x01 \x1f"), "\\x01 \\x1f");
}
END_TEST

START_TEST(test_utf8) {
  /* well-formed: 2, 3 and 4 bytes */
  ck_assert_str_eq(esc("/caf\xc3\xa9/\xe2\x82\xac/\xf0\x9f\x98\x80"),
                   "/caf\xc3\xa9/\xe2\x82\xac/\xf0\x9f\x98\x80");
  /* ill-formed: a lone continuation, an overlong '/', a surrogate, past
   * U+10FFFF, a truncated sequence at the end, 0xff */
  ck_assert_str_eq(esc("\x80"), "\\x80");
  ck_assert_str_eq(esc("\xc0\xaf"), "\\xc0\\xaf");
  ck_assert_str_eq(esc("\xed\xa0\x80"), "\\xed\\xa0\\x80");
  ck_assert_str_eq(esc("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");
  ck_assert_str_eq(esc("a\xe2\x82"), "a\\xe2\\x82");
  ck_assert_str_eq(esc("\xff/"), "\\xff/");
}
END_TEST

START_TEST(test_cut_at_a_whole_escape) {
  char out[8];
  memset(out, 'z', sizeof out);
  /* "ab" + \x0a (4) = 6 fits with the NUL; the next escape does not */
  ck_assert_str_eq(log_escape(out, sizeof out, "ab\n\ncd"), "ab\\x0a");
  ck_assert_str_eq(log_escape(out, sizeof out, "abcdefghij"), "abcdefg");
  /* a 4-byte character that does not fit is left out whole */
  ck_assert_str_eq(log_escape(out, sizeof out, "abcd\xf0\x9f\x98\x80"), "abcd");
  ck_assert_str_eq(log_escape(out, 1, "abc"), "");
}
END_TEST

START_TEST(test_line_ends_and_c1) {
  /* NEL (U+0085), CSI (U+009B), U+2028, U+2029: escaped byte by byte;
   * U+00A0 and U+2027 either side of them pass */
  ck_assert_str_eq(esc("a\xc2\x85" "b\xc2\x9b"), "a\\xc2\\x85b\\xc2\\x9b");
  ck_assert_str_eq(esc("\xe2\x80\xa8\xe2\x80\xa9"),
                   "\\xe2\\x80\\xa8\\xe2\\x80\\xa9");
  ck_assert_str_eq(esc("\xc2\xa0\xe2\x80\xa7"), "\xc2\xa0\xe2\x80\xa7");
}
END_TEST

static const char *jesc(const char *src) {
  static char out[256];
  log_json_escape(out, sizeof out, src);
  return out;
}

START_TEST(test_json_plain_and_short_escapes) {
  ck_assert_str_eq(jesc("/v1/norm/layer?x=1"), "/v1/norm/layer?x=1");
  ck_assert_str_eq(jesc(""), "");
  ck_assert_str_eq(jesc("a\"b\\c"), "a\\\"b\\\\c");
  ck_assert_str_eq(jesc("\n\r\t"), "\\n\\r\\t");
  ck_assert_str_eq(jesc("\x01\x1b[31m\x1f\x7f"),
                   "\\u0001\\u001b[31m\\u001f\\u007f");
  /* '/' needs no escape in JSON */
  ck_assert_str_eq(jesc("</script>"), "</script>");
}
END_TEST

START_TEST(test_json_utf8) {
  /* well-formed passes */
  ck_assert_str_eq(jesc("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"),
                   "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
  /* C1 and the line separators as their code points */
  ck_assert_str_eq(jesc("\xc2\x85\xc2\x9b\xe2\x80\xa8\xe2\x80\xa9"),
                   "\\u0085\\u009b\\u2028\\u2029");
  /* ill-formed: each byte as \u00XX of its value */
  ck_assert_str_eq(jesc("\xff"), "\\u00ff");
  ck_assert_str_eq(jesc("\xc0\xaf"), "\\u00c0\\u00af");
  ck_assert_str_eq(jesc("\xed\xa0\x80"), "\\u00ed\\u00a0\\u0080");
  ck_assert_str_eq(jesc("a\xe2\x82"), "a\\u00e2\\u0082");
  /* what comes out is itself a JSON string jansson reads back */
  char doc[300];
  snprintf(doc, sizeof doc, "[\"%s\"]", jesc("\x01\"\\\xff\xc2\x85\n"));
  json_error_t e;
  json_t *j = json_loads(doc, 0, &e);
  ck_assert_msg(j != NULL, "%s: %s", doc, e.text);
  ck_assert_str_eq(json_string_value(json_array_get(j, 0)),
                   "\x01\"\\\xc3\xbf\xc2\x85\n");
  json_decref(j);
}
END_TEST

START_TEST(test_json_cut_at_a_whole_escape) {
  char out[8];
  /* "ab" + \u0001 (6) = 8 does not fit with the NUL: left out whole */
  ck_assert_uint_eq(log_json_escape(out, sizeof out, "ab\x01"), 2);
  ck_assert_str_eq(out, "ab");
  ck_assert_uint_eq(log_json_escape(out, sizeof out, "a\x01"), 7);
  ck_assert_str_eq(out, "a\\u0001");
  ck_assert_uint_eq(log_json_escape(out, sizeof out, "abcd\xf0\x9f\x98\x80"), 4);
  ck_assert_uint_eq(log_json_escape(out, 1, "abc"), 0);
  ck_assert_str_eq(out, "");
}
END_TEST

/* What log_access writes, caught from stderr (Check runs each test in a
 * child, and stderr is put back anyway). */
static char *access_line(const char *format, const log_access_t *a) {
  static char line[8192];
  ck_assert_int_eq(log_set_format(format), 0);
  FILE *tmp = tmpfile();
  ck_assert_ptr_nonnull(tmp);
  int saved = dup(STDERR_FILENO);
  dup2(fileno(tmp), STDERR_FILENO);
  log_access(a);
  fflush(stderr);
  dup2(saved, STDERR_FILENO);
  close(saved);
  rewind(tmp);
  size_t n = fread(line, 1, sizeof line - 1, tmp);
  line[n] = '\0';
  fclose(tmp);
  log_set_format("text");
  return line;
}

static const log_access_t hostile = {
    .method = "GET",
    .path = "/a\r\n{\"forged\":1}\xff",
    .status = 404,
    .bytes_in = 0,
    .bytes_out = 120,
    .duration_ms = 0.25,
    .request_id = "id\"\\x",
    .remote = "::1",
    .user_agent = "ua\x01\"",
    .note = ""};

START_TEST(test_access_json) {
  char *line = access_line("json", &hostile);
  size_t n = strlen(line);
  ck_assert_msg(n > 0 && line[n - 1] == '\n' && strchr(line, '\n') == line + n - 1,
                "not one line: %s", line);
  json_error_t e;
  json_t *j = json_loads(line, 0, &e);
  ck_assert_msg(j != NULL, "%s: %s", line, e.text);
  ck_assert_str_eq(json_string_value(json_object_get(j, "msg")), "request");
  ck_assert_str_eq(json_string_value(json_object_get(j, "level")), "info");
  ck_assert_str_eq(json_string_value(json_object_get(j, "path")),
                   "/a\r\n{\"forged\":1}\xc3\xbf");
  ck_assert_str_eq(json_string_value(json_object_get(j, "request_id")), "id\"\\x");
  ck_assert_str_eq(json_string_value(json_object_get(j, "user_agent")), "ua\x01\"");
  ck_assert_str_eq(json_string_value(json_object_get(j, "remote")), "::1");
  ck_assert_int_eq(json_integer_value(json_object_get(j, "status")), 404);
  ck_assert_int_eq(json_integer_value(json_object_get(j, "bytes_out")), 120);
  ck_assert(json_real_value(json_object_get(j, "duration_ms")) == 0.25);
  ck_assert_ptr_null(json_object_get(j, "note"));
  ck_assert_ptr_null(json_object_get(j, "forged"));
  json_decref(j);
}
END_TEST

START_TEST(test_access_text) {
  log_access_t a = hostile;
  a.note = "aborted";
  char *line = access_line("text", &a);
  /* the timestamp (24) and the rest */
  ck_assert_str_eq(line + 24,
                   " info GET /a\\x0d\\x0a{\\x22forged\\x22:1}\\xff 404 in=0 "
                   "out=120 0.250ms id=id\\x22\\x5cx remote=::1 "
                   "ua=\"ua\\x01\\x22\" (aborted)\n");
}
END_TEST

START_TEST(test_access_longest_fields_stay_whole) {
  /* every field at its longest, every byte escaped: still one whole,
   * parseable line */
  char path[128], id[129], ua[4096];
  memset(path, 0x01, sizeof path - 1);
  path[sizeof path - 1] = '\0';
  memset(id, '"', sizeof id - 1);
  id[sizeof id - 1] = '\0';
  memset(ua, 0xff, sizeof ua - 1);
  ua[sizeof ua - 1] = '\0';
  log_access_t a = {.method = "\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01",
                    .path = path, .status = 499, .duration_ms = 1e9,
                    .bytes_in = INT64_MAX, .bytes_out = INT64_MAX,
                    .request_id = id,
                    .remote = "ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255",
                    .user_agent = ua, .note = "closed: connection_timeout_s"};
  char *line = access_line("json", &a);
  json_error_t e;
  json_t *j = json_loads(line, 0, &e);
  ck_assert_msg(j != NULL, "%s", e.text);
  ck_assert_uint_eq(strlen(json_string_value(json_object_get(j, "path"))), 127);
  ck_assert_uint_eq(strlen(json_string_value(json_object_get(j, "request_id"))), 128);
  /* the user agent is cut to its first 128 bytes, each U+00FF (2 bytes) */
  ck_assert_uint_eq(strlen(json_string_value(json_object_get(j, "user_agent"))), 256);
  ck_assert_str_eq(json_string_value(json_object_get(j, "note")),
                   "closed: connection_timeout_s");
  json_decref(j);
  line = access_line("text", &a);
  ck_assert_ptr_nonnull(strstr(line, "(closed: connection_timeout_s)\n"));
  ck_assert_ptr_eq(strchr(line, '\n'), line + strlen(line) - 1);
}
END_TEST

/* ---- the writer thread ---- */

static const log_access_t plain = {.method = "POST",
                                   .path = "/v1/norm/layer",
                                   .status = 200,
                                   .bytes_in = 7255,
                                   .bytes_out = 7000,
                                   .duration_ms = 0.125,
                                   .request_id = "0123456789abcdef",
                                   .remote = "127.0.0.1",
                                   .user_agent = "wrk",
                                   .note = ""};

/* 1000 lines of at most ~300 bytes: they fit in one buffer, so none is
 * dropped however late the writer runs */
enum { THREADS = 4, LINES_PER_THREAD = 250 };
_Static_assert(THREADS * LINES_PER_THREAD * 300 < LOG_BUFFER_BYTES,
               "the lines must fit in one buffer");

static void *log_lines(void *arg) {
  (void)arg;
  for (int i = 0; i < LINES_PER_THREAD; i++) log_access(&plain);
  return NULL;
}

/* What THREADS threads log through the writer, all of it caught from
 * stderr after log_stop; a malloc'd string. */
static char *buffered_output(const char *format) {
  ck_assert_int_eq(log_set_format(format), 0);
  FILE *tmp = tmpfile();
  ck_assert_ptr_nonnull(tmp);
  int saved = dup(STDERR_FILENO);
  dup2(fileno(tmp), STDERR_FILENO);
  ck_assert_int_eq(log_start(LOG_BUFFER_BYTES), 0);
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; i++)
    ck_assert_int_eq(pthread_create(&t[i], NULL, log_lines, NULL), 0);
  for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
  log_stop();
  dup2(saved, STDERR_FILENO);
  close(saved);
  long n = ftell(tmp);
  ck_assert_int_gt(n, 0);
  char *out = malloc((size_t)n + 1);
  rewind(tmp);
  ck_assert_uint_eq(fread(out, 1, (size_t)n, tmp), (size_t)n);
  out[n] = '\0';
  fclose(tmp);
  log_set_format("text");
  return out;
}

START_TEST(test_buffered_text_every_line_out) {
  uint64_t dropped = log_lines_dropped();
  char *out = buffered_output("text");
  int lines = 0;
  for (char *l = out, *end; *l; l = end + 1, lines++) {
    end = strchr(l, '\n');
    ck_assert_ptr_nonnull(end);
    *end = '\0';
    ck_assert_str_eq(l + 24, " info POST /v1/norm/layer 200 in=7255 out=7000 "
                             "0.125ms id=0123456789abcdef remote=127.0.0.1 "
                             "ua=\"wrk\"");
  }
  ck_assert_int_eq(lines, THREADS * LINES_PER_THREAD);
  ck_assert_uint_eq(log_lines_dropped(), dropped);
  free(out);
}
END_TEST

START_TEST(test_buffered_json_every_line_out) {
  char *out = buffered_output("json");
  int lines = 0;
  for (char *l = out, *end; *l; l = end + 1, lines++) {
    end = strchr(l, '\n');
    ck_assert_ptr_nonnull(end);
    *end = '\0';
    json_error_t e;
    json_t *j = json_loads(l, 0, &e);
    ck_assert_msg(j != NULL, "%s: %s", l, e.text);
    ck_assert_msg(json_integer_value(json_object_get(j, "status")) == 200, "%s", l);
    ck_assert_str_eq(json_string_value(json_object_get(j, "path")),
                     "/v1/norm/layer");
    json_decref(j);
  }
  ck_assert_int_eq(lines, THREADS * LINES_PER_THREAD);
  free(out);
}
END_TEST

/* Reads the pipe until it is closed; the count of bytes read. */
typedef struct {
  int fd;
  char *text;
  size_t len, cap;
} drain_t;

static void *drain_pipe(void *arg) {
  drain_t *d = arg;
  for (;;) {
    if (d->len + 65536 > d->cap) {
      d->cap = 2 * d->cap + 65536;
      d->text = realloc(d->text, d->cap + 1);
    }
    ssize_t n = read(d->fd, d->text + d->len, 65536);
    if (n <= 0) break;
    d->len += (size_t)n;
  }
  d->text[d->len] = '\0';
  return NULL;
}

/* stderr is a pipe filled to the brim that nobody reads: the writer
 * blocks on its first write, so the 4 KiB buffer fills and the rest of
 * the lines are dropped -- at once, the logging thread never waits. Once
 * the pipe is read, log_stop writes what was kept and a warn line with
 * the number dropped: kept + dropped = logged. */
START_TEST(test_full_buffer_drops_counts_and_says_so) {
  int p[2];
  ck_assert_int_eq(pipe(p), 0);
  fcntl(p[1], F_SETFL, O_NONBLOCK);
  static const char junk[4096];
  size_t prefill = 0;
  for (ssize_t n; (n = write(p[1], junk, sizeof junk)) > 0;) prefill += (size_t)n;
  for (ssize_t n; (n = write(p[1], junk, 1)) > 0;) prefill += (size_t)n;
  fcntl(p[1], F_SETFL, 0);
  int saved = dup(STDERR_FILENO);
  dup2(p[1], STDERR_FILENO);
  close(p[1]);
  uint64_t before = log_lines_dropped();
  ck_assert_int_eq(log_start(4096), 0);
  enum { LOGGED = 2000 };
  for (int i = 0; i < LOGGED; i++) log_access(&plain);
  uint64_t dropped = log_lines_dropped() - before;
  drain_t d = {.fd = p[0]};
  pthread_t reader;
  ck_assert_int_eq(pthread_create(&reader, NULL, drain_pipe, &d), 0);
  log_stop();
  dup2(saved, STDERR_FILENO); /* closes the pipe's last write end */
  close(saved);
  pthread_join(reader, NULL);
  close(p[0]);
  /* at most two buffers (the one being written, the one filling) kept */
  ck_assert_uint_ge(dropped, LOGGED - 2 * 4096 / 100);
  ck_assert_uint_ge(d.len, prefill);
  int kept = 0;
  unsigned long long said = 0;
  for (char *l = d.text + prefill, *end; *l; l = end + 1) {
    end = strchr(l, '\n');
    ck_assert_ptr_nonnull(end);
    *end = '\0';
    const char *drop = strstr(l, " warn log buffer full");
    if (drop != NULL) {
      unsigned long long n = 0;
      ck_assert_int_eq(sscanf(strstr(drop, "): ") + 3, "%llu", &n), 1);
      said += n;
    } else {
      ck_assert_ptr_nonnull(strstr(l, " info POST /v1/norm/layer 200 "));
      kept++;
    }
  }
  ck_assert_uint_eq(said, dropped);
  ck_assert_uint_eq((uint64_t)kept + dropped, LOGGED);
  free(d.text);
}
END_TEST

START_TEST(test_flush_and_stop_without_a_writer) {
  log_flush(); /* no writer: return at once */
  log_stop();
  log_stop();
  ck_assert_str_eq(access_line("text", &plain) + 24,
                   " info POST /v1/norm/layer 200 in=7255 out=7000 0.125ms "
                   "id=0123456789abcdef remote=127.0.0.1 ua=\"wrk\"\n");
}
END_TEST

START_TEST(test_format_names) {
  ck_assert_int_eq(log_set_format("json"), 0);
  ck_assert_int_eq(log_set_format("text"), 0);
  ck_assert_int_eq(log_set_format("JSON"), -1);
  ck_assert_int_eq(log_set_format(""), -1);
}
END_TEST

Suite *log_suite(void) {
  Suite *s = suite_create("log");
  TCase *tc = tcase_create("Escape");
  tcase_add_test(tc, test_plain_text_passes);
  tcase_add_test(tc, test_controls_and_quotes);
  tcase_add_test(tc, test_utf8);
  tcase_add_test(tc, test_cut_at_a_whole_escape);
  tcase_add_test(tc, test_line_ends_and_c1);
  suite_add_tcase(s, tc);
  tc = tcase_create("Json");
  tcase_add_test(tc, test_json_plain_and_short_escapes);
  tcase_add_test(tc, test_json_utf8);
  tcase_add_test(tc, test_json_cut_at_a_whole_escape);
  suite_add_tcase(s, tc);
  tc = tcase_create("Access");
  tcase_add_test(tc, test_access_json);
  tcase_add_test(tc, test_access_text);
  tcase_add_test(tc, test_access_longest_fields_stay_whole);
  tcase_add_test(tc, test_format_names);
  suite_add_tcase(s, tc);
  tc = tcase_create("Buffered");
  tcase_add_test(tc, test_buffered_text_every_line_out);
  tcase_add_test(tc, test_buffered_json_every_line_out);
  tcase_add_test(tc, test_full_buffer_drops_counts_and_says_so);
  tcase_add_test(tc, test_flush_and_stop_without_a_writer);
  suite_add_tcase(s, tc);
  return s;
}
