/* The protocol under hostile conditions, through the client: handoffs to
 * holders that die at once, late bytes from a connection given up on,
 * entries that vanish from Redis, late and lost notices, a close racing a
 * grant, an evicting server. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "rt_test.h"
#include "rtt_proxy.h"

/* The fixture decides the URL and prefix before any fork, so children
 * share them. */
RTT_SUITE_TIMEOUT(protocol, 60);

/* ---- a holder that dies right after a handoff ----------------------------- */

static void child_granted(rt_lock_t *l, int status, void *data) {
  int fd = *(int *)data;
  char b = status == 0 ? 'g' : 'x';
  (void)l;
  rtt_write_all(fd, &b, 1);
  /* Hold on, never release: the parent kills this process. */
}

/* Waits (with a 300 ms lease) for the resource named arg; writes 'q' when
 * queued, 'g' when granted. */
static int short_lease_waiter(int out_fd, int go_fd, void *arg) {
  static int fd;
  (void)go_fd;
  fd = out_fd;
  return rtt_child_wait_forever(out_fd, arg, 300, child_granted, &fd);
}

Test(protocol,
     a_waiter_behind_a_handoff_is_granted_within_the_new_holders_lease) {
  rtt_client a, c;
  rtt_req h = {0}, w2 = {0};
  rtt_open_ready(&a, &loop, NULL);
  rtt_open_ready(&c, &loop, NULL);
  rtt_acquire(&loop, a.c, "stale", 6000, &h);

  rtt_child ch;
  char b;
  rtt_fork(&ch, short_lease_waiter, "stale");
  cr_assert_eq(rtt_read_records(ch.out_fd, &b, 1, 1, 10000), 1);
  rtt_run_until_queued(&loop, rc, "stale", 2);
  cr_assert_eq(rtt_wait(c.c, "stale", 5000, RT_FOREVER, &w2), 0);
  rtt_run_until_queued(&loop, rc, "stale", 3);
  rtt_run_for(&loop, 100); /* w2's watchdog is armed from H's 6 s lease */

  rtt_release(&loop, &h, 0);
  cr_assert_eq(rtt_read_records(ch.out_fd, &b, 1, 1, 5000), 1);
  cr_assert_eq(b, 'g', "the child was not granted");
  uint64_t t0 = rtt_now_ms();
  kill(ch.pid, SIGKILL); /* the new holder dies with a 300 ms lease */
  cr_assert_eq(rtt_child_wait(&ch, 5000), 128 + SIGKILL);

  cr_assert(rtt_run_until(&loop, &w2.calls, 1, 8000), "w2 never granted");
  cr_assert_eq(w2.status, 0);
  printf("protocol: granted %llu ms after the new holder (300 ms lease) was "
         "killed\n",
         (unsigned long long)(w2.at_ms - t0));
  cr_assert_lt(w2.at_ms - t0, 300 + 300,
               "granted %llu ms after the handoff, not within the 300 ms "
               "lease in front of it",
               (unsigned long long)(w2.at_ms - t0));
  rtt_release(&loop, &w2, 0);
  rtt_close(&a);
  rtt_close(&c);
  rtt_loop_finish(&loop);
}

/* ---- late bytes -------------------------------------------------------------- */

/* Connections through proxy p; a short command timeout so a held request
 * is given up on quickly. */
static void proxied(rt_options_t *o, rtt_proxy *p) {
  static char url[64];
  rtt_options(o);
  snprintf(url, sizeof(url), "redis://127.0.0.1:%d", rtt_proxy_port(p));
  o->url = url;
  o->command_timeout_ms = 300;
}

Test(protocol, an_enqueue_delivered_after_its_retry_changes_nothing) {
  rtt_proxy *p = rtt_proxy_start(rtt_port());
  rt_options_t o;
  rtt_client a;
  rtt_req r = {0};
  proxied(&o, p);
  rtt_open_ready(&a, &loop, &o);
  int conns = rtt_proxy_conn_count(p);
  cr_assert_eq(conns, 2);

  /* The enqueue leaves, but the network holds it; the client gives up,
   * reconnects and retries: granted. Then it releases the lock. */
  rtt_proxy_set(p, 0, RTT_UP, RTT_HOLD, 0);
  rtt_proxy_set(p, 1, RTT_UP, RTT_HOLD, 0);
  cr_assert_eq(rtt_wait(a.c, "late", 5000, RT_FOREVER, &r), 0);
  cr_assert(rtt_run_until(&loop, &r.calls, 1, 5000), "never granted");
  cr_assert_eq(r.status, 0);
  rtt_release(&loop, &r, 0);
  cr_assert_eq(rtt_queue_len(rc, "late"), 0);

  /* Now the original request arrives at last: it must not come back as a
   * ghost holder or waiter. */
  rtt_proxy_release(p, 0, RTT_UP);
  rtt_proxy_release(p, 1, RTT_UP);
  rtt_run_for(&loop, 300);
  cr_assert_eq(rtt_queue_len(rc, "late"), 0,
               "the late enqueue created a ghost entry");
  rtt_close(&a);
  rtt_loop_finish(&loop);
  rtt_proxy_stop(p);
}

/* ---- notices that come late ------------------------------------------------- */

/* a straight to Redis, b through proxy p (b's replies and notices cross
 * it), with a command timeout that outlasts what the test holds back. */
static void direct_and_proxied(rtt_client *a, rtt_client *b, rt_options_t *o,
                               rtt_proxy *p) {
  proxied(o, p);
  o->command_timeout_ms = 5000;
  rtt_open_ready(a, &loop, NULL);
  rtt_open_ready(b, &loop, o);
}

static int lost_calls;
static void on_lost(rt_lock_t *l, void *data) {
  (void)l;
  (void)data;
  lost_calls++;
}

Test(protocol, a_late_grant_notice_never_reports_more_lease_than_redis_has) {
  rtt_proxy *p = rtt_proxy_start(rtt_port());
  rt_options_t o;
  rtt_client a, b;
  rtt_req h = {0}, w = {0};
  direct_and_proxied(&a, &b, &o, p);
  rtt_acquire(&loop, a.c, "slow", 10000, &h);
  cr_assert_eq(rtt_wait(b.c, "slow", 1000, RT_FOREVER, &w), 0);
  rtt_run_until_queued(&loop, rc, "slow", 2);

  rtt_proxy_set(p, RTT_ALL, RTT_DOWN, RTT_DELAY, 400);
  rtt_release(&loop, &h, 0);
  cr_assert(rtt_run_until(&loop, &w.calls, 1, 5000));
  cr_assert_eq(w.status, 0);
  int64_t left = rt_lock_lease_left_ms(w.lock);
  cr_assert_leq(left, 1000 - 350,
                "%lld ms of lease reported after a 400 ms late notice",
                (long long)left);
  cr_assert_gt(left, 0);
  rtt_proxy_reset(p);
  rtt_release(&loop, &w, 0);
  rtt_close(&a);
  rtt_close(&b);
  rtt_loop_finish(&loop);
  rtt_proxy_stop(p);
}

/* b's first request: its enqueue reply is held on the way while a's release
 * grants it, so the grant notice comes first, before any reply has told b
 * the Redis clock to check the lease by. The grant must be checked once
 * the enqueue reply is in, not left to b's watchdog at the end of a's
 * 30 s lease. */
Test(protocol, a_grant_heard_before_the_first_enqueue_reply_is_reported) {
  rtt_proxy *p = rtt_proxy_start(rtt_port());
  rt_options_t o;
  rtt_client a, b;
  rtt_req h = {0}, w = {0};
  direct_and_proxied(&a, &b, &o, p);
  /* The proxy numbers connections as it accepts them, and Redis its
   * clients as the proxy connects them: the same order. */
  int cmd = rtt_conn_id(rc, "cmd", rt_client_id(b.c)) <
                    rtt_conn_id(rc, "sub", rt_client_id(b.c))
                ? 0
                : 1;
  rtt_acquire(&loop, a.c, "overtaken", 30000, &h);
  rtt_proxy_set(p, cmd, RTT_DOWN, RTT_HOLD, 0);
  cr_assert_eq(rtt_wait(b.c, "overtaken", 30000, RT_FOREVER, &w), 0);
  rtt_run_until_queued(&loop, rc, "overtaken", 2);
  rtt_release(&loop, &h, 0);
  rtt_run_for(&loop, 200); /* b hears of its grant, cannot check it yet */
  cr_assert_eq(w.calls, 0, "a grant reported without a Redis clock");
  rtt_proxy_reset(p);
  rtt_proxy_release(p, cmd, RTT_DOWN);
  cr_assert(rtt_run_until(&loop, &w.calls, 1, 3000),
            "the grant was left for the holder's lease to end");
  cr_assert_eq(w.status, 0);
  cr_assert_gt(rt_lock_lease_left_ms(w.lock), 25000);
  rtt_release(&loop, &w, 0);
  rtt_close(&a);
  rtt_close(&b);
  rtt_loop_finish(&loop);
  rtt_proxy_stop(p);
}

Test(protocol, a_partitioned_holder_turns_lost_by_its_own_clock) {
  rtt_proxy *p = rtt_proxy_start(rtt_port());
  rt_options_t o;
  rtt_client a;
  rtt_req h = {0};
  proxied(&o, p);
  o.command_timeout_ms = 10000;
  rtt_open_ready(&a, &loop, &o);
  rtt_acquire(&loop, a.c, "part", 400, &h);
  lost_calls = 0;
  cr_assert_eq(rt_lock_on_lost(h.lock, on_lost), 0);
  rtt_proxy_set(p, RTT_ALL, RTT_BOTH, RTT_HOLD, 0); /* a partition */
  uint64_t t0 = rtt_now_ms();
  cr_assert(rtt_run_until(&loop, &lost_calls, 1, 3000),
            "the lock stayed HELD through the partition");
  cr_assert_leq(rtt_now_ms() - t0, 450);
  cr_assert_eq(rt_lock_state(h.lock), RT_LOCK_LOST);
  cr_assert_eq(rt_lock_lease_left_ms(h.lock), 0);
  rtt_proxy_reset(p);
  rtt_proxy_release(p, RTT_ALL, RTT_BOTH);
  /* The local estimate ends first; Redis' lease a little later. */
  rtt_run_for(&loop, 100);
  rtt_release(&loop, &h, RT_ELOST);
  cr_assert_eq(lost_calls, 1);
  rtt_close(&a);
  rtt_loop_finish(&loop);
  rtt_proxy_stop(p);
}

/* ---- entries that vanish ------------------------------------------------- */

static void del_keys(const char *name, const char *suffixes) {
  for (const char *s = suffixes; *s; s++) {
    char key[256];
    size_t kl = rtt_key(key, sizeof(key), rtt_prefix(), name, strlen(name), *s);
    rtt_int(rc, "DEL %b", key, kl);
  }
}

Test(protocol, a_wait_whose_entry_vanished_is_found_by_a_later_grant) {
  rtt_client a, b;
  rtt_req h = {0}, w1 = {0}, w2 = {0};
  rtt_open_ready(&a, &loop, NULL);
  rtt_open_ready(&b, &loop, NULL);
  rtt_acquire(&loop, a.c, "gone", 10000, &h);
  cr_assert_eq(rtt_wait(b.c, "gone", 5000, RT_FOREVER, &w1), 0);
  rtt_run_until_queued(&loop, rc, "gone", 2);
  cr_assert_eq(rtt_wait(b.c, "gone", 5000, RT_FOREVER, &w2), 0);
  rtt_run_until_queued(&loop, rc, "gone", 3);

  /* An operator removes w1's entry only. */
  char key[256];
  size_t kl = rtt_key(key, sizeof(key), rtt_prefix(), "gone", 4, 'm');
  cr_assert_eq(rtt_int(rc, "HDEL %b %s", key, kl, w1.id), 1);

  rtt_release(&loop, &h, 0);
  cr_assert(rtt_run_until(&loop, &w2.calls, 1, 5000));
  /* w2 (queued later by the same client) was granted first: w1 is asked
   * about again and queued anew. */
  rtt_run_until_queued(&loop, rc, "gone", 2);
  rtt_release(&loop, &w2, 0);
  cr_assert(rtt_run_until(&loop, &w1.calls, 1, 5000), "w1 waits forever");
  cr_assert_eq(w1.status, 0);
  rtt_release(&loop, &w1, 0);
  rtt_close(&a);
  rtt_close(&b);
  rtt_loop_finish(&loop);
}

Test(protocol, a_lone_wait_whose_entry_vanished_is_found_by_its_watchdog) {
  rtt_client a, b;
  rtt_req h = {0}, w = {0};
  rtt_open_ready(&a, &loop, NULL);
  rtt_open_ready(&b, &loop, NULL);
  rtt_acquire(&loop, a.c, "lone", 800, &h);
  cr_assert_eq(rtt_wait(b.c, "lone", 5000, RT_FOREVER, &w), 0);
  rtt_run_until_queued(&loop, rc, "lone", 2);
  del_keys("lone", "qm"); /* the waiters are gone; the holder stays */

  /* Nobody will ever hand the lock to w; its watchdog, due when the
   * holder's lease ends, finds w gone and queues it again. */
  cr_assert(rtt_run_until(&loop, &w.calls, 1, 3000), "w waits forever");
  cr_assert_eq(w.status, 0);
  rtt_release(&loop, &w, 0);
  rtt_release(&loop, &h, RT_ELOST);
  rtt_close(&a);
  rtt_close(&b);
  rtt_loop_finish(&loop);
}

/* ---- closing while a grant is on its way ----------------------------------- */

typedef struct race {
  rt_client_t *c;
  rtt_client *tc;
  uv_timer_t t;
} race;

static void close_late(uv_timer_t *t) {
  race *r = t->data;
  /* The grant's reply is in the socket by now, read before the close's
   * deferred step runs. */
  usleep(50 * 1000);
  rtt_close(r->tc);
  uv_close((uv_handle_t *)t, NULL);
}

Test(protocol,
     a_wait_pending_at_close_ends_canceled_even_if_granted_meanwhile) {
  rtt_client a;
  rtt_req w = {0};
  race r;
  rtt_open_ready(&a, &loop, NULL);
  cr_assert_eq(rtt_wait(a.c, "race", 5000, RT_FOREVER, &w), 0);
  r.tc = &a;
  uv_timer_init(&loop, &r.t);
  r.t.data = &r;
  uv_timer_start(&r.t, close_late, 0, 0);
  cr_assert(rtt_run_until(&loop, &a.closes, 1, 5000));
  cr_assert_eq(w.calls, 1);
  cr_assert_eq(w.status, RT_ECANCELED, "the wait got %s after close",
               rt_err_name(w.status));
  rtt_loop_finish(&loop);
  cr_assert_eq(rtt_queue_len(rc, "race"), 0, "the lock stayed taken");
}

/* ---- servers that may evict keys ------------------------------------------- */

Test(protocol, a_server_that_may_evict_keys_is_refused_unless_allowed) {
  static const char *const policies[] = {"allkeys-lru", "volatile-lru",
                                         "volatile-ttl", "allkeys-random"};
  rtt_server srv;
  rtt_server_start(&srv, NULL);
  redisContext *adm = rtt_redis_at(srv.port);
  for (size_t i = 0; i < sizeof(policies) / sizeof(policies[0]); i++) {
    rtt_ok(adm, "CONFIG SET maxmemory-policy %s", policies[i]);
    rt_options_t o;
    rtt_client a;
    rtt_options(&o);
    o.port = srv.port;
    o.url = NULL;
    rtt_open(&a, &loop, &o);
    cr_assert(rtt_run_until(&loop, &a.connects, 1, 5000));
    cr_assert_eq(a.connect_status, RT_EEVICTION, "%s: %s", policies[i],
                 rt_err_name(a.connect_status));
    rtt_close(&a);
    cr_assert(rtt_run_until(&loop, &a.closes, 1, 5000));
    o.allow_eviction = 1;
    rtt_open_ready(&a, &loop, &o);
    rtt_close(&a);
    cr_assert(rtt_run_until(&loop, &a.closes, 1, 5000));
  }
  rtt_loop_finish(&loop);
  rtt_server_stop(&srv);
}
