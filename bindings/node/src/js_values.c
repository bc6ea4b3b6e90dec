/* redturn.node: thrown errors, status arguments of callbacks, values
 * between JavaScript and C, externals, arguments, pending calls and the
 * calls into JavaScript. */
#include "internal.h"

void throw_last(napi_env env) {
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
napi_value throw_rt(napi_env env, int rc, const char *msg) {
  napi_throw_error(env, rt_err_name(rc), msg ? msg : rt_strerror(rc));
  return NULL;
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
  case RT_ENOMODULE:
    return 1;
  default:
    return 0;
  }
}

/* argv[0..2]: status, code name (or null), message (or null). */
void status_args(nclient *nc, int status, napi_value *argv) {
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
int get_bytes(napi_env env, napi_value v, const void **p, size_t *len,
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

int64_t get_i64(napi_env env, napi_value v, int64_t dflt) {
  napi_valuetype t;
  int64_t x;
  if (napi_typeof(env, v, &t) != napi_ok || t != napi_number)
    return dflt;
  if (napi_get_value_int64(env, v, &x) != napi_ok)
    return dflt;
  return x;
}

/* A new copy of a string property, NULL if absent/undefined/null. */
char *opt_str(napi_env env, napi_value obj, const char *key) {
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

int64_t opt_i64(napi_env env, napi_value obj, const char *key, int64_t dflt) {
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

void set_str(napi_env env, napi_value obj, const char *key, const char *s) {
  napi_value v;
  if (s)
    napi_create_string_utf8(env, s, NAPI_AUTO_LENGTH, &v);
  else
    napi_get_null(env, &v);
  napi_set_named_property(env, obj, key, v);
}

void set_i64(napi_env env, napi_value obj, const char *key, int64_t x) {
  napi_value v;
  napi_create_int64(env, x, &v);
  napi_set_named_property(env, obj, key, v);
}

void set_u64big(napi_env env, napi_value obj, const char *key, uint64_t x) {
  napi_value v;
  napi_create_bigint_uint64(env, x, &v);
  napi_set_named_property(env, obj, key, v);
}

napi_value make_external(napi_env env, void *p, napi_finalize fin) {
  napi_value ext;
  if (napi_create_external(env, p, fin, NULL, &ext) != napi_ok)
    return NULL;
  return ext;
}

void *get_external(napi_env env, napi_value v) {
  void *p = NULL;
  napi_valuetype t;
  if (napi_typeof(env, v, &t) != napi_ok || t != napi_external)
    return NULL;
  napi_get_value_external(env, v, &p);
  return p;
}

nclient *arg_client(napi_env env, napi_value v) {
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

nlock *arg_lock(napi_env env, napi_value v) {
  nitem *it = get_external(env, v);
  if (!it || it->type != ITEM_LOCK) {
    napi_throw_type_error(env, "RT_EINVAL", "not a redturn lock");
    return NULL;
  }
  return (nlock *)it;
}

napi_value ret_int(napi_env env, int x) {
  napi_value v;
  napi_create_int32(env, x, &v);
  return v;
}

napi_value ret_undefined(napi_env env) {
  napi_value v;
  napi_get_undefined(env, &v);
  return v;
}

ncall *call_new(napi_env env, nclient *nc, napi_value fn, nlock *nl) {
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

void call_free(ncall *c) {
  if (c->cb)
    napi_delete_reference(c->nc->env, c->cb);
  free(c);
}

/* Can JavaScript run now for this client? */
int js_ok(nclient *nc) { return !nc->teardown; }

/* Call fn(argv...) as an I/O callback of Node: exceptions go to
 * 'uncaughtException' as any thrown from a callback would. Call inside a
 * handle scope. */
void call_js(nclient *nc, napi_ref fnref, size_t argc, const napi_value *argv) {
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

/* Run a call's callback with (status, code, message) and free it. */
void call_finish(ncall *c, int status) {
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
