/* request_id.h -- the id every answer carries in X-Request-Id: the
 * client's own when it is a safe token, else one normd makes. It is
 * echoed in the header, written in the access log and given in problem
 * documents as `instance` (urn:normd:request:<id>). */
#ifndef NORMD_REQUEST_ID_H
#define NORMD_REQUEST_ID_H

#include <stddef.h>

/* The longest id taken from a client, in bytes (characters). */
enum { REQUEST_ID_MAX = 128 };

/* Whether s (NUL-terminated) is an id normd echoes as it is: 1 to
 * REQUEST_ID_MAX visible ASCII characters (0x21-0x7e; no space, control
 * or non-ASCII byte), so it can go into a header, a log line and a URN
 * without changing meaning. */
int request_id_valid(const char *s);

/* Writes a new id into out: 32 lowercase hex digits, the process's random
 * 64-bit seed (getrandom, drawn once) then a 64-bit counter, so ids are
 * unique within a daemon and, with overwhelming probability, across
 * replicas. Thread-safe and lock-free (one atomic add). */
void request_id_generate(char out[REQUEST_ID_MAX + 1]);

/* A problem document's `instance` for id (request_id_valid) into out:
 * urn:normd:request:<id>, with the characters a URN's name may not hold
 * raw (RFC 8141 section 2 and RFC 3986's pchar: all but letters, digits,
 * -._~ !$&'()*+,;= :@ and /) percent-encoded, so an id of letters, digits
 * and -._: appears unchanged. Returns out. */
enum { REQUEST_ID_INSTANCE_MAX = 32 + 3 * REQUEST_ID_MAX };
const char *request_id_instance(const char *id,
                                char out[REQUEST_ID_INSTANCE_MAX]);

/* The request's id into out: a copy of `incoming` (a header value, or
 * NULL when absent) when request_id_valid, else a generated one. Returns
 * out. */
const char *request_id_take(const char *incoming, char out[REQUEST_ID_MAX + 1]);

#endif
