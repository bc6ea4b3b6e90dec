/* Stalled servers (CLIENT PAUSE, DEBUG SLEEP), on a private redis-server:
 * command timeouts shorter and longer than the stall, the client's
 * recovery after one, and a wait deadline that passes during one; and a
 * stalled client that hears its grant after the lease ended. */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "redturn.h"
#include "rt_test.h"

RTT_LOOP_SUITE(stalls, 60);

/* Send a command on a synchronous connection without waiting for the
 * reply (for commands that stall the server). */
static void send_only(redisContext *rc, const char *cmd) {
  int done = 0;
  cr_assert_eq(redisAppendCommand(rc, cmd), REDIS_OK);
  while (!done)
    cr_assert_eq(redisBufferWrite(rc, &done), REDIS_OK);
}

static void read_reply(redisContext *rc) {
  void *r = NULL;
  cr_assert_eq(redisGetReply(rc, &r), REDIS_OK);
  freeReplyObject(r);
}

/* Client s has a command timeout shorter than the stall, client l a longer
 * one. The stall is a CLIENT PAUSE or a DEBUG SLEEP of 2 s: long enough
 * that the queries, sent after this process may have waited its turn for
 * the CPU, still meet it. A query on s fails with RT_ETIMEDOUT, the same
 * query on l waits it out; waits and releases survive on both.
 * holder_short says which client holds the lock (and releases during the
 * stall) and which waits. */
static void stall_test(const char *stall, int64_t stall_ms, int holder_short) {
  rtt_private p;
  rtt_client cs, cl;
  rtt_req rh = {0}, rw = {0};
  rtt_answer qs = {0}, ql = {0};
  rtt_private_start(&p, NULL);
  p.opts.command_timeout_ms = 200;
  rtt_open_ready(&cs, &loop, &p.opts);
  p.opts.command_timeout_ms = 3000;
  rtt_open_ready(&cl, &loop, &p.opts);
  rtt_client *holder = holder_short ? &cs : &cl;
  rtt_client *waiter = holder_short ? &cl : &cs;
  redisContext *adm = p.adm;

  rtt_acquire(&loop, holder->c, "x", 30000, &rh);
  rtt_wait_queued(&loop, waiter->c, "x", 30000, &rw);
  uint64_t t0 = rtt_now_ms();
  send_only(adm, stall);
  /* CLIENT PAUSE answers at once: its answer proves the pause began
   * before the queries. DEBUG SLEEP answers when it ends. */
  int paused = strncmp(stall, "CLIENT PAUSE", 12) == 0;
  if (paused)
    read_reply(adm);
  else
    rtt_sleep_ms(20); /* the stall has begun */
  cr_assert_eq(rt_locked(cs.c, "x", 1, rtt_locked_cb, &qs), 0);
  cr_assert_eq(rt_locked(cl.c, "x", 1, rtt_locked_cb, &ql), 0);
  cr_assert_eq(rtt_signal(&rh), 0);
  RTT_RUN_UNTIL(&loop, qs.calls && ql.calls && rh.sig_calls && rw.calls, 15000);
  if (!paused)
    read_reply(adm);

  cr_assert_eq(qs.calls, 1, "the short-timeout query never returned");
  cr_assert_eq(qs.status, RT_ETIMEDOUT, "short-timeout query: %s",
               rt_err_name(qs.status));
  cr_assert_lt(qs.at_ms - t0, (uint64_t)stall_ms,
               "the timeout came after the stall");
  cr_assert_eq(ql.calls, 1, "the long-timeout query never returned");
  cr_assert_eq(ql.status, 0, "long-timeout query: %s", rt_err_name(ql.status));
  cr_assert_eq(ql.value, 1);
  cr_assert_geq(ql.at_ms - t0, (uint64_t)stall_ms - 100,
                "the stall did not stall");
  cr_assert_eq(rh.sig_calls, 1, "the release never returned");
  cr_assert_eq(rh.sig_status, 0, "release during the stall: %s",
               rt_err_name(rh.sig_status));
  rtt_expect_grant(&loop, &rw, 1000, "waiter across the stall");
  cr_assert_gt(rw.fence, rh.fence);
  RTT_RUN_UNTIL(&loop, rtt_reconnects(cs.c) >= 1, 5000);
  cr_assert_geq(rtt_reconnects(cs.c), 1,
                "the short-timeout client did not reconnect");
  cr_assert_eq(rtt_reconnects(cl.c), 0, "the long-timeout client reconnected");
  rtt_release(&loop, &rw, 0);

  rtt_close_all(&loop, &cs, &cl, NULL);
  rtt_private_stop(&p);
}

Test(stalls, client_pause_with_short_timeout_holder_and_long_timeout_waiter) {
  stall_test("CLIENT PAUSE 2000", 2000, 1);
}

Test(stalls, client_pause_with_long_timeout_holder_and_short_timeout_waiter) {
  stall_test("CLIENT PAUSE 2000", 2000, 0);
}

Test(stalls, debug_sleep_with_short_timeout_holder_and_long_timeout_waiter) {
  stall_test("DEBUG SLEEP 2", 2000, 1);
}

Test(stalls, debug_sleep_with_long_timeout_holder_and_short_timeout_waiter) {
  stall_test("DEBUG SLEEP 2", 2000, 0);
}

/* A client whose command timeout is shorter than a DEBUG SLEEP: inspect
 * and extend time out on time (not when the server answers), the client
 * reconnects by itself, and its held lock is still held afterwards. */
Test(stalls, a_stalled_server_times_commands_out_and_the_client_recovers) {
  rtt_server srv;
  rtt_server_start(&srv, NULL);
  rt_options_t o;
  rtt_client a;
  rtt_req held = {0}, fresh = {0};
  rtt_snapshot in = {0};
  rtt_options_at(&o, srv.port);
  o.command_timeout_ms = 300;
  rtt_open_ready(&a, &loop, &o);
  rtt_acquire(&loop, a.c, "held", 20000, &held);

  /* Stall the server for 2 s from another connection. */
  redisContext *dbg = rtt_redis_at(srv.port);
  send_only(dbg, "DEBUG SLEEP 2");
  rtt_sleep_ms(150);

  uv_update_time(&loop); /* the loop slept too: its clock must not lag */
  uint64_t t0 = rtt_now_ms();
  cr_assert_eq(rt_inspect(a.c, "held", 4, 5, rtt_inspect_cb, &in), 0);
  cr_assert_eq(rtt_extend(&held, 20000), 0);
  cr_assert(rtt_run_until(&loop, &in.calls, 1, 5000));
  cr_assert(rtt_run_until(&loop, &held.ext_calls, 1, 5000));
  uint64_t took = rtt_now_ms() - t0;
  cr_assert_eq(in.status, RT_ETIMEDOUT, "inspect: %s", rt_err_name(in.status));
  cr_assert_eq(held.ext_status, RT_ETIMEDOUT, "extend: %s",
               rt_err_name(held.ext_status));
  cr_assert_geq(took, 250, "timed out after %llu ms, before the 300 ms",
                (unsigned long long)took);
  cr_assert_lt(took, 1700,
               "timed out only after %llu ms: waited for the "
               "server instead",
               (unsigned long long)took);

  /* The server wakes up; the client reconnects on its own. */
  read_reply(dbg);
  rtt_redis_close(dbg);

  cr_assert_eq(rtt_wait(a.c, "fresh", 5000, RT_FOREVER, &fresh), 0);
  cr_assert(rtt_run_until(&loop, &fresh.calls, 1, 8000),
            "no grant after the server came back");
  cr_assert_eq(fresh.status, 0, "wait after recovery: %s",
               rt_err_name(fresh.status));
  memset(&in, 0, sizeof(in));
  cr_assert_eq(rt_inspect(a.c, "held", 4, 5, rtt_inspect_cb, &in), 0);
  cr_assert(rtt_run_until(&loop, &in.calls, 1, 5000));
  cr_assert_eq(in.status, 0);
  cr_assert_str_eq(in.holder, held.id, "the held lock was lost meanwhile");
  rtt_release(&loop, &held, 0);
  rtt_release(&loop, &fresh, 0);
  rtt_close(&a);
  rtt_loop_finish(&loop);
}

/* A wait whose deadline passes during a stall must end at its deadline,
 * not when the server answers again. */
Test(stalls, a_deadline_during_a_pause_is_reported_on_time) {
  rtt_private p;
  rtt_client a, w;
  rtt_req ra = {0}, rw = {0};
  rtt_private_start(&p, NULL);
  rtt_open_ready(&a, &loop, &p.opts);
  rtt_open_ready(&w, &loop, &p.opts);
  redisContext *adm = p.adm;
  rtt_acquire(&loop, a.c, "x", 30000, &ra);
  cr_assert_eq(rtt_wait(w.c, "x", 30000, 300, &rw), 0);
  uint64_t t0 = rtt_now_ms();
  RTT_RUN_UNTIL(&loop, rt_lock_position(rw.lock) > 0, 1000);
  /* The pause begins after t_pause: a callback that waits for the server
   * comes 2500 ms after it or later. A wait's timer on time comes 300 ms
   * after t0; a loaded machine may run the process later, but not that
   * late. */
  uint64_t t_pause = rtt_now_ms();
  rtt_ok(adm, "CLIENT PAUSE 2500");
  RTT_RUN_UNTIL(&loop, rw.calls > 0, 5000);
  cr_assert_eq(rw.calls, 1);
  cr_assert_eq(rw.status, RT_EWAITTIMEOUT, "%s", rt_err_name(rw.status));
  cr_assert_geq(rw.at_ms - t0, 250, "RT_EWAITTIMEOUT after %llu ms",
                (unsigned long long)(rw.at_ms - t0));
  cr_assert_lt(
      rw.at_ms, t_pause + 2500,
      "RT_EWAITTIMEOUT came %llu ms after rt_wait (timeout 300 ms), at the "
      "end of the 2500 ms pause: the callback waited for the server",
      (unsigned long long)(rw.at_ms - t0));
  rtt_run_for(&loop, 2500);
  /* The cancel reached Redis once the pause ended: only the holder is
   * left (a canceled entry may stay in q until it reaches the front, but
   * it is no live waiter any more). */
  cr_assert_eq(rtt_qlen(adm, rtt_prefix(), "x", 1), 1,
               "the canceled waiter is still live");
  rtt_release(&loop, &ra, 0);
  cr_assert_eq(rtt_qlen(adm, rtt_prefix(), "x", 1), 0);
  cr_assert_eq(rtt_keys_left(adm, "x"), 0, "the canceled entry stayed");
  rtt_close_all(&loop, &a, &w, NULL);
  rtt_private_stop(&p);
}

/* A stalled client: its loop does not run while its grant's lease runs
 * out (a process starved of CPU, stopped in a debugger). The notice is
 * read after the lease ended: the grant is not reported (never a lease
 * that may be over), counted in late_grants, and asked about again, which
 * grants it anew as the only waiter. */
Test(stalls, a_grant_heard_after_its_lease_is_counted_and_asked_again) {
  rtt_private p;
  rtt_client a, w;
  uv_loop_t other;
  rtt_req ra = {0}, rw = {0};
  rtt_private_start(&p, NULL);
  cr_assert_eq(uv_loop_init(&other), 0);
  rtt_open_ready(&a, &loop, &p.opts);
  rtt_open_ready(&w, &other, &p.opts); /* its own loop: stalled at will */
  rtt_acquire(&loop, a.c, "late", 30000, &ra);
  rtt_wait_queued(&other, w.c, "late", 150, &rw);
  /* The handoff to w: its notice waits in w's socket, unread. */
  rtt_release(&loop, &ra, 0);
  rtt_sleep_ms(400);
  rt_stats_t st;
  rt_client_stats(w.c, &st);
  cr_assert_eq(st.late_grants, 0);
  uv_update_time(&other);
  rtt_expect_grant(&other, &rw, 5000, "the waiter asked again");
  rt_client_stats(w.c, &st);
  cr_assert_eq(st.late_grants, 1, "late_grants %llu",
               (unsigned long long)st.late_grants);
  cr_assert_eq(st.grants, 1, "the late grant was reported too");
  cr_assert_gt(rt_lock_lease_left_ms(rw.lock), 100,
               "the grant reported is the fresh one");
  rtt_release(&other, &rw, 0);
  rtt_close_all(&loop, &a, NULL);
  rtt_close_all(&other, &w, NULL);
  rtt_private_stop(&p);
}
