/* encode.c -- JSON numbers, arrays and tensors, and binary tails; see
 * encode.h. */
#include "encode.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fmt.h"

/* Shortest text that reads back (strtod, then rounding to the half format
 * as the decoder does) to the same 16-bit value. */
static int fmt_half(double v, norm_dtype_t dtype, char *out) {
  for (int prec = 1; prec <= 9; prec++) {
    snprintf(out, FMT_NUMBER_MAX, "%.*g", prec, v);
    double back = strtod(out, NULL);
    int same = dtype == NORM_F16
                   ? norm_f16_from_double(back) == norm_f16_from_double(v)
                   : norm_bf16_from_double(back) == norm_bf16_from_double(v);
    if (same) break;
  }
  return (int)strlen(out);
}

void encode_number(buf_t *b, double v, norm_dtype_t dtype) {
  char text[FMT_NUMBER_MAX];
  int n = 0;
  if (!isfinite(v)) {
    buf_puts(b, isnan(v) ? "\"NaN\"" : v > 0 ? "\"Infinity\"" : "\"-Infinity\"");
    return;
  }
  switch (dtype) {
  case NORM_F64: n = fmt_double(v, text); break;
  case NORM_F16:
  case NORM_BF16: n = fmt_half(v, dtype, text); break;
  default: {
    /* a double past float's range (a float32 statistic such as var) is
     * infinite as a float: spelled as a string like any other infinity */
    float f = (float)v;
    if (!isfinite(f)) {
      buf_puts(b, f > 0 ? "\"Infinity\"" : "\"-Infinity\"");
      return;
    }
    n = fmt_float(f, text);
    break;
  }
  }
  buf_append(b, text, (size_t)n);
}

void encode_shape(buf_t *b, int rank, const int64_t *shape) {
  buf_putc(b, '[');
  for (int i = 0; i < rank; i++)
    buf_printf(b, "%s%lld", i ? "," : "", (long long)shape[i]);
  buf_putc(b, ']');
}

void encode_doubles(buf_t *b, const double *v, size_t n, norm_dtype_t dtype) {
  buf_putc(b, '[');
  for (size_t i = 0; i < n; i++) {
    if (i) buf_putc(b, ',');
    encode_number(b, v[i], dtype);
  }
  buf_putc(b, ']');
}

size_t encode_numel(const norm_tensor_t *t) {
  size_t numel = 0;
  norm_tensor_check(t, &numel, NULL);
  return numel;
}

void encode_tensor_data(buf_t *b, const norm_tensor_t *t) {
  size_t numel = encode_numel(t);
  buf_reserve(b, numel * 12 + 2);
  buf_putc(b, '[');
  for (size_t i = 0; i < numel; i++) {
    if (i) buf_putc(b, ',');
    encode_number(b, norm_tensor_get(t, i), t->dtype);
  }
  buf_putc(b, ']');
}

void encode_string(buf_t *b, const char *s) {
  buf_putc(b, '"');
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\') {
      buf_putc(b, '\\');
      buf_putc(b, (char)*p);
    } else if (*p < 0x20) {
      buf_printf(b, "\\u%04x", *p);
    } else {
      buf_putc(b, (char)*p);
    }
  }
  buf_putc(b, '"');
}

void tail_init(tail_t *t) { memset(t, 0, sizeof *t); }

void tail_free(tail_t *t) {
  for (int i = 0; i < t->n; i++) free(t->seg[i].owned);
  tail_init(t);
}

static size_t tail_add(tail_t *t, const void *data, size_t len, void *owned) {
  if (t->n == TAIL_MAX_SEGMENTS) {
    free(owned);
    t->failed = 1;
    return len;
  }
  t->seg[t->n].data = data;
  t->seg[t->n].len = len;
  t->seg[t->n].owned = owned;
  t->n++;
  t->len += len;
  return len;
}

size_t encode_tensor_bytes(tail_t *tail, const norm_tensor_t *t) {
  return tail_add(tail, t->data, encode_numel(t) * norm_dtype_size(t->dtype), NULL);
}

size_t encode_doubles_bytes(tail_t *tail, const double *v, size_t n,
                            norm_dtype_t dtype) {
  size_t len = n * norm_dtype_size(dtype);
  void *bytes = malloc(len ? len : 1);
  if (bytes == NULL) {
    tail->failed = 1;
    return len;
  }
  norm_tensor_t view = {.dtype = dtype, .rank = 1, .shape = {(int64_t)n},
                        .data = bytes};
  for (size_t i = 0; i < n; i++) norm_tensor_set(&view, i, v[i]);
  return tail_add(tail, bytes, len, bytes);
}

int encode_finish(buf_t *json, tail_t *tail, reply_t *out, problem_t *prob) {
  size_t header_len = json->len;
  if (tail != NULL) {
    if (tail->failed) json->failed = 1;
    if (buf_reserve(json, tail->len) == 0)
      for (int i = 0; i < tail->n; i++)
        buf_append(json, tail->seg[i].data, tail->seg[i].len);
    tail_free(tail);
  }
  size_t len;
  char *body = buf_steal(json, &len);
  if (body == NULL)
    return problem_set(prob, 500, "out_of_memory", NULL, "out of memory");
  reply_free(out);
  out->status = 200;
  out->body = body;
  out->len = len;
  if (tail != NULL) {
    out->content_type = "application/octet-stream";
    out->header_length = (int64_t)header_len;
  } else {
    out->content_type = "application/json";
  }
  return 0;
}
