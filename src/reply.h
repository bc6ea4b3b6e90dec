/* Turning Redis replies into RT_E* codes and plain values (pure logic). */
#ifndef RT_REPLY_H
#define RT_REPLY_H

#include <hiredis/hiredis.h>

#include "common.h"

/* RT_E* code for a Redis error reply text: RT_EWRONGTYPE, RT_EAUTH,
 * RT_ENOPERM, or RT_EREDIS for anything else. Scripts wrap errors raised
 * by redis.call, so the code word may come after other text. */
int rt__reply_error(const char *str, size_t len);

/* 1 if the error reply means the script is not in the server's cache. */
int rt__reply_is_noscript(const redisReply *r);

/* A script's array reply of integers: 0..max of them go to out. Returns
 * how many, or a negative code (error reply mapped, RT_EPROTO when the
 * shape is wrong or there are fewer than min). */
int rt__reply_ints(const redisReply *r, long long *out, size_t min,
                   size_t max);

/* The inspect script's reply:
 * {server ms, length, fence, deadline, grant time, {head, waiters...}}. */
typedef struct rt__inspect {
  long long now, len, fence, deadline, granted;
  size_t nentries;
  const redisReply *const *entries; /* strings, head first */
} rt__inspect;
int rt__reply_inspect(const redisReply *r, rt__inspect *out);

#endif /* RT_REPLY_H */
