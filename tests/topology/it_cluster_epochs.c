/* Fence epochs on a real Redis Cluster (tools/rttopo.h, 3 masters): a
 * cluster's fences carry the serving node's own configEpoch, so a master
 * that hears a higher epoch (as one cut off one way hears its successor's)
 * keeps fencing below, and an idle slot moved to a lower-epoch master and
 * bumped fences above the old owner. Every server is private and stopped
 * by pid. */
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

TestSuite(cluster_epochs, .fini = stop_all, .timeout = 180);

/* An idle resource (no key left) whose slot moves to a master with a lower
 * configEpoch than its old master's. Fences carry the owner's configEpoch;
 * a move without IMPORTING (an empty slot may) does not bump it, so the
 * operator bumps it (CLUSTER BUMPEPOCH on the new owner, as Redis itself
 * needs for that owner's claim to win a collision): then the first fence
 * there is above every fence the old master issued. */
Test(cluster_epochs,
     an_idle_slot_moved_to_a_lower_epoch_master_and_bumped_fences_above) {
  uv_loop_t loop;
  rtt_client a;
  rt_options_t o;
  char url[64];
  rtt_req ra, rb;
  rtt_cluster_start(&cluster, 3, 0);
  const char *name = "epochmove";
  int slot = rtt_cluster_slot(name), from = rtt_cluster_owner(&cluster, name);
  int to = (from + 1) % cluster.nmasters;
  int pf = rtt_cluster_port(&cluster, from),
      pt = rtt_cluster_port(&cluster, to);
  /* The old owner's configEpoch becomes the highest of all. */
  redisContext *adm = rtt_redis_at(pf);
  freeReplyObject(rtt_cmd(adm, "CLUSTER BUMPEPOCH"));
  rtt_redis_close(adm);
  long long ef = rtt_cluster_info_ll(pf, "cluster_my_epoch");
  cr_assert_gt(ef, rtt_cluster_info_ll(pt, "cluster_my_epoch"));
  uint64_t t0 = rtt_now_ms();
  while (rtt_cluster_info_ll(pt, "cluster_current_epoch") < ef &&
         rtt_now_ms() - t0 < 10000)
    rtt_sleep_ms(50);
  uv_loop_init(&loop);
  rtt_cluster_options(&o, url, sizeof(url), &cluster, 0);
  rtt_open_ready(&a, &loop, &o);
  memset(&ra, 0, sizeof(ra));
  memset(&rb, 0, sizeof(rb));
  rtt_acquire(&loop, a.c, name, 30000, &ra);
  rtt_release(&loop, &ra, 0);
  adm = rtt_redis_at(pf);
  cr_assert_eq(rtt_int(adm, "CLUSTER COUNTKEYSINSLOT %d", slot), 0,
               "an idle resource leaves no key");
  rtt_redis_close(adm);
  for (int i = 0; i < cluster.nmasters; i++) {
    redisContext *rc = rtt_redis_at(rtt_cluster_port(&cluster, i));
    rtt_ok(rc, "CLUSTER SETSLOT %d NODE %s", slot, cluster.node[to].id);
    rtt_redis_close(rc);
  }
  cr_assert_lt(rtt_cluster_info_ll(pt, "cluster_my_epoch"), ef);
  adm = rtt_redis_at(pt);
  freeReplyObject(rtt_cmd(adm, "CLUSTER BUMPEPOCH"));
  rtt_redis_close(adm);
  cr_assert_gt(rtt_cluster_info_ll(pt, "cluster_my_epoch"), ef);
  rtt_acquire(&loop, a.c, name, 30000, &rb);
  cr_assert_eq(rts_cluster_slot_owner(&cluster, to, slot), to);
  cr_assert_gt(rb.fence, ra.fence,
               "the new owner's fence %llu is below the old owner's %llu",
               (unsigned long long)rb.fence, (unsigned long long)ra.fence);
  rtt_release(&loop, &rb, 0);
  rtt_close(&a);
  rtt_loop_finish(&loop);
}

/* A master that hears a higher epoch from the others keeps its fence
 * epoch: fences carry the node's own configEpoch, not the currentEpoch it
 * takes from every message. That is what keeps a master cut off one way
 * (the others cannot reach it, it still hears them: it keeps its slots and
 * learns the epoch its successor was elected with) fencing below the
 * successor. Here another master's CLUSTER BUMPEPOCH raises the cluster's
 * currentEpoch the same way. */
Test(cluster_epochs, a_master_that_hears_a_higher_epoch_keeps_its_fence_epoch) {
  uv_loop_t loop;
  rtt_client a;
  rt_options_t o;
  char url[64];
  rtt_req r;
  rtt_cluster_start(&cluster, 3, 0);
  const char *name = "epochheard";
  int owner = rtt_cluster_owner(&cluster, name);
  int other = (owner + 1) % cluster.nmasters;
  int po = rtt_cluster_port(&cluster, owner);
  long long mine = rtt_cluster_info_ll(po, "cluster_my_epoch");
  redisContext *adm = rtt_redis_at(rtt_cluster_port(&cluster, other));
  freeReplyObject(rtt_cmd(adm, "CLUSTER BUMPEPOCH"));
  rtt_redis_close(adm);
  long long bumped = rtt_cluster_info_ll(rtt_cluster_port(&cluster, other),
                                         "cluster_my_epoch");
  uint64_t t0 = rtt_now_ms();
  while (rtt_cluster_info_ll(po, "cluster_current_epoch") < bumped &&
         rtt_now_ms() - t0 < 10000)
    rtt_sleep_ms(50);
  cr_assert_geq(rtt_cluster_info_ll(po, "cluster_current_epoch"), bumped,
                "the owner heard the higher epoch");
  cr_assert_gt(bumped, mine);
  uv_loop_init(&loop);
  rtt_cluster_options(&o, url, sizeof(url), &cluster, 0);
  rtt_open_ready(&a, &loop, &o);
  memset(&r, 0, sizeof(r));
  rtt_acquire(&loop, a.c, name, 30000, &r);
  adm = rtt_redis_at(po);
  int64_t now_us = rtt_redis_time_ms(adm) * 1000;
  rtt_redis_close(adm);
  /* fence = clock + epoch * 2^40 (the clock read a moment before now). */
  long long epoch = ((long long)r.fence - now_us + (1LL << 39)) >> 40;
  cr_assert_eq(epoch, mine,
               "the fence carries epoch %lld: the owner's configEpoch is "
               "%lld, the currentEpoch it heard %lld",
               epoch, mine, bumped);
  rtt_release(&loop, &r, 0);
  rtt_close(&a);
  rtt_loop_finish(&loop);
}
