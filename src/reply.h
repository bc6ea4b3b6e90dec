/* Turning Redis replies into RT_E* codes and plain values (pure logic). */
#ifndef RT_REPLY_H
#define RT_REPLY_H

#include <hiredis/hiredis.h>

#include "common.h"
#include "rt_protocol.h"

/* RT_E* code for a Redis error reply text: RT_EKIND, RT_EWRONGTYPE,
 * RT_EAUTH, RT_ENOPERM, or RT_EREDIS for anything else. Scripts wrap errors raised
 * by redis.call, so the code word may come after other text. */
int rt__reply_error(const char *str, size_t len);

/* 1 if the error reply means the script is not in the server's cache. */
int rt__reply_is_noscript(const redisReply *r);
/* FCALL of a function the server does not have ("ERR Function not
 * found": FUNCTION FLUSH, a restart without persistence). */
int rt__reply_is_nofunction(const redisReply *r);
/* A command the server does not know ("ERR unknown command": the
 * redturn module is not loaded). */
int rt__reply_is_unknown_command(const redisReply *r);
/* FUNCTION LOAD of a library the server has already. */
int rt__reply_is_library_exists(const redisReply *r);
/* Redis's refusal for memory: used memory over maxmemory (noeviction). */
int rt__reply_is_oom(const redisReply *r);
/* 1 when an error reply's text says the server takes no writes now
 * (READONLY: a replica; MASTERDOWN: a replica cut from its master;
 * LOADING: a server loading its data), also wrapped in a script's error;
 * rt__reply_error maps these to RT_EREADONLY. */
int rt__reply_not_master(const char *str, size_t len);

/* A script's array reply of integers: 0..max of them go to out. Returns
 * how many, or a negative code (error reply mapped, RT_EPROTO when the
 * shape is wrong or there are fewer than min). */
int rt__reply_ints(const redisReply *r, long long *out, size_t min, size_t max);

/* ---- typed answers: one struct and one parser per script ---------------
 *
 * Each parser reads one script's reply (the shapes are described at the top
 * of lua/<script>.lua) and returns 0, or a negative code: an error reply
 * mapped by rt__reply_error, RT_EPROTO for a shape that does not fit. The
 * named codes are the numbers the scripts return (protocol/constants.txt). */

/* A grant in an answer: the request holds the lock. */
typedef struct rt__grant {
  uint64_t fence;      /* >= 1 */
  int64_t lease_ms;    /* > 0 */
  int64_t deadline_ms; /* the lease's end (Redis clock) */
} rt__grant;

/* enqueue.lua */
typedef enum {
  RT__ENQUEUE_QUEUED = RT_PROTO_QUEUED,
  RT__ENQUEUE_GRANTED = RT_PROTO_GRANTED
} rt__enqueue_code;
typedef struct rt__enqueue_answer {
  rt__enqueue_code code;
  rt__grant grant;        /* GRANTED */
  int64_t position;       /* QUEUED: entries ahead, holder included */
  int64_t holder_left_ms; /* QUEUED: the holder's lease left (0: none) */
} rt__enqueue_answer;

/* try.lua */
typedef enum {
  RT__TRY_BUSY = RT_PROTO_TRY_BUSY,
  RT__TRY_GRANTED = RT_PROTO_GRANTED
} rt__try_code;
typedef struct rt__try_answer {
  rt__try_code code;
  rt__grant grant;        /* GRANTED */
  int64_t holder_left_ms; /* BUSY: the holder's lease left (0: none) */
} rt__try_answer;

/* release.lua */
typedef enum {
  RT__RELEASE_NOT_FOUND =
      RT_PROTO_RELEASE_NOT_FOUND, /* it neither held nor waited */
  RT__RELEASE_RELEASED =
      RT_PROTO_RELEASE_RELEASED, /* it held the lock; the next one has it */
  RT__RELEASE_CANCELED =
      RT_PROTO_RELEASE_CANCELED /* it was waiting and left the queue */
} rt__release_code;
typedef struct rt__release_answer {
  rt__release_code code;
} rt__release_answer;

/* extend.lua */
typedef enum {
  RT__EXTEND_NOT_HELD = RT_PROTO_EXTEND_NOT_HELD,
  RT__EXTEND_EXTENDED = RT_PROTO_EXTEND_EXTENDED
} rt__extend_code;
typedef struct rt__extend_answer {
  rt__extend_code code;
  int64_t lease_ms;    /* EXTENDED: the new lease */
  int64_t deadline_ms; /* EXTENDED: its end (Redis clock) */
} rt__extend_answer;

/* reap.lua: where the caller's oldest waiting request stands. */
typedef enum {
  RT__REAP_GONE =
      RT_PROTO_REAP_GONE, /* Redis does not have it (or none was given) */
  RT__REAP_WAITING = RT_PROTO_REAP_WAITING, /* queued, position entries ahead */
  RT__REAP_HOLDER = RT_PROTO_REAP_HOLDER    /* it holds the lock */
} rt__reap_mine;
typedef struct rt__reap_answer {
  rt__reap_mine mine;
  int64_t holder_left_ms; /* the holder's lease left; -1: nobody holds */
  int64_t position;       /* WAITING: entries ahead, holder included */
} rt__reap_answer;

/* inspect.lua: {server ms, live waiters, fence, deadline, grant time,
 * holder id or "", {waiters...}, holder's label or "", {waiters'
 * labels...}}. The strings point into the reply. */
typedef struct rt__inspect {
  long long now, len, fence, deadline, granted;
  const redisReply *holder;       /* a string, "" if nobody holds */
  const redisReply *holder_label; /* a string, "" if none */
  size_t nentries;
  const redisReply *const *entries; /* waiters, in order */
  const redisReply *const *labels;  /* their labels (strings, "" if none) */
} rt__inspect;

/* One column of a list in an answer: the replies of one field of each
 * element, pointing into the reply. */
typedef const redisReply *const *rt__column;

/* pool_inspect.lua: {now, kind or "", capacity, permits in use, last fence,
 * live waiters, {holder ids}, {their permits}, {their fences}, {their
 * deadlines}, {their labels}, {waiter ids}, {their permits}, {their
 * labels}}. The holders' columns have nholders elements each (by
 * deadline: the first is an election's leader), the waiters' nentries (in
 * queue order); ids and labels are strings, the rest integers. */
typedef struct rt__pool_inspect {
  long long now, capacity, used, fence, len;
  const redisReply *kind; /* a string, "" if nobody uses the resource */
  size_t nholders, nentries;
  struct {
    rt__column ids, permits, fences, deadlines, labels;
  } holders;
  struct {
    rt__column ids, permits, labels;
  } waiters;
} rt__pool_inspect;

/* proclaim.lua */
typedef enum {
  RT__PROCLAIM_NOT_LEADER = RT_PROTO_PROCLAIM_NOT_LEADER,
  RT__PROCLAIM_DONE = RT_PROTO_PROCLAIM_DONE
} rt__proclaim_code;
typedef struct rt__proclaim_answer {
  rt__proclaim_code code;
} rt__proclaim_answer;

/* evict.lua */
typedef enum {
  RT__EVICT_NOBODY = RT_PROTO_EVICT_NOBODY, /* nobody holds a running lease */
  RT__EVICT_EVICTED =
      RT_PROTO_EVICT_EVICTED, /* the holder lost the lock; next has it */
  RT__EVICT_REFUSED =
      RT_PROTO_EVICT_REFUSED /* the holder is not the request named */
} rt__evict_code;
typedef struct rt__evict_answer {
  rt__evict_code code;
  const redisReply *holder; /* EVICTED, REFUSED: the holder found */
  const redisReply *next;   /* EVICTED: the new holder, "" if none */
  long long fence;          /* EVICTED: next's fence, 0 if none */
} rt__evict_answer;

/* Any script's answer: what every script says, then its own part. */
typedef struct rt__answer {
  int64_t now_ms; /* the Redis clock when the script ran */
  int more;       /* dead entries are left at the front: reap again */
  union {
    rt__enqueue_answer enqueue;
    rt__try_answer try;
    rt__release_answer release;
    rt__extend_answer extend;
    rt__reap_answer reap;
    rt__inspect inspect;
    rt__pool_inspect pool_inspect;
    rt__proclaim_answer proclaim;
    rt__evict_answer evict;
  } u;
} rt__answer;

/* A parser of one script's reply into *a (zeroed first). */
typedef int (*rt__answer_parser)(const redisReply *r, rt__answer *a);

int rt__parse_enqueue(const redisReply *r, rt__answer *a);
int rt__parse_try(const redisReply *r, rt__answer *a);
int rt__parse_release(const redisReply *r, rt__answer *a);
int rt__parse_extend(const redisReply *r, rt__answer *a);
int rt__parse_reap(const redisReply *r, rt__answer *a);
int rt__parse_inspect(const redisReply *r, rt__answer *a);
int rt__parse_pool_inspect(const redisReply *r, rt__answer *a);
int rt__parse_proclaim(const redisReply *r, rt__answer *a);
int rt__parse_evict(const redisReply *r, rt__answer *a);

#endif /* RT_REPLY_H */
