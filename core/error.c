/* error.c -- names and messages for the one error list in norm.h. */
#include "norm.h"

const char *norm_strerror(int err) {
  switch (err) {
#define NORM_MSG_(name, code, short_name, msg)                                 \
  case code:                                                                   \
    return msg;
    NORM_ERRNO_MAP(NORM_MSG_)
#undef NORM_MSG_
  }
  return "unknown error";
}

const char *norm_err_name(int err) {
  switch (err) {
#define NORM_NAME_(name, code, short_name, msg)                                \
  case code:                                                                   \
    return short_name;
    NORM_ERRNO_MAP(NORM_NAME_)
#undef NORM_NAME_
  }
  return "unknown_error";
}
