/* The blocking API: connect, wait with a deadline, try-lock, extend, owned,
 * signal, interrupts from another thread, two threads with a client each
 * taking turns on one resource without ever overlapping; background
 * renewal (rt_blocking_auto_renew): a holder with a 600 ms lease that
 * sleeps 2 s in its own code keeps the lock while another thread's client
 * waits, and the waiter gets it right after the release; a renewal refused
 * by Redis while the holder sleeps loses the lock (one lost callback, on
 * the helper thread); calls keep working while the helper runs; close with
 * a renewed lock held. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_test.h"

static redisContext *rc;

static void setup(void) { rc = rtt_redis(); }

static void teardown(void) {
  rtt_redis_close(rc);
  rc = NULL;
  rtt_cleanup();
}

TestSuite(blocking, .init = setup, .fini = teardown, .timeout = 60);

static rt_blocking_t *open_ok(void) {
  rt_options_t o;
  rt_blocking_t *b = NULL;
  rtt_options(&o);
  int err = rt_blocking_open(&o, &b);
  cr_assert_eq(err, 0, "rt_blocking_open: %s", rt_err_name(err));
  cr_assert_not_null(b);
  return b;
}

static rt_lock_t *wait_ok(rt_blocking_t *b, const char *name, int64_t ttl) {
  rt_lock_t *l = NULL;
  int err = rt_blocking_wait(b, name, strlen(name), ttl, 5000, &l);
  cr_assert_eq(err, 0, "rt_blocking_wait(%s): %s", name, rt_err_name(err));
  cr_assert_not_null(l);
  return l;
}

Test(blocking, waits_signals_and_hands_on_with_increasing_fences) {
  rt_blocking_t *b = open_ok();
  rt_lock_t *l = wait_ok(b, "res", 5000);
  uint64_t f1 = rt_lock_fence(l);
  cr_assert_geq(f1, 1);
  cr_assert_eq(rt_lock_state(l), RT_LOCK_HELD);
  cr_assert_eq(rt_lock_client(l), rt_blocking_client(b));
  cr_assert_eq(rt_lock_lease_ms(l), 5000);
  cr_assert_eq(rtt_queue_len(rc, "res"), 1);
  cr_assert_eq(rt_blocking_signal(b, l), 0);
  cr_assert_eq(rtt_queue_len(rc, "res"), 0);

  l = wait_ok(b, "res", 5000);
  cr_assert_gt(rt_lock_fence(l), f1);
  cr_assert_eq(rt_blocking_signal(b, l), 0);

  rt_stats_t st;
  rt_client_stats(rt_blocking_client(b), &st);
  cr_assert_eq(st.grants, 2);
  cr_assert_eq(st.releases, 2);
  cr_assert_eq(rt_blocking_close(b), 0);
}

Test(blocking, close_releases_a_held_lock) {
  rt_blocking_t *b = open_ok();
  wait_ok(b, "res", 5000);
  cr_assert_eq(rtt_queue_len(rc, "res"), 1);
  cr_assert_eq(rt_blocking_close(b), 0);
  cr_assert_eq(rtt_queue_len(rc, "res"), 0);
}

Test(blocking, try_lock_is_refused_while_another_client_holds_it) {
  rt_blocking_t *a = open_ok(), *b = open_ok();
  rt_lock_t *la = wait_ok(a, "res", 5000), *lb = (rt_lock_t *)&lb;
  cr_assert_eq(rt_blocking_try_lock(b, "res", 3, 5000, &lb), RT_EBUSY);
  cr_assert_null(lb);
  cr_assert_eq(rtt_queue_len(rc, "res"), 1,
               "a refused try-lock must not queue");
  cr_assert_eq(rt_blocking_signal(a, la), 0);
  cr_assert_eq(rt_blocking_try_lock(b, "res", 3, 5000, &lb), 0);
  cr_assert_not_null(lb);
  cr_assert_eq(rt_lock_state(lb), RT_LOCK_HELD);
  cr_assert_eq(rt_blocking_signal(b, lb), 0);
  cr_assert_eq(rt_blocking_close(a), 0);
  cr_assert_eq(rt_blocking_close(b), 0);
}

Test(blocking, a_wait_gives_up_at_its_deadline_and_leaves_the_queue) {
  rt_blocking_t *a = open_ok(), *b = open_ok();
  rt_lock_t *la = wait_ok(a, "res", 10000), *lb = NULL;
  uint64_t t0 = rtt_now_ms();
  cr_assert_eq(rt_blocking_wait(b, "res", 3, 5000, 200, &lb), RT_EWAITTIMEOUT);
  uint64_t took = rtt_now_ms() - t0;
  cr_assert_null(lb);
  cr_assert_geq(took, 190, "gave up after %llu ms", (unsigned long long)took);
  cr_assert_lt(took, 2000, "gave up after %llu ms", (unsigned long long)took);
  cr_assert_eq(rtt_queue_len(rc, "res"), 1, "the expired wait left the queue");
  cr_assert_eq(rt_blocking_signal(a, la), 0);
  cr_assert_eq(rt_blocking_close(a), 0);
  cr_assert_eq(rt_blocking_close(b), 0);
}

Test(blocking, extend_keeps_the_lock_past_its_first_lease) {
  rt_blocking_t *b = open_ok();
  /* The first lease leaves room for a busy machine's scheduling before the
   * extend (300 ms with a 150 ms sleep ran out once on 2 loaded cores). */
  rt_lock_t *l = wait_ok(b, "res", 1000);
  int owned = -1, locked = -1;
  rtt_sleep_ms(100);
  cr_assert_eq(rt_blocking_extend(b, l, 3000), 0);
  cr_assert_eq(rt_lock_lease_ms(l), 3000);
  rtt_sleep_ms(1000); /* past the first lease */
  cr_assert_eq(rt_blocking_owned(b, l, &owned), 0);
  cr_assert_eq(owned, 1);
  cr_assert_eq(rt_blocking_locked(b, "res", 3, &locked), 0);
  cr_assert_eq(locked, 1);
  cr_assert_eq(rt_blocking_signal(b, l), 0);
  cr_assert_eq(rt_blocking_locked(b, "res", 3, &locked), 0);
  cr_assert_eq(locked, 0);
  cr_assert_eq(rt_blocking_close(b), 0);
}

Test(blocking, a_lock_whose_lease_ran_out_is_reported_lost) {
  rt_blocking_t *b = open_ok();
  rt_lock_t *l = wait_ok(b, "res", 100);
  int owned = -1;
  rtt_sleep_ms(250);
  cr_assert_eq(rt_blocking_owned(b, l, &owned), 0);
  cr_assert_eq(owned, 0);
  cr_assert_eq(rt_blocking_extend(b, l, 1000), RT_ELOST);
  cr_assert_eq(rt_blocking_signal(b, l), RT_ELOST);
  cr_assert_eq(rtt_queue_len(rc, "res"), 0,
               "the release still took the entry out");
  cr_assert_eq(rt_blocking_close(b), 0);
}

typedef struct interrupter {
  rt_blocking_t *b;
  int64_t after_ms;
} interrupter_t;

static void *interrupt_later(void *arg) {
  interrupter_t *it = arg;
  rtt_sleep_ms(it->after_ms);
  rt_blocking_interrupt(it->b);
  return NULL;
}

Test(blocking, an_interrupt_from_another_thread_cancels_the_wait) {
  rt_blocking_t *a = open_ok(), *b = open_ok();
  rt_lock_t *la = wait_ok(a, "res", 10000), *lb = NULL;
  interrupter_t it = {b, 200};
  pthread_t th;
  cr_assert_eq(pthread_create(&th, NULL, interrupt_later, &it), 0);
  uint64_t t0 = rtt_now_ms();
  cr_assert_eq(rt_blocking_wait(b, "res", 3, 5000, RT_FOREVER, &lb),
               RT_ECANCELED);
  cr_assert_geq(rtt_now_ms() - t0, 150);
  pthread_join(th, NULL);
  cr_assert_null(lb);
  cr_assert_eq(rtt_queue_len(rc, "res"), 1, "the canceled wait left the queue");
  cr_assert_eq(rt_blocking_signal(a, la), 0);
  cr_assert_eq(rt_blocking_close(a), 0);
  cr_assert_eq(rt_blocking_close(b), 0);
}

Test(blocking, an_interrupt_before_a_wait_ends_that_wait_only) {
  rt_blocking_t *b = open_ok();
  rt_lock_t *l = NULL;
  rt_blocking_interrupt(b);
  cr_assert_eq(rt_blocking_wait(b, "res", 3, 5000, RT_FOREVER, &l),
               RT_ECANCELED);
  cr_assert_eq(rtt_queue_len(rc, "res"), 0);
  l = wait_ok(b, "res", 5000); /* consumed: this one is granted */
  cr_assert_eq(rt_blocking_signal(b, l), 0);
  cr_assert_eq(rt_blocking_close(b), 0);
}

Test(blocking, open_reports_an_unreachable_server) {
  rt_options_t o;
  char url[64];
  rt_blocking_t *b = (rt_blocking_t *)&b;
  rtt_options(&o);
  snprintf(url, sizeof(url), "redis://127.0.0.1:%d", rtt_free_port());
  o.url = url;
  o.connect_timeout_ms = 2000;
  int err = rt_blocking_open(&o, &b);
  cr_assert_eq(err, RT_ECONNECT, "got %s", rt_err_name(err));
  cr_assert_eq(b, (rt_blocking_t *)&b, "*out must stay untouched");
}

Test(blocking, bad_arguments_are_refused_at_once) {
  rt_options_t o;
  rt_blocking_t *b = NULL, *other;
  rt_lock_t *l = NULL;
  rtt_options(&o);
  o.prefix = "bad{prefix";
  cr_assert_eq(rt_blocking_open(&o, &b), RT_EPREFIX);
  cr_assert_eq(rt_blocking_open(NULL, NULL), RT_EINVAL);

  b = open_ok();
  other = open_ok();
  cr_assert_eq(rt_blocking_wait(b, "", 0, 1000, 1000, &l), RT_ENAMEEMPTY);
  cr_assert_eq(rt_blocking_wait(b, "res", 3, 0, 1000, &l), RT_ETTL);
  cr_assert_eq(rt_blocking_wait(b, "res", 3, 1000, 0, &l), RT_ETIMEOUTARG);
  cr_assert_eq(rt_blocking_wait(b, "res", 3, 1000, 1000, NULL), RT_EINVAL);
  cr_assert_eq(rt_blocking_wait(NULL, "res", 3, 1000, 1000, &l), RT_EINVAL);
  cr_assert_eq(rt_blocking_try_lock(b, "res", 3, 1000, NULL), RT_EINVAL);
  cr_assert_eq(rt_blocking_signal(b, NULL), RT_EINVAL);
  cr_assert_eq(rt_blocking_close(NULL), RT_EINVAL);

  l = wait_ok(b, "res", 5000);
  cr_assert_eq(rt_blocking_signal(other, l), RT_EINVAL,
               "a lock of another rt_blocking_t");
  cr_assert_eq(rt_blocking_extend(b, l, 0), RT_ETTL);
  cr_assert_eq(rt_blocking_owned(b, l, NULL), RT_EINVAL);
  cr_assert_eq(rt_blocking_signal(b, l), 0);
  cr_assert_eq(rtt_queue_len(rc, "res"), 0);
  cr_assert_eq(rt_blocking_close(other), 0);
  cr_assert_eq(rt_blocking_close(b), 0);
}

/* ---- two threads --------------------------------------------------------- */

#define ROUNDS 25

typedef struct shared {
  atomic_int inside; /* threads holding the lock now, per our own count */
  atomic_int overlaps;
  atomic_int grants;
} shared_t;

typedef struct turn {
  shared_t *sh;
  int status;
  uint64_t fences[ROUNDS];
} turn_t;

static void *take_turns(void *arg) {
  turn_t *t = arg;
  rt_options_t o;
  rt_blocking_t *b;
  rtt_options(&o);
  t->status = rt_blocking_open(&o, &b);
  if (t->status != 0)
    return NULL;
  for (int i = 0; i < ROUNDS && t->status == 0; i++) {
    rt_lock_t *l;
    t->status = rt_blocking_wait(b, "shared", 6, 5000, 10000, &l);
    if (t->status != 0)
      break;
    if (atomic_fetch_add(&t->sh->inside, 1) != 0)
      atomic_fetch_add(&t->sh->overlaps, 1);
    atomic_fetch_add(&t->sh->grants, 1);
    t->fences[i] = rt_lock_fence(l);
    rtt_sleep_ms(2);
    atomic_fetch_sub(&t->sh->inside, 1);
    t->status = rt_blocking_signal(b, l);
  }
  int err = rt_blocking_close(b);
  if (t->status == 0)
    t->status = err;
  return NULL;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

Test(blocking, two_threads_with_a_client_each_take_turns_without_overlap) {
  shared_t sh;
  turn_t t[2];
  pthread_t th[2];
  atomic_init(&sh.inside, 0);
  atomic_init(&sh.overlaps, 0);
  atomic_init(&sh.grants, 0);
  (void)rtt_prefix(); /* decided before the threads start */
  for (int i = 0; i < 2; i++) {
    memset(&t[i], 0, sizeof(t[i]));
    t[i].sh = &sh;
    cr_assert_eq(pthread_create(&th[i], NULL, take_turns, &t[i]), 0);
  }
  for (int i = 0; i < 2; i++)
    pthread_join(th[i], NULL);
  for (int i = 0; i < 2; i++)
    cr_assert_eq(t[i].status, 0, "thread %d: %s", i, rt_err_name(t[i].status));
  cr_assert_eq(atomic_load(&sh.overlaps), 0, "two threads held the lock");
  cr_assert_eq(atomic_load(&sh.grants), 2 * ROUNDS);

  /* Every grant got its own fence, and each thread saw them increase. */
  uint64_t all[2 * ROUNDS];
  for (int i = 0; i < 2; i++)
    for (int r = 0; r < ROUNDS; r++) {
      if (r > 0)
        cr_assert_gt(t[i].fences[r], t[i].fences[r - 1]);
      all[i * ROUNDS + r] = t[i].fences[r];
    }
  qsort(all, 2 * ROUNDS, sizeof(all[0]), cmp_u64);
  for (int i = 1; i < 2 * ROUNDS; i++)
    cr_assert_neq(all[i], all[i - 1], "fence %llu granted twice",
                  (unsigned long long)all[i]);
  cr_assert_eq(rtt_queue_len(rc, "shared"), 0);
}

/* ---- time spent outside the calls ------------------------------------------ */

Test(blocking, a_wait_after_an_idle_spell_longer_than_its_timeout_is_granted) {
  rt_blocking_t *b = open_ok();
  rt_lock_t *l = NULL;
  rtt_sleep_ms(2000); /* the private loop does not run meanwhile */
  int err = rt_blocking_wait(b, "res", 3, 5000, 1000, &l);
  cr_assert_eq(err, 0, "a free lock with a 1 s timeout: %s", rt_err_name(err));
  cr_assert_not_null(l);
  cr_assert_eq(rt_blocking_signal(b, l), 0);
  cr_assert_eq(rt_blocking_close(b), 0);
}

Test(blocking, a_wait_after_an_idle_spell_gets_its_whole_timeout) {
  rt_blocking_t *a = open_ok(), *b = open_ok();
  rt_lock_t *la = wait_ok(a, "res", 10000), *lb = NULL;
  rtt_sleep_ms(1500);
  uint64_t t0 = rtt_now_ms();
  cr_assert_eq(rt_blocking_wait(b, "res", 3, 5000, 500, &lb), RT_EWAITTIMEOUT);
  uint64_t took = rtt_now_ms() - t0;
  cr_assert_null(lb);
  cr_assert_geq(took, 450, "gave up after %llu ms", (unsigned long long)took);
  cr_assert_lt(took, 2000, "gave up after %llu ms", (unsigned long long)took);
  cr_assert_eq(rt_blocking_signal(a, la), 0);
  cr_assert_eq(rt_blocking_close(a), 0);
  cr_assert_eq(rt_blocking_close(b), 0);
}

/* ---- background renewal ------------------------------------------------ */

/* Another client, in its own thread, waiting for the lock. */
typedef struct waiter {
  rt_blocking_t *b;
  const char *name;
  int status;
  uint64_t fence;
  atomic_ullong granted_at_ms; /* 0 until granted */
} waiter_t;

static void *wait_in_thread(void *arg) {
  waiter_t *w = arg;
  rt_lock_t *l = NULL;
  w->status = rt_blocking_wait(w->b, w->name, strlen(w->name), 5000, 10000, &l);
  if (w->status == 0) {
    atomic_store(&w->granted_at_ms, rtt_now_ms());
    w->fence = rt_lock_fence(l);
    w->status = rt_blocking_signal(w->b, l);
  }
  return NULL;
}

static void queued_within(const char *name, long long n, int64_t max_ms) {
  uint64_t t0 = rtt_now_ms();
  while (rtt_queue_len(rc, name) < n) {
    cr_assert_lt(rtt_now_ms() - t0, (uint64_t)max_ms, "never queued");
    rtt_sleep_ms(5);
  }
}

Test(blocking, a_holder_sleeping_in_its_own_code_keeps_the_lock) {
  rt_blocking_t *b = open_ok();
  waiter_t w = {.b = open_ok(), .name = "res"};
  atomic_init(&w.granted_at_ms, 0);
  rt_lock_t *l = wait_ok(b, "res", 600);
  uint64_t fence = rt_lock_fence(l);
  cr_assert_eq(rt_blocking_auto_renew(b, l, RT_RENEW_DEFAULT), 0);
  pthread_t th;
  cr_assert_eq(pthread_create(&th, NULL, wait_in_thread, &w), 0);
  queued_within("res", 2, 5000);

  /* User code: 2 s without any call, over three leases. */
  rtt_sleep_ms(2000);
  cr_assert_eq(atomic_load(&w.granted_at_ms), 0,
               "the other client got the lock while it was renewed");
  cr_assert_eq(rtt_holder_field(rc, "res", "f"), (long long)fence);
  int64_t left = rt_blocking_lease_left_ms(b, l);
  cr_assert(left > 0 && left <= 600, "lease left %lld", (long long)left);
  int owned = 0;
  cr_assert_eq(rt_blocking_owned(b, l, &owned), 0);
  cr_assert_eq(owned, 1);
  rtt_sleep_ms(300); /* once more after a call took the loop */
  cr_assert_eq(atomic_load(&w.granted_at_ms), 0);

  uint64_t t0 = rtt_now_ms();
  cr_assert_eq(rt_blocking_signal(b, l), 0);
  pthread_join(th, NULL);
  cr_assert_eq(w.status, 0, "waiter: %s", rt_err_name(w.status));
  uint64_t at = atomic_load(&w.granted_at_ms);
  cr_assert(at >= t0 && at - t0 < 500, "granted %lld ms after the release",
            (long long)(at - t0));
  cr_assert_gt(w.fence, fence);
  rt_stats_t st;
  rt_client_stats(rt_blocking_client(b), &st);
  cr_assert_eq(st.lost, 0);
  cr_assert_eq(rt_blocking_close(w.b), 0);
  cr_assert_eq(rt_blocking_close(b), 0);
  cr_assert_eq(rtt_queue_len(rc, "res"), 0);
}

static atomic_int lost_calls;

static void count_lost(rt_lock_t *l, void *data) {
  (void)l;
  (void)data;
  atomic_fetch_add(&lost_calls, 1);
}

Test(blocking, a_refused_renewal_while_in_user_code_loses_the_lock_once) {
  rt_blocking_t *b = open_ok();
  rt_lock_t *l = wait_ok(b, "res", 600);
  atomic_store(&lost_calls, 0);
  cr_assert_eq(rt_lock_on_lost(l, count_lost), 0);
  cr_assert_eq(rt_blocking_auto_renew(b, l, 100), 0);
  rtt_sleep_ms(300);
  char key[128];
  size_t klen = rtt_key(key, sizeof(key), rtt_prefix(), "res", 3, 'h');
  cr_assert_eq(rtt_int(rc, "DEL %b", key, klen), 1);
  /* Noticed by the helper thread's next renewal, well before the local
   * end of the lease. */
  uint64_t t0 = rtt_now_ms();
  while (atomic_load(&lost_calls) == 0 && rtt_now_ms() - t0 < 3000)
    rtt_sleep_ms(5);
  cr_assert_eq(atomic_load(&lost_calls), 1);
  cr_assert_lt(rtt_now_ms() - t0, 450);
  rtt_sleep_ms(300);
  cr_assert_eq(atomic_load(&lost_calls), 1);
  cr_assert_eq(rt_blocking_lease_left_ms(b, l), 0);
  cr_assert_eq(rt_blocking_auto_renew(b, l, RT_RENEW_DEFAULT), RT_ELOST);
  cr_assert_eq(rt_blocking_signal(b, l), RT_ELOST);
  cr_assert_eq(rt_blocking_close(b), 0);
}

Test(blocking, calls_work_while_the_helper_runs_and_close_releases) {
  rt_blocking_t *b = open_ok(), *other = open_ok();
  rt_lock_t *l = wait_ok(b, "res", 400);
  cr_assert_eq(rt_blocking_auto_renew(NULL, l, RT_RENEW_DEFAULT), RT_EINVAL);
  cr_assert_eq(rt_blocking_auto_renew(other, l, RT_RENEW_DEFAULT), RT_EINVAL);
  cr_assert_eq(rt_blocking_lease_left_ms(other, l), 0);
  cr_assert_eq(rt_blocking_auto_renew(b, l, 400), RT_EINVAL);
  cr_assert_eq(rt_blocking_auto_renew(b, l, RT_RENEW_DEFAULT), 0);

  /* Waits, try-locks, extends and deadlines on b between helper runs. */
  rt_lock_t *l2 = wait_ok(b, "second", 5000);
  rtt_sleep_ms(500);
  cr_assert_eq(rt_blocking_extend(b, l2, 3000), 0);
  cr_assert_gt(rt_blocking_lease_left_ms(b, l2), 2000);
  cr_assert_eq(rt_blocking_signal(b, l2), 0);
  rt_lock_t *busy = NULL;
  cr_assert_eq(rt_blocking_try_lock(other, "res", 3, 1000, &busy), RT_EBUSY);
  cr_assert_eq(rt_blocking_wait(other, "res", 3, 1000, 100, &busy),
               RT_EWAITTIMEOUT);
  /* An interrupt between calls (the helper has the loop) ends b's next
   * wait only; one during a wait ends it. */
  rt_blocking_interrupt(b);
  rtt_sleep_ms(50);
  cr_assert_eq(rt_blocking_wait(b, "third", 5, 1000, 5000, &busy),
               RT_ECANCELED);
  interrupter_t it = {b, 200};
  pthread_t th;
  cr_assert_eq(pthread_create(&th, NULL, interrupt_later, &it), 0);
  cr_assert_eq(rt_blocking_wait(b, "res", 3, 1000, 5000, &busy), RT_ECANCELED);
  pthread_join(th, NULL);
  cr_assert_eq(rtt_queue_len(rc, "res"), 1);
  rtt_sleep_ms(500);
  cr_assert_gt(rt_blocking_lease_left_ms(b, l), 0);

  /* Renewal off: the lease runs out in the background. */
  cr_assert_eq(rt_blocking_auto_renew(b, l, RT_RENEW_OFF), 0);
  rtt_sleep_ms(700);
  cr_assert_eq(rt_blocking_lease_left_ms(b, l), 0);
  cr_assert_eq(rt_blocking_signal(b, l), RT_ELOST);

  /* Close with a renewed lock held releases it. */
  l = wait_ok(b, "res", 400);
  cr_assert_eq(rt_blocking_auto_renew(b, l, RT_RENEW_DEFAULT), 0);
  rtt_sleep_ms(600);
  cr_assert_eq(rtt_queue_len(rc, "res"), 1);
  cr_assert_eq(rt_blocking_close(b), 0);
  cr_assert_eq(rtt_queue_len(rc, "res"), 0);
  cr_assert_eq(rt_blocking_close(other), 0);
}

/* ---- semaphores and read-write locks ------------------------------------------ */

Test(blocking, readers_share_and_a_writer_waits_for_them_until_its_deadline) {
  rt_blocking_t *a = open_ok(), *b = open_ok();
  const rt_request_t shared = {RT_KIND_SHARED, 0, 0, 0, NULL, 0};
  const rt_request_t exclusive = {RT_KIND_EXCLUSIVE, 0, 0, 0, NULL, 0};
  rt_lock_t *r1 = NULL, *r2 = NULL, *w = (rt_lock_t *)&w;
  cr_assert_eq(rt_blocking_wait_ex(a, "rw", 2, &shared, 5000, 2000, &r1), 0);
  cr_assert_eq(rt_blocking_wait_ex(b, "rw", 2, &shared, 5000, 2000, &r2), 0,
               "readers hold together");
  cr_assert_eq(rt_blocking_try_lock_ex(b, "rw", 2, &exclusive, 5000, &w),
               RT_EBUSY);
  cr_assert_null(w);
  cr_assert_eq(rt_blocking_wait_ex(b, "rw", 2, &exclusive, 5000, 200, &w),
               RT_EWAITTIMEOUT, "a writer waits for the readers");
  cr_assert_eq(rt_blocking_signal(a, r1), 0);
  cr_assert_eq(rt_blocking_signal(b, r2), 0);
  cr_assert_eq(rt_blocking_wait_ex(b, "rw", 2, &exclusive, 5000, 2000, &w), 0);
  cr_assert_eq(rt_blocking_signal(b, w), 0);
  cr_assert_eq(rt_blocking_close(a), 0);
  cr_assert_eq(rt_blocking_close(b), 0);
}

Test(blocking, a_semaphore_grants_its_permits_and_no_more) {
  rt_blocking_t *a = open_ok();
  const rt_request_t two = {RT_KIND_SEMAPHORE, 2, 3, 0, NULL, 0};
  rt_lock_t *l1 = NULL, *l2 = NULL;
  cr_assert_eq(rt_blocking_wait_ex(a, "sem", 3, &two, 5000, 2000, &l1), 0);
  cr_assert_eq(rt_blocking_wait_ex(a, "sem", 3, &two, 5000, 200, &l2),
               RT_EWAITTIMEOUT, "2 + 2 of 3");
  cr_assert_eq(rt_blocking_signal(a, l1), 0);
  cr_assert_eq(rt_blocking_wait_ex(a, "sem", 3, &two, 5000, 2000, &l2), 0);
  cr_assert_eq(rt_blocking_signal(a, l2), 0);
  cr_assert_eq(rt_blocking_close(a), 0);
}

/* ---- elections and multi-locks ------------------------------------------------- */

typedef struct proclaimer {
  rt_blocking_t *b;
  rt_lock_t *lock;
  int status;
} proclaimer_t;

static void *proclaim_later(void *arg) {
  proclaimer_t *p = arg;
  rtt_sleep_ms(200);
  p->status = rt_blocking_proclaim(p->b, p->lock, "v3", 2);
  return NULL;
}

Test(blocking,
     an_election_campaigns_proclaims_and_is_watched_change_by_change) {
  rt_blocking_t *a = open_ok(), *b = open_ok();
  const rt_request_t v1 = {RT_KIND_ELECTION, 0, 0, 0, "v1", 2};
  rt_lock_t *lead = NULL;
  rt_leader_copy_t st;
  memset(&st, 0, sizeof(st));
  cr_assert_eq(rt_blocking_wait_ex(a, "vote", 4, &v1, 20000, 2000, &lead), 0);
  cr_assert_eq(rt_blocking_leader_change(b, "vote", 4, 2000, &st), 0);
  cr_assert_str_eq(st.id, rt_lock_id(lead));
  cr_assert_str_eq(st.value, "v1");
  cr_assert_eq(st.fence, rt_lock_fence(lead));
  cr_assert_eq(rt_blocking_leader_change(b, "vote", 4, 300, &st),
               RT_EWAITTIMEOUT, "no change: the deadline");
  cr_assert_str_eq(st.value, "v1");
  cr_assert_eq(rt_blocking_proclaim(a, lead, "v2", 2), 0);
  cr_assert_eq(rt_blocking_leader_change(b, "vote", 4, 2000, &st), 0);
  cr_assert_str_eq(st.value, "v2");
  /* A change made while the call waits, from another thread. */
  proclaimer_t p = {a, lead, -1};
  pthread_t th;
  cr_assert_eq(pthread_create(&th, NULL, proclaim_later, &p), 0);
  uint64_t t0 = rtt_now_ms();
  cr_assert_eq(rt_blocking_leader_change(b, "vote", 4, 5000, &st), 0);
  pthread_join(th, NULL);
  cr_assert_eq(p.status, 0);
  cr_assert_geq(rtt_now_ms() - t0, 150);
  cr_assert_str_eq(st.value, "v3");
  cr_assert_eq(rt_blocking_signal(a, lead), 0); /* resign */
  cr_assert_eq(rt_blocking_leader_change(b, "vote", 4, 2000, &st), 0);
  cr_assert_str_eq(st.id, "", "nobody leads after the resignation");
  cr_assert_eq(rt_blocking_leader_change(b, "vote", 4, -5, &st), RT_EINVAL);
  rt_lock_t *m = wait_ok(a, "mtx", 5000);
  memset(&st, 0, sizeof(st));
  cr_assert_eq(rt_blocking_leader_change(b, "mtx", 3, 2000, &st), RT_EKIND);
  cr_assert_eq(rt_blocking_signal(a, m), 0);
  cr_assert_eq(rt_blocking_close(a), 0);
  cr_assert_eq(rt_blocking_close(b), 0);
}

static void *resign_later(void *arg) {
  proclaimer_t *p = arg;
  rtt_sleep_ms(200);
  p->status = rt_blocking_signal(p->b, p->lock);
  return NULL;
}

/* The loop: leaders campaign, proclaim and resign while a loop of
 * rt_blocking_leader_change() calls watches. Each resignation is reported
 * once (the notice of nobody, with the last fence), the next call's own
 * read of the emptied resource (fence 0) is no news, and fences never go
 * back: the loop sees what one observer sees. */
Test(blocking, a_loop_of_leader_change_calls_never_goes_back) {
  rt_blocking_t *a = open_ok(), *b = open_ok();
  rt_leader_copy_t st;
  memset(&st, 0, sizeof(st));
  uint64_t last = 0;
  for (int round = 0; round < 3; round++) {
    char v[8];
    snprintf(v, sizeof(v), "v%d", round);
    const rt_request_t req = {RT_KIND_ELECTION, 0, 0, 0, v, strlen(v)};
    rt_lock_t *lead = NULL;
    cr_assert_eq(rt_blocking_wait_ex(a, "loop", 4, &req, 20000, 2000, &lead),
                 0);
    cr_assert_eq(rt_blocking_leader_change(b, "loop", 4, 2000, &st), 0);
    cr_assert_str_eq(st.value, v);
    cr_assert_gt(st.fence, last, "round %d: fence went back", round);
    last = st.fence;
    proclaimer_t p = {a, lead, -1};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, resign_later, &p), 0);
    cr_assert_eq(rt_blocking_leader_change(b, "loop", 4, 5000, &st), 0);
    pthread_join(th, NULL);
    cr_assert_eq(p.status, 0);
    cr_assert_str_eq(st.id, "", "round %d: nobody after the resignation",
                     round);
    cr_assert_eq(st.fence, last, "round %d: nobody keeps the last fence",
                 round);
    int err = rt_blocking_leader_change(b, "loop", 4, 300, &st);
    cr_assert_eq(err, RT_EWAITTIMEOUT,
                 "round %d: nobody reported again (%s, fence %llu)", round,
                 rt_err_name(err), (unsigned long long)st.fence);
    cr_assert_eq(st.fence, last);
  }
  cr_assert_eq(rt_blocking_close(a), 0);
  cr_assert_eq(rt_blocking_close(b), 0);
}

Test(blocking, multi_locks_are_all_or_nothing_and_can_be_interrupted) {
  rt_blocking_t *a = open_ok(), *b = open_ok();
  const void *xy[2] = {"x", "y"}, *yz[2] = {"y", "z"};
  const size_t lens[2] = {1, 1};
  rt_multi_t *ma = NULL, *mb = NULL;
  cr_assert_eq(rt_blocking_wait_all(a, xy, lens, 2, 10000, 2000, &ma), 0);
  cr_assert_not_null(rt_multi_lock(ma, 1));
  cr_assert_eq(rt_blocking_wait_all(b, yz, lens, 2, 10000, 300, &mb),
               RT_EWAITTIMEOUT, "y is held");
  cr_assert_null(mb);
  cr_assert_eq(rtt_queue_len(rc, "z"), 0, "z taken first was given back");
  interrupter_t it = {b, 200};
  pthread_t th;
  cr_assert_eq(pthread_create(&th, NULL, interrupt_later, &it), 0);
  cr_assert_eq(rt_blocking_wait_all(b, yz, lens, 2, 10000, RT_FOREVER, &mb),
               RT_ECANCELED);
  pthread_join(th, NULL);
  cr_assert_eq(rt_blocking_signal_all(a, ma), 0);
  cr_assert_eq(rt_blocking_wait_all(b, yz, lens, 2, 10000, 2000, &mb), 0);
  cr_assert_eq(rt_blocking_signal_all(b, mb), 0);
  cr_assert_eq(rt_blocking_signal_all(b, NULL), RT_EINVAL);
  cr_assert_eq(rt_blocking_close(a), 0);
  cr_assert_eq(rt_blocking_close(b), 0);
}
