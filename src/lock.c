/* The lock state machine: waits, grants, releases, cancels, extends,
 * queries, and the per-resource watchdog.
 *
 * A lock is QUEUED from rt_wait() until Redis grants it (in the enqueue
 * reply when the queue was empty, or later by a notice on our channel),
 * HELD until rt_signal(), and RELEASING while a release or cancel is in
 * flight. A lock object lives until the user is done with it (`finished`)
 * and no op refers to it any more.
 *
 * Every script call carries its completion (on_enqueue, on_release, ...),
 * and every timeout its callback (lock_timeout, watchdog_fire); the
 * queries (query.c), rt_synchronize (sync.c, through rt__lock_hooks) and
 * the client's life cycle (client.c) sit above this file. */
#include <stdio.h>
#include <string.h>

#include "locks.h"
#include "reply.h"

/* ---- life of a lock object ---------------------------------------------- */

/* What a request asks of its resource: the multi-holder scripts' kind
 * ("" for a mutex) and the permits it takes (0: all). */
typedef struct lock_kind {
  char kind[RT__KIND_MAX];
  uint32_t permits;
  const char *value; /* an election's candidate value, or NULL */
  size_t value_len;
} lock_kind;

/* An election value: printable ASCII (it rides last in Redis records and
 * notices, as a label does), at most RT_VALUE_MAX bytes. */
static int check_value(const char *value, size_t len) {
  if (len > RT_VALUE_MAX || (len > 0 && value == NULL))
    return RT_EINVAL;
  for (size_t i = 0; i < len; i++)
    if (value[i] < 0x20 || value[i] > 0x7e)
      return RT_EINVAL;
  return 0;
}

/* req (NULL: a mutex) as the scripts take it, or RT_EINVAL. */
static int kind_of(const rt_request_t *req, lock_kind *k) {
  memset(k, 0, sizeof(*k));
  if (req == NULL || req->kind == RT_KIND_MUTEX)
    return 0;
  switch (req->kind) {
  case RT_KIND_SEMAPHORE:
    if (req->of < 1 || req->of > RT_PERMITS_MAX || req->permits > req->of)
      return RT_EINVAL;
    snprintf(k->kind, sizeof(k->kind), "s:%u", req->of);
    k->permits = req->permits;
    return 0;
  case RT_KIND_SHARED:
    memcpy(k->kind, "rw", 3);
    k->permits = 1;
    return 0;
  case RT_KIND_EXCLUSIVE:
    memcpy(k->kind, "rw", 3);
    return 0; /* all of them */
  case RT_KIND_ELECTION:
    if (check_value(req->value, req->value_len) != 0)
      return RT_EINVAL;
    memcpy(k->kind, "e", 2);
    k->permits = 1;
    k->value = req->value_len > 0 ? req->value : "";
    k->value_len = req->value_len;
    return 0;
  default:
    return RT_EINVAL;
  }
}

/* The resource takes the lock's kind, unless another lock of ours uses it
 * as another kind right now (RT_EKIND). */
static int res_take_kind(rt__res *r, const lock_kind *k) {
  if (r->kind_locks > 0 && strcmp(r->kind, k->kind) != 0)
    return RT_EKIND;
  if (r->kind_locks++ == 0)
    memcpy(r->kind, k->kind, sizeof(r->kind));
  return 0;
}

/* A new lock handle, or NULL with *err (RT_ENOMEM, RT_EKIND). */
static rt_lock_t *lock_new(rt_client_t *c, const void *name, size_t len,
                           const lock_kind *k, int64_t ttl_ms, rt_lock_cb cb,
                           void *data, int *err) {
  char id[RT__ENTRY_MAX];
  uint64_t seq = ++c->next_seq;
  size_t id_len = rt__entry_format(id, c->id, seq);
  /* The id (and a value) stored at their own length: pending waiters are
   * many. */
  rt_lock_t *l = rt__calloc(1, sizeof(*l) + id_len + 1 + k->value_len + 1);
  *err = RT_ENOMEM;
  if (l == NULL)
    return NULL;
  l->res = rt__res_get(c, name, len);
  l->seq = seq;
  if (l->res != NULL && (*err = res_take_kind(l->res, k)) != 0) {
    rt__res_unref(l->res);
    rt__free(l);
    return NULL;
  }
  if (l->res == NULL ||
      rt__map_put(&c->locks, &l->seq, sizeof(l->seq), l) != 0) {
    if (l->res != NULL) {
      l->res->kind_locks--;
      rt__res_unref(l->res);
    }
    *err = RT_ENOMEM;
    rt__free(l);
    return NULL;
  }
  l->permits = k->permits;
  l->client = c;
  memcpy(l->id, id, id_len + 1);
  if (k->value != NULL) {
    memcpy(l->id + id_len + 1, k->value, k->value_len);
    l->value = l->id + id_len + 1;
    l->value_len = (uint32_t)k->value_len;
  }
  l->id_len = (uint16_t)id_len;
  l->state = RT_LOCK_QUEUED;
  l->ttl_ms = (int32_t)ttl_ms;
  l->cb = cb;
  l->data = data;
  l->since_ns = uv_hrtime();
  rt__queue_init(&l->res_node);
  rt__queue_insert_tail(&c->pending, &l->node);
  rt__queue_insert_tail(&c->all, &l->all_node);
  return l;
}

static void lock_free(rt_lock_t *l) {
  rt_client_t *c = l->client;
  rt__map_del(&c->locks, &l->seq, sizeof(l->seq));
  rt__queue_remove(&l->res_node);
  rt__queue_remove(&l->node);
  rt__queue_remove(&l->all_node);
  rt__timeout_clear(&c->lp, &l->deadline);
  l->res->kind_locks--;
  rt__res_unref(l->res);
  if (l->hooks != NULL)
    l->hooks->freed(l);
  rt__free(l);
}

/* While the client closes, handles stay valid until its close callback. */
static void maybe_free(rt_lock_t *l) {
  if (l->finished && l->ops == 0 && l->client->state != RT__C_CLOSING)
    lock_free(l);
}

void rt__lock_free_all(rt_client_t *c) {
  while (!rt__queue_empty(&c->all))
    lock_free(rt__queue_data(c->all.next, rt_lock_t, all_node));
}

/* Stop waiting: out of the resource's waiters, no deadline. */
static void leave_queue(rt_lock_t *l) {
  rt__queue_remove(&l->res_node);
  rt__timeout_clear(&l->client->lp, &l->deadline);
  if (rt__queue_empty(&l->res->waiters))
    rt__timeout_clear(&l->client->lp, &l->res->watchdog);
}

static int send_enqueue(rt_lock_t *l, int retry);
static void watchdog_arm(rt__res *r, int64_t ms);
static void watchdog_fire(rt__timeout *t);
static void lock_timeout(rt__timeout *t);

/* Ask Redis again, idempotently, where a wait of ours stands (queued
 * again at the tail only if Redis lost it), now or, while an enqueue of it
 * is in flight, once that is answered. */
static void recheck(rt_lock_t *l) {
  if (l->state != RT_LOCK_QUEUED)
    return;
  if (l->enqueue == NULL)
    send_enqueue(l, 1);
  else
    l->recheck_due = 1; /* its answer may be older than what we heard */
}

/* Count a lock found lost in the statistics, once however it is found. */
static void count_lost(rt_lock_t *l) {
  if (!l->lost_counted)
    l->client->stats.lost++;
  l->lost_counted = 1;
}

/* A held lock may be gone: tell the user once. */
static void turn_lost(rt_lock_t *l) {
  if (l->state != RT_LOCK_HELD)
    return;
  l->state = RT_LOCK_LOST;
  count_lost(l);
  rt__timeout_clear(&l->client->lp, &l->deadline);
  if (l->lost_cb != NULL)
    l->lost_cb(l, l->data);
}

/* Arm a held lock's one timer: for its next automatic renewal if it has
 * one and none is in flight (a period, but at most half the lease left),
 * else for the local end of the lease (then it turns LOST). */
static void arm_held(rt_lock_t *l) {
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
  rt__timeout_set(&l->client->lp, &l->deadline, lock_timeout, ms);
}

/* Redis said the lease ends at deadline_ms (its clock): count it locally
 * from our conservative view of that clock, and turn the lock LOST when
 * that passes. */
static void set_lease(rt_lock_t *l, int64_t lease_ms, int64_t deadline_ms) {
  l->lease_ms = (int32_t)lease_ms;
  l->deadline_ms = deadline_ms;
  l->local_end_ms = rt__clock_local(l->client, deadline_ms);
  arm_held(l);
}

static void on_extend(rt__call *call, int status, const rt__answer *a);

/* Extend a held lock's lease by itself, as rt_extend with its TTL would;
 * the reply arms the next renewal (or a retry, if it failed). */
static void renew(rt_lock_t *l) {
  rt__op *op = rt__op_new(l->client, RT__CALL_EXTEND, l->res, l, on_extend);
  if (op != NULL) {
    op->renewal = 1;
    l->renewing = 1;
    rt__call_send(&op->call);
  }
  arm_held(l); /* the local end, or without memory another try */
}

/* Tell the user, once, that the wait ended without a grant, and count it. */
static void report_end(rt_lock_t *l, int status) {
  if (l->reported)
    return;
  rt_stats_t *st = &l->client->stats;
  if (status == RT_ECANCELED)
    st->cancels++;
  else if (status == RT_EDEADLINE)
    st->deadlines++;
  else if (status == RT_EBUSY)
    st->busy++;
  else
    st->failures++;
  l->reported = 1;
  l->cb(l, status, l->data);
}

/* The wait is over without a grant: tell the user (once) and let go. */
static void wait_end(rt_lock_t *l, int status) {
  leave_queue(l);
  rt__queue_remove(&l->node);
  rt__map_del(&l->client->locks, &l->seq, sizeof(l->seq));
  l->finished = 1;
  l->ops++; /* keep l alive through the callback */
  report_end(l, status);
  l->ops--;
  maybe_free(l);
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
      recheck(e);
  }
}

static void send_release(rt_lock_t *l, rt_lock_cb cb, void *data);

static void on_grant_acked(rt__call *call, int status, const rt__answer *a);
static rt__op *op_of(rt__call *call);

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

static void report_grant(rt_lock_t *l, uint64_t fence, int64_t lease_ms,
                         int64_t deadline_ms, int handoff);

static void granted(rt_lock_t *l, uint64_t fence, int64_t lease_ms,
                    int64_t deadline_ms, int handoff) {
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
 * ends only by a grant the replicas have or by its deadline (RT_EDEADLINE,
 * which gives the grant back). A try cannot wait: too few replicas give
 * the grant back and end it with RT_EREPLICAS. */
static void on_grant_acked(rt__call *call, int status, const rt__answer *a) {
  rt__op *op = op_of(call);
  rt_lock_t *l = op->lock;
  rt_client_t *c = l->client;
  RT__UNUSED(a);
  l->acking = 0;
  int short_count = status == 0 && call->num < c->cfg.wait_replicas;
  if (l->state == RT_LOCK_QUEUED && (status != 0 || short_count) &&
      !l->is_try && c->state != RT__C_CLOSING) {
    if (short_count)
      snprintf(c->last_error, sizeof(c->last_error),
               "a grant reached %lld of wait_replicas %d replicas within "
               "%lld ms: the wait asks again until its deadline",
               (long long)call->num, c->cfg.wait_replicas,
               (long long)c->cfg.wait_replicas_timeout_ms);
    recheck(l);
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
      leave_queue(l);
      send_release(l, NULL, NULL);
      report_end(l, RT_EREPLICAS);
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
    recheck(l);
    return;
  }
  if (c->state == RT__C_CLOSING) {
    /* rt_client_close() was called: the wait ends canceled, and the lock
     * goes straight back. */
    l->state = RT_LOCK_RELEASING;
    l->end_status = (int16_t)RT_ECANCELED;
    leave_queue(l);
    send_release(l, NULL, NULL);
    report_end(l, RT_ECANCELED);
    return;
  }
  uint64_t now = uv_hrtime();
  c->stats.grants++;
  rt__hist_add(&c->stats.acquire, (now - l->since_ns) / 1000);
  if (handoff && l->res->last_release_ns != 0)
    rt__hist_add(&c->stats.handoff, (now - l->res->last_release_ns) / 1000);
  l->res->last_release_ns = 0;
  l->since_ns = now;
  leave_queue(l);
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

/* ---- ops: script calls of a lock or a resource ---------------------------- */

rt__op *rt__op_new(rt_client_t *c, rt__call_kind kind, rt__res *res,
                   rt_lock_t *lock, rt__call_cb done) {
  rt__op *op = rt__calloc(1, sizeof(*op));
  if (op == NULL)
    return NULL;
  const char *keys = res->keys;
  if (res->kind[0] != '\0' && res->kind_locks > 0)
    kind = rt__call_multi(kind); /* a multi-holder resource's scripts */
  if (rt__call_is_multi(kind))
    keys += (size_t)RT__KEYS * res->key_len; /* and keys */
  rt__call_init(&op->call, &c->calls, kind, keys, res->key_len, done, NULL);
  op->call.res_kind = res->kind;
  op->res = res;
  op->lock = lock;
  res->refs++;
  if (lock != NULL) {
    lock->ops++;
    op->call.id = lock->id;
    op->call.id_len = lock->id_len;
    op->call.num = lock->ttl_ms;
    op->call.permits = lock->permits;
    op->call.label = lock->value;
    op->call.label_len = lock->value_len;
  }
  return op;
}

void rt__op_free(rt__op *op) {
  rt_lock_t *lock = op->lock;
  rt__call_abandon(&op->call);
  rt__res_unref(op->res);
  rt__free(op->copy);
  rt__free(op);
  if (lock != NULL) {
    lock->ops--;
    maybe_free(lock);
  }
}

static rt__op *op_of(rt__call *call) {
  return rt__container_of(call, rt__op, call);
}

/* Send a call of kind for l, with done as its completion and the user's
 * cb and data for it to report to. 0 or RT_ENOMEM. */
static int send_op(rt_lock_t *l, rt__call_kind kind, rt__call_cb done,
                   rt_lock_cb cb, void *data) {
  rt__op *op = rt__op_new(l->client, kind, l->res, l, done);
  if (op == NULL)
    return RT_ENOMEM;
  op->cb.lock = cb;
  op->data = data;
  rt__call_send(&op->call);
  return 0;
}

static void on_enqueue(rt__call *call, int status, const rt__answer *a);
static void on_release(rt__call *call, int status, const rt__answer *a);
static void on_try(rt__call *call, int status, const rt__answer *a);
static void on_reap(rt__call *call, int status, const rt__answer *a);

/* Ask Redis to queue l (retry: again, idempotently, after a lost reply or
 * to check where it stands). 0 or RT_ENOMEM: without memory a recheck is
 * left to the watchdog's next round. */
static int send_enqueue(rt_lock_t *l, int retry) {
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
static void send_release(rt_lock_t *l, rt_lock_cb cb, void *data) {
  if (send_op(l, RT__CALL_RELEASE, on_release, cb, data) != 0 &&
      l->end_status != 0)
    wait_end(l, l->end_status);
}

/* Abandon a queued wait with status (cancel, deadline, close). */
static void abort_wait(rt_lock_t *l, int status) {
  l->state = RT_LOCK_RELEASING;
  l->end_status = (int16_t)status;
  leave_queue(l);
  rt__op *op = l->enqueue;
  if (op != NULL && !op->call.in_flight) {
    l->enqueued |= op->call.written;
    l->enqueue = NULL;
    rt__op_free(op); /* still in the outbox: never sent, or to be resent */
    op = NULL;
  }
  /* The callback comes once Redis confirms the entry is gone, but no later
   * than RT__ABORT_GRACE_MS from now (lock_timeout reports it then): a
   * stalled or unreachable Redis must not hold a deadline up. The removal
   * then goes on behind. A request Redis never had ends on the next turn. */
  int never_sent = op == NULL && !l->enqueued;
  rt__timeout_set(&l->client->lp, &l->deadline, lock_timeout,
                  never_sent ? 0 : RT__ABORT_GRACE_MS);
  if (op == NULL && !never_sent)
    send_release(l, NULL, NULL); /* else the enqueue reply sends it */
}

/* The one timeout of a lock: the wait's deadline, the grace for reporting
 * its end, a held lock's next automatic renewal, or the local end of its
 * lease. */
static void lock_timeout(rt__timeout *t) {
  rt_lock_t *l = rt__container_of(t, rt_lock_t, deadline);
  if (l->state == RT_LOCK_QUEUED)
    abort_wait(l, RT_EDEADLINE);
  else if (l->state == RT_LOCK_RELEASING && !l->reported)
    wait_end(l, l->end_status); /* Redis is slow to confirm: report now */
  else if (l->state == RT_LOCK_HELD && l->renew_due)
    renew(l);
  else if (l->state == RT_LOCK_HELD)
    turn_lost(l);
}

/* ---- watchdog ----------------------------------------------------------- */

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
static void watchdog_arm_lease(rt__res *r, int64_t left_ms, int next) {
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

static void on_owned(rt__call *call, int status, const rt__answer *a);

/* After a reconnect: waits may have missed their grant, and held locks may
 * be gone with the server's data; ask Redis about both. A held lock found
 * lost turns RT_LOCK_LOST (rt_signal then reports RT_ELOST). */
void rt__lock_reconcile(rt_client_t *c) {
  /* The retried enqueue is idempotent; an entry lost with the server's
   * data is queued again at the tail. */
  for (rt__queue *q = c->pending.next; q != &c->pending;) {
    rt_lock_t *l = rt__queue_data(q, rt_lock_t, node);
    q = q->next;
    recheck(l);
  }
  for (rt__queue *q = c->held.next; q != &c->held; q = q->next) {
    rt_lock_t *l = rt__queue_data(q, rt_lock_t, node);
    rt__op *op;
    if (l->state == RT_LOCK_HELD &&
        (op = rt__op_new(c, rt__lock_owned_call(l), l->res, l, on_owned)) !=
            NULL) {
      op->call.num = 0; /* no waiters listed */
      rt__call_send(&op->call);
    }
  }
}

/* ---- completions of the script calls --------------------------------------- */

/* What every completion does first: dead entries left at the front of the
 * queue are reaped at once. */
static void answered(rt__op *op, int status, const rt__answer *a) {
  if (status == 0 && a->more)
    send_reap(op->res);
}

static void on_enqueue(rt__call *call, int status, const rt__answer *a) {
  rt__op *op = op_of(call);
  rt_lock_t *l = op->lock;
  const rt__enqueue_answer *e = &a->u.enqueue;
  answered(op, status, a);
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
      send_release(l, NULL, NULL);
    rt__op_free(op);
    return;
  }
  if (l->state == RT_LOCK_RELEASING) {
    if (status < 0 && call->replied) /* the script failed: nothing queued */
      wait_end(l, l->end_status);
    else
      send_release(l, NULL, NULL);
  } else if (status < 0) {
    if (l->state == RT_LOCK_QUEUED) {
      /* A script can fail after its push (an ACL refusing a later call):
       * take out whatever it left. */
      l->state = RT_LOCK_RELEASING;
      l->end_status = (int16_t)status;
      send_release(l, NULL, NULL);
      wait_end(l, status);
    }
  } else if (e->code == RT__ENQUEUE_GRANTED) {
    granted(l, e->grant.fence, e->grant.lease_ms, e->grant.deadline_ms, 0);
  } else {
    l->position = (uint32_t)e->position; /* also when a notice granted it */
    if (l->state == RT_LOCK_QUEUED)
      watchdog_arm_lease(l->res, e->holder_left_ms, e->position <= 1);
  }
  if (l->recheck_due) {
    /* A grant heard while this enqueue was in flight could not be checked
     * then (e.g. before the first reply gave the Redis clock): ask now. */
    l->recheck_due = 0;
    recheck(l);
  }
  rt__op_free(op);
}

/* A release of a held lock ended with st: count it and tell the user. */
static void release_done(rt_lock_t *l, int st, rt_lock_cb cb, void *data) {
  l->client->stats.releases++;
  if (st == RT_ELOST)
    count_lost(l);
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
  rt__op *op = op_of(call);
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

static void on_release(rt__call *call, int status, const rt__answer *a) {
  rt__op *op = op_of(call);
  rt_lock_t *l = op->lock;
  answered(op, status, a);
  if (!call->replied && rt__client_usable(l->client) == 0) {
    op->retried = 1; /* "not found" then means released */
    rt__call_send(call);
    return;
  }
  if (l->end_status != 0)
    wait_end(l, l->end_status); /* a cancel, whatever Redis had */
  else
    released(op, status, a);
  rt__op_free(op);
}

static void on_extend(rt__call *call, int status, const rt__answer *a) {
  rt__op *op = op_of(call);
  rt_lock_t *l = op->lock;
  const rt__extend_answer *x = &a->u.extend;
  int st = status, held = l->state == RT_LOCK_HELD;
  answered(op, status, a);
  if (op->renewal)
    l->renewing = 0;
  if (status == 0 && x->code == RT__EXTEND_EXTENDED) {
    l->ttl_ms = (int32_t)call->num; /* what later renewals ask for */
    if (held)
      set_lease(l, x->lease_ms, x->deadline_ms);
  } else if (status == 0) {
    st = RT_ELOST;
    if (held)
      turn_lost(l);
    else
      count_lost(l);
  } else if (op->renewal && held) {
    arm_held(l); /* no answer: try again while the lease lasts */
  }
  if (op->cb.lock != NULL)
    op->cb.lock(l, st, op->data);
  rt__op_free(op);
}

static void on_try(rt__call *call, int status, const rt__answer *a) {
  rt__op *op = op_of(call);
  rt_lock_t *l = op->lock;
  const rt__grant *g = &a->u.try.grant;
  int won = status == 0 && a->u.try.code == RT__TRY_GRANTED;
  answered(op, status, a);
  if (l->reported) {
    /* The client closed meanwhile: give back what Redis granted. */
    if (won) {
      l->end_status = (int16_t)RT_ECANCELED;
      send_release(l, NULL, NULL);
    }
  } else if (won &&
             rt__clock_local(l->client, g->deadline_ms) > rt__mono_ms()) {
    l->state = RT_LOCK_QUEUED; /* granted() moves it from queued to held */
    granted(l, g->fence, g->lease_ms, g->deadline_ms, 0);
  } else if (status == 0) {
    if (won) { /* granted with a lease already over by our clock */
      l->end_status = (int16_t)RT_EBUSY;
      send_release(l, NULL, NULL);
    }
    wait_end(l, RT_EBUSY);
  } else {
    if (!call->replied && rt__client_usable(l->client) == 0) {
      /* It may have been granted without us hearing: clean up. */
      l->end_status = (int16_t)status;
      send_release(l, NULL, NULL);
    }
    wait_end(l, status);
  }
  rt__op_free(op);
}

static void on_reap(rt__call *call, int status, const rt__answer *a) {
  rt__op *op = op_of(call);
  rt__res *r = op->res;
  rt_lock_t *l = op->lock;
  const rt__reap_answer *p = &a->u.reap;
  answered(op, status, a);
  if (status < 0) {
    watchdog_arm(r, r->client->cfg.command_timeout_ms);
  } else if (l != NULL && l->state == RT_LOCK_QUEUED &&
             p->mine == RT__REAP_GONE && l->enqueue == NULL) {
    /* Our oldest wait is not in Redis any more: queue it again. */
    send_enqueue(l, 1);
  } else if (p->holder_left_ms >= 0) {
    watchdog_arm_lease(r, p->holder_left_ms,
                       p->mine == RT__REAP_WAITING && p->position <= 1);
  }
  rt__op_free(op);
}

rt__call_kind rt__lock_owned_call(const rt_lock_t *l) {
  /* A multi-holder resource has many holders: its reap says whether the
   * given request is one of them. */
  return l->res->kind[0] != '\0' ? RT__CALL_REAP : RT__CALL_INSPECT;
}

int rt__lock_owns(rt_lock_t *l, const rt__call *call, const rt__answer *a) {
  int owned;
  if (call->kind == RT__CALL_INSPECT)
    owned = a->u.inspect.holder->len > 0 &&
            strcmp(a->u.inspect.holder->str, l->id) == 0;
  else
    owned = a->u.reap.mine == RT__REAP_HOLDER;
  if (!owned)
    turn_lost(l);
  return owned;
}

/* After a reconnect: is a lock we held still ours? */
static void on_owned(rt__call *call, int status, const rt__answer *a) {
  rt__op *op = op_of(call);
  if (status == 0)
    rt__lock_owns(op->lock, call, a);
  rt__op_free(op);
}

/* A give-back answered: a lost reply is sent again (a release by id of a
 * request that neither holds nor waits changes nothing). */
static void on_given_back(rt__call *call, int status, const rt__answer *a) {
  rt__op *op = op_of(call);
  answered(op, status, a);
  if (!call->replied && rt__client_usable(op->res->client) == 0) {
    rt__call_send(call);
    return;
  }
  rt__op_free(op);
}

/* Release or cancel request seq of ours on r (kind as the scripts take it,
 * "" a mutex) by its id: a grant that no wait of ours wants any more. */
static void give_back(rt__res *r, uint64_t seq, const char *kind,
                      size_t kind_len) {
  rt_client_t *c = r->client;
  rt__op *op = rt__calloc(1, sizeof(*op));
  char *copy = rt__malloc(RT__ENTRY_MAX + kind_len + 1);
  if (op == NULL || copy == NULL) {
    /* Without memory the grant runs out its lease, as before. */
    rt__free(op);
    rt__free(copy);
    rt__res_unref(r);
    return;
  }
  size_t id_len = rt__entry_format(copy, c->id, seq);
  char *k = copy + id_len + 1;
  memcpy(k, kind, kind_len);
  k[kind_len] = '\0';
  rt__call_kind ck = RT__CALL_RELEASE;
  const char *keys = r->keys;
  if (kind_len > 0) {
    ck = rt__call_multi(ck);
    keys += (size_t)RT__KEYS * r->key_len;
  }
  rt__call_init(&op->call, &c->calls, ck, keys, r->key_len, on_given_back,
                NULL);
  op->call.res_kind = k;
  op->call.id = copy;
  op->call.id_len = id_len;
  op->res = r; /* the reference the caller took */
  op->copy = copy;
  rt__call_send(&op->call);
}

/* A grant notice of a request we no longer know (we gave it up, and stale
 * state brought it back: a failover to a replica that missed the cancel
 * or the release). Redis heard a live subscriber, so nobody else would
 * be granted before its lease ran out: give it back now. Only a request
 * this client made and forgot qualifies, so a grant still wanted is never
 * released; late or repeated notices cost one call that changes nothing. */
static void give_back_unknown(rt_client_t *c, const rt__notice *n) {
  char *name;
  long len;
  if (n->res_esc == NULL || n->seq == 0 || n->seq > c->next_seq ||
      n->res_esc_len > 3 * (size_t)RT_NAME_MAX ||
      (name = rt__malloc(n->res_esc_len + 1)) == NULL)
    return;
  len = rt__unescape_name(n->res_esc, n->res_esc_len, name);
  rt__res *r = len < 0 || rt__check_name(name, (size_t)len) != 0
                   ? NULL
                   : rt__res_get(c, name, (size_t)len);
  rt__free(name);
  if (r != NULL)
    give_back(r, n->seq, n->res_kind, n->res_kind_len);
}

void rt__lock_on_notice(rt_client_t *c, const rt__notice *n) {
  rt_lock_t *l = rt__map_get(&c->locks, &n->seq, sizeof(n->seq));
  if (l == NULL) {
    if (n->kind == 'g')
      give_back_unknown(c, n); /* a request we already gave up on */
    return;
  } else if (n->kind == 'n') {
    /* Next in line: the lease in front ends at n->deadline_ms. */
    if (l->state == RT_LOCK_QUEUED) {
      uint64_t end = rt__clock_local(c, n->deadline_ms), now = rt__mono_ms();
      watchdog_arm_lease(l->res, end > now ? (int64_t)(end - now) : 0, 1);
    }
  } else if (n->kind == 'l') {
    turn_lost(l); /* evicted by an operator */
  } else {
    /* Granted by a handoff, so it waited; if the enqueue reply is still on
     * its way, its exact position comes with it. */
    if (l->position == 0)
      l->position = 1;
    if (l->state == RT_LOCK_RELEASING) {
      /* Its release or cancel is on its way, but may have run before this
       * grant (stale state brought the entry back): hand it on too. */
      l->res->refs++;
      give_back(l->res, l->seq, l->res->kind, strlen(l->res->kind));
      return;
    }
    if (c->cfg.wait_replicas > 0 && l->state == RT_LOCK_QUEUED) {
      /* A notice can come through a replica: a demoted master keeps its
       * subscribers and replays the new master's notices, whose waiters
       * that master counted as gone and skipped. Where failover safety
       * was asked for, the master confirms first (an enqueue retry: its
       * GRANTED answer waits for the replicas as any grant). */
      if (!l->acking)
        recheck(l);
      return;
    }
    granted(l, n->fence, n->lease_ms, n->deadline_ms, 1);
  }
}

/* Closing: waits end with RT_ECANCELED (their entries are taken out of
 * Redis), held locks are released. Handles stay valid until close_cb. */
void rt__lock_close_all(rt_client_t *c) {
  rt__queue q;
  rt__queue_init(&q);
  rt__queue_move(&c->pending, &q);
  while (!rt__queue_empty(&q)) {
    rt_lock_t *l = rt__queue_data(q.next, rt_lock_t, node);
    rt__queue_remove(&l->node);
    rt__queue_insert_tail(&c->pending, &l->node);
    if (l->state == RT_LOCK_QUEUED)
      abort_wait(l, RT_ECANCELED);
    report_end(l, l->end_status ? l->end_status : RT_ECANCELED);
  }
  for (rt__queue *it = c->held.next; it != &c->held; it = it->next) {
    rt_lock_t *l = rt__queue_data(it, rt_lock_t, node);
    if (l->hooks != NULL)
      l->hooks->closing(l);
    if (l->state == RT_LOCK_HELD || l->state == RT_LOCK_LOST) {
      l->state = RT_LOCK_RELEASING;
      l->end_status = (int16_t)RT_ECANCELED;
      send_release(l, NULL, NULL);
    }
  }
}

/* ---- public API -------------------------------------------------------- */

int rt__check_request(rt_client_t *c, const void *name, size_t len,
                      int64_t ttl_ms, const void *cb, int64_t *ttl) {
  if (c == NULL)
    return RT_EINVAL;
  int err = rt__client_usable(c);
  if (err == 0 && cb == NULL)
    err = RT_ENOCB;
  if (err == 0)
    err = rt__check_name(name, len);
  if (err == 0 && ttl != NULL)
    err = rt__resolve_ttl(ttl_ms, c->cfg.default_ttl_ms, ttl);
  return err;
}

/* ---- reentrancy ---------------------------------------------------------- */

/* A reentrant grant or release, reported from the loop. */
typedef struct reentry {
  rt__later later;
  rt_lock_t *lock;
  rt_lock_cb cb; /* may be NULL (a release's) */
  void *data;
  int status;
} reentry;

static void reentry_report(rt__later *later) {
  reentry *e = rt__container_of(later, reentry, later);
  rt_lock_t *l = e->lock;
  if (e->cb != NULL)
    e->cb(l, e->status, e->data);
  rt__free(e);
  l->ops--;
  maybe_free(l);
}

/* Report status to cb about l on the next loop turn. */
static int reentry_later(rt_lock_t *l, rt_lock_cb cb, void *data, int status) {
  reentry *e = rt__calloc(1, sizeof(*e));
  if (e == NULL)
    return RT_ENOMEM;
  e->lock = l;
  e->cb = cb;
  e->data = data;
  e->status = status;
  l->ops++;
  rt__defer(&l->client->lp, &e->later, reentry_report);
  return 0;
}

/* The lock of ours that a reentrant request for name as k is: held,
 * reentrant itself, the same kind and permits; or NULL. */
static rt_lock_t *reentered(rt_client_t *c, const void *name, size_t len,
                            const lock_kind *k) {
  rt__res *r = rt__map_get(&c->resources, name, len);
  if (r == NULL || strcmp(r->kind, k->kind) != 0)
    return NULL;
  for (rt__queue *q = c->held.next; q != &c->held; q = q->next) {
    rt_lock_t *l = rt__queue_data(q, rt_lock_t, node);
    if (l->res == r && l->reentrant && l->state == RT_LOCK_HELD &&
        l->permits == k->permits)
      return l;
  }
  return NULL;
}

/* A reentrant request that found its lock: count it and grant it. */
static int reenter(rt_lock_t *l, rt_lock_cb cb, void *data, rt_lock_t **out) {
  int err = reentry_later(l, cb, data, 0);
  if (err != 0)
    return err;
  l->reentries++;
  if (out != NULL)
    *out = l;
  return 0;
}

int rt_wait_ex(rt_client_t *c, const void *name, size_t len,
               const rt_request_t *req, int64_t ttl_ms, int64_t timeout_ms,
               rt_lock_cb cb, void *data, rt_lock_t **out) {
  int64_t ttl;
  lock_kind k;
  int err = rt__check_request(c, name, len, ttl_ms, (const void *)cb, &ttl);
  if (err == 0)
    err = rt__check_timeout(timeout_ms);
  if (err == 0)
    err = kind_of(req, &k);
  if (err != 0)
    return err;
  rt_lock_t *l =
      req != NULL && req->reentrant ? reentered(c, name, len, &k) : NULL;
  if (l != NULL)
    return reenter(l, cb, data, out);
  l = lock_new(c, name, len, &k, ttl, cb, data, &err);
  if (l == NULL)
    return err;
  l->reentrant = req != NULL && req->reentrant;
  if (send_enqueue(l, 0) != 0) {
    lock_free(l);
    return RT_ENOMEM;
  }
  c->stats.waits++;
  rt__queue_insert_tail(&l->res->waiters, &l->res_node);
  if (timeout_ms != RT_FOREVER)
    rt__timeout_set(&c->lp, &l->deadline, lock_timeout, timeout_ms);
  if (out != NULL)
    *out = l;
  return 0;
}

int rt_wait(rt_client_t *c, const void *name, size_t len, int64_t ttl_ms,
            int64_t timeout_ms, rt_lock_cb cb, void *data, rt_lock_t **out) {
  return rt_wait_ex(c, name, len, NULL, ttl_ms, timeout_ms, cb, data, out);
}

int rt_try_lock_ex(rt_client_t *c, const void *name, size_t len,
                   const rt_request_t *req, int64_t ttl_ms, rt_lock_cb cb,
                   void *data) {
  int64_t ttl;
  lock_kind k;
  int err = rt__check_request(c, name, len, ttl_ms, (const void *)cb, &ttl);
  if (err == 0)
    err = kind_of(req, &k);
  if (err != 0)
    return err;
  rt_lock_t *l =
      req != NULL && req->reentrant ? reentered(c, name, len, &k) : NULL;
  if (l != NULL)
    return reenter(l, cb, data, NULL);
  l = lock_new(c, name, len, &k, ttl, cb, data, &err);
  if (l == NULL)
    return err;
  l->reentrant = req != NULL && req->reentrant;
  l->is_try = 1;
  l->state = RT_LOCK_RELEASING; /* never a queued waiter */
  if (send_op(l, RT__CALL_TRY, on_try, NULL, NULL) != 0) {
    lock_free(l);
    return RT_ENOMEM;
  }
  c->stats.tries++;
  return 0;
}

int rt_try_lock(rt_client_t *c, const void *name, size_t len, int64_t ttl_ms,
                rt_lock_cb cb, void *data) {
  return rt_try_lock_ex(c, name, len, NULL, ttl_ms, cb, data);
}

int rt__check_held(const rt_lock_t *l) {
  if (l == NULL)
    return RT_EINVAL;
  if (l->client->state == RT__C_CLOSING)
    return RT_ECLOSED;
  if (l->state == RT_LOCK_QUEUED)
    return RT_ENOTHELD;
  if (l->state == RT_LOCK_RELEASING || l->finished)
    return RT_ERELEASED;
  return 0;
}

int rt_signal(rt_lock_t *l, rt_lock_cb cb, void *data) {
  int err = rt__check_held(l);
  if (err != 0)
    return err;
  if (l->reentries > 0) {
    /* A reentrant grant's release: only the last one goes to Redis. */
    err = reentry_later(l, cb, data, l->state == RT_LOCK_LOST ? RT_ELOST : 0);
    if (err == 0)
      l->reentries--;
    return err;
  }
  /* Even a lock known lost is released: if its lease merely ran out and
   * nobody reaped it yet, this hands the resource on at once. */
  err = send_op(l, RT__CALL_RELEASE, on_release, cb, data);
  if (err == 0) {
    uint64_t now = uv_hrtime();
    l->state = RT_LOCK_RELEASING;
    l->res->last_release_ns = now;
    rt__hist_add(&l->client->stats.hold, (now - l->since_ns) / 1000);
  }
  return err;
}

int rt_extend(rt_lock_t *l, int64_t ttl_ms, rt_lock_cb cb, void *data) {
  int64_t ttl;
  int err = rt__check_held(l);
  if (err == 0)
    err = rt__resolve_ttl(ttl_ms, l->client->cfg.default_ttl_ms, &ttl);
  if (err != 0)
    return err;
  rt__op *op = rt__op_new(l->client, RT__CALL_EXTEND, l->res, l, on_extend);
  if (op == NULL)
    return RT_ENOMEM;
  op->call.num = ttl;
  op->cb.lock = cb;
  op->data = data;
  rt__call_send(&op->call);
  return 0;
}

int rt_cancel(rt_lock_t *l) {
  if (l == NULL || l->is_try)
    return RT_EINVAL;
  if (l->client->state == RT__C_CLOSING)
    return RT_ECLOSED;
  if (l->state == RT_LOCK_HELD || l->state == RT_LOCK_LOST)
    return RT_EHELD;
  if (l->state == RT_LOCK_RELEASING)
    return RT_ERELEASED;
  abort_wait(l, RT_ECANCELED);
  return 0;
}

/* ---- elections ------------------------------------------------------------ */

static void on_proclaim(rt__call *call, int status, const rt__answer *a) {
  rt__op *op = op_of(call);
  rt_lock_t *l = op->lock;
  int st = status;
  answered(op, status, a);
  rt__free((void *)call->label); /* rt_proclaim's copy */
  if (status == 0 && a->u.proclaim.code != RT__PROCLAIM_DONE) {
    st = RT_ELOST;
    turn_lost(l);
  }
  if (op->cb.lock != NULL)
    op->cb.lock(l, st, op->data);
  rt__op_free(op);
}

int rt_proclaim(rt_lock_t *l, const char *value, size_t value_len,
                rt_lock_cb cb, void *data) {
  int err = rt__check_held(l);
  if (err == 0 &&
      (strcmp(l->res->kind, "e") != 0 || check_value(value, value_len) != 0))
    err = RT_EINVAL;
  if (err != 0)
    return err;
  char *copy = rt__malloc(value_len + 1);
  rt__op *op = copy != NULL ? rt__op_new(l->client, RT__CALL_PROCLAIM, l->res,
                                         l, on_proclaim)
                            : NULL;
  if (op == NULL) {
    rt__free(copy);
    return RT_ENOMEM;
  }
  if (value_len > 0)
    memcpy(copy, value, value_len);
  copy[value_len] = '\0';
  op->call.label = copy;
  op->call.label_len = value_len;
  op->cb.lock = cb;
  op->data = data;
  rt__call_send(&op->call);
  return 0;
}

/* ---- accessors ------------------------------------------------------------ */

uint64_t rt_lock_fence(const rt_lock_t *l) { return l->fence; }
int64_t rt_lock_lease_ms(const rt_lock_t *l) { return l->lease_ms; }
int64_t rt_lock_deadline_ms(const rt_lock_t *l) { return l->deadline_ms; }
size_t rt_lock_position(const rt_lock_t *l) { return l->position; }
const char *rt_lock_id(const rt_lock_t *l) { return l->id; }
rt_lock_state_t rt_lock_state(const rt_lock_t *l) {
  return (rt_lock_state_t)l->state;
}
rt_client_t *rt_lock_client(const rt_lock_t *l) { return l->client; }
void *rt_lock_get_data(const rt_lock_t *l) { return l->data; }
void rt_lock_set_data(rt_lock_t *l, void *data) { l->data = data; }

const char *rt_lock_state_name(rt_lock_state_t state) {
  switch (state) {
  case RT_LOCK_QUEUED:
    return "queued";
  case RT_LOCK_HELD:
    return "held";
  case RT_LOCK_RELEASING:
    return "releasing";
  case RT_LOCK_LOST:
    return "lost";
  default:
    return "unknown";
  }
}

int rt_lock_auto_renew(rt_lock_t *l, int64_t every_ms) {
  if (l == NULL || every_ms < RT_RENEW_OFF)
    return RT_EINVAL;
  if (l->client->state == RT__C_CLOSING)
    return RT_ECLOSED;
  if (l->state == RT_LOCK_RELEASING || l->finished)
    return RT_ERELEASED;
  if (l->state == RT_LOCK_LOST)
    return RT_ELOST;
  if (every_ms >= l->ttl_ms)
    return RT_EINVAL;
  l->renew_ms = every_ms == RT_RENEW_OFF       ? 0
                : every_ms == RT_RENEW_DEFAULT ? RT__RENEW_THIRD
                                               : (int32_t)every_ms;
  if (l->state == RT_LOCK_HELD)
    arm_held(l);
  return 0;
}

int rt_lock_on_lost(rt_lock_t *l, rt_lost_cb cb) {
  if (l == NULL)
    return RT_EINVAL;
  l->lost_cb = cb;
  return 0;
}

int64_t rt_lock_lease_left_ms(const rt_lock_t *l) {
  uint64_t now = rt__mono_ms();
  if (l->state != RT_LOCK_HELD || l->local_end_ms <= now)
    return 0;
  return (int64_t)(l->local_end_ms - now);
}

const void *rt_lock_resource(const rt_lock_t *l, size_t *len) {
  if (len != NULL)
    *len = l->res->len;
  return l->res->name;
}
