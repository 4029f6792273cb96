/* fuzz_json.c -- the JSON request decoder of every route, through
 * service_handle: /v1 (application/json) for each op and /v2 (KServe v2
 * JSON) for each op that is a model.
 *
 * Input: one selector byte, then the body.
 *   bits 0-3  op (op_t; values >= OP_COUNT are skipped)
 *   bits 4-5  Accept: none, application/octet-stream, application/x-npy,
 *             "application/json;q=0, any type;q=0.5"
 *   bit 6     body placed one byte off malloc's alignment
 *   bit 7     the /v2 route of the op (KServe v2 protocol) */
#include "fuzz_common.h"

static const char *const accepts[] = {
    NULL, "application/octet-stream", "application/x-npy",
    "application/json;q=0, */*;q=0.5"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  fuzz_init_once();
  unsigned sel = data[0];
  op_t op = (op_t)(sel & 0x0F);
  int kserve = (sel & 0x80) != 0;
  size_t shift = (sel >> 6) & 1;
  if (op >= OP_COUNT || (kserve && !fuzz_op_has_model(op))) return 0;
  size_t len = size - 1;
  char *body = malloc(len + shift + 1);
  if (body == NULL) return 0;
  memcpy(body + shift, data + 1, len);
  service_input_t in = {.op = op, .body = body + shift, .len = len,
                        .content_type = "application/json",
                        .accept = accepts[(sel >> 4) & 3], .kserve = kserve};
  fuzz_service(&in);
  free(body);
  return 0;
}
