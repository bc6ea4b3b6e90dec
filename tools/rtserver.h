/* A throwaway redis-server: on a loopback port, without persistence, its
 * files in one directory, stopped by pid. The one launcher of `redturn
 * demo`, the benchmark, the tests' support library and the fault suite.
 * scripts/start-redis.sh is its shell face, for scripts that start Redis
 * before anything is built: the same command line, the same directory
 * layout. Change the two together.
 *
 * The server runs as
 *
 *   redis-server --port P --bind 127.0.0.1 --save '' --appendonly no
 *                --daemonize no --dir D --logfile D/redis.log
 *                --enable-debug-command local <extra...>
 *
 * (DEBUG from loopback, which the tests use; the private server serves
 * nobody else), preceded by "D/redis.conf" (and "--sentinel") when it has
 * a config file (or is a Sentinel), with stdin from /dev/null and stdout and stderr appended to
 * D/stdout.log.
 * The extra arguments come last: Redis lets a later one override an
 * earlier one (--appendonly yes turns AOF on).
 *
 * The tests' module mode: when REDTURN_TEST_MODULE names a file (the
 * project's redturn_module.so), "--loadmodule <it>" follows the extra
 * arguments of every server but a Sentinel, unless they load a module
 * themselves or rts_options.no_module is set. scripts/start-redis.sh does
 * the same. A restart (rts_respawn) keeps it, as it keeps every extra
 * argument.
 *
 * It is started with fork() followed at once by execv(); between the two
 * the child makes only async-signal-safe calls and closes every descriptor
 * but 0-2, so starting a server is safe in a process with threads (the
 * fault suite's driver) and none of the caller's sockets or pipes stay open
 * in the server. The child has a process group of its own (a Ctrl-C meant
 * for the caller does not stop it under the caller, which stops it) and on
 * Linux dies with the thread that started it. */
#ifndef RT_TOOLS_RTSERVER_H
#define RT_TOOLS_RTSERVER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define RTS_PATH_CAP 512
/* Limits of the extra arguments a server keeps for a restart. */
#define RTS_MAX_ARGS 24
#define RTS_ARGS_CAP 1024

typedef struct rts_options {
  const char *exe;          /* NULL: "redis-server"; a name without '/' is
                               looked up on PATH */
  int port;                 /* 0: a free one (another on each retry) */
  const char *dir;          /* NULL: a new <TMPDIR or /tmp>/<dir_prefix>.XXXXXX;
                               else this one, made if missing */
  const char *dir_prefix;   /* NULL: "redturn-redis" */
  const char *const *extra; /* NULL-terminated extra arguments, or NULL */
  int64_t wait_ms;          /* for it to answer; 0: 10 s */
  const char *config;       /* NULL, or the text of a config file written
                               to D/redis.conf and given first (a sentinel
                               needs one it can rewrite) */
  int sentinel;             /* nonzero: run as a Sentinel (--sentinel; needs
                               config with a "sentinel monitor" line) */
  int no_module;            /* nonzero: never load $REDTURN_TEST_MODULE */
} rts_options;

typedef struct rts_server {
  pid_t pid; /* 0: not running */
  int port;
  char exe[RTS_PATH_CAP];
  char dir[RTS_PATH_CAP]; /* its files: redis.log, stdout.log, AOF */
  /* Copies of the extra arguments, each NUL-terminated, one after the
   * other. A plain buffer (no pointers), so copies of the struct stay
   * valid. */
  char args[RTS_ARGS_CAP];
  int nargs;
  char conf[RTS_PATH_CAP + 16]; /* its config file, or "" */
  int sentinel;                 /* a Sentinel: ready means it answers PING */
} rts_server;

/* Start a server (o NULL: every default) and wait until it answers and is
 * done loading. A free port that someone else takes first is retried with
 * another. 0, or -1 with a message in err (the end of the server's logs
 * included when it would not come up) and nothing left behind. */
int rts_start(rts_server *s, const rts_options *o, char *err, size_t errcap);

/* Does s answer, is it done loading (a keyed command does not answer
 * -LOADING) and is it s->pid? 1 or 0. A server with a password counts as
 * ready once it answers (NOAUTH comes before -LOADING); a cluster node that
 * serves no slot yet (-CLUSTERDOWN) or not this one (-MOVED) once it
 * answers; a Sentinel once it answers PING. Never asserts, never
 * blocks for long: usable in forked children. */
int rts_ready(const rts_server *s);

/* Wait until rts_ready(s): 1; s->pid exited (reaped; s->pid becomes 0): -1;
 * still not after max_ms: 0. */
int rts_wait_ready(rts_server *s, int64_t max_ms);

/* SIGTERM (a server with AOF writes and fsyncs it first), wait up to 10 s,
 * then SIGKILL; reaps it and sets s->pid to 0. Keeps the directory. */
void rts_terminate(rts_server *s);

/* rts_terminate() and remove the directory with everything in it. Safe
 * twice. */
void rts_stop(rts_server *s);

/* Start s again on the same port, in the same directory, with the same
 * extra arguments, without waiting (s must not be running). 0, or -1 if
 * fork() failed. */
int rts_respawn(rts_server *s);

/* "redis://127.0.0.1:<port>" into buf. */
void rts_url(const rts_server *s, char *buf, size_t cap);

/* A loopback TCP port nobody listens on right now, or -1. */
int rts_free_port(void);

/* Remove dir and everything in it, never following symbolic links. 0, or
 * -1 (errno set). */
int rts_remove_tree(const char *dir);

/* The last bytes of dir's stdout.log and redis.log, for a message about a
 * server that would not come up; empty if there are none. */
void rts_log_tail(const char *dir, char *buf, size_t cap);

#endif /* RT_TOOLS_RTSERVER_H */
