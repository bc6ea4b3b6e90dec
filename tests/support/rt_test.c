/* Test support for the integration tests (see rt_test.h): clocks, private
 * and shared servers, unique names, the common fixture. The rest is in
 * rtt_redis.c, rtt_loop.c, rtt_client.c and rtt_child.c. */
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

/* ---- time ---------------------------------------------------------------- */

uint64_t rtt_now_ms(void) { return uv_hrtime() / 1000000u; }

int64_t rtt_realtime_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

void rtt_sleep_ms(int64_t ms) {
  struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* ---- Redis servers --------------------------------------------------------- */

/* Servers started by this process (copies: the caller's struct may live
 * on a stack frame that an assertion already unwound), so they can be
 * stopped on every path. */
#define RTT_MAX_SERVERS 8
static rtt_server started[RTT_MAX_SERVERS];
static pid_t started_by;         /* the process that owns started[] */
static rtt_server shared_server; /* when REDTURN_TEST_URL is unset */

static void stop_all_at_exit(void) {
  if (getpid() == started_by)
    rtt_cleanup();
}

void rtt_cleanup(void) {
  rtt__redis_close_all();
  if (getpid() != started_by)
    return;
  for (int i = 0; i < RTT_MAX_SERVERS; i++)
    if (started[i].pid > 0)
      rtt_server_stop(&started[i]);
}

int rtt_free_port(void) {
  int port = rts_free_port();
  cr_assert_gt(port, 0, "no free loopback port: %s", strerror(errno));
  return port;
}

/* This process's registry slot of the server with this pid, or -1. */
static int registry_find(pid_t pid) {
  if (pid <= 0 || started_by != getpid())
    return -1;
  for (int i = 0; i < RTT_MAX_SERVERS; i++)
    if (started[i].pid == pid)
      return i;
  return -1;
}

/* Fork a child that dies with the test process (even if the parent died
 * between fork and prctl: then it exits with code at once). */
pid_t rtt__fork_tied(int code) {
  pid_t parent = getpid();
  pid_t pid = fork();
  cr_assert_geq(pid, 0, "fork: %s", strerror(errno));
  if (pid == 0) {
#ifdef __linux__
    prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
    if (getppid() != parent)
      _exit(code);
  }
  return pid;
}

void rtt__forget_servers(void) { started_by = 0; }

/* rtt_server_try_start(), and with no_module the server without the
 * module. */
static int server_try_start(rtt_server *s, const char *const *extra,
                            int no_module, char *err, size_t errcap) {
  if (started_by != getpid()) {
    memset(started, 0, sizeof(started)); /* a fork's are the parent's */
    started_by = getpid();
    atexit(stop_all_at_exit);
  }
  int slot;
  for (slot = 0; slot < RTT_MAX_SERVERS && started[slot].pid > 0; slot++) {
  }
  cr_assert_lt(slot, RTT_MAX_SERVERS, "too many private redis-servers");

  rts_options o;
  memset(&o, 0, sizeof(o));
  o.dir_prefix = "redturn-it";
  o.extra = extra; /* copied: gone by the time of rtt_server_restart() */
  o.no_module = no_module;
  if (rts_start(s, &o, err, errcap) != 0)
    return -1;
  started[slot] = *s;
  return 0;
}

/* rtt_server_start(), and rtt_server_start_lua() with no_module. */
static void server_start(rtt_server *s, const char *const *extra,
                         int no_module) {
  char err[1600];
  if (server_try_start(s, extra, no_module, err, sizeof(err)) != 0)
    cr_assert_fail("could not start redis-server: %s", err);
}

int rtt_server_try_start(rtt_server *s, const char *const *extra, char *err,
                         size_t errcap) {
  return server_try_start(s, extra, 0, err, errcap);
}

void rtt_server_start(rtt_server *s, const char *const *extra) {
  server_start(s, extra, 0);
}

void rtt_server_start_lua(rtt_server *s, const char *const *extra) {
  server_start(s, extra, 1);
}

void rtt_server_stop(rtt_server *s) {
  if (s->pid <= 0)
    return;
  /* Look it up before clearing s->pid: s may be the registry entry. */
  rtt_server copy = *s;
  int i = registry_find(s->pid);
  s->pid = 0;
  if (started_by == getpid()) {
    /* Not registered: rtt_cleanup() stopped it already, and the pid may
     * belong to another process by now. */
    if (i < 0)
      return;
    started[i].pid = 0;
  }
  rts_stop(&copy);
}

void rtt_server_restart_nowait(rtt_server *s) {
  int i = registry_find(s->pid);
  cr_assert_geq(i, 0,
                "rtt_server_restart: not a running server of this "
                "process");
  rts_terminate(s);
  cr_assert_eq(rts_respawn(s), 0, "fork: %s", strerror(errno));
  /* The registry's copy follows, so rtt_cleanup() stops the new process
   * (s may be the registry entry itself: an exact overlap is fine). */
  started[i] = *s;
}

int rtt_server_ready(const rtt_server *s) { return rts_ready(s); }

void rtt_server_restart(rtt_server *s) {
  rtt_server_restart_nowait(s);
  int i = registry_find(s->pid);
  int up = rts_wait_ready(s, 30000);
  if (up == 1)
    return;
  char tail[1200];
  rts_log_tail(s->dir, tail, sizeof(tail));
  if (up < 0) {
    /* Exited and reaped: forget it without signalling its old pid. */
    if (i >= 0)
      started[i].pid = 0;
    rts_remove_tree(s->dir);
  } else {
    rtt_server_stop(s);
  }
  cr_assert_fail("the restarted redis-server on port %d is not ready (%s)%s",
                 s->port, up < 0 ? "it exited" : "after 30 s", tail);
}

/* ---- the shared server -------------------------------------------------------- */

static char shared_url[128];
static int shared_port;

static void shared_init(void) {
  if (shared_port != 0)
    return;
  const char *url = getenv("REDTURN_TEST_URL");
  if (url != NULL && *url != '\0') {
    const char *p = strrchr(url, ':');
    cr_assert(p != NULL && strncmp(url, "redis://127.0.0.1:", 18) == 0,
              "REDTURN_TEST_URL must be redis://127.0.0.1:PORT, not %s", url);
    shared_port = atoi(p + 1);
    cr_assert_gt(shared_port, 0, "bad port in REDTURN_TEST_URL %s", url);
    snprintf(shared_url, sizeof(shared_url), "redis://127.0.0.1:%d",
             shared_port);
    return;
  }
  /* Run by hand: this test process gets a server of its own. */
  rtt_server_start(&shared_server, NULL);
  shared_port = shared_server.port;
  snprintf(shared_url, sizeof(shared_url), "redis://127.0.0.1:%d", shared_port);
  setenv("REDTURN_TEST_URL", shared_url, 1);
}

const char *rtt_url(void) {
  shared_init();
  return shared_url;
}

const char *rtt_host(void) { return "127.0.0.1"; }

int rtt_port(void) {
  shared_init();
  return shared_port;
}

/* ---- unique names ------------------------------------------------------------ */

const char *rtt_prefix(void) {
  static char prefix[64];
  static unsigned counter;
  if (prefix[0] == '\0')
    snprintf(prefix, sizeof(prefix), "t%d-%u-%llx", (int)getpid(), ++counter,
             (unsigned long long)(uv_hrtime() & 0xffffffu));
  return prefix;
}

/* ---- the common fixture -------------------------------------------------- */

void rtt_suite_setup(uv_loop_t *loop, redisContext **rc) {
  (void)rtt_url(); /* decided before any fork, so children share them */
  (void)rtt_prefix();
  cr_assert_eq(uv_loop_init(loop), 0);
  *rc = rtt_redis();
}

void rtt_suite_teardown(redisContext **rc) {
  if (*rc != NULL)
    rtt_redis_close(*rc);
  *rc = NULL;
  rtt_cleanup();
}

void rtt_crash(rtt_server *s) {
  kill(s->pid, SIGKILL);
  waitpid(s->pid, NULL, 0);
  s->pid = 0;
}

int rtt_ends_with(const char *s, const char *tail) {
  size_t n = strlen(s), m = strlen(tail);
  return n >= m && strcmp(s + n - m, tail) == 0;
}

char *rtt_exact(const char *s, size_t len) {
  char *p = malloc(len > 0 ? len : 1);
  cr_assert_not_null(p);
  memcpy(p, s, len);
  return p;
}
