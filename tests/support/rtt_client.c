/* Test support: clients and lock requests recorded for assertions; see
 * rt_test.h. */
#include "rtt_internal.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
/* ---- clients -------------------------------------------------------------------- */

void rtt_private_start(rtt_private *p, const char *const *extra) {
  rtt_server_start(&p->srv, extra);
  p->adm = rtt_redis_at(p->srv.port);
  rtt_options_at(&p->opts, p->srv.port);
}

void rtt_private_stop(rtt_private *p) {
  rtt_redis_close(p->adm);
  p->adm = NULL;
  rtt_server_stop(&p->srv);
}

int rtt_script_path(void) {
  const char *v = getenv("REDTURN_TEST_SCRIPT_PATH");
  if (v == NULL || v[0] == '\0' || strcmp(v, "auto") == 0)
    return RT_SCRIPT_PATH_AUTO;
  if (strcmp(v, "functions") == 0)
    return RT_SCRIPT_PATH_FUNCTIONS;
  if (strcmp(v, "eval") == 0)
    return RT_SCRIPT_PATH_EVAL;
  if (strcmp(v, "module") == 0)
    return RT_SCRIPT_PATH_MODULE;
  cr_assert_fail(
      "REDTURN_TEST_SCRIPT_PATH=%s: not auto, module, functions or eval", v);
  return RT_SCRIPT_PATH_AUTO;
}

int rtt_lua_path(void) {
  int path = rtt_script_path();
  return path == RT_SCRIPT_PATH_MODULE ? RT_SCRIPT_PATH_AUTO : path;
}

int rtt_module_mode(void) {
  const char *m = getenv("REDTURN_TEST_MODULE");
  return m != NULL && m[0] != '\0';
}

void rtt_options(rt_options_t *o) {
  rt_options_init(o);
  o->url = rtt_url();
  o->prefix = rtt_prefix();
  o->script_path = rtt_script_path();
}

void rtt_options_at(rt_options_t *o, int port) {
  rt_options_init(o);
  o->host = "127.0.0.1";
  o->port = port;
  o->prefix = rtt_prefix();
  o->script_path = rtt_script_path();
}

void rtt_connect_cb(rt_client_t *c, int status, void *data) {
  rtt_client *tc = data;
  (void)c;
  tc->connects++;
  tc->connect_status = status;
}

void rtt_close_cb(rt_client_t *c, void *data) {
  rtt_client *tc = data;
  (void)c;
  tc->closes++;
}

void rtt_open(rtt_client *tc, uv_loop_t *loop, const rt_options_t *o) {
  rt_options_t def;
  if (o == NULL) {
    rtt_options(&def);
    o = &def;
  }
  memset(tc, 0, sizeof(*tc));
  int err = rt_client_open(loop, o, rtt_connect_cb, tc, &tc->c);
  cr_assert_eq(err, 0, "rt_client_open: %s", rt_err_name(err));
  cr_assert_not_null(tc->c);
}

void rtt_open_ready(rtt_client *tc, uv_loop_t *loop, const rt_options_t *o) {
  rtt_open(tc, loop, o);
  cr_assert(rtt_run_until(loop, &tc->connects, 1, 5000),
            "client did not connect within 5 s");
  cr_assert_eq(tc->connect_status, 0, "connect failed: %s",
               rt_err_name(tc->connect_status));
}

void rtt_open_wait(rtt_client *tc, uv_loop_t *loop, const rt_options_t *o) {
  rtt_open(tc, loop, o);
  cr_assert(rtt_run_until(loop, &tc->connects, 1, 8000),
            "no connect result within 8 s");
  cr_assert_eq(tc->connects, 1);
}

void rtt_close(rtt_client *tc) {
  int err = rt_client_close(tc->c, rtt_close_cb, tc);
  cr_assert_eq(err, 0, "rt_client_close: %s", rt_err_name(err));
}

void rtt_close_all(uv_loop_t *loop, rtt_client *first, ...) {
  va_list ap;
  va_start(ap, first);
  for (rtt_client *tc = first; tc != NULL; tc = va_arg(ap, rtt_client *))
    rtt_close(tc);
  va_end(ap);
  rtt_loop_finish(loop);
  va_start(ap, first);
  for (rtt_client *tc = first; tc != NULL; tc = va_arg(ap, rtt_client *))
    cr_assert_eq(tc->closes, 1, "close callback ran %d times", tc->closes);
  va_end(ap);
}

uint64_t rtt_reconnects(const rt_client_t *c) {
  rt_stats_t st;
  rt_client_stats(c, &st);
  return st.reconnects;
}

/* ---- lock requests ----------------------------------------------------------- */

void rtt_lock_cb(rt_lock_t *lock, int status, void *data) {
  rtt_req *r = data;
  r->calls++;
  r->status = status;
  r->at_ms = rtt_now_ms();
  snprintf(r->id, sizeof(r->id), "%s", rt_lock_id(lock));
  if (status == 0) {
    r->lock = lock;
    r->fence = rt_lock_fence(lock);
    r->lease_ms = rt_lock_lease_ms(lock);
    r->position = rt_lock_position(lock);
    if (r->log != NULL)
      rtt_log_add(r->log, "%s", r->tag ? r->tag : "?");
    if (r->signal_on_grant)
      rtt_signal(r);
  } else {
    r->lock = NULL; /* freed after this callback */
    if (r->log != NULL)
      rtt_log_add(r->log, "%s:%s", r->tag ? r->tag : "?", rt_err_name(status));
  }
}

void rtt_signal_cb(rt_lock_t *lock, int status, void *data) {
  rtt_req *r = data;
  (void)lock;
  r->sig_calls++;
  r->sig_status = status;
  r->sig_at_ms = rtt_now_ms();
  r->lock = NULL;
}

void rtt_extend_cb(rt_lock_t *lock, int status, void *data) {
  rtt_req *r = data;
  r->ext_calls++;
  r->ext_status = status;
  r->ext_lease_ms = rt_lock_lease_ms(lock);
}

int rtt_wait_n(rt_client_t *c, const void *name, size_t len, int64_t ttl_ms,
               int64_t timeout_ms, rtt_req *req) {
  rt_lock_t *l = NULL;
  int err = rt_wait(c, name, len, ttl_ms, timeout_ms, rtt_lock_cb, req, &l);
  if (err == 0) {
    req->lock = l;
    snprintf(req->id, sizeof(req->id), "%s", rt_lock_id(l));
  }
  return err;
}

int rtt_wait(rt_client_t *c, const char *name, int64_t ttl_ms,
             int64_t timeout_ms, rtt_req *req) {
  return rtt_wait_n(c, name, strlen(name), ttl_ms, timeout_ms, req);
}

void rtt_next_message(redisContext *s, char *out, size_t cap) {
  struct timeval tv = {2, 0};
  redisSetTimeout(s, tv);
  redisReply *m = NULL;
  cr_assert_eq(redisGetReply(s, (void **)&m), REDIS_OK, "no message came");
  cr_assert(m->type == REDIS_REPLY_ARRAY && m->elements == 3);
  snprintf(out, cap, "%s", m->element[2]->str);
  freeReplyObject(m);
}

int rtt_wait_ex(rt_client_t *c, const char *name, const rt_request_t *kind,
                int64_t ttl_ms, int64_t timeout_ms, rtt_req *req) {
  rt_lock_t *l = NULL;
  int err = rt_wait_ex(c, name, strlen(name), kind, ttl_ms, timeout_ms,
                       rtt_lock_cb, req, &l);
  if (err == 0) {
    req->lock = l;
    snprintf(req->id, sizeof(req->id), "%s", rt_lock_id(l));
  }
  return err;
}

int rtt_try(rt_client_t *c, const char *name, int64_t ttl_ms, rtt_req *req) {
  return rt_try_lock(c, name, strlen(name), ttl_ms, rtt_lock_cb, req);
}

int rtt_signal(rtt_req *req) {
  return rt_signal(req->lock, rtt_signal_cb, req);
}

int rtt_extend(rtt_req *req, int64_t ttl_ms) {
  return rt_extend(req->lock, ttl_ms, rtt_extend_cb, req);
}

void rtt_acquire(uv_loop_t *loop, rt_client_t *c, const char *name,
                 int64_t ttl_ms, rtt_req *req) {
  int err = rtt_wait(c, name, ttl_ms, RT_FOREVER, req);
  cr_assert_eq(err, 0, "rt_wait(%s): %s", name, rt_err_name(err));
  cr_assert(rtt_run_until(loop, &req->calls, 1, 5000),
            "wait for %s not answered within 5 s", name);
  cr_assert_eq(req->status, 0, "wait for %s failed: %s (%s)", name,
               rt_err_name(req->status), rt_client_last_error(c));
}

void rtt_release(uv_loop_t *loop, rtt_req *req, int want_status) {
  int calls = req->sig_calls;
  int err = rtt_signal(req);
  cr_assert_eq(err, 0, "rt_signal: %s", rt_err_name(err));
  cr_assert(rtt_run_until(loop, &req->sig_calls, calls + 1, 10000),
            "signal not answered within 10 s");
  cr_assert_eq(req->sig_status, want_status, "signal: %s, want %s",
               rt_err_name(req->sig_status), rt_err_name(want_status));
}

void rtt_wait_queued(uv_loop_t *loop, rt_client_t *c, const char *name,
                     int64_t ttl_ms, rtt_req *req) {
  rtt_wait_ex_queued(loop, c, name, NULL, ttl_ms, req);
}

void rtt_wait_ex_queued(uv_loop_t *loop, rt_client_t *c, const char *name,
                        const rt_request_t *kind, int64_t ttl_ms,
                        rtt_req *req) {
  int err = rtt_wait_ex(c, name, kind, ttl_ms, RT_FOREVER, req);
  cr_assert_eq(err, 0, "rt_wait(%s): %s", name, rt_err_name(err));
  RTT_RUN_UNTIL(loop, req->calls > 0 || rt_lock_position(req->lock) > 0, 5000);
  cr_assert_eq(req->calls, 0, "%s was not queued: %s", name,
               rt_err_name(req->status));
  cr_assert_gt(rt_lock_position(req->lock), 0, "%s: no enqueue reply", name);
}

void rtt_expect_grant(uv_loop_t *loop, rtt_req *req, int64_t max_ms,
                      const char *what) {
  RTT_RUN_UNTIL(loop, req->calls > 0, max_ms);
  cr_assert_eq(req->calls, 1, "%s: the waiter hangs (no callback in %lld ms)",
               what, (long long)max_ms);
  cr_assert_eq(req->status, 0, "%s: the wait failed with %s (%s)", what,
               rt_err_name(req->status), rt_strerror(req->status));
}

void rtt_expect_evicted(uv_loop_t *loop, rtt_req *held, rtt_req *waiting,
                        const char *out) {
  cr_assert(strstr(out, held->id) != NULL && strstr(out, waiting->id) != NULL,
            "evict's output names neither the holder %s nor the waiter %s: %s",
            held->id, waiting->id, out);
  rtt_expect_grant(loop, waiting, 5000, "the waiter behind the evicted");
  cr_assert_gt(waiting->fence, held->fence);
  rtt_release(loop, held, RT_ELOST);
  rtt_release(loop, waiting, 0);
}
