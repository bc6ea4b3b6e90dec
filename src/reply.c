/* Turning Redis replies into RT_E* codes and plain values. Kept free of
 * I/O so the fuzz target and unit tests can drive it with any reply. */
#include <string.h>

#include "reply.h"

static int contains(const char *s, size_t len, const char *word) {
  size_t n = strlen(word);
  for (size_t i = 0; i + n <= len; i++)
    if (memcmp(s + i, word, n) == 0)
      return 1;
  return 0;
}

int rt__reply_error(const char *str, size_t len) {
  if (str == NULL)
    return RT_EREDIS;
  if (contains(str, len, "WRONGTYPE"))
    return RT_EWRONGTYPE;
  /* Redis 7.0 words ACL refusals inside scripts without NOPERM. */
  if (contains(str, len, "NOPERM") ||
      contains(str, len, "user executing the script can't") ||
      contains(str, len, "No permissions to"))
    return RT_ENOPERM;
  if (contains(str, len, "NOAUTH") || contains(str, len, "WRONGPASS") ||
      contains(str, len, "invalid password") ||
      contains(str, len, "invalid username-password"))
    return RT_EAUTH;
  return RT_EREDIS;
}

int rt__reply_is_noscript(const redisReply *r) {
  return r != NULL && r->type == REDIS_REPLY_ERROR && r->len >= 8 &&
         memcmp(r->str, "NOSCRIPT", 8) == 0;
}

int rt__reply_ints(const redisReply *r, long long *out, size_t min,
                   size_t max) {
  if (r == NULL)
    return RT_EPROTO;
  if (r->type == REDIS_REPLY_ERROR)
    return rt__reply_error(r->str, r->len);
  if (r->type != REDIS_REPLY_ARRAY || r->elements < min || r->elements > max)
    return RT_EPROTO;
  for (size_t i = 0; i < r->elements; i++) {
    if (r->element[i] == NULL || r->element[i]->type != REDIS_REPLY_INTEGER)
      return RT_EPROTO;
    out[i] = r->element[i]->integer;
  }
  return (int)r->elements;
}

int rt__reply_inspect(const redisReply *r, rt__inspect *out) {
  if (r == NULL)
    return RT_EPROTO;
  if (r->type == REDIS_REPLY_ERROR)
    return rt__reply_error(r->str, r->len);
  if (r->type != REDIS_REPLY_ARRAY || r->elements != 6)
    return RT_EPROTO;
  long long *fields[5] = {&out->now, &out->len, &out->fence, &out->deadline,
                          &out->granted};
  for (size_t i = 0; i < 5; i++) {
    if (r->element[i]->type != REDIS_REPLY_INTEGER)
      return RT_EPROTO;
    *fields[i] = r->element[i]->integer;
  }
  const redisReply *list = r->element[5];
  if (list->type != REDIS_REPLY_ARRAY)
    return RT_EPROTO;
  for (size_t i = 0; i < list->elements; i++)
    if (list->element[i]->type != REDIS_REPLY_STRING)
      return RT_EPROTO;
  if (out->len < 0 || (size_t)out->len < list->elements)
    return RT_EPROTO;
  out->nentries = list->elements;
  out->entries = (const redisReply *const *)list->element;
  return 0;
}
