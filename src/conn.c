/* A connection to Redis: handshake, deadlines, reconnects and close, over
 * the byte stream of src/link.c. Replies come back in send order, so the
 * ring of unanswered commands says whose reply each one is. */
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "conn.h"
#include "reply.h"
#include "tls.h"

/* Reconnect backoff: 50 ms doubling up to 2 s, plus up to 25% jitter. */
#define RT__BACKOFF_MIN_MS 50
#define RT__BACKOFF_MAX_MS 2000

/* One host name resolution. The conn forgets one it gave up on (timeout,
 * close): its callback then only frees it. */
typedef struct rt__resolve {
  uv_getaddrinfo_t req;
  rt__conn *conn;
} rt__resolve;

static void maybe_closed(rt__conn *c) {
  if (c->state == RT__CONN_CLOSING && c->timer_closed && c->links_open == 0 &&
      c->link == NULL && c->reqs_open == 0 && !c->sentinel_open) {
    c->state = RT__CONN_CLOSED;
    rt__tls_ctx_free(c->tls);
    c->tls = NULL;
    c->ev->closed(c);
  }
}

/* Record the connection's last failure in words. */
static void set_error(rt__conn *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void set_error(rt__conn *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->error, sizeof(c->error), fmt, ap);
  va_end(ap);
}

/* ---- the ring of unanswered commands (replies come back in send order) */

static int sent_push(rt__conn *c, rt__conn_reply_fn fn, void *arg) {
  if (c->sent_len == c->sent_cap) {
    size_t cap = c->sent_cap ? c->sent_cap * 2 : 16;
    rt__sent *n = rt__reallocarray(NULL, cap, sizeof(*n));
    if (n == NULL)
      return RT_ENOMEM;
    for (size_t i = 0; i < c->sent_len; i++)
      n[i] = c->sent[(c->sent_head + i) % c->sent_cap];
    rt__free(c->sent);
    c->sent = n;
    c->sent_cap = cap;
    c->sent_head = 0;
  }
  rt__sent *e = &c->sent[(c->sent_head + c->sent_len) % c->sent_cap];
  e->ms = rt__mono_ms();
  e->fn = fn;
  e->arg = arg;
  c->sent_len++;
  return 0;
}

static rt__sent sent_pop(rt__conn *c) {
  rt__sent e = c->sent[c->sent_head];
  c->sent_head = (c->sent_head + 1) % c->sent_cap;
  c->sent_len--;
  return e;
}

/* Format one command and queue it on the link; its reply goes to fn. */
static int send_argv(rt__conn *c, rt__conn_reply_fn fn, void *arg, int argc,
                     const char **argv, const size_t *lens) {
  char *cmd;
  int err = sent_push(c, fn, arg);
  if (err != 0)
    return err;
  int n = redisFormatCommandArgv(&cmd, argc, argv, lens);
  err = n < 0 ? RT_ENOMEM : rt__link_send(c->link, cmd, (size_t)n);
  if (n >= 0)
    redisFreeCommand(cmd);
  if (err != 0)
    c->sent_len--; /* take back the entry just pushed */
  return err;
}

/* Let go of the link (closing it) and answer every unanswered command with
 * NULL, in send order. */
static void detach(rt__conn *c) {
  rt__link *l = c->link;
  c->link = NULL;
  c->close_when_idle = 0;
  if (l != NULL)
    rt__link_close(l);
  while (c->sent_len > 0) {
    rt__sent e = sent_pop(c);
    e.fn(c, NULL, e.arg);
  }
}

/* ---- timer: connect deadline, command deadline, backoff --------------- */

static void timer_cb(uv_timer_t *t);
static void close_timer(rt__conn *c);

static void arm_command_deadline(rt__conn *c) {
  if (c->state != RT__CONN_UP && c->state != RT__CONN_CLOSING)
    return;
  if (c->sent_len == 0) {
    uv_timer_stop(&c->timer);
    return;
  }
  uint64_t due =
      c->sent[c->sent_head].ms + (uint64_t)c->cfg->command_timeout_ms;
  uint64_t now = rt__mono_ms();
  uv_timer_start(&c->timer, timer_cb, due > now ? due - now : 0, 0);
}

/* Mark the connection down and tell the owner (never re-entrantly from an
 * rt__conn_* call: callers make sure of that). */
static void report_down(rt__conn *c, int status) {
  c->sent_len = 0;
  c->sent_head = 0;
  if (c->state == RT__CONN_CLOSING) {
    close_timer(c);
    maybe_closed(c);
    return;
  }
  c->state = RT__CONN_DOWN;
  uv_timer_stop(&c->timer);
  c->ev->down(c, status);
}

/* Abort the connection ourselves. Unanswered commands get status. */
static void drop(rt__conn *c, int status) {
  c->drop_status = status;
  if (c->link == NULL)
    return;
  detach(c);
  report_down(c, status);
}

/* Forget the resolution in flight (its callback only frees it). */
static void abandon_resolve(rt__conn *c) {
  if (c->resolving == NULL)
    return;
  uv_cancel((uv_req_t *)&c->resolving->req);
  c->resolving = NULL;
}

static void timer_cb(uv_timer_t *t) {
  rt__conn *c = t->data;
  if (c->report_pending) {
    int status = c->report_pending;
    c->report_pending = 0;
    report_down(c, status);
  } else if (c->state == RT__CONN_DOWN) {
    rt__conn_connect(c);
  } else if (c->state == RT__CONN_CONNECTING) {
    long long ms = (long long)c->cfg->connect_timeout_ms;
    if (c->cfg->nsentinels > 0 && c->sentinel.found != NULL) {
      rt__sentinel_cancel(&c->sentinel);
      set_error(c,
                "Sentinels: no address of master \"%s\" within "
                "connect_timeout_ms (%lld ms)",
                c->cfg->sentinel_master, ms);
      report_down(c, RT_ECONNECT);
      return;
    }
    if (c->resolving != NULL) {
      set_error(c, "resolve %s: no answer within connect_timeout_ms (%lld ms)",
                c->host, ms);
      abandon_resolve(c);
      report_down(c, RT_ECONNECT);
      return;
    }
    static const char *const missing[] = {"no connection", "no TLS handshake",
                                          "no answer to the handshake"};
    int stage = c->link != NULL ? rt__link_stage(c->link) : 0;
    set_error(c, "connect %s: %s within connect_timeout_ms (%lld ms)%s",
              c->peer, missing[stage], ms,
              stage == RT__LINK_TLS ? " (is it a plain port? then use redis://)"
                                    : "");
    if (c->link != NULL)
      drop(c, RT_ECONNECT);
    else
      report_down(c, RT_ECONNECT);
  } else if (c->state == RT__CONN_UP || c->state == RT__CONN_CLOSING) {
    uint64_t now = rt__mono_ms();
    if (c->sent_len > 0 && now - c->sent[c->sent_head].ms >=
                               (uint64_t)c->cfg->command_timeout_ms) {
      set_error(c,
                "%s: no reply within command_timeout_ms (%lld ms): "
                "connection dropped",
                c->peer, (long long)c->cfg->command_timeout_ms);
      drop(c, RT_ETIMEDOUT);
    } else {
      arm_command_deadline(c);
    }
  }
}

/* ---- link events ------------------------------------------------------ */

static void connect_next(rt__conn *c);
static void finish_close(rt__conn *c);
static void master_switched(rt__sentinel *s, const char *host, int port);
static void failover_begun(rt__sentinel *s, const char *host, int port);

static void link_ready(rt__link *l) { RT__UNUSED(l); }

/* A subscriber's pub/sub push (a message, or the server unsubscribing
 * us), which answers no command. */
static int is_push(const rt__conn *c, const redisReply *r) {
  static const char *const kinds[] = {"smessage", "message", "sunsubscribe",
                                      "unsubscribe"};
  if (c->channel == NULL || r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
      r->element[0]->type != REDIS_REPLY_STRING)
    return 0;
  for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
    if (strcmp(r->element[0]->str, kinds[i]) == 0)
      return 1;
  return 0;
}

static void link_reply(rt__link *l, redisReply *r) {
  rt__conn *c = rt__link_data(l);
  if (is_push(c, r)) {
    /* Notices come on the shard channel (SSUBSCRIBE): SPUBLISH counts its
     * subscribers exactly. */
    int smessage = strcmp(r->element[0]->str, "smessage") == 0 &&
                   r->elements >= 3 &&
                   r->element[1]->type == REDIS_REPLY_STRING &&
                   r->element[2]->type == REDIS_REPLY_STRING;
    if (smessage && c->ev->channel_message != NULL)
      c->ev->channel_message(c, r->element[1]->str, r->element[1]->len,
                             r->element[2]->str, r->element[2]->len);
    else if (smessage)
      c->ev->message(c, r->element[2]->str, r->element[2]->len);
    else if (strcmp(r->element[0]->str, "sunsubscribe") == 0 &&
             r->elements >= 2 && r->element[1]->type == REDIS_REPLY_STRING &&
             c->ev->unsubscribed != NULL)
      c->ev->unsubscribed(c, r->element[1]->str, r->element[1]->len);
    return;
  }
  c->answered = 1;
  if (c->sent_len == 0) {
    set_error(c, "%s: a reply to no command: connection dropped", c->peer);
    drop(c, RT_EPROTO);
    return;
  }
  rt__sent e = sent_pop(c);
  e.fn(c, r, e.arg);
  if (c->close_when_idle && c->sent_len == 0)
    finish_close(c);
}

static void link_failed(rt__link *l, int status, const char *why) {
  rt__conn *c = rt__link_data(l);
  if (c->state == RT__CONN_CONNECTING && rt__link_stage(l) != RT__LINK_READY) {
    /* The next address of the host, if any, is tried within the same
     * deadline (not after a TLS failure, which names the server). */
    set_error(c, "connect %s: %s", c->peer, why);
    detach(c);
    if (status == 0 && c->next_addr < c->naddrs)
      connect_next(c);
    else
      report_down(c, status != 0 ? status : RT_ECONNECT);
    return;
  }
  /* A TLS port closes on the plain bytes of a handshake. */
  const char *hint =
      c->state == RT__CONN_CONNECTING && !c->answered && !c->cfg->tls
          ? " (is it a TLS port? then use rediss://)"
          : "";
  set_error(c, "connection to %s lost: %s%s", c->peer, why, hint);
  /* Lost before its handshake was done: the connect failed (RT_ECONNECT,
   * as the other first-connect failures), nothing that was up went down. */
  if (status == 0)
    status = c->state == RT__CONN_CONNECTING ? RT_ECONNECT : RT_EDISCONNECTED;
  detach(c);
  report_down(c, status);
}

static void link_closed(rt__link *l) {
  rt__conn *c = rt__link_data(l);
  c->links_open--;
  maybe_closed(c);
}

static const rt__link_events link_events = {link_ready, link_reply, link_failed,
                                            link_closed};

static void went_up(rt__conn *c) {
  c->state = RT__CONN_UP;
  c->attempt = 0;
  if (c->cfg->nsentinels > 0)
    rt__sentinel_watch(&c->sentinel);
  arm_command_deadline(c);
  c->ev->up(c);
}

/* The command connection is up once every handshake reply is in (the
 * subscriber once its SUBSCRIBE is answered). */
static void handshake_step(rt__conn *c) {
  if (c->channel == NULL && c->sent_len == 0 && c->state == RT__CONN_CONNECTING)
    went_up(c);
}

/* Drop the connection for an error reply to a handshake command, keeping
 * Redis's own words. */
static void handshake_refused(rt__conn *c, const char *what,
                              const redisReply *reply) {
  int err = rt__reply_error(reply->str, reply->len);
  set_error(c, "%s: %.*s", what, (int)reply->len, reply->str);
  drop(c, err == RT_EREDIS ? RT_ECONNECT : err);
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

static int handshake_send(rt__conn *c, rt__conn_reply_fn fn, int argc,
                          const char **argv, const size_t *lens);

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

/* FUNCTION LOAD's answer: the library is there (loaded now, or "already
 * exists": another client loaded it), or, refused (an ACL without
 * FUNCTION, a Redis before 7.0), the eval path unless the options force
 * Functions. */
static void function_load_reply(rt__conn *c, redisReply *r, void *arg) {
  RT__UNUSED(arg);
  if (r == NULL)
    return;
  if (r->type != REDIS_REPLY_ERROR || rt__reply_is_library_exists(r)) {
    c->script_path = RT_SCRIPT_PATH_FUNCTIONS;
    handshake_step(c);
    return;
  }
  if (c->cfg->script_path == RT_SCRIPT_PATH_FUNCTIONS) {
    handshake_refused(c, "FUNCTION LOAD", r);
    return;
  }
  if (load_scripts(c) != 0) {
    set_error(c, "connect %s: out of memory", c->peer);
    drop(c, RT_ENOMEM);
  }
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
    set_error(c,
              "script_path module: %s has redturn module version %d; this "
              "client speaks version %d",
              c->peer, c->module_version, RT__MODULE_VERSION);
  else if (r->type == REDIS_REPLY_ERROR)
    set_error(c,
              "script_path module: %s has no redturn module%s "
              "(redturn.version: %.*s)",
              c->peer, c->module == RT_MODULE_REFUSED ? " we may use" : "",
              (int)r->len, r->str);
  else
    set_error(c,
              "script_path module: %s answered redturn.version with a "
              "reply of type %d",
              c->peer, r->type);
  drop(c, c->module == RT_MODULE_REFUSED ? rt__reply_error(r->str, r->len)
                                         : RT_ESERVER);
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
    set_error(c,
              "%s, named master \"%s\" by the Sentinels, is not a master "
              "(ROLE says %s): asking the Sentinels again",
              c->peer, c->cfg->sentinel_master,
              r->type == REDIS_REPLY_ARRAY && r->elements >= 1 &&
                      r->element[0]->type == REDIS_REPLY_STRING
                  ? r->element[0]->str
                  : "something else");
    drop(c, RT_EREADONLY);
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
    set_error(c, "INFO: the reply is not a string");
    drop(c, RT_EPROTO);
    return;
  }
  const char *v = info_field(reply->str, "redis_version", &len);
  if (v == NULL || atoi(v) < 7) {
    set_error(c, "%s runs Redis %.*s: redturn needs Redis 7.0 or newer",
              c->peer, v != NULL ? (int)(len < 32 ? len : 32) : 7,
              v != NULL ? v : "unknown");
    drop(c, RT_ESERVER);
    return;
  }
  v = info_field(reply->str, "maxmemory_policy", &len);
  if (!c->cfg->allow_eviction &&
      (v == NULL || len != 10 || memcmp(v, "noeviction", 10) != 0)) {
    set_error(c,
              "%s has maxmemory-policy %.*s: Redis may evict lock keys, and "
              "an evicted holder key frees its lock early; set "
              "maxmemory-policy noeviction (or allow_eviction)",
              c->peer, v != NULL ? (int)(len < 32 ? len : 32) : 7,
              v != NULL ? v : "unknown");
    drop(c, RT_EEVICTION);
    return;
  }
  v = info_field(reply->str, "cluster_enabled", &len);
  c->cluster_enabled = v != NULL && len == 1 && *v == '1';
  const char *run_id = info_field(reply->str, "run_id", &run_len);
  if (handshake_rest(c, run_id != NULL ? run_id : "", run_len) != 0) {
    set_error(c, "connect %s: out of memory queueing the handshake", c->peer);
    drop(c, RT_ECONNECT);
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
    set_error(c, "subscribing to the client's channel: %.*s", (int)reply->len,
              reply->str);
    drop(c, rt__reply_error(reply->str, reply->len));
    return;
  }
  if (reply->type == REDIS_REPLY_ARRAY && reply->elements >= 1 &&
      reply->element[0]->type == REDIS_REPLY_STRING &&
      strcmp(reply->element[0]->str, "subscribe") == 0 &&
      c->state == RT__CONN_CONNECTING)
    went_up(c);
}

static void command_reply(rt__conn *c, redisReply *r, void *arg) {
  if (r == NULL) {
    c->ev->reply(c, NULL, c->drop_status ? c->drop_status : RT_EDISCONNECTED,
                 arg);
    return;
  }
  arm_command_deadline(c);
  c->ev->reply(c, r, 0, arg);
}

/* ---- public (internal) API ------------------------------------------ */

void rt__conn_init(rt__conn *c, uv_loop_t *loop, const rt__config *cfg,
                   const rt__conn_events *ev, void *owner, const char *name,
                   const char *channel, size_t channel_len) {
  memset(c, 0, sizeof(*c));
  c->loop = loop;
  c->cfg = cfg;
  c->ev = ev;
  c->owner = owner;
  c->channel = channel;
  c->channel_len = channel_len;
  if (channel == NULL) {
    c->scripts = rt__scripts;
    c->nscripts = RT__SCRIPT_COUNT;
  }
  snprintf(c->name, sizeof(c->name), "%s", name);
  c->host = cfg->host;
  c->port = cfg->port;
  if (cfg->nsentinels > 0) {
    rt__sentinel_init(&c->sentinel, loop, cfg, c, master_switched,
                      failover_begun);
    c->sentinel_open = 1;
  }
  c->rand = ((uint64_t)(uintptr_t)c ^ uv_hrtime() ^ 0x9e3779b97f4a7c15ull) | 1;
  uv_timer_init(loop, &c->timer);
  c->timer.data = c;
}

/* Queue one handshake command; its reply goes to fn. */
static int handshake_send(rt__conn *c, rt__conn_reply_fn fn, int argc,
                          const char **argv, const size_t *lens) {
  return send_argv(c, fn, NULL, argc, argv, lens);
}

static int handshake(rt__conn *c) {
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

/* Report status from the loop, not from inside an rt__conn_* call. */
static void fail_soon(rt__conn *c, int status) {
  c->report_pending = status;
  uv_timer_start(&c->timer, timer_cb, 0, 0);
}

/* Start connecting to the numeric address addr: 0, or an error with the
 * reason in c->error. */
static int start_connect(rt__conn *c, const char *addr) {
  int port = c->port;
  const char *v6 = strchr(addr, ':') != NULL ? "[" : "";
  if (strcmp(addr, c->host) == 0)
    snprintf(c->peer, sizeof(c->peer), "%s%s%s:%d", v6, addr, *v6 ? "]" : "",
             port);
  else
    snprintf(c->peer, sizeof(c->peer), "%.40s:%d (%s)", c->host, port, addr);
  char why[128];
  c->sent_len = 0;
  c->sent_head = 0;
  c->answered = 0;
  const char *name =
      c->cfg->tls_server_name != NULL ? c->cfg->tls_server_name : c->host;
  int err = rt__link_open(&c->link, c->loop, addr, port, c->tls, name,
                          &link_events, c, why, sizeof(why));
  if (err != 0) {
    set_error(c, "connect %s: %s", c->peer, why);
    return err;
  }
  c->links_open++;
  if (handshake(c) == 0)
    return 0;
  detach(c); /* the handshake replies' functions ignore NULL */
  set_error(c, "connect %s: out of memory", c->peer);
  return RT_ENOMEM;
}

/* Try the host's addresses in turn until one starts connecting; when
 * none does, report the last reason from the loop. */
static void connect_next(rt__conn *c) {
  while (c->next_addr < c->naddrs)
    if (start_connect(c, c->addrs[c->next_addr++]) == 0)
      return;
  fail_soon(c, RT_ECONNECT);
}

/* Keep the numeric addresses of res, IPv4 before IPv6 (as hiredis does
 * with a name), without repeats. */
static void take_addresses(rt__conn *c, const struct addrinfo *res) {
  static const int families[2] = {AF_INET, AF_INET6};
  c->naddrs = 0;
  c->next_addr = 0;
  for (int f = 0; f < 2; f++) {
    for (const struct addrinfo *ai = res; ai != NULL; ai = ai->ai_next) {
      char buf[48];
      if (ai->ai_family != families[f] || c->naddrs == RT__CONN_ADDRS)
        continue;
      if (f == 0 ? uv_ip4_name((const struct sockaddr_in *)ai->ai_addr, buf,
                               sizeof(buf))
                 : uv_ip6_name((const struct sockaddr_in6 *)ai->ai_addr, buf,
                               sizeof(buf)))
        continue;
      unsigned i = 0;
      while (i < c->naddrs && strcmp(c->addrs[i], buf) != 0)
        i++;
      if (i == c->naddrs)
        memcpy(c->addrs[c->naddrs++], buf, sizeof(buf));
    }
  }
}

static void resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res) {
  rt__resolve *r = rt__container_of(req, rt__resolve, req);
  rt__conn *c = r->conn;
  int current = c->resolving == r;
  rt__free(r);
  c->reqs_open--;
  if (!current) { /* given up on: timed out, or the conn is closing */
    uv_freeaddrinfo(res);
    maybe_closed(c);
    return;
  }
  c->resolving = NULL;
  if (status == 0)
    take_addresses(c, res);
  uv_freeaddrinfo(res);
  if (status != 0 || c->naddrs == 0) {
    set_error(c, "resolve %s: %s", c->host,
              status != 0 ? uv_strerror(status) : "no IPv4 or IPv6 address");
    report_down(c, RT_ECONNECT);
    return;
  }
  connect_next(c);
}

/* Resolve the host name on libuv's thread pool. */
static void resolve(rt__conn *c) {
  struct addrinfo hints;
  rt__resolve *r = rt__malloc(sizeof(*r));
  int err = UV_ENOMEM;
  memset(&hints, 0, sizeof(hints));
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (r != NULL) {
    r->conn = c;
    err = uv_getaddrinfo(c->loop, &r->req, resolved, c->host, NULL, &hints);
  }
  if (err != 0) {
    rt__free(r);
    set_error(c, "resolve %s: %s", c->host, uv_strerror(err));
    fail_soon(c, RT_ECONNECT);
    return;
  }
  c->resolving = r;
  c->reqs_open++;
}

/* Connect to c->host: a numeric address at once, a name once resolved. */
static void connect_host(rt__conn *c) {
  char buf[sizeof(struct in6_addr)];
  if (uv_inet_pton(AF_INET, c->host, buf) == 0 ||
      uv_inet_pton(AF_INET6, c->host, buf) == 0) {
    snprintf(c->addrs[0], sizeof(c->addrs[0]), "%s", c->host);
    c->naddrs = 1;
    connect_next(c);
  } else {
    resolve(c);
  }
}

/* The Sentinels' answer: the master's address, or why there is none. */
static void master_found(rt__sentinel *s, int status, const char *host,
                         int port) {
  rt__conn *c = s->owner;
  if (c->state != RT__CONN_CONNECTING)
    return;
  if (status != 0) {
    set_error(c, "%s", s->error);
    report_down(c, status);
    return;
  }
  snprintf(c->master_host, sizeof(c->master_host), "%s", host);
  c->host = c->master_host;
  c->port = port;
  c->epoch = s->epoch;
  snprintf(c->peer, sizeof(c->peer), "%.60s:%d", c->host, c->port);
  connect_host(c);
}

/* A Sentinel says our master moved: reconnect there (unless we are on it
 * already; an attempt in progress starts over). */
static void master_switched(rt__sentinel *s, const char *host, int port) {
  rt__conn *c = s->owner;
  if (c->report_pending)
    return; /* down is reported already */
  if (c->host == c->master_host && strcmp(c->master_host, host) == 0 &&
      c->port == port && c->state == RT__CONN_UP)
    return;
  if (c->state == RT__CONN_DOWN && c->attempt > 0) {
    rt__conn_connect(c); /* no need to wait out the backoff */
    return;
  }
  if (c->state != RT__CONN_UP && c->state != RT__CONN_CONNECTING)
    return;
  set_error(c, "master \"%s\" switched to %s:%d: reconnecting",
            c->cfg->sentinel_master, host, port);
  if (c->link != NULL) {
    drop(c, RT_EDISCONNECTED);
  } else {
    rt__sentinel_cancel(&c->sentinel);
    abandon_resolve(c);
    report_down(c, RT_EDISCONNECTED);
  }
}

/* A Sentinel began a failover of our master (host NULL: gave it up). The
 * master may be demoted, and a replica promoted, at any moment: from now
 * on nothing goes through it (a grant there could overlap the successor's
 * grants), and the reconnect waits until the Sentinels name the outcome.
 * What was sent and not answered is sent again there (a retried enqueue
 * finds its grant or its place): no grant of the old master that reaches
 * us after this moment is reported from its reply. */
static void failover_begun(rt__sentinel *s, const char *host, int port) {
  rt__conn *c = s->owner;
  if (host == NULL) { /* given up: back to the master, without backoff */
    if (c->state == RT__CONN_DOWN && c->attempt > 0 && !c->report_pending)
      rt__conn_connect(c);
    return;
  }
  if (c->host != c->master_host || c->port != port ||
      strcmp(c->master_host, host) != 0)
    return; /* not the master we use (or a late step of a past failover) */
  rt__sentinel_avoid(s, host, port, c->epoch);
  if (c->report_pending || c->link == NULL ||
      (c->state != RT__CONN_UP && c->state != RT__CONN_CONNECTING))
    return;
  set_error(c, "master \"%s\" at %s:%d is being failed over: reconnecting",
            c->cfg->sentinel_master, host, port);
  drop(c, RT_EDISCONNECTED);
}

void rt__conn_connect(rt__conn *c) {
  if (c->state != RT__CONN_DOWN)
    return;
  if (c->cfg->nsentinels == 0) { /* the owner may have moved it (seeds) */
    c->host = c->cfg->host;
    c->port = c->cfg->port;
  }
  c->drop_status = 0;
  c->sent_len = 0;
  c->sent_head = 0;
  c->state = RT__CONN_CONNECTING;
  c->naddrs = 0;
  c->next_addr = 0;
  snprintf(c->peer, sizeof(c->peer), "%.40s:%d", c->host, c->port);
  /* One deadline for the whole attempt: resolution, connect, handshake;
   * counted from now, not from the loop's cached time (rt_client_open may
   * come long after the loop last ran). */
  uv_update_time(c->loop);
  uv_timer_start(&c->timer, timer_cb, (uint64_t)c->cfg->connect_timeout_ms, 0);
  if (c->cfg->tls && c->tls == NULL) {
    char why[200];
    int err = rt__tls_ctx_new(&c->tls, c->cfg, why, sizeof(why));
    if (err != 0) {
      set_error(c, "connect %s: %s", c->peer, why);
      fail_soon(c, err);
      return;
    }
  }
  if (c->cfg->nsentinels > 0) {
    rt__sentinel_set_tls(&c->sentinel, c->tls);
    snprintf(c->peer, sizeof(c->peer), "master \"%.40s\"",
             c->cfg->sentinel_master);
    rt__sentinel_ask(&c->sentinel, master_found);
    return;
  }
  connect_host(c);
}

void rt__conn_retry_later(rt__conn *c) {
  if (c->state != RT__CONN_DOWN)
    return;
  unsigned shift = c->attempt < 6 ? c->attempt : 6;
  uint64_t delay = (uint64_t)RT__BACKOFF_MIN_MS << shift;
  if (delay > RT__BACKOFF_MAX_MS)
    delay = RT__BACKOFF_MAX_MS;
  delay += rt__xorshift(&c->rand) % (delay / 4 + 1);
  c->attempt++;
  uv_timer_start(&c->timer, timer_cb, delay, 0);
}

int rt__conn_command(rt__conn *c, int argc, const char **argv,
                     const size_t *argvlen, void *arg) {
  if (c->state != RT__CONN_UP || c->link == NULL)
    return RT_EDISCONNECTED;
  int err = send_argv(c, command_reply, arg, argc, argv, argvlen);
  if (err != 0)
    return err;
  if (c->sent_len == 1)
    arm_command_deadline(c);
  return 0;
}

static void timer_closed(uv_handle_t *h) {
  rt__conn *c = h->data;
  c->timer_closed = 1;
  rt__free(c->sent);
  c->sent = NULL;
  maybe_closed(c);
}

static void close_timer(rt__conn *c) {
  if (!uv_is_closing((uv_handle_t *)&c->timer))
    uv_close((uv_handle_t *)&c->timer, timer_closed);
}

/* The last reply of a close that waited for them is in: disconnect. */
static void finish_close(rt__conn *c) {
  detach(c);
  report_down(c, RT_EDISCONNECTED);
}

static void sentinel_closed(rt__sentinel *s) {
  rt__conn *c = s->owner;
  c->sentinel_open = 0;
  maybe_closed(c);
}

void rt__conn_drop_soon(rt__conn *c, int status, const char *why) {
  if (c->link == NULL || c->state != RT__CONN_UP || c->report_pending)
    return;
  set_error(c, "%s: %s", c->peer, why);
  c->drop_status = status;
  detach(c);
  c->state = RT__CONN_CONNECTING; /* nothing more is sent on it */
  fail_soon(c, status);
}

void rt__conn_close(rt__conn *c) {
  if (c->state == RT__CONN_CLOSING || c->state == RT__CONN_CLOSED)
    return;
  int was = c->state;
  c->state = RT__CONN_CLOSING;
  c->report_pending = 0;
  abandon_resolve(c);
  if (c->sentinel_open)
    rt__sentinel_close(&c->sentinel, sentinel_closed);
  if (c->link != NULL && was == RT__CONN_UP && c->channel == NULL &&
      c->sent_len > 0) {
    /* Let the answers to what we sent arrive (bounded by the command
     * deadline, which drops the connection), then disconnect. */
    arm_command_deadline(c);
    c->close_when_idle = 1;
    return;
  }
  close_timer(c);
  if (c->link != NULL) {
    c->drop_status = RT_ECANCELED;
    detach(c);
  }
  maybe_closed(c);
}
