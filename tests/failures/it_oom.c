/* Out of memory and failing writes, injected with libfiu.
 *
 * The static library the tests link is built with FIU_ENABLE (REDTURN_FIU
 * in CMakeLists.txt): every allocation of the library goes through
 * src/alloc.c, whose functions are the fault point "redturn/alloc", and
 * every socket write through the helper in src/link.c, the fault point
 * "redturn/write" (the write then fails for real, with EPIPE and a
 * SIGPIPE). The tests drive these with libfiu's control API and check the
 * library's promises: a call fails with RT_ENOMEM and nothing happened, or
 * it succeeds and its callback runs exactly once, later, from the loop,
 * with 0 or an RT_E* code; nothing leaks (LeakSanitizer in the ASan tree);
 * the loop closes with no handle left; nothing hangs or crashes.
 *
 *  1. A scenario using every kind of call fails each of its allocations
 *     once, one run per allocation.
 *  2. A wait's deadline holds whichever of its allocations fails.
 *  3. The blocking API fails each of its allocations once.
 * Tests 4 to 6 (under contention, and a failed write) are in
 * it_oom_contention.c; the checks both files make in
 * tests/support/rtt_oom.h.
 *
 * Without libfiu (REDTURN_FIU off) the tests are skipped. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "locks.h"
#include "rt_test.h"
#include "rtt_oom.h"

#ifdef REDTURN_HAVE_FIU
#ifndef FIU_ENABLE
#define FIU_ENABLE 1
#endif
#include <fiu-control.h>
#include <fiu.h>
#endif

/* The first test runs a whole scenario per allocation: longer than the
 * usual 30 s may be needed in the ASan tree. `rc` kills our connections. */
RTT_SUITE_TIMEOUT(oom, 120);

#ifdef REDTURN_HAVE_FIU

/* ---- 1. every allocation fails once ------------------------------------------ */

typedef struct scen scen;

/* One lock request of the scenario. */
typedef struct req {
  scen *s;
  const char *tag;
  rt_lock_t *handle; /* from rt_wait, until the callback */
  rt_lock_t *lock;   /* while held */
  int accepted, calls, status;
  int sig_accepted, sig_calls, sig_status;
} req;

struct scen {
  uv_loop_t loop;
  long k;
  rt_client_t *c;
  int connects, connect_status, closes;
  req a, b, d, e, t;
  int insp_accepted, insp_calls, insp_status;
  /* extend, owned, locked and the done of rt_synchronize: accepted
   * calls and callbacks. */
  struct ans {
    int accepted, calls, status;
  } ext, own, lkd, sync;
  int body_calls;
  char name[32];
  char name2[400]; /* long: keys longer than any fixed buffer of the library */
};

static void scen_connect_cb(rt_client_t *c, int status, void *data) {
  scen *s = data;
  (void)c;
  rtt_oom_check_callback("connect", status);
  if (++s->connects > 1)
    rtt_oom_violation("k=%ld: connect callback ran %d times", s->k,
                      s->connects);
  s->connect_status = status;
}

static void scen_close_cb(rt_client_t *c, void *data) {
  scen *s = data;
  (void)c;
  if (rtt_oom_in_call)
    rtt_oom_violation("k=%ld: close callback ran inside a library call", s->k);
  s->closes++;
}

static void scen_lock_cb(rt_lock_t *lock, int status, void *data) {
  req *r = data;
  rtt_oom_check_callback(r->tag, status);
  if (!r->accepted)
    rtt_oom_violation("k=%ld: wait %s: callback of a refused call", r->s->k,
                      r->tag);
  if (++r->calls > 1)
    rtt_oom_violation("k=%ld: wait %s: callback ran %d times", r->s->k, r->tag,
                      r->calls);
  r->status = status;
  r->lock = status == 0 ? lock : NULL;
}

static void scen_signal_cb(rt_lock_t *lock, int status, void *data) {
  req *r = data;
  (void)lock;
  rtt_oom_check_callback("signal", status);
  if (++r->sig_calls > 1)
    rtt_oom_violation("k=%ld: signal %s: callback ran %d times", r->s->k,
                      r->tag, r->sig_calls);
  r->sig_status = status;
  r->lock = NULL;
}

static void scen_inspect_cb(rt_client_t *c, int status,
                            const rt_queue_info_t *info, void *data) {
  scen *s = data;
  (void)c;
  rtt_oom_check_callback("inspect", status);
  if (status == 0 && info == NULL)
    rtt_oom_violation("k=%ld: inspect: status 0 without info", s->k);
  if (++s->insp_calls > 1)
    rtt_oom_violation("k=%ld: inspect callback ran %d times", s->k,
                      s->insp_calls);
  s->insp_status = status;
}

static void scen_ans(scen *s, struct ans *a, const char *what, int status) {
  rtt_oom_check_callback(what, status);
  if (!a->accepted)
    rtt_oom_violation("k=%ld: %s: callback of a refused call", s->k, what);
  if (++a->calls > 1)
    rtt_oom_violation("k=%ld: %s callback ran %d times", s->k, what, a->calls);
  a->status = status;
}

static void scen_extend_cb(rt_lock_t *lock, int status, void *data) {
  scen *s = data;
  (void)lock;
  scen_ans(s, &s->ext, "extend", status);
}

static void scen_owned_cb(rt_lock_t *lock, int status, int owned, void *data) {
  scen *s = data;
  (void)lock;
  (void)owned;
  scen_ans(s, &s->own, "owned", status);
}

static void scen_locked_cb(rt_client_t *c, int status, int locked, void *data) {
  scen *s = data;
  (void)c;
  (void)locked;
  scen_ans(s, &s->lkd, "locked", status);
}

static void scen_body(rt_lock_t *lock, void *data) {
  scen *s = data;
  if (rtt_oom_in_call)
    rtt_oom_violation("k=%ld: synchronize body ran inside a library call",
                      s->k);
  if (++s->body_calls > 1)
    rtt_oom_violation("k=%ld: synchronize body ran %d times", s->k,
                      s->body_calls);
  /* rt_done is retried once: RT_ENOMEM leaves the body to call it again. */
  int ret = RTT_API(rt_done(lock, 0));
  if (ret == RT_ENOMEM)
    ret = RTT_API(rt_done(lock, 0));
  if (ret != 0)
    rtt_oom_violation("k=%ld: rt_done: %s", s->k, rt_err_name(ret));
}

static void scen_done(rt_client_t *c, int status, void *data) {
  scen *s = data;
  (void)c;
  scen_ans(s, &s->sync, "synchronize done", status);
}

/* Kill both Redis connections of client c (found by CLIENT SETNAME). */
static void kill_connections(rt_client_t *c) {
  rtt_kill_conn(rc, "cmd", rt_client_id(c));
  rtt_kill_conn(rc, "sub", rt_client_id(c));
}

static int reconnected(void *arg) {
  rt_stats_t st;
  rt_client_stats(arg, &st);
  return st.reconnects > 0;
}

/* What a call on an open client may return while allocations fail: 0,
 * RT_ENOMEM, or the failure of the client's first connect. */
static void check_rc(scen *s, const char *what, int ret) {
  cr_assert(ret == 0 || ret == RT_ENOMEM ||
                (s->connect_status != 0 && ret == s->connect_status),
            "k=%ld: %s returned %s", s->k, what, rt_err_name(ret));
}

/* A call that failed with RT_ENOMEM changed nothing: made again (the one
 * failure was spent) it must succeed. */
#define RETRY_ON_ENOMEM(s, what, call)                                         \
  do {                                                                         \
    int rc_ = RTT_API(call);                                                   \
    check_rc((s), (what), rc_);                                                \
    if (rc_ == RT_ENOMEM) {                                                    \
      rc_ = RTT_API(call);                                                     \
      cr_assert_eq(rc_, 0, "k=%ld: %s again after RT_ENOMEM: %s", (s)->k,      \
                   (what), rt_err_name(rc_));                                  \
    }                                                                          \
    last_rc = rc_;                                                             \
  } while (0)

static int last_rc;

static void scen_wait(scen *s, req *r, const char *tag, int64_t timeout_ms) {
  r->s = s;
  r->tag = tag;
  RETRY_ON_ENOMEM(s, tag,
                  rt_wait(s->c, s->name, strlen(s->name), 10000, timeout_ms,
                          scen_lock_cb, r, &r->handle));
  r->accepted = last_rc == 0;
}

/* Release r if it holds the lock, and wait for the release's callback. */
static void scen_release(scen *s, req *r) {
  if (r->lock == NULL || r->sig_accepted)
    return;
  RETRY_ON_ENOMEM(s, "rt_signal", rt_signal(r->lock, scen_signal_cb, r));
  r->sig_accepted = last_rc == 0;
  if (r->sig_accepted)
    cr_assert(rtt_run_until(&s->loop, &r->sig_calls, 1, 6000),
              "k=%ld: signal of %s not answered within 6 s", s->k, r->tag);
}

/* Run until the callback of an accepted call. */
static void scen_answer(scen *s, struct ans *a, const char *what) {
  if (a->accepted)
    cr_assert(rtt_run_until(&s->loop, &a->calls, 1, 6000),
              "k=%ld: %s not answered within 6 s", s->k, what);
}

static void scen_await(scen *s, req *r, int64_t max_ms) {
  if (r->accepted)
    cr_assert(rtt_run_until(&s->loop, &r->calls, 1, max_ms),
              "k=%ld: wait %s never ended (callback not called in %lld ms)",
              s->k, r->tag, (long long)max_ms);
}

static void scen_check_req(scen *s, const req *r) {
  if (r->accepted)
    cr_assert_eq(r->calls, 1, "k=%ld: wait %s: %d callbacks", s->k, r->tag,
                 r->calls);
  else
    cr_assert_eq(r->calls, 0, "k=%ld: refused wait %s: %d callbacks", s->k,
                 r->tag, r->calls);
  if (r->sig_accepted)
    cr_assert_eq(r->sig_calls, 1, "k=%ld: signal %s: %d callbacks", s->k,
                 r->tag, r->sig_calls);
}

/* The scenario, with the k-th allocation failing: open a client; A waits on
 * a free lock; A extends its lease and asks whether it still owns it; is
 * the resource locked; a try-lock is refused; B waits behind A; D waits
 * behind them with a short deadline; E waits; Redis drops both connections
 * and the client reconnects; E is canceled; inspect; A and then B release;
 * rt_synchronize on a resource with a long name; close. */
static void scenario(long k) {
  scen s;
  memset(&s, 0, sizeof(s));
  s.k = k;
  rtt_oom_k = k;
  snprintf(s.name, sizeof(s.name), "oom-%ld", k);
  memset(s.name2, 'x', 300);
  snprintf(s.name2 + 300, sizeof(s.name2) - 300, "-oom-%ld-sync", k);
  cr_assert_eq(uv_loop_init(&s.loop), 0);
  rt_options_t o;
  rtt_options(&o); /* before arming: may start the test's server */
  o.connect_timeout_ms = 2000;
  o.command_timeout_ms = 2000;

  rtt_oom_nth.calls = 0;
  rtt_oom_nth.fail_at = k;
  rtt_oom_nth.fired = 0;
  rtt_oom_nth.armed = 1;

  int ret = RTT_API(rt_client_open(&s.loop, &o, scen_connect_cb, &s, &s.c));
  cr_assert(ret == 0 || ret == RT_ENOMEM, "k=%ld: rt_client_open: %s", k,
            rt_err_name(ret));
  if (ret != 0) {
    cr_assert_null(s.c, "k=%ld: *out set by a failed rt_client_open", k);
    rtt_oom_nth.armed = 0;
    rtt_loop_finish(&s.loop); /* nothing may be left open */
    rtt_oom_check_no_violation("after a failed open");
    return;
  }
  cr_assert(rtt_run_until(&s.loop, &s.connects, 1, 6000),
            "k=%ld: connect callback not called within 6 s", k);

  scen_wait(&s, &s.a, "A", 3000);
  scen_await(&s, &s.a, 6000);
  if (s.a.lock != NULL) {
    RETRY_ON_ENOMEM(&s, "rt_extend",
                    rt_extend(s.a.lock, 10000, scen_extend_cb, &s));
    s.ext.accepted = last_rc == 0;
    scen_answer(&s, &s.ext, "extend");
  }
  if (s.a.lock != NULL) {
    RETRY_ON_ENOMEM(&s, "rt_owned", rt_owned(s.a.lock, scen_owned_cb, &s));
    s.own.accepted = last_rc == 0;
    scen_answer(&s, &s.own, "owned");
  }
  RETRY_ON_ENOMEM(&s, "rt_locked",
                  rt_locked(s.c, s.name, strlen(s.name), scen_locked_cb, &s));
  s.lkd.accepted = last_rc == 0;
  scen_answer(&s, &s.lkd, "locked");
  s.t.s = &s;
  s.t.tag = "T";
  RETRY_ON_ENOMEM(
      &s, "rt_try_lock",
      rt_try_lock(s.c, s.name, strlen(s.name), 10000, scen_lock_cb, &s.t));
  s.t.accepted = last_rc == 0;
  scen_await(&s, &s.t, 6000);
  scen_release(&s, &s.t); /* granted only if A failed */

  scen_wait(&s, &s.b, "B", 3000);
  scen_wait(&s, &s.d, "D", 50);
  scen_wait(&s, &s.e, "E", RT_FOREVER);
  scen_await(&s, &s.d, 3000);
  if (s.connect_status == 0) {
    kill_connections(s.c);
    cr_assert(rtt_run_until_fn(&s.loop, reconnected, s.c, 6000),
              "k=%ld: no reconnect within 6 s", k);
  }
  if (s.e.accepted && s.e.calls == 0) {
    ret = RTT_API(rt_cancel(s.e.handle));
    cr_assert_eq(ret, 0, "k=%ld: rt_cancel: %s", k, rt_err_name(ret));
  }
  /* While B waits: the answer lists waiters. */
  RETRY_ON_ENOMEM(
      &s, "rt_inspect",
      rt_inspect(s.c, s.name, strlen(s.name), 10, scen_inspect_cb, &s));
  s.insp_accepted = last_rc == 0;
  if (s.insp_accepted)
    cr_assert(rtt_run_until(&s.loop, &s.insp_calls, 1, 6000),
              "k=%ld: inspect not answered within 6 s", k);

  scen_release(&s, &s.a);
  scen_release(&s, &s.d); /* granted only if A and B failed */
  scen_await(&s, &s.b, 6000);
  scen_release(&s, &s.b);
  scen_await(&s, &s.e, 6000);
  scen_release(&s, &s.e);

  RETRY_ON_ENOMEM(&s, "rt_synchronize",
                  rt_synchronize(s.c, s.name2, strlen(s.name2), 10000, 3000,
                                 scen_body, scen_done, &s));
  s.sync.accepted = last_rc == 0;
  scen_answer(&s, &s.sync, "synchronize");

  ret = RTT_API(rt_client_close(s.c, scen_close_cb, &s));
  cr_assert_eq(ret, 0, "k=%ld: rt_client_close: %s", k, rt_err_name(ret));
  rtt_loop_finish(&s.loop); /* also: no handle left open */
  rtt_oom_nth.armed = 0;

  cr_assert_eq(s.connects, 1, "k=%ld: %d connect callbacks", k, s.connects);
  cr_assert_eq(s.closes, 1, "k=%ld: %d close callbacks", k, s.closes);
  scen_check_req(&s, &s.a);
  scen_check_req(&s, &s.b);
  scen_check_req(&s, &s.d);
  scen_check_req(&s, &s.e);
  scen_check_req(&s, &s.t);
  const struct ans *all[] = {&s.ext, &s.own, &s.lkd, &s.sync};
  const char *names[] = {"extend", "owned", "locked", "synchronize"};
  for (int i = 0; i < 4; i++)
    cr_assert_eq(all[i]->calls, all[i]->accepted, "k=%ld: %s: %d callbacks", k,
                 names[i], all[i]->calls);
  if (s.insp_accepted)
    cr_assert_eq(s.insp_calls, 1, "k=%ld: %d inspect callbacks", k,
                 s.insp_calls);
  rtt_oom_check_no_violation("scenario");
}

Test(oom, every_allocation_of_a_lock_scenario_can_fail_with_a_clean_error) {
  cr_assert_eq(fiu_init(0), 0);
  cr_assert_eq(
      fiu_enable_external("redturn/alloc", 1, NULL, 0, rtt_oom_fail_nth), 0);
  /* Each run fails one more allocation than the last; the first run that
   * gets through without reaching its fault point made N allocations, all
   * of which have then failed once. */
  long k;
  long sites = -1;
  for (k = 1; k <= 2000; k++) {
    scenario(k);
    if (!rtt_oom_nth.fired) {
      sites = rtt_oom_nth.calls;
      break;
    }
  }
  fiu_disable("redturn/alloc");
  cr_assert_geq(sites, 0, "the scenario still allocated after %ld runs", k);
  cr_assert_gt(sites, 10, "only %ld allocations: is the fault point there?",
               sites);
  cr_log_info("every one of the scenario's %ld allocations failed once", sites);
}

/* ---- 1b. an observer's allocations fail once each --------------------------- */

/* An observer of the observer scenario: its calls, changes, last call. */
typedef struct obs_run {
  long k;
  int accepted, calls, changes, finals, status;
  char leader[RTT_ID_MAX]; /* the id of the last leader reported, or "" */
} obs_run;

static void obs_scen_cb(rt_observer_t *o, int status, const rt_leader_t *l,
                        void *data) {
  obs_run *r = data;
  (void)o;
  rtt_oom_check_callback("observe", status);
  if (!r->accepted)
    rtt_oom_violation("k=%ld: observe: callback of a refused call", r->k);
  if (r->finals > 0)
    rtt_oom_violation("k=%ld: observe: a call after the last one", r->k);
  if ((status == 0) != (l != NULL))
    rtt_oom_violation("k=%ld: observe: status %s with leader %p", r->k,
                      rt_err_name(status), (const void *)l);
  r->calls++;
  r->status = status;
  if (status == 0) {
    r->changes++;
    snprintf(r->leader, sizeof(r->leader), "%s", l->id ? l->id : "");
  } else if (status != RT_EDISCONNECTED) {
    r->finals++; /* every other status is the last call */
  }
}

/* Open a client; observe an election; campaign on it from the same client
 * and see the leader reported; kill the three connections and see the
 * reconnect; resign; close: the observer's last call is RT_ECANCELED. */
static void observe_scenario(long k) {
  scen s;
  obs_run r = {.k = k};
  rt_observer_t *obs = NULL;
  memset(&s, 0, sizeof(s));
  s.k = rtt_oom_k = k;
  snprintf(s.name, sizeof(s.name), "oom-obs-%ld", k);
  cr_assert_eq(uv_loop_init(&s.loop), 0);
  rt_options_t o;
  rtt_options(&o);
  o.connect_timeout_ms = 2000;
  o.command_timeout_ms = 2000;
  rtt_oom_nth.calls = 0;
  rtt_oom_nth.fail_at = k;
  rtt_oom_nth.fired = 0;
  rtt_oom_nth.armed = 1;
  int ret = RTT_API(rt_client_open(&s.loop, &o, scen_connect_cb, &s, &s.c));
  if (ret != 0) {
    cr_assert_eq(ret, RT_ENOMEM);
    rtt_oom_nth.armed = 0;
    rtt_loop_finish(&s.loop);
    return;
  }
  RETRY_ON_ENOMEM(
      &s, "rt_observe",
      rt_observe(s.c, s.name, strlen(s.name), obs_scen_cb, &r, &obs));
  r.accepted = last_rc == 0;
  cr_assert(rtt_run_until(&s.loop, &s.connects, 1, 6000));
  if (s.connect_status == 0 && r.accepted)
    cr_assert(rtt_run_until(&s.loop, &r.changes, 1, 6000),
              "k=%ld: observer told nothing", k);
  const rt_request_t cand = {RT_KIND_ELECTION, 0, 0, 0, "v", 1};
  s.a.s = &s;
  s.a.tag = "A";
  RETRY_ON_ENOMEM(&s, "rt_wait_ex",
                  rt_wait_ex(s.c, s.name, strlen(s.name), &cand, 10000, 3000,
                             scen_lock_cb, &s.a, &s.a.handle));
  s.a.accepted = last_rc == 0;
  scen_await(&s, &s.a, 6000);
  if (s.a.lock != NULL && r.accepted)
    RTT_RUN_UNTIL(&s.loop, strcmp(r.leader, rt_lock_id(s.a.lock)) == 0, 6000);
  if (s.connect_status == 0) {
    kill_connections(s.c);
    rtt_kill_conn(rc, "obs", rt_client_id(s.c));
    cr_assert(rtt_run_until_fn(&s.loop, reconnected, s.c, 6000),
              "k=%ld: no reconnect within 6 s", k);
  }
  scen_release(&s, &s.a);
  ret = RTT_API(rt_client_close(s.c, scen_close_cb, &s));
  cr_assert_eq(ret, 0, "k=%ld: rt_client_close: %s", k, rt_err_name(ret));
  rtt_loop_finish(&s.loop);
  rtt_oom_nth.armed = 0;
  cr_assert_eq(s.closes, 1);
  scen_check_req(&s, &s.a);
  /* The last call: the close, or the client's first connect failure. */
  int last = s.connect_status == RT_EDISCONNECTED ? RT_ECONNECT
             : s.connect_status != 0              ? s.connect_status
                                                  : RT_ECANCELED;
  if (r.accepted)
    cr_assert(r.finals == 1 && r.status == last,
              "k=%ld: observer's last call %s (%d)", k, rt_err_name(r.status),
              r.finals);
  rtt_oom_check_no_violation("observe scenario");
}

Test(oom, every_allocation_of_an_observer_can_fail_with_a_clean_error) {
  cr_assert_eq(fiu_init(0), 0);
  cr_assert_eq(
      fiu_enable_external("redturn/alloc", 1, NULL, 0, rtt_oom_fail_nth), 0);
  long k, sites = -1;
  for (k = 1; k <= 2000; k++) {
    observe_scenario(k);
    if (!rtt_oom_nth.fired) {
      sites = rtt_oom_nth.calls;
      break;
    }
  }
  fiu_disable("redturn/alloc");
  cr_assert_gt(sites, 10, "only %ld allocations after %ld runs", sites, k);
  cr_log_info("every one of the observer scenario's %ld allocations failed "
              "once",
              sites);
}

/* ---- 2. a wait's deadline, whichever allocation fails ---------------------- */

typedef struct dl {
  int connects, connect_status, closes;
  int calls, status;
  uint64_t at_ms;
} dl;

static void dl_connect_cb(rt_client_t *c, int status, void *data) {
  dl *d = data;
  (void)c;
  d->connects++;
  d->connect_status = status;
}

static void dl_close_cb(rt_client_t *c, void *data) {
  dl *d = data;
  (void)c;
  d->closes++;
}

static void dl_lock_cb(rt_lock_t *lock, int status, void *data) {
  dl *d = data;
  (void)lock;
  rtt_oom_check_callback("deadline wait", status);
  d->calls++;
  d->status = status;
  d->at_ms = rtt_now_ms();
}

/* A fresh client waits with a 100 ms deadline on a lock another client
 * holds, while its k-th allocation fails. The wait must end by its
 * deadline (rt_wait accepted it), whatever failed. A fresh client each
 * time: its first timeout is the one that allocates. */
Test(oom, a_wait_ends_by_its_deadline_whichever_allocation_fails) {
  rtt_client holder;
  rtt_req held;
  memset(&held, 0, sizeof(held));
  cr_assert_eq(fiu_init(0), 0);
  cr_assert_eq(
      fiu_enable_external("redturn/alloc", 1, NULL, 0, rtt_oom_fail_nth), 0);
  rtt_open_ready(&holder, &loop, NULL);
  rtt_acquire(&loop, holder.c, "held", 60000, &held);

  rt_options_t o;
  rtt_options(&o);
  long k, sites = -1;
  for (k = 1; k <= 200; k++) {
    dl d;
    rt_client_t *c = NULL;
    memset(&d, 0, sizeof(d));
    rtt_oom_k = k;
    cr_assert_eq(rt_client_open(&loop, &o, dl_connect_cb, &d, &c), 0);
    cr_assert(rtt_run_until(&loop, &d.connects, 1, 5000));
    cr_assert_eq(d.connect_status, 0);

    rtt_oom_nth.calls = 0;
    rtt_oom_nth.fail_at = k;
    rtt_oom_nth.fired = 0;
    rtt_oom_nth.armed = 1;
    uint64_t start = rtt_now_ms();
    int ret = RTT_API(rt_wait(c, "held", 4, 60000, 100, dl_lock_cb, &d, NULL));
    if (ret == RT_ENOMEM) { /* nothing happened: again (the failure is spent) */
      start = rtt_now_ms();
      ret = RTT_API(rt_wait(c, "held", 4, 60000, 100, dl_lock_cb, &d, NULL));
    }
    cr_assert_eq(ret, 0, "k=%ld: rt_wait: %s", k, rt_err_name(ret));
    cr_assert(rtt_run_until(&loop, &d.calls, 1, 3000),
              "k=%ld: a wait with a 100 ms deadline did not end in 3 s "
              "(its allocation %ld failed)",
              k, k);
    cr_assert_eq(d.status, RT_EWAITTIMEOUT, "k=%ld: wait ended with %s", k,
                 rt_err_name(d.status));
    cr_assert_leq(d.at_ms - start, 1000,
                  "k=%ld: deadline reported after %llu ms", k,
                  (unsigned long long)(d.at_ms - start));
    cr_assert_eq(RTT_API(rt_client_close(c, dl_close_cb, &d)), 0);
    cr_assert(rtt_run_until(&loop, &d.closes, 1, 5000), "k=%ld: close", k);
    rtt_oom_nth.armed = 0;
    rtt_oom_check_no_violation("deadline wait");
    if (!rtt_oom_nth.fired) {
      sites = rtt_oom_nth.calls;
      break;
    }
  }
  fiu_disable("redturn/alloc");
  rtt_release(&loop, &held, 0);
  rtt_close(&holder);
  rtt_loop_finish(&loop);
  cr_assert_gt(sites, 0, "the wait still allocated after %ld runs", k);
  cr_log_info("deadline wait: each of its %ld allocations failed once", sites);
}

/* ---- 3. the blocking API ------------------------------------------------- */

/* A blocking call made while allocations fail returns 0 or RT_ENOMEM (or,
 * for open, the connect failure that a lost allocation caused); after
 * RT_ENOMEM nothing happened, and the same call made again succeeds. */
#define BLOCKING(k, what, call, ...)                                           \
  do {                                                                         \
    int rc_ = (call);                                                          \
    int ok_[] = {0, RT_ENOMEM, __VA_ARGS__};                                   \
    int found_ = 0;                                                            \
    for (size_t i_ = 0; i_ < sizeof(ok_) / sizeof(ok_[0]); i_++)               \
      found_ |= rc_ == ok_[i_];                                                \
    cr_assert(found_, "k=%ld: %s returned %s", (k), (what), rt_err_name(rc_)); \
    if (rc_ == RT_ENOMEM) {                                                    \
      rc_ = (call);                                                            \
      cr_assert(rc_ != RT_ENOMEM, "k=%ld: %s again: RT_ENOMEM", (k), (what));  \
    }                                                                          \
    last_rc = rc_;                                                             \
  } while (0)

Test(oom, every_allocation_of_the_blocking_api_can_fail_cleanly) {
  cr_assert_eq(fiu_init(0), 0);
  cr_assert_eq(
      fiu_enable_external("redturn/alloc", 1, NULL, 0, rtt_oom_fail_nth), 0);
  rt_options_t o;
  rtt_options(&o);
  long k, sites = -1;
  int opened = 0, locked_runs = 0;
  for (k = 1; k <= 500; k++) {
    char name[32];
    snprintf(name, sizeof(name), "blocking-%ld", k);
    size_t len = strlen(name);
    rt_blocking_t *b = NULL;
    rt_lock_t *l = NULL, *t = NULL;
    int flag;
    rtt_oom_nth.calls = 0;
    rtt_oom_nth.fail_at = k;
    rtt_oom_nth.fired = 0;
    rtt_oom_nth.armed = 1;
    int ret = rt_blocking_open(&o, &b);
    cr_assert(ret == 0 || ret == RT_ENOMEM || ret == RT_ECONNECT,
              "k=%ld: rt_blocking_open: %s", k, rt_err_name(ret));
    if (ret != 0) {
      cr_assert_null(b, "k=%ld: *out set by a failed open", k);
    } else {
      opened++;
      BLOCKING(k, "rt_blocking_wait",
               rt_blocking_wait(b, name, len, 10000, 2000, &l),
               RT_EWAITTIMEOUT);
      if (last_rc == 0) {
        locked_runs++;
        BLOCKING(k, "rt_blocking_extend", rt_blocking_extend(b, l, 10000),
                 RT_ELOST);
        BLOCKING(k, "rt_blocking_owned", rt_blocking_owned(b, l, &flag), 0);
        BLOCKING(k, "rt_blocking_try_lock",
                 rt_blocking_try_lock(b, name, len, 10000, &t), RT_EBUSY);
        if (last_rc == 0) /* only if l was lost meanwhile */
          BLOCKING(k, "rt_blocking_signal", rt_blocking_signal(b, t), RT_ELOST);
        BLOCKING(k, "rt_blocking_signal", rt_blocking_signal(b, l), RT_ELOST);
      }
      BLOCKING(k, "rt_blocking_locked", rt_blocking_locked(b, name, len, &flag),
               0);
      cr_assert_eq(rt_blocking_close(b), 0, "k=%ld: rt_blocking_close", k);
    }
    rtt_oom_nth.armed = 0;
    if (!rtt_oom_nth.fired) {
      sites = rtt_oom_nth.calls;
      break;
    }
  }
  fiu_disable("redturn/alloc");
  cr_assert_gt(sites, 0, "the blocking API still allocated after %ld runs", k);
  cr_log_info("blocking API: each of its %ld allocations failed once "
              "(%d runs connected, %d got the lock)",
              sites, opened, locked_runs);
}

#else /* !REDTURN_HAVE_FIU */

Test(oom, needs_libfiu) {
  cr_skip_test("built without libfiu (REDTURN_FIU=OFF): nothing to inject");
}

#endif
