/* The small lock accessors: rt_lock_state_name, rt_lock_set_data (the wait
 * and lost callbacks get the new data), the data and fence seen by the
 * scoped helper's body and done callbacks, rt_lock_resource's copy,
 * rt_lock_id's format, rt_lock_position before and after the enqueue
 * reply. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_test.h"

RTT_SUITE(lockapi);

Test(lockapi, state_names) {
  cr_assert_str_eq(rt_lock_state_name(RT_LOCK_QUEUED), "queued");
  cr_assert_str_eq(rt_lock_state_name(RT_LOCK_HELD), "held");
  cr_assert_str_eq(rt_lock_state_name(RT_LOCK_RELEASING), "releasing");
  cr_assert_str_eq(rt_lock_state_name(RT_LOCK_LOST), "lost");
  cr_assert_str_eq(rt_lock_state_name((rt_lock_state_t)42), "unknown");
  cr_assert_str_eq(rt_lock_state_name((rt_lock_state_t)-1), "unknown");
}

/* Callbacks that record the data they got. */
static void *wait_data, *lost_data;
static int wait_calls, lost_calls;

static void on_wait(rt_lock_t *l, int status, void *data) {
  (void)l;
  cr_assert_eq(status, 0);
  wait_data = data;
  wait_calls++;
}

static void on_lost(rt_lock_t *l, void *data) {
  (void)l;
  lost_data = data;
  lost_calls++;
}

Test(lockapi, set_data_reaches_the_wait_and_lost_callbacks) {
  rtt_client a;
  rtt_answer ans = {0};
  rtt_req sig = {0};
  int first, second;
  rt_lock_t *l;
  rtt_open_ready(&a, &loop, NULL);
  wait_calls = lost_calls = 0;
  cr_assert_eq(rt_wait(a.c, "res", 3, 5000, RT_FOREVER, on_wait, &first, &l),
               0);
  cr_assert_eq(rt_lock_get_data(l), &first);
  rt_lock_set_data(l, &second);
  cr_assert_eq(rt_lock_get_data(l), &second);
  cr_assert(rtt_run_until(&loop, &wait_calls, 1, 5000));
  cr_assert_eq(wait_data, &second);

  rt_lock_set_data(l, &first);
  cr_assert_eq(rt_lock_on_lost(l, on_lost), 0);
  char key[128];
  size_t klen = rtt_key(key, sizeof(key), rtt_prefix(), "res", 3, 'h');
  cr_assert_eq(rtt_int(rc, "DEL %b", key, klen), 1);
  cr_assert_eq(rt_owned(l, rtt_owned_cb, &ans), 0);
  cr_assert(rtt_run_until(&loop, &ans.calls, 1, 5000));
  cr_assert_eq(ans.value, 0);
  cr_assert_eq(lost_calls, 1);
  cr_assert_eq(lost_data, &first);
  cr_assert_eq(rt_lock_state(l), RT_LOCK_LOST);

  sig.lock = l;
  rtt_release(&loop, &sig, RT_ELOST);
  rtt_close(&a);
  rtt_loop_finish(&loop);
}

/* The scoped helper: the body sees the user's data as the lock's data, and
 * done reads the fence through the handle the body kept. */
typedef struct scope {
  rt_lock_t *lock;
  uint64_t fence;
  void *data_in_body;
  uint64_t fence_in_done;
  const char *state_in_done;
  int done_calls, done_status;
} scope;

static void body(rt_lock_t *l, void *data) {
  scope *s = data;
  s->lock = l;
  s->fence = rt_lock_fence(l);
  s->data_in_body = rt_lock_get_data(l);
  cr_assert_eq(rt_done(l, 0), 0);
}

static void done(rt_client_t *c, int status, void *data) {
  scope *s = data;
  (void)c;
  s->done_calls++;
  s->done_status = status;
  s->fence_in_done = rt_lock_fence(s->lock);
  s->state_in_done = rt_lock_state_name(rt_lock_state(s->lock));
}

Test(lockapi, the_scoped_helpers_done_reads_the_fence) {
  rtt_client a;
  scope s = {0};
  rtt_open_ready(&a, &loop, NULL);
  cr_assert_eq(rt_synchronize(a.c, "res", 3, 5000, 5000, body, done, &s), 0);
  cr_assert(rtt_run_until(&loop, &s.done_calls, 1, 5000));
  cr_assert_eq(s.done_status, 0);
  cr_assert_eq(s.data_in_body, &s);
  cr_assert_gt(s.fence, 0);
  cr_assert_eq(s.fence_in_done, s.fence);
  cr_assert_str_eq(s.state_in_done, "releasing");
  rtt_close(&a);
  rtt_loop_finish(&loop);
}

static int has_position(void *arg) { return rt_lock_position(arg) != 0; }

Test(lockapi, resource_copy_id_format_and_position) {
  rtt_client a, b;
  rtt_req holder = {0}, w1 = {0}, w2 = {0};
  rtt_open_ready(&a, &loop, NULL);
  rtt_open_ready(&b, &loop, NULL);

  /* A name with a NUL inside: the copy has it, and a NUL after it. */
  static const char name[] = {'a', '\0', 'b'};
  rtt_acquire(&loop, a.c, "res", 5000, &holder);
  cr_assert_eq(rtt_wait_n(a.c, name, sizeof(name), 5000, RT_FOREVER, &w1), 0);
  size_t len = 0;
  const char *copy = rt_lock_resource(w1.lock, &len);
  cr_assert_eq(len, 3);
  cr_assert_eq(memcmp(copy, name, 3), 0);
  cr_assert_eq(copy[3], '\0');
  cr_assert_eq(rt_lock_resource(w1.lock, NULL), copy);
  /* Granted at once, by its first enqueue. */
  cr_assert(rtt_run_until(&loop, &w1.calls, 1, 5000));
  cr_assert_eq(rt_lock_position(w1.lock), 0);

  /* "<client id>:<seq>", seq counting this client's requests from 1. */
  char want[64];
  snprintf(want, sizeof(want), "%s:1", rt_client_id(a.c));
  cr_assert_str_eq(rt_lock_id(holder.lock), want);
  snprintf(want, sizeof(want), "%s:2", rt_client_id(a.c));
  cr_assert_str_eq(rt_lock_id(w1.lock), want);

  /* Queued behind a holder: 0 until the enqueue reply, then 1. */
  cr_assert_eq(rtt_wait(b.c, "res", 5000, RT_FOREVER, &w2), 0);
  cr_assert_eq(rt_lock_position(w2.lock), 0);
  cr_assert_eq(rt_lock_state(w2.lock), RT_LOCK_QUEUED);
  cr_assert(rtt_run_until_fn(&loop, has_position, w2.lock, 5000));
  cr_assert_eq(rt_lock_position(w2.lock), 1);
  char q[2][RTT_ID_MAX];
  cr_assert_eq(rtt_queue(rc, rtt_prefix(), "res", 3, q, 2), 2);
  cr_assert_str_eq(q[1], rt_lock_id(w2.lock));

  rtt_release(&loop, &holder, 0);
  cr_assert(rtt_run_until(&loop, &w2.calls, 1, 5000));
  cr_assert_eq(rt_lock_position(w2.lock), 1);
  rtt_release(&loop, &w2, 0);
  rtt_release(&loop, &w1, 0);
  rtt_close(&a);
  rtt_close(&b);
  rtt_loop_finish(&loop);
}
