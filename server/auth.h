/* auth.h -- API keys: the set of accepted keys, kept only as SHA-256
 * digests, and the check of an Authorization header against them in
 * constant time. Keys come from the api_keys setting (comma-separated) and
 * the api_keys_file (one key per line, or "sha256:<64 hex digits>" for a
 * key stored hashed; '#' starts a comment). Never logged. */
#ifndef NORMD_AUTH_H
#define NORMD_AUTH_H

#include <stddef.h>

typedef struct auth auth_t;

/* Builds the key set; NULL with a one-line reason in err on a bad file or
 * entry. An empty set (no keys configured) means authentication is off:
 * auth_enabled() is 0. */
auth_t *auth_create(const char *keys, const char *keys_file, char *err,
                    size_t errlen);
void auth_free(auth_t *a);
int auth_enabled(const auth_t *a);

/* Whether an Authorization header value ("Bearer <key>", scheme
 * case-insensitive) carries an accepted key. Every configured digest is
 * compared, in constant time, whatever matches. Thread-safe. */
int auth_check(const auth_t *a, const char *authorization);

#endif
