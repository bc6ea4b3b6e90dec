/* Connecting through Sentinel (redis-sentinel:// URLs) against a real
 * primary with 2 replicas watched by 3 Sentinels (tools/rttopo.h): locks
 * through the URL, a forced failover and a killed master while a lock is
 * held and others wait (every wait ends, fences strictly increase, never
 * two holders), a demoted master answering READONLY, and clear errors for
 * a wrong master name and Sentinels that are all down. Every server is
 * private and stopped by pid. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rt_test.h"
#include "rtt_split.h"
#include "rtt_tls.h"
#include "rttopo.h"

static rts_replicated group;
static rts_sentinels sentinels;

static void stop_all(void) {
  rts_sentinels_stop(&sentinels);
  rts_replicated_stop(&group);
  rtt_cleanup();
}

TestSuite(sentinel, .fini = stop_all, .timeout = 180);

static void start_topology(void) {
  char err[1024];
  cr_assert_eq(rts_replicated_start(&group, 2, err, sizeof(err)), 0, "%s", err);
  cr_assert_eq(rts_sentinels_start(&sentinels, group.primary.port, 3, 2, NULL,
                                   err, sizeof(err)),
               0, "%s", err);
}

/* The Sentinels' URL for master name, with first (a port, or 0) before
 * them. */
static void sentinel_url(char *buf, size_t cap, int first, const char *name) {
  size_t n = (size_t)snprintf(buf, cap, "redis-sentinel://");
  if (first > 0)
    n += (size_t)snprintf(buf + n, cap - n, "127.0.0.1:%d,", first);
  for (int i = 0; i < sentinels.n; i++)
    n += (size_t)snprintf(buf + n, cap - n, "127.0.0.1:%d%s",
                          sentinels.s[i].port, i + 1 < sentinels.n ? "," : "");
  snprintf(buf + n, cap - n, "#%s", name);
}

static rt_blocking_t *open_through_sentinels(void) {
  char url[512];
  rt_options_t o;
  rt_blocking_t *b = NULL;
  rt_options_init(&o);
  sentinel_url(url, sizeof(url), 0, sentinels.master_name);
  o.url = url;
  o.prefix = rtt_prefix();
  o.connect_timeout_ms = 3000;
  o.command_timeout_ms = 3000;
  int rc = rt_blocking_open(&o, &b);
  cr_assert_eq(rc, 0, "open through the Sentinels: %s", rt_err_name(rc));
  return b;
}

/* SIGKILL, as a crash, and reap. */
Test(sentinel, locks_through_a_sentinel_url_skipping_a_dead_sentinel) {
  start_topology();
  char url[512];
  rt_options_t o;
  rt_blocking_t *b = NULL;
  rt_options_init(&o);
  sentinel_url(url, sizeof(url), rtt_free_port(), sentinels.master_name);
  o.url = url;
  o.prefix = rtt_prefix();
  cr_assert_eq(rt_blocking_open(&o, &b), 0);
  rt_lock_t *l;
  cr_assert_eq(rt_blocking_try_lock(b, "s1", 2, 10000, &l), 0);
  cr_assert_gt(rt_lock_fence(l), 0);
  /* The grant is on the primary. */
  char key[128];
  rtt_key(key, sizeof(key), rtt_prefix(), "s1", 2, 'h');
  redisReply *r = rtt_cmd(rtt_redis_at(group.primary.port), "EXISTS %s", key);
  cr_assert_eq(r->integer, 1);
  freeReplyObject(r);
  cr_assert_eq(rt_blocking_signal(b, l), 0);
  rt_blocking_close(b);
}

Test(sentinel, a_wrong_master_name_and_dead_sentinels_fail_clearly) {
  start_topology();
  char url[512];
  rt_options_t o;
  rt_blocking_t *b = NULL;
  rt_options_init(&o);
  o.prefix = rtt_prefix();
  o.url = url;
  sentinel_url(url, sizeof(url), 0, "nosuchmaster");
  uint64_t t0 = rtt_now_ms();
  int rc = rt_blocking_open(&o, &b);
  cr_assert_eq(rc, RT_ECONNECT, "%s", rt_err_name(rc));
  cr_assert_lt(rtt_now_ms() - t0, 3000);

  /* rt_blocking_open keeps no client on error: the words come from a
   * client of the event API. */
  uv_loop_t loop;
  uv_loop_init(&loop);
  rtt_client tc;
  rtt_open(&tc, &loop, &o);
  rtt_run_until(&loop, &tc.connects, 1, 5000);
  cr_assert_eq(tc.connect_status, RT_ECONNECT);
  const char *e = rt_client_last_error(tc.c);
  cr_assert(strstr(e, "no Sentinel knows a master named \"nosuchmaster\"") !=
                NULL,
            "%s", e);
  rtt_close(&tc);

  snprintf(url, sizeof(url), "redis-sentinel://127.0.0.1:%d,127.0.0.1:%d#m",
           rtt_free_port(), rtt_free_port());
  o.connect_timeout_ms = 2000;
  rtt_open(&tc, &loop, &o);
  t0 = rtt_now_ms();
  rtt_run_until(&loop, &tc.connects, 1, 5000);
  cr_assert_eq(tc.connect_status, RT_ECONNECT);
  cr_assert_lt(rtt_now_ms() - t0, 2500);
  e = rt_client_last_error(tc.c);
  cr_assert(strstr(e, "no Sentinel gave the address of master \"m\"") != NULL &&
                strstr(e, "refused") != NULL,
            "%s", e);
  rtt_close(&tc);
  rtt_loop_finish(&loop);
}

/* A listening socket that never accepts nor answers: a silent Sentinel. */
static int silent_listener(int *port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a;
  socklen_t len = sizeof(a);
  memset(&a, 0, sizeof(a));
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
  cr_assert_eq(listen(fd, 8), 0);
  cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
  *port = ntohs(a.sin_port);
  return fd;
}

Test(sentinel, a_silent_sentinel_times_out_and_a_close_mid_ask_cleans_up) {
  int port, fd = silent_listener(&port);
  char url[96];
  snprintf(url, sizeof(url), "redis-sentinel://127.0.0.1:%d,localhost:%d#m",
           port, port);
  rt_options_t o;
  rt_options_init(&o);
  o.url = url;
  o.prefix = rtt_prefix();
  o.connect_timeout_ms = 600;
  uv_loop_t loop;
  uv_loop_init(&loop);
  rtt_client tc;
  /* Each of the 2 Sentinels gets 600 / 3 ms. */
  rtt_open(&tc, &loop, &o);
  uint64_t t0 = rtt_now_ms();
  rtt_run_until(&loop, &tc.connects, 1, 5000);
  uint64_t ms = rtt_now_ms() - t0;
  cr_assert_eq(tc.connect_status, RT_ECONNECT);
  cr_assert(ms >= 350 && ms < 700, "%llu ms", (unsigned long long)ms);
  const char *e = rt_client_last_error(tc.c);
  cr_assert(strstr(e, "no answer within 200 ms") != NULL &&
                strstr(e, "localhost:") != NULL,
            "%s", e);
  rtt_close(&tc);

  /* Closed while the first Sentinel is being asked. */
  rtt_client tc2;
  o.connect_timeout_ms = 5000;
  rtt_open(&tc2, &loop, &o);
  rtt_run_for(&loop, 100);
  cr_assert_eq(tc2.connects, 0);
  rtt_close(&tc2);
  rtt_loop_finish(&loop);
  cr_assert_eq(tc.closes, 1);
  cr_assert_eq(tc2.connects, 1);
  cr_assert_eq(tc2.connect_status, RT_ECANCELED);
  cr_assert_eq(tc2.closes, 1);
  close(fd);
}

/* A waiter on its own client and thread: the fence of its grant. */
typedef struct waiter {
  pthread_t thread;
  const char *name;
  int64_t hold_ms;
  int status;
  uint64_t fence;
  uint64_t granted_ms, released_ms;
} waiter;

static void *wait_and_hold(void *arg) {
  waiter *w = arg;
  rt_blocking_t *b = open_through_sentinels();
  rt_lock_t *l = NULL;
  w->status = rt_blocking_wait(b, w->name, strlen(w->name), 20000, 60000, &l);
  if (w->status == 0) {
    w->granted_ms = rtt_now_ms();
    w->fence = rt_lock_fence(l);
    rtt_sleep_ms(w->hold_ms);
    w->released_ms = rtt_now_ms();
    int rc = rt_blocking_signal(b, l);
    if (rc != 0)
      w->status = rc;
  }
  rt_blocking_close(b);
  return NULL;
}

/* Every Sentinel's answer to GET-MASTER-ADDR-BY-NAME, if they agree on a
 * port other than old; else -1. */
static int agreed_new_master(int old) {
  int port = rts_sentinel_master_port(&sentinels, 0);
  for (int i = 1; i < sentinels.n; i++)
    if (rts_sentinel_master_port(&sentinels, i) != port)
      return -1;
  return port == old ? -1 : port;
}

static void wait_for_new_master(int old) {
  uint64_t t0 = rtt_now_ms();
  while (agreed_new_master(old) < 0 && rtt_now_ms() - t0 < 30000)
    rtt_sleep_ms(50);
  cr_assert_gt(agreed_new_master(old), 0, "no new master in 30 s");
}

/* Every replica has what the primary wrote (a failover then loses no
 * grant). */
static void replicas_have_all(void) {
  for (int i = 0; i < group.nreplicas; i++)
    cr_assert(
        rtt_replica_has_all(group.primary.port, group.replicas[i].port, 5000),
        "replica %d lags", i);
}

/* A holder on the master, two waiters queued behind it; fail the master
 * over with how(), then release: every wait ends granted, in turn, with
 * strictly increasing fences. The release comes at once (it waits in the
 * client for the new master) or once the Sentinels agree on the new
 * master. Returns the ms from how() to the first waiter's grant. */
static uint64_t failover_while_held(const char *name, void (*how)(void),
                                    int release_after_switch) {
  start_topology();
  rt_blocking_t *holder = open_through_sentinels();
  rt_lock_t *l;
  cr_assert_eq(rt_blocking_try_lock(holder, name, strlen(name), 20000, &l), 0);
  uint64_t first_fence = rt_lock_fence(l);
  waiter w[2] = {{.name = name, .hold_ms = 100},
                 {.name = name, .hold_ms = 100}};
  redisContext *p = rtt_redis_at(group.primary.port);
  for (int i = 0; i < 2; i++) {
    pthread_create(&w[i].thread, NULL, wait_and_hold, &w[i]);
    uint64_t t0 = rtt_now_ms();
    while (rtt_qlen(p, rtt_prefix(), name, strlen(name)) < i + 2 &&
           rtt_now_ms() - t0 < 10000)
      rtt_sleep_ms(20);
  }
  cr_assert_eq(rtt_qlen(p, rtt_prefix(), name, strlen(name)), 3);
  replicas_have_all();
  uint64_t t0 = rtt_now_ms();
  int old = group.primary.port;
  how();
  if (release_after_switch)
    wait_for_new_master(old);
  /* The holder's release goes to the new master once its client followed
   * the switch. A grant is owed from when it was asked for: its return
   * may come later than the grant it made (a busy machine). */
  uint64_t released_ms = rtt_now_ms();
  int rc = rt_blocking_signal(holder, l);
  cr_assert_eq(rc, 0, "release after the failover: %s (%s)", rt_err_name(rc),
               rt_client_last_error(rt_blocking_client(holder)));
  for (int i = 0; i < 2; i++) {
    pthread_join(w[i].thread, NULL);
    cr_assert_eq(w[i].status, 0, "waiter %d: %s", i, rt_err_name(w[i].status));
  }
  waiter *a = &w[0], *b = &w[1];
  if (b->fence < a->fence) {
    a = &w[1];
    b = &w[0];
  }
  cr_assert_gt(a->fence, first_fence);
  cr_assert_gt(b->fence, a->fence);
  /* Never two holders: each grant after the previous release. */
  cr_assert_geq(a->granted_ms, released_ms);
  cr_assert_geq(b->granted_ms, a->released_ms);
  /* The release met the new master: the first waiter did not wait for
   * the holder's 20 s lease to run out there. */
  cr_assert_lt(a->granted_ms - t0, 12000, "granted %llu ms after the failover",
               (unsigned long long)(a->granted_ms - t0));
  rt_blocking_close(holder);
  return a->granted_ms - t0;
}

static void forced_failover(void) {
  rtt_ok(rtt_redis_at(sentinels.s[0].port), "SENTINEL FAILOVER %s",
         sentinels.master_name);
}

static void kill_master(void) { rtt_crash(&group.primary); }

Test(sentinel, a_forced_failover_while_held_and_waited_moves_the_queue) {
  uint64_t ms = failover_while_held("fo", forced_failover, 1);
  printf("sentinel: SENTINEL FAILOVER to the next grant: %llu ms\n",
         (unsigned long long)ms);
}

Test(sentinel, killing_the_master_while_held_and_waited_moves_the_queue) {
  uint64_t ms = failover_while_held("kill", kill_master, 0);
  printf("sentinel: kill -9 of the master to the queue moving again: %llu ms "
         "(down-after-milliseconds 1000)\n",
         (unsigned long long)ms);
}

/* failover_fence_ms through Sentinel: after a kill -9 of the master, how
 * long until a client (through the Sentinels, with the hold `hold`) is
 * granted a free mutex again, in ms after the kill. */
static uint64_t first_grant_after_a_kill(const char *name, int64_t hold) {
  char url[512];
  rt_options_t o;
  rt_blocking_t *b = NULL;
  rt_lock_t *l = NULL;
  start_topology();
  rt_options_init(&o);
  sentinel_url(url, sizeof(url), 0, sentinels.master_name);
  o.url = url;
  o.prefix = rtt_prefix();
  o.connect_timeout_ms = 3000;
  o.command_timeout_ms = 3000;
  o.retry_first_connect = 1;
  o.failover_fence_ms = hold;
  cr_assert_eq(rt_blocking_open(&o, &b), 0);
  /* The master's first use is held off too. */
  int rc = rt_blocking_wait(b, name, strlen(name), 1000, hold + 10000, &l);
  cr_assert_eq(rc, 0, "%s", rt_err_name(rc));
  cr_assert_eq(rt_blocking_signal(b, l), 0);
  replicas_have_all();
  uint64_t t0 = rtt_now_ms();
  rtt_crash(&group.primary);
  do {
    rc = rt_blocking_wait(b, name, strlen(name), 1000, 5000, &l);
  } while (rc != 0 && rtt_now_ms() - t0 < 60000);
  cr_assert_eq(rc, 0, "no grant within 60 s of the kill: %s (%s)",
               rt_err_name(rc), rt_client_last_error(rt_blocking_client(b)));
  uint64_t ms = rtt_now_ms() - t0;
  cr_assert_eq(rt_blocking_signal(b, l), 0);
  rt_blocking_close(b);
  return ms;
}

Test(sentinel, after_a_kill_no_grant_before_the_failover_hold) {
  uint64_t ms = first_grant_after_a_kill("fh", 5000);
  printf("sentinel: kill -9 of the master to the first grant with "
         "failover_fence_ms 5000: %llu ms (down-after-milliseconds 1000)\n",
         (unsigned long long)ms);
  /* The promoted replica's era starts after the kill: nothing for 5 s. */
  cr_assert_geq(ms, 5000, "granted %llu ms after the kill",
                (unsigned long long)ms);
}

Test(sentinel, after_a_kill_the_first_grant_without_the_hold) {
  uint64_t ms = first_grant_after_a_kill("fn", 0);
  printf("sentinel: kill -9 of the master to the first grant without "
         "failover_fence_ms: %llu ms (down-after-milliseconds 1000)\n",
         (unsigned long long)ms);
}

/* ---- split brain across a planned failover ------------------------------ */

/* The split-brain pair (rtt_split.h): A was connected before a SENTINEL
 * FAILOVER sent to the last Sentinel; A asks and watches the first one,
 * which is stopped (SIGSTOP) through the failover, as a Sentinel that
 * learns of it late; B connects once the last Sentinel names the new
 * master. */
Test(sentinel, a_planned_failover_grants_no_two_holders_nor_a_stale_fence) {
  start_topology();
  static rtt_split_run run;
  rtt_split_init(&run);
  rtt_split_proc a = {.run = &run, .who = 0}, b = {.run = &run, .who = 1};
  sentinel_url(a.url, sizeof(a.url), 0, sentinels.master_name);
  int last = sentinels.n - 1;
  size_t n = (size_t)snprintf(b.url, sizeof(b.url), "redis-sentinel://");
  for (int i = 0; i < sentinels.n; i++)
    n += (size_t)snprintf(b.url + n, sizeof(b.url) - n, "127.0.0.1:%d%s",
                          sentinels.s[(last + i) % sentinels.n].port,
                          i + 1 < sentinels.n ? "," : "");
  snprintf(b.url + n, sizeof(b.url) - n, "#%s", sentinels.master_name);

  rtt_split_start(&a);
  uint64_t t0 = rtt_now_ms();
  while (run.n < 20 && rtt_now_ms() - t0 < 10000)
    rtt_sleep_ms(20);
  cr_assert_geq(run.n, 20, "A is granted before the failover");
  int old = group.primary.port;
  kill(sentinels.s[0].pid, SIGSTOP);
  uint64_t failover_us = rtt_split_now_us();
  rtt_ok(rtt_redis_at(sentinels.s[last].port), "SENTINEL FAILOVER %s",
         sentinels.master_name);
  t0 = rtt_now_ms();
  int port;
  while (((port = rts_sentinel_master_port(&sentinels, last)) <= 0 ||
          port == old) &&
         rtt_now_ms() - t0 < 30000)
    rtt_sleep_ms(20);
  cr_assert(port > 0 && port != old, "the last Sentinel names a new master");
  rtt_split_start(&b);
  rtt_sleep_ms(4000);
  rtt_split_proc *procs[] = {&a, &b};
  rtt_split_stop(&run, procs, 2);
  kill(sentinels.s[0].pid, SIGCONT);

  /* Holds of A granted once the failover began that overlap a hold of B:
   * a held lock keeps its lease, nothing is granted through the old master
   * once a failover of it is under way. Writes of A accepted by the store
   * after an overlapping hold of B wrote: the old master's fences must be
   * below the new master's. */
  rtt_split_figures f;
  rtt_split_judge(&run, failover_us, &f);
  printf("sentinel: planned failover, A before and B after: %d holds (%d of "
         "B), %d overlapping after the failover began, %d stale writes "
         "accepted; longest double hold %llu ms, longest time "
         "without a grant %llu ms; errors A %d B %d\n",
         f.holds, f.of_b, f.overlaps, f.stale,
         (unsigned long long)f.longest_us / 1000,
         (unsigned long long)f.gap_us / 1000, a.errors, b.errors);
  cr_assert_gt(f.of_b, 0, "B is granted on the new master");
  cr_assert_eq(f.overlaps, 0, "holds overlapping after the failover began");
  cr_assert_eq(f.stale, 0, "writes accepted after the new master's holder's");
  pthread_mutex_destroy(&run.mu);
}

/* A client's master turns into a replica behind the Sentinels' back: the
 * client's next script call is answered READONLY, so it asks the
 * Sentinels again, refuses the server they name while ROLE says it is not
 * a master, and once it is a master again (here: made one back) the call
 * is sent there and succeeds instead of failing. */
static void *promote_back_later(void *arg) {
  rtt_sleep_ms(1000);
  rtt_ok(rtt_redis_at(*(int *)arg), "REPLICAOF NO ONE");
  return NULL;
}

Test(sentinel, a_demoted_master_answering_readonly_makes_the_client_follow) {
  start_topology();
  rt_blocking_t *b = open_through_sentinels();
  rt_lock_t *l;
  cr_assert_eq(rt_blocking_try_lock(b, "ro", 2, 20000, &l), 0);
  cr_assert_eq(rt_blocking_signal(b, l), 0);

  int port = group.primary.port;
  rtt_ok(rtt_redis_at(port), "REPLICAOF 127.0.0.1 %d", group.replicas[0].port);
  pthread_t t;
  pthread_create(&t, NULL, promote_back_later, &port);
  uint64_t t0 = rtt_now_ms();
  int rc = rt_blocking_try_lock(b, "ro", 2, 20000, &l);
  uint64_t ms = rtt_now_ms() - t0;
  pthread_join(t, NULL);
  cr_assert_eq(rc, 0, "%s (%s)", rt_err_name(rc),
               rt_client_last_error(rt_blocking_client(b)));
  cr_assert_geq(ms, 900, "granted after %llu ms, on a replica?",
                (unsigned long long)ms);
  const char *e = rt_client_last_error(rt_blocking_client(b));
  cr_assert(strstr(e, "is not a master (ROLE says slave)") != NULL ||
                strstr(e, "READONLY") != NULL,
            "%s", e);
  printf("sentinel: READONLY to a grant on the master again: %llu ms (%s)\n",
         (unsigned long long)ms, e);
  cr_assert_eq(rt_blocking_signal(b, l), 0);
  rt_blocking_close(b);
}

/* ---- rediss-sentinel:// ------------------------------------------------------ */

static rtt_tls tls;
static rts_server tls_sentinel;

static void stop_tls(void) {
  rts_stop(&tls_sentinel);
  rtt_tls_stop(&tls);
  stop_all();
}

/* A master serving TLS and a Sentinel that serves TLS and watches the
 * master's TLS port: the client can only have reached both over TLS. */
Test(sentinel, rediss_sentinel_talks_tls_to_the_sentinel_and_the_master,
     .fini = stop_tls) {
  char conf[2048], err[1024], url[128];
  rtt_tls_start(&tls, "no");
  int tls_port = rtt_free_port();
  snprintf(conf, sizeof(conf),
           "tls-port %d\ntls-cert-file %s/server.crt\n"
           "tls-key-file %s/server.key\ntls-ca-cert-file %s\n"
           "tls-auth-clients no\ntls-replication yes\n"
           "sentinel monitor tlsm 127.0.0.1 %d 1\n",
           tls_port, tls.dir, tls.dir, tls.ca, tls.tls_port);
  rts_options so = {
      .config = conf, .sentinel = 1, .dir_prefix = "redturn-sentinel"};
  cr_assert_eq(rts_start(&tls_sentinel, &so, err, sizeof(err)), 0, "%s", err);

  rt_options_t o;
  rt_blocking_t *b = NULL;
  rt_options_init(&o);
  snprintf(url, sizeof(url), "rediss-sentinel://127.0.0.1:%d#tlsm", tls_port);
  o.url = url;
  o.prefix = rtt_prefix();
  o.tls_ca_file = tls.ca;
  int rc = rt_blocking_open(&o, &b);
  cr_assert_eq(rc, 0, "%s", rt_err_name(rc));
  rt_lock_t *l;
  cr_assert_eq(rt_blocking_try_lock(b, "t", 1, 10000, &l), 0);
  cr_assert_gt(rt_lock_fence(l), 0);
  cr_assert_eq(rt_blocking_signal(b, l), 0);
  rt_blocking_close(b);

  /* The same Sentinel without TLS: its TLS port closes on plain bytes. */
  snprintf(url, sizeof(url), "redis-sentinel://127.0.0.1:%d#tlsm", tls_port);
  o.tls_ca_file = NULL;
  o.connect_timeout_ms = 1000;
  cr_assert_eq(rt_blocking_open(&o, &b), RT_ECONNECT);
}

/* ---- wait_replicas ---------------------------------------------------------- */

static rt_blocking_t *open_waiting_for(int replicas, int64_t timeout_ms) {
  char url[64];
  rt_options_t o;
  rt_blocking_t *b = NULL;
  rt_options_init(&o);
  snprintf(url, sizeof(url), "redis://127.0.0.1:%d", group.primary.port);
  o.url = url;
  o.prefix = rtt_prefix();
  o.wait_replicas = replicas;
  o.wait_replicas_timeout_ms = timeout_ms;
  cr_assert_eq(rt_blocking_open(&o, &b), 0);
  return b;
}

/* The holder record of name on port names request id. */
static int holder_is(int port, const char *name, const char *id) {
  char key[128];
  rtt_key(key, sizeof(key), rtt_prefix(), name, strlen(name), 'h');
  redisReply *r = rtt_cmd(rtt_redis_at(port), "GET %s", key);
  int is = r->type == REDIS_REPLY_STRING && strstr(r->str, id) != NULL;
  freeReplyObject(r);
  return is;
}

static void *hand_over_later(void *arg) {
  rt_lock_t **l = arg;
  rtt_sleep_ms(300);
  cr_assert_eq(rt_blocking_signal(rt_lock_get_data(*l), *l), 0);
  return NULL;
}

Test(sentinel, wait_replicas_reports_grants_and_handoffs_the_replicas_have) {
  char err[1024];
  cr_assert_eq(rts_replicated_start(&group, 2, err, sizeof(err)), 0, "%s", err);
  /* What is checked is which grants are reported, not how soon: the
   * replicas get 4 s to acknowledge (below the command timeout), as a
   * busy machine may need. */
  rt_blocking_t *a = open_waiting_for(2, 4000), *b = open_waiting_for(2, 4000);
  rt_lock_t *la, *lb;
  int st = rt_blocking_try_lock(a, "w", 1, 20000, &la);
  cr_assert_eq(st, 0, "try_lock: %s (%s)", rt_err_name(st),
               rt_client_last_error(rt_blocking_client(a)));
  for (int i = 0; i < 2; i++)
    cr_assert(holder_is(group.replicas[i].port, "w", rt_lock_id(la)),
              "replica %d lacks the grant", i);
  /* b waits; a hands over from another thread; b's grant is reported
   * only once both replicas have the handoff, written by a's release. */
  pthread_t t;
  pthread_create(&t, NULL, hand_over_later, &la);
  cr_assert_eq(rt_blocking_wait(b, "w", 1, 20000, 10000, &lb), 0);
  for (int i = 0; i < 2; i++)
    cr_assert(holder_is(group.replicas[i].port, "w", rt_lock_id(lb)),
              "replica %d lacks the handoff", i);
  pthread_join(t, NULL);
  cr_assert_eq(rt_blocking_signal(b, lb), 0);
  rt_blocking_close(a);
  rt_blocking_close(b);
}

/* A WAIT whose connection goes away (or that is unblocked with an error,
 * as when its master turns replica) answers nothing about the replicas:
 * the wait asks again and is granted once the replica has the grant. */
static void wait_answered_without_a_count(int unblock) {
  char err[1024], url[64];
  cr_assert_eq(rts_replicated_start(&group, 1, err, sizeof(err)), 0, "%s", err);
  uv_loop_t loop;
  rtt_client a;
  rtt_req req = {0};
  rt_options_t o;
  uv_loop_init(&loop);
  rtt_options(&o);
  snprintf(url, sizeof(url), "redis://127.0.0.1:%d", group.primary.port);
  o.url = url;
  o.wait_replicas = 1;
  o.wait_replicas_timeout_ms = 2000;
  o.command_timeout_ms = 5000;
  rtt_open_ready(&a, &loop, &o);
  /* The replica acknowledges nothing while stopped: the WAIT blocks. */
  kill(group.replicas[0].pid, SIGSTOP);
  cr_assert_eq(rtt_wait(a.c, "k", 20000, 10000, &req), 0);
  rtt_run_for(&loop, 300);
  redisContext *rc = rtt_redis_at(group.primary.port);
  long long id = rtt_conn_id(rc, "cmd", rt_client_id(a.c));
  int done = unblock ? rtt_int(rc, "CLIENT UNBLOCK %lld ERROR", id) == 1
                     : rtt_kill_conn(rc, "cmd", rt_client_id(a.c));
  rtt_redis_close(rc);
  rtt_run_for(&loop, 100);
  kill(group.replicas[0].pid, SIGCONT);
  cr_assert(done, "the command connection's WAIT was not found");
  rtt_expect_grant(&loop, &req, 5000, "the wait whose WAIT lost its answer");
  cr_assert(holder_is(group.replicas[0].port, "k", req.id));
  rtt_release(&loop, &req, 0);
  rtt_close(&a);
  rtt_loop_finish(&loop);
}

Test(sentinel, a_grant_whose_wait_lost_its_connection_is_granted_once_acked) {
  wait_answered_without_a_count(0);
}

Test(sentinel, a_grant_whose_wait_was_unblocked_is_granted_once_acked) {
  wait_answered_without_a_count(1);
}

/* Replicas briefly missing (stopped: they acknowledge nothing) never end
 * a wait with RT_EREPLICAS: a wait without a deadline asks again until
 * they are back and is granted then; a bounded one ends by its deadline
 * with RT_EWAITTIMEOUT and gives its grant back. */
Test(sentinel, a_wait_keeps_asking_while_replicas_are_missing) {
  char err[1024], url[64];
  cr_assert_eq(rts_replicated_start(&group, 1, err, sizeof(err)), 0, "%s", err);
  uv_loop_t loop;
  rtt_client a;
  rtt_req forever = {0}, bounded = {0};
  rt_options_t o;
  uv_loop_init(&loop);
  rtt_options(&o);
  snprintf(url, sizeof(url), "redis://127.0.0.1:%d", group.primary.port);
  o.url = url;
  o.wait_replicas = 1;
  o.wait_replicas_timeout_ms = 300;
  rtt_open_ready(&a, &loop, &o);
  kill(group.replicas[0].pid, SIGSTOP);

  uint64_t t0 = rtt_now_ms();
  cr_assert_eq(rtt_wait(a.c, "b", 20000, 1000, &bounded), 0);
  cr_assert(rtt_run_until(&loop, &bounded.calls, 1, 5000));
  uint64_t ended = bounded.at_ms - t0;
  cr_assert_eq(bounded.status, RT_EWAITTIMEOUT, "%s",
               rt_err_name(bounded.status));
  cr_assert(ended >= 990 && ended < 1700, "ended after %llu ms",
            (unsigned long long)ended);
  const char *e = rt_client_last_error(a.c);
  cr_assert(strstr(e, "of wait_replicas 1 replicas within 300 ms") != NULL,
            "%s", e);

  cr_assert_eq(rtt_wait(a.c, "f", 20000, RT_FOREVER, &forever), 0);
  rtt_run_for(&loop, 1500); /* several WAITs time out meanwhile */
  cr_assert_eq(forever.calls, 0, "the wait ended with %s",
               rt_err_name(forever.status));
  uint64_t back = rtt_now_ms();
  kill(group.replicas[0].pid, SIGCONT);
  rtt_expect_grant(&loop, &forever, 5000, "the wait once the replica is back");
  printf(
      "wait_replicas 1, replica stopped: a 1000 ms wait ended RT_EWAITTIMEOUT "
      "after %llu ms; an RT_FOREVER wait was granted %llu ms after the "
      "replica came back\n",
      (unsigned long long)ended, (unsigned long long)(forever.at_ms - back));
  cr_assert(holder_is(group.replicas[0].port, "f", forever.id));
  /* The bounded wait's grant was given back. */
  redisContext *rc = rtt_redis_at(group.primary.port);
  cr_assert_eq(rtt_qlen(rc, rtt_prefix(), "b", 1), 0);
  rtt_redis_close(rc);
  rtt_release(&loop, &forever, 0);
  rtt_close(&a);
  rtt_loop_finish(&loop);
}

/* With wait_replicas a grant notice is confirmed with the master before it
 * is believed: one the master does not back (here sent by the test, as a
 * demoted master replays the new master's notices) grants nothing. */
Test(sentinel, a_grant_notice_the_master_does_not_back_grants_nothing) {
  char err[1024], url[64], chan[128], msg[128];
  cr_assert_eq(rts_replicated_start(&group, 1, err, sizeof(err)), 0, "%s", err);
  uv_loop_t loop;
  rtt_client a, b;
  rtt_req held = {0}, waiting = {0};
  rt_options_t o;
  uv_loop_init(&loop);
  rtt_options(&o);
  snprintf(url, sizeof(url), "redis://127.0.0.1:%d", group.primary.port);
  o.url = url;
  o.wait_replicas = 1;
  rtt_open_ready(&a, &loop, &o);
  rtt_open_ready(&b, &loop, &o);
  rtt_acquire(&loop, a.c, "k", 20000, &held);
  rtt_wait_queued(&loop, b.c, "k", 20000, &waiting);
  /* "g:<seq>:<fence>:<lease>:<deadline>" to b's channel. */
  redisContext *rc = rtt_redis_at(group.primary.port);
  long long now = rtt_redis_time_ms(rc);
  snprintf(chan, sizeof(chan), "%s:c:%s", rtt_prefix(), rt_client_id(b.c));
  snprintf(msg, sizeof(msg), "g:%s:%llu:20000:%lld",
           strchr(waiting.id, ':') + 1, (unsigned long long)held.fence + 1,
           now + 20000);
  cr_assert_eq(rtt_int(rc, "SPUBLISH %s %s", chan, msg), 1);
  rtt_redis_close(rc);
  rtt_run_for(&loop, 300);
  cr_assert_eq(waiting.calls, 0, "a notice Redis does not back was believed");

  rtt_release(&loop, &held, 0);
  rtt_expect_grant(&loop, &waiting, 5000, "the waiter after the release");
  cr_assert_gt(waiting.fence, held.fence);
  rtt_release(&loop, &waiting, 0);
  rtt_close(&a);
  rtt_close(&b);
  rtt_loop_finish(&loop);
}

Test(sentinel, wait_replicas_beyond_the_replicas_fails_clearly_and_gives_back) {
  char err[1024];
  cr_assert_eq(rts_replicated_start(&group, 2, err, sizeof(err)), 0, "%s", err);
  rt_blocking_t *b = open_waiting_for(3, 300);
  rt_lock_t *l;
  uint64_t t0 = rtt_now_ms();
  int rc = rt_blocking_try_lock(b, "w3", 2, 20000, &l);
  uint64_t ms = rtt_now_ms() - t0;
  cr_assert_eq(rc, RT_EREPLICAS, "%s", rt_err_name(rc));
  cr_assert(ms >= 280 && ms < 2000, "%llu ms", (unsigned long long)ms);
  const char *e = rt_client_last_error(rt_blocking_client(b));
  cr_assert(
      strstr(e, "of wait_replicas 3 replicas within 300 ms: given back") !=
          NULL,
      "%s", e);
  /* Given back: nobody holds it on the master. */
  uint64_t t1 = rtt_now_ms();
  while (rtt_qlen(rtt_redis_at(group.primary.port), rtt_prefix(), "w3", 2) !=
             0 &&
         rtt_now_ms() - t1 < 5000)
    rtt_sleep_ms(20);
  cr_assert_eq(
      rtt_qlen(rtt_redis_at(group.primary.port), rtt_prefix(), "w3", 2), 0);
  rt_blocking_close(b);
}

/* Grant latency (try, then release) without and with wait_replicas 2. */
static uint64_t median_grant_us(rt_blocking_t *b, int n) {
  uint64_t us[200];
  for (int i = 0; i < n; i++) {
    rt_lock_t *l;
    uint64_t t0 = (uint64_t)rtt_realtime_us();
    int rc = rt_blocking_try_lock(b, "lat", 3, 20000, &l);
    cr_assert_eq(rc, 0, "try %d: %s (%s)", i, rt_err_name(rc),
                 rt_client_last_error(rt_blocking_client(b)));
    us[i] = (uint64_t)rtt_realtime_us() - t0;
    cr_assert_eq(rt_blocking_signal(b, l), 0);
  }
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && us[j - 1] > us[j]; j--) {
      uint64_t x = us[j];
      us[j] = us[j - 1];
      us[j - 1] = x;
    }
  return us[n / 2];
}

Test(sentinel, wait_replicas_cost_of_a_grant) {
  char err[1024];
  cr_assert_eq(rts_replicated_start(&group, 2, err, sizeof(err)), 0, "%s", err);
  rt_blocking_t *b0 = open_waiting_for(0, 1000),
                *b2 = open_waiting_for(2, 1000);
  uint64_t m0 = median_grant_us(b0, 200), m2 = median_grant_us(b2, 200);
  printf("wait_replicas: median grant (try_lock) latency, primary + 2 "
         "replicas on loopback: N=0 %llu us, N=2 %llu us\n",
         (unsigned long long)m0, (unsigned long long)m2);
  rt_blocking_close(b0);
  rt_blocking_close(b2);
}

/* ---- the CLI ------------------------------------------------------------------- */

Test(sentinel, the_cli_runs_and_demos_through_a_sentinel_url) {
  start_topology();
  char url[512];
  sentinel_url(url, sizeof(url), 0, sentinels.master_name);
  rtt_cli_runs_and_demos(url);
}

Test(sentinel, the_cli_evicts_the_holder_through_a_sentinel_url) {
  start_topology();
  uv_loop_t loop;
  rtt_client a, b;
  rtt_req held = {0}, waiting = {0};
  rt_options_t o;
  char url[512], args[1024], out[8192];
  sentinel_url(url, sizeof(url), 0, sentinels.master_name);
  uv_loop_init(&loop);
  rtt_options(&o);
  o.url = url;
  rtt_open_ready(&a, &loop, &o);
  rtt_open_ready(&b, &loop, &o);
  rtt_acquire(&loop, a.c, "job", 20000, &held);
  rtt_wait_queued(&loop, b.c, "job", 20000, &waiting);

  snprintf(args, sizeof(args), "evict --url '%s' --prefix %s job --holder %s",
           url, rtt_prefix(), held.id);
  cr_assert_eq(rtt_redturn(args, out, sizeof(out)), 0, "%s", out);
  rtt_expect_evicted(&loop, &held, &waiting, out);
  rtt_close(&a);
  rtt_close(&b);
  rtt_loop_finish(&loop);
}
