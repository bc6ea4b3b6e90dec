/* The benchmark's passes: fork the workers, start them together, stop them
 * at N grants or the cap, read MONITOR for the enqueue order Redis saw
 * (verification passes), hold every resource for the memory probe, and
 * collect the records the workers wrote. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "driver.h"
#include "redturn.h"

static void sleep_us(long us) {
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000L};
  nanosleep(&ts, NULL);
}

static void put(int fd, char c) {
  while (write(fd, &c, 1) < 0 && errno == EINTR) {
  }
}

/* ---- MONITOR: enqueue order ---------------------------------------------- */

typedef struct monctx {
  const rtb_job *job;
  const rtb_shm *shared; /* the workers' client ids */
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
      if (strncmp(m->shared->client_id[i], arg, RTB_ID_LEN) == 0) {
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

/* ---- the memory probe's blocker: holds every resource ---------------------
 */

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

/* ---- one pass: fork the workers, run, collect ------------------------------
 */

/* used_cpu_sys + used_cpu_user, summed over the target's masters. */
static double info_cpu(const rtb_run *run) {
  double v = 0;
  for (int i = 0; i < run->tgt->nnodes; i++) {
    char *s = rtb_sync_info(run->tgt->nodes[i], "cpu");
    v += s != NULL ? rtb_info_num(s, "used_cpu_sys") +
                         rtb_info_num(s, "used_cpu_user")
                   : NAN;
    free(s);
  }
  return v;
}

/* used_memory summed over the target's masters, or -1. */
static long long info_used_memory(const rtb_run *run) {
  long long v = 0;
  for (int i = 0; i < run->tgt->nnodes && v >= 0; i++) {
    char *s = rtb_sync_info(run->tgt->nodes[i], "memory");
    double d = s != NULL ? rtb_info_num(s, "used_memory") : NAN;
    v = isnan(d) ? -1 : v + (long long)d;
    free(s);
  }
  return v;
}

/* CONFIG RESETSTAT on every master: 0, or -1 if one refused. */
static int reset_stats(const rtb_run *run) {
  int rc = 0;
  for (int i = 0; i < run->tgt->nnodes; i++)
    rc |= rtb_sync_cmd(run->tgt->nodes[i], "CONFIG RESETSTAT");
  return rc == 0 ? 0 : -1;
}

/* The commands every master executed since reset_stats(run) into
 * out->server_calls, and their INFO commandstats texts (for -v). */
static void note_commands(const rtb_run *run, rtb_pass *out) {
  size_t len = 0;
  out->server_calls = 0;
  for (int i = 0; i < run->tgt->nnodes; i++) {
    char *s = rtb_sync_info(run->tgt->nodes[i], "commandstats");
    long long calls = rtb_info_calls(s);
    out->server_calls =
        calls < 0 || out->server_calls < 0 ? -1 : out->server_calls + calls;
    size_t add = s != NULL ? strlen(s) : 0;
    char *all = realloc(out->cmdstats, len + add + 1);
    if (all != NULL) {
      memcpy(all + len, s != NULL ? s : "", add + 1);
      out->cmdstats = all;
      len += add;
    }
    free(s);
  }
}

static void kill_workers(const rtb_run *run, unsigned procs) {
  for (unsigned i = 0; i < procs; i++)
    if (run->workers[i] > 0)
      kill(run->workers[i], SIGKILL);
}

/* Wait for every worker to exit; monitor (may be NULL) keeps being read. */
static int reap_workers(rtb_run *run, unsigned procs, rtb_monitor *mon,
                        double timeout_s) {
  int64_t t0 = rtb_now_ns();
  unsigned left = 0;
  int bad = 0;
  for (unsigned i = 0; i < procs; i++)
    left += run->workers[i] > 0;
  while (left > 0) {
    for (unsigned i = 0; i < procs; i++) {
      int st;
      if (run->workers[i] > 0 &&
          waitpid(run->workers[i], &st, WNOHANG) == run->workers[i]) {
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
          fprintf(stderr, "redturn-bench: worker %u ended with status %d\n", i,
                  WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
          bad = 1;
        }
        run->workers[i] = 0;
        left--;
      }
    }
    if (left == 0)
      break;
    if (rtb_elapsed_s(t0) > timeout_s || *run->interrupted) {
      fprintf(stderr, "redturn-bench: workers did not finish; killing them\n");
      kill_workers(run, procs);
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

void rtb_flush_keys(const rtb_run *run) {
  for (int i = 0; run->tgt->own && i < run->tgt->nnodes; i++)
    rtb_sync_cmd(run->tgt->nodes[i], "FLUSHALL");
}

/* The workers of one pass: their control pipes and result files. */
typedef struct crew {
  rtb_run *run;
  unsigned procs;
  int ctl[RTB_MAX_PROCS];
  FILE *files[RTB_MAX_PROCS];
} crew;

static void crew_tell(const crew *c, char what) {
  for (unsigned i = 0; i < c->procs; i++)
    put(c->ctl[i], what);
}

/* Kill and reap every worker (a pass that cannot go on). */
static void crew_abort(const crew *c) {
  kill_workers(c->run, c->procs);
  reap_workers(c->run, c->procs, NULL, 5);
}

/* Exec one worker as a fresh process image: its memory figures must not
 * include pages inherited from this one. Never returns. */
static void exec_worker(const rtb_run *run, unsigned i, int ctl_fd,
                        int out_fd) {
  char a_proc[16], a_ctl[16], a_out[16], a_shm[16];
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  for (int fd = 3; fd < 4096; fd++)
    if (fd != ctl_fd && fd != out_fd && fd != run->shm_fd)
      close(fd);
  snprintf(a_proc, sizeof(a_proc), "%u", i);
  snprintf(a_ctl, sizeof(a_ctl), "%d", ctl_fd);
  snprintf(a_out, sizeof(a_out), "%d", out_fd);
  snprintf(a_shm, sizeof(a_shm), "%d", run->shm_fd);
  execl(run->self_exe, "redturn-bench", "--worker", a_proc, a_ctl, a_out, a_shm,
        (char *)NULL);
  _exit(127);
}

/* Fork the pass's workers; -1 (after killing those started) on failure. */
static int crew_fork(crew *c) {
  rtb_run *run = c->run;
  fflush(NULL);
  for (unsigned i = 0; i < c->procs; i++) {
    int fds[2];
    c->files[i] = tmpfile();
    if (c->files[i] == NULL || pipe(fds) != 0) {
      perror("redturn-bench: pipe/tmpfile");
      kill_workers(run, i);
      return -1;
    }
    pid_t pid = fork();
    if (pid < 0) {
      perror("redturn-bench: fork");
      kill_workers(run, i);
      return -1;
    }
    if (pid == 0)
      exec_worker(run, i, fds[0], fileno(c->files[i]));
    close(fds[0]);
    c->ctl[i] = fds[1];
    run->workers[i] = pid;
  }
  return 0;
}

/* Wait until every worker connected (as long as their connect timeout:
 * a callgrind server is slow to answer); -1 (workers gone) if they fail. */
static int crew_ready(const crew *c) {
  const rtb_run *run = c->run;
  int64_t t0 = rtb_now_ns();
  while (atomic_load(&run->shared->ready) < (int)c->procs) {
    if (atomic_load(&run->shared->failed) > 0 || rtb_elapsed_s(t0) > 125 ||
        *run->interrupted) {
      fprintf(stderr, "redturn-bench: workers failed to connect\n");
      crew_abort(c);
      return -1;
    }
    sleep_us(1000);
  }
  return 0;
}

static void crew_close(const crew *c) {
  for (unsigned i = 0; i < c->procs; i++) {
    close(c->ctl[i]);
    fclose(c->files[i]);
    c->run->workers[i] = 0;
  }
}

/* The memory probe. Client: bytes malloc handed out while the W waits are
 * pending (the workers are forked from this process, so their resident set
 * includes pages inherited from it; the heap count does not). Redis: MEMORY
 * USAGE of the resources' keys, so that client buffers (which Redis
 * resizes on its own schedule) stay out of it. */
static int probe_pass(const crew *c, const rtb_job *job, rtb_pass *out) {
  rtb_run *run = c->run;
  blocker b;
  unsigned procs = c->procs;
  long long q0 = 0, h0 = 0, q1 = 0, h1 = 0;
  long long m0 = info_used_memory(run);
  if (blocker_start(&b, job) != 0) {
    fprintf(stderr, "redturn-bench: probe: the blocker could not lock\n");
    blocker_stop(&b);
    crew_abort(c);
    return -1;
  }
  long long m1 = info_used_memory(run);
  int ku =
      rtb_sync_key_usage(run->tgt->nodes[0], job->prefix, job->keys, &q0, &h0);
  crew_tell(c, 'p');
  int64_t t0 = rtb_now_ns();
  while (atomic_load(&run->shared->probe_done) < (int)procs &&
         rtb_elapsed_s(t0) < 60 && !*run->interrupted)
    sleep_us(1000);
  long long m2 = info_used_memory(run);
  ku |=
      rtb_sync_key_usage(run->tgt->nodes[0], job->prefix, job->keys, &q1, &h1);
  uint64_t queued = 0;
  double heap = 0, rss = 0;
  for (unsigned i = 0; i < procs; i++) {
    queued += run->shared->probe_queued[i];
    heap += (double)(run->shared->probe_heap_after[i] -
                     run->shared->probe_heap_before[i]);
    rss += (double)(run->shared->probe_rss_after[i] -
                    run->shared->probe_rss_before[i]);
  }
  if (run->opt.verbose) {
    rtb_progress(run,
                 "  probe: client heap +%.0f, RSS +%.0f bytes for %" PRIu64
                 " pending waits",
                 heap, rss, queued);
    rtb_progress(run,
                 "  probe: Redis used_memory %lld -> %lld -> %lld; keys q+m "
                 "%lld -> %lld, h %lld -> %lld",
                 m0, m1, m2, q0, q1, h0, h1);
  }
  crew_tell(c, 's');
  int rc = reap_workers(run, procs, NULL, 60);
  blocker_stop(&b);
  if (queued != (uint64_t)procs * job->waiters || ku != 0) {
    fprintf(stderr, "redturn-bench: probe: %" PRIu64 " of %u waits queued\n",
            queued, procs * job->waiters);
    rc = -1;
  }
  if (queued > 0) {
    out->client_bytes_per_waiter = heap / (double)queued;
    out->redis_bytes_per_entry = (double)(q1 - q0) / (double)queued;
  }
  out->redis_bytes_per_resource = (double)(q0 + h0) / (double)job->keys;
  return rc;
}

static void note_used_memory(const rtb_run *run, rtb_pass *out) {
  long long m = info_used_memory(run);
  if (m > out->used_mem_peak)
    out->used_mem_peak = m;
}

/* Run the workers from 'g' until they reach N or cap_s passed; returns 1
 * if the pass broke (a worker exited early, MONITOR failed). */
static int run_until_stop(const crew *c, rtb_monitor *mon, double cap_s,
                          rtb_pass *out) {
  rtb_run *run = c->run;
  int64_t cap_ns = (int64_t)(cap_s * 1e9);
  int64_t next_mem = out->t_go + 100000000;
  int64_t next_reap = out->t_go + 20000000;
  int broke = 0;
  while (!atomic_load(&run->shared->stop)) {
    if (mon != NULL) {
      struct pollfd pf = {rtb_monitor_fd(mon), POLLIN, 0};
      if (poll(&pf, 1, 2) > 0 && rtb_monitor_read(mon) != 0)
        broke = 1;
    } else {
      sleep_us(2000);
    }
    int64_t now = rtb_now_ns();
    if (now - out->t_go >= cap_ns || *run->interrupted || broke) {
      int64_t zero = 0;
      atomic_compare_exchange_strong(&run->shared->t_stop, &zero, now);
      atomic_store(&run->shared->stop, 1);
    }
    /* (Not under callgrind: its count is the window's commands.) */
    if (mon == NULL && !run->tgt->callgrind && now >= next_mem) {
      note_used_memory(run, out);
      next_mem = now + 100000000;
    }
    for (unsigned i = 0; now >= next_reap && i < c->procs; i++) {
      int st;
      if (waitpid(run->workers[i], &st, WNOHANG) == run->workers[i]) {
        fprintf(stderr, "redturn-bench: worker %u exited early\n", i);
        run->workers[i] = 0;
        broke = 1;
      }
    }
    if (now >= next_reap)
      next_reap = now + 20000000;
  }
  return broke;
}

/* A measured or verification pass: go, run, stop, and the server's CPU,
 * command counts and memory over it. 0 or -1. */
static int measure(const crew *c, rtb_monitor *mon, double cap_s,
                   rtb_pass *out) {
  rtb_run *run = c->run;
  double cpu0 = info_cpu(run);
  int have_stats = reset_stats(run) == 0;
  out->used_mem_peak = info_used_memory(run);
  if (run->tgt->callgrind && rtb_instr_zero(run->tgt) != 0)
    fprintf(stderr, "redturn-bench: callgrind_control -z failed\n");
  int64_t t_zeroed = rtb_now_ns();
  out->t_go = rtb_now_ns();
  crew_tell(c, 'g');
  int broke = run_until_stop(c, mon, cap_s, out);
  out->t_stop = atomic_load(&run->shared->t_stop);
  if (run->tgt->callgrind) {
    out->instr_window_s = rtb_elapsed_s(t_zeroed);
    out->redis_instr = rtb_instr_read(run->tgt);
  }
  double cpu1 = info_cpu(run);
  if (have_stats)
    note_commands(run, out);
  if (mon == NULL)
    note_used_memory(run, out);
  out->redis_cpu_s = cpu1 - cpu0;
  crew_tell(c, 's');
  int rc = reap_workers(run, c->procs, mon, 60);
  return broke ? -1 : rc;
}

/* Read MONITOR up to a marker, so that everything Redis executed during
 * the pass has been seen; closes mon. 0 or -1. */
static int monitor_finish(const rtb_run *run, rtb_monitor *mon, monctx *mc,
                          rtb_pass *out) {
  int rc = 0;
  rtb_sync_cmd(run->tgt->nodes[0], "ECHO %s", mc->marker);
  int64_t t0 = rtb_now_ns();
  while (!mc->marker_seen && rtb_elapsed_s(t0) < 30) {
    struct pollfd pf = {rtb_monitor_fd(mon), POLLIN, 0};
    if (poll(&pf, 1, 10) > 0 && rtb_monitor_read(mon) != 0)
      break;
  }
  if (!mc->marker_seen) {
    fprintf(stderr, "redturn-bench: MONITOR stream incomplete\n");
    rc = -1;
  }
  rtb_monitor_close(mon);
  out->order = mc->order;
  if (run->opt.verbose)
    rtb_progress(run, "  monitor: %zu lines, %zu enqueues", mc->lines,
                 rtb_order_len(mc->order));
  return rc;
}

/* Append worker i's records from its result file to out. 0 or -1. */
static int collect_one(FILE *file, unsigned i, rtb_pass *out) {
  int fd = fileno(file);
  rtb_head h;
  lseek(fd, 0, SEEK_SET);
  if (read(fd, &h, sizeof(h)) != (ssize_t)sizeof(h)) {
    fprintf(stderr, "redturn-bench: worker %u left no results\n", i);
    return -1;
  }
  out->heads[i] = h;
  rtb_rec *n = realloc(out->recs, (out->n + h.nrec + 1) * sizeof(*n));
  if (n == NULL)
    return -1;
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
  if (want != 0)
    return -1;
  out->n += h.nrec;
  return 0;
}

/* Start MONITOR for a verification pass; NULL (workers gone) on failure. */
static rtb_monitor *monitor_start(const crew *c, const rtb_job *job,
                                  monctx *mc) {
  const rtb_run *run = c->run;
  memset(mc, 0, sizeof(*mc));
  mc->job = job;
  mc->shared = run->shared;
  mc->order = rtb_order_new();
  snprintf(mc->marker, sizeof(mc->marker), "rtb-end-%s-%u", run->run_id,
           run->pass_no);
  rtb_monitor *mon = mc->order != NULL
                         ? rtb_monitor_open(&run->tgt->srv, on_monitor_line, mc)
                         : NULL;
  if (mon == NULL) {
    rtb_order_free(mc->order);
    crew_abort(c);
  }
  return mon;
}

/* What the pass's keys still take once every worker released its holds
 * and closed its client (pending waits canceled), per resource: an idle
 * resource should cost Redis nothing. One redis-server only (SCAN sees
 * one node). */
static void note_idle_bytes(const rtb_run *run, const rtb_job *job,
                            rtb_pass *out) {
  long long keys, bytes;
  if (run->tgt->shards == 0 &&
      rtb_sync_prefix_usage(run->tgt->nodes[0], job->prefix, &keys, &bytes) ==
          0) {
    out->redis_bytes_idle = (double)bytes / (double)job->keys;
    if (keys > 0 && run->opt.verbose)
      rtb_progress(run, "  idle: %lld keys, %lld bytes left", keys, bytes);
  }
}

/* kind: 'm' measured pass, 'v' verification under MONITOR, 'p' memory
 * probe (fair). */
int rtb_run_pass(rtb_run *run, const rtb_job *job0, double cap_s, int kind,
                 rtb_pass *out) {
  rtb_job job = *job0;
  crew c;
  rtb_monitor *mon = NULL;
  monctx mc;
  int rc = -1;

  memset(out, 0, sizeof(*out));
  out->server_calls = -1;
  out->client_bytes_per_waiter = NAN;
  out->redis_bytes_per_entry = NAN;
  out->redis_bytes_per_resource = NAN;
  out->redis_bytes_idle = NAN;
  out->redis_instr = NAN;
  snprintf(job.prefix, sizeof(job.prefix), "rtb-%s-%c%u", run->run_id, kind,
           run->pass_no++);
  rtb_flush_keys(run);
  memset(run->shared, 0, sizeof(*run->shared));
  run->shared->job = job;

  c.run = run;
  c.procs = job.procs;
  if (crew_fork(&c) != 0)
    return -1;
  if (crew_ready(&c) != 0)
    goto done;
  if (kind == 'p') {
    rc = probe_pass(&c, &job, out);
    goto done;
  }
  if (kind == 'v' && (mon = monitor_start(&c, &job, &mc)) == NULL)
    goto done;
  rc = measure(&c, mon, cap_s, out);
  if (mon != NULL && monitor_finish(run, mon, &mc, out) != 0)
    rc = -1;
  if (kind == 'm' && job.mode != RTB_PING)
    note_idle_bytes(run, &job, out);
  for (unsigned i = 0; i < c.procs; i++)
    if (collect_one(c.files[i], i, out) != 0)
      rc = -1;
done:
  crew_close(&c);
  return rc;
}

void rtb_pass_free(rtb_pass *p) {
  free(p->recs);
  free(p->cmdstats);
  rtb_order_free(p->order);
}
