/* redturn leader: the current leader of an election, read once through
 * rt_inspect() (the holder of an election leads; its label is its
 * value), or with --watch followed through rt_observe() until a signal. */
#include <inttypes.h>
#include <signal.h>
#include <string.h>
#include <uv.h>

#include "cli.h"

#define LEADER_CMD "redturn leader"

typedef struct leader_view {
  uv_loop_t loop;
  const cli_common *common;
  const char *name;
  rt_client_t *client;
  rt_observer_t *obs; /* --watch: until its last call */
  uv_signal_t sigs[2];
  int watch;
  int finished;
  int exit_code;
} leader_view;

static void print_line(const char *id, uint64_t fence, const char *value,
                       size_t value_len) {
  if (id == NULL) {
    printf("no leader\n");
    return;
  }
  printf("leader %s fence %" PRIu64 " value ", id, fence);
  cli_put_text(stdout, value, value_len);
  fputc('\n', stdout);
}

/* "leader <id> fence <N> value <V>", or "no leader" (exit 1); a resource
 * that is not an election is refused with the kind it has. */
static int print_leader(int status, const rt_queue_info_t *info,
                        rt_client_t *client) {
  char why[256];
  if (status != 0) {
    fprintf(stderr, LEADER_CMD ": %s\n",
            cli_why(client, status, why, sizeof(why)));
    return cli_exit_for(status);
  }
  if (info->kind != NULL && strcmp(info->kind, "election") != 0) {
    fprintf(stderr, LEADER_CMD ": the resource is not an election (kind %s)\n",
            info->kind);
    return CLI_USAGE;
  }
  const char *value = info->holder_label != NULL ? info->holder_label : "";
  print_line(info->holder, info->fence, value, strlen(value));
  return info->holder == NULL ? CLI_REFUSED : CLI_OK;
}

static void on_info(rt_client_t *c, int status, const rt_queue_info_t *info,
                    void *data) {
  leader_view *v = data;
  v->exit_code = print_leader(status, info, c);
  rt_client_close(c, NULL, NULL);
}

/* ---- --watch ---------------------------------------------------------------- */

/* The end of watching: the signal handlers and the client close, so the
 * loop ends. */
static void watch_finish(leader_view *v, int code) {
  if (v->finished)
    return;
  v->finished = 1;
  v->exit_code = code;
  for (int i = 0; i < 2; i++)
    uv_close((uv_handle_t *)&v->sigs[i], NULL);
  if (v->obs != NULL)
    rt_observe_stop(v->obs);
  v->obs = NULL;
  rt_client_close(v->client, NULL, NULL);
}

/* One line per change; a lost connection goes to stderr and watching goes
 * on; the observer's last call ends the command. */
static void on_change(rt_observer_t *obs, int status, const rt_leader_t *l,
                      void *data) {
  leader_view *v = data;
  char why[256];
  (void)obs;
  if (status == 0) {
    print_line(l->id, l->fence, l->value, l->value_len);
    fflush(stdout);
    return;
  }
  if (status == RT_EDISCONNECTED) { /* it goes on (rt_observe_cb) */
    fprintf(stderr, LEADER_CMD ": %s; watching again once reconnected\n",
            cli_why(v->client, status, why, sizeof(why)));
    return;
  }
  v->obs = NULL; /* freed when this returns */
  if (status == RT_EKIND)
    fprintf(stderr, LEADER_CMD ": the resource is not an election\n");
  else if (!v->finished)
    fprintf(stderr, LEADER_CMD ": %s\n",
            cli_why(v->client, status, why, sizeof(why)));
  watch_finish(v, status == RT_EKIND ? CLI_USAGE : cli_exit_for(status));
}

static void on_signal(uv_signal_t *h, int signo) {
  (void)signo;
  watch_finish(h->data, CLI_OK);
}

static void start_watch(leader_view *v) {
  int err =
      rt_observe(v->client, v->name, strlen(v->name), on_change, v, &v->obs);
  if (err != 0) {
    char why[256];
    fprintf(stderr, LEADER_CMD ": %s\n",
            cli_why(v->client, err, why, sizeof(why)));
    watch_finish(v, cli_exit_for(err));
  }
}

/* ---- the command ------------------------------------------------------------- */

static void on_connected(rt_client_t *c, int status, void *data) {
  leader_view *v = data;
  if (status != 0) {
    v->exit_code = cli_connect_error(LEADER_CMD, v->common, c, status);
    if (v->watch)
      watch_finish(v, v->exit_code);
    else
      rt_client_close(c, NULL, NULL);
    return;
  }
  if (v->watch) {
    start_watch(v);
    return;
  }
  /* Of an election's holders inspect reports at most max_waiters: the
   * leader needs 1. */
  int err = rt_inspect(c, v->name, strlen(v->name), 1, on_info, v);
  if (err != 0)
    on_info(c, err, NULL, v);
}

static int leader_run(leader_view *v) {
  static const int sigs[2] = {SIGINT, SIGTERM};
  if (uv_loop_init(&v->loop) != 0)
    return CLI_OSERR;
  rt_options_t o;
  cli_options(v->common, &o);
  int err = rt_client_open(&v->loop, &o, on_connected, v, &v->client);
  if (err != 0)
    v->exit_code = cli_options_error(LEADER_CMD, v->common, err);
  for (int i = 0; v->watch && err == 0 && i < 2; i++) {
    uv_signal_init(&v->loop, &v->sigs[i]);
    v->sigs[i].data = v;
    uv_signal_start(&v->sigs[i], on_signal, sigs[i]);
  }
  uv_run(&v->loop, UV_RUN_DEFAULT);
  uv_loop_close(&v->loop);
  return v->exit_code;
}

int cli_leader(cli_common *c, int argc, char **argv) {
  enum { OPT_WATCH = 1 };
  static const cli_opt opts[] = {{"watch", 'w', 0, OPT_WATCH}, {NULL, 0, 0, 0}};
  leader_view v;
  cli_args a;
  int id, help = 0;
  const char *val;
  memset(&v, 0, sizeof(v));
  v.common = c;
  cli_args_init(&a, argc, argv, LEADER_CMD);
  for (;;) {
    int kind = cli_next(&a, opts, &id, &val);
    if (kind == CLI_ARG_END)
      break;
    if (kind == CLI_ARG_ERR)
      return CLI_USAGE;
    if (kind == CLI_ARG_POS) {
      if (v.name != NULL)
        return cli_usage_error(LEADER_CMD, "one RESOURCE only");
      if (val[0] == '\0')
        return cli_usage_error(LEADER_CMD, "the RESOURCE is empty");
      v.name = val;
    } else if (id == OPT_WATCH) {
      v.watch = 1;
    } else {
      cli_common_opt(c, id, val, &help);
    }
  }
  if (help) {
    cli_help_leader(stdout);
    return CLI_OK;
  }
  if (v.name == NULL)
    return cli_usage_error(LEADER_CMD, "missing RESOURCE");
  return leader_run(&v);
}
