/* The benchmark's redis-server (started with tools/rtserver.h) and
 * the parent's blocking connections:
 * INFO and MEMORY STATS snapshots, SCRIPT LOAD, and MONITOR (the order in
 * which Redis executed commands, for the FIFO check). */
#define _GNU_SOURCE
#include <errno.h>
#include <hiredis/hiredis.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "redturn.h"

struct rtb_sync {
  redisContext *c;
};

struct rtb_monitor {
  redisContext *c;
  rtb_monitor_cb cb;
  void *data;
};

int rtb_server_start(rtb_server *s, const char *path, const char *module) {
  char err[1600];
  rts_options o;
  const char *extra[] = {"--loadmodule", module, NULL};
  memset(s, 0, sizeof(*s));
  memset(&o, 0, sizeof(o));
  o.exe = path;
  o.extra = module != NULL ? extra : NULL;
  o.no_module = 1; /* the run names its module itself (--module) */
  o.dir_prefix = "redturn-bench";
  snprintf(s->host, sizeof(s->host), "127.0.0.1");
  if (rts_start(&s->own, &o, err, sizeof(err)) != 0) {
    fprintf(stderr, "redturn-bench: %s\n", err);
    return -1;
  }
  s->port = s->own.port;
  return 0;
}

void rtb_server_stop(rtb_server *s) { rts_stop(&s->own); }

int rtb_parse_url(const char *url, rtb_server *s) {
  /* The library's own parser, so a URL means here what it means to the
   * clients being measured; the benchmark adds its limits (no ACL user,
   * db 0). */
  rt_options_t o, *cfg;
  rt_options_init(&o);
  o.url = url;
  memset(s, 0, sizeof(*s));
  if (rt_options_resolve(&o, &cfg) != 0)
    return -1;
  int ok = cfg->username == NULL && cfg->db == 0 &&
           strlen(cfg->host) < sizeof(s->host);
  if (ok) {
    snprintf(s->host, sizeof(s->host), "%s", cfg->host);
    s->port = cfg->port;
    s->password = cfg->password != NULL ? strdup(cfg->password) : NULL;
  }
  rt_options_free(cfg);
  return ok ? 0 : -1;
}

/* ---- blocking connection ------------------------------------------------- */

static redisContext *connect_auth(const rtb_server *s) {
  struct timeval tv = {5, 0};
  redisContext *c = redisConnectWithTimeout(s->host, s->port, tv);
  if (c == NULL || c->err) {
    fprintf(stderr, "redturn-bench: cannot connect to %s:%d: %s\n", s->host,
            s->port, c != NULL ? c->errstr : "out of memory");
    if (c != NULL)
      redisFree(c);
    return NULL;
  }
  if (s->password != NULL) {
    redisReply *r = redisCommand(c, "AUTH %s", s->password);
    int ok = r != NULL && r->type != REDIS_REPLY_ERROR;
    if (r != NULL)
      freeReplyObject(r);
    if (!ok) {
      fprintf(stderr, "redturn-bench: AUTH failed\n");
      redisFree(c);
      return NULL;
    }
  }
  return c;
}

rtb_sync *rtb_sync_open(const rtb_server *s) {
  redisContext *c = connect_auth(s);
  if (c == NULL)
    return NULL;
  rtb_sync *y = calloc(1, sizeof(*y));
  if (y == NULL) {
    redisFree(c);
    return NULL;
  }
  y->c = c;
  return y;
}

void rtb_sync_close(rtb_sync *y) {
  if (y == NULL)
    return;
  redisFree(y->c);
  free(y);
}

int rtb_sync_cmd(rtb_sync *y, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  redisReply *r = redisvCommand(y->c, fmt, ap);
  va_end(ap);
  int ok = r != NULL && r->type != REDIS_REPLY_ERROR;
  if (r != NULL && r->type == REDIS_REPLY_ERROR)
    fprintf(stderr, "redturn-bench: %s: %s\n", fmt, r->str);
  if (r != NULL)
    freeReplyObject(r);
  return ok ? 0 : -1;
}

char *rtb_sync_info(rtb_sync *y, const char *section) {
  redisReply *r = redisCommand(y->c, "INFO %s", section);
  char *s = NULL;
  if (r != NULL && r->type == REDIS_REPLY_STRING)
    s = strndup(r->str, r->len);
  if (r != NULL)
    freeReplyObject(r);
  return s;
}

double rtb_info_num(const char *info, const char *name) {
  size_t n = strlen(name);
  for (const char *p = info; p != NULL && *p; p = strchr(p, '\n')) {
    if (*p == '\n')
      p++;
    if (strncmp(p, name, n) == 0 && p[n] == ':')
      return strtod(p + n + 1, NULL);
  }
  return NAN;
}

long long rtb_info_calls(const char *info) {
  static const char *const skip[] = {"info",   "config",   "monitor", "echo",
                                     "script", "flushall", "memory"};
  long long sum = 0;
  if (info == NULL)
    return -1;
  for (const char *p = strstr(info, "cmdstat_"); p != NULL;
       p = strstr(p + 1, "\ncmdstat_")) {
    if (*p == '\n')
      p++;
    const char *name = p + 8;
    size_t nl = strcspn(name, ":|");
    int skipped = 0;
    for (size_t i = 0; i < sizeof(skip) / sizeof(skip[0]); i++)
      if (strlen(skip[i]) == nl && strncmp(name, skip[i], nl) == 0)
        skipped = 1;
    const char *calls = strstr(name, "calls=");
    const char *eol = strchr(name, '\n');
    if (calls == NULL || (eol != NULL && calls > eol))
      continue;
    if (!skipped)
      sum += strtoll(calls + 6, NULL, 10);
  }
  return sum;
}

int rtb_sync_key_usage(rtb_sync *y, const char *prefix, unsigned keys,
                       long long *waiting_bytes, long long *holder_bytes) {
  /* Per resource: the waiters' list q and their hash m, then the holder
   * record h. */
  static const char *const suffixes[] = {"q", "m", "h"};
  *waiting_bytes = *holder_bytes = 0;
  for (unsigned i = 0; i < keys; i++)
    for (int k = 0; k < 3; k++)
      redisAppendCommand(y->c, "MEMORY USAGE %s:{r%u}:%s SAMPLES 0", prefix, i,
                         suffixes[k]);
  int rc = 0;
  for (unsigned i = 0; i < 3 * keys; i++) {
    void *reply = NULL;
    if (redisGetReply(y->c, &reply) != REDIS_OK)
      return -1;
    redisReply *r = reply;
    if (r->type == REDIS_REPLY_INTEGER)
      *(i % 3 == 2 ? holder_bytes : waiting_bytes) += r->integer;
    else if (r->type != REDIS_REPLY_NIL)
      rc = -1;
    freeReplyObject(r);
  }
  return rc;
}

int rtb_sync_prefix_usage(rtb_sync *y, const char *prefix, long long *keys,
                          long long *bytes) {
  char cursor[32] = "0";
  *keys = *bytes = 0;
  do {
    redisReply *r =
        redisCommand(y->c, "SCAN %s MATCH %s:* COUNT 1000", cursor, prefix);
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != REDIS_REPLY_STRING) {
      if (r != NULL)
        freeReplyObject(r);
      return -1;
    }
    snprintf(cursor, sizeof(cursor), "%s", r->element[0]->str);
    const redisReply *ks = r->element[1];
    for (size_t i = 0; i < ks->elements; i++) {
      redisReply *m = redisCommand(y->c, "MEMORY USAGE %b SAMPLES 0",
                                   ks->element[i]->str, ks->element[i]->len);
      if (m != NULL && m->type == REDIS_REPLY_INTEGER) {
        ++*keys;
        *bytes += m->integer;
      }
      if (m != NULL)
        freeReplyObject(m);
    }
    freeReplyObject(r);
  } while (strcmp(cursor, "0") != 0);
  return 0;
}

int rtb_sync_has_module(rtb_sync *y) {
  redisReply *r = redisCommand(y->c, "MODULE LIST");
  int found = 0;
  /* An array of modules, each a flat list of field, value pairs. */
  for (size_t i = 0;
       r != NULL && r->type == REDIS_REPLY_ARRAY && i < r->elements && !found;
       i++) {
    const redisReply *m = r->element[i];
    for (size_t j = 0; m->type == REDIS_REPLY_ARRAY && j + 1 < m->elements;
         j += 2)
      if (m->element[j]->type == REDIS_REPLY_STRING &&
          strcmp(m->element[j]->str, "name") == 0 &&
          m->element[j + 1]->type == REDIS_REPLY_STRING &&
          strcmp(m->element[j + 1]->str, "redturn") == 0)
        found = 1;
  }
  if (r != NULL)
    freeReplyObject(r);
  return found;
}

int rtb_sync_script_load(rtb_sync *y, const char *body, char *sha) {
  redisReply *r = redisCommand(y->c, "SCRIPT LOAD %s", body);
  int ok = r != NULL && r->type == REDIS_REPLY_STRING && r->len == 40;
  if (ok)
    memcpy(sha, r->str, 41);
  if (r != NULL)
    freeReplyObject(r);
  return ok ? 0 : -1;
}

/* ---- MONITOR ----------------------------------------------------------------- */

rtb_monitor *rtb_monitor_open(const rtb_server *s, rtb_monitor_cb cb,
                              void *data) {
  redisContext *c = connect_auth(s);
  if (c == NULL)
    return NULL;
  redisReply *r = redisCommand(c, "MONITOR");
  int ok = r != NULL && r->type == REDIS_REPLY_STATUS;
  if (r != NULL)
    freeReplyObject(r);
  rtb_monitor *m = ok ? calloc(1, sizeof(*m)) : NULL;
  if (m == NULL) {
    fprintf(stderr, "redturn-bench: MONITOR failed\n");
    redisFree(c);
    return NULL;
  }
  m->c = c;
  m->cb = cb;
  m->data = data;
  return m;
}

int rtb_monitor_fd(const rtb_monitor *m) { return m->c->fd; }

int rtb_monitor_read(rtb_monitor *m) {
  if (redisBufferRead(m->c) != REDIS_OK)
    return -1;
  for (;;) {
    void *reply = NULL;
    if (redisGetReplyFromReader(m->c, &reply) != REDIS_OK)
      return -1;
    if (reply == NULL)
      return 0;
    redisReply *r = reply;
    if (r->type == REDIS_REPLY_STATUS)
      m->cb(r->str, r->len, m->data);
    freeReplyObject(r);
  }
}

void rtb_monitor_close(rtb_monitor *m) {
  if (m == NULL)
    return;
  redisFree(m->c);
  free(m);
}
