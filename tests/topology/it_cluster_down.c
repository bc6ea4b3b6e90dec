/* The client on a Redis Cluster that answers CLUSTERDOWN (tools/rttopo.h,
 * one master; a slot it stops serving turns its cluster_state to fail, as
 * cluster-require-full-coverage yes, the default, wants): a call that
 * waits out the retry answers is still the client's, so a close completes
 * it, once, and frees it. Every server is private and stopped by pid. */
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

TestSuite(cluster_down, .fini = stop_all, .timeout = 120);

/* 1: the node refuses name's key with CLUSTERDOWN. */
static int refuses(int port, const char *name) {
  char key[256];
  rtt_key(key, sizeof(key), rtt_prefix(), name, strlen(name), 'h');
  redisContext *rc = rtt_redis_at(port);
  redisReply *r = rtt_cmd(rc, "EXISTS %s", key);
  int down =
      r->type == REDIS_REPLY_ERROR && strncmp(r->str, "CLUSTERDOWN", 11) == 0;
  freeReplyObject(r);
  rtt_redis_close(rc);
  return down;
}

/* A release sent while the cluster is down is resent every
 * RT__CLUSTER_RETRY_MS for about the command timeout; between two tries
 * it is in no connection. Closing the client then must still end it: its
 * callback runs once and its memory goes (the ASan tree checks). */
Test(cluster_down,
     a_release_waiting_out_clusterdown_ends_when_the_client_closes) {
  uv_loop_t loop;
  rtt_client a;
  rt_options_t o;
  char url[64];
  rtt_req r;
  const char *name = "downrelease";
  rtt_cluster_start(&cluster, 1, 0);
  int port = rtt_cluster_port(&cluster, 0);
  uv_loop_init(&loop);
  rtt_cluster_options(&o, url, sizeof(url), &cluster, 0);
  rtt_open_ready(&a, &loop, &o);
  memset(&r, 0, sizeof(r));
  rtt_acquire(&loop, a.c, name, 30000, &r);
  redisContext *adm = rtt_redis_at(port);
  rtt_ok(adm, "CLUSTER DELSLOTS %d", (rtt_cluster_slot(name) + 1) % 16384);
  rtt_redis_close(adm);
  uint64_t t0 = rtt_now_ms();
  while (!refuses(port, name) && rtt_now_ms() - t0 < 10000)
    rtt_sleep_ms(20);
  cr_assert(refuses(port, name), "the node never answered CLUSTERDOWN");
  cr_assert_eq(rtt_signal(&r), 0);
  rtt_run_for(&loop, 300);
  cr_assert_eq(r.sig_calls, 0, "the release ended (%s) in a cluster down",
               rt_err_name(r.sig_status));
  rtt_close(&a);
  rtt_loop_finish(&loop);
  cr_assert_eq(a.closes, 1);
  cr_assert_eq(r.sig_calls, 1,
               "the release's callback ran %d times by the close's end",
               r.sig_calls);
  cr_assert_neq(r.sig_status, 0, "a release Redis refused reported success");
}
