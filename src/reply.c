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

/* Each shape: {code or first value, ...}. */
int rt__reply_answer(const redisReply *r, int kind, rt__answer *a) {
  long long v[5];
  int n = rt__reply_ints(r, v, 2, 5);
  memset(a, 0, sizeof(*a));
  if (n < 0)
    return n;
  switch (kind) {
  case RT__ANS_ENQUEUE:
  case RT__ANS_TRY:
    if (n == 5 && v[0] == 1) {
      a->code = RT__A_GRANTED;
      a->fence = (uint64_t)v[1];
      a->lease_ms = v[2];
      a->deadline_ms = v[3];
      a->now_ms = v[4];
      return a->fence > 0 && a->lease_ms > 0 ? 0 : RT_EPROTO;
    }
    if (kind == RT__ANS_ENQUEUE && n == 5 && v[0] == 0) {
      a->code = RT__A_QUEUED;
      a->position = v[1];
      a->lease_ms = v[2];
      a->now_ms = v[3];
      a->more = v[4] != 0;
      return 0;
    }
    if (kind == RT__ANS_TRY && n == 4 && v[0] == 0) {
      a->code = RT__A_BUSY;
      a->lease_ms = v[1];
      a->now_ms = v[2];
      a->more = v[3] != 0;
      return 0;
    }
    return RT_EPROTO;
  case RT__ANS_RELEASE:
    if (n != 2 || v[0] < 0 || v[0] > 2)
      return RT_EPROTO;
    a->code = v[0] == 1 ? RT__A_RELEASED
              : v[0] == 2 ? RT__A_CANCELED : RT__A_NOT_FOUND;
    a->more = v[1] != 0;
    return 0;
  case RT__ANS_REAP:
    if (n != 5 || v[1] < 0 || v[1] > 2)
      return RT_EPROTO;
    a->code = RT__A_REAPED;
    a->lease_ms = v[0];
    a->mine = (int)v[1];
    a->position = v[2];
    a->now_ms = v[3];
    a->more = v[4] != 0;
    return 0;
  case RT__ANS_EXTEND:
    if (n == 4 && v[0] == 1) {
      a->code = RT__A_GRANTED;
      a->lease_ms = v[1];
      a->deadline_ms = v[2];
      a->now_ms = v[3];
      return 0;
    }
    if (n == 2 && v[0] == 0) {
      a->code = RT__A_NOT_FOUND;
      a->now_ms = v[1];
      return 0;
    }
    return RT_EPROTO;
  default:
    return RT_EPROTO;
  }
}

int rt__reply_inspect(const redisReply *r, rt__inspect *out) {
  if (r == NULL)
    return RT_EPROTO;
  if (r->type == REDIS_REPLY_ERROR)
    return rt__reply_error(r->str, r->len);
  if (r->type != REDIS_REPLY_ARRAY || r->elements != 9)
    return RT_EPROTO;
  long long *fields[5] = {&out->now, &out->len, &out->fence, &out->deadline,
                          &out->granted};
  for (size_t i = 0; i < 5; i++) {
    if (r->element[i]->type != REDIS_REPLY_INTEGER)
      return RT_EPROTO;
    *fields[i] = r->element[i]->integer;
  }
  if (r->element[5]->type != REDIS_REPLY_STRING ||
      r->element[7]->type != REDIS_REPLY_STRING)
    return RT_EPROTO;
  out->holder = r->element[5];
  out->holder_label = r->element[7];
  const redisReply *list = r->element[6], *labels = r->element[8];
  if (list->type != REDIS_REPLY_ARRAY || labels->type != REDIS_REPLY_ARRAY ||
      labels->elements != list->elements)
    return RT_EPROTO;
  for (size_t i = 0; i < list->elements; i++)
    if (list->element[i]->type != REDIS_REPLY_STRING ||
        labels->element[i]->type != REDIS_REPLY_STRING)
      return RT_EPROTO;
  if (out->len < 0 || (size_t)out->len < list->elements)
    return RT_EPROTO;
  out->nentries = list->elements;
  out->entries = (const redisReply *const *)list->element;
  out->labels = (const redisReply *const *)labels->element;
  return 0;
}
