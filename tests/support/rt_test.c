/* Test support for the integration tests: see rt_test.h. */
#include "rt_test.h"

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

/* Synchronous connections opened by this process, freed by rtt_cleanup()
 * even when an assertion ended the test early. */
#define RTT_MAX_CONNS 32
static redisContext *conns[RTT_MAX_CONNS];
static pid_t conns_owner;

void rtt_cleanup(void) {
  if (getpid() == conns_owner) {
    for (int i = 0; i < RTT_MAX_CONNS; i++) {
      if (conns[i] != NULL)
        redisFree(conns[i]);
      conns[i] = NULL;
    }
  }
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
static pid_t fork_tied(int code) {
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

/* rtt_server_start(), and rtt_server_start_lua() with no_module. */
static void server_start(rtt_server *s, const char *const *extra,
                         int no_module) {
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
  char err[1600];
  memset(&o, 0, sizeof(o));
  o.dir_prefix = "redturn-it";
  o.extra = extra; /* copied: gone by the time of rtt_server_restart() */
  o.no_module = no_module;
  if (rts_start(s, &o, err, sizeof(err)) != 0)
    cr_assert_fail("could not start redis-server: %s", err);
  started[slot] = *s;
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

/* ---- synchronous hiredis ----------------------------------------------------- */

redisContext *rtt_redis_at(int port) {
  struct timeval tv = {5, 0};
  redisContext *rc = redisConnectWithTimeout("127.0.0.1", port, tv);
  cr_assert(rc != NULL && rc->err == 0, "cannot connect to 127.0.0.1:%d: %s",
            port, rc ? rc->errstr : "no memory");
  redisSetTimeout(rc, (struct timeval){10, 0});
  if (conns_owner != getpid()) {
    memset(conns, 0, sizeof(conns)); /* a fork's copies are the parent's */
    conns_owner = getpid();
  }
  int i;
  for (i = 0; i < RTT_MAX_CONNS && conns[i] != NULL; i++) {
  }
  cr_assert_lt(i, RTT_MAX_CONNS, "too many rtt_redis connections");
  conns[i] = rc;
  return rc;
}

void rtt_redis_close(redisContext *rc) {
  if (rc == NULL)
    return;
  if (conns_owner == getpid())
    for (int i = 0; i < RTT_MAX_CONNS; i++)
      if (conns[i] == rc)
        conns[i] = NULL;
  redisFree(rc);
}

redisContext *rtt_redis(void) { return rtt_redis_at(rtt_port()); }

redisReply *rtt_cmd(redisContext *rc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  redisReply *r = redisvCommand(rc, fmt, ap);
  va_end(ap);
  cr_assert_not_null(r, "no reply to \"%s\": %s", fmt, rc->errstr);
  return r;
}

long long rtt_int(redisContext *rc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  redisReply *r = redisvCommand(rc, fmt, ap);
  va_end(ap);
  cr_assert_not_null(r, "no reply to \"%s\": %s", fmt, rc->errstr);
  cr_assert_eq(r->type, REDIS_REPLY_INTEGER, "\"%s\" answered type %d: %s", fmt,
               r->type, r->str ? r->str : "");
  long long v = r->integer;
  freeReplyObject(r);
  return v;
}

void rtt_ok(redisContext *rc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  redisReply *r = redisvCommand(rc, fmt, ap);
  va_end(ap);
  cr_assert_not_null(r, "no reply to \"%s\": %s", fmt, rc->errstr);
  cr_assert_neq(r->type, REDIS_REPLY_ERROR, "\"%s\" failed: %s", fmt, r->str);
  freeReplyObject(r);
}

void rtt_err(redisContext *rc, char *buf, size_t cap, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  redisReply *r = redisvCommand(rc, fmt, ap);
  va_end(ap);
  cr_assert_not_null(r, "no reply to \"%s\": %s", fmt, rc->errstr);
  cr_assert_eq(r->type, REDIS_REPLY_ERROR, "\"%s\" did not fail", fmt);
  snprintf(buf, cap, "%s", r->str);
  freeReplyObject(r);
}

int64_t rtt_redis_time_ms(redisContext *rc) {
  redisReply *r = rtt_cmd(rc, "TIME");
  cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 2);
  int64_t ms =
      atoll(r->element[0]->str) * 1000 + atoll(r->element[1]->str) / 1000;
  freeReplyObject(r);
  return ms;
}

static const char *info_find(const char *text, const char *field) {
  size_t n = strlen(field);
  for (const char *p = text; p != NULL && *p; p = strchr(p, '\n')) {
    if (*p == '\n')
      p++;
    if (strncmp(p, field, n) == 0 && p[n] == ':')
      return p + n + 1;
  }
  return NULL;
}

long long rtt_info_ll(redisContext *rc, const char *section,
                      const char *field) {
  redisReply *r = rtt_cmd(rc, "INFO %s", section);
  cr_assert_eq(r->type, REDIS_REPLY_STRING);
  const char *v = info_find(r->str, field);
  cr_assert_not_null(v, "INFO %s has no %s", section, field);
  long long n = atoll(v);
  freeReplyObject(r);
  return n;
}

long long rtt_cmdstat_calls(redisContext *rc, const char *cmd) {
  char field[64];
  snprintf(field, sizeof(field), "cmdstat_%s", cmd);
  redisReply *r = rtt_cmd(rc, "INFO commandstats");
  cr_assert_eq(r->type, REDIS_REPLY_STRING);
  const char *v = info_find(r->str, field);
  long long n = 0;
  if (v != NULL && strncmp(v, "calls=", 6) == 0)
    n = atoll(v + 6);
  freeReplyObject(r);
  return n;
}

long long rtt_script_calls(redisContext *rc) {
  static const char *const native[] = {"enqueue", "try",    "release",
                                       "reap",    "extend", "inspect"};
  long long n = rtt_cmdstat_calls(rc, "evalsha") +
                rtt_cmdstat_calls(rc, "eval") + rtt_cmdstat_calls(rc, "fcall") +
                rtt_cmdstat_calls(rc, "fcall_ro");
  for (size_t i = 0; i < sizeof(native) / sizeof(native[0]); i++) {
    char cmd[32];
    snprintf(cmd, sizeof(cmd), "redturn.%s", native[i]);
    n += rtt_cmdstat_calls(rc, cmd);
  }
  return n;
}

long long rtt_conn_id(redisContext *rc, const char *kind,
                      const char *client_id) {
  char want[160];
  int n = snprintf(want, sizeof(want), " name=redturn-%s-%s ", kind, client_id);
  cr_assert(n > 0 && (size_t)n < sizeof(want), "rtt_conn_id: name too long");
  redisReply *r = rtt_cmd(rc, "CLIENT LIST");
  cr_assert_eq(r->type, REDIS_REPLY_STRING, "CLIENT LIST answered type %d: %s",
               r->type, r->str ? r->str : "");
  long long id = -1;
  for (char *line = r->str; line != NULL && *line != '\0';) {
    char *end = strchr(line, '\n');
    if (end != NULL)
      *end = '\0';
    if (strstr(line, want) != NULL && strncmp(line, "id=", 3) == 0)
      id = atoll(line + 3);
    line = end != NULL ? end + 1 : NULL;
  }
  freeReplyObject(r);
  return id;
}

int rtt_kill_conn(redisContext *rc, const char *kind, const char *client_id) {
  long long id = rtt_conn_id(rc, kind, client_id);
  if (id < 0)
    return 0;
  return rtt_int(rc, "CLIENT KILL ID %lld", id) == 1;
}

size_t rtt_key(char *buf, size_t cap, const char *prefix, const void *name,
               size_t len, char suffix) {
  const unsigned char *s = name;
  size_t n = 0;
  size_t plen = strlen(prefix);
  cr_assert_geq(cap, plen + 3 * len + 8, "rtt_key: buffer too small");
  memcpy(buf, prefix, plen);
  n = plen;
  buf[n++] = ':';
  buf[n++] = '{';
  for (size_t i = 0; i < len; i++) {
    const char *esc = s[i] == '%'   ? "%25"
                      : s[i] == '{' ? "%7B"
                      : s[i] == '}' ? "%7D"
                                    : NULL;
    if (esc != NULL) {
      memcpy(buf + n, esc, 3);
      n += 3;
    } else {
      buf[n++] = (char)s[i];
    }
  }
  buf[n++] = '}';
  buf[n++] = ':';
  buf[n++] = suffix;
  buf[n] = '\0';
  return n;
}

static size_t key_cap(const char *prefix, size_t len) {
  return strlen(prefix) + 3 * len + 8;
}

/* The resource as the library reads it (lua/lib/prelude.lua): the holder
 * id (h's record without its label, "" if none) and its fence, deadline
 * and grant time, then the live waiters in order (entries of q that are
 * members of m). */
static const char snapshot_lua[] =
    "local out = {'', -1, -1, -1}\n"
    "local v = redis.call('GET', KEYS[2])\n"
    "if v then\n"
    "  local a = string.find(v, ':', 1, true)\n"
    "  local b = string.find(v, ':', a + 1, true)\n"
    "  local c = string.find(v, ':', b + 1, true)\n"
    "  local e = string.find(v, ':', c + 34, true)\n" /* a label follows */
    "  out = {string.sub(v, c + 1, (e or 0) - 1), string.sub(v, 1, a - 1),\n"
    "         string.sub(v, a + 1, b - 1), string.sub(v, b + 1, c - 1)}\n"
    "end\n"
    "for _, id in ipairs(redis.call('LRANGE', KEYS[1], 0, -1)) do\n"
    "  if redis.call('HEXISTS', KEYS[3], id) == 1 then out[#out + 1] = id end\n"
    "end\n"
    "return out\n";

static redisReply *snapshot(redisContext *rc, const char *prefix,
                            const void *name, size_t len) {
  size_t cap = key_cap(prefix, len);
  char *keys = malloc(3 * cap);
  cr_assert_not_null(keys);
  size_t kq = rtt_key(keys, cap, prefix, name, len, 'q');
  size_t kh = rtt_key(keys + cap, cap, prefix, name, len, 'h');
  size_t km = rtt_key(keys + 2 * cap, cap, prefix, name, len, 'm');
  redisReply *r = redisCommand(rc, "EVAL %s 3 %b %b %b", snapshot_lua, keys, kq,
                               keys + cap, kh, keys + 2 * cap, km);
  free(keys);
  cr_assert_not_null(r, "EVAL: %s", rc->errstr);
  cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "snapshot failed: %s",
               r->str ? r->str : "");
  return r;
}

size_t rtt_queue(redisContext *rc, const char *prefix, const void *name,
                 size_t len, char (*out)[RTT_ID_MAX], size_t max) {
  redisReply *r = snapshot(rc, prefix, name, len);
  size_t n = 0;
  for (size_t i = 0; i < r->elements; i++) {
    if (i == 1 || i == 2 || i == 3 || (i == 0 && r->element[0]->len == 0))
      continue;
    if (n < max)
      snprintf(out[n], RTT_ID_MAX, "%s", r->element[i]->str);
    n++;
  }
  freeReplyObject(r);
  return n;
}

long long rtt_qlen(redisContext *rc, const char *prefix, const void *name,
                   size_t len) {
  redisReply *r = snapshot(rc, prefix, name, len);
  long long n = (long long)r->elements - 4 + (r->element[0]->len > 0);
  freeReplyObject(r);
  return n;
}

long long rtt_queue_len(redisContext *rc, const char *name) {
  return rtt_qlen(rc, rtt_prefix(), name, strlen(name));
}

long long rtt_hfield(redisContext *rc, const char *prefix, const void *name,
                     size_t len, const char *field) {
  redisReply *r = snapshot(rc, prefix, name, len);
  int i = field[0] == 'f' ? 1 : field[0] == 'd' ? 2 : 3;
  cr_assert(strchr("fdg", field[0]) != NULL && field[1] == '\0',
            "rtt_hfield: unknown field %s", field);
  long long v = r->element[0]->len > 0 ? atoll(r->element[i]->str) : -1;
  freeReplyObject(r);
  return v;
}

int rtt_queue_count(redisContext *rc, const char *name, const char *id) {
  char ids[64][RTT_ID_MAX];
  size_t n = rtt_queue(rc, rtt_prefix(), name, strlen(name), ids, 64);
  int k = 0;
  for (size_t i = 0; i < n && i < 64; i++)
    k += strcmp(ids[i], id) == 0;
  return k;
}

long long rtt_keys_left(redisContext *rc, const char *name) {
  size_t len = strlen(name), cap = key_cap(rtt_prefix(), len);
  char *keys = malloc(3 * cap);
  cr_assert_not_null(keys);
  size_t kq = rtt_key(keys, cap, rtt_prefix(), name, len, 'q');
  size_t kh = rtt_key(keys + cap, cap, rtt_prefix(), name, len, 'h');
  size_t km = rtt_key(keys + 2 * cap, cap, rtt_prefix(), name, len, 'm');
  long long n = rtt_int(rc, "EXISTS %b %b %b", keys, kq, keys + cap, kh,
                        keys + 2 * cap, km);
  free(keys);
  return n;
}

/* ---- loops ---------------------------------------------------------------------- */

struct rtt_runner {
  uv_timer_t tick;
  uint64_t until;
  int expired;
};

static void run_tick(uv_timer_t *t) {
  rtt_runner *r = t->data;
  if (rtt_now_ms() >= r->until)
    r->expired = 1;
}

static void runner_free(uv_handle_t *h) { free(h->data); }

rtt_runner *rtt_runner_start(uv_loop_t *loop, int64_t max_ms) {
  /* On the heap: the timer finishes closing on a later loop run. */
  rtt_runner *r = calloc(1, sizeof(*r));
  cr_assert_not_null(r);
  r->until = rtt_now_ms() + (uint64_t)max_ms;
  uv_timer_init(loop, &r->tick);
  r->tick.data = r;
  uv_timer_start(&r->tick, run_tick, 5, 5);
  return r;
}

int rtt_runner_step(rtt_runner *r) {
  if (r->expired)
    return 0;
  uv_run(r->tick.loop, UV_RUN_ONCE);
  return 1;
}

void rtt_runner_stop(rtt_runner *r) {
  uv_close((uv_handle_t *)&r->tick, runner_free);
}

int rtt_run_until_fn(uv_loop_t *loop, int (*pred)(void *arg), void *arg,
                     int64_t max_ms) {
  int ok;
  RTT_RUN_UNTIL(loop, (ok = pred(arg)), max_ms);
  return ok;
}

typedef struct counter_goal {
  const int *counter;
  int target;
} counter_goal;

static int counter_reached(void *arg) {
  counter_goal *g = arg;
  return *g->counter >= g->target;
}

int rtt_run_until(uv_loop_t *loop, const int *counter, int target,
                  int64_t max_ms) {
  counter_goal g = {counter, target};
  return rtt_run_until_fn(loop, counter_reached, &g, max_ms);
}

typedef struct queue_goal {
  redisContext *rc;
  const char *name;
  long long n;
} queue_goal;

static int queue_reached(void *arg) {
  queue_goal *g = arg;
  return rtt_qlen(g->rc, rtt_prefix(), g->name, strlen(g->name)) >= g->n;
}

void rtt_run_until_queued(uv_loop_t *loop, redisContext *rc, const char *name,
                          long long n) {
  queue_goal g = {rc, name, n};
  cr_assert(rtt_run_until_fn(loop, queue_reached, &g, 10000),
            "the queue of %s never reached %lld entries (has %lld)", name, n,
            rtt_qlen(rc, rtt_prefix(), name, strlen(name)));
}

static int never(void *arg) {
  (void)arg;
  return 0;
}

void rtt_run_for(uv_loop_t *loop, int64_t ms) {
  rtt_run_until_fn(loop, never, NULL, ms);
}

static void finish_timeout(uv_timer_t *t) {
  *(int *)t->data = 1;
  uv_stop(t->loop);
}

static void list_handle(uv_handle_t *h, void *arg) {
  if (h != arg)
    cr_log_error("handle still open: %s%s", uv_handle_type_name(h->type),
                 uv_is_active(h) ? " (active)" : "");
}

void rtt_loop_finish(uv_loop_t *loop) {
  int expired = 0;
  uv_timer_t t;
  uv_timer_init(loop, &t);
  t.data = &expired;
  uv_timer_start(&t, finish_timeout, 10000, 0);
  uv_unref((uv_handle_t *)&t);
  uv_run(loop, UV_RUN_DEFAULT);
  if (expired)
    uv_walk(loop, list_handle, &t);
  cr_assert_not(expired, "the loop still had work after 10 s");
  uv_close((uv_handle_t *)&t, NULL);
  uv_run(loop, UV_RUN_DEFAULT);
  cr_assert_eq(uv_loop_close(loop), 0, "uv_loop_close: handles left open");
}

/* ---- event log ------------------------------------------------------------------ */

void rtt_log_add(rtt_log *log, const char *fmt, ...) {
  size_t n = strlen(log->buf);
  if (n > 0 && n + 1 < sizeof(log->buf))
    log->buf[n++] = ',';
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(log->buf + n, sizeof(log->buf) - n, fmt, ap);
  va_end(ap);
  log->n++;
}

/* ---- clients -------------------------------------------------------------------- */

void rtt_private_start(rtt_private *p, const char *const *extra) {
  rtt_server_start(&p->srv, extra);
  p->adm = rtt_redis_at(p->srv.port);
  rtt_options_at(&p->opts, p->srv.port);
}

void rtt_private_stop(rtt_private *p) {
  rtt_redis_close(p->adm);
  p->adm = NULL;
  rtt_server_stop(&p->srv);
}

int rtt_script_path(void) {
  const char *v = getenv("REDTURN_TEST_SCRIPT_PATH");
  if (v == NULL || v[0] == '\0' || strcmp(v, "auto") == 0)
    return RT_SCRIPT_PATH_AUTO;
  if (strcmp(v, "functions") == 0)
    return RT_SCRIPT_PATH_FUNCTIONS;
  if (strcmp(v, "eval") == 0)
    return RT_SCRIPT_PATH_EVAL;
  if (strcmp(v, "module") == 0)
    return RT_SCRIPT_PATH_MODULE;
  cr_assert_fail(
      "REDTURN_TEST_SCRIPT_PATH=%s: not auto, module, functions or eval", v);
  return RT_SCRIPT_PATH_AUTO;
}

int rtt_lua_path(void) {
  int path = rtt_script_path();
  return path == RT_SCRIPT_PATH_MODULE ? RT_SCRIPT_PATH_AUTO : path;
}

int rtt_module_mode(void) {
  const char *m = getenv("REDTURN_TEST_MODULE");
  return m != NULL && m[0] != '\0';
}

void rtt_options(rt_options_t *o) {
  rt_options_init(o);
  o->url = rtt_url();
  o->prefix = rtt_prefix();
  o->script_path = rtt_script_path();
}

void rtt_options_at(rt_options_t *o, int port) {
  rt_options_init(o);
  o->host = "127.0.0.1";
  o->port = port;
  o->prefix = rtt_prefix();
  o->script_path = rtt_script_path();
}

void rtt_connect_cb(rt_client_t *c, int status, void *data) {
  rtt_client *tc = data;
  (void)c;
  tc->connects++;
  tc->connect_status = status;
}

void rtt_close_cb(rt_client_t *c, void *data) {
  rtt_client *tc = data;
  (void)c;
  tc->closes++;
}

void rtt_open(rtt_client *tc, uv_loop_t *loop, const rt_options_t *o) {
  rt_options_t def;
  if (o == NULL) {
    rtt_options(&def);
    o = &def;
  }
  memset(tc, 0, sizeof(*tc));
  int err = rt_client_open(loop, o, rtt_connect_cb, tc, &tc->c);
  cr_assert_eq(err, 0, "rt_client_open: %s", rt_err_name(err));
  cr_assert_not_null(tc->c);
}

void rtt_open_ready(rtt_client *tc, uv_loop_t *loop, const rt_options_t *o) {
  rtt_open(tc, loop, o);
  cr_assert(rtt_run_until(loop, &tc->connects, 1, 5000),
            "client did not connect within 5 s");
  cr_assert_eq(tc->connect_status, 0, "connect failed: %s",
               rt_err_name(tc->connect_status));
}

void rtt_open_wait(rtt_client *tc, uv_loop_t *loop, const rt_options_t *o) {
  rtt_open(tc, loop, o);
  cr_assert(rtt_run_until(loop, &tc->connects, 1, 8000),
            "no connect result within 8 s");
  cr_assert_eq(tc->connects, 1);
}

void rtt_close(rtt_client *tc) {
  int err = rt_client_close(tc->c, rtt_close_cb, tc);
  cr_assert_eq(err, 0, "rt_client_close: %s", rt_err_name(err));
}

void rtt_close_all(uv_loop_t *loop, rtt_client *first, ...) {
  va_list ap;
  va_start(ap, first);
  for (rtt_client *tc = first; tc != NULL; tc = va_arg(ap, rtt_client *))
    rtt_close(tc);
  va_end(ap);
  rtt_loop_finish(loop);
  va_start(ap, first);
  for (rtt_client *tc = first; tc != NULL; tc = va_arg(ap, rtt_client *))
    cr_assert_eq(tc->closes, 1, "close callback ran %d times", tc->closes);
  va_end(ap);
}

uint64_t rtt_reconnects(const rt_client_t *c) {
  rt_stats_t st;
  rt_client_stats(c, &st);
  return st.reconnects;
}

/* ---- lock requests ----------------------------------------------------------- */

void rtt_lock_cb(rt_lock_t *lock, int status, void *data) {
  rtt_req *r = data;
  r->calls++;
  r->status = status;
  r->at_ms = rtt_now_ms();
  snprintf(r->id, sizeof(r->id), "%s", rt_lock_id(lock));
  if (status == 0) {
    r->lock = lock;
    r->fence = rt_lock_fence(lock);
    r->lease_ms = rt_lock_lease_ms(lock);
    r->position = rt_lock_position(lock);
    if (r->log != NULL)
      rtt_log_add(r->log, "%s", r->tag ? r->tag : "?");
    if (r->signal_on_grant)
      rtt_signal(r);
  } else {
    r->lock = NULL; /* freed after this callback */
    if (r->log != NULL)
      rtt_log_add(r->log, "%s:%s", r->tag ? r->tag : "?", rt_err_name(status));
  }
}

void rtt_signal_cb(rt_lock_t *lock, int status, void *data) {
  rtt_req *r = data;
  (void)lock;
  r->sig_calls++;
  r->sig_status = status;
  r->sig_at_ms = rtt_now_ms();
  r->lock = NULL;
}

void rtt_extend_cb(rt_lock_t *lock, int status, void *data) {
  rtt_req *r = data;
  r->ext_calls++;
  r->ext_status = status;
  r->ext_lease_ms = rt_lock_lease_ms(lock);
}

int rtt_wait_n(rt_client_t *c, const void *name, size_t len, int64_t ttl_ms,
               int64_t timeout_ms, rtt_req *req) {
  rt_lock_t *l = NULL;
  int err = rt_wait(c, name, len, ttl_ms, timeout_ms, rtt_lock_cb, req, &l);
  if (err == 0) {
    req->lock = l;
    snprintf(req->id, sizeof(req->id), "%s", rt_lock_id(l));
  }
  return err;
}

int rtt_wait(rt_client_t *c, const char *name, int64_t ttl_ms,
             int64_t timeout_ms, rtt_req *req) {
  return rtt_wait_n(c, name, strlen(name), ttl_ms, timeout_ms, req);
}

void rtt_next_message(redisContext *s, char *out, size_t cap) {
  struct timeval tv = {2, 0};
  redisSetTimeout(s, tv);
  redisReply *m = NULL;
  cr_assert_eq(redisGetReply(s, (void **)&m), REDIS_OK, "no message came");
  cr_assert(m->type == REDIS_REPLY_ARRAY && m->elements == 3);
  snprintf(out, cap, "%s", m->element[2]->str);
  freeReplyObject(m);
}

int rtt_wait_ex(rt_client_t *c, const char *name, const rt_request_t *kind,
                int64_t ttl_ms, int64_t timeout_ms, rtt_req *req) {
  rt_lock_t *l = NULL;
  int err = rt_wait_ex(c, name, strlen(name), kind, ttl_ms, timeout_ms,
                       rtt_lock_cb, req, &l);
  if (err == 0) {
    req->lock = l;
    snprintf(req->id, sizeof(req->id), "%s", rt_lock_id(l));
  }
  return err;
}

int rtt_try(rt_client_t *c, const char *name, int64_t ttl_ms, rtt_req *req) {
  return rt_try_lock(c, name, strlen(name), ttl_ms, rtt_lock_cb, req);
}

int rtt_signal(rtt_req *req) {
  return rt_signal(req->lock, rtt_signal_cb, req);
}

int rtt_extend(rtt_req *req, int64_t ttl_ms) {
  return rt_extend(req->lock, ttl_ms, rtt_extend_cb, req);
}

void rtt_acquire(uv_loop_t *loop, rt_client_t *c, const char *name,
                 int64_t ttl_ms, rtt_req *req) {
  int err = rtt_wait(c, name, ttl_ms, RT_FOREVER, req);
  cr_assert_eq(err, 0, "rt_wait(%s): %s", name, rt_err_name(err));
  cr_assert(rtt_run_until(loop, &req->calls, 1, 5000),
            "wait for %s not answered within 5 s", name);
  cr_assert_eq(req->status, 0, "wait for %s failed: %s (%s)", name,
               rt_err_name(req->status), rt_client_last_error(c));
}

void rtt_release(uv_loop_t *loop, rtt_req *req, int want_status) {
  int calls = req->sig_calls;
  int err = rtt_signal(req);
  cr_assert_eq(err, 0, "rt_signal: %s", rt_err_name(err));
  cr_assert(rtt_run_until(loop, &req->sig_calls, calls + 1, 10000),
            "signal not answered within 10 s");
  cr_assert_eq(req->sig_status, want_status, "signal: %s, want %s",
               rt_err_name(req->sig_status), rt_err_name(want_status));
}

void rtt_wait_queued(uv_loop_t *loop, rt_client_t *c, const char *name,
                     int64_t ttl_ms, rtt_req *req) {
  int err = rtt_wait(c, name, ttl_ms, RT_FOREVER, req);
  cr_assert_eq(err, 0, "rt_wait(%s): %s", name, rt_err_name(err));
  RTT_RUN_UNTIL(loop, req->calls > 0 || rt_lock_position(req->lock) > 0, 5000);
  cr_assert_eq(req->calls, 0, "%s was not queued: %s", name,
               rt_err_name(req->status));
  cr_assert_gt(rt_lock_position(req->lock), 0, "%s: no enqueue reply", name);
}

void rtt_expect_grant(uv_loop_t *loop, rtt_req *req, int64_t max_ms,
                      const char *what) {
  RTT_RUN_UNTIL(loop, req->calls > 0, max_ms);
  cr_assert_eq(req->calls, 1, "%s: the waiter hangs (no callback in %lld ms)",
               what, (long long)max_ms);
  cr_assert_eq(req->status, 0, "%s: the wait failed with %s (%s)", what,
               rt_err_name(req->status), rt_strerror(req->status));
}

void rtt_expect_evicted(uv_loop_t *loop, rtt_req *held, rtt_req *waiting,
                        const char *out) {
  cr_assert(strstr(out, held->id) != NULL && strstr(out, waiting->id) != NULL,
            "evict's output names neither the holder %s nor the waiter %s: %s",
            held->id, waiting->id, out);
  rtt_expect_grant(loop, waiting, 5000, "the waiter behind the evicted");
  cr_assert_gt(waiting->fence, held->fence);
  rtt_release(loop, held, RT_ELOST);
  rtt_release(loop, waiting, 0);
}

/* ---- processes ------------------------------------------------------------- */

void rtt_fork(rtt_child *ch, int (*fn)(int out_fd, int go_fd, void *arg),
              void *arg) {
  int out[2], go[2];
  cr_assert_eq(pipe(out), 0);
  cr_assert_eq(pipe(go), 0);
  fflush(NULL);
  pid_t pid = fork_tied(126);
  if (pid == 0) {
    close(out[0]);
    close(go[1]);
    /* The test's private servers belong to the parent. */
    started_by = 0;
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

/* ---- recording query answers ---------------------------------------------- */

static void answer_record(rtt_answer *a, int status, int value) {
  a->calls++;
  a->status = status;
  a->value = value;
  a->at_ms = rtt_now_ms();
}

void rtt_owned_cb(rt_lock_t *l, int status, int owned, void *data) {
  (void)l;
  answer_record(data, status, owned);
}

void rtt_locked_cb(rt_client_t *c, int status, int locked, void *data) {
  (void)c;
  answer_record(data, status, locked);
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
