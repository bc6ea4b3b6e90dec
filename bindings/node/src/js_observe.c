/* redturn.node: observers of an election. */
#include "internal.h"

/* ---- Observers ----------------------------------------------------------- */

static void on_observe(rt_observer_t *obs, int status, const rt_leader_t *ld,
                       void *data) {
  (void)obs;
  nobs *no = data;
  nclient *nc = no->it.nc;
  if (no->it.done)
    return;
  if (js_ok(nc)) {
    napi_env env = nc->env;
    napi_handle_scope scope;
    napi_open_handle_scope(env, &scope);
    napi_value argv[4];
    status_args(nc, status, argv);
    if (status == 0 && ld) {
      napi_value o;
      napi_create_object(env, &o);
      set_str(env, o, "id", ld->id);
      napi_value v;
      napi_create_string_utf8(env, ld->value ? ld->value : "", ld->value_len,
                              &v);
      napi_set_named_property(env, o, "value", v);
      set_u64big(env, o, "fence", ld->fence);
      set_i64(env, o, "deadlineMs", ld->deadline_ms);
      argv[3] = o;
    } else {
      napi_get_null(env, &argv[3]);
    }
    call_js(nc, no->it.on_event, 4, argv);
    napi_close_handle_scope(env, scope);
  }
  if (status != 0 && status != RT_EDISCONNECTED)
    item_done(&no->it); /* last call: freed after this */
}

/* observe(client, name, cb(status, code, message, leader)) -> observer */
napi_value js_observe(napi_env env, napi_callback_info info) {
  ARGS(3);
  nclient *nc = arg_client(env, argv[0]);
  if (!nc)
    return NULL;
  const void *name;
  size_t len;
  char *tofree, stack[256];
  if (get_bytes(env, argv[1], &name, &len, &tofree, stack, sizeof(stack)))
    return NULL;
  nobs *no = calloc(1, sizeof(*no));
  napi_value ext = no ? make_external(env, no, item_finalize) : NULL;
  if (!ext) {
    free(no);
    free(tofree);
    return throw_rt(env, RT_ENOMEM, NULL);
  }
  item_link(nc, &no->it, ITEM_OBS);
  napi_create_reference(env, argv[2], 1, &no->it.on_event);
  int rc = rt_observe(nc->client, name, len, on_observe, no, &no->obs);
  free(tofree);
  if (rc != 0) {
    item_done(&no->it);
    return throw_rt(env, rc, NULL);
  }
  return ext;
}

/* observeStop(observer) */
napi_value js_observe_stop(napi_env env, napi_callback_info info) {
  ARGS(1);
  nitem *it = get_external(env, argv[0]);
  if (!it || it->type != ITEM_OBS) {
    napi_throw_type_error(env, "RT_EINVAL", "not a redturn observer");
    return NULL;
  }
  nobs *no = (nobs *)it;
  if (no->obs && !it->done) {
    rt_observe_stop(no->obs);
    item_done(it);
  }
  return ret_undefined(env);
}
