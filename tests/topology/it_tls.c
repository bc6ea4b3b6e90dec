/* TLS against redis-server's own TLS port: throwaway certificates
 * (tests/support/rtt_tls.c), certificate and host name checks, client
 * certificates, the wrong kind of port on either side, a killed TLS
 * connection, writes to dead TLS connections in a process that keeps
 * SIGPIPE's default action, and a backlog the socket cannot take at once
 * (over plain TCP too). */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "link.h"
#include "rt_test.h"
#include "rtt_tls.h"
#include "tls.h"

static uv_loop_t loop;
static rtt_tls tls;

static void setup(void) { cr_assert_eq(uv_loop_init(&loop), 0); }

static void teardown(void) {
  rtt_tls_stop(&tls);
  rtt_cleanup();
}

TestSuite(tls, .init = setup, .fini = teardown, .timeout = 60);

/* Open a client that must fail its first connect: its status, and the
 * words in msg. */
static int open_failing(const rt_options_t *o, char *msg, size_t cap,
                        uint64_t *took_ms) {
  rtt_client a;
  uint64_t start = rtt_now_ms();
  rtt_open(&a, &loop, o);
  cr_assert(rtt_run_until(&loop, &a.connects, 1, 10000), "no connect result");
  *took_ms = rtt_now_ms() - start;
  snprintf(msg, cap, "%s", rt_client_last_error(a.c));
  rtt_close(&a);
  cr_assert(rtt_run_until(&loop, &a.closes, 1, 5000), "never closed");
  return a.connect_status;
}

/* Check that the loop is left clean, and start it again. */
static void loop_again(void) {
  rtt_loop_finish(&loop);
  cr_assert_eq(uv_loop_init(&loop), 0);
}

static void assert_has(const char *text, const char *part) {
  cr_assert(strstr(text, part) != NULL, "\"%s\" does not say \"%s\"", text,
            part);
}

Test(tls, two_clients_lock_and_hand_off_over_rediss) {
  rt_options_t o;
  rtt_client a, b;
  rtt_req held = {0}, next = {0};
  rtt_tls_start(&tls, "no");
  rtt_tls_options(&tls, &o);
  rtt_open_ready(&a, &loop, &o);
  rtt_open_ready(&b, &loop, &o);
  rtt_acquire(&loop, a.c, "res", 10000, &held);
  cr_assert_eq(rtt_wait(b.c, "res", 10000, 5000, &next), 0);
  rtt_run_for(&loop, 50);
  cr_assert_eq(next.calls, 0, "granted while held");
  rtt_release(&loop, &held, 0);
  cr_assert(rtt_run_until(&loop, &next.calls, 1, 5000), "no handoff");
  cr_assert_eq(next.status, 0, "%s", rt_err_name(next.status));
  cr_assert_gt(next.fence, held.fence);
  rtt_release(&loop, &next, 0);
  rtt_close(&a);
  rtt_close(&b);
  rtt_loop_finish(&loop);
}

Test(tls, a_server_that_wants_client_certificates_takes_ours_and_refuses_none) {
  rt_options_t o;
  rtt_client a;
  rtt_req r = {0};
  char msg[256];
  uint64_t took;
  rtt_tls_start(&tls, "yes");
  rtt_tls_options(&tls, &o);
  o.tls_cert_file = tls.client_cert;
  o.tls_key_file = tls.client_key;
  rtt_open_ready(&a, &loop, &o);
  rtt_acquire(&loop, a.c, "res", 10000, &r);
  rtt_release(&loop, &r, 0);
  rtt_close(&a);
  loop_again();

  rtt_tls_options(&tls, &o);
  o.connect_timeout_ms = 3000;
  cr_assert_eq(open_failing(&o, msg, sizeof(msg), &took), RT_ETLS,
               "no certificate: %s", msg);
  cr_log_info("no client certificate: %s", msg);
  assert_has(msg, "TLS");
  assert_has(msg, "certificate");
  cr_assert_lt(took, 2000, "the refusal took %llu ms",
               (unsigned long long)took);
  rtt_loop_finish(&loop);
}

Test(tls, a_ca_directory_is_trusted_like_a_ca_file) {
  rt_options_t o;
  rtt_client a;
  rtt_tls_start(&tls, "no");
  rtt_tls_options(&tls, &o);
  o.tls_ca_file = NULL;
  o.tls_ca_dir = tls.ca_dir;
  rtt_open_ready(&a, &loop, &o);
  rtt_close(&a);
  rtt_loop_finish(&loop);
}

Test(tls, a_server_signed_by_another_ca_fails_verification_with_the_reason) {
  rt_options_t o;
  char msg[256];
  uint64_t took;
  rtt_tls_start(&tls, "no");
  rtt_tls_options(&tls, &o);
  o.tls_ca_file = tls.other_ca;
  cr_assert_eq(open_failing(&o, msg, sizeof(msg), &took), RT_ETLSVERIFY, "%s",
               msg);
  cr_log_info("wrong CA: %s", msg);
  assert_has(msg, "certificate verification failed: ");
  rtt_loop_finish(&loop);
}

Test(tls, a_name_the_certificate_lacks_fails_unless_insecure) {
  rt_options_t o;
  rtt_client a;
  rtt_req r = {0};
  char msg[256];
  uint64_t took;
  rtt_tls_start(&tls, "no");
  rtt_tls_options(&tls, &o);
  o.tls_server_name = "other.example";
  cr_assert_eq(open_failing(&o, msg, sizeof(msg), &took), RT_ETLSVERIFY, "%s",
               msg);
  cr_log_info("name mismatch: %s", msg);
  assert_has(msg, "mismatch");

  /* The name the certificate has passes. */
  o.tls_server_name = "localhost";
  rtt_open_ready(&a, &loop, &o);
  rtt_close(&a);
  loop_again();

  /* Insecure: no check at all, not even of the CA. */
  o.tls_server_name = "other.example";
  o.tls_ca_file = tls.other_ca;
  o.tls_insecure = 1;
  rtt_open_ready(&a, &loop, &o);
  rtt_acquire(&loop, a.c, "res", 10000, &r);
  rtt_release(&loop, &r, 0);
  rtt_close(&a);
  rtt_loop_finish(&loop);
}

Test(tls, the_wrong_kind_of_port_fails_clearly_and_soon) {
  rt_options_t o;
  char msg[256];
  uint64_t took;
  rtt_tls_start(&tls, "no");

  /* A plain client on the TLS port. */
  rtt_options_at(&o, tls.tls_port);
  o.connect_timeout_ms = 3000;
  int st = open_failing(&o, msg, sizeof(msg), &took);
  cr_log_info("plain client, TLS port: %s (%s, %llu ms)", msg, rt_err_name(st),
              (unsigned long long)took);
  cr_assert_eq(st, RT_ECONNECT, "%s: %s", rt_err_name(st), msg);
  assert_has(msg, "rediss://");
  cr_assert_lt(took, 2500);

  /* A TLS client on the plain port: Redis waits for the end of a line
   * that never comes, so the connect deadline ends it. */
  rtt_tls_options(&tls, &o);
  o.url = NULL;
  o.tls = 1;
  o.host = "127.0.0.1";
  o.port = tls.server.port;
  /* 2 s: with 500 ms a loaded machine (the ASan tree beside two other
   * test commands) once had not even connected by the deadline. */
  o.connect_timeout_ms = 2000;
  st = open_failing(&o, msg, sizeof(msg), &took);
  cr_log_info("TLS client, plain port: %s (%s, %llu ms)", msg, rt_err_name(st),
              (unsigned long long)took);
  cr_assert_eq(st, RT_ECONNECT, "%s: %s", rt_err_name(st), msg);
  assert_has(msg, "no TLS handshake within connect_timeout_ms");
  assert_has(msg, "redis://");
  cr_assert_lt(took, 5000);
  rtt_loop_finish(&loop);
}

Test(tls, a_killed_tls_connection_reconnects_and_the_wait_is_granted) {
  rt_options_t o;
  rtt_client a, b;
  rtt_req held = {0}, next = {0};
  rt_stats_t st;
  rtt_tls_start(&tls, "no");
  redisContext *adm = rtt_redis_at(tls.server.port);
  rtt_tls_options(&tls, &o);
  rtt_open_ready(&a, &loop, &o);
  rtt_open_ready(&b, &loop, &o);
  rtt_acquire(&loop, a.c, "res", 10000, &held);
  cr_assert_eq(rtt_wait(b.c, "res", 10000, 8000, &next), 0);
  rtt_run_until_queued(&loop, adm, "res", 2);
  /* The waiter's connections die: the grant notice may go nowhere. */
  cr_assert(rtt_kill_conn(adm, "sub", rt_client_id(b.c)));
  cr_assert(rtt_kill_conn(adm, "cmd", rt_client_id(b.c)));
  rtt_release(&loop, &held, 0);
  cr_assert(rtt_run_until(&loop, &next.calls, 1, 8000), "never granted");
  cr_assert_eq(next.status, 0, "%s", rt_err_name(next.status));
  rt_client_stats(b.c, &st);
  cr_assert_geq(st.reconnects, 1);
  rtt_release(&loop, &next, 0);
  rtt_close(&a);
  rtt_close(&b);
  rtt_loop_finish(&loop);
  rtt_redis_close(adm);
}

/* A waiter that queues again as soon as its turn ended, however it ended,
 * and releases at once when granted. */
typedef struct churn {
  rt_client_t *c;
  int grants, stopping;
} churn;

static void churn_wait(churn *w);

static void churn_released(rt_lock_t *lock, int status, void *data) {
  (void)lock;
  (void)status;
  churn_wait(data);
}

static void churn_locked(rt_lock_t *lock, int status, void *data) {
  churn *w = data;
  if (status == 0) {
    w->grants++;
    if (rt_signal(lock, churn_released, w) == 0)
      return;
  }
  churn_wait(w);
}

static void churn_wait(churn *w) {
  if (!w->stopping)
    rt_wait(w->c, "res", 3, 2000, 1000, churn_locked, w, NULL);
}

/* Connections killed again and again under load, with SIGPIPE's default
 * action (terminate): the writes to dead TLS connections must not kill the
 * process. */
Test(tls, writes_to_killed_tls_connections_raise_no_sigpipe) {
  rt_options_t o;
  rtt_client c[2];
  churn w[8];
  signal(SIGPIPE, SIG_DFL);
  rtt_tls_start(&tls, "no");
  redisContext *adm = rtt_redis_at(tls.server.port);
  rtt_tls_options(&tls, &o);
  for (int i = 0; i < 2; i++)
    rtt_open_ready(&c[i], &loop, &o);
  memset(w, 0, sizeof(w));
  for (int i = 0; i < 8; i++) {
    w[i].c = c[i % 2].c;
    churn_wait(&w[i]);
  }
  int kills = 0;
  for (int round = 0; round < 60; round++) {
    rtt_run_for(&loop, 25);
    kills += rtt_kill_conn(adm, round % 2 ? "cmd" : "sub",
                           rt_client_id(c[(round / 2) % 2].c));
  }
  int grants = 0;
  for (int i = 0; i < 8; i++) {
    w[i].stopping = 1;
    grants += w[i].grants;
  }
  sigset_t pending;
  sigpending(&pending);
  cr_assert_not(sigismember(&pending, SIGPIPE), "a SIGPIPE is pending");
  cr_log_info("%d grants, %d connections killed", grants, kills);
  cr_assert_gt(kills, 10);
  cr_assert_gt(grants, 0);
  for (int i = 0; i < 2; i++)
    rtt_close(&c[i]);
  rtt_loop_finish(&loop);
  rtt_redis_close(adm);
}

Test(tls, options_check_names_the_bad_tls_option) {
  rt_options_t o;
  char msg[256];
  rt_options_init(&o);
  o.url = "rediss://127.0.0.1:1";
  o.tls_ca_file = "/nonexistent/ca.crt";
  cr_assert_eq(rt_options_check(&o, msg, sizeof(msg)), RT_EINVAL);
  cr_assert_str_eq(
      msg, "tls_ca_file: /nonexistent/ca.crt: No such file or directory");
  o.tls_ca_file = NULL;
  o.tls_key_file = "/etc/hostname";
  cr_assert_eq(rt_options_check(&o, msg, sizeof(msg)), RT_EINVAL);
  cr_assert_str_eq(msg, "tls_key_file: given without tls_cert_file");
  o.tls_key_file = NULL;
  o.tls_ca_dir = "/etc/hostname";
  cr_assert_eq(rt_options_check(&o, msg, sizeof(msg)), RT_EINVAL);
  cr_assert_str_eq(msg, "tls_ca_dir: /etc/hostname is not a directory");
  o.tls_ca_dir = NULL;
  o.tls_server_name = "bad name";
  cr_assert_eq(rt_options_check(&o, msg, sizeof(msg)), RT_EINVAL);
  assert_has(msg, "tls_server_name: byte 3 (0x20)");
  o.tls_server_name = NULL;
  o.url = "redis://127.0.0.1:1";
  o.tls_insecure = 1;
  cr_assert_eq(rt_options_check(&o, msg, sizeof(msg)), RT_EINVAL);
  assert_has(msg, "tls_insecure: set, but TLS is off");
  o.tls_insecure = 0;
  o.tls = 1;
  cr_assert_eq(rt_options_check(&o, msg, sizeof(msg)), RT_EINVAL);
  assert_has(msg, "write rediss://");
  o.url = "rediss://127.0.0.1:1";
  cr_assert_eq(rt_options_check(&o, msg, sizeof(msg)), 0, "%s", msg);
  uv_loop_close(&loop);
}

/* ---- a backlog the socket cannot take at once -------------------------- */

typedef struct backlog {
  int answers, ok;
} backlog;

static void backlog_cb(rt_client_t *c, int status, int locked, void *data) {
  backlog *b = data;
  (void)c;
  (void)locked;
  b->answers++;
  b->ok += status == 0;
}

/* About 16 MB of queries while the server sleeps and reads nothing: the
 * kernel takes a few MB, the rest waits in the link and leaves when the
 * server reads again; every query is answered. */
static void send_backlog(const rt_options_t *o, int port) {
  enum { QUERIES = 1500 };
  static char name[4000];
  rtt_client a;
  backlog b = {0, 0};
  memset(name, 'n', sizeof(name));
  redisContext *adm = rtt_redis_at(port);
  rtt_open_ready(&a, &loop, o);
  /* DEBUG SLEEP without waiting for its answer here. */
  int done = 0;
  cr_assert_eq(redisAppendCommand(adm, "DEBUG SLEEP 1"), REDIS_OK);
  while (!done)
    cr_assert_eq(redisBufferWrite(adm, &done), REDIS_OK);
  rtt_sleep_ms(50);
  for (int i = 0; i < QUERIES; i++)
    cr_assert_eq(rt_locked(a.c, name, sizeof(name), backlog_cb, &b), 0);
  cr_assert(rtt_run_until(&loop, &b.answers, QUERIES, 15000),
            "%d of %d queries answered", b.answers, QUERIES);
  cr_assert_eq(b.ok, QUERIES);
  redisReply *r;
  cr_assert_eq(redisGetReply(adm, (void **)&r), REDIS_OK);
  freeReplyObject(r);
  rtt_redis_close(adm);
  rtt_close(&a);
  loop_again();
}

Test(tls, a_backlog_the_socket_cannot_take_at_once_is_written_later) {
  rt_options_t o;
  rtt_tls_start(&tls, "no");
  rtt_options_at(&o, tls.server.port);
  send_backlog(&o, tls.server.port);
  rtt_tls_options(&tls, &o);
  send_backlog(&o, tls.server.port);
  uv_loop_close(&loop);
}

/* ---- what a TLS handshake costs ------------------------------------------ */

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

typedef struct timed_link {
  int ready, failed, closed;
} timed_link;

static void tl_ready(rt__link *l) { ((timed_link *)rt__link_data(l))->ready++; }
static void tl_reply(rt__link *l, redisReply *r) {
  (void)l;
  (void)r;
}
static void tl_failed(rt__link *l, int status, const char *why) {
  (void)status;
  cr_log_error("link failed: %s", why);
  ((timed_link *)rt__link_data(l))->failed++;
}
static void tl_closed(rt__link *l) {
  ((timed_link *)rt__link_data(l))->closed++;
}

/* n connections one after the other to port (TLS with ctx, or plain with
 * NULL): the times from starting the TCP connect to the stream being ready
 * for commands (TCP and TLS handshakes done), in us, sorted. */
static void time_links(int port, rt__tls_ctx *ctx, uint64_t *us, int n) {
  static const rt__link_events ev = {tl_ready, tl_reply, tl_failed, tl_closed};
  char why[256];
  for (int i = 0; i < n; i++) {
    timed_link t = {0, 0, 0};
    rt__link *l;
    uint64_t start = uv_hrtime();
    cr_assert_eq(rt__link_open(&l, &loop, "127.0.0.1", port, ctx, "127.0.0.1",
                               &ev, &t, why, sizeof(why)),
                 0, "%s", why);
    while (!t.ready && !t.failed)
      uv_run(&loop, UV_RUN_ONCE);
    us[i] = (uv_hrtime() - start) / 1000;
    cr_assert(t.ready);
    rt__link_close(l);
    while (!t.closed)
      uv_run(&loop, UV_RUN_ONCE);
  }
  qsort(us, (size_t)n, sizeof(us[0]), cmp_u64);
}

/* Not a check but a measurement (docs/PERFORMANCE.md, "TLS"): connects
 * over plain TCP and over TLS (TLS 1.3, the server's P-256 certificate
 * checked against the CA), RTT_TLS_OPENS of each (default 200). It fails
 * only if a connect fails. */
Test(tls, connect_time_plain_vs_tls) {
  rt_options_t o;
  rt__config cfg;
  rt__tls_ctx *ctx;
  char why[256];
  const char *env = getenv("RTT_TLS_OPENS");
  int n = env != NULL && atoi(env) > 0 ? atoi(env) : 200;
  uint64_t *p = calloc((size_t)n, sizeof(*p));
  uint64_t *t = calloc((size_t)n, sizeof(*t));
  cr_assert(p != NULL && t != NULL);
  rtt_tls_start(&tls, "no");
  rtt_tls_options(&tls, &o);
  cr_assert_eq(rt__config_init(&cfg, &o), 0);
  cr_assert_eq(rt__tls_ctx_new(&ctx, &cfg, why, sizeof(why)), 0, "%s", why);
  time_links(tls.server.port, NULL, p, n);
  time_links(tls.tls_port, ctx, t, n);
  cr_log_info("connect to ready over %d connections: plain median %llu us, "
              "p99 %llu us; TLS median %llu us, p99 %llu us",
              n, (unsigned long long)p[n / 2],
              (unsigned long long)p[n * 99 / 100], (unsigned long long)t[n / 2],
              (unsigned long long)t[n * 99 / 100]);
  rt__tls_ctx_free(ctx);
  rt__config_free(&cfg);
  free(p);
  free(t);
  rtt_loop_finish(&loop);
}
