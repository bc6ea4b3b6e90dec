/* The history checker of the fault-injection suite.
 *
 * Input: the directory of one run of redturn_fault: driver.log and one
 * w<slot>-<gen>.log per worker process (formats at the top of fault.c).
 *
 * ---- Time ------------------------------------------------------------------
 * Redis stamps every grant with its own clock: a grant's deadline_ms is the
 * Redis TIME at the grant plus the request's TTL, so the grant happened at
 * g = deadline_ms - ttl_ms by the Redis clock, exactly (the suite never
 * extends a lease). The workers stamp their events with CLOCK_REALTIME. On
 * one machine redis-server's TIME is gettimeofday(), the same clock as
 * CLOCK_REALTIME, so the two differ only by Redis truncating to whole
 * milliseconds; tol.clock_ms (default 5 ms) covers that and rounding. (Across
 * machines one would need the clock offset; the suite runs on one.) With
 * one clock, causality gives sound bounds, however long the network holds
 * the bytes in between:
 *   - a worker's "before rt_wait()" time E is <= the Redis time of the
 *     enqueue script, which is <= the time Q at which the worker saw the
 *     reply;
 *   - "before rt_signal()" S is <= the Redis time of the release script,
 *     which is <= the time R of the release callback;
 *   - a grant's observation time G is >= g.
 * Every rule below compares only a lower bound with an upper bound in the
 * direction that makes a reported violation certain (up to tol.clock_ms).
 *
 * ---- Lifetimes (epochs) -----------------------------------------------------
 * With --persist aof the server is stopped with SIGTERM (it fsyncs the AOF)
 * and comes back with every queue, lease and fence: the whole run is one
 * epoch. With --persist none the restart forgets everything: grants made
 * before the old server exited (S line; it keeps serving for up to a cron
 * tick after the SIGTERM of the B line) are epoch 0, later ones epoch 1.
 * Only mutual exclusion is checked per epoch (a server that forgot its data
 * cannot keep it); fences come from the server clock and must increase over
 * the whole run.
 *
 * ---- Disturbances -------------------------------------------------------------
 * A request is disturbed when, between its rt_wait and its outcome, its
 * client reconnected (rt_client_stats().reconnects differs), its process's
 * network had a fault (a Z span of its slot: delay, hold, partition, cut),
 * or a key of its resource was deleted (an X line: q, m, all, FLUSHALL).
 * The library documents what such a request may suffer: a waiter whose
 * client was not subscribed at its turn, or whose grant notice came after
 * its lease had ended by the client's conservative clock, or whose entry
 * vanished, is queued again at the tail. The FIFO rule and the witnesses of
 * the crash and handoff rules use undisturbed requests only.
 *
 * ---- Ghost holds ----------------------------------------------------------------
 * When the driver kills a holder it logs the holder record it read in Redis
 * just before (K ... holder res id fence deadline grant). If that request
 * has no outcome in its worker's log (killed before it saw the grant, e.g.
 * right after a handoff granted it), the record is a ghost hold: a Redis
 * grant at the record's grant time with its fence and deadline. Ghosts
 * count for fencing, for the crash rule and as grants made by a release
 * (handoff); not as earlier holds for exclusion (their end is unknown: a
 * release may have been on its way).
 *
 * ---- Rules -------------------------------------------------------------------
 * A hold is live from its grant g until the earliest of: S (the holder
 * called rt_signal), C (its client was closed, which releases it), and its
 * lease deadline (Redis clock). A holder that was SIGKILLed stays live until
 * its deadline, as it does in Redis.
 *
 * 1 exclusion:  per resource and epoch, sorted by (g, fence), no hold may be
 *               granted before an earlier hold's live end:
 *               g_B + clock < end_A  =>  violation. A hold that was live when
 *               its holder record was deleted (DEL of h alone, of every
 *               key, or FLUSHALL) does not count as an earlier hold: the
 *               library promises exclusion only where the holder's own
 *               record survives (DEL of q, m, or a multi-holder
 *               resource's D alone exempts nothing).
 * 2 fencing:    per resource over the whole run, across restarts with or
 *               without persistence and across key loss, in grant order
 *               fences strictly increase (an equal fence, or a later grant
 *               with a lower fence, is a violation). Fences need not be
 *               consecutive.
 * 3 FIFO:       if A's enqueue reply was seen (Q_A, or G_A when granted at
 *               once) before B called rt_wait (E_B), Redis queued A before B;
 *               if both were granted, undisturbed, in one epoch, A must have
 *               the lower fence. Covers a client's own waiters (two lanes
 *               of one worker on one resource) as well as different clients.
 * 4 deadline:   every wait ends (grant or error) by its deadline E + timeout
 *               + tol.deadline_ms, with a known RT_E* status; a wait without
 *               an outcome is a violation unless its process was killed.
 *               The library reports a deadline at most 100 ms after its
 *               timer fired even if Redis is unreachable, so network faults
 *               get no allowance. While the server itself stalls (CLIENT
 *               PAUSE; a restart, plus the 2 s reconnect backoff cap) the
 *               allowance grows by how far the stall reached past the
 *               deadline, and no more; such late reports are counted
 *               ("late in a stall").
 * 5 crash:      when a SIGKILLed process held a lock (no R line; or a
 *               ghost hold, granted by a handoff to a process killed at
 *               once), the next grant on the resource comes by its lease
 *               deadline + tol.crash_ms, provided a live waiter was waiting:
 *               enqueued before the deadline, still waiting at deadline +
 *               crash, undisturbed, its process alive. This is "the queue
 *               moves within the lease of the holder actually in front":
 *               a waiter that kept watching the lease of an earlier, longer
 *               hold would come too late. Skipped when a restart or a pause
 *               overlaps, when another process with a request on the
 *               resource was killed around the deadline (a grant may have
 *               gone to it unseen), or at any time before if the deadline
 *               is in the settle window of a move of the resource to
 *               another server (see kills_since), or had a network fault then (a
 *               grant may have gone to it while it could not hear it).
 * 6 handoff:    when a holder released in time (S and R before its
 *               deadline, status 0) while a live undisturbed waiter was
 *               queued (Q before S) and still waiting, some grant must be
 *               made by that release itself: g in [S - clock, R + clock].
 *               This is the dead-waiter rule: waiters of killed processes
 *               ahead of the live one must be skipped by the same script
 *               call, costing no time, and a pattern subscriber (the
 *               driver's PSUBSCRIBE observer) must not make them look
 *               alive. Skipped when a killed process had a request on the
 *               resource within tol.kill_ms before S (Redis may not have
 *               seen the death yet) or at any time before, if S is in the
 *               settle window of a move of the resource to another server
 *               (a dead waiter is then granted like one whose client is
 *               still reconnecting; see kills_since), when a process with a request on the
 *               resource had a network fault around [S, R], or when a wait
 *               on the resource was being abandoned (deadline/cancel)
 *               during [S, R]: such a waiter may be granted and release at
 *               once without a G line.
 * 7 no early eviction: a release answered RT_ELOST whose callback ran
 *               before the lease deadline (R < deadline - clock) means Redis
 *               evicted a live holder; exempt: holds whose record was
 *               deleted (rule 1) or lost with the server's data.
 * 8 clock:      a grant is never seen before Redis made it (g <= G + clock);
 *               if this fails the time assumptions above do not hold.
 * 9 driver:     the driver's own findings (V lines): a worker crashed, exited
 *               with an error (e.g. LeakSanitizer), hung in
 *               rt_client_close(), a key stayed that does not expire by
 *               itself, or a fault kind was never injected.
 * 10 survival:  waits survive every fault the driver injects: the only
 *               statuses a wait may end with are RT_EDEADLINE and, once its
 *               client is closed, RT_ECANCELED.
 * 11 lease:     the client's own view of a lease is conservative (it counts
 *               from when the request was sent): a grant is never reported
 *               after its lease deadline (G <= deadline + clock);
 *               rt_lock_lease_left_ms() at the grant and before rt_signal
 *               never reaches past the deadline; a holder still holding
 *               after its deadline finds its lock RT_LOCK_LOST.
 * 12 permits:   semaphores and read-write locks (--mixed; the E line's
 *               kind) in place of rule 1: per resource and epoch no hold
 *               is granted while the permits of the earlier holds live
 *               then, plus its own, exceed the count (a writer takes all,
 *               a reader one; rtc_permits_exceeded); and, as several hold
 *               at once, each fence is above those of the holds granted
 *               (by the end of their Redis millisecond + tol.clock_ms)
 *               before it asked (rtc_fence_order, reported as fencing).
 *               Rules 5 and 6 judge every kind. On a semaphore, a
 *               read-write lock or an election a waiter may also wait for
 *               other holders, so a grant is owed only when the front of
 *               the queue fits once the crashed or releasing holder's
 *               permits are back. The front is not logged: every request
 *               that may stand in front of the witness (asked before the
 *               witness's place was known, still waiting), the witness
 *               included, must fit beside every other hold that may take
 *               permits during the window: holds seen granted by its
 *               start, until their release was answered or their lease
 *               ended (one granted later in the window is the grant owed);
 *               requests without an outcome whose process was killed, from
 *               tol.kill_ms before the kill (an earlier grant would have
 *               been logged) until the process was dead to Redis plus
 *               their lease. For the crash rule the next grant is then the
 *               first one from the lease end on.
 */
#include "check.h"
#include "judge.h"
#include "rtcheck.h"

#include <dirent.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "redturn.h"

#define MAX_PRINT 25 /* violations printed per rule */
#define MAX_SLOTS 64

typedef struct req {
  char id[80];
  int wf; /* worker file index */
  int res;
  /* Its kind (the E line's optional last fields; absent: a mutex): 0
   * mutex, 1 semaphore, 2 shared, 3 exclusive (rt_kind_t), with the
   * semaphore's permits taken and count. */
  int kind;
  int64_t permits, of;
  int64_t e_us, q_us, g_us, f_us, s_us, r_us, l_us;
  int64_t timeout_ms, ttl_ms;
  uint64_t rc_e, rc_end;
  int granted, failed, signaled, released, overstay;
  int ghost;  /* a grant known from the driver's holder record only */
  int lossy;  /* live when its holder record (h) was deleted */
  int dist;   /* disturbed (see the top of this file) */
  int s_ext;  /* the S line has the lost and left fields */
  int s_lost; /* the lock was RT_LOCK_LOST before rt_signal */
  int fstatus, rstatus;
  uint64_t fence;
  int64_t deadline_ms, lease_ms, gms;
  int64_t g_left, s_left; /* rt_lock_lease_left_ms(); -1: not logged */
  int multi; /* a lock of multi-lock number multi of its file (M line) */
  long pos;
  int epoch;
  /* Lines in the worker's file; g_line < 0: -(line in driver.log). */
  int e_line, g_line, f_line, s_line, r_line;
} req;

typedef struct wfile {
  char name[64];
  int slot, gen, pid;
  int64_t kill_us, close_us, exit_us, start_us;
  int connect_failed;
  uint64_t max_rc;
  size_t first, n; /* its requests: reqs[first .. first + n) */
} wfile;

typedef struct span {
  int64_t from_us, to_us;
  int64_t down_us; /* restarts: when the old server had exited (0: unknown) */
} span;

/* A network fault of one worker slot's connections. */
typedef struct nspan {
  int slot;
  int kind;               /* 0 delay, 1 hold, 2 partition, 3 cut */
  int64_t from_us, to_us; /* to: end + what may still be in flight */
  int64_t delay_ms;
  int open;
} nspan;

/* A key loss: res -1 for every resource (FLUSHALL). */
typedef struct lspan {
  int res;
  int all; /* the holder record went too (DEL of every key, FLUSHALL) */
  int64_t from_us, to_us;
  int line;
} lspan;

/* A resource moving to another server (a reshard or failover of its slot,
 * a crash of its master; a restart with persistence): res -1 for all. */
typedef struct mspan {
  int res;
  int64_t from_us, to_us;
} mspan;

/* A multi-lock of a worker file (A, Z, T and z lines). */
typedef struct mset {
  int wf, mid, n, res[2];
  int64_t a_us, z_us; /* rt_wait_all called; its callback (0: none) */
  int zstatus, done;
  int a_line, z_line;
} mset;

/* An observer's report (W line). */
typedef struct oev {
  int wf, res, status, line;
  char id[80]; /* "-": nobody */
  uint64_t fence;
  int64_t t_us, deadline_ms;
} oev;

typedef struct hist {
  mset *msets;
  size_t nmsets, capmsets;
  oev *oevs;
  size_t noevs, capoevs;
  req *reqs;
  size_t nreqs, capreqs;
  wfile *files;
  size_t nfiles, capfiles;
  span restarts[8];
  int nrestarts;
  span pauses[256];
  int npauses;
  nspan *nets;
  size_t nnets, capnets;
  lspan *losses;
  size_t nlosses, caplosses;
  mspan moves[16];
  int nmoves;
  int persist;
  int evict; /* the eviction run: fencing and deadline only */
  long driver_v, conn_kills, kills, kills_holder, kills_waiter;
  long net_kind[4], loss_kind[6], observer;
  long lost_seen;
  long printed[16];
} hist;

static void *grow(void *p, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap)
    return p;
  size_t n = *cap ? *cap * 2 : 256;
  while (n < need)
    n *= 2;
  void *q = realloc(p, n * elem);
  if (q == NULL) {
    fprintf(stderr, "check: out of memory\n");
    exit(2);
  }
  *cap = n;
  return q;
}

void rtf_tol_default(rtf_tol *tol, int slow) {
  tol->clock_ms = 5;
  tol->deadline_ms = slow ? 600 : 300;
  tol->crash_ms = slow ? 1000 : 500;
  tol->kill_ms = slow ? 300 : 150;
}

/* ---- status codes ----------------------------------------------------------- */

static int known_status(int st) {
  if (st == 0)
    return 1;
#define RTF_KNOWN(name, value, msg)                                            \
  if (st == (value))                                                           \
    return 1;
  RT_ERRNO_MAP(RTF_KNOWN)
#undef RTF_KNOWN
  return 0;
}

/* ---- parsing ------------------------------------------------------------- */

static req *find_req(hist *h, wfile *f, const char *id) {
  for (size_t i = f->n; i > 0; i--) {
    req *r = &h->reqs[f->first + i - 1];
    if (strcmp(r->id, id) == 0)
      return r;
  }
  return NULL;
}

/* "E ...": a new request of file fi. */
static void read_enqueue(hist *h, size_t fi, const char *line, int ln) {
  h->reqs = grow(h->reqs, &h->capreqs, h->nreqs + 1, sizeof(req));
  req *r = &h->reqs[h->nreqs];
  memset(r, 0, sizeof(*r));
  int lane;
  uint64_t rc;
  int n = sscanf(line,
                 "E %" SCNd64 " %d %d %79s %" SCNd64 " %" SCNd64 " %" SCNu64
                 " %d %" SCNd64 " %" SCNd64,
                 &r->e_us, &lane, &r->res, r->id, &r->timeout_ms, &r->ttl_ms,
                 &rc, &r->kind, &r->permits, &r->of);
  if (n != 7 && n != 10)
    return;
  if (n == 7)
    r->kind = 0;
  r->rc_e = rc;
  r->rc_end = rc;
  r->wf = (int)fi;
  r->e_line = ln;
  r->g_left = r->s_left = -1;
  h->nreqs++;
  h->files[fi].n++;
}

/* "G ...": r was granted. */
static void read_grant(req *r, const char *line, int64_t t, int ln) {
  uint64_t rc = 0;
  int64_t left = -1;
  sscanf(line,
         "G %*d %*s %" SCNu64 " %" SCNd64 " %" SCNd64 " %ld %" SCNu64
         " %" SCNd64,
         &r->fence, &r->deadline_ms, &r->lease_ms, &r->pos, &rc, &left);
  r->granted = 1;
  r->g_us = t;
  r->rc_end = rc;
  r->gms = r->deadline_ms - r->ttl_ms;
  r->g_line = ln;
  r->g_left = left;
}

/* "Q", "G", "F", "S", "R" or "L": an event of a request of file f. */
static void read_event(hist *h, wfile *f, const char *line, int ln, FILE *out) {
  int64_t t = 0;
  char id[96];
  char kind = line[0];
  if (sscanf(line + 2, "%" SCNd64 " %95s", &t, id) != 2)
    return;
  req *r = find_req(h, f, id);
  if (r == NULL) {
    fprintf(out, "check: %s:%d: event for an unknown request %s\n", f->name, ln,
            id);
    return;
  }
  if (kind == 'Q') {
    r->q_us = t;
    sscanf(line, "Q %*d %*s %ld", &r->pos);
  } else if (kind == 'G') {
    read_grant(r, line, t, ln);
  } else if (kind == 'F') {
    uint64_t rc = 0;
    sscanf(line, "F %*d %*s %d %" SCNu64, &r->fstatus, &rc);
    r->failed = 1;
    r->f_us = t;
    r->rc_end = rc;
    r->f_line = ln;
  } else if (kind == 'S') {
    int64_t left = -1;
    int n = sscanf(line, "S %*d %*s %d %d %" SCNd64, &r->overstay, &r->s_lost,
                   &left);
    r->s_ext = n == 3;
    r->s_left = n == 3 ? left : -1;
    r->signaled = 1;
    r->s_us = t;
    r->s_line = ln;
  } else if (kind == 'M') {
    sscanf(line, "M %*d %*s %d", &r->multi);
  } else if (kind == 'D') {
    sscanf(line, "D %*d %*s %" SCNd64, &r->deadline_ms);
  } else if (kind == 'L') {
    if (r->l_us == 0)
      r->l_us = t;
    h->lost_seen++;
  } else {
    sscanf(line, "R %*d %*s %d", &r->rstatus);
    r->released = 1;
    r->r_us = t;
    r->r_line = ln;
  }
}

/* "I", "U", "N", "C" or "X": a line about the worker process itself. */
static void read_process(wfile *f, const char *line) {
  uint64_t rc = 0;
  switch (line[0]) {
  case 'I':
    sscanf(line, "I %" SCNd64 " %*d %*d %d", &f->start_us, &f->pid);
    break;
  case 'U':
    f->connect_failed = 1;
    break;
  case 'N':
    if (sscanf(line, "N %*d %" SCNu64, &rc) == 1 && rc > f->max_rc)
      f->max_rc = rc;
    break;
  case 'C':
    sscanf(line, "C %" SCNd64, &f->close_us);
    break;
  case 'X':
    sscanf(line, "X %" SCNd64 " %*u %" SCNu64, &f->exit_us, &rc);
    if (rc > f->max_rc)
      f->max_rc = rc;
    break;
  default:
    break;
  }
}

static mset *find_mset(hist *h, size_t fi, int mid) {
  for (size_t i = h->nmsets; i > 0; i--) {
    mset *m = &h->msets[i - 1];
    if ((size_t)m->wf == fi && m->mid == mid)
      return m;
  }
  return NULL;
}

/* "A t mid timeout ttl n res...", "Z t mid status", "z t mid status". */
static void read_multi(hist *h, size_t fi, const char *line, int ln) {
  int64_t t = 0;
  int mid = 0, st = 0;
  if (line[0] == 'A') {
    h->msets = grow(h->msets, &h->capmsets, h->nmsets + 1, sizeof(mset));
    mset *m = &h->msets[h->nmsets];
    memset(m, 0, sizeof(*m));
    if (sscanf(line, "A %" SCNd64 " %d %*d %*d %d %d %d", &m->a_us, &m->mid,
               &m->n, &m->res[0], &m->res[1]) != 5)
      return;
    m->wf = (int)fi;
    m->a_line = ln;
    h->nmsets++;
    return;
  }
  if (sscanf(line + 2, "%" SCNd64 " %d %d", &t, &mid, &st) != 3)
    return;
  mset *m = find_mset(h, fi, mid);
  if (m == NULL || line[0] != 'Z')
    return;
  m->z_us = t;
  m->zstatus = st;
  m->done = 1;
  m->z_line = ln;
}

/* "W t res status id fence deadline_ms". */
static void read_observe(hist *h, size_t fi, const char *line, int ln) {
  h->oevs = grow(h->oevs, &h->capoevs, h->noevs + 1, sizeof(oev));
  oev *o = &h->oevs[h->noevs];
  memset(o, 0, sizeof(*o));
  if (sscanf(line, "W %" SCNd64 " %d %d %79s %" SCNu64 " %" SCNd64, &o->t_us,
             &o->res, &o->status, o->id, &o->fence, &o->deadline_ms) != 6)
    return;
  o->wf = (int)fi;
  o->line = ln;
  h->noevs++;
}

static int read_worker(hist *h, const char *dir, const char *name, FILE *out) {
  char path[1024];
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  FILE *fp = fopen(path, "r");
  if (fp == NULL)
    return -1;
  h->files = grow(h->files, &h->capfiles, h->nfiles + 1, sizeof(wfile));
  size_t fi = h->nfiles++;
  wfile *f = &h->files[fi];
  memset(f, 0, sizeof(*f));
  snprintf(f->name, sizeof(f->name), "%s", name);
  if (sscanf(name, "w%d-%d.log", &f->slot, &f->gen) != 2)
    f->slot = f->gen = -1;
  f->first = h->nreqs;
  char line[600];
  int ln = 0;
  while (fgets(line, sizeof(line), fp) != NULL) {
    ln++;
    if (line[0] == 'E')
      read_enqueue(h, fi, line, ln);
    else if (strchr("QGFSRLMD", line[0]) != NULL && line[0] != '\0')
      read_event(h, &h->files[fi], line, ln, out);
    else if (strchr("AZz", line[0]) != NULL && line[0] != '\0')
      read_multi(h, fi, line, ln);
    else if (line[0] == 'W')
      read_observe(h, fi, line, ln);
    else
      read_process(&h->files[fi], line);
  }
  fclose(fp);
  return 0;
}

static wfile *file_of(hist *h, int slot, int gen) {
  for (size_t i = 0; i < h->nfiles; i++)
    if (h->files[i].slot == slot && h->files[i].gen == gen)
      return &h->files[i];
  return NULL;
}

/* K ... holder res id fence deadline grant: a ghost hold if the worker
 * never reported an outcome for that request. */
static void ghost_from_kill(hist *h, wfile *f, const char *rest, int64_t t,
                            int line) {
  int res;
  char id[96];
  uint64_t fence;
  int64_t deadline, grant;
  if (f == NULL || sscanf(rest, "%d %95s %" SCNu64 " %" SCNd64 " %" SCNd64,
                          &res, id, &fence, &deadline, &grant) != 5)
    return;
  req *r = find_req(h, f, id);
  if (r == NULL || r->res != res || r->granted || r->failed)
    return;
  r->granted = 1;
  r->ghost = 1;
  r->fence = fence;
  r->deadline_ms = deadline;
  r->gms = grant;
  r->lease_ms = deadline - grant;
  r->g_us = t; /* the driver saw it then */
  r->g_line = -line;
}

/* "K ...": the driver killed a worker (a holder, a waiter, or another). */
static void read_kill(hist *h, const char *line, int ln) {
  int64_t t = 0;
  int slot, gen, off = 0;
  char why[32];
  if (sscanf(line, "K %" SCNd64 " %d %d %*d %31s %n", &t, &slot, &gen, why,
             &off) < 4)
    return;
  wfile *f = file_of(h, slot, gen);
  if (f != NULL && (f->kill_us == 0 || t < f->kill_us))
    f->kill_us = t;
  h->kills++;
  if (strcmp(why, "holder") == 0) {
    h->kills_holder++;
    if (off > 0)
      ghost_from_kill(h, f, line + off, t, ln);
  } else if (strcmp(why, "waiter") == 0) {
    h->kills_waiter++;
  }
}

/* "Z ...": a network fault on a worker's proxy begins (open_net: the open
 * span of each slot). */
static void read_net(hist *h, const char *line, int *open_net) {
  int64_t t = 0, a = 0, b = 0;
  int slot, gen;
  char kind[32];
  int n = sscanf(line, "Z %" SCNd64 " %d %d %31s %" SCNd64 " %" SCNd64, &t,
                 &slot, &gen, kind, &a, &b);
  if (n < 4 || slot < 0 || slot >= MAX_SLOTS)
    return;
  h->nets = grow(h->nets, &h->capnets, h->nnets + 1, sizeof(nspan));
  nspan *s = &h->nets[h->nnets];
  memset(s, 0, sizeof(*s));
  s->slot = slot;
  s->from_us = t;
  if (strcmp(kind, "delay") == 0) {
    s->kind = 0;
    s->delay_ms = a;
    s->to_us = t + (b + a) * 1000; /* until z says otherwise */
  } else if (strcmp(kind, "hold") == 0) {
    s->kind = 1;
    s->to_us = t + a * 1000;
  } else if (strcmp(kind, "partition") == 0) {
    s->kind = 2;
    s->to_us = t + a * 1000;
  } else {
    s->kind = 3;
    s->to_us = t;
  }
  h->net_kind[s->kind]++;
  if (s->kind != 3) {
    s->open = 1;
    open_net[slot] = (int)h->nnets;
  }
  h->nnets++;
}

/* "z ...": the end of a network fault. What was held is delivered now (or
 * dropped); delayed bytes keep arriving for one more delay. */
static void read_net_end(hist *h, const char *line, int *open_net) {
  int64_t t = 0;
  int slot;
  if (sscanf(line, "z %" SCNd64 " %d", &t, &slot) == 2 && slot >= 0 &&
      slot < MAX_SLOTS && open_net[slot] >= 0) {
    nspan *s = &h->nets[open_net[slot]];
    s->to_us = t + (s->delay_ms + 50) * 1000;
    s->open = 0;
    open_net[slot] = -1;
  }
}

/* "X ...": keys of a resource (or all keys) were lost. */
static void read_loss(hist *h, const char *line, int ln) {
  int64_t t = 0, t1 = 0;
  int res;
  char kind[32];
  if (sscanf(line, "X %" SCNd64 " %" SCNd64 " %d %31s", &t, &t1, &res, kind) !=
      4)
    return;
  h->losses = grow(h->losses, &h->caplosses, h->nlosses + 1, sizeof(lspan));
  lspan *l = &h->losses[h->nlosses++];
  l->res = res;
  l->from_us = t;
  l->to_us = t1;
  l->line = ln;
  /* Losses of the holder record (h, every key) free its holders, as the
   * docs say; q, m and a multi-holder resource's D free nothing. */
  l->all = strcmp(kind, "all") == 0 || strcmp(kind, "flushall") == 0 ||
           strcmp(kind, "h") == 0;
  h->loss_kind[strcmp(kind, "q") == 0     ? 0
               : strcmp(kind, "m") == 0   ? 1
               : strcmp(kind, "all") == 0 ? 2
               : strcmp(kind, "h") == 0   ? 4
               : strcmp(kind, "d") == 0   ? 5
                                          : 3]++;
}

/* "Y t cluster-<kind> begin ... (r<res>, ...)" opens a move (so does
 * "Y t cluster-crash slot ..."), the next "Y t cluster-<kind> end ..."
 * closes it. A reshard moves res's slot alone; a failover or a crash moves
 * every slot of that master, maybe other resources' too: res -1. */
static void read_cluster_event(hist *h, const char *line) {
  int64_t t;
  int res;
  char kind[32], word[16];
  if (sscanf(line, "Y %" SCNd64 " cluster-%31s %15s", &t, kind, word) != 3)
    return;
  const char *r = strstr(line, "(r");
  if (strncmp(word, "end", 3) == 0) {
    if (h->nmoves > 0 && h->moves[h->nmoves - 1].to_us == INT64_MAX)
      h->moves[h->nmoves - 1].to_us = t;
  } else if (r != NULL && sscanf(r, "(r%d", &res) == 1 && h->nmoves < 16) {
    h->moves[h->nmoves].res = strcmp(kind, "reshard") == 0 ? res : -1;
    h->moves[h->nmoves].from_us = t;
    h->moves[h->nmoves].to_us = INT64_MAX;
    h->nmoves++;
  }
}

/* "A", "B", "S", "H": a pause of the server, or its restart. */
static void read_server_event(hist *h, const char *line) {
  int64_t t = 0;
  int ms;
  if (line[0] == 'A') {
    if (sscanf(line, "A %" SCNd64 " %d", &t, &ms) == 2 && h->npauses < 256) {
      h->pauses[h->npauses].from_us = t;
      h->pauses[h->npauses].to_us = t + (int64_t)ms * 1000;
      h->npauses++;
    }
  } else if (line[0] == 'B') {
    if (sscanf(line, "B %" SCNd64, &t) == 1 && h->nrestarts < 8) {
      h->restarts[h->nrestarts].from_us = t;
      h->restarts[h->nrestarts].to_us = INT64_MAX;
      h->restarts[h->nrestarts].down_us = 0;
      h->nrestarts++;
    }
  } else if (line[0] == 'S') {
    if (sscanf(line, "S %" SCNd64, &t) == 1 && h->nrestarts > 0)
      h->restarts[h->nrestarts - 1].down_us = t;
  } else if (sscanf(line, "H %" SCNd64, &t) == 1 && h->nrestarts > 0) {
    h->restarts[h->nrestarts - 1].to_us = t;
  }
}

static int read_driver(hist *h, const char *dir, FILE *out) {
  char path[1024];
  snprintf(path, sizeof(path), "%s/driver.log", dir);
  FILE *fp = fopen(path, "r");
  if (fp == NULL)
    return -1;
  char line[600];
  int ln = 0;
  int open_net[MAX_SLOTS];
  for (int i = 0; i < MAX_SLOTS; i++)
    open_net[i] = -1;
  while (fgets(line, sizeof(line), fp) != NULL) {
    ln++;
    switch (line[0]) {
    case 'P':
      h->persist = strstr(line, "persist=none") == NULL;
      h->evict = strstr(line, " evict=1") != NULL;
      break;
    case 'K':
      read_kill(h, line, ln);
      break;
    case 'L':
      h->conn_kills++;
      break;
    case 'Z':
      read_net(h, line, open_net);
      break;
    case 'z':
      read_net_end(h, line, open_net);
      break;
    case 'X':
      read_loss(h, line, ln);
      break;
    case 'J':
      h->observer++;
      break;
    case 'Y':
      read_cluster_event(h, line);
      break;
    case 'A':
    case 'B':
    case 'S':
    case 'H':
      read_server_event(h, line);
      break;
    case 'V':
      h->driver_v++;
      fprintf(out, "VIOLATION [driver] %s", line + 2);
      break;
    default:
      break;
    }
  }
  fclose(fp);
  return 0;
}

/* ---- helpers ------------------------------------------------------------- */

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static int overlaps(int64_t a0, int64_t a1, int64_t b0, int64_t b1) {
  return a0 <= b1 && b0 <= a1;
}

static int near_fault(const hist *h, int64_t from_us, int64_t to_us) {
  for (int i = 0; i < h->nrestarts; i++)
    if (overlaps(from_us, to_us, h->restarts[i].from_us, h->restarts[i].to_us))
      return 1;
  for (int i = 0; i < h->npauses; i++)
    if (overlaps(from_us, to_us, h->pauses[i].from_us, h->pauses[i].to_us))
      return 1;
  return 0;
}

/* The client's reconnect backoff is capped at 2 s (src/conn.c): after a
 * restart a client may need that long to notice the server is back. */
#define RECONNECT_CAP_US 2000000

/* The latest end of a stall (pause, or restart plus the reconnect backoff
 * cap) overlapping [from, to], or 0. */
static int64_t stall_end_after(const hist *h, int64_t from_us, int64_t to_us) {
  int64_t end = 0;
  for (int i = 0; i < h->nrestarts; i++) {
    int64_t e = h->restarts[i].to_us == INT64_MAX
                    ? INT64_MAX
                    : h->restarts[i].to_us + RECONNECT_CAP_US;
    if (overlaps(from_us, to_us, h->restarts[i].from_us, e) && e > end)
      end = e;
  }
  for (int i = 0; i < h->npauses; i++)
    if (overlaps(from_us, to_us, h->pauses[i].from_us, h->pauses[i].to_us) &&
        h->pauses[i].to_us > end)
      end = h->pauses[i].to_us;
  return end;
}

/* After a resource moves to another server, a notice reaching nobody is
 * no proof of death for 5 s (lua/lib/prelude.lua, SETTLE_MS) from when
 * the first client came back there (within the reconnect backoff, 2.5 s
 * with jitter): a waiter whose process died is then granted like one still
 * reconnecting, and costs its lease. That waiter may have died at any time
 * before (a dead waiter's entry stays queued until it reaches the front).
 * So kills from the start of the run may explain a late or missing grant
 * at t if t is in the settle window of a move of res: returns 0 then, else
 * from_us. */
#define SETTLE_US 5000000
static int64_t kills_since(const hist *h, int res, int64_t t_us,
                           int64_t from_us) {
  int64_t window = RECONNECT_CAP_US * 5 / 4 + SETTLE_US;
  for (int i = 0; i < h->nmoves; i++) {
    const mspan *m = &h->moves[i];
    if ((m->res == res || m->res < 0) && t_us >= m->from_us &&
        (m->to_us == INT64_MAX || t_us <= m->to_us + window))
      return 0;
  }
  for (int i = 0; h->persist && i < h->nrestarts; i++) {
    const span *r = &h->restarts[i];
    if (t_us >= r->from_us &&
        (r->to_us == INT64_MAX || t_us <= r->to_us + window))
      return 0;
  }
  return from_us;
}

static int epoch_of_ms(const hist *h, int64_t ms) {
  if (h->persist)
    return 0;
  /* The old server serves until it exits (S line), after the SIGTERM (B). */
  int e = 0;
  for (int i = 0; i < h->nrestarts; i++) {
    int64_t down = h->restarts[i].down_us ? h->restarts[i].down_us
                                          : h->restarts[i].from_us;
    if (ms * 1000 >= down)
      e = i + 1;
  }
  return e;
}

/* End of a hold's life in us (see rule 1), and why. */
static int64_t live_end(const hist *h, const req *r, const char **why) {
  int64_t end = r->deadline_ms * 1000;
  *why = "lease deadline";
  if (r->signaled && r->s_us < end) {
    end = r->s_us;
    *why = "rt_signal";
  }
  const wfile *f = &h->files[r->wf];
  if (f->close_us && f->close_us >= r->e_us && f->close_us < end) {
    end = f->close_us;
    *why = "rt_client_close";
  }
  return end;
}

/* When the request began to be abandoned: its deadline, or its client's
 * close, whichever came first. */
static int64_t abandon_start(const hist *h, const req *r) {
  int64_t t = r->e_us + r->timeout_ms * 1000;
  const wfile *f = &h->files[r->wf];
  if (f->close_us && f->close_us >= r->e_us && f->close_us < t)
    t = f->close_us;
  return t;
}

static int64_t outcome_us(const req *r) {
  if (r->granted)
    return r->g_us;
  if (r->failed)
    return r->f_us;
  return 0;
}

/* Did slot's network have a fault during [from, to]? */
static int net_hit(const hist *h, int slot, int64_t from_us, int64_t to_us) {
  for (size_t i = 0; i < h->nnets; i++)
    if (h->nets[i].slot == slot &&
        overlaps(from_us, to_us, h->nets[i].from_us, h->nets[i].to_us))
      return 1;
  return 0;
}

/* Did a key of res go during [from, to]? (all: only losses of every key) */
static int loss_hit(const hist *h, int res, int64_t from_us, int64_t to_us,
                    int all) {
  for (size_t i = 0; i < h->nlosses; i++) {
    const lspan *l = &h->losses[i];
    if ((l->res == res || l->res < 0) && (!all || l->all) &&
        overlaps(from_us, to_us, l->from_us, l->to_us))
      return 1;
  }
  return 0;
}

static void mark_disturbed(hist *h, const rtf_tol *tol) {
  int64_t clk = tol->clock_ms * 1000;
  for (size_t i = 0; i < h->nreqs; i++) {
    req *r = &h->reqs[i];
    int64_t o = outcome_us(r);
    /* A multi-lock's lock: its E time is the set's, not its enqueue's. */
    r->dist = r->ghost || r->multi || o == 0 || r->rc_e != r->rc_end ||
              net_hit(h, h->files[r->wf].slot, r->e_us, o) ||
              loss_hit(h, r->res, r->e_us - clk, o + clk, 0);
    if (r->granted) {
      /* Live in Redis until the release arrived there, at the latest when
       * its callback ran (the network may have held it after S). */
      int64_t end = r->deadline_ms * 1000;
      if (r->released && r->r_us < end)
        end = r->r_us;
      r->lossy = loss_hit(h, r->res, r->gms * 1000 - clk, end + clk, 1);
    }
  }
}

static void where(const hist *h, const req *r, int line, char *buf,
                  size_t cap) {
  if (line < 0)
    snprintf(buf, cap, "driver.log:%d", -line);
  else
    snprintf(buf, cap, "%s:%d", h->files[r->wf].name, line);
}

static int report(hist *h, FILE *out, int rule, rtf_counts *c) {
  c->violations++;
  return h->printed[rule]++ < MAX_PRINT && out != NULL;
}

/* ---- rules ------------------------------------------------------------------- */

static const hist *sort_h;

static int cmp_grant(const void *a, const void *b) {
  const req *x = &sort_h->reqs[*(const size_t *)a];
  const req *y = &sort_h->reqs[*(const size_t *)b];
  if (x->res != y->res)
    return x->res < y->res ? -1 : 1;
  if (x->epoch != y->epoch)
    return x->epoch < y->epoch ? -1 : 1;
  if (x->gms != y->gms)
    return x->gms < y->gms ? -1 : 1;
  if (x->fence != y->fence)
    return x->fence < y->fence ? -1 : 1;
  return 0;
}

/* Rules 1 to 3 through the shared checker (tools/rtcheck.h), over the
 * grants g[0..ng) (indexes into h->reqs) as its grants: hold [g, live end)
 * in us (ghosts and lossy holds, which do not count as earlier holds, with
 * no end), enqueue within [E, Q] (Q: G when granted at once). by_epoch
 * compares grants of one resource and epoch, else of one resource. */
typedef struct rule_ctx {
  hist *h;
  const size_t *g;
  FILE *out;
  rtf_counts *c;
} rule_ctx;

/* A hold's permits as rtcheck counts them: a mutex 0 of 0, a reader 1 and
 * a writer all of RTC_RW_ALL, a semaphore request its permits of its
 * count. */
static void set_permits(rtc_grant *cg, const req *r) {
  cg->permits = cg->capacity = 0;
  if (r->kind == RT_KIND_SEMAPHORE) {
    cg->permits = r->permits > 0 ? r->permits : r->of;
    cg->capacity = r->of;
  } else if (r->kind == RT_KIND_SHARED || r->kind == RT_KIND_EXCLUSIVE) {
    cg->permits = r->kind == RT_KIND_SHARED ? 1 : RTC_RW_ALL;
    cg->capacity = RTC_RW_ALL;
  }
}

static rtc_grant *as_grants(const hist *h, const size_t *g, size_t ng,
                            int by_epoch) {
  rtc_grant *cg = malloc((ng + 1) * sizeof(*cg));
  if (cg == NULL) {
    fprintf(stderr, "check: out of memory\n");
    exit(2);
  }
  for (size_t k = 0; k < ng; k++) {
    const req *r = &h->reqs[g[k]];
    const char *why;
    cg[k].res = (int64_t)r->res * 16 + (by_epoch ? r->epoch : 0);
    cg[k].fence = r->fence;
    cg[k].start = r->gms * 1000;
    cg[k].end = r->ghost || r->lossy ? 0 : live_end(h, r, &why);
    cg[k].asked = r->e_us;
    cg[k].queued = r->q_us ? r->q_us : r->g_us;
    set_permits(&cg[k], r);
  }
  return cg;
}

static void on_overlap(void *arg, size_t earlier, size_t later) {
  rule_ctx *x = arg;
  const req *a = &x->h->reqs[x->g[earlier]], *b = &x->h->reqs[x->g[later]];
  char wa[96], wb[96];
  const char *why;
  int64_t end = live_end(x->h, a, &why);
  if (!report(x->h, x->out, 1, x->c))
    return;
  where(x->h, a, a->g_line, wa, sizeof(wa));
  where(x->h, b, b->g_line, wb, sizeof(wb));
  fprintf(x->out,
          "VIOLATION [exclusion] r%d: %s (%s) granted at %" PRId64
          " fence %" PRIu64 " while %s (%s) granted at %" PRId64
          " fence %" PRIu64 " was live until %" PRId64 " (%s): overlap %" PRId64
          " ms\n",
          b->res, b->id, wb, b->gms, b->fence, a->id, wa, a->gms, a->fence,
          end / 1000, why, end / 1000 - b->gms);
}

static void on_permits(void *arg, size_t earlier, size_t later) {
  rule_ctx *x = arg;
  const req *a = &x->h->reqs[x->g[earlier]], *b = &x->h->reqs[x->g[later]];
  char wa[96], wb[96];
  const char *why;
  int64_t end = live_end(x->h, a, &why);
  if (!report(x->h, x->out, 1, x->c))
    return;
  where(x->h, a, a->g_line, wa, sizeof(wa));
  where(x->h, b, b->g_line, wb, sizeof(wb));
  fprintf(x->out,
          "VIOLATION [permits] r%d: %s (%s, kind %d, %" PRId64 " of %" PRId64
          ") granted at %" PRId64 " fence %" PRIu64
          " would exceed the permits in use with %s (%s, kind %d) granted at "
          "%" PRId64 " fence %" PRIu64 ", live until %" PRId64 " (%s)\n",
          b->res, b->id, wb, b->kind, b->permits, b->of, b->gms, b->fence,
          a->id, wa, a->kind, a->gms, a->fence, end / 1000, why);
}

static void on_fence(void *arg, size_t earlier, size_t later) {
  rule_ctx *x = arg;
  const req *a = &x->h->reqs[x->g[earlier]], *b = &x->h->reqs[x->g[later]];
  char wa[96], wb[96];
  if (!report(x->h, x->out, 2, x->c))
    return;
  where(x->h, a, a->g_line, wa, sizeof(wa));
  where(x->h, b, b->g_line, wb, sizeof(wb));
  fprintf(x->out,
          "VIOLATION [fencing] r%d: %s (%s) granted at %" PRId64
          " has fence %" PRIu64 ", not above the fence %" PRIu64
          " of %s (%s) granted at %" PRId64 "%s\n",
          b->res, b->id, wb, b->gms, b->fence, a->fence, a->id, wa, a->gms,
          a->epoch != b->epoch ? " (across a restart without persistence)"
                               : "");
}

/* later was queued before earlier asked, yet granted after it. */
static void on_fifo(void *arg, size_t earlier, size_t later) {
  rule_ctx *x = arg;
  const req *b = &x->h->reqs[x->g[earlier]], *a = &x->h->reqs[x->g[later]];
  char wa[96], wb[96];
  if (!report(x->h, x->out, 3, x->c))
    return;
  where(x->h, a, a->q_us ? a->e_line : a->g_line, wa, sizeof(wa));
  where(x->h, b, b->e_line, wb, sizeof(wb));
  fprintf(x->out,
          "VIOLATION [fifo] r%d: %s (%s) was queued (reply seen at %" PRId64
          " us) before %s (%s) called rt_wait (%" PRId64
          " us), yet got fence %" PRIu64 " > %" PRIu64 "\n",
          b->res, a->id, wa, a->q_us ? a->q_us : a->g_us, b->id, wb, b->e_us,
          a->fence, b->fence);
}

/* Rule 1 per resource and epoch; rule 2 per resource over the whole run. */
static void rule_exclusion_fencing(hist *h, const size_t *g, size_t ng,
                                   const rtf_tol *tol, FILE *out,
                                   rtf_counts *c) {
  rule_ctx x = {h, g, out, c};
  rtc_grant *cg = as_grants(h, g, ng, 0);
  rtc_fence_regressions(cg, ng, on_fence, &x);
  free(cg);
  if (h->evict)
    return;
  /* Mutexes: no overlap. Semaphores and read-write locks: at most their
   * permits in use at any Redis instant, and each fence above those of
   * the holds granted before it asked (several hold at once). */
  size_t *gm = malloc((ng + 1) * sizeof(*gm));
  size_t *gk = malloc((ng + 1) * sizeof(*gk));
  if (gm == NULL || gk == NULL) {
    fprintf(stderr, "check: out of memory\n");
    exit(2);
  }
  size_t nm = 0, nk = 0;
  for (size_t k = 0; k < ng; k++) {
    if (h->reqs[g[k]].kind == RT_KIND_MUTEX)
      gm[nm++] = g[k];
    else
      gk[nk++] = g[k];
  }
  rule_ctx xm = {h, gm, out, c};
  cg = as_grants(h, gm, nm, 1);
  rtc_overlaps(cg, nm, tol->clock_ms * 1000, on_overlap, &xm);
  free(cg);
  rule_ctx xk = {h, gk, out, c};
  cg = as_grants(h, gk, nk, 1);
  rtc_permits_exceeded(cg, nk, tol->clock_ms * 1000, on_permits, &xk);
  /* A grant is certainly before an ask only by the end of its Redis
   * millisecond plus the clock tolerance. */
  for (size_t k = 0; k < nk; k++)
    cg[k].start += (1 + tol->clock_ms) * 1000;
  rtc_fence_order(cg, nk, on_fence, &xk);
  free(cg);
  free(gm);
  free(gk);
}

/* Rule 3 over undisturbed grants, per resource and epoch. */
static void rule_fifo(hist *h, const size_t *u, size_t nu, FILE *out,
                      rtf_counts *c) {
  rule_ctx x = {h, u, out, c};
  rtc_grant *cg = as_grants(h, u, nu, 1);
  rtc_fifo fifo;
  rtc_fifo_check(cg, nu, 1, 1000, &fifo, on_fifo, &x);
  c->fifo_pairs += (long)nu;
  free(cg);
}

/* Rule 4 (and 10) for a request that failed: a known status, and one a
 * wait may end with. */
static void deadline_failure(hist *h, const req *r, FILE *out, rtf_counts *c) {
  char w[96];
  if (r->fstatus == RT_EDEADLINE)
    c->deadlines++;
  else if (r->fstatus == RT_ECANCELED)
    c->canceled++;
  else
    c->other_fail++;
  if (!known_status(r->fstatus)) {
    if (report(h, out, 4, c)) {
      where(h, r, r->f_line, w, sizeof(w));
      fprintf(out,
              "VIOLATION [deadline] %s (%s) failed with unknown status %d\n",
              r->id, w, r->fstatus);
    }
  } else if (!h->evict && r->fstatus != RT_EDEADLINE &&
             r->fstatus != RT_ECANCELED && report(h, out, 10, c)) {
    /* Waits survive every fault the driver injects. */
    where(h, r, r->f_line, w, sizeof(w));
    fprintf(out, "VIOLATION [survival] %s (%s) failed with %s (%s)%s\n", r->id,
            w, rt_err_name(r->fstatus), rt_strerror(r->fstatus),
            near_fault(h, r->e_us, r->f_us)
                ? " while the server was paused or restarting"
                : "");
  }
}

/* Rule 4 for a request without an outcome. Killed before the outcome was
 * due: fine. Killed (or exited) well after it: the wait hung. */
static void deadline_no_outcome(hist *h, const req *r, const rtf_tol *tol,
                                FILE *out, rtf_counts *c) {
  char w[96];
  const wfile *f = &h->files[r->wf];
  int64_t due = r->e_us + r->timeout_ms * 1000;
  int64_t stall = stall_end_after(h, due - tol->deadline_ms * 1000,
                                  f->kill_us ? f->kill_us : INT64_MAX);
  int64_t due_by = (stall > due ? stall : due) + tol->deadline_ms * 1000;
  if (f->kill_us && f->kill_us <= due_by) {
    c->killed_open++;
    return;
  }
  if (report(h, out, 4, c)) {
    where(h, r, r->e_line, w, sizeof(w));
    fprintf(out,
            "VIOLATION [deadline] %s (%s, timeout %" PRId64
            " ms) never got an outcome (%s)\n",
            r->id, w, r->timeout_ms,
            f->kill_us ? "its process was killed long after the deadline"
                       : (f->exit_us ? "its process exited normally"
                                     : "its process has no exit line"));
  }
}

/* Rule 4 for a request with an outcome: not later than its deadline plus
 * the tolerance and the time the server was unavailable. A wait canceled
 * by closing the client is not late. */
static void deadline_late(hist *h, const req *r, const rtf_tol *tol, FILE *out,
                          rtf_counts *c) {
  char w[96];
  const wfile *f = &h->files[r->wf];
  int64_t due = r->e_us + r->timeout_ms * 1000;
  int64_t o = outcome_us(r);
  if (r->failed && r->fstatus == RT_ECANCELED && f->close_us &&
      f->close_us < due)
    return;
  int64_t late = (o - due) / 1000;
  int64_t stall_end = stall_end_after(h, due - tol->deadline_ms * 1000, o);
  int64_t allowed = tol->deadline_ms;
  if (stall_end > due)
    allowed += (stall_end - due) / 1000;
  if (late > c->max_late_ms)
    c->max_late_ms = late;
  if (stall_end == 0 && late > c->max_late_calm_ms)
    c->max_late_calm_ms = late;
  if (stall_end != 0 && late > tol->deadline_ms)
    c->late_in_stall++;
  if (late > allowed && report(h, out, 4, c)) {
    where(h, r, r->granted ? r->g_line : r->f_line, w, sizeof(w));
    fprintf(out,
            "VIOLATION [deadline] %s (%s) %s %" PRId64
            " ms after its deadline (timeout %" PRId64 " ms)%s\n",
            r->id, w,
            r->granted ? "was granted"
                       : (r->fstatus == RT_EDEADLINE ? "got RT_EDEADLINE"
                                                     : rt_err_name(r->fstatus)),
            late, r->timeout_ms,
            stall_end ? "; longer than the server was unavailable" : "");
  }
}

/* Rule 4. */
static void rule_deadline(hist *h, const rtf_tol *tol, FILE *out,
                          rtf_counts *c) {
  for (size_t i = 0; i < h->nreqs; i++) {
    const req *r = &h->reqs[i];
    if (r->ghost) {
      c->killed_open++; /* granted, but killed before it heard of it */
      continue;
    }
    if (r->failed)
      deadline_failure(h, r, out, c);
    if (outcome_us(r) == 0)
      deadline_no_outcome(h, r, tol, out, c);
    else
      deadline_late(h, r, tol, out, c);
  }
}

/* The requests that may stand in front of a waiter in the Redis queue are
 * those made before its enqueue was answered (ahead_us): a request made
 * later is queued behind it, and an undisturbed waiter is never dropped
 * and queued again. The helpers below look at those only. */

/* When was b's place in the queue known (its enqueue answered) at the
 * latest? */
static int64_t queued_by(const req *b) {
  if (b->q_us)
    return b->q_us;
  return outcome_us(b);
}

/* Did a process with an open request on res, made before ahead_us, die in
 * [from, to]? */
static int kill_near(const hist *h, int res, int64_t from_us, int64_t to_us,
                     int64_t ahead_us) {
  for (size_t i = 0; i < h->nfiles; i++) {
    const wfile *f = &h->files[i];
    if (!f->kill_us || f->kill_us < from_us || f->kill_us > to_us)
      continue;
    for (size_t k = 0; k < f->n; k++) {
      const req *r = &h->reqs[f->first + k];
      if (r->res == res && r->e_us <= f->kill_us && r->e_us <= ahead_us &&
          (outcome_us(r) == 0 || outcome_us(r) >= from_us) &&
          !(r->released && r->r_us < from_us))
        return 1;
    }
  }
  return 0;
}

/* A process with a request on res made before ahead_us (and waiting at
 * some point of the fault) had a network fault overlapping [from, to]:
 * Redis may have granted it a lock it could not hear of. */
static int net_near(const hist *h, int res, int64_t from_us, int64_t to_us,
                    int64_t ahead_us) {
  for (size_t i = 0; i < h->nnets; i++) {
    const nspan *s = &h->nets[i];
    if (!overlaps(from_us, to_us, s->from_us, s->to_us))
      continue;
    for (size_t j = 0; j < h->nfiles; j++) {
      const wfile *f = &h->files[j];
      if (f->slot != s->slot)
        continue;
      for (size_t k = 0; k < f->n; k++) {
        const req *r = &h->reqs[f->first + k];
        int64_t o = outcome_us(r);
        if (r->res == res && r->e_us <= to_us && r->e_us <= ahead_us &&
            (o == 0 || o >= s->from_us))
          return 1;
      }
    }
  }
  return 0;
}

/* Was a wait on res made before ahead_us being abandoned (deadline or
 * close) during [from, to]? */
static int abandon_near(const hist *h, int res, int64_t from_us, int64_t to_us,
                        int64_t clock_us, int64_t ahead_us) {
  for (size_t i = 0; i < h->nreqs; i++) {
    const req *z = &h->reqs[i];
    if (z->res != res || z->granted || !z->failed || z->e_us > ahead_us)
      continue;
    if (overlaps(abandon_start(h, z) - clock_us, z->f_us + clock_us, from_us,
                 to_us))
      return 1;
  }
  /* A multi-lock's wait is logged only once granted: one that failed, or
   * whose process died, may have stood in front unseen, and been granted
   * and given back unseen. */
  for (size_t i = 0; i < h->nmsets; i++) {
    const mset *m = &h->msets[i];
    if ((m->done && m->zstatus == 0) || m->a_us > ahead_us ||
        (m->res[0] != res && m->res[1] != res))
      continue;
    const wfile *f = &h->files[m->wf];
    int64_t end = m->done ? m->z_us : INT64_MAX;
    if (!m->done && f->kill_us)
      end = f->kill_us;
    if (overlaps(m->a_us - clock_us, end + clock_us, from_us, to_us))
      return 1;
  }
  return 0;
}

/* Is there a grant on res in epoch with g (ms) in [from_ms, to_ms] other than
 * skip? Uses the (res, epoch, g) order. Returns the earliest, or NULL. */
static const req *grant_in(const hist *h, const size_t *g, size_t ng, int res,
                           int epoch, int64_t from_ms, int64_t to_ms,
                           const req *skip) {
  for (size_t k = 0; k < ng; k++) {
    const req *r = &h->reqs[g[k]];
    if (r->res != res || r->epoch != epoch || r == skip)
      continue;
    if (r->gms >= from_ms && r->gms <= to_ms)
      return r;
  }
  return NULL;
}

/* Is b a live, undisturbed waiter of res at [from_us, to_us]: queued before
 * from, still waiting (not granted before from, not failed or abandoning
 * before to), its process alive? */
static int live_waiter(const hist *h, const req *b, int res, int epoch,
                       int64_t queued_before_us, int64_t from_us,
                       int64_t to_us) {
  if (b->res != res || b->dist)
    return 0;
  const wfile *f = &h->files[b->wf];
  if (queued_before_us != 0) {
    int64_t q = b->q_us ? b->q_us : (b->granted && b->pos > 0 ? b->g_us : 0);
    if (q == 0 || q >= queued_before_us)
      return 0;
  }
  if (b->e_us >= from_us)
    return 0;
  if (b->granted) {
    if (b->epoch != epoch || b->gms * 1000 < from_us)
      return 0;
  } else if (b->f_us <= to_us || abandon_start(h, b) <= to_us) {
    return 0;
  }
  if (f->kill_us && f->kill_us <= to_us)
    return 0;
  return 1;
}

/* ---- the front of a multi-holder queue ----------------------------------
 * On a semaphore, a read-write lock or an election, a waiter may wait for
 * other holders too, so a crash or a release owes a grant only when the
 * front of the queue fits in the permits left. The front is not logged:
 * every request that may stand in front of the witness must fit. */

/* The permits r takes and its resource's count, as rtcheck counts them; a
 * mutex and an election take 1 of 1. */
static int64_t req_permits(const req *r, int64_t *capacity) {
  rtc_grant cg;
  set_permits(&cg, r);
  *capacity = cg.capacity ? cg.capacity : 1;
  return cg.permits ? cg.permits : 1;
}

/* When r may have taken permits in Redis: a seen hold from its grant until
 * its release was answered or its lease ended. A request without an
 * outcome whose process was killed may have been granted unseen just
 * before the kill (a grant earlier than tol.kill_ms before it would have
 * been logged), until the process was dead to Redis plus its lease; one
 * whose process was not killed, from its ask on. *end 0: never. */
static int64_t busy_span_us(const hist *h, const req *r, const rtf_tol *tol,
                            int64_t *end) {
  if (r->granted) {
    *end = r->deadline_ms * 1000;
    if (r->released && !r->ghost && r->r_us < *end)
      *end = r->r_us;
    return r->gms * 1000;
  }
  *end = 0;
  if (r->failed)
    return 0;
  const wfile *f = &h->files[r->wf];
  if (!f->kill_us) {
    *end = INT64_MAX;
    return r->e_us;
  }
  *end = f->kill_us + (tol->kill_ms + r->ttl_ms) * 1000;
  int64_t begin = f->kill_us - tol->kill_ms * 1000;
  return begin > r->e_us ? begin : r->e_us;
}

/* Would the front of a's queue fit during [from, to] without a's permits,
 * whichever request it is among those that may stand in front of w (asked
 * before w's place was known, still waiting at from), w included? Every
 * other hold seen granted by from that may take permits at any point of
 * the window counts, and every unseen one; a hold seen granted later in
 * the window is itself a grant the rules ask for. */
static int front_fits(const hist *h, const req *a, const req *w,
                      int64_t from_us, int64_t to_us, const rtf_tol *tol) {
  int64_t clk = tol->clock_ms * 1000, cap, unused;
  int64_t need = req_permits(w, &cap), used = 0, ahead_us = queued_by(w);
  for (size_t i = 0; i < h->nreqs; i++) {
    const req *p = &h->reqs[i];
    if (p == a || p->res != a->res || (p->granted && p->epoch != a->epoch))
      continue;
    int64_t end, begin = busy_span_us(h, p, tol, &end);
    /* A seen grant inside the window is the grant the rule asks for. */
    if (p != w && end != 0 &&
        overlaps(begin - clk, end + clk, from_us, to_us) &&
        (!p->granted || begin - clk <= from_us))
      used += req_permits(p, &unused);
    int waiting = p->granted ? p->gms * 1000 + clk >= from_us
                             : !p->failed || p->f_us >= from_us;
    if (p->e_us <= ahead_us && waiting && req_permits(p, &unused) > need)
      need = req_permits(p, &unused);
  }
  return used + need <= cap;
}

/* A witness for the crash of a (lease end d, ms): a live waiter, with
 * nobody in front of it that may have been granted unseen (killed, or cut
 * off by a network fault), and on a multi-holder kind a front that fits. */
static const req *crash_witness(const hist *h, const req *a,
                                const rtf_tol *tol) {
  int64_t d = a->deadline_ms;
  int64_t from_us = kills_since(h, a->res, d * 1000, (d - tol->kill_ms) * 1000);
  int64_t to_us = (d + tol->crash_ms) * 1000;
  for (size_t i = 0; i < h->nreqs; i++) {
    const req *b = &h->reqs[i];
    if (b != a && b->e_us < d * 1000 &&
        live_waiter(h, b, a->res, a->epoch, 0, d * 1000, to_us) &&
        !kill_near(h, a->res, from_us, to_us, queued_by(b)) &&
        !net_near(h, a->res, from_us, to_us, queued_by(b)) &&
        (a->kind == RT_KIND_MUTEX || front_fits(h, a, b, d * 1000, to_us, tol)))
      return b;
  }
  return NULL;
}

/* Rule 5: crashed holders (those seen granted, and ghosts) of every kind.
 * The next grant: for a mutex the next in (g, fence) order; on the other
 * kinds holds overlap, so the first one granted from the lease end on. */
static void rule_crash(hist *h, const size_t *g, size_t ng, const rtf_tol *tol,
                       FILE *out, rtf_counts *c) {
  char wa[96];
  for (size_t k = 0; k < ng; k++) {
    const req *a = &h->reqs[g[k]];
    const wfile *fa = &h->files[a->wf];
    /* A multi-lock's lock renews its lease while the rest is waited for:
     * the renewal a kill cut off before its reply moved the deadline
     * unlogged. */
    if (a->released || !fa->kill_us || a->multi)
      continue;
    int64_t d = a->deadline_ms;
    if (near_fault(h, (d - tol->crash_ms) * 1000, (d + tol->crash_ms) * 1000))
      continue;
    const req *witness = crash_witness(h, a, tol);
    if (witness == NULL)
      continue;
    c->crashes++;
    c->crashes_kinds += a->kind != RT_KIND_MUTEX;
    if (a->ghost)
      c->crashes_ghost++;
    const req *next = NULL;
    if (a->kind != RT_KIND_MUTEX)
      next =
          grant_in(h, g, ng, a->res, a->epoch, d - tol->clock_ms, INT64_MAX, a);
    else if (k + 1 < ng && h->reqs[g[k + 1]].res == a->res &&
             h->reqs[g[k + 1]].epoch == a->epoch)
      next = &h->reqs[g[k + 1]];
    int64_t gap = next != NULL ? next->gms - d : INT64_MAX;
    if (next != NULL && gap > c->max_handoff_gap_ms)
      c->max_handoff_gap_ms = gap;
    if (gap <= tol->crash_ms || !report(h, out, 5, c))
      continue;
    where(h, a, a->g_line, wa, sizeof(wa));
    fprintf(out,
            "VIOLATION [crash] r%d: holder %s (%s%s, kind %d) was killed, its "
            "lease ended at %" PRId64 ", while %s (%s:%d) was waiting; ",
            a->res, a->id, wa,
            a->ghost ? ", granted but never reported: killed at once" : "",
            a->kind, d, witness->id, h->files[witness->wf].name,
            witness->e_line);
    if (next != NULL)
      fprintf(out,
              "the next grant, %s, came at %" PRId64 " (%" PRId64
              " ms after the lease end)\n",
              next->id, next->gms, gap);
    else
      fprintf(out, "no grant came after it\n");
  }
}

/* A witness for the handoff of a's release: a live waiter queued before
 * it, with nothing around the release that excuses a missing grant, and
 * on a multi-holder kind a front that fits once a's permits are back. */
static const req *handoff_witness(const hist *h, const req *a,
                                  const rtf_tol *tol) {
  int64_t clk = tol->clock_ms * 1000;
  int64_t from_us =
      kills_since(h, a->res, a->s_us, a->s_us - tol->kill_ms * 1000);
  for (size_t i = 0; i < h->nreqs; i++) {
    const req *b = &h->reqs[i];
    if (b != a &&
        live_waiter(h, b, a->res, a->epoch, a->s_us - clk, a->s_us - clk,
                    a->r_us + clk) &&
        !kill_near(h, a->res, from_us, a->r_us + clk, queued_by(b)) &&
        !net_near(h, a->res, from_us, a->r_us + clk, queued_by(b)) &&
        !abandon_near(h, a->res, a->s_us - clk, a->r_us + clk, clk,
                      queued_by(b)) &&
        (a->kind == RT_KIND_MUTEX ||
         front_fits(h, a, b, a->s_us - clk, a->r_us + clk, tol)))
      return b;
  }
  return NULL;
}

/* Rule 6: a release hands over at once, on every kind. */
static void rule_handoff(hist *h, const size_t *g, size_t ng,
                         const rtf_tol *tol, FILE *out, rtf_counts *c) {
  char wa[96], wb[96];
  int64_t clk = tol->clock_ms * 1000;
  for (size_t k = 0; k < ng; k++) {
    const req *a = &h->reqs[g[k]];
    if (a->ghost || !a->signaled || !a->released || a->rstatus != 0 ||
        a->overstay || a->r_us >= a->deadline_ms * 1000 - clk)
      continue;
    if (!h->persist && near_fault(h, a->s_us, a->r_us))
      continue;
    const req *witness = handoff_witness(h, a, tol);
    if (witness == NULL)
      continue;
    c->handoffs++;
    c->handoffs_kinds += a->kind != RT_KIND_MUTEX;
    if (grant_in(h, g, ng, a->res, a->epoch, (a->s_us - clk) / 1000,
                 (a->r_us + clk) / 1000, a) != NULL)
      continue;
    if (report(h, out, 6, c)) {
      where(h, a, a->s_line, wa, sizeof(wa));
      where(h, witness, witness->e_line, wb, sizeof(wb));
      fprintf(out,
              "VIOLATION [handoff] r%d: %s (%s, kind %d) released between "
              "%" PRId64 " and %" PRId64 " us with status 0, but no grant was "
              "made then although %s (%s) was queued and waiting (%s)\n",
              a->res, a->id, wa, a->kind, a->s_us, a->r_us, witness->id, wb,
              witness->granted ? "granted later"
                               : rt_err_name(witness->fstatus));
    }
  }
}

/* Rule 11: the client's view of the lease of grant a: never reported
 * granted, or with lease left, past its deadline; still held past it only
 * as RT_LOCK_LOST. */
static void lease_client_view(hist *h, const req *a, int64_t clk, FILE *out,
                              rtf_counts *c) {
  char w[96];
  if (a->g_us > a->deadline_ms * 1000 + clk && report(h, out, 11, c)) {
    where(h, a, a->g_line, w, sizeof(w));
    fprintf(out,
            "VIOLATION [lease] %s (%s) was reported granted at %" PRId64
            " us, %" PRId64 " ms after its lease deadline %" PRId64 "\n",
            a->id, w, a->g_us, a->g_us / 1000 - a->deadline_ms, a->deadline_ms);
  }
  if (a->g_left > 0 &&
      a->g_us + a->g_left * 1000 > a->deadline_ms * 1000 + clk &&
      report(h, out, 11, c)) {
    where(h, a, a->g_line, w, sizeof(w));
    fprintf(out,
            "VIOLATION [lease] %s (%s): at the grant (%" PRId64
            " us) rt_lock_lease_left_ms() said %" PRId64
            " ms, past the lease deadline %" PRId64 "\n",
            a->id, w, a->g_us, a->g_left, a->deadline_ms);
  }
  if (a->signaled && a->s_left > 0 &&
      a->s_us + a->s_left * 1000 > a->deadline_ms * 1000 + clk &&
      report(h, out, 11, c)) {
    where(h, a, a->s_line, w, sizeof(w));
    fprintf(out,
            "VIOLATION [lease] %s (%s): before rt_signal (%" PRId64
            " us) rt_lock_lease_left_ms() said %" PRId64
            " ms, past the lease deadline %" PRId64 "\n",
            a->id, w, a->s_us, a->s_left, a->deadline_ms);
  }
  if (a->signaled && a->s_ext && !a->s_lost &&
      a->s_us > a->deadline_ms * 1000 + clk && report(h, out, 11, c)) {
    where(h, a, a->s_line, w, sizeof(w));
    fprintf(out,
            "VIOLATION [lease] %s (%s) still held its lock at %" PRId64
            " us, %" PRId64 " ms after its lease deadline %" PRId64
            ", and the lock was not RT_LOCK_LOST\n",
            a->id, w, a->s_us, a->s_us / 1000 - a->deadline_ms, a->deadline_ms);
  }
}

/* Rules 7, 8 and 11 and sanity of the grant lines. */
static void rule_lease(hist *h, const size_t *g, size_t ng, const rtf_tol *tol,
                       FILE *out, rtf_counts *c) {
  char w[96];
  int64_t clk = tol->clock_ms * 1000;
  for (size_t k = 0; k < ng; k++) {
    const req *a = &h->reqs[g[k]];
    if (a->ghost)
      continue;
    if (a->lossy)
      c->lossy++;
    if (a->fence == 0 || a->deadline_ms <= 0) {
      if (report(h, out, 8, c)) {
        where(h, a, a->g_line, w, sizeof(w));
        fprintf(out,
                "VIOLATION [grant] %s (%s) has fence %" PRIu64
                " and deadline %" PRId64 "\n",
                a->id, w, a->fence, a->deadline_ms);
      }
      continue;
    }
    if (a->gms * 1000 > a->g_us + clk && report(h, out, 8, c)) {
      where(h, a, a->g_line, w, sizeof(w));
      fprintf(out,
              "VIOLATION [clock] %s (%s): Redis granted it at %" PRId64
              " ms but it was seen at %" PRId64 " us: clocks disagree\n",
              a->id, w, a->gms, a->g_us);
    }
    lease_client_view(h, a, clk, out, c);
    if (a->released) {
      c->releases++;
      if (a->rstatus == RT_ELOST)
        c->lost++;
    }
    if (a->overstay)
      c->overstays++;
    if (a->released && a->rstatus == RT_ELOST &&
        a->r_us < (a->deadline_ms - tol->clock_ms) * 1000) {
      if (!h->persist && epoch_of_ms(h, a->r_us / 1000) != a->epoch)
        continue;
      if (a->lossy || a->multi) /* a multi-lock's status is the set's */
        continue;
      if (report(h, out, 7, c)) {
        where(h, a, a->r_line, w, sizeof(w));
        fprintf(out,
                "VIOLATION [early eviction] %s (%s): release answered RT_ELOST "
                "at %" PRId64 " us, %" PRId64
                " ms before its lease deadline %" PRId64 "\n",
                a->id, w, a->r_us, a->deadline_ms - a->r_us / 1000,
                a->deadline_ms);
      }
    }
  }
}

/* Rule 13, multi: when rt_wait_all reports 0, every lock of the set is
 * held with a running lease. For each lock X of a set reported held at z
 * (its Z line): X's deadline (the extend's, D line) is after z, and no
 * other hold of X's resource with a higher fence (granted after X) was
 * seen granted before z (its G line, or the driver's holder record at a
 * kill, before z): else X's lease had ended, or its holder record had
 * gone, before the report, and someone else held the resource in between.
 * No key loss exempts it: a lock whose record went is refused by the
 * extend before the report (RT_ELOST). The multi-lock's own holds are
 * judged by exclusion and fencing as every hold. Also counts the key
 * losses of a set's resources while the set was half-taken. */
static void rule_multi(hist *h, const size_t *g, size_t ng, const rtf_tol *tol,
                       FILE *out, rtf_counts *c) {
  int64_t clk = tol->clock_ms * 1000;
  char w[96];
  for (size_t i = 0; i < h->nmsets; i++) {
    const mset *m = &h->msets[i];
    const wfile *f = &h->files[m->wf];
    c->multis++;
    int64_t first = 0; /* the first lock of the set seen granted */
    const req *lk[2] = {NULL, NULL};
    int nl = 0;
    for (size_t k = 0; k < f->n && nl < 2; k++) {
      const req *r = &h->reqs[f->first + k];
      if (r->multi == m->mid && r->granted && !r->ghost) {
        lk[nl++] = r;
        if (first == 0 || r->g_us < first)
          first = r->g_us;
      }
    }
    if (first != 0) {
      int64_t end = m->done ? m->z_us : (f->kill_us ? f->kill_us : first);
      for (size_t l = 0; l < h->nlosses; l++) {
        const lspan *ls = &h->losses[l];
        if ((ls->res < 0 || ls->res == m->res[0] || ls->res == m->res[1]) &&
            overlaps(first, end, ls->from_us, ls->to_us))
          c->multi_losses++;
      }
    }
    if (!m->done)
      continue;
    if (m->zstatus != 0) {
      c->multis_failed++;
      continue;
    }
    c->multis_held++;
    snprintf(w, sizeof(w), "%s:%d", f->name, m->z_line);
    if (nl != m->n && report(h, out, 13, c))
      fprintf(out,
              "VIOLATION [multi] multi-lock %d (%s) reported every lock "
              "held, but %d of its %d locks were seen granted\n",
              m->mid, w, nl, m->n);
    for (int j = 0; j < nl; j++) {
      const req *x = lk[j];
      if (x->deadline_ms * 1000 + clk <= m->z_us && report(h, out, 13, c))
        fprintf(out,
                "VIOLATION [multi] multi-lock %d (%s) reported %s held at "
                "%" PRId64 " us, its lease deadline %" PRId64 " ms was over\n",
                m->mid, w, x->id, m->z_us, x->deadline_ms);
      for (size_t k = 0; k < ng; k++) {
        const req *o = &h->reqs[g[k]];
        if (o == x || o->res != x->res || o->fence <= x->fence ||
            o->g_us >= m->z_us)
          continue;
        if (report(h, out, 13, c)) {
          char wo[96];
          where(h, o, o->g_line, wo, sizeof(wo));
          fprintf(out,
                  "VIOLATION [multi] multi-lock %d (%s) reported %s (r%d, "
                  "fence %" PRIu64 ") held at %" PRId64
                  " us, but %s (%s, fence %" PRIu64 ") was granted r%d "
                  "after it and seen at %" PRId64 " us, before the report\n",
                  m->mid, w, x->id, x->res, x->fence, m->z_us, o->id, wo,
                  o->fence, o->res, o->g_us);
        }
        break;
      }
    }
  }
}

static const req *req_by_id(const hist *h, const char *id) {
  for (size_t i = 0; i < h->nreqs; i++)
    if (strcmp(h->reqs[i].id, id) == 0)
      return &h->reqs[i];
  return NULL;
}

/* Rule 14, observer: what an rt_observe lane reports of its election.
 * Within one observer (a worker file and resource), the fences of the
 * leaders it reports never go backwards, and a new leader has a higher
 * fence than the last, except across a loss of every key of the resource
 * (DEL of all, FLUSHALL) or a restart without persistence; a "nobody"
 * report carries the last leader's fence as far as Redis knows it: never
 * below the last leader reported unless a key of the resource was lost
 * in between (0: none known). A reported leader must be a request of the
 * history that was granted: its grant (Redis time) at or before the report
 * (+ tol_clock), the same fence, and its hold not over by more than the
 * notice slack (4 * tol_crash: 2 s, 4 s in sanitizer builds) before the
 * report, unless the observer's network had a fault or the server stalled
 * in between (a notice may lag, never lead). A leader with no grant in
 * the history (its process killed before it heard, or its wait ended by
 * a deadline racing the grant) is not judged, nor one reported with a
 * lower fence than the grant its worker logged: an earlier grant of the
 * same request that its client never heard (the notice lost, the lease
 * run out unused, the request queued again by the reconcile and granted
 * anew), whose report may come late like any notice. */
static void rule_observer(hist *h, const rtf_tol *tol, FILE *out,
                          rtf_counts *c) {
  int64_t clk = tol->clock_ms * 1000, slack = 4 * tol->crash_ms * 1000;
  for (size_t i = 0; i < h->noevs; i++) {
    const oev *o = &h->oevs[i];
    if (o->status != 0)
      continue;
    const wfile *f = &h->files[o->wf];
    char w[96];
    snprintf(w, sizeof(w), "%s:%d", f->name, o->line);
    /* The last leader this observer reported before. */
    const oev *p = NULL;
    for (size_t k = i; k > 0; k--) {
      const oev *q = &h->oevs[k - 1];
      if (q->wf == o->wf && q->res == o->res && q->status == 0 &&
          strcmp(q->id, "-") != 0) {
        p = q;
        break;
      }
    }
    int nobody = strcmp(o->id, "-") == 0;
    if (nobody)
      c->obs_nobody++;
    else
      c->obs_reports++;
    if (p != NULL) {
      int total =
          loss_hit(h, o->res, p->t_us - clk, o->t_us + clk, 1) ||
          epoch_of_ms(h, p->t_us / 1000) != epoch_of_ms(h, o->t_us / 1000);
      int any = loss_hit(h, o->res, p->t_us - clk, o->t_us + clk, 0);
      int back;
      if (nobody)
        back = o->fence != 0 && o->fence < p->fence && !any && !total;
      else
        back = !total && (o->fence < p->fence ||
                          (o->fence == p->fence && strcmp(o->id, p->id) != 0));
      if (back && report(h, out, 14, c))
        fprintf(out,
                "VIOLATION [observer] %s: r%d's observer reported %s with "
                "fence %" PRIu64 " after %s with fence %" PRIu64 " (line %d)\n",
                w, o->res, nobody ? "nobody leading" : o->id, o->fence, p->id,
                p->fence, p->line);
    }
    if (nobody)
      continue;
    const req *r = req_by_id(h, o->id);
    if (r == NULL) {
      if (report(h, out, 14, c))
        fprintf(out,
                "VIOLATION [observer] %s: r%d's observer reported leader %s, "
                "a request no worker made\n",
                w, o->res, o->id);
      continue;
    }
    if (!r->granted || (r->res == o->res && o->fence < r->fence))
      continue;
    c->obs_judged++;
    if ((r->res != o->res || r->fence != o->fence ||
         r->gms * 1000 > o->t_us + clk) &&
        report(h, out, 14, c)) {
      char wr[96];
      where(h, r, r->g_line, wr, sizeof(wr));
      fprintf(out,
              "VIOLATION [observer] %s: r%d's observer reported leader %s "
              "(fence %" PRIu64 ") at %" PRId64 " us; its grant (%s) is r%d, "
              "fence %" PRIu64 ", made at %" PRId64 " ms\n",
              w, o->res, o->id, o->fence, o->t_us, wr, r->res, r->fence,
              r->gms);
      continue;
    }
    const char *why;
    int64_t end = live_end(h, r, &why);
    if (o->t_us > end + slack && !net_hit(h, f->slot, end, o->t_us) &&
        !near_fault(h, end, o->t_us) && report(h, out, 14, c))
      fprintf(out,
              "VIOLATION [observer] %s: r%d's observer reported leader %s at "
              "%" PRId64 " us, %" PRId64 " ms after its hold ended (%s)\n",
              w, o->res, o->id, o->t_us, (o->t_us - end) / 1000, why);
  }
}

/* Every worker log w*.log of dir, in name order. -1 if dir cannot be read. */
static int read_workers(hist *h, const char *dir, FILE *out) {
  DIR *d = opendir(dir);
  if (d == NULL)
    return -1;
  char **names = NULL;
  size_t nnames = 0, capnames = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    size_t l = strlen(e->d_name);
    if (e->d_name[0] == 'w' && l > 4 &&
        strcmp(e->d_name + l - 4, ".log") == 0) {
      names = grow(names, &capnames, nnames + 1, sizeof(char *));
      names[nnames++] = strdup(e->d_name);
    }
  }
  closedir(d);
  qsort(names, nnames, sizeof(char *), cmp_str);
  for (size_t i = 0; i < nnames; i++) {
    read_worker(h, dir, names[i], out);
    free(names[i]);
  }
  free(names);
  return 0;
}

static void hist_free(hist *h) {
  free(h->msets);
  free(h->oevs);
  free(h->reqs);
  free(h->files);
  free(h->nets);
  free(h->losses);
}

/* What the run did, into c: requests, grants, faults injected. */
static void count_history(const hist *h, rtf_counts *c) {
  c->requests = (long)h->nreqs;
  for (size_t i = 0; i < h->nfiles; i++) {
    c->reconnects += (long)h->files[i].max_rc;
    c->connect_fail += h->files[i].connect_failed;
  }
  c->kills = h->kills;
  c->kills_holder = h->kills_holder;
  c->kills_waiter = h->kills_waiter;
  c->conn_kills = h->conn_kills;
  c->pauses = h->npauses;
  c->restarts = h->nrestarts;
  for (int i = 0; i < 4; i++)
    c->net[i] = h->net_kind[i];
  for (int i = 0; i < 6; i++)
    c->keyloss[i] = h->loss_kind[i];
  c->observer = h->observer;
  c->lost_seen = h->lost_seen;
  c->violations = h->driver_v;
}

long rtf_check(const char *dir, const rtf_tol *tol, FILE *out, rtf_counts *c) {
  hist h;
  memset(&h, 0, sizeof(h));
  memset(c, 0, sizeof(*c));
  h.persist = 1;
  if (read_workers(&h, dir, out) != 0)
    return -1;
  if (read_driver(&h, dir, out) != 0) {
    hist_free(&h);
    return -1;
  }
  mark_disturbed(&h, tol);

  size_t ng = 0, nu = 0;
  size_t *g = malloc((h.nreqs + 1) * sizeof(size_t));
  size_t *u = malloc((h.nreqs + 1) * sizeof(size_t));
  if (g == NULL || u == NULL) {
    fprintf(stderr, "check: out of memory\n");
    exit(2);
  }
  for (size_t i = 0; i < h.nreqs; i++) {
    req *r = &h.reqs[i];
    if (!r->granted)
      continue;
    r->epoch = epoch_of_ms(&h, r->gms);
    g[ng++] = i;
    if (r->ghost)
      c->ghosts++;
    else
      c->grants++;
    if (!r->dist)
      u[nu++] = i;
  }
  count_history(&h, c);

  sort_h = &h;
  qsort(g, ng, sizeof(size_t), cmp_grant);
  rule_exclusion_fencing(&h, g, ng, tol, out, c);
  rule_deadline(&h, tol, out, c);
  if (!h.evict) {
    rule_fifo(&h, u, nu, out, c);
    rule_crash(&h, g, ng, tol, out, c);
    rule_handoff(&h, g, ng, tol, out, c);
    rule_lease(&h, g, ng, tol, out, c);
    rule_multi(&h, g, ng, tol, out, c);
    rule_observer(&h, tol, out, c);
  }
  /* With --judge: the fence-checking store's log (judge.c). */
  long jv = rtf_judge(dir, tol->clock_ms, out);
  c->violations += jv > 0 ? jv : 0;
  if (jv < 0 && out != NULL)
    fprintf(out, "VIOLATION [store] cannot read %s\n", RTF_STORE_LOG);
  c->violations += jv < 0;
  for (int i = 0; i < 16; i++)
    if (h.printed[i] > MAX_PRINT && out != NULL)
      fprintf(out, "(rule %d: %ld more violations not shown)\n", i,
              h.printed[i] - MAX_PRINT);
  free(g);
  free(u);
  hist_free(&h);
  return c->violations;
}

void rtf_print_counts(FILE *out, const rtf_counts *c) {
  fprintf(
      out,
      "requests: %ld\n"
      "grants: %ld (plus %ld ghost holds: granted, never reported, "
      "killed)\n"
      "releases: %ld (RT_ELOST: %ld, holds past the lease on purpose: %ld)\n"
      "locks reported lost (rt_lock_on_lost): %ld\n"
      "wait failures: RT_EDEADLINE %ld, RT_ECANCELED %ld, other %ld\n"
      "requests cut short by SIGKILL: %ld\n"
      "kills: %ld (holders %ld, waiters %ld)\n"
      "connection kills: %ld\n"
      "pauses: %ld\n"
      "restarts: %ld\n"
      "network faults: delay %ld, hold %ld, partition %ld, cut %ld\n"
      "key losses: q %ld, m %ld, all keys %ld, FLUSHALL %ld, h %ld, D %ld "
      "(%ld holds live when their record went)\n"
      "observer subscriptions: %ld\n"
      "reconnects: %ld\n"
      "first connects that failed (restarted): %ld\n"
      "judged: fifo %ld grants, handoff %ld releases (%ld not of a mutex), "
      "crash %ld holds (%ld ghosts, %ld not of a mutex)\n"
      "worst: lease end to next grant after a crash %" PRId64
      " ms, wait outcome after its deadline %" PRId64 " ms (%" PRId64
      " ms away from pauses and restarts; %ld waits reported late in a "
      "stall)\n"
      "multi-locks: %ld (every lock held: %ld, failed: %ld; key losses of "
      "their resources while half-taken: %ld)\n"
      "observer reports: leaders %ld (judged against their grant: %ld), "
      "nobody %ld\n"
      "violations: %ld\n",
      c->requests, c->grants, c->ghosts, c->releases, c->lost, c->overstays,
      c->lost_seen, c->deadlines, c->canceled, c->other_fail, c->killed_open,
      c->kills, c->kills_holder, c->kills_waiter, c->conn_kills, c->pauses,
      c->restarts, c->net[0], c->net[1], c->net[2], c->net[3], c->keyloss[0],
      c->keyloss[1], c->keyloss[2], c->keyloss[3], c->keyloss[4], c->keyloss[5],
      c->lossy, c->observer, c->reconnects, c->connect_fail, c->fifo_pairs,
      c->handoffs, c->handoffs_kinds, c->crashes, c->crashes_ghost,
      c->crashes_kinds, c->max_handoff_gap_ms, c->max_late_ms,
      c->max_late_calm_ms, c->late_in_stall, c->multis, c->multis_held,
      c->multis_failed, c->multi_losses, c->obs_reports, c->obs_judged,
      c->obs_nobody, c->violations);
}

#ifdef RTF_CHECK_MAIN
/* redturn_fault_check DIR: check the logs of an earlier run again, with the
 * tolerances that run used (from its P line). */
int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: redturn_fault_check DIR\n");
    return 2;
  }
  rtf_tol tol;
  char path[1024];
  snprintf(path, sizeof(path), "%s/driver.log", argv[1]);
  FILE *fp = fopen(path, "r");
  int slow = 0;
  rtf_tol_default(&tol, 0);
  if (fp != NULL) {
    char line[600];
    if (fgets(line, sizeof(line), fp) != NULL && line[0] == 'P') {
      const char *p;
      if ((p = strstr(line, "slow=")) != NULL)
        slow = atoi(p + 5);
      rtf_tol_default(&tol, slow);
      if ((p = strstr(line, "tol_clock=")) != NULL)
        tol.clock_ms = atoll(p + 10);
      if ((p = strstr(line, "tol_deadline=")) != NULL)
        tol.deadline_ms = atoll(p + 13);
      if ((p = strstr(line, "tol_crash=")) != NULL)
        tol.crash_ms = atoll(p + 10);
      if ((p = strstr(line, "tol_kill=")) != NULL)
        tol.kill_ms = atoll(p + 9);
    }
    fclose(fp);
  }
  rtf_counts c;
  long v = rtf_check(argv[1], &tol, stdout, &c);
  if (v < 0) {
    fprintf(stderr, "check: cannot read %s\n", argv[1]);
    return 2;
  }
  rtf_print_counts(stdout, &c);
  return v == 0 && c.grants > 0 ? 0 : 1;
}
#endif
