/* Leases: rt_extend keeps a lock past its TTL and fails once the lock is
 * lost; rt_signal's errors (double release, release after expiry with and
 * without a reap, release while waiting); rt_try_lock on free, held and
 * expired resources. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "rt_test.h"

RTT_SUITE(lease);

static int is_lost(void *arg) {
  return rt_lock_state(((rtt_req *)arg)->lock) == RT_LOCK_LOST;
}

static int lost_calls;
static void count_lost(rt_lock_t *lock, void *data) {
  (void)lock;
  (void)data;
  lost_calls++;
}

/* A lock whose lease ran out reads RT_LOCK_LOST at once, also while the
 * loop has not yet run the timer that turns it lost (the process was busy
 * in its own code, or the user's timer came first in the same turn); the
 * lost callback then runs once, from the loop. */
Test(lease, a_lock_reads_lost_once_its_lease_ran_out_before_the_loop_runs) {
  rtt_client a;
  rtt_req holder = {0};
  lost_calls = 0;
  rtt_open_ready(&a, &loop, NULL);
  rtt_acquire(&loop, a.c, "res", 200, &holder);
  cr_assert_eq(rt_lock_on_lost(holder.lock, count_lost), 0);
  cr_assert_eq(rt_lock_state(holder.lock), RT_LOCK_HELD);
  rtt_sleep_ms(300); /* the loop does not run */
  cr_assert_eq(rt_lock_lease_left_ms(holder.lock), 0);
  cr_assert_eq(rt_lock_state(holder.lock), RT_LOCK_LOST,
               "held past its lease: %s",
               rt_lock_state_name(rt_lock_state(holder.lock)));
  cr_assert_eq(lost_calls, 0, "the callback comes from the loop");
  rtt_run_for(&loop, 50);
  cr_assert_eq(lost_calls, 1);
  cr_assert_eq(rt_lock_state(holder.lock), RT_LOCK_LOST);
  rtt_release(&loop, &holder, RT_ELOST);
  rtt_close(&a);
}

/* ---- extend ------------------------------------------------------------------ */

Test(lease, extending_keeps_the_lock_past_its_ttl_and_updates_the_lease) {
  rtt_client a, b;
  rtt_req holder = {0}, waiter = {0};
  rtt_open_ready(&a, &loop, NULL);
  rtt_open_ready(&b, &loop, NULL);
  rtt_acquire(&loop, a.c, "res", 600, &holder);
  cr_assert_eq(holder.lease_ms, 600);
  cr_assert_eq(rtt_wait(b.c, "res", 5000, RT_FOREVER, &waiter), 0);
  rtt_run_until_queued(&loop, rc, "res", 2);

  /* 1.6 s of extends every 150 ms: far past the original 600 ms lease, and
   * past the waiter's watchdog reaping at its end. */
  uint64_t t0 = rtt_now_ms();
  int n = 0;
  while (rtt_now_ms() - t0 < 1600) {
    rtt_run_for(&loop, 150);
    cr_assert_eq(rtt_extend(&holder, 600), 0);
    n++;
    cr_assert(rtt_run_until(&loop, &holder.ext_calls, n, 5000));
    cr_assert_eq(holder.ext_status, 0, "extend %d: %s", n,
                 rt_err_name(holder.ext_status));
    cr_assert_eq(waiter.calls, 0, "the waiter was granted after %llu ms",
                 (unsigned long long)(rtt_now_ms() - t0));
  }
  cr_assert_eq(rt_lock_state(holder.lock), RT_LOCK_HELD);
  cr_assert_eq(rt_lock_fence(holder.lock), holder.fence);
  cr_assert_eq(rtt_holder_field(rc, "res", "f"), (long long)holder.fence,
               "the fence moved: the holder was reaped");
  char q[4][RTT_ID_MAX];
  cr_assert_eq(rtt_queue(rc, rtt_prefix(), "res", 3, q, 4), 2);
  cr_assert_str_eq(q[0], holder.id);

  /* A different TTL shows in the lease, here and in Redis. */
  int64_t before = rtt_redis_time_ms(rc);
  cr_assert_eq(rtt_extend(&holder, 7000), 0);
  cr_assert(rtt_run_until(&loop, &holder.ext_calls, n + 1, 5000));
  int64_t after = rtt_redis_time_ms(rc);
  cr_assert_eq(holder.ext_status, 0);
  cr_assert_eq(holder.ext_lease_ms, 7000);
  cr_assert_eq(rt_lock_lease_ms(holder.lock), 7000);
  long long d = rtt_holder_field(rc, "res", "d");
  cr_assert(d >= before + 7000 && d <= after + 7000,
            "deadline %lld not 7000 ms after the extend (%lld..%lld)", d,
            (long long)before, (long long)after);

  rtt_release(&loop, &holder, 0);
  cr_assert(rtt_run_until(&loop, &waiter.calls, 1, 5000));
  cr_assert_eq(waiter.status, 0);
  cr_assert_gt(waiter.fence, holder.fence);
  rtt_release(&loop, &waiter, 0);
  rtt_close(&a);
  rtt_close(&b);
  rtt_loop_finish(&loop);
}

Test(lease, extend_after_the_lease_expired_and_another_took_over_is_elost) {
  rtt_client a, b;
  rtt_req holder = {0}, waiter = {0};
  rtt_open_ready(&a, &loop, NULL);
  rtt_open_ready(&b, &loop, NULL);
  rtt_acquire(&loop, a.c, "res", 200, &holder);
  cr_assert_eq(rtt_wait(b.c, "res", 5000, RT_FOREVER, &waiter), 0);
  /* The waiter's watchdog reaps the expired holder. */
  cr_assert(rtt_run_until(&loop, &waiter.calls, 1, 3000),
            "the expired holder was not reaped");
  cr_assert_eq(waiter.status, 0);
  cr_assert_gt(waiter.fence, holder.fence);

  cr_assert_eq(rtt_extend(&holder, 5000), 0);
  cr_assert(rtt_run_until(&loop, &holder.ext_calls, 1, 5000));
  cr_assert_eq(holder.ext_status, RT_ELOST, "extend: %s",
               rt_err_name(holder.ext_status));
  cr_assert_eq(rt_lock_state(holder.lock), RT_LOCK_LOST);

  /* The new holder was not disturbed. */
  char q[4][RTT_ID_MAX];
  cr_assert_eq(rtt_queue(rc, rtt_prefix(), "res", 3, q, 4), 1);
  cr_assert_str_eq(q[0], waiter.id);
  cr_assert_eq(rtt_holder_field(rc, "res", "f"), (long long)waiter.fence);

  rtt_release(&loop, &holder, RT_ELOST);
  cr_assert_eq(rtt_queue_len(rc, "res"), 1,
               "the lost holder's release touched the queue");
  rtt_release(&loop, &waiter, 0);
  rtt_close(&a);
  rtt_close(&b);
  rtt_loop_finish(&loop);
}

Test(lease, extend_refuses_queued_released_and_bad_ttls) {
  rtt_client a;
  rtt_req holder = {0}, queued = {0};
  rtt_open_ready(&a, &loop, NULL);
  rtt_acquire(&loop, a.c, "res", 5000, &holder);
  cr_assert_eq(rtt_wait(a.c, "res", 5000, RT_FOREVER, &queued), 0);

  cr_assert_eq(rtt_extend(&queued, 1000), RT_ENOTHELD);
  cr_assert_eq(rtt_extend(&holder, 0), RT_ETTL);
  cr_assert_eq(rtt_extend(&holder, -5), RT_ETTL);
  cr_assert_eq(rtt_extend(&holder, RT_TTL_MAX + 1), RT_ETTL);
  cr_assert_eq(rt_extend(NULL, 1000, NULL, NULL), RT_EINVAL);
  rtt_run_for(&loop, 50);
  cr_assert_eq(holder.ext_calls, 0, "a refused extend called back");

  /* RT_TTL_DEFAULT takes the client's default (30 s); a NULL cb is fine. */
  cr_assert_eq(rtt_extend(&holder, RT_TTL_DEFAULT), 0);
  cr_assert(rtt_run_until(&loop, &holder.ext_calls, 1, 5000));
  cr_assert_eq(holder.ext_status, 0);
  cr_assert_eq(holder.ext_lease_ms, 30000);
  cr_assert_eq(rt_extend(holder.lock, RT_TTL_MAX, NULL, NULL), 0);
  rtt_run_for(&loop, 100);
  cr_assert_eq(rt_lock_lease_ms(holder.lock), RT_TTL_MAX);

  cr_assert_eq(rtt_signal(&holder), 0);
  cr_assert_eq(rtt_extend(&holder, 1000), RT_ERELEASED);
  cr_assert(rtt_run_until(&loop, &holder.sig_calls, 1, 5000));
  cr_assert(rtt_run_until(&loop, &queued.calls, 1, 5000));
  rtt_release(&loop, &queued, 0);
  rtt_close(&a);
  rtt_loop_finish(&loop);
}

/* ---- signal errors --------------------------------------------------------- */

Test(lease, signaling_twice_is_ereleased_and_calls_back_once) {
  rtt_client a;
  rtt_req r = {0};
  rtt_open_ready(&a, &loop, NULL);
  rtt_acquire(&loop, a.c, "res", 5000, &r);
  rt_lock_t *l = r.lock;
  cr_assert_eq(rtt_signal(&r), 0);
  cr_assert_eq(r.sig_calls, 0, "signal called back from inside rt_signal");
  cr_assert_eq(rt_lock_state(l), RT_LOCK_RELEASING);
  cr_assert_eq(rt_signal(l, rtt_signal_cb, &r), RT_ERELEASED);
  cr_assert_eq(rt_signal(l, NULL, NULL), RT_ERELEASED);
  cr_assert(rtt_run_until(&loop, &r.sig_calls, 1, 5000));
  rtt_run_for(&loop, 100);
  cr_assert_eq(r.sig_calls, 1);
  cr_assert_eq(r.sig_status, 0);
  cr_assert_eq(rtt_queue_len(rc, "res"), 0);
  rtt_close(&a);
  rtt_loop_finish(&loop);
}

Test(lease, signal_refuses_queued_locks_and_null) {
  rtt_client a;
  rtt_req holder = {0}, queued = {0};
  rtt_open_ready(&a, &loop, NULL);
  rtt_acquire(&loop, a.c, "res", 5000, &holder);
  cr_assert_eq(rtt_wait(a.c, "res", 5000, RT_FOREVER, &queued), 0);
  cr_assert_eq(rtt_signal(&queued), RT_ENOTHELD);
  rtt_run_until_queued(&loop, rc, "res", 2);
  cr_assert_eq(rtt_signal(&queued), RT_ENOTHELD);
  cr_assert_eq(rt_signal(NULL, NULL, NULL), RT_EINVAL);
  rtt_run_for(&loop, 50);
  cr_assert_eq(queued.sig_calls, 0);
  cr_assert_eq(rtt_queue_len(rc, "res"), 2,
               "a refused signal changed the queue");
  rtt_release(&loop, &holder, 0);
  cr_assert(rtt_run_until(&loop, &queued.calls, 1, 5000));
  rtt_release(&loop, &queued, 0);
  rtt_close(&a);
  rtt_loop_finish(&loop);
}

Test(lease, signal_after_a_reap_by_another_client_reports_elost) {
  rtt_client a, b;
  rtt_req holder = {0}, waiter = {0};
  rtt_open_ready(&a, &loop, NULL);
  rtt_open_ready(&b, &loop, NULL);
  rtt_acquire(&loop, a.c, "res", 200, &holder);
  cr_assert_eq(rtt_wait(b.c, "res", 5000, RT_FOREVER, &waiter), 0);
  cr_assert(rtt_run_until(&loop, &waiter.calls, 1, 3000),
            "the expired holder was not reaped");
  cr_assert_eq(waiter.status, 0);
  /* The old holder's client knows by its own clock. */
  cr_assert(rtt_run_until_fn(&loop, is_lost, &holder, 3000),
            "the holder was not told it lost the lock (state %d)",
            rt_lock_state(holder.lock));

  rtt_release(&loop, &holder, RT_ELOST);
  char q[4][RTT_ID_MAX];
  cr_assert_eq(rtt_queue(rc, rtt_prefix(), "res", 3, q, 4), 1);
  cr_assert_str_eq(q[0], waiter.id, "the queue did not move on");
  cr_assert_eq(rtt_holder_field(rc, "res", "f"), (long long)waiter.fence);

  rtt_release(&loop, &waiter, 0);
  cr_assert_eq(rtt_queue_len(rc, "res"), 0);
  rtt_close(&a);
  rtt_close(&b);
  rtt_loop_finish(&loop);
}

Test(lease, signal_after_the_lease_ran_out_unreaped_is_elost_and_hands_on) {
  rtt_client a;
  rtt_req holder = {0};
  rtt_open_ready(&a, &loop, NULL);
  rtt_acquire(&loop, a.c, "res", 150, &holder);

  /* A waiter that no watchdog watches: nobody reaps. */
  static const char fake[] = "0123456789abcdef0123456789abcdef:7";
  char key[256];
  size_t kl = rtt_key(key, sizeof(key), rtt_prefix(), "res", 3, 'q');
  cr_assert_eq(rtt_int(rc, "RPUSH %b %s", key, kl, fake), 1);
  kl = rtt_key(key, sizeof(key), rtt_prefix(), "res", 3, 'm');
  cr_assert_eq(rtt_int(rc, "HSET %b %s 0:5000", key, kl, fake), 1);
  redisContext *sub = rtt_redis();
  char chan[128];
  snprintf(chan, sizeof(chan), "%s:c:0123456789abcdef0123456789abcdef",
           rtt_prefix());
  freeReplyObject(rtt_cmd(sub, "SSUBSCRIBE %s", chan));

  /* The lease ends by itself (the holder key's own expiry), and the holder
   * knows it by its own clock; the waiter is still queued. */
  rtt_run_for(&loop, 400);
  cr_assert_eq(rtt_holder_field(rc, "res", "f"), -1,
               "the holder key outlived its lease");
  cr_assert_eq(rt_lock_state(holder.lock), RT_LOCK_LOST);
  char q[4][RTT_ID_MAX];
  cr_assert_eq(rtt_queue(rc, rtt_prefix(), "res", 3, q, 4), 1);
  cr_assert_str_eq(q[0], fake);

  /* The late release hands the lock on at once. */
  rtt_release(&loop, &holder, RT_ELOST);
  cr_assert_eq(rtt_queue(rc, rtt_prefix(), "res", 3, q, 4), 1);
  cr_assert_str_eq(q[0], fake, "the queue did not move on");
  long long fence = rtt_holder_field(rc, "res", "f");
  cr_assert_gt(fence, (long long)holder.fence);

  /* The next waiter's client was told, with its fence and lease. */
  redisReply *m = NULL;
  cr_assert_eq(redisGetReply(sub, (void **)&m), REDIS_OK);
  cr_assert(m->type == REDIS_REPLY_ARRAY && m->elements == 3);
  char want[64];
  snprintf(want, sizeof(want), "g:7:%lld:5000", fence);
  size_t wl = strlen(want);
  const char *msg = m->element[2]->str;
  /* Later fields (if any) are the library's business. */
  cr_assert(strncmp(msg, want, wl) == 0 && (msg[wl] == '\0' || msg[wl] == ':'),
            "notice %s, want %s...", msg, want);
  freeReplyObject(m);
  rtt_redis_close(sub);

  rtt_close(&a);
  rtt_loop_finish(&loop);
}

/* ---- try_lock ---------------------------------------------------------------- */

Test(lease, try_lock_on_a_free_resource_is_granted) {
  rtt_client a;
  rtt_req r = {0};
  rtt_open_ready(&a, &loop, NULL);
  cr_assert_eq(rtt_try(a.c, "res", 3000, &r), 0);
  cr_assert_eq(r.calls, 0, "try called back from inside rt_try_lock");
  cr_assert(rtt_run_until(&loop, &r.calls, 1, 5000));
  cr_assert_eq(r.status, 0, "try: %s", rt_err_name(r.status));
  cr_assert_geq(r.fence, 1);
  cr_assert_eq(r.lease_ms, 3000);
  cr_assert_eq(rt_lock_state(r.lock), RT_LOCK_HELD);
  char q[4][RTT_ID_MAX];
  cr_assert_eq(rtt_queue(rc, rtt_prefix(), "res", 3, q, 4), 1);
  cr_assert_str_eq(q[0], r.id);
  cr_assert_eq(rtt_holder_field(rc, "res", "f"), (long long)r.fence);
  rtt_release(&loop, &r, 0);
  cr_assert_eq(rtt_queue_len(rc, "res"), 0);
  rtt_close(&a);
  rtt_loop_finish(&loop);
}

Test(lease, try_lock_on_a_held_resource_is_ebusy_and_never_queues) {
  rtt_client a, b;
  rtt_req holder = {0}, waiter = {0}, busy = {0};
  rtt_open_ready(&a, &loop, NULL);
  rtt_open_ready(&b, &loop, NULL);
  rtt_acquire(&loop, a.c, "res", 5000, &holder);
  cr_assert_eq(rtt_wait(a.c, "res", 5000, RT_FOREVER, &waiter), 0);
  rtt_run_until_queued(&loop, rc, "res", 2);
  char before[4][RTT_ID_MAX], after[4][RTT_ID_MAX];
  cr_assert_eq(rtt_queue(rc, rtt_prefix(), "res", 3, before, 4), 2);

  cr_assert_eq(rtt_try(b.c, "res", 5000, &busy), 0);
  cr_assert(rtt_run_until(&loop, &busy.calls, 1, 5000));
  cr_assert_eq(busy.status, RT_EBUSY, "try: %s", rt_err_name(busy.status));
  cr_assert_eq(rtt_queue(rc, rtt_prefix(), "res", 3, after, 4), 2,
               "try changed the queue length");
  cr_assert_str_eq(after[0], before[0]);
  cr_assert_str_eq(after[1], before[1]);
  cr_assert_eq(rtt_holder_field(rc, "res", "f"), (long long)holder.fence);

  /* Even later, the busy try is never granted. */
  rtt_release(&loop, &holder, 0);
  cr_assert(rtt_run_until(&loop, &waiter.calls, 1, 5000));
  rtt_run_for(&loop, 100);
  cr_assert_eq(busy.calls, 1);
  rtt_release(&loop, &waiter, 0);
  rtt_close(&a);
  rtt_close(&b);
  rtt_loop_finish(&loop);
}

Test(lease, try_lock_evicts_an_expired_holder_and_is_granted) {
  rtt_client a, b;
  rtt_req holder = {0}, tr = {0};
  rtt_open_ready(&a, &loop, NULL);
  rtt_open_ready(&b, &loop, NULL);
  rtt_acquire(&loop, a.c, "res", 150, &holder);
  rtt_run_for(&loop, 350);
  cr_assert_eq(rtt_queue_len(rc, "res"), 0,
               "the holder key outlived its lease");

  cr_assert_eq(rtt_try(b.c, "res", 3000, &tr), 0);
  cr_assert(rtt_run_until(&loop, &tr.calls, 1, 5000));
  cr_assert_eq(tr.status, 0, "try: %s", rt_err_name(tr.status));
  cr_assert_gt(tr.fence, holder.fence);
  char q[4][RTT_ID_MAX];
  cr_assert_eq(rtt_queue(rc, rtt_prefix(), "res", 3, q, 4), 1);
  cr_assert_str_eq(q[0], tr.id);
  cr_assert(rtt_run_until_fn(&loop, is_lost, &holder, 3000),
            "the expired holder does not know");

  rtt_release(&loop, &holder, RT_ELOST);
  cr_assert_eq(rtt_queue_len(rc, "res"), 1);
  rtt_release(&loop, &tr, 0);
  cr_assert_eq(rtt_queue_len(rc, "res"), 0);
  rtt_close(&a);
  rtt_close(&b);
  rtt_loop_finish(&loop);
}
