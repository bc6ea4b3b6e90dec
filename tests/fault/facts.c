/* Questions about a history that several rules ask: faults near a span
 * of time, epochs, the live end of a hold, disturbed requests, reports. */
#include "history.h"

/* ---- helpers ------------------------------------------------------------- */

int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

int overlaps(int64_t a0, int64_t a1, int64_t b0, int64_t b1) {
  return a0 <= b1 && b0 <= a1;
}

/* Was the server paused during [from, to]? */
static int paused_in(const hist *h, int64_t from_us, int64_t to_us) {
  for (int i = 0; i < h->npauses; i++)
    if (overlaps(from_us, to_us, h->pauses[i].from_us, h->pauses[i].to_us))
      return 1;
  return 0;
}

int near_fault(const hist *h, int64_t from_us, int64_t to_us) {
  for (int i = 0; i < h->nrestarts; i++)
    if (overlaps(from_us, to_us, h->restarts[i].from_us, h->restarts[i].to_us))
      return 1;
  return paused_in(h, from_us, to_us);
}

/* The client's reconnect backoff is capped at 2 s (src/conn.c): after a
 * restart a client may need that long to notice the server is back. */
#define RECONNECT_CAP_US 2000000

/* The latest end of a stall (pause, or restart plus the reconnect backoff
 * cap) overlapping [from, to], or 0. */
int64_t stall_end_after(const hist *h, int64_t from_us, int64_t to_us) {
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
int64_t kills_since(const hist *h, int res, int64_t t_us, int64_t from_us) {
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

/* When a killed process was dead at the latest: its connections closed,
 * so Redis sees its death within tol.kill_ms after that. Mostly a few ms
 * after the kill (the driver reaps every 5 ms); on a loaded machine the
 * kernel may take far longer to finish it, and until then its subscriber
 * connection keeps its waiters alive to Redis (a grant to them costs
 * their lease, as a crashed holder's). The reap bounds that; without a
 * reap (the log ends first), the kill. */
int64_t dead_by_us(const wfile *f) {
  return f->reap_us > f->kill_us ? f->reap_us : f->kill_us;
}

int epoch_of_ms(const hist *h, int64_t ms) {
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
int64_t live_end(const hist *h, const req *r, const char **why) {
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
int64_t abandon_start(const hist *h, const req *r) {
  int64_t t = r->e_us + r->timeout_ms * 1000;
  const wfile *f = &h->files[r->wf];
  if (f->close_us && f->close_us >= r->e_us && f->close_us < t)
    t = f->close_us;
  return t;
}

int64_t outcome_us(const req *r) {
  if (r->granted)
    return r->g_us;
  if (r->failed)
    return r->f_us;
  return 0;
}

/* Did slot's network have a fault during [from, to]? */
int net_hit(const hist *h, int slot, int64_t from_us, int64_t to_us) {
  for (size_t i = 0; i < h->nnets; i++)
    if (h->nets[i].slot == slot &&
        overlaps(from_us, to_us, h->nets[i].from_us, h->nets[i].to_us))
      return 1;
  return 0;
}

/* Was the subscriber connection of f's process killed during [from, to]?
 * Its client may reconnect long after (through Sentinel it asks for the
 * master first: 1 s in one run), so the reconnect count can change only
 * after the outcome of a wait whose turn came while it was away. */
int sub_kill_hit(const hist *h, const wfile *f, int64_t from_us,
                 int64_t to_us) {
  for (size_t i = 0; i < h->nsubkills; i++) {
    const ckill *k = &h->subkills[i];
    if (k->slot == f->slot && k->gen == f->gen && k->t_us >= from_us &&
        k->t_us <= to_us)
      return 1;
  }
  return 0;
}

/* Did a key of res go during [from, to]? (all: only losses of every key) */
int loss_hit(const hist *h, int res, int64_t from_us, int64_t to_us, int all) {
  for (size_t i = 0; i < h->nlosses; i++) {
    const lspan *l = &h->losses[i];
    if ((l->res == res || l->res < 0) && (!all || l->all) &&
        overlaps(from_us, to_us, l->from_us, l->to_us))
      return 1;
  }
  return 0;
}

/* Under wait_replicas a grant counts only once the replicas have it, and
 * a paused server sends them no GETACK: a pause during [from, to] may
 * outlast the lease of a grant made just before it, which then ends
 * unreported, and the waiter queues again at the tail. */
static int replicas_stalled(const hist *h, int64_t from_us, int64_t to_us) {
  return h->wait_replicas > 0 && paused_in(h, from_us, to_us);
}

void mark_disturbed(hist *h, const rtf_tol *tol) {
  int64_t clk = tol->clock_ms * 1000;
  for (size_t i = 0; i < h->nreqs; i++) {
    req *r = &h->reqs[i];
    int64_t o = outcome_us(r);
    /* A multi-lock's lock: its E time is the set's, not its enqueue's. */
    r->dist = r->ghost || r->multi || o == 0 || r->rc_e != r->rc_end ||
              net_hit(h, h->files[r->wf].slot, r->e_us, o) ||
              sub_kill_hit(h, &h->files[r->wf], r->e_us, o) ||
              loss_hit(h, r->res, r->e_us - clk, o + clk, 0) ||
              replicas_stalled(h, r->e_us, o);
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

void where(const hist *h, const req *r, int line, char *buf, size_t cap) {
  if (line < 0)
    snprintf(buf, cap, "driver.log:%d", -line);
  else
    snprintf(buf, cap, "%s:%d", h->files[r->wf].name, line);
}

int report(hist *h, FILE *out, int rule, rtf_counts *c) {
  c->violations++;
  return h->printed[rule]++ < MAX_PRINT && out != NULL;
}
