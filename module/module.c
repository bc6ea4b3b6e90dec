/* redturn's Redis module: its load entry point. It registers the native
 * commands of the mutex (mutex.c) and of the pool resources (pool.c) with
 * their flags and key specs, and redturn.version.
 *
 * Handshake: MODULE LIST shows the module as name "redturn" with ver
 * RTM_VERSION, and `redturn.version` answers the same integer. The version
 * counts the command contract (names, arguments, replies): a client uses
 * the module when the version is one it knows. */
#include <string.h>

#include "mutex.h"
#include "pool.h"
#include "prelude.h"
#include "rm_api.h"

/* The contract's version (see above). */
#define RTM_VERSION RT_PROTO_MODULE_VERSION

/* The version of the command-info structures this module fills. */
static const rtm_info_version info_v1 = {
    .version = 1,
    .sizeof_historyentry = sizeof(rtm_history),
    .sizeof_keyspec = sizeof(rtm_keyspec),
    .sizeof_arg = sizeof(rtm_arg),
};

static int cmd_version(RedisModuleCtx *ctx, RedisModuleString **argv,
                       int argc) {
  (void)argv;
  if (argc != 1)
    return rtm.WrongArity(ctx);
  return rtm.ReplyWithLongLong(ctx, RTM_VERSION);
}

/* Register name with flags; its keys are declared as FCALL's are: argv[1]
 * is numkeys and that many keys follow (a "keynum" key spec, for COMMAND
 * GETKEYS and ACL key patterns), and through the getkeys-api (flag
 * "getkeys-api", mutex.c), which Cluster routing uses in Redis 7.0. */
static int add(RedisModuleCtx *ctx, const char *name, rtm_cmdfunc fn,
               const char *flags, int readonly, const char *summary) {
  if (rtm.CreateCommand(ctx, name, fn, flags, 0, 0, 0) != RTM_OK)
    return RTM_ERR;
  RedisModuleCommand *cmd = rtm.GetCommand(ctx, name);
  if (cmd == NULL)
    return RTM_ERR;
  rtm_keyspec specs[2];
  memset(specs, 0, sizeof(specs)); /* specs[1]: the end of the array */
  specs[0].notes = "the resource's keys q, h and m";
  specs[0].flags = readonly ? (RTM_KEY_RO | RTM_KEY_ACCESS)
                            : (RTM_KEY_RW | RTM_KEY_ACCESS | RTM_KEY_UPDATE);
  specs[0].begin_search_type = RTM_BS_INDEX;
  specs[0].bs.index.pos = 1;
  specs[0].find_keys_type = RTM_FK_KEYNUM;
  specs[0].fk.keynum.keynumidx = 0;
  specs[0].fk.keynum.firstkey = 1;
  specs[0].fk.keynum.keystep = 1;
  rtm_command_info info;
  memset(&info, 0, sizeof(info));
  info.version = &info_v1;
  info.summary = summary;
  info.since = "1";
  info.arity = -5;
  info.key_specs = specs;
  if (rtm.SetCommandInfo(cmd, &info) != RTM_OK)
    return RTM_ERR;
  /* Redis 7.2 and later give module commands ACL categories; 7.0 cannot
   * (its users need +@all or each command by name: module/README.md). */
  if (rtm.SetCommandACLCategories != NULL &&
      rtm.SetCommandACLCategories(cmd, readonly ? "read" : "write") != RTM_OK)
    return RTM_ERR;
  return RTM_OK;
}

RTM_EXPORT int RedisModule_OnLoad(RedisModuleCtx *ctx, RedisModuleString **argv,
                                  int argc);

RTM_EXPORT int RedisModule_OnLoad(RedisModuleCtx *ctx, RedisModuleString **argv,
                                  int argc) {
  (void)argv;
  (void)argc;
  if (rtm_api_init(ctx, "redturn", RTM_VERSION) != RTM_OK)
    return RTM_ERR;
  RedisModuleServerInfoData *info = rtm.GetServerInfo(ctx, "server");
  const char *id = info ? rtm.ServerInfoGetFieldC(info, "run_id") : NULL;
  if (id == NULL) {
    rtm.Log(ctx, "warning", "redturn: INFO server has no run_id");
    if (info != NULL)
      rtm.FreeServerInfo(ctx, info);
    return RTM_ERR;
  }
  rtm_set_run_id(id);
  rtm.FreeServerInfo(ctx, info);

  /* No deny-oom: a release, a reap and an extend free or keep memory and
   * must run when it is short (a refused release would stall the queue);
   * the enqueues and tries refuse only a new request themselves
   * (rtm_refuse_new_if_oom), before the write that adds it. */
  static const struct {
    const char *name;
    rtm_cmdfunc fn;
    int readonly;
    const char *summary;
  } cmds[] = {
      {"redturn.enqueue", rtm_cmd_enqueue, 0,
       "Join a mutex's queue (lua/enqueue.lua)"},
      {"redturn.try", rtm_cmd_try, 0,
       "Take a free mutex, never queue (lua/try.lua)"},
      {"redturn.release", rtm_cmd_release, 0,
       "Release or cancel, hand on (lua/release.lua)"},
      {"redturn.reap", rtm_cmd_reap, 0,
       "Hand on an ended lease (lua/reap.lua)"},
      {"redturn.extend", rtm_cmd_extend, 0,
       "Extend a held lease (lua/extend.lua)"},
      {"redturn.inspect", rtm_cmd_inspect, 1,
       "A snapshot of a mutex (lua/inspect.lua)"},
      {"redturn.pool_enqueue", rtm_cmd_pool_enqueue, 0,
       "Join a pool resource's queue (lua/pool_enqueue.lua)"},
      {"redturn.pool_try", rtm_cmd_pool_try, 0,
       "Take free permits, never queue (lua/pool_try.lua)"},
      {"redturn.pool_release", rtm_cmd_pool_release, 0,
       "Release or cancel permits, hand on (lua/pool_release.lua)"},
      {"redturn.pool_reap", rtm_cmd_pool_reap, 0,
       "Free a pool's ended leases, hand on (lua/pool_reap.lua)"},
      {"redturn.pool_extend", rtm_cmd_pool_extend, 0,
       "Extend a pool resource's lease (lua/pool_extend.lua)"},
      {"redturn.pool_inspect", rtm_cmd_pool_inspect, 1,
       "A snapshot of a pool resource (lua/pool_inspect.lua)"},
      {"redturn.proclaim", rtm_cmd_proclaim, 0,
       "Set an election leader's value (lua/proclaim.lua)"},
  };
  for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
    if (add(ctx, cmds[i].name, cmds[i].fn,
            cmds[i].readonly ? "readonly getkeys-api" : "write getkeys-api",
            cmds[i].readonly, cmds[i].summary) != RTM_OK)
      return RTM_ERR;
  if (rtm.CreateCommand(ctx, "redturn.version", cmd_version, "readonly fast", 0,
                        0, 0) != RTM_OK)
    return RTM_ERR;
  return RTM_OK;
}
