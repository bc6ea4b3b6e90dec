/* The client on a real Redis Cluster (tools/rttopo.h: 3 masters with a
 * replica each, on loopback, stopped by pid): a redis:// URL of one node
 * is used as a cluster, every resource is served by the shard that owns
 * its slot, handoff notices reach the waiter through that shard with an
 * exact receiver count (a dead waiter is skipped), and locks held and
 * waited for survive a reshard of their slot and a failover. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "rt_test.h"
#include "rtcheck.h"
#include "rtt_cluster.h"
#include "rttopo.h"
#include "topology.h"

static rts_cluster cluster;

static void stop_all(void) {
  rts_cluster_stop(&cluster);
  rtt_cleanup();
}

TestSuite(cluster, .fini = stop_all, .timeout = 180);

static int granted(void *arg) {
  const rtt_req *r = arg;
  return r->calls > 0;
}

#define SPREAD 24

Test(cluster, locks_and_handoffs_on_resources_of_every_shard) {
  uv_loop_t loop;
  rtt_client a, b;
  rt_options_t o, ob;
  char url[64], seeds[128], names[SPREAD][16];
  rtt_req ra[SPREAD], rb[SPREAD];
  int per_master[RTS_MAX_MASTERS] = {0};
  rtt_cluster_start(&cluster, 3, 1);
  uv_loop_init(&loop);
  rtt_cluster_options(&o, url, sizeof(url), &cluster, 1);
  rtt_open_ready(&a, &loop, &o);
  /* b's first seed has no server: the next seed is tried. */
  rtt_options(&ob);
  snprintf(seeds, sizeof(seeds), "redis://127.0.0.1:%d,127.0.0.1:%d",
           rtt_free_port(), rtt_cluster_port(&cluster, 2));
  ob.url = seeds;
  rtt_open_ready(&b, &loop, &ob);
  memset(ra, 0, sizeof(ra));
  memset(rb, 0, sizeof(rb));

  for (int i = 0; i < SPREAD; i++) {
    snprintf(names[i], sizeof(names[i]), "spread-%d", i);
    int owner = rtt_cluster_owner(&cluster, names[i]);
    cr_assert(owner >= 0 && owner < cluster.nmasters);
    per_master[owner]++;
    rtt_acquire(&loop, a.c, names[i], 20000, &ra[i]);
    cr_assert_eq(rtt_wait(b.c, names[i], 20000, 20000, &rb[i]), 0);
  }
  for (int m = 0; m < cluster.nmasters; m++)
    cr_assert_gt(per_master[m], 0, "no resource on master %d", m);
  /* Every wait is queued behind a's lock, on the shard of its slot. */
  for (int i = 0; i < SPREAD; i++) {
    int owner = rtt_cluster_owner(&cluster, names[i]);
    redisContext *rc = rtt_redis_at(rtt_cluster_port(&cluster, owner));
    rtt_run_until_queued(&loop, rc, names[i], 2); /* holder and b */
    cr_assert_eq(rtt_cluster_subscribers(rtt_cluster_port(&cluster, owner), b.c,
                                         rtt_cluster_slot(names[i])),
                 1);
    rtt_redis_close(rc);
    cr_assert_eq(rb[i].calls, 0);
  }
  for (int i = 0; i < SPREAD; i++)
    cr_assert_eq(rtt_signal(&ra[i]), 0);
  for (int i = 0; i < SPREAD; i++) {
    rtt_expect_grant(&loop, &rb[i], 5000, names[i]);
    cr_assert_gt(rb[i].fence, ra[i].fence);
    rtt_release(&loop, &rb[i], 0);
  }
  rtt_close(&a);
  rtt_close(&b);
  rtt_loop_finish(&loop);
}

/* A seed host name of 64 bytes or more (this one, 70 bytes, is
 * 127.0.0.1 written in hex with leading zeros, so it resolves here) works
 * as it does on a plain server: it used to fail the connect with RT_ENOMEM
 * "cluster: out of memory". */
Test(cluster, a_seed_with_a_long_host_name_connects) {
  uv_loop_t loop;
  rtt_client a;
  rt_options_t o;
  char seeds[256];
  rtt_req r = {0};
  const char *host =
      "0x0000000000000000000000000000000000000000000000000000000000007f000001";
  cr_assert_geq(strlen(host), 64);
  rtt_cluster_start(&cluster, 1, 0);
  uv_loop_init(&loop);
  rtt_options(&o);
  snprintf(seeds, sizeof(seeds), "redis://%s:%d,%s:%d", host,
           rtt_cluster_port(&cluster, 0), host, rtt_free_port());
  o.url = seeds;
  rtt_open_ready(&a, &loop, &o);
  rtt_acquire(&loop, a.c, "long-seed", 5000, &r);
  rtt_release(&loop, &r, 0);
  rtt_close(&a);
  rtt_loop_finish(&loop);
}

Test(cluster, the_cli_evicts_the_holder_on_the_shard_of_the_resource) {
  uv_loop_t loop;
  rtt_client a, b;
  rtt_req held = {0}, waiting = {0};
  rt_options_t o;
  char url[64], seeds[128], args[512], out[8192];
  rtt_cluster_start(&cluster, 3, 0);
  uv_loop_init(&loop);
  rtt_cluster_options(&o, url, sizeof(url), &cluster, 0);
  rtt_open_ready(&a, &loop, &o);
  rtt_open_ready(&b, &loop, &o);
  /* A resource whose shard is not the first seed's. */
  const char *name =
      rtt_cluster_owner(&cluster, "evict-a") != 0 ? "evict-a" : "evict-b";
  cr_assert_neq(rtt_cluster_owner(&cluster, name), 0);
  rtt_acquire(&loop, a.c, name, 20000, &held);
  rtt_wait_queued(&loop, b.c, name, 20000, &waiting);

  /* Two seeds, the first with no server. */
  snprintf(seeds, sizeof(seeds), "redis://127.0.0.1:%d,127.0.0.1:%d",
           rtt_free_port(), rtt_cluster_port(&cluster, 0));
  snprintf(args, sizeof(args), "evict --url '%s' --prefix %s %s --holder %s",
           seeds, rtt_prefix(), name, held.id);
  cr_assert_eq(rtt_redturn(args, out, sizeof(out)), 0, "%s", out);
  rtt_expect_evicted(&loop, &held, &waiting, out);
  rtt_close(&a);
  rtt_close(&b);
  rtt_loop_finish(&loop);
}

/* The CLI's run and demo on a cluster URL of two seeds (the first with no
 * server): the demo's workers, on resources of its own, check their grants
 * (fences, exclusion, FIFO) and exit 0 only if all hold. */
Test(cluster, the_cli_runs_and_demos_on_a_cluster_url) {
  char seeds[128];
  rtt_cluster_start(&cluster, 3, 0);
  snprintf(seeds, sizeof(seeds), "redis://127.0.0.1:%d,127.0.0.1:%d",
           rtt_free_port(), rtt_cluster_port(&cluster, 1));
  rtt_cli_runs_and_demos(seeds);
}

Test(cluster, a_dead_waiter_on_a_shard_is_skipped) {
  uv_loop_t loop, dead_loop;
  rtt_client a, dead, c;
  rt_options_t o;
  char url[64];
  rtt_req ra, rd, rc;
  rtt_cluster_start(&cluster, 3, 0);
  uv_loop_init(&loop);
  uv_loop_init(&dead_loop);
  rtt_cluster_options(&o, url, sizeof(url), &cluster, 0);
  rtt_open_ready(&a, &loop, &o);
  rtt_open_ready(&dead, &dead_loop, &o);
  rtt_open_ready(&c, &loop, &o);
  memset(&ra, 0, sizeof(ra));
  memset(&rd, 0, sizeof(rd));
  memset(&rc, 0, sizeof(rc));
  const char *name = "dead-waiter";
  int owner = rtt_cluster_owner(&cluster, name);
  redisContext *adm = rtt_redis_at(rtt_cluster_port(&cluster, owner));

  rtt_acquire(&loop, a.c, name, 20000, &ra);
  cr_assert_eq(rtt_wait(dead.c, name, 20000, 20000, &rd), 0);
  rtt_run_until_queued(&dead_loop, adm, name, 2);
  cr_assert_eq(rtt_wait(c.c, name, 20000, 20000, &rc), 0);
  rtt_run_until_queued(&loop, adm, name, 3);
  /* The dead client's loop never runs again until the end: its shard
   * subscription, once killed, stays gone. */
  cr_assert(rtt_kill_conn(adm, "sub", rt_client_id(dead.c)));
  cr_assert_eq(rtt_cluster_subscribers(rtt_cluster_port(&cluster, owner),
                                       dead.c, rtt_cluster_slot(name)),
               0);

  uint64_t t0 = rtt_now_ms();
  cr_assert_eq(rtt_signal(&ra), 0);
  rtt_expect_grant(&loop, &rc, 3000, "the live waiter behind a dead one");
  cr_assert_lt(rc.at_ms - t0, 500);
  cr_assert_gt(rc.fence, ra.fence);
  cr_assert_eq(rd.calls, 0);
  rtt_release(&loop, &rc, 0);
  rtt_close(&a);
  rtt_close(&c);
  rtt_close(&dead);
  rtt_loop_finish(&dead_loop);
  rtt_loop_finish(&loop);
  rtt_redis_close(adm);
}

/* SIGKILL, as a crash, and reap. */
typedef struct subscribed_on {
  int port, slot;
  const rt_client_t *c;
} subscribed_on;

static int is_subscribed(void *arg) {
  const subscribed_on *s = arg;
  return rtt_cluster_subscribers(s->port, s->c, s->slot) == 1;
}

/* Run loop until client c's channel of slot has its subscriber on port. */
static void expect_subscribed(uv_loop_t *loop, const rt_client_t *c, int port,
                              int slot) {
  subscribed_on s = {port, slot, c};
  cr_assert(rtt_run_until_fn(loop, is_subscribed, &s, 10000),
            "client %s not subscribed to slot %d on port %d", rt_client_id(c),
            slot, port);
}

/* a holds name, b waits; the master serving it fails over (crash: kill
 * -9; else CLUSTER FAILOVER on its replica) and a releases at once: the
 * queue moves on the new master. Prints the time from the fault to b's
 * grant. */
static void held_and_waited_across_a_failover(int crash_it) {
  uv_loop_t loop;
  rtt_client a, b;
  rt_options_t o;
  char url[64], err[1024];
  rtt_req ra, rb;
  rtt_cluster_start(&cluster, 3, 1);
  const char *name = "failover";
  int owner = rtt_cluster_owner(&cluster, name),
      heir = rtt_cluster_replica_of(&cluster, owner);
  uv_loop_init(&loop);
  rtt_cluster_options(&o, url, sizeof(url), &cluster,
                      (owner + 1) % cluster.nmasters);
  rtt_open_ready(&a, &loop, &o);
  rtt_open_ready(&b, &loop, &o);
  memset(&ra, 0, sizeof(ra));
  memset(&rb, 0, sizeof(rb));
  redisContext *adm = rtt_redis_at(rtt_cluster_port(&cluster, owner));
  rtt_acquire(&loop, a.c, name, 30000, &ra);
  cr_assert_eq(rtt_wait(b.c, name, 30000, 60000, &rb), 0);
  rtt_run_until_queued(&loop, adm, name, 2);
  rtt_redis_close(adm);
  /* The holder key is on the replica before the fault. */
  rtt_run_for(&loop, 100);
  cr_assert(rtt_replica_has_all(rtt_cluster_port(&cluster, owner),
                                rtt_cluster_port(&cluster, heir), 5000));

  uint64_t t0 = rtt_now_ms();
  if (crash_it) {
    rtt_crash(&cluster.node[owner].server);
  } else {
    /* The old master serves until the handover: release once it is done,
     * so that the release meets the new master. */
    freeReplyObject(
        rts_command(rtt_cluster_port(&cluster, heir), "CLUSTER FAILOVER"));
    while (rts_cluster_slot_owner(&cluster, heir, rtt_cluster_slot(name)) !=
               heir &&
           rtt_now_ms() - t0 < 30000)
      rtt_run_for(&loop, 10);
  }
  cr_assert_eq(rtt_signal(&ra), 0);
  rtt_expect_grant(&loop, &rb, 30000, "the waiter after the failover");
  uint64_t moved_ms = rb.at_ms - t0;
  printf("cluster %s (node timeout %lld ms): the queue moved again %llu ms "
         "after the %s\n",
         crash_it ? "kill -9 of a master" : "CLUSTER FAILOVER",
         (long long)cluster.node_timeout_ms, (unsigned long long)moved_ms,
         crash_it ? "kill" : "command");
  cr_assert_gt(rb.fence, ra.fence);
  /* The heir's configEpoch is above its old master's, and a fence carries
   * 2^40 us per epoch: whatever the old master could still issue (a cut
   * off one keeps its epoch) stays below the heir's first fence. */
  cr_assert_geq(rb.fence, ra.fence + (1ull << 40) - 1000000u,
                "the new master's fence %llu is not an epoch above %llu",
                (unsigned long long)rb.fence, (unsigned long long)ra.fence);
  cr_assert_eq(rts_cluster_slot_owner(&cluster, heir, rtt_cluster_slot(name)),
               heir);
  cr_assert_eq(rts_cluster_wait_ok(&cluster, 30000, err, sizeof(err)), 0, "%s",
               err);
  rtt_release(&loop, &rb, 0);
  rtt_close(&a);
  rtt_close(&b);
  rtt_loop_finish(&loop);
}

/* Whether node port sees the master with node id as failed, and says
 * cluster_state:ok all the same. */
static int sees_dead_master(int port, const char *id) {
  redisReply *nodes = rts_command(port, "CLUSTER NODES");
  redisReply *info = rts_command(port, "CLUSTER INFO");
  int dead = 0;
  if (nodes != NULL && nodes->type == REDIS_REPLY_STRING && info != NULL &&
      info->type == REDIS_REPLY_STRING &&
      strstr(info->str, "cluster_state:ok") != NULL) {
    /* The node's own line starts with its id (a replica's names it too). */
    size_t idl = strlen(id);
    for (const char *line = nodes->str; line != NULL && !dead;) {
      const char *end = strchr(line, '\n');
      const char *flags = strstr(line, " master,fail ");
      dead = strncmp(line, id, idl) == 0 && line[idl] == ' ' && flags != NULL &&
             (end == NULL || flags < end);
      line = end != NULL ? end + 1 : NULL;
    }
  }
  freeReplyObject(nodes);
  freeReplyObject(info);
  return dead;
}

/* A shard whose master and replica are both dead, on a cluster that
 * serves on without full coverage: its slots are a hole in the map. New
 * clients connect (also with retry_first_connect), every other shard
 * serves new and old clients, and a wait in the hole ends by its
 * deadline. */
Test(cluster, a_dead_shard_is_a_hole_not_a_refusal_of_the_cluster) {
  uv_loop_t loop;
  rtt_client old, fresh, retrying;
  rt_options_t o;
  char url[64], names[RTS_MAX_MASTERS][RTT_CLUSTER_NAME_MAX];
  rtt_req r[RTS_MAX_MASTERS], q[RTS_MAX_MASTERS], hole = {0};
  const int dead = 2;
  rtt_cluster_start(&cluster, 3, 1);
  for (int i = 0; i < cluster.nnodes; i++)
    freeReplyObject(rts_command(rtt_cluster_port(&cluster, i),
                                "CONFIG SET cluster-require-full-coverage no"));
  rtt_cluster_names(&cluster, "hole", names);
  uv_loop_init(&loop);
  rtt_cluster_options(&o, url, sizeof(url), &cluster, 0);
  rtt_open_ready(&old, &loop, &o);

  rtt_crash(&cluster.node[dead].server);
  rtt_crash(&cluster.node[rtt_cluster_replica_of(&cluster, dead)].server);
  uint64_t t0 = rtt_now_ms();
  while (
      !sees_dead_master(rtt_cluster_port(&cluster, 0), cluster.node[dead].id) &&
      rtt_now_ms() - t0 < 20000)
    rtt_run_for(&loop, 50);
  if (!sees_dead_master(rtt_cluster_port(&cluster, 0), cluster.node[dead].id)) {
    redisReply *n = rts_command(rtt_cluster_port(&cluster, 0), "CLUSTER NODES");
    redisReply *i = rts_command(rtt_cluster_port(&cluster, 0), "CLUSTER INFO");
    cr_assert_fail("node 0 never saw master %s fail with cluster_state:ok:\n"
                   "%s\n%s",
                   cluster.node[dead].id, n != NULL ? n->str : "-",
                   i != NULL ? i->str : "-");
  }

  rtt_open_wait(&fresh, &loop, &o);
  cr_assert_eq(fresh.connect_status, 0, "a new client: %s (%s)",
               rt_err_name(fresh.connect_status),
               rt_client_last_error(fresh.c));
  o.retry_first_connect = 1;
  rtt_open_ready(&retrying, &loop, &o);
  memset(r, 0, sizeof(r));
  memset(q, 0, sizeof(q));
  for (int m = 0; m < cluster.nmasters; m++) {
    if (m == dead)
      continue;
    rtt_acquire(&loop, fresh.c, names[m], 20000, &r[m]);
    cr_assert_eq(rtt_wait(old.c, names[m], 20000, 10000, &q[m]), 0);
    rtt_release(&loop, &r[m], 0);
    rtt_expect_grant(&loop, &q[m], 5000, names[m]);
    rtt_release(&loop, &q[m], 0);
  }
  t0 = rtt_now_ms();
  cr_assert_eq(rtt_wait(retrying.c, names[dead], 20000, 1000, &hole), 0);
  cr_assert(rtt_run_until(&loop, &hole.calls, 1, 5000));
  uint64_t ended = hole.at_ms - t0;
  cr_assert_eq(hole.status, RT_EWAITTIMEOUT, "%s", rt_err_name(hole.status));
  cr_assert(ended >= 990 && ended < 2000, "ended after %llu ms",
            (unsigned long long)ended);
  printf("cluster with a dead shard: new clients connect; a 1000 ms wait in "
         "the hole ended RT_EWAITTIMEOUT after %llu ms\n",
         (unsigned long long)ended);
  rtt_close(&old);
  rtt_close(&fresh);
  rtt_close(&retrying);
  rtt_loop_finish(&loop);
}

Test(cluster, a_killed_master_fails_over_while_held_and_waited) {
  held_and_waited_across_a_failover(1);
}

Test(cluster, a_cluster_failover_while_held_and_waited) {
  held_and_waited_across_a_failover(0);
}

/* Three clients through node seed: a holds name (ra), then b (whose wait
 * ends after b_timeout_ms) and c queue behind it, on node owner. */
typedef struct trio {
  rtt_client a, b, c;
  rtt_req ra, rb, rc;
  rt_options_t o;
  char url[64];
} trio;

static void trio_queue(trio *t, uv_loop_t *loop, int seed, const char *name,
                       int owner, int64_t ttl_ms, int64_t b_timeout_ms) {
  memset(t, 0, sizeof(*t));
  rtt_cluster_options(&t->o, t->url, sizeof(t->url), &cluster, seed);
  rtt_open_ready(&t->a, loop, &t->o);
  rtt_open_ready(&t->b, loop, &t->o);
  rtt_open_ready(&t->c, loop, &t->o);
  redisContext *adm = rtt_redis_at(rtt_cluster_port(&cluster, owner));
  rtt_acquire(loop, t->a.c, name, ttl_ms, &t->ra);
  cr_assert_eq(rtt_wait(t->b.c, name, ttl_ms, b_timeout_ms, &t->rb), 0);
  rtt_run_until_queued(loop, adm, name, 2);
  cr_assert_eq(rtt_wait(t->c.c, name, ttl_ms, 60000, &t->rc), 0);
  rtt_run_until_queued(loop, adm, name, 3);
  rtt_redis_close(adm);
}

static void trio_close(trio *t) {
  rtt_close(&t->a);
  rtt_close(&t->b);
  rtt_close(&t->c);
}

/* b gives up its wait while the master of its slot is down (its cancel
 * cannot reach Redis then), and waits there again after the failover. Its
 * cancel runs on the new master before c's client has subscribed there:
 * c must keep its place (not be dropped as dead and queued again behind
 * b's second wait), and the wait b gave up must not keep the lock. */
Test(cluster, waiters_keep_their_place_while_a_failover_moves_their_clients) {
  uv_loop_t loop;
  trio t;
  rtt_req rb2 = {0};
  rtt_cluster_start(&cluster, 3, 1);
  const char *name = "given-up";
  int owner = rtt_cluster_owner(&cluster, name),
      heir = rtt_cluster_replica_of(&cluster, owner);
  uv_loop_init(&loop);
  trio_queue(&t, &loop, (owner + 1) % cluster.nmasters, name, owner, 60000,
             600);
  rtt_run_for(&loop, 100);
  cr_assert(rtt_replica_has_all(rtt_cluster_port(&cluster, owner),
                                rtt_cluster_port(&cluster, heir), 5000));

  rtt_crash(&cluster.node[owner].server);
  rtt_run_until_fn(&loop, granted, &t.rb, 5000);
  cr_assert_eq(t.rb.status, RT_EWAITTIMEOUT, "b's wait: %s",
               rt_strerror(t.rb.status));
  uint64_t t0 = rtt_now_ms();
  while (rts_cluster_slot_owner(&cluster, heir, rtt_cluster_slot(name)) !=
             heir &&
         rtt_now_ms() - t0 < 30000)
    rtt_run_for(&loop, 10);
  cr_assert_eq(rts_cluster_slot_owner(&cluster, heir, rtt_cluster_slot(name)),
               heir);
  cr_assert_eq(rtt_wait(t.b.c, name, 60000, 60000, &rb2), 0);
  expect_subscribed(&loop, t.b.c, rtt_cluster_port(&cluster, heir),
                    rtt_cluster_slot(name));
  expect_subscribed(&loop, t.c.c, rtt_cluster_port(&cluster, heir),
                    rtt_cluster_slot(name));
  redisContext *adm = rtt_redis_at(rtt_cluster_port(&cluster, heir));
  rtt_run_until_queued(&loop, adm, name, 3);
  rtt_redis_close(adm);

  cr_assert_eq(rtt_signal(&t.ra), 0);
  rtt_expect_grant(&loop, &t.rc, 5000, "the waiter behind the wait given up");
  cr_assert_eq(rb2.calls, 0, "b's second wait overtook c");
  rtt_release(&loop, &t.rc, 0);
  rtt_expect_grant(&loop, &rb2, 5000, "b's second wait");
  rtt_release(&loop, &rb2, 0);
  trio_close(&t);
  rtt_loop_finish(&loop);
}

/* Move slot from node from to node to, keys and all, as redis-cli
 * --cluster reshard does. */
static void reshard_slot(int slot, int from, int to) {
  redisContext *src = rtt_redis_at(rtt_cluster_port(&cluster, from));
  redisContext *dst = rtt_redis_at(rtt_cluster_port(&cluster, to));
  rtt_ok(dst, "CLUSTER SETSLOT %d IMPORTING %s", slot, cluster.node[from].id);
  rtt_ok(src, "CLUSTER SETSLOT %d MIGRATING %s", slot, cluster.node[to].id);
  redisReply *keys = rtt_cmd(src, "CLUSTER GETKEYSINSLOT %d 100", slot);
  cr_assert_eq(keys->type, REDIS_REPLY_ARRAY);
  for (size_t i = 0; i < keys->elements; i++)
    rtt_ok(src, "MIGRATE 127.0.0.1 %d %b 0 5000",
           rtt_cluster_port(&cluster, to), keys->element[i]->str,
           keys->element[i]->len);
  freeReplyObject(keys);
  rtt_ok(dst, "CLUSTER SETSLOT %d NODE %s", slot, cluster.node[to].id);
  rtt_ok(src, "CLUSTER SETSLOT %d NODE %s", slot, cluster.node[to].id);
  for (int i = 0; i < cluster.nmasters; i++)
    if (i != from && i != to)
      rtt_ok(rtt_redis_at(rtt_cluster_port(&cluster, i)),
             "CLUSTER SETSLOT %d NODE %s", slot, cluster.node[to].id);
  rtt_redis_close(src);
  rtt_redis_close(dst);
}

Test(cluster, a_resharded_slot_keeps_its_holder_and_its_waiters_order) {
  uv_loop_t loop;
  trio t;
  rtt_cluster_start(&cluster, 3, 0);
  const char *name = "reshard";
  int slot = rtt_cluster_slot(name), from = rtt_cluster_owner(&cluster, name);
  int to = (from + 1) % cluster.nmasters;
  uv_loop_init(&loop);
  trio_queue(&t, &loop, 0, name, from, 30000, 60000);

  reshard_slot(slot, from, to);
  /* The old shard dropped the waiters' channels of the slot: they
   * subscribe again on the new one. */
  expect_subscribed(&loop, t.b.c, rtt_cluster_port(&cluster, to), slot);
  expect_subscribed(&loop, t.c.c, rtt_cluster_port(&cluster, to), slot);
  redisContext *adm = rtt_redis_at(rtt_cluster_port(&cluster, to));
  char ids[4][RTT_ID_MAX];
  cr_assert_eq(rtt_queue(adm, rtt_prefix(), name, strlen(name), ids, 4), 3);
  cr_assert_str_eq(ids[1], t.rb.id);
  cr_assert_str_eq(ids[2], t.rc.id);
  rtt_redis_close(adm);
  cr_assert_eq(t.rb.calls + t.rc.calls, 0);

  rtt_release(&loop, &t.ra, 0); /* the holder kept it */
  rtt_expect_grant(&loop, &t.rb, 5000, "the first waiter after the reshard");
  cr_assert_eq(t.rc.calls, 0);
  rtt_release(&loop, &t.rb, 0);
  rtt_expect_grant(&loop, &t.rc, 5000, "the second waiter after the reshard");
  cr_assert(t.ra.fence < t.rb.fence && t.rb.fence < t.rc.fence);
  rtt_release(&loop, &t.rc, 0);
  trio_close(&t);
  rtt_loop_finish(&loop);
}

/* ---- a recorded history under a reshard and a failover ------------------ */

#define LANES 8
#define HIST_RES 6
#define HIST_MAX 100000

typedef struct lane {
  rt_client_t *c;
  uv_timer_t hold;
  rt_lock_t *lock;
  int res;
  size_t grant; /* index of its current grant */
  int64_t asked, queued;
  uint64_t reconnects; /* the client's, at the rt_wait */
  uint64_t seed;
} lane;

typedef struct history {
  rtc_grant g[HIST_MAX];
  size_t n;
  int errors, stop, open;
  char first_error[160];
} history;

static history hist;
static lane lanes[LANES];

static void lane_next(lane *ln);

static uint64_t client_reconnects(const rt_client_t *c) {
  rt_stats_t st;
  rt_client_stats(c, &st);
  return st.reconnects;
}

static void lane_released(rt_lock_t *l, int status, void *data) {
  lane *ln = data;
  RT__UNUSED(l);
  if (status != 0 && hist.errors++ == 0)
    snprintf(hist.first_error, sizeof(hist.first_error), "release: %s",
             rt_strerror(status));
  lane_next(ln);
}

static void lane_hold_done(uv_timer_t *t) {
  lane *ln = t->data;
  hist.g[ln->grant].end = rtt_realtime_us();
  rt_lock_t *l = ln->lock;
  ln->lock = NULL;
  cr_assert_eq(rt_signal(l, lane_released, ln), 0);
}

static void lane_granted(rt_lock_t *l, int status, void *data) {
  lane *ln = data;
  if (status != 0) {
    if (hist.errors++ == 0)
      snprintf(hist.first_error, sizeof(hist.first_error), "wait: %s",
               rt_strerror(status));
    lane_next(ln);
    return;
  }
  cr_assert_lt(hist.n, HIST_MAX);
  rtc_grant *g = &hist.g[hist.n];
  ln->grant = hist.n++;
  g->res = ln->res;
  g->fence = rt_lock_fence(l);
  g->start = rtt_realtime_us();
  g->end = 0;
  g->asked = ln->asked;
  g->queued = ln->queued != 0 ? ln->queued : g->start;
  if (client_reconnects(ln->c) != ln->reconnects) {
    /* Its client lost a subscription meanwhile (a node or a slot moved):
     * a waiter not subscribed at its turn is queued again at the tail
     * (DESIGN.md, Choices), so its FIFO place is not checked, as the
     * fault suite's checker does with such disturbed requests. */
    g->asked = g->queued = RTC_UNKNOWN;
  }
  ln->lock = l;
  uv_timer_start(&ln->hold, lane_hold_done, ln->seed % 3, 0);
}

static void lane_next(lane *ln) {
  if (hist.stop)
    return;
  char name[16];
  ln->seed = ln->seed * 6364136223846793005ull + 1442695040888963407ull;
  ln->res = (int)((ln->seed >> 33) % HIST_RES);
  snprintf(name, sizeof(name), "hist-%d", ln->res);
  ln->asked = rtt_realtime_us();
  ln->queued = 0;
  ln->reconnects = client_reconnects(ln->c);
  cr_assert_eq(rt_wait(ln->c, name, strlen(name), 5000, 20000, lane_granted, ln,
                       &ln->lock),
               0);
}

/* A wait's enqueue was answered once its position is known: note the
 * first loop turn that sees it (a bound from above, as rtc wants). */
static void note_queued(uv_check_t *h) {
  RT__UNUSED(h);
  for (int i = 0; i < LANES; i++)
    if (lanes[i].lock != NULL && lanes[i].queued == 0 &&
        rt_lock_state(lanes[i].lock) == RT_LOCK_QUEUED &&
        rt_lock_position(lanes[i].lock) > 0)
      lanes[i].queued = rtt_realtime_us();
}

static void count_violation(void *ctx, size_t earlier, size_t later) {
  int *n = ctx;
  (*n)++;
  fprintf(stderr, "violation: grant %zu (res %lld fence %llu) and %zu\n",
          earlier, (long long)hist.g[earlier].res,
          (unsigned long long)hist.g[earlier].fence, later);
}

Test(cluster, a_history_across_a_reshard_and_a_failover_has_no_violation) {
  uv_loop_t loop;
  rtt_client cl[LANES / 2];
  rt_options_t o;
  char url[64], err[1024];
  uv_check_t check;
  rtt_cluster_start(&cluster, 3, 1);
  uv_loop_init(&loop);
  rtt_cluster_options(&o, url, sizeof(url), &cluster, 0);
  for (int i = 0; i < LANES / 2; i++)
    rtt_open_ready(&cl[i], &loop, &o);
  uv_check_init(&loop, &check);
  uv_check_start(&check, note_queued);
  for (int i = 0; i < LANES; i++) {
    lanes[i].c = cl[i / 2].c;
    lanes[i].seed = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
    uv_timer_init(&loop, &lanes[i].hold);
    lanes[i].hold.data = &lanes[i];
    lane_next(&lanes[i]);
  }
  rtt_run_for(&loop, 1500);
  size_t before = hist.n;
  int slot = rtt_cluster_slot("hist-0"),
      from = rtt_cluster_owner(&cluster, "hist-0");
  reshard_slot(slot, from, (from + 1) % cluster.nmasters);
  rtt_run_for(&loop, 1500);
  size_t after_reshard = hist.n;
  int victim = rtt_cluster_owner(&cluster, "hist-1"),
      heir = rtt_cluster_replica_of(&cluster, victim);
  freeReplyObject(
      rts_command(rtt_cluster_port(&cluster, heir), "CLUSTER FAILOVER"));
  rtt_run_for(&loop, 3000);
  /* The failover itself took over 3 s beside two other test commands. */
  RTT_RUN_UNTIL(&loop,
                rts_cluster_slot_owner(&cluster, heir,
                                       rtt_cluster_slot("hist-1")) == heir,
                30000);
  cr_assert_eq(
      rts_cluster_slot_owner(&cluster, heir, rtt_cluster_slot("hist-1")), heir);
  cr_assert_eq(rts_cluster_wait_ok(&cluster, 10000, err, sizeof(err)), 0, "%s",
               err);
  hist.stop = 1;
  rtt_run_for(&loop, 500);
  for (int i = 0; i < LANES / 2; i++)
    rtt_close(&cl[i]);
  for (int i = 0; i < LANES; i++)
    uv_close((uv_handle_t *)&lanes[i].hold, NULL);
  uv_close((uv_handle_t *)&check, NULL);
  rtt_loop_finish(&loop);

  int overlaps = 0, fences = 0, fifo_bad = 0;
  rtc_fifo fifo;
  rtc_overlaps(hist.g, hist.n, 0, count_violation, &overlaps);
  rtc_fence_regressions(hist.g, hist.n, count_violation, &fences);
  rtc_fifo_check(hist.g, hist.n, 1, 0, &fifo, count_violation, &fifo_bad);
  printf("cluster history: %zu grants (%zu before the reshard, %zu before "
         "the failover), %d errors (%s); overlaps %d, fence regressions %d, "
         "FIFO inversions %llu of %llu checked (%llu disturbed)\n",
         hist.n, before, after_reshard, hist.errors, hist.first_error, overlaps,
         fences, (unsigned long long)fifo.inversions,
         (unsigned long long)fifo.checked, (unsigned long long)fifo.unknown);
  cr_assert_gt(fifo.checked, hist.n / 2);
  cr_assert_gt(after_reshard, before, "no grant after the reshard");
  cr_assert_gt(hist.n, after_reshard, "no grant after the failover");
  cr_assert_eq(overlaps, 0);
  cr_assert_eq(fences, 0);
  cr_assert_eq(fifo.inversions, 0);
}

/* What an observer was told: "-" for nobody, else the leader's value. */
typedef struct seen {
  char said[16][16];
  int n, lost, closed;
  const char *want; /* the value told() waits for */
} seen;

static void observed(rt_observer_t *o, int status, const rt_leader_t *l,
                     void *data) {
  seen *w = data;
  (void)o;
  if (status == RT_EDISCONNECTED || status == RT_ECANCELED) {
    w->lost += status == RT_EDISCONNECTED; /* RT_ECANCELED: closing */
    w->closed += status == RT_ECANCELED;
    return;
  }
  cr_assert_eq(status, 0, "observer: %s", rt_err_name(status));
  cr_assert_lt(w->n, 16);
  snprintf(w->said[w->n++], sizeof(w->said[0]), "%s",
           l->id != NULL ? l->value : "-");
}

static int told(void *arg) {
  const seen *w = arg;
  return w->n > 0 && strcmp(w->said[w->n - 1], w->want) == 0;
}

/* A new leader of name with value v, then resigning; w sees v. */
static void lead_and_see(uv_loop_t *loop, rt_client_t *c, const char *name,
                         const char *v, seen *w) {
  rt_request_t req = {RT_KIND_ELECTION, 0, 0, 0, v, strlen(v)};
  rtt_req l = {0};
  cr_assert_eq(rtt_wait_ex(c, name, &req, 20000, RT_FOREVER, &l), 0);
  rtt_expect_grant(loop, &l, 10000, v);
  w->want = v;
  rtt_run_until_fn(loop, told, w, 10000);
  cr_assert(told(w), "the observer never reported %s (%d reports, %d losses)",
            v, w->n, w->lost);
  rtt_release(loop, &l, 0);
}

/* An observer's calls: how many, and the last status. */
typedef struct calls_seen {
  int calls, status;
} calls_seen;

static void count_observed(rt_observer_t *o, int status, const rt_leader_t *l,
                           void *data) {
  calls_seen *cs = data;
  (void)o;
  (void)l;
  cs->calls++;
  cs->status = status;
}

/* An ACL that denies an election's observe channel ends its observer with
 * RT_ENOPERM, as on one server (it_observe): the refusal is no redirect,
 * and a subscription made again would be refused again. The user may use
 * every channel of the client's own: each ends in the client id's hex
 * digits, where an observe channel ends in 'o'. */
Test(cluster, an_observer_refused_its_channel_by_an_acl_ends_with_enoperm) {
  uv_loop_t loop;
  rtt_client w;
  rt_options_t o;
  char url[96];
  calls_seen cs = {0, 0};
  rtt_cluster_start(&cluster, 3, 0);
  for (int i = 0; i < cluster.nmasters; i++) {
    redisContext *rc = rtt_redis_at(rtt_cluster_port(&cluster, i));
    rtt_ok(rc, "ACL SETUSER obs on >pw ~* resetchannels &%s:*[0-9a-f] +@all",
           rtt_prefix());
    rtt_redis_close(rc);
  }
  uv_loop_init(&loop);
  rtt_options(&o);
  snprintf(url, sizeof(url), "redis://obs:pw@127.0.0.1:%d",
           rtt_cluster_port(&cluster, 0));
  o.url = url;
  rtt_open_ready(&w, &loop, &o);
  cr_assert_eq(rt_observe(w.c, "denied", 6, count_observed, &cs, NULL), 0);
  RTT_RUN_UNTIL(&loop, cs.calls > 0, 5000);
  cr_assert_eq(cs.calls, 1, "%d calls: the refusal was not reported", cs.calls);
  cr_assert_eq(cs.status, RT_ENOPERM, "the observer ended with %s",
               rt_err_name(cs.status));
  rtt_run_for(&loop, 300); /* a retry would have called again */
  cr_assert_eq(cs.calls, 1);
  rtt_close(&w);
  rtt_loop_finish(&loop);
}

/* Campaign, proclaim and resign on one resource per shard: the observers
 * of one client, each on a connection to its slot's master, see every
 * change in order. After a CLUSTER FAILOVER of one resource's master, and
 * after a kill -9 of the new master, its observer follows the slot and
 * reports the next leader. */
Test(cluster, observers_follow_elections_on_every_shard_and_a_failover) {
  char names[RTS_MAX_MASTERS][RTT_CLUSTER_NAME_MAX];
  uv_loop_t loop;
  rtt_client a, w;
  rt_options_t o;
  char url[64];
  seen s[RTS_MAX_MASTERS];
  rtt_cluster_start(&cluster, 3, 1);
  uv_loop_init(&loop);
  rtt_cluster_options(&o, url, sizeof(url), &cluster, 1);
  rtt_open_ready(&a, &loop, &o);
  rtt_open(&w, &loop, &o); /* observers made before it knows the cluster */
  rtt_cluster_names(&cluster, "ele", names);
  memset(s, 0, sizeof(s));
  for (int i = 0; i < cluster.nmasters; i++) {
    cr_assert_eq(
        rt_observe(w.c, names[i], strlen(names[i]), observed, &s[i], NULL), 0);
    RTT_RUN_UNTIL(&loop, s[i].n == 1, 10000);
    cr_assert_str_eq(s[i].said[0], "-", "%s: nobody leads yet", names[i]);
  }
  for (int i = 0; i < cluster.nmasters; i++) {
    rt_request_t v1 = {RT_KIND_ELECTION, 0, 0, 0, "v1", 2};
    rtt_req l = {0};
    cr_assert_eq(rtt_wait_ex(a.c, names[i], &v1, 20000, RT_FOREVER, &l), 0);
    rtt_expect_grant(&loop, &l, 5000, names[i]);
    cr_assert_eq(rt_proclaim(l.lock, "v2", 2, rtt_extend_cb, &l), 0);
    cr_assert(rtt_run_until(&loop, &l.ext_calls, 1, 5000));
    rtt_release(&loop, &l, 0);
    RTT_RUN_UNTIL(&loop, s[i].n == 4, 5000);
    cr_assert_eq(s[i].n, 4, "%s: %d changes seen", names[i], s[i].n);
    cr_assert_str_eq(s[i].said[1], "v1");
    cr_assert_str_eq(s[i].said[2], "v2");
    cr_assert_str_eq(s[i].said[3], "-");
  }
  int owner = rtt_cluster_owner(&cluster, names[0]),
      heir = rtt_cluster_replica_of(&cluster, owner);
  freeReplyObject(
      rts_command(rtt_cluster_port(&cluster, heir), "CLUSTER FAILOVER"));
  uint64_t t0 = rtt_now_ms();
  while (rts_cluster_slot_owner(&cluster, heir, rtt_cluster_slot(names[0])) !=
             heir &&
         rtt_now_ms() - t0 < 10000)
    rtt_run_for(&loop, 10);
  rtt_run_for(&loop, 300);
  lead_and_see(&loop, a.c, names[0], "v3", &s[0]);
  /* The new master killed: the observer's connection is lost, and it
   * moves to the master that takes over. */
  rtt_crash(&cluster.node[heir].server);
  t0 = rtt_now_ms();
  while (rts_cluster_slot_owner(&cluster, owner, rtt_cluster_slot(names[0])) !=
             owner &&
         rtt_now_ms() - t0 < 30000)
    rtt_run_for(&loop, 20);
  lead_and_see(&loop, a.c, names[0], "v4", &s[0]);
  cr_assert_gt(s[0].lost, 0, "the kill was not noticed");
  rtt_close(&w);
  rtt_close(&a);
  rtt_loop_finish(&loop);
  for (int i = 0; i < cluster.nmasters; i++)
    cr_assert_eq(s[i].closed, 1, "observer %d: %d last calls at close", i,
                 s[i].closed);
}
