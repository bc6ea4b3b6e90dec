/* redturn.node: the redturn C client on Node's own libuv loop, through
 * Node-API. A thin layer: every call maps to one library call, results come
 * back through plain JavaScript callbacks, and lib/index.js shapes them into
 * promises, classes and events.
 *
 * Every client lives on the loop napi_get_uv_event_loop() gives for the
 * calling environment (the main thread's, or a worker thread's own), and
 * the library calls back only from that loop, in that thread. Callbacks into
 * JavaScript go through napi_make_callback, so process.nextTick and promise
 * jobs run after each one, as after any I/O callback of Node's own.
 *
 * Lifetimes. A native object (client, lock, multi-lock, observer) is owned
 * jointly by its JavaScript external and by the library's handle; it is
 * freed when both are gone: the external's finalizer clears js_alive, the
 * end of the library's handle sets done. A client holds a strong reference
 * to its own external until its close callback ran, so an open client is
 * never collected (as an open socket is not). */
#include "internal.h"

/* ---- Module -------------------------------------------------------------- */

static napi_value js_err_name(napi_env env, napi_callback_info info) {
  ARGS(1);
  napi_value v;
  napi_create_string_utf8(env, rt_err_name((int)get_i64(env, argv[0], 0)),
                          NAPI_AUTO_LENGTH, &v);
  return v;
}

static napi_value js_strerror(napi_env env, napi_callback_info info) {
  ARGS(1);
  napi_value v;
  napi_create_string_utf8(env, rt_strerror((int)get_i64(env, argv[0], 0)),
                          NAPI_AUTO_LENGTH, &v);
  return v;
}

static napi_value init(napi_env env, napi_value exports) {
  static const struct {
    const char *name;
    napi_callback fn;
  } fns[] = {
      {"open", js_open},
      {"close", js_close},
      {"clientId", js_client_id},
      {"lastError", js_last_error},
      {"stats", js_stats},
      {"wait", js_wait},
      {"tryLock", js_try_lock},
      {"signal", js_signal},
      {"extend", js_extend},
      {"proclaim", js_proclaim},
      {"cancel", js_cancel},
      {"autoRenew", js_auto_renew},
      {"owned", js_owned},
      {"lockInfo", js_lock_info},
      {"lockFence", js_lock_fence},
      {"closeItems", js_close_items},
      {"locked", js_locked},
      {"inspect", js_inspect},
      {"waitAll", js_wait_all},
      {"signalAll", js_signal_all},
      {"cancelAll", js_cancel_all},
      {"multiFences", js_multi_fences},
      {"observe", js_observe},
      {"observeStop", js_observe_stop},
      {"errName", js_err_name},
      {"strerror", js_strerror},
  };
  for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++) {
    napi_value f;
    CHECK(env, napi_create_function(env, fns[i].name, NAPI_AUTO_LENGTH,
                                    fns[i].fn, NULL, &f));
    CHECK(env, napi_set_named_property(env, exports, fns[i].name, f));
  }
  napi_value errs;
  CHECK(env, napi_create_object(env, &errs));
#define RTN_ERR(name, value, msg) set_i64(env, errs, "RT_" #name, value);
  RT_ERRNO_MAP(RTN_ERR)
#undef RTN_ERR
  napi_set_named_property(env, exports, "errors", errs);
  /* rt_lock_auto_renew's "stop" (undefined passes its default). */
  set_i64(env, exports, "renewOff", RT_RENEW_OFF);
  napi_value v;
  napi_create_string_utf8(env, rt_version_string(), NAPI_AUTO_LENGTH, &v);
  napi_set_named_property(env, exports, "version", v);
  return exports;
}

/* NAPI_MODULE defines its own exported functions, without a prototype. */
#if defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wmissing-prototypes"
#endif
NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
