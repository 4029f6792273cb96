/* request_id.c -- X-Request-Id: the client's id checked, or a new one made
 * from a per-process random seed and an atomic counter (no lock, no
 * syscall per request). */
#include "request_id.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

static uint64_t process_seed;
static pthread_once_t seed_once = PTHREAD_ONCE_INIT;
static atomic_uint_fast64_t counter;

/* The seed, from the kernel's random pool; should getrandom fail (a
 * kernel without it), the clock and the pid, which still differ across
 * replicas started at different nanoseconds or in different hosts. */
static void draw_seed(void) {
  uint64_t seed = 0;
  if (getrandom(&seed, sizeof seed, GRND_NONBLOCK) != (ssize_t)sizeof seed) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    seed = ((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) ^
           ((uint64_t)getpid() << 32);
  }
  process_seed = seed;
}

int request_id_valid(const char *s) {
  size_t n = 0;
  for (; s[n] != '\0'; n++)
    if (n == REQUEST_ID_MAX || (unsigned char)s[n] < 0x21 ||
        (unsigned char)s[n] > 0x7e)
      return 0;
  return n > 0;
}

static void put_hex64(char *out, uint64_t v) {
  static const char hex[] = "0123456789abcdef";
  for (int i = 15; i >= 0; i--, v >>= 4) out[i] = hex[v & 15];
}

void request_id_generate(char out[REQUEST_ID_MAX + 1]) {
  pthread_once(&seed_once, draw_seed);
  uint64_t n = atomic_fetch_add_explicit(&counter, 1, memory_order_relaxed);
  put_hex64(out, process_seed);
  put_hex64(out + 16, n);
  out[32] = '\0';
}

const char *request_id_instance(const char *id,
                                char out[REQUEST_ID_INSTANCE_MAX]) {
  static const char prefix[] = "urn:normd:request:";
  static const char raw[] = "-._~!$&'()*+,;=:@/";
  static const char hex[] = "0123456789ABCDEF";
  size_t o = sizeof prefix - 1;
  memcpy(out, prefix, o);
  for (const unsigned char *s = (const unsigned char *)id;
       *s && o + 4 <= REQUEST_ID_INSTANCE_MAX; s++) {
    if ((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'z') ||
        (*s >= 'A' && *s <= 'Z') || strchr(raw, *s) != NULL) {
      out[o++] = (char)*s;
    } else {
      out[o++] = '%';
      out[o++] = hex[*s >> 4];
      out[o++] = hex[*s & 15];
    }
  }
  out[o] = '\0';
  return out;
}

const char *request_id_take(const char *incoming,
                            char out[REQUEST_ID_MAX + 1]) {
  if (incoming != NULL && request_id_valid(incoming)) {
    memcpy(out, incoming, strlen(incoming) + 1);
    return out;
  }
  request_id_generate(out);
  return out;
}
