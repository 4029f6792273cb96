/* fuzz_query.c -- query-string parameters of a .npy request (?eps=...&
 * normalized_shape=2,768): the text -> JSON value translation in
 * codec_npy.c and the field decoder behind it. The query string is split
 * and percent-decoded as the daemon has libmicrohttpd do it (with
 * router_unescape: %00 stays escaped); the body is one of a few valid .npy
 * files.
 *
 * Input: an op byte (fuzz_op: every op), a selector byte, then the raw
 * query string (no '?').
 *   bits 0-1  body: float32 (2, 4); float32 (2, 4, 3); big-endian float64
 *             (6,); float16 (3, 2) in Fortran order
 *   bit 2     body placed one byte off malloc's alignment
 *   bit 3     Accept: application/x-npy (else JSON) */
#include "fuzz_common.h"

enum { MAX_PARAMS = 64 }; /* http_admit.c answers 400 past this many */

typedef struct {
  char bytes[256];
  size_t len;
} npy_t;

static npy_t bodies[4];

/* A version 1.0 .npy: the header padded to 64 bytes, then `nbytes` of
 * small values written by fill. */
static void make_npy(npy_t *n, const char *dict, size_t elem, size_t count,
                     int big_endian) {
  size_t dlen = strlen(dict);
  size_t header = (10 + dlen + 1 + 63) / 64 * 64 - 10;
  memcpy(n->bytes, "\x93NUMPY\x01\x00", 8);
  n->bytes[8] = (char)(header & 0xFF);
  n->bytes[9] = (char)(header >> 8);
  memcpy(n->bytes + 10, dict, dlen);
  memset(n->bytes + 10 + dlen, ' ', header - dlen - 1);
  n->bytes[10 + header - 1] = '\n';
  n->len = 10 + header;
  for (size_t i = 0; i < count; i++) {
    unsigned char *p = (unsigned char *)n->bytes + n->len;
    if (elem == 4) {
      float f = (float)i * 0.5f - 1.0f;
      memcpy(p, &f, 4);
    } else if (elem == 8) {
      double d = (double)i - 2.5;
      unsigned char le[8];
      memcpy(le, &d, 8);
      for (int k = 0; k < 8; k++) p[k] = big_endian ? le[7 - k] : le[k];
    } else {
      uint16_t h = (uint16_t)(0x3C00 + (i << 8)); /* 1.0, 1.5, ... */
      memcpy(p, &h, 2);
    }
    n->len += elem;
  }
}

static void init_bodies(void) {
  make_npy(&bodies[0], "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 4), }", 4, 8, 0);
  make_npy(&bodies[1], "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 4, 3), }", 4, 24, 0);
  make_npy(&bodies[2], "{'descr': '>f8', 'fortran_order': False, 'shape': (6,), }", 8, 6, 1);
  make_npy(&bodies[3], "{'descr': '<f2', 'fortran_order': True, 'shape': (3, 2), }", 2, 6, 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2) return 0;
  static int ready;
  if (!ready) {
    init_bodies();
    ready = 1;
  }
  fuzz_init_once();
  op_t op = fuzz_op(data[0]);
  unsigned sel = data[1];
  /* the residual simulation takes no input tensor (fuzz_json covers it) */
  if (op == OP_RESIDUAL || memchr(data + 2, '\0', size - 2)) return 0;
  char *text = malloc(size - 1);
  if (text == NULL) return 0;
  memcpy(text, data + 2, size - 2);
  text[size - 2] = '\0';

  query_param_t params[MAX_PARAMS];
  size_t n = 0;
  char *save = NULL;
  for (char *item = strtok_r(text, "&", &save); item && n < MAX_PARAMS;
       item = strtok_r(NULL, "&", &save)) {
    char *eq = strchr(item, '=');
    if (eq) *eq = '\0';
    router_unescape(item);
    if (eq) router_unescape(eq + 1);
    params[n].key = item;
    params[n].value = eq ? eq + 1 : NULL;
    n++;
  }

  const npy_t *npy = &bodies[sel & 3];
  size_t shift = (sel >> 2) & 1;
  char *body = malloc(npy->len + shift); /* exact size: ASan sees over-reads */
  if (body == NULL) {
    free(text);
    return 0;
  }
  memcpy(body + shift, npy->bytes, npy->len);
  service_input_t in = {.op = op, .body = body + shift, .len = npy->len,
                        .content_type = "application/x-npy",
                        .accept = (sel & 0x08) ? "application/x-npy" : NULL,
                        .query = params, .nquery = n};
  fuzz_service(&in);
  free(body);
  free(text);
  return 0;
}
