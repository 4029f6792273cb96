/* encode.c -- JSON numbers, arrays and tensors, and binary tails; see
 * encode.h. */
#include "encode.h"

_Static_assert((int)TAIL_MAX_SEGMENTS <= (int)REPLY_MAX_PARTS,
               "a tail must fit in a reply's parts");

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpool.h"
#include "fmt.h"

/* The longest text of one number: a shortest float64 ("-2.2250738585072014e-308")
 * or a quoted non-finite spelling, and the comma before it. */
enum { NUMBER_TEXT_MAX = FMT_ELEMENT_MAX };

/* ---- half precision: one table of texts per format ------------------------
 * A float16 or bfloat16 value has 65536 bit patterns, so each one's text is
 * found once (the first time a half tensor is encoded, ~0.1 s) and looked
 * up afterwards: the shortest %g text that reads back (strtod, then
 * rounding to the format, as the decoder does) to the same pattern. */
typedef struct {
  char text[16]; /* "-1.17549435e-38": 9 digits at most, the longest */
  unsigned char len;
} half_text_t;

static half_text_t f16_texts[65536], bf16_texts[65536];
static pthread_once_t half_texts_once = PTHREAD_ONCE_INIT;

static uint16_t half_from_double(double v, norm_dtype_t dtype) {
  return dtype == NORM_F16 ? norm_f16_from_double(v) : norm_bf16_from_double(v);
}

static void half_text_find(double v, norm_dtype_t dtype, half_text_t *out) {
  if (!isfinite(v)) { /* fmt's spelling, quoted */
    char text[FMT_ELEMENT_MAX];
    out->len = (unsigned char)fmt_double_list(&v, 1, text);
    memcpy(out->text, text, out->len);
    return;
  }
  uint16_t want = half_from_double(v, dtype);
  int n = 0;
  for (int prec = 1; prec <= 9; prec++) {
    n = snprintf(out->text, sizeof out->text, "%.*g", prec, v);
    if (half_from_double(strtod(out->text, NULL), dtype) == want) break;
  }
  out->len = (unsigned char)n;
}

static void half_texts_build(void) {
  for (uint32_t h = 0; h < 65536; h++) {
    half_text_find(norm_float_from_f16((uint16_t)h), NORM_F16, &f16_texts[h]);
    half_text_find(norm_float_from_bf16((uint16_t)h), NORM_BF16, &bf16_texts[h]);
  }
}

static const half_text_t *half_texts(norm_dtype_t dtype) {
  pthread_once(&half_texts_once, half_texts_build);
  return dtype == NORM_F16 ? f16_texts : bf16_texts;
}

/* The JSON text of v in the precision of dtype, into out (NUMBER_TEXT_MAX
 * bytes); returns its length. */
static int number_text(double v, norm_dtype_t dtype, char *out) {
  switch (dtype) {
  case NORM_F64: return (int)fmt_double_list(&v, 1, out);
  case NORM_F16:
  case NORM_BF16: {
    const half_text_t *h = &half_texts(dtype)[half_from_double(v, dtype)];
    memcpy(out, h->text, h->len);
    return h->len;
  }
  default: {
    /* a double past float's range (a float32 statistic such as var) is
     * infinite as a float: spelled as a string like any other infinity */
    float f = (float)v;
    return (int)fmt_float_list(&f, 1, out);
  }
  }
}

void encode_number(buf_t *b, double v, norm_dtype_t dtype) {
  char text[NUMBER_TEXT_MAX];
  buf_append(b, text, (size_t)number_text(v, dtype, text));
}

void encode_shape(buf_t *b, int rank, const int64_t *shape) {
  buf_putc(b, '[');
  for (int i = 0; i < rank; i++)
    buf_printf(b, "%s%lld", i ? "," : "", (long long)shape[i]);
  buf_putc(b, ']');
}

size_t encode_numel(const norm_tensor_t *t) {
  size_t numel = 0;
  norm_tensor_check(t, &numel, NULL);
  return numel;
}

/* ---- long arrays in pieces on every core ----------------------------------
 * An array of at least split.min_numel numbers is printed as pieces at once
 * on the compute pool, each into its own buffer, and the pieces are sealed
 * into the output (buf_seal) instead of copied: they reach libmicrohttpd
 * as parts of the reply's I/O vector (encode_finish). Each number's text
 * is the same function's (print_range) on either path, so the bytes are
 * the same whatever the pieces. */
static encode_split_t split = {.min_numel = ENCODE_SPLIT_NUMEL};

void encode_split_configure(const encode_split_t *how) {
  static const encode_split_t initial = {.min_numel = ENCODE_SPLIT_NUMEL};
  split = how != NULL ? *how : initial;
}

/* What is printed: a tensor's elements, or doubles in a dtype's precision. */
typedef struct {
  const norm_tensor_t *t; /* NULL: doubles */
  const double *v;
  norm_dtype_t dtype;
} numbers_t;

/* Elements [begin, end) of what, each after a ',' but the very first,
 * into out (room for (end - begin) * NUMBER_TEXT_MAX bytes); returns the
 * bytes written. */
static size_t print_range(const numbers_t *what, size_t begin, size_t end, char *out) {
  char *p = out;
  const norm_tensor_t *t = what->t;
  if (t == NULL) {
    for (size_t i = begin; i < end; i++) {
      if (i) *p++ = ',';
      p += number_text(what->v[i], what->dtype, p);
    }
    return (size_t)(p - out);
  }
  if (begin) *p++ = ',';
  size_t n = end - begin;
  if (t->dtype == NORM_F32)
    return (size_t)(p - out) + fmt_float_list((const float *)t->data + begin, n, p);
  if (t->dtype == NORM_F64)
    return (size_t)(p - out) + fmt_double_list((const double *)t->data + begin, n, p);
  const half_text_t *halves = half_texts(t->dtype);
  const uint16_t *bits = (const uint16_t *)t->data + begin;
  for (size_t i = 0; i < n; i++) {
    const half_text_t *h = &halves[bits[i]];
    *p = ',';
    p += i != 0;
    memcpy(p, h->text, h->len);
    p += h->len;
  }
  return (size_t)(p - out);
}

typedef struct {
  const numbers_t *what;
  size_t n, npieces;
  buf_seg_t *pieces; /* npieces of them; data NULL when out of memory */
} print_task_t;

static int print_pieces(void *arg, size_t begin, size_t end) {
  print_task_t *task = arg;
  for (size_t k = begin; k < end; k++) {
    size_t from = task->n * k / task->npieces, to = task->n * (k + 1) / task->npieces;
    char *text = malloc((to - from) * NUMBER_TEXT_MAX + 1);
    size_t len = text ? print_range(task->what, from, to, text) : 0;
    /* give back what the bound reserved beyond the text */
    char *fit = text ? realloc(text, len + 1) : NULL;
    task->pieces[k] = (buf_seg_t){fit ? fit : text, len};
  }
  return 0;
}

/* [what's n numbers], in pieces on the pool when there are many. */
static void print_array(buf_t *b, const numbers_t *what, size_t n) {
  enum { CHUNK = 4096 }; /* numbers formatted per buffer reservation */
  buf_putc(b, '[');
  cpool_t *pool = NULL;
  if (n >= split.min_numel && n >= 2)
    pool = split.pool != NULL ? split.pool : cpool_shared();
  size_t npieces = split.pieces ? split.pieces : 2 * (size_t)cpool_threads(pool);
  if (npieces > ENCODE_MAX_PIECES) npieces = ENCODE_MAX_PIECES;
  if (npieces > n) npieces = n;
  if (pool != NULL && cpool_threads(pool) > 1 && npieces > 1) {
    buf_seg_t pieces[ENCODE_MAX_PIECES];
    print_task_t task = {.what = what, .n = n, .npieces = npieces, .pieces = pieces};
    cpool_run(pool, npieces, npieces, print_pieces, &task);
    for (size_t k = 0; k < npieces; k++) {
      if (pieces[k].data == NULL) b->failed = 1;
      buf_seal(b, pieces[k].data, pieces[k].len);
    }
  } else {
    for (size_t begin = 0; begin < n; begin += CHUNK) {
      size_t end = n - begin < CHUNK ? n : begin + CHUNK;
      char *start = buf_space(b, (end - begin) * NUMBER_TEXT_MAX);
      if (start == NULL) return;
      buf_commit(b, print_range(what, begin, end, start));
    }
  }
  buf_putc(b, ']');
}

void encode_doubles(buf_t *b, const double *v, size_t n, norm_dtype_t dtype) {
  numbers_t what = {.v = v, .dtype = dtype};
  print_array(b, &what, n);
}

void encode_tensor_data(buf_t *b, const norm_tensor_t *t) {
  numbers_t what = {.t = t};
  print_array(b, &what, encode_numel(t));
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

/* The reply's parts: the text's runs after the first (the body), then the
 * tail's tensors. */
static int add_part(reply_t *out, const void *data, size_t len, void *owned) {
  if (out->nparts == REPLY_MAX_PARTS) return -1;
  out->parts[out->nparts++] = (reply_part_t){.data = data, .len = len, .owned = owned};
  out->parts_len += len;
  return 0;
}

int encode_finish(buf_t *head, tail_t *tail, const char *content_type,
                  reply_t *out, problem_t *prob) {
  if (tail != NULL && tail->failed) head->failed = 1;
  int ntail = tail != NULL ? tail->n : 0;
  /* text printed in pieces goes out as they are, unless the parts would
   * not hold them (then copied into one run) */
  if (head->nsealed + ntail > REPLY_MAX_PARTS) {
    size_t len;
    char *flat = buf_steal(head, &len);
    buf_init(head);
    if (flat != NULL) buf_seal(head, flat, len);
    else head->failed = 1;
  }
  buf_seg_t *runs;
  int nruns;
  if (buf_steal_segments(head, &runs, &nruns) != 0) {
    if (tail != NULL) tail_free(tail);
    return problem_set(prob, PROBLEM_OUT_OF_MEMORY, NULL, "out of memory");
  }
  reply_free(out);
  out->status = 200;
  out->content_type = content_type;
  out->body = runs[0].data;
  out->len = runs[0].len;
  for (int i = 1; i < nruns; i++) add_part(out, runs[i].data, runs[i].len, runs[i].data);
  free(runs);
  /* the tensors go by reference: the caller keeps what they point into
   * alive with the reply (service.c), or flattens it */
  for (int i = 0; i < ntail; i++)
    add_part(out, tail->seg[i].data, tail->seg[i].len, tail->seg[i].owned);
  if (tail != NULL) tail_init(tail); /* the reply owns the converted segments now */
  return 0;
}

int encode_finish_json(buf_t *json, tail_t *tail, reply_t *out, problem_t *prob) {
  size_t header_len = buf_total(json);
  if (tail == NULL) return encode_finish(json, NULL, "application/json", out, prob);
  if (encode_finish(json, tail, "application/octet-stream", out, prob) != 0) return -1;
  out->header_length = (int64_t)header_len;
  return 0;
}
