/* What the benchmark's parent process shares between its files: the
 * options (options.c), the passes (pass.c), the rows of figures and their
 * output (output.c), and the run's state (main.c). The workers' side is
 * bench.h. */
#ifndef RTB_DRIVER_H
#define RTB_DRIVER_H

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "bench.h"
#include "rttopo.h" /* tools/: the clusters of --cluster */

/* ---- options.c: the command line ----------------------------------------- */

/* One scale point. */
typedef struct rtb_point {
  const char *name;
  unsigned procs, waiters, keys, hold_us;
  uint64_t n;
} rtb_point;

/* How many scale points there are (options.c lists them). */
#define RTB_NPOINTS 8
/* Most request kinds of one run (--kinds). */
#define RTB_MAX_KINDS 6
/* The shard counts --cluster compares. */
#define RTB_CLUSTER_SMALL 1
#define RTB_CLUSTER_BIG 3

typedef struct rtb_options {
  const char *url;
  long procs, waiters, keys, hold_us; /* -1: per point */
  long long n;
  double cap_s;
  unsigned modes;                /* bit per mode */
  rtb_kind kinds[RTB_MAX_KINDS]; /* fair runs once per kind */
  size_t nkinds;
  int cluster; /* run against a 1-shard and a 3-shard Redis Cluster */
  rtb_point points[RTB_NPOINTS + 1];
  size_t npoints;
  const char *json;
  const char *data_dir;
  const char *redis_server;
  unsigned retry_ms;
  long long ttl_ms;
  int verify;
  long long verify_n;
  double verify_s;
  int probe;
  int verbose;
  unsigned repeat;
  int kinds_given; /* --kinds: else the mutex once per script path */
  /* The redturn module loaded into the server the run starts (--module;
   * default: module/redturn_module.so of the build tree, when built), or
   * NULL. */
  const char *module;
  int no_module;            /* --module none */
  int instructions;         /* --instructions: the callgrind passes */
  long long instructions_n; /* grants per callgrind pass */
} rtb_options;

/* Parse argv into *opt; exits with 2 (after saying why) on bad options,
 * with 0 after --help. */
void rtb_parse_options(int argc, char **argv, rtb_options *opt);

/* ---- main.c: the run
 * --------------------------------------------------------- */

extern const char *const rtb_mode_names[RTB_NMODES];

/* What the passes run against: one redis-server, or a Redis Cluster whose
 * masters' figures (CPU, commands, memory) are summed. */
typedef struct rtb_target {
  int shards;          /* 0: one redis-server; else a cluster of this many */
  rtb_server srv;      /* what the workers connect to (cluster: a master) */
  rts_cluster cluster; /* shards > 0: started by this run */
  rtb_sync *nodes[RTS_MAX_MASTERS]; /* the parent's connection to each
                                       master (a server: nodes[0]) */
  int nnodes;
  int own; /* started by this run (FLUSHALL is fine) */
  char url[128];
  int module; /* the redturn module is loaded (MODULE LIST) */
  /* --instructions: the server runs under valgrind's callgrind; its
   * counters are zeroed at each pass's go and dumped at its stop. */
  int callgrind;
  char cg_dir[512]; /* the wrapper script and the dumps (removed after) */
  unsigned cg_dumps;
} rtb_target;

/* Seconds since since (rtb_now_ns). */
double rtb_elapsed_s(int64_t since);
/* A progress line on stderr, stamped with the run's elapsed time. */
typedef struct rtb_run rtb_run;
void rtb_progress(const rtb_run *run, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---- pass.c: one pass
 * ---------------------------------------------------------- */

typedef struct rtb_pass {
  rtb_rec *recs;
  size_t n;
  rtb_head heads[RTB_MAX_PROCS];
  int64_t t_go, t_stop;
  double redis_cpu_s;
  long long server_calls; /* -1 if unknown */
  long long used_mem_peak;
  char *cmdstats; /* INFO commandstats at the end (verbose) */
  rtb_order *order;
  /* memory probe */
  double client_bytes_per_waiter, redis_bytes_per_entry,
      redis_bytes_per_resource;
  /* measured pass: bytes of the pass's keys left once every worker
   * released and closed, per resource (NaN on a cluster) */
  double redis_bytes_idle;
  /* callgrind target: instructions redis-server executed in the window
   * (NaN elsewhere) */
  double redis_instr;
  double instr_window_s; /* from the zero to the dump */
} rtb_pass;

/* Run one pass of job (kind 'm' measured, 'v' verification under MONITOR,
 * 'p' memory probe) for at most cap_s seconds into *out (free it with
 * rtb_pass_free, also after a failure). 0, or -1 if the pass failed. */
int rtb_run_pass(rtb_run *run, const rtb_job *job0, double cap_s, int kind,
                 rtb_pass *out);
void rtb_pass_free(rtb_pass *p);
/* FLUSHALL the server if this run started it. */
void rtb_flush_keys(const rtb_run *run);

/* ---- output.c: the figures -------------------------------------------------
 */

typedef struct rtb_row {
  const char *point;
  int mode;
  rtb_kind kind; /* fair: what its requests asked for */
  int shards;    /* its target's (0: one redis-server) */
  unsigned procs, waiters, keys, hold_us;
  uint64_t n_target;
  rtb_figures f;
  double grants_per_s, ratio_to_ping;
  double ping_per_s; /* the ping rate ratio_to_ping divides by */
  double cmds_per_grant, server_cmds_per_grant;
  double redis_cpu_us_per_grant, client_cpu_us_per_grant;
  long long client_rss_kb, redis_used_memory_kb;
  double client_bytes_per_waiter, redis_bytes_per_entry,
      redis_bytes_per_resource;
  double redis_bytes_idle; /* per resource once all is released */
  double instr_per_grant;  /* --instructions (callgrind), else NaN */
  uint64_t instr_grants;   /* the grants of that count */
  uint64_t errors, lost, reaps;
  int verified;
  uint64_t verify_grants;
  unsigned repeats; /* passes the timing figures are the median of */
} rtb_row;

/* Rows of a run: per point, per target (2 with --cluster), ping, spin
 * and one fair row per kind. */
#define RTB_MAX_ROWS ((RTB_NPOINTS + 1) * 2 * (RTB_NMODES + RTB_MAX_KINDS))

/* ---- the run: everything the parent's files share ------------------------ */

/* The state of one run of the benchmark, passed down from main() to every
 * function of the parent that needs it (there is no global of its own). */
struct rtb_run {
  rtb_options opt;
  /* One redis-server, or (--cluster) the small and the big cluster. */
  rtb_target targets[2];
  int ntargets;
  rtb_target *tgt; /* the target of the current pass */
  rtb_shm *shared; /* shared with the workers (a memfd) */
  int shm_fd;
  char run_id[16];
  char self_exe[4096]; /* re-executed as a worker */
  int64_t start;       /* rtb_now_ns() at the start */
  char spin_sha[41];   /* SHA1 of the spin release script */
  /* Set by the signal handler (SIGINT, SIGTERM): the one flag a handler
   * can reach, which main.c owns. */
  volatile sig_atomic_t *interrupted;
  unsigned pass_no;             /* names each pass's keys */
  pid_t workers[RTB_MAX_PROCS]; /* of the current pass */
  rtb_row rows[RTB_MAX_ROWS];
  size_t nrows;
  /* --instructions: the callgrind passes' rows (point, mode, kind,
   * instr_per_grant, instr_grants; the rest unused) */
  rtb_row instr[2 * (RTB_NMODES + RTB_MAX_KINDS)];
  size_t ninstr;
  double instr_idle_per_s; /* the callgrind server's, idle */
  char module_note[256];   /* why the module path has no row, or "" */
  char module_path[4096];  /* the default opt.module, when found */
};

/* ---- instr.c: instructions per grant (callgrind) ------------------------- */

/* Start t: a redis-server of its own under valgrind's callgrind (module
 * loaded when opt->module). 0, or -1 with a message. */
int rtb_instr_start(const rtb_run *run, rtb_target *t);
/* Stop it and remove its files. */
void rtb_instr_stop(rtb_target *t);
/* Zero the counters (at a pass's go). 0 or -1. */
int rtb_instr_zero(const rtb_target *t);
/* Dump the counters (at a pass's stop): instructions since the zero, or
 * NaN. */
double rtb_instr_read(rtb_target *t);

/* The --instructions counts per grant, each beside spin's. */
void rtb_print_instructions(const rtb_run *run, FILE *f);
/* The row of mode at point with kind (NULL: the mutex on the auto path)
 * on a target of shards (0: one redis-server), or NULL. */
const rtb_row *rtb_find_row(const rtb_run *run, const char *point, int mode,
                            const rtb_kind *kind, int shards);
/* The table of every row, then the memory probes' lines. */
void rtb_print_table(const rtb_run *run, FILE *f);
/* targets.c: the targets of docs/PERFORMANCE.md, checked on this run. */
void rtb_print_targets(const rtb_run *run, FILE *f);
/* Each kind's grants/s over the mutex's, and 3 shards' over 1 shard's,
 * point by point (nothing when the run has neither). */
void rtb_print_ratios(const rtb_run *run, FILE *f);
/* One row as one JSON object on one line. */
void rtb_json_row(const rtb_run *run, FILE *f, const rtb_row *r);
/* grants.dat for the plots (--data). */
void rtb_write_data(const rtb_run *run);
/* handoff-<point>-<mode>.dat: the CDF of the n sorted handoff times h. */
void rtb_write_handoffs(const rtb_run *run, const rtb_row *r, const double *h,
                        size_t n);

#endif /* RTB_DRIVER_H */
