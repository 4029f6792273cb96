/* kserve.h -- the KServe v2 model names, metadata, and Triton's model
 * configuration, repository index and statistics (the codec itself is
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
/* GET /v2/models/{model}/config: Triton's model configuration of the same
 * inputs and outputs (name, platform, backend, max_batch_size 0, input and
 * output with data_type TYPE_FP32 and dims, -1 for any size). */
void kserve_model_config(op_t op, buf_t *b);
/* POST /v2/repository/index: every model, {"name", "version": "1",
 * "state": "READY"}, in OPS_MAP order. */
void kserve_repository_index(buf_t *b);
/* GET /v2/models[/{model}]/stats: Triton's {"model_stats": [...]} of one
 * model's op, or of every model for op OP_COUNT, from op_stats.h. */
void kserve_model_stats(op_t op, buf_t *b);

#endif
