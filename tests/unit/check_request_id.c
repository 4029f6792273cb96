/* check_request_id.c -- X-Request-Id (server/request_id.h): which client
 * ids are kept (1-128 visible ASCII characters) and which are replaced,
 * the generated form (32 hex digits: the process's seed, then a counter)
 * and its uniqueness across threads, and a problem's `instance` URN with
 * its percent-encoding; problem_reply writing it. */
#include <check.h>
#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "problem.h"
#include "request_id.h"
#include "suites.h"

static int is_generated(const char *id) {
  if (strlen(id) != 32) return 0;
  for (const char *p = id; *p; p++)
    if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'))) return 0;
  return 1;
}

START_TEST(test_valid) {
  ck_assert(request_id_valid("a"));
  ck_assert(request_id_valid("f47ac10b-58cc-4372-a567-0e02b2c3d479"));
  ck_assert(request_id_valid("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"));
  char max[REQUEST_ID_MAX + 2];
  memset(max, 'x', REQUEST_ID_MAX);
  max[REQUEST_ID_MAX] = '\0';
  ck_assert(request_id_valid(max));
  max[REQUEST_ID_MAX] = 'x'; /* 129 */
  max[REQUEST_ID_MAX + 1] = '\0';
  ck_assert(!request_id_valid(max));
}
END_TEST

START_TEST(test_invalid) {
  ck_assert(!request_id_valid(""));
  ck_assert(!request_id_valid("a b"));
  ck_assert(!request_id_valid("a\tb"));
  ck_assert(!request_id_valid("a\r\nX-Evil: 1"));
  ck_assert(!request_id_valid("\x01"));
  ck_assert(!request_id_valid("a\x7f"));
  ck_assert(!request_id_valid("caf\xc3\xa9"));
  ck_assert(!request_id_valid("\xff"));
}
END_TEST

START_TEST(test_take) {
  char out[REQUEST_ID_MAX + 1];
  ck_assert_str_eq(request_id_take("abc-123", out), "abc-123");
  ck_assert(is_generated(request_id_take(NULL, out)));
  ck_assert(is_generated(request_id_take("", out)));
  ck_assert(is_generated(request_id_take("has space", out)));
  char long_id[200];
  memset(long_id, 'z', sizeof long_id - 1);
  long_id[sizeof long_id - 1] = '\0';
  ck_assert(is_generated(request_id_take(long_id, out)));
}
END_TEST

START_TEST(test_generated_form) {
  char a[REQUEST_ID_MAX + 1], b[REQUEST_ID_MAX + 1];
  request_id_generate(a);
  request_id_generate(b);
  ck_assert(is_generated(a) && is_generated(b));
  ck_assert_str_ne(a, b);
  /* one process: the same seed half, the counter half one apart */
  ck_assert(strncmp(a, b, 16) == 0);
  ck_assert_uint_eq(strtoull(b + 16, NULL, 16), strtoull(a + 16, NULL, 16) + 1);
}
END_TEST

enum { THREADS = 4, PER_THREAD = 2000 };
static char ids[THREADS * PER_THREAD][REQUEST_ID_MAX + 1];

static void *generate_many(void *arg) {
  int t = (int)(intptr_t)arg;
  for (int i = 0; i < PER_THREAD; i++)
    request_id_generate(ids[t * PER_THREAD + i]);
  return NULL;
}

static int by_string(const void *x, const void *y) { return strcmp(x, y); }

START_TEST(test_unique_across_threads) {
  pthread_t th[THREADS];
  for (int t = 0; t < THREADS; t++)
    ck_assert_int_eq(
        pthread_create(&th[t], NULL, generate_many, (void *)(intptr_t)t), 0);
  for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
  qsort(ids, THREADS * PER_THREAD, sizeof ids[0], by_string);
  for (int i = 1; i < THREADS * PER_THREAD; i++)
    ck_assert_str_ne(ids[i - 1], ids[i]);
}
END_TEST

START_TEST(test_instance) {
  char out[REQUEST_ID_INSTANCE_MAX];
  ck_assert_str_eq(request_id_instance("abc-1.2_3~x:y@z/w", out),
                   "urn:normd:request:abc-1.2_3~x:y@z/w");
  ck_assert_str_eq(request_id_instance("!$&'()*+,;=", out),
                   "urn:normd:request:!$&'()*+,;=");
  ck_assert_str_eq(request_id_instance("a\"b%c#d?e\\f<>[]{}|^`", out),
                   "urn:normd:request:a%22b%25c%23d%3Fe%5Cf%3C%3E%5B%5D%7B%7D"
                   "%7C%5E%60");
  /* the longest id, every character encoded, fits */
  char id[REQUEST_ID_MAX + 1];
  memset(id, '%', REQUEST_ID_MAX);
  id[REQUEST_ID_MAX] = '\0';
  request_id_instance(id, out);
  ck_assert_uint_eq(strlen(out),
                    strlen("urn:normd:request:") + 3 * REQUEST_ID_MAX);
}
END_TEST

START_TEST(test_problem_instance) {
  problem_t p;
  memset(&p, 0, sizeof p);
  problem_set(&p, PROBLEM_NOT_FOUND, NULL, "%s", "no route");
  reply_t r;
  memset(&r, 0, sizeof r);
  problem_reply(&p, &r); /* no id: no instance */
  json_t *j = json_loadb(r.body, r.len, 0, NULL);
  ck_assert_ptr_null(json_object_get(j, "instance"));
  json_decref(j);
  p.request_id = "req-42";
  problem_reply(&p, &r);
  j = json_loadb(r.body, r.len, 0, NULL);
  ck_assert_str_eq(json_string_value(json_object_get(j, "instance")),
                   "urn:normd:request:req-42");
  json_decref(j);
  problem_reply_kserve(&p, &r); /* /v2 keeps {"error"} alone */
  j = json_loadb(r.body, r.len, 0, NULL);
  ck_assert_uint_eq(json_object_size(j), 1);
  ck_assert_ptr_nonnull(json_object_get(j, "error"));
  json_decref(j);
  reply_free(&r);
}
END_TEST

Suite *request_id_suite(void) {
  Suite *s = suite_create("request_id");
  TCase *tc = tcase_create("Core");
  tcase_add_test(tc, test_valid);
  tcase_add_test(tc, test_invalid);
  tcase_add_test(tc, test_take);
  tcase_add_test(tc, test_generated_form);
  tcase_add_test(tc, test_unique_across_threads);
  suite_add_tcase(s, tc);
  tc = tcase_create("Instance");
  tcase_add_test(tc, test_instance);
  tcase_add_test(tc, test_problem_instance);
  suite_add_tcase(s, tc);
  return s;
}
