/* The three ways a client runs the protocol on Redis (rt_options_t.
 * script_path): the redturn module's native commands (module/, loaded with
 * --loadmodule), the Functions library (FCALL), EVALSHA. Each forced path
 * grants and hands off, and the stats and the server count the calls it
 * made; AUTO takes the module where the server has it and the Functions
 * library where not; clients of every path share one resource in FIFO
 * order; forcing the module on a server without it refuses the connect in
 * words; a client whose server comes back without the module goes on on
 * the Lua path.
 *
 * Every server here is this file's own, started with or without the
 * module as the test needs (RTT_MODULE_PATH, the build's redturn_module.so),
 * whatever REDTURN_TEST_MODULE says. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "rt_test.h"

RTT_LOOP_SUITE(paths, 60);

/* A private server, with the module loaded or (module 0) without it even
 * in the tests' module mode; port 0: a free one. */
static void start(rtt_server *s, int module, int port) {
  static const char *const with[] = {"--loadmodule", RTT_MODULE_PATH, NULL};
  rts_options o;
  char err[1600];
  if (module && RTT_MODULE_PATH[0] == '\0')
    cr_skip_test("the module is not built (REDTURN_MODULE=OFF)");
  memset(&o, 0, sizeof(o));
  o.dir_prefix = "redturn-it";
  o.port = port;
  o.extra = module ? with : NULL;
  o.no_module = !module;
  cr_assert_eq(rts_start(s, &o, err, sizeof(err)), 0, "%s", err);
}

static void open_path(rtt_client *c, const rtt_server *s, int path) {
  rt_options_t o;
  rtt_options_at(&o, s->port);
  o.script_path = path;
  rtt_open_ready(c, &loop, &o);
}

static rt_stats_t stats(const rtt_client *c) {
  rt_stats_t st;
  rt_client_stats(c->c, &st);
  return st;
}

/* A grant, and a handoff to a second client of the same path. */
static void grant_and_handoff(rtt_client *a, rtt_client *b, redisContext *adm,
                              const char *name) {
  rtt_req r = {0}, w = {0};
  rtt_acquire(&loop, a->c, name, 5000, &r);
  rtt_wait_queued(&loop, b->c, name, 5000, &w);
  rtt_release(&loop, &r, 0);
  rtt_expect_grant(&loop, &w, 5000, "the waiter");
  cr_assert_gt(w.fence, r.fence);
  rtt_release(&loop, &w, 0);
  (void)adm;
}

static void inspect_cb(rt_client_t *c, int status, const rt_queue_info_t *info,
                       void *data) {
  int *ans = data; /* calls, then the path (or the failed status) */
  (void)c;
  ans[0]++;
  ans[1] = status == 0 ? info->script_path : -status;
}

static int inspect_path(rtt_client *c, const char *name) {
  int ans[2] = {0, 0};
  cr_assert_eq(rt_inspect(c->c, name, strlen(name), 5, inspect_cb, ans), 0);
  cr_assert(rtt_run_until(&loop, &ans[0], 1, 5000));
  return ans[1];
}

Test(paths, each_forced_path_grants_hands_off_and_counts_its_calls) {
  rtt_server srv;
  start(&srv, 1, 0);
  redisContext *adm = rtt_redis_at(srv.port);
  static const int paths[] = {RT_SCRIPT_PATH_MODULE, RT_SCRIPT_PATH_FUNCTIONS,
                              RT_SCRIPT_PATH_EVAL};
  static const char *const names[] = {"by-module", "by-functions", "by-eval"};
  for (int i = 0; i < 3; i++) {
    rtt_client a, b;
    rtt_ok(adm, "CONFIG RESETSTAT");
    open_path(&a, &srv, paths[i]);
    open_path(&b, &srv, paths[i]);
    grant_and_handoff(&a, &b, adm, names[i]);
    cr_assert_eq(inspect_path(&a, names[i]), paths[i]);
    rt_stats_t st = stats(&a);
    cr_assert_eq(st.script_path, paths[i], "%s: stats say %d", names[i],
                 st.script_path);
    long long native = rtt_cmdstat_calls(adm, "redturn.enqueue") +
                       rtt_cmdstat_calls(adm, "redturn.release") +
                       rtt_cmdstat_calls(adm, "redturn.inspect");
    long long fcalls =
        rtt_cmdstat_calls(adm, "fcall") + rtt_cmdstat_calls(adm, "fcall_ro");
    long long evals =
        rtt_cmdstat_calls(adm, "evalsha") + rtt_cmdstat_calls(adm, "eval");
    if (paths[i] == RT_SCRIPT_PATH_MODULE) {
      cr_assert_eq(st.module, RT_MODULE_USED);
      cr_assert_eq(st.module_version, 2);
      /* enqueue + release, and inspect */
      cr_assert_geq(st.module_calls, 3);
      cr_assert_eq(st.fcalls + st.evals, 0);
      cr_assert_eq(native, 2 + 2 + 1, "native calls %lld", native);
      cr_assert_eq(fcalls + evals, 0, "%lld script calls", fcalls + evals);
      cr_assert_eq(st.lua_path, RT_SCRIPT_PATH_FUNCTIONS);
    } else {
      /* A forced Lua path never asks for the module. */
      cr_assert_eq(st.module, RT_MODULE_UNKNOWN);
      cr_assert_eq(st.module_calls, 0);
      cr_assert_eq(native, 0, "native calls %lld", native);
      if (paths[i] == RT_SCRIPT_PATH_FUNCTIONS)
        cr_assert(fcalls >= 5 && evals == 0, "%lld fcalls, %lld evals", fcalls,
                  evals);
      else
        cr_assert(evals >= 5 && fcalls == 0, "%lld fcalls, %lld evals", fcalls,
                  evals);
    }
    rtt_close_all(&loop, &a, &b, NULL);
    cr_assert_eq(uv_loop_init(&loop), 0); /* closed by rtt_close_all */
  }
  rtt_redis_close(adm);
  rts_stop(&srv);
}

Test(paths, auto_takes_the_module_where_loaded_and_functions_where_not) {
  rtt_server with, without;
  rtt_client a, b;
  rtt_req r = {0}, q = {0};
  start(&with, 1, 0);
  start(&without, 0, 0);
  open_path(&a, &with, RT_SCRIPT_PATH_AUTO);
  open_path(&b, &without, RT_SCRIPT_PATH_AUTO);
  rtt_acquire(&loop, a.c, "auto", 5000, &r);
  rtt_release(&loop, &r, 0);
  rtt_acquire(&loop, b.c, "auto", 5000, &q);
  rtt_release(&loop, &q, 0);
  rt_stats_t sa = stats(&a), sb = stats(&b);
  cr_assert_eq(sa.script_path, RT_SCRIPT_PATH_MODULE);
  cr_assert_eq(sa.module, RT_MODULE_USED);
  cr_assert_geq(sa.module_calls, 2);
  cr_assert_eq(sb.script_path, RT_SCRIPT_PATH_FUNCTIONS);
  cr_assert_eq(sb.module, RT_MODULE_ABSENT);
  cr_assert_eq(sb.module_calls, 0);
  cr_assert_geq(sb.fcalls, 2);
  /* A semaphore's calls run on the module there too, none on Lua. */
  uint64_t module_calls = sa.module_calls, fcalls = sa.fcalls;
  rt_request_t sem = {.kind = RT_KIND_SEMAPHORE, .permits = 1, .of = 2};
  rtt_req s = {0};
  cr_assert_eq(rtt_wait_ex(a.c, "sem", &sem, 5000, 5000, &s), 0);
  rtt_expect_grant(&loop, &s, 5000, "the semaphore");
  rtt_release(&loop, &s, 0);
  sa = stats(&a);
  cr_assert_geq(sa.module_calls, module_calls + 2, "%llu module calls",
                (unsigned long long)sa.module_calls);
  cr_assert_eq(sa.fcalls, fcalls, "%llu fcalls", (unsigned long long)sa.fcalls);
  rtt_close_all(&loop, &a, &b, NULL);
  rts_stop(&with);
  rts_stop(&without);
}

/* One resource, waiters of every path queued in turn behind a module
 * holder: granted in queue order, fences rising. */
Test(paths, clients_of_every_path_share_a_resource_in_fifo_order) {
  rtt_server srv;
  rtt_client c[4];
  rtt_req r[4];
  static const int paths[] = {RT_SCRIPT_PATH_MODULE, RT_SCRIPT_PATH_FUNCTIONS,
                              RT_SCRIPT_PATH_EVAL, RT_SCRIPT_PATH_MODULE};
  start(&srv, 1, 0);
  redisContext *adm = rtt_redis_at(srv.port);
  memset(r, 0, sizeof(r));
  for (int i = 0; i < 4; i++)
    open_path(&c[i], &srv, paths[i]);
  rtt_acquire(&loop, c[0].c, "shared", 5000, &r[0]);
  for (int i = 1; i < 4; i++)
    rtt_wait_queued(&loop, c[i].c, "shared", 5000, &r[i]);
  cr_assert_eq(rtt_queue_len(adm, "shared"), 4); /* holder + 3 waiting */
  for (int i = 1; i < 4; i++) {
    rtt_release(&loop, &r[i - 1], 0);
    rtt_expect_grant(&loop, &r[i], 5000, "the next in line");
    cr_assert_gt(r[i].fence, r[i - 1].fence);
    for (int j = i + 1; j < 4; j++)
      cr_assert_eq(r[j].calls, 0, "waiter %d granted before waiter %d", j, i);
  }
  rtt_release(&loop, &r[3], 0);
  cr_assert_eq(rtt_keys_left(adm, "shared"), 0);
  cr_assert_gt(stats(&c[0]).module_calls, 0);
  cr_assert_gt(stats(&c[1]).fcalls, 0);
  cr_assert_gt(stats(&c[2]).evals, 0);
  rtt_close_all(&loop, &c[0], &c[1], &c[2], &c[3], NULL);
  rtt_redis_close(adm);
  rts_stop(&srv);
}

Test(paths, forcing_the_module_without_it_refuses_the_connect_in_words) {
  rtt_server srv;
  rtt_client a;
  rt_options_t o;
  char url[128], want[160];
  start(&srv, 0, 0);
  rtt_options_at(&o, srv.port);
  o.script_path = RT_SCRIPT_PATH_AUTO; /* the URL's says it */
  snprintf(url, sizeof(url), "redis://127.0.0.1:%d?script_path=module",
           srv.port);
  o.url = url;
  rtt_open_wait(&a, &loop, &o);
  cr_assert_eq(a.connect_status, RT_ENOMODULE, "%s",
               rt_err_name(a.connect_status));
  snprintf(want, sizeof(want),
           "script_path module: 127.0.0.1:%d has no redturn module "
           "(redturn.version: ERR unknown command",
           srv.port);
  cr_assert(strncmp(rt_client_last_error(a.c), want, strlen(want)) == 0, "%s",
            rt_client_last_error(a.c));
  rtt_close(&a);
  rtt_loop_finish(&loop);
  rts_stop(&srv);
}

/* An ACL that refuses redturn.version: the Lua path, and the stats say
 * why. */
Test(paths, a_user_refused_the_module_gets_the_lua_path) {
  rtt_server srv;
  rtt_client a;
  rtt_req r = {0};
  rt_options_t o;
  start(&srv, 1, 0);
  redisContext *adm = rtt_redis_at(srv.port);
  rtt_ok(adm, "ACL SETUSER nomod on >pw ~* &* +@all -redturn.version");
  rtt_options_at(&o, srv.port);
  o.script_path = RT_SCRIPT_PATH_AUTO;
  o.username = "nomod";
  o.password = "pw";
  rtt_open_ready(&a, &loop, &o);
  rtt_acquire(&loop, a.c, "acl", 5000, &r);
  rtt_release(&loop, &r, 0);
  rt_stats_t st = stats(&a);
  cr_assert_eq(st.module, RT_MODULE_REFUSED);
  cr_assert_eq(st.script_path, RT_SCRIPT_PATH_FUNCTIONS);
  cr_assert_eq(st.module_calls, 0);
  rtt_close(&a);
  rtt_loop_finish(&loop);
  rtt_redis_close(adm);
  rts_stop(&srv);
}

/* The server restarts without the module on the same port (a failover to a
 * server without it): the client reconnects and goes on on the Lua path,
 * with its lock of before. */
Test(paths, a_server_back_without_the_module_leaves_the_client_on_lua) {
  rtt_server srv;
  rtt_client a;
  rtt_req r = {0}, s = {0};
  start(&srv, 1, 0);
  int port = srv.port;
  open_path(&a, &srv, RT_SCRIPT_PATH_AUTO);
  rtt_acquire(&loop, a.c, "before", 5000, &r);
  rtt_release(&loop, &r, 0);
  cr_assert_eq(stats(&a).script_path, RT_SCRIPT_PATH_MODULE);
  uint64_t native = stats(&a).module_calls;

  rts_stop(&srv);
  start(&srv, 0, port);
  uint64_t reconnects = rtt_reconnects(a.c);
  int64_t until = (int64_t)rtt_now_ms() + 10000;
  while (rtt_reconnects(a.c) == reconnects && (int64_t)rtt_now_ms() < until)
    rtt_run_for(&loop, 20);
  cr_assert_gt(rtt_reconnects(a.c), reconnects, "no reconnect");
  rtt_acquire(&loop, a.c, "after", 5000, &s);
  rtt_release(&loop, &s, 0);
  rt_stats_t st = stats(&a);
  cr_assert_eq(st.script_path, RT_SCRIPT_PATH_FUNCTIONS);
  cr_assert_eq(st.module, RT_MODULE_ABSENT);
  cr_assert_eq(st.module_calls, native, "module calls after the restart");
  cr_assert_geq(st.fcalls, 2);
  rtt_close(&a);
  rtt_loop_finish(&loop);
  rts_stop(&srv);
}

/* The paths of the out-of-memory tests below, the module's last. */
static const int oom_paths[] = {RT_SCRIPT_PATH_FUNCTIONS, RT_SCRIPT_PATH_EVAL,
                                RT_SCRIPT_PATH_MODULE};

/* Start srv for them, with the module where it is built; returns how many
 * of oom_paths to run (the module's only with it). */
static int oom_start(rtt_server *srv) {
  int n = RTT_MODULE_PATH[0] != '\0' ? 3 : 2;
  start(srv, n == 3, 0);
  return n;
}

/* Out of memory (used memory over maxmemory, noeviction), on every path:
 * a waiter queued before whose connection dropped asks again (a retried
 * enqueue) and keeps its place, and is granted at the release; a new
 * request is refused with Redis's OOM error and queues nothing. */
Test(paths, a_retried_enqueue_keeps_its_place_when_memory_is_short) {
  rtt_server srv;
  rtt_client a[3], b[3], c[3];
  const int *paths = oom_paths;
  int n = oom_start(&srv);
  redisContext *adm = rtt_redis_at(srv.port);
  for (int i = 0; i < n; i++) {
    char name[32];
    snprintf(name, sizeof(name), "oom-retry-%d", paths[i]);
    open_path(&a[i], &srv, paths[i]);
    open_path(&b[i], &srv, paths[i]);
    open_path(&c[i], &srv, paths[i]);
    rtt_req r = {0}, w = {0}, fresh = {0};
    rtt_acquire(&loop, a[i].c, name, 20000, &r);
    rtt_wait_queued(&loop, b[i].c, name, 20000, &w);
    rtt_ok(adm, "CONFIG SET maxmemory 1");
    uint64_t reconnects = stats(&b[i]).reconnects;
    cr_assert(rtt_kill_conn(adm, "cmd", rt_client_id(b[i].c)));
    uint64_t t0 = rtt_now_ms();
    while (stats(&b[i]).reconnects == reconnects && rtt_now_ms() - t0 < 5000)
      uv_run(&loop, UV_RUN_ONCE);
    cr_assert_neq(stats(&b[i]).reconnects, reconnects,
                  "path %d: b is back (%s)", paths[i],
                  rt_client_last_error(b[i].c));
    /* Its retried enqueue went out once it was back: let it be answered. */
    rtt_run_for(&loop, 300);
    cr_assert_eq(w.calls, 0, "path %d: the waiter still waits (status %s)",
                 paths[i], rt_err_name(w.status));
    cr_assert_eq(rtt_wait(c[i].c, name, 20000, 5000, &fresh), 0);
    cr_assert(rtt_run_until(&loop, &fresh.calls, 1, 5000));
    cr_assert_eq(fresh.status, RT_EREDIS, "path %d: %s", paths[i],
                 rt_err_name(fresh.status));
    const char *why = rt_client_last_error(c[i].c);
    cr_assert(strstr(why, "OOM") != NULL, "path %d: %s", paths[i], why);
    rtt_release(&loop, &r, 0);
    rtt_expect_grant(&loop, &w, 5000, "the waiter that asked again");
    rtt_release(&loop, &w, 0);
    rtt_ok(adm, "CONFIG SET maxmemory 0");
  }
  for (int i = 0; i < n; i++) {
    rtt_close(&a[i]);
    rtt_close(&b[i]);
    rtt_close(&c[i]);
  }
  rtt_loop_finish(&loop);
  rtt_redis_close(adm);
  rts_stop(&srv);
}

/* Out of memory (used memory over maxmemory, noeviction), on every path:
 * a leader proclaims a new value (it replaces the old one) and its
 * release hands on to the candidate queued before. */
Test(paths, a_leader_proclaims_when_memory_is_short) {
  rtt_server srv;
  rtt_client a[3], b[3];
  const int *paths = oom_paths;
  int n = oom_start(&srv);
  redisContext *adm = rtt_redis_at(srv.port);
  for (int i = 0; i < n; i++) {
    char name[32];
    snprintf(name, sizeof(name), "oom-ele-%d", paths[i]);
    open_path(&a[i], &srv, paths[i]);
    open_path(&b[i], &srv, paths[i]);
    rt_request_t ca = {RT_KIND_ELECTION, 0, 0, 0, "a:1", 3};
    rt_request_t cb = {RT_KIND_ELECTION, 0, 0, 0, "b:1", 3};
    rtt_req la = {0}, lb = {0};
    cr_assert_eq(rtt_wait_ex(a[i].c, name, &ca, 20000, 5000, &la), 0);
    cr_assert(rtt_run_until(&loop, &la.calls, 1, 5000));
    cr_assert_eq(la.status, 0);
    cr_assert_eq(rtt_wait_ex(b[i].c, name, &cb, 20000, 20000, &lb), 0);
    rtt_run_for(&loop, 100);
    rtt_ok(adm, "CONFIG SET maxmemory 1");
    cr_assert_eq(rt_proclaim(la.lock, "a:2", 3, rtt_extend_cb, &la), 0);
    cr_assert(rtt_run_until(&loop, &la.ext_calls, 1, 5000));
    cr_assert_eq(la.ext_status, 0, "path %d: %s (%s)", paths[i],
                 rt_err_name(la.ext_status), rt_client_last_error(a[i].c));
    rtt_release(&loop, &la, 0);
    rtt_expect_grant(&loop, &lb, 5000, "the candidate queued before");
    rtt_release(&loop, &lb, 0);
    rtt_ok(adm, "CONFIG SET maxmemory 0");
  }
  for (int i = 0; i < n; i++) {
    rtt_close(&a[i]);
    rtt_close(&b[i]);
  }
  rtt_loop_finish(&loop);
  rtt_redis_close(adm);
  rts_stop(&srv);
}

/* Out of memory (used memory over maxmemory, noeviction): a holder's
 * release still hands on to a waiter queued before, on every path. */
Test(paths, a_release_hands_on_when_memory_is_short) {
  rtt_server srv;
  rtt_client a[3], b[3];
  const int *paths = oom_paths;
  int n = oom_start(&srv);
  redisContext *adm = rtt_redis_at(srv.port);
  for (int i = 0; i < n; i++) {
    char name[32];
    snprintf(name, sizeof(name), "oom-%d", paths[i]);
    open_path(&a[i], &srv, paths[i]);
    open_path(&b[i], &srv, paths[i]);
    rtt_req r = {0}, w = {0};
    rtt_acquire(&loop, a[i].c, name, 20000, &r);
    rtt_wait_queued(&loop, b[i].c, name, 20000, &w);
    rtt_ok(adm, "CONFIG SET maxmemory 1");
    redisReply *x = rtt_cmd(adm, "SET fill x");
    cr_assert_eq(x->type, REDIS_REPLY_ERROR, "memory is short");
    freeReplyObject(x);
    rtt_release(&loop, &r, 0);
    rtt_expect_grant(&loop, &w, 5000, "the waiter queued before");
    rtt_release(&loop, &w, 0);
    rtt_ok(adm, "CONFIG SET maxmemory 0");
  }
  for (int i = 0; i < n; i++) {
    rtt_close(&a[i]);
    rtt_close(&b[i]);
  }
  rtt_loop_finish(&loop);
  rtt_redis_close(adm);
  rts_stop(&srv);
}
