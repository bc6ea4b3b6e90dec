/* Semaphores and read-write locks through the async API (rt_wait_ex,
 * rt_try_lock_ex) against a real server: FIFO with requests of mixed
 * sizes, readers together and writers alone, one kind per resource,
 * crashed holders of each kind, and processes contending, checked with
 * tools/rtcheck's rules. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rt_test.h"
#include "rtcheck.h"

RTT_SUITE_TIMEOUT(pool_api, 60);

static const rt_request_t SHARED = {RT_KIND_SHARED, 0, 0, 0, NULL, 0};
static const rt_request_t EXCLUSIVE = {RT_KIND_EXCLUSIVE, 0, 0, 0, NULL, 0};

static rt_request_t permits(uint32_t k, uint32_t of) {
  rt_request_t r = {RT_KIND_SEMAPHORE, k, of, 0, NULL, 0};
  return r;
}

/* rt_wait_ex on the string name with rtt_lock_cb; returns its code. */
static int wait_ex(rt_client_t *c, const char *name, rt_request_t req,
                   int64_t ttl_ms, rtt_req *out) {
  int err = rt_wait_ex(c, name, strlen(name), &req, ttl_ms, RT_FOREVER,
                       rtt_lock_cb, out, &out->lock);
  if (err == 0)
    snprintf(out->id, sizeof(out->id), "%s", rt_lock_id(out->lock));
  return err;
}

/* Script calls client c sent (the shared server's counts include the
 * calls of tests running beside this one). */
static uint64_t calls_sent(rt_client_t *c) {
  rt_stats_t st;
  rt_client_stats(c, &st);
  return st.fcalls + st.evals + st.module_calls;
}

/* Run until every one of the n requests got its callback. */
static void run_until_answered(rtt_req **reqs, int n) {
  for (int i = 0; i < n; i++)
    cr_assert(rtt_run_until(&loop, &reqs[i]->calls, 1, 5000),
              "request %d got no answer", i);
}

Test(pool_api,
     a_large_request_is_not_overtaken_and_permits_come_back_in_order) {
  rtt_client a, b;
  rtt_req w1 = {0}, w2 = {0}, w3 = {0};
  rtt_open_ready(&a, &loop, NULL);
  rtt_open_ready(&b, &loop, NULL);
  cr_assert_eq(wait_ex(a.c, "sem", permits(2, 4), 10000, &w1), 0);
  run_until_answered((rtt_req *[]){&w1}, 1);
  cr_assert_eq(w1.status, 0);
  cr_assert_eq(wait_ex(b.c, "sem", permits(3, 4), 10000, &w2), 0);
  rtt_run_for(&loop, 100);
  cr_assert_eq(wait_ex(a.c, "sem", permits(1, 4), 10000, &w3), 0);
  rtt_run_for(&loop, 200);
  cr_assert_eq(w2.calls + w3.calls, 0,
               "3 of 4 with 2 taken must wait, and 1 behind it too");
  rtt_release(&loop, &w1, 0);
  run_until_answered((rtt_req *[]){&w2, &w3}, 2);
  cr_assert(w2.status == 0 && w3.status == 0);
  cr_assert_gt(w3.fence, w2.fence, "granted in queue order");
  rtt_release(&loop, &w2, 0);
  rtt_release(&loop, &w3, 0);
  char key[128];
  for (const char *k = "qhmQMD"; *k; k++) {
    size_t kl = rtt_key(key, sizeof(key), rtt_prefix(), "sem", 3, *k);
    cr_assert_eq(rtt_int(rc, "EXISTS %b", key, kl), 0, "%s left behind", key);
  }
  rtt_close(&a);
  rtt_close(&b);
  rtt_loop_finish(&loop);
}

Test(pool_api, readers_hold_together_and_a_writer_holds_alone) {
  rtt_client a, b;
  rtt_req r1 = {0}, r2 = {0}, w = {0}, r3 = {0};
  rtt_open_ready(&a, &loop, NULL);
  rtt_open_ready(&b, &loop, NULL);
  cr_assert_eq(wait_ex(a.c, "rw", SHARED, 10000, &r1), 0);
  cr_assert_eq(wait_ex(b.c, "rw", SHARED, 10000, &r2), 0);
  run_until_answered((rtt_req *[]){&r1, &r2}, 2);
  cr_assert(r1.status == 0 && r2.status == 0, "readers share");
  cr_assert_eq(wait_ex(b.c, "rw", EXCLUSIVE, 10000, &w), 0);
  rtt_run_for(&loop, 100);
  cr_assert_eq(wait_ex(a.c, "rw", SHARED, 10000, &r3), 0);
  rtt_run_for(&loop, 200);
  cr_assert_eq(w.calls, 0, "the writer waits for the readers");
  cr_assert_eq(r3.calls, 0, "a reader behind a writer waits");
  rtt_release(&loop, &r1, 0);
  rtt_run_for(&loop, 100);
  cr_assert_eq(w.calls, 0);
  rtt_release(&loop, &r2, 0);
  run_until_answered((rtt_req *[]){&w}, 1);
  cr_assert_eq(w.status, 0);
  rtt_run_for(&loop, 100);
  cr_assert_eq(r3.calls, 0, "the writer holds alone");
  rtt_release(&loop, &w, 0);
  run_until_answered((rtt_req *[]){&r3}, 1);
  cr_assert_eq(r3.status, 0);
  rtt_release(&loop, &r3, 0);
  rtt_close(&a);
  rtt_close(&b);
  rtt_loop_finish(&loop);
}

Test(pool_api, try_extend_owned_and_cancel_work_on_permits) {
  rtt_client a;
  rtt_req t1 = {0}, t2 = {0}, w = {0};
  rtt_answer own = {0};
  rtt_open_ready(&a, &loop, NULL);
  rt_request_t two = permits(2, 3);
  cr_assert_eq(rt_try_lock_ex(a.c, "t", 1, &two, 10000, rtt_lock_cb, &t1), 0);
  run_until_answered((rtt_req *[]){&t1}, 1);
  cr_assert_eq(t1.status, 0);
  cr_assert_eq(rt_try_lock_ex(a.c, "t", 1, &two, 10000, rtt_lock_cb, &t2), 0);
  run_until_answered((rtt_req *[]){&t2}, 1);
  cr_assert_eq(t2.status, RT_EBUSY, "2 + 2 of 3");
  cr_assert_eq(rtt_extend(&t1, 20000), 0);
  cr_assert(rtt_run_until(&loop, &t1.ext_calls, 1, 5000));
  cr_assert_eq(t1.ext_status, 0);
  cr_assert_eq(t1.ext_lease_ms, 20000);
  cr_assert_eq(rt_owned(t1.lock, rtt_owned_cb, &own), 0);
  cr_assert(rtt_run_until(&loop, &own.calls, 1, 5000));
  cr_assert(own.status == 0 && own.value == 1, "one of the holders");
  cr_assert_eq(wait_ex(a.c, "t", permits(2, 3), 10000, &w), 0);
  rtt_run_for(&loop, 100);
  cr_assert_eq(rt_cancel(w.lock), 0);
  run_until_answered((rtt_req *[]){&w}, 1);
  cr_assert_eq(w.status, RT_ECANCELED);
  rtt_release(&loop, &t1, 0);
  rtt_close(&a);
  rtt_loop_finish(&loop);
}

Test(pool_api, a_resource_is_one_kind_at_a_time) {
  rtt_client a, b;
  rtt_req m = {0}, s = {0}, r = {0};
  rtt_open_ready(&a, &loop, NULL);
  rtt_open_ready(&b, &loop, NULL);
  rtt_acquire(&loop, a.c, "k", 10000, &m);
  /* The same client knows it uses "k" as a mutex. */
  rt_request_t four = permits(1, 4);
  cr_assert_eq(
      rt_wait_ex(a.c, "k", 1, &four, 1000, RT_FOREVER, rtt_lock_cb, &s, NULL),
      RT_EKIND);
  /* Another client learns it from Redis. */
  cr_assert_eq(wait_ex(b.c, "k", four, 1000, &s), 0);
  run_until_answered((rtt_req *[]){&s}, 1);
  cr_assert_eq(s.status, RT_EKIND, "%s", rt_err_name(s.status));
  cr_assert(strstr(rt_client_last_error(b.c), "is a mutex") != NULL, "%s",
            rt_client_last_error(b.c));
  rtt_release(&loop, &m, 0);
  /* Free again: now it is a semaphore, and a reader is refused. */
  rtt_req s2 = {0};
  cr_assert_eq(wait_ex(b.c, "k", four, 10000, &s2), 0);
  run_until_answered((rtt_req *[]){&s2}, 1);
  cr_assert_eq(s2.status, 0);
  cr_assert_eq(wait_ex(a.c, "k", SHARED, 1000, &r), 0);
  run_until_answered((rtt_req *[]){&r}, 1);
  cr_assert_eq(r.status, RT_EKIND);
  rtt_release(&loop, &s2, 0);
  rtt_close(&a);
  rtt_close(&b);
  rtt_loop_finish(&loop);
}

Test(pool_api, requests_out_of_range_are_refused) {
  rtt_client a;
  rtt_req q = {0};
  rtt_open_ready(&a, &loop, NULL);
  rt_request_t bad[] = {{RT_KIND_SEMAPHORE, 5, 4, 0, NULL, 0},
                        {RT_KIND_SEMAPHORE, 1, 0, 0, NULL, 0},
                        {RT_KIND_SEMAPHORE, 1, RT_PERMITS_MAX + 1, 0, NULL, 0},
                        {(rt_kind_t)42, 0, 0, 0, NULL, 0}};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    cr_assert_eq(rt_wait_ex(a.c, "x", 1, &bad[i], 1000, RT_FOREVER, rtt_lock_cb,
                            &q, NULL),
                 RT_EINVAL, "request %zu", i);
    cr_assert_eq(rt_try_lock_ex(a.c, "x", 1, &bad[i], 1000, rtt_lock_cb, &q),
                 RT_EINVAL);
  }
  cr_assert_eq(q.calls, 0);
  rtt_close(&a);
  rtt_loop_finish(&loop);
}

/* ---- crashed holders ----------------------------------------------------------- */

/* A child's grant callback: tells the parent (data: its out fd). */
static void child_granted(rt_lock_t *l, int status, void *data) {
  (void)l;
  char b = status == 0 ? 'g' : 'e';
  rtt_write_all(*(int *)data, &b, 1);
}

typedef struct crash_arg {
  const char *name;
  rt_request_t req;
  int64_t ttl_ms;
} crash_arg;

static int crash_child(int out_fd, int go_fd, void *arg) {
  (void)go_fd;
  crash_arg *c = arg;
  static int fd;
  fd = out_fd;
  return rtt_child_wait_forever_ex(out_fd, c->name, &c->req, c->ttl_ms,
                                   child_granted, &fd);
}

/* A child takes held (lease ttl_ms) and is killed; then we wait for want.
 * Returns how long after the child's grant ours came (ms): from when we
 * read the child's grant, and in *since_fork from before the child was
 * forked (its lease cannot end earlier than ttl_ms after that; we may
 * read its grant late on a loaded machine). */
static int64_t granted_after_crash(crash_arg *held, rt_request_t want,
                                   int64_t *since_fork) {
  rtt_client a;
  rtt_req w = {0};
  rtt_child ch;
  char got[2] = {0};
  rtt_open_ready(&a, &loop, NULL);
  uint64_t forked_at = rtt_now_ms();
  rtt_fork(&ch, crash_child, held);
  cr_assert_eq(rtt_read_records(ch.out_fd, got, 1, 2, 5000), 2);
  cr_assert(got[0] == 'q' && got[1] == 'g', "the child holds: %c%c", got[0],
            got[1]);
  uint64_t held_at = rtt_now_ms();
  kill(ch.pid, SIGKILL);
  cr_assert_eq(rtt_child_wait(&ch, 5000), 128 + SIGKILL);
  cr_assert_eq(wait_ex(a.c, held->name, want, 5000, &w), 0);
  run_until_answered((rtt_req *[]){&w}, 1);
  cr_assert_eq(w.status, 0);
  int64_t after = (int64_t)(w.at_ms - held_at);
  *since_fork = (int64_t)(w.at_ms - forked_at);
  rtt_release(&loop, &w, 0);
  rtt_close(&a);
  rtt_loop_finish(&loop);
  return after;
}

Test(pool_api, a_crashed_writer_is_evicted_after_its_lease) {
  crash_arg held = {"crash-rw", EXCLUSIVE, 500};
  int64_t since_fork;
  int64_t after = granted_after_crash(&held, SHARED, &since_fork);
  cr_assert(since_fork >= 450 && after < 1500,
            "the reader came %lld ms after the grant (%lld ms after the fork)",
            (long long)after, (long long)since_fork);
}

Test(pool_api, a_crashed_reader_is_evicted_after_its_lease) {
  crash_arg held = {"crash-r", SHARED, 500};
  int64_t since_fork;
  int64_t after = granted_after_crash(&held, EXCLUSIVE, &since_fork);
  cr_assert(since_fork >= 450 && after < 1500,
            "the writer came %lld ms after the grant (%lld ms after the fork)",
            (long long)after, (long long)since_fork);
}

Test(pool_api,
     a_crashed_semaphore_holder_gives_its_permits_back_after_its_lease) {
  crash_arg held = {"crash-s", {RT_KIND_SEMAPHORE, 3, 3, 0, NULL, 0}, 500};
  int64_t since_fork;
  int64_t after = granted_after_crash(&held, permits(1, 3), &since_fork);
  cr_assert(since_fork >= 450 && after < 1500,
            "the waiter came %lld ms after the grant (%lld ms after the fork)",
            (long long)after, (long long)since_fork);
}

/* ---- processes contending ---------------------------------------------------- */

/* One hold as a worker saw it: granted no later than start, released no
 * earlier than end (realtime µs), its fence and permits. */
typedef struct hold_rec {
  int64_t asked, start, end;
  uint64_t fence;
  int64_t permits;
} hold_rec;

enum { WORKERS = 4, ROUNDS = 25 };

typedef struct worker {
  uv_loop_t loop;
  uv_timer_t hold;
  rt_client_t *c;
  rt_lock_t *lock;
  int out_fd, left, failed;
  int rw; /* 1: a read-write lock, 90 % shared; 0: a semaphore of 4 */
  unsigned rnd;
  hold_rec cur;
} worker;

static void worker_next(worker *w);

static void worker_closed(rt_client_t *c, void *data) {
  (void)c;
  uv_close((uv_handle_t *)&((worker *)data)->hold, NULL);
}

static void worker_released(rt_lock_t *l, int status, void *data) {
  (void)l;
  worker *w = data;
  w->failed |= status != 0;
  worker_next(w);
}

static void worker_hold_over(uv_timer_t *t) {
  worker *w = t->data;
  w->cur.end = rtt_realtime_us();
  rtt_write_all(w->out_fd, &w->cur, sizeof(w->cur));
  if (rt_signal(w->lock, worker_released, w) != 0) {
    w->failed = 1;
    rt_client_close(w->c, worker_closed, w);
  }
}

static void worker_granted(rt_lock_t *l, int status, void *data) {
  worker *w = data;
  if (status != 0) {
    w->failed = 1;
    rt_client_close(w->c, worker_closed, w);
    return;
  }
  w->lock = l;
  w->cur.start = rtt_realtime_us();
  w->cur.fence = rt_lock_fence(l);
  uv_timer_start(&w->hold, worker_hold_over, 1 + w->rnd % 4, 0);
}

static void worker_next(worker *w) {
  if (w->left-- == 0) {
    rt_client_close(w->c, worker_closed, w);
    return;
  }
  w->rnd = w->rnd * 1103515245u + 12345u;
  unsigned r = (w->rnd >> 8) % 100;
  rt_request_t req =
      w->rw ? (r < 90 ? SHARED : EXCLUSIVE) : permits(1 + r % 3, 4);
  w->cur.permits = w->rw ? (r < 90 ? 1 : RTC_RW_ALL) : 1 + r % 3;
  w->cur.asked = rtt_realtime_us();
  if (rt_wait_ex(w->c, w->rw ? "crowd-rw" : "crowd-s", w->rw ? 8 : 7, &req,
                 5000, 20000, worker_granted, w, NULL) != 0) {
    w->failed = 1;
    rt_client_close(w->c, worker_closed, w);
  }
}

static void worker_connected(rt_client_t *c, int status, void *data) {
  (void)c;
  if (status == 0)
    worker_next(data);
  else
    ((worker *)data)->failed = 1;
}

static int worker_main(int out_fd, int go_fd, void *arg) {
  static worker w;
  rt_options_t o;
  w.out_fd = out_fd;
  w.rw = *(int *)arg;
  w.left = ROUNDS;
  w.rnd = (unsigned)getpid();
  if (uv_loop_init(&w.loop) != 0 || uv_timer_init(&w.loop, &w.hold) != 0)
    return 4;
  w.hold.data = &w;
  rt_options_init(&o);
  o.url = rtt_url();
  o.prefix = rtt_prefix();
  if (rtt_await_go(go_fd) != 0 ||
      rt_client_open(&w.loop, &o, worker_connected, &w, &w.c) != 0)
    return 5;
  uv_run(&w.loop, UV_RUN_DEFAULT);
  return w.failed ? 7 : 0;
}

/* Run the workers on one resource and check the merged history. */
static void contend(int rw) {
  rtt_child ch[WORKERS];
  static hold_rec recs[WORKERS][ROUNDS];
  static rtc_grant g[WORKERS * ROUNDS];
  size_t n = 0;
  rtt_prefix(); /* the children share it */
  for (int i = 0; i < WORKERS; i++)
    rtt_fork(&ch[i], worker_main, &rw);
  for (int i = 0; i < WORKERS; i++)
    rtt_child_go(&ch[i]);
  for (int i = 0; i < WORKERS; i++) {
    size_t got = rtt_read_records(ch[i].out_fd, recs[i], sizeof(hold_rec),
                                  ROUNDS, 40000);
    cr_assert_eq(rtt_child_wait(&ch[i], 10000), 0, "worker %d failed", i);
    cr_assert_eq(got, ROUNDS, "worker %d: %zu holds", i, got);
    for (size_t k = 0; k < got; k++, n++) {
      const hold_rec *h = &recs[i][k];
      g[n] = (rtc_grant){0,        h->fence, h->start,   h->end,
                         h->asked, h->asked, h->permits, rw ? RTC_RW_ALL : 4};
    }
  }
  cr_assert_eq(rtc_permits_exceeded(g, n, 0, NULL, NULL), 0,
               "more permits in use than there are");
  cr_assert_eq(rtc_fence_order(g, n, NULL, NULL), 0, "a fence went back");
  /* The run was a test of sharing: some holds did overlap. */
  for (size_t i = 0; i < n; i++)
    g[i].capacity = g[i].permits = 1;
  cr_assert_gt(rtc_permits_exceeded(g, n, 0, NULL, NULL), 0,
               "no two holds ever overlapped");
}

Test(pool_api, processes_sharing_a_read_write_lock_never_mix_a_writer_in) {
  contend(1);
}

Test(pool_api, processes_sharing_a_semaphore_never_hold_more_than_its_permits) {
  contend(0);
}

/* ---- reentrancy ----------------------------------------------------------------- */

Test(pool_api, a_reentrant_request_is_the_held_lock_again_until_every_release) {
  rtt_client a, b;
  rtt_req outer = {0}, inner = {0}, other = {0}, plain = {0};
  rtt_open_ready(&a, &loop, NULL);
  rtt_open_ready(&b, &loop, NULL);
  const rt_request_t re = {RT_KIND_MUTEX, 0, 0, 1, NULL, 0};
  cr_assert_eq(rt_wait_ex(a.c, "re", 2, &re, 10000, RT_FOREVER, rtt_lock_cb,
                          &outer, &outer.lock),
               0);
  run_until_answered((rtt_req *[]){&outer}, 1);
  cr_assert_eq(outer.status, 0);
  uint64_t before = calls_sent(a.c);
  cr_assert_eq(rt_wait_ex(a.c, "re", 2, &re, 10000, RT_FOREVER, rtt_lock_cb,
                          &inner, &inner.lock),
               0);
  cr_assert_eq(inner.calls, 0, "never from inside the call");
  run_until_answered((rtt_req *[]){&inner}, 1);
  cr_assert_eq(inner.status, 0);
  cr_assert_eq(inner.lock, outer.lock, "the same lock");
  cr_assert_eq(inner.fence, outer.fence, "one fence");
  cr_assert_eq(calls_sent(a.c), before, "no Redis call");
  /* Another client waits; the inner release does not let it in. */
  cr_assert_eq(rtt_wait(b.c, "re", 10000, RT_FOREVER, &other), 0);
  rtt_release(&loop, &inner, 0);
  rtt_run_for(&loop, 100);
  cr_assert_eq(other.calls, 0, "still held after the inner release");
  cr_assert_eq(rt_lock_state(outer.lock), RT_LOCK_HELD);
  rtt_release(&loop, &outer, 0);
  run_until_answered((rtt_req *[]){&other}, 1);
  cr_assert_eq(other.status, 0);
  rtt_release(&loop, &other, 0);
  /* Without the flag a second wait of the same client queues behind. */
  rtt_req first = {0};
  rtt_acquire(&loop, a.c, "re", 10000, &first);
  cr_assert_eq(rtt_wait(a.c, "re", 10000, 200, &plain), 0);
  run_until_answered((rtt_req *[]){&plain}, 1);
  cr_assert_eq(plain.status, RT_EWAITTIMEOUT, "not reentrant by default");
  rtt_release(&loop, &first, 0);
  rtt_close(&a);
  rtt_close(&b);
  rtt_loop_finish(&loop);
}

/* ---- inspect ------------------------------------------------------------------- */

static rt_queue_info_t seen;
static int seen_calls, seen_status;
static char seen_kind[16], seen_holders[4][RTT_ID_MAX];
static uint64_t seen_permits[4], seen_wpermits[4];

static void on_info(rt_client_t *c, int status, const rt_queue_info_t *info,
                    void *data) {
  (void)c;
  (void)data;
  seen_calls++;
  seen_status = status;
  if (status != 0)
    return;
  seen = *info;
  snprintf(seen_kind, sizeof(seen_kind), "%s", info->kind ? info->kind : "");
  for (size_t i = 0; i < info->nholders && i < 4; i++) {
    snprintf(seen_holders[i], RTT_ID_MAX, "%s", info->holders[i]);
    seen_permits[i] = info->holder_permits[i];
  }
  for (size_t i = 0; i < info->nwaiters && i < 4; i++)
    seen_wpermits[i] = info->waiter_permits[i];
}

Test(pool_api, inspect_shows_every_holder_with_its_permits) {
  rtt_client a, b;
  rtt_req h1 = {0}, h2 = {0}, w = {0};
  rtt_open_ready(&a, &loop, NULL);
  rtt_open_ready(&b, &loop, NULL);
  cr_assert_eq(wait_ex(a.c, "ins", permits(1, 4), 10000, &h1), 0);
  cr_assert_eq(wait_ex(a.c, "ins", permits(2, 4), 20000, &h2), 0);
  run_until_answered((rtt_req *[]){&h1, &h2}, 2);
  cr_assert_eq(wait_ex(a.c, "ins", permits(3, 4), 10000, &w), 0);
  rtt_run_for(&loop, 100);
  /* b never used "ins": it learns the kind from Redis. */
  cr_assert_eq(rt_inspect(b.c, "ins", 3, 10, on_info, NULL), 0);
  cr_assert(rtt_run_until(&loop, &seen_calls, 1, 5000));
  cr_assert_eq(seen_status, 0, "%s", rt_err_name(seen_status));
  cr_assert_str_eq(seen_kind, "semaphore");
  cr_assert_eq(seen.permits, 4);
  cr_assert_eq(seen.permits_used, 3);
  cr_assert_eq(seen.nholders, 2);
  cr_assert_str_eq(seen_holders[0], h1.id, "by lease end");
  cr_assert_eq(seen_permits[0], 1);
  cr_assert_str_eq(seen_holders[1], h2.id);
  cr_assert_eq(seen_permits[1], 2);
  cr_assert_eq(seen.nwaiters, 1);
  cr_assert_eq(seen_wpermits[0], 3);
  cr_assert_eq(seen.queue_len, 3);
  cr_assert(seen.locked && seen.fence == h1.fence && seen.lease_left_ms > 0);
  rtt_release(&loop, &h1, 0);
  rtt_release(&loop, &h2, 0);
  run_until_answered((rtt_req *[]){&w}, 1);
  rtt_release(&loop, &w, 0);
  rtt_close(&a);
  rtt_close(&b);
  rtt_loop_finish(&loop);
}

/* ---- elections ------------------------------------------------------------------- */

Test(pool_api, campaign_proclaim_and_resign_tell_the_observers_in_order) {
  rtt_client a, b;
  rtt_req la = {0}, lb = {0};
  rtt_open_ready(&a, &loop, NULL);
  rtt_open_ready(&b, &loop, NULL);
  char chan[128], msg[256];
  snprintf(chan, sizeof(chan), "%s:{ele}:o", rtt_prefix());
  redisContext *obs = rtt_redis();
  freeReplyObject(rtt_cmd(obs, "SSUBSCRIBE %s", chan));

  rt_request_t ca = {RT_KIND_ELECTION, 0, 0, 0, "host-a:80", 9};
  rt_request_t cb = {RT_KIND_ELECTION, 0, 0, 0, "host-b:80", 9};
  cr_assert_eq(rt_wait_ex(a.c, "ele", 3, &ca, 10000, RT_FOREVER, rtt_lock_cb,
                          &la, &la.lock),
               0);
  run_until_answered((rtt_req *[]){&la}, 1);
  cr_assert_eq(la.status, 0);
  rtt_next_message(obs, msg, sizeof(msg));
  cr_assert(strstr(msg, ":host-a:80") != NULL && strncmp(msg, "o:", 2) == 0,
            "%s", msg);
  cr_assert_eq(rt_wait_ex(b.c, "ele", 3, &cb, 10000, RT_FOREVER, rtt_lock_cb,
                          &lb, &lb.lock),
               0);
  rtt_run_for(&loop, 100);
  cr_assert_eq(lb.calls, 0, "one leader at a time");
  cr_assert_eq(rt_proclaim(lb.lock, "x", 1, NULL, NULL), RT_ENOTHELD);
  cr_assert_eq(rt_proclaim(la.lock, "bad\n", 4, NULL, NULL), RT_EINVAL);
  cr_assert_eq(rt_proclaim(la.lock, "host-a:81", 9, rtt_extend_cb, &la), 0);
  cr_assert(rtt_run_until(&loop, &la.ext_calls, 1, 5000));
  cr_assert_eq(la.ext_status, 0);
  rtt_next_message(obs, msg, sizeof(msg));
  cr_assert(strstr(msg, ":host-a:81") != NULL, "%s", msg);
  /* The value is what inspect shows as the leader's label. */
  cr_assert_eq(rt_inspect(b.c, "ele", 3, 10, on_info, NULL), 0);
  int calls = seen_calls;
  cr_assert(rtt_run_until(&loop, &seen_calls, calls + 1, 5000));
  cr_assert_str_eq(seen_kind, "election");
  cr_assert_str_eq(seen_holders[0], la.id);
  /* Resign: the next candidate leads, in the same call. */
  rtt_release(&loop, &la, 0);
  run_until_answered((rtt_req *[]){&lb}, 1);
  cr_assert_eq(lb.status, 0);
  cr_assert_gt(lb.fence, la.fence);
  rtt_next_message(obs, msg, sizeof(msg));
  cr_assert(strstr(msg, ":host-b:80") != NULL, "%s", msg);
  rtt_release(&loop, &lb, 0);
  rtt_next_message(obs, msg, sizeof(msg));
  cr_assert(strstr(msg, ":0::") != NULL, "nobody leads: %s", msg);
  rtt_redis_close(obs);
  rtt_close(&a);
  rtt_close(&b);
  rtt_loop_finish(&loop);
}
