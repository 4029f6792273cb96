/* check_blocks.c -- server/blocks.c: blocks hold what was asked and keep
 * malloc's alignment, calloc zeroes a reused block, realloc keeps the
 * bytes (in place while the class holds them), a freed block of a class
 * is what the thread gets back next, at most BLOCKS_KEEP of a class are
 * kept, larger and smaller blocks are plain malloc, and a thread's kept
 * blocks go back when it ends (malloc's count of bytes in use says so;
 * under ASan, its leak check). */
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "blocks.h"
#include "testutil.h"

static int all_bytes(const unsigned char *p, size_t n, unsigned char v) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != v) return 0;
  return 1;
}

START_TEST(test_sizes_and_alignment) {
  const size_t sizes[] = {0, 1, 1024, 1025, 2048, 2049, 7319, 8192,
                          BLOCKS_MAX - 1, BLOCKS_MAX, BLOCKS_MAX + 1, 1 << 20};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    unsigned char *p = blocks_alloc(sizes[i]);
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_eq((uintptr_t)p % 16, 0);
    memset(p, 0xA5, sizes[i]); /* all of it is ours (ASan would say) */
    blocks_free(p);
  }
  blocks_free(NULL);
}
END_TEST

START_TEST(test_reuse_and_calloc) {
  unsigned char *a = blocks_alloc(3000);
  memset(a, 0xFF, 3000);
  blocks_free(a);
  /* the same class (4 KiB) on this thread: the block just freed */
  unsigned char *b = blocks_alloc(4000);
  ck_assert_ptr_eq(a, b);
  blocks_free(b);
  unsigned char *c = blocks_calloc(3500);
  ck_assert_ptr_eq(a, c);
  ck_assert(all_bytes(c, 3500, 0));
  blocks_free(c);
}
END_TEST

START_TEST(test_keep_at_most) {
  /* the class's kept blocks taken first, so that it starts empty */
  void *held[BLOCKS_KEEP], *p[BLOCKS_KEEP + 2];
  for (int i = 0; i < BLOCKS_KEEP; i++) held[i] = blocks_alloc(5000);
  for (int i = 0; i < BLOCKS_KEEP + 2; i++) p[i] = blocks_alloc(5000);
  for (int i = 0; i < BLOCKS_KEEP + 2; i++) blocks_free(p[i]);
  /* the first BLOCKS_KEEP freed are kept (the others went to malloc) and
   * come back newest first */
  for (int i = BLOCKS_KEEP - 1; i >= 0; i--) ck_assert_ptr_eq(blocks_alloc(5000), p[i]);
  for (int i = 0; i < BLOCKS_KEEP; i++) blocks_free(p[i]);
  for (int i = 0; i < BLOCKS_KEEP; i++) blocks_free(held[i]);
}
END_TEST

START_TEST(test_realloc_keeps_bytes) {
  unsigned char *p = blocks_realloc(NULL, 1500);
  ck_assert_ptr_nonnull(p);
  memset(p, 7, 1500);
  unsigned char *q = blocks_realloc(p, 2048); /* its class holds 2048 */
  ck_assert_ptr_eq(p, q);
  q = blocks_realloc(q, 50000); /* another class: moved */
  ck_assert(all_bytes(q, 1500, 7));
  memset(q, 9, 50000);
  q = blocks_realloc(q, 3 * BLOCKS_MAX); /* past the classes */
  ck_assert(all_bytes(q, 50000, 9));
  memset(q, 3, 3 * BLOCKS_MAX);
  q = blocks_realloc(q, 10 * BLOCKS_MAX); /* plain realloc between those */
  ck_assert(all_bytes(q, 3 * BLOCKS_MAX, 3));
  ck_assert_ptr_eq(blocks_realloc(q, 100), q); /* shrinking moves nothing */
  blocks_free(q);
}
END_TEST

static void *fill_and_leave(void *arg) {
  (void)arg;
  void *p[3] = {blocks_alloc(2000), blocks_alloc(9000), blocks_alloc(60000)};
  for (int i = 0; i < 3; i++) blocks_free(p[i]); /* kept, until the exit */
  return NULL;
}

/* The bytes malloc has handed out (0 where a sanitizer replaces malloc:
 * then ASan's leak check at exit is the test). */
static size_t in_use(void) { return mallinfo2().uordblks; }

START_TEST(test_thread_exit_releases) {
  /* 8 threads end with about 70 KiB kept each: back to malloc by then */
  size_t before = in_use();
  for (int t = 0; t < 8; t++) {
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, fill_and_leave, NULL), 0);
    ck_assert_int_eq(pthread_join(th, NULL), 0);
  }
  size_t after = in_use();
  ck_assert_msg(after < before + 64 * 1024, "%zu bytes more in use after the threads ended",
                after - before);
}
END_TEST

Suite *blocks_suite(void) {
  Suite *s = suite_create("blocks");
  TCase *tc = tcase_create("blocks");
  tcase_add_test(tc, test_sizes_and_alignment);
  tcase_add_test(tc, test_reuse_and_calloc);
  tcase_add_test(tc, test_keep_at_most);
  tcase_add_test(tc, test_realloc_keeps_bytes);
  tcase_add_test(tc, test_thread_exit_releases);
  suite_add_tcase(s, tc);
  return s;
}
