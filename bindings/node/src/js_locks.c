/* redturn.node: locks of every kind (wait, try, signal, extend, proclaim,
 * cancel, renewal, owned, info, fence). */
#include "internal.h"

/* ---- Locks --------------------------------------------------------------- */

static void lock_on_lost(rt_lock_t *lock, void *data) {
  (void)lock;
  nlock *nl = data;
  if (!nl || nl->it.done || !js_ok(nl->it.nc))
    return;
  nclient *nc = nl->it.nc;
  napi_handle_scope scope;
  napi_open_handle_scope(nc->env, &scope);
  napi_value argv[4];
  napi_create_int32(nc->env, 1, &argv[0]);
  status_args(nc, RT_ELOST, argv + 1);
  call_js(nc, nl->it.on_event, 4, argv);
  napi_close_handle_scope(nc->env, scope);
}

/* The wait's or try's result: onEvent(0, status, code, message). */
static void lock_on_grant(rt_lock_t *lock, int status, void *data) {
  nlock *nl = data;
  nclient *nc = nl->it.nc;
  if (status == 0) {
    nl->lock = lock;
    rt_lock_on_lost(lock, lock_on_lost);
  }
  if (js_ok(nc)) {
    napi_handle_scope scope;
    napi_open_handle_scope(nc->env, &scope);
    napi_value argv[4];
    napi_create_int32(nc->env, 0, &argv[0]);
    status_args(nc, status, argv + 1);
    call_js(nc, nl->it.on_event, 4, argv);
    napi_close_handle_scope(nc->env, scope);
  }
  if (status != 0)
    item_done(&nl->it); /* the library frees the handle after this */
}

/* Reads kind, permits, of, value from a request object into req. value
 * is copied into *value (free it). 0, or -1 with an exception. */
static int get_request(napi_env env, napi_value o, rt_request_t *req,
                       char **value) {
  memset(req, 0, sizeof(*req));
  *value = NULL;
  napi_valuetype t;
  if (napi_typeof(env, o, &t) != napi_ok)
    return -1;
  if (t != napi_object)
    return 0;
  req->kind = (rt_kind_t)opt_i64(env, o, "kind", RT_KIND_MUTEX);
  int64_t permits = opt_i64(env, o, "permits", 0);
  int64_t of = opt_i64(env, o, "of", 0);
  if (permits < 0 || permits > UINT32_MAX || of < 0 || of > UINT32_MAX) {
    throw_rt(env, RT_EINVAL, "permits and of must be 0..RT_PERMITS_MAX");
    return -1;
  }
  req->permits = (uint32_t)permits;
  req->of = (uint32_t)of;
  *value = opt_str(env, o, "value");
  if (*value) {
    req->value = *value;
    req->value_len = strlen(*value);
  }
  return 0;
}

static napi_value lock_new(napi_env env, nclient *nc, napi_value on_event,
                           nlock **out) {
  nlock *nl = calloc(1, sizeof(*nl));
  if (!nl) {
    throw_rt(env, RT_ENOMEM, NULL);
    return NULL;
  }
  napi_value ext = make_external(env, nl, item_finalize);
  if (!ext) {
    free(nl);
    throw_last(env);
    return NULL;
  }
  item_link(nc, &nl->it, ITEM_LOCK);
  napi_create_reference(env, on_event, 1, &nl->it.on_event);
  *out = nl;
  return ext;
}

/* wait(client, name, request, ttl, timeout, onEvent) -> lock
 * tryLock(client, name, request, ttl, onEvent) -> lock
 * onEvent(0, status, code, message) once for the result, then
 * onEvent(1, RT_ELOST, code, message) if a held lock turns lost. */
static napi_value wait_or_try(napi_env env, napi_callback_info info,
                              int is_try) {
  ARGS(6);
  nclient *nc = arg_client(env, argv[0]);
  if (!nc)
    return NULL;
  const void *name;
  size_t len;
  char *tofree, stack[256];
  if (get_bytes(env, argv[1], &name, &len, &tofree, stack, sizeof(stack)))
    return NULL;
  rt_request_t req;
  char *value;
  if (get_request(env, argv[2], &req, &value)) {
    free(tofree);
    return NULL;
  }
  int64_t ttl = get_i64(env, argv[3], RT_TTL_DEFAULT);
  int64_t timeout = is_try ? 0 : get_i64(env, argv[4], RT_FOREVER);
  napi_value on_event = argv[is_try ? 4 : 5];
  nlock *nl;
  napi_value ext = lock_new(env, nc, on_event, &nl);
  int rc = RT_ENOMEM;
  if (ext) {
    if (is_try)
      rc = rt_try_lock_ex(nc->client, name, len, &req, ttl, lock_on_grant, nl);
    else
      rc = rt_wait_ex(nc->client, name, len, &req, ttl, timeout, lock_on_grant,
                      nl, &nl->lock);
    if (rc != 0) {
      nl->lock = NULL;
      item_done(&nl->it);
    }
  }
  free(tofree);
  free(value);
  if (!ext)
    return NULL;
  if (rc != 0)
    return throw_rt(env, rc, NULL);
  return ext;
}

napi_value js_wait(napi_env env, napi_callback_info info) {
  return wait_or_try(env, info, 0);
}

napi_value js_try_lock(napi_env env, napi_callback_info info) {
  return wait_or_try(env, info, 1);
}

static void on_signal(rt_lock_t *lock, int status, void *data) {
  (void)lock;
  ncall *c = data;
  nlock *nl = c->nl;
  call_finish(c, status);
  if (nl)
    item_done(&nl->it); /* the handle is freed after this */
}

static void on_lock_call(rt_lock_t *lock, int status, void *data) {
  (void)lock;
  call_finish(data, status);
}

/* Lock calls return a status (0 or RT_E*: thrown by the JavaScript side)
 * instead of throwing, so a stale handle reads as RT_ERELEASED. */
static int lock_usable(nlock *nl) { return nl->lock && !nl->it.done; }

/* The lock handle a lock call got in v, if it is usable; else NULL with
 * *ret what the call returns (RT_ERELEASED, or NULL: an exception). */
static nlock *usable_lock(napi_env env, napi_value v, napi_value *ret) {
  nlock *nl = arg_lock(env, v);
  *ret = NULL;
  if (nl != NULL && !lock_usable(nl)) {
    *ret = ret_int(env, RT_ERELEASED);
    nl = NULL;
  }
  return nl;
}

/* A lock call's opening: its n arguments, and nl the usable lock handle in
 * argv[0] (else the call returns at once, as usable_lock says). */
#define LOCK_ARGS(n)                                                           \
  ARGS(n);                                                                     \
  napi_value ret_;                                                             \
  nlock *nl = usable_lock(env, argv[0], &ret_);                                \
  if (!nl)                                                                     \
  return ret_

/* signal(lock, cb) -> status */
napi_value js_signal(napi_env env, napi_callback_info info) {
  LOCK_ARGS(2);
  ncall *c = call_new(env, nl->it.nc, argv[1], nl);
  if (!c)
    return ret_int(env, RT_ENOMEM);
  int rc = rt_signal(nl->lock, on_signal, c);
  if (rc != 0) {
    c->nl = NULL;
    call_free(c);
    if (rc == RT_ECLOSED)
      item_done(&nl->it);
  }
  return ret_int(env, rc);
}

/* extend(lock, ttl, cb) -> status */
napi_value js_extend(napi_env env, napi_callback_info info) {
  LOCK_ARGS(3);
  ncall *c = call_new(env, nl->it.nc, argv[2], nl);
  if (!c)
    return ret_int(env, RT_ENOMEM);
  int rc = rt_extend(nl->lock, get_i64(env, argv[1], RT_TTL_DEFAULT),
                     on_lock_call, c);
  if (rc != 0)
    call_free(c);
  return ret_int(env, rc);
}

/* proclaim(lock, value, cb) -> status */
napi_value js_proclaim(napi_env env, napi_callback_info info) {
  LOCK_ARGS(3);
  const void *value;
  size_t len;
  char *tofree, stack[256];
  if (get_bytes(env, argv[1], &value, &len, &tofree, stack, sizeof(stack)))
    return NULL;
  ncall *c = call_new(env, nl->it.nc, argv[2], nl);
  int rc = RT_ENOMEM;
  if (c) {
    rc = rt_proclaim(nl->lock, value, len, on_lock_call, c);
    if (rc != 0)
      call_free(c);
  }
  free(tofree);
  return ret_int(env, rc);
}

/* cancel(lock) -> status */
napi_value js_cancel(napi_env env, napi_callback_info info) {
  LOCK_ARGS(1);
  return ret_int(env, rt_cancel(nl->lock));
}

/* autoRenew(lock, everyMs) -> status */
napi_value js_auto_renew(napi_env env, napi_callback_info info) {
  LOCK_ARGS(2);
  return ret_int(env, rt_lock_auto_renew(
                          nl->lock, get_i64(env, argv[1], RT_RENEW_DEFAULT)));
}

/* Call c's callback with (status, code, message, yes) and free c: the
 * answer of rt_owned() and rt_locked(). */
void finish_yes_no(ncall *c, int status, int yes) {
  nclient *nc = c->nc;
  if (c->cb && js_ok(nc)) {
    napi_handle_scope scope;
    napi_open_handle_scope(nc->env, &scope);
    napi_value argv[4];
    status_args(nc, status, argv);
    napi_get_boolean(nc->env, yes != 0, &argv[3]);
    call_js(nc, c->cb, 4, argv);
    napi_close_handle_scope(nc->env, scope);
  }
  call_free(c);
}

static void on_owned(rt_lock_t *lock, int status, int owned, void *data) {
  (void)lock;
  finish_yes_no(data, status, owned);
}

/* owned(lock, cb(status, code, message, owned)) -> status */
napi_value js_owned(napi_env env, napi_callback_info info) {
  LOCK_ARGS(2);
  ncall *c = call_new(env, nl->it.nc, argv[1], nl);
  if (!c)
    return ret_int(env, RT_ENOMEM);
  int rc = rt_owned(nl->lock, on_owned, c);
  if (rc != 0)
    call_free(c);
  return ret_int(env, rc);
}

/* lockInfo(lock) -> {id, fence, leaseMs, deadlineMs, leaseLeftMs,
 * position, state} or null once the handle is gone. */
napi_value js_lock_info(napi_env env, napi_callback_info info) {
  ARGS(1);
  nlock *nl = arg_lock(env, argv[0]);
  if (!nl)
    return NULL;
  napi_value o;
  if (!lock_usable(nl)) {
    napi_get_null(env, &o);
    return o;
  }
  rt_lock_t *l = nl->lock;
  CHECK(env, napi_create_object(env, &o));
  set_str(env, o, "id", rt_lock_id(l));
  set_u64big(env, o, "fence", rt_lock_fence(l));
  set_i64(env, o, "leaseMs", rt_lock_lease_ms(l));
  set_i64(env, o, "deadlineMs", rt_lock_deadline_ms(l));
  set_i64(env, o, "leaseLeftMs", rt_lock_lease_left_ms(l));
  set_i64(env, o, "position", (int64_t)rt_lock_position(l));
  set_str(env, o, "state", rt_lock_state_name(rt_lock_state(l)));
  return o;
}

/* lockFence(lock) -> bigint (0n when not held or gone) */
napi_value js_lock_fence(napi_env env, napi_callback_info info) {
  ARGS(1);
  nlock *nl = arg_lock(env, argv[0]);
  if (!nl)
    return NULL;
  napi_value v;
  napi_create_bigint_uint64(env, lock_usable(nl) ? rt_lock_fence(nl->lock) : 0,
                            &v);
  return v;
}

/* closeItems(client, forceLost) -> undefined. forceLost false: cancel every
 * pending wait (locks and multi-locks; their callbacks get RT_ECANCELED).
 * forceLost true: tell every held lock it is lost (onEvent(1, RT_ELOST)),
 * before close() releases it. The JavaScript side keeps no list of them. */
napi_value js_close_items(napi_env env, napi_callback_info info) {
  ARGS(2);
  nclient *nc = arg_client(env, argv[0]);
  if (!nc)
    return NULL;
  bool force = false;
  napi_get_value_bool(env, argv[1], &force);
  size_t n = 0;
  for (nitem *it = nc->items.next; it != &nc->items; it = it->next)
    n++;
  nitem **all = n ? malloc(n * sizeof(*all)) : NULL;
  if (n && !all)
    return throw_rt(env, RT_ENOMEM, NULL);
  size_t k = 0;
  for (nitem *it = nc->items.next; it != &nc->items && k < n; it = it->next)
    all[k++] = it;
  /* Each is checked again at its turn: a callback of an earlier one may
   * have ended it (its memory lives on while its external does). */
  for (size_t i = 0; i < k; i++) {
    nitem *it = all[i];
    if (it->done)
      continue;
    if (it->type == ITEM_LOCK) {
      nlock *nl = (nlock *)it;
      if (!nl->lock)
        continue;
      rt_lock_state_t st = rt_lock_state(nl->lock);
      if (!force && st == RT_LOCK_QUEUED)
        rt_cancel(nl->lock);
      else if (force && st == RT_LOCK_HELD)
        lock_on_lost(nl->lock, nl);
    } else if (it->type == ITEM_MULTI && !force) {
      nmulti *nm = (nmulti *)it;
      if (nm->multi && !nm->held)
        rt_cancel_all(nm->multi);
    }
  }
  free(all);
  return ret_undefined(env);
}
