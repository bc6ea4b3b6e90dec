/* A Redis Cluster for the integration tests (tools/rttopo.h: masters with
 * replicas on loopback) and what the tests ask of it: start it or fail the
 * test, client options with one node as the seed, the slot and serving
 * master of a resource, resource names spread over the masters, and who
 * listens on a client's per-slot notice channel. Resource names and keys
 * use this test's prefix (rtt_prefix). */
#ifndef RTT_CLUSTER_H
#define RTT_CLUSTER_H

#include <redturn.h>

#include "rt_test.h"
#include "rttopo.h"

/* Start masters with replicas_each replicas each, cluster-node-timeout
 * 1000 ms; fails the test if it cannot. Stop it with rts_cluster_stop. */
void rtt_cluster_start(rts_cluster *c, int masters, int replicas_each);
/* The port of node i (masters first). */
int rtt_cluster_port(const rts_cluster *c, int i);
/* Test options (rtt_options) with the URL of node i, written to url. */
void rtt_cluster_options(rt_options_t *o, char *url, size_t cap,
                         const rts_cluster *c, int i);
/* The slot of the string name's keys. */
int rtt_cluster_slot(const char *name);
/* The master (index in c->node) that serves the string name, as node 0
 * sees it; -1 if it cannot tell. */
int rtt_cluster_owner(const rts_cluster *c, const char *name);
/* out[m] = "<stem>-<k>" with the smallest k whose slot master m serves,
 * for each of the c->nmasters masters (a name per shard). */
#define RTT_CLUSTER_NAME_MAX 32
void rtt_cluster_names(const rts_cluster *c, const char *stem,
                       char (*out)[RTT_CLUSTER_NAME_MAX]);
/* The replica (index in c->node) of master m; fails the test if it has
 * none (replicas follow the masters in node[]). */
int rtt_cluster_replica_of(const rts_cluster *c, int m);
/* Subscribers of client cl's shard channel of slot on the node at port,
 * as the scripts publish to it (PUBSUB SHARDNUMSUB). */
long long rtt_cluster_subscribers(int port, const rt_client_t *cl, int slot);

#endif /* RTT_CLUSTER_H */
