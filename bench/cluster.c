/* redturn-bench-cluster: grants per second on spread keys, on a Redis
 * Cluster of 3 shards and of 1 shard, in the same run (docs/PERFORMANCE.md,
 * "Cluster"). For each key count K and each cluster it starts the cluster
 * on loopback (tools/rttopo.h, no replicas, stopped by pid), forks P worker
 * processes of one client each running L lanes of rt_wait + rt_signal on
 * random keys of K, and counts the grants of S seconds.
 *
 *   redturn-bench-cluster [-P procs] [-L lanes] [-s seconds] [-K k,k...]
 */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "redturn.h"
#include "rttopo.h"

/* Grants of the first second (connects, subscriptions) are not counted. */
#define WARM_MS 1000

typedef struct lane {
  rt_client_t *c;
  long keys;
  uint64_t seed;
  uint64_t grants;
  uint64_t errors; /* waits that failed (their status is not 0) */
  int stop;
} lane;

static void lane_next(lane *ln);

static void released(rt_lock_t *l, int status, void *data) {
  (void)l;
  (void)status;
  lane_next(data);
}

static void granted(rt_lock_t *l, int status, void *data) {
  lane *ln = data;
  if (status == 0) {
    ln->grants++;
    if (rt_signal(l, released, ln) == 0)
      return;
  }
  ln->errors++;
  lane_next(ln);
}

static void lane_next(lane *ln) {
  char name[32];
  rt_lock_t *l;
  if (ln->stop)
    return;
  ln->seed = ln->seed * 6364136223846793005ull + 1442695040888963407ull;
  int n = snprintf(name, sizeof(name), "k%ld",
                   (long)((ln->seed >> 33) % (uint64_t)ln->keys));
  if (rt_wait(ln->c, name, (size_t)n, 10000, 30000, granted, ln, &l) != 0)
    ln->stop = 1;
}

static void stop_timer(uv_timer_t *t) {
  lane *lanes = t->data;
  for (int i = 0; lanes[i].c != NULL; i++)
    lanes[i].stop = 1;
}

/* The end of the warm-up (connects, subscriptions): counting starts. */
static void warm_timer(uv_timer_t *t) {
  lane *lanes = t->data;
  for (int i = 0; lanes[i].c != NULL; i++)
    lanes[i].grants = 0;
}

static void closed(rt_client_t *c, void *data) {
  (void)c;
  (void)data;
}

/* One worker: one client, nlanes lanes, for ms; writes its grant count. */
static int worker(const char *url, int nlanes, long keys, int64_t ms, int out) {
  uv_loop_t loop;
  rt_options_t o;
  rt_client_t *c;
  lane lanes[65];
  uv_timer_t t, warm;
  uv_loop_init(&loop);
  rt_options_init(&o);
  o.url = url;
  o.prefix = "bench";
  if (rt_client_open(&loop, &o, NULL, NULL, &c) != 0)
    return 1;
  memset(lanes, 0, sizeof(lanes));
  for (int i = 0; i < nlanes; i++) {
    lanes[i].c = c;
    lanes[i].keys = keys;
    lanes[i].seed = (uint64_t)getpid() * 7919u + (uint64_t)i * 104729u;
    lane_next(&lanes[i]);
  }
  uv_timer_init(&loop, &t);
  t.data = lanes;
  uv_timer_start(&t, stop_timer, (uint64_t)(ms + WARM_MS), 0);
  uv_timer_init(&loop, &warm);
  warm.data = lanes;
  uv_timer_start(&warm, warm_timer, WARM_MS, 0);
  uv_run(&loop, UV_RUN_ONCE);
  while (!lanes[0].stop)
    uv_run(&loop, UV_RUN_ONCE);
  uint64_t total[2] = {0, 0};
  for (int i = 0; i < nlanes; i++) {
    total[0] += lanes[i].grants;
    total[1] += lanes[i].errors;
  }
  rt_client_close(c, closed, NULL);
  uv_close((uv_handle_t *)&t, NULL);
  uv_close((uv_handle_t *)&warm, NULL);
  uv_run(&loop, UV_RUN_DEFAULT);
  uv_loop_close(&loop);
  return write(out, total, sizeof(total)) == sizeof(total) ? 0 : 1;
}

/* Grants per second of procs workers on a cluster of masters shards
 * (failed waits in *errors). */
static double run(int masters, int procs, int nlanes, long keys, int secs,
                  uint64_t *errors) {
  rts_cluster cl;
  char err[1024], url[64];
  int fds[2];
  memset(&cl, 0, sizeof(cl));
  if (rts_cluster_start(&cl, masters, 0, 1000, err, sizeof(err)) != 0) {
    fprintf(stderr, "redturn-bench-cluster: %s\n", err);
    exit(1);
  }
  snprintf(url, sizeof(url), "redis://127.0.0.1:%d", cl.node[0].server.port);
  if (pipe(fds) != 0)
    exit(1);
  pid_t pids[256];
  for (int p = 0; p < procs; p++) {
    if ((pids[p] = fork()) == 0) {
      close(fds[0]);
      _exit(worker(url, nlanes, keys, (int64_t)secs * 1000, fds[1]));
    }
  }
  close(fds[1]);
  uint64_t total = 0, one[2];
  *errors = 0;
  while (read(fds[0], one, sizeof(one)) == sizeof(one)) {
    total += one[0];
    *errors += one[1];
  }
  close(fds[0]);
  /* The cluster's servers are children too: wait for the workers only. */
  for (int p = 0; p < procs; p++)
    waitpid(pids[p], NULL, 0);
  rts_cluster_stop(&cl);
  return (double)total / secs;
}

int main(int argc, char **argv) {
  int procs = 4, nlanes = 16, secs = 5, opt;
  const char *klist = "64,10000";
  while ((opt = getopt(argc, argv, "P:L:s:K:h")) != -1) {
    switch (opt) {
    case 'P':
      procs = atoi(optarg);
      break;
    case 'L':
      nlanes = atoi(optarg);
      break;
    case 's':
      secs = atoi(optarg);
      break;
    case 'K':
      klist = optarg;
      break;
    default:
      fprintf(stderr,
              "usage: redturn-bench-cluster [-P procs] [-L lanes 1..64] "
              "[-s seconds] [-K k,k...]\n");
      return opt == 'h' ? 0 : 2;
    }
  }
  if (procs < 1 || procs > 256 || nlanes < 1 || nlanes > 64 || secs < 1) {
    fprintf(stderr, "redturn-bench-cluster: bad -P, -L or -s\n");
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  printf("%-8s %-10s %14s %14s %8s %s\n", "K", "P x L", "1 shard g/s",
         "3 shards g/s", "ratio", "failed waits (1, 3)");
  for (const char *k = klist; *k != '\0';) {
    long keys = strtol(k, (char **)&k, 10);
    if (*k == ',')
      k++;
    uint64_t e1, e3;
    double one = run(1, procs, nlanes, keys, secs, &e1);
    double three = run(3, procs, nlanes, keys, secs, &e3);
    char pl[16];
    snprintf(pl, sizeof(pl), "%d x %d", procs, nlanes);
    printf("%-8ld %-10s %14.0f %14.0f %8.2f %llu, %llu\n", keys, pl, one, three,
           three / one, (unsigned long long)e1, (unsigned long long)e3);
    fflush(stdout);
  }
  return 0;
}
