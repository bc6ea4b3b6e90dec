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

/* What a lock script answered (the scripts in lua/ describe the same
 * shapes). */
enum {
  RT__A_QUEUED = 0,   /* enqueue: waiting */
  RT__A_GRANTED,      /* enqueue, try, extend: the request holds the lock */
  RT__A_BUSY,         /* try: someone holds or waits */
  RT__A_RELEASED,     /* release: it held the lock, the next one has it */
  RT__A_CANCELED,     /* release: it was waiting and left the queue */
  RT__A_NOT_FOUND,    /* release, extend: it neither holds nor waits */
  RT__A_REAPED        /* reap: see mine */
};
/* reap: where the caller's oldest waiting request stands. */
enum { RT__MINE_GONE = 0, RT__MINE_WAITING, RT__MINE_HOLDER };

typedef struct rt__answer {
  int code;            /* RT__A_* */
  int mine;            /* reap: RT__MINE_* */
  int more;            /* dead entries are left to drop: reap again */
  uint64_t fence;      /* granted */
  int64_t lease_ms;    /* granted: the lease; else the holder's lease left
                          (-1 for reap without a holder) */
  int64_t deadline_ms; /* granted: the lease's end (Redis clock) */
  int64_t now_ms;      /* the Redis clock when the script ran (0: unknown) */
  int64_t position;    /* queued, reap: entries ahead, holder included */
} rt__answer;

/* Scripts whose answer rt__reply_answer reads. */
enum { RT__ANS_ENQUEUE, RT__ANS_TRY, RT__ANS_RELEASE, RT__ANS_REAP,
       RT__ANS_EXTEND };

/* Parse the answer of script kind (RT__ANS_*) into *a: 0, or a negative
 * code (error reply mapped, RT_EPROTO for a shape that does not fit). */
int rt__reply_answer(const redisReply *r, int kind, rt__answer *a);

/* The inspect script's reply: {server ms, live waiters, fence, deadline,
 * grant time, holder id or "", {waiters...}, holder's label or "",
 * {waiters' labels...}}. */
typedef struct rt__inspect {
  long long now, len, fence, deadline, granted;
  const redisReply *holder; /* a string, "" if nobody holds */
  const redisReply *holder_label; /* a string, "" if none */
  size_t nentries;
  const redisReply *const *entries; /* waiters, in order */
  const redisReply *const *labels;  /* their labels (strings, "" if none) */
} rt__inspect;
int rt__reply_inspect(const redisReply *r, rt__inspect *out);

#endif /* RT_REPLY_H */
