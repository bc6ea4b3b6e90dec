/* Sentinels that name different masters at once, as during a failover
 * some Sentinels have heard of the new master and some have not. Each of
 * the client's two connections asks the Sentinels on its own, so each may
 * get a different answer: the client must not count itself ready while its
 * command connection queues on one server and its subscriber connection
 * listens on another (the grant notices of that queue would reach nobody).
 *
 * Made deterministic with two single-Sentinel groups that monitor two
 * separate servers under one master name, at config-epochs 1 and 5. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "rt_test.h"
#include "rttopo.h"

#define NAME "rtviews"

static rts_replicated old_master, new_master;
static rts_sentinels lagging, informed;

static void stop_all(void) {
  if (lagging.n > 0)
    kill(lagging.s[0].pid, SIGCONT);
  rts_sentinels_stop(&lagging);
  rts_sentinels_stop(&informed);
  rts_replicated_stop(&old_master);
  rts_replicated_stop(&new_master);
  rtt_cleanup();
}

static uv_loop_t loop;
static void setup(void) { cr_assert_eq(uv_loop_init(&loop), 0); }
TestSuite(sentinel_views, .init = setup, .fini = stop_all, .timeout = 120);

static void start_group(rts_replicated *g, rts_sentinels *s, uint64_t epoch) {
  char err[1024];
  rts_sentinel_options o = {
      .master_name = NAME, .quorum = 1, .config_epoch = epoch};
  cr_assert_eq(rts_replicated_start(g, 0, err, sizeof(err)), 0, "%s", err);
  cr_assert_eq(
      rts_sentinels_start(s, g->primary.port, 1, 0, &o, err, sizeof(err)), 0,
      "%s", err);
}

static void on_connect(rt_client_t *c, int status, void *data) {
  (void)c;
  *(int *)data = status == 0 ? 1 : -1;
}

/* Both connections of client id are on the server of rc (1), else 0. */
static int both_on(redisContext *rc, const char *id) {
  return rtt_conn_id(rc, "cmd", id) >= 0 && rtt_conn_id(rc, "sub", id) >= 0;
}

Test(sentinel_views, both_connections_end_on_the_newer_master) {
  start_group(&old_master, &lagging, 1);
  start_group(&new_master, &informed, 5);
  char url[256];
  snprintf(url, sizeof(url), "redis-sentinel://127.0.0.1:%d,127.0.0.1:%d#%s",
           lagging.s[0].port, informed.s[0].port, NAME);
  rt_options_t o;
  rt_options_init(&o);
  o.url = url;
  o.prefix = rtt_prefix();
  o.script_path = rtt_script_path();
  o.connect_timeout_ms = 900; /* 300 ms per Sentinel asked */
  rt_client_t *c = NULL;
  int connected = 0;
  cr_assert_eq(rt_client_open(&loop, &o, on_connect, &connected, &c), 0);
  RTT_RUN_UNTIL(&loop, connected != 0, 10000);
  cr_assert_eq(connected, 1, "connect: %s", rt_client_last_error(c));
  redisContext *ra = rtt_redis_at(old_master.primary.port);
  redisContext *rb = rtt_redis_at(new_master.primary.port);
  const char *id = rt_client_id(c);
  cr_assert(both_on(ra, id), "the first Sentinel's master has both");

  /* The lagging Sentinel goes quiet and the subscriber connection is
   * lost: it asks again and only the informed Sentinel answers. */
  kill(lagging.s[0].pid, SIGSTOP);
  cr_assert(rtt_kill_conn(ra, "sub", id));
  RTT_RUN_UNTIL(&loop, rtt_conn_id(rb, "sub", id) >= 0, 10000);
  cr_assert_geq(rtt_conn_id(rb, "sub", id), 0,
                "the subscriber reached the epoch-5 master");
  /* The command connection, on the epoch-1 master, must follow. */
  RTT_RUN_UNTIL(&loop, both_on(rb, id), 10000);
  cr_assert(both_on(rb, id),
            "the command connection stayed on the epoch-1 master while the "
            "subscriber listens on the epoch-5 one");
  cr_assert_lt(rtt_conn_id(ra, "cmd", id), 0);

  /* And a handoff reaches the waiter there, by notice. */
  rtt_req held = {0}, waiter = {0};
  cr_assert_eq(rtt_wait(c, "r", 10000, 5000, &held), 0);
  RTT_RUN_UNTIL(&loop, held.calls > 0, 5000);
  cr_assert_eq(held.status, 0);
  cr_assert_eq(rtt_wait(c, "r", 10000, 5000, &waiter), 0);
  rtt_run_until_queued(&loop, rb, "r", 2);
  uint64_t t0 = rtt_now_ms();
  cr_assert_eq(rtt_signal(&held), 0);
  RTT_RUN_UNTIL(&loop, waiter.calls > 0, 5000);
  cr_assert_eq(waiter.status, 0);
  cr_assert_lt(waiter.at_ms - t0, 1000, "the handoff came by notice");
  cr_assert_eq(rtt_signal(&waiter), 0);
  RTT_RUN_UNTIL(&loop, waiter.sig_calls > 0, 5000);
  rtt_redis_close(ra);
  rtt_redis_close(rb);
  rt_client_close(c, NULL, NULL);
  rtt_loop_finish(&loop);
}
