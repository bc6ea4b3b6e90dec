/* The client's life cycle: open, the two connections' events, and close,
 * as one sequence here. It sits on top of the lock state machine, the
 * script calls, the transport and the loop services, and calls each of
 * them down; nothing below calls back up but through the function pointers
 * it hands down (connection events, the calls' idle hook). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "locks.h"
#include "observe.h"

/* ---- connection events --------------------------------------------------- */

/* Every change of state goes through here: it says whether script calls
 * may be written (ready, or closing: releases go out) and what the calls
 * that cannot be written end with (closing or failed). */
static void set_state(rt_client_t *c, int state) {
  c->state = state;
  c->calls.open = state == RT__C_READY || state == RT__C_CLOSING;
  c->calls.refuse = state == RT__C_CLOSING  ? RT_ECANCELED
                    : state == RT__C_FAILED ? c->fail_status
                                            : 0;
}

/* Record a failure in words for rt_client_last_error(). */
static void client_error(rt_client_t *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void client_error(rt_client_t *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->last_error, sizeof(c->last_error), fmt, ap);
  va_end(ap);
}

/* connect_cb runs exactly once: on the first success, the first failure,
 * or with RT_ECANCELED when the client is closed before either. */
static void report_connect(rt_client_t *c, int status) {
  if (c->connect_reported)
    return;
  c->connect_reported = 1;
  if (c->connect_cb != NULL)
    c->connect_cb(c, status, c->connect_data);
}

static void became_ready(rt_client_t *c) {
  int again = c->ever_ready;
  c->master_reasks = 0;
  set_state(c, RT__C_READY);
  c->ever_ready = 1;
  rt__calls_flush(&c->calls);
  if (again) {
    c->stats.reconnects++;
    rt__lock_reconcile(c); /* grants sent while we were away */
  } else {
    report_connect(c, 0);
  }
}

static void start_cluster(rt_client_t *c);

/* How many times a first connect lets the Sentinels' disagreement send a
 * connection back to ask again (a failover settles within a few). */
#define RT__MASTER_REASKS 8

/* Through Sentinel each connection asks the Sentinels on its own, and
 * during a failover they may name two masters (a Sentinel that has not
 * heard of it yet names the old one). A queue made through the command
 * connection's master sends its notices where the subscriber must listen,
 * so the client is ready only when both are on one master: else the one
 * named at the lower config-epoch asks again, avoiding that address (at
 * equal epochs neither can be trusted: both ask again). 1 if they agree. */
static int one_master(rt_client_t *c) {
  rt__conn *cmd = &c->cmd, *sub = &c->sub;
  if (c->cfg.nsentinels == 0 ||
      (cmd->port == sub->port &&
       strcmp(cmd->master_host, sub->master_host) == 0))
    return 1;
  char why[160];
  for (int i = 0; i < 2; i++) {
    rt__conn *old = i == 0 ? cmd : sub, *new = i == 0 ? sub : cmd;
    if (old->epoch > new->epoch)
      continue;
    snprintf(why, sizeof(why),
             "the other connection's master is %.60s:%d (config-epoch %llu, "
             "this one's %llu)",
             new->master_host, new->port, (unsigned long long)new->epoch,
             (unsigned long long)old->epoch);
    if (old->epoch < new->epoch)
      rt__sentinel_avoid(&old->sentinel, old->master_host, old->port,
                         old->epoch);
    rt__conn_drop_soon(old, RT_EDISCONNECTED, why);
    c->master_reasks++;
    c->reasking |= old == cmd ? 1u : 2u;
  }
  client_error(c, "%s", why);
  return 0;
}

static void conn_up(rt__conn *conn) {
  rt_client_t *c = conn->owner;
  if (c->state == RT__C_CLOSING || c->cluster != NULL)
    return;
  if (c->cmd.state != RT__CONN_UP || c->sub.state != RT__CONN_UP)
    return;
  if (!one_master(c))
    return;
  if (c->cmd.cluster_enabled)
    start_cluster(c);
  else
    became_ready(c);
}

static void first_connect_failed(rt_client_t *c, int status);

/* conn's failed attempt was at the seed both connections use now (the
 * other one may have moved on already). */
static int tried_current_seed(const rt_client_t *c, const rt__conn *conn) {
  char port[16];
  snprintf(port, sizeof(port), ":%d", c->cfg.port);
  return strstr(conn->peer, c->cfg.host) != NULL &&
         strstr(conn->peer, port) != NULL;
}

/* Seeds "a,b,c": the next attempt goes to the next seed (a ring: the URL's
 * first host, then each seed after it), twice round at most. 1 while
 * seeds are left to try. */
static int next_seed(rt_client_t *c, const rt__conn *conn) {
  rt__config *cfg = &c->cfg;
  if (cfg->nseeds == 0 || c->seed_failures >= 2 * (cfg->nseeds + 1))
    return 0;
  if (!tried_current_seed(c, conn))
    return 1; /* the other connection moved on: follow it */
  c->seed_failures++;
  char *host = cfg->host;
  int port = cfg->port;
  cfg->host = cfg->seeds[0].host;
  cfg->port = cfg->seeds[0].port;
  memmove(cfg->seeds, cfg->seeds + 1, (cfg->nseeds - 1) * sizeof(*cfg->seeds));
  cfg->seeds[cfg->nseeds - 1].host = host;
  cfg->seeds[cfg->nseeds - 1].port = port;
  return 1;
}

static void conn_down(rt__conn *conn, int status) {
  rt_client_t *c = conn->owner;
  if (c->state == RT__C_CLOSING || c->cluster != NULL)
    return;
  client_error(c, "%s", conn->error);
  unsigned bit = conn == &c->cmd ? 1u : 2u;
  int reask = (c->reasking & bit) != 0;
  c->reasking &= ~bit;
  if (!c->ever_ready && reask && c->master_reasks <= RT__MASTER_REASKS) {
    rt__conn_retry_later(conn); /* one_master sent it to ask again */
    return;
  }
  if (!c->ever_ready && next_seed(c, conn)) {
    rt__conn_retry_later(conn);
    return;
  }
  if (!c->ever_ready && c->cfg.retry_first_connect) {
    /* Keep trying as after a lost connection; connect_cb waits. */
    rt__conn_retry_later(conn);
    return;
  }
  if (!c->ever_ready) {
    first_connect_failed(c, status);
    return;
  }
  set_state(c, RT__C_RECOVERING);
  rt__conn_retry_later(conn);
  /* The command connection reached a server that takes no writes: the
   * subscriber is on it too, where the master's notices never come. */
  if (status == RT_EREADONLY && conn == &c->cmd)
    rt__conn_drop_soon(&c->sub, RT_EREADONLY,
                       "the command connection's server takes no writes");
}

/* The first connect failed: report it and give up; the user closes. */
static void first_connect_failed(rt_client_t *c, int status) {
  if (c->state == RT__C_FAILED)
    return;
  c->fail_status = status;
  set_state(c, RT__C_FAILED);
  rt__conn_close(&c->cmd);
  rt__conn_close(&c->sub);
  if (c->cluster != NULL)
    rt__cluster_close(c->cluster);
  report_connect(c, status);
  rt__calls_fail(&c->calls, status); /* the queued waits fail with it */
  rt__observe_end_all(c, status);
}

static void conn_message(rt__conn *conn, const char *msg, size_t len) {
  rt_client_t *c = conn->owner;
  rt__notice n;
  if (rt__notice_parse(msg, len, &n) == 0)
    rt__lock_on_notice(c, &n);
}

static void finish_close(rt_client_t *c);

/* The observers' connection (observe.c) closed. */
static void observe_closed(rt_client_t *c) { finish_close(c); }

static void conn_closed(rt__conn *conn) {
  rt_client_t *c = conn->owner;
  c->conns_open--;
  finish_close(c);
}

static const rt__conn_events conn_events = {
    conn_up, conn_down, rt__calls_on_reply, conn_message, conn_closed,
    NULL,    NULL};

/* ---- cluster events ---------------------------------------------------------- */

static rt_client_t *cluster_client(rt__cluster *cl) { return cl->owner; }

static void cluster_message(rt__cluster *cl, const char *msg, size_t len) {
  rt__notice n;
  if (rt__notice_parse(msg, len, &n) == 0)
    rt__lock_on_notice(cluster_client(cl), &n);
}

static void cluster_loaded(rt__cluster *cl, int status) {
  rt_client_t *c = cluster_client(cl);
  if (c->state == RT__C_CLOSING)
    return;
  if (status == 0) {
    became_ready(c);
    return;
  }
  client_error(c, "%s", cl->error);
  if (c->cfg.retry_first_connect && status != RT_ENOMEM) {
    /* Whatever the failure, ask for the map again, as a connect would. */
    rt__cluster_refresh_in(cl, RT__CLUSTER_RETRY_MS * 20);
    return;
  }
  first_connect_failed(c, status);
}

static void cluster_routes(rt__cluster *cl) {
  rt_client_t *c = cluster_client(cl);
  if (c->state == RT__C_READY || c->state == RT__C_CLOSING)
    rt__calls_flush(&c->calls);
}

static void reconcile_later(rt__later *l) {
  rt_client_t *c = rt__container_of(l, rt_client_t, reconcile);
  if (c->state == RT__C_READY) {
    c->stats.reconnects++;
    rt__lock_reconcile(c);
  }
}

/* Waits in slots whose subscription went may have missed their notices:
 * ask Redis about every wait and held lock once the loop comes round. */
static void cluster_lost(rt__cluster *cl) {
  rt_client_t *c = cluster_client(cl);
  client_error(c, "%s", cl->error);
  if (rt__queue_empty(&c->reconcile.node))
    rt__defer(&c->lp, &c->reconcile, reconcile_later);
}

static void cluster_closed(rt__cluster *cl) {
  rt_client_t *c = cluster_client(cl);
  c->conns_open--;
  finish_close(c);
}

static const rt__cluster_hooks cluster_hooks = {
    rt__calls_on_reply, cluster_message, cluster_loaded,
    cluster_routes,     cluster_lost,    cluster_closed};

/* The seed is a cluster node: load the slot map through a node table of
 * our own; the discovery connections are not needed any more. */
static void start_cluster(rt_client_t *c) {
  rt__cluster *cl = rt__calloc(1, sizeof(*cl));
  if (cl == NULL || rt__cluster_init(cl, &c->lp, &c->cfg, &cluster_hooks, c,
                                     c->id, c->channel, c->channel_len) != 0) {
    rt__free(cl);
    client_error(c, "cluster: out of memory");
    first_connect_failed(c, RT_ENOMEM);
    return;
  }
  c->cluster = cl;
  c->calls.cluster = cl;
  c->conns_open++;
  rt__cluster_start(cl, c->cfg.host, c->cfg.port);
  rt__conn_close(&c->cmd);
  rt__conn_close(&c->sub);
}

/* ---- open ------------------------------------------------------------------ */

static void client_free(rt_client_t *c) {
  rt__lock_free_all(c);
  if (c->cluster != NULL)
    rt__cluster_free(c->cluster);
  rt__free(c->cluster);
  rt__map_free(&c->locks);
  rt__map_free(&c->resources);
  rt__free(c->channel);
  rt__config_free(&c->cfg);
  rt__free(c);
}

static void calls_idle(rt__calls *cs);

int rt_client_open(uv_loop_t *loop, const rt_options_t *opts,
                   rt_connect_cb connect_cb, void *data, rt_client_t **out) {
  if (loop == NULL || out == NULL)
    return RT_EINVAL;
  rt_client_t *c = rt__calloc(1, sizeof(*c));
  if (c == NULL)
    return RT_ENOMEM;
  int err = rt__config_init(&c->cfg, opts);
  if (err != 0) {
    rt__free(c);
    return err;
  }
  c->loop = loop;
  c->connect_cb = connect_cb;
  c->connect_data = data;
  c->data = data;
  rt__map_init(&c->locks);
  rt__map_init(&c->resources);
  rt__queue_init(&c->pending);
  rt__queue_init(&c->held);
  rt__queue_init(&c->all);
  rt__queue_init(&c->reconcile.node);

  /* 128 bits from the kernel's random source (getrandom), the client id's
   * 32 hex digits and the seed of c->rand. It fails only on a kernel older
   * than 3.17 (no getrandom). */
  unsigned char uu[16];
  if (getentropy(uu, sizeof(uu)) != 0) {
    client_free(c);
    return RT_ENOTSUP;
  }
  for (int i = 0; i < 16; i++)
    snprintf(c->id + 2 * i, 3, "%02x", uu[i]);
  memcpy(&c->rand, uu, sizeof(c->rand));
  c->rand |= 1;

  c->chan_prefix_len = c->cfg.prefix_len + 3;
  c->channel_len = c->chan_prefix_len + RT__CLIENT_ID_LEN;
  c->channel = rt__malloc(c->channel_len + 1);
  if (c->channel == NULL) {
    client_free(c);
    return RT_ENOMEM;
  }
  snprintf(c->channel, c->channel_len + 1, "%s:c:%s", c->cfg.prefix, c->id);

  /* uv_timer_init cannot fail on a live loop; nothing to unwind. */
  char name[48];
  snprintf(name, sizeof(name), "redturn-cmd-%s", c->id);
  rt__conn_init(&c->cmd, loop, &c->cfg, &conn_events, c, name, NULL, 0);
  snprintf(name, sizeof(name), "redturn-sub-%s", c->id);
  rt__conn_init(&c->sub, loop, &c->cfg, &conn_events, c, name, c->channel,
                c->channel_len);
  c->conns_open = 2;
  c->observing_closed = observe_closed;
  rt__loop_init(&c->lp, loop);
  rt__calls_init(&c->calls, &c->lp, &c->cmd, &c->cfg, c->channel,
                 c->chan_prefix_len, c->last_error, sizeof(c->last_error),
                 calls_idle);
  rt__conn_connect(&c->cmd);
  rt__conn_connect(&c->sub);
  *out = c;
  return 0;
}

/* ---- close ------------------------------------------------------------------ */

/* Closing is this one sequence:
 *  1. rt_client_close(): the client is CLOSING (calls not written from now
 *     on end with RT_ECANCELED; releases may still be written) and
 *     close_later is deferred, so nothing runs inside the call;
 *  2. close_later: a pending connect_cb gets RT_ECANCELED, the outbox
 *     fails, waits are canceled and held locks released
 *     (rt__lock_close_all), the subscriber connection closes;
 *  3. close_step, again after each reply (the calls' idle hook): once no
 *     call is in flight, the command connection closes;
 *  4. finish_close, once both connections closed: the loop services run
 *     what is still deferred and close their timers;
 *  5. loop_closed: close_cb runs, then the memory goes. */

static void loop_closed(rt__loop *lp) {
  rt_client_t *c = rt__container_of(lp, rt_client_t, lp);
  rt_close_cb cb = c->close_cb;
  void *data = c->close_data;
  if (cb != NULL)
    cb(c, data);
  client_free(c);
}

/* Once the releases of close_later are out and no call is in flight any
 * more, the command connection can go too. */
static void close_step(rt_client_t *c) {
  if (c->state == RT__C_CLOSING && c->close_started &&
      c->calls.in_flight == 0) {
    rt__conn_close(&c->cmd);
    if (c->cluster != NULL)
      rt__cluster_close(c->cluster);
  }
}

static void calls_idle(rt__calls *cs) {
  close_step(rt__container_of(cs, rt_client_t, calls));
}

/* The last step of closing, once both connections are closed (a client
 * whose first connect failed has them closed long before the user closes
 * it). */
static void finish_close(rt_client_t *c) {
  if (c->state != RT__C_CLOSING || c->conns_open > 0)
    return;
  rt__loop_close(&c->lp, loop_closed);
}

static void close_later(rt__later *l) {
  rt_client_t *c = rt__container_of(l, rt_client_t, closing);
  c->close_started = 1;
  report_connect(c, RT_ECANCELED);
  rt__calls_fail(&c->calls, RT_ECANCELED);
  rt__lock_close_all(c); /* cancel waits, release held locks */
  rt__observe_end_all(c, RT_ECANCELED);
  rt__conn_close(&c->sub);
  close_step(c);
  finish_close(c);
}

int rt_client_close(rt_client_t *c, rt_close_cb close_cb, void *data) {
  if (c == NULL)
    return RT_EINVAL;
  if (c->state == RT__C_CLOSING)
    return RT_ECLOSED;
  set_state(c, RT__C_CLOSING);
  c->close_cb = close_cb;
  c->close_data = data;
  rt__defer_cancel(&c->reconcile);
  rt__defer(&c->lp, &c->closing, close_later);
  return 0;
}

/* ---- accessors ---------------------------------------------------------- */

const char *rt_client_last_error(const rt_client_t *c) { return c->last_error; }
const char *rt_client_id(const rt_client_t *c) { return c->id; }
void *rt_client_get_data(const rt_client_t *c) { return c->data; }
void rt_client_set_data(rt_client_t *c, void *data) { c->data = data; }
uv_loop_t *rt_client_loop(const rt_client_t *c) { return c->loop; }

size_t rt_client_locks(const rt_client_t *c, rt_lock_t **out, size_t max) {
  size_t n = 0;
  for (rt__queue *q = c->held.next; q != &c->held; q = q->next) {
    if (n < max && out != NULL)
      out[n] = rt__queue_data(q, rt_lock_t, node);
    n++;
  }
  return n;
}

void rt_client_stats_size(const rt_client_t *c, rt_stats_t *out, size_t size) {
  rt_stats_t s = c->stats;
  s.pending = 0;
  for (const rt__queue *q = c->pending.next; q != &c->pending; q = q->next)
    if (rt__queue_data(q, rt_lock_t, node)->state == RT_LOCK_QUEUED)
      s.pending++;
  s.held = rt_client_locks(c, NULL, 0);
  /* One server: what its connection's handshake chose; a cluster's nodes
   * each choose theirs: the one the latest call went by. */
  s.script_path = c->calls.cluster == NULL && c->cmd.script_path != 0
                      ? c->cmd.script_path
                      : c->calls.script_path;
  s.fcalls = c->calls.fcalls;
  s.evals = c->calls.evals;
  s.module_calls = c->calls.module_calls;
  /* The module: what the command connection found (a cluster's: the
   * node the latest call went to may differ; module_calls tells). */
  s.module = c->cmd.module;
  s.module_version = c->cmd.module_version;
  s.lua_path = c->calls.cluster == NULL && c->cmd.script_path != 0
                   ? c->cmd.script_path
                   : c->calls.lua_path;
  if (c->calls.cluster == NULL && s.module == RT_MODULE_USED)
    s.script_path = RT_SCRIPT_PATH_MODULE;
  /* The caller's struct may be older (shorter) or newer (longer) than
   * ours: fill what both know, zero the rest. */
  memcpy(out, &s, size < sizeof(s) ? size : sizeof(s));
  if (size > sizeof(s))
    memset((char *)out + sizeof(s), 0, size - sizeof(s));
}
