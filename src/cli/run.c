/* redturn run: wait for the lock, run a command while holding it (renewing
 * the lease), release it when the command exits, exit with its status.
 * The client, the command's keeper process (child.c), signals and timers
 * share one libuv loop.
 *
 * The command never outlives the lock: a lost lock (the library's lost
 * callback: eviction notice, a renewal refused, or the lease's local
 * deadline passed without one) or any fatal signal to redturn stops it,
 * and should redturn die anyway, even of SIGKILL, the keeper kills the
 * command's group. */
#define _GNU_SOURCE /* sigabbrev_np */
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

/* Signals whose default action ends redturn, besides SIGRTMIN..SIGRTMAX.
 * The ones a fault raises in redturn itself (SIGSEGV, SIGBUS, ...) are
 * left alone: the keeper handles redturn's death. */
static const int fatal_signals[] = {
    SIGHUP,  SIGINT,  SIGQUIT,   SIGPIPE, SIGALRM, SIGTERM,   SIGUSR1, SIGUSR2,
    SIGPOLL, SIGPROF, SIGVTALRM, SIGXCPU, SIGXFSZ, SIGSTKFLT, SIGPWR};
#define NFATAL (sizeof(fatal_signals) / sizeof(fatal_signals[0]))
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
  int64_t wait_ms;   /* RT_FOREVER, 0 (try once) or a deadline */
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
  int64_t lease_ms;
  uint64_t info_at;
} run_t;

/* ---- messages ------------------------------------------------------------ */

static void clear_progress(run_t *r) {
  if (r->shown) {
    fputs("\r\033[K", stderr);
    r->shown = 0;
  }
}

/* "redturn run: <before>"<name>"<after>\n" on stderr. */
static void say(run_t *r, const char *before, const char *after) {
  clear_progress(r);
  fprintf(stderr, "redturn run: %s", before);
  cli_put_name(stderr, r->name, r->len);
  fprintf(stderr, "%s\n", after);
}

static void draw(run_t *r) {
  char *line = NULL;
  size_t size = 0;
  char held[32], waited[32];
  uint64_t now = cli_now_ms();
  FILE *f = open_memstream(&line, &size);
  if (f == NULL)
    return;
  fputs("\r\033[Kredturn: waiting for ", f);
  cli_put_name(f, r->name, r->len);
  long ahead = r->have_info ? r->ahead : (long)rt_lock_position(r->lock);
  if (ahead < 0)
    fprintf(f, ": more than %zu ahead", r->hint);
  else
    fprintf(f, ": %ld ahead", ahead);
  if (r->have_info && r->has_holder) {
    int64_t since = (int64_t)(now - r->info_at);
    cli_fmt_ms(held, sizeof(held), r->held_ms + since);
    fputs(", holder ", f);
    if (r->holder_label[0] != '\0') {
      cli_put_text(f, r->holder_label, strlen(r->holder_label));
      fputc(' ', f);
    }
    fprintf(f, "has held it %s", held);
    if (r->lease_ms - since <= 0)
      fputs(" (lease over)", f);
  }
  cli_fmt_ms(waited, sizeof(waited), (int64_t)(now - r->wait_start));
  fprintf(f, ", waited %s", waited);
  fclose(f);
  fputs(line, stderr);
  free(line);
  r->shown = r->ever_shown = 1;
}

/* ---- the end ------------------------------------------------------------- */

static void on_bound(uv_timer_t *t) {
  run_t *r = t->data;
  clear_progress(r);
  fprintf(stderr,
          "redturn run: Redis did not answer within %d s; exiting without "
          "it (a lease left behind ends by itself)\n",
          EXIT_BOUND_MS / 1000);
  fflush(NULL);
  _exit(r->exit_code);
}

static void start_bound(run_t *r) {
  if (!uv_is_active((uv_handle_t *)&r->bound))
    uv_timer_start(&r->bound, on_bound, EXIT_BOUND_MS, 0);
}

static void on_closed(rt_client_t *c, void *data) {
  run_t *r = data;
  (void)c;
  uv_close((uv_handle_t *)&r->bound, NULL);
}

static void finish(run_t *r, int code) {
  if (r->state == S_DONE)
    return;
  r->state = S_DONE;
  r->exit_code = code;
  clear_progress(r);
  uv_close((uv_handle_t *)&r->retry, NULL);
  for (int i = 0; i < r->nsigs; i++)
    uv_close((uv_handle_t *)&r->sigs[i], NULL);
  signal(SIGPIPE, SIG_IGN); /* libuv put the default back */
  uv_close((uv_handle_t *)&r->sigchld, NULL);
  uv_close((uv_handle_t *)&r->tick, NULL);
  uv_close((uv_handle_t *)&r->kill_timer, NULL);
  /* Cancels a wait, releases a lock still held, then closes. */
  if (r->client != NULL) {
    start_bound(r);
    rt_client_close(r->client, on_closed, r);
  } else {
    uv_close((uv_handle_t *)&r->bound, NULL);
  }
}

static void released(run_t *r, int status) {
  r->lock = NULL;
  r->multi = NULL;
  if (status == RT_ELOST && !r->lost) {
    say(r, "lost the lock on ",
        " before the command finished (lease over, or evicted)");
    r->exit_code = CLI_LOST;
  } else if (status != 0 && status != RT_ELOST) {
    char msg[600], why[512];
    snprintf(msg, sizeof(msg), " failed: %s (its lease ends by itself)",
             cli_why(r->client, status, why, sizeof(why)));
    say(r, "releasing ", msg);
  }
  finish(r, r->exit_code);
}

static void on_released(rt_lock_t *lock, int status, void *data) {
  (void)lock;
  released(data, status);
}

static void on_all_released(rt_multi_t *multi, int status, void *data) {
  (void)multi;
  released(data, status);
}

static void release(run_t *r) {
  r->state = S_RELEASING;
  start_bound(r);
  int err = r->multi != NULL ? rt_signal_all(r->multi, on_all_released, r)
                             : rt_signal(r->lock, on_released, r);
  if (err != 0) {
    char msg[160];
    snprintf(msg, sizeof(msg), " failed: %s", rt_strerror(err));
    say(r, "releasing ", msg);
    finish(r, r->exit_code);
  }
}

/* ---- holding: the command, renewal, loss --------------------------------- */

static void on_kill_timer(uv_timer_t *t) {
  run_t *r = t->data;
  cli_child_kill(&r->child, SIGKILL);
}

/* SIGTERM to the command's group now, SIGKILL after --grace; says so as
 * "<before>"<name>"<why>; stopping the command (...)". */
static void stop_command(run_t *r, const char *before, const char *why) {
  char grace[32], msg[256];
  cli_fmt_ms(grace, sizeof(grace), r->grace_ms);
  snprintf(msg, sizeof(msg),
           "%s; stopping the command (SIGTERM now, SIGKILL in %s)", why, grace);
  say(r, before, msg);
  cli_child_kill(&r->child, SIGTERM);
  cli_child_kill(&r->child, SIGCONT); /* a stopped process must see it */
  uv_timer_start(&r->kill_timer, on_kill_timer, (uint64_t)r->grace_ms, 0);
}

static void lose(run_t *r, const char *why) {
  if (r->lost || r->state != S_RUNNING)
    return;
  r->lost = 1;
  stop_command(r, "lost the lock on ", why);
}

static void on_lost(rt_lock_t *lock, void *data) {
  (void)lock;
  lose(data, ": evicted, or the lease ran out before a renewal got through");
}

static void on_sigchld(uv_signal_t *h, int signo) {
  run_t *r = h->data;
  int code;
  (void)signo;
  if (r->state != S_RUNNING || !cli_child_reap(&r->child, &code))
    return;
  uv_timer_stop(&r->kill_timer);
  r->exit_code = r->lost    ? CLI_LOST
                 : r->signo ? CLI_SIGNAL_BASE + r->signo
                            : code;
  release(r);
}

/* The locks held: one, or each of --all's in the list's order. */
static size_t nheld(const run_t *r) { return r->multi != NULL ? r->nnames : 1; }

static rt_lock_t *held(const run_t *r, size_t i) {
  return r->multi != NULL ? rt_multi_lock(r->multi, i) : r->lock;
}

/* "NAME=v1,v2,..." over the locks held: their fences or request ids. */
static char *env_list(const run_t *r, const char *name, int fences) {
  char *s = NULL;
  size_t size = 0;
  FILE *f = open_memstream(&s, &size);
  if (f == NULL)
    return NULL;
  fputs(name, f);
  for (size_t i = 0; i < nheld(r); i++) {
    rt_lock_t *l = held(r, i);
    if (fences)
      fprintf(f, "%s%llu", i ? "," : "", (unsigned long long)rt_lock_fence(l));
    else
      fprintf(f, "%s%s", i ? "," : "", rt_lock_id(l));
  }
  if (fclose(f) != 0) {
    free(s);
    return NULL;
  }
  return s;
}

/* The environment with REDTURN_FENCE, REDTURN_RESOURCE and REDTURN_HOLDER
 * (with --all: comma-separated, in the list's order) in place of any
 * inherited ones; its last three strings are ours to free. */
static char **make_env(run_t *r) {
  static const char *const ours[] = {
      "REDTURN_FENCE=", "REDTURN_RESOURCE=", "REDTURN_HOLDER="};
  size_t n = 0, k = 0;
  while (environ[n] != NULL)
    n++;
  char **env = calloc(n + 4, sizeof(*env));
  char *fence = env_list(r, ours[0], 1), *holder = env_list(r, ours[2], 0);
  char *res = malloc(strlen(ours[1]) + r->len + 1);
  if (env == NULL || fence == NULL || holder == NULL || res == NULL) {
    free(env);
    free(fence);
    free(holder);
    free(res);
    return NULL;
  }
  for (size_t i = 0; i < n; i++) {
    int skip = 0;
    for (size_t j = 0; j < 3; j++)
      skip |= strncmp(environ[i], ours[j], strlen(ours[j])) == 0;
    if (!skip)
      env[k++] = environ[i];
  }
  sprintf(res, "%s%.*s", ours[1], (int)r->len, r->name);
  env[k++] = fence;
  env[k++] = res;
  env[k++] = holder;
  env[k] = NULL;
  return env;
}

/* Renew every lock held and watch each for loss; 0 or a library error. */
static int watch_held(run_t *r) {
  for (size_t i = 0; i < nheld(r); i++) {
    rt_lock_t *l = held(r, i);
    rt_lock_set_data(l, r); /* a multi-lock's locks carry its own */
    rt_lock_on_lost(l, on_lost);
    /* The library's renewal: every third of the TTL; the lost callback
     * if Redis refuses one or none gets through before the lease ends. */
    int err = r->renew ? rt_lock_auto_renew(l, RT_RENEW_DEFAULT) : 0;
    if (err != 0)
      return err;
  }
  return 0;
}

static void start_command(run_t *r) {
  r->env = make_env(r);
  if (r->env == NULL) {
    say(r, "out of memory starting the command for ", "");
    r->exit_code = CLI_OSERR;
    release(r);
    return;
  }
  r->state = S_RUNNING;
  int err = watch_held(r);
  if (err != 0) {
    char msg[160];
    snprintf(msg, sizeof(msg), ": %s", rt_strerror(err));
    say(r, "cannot renew the lease on ", msg);
    r->exit_code = cli_exit_for(err);
    release(r);
    return;
  }
  err = cli_child_start(&r->child, r->cmd, r->env);
  if (err != 0) {
    clear_progress(r);
    fprintf(stderr, "redturn run: cannot run '%.64s': %s\n", r->cmd[0],
            strerror(err));
    if (r->child.pid == 0) {
      r->exit_code = CLI_OSERR;
      release(r);
    }
    return; /* the keeper exits 126 or 127 */
  }
}

/* ---- waiting ------------------------------------------------------------- */

/* The wait (or the try) ended with status, not 0: say why and exit. */
static void wait_failed(run_t *r, int status) {
  char msg[160];
  r->lock = NULL;
  r->multi = NULL;
  if (r->signo != 0 && status == RT_ECANCELED) {
    finish(r, CLI_SIGNAL_BASE + r->signo);
  } else if (status == RT_EDEADLINE) {
    cli_fmt_ms(msg, sizeof(msg), r->wait_ms);
    char after[200];
    snprintf(after, sizeof(after), " after %s (-w/--timeout)", msg);
    say(r, "gave up waiting for ", after);
    finish(r, r->conflict_code);
  } else if (status == RT_EBUSY) {
    say(r, "", " is locked (not waiting: -n, or a timeout of 0)");
    finish(r, r->conflict_code);
  } else {
    char why[512], after[600];
    snprintf(after, sizeof(after), " failed: %s",
             cli_why(r->client, status, why, sizeof(why)));
    say(r, "waiting for ", after);
    finish(r, cli_exit_for(status));
  }
}

/* Everything is held (r->lock or r->multi): run the command. */
static void acquired(run_t *r) {
  if (r->signo != 0) {
    /* A signal came while a try-lock was in flight. */
    r->exit_code = CLI_SIGNAL_BASE + r->signo;
    release(r);
    return;
  }
  if (r->ever_shown) {
    char waited[32], after[96];
    cli_fmt_ms(waited, sizeof(waited), (int64_t)(cli_now_ms() - r->wait_start));
    snprintf(after, sizeof(after), " (fence %llu) after %s",
             (unsigned long long)rt_lock_fence(r->lock), waited);
    fprintf(stderr, "redturn: acquired ");
    cli_put_name(stderr, r->name, r->len);
    fprintf(stderr, "%s\n", after);
  }
  start_command(r);
}

static void on_all_granted(rt_multi_t *multi, int status, void *data) {
  run_t *r = data;
  if (r->state != S_WAITING) {
    /* Closing: the client gives the locks back (RT_ECLOSED frees the
     * handle; after a failure the library frees it). */
    if (status == 0)
      rt_signal_all(multi, on_all_released, r);
    return;
  }
  if (status != 0) {
    wait_failed(r, status);
    return;
  }
  r->multi = multi;
  acquired(r);
}

static void on_granted(rt_lock_t *lock, int status, void *data) {
  run_t *r = data;
  uv_timer_stop(&r->tick);
  clear_progress(r);
  if (r->state != S_WAITING)
    return; /* closing: the client's close cleans up */
  if (status != 0) {
    wait_failed(r, status);
    return;
  }
  r->lock = lock;
  acquired(r);
}

static void on_info(rt_client_t *c, int status, const rt_queue_info_t *info,
                    void *data) {
  run_t *r = data;
  (void)c;
  r->asking = 0;
  if (r->state != S_WAITING || r->lock == NULL || status != 0)
    return;
  const char *me = rt_lock_id(r->lock);
  long ahead = -1;
  if (info->holder != NULL && strcmp(info->holder, me) == 0)
    ahead = 0;
  for (size_t i = 0; ahead < 0 && i < info->nwaiters; i++)
    if (strcmp(info->waiters[i], me) == 0)
      ahead = (long)i + 1;
  if (ahead < 0 && r->hint < MAX_HINT)
    r->hint *= 2;
  r->ahead = ahead;
  r->has_holder = info->holder != NULL;
  snprintf(r->holder_label, sizeof(r->holder_label), "%s",
           info->holder != NULL ? info->holder_label : "");
  r->held_ms = info->held_ms;
  r->lease_ms = info->lease_ms;
  r->info_at = cli_now_ms();
  r->have_info = 1;
  draw(r);
}

static void on_tick_waiting(uv_timer_t *t) {
  run_t *r = t->data;
  if (r->state != S_WAITING || r->lock == NULL)
    return;
  uint64_t now = cli_now_ms();
  if (!r->asking && (!r->have_info || now - r->asked_at >= ASK_EVERY_MS)) {
    if (r->hint == 0)
      r->hint = rt_lock_position(r->lock) + 16;
    if (rt_inspect(r->client, r->name, r->len, r->hint, on_info, r) == 0) {
      r->asking = 1;
      r->asked_at = now;
    }
  }
  draw(r);
}

static void on_connected(rt_client_t *c, int status, void *data);

/* The wait budget left (RT_FOREVER, or ms; 0: none). */
static int64_t budget_left(const run_t *r) {
  if (r->wait_ms == RT_FOREVER)
    return RT_FOREVER;
  int64_t used = (int64_t)(cli_now_ms() - r->start_ms);
  return r->wait_ms > used ? r->wait_ms - used : 0;
}

static void connect_again(uv_timer_t *t) {
  run_t *r = t->data;
  if (r->state != S_CONNECTING)
    return;
  int err = rt_client_open(&r->loop, &r->opts, on_connected, r, &r->client);
  if (err != 0) {
    r->client = NULL;
    finish(r, cli_options_error("redturn run", r->common, err));
  }
}

/* The failed client closed: connect again after the backoff (50 ms
 * doubling to 1 s). */
static void on_failed_closed(rt_client_t *c, void *data) {
  run_t *r = data;
  (void)c;
  if (r->state == S_CONNECTING)
    uv_timer_start(&r->retry, connect_again, (uint64_t)r->retry_ms, 0);
}

/* A failure of the first connect that the next one may not meet: the
 * server was reached and the connection lost (a CLIENT KILL, a restart),
 * or it did not answer in time. A refused connection, a bad password or
 * a wrong server are no reason to wait. */
static int transient(int status) {
  return status == RT_EDISCONNECTED || status == RT_ETIMEDOUT;
}

static void on_connected(rt_client_t *c, int status, void *data) {
  run_t *r = data;
  int err;
  if (r->state != S_CONNECTING)
    return;
  if (status != 0) {
    int64_t left = budget_left(r);
    int64_t next = r->retries == 0 ? 50 : r->retry_ms * 2;
    if (transient(status) && (left == RT_FOREVER || left > next)) {
      /* Within the wait budget, as flock: a transient failure is no reason
       * to give up. */
      r->retries++;
      r->retry_ms = next > 1000 ? 1000 : next;
      r->client = NULL;
      rt_client_close(c, on_failed_closed, r);
      return;
    }
    clear_progress(r);
    finish(r, cli_connect_error("redturn run", r->common, c, status));
    return;
  }
  r->state = S_WAITING;
  r->wait_start = cli_now_ms();
  int64_t wait_ms = r->wait_ms;
  if (r->retries > 0 && wait_ms > 0) {
    /* The connects took part of the budget. */
    wait_ms = budget_left(r);
    if (wait_ms < 1)
      wait_ms = 1;
  }
  if (r->nnames > 0) {
    err = rt_wait_all(c, r->names, r->lens, r->nnames, r->ttl_ms, wait_ms,
                      on_all_granted, r, &r->multi);
  } else if (r->wait_ms == 0) {
    err = rt_try_lock_ex(c, r->name, r->len, &r->req, r->ttl_ms, on_granted, r);
  } else {
    err = rt_wait_ex(c, r->name, r->len, &r->req, r->ttl_ms, wait_ms,
                     on_granted, r, &r->lock);
    if (err == 0 && r->progress)
      uv_timer_start(&r->tick, on_tick_waiting, DRAW_EVERY_MS, DRAW_EVERY_MS);
  }
  if (err != 0) {
    char msg[160];
    snprintf(msg, sizeof(msg), ": %s", rt_strerror(err));
    say(r, "cannot wait for ", msg);
    finish(r, cli_exit_for(err));
  }
}

static const char *signal_name(int signo) {
  static char buf[16];
  const char *abbrev = sigabbrev_np(signo);
  if (abbrev != NULL)
    snprintf(buf, sizeof(buf), "SIG%s", abbrev);
  else
    snprintf(buf, sizeof(buf), "signal %d", signo);
  return buf;
}

static void on_signal(uv_signal_t *h, int signo) {
  run_t *r = h->data;
  char why[48];
  switch (r->state) {
  case S_CONNECTING:
    finish(r, CLI_SIGNAL_BASE + signo);
    break;
  case S_WAITING:
    if (r->signo != 0) {
      /* Canceling hangs (Redis unreachable?): leave now; the entry is
       * skipped once our connection is gone. */
      clear_progress(r);
      fprintf(stderr, "redturn run: interrupted again, exiting\n");
      _exit(CLI_SIGNAL_BASE + signo);
    }
    r->signo = signo;
    if (r->multi != NULL)
      rt_cancel_all(r->multi); /* on_all_granted gets RT_ECANCELED */
    else if (r->lock != NULL)
      rt_cancel(r->lock); /* on_granted gets RT_ECANCELED */
    break;
  case S_RUNNING:
    if (r->signo != 0 || r->lost) {
      cli_child_kill(&r->child, SIGKILL); /* asked again: no more grace */
      break;
    }
    r->signo = signo;
    snprintf(why, sizeof(why), "got %s while holding ", signal_name(signo));
    stop_command(r, why, "");
    break;
  case S_RELEASING:
    if (r->signo != 0) {
      clear_progress(r);
      fprintf(stderr, "redturn run: interrupted again, exiting\n");
      _exit(CLI_SIGNAL_BASE + r->signo);
    }
    r->signo = signo;
    r->exit_code = CLI_SIGNAL_BASE + signo;
    break;
  default:
    break;
  }
}

/* ---- arguments ----------------------------------------------------------- */

enum {
  OPT_TTL = 1,
  OPT_WAIT,
  OPT_NONBLOCK,
  OPT_CONFLICT,
  OPT_COMMAND,
  OPT_NO_RENEW,
  OPT_GRACE,
  OPT_QUIET,
  OPT_LABEL,
  OPT_SHARED,
  OPT_EXCLUSIVE,
  OPT_PERMITS,
  OPT_OF,
  OPT_ELECT,
  OPT_ALL
};

/* --shared, --exclusive into r->req; --permits K and --of N noted. */
static int parse_kind(run_t *r, int id, const char *val) {
  const char *cmd = "redturn run";
  long num;
  rt_kind_t kind = id == OPT_SHARED      ? RT_KIND_SHARED
                   : id == OPT_EXCLUSIVE ? RT_KIND_EXCLUSIVE
                   : id == OPT_ELECT     ? RT_KIND_ELECTION
                                         : RT_KIND_SEMAPHORE;
  if (r->req.kind != RT_KIND_MUTEX && r->req.kind != kind)
    return cli_usage_error(cmd, "give one of -s/--shared, -x/--exclusive, "
                                "--permits/--of and --elect");
  r->req.kind = kind;
  if (id == OPT_ELECT) {
    /* The library refuses the same, without naming the option. */
    size_t len = strlen(val);
    if (len > RT_VALUE_MAX)
      return cli_usage_error(cmd, "--elect VALUE is longer than %d bytes",
                             RT_VALUE_MAX);
    for (size_t i = 0; i < len; i++)
      if (val[i] < 0x20 || val[i] > 0x7e)
        return cli_usage_error(cmd,
                               "--elect VALUE: byte %zu (0x%02x) is not "
                               "printable ASCII",
                               i, (unsigned)(unsigned char)val[i]);
    r->req.value = val;
    r->req.value_len = len;
    return 0;
  }
  if (id == OPT_PERMITS || id == OPT_OF) {
    if (cli_parse_count(val, RT_PERMITS_MAX, &num) != 0)
      return cli_usage_error(cmd, "--permits and --of take a number from 0 "
                                  "to 1000000000");
    if (id == OPT_OF)
      r->of_arg = num;
    else
      r->permits_arg = num + 1;
  }
  return 0;
}

/* A semaphore's --permits K --of N, checked together. */
static int check_permits(run_t *r) {
  const char *cmd = "redturn run";
  if (r->of_arg < 1)
    return cli_usage_error(cmd, "--permits needs --of N (N >= 1: the "
                                "semaphore's permits)");
  if (r->permits_arg - 1 > r->of_arg)
    return cli_usage_error(cmd, "--permits K must not exceed --of N");
  /* --of alone: one permit */
  r->req.permits = r->permits_arg == 0 ? 1 : (uint32_t)(r->permits_arg - 1);
  r->req.of = (uint32_t)r->of_arg;
  return 0;
}

/* One option of run (not a common one); 0 or an exit code. */
static int run_option(run_t *r, cli_common *common, int id, const char *val,
                      int *quiet, const char **shell_cmd) {
  const char *cmd = "redturn run";
  long num;
  switch (id) {
  case OPT_NO_RENEW:
    r->renew = 0;
    break;
  case OPT_QUIET:
    *quiet = 1;
    break;
  case OPT_NONBLOCK:
    r->wait_ms = 0;
    break;
  case OPT_COMMAND:
    *shell_cmd = val;
    break;
  case OPT_LABEL:
    common->label = val; /* the library checks it */
    break;
  case OPT_ALL:
    r->all = val;
    break;
  case OPT_SHARED:
  case OPT_EXCLUSIVE:
  case OPT_PERMITS:
  case OPT_OF:
  case OPT_ELECT:
    return parse_kind(r, id, val);
  case OPT_CONFLICT:
    if (cli_parse_count(val, 255, &num) != 0)
      return cli_usage_error(cmd, "-E/--conflict-exit-code must be a "
                                  "number from 0 to 255");
    r->conflict_code = (int)num;
    break;
  case OPT_TTL:
    if (cli_duration_opt(cmd, "--ttl", val, &r->ttl_ms) != 0)
      return CLI_USAGE;
    if (r->ttl_ms < TTL_MIN_MS || r->ttl_ms > RT_TTL_MAX)
      return cli_usage_error(cmd, "--ttl must be between 1s and 24h (it "
                                  "is renewed every third of it)");
    break;
  case OPT_WAIT:
    if (cli_duration_opt(cmd, "-w/--timeout", val, &r->wait_ms) != 0)
      return CLI_USAGE;
    break;
  default:
    if (cli_duration_opt(cmd, "--grace", val, &r->grace_ms) != 0)
      return CLI_USAGE;
    break;
  }
  return 0;
}

/* "'<name>'" in a usage message, cut as messages cut names. */
static int all_error(const char *what, const char *name, size_t len,
                     const char *why) {
  fprintf(stderr, "redturn run: %s", what);
  cli_put_name(stderr, name, len);
  fprintf(stderr, "%s (see 'redturn run --help')\n", why);
  return CLI_USAGE;
}

/* --all A,B,C into r->names: each name once, none empty; mutexes only,
 * as rt_wait_all takes them. */
static int split_all(run_t *r) {
  const char *cmd = "redturn run";
  if (r->name != NULL)
    return cli_usage_error(cmd, "give either RESOURCE or --all LIST, not both");
  if (r->req.kind != RT_KIND_MUTEX)
    return cli_usage_error(cmd, "--all takes mutexes only: -s, -x, --permits "
                                "and --elect take one RESOURCE");
  if (r->wait_ms == 0)
    return cli_usage_error(cmd, "--all waits for each in turn: use -w "
                                "DURATION instead of -n or a timeout of 0");
  size_t n = 1;
  for (const char *p = r->all; *p != '\0'; p++)
    n += *p == ',';
  if (n > RT_MULTI_MAX)
    return cli_usage_error(cmd, "--all takes at most %d resources",
                           RT_MULTI_MAX);
  r->names = calloc(n, sizeof(*r->names));
  r->lens = calloc(n, sizeof(*r->lens));
  if (r->names == NULL || r->lens == NULL)
    return CLI_OSERR;
  for (const char *p = r->all;; p++) {
    size_t len = strcspn(p, ",");
    if (len == 0)
      return all_error("--all ", r->all, strlen(r->all),
                       " has an empty resource name");
    for (size_t i = 0; i < r->nnames; i++)
      if (r->lens[i] == len && memcmp(r->names[i], p, len) == 0)
        return all_error("--all names ", p, len, " twice");
    r->names[r->nnames] = p;
    r->lens[r->nnames++] = len;
    p += len;
    if (*p == '\0')
      break;
  }
  r->name = r->all;
  return 0;
}

/* The command line checked as a whole: a resource and one command. */
static int parse_check(run_t *r, const char *shell_cmd, int quiet) {
  const char *cmd = "redturn run";
  int code = r->all != NULL ? split_all(r) : 0;
  if (code != 0)
    return code;
  if (r->name == NULL)
    return cli_usage_error(cmd, "missing RESOURCE (or --all LIST)");
  if (r->name[0] == '\0')
    return cli_usage_error(cmd, "RESOURCE is empty");
  if (shell_cmd != NULL && r->cmd != NULL)
    return cli_usage_error(cmd, "give either -c STRING or a COMMAND, not both");
  if (shell_cmd != NULL) {
    /* Always /bin/sh (flock uses $SHELL): the same string means the same
     * thing for every user. */
    r->shell[0] = "/bin/sh";
    r->shell[1] = "-c";
    r->shell[2] = (char *)shell_cmd;
    r->cmd = r->shell;
  }
  if (r->cmd == NULL)
    return cli_usage_error(cmd, "missing COMMAND (or -c STRING)");
  if (r->req.kind == RT_KIND_SEMAPHORE && check_permits(r) != 0)
    return CLI_USAGE;
  r->len = strlen(r->name);
  /* The progress display reads one mutex's queue. */
  r->progress = !quiet && isatty(STDERR_FILENO) &&
                r->req.kind == RT_KIND_MUTEX && r->nnames == 0;
  return 0;
}

static int parse(run_t *r, cli_common *common, int argc, char **argv,
                 int *help) {
  static const cli_opt opts[] = {{"ttl", 0, 1, OPT_TTL},
                                 {"timeout", 'w', 1, OPT_WAIT},
                                 {"wait-timeout", 0, 1, OPT_WAIT},
                                 {"nonblock", 'n', 0, OPT_NONBLOCK},
                                 {"conflict-exit-code", 'E', 1, OPT_CONFLICT},
                                 {"command", 'c', 1, OPT_COMMAND},
                                 {"no-renew", 0, 0, OPT_NO_RENEW},
                                 {"grace", 0, 1, OPT_GRACE},
                                 {"quiet", 'q', 0, OPT_QUIET},
                                 {"label", 0, 1, OPT_LABEL},
                                 {"shared", 's', 0, OPT_SHARED},
                                 {"exclusive", 'x', 0, OPT_EXCLUSIVE},
                                 {"permits", 0, 1, OPT_PERMITS},
                                 {"of", 0, 1, OPT_OF},
                                 {"elect", 0, 1, OPT_ELECT},
                                 {"all", 0, 1, OPT_ALL},
                                 {NULL, 0, 0, 0}};
  const char *shell_cmd = NULL, *val;
  cli_args a;
  int id, quiet = 0;

  cli_args_init(&a, argc, argv, "redturn run");
  for (;;) {
    int kind = cli_next(&a, opts, &id, &val);
    if (kind == CLI_ARG_ERR)
      return CLI_USAGE;
    if (kind == CLI_ARG_END)
      break;
    if (kind == CLI_ARG_POS) {
      if (r->name == NULL && r->all == NULL) {
        r->name = val;
        continue;
      }
      r->cmd = a.argv + a.i - 1; /* the command and everything after */
      break;
    }
    if (cli_common_opt(common, id, val, help))
      continue;
    int code = run_option(r, common, id, val, &quiet, &shell_cmd);
    if (code != 0)
      return code;
  }
  return *help ? 0 : parse_check(r, shell_cmd, quiet);
}

/* The default label: "<host name>:<pid>", the host name cut to fit
 * RT_LABEL_MAX and anything but printable ASCII in it made '?'. */
static void default_label(run_t *r) {
  char host[256] = "", pid[24];
  int n = snprintf(pid, sizeof(pid), ":%ld", (long)getpid());
  if (gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0')
    snprintf(host, sizeof(host), "localhost");
  host[RT_LABEL_MAX - n] = '\0';
  for (char *p = host; *p != '\0'; p++)
    if (*p < 0x20 || *p > 0x7e)
      *p = '?';
  size_t len = strlen(host);
  memcpy(r->label, host, len);
  memcpy(r->label + len, pid, (size_t)n + 1);
}

static void start_signals(run_t *r) {
  int signos[MAX_SIGNALS], n = 0;
  for (size_t i = 0; i < NFATAL; i++)
    signos[n++] = fatal_signals[i];
  for (int s = SIGRTMIN; s <= SIGRTMAX && n < MAX_SIGNALS; s++)
    signos[n++] = s;
  for (int i = 0; i < n; i++) {
    uv_signal_init(&r->loop, &r->sigs[i]);
    r->sigs[i].data = r;
    uv_signal_start(&r->sigs[i], on_signal, signos[i]);
  }
  r->nsigs = n;
  uv_signal_init(&r->loop, &r->sigchld);
  r->sigchld.data = r;
  uv_signal_start(&r->sigchld, on_sigchld, SIGCHLD);
}

int cli_run(cli_common *common, int argc, char **argv) {
  run_t r;
  int help = 0;
  memset(&r, 0, sizeof(r));
  r.common = common;
  r.ttl_ms = 30000;
  r.wait_ms = RT_FOREVER;
  r.grace_ms = 5000;
  r.conflict_code = CLI_REFUSED;
  r.renew = 1;
  int code = parse(&r, common, argc, argv, &help);
  if (code != 0) {
    free(r.names);
    free(r.lens);
    return code;
  }
  if (help) {
    cli_help_run(stdout);
    return CLI_OK;
  }
  if (common->label == NULL) {
    default_label(&r);
    common->label = r.label;
  }

  if (uv_loop_init(&r.loop) != 0) {
    fprintf(stderr, "redturn run: cannot create an event loop\n");
    return CLI_OSERR;
  }
  /* Once the command's group has the terminal, redturn is in the
   * background: its messages must not stop it (stty tostop), nor must
   * taking the terminal back. */
  signal(SIGTTOU, SIG_IGN);
  start_signals(&r);
  uv_timer_init(&r.loop, &r.tick);
  uv_timer_init(&r.loop, &r.kill_timer);
  uv_timer_init(&r.loop, &r.bound);
  uv_timer_init(&r.loop, &r.retry);
  r.tick.data = r.kill_timer.data = r.bound.data = r.retry.data = &r;

  cli_options(common, &r.opts);
  r.opts.default_ttl_ms = r.ttl_ms;
  r.start_ms = cli_now_ms();
  int err = rt_client_open(&r.loop, &r.opts, on_connected, &r, &r.client);
  if (err != 0) {
    r.client = NULL;
    finish(&r, cli_options_error("redturn run", common, err));
  }
  uv_run(&r.loop, UV_RUN_DEFAULT);
  uv_loop_close(&r.loop);
  if (r.env != NULL) {
    size_t n = 0;
    while (r.env[n] != NULL)
      n++;
    for (size_t i = n - 3; i < n; i++)
      free(r.env[i]); /* our three strings */
    free(r.env);
  }
  free(r.names);
  free(r.lens);
  return r.exit_code;
}
