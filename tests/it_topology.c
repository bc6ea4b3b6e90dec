/* The throwaway topologies of tools/rttopo.h, each proven by what it is
 * for: replicas replicate, Sentinels fail over and agree on the new
 * master, a cluster replica takes over a killed master's slots, and a slot
 * in migration answers -ASK, then -MOVED once it moved. Every test starts
 * private servers of its own and stops them by pid. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "rt_test.h"
#include "rttopo.h"

static rts_replicated group;
static rts_sentinels sentinels;
static rts_cluster cluster;

static void stop_all(void) {
  rts_sentinels_stop(&sentinels);
  rts_replicated_stop(&group);
  rts_cluster_stop(&cluster);
  rtt_cleanup();
}

TestSuite(topology, .fini = stop_all, .timeout = 120);

/* The reply's type is type and its text is want; frees it. */
static void assert_reply(redisReply *r, int type, const char *want) {
  cr_assert_eq(r->type, type, "reply type %d (%s), want %d (%s)", r->type,
               r->type == REDIS_REPLY_ERROR ? r->str : "", type, want);
  cr_assert_str_eq(r->str, want);
  freeReplyObject(r);
}

static void start_cluster(int masters, int replicas_each) {
  char err[1024];
  int rc = rts_cluster_start(&cluster, masters, replicas_each, 1000, err,
                             sizeof(err));
  cr_assert_eq(rc, 0, "%s", err);
}

static int node_port(int i) { return cluster.node[i].server.port; }

static int keyslot(const char *key) {
  return (int)rtt_int(rtt_redis_at(node_port(0)), "CLUSTER KEYSLOT %s", key);
}

/* SIGKILL, as a crash, and reap. */
static void crash(rts_server *s) {
  kill(s->pid, SIGKILL);
  waitpid(s->pid, NULL, 0);
  s->pid = 0;
}

Test(topology, replicas_replicate_a_write_of_the_primary) {
  char err[1024];
  cr_assert_eq(rts_replicated_start(&group, 2, err, sizeof(err)), 0, "%s",
               err);
  redisContext *p = rtt_redis_at(group.primary.port);
  rtt_ok(p, "SET rtt:topo written");
  cr_assert_eq(rtt_int(p, "WAIT 2 5000"), 2);
  for (int i = 0; i < group.nreplicas; i++)
    assert_reply(rtt_cmd(rtt_redis_at(group.replicas[i].port), "GET rtt:topo"),
                 REDIS_REPLY_STRING, "written");
}

/* Every Sentinel's answer to GET-MASTER-ADDR-BY-NAME, if they agree on a
 * port other than old; else -1. */
static int agreed_new_master(int old) {
  int port = rts_sentinel_master_port(&sentinels, 0);
  for (int i = 1; i < sentinels.n; i++)
    if (rts_sentinel_master_port(&sentinels, i) != port)
      return -1;
  return port == old ? -1 : port;
}

Test(topology, sentinel_failover_moves_every_sentinel_to_the_new_master) {
  char err[1024];
  cr_assert_eq(rts_replicated_start(&group, 2, err, sizeof(err)), 0, "%s",
               err);
  int old = group.primary.port;
  cr_assert_eq(rts_sentinels_start(&sentinels, old, 3, 2, NULL, err,
                                   sizeof(err)),
               0, "%s", err);
  for (int i = 0; i < sentinels.n; i++)
    cr_assert_eq(rts_sentinel_master_port(&sentinels, i), old);

  uint64_t t0 = rtt_now_ms();
  rtt_ok(rtt_redis_at(sentinels.s[0].port), "SENTINEL FAILOVER %s",
         sentinels.master_name);
  int now = -1;
  while ((now = agreed_new_master(old)) < 0 && rtt_now_ms() - t0 < 30000)
    rtt_sleep_ms(50);
  uint64_t agreed_ms = rtt_now_ms() - t0;
  cr_assert_gt(now, 0, "the sentinels did not agree on a new master in 30 s");
  cr_assert(now == group.replicas[0].port || now == group.replicas[1].port,
            "new master %d is none of the replicas", now);
  cr_assert(rts_wait_info(now, "replication", "role", "master", 10000),
            "the new master on port %d does not say role:master", now);
  printf("sentinel failover: 3 sentinels agreed on %d after %llu ms\n", now,
         (unsigned long long)agreed_ms);
}

/* The node that replicates master m. */
static int replica_of(int m) {
  for (int i = cluster.nmasters; i < cluster.nnodes; i++)
    if (cluster.node[i].master == m)
      return i;
  cr_assert_fail("master %d has no replica", m);
  return -1;
}

Test(topology, killing_a_cluster_master_makes_its_replica_serve_the_slot) {
  char err[1024];
  start_cluster(3, 1);
  int slot = keyslot("rtt:{failover}");
  int owner = rts_cluster_slot_owner(&cluster, 0, slot);
  cr_assert(owner >= 0 && owner < cluster.nmasters, "owner %d", owner);
  int heir = replica_of(owner);

  uint64_t t0 = rtt_now_ms();
  crash(&cluster.node[owner].server);
  while (rts_cluster_slot_owner(&cluster, heir, slot) != heir &&
         rtt_now_ms() - t0 < 30000)
    rtt_sleep_ms(20);
  cr_assert_eq(rts_cluster_slot_owner(&cluster, heir, slot), heir,
               "the replica did not take slot %d over in 30 s", slot);
  cr_assert_eq(rts_cluster_wait_ok(&cluster, 30000, err, sizeof(err)), 0,
               "%s", err);
  uint64_t ok_ms = rtt_now_ms() - t0;
  rtt_ok(rtt_redis_at(node_port(heir)), "SET rtt:{failover} served");
  printf("cluster failover (node timeout %lld ms): slot %d served again, "
         "cluster_state:ok on every node %llu ms after the kill\n",
         (long long)cluster.node_timeout_ms, slot,
         (unsigned long long)ok_ms);
}

Test(topology, a_migrating_slot_answers_ask_and_then_moved) {
  start_cluster(3, 0);
  const char *key = "rtt:{moving}";
  int slot = keyslot(key);
  int from = rts_cluster_slot_owner(&cluster, 0, slot);
  int to = (from + 1) % cluster.nmasters;
  redisContext *a = rtt_redis_at(node_port(from));
  redisContext *b = rtt_redis_at(node_port(to));
  char want[96];

  rtt_ok(a, "SET %s here", key);
  rtt_ok(b, "CLUSTER SETSLOT %d IMPORTING %s", slot, cluster.node[from].id);
  rtt_ok(a, "CLUSTER SETSLOT %d MIGRATING %s", slot, cluster.node[to].id);
  assert_reply(rtt_cmd(a, "GET %s", key), REDIS_REPLY_STRING, "here");
  rtt_ok(a, "MIGRATE 127.0.0.1 %d %s 0 5000", node_port(to), key);

  snprintf(want, sizeof(want), "ASK %d 127.0.0.1:%d", slot, node_port(to));
  assert_reply(rtt_cmd(a, "GET %s", key), REDIS_REPLY_ERROR, want);
  snprintf(want, sizeof(want), "MOVED %d 127.0.0.1:%d", slot, node_port(from));
  assert_reply(rtt_cmd(b, "GET %s", key), REDIS_REPLY_ERROR, want);
  rtt_ok(b, "ASKING");
  assert_reply(rtt_cmd(b, "GET %s", key), REDIS_REPLY_STRING, "here");

  for (int i = 0; i < cluster.nmasters; i++)
    rtt_ok(rtt_redis_at(node_port(i)), "CLUSTER SETSLOT %d NODE %s", slot,
           cluster.node[to].id);
  snprintf(want, sizeof(want), "MOVED %d 127.0.0.1:%d", slot, node_port(to));
  assert_reply(rtt_cmd(a, "GET %s", key), REDIS_REPLY_ERROR, want);
  assert_reply(rtt_cmd(b, "GET %s", key), REDIS_REPLY_STRING, "here");
}
