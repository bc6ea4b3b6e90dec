/* Queries: rt_owned(), rt_locked() and rt_inspect(), one inspect script
 * call each, answered from the typed inspect answer. Above the lock state
 * machine: a lock found not owned turns LOST there (rt__lock_owns). And
 * the operator's rt_evict(), one evict script call on a resource. */
#include <string.h>

#include "locks.h"

/* The public view of an inspect answer. The waiters' ids and labels go in
 * one array, *waiters, which the caller frees after the callback. */
static int queue_info(const rt__inspect *in, rt_queue_info_t *info,
                      const char ***waiters) {
  const char *holder = in->holder->len > 0 ? in->holder->str : NULL;
  memset(info, 0, sizeof(*info));
  *waiters = NULL;
  info->holder = holder;
  if (holder != NULL && in->holder->len >= RT__CLIENT_ID_LEN)
    memcpy(info->holder_client, holder, RT__CLIENT_ID_LEN);
  info->locked = holder != NULL;
  info->fence = (uint64_t)in->fence;
  info->lease_left_ms = holder != NULL ? in->deadline - in->now : 0;
  info->held_ms = holder != NULL ? in->now - in->granted : 0;
  info->holder_label = holder != NULL ? in->holder_label->str : NULL;
  info->queue_len = (size_t)in->len + (holder != NULL);
  info->server_time_ms = in->now;
  if (in->nentries == 0)
    return 0;
  const char **w = rt__calloc(2 * in->nentries, sizeof(*w));
  if (w == NULL)
    return RT_ENOMEM;
  for (size_t i = 0; i < in->nentries; i++) {
    w[i] = in->entries[i]->str;
    w[in->nentries + i] = in->labels[i]->str;
  }
  info->nwaiters = in->nentries;
  info->waiters = w;
  info->waiter_labels = w + in->nentries;
  *waiters = w;
  return 0;
}

/* The public name of a pool kind stored as enc ("s:<N>", "rw", "e":
 * docs/DESIGN.md's glossary), or NULL for none. */
static const char *kind_name(const redisReply *enc) {
  if (enc->len >= 2 && memcmp(enc->str, "s:", 2) == 0)
    return "semaphore";
  if (enc->len == 2 && memcmp(enc->str, "rw", 2) == 0)
    return "rwlock";
  if (enc->len == 1 && enc->str[0] == 'e')
    return "election";
  return NULL;
}

/* The public view of a pool resource's snapshot; *arrays (one
 * block) is freed by the caller after the callback. */
static int pool_queue_info(const rt__pool_inspect *in, rt_queue_info_t *info,
                           void **arrays) {
  size_t nh = in->nholders, nw = in->nentries;
  memset(info, 0, sizeof(*info));
  *arrays = NULL;
  info->kind = kind_name(in->kind);
  info->permits = (uint64_t)in->capacity;
  info->permits_used = (uint64_t)in->used;
  info->fence = (uint64_t)in->fence;
  info->queue_len = (size_t)in->len + nh;
  info->server_time_ms = in->now;
  if (nh + nw == 0)
    return 0;
  /* Pointers first (holders, their labels, waiters, their labels), then
   * the numbers (holders' permits, waiters' permits). */
  void *block = rt__calloc(1, 2 * (nh + nw) * (sizeof(char *) + 8));
  if (block == NULL)
    return RT_ENOMEM;
  const char **p = block;
  uint64_t *u = (uint64_t *)(p + 2 * (nh + nw));
  for (size_t i = 0; i < nh; i++) {
    p[i] = in->holders.ids[i]->str;
    p[nh + i] = in->holders.labels[i]->str;
    u[i] = (uint64_t)in->holders.permits[i]->integer;
  }
  for (size_t i = 0; i < nw; i++) {
    p[2 * nh + i] = in->waiters.ids[i]->str;
    p[2 * nh + nw + i] = in->waiters.labels[i]->str;
    u[nh + i] = (uint64_t)in->waiters.permits[i]->integer;
  }
  info->nholders = nh;
  info->holders = p;
  info->holder_labels = p + nh;
  info->holder_permits = u;
  info->nwaiters = nw;
  info->waiters = nw > 0 ? p + 2 * nh : NULL;
  info->waiter_labels = nw > 0 ? p + 2 * nh + nw : NULL;
  info->waiter_permits = nw > 0 ? u + nh : NULL;
  if (nh > 0) {
    info->locked = 1;
    info->holder = p[0];
    info->holder_label = p[nh];
    if (in->holders.ids[0]->len >= RT__CLIENT_ID_LEN)
      memcpy(info->holder_client, p[0], RT__CLIENT_ID_LEN);
    info->fence = (uint64_t)in->holders.fences[0]->integer;
    info->lease_left_ms = in->holders.deadlines[0]->integer - in->now;
  }
  *arrays = block;
  return 0;
}

static void on_owned(rt__call *call, int status, const rt__answer *a) {
  rt__op *op = rt__container_of(call, rt__op, call);
  rt_lock_t *l = op->lock;
  int owned = status == 0 && rt__lock_owns(l, call, a);
  op->cb.owned(l, status, owned, op->data);
  rt__op_free(op);
}

static void on_locked(rt__call *call, int status, const rt__answer *a) {
  rt__op *op = rt__container_of(call, rt__op, call);
  int locked = status == 0 && a->u.inspect.holder->len > 0;
  op->cb.locked(op->res->client, status, locked, op->data);
  rt__op_free(op);
}

static void on_inspect(rt__call *call, int status, const rt__answer *a) {
  rt__op *op = rt__container_of(call, rt__op, call);
  rt_queue_info_t info;
  void *arrays = NULL;
  const char **waiters = NULL;
  if (status == RT_EKIND && call->kind == RT__CALL_INSPECT) {
    /* A semaphore or read-write lock: ask its own script. */
    rt__op *again = rt__op_new(op->res->client, RT__CALL_POOL_INSPECT, op->res,
                               NULL, on_inspect);
    if (again != NULL) {
      again->call.num = call->num;
      again->cb.inspect = op->cb.inspect;
      again->data = op->data;
      rt__call_send(&again->call);
      rt__op_free(op);
      return;
    }
    status = RT_ENOMEM;
  }
  if (status == 0 && call->kind == RT__CALL_INSPECT)
    status = queue_info(&a->u.inspect, &info, &waiters);
  else if (status == 0)
    status = pool_queue_info(&a->u.pool_inspect, &info, &arrays);
  if (status == 0)
    info.script_path = call->native  ? RT_SCRIPT_PATH_MODULE
                       : call->fcall ? RT_SCRIPT_PATH_FUNCTIONS
                                     : RT_SCRIPT_PATH_EVAL;
  op->cb.inspect(op->res->client, status, status == 0 ? &info : NULL, op->data);
  rt__free(waiters);
  rt__free(arrays);
  rt__op_free(op);
}

int rt_owned(rt_lock_t *l, rt_owned_cb cb, void *data) {
  int err = rt__check_held(l);
  if (err == 0 && cb == NULL)
    err = RT_ENOCB;
  if (err != 0)
    return err;
  rt__op *op =
      rt__op_new(l->client, rt__lock_owned_call(l), l->res, l, on_owned);
  if (op == NULL)
    return RT_ENOMEM;
  op->call.num = 0; /* no waiters listed */
  op->cb.owned = cb;
  op->data = data;
  rt__call_send(&op->call);
  return 0;
}

/* A call of kind (an inspect listing up to max waiters, or an evict) on
 * the resource name; done reports to the user's callback, set by the
 * caller in the op it gets. */
static int ask_resource(rt_client_t *c, const void *name, size_t len,
                        rt__call_kind kind, int64_t max, const void *cb,
                        rt__call_cb done, rt__op **out) {
  int err = rt__check_request(c, name, len, 0, cb, NULL);
  if (err != 0)
    return err;
  rt__res *res = rt__res_get(c, name, len);
  if (res == NULL)
    return RT_ENOMEM;
  rt__op *op = rt__op_new(c, kind, res, NULL, done);
  rt__res_unref(res); /* the op holds its own reference */
  if (op == NULL)
    return RT_ENOMEM;
  op->call.num = max;
  *out = op;
  return 0;
}

int rt_locked(rt_client_t *c, const void *name, size_t len, rt_locked_cb cb,
              void *data) {
  rt__op *op;
  int err = ask_resource(c, name, len, RT__CALL_INSPECT, 0, (const void *)cb,
                         on_locked, &op);
  if (err != 0)
    return err;
  op->cb.locked = cb;
  op->data = data;
  rt__call_send(&op->call);
  return 0;
}

int rt_inspect(rt_client_t *c, const void *name, size_t len, size_t max_waiters,
               rt_inspect_cb cb, void *data) {
  /* LRANGE counts from 0: the head plus max_waiters entries. */
  int64_t max = max_waiters > 100000 ? 100000 : (int64_t)max_waiters;
  rt__op *op;
  int err = ask_resource(c, name, len, RT__CALL_INSPECT, max, (const void *)cb,
                         on_inspect, &op);
  if (err != 0)
    return err;
  op->cb.inspect = cb;
  op->data = data;
  rt__call_send(&op->call);
  return 0;
}

static void on_evict(rt__call *call, int status, const rt__answer *a) {
  rt__op *op = rt__container_of(call, rt__op, call);
  rt_evict_info_t info;
  memset(&info, 0, sizeof(info));
  if (status == 0) {
    const rt__evict_answer *e = &a->u.evict;
    info.evicted = e->code == RT__EVICT_EVICTED;
    info.holder = e->holder != NULL ? e->holder->str : NULL;
    if (info.evicted && e->next->len > 0) {
      info.next = e->next->str;
      info.fence = (uint64_t)e->fence;
    }
  }
  op->cb.evict(op->res->client, status, status == 0 ? &info : NULL, op->data);
  rt__op_free(op);
}

int rt_evict(rt_client_t *c, const void *name, size_t len, const char *holder,
             rt_evict_cb cb, void *data) {
  if (c != NULL && holder != NULL && holder[0] == '\0')
    return RT_EINVAL;
  rt__op *op;
  int err = ask_resource(c, name, len, RT__CALL_EVICT, 0, (const void *)cb,
                         on_evict, &op);
  if (err != 0)
    return err;
  op->copy = rt__strdup(holder != NULL ? holder : "");
  if (op->copy == NULL) {
    rt__op_free(op);
    return RT_ENOMEM;
  }
  op->call.id = op->copy;
  op->call.id_len = (uint32_t)strlen(op->copy);
  op->cb.evict = cb;
  op->data = data;
  rt__call_send(&op->call);
  return 0;
}
