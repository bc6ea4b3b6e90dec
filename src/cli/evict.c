/* redturn evict: an operator's forced release, as one Lua script (evict.lua
 * after the library's prelude) run over a plain hiredis connection. The
 * library itself has no eviction call: only its reap evicts, and only
 * holders whose lease is over.
 *
 * The URL and the resource's keys mean here what they mean to a client:
 * rt_options_resolve() and rt_key_base() give them. */
#include <hiredis/hiredis.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "cli.h"
#include "cli_scripts.h"

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

static redisContext *connect_to(const rt_options_t *cfg, const char *url,
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

/* The resource's three keys, in the order evict.lua takes them, each
 * key_len + 1 bytes apart in one allocation; NULL when out of memory. */
static char *resource_keys(const char *prefix, const char *name, size_t len,
                           size_t *key_len) {
  static const char suffixes[] = "qhm"; /* queue, holder, members */
  size_t base_len = rt_key_base(prefix, name, len, NULL, 0);
  char *keys = base_len > 0 ? malloc(3 * (base_len + 2)) : NULL;
  if (keys == NULL)
    return NULL;
  for (int i = 0; i < 3; i++) {
    char *key = keys + i * (base_len + 2);
    rt_key_base(prefix, name, len, key, base_len + 1);
    key[base_len] = suffixes[i];
    key[base_len + 1] = '\0';
  }
  *key_len = base_len + 1;
  return keys;
}

/* Run evict.lua on the resource's keys; returns the exit code. */
static int run_evict(redisContext *rc, const rt_options_t *cfg,
                     const char *name, const char *holder) {
  size_t len = strlen(name), key_len = 0;
  char *keys = resource_keys(cfg->prefix, name, len, &key_len);
  size_t chan_cap = strlen(cfg->prefix) + 4;
  char *chan = malloc(chan_cap);
  int code;
  if (keys == NULL || chan == NULL) {
    fprintf(stderr, "redturn evict: out of memory\n");
    code = CLI_OSERR;
    goto done;
  }
  snprintf(chan, chan_cap, "%s:c:", cfg->prefix);
  const char *argv[8] = {"EVAL",
                         cli_scripts[CLI_SCRIPT_EVICT].body,
                         "3",
                         keys,
                         keys + (key_len + 1),
                         keys + 2 * (key_len + 1),
                         chan,
                         holder != NULL ? holder : ""};
  size_t lens[8] = {4,
                    cli_scripts[CLI_SCRIPT_EVICT].len,
                    1,
                    key_len,
                    key_len,
                    key_len,
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
  return code;
}

static int evict(const cli_common *common, const char *name,
                 const char *holder) {
  rt_options_t o, *cfg = NULL;
  int code = 0;

  cli_options(common, &o);
  int err = rt_options_resolve(&o, &cfg);
  if (err != 0)
    return cli_options_error("redturn evict", common, err);
  if (cfg->tls || cfg->url != NULL) {
    /* Its connection is a blocking hiredis one, which has no TLS and
     * does not ask Sentinels (a resolved Sentinel URL stays a URL). */
    int sentinel = cfg->url != NULL;
    rt_options_free(cfg);
    fprintf(stderr, sentinel
                        ? "redturn evict: a redis-sentinel:// URL is not "
                          "supported by evict; give the master's redis:// URL\n"
                        : "redturn evict: TLS (rediss://) is not supported by "
                          "evict; run it where Redis has a plain port\n");
    return CLI_USAGE;
  }
  redisContext *rc = connect_to(cfg, common->url, &code);
  if (rc != NULL) {
    code = run_evict(rc, cfg, name, holder);
    redisFree(rc);
  }
  rt_options_free(cfg);
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
