/* Faults, each on a private redis-server this file starts itself:
 *
 *  - reconnect after CLIENT KILL of the command and of the subscriber
 *    connection; a grant published while the subscriber was away is not
 *    lost (the waiter is re-queued at the tail and granted later);
 *  - a lost enqueue reply is retried without a second queue entry, a lost
 *    release reply is retried without a second grant;
 *  - Redis restarted with and without AOF while waits are pending: waits
 *    survive (with AOF the queue is kept; without, they are queued again);
 *    a restart whose AOF takes a while to load;
 *  - CLIENT PAUSE and DEBUG SLEEP with command timeouts shorter and longer
 *    than the stall;
 *  - the pub/sub output buffer limit disconnecting the subscriber;
 *  - SCRIPT FLUSH with waits pending;
 *  - a SIGKILLed waiter is skipped at once when its turn comes;
 *  - self-cleaning: no key stays once every client closed; what killed
 *    clients abandon expires by itself;
 *  - security: password in the URL, a least-privilege ACL rule (and that
 *    every permission in it is needed), crafted resource names.
 *
 * The servers and the synchronous Redis helpers come from tests/support
 * (rtt_server_*, rtt_redis_at, rtt_cmd, ...); the loop and clients are this
 * file's own. */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <hiredis/hiredis.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <uv.h>

#include "redturn.h"
#include "rt_test.h"

#define PREFIX "ft"

static uv_loop_t loop;
static uv_timer_t ticker;
static int loop_open;

TestSuite(faults, .fini = rtt_cleanup, .timeout = 60);

/* ---- synchronous Redis --------------------------------------------------------- */

/* The error text of a command that must fail. */
static void ft_err(redisContext *rc, char *buf, size_t cap, const char *fmt,
                 ...) {
  va_list ap;
  va_start(ap, fmt);
  redisReply *r = redisvCommand(rc, fmt, ap);
  va_end(ap);
  cr_assert_not_null(r, "no reply to %s", fmt);
  cr_assert_eq(r->type, REDIS_REPLY_ERROR, "%s did not fail", fmt);
  snprintf(buf, cap, "%s", r->str);
  freeReplyObject(r);
}

/* The queue of a plain resource name as the library sees it: the holder
 * first (if any), then the live waiters in order (tests/support). */
static size_t queue_of(redisContext *rc, const char *name,
                       char (*ids)[RTT_ID_MAX], size_t max) {
  return rtt_queue(rc, PREFIX, name, strlen(name), ids, max);
}

/* How many entries queue_of() would list. */
static long long qlen_of(redisContext *rc, const char *name) {
  return rtt_qlen(rc, PREFIX, name, strlen(name));
}

/* A field of the holder record ("f" fence, "d" deadline, "g" grant time),
 * -1 without a holder. */
static long long holder_field(redisContext *rc, const char *name,
                              const char *field) {
  return rtt_hfield(rc, PREFIX, name, strlen(name), field);
}

/* How many of the resource's keys (q, h, m) exist: an idle resource
 * leaves none. */
static long long keys_of(redisContext *rc, const char *name) {
  return rtt_int(rc, "EXISTS " PREFIX ":{%s}:q " PREFIX ":{%s}:h " PREFIX
                   ":{%s}:m",
               name, name, name);
}

static int count_in_queue(redisContext *rc, const char *name, const char *id) {
  char ids[64][RTT_ID_MAX];
  size_t n = queue_of(rc, name, ids, 64);
  int k = 0;
  for (size_t i = 0; i < n && i < 64; i++)
    k += strcmp(ids[i], id) == 0;
  return k;
}

/* ---- the loop ------------------------------------------------------------------- */

static void tick_cb(uv_timer_t *t) { (void)t; }

static void begin(void) {
  cr_assert_eq(uv_loop_init(&loop), 0);
  uv_timer_init(&loop, &ticker);
  uv_unref((uv_handle_t *)&ticker);
  loop_open = 1;
}

/* Run the loop until cond holds or max_ms passed (cond is checked at least
 * every 5 ms). */
#define RUN_UNTIL(cond, max_ms)                                   \
  do {                                                            \
    uint64_t end_ = rtt_now_ms() + (uint64_t)(max_ms);            \
    uv_timer_start(&ticker, tick_cb, 5, 5);                       \
    while (!(cond) && rtt_now_ms() < end_)                        \
      if (uv_run(&loop, UV_RUN_ONCE) == 0)                        \
        rtt_sleep_ms(1);                                          \
    uv_timer_stop(&ticker);                                       \
  } while (0)

#define RUN_FOR(ms) RUN_UNTIL(0, ms)

/* Everything closed: the loop must have nothing left. */
static void finish(void) {
  uv_close((uv_handle_t *)&ticker, NULL);
  uint64_t end = rtt_now_ms() + 10000;
  while (uv_run(&loop, UV_RUN_NOWAIT) != 0 && rtt_now_ms() < end)
    rtt_sleep_ms(1);
  cr_assert_eq(uv_loop_close(&loop), 0, "handles left open on the loop");
  loop_open = 0;
}

/* ---- clients and requests ---------------------------------------------------------- */

typedef struct fcl {
  rt_client_t *c;
  int connects, status, closed;
} fcl;

static void fcl_connect_cb(rt_client_t *c, int status, void *data) {
  fcl *f = data;
  (void)c;
  f->connects++;
  f->status = status;
}

static void fcl_close_cb(rt_client_t *c, void *data) {
  fcl *f = data;
  (void)c;
  f->closed++;
}

static void opts(rt_options_t *o, const rtt_server *s) {
  rt_options_init(o);
  o->host = "127.0.0.1";
  o->port = s->port;
  o->prefix = PREFIX;
  o->connect_timeout_ms = 3000;
  o->command_timeout_ms = 3000;
}

static void open_only(fcl *f, const rt_options_t *o) {
  memset(f, 0, sizeof(*f));
  cr_assert_eq(rt_client_open(&loop, o, fcl_connect_cb, f, &f->c), 0);
  RUN_UNTIL(f->connects > 0, 8000);
  cr_assert_eq(f->connects, 1, "no connect result");
}

static void open_ready(fcl *f, const rt_options_t *o) {
  open_only(f, o);
  cr_assert_eq(f->status, 0, "connect: %s", rt_err_name(f->status));
}

static void close_wait(fcl *f) {
  cr_assert_eq(rt_client_close(f->c, fcl_close_cb, f), 0);
  RUN_UNTIL(f->closed > 0, 10000);
  cr_assert_eq(f->closed, 1, "close callback did not run");
}

static uint64_t reconnects(const fcl *f) {
  rt_stats_t st;
  rt_client_stats(f->c, &st);
  return st.reconnects;
}

typedef struct freq {
  rt_lock_t *lock;
  int calls, status;
  uint64_t fence;
  int64_t deadline;
  uint64_t at_ms;
  int sig_calls, sig_status;
  char id[96];
} freq;

static void freq_cb(rt_lock_t *l, int status, void *data) {
  freq *r = data;
  r->calls++;
  r->status = status;
  r->at_ms = rtt_now_ms();
  if (status == 0) {
    r->lock = l;
    r->fence = rt_lock_fence(l);
    r->deadline = rt_lock_deadline_ms(l);
  } else {
    r->lock = NULL;
  }
}

static void freq_sig_cb(rt_lock_t *l, int status, void *data) {
  freq *r = data;
  (void)l;
  r->sig_calls++;
  r->sig_status = status;
  r->lock = NULL;
}

static void wait_on(fcl *f, const char *name, int64_t ttl, int64_t timeout,
                    freq *r) {
  rt_lock_t *l = NULL;
  memset(r, 0, sizeof(*r));
  cr_assert_eq(rt_wait(f->c, name, strlen(name), ttl, timeout, freq_cb, r, &l),
               0);
  r->lock = l;
  snprintf(r->id, sizeof(r->id), "%s", rt_lock_id(l));
}

/* Wait and run until queued behind someone (the enqueue reply came). */
static void queue_on(fcl *f, const char *name, int64_t ttl, freq *r) {
  wait_on(f, name, ttl, RT_FOREVER, r);
  RUN_UNTIL(r->calls > 0 || rt_lock_position(r->lock) > 0, 5000);
  cr_assert_eq(r->calls, 0, "%s was not queued: %s", name,
               rt_err_name(r->status));
  cr_assert_gt(rt_lock_position(r->lock), 0);
}

static void acquire(fcl *f, const char *name, int64_t ttl, freq *r) {
  wait_on(f, name, ttl, 5000, r);
  RUN_UNTIL(r->calls > 0, 6000);
  cr_assert_eq(r->calls, 1, "%s: no grant", name);
  cr_assert_eq(r->status, 0, "%s: %s", name, rt_err_name(r->status));
}

static void signal_start(freq *r) {
  cr_assert_not_null(r->lock);
  cr_assert_eq(rt_signal(r->lock, freq_sig_cb, r), 0);
}

static void release(freq *r, int want) {
  signal_start(r);
  RUN_UNTIL(r->sig_calls > 0, 10000);
  cr_assert_eq(r->sig_calls, 1, "no release callback");
  cr_assert_eq(r->sig_status, want, "release: %s, want %s",
               rt_err_name(r->sig_status), rt_err_name(want));
}

/* Run until r got its callback; assert a grant. */
static void expect_grant(freq *r, int64_t max_ms, const char *what) {
  RUN_UNTIL(r->calls > 0, max_ms);
  cr_assert_eq(r->calls, 1, "%s: the waiter hangs (no callback in %lld ms)",
               what, (long long)max_ms);
  cr_assert_eq(r->status, 0, "%s: the wait failed with %s (%s)", what,
               rt_err_name(r->status), rt_strerror(r->status));
}

typedef struct answer {
  int calls, status, value;
  uint64_t at_ms;
} answer;

static void locked_cb(rt_client_t *c, int status, int locked, void *data) {
  answer *a = data;
  (void)c;
  a->calls++;
  a->status = status;
  a->value = locked;
  a->at_ms = rtt_now_ms();
}

/* ======================================================================= */
/* Item 2 and 3: connections killed                                          */
/* ======================================================================= */

Test(faults, killing_the_command_connection_reconnects_and_keeps_waits) {
  rtt_server s;
  fcl a, w;
  freq ra, rw, ry;
  rt_options_t o;
  rtt_server_start(&s, NULL);
  begin();
  opts(&o, &s);
  open_ready(&a, &o);
  open_ready(&w, &o);
  redisContext *adm = rtt_redis_at(s.port);

  acquire(&a, "x", 20000, &ra);
  queue_on(&w, "x", 20000, &rw);
  cr_assert(rtt_kill_conn(adm, "cmd", rt_client_id(w.c)),
            "no cmd connection of client w to kill");
  RUN_UNTIL(reconnects(&w) >= 1, 5000);
  cr_assert_geq(reconnects(&w), 1, "the client did not reconnect");
  cr_assert_gt(rtt_conn_id(adm, "cmd", rt_client_id(w.c)), 0,
               "no new command connection");
  /* Reconciled: still queued, once. */
  RUN_FOR(100);
  cr_assert_eq(count_in_queue(adm, "x", rw.id), 1);
  cr_assert_eq(rw.calls, 0);

  release(&ra, 0);
  expect_grant(&rw, 5000, "waiter after its command connection was killed");
  cr_assert_gt(rw.fence, ra.fence);

  /* A holder whose command connection is killed still releases: the
   * resource is idle again, so none of its keys is left. */
  acquire(&a, "y", 20000, &ry);
  cr_assert(rtt_kill_conn(adm, "cmd", rt_client_id(a.c)),
            "no cmd connection of client a to kill");
  release(&ry, 0);
  cr_assert_eq(qlen_of(adm, "y"), 0);
  cr_assert_eq(keys_of(adm, "y"), 0, "the released resource left keys");
  release(&rw, 0);

  close_wait(&a);
  close_wait(&w);
  finish();
  rtt_redis_close(adm);
  rtt_server_stop(&s);
}

Test(faults, a_grant_sent_while_the_subscriber_was_away_requeues_the_waiter) {
  rtt_server s;
  fcl a, w;
  freq ra, rw;
  rt_options_t o;
  rtt_server_start(&s, NULL);
  begin();
  opts(&o, &s);
  open_ready(&a, &o);
  open_ready(&w, &o);
  redisContext *adm = rtt_redis_at(s.port);

  acquire(&a, "x", 20000, &ra);
  queue_on(&w, "x", 20000, &rw);
  cr_assert(rtt_kill_conn(adm, "sub", rt_client_id(w.c)),
            "no sub connection of client w to kill");
  /* Released in the gap: the grant goes to nobody (SPUBLISH reaches no
   * subscriber), the script drops the entry; the waiter must be queued
   * again when it is back, and granted (the queue is empty). */
  release(&ra, 0);
  expect_grant(&rw, 5000, "waiter whose grant was published in the gap");
  cr_assert_gt(rw.fence, ra.fence);
  cr_assert_geq(reconnects(&w), 1);
  release(&rw, 0);

  close_wait(&a);
  close_wait(&w);
  finish();
  rtt_redis_close(adm);
  rtt_server_stop(&s);
}

Test(faults, a_waiter_dropped_in_the_gap_is_requeued_behind_the_others) {
  rtt_server s;
  fcl a, w, c;
  freq ra, rw, rc;
  rt_options_t o;
  rtt_server_start(&s, NULL);
  begin();
  opts(&o, &s);
  open_ready(&a, &o);
  open_ready(&w, &o);
  open_ready(&c, &o);
  redisContext *adm = rtt_redis_at(s.port);

  acquire(&a, "x", 20000, &ra);
  queue_on(&w, "x", 20000, &rw);
  queue_on(&c, "x", 20000, &rc);
  cr_assert(rtt_kill_conn(adm, "sub", rt_client_id(w.c)),
            "no sub connection of client w to kill");
  release(&ra, 0);
  /* w was skipped (not subscribed at its turn): c holds, w comes back
   * behind it. */
  expect_grant(&rc, 5000, "the waiter behind the absent one");
  RUN_UNTIL(reconnects(&w) >= 1 && count_in_queue(adm, "x", rw.id) == 1, 5000);
  char ids[8][RTT_ID_MAX];
  size_t n = queue_of(adm, "x", ids, 8);
  cr_assert_eq(n, 2, "queue has %zu entries", n);
  cr_assert_str_eq(ids[0], rc.id);
  cr_assert_str_eq(ids[1], rw.id, "the absent waiter was not re-queued");
  cr_assert_eq(rw.calls, 0);
  release(&rc, 0);
  expect_grant(&rw, 5000, "the re-queued waiter");
  cr_assert_gt(rw.fence, rc.fence);
  release(&rw, 0);

  close_wait(&a);
  close_wait(&w);
  close_wait(&c);
  finish();
  rtt_redis_close(adm);
  rtt_server_stop(&s);
}

/* ---- lost replies -------------------------------------------------------------- */

/* Run one loop iteration without blocking: queued commands get written
 * but their replies are not read yet. */
/* Send what the client queued without reading the answer: Redis is kept
 * busy for 50 ms (DEBUG SLEEP from adm) while one loop pass writes, so the
 * reply cannot be back before that pass polls. The command runs after. */
static void write_only(redisContext *adm) {
  int done = 0;
  redisReply *r = NULL;
  cr_assert_eq(redisAppendCommand(adm, "DEBUG SLEEP 0.05"), REDIS_OK);
  while (!done)
    cr_assert_eq(redisBufferWrite(adm, &done), REDIS_OK);
  rtt_sleep_ms(5); /* the server is asleep now */
  uv_run(&loop, UV_RUN_NOWAIT);
  cr_assert_eq(redisGetReply(adm, (void **)&r), REDIS_OK);
  freeReplyObject(r);
}

Test(faults, a_lost_enqueue_reply_is_retried_without_a_second_entry) {
  rtt_server s;
  fcl a, w;
  freq ra, rw;
  rt_options_t o;
  rtt_server_start(&s, NULL);
  begin();
  opts(&o, &s);
  open_ready(&a, &o);
  o.command_timeout_ms = 100;
  open_ready(&w, &o);
  redisContext *adm = rtt_redis_at(s.port);

  acquire(&a, "x", 20000, &ra); /* also puts the script in the cache */
  wait_on(&w, "x", 20000, RT_FOREVER, &rw);
  write_only(adm);
  /* Redis ran the enqueue... */
  uint64_t end = rtt_now_ms() + 2000;
  while (count_in_queue(adm, "x", rw.id) == 0 && rtt_now_ms() < end)
    rtt_sleep_ms(2);
  cr_assert_eq(count_in_queue(adm, "x", rw.id), 1, "the enqueue never ran");
  /* ...but its reply is never read: the command deadline passes first
   * (timers run before I/O in a loop iteration). */
  rtt_sleep_ms(200);
  RUN_UNTIL(reconnects(&w) >= 1, 5000);
  cr_assert_geq(reconnects(&w), 1, "the command did not time out");
  RUN_FOR(200);
  cr_assert_eq(rw.calls, 0, "the wait ended: %s", rt_err_name(rw.status));
  cr_assert_eq(count_in_queue(adm, "x", rw.id), 1,
               "the retried enqueue queued a second entry");
  cr_assert_eq(qlen_of(adm, "x"), 2); /* the holder and one waiter */

  release(&ra, 0);
  expect_grant(&rw, 5000, "waiter whose enqueue reply was lost");
  cr_assert_gt(rw.fence, ra.fence);
  release(&rw, 0);
  close_wait(&a);
  close_wait(&w);
  finish();
  rtt_redis_close(adm);
  rtt_server_stop(&s);
}

Test(faults, a_lost_release_reply_is_retried_without_a_second_grant) {
  rtt_server s;
  fcl a, w;
  freq ra, rw;
  rt_options_t o;
  rtt_server_start(&s, NULL);
  begin();
  opts(&o, &s);
  open_ready(&w, &o);
  o.command_timeout_ms = 100;
  open_ready(&a, &o);
  redisContext *adm = rtt_redis_at(s.port);

  /* Make sure the release script is in the server's cache: a NOSCRIPT
   * round trip would need the reply we are about to lose. */
  acquire(&a, "warm", 20000, &ra);
  release(&ra, 0);
  acquire(&a, "x", 20000, &ra);
  queue_on(&w, "x", 20000, &rw);
  signal_start(&ra);
  write_only(adm);
  uint64_t end = rtt_now_ms() + 2000;
  while (count_in_queue(adm, "x", ra.id) == 1 && rtt_now_ms() < end)
    rtt_sleep_ms(2);
  cr_assert_eq(count_in_queue(adm, "x", ra.id), 0, "the release never ran");
  rtt_sleep_ms(200); /* its reply is lost to the command deadline */
  RUN_UNTIL(ra.sig_calls > 0 && rw.calls > 0, 5000);
  cr_assert_geq(reconnects(&a), 1, "the release did not time out");
  cr_assert_eq(ra.sig_calls, 1);
  cr_assert_eq(ra.sig_status, 0, "retried release: %s",
               rt_err_name(ra.sig_status));
  expect_grant(&rw, 1000, "the next waiter");
  cr_assert_gt(rw.fence, ra.fence);
  RUN_FOR(200);
  /* Still rw's grant: a second grant would have issued a new fence (or
   * taken the lock from rw). */
  char ids[8][RTT_ID_MAX];
  cr_assert_eq(queue_of(adm, "x", ids, 8), 1);
  cr_assert_str_eq(ids[0], rw.id);
  long long f = holder_field(adm, "x", "f");
  cr_assert_eq(f, (long long)rw.fence,
               "the retried release granted again (fence %lld)", f);
  release(&rw, 0);
  close_wait(&a);
  close_wait(&w);
  finish();
  rtt_redis_close(adm);
  rtt_server_stop(&s);
}

/* ======================================================================= */
/* Item 3: restarts                                                          */
/* ======================================================================= */

static const char *const aof_args[] = {"--appendonly", "yes", "--appendfsync",
                                       "always", NULL};

Test(faults, restart_with_aof_keeps_the_queue_and_waits_survive) {
  rtt_server s;
  fcl a, w;
  freq ra, rw;
  rt_options_t o;
  rtt_server_start(&s, aof_args);
  begin();
  opts(&o, &s);
  open_ready(&a, &o);
  open_ready(&w, &o);

  acquire(&a, "x", 30000, &ra);
  queue_on(&w, "x", 30000, &rw);
  rtt_server_restart(&s);
  RUN_UNTIL(reconnects(&a) >= 1 && reconnects(&w) >= 1, 10000);
  cr_assert_geq(reconnects(&w), 1);
  RUN_FOR(200);
  cr_assert_eq(rw.calls, 0, "the wait ended: %s", rt_err_name(rw.status));
  redisContext *adm = rtt_redis_at(s.port);
  char ids[8][RTT_ID_MAX];
  cr_assert_eq(queue_of(adm, "x", ids, 8), 2, "the queue was not kept");
  cr_assert_str_eq(ids[0], ra.id);
  cr_assert_str_eq(ids[1], rw.id);
  cr_assert_eq(holder_field(adm, "x", "f"), (long long)ra.fence,
               "the holder record was not kept");
  release(&ra, 0);
  expect_grant(&rw, 5000, "waiter across a restart with AOF");
  cr_assert_gt(rw.fence, ra.fence, "fences went back across the restart");
  release(&rw, 0);
  close_wait(&a);
  close_wait(&w);
  finish();
  rtt_redis_close(adm);
  rtt_server_stop(&s);
}

Test(faults, restart_without_persistence_requeues_the_waits) {
  rtt_server s;
  fcl a, w;
  freq ra, rw;
  rt_options_t o;
  rtt_server_start(&s, NULL);
  begin();
  opts(&o, &s);
  open_ready(&a, &o);
  open_ready(&w, &o);

  acquire(&a, "x", 30000, &ra);
  queue_on(&w, "x", 30000, &rw);
  rtt_server_restart(&s);
  /* The server forgot the queue: the waiter is queued again and, the
   * queue being empty, granted, while a still thinks it holds (no Redis
   * lock survives a server that lost its data). The fences do not start
   * over: they come from the server clock, so the new one is larger than
   * every fence issued before the data loss. */
  expect_grant(&rw, 10000, "waiter across a restart without persistence");
  cr_assert_gt(rw.fence, ra.fence, "fence %llu after %llu: it went back",
               (unsigned long long)rw.fence, (unsigned long long)ra.fence);
  release(&ra, RT_ELOST);
  release(&rw, 0);
  close_wait(&a);
  close_wait(&w);
  finish();
  rtt_server_stop(&s);
}

/* While the restarted server loads its AOF it accepts connections, answers
 * CLIENT SETNAME and SUBSCRIBE, but replies -LOADING to scripts: the
 * reconciliation must not turn that into a failed wait. */
Test(faults, restart_with_a_slow_aof_load_keeps_waits, .timeout = 120) {
  rtt_server s;
  fcl a, w;
  freq ra, rw;
  rt_options_t o;
  const char *const args[] = {"--appendonly", "yes", NULL};
  rtt_server_start(&s, args);
  redisContext *adm = rtt_redis_at(s.port);
  rtt_ok(adm, "DEBUG POPULATE 1500000 " PREFIX "-filler 16");
  rtt_ok(adm, "BGREWRITEAOF");
  uint64_t end = rtt_now_ms() + 60000;
  for (;;) {
    redisReply *r = rtt_cmd(adm, "INFO persistence");
    int busy = strstr(r->str, "aof_rewrite_in_progress:1") != NULL ||
               strstr(r->str, "aof_rewrite_scheduled:1") != NULL;
    freeReplyObject(r);
    if (!busy || rtt_now_ms() > end)
      break;
    rtt_sleep_ms(50);
  }
  rtt_redis_close(adm);
  begin();
  opts(&o, &s);
  open_ready(&a, &o);
  open_ready(&w, &o);
  acquire(&a, "x", 60000, &ra);
  queue_on(&w, "x", 60000, &rw);
  uint64_t t0 = rtt_now_ms();
  rtt_server_restart_nowait(&s);
  /* Run the clients while the server loads. */
  RUN_UNTIL(rtt_server_ready(&s), 30000);
  cr_log_info("the restarted server loaded its AOF in %llu ms",
              (unsigned long long)(rtt_now_ms() - t0));
  RUN_UNTIL(reconnects(&w) >= 1, 10000);
  RUN_FOR(300);
  cr_assert_eq(rw.calls, 0,
               "the wait failed during the AOF load with %s (%s): the "
               "-LOADING reply to the re-enqueue ended it",
               rt_err_name(rw.status), rt_strerror(rw.status));
  release(&ra, 0);
  expect_grant(&rw, 5000, "waiter across a slow AOF load");
  release(&rw, 0);
  close_wait(&a);
  close_wait(&w);
  finish();
  rtt_server_stop(&s);
}

/* ======================================================================= */
/* Item 3: stalls                                                            */
/* ======================================================================= */

/* Send a command on a synchronous connection without waiting for the
 * reply (for commands that stall the server). */
static void send_only(redisContext *rc, const char *cmd) {
  int done = 0;
  cr_assert_eq(redisAppendCommand(rc, cmd), REDIS_OK);
  while (!done)
    cr_assert_eq(redisBufferWrite(rc, &done), REDIS_OK);
}

static void read_reply(redisContext *rc) {
  void *r = NULL;
  cr_assert_eq(redisGetReply(rc, &r), REDIS_OK);
  freeReplyObject(r);
}

/* Client s has a command timeout shorter than the stall, client l a longer
 * one. The stall is a CLIENT PAUSE of 500 ms or a DEBUG SLEEP of 1 s. A
 * query on s fails with RT_ETIMEDOUT, the same query on l waits it out;
 * waits and releases survive on both. holder_short says which client holds
 * the lock (and releases during the stall) and which waits. */
static void stall_test(const char *stall, int64_t stall_ms, int holder_short) {
  rtt_server s;
  fcl cs, cl;
  freq rh, rw;
  answer qs = {0}, ql = {0};
  rt_options_t o;
  rtt_server_start(&s, NULL);
  begin();
  opts(&o, &s);
  o.command_timeout_ms = 200;
  open_ready(&cs, &o);
  o.command_timeout_ms = 3000;
  open_ready(&cl, &o);
  fcl *holder = holder_short ? &cs : &cl;
  fcl *waiter = holder_short ? &cl : &cs;
  redisContext *adm = rtt_redis_at(s.port);

  acquire(holder, "x", 30000, &rh);
  queue_on(waiter, "x", 30000, &rw);
  uint64_t t0 = rtt_now_ms();
  send_only(adm, stall);
  rtt_sleep_ms(20); /* the stall has begun */
  cr_assert_eq(rt_locked(cs.c, "x", 1, locked_cb, &qs), 0);
  cr_assert_eq(rt_locked(cl.c, "x", 1, locked_cb, &ql), 0);
  signal_start(&rh);
  RUN_UNTIL(qs.calls && ql.calls && rh.sig_calls && rw.calls, 15000);
  read_reply(adm);

  cr_assert_eq(qs.calls, 1, "the short-timeout query never returned");
  cr_assert_eq(qs.status, RT_ETIMEDOUT, "short-timeout query: %s",
               rt_err_name(qs.status));
  cr_assert_lt(qs.at_ms - t0, (uint64_t)stall_ms,
               "the timeout came after the stall");
  cr_assert_eq(ql.calls, 1, "the long-timeout query never returned");
  cr_assert_eq(ql.status, 0, "long-timeout query: %s", rt_err_name(ql.status));
  cr_assert_eq(ql.value, 1);
  cr_assert_geq(ql.at_ms - t0, (uint64_t)stall_ms - 100,
                "the stall did not stall");
  cr_assert_eq(rh.sig_calls, 1, "the release never returned");
  cr_assert_eq(rh.sig_status, 0, "release during the stall: %s",
               rt_err_name(rh.sig_status));
  expect_grant(&rw, 1000, "waiter across the stall");
  cr_assert_gt(rw.fence, rh.fence);
  RUN_UNTIL(reconnects(&cs) >= 1, 5000);
  cr_assert_geq(reconnects(&cs), 1, "the short-timeout client did not reconnect");
  cr_assert_eq(reconnects(&cl), 0, "the long-timeout client reconnected");
  release(&rw, 0);

  close_wait(&cs);
  close_wait(&cl);
  finish();
  rtt_redis_close(adm);
  rtt_server_stop(&s);
}

Test(faults, client_pause_with_short_timeout_holder_and_long_timeout_waiter) {
  stall_test("CLIENT PAUSE 500", 500, 1);
}

Test(faults, client_pause_with_long_timeout_holder_and_short_timeout_waiter) {
  stall_test("CLIENT PAUSE 500", 500, 0);
}

Test(faults, debug_sleep_with_short_timeout_holder_and_long_timeout_waiter) {
  stall_test("DEBUG SLEEP 1", 1000, 1);
}

Test(faults, debug_sleep_with_long_timeout_holder_and_short_timeout_waiter) {
  stall_test("DEBUG SLEEP 1", 1000, 0);
}

/* A wait whose deadline passes during a stall must end at its deadline,
 * not when the server answers again. */
Test(faults, a_deadline_during_a_pause_is_reported_on_time) {
  rtt_server s;
  fcl a, w;
  freq ra, rw;
  rt_options_t o;
  rtt_server_start(&s, NULL);
  begin();
  opts(&o, &s);
  open_ready(&a, &o);
  open_ready(&w, &o);
  redisContext *adm = rtt_redis_at(s.port);
  acquire(&a, "x", 30000, &ra);
  wait_on(&w, "x", 30000, 300, &rw);
  uint64_t t0 = rtt_now_ms();
  RUN_UNTIL(rt_lock_position(rw.lock) > 0, 1000);
  rtt_ok(adm, "CLIENT PAUSE 1500");
  RUN_UNTIL(rw.calls > 0, 5000);
  cr_assert_eq(rw.calls, 1);
  cr_assert_eq(rw.status, RT_EDEADLINE, "%s", rt_err_name(rw.status));
  cr_assert_lt(rw.at_ms - t0, 300 + 250,
               "RT_EDEADLINE came %llu ms after rt_wait (timeout 300 ms): the "
               "callback waited for the server",
               (unsigned long long)(rw.at_ms - t0));
  RUN_FOR(1500);
  /* The cancel reached Redis once the pause ended: only the holder is
   * left (a canceled entry may stay in q until it reaches the front, but
   * it is no live waiter any more). */
  cr_assert_eq(qlen_of(adm, "x"), 1, "the canceled waiter is still live");
  release(&ra, 0);
  cr_assert_eq(qlen_of(adm, "x"), 0);
  cr_assert_eq(keys_of(adm, "x"), 0, "the canceled entry stayed");
  close_wait(&a);
  close_wait(&w);
  finish();
  rtt_redis_close(adm);
  rtt_server_stop(&s);
}

/* ======================================================================= */
/* Item 3: pub/sub output buffer limit, SCRIPT FLUSH                         */
/* ======================================================================= */

Test(faults, the_pubsub_output_buffer_limit_disconnects_the_subscriber) {
  rtt_server s;
  fcl a, w;
  freq ra, rw;
  rt_options_t o;
  rtt_server_start(&s, NULL);
  begin();
  opts(&o, &s);
  open_ready(&a, &o);
  open_ready(&w, &o);
  redisContext *adm = rtt_redis_at(s.port);
  rtt_ok(adm, "CONFIG SET client-output-buffer-limit %s", "pubsub 1 1 0");

  acquire(&a, "x", 20000, &ra);
  queue_on(&w, "x", 20000, &rw);
  long long sub_before = rtt_conn_id(adm, "sub", rt_client_id(w.c));
  /* Redis 7.0 does not count what fits its 16 KB static reply buffer, so a
   * short grant notice alone never hits the limit: push a big message (it
   * is no notice; the client must ignore it) and then cause the grant. */
  size_t big = 64 * 1024;
  char *junk = malloc(big);
  cr_assert_not_null(junk);
  memset(junk, 'j', big);
  redisReply *r = rtt_cmd(adm, "PUBLISH " PREFIX ":c:%s %b", rt_client_id(w.c),
                       junk, big);
  freeReplyObject(r);
  free(junk);
  release(&ra, 0);
  expect_grant(&rw, 5000, "waiter whose subscriber hit the buffer limit");
  cr_assert_geq(reconnects(&w), 1, "the subscriber was not disconnected");
  cr_assert_neq(rtt_conn_id(adm, "sub", rt_client_id(w.c)), sub_before);
  release(&rw, 0);
  close_wait(&a);
  close_wait(&w);
  finish();
  rtt_redis_close(adm);
  rtt_server_stop(&s);
}

static void extend_cb(rt_lock_t *l, int status, void *data) {
  answer *a = data;
  (void)l;
  a->calls++;
  a->status = status;
}

Test(faults, script_flush_with_waits_pending) {
  rtt_server s;
  fcl a, w;
  freq ra, rw;
  answer ext = {0}, lk = {0};
  rt_options_t o;
  rtt_server_start(&s, NULL);
  begin();
  opts(&o, &s);
  open_ready(&a, &o);
  open_ready(&w, &o);
  redisContext *adm = rtt_redis_at(s.port);

  acquire(&a, "x", 20000, &ra);
  queue_on(&w, "x", 20000, &rw);
  rtt_ok(adm, "SCRIPT FLUSH");
  release(&ra, 0);
  expect_grant(&rw, 5000, "waiter after SCRIPT FLUSH");
  cr_assert_gt(rw.fence, ra.fence);
  rtt_ok(adm, "SCRIPT FLUSH");
  cr_assert_eq(rt_extend(rw.lock, 20000, extend_cb, &ext), 0);
  RUN_UNTIL(ext.calls > 0, 5000);
  cr_assert_eq(ext.status, 0, "extend: %s", rt_err_name(ext.status));
  rtt_ok(adm, "SCRIPT FLUSH");
  cr_assert_eq(rt_locked(a.c, "x", 1, locked_cb, &lk), 0);
  RUN_UNTIL(lk.calls > 0, 5000);
  cr_assert_eq(lk.status, 0);
  cr_assert_eq(lk.value, 1);
  rtt_ok(adm, "SCRIPT FLUSH");
  release(&rw, 0);
  close_wait(&a);
  close_wait(&w);
  finish();
  rtt_redis_close(adm);
  rtt_server_stop(&s);
}

/* ======================================================================= */
/* Item 1 (as seen from outside) and 4: processes that die                   */
/* ======================================================================= */

typedef struct child {
  pid_t pid;
  int go_w;  /* parent writes "go" */
  int out_r; /* parent reads the child's request id */
} child;

static int child_done;
static void child_lock_cb(rt_lock_t *l, int status, void *data) {
  (void)l;
  (void)data;
  child_done = status == 0 ? 1 : -1;
}
static int child_connected;
static void child_connect_cb(rt_client_t *c, int status, void *data) {
  (void)c;
  (void)data;
  child_connected = status == 0 ? 1 : -1;
}

/* The child: on "go", open a client, request resource name with ttl and
 * wait until it holds it (hold) or is queued, report its request id, then
 * run until killed. Uses _exit: never returns into Criterion. */
static void child_main(int port, const char *name, int64_t ttl, int hold,
                       int go_fd, int out_fd) {
  char b;
  if (read(go_fd, &b, 1) != 1)
    _exit(2);
  uv_loop_t l;
  rt_client_t *c;
  rt_lock_t *lk;
  rt_options_t o;
  uv_loop_init(&l);
  rt_options_init(&o);
  o.host = "127.0.0.1";
  o.port = port;
  o.prefix = PREFIX;
  if (rt_client_open(&l, &o, child_connect_cb, NULL, &c) != 0)
    _exit(3);
  while (child_connected == 0)
    uv_run(&l, UV_RUN_ONCE);
  if (child_connected < 0)
    _exit(4);
  if (rt_wait(c, name, strlen(name), ttl, RT_FOREVER, child_lock_cb, NULL,
              &lk) != 0)
    _exit(5);
  while (hold ? child_done == 0 : rt_lock_position(lk) == 0 && child_done == 0)
    uv_run(&l, UV_RUN_ONCE);
  if (child_done < 0)
    _exit(6);
  char line[100];
  int n = snprintf(line, sizeof(line), "%s\n", rt_lock_id(lk));
  if (write(out_fd, line, (size_t)n) != n)
    _exit(7);
  uv_run(&l, UV_RUN_DEFAULT);
  _exit(0);
}

/* Fork before begin(): the child must not share the test's loop. */
static void child_start(child *ch, int port, const char *name, int64_t ttl,
                        int hold) {
  int go[2], out[2];
  cr_assert_eq(pipe(go), 0);
  cr_assert_eq(pipe(out), 0);
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
#ifdef __linux__
    prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
    close(go[1]);
    close(out[0]);
    child_main(port, name, ttl, hold, go[0], out[1]);
    _exit(1);
  }
  close(go[0]);
  close(out[1]);
  ch->pid = pid;
  ch->go_w = go[1];
  ch->out_r = out[0];
}

/* Let the child go and read its request id (it is then queued or holds). */
static void child_go(child *ch, char *id, size_t cap) {
  cr_assert_eq(write(ch->go_w, "g", 1), 1);
  struct pollfd p = {ch->out_r, POLLIN, 0};
  size_t n = 0;
  uint64_t end = rtt_now_ms() + 8000;
  while (n + 1 < cap && rtt_now_ms() < end) {
    if (poll(&p, 1, 50) <= 0)
      continue;
    ssize_t k = read(ch->out_r, id + n, 1);
    if (k <= 0)
      break;
    if (id[n] == '\n')
      break;
    n++;
  }
  id[n] = '\0';
  cr_assert_gt(n, 0, "the child did not report (exit status?)");
}

static void child_kill(child *ch) {
  kill(ch->pid, SIGKILL);
  waitpid(ch->pid, NULL, 0);
  close(ch->go_w);
  close(ch->out_r);
}

Test(faults, a_killed_waiter_is_skipped_at_once_when_its_turn_comes) {
  rtt_server s;
  child ch;
  fcl a, b;
  freq ra, rb;
  rt_options_t o;
  char cid[100];
  rtt_server_start(&s, NULL);
  child_start(&ch, s.port, "x", 20000, 0);
  begin();
  opts(&o, &s);
  open_ready(&a, &o);
  open_ready(&b, &o);
  redisContext *adm = rtt_redis_at(s.port);

  acquire(&a, "x", 20000, &ra);
  child_go(&ch, cid, sizeof(cid));
  queue_on(&b, "x", 20000, &rb);
  char ids[8][RTT_ID_MAX];
  cr_assert_eq(queue_of(adm, "x", ids, 8), 3);
  cr_assert_str_eq(ids[1], cid);
  child_kill(&ch);
  /* Let Redis see the closed connections (it does within a few ms). */
  rtt_sleep_ms(50);

  uint64_t t0 = rtt_now_ms();
  release(&ra, 0);
  expect_grant(&rb, 3000, "the live waiter behind a dead one");
  uint64_t took = rb.at_ms - t0;
  cr_log_info("live waiter granted %llu ms after the release",
              (unsigned long long)took);
  cr_assert_lt(took, 500, "the dead waiter held the queue for %llu ms",
               (unsigned long long)took);
  cr_assert_gt(rb.fence, ra.fence);
  cr_assert_eq(queue_of(adm, "x", ids, 8), 1);
  cr_assert_str_eq(ids[0], rb.id);
  release(&rb, 0);
  close_wait(&a);
  close_wait(&b);
  finish();
  rtt_redis_close(adm);
  rtt_server_stop(&s);
}

static void try_cb(rt_lock_t *l, int status, void *data) {
  freq *r = data;
  r->calls++;
  r->status = status;
  r->lock = status == 0 ? l : NULL;
}

/* Every way a request can end (a handoff, a wait deadline, try-locks, a
 * cancel, locks held and waited for when their clients close, a lease that
 * runs out and is reaped): once every client closed, no key of any
 * resource is left. Fences need no key to stay behind (they come from the
 * server clock), so an idle resource costs nothing. */
Test(faults, after_every_client_closed_no_key_stays) {
  rtt_server s;
  fcl c1, c2, c3;
  freq a, b, d, t1, t2, q, h1, h2, e1, e2;
  rt_options_t o;
  rtt_server_start(&s, NULL);
  begin();
  opts(&o, &s);
  open_ready(&c1, &o);
  open_ready(&c2, &o);
  open_ready(&c3, &o);
  redisContext *adm = rtt_redis_at(s.port);

  /* r1: a handoff and a deadline. */
  acquire(&c1, "r1", 10000, &a);
  queue_on(&c2, "r1", 10000, &b);
  wait_on(&c3, "r1", 10000, 100, &d);
  RUN_UNTIL(d.calls > 0, 2000);
  cr_assert_eq(d.status, RT_EDEADLINE);
  release(&a, 0);
  expect_grant(&b, 2000, "r1");
  release(&b, 0);
  /* r2: try-locks and a cancel. */
  memset(&t1, 0, sizeof(t1));
  memset(&t2, 0, sizeof(t2));
  cr_assert_eq(rt_try_lock(c1.c, "r2", 2, 10000, try_cb, &t1), 0);
  RUN_UNTIL(t1.calls > 0, 2000);
  cr_assert_eq(t1.status, 0);
  cr_assert_eq(rt_try_lock(c2.c, "r2", 2, 10000, try_cb, &t2), 0);
  RUN_UNTIL(t2.calls > 0, 2000);
  cr_assert_eq(t2.status, RT_EBUSY);
  queue_on(&c3, "r2", 10000, &q);
  cr_assert_eq(rt_cancel(q.lock), 0);
  RUN_UNTIL(q.calls > 0, 2000);
  cr_assert_eq(q.status, RT_ECANCELED);
  release(&t1, 0);
  /* r3: held and waited for when the clients close. */
  acquire(&c1, "r3", 10000, &h1);
  queue_on(&c2, "r3", 10000, &h2);
  /* r4: a lease that runs out and is reaped. */
  acquire(&c3, "r4", 200, &e1);
  wait_on(&c2, "r4", 10000, 5000, &e2);
  expect_grant(&e2, 3000, "r4 after the lease ran out");
  release(&e2, 0);
  release(&e1, RT_ELOST);

  close_wait(&c1);
  close_wait(&c2);
  close_wait(&c3);
  finish();

  /* Nothing else writes to this private server: every key would be ours. */
  redisReply *r = rtt_cmd(adm, "SCAN 0 MATCH * COUNT 10000");
  cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
  redisReply *keys = r->element[1];
  for (size_t i = 0; i < keys->elements; i++)
    cr_log_error("key left: %s (PTTL %lld)", keys->element[i]->str,
                 rtt_int(adm, "PTTL %b", keys->element[i]->str,
                       keys->element[i]->len));
  cr_assert_eq(keys->elements, 0, "%zu keys left after every client closed",
               keys->elements);
  freeReplyObject(r);
  cr_assert_eq(rtt_int(adm, "DBSIZE"), 0);
  for (int i = 1; i <= 4; i++) {
    char name[8];
    snprintf(name, sizeof(name), "r%d", i);
    cr_assert_eq(qlen_of(adm, name), 0, "%s still has a holder or waiters",
                 name);
  }
  rtt_redis_close(adm);
  rtt_server_stop(&s);
}

Test(faults, a_queue_abandoned_by_killed_clients_expires_by_itself) {
  rtt_server s;
  child holder, waiter;
  char hid[100], wid[100];
  rtt_server_start(&s, NULL);
  child_start(&holder, s.port, "x", 3000, 1);
  child_start(&waiter, s.port, "x", 3000, 0);
  child_go(&holder, hid, sizeof(hid));
  child_go(&waiter, wid, sizeof(wid));
  child_kill(&holder);
  child_kill(&waiter);
  redisContext *adm = rtt_redis_at(s.port);
  char ids[8][RTT_ID_MAX];
  cr_assert_eq(queue_of(adm, "x", ids, 8), 2);
  cr_assert_str_eq(ids[0], hid);
  cr_assert_str_eq(ids[1], wid);
  /* Nobody is left to release, cancel or reap. The holder record ends
   * with its lease (its own PX); the queue and the member hash were set,
   * when the waiter joined, to the lease left plus 10 s. */
  long long hpttl = rtt_int(adm, "PTTL " PREFIX ":{x}:h");
  long long qpttl = rtt_int(adm, "PTTL " PREFIX ":{x}:q");
  long long mpttl = rtt_int(adm, "PTTL " PREFIX ":{x}:m");
  cr_log_info("abandoned resource: PTTL h %lld, q %lld, m %lld ms (lease "
              "3000 ms)",
              hpttl, qpttl, mpttl);
  cr_assert(hpttl > 0 && hpttl <= 3000, "PTTL h %lld", hpttl);
  cr_assert(qpttl > 10000 && qpttl <= 13000, "PTTL q %lld", qpttl);
  cr_assert(mpttl > 10000 && mpttl <= 13000, "PTTL m %lld", mpttl);
  /* The lease ends: the holder record is gone without anyone reaping it,
   * and what the dead waiter left behind still expires by itself. */
  rtt_sleep_ms(hpttl + 100);
  cr_assert_eq(rtt_int(adm, "EXISTS " PREFIX ":{x}:h"), 0,
               "the holder record outlived its lease");
  cr_assert_eq(holder_field(adm, "x", "f"), -1);
  qpttl = rtt_int(adm, "PTTL " PREFIX ":{x}:q");
  mpttl = rtt_int(adm, "PTTL " PREFIX ":{x}:m");
  cr_assert(qpttl > 0 && qpttl <= 10000, "PTTL q %lld after the lease",
            qpttl);
  cr_assert(mpttl > 0 && mpttl <= 10000, "PTTL m %lld after the lease",
            mpttl);
  rtt_redis_close(adm);
  rtt_server_stop(&s);
}

/* ======================================================================= */
/* Item 5: security                                                          */
/* ======================================================================= */

Test(faults, a_password_in_the_url_works_and_a_wrong_one_is_eauth) {
  rtt_server s;
  fcl a, bad;
  freq ra;
  rt_options_t o;
  char url[200];
  const char *const args[] = {"--requirepass", "pa:ss@w%rd", NULL};
  rtt_server_start(&s, args);
  begin();
  rt_options_init(&o);
  o.prefix = PREFIX;
  snprintf(url, sizeof(url), "redis://:pa%%3Ass%%40w%%25rd@127.0.0.1:%d", s.port);
  o.url = url;
  open_ready(&a, &o);
  acquire(&a, "x", 5000, &ra);
  release(&ra, 0);
  snprintf(url, sizeof(url), "redis://:wrong@127.0.0.1:%d", s.port);
  open_only(&bad, &o);
  cr_assert_eq(bad.status, RT_EAUTH, "wrong password: %s",
               rt_err_name(bad.status));
  close_wait(&bad);
  close_wait(&a);
  finish();
  rtt_server_stop(&s);
}

/* The least-privilege rule: only keys under the prefix, only the prefix's
 * client channels, and only the commands the library sends (in the
 * handshakes INFO, CLIENT SETNAME, CLIENT ID, CLIENT KILL of the client's
 * previous connection and SCRIPT LOAD, on the subscriber SSUBSCRIBE and
 * SUBSCRIBE; EVALSHA, and EVAL after a NOSCRIPT) plus those its scripts
 * call (SPUBLISH among them). AUTH needs no permission; SELECT is needed
 * only for a db other than 0. The test below proves that every entry of
 * acl_perms is needed, and that the library uses every entry of
 * acl_optional but still works when it is refused (CLIENT ID and CLIENT
 * KILL only serve the kill of a previous connection, whose failure the
 * library ignores). When the scripts change, keep these lists (and the
 * documented rule) in step. */
static const char *const acl_perms[] = {
    "+evalsha",  "+eval",    "+script|load", "+client|setname", "+info",
    "+ssubscribe", "+subscribe",
    "+time",     "+get",     "+set",         "+del",            "+pexpire",
    "+spublish", "+lpop",    "+rpush",       "+lindex",         "+llen",
    "+lrange",   "+hget",    "+hmget",       "+hset",           "+hdel",
    "+hincrby",  "+hexists", "+hlen"};
#define NPERMS (sizeof(acl_perms) / sizeof(acl_perms[0]))
static const char *const acl_optional[] = {"+client|id", "+client|kill"};
#define NOPTIONAL (sizeof(acl_optional) / sizeof(acl_optional[0]))

/* Entry i of both lists, acl_perms first. */
static const char *acl_perm(size_t i) {
  return i < NPERMS ? acl_perms[i] : acl_optional[i - NPERMS];
}

/* The rule for user, without entry skip of the lists (-1: complete). */
static void acl_rule(redisContext *adm, const char *user, int skip) {
  char cmd[1024];
  int n = snprintf(cmd, sizeof(cmd),
                   "ACL SETUSER %s reset on >pw ~" PREFIX ":* &" PREFIX
                   ":c:* -@all",
                   user);
  for (size_t i = 0; i < NPERMS + NOPTIONAL; i++)
    if ((int)i != skip)
      n += snprintf(cmd + n, sizeof(cmd) - (size_t)n, " %s", acl_perm(i));
  cr_assert_lt((size_t)n, sizeof(cmd));
  rtt_ok(adm, cmd);
}

/* A field of one ACL LOG entry (a flat list of name, value pairs in
 * RESP2), or NULL. */
static const redisReply *acl_log_field(const redisReply *e, const char *name) {
  if (e->type != REDIS_REPLY_ARRAY)
    return NULL;
  for (size_t i = 0; i + 1 < e->elements; i += 2)
    if (e->element[i]->type == REDIS_REPLY_STRING &&
        strcmp(e->element[i]->str, name) == 0)
      return e->element[i + 1];
  return NULL;
}

/* How many refusals ACL LOG holds for user; the objects refused (commands,
 * keys or channels) go into what, e.g. "client|kill,ft:c:..". */
static long long acl_refusals(redisContext *adm, const char *user, char *what,
                              size_t cap) {
  redisReply *r = rtt_cmd(adm, "ACL LOG");
  cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
  long long n = 0;
  size_t len = 0;
  what[0] = '\0';
  for (size_t i = 0; i < r->elements; i++) {
    const redisReply *u = acl_log_field(r->element[i], "username");
    const redisReply *obj = acl_log_field(r->element[i], "object");
    const redisReply *cnt = acl_log_field(r->element[i], "count");
    if (u == NULL || u->type != REDIS_REPLY_STRING || strcmp(u->str, user) != 0)
      continue;
    n += cnt != NULL && cnt->type == REDIS_REPLY_INTEGER ? cnt->integer : 1;
    if (obj != NULL && obj->type == REDIS_REPLY_STRING && len < cap)
      len += (size_t)snprintf(what + len, cap - len, "%s%s", len ? "," : "",
                              obj->str);
  }
  freeReplyObject(r);
  return n;
}

/* rt_inspect's answer: value 1 if it saw a holder and one waiter. */
static void inspect_cb(rt_client_t *c, int status, const rt_queue_info_t *info,
                       void *data) {
  answer *a = data;
  (void)c;
  a->calls++;
  a->status = status;
  a->value = status == 0 && info->locked && info->holder != NULL &&
             info->nwaiters == 1;
  a->at_ms = rtt_now_ms();
}

/* Everything a program does with the library; returns "" or the first
 * step that failed. */
static const char *acl_scenario(const rtt_server *s, redisContext *adm,
                                const char *user) {
  rt_options_t o;
  fcl a, b;
  freq x1, x2, y1, y2, z1, z2, w2;
  answer ext = {0}, lk = {0}, ins = {0};
  const char *fail = "";
  rtt_ok(adm, "FLUSHALL");
  rtt_ok(adm, "ACL LOG RESET");
  opts(&o, s);
  o.username = user;
  o.password = "pw";
  o.command_timeout_ms = 1000;
  memset(&a, 0, sizeof(a));
  memset(&b, 0, sizeof(b));
  if (rt_client_open(&loop, &o, fcl_connect_cb, &a, &a.c) != 0 ||
      rt_client_open(&loop, &o, fcl_connect_cb, &b, &b.c) != 0)
    return "open";
  RUN_UNTIL(a.connects && b.connects, 5000);
#define STEP(name, cond)         \
  if (!*fail && !(cond))         \
  fail = name
  STEP("connect", a.status == 0 && b.status == 0);
  /* Mid-session script cache loss: the next calls go through EVAL. */
  rtt_ok(adm, "SCRIPT FLUSH");
  /* A fresh queue (grant at once); one behind it. */
  if (!*fail) {
    wait_on(&a, "x", 10000, 3000, &x1);
    RUN_UNTIL(x1.calls, 3000);
  }
  STEP("wait on an empty queue", x1.calls && x1.status == 0);
  if (!*fail) {
    wait_on(&b, "x", 10000, 5000, &x2);
    RUN_UNTIL(x2.calls || rt_lock_position(x2.lock) > 0, 3000);
  }
  STEP("wait behind a holder", !x2.calls && rt_lock_position(x2.lock) > 0);
  /* Extend, query. */
  if (!*fail) {
    rt_extend(x1.lock, 10000, extend_cb, &ext);
    RUN_UNTIL(ext.calls, 3000);
  }
  STEP("extend", ext.calls && ext.status == 0);
  if (!*fail) {
    rt_locked(b.c, "x", 1, locked_cb, &lk);
    RUN_UNTIL(lk.calls, 3000);
  }
  STEP("locked", lk.calls && lk.status == 0 && lk.value == 1);
  if (!*fail) {
    rt_inspect(b.c, "x", 1, 10, inspect_cb, &ins);
    RUN_UNTIL(ins.calls, 3000);
  }
  STEP("inspect", ins.calls && ins.status == 0 && ins.value == 1);
  /* Handoff (SPUBLISH to the other client), then the last release. */
  if (!*fail) {
    signal_start(&x1);
    RUN_UNTIL(x1.sig_calls && x2.calls, 3000);
  }
  STEP("release with handoff", x1.sig_status == 0 && x2.calls && x2.status == 0);
  if (!*fail) {
    signal_start(&x2);
    RUN_UNTIL(x2.sig_calls, 3000);
  }
  STEP("last release", x2.sig_calls && x2.sig_status == 0);
  /* A cancel behind a holder. */
  if (!*fail) {
    wait_on(&a, "y", 10000, 3000, &y1);
    RUN_UNTIL(y1.calls, 3000);
    wait_on(&b, "y", 10000, 5000, &y2);
    RUN_UNTIL(y2.calls || rt_lock_position(y2.lock) > 0, 3000);
    if (!y2.calls)
      rt_cancel(y2.lock);
    RUN_UNTIL(y2.calls, 3000);
  }
  STEP("cancel", y2.calls && y2.status == RT_ECANCELED);
  /* A lease that runs out: the watchdog reaps it. */
  if (!*fail) {
    wait_on(&a, "z", 150, 3000, &z1);
    RUN_UNTIL(z1.calls, 3000);
    wait_on(&b, "z", 10000, 3000, &z2);
    RUN_UNTIL(z2.calls, 3000);
  }
  STEP("reap an expired lease", z2.calls && z2.status == 0);
  /* A retried enqueue after the command connection is killed (the new
   * connection kills the old one again: CLIENT ID, CLIENT KILL). */
  if (!*fail) {
    wait_on(&b, "y", 10000, 5000, &w2);
    RUN_UNTIL(w2.calls || rt_lock_position(w2.lock) > 0, 3000);
    rtt_kill_conn(adm, "cmd", rt_client_id(b.c));
    RUN_UNTIL(w2.calls || reconnects(&b) >= 1, 3000);
    RUN_FOR(200);
    if (!w2.calls && y1.lock != NULL) {
      signal_start(&y1);
      RUN_UNTIL(w2.calls, 3000);
    }
  }
  STEP("re-enqueue after a reconnect", w2.calls && w2.status == 0);
#undef STEP
  if (a.c != NULL)
    rt_client_close(a.c, fcl_close_cb, &a);
  if (b.c != NULL)
    rt_client_close(b.c, fcl_close_cb, &b);
  RUN_UNTIL(a.closed && b.closed, 10000);
  return fail;
}

/* Redis 7.0 words ACL refusals inside scripts without the NOPERM code. */
static int refused(const char *err) {
  return strstr(err, "NOPERM") != NULL || strstr(err, "No permissions") != NULL ||
         strstr(err, "can't") != NULL;
}

Test(faults, a_least_privilege_acl_user_works_and_is_refused_elsewhere,
     .timeout = 120) {
  rtt_server s;
  char err[256];
  rtt_server_start(&s, NULL);
  redisContext *adm = rtt_redis_at(s.port);
  acl_rule(adm, "locker", -1);
  begin();

  char what[512];
  const char *fail = acl_scenario(&s, adm, "locker");
  cr_assert_str_eq(fail, "", "under the least-privilege rule, '%s' failed",
                   fail);
  /* Nothing the library did was refused, not even a command whose error
   * it ignores. */
  cr_assert_eq(acl_refusals(adm, "locker", what, sizeof(what)), 0,
               "the rule refused the library: %s", what);

  /* The same user is refused everything else. */
  redisContext *u = rtt_redis_at(s.port);
  rtt_ok(u, "AUTH locker pw");
  ft_err(u, err, sizeof(err), "SET other 1");
  cr_assert(refused(err), "%s", err);
  /* A command outside the rule, even on its own keys. */
  ft_err(u, err, sizeof(err), "HGETALL " PREFIX ":{x}:m");
  cr_assert(refused(err), "%s", err);
  ft_err(u, err, sizeof(err), "SUBSCRIBE other:c:1");
  cr_assert(refused(err), "%s", err);
  ft_err(u, err, sizeof(err), "SSUBSCRIBE other:c:1");
  cr_assert(refused(err), "%s", err);
  ft_err(u, err, sizeof(err), "EVAL %s 1 %s",
         "return redis.call('RPUSH', KEYS[1], 'v')", "other:{x}:q");
  cr_log_info("a script touching another key: %s", err);
  cr_assert(refused(err), "%s", err);
  ft_err(u, err, sizeof(err), "EVAL %s 0",
         "return redis.call('SPUBLISH', 'other:c:1', 'v')");
  cr_log_info("a script publishing elsewhere: %s", err);
  cr_assert(refused(err), "%s", err);
  ft_err(u, err, sizeof(err), "EVAL %s 0", "return redis.call('FLUSHALL')");
  cr_log_info("a script calling a forbidden command: %s", err);
  cr_assert(refused(err), "%s", err);
  /* ...while its own keys and channels are fine through a script. */
  cr_assert_eq(rtt_int(u, "EVAL %s 1 %s",
                       "return redis.call('RPUSH', KEYS[1], 'v')",
                       PREFIX ":{probe}:q"),
               1);
  cr_assert_eq(rtt_int(u, "EVAL %s 0",
                     "return redis.call('SPUBLISH', '" PREFIX ":c:1', 'v')"),
               0);
  rtt_redis_close(u);

  /* A client with another prefix gets a clear error. */
  rt_options_t o;
  fcl other;
  opts(&o, &s);
  o.prefix = "other";
  o.username = "locker";
  o.password = "pw";
  open_only(&other, &o);
  cr_expect_eq(other.status, RT_ENOPERM,
               "a client whose channel the ACL refuses failed to connect with "
               "%s, not RT_ENOPERM",
               rt_err_name(other.status));
  close_wait(&other);

  /* Every permission of the rule is needed... */
  for (size_t i = 0; i < NPERMS; i++) {
    char user[32];
    snprintf(user, sizeof(user), "lk%zu", i);
    acl_rule(adm, user, (int)i);
    fail = acl_scenario(&s, adm, user);
    cr_log_info("without %s: '%s' fails", acl_perms[i], fail);
    cr_expect_str_neq(fail, "",
                      "the scenario works without %s: the rule is not minimal",
                      acl_perms[i]);
  }
  /* ...and every optional one is used (Redis logs its refusal), but the
   * library gets by without it. */
  for (size_t i = 0; i < NOPTIONAL; i++) {
    char user[32];
    snprintf(user, sizeof(user), "lko%zu", i);
    acl_rule(adm, user, (int)(NPERMS + i));
    fail = acl_scenario(&s, adm, user);
    long long n = acl_refusals(adm, user, what, sizeof(what));
    cr_log_info("without %s: %lld refusals (%s)", acl_optional[i], n, what);
    cr_expect_str_eq(fail, "", "without the optional %s, '%s' failed",
                     acl_optional[i], fail);
    cr_expect_gt(n, 0, "the library never sent what %s allows: drop it",
                 acl_optional[i]);
    cr_expect_not_null(strstr(what, acl_optional[i] + 1),
                       "without %s, Redis refused %s", acl_optional[i], what);
  }
  finish();
  rtt_redis_close(adm);
  rtt_server_stop(&s);
}

static int all_called(const freq *r, int n) {
  for (int i = 0; i < n; i++)
    if (r[i].calls == 0)
      return 0;
  return 1;
}

/* Decode "%25", "%7B", "%7D" (the documented escapes). */
static size_t unescape(const char *s, size_t len, char *out) {
  size_t n = 0;
  for (size_t i = 0; i < len; i++) {
    if (s[i] == '%' && i + 2 < len) {
      if (s[i + 1] == '2' && s[i + 2] == '5')
        out[n++] = '%';
      else if (s[i + 1] == '7' && s[i + 2] == 'B')
        out[n++] = '{';
      else if (s[i + 1] == '7' && s[i + 2] == 'D')
        out[n++] = '}';
      else
        cr_assert_fail("bad escape in %.*s", (int)len, s);
      i += 2;
    } else {
      out[n++] = s[i];
    }
  }
  return n;
}

/* Every name is its own resource, and every key of it stays inside the
 * prefix and inside its own hash tag: a holder on each name (granted at
 * once, position 0: no name shares a holder with another) and a waiter on
 * each (position 1: no name shares a queue with another), so that every
 * name has all three keys, q, h and m; then every key in the server must
 * decode to exactly one name, once per suffix. */
Test(faults, crafted_resource_names_stay_inside_their_own_keys) {
  static const struct {
    const char *s;
    size_t len;
  } names[] = {{"x", 1},      {"x}:q", 4},   {"x}:h", 4},   {"}{", 2},
               {"{", 1},      {"}", 1},      {"%7D", 3},    {"%7B", 3},
               {"%25", 3},    {"%", 1},      {"a{b}c", 5},  {"{x}", 3},
               {"x\0y", 3},   {"x\0z", 3},   {":", 1},      {"x:h", 3},
               {"}:q", 3},    {"{}", 2},     {"%%7D", 4},   {"*", 1},
               {"x}:m", 4},   {"x:m", 3},    {"}:m", 3}};
  enum { N = sizeof(names) / sizeof(names[0]) };
  static const char suffixes[] = "qhm";
  rtt_server s;
  fcl a, b;
  rt_options_t o;
  freq r[N], w[N];
  rtt_server_start(&s, NULL);
  begin();
  opts(&o, &s);
  open_ready(&a, &o);
  open_ready(&b, &o);
  redisContext *adm = rtt_redis_at(s.port);

  for (int i = 0; i < N; i++) {
    rt_lock_t *l;
    memset(&r[i], 0, sizeof(r[i]));
    cr_assert_eq(rt_wait(a.c, names[i].s, names[i].len, 20000, 5000, freq_cb,
                         &r[i], &l),
                 0);
  }
  RUN_UNTIL(all_called(r, N), 5000);
  for (int i = 0; i < N; i++) {
    cr_assert_eq(r[i].calls, 1, "name %d not granted", i);
    cr_assert_eq(r[i].status, 0, "name %d: %s", i, rt_err_name(r[i].status));
    /* Granted at once: nobody held it, so it shares no keys with a name
     * granted before it. */
    cr_assert_eq(rt_lock_position(r[i].lock), 0,
                 "name %d shares keys with another", i);
  }
  for (int i = 0; i < N; i++) {
    memset(&w[i], 0, sizeof(w[i]));
    cr_assert_eq(rt_wait(b.c, names[i].s, names[i].len, 20000, RT_FOREVER,
                         freq_cb, &w[i], &w[i].lock),
                 0);
  }
  uint64_t end = rtt_now_ms() + 5000;
  for (int i = 0; i < N; i++) {
    RUN_UNTIL(w[i].calls > 0 || rt_lock_position(w[i].lock) > 0,
              end > rtt_now_ms() ? end - rtt_now_ms() : 1);
    cr_assert_eq(w[i].calls, 0, "name %d: the waiter ended: %s", i,
                 rt_err_name(w[i].status));
    /* Behind its own holder only: no other name's waiter is in its
     * queue. */
    cr_assert_eq(rt_lock_position(w[i].lock), 1,
                 "name %d shares its queue with another", i);
    cr_assert_eq(rtt_qlen(adm, PREFIX, names[i].s, names[i].len), 2,
                 "name %d", i);
  }

  /* Every key: "<prefix>:{<esc>}:q", ":h" or ":m", esc free of braces (so
   * the hash tag, and with it the slot, is exactly esc: the three keys of
   * a name are in one slot), decoding to one of the names; each exactly
   * once. */
  int seen[N][3];
  memset(seen, 0, sizeof(seen));
  redisReply *rep = rtt_cmd(adm, "SCAN 0 MATCH * COUNT 10000");
  redisReply *keys = rep->element[1];
  cr_assert_eq(keys->elements, 3 * N, "%zu keys for %d names", keys->elements,
               (int)N);
  for (size_t k = 0; k < keys->elements; k++) {
    const char *key = keys->element[k]->str;
    size_t kl = keys->element[k]->len;
    size_t pl = strlen(PREFIX ":{");
    cr_assert(kl > pl + 3 && memcmp(key, PREFIX ":{", pl) == 0,
              "key outside the prefix: %.*s", (int)kl, key);
    const char *suffix = memchr(suffixes, key[kl - 1], 3);
    cr_assert(memcmp(key + kl - 3, "}:", 2) == 0 && suffix != NULL,
              "bad key end: %.*s", (int)kl, key);
    const char *esc = key + pl;
    size_t el = kl - pl - 3;
    cr_assert_null(memchr(esc, '{', el), "brace in %.*s", (int)kl, key);
    cr_assert_null(memchr(esc, '}', el), "brace in %.*s", (int)kl, key);
    char dec[64];
    size_t dl = unescape(esc, el, dec);
    int found = -1;
    for (int i = 0; i < N; i++)
      if (names[i].len == dl && memcmp(names[i].s, dec, dl) == 0)
        found = i;
    cr_assert_geq(found, 0, "key %.*s belongs to no name", (int)kl, key);
    seen[found][suffix - suffixes]++;
  }
  for (int i = 0; i < N; i++)
    cr_assert(seen[i][0] == 1 && seen[i][1] == 1 && seen[i][2] == 1,
              "name %d: q %d, h %d, m %d", i, seen[i][0], seen[i][1],
              seen[i][2]);
  freeReplyObject(rep);

  /* Each handoff stays inside its name: every waiter is granted. */
  for (int i = 0; i < N; i++)
    release(&r[i], 0);
  RUN_UNTIL(all_called(w, N), 5000);
  for (int i = 0; i < N; i++) {
    cr_assert_eq(w[i].calls, 1, "name %d: the waiter was not granted", i);
    cr_assert_eq(w[i].status, 0, "name %d: %s", i, rt_err_name(w[i].status));
    cr_assert_gt(w[i].fence, r[i].fence, "name %d", i);
  }
  for (int i = 0; i < N; i++)
    release(&w[i], 0);
  cr_assert_eq(rtt_int(adm, "DBSIZE"), 0, "keys left after the last release");
  close_wait(&a);
  close_wait(&b);
  finish();
  rtt_redis_close(adm);
  rtt_server_stop(&s);
}
