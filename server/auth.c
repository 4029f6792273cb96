/* auth.c -- API key digests and the constant-time check; see auth.h.
 * SHA-256 comes from GnuTLS, which libmicrohttpd already links for TLS. */
#include "auth.h"

#include <ctype.h>
#include <gnutls/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum { DIGEST = 32 };

struct auth {
  unsigned char (*digests)[DIGEST];
  size_t n, cap;
};

static int sha256(const char *s, size_t len, unsigned char out[DIGEST]) {
  return gnutls_hash_fast(GNUTLS_DIG_SHA256, s, len, out) == 0 ? 0 : -1;
}

static int add_digest(auth_t *a, const unsigned char d[DIGEST]) {
  if (a->n == a->cap) {
    size_t cap = a->cap ? a->cap * 2 : 8;
    void *p = realloc(a->digests, cap * DIGEST);
    if (p == NULL) return -1;
    a->digests = p;
    a->cap = cap;
  }
  memcpy(a->digests[a->n++], d, DIGEST);
  return 0;
}

static int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  c = (char)tolower((unsigned char)c);
  return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* One key entry: plain text (hashed here) or sha256:<hex>. */
static int add_entry(auth_t *a, const char *s, size_t len, const char *where,
                     char *err, size_t errlen) {
  while (len > 0 && isspace((unsigned char)*s)) s++, len--;
  while (len > 0 && isspace((unsigned char)s[len - 1])) len--;
  if (len == 0) return 0;
  unsigned char d[DIGEST];
  if (len > 7 && strncasecmp(s, "sha256:", 7) == 0) {
    if (len != 7 + 2 * DIGEST) {
      snprintf(err, errlen, "%s: a sha256: entry needs 64 hex digits", where);
      return -1;
    }
    for (int i = 0; i < DIGEST; i++) {
      int hi = hex_digit(s[7 + 2 * i]), lo = hex_digit(s[8 + 2 * i]);
      if (hi < 0 || lo < 0) {
        snprintf(err, errlen, "%s: a sha256: entry needs 64 hex digits", where);
        return -1;
      }
      d[i] = (unsigned char)(hi * 16 + lo);
    }
  } else {
    if (len < 16) {
      snprintf(err, errlen, "%s: API keys must be at least 16 characters", where);
      return -1;
    }
    if (sha256(s, len, d) != 0) {
      snprintf(err, errlen, "%s: cannot hash a key", where);
      return -1;
    }
  }
  if (add_digest(a, d) != 0) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  return 0;
}

auth_t *auth_create(const char *keys, const char *keys_file, char *err,
                    size_t errlen) {
  auth_t *a = calloc(1, sizeof *a);
  if (a == NULL) {
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  for (const char *p = keys ? keys : ""; *p;) {
    size_t len = strcspn(p, ",");
    if (add_entry(a, p, len, "api_keys", err, errlen) != 0) goto fail;
    p += len;
    if (*p == ',') p++;
  }
  if (keys_file && *keys_file) {
    FILE *f = fopen(keys_file, "r");
    if (f == NULL) {
      snprintf(err, errlen, "api_keys_file %s: cannot open", keys_file);
      goto fail;
    }
    char line[512];
    int ok = 1;
    while (ok && fgets(line, sizeof line, f)) {
      char *hash = strchr(line, '#');
      if (hash) *hash = '\0';
      ok = add_entry(a, line, strlen(line), keys_file, err, errlen) == 0;
    }
    fclose(f);
    if (!ok) goto fail;
  }
  return a;
fail:
  auth_free(a);
  return NULL;
}

void auth_free(auth_t *a) {
  if (a == NULL) return;
  free(a->digests);
  free(a);
}

int auth_enabled(const auth_t *a) { return a != NULL && a->n > 0; }

int auth_check(const auth_t *a, const char *authorization) {
  if (!auth_enabled(a)) return 1;
  if (authorization == NULL || strncasecmp(authorization, "Bearer ", 7) != 0)
    return 0;
  const char *key = authorization + 7;
  while (*key == ' ') key++;
  unsigned char d[DIGEST];
  if (sha256(key, strlen(key), d) != 0) return 0;
  /* compare against every digest, accumulating, so the time does not say
   * which (or whether one) matched */
  unsigned match = 0;
  for (size_t i = 0; i < a->n; i++) {
    unsigned diff = 0;
    for (int k = 0; k < DIGEST; k++) diff |= (unsigned)(a->digests[i][k] ^ d[k]);
    match |= (unsigned)(diff == 0);
  }
  return match != 0;
}
