/* Redis restarted while waits are pending, on a private redis-server:
 * with AOF the queue is kept, without persistence the waits are queued
 * again, and a slow AOF load (-LOADING) ends no wait. */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "redturn.h"
#include "rt_test.h"

RTT_LOOP_SUITE(restarts, 60);

static const char *const aof_args[] = {"--appendonly", "yes", "--appendfsync",
                                       "always", NULL};

/* A private server started with args, a holding "x" and w queued behind
 * it, then the server restarted. */
static void hold_wait_restart(rtt_server *s, const char *const *args,
                              rtt_client *a, rtt_client *w, rtt_req *ra,
                              rtt_req *rw) {
  rt_options_t o;
  rtt_server_start(s, args);
  rtt_options_at(&o, s->port);
  rtt_open_ready(a, &loop, &o);
  rtt_open_ready(w, &loop, &o);
  rtt_acquire(&loop, a->c, "x", 30000, ra);
  rtt_wait_queued(&loop, w->c, "x", 30000, rw);
  rtt_server_restart(s);
}

Test(restarts, restart_with_aof_keeps_the_queue_and_waits_survive) {
  rtt_server s;
  rtt_client a, w;
  rtt_req ra = {0}, rw = {0};
  hold_wait_restart(&s, aof_args, &a, &w, &ra, &rw);
  RTT_RUN_UNTIL(&loop, rtt_reconnects(a.c) >= 1 && rtt_reconnects(w.c) >= 1,
                10000);
  cr_assert_geq(rtt_reconnects(w.c), 1);
  rtt_run_for(&loop, 200);
  cr_assert_eq(rw.calls, 0, "the wait ended: %s", rt_err_name(rw.status));
  redisContext *adm = rtt_redis_at(s.port);
  char ids[8][RTT_ID_MAX];
  cr_assert_eq(rtt_queue(adm, rtt_prefix(), "x", 1, ids, 8), 2,
               "the queue was not kept");
  cr_assert_str_eq(ids[0], ra.id);
  cr_assert_str_eq(ids[1], rw.id);
  cr_assert_eq(rtt_hfield(adm, rtt_prefix(), "x", 1, "f"), (long long)ra.fence,
               "the holder record was not kept");
  rtt_release(&loop, &ra, 0);
  rtt_expect_grant(&loop, &rw, 5000, "waiter across a restart with AOF");
  cr_assert_gt(rw.fence, ra.fence, "fences went back across the restart");
  rtt_release(&loop, &rw, 0);
  rtt_close_all(&loop, &a, &w, NULL);
  rtt_redis_close(adm);
  rtt_server_stop(&s);
}

Test(restarts, restart_without_persistence_requeues_the_waits) {
  rtt_server s;
  rtt_client a, w;
  rtt_req ra = {0}, rw = {0};
  hold_wait_restart(&s, NULL, &a, &w, &ra, &rw);
  /* The server forgot the queue: the waiter is queued again and, the
   * queue being empty, granted, while a still thinks it holds (no Redis
   * lock survives a server that lost its data). The fences do not start
   * over: they come from the server clock, so the new one is larger than
   * every fence issued before the data loss. */
  rtt_expect_grant(&loop, &rw, 10000,
                   "waiter across a restart without persistence");
  cr_assert_gt(rw.fence, ra.fence, "fence %llu after %llu: it went back",
               (unsigned long long)rw.fence, (unsigned long long)ra.fence);
  rtt_release(&loop, &ra, RT_ELOST);
  rtt_release(&loop, &rw, 0);
  rtt_close_all(&loop, &a, &w, NULL);
  rtt_server_stop(&s);
}

/* While the restarted server loads its AOF it accepts connections, answers
 * CLIENT SETNAME and SUBSCRIBE, but replies -LOADING to scripts: the
 * reconciliation must not turn that into a failed wait. */
Test(restarts, restart_with_a_slow_aof_load_keeps_waits, .timeout = 120) {
  rtt_server s;
  rtt_client a, w;
  rtt_req ra = {0}, rw = {0};
  rt_options_t o;
  const char *const args[] = {"--appendonly", "yes", NULL};
  rtt_server_start(&s, args);
  redisContext *adm = rtt_redis_at(s.port);
  /* 1.5 M keys, in batches: one DEBUG POPULATE of them all blocks the
   * server about 1.6 s on Redis 7.4 (1.0 s on 7.0), more than the
   * connection's 10 s read timeout on a loaded machine. */
  for (int i = 0; i < 15; i++)
    rtt_ok(adm, "DEBUG POPULATE 100000 %s-filler%d 16", rtt_prefix(), i);
  rtt_ok(adm, "BGREWRITEAOF");
  uint64_t end = rtt_now_ms() + 60000;
  for (;;) {
    redisReply *r = rtt_cmd(adm, "INFO persistence");
    int busy = strstr(r->str, "aof_rewrite_in_progress:1") != NULL ||
               strstr(r->str, "aof_rewrite_scheduled:1") != NULL;
    freeReplyObject(r);
    if (!busy || rtt_now_ms() > end)
      break;
    rtt_sleep_ms(50);
  }
  rtt_redis_close(adm);
  rtt_options_at(&o, s.port);
  rtt_open_ready(&a, &loop, &o);
  rtt_open_ready(&w, &loop, &o);
  rtt_acquire(&loop, a.c, "x", 60000, &ra);
  rtt_wait_queued(&loop, w.c, "x", 60000, &rw);
  uint64_t t0 = rtt_now_ms();
  rtt_server_restart_nowait(&s);
  /* Run the clients while the server loads. */
  RTT_RUN_UNTIL(&loop, rtt_server_ready(&s), 30000);
  cr_log_info("the restarted server loaded its AOF in %llu ms",
              (unsigned long long)(rtt_now_ms() - t0));
  RTT_RUN_UNTIL(&loop, rtt_reconnects(w.c) >= 1, 10000);
  rtt_run_for(&loop, 300);
  cr_assert_eq(rw.calls, 0,
               "the wait failed during the AOF load with %s (%s): the "
               "-LOADING reply to the re-enqueue ended it",
               rt_err_name(rw.status), rt_strerror(rw.status));
  rtt_release(&loop, &ra, 0);
  rtt_expect_grant(&loop, &rw, 5000, "waiter across a slow AOF load");
  rtt_release(&loop, &rw, 0);
  rtt_close_all(&loop, &a, &w, NULL);
  rtt_server_stop(&s);
}
