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
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "redturn.h"

static const char *const mode_names[RTB_NMODES] = {"ping", "fair", "spin"};

typedef struct bpoint {
  const char *name;
  unsigned procs, waiters, keys, hold_us;
  uint64_t n;
} bpoint;

/* The scale points of the contract, "solo" (one waiter: the uncontended
 * wait + signal cycle), and k4/k4hold, which with hot, hold and solo make
 * the workload other lock libraries publish (P=4 W=8, K=1 and 4, H=0 and
 * 1000 us). N is scaled down where a mode can only be slow (holds of 1 ms,
 * one sequential waiter). */
static const bpoint default_points[] = {
    {"hot", 4, 8, 1, 0, 20000},        {"spread", 4, 8, 64, 0, 20000},
    {"deep", 4, 25000, 1, 0, 20000},   {"many", 4, 2500, 10000, 0, 100000},
    {"hold", 4, 8, 1, 1000, 5000},     {"solo", 1, 1, 1, 0, 5000},
    {"k4", 4, 8, 4, 0, 20000},         {"k4hold", 4, 8, 4, 1000, 5000},
};
#define NPOINTS (sizeof(default_points) / sizeof(default_points[0]))

static struct {
  const char *url;
  long procs, waiters, keys, hold_us; /* -1: per point */
  long long n;
  double cap_s;
  unsigned modes; /* bit per mode */
  bpoint points[NPOINTS + 1];
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
} opt;

static rtb_server server;
static rtb_sync *sync_conn;
static rtb_shm *shm;
static char spin_sha[41];
static char run_id[16];
static volatile sig_atomic_t interrupted;
static pid_t workers[RTB_MAX_PROCS];
static int own_server;
static int shm_fd = -1;
static char self_exe[4096];

/* ---- rows ------------------------------------------------------------------ */

typedef struct row {
  const char *point;
  int mode;
  unsigned procs, waiters, keys, hold_us;
  uint64_t n_target;
  rtb_figures f;
  double grants_per_s, ratio_to_ping;
  double ping_per_s; /* the ping rate ratio_to_ping divides by */
  double cmds_per_grant, server_cmds_per_grant;
  double redis_cpu_us_per_grant, client_cpu_us_per_grant;
  long long client_rss_kb, redis_used_memory_kb;
  double client_bytes_per_waiter, redis_bytes_per_entry, redis_bytes_per_resource;
  uint64_t errors, lost, reaps;
  int verified;
  uint64_t verify_grants;
  unsigned repeats; /* passes the timing figures are the median of */
} row;

static row rows[NPOINTS * RTB_NMODES + RTB_NMODES];
static size_t nrows;
static unsigned pass_no; /* names each pass's keys */

/* ---- small helpers -------------------------------------------------------- */

static void on_signal(int sig) {
  (void)sig;
  interrupted = 1;
}

static void sleep_us(long us) {
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000L};
  nanosleep(&ts, NULL);
}

static void put(int fd, char c) {
  while (write(fd, &c, 1) < 0 && errno == EINTR) {
  }
}

static double elapsed_s(int64_t since) {
  return (double)(rtb_now_ns() - since) / 1e9;
}

static int64_t run_start;

static void progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void progress(const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "[%6.1fs] ", elapsed_s(run_start));
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}

/* ---- MONITOR: enqueue order ---------------------------------------------- */

typedef struct monctx {
  const rtb_job *job;
  rtb_order *order;
  char marker[64];
  int marker_seen;
  size_t lines;
} monctx;

/* Next "quoted" token of a MONITOR line, unescaped into out. */
static const char *mon_token(const char *p, const char *end, char *out,
                             size_t cap, size_t *len) {
  while (p < end && *p != '"')
    p++;
  if (p >= end)
    return NULL;
  p++;
  size_t n = 0;
  while (p < end && *p != '"') {
    char c = *p++;
    if (c == '\\' && p < end) {
      c = *p++;
      if (c == 'x' && p + 1 < end) {
        char hex[3] = {p[0], p[1], 0};
        c = (char)strtol(hex, NULL, 16);
        p += 2;
      } else if (c == 'n') {
        c = '\n';
      } else if (c == 'r') {
        c = '\r';
      } else if (c == 't') {
        c = '\t';
      }
    }
    if (n + 1 < cap)
      out[n++] = c;
  }
  out[n] = '\0';
  *len = n;
  return p < end ? p + 1 : end;
}

static void on_monitor_line(const char *line, size_t len, void *data) {
  monctx *m = data;
  const char *end = line + len;
  const char *p = memchr(line, ']', len);
  char cmd[16], key[256], arg[128];
  size_t cl, kl, al;
  m->lines++;
  if (p == NULL || (p = mon_token(p, end, cmd, sizeof(cmd), &cl)) == NULL ||
      (p = mon_token(p, end, key, sizeof(key), &kl)) == NULL)
    return;
  if (strcasecmp(cmd, "echo") == 0) {
    if (strcmp(key, m->marker) == 0)
      m->marker_seen = 1;
    return;
  }
  size_t pl = strlen(m->job->prefix);
  if (kl <= pl || strncmp(key, m->job->prefix, pl) != 0 || key[pl] != ':')
    return;
  if (mon_token(p, end, arg, sizeof(arg), &al) == NULL)
    return;
  if (m->job->mode == RTB_FAIR && strcasecmp(cmd, "rpush") == 0) {
    /* arg: "<client id>:<seq>:<ttl>" */
    if (al < RTB_ID_LEN + 2 || arg[RTB_ID_LEN] != ':')
      return;
    for (unsigned i = 0; i < m->job->procs; i++) {
      if (strncmp(shm->client_id[i], arg, RTB_ID_LEN) == 0) {
        rtb_order_add(m->order, i, strtoull(arg + RTB_ID_LEN + 1, NULL, 10));
        return;
      }
    }
  } else if (m->job->mode == RTB_SPIN && strcasecmp(cmd, "set") == 0) {
    /* arg: the token "<proc>.<seq>" */
    char *dot;
    unsigned long proc = strtoul(arg, &dot, 10);
    if (*dot == '.' && proc < m->job->procs)
      rtb_order_add(m->order, (uint32_t)proc, strtoull(dot + 1, NULL, 10));
  }
}

/* ---- the memory probe's blocker: holds every resource --------------------- */

typedef struct blocker {
  uv_loop_t loop;
  rt_client_t *client;
  rt_lock_t **locks;
  unsigned n, granted, failed, released;
  int closed;
} blocker;

static void blk_granted(rt_lock_t *l, int status, void *data) {
  blocker *b = data;
  (void)l;
  if (status == 0)
    b->granted++;
  else
    b->failed++;
}

static void blk_released(rt_lock_t *l, int status, void *data) {
  blocker *b = data;
  (void)l;
  (void)status;
  b->released++;
}

static void blk_closed(rt_client_t *c, void *data) {
  blocker *b = data;
  (void)c;
  b->closed = 1;
}

static int blocker_start(blocker *b, const rtb_job *job) {
  memset(b, 0, sizeof(*b));
  b->n = job->keys;
  b->locks = calloc(b->n, sizeof(*b->locks));
  if (b->locks == NULL || uv_loop_init(&b->loop) != 0)
    return -1;
  rt_options_t o;
  rt_options_init(&o);
  o.url = job->url;
  o.prefix = job->prefix;
  if (rt_client_open(&b->loop, &o, NULL, NULL, &b->client) != 0)
    return -1;
  for (unsigned i = 0; i < b->n; i++) {
    char name[16];
    int len = snprintf(name, sizeof(name), "r%u", i);
    if (rt_wait(b->client, name, (size_t)len, job->ttl_ms, RT_FOREVER,
                blk_granted, b, &b->locks[i]) != 0)
      return -1;
  }
  while (b->granted + b->failed < b->n)
    uv_run(&b->loop, UV_RUN_ONCE);
  return b->failed == 0 ? 0 : -1;
}

static void blocker_stop(blocker *b) {
  if (b->client != NULL) {
    unsigned sent = 0;
    for (unsigned i = 0; i < b->n; i++)
      if (b->locks[i] != NULL && rt_lock_state(b->locks[i]) == RT_LOCK_HELD &&
          rt_signal(b->locks[i], blk_released, b) == 0)
        sent++;
    while (b->released < sent)
      uv_run(&b->loop, UV_RUN_ONCE);
    rt_client_close(b->client, blk_closed, b);
    while (!b->closed)
      uv_run(&b->loop, UV_RUN_ONCE);
    uv_run(&b->loop, UV_RUN_DEFAULT);
    uv_loop_close(&b->loop);
  }
  free(b->locks);
}

/* ---- one pass: fork the workers, run, collect ------------------------------ */

typedef struct pass {
  rtb_rec *recs;
  size_t n;
  rtb_head heads[RTB_MAX_PROCS];
  int64_t t_go, t_stop;
  double redis_cpu_s;
  long long server_calls; /* -1 if unknown */
  long long used_mem_peak;
  char *cmdstats;         /* INFO commandstats at the end (verbose) */
  rtb_order *order;
  /* memory probe */
  double client_bytes_per_waiter, redis_bytes_per_entry, redis_bytes_per_resource;
} pass;

static double info_cpu(void) {
  char *s = rtb_sync_info(sync_conn, "cpu");
  double v = NAN;
  if (s != NULL)
    v = rtb_info_num(s, "used_cpu_sys") + rtb_info_num(s, "used_cpu_user");
  free(s);
  return v;
}

static long long info_used_memory(void) {
  char *s = rtb_sync_info(sync_conn, "memory");
  long long v = -1;
  if (s != NULL) {
    double d = rtb_info_num(s, "used_memory");
    v = isnan(d) ? -1 : (long long)d;
  }
  free(s);
  return v;
}

static void kill_workers(unsigned procs) {
  for (unsigned i = 0; i < procs; i++)
    if (workers[i] > 0)
      kill(workers[i], SIGKILL);
}

/* Wait for every worker to exit; monitor (may be NULL) keeps being read. */
static int reap_workers(unsigned procs, rtb_monitor *mon, double timeout_s) {
  int64_t t0 = rtb_now_ns();
  unsigned left = 0;
  int bad = 0;
  for (unsigned i = 0; i < procs; i++)
    left += workers[i] > 0;
  while (left > 0) {
    for (unsigned i = 0; i < procs; i++) {
      int st;
      if (workers[i] > 0 && waitpid(workers[i], &st, WNOHANG) == workers[i]) {
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
          fprintf(stderr, "redturn-bench: worker %u ended with status %d\n", i,
                  WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
          bad = 1;
        }
        workers[i] = 0;
        left--;
      }
    }
    if (left == 0)
      break;
    if (elapsed_s(t0) > timeout_s || interrupted) {
      fprintf(stderr, "redturn-bench: workers did not finish; killing them\n");
      kill_workers(procs);
      timeout_s = 1e9;
      bad = 1;
    }
    if (mon != NULL) {
      struct pollfd pf = {rtb_monitor_fd(mon), POLLIN, 0};
      if (poll(&pf, 1, 1) > 0)
        rtb_monitor_read(mon);
    } else {
      sleep_us(1000);
    }
  }
  return bad ? -1 : 0;
}

static void flush_keys(void) {
  if (own_server)
    rtb_sync_cmd(sync_conn, "FLUSHALL");
}

/* kind: 'm' measured pass, 'v' verification under MONITOR, 'p' memory
 * probe (fair). */
static int run_pass(const rtb_job *job0, double cap_s, int kind, pass *out) {
  rtb_job job = *job0;
  int ctl[RTB_MAX_PROCS];
  FILE *files[RTB_MAX_PROCS];
  rtb_monitor *mon = NULL;
  monctx mc;
  int rc = -1;
  unsigned procs = job.procs;

  memset(out, 0, sizeof(*out));
  out->server_calls = -1;
  out->client_bytes_per_waiter = NAN;
  out->redis_bytes_per_entry = NAN;
  out->redis_bytes_per_resource = NAN;
  snprintf(job.prefix, sizeof(job.prefix), "rtb-%s-%c%u", run_id, kind,
           pass_no++);
  flush_keys();
  memset(shm, 0, sizeof(*shm));
  shm->job = job;

  fflush(NULL);
  for (unsigned i = 0; i < procs; i++) {
    int fds[2];
    files[i] = tmpfile();
    if (files[i] == NULL || pipe(fds) != 0) {
      perror("redturn-bench: pipe/tmpfile");
      kill_workers(i);
      return -1;
    }
    pid_t pid = fork();
    if (pid < 0) {
      perror("redturn-bench: fork");
      kill_workers(i);
      return -1;
    }
    if (pid == 0) {
      /* A fresh process image: the worker's memory figures must not
       * include pages inherited from this one. */
      int out_fd = fileno(files[i]);
      char a_proc[16], a_ctl[16], a_out[16], a_shm[16];
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      for (int fd = 3; fd < 4096; fd++)
        if (fd != fds[0] && fd != out_fd && fd != shm_fd)
          close(fd);
      snprintf(a_proc, sizeof(a_proc), "%u", i);
      snprintf(a_ctl, sizeof(a_ctl), "%d", fds[0]);
      snprintf(a_out, sizeof(a_out), "%d", out_fd);
      snprintf(a_shm, sizeof(a_shm), "%d", shm_fd);
      execl(self_exe, "redturn-bench", "--worker", a_proc, a_ctl, a_out, a_shm,
            (char *)NULL);
      _exit(127);
    }
    close(fds[0]);
    ctl[i] = fds[1];
    workers[i] = pid;
  }

  /* Ready: every worker connected. */
  int64_t t0 = rtb_now_ns();
  while (atomic_load(&shm->ready) < (int)procs) {
    if (atomic_load(&shm->failed) > 0 || elapsed_s(t0) > 30 || interrupted) {
      fprintf(stderr, "redturn-bench: workers failed to connect\n");
      kill_workers(procs);
      reap_workers(procs, NULL, 5);
      goto done;
    }
    sleep_us(1000);
  }

  if (kind == 'p') {
    /* Client: bytes malloc handed out while the W waits are pending (the
     * workers are forked from this process, so their resident set includes
     * pages inherited from it; the heap count does not). Redis: MEMORY USAGE
     * of the resources' keys, so that client buffers (which Redis resizes
     * on its own schedule) stay out of it. */
    blocker b;
    long long q0 = 0, h0 = 0, q1 = 0, h1 = 0;
    long long m0 = info_used_memory();
    if (blocker_start(&b, &job) != 0) {
      fprintf(stderr, "redturn-bench: probe: the blocker could not lock\n");
      blocker_stop(&b);
      kill_workers(procs);
      reap_workers(procs, NULL, 5);
      goto done;
    }
    long long m1 = info_used_memory();
    int ku = rtb_sync_key_usage(sync_conn, job.prefix, job.keys, &q0, &h0);
    for (unsigned i = 0; i < procs; i++)
      put(ctl[i], 'p');
    t0 = rtb_now_ns();
    while (atomic_load(&shm->probe_done) < (int)procs && elapsed_s(t0) < 60 &&
           !interrupted)
      sleep_us(1000);
    long long m2 = info_used_memory();
    ku |= rtb_sync_key_usage(sync_conn, job.prefix, job.keys, &q1, &h1);
    uint64_t queued = 0;
    double heap = 0, rss = 0;
    for (unsigned i = 0; i < procs; i++) {
      queued += shm->probe_queued[i];
      heap += (double)(shm->probe_heap_after[i] - shm->probe_heap_before[i]);
      rss += (double)(shm->probe_rss_after[i] - shm->probe_rss_before[i]);
    }
    if (opt.verbose) {
      progress("  probe: client heap +%.0f, RSS +%.0f bytes for %" PRIu64
               " pending waits",
               heap, rss, queued);
      progress("  probe: Redis used_memory %lld -> %lld -> %lld; keys q+m %lld "
               "-> %lld, h %lld -> %lld",
               m0, m1, m2, q0, q1, h0, h1);
    }
    for (unsigned i = 0; i < procs; i++)
      put(ctl[i], 's');
    rc = reap_workers(procs, NULL, 60);
    blocker_stop(&b);
    if (queued != (uint64_t)procs * job.waiters || ku != 0) {
      fprintf(stderr, "redturn-bench: probe: %" PRIu64 " of %u waits queued\n",
              queued, procs * job.waiters);
      rc = -1;
    }
    if (queued > 0) {
      out->client_bytes_per_waiter = heap / (double)queued;
      out->redis_bytes_per_entry = (double)(q1 - q0) / (double)queued;
    }
    out->redis_bytes_per_resource = (double)(q0 + h0) / (double)job.keys;
    goto done;
  }

  if (kind == 'v') {
    memset(&mc, 0, sizeof(mc));
    mc.job = &job;
    mc.order = rtb_order_new();
    snprintf(mc.marker, sizeof(mc.marker), "rtb-end-%s-%u", run_id, pass_no);
    mon = mc.order != NULL ? rtb_monitor_open(&server, on_monitor_line, &mc)
                           : NULL;
    if (mon == NULL) {
      rtb_order_free(mc.order);
      kill_workers(procs);
      reap_workers(procs, NULL, 5);
      goto done;
    }
  }

  double cpu0 = info_cpu();
  int have_stats = rtb_sync_cmd(sync_conn, "CONFIG RESETSTAT") == 0;
  out->used_mem_peak = info_used_memory();
  out->t_go = rtb_now_ns();
  for (unsigned i = 0; i < procs; i++)
    put(ctl[i], 'g');

  int64_t cap_ns = (int64_t)(cap_s * 1e9);
  int64_t next_mem = out->t_go + 100000000;
  int64_t next_reap = out->t_go + 20000000;
  int broke = 0;
  while (!atomic_load(&shm->stop)) {
    if (mon != NULL) {
      struct pollfd pf = {rtb_monitor_fd(mon), POLLIN, 0};
      if (poll(&pf, 1, 2) > 0 && rtb_monitor_read(mon) != 0)
        broke = 1;
    } else {
      sleep_us(2000);
    }
    int64_t now = rtb_now_ns();
    if (now - out->t_go >= cap_ns || interrupted || broke) {
      int64_t zero = 0;
      atomic_compare_exchange_strong(&shm->t_stop, &zero, now);
      atomic_store(&shm->stop, 1);
    }
    if (mon == NULL && now >= next_mem) {
      long long m = info_used_memory();
      if (m > out->used_mem_peak)
        out->used_mem_peak = m;
      next_mem = now + 100000000;
    }
    for (unsigned i = 0; now >= next_reap && i < procs; i++) {
      int st;
      if (waitpid(workers[i], &st, WNOHANG) == workers[i]) {
        fprintf(stderr, "redturn-bench: worker %u exited early\n", i);
        workers[i] = 0;
        broke = 1;
      }
    }
    if (now >= next_reap)
      next_reap = now + 20000000;
  }
  out->t_stop = atomic_load(&shm->t_stop);
  double cpu1 = info_cpu();
  if (have_stats) {
    out->cmdstats = rtb_sync_info(sync_conn, "commandstats");
    out->server_calls = rtb_info_calls(out->cmdstats);
  }
  if (mon == NULL) {
    long long m = info_used_memory();
    if (m > out->used_mem_peak)
      out->used_mem_peak = m;
  }
  out->redis_cpu_s = cpu1 - cpu0;
  for (unsigned i = 0; i < procs; i++)
    put(ctl[i], 's');
  rc = reap_workers(procs, mon, 60);
  if (broke)
    rc = -1;

  if (mon != NULL) {
    /* Everything Redis executed before the marker has been seen. */
    rtb_sync_cmd(sync_conn, "ECHO %s", mc.marker);
    t0 = rtb_now_ns();
    while (!mc.marker_seen && elapsed_s(t0) < 30) {
      struct pollfd pf = {rtb_monitor_fd(mon), POLLIN, 0};
      if (poll(&pf, 1, 10) > 0 && rtb_monitor_read(mon) != 0)
        break;
    }
    if (!mc.marker_seen) {
      fprintf(stderr, "redturn-bench: MONITOR stream incomplete\n");
      rc = -1;
    }
    rtb_monitor_close(mon);
    out->order = mc.order;
    if (opt.verbose)
      progress("  monitor: %zu lines, %zu enqueues", mc.lines,
               rtb_order_len(mc.order));
  }

  /* Collect the records. */
  for (unsigned i = 0; i < procs; i++) {
    int fd = fileno(files[i]);
    rtb_head h;
    lseek(fd, 0, SEEK_SET);
    if (read(fd, &h, sizeof(h)) != (ssize_t)sizeof(h)) {
      fprintf(stderr, "redturn-bench: worker %u left no results\n", i);
      rc = -1;
      continue;
    }
    out->heads[i] = h;
    rtb_rec *n = realloc(out->recs, (out->n + h.nrec + 1) * sizeof(*n));
    if (n == NULL) {
      rc = -1;
      continue;
    }
    out->recs = n;
    size_t want = h.nrec * sizeof(*n);
    char *dst = (char *)(out->recs + out->n);
    while (want > 0) {
      ssize_t got = read(fd, dst, want);
      if (got <= 0)
        break;
      dst += got;
      want -= (size_t)got;
    }
    if (want == 0)
      out->n += h.nrec;
    else
      rc = -1;
  }

done:
  for (unsigned i = 0; i < procs; i++) {
    close(ctl[i]);
    fclose(files[i]);
    workers[i] = 0;
  }
  return rc;
}

static void pass_free(pass *p) {
  free(p->recs);
  free(p->cmdstats);
  rtb_order_free(p->order);
}

/* ---- output ---------------------------------------------------------------- */

static void json_num(FILE *f, const char *name, double v, int prec) {
  if (isnan(v) || isinf(v))
    fprintf(f, ",\"%s\":null", name);
  else
    fprintf(f, ",\"%s\":%.*f", name, prec, v);
}

static void json_row(FILE *f, const row *r) {
  const rtb_figures *g = &r->f;
  fprintf(f, "{\"mode\":\"%s\",\"point\":\"%s\",\"procs\":%u,\"waiters\":%u,"
             "\"keys\":%u,\"hold_us\":%u,\"n_target\":%" PRIu64
             ",\"grants\":%" PRIu64,
          mode_names[r->mode], r->point, r->procs, r->waiters, r->keys,
          r->hold_us, r->n_target, g->grants);
  json_num(f, "wall_s", g->wall_s, 3);
  json_num(f, "grants_per_s", r->grants_per_s, 1);
  json_num(f, "ratio_to_ping", r->ratio_to_ping, 3);
  json_num(f, "ping_per_s", r->mode == RTB_PING ? r->grants_per_s : r->ping_per_s, 1);
  json_num(f, "acquire_ms_p50", g->acquire_ms_p50, 3);
  json_num(f, "acquire_ms_p99", g->acquire_ms_p99, 3);
  json_num(f, "acquire_ms_max", g->acquire_ms_max, 3);
  json_num(f, "handoff_us_p50", g->handoff_us_p50, 1);
  json_num(f, "handoff_us_p99", g->handoff_us_p99, 1);
  json_num(f, "redis_cmds_per_grant", r->cmds_per_grant, 3);
  json_num(f, "redis_cmds_per_grant_server", r->server_cmds_per_grant, 3);
  json_num(f, "redis_cpu_us_per_grant", r->redis_cpu_us_per_grant, 2);
  json_num(f, "client_cpu_us_per_grant", r->client_cpu_us_per_grant, 2);
  if (r->verified && g->fifo_inversions >= 0)
    fprintf(f, ",\"fifo_inversions\":%" PRId64, g->fifo_inversions);
  else
    fprintf(f, ",\"fifo_inversions\":null");
  fprintf(f, ",\"fifo_checked_grants\":%" PRIu64 ",\"overlaps\":%" PRIu64
             ",\"per_waiter_min\":%" PRIu64 ",\"per_waiter_max\":%" PRIu64,
          g->fifo_checked, g->overlaps, g->per_waiter_min, g->per_waiter_max);
  json_num(f, "jain_index", g->jain, 4);
  fprintf(f, ",\"client_rss_kb\":%lld,\"redis_used_memory_kb\":%lld",
          r->client_rss_kb, r->redis_used_memory_kb);
  json_num(f, "client_bytes_per_waiter", r->client_bytes_per_waiter, 0);
  json_num(f, "redis_bytes_per_entry", r->redis_bytes_per_entry, 0);
  json_num(f, "redis_bytes_per_resource", r->redis_bytes_per_resource, 0);
  json_num(f, "handoffs", (double)g->handoffs, 0);
  json_num(f, "handoffs_same_waiter",
           g->handoffs ? (double)g->handoffs_same_waiter / (double)g->handoffs : NAN, 3);
  json_num(f, "handoffs_same_proc",
           g->handoffs ? (double)g->handoffs_same_proc / (double)g->handoffs : NAN, 3);
  json_num(f, "attempts_per_grant", r->mode == RTB_SPIN ? g->attempts_per_grant : NAN, 2);
  if (r->mode == RTB_SPIN)
    fprintf(f, ",\"spin_retry_ms\":%u", opt.retry_ms);
  fprintf(f, ",\"repeats\":%u,\"errors\":%" PRIu64 ",\"lost\":%" PRIu64 "}\n",
          r->repeats, r->errors, r->lost);
}

static void cell(char *buf, size_t cap, double v, int prec) {
  if (isnan(v))
    snprintf(buf, cap, "-");
  else
    snprintf(buf, cap, "%.*f", prec, v);
}

static void print_table(FILE *f) {
  if (opt.repeat > 1)
    fprintf(f, "(timing figures: medians of %u alternating repeats; inv, "
               "memory: first repeat; ovl: all)\n",
            opt.repeat);
  fprintf(f, "%-6s %-4s %2s %4s %5s %4s %6s %6s %8s %5s %7s %7s %8s %7s %8s "
             "%5s %6s %6s %6s %4s %3s %4s %4s %6s %7s %7s\n",
          "point", "mode", "P", "W", "K", "H", "grants", "wall_s", "grants/s",
          "/ping", "acq_p50", "acq_p99", "acq_max", "ho_p50", "ho_p99",
          "cmd/g", "srv/g", "rcpu/g", "ccpu/g", "inv", "ovl", "wmin", "wmax",
          "jain", "rss_kb", "redisKB");
  for (size_t i = 0; i < nrows; i++) {
    const row *r = &rows[i];
    const rtb_figures *g = &r->f;
    char c[16][24];
    cell(c[0], 24, g->wall_s, 2);
    cell(c[1], 24, r->grants_per_s, 0);
    cell(c[2], 24, r->ratio_to_ping, 2);
    cell(c[3], 24, g->acquire_ms_p50, 2);
    cell(c[4], 24, g->acquire_ms_p99, 2);
    cell(c[5], 24, g->acquire_ms_max, 1);
    cell(c[6], 24, g->handoff_us_p50, 0);
    cell(c[7], 24, g->handoff_us_p99, 0);
    cell(c[8], 24, r->cmds_per_grant, 2);
    cell(c[9], 24, r->server_cmds_per_grant, 1);
    cell(c[10], 24, r->redis_cpu_us_per_grant, 1);
    cell(c[11], 24, r->client_cpu_us_per_grant, 1);
    cell(c[12], 24, g->jain, 3);
    if (r->verified && g->fifo_inversions >= 0)
      snprintf(c[13], 24, "%" PRId64, g->fifo_inversions);
    else
      snprintf(c[13], 24, "-");
    fprintf(f, "%-6s %-4s %2u %4u %5u %4u %6" PRIu64 " %6s %8s %5s %7s %7s "
               "%8s %7s %8s %5s %6s %6s %6s %4s %3" PRIu64 " %4" PRIu64
               " %4" PRIu64 " %6s %7lld %7lld\n",
            r->point, mode_names[r->mode], r->procs, r->waiters, r->keys,
            r->hold_us, g->grants, c[0], c[1], c[2], c[3], c[4], c[5], c[6],
            c[7], c[8], c[9], c[10], c[11], c[13], g->overlaps,
            g->per_waiter_min, g->per_waiter_max, c[12], r->client_rss_kb,
            r->redis_used_memory_kb);
  }
  for (size_t i = 0; i < nrows; i++) {
    const row *r = &rows[i];
    if (!isnan(r->client_bytes_per_waiter))
      fprintf(f, "memory (%s, %s): %.0f client bytes per pending waiter, "
                 "%.0f Redis bytes per queued entry, %.0f Redis bytes per "
                 "locked resource\n",
              r->point, mode_names[r->mode], r->client_bytes_per_waiter,
              r->redis_bytes_per_entry, r->redis_bytes_per_resource);
  }
}

static const row *find_row(const char *point, int mode) {
  for (size_t i = 0; i < nrows; i++)
    if (rows[i].mode == mode && strcmp(rows[i].point, point) == 0)
      return &rows[i];
  return NULL;
}

static void verdict(FILE *f, const char *what, int known, int met,
                    const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void verdict(FILE *f, const char *what, int known, int met,
                    const char *fmt, ...) {
  va_list ap;
  fprintf(f, "  %-8s %-44s ", known ? (met ? "MET" : "MISSED") : "n/a", what);
  va_start(ap, fmt);
  vfprintf(f, fmt, ap);
  va_end(ap);
  fputc('\n', f);
}

enum { GRANTS_PER_S, REDIS_CPU_PER_GRANT };

/* fair's figure over spin's at a point, or NAN if either is missing. */
static double over_spin(const char *point, int figure) {
  const row *f = find_row(point, RTB_FAIR), *s = find_row(point, RTB_SPIN);
  if (f == NULL || s == NULL)
    return NAN;
  if (figure == GRANTS_PER_S)
    return f->grants_per_s / s->grants_per_s;
  return f->redis_cpu_us_per_grant / s->redis_cpu_us_per_grant;
}

/* The performance targets (docs/PERFORMANCE.md), checked on this run. */
static void print_targets(FILE *f) {
  const row *hf = find_row("hot", RTB_FAIR), *hs = find_row("hot", RTB_SPIN);
  const row *df = find_row("deep", RTB_FAIR), *sf = find_row("solo", RTB_FAIR);
  fprintf(f, "targets (ratios within this run):\n");
  static const char *const spread_points[] = {"spread", "many"};
  for (size_t i = 0; i < 2; i++) {
    const char *p = spread_points[i];
    double g = over_spin(p, GRANTS_PER_S), c = over_spin(p, REDIS_CPU_PER_GRANT);
    char what[64];
    snprintf(what, sizeof(what), "%s: fair >= 0.8 x spin grants/s", p);
    verdict(f, what, !isnan(g), g >= 0.8, "%.2f x", g);
    snprintf(what, sizeof(what), "%s: fair redis cpu/grant <= 1.5 x spin", p);
    verdict(f, what, !isnan(c), c <= 1.5, "%.2f x", c);
  }
  if (hf)
    verdict(f, "hot: fair >= 0.8 x ping", !isnan(hf->ratio_to_ping),
            hf->ratio_to_ping >= 0.8, "%.0f vs %.0f grants/s: %.2f x",
            hf->grants_per_s, hf->ping_per_s, hf->ratio_to_ping);
  if (hf && hs) {
    double c = over_spin("hot", REDIS_CPU_PER_GRANT);
    verdict(f, "hot: fair redis cpu/grant <= 1.0 x spin", 1, c <= 1.0,
            "%.1f vs %.1f us: %.2f x", hf->redis_cpu_us_per_grant,
            hs->redis_cpu_us_per_grant, c);
    verdict(f, "hot: fair acquire p99 <= spin's / 10", 1,
            hf->f.acquire_ms_p99 * 10 <= hs->f.acquire_ms_p99,
            "%.2f vs %.2f ms", hf->f.acquire_ms_p99, hs->f.acquire_ms_p99);
  }
  if (sf)
    verdict(f, "solo: wait+signal cycle <= 2.2 ping round trips",
            !isnan(sf->ratio_to_ping), 1.0 / sf->ratio_to_ping <= 2.2,
            "%.2f round trips", 1.0 / sf->ratio_to_ping);
  if (df && hf)
    verdict(f, "deep (100 000 waiters): fair >= 0.9 x hot fair", 1,
            df->grants_per_s >= 0.9 * hf->grants_per_s, "%.0f vs %.0f: %.2f x",
            df->grants_per_s, hf->grants_per_s,
            df->grants_per_s / hf->grants_per_s);
  if (df) {
    verdict(f, "deep: client bytes per pending waiter <= 400",
            !isnan(df->client_bytes_per_waiter),
            df->client_bytes_per_waiter <= 400, "%.0f",
            df->client_bytes_per_waiter);
    verdict(f, "deep: Redis bytes per queued entry <= 40",
            !isnan(df->redis_bytes_per_entry), df->redis_bytes_per_entry <= 40,
            "%.0f", df->redis_bytes_per_entry);
  }
  int cmds_ok = 1, fifo_ok = 1, fifo_known = 1, any = 0;
  double worst_cmds = 0;
  for (size_t i = 0; i < nrows; i++) {
    const row *r = &rows[i];
    if (r->mode != RTB_FAIR)
      continue;
    any = 1;
    if (!(r->cmds_per_grant <= 2.0))
      cmds_ok = 0;
    if (r->cmds_per_grant > worst_cmds)
      worst_cmds = r->cmds_per_grant;
    if (r->f.overlaps != 0 || (r->verified && r->f.fifo_inversions != 0))
      fifo_ok = 0;
    if (!r->verified)
      fifo_known = 0;
  }
  if (any) {
    verdict(f, "fair: <= 2 client commands per grant, all", 1, cmds_ok,
            "worst %.3f", worst_cmds);
    verdict(f, "fair: fifo_inversions = 0, overlaps = 0, all", fifo_known || !fifo_ok,
            fifo_ok, "%s", fifo_known ? "" : "(FIFO not verified: --no-verify)");
  }
}

static void write_data(void) {
  if (opt.data_dir == NULL)
    return;
  char path[512];
  snprintf(path, sizeof(path), "%s/grants.dat", opt.data_dir);
  FILE *f = fopen(path, "w");
  if (f == NULL) {
    perror(path);
    return;
  }
  fprintf(f, "# point ping fair spin (grants per second)\n");
  for (size_t p = 0; p < opt.npoints; p++) {
    const char *name = opt.points[p].name;
    fprintf(f, "%s", name);
    for (int m = 0; m < RTB_NMODES; m++) {
      const row *r = find_row(name, m);
      if (r != NULL && !isnan(r->grants_per_s))
        fprintf(f, " %.1f", r->grants_per_s);
      else
        fprintf(f, " NaN");
    }
    fputc('\n', f);
  }
  fclose(f);
}

static void write_handoffs(const row *r, const double *h, size_t n) {
  if (opt.data_dir == NULL || n == 0)
    return;
  char path[512];
  snprintf(path, sizeof(path), "%s/handoff-%s-%s.dat", opt.data_dir, r->point,
           mode_names[r->mode]);
  FILE *f = fopen(path, "w");
  if (f == NULL) {
    perror(path);
    return;
  }
  fprintf(f, "# handoff latency CDF: fraction, microseconds (%zu handoffs)\n",
          n);
  for (int i = 1; i <= 400; i++) {
    double q = i / 400.0;
    fprintf(f, "%.4f %.1f\n", q, rtb_quantile(h, n, q));
  }
  fclose(f);
}

/* ---- driving a point ------------------------------------------------------ */

static void fill_job(rtb_job *job, const bpoint *pt, int mode) {
  memset(job, 0, sizeof(*job));
  job->mode = mode;
  job->procs = mode == RTB_PING ? 1 : pt->procs;
  job->waiters = mode == RTB_PING ? 1 : pt->waiters;
  job->keys = mode == RTB_PING ? 1 : pt->keys;
  job->hold_us = mode == RTB_PING ? 0 : pt->hold_us;
  /* ping: at least 50000 round trips (about a second), the denominator of
   * every ratio deserves the samples. */
  job->n_target = mode == RTB_PING && pt->n < 50000 ? 50000 : pt->n;
  job->ttl_ms = opt.ttl_ms;
  job->retry_ms = opt.retry_ms;
  job->port = server.port;
  snprintf(job->host, sizeof(job->host), "%s", server.host);
  snprintf(job->password, sizeof(job->password), "%s",
           server.password != NULL ? server.password : "");
  snprintf(job->url, sizeof(job->url), "%s", opt.url);
  snprintf(job->spin_sha, sizeof(job->spin_sha), "%s", spin_sha);
}

/* Round trips per second of one PING connection, measured for half a
 * second right before a lock pass: this machine's speed changes within
 * minutes, and the ratio must compare like with like. -1 on failure. */
static double adjacent_ping(const bpoint *pt) {
  rtb_job job;
  pass p;
  fill_job(&job, pt, RTB_PING);
  job.n_target = 20000;
  double rate = -1;
  if (run_pass(&job, 0.5, 'm', &p) == 0 && p.t_stop > p.t_go) {
    uint64_t n = 0;
    for (size_t i = 0; i < p.n; i++)
      n += p.recs[i].t_grant <= p.t_stop;
    rate = (double)n / ((double)(p.t_stop - p.t_go) / 1e9);
  }
  pass_free(&p);
  return rate;
}

/* One measured pass of mode at pt into *r (and, when checks is set, its
 * verification pass and memory probe). 0, or -1 if the pass failed. */
static int run_mode(const bpoint *pt, int mode, double ping_rate, int checks,
                    row *r) {
  rtb_job job;
  pass p;
  fill_job(&job, pt, mode);
  memset(r, 0, sizeof(*r));
  r->point = pt->name;
  r->mode = mode;
  r->procs = job.procs;
  r->waiters = job.waiters;
  r->keys = mode == RTB_PING ? 0 : job.keys;
  r->hold_us = job.hold_us;
  r->n_target = job.n_target;
  r->client_bytes_per_waiter = NAN;
  r->redis_bytes_per_entry = NAN;
  r->redis_bytes_per_resource = NAN;
  r->ratio_to_ping = NAN;

  double cap = mode == RTB_PING ? (opt.cap_s < 2 ? opt.cap_s : 2) : opt.cap_s;
  progress("%s %s: P=%u W=%u K=%u H=%u N=%" PRIu64 " (cap %.0f s)", pt->name,
           mode_names[mode], job.procs, job.waiters, job.keys, job.hold_us,
           job.n_target, cap);
  int rc = run_pass(&job, cap, 'm', &p);
  if (p.n == 0 && rc != 0) {
    fprintf(stderr, "redturn-bench: %s %s failed\n", pt->name, mode_names[mode]);
    pass_free(&p);
    return -1;
  }
  double *hand = NULL;
  rtb_analyze(p.recs, p.n, mode == RTB_FAIR, p.t_go, p.t_stop,
              job.procs * job.waiters, NULL, &r->f, &hand);
  uint64_t cmds = 0, cpu = 0, wgrants = 0;
  long long rss = 0;
  for (unsigned i = 0; i < job.procs; i++) {
    cmds += p.heads[i].cmds;
    wgrants += p.heads[i].grants;
    cpu += p.heads[i].cpu_us;
    if (p.heads[i].rss_kb > rss)
      rss = p.heads[i].rss_kb;
    r->errors += p.heads[i].errors;
    r->lost += p.heads[i].lost;
    r->reaps += p.heads[i].reaps;
  }
  double g = (double)r->f.grants;
  r->grants_per_s = r->f.wall_s > 0 ? g / r->f.wall_s : NAN;
  r->ping_per_s = ping_rate;
  if (mode == RTB_PING)
    r->ratio_to_ping = 1.0;
  else if (ping_rate > 0)
    r->ratio_to_ping = r->grants_per_s / ping_rate;
  /* Client-side figures over what the workers saw until they noticed the
   * end (a few events after t_stop), Redis-side over the window. */
  r->cmds_per_grant = wgrants > 0 ? (double)cmds / (double)wgrants : NAN;
  r->server_cmds_per_grant =
      g > 0 && p.server_calls >= 0 ? (double)p.server_calls / g : NAN;
  r->redis_cpu_us_per_grant = g > 0 ? p.redis_cpu_s * 1e6 / g : NAN;
  r->client_cpu_us_per_grant = wgrants > 0 ? (double)cpu / (double)wgrants : NAN;
  r->client_rss_kb = rss;
  r->redis_used_memory_kb = p.used_mem_peak >= 0 ? p.used_mem_peak / 1024 : -1;
  if (mode != RTB_PING)
    write_handoffs(r, hand, r->f.handoffs);
  if (opt.verbose && p.cmdstats != NULL) {
    fprintf(stderr, "  commandstats:\n");
    for (char *s = strtok(p.cmdstats, "\r\n"); s != NULL; s = strtok(NULL, "\r\n"))
      if (strncmp(s, "cmdstat_", 8) == 0)
        fprintf(stderr, "    %s\n", s);
  }
  free(hand);
  pass_free(&p);
  progress("  %" PRIu64 " grants in %.2f s: %.0f/s", r->f.grants, r->f.wall_s,
           r->grants_per_s);

  if (mode != RTB_PING && opt.verify && checks) {
    job.n_target = job.n_target < (uint64_t)opt.verify_n ? job.n_target
                                                        : (uint64_t)opt.verify_n;
    /* Under MONITOR every waiter must first be queued: allow 1 s per
     * 5000 of them (the deep point's 100 000 take about 10 s). */
    double verify_s = fmax(opt.verify_s, job.procs * job.waiters / 5000.0);
    if (run_pass(&job, verify_s, 'v', &p) == 0 || p.n > 0) {
      uint64_t ov = 0, checked = 0, unmatched = 0;
      int64_t inv = -1;
      rtb_check(p.recs, p.n, mode == RTB_FAIR, p.order, &ov, &inv, &checked,
                &unmatched);
      r->verified = inv >= 0;
      r->f.fifo_inversions = inv;
      r->f.fifo_checked = checked;
      r->f.fifo_unmatched = unmatched;
      r->f.overlaps += ov;
      r->verify_grants = p.n;
      for (unsigned i = 0; i < job.procs; i++)
        r->errors += p.heads[i].errors;
      progress("  verify: %zu grants, %" PRIu64 " checked, %" PRIu64
               " unmatched, %" PRId64 " inversions, %" PRIu64 " overlaps",
               p.n, checked, unmatched, inv, ov);
    }
    pass_free(&p);
  }
  if (mode == RTB_FAIR && opt.probe && checks &&
      (uint64_t)job.procs * job.waiters >= 1000) {
    if (run_pass(&job, opt.cap_s, 'p', &p) == 0) {
      r->client_bytes_per_waiter = p.client_bytes_per_waiter;
      r->redis_bytes_per_entry = p.redis_bytes_per_entry;
      r->redis_bytes_per_resource = p.redis_bytes_per_resource;
      progress("  probe: %.0f client B/waiter, %.0f Redis B/entry, %.0f Redis "
               "B/resource",
               p.client_bytes_per_waiter, p.redis_bytes_per_entry,
               p.redis_bytes_per_resource);
    }
    pass_free(&p);
  }
  flush_keys();
  return 0;
}

static int cmp_dbl(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Median of one double field over n rows (NaNs left out). */
static double median_of(const row *rs, size_t n, size_t off) {
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
static void combine(const row *rs, size_t n, row *out) {
  *out = rs[0];
  out->repeats = (unsigned)n;
  if (n == 1)
    return;
#define RTB_MED(field) out->field = median_of(rs, n, offsetof(row, field))
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
  uint64_t grants[64];
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
    const row *r = &rs[i];
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
  }
}

/* ---- options ------------------------------------------------------------------ */

static void usage(FILE *f) {
  fprintf(f,
"usage: redturn-bench [options]\n"
"\n"
"Runs ping (round trips/s), fair (redturn) and spin (SET NX PX + retry)\n"
"against one redis-server, at every scale point, and prints a table and one\n"
"JSON object per (mode, point). Without --url it starts its own\n"
"redis-server on a free loopback port (no persistence) and stops it after.\n"
"\n"
"  --url URL          use this server (redis://[:password@]host:port)\n"
"  --redis-server P   redis-server binary to start (default: from PATH)\n"
"  --points LIST      scale points, comma-separated (default: all):\n"
"                       hot    P=4 W=8    K=1     H=0    N=20000\n"
"                       spread P=4 W=8    K=64    H=0    N=20000\n"
"                       deep   P=4 W=25000 K=1    H=0    N=20000\n"
"                       many   P=4 W=2500 K=10000 H=0    N=100000\n"
"                       hold   P=4 W=8    K=1     H=1000 N=5000\n"
"                       solo   P=1 W=1    K=1     H=0    N=5000\n"
"                       k4     P=4 W=8    K=4     H=0    N=20000\n"
"                       k4hold P=4 W=8    K=4     H=1000 N=5000\n"
"  --modes LIST       ping,fair,spin (default: all three)\n"
"  -P N               processes (overrides the points' value)\n"
"  -W N               waiters per process\n"
"  -K N               resources (waiter i uses resource i %% K)\n"
"  -H US              hold time in microseconds\n"
"  -N N               grants to reach (the pass stops at N or at the cap)\n"
"                     -P/-W/-K/-H without --points run one point, 'custom'\n"
"  --cap-s S          wall-clock cap per pass (default 10; ping: 2)\n"
"  --repeat R         run every point R times, modes alternating, and report\n"
"                     the median of each timing figure (default 1); the FIFO\n"
"                     check and the memory probe run in the first repeat\n"
"  --retry-ms MS      spin retry delay (default 5)\n"
"  --ttl-ms MS        lease TTL (default 10000)\n"
"  --no-verify        skip the FIFO verification passes (MONITOR)\n"
"  --verify-n N       grants per verification pass (default 2000)\n"
"  --verify-s S       cap of a verification pass (default 3; at least 1 s\n"
"                     per 5000 waiters)\n"
"  --no-probe         skip the memory probes (fair, P*W >= 1000)\n"
"  --json FILE        also write the JSON lines to FILE\n"
"  --data DIR         write plot data (grants.dat, handoff-*.dat) into DIR\n"
"  -v, --verbose      per-pass details (commandstats, MONITOR counts)\n"
"  -h, --help         this help\n");
}

static long parse_long(const char *s, const char *what, long min) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno != 0 || *end != '\0' || v < min) {
    fprintf(stderr, "redturn-bench: bad %s: %s\n", what, s);
    exit(2);
  }
  return v;
}

static void parse_options(int argc, char **argv) {
  enum { O_URL = 256, O_SERVER, O_POINTS, O_MODES, O_CAP, O_RETRY, O_TTL,
         O_NOVERIFY, O_VN, O_VS, O_NOPROBE, O_JSON, O_DATA, O_REPEAT };
  static const struct option longs[] = {
      {"url", required_argument, NULL, O_URL},
      {"redis-server", required_argument, NULL, O_SERVER},
      {"points", required_argument, NULL, O_POINTS},
      {"modes", required_argument, NULL, O_MODES},
      {"cap-s", required_argument, NULL, O_CAP},
      {"retry-ms", required_argument, NULL, O_RETRY},
      {"ttl-ms", required_argument, NULL, O_TTL},
      {"no-verify", no_argument, NULL, O_NOVERIFY},
      {"verify-n", required_argument, NULL, O_VN},
      {"verify-s", required_argument, NULL, O_VS},
      {"no-probe", no_argument, NULL, O_NOPROBE},
      {"json", required_argument, NULL, O_JSON},
      {"data", required_argument, NULL, O_DATA},
      {"repeat", required_argument, NULL, O_REPEAT},
      {"verbose", no_argument, NULL, 'v'},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  const char *points = NULL, *modes = NULL;
  int c;

  opt.procs = opt.waiters = opt.keys = opt.hold_us = -1;
  opt.n = -1;
  opt.cap_s = 10;
  opt.retry_ms = 5;
  opt.ttl_ms = 10000;
  opt.verify = 1;
  opt.verify_n = 2000;
  opt.verify_s = 3;
  opt.probe = 1;
  opt.repeat = 1;
  opt.redis_server = "redis-server";
  while ((c = getopt_long(argc, argv, "P:W:K:H:N:vh", longs, NULL)) != -1) {
    switch (c) {
    case 'P':
      opt.procs = parse_long(optarg, "-P", 1);
      if (opt.procs > RTB_MAX_PROCS) {
        fprintf(stderr, "redturn-bench: -P is at most %d\n", RTB_MAX_PROCS);
        exit(2);
      }
      break;
    case 'W': opt.waiters = parse_long(optarg, "-W", 1); break;
    case 'K': opt.keys = parse_long(optarg, "-K", 1); break;
    case 'H': opt.hold_us = parse_long(optarg, "-H", 0); break;
    case 'N': opt.n = parse_long(optarg, "-N", 1); break;
    case 'v': opt.verbose = 1; break;
    case 'h': usage(stdout); exit(0);
    case O_URL: opt.url = optarg; break;
    case O_SERVER: opt.redis_server = optarg; break;
    case O_POINTS: points = optarg; break;
    case O_MODES: modes = optarg; break;
    case O_CAP: opt.cap_s = strtod(optarg, NULL); break;
    case O_RETRY: opt.retry_ms = (unsigned)parse_long(optarg, "--retry-ms", 0); break;
    case O_TTL: opt.ttl_ms = parse_long(optarg, "--ttl-ms", 1); break;
    case O_NOVERIFY: opt.verify = 0; break;
    case O_VN: opt.verify_n = parse_long(optarg, "--verify-n", 1); break;
    case O_VS: opt.verify_s = strtod(optarg, NULL); break;
    case O_NOPROBE: opt.probe = 0; break;
    case O_JSON: opt.json = optarg; break;
    case O_DATA: opt.data_dir = optarg; break;
    case O_REPEAT:
      opt.repeat = (unsigned)parse_long(optarg, "--repeat", 1);
      if (opt.repeat > 64) {
        fprintf(stderr, "redturn-bench: --repeat is at most 64\n");
        exit(2);
      }
      break;
    default: usage(stderr); exit(2);
    }
  }
  if (optind < argc || !(opt.cap_s > 0) || !(opt.verify_s > 0)) {
    usage(stderr);
    exit(2);
  }

  opt.modes = 0;
  if (modes == NULL) {
    opt.modes = 7;
  } else {
    char *copy = strdup(modes), *save = NULL;
    for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
      int found = 0;
      for (int m = 0; m < RTB_NMODES; m++)
        if (strcmp(t, mode_names[m]) == 0) {
          opt.modes |= 1u << m;
          found = 1;
        }
      if (!found) {
        fprintf(stderr, "redturn-bench: unknown mode %s\n", t);
        exit(2);
      }
    }
    free(copy);
  }

  int custom = points == NULL && (opt.procs >= 0 || opt.waiters >= 0 ||
                                  opt.keys >= 0 || opt.hold_us >= 0);
  if (custom) {
    opt.points[0] = default_points[0];
    opt.points[0].name = "custom";
    opt.npoints = 1;
  } else if (points == NULL || strcmp(points, "all") == 0) {
    memcpy(opt.points, default_points, sizeof(default_points));
    opt.npoints = NPOINTS;
  } else {
    char *copy = strdup(points), *save = NULL;
    for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
      size_t i;
      for (i = 0; i < NPOINTS; i++)
        if (strcmp(t, default_points[i].name) == 0)
          break;
      if (i == NPOINTS || opt.npoints == NPOINTS) {
        fprintf(stderr, "redturn-bench: unknown or repeated point %s\n", t);
        exit(2);
      }
      opt.points[opt.npoints++] = default_points[i];
    }
    free(copy);
  }
  for (size_t i = 0; i < opt.npoints; i++) {
    bpoint *p = &opt.points[i];
    if (opt.procs >= 0) p->procs = (unsigned)opt.procs;
    if (opt.waiters >= 0) p->waiters = (unsigned)opt.waiters;
    if (opt.keys >= 0) p->keys = (unsigned)opt.keys;
    if (opt.hold_us >= 0) p->hold_us = (unsigned)opt.hold_us;
    if (opt.n >= 0) p->n = (uint64_t)opt.n;
  }
}

/* "redturn-bench --worker PROC CTL OUT SHM": one worker process. */
static int worker_entry(int argc, char **argv) {
  if (argc != 6)
    return 2;
  unsigned proc = (unsigned)atoi(argv[2]);
  int ctl = atoi(argv[3]), out = atoi(argv[4]), fd = atoi(argv[5]);
  rtb_shm *m = mmap(NULL, sizeof(*m), PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                    0);
  if (m == MAP_FAILED || proc >= RTB_MAX_PROCS)
    return 2;
  close(fd);
  signal(SIGPIPE, SIG_IGN);
  rtb_worker_main(&m->job, proc, ctl, out, m);
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--worker") == 0)
    return worker_entry(argc, argv);
  parse_options(argc, argv);
  ssize_t sl = readlink("/proc/self/exe", self_exe, sizeof(self_exe) - 1);
  if (sl <= 0) {
    perror("redturn-bench: /proc/self/exe");
    return 1;
  }
  self_exe[sl] = '\0';
  run_start = rtb_now_ns();
  snprintf(run_id, sizeof(run_id), "%x", (unsigned)(getpid() ^ (unsigned)time(NULL)));

  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);

  shm_fd = memfd_create("redturn-bench", 0);
  if (shm_fd < 0 || ftruncate(shm_fd, sizeof(*shm)) != 0) {
    perror("redturn-bench: memfd");
    return 1;
  }
  shm = mmap(NULL, sizeof(*shm), PROT_READ | PROT_WRITE, MAP_SHARED, shm_fd, 0);
  if (shm == MAP_FAILED) {
    perror("redturn-bench: mmap");
    return 1;
  }

  static char url_buf[128];
  if (opt.url != NULL) {
    if (rtb_parse_url(opt.url, &server) != 0) {
      fprintf(stderr, "redturn-bench: unsupported URL %s\n", opt.url);
      return 2;
    }
  } else {
    if (rtb_server_start(&server, opt.redis_server) != 0)
      return 1;
    own_server = 1;
    snprintf(url_buf, sizeof(url_buf), "redis://127.0.0.1:%d", server.port);
    opt.url = url_buf;
    progress("started redis-server on %s", opt.url);
  }
  int status = 1;
  sync_conn = rtb_sync_open(&server);
  if (sync_conn == NULL)
    goto out;
  if (rtb_sync_script_load(sync_conn, rtb_spin_release_lua, spin_sha) != 0) {
    fprintf(stderr, "redturn-bench: SCRIPT LOAD failed\n");
    goto out;
  }
  char *info = rtb_sync_info(sync_conn, "server");
  if (info != NULL) {
    char *v = strstr(info, "redis_version:");
    if (v != NULL)
      progress("redis %.*s, redturn %s, %ld CPUs online", (int)strcspn(v + 14, "\r\n"),
               v + 14, rt_version_string(), sysconf(_SC_NPROCESSORS_ONLN));
    free(info);
  }

  for (size_t i = 0; i < opt.npoints && !interrupted; i++) {
    const bpoint *pt = &opt.points[i];
    static row reps[RTB_NMODES][64];
    size_t nrep[RTB_NMODES] = {0};
    /* Repeats alternate the modes, so that a change of the machine's speed
     * falls on all of them alike. */
    for (unsigned k = 0; k < opt.repeat && !interrupted; k++) {
      double ping_rate = -1;
      if (opt.modes & (1u << RTB_PING) &&
          run_mode(pt, RTB_PING, -1, k == 0, &reps[RTB_PING][nrep[RTB_PING]]) == 0)
        ping_rate = reps[RTB_PING][nrep[RTB_PING]++].grants_per_s;
      for (int m = RTB_FAIR; m < RTB_NMODES && !interrupted; m++) {
        if (!(opt.modes & (1u << m)))
          continue;
        double adj = ping_rate > 0 ? adjacent_ping(pt) : -1;
        if (adj > 0)
          progress("%s: ping right before %s: %.0f/s", pt->name, mode_names[m],
                   adj);
        if (run_mode(pt, m, adj > 0 ? adj : ping_rate, k == 0,
                     &reps[m][nrep[m]]) == 0)
          nrep[m]++;
      }
    }
    for (int m = 0; m < RTB_NMODES; m++)
      if (nrep[m] > 0)
        combine(reps[m], nrep[m], &rows[nrows++]);
  }

  print_table(stdout);
  printf("\n");
  print_targets(stdout);
  printf("\n");
  FILE *jf = opt.json != NULL ? fopen(opt.json, "w") : NULL;
  if (opt.json != NULL && jf == NULL)
    perror(opt.json);
  for (size_t i = 0; i < nrows; i++) {
    json_row(stdout, &rows[i]);
    if (jf != NULL)
      json_row(jf, &rows[i]);
  }
  if (jf != NULL)
    fclose(jf);
  write_data();
  progress("done");
  status = interrupted ? 130 : 0;
  for (size_t i = 0; i < nrows; i++)
    if (rows[i].errors > 0)
      status = status ? status : 3;

out:
  rtb_sync_close(sync_conn);
  if (own_server)
    rtb_server_stop(&server);
  return status;
}
