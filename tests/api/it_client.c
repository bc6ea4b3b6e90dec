/* The client's life: connecting by URL or by host/port/db, the db really
 * used, and closing with waits pending, with locks held, from inside
 * callbacks, while connecting, twice, and every call after close. */
#include <criterion/criterion.h>
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "rt_test.h"

RTT_SUITE(client);

/* Does CLIENT LIST show a connection named name? */
static int has_conn_named(const char *name) {
  char want[96];
  snprintf(want, sizeof(want), " name=%s ", name);
  redisReply *r = rtt_cmd(rc, "CLIENT LIST");
  int found = r->type == REDIS_REPLY_STRING && strstr(r->str, want) != NULL;
  freeReplyObject(r);
  return found;
}

Test(client, connects_by_url_once_and_names_both_connections) {
  rtt_client a;
  rtt_open_ready(&a, &loop, NULL);
  rtt_run_for(&loop, 100);
  cr_assert_eq(a.connects, 1, "connect_cb ran %d times", a.connects);

  const char *id = rt_client_id(a.c);
  cr_assert_eq(strlen(id), 32);
  for (int i = 0; i < 32; i++)
    cr_assert(isxdigit((unsigned char)id[i]) && !isupper((unsigned char)id[i]),
              "client id %s is not lowercase hex", id);
  cr_assert_eq(rt_client_loop(a.c), &loop);
  cr_assert_eq(rt_client_get_data(a.c), &a);
  rt_client_set_data(a.c, &loop);
  cr_assert_eq(rt_client_get_data(a.c), &loop);

  char name[64];
  snprintf(name, sizeof(name), "redturn-cmd-%s", id);
  cr_assert(has_conn_named(name), "no connection named %s", name);
  snprintf(name, sizeof(name), "redturn-sub-%s", id);
  cr_assert(has_conn_named(name), "no connection named %s", name);

  rtt_close(&a);
  rtt_loop_finish(&loop);
  cr_assert_eq(a.closes, 1);
  cr_assert_eq(a.connects, 1);
}

/* Take a lock through a client using db, then look for its queue key in
 * db and in db 0. */
static void assert_lock_lands_in_db(const rt_options_t *o, int db) {
  rtt_client a;
  rtt_req r = {0};
  rtt_open_ready(&a, &loop, o);
  rtt_acquire(&loop, a.c, "dbcheck", 10000, &r);

  char key[256];
  size_t kl = rtt_key(key, sizeof(key), rtt_prefix(), "dbcheck", 7, 'h');
  rtt_ok(rc, "SELECT %d", db);
  cr_assert_eq(rtt_int(rc, "EXISTS %b", key, kl), 1,
               "the holder key is not in db %d", db);
  rtt_ok(rc, "SELECT 0");
  cr_assert_eq(rtt_int(rc, "EXISTS %b", key, kl), 0,
               "the holder key is in db 0, not in db %d", db);

  rtt_release(&loop, &r, 0);
  rtt_ok(rc, "SELECT %d", db);
  cr_assert_eq(rtt_int(rc, "LLEN %b", key, kl), 0);
  rtt_close(&a);
  rtt_loop_finish(&loop);
  cr_assert_eq(a.closes, 1);
}

Test(client, connects_by_host_port_and_db_options_and_uses_that_db) {
  rt_options_t o;
  rt_options_init(&o);
  o.host = rtt_host();
  o.port = rtt_port();
  o.db = 5;
  o.prefix = rtt_prefix();
  assert_lock_lands_in_db(&o, 5);
}

Test(client, url_with_a_db_number_really_uses_that_db) {
  char url[128];
  rt_options_t o;
  snprintf(url, sizeof(url), "%s/3", rtt_url());
  rtt_options(&o);
  o.url = url;
  o.db = 7; /* the URL wins */
  assert_lock_lands_in_db(&o, 3);
}

Test(client, close_cancels_pending_waits_in_issue_order_and_removes_them) {
  rtt_client a, b;
  rtt_req held = {0};
  rtt_log log = {0};
  rtt_req w[3] = {{.tag = "w1", .log = &log},
                  {.tag = "w2", .log = &log},
                  {.tag = "w3", .log = &log}};
  rtt_open_ready(&a, &loop, NULL);
  rtt_open_ready(&b, &loop, NULL);
  rtt_acquire(&loop, a.c, "res", 20000, &held);
  for (int i = 0; i < 3; i++)
    cr_assert_eq(rtt_wait(b.c, "res", 20000, RT_FOREVER, &w[i]), 0);

  /* All three are in the Redis queue before the close. */
  rtt_run_until_queued(&loop, rc, "res", 4);

  rtt_close(&b);
  cr_assert(rtt_run_until(&loop, &b.closes, 1, 5000), "close_cb did not run");
  cr_assert_str_eq(log.buf, "w1:RT_ECANCELED,w2:RT_ECANCELED,w3:RT_ECANCELED");
  for (int i = 0; i < 3; i++)
    cr_assert_eq(w[i].calls, 1);

  char q[8][RTT_ID_MAX];
  size_t n = rtt_queue(rc, rtt_prefix(), "res", 3, q, 8);
  cr_assert_eq(n, 1, "%zu entries left in the queue after close, want 1", n);
  cr_assert_str_eq(q[0], held.id);

  rtt_release(&loop, &held, 0);
  cr_assert_eq(rtt_qlen(rc, rtt_prefix(), "res", 3), 0);
  rtt_close(&a);
  rtt_loop_finish(&loop);
  cr_assert_eq(a.closes, 1);
  cr_assert_eq(b.closes, 1);
}

Test(client, close_releases_held_locks_to_the_next_waiter_of_another_client) {
  rtt_client a, b;
  rtt_req held = {0}, next = {0};
  rtt_open_ready(&a, &loop, NULL);
  rtt_open_ready(&b, &loop, NULL);
  rtt_acquire(&loop, a.c, "res", 30000, &held);
  cr_assert_eq(rtt_wait(b.c, "res", 30000, RT_FOREVER, &next), 0);
  rtt_run_for(&loop, 150);
  cr_assert_eq(next.calls, 0, "granted while another client holds the lock");

  uint64_t t0 = rtt_now_ms();
  rtt_close(&a);
  cr_assert(rtt_run_until(&loop, &next.calls, 1, 5000),
            "the waiter was not granted after the holder's client closed");
  cr_assert_eq(next.status, 0);
  cr_assert_lt(next.at_ms - t0, 3000, "granted only after %llu ms",
               (unsigned long long)(next.at_ms - t0));
  cr_assert_gt(next.fence, held.fence);
  cr_assert(rtt_run_until(&loop, &a.closes, 1, 5000));

  char q[4][RTT_ID_MAX];
  cr_assert_eq(rtt_queue(rc, rtt_prefix(), "res", 3, q, 4), 1);
  cr_assert_str_eq(q[0], next.id);
  rtt_release(&loop, &next, 0);
  rtt_close(&b);
  rtt_loop_finish(&loop);
  cr_assert_eq(a.closes, 1);
  cr_assert_eq(b.closes, 1);
}

static void never_cb(rt_lock_t *l, int status, void *data) {
  (void)l;
  (void)status;
  (*(int *)data)++;
}
static void never_locked_cb(rt_client_t *c, int status, int locked,
                            void *data) {
  (void)c;
  (void)status;
  (void)locked;
  (*(int *)data)++;
}
static void never_inspect_cb(rt_client_t *c, int status,
                             const rt_queue_info_t *info, void *data) {
  (void)c;
  (void)status;
  (void)info;
  (*(int *)data)++;
}
static void never_owned_cb(rt_lock_t *l, int status, int owned, void *data) {
  (void)l;
  (void)status;
  (void)owned;
  (*(int *)data)++;
}
static void never_body(rt_lock_t *l, void *data) {
  (void)l;
  (*(int *)data)++;
}
static void never_done(rt_client_t *c, int status, void *data) {
  (void)c;
  (void)status;
  (*(int *)data)++;
}

Test(client, every_call_after_close_returns_eclosed) {
  rtt_client a;
  rtt_req held = {0}, queued = {0};
  int stray = 0;
  rtt_open_ready(&a, &loop, NULL);
  rtt_acquire(&loop, a.c, "res", 20000, &held);
  cr_assert_eq(rtt_wait(a.c, "res", 20000, RT_FOREVER, &queued), 0);
  rtt_run_for(&loop, 50);

  cr_assert_eq(rt_client_close(a.c, rtt_close_cb, &a), 0);
  cr_assert_eq(rt_client_close(a.c, rtt_close_cb, &a), RT_ECLOSED);
  cr_assert_eq(rt_wait(a.c, "x", 1, 1000, RT_FOREVER, never_cb, &stray, NULL),
               RT_ECLOSED);
  cr_assert_eq(rt_try_lock(a.c, "x", 1, 1000, never_cb, &stray), RT_ECLOSED);
  cr_assert_eq(rt_locked(a.c, "x", 1, never_locked_cb, &stray), RT_ECLOSED);
  cr_assert_eq(rt_inspect(a.c, "x", 1, 5, never_inspect_cb, &stray),
               RT_ECLOSED);
  cr_assert_eq(rt_synchronize(a.c, "x", 1, 1000, RT_FOREVER, never_body,
                              never_done, &stray),
               RT_ECLOSED);
  cr_assert_eq(rt_signal(held.lock, never_cb, &stray), RT_ECLOSED);
  cr_assert_eq(rt_extend(held.lock, 1000, never_cb, &stray), RT_ECLOSED);
  cr_assert_eq(rt_owned(held.lock, never_owned_cb, &stray), RT_ECLOSED);
  cr_assert_eq(rt_cancel(queued.lock), RT_ECLOSED);

  rtt_loop_finish(&loop);
  cr_assert_eq(a.closes, 1, "close_cb ran %d times", a.closes);
  cr_assert_eq(stray, 0, "a callback of a refused call ran");
  cr_assert_eq(queued.calls, 1);
  cr_assert_eq(queued.status, RT_ECANCELED);
  cr_assert_eq(held.calls, 1);

  cr_assert_eq(rtt_qlen(rc, rtt_prefix(), "res", 3), 0,
               "close left entries in the Redis queue");
}

typedef struct counts {
  int calls, status;
} counts;

static void count_lock(rt_lock_t *l, int status, void *data) {
  counts *n = data;
  (void)l;
  n->calls++;
  n->status = status;
}
static void count_owned(rt_lock_t *l, int status, int owned, void *data) {
  (void)owned;
  count_lock(l, status, data);
}
static void count_locked(rt_client_t *c, int status, int locked, void *data) {
  (void)c;
  (void)locked;
  count_lock(NULL, status, data);
}
static void count_inspect(rt_client_t *c, int status,
                          const rt_queue_info_t *info, void *data) {
  (void)c;
  (void)info;
  count_lock(NULL, status, data);
}

Test(client, requests_in_flight_at_close_each_call_back_once) {
  rtt_client a;
  rtt_req h1 = {0}, h2 = {0}, h3 = {0};
  counts tr = {0}, ext = {0}, sig = {0}, own = {0}, lk = {0}, in = {0}, w = {0};
  rtt_open_ready(&a, &loop, NULL);
  rtt_acquire(&loop, a.c, "one", 20000, &h1);
  rtt_acquire(&loop, a.c, "two", 20000, &h2);
  rtt_acquire(&loop, a.c, "three", 20000, &h3);

  /* Sent, not yet answered, when the close starts. */
  cr_assert_eq(rt_try_lock(a.c, "four", 4, 20000, count_lock, &tr), 0);
  cr_assert_eq(rt_extend(h1.lock, 20000, count_lock, &ext), 0);
  cr_assert_eq(rt_signal(h2.lock, count_lock, &sig), 0);
  cr_assert_eq(rt_owned(h3.lock, count_owned, &own), 0);
  cr_assert_eq(rt_locked(a.c, "one", 3, count_locked, &lk), 0);
  cr_assert_eq(rt_inspect(a.c, "one", 3, 4, count_inspect, &in), 0);
  cr_assert_eq(rt_wait(a.c, "one", 3, 20000, RT_FOREVER, count_lock, &w, NULL),
               0);
  rtt_close(&a);
  rtt_loop_finish(&loop);
  cr_assert_eq(a.closes, 1);

  counts *all[] = {&tr, &ext, &sig, &own, &lk, &in, &w};
  const char *what[] = {"try",    "extend",  "signal", "owned",
                        "locked", "inspect", "wait"};
  for (int i = 0; i < 7; i++) {
    cr_assert_eq(all[i]->calls, 1, "%s called back %d times", what[i],
                 all[i]->calls);
    cr_assert(all[i]->status == 0 || all[i]->status == RT_ECANCELED,
              "%s got %s", what[i], rt_err_name(all[i]->status));
  }
  cr_assert_eq(w.status, RT_ECANCELED, "the wait got %s",
               rt_err_name(w.status));
  static const char *const names[] = {"one", "two", "three", "four"};
  for (int i = 0; i < 4; i++)
    cr_assert_eq(rtt_qlen(rc, rtt_prefix(), names[i], strlen(names[i])), 0,
                 "%s is still locked after close", names[i]);
}

/* Closes its client from inside the grant callback. */
typedef struct closer {
  rtt_client *tc;
  int calls, status, close_ret;
} closer;

static void close_on_grant(rt_lock_t *l, int status, void *data) {
  closer *k = data;
  k->calls++;
  k->status = status;
  k->close_ret = rt_client_close(rt_lock_client(l), rtt_close_cb, k->tc);
}

Test(client, closing_from_inside_the_grant_callback_releases_the_lock) {
  rtt_client a;
  closer k = {&a, 0, 0, -1};
  rtt_open_ready(&a, &loop, NULL);
  cr_assert_eq(
      rt_wait(a.c, "res", 3, 20000, RT_FOREVER, close_on_grant, &k, NULL), 0);
  rtt_loop_finish(&loop);
  cr_assert_eq(k.calls, 1);
  cr_assert_eq(k.status, 0);
  cr_assert_eq(k.close_ret, 0, "close from the callback: %s",
               rt_err_name(k.close_ret));
  cr_assert_eq(a.closes, 1);

  cr_assert_eq(rtt_qlen(rc, rtt_prefix(), "res", 3), 0,
               "the lock is still queued/held in Redis after close");
}

Test(client, closing_from_inside_a_handoff_grant_callback_releases_the_lock) {
  rtt_client a, b;
  rtt_req holder = {0};
  closer k = {&b, 0, 0, -1};
  rtt_open_ready(&a, &loop, NULL);
  rtt_open_ready(&b, &loop, NULL);
  rtt_acquire(&loop, a.c, "res", 20000, &holder);
  /* Granted later, by the holder's release (a notice, not a reply). */
  cr_assert_eq(
      rt_wait(b.c, "res", 3, 20000, RT_FOREVER, close_on_grant, &k, NULL), 0);
  rtt_run_until_queued(&loop, rc, "res", 2);
  rtt_release(&loop, &holder, 0);
  cr_assert(rtt_run_until(&loop, &b.closes, 1, 5000));
  cr_assert_eq(k.calls, 1);
  cr_assert_eq(k.status, 0);
  cr_assert_eq(k.close_ret, 0);
  cr_assert_eq(rtt_qlen(rc, rtt_prefix(), "res", 3), 0,
               "the lock is still queued/held in Redis after close");
  rtt_close(&a);
  rtt_loop_finish(&loop);
}

/* Closes the client from inside a signal callback. */
static void close_on_signal(rt_lock_t *l, int status, void *data) {
  closer *k = data;
  k->calls++;
  k->status = status;
  k->close_ret = rt_client_close(rt_lock_client(l), rtt_close_cb, k->tc);
}

Test(client, closing_from_inside_a_signal_callback_releases_other_held_locks) {
  rtt_client a;
  rtt_req one = {0}, two = {0};
  closer k = {&a, 0, 0, -1};
  rtt_open_ready(&a, &loop, NULL);
  rtt_acquire(&loop, a.c, "one", 20000, &one);
  rtt_acquire(&loop, a.c, "two", 20000, &two);
  cr_assert_eq(rt_signal(one.lock, close_on_signal, &k), 0);
  rtt_loop_finish(&loop);
  cr_assert_eq(k.calls, 1);
  cr_assert_eq(k.status, 0);
  cr_assert_eq(k.close_ret, 0);
  cr_assert_eq(a.closes, 1);
  cr_assert_eq(rtt_qlen(rc, rtt_prefix(), "one", 3), 0);
  cr_assert_eq(rtt_qlen(rc, rtt_prefix(), "two", 3), 0,
               "the other held lock is still held in Redis after close");
}

static void close_on_connect(rt_client_t *c, int status, void *data) {
  rtt_client *tc = data;
  tc->connects++;
  tc->connect_status = status;
  cr_assert_eq(rt_client_close(c, rtt_close_cb, tc), 0);
}

Test(client, closing_from_the_connect_callback_cancels_a_wait_in_flight) {
  rtt_client a;
  rtt_req w = {0};
  rt_options_t o;
  memset(&a, 0, sizeof(a));
  rtt_options(&o);
  cr_assert_eq(rt_client_open(&loop, &o, close_on_connect, &a, &a.c), 0);
  /* Queued before the connection is up, sent when it is. */
  cr_assert_eq(rtt_wait(a.c, "res", 20000, RT_FOREVER, &w), 0);
  rtt_loop_finish(&loop);
  cr_assert_eq(a.connects, 1);
  cr_assert_eq(a.connect_status, 0);
  cr_assert_eq(a.closes, 1);
  cr_assert_eq(w.calls, 1, "wait callback ran %d times", w.calls);
  cr_assert_eq(w.status, RT_ECANCELED, "wait got %s", rt_err_name(w.status));

  cr_assert_eq(rtt_qlen(rc, rtt_prefix(), "res", 3), 0,
               "the canceled wait left an entry in Redis");
}

Test(client, closing_while_connecting_still_reports_the_connect_once) {
  rtt_client a;
  rtt_req w = {0};
  rtt_open(&a, &loop, NULL);
  cr_assert_eq(rtt_wait(a.c, "res", 20000, RT_FOREVER, &w), 0);
  rtt_close(&a);
  rtt_loop_finish(&loop);
  cr_assert_eq(a.closes, 1);
  cr_assert_eq(w.calls, 1);
  cr_assert_eq(w.status, RT_ECANCELED);
  cr_assert_eq(a.connects, 1,
               "connect_cb ran %d times: rt_client_open returned 0, so it "
               "must run exactly once",
               a.connects);
  cr_assert_lt(a.connect_status, 0);

  cr_assert_eq(rtt_qlen(rc, rtt_prefix(), "res", 3), 0);
}

Test(client, a_client_with_no_requests_closes_cleanly) {
  rtt_client a;
  rtt_open_ready(&a, &loop, NULL);
  rtt_close(&a);
  rtt_loop_finish(&loop);
  cr_assert_eq(a.closes, 1);
}

/* Records the client's statistics as the wait's callback sees them. */
typedef struct stats_at_end {
  int calls, status;
  rt_stats_t stats;
} stats_at_end;

static void stats_on_end(rt_lock_t *l, int status, void *data) {
  stats_at_end *s = data;
  s->calls++;
  s->status = status;
  rt_client_stats(rt_lock_client(l), &s->stats);
}

Test(client, a_wait_canceled_by_close_is_counted_as_a_cancel) {
  rtt_client a, b;
  rtt_req holder = {0};
  stats_at_end w = {0};
  rtt_open_ready(&a, &loop, NULL);
  rtt_open_ready(&b, &loop, NULL);
  rtt_acquire(&loop, a.c, "res", 20000, &holder);
  cr_assert_eq(
      rt_wait(b.c, "res", 3, 20000, RT_FOREVER, stats_on_end, &w, NULL), 0);
  rtt_run_until_queued(&loop, rc, "res", 2);
  rtt_close(&b);
  rtt_close(&a);
  rtt_loop_finish(&loop);
  cr_assert_eq(w.calls, 1);
  cr_assert_eq(w.status, RT_ECANCELED);
  cr_assert_eq(w.stats.cancels, 1, "cancels = %llu",
               (unsigned long long)w.stats.cancels);
  cr_assert_eq(w.stats.waits, 1);
}
