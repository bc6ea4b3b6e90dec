/* Throwaway Redis topologies: see rttopo.h. */
#define _GNU_SOURCE
#include "rttopo.h"

#include <hiredis/hiredis.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#define RTS_SETTLE_MS 20000
#define RTS_POLL_MS 50

static int64_t mono_ms(void) { return (int64_t)(uv_hrtime() / 1000000u); }

static void *command_within(int port, int64_t ms, const char *fmt, va_list ap) {
  struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000};
  redisContext *rc = redisConnectWithTimeout("127.0.0.1", port, tv);
  if (rc == NULL || rc->err) {
    if (rc != NULL)
      redisFree(rc);
    return NULL;
  }
  redisSetTimeout(rc, tv);
  void *r = redisvCommand(rc, fmt, ap);
  redisFree(rc);
  return r;
}

void *rts_command(int port, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  void *r = command_within(port, 2000, fmt, ap);
  va_end(ap);
  return r;
}

/* A command that forms a topology, which a retry could not repeat (a slot
 * assigned twice is refused): it may take seconds on a loaded machine
 * (CLUSTER commands fsync nodes.conf), so it gets RTS_SETTLE_MS. */
static void *setup_command(int port, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  void *r = command_within(port, RTS_SETTLE_MS, fmt, ap);
  va_end(ap);
  return r;
}

int rts_role_is(int port, const char *role) {
  redisReply *r = rts_command(port, "ROLE");
  int yes = r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
            r->element[0]->type == REDIS_REPLY_STRING &&
            strcmp(r->element[0]->str, role) == 0;
  if (r != NULL)
    freeReplyObject(r);
  return yes;
}

/* Does the text that command (INFO <section>, CLUSTER INFO) answers on
 * port hold the line "<field>:<value>"? */
static int text_has(int port, const char *command, const char *section,
                    const char *field, const char *value) {
  redisReply *r = rts_command(port, "%s %s", command, section);
  char line[160];
  snprintf(line, sizeof(line), "\n%s:%s\r", field, value);
  int yes = r != NULL && r->type == REDIS_REPLY_STRING &&
            (strstr(r->str, line) != NULL ||
             strncmp(r->str, line + 1, strlen(line + 1)) == 0);
  if (r != NULL)
    freeReplyObject(r);
  return yes;
}

int rts_wait_info(int port, const char *section, const char *field,
                  const char *value, int64_t max_ms) {
  int64_t until = mono_ms() + max_ms;
  for (;;) {
    if (text_has(port, "INFO", section, field, value))
      return 1;
    if (mono_ms() >= until)
      return 0;
    uv_sleep(RTS_POLL_MS);
  }
}

/* ---- a primary and its replicas ------------------------------------------- */

int rts_replicated_start(rts_replicated *g, int nreplicas, char *err,
                         size_t errcap) {
  memset(g, 0, sizeof(*g));
  if (nreplicas < 0 || nreplicas > RTS_MAX_REPLICAS) {
    snprintf(err, errcap, "replicas: %d is not in 0..%d", nreplicas,
             RTS_MAX_REPLICAS);
    return -1;
  }
  /* Replicas sync at once, not after the default 5 s wait for more. */
  const char *const primary_extra[] = {"--repl-diskless-sync-delay", "0", NULL};
  rts_options po = {.extra = primary_extra};
  if (rts_start(&g->primary, &po, err, errcap) != 0)
    return -1;
  char port[16];
  snprintf(port, sizeof(port), "%d", g->primary.port);
  const char *const extra[] = {"--replicaof", "127.0.0.1", port, NULL};
  rts_options o = {.extra = extra};
  for (int i = 0; i < nreplicas; i++) {
    if (rts_start(&g->replicas[i], &o, err, errcap) != 0)
      goto fail;
    g->nreplicas = i + 1;
  }
  int64_t until = mono_ms() + RTS_SETTLE_MS;
  for (int i = 0; i < nreplicas; i++) {
    if (!rts_wait_info(g->replicas[i].port, "replication", "master_link_status",
                       "up", until - mono_ms())) {
      snprintf(err, errcap, "replica on port %d never linked to %d",
               g->replicas[i].port, g->primary.port);
      goto fail;
    }
  }
  /* A replica says its link is up before the primary counts it online and
   * its acknowledgements in: the first WAIT then got fewer replicas than
   * linked (it_sentinel's wait_replicas tests, on a busy machine). Ready
   * once a WAIT gets them all. */
  for (long long acked = nreplicas > 0 ? -1 : 0; acked < nreplicas;) {
    int64_t left = until - mono_ms();
    if (left <= 0) {
      snprintf(err, errcap,
               "the primary on port %d never had %d replicas "
               "acknowledge a WAIT (%lld did)",
               g->primary.port, nreplicas, acked);
      goto fail;
    }
    redisReply *r = rts_command(g->primary.port, "WAIT %d %lld", nreplicas,
                                (long long)(left < 1000 ? left : 1000));
    acked = r != NULL && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    if (r != NULL)
      freeReplyObject(r);
  }
  return 0;
fail:
  rts_replicated_stop(g);
  return -1;
}

void rts_replicated_stop(rts_replicated *g) {
  for (int i = 0; i < g->nreplicas; i++)
    rts_stop(&g->replicas[i]);
  g->nreplicas = 0;
  rts_stop(&g->primary);
}

/* ---- Sentinels -------------------------------------------------------------- */

/* The integer field name of a flat field/value array reply, or -1. */
static long long field_int(const redisReply *r, const char *name) {
  if (r == NULL || r->type != REDIS_REPLY_ARRAY)
    return -1;
  for (size_t i = 0; i + 1 < r->elements; i += 2) {
    const redisReply *k = r->element[i], *v = r->element[i + 1];
    if (k->type == REDIS_REPLY_STRING && v->type == REDIS_REPLY_STRING &&
        strcmp(k->str, name) == 0)
      return strtoll(v->str, NULL, 10);
  }
  return -1;
}

/* Does Sentinel s see the master, n_others other Sentinels and at least
 * replicas replicas? */
static int sentinel_settled(const rts_server *s, const char *name, int n_others,
                            int replicas) {
  redisReply *r = rts_command(s->port, "SENTINEL MASTER %s", name);
  int yes = field_int(r, "num-other-sentinels") == n_others &&
            field_int(r, "num-slaves") >= replicas;
  if (r != NULL)
    freeReplyObject(r);
  return yes;
}

int rts_sentinels_start(rts_sentinels *t, int master_port, int n, int replicas,
                        const rts_sentinel_options *o, char *err,
                        size_t errcap) {
  rts_sentinel_options d = {0};
  memset(t, 0, sizeof(*t));
  if (o == NULL)
    o = &d;
  if (n < 1 || n > RTS_MAX_SENTINELS) {
    snprintf(err, errcap, "sentinels: %d is not in 1..%d", n,
             RTS_MAX_SENTINELS);
    return -1;
  }
  snprintf(t->master_name, sizeof(t->master_name), "%s",
           o->master_name != NULL ? o->master_name : "rtmaster");
  char conf[512];
  snprintf(
      conf, sizeof(conf),
      "sentinel monitor %s 127.0.0.1 %d %d\n"
      "sentinel down-after-milliseconds %s %lld\n"
      "sentinel failover-timeout %s %lld\n"
      "sentinel parallel-syncs %s 1\n",
      t->master_name, master_port, o->quorum > 0 ? o->quorum : n / 2 + 1,
      t->master_name,
      (long long)(o->down_after_ms > 0 ? o->down_after_ms : 1000),
      t->master_name,
      (long long)(o->failover_timeout_ms > 0 ? o->failover_timeout_ms : 5000),
      t->master_name);
  if (o->config_epoch > 0) {
    size_t used = strlen(conf);
    snprintf(conf + used, sizeof(conf) - used,
             "sentinel config-epoch %s %llu\n", t->master_name,
             (unsigned long long)o->config_epoch);
  }
  rts_options so = {
      .config = conf, .sentinel = 1, .dir_prefix = "redturn-sentinel"};
  for (int i = 0; i < n; i++) {
    if (rts_start(&t->s[i], &so, err, errcap) != 0)
      goto fail;
    t->n = i + 1;
  }
  int64_t until = mono_ms() + RTS_SETTLE_MS;
  for (int i = 0; i < n; i++) {
    while (!sentinel_settled(&t->s[i], t->master_name, n - 1, replicas)) {
      if (mono_ms() >= until) {
        snprintf(err, errcap,
                 "sentinel on port %d never saw master %d with %d other "
                 "sentinels and %d replicas",
                 t->s[i].port, master_port, n - 1, replicas);
        goto fail;
      }
      uv_sleep(RTS_POLL_MS);
    }
  }
  return 0;
fail:
  rts_sentinels_stop(t);
  return -1;
}

void rts_sentinels_stop(rts_sentinels *t) {
  for (int i = 0; i < t->n; i++)
    rts_stop(&t->s[i]);
  t->n = 0;
}

int rts_sentinel_master_port(const rts_sentinels *t, int i) {
  redisReply *r = rts_command(
      t->s[i].port, "SENTINEL GET-MASTER-ADDR-BY-NAME %s", t->master_name);
  int port = -1;
  if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
      r->element[1]->type == REDIS_REPLY_STRING)
    port = atoi(r->element[1]->str);
  if (r != NULL)
    freeReplyObject(r);
  return port;
}

/* ---- Redis Cluster ------------------------------------------------------------ */

#define RTS_SLOTS 16384

/* Start one cluster node with a bus port of its own (--cluster-port), on
 * fresh ports for each of a few tries. */
static int start_node(rts_cluster_node *n, int64_t node_timeout_ms, char *err,
                      size_t errcap) {
  char timeout[24], bus[16];
  err[0] = '\0';
  snprintf(timeout, sizeof(timeout), "%lld", (long long)node_timeout_ms);
  for (int attempt = 0; attempt < 3; attempt++) {
    int port = rts_free_port();
    n->bus_port = rts_free_port();
    if (port <= 0 || n->bus_port <= 0 || port == n->bus_port)
      continue;
    snprintf(bus, sizeof(bus), "%d", n->bus_port);
    const char *const extra[] = {
        "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
        "--cluster-node-timeout", timeout, "--cluster-port", bus,
        "--repl-diskless-sync-delay", "0",
        /* CLUSTER SLOTS lists a replica once its
                                  * offset is not 0: the master's pings make
                                  * it so without a write */
        "--repl-ping-replica-period", "1", NULL};
    rts_options o = {
        .port = port, .extra = extra, .dir_prefix = "redturn-cluster"};
    if (rts_start(&n->server, &o, err, errcap) == 0)
      break;
  }
  if (n->server.pid <= 0) {
    if (err[0] == '\0')
      snprintf(err, errcap, "no free loopback ports for a cluster node");
    return -1;
  }
  redisReply *r = rts_command(n->server.port, "CLUSTER MYID");
  int ok =
      r != NULL && r->type == REDIS_REPLY_STRING && r->len == RTS_NODE_ID_LEN;
  if (ok)
    memcpy(n->id, r->str, RTS_NODE_ID_LEN + 1);
  else
    snprintf(err, errcap, "CLUSTER MYID on port %d failed", n->server.port);
  if (r != NULL)
    freeReplyObject(r);
  return ok ? 0 : -1;
}

/* Send a command expected to answer +OK; 0, or -1 with Redis's answer in
 * err. */
static int expect_ok(int port, char *err, size_t errcap, const char *what,
                     redisReply *r) {
  int ok = r != NULL && r->type == REDIS_REPLY_STATUS;
  if (!ok)
    snprintf(err, errcap, "%s on port %d: %s", what, port,
             r == NULL                      ? "no answer"
             : r->type == REDIS_REPLY_ERROR ? r->str
                                            : "unexpected reply");
  if (r != NULL)
    freeReplyObject(r);
  return ok ? 0 : -1;
}

/* Counts from port's CLUSTER NODES: nodes known, replicas among them, and
 * whether any is still in handshake or without an address. */
static int nodes_view(int port, int *known, int *replicas) {
  redisReply *r = rts_command(port, "CLUSTER NODES");
  int settled = r != NULL && r->type == REDIS_REPLY_STRING;
  *known = *replicas = 0;
  for (const char *line = settled ? r->str : ""; *line != '\0';) {
    const char *end = strchr(line, '\n');
    size_t len = end != NULL ? (size_t)(end - line) : strlen(line);
    if (memmem(line, len, "handshake", 9) || memmem(line, len, "noaddr", 6))
      settled = 0;
    if (memmem(line, len, "slave", 5) != NULL)
      (*replicas)++;
    (*known)++;
    line += len + (end != NULL);
  }
  if (r != NULL)
    freeReplyObject(r);
  return settled;
}

/* How many replicas port's CLUSTER SLOTS lists, or -1. */
static int slots_replicas(int port) {
  redisReply *r = rts_command(port, "CLUSTER SLOTS");
  int n = r != NULL && r->type == REDIS_REPLY_ARRAY ? 0 : -1;
  for (size_t i = 0; n >= 0 && i < r->elements; i++)
    if (r->element[i]->type == REDIS_REPLY_ARRAY && r->element[i]->elements > 3)
      n += (int)r->element[i]->elements - 3;
  if (r != NULL)
    freeReplyObject(r);
  return n;
}

/* Wait until every node knows all c->nnodes nodes and, when
 * with_replicas, all of them as attached replicas that CLUSTER SLOTS
 * lists. */
static int wait_nodes(const rts_cluster *c, int with_replicas, char *err,
                      size_t errcap) {
  int want_replicas = with_replicas ? c->nnodes - c->nmasters : 0;
  int64_t until = mono_ms() + RTS_SETTLE_MS;
  for (int i = 0; i < c->nnodes; i++) {
    int known = 0, replicas = 0;
    while (!nodes_view(c->node[i].server.port, &known, &replicas) ||
           known != c->nnodes || replicas != want_replicas ||
           (with_replicas &&
            slots_replicas(c->node[i].server.port) != want_replicas)) {
      if (mono_ms() >= until) {
        snprintf(err, errcap,
                 "cluster node on port %d knows %d of %d nodes, %d of %d "
                 "replicas",
                 c->node[i].server.port, known, c->nnodes, replicas,
                 want_replicas);
        return -1;
      }
      uv_sleep(RTS_POLL_MS);
    }
  }
  return 0;
}

/* Slots and a configEpoch of its own (i + 1) to each master, everyone
 * MEETs node 0, replicas REPLICATE. Without distinct epochs the masters
 * start at 0 and settle the collision among themselves, bumping epochs
 * for a while after the cluster is ok (as redis-cli --cluster create,
 * set them first). */
static int form_cluster(rts_cluster *c, char *err, size_t errcap) {
  for (int i = 0; i < c->nmasters; i++) {
    int port = c->node[i].server.port;
    int lo = RTS_SLOTS * i / c->nmasters;
    int hi = RTS_SLOTS * (i + 1) / c->nmasters - 1;
    if (expect_ok(port, err, errcap, "CLUSTER ADDSLOTSRANGE",
                  setup_command(port, "CLUSTER ADDSLOTSRANGE %d %d", lo, hi)) ||
        expect_ok(port, err, errcap, "CLUSTER SET-CONFIG-EPOCH",
                  setup_command(port, "CLUSTER SET-CONFIG-EPOCH %d", i + 1)))
      return -1;
  }
  const rts_cluster_node *first = &c->node[0];
  for (int i = 1; i < c->nnodes; i++) {
    int port = c->node[i].server.port;
    if (expect_ok(port, err, errcap, "CLUSTER MEET",
                  setup_command(port, "CLUSTER MEET 127.0.0.1 %d %d",
                                first->server.port, first->announced_bus_port)))
      return -1;
  }
  if (wait_nodes(c, 0, err, errcap) != 0)
    return -1;
  for (int i = c->nmasters; i < c->nnodes; i++) {
    int port = c->node[i].server.port;
    if (expect_ok(port, err, errcap, "CLUSTER REPLICATE",
                  setup_command(port, "CLUSTER REPLICATE %s",
                                c->node[c->node[i].master].id)))
      return -1;
  }
  return 0;
}

int rts_cluster_start(rts_cluster *c, int nmasters, int replicas_each,
                      int64_t node_timeout_ms, char *err, size_t errcap) {
  rts_cluster_options o = {.nmasters = nmasters,
                           .replicas_each = replicas_each,
                           .node_timeout_ms = node_timeout_ms};
  return rts_cluster_start_with(c, &o, err, errcap);
}

/* Node i announces the bus port the hook chose. */
static int announce_bus(rts_cluster *c, const rts_cluster_options *o, int i,
                        char *err, size_t errcap) {
  rts_cluster_node *n = &c->node[i];
  int port =
      o->announce_bus != NULL ? o->announce_bus(o->arg, i, n->bus_port) : 0;
  n->announced_bus_port = port > 0 ? port : n->bus_port;
  if (port <= 0)
    return 0;
  return expect_ok(
      n->server.port, err, errcap, "CONFIG SET cluster-announce-bus-port",
      setup_command(n->server.port, "CONFIG SET cluster-announce-bus-port %d",
                    port));
}

int rts_cluster_start_with(rts_cluster *c, const rts_cluster_options *o,
                           char *err, size_t errcap) {
  memset(c, 0, sizeof(*c));
  int nmasters = o->nmasters, replicas_each = o->replicas_each;
  if (nmasters < 1 || nmasters > RTS_MAX_MASTERS || replicas_each < 0 ||
      replicas_each > RTS_MAX_REPLICAS) {
    snprintf(err, errcap,
             "cluster: %d masters (1..%d) with %d replicas each (0..%d)",
             nmasters, RTS_MAX_MASTERS, replicas_each, RTS_MAX_REPLICAS);
    return -1;
  }
  c->nmasters = nmasters;
  c->node_timeout_ms = o->node_timeout_ms > 0 ? o->node_timeout_ms : 1000;
  int total = nmasters * (1 + replicas_each);
  for (int i = 0; i < total; i++) {
    c->node[i].master = i < nmasters ? -1 : (i - nmasters) % nmasters;
    c->nnodes = i + 1;
    if (start_node(&c->node[i], c->node_timeout_ms, err, errcap) != 0 ||
        announce_bus(c, o, i, err, errcap) != 0)
      goto fail;
  }
  if (form_cluster(c, err, errcap) != 0 || wait_nodes(c, 1, err, errcap) != 0 ||
      rts_cluster_wait_ok(c, RTS_SETTLE_MS, err, errcap) != 0)
    goto fail;
  for (int i = nmasters; i < total; i++) {
    if (!rts_wait_info(c->node[i].server.port, "replication",
                       "master_link_status", "up", RTS_SETTLE_MS)) {
      snprintf(err, errcap, "cluster replica on port %d never linked",
               c->node[i].server.port);
      goto fail;
    }
  }
  return 0;
fail:
  rts_cluster_stop(c);
  return -1;
}

void rts_cluster_stop(rts_cluster *c) {
  for (int i = 0; i < c->nnodes; i++)
    rts_stop(&c->node[i].server);
  c->nnodes = 0;
}

int rts_cluster_wait_ok(const rts_cluster *c, int64_t max_ms, char *err,
                        size_t errcap) {
  int64_t until = mono_ms() + max_ms;
  for (int i = 0; i < c->nnodes; i++) {
    int port = c->node[i].server.port;
    if (c->node[i].server.pid <= 0)
      continue;
    while (!text_has(port, "CLUSTER", "INFO", "cluster_state", "ok") ||
           !text_has(port, "CLUSTER", "INFO", "cluster_slots_ok", "16384")) {
      if (mono_ms() >= until) {
        snprintf(err, errcap, "cluster node on port %d is not ok", port);
        return -1;
      }
      uv_sleep(RTS_POLL_MS);
    }
  }
  return 0;
}

int rts_cluster_slot_owner(const rts_cluster *c, int asker, int slot) {
  redisReply *r = rts_command(c->node[asker].server.port, "CLUSTER SLOTS");
  int port = -1;
  for (size_t i = 0;
       r != NULL && r->type == REDIS_REPLY_ARRAY && i < r->elements && port < 0;
       i++) {
    const redisReply *range = r->element[i];
    if (range->type == REDIS_REPLY_ARRAY && range->elements >= 3 &&
        range->element[0]->integer <= slot &&
        slot <= range->element[1]->integer &&
        range->element[2]->type == REDIS_REPLY_ARRAY &&
        range->element[2]->elements >= 2)
      port = (int)range->element[2]->element[1]->integer;
  }
  if (r != NULL)
    freeReplyObject(r);
  for (int i = 0; i < c->nnodes && port > 0; i++)
    if (c->node[i].server.port == port)
      return i;
  return -1;
}
