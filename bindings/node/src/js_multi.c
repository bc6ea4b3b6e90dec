/* redturn.node: multi-locks (waitAll, signalAll, cancelAll, fences). */
#include "internal.h"

/* ---- Multi-locks --------------------------------------------------------- */

static void multi_finalize(napi_env env, void *data, void *hint) {
  item_finalize(env, data, hint);
}

static void on_multi_wait(rt_multi_t *multi, int status, void *data) {
  nmulti *nm = data;
  nclient *nc = nm->it.nc;
  if (status == 0)
    nm->held = 1;
  (void)multi;
  if (js_ok(nc)) {
    napi_handle_scope scope;
    napi_open_handle_scope(nc->env, &scope);
    napi_value argv[3];
    status_args(nc, status, argv);
    call_js(nc, nm->it.on_event, 3, argv);
    napi_close_handle_scope(nc->env, scope);
  }
  if (status != 0)
    item_done(&nm->it);
}

/* waitAll(client, names[], ttl, timeout, cb(status, code, message)) ->
 * multi */
napi_value js_wait_all(napi_env env, napi_callback_info info) {
  ARGS(5);
  nclient *nc = arg_client(env, argv[0]);
  if (!nc)
    return NULL;
  bool is_arr = false;
  napi_is_array(env, argv[1], &is_arr);
  if (!is_arr) {
    napi_throw_type_error(env, "RT_EINVAL", "names must be an array");
    return NULL;
  }
  uint32_t n = 0;
  napi_get_array_length(env, argv[1], &n);
  if (n == 0 || n > RT_MULTI_MAX)
    return throw_rt(env, RT_EINVAL, "names: 1..1024 resource names");
  const void **names = calloc(n, sizeof(*names));
  size_t *lens = calloc(n, sizeof(*lens));
  char **frees = calloc(n, sizeof(*frees));
  napi_value result = NULL;
  uint32_t got = 0;
  if (!names || !lens || !frees) {
    throw_rt(env, RT_ENOMEM, NULL);
    goto out;
  }
  for (; got < n; got++) {
    napi_value v;
    napi_get_element(env, argv[1], got, &v);
    /* Copied: a string's stack buffer would not outlive the loop. */
    if (get_bytes(env, v, &names[got], &lens[got], &frees[got], NULL, 0))
      goto out;
  }
  nmulti *nm = calloc(1, sizeof(*nm));
  if (!nm) {
    throw_rt(env, RT_ENOMEM, NULL);
    goto out;
  }
  napi_value ext = make_external(env, nm, multi_finalize);
  if (!ext) {
    free(nm);
    throw_last(env);
    goto out;
  }
  item_link(nc, &nm->it, ITEM_MULTI);
  napi_create_reference(env, argv[4], 1, &nm->it.on_event);
  nm->n = n;
  int rc = rt_wait_all(nc->client, (const void *const *)names, lens, n,
                       get_i64(env, argv[2], RT_TTL_DEFAULT),
                       get_i64(env, argv[3], RT_FOREVER), on_multi_wait, nm,
                       &nm->multi);
  if (rc != 0) {
    item_done(&nm->it);
    throw_rt(env, rc, NULL);
    goto out;
  }
  result = ext;
out:
  for (uint32_t i = 0; frees && i < got; i++)
    free(frees[i]);
  free(frees);
  free((void *)names);
  free(lens);
  return result;
}

static void on_multi_signal(rt_multi_t *multi, int status, void *data) {
  (void)multi;
  ncall *c = data;
  nmulti *nm = (nmulti *)(void *)c->nl;
  call_finish(c, status);
  item_done(&nm->it);
}

static nmulti *arg_multi(napi_env env, napi_value v) {
  nitem *it = get_external(env, v);
  if (!it || it->type != ITEM_MULTI) {
    napi_throw_type_error(env, "RT_EINVAL", "not a redturn multi-lock");
    return NULL;
  }
  return (nmulti *)it;
}

/* signalAll(multi, cb) -> status */
napi_value js_signal_all(napi_env env, napi_callback_info info) {
  ARGS(2);
  nmulti *nm = arg_multi(env, argv[0]);
  if (!nm)
    return NULL;
  if (!nm->multi || nm->it.done)
    return ret_int(env, RT_ERELEASED);
  ncall *c = call_new(env, nm->it.nc, argv[1], (nlock *)(void *)nm);
  if (!c)
    return ret_int(env, RT_ENOMEM);
  int rc = rt_signal_all(nm->multi, on_multi_signal, c);
  if (rc != 0) {
    call_free(c);
    if (rc == RT_ECLOSED)
      item_done(&nm->it);
  }
  return ret_int(env, rc);
}

/* cancelAll(multi) -> status */
napi_value js_cancel_all(napi_env env, napi_callback_info info) {
  ARGS(1);
  nmulti *nm = arg_multi(env, argv[0]);
  if (!nm)
    return NULL;
  if (!nm->multi || nm->it.done)
    return ret_int(env, RT_ERELEASED);
  return ret_int(env, rt_cancel_all(nm->multi));
}

/* multiFences(multi) -> bigint[] (0n for a resource not held) */
napi_value js_multi_fences(napi_env env, napi_callback_info info) {
  ARGS(1);
  nmulti *nm = arg_multi(env, argv[0]);
  if (!nm)
    return NULL;
  napi_value arr;
  size_t n = nm->multi && !nm->it.done ? nm->n : 0;
  CHECK(env, napi_create_array_with_length(env, n, &arr));
  for (size_t i = 0; i < n; i++) {
    rt_lock_t *l = rt_multi_lock(nm->multi, i);
    napi_value v;
    napi_create_bigint_uint64(env, l ? rt_lock_fence(l) : 0, &v);
    napi_set_element(env, arr, (uint32_t)i, v);
  }
  return arr;
}
