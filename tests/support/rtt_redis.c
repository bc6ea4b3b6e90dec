/* Test support: synchronous hiredis connections to the servers and what
 * the tests read through them (queues, holder records, stats); see
 * rt_test.h. */
#include "rtt_internal.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
/* ---- synchronous hiredis ----------------------------------------------------- */

/* Synchronous connections opened by this process, freed by rtt_cleanup()
 * even when an assertion ended the test early. */
#define RTT_MAX_CONNS 32
static redisContext *conns[RTT_MAX_CONNS];
static pid_t conns_owner;

void rtt__redis_close_all(void) {
  if (getpid() != conns_owner)
    return;
  for (int i = 0; i < RTT_MAX_CONNS; i++) {
    if (conns[i] != NULL)
      redisFree(conns[i]);
    conns[i] = NULL;
  }
}

redisContext *rtt_redis_at(int port) {
  struct timeval tv = {5, 0};
  redisContext *rc = redisConnectWithTimeout("127.0.0.1", port, tv);
  cr_assert(rc != NULL && rc->err == 0, "cannot connect to 127.0.0.1:%d: %s",
            port, rc ? rc->errstr : "no memory");
  redisSetTimeout(rc, (struct timeval){10, 0});
  if (conns_owner != getpid()) {
    memset(conns, 0, sizeof(conns)); /* a fork's copies are the parent's */
    conns_owner = getpid();
  }
  int i;
  for (i = 0; i < RTT_MAX_CONNS && conns[i] != NULL; i++) {
  }
  cr_assert_lt(i, RTT_MAX_CONNS, "too many rtt_redis connections");
  conns[i] = rc;
  return rc;
}

void rtt_redis_close(redisContext *rc) {
  if (rc == NULL)
    return;
  if (conns_owner == getpid())
    for (int i = 0; i < RTT_MAX_CONNS; i++)
      if (conns[i] == rc)
        conns[i] = NULL;
  redisFree(rc);
}

redisContext *rtt_redis(void) { return rtt_redis_at(rtt_port()); }

redisReply *rtt_cmd(redisContext *rc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  redisReply *r = redisvCommand(rc, fmt, ap);
  va_end(ap);
  cr_assert_not_null(r, "no reply to \"%s\": %s", fmt, rc->errstr);
  return r;
}

long long rtt_int(redisContext *rc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  redisReply *r = redisvCommand(rc, fmt, ap);
  va_end(ap);
  cr_assert_not_null(r, "no reply to \"%s\": %s", fmt, rc->errstr);
  cr_assert_eq(r->type, REDIS_REPLY_INTEGER, "\"%s\" answered type %d: %s", fmt,
               r->type, r->str ? r->str : "");
  long long v = r->integer;
  freeReplyObject(r);
  return v;
}

void rtt_ok(redisContext *rc, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  redisReply *r = redisvCommand(rc, fmt, ap);
  va_end(ap);
  cr_assert_not_null(r, "no reply to \"%s\": %s", fmt, rc->errstr);
  cr_assert_neq(r->type, REDIS_REPLY_ERROR, "\"%s\" failed: %s", fmt, r->str);
  freeReplyObject(r);
}

void rtt_err(redisContext *rc, char *buf, size_t cap, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  redisReply *r = redisvCommand(rc, fmt, ap);
  va_end(ap);
  cr_assert_not_null(r, "no reply to \"%s\": %s", fmt, rc->errstr);
  cr_assert_eq(r->type, REDIS_REPLY_ERROR, "\"%s\" did not fail", fmt);
  snprintf(buf, cap, "%s", r->str);
  freeReplyObject(r);
}

int64_t rtt_redis_time_ms(redisContext *rc) {
  redisReply *r = rtt_cmd(rc, "TIME");
  cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 2);
  int64_t ms =
      atoll(r->element[0]->str) * 1000 + atoll(r->element[1]->str) / 1000;
  freeReplyObject(r);
  return ms;
}

static const char *info_find(const char *text, const char *field) {
  size_t n = strlen(field);
  for (const char *p = text; p != NULL && *p; p = strchr(p, '\n')) {
    if (*p == '\n')
      p++;
    if (strncmp(p, field, n) == 0 && p[n] == ':')
      return p + n + 1;
  }
  return NULL;
}

long long rtt_info_ll(redisContext *rc, const char *section,
                      const char *field) {
  redisReply *r = rtt_cmd(rc, "INFO %s", section);
  cr_assert_eq(r->type, REDIS_REPLY_STRING);
  const char *v = info_find(r->str, field);
  cr_assert_not_null(v, "INFO %s has no %s", section, field);
  long long n = atoll(v);
  freeReplyObject(r);
  return n;
}

int rtt_replica_has_all(int master_port, int replica_port, int timeout_ms) {
  redisContext *m = rtt_redis_at(master_port), *r = rtt_redis_at(replica_port);
  long long written = rtt_info_ll(m, "replication", "master_repl_offset");
  uint64_t until = rtt_now_ms() + (uint64_t)timeout_ms;
  int has;
  while (
      !(has = rtt_info_ll(r, "replication", "slave_repl_offset") >= written) &&
      rtt_now_ms() < until)
    rtt_sleep_ms(10);
  rtt_redis_close(m);
  rtt_redis_close(r);
  return has;
}

long long rtt_cluster_info_ll(int port, const char *field) {
  redisContext *rc = rtt_redis_at(port);
  redisReply *r = rtt_cmd(rc, "CLUSTER INFO");
  cr_assert_eq(r->type, REDIS_REPLY_STRING);
  const char *v = info_find(r->str, field);
  cr_assert_not_null(v, "CLUSTER INFO has no %s", field);
  long long n = atoll(v);
  freeReplyObject(r);
  rtt_redis_close(rc);
  return n;
}

long long rtt_cmdstat_calls(redisContext *rc, const char *cmd) {
  char field[64];
  snprintf(field, sizeof(field), "cmdstat_%s", cmd);
  redisReply *r = rtt_cmd(rc, "INFO commandstats");
  cr_assert_eq(r->type, REDIS_REPLY_STRING);
  const char *v = info_find(r->str, field);
  long long n = 0;
  if (v != NULL && strncmp(v, "calls=", 6) == 0)
    n = atoll(v + 6);
  freeReplyObject(r);
  return n;
}

long long rtt_script_calls(redisContext *rc) {
  static const char *const native[] = {"enqueue", "try",    "release",
                                       "reap",    "extend", "inspect"};
  long long n = rtt_cmdstat_calls(rc, "evalsha") +
                rtt_cmdstat_calls(rc, "eval") + rtt_cmdstat_calls(rc, "fcall") +
                rtt_cmdstat_calls(rc, "fcall_ro");
  for (size_t i = 0; i < sizeof(native) / sizeof(native[0]); i++) {
    char cmd[32];
    snprintf(cmd, sizeof(cmd), "redturn.%s", native[i]);
    n += rtt_cmdstat_calls(rc, cmd);
  }
  return n;
}

long long rtt_conn_id(redisContext *rc, const char *kind,
                      const char *client_id) {
  char want[160];
  int n = snprintf(want, sizeof(want), " name=redturn-%s-%s ", kind, client_id);
  cr_assert(n > 0 && (size_t)n < sizeof(want), "rtt_conn_id: name too long");
  redisReply *r = rtt_cmd(rc, "CLIENT LIST");
  cr_assert_eq(r->type, REDIS_REPLY_STRING, "CLIENT LIST answered type %d: %s",
               r->type, r->str ? r->str : "");
  long long id = -1;
  for (char *line = r->str; line != NULL && *line != '\0';) {
    char *end = strchr(line, '\n');
    if (end != NULL)
      *end = '\0';
    if (strstr(line, want) != NULL && strncmp(line, "id=", 3) == 0)
      id = atoll(line + 3);
    line = end != NULL ? end + 1 : NULL;
  }
  freeReplyObject(r);
  return id;
}

int rtt_kill_conn(redisContext *rc, const char *kind, const char *client_id) {
  long long id = rtt_conn_id(rc, kind, client_id);
  if (id < 0)
    return 0;
  return rtt_int(rc, "CLIENT KILL ID %lld", id) == 1;
}

size_t rtt_key(char *buf, size_t cap, const char *prefix, const void *name,
               size_t len, char suffix) {
  const unsigned char *s = name;
  size_t n = 0;
  size_t plen = strlen(prefix);
  cr_assert_geq(cap, plen + 3 * len + 8, "rtt_key: buffer too small");
  memcpy(buf, prefix, plen);
  n = plen;
  buf[n++] = ':';
  buf[n++] = '{';
  for (size_t i = 0; i < len; i++) {
    const char *esc = s[i] == '%'   ? "%25"
                      : s[i] == '{' ? "%7B"
                      : s[i] == '}' ? "%7D"
                                    : NULL;
    if (esc != NULL) {
      memcpy(buf + n, esc, 3);
      n += 3;
    } else {
      buf[n++] = (char)s[i];
    }
  }
  buf[n++] = '}';
  buf[n++] = ':';
  buf[n++] = suffix;
  buf[n] = '\0';
  return n;
}

static size_t key_cap(const char *prefix, size_t len) {
  return strlen(prefix) + 3 * len + 8;
}

/* The resource as the library reads it (lua/lib/prelude.lua): the holder
 * id (h's record without its label, "" if none) and its fence, deadline
 * and grant time, then the live waiters in order (entries of q that are
 * members of m). */
static const char snapshot_lua[] =
    "local out = {'', -1, -1, -1}\n"
    "local v = redis.call('GET', KEYS[2])\n"
    "if v then\n"
    "  local a = string.find(v, ':', 1, true)\n"
    "  local b = string.find(v, ':', a + 1, true)\n"
    "  local c = string.find(v, ':', b + 1, true)\n"
    "  local e = string.find(v, ':', c + 34, true)\n" /* a label follows */
    "  out = {string.sub(v, c + 1, (e or 0) - 1), string.sub(v, 1, a - 1),\n"
    "         string.sub(v, a + 1, b - 1), string.sub(v, b + 1, c - 1)}\n"
    "end\n"
    "for _, id in ipairs(redis.call('LRANGE', KEYS[1], 0, -1)) do\n"
    "  if redis.call('HEXISTS', KEYS[3], id) == 1 then out[#out + 1] = id end\n"
    "end\n"
    "return out\n";

static redisReply *snapshot(redisContext *rc, const char *prefix,
                            const void *name, size_t len) {
  size_t cap = key_cap(prefix, len);
  char *keys = malloc(3 * cap);
  cr_assert_not_null(keys);
  size_t kq = rtt_key(keys, cap, prefix, name, len, 'q');
  size_t kh = rtt_key(keys + cap, cap, prefix, name, len, 'h');
  size_t km = rtt_key(keys + 2 * cap, cap, prefix, name, len, 'm');
  redisReply *r = redisCommand(rc, "EVAL %s 3 %b %b %b", snapshot_lua, keys, kq,
                               keys + cap, kh, keys + 2 * cap, km);
  free(keys);
  cr_assert_not_null(r, "EVAL: %s", rc->errstr);
  cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "snapshot failed: %s",
               r->str ? r->str : "");
  return r;
}

size_t rtt_queue(redisContext *rc, const char *prefix, const void *name,
                 size_t len, char (*out)[RTT_ID_MAX], size_t max) {
  redisReply *r = snapshot(rc, prefix, name, len);
  size_t n = 0;
  for (size_t i = 0; i < r->elements; i++) {
    if (i == 1 || i == 2 || i == 3 || (i == 0 && r->element[0]->len == 0))
      continue;
    if (n < max)
      snprintf(out[n], RTT_ID_MAX, "%s", r->element[i]->str);
    n++;
  }
  freeReplyObject(r);
  return n;
}

long long rtt_qlen(redisContext *rc, const char *prefix, const void *name,
                   size_t len) {
  redisReply *r = snapshot(rc, prefix, name, len);
  long long n = (long long)r->elements - 4 + (r->element[0]->len > 0);
  freeReplyObject(r);
  return n;
}

long long rtt_queue_len(redisContext *rc, const char *name) {
  return rtt_qlen(rc, rtt_prefix(), name, strlen(name));
}

long long rtt_holder_field(redisContext *rc, const char *name,
                           const char *field) {
  return rtt_hfield(rc, rtt_prefix(), name, strlen(name), field);
}

long long rtt_hfield(redisContext *rc, const char *prefix, const void *name,
                     size_t len, const char *field) {
  redisReply *r = snapshot(rc, prefix, name, len);
  int i = field[0] == 'f' ? 1 : field[0] == 'd' ? 2 : 3;
  cr_assert(strchr("fdg", field[0]) != NULL && field[1] == '\0',
            "rtt_hfield: unknown field %s", field);
  long long v = r->element[0]->len > 0 ? atoll(r->element[i]->str) : -1;
  freeReplyObject(r);
  return v;
}

int rtt_queue_count(redisContext *rc, const char *name, const char *id) {
  char ids[64][RTT_ID_MAX];
  size_t n = rtt_queue(rc, rtt_prefix(), name, strlen(name), ids, 64);
  int k = 0;
  for (size_t i = 0; i < n && i < 64; i++)
    k += strcmp(ids[i], id) == 0;
  return k;
}

long long rtt_keys_left(redisContext *rc, const char *name) {
  size_t len = strlen(name), cap = key_cap(rtt_prefix(), len);
  char *keys = malloc(3 * cap);
  cr_assert_not_null(keys);
  size_t kq = rtt_key(keys, cap, rtt_prefix(), name, len, 'q');
  size_t kh = rtt_key(keys + cap, cap, rtt_prefix(), name, len, 'h');
  size_t km = rtt_key(keys + 2 * cap, cap, rtt_prefix(), name, len, 'm');
  long long n = rtt_int(rc, "EXISTS %b %b %b", keys, kq, keys + cap, kh,
                        keys + 2 * cap, km);
  free(keys);
  return n;
}
