/* What every native command shares (command.c): its run (set up the call,
 * the body, the error reply), its numeric arguments and its replies of
 * integers. mutex.c and pool.c build their commands on it. */
#ifndef RT_MODULE_COMMAND_H
#define RT_MODULE_COMMAND_H

#include "prelude.h"

/* The keys' suffixes of a mutex's and of a pool resource's commands. */
#define RTM_MUTEX_KEYS RT_PROTO_KEY_SUFFIXES
#define RTM_POOL_KEYS RT_PROTO_POOL_KEY_SUFFIXES

/* Set up the call (keys with the given suffixes, at least min_args ARGV
 * entries), run body, reply with its error if it failed; a keys-position
 * request (getkeys-api) gets the keys instead. */
int rtm_run(RedisModuleCtx *ctx, RedisModuleString **argv, int argc,
            const char *name, const char *suffixes, int min_args,
            const char *usage, void (*body)(rtm_call *));

/* ARGV[i + 1] as a lease or count: a whole decimal number (digits only,
 * as lease_arg() in lua/lib/prelude.lua) up to 10^15, above 0 when
 * positive; fails the call otherwise. */
long long rtm_number_arg(rtm_call *c, int i, const char *what, int positive);

/* ARGV[i + 1], or "" when absent (a label's nil). */
rtm_str rtm_opt_arg(const rtm_call *c, int i);

/* Reply with an array of n integers. */
void rtm_reply_ints(RedisModuleCtx *ctx, const long long *v, int n);

#endif /* RT_MODULE_COMMAND_H */
