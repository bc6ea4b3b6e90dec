/* redturn demo: worker processes take turns on one lock through the
 * blocking API; the parent prints the grants in order with their fencing
 * tokens and handoff latencies, and checks fences, exclusion and FIFO. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "rtcheck.h"
#include "rtserver.h"

#define MAX_WORKERS 64
#define MAX_ROUNDS 1000
/* A request asked this much earlier than another must not be granted
 * after it. The slack covers the time from the timestamp to Redis, where
 * a loaded machine may hold a worker back for tens of ms (an ASan build
 * beside other jobs took more than 10); a lock that lets a late request
 * barge overtakes by whole holds, the 50 ms default or more. */
#define FIFO_SLACK_US 50000

/* One grant, sent by a worker through a pipe (small enough for an atomic
 * write). round -1 is the "connected" record. */
typedef struct rec {
  int worker;
  int round;
  int status;
  uint64_t fence;
  int64_t asked_us;
  int64_t granted_us;
  int64_t released_us;
} rec_t;

typedef struct demo {
  const cli_common *common; /* TLS settings */
  const char *url;
  const char *prefix;
  const char *name;
  long workers;
  long rounds;
  int64_t hold_ms;
} demo_t;

static volatile sig_atomic_t interrupted;

static void on_signal(int signo) { interrupted = signo; }

static int64_t now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int write_rec(int fd, const rec_t *r) {
  ssize_t n;
  do
    n = write(fd, r, sizeof(*r));
  while (n < 0 && errno == EINTR);
  return n == (ssize_t)sizeof(*r) ? 0 : -1;
}

/* 1 with a whole record, 0 at end of file, -1 on error or interrupt. */
static int read_rec(int fd, rec_t *r) {
  size_t got = 0;
  while (got < sizeof(*r)) {
    ssize_t n = read(fd, (char *)r + got, sizeof(*r) - got);
    if (n == 0)
      return got == 0 ? 0 : -1;
    if (n < 0)
      return -1; /* EINTR included: the parent was interrupted */
    got += (size_t)n;
  }
  return 1;
}

/* ---- worker process ------------------------------------------------------ */

static int worker(const demo_t *d, int index, int out, int go) {
  rt_options_t o;
  rt_blocking_t *b;
  rec_t r;
  char c;

  memset(&r, 0, sizeof(r));
  r.worker = index;
  r.round = -1;
  cli_options(d->common, &o);
  o.url = d->url;
  o.prefix = d->prefix;
  r.status = rt_blocking_open(&o, &b);
  if (write_rec(out, &r) != 0 || r.status != 0)
    return 1;
  /* Everyone starts together: the parent closes the go pipe. */
  while (read(go, &c, 1) < 0 && errno == EINTR) {
  }

  int failed = 0;
  size_t len = strlen(d->name);
  for (long i = 0; i < d->rounds && !failed; i++) {
    rt_lock_t *lock;
    r.round = (int)i;
    r.asked_us = now_us();
    r.status = rt_blocking_wait(b, d->name, len, 10000, 30000, &lock);
    if (r.status == 0) {
      r.granted_us = now_us();
      r.fence = rt_lock_fence(lock);
      struct timespec ts = {(time_t)(d->hold_ms / 1000),
                            (long)(d->hold_ms % 1000) * 1000000L};
      while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
      }
      r.released_us = now_us();
      r.status = rt_blocking_signal(b, lock);
    }
    if (write_rec(out, &r) != 0 || r.status != 0)
      failed = 1;
  }
  rt_blocking_close(b);
  return failed;
}

/* ---- parent -------------------------------------------------------------- */

static int by_fence(const void *a, const void *b) {
  const rec_t *x = a, *y = b;
  return x->fence < y->fence ? -1 : x->fence > y->fence;
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

static void print_ms(int64_t us, int width) {
  printf("%*lld.%02lld ms", width, (long long)(us / 1000),
         (long long)(us % 1000 / 10));
}

/* Fences, exclusion and FIFO by the shared checker (tools/rtcheck.h):
 * holds from the grant to the release call, enqueues known only to have
 * come after the rt_blocking_wait call (FIFO_SLACK_US of slack). 0, or -1
 * when out of memory. */
static int check(const rec_t *g, size_t n, size_t *repeats, size_t *overlaps,
                 size_t *overtaken) {
  rtc_grant *cg = calloc(n > 0 ? n : 1, sizeof(*cg));
  if (cg == NULL)
    return -1;
  for (size_t i = 0; i < n; i++) {
    cg[i].fence = g[i].fence;
    cg[i].start = g[i].granted_us;
    cg[i].end = g[i].released_us;
    cg[i].asked = cg[i].queued = g[i].asked_us;
  }
  rtc_fifo fifo;
  *repeats = (size_t)rtc_fence_regressions(cg, n, NULL, NULL);
  *overlaps = (size_t)rtc_overlaps(cg, n, 0, NULL, NULL);
  rtc_fifo_check(cg, n, 1, FIFO_SLACK_US, &fifo, NULL, NULL);
  *overtaken = (size_t)fifo.inversions;
  free(cg);
  return 0;
}

/* Print the grants in order and check them; returns the exit code. */
static int report(const demo_t *d, rec_t *g, size_t n) {
  qsort(g, n, sizeof(*g), by_fence);
  int64_t *handoffs = calloc(n > 0 ? n : 1, sizeof(*handoffs));
  size_t nh = 0, overlaps = 0, repeats = 0, overtaken = 0;
  if (handoffs == NULL || check(g, n, &repeats, &overlaps, &overtaken) < 0) {
    free(handoffs);
    return CLI_OSERR;
  }

  printf("\ngrant  %16s  worker  round  %13s  %13s\n", "fence", "waited",
         "handoff");
  for (size_t i = 0; i < n; i++) {
    printf("%5zu  %16llu  %6d  %5d  ", i + 1, (unsigned long long)g[i].fence,
           g[i].worker, g[i].round + 1);
    print_ms(g[i].granted_us - g[i].asked_us, 7);
    if (i == 0) {
      printf("  %13s\n", "-");
      continue;
    }
    int64_t h = g[i].granted_us - g[i - 1].released_us;
    if (h >= 0)
      handoffs[nh++] = h;
    printf("  ");
    print_ms(h, 7);
    printf("\n");
  }
  size_t expect = (size_t)(d->workers * d->rounds);
  printf("\n%zu of %zu grants\n", n, expect);
  printf("fences strictly increase:    %s\n", repeats == 0 ? "ok" : "FAILED");
  printf("holds never overlap:         %s\n", overlaps == 0 ? "ok" : "FAILED");
  printf("first come, first served:    %s\n", overtaken == 0 ? "ok" : "FAILED");
  if (nh > 0) {
    qsort(handoffs, nh, sizeof(*handoffs), cmp_i64);
    printf("handoff latency:             p50 ");
    print_ms(handoffs[nh / 2], 0);
    printf(", max ");
    print_ms(handoffs[nh - 1], 0);
    printf(" (%zu handoffs)\n", nh);
  }
  free(handoffs);
  return n == expect && repeats == 0 && overlaps == 0 && overtaken == 0 ? 0 : 1;
}

static int run_demo(const demo_t *d) {
  pid_t pids[MAX_WORKERS];
  int data[2], go[2];
  long started = 0;
  int code = 0;
  rec_t *grants = calloc((size_t)(d->workers * d->rounds), sizeof(*grants));
  size_t ngrants = 0;

  if (grants == NULL || pipe(data) != 0 || pipe(go) != 0) {
    fprintf(stderr, "redturn demo: %s\n", strerror(errno));
    free(grants);
    return CLI_OSERR;
  }
  fflush(NULL);
  for (; started < d->workers; started++) {
    pid_t pid = fork();
    if (pid < 0) {
      fprintf(stderr, "redturn demo: cannot fork: %s\n", strerror(errno));
      code = CLI_OSERR;
      break;
    }
    if (pid == 0) {
      signal(SIGINT, SIG_DFL);
      signal(SIGTERM, SIG_DFL);
      close(data[0]);
      close(go[1]);
      _exit(worker(d, (int)started, data[1], go[0]));
    }
    pids[started] = pid;
  }
  close(data[1]);
  close(go[0]);

  /* Wait until every worker is connected, then let them all go. */
  rec_t r;
  for (long ready = 0; code == 0 && ready < started;) {
    int k = read_rec(data[0], &r);
    if (k <= 0) {
      code = interrupted ? CLI_SIGNAL_BASE + interrupted : 1;
    } else if (r.status != 0) {
      fprintf(stderr, "redturn demo: worker %d cannot connect: %s\n", r.worker,
              rt_strerror(r.status));
      code = cli_exit_for(r.status);
    } else {
      ready++;
    }
  }
  close(go[1]);
  while (code == 0) {
    int k = read_rec(data[0], &r);
    if (k == 0)
      break;
    if (k < 0) {
      code = interrupted ? CLI_SIGNAL_BASE + interrupted : 1;
    } else if (r.status != 0) {
      fprintf(stderr, "redturn demo: worker %d, round %d: %s\n", r.worker,
              r.round + 1, rt_strerror(r.status));
      code = 1;
    } else if (ngrants < (size_t)(d->workers * d->rounds)) {
      grants[ngrants++] = r;
    }
  }
  close(data[0]);
  for (long i = 0; i < started; i++) {
    if (code != 0)
      kill(pids[i], SIGTERM);
    int st;
    while (waitpid(pids[i], &st, 0) < 0 && errno == EINTR) {
    }
    if (code == 0 && !(WIFEXITED(st) && WEXITSTATUS(st) == 0))
      code = 1;
  }
  if (code == 0 || code == 1)
    code = report(d, grants, ngrants) != 0 ? 1 : code;
  free(grants);
  return code;
}

/* ---- arguments ----------------------------------------------------------- */

enum { OPT_WORKERS = 1, OPT_ROUNDS, OPT_HOLD, OPT_RESOURCE };

/* One option of demo (not a common one); 0 or an exit code. */
static int demo_option(demo_t *d, int id, const char *val) {
  const char *cmd = "redturn demo";
  if (id == OPT_WORKERS || id == OPT_ROUNDS) {
    long max = id == OPT_WORKERS ? MAX_WORKERS : MAX_ROUNDS, v;
    if (cli_parse_count(val, max, &v) != 0 || v < 1)
      return cli_usage_error(cmd, "--%s must be 1 to %ld",
                             id == OPT_WORKERS ? "workers" : "rounds", max);
    *(id == OPT_WORKERS ? &d->workers : &d->rounds) = v;
  } else if (id == OPT_HOLD) {
    if (cli_duration_opt(cmd, "--hold", val, &d->hold_ms) != 0)
      return CLI_USAGE;
    if (d->hold_ms > 60000)
      return cli_usage_error(cmd, "--hold must be at most 1m");
  } else if (val[0] == '\0') {
    return cli_usage_error(cmd, "--resource is empty");
  } else {
    d->name = val;
  }
  return 0;
}

int cli_demo(cli_common *common, int argc, char **argv) {
  static const cli_opt opts[] = {{"workers", 0, 1, OPT_WORKERS},
                                 {"rounds", 0, 1, OPT_ROUNDS},
                                 {"hold", 0, 1, OPT_HOLD},
                                 {"resource", 0, 1, OPT_RESOURCE},
                                 {NULL, 0, 0, 0}};
  const char *cmd = "redturn demo";
  char name[64], url[512];
  demo_t d;
  cli_args a;
  int id, help = 0;
  const char *val;

  memset(&d, 0, sizeof(d));
  d.workers = 4;
  d.rounds = 3;
  d.hold_ms = 50;
  snprintf(name, sizeof(name), "demo-%ld", (long)getpid());
  d.name = name;
  cli_args_init(&a, argc, argv, cmd);
  for (;;) {
    int kind = cli_next(&a, opts, &id, &val);
    if (kind == CLI_ARG_ERR)
      return CLI_USAGE;
    if (kind == CLI_ARG_END)
      break;
    if (kind == CLI_ARG_POS)
      return cli_usage_error(cmd, "unexpected argument '%s'", val);
    if (cli_common_opt(common, id, val, &help))
      continue;
    int code = demo_option(&d, id, val);
    if (code != 0)
      return code;
  }
  if (help) {
    cli_help_demo(stdout);
    return CLI_OK;
  }

  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_signal; /* no SA_RESTART: reads end with EINTR */
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);

  rts_server server;
  char server_url[64];
  memset(&server, 0, sizeof(server));
  d.common = common;
  d.url = common->url;
  d.prefix = common->prefix;
  if (!common->url_given) {
    char err[1600];
    rts_options so;
    memset(&so, 0, sizeof(so));
    so.dir_prefix = "redturn-demo";
    if (rts_start(&server, &so, err, sizeof(err)) != 0) {
      fprintf(stderr, "redturn demo: %s (or give --url)\n", err);
      return CLI_UNAVAILABLE;
    }
    rts_url(&server, server_url, sizeof(server_url));
    d.url = server_url;
    printf("redturn demo: started redis-server (pid %ld) on %s\n",
           (long)server.pid, server_url);
  }
  cli_url_display(d.url, url, sizeof(url));
  printf("redturn demo: %ld workers x %ld rounds on ", d.workers, d.rounds);
  cli_put_text(stdout, d.name, strlen(d.name));
  printf(" at %s, each holding the lock %lld ms\n", url, (long long)d.hold_ms);

  int code = run_demo(&d);
  if (server.pid > 0) {
    rts_stop(&server);
    printf("redturn demo: stopped redis-server\n");
  }
  return code;
}
