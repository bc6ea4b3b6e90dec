/* The pool resources' native commands (pool.c), one per lua/ script of the
 * same name: semaphores, read-write locks and elections; module.c
 * registers them. */
#ifndef RT_MODULE_POOL_H
#define RT_MODULE_POOL_H

#include "rm_api.h"

int rtm_cmd_pool_enqueue(RedisModuleCtx *ctx, RedisModuleString **argv,
                         int argc);
int rtm_cmd_pool_try(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int rtm_cmd_pool_release(RedisModuleCtx *ctx, RedisModuleString **argv,
                         int argc);
int rtm_cmd_pool_reap(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);
int rtm_cmd_pool_extend(RedisModuleCtx *ctx, RedisModuleString **argv,
                        int argc);
int rtm_cmd_pool_inspect(RedisModuleCtx *ctx, RedisModuleString **argv,
                         int argc);
int rtm_cmd_proclaim(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);

#endif /* RT_MODULE_POOL_H */
