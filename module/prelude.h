/* The grant rules of lua/lib/prelude.lua, natively: the state of one
 * command call and the helpers the mutex commands (mutex.c) share. Each
 * function names the prelude function it mirrors and takes the same steps
 * with the same effects: writes in place through the key API or with
 * RedisModule_Call's "!", replicated as the write commands (never the
 * module command: the clock is read on the master only). The Lua scripts
 * are the reference; any difference in replies or keys is a bug. */
#ifndef RT_MODULE_PRELUDE_H
#define RT_MODULE_PRELUDE_H

#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>

#include "rm_api.h"
#include "rt_protocol.h"

/* The protocol's constants (protocol/constants.txt, as lua/lib/prelude.lua
 * names them). */
#define RTM_GRACE_MS RT_PROTO_GRACE_MS
#define RTM_SKIP_MAX RT_PROTO_SKIP_MAX
#define RTM_SETTLE_MS RT_PROTO_SETTLE_MS
#define RTM_GRANTED RT_PROTO_GRANTED
#define RTM_QUEUED RT_PROTO_QUEUED
#define RTM_MORE RT_PROTO_MORE

/* A byte string that lives until the command returns (an argument, or a
 * reply: the context frees replies at return, RedisModule_AutoMemory). */
typedef struct rtm_str {
  const char *p;
  size_t len;
} rtm_str;

/* The most keys (a pool resource's Q h M D) and ARGV entries (ARGV[1..7]
 * of pool_enqueue) a script reads. */
#define RTM_KEYS_MAX 4
#define RTM_ARGS_MAX 8

/* One call of a command: the Lua script's KEYS, ARGV and its locals. A
 * pool command's keys Q h M D are q h m d here, as lua/lib/pool.lua has
 * the prelude's q and m stand for Q and M. */
typedef struct rtm_call {
  RedisModuleCtx *ctx;
  const char *name;                 /* the command, for error texts */
  const char *suffixes;             /* its keys' suffixes: "qhm" or "QhMD" */
  RedisModuleString *q, *h, *m, *d; /* d: a pool resource's D, else NULL */
  rtm_str qname;                    /* q's bytes */
  rtm_str tag; /* q's hash tag "{...}" (it goes into grant notices) */
  rtm_str argv[RTM_ARGS_MAX]; /* ARGV[1..]: argv[0] is ARGV[1]; absent: p
                                 NULL */
  int nargs;
  /* split_prefix(ARGV[1]) */
  rtm_str chan;
  rtm_str epoch_arg; /* p NULL: none */
  double hold_ms;
  /* Memoized like the script's locals (have_*: computed). */
  int have_epoch, have_held, settling_now; /* settling_now -1: unknown */
  double fence_epoch;
  int64_t held_left;
  /* h, opened once to read and write when hk_write is set before
   * rtm_holder_get (the holder's read, its rewrite and its DEL then share
   * it; closed by rtm_call_done). The commands leave it unset: a key
   * opened to write counts as modified when closed, which would abort a
   * WATCH for a call that changed nothing. */
  int hk_write;
  RedisModuleKey *hk;
  /* The command's clock reading (rtm_now): the expiries it sets count
   * from it, as a script's PEXPIREs count from its one time. */
  int have_now;
  int64_t now_ms, now_us;
  jmp_buf fail; /* rtm_fail() jumps here with the error in err */
  char err[512];
} rtm_call;

/* The holder record (holder()); id.p NULL when nobody holds a lease that
 * runs after now. */
typedef struct rtm_holder {
  rtm_str id, label;
  int64_t fence, deadline, granted;
} rtm_holder;

/* What grant_next() returns: the new holder (id.p NULL: none), its fence,
 * deadline and lease, and RTM_MORE when the skip budget ran out. */
typedef struct rtm_grant {
  rtm_str id;
  int64_t fence, deadline, ttl;
  int more;
} rtm_grant;

/* Set up c for a command call: parse numkeys, the keys (one resource's,
 * with the suffixes given), and ARGV (at least min_args of them, ARGV[1]
 * included); split ARGV[1]. On bad input replies the error itself and
 * returns -1. */
int rtm_call_init(rtm_call *c, RedisModuleCtx *ctx, const char *name,
                  const char *suffixes, RedisModuleString **argv, int argc,
                  int min_args, const char *usage);

/* ---- keys.c: the bottom layer (it calls nothing of prelude.c) -------- */

/* Abort the call with an error reply (Lua's error()): jumps to c->fail. */
void rtm_fail(rtm_call *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), noreturn));

/* Close what the call kept open (c->hk). */
void rtm_call_done(rtm_call *c);

/* Parse a whole decimal integer (Lua's tonumber on the strings the
 * protocol writes); 0 on success. */
int rtm_parse_ll(rtm_str s, long long *out);

/* clock(): the server clock (this process's: Redis's TIME reads the same)
 * in ms and us. */
void rtm_clock(int64_t *ms, int64_t *us);
/* The clock as the command first read it (rtm_clock once per call). */
void rtm_now(rtm_call *c, int64_t *ms, int64_t *us);

/* Reads in place, as the commands in their names answer (a key of
 * another type fails the call with WRONGTYPE): HMGET m f1 f2 (f1.p NULL
 * or f2 NULL: not asked), HGET m field, LLEN q, LINDEX q 0. */
void rtm_hget2(rtm_call *c, rtm_str f1, const char *f2, rtm_str *v1,
               rtm_str *v2);
rtm_str rtm_hget(rtm_call *c, rtm_str field);
long long rtm_llen(rtm_call *c);
rtm_str rtm_front(rtm_call *c);

/* Writes in place (keys.c), each replicated as its command with its
 * keyspace events: PEXPIRE name ms (nothing when name is missing); LPOP q
 * (p NULL when q is empty); HINCRBY m '#' 1. */
void rtm_pexpire(rtm_call *c, RedisModuleString *name, long long ms);
rtm_str rtm_lpop(rtm_call *c);
void rtm_count_pop(rtm_call *c);
/* Redis's WRONGTYPE error text. */
extern const char rtm_wrongtype[];

/* HDEL m field, written in place and replicated as HDEL: 1 if it was
 * there. */
int rtm_hdel(rtm_call *c, rtm_str field);

/* DEL name, written in place and replicated as DEL (nothing when it is
 * missing). */
void rtm_del(rtm_call *c, RedisModuleString *name);
/* DEL h, through c->hk when it is open. */
void rtm_del_h(rtm_call *c);

/* A pool resource's h and D in place (lua/lib/pool.lua), as the commands
 * in their names:
 * - HMGET name fields... (at most 3, C strings), HLEN name into *len: a
 *   STRING name is no error (its type is returned, else the hash's or
 *   none's);
 * - HGET name field; HLEN/ZCARD/LLEN name (type: the key's);
 * - HSET name f1 v1 ... (fv: n pairs; its "hset" event unless event is
 *   0); HDEL name field (1 if it was there; its "hdel" event unless event
 *   is 0);
 * - ZSCORE d member (1 with *score); ZCARD d with its first and last
 *   scores; ZRANGE d by score from the first up to max (last: the last
 *   one), at most limit (scores NULL: not asked); ZADD d score member;
 *   ZREM d members...;
 * - PEXPIREAT name at (at after now; the same expiry again is not
 *   replicated). */
int rtm_hmget(rtm_call *c, RedisModuleString *name, int n,
              const char *const *fields, rtm_str *out, long long *len);
rtm_str rtm_hget_in(rtm_call *c, RedisModuleString *name, rtm_str field);
long long rtm_length(rtm_call *c, RedisModuleString *name, int type);
void rtm_hset(rtm_call *c, RedisModuleString *name, int n, const rtm_str *fv,
              int event);
int rtm_hdel_in(rtm_call *c, RedisModuleString *name, rtm_str field, int event);
int rtm_zscore(rtm_call *c, rtm_str member, int64_t *score);
/* ZCARD d, and the first (lowest) and last scores (when it has any). */
long long rtm_zends(rtm_call *c, int64_t *first, int64_t *last);
size_t rtm_zrange(rtm_call *c, int last, double max, size_t limit,
                  rtm_str *members, int64_t *scores);
void rtm_zadd(rtm_call *c, int64_t score, rtm_str member);
void rtm_zrem(rtm_call *c, const rtm_str *members, size_t n);
void rtm_pexpireat(rtm_call *c, RedisModuleString *name, long long at);

/* ---- prelude.c --------------------------------------------------------- */

/* Fail the call with Redis's OOM error when memory is over maxmemory: a
 * call that would add a request (a new holder or queue entry) runs this
 * before its first write; calls that free or keep memory never do. */
void rtm_refuse_new_if_oom(rtm_call *c);

/* Reply with the call's error (after setjmp returned nonzero). */
int rtm_reply_error(rtm_call *c);

/* Run a Redis command through RedisModule_Call; an error reply aborts the
 * call with that error, as redis.call() does in a script. */
#define RTM_CALL(c, cmd, fmt, ...)                                             \
  rtm_checked((c), (cmd), rtm.Call((c)->ctx, (cmd), (fmt), __VA_ARGS__))
RedisModuleCallReply *rtm_checked(rtm_call *c, const char *cmd,
                                  RedisModuleCallReply *r);
/* A reply's integer, string (p NULL for a nil) */
long long rtm_int(RedisModuleCallReply *r);
rtm_str rtm_string(RedisModuleCallReply *r);

/* Whether s equals the C string lit, a byte string b. */
int rtm_eq(rtm_str s, rtm_str b);
int rtm_eqc(rtm_str s, const char *lit);
/* This server's run id (INFO server run_id), read once at load. */
void rtm_set_run_id(const char *id);

/* prelude.lua's helpers, step for step. */
void rtm_holder_get(rtm_call *c, int64_t now, rtm_holder *out);
void rtm_member(rtm_call *c, rtm_str v, int64_t *ticket, int64_t *ttl,
                rtm_str *label);
int64_t rtm_next_fence(rtm_call *c, const int64_t *last, int64_t now_us);
void rtm_touch(rtm_call *c, int64_t left);
void rtm_set_holder(rtm_call *c, rtm_str id, int64_t ttl, int64_t fence,
                    int64_t deadline, int64_t granted, rtm_str label);
void rtm_take_free(rtm_call *c, rtm_str id, int64_t ttl, int64_t now,
                   int64_t now_us, rtm_str label, int64_t *fence,
                   int64_t *deadline);
int64_t rtm_settle_start(rtm_call *c, int64_t now);
int rtm_pop(rtm_call *c, rtm_str *id, rtm_str *v);
int64_t rtm_held_off(rtm_call *c, int64_t now);
void rtm_tell_next(rtm_call *c, rtm_str holder_id, int64_t deadline,
                   int budget);
void rtm_grant_next(rtm_call *c, int64_t now, int64_t now_us,
                    const int64_t *last, rtm_str quiet, rtm_grant *out);
int rtm_place(rtm_call *c, rtm_str mv, rtm_str head, long long len,
              long long *pos);
/* settled_stamp(): "<run id>:0". */
rtm_str rtm_settled_stamp(void);
/* reaches(id, kind, rest): publish "<kind>:<seq><rest>" to id's client;
 * whether it got it or may still be subscribing. */
int rtm_reaches(rtm_call *c, rtm_str id, char kind, const char *rest,
                size_t rest_len);
/* about(kind): ":<kind>:{tag}" ("" for a mutex). */
rtm_str rtm_about(rtm_call *c, rtm_str kind);
/* describe(kind) into out: "a mutex", "a semaphore of 4 permits"... */
void rtm_describe(rtm_str kind, char *out, size_t cap);
/* v in decimal into out (room for 20 characters): its length. */
size_t rtm_fmt_i64(char *out, int64_t v);
/* A number the protocol wrote into a record: a malformed one fails the
 * call ("malformed <what>"). */
int64_t rtm_num(rtm_call *c, const char *p, size_t len, const char *what);

#endif /* RT_MODULE_PRELUDE_H */
