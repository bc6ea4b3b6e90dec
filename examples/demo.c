/* redturn demo: several processes take turns on one lock, fairly.
 *
 * The parent forks P worker processes. Each has its own libuv loop and
 * redturn client and does R rounds of: wait for the lock, hold it H ms,
 * release it. Workers send the parent one record per grant over a pipe; the
 * parent prints the grants in the order they happened and checks them with
 * the project's one checker (tools/rtcheck.h):
 *
 *  - fences strictly increase in grant order;
 *  - no two holds overlap (a grant never comes before the previous
 *    holder's rt_signal() call, by CLOCK_REALTIME, shared by all processes
 *    on one machine);
 *  - FIFO: no request is granted after one that asked for the lock
 *    FIFO_SLACK_US or more later (a worker asks for its next turn just
 *    before releasing the current one, so every worker's requests keep
 *    meeting the others' in the queue);
 *  - afterwards the resource's queue is gone from Redis and nothing is
 *    locked (rt_inspect() from the parent).
 *
 * Exit status: 0 if every check passed, 1 if one failed or a worker failed,
 * 2 for bad arguments. */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <redturn.h>

#include "rtcheck.h"

#define DEFAULT_URL "redis://127.0.0.1:6379"
#define MAX_WORKERS 256
#define MAX_ROUNDS 100000
/* A request asked this much earlier than another must not be granted
 * after it (the slack covers the time from the timestamp to Redis). */
#define FIFO_SLACK_US 10000

typedef struct config {
  const char *url;
  const char *tls_ca; /* for a rediss:// url: the CA file, or NULL */
  const char *name;
  char prefix[64];
  int workers;
  int rounds;
  int64_t hold_ms;
  int64_t ttl_ms;
  int64_t timeout_ms;
  int verbose; /* print request ids */
} config_t;

/* One grant, as a worker reports it to the parent. Smaller than PIPE_BUF,
 * so each write() reaches the pipe whole, never interleaved. */
typedef struct grant_rec {
  int worker;
  int round;
  uint64_t fence;
  uint64_t position; /* requests ahead of it when Redis queued it */
  int64_t asked_ns;  /* rt_wait() called (CLOCK_REALTIME) */
  int64_t grant_ns;  /* grant callback ran */
  int64_t signal_ns; /* rt_signal() called */
  char id[80];       /* request id in the Redis queue */
} grant_rec;

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ==== Worker process ===================================================== */

typedef struct worker {
  const config_t *cfg;
  int index;
  int fd; /* write end of the pipe to the parent */
  uv_timer_t hold;
  uv_timer_t stall; /* gives up when nothing happens for too long */
  rt_client_t *client;
  rt_lock_t *held;     /* lock held now, or NULL */
  grant_rec *held_rec; /* its record */
  grant_rec *recs;     /* one per round */
  int reported;        /* rounds fully done */
  int closing;
  int status; /* first error */
} worker_t;

static void worker_close(worker_t *w) {
  if (w->closing)
    return;
  w->closing = 1;
  uv_close((uv_handle_t *)&w->hold, NULL);
  uv_close((uv_handle_t *)&w->stall, NULL);
  /* Closing also cancels our waits and releases a lock we hold. */
  rt_client_close(w->client, NULL, NULL);
}

static void worker_fail(worker_t *w, const char *what, int status) {
  if (w->closing)
    return; /* RT_ECANCELED from our own close */
  fprintf(stderr, "demo: worker %d: %s: %s (%s)\n", w->index, what,
          rt_strerror(status), rt_err_name(status));
  w->status = status;
  worker_close(w);
}

/* Nothing completed for much longer than a wait may take: Redis is
 * probably gone. (A release is retried until Redis answers, and a wait whose
 * entry reached Redis reports its deadline once the entry could be removed,
 * so neither callback comes while Redis is down.) Closing the client cancels
 * whatever is pending. */
static void on_stall(uv_timer_t *timer) {
  worker_t *w = timer->data;
  if (w->closing)
    return;
  fprintf(stderr,
          "demo: worker %d: nothing granted or released for %" PRId64
          " ms; is Redis reachable?\n",
          w->index, w->cfg->timeout_ms + 1000);
  w->status = RT_ETIMEDOUT;
  worker_close(w);
}

/* Something completed: restart the stall timer. */
static void progress(worker_t *w) {
  if (!w->closing)
    uv_timer_start(&w->stall, on_stall, (uint64_t)w->cfg->timeout_ms + 1000, 0);
}

static void on_granted(rt_lock_t *lock, int status, void *data);

/* Queue the request for round r. */
static void ask(worker_t *w, int r) {
  grant_rec *rec = &w->recs[r];
  rec->worker = w->index;
  rec->round = r;
  rec->asked_ns = now_ns();
  int err = rt_wait(w->client, w->cfg->name, strlen(w->cfg->name),
                    w->cfg->ttl_ms, w->cfg->timeout_ms, on_granted, rec, NULL);
  if (err != 0)
    worker_fail(w, "rt_wait", err);
}

static void on_signaled(rt_lock_t *lock, int status, void *data) {
  grant_rec *rec = data;
  worker_t *w = rt_client_get_data(rt_lock_client(lock));
  if (w->closing)
    return;
  if (status != 0) {
    worker_fail(w, "rt_signal", status); /* RT_ELOST: the lease ran out */
    return;
  }
  ssize_t n;
  do
    n = write(w->fd, rec, sizeof(*rec));
  while (n < 0 && errno == EINTR);
  if (n != (ssize_t)sizeof(*rec)) {
    fprintf(stderr, "demo: worker %d: cannot report to the parent: %s\n",
            w->index, strerror(errno));
    w->status = RT_EINVAL;
    worker_close(w);
    return;
  }
  if (++w->reported == w->cfg->rounds)
    worker_close(w);
  else
    progress(w);
}

static void on_hold_over(uv_timer_t *timer) {
  worker_t *w = timer->data;
  rt_lock_t *lock = w->held;
  grant_rec *rec = w->held_rec;
  w->held = NULL;
  /* Take a ticket for the next round before leaving: Redis runs the two
   * commands in this order (one connection), so the new request queues
   * behind everyone now waiting. This is what makes FIFO checkable. */
  if (rec->round + 1 < w->cfg->rounds)
    ask(w, rec->round + 1);
  if (w->closing)
    return; /* ask failed; the client's close releases the lock */
  rec->signal_ns = now_ns();
  int err = rt_signal(lock, on_signaled, rec);
  if (err != 0)
    worker_fail(w, "rt_signal", err);
}

static void on_granted(rt_lock_t *lock, int status, void *data) {
  grant_rec *rec = data;
  worker_t *w = rt_client_get_data(rt_lock_client(lock));
  if (status != 0) {
    worker_fail(w, "rt_wait", status);
    return;
  }
  rec->grant_ns = now_ns();
  rec->fence = rt_lock_fence(lock);
  rec->position = rt_lock_position(lock);
  snprintf(rec->id, sizeof(rec->id), "%s", rt_lock_id(lock));
  if (w->closing)
    return; /* the client's close releases it */
  progress(w);
  w->held = lock;
  w->held_rec = rec;
  uv_timer_start(&w->hold, on_hold_over, (uint64_t)w->cfg->hold_ms, 0);
}

static void on_connected(rt_client_t *client, int status, void *data) {
  worker_t *w = data;
  (void)client;
  if (status != 0) {
    worker_fail(w, "connect", status);
    return;
  }
  progress(w);
  ask(w, 0);
}

/* The body of a worker process; returns its exit status. */
static int worker_main(const config_t *cfg, int index, int fd) {
  uv_loop_t loop;
  rt_options_t opts;
  worker_t w;

  memset(&w, 0, sizeof(w));
  w.cfg = cfg;
  w.index = index;
  w.fd = fd;
  w.recs = calloc((size_t)cfg->rounds, sizeof(*w.recs));
  if (w.recs == NULL || uv_loop_init(&loop) != 0) {
    fprintf(stderr, "demo: worker %d: out of memory\n", index);
    return 1;
  }
  uv_timer_init(&loop, &w.hold);
  uv_timer_init(&loop, &w.stall);
  w.hold.data = &w;
  w.stall.data = &w;

  rt_options_init(&opts);
  opts.url = cfg->url;
  opts.prefix = cfg->prefix;
  opts.tls_ca_file = cfg->tls_ca;
  int err = rt_client_open(&loop, &opts, on_connected, &w, &w.client);
  if (err != 0) {
    fprintf(stderr, "demo: worker %d: rt_client_open: %s\n", index,
            rt_strerror(err));
    uv_close((uv_handle_t *)&w.hold, NULL);
    uv_close((uv_handle_t *)&w.stall, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    free(w.recs);
    return 1;
  }
  uv_run(&loop, UV_RUN_DEFAULT);

  int rc = w.status == 0 && w.reported == cfg->rounds ? 0 : 1;
  if (uv_loop_close(&loop) != 0) {
    fprintf(stderr, "demo: worker %d: handles left open at exit\n", index);
    rc = 1;
  }
  free(w.recs);
  return rc;
}

/* ==== Parent: the queue after the run ==================================== */

typedef struct after {
  int status;
  int locked;
  size_t queue_len;
} after_t;

static void on_inspected(rt_client_t *client, int status,
                         const rt_queue_info_t *info, void *data) {
  after_t *a = data;
  a->status = status;
  if (status == 0) {
    a->locked = info->locked;
    a->queue_len = info->queue_len;
  }
  rt_client_close(client, NULL, NULL);
}

/* What Redis holds for the resource now. Requests made before the client
 * connected are queued, so no connect callback is needed: a failed connect
 * fails the inspect too. */
static int inspect_after(const config_t *cfg, after_t *a) {
  uv_loop_t loop;
  rt_options_t opts;
  rt_client_t *client;

  a->status = RT_ECANCELED;
  if (uv_loop_init(&loop) != 0)
    return RT_ENOMEM;
  rt_options_init(&opts);
  opts.url = cfg->url;
  opts.prefix = cfg->prefix;
  opts.tls_ca_file = cfg->tls_ca;
  int err = rt_client_open(&loop, &opts, NULL, NULL, &client);
  if (err == 0) {
    err = rt_inspect(client, cfg->name, strlen(cfg->name), 0, on_inspected, a);
    if (err != 0)
      rt_client_close(client, NULL, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
  }
  if (uv_loop_close(&loop) != 0 && err == 0)
    err = RT_EINVAL;
  return err != 0 ? err : a->status;
}

/* ==== Parent: collecting and checking ==================================== */

static int by_grant_time(const void *pa, const void *pb) {
  const grant_rec *a = pa, *b = pb;
  if (a->grant_ns != b->grant_ns)
    return a->grant_ns < b->grant_ns ? -1 : 1;
  return a->fence < b->fence ? -1 : a->fence > b->fence;
}

static int by_value(const void *pa, const void *pb) {
  int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
  return a < b ? -1 : a > b;
}

/* Nearest-rank percentile of sorted v[0..n). */
static int64_t percentile(const int64_t *v, size_t n, int p) {
  size_t rank = (n * (size_t)p + 99) / 100;
  return v[rank > 0 ? rank - 1 : 0];
}

static int read_full(int fd, void *buf, size_t len) {
  size_t got = 0;
  while (got < len) {
    ssize_t n = read(fd, (char *)buf + got, len - got);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return got == 0 ? 0 : -1; /* EOF between records is the normal end */
    got += (size_t)n;
  }
  return 1;
}

static double ms(int64_t ns) { return (double)ns / 1e6; }

/* Fences, exclusion and FIFO by the project's one checker
 * (tools/rtcheck.h), in microseconds of CLOCK_REALTIME: a hold runs from
 * its grant callback to its rt_signal() call, and a request was queued no
 * earlier than its rt_wait() call (FIFO_SLACK_US covers the trip to
 * Redis). 0, or -1 when out of memory. */
static int check(const grant_rec *recs, size_t n, uint64_t *regressions,
                 uint64_t *overlaps, rtc_fifo *fifo) {
  rtc_grant *g = calloc(n > 0 ? n : 1, sizeof(*g));
  if (g == NULL)
    return -1;
  for (size_t i = 0; i < n; i++) {
    g[i].fence = recs[i].fence;
    g[i].start = recs[i].grant_ns / 1000;
    g[i].end = recs[i].signal_ns / 1000;
    g[i].asked = g[i].queued = recs[i].asked_ns / 1000;
  }
  *regressions = rtc_fence_regressions(g, n, NULL, NULL);
  *overlaps = rtc_overlaps(g, n, 0, NULL, NULL);
  rtc_fifo_check(g, n, 0, FIFO_SLACK_US, fifo, NULL, NULL);
  free(g);
  return 0;
}

/* One line per grant, in grant order; the handoffs go to handoffs[]. */
static size_t print_grants(const config_t *cfg, const grant_rec *recs, size_t n,
                           int64_t *handoffs) {
  size_t nhandoffs = 0;
  for (size_t i = 0; i < n; i++) {
    const grant_rec *g = &recs[i];
    char handoff[32] = "-", ahead[24] = "-";
    if (i > 0) {
      int64_t h = g->grant_ns - recs[i - 1].signal_ns;
      handoffs[nhandoffs++] = h;
      snprintf(handoff, sizeof(handoff), "%.2f ms", ms(h));
    }
    /* Requests ahead when Redis queued this one, the worker's own held
     * entry included after round 1. rt_lock_position() is also 0 when the
     * grant reached the worker before the reply to its enqueue did; after
     * round 1 a request cannot be granted at once, so 0 means unknown. */
    if (g->position > 0 || g->round == 0)
      snprintf(ahead, sizeof(ahead), "%" PRIu64, g->position);
    printf("grant %3zu  fence=%-16" PRIu64 " worker=%-2d round=%-2d ahead=%-2s"
           " waited=%7.1f ms  handoff=%s%s%s\n",
           i + 1, g->fence, g->worker, g->round + 1, ahead,
           ms(g->grant_ns - g->asked_ns), handoff, cfg->verbose ? "  id=" : "",
           cfg->verbose ? g->id : "");
  }
  return nhandoffs;
}

/* Print the grants and the summary; returns the number of failed checks. */
static int report(const config_t *cfg, grant_rec *recs, size_t n) {
  size_t expected = (size_t)cfg->workers * (size_t)cfg->rounds;
  int64_t *handoffs = calloc(n > 0 ? n : 1, sizeof(*handoffs));
  uint64_t regressions = 0, overlaps = 0;
  rtc_fifo fifo;

  if (handoffs == NULL || check(recs, n, &regressions, &overlaps, &fifo) < 0) {
    fprintf(stderr, "demo: out of memory\n");
    free(handoffs);
    return 1;
  }
  qsort(recs, n, sizeof(*recs), by_grant_time);
  size_t nhandoffs = print_grants(cfg, recs, n, handoffs);

  printf("\nsummary\n");
  printf("  grants:            %zu of %zu\n", n, expected);
  printf("  fences increasing: %s\n", regressions == 0 ? "yes" : "no");
  printf("  overlapping holds: %" PRIu64 "\n", overlaps);
  printf("  FIFO overtakes:    %" PRIu64 " (requests checked: %" PRIu64 ")\n",
         fifo.overtaken, fifo.checked);
  if (nhandoffs > 0) {
    qsort(handoffs, nhandoffs, sizeof(*handoffs), by_value);
    printf("  handoff latency:   p50 %.2f ms, p99 %.2f ms, max %.2f ms "
           "(%zu handoffs, rt_signal() call to next grant callback)\n",
           ms(percentile(handoffs, nhandoffs, 50)),
           ms(percentile(handoffs, nhandoffs, 99)), ms(handoffs[nhandoffs - 1]),
           nhandoffs);
  }
  free(handoffs);
  return (n != expected) + (regressions > 0) + (overlaps > 0) +
         (fifo.overtaken > 0);
}

/* ==== Parent: arguments and main ========================================= */

static void usage(FILE *out) {
  fprintf(
      out,
      "usage: redturn-demo [-p WORKERS] [-r ROUNDS] [-k NAME] [-H MS] "
      "[-t MS] [-u URL] [-C CAFILE] [-v]\n"
      "\n"
      "Forks WORKERS processes (default 4) that each take the lock on NAME\n"
      "(default \"demo:printer\") ROUNDS times (default 5), hold it MS\n"
      "milliseconds (-H, default 20) and release it; then prints every\n"
      "grant in order and checks mutual exclusion, fencing and FIFO order.\n"
      "\n"
      "  -t MS    lease of each grant (default 10000)\n"
      "  -u URL   Redis URL (default $REDTURN_URL, else %s);\n"
      "           rediss://... for TLS\n"
      "  -C FILE  CA certificates to trust for TLS (default\n"
      "           $REDTURN_TLS_CA with a rediss:// URL, else the system's)\n"
      "  -v       also print each grant's request id (as queued in Redis)\n"
      "  -h       this help\n"
      "\n"
      "Keys use the prefix \"demo-<pid>\", so runs never share a queue.\n"
      "Exit status: 0 all checks passed, 1 a check or a worker failed,\n"
      "2 bad arguments.\n",
      DEFAULT_URL);
}

/* Decimal in [min, max], or -1. */
static long long parse_num(const char *s, long long min, long long max) {
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < min || v > max)
    return -1;
  return v;
}

static int parse_args(int argc, char **argv, config_t *cfg) {
  int opt;
  long long v;

  cfg->url = getenv("REDTURN_URL");
  if (cfg->url == NULL || cfg->url[0] == '\0')
    cfg->url = DEFAULT_URL;
  cfg->name = "demo:printer";
  cfg->workers = 4;
  cfg->rounds = 5;
  cfg->hold_ms = 20;
  cfg->ttl_ms = 10000;
  cfg->verbose = 0;
  cfg->tls_ca = NULL;
  while ((opt = getopt(argc, argv, "p:r:k:H:t:u:C:vh")) != -1) {
    switch (opt) {
    case 'p':
      if ((v = parse_num(optarg, 1, MAX_WORKERS)) < 0)
        goto bad;
      cfg->workers = (int)v;
      break;
    case 'r':
      if ((v = parse_num(optarg, 1, MAX_ROUNDS)) < 0)
        goto bad;
      cfg->rounds = (int)v;
      break;
    case 'k':
      if (optarg[0] == '\0' || strlen(optarg) > RT_NAME_MAX)
        goto bad;
      cfg->name = optarg;
      break;
    case 'H':
      if ((v = parse_num(optarg, 0, 60000)) < 0)
        goto bad;
      cfg->hold_ms = v;
      break;
    case 't':
      if ((v = parse_num(optarg, 1, RT_TTL_MAX)) < 0)
        goto bad;
      cfg->ttl_ms = v;
      break;
    case 'u':
      cfg->url = optarg;
      break;
    case 'C':
      cfg->tls_ca = optarg;
      break;
    case 'v':
      cfg->verbose = 1;
      break;
    case 'h':
      usage(stdout);
      exit(0);
    default:
      usage(stderr);
      return -1;
    }
  }
  if (optind != argc)
    goto bad;
  const char *env_ca = getenv("REDTURN_TLS_CA");
  if (cfg->tls_ca == NULL && env_ca != NULL && env_ca[0] != '\0' &&
      strncmp(cfg->url, "rediss://", 9) == 0)
    cfg->tls_ca = env_ca;
  /* Each wait may sit behind every other worker's hold; give up well after
   * that, so a stuck run ends instead of hanging. */
  cfg->timeout_ms = 30000 + 4 * (int64_t)cfg->workers * cfg->hold_ms;
  snprintf(cfg->prefix, sizeof(cfg->prefix), "demo-%ld", (long)getpid());
  return 0;

bad:
  fprintf(stderr, "demo: bad argument (try -h)\n");
  return -1;
}

/* Fork the workers, each writing its records to wfd; returns how many
 * started (their pids in pids[]). */
static int start_workers(const config_t *cfg, int fds[2], pid_t *pids) {
  int started = 0;
  for (int i = 0; i < cfg->workers; i++) {
    pid_t pid = fork();
    if (pid < 0) {
      perror("demo: fork");
      break;
    }
    if (pid == 0) {
      close(fds[0]);
      int rc = worker_main(cfg, i, fds[1]);
      close(fds[1]);
      exit(rc);
    }
    pids[started++] = pid;
  }
  return started;
}

/* The records from rfd until every worker closed its end of the pipe;
 * NULL when out of memory. */
static grant_rec *collect(const config_t *cfg, int rfd, size_t *n) {
  size_t cap = (size_t)cfg->workers * (size_t)cfg->rounds;
  grant_rec *recs = calloc(cap, sizeof(*recs));
  grant_rec rec;
  *n = 0;
  while (read_full(rfd, &rec, sizeof(rec)) > 0) {
    if (recs != NULL && *n < cap && rec.worker >= 0 &&
        rec.worker < cfg->workers && rec.round >= 0 && rec.round < cfg->rounds)
      recs[(*n)++] = rec;
  }
  return recs;
}

/* Wait for the workers; returns how many did not exit with status 0. */
static int reap_workers(const pid_t *pids, int started) {
  int failed = 0;
  for (int i = 0; i < started; i++) {
    int status;
    while (waitpid(pids[i], &status, 0) < 0 && errno == EINTR)
      ;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
      continue;
    failed++;
    if (WIFSIGNALED(status))
      fprintf(stderr, "demo: worker %d killed by signal %d\n", i,
              WTERMSIG(status));
    else
      fprintf(stderr, "demo: worker %d exited with status %d\n", i,
              WEXITSTATUS(status));
  }
  return failed;
}

int main(int argc, char **argv) {
  config_t cfg;
  int fds[2];
  pid_t pids[MAX_WORKERS];
  size_t n;

  if (parse_args(argc, argv, &cfg) != 0)
    return 2;
  setvbuf(stdout, NULL, _IOLBF, 0); /* keep order with stderr when piped */
  printf("demo: %d workers x %d rounds on \"%s\", hold %" PRId64
         " ms, lease %" PRId64 " ms, key prefix %s\n",
         cfg.workers, cfg.rounds, cfg.name, cfg.hold_ms, cfg.ttl_ms,
         cfg.prefix);
  fflush(stdout); /* children must not inherit unwritten output */
  signal(SIGPIPE, SIG_IGN);
  if (pipe(fds) != 0) {
    perror("demo: pipe");
    return 1;
  }
  int started = start_workers(&cfg, fds, pids);
  close(fds[1]);
  grant_rec *recs = collect(&cfg, fds[0], &n);
  close(fds[0]);
  int failed_workers = reap_workers(pids, started);
  if (recs == NULL) {
    fprintf(stderr, "demo: out of memory\n");
    return 1;
  }

  int failures = report(&cfg, recs, n);
  printf("  workers failed:    %d of %d\n",
         failed_workers + cfg.workers - started, cfg.workers);
  failures += failed_workers > 0 || started < cfg.workers;

  after_t after;
  int err = inspect_after(&cfg, &after);
  if (err == 0) {
    printf("  left in Redis:     queue length %zu, locked %s\n",
           after.queue_len, after.locked ? "yes" : "no");
    failures += after.queue_len != 0 || after.locked;
  } else {
    printf("  left in Redis:     unknown (rt_inspect: %s)\n", rt_strerror(err));
    failures++;
  }
  free(recs);

  printf("result: %s\n", failures == 0 ? "OK" : "FAILED");
  return failures == 0 ? 0 : 1;
}
