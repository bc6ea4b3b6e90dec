/* Test support: running a loop until something holds, the event log, and
 * recording query answers; see rt_test.h. */
#include "rtt_internal.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
/* ---- loops ---------------------------------------------------------------------- */

struct rtt_runner {
  uv_timer_t tick;
  uint64_t until;
  int expired;
};

static void run_tick(uv_timer_t *t) {
  rtt_runner *r = t->data;
  if (rtt_now_ms() >= r->until)
    r->expired = 1;
}

static void runner_free(uv_handle_t *h) { free(h->data); }

rtt_runner *rtt_runner_start(uv_loop_t *loop, int64_t max_ms) {
  /* On the heap: the timer finishes closing on a later loop run. */
  rtt_runner *r = calloc(1, sizeof(*r));
  cr_assert_not_null(r);
  r->until = rtt_now_ms() + (uint64_t)max_ms;
  uv_timer_init(loop, &r->tick);
  r->tick.data = r;
  uv_timer_start(&r->tick, run_tick, 5, 5);
  return r;
}

int rtt_runner_step(rtt_runner *r) {
  if (r->expired)
    return 0;
  uv_run(r->tick.loop, UV_RUN_ONCE);
  return 1;
}

void rtt_runner_stop(rtt_runner *r) {
  uv_close((uv_handle_t *)&r->tick, runner_free);
}

int rtt_run_until_fn(uv_loop_t *loop, int (*pred)(void *arg), void *arg,
                     int64_t max_ms) {
  int ok;
  RTT_RUN_UNTIL(loop, (ok = pred(arg)), max_ms);
  return ok;
}

typedef struct counter_goal {
  const int *counter;
  int target;
} counter_goal;

static int counter_reached(void *arg) {
  counter_goal *g = arg;
  return *g->counter >= g->target;
}

int rtt_run_until(uv_loop_t *loop, const int *counter, int target,
                  int64_t max_ms) {
  counter_goal g = {counter, target};
  return rtt_run_until_fn(loop, counter_reached, &g, max_ms);
}

typedef struct queue_goal {
  redisContext *rc;
  const char *name;
  long long n;
} queue_goal;

static int queue_reached(void *arg) {
  queue_goal *g = arg;
  return rtt_qlen(g->rc, rtt_prefix(), g->name, strlen(g->name)) >= g->n;
}

void rtt_run_until_queued(uv_loop_t *loop, redisContext *rc, const char *name,
                          long long n) {
  queue_goal g = {rc, name, n};
  cr_assert(rtt_run_until_fn(loop, queue_reached, &g, 10000),
            "the queue of %s never reached %lld entries (has %lld)", name, n,
            rtt_qlen(rc, rtt_prefix(), name, strlen(name)));
}

static int never(void *arg) {
  (void)arg;
  return 0;
}

void rtt_run_for(uv_loop_t *loop, int64_t ms) {
  rtt_run_until_fn(loop, never, NULL, ms);
}

static void finish_timeout(uv_timer_t *t) {
  *(int *)t->data = 1;
  uv_stop(t->loop);
}

static void list_handle(uv_handle_t *h, void *arg) {
  if (h != arg)
    cr_log_error("handle still open: %s%s", uv_handle_type_name(h->type),
                 uv_is_active(h) ? " (active)" : "");
}

void rtt_loop_finish(uv_loop_t *loop) { rtt_loop_finish_within(loop, 10000); }

void rtt_loop_finish_within(uv_loop_t *loop, uint64_t ms) {
  int expired = 0;
  uv_timer_t t;
  uv_timer_init(loop, &t);
  t.data = &expired;
  uv_timer_start(&t, finish_timeout, ms, 0);
  uv_unref((uv_handle_t *)&t);
  uv_run(loop, UV_RUN_DEFAULT);
  if (expired)
    uv_walk(loop, list_handle, &t);
  cr_assert_not(expired, "the loop still had work after %llu ms",
                (unsigned long long)ms);
  uv_close((uv_handle_t *)&t, NULL);
  uv_run(loop, UV_RUN_DEFAULT);
  cr_assert_eq(uv_loop_close(loop), 0, "uv_loop_close: handles left open");
}

/* ---- event log ------------------------------------------------------------------ */

void rtt_log_add(rtt_log *log, const char *fmt, ...) {
  size_t n = strlen(log->buf);
  if (n > 0 && n + 1 < sizeof(log->buf))
    log->buf[n++] = ',';
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(log->buf + n, sizeof(log->buf) - n, fmt, ap);
  va_end(ap);
  log->n++;
}

/* ---- recording query answers ---------------------------------------------- */

static void answer_record(rtt_answer *a, int status, int value) {
  a->calls++;
  a->status = status;
  a->value = value;
  a->at_ms = rtt_now_ms();
}

void rtt_owned_cb(rt_lock_t *l, int status, int owned, void *data) {
  (void)l;
  answer_record(data, status, owned);
}

void rtt_locked_cb(rt_client_t *c, int status, int locked, void *data) {
  (void)c;
  answer_record(data, status, locked);
}

void rtt_inspect_cb(rt_client_t *c, int status, const rt_queue_info_t *info,
                    void *data) {
  rtt_snapshot *s = data;
  (void)c;
  s->calls++;
  s->status = status;
  if (status == 0) {
    snprintf(s->holder, sizeof(s->holder), "%s",
             info->holder ? info->holder : "");
    s->queue_len = info->queue_len;
  }
}
