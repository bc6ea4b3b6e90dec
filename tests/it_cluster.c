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
#include "rttopo.h"
#include "topology.h"

static rts_cluster cluster;

static void stop_all(void) {
  rts_cluster_stop(&cluster);
  rtt_cleanup();
}

TestSuite(cluster, .fini = stop_all, .timeout = 180);

static int node_port(int i) { return cluster.node[i].server.port; }

static void start_cluster(int masters, int replicas_each) {
  char err[1024];
  int rc = rts_cluster_start(&cluster, masters, replicas_each, 1000, err,
                             sizeof(err));
  cr_assert_eq(rc, 0, "%s", err);
}

/* Options with the URL of node i (any node is a seed). */
static void cluster_options(rt_options_t *o, char *url, size_t cap, int i) {
  rtt_options(o);
  snprintf(url, cap, "redis://127.0.0.1:%d", node_port(i));
  o->url = url;
}

/* The slot of resource name's keys. */
static int name_slot(const char *name) {
  char key[256];
  size_t n = rtt_key(key, sizeof(key), rtt_prefix(), name, strlen(name), 'h');
  return rt__key_slot(key, n);
}

static int name_owner(const char *name) {
  return rts_cluster_slot_owner(&cluster, 0, name_slot(name));
}

static int granted(void *arg) {
  const rtt_req *r = arg;
  return r->calls > 0;
}

static void expect_grant(uv_loop_t *loop, rtt_req *r, int64_t max_ms,
                         const char *what) {
  rtt_run_until_fn(loop, granted, r, max_ms);
  cr_assert_eq(r->calls, 1, "%s: not granted in %lld ms", what,
               (long long)max_ms);
  cr_assert_eq(r->status, 0, "%s: %s", what, rt_strerror(r->status));
}

/* Client ids' shard channel of slot, as the scripts publish to it. */
static long long shard_subscribers(int port, const rt_client_t *c, int slot) {
  char tag[RT__SLOT_TAG_LEN + 1], chan[256];
  rt__slot_tag(slot, tag);
  snprintf(chan, sizeof(chan), "%s:{%s}:%s", rtt_prefix(), tag,
           rt_client_id(c));
  redisReply *r = rts_command(port, "PUBSUB SHARDNUMSUB %s", chan);
  cr_assert(r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2);
  long long n = r->element[1]->integer;
  freeReplyObject(r);
  return n;
}

#define SPREAD 24

Test(cluster, locks_and_handoffs_on_resources_of_every_shard) {
  uv_loop_t loop;
  rtt_client a, b;
  rt_options_t o;
  char url[64], names[SPREAD][16];
  rtt_req ra[SPREAD], rb[SPREAD];
  int per_master[RTS_MAX_MASTERS] = {0};
  start_cluster(3, 1);
  uv_loop_init(&loop);
  cluster_options(&o, url, sizeof(url), 1);
  rtt_open_ready(&a, &loop, &o);
  rtt_open_ready(&b, &loop, &o);
  memset(ra, 0, sizeof(ra));
  memset(rb, 0, sizeof(rb));

  for (int i = 0; i < SPREAD; i++) {
    snprintf(names[i], sizeof(names[i]), "spread-%d", i);
    int owner = name_owner(names[i]);
    cr_assert(owner >= 0 && owner < cluster.nmasters);
    per_master[owner]++;
    rtt_acquire(&loop, a.c, names[i], 20000, &ra[i]);
    cr_assert_eq(rtt_wait(b.c, names[i], 20000, 20000, &rb[i]), 0);
  }
  for (int m = 0; m < cluster.nmasters; m++)
    cr_assert_gt(per_master[m], 0, "no resource on master %d", m);
  /* Every wait is queued behind a's lock, on the shard of its slot. */
  for (int i = 0; i < SPREAD; i++) {
    int owner = name_owner(names[i]);
    redisContext *rc = rtt_redis_at(node_port(owner));
    rtt_run_until_queued(&loop, rc, names[i], 2); /* holder and b */
    cr_assert_eq(shard_subscribers(node_port(owner), b.c, name_slot(names[i])),
                 1);
    rtt_redis_close(rc);
    cr_assert_eq(rb[i].calls, 0);
  }
  for (int i = 0; i < SPREAD; i++)
    cr_assert_eq(rtt_signal(&ra[i]), 0);
  for (int i = 0; i < SPREAD; i++) {
    expect_grant(&loop, &rb[i], 5000, names[i]);
    cr_assert_gt(rb[i].fence, ra[i].fence);
    rtt_release(&loop, &rb[i], 0);
  }
  rtt_close(&a);
  rtt_close(&b);
  rtt_loop_finish(&loop);
}

Test(cluster, a_dead_waiter_on_a_shard_is_skipped) {
  uv_loop_t loop, dead_loop;
  rtt_client a, dead, c;
  rt_options_t o;
  char url[64];
  rtt_req ra, rd, rc;
  start_cluster(3, 0);
  uv_loop_init(&loop);
  uv_loop_init(&dead_loop);
  cluster_options(&o, url, sizeof(url), 0);
  rtt_open_ready(&a, &loop, &o);
  rtt_open_ready(&dead, &dead_loop, &o);
  rtt_open_ready(&c, &loop, &o);
  memset(&ra, 0, sizeof(ra));
  memset(&rd, 0, sizeof(rd));
  memset(&rc, 0, sizeof(rc));
  const char *name = "dead-waiter";
  int owner = name_owner(name);
  redisContext *adm = rtt_redis_at(node_port(owner));

  rtt_acquire(&loop, a.c, name, 20000, &ra);
  cr_assert_eq(rtt_wait(dead.c, name, 20000, 20000, &rd), 0);
  rtt_run_until_queued(&dead_loop, adm, name, 2);
  cr_assert_eq(rtt_wait(c.c, name, 20000, 20000, &rc), 0);
  rtt_run_until_queued(&loop, adm, name, 3);
  /* The dead client's loop never runs again until the end: its shard
   * subscription, once killed, stays gone. */
  cr_assert(rtt_kill_conn(adm, "sub", rt_client_id(dead.c)));
  cr_assert_eq(shard_subscribers(node_port(owner), dead.c, name_slot(name)),
               0);

  uint64_t t0 = rtt_now_ms();
  cr_assert_eq(rtt_signal(&ra), 0);
  expect_grant(&loop, &rc, 3000, "the live waiter behind a dead one");
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
