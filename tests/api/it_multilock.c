/* Multi-locks (rt_wait_all): several resources all-or-nothing, taken in
 * the names' byte order so that multi-locks sharing resources never
 * deadlock, against a real server. */
#include <criterion/criterion.h>
#include <string.h>

#include "rt_test.h"

RTT_SUITE(multilock);

typedef struct outcome {
  int calls, status;
  int sig_calls, sig_status;
  rt_multi_t *m;
} outcome;

static void on_all(rt_multi_t *m, int status, void *data) {
  outcome *o = data;
  o->calls++;
  o->status = status;
  o->m = status == 0 ? m : NULL;
}

static void on_released(rt_multi_t *m, int status, void *data) {
  outcome *o = data;
  (void)m;
  o->sig_calls++;
  o->sig_status = status;
  o->m = NULL;
}

/* rt_wait_all on the NULL-terminated string names. */
static int wait_all(rt_client_t *c, const char *const *names, int64_t timeout,
                    outcome *o, rt_multi_t **out) {
  const void *ptrs[8];
  size_t lens[8], n = 0;
  for (; names[n] != NULL; n++) {
    ptrs[n] = names[n];
    lens[n] = strlen(names[n]);
  }
  return rt_wait_all(c, ptrs, lens, n, 10000, timeout, on_all, o, out);
}

#define NAMES(...) ((const char *const[]){__VA_ARGS__, NULL})

Test(multilock, every_resource_is_held_then_released_together) {
  rtt_client a;
  outcome o = {0};
  rtt_open_ready(&a, &loop, NULL);
  cr_assert_eq(wait_all(a.c, NAMES("b", "a", "c"), RT_FOREVER, &o, NULL), 0);
  cr_assert(rtt_run_until(&loop, &o.calls, 1, 5000));
  cr_assert_eq(o.status, 0);
  for (size_t i = 0; i < 3; i++) {
    rt_lock_t *l = rt_multi_lock(o.m, i);
    cr_assert_not_null(l);
    cr_assert_eq(rt_lock_state(l), RT_LOCK_HELD);
    cr_assert_gt(rt_lock_fence(l), 0);
  }
  size_t len;
  cr_assert_eq(memcmp(rt_lock_resource(rt_multi_lock(o.m, 0), &len), "b", 1), 0,
               "locks by the caller's index");
  cr_assert(rtt_queue_len(rc, "a") == 1 && rtt_queue_len(rc, "b") == 1 &&
            rtt_queue_len(rc, "c") == 1);
  cr_assert_eq(rt_signal_all(o.m, on_released, &o), 0);
  cr_assert(rtt_run_until(&loop, &o.sig_calls, 1, 5000));
  cr_assert_eq(o.sig_status, 0);
  cr_assert(rtt_queue_len(rc, "a") == 0 && rtt_queue_len(rc, "b") == 0 &&
            rtt_queue_len(rc, "c") == 0);
  rtt_close(&a);
  rtt_loop_finish(&loop);
}

Test(multilock, a_failed_wait_gives_back_what_it_took) {
  rtt_client a, b;
  rtt_req held = {0};
  outcome o = {0};
  rtt_open_ready(&a, &loop, NULL);
  rtt_open_ready(&b, &loop, NULL);
  rtt_acquire(&loop, a.c, "m2", 10000, &held);
  /* "m1" comes first and is taken; "m2" is busy past the deadline. */
  cr_assert_eq(wait_all(b.c, NAMES("m2", "m1"), 300, &o, NULL), 0);
  cr_assert(rtt_run_until(&loop, &o.calls, 1, 5000));
  cr_assert_eq(o.status, RT_EWAITTIMEOUT);
  cr_assert_eq(rtt_queue_len(rc, "m1"), 0, "m1 was given back");
  cr_assert_eq(rtt_queue_len(rc, "m2"), 1, "only the holder is left");
  rtt_release(&loop, &held, 0);
  rtt_close(&a);
  rtt_close(&b);
  rtt_loop_finish(&loop);
}

Test(multilock, a_canceled_wait_gives_back_what_it_took) {
  rtt_client a, b;
  rtt_req held = {0};
  outcome o = {0};
  rt_multi_t *m;
  rtt_open_ready(&a, &loop, NULL);
  rtt_open_ready(&b, &loop, NULL);
  rtt_acquire(&loop, a.c, "n2", 10000, &held);
  cr_assert_eq(wait_all(b.c, NAMES("n1", "n2"), RT_FOREVER, &o, &m), 0);
  rtt_run_until_queued(&loop, rc, "n2", 2);
  cr_assert_eq(rt_signal_all(m, on_released, &o), RT_ENOTHELD);
  cr_assert_eq(rt_cancel_all(m), 0);
  cr_assert(rtt_run_until(&loop, &o.calls, 1, 5000));
  cr_assert_eq(o.status, RT_ECANCELED);
  cr_assert_eq(rtt_queue_len(rc, "n1"), 0);
  cr_assert_eq(rtt_queue_len(rc, "n2"), 1);
  rtt_release(&loop, &held, 0);
  rtt_close(&a);
  rtt_close(&b);
  rtt_loop_finish(&loop);
}

/* Two clients that hold each multi-lock briefly and ask again. */
typedef struct cycler {
  rt_client_t *c;
  const char *const *names;
  int rounds, done, failed;
  outcome o;
} cycler;

static void cycle(cycler *y);

static void cycled(rt_multi_t *m, int status, void *data) {
  cycler *y = data;
  (void)m;
  y->failed |= status != 0;
  y->done++;
  cycle(y);
}

static void cycle_held(rt_multi_t *m, int status, void *data) {
  cycler *y = data;
  if (status != 0 || rt_signal_all(m, cycled, y) != 0)
    y->failed = 1;
}

static void cycle(cycler *y) {
  if (y->done == y->rounds || y->failed)
    return;
  const void *ptrs[2] = {y->names[0], y->names[1]};
  size_t lens[2] = {strlen(y->names[0]), strlen(y->names[1])};
  if (rt_wait_all(y->c, ptrs, lens, 2, 10000, 5000, cycle_held, y, NULL) != 0)
    y->failed = 1;
}

static cycler *pair[2];

static int pair_over(void *arg) {
  (void)arg;
  for (int i = 0; i < 2; i++)
    if (pair[i]->done < pair[i]->rounds && !pair[i]->failed)
      return 0;
  return 1;
}

Test(multilock, opposite_orders_never_deadlock) {
  rtt_client a, b;
  rtt_open_ready(&a, &loop, NULL);
  rtt_open_ready(&b, &loop, NULL);
  cycler x = {a.c, NAMES("p", "q"), 30, 0, 0, {0}};
  cycler y = {b.c, NAMES("q", "p"), 30, 0, 0, {0}};
  cycle(&x);
  cycle(&y);
  pair[0] = &x;
  pair[1] = &y;
  cr_assert(rtt_run_until_fn(&loop, pair_over, NULL, 20000));
  cr_assert(!x.failed && !y.failed, "a wait failed (a deadlock times out)");
  cr_assert_eq(x.done + y.done, 60);
  rtt_close(&a);
  rtt_close(&b);
  rtt_loop_finish(&loop);
}

Test(multilock, bad_arguments_are_refused) {
  rtt_client a;
  outcome o = {0};
  rtt_open_ready(&a, &loop, NULL);
  cr_assert_eq(wait_all(a.c, NAMES("d", "e", "d"), 1000, &o, NULL), RT_EINVAL,
               "a name twice would wait behind itself");
  cr_assert_eq(rt_wait_all(a.c, NULL, NULL, 0, 1000, 1000, on_all, &o, NULL),
               RT_EINVAL);
  cr_assert_eq(wait_all(a.c, NAMES("d", ""), 1000, &o, NULL), RT_ENAMEEMPTY);
  cr_assert_eq(o.calls, 0);
  rtt_close(&a);
  rtt_loop_finish(&loop);
}

/* The case: a multi-lock with an 800 ms lease takes "ka", then
 * waits about 1.1 s for "kb". "ka"'s lease must not end meanwhile (another
 * client waits for it), and when 0 is reported every lock is held with a
 * running lease, by the client and by Redis. */
Test(multilock, a_resource_taken_first_is_still_held_when_the_last_comes) {
  rtt_client a, b, c;
  rtt_req busy = {0}, other = {0};
  outcome o = {0};
  rtt_open_ready(&a, &loop, NULL);
  rtt_open_ready(&b, &loop, NULL);
  rtt_open_ready(&c, &loop, NULL);
  rtt_acquire(&loop, a.c, "kb", 10000, &busy);
  const void *names[] = {"ka", "kb"};
  size_t lens[] = {2, 2};
  cr_assert_eq(
      rt_wait_all(b.c, names, lens, 2, 800, RT_FOREVER, on_all, &o, NULL), 0);
  rtt_run_until_queued(&loop, rc, "kb", 2); /* "ka" is held */
  rtt_wait_queued(&loop, c.c, "ka", 10000, &other);
  rtt_run_for(&loop, 1100); /* past "ka"'s first lease */
  cr_assert_eq(other.calls, 0,
               "ka was granted to another while the multi-lock "
               "waited for kb");
  rtt_release(&loop, &busy, 0);
  cr_assert(rtt_run_until(&loop, &o.calls, 1, 5000));
  cr_assert_eq(o.status, 0);
  cr_assert_eq(other.calls, 0, "ka is someone else's");
  for (size_t i = 0; i < 2; i++) {
    rt_lock_t *l = rt_multi_lock(o.m, i);
    cr_assert_eq(rt_lock_state(l), RT_LOCK_HELD);
    cr_assert_gt(rt_lock_lease_left_ms(l), 400, "lock %zu: lease nearly over",
                 i);
  }
  cr_assert_eq(rt_signal_all(o.m, on_released, &o), 0);
  cr_assert(rtt_run_until(&loop, &o.sig_calls, 1, 5000));
  cr_assert_eq(o.sig_status, 0, "a lease had ended when reported held");
  rtt_expect_grant(&loop, &other, 5000, "the next waiter of ka");
  rtt_release(&loop, &other, 0);
  rtt_close(&a);
  rtt_close(&b);
  rtt_close(&c);
  rtt_loop_finish(&loop);
}
