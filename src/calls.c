/* Script calls: the script table, writing a call (EVALSHA, or EVAL after
 * NOSCRIPT), the outbox while the connection is down, typed answers, and
 * the Redis clock learned from them. */
#include <stdio.h>
#include <string.h>

#include "calls.h"
#include "rt_scripts.h"

/* Room for the arguments after the channel prefix. */
#define ARGS_MAX 6
/* Room for the keys of any script. */
#define KEYS_MAX (RT__KEYS > RT__POOL_KEYS ? RT__KEYS : RT__POOL_KEYS)
/* Room for one decimal number of the arguments. */
#define NUM_LEN 24

/* Fills the arguments after ARGV[1] (the channel prefix); returns how many.
 * num is room for two decimal numbers of NUM_LEN bytes each. */
typedef int (*args_fn)(const rt__call *call, const rt__calls *cs,
                       const char **argv, size_t *lens, char *num);

/* One row per script: how to call it and read its answer. */
typedef struct script_call {
  int script; /* RT__SCRIPT_* (lua/<name>.lua) */
  int nkeys;  /* its KEYS: the first nkeys (<= RT__KEYS) of the
                           * call's keys */
  args_fn args;
  rt__answer_parser parse;
  int patient; /* waits in the outbox without a deadline */
} script_call;

static int arg_id(const rt__call *call, const char **argv, size_t *lens) {
  argv[0] = call->id;
  lens[0] = call->id_len;
  return 1;
}

static int arg_num(const rt__call *call, const char **argv, size_t *lens,
                   char *num) {
  argv[0] = num;
  lens[0] = (size_t)snprintf(num, NUM_LEN, "%lld", (long long)call->num);
  return 1;
}

static int arg_label(const rt__call *call, const rt__calls *cs,
                     const char **argv, size_t *lens) {
  if (call->label != NULL) {
    argv[0] = call->label;
    lens[0] = call->label_len;
    return 1;
  }
  argv[0] = cs->cfg->label != NULL ? cs->cfg->label : "";
  lens[0] = cs->cfg->label_len;
  return 1;
}

/* release, reap, evict: the request id ("" for a reap without a waiter,
 * an evict of whoever holds). */
static int args_id(const rt__call *call, const rt__calls *cs, const char **argv,
                   size_t *lens, char *num) {
  RT__UNUSED(cs);
  RT__UNUSED(num);
  return arg_id(call, argv, lens);
}

/* extend: the request id, the lease ms. */
static int args_id_lease(const rt__call *call, const rt__calls *cs,
                         const char **argv, size_t *lens, char *num) {
  RT__UNUSED(cs);
  int n = arg_id(call, argv, lens);
  return n + arg_num(call, argv + n, lens + n, num);
}

/* try: the request id, the lease ms, the label. */
static int args_try(const rt__call *call, const rt__calls *cs,
                    const char **argv, size_t *lens, char *num) {
  int n = args_id_lease(call, cs, argv, lens, num);
  return n + arg_label(call, cs, argv + n, lens + n);
}

/* enqueue: the request id, the lease ms, the retry flag, the label. */
static int args_enqueue(const rt__call *call, const rt__calls *cs,
                        const char **argv, size_t *lens, char *num) {
  int n = args_id_lease(call, cs, argv, lens, num);
  argv[n] = call->retry ? "1" : "0";
  lens[n++] = 1;
  return n + arg_label(call, cs, argv + n, lens + n);
}

/* inspect: how many waiters to list. */
static int args_max(const rt__call *call, const rt__calls *cs,
                    const char **argv, size_t *lens, char *num) {
  RT__UNUSED(cs);
  return arg_num(call, argv, lens, num);
}

/* The pool scripts take their mutex counterpart's arguments, then the
 * resource's kind... */
static int arg_kind(const rt__call *call, const char **argv, size_t *lens) {
  argv[0] = call->res_kind;
  lens[0] = strlen(call->res_kind);
  return 1;
}

/* ...and, when it asks for permits, the request's (in the second number's
 * room). */
static int arg_permits(const rt__call *call, const char **argv, size_t *lens,
                       char *num) {
  argv[0] = num + NUM_LEN;
  lens[0] = (size_t)snprintf(num + NUM_LEN, NUM_LEN, "%u", call->permits);
  return 1;
}

/* pool_release, pool_reap: as release and reap, then the kind. */
static int args_id_kind(const rt__call *call, const rt__calls *cs,
                        const char **argv, size_t *lens, char *num) {
  int n = args_id(call, cs, argv, lens, num);
  return n + arg_kind(call, argv + n, lens + n);
}

/* pool_inspect: as inspect, then the kind ("" for any). */
static int args_max_kind(const rt__call *call, const rt__calls *cs,
                         const char **argv, size_t *lens, char *num) {
  int n = args_max(call, cs, argv, lens, num);
  return n + arg_kind(call, argv + n, lens + n);
}

/* proclaim: the request id, the new value (call->label), the kind. */
static int args_proclaim(const rt__call *call, const rt__calls *cs,
                         const char **argv, size_t *lens, char *num) {
  int n = args_id(call, cs, argv, lens, num);
  n += arg_label(call, cs, argv + n, lens + n);
  return n + arg_kind(call, argv + n, lens + n);
}

/* pool_extend: as extend, then the kind. */
static int args_id_lease_kind(const rt__call *call, const rt__calls *cs,
                              const char **argv, size_t *lens, char *num) {
  int n = args_id_lease(call, cs, argv, lens, num);
  return n + arg_kind(call, argv + n, lens + n);
}

/* pool_try: as try, then the kind and the permits. */
static int args_pool_try(const rt__call *call, const rt__calls *cs,
                         const char **argv, size_t *lens, char *num) {
  int n = args_try(call, cs, argv, lens, num);
  n += arg_kind(call, argv + n, lens + n);
  return n + arg_permits(call, argv + n, lens + n, num);
}

/* pool_enqueue: as enqueue, then the kind and the permits. */
static int args_pool_enqueue(const rt__call *call, const rt__calls *cs,
                             const char **argv, size_t *lens, char *num) {
  int n = args_enqueue(call, cs, argv, lens, num);
  n += arg_kind(call, argv + n, lens + n);
  return n + arg_permits(call, argv + n, lens + n, num);
}

/* Waits have their own deadline and releases must not be dropped; any
 * other call gives up after the command timeout. */
static const script_call scripts[RT__CALL_COUNT] = {
    [RT__CALL_ENQUEUE] = {RT__SCRIPT_ENQUEUE, 3, args_enqueue,
                          rt__parse_enqueue, 1},
    [RT__CALL_TRY] = {RT__SCRIPT_TRY, 3, args_try, rt__parse_try, 0},
    [RT__CALL_RELEASE] = {RT__SCRIPT_RELEASE, 3, args_id, rt__parse_release, 1},
    [RT__CALL_EXTEND] = {RT__SCRIPT_EXTEND, 3, args_id_lease, rt__parse_extend,
                         0},
    [RT__CALL_REAP] = {RT__SCRIPT_REAP, 3, args_id, rt__parse_reap, 0},
    [RT__CALL_INSPECT] = {RT__SCRIPT_INSPECT, 3, args_max, rt__parse_inspect,
                          0},
    [RT__CALL_EVICT] = {RT__SCRIPT_EVICT, 3, args_id, rt__parse_evict, 0},
    [RT__CALL_POOL_ENQUEUE] = {RT__SCRIPT_POOL_ENQUEUE, 4, args_pool_enqueue,
                               rt__parse_enqueue, 1},
    [RT__CALL_POOL_TRY] = {RT__SCRIPT_POOL_TRY, 4, args_pool_try, rt__parse_try,
                           0},
    [RT__CALL_POOL_RELEASE] = {RT__SCRIPT_POOL_RELEASE, 4, args_id_kind,
                               rt__parse_release, 1},
    [RT__CALL_POOL_EXTEND] = {RT__SCRIPT_POOL_EXTEND, 4, args_id_lease_kind,
                              rt__parse_extend, 0},
    [RT__CALL_POOL_REAP] = {RT__SCRIPT_POOL_REAP, 4, args_id_kind,
                            rt__parse_reap, 0},
    [RT__CALL_POOL_INSPECT] = {RT__SCRIPT_POOL_INSPECT, 4, args_max_kind,
                               rt__parse_pool_inspect, 0},
    [RT__CALL_PROCLAIM] = {RT__SCRIPT_PROCLAIM, 4, args_proclaim,
                           rt__parse_proclaim, 0},
    [RT__CALL_REPLICAS] = {-1, 0, NULL, NULL, 0},
};

/* The redturn module's command of each call kind it runs: every kind's
 * but the evict's and the replicas', with the script's keys, arguments
 * and replies (module/README.md). */
static const char *const module_cmds[RT__CALL_COUNT] = {
    [RT__CALL_ENQUEUE] = "redturn.enqueue",
    [RT__CALL_TRY] = "redturn.try",
    [RT__CALL_RELEASE] = "redturn.release",
    [RT__CALL_EXTEND] = "redturn.extend",
    [RT__CALL_REAP] = "redturn.reap",
    [RT__CALL_INSPECT] = "redturn.inspect",
    [RT__CALL_POOL_ENQUEUE] = "redturn.pool_enqueue",
    [RT__CALL_POOL_TRY] = "redturn.pool_try",
    [RT__CALL_POOL_RELEASE] = "redturn.pool_release",
    [RT__CALL_POOL_EXTEND] = "redturn.pool_extend",
    [RT__CALL_POOL_REAP] = "redturn.pool_reap",
    [RT__CALL_POOL_INSPECT] = "redturn.pool_inspect",
    [RT__CALL_PROCLAIM] = "redturn.proclaim",
};

/* The script of a call: a retried enqueue has its own, which Redis runs
 * when used memory is over maxmemory (cmake/embed_lua.cmake's
 * AGAIN_SCRIPTS), so a request it has keeps its place then. */
static int script_of(const rt__call *call) {
  if (call->retry && call->kind == RT__CALL_ENQUEUE)
    return RT__SCRIPT_ENQUEUE_AGAIN;
  if (call->retry && call->kind == RT__CALL_POOL_ENQUEUE)
    return RT__SCRIPT_POOL_ENQUEUE_AGAIN;
  return scripts[call->kind].script;
}

int rt__call_is_pool(rt__call_kind kind) {
  return kind >= RT__CALL_POOL_ENQUEUE && kind < RT__CALL_COUNT;
}

rt__call_kind rt__call_pool(rt__call_kind kind) {
  switch (kind) {
  case RT__CALL_ENQUEUE:
    return RT__CALL_POOL_ENQUEUE;
  case RT__CALL_TRY:
    return RT__CALL_POOL_TRY;
  case RT__CALL_RELEASE:
    return RT__CALL_POOL_RELEASE;
  case RT__CALL_EXTEND:
    return RT__CALL_POOL_EXTEND;
  case RT__CALL_REAP:
    return RT__CALL_POOL_REAP;
  default:
    return kind;
  }
}

/* ---- the Redis clock seen from here --------------------------------------- */

/* Each sample bounds the offset from above (Redis read its clock after we
 * sent); an older bound may have drifted, so it ages by the allowed drift
 * and the smaller bound wins. */
static int64_t offset_bound(const rt__calls *cs, uint64_t at_ms) {
  uint64_t age = at_ms > cs->offset_at_ms ? at_ms - cs->offset_at_ms : 0;
  return cs->offset_ms + (int64_t)(age * RT__DRIFT_PER_MILLE / 1000) + 1;
}

static void clock_sample(rt__calls *cs, int64_t now_ms, uint64_t sent_ms) {
  if (now_ms <= 0 || sent_ms == 0)
    return;
  int64_t sample = now_ms - (int64_t)sent_ms;
  if (cs->offset_at_ms == 0 || sample < offset_bound(cs, sent_ms)) {
    cs->offset_ms = sample;
    cs->offset_at_ms = sent_ms;
  }
}

uint64_t rt__calls_clock_local(const rt__calls *cs, int64_t redis_ms) {
  uint64_t now = rt__mono_ms();
  if (cs->offset_at_ms == 0)
    return now; /* no sample yet: assume it passed already */
  int64_t local = redis_ms - offset_bound(cs, now);
  return local > 0 ? (uint64_t)local : 0;
}

/* ---- sending ------------------------------------------------------------- */

void rt__calls_init(rt__calls *cs, rt__loop *lp, rt__conn *conn,
                    const rt__config *cfg, const char *chan_prefix,
                    size_t chan_prefix_len, char *error, size_t error_cap,
                    void (*idle)(rt__calls *calls)) {
  memset(cs, 0, sizeof(*cs));
  cs->lp = lp;
  cs->conn = conn;
  cs->cfg = cfg;
  cs->chan_prefix = chan_prefix;
  cs->chan_prefix_len = chan_prefix_len;
  cs->error = error;
  cs->error_cap = error_cap;
  cs->idle = idle;
  rt__queue_init(&cs->outbox);
}

void rt__call_init(rt__call *call, rt__calls *cs, rt__call_kind kind,
                   const char *keys, uint32_t key_len, rt__call_cb cb,
                   void *data) {
  memset(call, 0, sizeof(*call));
  call->calls = cs;
  call->kind = kind;
  call->keys = keys;
  call->key_len = key_len;
  call->cb = cb;
  call->data = data;
  call->id = "";
  rt__queue_init(&call->node);
  rt__queue_init(&call->later.node);
}

/* The replicas call: a PUBLISH that replicates (so the master's
 * replication offset covers every write before it), then WAIT. */
static int replicas_write(rt__call *call, rt__conn *conn) {
  rt__calls *cs = call->calls;
  char chan[RT_PREFIX_MAX + 8], n[16], ms[24];
  const char *pub[3] = {"PUBLISH", chan, ""};
  size_t publen[3] = {7, 0, 0};
  const char *wait[3] = {"WAIT", n, ms};
  size_t waitlen[3] = {4, 0, 0};
  publen[1] = (size_t)snprintf(chan, sizeof(chan), "%.*sack",
                               (int)cs->chan_prefix_len, cs->chan_prefix);
  waitlen[1] = (size_t)snprintf(n, sizeof(n), "%d", cs->cfg->wait_replicas);
  waitlen[2] = (size_t)snprintf(ms, sizeof(ms), "%lld",
                                (long long)cs->cfg->wait_replicas_timeout_ms);
  /* The PUBLISH's answer goes nowhere (arg NULL). */
  int err = rt__conn_command(conn, 3, pub, publen, NULL);
  if (err == 0)
    err = rt__conn_command(conn, 3, wait, waitlen, call);
  return err;
}

static int call_write(rt__call *call, rt__conn *conn) {
  rt__calls *cs = call->calls;
  if (call->kind == RT__CALL_REPLICAS)
    return replicas_write(call, conn);
  char chan[RT_PREFIX_MAX + 48];
  const script_call *sc = &scripts[call->kind];
  const rt__script *s = &rt__scripts[script_of(call)];
  const char *argv[4 + KEYS_MAX + ARGS_MAX];
  size_t lens[4 + KEYS_MAX + ARGS_MAX];
  char num[2 * NUM_LEN], nkeys[8];
  int argc = 0;
  const char *native =
      conn->module == RT_MODULE_USED ? module_cmds[call->kind] : NULL;
  call->native = native != NULL;
  call->fcall = !call->native &&
                conn->script_path == RT_SCRIPT_PATH_FUNCTIONS && !call->evaled;
  if (call->native) {
    argv[argc] = native;
    lens[argc++] = strlen(native);
    cs->module_calls++;
    cs->script_path = RT_SCRIPT_PATH_MODULE;
  } else if (call->fcall) {
    /* FCALL_RO for a read-only function: it runs on a replica too. */
    argv[argc] = s->ro ? "FCALL_RO" : "FCALL";
    lens[argc++] = s->ro ? 8 : 5;
    argv[argc] = s->fn;
    lens[argc++] = strlen(s->fn);
    cs->fcalls++;
    cs->script_path = cs->lua_path = RT_SCRIPT_PATH_FUNCTIONS;
  } else {
    argv[argc] = call->evaled ? "EVAL" : "EVALSHA";
    lens[argc++] = call->evaled ? 4 : 7;
    argv[argc] = call->evaled ? s->body : s->sha;
    lens[argc++] = call->evaled ? s->len : 40;
    cs->evals++;
    cs->script_path = cs->lua_path = RT_SCRIPT_PATH_EVAL;
  }
  argv[argc] = nkeys;
  lens[argc++] = (size_t)snprintf(nkeys, sizeof(nkeys), "%d", sc->nkeys);
  for (int i = 0; i < sc->nkeys; i++) {
    argv[argc] = call->keys + (size_t)i * call->key_len;
    lens[argc++] = call->key_len;
  }
  argv[argc] = cs->chan_prefix;
  lens[argc] = cs->chan_prefix_len;
  if (cs->cluster != NULL) {
    /* Notices of a slot go to the waiters' channels of that slot. */
    argv[argc] = chan;
    lens[argc] = rt__cluster_chan_prefix(
        cs->cfg, rt__key_slot(call->keys, call->key_len), chan);
    /* The node's own configEpoch goes into its fences. */
    chan[lens[argc]++] = '\0';
    chan[lens[argc]++] = 'c';
  } else if (cs->cfg->nsentinels > 0 || cs->cfg->failover_fence_ms > 0) {
    /* The master's config-epoch, as the Sentinels named it (0 on a plain
     * server), goes into its fences (lua/lib/prelude.lua). */
    memcpy(chan, cs->chan_prefix, cs->chan_prefix_len);
    argv[argc] = chan;
    lens[argc] = cs->chan_prefix_len +
                 (size_t)snprintf(chan + cs->chan_prefix_len,
                                  sizeof(chan) - cs->chan_prefix_len, "%c%llu",
                                  '\0', (unsigned long long)conn->epoch);
  }
  if (cs->cfg->failover_fence_ms > 0)
    /* The failover hold follows the epoch (lua/lib/prelude.lua). */
    lens[argc] +=
        (size_t)snprintf(chan + lens[argc], sizeof(chan) - lens[argc], "/%lld",
                         (long long)cs->cfg->failover_fence_ms);
  argc++;
  argc += sc->args(call, cs, argv + argc, lens + argc, num);
  return rt__conn_command(conn, argc, argv, lens, call);
}

/* WAIT's answer: how many replicas acknowledged, into call->num. */
static int replicas_parse(const redisReply *r, rt__call *call) {
  if (r->type == REDIS_REPLY_ERROR)
    return rt__reply_error(r->str, r->len);
  if (r->type != REDIS_REPLY_INTEGER)
    return RT_EPROTO;
  call->num = r->integer;
  return 0;
}

static void complete(rt__call *call, const redisReply *reply, int status) {
  rt__answer a;
  memset(&a, 0, sizeof(a));
  call->replied = reply != NULL;
  if (status == 0 && call->kind == RT__CALL_REPLICAS)
    status = replicas_parse(reply, call);
  else if (status == 0)
    status = scripts[call->kind].parse(reply, &a);
  if (status == 0)
    clock_sample(call->calls, a.now_ms, call->sent_ms);
  call->cb(call, status, &a);
}

static void call_timeout(rt__timeout *t) {
  rt__call *call = rt__container_of(t, rt__call, timeout);
  rt__queue_remove(&call->node);
  complete(call, NULL, RT_ETIMEDOUT);
}

static void complete_later(rt__later *l) {
  rt__call *call = rt__container_of(l, rt__call, later);
  complete(call, NULL, call->status);
}

static void outbox_retry(rt__timeout *t) {
  rt__calls_flush(rt__container_of(t, rt__calls, outbox_retry));
}

/* An enqueue of any kind: it may leave a waiter to be notified, and it is
 * idempotent by request id. */
static int is_enqueue(rt__call_kind kind) {
  return kind == RT__CALL_ENQUEUE || kind == RT__CALL_POOL_ENQUEUE;
}

/* The connection a call goes on: the server's, or on a cluster the node
 * of its slot once it is ready for it (an enqueue needs the client's
 * channel of the slot subscribed first, or its notices would find no
 * receiver). NULL: not now. */
static rt__conn *route(const rt__call *call) {
  rt__calls *cs = call->calls;
  if (cs->cluster == NULL)
    return cs->conn;
  if (!cs->open)
    return NULL;
  return rt__cluster_connect_route(cs->cluster,
                                   rt__key_slot(call->keys, call->key_len),
                                   is_enqueue(call->kind));
}

static int write_on(rt__call *call, rt__conn *conn) {
  rt__calls *cs = call->calls;
  if (call_write(call, conn) != 0)
    return -1;
  call->in_flight = 1;
  call->written = 1;
  call->sent_ms = rt__mono_ms();
  cs->in_flight++;
  return 0;
}

void rt__call_send(rt__call *call) {
  rt__calls *cs = call->calls;
  rt__conn *conn = route(call);
  if (cs->open && conn != NULL && conn->state == RT__CONN_UP &&
      write_on(call, conn) == 0)
    return;
  if (cs->refuse != 0) {
    call->status = cs->refuse;
    rt__defer(cs->lp, &call->later, complete_later);
    return;
  }
  rt__queue_insert_tail(&cs->outbox, &call->node);
  if (conn != NULL && conn->state == RT__CONN_UP && !cs->outbox_retry.armed)
    rt__timeout_set(cs->lp, &cs->outbox_retry, outbox_retry,
                    RT__WRITE_RETRY_MS);
  if (!scripts[call->kind].patient)
    rt__timeout_set(cs->lp, &call->timeout, call_timeout,
                    cs->cfg->command_timeout_ms);
}

void rt__call_abandon(rt__call *call) {
  rt__queue_remove(&call->node);
  rt__timeout_clear(call->calls->lp, &call->timeout);
  rt__defer_cancel(&call->later);
}

static void resend_later(rt__timeout *t) {
  rt__call *call = rt__container_of(t, rt__call, timeout);
  rt__queue_remove(&call->node);
  rt__call_send(call);
}

/* A cluster's redirect or retry answer: follow it (1), within a bound of
 * about the command timeout, or leave the error to the caller (0). Until
 * the client closes or fails (refuse), a wait's enqueue retries TRYAGAIN
 * and CLUSTERDOWN without that bound, as it waits for an unreachable
 * node: the cluster being down for a while (a master's failover takes
 * seconds) is not the wait's failure, and the wait has its own timeout.
 * A release has none: a node cut off from the cluster's majority answers
 * CLUSTERDOWN for as long as the cut lasts, and the release would never
 * end. */
static int follow_redirect(rt__call *call, rt__conn *conn,
                           const redisReply *reply) {
  rt__calls *cs = call->calls;
  rt__redirect rd;
  if (cs->cluster == NULL || reply == NULL ||
      reply->type != REDIS_REPLY_ERROR ||
      rt__redirect_parse(reply->str, reply->len, &rd) != 0 ||
      rd.kind == RT__REDIRECT_NONE)
    return 0;
  int unbounded =
      is_enqueue(call->kind) && cs->refuse == 0 &&
      (rd.kind == RT__REDIRECT_TRYAGAIN || rd.kind == RT__REDIRECT_CLUSTERDOWN);
  int64_t bound = cs->cfg->command_timeout_ms / RT__CLUSTER_RETRY_MS + 16;
  if (!unbounded && call->redirects > bound)
    return 0;
  /* Past the bound, a wait retries at a quarter of the pace: a long cut
   * costs the node it asks less. */
  int64_t again = RT__CLUSTER_RETRY_MS;
  if (!unbounded)
    call->redirects++;
  else if (call->down_tries > bound)
    again = 4 * RT__CLUSTER_RETRY_MS;
  else
    call->down_tries++;
  if (rd.kind == RT__REDIRECT_MOVED) {
    rt__cluster_moved(cs->cluster, conn, &rd);
    rt__call_send(call);
    return 1;
  }
  rt__conn *target = NULL;
  if (rd.kind == RT__REDIRECT_ASK)
    target = rt__cluster_asking(cs->cluster, conn, &rd);
  if (target != NULL && write_on(call, target) == 0)
    return 1;
  /* TRYAGAIN, CLUSTERDOWN, an ASK target not connected yet. */
  if (rd.kind == RT__REDIRECT_CLUSTERDOWN)
    rt__cluster_refresh_in(cs->cluster, RT__CLUSTER_RETRY_MS);
  /* It waits in the outbox, where a close or a failure finds it (outside
   * it, nothing would ever complete it) and a flush sends it sooner. */
  rt__queue_insert_tail(&cs->outbox, &call->node);
  rt__timeout_set(cs->lp, &call->timeout, resend_later, again);
  return 1;
}

/* Through Sentinel, a server that takes no writes (READONLY, MASTERDOWN,
 * LOADING) is not where the master is now: drop the connection (the
 * reconnect asks the Sentinels) and send the call again from the outbox,
 * as the calls whose replies the drop took (they went to that same
 * server after it refused). Returns 1 when the call went back. */
static int resend_elsewhere(rt__calls *cs, rt__conn *conn, rt__call *call,
                            const redisReply *reply, int status) {
  if (cs->cfg->nsentinels == 0)
    return 0;
  if (reply != NULL) {
    if (reply->type != REDIS_REPLY_ERROR ||
        !rt__reply_not_master(reply->str, reply->len))
      return 0;
    char why[160];
    snprintf(why, sizeof(why), "%.*s", (int)reply->len, reply->str);
    rt__conn_drop_soon(conn, RT_EREADONLY, why);
  } else if (status != RT_EREADONLY) {
    return 0;
  }
  if (is_enqueue(call->kind))
    call->retry = 1; /* idempotent either way */
  rt__call_send(call);
  return 1;
}

/* FUNCTION LOAD, its answer ignored (arg NULL): "already exists" when
 * another client was first. */
static int load_library(rt__conn *conn) {
  const char *argv[3] = {"FUNCTION", "LOAD", rt__library};
  size_t lens[3] = {8, 4, rt__library_len};
  return rt__conn_command(conn, 3, argv, lens, NULL);
}

void rt__calls_on_reply(rt__conn *conn, redisReply *reply, int status,
                        void *arg) {
  rt__call *call = arg;
  if (call == NULL)
    return; /* the replicas call's PUBLISH, a FUNCTION LOAD */
  rt__calls *cs = call->calls;
  call->in_flight = 0;
  cs->in_flight--;
  if (rt__reply_is_noscript(reply) && !call->evaled) {
    call->evaled = 1;
    rt__call_send(call);
    return;
  }
  if (call->native && rt__reply_is_unknown_command(reply)) {
    /* The module is gone from this server (MODULE UNLOAD): nothing ran;
     * this connection goes on without it, this call first. */
    conn->module = RT_MODULE_ABSENT;
    rt__call_send(call);
    return;
  }
  if (call->fcall && rt__reply_is_nofunction(reply)) {
    /* The server lost the library (FUNCTION FLUSH, a restart without
     * persistence, a failover to a server that never had it): load it
     * again ahead of the call's resend, on the same connection; if the
     * resend finds no function either (the load was refused), EVAL. */
    if (call->reloaded || conn->state != RT__CONN_UP || load_library(conn) != 0)
      call->evaled = 1;
    call->reloaded = 1;
    rt__call_send(call);
    return;
  }
  if (follow_redirect(call, conn, reply))
    return;
  if (resend_elsewhere(cs, conn, call, reply, status)) {
    if (cs->in_flight == 0 && cs->idle != NULL)
      cs->idle(cs); /* a close may be waiting for the calls in flight */
    return;
  }
  if (reply != NULL && reply->type == REDIS_REPLY_ERROR)
    snprintf(cs->error, cs->error_cap, "%s%s: %.*s",
             call->kind == RT__CALL_REPLICAS
                 ? "WAIT"
                 : rt__scripts[script_of(call)].name,
             call->kind == RT__CALL_REPLICAS ? "" : " script", (int)reply->len,
             reply->str);
  complete(call, reply, status);
  if (cs->in_flight == 0 && cs->idle != NULL)
    cs->idle(cs);
}

/* Take every call out of the outbox; send or fail them. */
static void outbox_drain(rt__calls *cs, int status) {
  rt__queue q;
  rt__queue_init(&q);
  rt__queue_move(&cs->outbox, &q);
  while (!rt__queue_empty(&q)) {
    rt__call *call = rt__queue_data(q.next, rt__call, node);
    rt__queue_remove(&call->node);
    rt__timeout_clear(cs->lp, &call->timeout);
    if (status == 0)
      rt__call_send(call);
    else
      complete(call, NULL, status);
  }
}

void rt__calls_flush(rt__calls *cs) { outbox_drain(cs, 0); }

void rt__calls_fail(rt__calls *cs, int status) { outbox_drain(cs, status); }
