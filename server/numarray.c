/* numarray.c -- numeric arrays of a JSON body parsed without jansson (see
 * numarray.h). Two passes over an array's text: numarray_extract checks
 * its syntax and shape (cheap, no conversions) and numarray_fill, once the
 * dtype is known, converts each number straight into the tensor. */
#include "numarray.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fmt.h"

/* Arrays with shorter text are left to jansson: not worth a placeholder,
 * and the placeholder ("\u0001" + index in quotes, at most 28 bytes) must
 * fit in the text it replaces, so the skeleton is never longer than the
 * body. */
enum { MIN_TEXT = 32 };

/* The placeholder's first character (written \u0001 in the skeleton). A
 * body whose strings hold the escape \u0001 is not rewritten at all, so a
 * client's string can never be taken for a placeholder. */
#define PLACEHOLDER_MARK '\x01'

static const char *const tensor_keys[] = {"data", "input", "weight", "bias",
                                          "running_mean", "running_var"};

static int is_ws(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }
static int is_digit(char c) { return c >= '0' && c <= '9'; }

static const char *skip_ws(const char *p, const char *end) {
  while (p < end && is_ws(*p)) p++;
  return p;
}

/* Past the string whose opening quote is at p, or NULL when it does not
 * end before `end`. Sets *marked when the string holds the escape \u0001
 * (the placeholders' mark). */
static const char *skip_string(const char *p, const char *end, int *marked) {
  for (p++; p < end; p++) {
    if (*p == '"') return p + 1;
    if (*p == '\\') {
      if (end - p >= 6 && memcmp(p, "\\u0001", 6) == 0) *marked = 1;
      p++;
    }
  }
  return NULL;
}

/* The number of ASCII digits at p, eight bytes at a time while it can: a
 * byte is a digit when its high nibble is 3 and stays 3 after adding 6
 * (0x3A..0x3F become 0x40..0x45). A carry out of a non-digit byte only
 * disturbs the bytes after it, and the first non-digit is the lowest
 * flagged byte (little-endian). */
static inline __attribute__((always_inline)) size_t digit_run(const char *p,
                                                           const char *end) {
  const uint64_t high = 0xF0F0F0F0F0F0F0F0u, three = 0x3030303030303030u;
  const char *s = p;
  while (end - p >= 8) {
    uint64_t w;
    memcpy(&w, p, 8);
    uint64_t flagged = ((w & high) ^ three) | (((w + 0x0606060606060606u) & high) ^ three);
    if (flagged) return (size_t)(p - s) + (size_t)(__builtin_ctzll(flagged) >> 3);
    p += 8;
  }
  while (p < end && is_digit(*p)) p++;
  return (size_t)(p - s);
}

/* The length of the JSON number at p (RFC 8259 grammar), 0 if none. */
static size_t number_len(const char *p, const char *end) {
  const char *s = p;
  if (p < end && *p == '-') p++;
  if (p >= end || !is_digit(*p)) return 0;
  if (*p == '0') p++;
  else p += digit_run(p, end);
  if (p < end && *p == '.') {
    if (++p >= end || !is_digit(*p)) return 0;
    p += digit_run(p, end);
  }
  if (p < end && (*p == 'e' || *p == 'E')) {
    if (++p < end && (*p == '+' || *p == '-')) p++;
    if (p >= end || !is_digit(*p)) return 0;
    p += digit_run(p, end);
  }
  return (size_t)(p - s);
}

/* The length of a quoted non-finite spelling at p ("NaN" with its quotes
 * is 5; the spellings are fmt_parse_nonfinite's), 0 if p is not one; its
 * value in *v. */
static size_t nonfinite_len(const char *p, const char *end, double *v) {
  char text[16]; /* the longest spelling, "+Infinity", fits */
  size_t n = 0;
  for (p++; p < end && *p != '"'; p++) {
    if (n == sizeof text - 1) return 0;
    text[n++] = *p;
  }
  text[n] = '\0';
  return p < end && fmt_parse_nonfinite(text, v) ? n + 2 : 0;
}

/* Checks the array whose '[' is at p: non-empty at every level, only
 * numbers and non-finite spellings as leaves, all leaves at one depth, and
 * every array at one depth of the same length. Returns the end of its text
 * (past ']') with a described, or NULL when it is anything else. */
static const char *scan_array(const char *p, const char *end, numarray_t *a) {
  int64_t open_count[NORM_MAX_RANK]; /* elements so far, per open level */
  int depth = 0, leaf_depth = 0;
  memset(a, 0, sizeof *a);
  a->text = p;
open:
  if (depth == NORM_MAX_RANK) return NULL;
  open_count[depth++] = 0;
  p = skip_ws(p + 1, end);
  if (p >= end || *p == ']') return NULL; /* empty arrays: the slow path */
value:
  p = skip_ws(p, end);
  if (p >= end) return NULL;
  if (*p == '[') {
    open_count[depth - 1]++;
    goto open;
  } else {
    double unused;
    size_t n = *p == '"' ? nonfinite_len(p, end, &unused) : number_len(p, end);
    if (n == 0) return NULL;
    p += n;
    if (leaf_depth == 0) leaf_depth = depth;
    else if (leaf_depth != depth) return NULL;
    open_count[depth - 1]++;
    a->count++;
  }
after_value:
  p = skip_ws(p, end);
  if (p >= end) return NULL;
  if (*p == ',') {
    p++;
    goto value;
  }
  if (*p != ']') return NULL;
  p++;
  depth--;
  if (a->shape[depth] == 0) a->shape[depth] = open_count[depth];
  else if (a->shape[depth] != open_count[depth]) return NULL; /* ragged */
  if (depth > 0) goto after_value;
  a->rank = leaf_depth;
  a->len = (size_t)(p - a->text);
  return p;
}

/* Is the JSON string text [s, s+n) (without quotes) a tensor key? */
static int is_tensor_key(const char *s, size_t n) {
  for (size_t i = 0; i < sizeof tensor_keys / sizeof tensor_keys[0]; i++)
    if (strlen(tensor_keys[i]) == n && memcmp(tensor_keys[i], s, n) == 0) return 1;
  return 0;
}

static int push_array(numarrays_t *out, const numarray_t *a, size_t *cap) {
  if (out->count == *cap) {
    size_t want = *cap ? 2 * *cap : 8;
    numarray_t *grown = realloc(out->arrays, want * sizeof *grown);
    if (grown == NULL) return -1;
    out->arrays = grown;
    *cap = want;
  }
  out->arrays[out->count++] = *a;
  return 0;
}

int numarray_extract(const char *json, size_t len, numarrays_t *out) {
  memset(out, 0, sizeof *out);
  const char *p = json, *end = json + len;
  const char *copied = json;           /* the skeleton holds json up to here */
  const char *last = NULL, *key = NULL; /* the last string; the current key */
  size_t last_len = 0, key_len = 0, cap = 0;
  int depth = 0, marked = 0;
  while (p < end) {
    char c = *p;
    if (c == '"') {
      const char *after = skip_string(p, end, &marked);
      if (after == NULL) break; /* unterminated: jansson will say so */
      last = p + 1;
      last_len = (size_t)(after - p - 2);
      key = NULL;
      p = after;
      continue;
    }
    if (c == ':') {
      key = last;
      key_len = last_len;
      last = NULL;
      p++;
      continue;
    }
    if (is_ws(c)) {
      p++;
      continue;
    }
    numarray_t a;
    const char *after;
    if (c == '[' && key != NULL && is_tensor_key(key, key_len) &&
        (after = scan_array(p, end, &a)) != NULL && a.len >= MIN_TEXT) {
      if (out->skeleton == NULL && (out->skeleton = malloc(len + 1)) == NULL) goto oom;
      if (push_array(out, &a, &cap) != 0) goto oom;
      memcpy(out->skeleton + out->skeleton_len, copied, (size_t)(p - copied));
      out->skeleton_len += (size_t)(p - copied);
      out->skeleton_len += (size_t)sprintf(out->skeleton + out->skeleton_len,
                                           "\"\\u0001%zu\"", out->count - 1);
      if (depth + a.rank > out->depth) out->depth = depth + a.rank;
      copied = p = after;
    } else {
      if (c == '[' || c == '{') {
        if (++depth > out->depth) out->depth = depth;
      } else if (c == ']' || c == '}') {
        depth--;
      }
      p++;
    }
    key = last = NULL;
  }
  if (marked) { /* a client string could pose as a placeholder: no skeleton */
    int deepest = out->depth;
    numarray_free(out);
    out->depth = deepest;
  } else if (out->skeleton != NULL) {
    memcpy(out->skeleton + out->skeleton_len, copied, (size_t)(end - copied));
    out->skeleton_len += (size_t)(end - copied);
    out->skeleton[out->skeleton_len] = '\0';
  }
  return 0;
oom:
  numarray_free(out);
  return -1;
}

void numarray_free(numarrays_t *a) {
  free(a->skeleton);
  free(a->arrays);
  memset(a, 0, sizeof *a);
}

const numarray_t *numarray_of(const numarrays_t *a, const json_t *v) {
  if (a == NULL || a->count == 0 || !json_is_string(v)) return NULL;
  const char *s = json_string_value(v);
  size_t n = json_string_length(v);
  if (n < 2 || s[0] != PLACEHOLDER_MARK) return NULL;
  size_t index = 0;
  for (size_t i = 1; i < n; i++) {
    if (!is_digit(s[i]) || index > a->count) return NULL;
    index = index * 10 + (size_t)(s[i] - '0');
  }
  return index < a->count ? &a->arrays[index] : NULL;
}

int numarray_fill(const numarray_t *a, norm_tensor_t *t, size_t *bad_index) {
  const char *p = a->text, *end = a->text + a->len;
  size_t i = 0;
  while (p < end) {
    char c = *p;
    if (c == '[' || c == ']' || c == ',' || is_ws(c)) {
      p++;
      continue;
    }
    double d;
    if (c == '"') {
      p += nonfinite_len(p, end, &d);
      norm_tensor_set(t, i++, d);
      continue;
    }
    /* The scan checked the grammar, so each parse takes a whole number.
     * Text beyond float64's range is refused (as jansson does); past
     * float32's only, it rounds to infinity. */
    const char *start = p;
    if (t->dtype == NORM_F32) {
      float f;
      p += fmt_parse_float(p, (size_t)(end - p), &f);
      ((float *)t->data)[i] = f;
      d = 0;
      if (isinf(f)) fmt_parse_double(start, (size_t)(p - start), &d);
    } else {
      p += fmt_parse_double(p, (size_t)(end - p), &d);
      if (t->dtype == NORM_F64) ((double *)t->data)[i] = d;
      else norm_tensor_set(t, i, d);
    }
    if (isinf(d)) {
      *bad_index = i;
      return -1;
    }
    i++;
  }
  return 0;
}
