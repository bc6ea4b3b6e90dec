/* The handshake of a new connection, sent as one batch once its link is
 * open: AUTH, SELECT, ROLE (through Sentinel: the server must be the
 * master), INFO (the server's version, eviction policy, cluster mode and
 * run id), CLIENT SETNAME, the redturn module's version (redturn.version:
 * a mutex's calls use its commands where it answers one this client
 * knows), the loading of the scripts (FUNCTION LOAD of
 * the library, or SCRIPT LOAD of each script on the eval path), then the
 * kill of our previous connection, CLIENT ID and, for the subscriber, its
 * channel. It ends through conn->handshake_over: 0 once every reply is in,
 * or why the connection must be dropped. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "reply.h"

/* Queue one handshake command; its reply goes to fn. */
static int handshake_send(rt__conn *c, rt__conn_reply_fn fn, int argc,
                          const char **argv, const size_t *lens) {
  return rt__conn_send(c, fn, NULL, argc, argv, lens);
}

/* The command connection is up once every handshake reply is in (the
 * subscriber once its SUBSCRIBE is answered). */
static void handshake_step(rt__conn *c) {
  if (c->channel == NULL && c->sent_len == 0 && c->state == RT__CONN_CONNECTING)
    c->handshake_over(c, 0);
}

/* Drop the connection for an error reply to a handshake command, keeping
 * Redis's own words. */
static void handshake_refused(rt__conn *c, const char *what,
                              const redisReply *reply) {
  int err = rt__reply_error(reply->str, reply->len);
  rt__conn_set_error(c, "%s: %.*s", what, (int)reply->len, reply->str);
  c->handshake_over(c, err == RT_EREDIS ? RT_ECONNECT : err);
}

static void handshake_answer(rt__conn *c, redisReply *reply, const char *what) {
  if (reply == NULL)
    return;
  if (reply->type == REDIS_REPLY_ERROR) {
    handshake_refused(c, what, reply);
    return;
  }
  handshake_step(c);
}

static void auth_reply(rt__conn *c, redisReply *r, void *arg) {
  RT__UNUSED(arg);
  handshake_answer(c, r, "AUTH");
}

static void select_reply(rt__conn *c, redisReply *r, void *arg) {
  char what[24];
  RT__UNUSED(arg);
  snprintf(what, sizeof(what), "SELECT %d", c->cfg->db);
  handshake_answer(c, r, what);
}

static void setname_reply(rt__conn *c, redisReply *r, void *arg) {
  RT__UNUSED(arg);
  handshake_answer(c, r, "CLIENT SETNAME");
}

static void load_reply(rt__conn *c, redisReply *r, void *arg) {
  RT__UNUSED(arg);
  handshake_answer(c, r, "SCRIPT LOAD");
}

/* SCRIPT LOAD of every script (the eval path). */
static int load_scripts(rt__conn *c) {
  int err = 0;
  c->script_path = RT_SCRIPT_PATH_EVAL;
  for (size_t i = 0; err == 0 && i < c->nscripts; i++) {
    const char *argv[3] = {"SCRIPT", "LOAD", c->scripts[i].body};
    size_t lens[3] = {6, 4, c->scripts[i].len};
    err = handshake_send(c, load_reply, 3, argv, lens);
  }
  return err;
}

/* Functions refused: the eval path, unless the options force Functions;
 * then the connect fails with what Redis said (refusal; NULL: the
 * connection's last error already says it). */
static void functions_refused(rt__conn *c, const redisReply *refusal) {
  if (c->cfg->script_path == RT_SCRIPT_PATH_FUNCTIONS) {
    if (refusal != NULL)
      handshake_refused(c, "FUNCTION LOAD", refusal);
    else
      c->handshake_over(c, RT_ECONNECT);
    return;
  }
  if (load_scripts(c) != 0) {
    rt__conn_set_error(c, "connect %s: out of memory", c->peer);
    c->handshake_over(c, RT_ENOMEM);
  }
}

/* FUNCTION LIST LIBRARYNAME's answer, asked after FUNCTION LOAD was
 * refused for memory: the library is there (a library of that name
 * pattern, ours), or not. */
static void function_list_reply(rt__conn *c, redisReply *r, void *arg) {
  RT__UNUSED(arg);
  if (r == NULL)
    return;
  if (r->type == REDIS_REPLY_ARRAY && r->elements > 0) {
    c->script_path = RT_SCRIPT_PATH_FUNCTIONS;
    handshake_step(c);
  } else {
    functions_refused(c, NULL);
  }
}

/* FUNCTION LOAD's answer: the library is there (loaded now, or "already
 * exists": another client loaded it), or, refused (an ACL without
 * FUNCTION), the eval path unless the options force Functions. Refused
 * for memory (used memory over maxmemory: Redis refuses FUNCTION LOAD
 * before it looks), the library may be there all the same, and a client
 * reconnecting then must still get its Functions: ask (FUNCTION LIST,
 * which memory does not stop). (A server before Redis 7.0, which has no
 * FUNCTION, was refused by INFO's answer.) */
static void function_load_reply(rt__conn *c, redisReply *r, void *arg) {
  RT__UNUSED(arg);
  if (r == NULL)
    return;
  if (r->type != REDIS_REPLY_ERROR || rt__reply_is_library_exists(r)) {
    c->script_path = RT_SCRIPT_PATH_FUNCTIONS;
    handshake_step(c);
    return;
  }
  rt__conn_set_error(c, "FUNCTION LOAD: %.*s", (int)r->len, r->str);
  if (rt__reply_is_oom(r)) {
    const char *argv[4] = {"FUNCTION", "LIST", "LIBRARYNAME", rt__library_name};
    size_t lens[4] = {8, 4, 11, strlen(rt__library_name)};
    if (handshake_send(c, function_list_reply, 4, argv, lens) == 0)
      return;
  }
  functions_refused(c, r);
}

/* redturn.version's answer: the module's contract version (module/
 * README.md), or an error: not loaded ("unknown command"), or refused
 * (an ACL). Only RT__MODULE_VERSION is used; anything else leaves this
 * connection on the Lua path, unless the options force the module. */
static void module_version_reply(rt__conn *c, redisReply *r, void *arg) {
  RT__UNUSED(arg);
  if (r == NULL)
    return;
  c->module_version = r->type == REDIS_REPLY_INTEGER ? (int)r->integer : 0;
  if (r->type == REDIS_REPLY_INTEGER)
    c->module =
        r->integer == RT__MODULE_VERSION ? RT_MODULE_USED : RT_MODULE_VERSION;
  else if (rt__reply_is_unknown_command(r))
    c->module = RT_MODULE_ABSENT;
  else
    c->module = RT_MODULE_REFUSED;
  if (c->module == RT_MODULE_USED ||
      c->cfg->script_path != RT_SCRIPT_PATH_MODULE) {
    handshake_step(c);
    return;
  }
  if (c->module == RT_MODULE_VERSION)
    rt__conn_set_error(c,
                       "script_path module: %s has redturn module version %d; "
                       "this client speaks version %d",
                       c->peer, c->module_version, RT__MODULE_VERSION);
  else if (r->type == REDIS_REPLY_ERROR)
    rt__conn_set_error(c,
                       "script_path module: %s has no redturn module%s "
                       "(redturn.version: %.*s); load it with redis-server "
                       "--loadmodule <libdir>/redturn/redturn_module.so or "
                       "MODULE LOAD",
                       c->peer,
                       c->module == RT_MODULE_REFUSED ? " we may use" : "",
                       (int)r->len, r->str);
  else
    rt__conn_set_error(c,
                       "script_path module: %s answered redturn.version with "
                       "a reply of type %d",
                       c->peer, r->type);
  c->handshake_over(c, c->module == RT_MODULE_REFUSED
                           ? rt__reply_error(r->str, r->len)
                           : RT_ENOMODULE);
}

/* Through Sentinel: the server must be the master (a Sentinel may name a
 * demoted master for a moment after a failover). */
static void role_reply(rt__conn *c, redisReply *r, void *arg) {
  RT__UNUSED(arg);
  if (r == NULL)
    return;
  if (r->type == REDIS_REPLY_ERROR) {
    handshake_refused(c, "ROLE", r);
    return;
  }
  if (r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
      r->element[0]->type != REDIS_REPLY_STRING ||
      strcmp(r->element[0]->str, "master") != 0) {
    rt__conn_set_error(
        c,
        "%s, named master \"%s\" by the Sentinels, is not a master "
        "(ROLE says %s): asking the Sentinels again",
        c->peer, c->cfg->sentinel_master,
        r->type == REDIS_REPLY_ARRAY && r->elements >= 1 &&
                r->element[0]->type == REDIS_REPLY_STRING
            ? r->element[0]->str
            : "something else");
    c->handshake_over(c, RT_EREADONLY);
    return;
  }
  handshake_step(c);
}

/* CLIENT KILL of our previous connection: "No such client" (it is gone
 * already) and an ACL refusal are both fine. */
static void kill_reply(rt__conn *c, redisReply *r, void *arg) {
  RT__UNUSED(arg);
  if (r != NULL)
    handshake_step(c);
}

static void id_reply(rt__conn *c, redisReply *reply, void *arg) {
  RT__UNUSED(arg);
  if (reply == NULL)
    return;
  if (reply->type == REDIS_REPLY_INTEGER)
    c->redis_id = reply->integer;
  handshake_step(c);
}

/* The value of "field:" in an INFO text, up to the line end, or NULL. */
static const char *info_field(const char *info, const char *field,
                              size_t *len) {
  size_t n = strlen(field);
  for (const char *p = info; (p = strstr(p, field)) != NULL; p += n) {
    if ((p == info || p[-1] == '\n') && p[n] == ':') {
      *len = strcspn(p + n + 1, "\r\n");
      return p + n + 1;
    }
  }
  return NULL;
}

static void sub_reply(rt__conn *c, redisReply *reply, void *arg);

/* The rest of the handshake, sent once INFO told which server this is: the
 * kill of our previous connection (only on the same server run: ids start
 * again after a restart), CLIENT ID, and for the subscriber the channel
 * (a subscribed connection may send nothing else). */
static int handshake_rest(rt__conn *c, const char *run_id, size_t run_len) {
  int err = 0;
  if (c->redis_id != 0 && run_len == strlen(c->run_id) &&
      memcmp(run_id, c->run_id, run_len) == 0) {
    char id[24];
    int n = snprintf(id, sizeof(id), "%lld", c->redis_id);
    const char *argv[4] = {"CLIENT", "KILL", "ID", id};
    size_t lens[4] = {6, 4, 2, (size_t)n};
    err = handshake_send(c, kill_reply, 4, argv, lens);
  }
  c->redis_id = 0;
  snprintf(c->run_id, sizeof(c->run_id), "%.*s", (int)run_len, run_id);
  if (err == 0) {
    const char *argv[2] = {"CLIENT", "ID"};
    size_t lens[2] = {6, 2};
    err = handshake_send(c, id_reply, 2, argv, lens);
  }
  if (err == 0 && c->channel != NULL && !c->cluster_enabled) {
    const char *argv[2] = {"SSUBSCRIBE", c->channel};
    size_t lens[2] = {10, c->channel_len};
    err = handshake_send(c, sub_reply, 2, argv, lens);
  }
  if (err == 0 && c->channel != NULL) {
    const char *argv[2] = {"SUBSCRIBE", c->channel};
    size_t lens[2] = {9, c->channel_len};
    err = handshake_send(c, sub_reply, 2, argv, lens);
  }
  return err;
}

/* INFO server and memory: SPUBLISH needs Redis 7, and a policy that may
 * evict keys could free a lock early (an evicted holder key). */
static void info_reply(rt__conn *c, redisReply *reply, void *arg) {
  size_t len, run_len = 0;
  RT__UNUSED(arg);
  if (reply == NULL)
    return;
  if (reply->type == REDIS_REPLY_ERROR) {
    handshake_refused(c, "INFO", reply);
    return;
  }
  if (reply->type != REDIS_REPLY_STRING) {
    rt__conn_set_error(c, "INFO: the reply is not a string");
    c->handshake_over(c, RT_EPROTO);
    return;
  }
  const char *v = info_field(reply->str, "redis_version", &len);
  if (v == NULL || atoi(v) < 7) {
    rt__conn_set_error(
        c, "%s runs Redis %.*s: redturn needs Redis 7.0 or newer", c->peer,
        v != NULL ? (int)(len < 32 ? len : 32) : 7, v != NULL ? v : "unknown");
    c->handshake_over(c, RT_ESERVER);
    return;
  }
  v = info_field(reply->str, "maxmemory_policy", &len);
  if (!c->cfg->allow_eviction &&
      (v == NULL || len != 10 || memcmp(v, "noeviction", 10) != 0)) {
    rt__conn_set_error(
        c,
        "%s has maxmemory-policy %.*s: Redis may evict lock keys, and "
        "an evicted holder key frees its lock early; set "
        "maxmemory-policy noeviction (or allow_eviction)",
        c->peer, v != NULL ? (int)(len < 32 ? len : 32) : 7,
        v != NULL ? v : "unknown");
    c->handshake_over(c, RT_EEVICTION);
    return;
  }
  v = info_field(reply->str, "cluster_enabled", &len);
  c->cluster_enabled = v != NULL && len == 1 && *v == '1';
  const char *run_id = info_field(reply->str, "run_id", &run_len);
  if (handshake_rest(c, run_id != NULL ? run_id : "", run_len) != 0) {
    rt__conn_set_error(c, "connect %s: out of memory queueing the handshake",
                       c->peer);
    c->handshake_over(c, RT_ECONNECT);
    return;
  }
  handshake_step(c);
}

/* The subscriber's SSUBSCRIBE and SUBSCRIBE. The plain SUBSCRIBE to the
 * same name answers last, so its answer ends the subscriber's handshake. */
static void sub_reply(rt__conn *c, redisReply *reply, void *arg) {
  RT__UNUSED(arg);
  if (reply == NULL)
    return;
  if (reply->type == REDIS_REPLY_ERROR) {
    rt__conn_set_error(c, "subscribing to the client's channel: %.*s",
                       (int)reply->len, reply->str);
    c->handshake_over(c, rt__reply_error(reply->str, reply->len));
    return;
  }
  if (reply->type == REDIS_REPLY_ARRAY && reply->elements >= 1 &&
      reply->element[0]->type == REDIS_REPLY_STRING &&
      strcmp(reply->element[0]->str, "subscribe") == 0 &&
      c->state == RT__CONN_CONNECTING)
    c->handshake_over(c, 0);
}

int rt__conn_handshake(rt__conn *c) {
  const rt__config *cfg = c->cfg;
  int err = 0;
  if (cfg->password != NULL) {
    const char *argv[3] = {"AUTH", cfg->username, cfg->password};
    size_t lens[3] = {4, 0, strlen(cfg->password)};
    if (cfg->username != NULL) {
      lens[1] = strlen(cfg->username);
      err = handshake_send(c, auth_reply, 3, argv, lens);
    } else {
      argv[1] = cfg->password;
      lens[1] = lens[2];
      err = handshake_send(c, auth_reply, 2, argv, lens);
    }
  }
  if (err == 0 && c->channel == NULL && cfg->db != 0) {
    char db[16];
    int n = snprintf(db, sizeof(db), "%d", cfg->db);
    const char *argv[2] = {"SELECT", db};
    size_t lens[2] = {6, (size_t)n};
    err = handshake_send(c, select_reply, 2, argv, lens);
  }
  if (err == 0 && cfg->nsentinels > 0) {
    const char *argv[1] = {"ROLE"};
    size_t lens[1] = {4};
    err = handshake_send(c, role_reply, 1, argv, lens);
  }
  if (err == 0) {
    const char *argv[4] = {"INFO", "server", "memory", "cluster"};
    size_t lens[4] = {4, 6, 6, 7};
    err = handshake_send(c, info_reply, 4, argv, lens);
  }
  if (err == 0) {
    const char *argv[3] = {"CLIENT", "SETNAME", c->name};
    size_t lens[3] = {6, 7, strlen(c->name)};
    err = handshake_send(c, setname_reply, 3, argv, lens);
  }
  /* Loading the scripts up front keeps NOSCRIPT (and the resend it costs,
   * which lands behind later commands) for a SCRIPT FLUSH mid-session.
   * FUNCTION LOAD of a library that exists is refused before its code is
   * compiled: cheap for the server. */
  c->script_path = RT_SCRIPT_PATH_AUTO;
  c->module = RT_MODULE_UNKNOWN;
  c->module_version = 0;
  /* The module, where the options allow it: asked on every connect, so
   * each server (each node of a cluster, each master after a failover)
   * decides for its own connection. The Lua path is loaded beside it, for
   * the calls the module does not run. */
  if (err == 0 && c->scripts != NULL &&
      (cfg->script_path == RT_SCRIPT_PATH_AUTO ||
       cfg->script_path == RT_SCRIPT_PATH_MODULE)) {
    const char *argv[1] = {"redturn.version"};
    size_t lens[1] = {15};
    err = handshake_send(c, module_version_reply, 1, argv, lens);
  }
  if (err == 0 && c->scripts != NULL &&
      cfg->script_path != RT_SCRIPT_PATH_EVAL) {
    const char *argv[3] = {"FUNCTION", "LOAD", rt__library};
    size_t lens[3] = {8, 4, rt__library_len};
    err = handshake_send(c, function_load_reply, 3, argv, lens);
  } else if (err == 0 && c->scripts != NULL) {
    err = load_scripts(c);
  }
  return err;
}
