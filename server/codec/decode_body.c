/* decode_body.c -- a request body as a JSON document: the framing's split
 * into JSON header and binary tail, the parse (depth limit first, numeric
 * arrays kept for the fast path, errors placed by line, column and field
 * path), and the query string's parameters as fields of the document. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode.h"

static json_t *query_value(const char *value) {
  json_t *v = json_loads(value, JSON_DECODE_ANY, NULL);
  if (v != NULL) return v;
  if (strchr(value, ',') == NULL) return json_string(value);
  json_t *list = json_array();
  char *copy = strdup(value);
  if (list == NULL || copy == NULL) {
    free(copy);
    json_decref(list);
    return NULL;
  }
  char *save = NULL;
  for (char *item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
    json_t *x = json_loads(item, JSON_DECODE_ANY, NULL);
    json_array_append_new(list, x ? x : json_string(item));
  }
  free(copy);
  return list;
}

int decode_query(const query_param_t *query, size_t n, json_t *obj,
                 problem_t *prob) {
  static const char *const tensors[] = {"weight", "bias", "running_mean",
                                        "running_var", "mean", "var", "parts",
                                        "grad_output", "residual"};
  json_t *seen = json_object();
  int rc = seen ? 0 : problem_set(prob, PROBLEM_OUT_OF_MEMORY, NULL, "out of memory");
  for (size_t i = 0; rc == 0 && i < n; i++) {
    const char *key = query[i].key;
    const char *value = query[i].value ? query[i].value : "";
    for (size_t k = 0; rc == 0 && k < sizeof tensors / sizeof tensors[0]; k++)
      if (strcmp(key, tensors[k]) == 0)
        rc = problem_set(prob, PROBLEM_BAD_FIELD, key,
                         "%s is a tensor: it cannot travel in the query "
                         "string; send it in a JSON body or with the binary "
                         "framing (application/octet-stream)", key);
    if (rc != 0) break;
    if (strcmp(key, "input") == 0) {
      rc = problem_set(prob, PROBLEM_CONFLICTING_FIELDS, key,
                       "the input is the request body, not a query parameter");
    } else if (json_object_get(seen, key) != NULL) {
      rc = problem_set(prob, PROBLEM_DUPLICATE_KEY, key,
                       "query parameter %s is given twice", key);
    } else if (json_object_get(obj, key) != NULL) {
      rc = problem_set(prob, PROBLEM_CONFLICTING_FIELDS, key,
                       "%s is given in both the body and the query", key);
    } else {
      json_t *v = query_value(value);
      int bad = v == NULL || json_object_set(obj, key, v) != 0;
      if (bad) json_decref(v); /* (a key that is not UTF-8 is refused) */
      else bad = json_object_set_new(seen, key, v) != 0; /* takes v */
      if (bad)
        rc = problem_set(prob, PROBLEM_BAD_FIELD, key,
                         "query parameter %s is not valid text", key);
    }
  }
  json_decref(seen);
  return rc;
}

int decode_frame(const char *body, size_t len, int64_t header_length,
                 decode_ctx_t *ctx, size_t *json_len, problem_t *prob) {
  *json_len = len;
  if (header_length < 0) return 0;
  if ((uint64_t)header_length > len)
    return problem_set(prob, PROBLEM_BINARY_TRUNCATED, NULL,
                       "Inference-Header-Content-Length is %lld but the body "
                       "has %zu bytes", (long long)header_length, len);
  *json_len = (size_t)header_length;
  ctx->bin = body + *json_len;
  ctx->bin_len = len - *json_len;
  return 0;
}

/* Where the byte at pos of a JSON text lies, as a path like
 * `input.shape[0]` into path (cap bytes) and its top-level key into top
 * (""  when the byte is not inside a top-level member). Scans the text up to
 * pos only; the text is taken to be JSON up to there (jansson stopped at
 * pos). Keys are cut at 40 bytes; containers deeper than PATH_DEPTH are
 * left out of the path. */
enum { PATH_DEPTH = 16, PATH_KEY_MAX = 40 };
typedef struct {
  int object, want_key; /* an object, waiting for a key */
  size_t index;         /* an array: the element's index */
  const char *key;      /* an object: the member's key (not NUL-terminated) */
  size_t keylen;
} path_step_t;

static void json_path_at(const char *text, size_t len, size_t pos, char *path,
                         size_t cap, char *top, size_t topcap) {
  path_step_t st[PATH_DEPTH];
  int depth = 0; /* containers open; only the first PATH_DEPTH recorded */
  if (pos > len) pos = len;
  for (size_t i = 0; i < pos; i++) {
    char c = text[i];
    int in = depth >= 1 && depth <= PATH_DEPTH; /* st[depth - 1] recorded */
    if (c == '"') {
      size_t start = ++i;
      while (i < len && text[i] != '"') i += text[i] == '\\' ? 2 : 1;
      if (in && st[depth - 1].object && st[depth - 1].want_key) {
        st[depth - 1].key = text + start;
        st[depth - 1].keylen = (i < len ? i : len) - start;
      }
    } else if (c == '{' || c == '[') {
      if (depth < PATH_DEPTH)
        st[depth] = (path_step_t){.object = c == '{', .want_key = c == '{'};
      depth++;
    } else if (c == '}' || c == ']') {
      if (depth > 0) depth--;
    } else if (c == ':' && in && st[depth - 1].object) {
      st[depth - 1].want_key = 0;
    } else if (c == ',' && in) {
      if (st[depth - 1].object) {
        st[depth - 1].want_key = 1;
        st[depth - 1].key = NULL;
      } else {
        st[depth - 1].index++;
      }
    }
  }
  size_t o = 0;
  path[0] = top[0] = '\0';
  for (int d = 0; d < depth && d < PATH_DEPTH && o < cap; d++) {
    int n;
    if (!st[d].object)
      n = snprintf(path + o, cap - o, "[%zu]", st[d].index);
    else if (st[d].key != NULL && !st[d].want_key)
      n = snprintf(path + o, cap - o, "%s%.*s", o ? "." : "",
                   (int)(st[d].keylen < PATH_KEY_MAX ? st[d].keylen : PATH_KEY_MAX),
                   st[d].key);
    else
      break; /* between members: the object itself */
    if (d == 0 && st[0].object && topcap > 0) {
      size_t k = st[0].keylen < PATH_KEY_MAX ? st[0].keylen : PATH_KEY_MAX;
      if (k >= topcap) k = topcap - 1;
      memcpy(top, st[0].key, k);
      top[k] = '\0';
    }
    o += n > 0 ? (size_t)n : 0;
  }
}

/* Only blanks (or nothing): what a POST without a body sends. */
static int blank(const char *body, size_t len) {
  for (size_t i = 0; i < len; i++)
    if (body[i] != ' ' && body[i] != '\t' && body[i] != '\r' && body[i] != '\n')
      return 0;
  return 1;
}

int decode_json_root(decode_ctx_t *ctx, const char *body, size_t len,
                     json_t **root, problem_t *prob) {
  *root = NULL;
  if (blank(body, len))
    return problem_set(prob, PROBLEM_MALFORMED_JSON, NULL,
                       "the request body is empty: send a JSON object (with "
                       "a Content-Length, or chunked)");
  numarrays_t *arrays = &ctx->arrays;
  if (numarray_extract(body, len, arrays) != 0)
    return problem_set(prob, PROBLEM_OUT_OF_MEMORY, NULL, "out of memory");
  if (arrays->depth > ctx->lim->max_depth) {
    numarray_free(arrays);
    return problem_set(prob, PROBLEM_TOO_DEEP, NULL,
                       "JSON nesting deeper than %d levels", ctx->lim->max_depth);
  }
  json_error_t jerr;
  json_t *doc = NULL;
  if (arrays->skeleton != NULL)
    doc = json_loadb(arrays->skeleton, arrays->skeleton_len,
                     JSON_REJECT_DUPLICATES, &jerr);
  if (doc == NULL) {
    /* No skeleton, or a malformed document: jansson reads the client's
     * own text, so errors point at its lines and columns. */
    numarray_free(arrays);
    doc = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
  }
  if (doc == NULL && json_error_code(&jerr) == json_error_numeric_overflow) {
    /* jansson reads integers into 64 bits and reals into doubles; say
     * which field holds the number it could not */
    char path[128], top[sizeof prob->field];
    json_path_at(body, len, (size_t)jerr.position, path, sizeof path, top,
                 sizeof top);
    int integer = strncmp(jerr.text, "too big integer", 15) == 0;
    return problem_set(prob, PROBLEM_MALFORMED_JSON, top[0] ? top : NULL,
                       "%s%s%s at line %d, column %d (%s)", path,
                       path[0] ? ": " : "", jerr.text, jerr.line, jerr.column,
                       integer ? "a JSON integer must fit in 64 bits"
                               : "beyond the range of a float64");
  }
  if (doc == NULL) {
    int dup = json_error_code(&jerr) == json_error_duplicate_key;
    return problem_set(prob, dup ? PROBLEM_DUPLICATE_KEY : PROBLEM_MALFORMED_JSON,
                       NULL, "invalid JSON at line %d, column %d: %s",
                       jerr.line, jerr.column, jerr.text);
  }
  if (!json_is_object(doc)) {
    json_decref(doc);
    return problem_set(prob, PROBLEM_NOT_AN_OBJECT, NULL,
                       "the request body must be a JSON object");
  }
  *root = doc;
  return 0;
}

void decode_ctx_release(decode_ctx_t *ctx) { numarray_free(&ctx->arrays); }
