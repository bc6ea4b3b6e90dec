/* Rule 11 (see check.c), the multi-lock rule and the observer rule. */
#include "history.h"

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
void rule_lease(hist *h, const size_t *g, size_t ng, const rtf_tol *tol,
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
 * A key loss exempts only what no client can see in time: a loss of X's
 * resource after X was last confirmed (its grant, or the extend, each
 * when Redis ran it: by the Redis clock the deadline minus the lease, as
 * a grant is seen and the D line logged only later, the last one at the
 * report) and
 * before the other grant (a lock whose record went before its
 * extend is refused by it, RT_ELOST; the last lock of the set gets no
 * extend, and a loss between its grant and the report is as a loss right
 * after any grant). The multi-lock's own holds are judged by exclusion and
 * fencing as every hold. Also counts the key losses of a set's resources
 * while the set was half-taken. */

/* A key loss of resource res within [from, to]. */
static int lost_between(const hist *h, int res, int64_t from, int64_t to) {
  for (size_t l = 0; l < h->nlosses; l++) {
    const lspan *ls = &h->losses[l];
    if ((ls->res < 0 || ls->res == res) && ls->to_us >= from &&
        ls->from_us <= to)
      return 1;
  }
  return 0;
}

void rule_multi(hist *h, const size_t *g, size_t ng, const rtf_tol *tol,
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
        /* Confirmed when Redis ran the grant (its deadline minus the
         * lease, by the Redis clock), not when the G line was logged. The
         * extend's D line is logged at the report, after Redis ran it: at
         * its new deadline minus the lease (extend.lua: now + ttl). */
        int64_t confirmed = x->gms * 1000 < x->g_us ? x->gms * 1000 : x->g_us;
        if (x->d_us > x->g_us) {
          int64_t ran_us = (x->deadline_ms - x->ttl_ms) * 1000;
          confirmed = ran_us < x->d_us ? ran_us : x->d_us;
        }
        if (lost_between(h, x->res, confirmed, o->g_us)) {
          c->multi_lost_unseen++;
          break;
        }
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
 * anew), whose report may come late like any notice; nor one reported
 * with a higher fence after a key loss, when its client turned the lock
 * lost: the same request granted anew by Redis (see below). */
void rule_observer(hist *h, const rtf_tol *tol, FILE *out, rtf_counts *c) {
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
    /* A higher fence than the grant its worker logged, after a key of the
     * resource was lost since that grant, on a lock its client turned
     * lost: Redis lost that grant with its keys and granted the same
     * request anew (a retried enqueue); the client, which read the stale
     * notice first, turned its lock lost on the new grant rather than take
     * it as a hold (docs/FAILURES.md). A client that kept holding under
     * the old fence is still judged. */
    if (r->res == o->res && o->fence > r->fence &&
        (r->l_us != 0 || r->s_lost) &&
        loss_hit(h, o->res, r->gms * 1000 - clk, o->t_us + clk, 0))
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
