/* redturn inspect and redturn watch: snapshots of resources' queues through
 * rt_inspect(), printed once or refreshed until interrupted. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "view.h"

enum { FMT_TEXT, FMT_JSON, FMT_PROM };

typedef struct view {
  uv_loop_t loop;
  const cli_common *common;
  const char *cmd;
  rt_client_t *client;
  snap_t *snaps;
  snap_t *prev; /* watch: what was printed last */
  size_t n;
  int format;
  int64_t stall_after_ms;
  size_t max_waiters;
  int watch;
  int64_t interval_ms;
  long count; /* refreshes before stopping, 0: no limit */
  long rounds;
  int tty;
  int have_prev;
  size_t pending;
  int closing;
  int exit_code;
  uv_timer_t timer;
  uv_timer_t stale; /* watch: a round without an answer for STALE_MS */
  uv_signal_t sigs[2];
} view_t;

/* watch: a round Redis has not answered for this long shows every resource
 * as "reconnecting" rather than leave the last snapshot up (a request made
 * while the client reconnects waits up to its command timeout, 5 s). */
#define STALE_MS 500

static void finish(view_t *v, int code) {
  if (v->closing)
    return;
  v->closing = 1;
  v->exit_code = code;
  uv_close((uv_handle_t *)&v->timer, NULL);
  uv_close((uv_handle_t *)&v->stale, NULL);
  for (int i = 0; i < 2; i++)
    uv_close((uv_handle_t *)&v->sigs[i], NULL);
  if (v->client != NULL)
    rt_client_close(v->client, NULL, NULL);
}

/* ---- output -------------------------------------------------------------- */

static void report_errors(view_t *v) {
  for (size_t i = 0; i < v->n; i++) {
    const snap_t *s = &v->snaps[i];
    if (s->status == 0)
      continue;
    fprintf(stderr, "%s: ", v->cmd);
    cli_put_name(stderr, s->name, s->len);
    fprintf(stderr, ": %s\n", rt_strerror(s->status));
    if (v->exit_code == 0)
      v->exit_code = cli_exit_for(s->status);
  }
}

static void print_once(view_t *v) {
  if (v->format == FMT_PROM) {
    render_prom(stdout, v->snaps, v->n);
  } else {
    int first = 1;
    for (size_t i = 0; i < v->n; i++) {
      const snap_t *s = &v->snaps[i];
      if (v->format == FMT_JSON) {
        render_json(stdout, s);
      } else if (s->status == 0) {
        if (!first)
          fputc('\n', stdout);
        render_text(stdout, s);
        first = 0;
      }
    }
  }
  fflush(stdout);
  report_errors(v);
}

static void clock_text(char *buf, size_t cap) {
  struct timespec ts;
  struct tm tm;
  clock_gettime(CLOCK_REALTIME, &ts);
  localtime_r(&ts.tv_sec, &tm);
  size_t n = strftime(buf, cap, "%H:%M:%S", &tm);
  snprintf(buf + n, cap - n, ".%03ld", ts.tv_nsec / 1000000);
}

/* A terminal: redraw the whole screen in one write. */
static void draw_screen(view_t *v) {
  char *frame = NULL;
  size_t size = 0;
  char url[512], now[32], every[32];
  FILE *f = open_memstream(&frame, &size);
  if (f == NULL)
    return;
  cli_url_display(v->common->url, url, sizeof(url));
  clock_text(now, sizeof(now));
  cli_fmt_ms(every, sizeof(every), v->interval_ms);
  fprintf(f, "\033[H\033[2Jredturn watch  %s  prefix ", url);
  cli_put_text(f, v->common->prefix, strlen(v->common->prefix));
  fprintf(f, "  %s  (every %s, Ctrl-C to stop)\n", now, every);
  for (size_t i = 0; i < v->n; i++) {
    fputc('\n', f);
    render_text(f, &v->snaps[i]);
  }
  fclose(f);
  fwrite(frame, 1, size, stdout);
  fflush(stdout);
  free(frame);
}

/* Not a terminal (or JSON): print only what changed since last time. */
static void print_changes(view_t *v) {
  char now[32];
  int any = 0;
  for (size_t i = 0; i < v->n; i++) {
    snap_t *s = &v->snaps[i], *p = &v->prev[i];
    if (v->have_prev && !snap_changed(s, p))
      continue;
    if (v->format == FMT_JSON) {
      render_json(stdout, s);
    } else {
      if (!any) {
        clock_text(now, sizeof(now));
        printf("--- %s\n", now);
      }
      render_text(stdout, s);
    }
    any = 1;
    /* Swap, so prev keeps this snapshot and the next round reuses the
     * other's memory. */
    snap_t tmp = *p;
    *p = *s;
    *s = tmp;
  }
  v->have_prev = 1;
  if (any)
    fflush(stdout);
}

/* ---- rounds -------------------------------------------------------------- */

static void start_round(view_t *v);

static void on_timer(uv_timer_t *t) { start_round(t->data); }

/* watch: show what the snapshots say now. */
static void show(view_t *v) {
  if (v->tty && v->format == FMT_TEXT)
    draw_screen(v);
  else
    print_changes(v);
}

static void round_done(view_t *v) {
  uv_timer_stop(&v->stale);
  if (!v->watch) {
    print_once(v);
    finish(v, v->exit_code);
    return;
  }
  show(v);
  v->rounds++;
  if (ferror(stdout))
    finish(v, CLI_SIGNAL_BASE + SIGPIPE); /* as if SIGPIPE were not ignored */
  else if (v->count > 0 && v->rounds >= v->count)
    finish(v, 0);
  else
    uv_timer_start(&v->timer, on_timer, (uint64_t)v->interval_ms, 0);
}

static void on_stale(uv_timer_t *t) {
  view_t *v = t->data;
  /* The answers still come later and complete the round. */
  for (size_t i = 0; i < v->n; i++)
    snap_set(&v->snaps[i], RT_ETIMEDOUT, NULL, 0);
  show(v);
}

static void on_info(rt_client_t *c, int status, const rt_queue_info_t *info,
                    void *data) {
  view_t *v = rt_client_get_data(c);
  snap_t *s = data;
  if (v->closing)
    return;
  snap_set(s, status, info, v->stall_after_ms);
  if (--v->pending == 0)
    round_done(v);
}

static void start_round(view_t *v) {
  v->pending = v->n;
  if (v->watch)
    uv_timer_start(&v->stale, on_stale, STALE_MS, STALE_MS);
  for (size_t i = 0; i < v->n; i++) {
    snap_t *s = &v->snaps[i];
    int err =
        rt_inspect(v->client, s->name, s->len, v->max_waiters, on_info, s);
    if (err != 0) {
      snap_set(s, err, NULL, 0);
      if (--v->pending == 0)
        round_done(v);
    }
  }
}

static void on_connected(rt_client_t *c, int status, void *data) {
  view_t *v = data;
  if (v->closing)
    return;
  if (status != 0) {
    finish(v, cli_connect_error(v->cmd, v->common, c, status));
    return;
  }
  start_round(v);
}

static void on_signal(uv_signal_t *h, int signo) {
  view_t *v = h->data;
  if (v->tty && v->format == FMT_TEXT)
    fputc('\n', stdout);
  finish(v, v->watch ? 0 : CLI_SIGNAL_BASE + signo);
}

/* ---- arguments and main -------------------------------------------------- */

enum {
  OPT_JSON = 1,
  OPT_PROM,
  OPT_STALL,
  OPT_MAX_WAITERS,
  OPT_INTERVAL,
  OPT_COUNT
};

/* One option of inspect or watch (not a common one); 0 or an exit code. */
static int view_option(view_t *v, int id, const char *val) {
  long num;
  int64_t ms;
  if (id == OPT_JSON || id == OPT_PROM) {
    int want = id == OPT_JSON ? FMT_JSON : FMT_PROM;
    if (v->format != FMT_TEXT && v->format != want)
      return cli_usage_error(v->cmd, "--json and --prom cannot be combined");
    v->format = want;
  } else if (id == OPT_MAX_WAITERS || id == OPT_COUNT) {
    if (cli_parse_count(val, 1000000, &num) != 0)
      return cli_usage_error(v->cmd, "bad number '%s'", val);
    if (id == OPT_COUNT)
      v->count = num;
    else
      v->max_waiters = (size_t)num;
  } else if (cli_duration_opt(v->cmd,
                              id == OPT_STALL ? "--stall-after" : "--interval",
                              val, &ms) != 0) {
    return CLI_USAGE;
  } else if (id == OPT_STALL) {
    v->stall_after_ms = ms;
  } else {
    v->interval_ms = ms > 0 ? ms : 1;
  }
  return 0;
}

/* The command line of inspect or watch into v (resources into v->snaps and
 * v->prev) and common; 0 or an exit code. */
static int view_args(view_t *v, cli_common *common, int argc, char **argv,
                     int *help) {
  static const cli_opt inspect_opts[] = {{"json", 0, 0, OPT_JSON},
                                         {"prom", 0, 0, OPT_PROM},
                                         {"stall-after", 0, 1, OPT_STALL},
                                         {"max-waiters", 0, 1, OPT_MAX_WAITERS},
                                         {NULL, 0, 0, 0}};
  static const cli_opt watch_opts[] = {{"json", 0, 0, OPT_JSON},
                                       {"stall-after", 0, 1, OPT_STALL},
                                       {"max-waiters", 0, 1, OPT_MAX_WAITERS},
                                       {"interval", 0, 1, OPT_INTERVAL},
                                       {"count", 0, 1, OPT_COUNT},
                                       {NULL, 0, 0, 0}};
  cli_args a;
  int id, code = 0;
  const char *val;
  cli_args_init(&a, argc, argv, v->cmd);
  while (code == 0) {
    int kind = cli_next(&a, v->watch ? watch_opts : inspect_opts, &id, &val);
    if (kind == CLI_ARG_END)
      break;
    if (kind == CLI_ARG_ERR)
      return CLI_USAGE;
    if (kind == CLI_ARG_POS) {
      if (val[0] == '\0')
        return cli_usage_error(v->cmd, "a RESOURCE is empty");
      v->snaps[v->n].name = v->prev[v->n].name = val;
      v->snaps[v->n].len = v->prev[v->n].len = strlen(val);
      v->n++;
    } else if (!cli_common_opt(common, id, val, help)) {
      code = view_option(v, id, val);
    }
  }
  return code;
}

/* Run the view on its own loop until it finishes; its exit code. */
static int view_run(view_t *v) {
  static const int sigs[2] = {SIGINT, SIGTERM};
  v->tty = isatty(STDOUT_FILENO);
  if (uv_loop_init(&v->loop) != 0)
    return CLI_OSERR;
  uv_timer_init(&v->loop, &v->timer);
  uv_timer_init(&v->loop, &v->stale);
  v->timer.data = v->stale.data = v;
  for (int i = 0; i < 2; i++) {
    uv_signal_init(&v->loop, &v->sigs[i]);
    v->sigs[i].data = v;
    uv_signal_start(&v->sigs[i], on_signal, sigs[i]);
  }
  rt_options_t o;
  cli_options(v->common, &o);
  int err = rt_client_open(&v->loop, &o, on_connected, v, &v->client);
  if (err != 0) {
    v->client = NULL;
    finish(v, cli_options_error(v->cmd, v->common, err));
  }
  uv_run(&v->loop, UV_RUN_DEFAULT);
  uv_loop_close(&v->loop);
  return v->exit_code;
}

static int view_main(cli_common *common, int argc, char **argv, int watch) {
  view_t v;
  int help = 0;

  memset(&v, 0, sizeof(v));
  v.common = common;
  v.watch = watch;
  v.cmd = watch ? "redturn watch" : "redturn inspect";
  v.max_waiters = watch ? 20 : 100;
  v.interval_ms = 250;
  v.snaps = calloc((size_t)argc + 1, sizeof(*v.snaps));
  v.prev = calloc((size_t)argc + 1, sizeof(*v.prev));
  if (v.snaps == NULL || v.prev == NULL) {
    free(v.snaps);
    free(v.prev);
    fprintf(stderr, "%s: out of memory\n", v.cmd);
    return CLI_OSERR;
  }

  int code = view_args(&v, common, argc, argv, &help);
  if (code == 0 && help)
    (watch ? cli_help_watch : cli_help_inspect)(stdout);
  else if (code == 0 && v.n == 0)
    code = cli_usage_error(v.cmd, "missing RESOURCE");
  else if (code == 0)
    code = view_run(&v);
  for (size_t i = 0; i < v.n; i++) {
    snap_clear(&v.snaps[i]);
    snap_clear(&v.prev[i]);
  }
  free(v.snaps);
  free(v.prev);
  return code;
}

int cli_inspect(cli_common *c, int argc, char **argv) {
  return view_main(c, argc, argv, 0);
}

int cli_watch(cli_common *c, int argc, char **argv) {
  return view_main(c, argc, argv, 1);
}
