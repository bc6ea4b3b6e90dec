/* Observers of elections (rt_observe) against a real server: every change
 * of leader reported in fence order to every observer (checked with
 * tools/rtcheck's rtc_observe_check), a lease that ends reported as
 * nobody leading, the reconcile after the observers' connection is
 * killed, stopping from inside the callback, another kind of resource,
 * bad arguments and the close of the client. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "rt_test.h"
#include "rtcheck.h"
#include "rtt_proxy.h"

RTT_SUITE_TIMEOUT(observe, 60);

#define SEEN_MAX 256

/* What one observer was told. */
typedef struct seen {
  rt_observer_t *obs;
  int calls;   /* every callback */
  int changes; /* status 0 */
  int errors;  /* transient errors */
  int last_status;
  int final;      /* the last call came (RT_ECANCELED, RT_EKIND, ...) */
  int stop_after; /* > 0: rt_observe_stop after this many changes */
  uint64_t fence[SEEN_MAX];
  int leader[SEEN_MAX];
  char id[SEEN_MAX][RTT_ID_MAX];
  char value[SEEN_MAX][64];
  int error_at; /* changes when the first error came */
} seen;

/* Every status but RT_EDISCONNECTED is an observer's last call. */
static int is_final(int status) { return status != RT_EDISCONNECTED; }

static void observe_cb(rt_observer_t *o, int status, const rt_leader_t *l,
                       void *data) {
  seen *s = data;
  cr_assert_eq(o, s->obs);
  cr_assert_eq(s->final, 0, "a call after the last one");
  s->calls++;
  s->last_status = status;
  if (status != 0) {
    cr_assert_null(l);
    if (is_final(status))
      s->final = 1;
    else if (s->errors++ == 0)
      s->error_at = s->changes;
    return;
  }
  cr_assert_not_null(l);
  cr_assert_lt(s->changes, SEEN_MAX);
  int i = s->changes++;
  s->fence[i] = l->fence;
  s->leader[i] = l->id != NULL;
  snprintf(s->id[i], RTT_ID_MAX, "%s", l->id != NULL ? l->id : "");
  snprintf(s->value[i], 64, "%.*s", (int)l->value_len, l->value);
  cr_assert_eq(strlen(l->value), l->value_len);
  if (l->id == NULL)
    cr_assert_eq(l->deadline_ms, 0);
  else
    cr_assert_gt(l->deadline_ms, 0);
  if (s->stop_after > 0 && s->changes == s->stop_after) {
    cr_assert_eq(rt_observe_stop(o), 0);
    cr_assert_eq(rt_observe_stop(o), 0, "stopping twice is harmless");
  }
}

static void observe(rt_client_t *c, const char *name, seen *s) {
  cr_assert_eq(rt_observe(c, name, strlen(name), observe_cb, s, &s->obs), 0);
}

static rt_request_t candidate(const char *value) {
  rt_request_t r = {RT_KIND_ELECTION, 0, 0, 0, value, strlen(value)};
  return r;
}

/* Campaign on name with value; returns rt_wait_ex's code. */
static int campaign(rt_client_t *c, const char *name, const char *value,
                    int64_t ttl_ms, rtt_req *out) {
  rt_request_t r = candidate(value);
  int err = rt_wait_ex(c, name, strlen(name), &r, ttl_ms, RT_FOREVER,
                       rtt_lock_cb, out, &out->lock);
  if (err == 0)
    snprintf(out->id, sizeof(out->id), "%s", rt_lock_id(out->lock));
  return err;
}

static void until_changes(seen *s, int n) {
  cr_assert(rtt_run_until(&loop, &s->changes, n, 5000),
            "observer told %d changes, waited for %d", s->changes, n);
}

static uint64_t info_fence;
static void fence_cb(rt_client_t *c, int status, const rt_queue_info_t *info,
                     void *data) {
  (void)c;
  (void)data;
  cr_assert_eq(status, 0);
  info_fence = info->fence;
}

/* The child: campaign with value "child" and a short lease, then hang
 * until killed (rt_wait_ex wants a callback: a no-op). */
static void child_noop(rt_lock_t *l, int status, void *data) {
  (void)l;
  (void)status;
  (void)data;
}

static int child_campaign_cb(int out_fd, int go_fd, void *arg) {
  (void)go_fd;
  static const rt_request_t r = {RT_KIND_ELECTION, 0, 0, 0, "child", 5};
  return rtt_child_wait_forever_ex(out_fd, arg, &r, 600, child_noop, NULL);
}

static void check_order(const seen *s, const uint64_t *leaders, size_t n) {
  rtc_observed out;
  rtc_observe_check(leaders, n, s->fence, (size_t)s->changes, &out);
  cr_assert_eq(out.out_of_order, 0);
  cr_assert_eq(out.missed, 0);
  for (int i = 1; i < s->changes; i++)
    cr_assert(s->fence[i] != s->fence[i - 1] ||
                  s->leader[i] != s->leader[i - 1] ||
                  strcmp(s->value[i], s->value[i - 1]) != 0,
              "change %d reported twice", i);
}

/* A child campaigns with a 600 ms lease and is SIGKILLed while next
 * waits behind it; next is granted after the lease, then resigns. Returns
 * the child's fence. */
static uint64_t a_leader_dies(rt_client_t *next, rtt_req *lc, seen *s) {
  rtt_child ch;
  char q;
  int n = s->changes;
  rtt_fork(&ch, child_campaign_cb, "ele");
  cr_assert_eq(rtt_read_records(ch.out_fd, &q, 1, 1, 5000), 1);
  cr_assert(rtt_run_until(&loop, &s->changes, n + 1, 5000));
  cr_assert_str_eq(s->value[n], "child");
  info_fence = 0;
  cr_assert_eq(rt_inspect(next, "ele", 3, 1, fence_cb, NULL), 0);
  RTT_RUN_UNTIL(&loop, info_fence != 0, 5000);
  cr_assert_eq(campaign(next, "ele", "c:1", 10000, lc), 0);
  rtt_run_for(&loop, 50);
  rtt_child_kill(&ch);
  rtt_expect_grant(&loop, lc, 5000, "c after the dead leader's lease");
  rtt_release(&loop, lc, 0);
  return info_fence;
}

/* s was told want[0..n), in order, and nothing else but, at most once,
 * nobody leading right after "child". */
static void expect_values(const seen *s, const char *const *want, int n) {
  int j = 0;
  for (int i = 0; i < s->changes; i++) {
    if (s->value[i][0] == '\0' && i > 0 && j < n &&
        strcmp(s->value[i - 1], "child") == 0 && want[j][0] != '\0')
      continue;
    cr_assert_lt(j, n, "more changes than expected: %d", s->changes);
    cr_assert_str_eq(s->value[i], want[j], "change %d", i);
    cr_assert_eq(s->leader[i], want[j][0] != '\0', "change %d", i);
    j++;
  }
  cr_assert_eq(j, n, "%d changes of %d", j, n);
}

Test(observe, two_observers_see_every_change_in_fence_order) {
  rtt_client o1, o2, a, b, c, d;
  rtt_req la = {0}, lb = {0}, lc = {0}, ld = {0};
  seen s1 = {0}, s2 = {0};
  rtt_open_ready(&o1, &loop, NULL);
  rtt_open_ready(&o2, &loop, NULL);
  rtt_open_ready(&a, &loop, NULL);
  rtt_open_ready(&b, &loop, NULL);
  rtt_open_ready(&c, &loop, NULL);
  rtt_open_ready(&d, &loop, NULL);
  observe(o1.c, "ele", &s1);
  observe(o2.c, "ele", &s2);
  until_changes(&s1, 1);
  until_changes(&s2, 1);
  cr_assert_eq(s1.leader[0], 0, "nobody leads yet");

  /* a leads, proclaims; b waits and leads when a resigns. */
  cr_assert_eq(campaign(a.c, "ele", "a:1", 10000, &la), 0);
  rtt_expect_grant(&loop, &la, 5000, "a");
  cr_assert_eq(campaign(b.c, "ele", "b:1", 10000, &lb), 0);
  cr_assert_eq(rt_proclaim(la.lock, "a:2", 3, rtt_extend_cb, &la), 0);
  cr_assert(rtt_run_until(&loop, &la.ext_calls, 1, 5000));
  rtt_release(&loop, &la, 0);
  rtt_expect_grant(&loop, &lb, 5000, "b");
  rtt_release(&loop, &lb, 0);
  until_changes(&s1, 5);

  /* A leader that dies: its lease ends and the candidate behind it (c)
   * leads, granted by c's watchdog. */
  uint64_t child_fence = a_leader_dies(c.c, &lc, &s1);

  /* A lease that ends with nobody waiting: no script runs, the observers
   * find it at the lease end they were told. */
  cr_assert_eq(campaign(d.c, "ele", "d:1", 300, &ld), 0);
  rtt_expect_grant(&loop, &ld, 5000, "d");
  RTT_RUN_UNTIL(&loop,
                s1.changes > 0 && !s1.leader[s1.changes - 1] &&
                    s1.fence[s1.changes - 1] == ld.fence,
                5000);
  RTT_RUN_UNTIL(&loop,
                s2.changes > 0 && !s2.leader[s2.changes - 1] &&
                    s2.fence[s2.changes - 1] == ld.fence,
                5000);
  rtt_run_for(&loop, 200);

  /* The dead leader's lease may be seen ended before c's watchdog
   * reaped it: then nobody leads in between (its fence, told once). */
  static const char *const want[] = {"",      "a:1", "a:2", "b:1", "",
                                     "child", "c:1", "",    "d:1", ""};
  expect_values(&s1, want, 10);
  expect_values(&s2, want, 10);
  cr_assert_str_eq(s1.id[1], la.id);
  cr_assert_str_eq(s1.id[3], lb.id);
  cr_assert_str_eq(s1.id[s1.changes - 4], lc.id);
  cr_assert_str_eq(s1.id[s1.changes - 2], ld.id);
  cr_assert_eq(s1.errors + s2.errors, 0);
  uint64_t leaders[] = {la.fence, lb.fence, child_fence, lc.fence, ld.fence};
  check_order(&s1, leaders, 5);
  check_order(&s2, leaders, 5);
  cr_assert_eq(s1.fence[5], child_fence);
  cr_assert_eq(s2.fence[5], child_fence);

  rtt_release(&loop, &ld, RT_ELOST);
  rtt_close(&o1);
  rtt_close(&o2);
  rtt_run_until(&loop, &s2.final, 1, 5000);
  cr_assert(s1.final && s1.last_status == RT_ECANCELED, "close ends it");
  cr_assert(s2.final && s2.last_status == RT_ECANCELED);
  rtt_close_all(&loop, &a, &b, &c, &d, NULL);
}

Test(observe, a_killed_observer_connection_reports_the_leader_of_then_once) {
  rtt_client o, a, b;
  rtt_req la = {0}, lb = {0};
  seen s = {0};
  rtt_open_ready(&o, &loop, NULL);
  rtt_open_ready(&a, &loop, NULL);
  rtt_open_ready(&b, &loop, NULL);
  cr_assert_eq(campaign(a.c, "ele", "a:1", 10000, &la), 0);
  rtt_expect_grant(&loop, &la, 5000, "a");
  cr_assert_eq(campaign(b.c, "ele", "b:1", 10000, &lb), 0);
  observe(o.c, "ele", &s);
  until_changes(&s, 1);
  cr_assert_str_eq(s.id[0], la.id, "the current leader comes first");
  long long before = rtt_conn_id(rc, "obs", rt_client_id(o.c));
  cr_assert_geq(before, 0, "the observers' connection is named");

  /* Killed: the proclaim and the handoff happen while it is away. */
  cr_assert(rtt_kill_conn(rc, "obs", rt_client_id(o.c)));
  cr_assert_eq(rt_proclaim(la.lock, "a:2", 3, rtt_extend_cb, &la), 0);
  cr_assert(rtt_run_until(&loop, &la.ext_calls, 1, 5000));
  rtt_release(&loop, &la, 0);
  rtt_expect_grant(&loop, &lb, 5000, "b");
  cr_assert(rtt_run_until(&loop, &s.errors, 1, 5000), "the loss is told");
  RTT_RUN_UNTIL(&loop, strcmp(s.id[s.changes - 1], lb.id) == 0, 5000);
  cr_assert_str_eq(s.id[s.changes - 1], lb.id, "the leader of then");
  rtt_run_for(&loop, 300);
  int told_b = 0;
  for (int i = 0; i < s.changes; i++)
    told_b += strcmp(s.id[i], lb.id) == 0;
  cr_assert_eq(told_b, 1, "reported once");
  cr_assert_eq(s.errors, 1);
  cr_assert_eq(s.error_at, 1, "lost after the first report");
  long long after = rtt_conn_id(rc, "obs", rt_client_id(o.c));
  cr_assert(after >= 0 && after != before, "connected again");
  uint64_t leaders[] = {la.fence, lb.fence};
  check_order(&s, leaders, 2);

  /* And it keeps listening. */
  int n = s.changes;
  rtt_release(&loop, &lb, 0);
  until_changes(&s, n + 1);
  cr_assert_eq(s.leader[s.changes - 1], 0);
  rtt_close_all(&loop, &o, &a, &b, NULL);
  cr_assert(s.final && s.last_status == RT_ECANCELED);
}

Test(observe, stopping_from_inside_the_callback_ends_its_calls) {
  rtt_client o, a;
  rtt_req la = {0};
  seen s1 = {.stop_after = 1}, s2 = {.stop_after = 2};
  rtt_open_ready(&o, &loop, NULL);
  rtt_open_ready(&a, &loop, NULL);
  observe(o.c, "ele", &s1);
  observe(o.c, "ele", &s2);
  until_changes(&s2, 1);
  cr_assert_eq(campaign(a.c, "ele", "a:1", 10000, &la), 0);
  rtt_expect_grant(&loop, &la, 5000, "a");
  until_changes(&s2, 2);
  rtt_release(&loop, &la, 0);
  rtt_run_for(&loop, 200);
  cr_assert_eq(s1.calls, 1, "stopped in its first call");
  cr_assert_eq(s2.calls, 2, "stopped in its second call");
  /* The last observer gone, its connection closes. */
  RTT_RUN_UNTIL(&loop, rtt_conn_id(rc, "obs", rt_client_id(o.c)) < 0, 5000);
  cr_assert_lt(rtt_conn_id(rc, "obs", rt_client_id(o.c)), 0);
  /* A new observer makes it again. */
  seen s3 = {0};
  observe(o.c, "ele", &s3);
  until_changes(&s3, 1);
  cr_assert_eq(s3.leader[0], 0);
  rtt_close_all(&loop, &o, &a, NULL);
  cr_assert(s3.final && s3.last_status == RT_ECANCELED);
}

Test(observe, a_mutex_is_no_election) {
  rtt_client o, a;
  rtt_req la = {0};
  seen s = {0};
  rtt_open_ready(&o, &loop, NULL);
  rtt_open_ready(&a, &loop, NULL);
  rtt_acquire(&loop, a.c, "mtx", 10000, &la);
  observe(o.c, "mtx", &s);
  cr_assert(rtt_run_until(&loop, &s.final, 1, 5000));
  cr_assert_eq(s.last_status, RT_EKIND);
  cr_assert_eq(s.calls, 1);
  rtt_release(&loop, &la, 0);
  rtt_run_for(&loop, 100);
  cr_assert_eq(s.calls, 1, "nothing after the last call");
  rtt_close_all(&loop, &o, &a, NULL);
}

/* An ACL that denies the observe channel ends the observer with the
 * refusal (RT_ENOPERM), once. The user may use every channel of the
 * client's own: each ends in the client id's hex digits, where an observe
 * channel ends in 'o'. On a Redis Cluster: it_cluster. */
Test(observe, an_observe_channel_an_acl_denies_ends_it_with_enoperm) {
  rtt_server srv;
  rtt_client o;
  rt_options_t opt;
  char url[96];
  seen s = {0};
  rtt_server_start(&srv, NULL);
  redisContext *adm = rtt_redis_at(srv.port);
  rtt_ok(adm, "ACL SETUSER obs on >pw ~* resetchannels &%s:*[0-9a-f] +@all",
         rtt_prefix());
  rtt_redis_close(adm);
  rtt_options(&opt);
  snprintf(url, sizeof(url), "redis://obs:pw@127.0.0.1:%d", srv.port);
  opt.url = url;
  rtt_open_ready(&o, &loop, &opt);
  observe(o.c, "denied", &s);
  cr_assert(rtt_run_until(&loop, &s.final, 1, 5000));
  cr_assert_eq(s.last_status, RT_ENOPERM, "ended with %s",
               rt_err_name(s.last_status));
  rtt_run_for(&loop, 300);
  cr_assert_eq(s.calls, 1, "nothing after the last call");
  rtt_close_all(&loop, &o, NULL);
  rtt_server_stop(&srv);
}

Test(observe, bad_arguments_are_refused) {
  rtt_client o;
  seen s = {0};
  rt_observer_t *obs = NULL;
  rtt_open_ready(&o, &loop, NULL);
  cr_assert_eq(rt_observe(NULL, "e", 1, observe_cb, &s, &obs), RT_EINVAL);
  cr_assert_eq(rt_observe(o.c, "e", 1, NULL, &s, &obs), RT_ENOCB);
  cr_assert_eq(rt_observe(o.c, "", 0, observe_cb, &s, &obs), RT_ENAMEEMPTY);
  cr_assert_eq(rt_observe(o.c, NULL, 3, observe_cb, &s, &obs), RT_ENAMEEMPTY);
  cr_assert_eq(rt_observe(o.c, "e", RT_NAME_MAX + 1, observe_cb, &s, &obs),
               RT_ENAMETOOLONG);
  cr_assert_null(obs);
  cr_assert_eq(rt_observe_stop(NULL), RT_EINVAL);
  rtt_close(&o);
  cr_assert_eq(rt_observe(o.c, "e", 1, observe_cb, &s, &obs), RT_ECLOSED);
  rtt_loop_finish(&loop);
  cr_assert_eq(s.calls, 0);
}

Test(observe, a_client_closed_before_its_observer_subscribed_ends_it) {
  rtt_client o;
  seen s = {0};
  rtt_open(&o, &loop, NULL);
  observe(o.c, "ele", &s); /* before the client is even connected */
  rtt_close(&o);
  rtt_loop_finish(&loop);
  cr_assert_eq(s.calls, 1);
  cr_assert_eq(s.last_status, RT_ECANCELED);
}

/* A leader proclaiming values one after the other. */
typedef struct chain {
  rt_client_t *observer; /* observes from the 10th value on */
  seen *s;
  int n, status;
} chain;

static void proclaim_next(rt_lock_t *l, int status, void *data) {
  chain *ch = data;
  char v[16];
  ch->status = status;
  if (status != 0 || ch->n == 100)
    return;
  if (++ch->n == 10)
    observe(ch->observer, "ele", ch->s);
  if (ch->n == 50) /* a reconcile in the middle of the stream */
    cr_assert(rtt_kill_conn(rc, "obs", rt_client_id(ch->observer)));
  snprintf(v, sizeof(v), "v%03d", ch->n);
  cr_assert_eq(rt_proclaim(l, v, 4, proclaim_next, ch), 0);
}

Test(observe, values_proclaimed_during_a_reconcile_never_go_back) {
  rtt_client o, a;
  rtt_req la = {0};
  seen s = {0};
  chain ch = {0};
  rtt_open_ready(&o, &loop, NULL);
  rtt_open_ready(&a, &loop, NULL);
  cr_assert_eq(campaign(a.c, "ele", "v000", 10000, &la), 0);
  rtt_expect_grant(&loop, &la, 5000, "a");
  ch.observer = o.c;
  ch.s = &s;
  proclaim_next(la.lock, 0, &ch);
  RTT_RUN_UNTIL(&loop,
                s.changes > 0 && strcmp(s.value[s.changes - 1], "v100") == 0,
                10000);
  cr_assert_eq(ch.status, 0);
  cr_assert_gt(s.changes, 0);
  cr_assert_eq(ch.n, 100);
  cr_assert_str_eq(s.value[s.changes - 1], "v100", "the last value");
  for (int i = 1; i < s.changes; i++)
    cr_assert_gt(strcmp(s.value[i], s.value[i - 1]), 0, "%s after %s",
                 s.value[i], s.value[i - 1]);
  cr_assert_eq(s.errors, 1, "the killed connection is told once");
  rtt_release(&loop, &la, 0);
  rtt_close_all(&loop, &o, &a, NULL);
}

/* A leader proclaiming v001, v002, ... every 5 ms (one in flight). */
typedef struct ticker {
  uv_timer_t timer;
  rt_lock_t *lock;
  int n, max, busy, status;
} ticker;

static void ticked(rt_lock_t *l, int status, void *data) {
  ticker *t = data;
  (void)l;
  t->busy = 0;
  t->status = status;
}

static void tick(uv_timer_t *h) {
  ticker *t = h->data;
  char v[16];
  if (t->busy || t->n == t->max)
    return;
  snprintf(v, sizeof(v), "v%03d", ++t->n);
  t->busy = 1;
  cr_assert_eq(rt_proclaim(t->lock, v, 4, ticked, t), 0);
}

/* The observers' connection is slow to deliver (200 ms through the
 * proxy), the command connection is not: the read after the subscribe
 * answers before the notices published between the subscribe and the
 * read arrive. Reported at once, it would be followed by those older
 * values; the PING behind them holds it back. */
Test(observe, a_read_answered_before_older_notices_arrive_is_not_reported) {
  rtt_client o, a;
  rtt_req la = {0};
  seen s = {0};
  ticker t = {.max = 120};
  rt_options_t opts;
  seen warm = {0};
  rtt_proxy *px = rtt_proxy_start(rtt_port());
  rtt_options_at(&opts, rtt_proxy_port(px));
  rtt_open_ready(&o, &loop, &opts); /* its connections 0 and 1 */
  observe(o.c, "other", &warm);     /* makes the observers' one, 2 */
  until_changes(&warm, 1);
  rtt_open_ready(&a, &loop, NULL);
  cr_assert_eq(campaign(a.c, "ele", "v000", 10000, &la), 0);
  rtt_expect_grant(&loop, &la, 5000, "a");
  t.lock = la.lock;
  uv_timer_init(&loop, &t.timer);
  t.timer.data = &t;
  uv_timer_start(&t.timer, tick, 5, 5);
  RTT_RUN_UNTIL(&loop, t.n == 10, 5000);
  rtt_proxy_set(px, 2, RTT_DOWN, RTT_DELAY, 200);
  observe(o.c, "ele", &s);
  RTT_RUN_UNTIL(&loop,
                s.changes > 0 && strcmp(s.value[s.changes - 1], "v120") == 0,
                10000);
  uv_close((uv_handle_t *)&t.timer, NULL);
  cr_assert_eq(t.status, 0);
  cr_assert_str_eq(s.value[s.changes - 1], "v120", "the last value");
  for (int i = 1; i < s.changes; i++)
    cr_assert_gt(strcmp(s.value[i], s.value[i - 1]), 0, "%s after %s",
                 s.value[i], s.value[i - 1]);
  cr_assert_gt(s.changes, 50, "the notices came one by one");
  cr_assert_eq(s.errors, 0);
  rtt_proxy_reset(px);
  rtt_release(&loop, &la, 0);
  rtt_close_all(&loop, &o, &a, NULL);
  rtt_proxy_stop(px);
}
