/* Automatic lease renewal (rt_lock_auto_renew): a renewed lock stays held
 * past many leases while another client waits, and is handed on at once
 * on release; renewal costs nothing for locks without it and stops with
 * the release; Redis refusing a renewal, or a partition outlasting the
 * lease, turns the lock LOST with one lost callback; RT_RENEW_OFF; the
 * argument errors. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "rt_test.h"
#include "rtt_proxy.h"

RTT_SUITE(renew);

/* Lost callbacks of the test's one lock, and when the last one ran. */
static int lost_calls;
static uint64_t lost_at_ms;

static void count_lost(rt_lock_t *l, void *data) {
  (void)l;
  (void)data;
  lost_calls++;
  lost_at_ms = rtt_now_ms();
}

static int is_lost(void *arg) {
  return rt_lock_state(((rtt_req *)arg)->lock) == RT_LOCK_LOST;
}

static int holder_gone(void *name) {
  return rtt_holder_field(rc, name, "f") == -1;
}

static long long evalshas(redisContext *c) { return rtt_script_calls(c); }

Test(renew, keeps_the_lock_past_several_leases_and_hands_it_on_at_release) {
  rtt_client a, b;
  rtt_req holder = {0}, waiter = {0};
  rtt_open_ready(&a, &loop, NULL);
  rtt_open_ready(&b, &loop, NULL);
  /* Asked for on the queued wait: it starts with the grant. */
  cr_assert_eq(rtt_wait(a.c, "res", 900, RT_FOREVER, &holder), 0);
  cr_assert_eq(rt_lock_auto_renew(holder.lock, 100), 0);
  cr_assert(rtt_run_until(&loop, &holder.calls, 1, 5000));
  cr_assert_eq(holder.status, 0);
  cr_assert_eq(rtt_wait(b.c, "res", 5000, RT_FOREVER, &waiter), 0);
  rtt_run_until_queued(&loop, rc, "res", 2);
  long long d0 = rtt_holder_field(rc, "res", "d");

  /* Three leases, with the waiter's watchdog armed for their ends. */
  rtt_run_for(&loop, 2700);
  cr_assert_eq(waiter.calls, 0, "the waiter got the lock while it was renewed");
  cr_assert_eq(rt_lock_state(holder.lock), RT_LOCK_HELD);
  cr_assert_eq(rtt_holder_field(rc, "res", "f"), (long long)holder.fence,
               "the fence moved: the holder was reaped");
  cr_assert_gt(rtt_holder_field(rc, "res", "d"), d0 + 2000,
               "the lease was not renewed");
  cr_assert_eq(rt_lock_lease_ms(holder.lock), 900);
  cr_assert_gt(rt_lock_lease_left_ms(holder.lock), 600);
  rt_stats_t st;
  rt_client_stats(a.c, &st);
  cr_assert_eq(st.lost, 0);

  /* The release hands it on at once, long before the lease (>= 800 ms
   * left) could have ended. */
  uint64_t t0 = rtt_now_ms();
  rtt_release(&loop, &holder, 0);
  cr_assert(rtt_run_until(&loop, &waiter.calls, 1, 5000));
  cr_assert_eq(waiter.status, 0);
  cr_assert_lt(waiter.at_ms - t0, 600, "granted %llu ms after the release",
               (unsigned long long)(waiter.at_ms - t0));
  cr_assert_gt(waiter.fence, holder.fence);
  rtt_release(&loop, &waiter, 0);
  rtt_close(&a);
  rtt_close(&b);
  rtt_loop_finish(&loop);
}

/* On a private server, so that every EVALSHA counted is ours. */
Test(renew, costs_nothing_without_it_and_stops_at_release) {
  rtt_server s;
  rtt_server_start(&s, NULL);
  redisContext *pc = rtt_redis_at(s.port);
  rt_options_t o;
  rtt_options_at(&o, s.port);
  rtt_client a;
  rtt_req plain = {0}, renewed = {0};
  rtt_open_ready(&a, &loop, &o);

  /* Without renewal a held lock costs no call while held. */
  rtt_acquire(&loop, a.c, "plain", 5000, &plain);
  long long n0 = evalshas(pc);
  rtt_run_for(&loop, 600);
  cr_assert_eq(evalshas(pc), n0, "calls while holding a lock without renewal");
  rtt_release(&loop, &plain, 0);
  cr_assert_eq(evalshas(pc), n0 + 1);

  /* With renewal every 100 ms: about ten extends in a second. The lease
   * is 1.5 s: with 300 ms, a process of the ASan tree beside two other
   * test commands once went unscheduled past it and lost the lock. */
  rtt_acquire(&loop, a.c, "renewed", 1500, &renewed);
  cr_assert_eq(rt_lock_auto_renew(renewed.lock, 100), 0);
  long long n1 = evalshas(pc);
  rtt_run_for(&loop, 1000);
  long long extends = evalshas(pc) - n1;
  cr_assert(extends >= 4 && extends <= 20, "%lld renewals in 1 s", extends);
  cr_assert_eq(rt_lock_state(renewed.lock), RT_LOCK_HELD);

  /* After the release: not one more call. */
  rtt_release(&loop, &renewed, 0);
  long long n2 = evalshas(pc);
  rtt_run_for(&loop, 800);
  cr_assert_eq(evalshas(pc), n2, "renewals after the release");

  rtt_close(&a);
  rtt_loop_finish(&loop);
  rtt_redis_close(pc);
  rtt_server_stop(&s);
}

Test(renew, a_renewal_refused_by_redis_turns_the_lock_lost_once) {
  rtt_client a;
  rtt_req holder = {0};
  rtt_open_ready(&a, &loop, NULL);
  lost_calls = 0;
  rtt_acquire(&loop, a.c, "res", 600, &holder);
  cr_assert_eq(rt_lock_on_lost(holder.lock, count_lost), 0);
  cr_assert_eq(rt_lock_auto_renew(holder.lock, 100), 0);
  rtt_run_for(&loop, 300);
  cr_assert_eq(rt_lock_state(holder.lock), RT_LOCK_HELD);

  /* Someone deletes the holder key: the next renewal learns the lock is
   * not ours, well before the local lease end (>= 500 ms away). */
  char key[128];
  size_t klen = rtt_key(key, sizeof(key), rtt_prefix(), "res", 3, 'h');
  uint64_t t0 = rtt_now_ms();
  cr_assert_eq(rtt_int(rc, "DEL %b", key, klen), 1);
  cr_assert(rtt_run_until_fn(&loop, is_lost, &holder, 3000));
  cr_assert_eq(lost_calls, 1);
  cr_assert_lt(lost_at_ms - t0, 450, "lost %llu ms after the DEL",
               (unsigned long long)(lost_at_ms - t0));
  cr_assert_eq(rt_lock_lease_left_ms(holder.lock), 0);

  /* No more renewals, no second callback. */
  rtt_run_for(&loop, 500);
  cr_assert_eq(lost_calls, 1);
  rt_stats_t st;
  rt_client_stats(a.c, &st);
  cr_assert_eq(st.lost, 1);
  cr_assert_eq(rt_lock_auto_renew(holder.lock, RT_RENEW_DEFAULT), RT_ELOST);
  rtt_release(&loop, &holder, RT_ELOST);
  rt_client_stats(a.c, &st);
  cr_assert_eq(st.lost, 1, "one lost lock counted %llu times",
               (unsigned long long)st.lost);
  rtt_close(&a);
  rtt_loop_finish(&loop);
}

/* A client a through a new proxy, holding name with a lease of ttl_ms. */
static rtt_proxy *hold_through_proxy(rtt_client *a, rtt_req *holder,
                                     const char *name, int64_t ttl_ms) {
  rtt_proxy *px = rtt_proxy_start(rtt_port());
  rt_options_t o;
  rtt_options_at(&o, rtt_proxy_port(px));
  memset(holder, 0, sizeof(*holder));
  rtt_open_ready(a, &loop, &o);
  rtt_acquire(&loop, a->c, name, ttl_ms, holder);
  return px;
}

Test(renew, a_partition_longer_than_the_lease_turns_the_lock_lost_once) {
  rtt_client a;
  rtt_req holder;
  lost_calls = 0;
  rtt_proxy *px = hold_through_proxy(&a, &holder, "res", 600);
  cr_assert_eq(rt_lock_on_lost(holder.lock, count_lost), 0);
  cr_assert_eq(rt_lock_auto_renew(holder.lock, RT_RENEW_DEFAULT), 0);
  rtt_run_for(&loop, 700);
  cr_assert_eq(rt_lock_state(holder.lock), RT_LOCK_HELD);

  /* Redis becomes unreachable: renewals go out but get no answer. The
   * lock turns LOST by the local deadline, at most a lease after the last
   * renewal that got through. */
  uint64_t t0 = rtt_now_ms();
  rtt_proxy_set(px, RTT_ALL, RTT_BOTH, RTT_HOLD, 0);
  cr_assert(rtt_run_until_fn(&loop, is_lost, &holder, 3000));
  cr_assert_eq(lost_calls, 1);
  cr_assert_lt(lost_at_ms - t0, 850, "lost %llu ms into the partition",
               (unsigned long long)(lost_at_ms - t0));
  rtt_run_for(&loop, 300);
  cr_assert_eq(lost_calls, 1);

  /* Heal (dropping what was held); the release goes through after the
   * reconnect. Redis ended the lease by now: the lock was not ours. */
  rtt_proxy_cut(px, RTT_ALL);
  rtt_proxy_reset(px);
  cr_assert_eq(rtt_signal(&holder), 0);
  cr_assert(rtt_run_until(&loop, &holder.sig_calls, 1, 10000));
  cr_assert(holder.sig_status == RT_ELOST || holder.sig_status == 0, "%s",
            rt_err_name(holder.sig_status));
  cr_assert_eq(lost_calls, 1);
  cr_assert_eq(rtt_holder_field(rc, "res", "f"), -1,
               "the holder key outlived the lease");
  rtt_close(&a);
  rtt_loop_finish(&loop);
  rtt_proxy_stop(px);
}

/* Redis extends the lease, but its answer is held until the lock turned
 * LOST by the client's clock: the extend reports RT_ELOST, not success on
 * a lock the user was told is lost (a multi-lock's check before its
 * report relies on it), and the release frees the lease Redis extended. */
Test(renew, an_extend_answered_after_the_lock_turned_lost_reports_lost) {
  rtt_client a;
  rtt_req holder;
  rtt_proxy *px = hold_through_proxy(&a, &holder, "late-extend", 400);
  rtt_proxy_set(px, RTT_ALL, RTT_DOWN, RTT_HOLD, 0);
  cr_assert_eq(rt_extend(holder.lock, 5000, rtt_extend_cb, &holder), 0);
  cr_assert(rtt_run_until_fn(&loop, is_lost, &holder, 3000));
  cr_assert_gt(rtt_holder_field(rc, "late-extend", "f"), 0,
               "Redis did not extend the lease");
  cr_assert_eq(holder.ext_calls, 0);
  rtt_proxy_release(px, RTT_ALL, RTT_DOWN);
  rtt_proxy_reset(px);
  cr_assert(rtt_run_until(&loop, &holder.ext_calls, 1, 5000));
  cr_assert_eq(holder.ext_status, RT_ELOST, "the late extend reported %s",
               rt_err_name(holder.ext_status));
  cr_assert_eq(rt_lock_state(holder.lock), RT_LOCK_LOST);
  cr_assert_eq(rtt_signal(&holder), 0);
  cr_assert(rtt_run_until(&loop, &holder.sig_calls, 1, 5000));
  cr_assert_eq(rtt_holder_field(rc, "late-extend", "f"), -1,
               "the extended lease outlived the release");
  rtt_close(&a);
  rtt_loop_finish(&loop);
  rtt_proxy_stop(px);
}

Test(renew, renew_off_lets_the_lease_run_out) {
  rtt_client a;
  rtt_req holder = {0};
  rtt_open_ready(&a, &loop, NULL);
  rtt_acquire(&loop, a.c, "res", 400, &holder);
  cr_assert_eq(rt_lock_auto_renew(holder.lock, 50), 0);
  rtt_run_for(&loop, 700);
  cr_assert_eq(rt_lock_state(holder.lock), RT_LOCK_HELD);
  cr_assert_eq(rt_lock_auto_renew(holder.lock, RT_RENEW_OFF), 0);
  cr_assert(rtt_run_until_fn(&loop, is_lost, &holder, 2000));
  /* The local count ends first; Redis a little later. */
  cr_assert(rtt_run_until_fn(&loop, holder_gone, "res", 2000));
  rtt_release(&loop, &holder, RT_ELOST);
  rtt_close(&a);
  rtt_loop_finish(&loop);
}

Test(renew, argument_and_state_errors) {
  rtt_client a;
  rtt_req holder = {0}, queued = {0};
  rtt_open_ready(&a, &loop, NULL);
  cr_assert_eq(rt_lock_auto_renew(NULL, RT_RENEW_DEFAULT), RT_EINVAL);
  rtt_acquire(&loop, a.c, "res", 1000, &holder);
  cr_assert_eq(rt_lock_auto_renew(holder.lock, -2), RT_EINVAL);
  cr_assert_eq(rt_lock_auto_renew(holder.lock, 1000), RT_EINVAL);
  cr_assert_eq(rt_lock_auto_renew(holder.lock, 999), 0);
  cr_assert_eq(rt_lock_auto_renew(holder.lock, RT_RENEW_OFF), 0);

  /* A canceled wait with renewal asked for never sends an extend. */
  cr_assert_eq(rtt_wait(a.c, "res", 1000, RT_FOREVER, &queued), 0);
  cr_assert_eq(rt_lock_auto_renew(queued.lock, RT_RENEW_DEFAULT), 0);
  cr_assert_eq(rt_cancel(queued.lock), 0);
  cr_assert_eq(rt_lock_auto_renew(queued.lock, RT_RENEW_DEFAULT), RT_ERELEASED);
  cr_assert(rtt_run_until(&loop, &queued.calls, 1, 5000));
  cr_assert_eq(queued.status, RT_ECANCELED);

  cr_assert_eq(rtt_signal(&holder), 0);
  cr_assert_eq(rt_lock_auto_renew(holder.lock, RT_RENEW_DEFAULT), RT_ERELEASED);
  cr_assert(rtt_run_until(&loop, &holder.sig_calls, 1, 5000));
  cr_assert_eq(holder.sig_status, 0);
  rtt_close(&a);
  rtt_loop_finish(&loop);
}
