/* Clients that die or leave, on a private redis-server: a SIGKILLed
 * waiter is skipped at once when its turn comes; no key stays once every
 * client closed; what killed clients abandon expires by itself. */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "redturn.h"
#include "rt_test.h"

RTT_LOOP_SUITE(dead_clients, 60);

Test(dead_clients, a_killed_waiter_is_skipped_at_once_when_its_turn_comes) {
  rtt_private p;
  rtt_child ch;
  rtt_client a, b;
  rtt_req ra = {0}, rb = {0};
  char cid[RTT_ID_MAX];
  rtt_private_start(&p, NULL);
  rtt_fork_requester(&ch, p.srv.port, "x", 20000, 0);
  rtt_open_ready(&a, &loop, &p.opts);
  rtt_open_ready(&b, &loop, &p.opts);
  redisContext *adm = p.adm;

  rtt_acquire(&loop, a.c, "x", 20000, &ra);
  rtt_requester_id(&ch, cid);
  rtt_wait_queued(&loop, b.c, "x", 20000, &rb);
  char ids[8][RTT_ID_MAX];
  cr_assert_eq(rtt_queue(adm, rtt_prefix(), "x", 1, ids, 8), 3);
  cr_assert_str_eq(ids[1], cid);
  rtt_child_kill(&ch);
  /* Let Redis see the closed connections (it does within a few ms). */
  rtt_sleep_ms(50);

  uint64_t t0 = rtt_now_ms();
  rtt_release(&loop, &ra, 0);
  rtt_expect_grant(&loop, &rb, 3000, "the live waiter behind a dead one");
  uint64_t took = rb.at_ms - t0;
  cr_log_info("live waiter granted %llu ms after the release",
              (unsigned long long)took);
  cr_assert_lt(took, 500, "the dead waiter held the queue for %llu ms",
               (unsigned long long)took);
  cr_assert_gt(rb.fence, ra.fence);
  cr_assert_eq(rtt_queue(adm, rtt_prefix(), "x", 1, ids, 8), 1);
  cr_assert_str_eq(ids[0], rb.id);
  rtt_release(&loop, &rb, 0);
  rtt_close_all(&loop, &a, &b, NULL);
  rtt_private_stop(&p);
}

/* Every way a request can end (a handoff, a wait deadline, try-locks, a
 * cancel, locks held and waited for when their clients close, a lease that
 * runs out and is reaped): once every client closed, no key of any
 * resource is left. Fences need no key to stay behind (they come from the
 * server clock), so an idle resource costs nothing. */
Test(dead_clients, after_every_client_closed_no_key_stays) {
  rtt_private p;
  rtt_client c1, c2, c3;
  rtt_req a = {0}, b = {0}, d = {0}, t1 = {0}, t2 = {0}, q = {0}, h1 = {0},
          h2 = {0}, e1 = {0}, e2 = {0};
  rtt_private_start(&p, NULL);
  rtt_open_ready(&c1, &loop, &p.opts);
  rtt_open_ready(&c2, &loop, &p.opts);
  rtt_open_ready(&c3, &loop, &p.opts);
  redisContext *adm = p.adm;

  /* r1: a handoff and a deadline. */
  rtt_acquire(&loop, c1.c, "r1", 10000, &a);
  rtt_wait_queued(&loop, c2.c, "r1", 10000, &b);
  cr_assert_eq(rtt_wait(c3.c, "r1", 10000, 100, &d), 0);
  RTT_RUN_UNTIL(&loop, d.calls > 0, 2000);
  cr_assert_eq(d.status, RT_EWAITTIMEOUT);
  rtt_release(&loop, &a, 0);
  rtt_expect_grant(&loop, &b, 2000, "r1");
  rtt_release(&loop, &b, 0);
  /* r2: try-locks and a cancel. */
  memset(&t1, 0, sizeof(t1));
  memset(&t2, 0, sizeof(t2));
  cr_assert_eq(rtt_try(c1.c, "r2", 10000, &t1), 0);
  RTT_RUN_UNTIL(&loop, t1.calls > 0, 2000);
  cr_assert_eq(t1.status, 0);
  cr_assert_eq(rtt_try(c2.c, "r2", 10000, &t2), 0);
  RTT_RUN_UNTIL(&loop, t2.calls > 0, 2000);
  cr_assert_eq(t2.status, RT_EBUSY);
  rtt_wait_queued(&loop, c3.c, "r2", 10000, &q);
  cr_assert_eq(rt_cancel(q.lock), 0);
  RTT_RUN_UNTIL(&loop, q.calls > 0, 2000);
  cr_assert_eq(q.status, RT_ECANCELED);
  rtt_release(&loop, &t1, 0);
  /* r3: held and waited for when the clients close. */
  rtt_acquire(&loop, c1.c, "r3", 10000, &h1);
  rtt_wait_queued(&loop, c2.c, "r3", 10000, &h2);
  /* r4: a lease that runs out and is reaped. */
  rtt_acquire(&loop, c3.c, "r4", 200, &e1);
  cr_assert_eq(rtt_wait(c2.c, "r4", 10000, 5000, &e2), 0);
  rtt_expect_grant(&loop, &e2, 3000, "r4 after the lease ran out");
  rtt_release(&loop, &e2, 0);
  rtt_release(&loop, &e1, RT_ELOST);

  rtt_close_all(&loop, &c1, &c2, &c3, NULL);

  /* Nothing else writes to this private server: every key would be ours. */
  redisReply *r = rtt_cmd(adm, "SCAN 0 MATCH * COUNT 10000");
  cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
  redisReply *keys = r->element[1];
  for (size_t i = 0; i < keys->elements; i++)
    cr_log_error(
        "key left: %s (PTTL %lld)", keys->element[i]->str,
        rtt_int(adm, "PTTL %b", keys->element[i]->str, keys->element[i]->len));
  cr_assert_eq(keys->elements, 0, "%zu keys left after every client closed",
               keys->elements);
  freeReplyObject(r);
  cr_assert_eq(rtt_int(adm, "DBSIZE"), 0);
  for (int i = 1; i <= 4; i++) {
    char name[8];
    snprintf(name, sizeof(name), "r%d", i);
    cr_assert_eq(rtt_qlen(adm, rtt_prefix(), name, strlen(name)), 0,
                 "%s still has a holder or waiters", name);
  }
  rtt_private_stop(&p);
}

Test(dead_clients, a_queue_abandoned_by_killed_clients_expires_by_itself) {
  rtt_private p;
  rtt_child holder, waiter;
  char hid[RTT_ID_MAX], wid[RTT_ID_MAX];
  rtt_private_start(&p, NULL);
  rtt_fork_requester(&holder, p.srv.port, "x", 3000, 1);
  rtt_fork_requester(&waiter, p.srv.port, "x", 3000, 0);
  rtt_requester_id(&holder, hid);
  rtt_requester_id(&waiter, wid);
  rtt_child_kill(&holder);
  rtt_child_kill(&waiter);
  redisContext *adm = p.adm;
  char ids[8][RTT_ID_MAX];
  cr_assert_eq(rtt_queue(adm, rtt_prefix(), "x", 1, ids, 8), 2);
  cr_assert_str_eq(ids[0], hid);
  cr_assert_str_eq(ids[1], wid);
  /* Nobody is left to release, cancel or reap. The holder record ends
   * with its lease (its own PX); the queue and the member hash were set,
   * when the waiter joined, to the lease left plus 10 s. */
  const char *pfx = rtt_prefix();
  long long hpttl = rtt_int(adm, "PTTL %s:{x}:h", pfx);
  long long qpttl = rtt_int(adm, "PTTL %s:{x}:q", pfx);
  long long mpttl = rtt_int(adm, "PTTL %s:{x}:m", pfx);
  cr_log_info("abandoned resource: PTTL h %lld, q %lld, m %lld ms (lease "
              "3000 ms)",
              hpttl, qpttl, mpttl);
  cr_assert(hpttl > 0 && hpttl <= 3000, "PTTL h %lld", hpttl);
  cr_assert(qpttl > 10000 && qpttl <= 13000, "PTTL q %lld", qpttl);
  cr_assert(mpttl > 10000 && mpttl <= 13000, "PTTL m %lld", mpttl);
  /* The lease ends: the holder record is gone without anyone reaping it,
   * and what the dead waiter left behind still expires by itself. */
  rtt_sleep_ms(hpttl + 100);
  cr_assert_eq(rtt_int(adm, "EXISTS %s:{x}:h", pfx), 0,
               "the holder record outlived its lease");
  cr_assert_eq(rtt_hfield(adm, rtt_prefix(), "x", 1, "f"), -1);
  qpttl = rtt_int(adm, "PTTL %s:{x}:q", pfx);
  mpttl = rtt_int(adm, "PTTL %s:{x}:m", pfx);
  cr_assert(qpttl > 0 && qpttl <= 10000, "PTTL q %lld after the lease", qpttl);
  cr_assert(mpttl > 0 && mpttl <= 10000, "PTTL m %lld after the lease", mpttl);
  rtt_private_stop(&p);
}
