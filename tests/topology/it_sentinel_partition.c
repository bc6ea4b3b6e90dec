/* Sentinel, partition: the master is cut off from its Sentinels and its
 * replicas while side A, a client connected through the Sentinels before,
 * still reaches it (and no Sentinel); the Sentinels promote a replica and
 * side B is granted there. Both write through a fence-checking store
 * (rtt_split.h). What must hold: no write of A accepted once B wrote (the
 * old master's fences stay an epoch below) and B makes progress. What the
 * partition costs in exclusion is printed: without min-replicas-to-write A
 * keeps being granted on the old master for as long as the partition lasts;
 * with it (1 replica, 1 s lag) the old master refuses A's grants soon after
 * the cut.
 *
 * The Sentinels and replicas reach the master through a proxy
 * (rtt_proxy.h); the partition cuts and refuses every connection of that
 * proxy but A's two, and every connection from A to the Sentinels (which
 * A reaches through proxies of their own). */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "rt_test.h"
#include "rtt_proxy.h"
#include "rtt_split.h"
#include "rttopo.h"

#define NSENTINELS 3

static rtt_server primary, replicas[2];
static rtt_proxy *to_primary;
static rtt_proxy *to_sentinel[NSENTINELS];
static rts_sentinels sentinels;

static void stop_all(void) {
  for (int i = 0; i < NSENTINELS; i++) {
    rtt_proxy_stop(to_sentinel[i]);
    to_sentinel[i] = NULL;
  }
  rts_sentinels_stop(&sentinels);
  rtt_proxy_stop(to_primary);
  to_primary = NULL;
  rtt_cleanup();
}

TestSuite(sentinel_partition, .fini = stop_all, .timeout = 180);

static void start_topology(int min_replicas) {
  rtt_server_start(&primary, NULL);
  to_primary = rtt_proxy_start(primary.port);
  char port[16];
  snprintf(port, sizeof(port), "%d", rtt_proxy_port(to_primary));
  const char *const args[] = {"--replicaof", "127.0.0.1", port, NULL};
  for (int i = 0; i < 2; i++)
    rtt_server_start(&replicas[i], args);
  redisContext *rc = rtt_redis_at(primary.port);
  uint64_t t0 = rtt_now_ms();
  while (rtt_info_ll(rc, "replication", "connected_slaves") < 2 &&
         rtt_now_ms() - t0 < 10000)
    rtt_sleep_ms(20);
  cr_assert_eq(rtt_info_ll(rc, "replication", "connected_slaves"), 2);
  if (min_replicas) {
    rtt_ok(rc, "CONFIG SET min-replicas-to-write 1");
    rtt_ok(rc, "CONFIG SET min-replicas-max-lag 1");
  }
  char err[1024];
  cr_assert_eq(rts_sentinels_start(&sentinels, rtt_proxy_port(to_primary),
                                   NSENTINELS, 2, NULL, err, sizeof(err)),
               0, "%s", err);
  for (int i = 0; i < NSENTINELS; i++)
    to_sentinel[i] = rtt_proxy_start(sentinels.s[i].port);
}

/* "redis-sentinel://<ports>#<name>" through the proxies or directly. */
static void url(char *buf, size_t cap, int proxied) {
  size_t n = (size_t)snprintf(buf, cap, "redis-sentinel://");
  for (int i = 0; i < NSENTINELS; i++)
    n += (size_t)snprintf(buf + n, cap - n, "127.0.0.1:%d%s",
                          proxied ? rtt_proxy_port(to_sentinel[i])
                                  : sentinels.s[i].port,
                          i + 1 < NSENTINELS ? "," : "");
  snprintf(buf + n, cap - n, "#%s", sentinels.master_name);
}

/* A Sentinel names a master other than the proxied old one. */
static int promoted(void) {
  for (int i = 0; i < NSENTINELS; i++) {
    int port = rts_sentinel_master_port(&sentinels, i);
    if (port > 0 && port != rtt_proxy_port(to_primary))
      return 1;
  }
  return 0;
}

static void partition_run(int min_replicas) {
  start_topology(min_replicas);
  static rtt_split_run run;
  rtt_split_init(&run);
  rtt_split_proc a = {.run = &run, .who = 0}, b = {.run = &run, .who = 1};
  url(a.url, sizeof(a.url), 1);
  url(b.url, sizeof(b.url), 0);
  int before = rtt_proxy_conn_count(to_primary);
  rtt_split_start(&a);
  uint64_t t0 = rtt_now_ms();
  while (run.n < 20 && rtt_now_ms() - t0 < 10000)
    rtt_sleep_ms(20);
  cr_assert_geq(run.n, 20, "A is granted before the partition");
  cr_assert_eq(rtt_proxy_conn_count(to_primary) - before, 2,
               "A's command and subscriber connections, nothing else, came "
               "after the topology settled");

  /* The partition, silent as a network's (bytes held, nothing closed):
   * the master keeps A's two connections, nothing else. */
  rtt_proxy_refuse(to_primary, 1);
  for (int i = 0; i < before; i++)
    rtt_proxy_set(to_primary, i, RTT_BOTH, RTT_HOLD, 0);
  for (int i = 0; i < NSENTINELS; i++) {
    rtt_proxy_refuse(to_sentinel[i], 1);
    rtt_proxy_set(to_sentinel[i], RTT_ALL, RTT_BOTH, RTT_HOLD, 0);
  }
  uint64_t cut_us = rtt_split_now_us();
  t0 = rtt_now_ms();
  while (!promoted() && rtt_now_ms() - t0 < 30000)
    rtt_sleep_ms(20);
  cr_assert(promoted(), "the Sentinels promote a replica");
  uint64_t promoted_us = rtt_split_now_us();
  rtt_split_start(&b);
  t0 = rtt_now_ms();
  int bs = 0;
  while (bs == 0 && rtt_now_ms() - t0 < 15000) {
    rtt_sleep_ms(20);
    pthread_mutex_lock(&run.mu);
    for (int i = 0; i < run.n; i++)
      bs += run.holds[i].who == 1;
    pthread_mutex_unlock(&run.mu);
  }
  rtt_sleep_ms(3000);
  rtt_split_proc *procs[] = {&a, &b};
  rtt_split_stop(&run, procs, 2);

  rtt_split_figures f;
  rtt_split_judge(&run, cut_us, &f);
  long long last_a = ((long long)f.last_a_us - (long long)cut_us) / 1000;
  printf("sentinel: partition, min-replicas-to-write %d: promoted %llu ms "
         "after the cut; B's first grant %llu ms after the cut, A's last "
         "%lld ms after it; %d holds (%d of B), %d overlapping pairs, "
         "longest double hold %llu ms; A's writes accepted after B's: %d "
         "(stale, overlapping: %d); errors A %d B %d\n",
         min_replicas, (unsigned long long)(promoted_us - cut_us) / 1000,
         (unsigned long long)(f.first_b_us - cut_us) / 1000, last_a, f.holds,
         f.of_b, f.overlaps, (unsigned long long)f.longest_us / 1000,
         f.a_after_b, f.stale, a.errors, b.errors);
  cr_assert_gt(f.of_b, 0, "B is granted on the new master");
  cr_assert_eq(f.a_after_b, 0,
               "the old master's fences must stay below the new master's");
  cr_assert_eq(f.stale, 0);
  if (min_replicas)
    cr_assert_lt(last_a, 4000,
                 "the old master stops granting once its replicas lag 1 s");
  pthread_mutex_destroy(&run.mu);
}

Test(sentinel_partition, the_old_masters_side_is_fenced_off) {
  partition_run(0);
}

Test(sentinel_partition, min_replicas_to_write_stops_the_old_masters_side) {
  partition_run(1);
}
