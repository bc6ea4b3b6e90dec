/* Test support: child processes (forked contenders, requesters) and the
 * redturn binary run by a test; see rt_test.h. */
#include "rtt_internal.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
/* ---- processes ------------------------------------------------------------- */

void rtt_fork(rtt_child *ch, int (*fn)(int out_fd, int go_fd, void *arg),
              void *arg) {
  int out[2], go[2];
  cr_assert_eq(pipe(out), 0);
  cr_assert_eq(pipe(go), 0);
  fflush(NULL);
  pid_t pid = rtt__fork_tied(126);
  if (pid == 0) {
    close(out[0]);
    close(go[1]);
    /* The test's private servers belong to the parent. */
    rtt__forget_servers();
    _exit(fn(out[1], go[0], arg));
  }
  close(out[1]);
  close(go[0]);
  ch->pid = pid;
  ch->out_fd = out[0];
  ch->go_fd = go[1];
}

void rtt_child_go(rtt_child *ch) {
  char b = 'g';
  cr_assert_eq(rtt_write_all(ch->go_fd, &b, 1), 0, "cannot start child");
}

int rtt_await_go(int go_fd) {
  char b;
  ssize_t n;
  while ((n = read(go_fd, &b, 1)) < 0 && errno == EINTR) {
  }
  return n == 1 ? 0 : -1;
}

int rtt_write_all(int fd, const void *buf, size_t len) {
  const char *p = buf;
  while (len > 0) {
    ssize_t n = write(fd, p, len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return -1;
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

int rtt_child_wait_forever(int out_fd, const char *name, int64_t ttl_ms,
                           rt_lock_cb cb, void *data) {
  return rtt_child_wait_forever_ex(out_fd, name, NULL, ttl_ms, cb, data);
}

int rtt_child_wait_forever_ex(int out_fd, const char *name,
                              const rt_request_t *req, int64_t ttl_ms,
                              rt_lock_cb cb, void *data) {
  uv_loop_t l;
  rt_client_t *c;
  rt_options_t o;
  if (uv_loop_init(&l) != 0)
    return 4;
  rt_options_init(&o);
  o.url = rtt_url();
  o.prefix = rtt_prefix();
  o.script_path = rtt_script_path();
  if (rt_client_open(&l, &o, NULL, NULL, &c) != 0)
    return 5;
  if (rt_wait_ex(c, name, strlen(name), req, ttl_ms, RT_FOREVER, cb, data,
                 NULL) != 0)
    return 6;
  char b = 'q';
  rtt_write_all(out_fd, &b, 1);
  uv_run(&l, UV_RUN_DEFAULT);
  return 8;
}

typedef struct requester {
  int port, hold;
  const char *name;
  int64_t ttl_ms;
  int done; /* 1 granted, -1 failed */
} requester;

static void requester_cb(rt_lock_t *l, int status, void *data) {
  requester *rq = data;
  (void)l;
  rq->done = status == 0 ? 1 : -1;
}

/* The rtt_fork_requester() child (child-safe). */
static int requester_main(int out_fd, int go_fd, void *arg) {
  requester *rq = arg;
  uv_loop_t l;
  rt_client_t *c;
  rt_lock_t *lk;
  rt_options_t o;
  if (rtt_await_go(go_fd) != 0)
    return 2;
  if (uv_loop_init(&l) != 0)
    return 4;
  rt_options_init(&o);
  o.host = "127.0.0.1";
  o.port = rq->port;
  o.prefix = rtt_prefix();
  o.script_path = rtt_script_path();
  if (rt_client_open(&l, &o, NULL, NULL, &c) != 0)
    return 5;
  if (rt_wait(c, rq->name, strlen(rq->name), rq->ttl_ms, RT_FOREVER,
              requester_cb, rq, &lk) != 0)
    return 6;
  while (rq->done == 0 && (rq->hold || rt_lock_position(lk) == 0))
    uv_run(&l, UV_RUN_ONCE);
  if (rq->done < 0)
    return 7;
  char id[RTT_ID_MAX] = {0};
  snprintf(id, sizeof(id), "%s", rt_lock_id(lk));
  if (rtt_write_all(out_fd, id, sizeof(id)) != 0)
    return 7;
  uv_run(&l, UV_RUN_DEFAULT);
  return 8;
}

void rtt_fork_requester(rtt_child *ch, int port, const char *name,
                        int64_t ttl_ms, int hold) {
  requester rq = {port, hold, name, ttl_ms, 0};
  (void)rtt_prefix(); /* decided before the fork: the child shares it */
  rtt_fork(ch, requester_main, &rq);
}

void rtt_requester_id(rtt_child *ch, char *id) {
  rtt_child_go(ch);
  cr_assert_eq(rtt_read_records(ch->out_fd, id, RTT_ID_MAX, 1, 8000), 1,
               "the child did not report its request id");
  id[RTT_ID_MAX - 1] = '\0';
}

void rtt_child_kill(rtt_child *ch) {
  kill(ch->pid, SIGKILL);
  rtt_child_wait(ch, 5000);
}

size_t rtt_read_records(int fd, void *buf, size_t rec, size_t max,
                        int64_t timeout_ms) {
  char *p = buf;
  size_t got = 0; /* bytes */
  uint64_t until = rtt_now_ms() + (uint64_t)timeout_ms;
  while (got < rec * max) {
    int64_t left = (int64_t)until - (int64_t)rtt_now_ms();
    if (left <= 0)
      break;
    struct pollfd pfd = {fd, POLLIN, 0};
    int pr = poll(&pfd, 1, (int)left);
    if (pr < 0 && errno == EINTR)
      continue;
    if (pr <= 0)
      break;
    ssize_t n = read(fd, p + got, rec * max - got);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break; /* EOF */
    got += (size_t)n;
  }
  return got / rec;
}

int rtt_child_wait(rtt_child *ch, int64_t timeout_ms) {
  int status = 0;
  uint64_t until = rtt_now_ms() + (uint64_t)timeout_ms;
  pid_t r;
  while ((r = waitpid(ch->pid, &status, WNOHANG)) == 0 && rtt_now_ms() < until)
    rtt_sleep_ms(5);
  if (r == 0) {
    kill(ch->pid, SIGKILL);
    waitpid(ch->pid, &status, 0);
  }
  if (ch->out_fd >= 0)
    close(ch->out_fd);
  if (ch->go_fd >= 0)
    close(ch->go_fd);
  ch->out_fd = ch->go_fd = -1;
  ch->pid = 0;
  if (WIFEXITED(status))
    return WEXITSTATUS(status);
  return 128 + WTERMSIG(status);
}

int rtt_redturn(const char *args, char *out, size_t cap) {
  char self[4096], cmd[8192];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  cr_assert_gt(n, 0);
  self[n] = '\0';
  *strrchr(self, '/') = '\0';
  *strrchr(self, '/') = '\0';
  const char *env = getenv("REDTURN_CLI");
  snprintf(cmd, sizeof(cmd), "'%s' %s 2>&1",
           env != NULL && env[0] != '\0' ? env : strcat(self, "/redturn"),
           args);
  FILE *f = popen(cmd, "r");
  cr_assert_not_null(f);
  size_t len = fread(out, 1, cap - 1, f);
  out[len] = '\0';
  int st = pclose(f);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

void rtt_cli_runs_and_demos(const char *url) {
  char args[1024], out[8192];
  snprintf(
      args, sizeof(args),
      "run --url '%s' --prefix %s job -- sh -c 'echo fence=$REDTURN_FENCE'",
      url, rtt_prefix());
  cr_assert_eq(rtt_redturn(args, out, sizeof(out)), 0, "%s", out);
  cr_assert(strstr(out, "fence=") != NULL && strstr(out, "fence=\n") == NULL,
            "%s", out);
  snprintf(args, sizeof(args), "demo --url '%s' --prefix %s", url,
           rtt_prefix());
  cr_assert_eq(rtt_redturn(args, out, sizeof(out)), 0, "%s", out);
  cr_assert(strstr(out, "first come, first served:    ok") != NULL, "%s", out);
}
