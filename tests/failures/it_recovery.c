/* Recovery on the shared server: the key space cleans up after itself,
 * the failover hold grants nothing while a lost lease may run, and a grant
 * to a request its client gave up on (of every kind) is handed on.
 * Dropped connections are in it_conn_faults.c. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_test.h"

RTT_SUITE(recovery);

Test(recovery, a_released_resource_leaves_nothing_and_its_keys_expire) {
  rtt_client a;
  rtt_req r = {0}, w = {0};
  char qkey[256], hkey[256], mkey[256];
  size_t ql = rtt_key(qkey, sizeof(qkey), rtt_prefix(), "res", 3, 'q');
  size_t hl = rtt_key(hkey, sizeof(hkey), rtt_prefix(), "res", 3, 'h');
  size_t ml = rtt_key(mkey, sizeof(mkey), rtt_prefix(), "res", 3, 'm');
  rtt_open_ready(&a, &loop, NULL);
  rtt_acquire(&loop, a.c, "res", 2000, &r);
  cr_assert_eq(rtt_wait(a.c, "res", 2000, RT_FOREVER, &w), 0);
  rtt_run_until_queued(&loop, rc, "res", 2);

  /* Even if every client vanished now, no key would stay forever: the
   * holder's lasts its lease, the queue's the lease plus a grace. */
  long long pttl = rtt_int(rc, "PTTL %b", hkey, hl);
  cr_assert(pttl > 0 && pttl <= 2000, "holder key PTTL %lld", pttl);
  pttl = rtt_int(rc, "PTTL %b", qkey, ql);
  cr_assert(pttl > 2000 && pttl <= 12000, "queue PTTL %lld", pttl);
  pttl = rtt_int(rc, "PTTL %b", mkey, ml);
  cr_assert(pttl > 2000 && pttl <= 12000, "member hash PTTL %lld", pttl);

  rtt_release(&loop, &r, 0);
  cr_assert(rtt_run_until(&loop, &w.calls, 1, 5000));
  rtt_release(&loop, &w, 0);
  cr_assert_eq(rtt_int(rc, "EXISTS %b %b %b", qkey, ql, hkey, hl, mkey, ml), 0,
               "an idle resource left keys behind");
  rtt_close(&a);
  rtt_loop_finish(&loop);
}

/* A failover to a replica that missed a grant, as the new master sees it:
 * the holder's keys are gone, and the era key holds the old master's
 * replication id. With failover_fence_ms = hold, A holds "fo" for hold
 * ms; after the "failover" B waits. Returns when B was granted, in ms
 * after the failover; *a_end: when A's lease ended, in ms after it. */
static int64_t failover_with_hold(int64_t hold, const char *name,
                                  int64_t *first_ms, int64_t *a_end) {
  rtt_client a, b;
  rt_options_t o;
  rtt_req ra, rb;
  char era[300], qk[300], hk[300], mk[300];
  snprintf(era, sizeof(era), "%s:c:era", rtt_prefix());
  rtt_key(qk, sizeof(qk), rtt_prefix(), name, strlen(name), 'q');
  rtt_key(hk, sizeof(hk), rtt_prefix(), name, strlen(name), 'h');
  rtt_key(mk, sizeof(mk), rtt_prefix(), name, strlen(name), 'm');
  rtt_int(rc, "DEL %s", era);
  rtt_options(&o);
  o.failover_fence_ms = hold;
  rtt_open_ready(&a, &loop, &o);
  rtt_open_ready(&b, &loop, &o);
  memset(&ra, 0, sizeof(ra));
  memset(&rb, 0, sizeof(rb));
  uint64_t t0 = rtt_now_ms();
  cr_assert_eq(rtt_wait(a.c, name, 2000, RT_FOREVER, &ra), 0);
  /* A server's first use is an era of its own: held off too. */
  rtt_expect_grant(&loop, &ra, hold + 5000, "A, the first holder");
  *first_ms = (int64_t)(ra.at_ms - t0);
  uint64_t a_deadline = ra.at_ms + (uint64_t)ra.lease_ms;
  /* The failover: the new master lacks A's grant and its era key names
   * the old master's replication id (replicated from it). */
  rtt_int(rc, "DEL %s %s %s", qk, hk, mk);
  rtt_ok(rc, "SET %s %s:0", era, "00000000000000000000000000000000000000aa");
  uint64_t t1 = rtt_now_ms();
  cr_assert_eq(rtt_wait(b.c, name, 2000, RT_FOREVER, &rb), 0);
  rtt_expect_grant(&loop, &rb, hold + 5000, "B, after the failover");
  *a_end = (int64_t)(a_deadline - t1);
  int64_t waited = (int64_t)(rb.at_ms - t1);
  rtt_release(&loop, &rb, 0);
  rtt_close(&a);
  rtt_close(&b);
  rtt_int(rc, "DEL %s", era);
  return waited;
}

/* failover_fence_ms: after a failover that lost a grant, nothing is
 * granted before the lost holder's lease (at most the hold) ended; without
 * it the next waiter is granted at once, beside the holder. Prints the
 * time without a grant after the failover, with and without the hold. */
Test(recovery, the_failover_hold_grants_nothing_while_a_lost_lease_may_run) {
  int64_t first, a_end, first0, a_end0;
  int64_t off = failover_with_hold(0, "fo0", &first0, &a_end0);
  int64_t on = failover_with_hold(2000, "fo1", &first, &a_end);
  printf("failover hold: first grant after %lld ms (%lld without); after the "
         "failover, the next grant after %lld ms with failover_fence_ms 2000 "
         "(the lost lease ended %lld ms after it), %lld ms without\n",
         (long long)first, (long long)first0, (long long)on, (long long)a_end,
         (long long)off);
  cr_assert_gt(a_end0, off, "without the hold B overlaps A's lease");
  /* + 5: two clocks (the server's ms, the test's) rounded apart. */
  cr_assert_geq(on + 5, a_end,
                "B was granted %lld ms after the failover, "
                "while A's lease ran until %lld ms",
                (long long)on, (long long)a_end);
  cr_assert_geq(first, 1900, "a server's first use is held off");
}

/* The hold covers the other kinds too: on a server whose era is new (its
 * first use here), a semaphore's try is refused and its wait is granted
 * only once the hold ended. */
Test(recovery, the_failover_hold_covers_semaphores) {
  rtt_client a;
  rt_options_t o;
  rtt_req rt, rw;
  char era[300];
  rt_request_t sem = {RT_KIND_SEMAPHORE, 1, 3, 0, NULL, 0};
  snprintf(era, sizeof(era), "%s:c:era", rtt_prefix());
  rtt_int(rc, "DEL %s", era);
  rtt_options(&o);
  o.failover_fence_ms = 1500;
  rtt_open_ready(&a, &loop, &o);
  memset(&rt, 0, sizeof(rt));
  memset(&rw, 0, sizeof(rw));
  uint64_t t0 = rtt_now_ms();
  cr_assert_eq(rt_try_lock_ex(a.c, "fs", 2, &sem, 2000, rtt_lock_cb, &rt), 0);
  RTT_RUN_UNTIL(&loop, rt.calls == 1, 5000);
  cr_assert_eq(rt.status, RT_EBUSY, "a try while held off: %s",
               rt_err_name(rt.status));
  cr_assert_eq(rtt_wait_ex(a.c, "fs", &sem, 2000, RT_FOREVER, &rw), 0);
  rtt_expect_grant(&loop, &rw, 6000, "the semaphore's waiter");
  cr_assert_geq(rw.at_ms - t0, 1500 - 5, "granted %llu ms into the hold",
                (unsigned long long)(rw.at_ms - t0));
  rtt_release(&loop, &rw, 0);
  rtt_close(&a);
  rtt_int(rc, "DEL %s", era);
}

/* ---- stale state brought back by a failover -------------------------------- */

static int positioned(void *arg) {
  rtt_req *r = arg;
  return r->calls > 0 || (r->lock != NULL && rt_lock_position(r->lock) > 0);
}

/* A replica that missed a cancel and a release takes over: DUMP of the
 * queue keys (qs, ms: their suffixes) while b waits, RESTORE once b
 * canceled and a released. Redis then grants b's stale entry to b's live
 * client, which must hand it on at once rather than let it run its 10 s
 * lease in front of c. */
static void stale_entry_is_handed_on(const char *name, const rt_request_t *k,
                                     char qs, char ms) {
  rtt_client a, b, c;
  rtt_req held = {0}, gone = {0}, next = {0};
  char qkey[256], mkey[256];
  size_t ql = rtt_key(qkey, sizeof(qkey), rtt_prefix(), name, strlen(name), qs);
  size_t ml = rtt_key(mkey, sizeof(mkey), rtt_prefix(), name, strlen(name), ms);
  rtt_open_ready(&a, &loop, NULL);
  rtt_open_ready(&b, &loop, NULL);
  rtt_open_ready(&c, &loop, NULL);
  cr_assert_eq(rtt_wait_ex(a.c, name, k, 10000, RT_FOREVER, &held), 0);
  cr_assert(rtt_run_until(&loop, &held.calls, 1, 5000));
  cr_assert_eq(held.status, 0);
  cr_assert_eq(rtt_wait_ex(b.c, name, k, 10000, RT_FOREVER, &gone), 0);
  cr_assert(rtt_run_until_fn(&loop, positioned, &gone, 5000));
  cr_assert_eq(gone.calls, 0);

  redisReply *q = rtt_cmd(rc, "DUMP %b", qkey, ql);
  redisReply *m = rtt_cmd(rc, "DUMP %b", mkey, ml);
  cr_assert(q->type == REDIS_REPLY_STRING && m->type == REDIS_REPLY_STRING,
            "the queue keys to copy are missing");
  cr_assert_eq(rt_cancel(gone.lock), 0);
  cr_assert(rtt_run_until(&loop, &gone.calls, 1, 5000));
  cr_assert_eq(gone.status, RT_ECANCELED);
  rtt_release(&loop, &held, 0);
  rtt_ok(rc, "RESTORE %b 20000 %b REPLACE", qkey, ql, q->str, q->len);
  rtt_ok(rc, "RESTORE %b 20000 %b REPLACE", mkey, ml, m->str, m->len);
  freeReplyObject(q);
  freeReplyObject(m);

  /* c's enqueue grants b's old entry first (b's client is subscribed). */
  uint64_t t0 = rtt_now_ms();
  cr_assert_eq(rtt_wait_ex(c.c, name, k, 10000, 9000, &next), 0);
  rtt_expect_grant(&loop, &next, 3000, "the waiter behind a stale entry");
  printf("stale entry of %s: the waiter behind it was granted %llu ms after "
         "its wait began (the stale lease: 10000 ms)\n",
         name, (unsigned long long)(next.at_ms - t0));
  cr_assert_eq(gone.calls, 1, "the canceled wait was reported again");
  rtt_release(&loop, &next, 0);
  rtt_close_all(&loop, &a, &b, &c, NULL);
}

Test(recovery, a_grant_to_a_request_its_client_gave_up_on_is_handed_on) {
  stale_entry_is_handed_on("stale", NULL, 'q', 'm');
}

Test(recovery, a_stale_semaphore_entry_is_handed_on) {
  rt_request_t sem = {.kind = RT_KIND_SEMAPHORE, .permits = 1, .of = 1};
  stale_entry_is_handed_on("stale-sem", &sem, 'Q', 'M');
}

Test(recovery, a_stale_writer_entry_is_handed_on) {
  rt_request_t writer = {.kind = RT_KIND_EXCLUSIVE};
  stale_entry_is_handed_on("stale-rw", &writer, 'Q', 'M');
}

Test(recovery, a_stale_candidate_entry_is_handed_on) {
  rt_request_t cand = {.kind = RT_KIND_ELECTION, .value = "v", .value_len = 1};
  stale_entry_is_handed_on("stale-e", &cand, 'Q', 'M');
}
