/* redturn run's arguments: the kinds (--shared, --exclusive, --permits,
 * --elect), --all's list, flock(1)'s options, the command. */
#include "run.h"

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

int run_parse(run_t *r, cli_common *common, int argc, char **argv, int *help) {
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
