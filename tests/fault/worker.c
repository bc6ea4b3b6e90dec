/* A worker process of the fault suite: lanes that take and release locks
 * in a loop (single, multi-lock and observer lanes), logging every event
 * (formats at the top of fault.c). */
#include "fault.h"

/* Reconnects and grants the client could not report (late_grants): after
 * either a waiter may queue again at the tail, so the checker counts a
 * request during which this changed as disturbed. */
static uint64_t w_reconnects(worker *w) {
  rt_stats_t st;
  rt_client_stats(w->c, &st);
  return st.reconnects + st.late_grants;
}

static void lane_start(lane *ln);

static void lane_next_cb(uv_timer_t *t) { lane_start(t->data); }

static void lane_later(lane *ln, int64_t ms) {
  ln->state = L_IDLE;
  if (!ln->w->stopping)
    uv_timer_start(&ln->timer, lane_next_cb, (uint64_t)ms, 0);
}

static void signal_cb(rt_lock_t *lock, int status, void *data) {
  lane *ln = data;
  worker *w = ln->w;
  (void)lock;
  logf_fd(w->fd, "R %" PRId64 " %s %d", real_us(), ln->id, status);
  ln->lock = NULL;
  lane_later(ln, (int64_t)(next_rand(&w->rnd) % 20));
}

static void multi_hold_done(lane *ln);

static void hold_done_cb(uv_timer_t *t) {
  lane *ln = t->data;
  worker *w = ln->w;
  if (ln->state != L_HOLDING || w->stopping)
    return;
  if (ln->multi != NULL) {
    multi_hold_done(ln);
    return;
  }
  int64_t now = real_us();
  int overstay = (int64_t)(now / 1000) >= rt_lock_deadline_ms(ln->lock);
  int lost = rt_lock_state(ln->lock) == RT_LOCK_LOST;
  logf_fd(w->fd, "S %" PRId64 " %s %d %d %" PRId64, now, ln->id, overstay, lost,
          rt_lock_lease_left_ms(ln->lock));
  judge_write(w, ln->lock, 's');
  ln->state = L_RELEASING;
  int err = rt_signal(ln->lock, signal_cb, ln);
  if (err != 0) {
    logf_fd(w->fd, "R %" PRId64 " %s %d", real_us(), ln->id, err);
    ln->lock = NULL;
    lane_later(ln, 10);
  }
}

static void lost_cb(rt_lock_t *lock, void *data) {
  lane *ln = data;
  logf_fd(ln->w->fd, "L %" PRId64 " %s", real_us(), rt_lock_id(lock));
}

static void wait_cb(rt_lock_t *lock, int status, void *data) {
  lane *ln = data;
  worker *w = ln->w;
  int64_t now = real_us();
  uint64_t rc = w_reconnects(w);
  if (status == 0) {
    logf_fd(w->fd,
            "G %" PRId64 " %s %" PRIu64 " %" PRId64 " %" PRId64 " %zu %" PRIu64
            " %" PRId64,
            now, ln->id, rt_lock_fence(lock), rt_lock_deadline_ms(lock),
            rt_lock_lease_ms(lock), rt_lock_position(lock), rc,
            rt_lock_lease_left_ms(lock));
    judge_write(w, lock, 'g');
    ln->state = L_HOLDING;
    if (w->stopping)
      return; /* the close releases it */
    /* A leader proclaims a new value once: the observers' notice path
     * runs under every fault, and a refusal (not the leader) turns the
     * lock LOST, which the lease rules judge. */
    if (ln->kind == RT_KIND_ELECTION)
      rt_proclaim(lock, "leader", 6, NULL, NULL);
    uint64_t hold;
    /* Mostly short holds; now and then one that outstays its lease, so
     * that leases also run out under live holders. */
    if (next_rand(&w->rnd) % 1000 < 7)
      hold = (uint64_t)ln->ttl_ms + 100 + next_rand(&w->rnd) % 300;
    else
      hold = next_rand(&w->rnd) % 31;
    uv_timer_start(&ln->timer, hold_done_cb, hold, 0);
    return;
  }
  /* A failure a wait may not end with (rule survival) carries the
   * client's words for it, which the checker prints. */
  const char *why = status == RT_EWAITTIMEOUT || status == RT_ECANCELED
                        ? ""
                        : rt_client_last_error(w->c);
  logf_fd(w->fd, "F %" PRId64 " %s %d %" PRIu64 " %.160s", now, ln->id, status,
          rc, why);
  ln->lock = NULL;
  lane_later(ln, (int64_t)(next_rand(&w->rnd) % 20));
}
int res_kind(int r) { return P.mixed ? r % 4 : RK_MUTEX; }

static rt_request_t mixed_request(int r, uint64_t *rnd) {
  rt_request_t req;
  memset(&req, 0, sizeof(req));
  switch (res_kind(r)) {
  case RK_RW:
    req.kind = next_rand(rnd) % 10 < 7 ? RT_KIND_SHARED : RT_KIND_EXCLUSIVE;
    break;
  case RK_SEM:
    req.kind = RT_KIND_SEMAPHORE;
    req.of = MIXED_PERMITS;
    req.permits = 1 + (uint32_t)(next_rand(rnd) % MIXED_PERMITS);
    break;
  case RK_ELECTION:
    req.kind = RT_KIND_ELECTION;
    req.value = "candidate";
    req.value_len = strlen(req.value);
    break;
  default:
    break;
  }
  return req;
}

/* ---- multi-lock lanes (--multi) ------------------------------------------
 *
 * Lane 0 of the even worker slots takes, two times in five, the first two
 * mutexes (r0 and r4 with --mixed) together with rt_wait_all; the single
 * lanes take them alone too, so the multi-locks contend with them and key
 * loss hits them half-taken. Each lock of the set is logged as a request of
 * its own once the check after every loop iteration sees it granted
 * (rt_multi_lock is set from its grant on): an E line with the time before
 * rt_wait_all (a lower bound of its enqueue), "M t reqid mid", and its G
 * line; "D t reqid deadline_ms" when its deadline moved (the renewals
 * while the rest is waited for, the extend before the report). The set's
 * own lines: "A t mid timeout ttl n res..." before rt_wait_all, "Z t mid
 * status" its callback (0: every lock held), "T t mid" before
 * rt_signal_all, "z t mid status" its callback. A lock released because
 * the set failed gets an S line at the last check that saw it held (a
 * lower bound of its release) and an R line with the set's status. */

static int mlock_pair(int out[2]) {
  int n = 0;
  for (int r = 0; r < P.resources && n < 2; r++)
    if (res_kind(r) == RK_MUTEX)
      out[n++] = r;
  return n == 2;
}

/* Log the grant of lock i of ln's set (once) or its new deadline. */
static void multi_log_lock(lane *ln, size_t i, int64_t now) {
  worker *w = ln->w;
  rt_lock_t *l = rt_multi_lock(ln->multi, i);
  if (l == NULL)
    return;
  ln->m_seen_us[i] = now;
  if (!ln->m_logged[i]) {
    int pair[2];
    mlock_pair(pair);
    ln->m_logged[i] = 1;
    snprintf(ln->m_ids[i], sizeof(ln->m_ids[i]), "%s", rt_lock_id(l));
    ln->m_deadline[i] = rt_lock_deadline_ms(l);
    logf_fd(w->fd,
            "E %" PRId64 " %d %d %s %" PRId64 " %" PRId64 " %" PRIu64 " 0 0 0",
            ln->m_e_us, ln->idx, pair[i], ln->m_ids[i], ln->m_timeout,
            ln->m_ttl, ln->m_rc);
    logf_fd(w->fd, "M %" PRId64 " %s %d", now, ln->m_ids[i], ln->mid);
    logf_fd(w->fd,
            "G %" PRId64 " %s %" PRIu64 " %" PRId64 " %" PRId64 " %zu %" PRIu64
            " %" PRId64,
            now, ln->m_ids[i], rt_lock_fence(l), rt_lock_deadline_ms(l),
            rt_lock_lease_ms(l), (size_t)1, w_reconnects(w),
            rt_lock_lease_left_ms(l));
  } else if (rt_lock_deadline_ms(l) != ln->m_deadline[i]) {
    ln->m_deadline[i] = rt_lock_deadline_ms(l);
    logf_fd(w->fd, "D %" PRId64 " %s %" PRId64, now, ln->m_ids[i],
            ln->m_deadline[i]);
  }
}

static void multi_signal_cb(rt_multi_t *m, int status, void *data) {
  lane *ln = data;
  worker *w = ln->w;
  (void)m;
  int64_t now = real_us();
  for (int i = 0; i < 2; i++)
    if (ln->m_logged[i])
      logf_fd(w->fd, "R %" PRId64 " %s %d", now, ln->m_ids[i], status);
  logf_fd(w->fd, "z %" PRId64 " %d %d", now, ln->mid, status);
  ln->multi = NULL;
  lane_later(ln, (int64_t)(next_rand(&w->rnd) % 20));
}

static void multi_hold_done(lane *ln) {
  worker *w = ln->w;
  int64_t now = real_us();
  for (size_t i = 0; i < 2; i++) {
    rt_lock_t *l = rt_multi_lock(ln->multi, i);
    if (l == NULL || !ln->m_logged[i])
      continue;
    multi_log_lock(ln, i, now); /* a renewal not logged yet */
    logf_fd(w->fd, "S %" PRId64 " %s %d %d %" PRId64, now, ln->m_ids[i],
            (int)(now / 1000 >= rt_lock_deadline_ms(l)),
            rt_lock_state(l) == RT_LOCK_LOST, rt_lock_lease_left_ms(l));
  }
  logf_fd(w->fd, "T %" PRId64 " %d", now, ln->mid);
  ln->state = L_RELEASING;
  int err = rt_signal_all(ln->multi, multi_signal_cb, ln);
  if (err != 0) {
    logf_fd(w->fd, "z %" PRId64 " %d %d", real_us(), ln->mid, err);
    ln->multi = NULL;
    lane_later(ln, 10);
  }
}

static void multi_wait_cb(rt_multi_t *m, int status, void *data) {
  lane *ln = data;
  worker *w = ln->w;
  int64_t now = real_us();
  if (status == 0) {
    for (size_t i = 0; i < 2; i++)
      multi_log_lock(ln, i, now);
    logf_fd(w->fd, "Z %" PRId64 " %d 0", now, ln->mid);
    ln->state = L_HOLDING;
    if (w->stopping) { /* the close gives the locks back; this frees it */
      (void)rt_signal_all(ln->multi, multi_signal_cb, ln);
      ln->multi = NULL;
      return;
    }
    uv_timer_start(&ln->timer, hold_done_cb, next_rand(&w->rnd) % 31, 0);
    return;
  }
  (void)m;
  /* Every lock taken was released before this call: at the earliest
   * after the last check that saw it held. */
  for (int i = 0; i < 2; i++)
    if (ln->m_logged[i]) {
      logf_fd(w->fd, "S %" PRId64 " %s 0", ln->m_seen_us[i], ln->m_ids[i]);
      logf_fd(w->fd, "R %" PRId64 " %s %d", now, ln->m_ids[i], status);
    }
  logf_fd(w->fd, "Z %" PRId64 " %d %d", now, ln->mid, status);
  ln->multi = NULL;
  lane_later(ln, (int64_t)(next_rand(&w->rnd) % 20));
}

/* Start a multi-lock on the first two mutexes; 0, or -1 if refused. */
static int multi_start(lane *ln) {
  worker *w = ln->w;
  int pair[2];
  if (!mlock_pair(pair))
    return -1;
  char n0[16], n1[16];
  res_name(pair[0], n0, sizeof(n0));
  res_name(pair[1], n1, sizeof(n1));
  const void *names[2] = {n0, n1};
  size_t lens[2] = {strlen(n0), strlen(n1)};
  ln->m_timeout = 1000 + (int64_t)(next_rand(&w->rnd) % 4000);
  ln->m_ttl = next_rand(&w->rnd) % 2 ? P.lease_ms / 2 : P.lease_ms;
  ln->m_rc = w_reconnects(w);
  ln->mid = ++w->nmulti;
  memset(ln->m_logged, 0, sizeof(ln->m_logged));
  ln->m_e_us = real_us();
  logf_fd(w->fd, "A %" PRId64 " %d %" PRId64 " %" PRId64 " 2 %d %d", ln->m_e_us,
          ln->mid, ln->m_timeout, ln->m_ttl, pair[0], pair[1]);
  ln->state = L_WAITING;
  int err = rt_wait_all(w->c, names, lens, 2, ln->m_ttl, ln->m_timeout,
                        multi_wait_cb, ln, &ln->multi);
  if (err != 0) {
    logf_fd(w->fd, "Z %" PRId64 " %d %d", real_us(), ln->mid, err);
    ln->multi = NULL;
    return -1;
  }
  return 0;
}

static void lane_start(lane *ln) {
  worker *w = ln->w;
  if (w->stopping)
    return;
  if (P.multi && ln->idx == 0 && w->slot % 2 == 0 &&
      next_rand(&w->rnd) % 5 < 2) {
    if (multi_start(ln) != 0)
      lane_later(ln, 50);
    return;
  }
  int r = (int)(next_rand(&w->rnd) % (uint64_t)P.resources);
  char name[16];
  res_name(r, name, sizeof(name));
  int64_t timeout = 200 + (int64_t)(next_rand(&w->rnd) % 3800);
  unsigned pick = (unsigned)(next_rand(&w->rnd) % 100);
  int64_t ttl =
      pick < 35 ? P.lease_ms / 4 : (pick < 75 ? P.lease_ms : max_lease());
  uint64_t rc = w_reconnects(w);
  int64_t t = real_us(); /* before the call: a lower bound of the enqueue */
  rt_request_t req = mixed_request(r, &w->rnd);
  rt_lock_t *lock = NULL;
  int err = rt_wait_ex(w->c, name, strlen(name), &req, ttl, timeout, wait_cb,
                       ln, &lock);
  if (err != 0) {
    logf_fd(w->fd, "Y %" PRId64 " rt_wait refused: %s", t, rt_err_name(err));
    lane_later(ln, 50);
    return;
  }
  rt_lock_on_lost(lock, lost_cb);
  ln->lock = lock;
  ln->ttl_ms = ttl;
  ln->kind = req.kind;
  ln->state = L_WAITING;
  ln->q_logged = 0;
  snprintf(ln->id, sizeof(ln->id), "%s", rt_lock_id(lock));
  logf_fd(w->fd,
          "E %" PRId64 " %d %d %s %" PRId64 " %" PRId64 " %" PRIu64 " %d %u %u",
          t, ln->idx, r, ln->id, timeout, ttl, rc, (int)req.kind, req.permits,
          req.of);
}

/* After every loop iteration: enqueue replies seen, reconnects. */
static void check_cb(uv_check_t *h) {
  worker *w = h->data;
  if (w->c == NULL)
    return;
  uint64_t rc = w_reconnects(w);
  int64_t now = real_us();
  if (rc != w->reconnects) {
    w->reconnects = rc;
    logf_fd(w->fd, "N %" PRId64 " %" PRIu64, now, rc);
  }
  for (int i = 0; i < P.lanes; i++) {
    lane *ln = &w->lanes[i];
    if (ln->multi != NULL && ln->state == L_WAITING) {
      multi_log_lock(ln, 0, now);
      multi_log_lock(ln, 1, now);
      continue;
    }
    if (ln->state == L_WAITING && !ln->q_logged && ln->lock != NULL &&
        rt_lock_position(ln->lock) > 0) {
      ln->q_logged = 1;
      logf_fd(w->fd, "Q %" PRId64 " %s %zu", now, ln->id,
              rt_lock_position(ln->lock));
    }
  }
}

static void handle_closed(uv_handle_t *h) { (void)h; }

/* Every BEAT_MS: a beat later than BEAT_LATE_MS means the loop did not run
 * (the process was not scheduled), and so did no timer of the library's. */
enum { BEAT_MS = 25, BEAT_LATE_MS = 30 };
static void beat_cb(uv_timer_t *t) {
  worker *w = t->data;
  int64_t now = real_us(), late = (now - w->beat_due_us) / 1000;
  if (late >= BEAT_LATE_MS)
    logf_fd(w->fd, "Y %" PRId64 " %" PRId64, now, late);
  w->beat_due_us = now + BEAT_MS * 1000;
  uv_timer_start(t, beat_cb, BEAT_MS, 0);
}

static void close_cb(rt_client_t *c, void *data) {
  worker *w = data;
  rt_stats_t st;
  rt_client_stats(c, &st);
  logf_fd(w->fd, "X %" PRId64 " %" PRIu64 " %" PRIu64, real_us(), st.grants,
          st.reconnects);
  w->c = NULL;
  for (int i = 0; i < P.lanes; i++)
    uv_close((uv_handle_t *)&w->lanes[i].timer, handle_closed);
  uv_close((uv_handle_t *)&w->sigterm, handle_closed);
  uv_close((uv_handle_t *)&w->check, handle_closed);
  uv_close((uv_handle_t *)&w->beat, handle_closed);
}

static void worker_stop(worker *w) {
  if (w->stopping)
    return;
  w->stopping = 1;
  for (int i = 0; i < P.lanes; i++)
    uv_timer_stop(&w->lanes[i].timer);
  logf_fd(w->fd, "C %" PRId64, real_us());
  rt_client_close(w->c, close_cb, w);
  /* A multi-lock held: the close gives its locks back; this frees it. */
  for (int i = 0; i < P.lanes; i++)
    if (w->lanes[i].multi != NULL && w->lanes[i].state == L_HOLDING) {
      (void)rt_signal_all(w->lanes[i].multi, multi_signal_cb, &w->lanes[i]);
      w->lanes[i].multi = NULL;
    }
}

static void sigterm_cb(uv_signal_t *h, int signum) {
  (void)signum;
  worker_stop(h->data);
}

/* An observer lane's report: "W t res status id fence deadline_ms" (id
 * "-" when nobody leads or for news without a state). */
static void observe_cb(rt_observer_t *obs, int status, const rt_leader_t *ld,
                       void *data) {
  obs_lane *o = data;
  (void)obs;
  logf_fd(o->w->fd, "W %" PRId64 " %d %d %s %" PRIu64 " %" PRId64, real_us(),
          o->res, status, ld != NULL && ld->id != NULL ? ld->id : "-",
          ld != NULL ? ld->fence : 0, ld != NULL ? ld->deadline_ms : 0);
  if (status != 0 && status != RT_EDISCONNECTED)
    o->done = 1;
}

/* --observe: one observer per election for the worker's whole life. */
static void observe_start(worker *w) {
  for (int r = 0; r < P.resources && P.observe; r++) {
    if (res_kind(r) != RK_ELECTION)
      continue;
    obs_lane *o = &w->obs[w->nobs++];
    o->w = w;
    o->res = r;
    char name[16];
    res_name(r, name, sizeof(name));
    int err = rt_observe(w->c, name, strlen(name), observe_cb, o, NULL);
    if (err != 0) {
      logf_fd(w->fd, "W %" PRId64 " %d %d - 0 0", real_us(), r, err);
      o->done = 1;
    }
  }
}

static void connect_cb(rt_client_t *c, int status, void *data) {
  worker *w = data;
  (void)c;
  if (status != 0) {
    logf_fd(w->fd, "U %" PRId64 " %d", real_us(), status);
    if (!w->stopping) { /* else: closed while connecting, a normal stop */
      w->exit_code = 3;
      worker_stop(w);
    }
    return;
  }
  logf_fd(w->fd, "O %" PRId64, real_us());
  observe_start(w);
  for (int i = 0; i < P.lanes; i++)
    uv_timer_start(&w->lanes[i].timer, lane_next_cb, next_rand(&w->rnd) % 20,
                   0);
}

/* --cluster: "redis://127.0.0.1:p1,127.0.0.1:p2,..." from P.seeds. */
static void cluster_seeds_url(char *buf, size_t cap) {
  size_t n = (size_t)snprintf(buf, cap, "redis://");
  const char *p = P.seeds;
  while (*p && n < cap) {
    size_t len = strcspn(p, ",");
    n += (size_t)snprintf(buf + n, cap - n, "%s127.0.0.1:%.*s",
                          p == P.seeds ? "" : ",", (int)len, p);
    p += len + (p[len] == ',');
  }
}

/* --sentinel: "redis-sentinel://127.0.0.1:s1,...#rtmaster" from P.seeds
 * (the master name rts_sentinels_start gives by default). */
static void sentinel_seeds_url(char *buf, size_t cap) {
  char seeds[200];
  cluster_seeds_url(seeds, sizeof(seeds));
  snprintf(buf, cap, "redis-sentinel://%s#rtmaster",
           seeds + strlen("redis://"));
}

/* A worker process: started by the driver as "redturn_fault --worker slot
 * gen idfd port <the driver's options>", with SIGTERM blocked. It writes
 * its client id to idfd, then runs until SIGTERM. */
int worker_main(int slot, int gen, int idfd) {
  static worker w; /* one per process */
  char path[512];
  snprintf(path, sizeof(path), "%s/w%d-%d.log", P.dir, slot, gen);
  memset(&w, 0, sizeof(w));
  w.fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_TRUNC | O_CLOEXEC, 0644);
  if (w.fd < 0)
    return 4;
  w.slot = slot;
  w.gen = gen;
  w.rnd = (P.seed ^ ((uint64_t)getpid() << 20) ^ (uint64_t)real_us()) | 1;
  if (judge_store_open() != 0) {
    logf_fd(w.fd, "U %" PRId64 " %d", real_us(), RT_EINVAL);
    return 4;
  }
  if (uv_loop_init(&w.loop) != 0)
    return 4;
  for (int i = 0; i < P.lanes; i++) {
    w.lanes[i].w = &w;
    w.lanes[i].idx = i;
    uv_timer_init(&w.loop, &w.lanes[i].timer);
    w.lanes[i].timer.data = &w.lanes[i];
  }
  uv_signal_init(&w.loop, &w.sigterm);
  w.sigterm.data = &w;
  uv_signal_start(&w.sigterm, sigterm_cb, SIGTERM);
  /* Blocked since the fork (and kept over the exec): a SIGTERM that came
   * meanwhile is delivered to the handler now. */
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  sigprocmask(SIG_UNBLOCK, &term, NULL);
  uv_check_init(&w.loop, &w.check);
  w.check.data = &w;
  uv_check_start(&w.check, check_cb);
  uv_timer_init(&w.loop, &w.beat);
  w.beat.data = &w;
  w.beat_due_us = real_us() + BEAT_MS * 1000;
  uv_timer_start(&w.beat, beat_cb, BEAT_MS, 0);

  rt_options_t o;
  rt_options_init(&o);
  o.host = "127.0.0.1";
  o.port = P.port;
  o.prefix = PREFIX;
  o.default_ttl_ms = P.lease_ms;
  o.connect_timeout_ms = 2000;
  o.command_timeout_ms = P.cmd_timeout_ms;
  o.allow_eviction = P.evict;
  char url[256];
  if (P.cluster) {
    cluster_seeds_url(url, sizeof(url));
    o.url = url;
  } else if (P.sentinel) {
    sentinel_seeds_url(url, sizeof(url));
    o.url = url;
  }
  o.wait_replicas = P.wait_replicas;
  if (P.wait_replicas > 0) /* WAIT must end before the command deadline */
    o.wait_replicas_timeout_ms = P.cmd_timeout_ms / 2;
  if (P.tls && tls_worker_options(&o) != 0) {
    logf_fd(w.fd, "U %" PRId64 " %d", real_us(), RT_EINVAL);
    return 4;
  }
  int err = rt_client_open(&w.loop, &o, connect_cb, &w, &w.c);
  if (err != 0) {
    logf_fd(w.fd, "U %" PRId64 " %d", real_us(), err);
    return 3;
  }
  logf_fd(w.fd, "I %" PRId64 " %d %d %d %s", real_us(), slot, gen,
          (int)getpid(), rt_client_id(w.c));
  char line[40];
  int n = snprintf(line, sizeof(line), "%s\n", rt_client_id(w.c));
  (void)write_all(idfd, line, (size_t)n);
  close(idfd);

  uv_run(&w.loop, UV_RUN_DEFAULT);
  int rc = uv_loop_close(&w.loop);
  if (rc != 0) {
    logf_fd(w.fd, "Y %" PRId64 " uv_loop_close: %s", real_us(),
            uv_strerror(rc));
    if (w.exit_code == 0)
      w.exit_code = 5;
  }
  close(w.fd);
  return w.exit_code;
}
