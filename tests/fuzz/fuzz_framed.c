/* fuzz_framed.c -- the binary framing decoder (Content-Type:
 * application/octet-stream + Inference-Header-Content-Length: a JSON header
 * and raw little-endian tensors after it), on /v1 and on /v2.
 *
 * Input: an op byte (fuzz_op: every op), a selector byte, two bytes of
 * header length (little-endian), then the body.
 *   bit 0     no Inference-Header-Content-Length header at all
 *   bit 1     the header as text taken from the body's first line instead
 *             (so "12abc", "-1", "99999999999999999999" are tried too)
 *   bit 2     body placed one byte off malloc's alignment
 *   bit 3     the /v2 route of the op */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 4) return 0;
  fuzz_init_once();
  op_t op = fuzz_op(data[0]);
  unsigned sel = data[1];
  int kserve = (sel & 0x08) != 0;
  size_t shift = (sel >> 2) & 1;
  if (kserve && !fuzz_op_has_model(op)) return 0;
  const uint8_t *rest = data + 4;
  size_t len = size - 4;
  char header[32];
  const char *header_length = header;
  if (sel & 0x01) {
    header_length = NULL;
  } else if (sel & 0x02) {
    const uint8_t *nl = memchr(rest, '\n', len);
    size_t n = nl ? (size_t)(nl - rest) : 0;
    if (nl == NULL || n >= sizeof header || memchr(rest, '\0', n)) return 0;
    memcpy(header, rest, n);
    header[n] = '\0';
    rest += n + 1;
    len -= n + 1;
  } else {
    snprintf(header, sizeof header, "%u", (unsigned)(data[2] | data[3] << 8));
  }
  char *body = malloc(len + shift + 1);
  if (body == NULL) return 0;
  memcpy(body + shift, rest, len);
  service_input_t in = {.op = op, .body = body + shift, .len = len,
                        .content_type = "application/octet-stream",
                        .header_length = header_length, .kserve = kserve};
  fuzz_service(&in);
  free(body);
  return 0;
}
