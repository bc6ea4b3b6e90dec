/* Several processes on one resource: mutual exclusion, FIFO grants in
 * Redis enqueue order, strictly increasing fences, no starvation; and
 * processes that die holding or waiting for the lock. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rt_test.h"

/* The fixture decides the URL and prefix before any fork, so children
 * share them; they make their own loops and connections. */
RTT_SUITE_TIMEOUT(processes, 40);

/* ---- children (no Criterion assertions here: they exit with a code) ---- */

typedef struct hold_rec {
  char id[RTT_ID_MAX];
  uint64_t fence;
  int64_t grant_us;   /* CLOCK_REALTIME in the grant callback */
  int64_t release_us; /* CLOCK_REALTIME just before rt_signal */
  int status;         /* wait status */
  int sig_status;     /* signal status */
} hold_rec;

#define NPROC 4
#define ROUNDS 6

typedef struct contender {
  uv_loop_t loop;
  rt_client_t *c;
  uv_timer_t hold;
  uv_timer_t guard;
  const char *res;
  int64_t ttl_ms;
  int rounds;
  hold_rec recs[ROUNDS];
  int nrecs;
  rt_lock_t *lock;
  unsigned rand;
  int failed;
  int stay; /* keep holding (crash test): report and never release */
  int out_fd;
} contender;

static void child_closed(rt_client_t *c, void *data) {
  contender *k = data;
  (void)c;
  uv_close((uv_handle_t *)&k->hold, NULL);
  uv_close((uv_handle_t *)&k->guard, NULL);
}

static void next_round(contender *k);

static void child_released(rt_lock_t *l, int status, void *data) {
  contender *k = data;
  (void)l;
  k->recs[k->nrecs - 1].sig_status = status;
  if (status != 0)
    k->failed = 1;
  next_round(k);
}

static void child_hold_over(uv_timer_t *t) {
  contender *k = t->data;
  k->recs[k->nrecs - 1].release_us = rtt_realtime_us();
  if (rt_signal(k->lock, child_released, k) != 0) {
    k->failed = 1;
    rt_client_close(k->c, child_closed, k);
  }
}

static void child_granted(rt_lock_t *l, int status, void *data) {
  contender *k = data;
  hold_rec *r = &k->recs[k->nrecs++];
  r->grant_us = rtt_realtime_us();
  r->status = status;
  snprintf(r->id, sizeof(r->id), "%s", rt_lock_id(l));
  if (status != 0) {
    k->failed = 1;
    rt_client_close(k->c, child_closed, k);
    return;
  }
  r->fence = rt_lock_fence(l);
  k->lock = l;
  if (k->stay) {
    rtt_write_all(k->out_fd, r, sizeof(*r));
    return;
  }
  k->rand = k->rand * 1103515245u + 12345u;
  uv_timer_start(&k->hold, child_hold_over, 1 + (k->rand >> 16) % 8, 0);
}

static void next_round(contender *k) {
  if (k->rounds++ == (k->stay ? 1 : ROUNDS) ||
      rt_wait(k->c, k->res, strlen(k->res), k->ttl_ms, RT_FOREVER,
              child_granted, k, NULL) != 0)
    rt_client_close(k->c, child_closed, k);
}

static void child_connected(rt_client_t *c, int status, void *data) {
  contender *k = data;
  (void)c;
  if (status != 0) {
    k->failed = 1;
    rt_client_close(k->c, child_closed, k);
    return;
  }
  next_round(k);
}

static void child_guard(uv_timer_t *t) {
  (void)t;
  _exit(3); /* hung: the parent sees the missing records */
}

/* Run a contender to its end; returns the child's exit code. */
static int run_contender(contender *k, int out_fd) {
  rt_options_t o;
  k->out_fd = out_fd;
  k->rand = (unsigned)getpid();
  if (uv_loop_init(&k->loop) != 0)
    return 4;
  uv_timer_init(&k->loop, &k->hold);
  uv_timer_init(&k->loop, &k->guard);
  k->hold.data = k;
  k->guard.data = k;
  uv_timer_start(&k->guard, child_guard, 30000, 0);
  uv_unref((uv_handle_t *)&k->guard);
  rt_options_init(&o);
  o.url = rtt_url();
  o.prefix = rtt_prefix();
  if (rt_client_open(&k->loop, &o, child_connected, k, &k->c) != 0)
    return 5;
  uv_run(&k->loop, UV_RUN_DEFAULT);
  if (!k->stay &&
      rtt_write_all(out_fd, k->recs, sizeof(hold_rec) * (size_t)k->nrecs) != 0)
    return 6;
  if (uv_loop_close(&k->loop) != 0)
    return 7;
  return k->failed ? 1 : 0;
}

static int contend_child(int out_fd, int go_fd, void *arg) {
  static contender k;
  (void)arg;
  if (rtt_await_go(go_fd) != 0)
    return 2;
  k.res = "contended";
  k.ttl_ms = 5000;
  return run_contender(&k, out_fd);
}

/* ---- parent ---------------------------------------------------------------- */

static int by_grant_time(const void *a, const void *b) {
  const hold_rec *x = a, *y = b;
  return (x->grant_us > y->grant_us) - (x->grant_us < y->grant_us);
}

/* Entries RPUSHed to key, in the order Redis executed them, from a MONITOR
 * stream, up to the line holding marker. Returns how many. */
static size_t monitored_pushes(redisContext *mon, const char *key,
                               const char *marker, char (*out)[RTT_ID_MAX],
                               size_t max) {
  char pat[256];
  size_t n = 0;
  snprintf(pat, sizeof(pat), "\"RPUSH\" \"%s\" \"", key);
  for (;;) {
    redisReply *r = NULL;
    cr_assert_eq(redisGetReply(mon, (void **)&r), REDIS_OK,
                 "MONITOR stream broke: %s", mon->errstr);
    cr_assert_eq(r->type, REDIS_REPLY_STATUS);
    int end = strstr(r->str, marker) != NULL;
    const char *p = strstr(r->str, pat);
    if (p != NULL) {
      p += strlen(pat);
      const char *q = strchr(p, '"');
      cr_assert_not_null(q);
      cr_assert_lt(n, max, "more pushes than requests");
      snprintf(out[n], RTT_ID_MAX, "%.*s", (int)(q - p), p);
      n++;
    }
    freeReplyObject(r);
    if (end)
      return n;
  }
}

Test(processes, contending_processes_hold_one_at_a_time_in_enqueue_order) {
  enum { TOTAL = NPROC * ROUNDS };
  rtt_child ch[NPROC];
  char qkey[128];
  rtt_key(qkey, sizeof(qkey), rtt_prefix(), "contended", 9, 'q');

  /* Every command Redis runs, in order: the RPUSHes are the enqueues. */
  redisContext *mon = rtt_redis();
  redisReply *ok = rtt_cmd(mon, "MONITOR");
  cr_assert_eq(ok->type, REDIS_REPLY_STATUS);
  freeReplyObject(ok);

  for (int i = 0; i < NPROC; i++)
    rtt_fork(&ch[i], contend_child, NULL);

  rtt_client a;
  rtt_req gate = {0};
  rtt_open_ready(&a, &loop, NULL);
  rtt_acquire(&loop, a.c, "contended", 10000, &gate);

  /* Everyone's first request queues behind the gate. */
  for (int i = 0; i < NPROC; i++)
    rtt_child_go(&ch[i]);
  rtt_run_until_queued(&loop, rc, "contended", NPROC + 1);
  char first[NPROC + 1][RTT_ID_MAX];
  cr_assert_eq(rtt_queue(rc, rtt_prefix(), "contended", 9, first, NPROC + 1),
               NPROC + 1);
  cr_assert_str_eq(first[0], gate.id);
  rtt_release(&loop, &gate, 0);

  hold_rec recs[TOTAL + 1];
  size_t n = 0;
  for (int i = 0; i < NPROC; i++) {
    size_t got = rtt_read_records(ch[i].out_fd, recs + n, sizeof(hold_rec),
                                  TOTAL + 1 - n, 30000);
    int code = rtt_child_wait(&ch[i], 10000);
    cr_assert_eq(code, 0, "child %d exited with %d", i, code);
    cr_assert_eq(got, ROUNDS, "child %d reported %zu holds, want %d", i, got,
                 ROUNDS);
    n += got;
  }
  cr_assert_eq(n, TOTAL);

  /* The enqueue order, as Redis executed it. */
  char marker[64];
  snprintf(marker, sizeof(marker), "end-of-%s", rtt_prefix());
  freeReplyObject(rtt_cmd(rc, "ECHO %s", marker));
  /* The gate was granted at once: a free lock queues nothing. */
  char pushed[TOTAL + 2][RTT_ID_MAX];
  size_t np = monitored_pushes(mon, qkey, marker, pushed, TOTAL + 2);
  cr_assert_eq(np, TOTAL, "%zu enqueues seen, want %d", np, TOTAL);
  for (int i = 1; i <= NPROC; i++)
    cr_assert_str_eq(pushed[i - 1], first[i]);

  qsort(recs, n, sizeof(recs[0]), by_grant_time);
  for (size_t i = 0; i < n; i++) {
    cr_assert_eq(recs[i].status, 0, "a wait failed: %s",
                 rt_err_name(recs[i].status));
    cr_assert_eq(recs[i].sig_status, 0, "a release failed: %s",
                 rt_err_name(recs[i].sig_status));
    cr_assert_leq(recs[i].grant_us, recs[i].release_us);
    if (i > 0) {
      /* Mutual exclusion: a hold starts after the previous one ended. */
      cr_assert_leq(recs[i - 1].release_us, recs[i].grant_us,
                    "holds %zu and %zu overlap by %lld us", i - 1, i,
                    (long long)(recs[i - 1].release_us - recs[i].grant_us));
      cr_assert_gt(recs[i].fence, recs[i - 1].fence,
                   "fence %llu after %llu in grant order",
                   (unsigned long long)recs[i].fence,
                   (unsigned long long)recs[i - 1].fence);
    }
    /* FIFO: the i-th grant went to the i-th enqueue (after the gate). */
    cr_assert_str_eq(recs[i].id, pushed[i],
                     "grant %zu went to %s, but Redis enqueued %s next", i,
                     recs[i].id, pushed[i]);
    cr_assert_gt(recs[i].fence, i == 0 ? gate.fence : recs[i - 1].fence);
  }
  cr_assert_eq(rtt_qlen(rc, rtt_prefix(), "contended", 9), 0);

  rtt_close(&a);
  rtt_loop_finish(&loop);
  rtt_redis_close(mon);
}

/* A child that takes the lock with a short lease, reports, and keeps
 * holding until it is killed. */
static int holder_child(int out_fd, int go_fd, void *arg) {
  static contender k;
  (void)go_fd;
  k.res = arg;
  k.ttl_ms = 800;
  k.stay = 1;
  return run_contender(&k, out_fd);
}

Test(processes,
     a_crashed_holder_is_evicted_after_its_lease_by_the_redis_clock) {
  rtt_child ch;
  hold_rec rec;
  rtt_fork(&ch, holder_child, "crash");
  cr_assert_eq(rtt_read_records(ch.out_fd, &rec, sizeof(rec), 1, 10000), 1,
               "the child never got the lock");
  cr_assert_eq(rec.status, 0);

  long long deadline = rtt_hfield(rc, rtt_prefix(), "crash", 5, "d");
  cr_assert_gt(deadline, 0);
  cr_assert_eq(rtt_hfield(rc, rtt_prefix(), "crash", 5, "f"),
               (long long)rec.fence);

  rtt_client a;
  rtt_req w = {0};
  rtt_open_ready(&a, &loop, NULL);
  cr_assert_eq(rtt_wait(a.c, "crash", 3000, RT_FOREVER, &w), 0);
  rtt_run_until_queued(&loop, rc, "crash", 2);
  cr_assert_eq(w.calls, 0);

  kill(ch.pid, SIGKILL);
  cr_assert_eq(rtt_child_wait(&ch, 5000), 128 + SIGKILL);

  cr_assert(rtt_run_until(&loop, &w.calls, 1, 5000),
            "the waiter was never granted after the holder died");
  int64_t now = rtt_redis_time_ms(rc);
  cr_assert_eq(w.status, 0, "wait: %s", rt_err_name(w.status));
  long long granted_at = rtt_hfield(rc, rtt_prefix(), "crash", 5, "g");
  cr_assert_geq(granted_at, deadline,
                "granted at %lld by the Redis clock, %lld ms before the "
                "holder's lease ended",
                granted_at, deadline - granted_at);
  cr_assert_geq(now, deadline);
  cr_assert_leq(granted_at, deadline + 1000,
                "granted %lld ms after the lease ended", granted_at - deadline);
  cr_assert_gt(w.fence, rec.fence);
  char q[4][RTT_ID_MAX];
  cr_assert_eq(rtt_queue(rc, rtt_prefix(), "crash", 5, q, 4), 1);
  cr_assert_str_eq(q[0], w.id);

  rtt_release(&loop, &w, 0);
  rtt_close(&a);
  rtt_loop_finish(&loop);
}

/* A child that waits for the lock and reports once its request is queued
 * (by the position Redis gave it), then waits to be killed. */
static void waiter_never_granted(rt_lock_t *l, int status, void *data) {
  (void)l;
  (void)status;
  (void)data;
  _exit(9); /* must not happen before the parent kills us */
}

static int waiter_child(int out_fd, int go_fd, void *arg) {
  (void)go_fd;
  return rtt_child_wait_forever(out_fd, arg, 5000, waiter_never_granted, NULL);
}

Test(processes, a_waiter_whose_process_died_does_not_hold_up_the_queue) {
  rtt_client a, b;
  rtt_req holder = {0}, next = {0};
  rtt_open_ready(&a, &loop, NULL);
  rtt_open_ready(&b, &loop, NULL);
  rtt_acquire(&loop, a.c, "deadwait", 10000, &holder);

  rtt_child ch;
  rtt_fork(&ch, waiter_child, "deadwait");
  char byte;
  cr_assert_eq(rtt_read_records(ch.out_fd, &byte, 1, 1, 10000), 1);
  rtt_run_until_queued(&loop, rc, "deadwait", 2);
  cr_assert_eq(rtt_wait(b.c, "deadwait", 10000, RT_FOREVER, &next), 0);
  rtt_run_until_queued(&loop, rc, "deadwait", 3);

  kill(ch.pid, SIGKILL);
  cr_assert_eq(rtt_child_wait(&ch, 5000), 128 + SIGKILL);
  rtt_run_for(&loop, 200); /* Redis notices the closed connections */

  uint64_t t0 = rtt_now_ms();
  rtt_release(&loop, &holder, 0);
  cr_assert(rtt_run_until(&loop, &next.calls, 1, 8000),
            "the live waiter behind a dead one was not granted");
  cr_assert_eq(next.status, 0);
  /* Well within the dead waiter's 5 s lease. */
  cr_assert_lt(next.at_ms - t0, 3000, "granted only after %llu ms",
               (unsigned long long)(next.at_ms - t0));
  char q[4][RTT_ID_MAX];
  cr_assert_eq(rtt_queue(rc, rtt_prefix(), "deadwait", 8, q, 4), 1);
  cr_assert_str_eq(q[0], next.id);
  cr_assert_gt(next.fence, holder.fence);

  rtt_release(&loop, &next, 0);
  rtt_close(&a);
  rtt_close(&b);
  rtt_loop_finish(&loop);
}
