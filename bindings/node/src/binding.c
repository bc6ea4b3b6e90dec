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
#include <node_api.h>
#include <redturn.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- Native objects ------------------------------------------------------ */

typedef struct nclient nclient;

typedef enum { ITEM_LOCK, ITEM_MULTI, ITEM_OBS } item_type;

/* What a client tracks of each lock, multi-lock and observer it made, so
 * its close can end them all. */
typedef struct nitem {
  item_type type;
  nclient *nc;
  struct nitem *prev, *next;
  napi_ref on_event; /* JavaScript function, strong while !done */
  int done;          /* the library's handle is gone */
  int js_alive;      /* the external is not finalized yet */
} nitem;

typedef struct {
  nitem it;
  rt_lock_t *lock;
} nlock;

typedef struct {
  nitem it;
  rt_multi_t *multi;
  size_t n;
  int held;
} nmulti;

typedef struct {
  nitem it;
  rt_observer_t *obs;
} nobs;

struct nclient {
  napi_env env;
  rt_client_t *client;
  napi_async_context actx;
  napi_ref self;     /* its own external, strong until closed */
  napi_ref on_close; /* the close callback, or NULL */
  napi_ref on_connect;
  napi_async_cleanup_hook_handle hook;
  nitem items; /* list head */
  int closing;
  int closed;
  int teardown; /* the environment is going away: no more JavaScript */
  int js_alive;
};

/* A request's callback argument: the object and a ref to a function. */
typedef struct {
  nclient *nc;
  napi_ref cb;
  nlock *nl; /* signal/extend/proclaim/owned: the lock (for messages) */
} ncall;

/* ---- Helpers ------------------------------------------------------------- */

#define CHECK(env, call)                                                       \
  do {                                                                         \
    if ((call) != napi_ok) {                                                   \
      throw_last(env);                                                         \
      return NULL;                                                             \
    }                                                                          \
  } while (0)

static void throw_last(napi_env env) {
  const napi_extended_error_info *info = NULL;
  bool pending = false;
  napi_is_exception_pending(env, &pending);
  if (pending)
    return;
  napi_get_last_error_info(env, &info);
  napi_throw_error(env, "RT_EINVAL",
                   info && info->error_message ? info->error_message
                                               : "Node-API call failed");
}

/* Throw an Error with code rt_err_name(rc) and message msg (or
 * rt_strerror(rc)). Returns NULL for the caller to return. */
static napi_value throw_rt(napi_env env, int rc, const char *msg) {
  napi_throw_error(env, rt_err_name(rc), msg ? msg : rt_strerror(rc));
  return NULL;
}

static void item_link(nclient *nc, nitem *it, item_type type) {
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
static void item_done(nitem *it) {
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

static void item_finalize(napi_env env, void *data, void *hint) {
  (void)env;
  (void)hint;
  nitem *it = data;
  nclient *nc = it->nc;
  it->js_alive = 0;
  item_maybe_free(it);
  (void)nc;
}

/* Can JavaScript run now for this client? */
static int js_ok(nclient *nc) { return !nc->teardown; }

/* Call fn(argv...) as an I/O callback of Node: exceptions go to
 * 'uncaughtException' as any thrown from a callback would. Call inside a
 * handle scope. */
static void call_js(nclient *nc, napi_ref fnref, size_t argc,
                    const napi_value *argv) {
  napi_env env = nc->env;
  napi_value fn, recv, result;
  if (!fnref || napi_get_reference_value(env, fnref, &fn) != napi_ok || !fn)
    return;
  /* napi_make_callback wants an object as the receiver. */
  napi_get_global(env, &recv);
  napi_status st =
      napi_make_callback(env, nc->actx, recv, fn, argc, argv, &result);
  if (st != napi_ok) {
    bool pending = false;
    napi_is_exception_pending(env, &pending);
    if (pending) {
      napi_value err;
      napi_get_and_clear_last_exception(env, &err);
      napi_fatal_exception(env, err);
    }
  }
}

/* Codes whose reason is in rt_client_last_error(): Redis's own text, the
 * system's, OpenSSL's. */
static int has_detail(int status) {
  switch (status) {
  case RT_ECONNECT:
  case RT_EAUTH:
  case RT_ETIMEDOUT:
  case RT_EDISCONNECTED:
  case RT_EWRONGTYPE:
  case RT_EREDIS:
  case RT_EPROTO:
  case RT_ENOPERM:
  case RT_EEVICTION:
  case RT_ESERVER:
  case RT_ETLS:
  case RT_ETLSVERIFY:
  case RT_EREADONLY:
  case RT_EREPLICAS:
    return 1;
  default:
    return 0;
  }
}

/* argv[0..2]: status, code name (or null), message (or null). */
static void status_args(nclient *nc, int status, napi_value *argv) {
  napi_env env = nc->env;
  napi_create_int32(env, status, &argv[0]);
  if (status == 0) {
    napi_get_null(env, &argv[1]);
    napi_get_null(env, &argv[2]);
    return;
  }
  napi_create_string_utf8(env, rt_err_name(status), NAPI_AUTO_LENGTH, &argv[1]);
  const char *msg = rt_strerror(status);
  const char *detail =
      has_detail(status) && nc->client ? rt_client_last_error(nc->client) : "";
  if (detail && *detail) {
    size_t n = strlen(msg) + strlen(detail) + 3;
    char *buf = malloc(n);
    if (buf) {
      snprintf(buf, n, "%s: %s", msg, detail);
      napi_create_string_utf8(env, buf, NAPI_AUTO_LENGTH, &argv[2]);
      free(buf);
      return;
    }
  }
  napi_create_string_utf8(env, msg, NAPI_AUTO_LENGTH, &argv[2]);
}

/* A name: a string (UTF-8) or a Buffer / Uint8Array. *tofree is set when
 * the bytes were copied. Returns 0, or -1 with an exception thrown. */
static int get_bytes(napi_env env, napi_value v, const void **p, size_t *len,
                     char **tofree, char *stack, size_t stack_cap) {
  napi_valuetype t;
  *tofree = NULL;
  if (napi_typeof(env, v, &t) != napi_ok)
    return -1;
  if (t == napi_string) {
    size_t n = 0;
    napi_get_value_string_utf8(env, v, NULL, 0, &n);
    char *buf = stack;
    if (n + 1 > stack_cap) {
      buf = malloc(n + 1);
      if (!buf) {
        throw_rt(env, RT_ENOMEM, NULL);
        return -1;
      }
      *tofree = buf;
    }
    napi_get_value_string_utf8(env, v, buf, n + 1, &n);
    *p = buf;
    *len = n;
    return 0;
  }
  bool is_ta = false;
  napi_is_typedarray(env, v, &is_ta);
  if (is_ta) {
    napi_typedarray_type tt;
    size_t n;
    void *data;
    napi_get_typedarray_info(env, v, &tt, &n, &data, NULL, NULL);
    if (tt == napi_uint8_array) {
      *p = data ? data : "";
      *len = n;
      return 0;
    }
  }
  napi_throw_type_error(env, "RT_EINVAL",
                        "resource name must be a string or a Uint8Array");
  return -1;
}

static int64_t get_i64(napi_env env, napi_value v, int64_t dflt) {
  napi_valuetype t;
  int64_t x;
  if (napi_typeof(env, v, &t) != napi_ok || t != napi_number)
    return dflt;
  if (napi_get_value_int64(env, v, &x) != napi_ok)
    return dflt;
  return x;
}

/* A new copy of a string property, NULL if absent/undefined/null. */
static char *opt_str(napi_env env, napi_value obj, const char *key) {
  napi_value v;
  napi_valuetype t;
  bool has = false;
  if (napi_has_named_property(env, obj, key, &has) != napi_ok || !has)
    return NULL;
  if (napi_get_named_property(env, obj, key, &v) != napi_ok ||
      napi_typeof(env, v, &t) != napi_ok || t != napi_string)
    return NULL;
  size_t n = 0;
  napi_get_value_string_utf8(env, v, NULL, 0, &n);
  char *s = malloc(n + 1);
  if (s)
    napi_get_value_string_utf8(env, v, s, n + 1, &n);
  return s;
}

static int64_t opt_i64(napi_env env, napi_value obj, const char *key,
                       int64_t dflt) {
  napi_value v;
  bool has = false;
  if (napi_has_named_property(env, obj, key, &has) != napi_ok || !has)
    return dflt;
  if (napi_get_named_property(env, obj, key, &v) != napi_ok)
    return dflt;
  napi_valuetype t;
  napi_typeof(env, v, &t);
  if (t == napi_boolean) {
    bool b;
    napi_get_value_bool(env, v, &b);
    return b ? 1 : 0;
  }
  return get_i64(env, v, dflt);
}

static void set_str(napi_env env, napi_value obj, const char *key,
                    const char *s) {
  napi_value v;
  if (s)
    napi_create_string_utf8(env, s, NAPI_AUTO_LENGTH, &v);
  else
    napi_get_null(env, &v);
  napi_set_named_property(env, obj, key, v);
}

static void set_i64(napi_env env, napi_value obj, const char *key, int64_t x) {
  napi_value v;
  napi_create_int64(env, x, &v);
  napi_set_named_property(env, obj, key, v);
}

static void set_u64big(napi_env env, napi_value obj, const char *key,
                       uint64_t x) {
  napi_value v;
  napi_create_bigint_uint64(env, x, &v);
  napi_set_named_property(env, obj, key, v);
}

static napi_value make_external(napi_env env, void *p, napi_finalize fin) {
  napi_value ext;
  if (napi_create_external(env, p, fin, NULL, &ext) != napi_ok)
    return NULL;
  return ext;
}

static void *get_external(napi_env env, napi_value v) {
  void *p = NULL;
  napi_valuetype t;
  if (napi_typeof(env, v, &t) != napi_ok || t != napi_external)
    return NULL;
  napi_get_value_external(env, v, &p);
  return p;
}

#define ARGS(n)                                                                \
  size_t argc = (n);                                                           \
  napi_value argv[(n) > 0 ? (n) : 1];                                          \
  CHECK(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));            \
  for (size_t i_ = argc; i_ < (n); i_++)                                       \
  napi_get_undefined(env, &argv[i_])

static nclient *arg_client(napi_env env, napi_value v) {
  nclient *nc = get_external(env, v);
  if (!nc) {
    napi_throw_type_error(env, "RT_EINVAL", "not a redturn client");
    return NULL;
  }
  if (nc->closing || nc->closed) {
    throw_rt(env, RT_ECLOSED, NULL);
    return NULL;
  }
  return nc;
}

static nlock *arg_lock(napi_env env, napi_value v) {
  nitem *it = get_external(env, v);
  if (!it || it->type != ITEM_LOCK) {
    napi_throw_type_error(env, "RT_EINVAL", "not a redturn lock");
    return NULL;
  }
  return (nlock *)it;
}

static napi_value ret_int(napi_env env, int x) {
  napi_value v;
  napi_create_int32(env, x, &v);
  return v;
}

static napi_value ret_undefined(napi_env env) {
  napi_value v;
  napi_get_undefined(env, &v);
  return v;
}

static ncall *call_new(napi_env env, nclient *nc, napi_value fn, nlock *nl) {
  ncall *c = malloc(sizeof(*c));
  if (!c)
    return NULL;
  c->nc = nc;
  c->nl = nl;
  c->cb = NULL;
  napi_valuetype t;
  if (napi_typeof(env, fn, &t) == napi_ok && t == napi_function)
    napi_create_reference(env, fn, 1, &c->cb);
  return c;
}

static void call_free(ncall *c) {
  if (c->cb)
    napi_delete_reference(c->nc->env, c->cb);
  free(c);
}

/* Run a call's callback with (status, code, message) and free it. */
static void call_finish(ncall *c, int status) {
  nclient *nc = c->nc;
  if (c->cb && js_ok(nc)) {
    napi_handle_scope scope;
    napi_open_handle_scope(nc->env, &scope);
    napi_value argv[3];
    status_args(nc, status, argv);
    call_js(nc, c->cb, 3, argv);
    napi_close_handle_scope(nc->env, scope);
  }
  call_free(c);
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
static napi_value js_open(napi_env env, napi_callback_info info) {
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
static napi_value js_close(napi_env env, napi_callback_info info) {
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

static napi_value js_client_id(napi_env env, napi_callback_info info) {
  ARGS(1);
  nclient *nc = arg_client(env, argv[0]);
  if (!nc)
    return NULL;
  napi_value v;
  napi_create_string_utf8(env, rt_client_id(nc->client), NAPI_AUTO_LENGTH, &v);
  return v;
}

static napi_value js_last_error(napi_env env, napi_callback_info info) {
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
  set_i64(env, o, "maxUs", (int64_t)h->max_us);
  set_i64(env, o, "p50Us", (int64_t)rt_histogram_quantile(h, 0.5));
  set_i64(env, o, "p99Us", (int64_t)rt_histogram_quantile(h, 0.99));
  napi_set_named_property(env, obj, key, o);
}

static napi_value js_stats(napi_env env, napi_callback_info info) {
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
  set_i64(env, o, "deadlines", (int64_t)s.deadlines);
  set_i64(env, o, "failures", (int64_t)s.failures);
  set_i64(env, o, "reconnects", (int64_t)s.reconnects);
  set_i64(env, o, "pending", (int64_t)s.pending);
  set_i64(env, o, "held", (int64_t)s.held);
  set_hist(env, o, "acquire", &s.acquire);
  set_hist(env, o, "hold", &s.hold);
  return o;
}

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

static napi_value js_wait(napi_env env, napi_callback_info info) {
  return wait_or_try(env, info, 0);
}

static napi_value js_try_lock(napi_env env, napi_callback_info info) {
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

/* signal(lock, cb) -> status */
static napi_value js_signal(napi_env env, napi_callback_info info) {
  ARGS(2);
  nlock *nl = arg_lock(env, argv[0]);
  if (!nl)
    return NULL;
  if (!lock_usable(nl))
    return ret_int(env, RT_ERELEASED);
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
static napi_value js_extend(napi_env env, napi_callback_info info) {
  ARGS(3);
  nlock *nl = arg_lock(env, argv[0]);
  if (!nl)
    return NULL;
  if (!lock_usable(nl))
    return ret_int(env, RT_ERELEASED);
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
static napi_value js_proclaim(napi_env env, napi_callback_info info) {
  ARGS(3);
  nlock *nl = arg_lock(env, argv[0]);
  if (!nl)
    return NULL;
  if (!lock_usable(nl))
    return ret_int(env, RT_ERELEASED);
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
static napi_value js_cancel(napi_env env, napi_callback_info info) {
  ARGS(1);
  nlock *nl = arg_lock(env, argv[0]);
  if (!nl)
    return NULL;
  if (!lock_usable(nl))
    return ret_int(env, RT_ERELEASED);
  return ret_int(env, rt_cancel(nl->lock));
}

/* autoRenew(lock, everyMs) -> status */
static napi_value js_auto_renew(napi_env env, napi_callback_info info) {
  ARGS(2);
  nlock *nl = arg_lock(env, argv[0]);
  if (!nl)
    return NULL;
  if (!lock_usable(nl))
    return ret_int(env, RT_ERELEASED);
  return ret_int(env, rt_lock_auto_renew(
                          nl->lock, get_i64(env, argv[1], RT_RENEW_DEFAULT)));
}

/* Call c's callback with (status, code, message, yes) and free c: the
 * answer of rt_owned() and rt_locked(). */
static void finish_yes_no(ncall *c, int status, int yes) {
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
static napi_value js_owned(napi_env env, napi_callback_info info) {
  ARGS(2);
  nlock *nl = arg_lock(env, argv[0]);
  if (!nl)
    return NULL;
  if (!lock_usable(nl))
    return ret_int(env, RT_ERELEASED);
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
static napi_value js_lock_info(napi_env env, napi_callback_info info) {
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
static napi_value js_lock_fence(napi_env env, napi_callback_info info) {
  ARGS(1);
  nlock *nl = arg_lock(env, argv[0]);
  if (!nl)
    return NULL;
  napi_value v;
  napi_create_bigint_uint64(env, lock_usable(nl) ? rt_lock_fence(nl->lock) : 0,
                            &v);
  return v;
}

/* ---- Queries ------------------------------------------------------------- */

static void on_locked(rt_client_t *client, int status, int locked, void *data) {
  (void)client;
  finish_yes_no(data, status, locked);
}

/* locked(client, name, cb(status, code, message, locked)) */
static napi_value js_locked(napi_env env, napi_callback_info info) {
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
      set_i64(env, o, "leaseMs", qi->lease_ms);
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
static napi_value js_inspect(napi_env env, napi_callback_info info) {
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
static napi_value js_wait_all(napi_env env, napi_callback_info info) {
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
static napi_value js_signal_all(napi_env env, napi_callback_info info) {
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
static napi_value js_cancel_all(napi_env env, napi_callback_info info) {
  ARGS(1);
  nmulti *nm = arg_multi(env, argv[0]);
  if (!nm)
    return NULL;
  if (!nm->multi || nm->it.done)
    return ret_int(env, RT_ERELEASED);
  return ret_int(env, rt_cancel_all(nm->multi));
}

/* multiFences(multi) -> bigint[] (0n for a resource not held) */
static napi_value js_multi_fences(napi_env env, napi_callback_info info) {
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
static napi_value js_observe(napi_env env, napi_callback_info info) {
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
static napi_value js_observe_stop(napi_env env, napi_callback_info info) {
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
