/* The checker's own declarations, shared by its files (check.c: the
 * rules' statement, the run over a directory, the counts; parse.c: reading
 * the logs into a history; facts.c: questions about the history;
 * rules_order.c: exclusion, fencing, FIFO, deadlines; rules_queue.c: the
 * crash and handoff rules; rules_lease.c: the lease, multi-lock and
 * observer rules). The history's types: one req per request, one wfile per
 * worker log, spans of the driver's faults. Not for the driver (check.h is
 * the checker's face). */
#ifndef RT_FAULT_HISTORY_H
#define RT_FAULT_HISTORY_H

#include "check.h"
#include "judge.h"
#include "mem.h"
#include "rtcheck.h"

#include <dirent.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "redturn.h"

#define MAX_PRINT 25 /* violations printed per rule */
#define MAX_SLOTS 64

typedef struct req {
  char id[80];
  int wf; /* worker file index */
  int res;
  /* Its kind (the E line's optional last fields; absent: a mutex): 0
   * mutex, 1 semaphore, 2 shared, 3 exclusive (rt_kind_t), with the
   * semaphore's permits taken and count. */
  int kind;
  int64_t permits, of;
  int64_t e_us, q_us, g_us, f_us, s_us, r_us, l_us;
  int64_t timeout_ms, ttl_ms;
  uint64_t rc_e, rc_end;
  int granted, failed, signaled, released, overstay;
  int ghost;  /* a grant known from the driver's holder record only */
  int lossy;  /* live when its holder record (h) was deleted */
  int dist;   /* disturbed (see the top of this file) */
  int s_ext;  /* the S line has the lost and left fields */
  int s_lost; /* the lock was RT_LOCK_LOST before rt_signal */
  int fstatus, rstatus;
  char fwhy[96]; /* the F line's words for a failure; "" if none */
  uint64_t fence;
  int64_t deadline_ms, lease_ms, gms;
  int64_t d_us; /* when an extend last moved deadline_ms (its D line); 0 */
  int64_t g_left, s_left; /* rt_lock_lease_left_ms(); -1: not logged */
  int multi; /* a lock of multi-lock number multi of its file (M line) */
  long pos;
  int epoch;
  /* Lines in the worker's file; g_line < 0: -(line in driver.log). */
  int e_line, g_line, f_line, s_line, r_line;
} req;

typedef struct wfile {
  char name[64];
  int slot, gen, pid;
  int64_t kill_us, close_us, exit_us, start_us;
  /* The driver reaped its process (driver.log's D line; 0: never): its
   * connections had closed by then (the kernel closes a process's files
   * before its parent can reap it). */
  int64_t reap_us;
  int connect_failed;
  uint64_t max_rc;
  size_t first, n; /* its requests: reqs[first .. first + n) */
  /* Its loop's stalls ("Y" lines): the loop did not run in
   * [to_us - ms * 1000, to_us]. */
  struct stall {
    int64_t to_us, ms;
  } * stalls;
  size_t nstalls, capstalls;
} wfile;

typedef struct span {
  int64_t from_us, to_us;
  int64_t down_us; /* restarts: when the old server had exited (0: unknown) */
} span;

/* A network fault of one worker slot's connections. */
typedef struct nspan {
  int slot;
  int kind;               /* 0 delay, 1 hold, 2 partition, 3 cut */
  int64_t from_us, to_us; /* to: end + what may still be in flight */
  int64_t delay_ms;
  int open;
} nspan;

/* A CLIENT KILL of a worker's subscriber connection (L line). */
typedef struct ckill {
  int slot, gen;
  int64_t t_us;
} ckill;

/* A key loss: res -1 for every resource (FLUSHALL). */
typedef struct lspan {
  int res;
  int all; /* the holder record went too (DEL of every key, FLUSHALL) */
  int64_t from_us, to_us;
  int line;
} lspan;

/* A resource moving to another server (a reshard or failover of its slot,
 * a crash of its master; a restart with persistence): res -1 for all. */
typedef struct mspan {
  int res;
  int64_t from_us, to_us;
} mspan;

/* A multi-lock of a worker file (A, Z, T and z lines). */
typedef struct mset {
  int wf, mid, n, res[2];
  int64_t a_us, z_us; /* rt_wait_all called; its callback (0: none) */
  int zstatus, done;
  int a_line, z_line;
} mset;

/* An observer's report (W line). */
typedef struct oev {
  int wf, res, status, line;
  char id[80]; /* "-": nobody */
  uint64_t fence;
  int64_t t_us, deadline_ms;
} oev;

typedef struct hist {
  mset *msets;
  size_t nmsets, capmsets;
  oev *oevs;
  size_t noevs, capoevs;
  req *reqs;
  size_t nreqs, capreqs;
  wfile *files;
  size_t nfiles, capfiles;
  span restarts[8];
  int nrestarts;
  span pauses[256]; /* CLIENT PAUSEs and the stalls the probe saw */
  int npauses;
  int nserver_stalls; /* of them, stalls */
  nspan *nets;
  size_t nnets, capnets;
  ckill *subkills;
  size_t nsubkills, capsubkills;
  lspan *losses;
  size_t nlosses, caplosses;
  mspan moves[16];
  int nmoves;
  int persist;
  int evict;         /* the eviction run: fencing and deadline only */
  int wait_replicas; /* the workers' rt_options_t.wait_replicas */
  long driver_v, conn_kills, kills, kills_holder, kills_waiter;
  long net_kind[4], loss_kind[6], observer;
  long lost_seen;
  long printed[16];
} hist;

/* parse.c */
int known_status(int st);
int read_worker(hist *h, const char *dir, const char *name, FILE *out);
int read_driver(hist *h, const char *dir, FILE *out);

/* facts.c */
int cmp_str(const void *a, const void *b);
int overlaps(int64_t a0, int64_t a1, int64_t b0, int64_t b1);
int near_fault(const hist *h, int64_t from_us, int64_t to_us);
int64_t stall_end_after(const hist *h, int64_t from_us, int64_t to_us);
int64_t kills_since(const hist *h, int res, int64_t t_us, int64_t from_us);
int64_t dead_by_us(const wfile *f);
int epoch_of_ms(const hist *h, int64_t ms);
int64_t live_end(const hist *h, const req *r, const char **why);
int64_t abandon_start(const hist *h, const req *r);
int64_t outcome_us(const req *r);
int net_hit(const hist *h, int slot, int64_t from_us, int64_t to_us);
int sub_kill_hit(const hist *h, const wfile *f, int64_t from_us, int64_t to_us);
int loss_hit(const hist *h, int res, int64_t from_us, int64_t to_us, int all);
void mark_disturbed(hist *h, const rtf_tol *tol);
void where(const hist *h, const req *r, int line, char *buf, size_t cap);
int report(hist *h, FILE *out, int rule, rtf_counts *c);

/* rules_order.c */
void set_permits(rtc_grant *cg, const req *r);
void rule_exclusion_fencing(hist *h, const size_t *g, size_t ng,
                            const rtf_tol *tol, FILE *out, rtf_counts *c);
void rule_fifo(hist *h, const size_t *u, size_t nu, FILE *out, rtf_counts *c);
void rule_timeout(hist *h, const rtf_tol *tol, FILE *out, rtf_counts *c);

/* rules_queue.c */
void rule_crash(hist *h, const size_t *g, size_t ng, const rtf_tol *tol,
                FILE *out, rtf_counts *c);
void rule_handoff(hist *h, const size_t *g, size_t ng, const rtf_tol *tol,
                  FILE *out, rtf_counts *c);

/* rules_lease.c */
void rule_lease(hist *h, const size_t *g, size_t ng, const rtf_tol *tol,
                FILE *out, rtf_counts *c);
void rule_multi(hist *h, const size_t *g, size_t ng, const rtf_tol *tol,
                FILE *out, rtf_counts *c);
void rule_observer(hist *h, const rtf_tol *tol, FILE *out, rtf_counts *c);

#endif /* RT_FAULT_HISTORY_H */
