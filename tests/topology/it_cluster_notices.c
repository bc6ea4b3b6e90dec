/* Grant notices on a Redis Cluster (tools/rttopo.h: one master with a
 * replica): a replica passes its master's shard-channel messages on to its
 * own subscribers, so a subscription the client left behind there hears
 * grants the master made for nobody. The client takes notices only from
 * the node it holds the slot's subscription on. Every server is private
 * and stopped by pid. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "rt_test.h"
#include "rtt_cluster.h"
#include "rttopo.h"

static rts_cluster cluster;

static void stop_all(void) {
  rts_cluster_stop(&cluster);
  rtt_cleanup();
}

TestSuite(cluster_notices, .fini = stop_all, .timeout = 120);

/* 1 once a subscriber on replica hears what master publishes on a shard
 * channel (a new master passes them on only once it counts the replica
 * as its own, a moment after the failover). */
static int replica_hears(int replica, int master) {
  redisContext *pub = rtt_redis_at(master);
  int heard = 0;
  for (uint64_t t0 = rtt_now_ms(); !heard && rtt_now_ms() - t0 < 10000;) {
    /* A fresh subscriber each try: a read that timed out spoils one. */
    redisContext *sub = rtt_redis_at(replica);
    freeReplyObject(rtt_cmd(sub, "SSUBSCRIBE {notices}probe"));
    struct timeval tv = {0, 200000};
    redisSetTimeout(sub, tv);
    freeReplyObject(rtt_cmd(pub, "SPUBLISH {notices}probe hello"));
    void *m = NULL;
    heard = redisGetReply(sub, &m) == REDIS_OK;
    freeReplyObject(m);
    rtt_redis_close(sub);
  }
  rtt_redis_close(pub);
  return heard;
}

/* After a CLUSTER FAILOVER the client's map is stale until a MOVED: its
 * wait subscribes on the old master, now a replica (Redis lets a replica
 * take SSUBSCRIBE), the enqueue there is MOVED to the new master, and the
 * client subscribes again there, leaving the first subscription in the
 * server. Its subscriber on the new master is then killed and the holder
 * releases: the master finds the waiter's client gone (SPUBLISH reached
 * nobody) and drops it, but the replica's copy of that grant notice
 * reaches the old subscription. Taking it, the client reported a grant
 * Redis never made (and whose fence the next grant would reuse). */
Test(cluster_notices,
     a_grant_copied_by_a_replica_to_a_left_subscription_is_ignored) {
  uv_loop_t loop;
  rtt_client c, d;
  rt_options_t o;
  char url[64];
  rtt_req rc, rd;
  const char *name = "notices";
  rtt_cluster_start(&cluster, 1, 1);
  int slot = rtt_cluster_slot(name), hi = rtt_cluster_replica_of(&cluster, 0);
  int old = rtt_cluster_port(&cluster, 0),
      heir = rtt_cluster_port(&cluster, hi);
  uv_loop_init(&loop);
  rtt_cluster_options(&o, url, sizeof(url), &cluster, 0);
  rtt_open_ready(&c, &loop, &o);
  rtt_open_ready(&d, &loop, &o);
  freeReplyObject(rts_command(heir, "CLUSTER FAILOVER"));
  /* Once the old master names the heir as the slot's owner it has turned
   * replica, and the heir master. */
  uint64_t t0 = rtt_now_ms();
  while (rts_cluster_slot_owner(&cluster, 0, slot) != hi &&
         rtt_now_ms() - t0 < 30000)
    rtt_sleep_ms(20);
  cr_assert_eq(rts_cluster_slot_owner(&cluster, 0, slot), hi,
               "the failover did not finish");
  cr_assert(replica_hears(old, heir),
            "the replica never heard its new master's shard messages");
  memset(&rc, 0, sizeof(rc));
  memset(&rd, 0, sizeof(rd));
  rtt_acquire(&loop, d.c, name, 30000, &rd);
  cr_assert_eq(rtt_wait(c.c, name, 30000, 60000, &rc), 0);
  redisContext *adm = rtt_redis_at(heir);
  rtt_run_until_queued(&loop, adm, name, 2);
  cr_assert_eq(rtt_cluster_subscribers(heir, c.c, slot), 1);
  cr_assert_eq(rtt_cluster_subscribers(old, c.c, slot), 1,
               "no subscription left on the old master: the scene is not set");
  cr_assert_eq(rtt_kill_conn(adm, "sub", rt_client_id(c.c)), 1);
  cr_assert_eq(rtt_signal(&rd), 0);
  rtt_expect_grant(&loop, &rc, 20000, "the waiter whose subscriber was killed");
  cr_assert_eq(rtt_holder_field(adm, name, "f"), (long long)rc.fence,
               "the client reported fence %llu, Redis's holder record has %lld",
               (unsigned long long)rc.fence, rtt_holder_field(adm, name, "f"));
  rtt_redis_close(adm);
  cr_assert_eq(rtt_signal(&rc), 0);
  cr_assert(rtt_run_until(&loop, &rc.sig_calls, 1, 10000));
  cr_assert_eq(rc.sig_status, 0, "%s", rt_err_name(rc.sig_status));
  rtt_close_all(&loop, &c, &d, NULL);
}
