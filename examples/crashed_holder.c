/* A holder that crashes never releases: the waiters' watchdog asks Redis to
 * evict it once its lease is over by the Redis clock, and the next waiter
 * gets the lock. This program measures how long after the lease that
 * happens ("slack"), and that it never happens before.
 *
 *   redturn-crashed_holder [-n ROUNDS] [-t TTL_MS] [URL]
 *
 * Each round a child process takes the lock, reports its lease deadline and
 * is killed with SIGKILL; the parent, already queued, is granted after the
 * eviction. Both times come from Redis (rt_lock_deadline_ms() and the
 * grant's deadline minus its lease), so no client clock is involved. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <redturn.h>

typedef struct round {
  int pipe_fd;         /* the child writes its lease deadline here */
  int64_t deadline_ms; /* the crashed holder's lease end (Redis clock) */
  int64_t granted_ms;  /* when the parent was granted (Redis clock) */
  int status;
} round_t;

static rt_options_t opts;
static const char resource[] = "crashed-holder-demo";

/* ---- the child: take the lock, report, wait to be killed -------------- */

static void child_granted(rt_lock_t *lock, int status, void *data) {
  int fd = *(int *)data;
  int64_t deadline = status == 0 ? rt_lock_deadline_ms(lock) : -1;
  if (write(fd, &deadline, sizeof(deadline)) != sizeof(deadline))
    _exit(2);
  pause(); /* the parent kills us while we hold the lock */
}

static void run_child(int fd, int64_t ttl) {
  uv_loop_t loop;
  rt_client_t *client;
  uv_loop_init(&loop);
  if (rt_client_open(&loop, &opts, NULL, NULL, &client) != 0 ||
      rt_wait(client, resource, sizeof(resource) - 1, ttl, RT_FOREVER,
              child_granted, &fd, NULL) != 0)
    _exit(2);
  uv_run(&loop, UV_RUN_DEFAULT);
  _exit(3);
}

/* ---- the parent -------------------------------------------------------- */

static void parent_granted(rt_lock_t *lock, int status, void *data) {
  round_t *r = data;
  r->status = status;
  if (status == 0) {
    r->granted_ms = rt_lock_deadline_ms(lock) - rt_lock_lease_ms(lock);
    rt_signal(lock, NULL, NULL);
  }
  rt_client_close(rt_lock_client(lock), NULL, NULL);
}

static int run_round(int64_t ttl, round_t *r) {
  int fds[2];
  if (pipe(fds) != 0)
    return -1;
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    run_child(fds[1], ttl);
  }
  close(fds[1]);
  if (pid < 0 ||
      read(fds[0], &r->deadline_ms, sizeof(r->deadline_ms)) !=
          sizeof(r->deadline_ms) ||
      r->deadline_ms < 0) {
    fprintf(stderr, "the holder could not take the lock\n");
    return -1;
  }
  close(fds[0]);

  /* Queue behind the holder, then kill it. */
  uv_loop_t loop;
  rt_client_t *client;
  uv_loop_init(&loop);
  int err = rt_client_open(&loop, &opts, NULL, NULL, &client);
  if (err == 0)
    err = rt_wait(client, resource, sizeof(resource) - 1, ttl, 10 * ttl,
                  parent_granted, r, NULL);
  if (err != 0) {
    fprintf(stderr, "redturn: %s\n", rt_strerror(err));
    return -1;
  }
  usleep(50 * 1000); /* let the wait reach Redis before the crash */
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  uv_run(&loop, UV_RUN_DEFAULT);
  uv_loop_close(&loop);
  if (r->status != 0) {
    fprintf(stderr, "wait failed: %s\n", rt_strerror(r->status));
    return -1;
  }
  return 0;
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  int rounds = 10, opt;
  int64_t ttl = 300;
  while ((opt = getopt(argc, argv, "n:t:h")) != -1) {
    if (opt == 'n')
      rounds = atoi(optarg);
    else if (opt == 't')
      ttl = atoll(optarg);
    else {
      fprintf(stderr, "usage: %s [-n ROUNDS] [-t TTL_MS] [URL]\n", argv[0]);
      return opt == 'h' ? 0 : 64;
    }
  }
  if (rounds < 1 || rounds > 1000 || ttl < 1) {
    fprintf(stderr, "rounds must be 1..1000 and the TTL positive\n");
    return 64;
  }
  rt_options_init(&opts);
  opts.url = optind < argc ? argv[optind] : getenv("REDTURN_URL");
  char prefix[32];
  snprintf(prefix, sizeof(prefix), "crash-%ld", (long)getpid());
  opts.prefix = prefix;

  int64_t *slack = calloc((size_t)rounds, sizeof(*slack));
  int early = 0;
  for (int i = 0; i < rounds; i++) {
    round_t r = {0};
    if (slack == NULL || run_round(ttl, &r) != 0)
      return 1;
    slack[i] = r.granted_ms - r.deadline_ms;
    early += slack[i] < 0;
    printf("round %2d  lease ended %lld  next grant %lld  slack %lld ms\n",
           i + 1, (long long)r.deadline_ms, (long long)r.granted_ms,
           (long long)slack[i]);
  }
  qsort(slack, (size_t)rounds, sizeof(*slack), cmp_i64);
  printf("ttl %lld ms, %d rounds: slack p50 %lld ms, max %lld ms, "
         "early evictions %d\n",
         (long long)ttl, rounds, (long long)slack[rounds / 2],
         (long long)slack[rounds - 1], early);
  free(slack);
  return early == 0 ? 0 : 1;
}
