/* problem.c -- problem+json rendering and the core-error -> HTTP table. */
#include "problem.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "norm.h"
#include "request_id.h"

/* Makes s valid UTF-8 in place: a sequence cut at the end of the buffer is
 * dropped and any other invalid byte becomes '?', so client bytes echoed in
 * a message can never make the problem document unserializable. */
static void utf8_sanitize(char *s) {
  unsigned char *p = (unsigned char *)s;
  while (*p) {
    size_t len = *p < 0x80 ? 1 : (*p >> 5) == 0x6 ? 2 : (*p >> 4) == 0xE ? 3
                 : (*p >> 3) == 0x1E ? 4 : 0;
    size_t k = 1;
    uint32_t cp = len == 2 ? (*p & 0x1Fu) : len == 3 ? (*p & 0x0Fu) : (*p & 0x07u);
    while (k < len && (p[k] & 0xC0) == 0x80) cp = (cp << 6) | (p[k++] & 0x3Fu);
    /* as jansson checks: no overlong forms, surrogates or > U+10FFFF */
    int valid = len == 1 || (len == 2 && cp >= 0x80) ||
                (len == 3 && cp >= 0x800 && (cp < 0xD800 || cp > 0xDFFF)) ||
                (len == 4 && cp >= 0x10000 && cp <= 0x10FFFF);
    if (len != 0 && k == len && valid) {
      p += len;
    } else if (len != 0 && p[k] == '\0') { /* cut short by truncation */
      *p = '\0';
    } else {
      *p++ = '?';
    }
  }
}

static const struct {
  const char *code;
  int status, v1;
} problems[PROBLEM_COUNT] = {
#define PROBLEM_ROW_(id, code, status, v1) [PROBLEM_##id] = {code, status, v1},
    PROBLEM_MAP(PROBLEM_ROW_)
#undef PROBLEM_ROW_
};

const char *problem_code(problem_code_t id) { return problems[id].code; }
int problem_status(problem_code_t id) { return problems[id].status; }
int problem_on_v1(problem_code_t id) { return problems[id].v1; }

/* Records status, code and the formatted detail (first problem wins). */
static int record(problem_t *p, int status, const char *code,
                  const char *field, const char *fmt, va_list ap) {
  if (p->status != 0) return -1;
  p->status = status;
  p->code = code;
  snprintf(p->field, sizeof p->field, "%s", field ? field : "");
  vsnprintf(p->detail, sizeof p->detail, fmt, ap);
  utf8_sanitize(p->field);
  utf8_sanitize(p->detail);
  return -1;
}

int problem_set(problem_t *p, problem_code_t id, const char *field,
                const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  record(p, problems[id].status, problems[id].code, field, fmt, ap);
  va_end(ap);
  return -1;
}

static int record_norm(problem_t *p, int status, const char *code,
                       const char *field, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  record(p, status, code, field, fmt, ap);
  va_end(ap);
  return -1;
}

int problem_norm_internal(int norm_err) {
  return norm_err == NORM_E_NULL || norm_err == NORM_E_RANGE ||
         norm_err == NORM_E_ARG || norm_err == NORM_E_OUTPUT;
}

int problem_from_norm(problem_t *p, int norm_err, const char *field) {
  int status = problem_norm_internal(norm_err) ? 500 : 422;
  if (field && field[0])
    return record_norm(p, status, norm_err_name(norm_err), field, "%s: %s",
                       field, norm_strerror(norm_err));
  return record_norm(p, status, norm_err_name(norm_err), field, "%s",
                     norm_strerror(norm_err));
}

const char *problem_title(int status) {
  switch (status) {
  case 400: return "Bad Request";
  case 401: return "Unauthorized";
  case 404: return "Not Found";
  case 405: return "Method Not Allowed";
  case 406: return "Not Acceptable";
  case 408: return "Request Timeout";
  case 413: return "Content Too Large";
  case 415: return "Unsupported Media Type";
  case 422: return "Unprocessable Content";
  case 500: return "Internal Server Error";
  case 501: return "Not Implemented";
  case 503: return "Service Unavailable";
  default: return "Error";
  }
}

void problem_reply(const problem_t *p, reply_t *r) {
  int status = p->status ? p->status : 500;
  const char *code = p->code ? p->code : "internal";
  char type[128];
  snprintf(type, sizeof type, "urn:normd:problem:%s", code);
  json_t *doc = json_pack("{s:s, s:s, s:i, s:s, s:s}", "type", type, "title",
                          problem_title(status), "status", status, "detail",
                          p->detail, "code", code);
  if (doc && p->field[0]) json_object_set_new(doc, "field", json_string(p->field));
  if (doc && p->request_id) {
    char instance[REQUEST_ID_INSTANCE_MAX];
    request_id_instance(p->request_id, instance);
    json_object_set_new(doc, "instance", json_string(instance));
  }
  char *text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
  json_decref(doc);
  reply_free(r);
  r->status = status;
  r->content_type = "application/problem+json";
  if (text) { /* jansson allocates with malloc: the reply can own it */
    r->body = text;
    r->len = strlen(text);
  }
}

void problem_reply_kserve(const problem_t *p, reply_t *r) {
  json_t *doc = json_pack("{s:s}", "error", p->detail);
  char *text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
  json_decref(doc);
  reply_free(r);
  r->status = p->status ? p->status : 500;
  r->content_type = "application/json";
  if (text) {
    r->body = text;
    r->len = strlen(text);
  }
}
