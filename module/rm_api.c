/* Fetching the Redis modules API at load (rm_api.h): each function by its
 * documented name through the GetApi pointer Redis puts first in the load
 * context. */
#include "rm_api.h"

#include <stddef.h>

rtm_api rtm;

/* Look name up into *target; a NULL *target tells a missing one. */
static int fetch(const char *name, void *target) {
  return rtm.GetApi(name, target) == RTM_OK ? 0 : -1;
}

int rtm_api_init(RedisModuleCtx *ctx, const char *name, int ver) {
  /* The documented convention: the context's first field is GetApi. */
  void *getapi = ((void **)ctx)[0];
  *(void **)&rtm.GetApi = getapi;
  struct {
    const char *name;
    void *target;
  } need[] = {
      {"RedisModule_SetModuleAttribs", &rtm.SetModuleAttribs},
      {"RedisModule_IsModuleNameBusy", &rtm.IsModuleNameBusy},
      {"RedisModule_CreateCommand", &rtm.CreateCommand},
      {"RedisModule_GetCommand", &rtm.GetCommand},
      {"RedisModule_SetCommandInfo", &rtm.SetCommandInfo},
      {"RedisModule_Call", &rtm.Call},
      {"RedisModule_CallReplyType", &rtm.CallReplyType},
      {"RedisModule_CallReplyInteger", &rtm.CallReplyInteger},
      {"RedisModule_CallReplyStringPtr", &rtm.CallReplyStringPtr},
      {"RedisModule_CallReplyLength", &rtm.CallReplyLength},
      {"RedisModule_CallReplyArrayElement", &rtm.CallReplyArrayElement},
      {"RedisModule_FreeCallReply", &rtm.FreeCallReply},
      {"RedisModule_AutoMemory", &rtm.AutoMemory},
      {"RedisModule_IsKeysPositionRequest", &rtm.IsKeysPositionRequest},
      {"RedisModule_KeyAtPos", &rtm.KeyAtPos},
      {"RedisModule_WrongArity", &rtm.WrongArity},
      {"RedisModule_ReplyWithLongLong", &rtm.ReplyWithLongLong},
      {"RedisModule_ReplyWithError", &rtm.ReplyWithError},
      {"RedisModule_ReplyWithArray", &rtm.ReplyWithArray},
      {"RedisModule_ReplyWithStringBuffer", &rtm.ReplyWithStringBuffer},
      {"RedisModule_StringPtrLen", &rtm.StringPtrLen},
      {"RedisModule_CreateString", &rtm.CreateString},
      {"RedisModule_FreeString", &rtm.FreeString},
      {"RedisModule_OpenKey", &rtm.OpenKey},
      {"RedisModule_CloseKey", &rtm.CloseKey},
      {"RedisModule_KeyType", &rtm.KeyType},
      {"RedisModule_ValueLength", &rtm.ValueLength},
      {"RedisModule_StringDMA", &rtm.StringDMA},
      {"RedisModule_HashGet", &rtm.HashGet},
      {"RedisModule_ListGet", &rtm.ListGet},
      {"RedisModule_StringSet", &rtm.StringSet},
      {"RedisModule_ListPop", &rtm.ListPop},
      {"RedisModule_HashSet", &rtm.HashSet},
      {"RedisModule_SetAbsExpire", &rtm.SetAbsExpire},
      {"RedisModule_GetAbsExpire", &rtm.GetAbsExpire},
      {"RedisModule_KeyExists", &rtm.KeyExists},
      {"RedisModule_DeleteKey", &rtm.DeleteKey},
      {"RedisModule_ZsetAdd", &rtm.ZsetAdd},
      {"RedisModule_ZsetRem", &rtm.ZsetRem},
      {"RedisModule_ZsetScore", &rtm.ZsetScore},
      {"RedisModule_ZsetFirstInScoreRange", &rtm.ZsetFirstInScoreRange},
      {"RedisModule_ZsetLastInScoreRange", &rtm.ZsetLastInScoreRange},
      {"RedisModule_ZsetRangeCurrentElement", &rtm.ZsetRangeCurrentElement},
      {"RedisModule_ZsetRangeNext", &rtm.ZsetRangeNext},
      {"RedisModule_ZsetRangeEndReached", &rtm.ZsetRangeEndReached},
      {"RedisModule_ZsetRangeStop", &rtm.ZsetRangeStop},
      {"RedisModule_Replicate", &rtm.Replicate},
      {"RedisModule_NotifyKeyspaceEvent", &rtm.NotifyKeyspaceEvent},
      {"RedisModule_PoolAlloc", &rtm.PoolAlloc},
      {"RedisModule_GetUsedMemoryRatio", &rtm.GetUsedMemoryRatio},
      {"RedisModule_GetServerInfo", &rtm.GetServerInfo},
      {"RedisModule_ServerInfoGetFieldC", &rtm.ServerInfoGetFieldC},
      {"RedisModule_FreeServerInfo", &rtm.FreeServerInfo},
      {"RedisModule_Log", &rtm.Log},
  };
  for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++)
    if (fetch(need[i].name, need[i].target) != 0)
      return RTM_ERR;
  /* Optional: ACL categories of module commands came with Redis 7.2. */
  if (fetch("RedisModule_SetCommandACLCategories",
            &rtm.SetCommandACLCategories) != 0)
    rtm.SetCommandACLCategories = NULL;
  if (rtm.IsModuleNameBusy(name))
    return RTM_ERR;
  rtm.SetModuleAttribs(ctx, name, ver, RTM_APIVER_1);
  return RTM_OK;
}
