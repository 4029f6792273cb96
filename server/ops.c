/* ops.c -- the data columns of OPS_MAP (ops.h) as a table. */
#include "ops.h"

#include <stddef.h>

#include "request.h" /* FIELD() */

static const op_info_t ops[OP_COUNT] = {
#define OP_INFO_(id, name, route, model, kind, norm, takes, answers, metric, fields, \
                 ...)                                                          \
  [OP_##id] = {name, route, model, kind, OP_##norm, metric, fields},
    OPS_MAP(OP_INFO_)
#undef OP_INFO_
};

const op_info_t *op_info(op_t op) { return &ops[op]; }

const char *op_name(op_t op) {
  return (unsigned)op < OP_COUNT ? ops[op].name : "unknown";
}
