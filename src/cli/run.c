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
#include "run.h"

/* Signals whose default action ends redturn, besides SIGRTMIN..SIGRTMAX.
 * The ones a fault raises in redturn itself (SIGSEGV, SIGBUS, ...) are
 * left alone: the keeper handles redturn's death. */
static const int fatal_signals[] = {
    SIGHUP,  SIGINT,  SIGQUIT,   SIGPIPE, SIGALRM, SIGTERM,   SIGUSR1, SIGUSR2,
    SIGPOLL, SIGPROF, SIGVTALRM, SIGXCPU, SIGXFSZ, SIGSTKFLT, SIGPWR};
#define NFATAL (sizeof(fatal_signals) / sizeof(fatal_signals[0]))
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
    run_finish(r, CLI_SIGNAL_BASE + signo);
    break;
  case S_WAITING:
    if (r->signo != 0) {
      /* Canceling hangs (Redis unreachable?): leave now; the entry is
       * skipped once our connection is gone. */
      run_clear_progress(r);
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
    run_stop_command(r, why, "");
    break;
  case S_RELEASING:
    if (r->signo != 0) {
      run_clear_progress(r);
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
  uv_signal_start(&r->sigchld, run_on_sigchld, SIGCHLD);
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
  int code = run_parse(&r, common, argc, argv, &help);
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
  int err = rt_client_open(&r.loop, &r.opts, run_on_connected, &r, &r.client);
  if (err != 0) {
    r.client = NULL;
    run_finish(&r, cli_options_error("redturn run", common, err));
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
