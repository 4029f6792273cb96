/* fuzz_framed.c -- the binary framing decoder (Content-Type:
 * application/octet-stream + Inference-Header-Content-Length: a JSON header
 * and raw little-endian tensors after it), on /v1 and on /v2.
 *
 * Input: a selector byte, two bytes of header length (little-endian), then
 * the body.
 *   bits 0-3  op (op_t; values >= OP_COUNT are skipped)
 *   bit 4     no Inference-Header-Content-Length header at all
 *   bit 5     the header as text taken from the body's first line instead
 *             (so "12abc", "-1", "99999999999999999999" are tried too)
 *   bit 6     body placed one byte off malloc's alignment
 *   bit 7     the /v2 route of the op */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 3) return 0;
  fuzz_init_once();
  unsigned sel = data[0];
  op_t op = (op_t)(sel & 0x0F);
  int kserve = (sel & 0x80) != 0;
  size_t shift = (sel >> 6) & 1;
  if (op >= OP_COUNT || (kserve && !fuzz_op_has_model(op))) return 0;
  const uint8_t *rest = data + 3;
  size_t len = size - 3;
  char header[32];
  const char *header_length = header;
  if (sel & 0x10) {
    header_length = NULL;
  } else if (sel & 0x20) {
    const uint8_t *nl = memchr(rest, '\n', len);
    size_t n = nl ? (size_t)(nl - rest) : 0;
    if (nl == NULL || n >= sizeof header || memchr(rest, '\0', n)) return 0;
    memcpy(header, rest, n);
    header[n] = '\0';
    rest += n + 1;
    len -= n + 1;
  } else {
    snprintf(header, sizeof header, "%u", (unsigned)(data[1] | data[2] << 8));
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
