/* redturn evict: an operator's forced release through rt_evict(), on a
 * client like any other, so it works on every URL form the library takes
 * (plain, TLS, Sentinel, Cluster). */
#include <string.h>
#include <uv.h>

#include "cli.h"

#define EVICT_CMD "redturn evict"

enum { OPT_HOLDER = 1 };

typedef struct evict_view {
  uv_loop_t loop;
  const cli_common *common;
  const char *name;
  const char *holder; /* --holder, or NULL: whoever holds */
  int exit_code;
} evict_view;

/* Report what rt_evict found and did; returns the exit code. */
static int print_evict(const evict_view *v, rt_client_t *client, int status,
                       const rt_evict_info_t *info) {
  char why[256];
  size_t len = strlen(v->name);
  if (status != 0) {
    fprintf(stderr, EVICT_CMD ": %s\n",
            cli_why(client, status, why, sizeof(why)));
    if (status == RT_EKIND)
      fprintf(stderr,
              EVICT_CMD ": only a mutex's holder can be evicted; "
                        "the holders of a semaphore, read-write lock or "
                        "election end by release or lease\n");
    return cli_exit_for(status);
  }
  if (info->holder == NULL) {
    fprintf(stderr, EVICT_CMD ": refused: nobody holds ");
    cli_put_name(stderr, v->name, len);
    fputc('\n', stderr);
    return CLI_REFUSED;
  }
  if (!info->evicted) {
    fprintf(stderr, EVICT_CMD ": refused: ");
    cli_put_name(stderr, v->name, len);
    fprintf(stderr, " is held by %s, not by %s\n", info->holder, v->holder);
    return CLI_REFUSED;
  }
  printf("evicted %s (client %.32s) from ", info->holder, info->holder);
  cli_put_name(stdout, v->name, len);
  if (info->next == NULL)
    printf("; the queue is now empty\n");
  else
    printf("; granted to %s, fence %llu\n", info->next,
           (unsigned long long)info->fence);
  return CLI_OK;
}

static void on_evict(rt_client_t *c, int status, const rt_evict_info_t *info,
                     void *data) {
  evict_view *v = data;
  v->exit_code = print_evict(v, c, status, info);
  rt_client_close(c, NULL, NULL);
}

static void on_connected(rt_client_t *c, int status, void *data) {
  evict_view *v = data;
  if (status != 0) {
    v->exit_code = cli_connect_error(EVICT_CMD, v->common, c, status);
    rt_client_close(c, NULL, NULL);
    return;
  }
  int err = rt_evict(c, v->name, strlen(v->name), v->holder, on_evict, v);
  if (err != 0)
    on_evict(c, err, NULL, v);
}

static int evict_run(evict_view *v) {
  rt_client_t *client = NULL;
  if (uv_loop_init(&v->loop) != 0)
    return CLI_OSERR;
  rt_options_t o;
  cli_options(v->common, &o);
  int err = rt_client_open(&v->loop, &o, on_connected, v, &client);
  if (err != 0)
    v->exit_code = cli_options_error(EVICT_CMD, v->common, err);
  uv_run(&v->loop, UV_RUN_DEFAULT);
  uv_loop_close(&v->loop);
  return v->exit_code;
}

int cli_evict(cli_common *common, int argc, char **argv) {
  static const cli_opt opts[] = {{"holder", 0, 1, OPT_HOLDER}, {NULL, 0, 0, 0}};
  evict_view v;
  const char *val;
  cli_args a;
  int id, help = 0;

  memset(&v, 0, sizeof(v));
  v.common = common;
  cli_args_init(&a, argc, argv, EVICT_CMD);
  for (;;) {
    int kind = cli_next(&a, opts, &id, &val);
    if (kind == CLI_ARG_ERR)
      return CLI_USAGE;
    if (kind == CLI_ARG_END)
      break;
    if (kind == CLI_ARG_POS) {
      if (v.name != NULL)
        return cli_usage_error(EVICT_CMD, "one RESOURCE at a time");
      v.name = val;
    } else if (!cli_common_opt(common, id, val, &help)) {
      if (val[0] == '\0')
        return cli_usage_error(EVICT_CMD, "--holder is empty");
      v.holder = val;
    }
  }
  if (help) {
    cli_help_evict(stdout);
    return CLI_OK;
  }
  if (v.name == NULL)
    return cli_usage_error(EVICT_CMD, "missing RESOURCE");
  if (v.name[0] == '\0')
    return cli_usage_error(EVICT_CMD, "RESOURCE is empty");
  return evict_run(&v);
}
