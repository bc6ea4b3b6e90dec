/* redturn.node: the queries of a resource (locked, inspect). */
#include "internal.h"

/* ---- Queries ------------------------------------------------------------- */

static void on_locked(rt_client_t *client, int status, int locked, void *data) {
  (void)client;
  finish_yes_no(data, status, locked);
}

/* locked(client, name, cb(status, code, message, locked)) */
napi_value js_locked(napi_env env, napi_callback_info info) {
  ARGS(3);
  nclient *nc = arg_client(env, argv[0]);
  if (!nc)
    return NULL;
  const void *name;
  size_t len;
  char *tofree, stack[256];
  if (get_bytes(env, argv[1], &name, &len, &tofree, stack, sizeof(stack)))
    return NULL;
  ncall *c = call_new(env, nc, argv[2], NULL);
  int rc = c ? rt_locked(nc->client, name, len, on_locked, c) : RT_ENOMEM;
  if (rc != 0 && c)
    call_free(c);
  free(tofree);
  if (rc != 0)
    return throw_rt(env, rc, NULL);
  return ret_undefined(env);
}

static napi_value str_array(napi_env env, const char *const *a, size_t n) {
  napi_value arr;
  napi_create_array_with_length(env, n, &arr);
  for (size_t i = 0; i < n; i++) {
    napi_value v;
    if (a && a[i])
      napi_create_string_utf8(env, a[i], NAPI_AUTO_LENGTH, &v);
    else
      napi_get_null(env, &v);
    napi_set_element(env, arr, (uint32_t)i, v);
  }
  return arr;
}

static napi_value num_array(napi_env env, const uint64_t *a, size_t n) {
  napi_value arr;
  napi_create_array_with_length(env, a ? n : 0, &arr);
  for (size_t i = 0; a && i < n; i++) {
    napi_value v;
    napi_create_int64(env, (int64_t)a[i], &v);
    napi_set_element(env, arr, (uint32_t)i, v);
  }
  return arr;
}

static void on_inspect(rt_client_t *client, int status,
                       const rt_queue_info_t *qi, void *data) {
  (void)client;
  ncall *c = data;
  nclient *nc = c->nc;
  if (c->cb && js_ok(nc)) {
    napi_env env = nc->env;
    napi_handle_scope scope;
    napi_open_handle_scope(env, &scope);
    napi_value argv[4];
    status_args(nc, status, argv);
    if (status == 0 && qi) {
      napi_value o;
      napi_create_object(env, &o);
      napi_value b;
      napi_get_boolean(env, qi->locked != 0, &b);
      napi_set_named_property(env, o, "locked", b);
      set_str(env, o, "holder", qi->holder);
      set_str(env, o, "holderClient",
              qi->holder_client[0] ? qi->holder_client : NULL);
      set_str(env, o, "holderLabel", qi->holder_label);
      set_u64big(env, o, "fence", qi->fence);
      set_i64(env, o, "leaseLeft", qi->lease_left_ms);
      set_i64(env, o, "heldMs", qi->held_ms);
      set_i64(env, o, "queueLength", (int64_t)qi->queue_len);
      napi_set_named_property(env, o, "waiters",
                              str_array(env, qi->waiters, qi->nwaiters));
      napi_set_named_property(env, o, "waiterLabels",
                              str_array(env, qi->waiter_labels, qi->nwaiters));
      set_i64(env, o, "serverTimeMs", qi->server_time_ms);
      set_str(env, o, "kind", qi->kind);
      set_i64(env, o, "permits", (int64_t)qi->permits);
      set_i64(env, o, "permitsUsed", (int64_t)qi->permits_used);
      napi_set_named_property(env, o, "holders",
                              str_array(env, qi->holders, qi->nholders));
      napi_set_named_property(env, o, "holderPermits",
                              num_array(env, qi->holder_permits, qi->nholders));
      napi_set_named_property(env, o, "waiterPermits",
                              num_array(env, qi->waiter_permits, qi->nwaiters));
      argv[3] = o;
    } else {
      napi_get_null(env, &argv[3]);
    }
    call_js(nc, c->cb, 4, argv);
    napi_close_handle_scope(env, scope);
  }
  call_free(c);
}

/* inspect(client, name, maxWaiters, cb(status, code, message, info)) */
napi_value js_inspect(napi_env env, napi_callback_info info) {
  ARGS(4);
  nclient *nc = arg_client(env, argv[0]);
  if (!nc)
    return NULL;
  const void *name;
  size_t len;
  char *tofree, stack[256];
  if (get_bytes(env, argv[1], &name, &len, &tofree, stack, sizeof(stack)))
    return NULL;
  int64_t max = get_i64(env, argv[2], 100);
  if (max < 0)
    max = 0;
  ncall *c = call_new(env, nc, argv[3], NULL);
  int rc = c ? rt_inspect(nc->client, name, len, (size_t)max, on_inspect, c)
             : RT_ENOMEM;
  if (rc != 0 && c)
    call_free(c);
  free(tofree);
  if (rc != 0)
    return throw_rt(env, rc, NULL);
  return ret_undefined(env);
}
