/* The argument checks every request shares (name, TTL, timeout), and the
 * message helper the option and URL checks share. */
#include <stdarg.h>
#include <stdio.h>

#include "common.h"

int rt__why(char *msg, size_t cap, int err, const char *fmt, ...) {
  va_list ap;
  if (msg == NULL || cap == 0)
    return err;
  va_start(ap, fmt);
  vsnprintf(msg, cap, fmt, ap);
  va_end(ap);
  return err;
}

int rt__check_name(const void *name, size_t len) {
  if (name == NULL || len == 0)
    return RT_ENAMEEMPTY;
  if (len > RT_NAME_MAX)
    return RT_ENAMETOOLONG;
  return 0;
}

int rt__resolve_ttl(int64_t ttl_ms, int64_t dflt, int64_t *out) {
  if (ttl_ms == RT_TTL_DEFAULT)
    ttl_ms = dflt;
  if (ttl_ms < 1 || ttl_ms > RT_TTL_MAX)
    return RT_ETTL;
  *out = ttl_ms;
  return 0;
}

int rt__check_timeout(int64_t timeout_ms) {
  if (timeout_ms == RT_FOREVER || timeout_ms > 0)
    return 0;
  return RT_ETIMEOUTARG;
}
