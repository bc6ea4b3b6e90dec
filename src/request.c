/* The entry points that make and move a lock: the request kinds as the
 * scripts take them, the argument checks, reentrancy, rt_wait, rt_try_lock,
 * rt_signal, rt_extend, rt_cancel and rt_lock_auto_renew. Their calls'
 * completions are the state machine's (lock.c). */
#include <stdio.h>
#include <string.h>

#include "locks.h"

/* ---- request kinds ------------------------------------------------------*/

/* What a request asks of its resource: the pool scripts' kind
 * ("" for a mutex) and the permits it takes (0: all). */
typedef struct lock_kind {
  char kind[RT__KIND_MAX];
  uint32_t permits;
  const char *value; /* an election's candidate value, or NULL */
  size_t value_len;
} lock_kind;

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
    if (rt__election_check_value(req->value, req->value_len) != 0)
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

/* ---- reentrancy ---------------------------------------------------------*/

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
  rt__lock_maybe_free(l);
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

/* ---- waits and tries ----------------------------------------------------*/

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
  if (rt__lock_enqueue(l, 0) != 0) {
    rt__lock_free(l);
    return RT_ENOMEM;
  }
  c->stats.waits++;
  rt__queue_insert_tail(&l->res->waiters, &l->res_node);
  if (timeout_ms != RT_FOREVER)
    rt__timeout_set(&c->lp, &l->deadline, rt__lock_timeout, timeout_ms);
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
  if (rt__op_send(l, RT__CALL_TRY, rt__lock_on_try, NULL, NULL) != 0) {
    rt__lock_free(l);
    return RT_ENOMEM;
  }
  c->stats.tries++;
  return 0;
}

int rt_try_lock(rt_client_t *c, const void *name, size_t len, int64_t ttl_ms,
                rt_lock_cb cb, void *data) {
  return rt_try_lock_ex(c, name, len, NULL, ttl_ms, cb, data);
}

/* ---- calls on a granted lock --------------------------------------------*/

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
  err = rt__op_send(l, RT__CALL_RELEASE, rt__lock_on_release, cb, data);
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
  rt__op *op =
      rt__op_new(l->client, RT__CALL_EXTEND, l->res, l, rt__lock_on_extend);
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
  rt__lock_abort(l, RT_ECANCELED);
  return 0;
}

int rt_lock_auto_renew(rt_lock_t *l, int64_t every_ms) {
  if (l == NULL || every_ms < RT_RENEW_DEFAULT)
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
    rt__lock_arm_held(l);
  return 0;
}
