/* Connecting: host names resolved off the loop thread (and again at every
 * reconnect), retrying the first connect, credentials next to a URL, and
 * rt_client_last_error() saying what went wrong in words.
 *
 * getaddrinfo() is interposed below (the test program's definition wins
 * over libc's for libuv and hiredis too): it records which thread asks
 * for which name, makes "slow.rt-test.invalid" a 300 ms lookup of
 * 127.0.0.1, and fails every other *.invalid name at once, so no test
 * sends a DNS query anywhere. Other names go to libc ("localhost" is in
 * /etc/hosts). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <dirent.h>
#include <dlfcn.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rt_test.h"

#ifdef REDTURN_HAVE_FIU
#ifndef FIU_ENABLE
#define FIU_ENABLE 1
#endif
#include <fiu-control.h>
#include <fiu.h>
#endif

#define SLOW_NAME "slow.rt-test.invalid"
#define SLOW_MS 300

static pthread_t loop_thread;
static atomic_int names_on_loop_thread; /* non-numeric lookups there */
static atomic_int localhost_lookups;
static atomic_int slow_lookups;
static atomic_int slow_lookups_done; /* of slow_lookups, those that ended */

static int is_numeric(const char *node) {
  unsigned char buf[16];
  return uv_inet_pton(AF_INET, node, buf) == 0 ||
         uv_inet_pton(AF_INET6, node, buf) == 0;
}

int getaddrinfo(const char *node, const char *service,
                const struct addrinfo *hints, struct addrinfo **res) {
  typedef int (*real_fn)(const char *, const char *, const struct addrinfo *,
                         struct addrinfo **);
  static real_fn real;
  if (real == NULL)
    real = (real_fn)dlsym(RTLD_NEXT, "getaddrinfo");
  if (node != NULL && !is_numeric(node)) {
    if (pthread_equal(pthread_self(), loop_thread))
      atomic_fetch_add(&names_on_loop_thread, 1);
    if (strcmp(node, "localhost") == 0)
      atomic_fetch_add(&localhost_lookups, 1);
    if (strcmp(node, SLOW_NAME) == 0) {
      atomic_fetch_add(&slow_lookups, 1);
      usleep(SLOW_MS * 1000);
      atomic_fetch_add(&slow_lookups_done, 1);
      node = "127.0.0.1";
    } else if (rtt_ends_with(node, ".invalid")) {
      return EAI_NONAME;
    }
  }
  return real(node, service, hints, res);
}

static uv_loop_t loop;

static void setup(void) {
  loop_thread = pthread_self();
  cr_assert_eq(uv_loop_init(&loop), 0);
}

TestSuite(connect, .init = setup, .fini = rtt_cleanup, .timeout = 60);

static void options_url(rt_options_t *o, const char *host, int port) {
  static char url[160];
  rt_options_init(o);
  snprintf(url, sizeof(url), "redis://%s:%d", host, port);
  o->url = url;
  o->prefix = rtt_prefix();
}

static void tick_cb(uv_timer_t *t) { (*(int *)t->data)++; }

/* Close the client and run until it is gone. */
static void close_client(rtt_client *a) {
  rtt_close(a);
  cr_assert(rtt_run_until(&loop, &a->closes, 1, 5000));
}

/* The same, then run the loop dry and close it. */
static void finish(rtt_client *a) {
  close_client(a);
  rtt_loop_finish(&loop);
}

/* Open with a failing first connect and return its status; the client is
 * closed again and last_error copied into msg. */
static int open_failing(const rt_options_t *o, char *msg, size_t cap) {
  rtt_client a;
  rtt_open(&a, &loop, o);
  cr_assert_str_eq(rt_client_last_error(a.c), "");
  cr_assert(rtt_run_until(&loop, &a.connects, 1, 10000), "no connect result");
  snprintf(msg, cap, "%s", rt_client_last_error(a.c));
  close_client(&a);
  return a.connect_status;
}

/* ---- name resolution -------------------------------------------------- */

Test(connect, a_slow_name_lookup_runs_off_the_loop_thread) {
  rt_options_t o;
  rtt_client a;
  rtt_req r = {0};
  int ticks = 0;
  uv_timer_t tick;
  uv_timer_init(&loop, &tick);
  tick.data = &ticks;
  uv_timer_start(&tick, tick_cb, 10, 10);

  options_url(&o, SLOW_NAME, rtt_port());
  uint64_t t0 = rtt_now_ms();
  rtt_open(&a, &loop, &o);
  uint64_t open_ms = rtt_now_ms() - t0;
  cr_assert(rtt_run_until(&loop, &a.connects, 1, 10000));
  cr_assert_eq(a.connect_status, 0, "connect: %s (%s)",
               rt_err_name(a.connect_status), rt_client_last_error(a.c));
  /* A lookup on the loop thread would hold rt_client_open for SLOW_MS. */
  cr_assert_lt(open_ms, SLOW_MS, "rt_client_open took %llu ms",
               (unsigned long long)open_ms);
  cr_assert_eq(atomic_load(&slow_lookups), 2, "one lookup per connection");
  cr_assert_eq(atomic_load(&names_on_loop_thread), 0,
               "a name was looked up on the loop thread");
  /* The timer kept running during the 300 ms lookups. */
  cr_assert_geq(ticks, SLOW_MS / 10 / 2, "only %d ticks", ticks);

  rtt_acquire(&loop, a.c, "res", 5000, &r);
  rtt_release(&loop, &r, 0);
  uv_close((uv_handle_t *)&tick, NULL);
  finish(&a);
}

Test(connect, localhost_is_resolved_with_uv_getaddrinfo_and_connects) {
  rt_options_t o;
  rtt_client a;
  rtt_req r = {0};
  options_url(&o, "localhost", rtt_port());
  rtt_open_ready(&a, &loop, &o);
  cr_assert_geq(atomic_load(&localhost_lookups), 2);
  cr_assert_eq(atomic_load(&names_on_loop_thread), 0,
               "localhost was looked up on the loop thread");
  rtt_acquire(&loop, a.c, "res", 5000, &r);
  rtt_release(&loop, &r, 0);
  finish(&a);
}

Test(connect, an_unknown_name_fails_with_the_resolvers_reason) {
  rt_options_t o;
  char msg[256];
  rtt_client a;
  int ticks = 0;
  uv_timer_t tick;
  uv_timer_init(&loop, &tick);
  tick.data = &ticks;
  uv_timer_start(&tick, tick_cb, 5, 5);

  options_url(&o, "nonexistent.invalid", rtt_port());
  rtt_open(&a, &loop, &o);
  cr_assert(rtt_run_until(&loop, &a.connects, 1, 10000));
  cr_assert_eq(a.connect_status, RT_ECONNECT, "%s",
               rt_err_name(a.connect_status));
  snprintf(msg, sizeof(msg), "%s", rt_client_last_error(a.c));
  cr_assert_str_eq(msg, "resolve nonexistent.invalid: unknown node or service");
  cr_assert_eq(atomic_load(&names_on_loop_thread), 0);
  uv_close((uv_handle_t *)&tick, NULL);
  finish(&a);
}

/* A lookup slower than connect_timeout_ms fails the attempt on time; the
 * lookup given up on is freed when it ends, and closing waits for it
 * (or cancels it, when libuv's thread pool had not started it yet: on a
 * busy machine the close can come first). */
Test(connect, a_lookup_past_the_connect_timeout_fails_on_time) {
  rt_options_t o;
  rtt_client a;
  int started = atomic_load(&slow_lookups);
  options_url(&o, SLOW_NAME, rtt_port());
  o.connect_timeout_ms = 100;
  uint64_t t0 = rtt_now_ms();
  rtt_open(&a, &loop, &o);
  cr_assert(rtt_run_until(&loop, &a.connects, 1, 10000));
  uint64_t took = rtt_now_ms() - t0;
  cr_assert_eq(a.connect_status, RT_ECONNECT, "%s",
               rt_err_name(a.connect_status));
  cr_assert_lt(took, SLOW_MS - 50, "failed after %llu ms",
               (unsigned long long)took);
  cr_assert_str_eq(rt_client_last_error(a.c),
                   "resolve " SLOW_NAME
                   ": no answer within connect_timeout_ms (100 ms)");
  rtt_close(&a);
  cr_assert(rtt_run_until(&loop, &a.closes, 1, 5000));
  /* No lookup of this client still running once it is closed. */
  cr_assert_eq(atomic_load(&slow_lookups_done), atomic_load(&slow_lookups),
               "closed before the lookup ended");
  if (atomic_load(&slow_lookups) > started)
    cr_assert_geq(rtt_now_ms() - t0, SLOW_MS - 10,
                  "closed before the lookup ended");
  rtt_loop_finish(&loop);
}

/* A server that accepts but never answers: the handshake deadline. */
Test(connect, a_silent_server_times_out_with_the_reason) {
  rtt_server srv;
  rt_options_t o;
  char msg[256], want[160];
  rtt_server_start(&srv, NULL);
  kill(srv.pid, SIGSTOP);
  options_url(&o, "127.0.0.1", srv.port);
  o.connect_timeout_ms = 200;
  /* The loop's cached time is now older than the timeout: the deadline
   * must count from the open, or it fires before the connect is seen. */
  rtt_sleep_ms(300);
  int st = open_failing(&o, msg, sizeof(msg));
  kill(srv.pid, SIGCONT);
  cr_assert_eq(st, RT_ECONNECT, "%s", rt_err_name(st));
  snprintf(want, sizeof(want),
           "connect 127.0.0.1:%d: no answer to the handshake within "
           "connect_timeout_ms (200 ms)",
           srv.port);
  cr_assert_str_eq(msg, want);
  rtt_loop_finish(&loop);
}

Test(connect, a_reconnect_resolves_the_name_again) {
  rt_options_t o;
  rtt_client a;
  rt_stats_t st;
  redisContext *rc = rtt_redis();
  options_url(&o, "localhost", rtt_port());
  rtt_open_ready(&a, &loop, &o);
  int before = atomic_load(&localhost_lookups);
  cr_assert_eq(rtt_kill_conn(rc, "cmd", rt_client_id(a.c)), 1);
  uint64_t until = rtt_now_ms() + 10000;
  do {
    rtt_run_for(&loop, 20);
    rt_client_stats(a.c, &st);
  } while (st.reconnects == 0 && rtt_now_ms() < until);
  cr_assert_eq(st.reconnects, 1);
  cr_assert_gt(atomic_load(&localhost_lookups), before,
               "the reconnect did not look the name up again");
  cr_assert(strstr(rt_client_last_error(a.c), "lost") != NULL, "%s",
            rt_client_last_error(a.c));
  finish(&a);
}

#ifdef REDTURN_HAVE_FIU
static long allocs, fail_at;

/* libfiu's external callback for "redturn/alloc": counts the library's
 * allocations and fails the fail_at-th. */
static int count_or_fail(const char *name, int *failnum, void **failinfo,
                         unsigned int *flags) {
  (void)name;
  (void)failnum;
  (void)failinfo;
  (void)flags;
  return ++allocs == fail_at;
}
#endif

/* The last allocation rt_client_open() makes is the subscriber's lookup
 * request: failing it fails the connect with a clear reason. */
Test(connect, no_memory_for_a_lookup_is_said_in_words) {
#ifndef REDTURN_HAVE_FIU
  cr_skip_test("needs libfiu (a REDTURN_FIU build)");
#else
  rt_options_t o;
  rtt_client a;
  options_url(&o, "localhost", rtt_port());
  cr_assert_eq(fiu_init(0), 0);
  cr_assert_eq(fiu_enable_external("redturn/alloc", 1, NULL, 0, count_or_fail),
               0);
  allocs = 0;
  fail_at = -1;
  rtt_open(&a, &loop, &o);
  long n = allocs;
  close_client(&a);

  allocs = 0;
  fail_at = n;
  rtt_open(&a, &loop, &o);
  cr_assert(rtt_run_until(&loop, &a.connects, 1, 10000));
  fiu_disable("redturn/alloc");
  cr_assert_eq(a.connect_status, RT_ECONNECT, "%s",
               rt_err_name(a.connect_status));
  cr_assert_str_eq(rt_client_last_error(a.c),
                   "resolve localhost: not enough memory");
  finish(&a);
#endif
}

/* ---- retry_first_connect ------------------------------------------------ */

/* A server started on a port and stopped again: restartable there. */
static void stopped_server(rtt_server *srv) {
  rtt_server_start(srv, NULL);
  kill(srv->pid, SIGTERM);
  uint64_t until = rtt_now_ms() + 10000;
  while (rtt_server_ready(srv) && rtt_now_ms() < until)
    rtt_sleep_ms(10);
  cr_assert(!rtt_server_ready(srv), "redis-server did not stop");
}

Test(connect, retry_first_connect_waits_for_a_server_started_later) {
  rtt_server srv;
  rt_options_t o;
  rtt_client a;
  rtt_req r = {0};
  char want[64];
  stopped_server(&srv);
  options_url(&o, "127.0.0.1", srv.port);
  o.retry_first_connect = 1;
  o.connect_timeout_ms = 500;
  rtt_open(&a, &loop, &o);
  cr_assert_eq(rtt_wait(a.c, "res", 5000, 30000, &r), 0);
  rtt_run_for(&loop, 700);
  cr_assert_eq(a.connects, 0, "connect_cb ran: %s",
               rt_err_name(a.connect_status));
  cr_assert_eq(r.calls, 0, "the wait ended: %s", rt_err_name(r.status));
  snprintf(want, sizeof(want), "connect 127.0.0.1:%d: Connection refused",
           srv.port);
  cr_assert_str_eq(rt_client_last_error(a.c), want);

  rtt_server_restart(&srv);
  cr_assert(rtt_run_until(&loop, &a.connects, 1, 10000), "never connected");
  cr_assert_eq(a.connect_status, 0, "%s", rt_err_name(a.connect_status));
  cr_assert(rtt_run_until(&loop, &r.calls, 1, 5000));
  cr_assert_eq(r.status, 0, "wait: %s", rt_err_name(r.status));
  rtt_release(&loop, &r, 0);
  finish(&a);
  cr_assert_eq(a.connects, 1);
}

Test(connect, retry_first_connect_reports_ecanceled_when_closed_first) {
  rt_options_t o;
  rtt_client a;
  options_url(&o, "127.0.0.1", rtt_free_port());
  o.retry_first_connect = 1;
  rtt_open(&a, &loop, &o);
  rtt_run_for(&loop, 300);
  cr_assert_eq(a.connects, 0);
  cr_assert(strstr(rt_client_last_error(a.c), "Connection refused") != NULL,
            "%s", rt_client_last_error(a.c));
  finish(&a);
  cr_assert_eq(a.connects, 1);
  cr_assert_eq(a.connect_status, RT_ECANCELED);
}

/* ---- what went wrong, in words ------------------------------------------ */

Test(connect, a_bad_url_is_refused_at_open_and_the_check_names_the_part) {
  rt_options_t o;
  rt_client_t *out = NULL;
  char msg[256];
  rt_options_init(&o);
  o.url = "redis://127.0.0.1:99999";
  cr_assert_eq(rt_client_open(&loop, &o, NULL, NULL, &out), RT_EURL);
  cr_assert_null(out);
  cr_assert_eq(rt_options_check(&o, msg, sizeof(msg)), RT_EURL);
  cr_assert_str_eq(msg, "url: port out of range (1..65535)");
  o.url = "unix:///run/redis.sock";
  cr_assert_eq(rt_options_check(&o, msg, sizeof(msg)), RT_EURL);
  cr_assert_str_eq(msg, "url: unix:// (a Unix socket) is not supported: use "
                        "redis://host:port");
  rtt_loop_finish(&loop);
}

Test(connect, a_refused_connect_gives_the_errno_text) {
  rt_options_t o;
  char msg[256], want[64];
  int port = rtt_free_port();
  options_url(&o, "127.0.0.1", port);
  cr_assert_eq(open_failing(&o, msg, sizeof(msg)), RT_ECONNECT);
  snprintf(want, sizeof(want), "connect 127.0.0.1:%d: Connection refused",
           port);
  cr_assert_str_eq(msg, want);
  rtt_loop_finish(&loop);
}

/* A server that wants the password "s3cret", and options for it. */
static void password_server(rtt_server *srv, rt_options_t *o) {
  static const char *const args[] = {"--requirepass", "s3cret", NULL};
  rtt_server_start(srv, args);
  options_url(o, "127.0.0.1", srv->port);
}

Test(connect, a_wrong_password_gives_redis_words) {
  rtt_server srv;
  rt_options_t o;
  char msg[256];
  password_server(&srv, &o);
  o.password = "wrong";
  cr_assert_eq(open_failing(&o, msg, sizeof(msg)), RT_EAUTH);
  cr_assert(strncmp(msg, "AUTH: WRONGPASS", 15) == 0, "%s", msg);
  o.password = NULL;
  cr_assert_eq(open_failing(&o, msg, sizeof(msg)), RT_EAUTH);
  cr_assert(strstr(msg, "NOAUTH") != NULL, "%s", msg);
  rtt_loop_finish(&loop);
}

/* The password option next to a URL without one is used, not dropped. */
Test(connect, a_password_option_next_to_a_url_is_used) {
  rtt_server srv;
  rt_options_t o;
  rtt_client a;
  char msg[256];
  password_server(&srv, &o);
  o.password = "s3cret";
  rtt_open_ready(&a, &loop, &o);
  close_client(&a);

  char url[128];
  snprintf(url, sizeof(url), "redis://:other@127.0.0.1:%d", srv.port);
  o.url = url;
  rt_client_t *out = NULL;
  cr_assert_eq(rt_client_open(&loop, &o, NULL, NULL, &out), RT_EINVAL);
  cr_assert_null(out);
  cr_assert_eq(rt_options_check(&o, msg, sizeof(msg)), RT_EINVAL);
  cr_assert(strstr(msg, "password: given both in url and in "
                        "rt_options_t.password") == msg,
            "%s", msg);
  rtt_loop_finish(&loop);
}

Test(connect, acl_refusals_give_redis_words) {
  rtt_server srv;
  rt_options_t o;
  rtt_client a;
  rtt_req r = {0};
  char msg[256];
  rtt_server_start(&srv, NULL);
  redisContext *adm = rtt_redis_at(srv.port);
  rtt_ok(adm, "ACL SETUSER noload on >pw ~* &* +@all -script|load");
  rtt_ok(adm, "ACL SETUSER noeval on >pw ~* &* +@all -evalsha -eval");

  rtt_ok(adm, "ACL SETUSER nofn on >pw ~* &* +@all -function|load");
  rtt_ok(adm, "ACL SETUSER nothing on >pw ~* &* +@all -function|load "
              "-script|load");

  options_url(&o, "127.0.0.1", srv.port);
  o.script_path = RT_SCRIPT_PATH_EVAL;
  o.username = "noload";
  o.password = "pw";
  cr_assert_eq(open_failing(&o, msg, sizeof(msg)), RT_ENOPERM);
  cr_assert(strncmp(msg, "SCRIPT LOAD: NOPERM", 19) == 0, "%s", msg);
  /* Functions forced: FUNCTION LOAD's refusal, in Redis's words. */
  o.script_path = RT_SCRIPT_PATH_FUNCTIONS;
  o.username = "nofn";
  cr_assert_eq(open_failing(&o, msg, sizeof(msg)), RT_ENOPERM);
  cr_assert(strncmp(msg, "FUNCTION LOAD: NOPERM", 21) == 0, "%s", msg);
  /* Auto: the eval path, whose own refusal is the one reported. */
  o.script_path = RT_SCRIPT_PATH_AUTO;
  o.username = "nothing";
  cr_assert_eq(open_failing(&o, msg, sizeof(msg)), RT_ENOPERM);
  cr_assert(strncmp(msg, "SCRIPT LOAD: NOPERM", 19) == 0, "%s", msg);

  /* Connected, then the first script call is refused. */
  o.script_path = RT_SCRIPT_PATH_EVAL;
  o.username = "noeval";
  rtt_open_ready(&a, &loop, &o);
  cr_assert_eq(rtt_wait(a.c, "res", 5000, 5000, &r), 0);
  cr_assert(rtt_run_until(&loop, &r.calls, 1, 5000));
  cr_assert_eq(r.status, RT_ENOPERM, "%s", rt_err_name(r.status));
  cr_assert(strncmp(rt_client_last_error(a.c), "enqueue script: NOPERM", 22) ==
                0,
            "%s", rt_client_last_error(a.c));
  cr_assert(strstr(rt_client_last_error(a.c), "evalsha") != NULL, "%s",
            rt_client_last_error(a.c));
  finish(&a);
}

/* A user whose ACL refuses FUNCTION (or a Redis before 7.0) gets the eval
 * path, and the stats and rt_inspect say so; FCALL is never tried. */
static void inspect_path_cb(rt_client_t *c, int status,
                            const rt_queue_info_t *info, void *data) {
  int *ans = data; /* calls, then the path (or the failed status) */
  (void)c;
  ans[0]++;
  ans[1] = status == 0 ? info->script_path : status;
}

Test(connect, a_user_refused_function_load_falls_back_to_eval) {
  rtt_server srv;
  rt_options_t o;
  rtt_client a, b;
  rtt_req r = {0}, w = {0};
  rt_stats_t st;
  int ans[2] = {0, 0};
  /* The Lua path's choice: a server without the module. */
  rtt_server_start_lua(&srv, NULL);
  redisContext *adm = rtt_redis_at(srv.port);
  rtt_ok(adm, "ACL SETUSER nofn on >pw ~* &* +@all -function");

  rtt_options_at(&o, srv.port);
  o.script_path = RT_SCRIPT_PATH_AUTO;
  o.username = "nofn";
  o.password = "pw";
  rtt_open_ready(&a, &loop, &o);
  rtt_acquire(&loop, a.c, "res", 5000, &r);
  ans[0] = 0;
  cr_assert_eq(rt_inspect(a.c, "res", 3, 5, inspect_path_cb, ans), 0);
  cr_assert(rtt_run_until(&loop, &ans[0], 1, 5000));
  cr_assert_eq(ans[1], RT_SCRIPT_PATH_EVAL, "inspect ran by %d", ans[1]);
  rt_client_stats(a.c, &st);
  cr_assert_eq(st.script_path, RT_SCRIPT_PATH_EVAL);
  cr_assert_eq(st.fcalls, 0);
  cr_assert_geq(st.evals, 2);
  cr_assert_eq(rtt_cmdstat_calls(adm, "fcall"), 0);
  cr_assert_gt(rtt_cmdstat_calls(adm, "evalsha"), 0);

  /* The default user, on the same server: Functions, and a FIFO handoff
   * from the eval client to it. */
  rtt_options_at(&o, srv.port);
  o.script_path = RT_SCRIPT_PATH_AUTO;
  rtt_open_ready(&b, &loop, &o);
  cr_assert_eq(rtt_wait(b.c, "res", 5000, RT_FOREVER, &w), 0);
  rtt_run_until_queued(&loop, adm, "res", 2);
  rtt_release(&loop, &r, 0);
  cr_assert(rtt_run_until(&loop, &w.calls, 1, 5000));
  cr_assert_eq(w.status, 0);
  ans[0] = 0;
  cr_assert_eq(rt_inspect(b.c, "res", 3, 5, inspect_path_cb, ans), 0);
  cr_assert(rtt_run_until(&loop, &ans[0], 1, 5000));
  cr_assert_eq(ans[1], RT_SCRIPT_PATH_FUNCTIONS, "inspect ran by %d", ans[1]);
  rt_client_stats(b.c, &st);
  cr_assert_eq(st.script_path, RT_SCRIPT_PATH_FUNCTIONS);
  cr_assert_eq(st.evals, 0);
  cr_assert_gt(rtt_cmdstat_calls(adm, "fcall_ro"), 0);
  rtt_release(&loop, &w, 0);
  rtt_close(&a);
  rtt_close(&b);
  rtt_loop_finish(&loop);
  rtt_redis_close(adm);
  rtt_server_stop(&srv);
}

Test(connect, eviction_policy_and_select_failures_say_why) {
  static const char *const args[] = {"--maxmemory-policy", "allkeys-lru", NULL};
  rtt_server srv;
  rt_options_t o;
  char msg[256], url[128];
  rtt_server_start(&srv, args);
  options_url(&o, "127.0.0.1", srv.port);
  cr_assert_eq(open_failing(&o, msg, sizeof(msg)), RT_EEVICTION);
  cr_assert(strstr(msg, "maxmemory-policy allkeys-lru") != NULL, "%s", msg);
  cr_assert(strstr(msg, "noeviction") != NULL, "%s", msg);

  snprintf(url, sizeof(url), "redis://127.0.0.1:%d/99", rtt_port());
  o.url = url;
  cr_assert_eq(open_failing(&o, msg, sizeof(msg)), RT_ECONNECT);
  cr_assert_str_eq(msg, "SELECT 99: ERR DB index is out of range");
  rtt_loop_finish(&loop);
}

/* ---- a server too old -------------------------------------------------- */

/* A fake Redis 6.2 on a loopback port: it answers whatever it reads on
 * each of the client's two connections with an INFO text. */
typedef struct old_server {
  int fd, port;
  pthread_t thread;
} old_server;

static void *old_server_run(void *arg) {
  static const char info[] = "$41\r\n# Server\r\nredis_version:6.2.0\r\n"
                             "run_id:x\r\n\r\n";
  old_server *s = arg;
  int conns[2] = {-1, -1};
  for (int i = 0; i < 2; i++) {
    struct pollfd p = {s->fd, POLLIN, 0};
    if (poll(&p, 1, 5000) <= 0 || (conns[i] = accept(s->fd, NULL, NULL)) < 0)
      break;
    char buf[4096];
    p.fd = conns[i];
    if (poll(&p, 1, 5000) > 0 && read(conns[i], buf, sizeof(buf)) > 0 &&
        write(conns[i], info, sizeof(info) - 1) < 0)
      break;
  }
  rtt_sleep_ms(500); /* let the client read before the sockets close */
  for (int i = 0; i < 2; i++)
    if (conns[i] >= 0)
      close(conns[i]);
  return NULL;
}

static void old_server_start(old_server *s) {
  struct sockaddr_in a;
  socklen_t len = sizeof(a);
  memset(&a, 0, sizeof(a));
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  s->fd = socket(AF_INET, SOCK_STREAM, 0);
  cr_assert_geq(s->fd, 0);
  cr_assert_eq(bind(s->fd, (struct sockaddr *)&a, sizeof(a)), 0);
  cr_assert_eq(listen(s->fd, 4), 0);
  cr_assert_eq(getsockname(s->fd, (struct sockaddr *)&a, &len), 0);
  s->port = ntohs(a.sin_port);
  cr_assert_eq(pthread_create(&s->thread, NULL, old_server_run, s), 0);
}

Test(connect, a_server_older_than_7_says_its_version) {
  old_server srv;
  rt_options_t o;
  char msg[256], want[128];
  old_server_start(&srv);
  options_url(&o, "127.0.0.1", srv.port);
  int st = open_failing(&o, msg, sizeof(msg));
  pthread_join(srv.thread, NULL);
  close(srv.fd);
  cr_assert_eq(st, RT_ESERVER, "%s (%s)", rt_err_name(st), msg);
  snprintf(want, sizeof(want),
           "127.0.0.1:%d runs Redis 6.2.0: redturn needs Redis 7.0 or newer",
           srv.port);
  cr_assert_str_eq(msg, want);
  rtt_loop_finish(&loop);
}

/* ---- structs that grow -------------------------------------------------- */

/* rt_client_stats() fills only the caller's struct: a longer (newer) one
 * gets zeros past what this library knows, a shorter (older) one is not
 * written past its end. */
Test(connect, stats_fill_exactly_the_callers_struct) {
  struct {
    rt_stats_t known;
    uint64_t future[2];
  } newer;
  union {
    rt_stats_t s;
    unsigned char b[sizeof(rt_stats_t) + 8];
  } older;
  rtt_client a;
  rtt_req r = {0};
  rtt_open_ready(&a, &loop, NULL);
  rtt_acquire(&loop, a.c, "res", 5000, &r);

  memset(&newer, 0xa5, sizeof(newer));
  rt_client_stats_size(a.c, &newer.known, sizeof(newer));
  cr_assert_eq(newer.known.grants, 1);
  cr_assert_eq(newer.known.held, 1);
  cr_assert_eq(newer.future[0], 0);
  cr_assert_eq(newer.future[1], 0);

  size_t part = offsetof(rt_stats_t, grants) + sizeof(uint64_t);
  memset(&older, 0xa5, sizeof(older));
  rt_client_stats_size(a.c, &older.s, part);
  cr_assert_eq(older.s.grants, 1);
  for (size_t i = part; i < sizeof(older.b); i++)
    cr_assert_eq(older.b[i], 0xa5, "byte %zu past the struct was written", i);

  rtt_release(&loop, &r, 0);
  finish(&a);
}

/* ---- keepalive ------------------------------------------------------------ */

/* How many of this process's TCP sockets connected to port have keepalive
 * on with probes after 15 s idle, 3 probes 5 s apart; *all counts them
 * all. */
static int keepalive_sockets(int port, int *all) {
  int good = 0;
  *all = 0;
  DIR *d = opendir("/proc/self/fd");
  cr_assert_not_null(d);
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    int fd = atoi(e->d_name), on = 0, idle = 0, intvl = 0, cnt = 0;
    struct sockaddr_in peer;
    socklen_t len = sizeof(peer), il = sizeof(int);
    if (e->d_name[0] == '.' || fd == dirfd(d) ||
        getpeername(fd, (struct sockaddr *)&peer, &len) != 0 ||
        peer.sin_family != AF_INET || ntohs(peer.sin_port) != port)
      continue;
    (*all)++;
    getsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, &il);
    getsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, &il);
    getsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, &il);
    getsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, &il);
    good += on && idle == 15 && intvl == 5 && cnt == 3;
  }
  closedir(d);
  return good;
}

Test(connect, both_connections_probe_a_silent_peer_within_30_s) {
  rtt_client a;
  int all;
  rtt_open_ready(&a, &loop, NULL);
  cr_assert_eq(keepalive_sockets(rtt_port(), &all), 2, "of %d sockets", all);
  finish(&a);
}

/* No descriptor left for a socket: the connect fails at once inside
 * libuv, and is still reported from the loop, with the system's words, and
 * closed like any other. */
Test(connect, a_connect_the_system_refuses_at_once_is_reported_from_the_loop) {
  rt_options_t o;
  rtt_client a;
  char want[96];
  int top = 0;
  DIR *d = opendir("/proc/self/fd");
  cr_assert_not_null(d);
  for (struct dirent *e; (e = readdir(d)) != NULL;)
    if (atoi(e->d_name) > top)
      top = atoi(e->d_name);
  closedir(d);
  options_url(&o, "127.0.0.1", rtt_port());
  struct rlimit lim;
  cr_assert_eq(getrlimit(RLIMIT_NOFILE, &lim), 0);
  lim.rlim_cur = (rlim_t)top + 1; /* every descriptor up to top is taken */
  cr_assert_eq(setrlimit(RLIMIT_NOFILE, &lim), 0);
  rtt_open(&a, &loop, &o);
  cr_assert_eq(a.connects, 0, "reported inside rt_client_open");
  cr_assert(rtt_run_until(&loop, &a.connects, 1, 5000));
  cr_assert_eq(a.connect_status, RT_ECONNECT, "%s",
               rt_err_name(a.connect_status));
  snprintf(want, sizeof(want), "connect 127.0.0.1:%d: Too many open files",
           rtt_port());
  cr_assert_str_eq(rt_client_last_error(a.c), want);
  finish(&a);
}
