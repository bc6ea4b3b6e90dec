/* Test support for redturn's integration tests (it_*.c under tests/).
 *
 * - Redis servers: the run's shared server (REDTURN_TEST_URL, set by
 *   scripts/test.sh; when unset, a private one is started lazily so a test
 *   binary can be run by hand) and private servers for tests that need a
 *   special one (password, DEBUG SLEEP, SCRIPT FLUSH, quiet command counts).
 * - A unique key prefix per test process.
 * - Synchronous hiredis helpers for white-box checks of the Redis layout.
 * - Running a libuv loop with a deadline, counting callbacks, a tiny event
 *   log.
 * - Fork helpers for multi-process tests: children report fixed-size
 *   records through a pipe; the parent collects them.
 *
 * Functions named rtt_* that can fail use Criterion assertions, so they are
 * for the test process only. Functions marked "child-safe" never assert and
 * may be used in forked children.
 */
#ifndef RT_TEST_H
#define RT_TEST_H

#include <hiredis/hiredis.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "redturn.h"
#include "rtserver.h"

/* ---- time ---------------------------------------------------------------- */

/* Monotonic milliseconds (child-safe). */
uint64_t rtt_now_ms(void);
/* CLOCK_REALTIME in microseconds: comparable across processes (child-safe). */
int64_t rtt_realtime_us(void);
/* Sleep without running any loop (child-safe). */
void rtt_sleep_ms(int64_t ms);

/* ---- Redis servers --------------------------------------------------------- */

/* A private server: tools/rtserver.h's (pid, port, dir: its files). */
typedef rts_server rtt_server;

/* Start a private redis-server (tools/rtserver.h: a free loopback port,
 * no persistence; DEBUG allowed), with extra arguments (NULL-terminated
 * list, or NULL; copied; a later argument overrides an earlier one, so e.g.
 * {"--appendonly", "yes", NULL} turns AOF on), and wait until it answers
 * and is done loading. Fails the test if it cannot. The server is stopped
 * by rtt_server_stop(), by rtt_cleanup(), at exit, or when the test process
 * dies. */
void rtt_server_start(rtt_server *s, const char *const *extra);
/* The same, but the server never loads REDTURN_TEST_MODULE: for tests of
 * the Lua path's own choices (its ACL rules, its fallbacks), whose clients
 * then take rtt_lua_path(). */
void rtt_server_start_lua(rtt_server *s, const char *const *extra);
/* rtt_server_start() that returns -1 with err (it does not fail the test)
 * when the server did not start: for a caller that picks another port of
 * its own in extra (a TLS port another process took meanwhile). */
int rtt_server_try_start(rtt_server *s, const char *const *extra, char *err,
                         size_t errcap);
/* Stop it (SIGTERM, then SIGKILL) and remove its directory. Safe twice,
 * and after rtt_cleanup() already stopped it. */
void rtt_server_stop(rtt_server *s);
/* Stop it with SIGTERM (so an AOF is complete) keeping its directory, then
 * start it again on the same port, in the same directory, with the same
 * extra arguments, and wait until it answers and is done loading. Fails
 * the test if it cannot. */
void rtt_server_restart(rtt_server *s);
/* The same without waiting: for tests that run their clients while the
 * restarted server loads (poll rtt_server_ready()). */
void rtt_server_restart_nowait(rtt_server *s);
/* Does s answer and is it done loading (a keyed command does not answer
 * -LOADING)? 1 or 0. A server with a password counts as ready as soon as
 * it answers (NOAUTH comes before -LOADING). Child-safe. */
int rtt_server_ready(const rtt_server *s);
/* SIGKILL the server and reap it (a crash: no shutdown, no AOF fsync);
 * s->pid becomes 0, so a later rtt_server_stop() only cleans up. */
void rtt_crash(rtt_server *s);
/* Free the rtt_redis() connections and stop every private server this
 * process started: use as (or call from) .fini. */
void rtt_cleanup(void);

/* A private server for one test: the server, a connection to it for
 * white-box checks, and options for clients on it (127.0.0.1, this test's
 * prefix). */
typedef struct rtt_private {
  rtt_server srv;
  redisContext *adm;
  rt_options_t opts;
} rtt_private;
/* rtt_server_start(&p->srv, extra), then p->adm and p->opts. */
void rtt_private_start(rtt_private *p, const char *const *extra);
/* Close p->adm and stop the server (rtt_cleanup() does both too). */
void rtt_private_stop(rtt_private *p);

/* A loopback TCP port nobody listens on right now. */
int rtt_free_port(void);

/* The run's shared server: "redis://127.0.0.1:PORT", its host and port. */
const char *rtt_url(void);
const char *rtt_host(void);
int rtt_port(void);

/* ---- strings ----------------------------------------------------------------- */

/* Does s end with tail? 1 or 0. */
int rtt_ends_with(const char *s, const char *tail);
/* A malloc'ed copy of s[0..len) of exactly len bytes, without a NUL (the
 * caller frees it): a parser handed it that reads past len is caught by
 * AddressSanitizer or valgrind. */
char *rtt_exact(const char *s, size_t len);

/* ---- unique names ------------------------------------------------------------ */

/* This test's key prefix, "t<pid>-<n>-<x>": the same for every call in one
 * process (and in children forked after the first call). */
const char *rtt_prefix(void);

/* ---- the common fixture -------------------------------------------------- */

/* Before each test: decide the shared server's URL and this process's key
 * prefix (so children forked later share them), init *loop, connect *rc to
 * the shared server. After it: close *rc, then rtt_cleanup(). */
void rtt_suite_setup(uv_loop_t *loop, redisContext **rc);
void rtt_suite_teardown(redisContext **rc);

/* Declares `loop` (fresh per test) and `rc` (a sync connection to the shared
 * server) and a Criterion suite that sets them up and cleans everything up
 * after each test; each test may take up to `seconds`. */
#define RTT_SUITE_TIMEOUT(name, seconds)                                       \
  static uv_loop_t loop;                                                       \
  static redisContext *rc;                                                     \
  static void rtt_setup_(void) { rtt_suite_setup(&loop, &rc); }                \
  static void rtt_teardown_(void) { rtt_suite_teardown(&rc); }                 \
  TestSuite(name, .init = rtt_setup_, .fini = rtt_teardown_,                   \
            .timeout = (seconds))

/* The same with the usual 30 s per test. */
#define RTT_SUITE(name) RTT_SUITE_TIMEOUT(name, 30)

/* For tests on private servers: declares `loop` (fresh per test) and a
 * suite that runs rtt_cleanup() after each test (its connections and
 * private servers), without touching the shared server. */
#define RTT_LOOP_SUITE(name, seconds)                                          \
  static uv_loop_t loop;                                                       \
  static void rtt_loop_setup_(void) { cr_assert_eq(uv_loop_init(&loop), 0); }  \
  TestSuite(name, .init = rtt_loop_setup_, .fini = rtt_cleanup,                \
            .timeout = (seconds))

/* ---- recording query answers ---------------------------------------------- */

/* One rt_owned() / rt_locked() answer: how many callbacks, the last status
 * and the answer (owned or locked). */
typedef struct rtt_answer {
  int calls, status, value;
  uint64_t at_ms; /* rtt_now_ms() at the last callback */
} rtt_answer;
/* Callbacks recording into the rtt_answer given as data. */
void rtt_owned_cb(rt_lock_t *l, int status, int owned, void *data);
void rtt_locked_cb(rt_client_t *c, int status, int locked, void *data);

/* The longest request id, with its NUL. */
#define RTT_ID_MAX 96

/* One rt_inspect() answer: how many callbacks, the last status, and (when
 * it was 0) the holder's request id ("" for none) and the queue length. */
typedef struct rtt_snapshot {
  int calls, status;
  char holder[RTT_ID_MAX];
  size_t queue_len;
} rtt_snapshot;
/* Callback recording into the rtt_snapshot given as data. */
void rtt_inspect_cb(rt_client_t *c, int status, const rt_queue_info_t *info,
                    void *data);

/* ---- synchronous hiredis ----------------------------------------------------- */

/* Connect to the shared server (db 0), or to 127.0.0.1:port. The
 * connection is freed by rtt_redis_close() or else by rtt_cleanup(), so a
 * failed assertion leaks nothing. */
redisContext *rtt_redis(void);
redisContext *rtt_redis_at(int port);
void rtt_redis_close(redisContext *rc);
/* Run a command (redisCommand format); asserts there is a reply. */
redisReply *rtt_cmd(redisContext *rc, const char *fmt, ...);
/* Run a command that must answer an integer; returns it. */
long long rtt_int(redisContext *rc, const char *fmt, ...);
/* Run a command that must not answer an error. */
void rtt_ok(redisContext *rc, const char *fmt, ...);
/* Run a command that must answer an error; copies its text into
 * buf[0..cap). */
void rtt_err(redisContext *rc, char *buf, size_t cap, const char *fmt, ...);
/* Whether the replica on replica_port has everything the master on
 * master_port wrote so far, on any connection, within timeout_ms (WAIT
 * counts only its own connection's writes: none on one that only read). */
int rtt_replica_has_all(int master_port, int replica_port, int timeout_ms);
/* The Redis clock (TIME) in ms. */
int64_t rtt_redis_time_ms(redisContext *rc);
/* A field of INFO (any section), as a number; asserts it exists. */
long long rtt_info_ll(redisContext *rc, const char *section, const char *field);
/* A field of CLUSTER INFO of the server on port (e.g. "cluster_my_epoch"),
 * as a number; asserts it exists. */
long long rtt_cluster_info_ll(int port, const char *field);
/* calls=N of "cmdstat_<cmd>" in INFO commandstats (0 if never called). */
long long rtt_cmdstat_calls(redisContext *rc, const char *cmd);
/* Script calls the server ran on any path: EVALSHA, EVAL, FCALL,
 * FCALL_RO and the module's redturn.* commands together. */
long long rtt_script_calls(redisContext *rc);
/* The CLIENT LIST id of the library's connection named
 * "redturn-<kind>-<client_id>" (kind "cmd" or "sub"), or -1 if there is
 * none. */
long long rtt_conn_id(redisContext *rc, const char *kind,
                      const char *client_id);
/* CLIENT KILL ID that connection: 1 if one was killed, 0 if there was none
 * or the kill did not find it (it was gone already). */
int rtt_kill_conn(redisContext *rc, const char *kind, const char *client_id);

/* The key "<prefix>:{<esc>}:<suffix>" of resource name[0..len) (binary:
 * the name may hold NUL); returns its length. cap >= 3 * len + prefix + 8. */
size_t rtt_key(char *buf, size_t cap, const char *prefix, const void *name,
               size_t len, char suffix);

/* Entries of the resource's queue as the library sees them: the holder
 * first (if any), then the live waiters in order; up to max, each
 * NUL-terminated in out[i]; returns how many there are. */
size_t rtt_queue(redisContext *rc, const char *prefix, const void *name,
                 size_t len, char (*out)[RTT_ID_MAX], size_t max);
/* How many entries rtt_queue() would return. */
long long rtt_qlen(redisContext *rc, const char *prefix, const void *name,
                   size_t len);
/* rtt_qlen() of the string name under this test's prefix. */
long long rtt_queue_len(redisContext *rc, const char *name);
/* A field of the resource's holder record as a number, -1 without a
 * holder: "f" fence, "d" deadline (Redis ms), "g" grant time. */
long long rtt_hfield(redisContext *rc, const char *prefix, const void *name,
                     size_t len, const char *field);
/* rtt_hfield() of the string name under this test's prefix. */
long long rtt_holder_field(redisContext *rc, const char *name,
                           const char *field);
/* How many times request id is in the string name's rtt_queue() (this
 * test's prefix): 1 for a live entry, never more. */
int rtt_queue_count(redisContext *rc, const char *name, const char *id);
/* How many of the string name's keys (q, h, m; this test's prefix) exist:
 * an idle resource leaves none. */
long long rtt_keys_left(redisContext *rc, const char *name);

/* ---- loops ---------------------------------------------------------------------- */

/* Run loop until pred(arg) is true or max_ms passed; pred is checked after
 * every loop iteration and at least every 5 ms (so it may look at Redis).
 * Returns whether pred became true. */
int rtt_run_until_fn(uv_loop_t *loop, int (*pred)(void *arg), void *arg,
                     int64_t max_ms);
/* Same with "*counter >= target". */
int rtt_run_until(uv_loop_t *loop, const int *counter, int target,
                  int64_t max_ms);
/* Run loop until the Redis queue of the string name (under this test's
 * prefix, read through rc) has at least n entries; fails the test if that
 * takes over 10 s. */
void rtt_run_until_queued(uv_loop_t *loop, redisContext *rc, const char *name,
                          long long n);
/* Run loop for ms (handling whatever happens meanwhile). */
void rtt_run_for(uv_loop_t *loop, int64_t ms);
/* Run loop until the expression cond holds or max_ms passed, checking cond
 * after every loop iteration and at least every 5 ms. */
#define RTT_RUN_UNTIL(loop, cond, max_ms)                                      \
  do {                                                                         \
    rtt_runner *rtt_r_ = rtt_runner_start((loop), (max_ms));                   \
    while (!(cond) && rtt_runner_step(rtt_r_))                                 \
      ;                                                                        \
    rtt_runner_stop(rtt_r_);                                                   \
  } while (0)
/* What RTT_RUN_UNTIL is made of: a 5 ms tick on loop until max_ms passed;
 * step runs one loop iteration and returns 0 once the time is up. */
typedef struct rtt_runner rtt_runner;
rtt_runner *rtt_runner_start(uv_loop_t *loop, int64_t max_ms);
int rtt_runner_step(rtt_runner *r);
void rtt_runner_stop(rtt_runner *r);
/* Run until the loop has nothing left (at most 10 s, else the test fails,
 * listing the handles still open), then assert uv_loop_close() == 0. */
void rtt_loop_finish(uv_loop_t *loop);
/* The same with a bound of ms instead of 10 s: for a close with much to
 * cancel in Redis. */
void rtt_loop_finish_within(uv_loop_t *loop, uint64_t ms);

/* ---- event log ------------------------------------------------------------------ */

typedef struct rtt_log {
  char buf[4096]; /* events joined with ',' */
  int n;
} rtt_log;

void rtt_log_add(rtt_log *log, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---- clients -------------------------------------------------------------------- */

typedef struct rtt_client {
  rt_client_t *c;
  int connects;       /* connect_cb calls */
  int connect_status; /* its last status */
  int closes;         /* close_cb calls */
} rtt_client;

/* Options for the shared server with this test's prefix. */
/* The script path REDTURN_TEST_SCRIPT_PATH asks for (auto, module,
 * functions or eval; unset: auto): rtt_options() and rtt_options_at() set
 * it, so one suite runs on any path (module: with REDTURN_TEST_MODULE,
 * which makes every server the tests start load it; tools/rtserver.h). */
int rtt_script_path(void);
/* rtt_script_path(), with the module's path (the tests' module mode) as
 * RT_SCRIPT_PATH_AUTO: for clients of rtt_server_start_lua() servers. */
int rtt_lua_path(void);
/* The tests' module mode: REDTURN_TEST_MODULE is set, so every server the
 * tests start (but rtt_server_start_lua()'s) has the module. 1 or 0. */
int rtt_module_mode(void);
void rtt_options(rt_options_t *o);
/* Options for 127.0.0.1:port (a private server, a proxy) with this test's
 * prefix. */
void rtt_options_at(rt_options_t *o, int port);
/* Open a client (o NULL: rtt_options()); asserts rt_client_open() == 0. */
void rtt_open(rtt_client *tc, uv_loop_t *loop, const rt_options_t *o);
/* rtt_open() and run until connected; asserts connect status 0. */
void rtt_open_ready(rtt_client *tc, uv_loop_t *loop, const rt_options_t *o);
/* rtt_open() and run until connect_cb ran (whatever its status). */
void rtt_open_wait(rtt_client *tc, uv_loop_t *loop, const rt_options_t *o);
/* rt_client_close() with a counting close_cb; asserts it returned 0. */
void rtt_close(rtt_client *tc);
/* rtt_close() every client of the NULL-terminated list, run loop until it
 * has nothing left (rtt_loop_finish) and assert each close_cb ran once. */
void rtt_close_all(uv_loop_t *loop, rtt_client *first, ...);
/* How many times the client reconnected (rt_client_stats). */
uint64_t rtt_reconnects(const rt_client_t *c);
/* The counting callbacks used by rtt_open/rtt_close (data: rtt_client). */
void rtt_connect_cb(rt_client_t *c, int status, void *data);
void rtt_close_cb(rt_client_t *c, void *data);

/* ---- lock requests ----------------------------------------------------------- */

/* What happened to one lock request: filled by rtt_lock_cb and friends. */
typedef struct rtt_req {
  rt_lock_t *lock; /* the handle; NULL once it was freed */
  const char *tag; /* name for the log (optional) */
  rtt_log *log;    /* "<tag>" on grant, "<tag>:<ERR>" on error */
  int calls;       /* wait/try callback calls */
  int status;      /* its status */
  uint64_t fence;  /* at the callback */
  int64_t lease_ms;
  size_t position;
  uint64_t at_ms;      /* rtt_now_ms() at the callback */
  char id[RTT_ID_MAX]; /* rt_lock_id() */
  int signal_on_grant; /* rtt_lock_cb signals right away when granted */
  int sig_calls, sig_status;
  uint64_t sig_at_ms;
  int ext_calls, ext_status;
  int64_t ext_lease_ms;
} rtt_req;

/* rt_lock_cb recording into the rtt_req given as data. */
void rtt_lock_cb(rt_lock_t *lock, int status, void *data);
/* rt_lock_cb for rt_signal() (data: rtt_req); clears req->lock. */
void rtt_signal_cb(rt_lock_t *lock, int status, void *data);
/* rt_lock_cb for rt_extend() (data: rtt_req). */
void rtt_extend_cb(rt_lock_t *lock, int status, void *data);

/* rt_wait() on the string name with rtt_lock_cb; returns rt_wait()'s code
 * (on 0, req->lock and req->id are set). */
int rtt_wait(rt_client_t *c, const char *name, int64_t ttl_ms,
             int64_t timeout_ms, rtt_req *req);
/* The next message (its payload) on a connection subscribed with
 * SUBSCRIBE or SSUBSCRIBE; fails the test if none comes within 2 s. */
void rtt_next_message(redisContext *s, char *out, size_t cap);
/* rt_wait_ex() of kind on the string name, as rtt_wait(). */
int rtt_wait_ex(rt_client_t *c, const char *name, const rt_request_t *kind,
                int64_t ttl_ms, int64_t timeout_ms, rtt_req *req);
/* rt_wait() on name[0..len). */
int rtt_wait_n(rt_client_t *c, const void *name, size_t len, int64_t ttl_ms,
               int64_t timeout_ms, rtt_req *req);
/* rt_try_lock() on the string name with rtt_lock_cb (req->lock is set in
 * the callback when granted). */
int rtt_try(rt_client_t *c, const char *name, int64_t ttl_ms, rtt_req *req);
/* rt_signal(req->lock, rtt_signal_cb, req). */
int rtt_signal(rtt_req *req);
/* rt_extend(req->lock, ttl_ms, rtt_extend_cb, req). */
int rtt_extend(rtt_req *req, int64_t ttl_ms);

/* Wait with rtt_wait() and run until granted; asserts status 0. */
void rtt_acquire(uv_loop_t *loop, rt_client_t *c, const char *name,
                 int64_t ttl_ms, rtt_req *req);
/* rtt_signal() and run until its callback; asserts the given status. */
void rtt_release(uv_loop_t *loop, rtt_req *req, int want_status);
/* rtt_wait() with no deadline and run until the enqueue reply put it
 * behind someone (position > 0); asserts it is queued, not ended. */
void rtt_wait_queued(uv_loop_t *loop, rt_client_t *c, const char *name,
                     int64_t ttl_ms, rtt_req *req);
/* rtt_wait_queued() of a request of kind (NULL: a mutex). */
void rtt_wait_ex_queued(uv_loop_t *loop, rt_client_t *c, const char *name,
                        const rt_request_t *kind, int64_t ttl_ms, rtt_req *req);
/* Run until req's wait callback ran; asserts it ran within max_ms and
 * granted (what: which waiter, for the message). */
void rtt_expect_grant(uv_loop_t *loop, rtt_req *req, int64_t max_ms,
                      const char *what);
/* `redturn evict` printed out for held's lock with waiting queued behind
 * it: out names both, waiting is granted with a higher fence, and held's
 * release finds its lock lost. Releases both. */
void rtt_expect_evicted(uv_loop_t *loop, rtt_req *held, rtt_req *waiting,
                        const char *out);

/* ---- processes ------------------------------------------------------------- */

typedef struct rtt_child {
  pid_t pid;
  int out_fd; /* parent: read end of the child's record pipe */
  int go_fd;  /* parent: write end of the child's "go" pipe */
} rtt_child;

/* Fork a child that runs fn(out_fd, go_fd, arg) and exits with its return
 * value (never returns into the test). The child dies with the test
 * process. It must not touch the parent's loops, clients or rtt_redis()
 * connections (it holds copies of their descriptors): it makes its own. */
void rtt_fork(rtt_child *ch, int (*fn)(int out_fd, int go_fd, void *arg),
              void *arg);
/* Parent: tell the child to go on (one byte on its go pipe). */
void rtt_child_go(rtt_child *ch);
/* Child: wait for the parent's go; 0 on success (child-safe). */
int rtt_await_go(int go_fd);
/* Write all of buf (child-safe); 0 on success. */
int rtt_write_all(int fd, const void *buf, size_t len);
/* Child: open a client to the shared server (this test's prefix) on a loop
 * of its own, rt_wait() on the string name with ttl_ms and no timeout,
 * calling cb(data), write 'q' to out_fd once the wait was sent, and run
 * the loop until the process is killed. Returns only on failure: 4 (loop),
 * 5 (open), 6 (wait) or 8 (the loop ended). Child-safe. */
int rtt_child_wait_forever(int out_fd, const char *name, int64_t ttl_ms,
                           rt_lock_cb cb, void *data);
/* The same with rt_wait_ex() and req (NULL: a mutex). */
int rtt_child_wait_forever_ex(int out_fd, const char *name,
                              const rt_request_t *req, int64_t ttl_ms,
                              rt_lock_cb cb, void *data);
/* Parent: fork a child that, once told to go (rtt_child_go), opens a
 * client to 127.0.0.1:port with this test's prefix, requests the string
 * name with ttl_ms and no deadline, and, once it holds the lock (hold) or
 * is queued behind someone (!hold), writes its request id as one
 * RTT_ID_MAX record to its out pipe; then runs until killed. */
void rtt_fork_requester(rtt_child *ch, int port, const char *name,
                        int64_t ttl_ms, int hold);
/* Parent: let a rtt_fork_requester() child go and read its request id
 * into id[RTT_ID_MAX]; fails the test if it does not report in 8 s. */
void rtt_requester_id(rtt_child *ch, char *id);
/* Parent: SIGKILL the child and reap it (rtt_child_wait). */
void rtt_child_kill(rtt_child *ch);
/* Parent: read whole records of size rec from fd into buf (at most max)
 * until EOF or timeout_ms; returns how many were read. */
size_t rtt_read_records(int fd, void *buf, size_t rec, size_t max,
                        int64_t timeout_ms);
/* Parent: wait for the child to exit (killing it after timeout_ms); returns
 * its exit code, 128+signal if it was killed by a signal. Closes its fds. */
int rtt_child_wait(rtt_child *ch, int64_t timeout_ms);

/* Run the redturn binary next to the test's directory ($REDTURN_CLI if
 * set) with a shell command line args; its exit code, its stdout and
 * stderr into out. */
int rtt_redturn(const char *args, char *out, size_t cap);
/* `redturn run` (its command sees a fence) and `redturn demo` (its checks of
 * fences, exclusion and FIFO all ok) on url, with this test's prefix. */
void rtt_cli_runs_and_demos(const char *url);

#endif /* RT_TEST_H */
