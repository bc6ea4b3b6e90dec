/* redturn.node: clients (open, close, id, stats) and the lifetimes of the
 * locks, multi-locks and observers each made. */
#include "internal.h"

void item_link(nclient *nc, nitem *it, item_type type) {
  it->type = type;
  it->nc = nc;
  it->done = 0;
  it->js_alive = 1;
  it->on_event = NULL;
  it->next = nc->items.next;
  it->prev = &nc->items;
  nc->items.next->prev = it;
  nc->items.next = it;
}

static void client_maybe_free(nclient *nc) {
  if (!nc->js_alive && nc->closed && nc->items.next == &nc->items)
    free(nc);
}

static void item_maybe_free(nitem *it) {
  if (it->done && !it->js_alive)
    free(it);
}

/* The library's handle is gone: unlink, drop the callback. */
void item_done(nitem *it) {
  nclient *nc = it->nc;
  if (it->done)
    return;
  it->done = 1;
  it->prev->next = it->next;
  it->next->prev = it->prev;
  it->next = it->prev = it;
  if (it->on_event) {
    napi_delete_reference(nc->env, it->on_event);
    it->on_event = NULL;
  }
  if (it->type == ITEM_LOCK)
    ((nlock *)it)->lock = NULL;
  else if (it->type == ITEM_MULTI)
    ((nmulti *)it)->multi = NULL;
  else
    ((nobs *)it)->obs = NULL;
  item_maybe_free(it);
  client_maybe_free(nc);
}

void item_finalize(napi_env env, void *data, void *hint) {
  (void)env;
  (void)hint;
  nitem *it = data;
  nclient *nc = it->nc;
  it->js_alive = 0;
  item_maybe_free(it);
  (void)nc;
}

/* ---- Client -------------------------------------------------------------- */

static void client_finalize(napi_env env, void *data, void *hint) {
  (void)env;
  (void)hint;
  nclient *nc = data;
  nc->js_alive = 0;
  client_maybe_free(nc);
}

static void on_close(rt_client_t *client, void *data) {
  (void)client;
  nclient *nc = data;
  napi_env env = nc->env;
  napi_handle_scope scope;
  napi_open_handle_scope(env, &scope);
  /* Handles of held locks, multi-locks and observers end here. */
  while (nc->items.next != &nc->items)
    item_done(nc->items.next);
  nc->closed = 1;
  nc->client = NULL;
  if (nc->on_close && js_ok(nc)) {
    napi_value argv[3];
    status_args(nc, 0, argv);
    call_js(nc, nc->on_close, 0, argv);
  }
  if (nc->on_close)
    napi_delete_reference(env, nc->on_close);
  nc->on_close = NULL;
  if (nc->on_connect)
    napi_delete_reference(env, nc->on_connect);
  nc->on_connect = NULL;
  napi_async_destroy(env, nc->actx);
  nc->actx = NULL;
  napi_async_cleanup_hook_handle hook = nc->hook;
  nc->hook = NULL;
  napi_ref self = nc->self;
  nc->self = NULL;
  napi_close_handle_scope(env, scope);
  if (self)
    napi_delete_reference(env, self); /* may finalize and free nc later */
  if (hook)
    napi_remove_async_cleanup_hook(hook);
}

/* The environment (the process, or a worker thread) is going away: close
 * the client (releasing its locks in Redis, bounded by command_timeout_ms)
 * and tell Node when done, so it keeps the loop running until then. */
static void on_env_cleanup(napi_async_cleanup_hook_handle handle, void *arg) {
  nclient *nc = arg;
  nc->teardown = 1;
  nc->hook = handle;
  if (!nc->closing) {
    nc->closing = 1;
    if (rt_client_close(nc->client, on_close, nc) != 0)
      on_close(nc->client, nc);
  }
}

static void on_connect(rt_client_t *client, int status, void *data) {
  (void)client;
  nclient *nc = data;
  if (!nc->on_connect)
    return;
  if (js_ok(nc)) {
    napi_handle_scope scope;
    napi_open_handle_scope(nc->env, &scope);
    napi_value argv[3];
    status_args(nc, status, argv);
    call_js(nc, nc->on_connect, 3, argv);
    napi_close_handle_scope(nc->env, scope);
  }
  if (nc->on_connect) {
    napi_delete_reference(nc->env, nc->on_connect);
    nc->on_connect = NULL;
  }
}

/* open(options, onConnect(status, code, message)) -> client */
napi_value js_open(napi_env env, napi_callback_info info) {
  ARGS(2);
  napi_valuetype t;
  CHECK(env, napi_typeof(env, argv[0], &t));
  if (t != napi_object) {
    napi_throw_type_error(env, "RT_EINVAL", "options must be an object");
    return NULL;
  }
  napi_value o = argv[0];
  rt_options_t opts;
  rt_options_init(&opts);
  enum { NSTR = 15 };
  static const char *const keys[NSTR] = {"url",
                                         "host",
                                         "username",
                                         "password",
                                         "prefix",
                                         "label",
                                         "tlsCaFile",
                                         "tlsCaDir",
                                         "tlsCertFile",
                                         "tlsKeyFile",
                                         "tlsServerName",
                                         "sentinelUsername",
                                         "sentinelPassword",
                                         NULL,
                                         NULL};
  char *strs[NSTR] = {0};
  for (int i = 0; i < NSTR && keys[i]; i++)
    strs[i] = opt_str(env, o, keys[i]);
  opts.url = strs[0];
  opts.host = strs[1] ? strs[1] : opts.host;
  opts.username = strs[2];
  opts.password = strs[3];
  opts.prefix = strs[4] ? strs[4] : opts.prefix;
  opts.label = strs[5];
  opts.tls_ca_file = strs[6];
  opts.tls_ca_dir = strs[7];
  opts.tls_cert_file = strs[8];
  opts.tls_key_file = strs[9];
  opts.tls_server_name = strs[10];
  opts.sentinel_username = strs[11];
  opts.sentinel_password = strs[12];
  opts.port = (int)opt_i64(env, o, "port", opts.port);
  opts.db = (int)opt_i64(env, o, "db", opts.db);
  opts.default_ttl_ms = opt_i64(env, o, "ttl", opts.default_ttl_ms);
  opts.connect_timeout_ms =
      opt_i64(env, o, "connectTimeout", opts.connect_timeout_ms);
  opts.command_timeout_ms =
      opt_i64(env, o, "commandTimeout", opts.command_timeout_ms);
  opts.allow_eviction = (int)opt_i64(env, o, "allowEviction", 0);
  opts.retry_first_connect = (int)opt_i64(env, o, "retryFirstConnect", 0);
  opts.tls = (int)opt_i64(env, o, "tls", 0);
  opts.tls_insecure = (int)opt_i64(env, o, "tlsInsecure", 0);
  opts.wait_replicas = (int)opt_i64(env, o, "waitReplicas", 0);
  opts.wait_replicas_timeout_ms =
      opt_i64(env, o, "waitReplicasTimeout", opts.wait_replicas_timeout_ms);

  napi_value result = NULL;
  char msg[512];
  int rc = rt_options_check(&opts, msg, sizeof(msg));
  nclient *nc = NULL;
  uv_loop_t *loop = NULL;
  if (rc != 0) {
    throw_rt(env, rc, msg[0] ? msg : NULL);
    goto out;
  }
  if (napi_get_uv_event_loop(env, &loop) != napi_ok || !loop) {
    throw_rt(env, RT_ENOTSUP, "no libuv loop in this environment");
    goto out;
  }
  nc = calloc(1, sizeof(*nc));
  if (!nc) {
    throw_rt(env, RT_ENOMEM, NULL);
    goto out;
  }
  nc->env = env;
  nc->js_alive = 1;
  nc->items.next = nc->items.prev = &nc->items;
  napi_value name;
  napi_create_string_utf8(env, "redturn", NAPI_AUTO_LENGTH, &name);
  if (napi_async_init(env, NULL, name, &nc->actx) != napi_ok) {
    free(nc);
    throw_last(env);
    goto out;
  }
  rc = rt_client_open(loop, &opts, on_connect, nc, &nc->client);
  if (rc != 0) {
    napi_async_destroy(env, nc->actx);
    free(nc);
    throw_rt(env, rc, NULL);
    goto out;
  }
  CHECK(env, napi_typeof(env, argv[1], &t));
  if (t == napi_function)
    napi_create_reference(env, argv[1], 1, &nc->on_connect);
  result = make_external(env, nc, client_finalize);
  napi_create_reference(env, result, 1, &nc->self);
  napi_add_async_cleanup_hook(env, on_env_cleanup, nc, &nc->hook);
out:
  for (int i = 0; i < NSTR; i++)
    free(strs[i]);
  return result;
}

/* close(client, onClosed()) -> status */
napi_value js_close(napi_env env, napi_callback_info info) {
  ARGS(2);
  nclient *nc = get_external(env, argv[0]);
  if (!nc) {
    napi_throw_type_error(env, "RT_EINVAL", "not a redturn client");
    return NULL;
  }
  if (nc->closing || nc->closed)
    return ret_int(env, RT_ECLOSED);
  napi_valuetype t;
  CHECK(env, napi_typeof(env, argv[1], &t));
  if (t == napi_function)
    napi_create_reference(env, argv[1], 1, &nc->on_close);
  nc->closing = 1;
  int rc = rt_client_close(nc->client, on_close, nc);
  return ret_int(env, rc);
}

napi_value js_client_id(napi_env env, napi_callback_info info) {
  ARGS(1);
  nclient *nc = arg_client(env, argv[0]);
  if (!nc)
    return NULL;
  napi_value v;
  napi_create_string_utf8(env, rt_client_id(nc->client), NAPI_AUTO_LENGTH, &v);
  return v;
}

napi_value js_last_error(napi_env env, napi_callback_info info) {
  ARGS(1);
  nclient *nc = arg_client(env, argv[0]);
  if (!nc)
    return NULL;
  napi_value v;
  napi_create_string_utf8(env, rt_client_last_error(nc->client),
                          NAPI_AUTO_LENGTH, &v);
  return v;
}

static void set_hist(napi_env env, napi_value obj, const char *key,
                     const rt_histogram_t *h) {
  napi_value o;
  napi_create_object(env, &o);
  set_i64(env, o, "count", (int64_t)h->count);
  set_i64(env, o, "minUs", (int64_t)h->min_us);
  set_i64(env, o, "maxUs", (int64_t)h->max_us);
  set_i64(env, o, "p50Us", (int64_t)rt_histogram_quantile(h, 0.5));
  set_i64(env, o, "p99Us", (int64_t)rt_histogram_quantile(h, 0.99));
  napi_set_named_property(env, obj, key, o);
}

napi_value js_stats(napi_env env, napi_callback_info info) {
  ARGS(1);
  nclient *nc = arg_client(env, argv[0]);
  if (!nc)
    return NULL;
  rt_stats_t s;
  rt_client_stats(nc->client, &s);
  napi_value o;
  CHECK(env, napi_create_object(env, &o));
  set_i64(env, o, "waits", (int64_t)s.waits);
  set_i64(env, o, "tries", (int64_t)s.tries);
  set_i64(env, o, "grants", (int64_t)s.grants);
  set_i64(env, o, "busy", (int64_t)s.busy);
  set_i64(env, o, "releases", (int64_t)s.releases);
  set_i64(env, o, "lost", (int64_t)s.lost);
  set_i64(env, o, "cancels", (int64_t)s.cancels);
  set_i64(env, o, "timeouts", (int64_t)s.timeouts);
  set_i64(env, o, "failures", (int64_t)s.failures);
  set_i64(env, o, "reconnects", (int64_t)s.reconnects);
  set_i64(env, o, "pending", (int64_t)s.pending);
  set_i64(env, o, "held", (int64_t)s.held);
  set_hist(env, o, "acquire", &s.acquire);
  set_hist(env, o, "hold", &s.hold);
  return o;
}
