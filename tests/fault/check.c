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
 * client reconnected or could not report a grant it heard
 * (rt_client_stats()'s reconnects + late_grants differs) or its subscriber
 * connection was killed (an L line: the count changes only once it is
 * back, which may come after the outcome), its process's
 * network had a fault (a Z span of its slot: delay, hold, partition, cut),
 * a key of its resource was deleted (an X line: q, m, all, FLUSHALL), or,
 * under wait_replicas, the server was paused (an A line: WAIT stalls while
 * paused). The library documents what such a request may suffer: a waiter
 * whose client was not subscribed at its turn, or whose grant notice came
 * after its lease had ended by the client's conservative clock, or whose
 * grant the replicas confirmed only after its lease ended, or whose entry
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
 *               record survives (DEL of q, m, or a pool
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
 *               resource died around the deadline (killed by then and
 *               not reaped tol.kill_ms before it; a grant may have
 *               gone to it unseen), or at any time before if the deadline
 *               is in the settle window of a move of the resource to
 *               another server (see kills_since), or had a network fault then (a
 *               grant may have gone to it while it could not hear it).
 *               Also skipped when the holder had called rt_signal (S, no
 *               R) and a killed process's request without an outcome,
 *               asked before the witness, may hold unseen at the deadline:
 *               Redis may have run that release and handed it the lock.
 *               And skipped when a restart without persistence came
 *               between the grant and the deadline: the server forgot
 *               the hold, so its lease end owes nobody a grant.
 * 6 handoff:    when a holder released in time (S and R before its
 *               deadline, status 0) while a live undisturbed waiter was
 *               queued (Q before S) and still waiting, some grant must be
 *               made by that release itself: g in [S - clock, R + clock].
 *               This is the dead-waiter rule: waiters of killed processes
 *               ahead of the live one must be skipped by the same script
 *               call, costing no time, and a pattern subscriber (the
 *               driver's PSUBSCRIBE observer) must not make them look
 *               alive. Skipped when a killed process had a request on the
 *               resource (a multi-lock still waiting at the kill counts as
 *               one on each of its resources: its waits are logged only
 *               once granted) and was not yet dead (reaped by the driver, the D
 *               line: its connections had closed) tol.kill_ms before S
 *               (Redis may not have seen the death yet: until then its
 *               subscriber keeps its waiters alive, and the release grants
 *               one, which costs its lease; on a loaded machine a killed
 *               process was reaped 291 ms after its kill, against 5-10 ms
 *               otherwise: selftest good_handoff_slow_death; the same
 *               reaped at once, handoff_reaped_dead, is flagged), or that
 *               was killed up to tol.kill_ms after R (the
 *               release may have granted it, too late to log), or at any
 *               time before, if S is in the
 *               settle window of a move of the resource to another server
 *               (a dead waiter is then granted like one whose client is
 *               still reconnecting; see kills_since), when a process with a request on the
 *               resource had a network fault over [S, R + tol.kill_ms]
 *               (the notice still on its way when it began) or its
 *               subscriber connection killed (CLIENT KILL) during [S, R]
 *               (the grant's notice went with it), or when a wait on the
 *               resource was being abandoned (deadline/cancel) during
 *               [S, R], up to tol.kill_ms after R or after the end of a
 *               pause or server stall over [S, R] (its notice held until
 *               then): such a waiter may be granted and release at
 *               once without a G line; nor for a waiter whose wait had not
 *               ended when a failover or restart began after S - clock (its
 *               client may hear of the grant only after its reconnect, or
 *               not before its deadline: it leaves a master at the first
 *               step of its failover, and wait_replicas counts a grant only
 *               once the replicas have it).
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
 *               statuses a wait may end with are RT_EWAITTIMEOUT and, once its
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
 *               been logged) until the process was dead to Redis (its
 *               reap + tol.kill_ms) plus
 *               their lease. For the crash rule the next grant is then the
 *               first one from the lease end on.
 */
#include "history.h"

void rtf_tol_default(rtf_tol *tol, int slow) {
  tol->clock_ms = 5;
  tol->deadline_ms = slow ? 600 : 300;
  tol->crash_ms = slow ? 1000 : 500;
  tol->kill_ms = slow ? 300 : 150;
}
/* The history qsort compares grants of (cmp_grant, by resource, epoch,
 * grant time, fence). */
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
      names = rtf_grow(names, &capnames, nnames + 1, sizeof(char *));
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
  for (size_t i = 0; i < h->nfiles; i++)
    free(h->files[i].stalls);
  free(h->msets);
  free(h->oevs);
  free(h->reqs);
  free(h->files);
  free(h->nets);
  free(h->subkills);
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
  c->pauses = h->npauses - h->nserver_stalls;
  c->stalls = h->nserver_stalls;
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
  rule_timeout(&h, tol, out, c);
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
      "wait failures: RT_EWAITTIMEOUT %ld, RT_ECANCELED %ld, other %ld\n"
      "requests cut short by SIGKILL: %ld\n"
      "kills: %ld (holders %ld, waiters %ld)\n"
      "connection kills: %ld\n"
      "pauses: %ld (and server stalls, judged as pauses: %ld)\n"
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
      "their resources while half-taken: %ld; locks a key loss took after "
      "their last confirmation: %ld)\n"
      "observer reports: leaders %ld (judged against their grant: %ld), "
      "nobody %ld\n"
      "violations: %ld\n",
      c->requests, c->grants, c->ghosts, c->releases, c->lost, c->overstays,
      c->lost_seen, c->deadlines, c->canceled, c->other_fail, c->killed_open,
      c->kills, c->kills_holder, c->kills_waiter, c->conn_kills, c->pauses,
      c->stalls, c->restarts, c->net[0], c->net[1], c->net[2], c->net[3],
      c->keyloss[0], c->keyloss[1], c->keyloss[2], c->keyloss[3], c->keyloss[4],
      c->keyloss[5], c->lossy, c->observer, c->reconnects, c->connect_fail,
      c->fifo_pairs, c->handoffs, c->handoffs_kinds, c->crashes,
      c->crashes_ghost, c->crashes_kinds, c->max_handoff_gap_ms, c->max_late_ms,
      c->max_late_calm_ms, c->late_in_stall, c->multis, c->multis_held,
      c->multis_failed, c->multi_losses, c->multi_lost_unseen, c->obs_reports,
      c->obs_judged, c->obs_nobody, c->violations);
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
