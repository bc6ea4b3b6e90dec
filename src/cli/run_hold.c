/* redturn run while the lock is held: the command (child.c), renewal and
 * loss; the release and the end, bounded; the progress line and messages. */
#include "run.h"

/* ---- messages ------------------------------------------------------------ */

void run_clear_progress(run_t *r) {
  if (r->shown) {
    fputs("\r\033[K", stderr);
    r->shown = 0;
  }
}

/* "redturn run: <before>"<name>"<after>\n" on stderr. */
void run_say(run_t *r, const char *before, const char *after) {
  run_clear_progress(r);
  fprintf(stderr, "redturn run: %s", before);
  cli_put_name(stderr, r->name, r->len);
  fprintf(stderr, "%s\n", after);
}

void run_draw(run_t *r) {
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
    if (r->lease_left_ms - since <= 0)
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
  run_clear_progress(r);
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

void run_finish(run_t *r, int code) {
  if (r->state == S_DONE)
    return;
  r->state = S_DONE;
  r->exit_code = code;
  run_clear_progress(r);
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
    run_say(r, "lost the lock on ",
            " before the command finished (lease over, or evicted)");
    r->exit_code = CLI_LOST;
  } else if (status != 0 && status != RT_ELOST) {
    char msg[600], why[512];
    snprintf(msg, sizeof(msg), " failed: %s (its lease ends by itself)",
             cli_why(r->client, status, why, sizeof(why)));
    run_say(r, "releasing ", msg);
  }
  run_finish(r, r->exit_code);
}

static void on_released(rt_lock_t *lock, int status, void *data) {
  (void)lock;
  released(data, status);
}

void run_on_all_released(rt_multi_t *multi, int status, void *data) {
  (void)multi;
  released(data, status);
}

void run_release(run_t *r) {
  r->state = S_RELEASING;
  start_bound(r);
  int err = r->multi != NULL ? rt_signal_all(r->multi, run_on_all_released, r)
                             : rt_signal(r->lock, on_released, r);
  if (err != 0) {
    char msg[160];
    snprintf(msg, sizeof(msg), " failed: %s", rt_strerror(err));
    run_say(r, "releasing ", msg);
    run_finish(r, r->exit_code);
  }
}

/* ---- holding: the command, renewal, loss --------------------------------- */

static void on_kill_timer(uv_timer_t *t) {
  run_t *r = t->data;
  cli_child_kill(&r->child, SIGKILL);
}

/* SIGTERM to the command's group now, SIGKILL after --grace; says so as
 * "<before>"<name>"<why>; stopping the command (...)". */
void run_stop_command(run_t *r, const char *before, const char *why) {
  char grace[32], msg[256];
  cli_fmt_ms(grace, sizeof(grace), r->grace_ms);
  snprintf(msg, sizeof(msg),
           "%s; stopping the command (SIGTERM now, SIGKILL in %s)", why, grace);
  run_say(r, before, msg);
  cli_child_kill(&r->child, SIGTERM);
  cli_child_kill(&r->child, SIGCONT); /* a stopped process must see it */
  uv_timer_start(&r->kill_timer, on_kill_timer, (uint64_t)r->grace_ms, 0);
}

static void lose(run_t *r, const char *why) {
  if (r->lost || r->state != S_RUNNING)
    return;
  r->lost = 1;
  run_stop_command(r, "lost the lock on ", why);
}

static void on_lost(rt_lock_t *lock, void *data) {
  (void)lock;
  lose(data, ": evicted, or the lease ran out before a renewal got through");
}

void run_on_sigchld(uv_signal_t *h, int signo) {
  run_t *r = h->data;
  int code;
  (void)signo;
  if (r->state != S_RUNNING || !cli_child_reap(&r->child, &code))
    return;
  uv_timer_stop(&r->kill_timer);
  r->exit_code = r->lost    ? CLI_LOST
                 : r->signo ? CLI_SIGNAL_BASE + r->signo
                            : code;
  run_release(r);
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

void run_start_command(run_t *r) {
  r->env = make_env(r);
  if (r->env == NULL) {
    run_say(r, "out of memory starting the command for ", "");
    r->exit_code = CLI_OSERR;
    run_release(r);
    return;
  }
  r->state = S_RUNNING;
  int err = watch_held(r);
  if (err != 0) {
    char msg[160];
    snprintf(msg, sizeof(msg), ": %s", rt_strerror(err));
    run_say(r, "cannot renew the lease on ", msg);
    r->exit_code = cli_exit_for(err);
    run_release(r);
    return;
  }
  err = cli_child_start(&r->child, r->cmd, r->env);
  if (err != 0) {
    run_clear_progress(r);
    fprintf(stderr, "redturn run: cannot run '%.64s': %s\n", r->cmd[0],
            strerror(err));
    if (r->child.pid == 0) {
      r->exit_code = CLI_OSERR;
      run_release(r);
    }
    return; /* the keeper exits 126 or 127 */
  }
}
