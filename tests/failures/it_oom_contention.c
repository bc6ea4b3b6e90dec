/* Out of memory and failing writes under contention, injected with libfiu
 * (see it_oom.c for how; the checks in tests/support/rtt_oom.h):
 *
 *  4. Allocations fail at random under contention.
 *  5. Writes fail at random under contention: connections drop, the
 *     clients reconnect, waits still end granted or by their deadline.
 *  6. A release whose write fails on a live connection is sent again.
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

/* Contention runs for several seconds; the ASan tree is slower. `rc` kills
 * our connections. */
RTT_SUITE_TIMEOUT(oom, 120);

#ifdef REDTURN_HAVE_FIU

/* ---- contention loops (tests 4 and 5) ---------------------------------------- */

#define CL_CLIENTS 2
#define CL_WORKERS 4 /* per client */
#define CL_NRES 2

typedef struct cl cl;

/* A worker waits, releases as soon as it is granted, and waits again. */
typedef struct worker {
  cl *x;
  int client, res;
  uv_timer_t retry; /* a call failed with RT_ENOMEM: again on the next turn */
  rt_lock_t *held;  /* granted, rt_signal not yet accepted */
  int waiting;      /* a wait was accepted, its callback not yet run */
  int signaling;    /* a signal was accepted, its callback not yet run */
  int rounds;       /* waits that ended */
} worker;

struct cl {
  const char *tag;
  rt_client_t *c[CL_CLIENTS];
  int connects[CL_CLIENTS], connect_status[CL_CLIENTS];
  int closes;
  int stopping;
  worker w[CL_CLIENTS * CL_WORKERS];
  /* Counters. */
  int waits, wait_calls, sig_accepted, sig_calls, grants, enomem;
  int deadlines, lost, canceled, other_errors;
  int bad_waits; /* a wait ended with a status the test forbids */
  int bad_status;
  int allow_wait_errors; /* test 2: any RT_E* code ends a wait */
};

static void cl_start_wait(worker *w);
static void cl_signal(worker *w, rt_lock_t *l);

static void cl_retry_cb(uv_timer_t *t) {
  worker *w = t->data;
  if (w->x->stopping)
    return;
  if (w->held != NULL) {
    rt_lock_t *l = w->held;
    w->held = NULL;
    cl_signal(w, l);
  } else if (!w->waiting) {
    cl_start_wait(w);
  }
}

static void cl_signal_cb(rt_lock_t *lock, int status, void *data) {
  worker *w = data;
  cl *x = w->x;
  (void)lock;
  rtt_oom_check_callback("signal", status);
  if (!w->signaling)
    rtt_oom_violation("%s: signal callback without a signal pending", x->tag);
  w->signaling = 0;
  x->sig_calls++;
  if (status == RT_ELOST)
    x->lost++;
  cl_start_wait(w);
}

static void cl_signal(worker *w, rt_lock_t *l) {
  cl *x = w->x;
  int ret = RTT_API(rt_signal(l, cl_signal_cb, w));
  if (ret == 0) {
    x->sig_accepted++;
    w->signaling = 1;
  } else if (ret == RT_ENOMEM) {
    x->enomem++;
    w->held = l;
    uv_timer_start(&w->retry, cl_retry_cb, 0, 0);
  } else if (ret != RT_ECLOSED || !x->stopping) {
    rtt_oom_violation("%s: rt_signal returned %s", x->tag, rt_err_name(ret));
  }
}

static void cl_lock_cb(rt_lock_t *lock, int status, void *data) {
  worker *w = data;
  cl *x = w->x;
  rtt_oom_check_callback("wait", status);
  if (!w->waiting)
    rtt_oom_violation("%s: wait callback without a wait pending", x->tag);
  w->waiting = 0;
  w->rounds++;
  x->wait_calls++;
  if (status == 0) {
    x->grants++;
    cl_signal(w, lock);
    return;
  }
  if (status == RT_EWAITTIMEOUT)
    x->deadlines++;
  else if (status == RT_ECANCELED)
    x->canceled++;
  else
    x->other_errors++;
  if (!x->allow_wait_errors && status != RT_EWAITTIMEOUT &&
      !(status == RT_ECANCELED && x->stopping)) {
    if (x->bad_waits++ == 0)
      x->bad_status = status;
  }
  cl_start_wait(w);
}

static void cl_start_wait(worker *w) {
  cl *x = w->x;
  static const char *const names[CL_NRES] = {"res-0", "res-1"};
  if (x->stopping)
    return;
  const char *name = names[w->res];
  int ret = RTT_API(rt_wait(x->c[w->client], name, strlen(name), 3000, 2000,
                            cl_lock_cb, w, NULL));
  if (ret == 0) {
    x->waits++;
    w->waiting = 1;
  } else if (ret == RT_ENOMEM) {
    x->enomem++;
    uv_timer_start(&w->retry, cl_retry_cb, 0, 0);
  } else {
    rtt_oom_violation("%s: rt_wait returned %s", x->tag, rt_err_name(ret));
  }
}

static void cl_connect_cb(rt_client_t *c, int status, void *data) {
  cl *x = data;
  rtt_oom_check_callback("connect", status);
  for (int i = 0; i < CL_CLIENTS; i++) {
    if (x->c[i] == c) {
      x->connects[i]++;
      x->connect_status[i] = status;
    }
  }
}

static void cl_close_cb(rt_client_t *c, void *data) {
  cl *x = data;
  (void)c;
  if (rtt_oom_in_call)
    rtt_oom_violation("%s: close callback ran inside a library call", x->tag);
  x->closes++;
}

static void cl_open(cl *x, const char *tag) {
  memset(x, 0, sizeof(*x));
  x->tag = tag;
  rt_options_t o;
  rtt_options(&o);
  o.command_timeout_ms = 2000;
  for (int i = 0; i < CL_CLIENTS; i++) {
    /* connect_cb finds its client in x->c[i]: it runs from the loop. */
    int ret = rt_client_open(&loop, &o, cl_connect_cb, x, &x->c[i]);
    cr_assert_eq(ret, 0, "rt_client_open: %s", rt_err_name(ret));
  }
  for (int i = 0; i < CL_CLIENTS; i++) {
    cr_assert(rtt_run_until(&loop, &x->connects[i], 1, 5000),
              "client %d did not connect", i);
    cr_assert_eq(x->connect_status[i], 0, "connect: %s",
                 rt_err_name(x->connect_status[i]));
  }
  for (int i = 0; i < CL_CLIENTS * CL_WORKERS; i++) {
    worker *w = &x->w[i];
    w->x = x;
    w->client = i / CL_WORKERS;
    w->res = i % CL_NRES;
    uv_timer_init(&loop, &w->retry);
    w->retry.data = w;
  }
}

static void cl_start(cl *x) {
  for (int i = 0; i < CL_CLIENTS * CL_WORKERS; i++)
    cl_start_wait(&x->w[i]);
}

/* Stop the workers, close the clients (held locks are released, waits
 * canceled), run the loop empty; then every accepted call has had its one
 * callback. */
static void cl_close(cl *x) {
  x->stopping = 1;
  for (int i = 0; i < CL_CLIENTS * CL_WORKERS; i++)
    uv_close((uv_handle_t *)&x->w[i].retry, NULL);
  for (int i = 0; i < CL_CLIENTS; i++) {
    int ret = RTT_API(rt_client_close(x->c[i], cl_close_cb, x));
    cr_assert_eq(ret, 0, "rt_client_close: %s", rt_err_name(ret));
  }
}

static void cl_check_after_close(cl *x) {
  cr_assert_eq(x->closes, CL_CLIENTS, "%s: %d close callbacks", x->tag,
               x->closes);
  cr_assert_eq(x->wait_calls, x->waits,
               "%s: %d waits accepted, %d wait callbacks", x->tag, x->waits,
               x->wait_calls);
  cr_assert_eq(x->sig_calls, x->sig_accepted,
               "%s: %d signals accepted, %d signal callbacks", x->tag,
               x->sig_accepted, x->sig_calls);
  for (int i = 0; i < CL_CLIENTS; i++)
    cr_assert_eq(x->connects[i], 1, "%s: client %d: %d connect callbacks",
                 x->tag, i, x->connects[i]);
  rtt_oom_check_no_violation(x->tag);
}

/* ---- 4. random allocation failures ------------------------------------------- */

Test(oom, random_allocation_failures_under_contention_end_every_wait_cleanly) {
  cl x;
  cr_assert_eq(fiu_init(0), 0);
  cl_open(&x, "random alloc");
  x.allow_wait_errors = 1; /* e.g. a connect that failed for lack of memory */
  cr_assert_eq(fiu_enable_random("redturn/alloc", 1, NULL, 0, 0.05f), 0);
  cl_start(&x);
  rtt_run_for(&loop, 1000);
  cl_close(&x); /* still failing allocations: closing must cope too */
  rtt_loop_finish(&loop);
  fiu_disable("redturn/alloc");
  cr_log_info("random alloc: %d waits, %d grants, %d RT_ENOMEM returns, "
              "%d deadlines, %d other wait errors, %d lost",
              x.waits, x.grants, x.enomem, x.deadlines, x.other_errors, x.lost);
  cl_check_after_close(&x);
  cr_assert_gt(x.grants, 0, "no lock was granted in 1 s");
  cr_assert_gt(x.enomem, 0, "no call failed with RT_ENOMEM: faults injected?");
}

/* ---- 5. failing writes ----------------------------------------------------- */

typedef struct progress {
  cl *x;
  int base[CL_CLIENTS * CL_WORKERS];
} progress;

/* Every worker finished two more waits since base. */
static int all_progressed(void *arg) {
  progress *p = arg;
  for (int i = 0; i < CL_CLIENTS * CL_WORKERS; i++)
    if (p->x->w[i].rounds < p->base[i] + 2)
      return 0;
  return 1;
}

Test(oom, failing_writes_drop_connections_and_every_wait_still_ends) {
  cl x;
  /* The default action: a SIGPIPE that escaped would kill the test. */
  signal(SIGPIPE, SIG_DFL);
  cr_assert_eq(fiu_init(0), 0);
  cl_open(&x, "failing writes");
  cr_assert_eq(fiu_enable_random("redturn/write", 1, NULL, 0, 0.02f), 0);
  cl_start(&x);
  rtt_run_for(&loop, 2000);
  fiu_disable("redturn/write");

  rt_stats_t st;
  uint64_t reconnects = 0;
  for (int i = 0; i < CL_CLIENTS; i++) {
    rt_client_stats(x.c[i], &st);
    reconnects += st.reconnects;
  }
  int grants_in_faults = x.grants;

  /* Writes work again: every worker must get through two more waits. */
  progress p = {&x, {0}};
  for (int i = 0; i < CL_CLIENTS * CL_WORKERS; i++)
    p.base[i] = x.w[i].rounds;
  cr_assert(rtt_run_until_fn(&loop, all_progressed, &p, 15000),
            "workers stalled after the write faults stopped");
  cr_assert_eq(x.bad_waits, 0,
               "%d waits ended neither granted nor by deadline (first: %s)",
               x.bad_waits, rt_err_name(x.bad_status));

  cl_close(&x);
  rtt_loop_finish(&loop);
  sigset_t pending;
  sigpending(&pending);
  cr_assert_not(sigismember(&pending, SIGPIPE), "a SIGPIPE is pending");
  cr_log_info("failing writes: %d waits, %d grants (%d while writes failed), "
              "%llu reconnects, %d deadlines, %d lost",
              x.waits, x.grants, grants_in_faults,
              (unsigned long long)reconnects, x.deadlines, x.lost);
  cl_check_after_close(&x);
  cr_assert_gt(reconnects, 0, "no connection failed: faults injected?");
  cr_assert_gt(grants_in_faults, 0, "no lock granted while writes failed");
}

/* ---- 6. a write that fails on a live connection --------------------------- */

static void count_locked_cb(rt_client_t *c, int status, int locked,
                            void *data) {
  (void)c;
  (void)status;
  (void)locked;
  (*(int *)data)++;
}

/* A release accepted by rt_signal whose write then fails (no memory to
 * note its send time) is written again shortly on the same connection:
 * it must not wait for a reconnect that never comes, with the lock held
 * all the while (releases have no command timeout). */
Test(oom, a_release_whose_write_failed_is_sent_again) {
  rtt_client a, b;
  rtt_req held, next;
  memset(&held, 0, sizeof(held));
  memset(&next, 0, sizeof(next));
  cr_assert_eq(fiu_init(0), 0);
  cr_assert_eq(
      fiu_enable_external("redturn/alloc", 1, NULL, 0, rtt_oom_fail_nth), 0);
  rtt_open_ready(&a, &loop, NULL);
  rtt_open_ready(&b, &loop, NULL);
  rtt_acquire(&loop, a.c, "unwritten", 60000, &held);
  cr_assert_eq(rtt_wait(b.c, "unwritten", 60000, 10000, &next), 0);
  /* Fill the connection's ring of send times with calls in flight, so the
   * release's write has to grow it: the release's op is its first
   * allocation, the ring its second. */
  int answers = 0, in_flight = 0;
  while (a.c->cmd.sent_len < a.c->cmd.sent_cap) {
    cr_assert_eq(rt_locked(a.c, "unwritten", 9, count_locked_cb, &answers), 0);
    in_flight++;
  }
  rtt_oom_nth.calls = 0;
  rtt_oom_nth.fail_at = 2;
  rtt_oom_nth.fired = 0;
  rtt_oom_nth.armed = 1;
  cr_assert_eq(rtt_signal(&held), 0);
  rtt_oom_nth.armed = 0;
  cr_assert(rtt_oom_nth.fired, "the release made fewer than two allocations");
  uint64_t start = rtt_now_ms();
  cr_assert(rtt_run_until(&loop, &held.sig_calls, 1, 5000),
            "the release was never answered");
  cr_assert_eq(held.sig_status, 0, "release: %s", rt_err_name(held.sig_status));
  cr_assert_lt(rtt_now_ms() - start, 1000, "the release took %llu ms",
               (unsigned long long)(rtt_now_ms() - start));
  cr_assert(rtt_run_until(&loop, &next.calls, 1, 2000),
            "the next waiter was not granted");
  cr_assert_eq(next.status, 0);
  cr_assert(rtt_run_until(&loop, &answers, in_flight, 2000));
  fiu_disable("redturn/alloc");
  rtt_release(&loop, &next, 0);
  rtt_close(&a);
  rtt_close(&b);
  rtt_loop_finish(&loop);
}

#else /* !REDTURN_HAVE_FIU */

Test(oom, needs_libfiu) {
  cr_skip_test("built without libfiu (REDTURN_FIU=OFF): nothing to inject");
}

#endif
