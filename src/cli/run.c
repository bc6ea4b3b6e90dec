/* redturn run: wait for the lock, run a command while holding it (renewing
 * the lease), release it when the command exits, exit with its status.
 * The client, the child process, signals and timers share one libuv loop. */
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

typedef struct run {
  uv_loop_t loop;
  const cli_common *common;
  const char *name;
  size_t len;
  int64_t ttl_ms;
  int64_t wait_ms; /* RT_FOREVER, 0 (try once) or a deadline */
  int64_t grace_ms;
  int renew;
  int progress; /* show the queue position on stderr */
  char **cmd;
  char **env;

  rt_client_t *client;
  rt_lock_t *lock;
  int state;
  int exit_code;
  int signo; /* the signal that ends the wait */

  uv_signal_t sigs[3];
  uv_timer_t tick; /* progress while waiting; renew or check while running */
  uv_timer_t kill_timer;
  uv_process_t proc;
  int proc_init;
  int child_running;
  int lost;
  int op_busy;        /* an extend or owned query is in flight */
  int release_due;    /* release once it is answered */
  uint64_t op_sent;   /* when it was sent (cli_now_ms) */
  uint64_t lease_end; /* our lease surely ends after this (cli_now_ms) */

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
  int64_t held_ms;
  int64_t lease_ms;
  uint64_t info_at;
} run_t;

static const int signals[3] = {SIGINT, SIGTERM, SIGHUP};

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
  cli_put_text(stderr, r->name, r->len);
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
  cli_put_text(f, r->name, r->len);
  long ahead = r->have_info ? r->ahead : (long)rt_lock_position(r->lock);
  if (ahead < 0)
    fprintf(f, ": more than %zu ahead", r->hint);
  else
    fprintf(f, ": %ld ahead", ahead);
  if (r->have_info && r->has_holder) {
    int64_t since = (int64_t)(now - r->info_at);
    cli_fmt_ms(held, sizeof(held), r->held_ms + since);
    fprintf(f, ", holder has held it %s", held);
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

static void finish(run_t *r, int code) {
  if (r->state == S_DONE)
    return;
  r->state = S_DONE;
  r->exit_code = code;
  clear_progress(r);
  for (int i = 0; i < 3; i++)
    uv_close((uv_handle_t *)&r->sigs[i], NULL);
  uv_close((uv_handle_t *)&r->tick, NULL);
  uv_close((uv_handle_t *)&r->kill_timer, NULL);
  /* Cancels a wait, releases a lock still held, then closes. */
  if (r->client != NULL)
    rt_client_close(r->client, NULL, NULL);
}

static void on_released(rt_lock_t *lock, int status, void *data) {
  run_t *r = data;
  (void)lock;
  r->lock = NULL;
  if (status == RT_ELOST && !r->lost) {
    say(r, "lost the lock on ",
        " before the command finished (lease over, or evicted)");
    r->exit_code = CLI_LOST;
  } else if (status != 0 && status != RT_ELOST) {
    char msg[160];
    snprintf(msg, sizeof(msg), " failed: %s (its lease ends by itself)",
             rt_strerror(status));
    say(r, "releasing ", msg);
  }
  finish(r, r->exit_code);
}

static void release(run_t *r) {
  r->state = S_RELEASING;
  if (r->op_busy) {
    r->release_due = 1; /* rt_owned needs the handle until it answers */
    return;
  }
  int err = rt_signal(r->lock, on_released, r);
  if (err != 0) {
    char msg[160];
    snprintf(msg, sizeof(msg), " failed: %s", rt_strerror(err));
    say(r, "releasing ", msg);
    finish(r, r->exit_code);
  }
}

/* ---- holding: the child, renewal, loss ----------------------------------- */

static void on_kill_timer(uv_timer_t *t) {
  run_t *r = t->data;
  if (r->child_running)
    uv_process_kill(&r->proc, SIGKILL);
}

static void lose(run_t *r, const char *why) {
  if (r->lost || r->state != S_RUNNING)
    return;
  r->lost = 1;
  r->exit_code = CLI_LOST;
  uv_timer_stop(&r->tick);
  char grace[32], msg[256];
  cli_fmt_ms(grace, sizeof(grace), r->grace_ms);
  snprintf(msg, sizeof(msg),
           ": %s; stopping the command (SIGTERM now, SIGKILL in %s)", why,
           grace);
  say(r, "lost the lock on ", msg);
  if (r->child_running) {
    uv_process_kill(&r->proc, SIGTERM);
    uv_timer_start(&r->kill_timer, on_kill_timer, (uint64_t)r->grace_ms, 0);
  }
}

static void on_child_exit(uv_process_t *proc, int64_t status, int term_signal) {
  run_t *r = proc->data;
  r->child_running = 0;
  uv_timer_stop(&r->kill_timer);
  uv_timer_stop(&r->tick);
  uv_close((uv_handle_t *)proc, NULL);
  if (!r->lost)
    r->exit_code =
        term_signal != 0 ? CLI_SIGNAL_BASE + term_signal : (int)status;
  release(r);
}

static void after_op(run_t *r) {
  r->op_busy = 0;
  if (r->release_due) {
    r->release_due = 0;
    release(r);
  }
}

static void on_extended(rt_lock_t *lock, int status, void *data) {
  run_t *r = data;
  (void)lock;
  uint64_t sent = r->op_sent;
  int due = r->release_due;
  after_op(r);
  if (due || r->state != S_RUNNING)
    return;
  if (status == 0)
    r->lease_end = sent + (uint64_t)r->ttl_ms; /* Redis ran it after sent */
  else if (status == RT_ELOST)
    lose(r, "the lease could not be renewed (evicted, or it ran out)");
  /* Other errors are transient: the next tick tries again, and the lease
   * deadline check gives up in time. */
}

static void on_owned(rt_lock_t *lock, int status, int owned, void *data) {
  run_t *r = data;
  (void)lock;
  int due = r->release_due;
  after_op(r);
  if (due || r->state != S_RUNNING)
    return;
  if (status == 0 && !owned)
    lose(r, "the lease ran out or the holder was evicted");
}

static void on_tick_running(uv_timer_t *t);

static void schedule_check(run_t *r) {
  /* Without renewal, look once the lease must be over too. */
  uint64_t now = cli_now_ms();
  uint64_t step = (uint64_t)(r->ttl_ms / 3 > 0 ? r->ttl_ms / 3 : 1);
  if (!r->renew && r->lease_end + 1 > now && r->lease_end + 1 - now < step)
    step = r->lease_end + 1 - now;
  uv_timer_start(&r->tick, on_tick_running, step, 0);
}

static void on_tick_running(uv_timer_t *t) {
  run_t *r = t->data;
  if (r->state != S_RUNNING || r->lost)
    return;
  uint64_t now = cli_now_ms();
  if (rt_lock_state(r->lock) == RT_LOCK_LOST) {
    lose(r, "Redis evicted the holder");
    return;
  }
  if (now >= r->lease_end) {
    lose(r, r->renew ? "the lease ran out before it could be renewed"
                     : "the lease (--ttl) ran out and --no-renew was given");
    return;
  }
  if (!r->op_busy) {
    int err = r->renew ? rt_extend(r->lock, r->ttl_ms, on_extended, r)
                       : rt_owned(r->lock, on_owned, r);
    if (err == 0) {
      r->op_busy = 1;
      r->op_sent = now;
    } else if (err == RT_ELOST || err == RT_ERELEASED) {
      lose(r, rt_strerror(err));
      return;
    }
  }
  schedule_check(r);
}

static char **make_env(run_t *r, uint64_t fence, const char *holder) {
  static const char *const ours[] = {
      "REDTURN_FENCE=", "REDTURN_RESOURCE=", "REDTURN_HOLDER="};
  size_t n = 0, k = 0;
  while (environ[n] != NULL)
    n++;
  char **env = calloc(n + 4, sizeof(*env));
  if (env == NULL)
    return NULL;
  for (size_t i = 0; i < n; i++) {
    int skip = 0;
    for (size_t j = 0; j < 3; j++)
      skip |= strncmp(environ[i], ours[j], strlen(ours[j])) == 0;
    if (!skip)
      env[k++] = environ[i];
  }
  size_t cap = r->len + 128;
  char *mine = malloc(3 * cap);
  if (mine == NULL) {
    free(env);
    return NULL;
  }
  snprintf(mine, cap, "REDTURN_FENCE=%llu", (unsigned long long)fence);
  snprintf(mine + cap, cap, "REDTURN_RESOURCE=%.*s", (int)r->len, r->name);
  snprintf(mine + 2 * cap, cap, "REDTURN_HOLDER=%s", holder);
  env[k++] = mine;
  env[k++] = mine + cap;
  env[k++] = mine + 2 * cap;
  env[k] = NULL;
  return env;
}

static void start_command(run_t *r) {
  uv_process_options_t o;
  uv_stdio_container_t stdio[3];
  r->env = make_env(r, rt_lock_fence(r->lock), rt_lock_id(r->lock));
  if (r->env == NULL) {
    say(r, "out of memory starting the command for ", "");
    r->exit_code = CLI_OSERR;
    release(r);
    return;
  }
  memset(&o, 0, sizeof(o));
  for (int i = 0; i < 3; i++) {
    stdio[i].flags = UV_INHERIT_FD;
    stdio[i].data.fd = i;
  }
  o.file = r->cmd[0];
  o.args = r->cmd;
  o.env = r->env;
  o.stdio = stdio;
  o.stdio_count = 3;
  o.exit_cb = on_child_exit;
  r->proc.data = r;
  r->state = S_RUNNING;
  r->lease_end = cli_now_ms() + (uint64_t)rt_lock_lease_ms(r->lock);
  int err = uv_spawn(&r->loop, &r->proc, &o);
  if (err != 0) {
    uv_close((uv_handle_t *)&r->proc, NULL);
    clear_progress(r);
    fprintf(stderr, "redturn run: cannot run '%s': %s\n", r->cmd[0],
            uv_strerror(err));
    r->exit_code = err == UV_ENOENT ? CLI_NOT_FOUND : CLI_CANNOT_EXEC;
    release(r);
    return;
  }
  r->child_running = 1;
  schedule_check(r);
}

/* ---- waiting ------------------------------------------------------------- */

static void on_granted(rt_lock_t *lock, int status, void *data) {
  run_t *r = data;
  uv_timer_stop(&r->tick);
  clear_progress(r);
  if (r->state != S_WAITING)
    return; /* closing: the client's close cleans up */
  if (status != 0) {
    char msg[160];
    r->lock = NULL;
    if (r->signo != 0 && status == RT_ECANCELED) {
      finish(r, CLI_SIGNAL_BASE + r->signo);
    } else if (status == RT_EDEADLINE) {
      cli_fmt_ms(msg, sizeof(msg), r->wait_ms);
      char after[200];
      snprintf(after, sizeof(after), " after %s (--wait-timeout)", msg);
      say(r, "gave up waiting for ", after);
      finish(r, CLI_TEMPFAIL);
    } else if (status == RT_EBUSY) {
      say(r, "", " is locked (--wait-timeout 0: not waiting)");
      finish(r, CLI_TEMPFAIL);
    } else {
      snprintf(msg, sizeof(msg), " failed: %s", rt_strerror(status));
      say(r, "waiting for ", msg);
      finish(r, cli_exit_for(status));
    }
    return;
  }
  r->lock = lock;
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
             (unsigned long long)rt_lock_fence(lock), waited);
    fprintf(stderr, "redturn: acquired ");
    cli_put_text(stderr, r->name, r->len);
    fprintf(stderr, "%s\n", after);
  }
  start_command(r);
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

static void on_connected(rt_client_t *c, int status, void *data) {
  run_t *r = data;
  int err;
  if (r->state != S_CONNECTING)
    return;
  if (status != 0) {
    char url[512];
    cli_url_display(r->common->url, url, sizeof(url));
    clear_progress(r);
    fprintf(stderr, "redturn run: cannot use Redis at %s: %s\n", url,
            rt_strerror(status));
    finish(r, cli_exit_for(status));
    return;
  }
  r->state = S_WAITING;
  r->wait_start = cli_now_ms();
  if (r->wait_ms == 0) {
    err = rt_try_lock(c, r->name, r->len, r->ttl_ms, on_granted, r);
  } else {
    err = rt_wait(c, r->name, r->len, r->ttl_ms, r->wait_ms, on_granted, r,
                  &r->lock);
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

static void on_signal(uv_signal_t *h, int signo) {
  run_t *r = h->data;
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
    if (r->lock != NULL)
      rt_cancel(r->lock); /* on_granted gets RT_ECANCELED */
    break;
  case S_RUNNING:
    if (signo != SIGINT && r->child_running)
      uv_process_kill(&r->proc, signo);
    break;
  default:
    break;
  }
}

/* ---- arguments ----------------------------------------------------------- */

enum { OPT_TTL = 1, OPT_WAIT, OPT_NO_RENEW, OPT_GRACE, OPT_QUIET };

static int parse(run_t *r, cli_common *common, int argc, char **argv,
                 int *help) {
  static const cli_opt opts[] = {
      {"ttl", 0, 1, OPT_TTL},           {"wait-timeout", 0, 1, OPT_WAIT},
      {"no-renew", 0, 0, OPT_NO_RENEW}, {"grace", 0, 1, OPT_GRACE},
      {"quiet", 'q', 0, OPT_QUIET},     {NULL, 0, 0, 0}};
  const char *cmd = "redturn run";
  cli_args a;
  int id, quiet = 0;
  const char *val;

  cli_args_init(&a, argc, argv, cmd);
  for (;;) {
    int kind = cli_next(&a, opts, &id, &val);
    if (kind == CLI_ARG_ERR)
      return CLI_USAGE;
    if (kind == CLI_ARG_END)
      break;
    if (kind == CLI_ARG_POS) {
      if (r->name == NULL) {
        r->name = val;
        continue;
      }
      r->cmd = a.argv + a.i - 1; /* the command and everything after */
      break;
    }
    if (cli_common_opt(common, id, val, help))
      continue;
    int64_t ms;
    if (id == OPT_NO_RENEW) {
      r->renew = 0;
    } else if (id == OPT_QUIET) {
      quiet = 1;
    } else if (cli_parse_ms(val, &ms) != 0) {
      return cli_usage_error(cmd, "bad duration '%s'", val);
    } else if (id == OPT_TTL) {
      if (ms < 1 || ms > RT_TTL_MAX)
        return cli_usage_error(cmd, "--ttl must be between 1 ms and 24 h");
      r->ttl_ms = ms;
    } else if (id == OPT_WAIT) {
      r->wait_ms = ms;
    } else {
      r->grace_ms = ms;
    }
  }
  if (*help)
    return 0;
  if (r->name == NULL)
    return cli_usage_error(cmd, "missing RESOURCE");
  if (r->name[0] == '\0')
    return cli_usage_error(cmd, "RESOURCE is empty");
  if (r->cmd == NULL)
    return cli_usage_error(cmd, "missing COMMAND");
  r->len = strlen(r->name);
  r->progress = !quiet && isatty(STDERR_FILENO);
  return 0;
}

int cli_run(cli_common *common, int argc, char **argv) {
  run_t r;
  int help = 0;
  memset(&r, 0, sizeof(r));
  r.common = common;
  r.ttl_ms = 30000;
  r.wait_ms = RT_FOREVER;
  r.grace_ms = 5000;
  r.renew = 1;
  int code = parse(&r, common, argc, argv, &help);
  if (code != 0)
    return code;
  if (help) {
    cli_help_run(stdout);
    return CLI_OK;
  }

  if (uv_loop_init(&r.loop) != 0) {
    fprintf(stderr, "redturn run: cannot create an event loop\n");
    return CLI_OSERR;
  }
  for (int i = 0; i < 3; i++) {
    uv_signal_init(&r.loop, &r.sigs[i]);
    r.sigs[i].data = &r;
    uv_signal_start(&r.sigs[i], on_signal, signals[i]);
  }
  uv_timer_init(&r.loop, &r.tick);
  uv_timer_init(&r.loop, &r.kill_timer);
  r.tick.data = r.kill_timer.data = &r;

  rt_options_t o;
  cli_options(common, &o);
  o.default_ttl_ms = r.ttl_ms;
  int err = rt_client_open(&r.loop, &o, on_connected, &r, &r.client);
  if (err != 0) {
    r.client = NULL;
    fprintf(stderr, "redturn run: %s\n", rt_strerror(err));
    finish(&r, cli_exit_for(err));
  }
  uv_run(&r.loop, UV_RUN_DEFAULT);
  uv_loop_close(&r.loop);
  if (r.env != NULL) {
    size_t n = 0;
    while (r.env[n] != NULL)
      n++;
    free(r.env[n - 3]); /* our three strings share one allocation */
    free(r.env);
  }
  return r.exit_code;
}
