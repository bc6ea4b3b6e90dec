/* The fault driver's own declarations, shared by its files (fault.c: the
 * run and its log formats; util.c: small helpers and TLS; store.c: the
 * split-brain judge's store; worker.c: the worker process; driver.c: the
 * server, the workers, the observer; net.c: network faults; inject.c: the
 * other fault kinds; topology.c: cluster and Sentinel moves; verify.c: the
 * driver's own checks). Not for the checker (check.h). */
#ifndef RT_FAULT_FAULT_H
#define RT_FAULT_FAULT_H

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
  int multi;         /* multi-lock lanes (rt_wait_all on two mutexes) */
  int observe;       /* observer lanes (rt_observe on every election) */
} params;

/* ---- the worker process ---------------------------------------------------- */

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
  /* A multi-lock lane's wait (--multi): the set, its number in this
   * process, and per lock of the set whether its grant was logged, its id,
   * the deadline last logged and the last check that saw it held. */
  rt_multi_t *multi;
  int mid;
  int64_t m_e_us, m_timeout, m_ttl;
  uint64_t m_rc;
  int m_logged[2];
  char m_ids[2][96];
  int64_t m_deadline[2], m_seen_us[2];
} lane;

/* An observer lane (--observe): one rt_observe of an election for the
 * worker's whole life. */
typedef struct obs_lane {
  worker *w;
  int res;
  int done; /* its last call came */
} obs_lane;

struct worker {
  uv_loop_t loop;
  obs_lane obs[MAX_RES];
  int nobs;
  int nmulti; /* multi-locks begun */
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
  /* The loop's own stalls (the process not run: a busy machine), logged
   * as "Y <t> <ms>" so the checker does not blame the library for them. */
  uv_timer_t beat;
  int64_t beat_due_us;
};

/* With --mixed each resource has one kind for the whole run (the library
 * refuses another kind on a resource in use): r%4 == 0 a mutex, 1 a
 * read-write lock (70% shared requests), 2 a semaphore of MIXED_PERMITS
 * permits (requests take 1 to all of them), 3 an election. Without it,
 * mutexes only. */
#define MIXED_PERMITS 3u
enum { RK_MUTEX, RK_RW, RK_SEM, RK_ELECTION };

/* ---- the driver ------------------------------------------------------------ */

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

#define MAX_HELD_CONNS 16

typedef struct net_t {
  rtt_proxy *p;
  int kind;
  int64_t end_at; /* mono ms */
  int nconns;     /* NF_HOLD: the connections held */
  int conns[MAX_HELD_CONNS];
} net_t;

/* The fault kinds (names and weights in inject.c). */
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

/* fault.c */
extern params P;
int64_t max_lease(void);

/* util.c */
int64_t real_us(void);
int64_t mono_ms(void);
void sleep_ms(int64_t ms);
uint64_t next_rand(uint64_t *s);
int write_all(int fd, const char *buf, size_t len);
void logf_fd(int fd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void die_with_parent(void);
void res_name(int r, char *buf, size_t cap);
extern rtt_tls certs;
int tls_worker_options(rt_options_t *o);
int tls_server_args(const char *args[RTT_TLS_NARGS], char *port,
                    size_t portcap);

/* store.c */
extern int judge_on;
int judge_store_reset(void);
int judge_store_open(void);
void judge_write(worker *w, rt_lock_t *lock, char why);

/* worker.c */
int res_kind(int r);
int worker_main(int slot, int gen, int idfd);

/* driver.c */
extern const char *const nf_name[];
extern slot_t slots[MAX_WORKERS];
extern net_t nets[MAX_WORKERS];
extern int dlog;
extern uint64_t drnd;
extern rts_server redis;
extern rts_cluster cl;
extern int stopping_phase;
extern char self_exe[1024];
void dlogf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void violation(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
redisContext *admin_at(int port);
redisContext *admin(void);
extern char redis_dir[512];
int cluster_start(void);
int redis_start(void);
int redis_start_again(void);
int redis_client_port(void);
void worker_spawn(int s);
void read_ids(void);
extern long obs_messages, obs_subscribes;
extern long evicted_lock_keys;
void observer_open(void);
void observer_drain(void);
void observer_close(void);
extern long n_connect_fail;
void reap_workers(void);
int slot_of_client(const char *cid, size_t len);

/* net.c */
void net_end(int s, int cut);
int net_fault(int kind);
void net_tick(void);

/* inject.c */
extern const char *const fk_name[FK_COUNT];
extern long fk_done[FK_COUNT];
int cluster_res_slot(const char *name);
int cluster_owner(int slot);
redisContext *admin_for_res(const char *name);
extern long n_restarts, n_long_pauses;
int restart_server(void);
int kind_applies(int k);
void inject_fault(void);

/* probe.c */
void probe_start(int port);
long probe_stop(void);

/* topology.c */
extern long n_reshards, n_failovers, n_crashes;
int cluster_reshard(void);
int cluster_failover(void);
int cluster_crash_master(void);
extern rts_replicated grp;
extern rts_sentinels sen;
extern long n_sentinel_failovers, n_master_kills;
int sentinel_start(void);
void sentinel_tick(int64_t t0);

/* verify.c */
void tls_check_clients(void);
extern redisContext *filler;
extern long long fill_n;
void fill_tick(void);
void check_refusal(void);
long long evicted_keys(void);
void check_keyspace(void);

#endif /* RT_FAULT_FAULT_H */
