/* redturn evict: an operator's forced release, as one Lua script (evict.lua
 * after the library's prelude) run over a plain hiredis connection. The
 * library itself has no eviction call: only its reap evicts, and only
 * holders whose lease is over.
 *
 * This file reuses two internal library functions (common.h), so that the
 * URL and the resource's keys mean exactly what they mean to the library:
 * rt__config_init() and rt__key_base(). */
#include <hiredis/hiredis.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "cli.h"
#include "cli_scripts.h"
#include "common.h"

enum { OPT_HOLDER = 1 };

static struct timeval tv_ms(int64_t ms) {
  struct timeval tv;
  tv.tv_sec = (time_t)(ms / 1000);
  tv.tv_usec = (suseconds_t)(ms % 1000 * 1000);
  return tv;
}

/* Exit code for an error reply. */
static int reply_error_code(const redisReply *r) {
  if (strncmp(r->str, "NOPERM", 6) == 0 ||
      strncmp(r->str, "WRONGPASS", 9) == 0 || strncmp(r->str, "NOAUTH", 6) == 0)
    return CLI_NOPERM;
  return CLI_PROTOCOL;
}

/* Run argv on rc; returns 0 with *out (an array reply) or an exit code
 * after printing why. */
static int command(redisContext *rc, const char *what, int argc,
                   const char **argv, const size_t *lens, redisReply **out) {
  redisReply *r = redisCommandArgv(rc, argc, argv, lens);
  if (r == NULL) {
    fprintf(stderr, "redturn evict: %s: %s\n", what,
            rc->errstr[0] ? rc->errstr : "no reply from Redis");
    return CLI_UNAVAILABLE;
  }
  if (r->type == REDIS_REPLY_ERROR) {
    fprintf(stderr, "redturn evict: %s: %s\n", what, r->str);
    int code = reply_error_code(r);
    freeReplyObject(r);
    return code;
  }
  *out = r;
  return 0;
}

static redisContext *connect_to(const rt__config *cfg, const char *url,
                                int *code) {
  char shown[512];
  redisReply *r = NULL;
  redisContext *rc = redisConnectWithTimeout(cfg->host, cfg->port,
                                             tv_ms(cfg->connect_timeout_ms));
  cli_url_display(url, shown, sizeof(shown));
  if (rc == NULL || rc->err) {
    fprintf(stderr, "redturn evict: cannot use Redis at %s: %s\n", shown,
            rc != NULL ? rc->errstr : "out of memory");
    redisFree(rc);
    *code = CLI_UNAVAILABLE;
    return NULL;
  }
  redisSetTimeout(rc, tv_ms(cfg->command_timeout_ms));
  if (cfg->password != NULL) {
    const char *argv[3] = {"AUTH", cfg->username, cfg->password};
    int argc = 3;
    if (cfg->username == NULL) {
      argv[1] = cfg->password;
      argc = 2;
    }
    *code = command(rc, "AUTH", argc, argv, NULL, &r);
    if (*code != 0) {
      redisFree(rc);
      return NULL;
    }
    freeReplyObject(r);
  }
  if (cfg->db != 0) {
    char db[24];
    snprintf(db, sizeof(db), "%d", cfg->db);
    const char *argv[2] = {"SELECT", db};
    *code = command(rc, "SELECT", 2, argv, NULL, &r);
    if (*code != 0) {
      redisFree(rc);
      return NULL;
    }
    freeReplyObject(r);
  }
  return rc;
}

static int is_str(const redisReply *r) {
  return r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS;
}

/* Report the script's answer; returns the exit code. */
static int report(const redisReply *r, const char *name, size_t len,
                  const char *want) {
  if (r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
      r->element[0]->type != REDIS_REPLY_INTEGER) {
    fprintf(stderr, "redturn evict: unexpected reply from Redis\n");
    return CLI_PROTOCOL;
  }
  long long kind = r->element[0]->integer;
  if (kind == 0) {
    fprintf(stderr, "redturn evict: refused: nobody holds ");
    cli_put_name(stderr, name, len);
    fputc('\n', stderr);
    return CLI_REFUSED;
  }
  if (kind == -1 && r->elements == 2 && is_str(r->element[1])) {
    fprintf(stderr, "redturn evict: refused: ");
    cli_put_name(stderr, name, len);
    fprintf(stderr, " is held by %s, not by %s\n", r->element[1]->str,
            want != NULL ? want : "?");
    return CLI_REFUSED;
  }
  if (kind != 1 || r->elements != 4 || !is_str(r->element[1]) ||
      !is_str(r->element[2]) || r->element[3]->type != REDIS_REPLY_INTEGER) {
    fprintf(stderr, "redturn evict: unexpected reply from Redis\n");
    return CLI_PROTOCOL;
  }
  const char *evicted = r->element[1]->str;
  printf("evicted %s (client %.32s) from ", evicted, evicted);
  cli_put_name(stdout, name, len);
  if (r->element[2]->len == 0)
    printf("; the queue is now empty\n");
  else
    printf("; granted to %s, fence %lld\n", r->element[2]->str,
           r->element[3]->integer);
  return CLI_OK;
}

static int evict(const cli_common *common, const char *name,
                 const char *holder) {
  rt_options_t o;
  rt__config cfg;
  int code = 0;
  size_t len = strlen(name), base_len;

  cli_options(common, &o);
  int err = rt__config_init(&cfg, &o);
  if (err != 0)
    return cli_options_error("redturn evict", common, err);
  if (cfg.tls) {
    /* Its connection is a blocking hiredis one, which has no TLS. */
    rt__config_free(&cfg);
    fprintf(stderr, "redturn evict: TLS (rediss://) is not supported by "
                    "evict; run it where Redis has a plain port\n");
    return CLI_USAGE;
  }
  redisContext *rc = connect_to(&cfg, common->url, &code);
  if (rc == NULL) {
    rt__config_free(&cfg);
    return code;
  }

  char *base = rt__key_base(cfg.prefix, cfg.prefix_len, name, len, &base_len);
  char *keys = base != NULL ? malloc(RT__KEYS * (base_len + 1)) : NULL;
  char *chan = malloc(cfg.prefix_len + 4);
  if (keys == NULL || chan == NULL) {
    fprintf(stderr, "redturn evict: out of memory\n");
    code = CLI_OSERR;
    goto done;
  }
  for (int i = 0; i < RT__KEYS; i++) {
    memcpy(keys + i * (base_len + 1), base, base_len);
    keys[i * (base_len + 1) + base_len] = RT__KEY_SUFFIXES[i];
  }
  snprintf(chan, cfg.prefix_len + 4, "%s:c:", cfg.prefix);

  const char *argv[8] = {"EVAL",
                         cli_scripts[CLI_SCRIPT_EVICT].body,
                         "3",
                         keys,
                         keys + base_len + 1,
                         keys + 2 * (base_len + 1),
                         chan,
                         holder != NULL ? holder : ""};
  size_t lens[8] = {4,
                    cli_scripts[CLI_SCRIPT_EVICT].len,
                    1,
                    base_len + 1,
                    base_len + 1,
                    base_len + 1,
                    strlen(chan),
                    strlen(argv[7])};
  redisReply *r = NULL;
  code = command(rc, "EVAL", 8, argv, lens, &r);
  if (code == 0) {
    code = report(r, name, len, holder);
    freeReplyObject(r);
  }

done:
  free(chan);
  free(keys);
  free(base);
  redisFree(rc);
  rt__config_free(&cfg);
  return code;
}

int cli_evict(cli_common *common, int argc, char **argv) {
  static const cli_opt opts[] = {{"holder", 0, 1, OPT_HOLDER}, {NULL, 0, 0, 0}};
  const char *cmd = "redturn evict";
  const char *name = NULL, *holder = NULL, *val;
  cli_args a;
  int id, help = 0;

  cli_args_init(&a, argc, argv, cmd);
  for (;;) {
    int kind = cli_next(&a, opts, &id, &val);
    if (kind == CLI_ARG_ERR)
      return CLI_USAGE;
    if (kind == CLI_ARG_END)
      break;
    if (kind == CLI_ARG_POS) {
      if (name != NULL)
        return cli_usage_error(cmd, "one RESOURCE at a time");
      name = val;
    } else if (!cli_common_opt(common, id, val, &help)) {
      if (val[0] == '\0')
        return cli_usage_error(cmd, "--holder is empty");
      holder = val;
    }
  }
  if (help) {
    cli_help_evict(stdout);
    return CLI_OK;
  }
  if (name == NULL)
    return cli_usage_error(cmd, "missing RESOURCE");
  if (name[0] == '\0')
    return cli_usage_error(cmd, "RESOURCE is empty");
  return evict(common, name, holder);
}
