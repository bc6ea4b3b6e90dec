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

/* Turn the one-master cluster down (a slot it stops serving, the one after
 * name's) or back up, and wait until the node answers name's key that
 * way. */
static void set_down(int port, const char *name, int down) {
  redisContext *adm = rtt_redis_at(port);
  rtt_ok(adm, "CLUSTER %s %d", down ? "DELSLOTS" : "ADDSLOTS",
         (rtt_cluster_slot(name) + 1) % 16384);
  rtt_redis_close(adm);
  uint64_t t0 = rtt_now_ms();
  while (refuses(port, name) != down && rtt_now_ms() - t0 < 10000)
    rtt_sleep_ms(20);
  cr_assert_eq(refuses(port, name), down, "the node never answered %s",
               down ? "CLUSTERDOWN" : "again");
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
  set_down(port, name, 1);
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

/* A master's failover keeps a cluster down for seconds, far longer than
 * the command timeout that bounds a call's redirects. A wait goes on
 * retrying CLUSTERDOWN for as long as it lasts (it has its own deadline):
 * it is granted once the cluster is back, not failed with RT_EREDIS once
 * the bound is spent. */
Test(cluster_down, a_wait_outlasts_a_cluster_down_past_the_command_timeout) {
  uv_loop_t loop;
  rtt_client a;
  rt_options_t o;
  char url[64];
  rtt_req held, waiter;
  const char *name = "downwait";
  rtt_cluster_start(&cluster, 1, 0);
  int port = rtt_cluster_port(&cluster, 0);
  uv_loop_init(&loop);
  rtt_cluster_options(&o, url, sizeof(url), &cluster, 0);
  o.command_timeout_ms = 200; /* a bound of 20 redirects, about 1 s */
  rtt_open_ready(&a, &loop, &o);
  memset(&held, 0, sizeof(held));
  memset(&waiter, 0, sizeof(waiter));
  rtt_acquire(&loop, a.c, name, 30000, &held);
  set_down(port, name, 1);
  cr_assert_eq(rtt_wait(a.c, name, 30000, 60000, &waiter), 0);
  rtt_run_for(&loop, 2500);
  cr_assert_eq(waiter.calls, 0, "the wait ended (%s: %s) in a cluster down",
               rt_err_name(waiter.status), rt_client_last_error(a.c));
  set_down(port, name, 0);
  rtt_release(&loop, &held, 0);
  cr_assert(rtt_run_until(&loop, &waiter.calls, 1, 30000),
            "the wait did not end once the cluster was back");
  cr_assert_eq(waiter.status, 0, "the wait failed with %s (%s)",
               rt_err_name(waiter.status), rt_client_last_error(a.c));
  rtt_release(&loop, &waiter, 0);
  rtt_close(&a);
  rtt_loop_finish(&loop);
}

/* A release has no deadline of its own: in a cluster down (a node cut off
 * from the majority answers CLUSTERDOWN for as long as the cut lasts) it
 * ends after about the command timeout's worth of retries, with Redis's
 * word for why, so rt_blocking_signal() and a close never hang on it. */
Test(cluster_down, a_release_in_a_cluster_down_ends_after_its_retries) {
  uv_loop_t loop;
  rtt_client a;
  rt_options_t o;
  char url[64];
  rtt_req held;
  const char *name = "downbound";
  rtt_cluster_start(&cluster, 1, 0);
  int port = rtt_cluster_port(&cluster, 0);
  uv_loop_init(&loop);
  rtt_cluster_options(&o, url, sizeof(url), &cluster, 0);
  o.command_timeout_ms = 200; /* a bound of 20 redirects, about 1 s */
  rtt_open_ready(&a, &loop, &o);
  memset(&held, 0, sizeof(held));
  rtt_acquire(&loop, a.c, name, 30000, &held);
  set_down(port, name, 1);
  uint64_t t0 = rtt_now_ms();
  cr_assert_eq(rtt_signal(&held), 0);
  cr_assert(rtt_run_until(&loop, &held.sig_calls, 1, 20000),
            "the release did not end in a cluster down");
  uint64_t took = rtt_now_ms() - t0;
  cr_assert_eq(held.sig_status, RT_EREDIS, "the release ended with %s",
               rt_err_name(held.sig_status));
  cr_assert(strstr(rt_client_last_error(a.c), "CLUSTERDOWN") != NULL,
            "the error does not say CLUSTERDOWN: %s",
            rt_client_last_error(a.c));
  cr_assert_geq(took, 900, "the release gave up after %llu ms",
                (unsigned long long)took);
  rtt_close(&a);
  rtt_loop_finish(&loop);
}
