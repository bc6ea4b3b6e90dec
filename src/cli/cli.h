/* The `redturn` command-line tool: what its files share. */
#ifndef RT_CLI_H
#define RT_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <redturn.h>

/* ---- exit codes (sysexits.h values; see docs/CLI.md) --------------------- */

enum {
  CLI_OK = 0,
  CLI_REFUSED = 1,      /* evict: the named request is not the holder, or
                    * nobody holds the lock; run: the lock was busy or
                    * the wait timed out (as flock) */
  CLI_USAGE = 64,       /* EX_USAGE: bad arguments */
  CLI_UNAVAILABLE = 69, /* EX_UNAVAILABLE: Redis unreachable */
  CLI_LOST = 70,        /* run: the lock was lost while the command ran */
  CLI_OSERR = 71,       /* EX_OSERR: out of memory, cannot fork, ... */
  CLI_PROTOCOL = 76,    /* EX_PROTOCOL: Redis error or unexpected reply */
  CLI_NOPERM = 77,      /* EX_NOPERM: authentication failed, ACL denied */
  CLI_CONFIG = 78,      /* EX_CONFIG: the server does not suit (too old, no
                         * module where asked for, may evict keys) */
  CLI_CANNOT_EXEC = 126,
  CLI_NOT_FOUND = 127,
  CLI_SIGNAL_BASE = 128 /* + signal number */
};

/* Exit code for a library error code. */
int cli_exit_for(int rt_status);

/* ---- options shared by every subcommand ---------------------------------- */

typedef struct cli_common {
  const char *url;    /* --url, else $REDTURN_URL, else the default */
  const char *prefix; /* --prefix, default "rt" */
  int url_given;      /* --url or $REDTURN_URL was set */
  const char *label;  /* run: the requests' label (--label), NULL: none */
  /* TLS (--tls-*, else $REDTURN_TLS_*): rt_options_t's tls_* fields. */
  const char *tls_ca, *tls_ca_dir, *tls_cert, *tls_key, *tls_server_name;
  int tls_insecure;
} cli_common;

#define CLI_DEFAULT_URL "redis://127.0.0.1:6379"
#define CLI_DEFAULT_PREFIX "rt"

/* Fill the defaults (reads REDTURN_URL and the REDTURN_TLS_* variables). */
void cli_common_init(cli_common *c);
/* Library options for these settings. */
void cli_options(const cli_common *c, rt_options_t *o);
/* The URL with any password replaced by "***", for messages. */
void cli_url_display(const char *url, char *buf, size_t cap);

/* ---- argument parsing ---------------------------------------------------- */

typedef struct cli_opt {
  const char *name; /* long name, without "--" */
  char short_name;  /* or 0 */
  int has_arg;
  int id;
} cli_opt;

/* Ids of the options every subcommand accepts. */
enum {
  CLI_OPT_URL = 1000,
  CLI_OPT_PREFIX,
  CLI_OPT_HELP,
  CLI_OPT_TLS_CA,
  CLI_OPT_TLS_CA_DIR,
  CLI_OPT_TLS_CERT,
  CLI_OPT_TLS_KEY,
  CLI_OPT_TLS_SERVER_NAME,
  CLI_OPT_TLS_INSECURE
};

typedef struct cli_args {
  int argc;
  char **argv;
  int i;               /* next argument */
  int only_positional; /* "--" was seen */
  const char *cmd;     /* "redturn run", for messages */
} cli_args;

enum { CLI_ARG_END = 0, CLI_ARG_OPT, CLI_ARG_POS, CLI_ARG_ERR };

void cli_args_init(cli_args *a, int argc, char **argv, const char *cmd);
/* Next option (*id, *val) or positional argument (*val), CLI_ARG_END, or
 * CLI_ARG_ERR (message printed). opts ends with a zeroed entry; the common
 * options (--url, --prefix, --tls-*, -h/--help) are always recognised. */
int cli_next(cli_args *a, const cli_opt *opts, int *id, const char **val);
/* Apply a common option; returns 1 if id was one (help: *help set). */
int cli_common_opt(cli_common *c, int id, const char *val, int *help);

/* Why rt_client_open() (or the library's option check) refused the
 * settings, as "<cmd>: <message>" on stderr; returns the exit code. For
 * RT_EURL the message says which part of the URL is wrong. */
int cli_options_error(const char *cmd, const cli_common *c, int err);

/* "<rt_strerror(status)>: <what the client last met>" (Redis's own error
 * text, the errno behind a failed connect, ...) into buf; returns buf. */
const char *cli_why(rt_client_t *client, int status, char *buf, size_t cap);
/* "<cmd>: cannot use Redis at <url>: <why>" on stderr, after a failed
 * connect; returns the exit code. */
int cli_connect_error(const char *cmd, const cli_common *c, rt_client_t *client,
                      int status);

/* Print "<cmd>: <message>; see '<cmd> --help'" and return CLI_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Durations: a number of seconds as in flock(1), fractions allowed
 * ("0.5"), or a number with a unit ms, s, m or h ("300ms", "1.5s", "2m").
 * 0 with *out in ms, or CLI_USAGE after printing
 * "<cmd>: bad duration '<s>' for <opt>: <why>". */
int cli_duration_opt(const char *cmd, const char *opt, const char *s,
                     int64_t *out);
/* A non-negative decimal integer up to max. 0 or -1. */
int cli_parse_count(const char *s, long max, long *out);

/* ---- output helpers ------------------------------------------------------ */

/* Human duration: "850 ms", "2.3 s", "4m05s", "2h03m". */
void cli_fmt_ms(char *buf, size_t cap, int64_t ms);
/* Write bytes for humans between double quotes: \\ \" \n \t, other
 * control bytes and invalid UTF-8 as \xNN. */
void cli_put_text(FILE *f, const void *s, size_t len);
/* A resource name in a message: as cli_put_text, but a long name is cut
 * ("first bytes"... (N bytes)) so that no message echoes 4 KB. */
void cli_put_name(FILE *f, const void *s, size_t len);
/* A JSON string (with the quotes): invalid UTF-8 bytes as \u00NN. */
void cli_put_json(FILE *f, const void *s, size_t len);
/* A Prometheus label value (without quotes): \\ \" \n as the text format
 * says; other control bytes and invalid UTF-8 as the four characters
 * \xNN (written "\\xNN"). */
void cli_put_prom(FILE *f, const void *s, size_t len);

/* Monotonic milliseconds. */
uint64_t cli_now_ms(void);

/* ---- the command of `run` (child.c) ------------------------------------- */

typedef struct cli_child {
  int pid;    /* the keeper, leader of the command's process group; 0: none */
  int tty_fd; /* the terminal handed to that group, or -1 */
} cli_child;

/* Start argv[0] (searched in PATH) with argv and envp in a new process
 * group under a keeper process that kills the group should redturn die.
 * The command inherits only descriptors 0, 1 and 2, and takes redturn's
 * terminal foreground if redturn has it. Returns 0, or the errno of the
 * failed fork or exec (ch->pid is then the keeper to reap, or 0). */
int cli_child_start(cli_child *ch, char *const *argv, char *const *envp);
/* Send sig to the command's whole process group. */
void cli_child_kill(const cli_child *ch, int sig);
/* If the keeper exited: kill what is left of the group, take the terminal
 * back, set *code (the command's exit code, 128+N if signal N killed it)
 * and return 1; else 0. */
int cli_child_reap(cli_child *ch, int *code);

/* ---- subcommands --------------------------------------------------------- */

int cli_run(cli_common *c, int argc, char **argv);
int cli_inspect(cli_common *c, int argc, char **argv);
int cli_leader(cli_common *c, int argc, char **argv);
int cli_watch(cli_common *c, int argc, char **argv);
int cli_evict(cli_common *c, int argc, char **argv);
int cli_demo(cli_common *c, int argc, char **argv);

/* Help texts (help.c). */
void cli_help_main(FILE *f);
void cli_help_run(FILE *f);
void cli_help_inspect(FILE *f);
void cli_help_leader(FILE *f);
void cli_help_watch(FILE *f);
void cli_help_evict(FILE *f);
void cli_help_demo(FILE *f);

#endif /* RT_CLI_H */
