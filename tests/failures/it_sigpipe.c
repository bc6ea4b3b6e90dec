/* A library must never kill its host process: when Redis drops our
 * connections under load, the library writes to sockets whose peer is gone,
 * which raises SIGPIPE. The workload runs in a child that keeps SIGPIPE's
 * default action (terminate), while the test kills the child's connections
 * again and again; the child must exit normally. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_test.h"

TestSuite(sigpipe, .fini = rtt_cleanup, .timeout = 30);

#define WAITERS 8
/* The load runs at least LOAD_MS and until the test has killed more than
 * KILLS_MIN connections (a loaded machine reconnects slowly), at most
 * LOAD_CAP_MS. */
#define LOAD_MS 2000
#define KILLS_MIN 10
#define LOAD_CAP_MS 15000

/* One record from the child: when it is connected, and when its load is
 * over (just before it closes its client). */
typedef struct report {
  int final;
  char id[40]; /* rt_client_id() */
  uint64_t grants;
  uint64_t reconnects;
} report;

/* ---- the child: a contention loop on one resource ------------------------ */

typedef struct child child;

/* A waiter re-queues as soon as its turn ended, however it ended. Half of
 * them release from a timer, as code that works under the lock does: so
 * commands leave from timers as well as from reply callbacks, in more than
 * one write per loop turn. */
typedef struct waiter {
  child *ch;
  uv_timer_t hold;
  rt_lock_t *lock;
  int from_timer;
} waiter;

struct child {
  uv_loop_t loop;
  uv_timer_t stop; /* the cap */
  uv_poll_t go;    /* the test's word to stop */
  rt_client_t *c;
  int out_fd;
  int connected, connect_status, closed, stopping;
  waiter w[WAITERS];
};

static void on_lock(rt_lock_t *lock, int status, void *data);

static void rewait(waiter *w) {
  if (!w->ch->stopping)
    rt_wait(w->ch->c, "res", 3, 2000, 1000, on_lock, w, NULL);
}

static void on_signal(rt_lock_t *lock, int status, void *data) {
  (void)lock;
  (void)status;
  rewait(data);
}

static void release(waiter *w) {
  rt_lock_t *lock = w->lock;
  w->lock = NULL;
  if (rt_signal(lock, on_signal, w) != 0)
    rewait(w);
}

static void hold_cb(uv_timer_t *t) { release(t->data); }

static void on_lock(rt_lock_t *lock, int status, void *data) {
  waiter *w = data;
  if (status != 0) {
    rewait(w);
    return;
  }
  w->lock = lock;
  if (w->from_timer)
    uv_timer_start(&w->hold, hold_cb, 0, 0);
  else
    release(w);
}

static void on_connect(rt_client_t *c, int status, void *data) {
  child *ch = data;
  (void)c;
  ch->connected = 1;
  ch->connect_status = status;
}

static void on_close(rt_client_t *c, void *data) {
  child *ch = data;
  (void)c;
  ch->closed = 1;
}

static int send_report(int out_fd, rt_client_t *c, int final);

static void stop(child *ch) {
  if (ch->stopping)
    return;
  ch->stopping = 1;
  send_report(ch->out_fd, ch->c, 1);
  /* Held locks are released by the close. */
  rt_client_close(ch->c, on_close, ch);
  uv_close((uv_handle_t *)&ch->stop, NULL);
  uv_close((uv_handle_t *)&ch->go, NULL);
  for (int i = 0; i < WAITERS; i++)
    uv_close((uv_handle_t *)&ch->w[i].hold, NULL);
}

static void stop_cb(uv_timer_t *t) { stop(t->data); }

static void go_cb(uv_poll_t *p, int status, int events) {
  (void)status;
  (void)events;
  stop(p->data);
}

static int send_report(int out_fd, rt_client_t *c, int final) {
  report r;
  rt_stats_t st;
  memset(&r, 0, sizeof(r));
  r.final = final;
  snprintf(r.id, sizeof(r.id), "%s", rt_client_id(c));
  rt_client_stats(c, &st);
  r.grants = st.grants;
  r.reconnects = st.reconnects;
  return rtt_write_all(out_fd, &r, sizeof(r));
}

/* Exit codes: 0 survived, 2-6 setup failures (never 128 + a signal). */
static int child_main(int out_fd, int go_fd, void *arg) {
  const rt_options_t *o = arg;
  child ch;
  sigset_t pipe_set;

  /* Whatever the test runner did: SIGPIPE terminates this process. */
  signal(SIGPIPE, SIG_DFL);
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  sigprocmask(SIG_UNBLOCK, &pipe_set, NULL);

  memset(&ch, 0, sizeof(ch));
  ch.out_fd = out_fd;
  if (uv_loop_init(&ch.loop) != 0)
    return 2;
  if (rt_client_open(&ch.loop, o, on_connect, &ch, &ch.c) != 0)
    return 3;
  uint64_t until = rtt_now_ms() + 5000;
  while (!ch.connected && rtt_now_ms() < until)
    uv_run(&ch.loop, UV_RUN_ONCE);
  if (!ch.connected || ch.connect_status != 0)
    return 4;
  if (send_report(out_fd, ch.c, 0) != 0)
    return 5;

  for (int i = 0; i < WAITERS; i++) {
    waiter *w = &ch.w[i];
    w->ch = &ch;
    w->from_timer = i % 2;
    uv_timer_init(&ch.loop, &w->hold);
    w->hold.data = w;
    rewait(w);
  }
  uv_timer_init(&ch.loop, &ch.stop);
  ch.stop.data = &ch;
  uv_timer_start(&ch.stop, stop_cb, LOAD_CAP_MS, 0);
  if (uv_poll_init(&ch.loop, &ch.go, go_fd) != 0)
    return 2;
  ch.go.data = &ch;
  uv_poll_start(&ch.go, UV_READABLE | UV_DISCONNECT, go_cb);
  uv_run(&ch.loop, UV_RUN_DEFAULT);
  if (!ch.closed || uv_loop_close(&ch.loop) != 0)
    return 6;
  return 0;
}

/* ---- the test ------------------------------------------------------------- */

Test(sigpipe, connections_killed_under_load_do_not_kill_the_process) {
  rt_options_t o;
  rtt_child ch;
  report first, last = {0};
  redisContext *rc = rtt_redis();

  rtt_options(&o); /* before the fork: the shared server starts here */
  rtt_fork(&ch, child_main, &o);
  cr_assert_eq(rtt_read_records(ch.out_fd, &first, sizeof(first), 1, 10000), 1,
               "the child did not connect (exit %d)",
               rtt_child_wait(&ch, 1000));

  /* Kill the child's command connection (every third time its subscriber
   * too) a few ms after each reconnect, while its commands flow, for
   * LOAD_MS and more than KILLS_MIN kills; then tell it to stop, and wait
   * for its last report (or its death). */
  int kills = 0, rounds = 0, told = 0;
  long long last_cmd = -1;
  uint64_t t0 = rtt_now_ms();
  while (rtt_now_ms() < t0 + LOAD_CAP_MS + 3000) {
    if (!told && kills > KILLS_MIN && rtt_now_ms() >= t0 + LOAD_MS) {
      rtt_child_go(&ch);
      told = 1;
    }
    if (rtt_read_records(ch.out_fd, &last, sizeof(last), 1, 1) == 1)
      break;
    if (told)
      continue;
    long long id = rtt_conn_id(rc, "cmd", first.id);
    if (id < 0 || id == last_cmd)
      continue; /* reconnecting */
    rtt_sleep_ms(rand() % 25);
    kills += rtt_int(rc, "CLIENT KILL ID %lld", id) == 1;
    last_cmd = id;
    if (++rounds % 3 == 0)
      kills += rtt_kill_conn(rc, "sub", first.id);
  }
  int code = rtt_child_wait(&ch, 10000);
  cr_assert_neq(code, 128 + SIGPIPE, "the child was killed by SIGPIPE");
  cr_assert_eq(code, 0, "the child exited with %d", code);
  cr_assert_eq(last.final, 1, "no final report from the child");
  cr_assert_gt(kills, KILLS_MIN, "only %d connections killed", kills);
  cr_assert_gt(last.reconnects, 0, "the client never came back");
  cr_assert_gt(last.grants, 0, "no lock was granted");
  rtt_redis_close(rc);
}
