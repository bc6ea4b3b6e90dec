/* redturn run's own declarations, shared by its files (run.c: the entry,
 * signals; run_args.c: its arguments; run_wait.c: connecting, retrying
 * and waiting; run_hold.c: the command while the lock is held, messages
 * and the end). */
#ifndef RT_CLI_RUN_H
#define RT_CLI_RUN_H

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "cli.h"

extern char **environ;

enum { S_CONNECTING, S_WAITING, S_RUNNING, S_RELEASING, S_DONE };

/* Refresh the queue position this often while waiting on a terminal. */
#define ASK_EVERY_MS 1000
#define DRAW_EVERY_MS 250
#define MAX_HINT 100000
/* Once redturn is done (the command ended, or it gives up), releasing the
 * lock and closing the client may take this long; then it exits anyway,
 * and a lease left behind ends by itself: Redis being down must not keep
 * redturn alive after its command. */
#define EXIT_BOUND_MS 2000
/* The shortest --ttl: the lease is renewed every third of it, and each
 * renewal must get to Redis and back before the lease ends. */
#define TTL_MIN_MS 1000
#define MAX_SIGNALS 64

typedef struct run {
  uv_loop_t loop;
  const cli_common *common;
  const char *name; /* RESOURCE, or --all's list (for messages) */
  size_t len;
  /* --all: the names of the list, taken all or nothing (rt_wait_all) */
  const char *all;
  const void **names;
  size_t *lens;
  size_t nnames;
  rt_multi_t *multi; /* while waiting for and holding them */
  int64_t ttl_ms;
  rt_request_t req;  /* a mutex, or --shared, --exclusive, --permits */
  long permits_arg;  /* --permits K: K + 1; 0 if not given */
  long of_arg;       /* --of N; 0 if not given */
  int64_t wait_ms;   /* RT_FOREVER, 0 (try once) or a timeout */
  int64_t grace_ms;  /* SIGTERM to SIGKILL */
  int conflict_code; /* -E: busy lock, or the wait timed out */
  int renew;
  int progress; /* show the queue position on stderr */
  char **cmd;
  char *shell[4]; /* -c STRING: sh -c STRING */
  char **env;

  rt_client_t *client;
  rt_lock_t *lock;
  int state;
  int exit_code;
  int signo; /* the first fatal signal redturn got, 0 if none */
  int lost;

  uv_signal_t sigs[MAX_SIGNALS];
  int nsigs;
  uv_signal_t sigchld;
  uv_timer_t tick;       /* progress while waiting */
  uv_timer_t kill_timer; /* SIGKILL once --grace is over */
  uv_timer_t bound;      /* EXIT_BOUND_MS */
  cli_child child;

  /* A first connect lost to a transient failure is made again within the
   * wait budget, counted from the start. */
  rt_options_t opts;
  uv_timer_t retry;
  uint64_t start_ms;
  int64_t retry_ms; /* the next backoff */
  int retries;

  char label[RT_LABEL_MAX + 1]; /* the default label, HOST:PID */

  /* progress display */
  uint64_t wait_start;
  int shown;      /* a progress line is on stderr now */
  int ever_shown; /* one was shown at some point */
  int asking;     /* rt_inspect in flight */
  uint64_t asked_at;
  size_t hint; /* how many waiters to list to find ourselves */
  int have_info;
  long ahead; /* requests ahead of ours, -1: more than hint */
  int has_holder;
  char holder_label[RT_LABEL_MAX + 1];
  int64_t held_ms;
  int64_t lease_left_ms;
  uint64_t info_at;
} run_t;

/* run_hold.c */
void run_clear_progress(run_t *r);
void run_say(run_t *r, const char *before, const char *after);
void run_draw(run_t *r);
void run_finish(run_t *r, int code);
void run_on_all_released(rt_multi_t *multi, int status, void *data);
void run_release(run_t *r);
void run_stop_command(run_t *r, const char *before, const char *why);
void run_on_sigchld(uv_signal_t *h, int signo);
void run_start_command(run_t *r);

/* run_wait.c */
void run_on_connected(rt_client_t *c, int status, void *data);

/* run_args.c */
int run_parse(run_t *r, cli_common *common, int argc, char **argv, int *help);

#endif /* RT_CLI_RUN_H */
