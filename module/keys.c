/* The module's keys in place (see prelude.h): reads through the key API
 * instead of GET, LLEN, HGET..., and the writes every grant runs, each
 * replicated as the command Redis itself propagates for it; and what they
 * stand on: a call's failure, the clock, the integer parser. The grant
 * rules (prelude.c) sit above this file and it calls nothing of theirs. */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>

#include "prelude.h"

/* ---- the lowest helpers ------------------------------------------------
 * What every other file of the module calls; this file calls none of
 * theirs (keys.c is the bottom layer: prelude.c builds on it). */

void rtm_fail(rtm_call *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->err, sizeof(c->err), fmt, ap);
  va_end(ap);
  /* An error reply is one line. */
  for (char *p = c->err; *p != '\0'; p++)
    if (*p == '\r' || *p == '\n')
      *p = ' ';
  longjmp(c->fail, 1);
}

/* strtoll(s, 10) over all of s (white space first, a sign, digits; an
 * overflow fails) without its copy and locale work: every call parses the
 * holder record. */
int rtm_parse_ll(rtm_str s, long long *out) {
  if (s.p == NULL || s.len == 0 || s.len >= 32)
    return -1;
  const char *p = s.p, *end = s.p + s.len;
  while (p < end && (*p == ' ' || (*p >= '\t' && *p <= '\r')))
    p++;
  int neg = p < end && *p == '-';
  if (p < end && (*p == '-' || *p == '+'))
    p++;
  if (p == end)
    return -1;
  unsigned long long v = 0,
                     max = (unsigned long long)LLONG_MAX + (neg ? 1u : 0u);
  /* 18 digits never overflow: only longer numbers check each step. */
  int check = end - p > 18;
  for (; p < end; p++) {
    if (*p < '0' || *p > '9')
      return -1;
    unsigned d = (unsigned)(*p - '0');
    if (check && v > (max - d) / 10)
      return -1;
    v = v * 10 + d;
  }
  *out = neg ? (v == max ? LLONG_MIN : -(long long)v) : (long long)v;
  return 0;
}

void rtm_clock(int64_t *ms, int64_t *us) {
  struct timeval tv;
  gettimeofday(&tv, NULL);
  *ms = (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
  *us = (int64_t)tv.tv_sec * 1000000 + tv.tv_usec;
}

void rtm_now(rtm_call *c, int64_t *ms, int64_t *us) {
  if (!c->have_now) {
    rtm_clock(&c->now_ms, &c->now_us);
    c->have_now = 1;
  }
  *ms = c->now_ms;
  *us = c->now_us;
}

/* ---- reads in place -------------------------------------------------
 * Reads need no replication, so they look at the keys directly instead of
 * running GET, LLEN, HGET... (what they answer is the same, errors
 * included). Every key is closed before the next command may change it. */

const char rtm_wrongtype[] =
    "WRONGTYPE Operation against a key holding the wrong kind of value";

/* name opened to read: NULL when missing; a key of another type than
 * type fails the call as the read command would. */
static RedisModuleKey *open_read(rtm_call *c, RedisModuleString *name,
                                 int type) {
  RedisModuleKey *k = rtm.OpenKey(c->ctx, name, RTM_READ);
  if (k == NULL)
    return NULL;
  int t = rtm.KeyType(k);
  if (t == type)
    return k;
  rtm.CloseKey(k);
  if (t != RTM_KEYTYPE_EMPTY)
    rtm_fail(c, "%s", rtm_wrongtype);
  return NULL;
}

/* A string from the key API, p NULL for none. */
static rtm_str module_str(RedisModuleString *s) {
  rtm_str out = {NULL, 0};
  if (s != NULL)
    out.p = rtm.StringPtrLen(s, &out.len);
  return out;
}

void rtm_hget2(rtm_call *c, rtm_str f1, const char *f2, rtm_str *v1,
               rtm_str *v2) {
  v1->p = NULL;
  if (v2 != NULL)
    v2->p = NULL;
  RedisModuleKey *k = open_read(c, c->m, RTM_KEYTYPE_HASH);
  if (k == NULL)
    return;
  RedisModuleString *a = NULL, *b = NULL;
  if (f1.p != NULL)
    rtm.HashGet(k, RTM_HASH_NONE, rtm.CreateString(c->ctx, f1.p, f1.len), &a,
                NULL);
  if (f2 != NULL)
    rtm.HashGet(k, RTM_HASH_CFIELDS, f2, &b, NULL);
  rtm.CloseKey(k);
  *v1 = module_str(a);
  if (v2 != NULL)
    *v2 = module_str(b);
}

rtm_str rtm_hget(rtm_call *c, rtm_str field) {
  rtm_str v;
  rtm_hget2(c, field, NULL, &v, NULL);
  return v;
}

long long rtm_llen(rtm_call *c) {
  RedisModuleKey *k = open_read(c, c->q, RTM_KEYTYPE_LIST);
  if (k == NULL)
    return 0;
  long long n = (long long)rtm.ValueLength(k);
  rtm.CloseKey(k);
  return n;
}

rtm_str rtm_front(rtm_call *c) {
  RedisModuleKey *k = open_read(c, c->q, RTM_KEYTYPE_LIST);
  if (k == NULL)
    return (rtm_str){NULL, 0};
  RedisModuleString *v = rtm.ListGet(k, 0);
  rtm.CloseKey(k);
  return module_str(v);
}

/* ---- writes in place ---------------------------------------------------
 * The commands every grant runs, written through the key API: each does
 * what the command in its name does to the key, and goes to replicas and
 * the AOF as the command Redis itself propagates for it, with the same
 * keyspace events. A command run through RedisModule_Call costs Redis
 * more than the write. */

/* name opened to write, its type checked as open_read() does (an empty
 * key is fine: the write may create it). */
static RedisModuleKey *open_write(rtm_call *c, RedisModuleString *name,
                                  int type) {
  /* The type first, through a handle that only reads: a key opened to
   * write counts as modified when closed (a WATCH on it aborts), also when
   * the call then fails on its type and changes nothing. */
  RedisModuleKey *r = open_read(c, name, type); /* fails on another type */
  if (r != NULL)
    rtm.CloseKey(r);
  return rtm.OpenKey(c->ctx, name, RTM_READ | RTM_WRITE);
}

/* The event a write that emptied its key adds (the key is gone). */
static void emptied(rtm_call *c, RedisModuleKey *k, RedisModuleString *name) {
  if (rtm.KeyType(k) == RTM_KEYTYPE_EMPTY)
    rtm.NotifyKeyspaceEvent(c->ctx, RTM_NOTIFY_GENERIC, "del", name);
}

/* PEXPIRE name ms (propagated as PEXPIREAT); nothing when name is
 * missing. The expiry counts from the command's clock reading: q's and m's
 * come out equal, as a script's do, however long the call runs. */
void rtm_pexpire(rtm_call *c, RedisModuleString *name, long long ms) {
  /* Not opened to write when missing: that would touch WATCH. */
  if (!rtm.KeyExists(c->ctx, name))
    return;
  RedisModuleKey *k = rtm.OpenKey(c->ctx, name, RTM_READ | RTM_WRITE);
  if (rtm.KeyType(k) == RTM_KEYTYPE_EMPTY) {
    rtm.CloseKey(k);
    return;
  }
  int64_t now, now_us;
  rtm_now(c, &now, &now_us);
  long long at = (long long)now + ms;
  rtm.SetAbsExpire(k, at);
  rtm.CloseKey(k);
  rtm.Replicate(c->ctx, "PEXPIREAT", "sl", name, at);
  rtm.NotifyKeyspaceEvent(c->ctx, RTM_NOTIFY_GENERIC, "expire", name);
}

/* DEL of the key k (opened to write) named name. */
static void del_open(rtm_call *c, RedisModuleKey *k, RedisModuleString *name) {
  if (rtm.KeyType(k) != RTM_KEYTYPE_EMPTY) {
    rtm.DeleteKey(k);
    rtm.Replicate(c->ctx, "DEL", "s", name);
    rtm.NotifyKeyspaceEvent(c->ctx, RTM_NOTIFY_GENERIC, "del", name);
  }
}

void rtm_del(rtm_call *c, RedisModuleString *name) {
  if (!rtm.KeyExists(c->ctx, name)) /* the usual case: no key handle */
    return;
  RedisModuleKey *k = rtm.OpenKey(c->ctx, name, RTM_READ | RTM_WRITE);
  del_open(c, k, name);
  rtm.CloseKey(k);
}

void rtm_del_h(rtm_call *c) {
  if (c->hk == NULL) {
    rtm_del(c, c->h);
    return;
  }
  del_open(c, c->hk, c->h);
}

void rtm_call_done(rtm_call *c) {
  if (c->hk != NULL)
    rtm.CloseKey(c->hk);
  c->hk = NULL;
}

/* LPOP q: the front id, p NULL when q is empty. */
rtm_str rtm_lpop(rtm_call *c) {
  if (!rtm.KeyExists(c->ctx, c->q)) /* the usual case: no key handle */
    return (rtm_str){NULL, 0};
  RedisModuleKey *k = open_write(c, c->q, RTM_KEYTYPE_LIST);
  rtm_str id = module_str(rtm.ListPop(k, RTM_LIST_HEAD));
  rtm.Replicate(c->ctx, "LPOP", "s", c->q);
  rtm.NotifyKeyspaceEvent(c->ctx, RTM_NOTIFY_LIST, "lpop", c->q);
  emptied(c, k, c->q);
  rtm.CloseKey(k);
  return id;
}

/* HINCRBY m '#' 1 (m is made if missing). */
void rtm_count_pop(rtm_call *c) {
  RedisModuleKey *k = open_write(c, c->m, RTM_KEYTYPE_HASH);
  RedisModuleString *v = NULL;
  if (rtm.KeyType(k) == RTM_KEYTYPE_HASH)
    rtm.HashGet(k, RTM_HASH_CFIELDS, "#", &v, NULL);
  long long n = 0;
  if (v != NULL && rtm_parse_ll(module_str(v), &n) != 0) {
    rtm.CloseKey(k);
    rtm_fail(c, "ERR hash value is not an integer");
  }
  if (n == LLONG_MAX) { /* HINCRBY's refusal, not a wrap */
    rtm.CloseKey(k);
    rtm_fail(c, "ERR increment or decrement would overflow");
  }
  char buf[24];
  int len = snprintf(buf, sizeof(buf), "%lld", n + 1);
  rtm.HashSet(k, RTM_HASH_CFIELDS, "#",
              rtm.CreateString(c->ctx, buf, (size_t)len), NULL);
  rtm.CloseKey(k);
  rtm.Replicate(c->ctx, "HINCRBY", "scc", c->m, "#", "1");
  rtm.NotifyKeyspaceEvent(c->ctx, RTM_NOTIFY_HASH, "hincrby", c->m);
}

int rtm_hdel(rtm_call *c, rtm_str field) {
  return rtm_hdel_in(c, c->m, field, 1);
}

int rtm_hdel_in(rtm_call *c, RedisModuleString *name, rtm_str field,
                int event) {
  /* Opened to write only when the field is there (WATCH, as HDEL). */
  RedisModuleString *f = rtm.CreateString(c->ctx, field.p, field.len);
  RedisModuleKey *r = open_read(c, name, RTM_KEYTYPE_HASH);
  if (r == NULL)
    return 0;
  int there = 0;
  rtm.HashGet(r, RTM_HASH_EXISTS, f, &there, NULL);
  rtm.CloseKey(r);
  if (!there)
    return 0;
  RedisModuleKey *k = open_write(c, name, RTM_KEYTYPE_HASH);
  int n = rtm.HashSet(k, RTM_HASH_NONE, f, RTM_HASH_DELETE, NULL);
  if (n > 0) {
    rtm.Replicate(c->ctx, "HDEL", "ss", name, f);
    if (event)
      rtm.NotifyKeyspaceEvent(c->ctx, RTM_NOTIFY_HASH, "hdel", name);
    emptied(c, k, name);
  }
  rtm.CloseKey(k);
  return n > 0;
}

/* ---- a pool resource's h and D ------------------------------------------
 * The same in place for the HASH h and the ZSET D of lua/lib/pool.lua:
 * reads look, writes go to replicas and the AOF as the command (HSET,
 * HDEL, ZADD, ZREM, PEXPIREAT) with its keyspace events. */

int rtm_hmget(rtm_call *c, RedisModuleString *name, int n,
              const char *const *fields, rtm_str *out, long long *len) {
  for (int i = 0; i < n; i++)
    out[i] = (rtm_str){NULL, 0};
  *len = 0;
  RedisModuleKey *k = rtm.OpenKey(c->ctx, name, RTM_READ);
  if (k == NULL)
    return RTM_KEYTYPE_EMPTY;
  int t = rtm.KeyType(k);
  if (t != RTM_KEYTYPE_HASH) {
    rtm.CloseKey(k);
    if (t != RTM_KEYTYPE_EMPTY && t != RTM_KEYTYPE_STRING)
      rtm_fail(c, "%s", rtm_wrongtype);
    return t;
  }
  /* One HashGet (it takes the fields as arguments). */
  RedisModuleString *v[3] = {NULL, NULL, NULL};
  if (n == 3)
    rtm.HashGet(k, RTM_HASH_CFIELDS, fields[0], &v[0], fields[1], &v[1],
                fields[2], &v[2], NULL);
  else
    for (int i = 0; i < n; i++)
      rtm.HashGet(k, RTM_HASH_CFIELDS, fields[i], &v[i], NULL);
  for (int i = 0; i < n; i++)
    out[i] = module_str(v[i]);
  *len = (long long)rtm.ValueLength(k);
  rtm.CloseKey(k);
  return t;
}

rtm_str rtm_hget_in(rtm_call *c, RedisModuleString *name, rtm_str field) {
  RedisModuleKey *k = open_read(c, name, RTM_KEYTYPE_HASH);
  if (k == NULL)
    return (rtm_str){NULL, 0};
  RedisModuleString *v = NULL;
  rtm.HashGet(k, RTM_HASH_NONE, rtm.CreateString(c->ctx, field.p, field.len),
              &v, NULL);
  rtm.CloseKey(k);
  return module_str(v);
}

long long rtm_length(rtm_call *c, RedisModuleString *name, int type) {
  RedisModuleKey *k = open_read(c, name, type);
  if (k == NULL)
    return 0;
  long long n = (long long)rtm.ValueLength(k);
  rtm.CloseKey(k);
  return n;
}

void rtm_hset(rtm_call *c, RedisModuleString *name, int n, const rtm_str *fv,
              int event) {
  RedisModuleKey *k = open_write(c, name, RTM_KEYTYPE_HASH);
  RedisModuleString **a = rtm.PoolAlloc(c->ctx, 2 * (size_t)n * sizeof(*a));
  for (int i = 0; i < 2 * n; i++)
    a[i] = rtm.CreateString(c->ctx, fv[i].p, fv[i].len);
  /* One HashSet per at most 4 pairs (it takes them as arguments). */
  for (int i = 0; i < n; i += 4) {
    RedisModuleString **p = a + 2 * i;
    switch (n - i) {
    case 1:
      rtm.HashSet(k, RTM_HASH_NONE, p[0], p[1], NULL);
      break;
    case 2:
      rtm.HashSet(k, RTM_HASH_NONE, p[0], p[1], p[2], p[3], NULL);
      break;
    case 3:
      rtm.HashSet(k, RTM_HASH_NONE, p[0], p[1], p[2], p[3], p[4], p[5], NULL);
      break;
    default:
      rtm.HashSet(k, RTM_HASH_NONE, p[0], p[1], p[2], p[3], p[4], p[5], p[6],
                  p[7], NULL);
    }
  }
  rtm.CloseKey(k);
  rtm.Replicate(c->ctx, "HSET", "sv", name, a, 2 * (size_t)n);
  if (event)
    rtm.NotifyKeyspaceEvent(c->ctx, RTM_NOTIFY_HASH, "hset", name);
}

/* D opened to read: NULL when missing. */
static RedisModuleKey *open_d(rtm_call *c) {
  return open_read(c, c->d, RTM_KEYTYPE_ZSET);
}

int rtm_zscore(rtm_call *c, rtm_str member, int64_t *score) {
  RedisModuleKey *k = open_d(c);
  if (k == NULL)
    return 0;
  double v;
  int ok = rtm.ZsetScore(k, rtm.CreateString(c->ctx, member.p, member.len),
                         &v) == RTM_OK;
  rtm.CloseKey(k);
  if (ok)
    *score = (int64_t)v;
  return ok;
}

long long rtm_zends(rtm_call *c, int64_t *first, int64_t *last) {
  RedisModuleKey *k = open_d(c);
  if (k == NULL)
    return 0;
  long long n = (long long)rtm.ValueLength(k);
  double inf = 1.0 / 0.0, v;
  for (int end = 0; end < 2 && n > 0; end++) {
    int ok = (end ? rtm.ZsetLastInScoreRange(k, -inf, inf, 0, 0)
                  : rtm.ZsetFirstInScoreRange(k, -inf, inf, 0, 0)) == RTM_OK;
    if (ok && !rtm.ZsetRangeEndReached(k)) {
      rtm.ZsetRangeCurrentElement(k, &v);
      *(end ? last : first) = (int64_t)v;
    }
    if (ok)
      rtm.ZsetRangeStop(k);
  }
  rtm.CloseKey(k);
  return n;
}

size_t rtm_zrange(rtm_call *c, int last, double max, size_t limit,
                  rtm_str *members, int64_t *scores) {
  RedisModuleKey *k = open_d(c);
  if (k == NULL)
    return 0;
  size_t n = 0;
  double inf = 1.0 / 0.0;
  if ((last ? rtm.ZsetLastInScoreRange(k, -inf, inf, 0, 0)
            : rtm.ZsetFirstInScoreRange(k, -inf, max, 0, 0)) == RTM_OK) {
    while (n < limit && !rtm.ZsetRangeEndReached(k)) {
      double v;
      RedisModuleString *m = rtm.ZsetRangeCurrentElement(k, &v);
      members[n] = module_str(m);
      if (scores != NULL)
        scores[n] = (int64_t)v;
      n++;
      if (!rtm.ZsetRangeNext(k))
        break;
    }
    rtm.ZsetRangeStop(k);
  }
  rtm.CloseKey(k);
  return n;
}

void rtm_zadd(rtm_call *c, int64_t score, rtm_str member) {
  RedisModuleString *m = rtm.CreateString(c->ctx, member.p, member.len);
  /* A member with that score already: ZADD changes nothing, so it sends
   * no event, replicates nothing and aborts no WATCH. */
  RedisModuleKey *r = open_d(c);
  if (r != NULL) {
    double v;
    int same = rtm.ZsetScore(r, m, &v) == RTM_OK && v == (double)score;
    rtm.CloseKey(r);
    if (same)
      return;
  }
  RedisModuleKey *k = open_write(c, c->d, RTM_KEYTYPE_ZSET);
  rtm.ZsetAdd(k, (double)score, m, NULL);
  rtm.CloseKey(k);
  rtm.Replicate(c->ctx, "ZADD", "sls", c->d, (long long)score, m);
  rtm.NotifyKeyspaceEvent(c->ctx, RTM_NOTIFY_ZSET, "zadd", c->d);
}

void rtm_zrem(rtm_call *c, const rtm_str *members, size_t n) {
  /* Opened to write only when one of them is there (WATCH, as ZREM). */
  RedisModuleKey *r = open_d(c);
  if (r == NULL)
    return;
  RedisModuleString **args = rtm.PoolAlloc(c->ctx, n * sizeof(*args));
  int any = 0;
  for (size_t i = 0; i < n; i++) {
    double v;
    args[i] = rtm.CreateString(c->ctx, members[i].p, members[i].len);
    any |= rtm.ZsetScore(r, args[i], &v) == RTM_OK;
  }
  rtm.CloseKey(r);
  if (!any)
    return;
  RedisModuleKey *k = open_write(c, c->d, RTM_KEYTYPE_ZSET);
  for (size_t i = 0; i < n; i++)
    rtm.ZsetRem(k, args[i], NULL);
  rtm.Replicate(c->ctx, "ZREM", "sv", c->d, args, n);
  rtm.NotifyKeyspaceEvent(c->ctx, RTM_NOTIFY_ZSET, "zrem", c->d);
  emptied(c, k, c->d);
  rtm.CloseKey(k);
}

void rtm_pexpireat(rtm_call *c, RedisModuleString *name, long long at) {
  if (!rtm.KeyExists(c->ctx, name))
    return;
  RedisModuleKey *k = rtm.OpenKey(c->ctx, name, RTM_READ | RTM_WRITE);
  /* The same expiry again changes nothing a replica has: it is not sent
   * (the key still counts as written, as PEXPIREAT has it). */
  int same = rtm.GetAbsExpire(k) == at;
  if (!same)
    rtm.SetAbsExpire(k, at);
  rtm.CloseKey(k);
  if (!same)
    rtm.Replicate(c->ctx, "PEXPIREAT", "sl", name, at);
  rtm.NotifyKeyspaceEvent(c->ctx, RTM_NOTIFY_GENERIC, "expire", name);
}
