/* Rules 1 to 4 and 12 (see check.c): exclusion and permits, fencing,
 * FIFO and deadlines. */
#include "history.h"

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
void set_permits(rtc_grant *cg, const req *r) {
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
void rule_exclusion_fencing(hist *h, const size_t *g, size_t ng,
                            const rtf_tol *tol, FILE *out, rtf_counts *c) {
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
void rule_fifo(hist *h, const size_t *u, size_t nu, FILE *out, rtf_counts *c) {
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
  if (r->fstatus == RT_EWAITTIMEOUT)
    c->deadlines++;
  else if (r->fstatus == RT_ECANCELED)
    c->canceled++;
  else
    c->other_fail++;
  if (!known_status(r->fstatus)) {
    if (report(h, out, 4, c)) {
      where(h, r, r->f_line, w, sizeof(w));
      fprintf(out,
              "VIOLATION [timeout] %s (%s) failed with unknown status %d\n",
              r->id, w, r->fstatus);
    }
  } else if (!h->evict && r->fstatus != RT_EWAITTIMEOUT &&
             r->fstatus != RT_ECANCELED && report(h, out, 10, c)) {
    /* Waits survive every fault the driver injects. */
    where(h, r, r->f_line, w, sizeof(w));
    fprintf(out, "VIOLATION [survival] %s (%s) failed with %s (%s)%s%s%s\n",
            r->id, w, rt_err_name(r->fstatus), rt_strerror(r->fstatus),
            near_fault(h, r->e_us, r->f_us)
                ? " while the server was paused or restarting"
                : "",
            r->fwhy[0] ? ": " : "", r->fwhy);
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
            "VIOLATION [timeout] %s (%s, timeout %" PRId64
            " ms) never got an outcome (%s)\n",
            r->id, w, r->timeout_ms,
            f->kill_us ? "its process was killed long after the timeout"
                       : (f->exit_us ? "its process exited normally"
                                     : "its process has no exit line"));
  }
}

/* How long f's loop did not run (its "Y" stalls) within [from, to], in
 * ms: the library's timers could not fire then either. */
static int64_t loop_stalled_ms(const wfile *f, int64_t from, int64_t to) {
  int64_t us = 0;
  for (size_t i = 0; i < f->nstalls; i++) {
    int64_t b = f->stalls[i].to_us - f->stalls[i].ms * 1000,
            e = f->stalls[i].to_us;
    if (b < from)
      b = from;
    if (e > to)
      e = to;
    if (e > b)
      us += e - b;
  }
  return us / 1000;
}

/* Rule 4 for a request with an outcome: not later than its timeout plus
 * the tolerance, the time the server was unavailable and the time the
 * worker's own loop did not run (a busy machine). A wait canceled by
 * closing the client is not late. */
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
  int64_t starved = loop_stalled_ms(f, due, o);
  allowed += starved;
  if (late > c->max_late_ms)
    c->max_late_ms = late;
  if (stall_end == 0 && late > c->max_late_calm_ms)
    c->max_late_calm_ms = late;
  if (stall_end != 0 && late > tol->deadline_ms)
    c->late_in_stall++;
  if (late > allowed && report(h, out, 4, c)) {
    where(h, r, r->granted ? r->g_line : r->f_line, w, sizeof(w));
    fprintf(out,
            "VIOLATION [timeout] %s (%s) %s %" PRId64
            " ms after its timeout ran out (timeout %" PRId64
            " ms; its loop stalled %" PRId64 " ms of it)%s\n",
            r->id, w,
            r->granted
                ? "was granted"
                : (r->fstatus == RT_EWAITTIMEOUT ? "got RT_EWAITTIMEOUT"
                                                 : rt_err_name(r->fstatus)),
            late, r->timeout_ms, starved,
            stall_end ? "; longer than the server was unavailable" : "");
  }
}

/* Rule 4. */
void rule_timeout(hist *h, const rtf_tol *tol, FILE *out, rtf_counts *c) {
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
