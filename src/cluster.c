/* A Redis Cluster seen from one client: see cluster.h. */
#include <stdio.h>
#include <string.h>

#include "cluster.h"

static rt__node *node_of(const rt__cluster *cl, const rt__conn *conn) {
  for (unsigned i = 0; i < cl->nnodes; i++)
    if (&cl->nodes[i]->cmd == conn || &cl->nodes[i]->sub == conn)
      return cl->nodes[i];
  return NULL;
}

static void node_closed(rt__conn *conn) {
  rt__node *n = conn->owner;
  rt__cluster *cl = n->cl;
  if (--cl->conns_open == 0 && cl->closing)
    cl->hooks->closed(cl);
}

/* ---- subscriptions ------------------------------------------------------- */

/* Forget every subscription held on node n (its subscriber went away) or,
 * for n NULL, those of slot only. Returns how many were in place. */
static int subs_drop(rt__cluster *cl, const rt__node *n, int slot) {
  int dropped = 0;
  int first = n != NULL ? 0 : slot, last = n != NULL ? RT__SLOTS - 1 : slot;
  for (int s = first; s <= last; s++) {
    if (cl->sub_state[s] == RT__SUB_NONE ||
        (n != NULL && cl->sub_node[s] != n->index + 1))
      continue;
    dropped += cl->sub_state[s] == RT__SUB_DONE;
    cl->sub_state[s] = RT__SUB_NONE;
    cl->sub_node[s] = 0;
  }
  return dropped;
}

size_t rt__cluster_chan_prefix(const rt__config *cfg, int slot, char *out) {
  char tag[RT__SLOT_TAG_LEN + 1];
  rt__slot_tag(slot, tag);
  memcpy(out, cfg->prefix, cfg->prefix_len);
  size_t n = cfg->prefix_len;
  out[n++] = ':';
  out[n++] = '{';
  memcpy(out + n, tag, RT__SLOT_TAG_LEN);
  n += RT__SLOT_TAG_LEN;
  out[n++] = '}';
  out[n++] = ':';
  return n;
}

static void sub_answer(rt__conn *conn, redisReply *r, int status, void *arg) {
  rt__node *n = conn->owner;
  rt__cluster *cl = n->cl;
  int slot = (int)((uint8_t *)arg - cl->sub_state);
  RT__UNUSED(status);
  if (r == NULL || cl->closing)
    return; /* the connection went: node_down dropped the slot */
  if (cl->sub_state[slot] != RT__SUB_PENDING ||
      cl->sub_node[slot] != n->index + 1)
    return;
  if (r->type == REDIS_REPLY_ERROR) {
    snprintf(cl->error, sizeof(cl->error), "SSUBSCRIBE on %s: %.*s", conn->peer,
             (int)r->len, r->str);
    subs_drop(cl, NULL, slot);
    if (rt__cluster_sub_refused(cl, conn, r) != RT__REDIRECT_MOVED)
      rt__cluster_refresh_in(cl, RT__CLUSTER_RETRY_MS);
  } else {
    cl->sub_state[slot] = RT__SUB_DONE;
  }
  cl->hooks->routes(cl);
}

static void subscribe(rt__cluster *cl, rt__node *n, int slot) {
  char chan[RT_PREFIX_MAX + 16 + RT__CLIENT_ID_LEN];
  size_t len = rt__cluster_chan_prefix(cl->cfg, slot, chan);
  memcpy(chan + len, cl->client_id, RT__CLIENT_ID_LEN);
  len += RT__CLIENT_ID_LEN;
  const char *argv[2] = {"SSUBSCRIBE", chan};
  size_t lens[2] = {10, len};
  if (rt__conn_command(&n->sub, 2, argv, lens, &cl->sub_state[slot]) == 0) {
    cl->sub_state[slot] = RT__SUB_PENDING;
    cl->sub_node[slot] = (uint16_t)(n->index + 1);
  }
}

/* ---- node connections ------------------------------------------------------ */

static void node_up(rt__conn *conn) {
  rt__node *n = conn->owner;
  if (!n->cl->closing)
    n->cl->hooks->routes(n->cl);
}

static void node_down(rt__conn *conn, int status) {
  rt__node *n = conn->owner;
  rt__cluster *cl = n->cl;
  RT__UNUSED(status);
  snprintf(cl->error, sizeof(cl->error), "%s", conn->error);
  if (cl->closing)
    return;
  if (conn == &n->sub && subs_drop(cl, n, 0) > 0)
    cl->hooks->lost(cl);
  /* A node that serves no slot any more is left alone. */
  if (n->owns > 0 || !cl->loaded)
    rt__conn_retry_later(conn);
  rt__cluster_refresh_in(cl, RT__CLUSTER_RETRY_MS);
}

static void load_map(rt__cluster *cl, rt__node *from, const redisReply *r);

static void fill_holes(rt__cluster *cl, rt__node *from, const redisReply *r);

static void cmd_answer(rt__conn *conn, redisReply *r, int status, void *arg) {
  rt__node *n = conn->owner;
  rt__cluster *cl = n->cl;
  if (arg == &cl->ignore_arg)
    return;
  if (arg == &cl->slots_arg) {
    if (r != NULL && !cl->closing)
      fill_holes(cl, n, r);
    return;
  }
  if (arg == &cl->refresh_arg) {
    cl->refreshing = 0;
    if (r != NULL && !cl->closing)
      load_map(cl, n, r);
    if (r == NULL || cl->refresh_again)
      rt__cluster_refresh_in(cl, RT__CLUSTER_RETRY_MS);
    cl->refresh_again = 0;
    return;
  }
  cl->hooks->reply(conn, r, status, arg);
}

/* A notice on a shard channel: taken only from the node the client holds
 * that slot's subscription on. Elsewhere it is a subscription the client
 * dropped (a MOVED showed its node serves the slot no longer) that the
 * server kept, and a replica passes on its master's notices: such a copy
 * may grant a waiter the master counted as gone and skipped. */
static void sub_message(rt__conn *conn, const char *chan, size_t chan_len,
                        const char *msg, size_t len) {
  rt__node *n = conn->owner;
  rt__cluster *cl = n->cl;
  int slot = rt__key_slot(chan, chan_len);
  if (cl->sub_state[slot] != RT__SUB_DONE || cl->sub_node[slot] != n->index + 1)
    return;
  cl->hooks->message(cl, msg, len);
}

/* The server dropped a shard channel of ours: its slot moved. */
static void sub_unsubscribed(rt__conn *conn, const char *chan, size_t len) {
  rt__node *n = conn->owner;
  rt__cluster *cl = n->cl;
  int slot = rt__key_slot(chan, len);
  if (cl->closing || cl->sub_node[slot] != n->index + 1)
    return;
  if (subs_drop(cl, NULL, slot) > 0)
    cl->hooks->lost(cl);
  rt__cluster_refresh_in(cl, 0);
}

static const rt__conn_events cmd_events = {
    node_up, node_down, cmd_answer, NULL, node_closed, NULL, NULL};
static const rt__conn_events sub_events = {
    node_up,     node_down,        sub_answer, NULL,
    node_closed, sub_unsubscribed, sub_message};

/* The node at host:port, made (not connected) if new; NULL when the table
 * is full or out of memory. */
static rt__node *node_get(rt__cluster *cl, const char *host, size_t host_len,
                          int port) {
  for (unsigned i = 0; i < cl->nnodes; i++) {
    rt__node *n = cl->nodes[i];
    if (n->port == port && strlen(n->host) == host_len &&
        memcmp(n->host, host, host_len) == 0)
      return n;
  }
  if (cl->nnodes == RT__CLUSTER_NODES_MAX ||
      host_len >= sizeof(cl->nodes[0]->host))
    return NULL;
  rt__node *n = rt__calloc(1, sizeof(*n));
  if (n == NULL)
    return NULL;
  n->cl = cl;
  memcpy(n->host, host, host_len);
  n->port = port;
  n->index = cl->nnodes;
  n->cfg = *cl->cfg;
  n->cfg.host = n->host;
  n->cfg.port = port;
  char name[48];
  snprintf(name, sizeof(name), "redturn-cmd-%s", cl->client_id);
  rt__conn_init(&n->cmd, cl->lp->uv, &n->cfg, &cmd_events, n, name, NULL, 0);
  snprintf(name, sizeof(name), "redturn-sub-%s", cl->client_id);
  rt__conn_init(&n->sub, cl->lp->uv, &n->cfg, &sub_events, n, name, cl->channel,
                cl->channel_len);
  cl->conns_open += 2;
  cl->nodes[cl->nnodes++] = n;
  return n;
}

static void node_start(rt__node *n) {
  if (!n->started) {
    n->started = 1;
    rt__conn_connect(&n->cmd);
  }
}

/* ---- the slot map ------------------------------------------------------------ */

static rt__node *range_node(rt__cluster *cl, rt__node *from,
                            const rt__slot_range *r) {
  const char *host = r->primary.host;
  int port = cl->cfg->tls && r->primary.tls_port > 0 ? r->primary.tls_port
                                                     : r->primary.port;
  if (host[0] == '\0')
    host = from->host;
  return port > 0 ? node_get(cl, host, strlen(host), port) : NULL;
}

static int idle_masters(const rt__cluster *cl) {
  for (unsigned i = 0; i < cl->nnodes; i++)
    if (cl->nodes[i]->idle)
      return 1;
  return 0;
}

/* A CLUSTER SLOTS reply from node from, asked for by load_map: the slots
 * the map has no server for that it gives to a master the map's CLUSTER
 * SHARDS listed online with no slots go to that master. Nothing else of
 * it is taken: during a failover it still gives the failed master's
 * slots to that master, where the map has a hole until a replica takes
 * over. */
static void fill_holes(rt__cluster *cl, rt__node *from, const redisReply *r) {
  rt__slot_map map;
  int filled = 0;
  if (r->type == REDIS_REPLY_ERROR || rt__slot_map_from_slots(r, &map) != 0)
    return;
  for (size_t i = 0; i < map.n; i++) {
    rt__node *n = range_node(cl, from, &map.ranges[i]);
    if (n == NULL || !n->idle)
      continue;
    for (int s = map.ranges[i].first; s <= map.ranges[i].last; s++)
      if (cl->owner_of[s] == 0) {
        cl->owner_of[s] = (uint16_t)(n->index + 1);
        n->owns++;
        filled++;
      }
  }
  rt__slot_map_free(&map);
  if (filled > 0)
    cl->hooks->routes(cl);
}

/* Take the map of a CLUSTER SHARDS reply from node from. */
static void load_map(rt__cluster *cl, rt__node *from, const redisReply *r) {
  rt__slot_map map;
  int err = r->type == REDIS_REPLY_ERROR ? RT_EPROTO
                                         : rt__slot_map_from_shards(r, &map);
  if (err != 0) {
    if (r->type == REDIS_REPLY_ERROR)
      snprintf(cl->error, sizeof(cl->error), "CLUSTER SHARDS on %s: %.*s",
               from->cmd.peer, (int)r->len, r->str);
    else
      snprintf(cl->error, sizeof(cl->error),
               "CLUSTER SHARDS on %s: a reply of an unknown shape",
               from->cmd.peer);
    if (!cl->loaded)
      cl->hooks->loaded(cl, err == RT_ENOMEM ? RT_ENOMEM : RT_EPROTO);
    else
      rt__cluster_refresh_in(cl, 1000);
    return;
  }
  int lost = 0;
  for (unsigned i = 0; i < cl->nnodes; i++) {
    cl->nodes[i]->owns = 0;
    cl->nodes[i]->idle = 0;
  }
  memset(cl->owner_of, 0, RT__SLOTS * sizeof(*cl->owner_of));
  for (size_t i = 0; i < map.n; i++) {
    rt__node *n = range_node(cl, from, &map.ranges[i]);
    if (n == NULL)
      continue;
    for (int s = map.ranges[i].first; s <= map.ranges[i].last; s++)
      cl->owner_of[s] = (uint16_t)(n->index + 1);
    n->owns += map.ranges[i].last - map.ranges[i].first + 1;
  }
  int holes = 0;
  for (size_t i = 0; i < map.nidle; i++) {
    const rt__slot_range idle = {0, 0, map.idle[i], NULL, 0};
    rt__node *n = range_node(cl, from, &idle);
    if (n != NULL)
      n->idle = 1;
  }
  rt__slot_map_free(&map);
  for (int s = 0; s < RT__SLOTS; s++) {
    holes += cl->owner_of[s] == 0;
    if (cl->sub_state[s] != RT__SUB_NONE && cl->sub_node[s] != cl->owner_of[s])
      lost += subs_drop(cl, NULL, s);
  }
  cl->refreshes++;
  /* Slots no shard lists while some online master lists none: Redis 7.2
   * to 7.4.1 give a shard the slots of its first node's master, and after
   * a failover that is the failed master (no slots) for as long as it is
   * listed, though its promoted replica serves them all. CLUSTER SLOTS,
   * which lists each slot's server, says which of those masters serves
   * them (fill_holes). */
  if (holes > 0 && idle_masters(cl)) {
    const char *argv[2] = {"CLUSTER", "SLOTS"};
    size_t lens[2] = {7, 5};
    (void)rt__conn_command(&from->cmd, 2, argv, lens, &cl->slots_arg);
  }
  if (!cl->loaded) {
    cl->loaded = 1;
    cl->hooks->loaded(cl, 0);
  }
  if (lost > 0)
    cl->hooks->lost(cl);
  cl->hooks->routes(cl);
}

static void refresh_now(rt__timeout *t) {
  rt__cluster *cl = rt__container_of(t, rt__cluster, refresh);
  if (cl->closing)
    return;
  if (cl->refreshing) {
    cl->refresh_again = 1; /* its answer may predate what asked for this */
    return;
  }
  /* Ask a node that is up, preferring one that serves slots. */
  rt__node *ask = NULL;
  for (unsigned i = 0; i < cl->nnodes; i++) {
    rt__node *n = cl->nodes[i];
    if (n->cmd.state == RT__CONN_UP && (ask == NULL || n->owns > ask->owns))
      ask = n;
  }
  const char *argv[2] = {"CLUSTER", "SHARDS"};
  size_t lens[2] = {7, 6};
  if (ask != NULL &&
      rt__conn_command(&ask->cmd, 2, argv, lens, &cl->refresh_arg) == 0) {
    cl->refreshing = 1;
    return;
  }
  for (unsigned i = 0; i < cl->nnodes; i++)
    node_start(cl->nodes[i]);
  rt__cluster_refresh_in(cl, 2 * RT__CLUSTER_RETRY_MS);
}

void rt__cluster_refresh_in(rt__cluster *cl, int64_t ms) {
  if (cl->closing)
    return;
  /* A refresh already scheduled stays, unless this one is due at once. */
  if (cl->refresh.armed && ms > 0)
    return;
  rt__timeout_set(cl->lp, &cl->refresh, refresh_now, ms);
}

/* ---- routes and redirects -------------------------------------------------- */

rt__node *rt__cluster_slot_node(const rt__cluster *cl, int slot) {
  unsigned i = cl->loaded ? cl->owner_of[slot] : 0;
  return i > 0 ? cl->nodes[i - 1] : NULL;
}

rt__conn *rt__cluster_connect_route(rt__cluster *cl, int slot, int need_sub) {
  rt__node *n = rt__cluster_slot_node(cl, slot);
  if (n == NULL) {
    rt__cluster_refresh_in(cl, RT__CLUSTER_RETRY_MS);
    return NULL;
  }
  unsigned i = n->index + 1;
  node_start(n);
  if (n->cmd.state != RT__CONN_UP)
    return NULL;
  if (!need_sub)
    return &n->cmd;
  if (cl->sub_state[slot] == RT__SUB_DONE && cl->sub_node[slot] == i)
    return &n->cmd;
  if (!n->sub_started) {
    n->sub_started = 1;
    rt__conn_connect(&n->sub);
  }
  if (cl->sub_state[slot] == RT__SUB_NONE && n->sub.state == RT__CONN_UP)
    subscribe(cl, n, slot);
  return NULL;
}

static rt__node *redirect_node(rt__cluster *cl, const rt__conn *conn,
                               const rt__redirect *rd) {
  const rt__node *from = node_of(cl, conn);
  const char *host = rd->host;
  size_t len = rd->host_len;
  if (len == 0 && from != NULL) {
    host = from->host;
    len = strlen(host);
  }
  return node_get(cl, host, len, rd->port);
}

void rt__cluster_moved(rt__cluster *cl, const rt__conn *conn,
                       const rt__redirect *rd) {
  rt__node *n = redirect_node(cl, conn, rd);
  if (n != NULL && cl->owner_of[rd->slot] != n->index + 1) {
    cl->owner_of[rd->slot] = (uint16_t)(n->index + 1);
    n->owns++;
    if (cl->sub_state[rd->slot] != RT__SUB_NONE &&
        subs_drop(cl, NULL, rd->slot) > 0)
      cl->hooks->lost(cl);
  }
  rt__cluster_refresh_in(cl, 0);
}

int rt__cluster_sub_refused(rt__cluster *cl, const rt__conn *conn,
                            const redisReply *r) {
  rt__redirect rd;
  if (rt__redirect_parse(r->str, r->len, &rd) != 0)
    return RT_EPROTO;
  if (rd.kind == RT__REDIRECT_MOVED)
    rt__cluster_moved(cl, conn, &rd);
  return rd.kind;
}

rt__conn *rt__cluster_asking(rt__cluster *cl, const rt__conn *conn,
                             const rt__redirect *rd) {
  rt__node *n = redirect_node(cl, conn, rd);
  if (n == NULL)
    return NULL;
  node_start(n);
  const char *argv[1] = {"ASKING"};
  size_t lens[1] = {6};
  if (n->cmd.state != RT__CONN_UP ||
      rt__conn_command(&n->cmd, 1, argv, lens, &cl->ignore_arg) != 0)
    return NULL;
  return &n->cmd;
}

/* ---- life cycle ---------------------------------------------------------------- */

int rt__cluster_init(rt__cluster *cl, rt__loop *lp, const rt__config *cfg,
                     const rt__cluster_hooks *hooks, void *owner,
                     const char *client_id, const char *channel,
                     size_t channel_len) {
  memset(cl, 0, sizeof(*cl));
  cl->lp = lp;
  cl->cfg = cfg;
  cl->hooks = hooks;
  cl->owner = owner;
  cl->client_id = client_id;
  cl->channel = channel;
  cl->channel_len = channel_len;
  cl->owner_of = rt__calloc(RT__SLOTS, sizeof(*cl->owner_of));
  cl->sub_node = rt__calloc(RT__SLOTS, sizeof(*cl->sub_node));
  cl->sub_state = rt__calloc(RT__SLOTS, sizeof(*cl->sub_state));
  if (cl->owner_of == NULL || cl->sub_node == NULL || cl->sub_state == NULL) {
    rt__cluster_free(cl);
    return RT_ENOMEM;
  }
  return 0;
}

void rt__cluster_start(rt__cluster *cl, const char *host, int port) {
  rt__node *n = node_get(cl, host, strlen(host), port);
  if (n == NULL && strlen(host) > RT__HOST_MAX) {
    snprintf(cl->error, sizeof(cl->error),
             "cluster: the host name of a seed is longer than %d bytes",
             RT__HOST_MAX);
    cl->hooks->loaded(cl, RT_EURL);
    return;
  }
  if (n == NULL) {
    snprintf(cl->error, sizeof(cl->error), "cluster: out of memory");
    cl->hooks->loaded(cl, RT_ENOMEM);
    return;
  }
  node_start(n);
  /* The other seeds are asked when no node known is up. */
  for (size_t i = 0; i < cl->cfg->nseeds; i++)
    node_get(cl, cl->cfg->seeds[i].host, strlen(cl->cfg->seeds[i].host),
             cl->cfg->seeds[i].port);
  rt__cluster_refresh_in(cl, 0);
}

void rt__cluster_close(rt__cluster *cl) {
  if (cl->closing)
    return;
  cl->closing = 1;
  rt__timeout_clear(cl->lp, &cl->refresh);
  if (cl->conns_open == 0) {
    cl->hooks->closed(cl);
    return;
  }
  for (unsigned i = 0; i < cl->nnodes; i++) {
    rt__conn_close(&cl->nodes[i]->sub);
    rt__conn_close(&cl->nodes[i]->cmd);
  }
}

void rt__cluster_free(rt__cluster *cl) {
  for (unsigned i = 0; i < cl->nnodes; i++)
    rt__free(cl->nodes[i]);
  cl->nnodes = 0;
  rt__free(cl->owner_of);
  rt__free(cl->sub_node);
  rt__free(cl->sub_state);
  cl->owner_of = cl->sub_node = NULL;
  cl->sub_state = NULL;
}
