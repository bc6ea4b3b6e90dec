/* rt_synchronize and rt_done: the body runs holding the lock, done always
 * runs once with the first error, and the lock is released on every path. */
#include <criterion/criterion.h>
#include <string.h>

#include "rt_test.h"

RTT_SUITE(sync);

typedef struct scope {
  const char *name;
  int body_calls;
  int done_calls;
  int done_status;
  int body_status; /* what the body passes to rt_done */
  int end_now;     /* the body calls rt_done itself */
  int done_again;  /* rt_done's result when called a second time */
  int owned_calls;
  int owned;
  int owned_status;
  long long qlen_in_body;
  rt_lock_t *lock;
  rt_client_t *client;
} scope;

static void owned_cb(rt_lock_t *l, int status, int owned, void *data) {
  scope *s = data;
  s->owned_calls++;
  s->owned_status = status;
  s->owned = owned;
  /* Now end the body. */
  cr_assert_eq(rt_done(l, s->body_status), 0);
  s->done_again = rt_done(l, 0);
}

static void body_checks_ownership(rt_lock_t *l, void *data) {
  scope *s = data;
  s->body_calls++;
  s->lock = l;
  s->qlen_in_body = rtt_queue_len(rc, s->name);
  cr_assert_eq(rt_lock_state(l), RT_LOCK_HELD);
  cr_assert_eq(rt_owned(l, owned_cb, s), 0);
}

static void body_ends_at_once(rt_lock_t *l, void *data) {
  scope *s = data;
  s->body_calls++;
  s->lock = l;
  s->qlen_in_body = rtt_queue_len(rc, s->name);
  if (s->end_now) {
    cr_assert_eq(rt_done(l, s->body_status), 0);
    s->done_again = rt_done(l, 0);
  }
}

static void done_cb(rt_client_t *c, int status, void *data) {
  scope *s = data;
  s->client = c;
  s->done_calls++;
  s->done_status = status;
}

Test(sync, the_body_runs_holding_the_lock_and_done_gets_0_after_release) {
  rtt_client a;
  scope s = {.name = "res", .body_status = 0};
  rtt_open_ready(&a, &loop, NULL);
  cr_assert_eq(rt_synchronize(a.c, "res", 3, 5000, RT_FOREVER,
                              body_checks_ownership, done_cb, &s),
               0);
  cr_assert_eq(s.body_calls, 0, "the body ran inside rt_synchronize");
  cr_assert(rtt_run_until(&loop, &s.done_calls, 1, 5000));
  cr_assert_eq(s.body_calls, 1);
  cr_assert_eq(s.qlen_in_body, 1);
  cr_assert_eq(s.owned_calls, 1);
  cr_assert_eq(s.owned_status, 0);
  cr_assert_eq(s.owned, 1, "rt_owned inside the body says not owned");
  cr_assert_eq(s.done_again, RT_ERELEASED, "second rt_done: %s",
               rt_err_name(s.done_again));
  cr_assert_eq(s.done_status, 0, "done got %s", rt_err_name(s.done_status));
  cr_assert_eq(s.client, a.c);
  cr_assert_eq(rtt_queue_len(rc, "res"), 0,
               "the lock is still held after done");
  rtt_run_for(&loop, 50);
  cr_assert_eq(s.done_calls, 1);
  rtt_close(&a);
  rtt_loop_finish(&loop);
}

Test(sync, the_bodys_error_reaches_done_and_the_lock_is_still_released) {
  rtt_client a;
  scope s = {.name = "res", .body_status = -77, .end_now = 1};
  rtt_open_ready(&a, &loop, NULL);
  cr_assert_eq(rt_synchronize(a.c, "res", 3, 5000, RT_FOREVER,
                              body_ends_at_once, done_cb, &s),
               0);
  cr_assert(rtt_run_until(&loop, &s.done_calls, 1, 5000));
  cr_assert_eq(s.body_calls, 1);
  cr_assert_eq(s.done_status, -77, "done got %d", s.done_status);
  cr_assert_eq(s.done_again, RT_ERELEASED);
  cr_assert_eq(rtt_queue_len(rc, "res"), 0,
               "the lock is still held after a failed body");
  rtt_close(&a);
  rtt_loop_finish(&loop);
}

typedef struct later_end {
  scope *s;
  uv_timer_t timer;
} later_end;

static void end_body_later(uv_timer_t *t) {
  later_end *le = t->data;
  cr_assert_eq(rt_done(le->s->lock, 0), 0);
  uv_close((uv_handle_t *)t, NULL);
}

Test(sync, the_body_may_end_later_and_waiters_queue_behind_it) {
  rtt_client a, b;
  rtt_req waiter = {0};
  scope s = {.name = "res"};
  later_end le = {&s, {0}};
  rtt_open_ready(&a, &loop, NULL);
  rtt_open_ready(&b, &loop, NULL);
  cr_assert_eq(rt_synchronize(a.c, "res", 3, 5000, RT_FOREVER,
                              body_ends_at_once, done_cb, &s),
               0);
  cr_assert(rtt_run_until(&loop, &s.body_calls, 1, 5000));
  cr_assert_eq(rtt_wait(b.c, "res", 5000, RT_FOREVER, &waiter), 0);
  rtt_run_for(&loop, 200);
  cr_assert_eq(waiter.calls, 0, "granted while the body holds the lock");
  cr_assert_eq(s.done_calls, 0);

  uv_timer_init(&loop, &le.timer);
  le.timer.data = &le;
  uv_timer_start(&le.timer, end_body_later, 10, 0);
  cr_assert(rtt_run_until(&loop, &s.done_calls, 1, 5000));
  cr_assert_eq(s.done_status, 0);
  cr_assert(rtt_run_until(&loop, &waiter.calls, 1, 5000));
  cr_assert_eq(waiter.status, 0);
  rtt_release(&loop, &waiter, 0);
  rtt_close(&a);
  rtt_close(&b);
  rtt_loop_finish(&loop);
}

Test(sync, a_failed_wait_goes_to_done_and_the_body_never_runs) {
  rtt_client a, b;
  rtt_req holder = {0};
  scope s = {.name = "res", .end_now = 1};
  rtt_open_ready(&a, &loop, NULL);
  rtt_open_ready(&b, &loop, NULL);
  rtt_acquire(&loop, a.c, "res", 5000, &holder);
  uv_update_time(&loop);
  uint64_t t0 = rtt_now_ms();
  cr_assert_eq(
      rt_synchronize(b.c, "res", 3, 5000, 200, body_ends_at_once, done_cb, &s),
      0);
  cr_assert(rtt_run_until(&loop, &s.done_calls, 1, 5000));
  cr_assert_eq(s.done_status, RT_EWAITTIMEOUT, "done got %s",
               rt_err_name(s.done_status));
  cr_assert_geq(rtt_now_ms() - t0, 190);
  cr_assert_eq(s.body_calls, 0, "the body ran without the lock");
  cr_assert_eq(rtt_queue_len(rc, "res"), 1);
  rtt_release(&loop, &holder, 0);
  rtt_run_for(&loop, 100);
  cr_assert_eq(s.body_calls, 0);
  cr_assert_eq(s.done_calls, 1);
  rtt_close(&a);
  rtt_close(&b);
  rtt_loop_finish(&loop);
}

static void close_cb_tries_done(rt_client_t *c, void *data) {
  scope *s = data;
  (void)c;
  /* The handle is valid until close_cb returns; done already ran. */
  s->done_again = rt_done(s->lock, 0);
}

Test(sync, closing_the_client_during_the_body_calls_done_once_with_ecanceled) {
  rtt_client a;
  scope s = {.name = "res"};
  rtt_open_ready(&a, &loop, NULL);
  cr_assert_eq(rt_synchronize(a.c, "res", 3, 5000, RT_FOREVER,
                              body_ends_at_once, done_cb, &s),
               0);
  cr_assert(rtt_run_until(&loop, &s.body_calls, 1, 5000));
  cr_assert_eq(s.done_calls, 0);
  cr_assert_eq(rt_client_close(a.c, close_cb_tries_done, &s), 0);
  rtt_loop_finish(&loop);
  cr_assert_eq(s.done_calls, 1, "done ran %d times", s.done_calls);
  cr_assert_eq(s.done_status, RT_ECANCELED, "done got %s",
               rt_err_name(s.done_status));
  cr_assert_eq(s.done_again, RT_ERELEASED, "rt_done after close: %s",
               rt_err_name(s.done_again));
  cr_assert_eq(rtt_queue_len(rc, "res"), 0, "closing left the lock held");
}

Test(sync, closing_the_client_while_synchronize_waits_calls_done_once) {
  rtt_client a, b;
  rtt_req holder = {0};
  scope s = {.name = "res", .end_now = 1};
  rtt_open_ready(&a, &loop, NULL);
  rtt_open_ready(&b, &loop, NULL);
  rtt_acquire(&loop, a.c, "res", 5000, &holder);
  cr_assert_eq(rt_synchronize(b.c, "res", 3, 5000, RT_FOREVER,
                              body_ends_at_once, done_cb, &s),
               0);
  rtt_run_for(&loop, 100);
  rtt_close(&b);
  cr_assert(rtt_run_until(&loop, &b.closes, 1, 5000));
  cr_assert_eq(s.done_calls, 1);
  cr_assert_eq(s.done_status, RT_ECANCELED);
  cr_assert_eq(s.body_calls, 0);
  cr_assert_eq(rtt_queue_len(rc, "res"), 1);
  rtt_release(&loop, &holder, 0);
  rtt_close(&a);
  rtt_loop_finish(&loop);
}

static void nop_body(rt_lock_t *l, void *data) {
  (void)l;
  (void)data;
}

Test(sync, synchronize_and_done_refuse_bad_arguments) {
  rtt_client a;
  rtt_req plain = {0};
  scope s = {.name = "res"};
  rtt_open_ready(&a, &loop, NULL);
  cr_assert_eq(
      rt_synchronize(a.c, "res", 3, 5000, RT_FOREVER, NULL, done_cb, &s),
      RT_ENOCB);
  cr_assert_eq(
      rt_synchronize(a.c, "res", 3, 5000, RT_FOREVER, nop_body, NULL, &s),
      RT_ENOCB);
  cr_assert_eq(
      rt_synchronize(a.c, "", 0, 5000, RT_FOREVER, nop_body, done_cb, &s),
      RT_ENAMEEMPTY);
  cr_assert_eq(
      rt_synchronize(a.c, "res", 3, 0, RT_FOREVER, nop_body, done_cb, &s),
      RT_ETTL);
  cr_assert_eq(rt_synchronize(a.c, "res", 3, 5000, 0, nop_body, done_cb, &s),
               RT_ETIMEOUTARG);
  cr_assert_eq(
      rt_synchronize(NULL, "res", 3, 5000, RT_FOREVER, nop_body, done_cb, &s),
      RT_EINVAL);
  cr_assert_eq(rt_done(NULL, 0), RT_EINVAL);
  /* A lock from rt_wait is not a synchronize lock. */
  rtt_acquire(&loop, a.c, "res", 5000, &plain);
  cr_assert_eq(rt_done(plain.lock, 0), RT_EINVAL);
  cr_assert_eq(rt_lock_state(plain.lock), RT_LOCK_HELD);
  rtt_run_for(&loop, 50);
  cr_assert_eq(s.done_calls, 0);
  rtt_release(&loop, &plain, 0);
  rtt_close(&a);
  rtt_loop_finish(&loop);
}
