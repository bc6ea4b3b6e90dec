/* redturn: the command-line tool. Global options, then one subcommand. */
#include <signal.h>
#include <string.h>

#include "cli.h"

typedef struct command {
  const char *name;
  int (*run)(cli_common *c, int argc, char **argv);
  void (*help)(FILE *f);
} command_t;

static const command_t commands[] = {{"run", cli_run, cli_help_run},
                                     {"inspect", cli_inspect, cli_help_inspect},
                                     {"watch", cli_watch, cli_help_watch},
                                     {"evict", cli_evict, cli_help_evict},
                                     {"leader", cli_leader, cli_help_leader},
                                     {"demo", cli_demo, cli_help_demo},
                                     {NULL, NULL, NULL}};

static const command_t *find_command(const char *name) {
  for (const command_t *c = commands; c->name != NULL; c++)
    if (strcmp(c->name, name) == 0)
      return c;
  return NULL;
}

enum { OPT_VERSION = 1 };

int main(int argc, char **argv) {
  static const cli_opt opts[] = {{"version", 0, 0, OPT_VERSION},
                                 {NULL, 0, 0, 0}};
  cli_common common;
  cli_args a;
  int id = 0, help = 0;
  const char *val;

  /* A dropped Redis connection must be an error, not a fatal signal (a
   * command run by `run` gets the default disposition back). */
  signal(SIGPIPE, SIG_IGN);
  cli_common_init(&common);
  cli_args_init(&a, argc - 1, argv + 1, "redturn");
  for (;;) {
    int kind = cli_next(&a, opts, &id, &val);
    if (kind == CLI_ARG_ERR)
      return CLI_USAGE;
    if (kind == CLI_ARG_END)
      break;
    if (kind == CLI_ARG_POS) {
      a.i--; /* the subcommand */
      break;
    }
    if (id == OPT_VERSION) {
      printf("redturn %s\n", rt_version_string());
      return CLI_OK;
    }
    cli_common_opt(&common, id, val, &help);
  }
  if (help) {
    cli_help_main(stdout);
    return CLI_OK;
  }
  if (a.i >= a.argc) {
    cli_help_main(stderr);
    return CLI_USAGE;
  }

  const char *name = a.argv[a.i];
  if (strcmp(name, "help") == 0) {
    if (a.i + 1 >= a.argc) {
      cli_help_main(stdout);
      return CLI_OK;
    }
    const command_t *c = find_command(a.argv[a.i + 1]);
    if (c == NULL)
      return cli_usage_error("redturn", "no command '%s'", a.argv[a.i + 1]);
    c->help(stdout);
    return CLI_OK;
  }
  const command_t *c = find_command(name);
  if (c == NULL)
    return cli_usage_error("redturn", "no command '%s'", name);
  return c->run(&common, a.argc - a.i - 1, a.argv + a.i + 1);
}
