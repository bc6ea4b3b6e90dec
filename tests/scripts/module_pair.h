/* The side-by-side harness of the module's tests (module_pair.c): the same
 * calls through the module (module/) on one server and through EVAL of the
 * scripts on another, compared reply by reply, notice by notice, key by
 * key. Built into it_module and it_module_pool. */
#ifndef RT_TESTS_MODULE_PAIR_H
#define RT_TESTS_MODULE_PAIR_H

#include <hiredis/hiredis.h>
#include <stddef.h>

#include "rt_test.h"

#ifndef RTT_MODULE_PATH
#define RTT_MODULE_PATH ""
#endif

#define CA "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define CB "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define CC "cccccccccccccccccccccccccccccccc"
#define CD "dddddddddddddddddddddddddddddddd"
#define CE "eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee"

/* Times in replies and records: the two servers' calls run a moment
 * apart, so values that are clock readings or leases left may differ by
 * this much (ms; us for fences). A loaded machine can stall a call. */
#define TOL_MS 500
#define TOL_US 500000LL

/* One server of a comparison: how it runs the commands, its connection,
 * its run id and replication id (normalized away when comparing). */
typedef struct side {
  rtt_private p;
  int module; /* 1: redturn.<script>; 0: EVAL of the script */
  char run_id[64], replid[64];
  redisContext *sub[5]; /* SSUBSCRIBEd as client CA..CE, or NULL */
  redisContext *events; /* PSUBSCRIBEd to keyspace events, or NULL */
  redisContext *obs;    /* SSUBSCRIBEd to the election's observers */
} side;

/* The five clients' ids, CA..CE. */
extern const char *const clients[5];
/* The resource's keys and channel prefix (ARGV[1] without its epoch): a
 * mutex's q h m, a pool resource's Q h M D (lua/lib/pool.lua), and the
 * election observers' channel (names()). */
extern char qkey[96], hkey[96], mkey[96], chan[96];
extern char pq[96], pm[96], pd[96], ochan[96];
/* ARGV[1]: the channel prefix, maybe with "\0<epoch part>" (set_prefix()). */
extern char prefix_arg[128];
extern size_t prefix_len;
/* Two servers: the module's and the scripts' (no module loaded there). */
extern side mod, lua;

/* Skip the test when the module is not built. */
void need_module(void);
/* INFO's field of rc into out. */
void info_field(redisContext *rc, const char *field, char *out, size_t cap);
/* Start s (module: whether it runs the module's commands) with the extra
 * server arguments. */
void side_start_with(side *s, int module, const char *const *extra);
/* Start s, loading the module into its server when load. */
void side_start(side *s, int module, int load);
/* Whether the AOF files of s hold text (waits up to 3 s for it). */
int aof_has(const side *s, const char *text);
/* The keys and channels of resource res. */
void names(const char *res);
/* SSUBSCRIBE s's subscriber number who to client who's channel. */
void subscribe(side *s, int who);
/* ARGV[1]: the channel prefix and, unless NULL, "\0<epoch_part>". */
void set_prefix(const char *epoch_part);
/* Call script (RT__SCRIPT_*) with the string arguments after ARGV[1]
 * (NULL-terminated): the module's command (module 1) or EVAL. */
redisReply *call(redisContext *rc, int module, int script, ...);
/* The messages a subscriber got so far: a PING after them is answered
 * after every message published before it (one connection, in order).
 * A notice is its payload; a keyspace event "<channel> <key>". */
redisReply *drain(redisContext *s);
/* The subscriber got one notice since it was last drained: a grant of
 * request 1 of its client, naming has and has2 (NULL: anything). */
void one_grant_notice(redisContext *sub, const char *has, const char *has2);
/* Watch s's keyspace events (string, list, hash, sorted set and generic
 * ones; not "expired", which each server's own expiry cycle times). */
void watch_events(side *s);
/* Compare the resource's keys on both sides: q, m, h (and their PTTLs)
 * and the failover hold's era key; for a pool resource Q, M, h, D. */
void same_keys(const char *what, side *a, side *b);
/* One step on both sides: the same call, then the same reply, notices and
 * keys. Returns side a's reply (the caller frees it). */
redisReply *step(side *a, side *b, int script, ...);
/* The module's server alone, on resource res (ARGV[1] without an epoch). */
void mod_start(const char *res);
/* Both servers, on resource res, ARGV[1] with epoch_part (NULL: none). */
void pair_start(const char *res, const char *epoch_part);
/* Make replica a replica of master and wait until it has synced. */
void replicate(side *replica, const side *master);
/* maxmemory below what is used, noeviction: nothing is evicted, every
 * deny-oom command is refused. */
void memory_short(redisContext *rc);

#define STEP(...) freeReplyObject(step(&mod, &lua, __VA_ARGS__, NULL))
#define STEP_AT(i, ...)                                                        \
  ({                                                                           \
    redisReply *r_ = step(&mod, &lua, __VA_ARGS__, NULL);                      \
    cr_assert_eq(r_->type, REDIS_REPLY_ARRAY, "%s",                            \
                 r_->type == REDIS_REPLY_ERROR ? r_->str : "");                \
    cr_assert_gt(r_->elements, (size_t)(i));                                   \
    long long v_ = r_->element[i]->integer;                                    \
    freeReplyObject(r_);                                                       \
    v_;                                                                        \
  })

enum { QUEUED = 0, GRANTED = 1, RELEASED = 1, CANCELED = 2 };

#endif /* RT_TESTS_MODULE_PAIR_H */
