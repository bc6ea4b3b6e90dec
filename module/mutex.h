/* The mutex's native commands (mutex.c), one per lua/ script of the same
 * name; module.c registers them. */
#ifndef RT_MODULE_MUTEX_H
#define RT_MODULE_MUTEX_H

#include "rm_api.h"

int rtm_cmd_enqueue(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int rtm_cmd_try(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int rtm_cmd_release(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int rtm_cmd_reap(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int rtm_cmd_extend(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int rtm_cmd_inspect(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);

#endif /* RT_MODULE_MUTEX_H */
