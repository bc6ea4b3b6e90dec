/* rt_wait and rt_signal: uncontended grants, handoff between clients, FIFO
 * order across clients with strictly increasing fences, lock handles,
 * rt_cancel and wait deadlines. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "rt_test.h"

RTT_SUITE(wait);

Test(wait, an_uncontended_wait_is_granted_at_once_with_fence_and_lease) {
  rtt_client a;
  rtt_req r = {0};
  rtt_open_ready(&a, &loop, NULL);
  rtt_acquire(&loop, a.c, "res", 4321, &r);
  cr_assert_eq(r.calls, 1);
  cr_assert_geq(r.fence, 1);
  cr_assert_eq(r.lease_ms, 4321, "lease %lld, want the ttl",
               (long long)r.lease_ms);
  cr_assert_eq(r.position, 0);
  cr_assert_eq(rt_lock_state(r.lock), RT_LOCK_HELD);
  cr_assert_eq(rt_lock_client(r.lock), a.c);
  cr_assert_eq(rt_lock_get_data(r.lock), &r);

  /* The request id is the head of the Redis queue, and it names us. */
  char q[4][RTT_ID_MAX];
  cr_assert_eq(rtt_queue(rc, rtt_prefix(), "res", 3, q, 4), 1);
  cr_assert_str_eq(q[0], r.id);
  cr_assert_eq(strncmp(r.id, rt_client_id(a.c), 32), 0);
  cr_assert_eq(r.id[32], ':');
  cr_assert_eq((long long)r.fence, rtt_hfield(rc, rtt_prefix(), "res", 3, "f"));

  rtt_release(&loop, &r, 0);
  cr_assert_eq(r.sig_calls, 1);
  cr_assert_eq(rtt_queue_len(rc, "res"), 0);

  /* A second grant on the same resource gets the next fence. */
  rtt_req r2 = {0};
  rtt_acquire(&loop, a.c, "res", 1000, &r2);
  cr_assert_gt(r2.fence, r.fence);
  rtt_release(&loop, &r2, 0);

  rtt_close(&a);
  rtt_loop_finish(&loop);
  cr_assert_eq(a.closes, 1);
}

Test(wait, the_second_client_is_granted_only_after_the_first_signals) {
  rtt_client a, b;
  rtt_req first = {0}, second = {0};
  rtt_open_ready(&a, &loop, NULL);
  rtt_open_ready(&b, &loop, NULL);
  rtt_acquire(&loop, a.c, "res", 10000, &first);
  cr_assert_eq(rtt_wait(b.c, "res", 10000, RT_FOREVER, &second), 0);
  rtt_run_until_queued(&loop, rc, "res", 2);
  rtt_run_for(&loop, 300);
  cr_assert_eq(second.calls, 0, "granted while the first still holds");
  cr_assert_eq(rt_lock_state(second.lock), RT_LOCK_QUEUED);
  cr_assert_eq(rt_lock_position(second.lock), 1);
  cr_assert_eq(rt_lock_fence(second.lock), 0);

  uint64_t t0 = rtt_now_ms();
  cr_assert_eq(rtt_signal(&first), 0);
  cr_assert(rtt_run_until(&loop, &second.calls, 1, 5000));
  cr_assert_eq(second.status, 0);
  cr_assert_geq(second.at_ms, t0);
  cr_assert_gt(second.fence, first.fence);
  cr_assert_eq(second.position, 1);
  cr_assert_eq(second.lease_ms, 10000);
  cr_assert(rtt_run_until(&loop, &first.sig_calls, 1, 5000));
  cr_assert_eq(first.sig_status, 0);

  char q[4][RTT_ID_MAX];
  cr_assert_eq(rtt_queue(rc, rtt_prefix(), "res", 3, q, 4), 1);
  cr_assert_str_eq(q[0], second.id);

  rtt_release(&loop, &second, 0);
  rtt_close(&a);
  rtt_close(&b);
  rtt_loop_finish(&loop);
  cr_assert_eq(a.closes + b.closes, 2);
}

Test(wait, waiters_from_three_clients_are_granted_in_redis_enqueue_order) {
  enum { NC = 3, NW = 10 };
  rtt_client cl[NC];
  rtt_req holder = {0};
  rtt_req w[NW];
  rtt_log log = {0};
  char tags[NW][8];
  for (int i = 0; i < NC; i++)
    rtt_open_ready(&cl[i], &loop, NULL);
  rtt_acquire(&loop, cl[0].c, "fifo", 10000, &holder);

  memset(w, 0, sizeof(w));
  for (int i = 0; i < NW; i++) {
    snprintf(tags[i], sizeof(tags[i]), "%d", i);
    w[i].tag = tags[i];
    w[i].log = &log;
    w[i].signal_on_grant = 1;
    cr_assert_eq(
        rtt_wait(cl[(i * 7 + 1) % NC].c, "fifo", 10000, RT_FOREVER, &w[i]), 0);
  }
  rtt_run_until_queued(&loop, rc, "fifo", NW + 1);
  rtt_run_for(&loop, 50);
  for (int i = 0; i < NW; i++)
    cr_assert_eq(w[i].calls, 0, "waiter %d granted behind a held lock", i);

  /* The order Redis enqueued them in. */
  char q[NW + 1][RTT_ID_MAX];
  cr_assert_eq(rtt_queue(rc, rtt_prefix(), "fifo", 4, q, NW + 1), NW + 1);
  cr_assert_str_eq(q[0], holder.id);
  rtt_log want = {0};
  for (int k = 1; k <= NW; k++) {
    int found = -1;
    for (int i = 0; i < NW; i++)
      if (strcmp(q[k], w[i].id) == 0)
        found = i;
    cr_assert_geq(found, 0, "unknown entry %s in the queue", q[k]);
    rtt_log_add(&want, "%d", found);
    /* The position each got at enqueue is its place in the list. */
    cr_assert_eq(rt_lock_position(w[found].lock), (size_t)k,
                 "waiter %d: position %zu, at index %d in Redis", found,
                 rt_lock_position(w[found].lock), k);
  }

  /* Each waiter signals as soon as it is granted. */
  cr_assert_eq(rtt_signal(&holder), 0);
  cr_assert(rtt_run_until(&loop, &log.n, NW, 10000), "only %d of %d granted",
            log.n, NW);
  cr_assert_str_eq(log.buf, want.buf, "grant order %s, enqueue order %s",
                   log.buf, want.buf);
  /* Fences strictly increase in grant order. */
  uint64_t prev = holder.fence;
  for (int k = 1; k <= NW; k++) {
    for (int i = 0; i < NW; i++) {
      if (strcmp(q[k], w[i].id) == 0) {
        cr_assert_eq(w[i].status, 0);
        cr_assert_gt(w[i].fence, prev, "fence %llu after %llu",
                     (unsigned long long)w[i].fence, (unsigned long long)prev);
        prev = w[i].fence;
      }
    }
  }
  for (int i = 0; i < NW; i++)
    cr_assert(rtt_run_until(&loop, &w[i].sig_calls, 1, 5000));
  for (int i = 0; i < NW; i++)
    cr_assert_eq(w[i].sig_status, 0);
  cr_assert_eq(rtt_queue_len(rc, "fifo"), 0);

  for (int i = 0; i < NC; i++)
    rtt_close(&cl[i]);
  rtt_loop_finish(&loop);
  for (int i = 0; i < NC; i++)
    cr_assert_eq(cl[i].closes, 1);
}

Test(wait, a_waiter_of_the_same_client_waits_for_its_own_holder) {
  rtt_client a;
  rtt_req first = {0}, second = {0};
  rtt_open_ready(&a, &loop, NULL);
  rtt_acquire(&loop, a.c, "res", 10000, &first);
  cr_assert_eq(rtt_wait(a.c, "res", 10000, RT_FOREVER, &second), 0);
  rtt_run_until_queued(&loop, rc, "res", 2);
  rtt_run_for(&loop, 100);
  cr_assert_eq(second.calls, 0);
  rtt_release(&loop, &first, 0);
  cr_assert(rtt_run_until(&loop, &second.calls, 1, 5000));
  cr_assert_eq(second.status, 0);
  cr_assert_gt(second.fence, first.fence);
  rtt_release(&loop, &second, 0);
  rtt_close(&a);
  rtt_loop_finish(&loop);
}

Test(wait, lock_handles_give_the_exact_resource_bytes) {
  static const char name[] = {'a', '\0', 'b', '{', '}', ':', '%', '\xff'};
  rtt_client a;
  rtt_req r = {0};
  rtt_open_ready(&a, &loop, NULL);
  cr_assert_eq(rtt_wait_n(a.c, name, sizeof(name), 5000, RT_FOREVER, &r), 0);
  size_t len = 0;
  const void *got = rt_lock_resource(r.lock, &len);
  cr_assert_eq(len, sizeof(name));
  cr_assert_arr_eq(got, name, sizeof(name));
  cr_assert(rtt_run_until(&loop, &r.calls, 1, 5000));
  cr_assert_eq(r.status, 0);
  got = rt_lock_resource(r.lock, &len);
  cr_assert_eq(len, sizeof(name));
  cr_assert_arr_eq(got, name, sizeof(name));
  cr_assert_eq(rtt_qlen(rc, rtt_prefix(), name, sizeof(name)), 1);
  rtt_release(&loop, &r, 0);
  rtt_close(&a);
  rtt_loop_finish(&loop);
}

Test(wait, client_locks_lists_held_locks_oldest_first_and_drops_released) {
  rtt_client a;
  rtt_req r1 = {0}, r2 = {0}, r3 = {0}, queued = {0};
  rt_lock_t *out[8];
  rtt_open_ready(&a, &loop, NULL);
  cr_assert_eq(rt_client_locks(a.c, NULL, 0), 0);
  rtt_acquire(&loop, a.c, "one", 10000, &r1);
  rtt_acquire(&loop, a.c, "two", 10000, &r2);
  rtt_acquire(&loop, a.c, "three", 10000, &r3);
  /* A queued request is not held. */
  cr_assert_eq(rtt_wait(a.c, "one", 10000, RT_FOREVER, &queued), 0);
  rtt_run_until_queued(&loop, rc, "one", 2);

  cr_assert_eq(rt_client_locks(a.c, NULL, 0), 3);
  cr_assert_eq(rt_client_locks(a.c, out, 8), 3);
  cr_assert_eq(out[0], r1.lock);
  cr_assert_eq(out[1], r2.lock);
  cr_assert_eq(out[2], r3.lock);
  out[1] = NULL;
  cr_assert_eq(rt_client_locks(a.c, out, 1), 3, "returns the total");
  cr_assert_eq(out[0], r1.lock);
  cr_assert_null(out[1], "wrote past max");

  rtt_release(&loop, &r2, 0);
  cr_assert_eq(rt_client_locks(a.c, out, 8), 2);
  cr_assert_eq(out[0], r1.lock);
  cr_assert_eq(out[1], r3.lock);

  /* Releasing "one" grants the queued request: it becomes the newest. */
  rtt_release(&loop, &r1, 0);
  cr_assert(rtt_run_until(&loop, &queued.calls, 1, 5000));
  cr_assert_eq(rt_client_locks(a.c, out, 8), 2);
  cr_assert_eq(out[0], r3.lock);
  cr_assert_eq(out[1], queued.lock);

  rtt_release(&loop, &r3, 0);
  rtt_release(&loop, &queued, 0);
  cr_assert_eq(rt_client_locks(a.c, out, 8), 0);
  rtt_close(&a);
  rtt_loop_finish(&loop);
}

/* ---- cancel ----------------------------------------------------------------- */

Test(wait, cancel_ends_the_wait_removes_the_entry_and_the_next_is_granted) {
  rtt_client a, b;
  rtt_req holder = {0}, canceled = {0}, next = {0};
  rtt_open_ready(&a, &loop, NULL);
  rtt_open_ready(&b, &loop, NULL);
  rtt_acquire(&loop, a.c, "res", 10000, &holder);
  cr_assert_eq(rtt_wait(b.c, "res", 10000, RT_FOREVER, &canceled), 0);
  rtt_run_until_queued(&loop, rc, "res", 2);
  cr_assert_eq(rtt_wait(a.c, "res", 10000, RT_FOREVER, &next), 0);
  rtt_run_until_queued(&loop, rc, "res", 3);

  cr_assert_eq(rt_cancel(canceled.lock), 0);
  cr_assert_eq(canceled.calls, 0, "the callback ran inside rt_cancel");
  cr_assert(rtt_run_until(&loop, &canceled.calls, 1, 5000));
  cr_assert_eq(canceled.status, RT_ECANCELED);

  char q[4][RTT_ID_MAX];
  cr_assert_eq(rtt_queue(rc, rtt_prefix(), "res", 3, q, 4), 2);
  cr_assert_str_eq(q[0], holder.id);
  cr_assert_str_eq(q[1], next.id);

  rtt_release(&loop, &holder, 0);
  cr_assert(rtt_run_until(&loop, &next.calls, 1, 5000));
  cr_assert_eq(next.status, 0);
  cr_assert_gt(next.fence, holder.fence);
  rtt_run_for(&loop, 50);
  cr_assert_eq(canceled.calls, 1);
  rtt_release(&loop, &next, 0);
  rtt_close(&a);
  rtt_close(&b);
  rtt_loop_finish(&loop);
}

Test(wait, cancel_right_after_wait_never_leaves_an_entry) {
  rtt_client a, b;
  rtt_req holder = {0}, canceled = {0};
  rtt_open_ready(&a, &loop, NULL);
  rtt_open_ready(&b, &loop, NULL);
  rtt_acquire(&loop, a.c, "res", 10000, &holder);
  cr_assert_eq(rtt_wait(b.c, "res", 10000, RT_FOREVER, &canceled), 0);
  cr_assert_eq(rt_cancel(canceled.lock), 0);
  cr_assert(rtt_run_until(&loop, &canceled.calls, 1, 5000));
  cr_assert_eq(canceled.status, RT_ECANCELED);
  rtt_run_for(&loop, 100);
  cr_assert_eq(rtt_queue_len(rc, "res"), 1,
               "the canceled request is in the queue");
  rtt_release(&loop, &holder, 0);
  cr_assert_eq(rtt_queue_len(rc, "res"), 0);
  rtt_close(&a);
  rtt_close(&b);
  rtt_loop_finish(&loop);
}

Test(wait, cancel_of_a_held_lock_is_eheld_and_cancel_twice_ereleased) {
  rtt_client a;
  rtt_req holder = {0}, queued = {0};
  rtt_open_ready(&a, &loop, NULL);
  rtt_acquire(&loop, a.c, "res", 10000, &holder);
  cr_assert_eq(rt_cancel(holder.lock), RT_EHELD);
  cr_assert_eq(rt_cancel(NULL), RT_EINVAL);

  cr_assert_eq(rtt_wait(a.c, "res", 10000, RT_FOREVER, &queued), 0);
  rtt_run_until_queued(&loop, rc, "res", 2);
  cr_assert_eq(rt_cancel(queued.lock), 0);
  cr_assert_eq(rt_cancel(queued.lock), RT_ERELEASED);
  cr_assert_eq(rtt_signal(&queued), RT_ERELEASED);
  cr_assert(rtt_run_until(&loop, &queued.calls, 1, 5000));
  cr_assert_eq(queued.status, RT_ECANCELED);
  rtt_run_for(&loop, 50);
  cr_assert_eq(queued.calls, 1);
  cr_assert_eq(rtt_queue_len(rc, "res"), 1);

  /* The holder was not disturbed. */
  cr_assert_eq(rt_lock_state(holder.lock), RT_LOCK_HELD);
  rtt_release(&loop, &holder, 0);
  rtt_close(&a);
  rtt_loop_finish(&loop);
}

/* ---- deadlines ------------------------------------------------------------- */

/* a holds "res"; b's wait on it, with a 200 ms timeout, made stale_ms
 * after the loop's iteration began, ends with RT_EWAITTIMEOUT, never
 * before its 200 ms from the call: the ms from the call to its end. */
static uint64_t time_out_behind(rtt_client *a, rtt_client *b, rtt_req *holder,
                                rtt_req *late, int64_t stale_ms) {
  rtt_open_ready(a, &loop, NULL);
  rtt_open_ready(b, &loop, NULL);
  rtt_acquire(&loop, a->c, "res", 10000, holder);
  uv_update_time(&loop);
  rtt_sleep_ms(stale_ms); /* the loop's now stays where it was */
  uint64_t t0 = rtt_now_ms();
  cr_assert_eq(rtt_wait(b->c, "res", 10000, 200, late), 0);
  cr_assert(rtt_run_until(&loop, &late->calls, 1, 5000));
  cr_assert_eq(late->status, RT_EWAITTIMEOUT, "got %s",
               rt_err_name(late->status));
  uint64_t took = late->at_ms - t0;
  cr_assert_geq(took, 198, "timed out after %llu ms, before 200",
                (unsigned long long)took);
  return took;
}

Test(wait, a_wait_deadline_fails_with_edeadline_not_early_and_leaves_no_entry) {
  rtt_client a, b;
  rtt_req holder = {0}, late = {0};
  uint64_t took = time_out_behind(&a, &b, &holder, &late, 0);
  cr_assert_lt(took, 2000, "deadline reported only after %llu ms",
               (unsigned long long)took);

  char q[4][RTT_ID_MAX];
  cr_assert_eq(rtt_queue(rc, rtt_prefix(), "res", 3, q, 4), 1,
               "the expired wait is still in the Redis queue");
  cr_assert_str_eq(q[0], holder.id);

  rtt_release(&loop, &holder, 0);
  rtt_run_for(&loop, 100);
  cr_assert_eq(late.calls, 1);
  cr_assert_eq(rtt_queue_len(rc, "res"), 0);
  rtt_close(&a);
  rtt_close(&b);
  rtt_loop_finish(&loop);
}

/* The loop's time is that of the start of its iteration; a wait called
 * after the application ran 300 ms in that iteration still waits its
 * whole timeout (the Node.js binding's Date timeout failed 10 ms early
 * on a loaded machine). */
Test(wait, a_wait_timeout_counts_from_the_call_not_from_a_stale_loop_time) {
  rtt_client a, b;
  rtt_req holder = {0}, late = {0};
  time_out_behind(&a, &b, &holder, &late, 300);
  rtt_release(&loop, &holder, 0);
  rtt_close(&a);
  rtt_close(&b);
  rtt_loop_finish(&loop);
}

Test(wait, a_grant_before_the_deadline_wins) {
  rtt_client a, b;
  rtt_req holder = {0}, in_time = {0};
  rtt_open_ready(&a, &loop, NULL);
  rtt_open_ready(&b, &loop, NULL);
  rtt_acquire(&loop, a.c, "res", 10000, &holder);
  cr_assert_eq(rtt_wait(b.c, "res", 10000, 1000, &in_time), 0);
  rtt_run_until_queued(&loop, rc, "res", 2);
  rtt_run_for(&loop, 100);
  rtt_release(&loop, &holder, 0);
  cr_assert(rtt_run_until(&loop, &in_time.calls, 1, 5000));
  cr_assert_eq(in_time.status, 0);

  /* Well past the deadline: still held, and no second callback. */
  rtt_run_for(&loop, 1200);
  cr_assert_eq(in_time.calls, 1);
  cr_assert_eq(rt_lock_state(in_time.lock), RT_LOCK_HELD);
  char q[4][RTT_ID_MAX];
  cr_assert_eq(rtt_queue(rc, rtt_prefix(), "res", 3, q, 4), 1);
  cr_assert_str_eq(q[0], in_time.id);

  rtt_release(&loop, &in_time, 0);
  rtt_close(&a);
  rtt_close(&b);
  rtt_loop_finish(&loop);
}

Test(wait, an_uncontended_wait_with_a_deadline_is_granted) {
  rtt_client a;
  rtt_req r = {0};
  rtt_open_ready(&a, &loop, NULL);
  cr_assert_eq(rtt_wait(a.c, "res", 10000, 300, &r), 0);
  cr_assert(rtt_run_until(&loop, &r.calls, 1, 5000));
  cr_assert_eq(r.status, 0);
  rtt_run_for(&loop, 400);
  cr_assert_eq(r.calls, 1);
  cr_assert_eq(rtt_queue_len(rc, "res"), 1);
  rtt_release(&loop, &r, 0);
  rtt_close(&a);
  rtt_loop_finish(&loop);
}

Test(wait, a_deadline_shorter_than_the_enqueue_leaves_no_entry) {
  rtt_client a, b;
  rtt_req holder = {0}, late = {0};
  rtt_open_ready(&a, &loop, NULL);
  rtt_open_ready(&b, &loop, NULL);
  rtt_acquire(&loop, a.c, "res", 10000, &holder);
  /* 1 ms: the deadline passes while the enqueue is still in flight. */
  cr_assert_eq(rtt_wait(b.c, "res", 10000, 1, &late), 0);
  cr_assert(rtt_run_until(&loop, &late.calls, 1, 5000));
  cr_assert_eq(late.status, RT_EWAITTIMEOUT, "got %s",
               rt_err_name(late.status));
  rtt_run_for(&loop, 100);
  cr_assert_eq(late.calls, 1);
  char q[4][RTT_ID_MAX];
  cr_assert_eq(rtt_queue(rc, rtt_prefix(), "res", 3, q, 4), 1,
               "the expired wait is still in the Redis queue");
  cr_assert_str_eq(q[0], holder.id);
  rtt_release(&loop, &holder, 0);
  rtt_close(&a);
  rtt_close(&b);
  rtt_loop_finish(&loop);
}

Test(wait, a_cancel_crossing_its_grant_hands_the_lock_to_the_next_waiter) {
  rtt_client a, b, c;
  rtt_req holder = {0}, crossing = {0}, next = {0};
  rtt_open_ready(&a, &loop, NULL);
  rtt_open_ready(&b, &loop, NULL);
  rtt_open_ready(&c, &loop, NULL);
  rtt_acquire(&loop, a.c, "res", 10000, &holder);
  cr_assert_eq(rtt_wait(b.c, "res", 10000, RT_FOREVER, &crossing), 0);
  rtt_run_until_queued(&loop, rc, "res", 2);
  cr_assert_eq(rtt_wait(c.c, "res", 10000, RT_FOREVER, &next), 0);
  rtt_run_until_queued(&loop, rc, "res", 3);

  /* The release grants the canceled request while its cancel is on the
   * way (in whichever order Redis runs the two). */
  cr_assert_eq(rtt_signal(&holder), 0);
  cr_assert_eq(rt_cancel(crossing.lock), 0);
  cr_assert(rtt_run_until(&loop, &crossing.calls, 1, 5000));
  cr_assert_eq(crossing.status, RT_ECANCELED, "the canceled wait got %s",
               rt_err_name(crossing.status));
  cr_assert(rtt_run_until(&loop, &next.calls, 1, 5000),
            "the lock was not handed on past the canceled request");
  cr_assert_eq(next.status, 0);
  cr_assert_gt(next.fence, holder.fence);
  cr_assert(rtt_run_until(&loop, &holder.sig_calls, 1, 5000));
  cr_assert_eq(holder.sig_status, 0);
  rtt_run_for(&loop, 100);
  cr_assert_eq(crossing.calls, 1);
  char q[4][RTT_ID_MAX];
  cr_assert_eq(rtt_queue(rc, rtt_prefix(), "res", 3, q, 4), 1);
  cr_assert_str_eq(q[0], next.id);
  rtt_release(&loop, &next, 0);
  rtt_close(&a);
  rtt_close(&b);
  rtt_close(&c);
  rtt_loop_finish(&loop);
}
