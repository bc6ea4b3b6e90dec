/* redturn_fault: the fault-injection driver.
 *
 * It starts a private redis-server on a free loopback port, starts worker
 * processes that take and release locks on a few resources in a loop and
 * log every event to their own file, and meanwhile injects faults:
 *
 *   - SIGKILL of the process holding a resource (found through Redis: the
 *     holder record <prefix>:{<res>}:h names its request, whose first 32
 *     characters are its client id), of a process waiting in a queue (a
 *     live member of m, in q order), or of a random worker; killed workers
 *     are started again (new client);
 *   - CLIENT KILL of a worker's command or subscriber connection (found in
 *     CLIENT LIST by the names redturn-cmd-<id> / redturn-sub-<id>);
 *   - CLIENT PAUSE of the whole server for a few hundred ms;
 *   - network faults: every worker reaches Redis through its own
 *     fault-injecting TCP proxy (tests/support/rtt_proxy.h), run by this
 *     process in a thread of its own. The driver delays both directions
 *     of a worker's connections by 50-300 ms for a while, holds both
 *     directions of its open connections for longer than the command
 *     timeout (the client times out and reconnects through a new proxy
 *     connection; then the held bytes are released, late), holds every
 *     connection of the worker, new ones included (a partition; everything
 *     is released at its end), or cuts its connections;
 *   - key loss: DEL of a resource's q or m key (the holder record h
 *     survives), of its h (a forced release), of a pool
 *     resource's D (its deadlines: frees nothing), now and then DEL of
 *     all its keys, or FLUSHALL (--keyloss: mostly these and kills of
 *     holders);
 *   - one restart of redis-server in the middle of the run, on the same
 *     port. With --persist aof (the default) the server runs with
 *     --appendonly yes and is stopped with SIGTERM, which makes it fsync the
 *     AOF, so the restarted server has every queue, lease and fence. With
 *     --persist none the data is gone after the restart.
 * All along, one connection of the driver is subscribed to the pattern
 * "<prefix>:*" (an observer, which must change nothing), and the server
 * runs with maxmemory-policy noeviction.
 *
 * Threads and processes: the proxies are threads of this process, so a
 * plain fork() of it would copy their sockets (a cut connection would stay
 * open in the child) and run the child from a snapshot of a threaded
 * process. Workers and redis-server are therefore started with fork()
 * immediately followed by execv() (workers: this binary in worker mode, see
 * worker_spawn; redis-server: tools/rtserver.h), calling only
 * async-signal-safe functions in between, and every descriptor of the
 * driver is close-on-exec.
 *
 * At the end the faults are lifted, the workers are stopped with SIGTERM
 * (they close their client: pending waits end with RT_ECANCELED, held
 * locks are released), the key space is checked (after every lease ended,
 * only keys that expire by themselves may stay), the server is stopped and
 * the checker (check.c) merges the logs and checks the history. The run
 * prints the counts and exits 1 if there was any violation.
 *
 *   redturn_fault [--dir DIR] [--workers N] [--lanes N] [--resources N]
 *                 [--seconds S] [--lease MS] [--interval MS]
 *                 [--cmd-timeout MS] [--persist aof|none] [--seed N]
 *                 [--slow] [--direct] [--evict] [--tls] [--cluster]
 *                 [--mixed] [--sentinel] [--wait-replicas N] [--judge]
 *
 * --judge makes the workers write through a shared fence-checking store
 * (see judge_write; judge.c judges its log).
 * --mixed makes every third resource a read-write lock and every third a
 * semaphore (see mixed_request), the rest mutexes.
 * --slow doubles the tolerances (sanitizer builds). --direct connects the
 * workers straight to Redis (no proxy, no network faults). --tls makes
 * throwaway certificates (tests/support/rtt_tls.h) and runs the server
 * with a TLS port that demands client certificates; the workers connect
 * to it over TLS, through their proxies, which pass the TLS bytes on
 * unchanged, so every fault kind applies. --cluster runs the workers
 * against a Redis Cluster of 3 masters with a replica each (tools/rttopo.h),
 * connected directly with the masters as seeds (the proxies would hand the
 * client a node address it cannot map: CLUSTER SHARDS names the nodes'
 * own ports); the faults act on the node concerned (the resource's owner
 * for kills of holders and waiters and for key loss, every node for CLIENT
 * KILL, a random node for CLIENT PAUSE; no FLUSHALL, no restart), and the
 * driver reshards the hot resource's slot at 35% of the run and fails its
 * master over with CLUSTER FAILOVER at 65%, then kills its new master with
 * SIGKILL at 80% (its replica takes over), each while the resource is held
 * and waited for if it gets so within 2 s. --sentinel runs the workers
 * against a primary with 2 replicas watched by 3 Sentinels
 * (tools/rttopo.h), through a redis-sentinel:// URL of the 3 Sentinels,
 * connected directly (a Sentinel names the master's own address, which no
 * proxy of ours stands for) and with rt_options_t.wait_replicas N
 * (--wait-replicas; the command timeout defaults to 5 s there, WAIT's to
 * half of it); the faults act on the current master (no restart), and the
 * driver forces a SENTINEL FAILOVER at 30% of the run and kills the master
 * with SIGKILL at 60%, bringing it back as a replica of the new one, each
 * while r0 is held and waited for if it gets so within 2 s; once a
 * Sentinel names the new master, the driver reconfigures the other servers
 * as the Sentinels will, only sooner (REPLICAOF it, CLIENT KILL of their
 * normal and pubsub clients). The driver's own connections
 * (faults, the observer, the key space check) use the plain port (the
 * current master's with --sentinel). The logs stay in
 * DIR (default "fault-run" in the current directory): rerun the checker
 * alone with redturn_fault_check DIR.
 *
 * Worker log lines (times are CLOCK_REALTIME in microseconds; reqid is
 * rt_lock_id(), unique over the run):
 *   I t slot gen pid client-id    the client was opened
 *   O t                           connected
 *   U t status                    the first connect failed (exit 3)
 *   E t lane res reqid timeout_ms ttl_ms reconnects kind permits of
 *                                 before rt_wait_ex(); kind as rt_kind_t,
 *                                 permits and of its semaphore fields
 *   Q t reqid position            the enqueue reply was seen (not granted)
 *   G t reqid fence deadline_ms lease_ms position reconnects left_ms
 *                                 granted; left_ms = rt_lock_lease_left_ms()
 *   F t reqid status reconnects why   the wait failed; why: the
 *                                 client's last error, for a status other
 *                                 than RT_EWAITTIMEOUT and RT_ECANCELED
 *   L t reqid                     rt_lock_on_lost() callback
 *   S t reqid overstay lost left_ms   before rt_signal(); lost: the lock
 *                                 was RT_LOCK_LOST then
 *   R t reqid status              rt_signal() callback
 *   N t reconnects                the reconnects count changed
 * (reconnects, in every line: rt_client_stats()'s reconnects + late_grants,
 * the two events after which a waiter may queue again at the tail)
 *   C t                           before rt_client_close()
 *   X t grants reconnects         close callback (then exit 0)
 *   M t reqid mid                 --multi: reqid (E and G just logged)
 *                                 is a lock of multi-lock mid
 *   D t reqid deadline_ms         --multi: that lock's deadline moved
 *   A t mid timeout ttl n res...  before rt_wait_all
 *   Z t mid status                rt_wait_all's callback
 *   T t mid / z t mid status      before rt_signal_all / its callback
 *   W t res status id fence deadline_ms
 *                                 --observe: an rt_observe call (id "-":
 *                                 nobody leads, or news without a state)
 * Driver log lines (driver.log):
 *   P t key=value...              parameters
 *   W t slot gen pid              worker started
 *   K t slot gen pid why [res reqid [fence deadline_ms grant_ms]]
 *                                 SIGKILL sent; for a holder, its record as
 *                                 read from Redis just before
 *   D t slot gen pid ...          worker reaped
 *   L t slot gen kind client-id   CLIENT KILL
 *   A t ms                        CLIENT PAUSE
 *   A t ms stall                  the server answered none of the stall
 *                                 probe's PINGs for ms (probe.c): judged
 *                                 as a pause
 *   Z t slot gen kind args        network fault begins: delay ms dur_ms,
 *                                 hold dur_ms conns, partition dur_ms, cut conns
 *   z t slot gen kind how bytes   it ends: how = release (held bytes
 *                                 delivered) or cut (worker died: dropped)
 *   X t0 t1 res kind keys         key loss (kind q, m, h, d, all or
 *                                 flushall; res -1: FLUSHALL), between t0
 *                                 (before the command) and t1 (its reply)
 *   J t what                      the pattern observer (re)subscribed
 *   B / S / H t                   restart: SIGTERM sent / old server exited /
 *                                 new server up
 *   T t                           stop phase
 *   V t text                      violation found by the driver
 *   Y t text                      information; --cluster logs its reshard
 *                                 and failover as "Y t cluster-reshard
 *                                 begin|end ..." and "Y t cluster-failover
 *                                 begin|end ..."; the SIGKILL of a master
 *                                 as "Y t cluster-crash ..." and a restart
 *                                 (B at the kill, S once reaped, H when
 *                                 its replica serves the slot);
 *                                 --sentinel logs "Y t sentinel-failover
 *                                 begin|end ..." and "Y t sentinel-crash
 *                                 ...", each also as a restart (B, S, H
 *                                 once a Sentinel names the new master)
 */
#include "fault.h"

params P = {"fault-run", 8, 2, 3, 40, 1000, 400, 0, 1, 0, 0, 0,
            0,           0, 0, 0, 0,  0,    "",  0, 0, 0, 0, 0};

/* Leases of the requests: a quarter of --lease, --lease, or twice it.
 * Mixed leases let a short lease follow a long one in a queue, so a waiter
 * that kept watching the earlier, longer lease would show. */
int64_t max_lease(void) { return 2 * P.lease_ms; }

static void usage(void) {
  fprintf(stderr, "usage: redturn_fault [--dir DIR] [--workers N] [--lanes N] "
                  "[--resources N]\n"
                  "       [--seconds S] [--lease MS] [--interval MS] "
                  "[--cmd-timeout MS]\n"
                  "       [--persist aof|none] [--seed N] [--slow] [--direct] "
                  "[--evict] [--tls] [--mixed]\n"
                  "       [--cluster] [--sentinel] [--wait-replicas N] "
                  "[--judge]\n");
  exit(2);
}

static void parse_args(int argc, char **argv, int from) {
  for (int i = from; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--slow") == 0) {
      P.slow = 1;
      continue;
    }
    if (strcmp(a, "--direct") == 0) {
      P.direct = 1;
      continue;
    }
    if (strcmp(a, "--evict") == 0) {
      P.evict = 1;
      continue;
    }
    if (strcmp(a, "--tls") == 0) {
      P.tls = 1;
      continue;
    }
    if (strcmp(a, "--mixed") == 0) {
      P.mixed = 1;
      continue;
    }
    if (strcmp(a, "--keyloss") == 0) {
      P.keyloss = 1;
      continue;
    }
    if (strcmp(a, "--multi") == 0) {
      P.multi = 1;
      continue;
    }
    if (strcmp(a, "--observe") == 0) {
      P.observe = 1;
      continue;
    }
    if (strcmp(a, "--judge") == 0) {
      judge_on = 1;
      continue;
    }
    if (strcmp(a, "--cluster") == 0) {
      P.cluster = 1;
      P.direct = 1; /* the proxies cannot map the nodes' addresses */
      continue;
    }
    if (strcmp(a, "--sentinel") == 0) {
      P.sentinel = 1;
      P.direct = 1; /* the Sentinels name the master's own port */
      continue;
    }
    if (v == NULL)
      usage();
    i++;
    if (strcmp(a, "--dir") == 0)
      P.dir = v;
    else if (strcmp(a, "--workers") == 0)
      P.workers = atoi(v);
    else if (strcmp(a, "--lanes") == 0)
      P.lanes = atoi(v);
    else if (strcmp(a, "--resources") == 0)
      P.resources = atoi(v);
    else if (strcmp(a, "--seconds") == 0)
      P.seconds = atoi(v);
    else if (strcmp(a, "--lease") == 0)
      P.lease_ms = atoll(v);
    else if (strcmp(a, "--interval") == 0)
      P.interval_ms = atoll(v);
    else if (strcmp(a, "--cmd-timeout") == 0)
      P.cmd_timeout_ms = atoll(v);
    else if (strcmp(a, "--wait-replicas") == 0)
      P.wait_replicas = atoi(v);
    else if (strcmp(a, "--seeds") == 0)
      snprintf(P.seeds, sizeof(P.seeds), "%s", v);
    else if (strcmp(a, "--seed") == 0)
      P.seed = strtoull(v, NULL, 10);
    else if (strcmp(a, "--persist") == 0) {
      if (strcmp(v, "aof") == 0)
        P.persist = 1;
      else if (strcmp(v, "none") == 0)
        P.persist = 0;
      else
        usage();
    } else
      usage();
  }
  /* --sentinel: WAIT (half of it) must outlast a replica's resync with a
   * new master (1.5 s was short in 1 run of 5). */
  if (P.cmd_timeout_ms == 0)
    P.cmd_timeout_ms = P.sentinel ? 5000 : P.slow ? 1200 : 800;
  if (P.workers < 1 || P.workers > MAX_WORKERS || P.lanes < 1 ||
      P.lanes > MAX_LANES || P.resources < 1 || P.resources > MAX_RES ||
      P.seconds < 1 || P.lease_ms < 100 || P.interval_ms < 10 ||
      P.cmd_timeout_ms < 100 || P.wait_replicas < 0 || P.wait_replicas > 2 ||
      ((P.cluster || P.sentinel) && (P.tls || P.evict)) ||
      (P.cluster && P.sentinel) || (judge_on && (P.mixed || P.evict)) ||
      ((P.multi || P.observe) && P.evict))
    usage();
}

/* Remove the logs of an earlier run (only files this program writes). */
static void clean_dir(const char *dir) {
  DIR *d = opendir(dir);
  if (d == NULL)
    return;
  struct dirent *e;
  char path[1024];
  while ((e = readdir(d)) != NULL) {
    const char *n = e->d_name;
    size_t l = strlen(n);
    if ((n[0] == 'w' && l > 4 && strcmp(n + l - 4, ".log") == 0) ||
        strcmp(n, "driver.log") == 0) {
      snprintf(path, sizeof(path), "%s/%s", dir, n);
      unlink(path);
    }
  }
  closedir(d);
}

/* The driver's process and its log: its own path (workers re-execute
 * it), the seed, a clean log directory, driver.log. 0, or the exit code. */
static int driver_setup(void) {
  signal(SIGPIPE, SIG_IGN);
  ssize_t sl = readlink("/proc/self/exe", self_exe, sizeof(self_exe) - 1);
  if (sl <= 0) {
    perror("fault: /proc/self/exe");
    return 2;
  }
  self_exe[sl] = '\0';
  if (P.seed == 0)
    P.seed = (uint64_t)real_us() ^ ((uint64_t)getpid() << 32);
  drnd = P.seed | 1;
  mkdir(P.dir, 0755);
  clean_dir(P.dir);
  if (judge_store_reset() != 0) {
    perror("fault: the judge's store");
    return 2;
  }
  snprintf(redis_dir, sizeof(redis_dir), "%s/redis-data", P.dir);
  rts_remove_tree(redis_dir); /* an earlier run's */

  char path[600];
  snprintf(path, sizeof(path), "%s/driver.log", P.dir);
  dlog = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  if (dlog < 0) {
    perror("fault: driver.log");
    return 2;
  }
  return 0;
}

/* The run's parameters, into driver.log ("P") and on stdout. */
static void announce(const rtf_tol *tol) {
  char tls_note[64];
  snprintf(tls_note, sizeof(tls_note),
           ", TLS on %d (client certificates required)", P.tls_port);
  dlogf("P %" PRId64 " persist=%s workers=%d lanes=%d resources=%d seconds=%d "
        "lease=%" PRId64 " leases=%" PRId64 ",%" PRId64 ",%" PRId64
        " interval=%" PRId64 " cmd_timeout=%" PRId64 " seed=%" PRIu64
        " slow=%d port=%d tls_port=%d proxies=%s maxmemory-policy=%s evict=%d "
        "tol_clock=%" PRId64 " tol_deadline=%" PRId64 " tol_crash=%" PRId64
        " tol_kill=%" PRId64 " cluster=%s sentinels=%s wait_replicas=%d",
        real_us(),
        P.cluster    ? "cluster"
        : P.sentinel ? "sentinel"
        : P.persist  ? "aof"
                     : "none",
        P.workers, P.lanes, P.resources, P.seconds, P.lease_ms, P.lease_ms / 4,
        P.lease_ms, max_lease(), P.interval_ms, P.cmd_timeout_ms, P.seed,
        P.slow, P.port, P.tls_port, P.direct ? "no" : "yes",
        P.evict ? "allkeys-lru" : "noeviction", P.evict, tol->clock_ms,
        tol->deadline_ms, tol->crash_ms, tol->kill_ms,
        P.cluster ? P.seeds : "no", P.sentinel ? P.seeds : "no",
        P.wait_replicas);
  if (P.sentinel)
    printf("fault: a primary with 2 replicas, 3 Sentinels (ports %s); the "
           "workers use wait_replicas %d; a SENTINEL FAILOVER and a kill -9 "
           "of the master\n",
           P.seeds, P.wait_replicas);
  if (P.cluster)
    printf("fault: Redis Cluster, 3 masters (ports %s) with a replica each; "
           "a reshard and a failover of the hot slot\n",
           P.seeds);
  printf(
      "fault: redis-server on 127.0.0.1:%d%s (%s), %d workers x %d lanes on "
      "%d resources, %d s, leases %" PRId64 "/%" PRId64 "/%" PRId64
      " ms, command timeout %" PRId64 " ms, %s, seed %" PRIu64 ", logs in %s\n",
      P.port, P.tls ? tls_note : "",
      P.cluster    ? "the first master, no restart"
      : P.sentinel ? "the first master, no restart"
      : P.evict    ? "allkeys-lru, 4 MB, evicting all along"
                   : (P.persist ? "AOF, restart keeps data" : "no persistence"),
      P.workers, P.lanes, P.resources, P.seconds, P.lease_ms / 4, P.lease_ms,
      max_lease(), P.cmd_timeout_ms,
      P.direct ? "direct connections" : "one proxy per worker", P.seed, P.dir);
  fflush(stdout);
}

static void start_workers(void) {
  /* One proxy (a thread of this process) per worker slot, for the whole
   * run: a restarted worker reconnects through the same one. */
  for (int s = 0; s < P.workers; s++)
    if (!P.direct)
      nets[s].p = rtt_proxy_start(redis_client_port());
  for (int s = 0; s < P.workers; s++) {
    slots[s].idfd = -1;
    worker_spawn(s);
  }
  observer_open();
  if (P.evict)
    check_refusal();
}

/* Until the run's time is up: keep the workers running, inject a fault
 * every interval (or fill memory in the eviction run), restart the server
 * once at 45% of the run; with --tls, check the workers' connections at
 * 30%. */
static void run_faults(void) {
  int64_t t0 = mono_ms();
  int64_t end = t0 + (int64_t)P.seconds * 1000;
  int64_t restart_at = t0 + (int64_t)P.seconds * 1000 * 45 / 100;
  int restarted = P.cluster || P.sentinel, tls_checked = !P.tls;
  /* --cluster: a reshard of the hot slot at 35%, a failover at 65%. */
  int64_t reshard_at = t0 + (int64_t)P.seconds * 1000 * 35 / 100;
  int64_t failover_at = t0 + (int64_t)P.seconds * 1000 * 65 / 100;
  int resharded = !P.cluster, failed_over = !P.cluster;
  /* and a kill -9 of its master at 80%. */
  int64_t crash_at = t0 + (int64_t)P.seconds * 1000 * 80 / 100;
  int crashed = !P.cluster;
  int64_t tls_check_at = t0 + (int64_t)P.seconds * 1000 * 30 / 100;
  int64_t next_fault = t0 + 500;
  while (mono_ms() < end) {
    read_ids();
    reap_workers();
    net_tick();
    observer_drain();
    int64_t now = mono_ms();
    if (!tls_checked && now >= tls_check_at) {
      tls_checked = 1;
      tls_check_clients();
    }
    if (!resharded && now >= reshard_at)
      resharded = cluster_reshard() || now >= reshard_at + 5000;
    if (!failed_over && now >= failover_at)
      failed_over = cluster_failover() || now >= failover_at + 5000;
    if (!crashed && failed_over && now >= crash_at) {
      crashed = 1;
      n_crashes += cluster_crash_master();
    }
    if (P.sentinel)
      sentinel_tick(t0);
    if (P.evict) {
      fill_tick();
    } else if (!restarted && now >= restart_at) {
      restarted = 1;
      restart_server();
    }
    if (!P.evict && now >= next_fault) {
      inject_fault();
      next_fault = now + P.interval_ms / 2 +
                   (int64_t)(next_rand(&drnd) % (uint64_t)P.interval_ms);
    }
    for (int s = 0; s < P.workers; s++)
      if (slots[s].pid == 0 && slots[s].restart_at &&
          now >= slots[s].restart_at)
        worker_spawn(s);
    if (redis.pid > 0) {
      int st;
      if (waitpid(redis.pid, &st, WNOHANG) == redis.pid) {
        redis.pid = 0;
        violation("redis-server died on its own");
        if (redis_start_again() != 0)
          break;
      }
    }
    sleep_ms(5);
  }
}

/* Stop: the network heals, then every worker closes its client and
 * exits. */
static void stop_workers(void) {
  stopping_phase = 1;
  for (int s = 0; s < P.workers; s++) {
    net_end(s, 0);
    if (nets[s].p != NULL)
      rtt_proxy_reset(nets[s].p);
  }
  dlogf("T %" PRId64, real_us());
  for (int s = 0; s < P.workers; s++)
    if (slots[s].pid > 0)
      kill(slots[s].pid, SIGTERM);
  int64_t stop_deadline = mono_ms() + (P.slow ? 30000 : 15000);
  for (;;) {
    read_ids();
    reap_workers();
    observer_drain();
    int left = 0;
    for (int s = 0; s < P.workers; s++)
      left += slots[s].pid > 0;
    if (left == 0)
      break;
    if (mono_ms() > stop_deadline) {
      for (int s = 0; s < P.workers; s++)
        if (slots[s].pid > 0) {
          violation("worker %d.%d (pid %d) did not exit after SIGTERM "
                    "(rt_client_close hangs)",
                    s, slots[s].gen, (int)slots[s].pid);
          slots[s].killed = 1;
          kill(slots[s].pid, SIGKILL);
        }
      stop_deadline = mono_ms() + 5000;
    }
    sleep_ms(10);
  }
  for (int s = 0; s < P.workers; s++) {
    rtt_proxy_stop(nets[s].p);
    nets[s].p = NULL;
  }
}

/* --sentinel: both failovers must have happened; stop the topology. */
static void sentinel_finish(void) {
  printf("fault: sentinel: %ld SENTINEL FAILOVERs, %ld kills of the master "
         "(workers with wait_replicas %d)\n",
         n_sentinel_failovers, n_master_kills, P.wait_replicas);
  if (n_sentinel_failovers == 0 || n_master_kills == 0)
    violation("sentinel run without a SENTINEL FAILOVER (%ld) or a killed "
              "master (%ld)",
              n_sentinel_failovers, n_master_kills);
  rts_sentinels_stop(&sen);
  rts_replicated_stop(&grp);
}

/* Every lease ends (killed holders'); then look at what stayed behind. */
static void after_the_run(void) {
  sleep_ms(max_lease() + 200);
  observer_drain();
  dlogf("Y %" PRId64 " observer: %ld subscriptions, %ld messages", real_us(),
        obs_subscribes, obs_messages);
  observer_close();
  if (filler != NULL)
    redisFree(filler);
  filler = NULL;
  if (P.evict) {
    long long ev = evicted_keys();
    dlogf("Y %" PRId64 " evicted keys: %lld, %ld of them lock keys (filler "
          "keys written: %lld)",
          real_us(), ev, evicted_lock_keys, fill_n);
    printf("fault: eviction run: %lld keys evicted, %ld of them lock keys "
           "(%lld filler keys written)\n",
           ev, evicted_lock_keys, fill_n);
    if (ev <= 0)
      violation("no key was evicted in the eviction run");
  }
  check_keyspace();
  rts_stop(&redis); /* and its directory */
  if (P.cluster) {
    printf("fault: cluster: %ld reshards, %ld failovers, %ld kills of the "
           "master of the hot slot\n",
           n_reshards, n_failovers, n_crashes);
    if (n_reshards == 0 || n_failovers == 0 || n_crashes == 0)
      violation("cluster run without a reshard (%ld), a failover (%ld) or "
                "a killed master (%ld)",
                n_reshards, n_failovers, n_crashes);
    rts_cluster_stop(&cl);
  }
  if (P.sentinel)
    sentinel_finish();
  if (P.tls)
    rtt_tls_stop(&certs); /* removes the certificates */
}

/* How many faults of each kind were injected; every kind must have been
 * (a driver bug otherwise). */
static void report_kinds(void) {
  char kinds[600];
  size_t kl = 0;
  kinds[0] = '\0';
  for (int k = 0; k < FK_COUNT; k++) {
    kl += (size_t)snprintf(kinds + kl, sizeof(kinds) - kl, "%s%s %ld",
                           k ? ", " : "", fk_name[k], fk_done[k]);
    if (kl >= sizeof(kinds))
      kl = sizeof(kinds) - 1;
  }
  dlogf("Y %" PRId64 " faults: %s", real_us(), kinds);
  printf("fault: injected %s; %ld restarts; %ld workers failed their first "
         "connect; observer (PSUBSCRIBE %s:*) got %ld messages\n",
         kinds, n_restarts, n_connect_fail, PREFIX, obs_messages);
  if (P.seconds >= 10 && !P.evict)
    for (int k = 0; k < FK_COUNT; k++)
      if (fk_done[k] == 0 && kind_applies(k))
        violation("fault kind %s was never injected", fk_name[k]);
}

/* Check the merged history; the exit code. */
static int check_history(const rtf_tol *tol) {
  rtf_counts counts;
  printf("fault: checking the history\n");
  long v = rtf_check(P.dir, tol, stdout, &counts);
  if (v < 0) {
    fprintf(stderr, "fault: cannot read the logs in %s\n", P.dir);
    return 1;
  }
  /* The checker counts the driver's V lines too. */
  rtf_print_counts(stdout, &counts);
  close(dlog);
  if (counts.violations != 0 || counts.grants == 0) {
    printf("fault: FAILED (%ld violations%s; logs in %s, seed %" PRIu64 ")\n",
           counts.violations, counts.grants == 0 ? ", no grants" : "", P.dir,
           P.seed);
    return 1;
  }
  printf("fault: OK\n");
  return 0;
}

int main(int argc, char **argv) {
  if (argc >= 6 && strcmp(argv[1], "--worker") == 0) {
    parse_args(argc, argv, 6);
    P.port = atoi(argv[5]);
    return worker_main(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]));
  }
  parse_args(argc, argv, 1);
  int code = driver_setup();
  if (code != 0)
    return code;
  rtf_tol tol;
  rtf_tol_default(&tol, P.slow);
  if ((P.cluster    ? cluster_start()
       : P.sentinel ? sentinel_start()
                    : redis_start()) != 0)
    return 2;
  announce(&tol);
  if (!P.cluster && !P.sentinel)
    probe_start(P.port);
  start_workers();
  run_faults();
  stop_workers();
  if (probe_stop() == 0 && n_long_pauses > 0)
    violation("the server-stall probe saw none of the %ld CLIENT PAUSEs of "
              "250 ms or more",
              n_long_pauses);
  after_the_run();
  report_kinds();
  return check_history(&tol);
}
