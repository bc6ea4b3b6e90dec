/* The lock state machine: waits, grants, releases, the timers of a lock
 * (its deadline, its renewals, the local end of its lease) and the
 * per-resource watchdog, and the completions of their script calls.
 *
 * A lock is QUEUED from rt_wait() until Redis grants it (in the enqueue
 * reply when the queue was empty, or later by a notice on our channel),
 * HELD until rt_signal(), and RELEASING while a release or cancel is in
 * flight. A lock object lives until the user is done with it (`finished`)
 * and no op refers to it any more (handle.c).
 *
 * Every script call carries its completion (on_enqueue, rt__lock_on_try,
 * rt__lock_on_release, ...), and every timeout its callback (rt__lock_timeout, watchdog_fire). The
 * handle (handle.c) sits below this file; the entry points (request.c),
 * elections (election.c), notices and reconcile (notice.c), the queries
 * (query.c), rt_synchronize (sync.c) and the client's life cycle
 * (client.c) sit above it. */
#include <stdio.h>
#include <string.h>

#include "locks.h"
#include "reply.h"

static void watchdog_arm(rt__res *r, int64_t ms);

static void watchdog_fire(rt__timeout *t);

/* Ask Redis again, idempotently, where a wait of ours stands (queued
 * again at the tail only if Redis lost it), now or, while an enqueue of it
 * is in flight, once that is answered. */
void rt__lock_recheck(rt_lock_t *l) {
  if (l->state != RT_LOCK_QUEUED)
    return;
  if (l->enqueue == NULL)
    rt__lock_enqueue(l, 1);
  else
    l->recheck_due = 1; /* its answer may be older than what we heard */
}

/* Arm a held lock's one timer: for its next automatic renewal if it has
 * one and none is in flight (a period, but at most half the lease left),
 * else for the local end of the lease (then it turns LOST). */
void rt__lock_arm_held(rt_lock_t *l) {
  uint64_t now = rt__mono_ms();
  int64_t left = l->local_end_ms > now ? (int64_t)(l->local_end_ms - now) : 0;
  int64_t ms = left;
  l->renew_due = 0;
  if (l->renew_ms != 0 && !l->renewing) {
    int64_t every = l->renew_ms > 0 ? l->renew_ms : l->ttl_ms / 3;
    if (every > left / 2)
      every = left / 2;
    if (every < RT__RENEW_MIN_MS)
      every = RT__RENEW_MIN_MS;
    if (every < left) {
      ms = every;
      l->renew_due = 1;
    }
  }
  rt__timeout_set(&l->client->lp, &l->deadline, rt__lock_timeout, ms);
}

/* Redis said the lease ends at deadline_ms (its clock): count it locally
 * from our conservative view of that clock, and turn the lock LOST when
 * that passes. */
static void set_lease(rt_lock_t *l, int64_t lease_ms, int64_t deadline_ms) {
  l->lease_ms = (int32_t)lease_ms;
  l->deadline_ms = deadline_ms;
  l->local_end_ms = rt__clock_local(l->client, deadline_ms);
  rt__lock_arm_held(l);
}

/* Extend a held lock's lease by itself, as rt_extend with its TTL would;
 * the reply arms the next renewal (or a retry, if it failed). */
static void renew(rt_lock_t *l) {
  rt__op *op =
      rt__op_new(l->client, RT__CALL_EXTEND, l->res, l, rt__lock_on_extend);
  if (op != NULL) {
    op->renewal = 1;
    l->renewing = 1;
    rt__call_send(&op->call);
  }
  rt__lock_arm_held(l); /* the local end, or without memory another try */
}

/* Earlier waits of ours on the same resource that are still queued when a
 * later one is granted: Redis serves a client's requests in the order it
 * sent them, so each of them either was granted while our subscriber was
 * away or vanished from Redis. Ask about them. */
static void recheck_earlier(rt_lock_t *l) {
  rt__queue *head = &l->res->waiters;
  for (rt__queue *q = head->next; q != head;) {
    rt_lock_t *e = rt__queue_data(q, rt_lock_t, res_node);
    q = q->next;
    if (e->seq < l->seq)
      rt__lock_recheck(e);
  }
}

static void on_grant_acked(rt__call *call, int status, const rt__answer *a);

static void report_grant(rt_lock_t *l, uint64_t fence, int64_t lease_ms,
                         int64_t deadline_ms, int handoff);

/* wait_replicas: report a grant only once that many replicas have it.
 * Returns 1 when the grant now waits for them. */
static int grant_needs_acks(rt_lock_t *l, uint64_t fence, int64_t lease_ms,
                            int64_t deadline_ms, int handoff) {
  rt_client_t *c = l->client;
  if (c->cfg.wait_replicas == 0 || c->state == RT__C_CLOSING)
    return 0;
  if (l->acking)
    return 1; /* the same grant heard again (reconcile) */
  rt__op *op = rt__op_new(c, RT__CALL_REPLICAS, l->res, l, on_grant_acked);
  if (op == NULL)
    return 0; /* no memory to wait: report it, unacknowledged is better
                 than a grant nobody hears of */
  op->fence = fence;
  op->lease_ms = lease_ms;
  op->deadline_ms = deadline_ms;
  op->handoff = handoff;
  l->acking = 1;
  rt__call_send(&op->call);
  return 1;
}

void rt__lock_granted(rt_lock_t *l, uint64_t fence, int64_t lease_ms,
                      int64_t deadline_ms, int handoff) {
  if (l->state == RT_LOCK_HELD && fence != l->fence) {
    /* Redis granted this request anew (an enqueue retry after its keys
     * were lost): the hold we knew ended, and another may have held in
     * between. Its rt_signal frees the new grant by id. */
    rt__lock_turn_lost(l);
    return;
  }
  if (l->state != RT_LOCK_QUEUED)
    return; /* a cancel crossed the grant: its release hands it on */
  if (grant_needs_acks(l, fence, lease_ms, deadline_ms, handoff))
    return;
  report_grant(l, fence, lease_ms, deadline_ms, handoff);
}

/* The replicas answered for a grant: report it, or ask again. Too few
 * acknowledgements (replicas briefly missing: a failover under way, a
 * replica resyncing), or WAIT without a count (no answer: a CLIENT KILL,
 * a failover; or an error: the master turned replica and unblocked it),
 * leave a wait waiting: it asks Redis again (an enqueue retry), which
 * finds the grant and waits for the replicas again (at most one round per
 * wait_replicas_timeout_ms), or finds it lost and queues again; so a wait
 * ends only by a grant the replicas have or by its deadline (RT_EWAITTIMEOUT,
 * which gives the grant back). A try cannot wait: too few replicas give
 * the grant back and end it with RT_EREPLICAS. */
static void on_grant_acked(rt__call *call, int status, const rt__answer *a) {
  rt__op *op = rt__op_of(call);
  rt_lock_t *l = op->lock;
  rt_client_t *c = l->client;
  RT__UNUSED(a);
  l->acking = 0;
  int short_count = status == 0 && call->num < c->cfg.wait_replicas;
  if (l->state == RT_LOCK_QUEUED && (status != 0 || short_count) &&
      !l->is_try && c->state != RT__C_CLOSING) {
    c->stats.late_grants++;
    if (short_count)
      snprintf(c->last_error, sizeof(c->last_error),
               "a grant reached %lld of wait_replicas %d replicas within "
               "%lld ms: the wait asks again until its deadline",
               (long long)call->num, c->cfg.wait_replicas,
               (long long)c->cfg.wait_replicas_timeout_ms);
    rt__lock_recheck(l);
  } else if (l->state == RT_LOCK_QUEUED) {
    if (status == 0 && call->num >= l->client->cfg.wait_replicas) {
      report_grant(l, op->fence, op->lease_ms, op->deadline_ms, op->handoff);
    } else {
      snprintf(l->client->last_error, sizeof(l->client->last_error),
               "a grant reached %lld of wait_replicas %d replicas within "
               "%lld ms: given back",
               status == 0 ? (long long)call->num : 0LL,
               l->client->cfg.wait_replicas,
               (long long)l->client->cfg.wait_replicas_timeout_ms);
      l->state = RT_LOCK_RELEASING;
      l->end_status = (int16_t)RT_EREPLICAS;
      rt__lock_leave_queue(l);
      rt__lock_release(l, NULL, NULL);
      rt__lock_report_end(l, RT_EREPLICAS);
    }
  }
  rt__op_free(op);
}

static void report_grant(rt_lock_t *l, uint64_t fence, int64_t lease_ms,
                         int64_t deadline_ms, int handoff) {
  rt_client_t *c = l->client;
  if (rt__clock_local(c, deadline_ms) <= rt__mono_ms()) {
    /* By our clock the lease may already be over: never report such a
     * grant. Ask Redis, whose answer counts from a fresh send. */
    c->stats.late_grants++;
    rt__lock_recheck(l);
    return;
  }
  if (c->state == RT__C_CLOSING) {
    /* rt_client_close() was called: the wait ends canceled, and the lock
     * goes straight back. */
    l->state = RT_LOCK_RELEASING;
    l->end_status = (int16_t)RT_ECANCELED;
    rt__lock_leave_queue(l);
    rt__lock_release(l, NULL, NULL);
    rt__lock_report_end(l, RT_ECANCELED);
    return;
  }
  uint64_t now = uv_hrtime();
  c->stats.grants++;
  rt__hist_add(&c->stats.acquire, (now - l->since_ns) / 1000);
  if (handoff && l->res->last_release_ns != 0)
    rt__hist_add(&c->stats.handoff, (now - l->res->last_release_ns) / 1000);
  l->res->last_release_ns = 0;
  l->since_ns = now;
  rt__lock_leave_queue(l);
  recheck_earlier(l);
  /* Our own waiters behind this lock get no next-in-line notice. */
  if (!rt__queue_empty(&l->res->waiters))
    watchdog_arm(l->res, lease_ms + RT__REAP_SLACK_MS);
  rt__queue_remove(&l->node);
  rt__queue_insert_tail(&c->held, &l->node);
  l->state = RT_LOCK_HELD;
  l->fence = fence;
  set_lease(l, lease_ms, deadline_ms);
  l->reported = 1;
  l->cb(l, 0, l->data);
}

static void on_enqueue(rt__call *call, int status, const rt__answer *a);

static void on_reap(rt__call *call, int status, const rt__answer *a);

/* Ask Redis to queue l (retry: again, idempotently, after a lost reply or
 * to check where it stands). 0 or RT_ENOMEM: without memory a recheck is
 * left to the watchdog's next round. */
int rt__lock_enqueue(rt_lock_t *l, int retry) {
  rt__op *op = rt__op_new(l->client, RT__CALL_ENQUEUE, l->res, l, on_enqueue);
  if (op == NULL)
    return RT_ENOMEM;
  op->call.retry = retry ? 1 : 0;
  l->enqueue = op;
  rt__call_send(&op->call);
  return 0;
}

/* Take l's entry out of Redis: a release that also cancels a waiting entry.
 * Without memory for it the entry is left for the watchdog's reap. */
void rt__lock_release(rt_lock_t *l, rt_lock_cb cb, void *data) {
  if (rt__op_send(l, RT__CALL_RELEASE, rt__lock_on_release, cb, data) != 0 &&
      l->end_status != 0)
    rt__lock_wait_end(l, l->end_status);
}

/* Abandon a queued wait with status (cancel, deadline, close). */
void rt__lock_abort(rt_lock_t *l, int status) {
  l->state = RT_LOCK_RELEASING;
  l->end_status = (int16_t)status;
  rt__lock_leave_queue(l);
  rt__op *op = l->enqueue;
  if (op != NULL && !op->call.in_flight) {
    l->enqueued |= op->call.written;
    l->enqueue = NULL;
    rt__op_free(op); /* still in the outbox: never sent, or to be resent */
    op = NULL;
  }
  /* The callback comes once Redis confirms the entry is gone, but no later
   * than RT__ABORT_GRACE_MS from now (rt__lock_timeout reports it then): a
   * stalled or unreachable Redis must not hold a deadline up. The removal
   * then goes on behind. A request Redis never had ends on the next turn. */
  int never_sent = op == NULL && !l->enqueued;
  rt__timeout_set(&l->client->lp, &l->deadline, rt__lock_timeout,
                  never_sent ? 0 : RT__ABORT_GRACE_MS);
  if (op == NULL && !never_sent)
    rt__lock_release(l, NULL, NULL); /* else the enqueue reply sends it */
}

/* The one timeout of a lock: the wait's deadline, the grace for reporting
 * its end, a held lock's next automatic renewal, or the local end of its
 * lease. */
void rt__lock_timeout(rt__timeout *t) {
  rt_lock_t *l = rt__container_of(t, rt_lock_t, deadline);
  if (l->state == RT_LOCK_QUEUED)
    rt__lock_abort(l, RT_EWAITTIMEOUT);
  else if (l->state == RT_LOCK_RELEASING && !l->reported)
    rt__lock_wait_end(l,
                      l->end_status); /* Redis is slow to confirm: report now */
  else if (l->state == RT_LOCK_HELD && l->renew_due)
    renew(l);
  else if (l->state == RT_LOCK_HELD)
    rt__lock_turn_lost(l);
}

/* ---- watchdog -----------------------------------------------------------*/

/* Arm r's watchdog ms from now, unless it is armed to fire sooner: firing
 * early costs one reap call, firing late stalls the queue. */
static void watchdog_arm(rt__res *r, int64_t ms) {
  rt_client_t *c = r->client;
  if (rt__queue_empty(&r->waiters)) {
    rt__timeout_clear(&c->lp, &r->watchdog);
    return;
  }
  int64_t in = (ms > 0 ? ms : 0) +
               (int64_t)(rt__xorshift(&c->rand) % RT__REAP_JITTER_MS);
  /* An armed timeout's heap key is the loop time it is due at. */
  if (r->watchdog.armed && r->watchdog.hn.key <= rt__loop_now(&c->lp) + in)
    return;
  rt__timeout_set(&c->lp, &r->watchdog, watchdog_fire, in);
}

/* Arm r's watchdog for a holder lease that has left_ms to run (Redis
 * clock, as of a reply that just arrived): right after it if our waiter is
 * next in line, a little later otherwise. */
void rt__watchdog_arm_lease(rt__res *r, int64_t left_ms, int next) {
  watchdog_arm(r, (left_ms > 0 ? left_ms : 0) + RT__REAP_SLACK_MS +
                      (next ? 0 : RT__REAP_BACKUP_MS));
}

/* Our oldest wait on r that Redis should still have. */
static rt_lock_t *oldest_waiter(rt__res *r) {
  for (rt__queue *q = r->waiters.next; q != &r->waiters; q = q->next) {
    rt_lock_t *l = rt__queue_data(q, rt_lock_t, res_node);
    if (l->state == RT_LOCK_QUEUED && l->enqueue == NULL)
      return l;
  }
  return NULL;
}

static void send_reap(rt__res *r) {
  rt__op *op =
      rt__op_new(r->client, RT__CALL_REAP, r, oldest_waiter(r), on_reap);
  r->client->stats.reaps++;
  if (op != NULL)
    rt__call_send(&op->call);
  else
    watchdog_arm(r, r->client->cfg.command_timeout_ms);
}

static void watchdog_fire(rt__timeout *t) {
  rt__res *r = rt__container_of(t, rt__res, watchdog);
  if (!rt__queue_empty(&r->waiters))
    send_reap(r);
}

/* What every completion does first: dead entries that the answer of a
 * script on r found at the front of the queue are reaped at once. */
void rt__watchdog_answered(rt__res *r, int status, const rt__answer *a) {
  if (status == 0 && a->more)
    send_reap(r);
}

/* ---- completions of the script calls ------------------------------------*/

static void on_enqueue(rt__call *call, int status, const rt__answer *a) {
  rt__op *op = rt__op_of(call);
  rt_lock_t *l = op->lock;
  const rt__enqueue_answer *e = &a->u.enqueue;
  rt__watchdog_answered(op->res, status, a);
  l->enqueue = NULL;
  l->enqueued |= call->written;
  if (!call->replied && rt__client_usable(l->client) == 0) {
    if (l->state == RT_LOCK_QUEUED) {
      /* The reply was lost: ask again, idempotently, once reconnected. */
      call->retry = 1;
      l->enqueue = op;
      rt__call_send(call);
      return;
    }
    if (l->state == RT_LOCK_RELEASING)
      rt__lock_release(l, NULL, NULL);
    rt__op_free(op);
    return;
  }
  if (l->state == RT_LOCK_RELEASING) {
    if (status < 0 && call->replied) /* the script failed: nothing queued */
      rt__lock_wait_end(l, l->end_status);
    else
      rt__lock_release(l, NULL, NULL);
  } else if (status < 0) {
    if (l->state == RT_LOCK_QUEUED) {
      /* A script can fail after its push (an ACL refusing a later call):
       * take out whatever it left. */
      l->state = RT_LOCK_RELEASING;
      l->end_status = (int16_t)status;
      rt__lock_release(l, NULL, NULL);
      rt__lock_wait_end(l, status);
    }
  } else if (e->code == RT__ENQUEUE_GRANTED) {
    rt__lock_granted(l, e->grant.fence, e->grant.lease_ms, e->grant.deadline_ms,
                     0);
  } else {
    l->position = (uint32_t)e->position; /* also when a notice granted it */
    if (l->state == RT_LOCK_QUEUED)
      rt__watchdog_arm_lease(l->res, e->holder_left_ms, e->position <= 1);
  }
  if (l->recheck_due) {
    /* A grant heard while this enqueue was in flight could not be checked
     * then (e.g. before the first reply gave the Redis clock): ask now. */
    l->recheck_due = 0;
    rt__lock_recheck(l);
  }
  rt__op_free(op);
}

/* A try answered: held at once, or RT_EBUSY; what Redis granted to a try
 * that cannot be reported any more is given back. */
void rt__lock_on_try(rt__call *call, int status, const rt__answer *a) {
  rt__op *op = rt__op_of(call);
  rt_lock_t *l = op->lock;
  const rt__grant *g = &a->u.try.grant;
  int won = status == 0 && a->u.try.code == RT__TRY_GRANTED;
  rt__watchdog_answered(op->res, status, a);
  if (l->reported) {
    /* The client closed meanwhile: give back what Redis granted. */
    if (won) {
      l->end_status = (int16_t)RT_ECANCELED;
      rt__lock_release(l, NULL, NULL);
    }
  } else if (won &&
             rt__clock_local(l->client, g->deadline_ms) > rt__mono_ms()) {
    l->state =
        RT_LOCK_QUEUED; /* rt__lock_granted() moves it from queued to held */
    rt__lock_granted(l, g->fence, g->lease_ms, g->deadline_ms, 0);
  } else if (status == 0) {
    if (won) { /* granted with a lease already over by our clock */
      l->end_status = (int16_t)RT_EBUSY;
      rt__lock_release(l, NULL, NULL);
    }
    rt__lock_wait_end(l, RT_EBUSY);
  } else {
    if (!call->replied && rt__client_usable(l->client) == 0) {
      /* It may have been granted without us hearing: clean up. */
      l->end_status = (int16_t)status;
      rt__lock_release(l, NULL, NULL);
    }
    rt__lock_wait_end(l, status);
  }
  rt__op_free(op);
}

/* A release of a held lock ended with st: count it and tell the user. */
static void release_done(rt_lock_t *l, int st, rt_lock_cb cb, void *data) {
  l->client->stats.releases++;
  if (st == RT_ELOST)
    rt__lock_count_lost(l);
  rt__queue_remove(&l->node);
  rt__timeout_clear(&l->client->lp, &l->deadline);
  l->finished = 1;
  if (cb != NULL)
    cb(l, st, data);
}

/* wait_replicas: the release (and the handoff it wrote) reached the
 * replicas, or RT_EREPLICAS (the lock is released on the master all the
 * same). */
static void on_release_acked(rt__call *call, int status, const rt__answer *a) {
  rt__op *op = rt__op_of(call);
  int st = op->status;
  RT__UNUSED(a);
  if (st == 0 &&
      (status != 0 || call->num < op->lock->client->cfg.wait_replicas))
    st = RT_EREPLICAS;
  release_done(op->lock, st, op->cb.lock, op->data);
  rt__op_free(op);
}

static void released(rt__op *op, int status, const rt__answer *a) {
  rt_lock_t *l = op->lock;
  int st = status;
  if (status == 0)
    st =
        a->u.release.code == RT__RELEASE_RELEASED || op->retried ? 0 : RT_ELOST;
  if (st == 0 && l->client->cfg.wait_replicas > 0) {
    rt__op *ack =
        rt__op_new(l->client, RT__CALL_REPLICAS, l->res, l, on_release_acked);
    if (ack != NULL) {
      ack->cb.lock = op->cb.lock;
      ack->data = op->data;
      ack->status = st;
      rt__call_send(&ack->call);
      return;
    }
  }
  release_done(l, st, op->cb.lock, op->data);
}

void rt__lock_on_release(rt__call *call, int status, const rt__answer *a) {
  rt__op *op = rt__op_of(call);
  rt_lock_t *l = op->lock;
  rt__watchdog_answered(op->res, status, a);
  if (!call->replied && rt__client_usable(l->client) == 0) {
    op->retried = 1; /* "not found" then means released */
    rt__call_send(call);
    return;
  }
  if (l->end_status != 0)
    rt__lock_wait_end(l, l->end_status); /* a cancel, whatever Redis had */
  else
    released(op, status, a);
  rt__op_free(op);
}

void rt__lock_on_extend(rt__call *call, int status, const rt__answer *a) {
  rt__op *op = rt__op_of(call);
  rt_lock_t *l = op->lock;
  const rt__extend_answer *x = &a->u.extend;
  int st = status, held = l->state == RT_LOCK_HELD;
  rt__watchdog_answered(op->res, status, a);
  if (op->renewal)
    l->renewing = 0;
  if (status == 0 && x->code == RT__EXTEND_EXTENDED &&
      l->state == RT_LOCK_LOST) {
    /* Redis extended it, but the answer came after the lease ran out by
     * the local clock: the lock was reported lost and stays so (its
     * rt_signal frees the extended lease). */
    st = RT_ELOST;
  } else if (status == 0 && x->code == RT__EXTEND_EXTENDED) {
    l->ttl_ms = (int32_t)call->num; /* what later renewals ask for */
    if (held)
      set_lease(l, x->lease_ms, x->deadline_ms);
  } else if (status == 0) {
    st = RT_ELOST;
    if (held)
      rt__lock_turn_lost(l);
    else
      rt__lock_count_lost(l);
  } else if (op->renewal && held) {
    rt__lock_arm_held(l); /* no answer: try again while the lease lasts */
  }
  if (op->cb.lock != NULL)
    op->cb.lock(l, st, op->data);
  rt__op_free(op);
}

static void on_reap(rt__call *call, int status, const rt__answer *a) {
  rt__op *op = rt__op_of(call);
  rt__res *r = op->res;
  rt_lock_t *l = op->lock;
  const rt__reap_answer *p = &a->u.reap;
  rt__watchdog_answered(op->res, status, a);
  if (status < 0) {
    watchdog_arm(r, r->client->cfg.command_timeout_ms);
  } else if (l != NULL && l->state == RT_LOCK_QUEUED &&
             p->mine == RT__REAP_GONE && l->enqueue == NULL) {
    /* Our oldest wait is not in Redis any more: queue it again. */
    rt__lock_enqueue(l, 1);
  } else if (p->holder_left_ms >= 0) {
    rt__watchdog_arm_lease(r, p->holder_left_ms,
                           p->mine == RT__REAP_WAITING && p->position <= 1);
  }
  rt__op_free(op);
}
