/* Throwaway Redis topologies on loopback, built from tools/rtserver.h's
 * servers: a primary with replicas, Sentinels watching it, and a Redis
 * Cluster of masters with replicas. Each start waits until the topology
 * is whole (replicas linked, Sentinels seeing the master, its replicas and
 * each other, every cluster node at cluster_state:ok with its replicas
 * attached), so a test begins on a settled topology. Each stop stops every
 * server by pid and removes its directory; safe twice and after a failed
 * start (which leaves nothing behind).
 *
 * Everything is synchronous (hiredis with timeouts) and never asserts:
 * 0, or -1 with a message in err. */
#ifndef RT_TOOLS_RTTOPO_H
#define RT_TOOLS_RTTOPO_H

#include <stddef.h>
#include <stdint.h>

#include "rtserver.h"

#define RTS_MAX_REPLICAS 4
#define RTS_MAX_SENTINELS 5
#define RTS_MAX_MASTERS 6
#define RTS_MAX_NODES (RTS_MAX_MASTERS * (1 + RTS_MAX_REPLICAS))
#define RTS_NAME_CAP 64
#define RTS_NODE_ID_LEN 40

/* ---- a primary and its replicas ------------------------------------------- */

typedef struct rts_replicated {
  rts_server primary;
  rts_server replicas[RTS_MAX_REPLICAS];
  int nreplicas;
} rts_replicated;

/* Start a primary and nreplicas (0..RTS_MAX_REPLICAS) servers started with
 * --replicaof it; wait until every replica reports master_link_status:up. */
int rts_replicated_start(rts_replicated *g, int nreplicas, char *err,
                         size_t errcap);
void rts_replicated_stop(rts_replicated *g);

/* ---- Sentinels -------------------------------------------------------------- */

typedef struct rts_sentinel_options {
  const char *master_name;     /* NULL: "rtmaster" */
  int quorum;                  /* 0: a majority of the Sentinels */
  int64_t down_after_ms;       /* 0: 1000 */
  int64_t failover_timeout_ms; /* 0: 5000 */
  /* The master's config-epoch to start from ("sentinel config-epoch"):
   * Sentinels of separate groups naming one master name differently, as
   * Sentinels that did and did not hear of a failover do. 0: none. */
  uint64_t config_epoch;
} rts_sentinel_options;

typedef struct rts_sentinels {
  rts_server s[RTS_MAX_SENTINELS];
  int n;
  char master_name[RTS_NAME_CAP];
} rts_sentinels;

/* Start n (1..RTS_MAX_SENTINELS) Sentinels monitoring 127.0.0.1:master_port
 * (o NULL: every default), each with "sentinel monitor <name> 127.0.0.1
 * <port> <quorum>" and the short timeouts in its config file. Waits until
 * every Sentinel sees the master, the other n-1 Sentinels and at least
 * replicas replicas. */
int rts_sentinels_start(rts_sentinels *t, int master_port, int n, int replicas,
                        const rts_sentinel_options *o, char *err,
                        size_t errcap);
void rts_sentinels_stop(rts_sentinels *t);

/* The master's port as Sentinel i reports it (SENTINEL
 * GET-MASTER-ADDR-BY-NAME), or -1. */
int rts_sentinel_master_port(const rts_sentinels *t, int i);

/* ---- Redis Cluster ------------------------------------------------------------ */

typedef struct rts_cluster_node {
  rts_server server;
  int bus_port;
  /* The bus port the others dial (its cluster-announce-bus-port, and the
   * port CLUSTER MEET names): bus_port unless announce_bus chose another. */
  int announced_bus_port;
  char id[RTS_NODE_ID_LEN + 1];
  int master; /* index of its master in node[], or -1 for a master */
} rts_cluster_node;

typedef struct rts_cluster {
  /* The masters first (0..nmasters-1), then each master's replicas. */
  rts_cluster_node node[RTS_MAX_NODES];
  int nmasters;
  int nnodes;
  int64_t node_timeout_ms;
} rts_cluster;

/* Start nmasters (1..RTS_MAX_MASTERS) cluster nodes, each given an equal
 * range of the 16384 slots (CLUSTER ADDSLOTSRANGE), and replicas_each
 * (0..RTS_MAX_REPLICAS) replicas per master (CLUSTER REPLICATE), all joined
 * with CLUSTER MEET; node_timeout_ms 0: 1000. Waits until every node
 * reports cluster_state:ok and knows every replica as attached (CLUSTER
 * SLOTS lists it). */
int rts_cluster_start(rts_cluster *c, int nmasters, int replicas_each,
                      int64_t node_timeout_ms, char *err, size_t errcap);

/* rts_cluster_start's arguments, and a hook. */
typedef struct rts_cluster_options {
  int nmasters, replicas_each;
  int64_t node_timeout_ms; /* 0: 1000 */
  /* Called with each node's index in c->node and its bus port once it
   * runs, before the cluster forms; what it returns (> 0) the node
   * announces as its bus port (CONFIG SET cluster-announce-bus-port), so
   * every other node dials that port instead (a proxy forwarding to
   * bus_port, say). NULL, or 0 returned: the node's own. */
  int (*announce_bus)(void *arg, int i, int bus_port);
  void *arg;
} rts_cluster_options;

/* rts_cluster_start with options. */
int rts_cluster_start_with(rts_cluster *c, const rts_cluster_options *o,
                           char *err, size_t errcap);
void rts_cluster_stop(rts_cluster *c);

/* Wait until every running node of c reports cluster_state:ok and they
 * agree on who serves each slot (cluster_slots_ok:16384 everywhere): 0,
 * or -1 after max_ms. */
int rts_cluster_wait_ok(const rts_cluster *c, int64_t max_ms, char *err,
                        size_t errcap);

/* The index in c->node of the node that serves slot according to node
 * asker's CLUSTER SLOTS, or -1. */
int rts_cluster_slot_owner(const rts_cluster *c, int asker, int slot);

/* ---- shared ----------------------------------------------------------------------- */

/* One command to 127.0.0.1:port on a fresh connection (2 s timeouts), in
 * hiredis's printf form; the reply (free with freeReplyObject) or NULL. */
void *rts_command(int port, const char *fmt, ...);

/* Whether the server on port answers ROLE with role ("master", "slave"). */
int rts_role_is(int port, const char *role);

/* Poll INFO <section> on port until it holds the line "<field>:<value>":
 * 1, or 0 after max_ms. */
int rts_wait_info(int port, const char *section, const char *field,
                  const char *value, int64_t max_ms);

#endif /* RT_TOOLS_RTTOPO_H */
