/* redturn-bench: shared declarations of the benchmark's files.
 *
 *   main.c     the run: each scale point's modes, repeats and their medians
 *   options.c  the command line and the scale points
 *   pass.c     one pass: fork the workers, run them, MONITOR, memory probe
 *   output.c   the table, the targets, JSON lines and plot data
 *   (driver.h declares what these four share)
 *   worker.c   the forked worker processes (modes ping, fair, spin)
 *   server.c   redis-server start/stop, synchronous helpers (INFO, MONITOR)
 *   analyze.c  figures computed from the workers' grant records
 *
 * The workload and the figures are those of the project's benchmark
 * contract (docs/PERFORMANCE.md explains each one and how it is measured). */
#ifndef RTB_BENCH_H
#define RTB_BENCH_H

#include "redturn.h"  /* RT_SCRIPT_PATH_* */
#include "rtserver.h" /* tools/: the throwaway redis-server */
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define RTB_MAX_PROCS 64
#define RTB_ID_LEN 32 /* redturn client ids: 32 hex characters */

enum rtb_mode { RTB_PING = 0, RTB_FAIR, RTB_SPIN, RTB_NMODES };

/* What a fair request asks for (--kinds): a mutex, a read-write lock with
 * pct % shared requests (the rest exclusive), a semaphore of N permits
 * taking one each, or an election (each request a candidate; the holder
 * leads until it resigns). */
enum rtb_kind_type { RTB_MUTEX = 0, RTB_RW, RTB_SEM, RTB_ELECTION };

typedef struct rtb_kind {
  int type;       /* enum rtb_kind_type */
  unsigned param; /* RTB_RW: percent shared (0..100); RTB_SEM: permits N */
  int path;       /* rt_options_t.script_path of its clients (0: auto) */
} rtb_kind;

/* "mutex", "rw:<pct>", "sem:<N>" or "election", then "@module", "@functions" or
 * "@eval" for a forced script path, into buf (--kinds spells them so). */
const char *rtb_kind_name(const rtb_kind *k, char *buf, size_t cap);
/* rtb_kind.path of the module's native commands. */
#define RTB_PATH_MODULE RT_SCRIPT_PATH_MODULE
/* "module", "functions", "eval" or "auto": a script path's name. */
const char *rtb_path_name(int path);

/* One grant: a request from the waiter's call to its release call.
 * Times are CLOCK_REALTIME in ns, so records of different processes can be
 * set side by side. */
typedef struct rtb_rec {
  uint64_t seq;    /* request number within its process (fair: redturn's
                       seq from the request id; spin: the token's) */
  uint64_t fence;  /* fair: fencing token; spin, ping: 0 */
  int64_t t_req;   /* rt_wait() call / first SET NX sent / PING sent */
  int64_t t_grant; /* grant callback / OK reply / PONG */
  int64_t t_rel;   /* rt_signal() call / release sent; 0 if never */
  uint32_t res;    /* resource index */
  uint32_t waiter; /* global waiter index (proc * W + w) */
  uint32_t proc;
  uint32_t attempts; /* spin: SET NX commands sent for this grant */
  uint32_t shared;   /* fair, read-write kind: 1 for a shared hold */
} rtb_rec;

/* What one worker reports besides its records. */
typedef struct rtb_head {
  char client_id[RTB_ID_LEN + 8]; /* fair: rt_client_id() */
  uint32_t proc;
  uint32_t pad;
  uint64_t nrec;
  uint64_t cmds;     /* commands this process sent to Redis in the window
                           for the requests granted in it */
  uint64_t cpu_us;   /* this process's user+sys CPU in the window */
  int64_t rss_kb;    /* resident set at the end of the window */
  int64_t maxrss_kb; /* peak resident set */
  uint64_t errors;   /* failed waits or commands */
  uint64_t lost;     /* releases answered "lost" (RT_ELOST / not ours) */
  uint64_t reaps;    /* fair: watchdog reap calls in the window */
  uint64_t grants;   /* grants this process saw in the window */
} rtb_head;

typedef struct rtb_job {
  int mode;
  rtb_kind kind; /* fair: what each request asks for */
  unsigned procs, waiters, keys;
  unsigned hold_us;
  uint64_t n_target;
  int64_t ttl_ms;
  unsigned retry_ms;
  int port;
  char host[64];
  char password[128]; /* "" if none */
  char url[256];      /* for redturn */
  char prefix[96];    /* keys and channels of this pass */
  char spin_sha[41];  /* SHA1 of the compare-and-delete script */
} rtb_job;

/* Shared between the parent and its workers (a memfd both map). */
typedef struct rtb_shm {
  _Atomic uint64_t grants; /* grants so far, all processes */
  _Atomic int stop;        /* no new requests once set */
  _Atomic int64_t t_stop;  /* realtime ns when stop was decided */
  _Atomic int ready;       /* workers connected and waiting for 'g' */
  _Atomic int failed;      /* a worker could not start */
  _Atomic int probe_done;  /* workers whose probe waits are all queued */
  int64_t probe_rss_before[RTB_MAX_PROCS]; /* bytes */
  int64_t probe_rss_after[RTB_MAX_PROCS];
  int64_t probe_heap_before[RTB_MAX_PROCS]; /* bytes */
  int64_t probe_heap_after[RTB_MAX_PROCS];
  uint64_t probe_queued[RTB_MAX_PROCS];
  char client_id[RTB_MAX_PROCS][RTB_ID_LEN + 1]; /* fair: each worker's */
  rtb_job job;                                   /* this pass */
} rtb_shm;

/* Everything a worker needs (it lives in the shared block, which the
 * re-executed worker maps again). */
/* worker.c: the body of a worker process (re-executed as
 * "redturn-bench --worker PROC CTL OUT SHM"); never returns. ctl is the
 * read end of the parent's control pipe ('p' probe, 'g' go, 's' stop), out
 * the file the records go to. */
void rtb_worker_main(const rtb_job *job, unsigned proc, int ctl, int out,
                     rtb_shm *shm) __attribute__((noreturn));

/* Lua compare-and-delete of the spin lock's release. */
extern const char rtb_spin_release_lua[];

/* ---- time and memory ---------------------------------------------------- */
int64_t rtb_now_ns(void);     /* CLOCK_REALTIME */
int64_t rtb_rss_bytes(void);  /* resident set now, from /proc/self/statm */
int64_t rtb_heap_bytes(void); /* bytes malloc has handed out (mallinfo2) */

/* ---- server.c ------------------------------------------------------------ */

typedef struct rtb_server {
  rts_server own; /* the server we started (own.pid 0: not ours) */
  char host[64];
  int port;
  char *password;
} rtb_server;

/* Start redis-server (path or "redis-server" from PATH) on a free loopback
 * port, no persistence, the module of that path loaded (module NULL:
 * none). 0 or -1 with a message on stderr. */
int rtb_server_start(rtb_server *s, const char *path, const char *module);
void rtb_server_stop(rtb_server *s);
/* Parse "redis://[[user]:password@]host[:port][/db]" into s (db must be 0). */
int rtb_parse_url(const char *url, rtb_server *s);

/* A blocking connection for the parent (opaque redisContext). */
typedef struct rtb_sync rtb_sync;
rtb_sync *rtb_sync_open(const rtb_server *s);
void rtb_sync_close(rtb_sync *c);
/* Run a command; returns 0 when the reply is not an error. */
int rtb_sync_cmd(rtb_sync *c, const char *fmt, ...);
/* INFO section into a malloc'ed string (NULL on error). */
char *rtb_sync_info(rtb_sync *c, const char *section);
/* Numeric field "name:value" of an INFO text; NaN if absent. */
double rtb_info_num(const char *info, const char *name);
/* Sum of calls= over the cmdstat_ lines of INFO commandstats, leaving out
 * the parent's own commands (info, config, monitor, echo, script, flushall,
 * memory). -1 on error. */
long long rtb_info_calls(const char *info);
/* MEMORY USAGE (key, value and its dict entry) summed over the waiters'
 * keys (q and m) and, apart, the holder keys (h) of resources
 * r0 .. r<keys-1> (redturn's key layout "<prefix>:{<name>}:q|m|h").
 * 0 or -1. */
int rtb_sync_key_usage(rtb_sync *c, const char *prefix, unsigned keys,
                       long long *q_bytes, long long *h_bytes);
/* The keys named "<prefix>:*" (SCAN) and the sum of their MEMORY USAGE.
 * 0 or -1. */
int rtb_sync_prefix_usage(rtb_sync *c, const char *prefix, long long *keys,
                          long long *bytes);
/* Is the redturn module loaded (MODULE LIST names "redturn")? 1 or 0. */
int rtb_sync_has_module(rtb_sync *c);
/* SCRIPT LOAD; writes the SHA1 (41 bytes). */
int rtb_sync_script_load(rtb_sync *c, const char *body, char *sha);

/* MONITOR on a connection of its own: the order Redis executed commands
 * in. Lines are handed to the callback as they arrive. */
typedef struct rtb_monitor rtb_monitor;
typedef void (*rtb_monitor_cb)(const char *line, size_t len, void *data);
rtb_monitor *rtb_monitor_open(const rtb_server *s, rtb_monitor_cb cb,
                              void *data);
int rtb_monitor_fd(const rtb_monitor *m);
/* Read what is there (poll the fd first). 0, or -1 if the connection
 * broke. */
int rtb_monitor_read(rtb_monitor *m);
void rtb_monitor_close(rtb_monitor *m);

/* ---- analyze.c ------------------------------------------------------------ */

/* Enqueue order as Redis executed it (from MONITOR): request -> rank. */
typedef struct rtb_order rtb_order;
rtb_order *rtb_order_new(void);
void rtb_order_free(rtb_order *o);
/* Record that (proc, seq) was enqueued now; the first time wins. */
void rtb_order_add(rtb_order *o, uint32_t proc, uint64_t seq);
/* Rank of (proc, seq), or -1 if never seen. */
int64_t rtb_order_rank(const rtb_order *o, uint32_t proc, uint64_t seq);
size_t rtb_order_len(const rtb_order *o);

typedef struct rtb_figures {
  uint64_t grants; /* grants in the window */
  double wall_s;
  double acquire_ms_p50, acquire_ms_p99, acquire_ms_max;
  double handoff_us_p50, handoff_us_p99;
  uint64_t handoffs;
  uint64_t handoffs_same_waiter; /* the releaser itself got it next */
  uint64_t handoffs_same_proc;   /* a waiter of the releaser's process */
  uint64_t overlaps;
  int64_t fifo_inversions; /* -1: not checked */
  uint64_t fifo_checked;   /* grants whose enqueue rank was known */
  uint64_t fifo_unmatched; /* grants whose enqueue was not seen */
  uint64_t per_waiter_min, per_waiter_max;
  double jain;
  double attempts_per_grant; /* spin */
} rtb_figures;

/* Figures of one pass: records of every process (sorted in place), the
 * window [t_go, t_stop], W*P waiters. kind is the fair requests' kind, or
 * NULL for spin and ping: fair selects fence order for handoffs, and a
 * kind with several holders at once the permits rule for overlaps (and no
 * handoffs: a grant need not follow a release). order (may be NULL) gives
 * FIFO inversions. If handoff_out is not NULL it gets the malloc'ed
 * handoff samples (us), sorted, and *nhandoff. */
void rtb_analyze(rtb_rec *recs, size_t n, const rtb_kind *kind, int64_t t_go,
                 int64_t t_stop, unsigned nwaiters, const rtb_order *order,
                 rtb_figures *f, double **handoff_out);
/* Only the correctness checks of a verification pass. overlaps: pairs of
 * overlapping holds (a mutex, spin), or holds granted beyond the permits
 * (read-write lock, semaphore). */
void rtb_check(rtb_rec *recs, size_t n, const rtb_kind *kind,
               const rtb_order *order, uint64_t *overlaps, int64_t *inversions,
               uint64_t *checked, uint64_t *unmatched);
double rtb_quantile(const double *sorted, size_t n, double q);

#endif /* RTB_BENCH_H */
