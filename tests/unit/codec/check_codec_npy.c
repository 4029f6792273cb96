/* check_codec_npy.c -- the .npy codec through service_handle(), without a
 * socket: versions 1.0/2.0/3.0, every supported descr (little and big
 * endian), fortran order, float16, query parameters, .npy and JSON
 * responses, and the cruel files (bad magic and versions, header lengths
 * past the body, headers that are not the dict numpy writes, size
 * mismatches, negative and overflowing dims, unsupported dtypes).
 *
 * Every request body is copied to the end of a page followed by an
 * inaccessible page, so a decoder that reads one byte past the body dies
 * with SIGSEGV instead of passing by luck. Loops over many cases collect
 * failures and assert once (per-iteration ck_assert is slow in fork mode). */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "codec.h"
#include "service.h"
#include "testutil.h"

static const limits_t limits = {.max_elements = 100000, .max_depth = 16};

/* ---- bodies behind a guard page ---- */

typedef struct {
  char *map;
  size_t maplen;
  char *p; /* the body: ends exactly at the guard page */
} guarded_t;

static guarded_t guard_copy(const void *src, size_t len) {
  size_t pg = (size_t)sysconf(_SC_PAGESIZE);
  size_t pages = (len + pg - 1) / pg;
  if (pages == 0) pages = 1;
  guarded_t g;
  g.maplen = (pages + 1) * pg;
  g.map = mmap(NULL, g.maplen, PROT_READ | PROT_WRITE,
               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ck_assert_ptr_ne(g.map, MAP_FAILED);
  ck_assert_int_eq(mprotect(g.map + pages * pg, pg, PROT_NONE), 0);
  g.p = g.map + pages * pg - len;
  if (len) memcpy(g.p, src, len);
  return g;
}

static void guard_free(guarded_t *g) { munmap(g->map, g->maplen); }

/* ---- building .npy files ---- */

typedef struct {
  unsigned char *data;
  size_t len;
} bytes_t;

/* A .npy file with this exact header text (no padding added): magic,
 * version major.minor, the header length field (2 bytes for 1.x, 4 after),
 * header, data. */
static bytes_t npy_raw(int major, int minor, const char *header,
                       const void *data, size_t datalen) {
  size_t hl = strlen(header);
  size_t prefix = major == 1 ? 10 : 12;
  bytes_t b;
  b.len = prefix + hl + datalen;
  b.data = malloc(b.len ? b.len : 1);
  ck_assert_ptr_nonnull(b.data);
  memcpy(b.data, "\x93NUMPY", 6);
  b.data[6] = (unsigned char)major;
  b.data[7] = (unsigned char)minor;
  b.data[8] = (unsigned char)(hl & 0xFF);
  b.data[9] = (unsigned char)((hl >> 8) & 0xFF);
  if (prefix == 12) {
    b.data[10] = (unsigned char)((hl >> 16) & 0xFF);
    b.data[11] = (unsigned char)((hl >> 24) & 0xFF);
  }
  memcpy(b.data + prefix, header, hl);
  if (datalen) memcpy(b.data + prefix + hl, data, datalen);
  return b;
}

/* As numpy writes it: the dict, padded with spaces and a final '\n' so the
 * data starts at a multiple of 64. */
static bytes_t npy_file(int major, const char *descr, int fortran,
                        const char *shape, const void *data, size_t datalen) {
  char header[512];
  int n = snprintf(header, sizeof header,
                   "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }",
                   descr, fortran ? "True" : "False", shape);
  size_t prefix = major == 1 ? 10 : 12;
  size_t total = (prefix + (size_t)n + 1 + 63) / 64 * 64;
  while ((size_t)n < total - prefix - 1) header[n++] = ' ';
  header[n++] = '\n';
  header[n] = '\0';
  return npy_raw(major, 0, header, data, datalen);
}

static bytes_t npy_f32(const char *shape, const float *x, size_t n) {
  return npy_file(1, "<f4", 0, shape, x, n * sizeof(float));
}

/* ---- calling the service ---- */

typedef struct {
  op_t op;
  const char *accept;
  const query_param_t *query;
  size_t nquery;
} call_t;

static void call_npy(const call_t *c, const bytes_t *body, reply_t *r) {
  guarded_t g = guard_copy(body->data, body->len);
  service_input_t in = {.op = c->op, .body = g.p, .len = body->len,
                        .content_type = "application/x-npy",
                        .accept = c->accept, .query = c->query,
                        .nquery = c->nquery};
  service_handle(&in, &limits, r);
  guard_free(&g);
}

/* Whether r is a problem with this status and code; *why says otherwise. */
static int is_problem(const reply_t *r, int status, const char *code,
                      char *why, size_t cap) {
  if (r->status != status) {
    snprintf(why, cap, "status %d, want %d: %.*s", r->status, status,
             (int)r->len, r->body ? r->body : "");
    return 0;
  }
  if (r->content_type == NULL ||
      strcmp(r->content_type, "application/problem+json") != 0) {
    snprintf(why, cap, "content type %s", r->content_type ? r->content_type : "(none)");
    return 0;
  }
  json_t *doc = json_loadb(r->body, r->len, 0, NULL);
  const char *got = json_string_value(json_object_get(doc, "code"));
  int ok = got != NULL && strcmp(got, code) == 0 &&
           json_integer_value(json_object_get(doc, "status")) == status &&
           json_string_value(json_object_get(doc, "detail")) != NULL;
  if (!ok)
    snprintf(why, cap, "code %s, want %s: %.*s", got ? got : "(none)", code,
             (int)r->len, r->body);
  json_decref(doc);
  return ok;
}

static void expect_problem(const call_t *c, const bytes_t *body, int status,
                           const char *code) {
  reply_t r;
  char why[768];
  call_npy(c, body, &r);
  int ok = is_problem(&r, status, code, why, sizeof why);
  reply_free(&r);
  ck_assert_msg(ok, "%s", why);
}

/* ---- reading a .npy response ---- */

typedef struct {
  char descr[8];
  int fortran;
  int rank;
  int64_t shape[8];
  const unsigned char *data;
  size_t datalen;
} npy_view_t;

/* A tiny reader for what normd writes: version 1.0, the dict numpy writes,
 * 64-byte aligned data. Returns NULL, or what is wrong. */
static const char *npy_read(const char *body, size_t len, npy_view_t *v) {
  const unsigned char *b = (const unsigned char *)body;
  memset(v, 0, sizeof *v);
  if (len < 10 || memcmp(b, "\x93NUMPY", 6) != 0) return "no magic";
  if (b[6] != 1 || b[7] != 0) return "not version 1.0";
  size_t hl = (size_t)b[8] | (size_t)b[9] << 8;
  if (10 + hl > len) return "header past the body";
  if ((10 + hl) % 64 != 0) return "data not 64-byte aligned";
  if (body[10 + hl - 1] != '\n') return "header does not end in a newline";
  char header[512];
  if (hl >= sizeof header) return "header too long";
  memcpy(header, body + 10, hl);
  header[hl] = '\0';
  const char *d = strstr(header, "'descr': '");
  if (d == NULL || sscanf(d + 10, "%7[^']", v->descr) != 1) return "no descr";
  if (strstr(header, "'fortran_order': False") != NULL) v->fortran = 0;
  else if (strstr(header, "'fortran_order': True") != NULL) v->fortran = 1;
  else return "no fortran_order";
  const char *s = strstr(header, "'shape': (");
  if (s == NULL) return "no shape";
  s += 10;
  while (*s != ')') {
    char *end;
    long long dim = strtoll(s, &end, 10);
    if (end == s || v->rank == 8) return "bad shape";
    v->shape[v->rank++] = dim;
    s = end;
    if (*s == ',') s++;
    while (*s == ' ') s++;
  }
  if (header[0] != '{' || strstr(header, "}") == NULL) return "not a dict";
  v->data = b + 10 + hl;
  v->datalen = len - 10 - hl;
  return NULL;
}

static size_t view_numel(const npy_view_t *v) {
  size_t n = 1;
  for (int i = 0; i < v->rank; i++) n *= (size_t)v->shape[i];
  return n;
}

static double view_get(const npy_view_t *v, size_t i) {
  if (strcmp(v->descr, "<f8") == 0) {
    double d;
    memcpy(&d, v->data + i * 8, 8);
    return d;
  }
  if (strcmp(v->descr, "<f2") == 0) {
    uint16_t h;
    memcpy(&h, v->data + i * 2, 2);
    norm_tensor_t t = {.dtype = NORM_F16, .rank = 1, .shape = {1}, .data = &h};
    return norm_tensor_get(&t, 0);
  }
  float f;
  memcpy(&f, v->data + i * 4, 4);
  return f;
}

/* Layer norm over the last `row` elements, in double. */
static void ref_layer(const double *x, size_t n, size_t row, double eps,
                      double *y, double *mean_out, double *rstd_out) {
  for (size_t r = 0; r < n / row; r++) {
    double mean = 0, m2 = 0;
    for (size_t i = 0; i < row; i++) mean += x[r * row + i];
    mean /= (double)row;
    for (size_t i = 0; i < row; i++)
      m2 += (x[r * row + i] - mean) * (x[r * row + i] - mean);
    double rstd = 1.0 / sqrt(m2 / (double)row + eps);
    for (size_t i = 0; i < row; i++) y[r * row + i] = (x[r * row + i] - mean) * rstd;
    if (mean_out) mean_out[r] = mean;
    if (rstd_out) rstd_out[r] = rstd;
  }
}

/* Test data: 24 values with distinct rows. */
static void sample(double *x, size_t n, uint64_t seed) {
  for (size_t i = 0; i < n; i++) x[i] = tu_rand_range(&seed, -3.0, 5.0);
}

static void to_f32(const double *x, float *f, size_t n) {
  for (size_t i = 0; i < n; i++) f[i] = (float)x[i];
}

static void swap_each(void *p, size_t n, size_t size) {
  unsigned char *b = p;
  for (size_t i = 0; i < n; i++)
    for (size_t k = 0; k < size / 2; k++) {
      unsigned char t = b[i * size + k];
      b[i * size + k] = b[i * size + size - 1 - k];
      b[i * size + size - 1 - k] = t;
    }
}

/* The output .npy of a 200 reply; fails the test otherwise. */
static npy_view_t expect_npy(const reply_t *r, const char *descr) {
  ck_assert_msg(r->status == 200, "status %d: %.*s", r->status, (int)r->len,
                r->body ? r->body : "");
  ck_assert_str_eq(r->content_type, "application/x-npy");
  npy_view_t v;
  const char *err = npy_read(r->body, r->len, &v);
  ck_assert_msg(err == NULL, "bad .npy response: %s", err ? err : "");
  ck_assert_str_eq(v.descr, descr);
  ck_assert_int_eq(v.fortran, 0);
  size_t size = descr[2] == '8' ? 8 : descr[2] == '4' ? 4 : 2;
  ck_assert_uint_eq(v.datalen, view_numel(&v) * size);
  return v;
}

/* ---- valid files ---- */

START_TEST(test_layer_npy_roundtrip) {
  double x[24], want[24];
  float f[24];
  sample(x, 24, 1);
  to_f32(x, f, 24);
  for (int i = 0; i < 24; i++) x[i] = f[i];
  ref_layer(x, 24, 6, 1e-5, want, NULL, NULL);
  bytes_t body = npy_f32("(4, 6)", f, 24);
  call_t c = {.op = OP_LAYER};
  reply_t r;
  call_npy(&c, &body, &r);
  npy_view_t v = expect_npy(&r, "<f4");
  ck_assert_int_eq(v.rank, 2);
  ck_assert_int_eq(v.shape[0], 4);
  ck_assert_int_eq(v.shape[1], 6);
  /* the header is exactly what numpy writes for this array */
  static const char want_header[] = "{'descr': '<f4', 'fortran_order': False, "
                                    "'shape': (4, 6), }";
  ck_assert_ptr_eq(memmem(r.body, r.len, want_header, sizeof want_header - 1), r.body + 10);
  int bad = -1;
  for (int i = 0; i < 24 && bad < 0; i++)
    if (!tu_close(view_get(&v, (size_t)i), want[i], 2e-6)) bad = i;
  ck_assert_msg(bad < 0, "element %d: %g, want %g", bad, view_get(&v, (size_t)bad),
                bad >= 0 ? want[bad] : 0.0);
  reply_free(&r);
  free(body.data);

  /* rank 1: Python's one-element tuple "(5,)" */
  float one[5] = {1, 2, 3, 4, 10};
  body = npy_f32("(5,)", one, 5);
  call_npy(&c, &body, &r);
  v = expect_npy(&r, "<f4");
  ck_assert_int_eq(v.rank, 1);
  ck_assert_int_eq(v.shape[0], 5);
  ck_assert_ptr_nonnull(memmem(r.body, r.len, "'shape': (5,), }", 16));
  reply_free(&r);
  free(body.data);
}
END_TEST

/* The same array as 1.0, 2.0 and 3.0 files gives byte-identical answers;
 * the other norms take .npy too. */
START_TEST(test_versions) {
  double x[24];
  float f[24];
  sample(x, 24, 2);
  to_f32(x, f, 24);
  static const op_t ops[] = {OP_LAYER, OP_RMS, OP_BATCH, OP_INSTANCE};
  for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
    call_t c = {.op = ops[k]};
    reply_t first;
    memset(&first, 0, sizeof first);
    for (int major = 1; major <= 3; major++) {
      bytes_t body = npy_file(major, "<f4", 0, "(2, 3, 4)", f, sizeof f);
      reply_t r;
      call_npy(&c, &body, &r);
      free(body.data);
      npy_view_t v = expect_npy(&r, "<f4");
      ck_assert_int_eq(v.rank, 3);
      if (major == 1) {
        first = r;
      } else {
        ck_assert_msg(r.len == first.len && memcmp(r.body, first.body, r.len) == 0,
                      "op %d: version %d.0 differs from 1.0", (int)ops[k], major);
        reply_free(&r);
      }
    }
    reply_free(&first);
  }
  /* group norm needs num_groups from the query */
  query_param_t q[] = {{"num_groups", "2"}};
  call_t c = {.op = OP_GROUP, .query = q, .nquery = 1};
  bytes_t body = npy_file(3, "<f4", 0, "(2, 4, 3)", f, sizeof f);
  reply_t r;
  call_npy(&c, &body, &r);
  expect_npy(&r, "<f4");
  reply_free(&r);
  free(body.data);
}
END_TEST

/* <f8, <f2, >f4, >f8, >f2: the output keeps the input's dtype, always
 * little-endian; big-endian input gives exactly the little-endian answer. */
START_TEST(test_dtypes_and_endianness) {
  double x[12];
  sample(x, 12, 3);
  call_t c = {.op = OP_LAYER};
  static const struct {
    const char *le, *be;
    norm_dtype_t dtype;
    size_t size;
  } cases[] = {{"<f4", ">f4", NORM_F32, 4}, {"<f8", ">f8", NORM_F64, 8},
               {"<f2", ">f2", NORM_F16, 2}};
  for (size_t k = 0; k < 3; k++) {
    unsigned char le[96], be[96];
    norm_tensor_t t = {.dtype = cases[k].dtype, .rank = 1, .shape = {12}, .data = le};
    for (size_t i = 0; i < 12; i++) norm_tensor_set(&t, i, x[i]);
    memcpy(be, le, 12 * cases[k].size);
    swap_each(be, 12, cases[k].size);
    bytes_t a = npy_file(1, cases[k].le, 0, "(3, 4)", le, 12 * cases[k].size);
    bytes_t b = npy_file(1, cases[k].be, 0, "(3, 4)", be, 12 * cases[k].size);
    reply_t ra, rb;
    call_npy(&c, &a, &ra);
    call_npy(&c, &b, &rb);
    npy_view_t va = expect_npy(&ra, cases[k].le);
    expect_npy(&rb, cases[k].le);
    ck_assert_msg(ra.len == rb.len && memcmp(ra.body, rb.body, ra.len) == 0,
                  "%s and %s inputs give different answers", cases[k].le, cases[k].be);
    /* against the reference in double, from the values as the dtype holds them */
    double xs[12], want[12];
    for (size_t i = 0; i < 12; i++) xs[i] = norm_tensor_get(&t, i);
    ref_layer(xs, 12, 4, 1e-5, want, NULL, NULL);
    double tol = cases[k].dtype == NORM_F64 ? 1e-12 : cases[k].dtype == NORM_F32 ? 2e-6 : 2e-3;
    int bad = -1;
    for (int i = 0; i < 12 && bad < 0; i++)
      if (!tu_close(view_get(&va, (size_t)i), want[i], tol)) bad = i;
    ck_assert_msg(bad < 0, "%s element %d: %g, want %g", cases[k].le, bad,
                  bad >= 0 ? view_get(&va, (size_t)bad) : 0.0, bad >= 0 ? want[bad] : 0.0);
    reply_free(&ra);
    reply_free(&rb);
    free(a.data);
    free(b.data);
  }
}
END_TEST

/* float16 in, float16 out: each element is the reference rounded once
 * (a one-ulp slack for kernels that accumulate differently). */
START_TEST(test_float16_in_out) {
  uint16_t h[16];
  norm_tensor_t t = {.dtype = NORM_F16, .rank = 1, .shape = {16}, .data = h};
  double x[16], want[16];
  sample(x, 16, 4);
  for (size_t i = 0; i < 16; i++) {
    norm_tensor_set(&t, i, x[i]);
    x[i] = norm_tensor_get(&t, i);
  }
  ref_layer(x, 16, 8, 1e-5, want, NULL, NULL);
  bytes_t body = npy_file(2, "<f2", 0, "(2, 8)", h, sizeof h);
  call_t c = {.op = OP_LAYER};
  reply_t r;
  call_npy(&c, &body, &r);
  npy_view_t v = expect_npy(&r, "<f2");
  int bad = -1;
  for (int i = 0; i < 16 && bad < 0; i++) {
    uint16_t got;
    memcpy(&got, v.data + 2 * i, 2);
    int d = (int)got - (int)norm_f16_from_double(want[i]);
    if (d < -1 || d > 1) bad = i;
  }
  ck_assert_msg(bad < 0, "float16 element %d is off by more than one ulp", bad);
  reply_free(&r);
  free(body.data);
}
END_TEST

/* Column-major files are transposed: a fortran_order True file and the C
 * order file of the same array give the same answer (rank 2 and 3, also
 * big-endian float64). */
START_TEST(test_fortran_order) {
  static const struct {
    const char *shape;
    int rank;
    int64_t dims[3];
    op_t op;
  } cases[] = {{"(3, 5)", 2, {3, 5, 1}, OP_LAYER},
               {"(2, 3, 4)", 3, {2, 3, 4}, OP_LAYER},
               {"(2, 3, 4)", 3, {2, 3, 4}, OP_INSTANCE},
               {"(4, 2, 3)", 3, {4, 2, 3}, OP_BATCH}};
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    int64_t d0 = cases[k].dims[0], d1 = cases[k].dims[1];
    int64_t d2 = cases[k].rank == 3 ? cases[k].dims[2] : 1;
    size_t n = (size_t)(d0 * d1 * d2);
    double x[64];
    float c_order[64], f_order[64];
    double f64_f[64];
    sample(x, n, 10 + k);
    for (int64_t i = 0; i < d0; i++)
      for (int64_t j = 0; j < d1; j++)
        for (int64_t l = 0; l < d2; l++) {
          size_t ci = (size_t)((i * d1 + j) * d2 + l);
          size_t fi = (size_t)(i + d0 * (j + d1 * l));
          c_order[ci] = (float)x[ci];
          f_order[fi] = (float)x[ci];
          f64_f[fi] = (double)(float)x[ci];
        }
    swap_each(f64_f, n, 8);
    bytes_t bc = npy_file(1, "<f4", 0, cases[k].shape, c_order, n * 4);
    bytes_t bf = npy_file(1, "<f4", 1, cases[k].shape, f_order, n * 4);
    bytes_t bbe = npy_file(3, ">f8", 1, cases[k].shape, f64_f, n * 8);
    query_param_t q[] = {{"output_dtype", "float32"}};
    call_t c = {.op = cases[k].op};
    call_t c32 = {.op = cases[k].op, .query = q, .nquery = 1};
    reply_t rc, rf, rbe;
    call_npy(&c, &bc, &rc);
    call_npy(&c, &bf, &rf);
    call_npy(&c32, &bbe, &rbe);
    npy_view_t vc = expect_npy(&rc, "<f4");
    npy_view_t vf = expect_npy(&rf, "<f4");
    npy_view_t vbe = expect_npy(&rbe, "<f4");
    ck_assert_int_eq(vf.rank, cases[k].rank);
    ck_assert_int_eq(vf.shape[0], d0);
    ck_assert_int_eq(vf.shape[1], d1);
    ck_assert_msg(vc.datalen == vf.datalen && memcmp(vc.data, vf.data, vc.datalen) == 0,
                  "case %zu: fortran order file gives another answer", k);
    int bad = -1;
    for (size_t i = 0; i < n && bad < 0; i++)
      if (!tu_close(view_get(&vbe, i), view_get(&vc, i), 1e-6)) bad = (int)i;
    ck_assert_msg(bad < 0, "case %zu: >f8 fortran element %d differs", k, bad);
    if (cases[k].op == OP_LAYER) { /* and against the reference */
      double xs[64], want[64];
      for (size_t i = 0; i < n; i++) xs[i] = c_order[i];
      size_t row = (size_t)(cases[k].rank == 3 ? d2 : d1);
      ref_layer(xs, n, row, 1e-5, want, NULL, NULL);
      for (size_t i = 0; i < n && bad < 0; i++)
        if (!tu_close(view_get(&vf, i), want[i], 2e-6)) bad = (int)i;
      ck_assert_msg(bad < 0, "case %zu: element %d is not the reference", k, bad);
    }
    reply_free(&rc);
    reply_free(&rf);
    reply_free(&rbe);
    free(bc.data);
    free(bf.data);
    free(bbe.data);
  }
}
END_TEST

/* Accept: application/json answers the usual JSON document; Accept:
 * application/octet-stream the binary framing. */
START_TEST(test_other_responses) {
  float f[6] = {1, 2, 3, 4, 5, 7};
  bytes_t body = npy_f32("(2, 3)", f, 6);
  call_t c = {.op = OP_LAYER, .accept = "application/json"};
  reply_t r;
  call_npy(&c, &body, &r);
  ck_assert_int_eq(r.status, 200);
  ck_assert_str_eq(r.content_type, "application/json");
  json_t *doc = json_loadb(r.body, r.len, 0, NULL);
  ck_assert_ptr_nonnull(doc);
  json_t *out = json_object_get(doc, "output");
  ck_assert_str_eq(json_string_value(json_object_get(out, "dtype")), "float32");
  ck_assert_int_eq(json_array_size(json_object_get(out, "data")), 6);
  json_t *stats = json_object_get(doc, "stats");
  ck_assert(tu_close(json_number_value(json_array_get(json_object_get(stats, "mean"), 1)),
                     16.0 / 3, 1e-6));
  json_decref(doc);
  reply_free(&r);

  c.accept = "application/octet-stream";
  call_npy(&c, &body, &r);
  ck_assert_int_eq(r.status, 200);
  ck_assert_str_eq(r.content_type, "application/octet-stream");
  ck_assert(r.header_length > 0 && (size_t)r.header_length + 24 == r.len);
  doc = json_loadb(r.body, (size_t)r.header_length, 0, NULL);
  ck_assert_ptr_nonnull(doc);
  out = json_object_get(doc, "output");
  ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(out, "parameters"),
                                                      "binary_data_size")), 24);
  float y[6];
  memcpy(y, r.body + r.header_length, 24);
  ck_assert(tu_close(y[0], -1.2247357, 1e-6));
  ck_assert(tu_close(y[3], -1.0690415, 1e-6));
  json_decref(doc);
  reply_free(&r);

  /* a wildcard keeps the request's format */
  c.accept = "*/*";
  call_npy(&c, &body, &r);
  expect_npy(&r, "<f4");
  reply_free(&r);
  c.accept = "text/csv";
  call_npy(&c, &body, &r);
  ck_assert_int_eq(r.status, 406);
  reply_free(&r);
  free(body.data);
}
END_TEST

START_TEST(test_output_dtype) {
  float f[6] = {1, 2, 3, 4, 5, 7};
  bytes_t body = npy_f32("(2, 3)", f, 6);
  static const struct {
    const char *dtype, *descr;
  } cases[] = {{"float64", "<f8"}, {"float16", "<f2"}, {"float32", "<f4"}};
  for (size_t k = 0; k < 3; k++) {
    query_param_t q[] = {{"output_dtype", cases[k].dtype}};
    call_t c = {.op = OP_LAYER, .query = q, .nquery = 1};
    reply_t r;
    call_npy(&c, &body, &r);
    npy_view_t v = expect_npy(&r, cases[k].descr);
    ck_assert(tu_close(view_get(&v, 3), -1.0690415, 1e-3));
    reply_free(&r);
  }
  /* .npy has no bfloat16: 406, and the binary forms are offered instead */
  query_param_t q[] = {{"output_dtype", "bfloat16"}};
  call_t c = {.op = OP_LAYER, .query = q, .nquery = 1};
  expect_problem(&c, &body, 406, "not_acceptable");
  c.accept = "application/x-npy";
  expect_problem(&c, &body, 406, "not_acceptable");
  /* ... which work */
  c.accept = "application/octet-stream";
  reply_t r;
  call_npy(&c, &body, &r);
  ck_assert_int_eq(r.status, 200);
  ck_assert_uint_eq(r.len, (size_t)r.header_length + 12);
  reply_free(&r);
  c.accept = "application/json";
  call_npy(&c, &body, &r);
  ck_assert_int_eq(r.status, 200);
  ck_assert_ptr_nonnull(strstr(r.body, "\"dtype\":\"bfloat16\""));
  reply_free(&r);
  free(body.data);
}
END_TEST

/* Query parameters carry every scalar field, with the JSON names. */
START_TEST(test_query_parameters) {
  double x[24], want[24], mean[4], rstd[4];
  float f[24];
  sample(x, 24, 5);
  to_f32(x, f, 24);
  for (int i = 0; i < 24; i++) x[i] = f[i];
  bytes_t body = npy_f32("(2, 2, 6)", f, 24);
  reply_t r;

  /* normalized_shape=2,6: one group per leading index, eps from the query */
  query_param_t q1[] = {{"normalized_shape", "2,6"}, {"eps", "0.5"},
                        {"return", "stats"}};
  call_t c = {.op = OP_LAYER, .accept = "application/json", .query = q1, .nquery = 3};
  ref_layer(x, 24, 12, 0.5, want, mean, rstd);
  call_npy(&c, &body, &r);
  ck_assert_int_eq(r.status, 200);
  json_t *doc = json_loadb(r.body, r.len, 0, NULL);
  ck_assert_ptr_null(json_object_get(doc, "output")); /* return=stats */
  json_t *stats = json_object_get(doc, "stats");
  ck_assert_int_eq(json_array_size(json_object_get(stats, "shape")), 1);
  ck_assert_int_eq(json_integer_value(json_array_get(json_object_get(stats, "shape"), 0)), 2);
  for (int g = 0; g < 2; g++) {
    ck_assert(tu_close(json_number_value(json_array_get(json_object_get(stats, "mean"), (size_t)g)),
                       mean[g], 1e-6));
    ck_assert(tu_close(json_number_value(json_array_get(json_object_get(stats, "rstd"), (size_t)g)),
                       rstd[g], 1e-6));
  }
  json_decref(doc);
  reply_free(&r);

  /* the same as a JSON list, and as a single integer */
  query_param_t q2[] = {{"normalized_shape", "[2,6]"}, {"eps", "5e-1"}};
  query_param_t q3[] = {{"normalized_shape", "6"}, {"eps", "1e-5"}};
  c = (call_t){.op = OP_LAYER, .query = q2, .nquery = 2};
  call_npy(&c, &body, &r);
  npy_view_t v = expect_npy(&r, "<f4");
  int bad = -1;
  for (int i = 0; i < 24 && bad < 0; i++)
    if (!tu_close(view_get(&v, (size_t)i), want[i], 2e-6)) bad = i;
  ck_assert_msg(bad < 0, "normalized_shape=[2,6]: element %d", bad);
  reply_free(&r);
  ref_layer(x, 24, 6, 1e-5, want, NULL, NULL);
  c = (call_t){.op = OP_LAYER, .query = q3, .nquery = 2};
  call_npy(&c, &body, &r);
  v = expect_npy(&r, "<f4");
  for (int i = 0; i < 24 && bad < 0; i++)
    if (!tu_close(view_get(&v, (size_t)i), want[i], 2e-6)) bad = i;
  ck_assert_msg(bad < 0, "normalized_shape=6: element %d", bad);
  reply_free(&r);

  /* layer norm's string choices; axis */
  query_param_t q4[] = {{"variance", "unbiased"}, {"eps_placement", "outside_sqrt"},
                        {"axis", "-1"}};
  c = (call_t){.op = OP_LAYER, .query = q4, .nquery = 3};
  call_npy(&c, &body, &r);
  expect_npy(&r, "<f4");
  reply_free(&r);

  /* group norm: num_groups; a group count that does not divide C is 422 */
  query_param_t q5[] = {{"num_groups", "2"}, {"eps", "1e-3"}};
  c = (call_t){.op = OP_GROUP, .accept = "application/json", .query = q5, .nquery = 2};
  call_npy(&c, &body, &r);
  ck_assert_int_eq(r.status, 200);
  ck_assert_ptr_nonnull(strstr(r.body, "\"stats\":{\"shape\":[2,2]"));
  reply_free(&r);
  query_param_t q6[] = {{"num_groups", "3"}};
  c = (call_t){.op = OP_GROUP, .query = q6, .nquery = 1};
  expect_problem(&c, &body, 422, "bad_num_groups");
  c.nquery = 0;
  expect_problem(&c, &body, 422, "missing_field");

  /* batch norm: train with momentum; eval needs running statistics, which
   * a .npy request cannot carry (the framing can) */
  query_param_t q7[] = {{"mode", "train"}, {"momentum", "0.25"}};
  c = (call_t){.op = OP_BATCH, .query = q7, .nquery = 2};
  call_npy(&c, &body, &r);
  expect_npy(&r, "<f4");
  reply_free(&r);
  query_param_t q8[] = {{"mode", "eval"}};
  c = (call_t){.op = OP_BATCH, .query = q8, .nquery = 1};
  expect_problem(&c, &body, 422, "running_stats_shape");
  query_param_t q9[] = {{"mode", "\"eval\""}};
  c = (call_t){.op = OP_BATCH, .query = q9, .nquery = 1};
  expect_problem(&c, &body, 422, "running_stats_shape");
  free(body.data);
}
END_TEST

START_TEST(test_query_errors) {
  float f[6] = {1, 2, 3, 4, 5, 7};
  bytes_t body = npy_f32("(2, 3)", f, 6);
  static const struct {
    op_t op;
    query_param_t q[2];
    size_t nq;
    int status;
    const char *code;
  } cases[] = {
      /* the body is the input */
      {OP_LAYER, {{"input", "[1,2,3]"}}, 1, 422, "conflicting_fields"},
      {OP_LAYER, {{"input", "1,2,3"}}, 1, 422, "conflicting_fields"},
      /* tensors other than the input cannot come by query: use the framing */
      {OP_LAYER, {{"weight", "1,2,3"}}, 1, 422, "bad_field"},
      {OP_LAYER, {{"bias", "[0,0,1]"}}, 1, 422, "bad_field"},
      {OP_BATCH, {{"running_mean", "0,0,0"}, {"running_var", "1,1,1"}}, 2, 422, "bad_field"},
      {OP_BATCH, {{"mode", "given"}, {"mean", "0,0,0"}}, 2, 422, "bad_field"},
      /* duplicates */
      {OP_LAYER, {{"eps", "1e-5"}, {"eps", "1e-3"}}, 2, 400, "duplicate_key"},
      {OP_LAYER, {{"normalized_shape", "3"}, {"normalized_shape", "3"}}, 2, 400, "duplicate_key"},
      /* unknown and ill-typed fields, as in JSON */
      {OP_LAYER, {{"epsilon", "1e-5"}}, 1, 422, "unknown_field"},
      {OP_RMS, {{"num_groups", "2"}}, 1, 422, "unknown_field"},
      {OP_LAYER, {{"eps", "small"}}, 1, 422, "bad_field"},
      {OP_LAYER, {{"eps", ""}}, 1, 422, "bad_field"},
      {OP_LAYER, {{"eps", "-1"}}, 1, 422, "bad_eps"},
      {OP_LAYER, {{"normalized_shape", "4"}}, 1, 422, "shape_mismatch"},
      {OP_LAYER, {{"normalized_shape", "2,x"}}, 1, 422, "bad_field"},
      {OP_LAYER, {{"axis", "5"}}, 1, 422, "bad_axis"},
      {OP_LAYER, {{"variance", "sample"}}, 1, 422, "bad_field"},
      {OP_LAYER, {{"output_dtype", "int8"}}, 1, 422, "unknown_dtype"},
      {OP_BATCH, {{"mode", "test"}}, 1, 422, "bad_field"},
      {OP_GROUP, {{"num_groups", "1.5"}}, 1, 422, "bad_field"},
      {OP_LAYER, {{"return", "everything"}}, 1, 422, "bad_field"},
  };
  int failures = 0;
  char first[1024] = "";
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    call_t c = {.op = cases[k].op, .query = cases[k].q, .nquery = cases[k].nq};
    reply_t r;
    char why[768];
    call_npy(&c, &body, &r);
    if (!is_problem(&r, cases[k].status, cases[k].code, why, sizeof why) &&
        failures++ == 0)
      snprintf(first, sizeof first, "case %zu (%s=%s): %s", k, cases[k].q[0].key,
               cases[k].q[0].value, why);
    reply_free(&r);
  }
  ck_assert_msg(failures == 0, "%d query cases failed; first: %s", failures, first);
  free(body.data);
}
END_TEST

/* ---- cruel files ---- */

START_TEST(test_bad_magic_and_version) {
  float f[6] = {1, 2, 3, 4, 5, 7};
  bytes_t good = npy_f32("(2, 3)", f, 6);
  call_t c = {.op = OP_LAYER};
  bytes_t b = {good.data, good.len};

  /* wrong magic: each of the six bytes, and files too short for one */
  int failures = 0;
  char first[1024] = "";
  for (int i = 0; i < 6; i++) {
    unsigned char saved = good.data[i];
    good.data[i] ^= 0x20;
    reply_t r;
    char why[768];
    call_npy(&c, &b, &r);
    if (!is_problem(&r, 400, "npy_bad_magic", why, sizeof why) && failures++ == 0)
      snprintf(first, sizeof first, "magic byte %d: %s", i, why);
    reply_free(&r);
    good.data[i] = saved;
  }
  for (size_t len = 0; len < 10; len++) {
    bytes_t cut = {good.data, len};
    reply_t r;
    char why[768];
    call_npy(&c, &cut, &r);
    if (!is_problem(&r, 400, "npy_bad_magic", why, sizeof why) && failures++ == 0)
      snprintf(first, sizeof first, "%zu bytes: %s", len, why);
    reply_free(&r);
  }
  ck_assert_msg(failures == 0, "%d magic cases failed; first: %s", failures, first);

  /* a JSON body sent as .npy */
  const char *json = "{\"input\": [1, 2, 3]}";
  bytes_t js = {(unsigned char *)json, strlen(json)};
  expect_problem(&c, &js, 400, "npy_bad_magic");

  /* versions other than 1, 2, 3 */
  static const unsigned char versions[] = {0, 4, 5, 0xFF};
  for (size_t k = 0; k < sizeof versions; k++) {
    good.data[6] = versions[k];
    expect_problem(&c, &b, 400, "npy_bad_version");
  }
  good.data[6] = 1;
  free(good.data);
}
END_TEST

/* Header length fields that point past the body; v2/v3 files cut inside
 * their 4-byte length. */
START_TEST(test_header_length_past_body) {
  float f[6] = {1, 2, 3, 4, 5, 7};
  call_t c = {.op = OP_LAYER};
  for (int major = 1; major <= 3; major++) {
    bytes_t good = npy_file(major, "<f4", 0, "(2, 3)", f, 24);
    size_t prefix = major == 1 ? 10 : 12;
    /* one past the body, and the largest the field can say */
    size_t body_rest = good.len - prefix;
    size_t lens[] = {body_rest + 1, major == 1 ? 0xFFFF : 0xFFFFFFFF};
    for (size_t k = 0; k < 2; k++) {
      good.data[8] = (unsigned char)(lens[k] & 0xFF);
      good.data[9] = (unsigned char)((lens[k] >> 8) & 0xFF);
      if (major > 1) {
        good.data[10] = (unsigned char)((lens[k] >> 16) & 0xFF);
        good.data[11] = (unsigned char)((lens[k] >> 24) & 0xFF);
      }
      expect_problem(&c, &good, 400, "npy_truncated");
    }
    /* the whole header, but no data */
    bytes_t fresh = npy_file(major, "<f4", 0, "(2, 3)", f, 24);
    bytes_t nodata = {fresh.data, fresh.len - 24};
    expect_problem(&c, &nodata, 400, "npy_size_mismatch");
    /* cut inside the header */
    bytes_t cut = {fresh.data, prefix + 20};
    expect_problem(&c, &cut, 400, "npy_truncated");
    free(fresh.data);
    free(good.data);
  }
  bytes_t v2 = npy_file(2, "<f4", 0, "(2, 3)", f, 24);
  bytes_t short2 = {v2.data, 11};
  expect_problem(&c, &short2, 400, "npy_truncated");
  /* header length zero: no dict at all */
  bytes_t empty = npy_raw(1, 0, "", f, 24);
  expect_problem(&c, &empty, 400, "npy_bad_header");
  free(empty.data);
  free(v2.data);
}
END_TEST

/* Headers that are not the dict numpy writes. */
START_TEST(test_bad_headers) {
  static const char *const headers[] = {
      "",
      "\n",
      "not a dict\n",
      "[\"descr\", \"<f4\"]\n",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), ",     /* unterminated dict */
      "{'descr': '<f4', 'fortran_order': False}\n",                     /* missing shape */
      "{'descr': '<f4', 'shape': (2, 3)}\n",                            /* missing fortran_order */
      "{'fortran_order': False, 'shape': (2, 3)}\n",                    /* missing descr */
      "{}\n",
      "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}\n",
      "{'descr': '<f4', 'fortran_order': False, 'fortran_order': False, 'shape': (2, 3)}\n",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'shape': (2, 3)}\n",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'strides': (12, 4)}\n",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), '': 1}\n",
      "{descr: '<f4', 'fortran_order': False, 'shape': (2, 3)}\n",      /* unquoted key */
      "{'descr': <f4, 'fortran_order': False, 'shape': (2, 3)}\n",      /* unquoted value */
      "{'shape': (2, 3), 'fortran_order': False, 'descr': '<f4}\n",     /* quote not closed */
      "{'descr\": '<f4', 'fortran_order': False, 'shape': (2, 3)}\n",   /* mixed quotes */
      "{'descr': '<f4' 'fortran_order': False, 'shape': (2, 3)}\n",     /* missing comma */
      "{'descr' '<f4', 'fortran_order': False, 'shape': (2, 3)}\n",     /* missing colon */
      "{'descr': '<f4', 'fortran_order': false, 'shape': (2, 3)}\n",    /* JSON boolean */
      "{'descr': '<f4', 'fortran_order': 0, 'shape': (2, 3)}\n",
      "{'descr': '<f4', 'fortran_order': Truee, 'shape': (2, 3)}\n",
      "{'descr': '<f4', 'fortran_order': None, 'shape': (2, 3)}\n",
      "{'descr': '<f4', 'fortran_order': False, 'shape': [2, 3]}\n",    /* list, not tuple */
      "{'descr': '<f4', 'fortran_order': False, 'shape': 6}\n",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3}\n",     /* unterminated tuple */
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3\n",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2 3)}\n",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2,, 3)}\n",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (,)}\n",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3.0)}\n",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3L)}\n",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2, x)}\n",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2, '3')}\n",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2, +3)}\n",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2, --3)}\n",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}}\n",   /* trailing junk */
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)} x\n",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)},\n",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3),,}\n",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}{}\n",
      "{'descr': 'a very long descr that does not fit anywhere at all', "
      "'fortran_order': False, 'shape': (2, 3)}\n",
      "{'a key that is much longer than any key numpy writes': 1, "
      "'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}\n",
      "{'descr': '<\\x66\\x34', 'fortran_order': False, 'shape': (2, 3)}\n",   /* escapes */
      "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,)}\n", /* structured */
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)",
      "{",
      "{'",
      "{'descr'",
      "{'descr':",
      "{'descr': '<f4',",
      "{'descr': '<f4', 'fortran_order': Tr",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (-",
  };
  float f[6] = {1, 2, 3, 4, 5, 7};
  call_t c = {.op = OP_LAYER};
  int failures = 0;
  char first[1024] = "";
  for (size_t k = 0; k < sizeof headers / sizeof headers[0]; k++) {
    for (int major = 1; major <= 3; major += 2) {
      bytes_t b = npy_raw(major, 0, headers[k], f, 24);
      reply_t r;
      char why[768];
      call_npy(&c, &b, &r);
      if (!is_problem(&r, 400, "npy_bad_header", why, sizeof why) && failures++ == 0)
        snprintf(first, sizeof first, "header %zu (v%d) <%s>: %s", k, major,
                 headers[k], why);
      reply_free(&r);
      free(b.data);
    }
  }
  ck_assert_msg(failures == 0, "%d bad headers were not 400 npy_bad_header; first: %s",
                failures, first);

  /* an embedded NUL inside the header (strlen would stop there) */
  static const char nul_header[] =
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}\0    \n";
  size_t hl = sizeof nul_header - 1;
  bytes_t b = {malloc(10 + hl + 24), 10 + hl + 24};
  ck_assert_ptr_nonnull(b.data);
  memcpy(b.data, "\x93NUMPY\x01\x00", 8);
  b.data[8] = (unsigned char)hl;
  b.data[9] = 0;
  memcpy(b.data + 10, nul_header, hl);
  memcpy(b.data + 10 + hl, f, 24);
  expect_problem(&c, &b, 400, "npy_bad_header");
  free(b.data);
}
END_TEST

/* What numpy and other writers legitimately vary: key order, quotes,
 * spacing, the trailing commas, padding. */
START_TEST(test_header_variants_accepted) {
  static const char *const headers[] = {
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }\n",
      "{'shape': (2, 3), 'fortran_order': False, 'descr': '<f4'}\n",
      "{'fortran_order': False, 'descr': '<f4', 'shape': (2, 3,)}",
      "{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (2, 3)}   \n",
      "{'descr':'<f4','fortran_order':False,'shape':(2,3)}\n",
      "{ 'descr' : '<f4' , 'fortran_order' : False , 'shape' : ( 2 , 3 ) , }\t\n",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"
      "                                                           \n",
  };
  float f[6] = {1, 2, 3, 4, 5, 7};
  call_t c = {.op = OP_LAYER};
  int failures = 0;
  char first[1024] = "";
  for (size_t k = 0; k < sizeof headers / sizeof headers[0]; k++) {
    bytes_t b = npy_raw(1, 0, headers[k], f, 24);
    reply_t r;
    call_npy(&c, &b, &r);
    npy_view_t v;
    if ((r.status != 200 || npy_read(r.body, r.len, &v) != NULL || v.rank != 2) &&
        failures++ == 0)
      snprintf(first, sizeof first, "header %zu <%s>: status %d %.*s", k, headers[k],
               r.status, (int)(r.status == 200 ? 0 : r.len), r.body ? r.body : "");
    reply_free(&r);
    free(b.data);
  }
  ck_assert_msg(failures == 0, "%d valid headers refused; first: %s", failures, first);
}
END_TEST

/* Shapes that cannot be: scalars, zero, negative, overflowing, too many
 * dims, more elements than the limit; data of the wrong size. */
START_TEST(test_bad_shapes_and_sizes) {
  float f[8] = {1, 2, 3, 4, 5, 7, 8, 9};
  static const struct {
    const char *shape;
    size_t datalen;
    int status;
    const char *code;
  } cases[] = {
      {"()", 4, 422, "bad_rank"},                              /* a scalar */
      {"()", 0, 422, "bad_rank"},
      {"(0,)", 0, 422, "empty_tensor"},
      {"(2, 0)", 0, 422, "empty_tensor"},
      {"(-1,)", 0, 422, "negative_dim"},
      {"(2, -3)", 24, 422, "negative_dim"},
      {"(-2, -3)", 24, 422, "negative_dim"},
      {"(4611686018427387904, 4611686018427387904)", 24, 422, "size_overflow"},
      {"(4611686018427387904,)", 24, 422, "size_overflow"},
      {"(9223372036854775807,)", 24, 422, "size_overflow"},
      {"(9223372036854775808,)", 24, 422, "size_overflow"},
      {"(99999999999999999999999999999,)", 24, 422, "size_overflow"},
      {"(2, 99999999999999999999999999999)", 24, 422, "size_overflow"},
      {"(4294967296, 4294967296, 4)", 24, 422, "size_overflow"},
      {"(1, 1, 1, 1, 1, 1, 1, 1, 1)", 4, 422, "bad_rank"},
      {"(1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1)", 4, 422, "bad_rank"},
      {"(100001,)", 24, 413, "too_many_elements"},
      {"(1000, 1000)", 24, 413, "too_many_elements"},
      /* size mismatches: short and long */
      {"(2, 3)", 20, 400, "npy_size_mismatch"},
      {"(2, 3)", 0, 400, "npy_size_mismatch"},
      {"(2, 3)", 23, 400, "npy_size_mismatch"},
      {"(2, 3)", 25, 400, "npy_size_mismatch"},
      {"(2, 3)", 32, 400, "npy_size_mismatch"},
      {"(2,)", 24, 400, "npy_size_mismatch"},
      {"(1, 1, 1, 1, 1, 1, 1, 2)", 4, 400, "npy_size_mismatch"},
  };
  call_t c = {.op = OP_LAYER};
  int failures = 0;
  char first[1024] = "";
  for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
    for (int major = 1; major <= 2; major++) {
      bytes_t b = npy_file(major, "<f4", k % 2, cases[k].shape, f, cases[k].datalen);
      reply_t r;
      char why[768];
      call_npy(&c, &b, &r);
      if (!is_problem(&r, cases[k].status, cases[k].code, why, sizeof why) &&
          failures++ == 0)
        snprintf(first, sizeof first, "shape %s, %zu bytes: %s", cases[k].shape,
                 cases[k].datalen, why);
      reply_free(&r);
      free(b.data);
    }
  }
  ck_assert_msg(failures == 0, "%d shape cases failed; first: %s", failures, first);

  /* the largest allowed size passes (limit 100000 elements) */
  float *big = calloc(100000, sizeof *big);
  for (int i = 0; i < 100000; i++) big[i] = (float)(i % 97);
  bytes_t b = npy_file(1, "<f4", 0, "(1000, 100)", big, 100000 * sizeof *big);
  reply_t r;
  call_npy(&c, &b, &r);
  npy_view_t v = expect_npy(&r, "<f4");
  ck_assert_int_eq(v.shape[0], 1000);
  reply_free(&r);
  free(b.data);
  free(big);
}
END_TEST

START_TEST(test_unsupported_descr) {
  static const char *const descrs[] = {
      "<i4", "<i8", "|i1", "|u1", "<u2", "<c8", "<c16", "<f16", "<f12", "|b1",
      "|S4", "<U3", "|V8", "<M8[s]", "<m8[ns]", "|O", "f4", "=f4", "|f4",
      "<f", "<f0", "<f3", "<f44", ">i4", ">c8", "<e", "<d", "float32", "", "<F4",
  };
  float f[6] = {1, 2, 3, 4, 5, 7};
  call_t c = {.op = OP_LAYER};
  int failures = 0;
  char first[1024] = "";
  for (size_t k = 0; k < sizeof descrs / sizeof descrs[0]; k++) {
    bytes_t b = npy_file(1, descrs[k], 0, "(2, 3)", f, 24);
    reply_t r;
    char why[768];
    call_npy(&c, &b, &r);
    if (!is_problem(&r, 415, "npy_unsupported_dtype", why, sizeof why) && failures++ == 0)
      snprintf(first, sizeof first, "descr '%s': %s", descrs[k], why);
    reply_free(&r);
    free(b.data);
  }
  ck_assert_msg(failures == 0, "%d descrs were not 415; first: %s", failures, first);
}
END_TEST

/* Mutated and truncated files never crash, never read past the body (the
 * guard page), and always get a definite answer. */
START_TEST(test_mutations) {
  float f[24];
  for (int i = 0; i < 24; i++) f[i] = (float)(i * i % 7);
  bytes_t seeds[3] = {npy_file(1, "<f4", 0, "(4, 6)", f, sizeof f),
                      npy_file(2, ">f8", 1, "(2, 3, 2)", f, 96),
                      npy_file(3, "<f2", 1, "(4, 3, 2)", f, 48)};
  unsigned char work[256];
  uint64_t rng = 11;
  int bad = 0;
  char first[512] = "";
  for (int iter = 0; iter < 20000; iter++) {
    const bytes_t *s = &seeds[iter % 3];
    memcpy(work, s->data, s->len);
    int edits = 1 + (int)(tu_rand_u64(&rng) % 4);
    for (int e = 0; e < edits; e++) {
      /* mostly the header, where the parser is */
      size_t at = tu_rand_u64(&rng) % 4 ? tu_rand_u64(&rng) % 80 : tu_rand_u64(&rng) % s->len;
      static const char alphabet[] = "(),:'\"{}-0123456789 \nTrueFals<>f248";
      work[at] = tu_rand_u64(&rng) % 2 ? (unsigned char)alphabet[tu_rand_u64(&rng) % (sizeof alphabet - 1)]
                                       : (unsigned char)tu_rand_u64(&rng);
    }
    size_t len = tu_rand_u64(&rng) % 6 == 0 ? tu_rand_u64(&rng) % (s->len + 1) : s->len;
    bytes_t b = {work, len};
    call_t c = {.op = (op_t)(tu_rand_u64(&rng) % 5)};
    reply_t r;
    call_npy(&c, &b, &r);
    int st = r.status;
    if (st != 200 && st != 400 && st != 413 && st != 415 && st != 422 && bad++ == 0)
      snprintf(first, sizeof first, "iteration %d: status %d %.*s", iter, st,
               (int)r.len, r.body ? r.body : "");
    reply_free(&r);
  }
  for (int i = 0; i < 3; i++) free(seeds[i].data);
  ck_assert_msg(bad == 0, "%d mutated files got an unexpected status; first: %s", bad, first);
}
END_TEST

Suite *codec_npy_suite(void) {
  Suite *s = suite_create("codec_npy");
  TCase *valid = tcase_create("Valid");
  tcase_add_test(valid, test_layer_npy_roundtrip);
  tcase_add_test(valid, test_versions);
  tcase_add_test(valid, test_dtypes_and_endianness);
  tcase_add_test(valid, test_float16_in_out);
  tcase_add_test(valid, test_fortran_order);
  tcase_add_test(valid, test_other_responses);
  tcase_add_test(valid, test_output_dtype);
  tcase_add_test(valid, test_query_parameters);
  tcase_add_test(valid, test_query_errors);
  suite_add_tcase(s, valid);
  TCase *cruel = tcase_create("Cruel");
  tcase_add_test(cruel, test_bad_magic_and_version);
  tcase_add_test(cruel, test_header_length_past_body);
  tcase_add_test(cruel, test_bad_headers);
  tcase_add_test(cruel, test_header_variants_accepted);
  tcase_add_test(cruel, test_bad_shapes_and_sizes);
  tcase_add_test(cruel, test_unsupported_descr);
  tcase_set_timeout(cruel, 60);
  tcase_add_test(cruel, test_mutations);
  suite_add_tcase(s, cruel);
  return s;
}
