/* Queries: rt_owned, rt_locked and rt_inspect against what Redis holds. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "rt_test.h"

RTT_SUITE(queries);

/* rt_owned and wait for the answer: 0 or 1. */
static int owned(rtt_req *r) {
  rtt_answer a = {0};
  cr_assert_eq(rt_owned(r->lock, rtt_owned_cb, &a), 0);
  cr_assert_eq(a.calls, 0, "rt_owned called back from inside the call");
  cr_assert(rtt_run_until(&loop, &a.calls, 1, 5000));
  cr_assert_eq(a.status, 0, "rt_owned: %s", rt_err_name(a.status));
  return a.value;
}

static int locked(rt_client_t *c, const char *name) {
  rtt_answer a = {0};
  cr_assert_eq(rt_locked(c, name, strlen(name), rtt_locked_cb, &a), 0);
  cr_assert(rtt_run_until(&loop, &a.calls, 1, 5000));
  cr_assert_eq(a.status, 0, "rt_locked: %s", rt_err_name(a.status));
  return a.value;
}

/* A copy of what rt_inspect reported (info is only valid in the cb). */
typedef struct snapshot {
  int calls, status;
  int locked;
  int has_holder;
  char holder[RTT_ID_MAX];
  char holder_client[33];
  uint64_t fence;
  int64_t lease_left_ms, held_ms, server_time_ms;
  size_t queue_len, nwaiters;
  char waiters[16][RTT_ID_MAX];
  int has_holder_label;
  char holder_label[RT_LABEL_MAX + 1];
  char waiter_labels[16][RT_LABEL_MAX + 1];
} snapshot;

static void inspect_cb(rt_client_t *c, int status, const rt_queue_info_t *info,
                       void *data) {
  snapshot *s = data;
  (void)c;
  s->calls++;
  s->status = status;
  if (status != 0)
    return;
  cr_assert_not_null(info);
  s->locked = info->locked;
  s->has_holder = info->holder != NULL;
  snprintf(s->holder, sizeof(s->holder), "%s",
           info->holder ? info->holder : "");
  memcpy(s->holder_client, info->holder_client, sizeof(s->holder_client));
  s->fence = info->fence;
  s->lease_left_ms = info->lease_left_ms;
  s->held_ms = info->held_ms;
  s->server_time_ms = info->server_time_ms;
  s->queue_len = info->queue_len;
  s->nwaiters = info->nwaiters;
  for (size_t i = 0; i < info->nwaiters && i < 16; i++) {
    snprintf(s->waiters[i], RTT_ID_MAX, "%s", info->waiters[i]);
    snprintf(s->waiter_labels[i], RT_LABEL_MAX + 1, "%s",
             info->waiter_labels[i]);
  }
  s->has_holder_label = info->holder_label != NULL;
  snprintf(s->holder_label, sizeof(s->holder_label), "%s",
           info->holder_label ? info->holder_label : "");
}

static void inspect(rt_client_t *c, const char *name, size_t max, snapshot *s) {
  memset(s, 0, sizeof(*s));
  cr_assert_eq(rt_inspect(c, name, strlen(name), max, inspect_cb, s), 0);
  cr_assert(rtt_run_until(&loop, &s->calls, 1, 5000));
  cr_assert_eq(s->status, 0, "rt_inspect: %s", rt_err_name(s->status));
}

Test(queries,
     owned_is_1_while_held_and_0_once_the_lease_expired_and_was_reaped) {
  rtt_client a, b;
  rtt_req holder = {0}, waiter = {0};
  rtt_open_ready(&a, &loop, NULL);
  rtt_open_ready(&b, &loop, NULL);
  rtt_acquire(&loop, a.c, "res", 300, &holder);
  cr_assert_eq(owned(&holder), 1);

  cr_assert_eq(rtt_wait(b.c, "res", 5000, RT_FOREVER, &waiter), 0);
  cr_assert(rtt_run_until(&loop, &waiter.calls, 1, 3000),
            "the expired holder was not reaped");
  cr_assert_eq(owned(&holder), 0);
  cr_assert_eq(rt_lock_state(holder.lock), RT_LOCK_LOST);
  cr_assert_eq(owned(&waiter), 1);

  rtt_release(&loop, &holder, RT_ELOST);
  rtt_release(&loop, &waiter, 0);
  rtt_close(&a);
  rtt_close(&b);
  rtt_loop_finish(&loop);
}

Test(queries, owned_is_0_once_the_lease_ran_out_even_unreaped) {
  rtt_client a;
  rtt_req holder = {0};
  rtt_open_ready(&a, &loop, NULL);
  rtt_acquire(&loop, a.c, "res", 150, &holder);
  rtt_run_for(&loop, 300);
  cr_assert_eq(owned(&holder), 0);
  rtt_release(&loop, &holder, RT_ELOST);
  rtt_close(&a);
  rtt_loop_finish(&loop);
}

Test(queries, owned_refuses_null_callback_queued_and_released_locks) {
  rtt_client a;
  rtt_req holder = {0}, queued = {0};
  rtt_answer ans = {0};
  rtt_open_ready(&a, &loop, NULL);
  rtt_acquire(&loop, a.c, "res", 5000, &holder);
  cr_assert_eq(rtt_wait(a.c, "res", 5000, RT_FOREVER, &queued), 0);
  cr_assert_eq(rt_owned(holder.lock, NULL, NULL), RT_ENOCB);
  cr_assert_eq(rt_owned(queued.lock, rtt_owned_cb, &ans), RT_ENOTHELD);
  cr_assert_eq(rtt_signal(&holder), 0);
  cr_assert_eq(rt_owned(holder.lock, rtt_owned_cb, &ans), RT_ERELEASED);
  cr_assert(rtt_run_until(&loop, &queued.calls, 1, 5000));
  rtt_run_for(&loop, 50);
  cr_assert_eq(ans.calls, 0);
  rtt_release(&loop, &queued, 0);
  rtt_close(&a);
  rtt_loop_finish(&loop);
}

Test(queries, locked_is_0_on_a_fresh_resource_1_while_held_0_after_release) {
  rtt_client a, b;
  rtt_req holder = {0};
  rtt_open_ready(&a, &loop, NULL);
  rtt_open_ready(&b, &loop, NULL);
  cr_assert_eq(locked(b.c, "res"), 0);
  rtt_acquire(&loop, a.c, "res", 5000, &holder);
  cr_assert_eq(locked(b.c, "res"), 1);
  cr_assert_eq(locked(a.c, "res"), 1);
  cr_assert_eq(locked(b.c, "other"), 0);
  rtt_release(&loop, &holder, 0);
  cr_assert_eq(locked(b.c, "res"), 0);
  rtt_close(&a);
  rtt_close(&b);
  rtt_loop_finish(&loop);
}

Test(queries, locked_is_0_once_the_lease_ran_out) {
  rtt_client a;
  rtt_req holder = {0};
  rtt_open_ready(&a, &loop, NULL);
  rtt_acquire(&loop, a.c, "res", 150, &holder);
  cr_assert_eq(locked(a.c, "res"), 1);
  rtt_run_for(&loop, 300);
  cr_assert_eq(locked(a.c, "res"), 0);
  rtt_release(&loop, &holder, RT_ELOST);
  rtt_close(&a);
  rtt_loop_finish(&loop);
}

Test(queries, inspect_reports_holder_fence_lease_and_waiters_in_order) {
  rtt_client a, b;
  rtt_req holder = {0}, w[3];
  snapshot s;
  memset(w, 0, sizeof(w));
  rtt_open_ready(&a, &loop, NULL);
  rtt_open_ready(&b, &loop, NULL);

  inspect(b.c, "res", 10, &s);
  cr_assert_eq(s.locked, 0);
  cr_assert_eq(s.has_holder, 0);
  cr_assert_str_eq(s.holder_client, "");
  cr_assert_eq(s.queue_len, 0);
  cr_assert_eq(s.nwaiters, 0);
  cr_assert_eq(s.lease_left_ms, 0);
  cr_assert_gt(s.server_time_ms, 0);

  rtt_acquire(&loop, a.c, "res", 5000, &holder);
  for (int i = 0; i < 3; i++) {
    cr_assert_eq(rtt_wait(i == 1 ? a.c : b.c, "res", 5000, RT_FOREVER, &w[i]),
                 0);
    rtt_run_until_queued(&loop, rc, "res", i + 2); /* so the order is known */
  }
  rtt_run_for(&loop, 50);

  int64_t before = rtt_redis_time_ms(rc);
  inspect(b.c, "res", 10, &s);
  int64_t after = rtt_redis_time_ms(rc);
  cr_assert_eq(s.locked, 1);
  cr_assert_str_eq(s.holder, holder.id);
  cr_assert_str_eq(s.holder_client, rt_client_id(a.c));
  cr_assert_eq(s.fence, holder.fence);
  cr_assert(s.lease_left_ms > 0 && s.lease_left_ms <= 5000,
            "lease_left_ms %lld", (long long)s.lease_left_ms);
  cr_assert_geq(s.held_ms, 0);
  cr_assert_lt(s.held_ms, 5000);
  cr_assert_geq(s.server_time_ms, before);
  cr_assert_leq(s.server_time_ms, after);
  cr_assert_eq(s.queue_len, 4);
  cr_assert_eq(s.nwaiters, 3);
  for (int i = 0; i < 3; i++)
    cr_assert_str_eq(s.waiters[i], w[i].id, "waiter %d is %s, want %s", i,
                     s.waiters[i], w[i].id);

  /* Capped by max_waiters; the length still counts everyone. */
  inspect(a.c, "res", 2, &s);
  cr_assert_eq(s.queue_len, 4);
  cr_assert_eq(s.nwaiters, 2);
  cr_assert_str_eq(s.waiters[0], w[0].id);
  cr_assert_str_eq(s.waiters[1], w[1].id);
  inspect(a.c, "res", 0, &s);
  cr_assert_eq(s.nwaiters, 0);
  cr_assert_str_eq(s.holder, holder.id);
  cr_assert_eq(s.queue_len, 4);

  /* held_ms grows, lease_left_ms shrinks. */
  snapshot later;
  rtt_run_for(&loop, 200);
  inspect(a.c, "res", 0, &later);
  cr_assert_geq(later.held_ms, s.held_ms + 150, "held %lld then %lld",
                (long long)s.held_ms, (long long)later.held_ms);
  cr_assert_leq(later.lease_left_ms, s.lease_left_ms - 150);

  /* After a handoff the next waiter shows as holder. */
  rtt_release(&loop, &holder, 0);
  cr_assert(rtt_run_until(&loop, &w[0].calls, 1, 5000));
  inspect(a.c, "res", 10, &s);
  cr_assert_str_eq(s.holder, w[0].id);
  cr_assert_str_eq(s.holder_client, rt_client_id(b.c));
  cr_assert_gt(s.fence, holder.fence);
  cr_assert_eq(s.queue_len, 3);
  cr_assert_eq(s.nwaiters, 2);

  for (int i = 0; i < 3; i++) {
    cr_assert(rtt_run_until(&loop, &w[i].calls, 1, 5000));
    rtt_release(&loop, &w[i], 0);
  }
  inspect(a.c, "res", 10, &s);
  cr_assert_eq(s.queue_len, 0);
  cr_assert_eq(s.locked, 0);
  /* Nothing is left of an idle resource (fences come from the clock). */
  cr_assert_eq(s.fence, 0);
  rtt_close(&a);
  rtt_close(&b);
  rtt_loop_finish(&loop);
}

Test(queries, inspect_shows_an_expired_holder_as_not_locked) {
  rtt_client a;
  rtt_req holder = {0};
  snapshot s;
  rtt_open_ready(&a, &loop, NULL);
  rtt_acquire(&loop, a.c, "res", 150, &holder);
  rtt_run_for(&loop, 300);
  inspect(a.c, "res", 10, &s);
  cr_assert_eq(s.locked, 0);
  cr_assert_str_eq(s.holder, "");
  cr_assert_eq(s.lease_left_ms, 0);
  cr_assert_eq(s.queue_len, 0);
  rtt_release(&loop, &holder, RT_ELOST);
  rtt_close(&a);
  rtt_loop_finish(&loop);
}

Test(queries, inspect_shows_the_labels_of_holder_and_waiters) {
  rtt_client a, b, c;
  rtt_req holder = {0}, wb = {0}, wc = {0};
  rt_options_t oa, ob;
  snapshot s;
  rtt_options(&oa);
  oa.label = "build-42";
  rtt_options(&ob);
  ob.label = "web 1:4242"; /* a space and a ':' are fine */
  rtt_open_ready(&a, &loop, &oa);
  rtt_open_ready(&b, &loop, &ob);
  rtt_open_ready(&c, &loop, NULL); /* no label */
  rtt_acquire(&loop, a.c, "res", 5000, &holder);
  cr_assert_eq(rtt_wait(b.c, "res", 5000, RT_FOREVER, &wb), 0);
  rtt_run_until_queued(&loop, rc, "res", 2);
  cr_assert_eq(rtt_wait(c.c, "res", 5000, RT_FOREVER, &wc), 0);
  rtt_run_until_queued(&loop, rc, "res", 3);

  inspect(c.c, "res", 10, &s);
  cr_assert_str_eq(s.holder, holder.id, "the id without its label");
  cr_assert_str_eq(s.holder_label, "build-42");
  cr_assert_eq(s.nwaiters, 2);
  cr_assert_str_eq(s.waiters[0], wb.id);
  cr_assert_str_eq(s.waiter_labels[0], "web 1:4242");
  cr_assert_str_eq(s.waiters[1], wc.id);
  cr_assert_str_eq(s.waiter_labels[1], "", "no label reads as \"\"");
  cr_assert_eq(owned(&holder), 1, "a labeled holder is found by its id");

  /* The handoff takes the waiter's label along. */
  rtt_release(&loop, &holder, 0);
  cr_assert(rtt_run_until(&loop, &wb.calls, 1, 5000));
  inspect(a.c, "res", 10, &s);
  cr_assert_str_eq(s.holder, wb.id);
  cr_assert_str_eq(s.holder_label, "web 1:4242");
  cr_assert_str_eq(s.waiter_labels[0], "");
  rtt_release(&loop, &wb, 0);
  cr_assert(rtt_run_until(&loop, &wc.calls, 1, 5000));
  inspect(a.c, "res", 10, &s);
  cr_assert_str_eq(s.holder, wc.id);
  cr_assert(s.has_holder_label);
  cr_assert_str_eq(s.holder_label, "");
  rtt_release(&loop, &wc, 0);
  inspect(a.c, "res", 10, &s);
  cr_assert(!s.has_holder_label, "NULL without a holder");
  rtt_close(&a);
  rtt_close(&b);
  rtt_close(&c);
  rtt_loop_finish(&loop);
}

Test(queries, a_label_too_long_or_not_printable_ascii_is_refused) {
  char longest[RT_LABEL_MAX + 2], msg[128];
  rt_options_t o;
  rt_client_t *c = NULL;
  memset(longest, 'x', RT_LABEL_MAX);
  longest[RT_LABEL_MAX] = '\0';
  rtt_options(&o);
  o.label = longest;
  cr_assert_eq(rt_options_check(&o, msg, sizeof(msg)), 0, "%s", msg);
  longest[RT_LABEL_MAX] = 'x';
  longest[RT_LABEL_MAX + 1] = '\0';
  cr_assert_eq(rt_options_check(&o, msg, sizeof(msg)), RT_EINVAL);
  cr_assert_str_eq(msg, "label: 65 bytes, longer than RT_LABEL_MAX (64)");
  cr_assert_eq(rt_client_open(&loop, &o, NULL, NULL, &c), RT_EINVAL);
  cr_assert_null(c);
  o.label = "tab\there";
  cr_assert_eq(rt_options_check(&o, msg, sizeof(msg)), RT_EINVAL);
  cr_assert_str_eq(msg, "label: byte 3 (0x09) is not printable ASCII");
  o.label = "caf\xc3\xa9";
  cr_assert_eq(rt_client_open(&loop, &o, NULL, NULL, &c), RT_EINVAL);
  o.label = "";
  cr_assert_eq(rt_options_check(&o, msg, sizeof(msg)), 0, "\"\" is none");
  rtt_loop_finish(&loop);
}

Test(queries, queries_refuse_bad_arguments_without_calling_back) {
  rtt_client a;
  rtt_answer ans = {0};
  snapshot s = {0};
  char big[RT_NAME_MAX + 1];
  memset(big, 'n', sizeof(big));
  rtt_open_ready(&a, &loop, NULL);
  cr_assert_eq(rt_locked(a.c, "res", 3, NULL, NULL), RT_ENOCB);
  cr_assert_eq(rt_inspect(a.c, "res", 3, 5, NULL, NULL), RT_ENOCB);
  cr_assert_eq(rt_locked(a.c, "", 0, rtt_locked_cb, &ans), RT_ENAMEEMPTY);
  cr_assert_eq(rt_inspect(a.c, NULL, 0, 5, inspect_cb, &s), RT_ENAMEEMPTY);
  cr_assert_eq(rt_locked(a.c, big, sizeof(big), rtt_locked_cb, &ans),
               RT_ENAMETOOLONG);
  cr_assert_eq(rt_inspect(a.c, big, sizeof(big), 5, inspect_cb, &s),
               RT_ENAMETOOLONG);
  cr_assert_eq(rt_locked(NULL, "res", 3, rtt_locked_cb, &ans), RT_EINVAL);
  rtt_run_for(&loop, 50);
  cr_assert_eq(ans.calls, 0);
  cr_assert_eq(s.calls, 0);
  rtt_close(&a);
  rtt_loop_finish(&loop);
}
