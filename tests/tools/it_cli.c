/* The redturn command-line tool, run as a program: help and usage errors,
 * `run` (status passthrough, environment, wait deadline, unreachable
 * Redis, renewal, lost lock, cancel on a signal), inspect (text, JSON,
 * Prometheus, stalled holders), watch, evict and demo; run over TLS.
 *
 * The tool is $REDTURN_CLI, else "redturn" in the build directory (the
 * parent of this test's directory). Every run gets --url and --prefix of
 * this test, so tests never see each other's keys. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rt_test.h"
#include "rtt_proxy.h"
#include "rtt_tls.h"

extern char **environ;

RTT_SUITE_TIMEOUT(cli, 60);

/* ---- running the tool ---------------------------------------------------- */

#define OUT_MAX 65536

typedef struct proc {
  pid_t pid;
  int fds[2]; /* stdout, stderr (read ends) */
  char out[OUT_MAX];
  char err[OUT_MAX];
  size_t lens[2];
  int code; /* exit status, or 128 + signal */
  int done;
  uint64_t started_ms, ended_ms;
} proc_t;

static const char *cli_path(void) {
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
static void start_argv(proc_t *p, int conn, const char *const *args) {
  const char *argv[64];
  int n = 0;
  argv[n++] = cli_path();
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

static void drain(proc_t *p, int timeout_ms) {
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
      if (p->fds[i] < 0 || p->lens[i] >= OUT_MAX - 1)
        break;
      ssize_t k = read(p->fds[i], buf + p->lens[i], OUT_MAX - 1 - p->lens[i]);
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
static int proc_poll(void *arg) {
  proc_t *p = arg;
  if (p->done)
    return 1;
  drain(p, 0);
  int st;
  if (waitpid(p->pid, &st, WNOHANG) != p->pid)
    return 0;
  p->ended_ms = rtt_now_ms();
  p->code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  p->done = 1;
  /* What is already in the pipes; a grandchild may keep them open. */
  for (int i = 0; i < 20 && (p->fds[0] >= 0 || p->fds[1] >= 0); i++)
    drain(p, 5);
  for (int i = 0; i < 2; i++)
    if (p->fds[i] >= 0) {
      close(p->fds[i]);
      p->fds[i] = -1;
    }
  return 1;
}

/* Wait for it to exit (killing it after timeout_ms); returns its code. */
static int proc_wait(proc_t *p, int64_t timeout_ms) {
  uint64_t until = rtt_now_ms() + (uint64_t)timeout_ms;
  while (!proc_poll(p)) {
    if (rtt_now_ms() > until) {
      kill(p->pid, SIGKILL);
      while (!proc_poll(p))
        drain(p, 10);
      cr_assert_fail(
          "redturn did not exit within %lld ms; stdout:\n%s\nstderr:\n%s",
          (long long)timeout_ms, p->out, p->err);
    }
    drain(p, 10);
  }
  return p->code;
}

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* Run with the test's --url/--prefix and wait (10 s at most). */
static int cli(proc_t *p, const char *const *args) {
  start_argv(p, 1, args);
  return proc_wait(p, 10000);
}

/* Run with no connection options. */
static int cli_bare(proc_t *p, const char *const *args) {
  start_argv(p, 0, args);
  return proc_wait(p, 20000);
}

#define ASSERT_CODE(p, want)                                                   \
  cr_assert_eq((p)->code, (want),                                              \
               "exit %d, want %d; stdout:\n%s\nstderr:\n%s", (p)->code,        \
               (want), (p)->out, (p)->err)

/* ---- helpers ------------------------------------------------------------- */

typedef struct qgoal {
  const char *name;
  long long n;
} qgoal;

static int queue_reached(void *arg) {
  qgoal *g = arg;
  return rtt_queue_len(rc, g->name) == g->n;
}

static void run_until_queued(const char *name, long long n) {
  qgoal g = {name, n};
  cr_assert(rtt_run_until_fn(&loop, queue_reached, &g, 5000),
            "the queue of %s never had %lld entries (has %lld)", name, n,
            rtt_queue_len(rc, name));
}

/* The number after "key": in a JSON text; asserts it is there. */
static long long json_num(const char *json, const char *key) {
  char pat[64];
  snprintf(pat, sizeof(pat), "\"%s\":", key);
  const char *p = strstr(json, pat);
  cr_assert_not_null(p, "no %s in %s", key, json);
  char *end;
  long long v = strtoll(p + strlen(pat), &end, 10);
  cr_assert_neq(end, p + strlen(pat), "%s is not a number in %s", key, json);
  return v;
}

static void assert_has(const char *text, const char *want) {
  cr_assert_not_null(strstr(text, want), "missing <%s> in:\n%s", want, text);
}

/* ---- help and usage ------------------------------------------------------ */

Test(cli, every_subcommand_has_help_that_exits_0) {
  static const char *const cmds[] = {"run",   "inspect", "watch",
                                     "evict", "leader",  "demo"};
  proc_t p;
  char usage[64];
  for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
    snprintf(usage, sizeof(usage), "Usage: redturn %s", cmds[i]);
    cli_bare(&p, ARGS(cmds[i], "--help"));
    ASSERT_CODE(&p, 0);
    assert_has(p.out, usage);
    cli_bare(&p, ARGS("help", cmds[i]));
    ASSERT_CODE(&p, 0);
    assert_has(p.out, usage);
    cli_bare(&p, ARGS(cmds[i], "-h"));
    ASSERT_CODE(&p, 0);
  }
  cli_bare(&p, ARGS("--help"));
  ASSERT_CODE(&p, 0);
  assert_has(p.out, "Exit codes");
  cli_bare(&p, ARGS("--version"));
  ASSERT_CODE(&p, 0);
  assert_has(p.out, rt_version_string());
}

Test(cli, usage_errors_exit_64) {
  const char *const *const cases[] = {
      ARGS("nonsense"),
      ARGS("run"),
      ARGS("run", "res"),
      ARGS("run", "--ttl", "soon", "res", "--", "true"),
      ARGS("run", "--ttl", "0", "res", "--", "true"),
      ARGS("run", "--bogus", "res", "--", "true"),
      ARGS("run", "", "--", "true"),
      ARGS("inspect"),
      ARGS("leader"),
      ARGS("leader", "a", "b"),
      ARGS("leader", ""),
      ARGS("inspect", "res", "--max-waiters", "-1"),
      ARGS("watch", "res", "--interval"),
      ARGS("evict"),
      ARGS("evict", "a", "b"),
      ARGS("demo", "--workers", "0"),
      ARGS("--url", "http://example", "run", "res", "--", "true"),
      ARGS("--url", "redis-sentinel://h", "inspect", "res"),
      ARGS("--prefix", "a{b", "inspect", "res"),
      /* durations: a bare number is seconds; nothing else is guessed */
      ARGS("run", "-w", "1x", "res", "--", "true"),
      ARGS("run", "-w", "-1", "res", "--", "true"),
      ARGS("run", "-w", ".5", "res", "--", "true"),
      ARGS("run", "-w", "0.0001", "res", "--", "true"),
      ARGS("run", "-w", "99999999999999999999", "res", "--", "true"),
      ARGS("run", "--ttl", "500ms", "res", "--", "true"), /* too short */
      ARGS("run", "--ttl", "25h", "res", "--", "true"),
      ARGS("run", "-E", "256", "res", "--", "true"),
      ARGS("run", "-E", "x", "res", "--", "true"),
      ARGS("run", "-c", "true", "res", "true"),
      ARGS("run", "-c"),
      ARGS("inspect", "res", "--json", "--prom"),
      ARGS("--url", "unix:///run/redis.sock", "inspect", "res"),
  };
  proc_t p;
  cli_bare(&p, (const char *const[]){NULL});
  ASSERT_CODE(&p, 64);
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    cli_bare(&p, cases[i]);
    cr_assert_eq(p.code, 64, "case %zu (%s %s): exit %d; stderr:\n%s", i,
                 cases[i][0], cases[i][1] ? cases[i][1] : "", p.code, p.err);
    cr_assert_gt(p.lens[1], 0, "case %zu: no message on stderr", i);
  }
}

/* ---- run ----------------------------------------------------------------- */

/* Has the tool printed a whole "fence|resource|holder\n" line? */
static int has_line(void *arg) {
  proc_t *p = arg;
  proc_poll(p);
  return strchr(p->out, '\n') != NULL || p->done;
}

Test(cli, run_exits_with_the_commands_status_and_gives_it_the_fence) {
  proc_t p;
  /* The command prints what it was given, then holds the lock a while, so
   * the test can compare it with Redis' holder record (a released lock
   * leaves no record behind). */
  start_argv(&p, 1,
             ARGS("run", "job", "--", "sh", "-c",
                  "printf '%s|%s|%s\\n' \"$REDTURN_FENCE\" "
                  "\"$REDTURN_RESOURCE\" \"$REDTURN_HOLDER\"; "
                  "sleep 1; exit 7"));
  cr_assert(rtt_run_until_fn(&loop, has_line, &p, 5000),
            "the command printed nothing; stderr:\n%s", p.err);
  cr_assert_eq(p.done, 0, "redturn exited early: %d\n%s", p.code, p.err);
  unsigned long long fence = 0;
  char res[64] = "", holder[96] = "";
  cr_assert_eq(sscanf(p.out, "%llu|%63[^|]|%95s", &fence, res, holder), 3,
               "stdout: %s", p.out);
  cr_assert_geq(fence, 1);
  cr_assert_eq(fence,
               (unsigned long long)rtt_hfield(rc, rtt_prefix(), "job", 3, "f"));
  cr_assert_str_eq(res, "job");
  cr_assert_eq(strlen(holder) > 33 && holder[32] == ':', 1, "holder %s",
               holder);
  char ids[2][RTT_ID_MAX];
  cr_assert_eq(rtt_queue(rc, rtt_prefix(), "job", 3, ids, 2), 1);
  cr_assert_str_eq(ids[0], holder, "REDTURN_HOLDER is not the holder");
  proc_wait(&p, 10000);
  ASSERT_CODE(&p, 7);
  cr_assert_eq(rtt_queue_len(rc, "job"), 0, "released after the command");
  cr_assert_eq(rtt_hfield(rc, rtt_prefix(), "job", 3, "f"), -1);

  cli(&p, ARGS("run", "job", "true"));
  ASSERT_CODE(&p, 0);
  cli(&p, ARGS("run", "job", "--", "sh", "-c", "kill -TERM $$"));
  ASSERT_CODE(&p, 128 + SIGTERM);
  cr_assert_eq(rtt_queue_len(rc, "job"), 0);
}

Test(cli, run_reports_a_command_that_cannot_start) {
  proc_t p;
  cli(&p, ARGS("run", "job", "--", "/nonexistent/redturn-test-command"));
  ASSERT_CODE(&p, 127);
  assert_has(p.err, "cannot run");
  cr_assert_eq(rtt_queue_len(rc, "job"), 0, "the lock was released");
}

Test(cli, run_exits_69_when_redis_is_unreachable) {
  char url[64];
  proc_t p;
  snprintf(url, sizeof(url), "redis://127.0.0.1:%d", rtt_free_port());
  cli(&p, ARGS("run", "--url", url, "job", "--", "true"));
  ASSERT_CODE(&p, 69);
  assert_has(p.err, "cannot use Redis");
  assert_has(p.err, "Connection refused"); /* the errno behind it */
  cli(&p, ARGS("inspect", "--url", url, "job"));
  ASSERT_CODE(&p, 69);
  cli(&p, ARGS("evict", "--url", url, "job"));
  ASSERT_CODE(&p, 69);
}

/* Start `redturn run ARGS... job -- echo ran` through a proxy whose first
 * connection is answered nothing and then closed, as a CLIENT KILL of a
 * connection still in its handshake would; wait for its exit. */
static void run_with_first_connection_lost(proc_t *p, const char *wait) {
  char url[64];
  rtt_proxy *px = rtt_proxy_start(rtt_port());
  rtt_proxy_set(px, 0, RTT_UP, RTT_HOLD, 0);
  snprintf(url, sizeof(url), "redis://127.0.0.1:%d", rtt_proxy_port(px));
  start_argv(p, 0,
             ARGS("--url", url, "--prefix", rtt_prefix(), "run", wait, "job",
                  "--", "echo", "ran"));
  uint64_t t0 = rtt_now_ms();
  while (rtt_proxy_conn_count(px) < 1 && rtt_now_ms() - t0 < 10000)
    rtt_sleep_ms(5);
  cr_assert_geq(rtt_proxy_conn_count(px), 1, "redturn never connected");
  rtt_sleep_ms(50);
  rtt_proxy_cut(px, 0);
  proc_wait(p, 20000);
  rtt_proxy_stop(px);
}

Test(cli, run_retries_a_first_connect_lost_within_its_wait_budget) {
  proc_t p;
  run_with_first_connection_lost(&p, "-w60s");
  ASSERT_CODE(&p, 0);
  cr_assert_str_eq(p.out, "ran\n");
  cr_assert_eq(rtt_queue_len(rc, "job"), 0, "the lock was released");
  /* Without a budget (-n) it gives up, saying it once. */
  run_with_first_connection_lost(&p, "-n");
  ASSERT_CODE(&p, 69);
  assert_has(p.err, "cannot use Redis at redis://127.0.0.1:");
  assert_has(p.err, "lost: ");
  cr_assert_null(strstr(p.err, "connection to Redis lost"), "%s", p.err);
  const char *lost = strstr(p.err, " lost");
  cr_assert(lost != NULL && strstr(lost + 1, " lost") == NULL, "said twice: %s",
            p.err);
}

Test(cli, run_gives_up_at_the_wait_deadline_with_the_conflict_code) {
  rtt_client a;
  rtt_req held = {0};
  proc_t p;
  rtt_open_ready(&a, &loop, NULL);
  rtt_acquire(&loop, a.c, "job", 20000, &held);

  cli(&p, ARGS("run", "--wait-timeout", "300ms", "job", "--", "true"));
  ASSERT_CODE(&p, 1);
  cr_assert_geq(p.ended_ms - p.started_ms, 280);
  assert_has(p.err, "gave up waiting");
  cr_assert_eq(rtt_queue_len(rc, "job"), 1, "the waiter left the queue");

  cli(&p, ARGS("run", "--wait-timeout", "0", "job", "--", "true"));
  ASSERT_CODE(&p, 1);
  cr_assert_eq(rtt_queue_len(rc, "job"), 1);

  rtt_release(&loop, &held, 0);
  rtt_close(&a);
  rtt_loop_finish(&loop);
}

static void assert_signal_cancels_wait(int signo) {
  rtt_client a;
  rtt_req held = {0};
  proc_t p;
  rtt_open_ready(&a, &loop, NULL);
  rtt_acquire(&loop, a.c, "job", 20000, &held);

  start_argv(&p, 1, ARGS("run", "job", "--", "true"));
  run_until_queued("job", 2);
  kill(p.pid, signo);
  proc_wait(&p, 5000);
  ASSERT_CODE(&p, 128 + signo);
  cr_assert_eq(rtt_queue_len(rc, "job"), 1,
               "the canceled entry is still queued");
  char ids[4][RTT_ID_MAX];
  cr_assert_eq(rtt_queue(rc, rtt_prefix(), "job", 3, ids, 4), 1);
  cr_assert_str_eq(ids[0], held.id);

  rtt_release(&loop, &held, 0);
  rtt_close(&a);
  rtt_loop_finish(&loop);
}

Test(cli, sigint_while_waiting_takes_the_request_out_of_the_queue) {
  assert_signal_cancels_wait(SIGINT);
}

Test(cli, sigterm_while_waiting_takes_the_request_out_of_the_queue) {
  assert_signal_cancels_wait(SIGTERM);
}

Test(cli, run_renews_the_lease_while_the_command_outlives_its_ttl) {
  rtt_client a;
  rtt_req next = {0};
  proc_t p;
  rtt_open_ready(&a, &loop, NULL);

  start_argv(&p, 1, ARGS("run", "--ttl", "1s", "job", "--", "sleep", "3.5"));
  run_until_queued("job", 1);
  uint64_t fence = (uint64_t)rtt_hfield(rc, rtt_prefix(), "job", 3, "f");
  cr_assert_eq(rtt_wait(a.c, "job", 5000, RT_FOREVER, &next), 0);
  /* The waiter's watchdog would evict an expired holder: over two TTLs
   * pass and the command still holds the lock. */
  rtt_run_until_fn(&loop, proc_poll, &p, 2500);
  cr_assert_eq(p.done, 0, "redturn exited early: %d\n%s", p.code, p.err);
  cr_assert_eq(next.calls, 0, "the waiter got the lock while the command ran");
  cr_assert(rtt_run_until_fn(&loop, proc_poll, &p, 5000));
  ASSERT_CODE(&p, 0);
  cr_assert(rtt_run_until(&loop, &next.calls, 1, 5000));
  cr_assert_eq(next.status, 0);
  cr_assert_gt(next.fence, fence);
  cr_assert_geq(next.at_ms, p.started_ms + 3400);

  rtt_release(&loop, &next, 0);
  rtt_close(&a);
  rtt_loop_finish(&loop);
}

Test(cli, a_lost_lock_stops_the_command_and_exits_70) {
  rtt_client a;
  rtt_req next = {0};
  proc_t p;
  rtt_open_ready(&a, &loop, NULL);

  start_argv(&p, 1,
             ARGS("run", "--ttl", "1s", "--no-renew", "--grace", "300ms", "job",
                  "--", "sleep", "10"));
  run_until_queued("job", 1);
  cr_assert_eq(rtt_wait(a.c, "job", 5000, RT_FOREVER, &next), 0);
  cr_assert(rtt_run_until_fn(&loop, proc_poll, &p, 5000),
            "redturn still runs; stderr:\n%s", p.err);
  ASSERT_CODE(&p, 70);
  cr_assert_lt(p.ended_ms - p.started_ms, 4000);
  assert_has(p.err, "lost the lock");
  cr_assert(rtt_run_until(&loop, &next.calls, 1, 5000));
  cr_assert_eq(next.status, 0, "the waiter got the lock");

  rtt_release(&loop, &next, 0);
  rtt_close(&a);
  rtt_loop_finish(&loop);
}

/* ---- run: the command never outlives redturn or the lock ---------------- */

/* A scratch directory for marker files, removed at the end of the test. */
static char scratch[64];

static const char *scratch_dir(void) {
  snprintf(scratch, sizeof(scratch), "/tmp/rt-it-cli-XXXXXX");
  cr_assert_not_null(mkdtemp(scratch));
  return scratch;
}

static void scratch_path(char *buf, size_t cap, const char *file) {
  snprintf(buf, cap, "%s/%s", scratch, file);
}

static void scratch_remove(void) {
  char cmd[128];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", scratch);
  cr_assert_eq(system(cmd), 0);
}

/* The contents of a scratch file ("" if it does not exist). */
static void slurp(const char *file, char *buf, size_t cap) {
  char path[128];
  scratch_path(path, sizeof(path), file);
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
  slurp(file, buf, sizeof(buf));
  return strchr(buf, '\n') != NULL; /* a whole line was written */
}

static void await_file(const char *file) {
  cr_assert(rtt_run_until_fn(&loop, scratch_has, (void *)file, 10000),
            "the command never wrote %s", file);
}

/* A command: sh -c with "D" in script replaced by the scratch directory. */
static const char *script(char *buf, size_t cap, const char *text) {
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

/* Is the process gone (no such pid, or a zombie nobody reaps)? */
static int pid_gone(pid_t pid) {
  char path[64], stat[512];
  snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (f == NULL)
    return 1;
  size_t n = fread(stat, 1, sizeof(stat) - 1, f);
  fclose(f);
  stat[n] = '\0';
  const char *paren = strrchr(stat, ')');
  return paren == NULL || paren[2] == 'Z' || paren[2] == 'X';
}

static pid_t read_pid(const char *file) {
  char buf[32];
  slurp(file, buf, sizeof(buf));
  pid_t pid = (pid_t)atoi(buf);
  cr_assert_gt(pid, 1, "no pid in %s: <%s>", file, buf);
  return pid;
}

/* The largest number on the lines of a scratch file. */
static long long last_stamp(const char *file) {
  static char buf[1 << 16];
  long long max = 0;
  slurp(file, buf, sizeof(buf));
  for (char *line = buf; *line != '\0';) {
    long long v = strtoll(line, &line, 10);
    if (v > max)
      max = v;
    while (*line == '\n')
      line++;
  }
  return max;
}

Test(cli, sigkill_of_redturn_kills_the_commands_group_and_no_run_overlaps) {
  char cmd[512];
  proc_t first, second;
  scratch_dir();
  /* The worker is a grandchild of what redturn starts (a subshell in the
   * background): PR_SET_PDEATHSIG on the direct child alone would leave
   * it running. It stamps a file every 10 ms while it lives. */
  start_argv(&first, 1,
             ARGS("run", "--ttl", "1s", "job", "-c",
                  script(cmd, sizeof(cmd),
                         "(while :; do date +%s%N >> D/a; sleep 0.01; done) & "
                         "echo $! > D/pid; wait")));
  await_file("pid");
  await_file("a");
  pid_t worker = read_pid("pid");
  start_argv(
      &second, 1,
      ARGS("run", "job", "-c", script(cmd, sizeof(cmd), "date +%s%N > D/b")));
  run_until_queued("job", 2);

  uint64_t t0 = rtt_now_ms();
  kill(first.pid, SIGKILL);
  while (!pid_gone(worker) && rtt_now_ms() - t0 < 5000)
    rtt_sleep_ms(1);
  uint64_t died = rtt_now_ms() - t0;
  printf("SIGKILL of redturn -> the command's grandchild gone: %llu ms\n",
         (unsigned long long)died);
  cr_assert(pid_gone(worker), "the command outlived redturn by 5 s");
  cr_assert_lt(died, 1000, "the command died %llu ms after redturn",
               (unsigned long long)died);
  proc_wait(&first, 5000);
  ASSERT_CODE(&first, 128 + SIGKILL);

  /* The second run gets the lock once the first lease ran out, and
   * starts after the last stamp of the first command. */
  proc_wait(&second, 10000);
  ASSERT_CODE(&second, 0);
  long long a = last_stamp("a"), b = last_stamp("b");
  cr_assert_gt(a, 0);
  cr_assert_gt(b, a,
               "the second command started %lld us before the first "
               "one's last stamp",
               (a - b) / 1000);
  scratch_remove();
}

static void assert_signal_stops_the_command(int signo) {
  char cmd[512], got[64];
  proc_t p;
  scratch_dir();
  start_argv(&p, 1,
             ARGS("run", "job", "-c",
                  script(cmd, sizeof(cmd),
                         "trap 'echo TERM > D/got; exit 0' TERM; "
                         "echo > D/ready; sleep 30 & wait")));
  await_file("ready");
  cr_assert_eq(rtt_queue_len(rc, "job"), 1);
  kill(p.pid, signo);
  proc_wait(&p, 10000);
  ASSERT_CODE(&p, 128 + signo);
  slurp("got", got, sizeof(got));
  cr_assert_str_eq(got, "TERM\n", "the command did not get SIGTERM");
  cr_assert_eq(rtt_queue_len(rc, "job"), 0, "the lock was not released");
  assert_has(p.err, "stopping the command");
  scratch_remove();
}

Test(cli, sigterm_of_redturn_stops_the_command_and_releases) {
  assert_signal_stops_the_command(SIGTERM);
}

Test(cli, sigusr1_of_redturn_stops_the_command_and_releases) {
  assert_signal_stops_the_command(SIGUSR1);
}

Test(cli, sighup_of_redturn_stops_the_command_and_releases) {
  assert_signal_stops_the_command(SIGHUP);
}

Test(cli, the_command_inherits_only_stdin_stdout_and_stderr) {
  proc_t p;
  /* redturn itself inherits this test's descriptors (Redis connections,
   * the loop), and has its own Redis sockets. */
  cli(&p, ARGS("run", "job", "-c", "ls /proc/$$/fd"));
  ASSERT_CODE(&p, 0);
  cr_assert_str_eq(p.out, "0\n1\n2\n");
}

Test(cli, evict_sends_the_command_sigterm_at_once) {
  char cmd[512], ids[1][RTT_ID_MAX];
  proc_t holder, ev;
  scratch_dir();
  start_argv(&holder, 1,
             ARGS("run", "--ttl", "60s", "job", "-c",
                  script(cmd, sizeof(cmd),
                         "trap 'date +%s%N > D/got; exit 0' TERM; "
                         "echo > D/ready; sleep 30 & wait")));
  await_file("ready");
  cr_assert_eq(rtt_queue(rc, rtt_prefix(), "job", 3, ids, 1), 1);
  int64_t before = rtt_realtime_us();
  cli(&ev, ARGS("evict", "job", "--holder", ids[0]));
  int64_t after = rtt_realtime_us();
  ASSERT_CODE(&ev, 0);
  proc_wait(&holder, 5000);
  ASSERT_CODE(&holder, 70);
  long long got = last_stamp("got") / 1000;
  cr_assert_gt(got, 0, "the command got no SIGTERM");
  printf("evict -> the command's SIGTERM: %.1f ms from starting `redturn "
         "evict` (%.1f ms from its exit)\n",
         (double)(got - before) / 1000, (double)(got - after) / 1000);
  /* Not a poll of the lease (renewal every 20 s): the notice. */
  cr_assert_lt(got - before, 1000000, "SIGTERM came %lld ms after evict",
               (got - before) / 1000);
  scratch_remove();
}

/* A redis-server of this test's own, to stop while redturn uses it. */
static void private_server(rtt_server *s, char *url, size_t cap) {
  rtt_server_start(s, NULL);
  snprintf(url, cap, "redis://127.0.0.1:%d", s->port);
}

Test(cli, redis_gone_while_the_command_runs_bounds_the_exit) {
  char url[64], cmd[512];
  rtt_server s;
  proc_t p;
  private_server(&s, url, sizeof(url));
  scratch_dir();
  start_argv(&p, 1,
             ARGS("run", "--url", url, "job", "-c",
                  script(cmd, sizeof(cmd),
                         "echo > D/ready; sleep 1; date +%s%N > D/end")));
  await_file("ready");
  rtt_server_stop(&s);
  proc_wait(&p, 15000);
  int64_t exited = rtt_realtime_us();
  long long end = last_stamp("end") / 1000;
  cr_assert_gt(end, 0, "the command did not finish");
  ASSERT_CODE(&p, 0);
  printf("Redis gone: redturn exited %.0f ms after its command\n",
         (double)(exited - end) / 1000);
  /* The release gives up after 2 s. */
  cr_assert_lt(exited - end, 3500000, "redturn hung %lld ms",
               (exited - end) / 1000);
  scratch_remove();
}

Test(cli, a_lease_that_runs_out_while_redis_is_gone_stops_the_command) {
  char url[64];
  rtt_server s;
  proc_t p;
  private_server(&s, url, sizeof(url));
  start_argv(&p, 1,
             ARGS("run", "--url", url, "--ttl", "1s", "--grace", "100ms", "job",
                  "--", "sleep", "30"));
  /* Granted, then Redis goes away: no renewal can get through. */
  redisContext *priv = rtt_redis_at(s.port);
  uint64_t until = rtt_now_ms() + 10000;
  while (rtt_hfield(priv, rtt_prefix(), "job", 3, "f") < 0 &&
         rtt_now_ms() < until)
    rtt_sleep_ms(10);
  rtt_redis_close(priv);
  uint64_t t0 = rtt_now_ms();
  rtt_server_stop(&s);
  proc_wait(&p, 10000);
  ASSERT_CODE(&p, 70);
  assert_has(p.err, "lost the lock");
  /* lease (1 s) + release bound (2 s) + slack for a loaded machine; not
   * the 30 s a lease of the default TTL would take */
  cr_assert_lt(p.ended_ms - t0, 6000);
}

/* ---- run: flock(1) options ------------------------------------------------ */

Test(cli, flock_options_timeout_nonblock_conflict_code_and_command_string) {
  rtt_client a;
  rtt_req held = {0};
  proc_t p;
  rtt_open_ready(&a, &loop, NULL);
  rtt_acquire(&loop, a.c, "job", 20000, &held);

  /* -w SECONDS, fractional: gives up after 0.3 s with 1, as flock. */
  cli(&p, ARGS("run", "-w", "0.3", "job", "true"));
  ASSERT_CODE(&p, 1);
  cr_assert_geq(p.ended_ms - p.started_ms, 280);
  cr_assert_lt(p.ended_ms - p.started_ms, 3000);
  cli(&p, ARGS("run", "--timeout", "300ms", "-E", "7", "job", "true"));
  ASSERT_CODE(&p, 7);
  /* -n: not at all (one try-lock: no deadline to wait for). */
  cli(&p, ARGS("run", "-n", "job", "true"));
  ASSERT_CODE(&p, 1);
  assert_has(p.err, "is locked");
  cr_assert_lt(p.ended_ms - p.started_ms, 2000);
  cli(&p, ARGS("run", "-n", "-E", "7", "job", "true"));
  ASSERT_CODE(&p, 7);
  cli(&p, ARGS("run", "--nonblock", "--conflict-exit-code=0", "job", "true"));
  ASSERT_CODE(&p, 0);
  cr_assert_eq(rtt_queue_len(rc, "job"), 1, "a conflict left a request queued");
  /* Other failures keep their own codes. */
  cli(&p, ARGS("run", "-n", "-E", "7", "--url", "redis://127.0.0.1:1", "x",
               "true"));
  ASSERT_CODE(&p, 69);
  rtt_release(&loop, &held, 0);

  /* -c STRING runs through sh -c. */
  cli(&p, ARGS("run", "-c", "echo $((6 * 7)) | tr 4 x; exit 5", "job"));
  ASSERT_CODE(&p, 5);
  cr_assert_str_eq(p.out, "x2\n");
  cli(&p, ARGS("run", "-n", "job", "-c", "echo \"$REDTURN_RESOURCE\""));
  ASSERT_CODE(&p, 0);
  cr_assert_str_eq(p.out, "job\n");
  rtt_close(&a);
  rtt_loop_finish(&loop);
}

/* ---- messages ------------------------------------------------------------ */

Test(cli, messages_cut_long_names_and_say_what_is_wrong) {
  static char name[RT_NAME_MAX + 1];
  rtt_client a;
  rtt_req held = {0};
  proc_t p;
  memset(name, 'n', RT_NAME_MAX);
  rtt_open_ready(&a, &loop, NULL);
  rtt_acquire(&loop, a.c, name, 20000, &held);
  cli(&p, ARGS("run", "-n", name, "true"));
  ASSERT_CODE(&p, 1);
  assert_has(p.err, "nnn\"... (4096 bytes) is locked");
  cr_assert_lt(p.lens[1], 300, "stderr:\n%s", p.err);
  rtt_release(&loop, &held, 0);
  rtt_close(&a);
  rtt_loop_finish(&loop);

  cli_bare(&p,
           ARGS("--url", "redis+unix://u:secret@localhost", "inspect", "x"));
  ASSERT_CODE(&p, 64);
  assert_has(p.err, "(a Unix socket) is not supported");
  cr_assert_null(strstr(p.err, "secret"), "%s", p.err);
  cli_bare(&p, ARGS("--url", "redis://localhost:0", "run", "x", "true"));
  ASSERT_CODE(&p, 64);
  assert_has(p.err, "url: port");
  cli_bare(&p, ARGS("--url", "redis://localhost/db1", "evict", "x"));
  ASSERT_CODE(&p, 64);
  assert_has(p.err, "url: the db after '/'");
  cli_bare(&p, ARGS("--url", "redis-sentinel://:secret@h1,h2#mymaster",
                    "inspect", "x"));
  ASSERT_CODE(&p, 69);
  assert_has(p.err, "no Sentinel gave the address of master \"mymaster\": "
                    "h1:26379: resolve: ");
  cr_assert_null(strstr(p.err, "secret"), "%s", p.err);

  /* Redis's own words for a refused AUTH. */
  char url[128];
  snprintf(url, sizeof(url), "redis://nobody:wrong@%s:%d", rtt_host(),
           rtt_port());
  cli_bare(&p, ARGS("--url", url, "inspect", "x"));
  ASSERT_CODE(&p, 77);
  assert_has(p.err, "WRONGPASS");
  cr_assert_null(strstr(p.err, "wrong@"), "%s", p.err);
}

/* ---- inspect ------------------------------------------------------------- */

Test(cli, inspect_json_shows_holder_fence_lease_and_waiters) {
  rtt_client a, b;
  rtt_req held = {0}, waiting = {0};
  proc_t p;
  rtt_open_ready(&a, &loop, NULL);
  rtt_open_ready(&b, &loop, NULL);
  rtt_acquire(&loop, a.c, "job", 20000, &held);
  cr_assert_eq(rtt_wait(b.c, "job", 5000, RT_FOREVER, &waiting), 0);
  run_until_queued("job", 2);

  cli(&p, ARGS("inspect", "job", "free-one", "--json"));
  ASSERT_CODE(&p, 0);
  char *second = strchr(p.out, '\n');
  cr_assert_not_null(second);
  *second++ = '\0';
  char want[256];
  assert_has(p.out, "{\"resource\":\"job\",\"locked\":true");
  snprintf(want, sizeof(want), "\"holder\":\"%s\"", held.id);
  assert_has(p.out, want);
  snprintf(want, sizeof(want), "\"holder_client\":\"%s\"", rt_client_id(a.c));
  assert_has(p.out, want);
  cr_assert_eq(json_num(p.out, "fence"), (long long)held.fence);
  cr_assert_eq(json_num(p.out, "queue_length"), 2);
  snprintf(want, sizeof(want), "\"waiters\":[\"%s\"]", waiting.id);
  assert_has(p.out, want);
  long long lease = json_num(p.out, "lease_remaining_ms");
  cr_assert(lease > 10000 && lease <= 20000, "lease %lld", lease);
  cr_assert_geq(json_num(p.out, "held_ms"), 0);
  assert_has(p.out, "\"stalled\":false,\"stall_reason\":null");
  cr_assert_gt(json_num(p.out, "server_time_ms"), 0);
  /* The CLI's client takes the default path: the Functions library. */
  /* The CLI's client takes the module where the shared server has it
   * (the tests' module mode). */
  assert_has(p.out, rtt_module_mode() ? "\"script_path\":\"module\""
                                      : "\"script_path\":\"functions\"");

  assert_has(second, "{\"resource\":\"free-one\",\"locked\":false,"
                     "\"holder\":null,\"holder_label\":null,"
                     "\"holder_client\":null,\"fence\":0");
  assert_has(second, "\"queue_length\":0,\"waiters\":[]");

  /* The text form says the same for people. */
  cli(&p, ARGS("inspect", "job"));
  ASSERT_CODE(&p, 0);
  assert_has(p.out, held.id);
  assert_has(p.out, waiting.id);
  assert_has(p.out, "queue:       2 (holder + 1 waiting)");
  assert_has(p.out, rtt_module_mode()
                        ? "read by:     redturn.inspect (the redturn module)"
                        : "read by:     FCALL_RO (the Functions library)");

  rtt_release(&loop, &held, 0);
  cr_assert(rtt_run_until(&loop, &waiting.calls, 1, 5000));
  rtt_release(&loop, &waiting, 0);
  rtt_close(&a);
  rtt_close(&b);
  rtt_loop_finish(&loop);
}

Test(cli, run_labels_its_request_and_inspect_shows_the_labels) {
  proc_t holder, waiter, p;
  char ids[2][RTT_ID_MAX], want[512], host[256] = "";
  start_argv(&holder, 1,
             ARGS("run", "--label", "build-42", "lab", "--", "sleep", "20"));
  run_until_queued("lab", 1);
  start_argv(&waiter, 1, ARGS("run", "lab", "--", "true")); /* no --label */
  run_until_queued("lab", 2);
  cr_assert_eq(rtt_queue(rc, rtt_prefix(), "lab", 3, ids, 2), 2);
  gethostname(host, sizeof(host) - 1);
  char dflt[300];
  snprintf(dflt, sizeof(dflt), "%s:%d", host, (int)waiter.pid);

  cli(&p, ARGS("inspect", "lab"));
  ASSERT_CODE(&p, 0);
  snprintf(want, sizeof(want), "holder:      %s \"build-42\"\n", ids[0]);
  assert_has(p.out, want);
  snprintf(want, sizeof(want), "  1. %s \"%s\"\n", ids[1], dflt);
  assert_has(p.out, want);

  cli(&p, ARGS("inspect", "lab", "--json"));
  ASSERT_CODE(&p, 0);
  snprintf(want, sizeof(want),
           "\"holder\":\"%s\",\"holder_label\":\"build-42\"", ids[0]);
  assert_has(p.out, want);
  snprintf(want, sizeof(want), "\"waiter_labels\":[\"%s\"]", dflt);
  assert_has(p.out, want);

  cli(&p, ARGS("inspect", "lab", "--prom"));
  ASSERT_CODE(&p, 0);
  snprintf(want, sizeof(want),
           "redturn_holder_info{resource=\"lab\",holder=\"%s\","
           "label=\"build-42\"} 1\n",
           ids[0]);
  assert_has(p.out, want);

  kill(holder.pid, SIGTERM);
  proc_wait(&holder, 10000);
  ASSERT_CODE(&holder, 128 + SIGTERM);
  proc_wait(&waiter, 10000);
  ASSERT_CODE(&waiter, 0);

  /* Not printable ASCII, or too long: refused before connecting. */
  cli(&p, ARGS("run", "--label", "tab\there", "lab", "true"));
  ASSERT_CODE(&p, 64);
  assert_has(p.err, "label: byte 3 (0x09) is not printable ASCII");
}

Test(cli, inspect_flags_stalled_holders) {
  rtt_client a;
  rtt_req shortlived = {0}, longlived = {0};
  proc_t p;
  rtt_open_ready(&a, &loop, NULL);
  rtt_acquire(&loop, a.c, "short", 200, &shortlived);
  rtt_acquire(&loop, a.c, "long", 20000, &longlived);
  /* Nobody waits, so nobody reaps: still the holder's record ends with its
   * lease by itself, and an expired lease is no stalled holder but a free
   * resource. */
  rtt_sleep_ms(400);

  cli(&p, ARGS("inspect", "--json", "short"));
  ASSERT_CODE(&p, 0);
  assert_has(p.out, "{\"resource\":\"short\",\"locked\":false,"
                    "\"holder\":null");
  assert_has(p.out, "\"lease_remaining_ms\":null,\"queue_length\":0");
  assert_has(p.out, "\"stalled\":false,\"stall_reason\":null");

  cli(&p, ARGS("inspect", "--json", "long"));
  assert_has(p.out, "\"stalled\":false");
  cli(&p, ARGS("inspect", "--json", "--stall-after", "300ms", "long"));
  ASSERT_CODE(&p, 0);
  assert_has(p.out, "\"stalled\":true,\"stall_reason\":\"held_too_long\"");

  cli(&p, ARGS("inspect", "short", "--stall-after", "1s"));
  ASSERT_CODE(&p, 0);
  assert_has(p.out, "state:       free");
  cr_assert_null(strstr(p.out, "stalled:     YES"), "%s", p.out);
  cli(&p, ARGS("inspect", "long", "--stall-after", "1ms"));
  ASSERT_CODE(&p, 0);
  assert_has(p.out, "stalled:     YES");

  rtt_release(&loop, &shortlived, RT_ELOST);
  rtt_release(&loop, &longlived, 0);
  rtt_close(&a);
  rtt_loop_finish(&loop);
}

Test(cli, inspect_prom_prints_gauges_with_escaped_resource_labels) {
  static const char name[] = "a\"b\\c\nd\001";
  rtt_client a;
  rtt_req held = {0};
  proc_t p;
  rtt_open_ready(&a, &loop, NULL);
  rtt_acquire(&loop, a.c, name, 20000, &held);

  cli(&p, ARGS("inspect", "--prom", name, "other"));
  ASSERT_CODE(&p, 0);
  assert_has(p.out, "# TYPE redturn_queue_length gauge\n");
  assert_has(p.out, "# HELP redturn_lease_remaining_ms ");
  assert_has(p.out,
             "redturn_queue_length{resource=\"a\\\"b\\\\c\\nd\\\\x01\"} 1\n");
  assert_has(p.out, "redturn_locked{resource=\"a\\\"b\\\\c\\nd\\\\x01\"} 1\n");
  assert_has(p.out, "redturn_stalled{resource=\"other\"} 0\n");
  char want[128];
  snprintf(want, sizeof(want),
           "redturn_fence{resource=\"a\\\"b\\\\c\\nd\\\\x01\"} %llu\n",
           (unsigned long long)held.fence);
  assert_has(p.out, want);
  /* Every line is a comment or "name{labels} value": nothing else. */
  for (char *line = p.out; *line != '\0';) {
    char *nl = strchr(line, '\n');
    cr_assert_not_null(nl, "unterminated line: %s", line);
    cr_assert(line[0] == '#' || strncmp(line, "redturn_", 8) == 0,
              "stray line: %.*s", (int)(nl - line), line);
    line = nl + 1;
  }

  rtt_release(&loop, &held, 0);
  rtt_close(&a);
  rtt_loop_finish(&loop);
}

Test(cli, a_key_of_the_wrong_type_is_reported_and_nothing_changes) {
  char q[128], h[128];
  proc_t p;
  rtt_key(q, sizeof(q), rtt_prefix(), "job", 3, 'q');
  rtt_key(h, sizeof(h), rtt_prefix(), "job", 3, 'h');
  rtt_ok(rc, "SET %s x", q);
  cli(&p, ARGS("inspect", "job"));
  ASSERT_CODE(&p, 76);
  assert_has(p.err, "wrong type");
  cli(&p, ARGS("evict", "job"));
  ASSERT_CODE(&p, 76);

  /* A holder and a waiter, and a member hash that is not a hash: the
   * holder record (a STRING with its own PX) is valid, so only the type
   * check before any write keeps evict from removing it. Read raw: the
   * helpers cannot read a resource with a key of the wrong type. */
  char m[128], rec[160];
  rtt_key(m, sizeof(m), rtt_prefix(), "job", 3, 'm');
  rtt_ok(rc, "DEL %s", q);
  rtt_ok(rc, "RPUSH %s 0123456789abcdef0123456789abcdef:2", q);
  long long now = rtt_redis_time_ms(rc);
  snprintf(rec, sizeof(rec), "7:%lld:%lld:0123456789abcdef0123456789abcdee:1",
           now + 20000, now);
  rtt_ok(rc, "SET %s %s PX 20000", h, rec);
  rtt_ok(rc, "SET %s x", m);
  cli(&p, ARGS("evict", "job"));
  ASSERT_CODE(&p, 76);
  redisReply *r = rtt_cmd(rc, "GET %s", h);
  cr_assert_eq(r->type, REDIS_REPLY_STRING,
               "the failed evict removed the holder");
  cr_assert_str_eq(r->str, rec, "the failed evict changed the holder");
  freeReplyObject(r);
  cr_assert_eq(rtt_int(rc, "LLEN %s", q), 1,
               "the failed evict popped a waiter");
  r = rtt_cmd(rc, "GET %s", m);
  cr_assert_eq(r->type, REDIS_REPLY_STRING);
  cr_assert_str_eq(r->str, "x");
  freeReplyObject(r);
  rtt_ok(rc, "DEL %s %s %s", q, h, m);
}

/* ---- watch --------------------------------------------------------------- */

static int count_lines(const char *s) {
  int n = 0;
  for (; (s = strchr(s, '\n')) != NULL; s++)
    n++;
  return n;
}

typedef struct lines_goal {
  proc_t *p;
  int n;
} lines_goal;

static int has_lines(void *arg) {
  lines_goal *g = arg;
  proc_poll(g->p);
  return count_lines(g->p->out) >= g->n;
}

Test(cli, watch_prints_a_snapshot_when_something_changes) {
  rtt_client a;
  rtt_req held = {0};
  proc_t p;
  rtt_open_ready(&a, &loop, NULL);

  start_argv(&p, 1, ARGS("watch", "job", "--json", "--interval", "50ms"));
  lines_goal g = {&p, 1};
  cr_assert(rtt_run_until_fn(&loop, has_lines, &g, 5000), "no first line");
  rtt_acquire(&loop, a.c, "job", 20000, &held);
  g.n = 2;
  cr_assert(rtt_run_until_fn(&loop, has_lines, &g, 5000), "no second line");
  rtt_release(&loop, &held, 0);
  g.n = 3;
  cr_assert(rtt_run_until_fn(&loop, has_lines, &g, 5000), "no third line");
  rtt_run_for(&loop, 300); /* unchanged refreshes print nothing */
  kill(p.pid, SIGINT);
  proc_wait(&p, 5000);
  ASSERT_CODE(&p, 0);
  /* free, held, free again: three lines, not one per refresh. */
  cr_assert_eq(count_lines(p.out), 3, "stdout:\n%s", p.out);
  assert_has(p.out, held.id);
  rtt_close(&a);
  rtt_loop_finish(&loop);
}

Test(cli, watch_stops_cleanly_on_sigint) {
  proc_t p;
  start_argv(&p, 1, ARGS("watch", "job", "--interval", "0.05"));
  rtt_sleep_ms(300);
  kill(p.pid, SIGINT);
  proc_wait(&p, 5000);
  ASSERT_CODE(&p, 0);
  assert_has(p.out, "resource:    \"job\"");
}

typedef struct text_goal {
  proc_t *p;
  const char *text;
} text_goal;

static int has_text(void *arg) {
  text_goal *g = arg;
  proc_poll(g->p);
  return strstr(g->p->out, g->text) != NULL;
}

Test(cli, watch_says_reconnecting_at_once_when_redis_goes_away) {
  char url[64];
  rtt_server s;
  proc_t p;
  private_server(&s, url, sizeof(url));
  start_argv(&p, 1, ARGS("watch", "--url", url, "job", "--interval", "100ms"));
  text_goal g = {&p, "state:       free"};
  cr_assert(rtt_run_until_fn(&loop, has_text, &g, 5000), "no first snapshot");
  uint64_t t0 = rtt_now_ms();
  rtt_server_stop(&s);
  /* A request made while the client reconnects waits 5 s (the command
   * timeout) before it fails: the view must not wait for that. */
  g.text = "state:       reconnecting to Redis";
  cr_assert(rtt_run_until_fn(&loop, has_text, &g, 10000),
            "never said reconnecting; stdout:\n%s", p.out);
  uint64_t said = rtt_now_ms() - t0;
  cr_assert_lt(said, 2000, "said reconnecting after %llu ms",
               (unsigned long long)said);
  kill(p.pid, SIGINT);
  proc_wait(&p, 5000);
  ASSERT_CODE(&p, 0);
}

/* ---- evict --------------------------------------------------------------- */

Test(cli, evict_refuses_a_wrong_holder_and_hands_the_lock_to_the_next_waiter) {
  rtt_client a, b;
  rtt_req held = {0}, waiting = {0};
  proc_t p;
  rtt_open_ready(&a, &loop, NULL);
  rtt_open_ready(&b, &loop, NULL);
  rtt_acquire(&loop, a.c, "job", 20000, &held);
  cr_assert_eq(rtt_wait(b.c, "job", 5000, RT_FOREVER, &waiting), 0);
  run_until_queued("job", 2);

  cli(&p, ARGS("evict", "job", "--holder", waiting.id));
  ASSERT_CODE(&p, 1);
  assert_has(p.err, "refused");
  cr_assert_eq(rtt_queue_len(rc, "job"), 2,
               "a refused evict changed the queue");
  cr_assert_eq(rtt_hfield(rc, rtt_prefix(), "job", 3, "f"),
               (long long)held.fence);

  cli(&p, ARGS("evict", "job", "--holder", held.id));
  ASSERT_CODE(&p, 0);
  assert_has(p.out, held.id);
  assert_has(p.out, waiting.id);
  cr_assert(rtt_run_until(&loop, &waiting.calls, 1, 5000),
            "the next waiter was not granted");
  cr_assert_eq(waiting.status, 0);
  cr_assert_gt(waiting.fence, held.fence);
  cr_assert_eq(rtt_queue_len(rc, "job"), 1);
  /* The evicted holder hears of it. */
  cr_assert_eq(rtt_extend(&held, 5000), 0);
  cr_assert(rtt_run_until(&loop, &held.ext_calls, 1, 5000));
  cr_assert_eq(held.ext_status, RT_ELOST);
  rtt_release(&loop, &held, RT_ELOST);

  /* Without --holder: whoever holds it. */
  cli(&p, ARGS("evict", "job"));
  ASSERT_CODE(&p, 0);
  assert_has(p.out, "the queue is now empty");
  cr_assert_eq(rtt_queue_len(rc, "job"), 0);
  cli(&p, ARGS("evict", "job"));
  ASSERT_CODE(&p, 1);
  assert_has(p.err, "nobody holds");

  rtt_release(&loop, &waiting, RT_ELOST);
  rtt_close(&a);
  rtt_close(&b);
  rtt_loop_finish(&loop);
}

Test(cli, evict_stops_a_running_command_which_exits_70) {
  proc_t holder, ev;
  start_argv(&holder, 1,
             ARGS("run", "--ttl", "10s", "--grace", "200ms", "job", "--",
                  "sleep", "10"));
  run_until_queued("job", 1);
  char ids[1][RTT_ID_MAX];
  cr_assert_eq(rtt_queue(rc, rtt_prefix(), "job", 3, ids, 1), 1);
  cli(&ev, ARGS("evict", "job", "--holder", ids[0]));
  ASSERT_CODE(&ev, 0);
  proc_wait(&holder, 5000);
  ASSERT_CODE(&holder, 70);
  assert_has(holder.err, "lost the lock");
}

/* ---- demo ---------------------------------------------------------------- */

Test(cli, demo_runs_its_workers_fairly_on_the_test_server) {
  proc_t p;
  start_argv(&p, 1,
             ARGS("demo", "--workers", "3", "--rounds", "3", "--hold", "30ms"));
  proc_wait(&p, 30000);
  ASSERT_CODE(&p, 0);
  assert_has(p.out, "9 of 9 grants");
  assert_has(p.out, "fences strictly increase:    ok");
  assert_has(p.out, "holds never overlap:         ok");
  assert_has(p.out, "first come, first served:    ok");
  assert_has(p.out, "handoff latency:");
}

Test(cli, demo_starts_its_own_redis_server_without_a_url) {
  proc_t p;
  start_argv(&p, 0, ARGS("demo", "--workers", "2", "--rounds", "2"));
  proc_wait(&p, 30000);
  ASSERT_CODE(&p, 0);
  assert_has(p.out, "started redis-server");
  assert_has(p.out, "4 of 4 grants");
  assert_has(p.out, "stopped redis-server");
}

/* ---- TLS ------------------------------------------------------------------ */

Test(cli, run_over_rediss_trusts_the_ca_given_with_tls_ca) {
  rtt_tls t;
  proc_t p;
  rtt_tls_start(&t, "no");
  cli_bare(&p, ARGS("--url", t.url, "--tls-ca", t.ca, "--prefix", rtt_prefix(),
                    "run", "res", "--", "sh", "-c", "exit 3"));
  ASSERT_CODE(&p, 3);
  /* Without the CA the server is not trusted: the certificate check's
   * words, and "Redis unreachable". */
  cli_bare(&p, ARGS("--url", t.url, "--prefix", rtt_prefix(), "run", "res",
                    "--", "true"));
  ASSERT_CODE(&p, 69);
  assert_has(p.err, "certificate verification failed");
  rtt_tls_stop(&t);
}

Test(cli, evict_over_rediss_hands_the_lock_to_the_next_waiter) {
  rtt_tls t;
  rtt_client a, b;
  rtt_req held = {0}, waiting = {0};
  rt_options_t o;
  proc_t p;
  rtt_tls_start(&t, "no");
  rtt_tls_options(&t, &o);
  rtt_open_ready(&a, &loop, &o);
  rtt_open_ready(&b, &loop, &o);
  rtt_acquire(&loop, a.c, "job", 20000, &held);
  rtt_wait_queued(&loop, b.c, "job", 20000, &waiting);

  cli_bare(&p, ARGS("--url", t.url, "--tls-ca", t.ca, "--prefix", rtt_prefix(),
                    "evict", "job", "--holder", held.id));
  ASSERT_CODE(&p, 0);
  rtt_expect_evicted(&loop, &held, &waiting, p.out);
  rtt_close(&a);
  rtt_close(&b);
  rtt_loop_finish(&loop);
  rtt_tls_stop(&t);
}

Test(cli, evict_refuses_a_semaphore_saying_only_a_mutex_can_be_evicted) {
  rtt_client a;
  rtt_req held = {0};
  proc_t p;
  rtt_open_ready(&a, &loop, NULL);
  const rt_request_t one = {RT_KIND_SEMAPHORE, 1, 2, 0, NULL, 0};
  cr_assert_eq(rt_wait_ex(a.c, "sem", 3, &one, 20000, RT_FOREVER, rtt_lock_cb,
                          &held, &held.lock),
               0);
  cr_assert(rtt_run_until(&loop, &held.calls, 1, 5000));
  cr_assert_eq(held.status, 0);
  cli(&p, ARGS("evict", "sem"));
  ASSERT_CODE(&p, 76);
  assert_has(p.err, "only a mutex's holder can be evicted");
  assert_has(p.err, "semaphore of 2 permits");
  rtt_release(&loop, &held, 0);
  rtt_close(&a);
  rtt_loop_finish(&loop);
}

/* ---- read-write locks and semaphores ------------------------------------------ */

Test(cli, run_shared_holds_with_readers_and_exclusive_waits_for_them) {
  rtt_client a;
  rtt_req reader = {0};
  proc_t p;
  rtt_open_ready(&a, &loop, NULL);
  const rt_request_t shared = {RT_KIND_SHARED, 0, 0, 0, NULL, 0};
  cr_assert_eq(rt_wait_ex(a.c, "rw", 2, &shared, 20000, RT_FOREVER, rtt_lock_cb,
                          &reader, &reader.lock),
               0);
  cr_assert(rtt_run_until(&loop, &reader.calls, 1, 5000));
  cr_assert_eq(reader.status, 0);

  cli(&p, ARGS("run", "-s", "rw", "--", "sh", "-c", "echo $REDTURN_FENCE"));
  ASSERT_CODE(&p, 0);
  cr_assert_gt(atoll(p.out), 0, "a reader's fence: %s", p.out);
  cli(&p, ARGS("run", "-x", "-w", "300ms", "rw", "--", "true"));
  ASSERT_CODE(&p, 1); /* the writer waits for the reader */
  cli(&p, ARGS("run", "--permits", "1", "--of", "2", "-n", "rw", "true"));
  ASSERT_CODE(&p, 76);
  assert_has(p.err, "another kind of lock");

  rtt_release(&loop, &reader, 0);
  cli(&p, ARGS("run", "--exclusive", "-w", "5s", "rw", "--", "true"));
  ASSERT_CODE(&p, 0);
  rtt_close(&a);
  rtt_loop_finish(&loop);
}

Test(cli, run_permits_takes_k_of_n_and_no_more) {
  rtt_client a;
  rtt_req held = {0};
  proc_t p;
  rtt_open_ready(&a, &loop, NULL);
  const rt_request_t two = {RT_KIND_SEMAPHORE, 2, 3, 0, NULL, 0};
  cr_assert_eq(rt_wait_ex(a.c, "sem", 3, &two, 20000, RT_FOREVER, rtt_lock_cb,
                          &held, &held.lock),
               0);
  cr_assert(rtt_run_until(&loop, &held.calls, 1, 5000));
  cli(&p, ARGS("run", "--permits", "1", "--of", "3", "-n", "sem", "true"));
  ASSERT_CODE(&p, 0);
  cli(&p, ARGS("run", "--permits", "2", "--of", "3", "-n", "sem", "true"));
  ASSERT_CODE(&p, 1);
  cli(&p, ARGS("run", "--of", "4", "-n", "sem", "true"));
  ASSERT_CODE(&p, 76); /* a semaphore of another count */
  cli(&p, ARGS("run", "--permits", "4", "--of", "3", "sem", "true"));
  ASSERT_CODE(&p, 64);
  cli(&p, ARGS("run", "--permits", "1", "sem", "true"));
  ASSERT_CODE(&p, 64);
  cli(&p, ARGS("run", "-s", "-x", "sem", "true"));
  ASSERT_CODE(&p, 64);
  rtt_release(&loop, &held, 0);
  rtt_close(&a);
  rtt_loop_finish(&loop);
}

Test(cli, inspect_shows_the_holders_of_a_read_write_lock_and_a_semaphore) {
  rtt_client a;
  rtt_req r1 = {0}, r2 = {0}, s1 = {0};
  proc_t p;
  rtt_open_ready(&a, &loop, NULL);
  const rt_request_t shared = {RT_KIND_SHARED, 0, 0, 0, NULL, 0};
  const rt_request_t two = {RT_KIND_SEMAPHORE, 2, 5, 0, NULL, 0};
  cr_assert_eq(rt_wait_ex(a.c, "rwi", 3, &shared, 20000, RT_FOREVER,
                          rtt_lock_cb, &r1, &r1.lock),
               0);
  cr_assert_eq(rt_wait_ex(a.c, "rwi", 3, &shared, 20000, RT_FOREVER,
                          rtt_lock_cb, &r2, &r2.lock),
               0);
  cr_assert_eq(rt_wait_ex(a.c, "semi", 4, &two, 20000, RT_FOREVER, rtt_lock_cb,
                          &s1, &s1.lock),
               0);
  cr_assert(rtt_run_until(&loop, &r2.calls, 1, 5000));
  cr_assert(rtt_run_until(&loop, &s1.calls, 1, 5000));

  cli(&p, ARGS("inspect", "rwi"));
  ASSERT_CODE(&p, 0);
  assert_has(p.out, "kind:        read-write lock (held by 2 readers)");
  assert_has(p.out, "shared    ");
  assert_has(p.out, r1.id);
  assert_has(p.out, r2.id);
  cli(&p, ARGS("inspect", "--json", "semi"));
  ASSERT_CODE(&p, 0);
  assert_has(p.out, "\"kind\":\"s:5\",\"permits\":5,\"permits_used\":2");
  assert_has(p.out, "\"holder_permits\":[2]");

  rtt_release(&loop, &r1, 0);
  rtt_release(&loop, &r2, 0);
  rtt_release(&loop, &s1, 0);
  rtt_close(&a);
  rtt_loop_finish(&loop);
}

Test(cli, run_elect_leads_one_at_a_time_and_inspect_shows_the_leader) {
  rtt_client a;
  rtt_req leader = {0};
  proc_t p;
  rtt_open_ready(&a, &loop, NULL);
  const rt_request_t campaign = {RT_KIND_ELECTION, 0, 0, 0, "host-a:80", 9};
  cr_assert_eq(rt_wait_ex(a.c, "el", 2, &campaign, 20000, RT_FOREVER,
                          rtt_lock_cb, &leader, &leader.lock),
               0);
  cr_assert(rtt_run_until(&loop, &leader.calls, 1, 5000));
  cli(&p, ARGS("run", "--elect", "host-b:80", "-w", "300ms", "el", "true"));
  ASSERT_CODE(&p, 1); /* one leader at a time */
  cli(&p, ARGS("inspect", "el"));
  ASSERT_CODE(&p, 0);
  assert_has(p.out, "kind:        election");
  assert_has(p.out, "leader    ");
  assert_has(p.out, "\"host-a:80\"");
  cli(&p, ARGS("run", "--elect", "bad\x01", "el", "true"));
  ASSERT_CODE(&p, 64);
  assert_has(p.err, "--elect VALUE: byte 3 (0x01) is not printable ASCII");
  rtt_release(&loop, &leader, 0);
  cli(&p, ARGS("run", "--elect", "host-b:80", "-w", "5s", "el", "--", "sh",
               "-c", "echo leading with $REDTURN_FENCE"));
  ASSERT_CODE(&p, 0);
  assert_has(p.out, "leading with ");
  rtt_close(&a);
  rtt_loop_finish(&loop);
}

Test(cli, leader_watch_prints_each_change_until_sigint) {
  rtt_client a;
  rtt_req leader = {0};
  proc_t p;
  char want[128];
  rtt_open_ready(&a, &loop, NULL);
  start_argv(&p, 1, ARGS("leader", "el", "--watch"));
  lines_goal g = {&p, 1};
  cr_assert(rtt_run_until_fn(&loop, has_lines, &g, 5000), "no first line");
  assert_has(p.out, "no leader");

  const rt_request_t campaign = {RT_KIND_ELECTION, 0, 0, 0, "host-a:80", 9};
  cr_assert_eq(rt_wait_ex(a.c, "el", 2, &campaign, 20000, RT_FOREVER,
                          rtt_lock_cb, &leader, &leader.lock),
               0);
  cr_assert(rtt_run_until(&loop, &leader.calls, 1, 5000));
  g.n = 2;
  cr_assert(rtt_run_until_fn(&loop, has_lines, &g, 5000), "no second line");
  snprintf(want, sizeof(want),
           "leader %s fence %" PRIu64 " value \"host-a:80\"\n",
           rt_lock_id(leader.lock), rt_lock_fence(leader.lock));
  assert_has(p.out, want);
  rtt_release(&loop, &leader, 0);
  g.n = 3;
  cr_assert(rtt_run_until_fn(&loop, has_lines, &g, 5000), "no third line");
  rtt_run_for(&loop, 200);
  kill(p.pid, SIGINT);
  proc_wait(&p, 5000);
  ASSERT_CODE(&p, 0);
  cr_assert_eq(count_lines(p.out), 3, "stdout:\n%s", p.out);
  cr_assert(strncmp(p.out + strlen(p.out) - 10, "no leader\n", 10) == 0,
            "stdout:\n%s", p.out);
  cr_assert_eq(p.lens[1], 0, "stderr:\n%s", p.err);
  rtt_close(&a);
  rtt_loop_finish(&loop);
}

Test(cli, leader_watch_refuses_a_mutex_and_says_a_lost_connection) {
  char url[64];
  rtt_server s;
  rtt_client a;
  rtt_req held = {0};
  proc_t p;
  rtt_open_ready(&a, &loop, NULL);
  rtt_acquire(&loop, a.c, "mtx", 20000, &held);
  cli(&p, ARGS("leader", "mtx", "--watch"));
  ASSERT_CODE(&p, 64);
  assert_has(p.err, "not an election");
  rtt_release(&loop, &held, 0);

  private_server(&s, url, sizeof(url));
  start_argv(&p, 1, ARGS("leader", "--url", url, "el", "-w"));
  lines_goal g = {&p, 1};
  cr_assert(rtt_run_until_fn(&loop, has_lines, &g, 5000), "no first line");
  redisContext *adm = rtt_redis_at(s.port);
  freeReplyObject(rtt_cmd(adm, "CLIENT KILL TYPE pubsub"));
  rtt_redis_close(adm);
  RTT_RUN_UNTIL(&loop, (proc_poll(&p), strstr(p.err, "watching again") != NULL),
                5000);
  assert_has(p.err, "watching again once reconnected");
  kill(p.pid, SIGTERM);
  proc_wait(&p, 5000);
  ASSERT_CODE(&p, 0);
  rtt_close(&a);
  rtt_loop_finish(&loop);
}

Test(cli, leader_prints_the_current_leader_its_fence_and_value) {
  rtt_client a;
  rtt_req leader = {0}, sem = {0};
  proc_t p;
  char want[128];
  rtt_open_ready(&a, &loop, NULL);
  cli(&p, ARGS("leader", "el"));
  ASSERT_CODE(&p, 1);
  assert_has(p.out, "no leader");

  const rt_request_t campaign = {RT_KIND_ELECTION, 0, 0, 0, "host-a:80", 9};
  cr_assert_eq(rt_wait_ex(a.c, "el", 2, &campaign, 20000, RT_FOREVER,
                          rtt_lock_cb, &leader, &leader.lock),
               0);
  cr_assert(rtt_run_until(&loop, &leader.calls, 1, 5000));
  cli(&p, ARGS("leader", "el"));
  ASSERT_CODE(&p, 0);
  snprintf(want, sizeof(want),
           "leader %s fence %" PRIu64 " value \"host-a:80\"",
           rt_lock_id(leader.lock), rt_lock_fence(leader.lock));
  assert_has(p.out, want);

  rtt_release(&loop, &leader, 0);
  cli(&p, ARGS("leader", "el"));
  ASSERT_CODE(&p, 1);
  assert_has(p.out, "no leader");

  /* A semaphore is not an election: refused with its kind. */
  const rt_request_t permits = {RT_KIND_SEMAPHORE, 1, 2, 0, NULL, 0};
  cr_assert_eq(rt_wait_ex(a.c, "sem", 3, &permits, 20000, RT_FOREVER,
                          rtt_lock_cb, &sem, &sem.lock),
               0);
  cr_assert(rtt_run_until(&loop, &sem.calls, 1, 5000));
  cli(&p, ARGS("leader", "sem"));
  ASSERT_CODE(&p, 64);
  assert_has(p.err, "not an election");
  rtt_release(&loop, &sem, 0);
  rtt_close(&a);
  rtt_loop_finish(&loop);
}

/* ---- run --all: several resources --------------------------------------- */

Test(cli, run_all_sharing_a_resource_never_overlap) {
  static const char *const lists[] = {"a,shared", "shared,b", "shared,a",
                                      "b,shared"};
  char cmd[512], bad[256], runs[256];
  proc_t p[4];
  scratch_dir();
  /* mkdir is atomic: it fails if another command is inside. */
  script(cmd, sizeof(cmd),
         "mkdir D/in || echo overlap >> D/bad; sleep 0.2; rmdir D/in; "
         "echo $REDTURN_RESOURCE >> D/runs");
  for (int i = 0; i < 4; i++)
    start_argv(&p[i], 1, ARGS("run", "--all", lists[i], "-c", cmd));
  for (int i = 0; i < 4; i++) {
    proc_wait(&p[i], 20000);
    ASSERT_CODE(&p[i], 0);
  }
  slurp("bad", bad, sizeof(bad));
  slurp("runs", runs, sizeof(runs));
  cr_assert_str_empty(bad, "two runs holding \"shared\" overlapped");
  for (int i = 0; i < 4; i++)
    assert_has(runs, lists[i]);
  cr_assert_eq(rtt_queue_len(rc, "shared"), 0);
  scratch_remove();
}

Test(cli, run_all_blocks_a_run_on_one_of_its_names_and_lists_its_fences) {
  char cmd[512], env[512];
  proc_t holder, p;
  scratch_dir();
  start_argv(&holder, 1,
             ARGS("run", "--all", "m2,m1", "-c",
                  script(cmd, sizeof(cmd),
                         "echo $REDTURN_RESOURCE $REDTURN_FENCE "
                         "$REDTURN_HOLDER > D/env; echo up > D/up; sleep 2")));
  await_file("up");
  cli(&p, ARGS("run", "-w", "300ms", "m1", "--", "true"));
  ASSERT_CODE(&p, 1); /* m1 is held by the multi-lock */
  cli(&p, ARGS("run", "-n", "m3", "--", "true"));
  ASSERT_CODE(&p, 0); /* not in the list */
  cli(&p, ARGS("run", "-w", "8s", "m2", "--", "true"));
  ASSERT_CODE(&p, 0); /* granted once the multi-lock's command ended */
  proc_wait(&holder, 5000);
  ASSERT_CODE(&holder, 0);
  slurp("env", env, sizeof(env));
  char names[64], fences[128], ids[256];
  cr_assert_eq(sscanf(env, "%63s %127s %255s", names, fences, ids), 3, "%s",
               env);
  cr_assert_str_eq(names, "m2,m1");
  unsigned long long f1, f2;
  cr_assert_eq(sscanf(fences, "%llu,%llu", &f1, &f2), 2, "%s", fences);
  cr_assert(f1 > 0 && f2 > 0);
  cr_assert_not_null(strchr(ids, ','), "%s", ids);
  scratch_remove();
}

Test(cli, run_all_refuses_empty_and_repeated_names_and_other_kinds) {
  proc_t p;
  cli(&p, ARGS("run", "--all", "a,,b", "--", "true"));
  ASSERT_CODE(&p, 64);
  assert_has(p.err, "has an empty resource name");
  cli(&p, ARGS("run", "--all", "a,", "--", "true"));
  ASSERT_CODE(&p, 64);
  assert_has(p.err, "has an empty resource name");
  cli(&p, ARGS("run", "--all", "a,b,a", "--", "true"));
  ASSERT_CODE(&p, 64);
  assert_has(p.err, "names \"a\" twice");
  cli(&p, ARGS("run", "-s", "--all", "a,b", "--", "true"));
  ASSERT_CODE(&p, 64);
  assert_has(p.err, "takes mutexes only");
  cli(&p, ARGS("run", "-n", "--all", "a,b", "--", "true"));
  ASSERT_CODE(&p, 64);
  assert_has(p.err, "instead of -n");
  cli(&p, ARGS("run", "x", "--all", "a,b", "--", "true"));
  ASSERT_CODE(&p, 64);
  assert_has(p.err, "not both");
  cr_assert_eq(rtt_queue_len(rc, "a"), 0);
}
