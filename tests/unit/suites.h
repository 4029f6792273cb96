/* suites.h -- every Check suite of the unit test binary, one line each.
 * A new tests/unit/check_<name>.c defines `Suite *<name>_suite(void)` and
 * adds X(<name>) here. */
#ifndef TESTS_SUITES_H
#define TESTS_SUITES_H
#include <check.h>

#define UNIT_SUITES(X)                                                         \
  X(errors)                                                                    \
  X(dtype)                                                                     \
  X(tensor)                                                                    \
  X(norm_layer)                                                                \
  X(norm_rms)                                                                  \
  X(norm_batch)                                                                \
  X(norm_group)                                                                \
  X(norm_instance)                                                             \
  X(norm_alias)                                                                \
  X(norm_backward)                                                             \
  X(norm_lp)                                                                   \
  X(norm_lrn)                                                                  \
  X(norm_mvn)                                                                  \
  X(moments)                                                                   \
  X(residual)                                                                  \
  X(torch_fixtures)                                                            \
  X(torch_family)                                                              \
  X(fmt)                                                                       \
  X(fmt_half)                                                                  \
  X(metrics)                                                                   \
  X(config)                                                                    \
  X(explain)                                                                   \
  X(codec_json)                                                                \
  X(codec_npy)                                                                 \
  X(codec_framed)                                                              \
  X(codec_kserve)                                                               \
  X(numarray)                                                                  \
  X(numarray_split)                                                            \
  X(encode_split)                                                              \
  X(log)                                                                       \
  X(request_id)                                                                \
  X(ops)                                                                       \
  X(problem)                                                                   \
  X(encoding)                                                                  \
  X(blocks)

#define UNIT_DECLARE_(name) Suite *name##_suite(void);
UNIT_SUITES(UNIT_DECLARE_)
#undef UNIT_DECLARE_
#endif
