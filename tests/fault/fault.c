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
 *     survives), of its h (a forced release), of a multi-holder
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
 *   F t reqid status reconnects   the wait failed
 *   L t reqid                     rt_lock_on_lost() callback
 *   S t reqid overstay lost left_ms   before rt_signal(); lost: the lock
 *                                 was RT_LOCK_LOST then
 *   R t reqid status              rt_signal() callback
 *   N t reconnects                rt_client_stats().reconnects changed
 *   C t                           before rt_client_close()
 *   X t grants reconnects         close callback (then exit 0)
 * Driver log lines (driver.log):
 *   P t key=value...              parameters
 *   W t slot gen pid              worker started
 *   K t slot gen pid why [res reqid [fence deadline_ms grant_ms]]
 *                                 SIGKILL sent; for a holder, its record as
 *                                 read from Redis just before
 *   D t slot gen pid ...          worker reaped
 *   L t slot gen kind client-id   CLIENT KILL
 *   A t ms                        CLIENT PAUSE
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
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <dirent.h>
#include <hiredis/hiredis.h>
#include <uv.h>

#include "check.h"
#include "judge.h"
#include "redturn.h"
#include "rtserver.h"
#include "rtt_proxy.h"
#include "rtt_tls.h"
#include "rttopo.h"

#define MAX_WORKERS 64
#define MAX_LANES 8
#define MAX_RES 16
#define PREFIX "rtfault"

/* ---- parameters ---------------------------------------------------------- */

typedef struct params {
  const char *dir;
  int workers;
  int lanes;
  int resources;
  int seconds;
  int64_t lease_ms;
  int64_t interval_ms;    /* mean time between two faults */
  int64_t cmd_timeout_ms; /* the workers' command_timeout_ms */
  int persist;            /* 1: AOF, 0: none */
  uint64_t seed;
  int slow;
  int port;          /* Redis; in a worker: the port it connects to */
  int direct;        /* no proxies */
  int evict;         /* the eviction run (see --evict) */
  int tls;           /* workers talk TLS to Redis (see --tls) */
  int mixed;         /* read-write locks and semaphores too (see --mixed) */
  int tls_port;      /* the driver: Redis's TLS port */
  int cluster;       /* a Redis Cluster run (see --cluster) */
  char seeds[128];   /* --cluster: the masters' ports, "p1,p2,p3";
                    * --sentinel: the Sentinels' */
  int sentinel;      /* a primary, 2 replicas, 3 Sentinels (see --sentinel) */
  int wait_replicas; /* the workers' rt_options_t.wait_replicas */
  int keyloss;       /* faults mostly key losses and crashed holders */
} params;

static params P = {"fault-run", 8, 2, 3, 40, 1000, 400, 0,  1, 0, 0,
                   0,           0, 0, 0, 0,  0,    0,   "", 0, 0, 0};

/* Leases of the requests: a quarter of --lease, --lease, or twice it.
 * Mixed leases let a short lease follow a long one in a queue, so a waiter
 * that kept watching the earlier, longer lease would show. */
static int64_t max_lease(void) { return 2 * P.lease_ms; }

/* ---- small helpers ---------------------------------------------------------- */

static int64_t real_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int64_t ms) {
  struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static uint64_t next_rand(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static int write_all(int fd, const char *buf, size_t len) {
  while (len > 0) {
    ssize_t n = write(fd, buf, len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return -1;
    buf += n;
    len -= (size_t)n;
  }
  return 0;
}

/* One log line, written with one write(2) so a SIGKILL never leaves half a
 * line behind. */
static void logf_fd(int fd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void logf_fd(int fd, const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof(buf) - 1, fmt, ap);
  va_end(ap);
  if (n < 0)
    return;
  if ((size_t)n > sizeof(buf) - 2)
    n = (int)sizeof(buf) - 2;
  buf[n++] = '\n';
  (void)write_all(fd, buf, (size_t)n);
}

static void die_with_parent(void) {
#ifdef __linux__
  prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
}

static void res_name(int r, char *buf, size_t cap) {
  snprintf(buf, cap, "r%d", r);
}

/* ---- TLS (--tls) -------------------------------------------------------- */

/* The certificates of a --tls run (tests/support/rtt_tls.h), made by the
 * driver into DIR/tls: the server serves TLS with them and demands a
 * client certificate; every worker, a process of its own, finds them in
 * the same place. */
static rtt_tls certs;

static int tls_certs_dir(char *buf, size_t cap) {
  int n = snprintf(buf, cap, "%s/tls", P.dir);
  return n > 0 && (size_t)n < cap ? 0 : -1;
}

/* A worker: TLS to the port it was given (its proxy passes the bytes
 * through unchanged), trusting the run's CA, with the client certificate.
 * 0, or -1 when the paths do not fit. */
static int tls_worker_options(rt_options_t *o) {
  char dir[RTT_TLS_PATH];
  if (tls_certs_dir(dir, sizeof(dir)) != 0 || rtt_tls_paths(&certs, dir) != 0)
    return -1;
  o->tls = 1;
  o->tls_ca_file = certs.ca;
  o->tls_cert_file = certs.client_cert;
  o->tls_key_file = certs.client_key;
  return 0;
}

/* The driver: the certificates, a free port for TLS (P.tls_port) and the
 * server's TLS arguments into args (pointing into certs and port, which
 * must last until the server started; rtserver keeps copies for the
 * restart). The plain port stays open for the driver's own connections
 * (hiredis 0.14 has no TLS) and the readiness check. 0, or -1 with a
 * message on stderr. */
static int tls_server_args(const char *args[RTT_TLS_NARGS], char *port,
                           size_t portcap) {
  char dir[RTT_TLS_PATH], err[700];
  if (tls_certs_dir(dir, sizeof(dir)) != 0 ||
      rtt_tls_make_certs(&certs, dir, err, sizeof(err)) != 0) {
    fprintf(stderr, "fault: TLS certificates: %s\n",
            certs.dir[0] ? err : "the directory's name is too long");
    return -1;
  }
  P.tls_port = rts_free_port();
  if (P.tls_port <= 0) {
    fprintf(stderr, "fault: no free port for TLS\n");
    return -1;
  }
  snprintf(port, portcap, "%d", P.tls_port);
  rtt_tls_server_args(&certs, port, "yes", args);
  return 0;
}

/* ======================================================================= */
/* Worker process                                                            */
/* ======================================================================= */

enum { L_IDLE = 0, L_WAITING, L_HOLDING, L_RELEASING };

typedef struct worker worker;

typedef struct lane {
  worker *w;
  int idx;
  int state;
  rt_lock_t *lock;
  int64_t ttl_ms;
  rt_kind_t kind;
  char id[96];
  int q_logged;
  uv_timer_t timer;
} lane;

struct worker {
  uv_loop_t loop;
  rt_client_t *c;
  int fd;
  int slot, gen;
  uint64_t rnd;
  lane lanes[MAX_LANES];
  int stopping;
  int exit_code;
  uint64_t reconnects;
  uv_signal_t sigterm;
  uv_check_t check;
};

static uint64_t w_reconnects(worker *w) {
  rt_stats_t st;
  rt_client_stats(w->c, &st);
  return st.reconnects;
}

/* ---- the split-brain judge's store (--judge) ---------------------------- */

/* With --judge every worker "writes" through one fence-checking store
 * shared by all of them, as a storage behind the lock would: it refuses a
 * write whose fence is lower than the highest it accepted for the
 * resource. The store is DIR/store.fences (the highest fence of each
 * resource, 8 bytes at 8 * res) under an flock, and DIR/store.log, one
 * line per write, appended while the lock is held, so the log is in
 * real-time order: "W t res holder fence deadline_ms lease_ms ok before
 * why" (t read under the lock; before: the highest fence then; why: g at
 * the grant, s just before rt_signal). A worker writes only while it
 * believes it holds: not RT_LOCK_LOST and lease left above 0. judge.c
 * reads the log. Mutexes only (refused with --mixed and --evict). */
static int judge_on;
static int store_fences = -1, store_log = -1; /* a worker's */

/* The driver: remove an earlier run's store; make an empty one if
 * judging. */
static int judge_store_reset(void) {
  char path[600];
  snprintf(path, sizeof(path), "%s/%s", P.dir, RTF_STORE_LOG);
  unlink(path);
  int fd =
      judge_on ? open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644) : 0;
  if (fd < 0)
    return -1;
  if (judge_on)
    close(fd);
  snprintf(path, sizeof(path), "%s/%s", P.dir, RTF_STORE_FENCES);
  unlink(path);
  fd =
      judge_on ? open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644) : 0;
  if (fd < 0)
    return -1;
  if (judge_on)
    close(fd);
  return 0;
}

/* A worker: open the store (0, or -1). */
static int judge_store_open(void) {
  if (!judge_on)
    return 0;
  char path[600];
  snprintf(path, sizeof(path), "%s/%s", P.dir, RTF_STORE_FENCES);
  store_fences = open(path, O_RDWR | O_CLOEXEC);
  snprintf(path, sizeof(path), "%s/%s", P.dir, RTF_STORE_LOG);
  store_log = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
  return store_fences >= 0 && store_log >= 0 ? 0 : -1;
}

/* A worker that believes it holds lock writes through the store. */
static void judge_write(worker *w, rt_lock_t *lock, char why) {
  if (!judge_on || store_fences < 0 || store_log < 0)
    return;
  if (rt_lock_state(lock) != RT_LOCK_HELD || rt_lock_lease_left_ms(lock) <= 0)
    return; /* it does not believe it holds: no write */
  size_t len;
  const char *name = rt_lock_resource(lock, &len);
  int res = len > 1 && name[0] == 'r' ? atoi(name + 1) : -1;
  if (res < 0 || res >= MAX_RES)
    return;
  uint64_t fence = rt_lock_fence(lock), top = 0;
  off_t off = (off_t)res * (off_t)sizeof(top);
  if (flock(store_fences, LOCK_EX) != 0) {
    logf_fd(w->fd, "Y %" PRId64 " store: flock: %s", real_us(),
            strerror(errno));
    return;
  }
  if (pread(store_fences, &top, sizeof(top), off) != (ssize_t)sizeof(top))
    top = 0; /* never written */
  int64_t t = real_us();
  int ok = fence >= top;
  if (ok && fence > top &&
      pwrite(store_fences, &fence, sizeof(fence), off) !=
          (ssize_t)sizeof(fence))
    ok = 0; /* not stored: not accepted */
  char line[256];
  int n = snprintf(line, sizeof(line),
                   "W %" PRId64 " %d %s %" PRIu64 " %" PRId64 " %" PRId64
                   " %d %" PRIu64 " %c\n",
                   t, res, rt_lock_id(lock), fence, rt_lock_deadline_ms(lock),
                   rt_lock_lease_ms(lock), ok, top, why);
  (void)write_all(store_log, line, (size_t)n);
  flock(store_fences, LOCK_UN);
}

static void lane_start(lane *ln);

static void lane_next_cb(uv_timer_t *t) { lane_start(t->data); }

static void lane_later(lane *ln, int64_t ms) {
  ln->state = L_IDLE;
  if (!ln->w->stopping)
    uv_timer_start(&ln->timer, lane_next_cb, (uint64_t)ms, 0);
}

static void signal_cb(rt_lock_t *lock, int status, void *data) {
  lane *ln = data;
  worker *w = ln->w;
  (void)lock;
  logf_fd(w->fd, "R %" PRId64 " %s %d", real_us(), ln->id, status);
  ln->lock = NULL;
  lane_later(ln, (int64_t)(next_rand(&w->rnd) % 20));
}

static void hold_done_cb(uv_timer_t *t) {
  lane *ln = t->data;
  worker *w = ln->w;
  if (ln->state != L_HOLDING || w->stopping)
    return;
  int64_t now = real_us();
  int overstay = (int64_t)(now / 1000) >= rt_lock_deadline_ms(ln->lock);
  int lost = rt_lock_state(ln->lock) == RT_LOCK_LOST;
  logf_fd(w->fd, "S %" PRId64 " %s %d %d %" PRId64, now, ln->id, overstay, lost,
          rt_lock_lease_left_ms(ln->lock));
  judge_write(w, ln->lock, 's');
  ln->state = L_RELEASING;
  int err = rt_signal(ln->lock, signal_cb, ln);
  if (err != 0) {
    logf_fd(w->fd, "R %" PRId64 " %s %d", real_us(), ln->id, err);
    ln->lock = NULL;
    lane_later(ln, 10);
  }
}

static void lost_cb(rt_lock_t *lock, void *data) {
  lane *ln = data;
  logf_fd(ln->w->fd, "L %" PRId64 " %s", real_us(), rt_lock_id(lock));
}

static void wait_cb(rt_lock_t *lock, int status, void *data) {
  lane *ln = data;
  worker *w = ln->w;
  int64_t now = real_us();
  uint64_t rc = w_reconnects(w);
  if (status == 0) {
    logf_fd(w->fd,
            "G %" PRId64 " %s %" PRIu64 " %" PRId64 " %" PRId64 " %zu %" PRIu64
            " %" PRId64,
            now, ln->id, rt_lock_fence(lock), rt_lock_deadline_ms(lock),
            rt_lock_lease_ms(lock), rt_lock_position(lock), rc,
            rt_lock_lease_left_ms(lock));
    judge_write(w, lock, 'g');
    ln->state = L_HOLDING;
    if (w->stopping)
      return; /* the close releases it */
    /* A leader proclaims a new value once: the observers' notice path
     * runs under every fault, and a refusal (not the leader) turns the
     * lock LOST, which the lease rules judge. */
    if (ln->kind == RT_KIND_ELECTION)
      rt_proclaim(lock, "leader", 6, NULL, NULL);
    uint64_t hold;
    /* Mostly short holds; now and then one that outstays its lease, so
     * that leases also run out under live holders. */
    if (next_rand(&w->rnd) % 1000 < 7)
      hold = (uint64_t)ln->ttl_ms + 100 + next_rand(&w->rnd) % 300;
    else
      hold = next_rand(&w->rnd) % 31;
    uv_timer_start(&ln->timer, hold_done_cb, hold, 0);
    return;
  }
  logf_fd(w->fd, "F %" PRId64 " %s %d %" PRIu64, now, ln->id, status, rc);
  ln->lock = NULL;
  lane_later(ln, (int64_t)(next_rand(&w->rnd) % 20));
}

/* With --mixed each resource has one kind for the whole run (the library
 * refuses another kind on a resource in use): r%4 == 0 a mutex, 1 a
 * read-write lock (70% shared requests), 2 a semaphore of MIXED_PERMITS
 * permits (requests take 1 to all of them), 3 an election. Without it,
 * mutexes only. */
#define MIXED_PERMITS 3u
enum { RK_MUTEX, RK_RW, RK_SEM, RK_ELECTION };
static int res_kind(int r) { return P.mixed ? r % 4 : RK_MUTEX; }

static rt_request_t mixed_request(int r, uint64_t *rnd) {
  rt_request_t req;
  memset(&req, 0, sizeof(req));
  switch (res_kind(r)) {
  case RK_RW:
    req.kind = next_rand(rnd) % 10 < 7 ? RT_KIND_SHARED : RT_KIND_EXCLUSIVE;
    break;
  case RK_SEM:
    req.kind = RT_KIND_SEMAPHORE;
    req.of = MIXED_PERMITS;
    req.permits = 1 + (uint32_t)(next_rand(rnd) % MIXED_PERMITS);
    break;
  case RK_ELECTION:
    req.kind = RT_KIND_ELECTION;
    req.value = "candidate";
    req.value_len = strlen(req.value);
    break;
  default:
    break;
  }
  return req;
}

static void lane_start(lane *ln) {
  worker *w = ln->w;
  if (w->stopping)
    return;
  int r = (int)(next_rand(&w->rnd) % (uint64_t)P.resources);
  char name[16];
  res_name(r, name, sizeof(name));
  int64_t timeout = 200 + (int64_t)(next_rand(&w->rnd) % 3800);
  unsigned pick = (unsigned)(next_rand(&w->rnd) % 100);
  int64_t ttl =
      pick < 35 ? P.lease_ms / 4 : (pick < 75 ? P.lease_ms : max_lease());
  uint64_t rc = w_reconnects(w);
  int64_t t = real_us(); /* before the call: a lower bound of the enqueue */
  rt_request_t req = mixed_request(r, &w->rnd);
  rt_lock_t *lock = NULL;
  int err = rt_wait_ex(w->c, name, strlen(name), &req, ttl, timeout, wait_cb,
                       ln, &lock);
  if (err != 0) {
    logf_fd(w->fd, "Y %" PRId64 " rt_wait refused: %s", t, rt_err_name(err));
    lane_later(ln, 50);
    return;
  }
  rt_lock_on_lost(lock, lost_cb);
  ln->lock = lock;
  ln->ttl_ms = ttl;
  ln->kind = req.kind;
  ln->state = L_WAITING;
  ln->q_logged = 0;
  snprintf(ln->id, sizeof(ln->id), "%s", rt_lock_id(lock));
  logf_fd(w->fd,
          "E %" PRId64 " %d %d %s %" PRId64 " %" PRId64 " %" PRIu64 " %d %u %u",
          t, ln->idx, r, ln->id, timeout, ttl, rc, (int)req.kind, req.permits,
          req.of);
}

/* After every loop iteration: enqueue replies seen, reconnects. */
static void check_cb(uv_check_t *h) {
  worker *w = h->data;
  if (w->c == NULL)
    return;
  uint64_t rc = w_reconnects(w);
  int64_t now = real_us();
  if (rc != w->reconnects) {
    w->reconnects = rc;
    logf_fd(w->fd, "N %" PRId64 " %" PRIu64, now, rc);
  }
  for (int i = 0; i < P.lanes; i++) {
    lane *ln = &w->lanes[i];
    if (ln->state == L_WAITING && !ln->q_logged && ln->lock != NULL &&
        rt_lock_position(ln->lock) > 0) {
      ln->q_logged = 1;
      logf_fd(w->fd, "Q %" PRId64 " %s %zu", now, ln->id,
              rt_lock_position(ln->lock));
    }
  }
}

static void handle_closed(uv_handle_t *h) { (void)h; }

static void close_cb(rt_client_t *c, void *data) {
  worker *w = data;
  rt_stats_t st;
  rt_client_stats(c, &st);
  logf_fd(w->fd, "X %" PRId64 " %" PRIu64 " %" PRIu64, real_us(), st.grants,
          st.reconnects);
  w->c = NULL;
  for (int i = 0; i < P.lanes; i++)
    uv_close((uv_handle_t *)&w->lanes[i].timer, handle_closed);
  uv_close((uv_handle_t *)&w->sigterm, handle_closed);
  uv_close((uv_handle_t *)&w->check, handle_closed);
}

static void worker_stop(worker *w) {
  if (w->stopping)
    return;
  w->stopping = 1;
  for (int i = 0; i < P.lanes; i++)
    uv_timer_stop(&w->lanes[i].timer);
  logf_fd(w->fd, "C %" PRId64, real_us());
  rt_client_close(w->c, close_cb, w);
}

static void sigterm_cb(uv_signal_t *h, int signum) {
  (void)signum;
  worker_stop(h->data);
}

static void connect_cb(rt_client_t *c, int status, void *data) {
  worker *w = data;
  (void)c;
  if (status != 0) {
    logf_fd(w->fd, "U %" PRId64 " %d", real_us(), status);
    if (!w->stopping) { /* else: closed while connecting, a normal stop */
      w->exit_code = 3;
      worker_stop(w);
    }
    return;
  }
  logf_fd(w->fd, "O %" PRId64, real_us());
  for (int i = 0; i < P.lanes; i++)
    uv_timer_start(&w->lanes[i].timer, lane_next_cb, next_rand(&w->rnd) % 20,
                   0);
}

/* --cluster: "redis://127.0.0.1:p1,127.0.0.1:p2,..." from P.seeds. */
static void cluster_seeds_url(char *buf, size_t cap) {
  size_t n = (size_t)snprintf(buf, cap, "redis://");
  const char *p = P.seeds;
  while (*p && n < cap) {
    size_t len = strcspn(p, ",");
    n += (size_t)snprintf(buf + n, cap - n, "%s127.0.0.1:%.*s",
                          p == P.seeds ? "" : ",", (int)len, p);
    p += len + (p[len] == ',');
  }
}

/* --sentinel: "redis-sentinel://127.0.0.1:s1,...#rtmaster" from P.seeds
 * (the master name rts_sentinels_start gives by default). */
static void sentinel_seeds_url(char *buf, size_t cap) {
  char seeds[200];
  cluster_seeds_url(seeds, sizeof(seeds));
  snprintf(buf, cap, "redis-sentinel://%s#rtmaster",
           seeds + strlen("redis://"));
}

/* A worker process: started by the driver as "redturn_fault --worker slot
 * gen idfd port <the driver's options>", with SIGTERM blocked. It writes
 * its client id to idfd, then runs until SIGTERM. */
static int worker_main(int slot, int gen, int idfd) {
  static worker w; /* one per process */
  char path[512];
  snprintf(path, sizeof(path), "%s/w%d-%d.log", P.dir, slot, gen);
  memset(&w, 0, sizeof(w));
  w.fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_TRUNC | O_CLOEXEC, 0644);
  if (w.fd < 0)
    return 4;
  w.slot = slot;
  w.gen = gen;
  w.rnd = (P.seed ^ ((uint64_t)getpid() << 20) ^ (uint64_t)real_us()) | 1;
  if (judge_store_open() != 0) {
    logf_fd(w.fd, "U %" PRId64 " %d", real_us(), RT_EINVAL);
    return 4;
  }
  if (uv_loop_init(&w.loop) != 0)
    return 4;
  for (int i = 0; i < P.lanes; i++) {
    w.lanes[i].w = &w;
    w.lanes[i].idx = i;
    uv_timer_init(&w.loop, &w.lanes[i].timer);
    w.lanes[i].timer.data = &w.lanes[i];
  }
  uv_signal_init(&w.loop, &w.sigterm);
  w.sigterm.data = &w;
  uv_signal_start(&w.sigterm, sigterm_cb, SIGTERM);
  /* Blocked since the fork (and kept over the exec): a SIGTERM that came
   * meanwhile is delivered to the handler now. */
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  sigprocmask(SIG_UNBLOCK, &term, NULL);
  uv_check_init(&w.loop, &w.check);
  w.check.data = &w;
  uv_check_start(&w.check, check_cb);

  rt_options_t o;
  rt_options_init(&o);
  o.host = "127.0.0.1";
  o.port = P.port;
  o.prefix = PREFIX;
  o.default_ttl_ms = P.lease_ms;
  o.connect_timeout_ms = 2000;
  o.command_timeout_ms = P.cmd_timeout_ms;
  o.allow_eviction = P.evict;
  char url[256];
  if (P.cluster) {
    cluster_seeds_url(url, sizeof(url));
    o.url = url;
  } else if (P.sentinel) {
    sentinel_seeds_url(url, sizeof(url));
    o.url = url;
  }
  o.wait_replicas = P.wait_replicas;
  if (P.wait_replicas > 0) /* WAIT must end before the command deadline */
    o.wait_replicas_timeout_ms = P.cmd_timeout_ms / 2;
  if (P.tls && tls_worker_options(&o) != 0) {
    logf_fd(w.fd, "U %" PRId64 " %d", real_us(), RT_EINVAL);
    return 4;
  }
  int err = rt_client_open(&w.loop, &o, connect_cb, &w, &w.c);
  if (err != 0) {
    logf_fd(w.fd, "U %" PRId64 " %d", real_us(), err);
    return 3;
  }
  logf_fd(w.fd, "I %" PRId64 " %d %d %d %s", real_us(), slot, gen,
          (int)getpid(), rt_client_id(w.c));
  char line[40];
  int n = snprintf(line, sizeof(line), "%s\n", rt_client_id(w.c));
  (void)write_all(idfd, line, (size_t)n);
  close(idfd);

  uv_run(&w.loop, UV_RUN_DEFAULT);
  int rc = uv_loop_close(&w.loop);
  if (rc != 0) {
    logf_fd(w.fd, "Y %" PRId64 " uv_loop_close: %s", real_us(),
            uv_strerror(rc));
    if (w.exit_code == 0)
      w.exit_code = 5;
  }
  close(w.fd);
  return w.exit_code;
}

/* ======================================================================= */
/* Driver                                                                    */
/* ======================================================================= */

typedef struct slot_t {
  pid_t pid; /* 0: not running */
  int gen;
  int idfd; /* read end of the id pipe while the id is not known */
  char cid[33];
  int killed;         /* we sent SIGKILL to this pid */
  int64_t restart_at; /* mono ms at which to start it again */
} slot_t;

/* The network of one worker slot: its proxy (kept over the slot's
 * generations) and the fault in force, if any. */
enum { NF_NONE = 0, NF_DELAY, NF_HOLD, NF_PARTITION };
static const char *const nf_name[] = {"none", "delay", "hold", "partition"};

#define MAX_HELD_CONNS 16

typedef struct net_t {
  rtt_proxy *p;
  int kind;
  int64_t end_at; /* mono ms */
  int nconns;     /* NF_HOLD: the connections held */
  int conns[MAX_HELD_CONNS];
} net_t;

static slot_t slots[MAX_WORKERS];
static net_t nets[MAX_WORKERS];
static int dlog = -1;
static uint64_t drnd;
static rts_server redis; /* the server under test */
static rts_cluster cl;   /* --cluster: the cluster under test */
static long driver_violations;
static int stopping_phase;
static char self_exe[1024];

static void dlogf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void dlogf(const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  logf_fd(dlog, "%s", buf);
}

static void violation(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
static void violation(const char *fmt, ...) {
  char buf[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  driver_violations++;
  dlogf("V %" PRId64 " %s", real_us(), buf);
  fprintf(stderr, "fault: VIOLATION: %s\n", buf);
}

static void set_cloexec(int fd) {
  int fl = fcntl(fd, F_GETFD);
  if (fl >= 0)
    fcntl(fd, F_SETFD, fl | FD_CLOEXEC);
}

static redisContext *admin_at(int port) {
  struct timeval tv = {0, 500000};
  redisContext *rc = redisConnectWithTimeout("127.0.0.1", port, tv);
  if (rc == NULL)
    return NULL;
  if (rc->err) {
    redisFree(rc);
    return NULL;
  }
  set_cloexec(rc->fd);
  struct timeval ctv = {2, 0};
  redisSetTimeout(rc, ctv);
  return rc;
}

static redisContext *admin(void) { return admin_at(P.port); }

static char redis_dir[512];

/* --cluster: 3 masters, each with a replica; P.port is the first master's
 * (the driver's own connections start there), P.seeds the masters'. */
static int cluster_start(void) {
  char err[1600];
  if (rts_cluster_start(&cl, 3, 1, 0, err, sizeof(err)) != 0) {
    fprintf(stderr, "fault: %s\n", err);
    return -1;
  }
  P.port = cl.node[0].server.port;
  size_t n = 0;
  for (int i = 0; i < cl.nmasters; i++)
    n += (size_t)snprintf(P.seeds + n, sizeof(P.seeds) - n, "%s%d",
                          i ? "," : "", cl.node[i].server.port);
  return 0;
}

/* Start the server (10 s at most until it answers and is done loading);
 * everything the child does between fork and exec is async-signal-safe
 * (tools/rtserver.h), as this process has the proxies' threads. */
static int redis_start(void) {
  const char *args[10 + RTT_TLS_NARGS] = {"--appendonly",
                                          P.persist ? "yes" : "no",
                                          "--appendfsync",
                                          "everysec",
                                          "--maxmemory",
                                          P.evict ? "4mb" : "512mb",
                                          "--maxmemory-policy",
                                          P.evict ? "allkeys-lru"
                                                  : "noeviction",
                                          "--notify-keyspace-events",
                                          P.evict ? "Ee" : ""};
  char tls_port[16];
  if (P.tls && tls_server_args(args + 10, tls_port, sizeof(tls_port)) != 0)
    return -1;
  rts_options o;
  char err[1600];
  memset(&o, 0, sizeof(o));
  o.dir = redis_dir;
  o.extra = args;
  if (rts_start(&redis, &o, err, sizeof(err)) != 0) {
    fprintf(stderr, "fault: %s\n", err);
    return -1;
  }
  P.port = redis.port;
  return 0;
}

/* The same server again: its port, directory (AOF) and arguments. */
static int redis_start_again(void) {
  if (rts_respawn(&redis) != 0)
    return -1;
  return rts_wait_ready(&redis, 10000) == 1 ? 0 : -1;
}

/* The port of Redis the workers use: its TLS port with --tls. */
static int redis_client_port(void) { return P.tls ? P.tls_port : P.port; }

/* The port worker s connects to: its proxy, or Redis itself. */
static int worker_port(int s) {
  return nets[s].p != NULL ? rtt_proxy_port(nets[s].p) : redis_client_port();
}

static void worker_spawn(int s) {
  slot_t *sl = &slots[s];
  int fds[2];
  if (pipe(fds) != 0) {
    sl->restart_at = mono_ms() + 200;
    return;
  }
  set_cloexec(fds[0]);
  set_cloexec(fds[1]);
  sl->gen++;
  /* The worker's command line: the driver's options in worker mode. */
  char a_slot[16], a_gen[16], a_fd[16], a_port[16], a_lanes[16], a_res[16],
      a_lease[24], a_seed[24], a_tmo[24];
  snprintf(a_slot, sizeof(a_slot), "%d", s);
  snprintf(a_gen, sizeof(a_gen), "%d", sl->gen);
  snprintf(a_fd, sizeof(a_fd), "%d", fds[1]);
  snprintf(a_port, sizeof(a_port), "%d", worker_port(s));
  snprintf(a_lanes, sizeof(a_lanes), "%d", P.lanes);
  snprintf(a_res, sizeof(a_res), "%d", P.resources);
  snprintf(a_lease, sizeof(a_lease), "%" PRId64, P.lease_ms);
  snprintf(a_seed, sizeof(a_seed), "%" PRIu64, P.seed);
  snprintf(a_tmo, sizeof(a_tmo), "%" PRId64, P.cmd_timeout_ms);
  const char *argv[32] = {
      self_exe,      "--worker",      a_slot,    a_gen,     a_fd,
      a_port,        "--dir",         P.dir,     "--lanes", a_lanes,
      "--resources", a_res,           "--lease", a_lease,   "--seed",
      a_seed,        "--cmd-timeout", a_tmo};
  /* The flags last, those that are set. */
  int argc = 18;
  if (P.slow)
    argv[argc++] = "--slow";
  if (P.evict)
    argv[argc++] = "--evict";
  if (P.tls)
    argv[argc++] = "--tls";
  if (P.mixed)
    argv[argc++] = "--mixed";
  if (judge_on)
    argv[argc++] = "--judge";
  if (P.cluster || P.sentinel) {
    argv[argc++] = P.cluster ? "--cluster" : "--sentinel";
    argv[argc++] = "--seeds";
    argv[argc++] = P.seeds;
  }
  char a_wait[16];
  if (P.wait_replicas > 0) {
    snprintf(a_wait, sizeof(a_wait), "%d", P.wait_replicas);
    argv[argc++] = "--wait-replicas";
    argv[argc++] = a_wait;
  }
  argv[argc] = NULL;
  /* The child keeps SIGTERM blocked (over the exec) until its handler is
   * installed. */
  sigset_t term, old;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  sigprocmask(SIG_BLOCK, &term, &old);
  pid_t pid = fork();
  if (pid == 0) {
    die_with_parent();
    fcntl(fds[1], F_SETFD, 0); /* the id pipe survives the exec */
    execv(self_exe, (char *const *)argv);
    _exit(127);
  }
  sigprocmask(SIG_SETMASK, &old, NULL);
  close(fds[1]);
  if (pid < 0) {
    close(fds[0]);
    sl->restart_at = mono_ms() + 200;
    return;
  }
  fcntl(fds[0], F_SETFL, O_NONBLOCK);
  sl->pid = pid;
  sl->idfd = fds[0];
  sl->cid[0] = '\0';
  sl->killed = 0;
  sl->restart_at = 0;
  dlogf("W %" PRId64 " %d %d %d", real_us(), s, sl->gen, (int)pid);
}

static void read_ids(void) {
  for (int s = 0; s < P.workers; s++) {
    slot_t *sl = &slots[s];
    if (sl->idfd < 0)
      continue;
    char buf[64];
    ssize_t n = read(sl->idfd, buf, sizeof(buf) - 1);
    if (n >= 32) {
      memcpy(sl->cid, buf, 32);
      sl->cid[32] = '\0';
    }
    if (n > 0 || (n == 0) || (n < 0 && errno != EAGAIN && errno != EINTR)) {
      close(sl->idfd);
      sl->idfd = -1;
    }
  }
}

/* ---- network faults ----------------------------------------------------- */

enum {
  FK_KILL_HOLDER = 0,
  FK_KILL_WAITER,
  FK_KILL_RANDOM,
  FK_CONN_KILL,
  FK_PAUSE,
  FK_NET_DELAY,
  FK_NET_HOLD,
  FK_NET_PARTITION,
  FK_NET_CUT,
  FK_DEL_Q,
  FK_DEL_M,
  FK_DEL_ALL,
  FK_FLUSHALL,
  FK_DEL_H,
  FK_DEL_D,
  FK_COUNT
};
static const char *const fk_name[FK_COUNT] = {
    "kill-holder", "kill-waiter", "kill-random",   "client-kill", "pause",
    "net-delay",   "net-hold",    "net-partition", "net-cut",     "del-q",
    "del-m",       "del-all",     "flushall",      "del-h",       "del-d"};
/* How often each kind is picked, in percent (after every kind was injected
 * once: see inject_fault). */
static const int fk_weight[FK_COUNT] = {16, 12, 5, 12, 4, 10, 9, 5,
                                        8,  6,  5, 4,  1, 2,  1};
/* --keyloss: key loss of each key alone, next to crashed holders (whose
 * leases run on) so that a lost key that freed permits early shows. */
static const int fk_weight_keyloss[FK_COUNT] = {25, 3,  0,  3, 0, 0,  0, 0,
                                                0,  10, 10, 4, 1, 14, 30};
static long fk_done[FK_COUNT];

/* The open connections of s's proxy (at most max). */
static int open_conns(net_t *n, int *out, int max) {
  int count = rtt_proxy_conn_count(n->p), k = 0;
  for (int i = 0; i < count && k < max; i++)
    if (rtt_proxy_is_open(n->p, i))
      out[k++] = i;
  return k;
}

/* End the network fault of slot s: release (deliver what was held, late)
 * or, when its worker died, cut (drop it: a dead host's bytes do not
 * arrive later, and Redis must see its connections close). */
static void net_end(int s, int cut) {
  net_t *n = &nets[s];
  if (n->p == NULL || n->kind == NF_NONE)
    return;
  uint64_t held = rtt_proxy_held(n->p, RTT_ALL, RTT_BOTH);
  if (cut) {
    rtt_proxy_reset(n->p);
    rtt_proxy_cut(n->p, RTT_ALL);
  } else if (n->kind == NF_HOLD) {
    for (int i = 0; i < n->nconns; i++) {
      rtt_proxy_set(n->p, n->conns[i], RTT_BOTH, RTT_PASS, 0);
      rtt_proxy_release(n->p, n->conns[i], RTT_BOTH);
    }
  } else {
    rtt_proxy_set(n->p, RTT_ALL, RTT_BOTH, RTT_PASS, 0);
    rtt_proxy_release(n->p, RTT_ALL, RTT_BOTH);
  }
  dlogf("z %" PRId64 " %d %d %s %s %" PRIu64, real_us(), s, slots[s].gen,
        nf_name[n->kind], cut ? "cut" : "release", held);
  n->kind = NF_NONE;
  n->nconns = 0;
}

/* A slot whose worker runs, is connected and has no network fault. */
static int net_pick(void) {
  int s = (int)(next_rand(&drnd) % (uint64_t)P.workers);
  for (int k = 0; k < P.workers; k++, s = (s + 1) % P.workers) {
    if (nets[s].p != NULL && nets[s].kind == NF_NONE && slots[s].pid > 0 &&
        !slots[s].killed && slots[s].cid[0])
      return s;
  }
  return -1;
}

static int net_fault(int kind) {
  int s = net_pick();
  if (s < 0)
    return 0;
  net_t *n = &nets[s];
  int64_t t = real_us();
  if (kind == FK_NET_DELAY) {
    int64_t ms = 50 + (int64_t)(next_rand(&drnd) % 251);
    int64_t dur = 1000 + (int64_t)(next_rand(&drnd) % 2000);
    rtt_proxy_set(n->p, RTT_ALL, RTT_BOTH, RTT_DELAY, ms);
    n->kind = NF_DELAY;
    n->end_at = mono_ms() + dur;
    dlogf("Z %" PRId64 " %d %d delay %" PRId64 " %" PRId64, t, s, slots[s].gen,
          ms, dur);
  } else if (kind == FK_NET_HOLD) {
    /* The open connections only: the reconnect goes through. */
    n->nconns = open_conns(n, n->conns, MAX_HELD_CONNS);
    if (n->nconns == 0)
      return 0;
    for (int i = 0; i < n->nconns; i++)
      rtt_proxy_set(n->p, n->conns[i], RTT_BOTH, RTT_HOLD, 0);
    int64_t dur = P.cmd_timeout_ms + 300 + (int64_t)(next_rand(&drnd) % 1200);
    n->kind = NF_HOLD;
    n->end_at = mono_ms() + dur;
    dlogf("Z %" PRId64 " %d %d hold %" PRId64 " %d", t, s, slots[s].gen, dur,
          n->nconns);
  } else if (kind == FK_NET_PARTITION) {
    rtt_proxy_set(n->p, RTT_ALL, RTT_BOTH, RTT_HOLD, 0);
    int64_t dur = P.cmd_timeout_ms + 400 + (int64_t)(next_rand(&drnd) % 1300);
    n->kind = NF_PARTITION;
    n->end_at = mono_ms() + dur;
    dlogf("Z %" PRId64 " %d %d partition %" PRId64, t, s, slots[s].gen, dur);
  } else {
    int open[MAX_HELD_CONNS];
    int k = open_conns(n, open, MAX_HELD_CONNS);
    if (k == 0)
      return 0;
    int all = next_rand(&drnd) % 2;
    if (all)
      rtt_proxy_cut(n->p, RTT_ALL);
    else
      rtt_proxy_cut(n->p, open[next_rand(&drnd) % (uint64_t)k]);
    dlogf("Z %" PRId64 " %d %d cut %d", t, s, slots[s].gen, all ? k : 1);
  }
  return 1;
}

static void net_tick(void) {
  int64_t now = mono_ms();
  for (int s = 0; s < P.workers; s++)
    if (nets[s].kind != NF_NONE && now >= nets[s].end_at)
      net_end(s, 0);
}

/* ---- the pattern observer -------------------------------------------------- */

static redisContext *obs;
static long obs_messages, obs_subscribes;
static long evicted_lock_keys; /* eviction run: keys of the prefix evicted */
static int64_t obs_retry_at;

static void observer_open(void) {
  if (obs != NULL || mono_ms() < obs_retry_at)
    return;
  obs_retry_at = mono_ms() + 200;
  redisContext *rc = admin();
  if (rc == NULL)
    return;
  redisReply *r = redisCommand(rc, "PSUBSCRIBE %s:*", PREFIX);
  if (r == NULL || r->type != REDIS_REPLY_ARRAY) {
    if (r != NULL)
      freeReplyObject(r);
    redisFree(rc);
    return;
  }
  freeReplyObject(r);
  if (P.evict) {
    /* The eviction run also counts the lock keys Redis evicts. */
    r = redisCommand(rc, "PSUBSCRIBE __keyevent@*__:evicted");
    if (r != NULL)
      freeReplyObject(r);
  }
  obs = rc;
  obs_subscribes++;
  dlogf("J %" PRId64 " psubscribe %s:*", real_us(), PREFIX);
}

/* Read whatever the observer got, without blocking. */
static void observer_drain(void) {
  if (obs == NULL) {
    observer_open();
    return;
  }
  for (;;) {
    struct pollfd pfd = {obs->fd, POLLIN, 0};
    if (poll(&pfd, 1, 0) <= 0)
      break;
    if (redisBufferRead(obs) != REDIS_OK) {
      redisFree(obs); /* the server restarted: subscribe again */
      obs = NULL;
      return;
    }
    void *reply = NULL;
    while (redisGetReplyFromReader(obs, &reply) == REDIS_OK && reply != NULL) {
      redisReply *r = reply;
      if (r->type == REDIS_REPLY_ARRAY && r->elements == 4 &&
          r->element[0]->type == REDIS_REPLY_STRING &&
          strcmp(r->element[0]->str, "pmessage") == 0 &&
          r->element[1]->type == REDIS_REPLY_STRING &&
          r->element[3]->type == REDIS_REPLY_STRING) {
        if (strncmp(r->element[1]->str, "__keyevent", 10) != 0)
          obs_messages++;
        else if (strncmp(r->element[3]->str, PREFIX ":", sizeof(PREFIX)) == 0)
          evicted_lock_keys++;
      }
      freeReplyObject(r);
      reply = NULL;
    }
  }
}

/* ---- killing ------------------------------------------------------------- */

static long n_connect_fail;

/* Collect exited workers; schedule restarts. */
static void reap_workers(void) {
  for (int s = 0; s < P.workers; s++) {
    slot_t *sl = &slots[s];
    int st;
    if (sl->pid <= 0 || waitpid(sl->pid, &st, WNOHANG) != sl->pid)
      continue;
    int64_t now = real_us();
    if (WIFSIGNALED(st)) {
      int sig = WTERMSIG(st);
      dlogf("D %" PRId64 " %d %d %d signal %d %s", now, s, sl->gen,
            (int)sl->pid, sig,
            sl->killed && sig == SIGKILL ? "expected" : "unexpected");
      if (!(sl->killed && sig == SIGKILL))
        violation("worker %d.%d (pid %d) died of signal %d", s, sl->gen,
                  (int)sl->pid, sig);
    } else {
      int code = WEXITSTATUS(st);
      dlogf("D %" PRId64 " %d %d %d exit %d %s", now, s, sl->gen, (int)sl->pid,
            code, code == 0 && stopping_phase ? "expected" : "unexpected");
      if (code == 3 && !stopping_phase)
        n_connect_fail++; /* first connect failed (server restarting) */
      else if (code != 0 || !stopping_phase)
        violation("worker %d.%d (pid %d) exited with code %d%s", s, sl->gen,
                  (int)sl->pid, code,
                  code == 23 ? " (LeakSanitizer found leaks)" : "");
    }
    net_end(s, 1);
    if (sl->idfd >= 0) {
      close(sl->idfd);
      sl->idfd = -1;
    }
    sl->pid = 0;
    if (!stopping_phase)
      sl->restart_at = mono_ms() + 50 + (int64_t)(next_rand(&drnd) % 250);
  }
}

static int slot_of_client(const char *cid, size_t len) {
  for (int s = 0; s < P.workers; s++)
    if (slots[s].pid > 0 && len >= 32 && slots[s].cid[0] &&
        memcmp(slots[s].cid, cid, 32) == 0)
      return s;
  return -1;
}

/* ---- Redis Cluster (--cluster) ----------------------------------------- */

/* The slot of resource name's keys (they share the hash tag {name}), asked
 * of a running node; -1 on error. */
static int cluster_res_slot(const char *name) {
  int slot = -1;
  for (int i = 0; i < cl.nnodes && slot < 0; i++) {
    if (cl.node[i].server.pid <= 0)
      continue;
    redisReply *r = rts_command(cl.node[i].server.port,
                                "CLUSTER KEYSLOT %s:{%s}:h", PREFIX, name);
    if (r != NULL && r->type == REDIS_REPLY_INTEGER)
      slot = (int)r->integer;
    if (r != NULL)
      freeReplyObject(r);
  }
  return slot;
}

/* The index in cl.node of the node serving slot, as a running node sees
 * it; -1 if none answers. */
static int cluster_owner(int slot) {
  for (int i = 0; i < cl.nnodes; i++) {
    if (cl.node[i].server.pid <= 0)
      continue;
    int owner = rts_cluster_slot_owner(&cl, i, slot);
    if (owner >= 0)
      return owner;
  }
  return -1;
}

/* A connection to the server holding resource name's keys: the node
 * serving its slot in a cluster, the server otherwise. */
static redisContext *admin_for_res(const char *name) {
  if (!P.cluster)
    return admin();
  int owner = cluster_owner(cluster_res_slot(name));
  return owner < 0 ? NULL : admin_at(cl.node[owner].server.port);
}

/* A random running node's port (the server's without --cluster). */
static int random_node_port(void) {
  if (!P.cluster)
    return P.port;
  int i = (int)(next_rand(&drnd) % (uint64_t)cl.nnodes);
  for (int k = 0; k < cl.nnodes; k++, i = (i + 1) % cl.nnodes)
    if (cl.node[i].server.pid > 0)
      return cl.node[i].server.port;
  return P.port;
}

static long n_kills, n_kill_holder, n_kill_waiter, n_conn_kills, n_pauses;

/* SIGKILL the worker of slot s; what says why (and what it held). */
static int kill_slot(int s, const char *what) {
  slot_t *sl = &slots[s];
  if (sl->pid <= 0 || sl->killed)
    return 0;
  dlogf("K %" PRId64 " %d %d %d %s", real_us(), s, sl->gen, (int)sl->pid, what);
  kill(sl->pid, SIGKILL);
  sl->killed = 1;
  n_kills++;
  /* A dead host's connections close: held or delayed bytes never arrive. */
  net_end(s, 1);
  return 1;
}

/* Kill the process holding mutex r (name): the request in the record h,
 * "<fence>:<deadline>:<grant>:<id>". 1 if one was killed. */
static int kill_mutex_holder(redisContext *rc, int r, const char *name) {
  char what[200];
  int done = 0;
  redisReply *h = redisCommand(rc, "GET %s:{%s}:h", PREFIX, name);
  if (h != NULL && h->type == REDIS_REPLY_STRING) {
    /* Three ':' before the id; the id itself contains one. */
    const char *p = h->str, *end = h->str + h->len;
    int colons = 0;
    while (p < end && colons < 3)
      if (*p++ == ':')
        colons++;
    uint64_t fence = 0;
    long long deadline = 0, grant = 0;
    if (colons == 3 && sscanf(h->str, "%" SCNu64 ":%lld:%lld:", &fence,
                              &deadline, &grant) == 3) {
      int s = slot_of_client(p, (size_t)(end - p));
      if (s >= 0 && !slots[s].killed) {
        snprintf(what, sizeof(what), "holder %d %.*s %" PRIu64 " %lld %lld", r,
                 (int)(end - p), p, fence, deadline, grant);
        done = kill_slot(s, what);
      }
    }
  }
  if (h != NULL)
    freeReplyObject(h);
  return done;
}

/* Kill the process of one random holder of the multi-holder resource r
 * (name): the hash h maps each holder id to "<fence>:<granted>:<permits>
 * [:<label>]" (its other fields are one byte long), the zset D to its
 * deadline. Logged as a mutex holder's record. 1 if one was killed. */
static int kill_multi_holder(redisContext *rc, int r, const char *name,
                             int latest) {
  char what[200];
  int done = 0;
  redisReply *h = redisCommand(rc, "HGETALL %s:{%s}:h", PREFIX, name);
  if (h == NULL || h->type != REDIS_REPLY_ARRAY || h->elements < 2) {
    if (h != NULL)
      freeReplyObject(h);
    return 0;
  }
  size_t holders = 0;
  for (size_t i = 0; i + 1 < h->elements; i += 2)
    holders += h->element[i]->len > 1;
  size_t pick = holders ? (size_t)(next_rand(&drnd) % holders) : 0;
  /* latest: the holder whose lease ends last (the longest left to run). */
  redisReply *last =
      latest ? redisCommand(rc, "ZRANGE %s:{%s}:D -1 -1", PREFIX, name) : NULL;
  int want_last =
      last != NULL && last->type == REDIS_REPLY_ARRAY && last->elements == 1;
  for (size_t i = 0; i + 1 < h->elements && holders; i += 2) {
    const redisReply *id = h->element[i], *rec = h->element[i + 1];
    if (id->len <= 1)
      continue;
    if (want_last ? id->len != last->element[0]->len ||
                        memcmp(id->str, last->element[0]->str, id->len) != 0
                  : pick-- > 0)
      continue;
    uint64_t fence = 0;
    long long grant = 0;
    redisReply *d =
        redisCommand(rc, "ZSCORE %s:{%s}:D %b", PREFIX, name, id->str, id->len);
    long long deadline =
        d != NULL && d->type == REDIS_REPLY_STRING ? atoll(d->str) : 0;
    int s = slot_of_client(id->str, id->len);
    if (deadline > 0 && s >= 0 && !slots[s].killed &&
        sscanf(rec->str, "%" SCNu64 ":%lld:", &fence, &grant) == 2) {
      snprintf(what, sizeof(what), "holder %d %.*s %" PRIu64 " %lld %lld", r,
               (int)id->len, id->str, fence, deadline, grant);
      done = kill_slot(s, what);
    }
    if (d != NULL)
      freeReplyObject(d);
    break;
  }
  if (last != NULL)
    freeReplyObject(last);
  freeReplyObject(h);
  return done;
}

static int kill_holder(redisContext *rc, int r, const char *name) {
  return res_kind(r) == RK_MUTEX ? kill_mutex_holder(rc, r, name)
                                 : kill_multi_holder(rc, r, name, 0);
}

/* Kill the process of a random live waiter of resource r (name): the
 * members of m, in q order. 1 if one was killed. */
static int kill_waiter(redisContext *rc, int r, const char *name) {
  char what[200];
  int done = 0;
  /* A mutex queues in q and m, the other kinds in Q and M. */
  int multi = res_kind(r) != RK_MUTEX;
  redisReply *q = redisCommand(rc, "LRANGE %s:{%s}:%s 0 -1", PREFIX, name,
                               multi ? "Q" : "q");
  if (q != NULL && q->type == REDIS_REPLY_ARRAY && q->elements > 0) {
    /* HMGET m id... : the live ones (canceled entries stay in q). */
    size_t n = q->elements;
    const char **argv = calloc(n + 2, sizeof(char *));
    size_t *lens = calloc(n + 2, sizeof(size_t));
    char key[64];
    int kl = snprintf(key, sizeof(key), "%s:{%s}:%s", PREFIX, name,
                      multi ? "M" : "m");
    redisReply *m = NULL;
    if (argv != NULL && lens != NULL) {
      argv[0] = "HMGET";
      lens[0] = 5;
      argv[1] = key;
      lens[1] = (size_t)kl;
      for (size_t i = 0; i < n; i++) {
        argv[i + 2] = q->element[i]->str;
        lens[i + 2] = q->element[i]->len;
      }
      m = redisCommandArgv(rc, (int)n + 2, argv, lens);
    }
    if (m != NULL && m->type == REDIS_REPLY_ARRAY && m->elements == n) {
      size_t live = 0;
      for (size_t i = 0; i < n; i++)
        live += m->element[i]->type == REDIS_REPLY_STRING;
      if (live > 0) {
        size_t pick = (size_t)(next_rand(&drnd) % live);
        for (size_t i = 0; i < n; i++) {
          if (m->element[i]->type != REDIS_REPLY_STRING)
            continue;
          if (pick-- > 0)
            continue;
          int s = slot_of_client(q->element[i]->str, q->element[i]->len);
          if (s >= 0 && !slots[s].killed) {
            snprintf(what, sizeof(what), "waiter %d %s", r, q->element[i]->str);
            done = kill_slot(s, what);
          }
          break;
        }
      }
    }
    if (m != NULL)
      freeReplyObject(m);
    free(argv);
    free(lens);
  }
  if (q != NULL)
    freeReplyObject(q);
  return done;
}

/* Kill the holder (want_holder) or a waiter of a random resource. */
static int kill_in_queue(int want_holder) {
  int r = (int)(next_rand(&drnd) % (uint64_t)P.resources);
  char name[16];
  res_name(r, name, sizeof(name));
  redisContext *rc = admin_for_res(name);
  if (rc == NULL)
    return 0;
  int done = want_holder ? kill_holder(rc, r, name) : kill_waiter(rc, r, name);
  if (done && want_holder)
    n_kill_holder++;
  else if (done)
    n_kill_waiter++;
  redisFree(rc);
  return done;
}

static int kill_random(void) {
  int s = (int)(next_rand(&drnd) % (uint64_t)P.workers);
  return kill_slot(s, "random");
}

/* CLIENT KILL worker s's connection of kind (cmd or sub) on the server at
 * port, if it has one there. */
static int kill_connection_at(int port, int s, const char *kind) {
  slot_t *sl = &slots[s];
  redisContext *rc = admin_at(port);
  if (rc == NULL)
    return 0;
  char want[64];
  snprintf(want, sizeof(want), " name=redturn-%s-%s ", kind, sl->cid);
  redisReply *r = redisCommand(rc, "CLIENT LIST");
  long long id = -1;
  int done = 0;
  if (r != NULL && r->type == REDIS_REPLY_STRING) {
    const char *p = strstr(r->str, want);
    if (p != NULL) {
      /* The line starts with "id=N". */
      const char *line = p;
      while (line > r->str && line[-1] != '\n')
        line--;
      if (strncmp(line, "id=", 3) == 0)
        id = strtoll(line + 3, NULL, 10);
    }
  }
  if (r != NULL)
    freeReplyObject(r);
  if (id >= 0) {
    int64_t t = real_us();
    r = redisCommand(rc, "CLIENT KILL ID %lld", id);
    if (r != NULL && r->type == REDIS_REPLY_INTEGER && r->integer == 1) {
      dlogf("L %" PRId64 " %d %d %s %s", t, s, sl->gen, kind, sl->cid);
      n_conn_kills++;
      done = 1;
    }
    if (r != NULL)
      freeReplyObject(r);
  }
  redisFree(rc);
  return done;
}

/* CLIENT KILL one connection of a random worker; in a cluster, on the
 * first node (from a random one) where it has one of that kind. */
static int kill_connection(void) {
  int s = (int)(next_rand(&drnd) % (uint64_t)P.workers);
  if (slots[s].pid <= 0 || !slots[s].cid[0])
    return 0;
  const char *kind = next_rand(&drnd) % 2 ? "cmd" : "sub";
  if (!P.cluster)
    return kill_connection_at(P.port, s, kind);
  int i = (int)(next_rand(&drnd) % (uint64_t)cl.nnodes);
  for (int k = 0; k < cl.nnodes; k++, i = (i + 1) % cl.nnodes)
    if (cl.node[i].server.pid > 0 &&
        kill_connection_at(cl.node[i].server.port, s, kind))
      return 1;
  return 0;
}

/* CLIENT PAUSE of the server, in a cluster of a random node. */
static int pause_server(void) {
  redisContext *rc = admin_at(random_node_port());
  if (rc == NULL)
    return 0;
  int ms = 100 + (int)(next_rand(&drnd) % 300);
  int64_t t = real_us();
  redisReply *r = redisCommand(rc, "CLIENT PAUSE %d", ms);
  int done = 0;
  if (r != NULL && r->type == REDIS_REPLY_STATUS) {
    dlogf("A %" PRId64 " %d", t, ms);
    n_pauses++;
    done = 1;
  }
  if (r != NULL)
    freeReplyObject(r);
  redisFree(rc);
  return done;
}

/* ---- key loss ------------------------------------------------------------ */

/* A resource of a multi-holder kind for del-d (D only exists there): one
 * with holders right now if any (its D is what a loss could hurt). */
static int multi_res(redisContext *probe) {
  int first = -1;
  for (int i = 0; i < P.resources; i++) {
    int r = (int)((next_rand(&drnd) + (uint64_t)i) % (uint64_t)P.resources);
    if (res_kind(r) == RK_MUTEX)
      continue;
    if (first < 0)
      first = r;
    char name[16];
    res_name(r, name, sizeof(name));
    redisReply *x = probe != NULL
                        ? redisCommand(probe, "EXISTS %s:{%s}:D", PREFIX, name)
                        : NULL;
    int held = x != NULL && x->type == REDIS_REPLY_INTEGER && x->integer > 0;
    if (x != NULL)
      freeReplyObject(x);
    if (held)
      return r;
  }
  return first;
}

static int key_loss(int kind) {
  int r = kind == FK_FLUSHALL ? -1
                              : (int)(next_rand(&drnd) % (uint64_t)P.resources);
  if (kind == FK_DEL_D) {
    char first[16];
    res_name(0, first, sizeof(first));
    redisContext *probe = admin_for_res(first);
    r = multi_res(probe);
    if (probe != NULL)
      redisFree(probe);
    if (r < 0)
      return 0;
  }
  char name[16];
  res_name(r < 0 ? 0 : r, name, sizeof(name));
  redisContext *rc = admin_for_res(name);
  if (rc == NULL)
    return 0;
  const char *what = kind == FK_DEL_Q     ? "q"
                     : kind == FK_DEL_M   ? "m"
                     : kind == FK_DEL_H   ? "h"
                     : kind == FK_DEL_D   ? "d"
                     : kind == FK_DEL_ALL ? "all"
                                          : "flushall";
  /* The other kinds' queue and members are Q and M, their holders the
   * hash h, and D their deadlines. A lost h is a forced release of its
   * holders (as a mutex's); a lost D frees nothing while a lease may run
   * (lua/lib/semaphore.lua, restore_deadlines). */
  int multi = r >= 0 && res_kind(r) != RK_MUTEX;
  /* --keyloss: half the time its holder whose lease ends last crashes
   * first, so a lease runs on that only h and D know of, and then D goes:
   * any lease granted after it is shorter. */
  if (kind == FK_DEL_D && P.keyloss && next_rand(&drnd) % 2 &&
      kill_multi_holder(rc, r, name, 1))
    n_kill_holder++;
  int64_t t0 = real_us();
  redisReply *x;
  if (kind == FK_DEL_H)
    x = redisCommand(rc, "DEL %s:{%s}:h", PREFIX, name);
  else if (kind == FK_DEL_D)
    x = redisCommand(rc, "DEL %s:{%s}:D", PREFIX, name);
  else if (kind == FK_DEL_Q)
    x = redisCommand(rc, "DEL %s:{%s}:%s", PREFIX, name, multi ? "Q" : "q");
  else if (kind == FK_DEL_M)
    x = redisCommand(rc, "DEL %s:{%s}:%s", PREFIX, name, multi ? "M" : "m");
  else if (kind == FK_DEL_ALL && multi)
    x = redisCommand(rc, "DEL %s:{%s}:Q %s:{%s}:h %s:{%s}:M %s:{%s}:D", PREFIX,
                     name, PREFIX, name, PREFIX, name, PREFIX, name);
  else if (kind == FK_DEL_ALL)
    x = redisCommand(rc, "DEL %s:{%s}:q %s:{%s}:h %s:{%s}:m", PREFIX, name,
                     PREFIX, name, PREFIX, name);
  else
    x = redisCommand(rc, "FLUSHALL");
  int64_t t1 = real_us();
  int done = 0;
  if (x != NULL &&
      (x->type == REDIS_REPLY_INTEGER || x->type == REDIS_REPLY_STATUS)) {
    dlogf("X %" PRId64 " %" PRId64 " %d %s %lld", t0, t1, r, what,
          x->type == REDIS_REPLY_INTEGER ? x->integer : -1LL);
    done = 1;
  }
  if (x != NULL)
    freeReplyObject(x);
  redisFree(rc);
  return done;
}

static long n_restarts;

static int restart_server(void) {
  dlogf("B %" PRId64, real_us());
  /* SIGTERM: the server saves its AOF and exits. */
  rts_terminate(&redis);
  /* The server keeps serving for a while after SIGTERM: only now are its
   * grants over. */
  dlogf("S %" PRId64, real_us());
  if (redis_start_again() != 0) {
    violation("redis-server did not come back on port %d", P.port);
    return -1;
  }
  dlogf("H %" PRId64, real_us());
  n_restarts++;
  return 0;
}

/* ---- Redis Cluster: reshard and failover ------------------------------- */

static long n_reshards, n_failovers, n_crashes;

/* Wait up to 2 s until resource name has a holder and a live waiter, so
 * the cluster fault meets both; says which it found. */
static const char *hot_state(const char *name) {
  int64_t until = mono_ms() + 2000;
  int held = 0, waited = 0;
  while (!(held && waited) && mono_ms() < until) {
    redisContext *rc = admin_for_res(name);
    if (rc != NULL) {
      redisReply *h = redisCommand(rc, "EXISTS %s:{%s}:h", PREFIX, name);
      redisReply *m = redisCommand(rc, "HLEN %s:{%s}:m", PREFIX, name);
      held = h != NULL && h->type == REDIS_REPLY_INTEGER && h->integer > 0;
      waited = m != NULL && m->type == REDIS_REPLY_INTEGER && m->integer > 0;
      if (h != NULL)
        freeReplyObject(h);
      if (m != NULL)
        freeReplyObject(m);
      redisFree(rc);
    }
    if (!(held && waited))
      sleep_ms(5);
  }
  return held && waited ? "held+waited"
         : held         ? "held"
         : waited       ? "waited"
                        : "idle";
}

/* One command that must succeed (+OK, or any non-error reply). */
static int must(int port, const char *what, redisReply *r) {
  int ok = r != NULL && r->type != REDIS_REPLY_ERROR;
  if (!ok)
    violation("cluster %s on port %d failed: %s", what, port,
              r != NULL ? r->str : "no reply");
  if (r != NULL)
    freeReplyObject(r);
  return ok;
}

/* Move the slot of resource r0 (the hot one: every lane uses it) to
 * another master, keys and all, as redis-cli --cluster reshard does:
 * IMPORTING on the target, MIGRATING on the source, MIGRATE of each key,
 * then SETSLOT NODE everywhere. Logged "Y t cluster-reshard ..." before
 * and after. */
static int cluster_reshard(void) {
  char name[16];
  res_name(0, name, sizeof(name));
  const char *state = hot_state(name);
  int slot = cluster_res_slot(name), from = cluster_owner(slot);
  if (slot < 0 || from < 0)
    return 0;
  int to = -1;
  for (int i = 0; i < cl.nnodes && to < 0; i++)
    if (i != from && cl.node[i].server.pid > 0 && cl.node[i].master < 0)
      to = i;
  if (to < 0)
    return 0;
  int fp = cl.node[from].server.port, tp = cl.node[to].server.port;
  const char *fid = cl.node[from].id, *tid = cl.node[to].id;
  dlogf("Y %" PRId64 " cluster-reshard begin slot %d (%s, %s) from %d to %d",
        real_us(), slot, name, state, fp, tp);
  int ok =
      must(tp, "IMPORTING",
           rts_command(tp, "CLUSTER SETSLOT %d IMPORTING %s", slot, fid)) &&
      must(fp, "MIGRATING",
           rts_command(fp, "CLUSTER SETSLOT %d MIGRATING %s", slot, tid));
  long moved = 0;
  redisReply *keys =
      ok ? rts_command(fp, "CLUSTER GETKEYSINSLOT %d 100", slot) : NULL;
  for (size_t i = 0; keys != NULL && keys->type == REDIS_REPLY_ARRAY &&
                     i < keys->elements && ok;
       i++, moved++)
    ok = must(fp, "MIGRATE",
              rts_command(fp, "MIGRATE 127.0.0.1 %d %b 0 5000", tp,
                          keys->element[i]->str, keys->element[i]->len));
  if (keys != NULL)
    freeReplyObject(keys);
  /* The target first, then the source, then the other masters (the
   * masters are the first nodes until a failover, which comes later). */
  int order[RTS_MAX_MASTERS + 1], norder = 0;
  order[norder++] = to;
  order[norder++] = from;
  for (int i = 0; i < cl.nmasters; i++)
    if (i != to && i != from)
      order[norder++] = i;
  for (int k = 0; ok && k < norder; k++) {
    int port = cl.node[order[k]].server.port;
    ok = must(port, "SETSLOT NODE",
              rts_command(port, "CLUSTER SETSLOT %d NODE %s", slot, tid));
  }
  dlogf("Y %" PRId64 " cluster-reshard end slot %d: %ld keys moved, %s",
        real_us(), slot, moved, ok ? "ok" : "failed");
  n_reshards += ok;
  return ok;
}

/* CLUSTER FAILOVER on a replica of the master serving r0's slot; waits
 * (10 s at most) until the replica serves it and the cluster agrees.
 * Logged "Y t cluster-failover ..." before and after. */
static int cluster_failover(void) {
  char name[16], err[1024];
  res_name(0, name, sizeof(name));
  const char *state = hot_state(name);
  int slot = cluster_res_slot(name), owner = cluster_owner(slot), heir = -1;
  for (int i = 0; i < cl.nnodes && heir < 0 && owner >= 0; i++)
    if (i != owner && cl.node[i].server.pid > 0 &&
        rts_cluster_slot_owner(&cl, i, slot) == owner) {
      redisReply *r = rts_command(cl.node[i].server.port, "ROLE");
      if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements >= 3 &&
          strcmp(r->element[0]->str, "slave") == 0 &&
          r->element[2]->type == REDIS_REPLY_INTEGER &&
          r->element[2]->integer == cl.node[owner].server.port)
        heir = i;
      if (r != NULL)
        freeReplyObject(r);
    }
  if (heir < 0)
    return 0;
  int hp = cl.node[heir].server.port;
  dlogf("Y %" PRId64 " cluster-failover begin slot %d (%s, %s): replica %d "
        "takes over from %d",
        real_us(), slot, name, state, hp, cl.node[owner].server.port);
  int ok = must(hp, "FAILOVER", rts_command(hp, "CLUSTER FAILOVER"));
  int64_t until = mono_ms() + 10000;
  while (ok && rts_cluster_slot_owner(&cl, heir, slot) != heir &&
         mono_ms() < until)
    sleep_ms(10);
  dlogf("Y %" PRId64 " cluster-failover end: replica %d %s", real_us(), hp,
        rts_cluster_slot_owner(&cl, heir, slot) == heir ? "serves the slot"
                                                        : "did not take over");
  if (rts_cluster_wait_ok(&cl, 10000, err, sizeof(err)) != 0)
    violation("cluster not ok after the failover: %s", err);
  ok = ok && rts_cluster_slot_owner(&cl, heir, slot) == heir;
  n_failovers += ok;
  return ok;
}

/* Whether fault kind applies to this run: the network faults need the
 * proxies; FLUSHALL is one server's (a cluster run has no such fault). */
static int kind_applies(int k) {
  if (P.direct && k >= FK_NET_DELAY && k <= FK_NET_CUT)
    return 0;
  if (k == FK_DEL_D && !P.mixed)
    return 0; /* only the multi-holder kinds have D */
  return !(P.cluster && k == FK_FLUSHALL);
}

/* SIGKILL of the master serving r0's slot (a crash: writes its replica did
 * not get yet are lost with it); its replica takes over after the node
 * timeout and an election. Logged as a restart of the server (B at the
 * kill, S once reaped, H when the replica serves the slot), so the
 * checker allows for the stall as for a restart; exclusion and fencing are
 * checked across it as with AOF. The dead node stays down. */
static int cluster_crash_master(void) {
  char name[16], err[1024];
  res_name(0, name, sizeof(name));
  const char *state = hot_state(name);
  int slot = cluster_res_slot(name), owner = cluster_owner(slot);
  if (owner < 0)
    return 0;
  rts_server *victim = &cl.node[owner].server;
  dlogf("Y %" PRId64 " cluster-crash slot %d (%s, %s): kill -9 of master %d",
        real_us(), slot, name, state, victim->port);
  dlogf("B %" PRId64, real_us());
  kill(victim->pid, SIGKILL);
  waitpid(victim->pid, NULL, 0);
  victim->pid = 0;
  dlogf("S %" PRId64, real_us());
  int64_t until = mono_ms() + 20000;
  int heir = -1;
  while (heir < 0 && mono_ms() < until) {
    int o = cluster_owner(slot);
    if (o >= 0 && o != owner)
      heir = o;
    else
      sleep_ms(20);
  }
  if (heir < 0) {
    violation("no replica took over slot %d within 20 s of the kill", slot);
    return 0;
  }
  dlogf("H %" PRId64, real_us());
  dlogf("Y %" PRId64 " cluster-crash end: %d serves slot %d", real_us(),
        cl.node[heir].server.port, slot);
  if (rts_cluster_wait_ok(&cl, 10000, err, sizeof(err)) != 0)
    violation("cluster not ok after the kill of a master: %s", err);
  return 1;
}

/* ---- Sentinel (--sentinel) --------------------------------------------- */

static rts_replicated grp; /* the primary and its 2 replicas */
static rts_sentinels sen;  /* 3 Sentinels watching them */
static long n_sentinel_failovers, n_master_kills;

/* Any server of the group may become the master: its replicas' full
 * syncs then start at once, not after the default 5 s wait for more
 * replicas (which would leave wait_replicas without an acknowledgement
 * that long). */
static void sync_at_once(int port) {
  redisReply *r = rts_command(port, "CONFIG SET repl-diskless-sync-delay 0");
  if (r != NULL)
    freeReplyObject(r);
}

/* A primary with 2 replicas watched by 3 Sentinels; P.port follows the
 * master (the driver's own connections go there), P.seeds holds the
 * Sentinels' ports. */
static int sentinel_start(void) {
  char err[1600];
  if (rts_replicated_start(&grp, 2, err, sizeof(err)) != 0 ||
      rts_sentinels_start(&sen, grp.primary.port, 3, 2, NULL, err,
                          sizeof(err)) != 0) {
    fprintf(stderr, "fault: %s\n", err);
    rts_replicated_stop(&grp);
    return -1;
  }
  P.port = grp.primary.port;
  for (int i = 0; i < grp.nreplicas; i++)
    sync_at_once(grp.replicas[i].port);
  size_t n = 0;
  for (int i = 0; i < sen.n; i++)
    n += (size_t)snprintf(P.seeds + n, sizeof(P.seeds) - n, "%s%d",
                          i ? "," : "", sen.s[i].port);
  return 0;
}

/* The server of the group on port, or NULL. */
static rts_server *group_server(int port) {
  if (grp.primary.port == port)
    return &grp.primary;
  for (int i = 0; i < grp.nreplicas; i++)
    if (grp.replicas[i].port == port)
      return &grp.replicas[i];
  return NULL;
}

/* Whether the server on port says role:master. */
static int is_master(int port) {
  redisReply *r = rts_command(port, "ROLE");
  int yes = r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
            r->element[0]->type == REDIS_REPLY_STRING &&
            strcmp(r->element[0]->str, "master") == 0;
  if (r != NULL)
    freeReplyObject(r);
  return yes;
}

/* Point every other running server of the group at the new master at
 * once, as the Sentinels will (REPLICAOF, then CLIENT KILL of its normal
 * and pubsub clients, so they reconnect to the master): replicas that take
 * seconds to reattach leave wait_replicas without an acknowledgement that
 * long. */
static void point_replicas_at(int master) {
  rts_server *all[1 + RTS_MAX_REPLICAS] = {&grp.primary};
  for (int i = 0; i < grp.nreplicas; i++)
    all[1 + i] = &grp.replicas[i];
  for (int i = 0; i <= grp.nreplicas; i++) {
    if (all[i]->pid <= 0 || all[i]->port == master)
      continue;
    static const char *const cmds[] = {"REPLICAOF 127.0.0.1 %d",
                                       "CLIENT KILL TYPE normal",
                                       "CLIENT KILL TYPE pubsub"};
    for (int k = 0; k < 3; k++) {
      redisReply *r = rts_command(all[i]->port, cmds[k], master);
      if (r != NULL)
        freeReplyObject(r);
    }
  }
}

/* Wait (20 s at most) until a Sentinel names a master other than old and
 * that server says it is one; P.port follows, and the other servers
 * replicate it. 1 if so. */
static int await_new_master(int old) {
  int64_t until = mono_ms() + 20000;
  while (mono_ms() < until) {
    for (int i = 0; i < sen.n; i++) {
      int port = rts_sentinel_master_port(&sen, i);
      if (port > 0 && port != old && is_master(port)) {
        P.port = port;
        point_replicas_at(port);
        return 1;
      }
    }
    sleep_ms(20);
  }
  return 0;
}

/* How many worker subscriber connections the server on port has (-1: it
 * does not answer): after a failover, those on the old master hear its
 * replayed notices, and the new master counts them as gone. */
static int worker_subs_at(int port) {
  redisReply *r = rts_command(port, "CLIENT LIST TYPE pubsub");
  int n = -1;
  if (r != NULL && r->type == REDIS_REPLY_STRING) {
    n = 0;
    for (const char *p = r->str; (p = strstr(p, " name=redturn-sub-")); p++)
      n++;
  }
  if (r != NULL)
    freeReplyObject(r);
  return n;
}

/* SENTINEL FAILOVER while r0 is held and waited (if it gets so within
 * 2 s): the master turns replica and a replica takes over, without the
 * Sentinels' agreement that it failed. Logged as a restart (B, S at the
 * command, H once a Sentinel names the new master), so the checker
 * allows for the stall; exclusion and fencing are checked across it. */
static int sentinel_failover(void) {
  char name[16];
  res_name(0, name, sizeof(name));
  const char *state = hot_state(name);
  int old = P.port;
  dlogf("Y %" PRId64 " sentinel-failover begin (%s, %s): master %d", real_us(),
        name, state, old);
  dlogf("B %" PRId64, real_us());
  redisReply *r =
      rts_command(sen.s[0].port, "SENTINEL FAILOVER %s", sen.master_name);
  int ok = must(sen.s[0].port, "SENTINEL FAILOVER", r);
  dlogf("S %" PRId64, real_us());
  if (ok && !await_new_master(old)) {
    violation("no Sentinel failover within 20 s of SENTINEL FAILOVER");
    return 0;
  }
  dlogf("H %" PRId64, real_us());
  dlogf("Y %" PRId64 " sentinel-failover end: master %d; worker subscribers: "
        "%d on the new master, %d on the old one",
        real_us(), P.port, worker_subs_at(P.port), worker_subs_at(old));
  return ok;
}

/* The killed master comes back as a replica of the new one, without the
 * data it had (its copy of an old sync, if any, is removed first). */
static void restart_as_replica(rts_server *victim) {
  char path[RTS_PATH_CAP + 16];
  snprintf(path, sizeof(path), "%s/dump.rdb", victim->dir);
  unlink(path);
  if (rts_respawn(victim) != 0 || rts_wait_ready(victim, 10000) != 1) {
    violation("the killed master on port %d did not come back", victim->port);
    return;
  }
  sync_at_once(victim->port);
  point_replicas_at(P.port);
  dlogf("Y %" PRId64 " sentinel-crash: %d is back as a replica of %d",
        real_us(), victim->port, P.port);
}

/* kill -9 of the master while r0 is held and waited (if it gets so within
 * 2 s): writes its replicas did not get are lost with it; the Sentinels
 * fail over after down-after-milliseconds. Logged as a restart (B at the
 * kill, S once reaped, H once a Sentinel names the new master). Then the
 * killed server comes back as a replica. */
static int sentinel_kill_master(void) {
  char name[16];
  res_name(0, name, sizeof(name));
  const char *state = hot_state(name);
  rts_server *victim = group_server(P.port);
  if (victim == NULL || victim->pid <= 0)
    return 0;
  int old = P.port;
  dlogf("Y %" PRId64 " sentinel-crash (%s, %s): kill -9 of master %d",
        real_us(), name, state, old);
  dlogf("B %" PRId64, real_us());
  kill(victim->pid, SIGKILL);
  waitpid(victim->pid, NULL, 0);
  victim->pid = 0;
  dlogf("S %" PRId64, real_us());
  if (!await_new_master(old)) {
    violation("no Sentinel failover within 20 s of killing the master");
    return 0;
  }
  dlogf("H %" PRId64, real_us());
  dlogf("Y %" PRId64 " sentinel-crash end: master %d", real_us(), P.port);
  restart_as_replica(victim);
  return 1;
}

/* --sentinel: a SENTINEL FAILOVER at 30% of the run, a kill -9 of the
 * master at 60% (each once). */
static void sentinel_tick(int64_t t0) {
  static int failed_over, crashed;
  int64_t now = mono_ms(), run = (int64_t)P.seconds * 1000;
  if (!failed_over && now >= t0 + run * 30 / 100) {
    failed_over = 1;
    n_sentinel_failovers += sentinel_failover();
  }
  if (!crashed && now >= t0 + run * 60 / 100) {
    crashed = 1;
    n_master_kills += sentinel_kill_master();
  }
}

static int try_fault(int kind) {
  switch (kind) {
  case FK_KILL_HOLDER:
    return kill_in_queue(1);
  case FK_KILL_WAITER:
    return kill_in_queue(0);
  case FK_KILL_RANDOM:
    return kill_random();
  case FK_CONN_KILL:
    return kill_connection();
  case FK_PAUSE:
    return pause_server();
  case FK_NET_DELAY:
  case FK_NET_HOLD:
  case FK_NET_PARTITION:
  case FK_NET_CUT:
    return P.direct ? 0 : net_fault(kind);
  default:
    return key_loss(kind);
  }
}

/* One fault. Until every kind was injected once, the first kind not yet
 * injected is tried (so that every run, even a short one, has each kind);
 * after that, kinds by weight. A fault that finds nothing to act on (no
 * holder right now) falls back to a CLIENT KILL. */
static void inject_fault(void) {
  int kind = -1;
  for (int k = 0; k < FK_COUNT && kind < 0; k++)
    if (fk_done[k] == 0 && kind_applies(k))
      kind = k;
  if (kind < 0) {
    const int *weight = P.keyloss ? fk_weight_keyloss : fk_weight;
    int pick = (int)(next_rand(&drnd) % 100);
    for (kind = 0; kind < FK_COUNT - 1 && pick >= weight[kind]; kind++)
      pick -= weight[kind];
    if (!kind_applies(kind))
      kind = FK_CONN_KILL;
  }
  if (try_fault(kind))
    fk_done[kind]++;
  else if (kill_connection())
    fk_done[FK_CONN_KILL]++;
}

/* ---- TLS: the workers' connections ------------------------------------- */

/* With --tls, every connection of a worker (named redturn-cmd-<id> or
 * redturn-sub-<id>) must be on the TLS port: the run proves nothing about
 * TLS otherwise. Checked in CLIENT LIST (laddr is the server's end). */
static void tls_check_clients(void) {
  redisContext *rc = admin();
  if (rc == NULL)
    return;
  redisReply *r = redisCommand(rc, "CLIENT LIST");
  long on_tls = 0, other = 0;
  char laddr[40];
  snprintf(laddr, sizeof(laddr), " laddr=127.0.0.1:%d ", P.tls_port);
  if (r != NULL && r->type == REDIS_REPLY_STRING) {
    for (char *line = r->str; line != NULL && *line != '\0';) {
      char *eol = strchr(line, '\n');
      if (eol != NULL)
        *eol = '\0';
      if (strstr(line, " name=redturn-") != NULL) {
        if (strstr(line, laddr) != NULL)
          on_tls++;
        else
          other++;
      }
      line = eol != NULL ? eol + 1 : NULL;
    }
  }
  if (r != NULL)
    freeReplyObject(r);
  redisFree(rc);
  dlogf("Y %" PRId64 " tls: %ld worker connections on the TLS port, %ld "
        "elsewhere",
        real_us(), on_tls, other);
  if (on_tls == 0 || other != 0)
    violation("with --tls, %ld worker connections on the TLS port and %ld "
              "elsewhere",
              on_tls, other);
}

/* ---- the eviction run ------------------------------------------------------ */

/* With --evict the server runs with allkeys-lru and a small maxmemory, the
 * workers set allow_eviction, and the driver keeps writing filler keys
 * (outside the prefix), so Redis evicts keys all along, lock keys among
 * them. No other fault is injected. The library promises little then
 * (an evicted holder record frees a lock early): the checker holds it to
 * fences that never go backwards and waits that always end. */
static redisContext *filler;
static long long fill_n;

static void fill_tick(void) {
  static char val[4096];
  if (filler == NULL) {
    memset(val, 'x', sizeof(val));
    filler = admin();
    if (filler == NULL)
      return;
  }
  for (int i = 0; i < 4; i++)
    redisAppendCommand(filler, "SET rtfill:%lld %b", fill_n++, val,
                       sizeof(val));
  for (int i = 0; i < 4; i++) {
    void *r = NULL;
    if (redisGetReply(filler, &r) != REDIS_OK) {
      redisFree(filler);
      filler = NULL;
      return;
    }
    freeReplyObject(r);
  }
}

/* A client without allow_eviction must refuse such a server. */
static void check_refusal(void) {
  rt_options_t o;
  rt_options_init(&o);
  o.host = "127.0.0.1";
  o.port = P.port;
  o.prefix = PREFIX;
  o.connect_timeout_ms = 2000;
  rt_blocking_t *b = NULL;
  int err = rt_blocking_open(&o, &b);
  if (err == 0) {
    rt_blocking_close(b);
    violation("a client without allow_eviction accepted maxmemory-policy "
              "allkeys-lru");
  } else if (err != RT_EEVICTION) {
    violation("a client without allow_eviction failed with %s, not "
              "RT_EEVICTION",
              rt_err_name(err));
  } else {
    dlogf("Y %" PRId64 " without allow_eviction: %s", real_us(),
          rt_err_name(err));
  }
}

static long long evicted_keys(void) {
  redisContext *rc = admin();
  long long n = -1;
  if (rc == NULL)
    return n;
  redisReply *r = redisCommand(rc, "INFO stats");
  if (r != NULL && r->type == REDIS_REPLY_STRING) {
    const char *p = strstr(r->str, "evicted_keys:");
    if (p != NULL)
      n = atoll(p + 13);
  }
  if (r != NULL)
    freeReplyObject(r);
  redisFree(rc);
  return n;
}

/* ---- the end ------------------------------------------------------------- */

/* After the run, when every lease ended: every key of the prefix must
 * expire by itself (an idle resource leaves nothing behind), within the
 * longest lease plus the scripts' 10 s grace. */
static void check_keyspace_at(int port) {
  redisContext *rc = admin_at(port);
  if (rc == NULL) {
    violation("cannot connect to redis-server for the key space check");
    return;
  }
  long nkeys[4] = {0, 0, 0, 0}; /* q, h, m, other */
  long long max_pttl = 0;
  int64_t limit = max_lease() + 10000;
  if (P.cluster) {
    /* A replica (a killed master comes back as one) answers its master's
     * keys' PTTL only after READONLY, else with -MOVED. */
    redisReply *ro = redisCommand(rc, "READONLY");
    if (ro != NULL)
      freeReplyObject(ro);
  }
  char cursor[32] = "0";
  do {
    redisReply *r =
        redisCommand(rc, "SCAN %s MATCH %s:* COUNT 1000", cursor, PREFIX);
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
      violation("SCAN failed");
      if (r != NULL)
        freeReplyObject(r);
      break;
    }
    snprintf(cursor, sizeof(cursor), "%s", r->element[0]->str);
    redisReply *keys = r->element[1];
    for (size_t i = 0; i < keys->elements; i++) {
      const char *k = keys->element[i]->str;
      size_t kl = keys->element[i]->len;
      int kind = 3;
      /* q, h, m; the other kinds' Q, D (with h) and M */
      char last = kl > 2 && k[kl - 2] == ':' ? k[kl - 1] : 0;
      if (last == 'q' || last == 'Q')
        kind = 0;
      else if (last == 'h' || last == 'D')
        kind = 1;
      else if (last == 'm' || last == 'M')
        kind = 2;
      nkeys[kind]++;
      redisReply *t = redisCommand(rc, "PTTL %b", k, kl);
      long long pttl =
          t != NULL && t->type == REDIS_REPLY_INTEGER ? t->integer : -3;
      if (t != NULL)
        freeReplyObject(t);
      if (pttl > max_pttl)
        max_pttl = pttl;
      if (kind == 3)
        violation("unexpected key %.*s (PTTL %lld)", (int)kl, k, pttl);
      else if (pttl == -2)
        continue; /* expired between SCAN and PTTL */
      else if (pttl <= 0 || pttl > limit)
        violation("key %.*s left with PTTL %lld after every lease ended "
                  "(want 0 < PTTL <= %" PRId64 ")",
                  (int)kl, k, pttl, limit);
    }
    freeReplyObject(r);
  } while (strcmp(cursor, "0") != 0);
  dlogf("Y %" PRId64 " keyspace: %ld q, %ld h, %ld m (max PTTL %lld ms), "
        "%ld other",
        real_us(), nkeys[0], nkeys[1], nkeys[2], max_pttl, nkeys[3]);
  printf("key space after the run on %d: %ld q, %ld h, %ld m, all expiring by "
         "themselves (max PTTL %lld ms); %ld other keys\n",
         port, nkeys[0], nkeys[1], nkeys[2], max_pttl, nkeys[3]);
  redisFree(rc);
}

/* The key space check on the server, or on every node of the cluster
 * (replicas included: their copies must expire too). */
static void check_keyspace(void) {
  if (P.sentinel) {
    check_keyspace_at(grp.primary.port);
    for (int i = 0; i < grp.nreplicas; i++)
      check_keyspace_at(grp.replicas[i].port);
    return;
  }
  if (!P.cluster) {
    check_keyspace_at(P.port);
    return;
  }
  for (int i = 0; i < cl.nnodes; i++)
    if (cl.node[i].server.pid > 0)
      check_keyspace_at(cl.node[i].server.port);
}

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
      (P.cluster && P.sentinel) || (judge_on && (P.mixed || P.evict)))
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
  if (obs != NULL)
    redisFree(obs);
  obs = NULL;
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
  start_workers();
  run_faults();
  stop_workers();
  after_the_run();
  report_kinds();
  return check_history(&tol);
}
