/* Running the redturn command in tests (see rtt_cli.h). */
#include "rtt_cli.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

const char *rtt_cli_path(void) {
  static char path[PATH_MAX + 16];
  const char *env = getenv("REDTURN_CLI");
  if (env != NULL && env[0] != '\0')
    return env;
  if (path[0] == '\0') {
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    cr_assert_gt(n, 0, "readlink /proc/self/exe: %s", strerror(errno));
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    *slash = '\0';
    slash = strrchr(self, '/');
    cr_assert_not_null(slash);
    *slash = '\0';
    snprintf(path, sizeof(path), "%s/redturn", self);
  }
  cr_assert_eq(access(path, X_OK), 0, "%s is not built (or set REDTURN_CLI)",
               path);
  return path;
}

/* Start the tool with args (NULL-terminated); with conn, "--url <test url>
 * --prefix <test prefix>" come first. keep_url: leave REDTURN_URL in the
 * environment (it is removed otherwise, so the tool's default is tested
 * only on purpose). */
void rtt_cli_start(rtt_proc *p, int conn, const char *const *args) {
  const char *argv[64];
  int n = 0;
  argv[n++] = rtt_cli_path();
  if (conn) {
    argv[n++] = "--url";
    argv[n++] = rtt_url();
    argv[n++] = "--prefix";
    argv[n++] = rtt_prefix();
  }
  for (int i = 0; args[i] != NULL && n < 63; i++)
    argv[n++] = args[i];
  argv[n] = NULL;

  int out[2], err[2];
  cr_assert_eq(pipe(out), 0);
  cr_assert_eq(pipe(err), 0);
  memset(p, 0, sizeof(*p));
  fflush(NULL);
  pid_t parent = getpid();
  p->pid = fork();
  cr_assert_geq(p->pid, 0);
  if (p->pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
      _exit(126);
    dup2(out[1], STDOUT_FILENO);
    dup2(err[1], STDERR_FILENO);
    int null = open("/dev/null", O_RDONLY);
    dup2(null, STDIN_FILENO);
    close(out[0]);
    close(err[0]);
    unsetenv("REDTURN_URL");
    execv(argv[0], (char *const *)argv);
    _exit(125);
  }
  close(out[1]);
  close(err[1]);
  p->fds[0] = out[0];
  p->fds[1] = err[0];
  fcntl(out[0], F_SETFL, O_NONBLOCK);
  fcntl(err[0], F_SETFL, O_NONBLOCK);
  p->started_ms = rtt_now_ms();
}

void rtt_cli_drain(rtt_proc *p, int timeout_ms) {
  struct pollfd pf[2];
  int n = 0;
  for (int i = 0; i < 2; i++)
    if (p->fds[i] >= 0) {
      pf[n].fd = p->fds[i];
      pf[n].events = POLLIN;
      n++;
    }
  if (n == 0 || poll(pf, (nfds_t)n, timeout_ms) <= 0)
    return;
  for (int i = 0; i < 2; i++) {
    char *buf = i == 0 ? p->out : p->err;
    for (;;) {
      if (p->fds[i] < 0 || p->lens[i] >= RTT_OUT_MAX - 1)
        break;
      ssize_t k =
          read(p->fds[i], buf + p->lens[i], RTT_OUT_MAX - 1 - p->lens[i]);
      if (k > 0) {
        p->lens[i] += (size_t)k;
        buf[p->lens[i]] = '\0';
        continue;
      }
      if (k == 0) {
        close(p->fds[i]);
        p->fds[i] = -1;
      }
      break;
    }
  }
}

/* Has it exited? (reads its output meanwhile) */
int rtt_cli_poll(void *arg) {
  rtt_proc *p = arg;
  if (p->done)
    return 1;
  rtt_cli_drain(p, 0);
  int st;
  if (waitpid(p->pid, &st, WNOHANG) != p->pid)
    return 0;
  p->ended_ms = rtt_now_ms();
  p->code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  p->done = 1;
  /* What is already in the pipes; a grandchild may keep them open. */
  for (int i = 0; i < 20 && (p->fds[0] >= 0 || p->fds[1] >= 0); i++)
    rtt_cli_drain(p, 5);
  for (int i = 0; i < 2; i++)
    if (p->fds[i] >= 0) {
      close(p->fds[i]);
      p->fds[i] = -1;
    }
  return 1;
}

/* Wait for it to exit (killing it after timeout_ms); returns its code. */
int rtt_cli_wait(rtt_proc *p, int64_t timeout_ms) {
  uint64_t until = rtt_now_ms() + (uint64_t)timeout_ms;
  while (!rtt_cli_poll(p)) {
    if (rtt_now_ms() > until) {
      kill(p->pid, SIGKILL);
      while (!rtt_cli_poll(p))
        rtt_cli_drain(p, 10);
      cr_assert_fail(
          "redturn did not exit within %lld ms; stdout:\n%s\nstderr:\n%s",
          (long long)timeout_ms, p->out, p->err);
    }
    rtt_cli_drain(p, 10);
  }
  return p->code;
}

/* Run with the test's --url/--prefix and wait (10 s at most). */
int rtt_cli(rtt_proc *p, const char *const *args) {
  rtt_cli_start(p, 1, args);
  return rtt_cli_wait(p, 10000);
}

/* Run with no connection options. */
int rtt_cli_bare(rtt_proc *p, const char *const *args) {
  rtt_cli_start(p, 0, args);
  return rtt_cli_wait(p, 20000);
}
/* The number after "key": in a JSON text; asserts it is there. */
long long rtt_json_num(const char *json, const char *key) {
  char pat[64];
  snprintf(pat, sizeof(pat), "\"%s\":", key);
  const char *p = strstr(json, pat);
  cr_assert_not_null(p, "no %s in %s", key, json);
  char *end;
  long long v = strtoll(p + strlen(pat), &end, 10);
  cr_assert_neq(end, p + strlen(pat), "%s is not a number in %s", key, json);
  return v;
}

void rtt_assert_has(const char *text, const char *want) {
  cr_assert_not_null(strstr(text, want), "missing <%s> in:\n%s", want, text);
}

int rtt_count_lines(const char *s) {
  int n = 0;
  for (; (s = strchr(s, '\n')) != NULL; s++)
    n++;
  return n;
}

int rtt_cli_has_lines(void *arg) {
  rtt_lines_goal *g = arg;
  rtt_cli_poll(g->p);
  return rtt_count_lines(g->p->out) >= g->n;
}

/* ---- scratch files ------------------------------------------------------- */

static char scratch[64];

const char *rtt_scratch_dir(void) {
  snprintf(scratch, sizeof(scratch), "/tmp/rt-it-cli-XXXXXX");
  cr_assert_not_null(mkdtemp(scratch));
  return scratch;
}

void rtt_scratch_path(char *buf, size_t cap, const char *file) {
  snprintf(buf, cap, "%s/%s", scratch, file);
}

void rtt_scratch_remove(void) {
  char cmd[128];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", scratch);
  cr_assert_eq(system(cmd), 0);
}

void rtt_scratch_read(const char *file, char *buf, size_t cap) {
  char path[128];
  rtt_scratch_path(path, sizeof(path), file);
  buf[0] = '\0';
  FILE *f = fopen(path, "r");
  if (f == NULL)
    return;
  size_t n = fread(buf, 1, cap - 1, f);
  buf[n] = '\0';
  fclose(f);
}

static int scratch_has(void *file) {
  char buf[64];
  rtt_scratch_read(file, buf, sizeof(buf));
  return strchr(buf, '\n') != NULL; /* a whole line was written */
}

void rtt_scratch_await(uv_loop_t *loop, const char *file) {
  cr_assert(rtt_run_until_fn(loop, scratch_has, (void *)file, 10000),
            "the command never wrote %s", file);
}

const char *rtt_script(char *buf, size_t cap, const char *text) {
  size_t n = 0;
  for (; *text != '\0' && n + sizeof(scratch) + 1 < cap; text++) {
    if (*text == 'D' && (text[1] == '/' || text[1] == '\0'))
      n += (size_t)snprintf(buf + n, cap - n, "%s", scratch);
    else
      buf[n++] = *text;
  }
  buf[n] = '\0';
  return buf;
}

void rtt_private_url(rtt_server *s, char *url, size_t cap) {
  rtt_server_start(s, NULL);
  snprintf(url, cap, "redis://127.0.0.1:%d", s->port);
}
