/* The throwaway topologies of tools/rttopo.h, each proven by what it is
 * for: replicas replicate, Sentinels fail over and agree on the new
 * master, a cluster replica takes over a killed master's slots, and a slot
 * in migration answers -ASK, then -MOVED once it moved. The parsers of
 * src/topology.h read the real replies, and the key slots and per-slot
 * tags of src/slot.c agree with the server. Every test starts
 * private servers of its own and stops them by pid. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "rt_test.h"
#include "rtt_cluster.h"
#include "rttopo.h"
#include "topology.h"

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

/* A cluster whose node timeout is 1 s when a test kills a master (FAILOVER
 * below); else 15 s, so that nodes a loaded machine leaves unscheduled for
 * a second are not failed, which turns the cluster down (CLUSTERDOWN
 * where a test asks for ASK or MOVED). */
enum { FAILOVER = 1000, STEADY = 15000 };
static void start_cluster(int masters, int replicas_each, int node_timeout) {
  char err[1024];
  int rc = rts_cluster_start(&cluster, masters, replicas_each, node_timeout,
                             err, sizeof(err));
  cr_assert_eq(rc, 0, "%s", err);
}

static int node_port(int i) { return cluster.node[i].server.port; }

static int keyslot(const char *key) {
  return (int)rtt_int(rtt_redis_at(node_port(0)), "CLUSTER KEYSLOT %s", key);
}

/* SIGKILL, as a crash, and reap. */
Test(topology, replicas_replicate_a_write_of_the_primary) {
  char err[1024];
  cr_assert_eq(rts_replicated_start(&group, 2, err, sizeof(err)), 0, "%s", err);
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

/* A primary with 2 replicas watched by 3 Sentinels; the primary's port. */
static int start_watched_primary(void) {
  char err[1024];
  cr_assert_eq(rts_replicated_start(&group, 2, err, sizeof(err)), 0, "%s", err);
  cr_assert_eq(rts_sentinels_start(&sentinels, group.primary.port, 3, 2, NULL,
                                   err, sizeof(err)),
               0, "%s", err);
  return group.primary.port;
}

Test(topology, sentinel_failover_moves_every_sentinel_to_the_new_master) {
  int old = start_watched_primary();
  for (int i = 0; i < sentinels.n; i++)
    cr_assert_eq(rts_sentinel_master_port(&sentinels, i), old);

  redisContext *sub = rtt_redis_at(sentinels.s[1].port);
  redisReply *r = rtt_cmd(sub, "SUBSCRIBE +switch-master");
  freeReplyObject(r);
  r = rtt_cmd(rtt_redis_at(sentinels.s[2].port), "SENTINEL SENTINELS %s",
              sentinels.master_name);
  rt__node_addr *peers;
  size_t npeers;
  cr_assert_eq(rt__sentinel_peers(r, &peers, &npeers), 0);
  cr_assert_eq(npeers, 2);
  for (size_t i = 0; i < npeers; i++)
    cr_assert(peers[i].port == sentinels.s[0].port ||
              peers[i].port == sentinels.s[1].port);
  rt__node_addrs_free(peers, npeers);
  freeReplyObject(r);

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

  rt__node_addr master = {0};
  r = rtt_cmd(rtt_redis_at(sentinels.s[2].port),
              "SENTINEL GET-MASTER-ADDR-BY-NAME %s", sentinels.master_name);
  cr_assert_eq(rt__sentinel_master_addr(r, &master), 0);
  cr_assert_str_eq(master.host, "127.0.0.1");
  cr_assert_eq(master.port, now);
  free(master.host);
  freeReplyObject(r);
  r = rtt_cmd(rtt_redis_at(sentinels.s[2].port),
              "SENTINEL GET-MASTER-ADDR-BY-NAME nosuchmaster");
  cr_assert_eq(rt__sentinel_master_addr(r, &master), 1);
  freeReplyObject(r);

  /* The subscriber already has the message: read it without waiting. */
  r = NULL;
  cr_assert_eq(redisGetReply(sub, (void **)&r), REDIS_OK, "%s", sub->errstr);
  cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 3);
  rt__switch_master sw;
  cr_assert_eq(
      rt__switch_master_parse(r->element[2]->str, r->element[2]->len, &sw), 0,
      "%s", r->element[2]->str);
  cr_assert_eq(sw.name_len, strlen(sentinels.master_name));
  cr_assert_arr_eq(sw.name, sentinels.master_name, sw.name_len);
  cr_assert_eq(sw.port, now);
  freeReplyObject(r);
}

Test(topology, killing_the_primary_makes_the_sentinels_promote_a_replica) {
  int old = start_watched_primary();

  uint64_t t0 = rtt_now_ms();
  rtt_crash(&group.primary);
  int now = -1;
  while ((now = agreed_new_master(old)) < 0 && rtt_now_ms() - t0 < 30000)
    rtt_sleep_ms(50);
  cr_assert_gt(now, 0, "the sentinels did not agree on a new master in 30 s");
  cr_assert(rts_wait_info(now, "replication", "role", "master", 10000));
  rtt_ok(rtt_redis_at(now), "SET rtt:topo after-failover");
  printf("sentinel failover after a kill (down-after 1000 ms): the new master "
         "%d takes writes %llu ms after the kill\n",
         now, (unsigned long long)(rtt_now_ms() - t0));
}

Test(topology, killing_a_cluster_master_makes_its_replica_serve_the_slot) {
  char err[1024];
  start_cluster(3, 1, FAILOVER);
  int slot = keyslot("rtt:{failover}");
  int owner = rts_cluster_slot_owner(&cluster, 0, slot);
  cr_assert(owner >= 0 && owner < cluster.nmasters, "owner %d", owner);
  int heir = rtt_cluster_replica_of(&cluster, owner);

  uint64_t t0 = rtt_now_ms();
  rtt_crash(&cluster.node[owner].server);
  while (rts_cluster_slot_owner(&cluster, heir, slot) != heir &&
         rtt_now_ms() - t0 < 30000)
    rtt_sleep_ms(20);
  cr_assert_eq(rts_cluster_slot_owner(&cluster, heir, slot), heir,
               "the replica did not take slot %d over in 30 s", slot);
  cr_assert_eq(rts_cluster_wait_ok(&cluster, 30000, err, sizeof(err)), 0, "%s",
               err);
  uint64_t ok_ms = rtt_now_ms() - t0;
  rtt_ok(rtt_redis_at(node_port(heir)), "SET rtt:{failover} served");
  /* CLUSTER SHARDS maps the slot to the heir or (Redis 7.2 to 7.4.1, while
   * the failed master is listed first in its shard) to nobody, with the
   * heir an online master of no slots: then CLUSTER SLOTS, which the
   * client asks for such holes, gives the slot to the heir. */
  rt__slot_map m;
  redisReply *r = rtt_cmd(rtt_redis_at(node_port(heir)), "CLUSTER SHARDS");
  cr_assert_eq(rt__slot_map_from_shards(r, &m), 0);
  const rt__slot_range *g = rt__slot_map_find(&m, slot);
  if (g != NULL) {
    cr_assert_eq(g->primary.port, node_port(heir));
  } else {
    cr_assert_eq(m.nidle, 1, "slot %d unmapped, and no idle master", slot);
    cr_assert_eq(m.idle[0].port, node_port(heir));
    rt__slot_map_free(&m);
    freeReplyObject(r);
    r = rtt_cmd(rtt_redis_at(node_port(heir)), "CLUSTER SLOTS");
    cr_assert_eq(rt__slot_map_from_slots(r, &m), 0);
    g = rt__slot_map_find(&m, slot);
    cr_assert(g != NULL && g->primary.port == node_port(heir));
  }
  rt__slot_map_free(&m);
  freeReplyObject(r);
  printf("cluster failover (node timeout %lld ms): slot %d served again, "
         "cluster_state:ok on every node %llu ms after the kill\n",
         (long long)cluster.node_timeout_ms, slot, (unsigned long long)ok_ms);
}

Test(topology, a_migrating_slot_answers_ask_and_then_moved) {
  start_cluster(3, 0, STEADY);
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
  redisReply *r = rtt_cmd(a, "GET %s", key);
  rt__redirect rd;
  cr_assert_eq(r->type, REDIS_REPLY_ERROR);
  cr_assert_eq(rt__redirect_parse(r->str, r->len, &rd), 0);
  cr_assert_eq(rd.kind, RT__REDIRECT_ASK);
  cr_assert_eq(rd.slot, slot);
  cr_assert_eq(rd.port, node_port(to));
  assert_reply(r, REDIS_REPLY_ERROR, want);
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

/* Each range of a slot map is served by the node rts_cluster_slot_owner
 * names, with the master's replica listed. */
static void assert_map_matches(const rt__slot_map *m) {
  cr_assert_eq(m->n, (size_t)cluster.nmasters);
  for (size_t i = 0; i < m->n; i++) {
    const rt__slot_range *g = &m->ranges[i];
    int owner = rts_cluster_slot_owner(&cluster, 0, g->first);
    cr_assert_eq(g->primary.port, node_port(owner));
    cr_assert_str_eq(g->primary.host, "127.0.0.1");
    cr_assert_eq(g->nreplicas, 1, "range %d-%d: %zu replicas", g->first,
                 g->last, g->nreplicas);
    cr_assert_eq(g->replicas[0].port,
                 node_port(rtt_cluster_replica_of(&cluster, owner)));
  }
  cr_assert_eq(m->ranges[0].first, 0);
  cr_assert_eq(m->ranges[m->n - 1].last, RT__SLOTS - 1);
}

Test(topology, slot_maps_parsed_from_a_real_cluster_agree) {
  start_cluster(3, 1, STEADY);
  rt__slot_map m;
  redisReply *r = rtt_cmd(rtt_redis_at(node_port(1)), "CLUSTER SLOTS");
  cr_assert_eq(rt__slot_map_from_slots(r, &m), 0);
  assert_map_matches(&m);
  rt__slot_map_free(&m);
  freeReplyObject(r);
  r = rtt_cmd(rtt_redis_at(node_port(2)), "CLUSTER SHARDS");
  cr_assert_eq(rt__slot_map_from_shards(r, &m), 0);
  assert_map_matches(&m);
  rt__slot_map_free(&m);
  freeReplyObject(r);
}

Test(topology, key_slots_and_slot_tags_agree_with_cluster_keyslot) {
  start_cluster(1, 0, STEADY);
  redisContext *rc = rtt_redis_at(node_port(0));
  enum { KEYS = 4000 };
  static char keys[KEYS][24];
  static size_t lens[KEYS];
  uint64_t x = 0x9e3779b97f4a7c15u;
  const char alphabet[] = "ab{}{}:\0\xff";
  for (int i = 0; i < KEYS; i++) {
    lens[i] = (size_t)(i % 24);
    for (size_t j = 0; j < lens[i]; j++) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      keys[i][j] =
          j % 3 == 0 ? alphabet[x % (sizeof(alphabet) - 1)] : (char)(x >> 8);
    }
    redisAppendCommand(rc, "CLUSTER KEYSLOT %b", keys[i], lens[i]);
  }
  for (int i = 0; i < KEYS; i++) {
    redisReply *r = NULL;
    cr_assert_eq(redisGetReply(rc, (void **)&r), REDIS_OK);
    cr_assert_eq(r->integer, rt__key_slot(keys[i], lens[i]), "key %d", i);
    freeReplyObject(r);
  }
  char tag[RT__SLOT_TAG_LEN + 1];
  for (int slot = 0; slot < RT__SLOTS; slot++) {
    rt__slot_tag(slot, tag);
    redisAppendCommand(rc, "CLUSTER KEYSLOT rt:{%s}:0123", tag);
  }
  for (int slot = 0; slot < RT__SLOTS; slot++) {
    redisReply *r = NULL;
    cr_assert_eq(redisGetReply(rc, (void **)&r), REDIS_OK);
    cr_assert_eq(r->integer, slot);
    freeReplyObject(r);
  }
}

Test(topology, a_per_slot_channel_reaches_its_subscriber_on_the_owning_shard) {
  start_cluster(3, 0, STEADY);
  const char *resource_key = "rt:{job:42}:q";
  int slot = rt__key_slot(resource_key, strlen(resource_key));
  int owner = rts_cluster_slot_owner(&cluster, 0, slot);
  char tag[RT__SLOT_TAG_LEN + 1], channel[64];
  rt__slot_tag(slot, tag);
  snprintf(channel, sizeof(channel), "rt:{%s}:c1", tag);

  redisContext *sub = rtt_redis_at(node_port(owner));
  freeReplyObject(rtt_cmd(sub, "SSUBSCRIBE %s", channel));
  /* Every other shard refuses the channel. */
  redisContext *other = rtt_redis_at(node_port((owner + 1) % 3));
  redisReply *r = rtt_cmd(other, "SPUBLISH %s hello", channel);
  cr_assert_eq(r->type, REDIS_REPLY_ERROR);
  rt__redirect rd;
  cr_assert_eq(rt__redirect_parse(r->str, r->len, &rd), 0);
  cr_assert_eq(rd.kind, RT__REDIRECT_MOVED);
  cr_assert_eq(rd.port, node_port(owner));
  freeReplyObject(r);
  cr_assert_eq(
      rtt_int(rtt_redis_at(node_port(owner)), "SPUBLISH %s hello", channel), 1,
      "exactly the one subscriber counts");
}

Test(topology, sizes_out_of_range_are_refused_and_start_nothing) {
  char err[256];
  cr_assert_eq(
      rts_replicated_start(&group, RTS_MAX_REPLICAS + 1, err, sizeof(err)), -1);
  cr_assert_str_eq(err, "replicas: 5 is not in 0..4");
  cr_assert_eq(group.primary.pid, 0);
  cr_assert_eq(
      rts_sentinels_start(&sentinels, 6379, 0, 0, NULL, err, sizeof(err)), -1);
  cr_assert_str_eq(err, "sentinels: 0 is not in 1..5");
  cr_assert_eq(rts_cluster_start(&cluster, 0, 1, 0, err, sizeof(err)), -1);
  cr_assert_str_eq(err, "cluster: 0 masters (1..6) with 1 replicas each "
                        "(0..4)");
  cr_assert_eq(cluster.nnodes, 0);
}
