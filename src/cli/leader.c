/* redturn leader: the current leader of an election, read once through
 * rt_inspect() (the holder of an election leads; its label is its
 * value). */
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
  int exit_code;
} leader_view;

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
  if (info->kind != NULL && strcmp(info->kind, "e") != 0) {
    fprintf(stderr, LEADER_CMD ": the resource is not an election (kind %s)\n",
            info->kind);
    return CLI_USAGE;
  }
  if (info->holder == NULL) {
    printf("no leader\n");
    return CLI_REFUSED;
  }
  printf("leader %s fence %" PRIu64 " value ", info->holder, info->fence);
  const char *value = info->holder_label != NULL ? info->holder_label : "";
  cli_put_text(stdout, value, strlen(value));
  fputc('\n', stdout);
  return CLI_OK;
}

static void on_info(rt_client_t *c, int status, const rt_queue_info_t *info,
                    void *data) {
  leader_view *v = data;
  v->exit_code = print_leader(status, info, c);
  rt_client_close(c, NULL, NULL);
}

static void on_connected(rt_client_t *c, int status, void *data) {
  leader_view *v = data;
  if (status != 0) {
    v->exit_code = cli_connect_error(LEADER_CMD, v->common, c, status);
    rt_client_close(c, NULL, NULL);
    return;
  }
  /* Of an election's holders inspect reports at most max_waiters: the
   * leader needs 1. */
  int err = rt_inspect(c, v->name, strlen(v->name), 1, on_info, v);
  if (err != 0)
    on_info(c, err, NULL, v);
}

static int leader_run(leader_view *v) {
  if (uv_loop_init(&v->loop) != 0)
    return CLI_OSERR;
  rt_options_t o;
  cli_options(v->common, &o);
  int err = rt_client_open(&v->loop, &o, on_connected, v, &v->client);
  if (err != 0)
    v->exit_code = cli_options_error(LEADER_CMD, v->common, err);
  uv_run(&v->loop, UV_RUN_DEFAULT);
  uv_loop_close(&v->loop);
  return v->exit_code;
}

int cli_leader(cli_common *c, int argc, char **argv) {
  static const cli_opt opts[] = {{NULL, 0, 0, 0}};
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
