/* The forked worker processes: W waiters on one libuv loop per process.
 *
 *   fair  each waiter loops rt_wait -> hold -> rt_signal (redturn);
 *   spin  each waiter loops SET key token NX PX ttl (retried after a fixed
 *         delay while taken) -> hold -> EVALSHA compare-and-delete, with
 *         hiredis async on the same kind of libuv loop;
 *   ping  one connection, one PING at a time.
 *
 * A waiter stops asking once the shared stop flag is up (N grants in all
 * processes, or the parent's wall-clock cap). The parent's control pipe
 * says 'p' (fair memory probe), 'g' (go) and 's' (stop: release what is
 * held, close, write the records, exit). */
#define _GNU_SOURCE
#include <errno.h>
#include <hiredis/adapters/libuv.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "redturn.h"

const char rtb_spin_release_lua[] =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then "
    "return redis.call('DEL', KEYS[1]) else return 0 end";

int64_t rtb_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t rtb_rss_bytes(void) {
  long long size = 0, resident = 0;
  FILE *f = fopen("/proc/self/statm", "r");
  if (f == NULL)
    return -1;
  if (fscanf(f, "%lld %lld", &size, &resident) != 2)
    resident = -1;
  fclose(f);
  return resident < 0 ? -1 : resident * (int64_t)sysconf(_SC_PAGESIZE);
}

int64_t rtb_heap_bytes(void) {
  struct mallinfo2 mi = mallinfo2();
  return (int64_t)(mi.uordblks + mi.hblkhd);
}

static uint64_t cpu_us_self(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (uint64_t)ru.ru_utime.tv_sec * 1000000 +
         (uint64_t)ru.ru_utime.tv_usec +
         (uint64_t)ru.ru_stime.tv_sec * 1000000 + (uint64_t)ru.ru_stime.tv_usec;
}

enum { W_IDLE = 0, W_WAITING, W_HELD, W_RELEASING, W_DONE };

struct wk;

typedef struct waiter {
  struct wk *wk;
  uint32_t idx; /* global waiter index */
  uint32_t res;
  int state;
  int set_in_flight; /* spin: a SET NX is out */
  char name[16];
  size_t name_len;
  char key[160];
  size_t key_len;
  char token[40];
  size_t token_len;
  rt_lock_t *lock;
  size_t rec; /* the current grant's record */
  uint64_t seq;
  uint32_t attempts;
  uint32_t shared; /* fair, read-write kind: the request is shared */
  uint64_t rnd;    /* fair, read-write kind: picks shared or exclusive */
  int64_t t_req;
  uv_timer_t retry;
} waiter;

typedef struct wk {
  const rtb_job *job;
  unsigned proc;
  rtb_shm *shm;
  uv_loop_t loop;
  uv_poll_t ctl_poll;
  int ctl;
  int out;
  rt_client_t *client;
  redisAsyncContext *ac;
  waiter *w;
  unsigned nw;
  rtb_rec *recs;
  size_t nrec, cap;
  /* Holds: all last hold_us, so their ends come in grant order: a ring. */
  int tfd;
  uv_poll_t tpoll;
  waiter **hq;
  int64_t *hq_due;
  size_t hq_head, hq_len;
  int started, snapped, stop_seen, stopping, finishing, probing;
  uint64_t cmds, inflight, errors, lost, grants;
  uint64_t cpu0_us, reaps0;
  uint64_t seq;
  char ttl_str[24];
  rtb_head head;
} wk;

static void die(const char *what) {
  fprintf(stderr, "redturn-bench worker: %s\n", what);
  _exit(3);
}

/* ---- records and the shared counter ------------------------------------- */

static size_t rec_push(wk *k, waiter *w, uint64_t seq, uint64_t fence) {
  if (k->nrec == k->cap) {
    size_t cap = k->cap ? k->cap * 2 : 4096;
    rtb_rec *n = realloc(k->recs, cap * sizeof(*n));
    if (n == NULL)
      die("out of memory for records");
    k->recs = n;
    k->cap = cap;
  }
  rtb_rec *r = &k->recs[k->nrec];
  memset(r, 0, sizeof(*r));
  r->seq = seq;
  r->fence = fence;
  r->t_req = w->t_req;
  r->t_grant = rtb_now_ns();
  r->res = w->res;
  r->waiter = w->idx;
  r->proc = k->proc;
  r->attempts = w->attempts;
  r->shared = w->shared;
  k->grants++;
  return k->nrec++;
}

static void snapshot(wk *k);

/* Has the run ended? The first look at the raised flag closes the window. */
static int stopped(wk *k) {
  if (!k->stop_seen && atomic_load(&k->shm->stop)) {
    k->stop_seen = 1;
    snapshot(k);
  }
  return k->stop_seen;
}

static void note_grant(wk *k, int64_t t) {
  uint64_t n = atomic_fetch_add(&k->shm->grants, 1) + 1;
  if (n == k->job->n_target) {
    int64_t zero = 0;
    atomic_compare_exchange_strong(&k->shm->t_stop, &zero, t);
    atomic_store(&k->shm->stop, 1);
  }
}

/* ---- holds ------------------------------------------------------------------ */

static void release(waiter *w);

static void hold_arm(wk *k) {
  struct itimerspec its;
  memset(&its, 0, sizeof(its));
  if (k->hq_len > 0) {
    int64_t due = k->hq_due[k->hq_head];
    its.it_value.tv_sec = due / 1000000000;
    its.it_value.tv_nsec = due % 1000000000;
  }
  if (timerfd_settime(k->tfd, TFD_TIMER_ABSTIME, &its, NULL) != 0)
    die("timerfd_settime");
}

static void hold_push(waiter *w) {
  wk *k = w->wk;
  size_t i = (k->hq_head + k->hq_len) % k->nw;
  k->hq[i] = w;
  k->hq_due[i] = mono_ns() + (int64_t)k->job->hold_us * 1000;
  if (k->hq_len++ == 0)
    hold_arm(k);
}

/* Release every hold that is over (all of them when stopping). */
static void hold_expire(wk *k, int all) {
  int64_t now = mono_ns();
  while (k->hq_len > 0 && (all || k->hq_due[k->hq_head] <= now)) {
    waiter *w = k->hq[k->hq_head];
    k->hq_head = (k->hq_head + 1) % k->nw;
    k->hq_len--;
    release(w);
  }
  hold_arm(k);
}

static void hold_cb(uv_poll_t *h, int status, int events) {
  wk *k = h->data;
  uint64_t ticks;
  (void)status;
  (void)events;
  if (read(k->tfd, &ticks, sizeof(ticks)) < 0 && errno != EAGAIN)
    die("timerfd read");
  hold_expire(k, 0);
}

/* A grant arrived: hold it, or release at once. */
static void hold_or_release(waiter *w) {
  w->state = W_HELD;
  if (w->wk->job->hold_us == 0 || w->wk->stopping)
    release(w);
  else
    hold_push(w);
}

/* ---- ending ------------------------------------------------------------------ */

static void handle_closed(uv_handle_t *h) { (void)h; }

static void close_handles(wk *k) {
  uv_close((uv_handle_t *)&k->ctl_poll, handle_closed);
  uv_close((uv_handle_t *)&k->tpoll, handle_closed);
  for (unsigned i = 0; i < k->nw; i++)
    uv_close((uv_handle_t *)&k->w[i].retry, handle_closed);
}

static void fair_closed(rt_client_t *c, void *data) {
  (void)c;
  close_handles(data);
}

static void spin_disconnected(const redisAsyncContext *ac, int status) {
  wk *k = ac->data;
  (void)status;
  k->ac = NULL;
  if (!k->stopping) {
    k->errors++;
    fprintf(stderr, "redturn-bench worker %u: connection lost\n", k->proc);
    k->stopping = 1;
  }
  close_handles(k);
}

/* Spin and ping: disconnect once nothing is out and nobody holds. */
static void maybe_finish(wk *k) {
  if (!k->stopping || k->finishing || k->job->mode == RTB_FAIR)
    return;
  if (k->inflight > 0)
    return;
  for (unsigned i = 0; i < k->nw; i++)
    if (k->w[i].state == W_HELD || k->w[i].state == W_RELEASING)
      return;
  k->finishing = 1;
  if (k->ac != NULL)
    redisAsyncDisconnect(k->ac);
}

static void start_request(waiter *w);

/* A waiter is free again: next request, unless the run is over. */
static void next_or_done(waiter *w) {
  wk *k = w->wk;
  if (stopped(k) || k->stopping) {
    w->state = W_DONE;
    maybe_finish(k);
  } else {
    start_request(w);
  }
}

/* ---- fair: redturn --------------------------------------------------------- */

static uint64_t id_seq(const char *id) {
  const char *p = strchr(id, ':');
  return p != NULL ? strtoull(p + 1, NULL, 10) : 0;
}

static void fair_released(rt_lock_t *lock, int status, void *data) {
  waiter *w = data;
  (void)lock;
  if (status == RT_ELOST)
    w->wk->lost++;
  else if (status != 0 && status != RT_ECANCELED)
    w->wk->errors++;
  w->lock = NULL;
  w->state = W_IDLE;
  next_or_done(w);
}

static void fair_granted(rt_lock_t *lock, int status, void *data) {
  waiter *w = data;
  wk *k = w->wk;
  if (status != 0) {
    if (status != RT_ECANCELED) {
      k->errors++;
      fprintf(stderr, "redturn-bench worker %u: wait failed: %s\n", k->proc,
              rt_strerror(status));
    }
    w->lock = NULL;
    w->state = W_DONE;
    return;
  }
  w->lock = lock;
  w->rec = rec_push(k, w, id_seq(rt_lock_id(lock)), rt_lock_fence(lock));
  note_grant(k, k->recs[w->rec].t_grant);
  hold_or_release(w);
}

/* The request of the job's kind: a read-write lock's side is drawn per
 * request (pct % shared), a semaphore's request takes one permit, an
 * election's is a candidate without a value. */
static rt_request_t fair_request(waiter *w) {
  const rtb_kind *kind = &w->wk->job->kind;
  rt_request_t req;
  memset(&req, 0, sizeof(req));
  w->shared = 0;
  if (kind->type == RTB_RW) {
    w->rnd = w->rnd * 6364136223846793005ull + 1442695040888963407ull;
    w->shared = (w->rnd >> 33) % 100 < kind->param;
    req.kind = w->shared ? RT_KIND_SHARED : RT_KIND_EXCLUSIVE;
  } else if (kind->type == RTB_SEM) {
    req.kind = RT_KIND_SEMAPHORE;
    req.permits = 1;
    req.of = kind->param;
  } else if (kind->type == RTB_ELECTION) {
    req.kind = RT_KIND_ELECTION;
  }
  return req;
}

static void fair_start(waiter *w) {
  wk *k = w->wk;
  rt_request_t req = fair_request(w);
  w->t_req = rtb_now_ns();
  w->state = W_WAITING;
  int rc = rt_wait_ex(k->client, w->name, w->name_len, &req, k->job->ttl_ms,
                      RT_FOREVER, fair_granted, w, &w->lock);
  if (rc != 0) {
    k->errors++;
    w->state = W_DONE;
    fprintf(stderr, "redturn-bench worker %u: rt_wait_ex: %s\n", k->proc,
            rt_strerror(rc));
    return;
  }
  k->cmds++; /* one enqueue script call */
}

static void fair_release(waiter *w) {
  wk *k = w->wk;
  w->state = W_RELEASING;
  k->recs[w->rec].t_rel = rtb_now_ns();
  int rc = rt_signal(w->lock, fair_released, w);
  if (rc != 0) {
    if (rc != RT_ECLOSED)
      k->errors++;
    w->lock = NULL;
    w->state = W_DONE;
    return;
  }
  k->cmds++; /* one release script call */
}

static void fair_connected(rt_client_t *c, int status, void *data) {
  wk *k = data;
  (void)c;
  if (status != 0) {
    fprintf(stderr, "redturn-bench worker %u: connect: %s\n", k->proc,
            rt_strerror(status));
    atomic_fetch_add(&k->shm->failed, 1);
    _exit(2);
  }
  atomic_fetch_add(&k->shm->ready, 1);
}

/* Memory probe: every waiter queues once (behind the parent, who holds every
 * resource); then one query on the same connection, whose reply comes after
 * every enqueue reply, tells that all are queued. */
static void probe_wait_cb(rt_lock_t *lock, int status, void *data) {
  waiter *w = data;
  (void)lock;
  if (status != RT_ECANCELED && status != 0)
    w->wk->errors++;
  w->lock = NULL;
}

static void probe_barrier(rt_client_t *c, int status, int locked, void *data) {
  wk *k = data;
  (void)c;
  (void)locked;
  if (status != 0)
    k->errors++;
  uint64_t queued = 0;
  for (unsigned i = 0; i < k->nw; i++)
    if (k->w[i].lock != NULL && rt_lock_position(k->w[i].lock) >= 1)
      queued++;
  k->shm->probe_rss_after[k->proc] = rtb_rss_bytes();
  k->shm->probe_heap_after[k->proc] = rtb_heap_bytes();
  k->shm->probe_queued[k->proc] = queued;
  atomic_fetch_add(&k->shm->probe_done, 1);
}

static void fair_probe(wk *k) {
  k->probing = 1;
  k->shm->probe_rss_before[k->proc] = rtb_rss_bytes();
  k->shm->probe_heap_before[k->proc] = rtb_heap_bytes();
  for (unsigned i = 0; i < k->nw; i++) {
    waiter *w = &k->w[i];
    if (rt_wait(k->client, w->name, w->name_len, k->job->ttl_ms, RT_FOREVER,
                probe_wait_cb, w, &w->lock) != 0)
      k->errors++;
  }
  if (rt_locked(k->client, k->w[0].name, k->w[0].name_len, probe_barrier, k) !=
      0)
    die("rt_locked");
}

/* ---- spin: SET NX PX + compare-and-delete --------------------------------- */

static void spin_try(waiter *w);

static void spin_retry_cb(uv_timer_t *t) {
  waiter *w = t->data;
  if (stopped(w->wk) || w->wk->stopping) {
    w->state = W_DONE;
    maybe_finish(w->wk);
    return;
  }
  spin_try(w);
}

static void spin_set_cb(redisAsyncContext *ac, void *r, void *priv) {
  waiter *w = priv;
  wk *k = w->wk;
  redisReply *reply = r;
  (void)ac;
  k->inflight--;
  w->set_in_flight = 0;
  if (reply == NULL) {
    w->state = W_DONE;
    return;
  }
  if (reply->type == REDIS_REPLY_STATUS && strcmp(reply->str, "OK") == 0) {
    w->rec = rec_push(k, w, w->seq, 0);
    note_grant(k, k->recs[w->rec].t_grant);
    hold_or_release(w);
    return;
  }
  if (reply->type == REDIS_REPLY_ERROR) {
    k->errors++;
    fprintf(stderr, "redturn-bench worker %u: SET: %s\n", k->proc, reply->str);
  }
  if (stopped(k) || k->stopping) {
    w->state = W_DONE;
    maybe_finish(k);
    return;
  }
  uv_timer_start(&w->retry, spin_retry_cb, k->job->retry_ms, 0);
}

static void spin_try(waiter *w) {
  wk *k = w->wk;
  const char *argv[6] = {"SET", w->key, w->token, "NX", "PX", k->ttl_str};
  size_t lens[6] = {3, w->key_len, w->token_len, 2, 2, strlen(k->ttl_str)};
  w->attempts++;
  w->set_in_flight = 1;
  k->cmds++;
  k->inflight++;
  if (redisAsyncCommandArgv(k->ac, spin_set_cb, w, 6, argv, lens) != REDIS_OK)
    die("redisAsyncCommandArgv");
}

static void spin_start(waiter *w) {
  wk *k = w->wk;
  w->seq = ++k->seq;
  w->token_len = (size_t)snprintf(w->token, sizeof(w->token), "%u.%" PRIu64,
                                  k->proc, w->seq);
  w->attempts = 0;
  w->t_req = rtb_now_ns();
  w->state = W_WAITING;
  spin_try(w);
}

static void spin_send_release(waiter *w, int eval);

static void spin_rel_cb(redisAsyncContext *ac, void *r, void *priv) {
  waiter *w = priv;
  wk *k = w->wk;
  redisReply *reply = r;
  (void)ac;
  k->inflight--;
  if (reply == NULL) {
    w->state = W_DONE;
    return;
  }
  if (reply->type == REDIS_REPLY_ERROR &&
      strncmp(reply->str, "NOSCRIPT", 8) == 0) {
    spin_send_release(w, 1);
    return;
  }
  if (reply->type == REDIS_REPLY_ERROR)
    k->errors++;
  else if (reply->type == REDIS_REPLY_INTEGER && reply->integer == 0)
    k->lost++;
  w->state = W_IDLE;
  next_or_done(w);
}

static void spin_send_release(waiter *w, int eval) {
  wk *k = w->wk;
  const char *argv[5] = {eval ? "EVAL" : "EVALSHA",
                         eval ? rtb_spin_release_lua : k->job->spin_sha, "1",
                         w->key, w->token};
  size_t lens[5] = {eval ? 4u : 7u, strlen(argv[1]), 1, w->key_len,
                    w->token_len};
  k->cmds++;
  k->inflight++;
  if (redisAsyncCommandArgv(k->ac, spin_rel_cb, w, 5, argv, lens) != REDIS_OK)
    die("redisAsyncCommandArgv");
}

static void spin_release(waiter *w) {
  w->state = W_RELEASING;
  w->wk->recs[w->rec].t_rel = rtb_now_ns();
  spin_send_release(w, 0);
}

/* ---- ping ------------------------------------------------------------------- */

static void ping_start(waiter *w);

static void ping_cb(redisAsyncContext *ac, void *r, void *priv) {
  waiter *w = priv;
  wk *k = w->wk;
  (void)ac;
  k->inflight--;
  if (r == NULL) {
    w->state = W_DONE;
    return;
  }
  size_t i = rec_push(k, w, ++k->seq, 0);
  k->recs[i].t_rel = k->recs[i].t_grant;
  note_grant(k, k->recs[i].t_grant);
  w->state = W_IDLE;
  next_or_done(w);
}

static void ping_start(waiter *w) {
  wk *k = w->wk;
  w->t_req = rtb_now_ns();
  w->attempts = 1;
  w->state = W_WAITING;
  k->cmds++;
  k->inflight++;
  if (redisAsyncCommand(k->ac, ping_cb, w, "PING") != REDIS_OK)
    die("redisAsyncCommand");
}

/* ---- dispatch ------------------------------------------------------------ */

static void start_request(waiter *w) {
  switch (w->wk->job->mode) {
  case RTB_FAIR:
    fair_start(w);
    break;
  case RTB_SPIN:
    spin_start(w);
    break;
  default:
    ping_start(w);
  }
}

static void release(waiter *w) {
  if (w->wk->job->mode == RTB_FAIR)
    fair_release(w);
  else
    spin_release(w);
}

static void snapshot(wk *k) {
  if (!k->started || k->snapped)
    return;
  k->snapped = 1;
  rt_stats_t st;
  uint64_t reaps = 0;
  if (k->client != NULL) {
    rt_client_stats(k->client, &st);
    reaps = st.reaps - k->reaps0;
  }
  /* Commands of the requests still open at the end of the window belong
   * to grants after it: the enqueue (or SET NX attempts, or PING) of a
   * pending request is taken out, the release a holder will send is put
   * in, so that commands and grants cover the same requests. */
  int64_t adj = 0;
  for (unsigned i = 0; i < k->nw; i++) {
    const waiter *w = &k->w[i];
    if (w->state == W_WAITING)
      adj -= k->job->mode == RTB_SPIN ? (int64_t)w->attempts : 1;
    else if (w->state == W_HELD)
      adj += 1;
  }
  k->head.reaps = reaps;
  k->head.cmds = (uint64_t)((int64_t)(k->cmds + reaps) + adj);
  k->head.grants = k->grants;
  k->head.cpu_us = cpu_us_self() - k->cpu0_us;
  k->head.rss_kb = rtb_rss_bytes() / 1024;
}

static void go(wk *k) {
  if (k->started)
    return;
  k->started = 1;
  k->cpu0_us = cpu_us_self();
  k->cmds = 0;
  k->grants = 0;
  if (k->client != NULL) {
    rt_stats_t st;
    rt_client_stats(k->client, &st);
    k->reaps0 = st.reaps;
  }
  for (unsigned i = 0; i < k->nw; i++)
    start_request(&k->w[i]);
}

static void stop(wk *k) {
  if (k->stopping)
    return;
  k->stop_seen = 1; /* the parent raised the flag before saying 's' */
  snapshot(k);
  k->stopping = 1;
  hold_expire(k, 1);
  if (k->job->mode == RTB_FAIR) {
    /* Pending waits are canceled by the close (their entries leave Redis);
     * releases in flight finish first. */
    rt_client_close(k->client, fair_closed, k);
    return;
  }
  for (unsigned i = 0; i < k->nw; i++) {
    waiter *w = &k->w[i];
    if (w->state == W_WAITING && !w->set_in_flight) {
      uv_timer_stop(&w->retry);
      w->state = W_DONE;
    }
  }
  maybe_finish(k);
}

static void ctl_cb(uv_poll_t *h, int status, int events) {
  wk *k = h->data;
  char buf[16];
  (void)status;
  (void)events;
  ssize_t n = read(k->ctl, buf, sizeof(buf));
  if (n == 0) { /* the parent is gone */
    stop(k);
    return;
  }
  for (ssize_t i = 0; i < n; i++) {
    if (buf[i] == 'g')
      go(k);
    else if (buf[i] == 'p' && k->client != NULL)
      fair_probe(k);
    else if (buf[i] == 's')
      stop(k);
  }
}

static void redis_connected(const redisAsyncContext *ac, int status) {
  wk *k = ac->data;
  if (status != REDIS_OK) {
    fprintf(stderr, "redturn-bench worker %u: connect: %s\n", k->proc,
            ac->errstr);
    atomic_fetch_add(&k->shm->failed, 1);
    _exit(2);
  }
  if (k->job->password[0] == '\0')
    atomic_fetch_add(&k->shm->ready, 1);
}

static void auth_cb(redisAsyncContext *ac, void *r, void *priv) {
  wk *k = priv;
  redisReply *reply = r;
  (void)ac;
  if (reply == NULL || reply->type == REDIS_REPLY_ERROR) {
    fprintf(stderr, "redturn-bench worker %u: AUTH failed\n", k->proc);
    atomic_fetch_add(&k->shm->failed, 1);
    _exit(2);
  }
  atomic_fetch_add(&k->shm->ready, 1);
}

static void write_all(int fd, const void *p, size_t n) {
  const char *c = p;
  while (n > 0) {
    ssize_t w = write(fd, c, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      die("cannot write the records");
    c += w;
    n -= (size_t)w;
  }
}

/* The waiters, every byte of them allocated and touched before any
 * measurement, so the memory probe sees only what redturn adds. */
static void make_waiters(wk *k) {
  k->w = malloc(k->nw * sizeof(*k->w));
  k->hq = malloc(k->nw * sizeof(*k->hq));
  k->hq_due = malloc(k->nw * sizeof(*k->hq_due));
  if (k->w == NULL || k->hq == NULL || k->hq_due == NULL)
    die("out of memory");
  memset(k->w, 0, k->nw * sizeof(*k->w));
  memset(k->hq, 0, k->nw * sizeof(*k->hq));
  memset(k->hq_due, 0, k->nw * sizeof(*k->hq_due));
  for (unsigned i = 0; i < k->nw; i++) {
    waiter *w = &k->w[i];
    w->wk = k;
    w->idx = k->proc * k->nw + i;
    w->res = k->job->keys > 0 ? w->idx % k->job->keys : 0;
    w->name_len = (size_t)snprintf(w->name, sizeof(w->name), "r%u", w->res);
    w->key_len = (size_t)snprintf(w->key, sizeof(w->key), "%s:{r%u}",
                                  k->job->prefix, w->res);
    w->rnd = (uint64_t)w->idx * 0x9e3779b97f4a7c15ull + 1;
    uv_timer_init(&k->loop, &w->retry);
    w->retry.data = w;
  }
}

/* The worker's connection: a redturn client (fair) or a hiredis one (spin,
 * ping). */
static void connect_worker(wk *k) {
  if (k->job->mode == RTB_FAIR) {
    rt_options_t opts;
    rt_options_init(&opts);
    opts.url = k->job->url;
    opts.prefix = k->job->prefix;
    opts.default_ttl_ms = k->job->ttl_ms;
    opts.script_path = k->job->kind.path;
    /* At the deep point each connection carries 25 000 enqueues at once,
     * and Redis is slower still under the verification pass's MONITOR: a
     * release queued behind them may wait longer than the default command
     * timeout, which would drop the connection mid-pass. */
    opts.command_timeout_ms = 60000;
    /* The instructions pass runs redis-server under callgrind, 50 times
     * slower: a connect (its handshake, loading the scripts, included)
     * took over 30 s on a machine running three test commands. */
    opts.connect_timeout_ms = 120000;
    int rc = rt_client_open(&k->loop, &opts, fair_connected, k, &k->client);
    if (rc != 0) {
      fprintf(stderr, "redturn-bench worker: rt_client_open: %s\n",
              rt_strerror(rc));
      atomic_fetch_add(&k->shm->failed, 1);
      _exit(2);
    }
    snprintf(k->head.client_id, sizeof(k->head.client_id), "%s",
             rt_client_id(k->client));
    snprintf(k->shm->client_id[k->proc], sizeof(k->shm->client_id[k->proc]),
             "%s", rt_client_id(k->client));
  } else {
    k->ac = redisAsyncConnect(k->job->host, k->job->port);
    if (k->ac == NULL || k->ac->err) {
      atomic_fetch_add(&k->shm->failed, 1);
      die("redisAsyncConnect");
    }
    k->ac->data = k;
    redisLibuvAttach(k->ac, &k->loop);
    redisAsyncSetConnectCallback(k->ac, redis_connected);
    redisAsyncSetDisconnectCallback(k->ac, spin_disconnected);
    if (k->job->password[0] != '\0')
      redisAsyncCommand(k->ac, auth_cb, k, "AUTH %s", k->job->password);
  }
}

void rtb_worker_main(const rtb_job *job, unsigned proc, int ctl, int out,
                     rtb_shm *shm) {
  wk k; /* one per process: this frame lives until _exit */
  memset(&k, 0, sizeof(k));
  k.job = job;
  k.proc = proc;
  k.shm = shm;
  k.ctl = ctl;
  k.out = out;
  k.nw = job->mode == RTB_PING ? 1 : job->waiters;
  snprintf(k.ttl_str, sizeof(k.ttl_str), "%lld", (long long)job->ttl_ms);
  if (uv_loop_init(&k.loop) != 0)
    die("uv_loop_init");

  make_waiters(&k);

  k.tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (k.tfd < 0 || uv_poll_init(&k.loop, &k.tpoll, k.tfd) != 0)
    die("timerfd");
  k.tpoll.data = &k;
  uv_poll_start(&k.tpoll, UV_READABLE, hold_cb);

  connect_worker(&k);

  if (uv_poll_init(&k.loop, &k.ctl_poll, ctl) != 0)
    die("uv_poll_init");
  k.ctl_poll.data = &k;
  uv_poll_start(&k.ctl_poll, UV_READABLE, ctl_cb);

  uv_run(&k.loop, UV_RUN_DEFAULT);

  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  k.head.proc = proc;
  k.head.nrec = k.nrec;
  k.head.maxrss_kb = ru.ru_maxrss;
  k.head.errors = k.errors;
  k.head.lost = k.lost;
  write_all(out, &k.head, sizeof(k.head));
  if (k.nrec > 0)
    write_all(out, k.recs, k.nrec * sizeof(*k.recs));
  _exit(0);
}
