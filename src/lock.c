/* The lock state machine: waits, grants, releases, cancels, extends,
 * queries, and the per-resource watchdog.
 *
 * A lock is QUEUED from rt_wait() until Redis grants it (in the enqueue
 * reply when the queue was empty, or later by a notice on our channel),
 * HELD until rt_signal(), and RELEASING while a release or cancel is in
 * flight. A lock object lives until the user is done with it (`finished`)
 * and no op refers to it any more. */
#include <string.h>

#include "client.h"
#include "reply.h"

/* ---- life of a lock object ---------------------------------------------- */

static rt_lock_t *lock_new(rt_client_t *c, const void *name, size_t len,
                           int64_t ttl_ms, rt_lock_cb cb, void *data) {
  char id[RT__ENTRY_MAX];
  uint64_t seq = ++c->next_seq;
  size_t id_len = rt__entry_format(id, c->id, seq, ttl_ms);
  /* The id is stored at its own length: pending waiters are many. */
  rt_lock_t *l = rt__calloc(1, sizeof(*l) + id_len + 1);
  if (l == NULL)
    return NULL;
  l->res = rt__res_get(c, name, len);
  l->seq = seq;
  if (l->res == NULL || rt__map_put(&c->locks, &l->seq, sizeof(l->seq), l) != 0) {
    if (l->res != NULL)
      rt__res_unref(l->res);
    rt__free(l);
    return NULL;
  }
  l->client = c;
  memcpy(l->id, id, id_len + 1);
  l->id_len = (uint16_t)id_len;
  l->state = RT_LOCK_QUEUED;
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
  rt__timeout_clear(c, &l->deadline);
  rt__res_unref(l->res);
  rt__sync_free(l);
  rt__free(l);
}

/* While the client closes, handles stay valid until its close callback. */
void rt__lock_maybe_free(rt_lock_t *l) {
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
  rt__timeout_clear(l->client, &l->deadline);
  if (rt__queue_empty(&l->res->waiters))
    rt__timeout_clear(l->client, &l->res->watchdog);
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
  rt__lock_maybe_free(l);
}

static void granted(rt_lock_t *l, uint64_t fence, int64_t lease_ms,
                    int64_t deadline_ms, int handoff) {
  if (l->state != RT_LOCK_QUEUED)
    return; /* a cancel crossed the grant: its release hands it on */
  rt_client_t *c = l->client;
  uint64_t now = uv_hrtime();
  c->stats.grants++;
  rt__hist_add(&c->stats.acquire, (now - l->since_ns) / 1000);
  if (handoff && l->res->last_release_ns != 0)
    rt__hist_add(&c->stats.handoff, (now - l->res->last_release_ns) / 1000);
  l->res->last_release_ns = 0;
  l->since_ns = now;
  leave_queue(l);
  rt__queue_remove(&l->node);
  rt__queue_insert_tail(&c->held, &l->node);
  l->state = RT_LOCK_HELD;
  l->fence = fence;
  l->lease_ms = (int32_t)lease_ms;
  l->deadline_ms = deadline_ms;
  l->reported = 1;
  l->cb(l, 0, l->data);
}

/* ---- sending ------------------------------------------------------------- */

static int send_op(rt_lock_t *l, int kind, int64_t arg, rt_lock_cb cb,
                   void *data) {
  rt__op *op = rt__op_new(l->client, kind, l->res, l);
  if (op == NULL)
    return RT_ENOMEM;
  op->arg = arg;
  op->cb.lock = cb;
  op->data = data;
  if (kind == RT__OP_ENQUEUE)
    l->enqueue = op;
  rt__op_send(op);
  return 0;
}

/* Take l's entry out of Redis: a release that also cancels a waiting entry.
 * Without memory for it the entry is left for the watchdog's reap. */
static void send_release(rt_lock_t *l, rt_lock_cb cb, void *data) {
  if (send_op(l, RT__OP_RELEASE, 0, cb, data) != 0 && l->end_status != 0)
    wait_end(l, l->end_status);
}

/* Abandon a queued wait with status (cancel, deadline, close). */
static void abort_wait(rt_lock_t *l, int status) {
  l->state = RT_LOCK_RELEASING;
  l->end_status = (int16_t)status;
  leave_queue(l);
  rt__op *op = l->enqueue;
  if (op != NULL && !op->in_flight) {
    l->enqueue = NULL;
    rt__op_free(op); /* still in the outbox: never sent, or to be resent */
    op = NULL;
  }
  /* The callback comes once Redis confirms the entry is gone, but no later
   * than RT__ABORT_GRACE_MS from now (rt__lock_deadline reports it then): a
   * stalled or unreachable Redis must not hold a deadline up. The removal
   * then goes on behind. A request Redis never had ends on the next turn. */
  int never_sent = op == NULL && !l->enqueued;
  rt__timeout_set(l->client, &l->deadline, RT__TO_DEADLINE,
                  never_sent ? 0 : RT__ABORT_GRACE_MS);
  if (op == NULL && !never_sent)
    send_release(l, NULL, NULL); /* else the enqueue reply sends it */
}

void rt__lock_deadline(rt_lock_t *l) {
  if (l->state == RT_LOCK_QUEUED)
    abort_wait(l, RT_EDEADLINE);
  else if (l->state == RT_LOCK_RELEASING && !l->reported)
    wait_end(l, l->end_status); /* Redis is slow to confirm: report now */
}

/* ---- watchdog ----------------------------------------------------------- */

void rt__watchdog_arm(rt__res *r, int64_t lease_left_ms) {
  rt_client_t *c = r->client;
  if (rt__queue_empty(&r->waiters)) {
    rt__timeout_clear(c, &r->watchdog);
    return;
  }
  int64_t wait = (lease_left_ms > 0 ? lease_left_ms : 0) + RT__REAP_SLACK_MS +
                 (int64_t)(rt__xorshift(&c->rand) % RT__REAP_JITTER_MS);
  rt__timeout_set(c, &r->watchdog, RT__TO_WATCHDOG, wait);
}

void rt__watchdog_fire(rt__res *r) {
  if (rt__queue_empty(&r->waiters))
    return;
  rt__op *op = rt__op_new(r->client, RT__OP_REAP, r, NULL);
  r->client->stats.reaps++;
  if (op != NULL)
    rt__op_send(op);
  else
    rt__watchdog_arm(r, r->client->cfg.command_timeout_ms);
}

/* Ask Redis again about every wait of ours that may have missed a grant
 * (the retried enqueue is idempotent; an entry lost with the server's data
 * is queued again at the tail). */
static void reconcile_queue(rt__queue *head, size_t node_offset) {
  for (rt__queue *q = head->next; q != head;) {
    rt_lock_t *l = (rt_lock_t *)((char *)q - node_offset);
    q = q->next;
    if (l->state == RT_LOCK_QUEUED && l->enqueue == NULL)
      send_op(l, RT__OP_ENQUEUE, 1, NULL, NULL);
  }
}

static int ask(rt_client_t *c, rt__res *res, rt_lock_t *l, int what,
               int64_t max, void (*cb)(void), void *data);

/* After a reconnect: waits may have missed their grant, and held locks may
 * be gone with the server's data; ask Redis about both. A held lock found
 * lost turns RT_LOCK_LOST (rt_signal then reports RT_ELOST). */
void rt__lock_reconcile(rt_client_t *c) {
  reconcile_queue(&c->pending, offsetof(rt_lock_t, node));
  for (rt__queue *q = c->held.next; q != &c->held; q = q->next) {
    rt_lock_t *l = rt__queue_data(q, rt_lock_t, node);
    if (l->state == RT_LOCK_HELD)
      ask(c, l->res, l, RT__ASK_OWNED, 0, NULL, NULL);
  }
}

/* ---- replies -------------------------------------------------------------- */

static void on_enqueue(rt__op *op, const redisReply *reply, int status) {
  rt_lock_t *l = op->lock;
  rt_client_t *c = l->client;
  long long v[4];
  int n = status < 0 ? status : rt__reply_ints(reply, v, 3, 4);
  l->enqueue = NULL;
  if (status < 0 && rt__client_usable(c) == 0) {
    if (l->state == RT_LOCK_QUEUED) {
      /* The reply was lost: ask again, idempotently, once reconnected. */
      op->arg = 1;
      l->enqueue = op;
      rt__op_send(op);
      return;
    }
    if (l->state == RT_LOCK_RELEASING)
      send_release(l, NULL, NULL);
    rt__op_free(op);
    return;
  }
  if (l->state == RT_LOCK_RELEASING) {
    if (n < 0 && status == 0) /* the script failed: nothing was queued */
      wait_end(l, l->end_status);
    else
      send_release(l, NULL, NULL);
  } else if (n < 0) {
    if (l->state == RT_LOCK_QUEUED) {
      /* A script can fail after its push (an ACL refusing a later call):
       * take out whatever it left. */
      l->state = RT_LOCK_RELEASING;
      l->end_status = (int16_t)n;
      send_release(l, NULL, NULL);
      wait_end(l, n);
    }
  } else if (v[0] == 1 && n == 4) {
    granted(l, (uint64_t)v[1], v[2], v[3], 0);
  } else {
    l->position = (uint32_t)v[1]; /* also when a notice granted it first */
    if (l->state == RT_LOCK_QUEUED)
      rt__watchdog_arm(l->res, v[2]);
  }
  rt__op_free(op);
}

static void on_release(rt__op *op, const redisReply *reply, int status) {
  rt_lock_t *l = op->lock;
  long long v[1];
  int n = status < 0 ? status : rt__reply_ints(reply, v, 1, 1);
  if (status < 0 && rt__client_usable(l->client) == 0) {
    op->arg = 1; /* retried: "not in the queue" then means released */
    rt__op_send(op);
    return;
  }
  if (l->end_status != 0) {
    wait_end(l, l->end_status); /* a cancel, whatever Redis had */
  } else {
    int st = n;
    if (n >= 0)
      st = v[0] == 1 || (v[0] == 0 && op->arg) ? 0 : RT_ELOST;
    l->client->stats.releases++;
    if (st == RT_ELOST)
      l->client->stats.lost++;
    rt__queue_remove(&l->node);
    l->finished = 1;
    if (op->cb.lock != NULL)
      op->cb.lock(l, st, op->data);
  }
  rt__op_free(op);
}

static void on_extend(rt__op *op, const redisReply *reply, int status) {
  rt_lock_t *l = op->lock;
  long long v[3];
  int n = status < 0 ? status : rt__reply_ints(reply, v, 1, 3);
  int st = n;
  if (n == 3 && v[0] == 1) {
    l->lease_ms = (int32_t)v[1];
    l->deadline_ms = v[2];
    st = 0;
  } else if (n >= 0) {
    st = RT_ELOST;
    l->client->stats.lost++;
    if (l->state == RT_LOCK_HELD)
      l->state = RT_LOCK_LOST;
  }
  if (op->cb.lock != NULL)
    op->cb.lock(l, st, op->data);
  rt__op_free(op);
}

static void on_try(rt__op *op, const redisReply *reply, int status) {
  rt_lock_t *l = op->lock;
  long long v[4];
  int n = status < 0 ? status : rt__reply_ints(reply, v, 2, 4);
  if (l->reported) {
    /* The client closed meanwhile: give back what Redis granted. */
    if (n == 4 && v[0] == 1) {
      l->end_status = (int16_t)RT_ECANCELED;
      send_release(l, NULL, NULL);
    }
  } else if (n == 4 && v[0] == 1) {
    l->state = RT_LOCK_QUEUED; /* granted() moves it from queued to held */
    granted(l, (uint64_t)v[1], v[2], v[3], 0);
  } else if (n >= 0) {
    wait_end(l, RT_EBUSY);
  } else {
    if (status < 0 && rt__client_usable(l->client) == 0) {
      /* It may have been granted without us hearing: clean up. */
      l->end_status = (int16_t)status;
      send_release(l, NULL, NULL);
    }
    wait_end(l, n);
  }
  rt__op_free(op);
}

static void on_reap(rt__op *op, const redisReply *reply, int status) {
  rt__res *r = op->res;
  long long v[2];
  int n = status < 0 ? status : rt__reply_ints(reply, v, 1, 2);
  if (n < 0) {
    rt__watchdog_arm(r, r->client->cfg.command_timeout_ms);
  } else if (v[0] == 1 && n == 2) {
    rt__watchdog_arm(r, v[1]);
  } else {
    /* Our waiters are not in Redis any more (data lost): queue again. */
    reconcile_queue(&r->waiters, offsetof(rt_lock_t, res_node));
  }
  rt__op_free(op);
}

static void on_inspect(rt__op *op, const redisReply *reply, int status) {
  rt_client_t *c = op->client;
  rt__inspect in;
  rt_queue_info_t info;
  const char **waiters = NULL;
  int err = status < 0 ? status : rt__reply_inspect(reply, &in);

  memset(&info, 0, sizeof(info));
  if (err == 0) {
    const char *head = in.nentries > 0 ? in.entries[0]->str : NULL;
    info.holder = head;
    if (head != NULL && in.entries[0]->len >= RT__CLIENT_ID_LEN)
      memcpy(info.holder_client, head, RT__CLIENT_ID_LEN);
    info.locked = head != NULL && in.deadline > in.now;
    info.fence = (uint64_t)in.fence;
    info.lease_ms = head != NULL ? in.deadline - in.now : 0;
    info.held_ms = head != NULL ? in.now - in.granted : 0;
    info.queue_len = (size_t)in.len;
    info.server_time_ms = in.now;
    if (in.nentries > 1) {
      waiters = rt__calloc(in.nentries - 1, sizeof(*waiters));
      if (waiters == NULL)
        err = RT_ENOMEM;
      for (size_t i = 1; waiters != NULL && i < in.nentries; i++)
        waiters[i - 1] = in.entries[i]->str;
      info.nwaiters = waiters != NULL ? in.nentries - 1 : 0;
      info.waiters = waiters;
    }
  }
  if (op->ask == RT__ASK_OWNED) {
    rt_lock_t *l = op->lock;
    int owned = err == 0 && info.locked && strcmp(info.holder, l->id) == 0;
    if (err == 0 && !owned && l->state == RT_LOCK_HELD) {
      l->state = RT_LOCK_LOST;
      c->stats.lost++;
    }
    if (op->cb.owned != NULL)
      op->cb.owned(l, err, owned, op->data);
  } else if (op->ask == RT__ASK_LOCKED) {
    op->cb.locked(c, err, err == 0 && info.locked, op->data);
  } else {
    op->cb.inspect(c, err, err == 0 ? &info : NULL, op->data);
  }
  rt__free(waiters);
  rt__op_free(op);
}

void rt__lock_on_reply(rt__op *op, const redisReply *reply, int status) {
  switch (op->kind) {
  case RT__OP_ENQUEUE:
    on_enqueue(op, reply, status);
    break;
  case RT__OP_RELEASE:
    on_release(op, reply, status);
    break;
  case RT__OP_EXTEND:
    on_extend(op, reply, status);
    break;
  case RT__OP_TRY:
    on_try(op, reply, status);
    break;
  case RT__OP_REAP:
    on_reap(op, reply, status);
    break;
  default:
    on_inspect(op, reply, status);
  }
}

void rt__lock_on_notice(rt_client_t *c, const rt__notice *n) {
  rt_lock_t *l = rt__map_get(&c->locks, &n->seq, sizeof(n->seq));
  if (l == NULL)
    return; /* a request we already gave up on */
  if (n->kind == 'g') {
    /* Granted by a handoff, so it waited; if the enqueue reply is still on
     * its way, its exact position comes with it. */
    if (l->position == 0)
      l->position = 1;
    granted(l, n->fence, n->lease_ms, n->deadline_ms, 1);
  } else if (l->state == RT_LOCK_HELD) {
    l->state = RT_LOCK_LOST;
    c->stats.lost++;
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
    rt__sync_cancel(l);
    if (l->state == RT_LOCK_HELD || l->state == RT_LOCK_LOST) {
      l->state = RT_LOCK_RELEASING;
      l->end_status = (int16_t)RT_ECANCELED;
      send_release(l, NULL, NULL);
    }
  }
}

/* ---- public API -------------------------------------------------------- */

static int check_request(rt_client_t *c, const void *name, size_t len,
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

int rt_wait(rt_client_t *c, const void *name, size_t len, int64_t ttl_ms,
            int64_t timeout_ms, rt_lock_cb cb, void *data, rt_lock_t **out) {
  int64_t ttl;
  int err = check_request(c, name, len, ttl_ms, (const void *)cb, &ttl);
  if (err == 0)
    err = rt__check_timeout(timeout_ms);
  if (err != 0)
    return err;
  rt_lock_t *l = lock_new(c, name, len, ttl, cb, data);
  if (l == NULL)
    return RT_ENOMEM;
  if (send_op(l, RT__OP_ENQUEUE, 0, NULL, NULL) != 0) {
    lock_free(l);
    return RT_ENOMEM;
  }
  c->stats.waits++;
  rt__queue_insert_tail(&l->res->waiters, &l->res_node);
  if (timeout_ms != RT_FOREVER)
    rt__timeout_set(c, &l->deadline, RT__TO_DEADLINE, timeout_ms);
  if (out != NULL)
    *out = l;
  return 0;
}

int rt_try_lock(rt_client_t *c, const void *name, size_t len, int64_t ttl_ms,
                rt_lock_cb cb, void *data) {
  int64_t ttl;
  int err = check_request(c, name, len, ttl_ms, (const void *)cb, &ttl);
  if (err != 0)
    return err;
  rt_lock_t *l = lock_new(c, name, len, ttl, cb, data);
  if (l == NULL)
    return RT_ENOMEM;
  l->is_try = 1;
  l->state = RT_LOCK_RELEASING; /* never a queued waiter */
  if (send_op(l, RT__OP_TRY, 0, NULL, NULL) != 0) {
    lock_free(l);
    return RT_ENOMEM;
  }
  c->stats.tries++;
  return 0;
}

/* Common checks for calls on a granted lock. */
static int check_held(const rt_lock_t *l) {
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
  int err = check_held(l);
  if (err != 0)
    return err;
  /* Even a lock known lost is released: if its lease merely ran out and
   * nobody reaped it yet, this hands the resource on at once. */
  err = send_op(l, RT__OP_RELEASE, 0, cb, data);
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
  int err = check_held(l);
  if (err == 0)
    err = rt__resolve_ttl(ttl_ms, l->client->cfg.default_ttl_ms, &ttl);
  if (err != 0)
    return err;
  return send_op(l, RT__OP_EXTEND, ttl, cb, data);
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

static int ask(rt_client_t *c, rt__res *res, rt_lock_t *l, int what,
               int64_t max, void (*cb)(void), void *data) {
  rt__op *op = rt__op_new(c, RT__OP_INSPECT, res, l);
  if (op == NULL)
    return RT_ENOMEM;
  op->ask = what;
  op->arg = max;
  if (what == RT__ASK_OWNED)
    op->cb.owned = (rt_owned_cb)cb;
  else if (what == RT__ASK_LOCKED)
    op->cb.locked = (rt_locked_cb)cb;
  else
    op->cb.inspect = (rt_inspect_cb)cb;
  op->data = data;
  rt__op_send(op);
  return 0;
}

int rt_owned(rt_lock_t *l, rt_owned_cb cb, void *data) {
  int err = check_held(l);
  if (err == 0 && cb == NULL)
    err = RT_ENOCB;
  if (err != 0)
    return err;
  return ask(l->client, l->res, l, RT__ASK_OWNED, 0, (void (*)(void))cb, data);
}

static int ask_resource(rt_client_t *c, const void *name, size_t len, int what,
                        int64_t max, void (*cb)(void), void *data) {
  int err = check_request(c, name, len, 0, (const void *)cb, NULL);
  if (err != 0)
    return err;
  rt__res *res = rt__res_get(c, name, len);
  if (res == NULL)
    return RT_ENOMEM;
  err = ask(c, res, NULL, what, max, cb, data);
  rt__res_unref(res);
  return err;
}

int rt_locked(rt_client_t *c, const void *name, size_t len, rt_locked_cb cb,
              void *data) {
  return ask_resource(c, name, len, RT__ASK_LOCKED, 0, (void (*)(void))cb,
                      data);
}

int rt_inspect(rt_client_t *c, const void *name, size_t len,
               size_t max_waiters, rt_inspect_cb cb, void *data) {
  /* LRANGE counts from 0: the head plus max_waiters entries. */
  int64_t max = max_waiters > 100000 ? 100000 : (int64_t)max_waiters;
  return ask_resource(c, name, len, RT__ASK_INSPECT, max, (void (*)(void))cb,
                      data);
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

const void *rt_lock_resource(const rt_lock_t *l, size_t *len) {
  if (len != NULL)
    *len = l->res->len;
  return l->res->name;
}
