/* fuzz_json.c -- the JSON request decoder of every route, through
 * service_handle: /v1 (application/json) for each op and /v2 (KServe v2
 * JSON) for each op that is a model.
 *
 * Input: an op byte (fuzz_op: every op), a selector byte, then the body.
 *   bits 0-1  Accept: none, application/octet-stream, application/x-npy,
 *             "application/json;q=0, any type;q=0.5"
 *   bit 2     body placed one byte off malloc's alignment
 *   bit 3     the /v2 route of the op (KServe v2 protocol) */
#include "fuzz_common.h"

static const char *const accepts[] = {
    NULL, "application/octet-stream", "application/x-npy",
    "application/json;q=0, */*;q=0.5"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2) return 0;
  fuzz_init_once();
  op_t op = fuzz_op(data[0]);
  unsigned sel = data[1];
  int kserve = (sel & 0x08) != 0;
  size_t shift = (sel >> 2) & 1;
  if (kserve && !fuzz_op_has_model(op)) return 0;
  size_t len = size - 2;
  char *body = malloc(len + shift + 1);
  if (body == NULL) return 0;
  memcpy(body + shift, data + 2, len);
  service_input_t in = {.op = op, .body = body + shift, .len = len,
                        .content_type = "application/json",
                        .accept = accepts[sel & 3], .kserve = kserve};
  fuzz_service(&in);
  free(body);
  return 0;
}
