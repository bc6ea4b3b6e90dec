/* Argument parsing shared by the subcommands: options in any order before
 * the positional arguments end, "--opt value", "--opt=value", "-x value",
 * "--" to end the options; plus the common settings and exit codes. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* ---- exit codes ---------------------------------------------------------- */

int cli_exit_for(int st) {
  switch (st) {
  case 0:
    return CLI_OK;
  case RT_ECONNECT:
  case RT_ETIMEDOUT:
  case RT_EDISCONNECTED:
  case RT_ETLS:
  case RT_ETLSVERIFY:
  case RT_EREADONLY:
  case RT_EREPLICAS:
  case RT_ENOMODULE:
    return CLI_UNAVAILABLE;
  case RT_EAUTH:
  case RT_ENOPERM:
    return CLI_NOPERM;
  case RT_ESERVER:
  case RT_EEVICTION:
    return CLI_CONFIG;
  case RT_EWAITTIMEOUT:
  case RT_EBUSY:
    return CLI_REFUSED;
  case RT_ELOST:
    return CLI_LOST;
  case RT_EWRONGTYPE:
  case RT_EKIND:
  case RT_EREDIS:
  case RT_EPROTO:
    return CLI_PROTOCOL;
  case RT_EINVAL:
  case RT_ENAMEEMPTY:
  case RT_ENAMETOOLONG:
  case RT_ETTL:
  case RT_ETIMEOUTARG:
  case RT_EURL:
  case RT_EPREFIX:
    return CLI_USAGE;
  default:
    return CLI_OSERR; /* RT_ENOMEM and anything unexpected */
  }
}

/* ---- common settings ----------------------------------------------------- */

/* An environment variable's value, or NULL when unset or empty. */
static const char *env_value(const char *name) {
  const char *v = getenv(name);
  return v != NULL && v[0] != '\0' ? v : NULL;
}

void cli_common_init(cli_common *c) {
  memset(c, 0, sizeof(*c));
  const char *env = env_value("REDTURN_URL");
  c->url_given = env != NULL;
  c->url = c->url_given ? env : CLI_DEFAULT_URL;
  c->prefix = CLI_DEFAULT_PREFIX;
  c->tls_ca = env_value("REDTURN_TLS_CA");
  c->tls_ca_dir = env_value("REDTURN_TLS_CA_DIR");
  c->tls_cert = env_value("REDTURN_TLS_CERT");
  c->tls_key = env_value("REDTURN_TLS_KEY");
  c->tls_server_name = env_value("REDTURN_TLS_SERVER_NAME");
  env = env_value("REDTURN_TLS_INSECURE");
  c->tls_insecure = env != NULL && strcmp(env, "0") != 0;
}

void cli_options(const cli_common *c, rt_options_t *o) {
  rt_options_init(o);
  o->url = c->url;
  o->prefix = c->prefix;
  o->label = c->label;
  o->tls_ca_file = c->tls_ca;
  o->tls_ca_dir = c->tls_ca_dir;
  o->tls_cert_file = c->tls_cert;
  o->tls_key_file = c->tls_key;
  o->tls_server_name = c->tls_server_name;
  o->tls_insecure = c->tls_insecure;
}

void cli_url_display(const char *url, char *buf, size_t cap) {
  const char *start = strstr(url, "://");
  const char *at, *colon, *slash;
  start = start != NULL ? start + 3 : url;
  slash = strchr(start, '/');
  at = strrchr(start, '@');
  if (at != NULL && (slash == NULL || at < slash)) {
    colon = memchr(start, ':', (size_t)(at - start));
    if (colon != NULL) {
      snprintf(buf, cap, "%.*s:***%s", (int)(colon - url), url, at);
      return;
    }
  }
  snprintf(buf, cap, "%s", url);
}

int cli_options_error(const char *cmd, const cli_common *c, int err) {
  rt_options_t o;
  char why[512];
  cli_options(c, &o);
  /* The library's own words: which option or URL part, and why. */
  if (rt_options_check(&o, why, sizeof(why)) == 0 || why[0] == '\0')
    snprintf(why, sizeof(why), "%s", rt_strerror(err));
  if (cli_exit_for(err) == CLI_USAGE)
    return cli_usage_error(cmd, "%s", why);
  fprintf(stderr, "%s: %s\n", cmd, why);
  return cli_exit_for(err);
}

const char *cli_why(rt_client_t *client, int status, char *buf, size_t cap) {
  const char *last = client != NULL ? rt_client_last_error(client) : "";
  /* "connection to HOST:PORT lost: ..." says all that RT_EDISCONNECTED's
   * "connection to Redis lost" would, and more. */
  if (status == RT_EDISCONNECTED && strncmp(last, "connection to ", 14) == 0)
    snprintf(buf, cap, "%s", last);
  else if (last[0] != '\0')
    snprintf(buf, cap, "%s: %s", rt_strerror(status), last);
  else
    snprintf(buf, cap, "%s", rt_strerror(status));
  return buf;
}

int cli_connect_error(const char *cmd, const cli_common *c, rt_client_t *client,
                      int status) {
  char url[512], why[512];
  cli_url_display(c->url, url, sizeof(url));
  fprintf(stderr, "%s: cannot use Redis at %s: %s\n", cmd, url,
          cli_why(client, status, why, sizeof(why)));
  return cli_exit_for(status);
}

/* ---- parsing ------------------------------------------------------------- */

static const cli_opt common_opts[] = {
    {"url", 0, 1, CLI_OPT_URL},
    {"prefix", 0, 1, CLI_OPT_PREFIX},
    {"help", 'h', 0, CLI_OPT_HELP},
    {"tls-ca", 0, 1, CLI_OPT_TLS_CA},
    {"tls-ca-dir", 0, 1, CLI_OPT_TLS_CA_DIR},
    {"tls-cert", 0, 1, CLI_OPT_TLS_CERT},
    {"tls-key", 0, 1, CLI_OPT_TLS_KEY},
    {"tls-server-name", 0, 1, CLI_OPT_TLS_SERVER_NAME},
    {"tls-insecure", 0, 0, CLI_OPT_TLS_INSECURE},
    {NULL, 0, 0, 0}};

int cli_usage_error(const char *cmd, const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "%s: ", cmd);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, " (see '%s --help')\n", cmd);
  return CLI_USAGE;
}

void cli_args_init(cli_args *a, int argc, char **argv, const char *cmd) {
  a->argc = argc;
  a->argv = argv;
  a->i = 0;
  a->only_positional = 0;
  a->cmd = cmd;
}

static const cli_opt *find_long(const cli_opt *opts, const char *name,
                                size_t len) {
  const cli_opt *tables[2] = {opts, common_opts};
  for (int t = 0; t < 2; t++)
    for (const cli_opt *o = tables[t]; o != NULL && o->name != NULL; o++)
      if (strlen(o->name) == len && memcmp(o->name, name, len) == 0)
        return o;
  return NULL;
}

static const cli_opt *find_short(const cli_opt *opts, char c) {
  const cli_opt *tables[2] = {opts, common_opts};
  for (int t = 0; t < 2; t++)
    for (const cli_opt *o = tables[t]; o != NULL && o->name != NULL; o++)
      if (o->short_name != 0 && o->short_name == c)
        return o;
  return NULL;
}

int cli_next(cli_args *a, const cli_opt *opts, int *id, const char **val) {
  if (a->i >= a->argc)
    return CLI_ARG_END;
  char *arg = a->argv[a->i++];
  *val = arg;
  if (a->only_positional || arg[0] != '-' || arg[1] == '\0')
    return CLI_ARG_POS;
  if (strcmp(arg, "--") == 0) {
    a->only_positional = 1;
    return cli_next(a, opts, id, val);
  }

  const cli_opt *o;
  const char *inline_val = NULL;
  if (arg[1] == '-') {
    const char *name = arg + 2;
    const char *eq = strchr(name, '=');
    size_t len = eq != NULL ? (size_t)(eq - name) : strlen(name);
    o = find_long(opts, name, len);
    if (o == NULL) {
      cli_usage_error(a->cmd, "unknown option '--%.*s'", (int)len, name);
      return CLI_ARG_ERR;
    }
    if (eq != NULL) {
      if (!o->has_arg) {
        cli_usage_error(a->cmd, "option '--%s' takes no value", o->name);
        return CLI_ARG_ERR;
      }
      inline_val = eq + 1;
    }
  } else {
    o = find_short(opts, arg[1]);
    if (o == NULL) {
      cli_usage_error(a->cmd, "unknown option '-%c'", arg[1]);
      return CLI_ARG_ERR;
    }
    if (arg[2] != '\0') {
      if (!o->has_arg) {
        cli_usage_error(a->cmd, "option '-%c' takes no value", arg[1]);
        return CLI_ARG_ERR;
      }
      inline_val = arg + 2;
    }
  }
  *id = o->id;
  *val = NULL;
  if (o->has_arg) {
    if (inline_val != NULL) {
      *val = inline_val;
    } else if (a->i < a->argc) {
      *val = a->argv[a->i++];
    } else {
      cli_usage_error(a->cmd, "option '--%s' needs a value", o->name);
      return CLI_ARG_ERR;
    }
  }
  return CLI_ARG_OPT;
}

int cli_common_opt(cli_common *c, int id, const char *val, int *help) {
  switch (id) {
  case CLI_OPT_URL:
    c->url = val;
    c->url_given = 1;
    return 1;
  case CLI_OPT_PREFIX:
    c->prefix = val;
    return 1;
  case CLI_OPT_HELP:
    *help = 1;
    return 1;
  case CLI_OPT_TLS_CA:
    c->tls_ca = val;
    return 1;
  case CLI_OPT_TLS_CA_DIR:
    c->tls_ca_dir = val;
    return 1;
  case CLI_OPT_TLS_CERT:
    c->tls_cert = val;
    return 1;
  case CLI_OPT_TLS_KEY:
    c->tls_key = val;
    return 1;
  case CLI_OPT_TLS_SERVER_NAME:
    c->tls_server_name = val;
    return 1;
  case CLI_OPT_TLS_INSECURE:
    c->tls_insecure = 1;
    return 1;
  default:
    return 0;
  }
}

/* ---- numbers ------------------------------------------------------------- */

static int parse_digits(const char *s, const char **end, uint64_t max,
                        uint64_t *out) {
  uint64_t v = 0;
  const char *p = s;
  if (*p < '0' || *p > '9')
    return -1;
  for (; *p >= '0' && *p <= '9'; p++) {
    unsigned d = (unsigned)(*p - '0');
    if (v > (max - d) / 10)
      return -1;
    v = v * 10 + d;
  }
  *end = p;
  *out = v;
  return 0;
}

/* A duration in ms into *out: NULL, or why s is not one (for a message). */
static const char *parse_ms(const char *s, int64_t *out) {
  /* A bare number is seconds, as flock(1) -w has it. */
  static const struct {
    const char *unit;
    uint64_t ms;
  } units[] = {
      {"", 1000}, {"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}};
  const char *p;
  uint64_t whole, frac = 0, tens = 1;
  if (s == NULL || s[0] == '\0')
    return "empty";
  if (s[0] == '-')
    return "negative";
  if (s[0] < '0' || s[0] > '9')
    return "not a number (say 5, 0.5, 300ms, 1.5s, 2m or 1h)";
  if (parse_digits(s, &p, UINT64_MAX, &whole) != 0)
    return "too large";
  if (*p == '.') {
    for (p++; *p >= '0' && *p <= '9'; p++) {
      if (tens == 1000000000)
        return "too many decimals";
      frac = frac * 10 + (uint64_t)(*p - '0');
      tens *= 10;
    }
    if (tens == 1)
      return "no digit after the '.'";
  }
  for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
    uint64_t scale = units[i].ms;
    if (strcmp(p, units[i].unit) != 0)
      continue;
    if (whole > (uint64_t)INT64_MAX / 2 / scale)
      return "too large";
    if (frac * scale % tens != 0)
      return "finer than a millisecond";
    *out = (int64_t)(whole * scale + frac * scale / tens);
    return NULL;
  }
  return "unknown unit (use ms, s, m or h; a bare number means seconds)";
}

int cli_duration_opt(const char *cmd, const char *opt, const char *s,
                     int64_t *out) {
  const char *why = parse_ms(s, out);
  if (why == NULL)
    return 0;
  return cli_usage_error(cmd, "bad duration '%.40s%s' for %s: %s", s,
                         strlen(s) > 40 ? "..." : "", opt, why);
}

int cli_parse_count(const char *s, long max, long *out) {
  const char *end;
  uint64_t v;
  if (s == NULL || parse_digits(s, &end, (uint64_t)max, &v) != 0 ||
      *end != '\0')
    return -1;
  *out = (long)v;
  return 0;
}
