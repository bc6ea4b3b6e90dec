/* Error messages and names, generated from RT_ERRNO_MAP so that a new
 * code needs one line in redturn.h and nothing here; and the version. */
#include "common.h"

#define RT__STR(x) #x
#define RT__XSTR(x) RT__STR(x)

const char *rt_strerror(int err) {
  switch (err) {
  case 0:
    return "success";
#define RT__ERR_MSG(name, value, msg)                                          \
  case RT_##name:                                                              \
    return msg;
    RT_ERRNO_MAP(RT__ERR_MSG)
#undef RT__ERR_MSG
  default:
    return "unknown error";
  }
}

const char *rt_err_name(int err) {
  switch (err) {
  case 0:
    return "OK";
#define RT__ERR_NAME(name, value, msg)                                         \
  case RT_##name:                                                              \
    return "RT_" #name;
    RT_ERRNO_MAP(RT__ERR_NAME)
#undef RT__ERR_NAME
  default:
    return "RT_EUNKNOWN";
  }
}

unsigned int rt_version(void) { return RT_VERSION_HEX; }

const char *rt_version_string(void) {
  return RT__XSTR(RT_VERSION_MAJOR) "." RT__XSTR(RT_VERSION_MINOR) "." RT__XSTR(
      RT_VERSION_PATCH);
}
