/* redturn_fault: the fault-injection driver (issue 3, item 6).
 *
 * It starts a private redis-server on a free loopback port, forks worker
 * processes that take and release locks on a few resources in a loop and
 * log every event to their own file, and meanwhile injects faults:
 *
 *   - SIGKILL of the process holding a resource (found through Redis: the
 *     head of the queue names its client), of a process waiting in a queue,
 *     or of a random worker; killed workers are started again (new client);
 *   - CLIENT KILL of a worker's command or subscriber connection (found in
 *     CLIENT LIST by the names redturn-cmd-<id> / redturn-sub-<id>);
 *   - CLIENT PAUSE of the whole server for a few hundred ms;
 *   - one restart of redis-server in the middle of the run, on the same
 *     port. With --persist aof (the default) the server runs with
 *     --appendonly yes and is stopped with SIGTERM, which makes it fsync the
 *     AOF, so the restarted server has every queue, lease and fence: the
 *     checker then holds the library to every rule across the restart. With
 *     --persist none the data is gone after the restart (fences start over);
 *     the checker then checks each server lifetime on its own (no Redis lock
 *     can keep mutual exclusion across a server that forgot its state).
 *
 * At the end the workers are stopped with SIGTERM (they close their client:
 * pending waits end with RT_ECANCELED, held locks are released), the key
 * space is checked (only "<prefix>:{...}:h" hashes and queues that expire by
 * themselves may stay), the server is stopped and the checker (check.c)
 * merges the logs and checks the history. The run prints the counts and
 * exits 1 if there was any violation.
 *
 *   redturn_fault [--dir DIR] [--workers N] [--lanes N] [--resources N]
 *                 [--seconds S] [--lease MS] [--interval MS]
 *                 [--persist aof|none] [--seed N] [--slow] [--keep]
 *
 * --slow doubles the tolerances (sanitizer builds). The logs stay in DIR
 * (default "fault-run" in the current directory): rerun the checker alone
 * with redturn_fault_check DIR.
 *
 * Worker log lines (times are CLOCK_REALTIME in microseconds; reqid is
 * rt_lock_id(), unique over the run):
 *   I t slot gen pid client-id    the client was opened
 *   O t                           connected
 *   U t status                    the first connect failed (exit 3)
 *   E t lane res reqid timeout_ms ttl_ms reconnects   before rt_wait()
 *   Q t reqid position            the enqueue reply was seen (not granted)
 *   G t reqid fence deadline_ms lease_ms position reconnects   granted
 *   F t reqid status reconnects   the wait failed
 *   S t reqid overstay            before rt_signal()
 *   R t reqid status              rt_signal() callback
 *   N t reconnects                rt_client_stats().reconnects changed
 *   C t                           before rt_client_close()
 *   X t grants reconnects         close callback (then exit 0)
 * Driver log lines (driver.log): P (parameters), W (worker started),
 * K (SIGKILL sent), D (worker reaped), L (CLIENT KILL), A (CLIENT PAUSE),
 * B / S / H (restart: SIGTERM sent / old server exited / new server up),
 * T (stop phase), V (violation
 * found by the driver), Y (information).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <dirent.h>
#include <hiredis/hiredis.h>
#include <uv.h>

#include "check.h"
#include "redturn.h"

#define MAX_WORKERS 64
#define MAX_LANES 8
#define MAX_RES 16
#define PREFIX "rtfault"

/* ---- parameters ---------------------------------------------------------- */

typedef struct params {
  const char *dir;
  int workers;
  int lanes;
  int resources;
  int seconds;
  int64_t lease_ms;
  int64_t interval_ms; /* mean time between two faults */
  int persist;         /* 1: AOF, 0: none */
  uint64_t seed;
  int slow;
  int port;
} params;

static params P = {"fault-run", 8, 2, 3, 40, 1000, 400, 1, 0, 0, 0};

/* ---- small helpers ---------------------------------------------------------- */

static int64_t real_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int64_t ms) {
  struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static uint64_t next_rand(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static int write_all(int fd, const char *buf, size_t len) {
  while (len > 0) {
    ssize_t n = write(fd, buf, len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return -1;
    buf += n;
    len -= (size_t)n;
  }
  return 0;
}

/* One log line, written with one write(2) so a SIGKILL never leaves half a
 * line behind. */
static void logf_fd(int fd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void logf_fd(int fd, const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof(buf) - 1, fmt, ap);
  va_end(ap);
  if (n < 0)
    return;
  if ((size_t)n > sizeof(buf) - 2)
    n = (int)sizeof(buf) - 2;
  buf[n++] = '\n';
  (void)write_all(fd, buf, (size_t)n);
}

static void die_with_parent(void) {
#ifdef __linux__
  prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
}

static void res_name(int r, char *buf, size_t cap) {
  snprintf(buf, cap, "r%d", r);
}

/* ======================================================================= */
/* Worker process                                                            */
/* ======================================================================= */

enum { L_IDLE = 0, L_WAITING, L_HOLDING, L_RELEASING };

typedef struct worker worker;

typedef struct lane {
  worker *w;
  int idx;
  int state;
  rt_lock_t *lock;
  char id[96];
  int q_logged;
  uv_timer_t timer;
} lane;

struct worker {
  uv_loop_t loop;
  rt_client_t *c;
  int fd;
  int slot, gen;
  uint64_t rnd;
  lane lanes[MAX_LANES];
  int stopping;
  int exit_code;
  uint64_t reconnects;
  uv_signal_t sigterm;
  uv_check_t check;
};

static uint64_t w_reconnects(worker *w) {
  rt_stats_t st;
  rt_client_stats(w->c, &st);
  return st.reconnects;
}

static void lane_start(lane *ln);

static void lane_next_cb(uv_timer_t *t) { lane_start(t->data); }

static void lane_later(lane *ln, int64_t ms) {
  ln->state = L_IDLE;
  if (!ln->w->stopping)
    uv_timer_start(&ln->timer, lane_next_cb, (uint64_t)ms, 0);
}

static void signal_cb(rt_lock_t *lock, int status, void *data) {
  lane *ln = data;
  worker *w = ln->w;
  (void)lock;
  logf_fd(w->fd, "R %" PRId64 " %s %d", real_us(), ln->id, status);
  ln->lock = NULL;
  lane_later(ln, (int64_t)(next_rand(&w->rnd) % 20));
}

static void hold_done_cb(uv_timer_t *t) {
  lane *ln = t->data;
  worker *w = ln->w;
  if (ln->state != L_HOLDING || w->stopping)
    return;
  int64_t now = real_us();
  int overstay = (int64_t)(now / 1000) >= rt_lock_deadline_ms(ln->lock);
  logf_fd(w->fd, "S %" PRId64 " %s %d", now, ln->id, overstay);
  ln->state = L_RELEASING;
  int err = rt_signal(ln->lock, signal_cb, ln);
  if (err != 0) {
    logf_fd(w->fd, "R %" PRId64 " %s %d", real_us(), ln->id, err);
    ln->lock = NULL;
    lane_later(ln, 10);
  }
}

static void wait_cb(rt_lock_t *lock, int status, void *data) {
  lane *ln = data;
  worker *w = ln->w;
  int64_t now = real_us();
  uint64_t rc = w_reconnects(w);
  if (status == 0) {
    logf_fd(w->fd, "G %" PRId64 " %s %" PRIu64 " %" PRId64 " %" PRId64 " %zu %" PRIu64,
            now, ln->id, rt_lock_fence(lock), rt_lock_deadline_ms(lock),
            rt_lock_lease_ms(lock), rt_lock_position(lock), rc);
    ln->state = L_HOLDING;
    if (w->stopping)
      return; /* the close releases it */
    uint64_t hold;
    /* Mostly short holds; now and then one that outstays its lease, so
     * that leases also run out under live holders. */
    if (next_rand(&w->rnd) % 1000 < 7)
      hold = (uint64_t)P.lease_ms + 50 + next_rand(&w->rnd) % 150;
    else
      hold = next_rand(&w->rnd) % 31;
    uv_timer_start(&ln->timer, hold_done_cb, hold, 0);
    return;
  }
  logf_fd(w->fd, "F %" PRId64 " %s %d %" PRIu64, now, ln->id, status, rc);
  ln->lock = NULL;
  lane_later(ln, (int64_t)(next_rand(&w->rnd) % 20));
}

static void lane_start(lane *ln) {
  worker *w = ln->w;
  if (w->stopping)
    return;
  int r = (int)(next_rand(&w->rnd) % (uint64_t)P.resources);
  char name[16];
  res_name(r, name, sizeof(name));
  int64_t timeout = 200 + (int64_t)(next_rand(&w->rnd) % 3800);
  uint64_t rc = w_reconnects(w);
  int64_t t = real_us(); /* before the call: a lower bound of the enqueue */
  rt_lock_t *lock = NULL;
  int err = rt_wait(w->c, name, strlen(name), P.lease_ms, timeout, wait_cb,
                    ln, &lock);
  if (err != 0) {
    logf_fd(w->fd, "Y %" PRId64 " rt_wait refused: %s", t, rt_err_name(err));
    lane_later(ln, 50);
    return;
  }
  ln->lock = lock;
  ln->state = L_WAITING;
  ln->q_logged = 0;
  snprintf(ln->id, sizeof(ln->id), "%s", rt_lock_id(lock));
  logf_fd(w->fd, "E %" PRId64 " %d %d %s %" PRId64 " %" PRId64 " %" PRIu64, t,
          ln->idx, r, ln->id, timeout, P.lease_ms, rc);
}

/* After every loop iteration: enqueue replies seen, reconnects. */
static void check_cb(uv_check_t *h) {
  worker *w = h->data;
  if (w->c == NULL)
    return;
  uint64_t rc = w_reconnects(w);
  int64_t now = real_us();
  if (rc != w->reconnects) {
    w->reconnects = rc;
    logf_fd(w->fd, "N %" PRId64 " %" PRIu64, now, rc);
  }
  for (int i = 0; i < P.lanes; i++) {
    lane *ln = &w->lanes[i];
    if (ln->state == L_WAITING && !ln->q_logged && ln->lock != NULL &&
        rt_lock_position(ln->lock) > 0) {
      ln->q_logged = 1;
      logf_fd(w->fd, "Q %" PRId64 " %s %zu", now, ln->id,
              rt_lock_position(ln->lock));
    }
  }
}

static void handle_closed(uv_handle_t *h) { (void)h; }

static void close_cb(rt_client_t *c, void *data) {
  worker *w = data;
  rt_stats_t st;
  rt_client_stats(c, &st);
  logf_fd(w->fd, "X %" PRId64 " %" PRIu64 " %" PRIu64, real_us(), st.grants,
          st.reconnects);
  w->c = NULL;
  for (int i = 0; i < P.lanes; i++)
    uv_close((uv_handle_t *)&w->lanes[i].timer, handle_closed);
  uv_close((uv_handle_t *)&w->sigterm, handle_closed);
  uv_close((uv_handle_t *)&w->check, handle_closed);
}

static void worker_stop(worker *w) {
  if (w->stopping)
    return;
  w->stopping = 1;
  for (int i = 0; i < P.lanes; i++)
    uv_timer_stop(&w->lanes[i].timer);
  logf_fd(w->fd, "C %" PRId64, real_us());
  rt_client_close(w->c, close_cb, w);
}

static void sigterm_cb(uv_signal_t *h, int signum) {
  (void)signum;
  worker_stop(h->data);
}

static void connect_cb(rt_client_t *c, int status, void *data) {
  worker *w = data;
  (void)c;
  if (status != 0) {
    logf_fd(w->fd, "U %" PRId64 " %d", real_us(), status);
    if (!w->stopping) { /* else: closed while connecting, a normal stop */
      w->exit_code = 3;
      worker_stop(w);
    }
    return;
  }
  logf_fd(w->fd, "O %" PRId64, real_us());
  for (int i = 0; i < P.lanes; i++)
    uv_timer_start(&w->lanes[i].timer, lane_next_cb,
                   next_rand(&w->rnd) % 20, 0);
}

static int worker_main(int slot, int gen, int idfd) {
  static worker w; /* one per process */
  char path[512];
  snprintf(path, sizeof(path), "%s/w%d-%d.log", P.dir, slot, gen);
  memset(&w, 0, sizeof(w));
  w.fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_TRUNC, 0644);
  if (w.fd < 0)
    return 4;
  w.slot = slot;
  w.gen = gen;
  w.rnd = (P.seed ^ ((uint64_t)getpid() << 20) ^ (uint64_t)real_us()) | 1;
  if (uv_loop_init(&w.loop) != 0)
    return 4;
  for (int i = 0; i < P.lanes; i++) {
    w.lanes[i].w = &w;
    w.lanes[i].idx = i;
    uv_timer_init(&w.loop, &w.lanes[i].timer);
    w.lanes[i].timer.data = &w.lanes[i];
  }
  uv_signal_init(&w.loop, &w.sigterm);
  w.sigterm.data = &w;
  uv_signal_start(&w.sigterm, sigterm_cb, SIGTERM);
  /* Blocked since the fork: a SIGTERM that came meanwhile is delivered to
   * the handler now. */
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  sigprocmask(SIG_UNBLOCK, &term, NULL);
  uv_check_init(&w.loop, &w.check);
  w.check.data = &w;
  uv_check_start(&w.check, check_cb);

  rt_options_t o;
  rt_options_init(&o);
  o.host = "127.0.0.1";
  o.port = P.port;
  o.prefix = PREFIX;
  o.default_ttl_ms = P.lease_ms;
  o.connect_timeout_ms = 2000;
  o.command_timeout_ms = 2000;
  int err = rt_client_open(&w.loop, &o, connect_cb, &w, &w.c);
  if (err != 0) {
    logf_fd(w.fd, "U %" PRId64 " %d", real_us(), err);
    return 3;
  }
  logf_fd(w.fd, "I %" PRId64 " %d %d %d %s", real_us(), slot, gen,
          (int)getpid(), rt_client_id(w.c));
  char line[40];
  int n = snprintf(line, sizeof(line), "%s\n", rt_client_id(w.c));
  (void)write_all(idfd, line, (size_t)n);
  close(idfd);

  uv_run(&w.loop, UV_RUN_DEFAULT);
  int rc = uv_loop_close(&w.loop);
  if (rc != 0) {
    logf_fd(w.fd, "Y %" PRId64 " uv_loop_close: %s", real_us(),
            uv_strerror(rc));
    if (w.exit_code == 0)
      w.exit_code = 5;
  }
  close(w.fd);
  return w.exit_code;
}

/* ======================================================================= */
/* Driver                                                                    */
/* ======================================================================= */

typedef struct slot_t {
  pid_t pid; /* 0: not running */
  int gen;
  int idfd;  /* read end of the id pipe while the id is not known */
  char cid[33];
  int killed; /* we sent SIGKILL to this pid */
  int64_t restart_at; /* mono ms at which to start it again */
} slot_t;

static slot_t slots[MAX_WORKERS];
static int dlog = -1;
static uint64_t drnd;
static pid_t redis_pid;
static long driver_violations;
static int stopping_phase;

static void dlogf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void dlogf(const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  logf_fd(dlog, "%s", buf);
}

static void violation(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void violation(const char *fmt, ...) {
  char buf[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  driver_violations++;
  dlogf("V %" PRId64 " %s", real_us(), buf);
  fprintf(stderr, "fault: VIOLATION: %s\n", buf);
}

static int free_port(void) {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  if (s < 0)
    return -1;
  struct sockaddr_in a;
  memset(&a, 0, sizeof(a));
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof(a);
  int port = -1;
  if (bind(s, (struct sockaddr *)&a, sizeof(a)) == 0 &&
      getsockname(s, (struct sockaddr *)&a, &len) == 0)
    port = ntohs(a.sin_port);
  close(s);
  return port;
}

static redisContext *admin(void) {
  struct timeval tv = {0, 500000};
  redisContext *rc = redisConnectWithTimeout("127.0.0.1", P.port, tv);
  if (rc == NULL)
    return NULL;
  if (rc->err) {
    redisFree(rc);
    return NULL;
  }
  struct timeval ctv = {2, 0};
  redisSetTimeout(rc, ctv);
  return rc;
}

static int redis_ping(void) {
  redisContext *rc = admin();
  if (rc == NULL)
    return 0;
  redisReply *r = redisCommand(rc, "PING");
  int ok = r != NULL && r->type == REDIS_REPLY_STATUS &&
           strcmp(r->str, "PONG") == 0;
  if (r != NULL)
    freeReplyObject(r);
  redisFree(rc);
  return ok;
}

static char redis_dir[512];

static pid_t redis_spawn(void) {
  pid_t pid = fork();
  if (pid < 0)
    return -1;
  if (pid == 0) {
    die_with_parent();
    char port[16], log[600];
    snprintf(port, sizeof(port), "%d", P.port);
    snprintf(log, sizeof(log), "%s/redis.log", redis_dir);
    int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
      close(fd);
    }
    const char *argv[] = {"redis-server",
                          "--port", port,
                          "--bind", "127.0.0.1",
                          "--save", "",
                          "--appendonly", P.persist ? "yes" : "no",
                          "--appendfsync", "everysec",
                          "--dir", redis_dir,
                          "--daemonize", "no",
                          "--enable-debug-command", "local",
                          NULL};
    execvp("redis-server", (char *const *)argv);
    _exit(127);
  }
  return pid;
}

/* Start the server and wait (10 s at most) until it answers. */
static int redis_start(void) {
  redis_pid = redis_spawn();
  if (redis_pid < 0)
    return -1;
  for (int i = 0; i < 200; i++) {
    if (redis_ping())
      return 0;
    int st;
    if (waitpid(redis_pid, &st, WNOHANG) == redis_pid) {
      redis_pid = 0;
      return -1;
    }
    sleep_ms(50);
  }
  return -1;
}

/* SIGTERM (the server saves its AOF and exits), then wait. */
static void redis_stop(void) {
  if (redis_pid <= 0)
    return;
  kill(redis_pid, SIGTERM);
  for (int i = 0; i < 200; i++) {
    int st;
    if (waitpid(redis_pid, &st, WNOHANG) == redis_pid) {
      redis_pid = 0;
      return;
    }
    sleep_ms(50);
  }
  kill(redis_pid, SIGKILL);
  waitpid(redis_pid, NULL, 0);
  redis_pid = 0;
}

static void worker_spawn(int s) {
  slot_t *sl = &slots[s];
  int fds[2];
  if (pipe(fds) != 0) {
    sl->restart_at = mono_ms() + 200;
    return;
  }
  sl->gen++;
  /* The child keeps SIGTERM blocked until its handler is installed. */
  sigset_t term, old;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  sigprocmask(SIG_BLOCK, &term, &old);
  pid_t pid = fork();
  if (pid != 0)
    sigprocmask(SIG_SETMASK, &old, NULL);
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    sl->restart_at = mono_ms() + 200;
    return;
  }
  if (pid == 0) {
    die_with_parent();
    close(fds[0]);
    close(dlog);
    for (int i = 0; i < P.workers; i++)
      if (i != s && slots[i].idfd >= 0)
        close(slots[i].idfd);
    signal(SIGTERM, SIG_DFL);
    exit(worker_main(s, sl->gen, fds[1]));
  }
  close(fds[1]);
  fcntl(fds[0], F_SETFL, O_NONBLOCK);
  sl->pid = pid;
  sl->idfd = fds[0];
  sl->cid[0] = '\0';
  sl->killed = 0;
  sl->restart_at = 0;
  dlogf("W %" PRId64 " %d %d %d", real_us(), s, sl->gen, (int)pid);
}

static void read_ids(void) {
  for (int s = 0; s < P.workers; s++) {
    slot_t *sl = &slots[s];
    if (sl->idfd < 0)
      continue;
    char buf[64];
    ssize_t n = read(sl->idfd, buf, sizeof(buf) - 1);
    if (n >= 32) {
      memcpy(sl->cid, buf, 32);
      sl->cid[32] = '\0';
    }
    if (n > 0 || (n == 0) || (n < 0 && errno != EAGAIN && errno != EINTR)) {
      close(sl->idfd);
      sl->idfd = -1;
    }
  }
}

static long n_connect_fail;

/* Collect exited workers; schedule restarts. */
static void reap_workers(void) {
  for (int s = 0; s < P.workers; s++) {
    slot_t *sl = &slots[s];
    int st;
    if (sl->pid <= 0 || waitpid(sl->pid, &st, WNOHANG) != sl->pid)
      continue;
    int64_t now = real_us();
    if (WIFSIGNALED(st)) {
      int sig = WTERMSIG(st);
      dlogf("D %" PRId64 " %d %d %d signal %d %s", now, s, sl->gen,
            (int)sl->pid, sig, sl->killed && sig == SIGKILL ? "expected" : "unexpected");
      if (!(sl->killed && sig == SIGKILL))
        violation("worker %d.%d (pid %d) died of signal %d", s, sl->gen,
                  (int)sl->pid, sig);
    } else {
      int code = WEXITSTATUS(st);
      dlogf("D %" PRId64 " %d %d %d exit %d %s", now, s, sl->gen, (int)sl->pid,
            code, code == 0 && stopping_phase ? "expected" : "unexpected");
      if (code == 3 && !stopping_phase)
        n_connect_fail++; /* first connect failed (server restarting) */
      else if (code != 0 || !stopping_phase)
        violation("worker %d.%d (pid %d) exited with code %d%s", s, sl->gen,
                  (int)sl->pid, code,
                  code == 23 ? " (LeakSanitizer found leaks)" : "");
    }
    if (sl->idfd >= 0) {
      close(sl->idfd);
      sl->idfd = -1;
    }
    sl->pid = 0;
    if (!stopping_phase)
      sl->restart_at = mono_ms() + 50 + (int64_t)(next_rand(&drnd) % 250);
  }
}

static int slot_of_client(const char *cid, size_t len) {
  for (int s = 0; s < P.workers; s++)
    if (slots[s].pid > 0 && len >= 32 && slots[s].cid[0] &&
        memcmp(slots[s].cid, cid, 32) == 0)
      return s;
  return -1;
}

static long n_kills, n_kill_holder, n_kill_waiter, n_conn_kills, n_pauses;

static void kill_slot(int s, const char *why) {
  slot_t *sl = &slots[s];
  if (sl->pid <= 0 || sl->killed)
    return;
  dlogf("K %" PRId64 " %d %d %d %s", real_us(), s, sl->gen, (int)sl->pid, why);
  kill(sl->pid, SIGKILL);
  sl->killed = 1;
  n_kills++;
}

/* Kill the holder (want_head) or a waiter of a random resource. */
static int kill_in_queue(int want_head) {
  redisContext *rc = admin();
  if (rc == NULL)
    return 0;
  int r = (int)(next_rand(&drnd) % (uint64_t)P.resources);
  char name[16];
  res_name(r, name, sizeof(name));
  redisReply *q = redisCommand(rc, "LRANGE %s:{%s}:q 0 -1", PREFIX, name);
  int done = 0;
  if (q != NULL && q->type == REDIS_REPLY_ARRAY && q->elements > 0) {
    size_t pick = 0;
    if (!want_head) {
      if (q->elements > 1)
        pick = 1 + (size_t)(next_rand(&drnd) % (q->elements - 1));
      else
        pick = SIZE_MAX;
    }
    if (pick != SIZE_MAX && q->element[pick]->type == REDIS_REPLY_STRING) {
      int s = slot_of_client(q->element[pick]->str, q->element[pick]->len);
      if (s >= 0 && !slots[s].killed) {
        kill_slot(s, want_head ? "holder" : "waiter");
        if (want_head)
          n_kill_holder++;
        else
          n_kill_waiter++;
        done = 1;
      }
    }
  }
  if (q != NULL)
    freeReplyObject(q);
  redisFree(rc);
  return done;
}

static void kill_random(void) {
  int s = (int)(next_rand(&drnd) % (uint64_t)P.workers);
  kill_slot(s, "random");
}

/* CLIENT KILL one connection of a random worker. */
static void kill_connection(void) {
  int s = (int)(next_rand(&drnd) % (uint64_t)P.workers);
  slot_t *sl = &slots[s];
  if (sl->pid <= 0 || !sl->cid[0])
    return;
  const char *kind = next_rand(&drnd) % 2 ? "cmd" : "sub";
  redisContext *rc = admin();
  if (rc == NULL)
    return;
  char want[64];
  snprintf(want, sizeof(want), " name=redturn-%s-%s ", kind, sl->cid);
  redisReply *r = redisCommand(rc, "CLIENT LIST");
  long long id = -1;
  if (r != NULL && r->type == REDIS_REPLY_STRING) {
    const char *p = strstr(r->str, want);
    if (p != NULL) {
      /* The line starts with "id=N". */
      const char *line = p;
      while (line > r->str && line[-1] != '\n')
        line--;
      if (strncmp(line, "id=", 3) == 0)
        id = strtoll(line + 3, NULL, 10);
    }
  }
  if (r != NULL)
    freeReplyObject(r);
  if (id >= 0) {
    int64_t t = real_us();
    r = redisCommand(rc, "CLIENT KILL ID %lld", id);
    if (r != NULL && r->type == REDIS_REPLY_INTEGER && r->integer == 1) {
      dlogf("L %" PRId64 " %d %d %s %s", t, s, sl->gen, kind, sl->cid);
      n_conn_kills++;
    }
    if (r != NULL)
      freeReplyObject(r);
  }
  redisFree(rc);
}

static void pause_server(void) {
  redisContext *rc = admin();
  if (rc == NULL)
    return;
  int ms = 100 + (int)(next_rand(&drnd) % 300);
  int64_t t = real_us();
  redisReply *r = redisCommand(rc, "CLIENT PAUSE %d", ms);
  if (r != NULL && r->type == REDIS_REPLY_STATUS) {
    dlogf("A %" PRId64 " %d", t, ms);
    n_pauses++;
  }
  if (r != NULL)
    freeReplyObject(r);
  redisFree(rc);
}

static long n_restarts;

static int restart_server(void) {
  dlogf("B %" PRId64, real_us());
  redis_stop();
  /* The server keeps serving for a while after SIGTERM: only now are its
   * grants over. */
  dlogf("S %" PRId64, real_us());
  if (redis_start() != 0) {
    violation("redis-server did not come back on port %d", P.port);
    return -1;
  }
  dlogf("H %" PRId64, real_us());
  n_restarts++;
  return 0;
}

static void inject_fault(void) {
  unsigned pick = (unsigned)(next_rand(&drnd) % 100);
  if (pick < 30) {
    if (!kill_in_queue(1))
      kill_connection();
  } else if (pick < 55) {
    if (!kill_in_queue(0))
      kill_connection();
  } else if (pick < 63) {
    kill_random();
  } else if (pick < 95) {
    kill_connection();
  } else {
    pause_server();
  }
}

/* After the run: only the fence hashes and self-expiring queues stay. */
static void check_keyspace(void) {
  redisContext *rc = admin();
  if (rc == NULL) {
    violation("cannot connect to redis-server for the key space check");
    return;
  }
  long nh = 0, nh_only_f = 0, nq = 0, nother = 0;
  long long max_pttl = 0;
  char cursor[32] = "0";
  do {
    redisReply *r = redisCommand(rc, "SCAN %s MATCH %s:* COUNT 1000", cursor,
                                 PREFIX);
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
      violation("SCAN failed");
      if (r != NULL)
        freeReplyObject(r);
      break;
    }
    snprintf(cursor, sizeof(cursor), "%s", r->element[0]->str);
    redisReply *keys = r->element[1];
    for (size_t i = 0; i < keys->elements; i++) {
      const char *k = keys->element[i]->str;
      size_t kl = keys->element[i]->len;
      if (kl > 2 && memcmp(k + kl - 2, ":h", 2) == 0) {
        nh++;
        redisReply *f = redisCommand(rc, "HKEYS %b", k, kl);
        int only_f = 1, bad = 0;
        for (size_t j = 0; f != NULL && j < f->elements; j++) {
          const char *fn = f->element[j]->str;
          if (strcmp(fn, "f") != 0)
            only_f = 0;
          if (strcmp(fn, "f") && strcmp(fn, "d") && strcmp(fn, "g"))
            bad = 1;
        }
        if (only_f)
          nh_only_f++;
        if (bad)
          violation("unexpected field in %.*s", (int)kl, k);
        redisReply *t = redisCommand(rc, "PTTL %b", k, kl);
        if (t != NULL && t->type == REDIS_REPLY_INTEGER && t->integer != -1)
          dlogf("Y %" PRId64 " %.*s has a TTL (%lld ms)", real_us(), (int)kl,
                k, t->integer);
        if (t != NULL)
          freeReplyObject(t);
        if (f != NULL)
          freeReplyObject(f);
      } else if (kl > 2 && memcmp(k + kl - 2, ":q", 2) == 0) {
        nq++;
        redisReply *t = redisCommand(rc, "PTTL %b", k, kl);
        long long pttl = t != NULL && t->type == REDIS_REPLY_INTEGER ? t->integer : -3;
        if (pttl > max_pttl)
          max_pttl = pttl;
        /* A queue left behind (its entries' processes were killed) must
         * expire by itself within the lease plus 10 s. */
        if (pttl < 0 || pttl > P.lease_ms + 10000)
          violation("queue %.*s left with PTTL %lld (want 0 < PTTL <= %" PRId64 ")",
                    (int)kl, k, pttl, P.lease_ms + 10000);
        if (t != NULL)
          freeReplyObject(t);
      } else {
        nother++;
        violation("unexpected key %.*s", (int)kl, k);
      }
    }
    freeReplyObject(r);
  } while (strcmp(cursor, "0") != 0);
  dlogf("Y %" PRId64 " keyspace: %ld h (%ld with only f), %ld q (max PTTL %lld ms), %ld other",
        real_us(), nh, nh_only_f, nq, max_pttl, nother);
  printf("key space after the run: %ld fence hashes (%ld holding only f), "
         "%ld self-expiring queues (max PTTL %lld ms), %ld other keys\n",
         nh, nh_only_f, nq, max_pttl, nother);
  redisFree(rc);
}

static void usage(void) {
  fprintf(stderr,
          "usage: redturn_fault [--dir DIR] [--workers N] [--lanes N] "
          "[--resources N]\n"
          "       [--seconds S] [--lease MS] [--interval MS] "
          "[--persist aof|none]\n"
          "       [--seed N] [--slow]\n");
  exit(2);
}

static void parse_args(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--slow") == 0) {
      P.slow = 1;
      continue;
    }
    if (v == NULL)
      usage();
    i++;
    if (strcmp(a, "--dir") == 0)
      P.dir = v;
    else if (strcmp(a, "--workers") == 0)
      P.workers = atoi(v);
    else if (strcmp(a, "--lanes") == 0)
      P.lanes = atoi(v);
    else if (strcmp(a, "--resources") == 0)
      P.resources = atoi(v);
    else if (strcmp(a, "--seconds") == 0)
      P.seconds = atoi(v);
    else if (strcmp(a, "--lease") == 0)
      P.lease_ms = atoll(v);
    else if (strcmp(a, "--interval") == 0)
      P.interval_ms = atoll(v);
    else if (strcmp(a, "--seed") == 0)
      P.seed = strtoull(v, NULL, 10);
    else if (strcmp(a, "--persist") == 0) {
      if (strcmp(v, "aof") == 0)
        P.persist = 1;
      else if (strcmp(v, "none") == 0)
        P.persist = 0;
      else
        usage();
    } else
      usage();
  }
  if (P.workers < 1 || P.workers > MAX_WORKERS || P.lanes < 1 ||
      P.lanes > MAX_LANES || P.resources < 1 || P.resources > MAX_RES ||
      P.seconds < 1 || P.lease_ms < 100 || P.interval_ms < 10)
    usage();
}

/* Remove the logs of an earlier run (only files this program writes). */
static void clean_dir(const char *dir) {
  DIR *d = opendir(dir);
  if (d == NULL)
    return;
  struct dirent *e;
  char path[1024];
  while ((e = readdir(d)) != NULL) {
    const char *n = e->d_name;
    size_t l = strlen(n);
    if ((n[0] == 'w' && l > 4 && strcmp(n + l - 4, ".log") == 0) ||
        strcmp(n, "driver.log") == 0) {
      snprintf(path, sizeof(path), "%s/%s", dir, n);
      unlink(path);
    }
  }
  closedir(d);
}

static void rm_redis_dir(void) {
  char cmd[700];
  /* Only our own scratch directory, named by us. */
  if (strstr(redis_dir, "/redis-data") != NULL) {
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", redis_dir);
    if (system(cmd) != 0)
      fprintf(stderr, "fault: could not remove %s\n", redis_dir);
  }
}

int main(int argc, char **argv) {
  parse_args(argc, argv);
  signal(SIGPIPE, SIG_IGN);
  if (P.seed == 0)
    P.seed = (uint64_t)real_us() ^ ((uint64_t)getpid() << 32);
  drnd = P.seed | 1;
  mkdir(P.dir, 0755);
  clean_dir(P.dir);
  snprintf(redis_dir, sizeof(redis_dir), "%s/redis-data", P.dir);
  rm_redis_dir();
  mkdir(redis_dir, 0755);

  char path[600];
  snprintf(path, sizeof(path), "%s/driver.log", P.dir);
  dlog = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
  if (dlog < 0) {
    perror("fault: driver.log");
    return 2;
  }

  rtf_tol tol;
  rtf_tol_default(&tol, P.slow);

  int started = 0;
  for (int attempt = 0; attempt < 5 && !started; attempt++) {
    P.port = free_port();
    started = P.port > 0 && redis_start() == 0;
    if (!started)
      redis_stop();
  }
  if (!started) {
    fprintf(stderr, "fault: cannot start redis-server\n");
    return 2;
  }
  dlogf("P %" PRId64 " persist=%s workers=%d lanes=%d resources=%d seconds=%d "
        "lease=%" PRId64 " interval=%" PRId64 " seed=%" PRIu64 " slow=%d port=%d "
        "tol_clock=%" PRId64 " tol_deadline=%" PRId64 " tol_crash=%" PRId64
        " tol_kill=%" PRId64,
        real_us(), P.persist ? "aof" : "none", P.workers, P.lanes, P.resources,
        P.seconds, P.lease_ms, P.interval_ms, P.seed, P.slow, P.port,
        tol.clock_ms, tol.deadline_ms, tol.crash_ms, tol.kill_ms);
  printf("fault: redis-server on 127.0.0.1:%d (%s), %d workers x %d lanes on "
         "%d resources, %d s, lease %" PRId64 " ms, seed %" PRIu64 ", logs in %s\n",
         P.port, P.persist ? "AOF, restart keeps data" : "no persistence",
         P.workers, P.lanes, P.resources, P.seconds, P.lease_ms, P.seed, P.dir);
  fflush(stdout);

  for (int s = 0; s < P.workers; s++) {
    slots[s].idfd = -1;
    worker_spawn(s);
  }

  int64_t t0 = mono_ms();
  int64_t end = t0 + (int64_t)P.seconds * 1000;
  int64_t restart_at = t0 + (int64_t)P.seconds * 1000 * 45 / 100;
  int restarted = 0;
  int64_t next_fault = t0 + 500;
  while (mono_ms() < end) {
    read_ids();
    reap_workers();
    int64_t now = mono_ms();
    if (!restarted && now >= restart_at) {
      restarted = 1;
      restart_server();
    }
    if (now >= next_fault) {
      inject_fault();
      next_fault = now + P.interval_ms / 2 +
                   (int64_t)(next_rand(&drnd) % (uint64_t)P.interval_ms);
    }
    for (int s = 0; s < P.workers; s++)
      if (slots[s].pid == 0 && slots[s].restart_at && now >= slots[s].restart_at)
        worker_spawn(s);
    if (redis_pid > 0) {
      int st;
      if (waitpid(redis_pid, &st, WNOHANG) == redis_pid) {
        redis_pid = 0;
        violation("redis-server died on its own");
        if (redis_start() != 0)
          break;
      }
    }
    sleep_ms(5);
  }

  /* Stop: every worker closes its client and exits. */
  stopping_phase = 1;
  dlogf("T %" PRId64, real_us());
  for (int s = 0; s < P.workers; s++)
    if (slots[s].pid > 0)
      kill(slots[s].pid, SIGTERM);
  int64_t stop_deadline = mono_ms() + (P.slow ? 30000 : 15000);
  for (;;) {
    read_ids();
    reap_workers();
    int left = 0;
    for (int s = 0; s < P.workers; s++)
      left += slots[s].pid > 0;
    if (left == 0)
      break;
    if (mono_ms() > stop_deadline) {
      for (int s = 0; s < P.workers; s++)
        if (slots[s].pid > 0) {
          violation("worker %d.%d (pid %d) did not exit after SIGTERM "
                    "(rt_client_close hangs)",
                    s, slots[s].gen, (int)slots[s].pid);
          slots[s].killed = 1;
          kill(slots[s].pid, SIGKILL);
        }
      stop_deadline = mono_ms() + 5000;
    }
    sleep_ms(10);
  }

  /* Leases of killed holders end; then look at what stayed behind. */
  sleep_ms(P.lease_ms + 200);
  check_keyspace();
  redis_stop();
  rm_redis_dir();

  printf("fault: injected %ld SIGKILLs (%ld holders, %ld waiters), %ld CLIENT "
         "KILLs, %ld CLIENT PAUSEs, %ld restarts; %ld workers failed their "
         "first connect\n",
         n_kills, n_kill_holder, n_kill_waiter, n_conn_kills, n_pauses,
         n_restarts, n_connect_fail);
  rtf_counts counts;
  printf("fault: checking the history\n");
  long v = rtf_check(P.dir, &tol, stdout, &counts);
  if (v < 0) {
    fprintf(stderr, "fault: cannot read the logs in %s\n", P.dir);
    return 1;
  }
  /* The checker counts the driver's V lines too. */
  rtf_print_counts(stdout, &counts);
  close(dlog);
  if (counts.violations != 0 || counts.grants == 0) {
    printf("fault: FAILED (%ld violations%s; logs in %s, seed %" PRIu64 ")\n",
           counts.violations, counts.grants == 0 ? ", no grants" : "", P.dir,
           P.seed);
    return 1;
  }
  printf("fault: OK\n");
  return 0;
}
