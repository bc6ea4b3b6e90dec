/* The part of the Redis modules API this module uses, declared by the
 * project from the documented API (Redis 7.0, "Modules API reference").
 * Debian ships no header for it, so the types, constants and signatures
 * below are written from the documentation; only what redturn's commands
 * call is here.
 *
 * Redis hands a module its API at load: the first field of the context
 * given to RedisModule_OnLoad is a pointer to RedisModule_GetApi, which
 * looks up every other function by its name ("RedisModule_Call", ...).
 * rtm_api_init() does that once and keeps the pointers in rtm (rm_api.c);
 * the module calls them as rtm.Call(...). Functions added after 7.0 are
 * optional: their pointer stays NULL on a server without them. */
#ifndef RT_MODULE_RM_API_H
#define RT_MODULE_RM_API_H

#include <stddef.h>
#include <stdint.h>

/* Return codes of most API functions. */
#define RTM_OK 0
#define RTM_ERR 1

/* The API version this module is written against. */
#define RTM_APIVER_1 1

/* RedisModule_CallReplyType() values. */
#define RTM_REPLY_STRING 0
#define RTM_REPLY_ERROR 1
#define RTM_REPLY_INTEGER 2
#define RTM_REPLY_ARRAY 3
#define RTM_REPLY_NULL 4

/* RedisModule_OpenKey() modes and RedisModule_KeyType() values. */
#define RTM_READ 1
#define RTM_WRITE 2
#define RTM_KEYTYPE_EMPTY 0
#define RTM_KEYTYPE_STRING 1
#define RTM_KEYTYPE_LIST 2
#define RTM_KEYTYPE_HASH 3
#define RTM_KEYTYPE_ZSET 5

/* RedisModule_NotifyKeyspaceEvent() classes. */
#define RTM_NOTIFY_GENERIC (1 << 2)
#define RTM_NOTIFY_STRING (1 << 3)
#define RTM_NOTIFY_LIST (1 << 4)
#define RTM_NOTIFY_HASH (1 << 6)
#define RTM_NOTIFY_ZSET (1 << 7)

/* RedisModule_ListPop() end; RedisModule_HashSet() value that deletes. */
#define RTM_LIST_HEAD 0
#define RTM_HASH_DELETE ((RedisModuleString *)(long)1)

/* RedisModule_HashGet() flags: fields as RedisModuleString (NONE) or as
 * C strings (CFIELDS); EXISTS: whether each field is there (int *). */
#define RTM_HASH_NONE 0
#define RTM_HASH_CFIELDS (1 << 2)
#define RTM_HASH_EXISTS (1 << 3)

/* Key-spec flags (RedisModule_SetCommandInfo). */
#define RTM_KEY_RO (1ULL << 0)
#define RTM_KEY_RW (1ULL << 1)
#define RTM_KEY_ACCESS (1ULL << 4)
#define RTM_KEY_UPDATE (1ULL << 5)

/* Opaque handles. */
typedef struct RedisModuleCtx RedisModuleCtx;
typedef struct RedisModuleString RedisModuleString;
typedef struct RedisModuleCallReply RedisModuleCallReply;
typedef struct RedisModuleCommand RedisModuleCommand;
typedef struct RedisModuleServerInfoData RedisModuleServerInfoData;
typedef struct RedisModuleKey RedisModuleKey;

/* A command's implementation. */
typedef int (*rtm_cmdfunc)(RedisModuleCtx *ctx, RedisModuleString **argv,
                           int argc);

/* ---- command info (RedisModule_SetCommandInfo, version 1) ----------------
 * Redis reads these structures in the module's memory, stepping through
 * arrays by the sizes the version record gives, so their layout is the
 * documented one, field for field. */

/* How the search for a key spec's keys begins: at an index of argv. */
enum { RTM_BS_INDEX = 2 }; /* 0 ends the key-spec array, 1 unknown */
/* How its keys are found: a count at an index, then that many keys. */
enum { RTM_FK_KEYNUM = 3 }; /* 1 unknown, 2 range */

typedef struct rtm_history {
  const char *since;
  const char *changes;
} rtm_history;

typedef struct rtm_keyspec {
  const char *notes;
  uint64_t flags; /* RTM_KEY_* */
  int begin_search_type;
  union {
    struct {
      int pos;
    } index;
    struct {
      const char *keyword;
      int startfrom;
    } keyword;
  } bs;
  int find_keys_type;
  union {
    struct {
      int lastkey, keystep, limit;
    } range;
    struct {
      int keynumidx; /* relative to the begin search */
      int firstkey;  /* relative to the begin search */
      int keystep;
    } keynum;
  } fk;
} rtm_keyspec;

typedef struct rtm_arg {
  const char *name;
  int type;
  int key_spec_index;
  const char *token, *summary, *since;
  int flags;
  const char *deprecated_since;
  struct rtm_arg *subargs;
} rtm_arg;

typedef struct rtm_info_version {
  int version; /* 1 */
  size_t sizeof_historyentry;
  size_t sizeof_keyspec;
  size_t sizeof_arg;
} rtm_info_version;

typedef struct rtm_command_info {
  const rtm_info_version *version;
  const char *summary;
  const char *complexity;
  const char *since;
  rtm_history *history;
  const char *tips;
  int arity; /* -N: at least N */
  rtm_keyspec *key_specs;
  rtm_arg *args;
} rtm_command_info;

/* ---- the functions ---------------------------------------------------- */

typedef struct rtm_api {
  int (*GetApi)(const char *name, void *target);
  void (*SetModuleAttribs)(RedisModuleCtx *ctx, const char *name, int ver,
                           int apiver);
  int (*IsModuleNameBusy)(const char *name);
  int (*CreateCommand)(RedisModuleCtx *ctx, const char *name,
                       rtm_cmdfunc cmdfunc, const char *strflags, int firstkey,
                       int lastkey, int keystep);
  RedisModuleCommand *(*GetCommand)(RedisModuleCtx *ctx, const char *name);
  int (*SetCommandInfo)(RedisModuleCommand *command,
                        const rtm_command_info *info);
  /* Redis 7.2 and later only (NULL before). */
  int (*SetCommandACLCategories)(RedisModuleCommand *command,
                                 const char *aclflags);

  RedisModuleCallReply *(*Call)(RedisModuleCtx *ctx, const char *cmdname,
                                const char *fmt, ...);
  int (*CallReplyType)(RedisModuleCallReply *reply);
  long long (*CallReplyInteger)(RedisModuleCallReply *reply);
  const char *(*CallReplyStringPtr)(RedisModuleCallReply *reply, size_t *len);
  size_t (*CallReplyLength)(RedisModuleCallReply *reply);
  RedisModuleCallReply *(*CallReplyArrayElement)(RedisModuleCallReply *reply,
                                                 size_t idx);
  void (*FreeCallReply)(RedisModuleCallReply *reply);
  /* Free what the command made (replies, strings) when it returns. */
  void (*AutoMemory)(RedisModuleCtx *ctx);

  /* The getkeys-api: Redis asks a command which arguments are keys. */
  int (*IsKeysPositionRequest)(RedisModuleCtx *ctx);
  void (*KeyAtPos)(RedisModuleCtx *ctx, int pos);

  int (*WrongArity)(RedisModuleCtx *ctx);
  int (*ReplyWithLongLong)(RedisModuleCtx *ctx, long long ll);
  int (*ReplyWithError)(RedisModuleCtx *ctx, const char *err);
  int (*ReplyWithArray)(RedisModuleCtx *ctx, long len);
  int (*ReplyWithStringBuffer)(RedisModuleCtx *ctx, const char *buf,
                               size_t len);

  const char *(*StringPtrLen)(const RedisModuleString *str, size_t *len);
  RedisModuleString *(*CreateString)(RedisModuleCtx *ctx, const char *ptr,
                                     size_t len);
  void (*FreeString)(RedisModuleCtx *ctx, RedisModuleString *str);

  /* Reading keys in place (no command, nothing to replicate). */
  RedisModuleKey *(*OpenKey)(RedisModuleCtx *ctx, RedisModuleString *keyname,
                             int mode);
  void (*CloseKey)(RedisModuleKey *key);
  int (*KeyType)(RedisModuleKey *key);
  /* Whether keyname exists, without opening it (cheaper). */
  int (*KeyExists)(RedisModuleCtx *ctx, RedisModuleString *keyname);
  size_t (*ValueLength)(RedisModuleKey *key);
  char *(*StringDMA)(RedisModuleKey *key, size_t *len, int mode);
  /* field, &value pairs, then NULL; a missing field's value is NULL. */
  int (*HashGet)(RedisModuleKey *key, int flags, ...);
  RedisModuleString *(*ListGet)(RedisModuleKey *key, long index);
  /* Writing in place; the caller replicates the effect. */
  int (*StringSet)(RedisModuleKey *key, RedisModuleString *str);
  RedisModuleString *(*ListPop)(RedisModuleKey *key, int where);
  /* field, value pairs, then NULL; returns how many changed. */
  int (*HashSet)(RedisModuleKey *key, int flags, ...);
  int (*SetAbsExpire)(RedisModuleKey *key, long long expire_ms);
  /* The key's expiry (unix ms), -1 without one. */
  long long (*GetAbsExpire)(RedisModuleKey *key);
  int (*DeleteKey)(RedisModuleKey *key);
  /* Sorted sets in place: add (flags NULL: add or update), remove,
   * score; a range by score walked from its first or last element. */
  int (*ZsetAdd)(RedisModuleKey *key, double score, RedisModuleString *ele,
                 int *flagsptr);
  int (*ZsetRem)(RedisModuleKey *key, RedisModuleString *ele, int *deleted);
  int (*ZsetScore)(RedisModuleKey *key, RedisModuleString *ele, double *score);
  int (*ZsetFirstInScoreRange)(RedisModuleKey *key, double min, double max,
                               int minex, int maxex);
  int (*ZsetLastInScoreRange)(RedisModuleKey *key, double min, double max,
                              int minex, int maxex);
  RedisModuleString *(*ZsetRangeCurrentElement)(RedisModuleKey *key,
                                                double *score);
  int (*ZsetRangeNext)(RedisModuleKey *key);
  int (*ZsetRangeEndReached)(RedisModuleKey *key);
  void (*ZsetRangeStop)(RedisModuleKey *key);
  int (*Replicate)(RedisModuleCtx *ctx, const char *cmdname, const char *fmt,
                   ...);
  int (*NotifyKeyspaceEvent)(RedisModuleCtx *ctx, int type, const char *event,
                             RedisModuleString *key);
  /* Memory freed when the command returns. */
  void *(*PoolAlloc)(RedisModuleCtx *ctx, size_t bytes);
  /* used memory / maxmemory (0 without a limit; above 1: out of memory,
   * where Redis refuses deny-oom commands) */
  float (*GetUsedMemoryRatio)(void);

  RedisModuleServerInfoData *(*GetServerInfo)(RedisModuleCtx *ctx,
                                              const char *section);
  const char *(*ServerInfoGetFieldC)(RedisModuleServerInfoData *data,
                                     const char *field);
  void (*FreeServerInfo)(RedisModuleCtx *ctx, RedisModuleServerInfoData *data);
  void (*Log)(RedisModuleCtx *ctx, const char *level, const char *fmt, ...)
      __attribute__((format(printf, 3, 4)));
} rtm_api;

/* The API table: written once by rtm_api_init() while Redis loads the
 * module, before any command can run, and only read afterwards (Redis runs
 * module commands on its main thread). */
extern rtm_api rtm;

/* Fetch every function through ctx's GetApi pointer and register the
 * module as name, version ver. RTM_ERR if a required function is missing
 * (a server older than 7.0) or the name is taken. */
int rtm_api_init(RedisModuleCtx *ctx, const char *name, int ver);

#endif /* RT_MODULE_RM_API_H */
