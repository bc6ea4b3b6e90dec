/* What reaches the locks from outside the state machine: the notices on
 * the client's channel (grants, next in line, evictions; a grant that no
 * wait of ours wants any more is given back), the reconcile after a
 * reconnect, the ownership check it makes, and the close. */
#include <string.h>

#include "locks.h"
#include "reply.h"

/* ---- reconcile ----------------------------------------------------------*/

rt__call_kind rt__lock_owned_call(const rt_lock_t *l) {
  /* A pool resource has many holders: its reap says whether the
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
    rt__lock_turn_lost(l);
  return owned;
}

/* After a reconnect: is a lock we held still ours? */
static void on_owned(rt__call *call, int status, const rt__answer *a) {
  rt__op *op = rt__op_of(call);
  if (status == 0)
    rt__lock_owns(op->lock, call, a);
  rt__op_free(op);
}

/* After a reconnect: waits may have missed their grant, and held locks may
 * be gone with the server's data; ask Redis about both. A held lock found
 * lost turns RT_LOCK_LOST (rt_signal then reports RT_ELOST). */
void rt__lock_reconcile(rt_client_t *c) {
  /* The retried enqueue is idempotent; an entry lost with the server's
   * data is queued again at the tail. */
  for (rt__queue *q = c->pending.next; q != &c->pending;) {
    rt_lock_t *l = rt__queue_data(q, rt_lock_t, node);
    q = q->next;
    rt__lock_recheck(l);
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

/* ---- notices and give-backs ---------------------------------------------*/

/* A give-back answered: a lost reply is sent again (a release by id of a
 * request that neither holds nor waits changes nothing). */
static void on_given_back(rt__call *call, int status, const rt__answer *a) {
  rt__op *op = rt__op_of(call);
  rt__watchdog_answered(op->res, status, a);
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
    ck = rt__call_pool(ck);
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
  if (n->kind == RT_PROTO_NOTICE_OBSERVED)
    return; /* an observer's notice (observe.c): none of a lock */
  rt_lock_t *l = rt__map_get(&c->locks, &n->seq, sizeof(n->seq));
  if (l == NULL) {
    if (n->kind == RT_PROTO_NOTICE_GRANTED)
      give_back_unknown(c, n); /* a request we already gave up on */
    return;
  } else if (n->kind == RT_PROTO_NOTICE_NEXT) {
    /* Next in line: the lease in front ends at n->deadline_ms. */
    if (l->state == RT_LOCK_QUEUED) {
      uint64_t end = rt__clock_local(c, n->deadline_ms), now = rt__mono_ms();
      rt__watchdog_arm_lease(l->res, end > now ? (int64_t)(end - now) : 0, 1);
    }
  } else if (n->kind == RT_PROTO_NOTICE_LOST) {
    rt__lock_turn_lost(l); /* evicted by an operator */
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
        rt__lock_recheck(l);
      return;
    }
    rt__lock_granted(l, n->fence, n->lease_ms, n->deadline_ms, 1);
  }
}

/* ---- close --------------------------------------------------------------*/

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
      rt__lock_abort(l, RT_ECANCELED);
    rt__lock_report_end(l, l->end_status ? l->end_status : RT_ECANCELED);
  }
  for (rt__queue *it = c->held.next; it != &c->held; it = it->next) {
    rt_lock_t *l = rt__queue_data(it, rt_lock_t, node);
    if (l->hooks != NULL)
      l->hooks->closing(l);
    if (l->state == RT_LOCK_HELD || l->state == RT_LOCK_LOST) {
      l->state = RT_LOCK_RELEASING;
      l->end_status = (int16_t)RT_ECANCELED;
      rt__lock_release(l, NULL, NULL);
    }
  }
}
