/* Rules 5 and 6 (see check.c): the queue moves after a crashed holder's
 * lease and at a release, on every kind. */
#include "history.h"

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

/* Did a process with an open request on res, made before ahead_us, die
 * during [from, to]: killed by to, and not dead (dead_by_us) before from?
 * A multi-lock's wait is logged only once granted, so a set of res still
 * waiting at the kill (no Z line) may have had an unlogged wait on res,
 * alive to Redis until its process was dead. */
static int kill_near(const hist *h, int res, int64_t from_us, int64_t to_us,
                     int64_t ahead_us) {
  for (size_t i = 0; i < h->nfiles; i++) {
    const wfile *f = &h->files[i];
    if (!f->kill_us || dead_by_us(f) < from_us || f->kill_us > to_us)
      continue;
    for (size_t k = 0; k < f->n; k++) {
      const req *r = &h->reqs[f->first + k];
      if (r->res == res && r->e_us <= f->kill_us && r->e_us <= ahead_us &&
          (outcome_us(r) == 0 || outcome_us(r) >= from_us) &&
          !(r->released && r->r_us < from_us))
        return 1;
    }
    for (size_t k = 0; k < h->nmsets; k++) {
      const mset *m = &h->msets[k];
      if ((size_t)m->wf == i && !m->done && m->a_us <= f->kill_us &&
          m->a_us <= ahead_us && (m->res[0] == res || m->res[1] == res))
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

/* Was the subscriber connection of a process with a wait on res made
 * before ahead_us, and still waiting at from, killed (CLIENT KILL) during
 * [from, to]? A release that ran just before the kill may have granted
 * that wait, its notice lost with the connection: the client hears of it
 * at its reconnect (its reconcile asks Redis) if the lease still runs
 * then, and nobody else is granted before that lease ends. */
static int sub_kill_near(const hist *h, int res, int64_t from_us, int64_t to_us,
                         int64_t ahead_us) {
  for (size_t j = 0; j < h->nfiles; j++) {
    const wfile *f = &h->files[j];
    for (size_t n = 0; n < f->n; n++) {
      const req *r = &h->reqs[f->first + n];
      int64_t o = outcome_us(r);
      if (r->res == res && r->e_us <= ahead_us && (o == 0 || o >= from_us) &&
          sub_kill_hit(h, f, r->e_us > from_us ? r->e_us : from_us, to_us))
        return 1;
    }
  }
  return 0;
}

/* The end of the latest pause or server stall overlapping [from, to], or
 * 0: a notice sent then reaches its client at that end at the earliest. */
static int64_t pause_end_over(const hist *h, int64_t from_us, int64_t to_us) {
  int64_t end = 0;
  for (int i = 0; i < h->npauses; i++)
    if (overlaps(from_us, to_us, h->pauses[i].from_us, h->pauses[i].to_us) &&
        h->pauses[i].to_us > end)
      end = h->pauses[i].to_us;
  return end;
}

/* Was a wait on res made before ahead_us being abandoned (deadline or
 * close) during [from, to], or up to unseen_us after heard_us (to, or
 * the end of a stall over the release)? A grant that reached the waiter's
 * process that long before its deadline may not have been read before
 * the deadline's timer ran (a process descheduled for some tens of ms on
 * a loaded machine runs its timers first), and the client gives such a
 * grant back: the release's handoff went to it, unseen. The same
 * allowance as for a process killed after a release (kill_near). A
 * server or proxies stalled over the release hold its notice until the
 * stall ends: the waiter's deadline may come first. */
static int abandon_near(const hist *h, int res, int64_t from_us, int64_t to_us,
                        int64_t heard_us, int64_t clock_us, int64_t unseen_us,
                        int64_t ahead_us) {
  for (size_t i = 0; i < h->nreqs; i++) {
    const req *z = &h->reqs[i];
    if (z->res != res || z->granted || !z->failed || z->e_us > ahead_us)
      continue;
    if (overlaps(abandon_start(h, z) - clock_us - unseen_us, z->f_us + clock_us,
                 from_us, heard_us > to_us ? heard_us : to_us))
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

/* ---- the front of a pool queue ----------------------------------
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
 * been logged), until the process was dead to Redis (tol.kill_ms after
 * dead_by_us) plus its lease; one
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
  *end = dead_by_us(f) + (tol->kill_ms + r->ttl_ms) * 1000;
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

/* A request on res asked before ahead_us, whose process was killed before
 * it had an outcome, may hold unseen at some point of [from_us, to_us]
 * (busy_span_us). A crashed holder that had called rt_signal may have been
 * released in Redis before the kill cut off the reply, handing the lock to
 * such a request: its own lease then runs before anyone else's turn. */
static int unseen_hold_near(const hist *h, int res, int64_t from_us,
                            int64_t to_us, int64_t ahead_us,
                            const rtf_tol *tol) {
  for (size_t i = 0; i < h->nreqs; i++) {
    const req *p = &h->reqs[i];
    int64_t end;
    if (p->res != res || p->granted || p->failed || p->e_us > ahead_us ||
        !h->files[p->wf].kill_us)
      continue;
    int64_t begin = busy_span_us(h, p, tol, &end);
    if (end != 0 && overlaps(begin, end, from_us, to_us))
      return 1;
  }
  return 0;
}

/* A witness for the crash of a (lease end d, ms): a live waiter, with
 * nobody in front of it that may have been granted unseen (killed, or cut
 * off by a network fault), and on a pool kind a front that fits. */
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
        !(a->signaled &&
          unseen_hold_near(h, a->res, d * 1000, to_us, queued_by(b), tol)) &&
        !net_near(h, a->res, from_us, to_us, queued_by(b)) &&
        (a->kind == RT_KIND_MUTEX || front_fits(h, a, b, d * 1000, to_us, tol)))
      return b;
  }
  return NULL;
}

/* Rule 5: crashed holders (those seen granted, and ghosts) of every kind.
 * The next grant: for a mutex the next in (g, fence) order; on the other
 * kinds holds overlap, so the first one granted from the lease end on. */
void rule_crash(hist *h, const size_t *g, size_t ng, const rtf_tol *tol,
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
    /* A restart without persistence forgot the hold before it ended. */
    if (epoch_of_ms(h, d) != a->epoch)
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

/* A failover or restart began between from_us (a release) and b's
 * outcome: the grant the release made may reach b's client only after its
 * reconnect, or not before its deadline (a client leaves a master at the
 * first step of its failover, and under wait_replicas a grant counts only
 * once the replicas have it). */
static int stall_before_outcome(const hist *h, int64_t from_us, const req *b) {
  int64_t o = outcome_us(b);
  for (int i = 0; i < h->nrestarts; i++)
    if (h->restarts[i].from_us >= from_us &&
        (o == 0 || h->restarts[i].from_us <= o))
      return 1;
  return 0;
}

/* A witness for the handoff of a's release: a live waiter queued before
 * it, with nothing around the release that excuses a missing grant, and
 * on a pool kind a front that fits once a's permits are back. */
static const req *handoff_witness(const hist *h, const req *a,
                                  const rtf_tol *tol) {
  /* A process killed up to tol.kill_ms after the release may have been
   * granted by it unseen (it had no time to log the grant); one killed
   * before, that was not dead yet tol.kill_ms before S, may have been
   * alive to Redis at the release, and granted by it (kill_near). So may
   * one whose network a fault took up to tol.kill_ms after the release:
   * the notice was still on its way (in the proxy, or unread by a
   * process the machine had not scheduled) (net_near). */
  int64_t clk = tol->clock_ms * 1000, kill = tol->kill_ms * 1000;
  int64_t from_us = kills_since(h, a->res, a->s_us, a->s_us - kill);
  int64_t heard_us = pause_end_over(h, a->s_us - clk, a->r_us + clk);
  for (size_t i = 0; i < h->nreqs; i++) {
    const req *b = &h->reqs[i];
    if (b != a &&
        live_waiter(h, b, a->res, a->epoch, a->s_us - clk, a->s_us - clk,
                    a->r_us + clk) &&
        !kill_near(h, a->res, from_us, a->r_us + clk + kill, queued_by(b)) &&
        !net_near(h, a->res, from_us, a->r_us + clk + kill, queued_by(b)) &&
        !sub_kill_near(h, a->res, a->s_us - clk, a->r_us + clk, queued_by(b)) &&
        !abandon_near(h, a->res, a->s_us - clk, a->r_us + clk, heard_us, clk,
                      kill, queued_by(b)) &&
        !stall_before_outcome(h, a->s_us - clk, b) &&
        (a->kind == RT_KIND_MUTEX ||
         front_fits(h, a, b, a->s_us - clk, a->r_us + clk, tol)))
      return b;
  }
  return NULL;
}

/* Rule 6: a release hands over at once, on every kind. */
void rule_handoff(hist *h, const size_t *g, size_t ng, const rtf_tol *tol,
                  FILE *out, rtf_counts *c) {
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
