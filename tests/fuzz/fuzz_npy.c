/* fuzz_npy.c -- the .npy decoder (Content-Type: application/x-npy) through
 * service_handle. The input is the body as is, so the corpus holds real
 * .npy files; each one is sent to every /v1 op that takes an input tensor,
 * answered as .npy, JSON or framed by turns, once in place and once one
 * byte off alignment (the decoder reads aligned little-endian data where it
 * lies and copies the rest). */
#include "fuzz_common.h"

static const char *const accepts[] = {"application/x-npy", NULL,
                                      "application/octet-stream"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_init_once();
  char *body = malloc(size + 2);
  if (body == NULL) return 0;
  for (size_t shift = 0; shift < 2; shift++) {
    memcpy(body + shift, data, size);
    for (int op = 0; op < OP_COUNT; op++) {
      if (op == OP_MOMENTS_MERGE || op == OP_RESIDUAL) continue; /* no input */
      service_input_t in = {.op = (op_t)op, .body = body + shift, .len = size,
                            .content_type = "application/x-npy",
                            .accept = accepts[(op + shift) % 3]};
      fuzz_service(&in);
    }
  }
  free(body);
  return 0;
}
