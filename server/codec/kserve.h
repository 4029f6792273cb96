/* kserve.h -- the KServe v2 model names and metadata (the codec itself is
 * codec_kserve in codec.h). */
#ifndef NORMD_KSERVE_H
#define NORMD_KSERVE_H

#include "buf.h"
#include "request.h"

/* A model name -> its op (the model column of OPS_MAP); 0, or -1 for an
 * unknown model. */
int kserve_model_op(const char *model, op_t *op);
/* An op -> its model name; "unknown" for ops that are not models. */
const char *kserve_model_name(op_t op);
/* Every model's name, comma-separated ("layer_norm, rms_norm, ..."): a
 * static string, built once from the operation list. Thread-safe. */
const char *kserve_model_list(void);
/* GET /v2/models/{model}: name, versions, platform, inputs, outputs. */
void kserve_model_metadata(op_t op, buf_t *b);

#endif
