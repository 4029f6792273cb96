/* check_log.c -- log_escape: what a client puts in a method or path cannot
 * break or forge an access-log line (controls, DEL, quotes, backslashes and
 * ill-formed UTF-8 become \xHH; well-formed UTF-8 passes), and it never
 * writes past its buffer. */
#include <check.h>
#include <string.h>

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

Suite *log_suite(void) {
  Suite *s = suite_create("log");
  TCase *tc = tcase_create("Escape");
  tcase_add_test(tc, test_plain_text_passes);
  tcase_add_test(tc, test_controls_and_quotes);
  tcase_add_test(tc, test_utf8);
  tcase_add_test(tc, test_cut_at_a_whole_escape);
  suite_add_tcase(s, tc);
  return s;
}
