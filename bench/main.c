/* redturn-bench: redturn against the physical limit (ping) and the classic
 * spin lock, on the workload of the project's benchmark contract.
 *
 * For every scale point it runs, against one redis-server:
 *   ping  one connection, one PING at a time: round trips per second;
 *   fair  redturn: P processes x W waiters, wait -> hold -> signal;
 *   spin  SET NX PX with fixed-delay retries, compare-and-delete release.
 * Each lock mode runs a measured pass, then a short verification pass under
 * MONITOR (the enqueue order Redis saw, for the FIFO check), and for fair
 * at the big points a memory probe. See docs/PERFORMANCE.md. */
#define _GNU_SOURCE
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "driver.h"
#include "redturn.h"

const char *const rtb_mode_names[RTB_NMODES] = {"ping", "fair", "spin"};

/* The one variable of file scope: a signal handler reaches nothing else.
 * rtb_run.interrupted points at it. */
static volatile sig_atomic_t interrupted;

/* ---- small helpers --------------------------------------------------------
 */

static void on_signal(int sig) {
  (void)sig;
  interrupted = 1;
}

/* ---- driving a point ------------------------------------------------------
 */

/* A mode of the run, with the kind of its requests (fair). */
typedef struct rtb_variant {
  int mode;
  rtb_kind kind;
} rtb_variant;

static void fill_job(const rtb_run *run, rtb_job *job, const rtb_point *pt,
                     int mode, const rtb_kind *kind) {
  memset(job, 0, sizeof(*job));
  job->mode = mode;
  if (kind != NULL)
    job->kind = *kind;
  job->procs = mode == RTB_PING ? 1 : pt->procs;
  job->waiters = mode == RTB_PING ? 1 : pt->waiters;
  job->keys = mode == RTB_PING ? 1 : pt->keys;
  job->hold_us = mode == RTB_PING ? 0 : pt->hold_us;
  /* ping: at least 50000 round trips (about a second), the denominator of
   * every ratio deserves the samples. */
  job->n_target = mode == RTB_PING && pt->n < 50000 ? 50000 : pt->n;
  job->ttl_ms = run->opt.ttl_ms;
  job->retry_ms = run->opt.retry_ms;
  job->port = run->tgt->srv.port;
  snprintf(job->host, sizeof(job->host), "%s", run->tgt->srv.host);
  snprintf(job->password, sizeof(job->password), "%s",
           run->tgt->srv.password != NULL ? run->tgt->srv.password : "");
  snprintf(job->url, sizeof(job->url), "%s", run->tgt->url);
  snprintf(job->spin_sha, sizeof(job->spin_sha), "%s", run->spin_sha);
}

/* Round trips per second of one PING connection, measured for half a
 * second right before a lock pass: this machine's speed changes within
 * minutes, and the ratio must compare like with like. -1 on failure. */
static double adjacent_ping(rtb_run *run, const rtb_point *pt) {
  rtb_job job;
  rtb_pass p;
  fill_job(run, &job, pt, RTB_PING, NULL);
  job.n_target = 20000;
  double rate = -1;
  if (rtb_run_pass(run, &job, 0.5, 'm', &p) == 0 && p.t_stop > p.t_go) {
    uint64_t n = 0;
    for (size_t i = 0; i < p.n; i++)
      n += p.recs[i].t_grant <= p.t_stop;
    rate = (double)n / ((double)(p.t_stop - p.t_go) / 1e9);
  }
  rtb_pass_free(&p);
  return rate;
}

/* A fresh row for mode at pt, whose job is job. */
static void row_start(const rtb_run *run, rtb_row *r, const rtb_point *pt,
                      int mode, const rtb_job *job) {
  memset(r, 0, sizeof(*r));
  r->point = pt->name;
  r->mode = mode;
  r->kind = job->kind;
  r->shards = run->tgt->shards;
  r->procs = job->procs;
  r->waiters = job->waiters;
  r->keys = mode == RTB_PING ? 0 : job->keys;
  r->hold_us = job->hold_us;
  r->n_target = job->n_target;
  r->client_bytes_per_waiter = NAN;
  r->redis_bytes_per_entry = NAN;
  r->redis_bytes_per_resource = NAN;
  r->redis_bytes_idle = NAN;
  r->instr_per_grant = NAN;
  r->ratio_to_ping = NAN;
}

/* The figures of measured pass p into r. */
static void row_figures(const rtb_run *run, rtb_row *r, rtb_pass *p,
                        const rtb_job *job, double ping_rate) {
  double *hand = NULL;
  rtb_analyze(p->recs, p->n, r->mode == RTB_FAIR ? &job->kind : NULL, p->t_go,
              p->t_stop, job->procs * job->waiters, NULL, &r->f, &hand);
  uint64_t cmds = 0, cpu = 0, wgrants = 0;
  long long rss = 0;
  for (unsigned i = 0; i < job->procs; i++) {
    cmds += p->heads[i].cmds;
    wgrants += p->heads[i].grants;
    cpu += p->heads[i].cpu_us;
    if (p->heads[i].rss_kb > rss)
      rss = p->heads[i].rss_kb;
    r->errors += p->heads[i].errors;
    r->lost += p->heads[i].lost;
    r->reaps += p->heads[i].reaps;
  }
  double g = (double)r->f.grants;
  r->grants_per_s = r->f.wall_s > 0 ? g / r->f.wall_s : NAN;
  r->ping_per_s = ping_rate;
  if (r->mode == RTB_PING)
    r->ratio_to_ping = 1.0;
  else if (ping_rate > 0)
    r->ratio_to_ping = r->grants_per_s / ping_rate;
  /* Client-side figures over what the workers saw until they noticed the
   * end (a few events after t_stop), Redis-side over the window. */
  r->cmds_per_grant = wgrants > 0 ? (double)cmds / (double)wgrants : NAN;
  r->server_cmds_per_grant =
      g > 0 && p->server_calls >= 0 ? (double)p->server_calls / g : NAN;
  r->redis_cpu_us_per_grant = g > 0 ? p->redis_cpu_s * 1e6 / g : NAN;
  r->client_cpu_us_per_grant =
      wgrants > 0 ? (double)cpu / (double)wgrants : NAN;
  r->client_rss_kb = rss;
  r->redis_bytes_idle = p->redis_bytes_idle;
  r->redis_used_memory_kb =
      p->used_mem_peak >= 0 ? p->used_mem_peak / 1024 : -1;
  if (r->mode != RTB_PING)
    rtb_write_handoffs(run, r, hand, r->f.handoffs);
  if (run->opt.verbose && p->cmdstats != NULL) {
    fprintf(stderr, "  commandstats:\n");
    for (char *s = strtok(p->cmdstats, "\r\n"); s != NULL;
         s = strtok(NULL, "\r\n"))
      if (strncmp(s, "cmdstat_", 8) == 0)
        fprintf(stderr, "    %s\n", s);
  }
  free(hand);
}

/* The verification pass under MONITOR: FIFO and overlaps into r. */
static void verify_mode(rtb_run *run, rtb_job job, rtb_row *r) {
  rtb_pass p;
  if (job.n_target > (uint64_t)run->opt.verify_n)
    job.n_target = (uint64_t)run->opt.verify_n;
  /* Under MONITOR every waiter must first be queued: allow 1 s per
   * 5000 of them (the deep point's 100 000 take about 10 s). */
  double verify_s = fmax(run->opt.verify_s, job.procs * job.waiters / 5000.0);
  if (rtb_run_pass(run, &job, verify_s, 'v', &p) == 0 || p.n > 0) {
    uint64_t ov = 0, checked = 0, unmatched = 0;
    int64_t inv = -1;
    rtb_check(p.recs, p.n, r->mode == RTB_FAIR ? &job.kind : NULL, p.order, &ov,
              &inv, &checked, &unmatched);
    r->verified = inv >= 0;
    r->f.fifo_inversions = inv;
    r->f.fifo_checked = checked;
    r->f.fifo_unmatched = unmatched;
    r->f.overlaps += ov;
    r->verify_grants = p.n;
    for (unsigned i = 0; i < job.procs; i++)
      r->errors += p.heads[i].errors;
    rtb_progress(run,
                 "  verify: %zu grants, %" PRIu64 " checked, %" PRIu64
                 " unmatched, %" PRId64 " inversions, %" PRIu64 " overlaps",
                 p.n, checked, unmatched, inv, ov);
  }
  rtb_pass_free(&p);
}

/* The memory probe: bytes per waiter, entry and resource into r. */
static void probe_mode(rtb_run *run, const rtb_job *job, rtb_row *r) {
  rtb_pass p;
  if (rtb_run_pass(run, job, run->opt.cap_s, 'p', &p) == 0) {
    r->client_bytes_per_waiter = p.client_bytes_per_waiter;
    r->redis_bytes_per_entry = p.redis_bytes_per_entry;
    r->redis_bytes_per_resource = p.redis_bytes_per_resource;
    rtb_progress(run,
                 "  probe: %.0f client B/waiter, %.0f Redis B/entry, %.0f "
                 "Redis B/resource",
                 p.client_bytes_per_waiter, p.redis_bytes_per_entry,
                 p.redis_bytes_per_resource);
  }
  rtb_pass_free(&p);
}

/* "fair rw:90", "spin", "fair mutex on 3 shards": for progress lines. */
static const char *variant_label(const rtb_run *run, const rtb_variant *v,
                                 char *buf, size_t cap) {
  char kname[32] = "";
  if (v->mode == RTB_FAIR)
    rtb_kind_name(&v->kind, kname, sizeof(kname));
  int n = snprintf(buf, cap, "%s%s%s", rtb_mode_names[v->mode],
                   kname[0] ? " " : "", kname);
  if (run->tgt->shards > 0 && n > 0 && (size_t)n < cap)
    snprintf(buf + n, cap - (size_t)n, " on %d shard%s", run->tgt->shards,
             run->tgt->shards > 1 ? "s" : "");
  return buf;
}

/* One measured pass of variant v at pt into *r (and, when checks is set,
 * its verification pass and memory probe: on one redis-server, whose
 * MONITOR sees every command; the probe for the mutex only). 0, or -1 if
 * the pass failed. */
static int run_mode(rtb_run *run, const rtb_point *pt, const rtb_variant *v,
                    double ping_rate, int checks, rtb_row *r) {
  rtb_job job;
  rtb_pass p;
  int mode = v->mode;
  char label[96];
  fill_job(run, &job, pt, mode, &v->kind);
  row_start(run, r, pt, mode, &job);
  double cap = mode == RTB_PING ? fmin(run->opt.cap_s, 2) : run->opt.cap_s;
  rtb_progress(run, "%s %s: P=%u W=%u K=%u H=%u N=%" PRIu64 " (cap %.0f s)",
               pt->name, variant_label(run, v, label, sizeof(label)), job.procs,
               job.waiters, job.keys, job.hold_us, job.n_target, cap);
  int rc = rtb_run_pass(run, &job, cap, 'm', &p);
  if (p.n == 0 && rc != 0) {
    fprintf(stderr, "redturn-bench: %s %s failed\n", pt->name,
            rtb_mode_names[mode]);
    rtb_pass_free(&p);
    return -1;
  }
  row_figures(run, r, &p, &job, ping_rate);
  rtb_pass_free(&p);
  rtb_progress(run,
               "  %" PRIu64 " grants in %.2f s: %.0f/s, %" PRIu64 " overlaps",
               r->f.grants, r->f.wall_s, r->grants_per_s, r->f.overlaps);
  checks = checks && run->tgt->shards == 0;
  if (mode != RTB_PING && run->opt.verify && checks)
    verify_mode(run, job, r);
  if (mode == RTB_FAIR && v->kind.type == RTB_MUTEX && run->opt.probe &&
      checks && (uint64_t)job.procs * job.waiters >= 1000)
    probe_mode(run, &job, r);
  rtb_flush_keys(run);
  return 0;
}

static int cmp_dbl(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Median of one double field over n rows (NaNs left out). */
static double median_of(const rtb_row *rs, size_t n, size_t off) {
  double v[64];
  size_t m = 0;
  for (size_t i = 0; i < n && m < 64; i++) {
    double x = *(const double *)((const char *)&rs[i] + off);
    if (!isnan(x))
      v[m++] = x;
  }
  if (m == 0)
    return NAN;
  qsort(v, m, sizeof(*v), cmp_dbl);
  return m % 2 ? v[m / 2] : (v[m / 2 - 1] + v[m / 2]) / 2;
}

/* The row of n alternating repeats: the median of each timing figure, the
 * checks of the first repeat, sums of the counts of failures. */
static void combine(const rtb_row *rs, size_t n, rtb_row *out) {
  *out = rs[0];
  out->repeats = (unsigned)n;
  if (n == 1)
    return;
#define RTB_MED(field) out->field = median_of(rs, n, offsetof(rtb_row, field))
  RTB_MED(grants_per_s);
  RTB_MED(ratio_to_ping);
  RTB_MED(ping_per_s);
  RTB_MED(cmds_per_grant);
  RTB_MED(server_cmds_per_grant);
  RTB_MED(redis_cpu_us_per_grant);
  RTB_MED(client_cpu_us_per_grant);
  RTB_MED(f.wall_s);
  RTB_MED(f.acquire_ms_p50);
  RTB_MED(f.acquire_ms_p99);
  RTB_MED(f.acquire_ms_max);
  RTB_MED(f.handoff_us_p50);
  RTB_MED(f.handoff_us_p99);
  RTB_MED(f.jain);
  RTB_MED(f.attempts_per_grant);
#undef RTB_MED
  uint64_t grants[64] = {0};
  for (size_t i = 0; i < n && i < 64; i++)
    grants[i] = rs[i].f.grants;
  for (size_t i = 1; i < n && i < 64; i++) /* insertion sort, n is small */
    for (size_t j = i; j > 0 && grants[j - 1] > grants[j]; j--) {
      uint64_t t = grants[j];
      grants[j] = grants[j - 1];
      grants[j - 1] = t;
    }
  out->f.grants = grants[(n < 64 ? n : 64) / 2];
  for (size_t i = 1; i < n; i++) {
    const rtb_row *r = &rs[i];
    out->f.overlaps += r->f.overlaps;
    out->f.handoffs += r->f.handoffs;
    out->f.handoffs_same_waiter += r->f.handoffs_same_waiter;
    out->f.handoffs_same_proc += r->f.handoffs_same_proc;
    out->errors += r->errors;
    out->lost += r->lost;
    if (r->f.per_waiter_min < out->f.per_waiter_min)
      out->f.per_waiter_min = r->f.per_waiter_min;
    if (r->f.per_waiter_max > out->f.per_waiter_max)
      out->f.per_waiter_max = r->f.per_waiter_max;
    if (r->client_rss_kb > out->client_rss_kb)
      out->client_rss_kb = r->client_rss_kb;
    if (r->redis_used_memory_kb > out->redis_used_memory_kb)
      out->redis_used_memory_kb = r->redis_used_memory_kb;
    if (r->redis_bytes_idle > out->redis_bytes_idle ||
        isnan(out->redis_bytes_idle))
      out->redis_bytes_idle = r->redis_bytes_idle;
  }
}

static int worker_entry(int argc, char **argv) {
  if (argc != 6)
    return 2;
  unsigned proc = (unsigned)atoi(argv[2]);
  int ctl = atoi(argv[3]), out = atoi(argv[4]), fd = atoi(argv[5]);
  rtb_shm *m =
      mmap(NULL, sizeof(*m), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (m == MAP_FAILED || proc >= RTB_MAX_PROCS)
    return 2;
  close(fd);
  signal(SIGPIPE, SIG_IGN);
  rtb_worker_main(&m->job, proc, ctl, out, m);
}

/* The default --module: the build tree's module/redturn_module.so beside
 * this program's bench/ directory, when it was built. */
static void find_module(rtb_run *run) {
  if (run->opt.module != NULL || run->opt.no_module || run->opt.url != NULL)
    return;
  const char *slash = strrchr(run->self_exe, '/');
  int dir = slash != NULL ? (int)(slash - run->self_exe) : 0;
  snprintf(run->module_path, sizeof(run->module_path),
           "%.*s/../module/redturn_module.so", dir, run->self_exe);
  if (access(run->module_path, R_OK) == 0)
    run->opt.module = run->module_path;
}

/* The process: its own path (workers re-execute it), the run's id and
 * clock, signals, and the memory shared with the workers. 0 or -1. */
static int setup_process(rtb_run *run) {
  ssize_t sl =
      readlink("/proc/self/exe", run->self_exe, sizeof(run->self_exe) - 1);
  if (sl <= 0) {
    perror("redturn-bench: /proc/self/exe");
    return -1;
  }
  run->self_exe[sl] = '\0';
  run->start = rtb_now_ns();
  find_module(run);
  snprintf(run->run_id, sizeof(run->run_id), "%x",
           (unsigned)(getpid() ^ (unsigned)time(NULL)));

  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);

  run->shm_fd = memfd_create("redturn-bench", 0);
  if (run->shm_fd < 0 || ftruncate(run->shm_fd, sizeof(*run->shared)) != 0) {
    perror("redturn-bench: memfd");
    return -1;
  }
  run->shared = mmap(NULL, sizeof(*run->shared), PROT_READ | PROT_WRITE,
                     MAP_SHARED, run->shm_fd, 0);
  if (run->shared == MAP_FAILED) {
    perror("redturn-bench: mmap");
    return -1;
  }

  return 0;
}

/* A Redis Cluster of shards masters (no replicas) as target t. 0 or -1. */
static int start_cluster(const rtb_run *run, rtb_target *t, int shards) {
  char err[1024];
  t->shards = shards;
  if (rts_cluster_start(&t->cluster, shards, 0, 1000, err, sizeof(err)) != 0) {
    fprintf(stderr, "redturn-bench: cluster of %d: %s\n", shards, err);
    return -1;
  }
  t->own = 1;
  snprintf(t->srv.host, sizeof(t->srv.host), "127.0.0.1");
  t->srv.port = t->cluster.node[0].server.port;
  snprintf(t->url, sizeof(t->url), "redis://127.0.0.1:%d", t->srv.port);
  rtb_progress(run, "started a Redis Cluster of %d shard%s on %s", shards,
               shards > 1 ? "s" : "", t->url);
  return 0;
}

/* The targets: the server of --url, a redis-server of our own, or (with
 * --cluster) a small and a big Redis Cluster. 0, or the exit code. */
static int setup_targets(rtb_run *run) {
  rtb_target *t = &run->targets[0];
  if (run->opt.cluster) {
    run->ntargets = 2;
    return start_cluster(run, &run->targets[0], RTB_CLUSTER_SMALL) == 0 &&
                   start_cluster(run, &run->targets[1], RTB_CLUSTER_BIG) == 0
               ? 0
               : 1;
  }
  run->ntargets = 1;
  if (run->opt.url != NULL) {
    if (rtb_parse_url(run->opt.url, &t->srv) != 0) {
      fprintf(stderr, "redturn-bench: unsupported URL %s\n", run->opt.url);
      return 2;
    }
    snprintf(t->url, sizeof(t->url), "%s", run->opt.url);
  } else {
    if (rtb_server_start(&t->srv, run->opt.redis_server, run->opt.module) != 0)
      return 1;
    t->own = 1;
    snprintf(t->url, sizeof(t->url), "redis://127.0.0.1:%d", t->srv.port);
    rtb_progress(run, "started redis-server on %s", t->url);
  }
  return 0;
}

/* The parent's connections to every master of t (a cluster's from its
 * node list). 0 or -1. */
static int connect_target(rtb_target *t) {
  int n = t->shards > 0 ? t->cluster.nmasters : 1;
  for (int i = 0; i < n; i++) {
    rtb_server s = t->srv;
    if (t->shards > 0)
      s.port = t->cluster.node[i].server.port;
    if ((t->nodes[i] = rtb_sync_open(&s)) == NULL)
      return -1;
    t->nnodes++;
  }
  return 0;
}

/* Without --kinds: the mutex once per script path, the module's first
 * when the server has it (else a note says why there is no module row). */
static void pick_paths(rtb_run *run) {
  rtb_options *o = &run->opt;
  if (o->kinds_given)
    return;
  o->nkinds = 0;
  if (!run->tgt->module)
    snprintf(run->module_note, sizeof(run->module_note), "no module row: %s",
             o->cluster       ? "the clusters run without the module"
             : o->url != NULL ? "the server of --url has no redturn module"
             : o->module == NULL
                 ? "module/redturn_module.so is not built (--module PATH)"
                 : "the server did not load it");
  else
    o->kinds[o->nkinds++] = (rtb_kind){RTB_MUTEX, 0, RT_SCRIPT_PATH_MODULE};
  o->kinds[o->nkinds++] = (rtb_kind){RTB_MUTEX, 0, RT_SCRIPT_PATH_FUNCTIONS};
  o->kinds[o->nkinds++] = (rtb_kind){RTB_MUTEX, 0, RT_SCRIPT_PATH_EVAL};
  if (run->module_note[0])
    rtb_progress(run, "%s", run->module_note);
}

/* The parent's connections: the spin baseline's script, and a line naming
 * the versions and the CPUs. 0 or -1. */
static int setup_connection(rtb_run *run) {
  for (int i = 0; i < run->ntargets; i++)
    if (connect_target(&run->targets[i]) != 0)
      return -1;
  run->tgt = &run->targets[0];
  if (!run->opt.cluster &&
      rtb_sync_script_load(run->tgt->nodes[0], rtb_spin_release_lua,
                           run->spin_sha) != 0) {
    fprintf(stderr, "redturn-bench: SCRIPT LOAD failed\n");
    return -1;
  }
  char *info = rtb_sync_info(run->tgt->nodes[0], "server");
  if (info != NULL) {
    char *v = strstr(info, "redis_version:");
    if (v != NULL)
      rtb_progress(run, "redis %.*s, redturn %s, %ld CPUs online",
                   (int)strcspn(v + 14, "\r\n"), v + 14, rt_version_string(),
                   sysconf(_SC_NPROCESSORS_ONLN));
    free(info);
  }
  run->tgt->module =
      run->tgt->shards == 0 && rtb_sync_has_module(run->tgt->nodes[0]);
  pick_paths(run);
  return 0;
}

static void teardown(rtb_run *run) {
  for (int t = 0; t < run->ntargets; t++) {
    for (int i = 0; i < run->targets[t].nnodes; i++)
      rtb_sync_close(run->targets[t].nodes[i]);
    if (run->targets[t].shards > 0)
      rts_cluster_stop(&run->targets[t].cluster);
    else if (run->targets[t].own)
      rtb_server_stop(&run->targets[t].srv);
  }
}

/* The run's variants in table order: ping, fair once per kind, spin. */
static size_t list_variants(const rtb_run *run, rtb_variant *v) {
  size_t n = 0;
  if (run->opt.modes & (1u << RTB_PING))
    v[n++] = (rtb_variant){RTB_PING, {RTB_MUTEX, 0, 0}};
  for (size_t k = 0; run->opt.modes & (1u << RTB_FAIR) && k < run->opt.nkinds;
       k++)
    v[n++] = (rtb_variant){RTB_FAIR, run->opt.kinds[k]};
  if (run->opt.modes & (1u << RTB_SPIN))
    v[n++] = (rtb_variant){RTB_SPIN, {RTB_MUTEX, 0, 0}};
  return n;
}

#define RTB_MAX_VARIANTS (RTB_NMODES + RTB_MAX_KINDS)

/* Repeats of one point: per target, per variant. */
typedef struct rtb_reps {
  rtb_row rows[2][RTB_MAX_VARIANTS][64];
  size_t n[2][RTB_MAX_VARIANTS];
} rtb_reps;

/* One repeat of point pt: each target's ping first (its rate for the
 * ratios), then each lock variant on every target in turn, so that the
 * targets' passes of one variant run back to back. */
static void run_repeat(rtb_run *run, const rtb_point *pt, const rtb_variant *vs,
                       size_t nv, int first, rtb_reps *reps) {
  double ping_rate[2] = {-1, -1};
  for (int t = 0; t < run->ntargets && nv > 0 && vs[0].mode == RTB_PING; t++) {
    run->tgt = &run->targets[t];
    rtb_row *r = &reps->rows[t][0][reps->n[t][0]];
    if (run_mode(run, pt, &vs[0], -1, first, r) == 0) {
      ping_rate[t] = r->grants_per_s;
      reps->n[t][0]++;
    }
  }
  for (size_t v = 0; v < nv && !*run->interrupted; v++) {
    if (vs[v].mode == RTB_PING)
      continue;
    for (int t = 0; t < run->ntargets && !*run->interrupted; t++) {
      run->tgt = &run->targets[t];
      double adj = ping_rate[t] > 0 ? adjacent_ping(run, pt) : -1;
      char label[96];
      if (adj > 0)
        rtb_progress(run, "%s: ping right before %s: %.0f/s", pt->name,
                     variant_label(run, &vs[v], label, sizeof(label)), adj);
      rtb_row *r = &reps->rows[t][v][reps->n[t][v]];
      if (run_mode(run, pt, &vs[v], adj > 0 ? adj : ping_rate[t], first, r) ==
          0)
        reps->n[t][v]++;
    }
  }
}

/* Every scale point, its variants alternating over the repeats, into
 * run->rows. */
static void run_points(rtb_run *run) {
  rtb_reps *reps = malloc(sizeof(*reps)); /* too big for the stack */
  rtb_variant vs[RTB_MAX_VARIANTS];
  size_t nv = list_variants(run, vs);
  if (reps == NULL) {
    perror("redturn-bench");
    return;
  }
  for (size_t i = 0; i < run->opt.npoints && !*run->interrupted; i++) {
    const rtb_point *pt = &run->opt.points[i];
    memset(reps->n, 0, sizeof(reps->n));
    /* Repeats alternate the modes, so that a change of the machine's speed
     * falls on all of them alike. */
    for (unsigned k = 0; k < run->opt.repeat && !*run->interrupted; k++)
      run_repeat(run, pt, vs, nv, k == 0, reps);
    for (size_t v = 0; v < nv; v++)
      for (int t = 0; t < run->ntargets; t++)
        if (reps->n[t][v] > 0)
          combine(reps->rows[t][v], reps->n[t][v], &run->rows[run->nrows++]);
  }
  free(reps);
}

/* One callgrind pass of variant v at pt into run->instr. */
static void instr_pass(rtb_run *run, const rtb_point *pt,
                       const rtb_variant *v) {
  rtb_job job;
  rtb_pass p;
  rtb_figures f;
  char label[96];
  fill_job(run, &job, pt, v->mode, &v->kind);
  job.n_target = (uint64_t)run->opt.instructions_n;
  rtb_row *r = &run->instr[run->ninstr];
  row_start(run, r, pt, v->mode, &job);
  if (rtb_run_pass(run, &job, 600, 'm', &p) == 0 && p.n > 0) {
    rtb_analyze(p.recs, p.n, v->mode == RTB_FAIR ? &job.kind : NULL, p.t_go,
                p.t_stop, job.procs * job.waiters, NULL, &f, NULL);
    r->instr_grants = f.grants;
    /* Less the server's own timers over the window (idle_per_s): under
     * callgrind a pass lasts as long as the machine lets it, and that
     * part of the count would move with the load. */
    double n = p.redis_instr - run->instr_idle_per_s * p.instr_window_s;
    r->instr_per_grant = f.grants > 0 ? n / (double)f.grants : NAN;
    run->ninstr++;
    rtb_progress(run, "  %s %s: %" PRIu64 " grants, %.0f instructions each",
                 pt->name, variant_label(run, v, label, sizeof(label)),
                 f.grants, r->instr_per_grant);
  } else {
    fprintf(stderr, "redturn-bench: callgrind pass %s %s failed\n", pt->name,
            variant_label(run, v, label, sizeof(label)));
  }
  rtb_pass_free(&p);
  rtb_flush_keys(run);
}

/* The callgrind server's own instructions per second while idle (its
 * timers): what a pass's count holds beside the commands. */
static void instr_idle(rtb_run *run, rtb_target *t) {
  if (rtb_instr_zero(t) != 0)
    return;
  int64_t t0 = rtb_now_ns();
  struct timespec ts = {1, 0};
  nanosleep(&ts, NULL);
  double n = rtb_instr_read(t);
  run->instr_idle_per_s = n / rtb_elapsed_s(t0);
}

/* --instructions: every lock variant at hot and spread, those of the
 * run's points (a pass under callgrind takes a minute on a busy machine),
 * on a redis-server of its own under callgrind; each count per grant also
 * goes to the timed row of the same variant. */
static void run_instructions(rtb_run *run) {
  static const char *const names[] = {"hot", "spread"};
  rtb_target cg;
  rtb_variant vs[RTB_MAX_VARIANTS];
  size_t nv = list_variants(run, vs);
  if (!run->opt.instructions || *run->interrupted)
    return;
  rtb_progress(run, "instructions: redis-server under callgrind");
  rtb_target *timed = run->tgt;
  if (rtb_instr_start(run, &cg) == 0 &&
      rtb_sync_script_load(cg.nodes[0], rtb_spin_release_lua, run->spin_sha) ==
          0) {
    cg.module = rtb_sync_has_module(cg.nodes[0]);
    run->tgt = &cg;
    instr_idle(run, &cg);
    rtb_progress(run, "  idle: %.0f instructions/s", run->instr_idle_per_s);
    for (size_t i = 0; i < 2 && !*run->interrupted; i++) {
      const rtb_point *pt = NULL;
      for (size_t k = 0; k < run->opt.npoints; k++)
        if (strcmp(run->opt.points[k].name, names[i]) == 0)
          pt = &run->opt.points[k];
      for (size_t v = 0; v < nv && pt != NULL && !*run->interrupted; v++)
        if (vs[v].mode != RTB_PING)
          instr_pass(run, pt, &vs[v]);
    }
  }
  run->tgt = timed;
  rtb_instr_stop(&cg);
  for (size_t i = 0; i < run->ninstr; i++) {
    const rtb_row *c = &run->instr[i];
    for (size_t j = 0; j < run->nrows; j++) {
      rtb_row *r = &run->rows[j];
      if (r->shards == 0 && r->mode == c->mode &&
          strcmp(r->point, c->point) == 0 &&
          memcmp(&r->kind, &c->kind, sizeof(r->kind)) == 0) {
        r->instr_per_grant = c->instr_per_grant;
        r->instr_grants = c->instr_grants;
      }
    }
  }
}

/* The table, the targets, the JSON lines (and --json, --data). */
static void report(const rtb_run *run) {
  rtb_print_table(run, stdout);
  printf("\n");
  rtb_print_instructions(run, stdout);
  if (run->ninstr > 0)
    printf("\n");
  rtb_print_targets(run, stdout);
  printf("\n");
  rtb_print_ratios(run, stdout);
  FILE *jf = run->opt.json != NULL ? fopen(run->opt.json, "w") : NULL;
  if (run->opt.json != NULL && jf == NULL)
    perror(run->opt.json);
  for (size_t i = 0; i < run->nrows; i++) {
    rtb_json_row(run, stdout, &run->rows[i]);
    if (jf != NULL)
      rtb_json_row(run, jf, &run->rows[i]);
  }
  if (jf != NULL)
    fclose(jf);
  rtb_write_data(run);
}

/* The whole run (argv parsed into run->opt); the exit status. */
static int run_all(rtb_run *run) {
  if (setup_process(run) != 0)
    return 1;
  int status = setup_targets(run);
  if (status != 0) {
    teardown(run);
    return status;
  }
  status = 1;
  if (setup_connection(run) != 0)
    goto out;
  run_points(run);
  run_instructions(run);
  report(run);
  rtb_progress(run, "done");
  status = *run->interrupted ? 130 : 0;
  for (size_t i = 0; i < run->nrows; i++) {
    if (run->rows[i].errors > 0)
      status = status ? status : 3;
    if (run->rows[i].f.overlaps > 0)
      status = status ? status : 4;
  }

out:
  teardown(run);
  return status;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--worker") == 0)
    return worker_entry(argc, argv);
  /* Large (the rows), so on the heap rather than main's stack. */
  rtb_run *run = calloc(1, sizeof(*run));
  if (run == NULL) {
    perror("redturn-bench");
    return 1;
  }
  run->shm_fd = -1;
  run->interrupted = &interrupted;
  rtb_parse_options(argc, argv, &run->opt);
  int status = run_all(run);
  free(run);
  return status;
}
