/* redturn.node's internal declarations, a section per file, in the order
 * of the layers (src/layers.txt): js_values.c (errors, values, arguments,
 * calls into JavaScript) at the bottom, then js_client.c (clients and the
 * lifetimes of what they made), then the requests (js_locks.c, js_queries.c,
 * js_multi.c, js_observe.c), and binding.c (the module and its exports,
 * declaring nothing) on top. Each file calls only its own layer or those
 * below. */
#ifndef RTN_INTERNAL_H
#define RTN_INTERNAL_H

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

#define CHECK(env, call)                                                       \
  do {                                                                         \
    if ((call) != napi_ok) {                                                   \
      throw_last(env);                                                         \
      return NULL;                                                             \
    }                                                                          \
  } while (0)
#define ARGS(n)                                                                \
  size_t argc = (n);                                                           \
  napi_value argv[(n) > 0 ? (n) : 1];                                          \
  CHECK(env, napi_get_cb_info(env, info, &argc, argv, NULL, NULL));            \
  for (size_t i_ = argc; i_ < (n); i_++)                                       \
  napi_get_undefined(env, &argv[i_])

/* js_values.c */
void throw_last(napi_env env);
napi_value throw_rt(napi_env env, int rc, const char *msg);
void status_args(nclient *nc, int status, napi_value *argv);
int get_bytes(napi_env env, napi_value v, const void **p, size_t *len,
              char **tofree, char *stack, size_t stack_cap);
int64_t get_i64(napi_env env, napi_value v, int64_t dflt);
char *opt_str(napi_env env, napi_value obj, const char *key);
int64_t opt_i64(napi_env env, napi_value obj, const char *key, int64_t dflt);
void set_str(napi_env env, napi_value obj, const char *key, const char *s);
void set_i64(napi_env env, napi_value obj, const char *key, int64_t x);
void set_u64big(napi_env env, napi_value obj, const char *key, uint64_t x);
napi_value make_external(napi_env env, void *p, napi_finalize fin);
void *get_external(napi_env env, napi_value v);
nclient *arg_client(napi_env env, napi_value v);
nlock *arg_lock(napi_env env, napi_value v);
napi_value ret_int(napi_env env, int x);
napi_value ret_undefined(napi_env env);
ncall *call_new(napi_env env, nclient *nc, napi_value fn, nlock *nl);
void call_free(ncall *c);
/* Can JavaScript run now for this client? */
int js_ok(nclient *nc);
void call_js(nclient *nc, napi_ref fnref, size_t argc, const napi_value *argv);
void call_finish(ncall *c, int status);

/* js_client.c */
void item_link(nclient *nc, nitem *it, item_type type);
void item_done(nitem *it);
void item_finalize(napi_env env, void *data, void *hint);
napi_value js_open(napi_env env, napi_callback_info info);
napi_value js_close(napi_env env, napi_callback_info info);
napi_value js_client_id(napi_env env, napi_callback_info info);
napi_value js_last_error(napi_env env, napi_callback_info info);
napi_value js_stats(napi_env env, napi_callback_info info);

/* js_locks.c */
napi_value js_wait(napi_env env, napi_callback_info info);
napi_value js_try_lock(napi_env env, napi_callback_info info);
napi_value js_signal(napi_env env, napi_callback_info info);
napi_value js_extend(napi_env env, napi_callback_info info);
napi_value js_proclaim(napi_env env, napi_callback_info info);
napi_value js_cancel(napi_env env, napi_callback_info info);
napi_value js_auto_renew(napi_env env, napi_callback_info info);
void finish_yes_no(ncall *c, int status, int yes);
napi_value js_owned(napi_env env, napi_callback_info info);
napi_value js_lock_info(napi_env env, napi_callback_info info);
napi_value js_lock_fence(napi_env env, napi_callback_info info);
napi_value js_close_items(napi_env env, napi_callback_info info);

/* js_queries.c */
napi_value js_locked(napi_env env, napi_callback_info info);
napi_value js_inspect(napi_env env, napi_callback_info info);

/* js_multi.c */
napi_value js_wait_all(napi_env env, napi_callback_info info);
napi_value js_signal_all(napi_env env, napi_callback_info info);
napi_value js_cancel_all(napi_env env, napi_callback_info info);
napi_value js_multi_fences(napi_env env, napi_callback_info info);

/* js_observe.c */
napi_value js_observe(napi_env env, napi_callback_info info);
napi_value js_observe_stop(napi_env env, napi_callback_info info);

#endif /* RTN_INTERNAL_H */
