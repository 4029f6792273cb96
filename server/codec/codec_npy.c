/* codec_npy.c -- NumPy .npy files as request and response bodies.
 *
 * Request: the body is the input tensor (format versions 1.0, 2.0, 3.0;
 * descr <f4 >f4 <f8 >f8 <f2 >f2; fortran_order True is transposed to
 * row-major), every other scalar field comes from the query string with the
 * JSON field names (?eps=1e-5&normalized_shape=768; decode_query) --
 * tensors (weight, bias, running stats) take JSON or the binary framing.
 * The parameters then go through the same decoder as a JSON body. Only the
 * norms and /v1/moments take a .npy body (service.c's format table).
 * Response: the output tensor of a norm as a version 1.0 .npy
 * (little-endian, C order); .npy carries one array, so the statistics need
 * Accept: application/json. */
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "decode.h"
#include "encode.h"

static const char npy_magic[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};

typedef struct {
  norm_dtype_t dtype;
  int big_endian;
  int fortran;
  int rank;
  int64_t shape[NORM_MAX_RANK];
  int have_descr, have_fortran, have_shape;
} npy_header_t;

/* ---- the header: a Python dict literal ---- */

typedef struct {
  const char *p, *end;
} cursor_t;

static void skip_space(cursor_t *c) {
  while (c->p < c->end && (*c->p == ' ' || *c->p == '\t')) c->p++;
}

static int eat(cursor_t *c, char ch) {
  skip_space(c);
  if (c->p < c->end && *c->p == ch) {
    c->p++;
    return 1;
  }
  return 0;
}

/* A quoted Python string without escapes, into out (NUL-terminated). */
static int read_string(cursor_t *c, char *out, size_t cap) {
  skip_space(c);
  if (c->p >= c->end || (*c->p != '\'' && *c->p != '"')) return -1;
  char quote = *c->p++;
  size_t n = 0;
  while (c->p < c->end && *c->p != quote) {
    if (*c->p == '\\' || n + 1 >= cap) return -1;
    out[n++] = *c->p++;
  }
  if (c->p >= c->end) return -1;
  c->p++;
  out[n] = '\0';
  return 0;
}

static int read_word(cursor_t *c, const char *word) {
  skip_space(c);
  size_t n = strlen(word);
  if ((size_t)(c->end - c->p) >= n && memcmp(c->p, word, n) == 0) {
    c->p += n;
    return 0;
  }
  return -1;
}

static int bad_header(problem_t *prob, const char *why) {
  return problem_set(prob, PROBLEM_NPY_BAD_HEADER, "input",
                     ".npy header is not a valid dict literal: %s", why);
}

/* (d0, d1, ...) with Python's trailing comma for one element. */
static int read_shape(cursor_t *c, npy_header_t *h, problem_t *prob) {
  if (!eat(c, '(')) return bad_header(prob, "shape is not a tuple");
  h->rank = 0;
  while (!eat(c, ')')) {
    skip_space(c);
    int negative = c->p < c->end && *c->p == '-';
    if (negative) c->p++;
    if (c->p >= c->end || !isdigit((unsigned char)*c->p))
      return bad_header(prob, "shape holds something other than integers");
    uint64_t v = 0;
    int overflow = 0;
    while (c->p < c->end && isdigit((unsigned char)*c->p)) {
      unsigned d = (unsigned)(*c->p++ - '0');
      if (v > (UINT64_C(1) << 62) / 10) overflow = 1;
      else v = v * 10 + d;
    }
    if (h->rank == NORM_MAX_RANK) return problem_from_norm(prob, NORM_E_RANK, "input");
    if (overflow || v > (uint64_t)INT64_MAX)
      return problem_from_norm(prob, NORM_E_OVERFLOW, "input");
    h->shape[h->rank++] = negative ? -(int64_t)v : (int64_t)v;
    if (!eat(c, ',')) {
      if (!eat(c, ')')) return bad_header(prob, "shape tuple is not closed");
      break;
    }
  }
  return 0;
}

static int read_descr(const char *descr, npy_header_t *h, problem_t *prob) {
  static const struct {
    const char *descr;
    norm_dtype_t dtype;
    int big_endian;
  } known[] = {
      {"<f4", NORM_F32, 0}, {">f4", NORM_F32, 1}, {"<f8", NORM_F64, 0},
      {">f8", NORM_F64, 1}, {"<f2", NORM_F16, 0}, {">f2", NORM_F16, 1},
  };
  for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
    if (strcmp(descr, known[i].descr) == 0) {
      h->dtype = known[i].dtype;
      h->big_endian = known[i].big_endian;
      return 0;
    }
  return problem_set(prob, PROBLEM_NPY_UNSUPPORTED_DTYPE, "input",
                     ".npy dtype '%s' is not supported; send <f4, <f8 or <f2 "
                     "(or big-endian >f4, >f8, >f2)", descr);
}

static int parse_header(const char *text, size_t len, npy_header_t *h,
                        problem_t *prob) {
  cursor_t c = {text, text + len};
  memset(h, 0, sizeof *h);
  if (!eat(&c, '{')) return bad_header(prob, "no '{'");
  while (!eat(&c, '}')) {
    char key[32], value[32];
    if (read_string(&c, key, sizeof key) != 0) return bad_header(prob, "bad key");
    if (!eat(&c, ':')) return bad_header(prob, "no ':' after a key");
    if (strcmp(key, "descr") == 0 && !h->have_descr) {
      if (read_string(&c, value, sizeof value) != 0)
        return bad_header(prob, "descr is not a simple string");
      if (read_descr(value, h, prob) != 0) return -1;
      h->have_descr = 1;
    } else if (strcmp(key, "fortran_order") == 0 && !h->have_fortran) {
      if (read_word(&c, "True") == 0) h->fortran = 1;
      else if (read_word(&c, "False") != 0)
        return bad_header(prob, "fortran_order is not True or False");
      h->have_fortran = 1;
    } else if (strcmp(key, "shape") == 0 && !h->have_shape) {
      if (read_shape(&c, h, prob) != 0) return -1;
      h->have_shape = 1;
    } else {
      return bad_header(prob, "unknown or repeated key");
    }
    if (!eat(&c, ',')) {
      if (!eat(&c, '}')) return bad_header(prob, "entries not separated by ','");
      break;
    }
  }
  while (c.p < c.end && (*c.p == ' ' || *c.p == '\n' || *c.p == '\t')) c.p++;
  if (c.p != c.end) return bad_header(prob, "text after the dict");
  if (!h->have_descr || !h->have_fortran || !h->have_shape)
    return bad_header(prob, "descr, fortran_order and shape are all required");
  return 0;
}

/* ---- the data ---- */

static void swap_bytes(unsigned char *p, size_t size) {
  for (size_t i = 0; i < size / 2; i++) {
    unsigned char t = p[i];
    p[i] = p[size - 1 - i];
    p[size - 1 - i] = t;
  }
}

/* Copies n elements of `size` bytes to row-major order (from column-major
 * when fortran), byte-swapping big-endian input. */
static void copy_elements(const npy_header_t *h, const unsigned char *src,
                          unsigned char *dst, size_t n, size_t size) {
  if (!h->fortran) {
    memcpy(dst, src, n * size);
  } else {
    /* walk the row-major index like an odometer, tracking the offset of
     * the same element in column-major order */
    size_t fstride[NORM_MAX_RANK], idx[NORM_MAX_RANK] = {0}, off = 0;
    size_t s = 1;
    for (int k = 0; k < h->rank; k++) {
      fstride[k] = s;
      s *= (size_t)h->shape[k];
    }
    for (size_t i = 0; i < n; i++) {
      memcpy(dst + i * size, src + off * size, size);
      for (int k = h->rank - 1; k >= 0; k--) {
        if (++idx[k] < (size_t)h->shape[k]) {
          off += fstride[k];
          break;
        }
        off -= (idx[k] - 1) * fstride[k];
        idx[k] = 0;
      }
    }
  }
  if (h->big_endian)
    for (size_t i = 0; i < n; i++) swap_bytes(dst + i * size, size);
}

static int read_npy(const char *body, size_t len, const limits_t *lim,
                    req_tensor_t *out, problem_t *prob) {
  const unsigned char *b = (const unsigned char *)body;
  if (len < 10 || memcmp(b, npy_magic, sizeof npy_magic) != 0)
    return problem_set(prob, PROBLEM_NPY_BAD_MAGIC, "input",
                       "the body is not a .npy file (no \\x93NUMPY magic)");
  unsigned major = b[6];
  size_t header_len, offset;
  if (major == 1) {
    header_len = (size_t)b[8] | (size_t)b[9] << 8;
    offset = 10;
  } else if (major == 2 || major == 3) {
    if (len < 12)
      return problem_set(prob, PROBLEM_NPY_TRUNCATED, "input", ".npy file is truncated");
    header_len = (size_t)b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 |
                 (size_t)b[11] << 24;
    offset = 12;
  } else {
    return problem_set(prob, PROBLEM_NPY_BAD_VERSION, "input",
                       ".npy format version %u.%u is not 1, 2 or 3", major, b[7]);
  }
  if (header_len > len - offset)
    return problem_set(prob, PROBLEM_NPY_TRUNCATED, "input",
                       ".npy header length %zu runs past the body (%zu bytes)",
                       header_len, len);
  npy_header_t h;
  if (parse_header(body + offset, header_len, &h, prob) != 0) return -1;
  if (h.rank == 0)
    return problem_from_norm(prob, NORM_E_RANK, "input"); /* a scalar */
  out->t.dtype = h.dtype;
  out->t.rank = h.rank;
  memcpy(out->t.shape, h.shape, sizeof h.shape);
  size_t numel, nbytes;
  int err = norm_tensor_check(&out->t, &numel, &nbytes);
  if (err != NORM_OK) return problem_from_norm(prob, err, "input");
  if (numel > lim->max_elements)
    return problem_set(prob, PROBLEM_TOO_MANY_ELEMENTS, "input",
                       "input has %zu elements; the limit is %zu", numel,
                       lim->max_elements);
  size_t data_len = len - offset - header_len;
  if (data_len != nbytes)
    return problem_set(prob, PROBLEM_NPY_SIZE_MISMATCH, "input",
                       ".npy shape and dtype need %zu data bytes, the body has %zu",
                       nbytes, data_len);
  const unsigned char *src = b + offset + header_len;
  size_t size = norm_dtype_size(h.dtype);
  out->present = true;
  if (!h.fortran && !h.big_endian && (uintptr_t)src % size == 0) {
    out->t.data = (void *)src; /* read in place: the body outlives the request */
    out->borrowed = true;
    return 0;
  }
  out->t.data = malloc(nbytes ? nbytes : 1);
  if (out->t.data == NULL) {
    out->present = false;
    return problem_set(prob, PROBLEM_OUT_OF_MEMORY, "input", "out of memory");
  }
  copy_elements(&h, src, out->t.data, numel, size);
  return 0;
}

static int npy_decode(const codec_input_t *in, const limits_t *lim,
                      request_t *req, problem_t *prob) {
  if (read_npy(in->body, in->len, lim, &req->input, prob) != 0) return -1;
  json_t *params = json_object();
  decode_ctx_t ctx = {.lim = lim};
  if (params == NULL)
    return problem_set(prob, PROBLEM_OUT_OF_MEMORY, NULL, "out of memory");
  int rc = decode_query(in->query, in->nquery, params, prob);
  if (rc == 0) rc = decode_request(&ctx, params, in->op, req, prob);
  json_decref(params);
  return rc;
}

/* ---- response ---- */

static int npy_encode(const request_t *req, const result_t *res, reply_t *out,
                      problem_t *prob) {
  const norm_tensor_t *t = &res->output;
  const char *descr = t->dtype == NORM_F32   ? "<f4"
                      : t->dtype == NORM_F64 ? "<f8"
                      : t->dtype == NORM_F16 ? "<f2"
                                             : NULL;
  if (t->data == NULL) /* negotiation offers .npy for the norms only */
    return problem_set(prob, PROBLEM_NOT_ACCEPTABLE, NULL,
                       "%s has no .npy answer; ask for application/json",
                       op_name(req->op));
  if (descr == NULL)
    return problem_set(prob, PROBLEM_NOT_ACCEPTABLE, "output_dtype",
                       ".npy has no bfloat16; ask for output_dtype float32 or "
                       "Accept: application/octet-stream");
  buf_t b;
  buf_init(&b);
  char dict[256];
  int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
  for (int i = 0; i < t->rank; i++)
    n += snprintf(dict + n, sizeof dict - (size_t)n, "%s%lld", i ? ", " : "",
                  (long long)t->shape[i]);
  n += snprintf(dict + n, sizeof dict - (size_t)n, "%s), }", t->rank == 1 ? "," : "");
  size_t header_len = (size_t)n + 1; /* + '\n' */
  size_t padded = (10 + header_len + 63) / 64 * 64 - 10;
  buf_append(&b, npy_magic, sizeof npy_magic);
  buf_putc(&b, 1);
  buf_putc(&b, 0);
  buf_putc(&b, (char)(padded & 0xFF));
  buf_putc(&b, (char)(padded >> 8));
  buf_append(&b, dict, (size_t)n);
  for (size_t i = header_len; i < padded; i++) buf_putc(&b, ' ');
  buf_putc(&b, '\n');
  tail_t data; /* the array's bytes follow the header by reference */
  tail_init(&data);
  encode_tensor_bytes(&data, t);
  return encode_finish(&b, &data, "application/x-npy", out, prob);
}

const codec_t codec_npy = {
    .name = "npy",
    .media_type = "application/x-npy",
    .decode = npy_decode,
    .encode = npy_encode,
};
