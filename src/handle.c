/* The lock handle: its life from creation to free (the end of a wait,
 * reported once), the turn of a held lock to LOST, the ops (script calls)
 * that refer to it, and its accessors. The state machine that moves it
 * (lock.c) and the entry points that make it (request.c) sit above. */
#include <string.h>

#include "locks.h"

/* ---- life of a lock object ----------------------------------------------*/

void rt__lock_free(rt_lock_t *l) {
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
void rt__lock_maybe_free(rt_lock_t *l) {
  if (l->finished && l->ops == 0 && l->client->state != RT__C_CLOSING)
    rt__lock_free(l);
}

void rt__lock_free_all(rt_client_t *c) {
  while (!rt__queue_empty(&c->all))
    rt__lock_free(rt__queue_data(c->all.next, rt_lock_t, all_node));
}

/* Stop waiting: out of the resource's waiters, no deadline. */
void rt__lock_leave_queue(rt_lock_t *l) {
  rt__queue_remove(&l->res_node);
  rt__timeout_clear(&l->client->lp, &l->deadline);
  if (rt__queue_empty(&l->res->waiters))
    rt__timeout_clear(&l->client->lp, &l->res->watchdog);
}

/* Count a lock found lost in the statistics, once however it is found. */
void rt__lock_count_lost(rt_lock_t *l) {
  if (!l->lost_counted)
    l->client->stats.lost++;
  l->lost_counted = 1;
}

/* A held lock may be gone: tell the user once. */
void rt__lock_turn_lost(rt_lock_t *l) {
  if (l->state != RT_LOCK_HELD)
    return;
  l->state = RT_LOCK_LOST;
  rt__lock_count_lost(l);
  rt__timeout_clear(&l->client->lp, &l->deadline);
  if (l->lost_cb != NULL)
    l->lost_cb(l, l->data);
}

/* Tell the user, once, that the wait ended without a grant, and count it. */
void rt__lock_report_end(rt_lock_t *l, int status) {
  if (l->reported)
    return;
  rt_stats_t *st = &l->client->stats;
  if (status == RT_ECANCELED)
    st->cancels++;
  else if (status == RT_EWAITTIMEOUT)
    st->timeouts++;
  else if (status == RT_EBUSY)
    st->busy++;
  else
    st->failures++;
  l->reported = 1;
  l->cb(l, status, l->data);
}

/* The wait is over without a grant: tell the user (once) and let go. */
void rt__lock_wait_end(rt_lock_t *l, int status) {
  rt__lock_leave_queue(l);
  rt__queue_remove(&l->node);
  rt__map_del(&l->client->locks, &l->seq, sizeof(l->seq));
  l->finished = 1;
  l->ops++; /* keep l alive through the callback */
  rt__lock_report_end(l, status);
  l->ops--;
  rt__lock_maybe_free(l);
}

/* ---- ops: script calls of a lock or a resource --------------------------*/

rt__op *rt__op_new(rt_client_t *c, rt__call_kind kind, rt__res *res,
                   rt_lock_t *lock, rt__call_cb done) {
  rt__op *op = rt__calloc(1, sizeof(*op));
  if (op == NULL)
    return NULL;
  const char *keys = res->keys;
  if (res->kind[0] != '\0' && res->kind_locks > 0)
    kind = rt__call_pool(kind); /* a pool resource's scripts */
  if (rt__call_is_pool(kind))
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
    rt__lock_maybe_free(lock);
  }
}

/* Send a call of kind for l, with done as its completion and the user's
 * cb and data for it to report to. 0 or RT_ENOMEM. */
int rt__op_send(rt_lock_t *l, rt__call_kind kind, rt__call_cb done,
                rt_lock_cb cb, void *data) {
  rt__op *op = rt__op_new(l->client, kind, l->res, l, done);
  if (op == NULL)
    return RT_ENOMEM;
  op->cb.lock = cb;
  op->data = data;
  rt__call_send(&op->call);
  return 0;
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

/* ---- accessors ----------------------------------------------------------*/

uint64_t rt_lock_fence(const rt_lock_t *l) { return l->fence; }

int64_t rt_lock_lease_ms(const rt_lock_t *l) { return l->lease_ms; }

int64_t rt_lock_deadline_ms(const rt_lock_t *l) { return l->deadline_ms; }

size_t rt_lock_position(const rt_lock_t *l) { return l->position; }

const char *rt_lock_id(const rt_lock_t *l) { return l->id; }

rt_lock_state_t rt_lock_state(const rt_lock_t *l) {
  /* Past the local end of its lease a lock is lost, also before the timer
   * that turns it so has run: on a busy loop the user's own timer, due at
   * the same moment, may run first (the fault suite saw it). */
  if (l->state == RT_LOCK_HELD && l->local_end_ms <= rt__mono_ms())
    return RT_LOCK_LOST;
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
