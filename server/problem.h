/* problem.h -- RFC 9457 problem details: every error the service reports,
 * with its HTTP status and a stable machine-readable `code`. The mapping
 * from core error codes to statuses lives here and only here. */
#ifndef NORMD_PROBLEM_H
#define NORMD_PROBLEM_H

#include "reply.h"

typedef struct {
  int status;       /* 0 = no problem recorded */
  const char *code; /* static, e.g. "shape_mismatch" */
  char field[64];   /* offending request field, "" if none */
  char detail[512];
} problem_t;

/* Records a problem (the first one wins: later calls are ignored, so the
 * innermost, most specific error is reported). Returns -1 for `return
 * problem_set(...)` convenience. */
int problem_set(problem_t *p, int status, const char *code, const char *field,
                const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* A core error (norm_err_t) as a problem: 422 with the error's short name
 * as code and its message as detail (500 for internal misuse codes). */
int problem_from_norm(problem_t *p, int norm_err, const char *field);

/* Renders the problem as application/problem+json into *r. Out of memory
 * leaves a bodyless reply with the problem's status. */
void problem_reply(const problem_t *p, reply_t *r);

/* The same problem in the KServe v2 protocol's form: {"error": detail}
 * with the problem's status. */
void problem_reply_kserve(const problem_t *p, reply_t *r);

/* The reason phrase for a status ("Unprocessable Content"). */
const char *problem_title(int status);

#endif
