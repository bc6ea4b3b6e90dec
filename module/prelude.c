/* lua/lib/prelude.lua in C (see prelude.h): the grant rules shared by the
 * mutex commands. Each function says which prelude function it mirrors;
 * its steps and Redis commands are that function's, in the same order. */
#include "prelude.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A failover epoch's worth of fence, and the largest epoch counted. */
#define EPOCH_US ((double)RT_PROTO_EPOCH_US)
#define EPOCH_MAX ((double)RT_PROTO_EPOCH_MAX)
/* Integers in records and messages: at most 20 characters each. */
#define NUM_CAP 24

/* INFO server's run_id: fixed for the life of the process, so it is read
 * once at load (rtm_set_run_id) instead of per call, as the script must. */
static char run_id[64];
static char stamp[72];

void rtm_set_run_id(const char *id) {
  snprintf(run_id, sizeof(run_id), "%s", id);
  snprintf(stamp, sizeof(stamp), "%s:0", run_id);
}

rtm_str rtm_settled_stamp(void) { return (rtm_str){stamp, strlen(stamp)}; }

/* ---- errors and calls ---------------------------------------------------- */

void rtm_refuse_new_if_oom(rtm_call *c) {
  if (rtm.GetUsedMemoryRatio() > 1)
    rtm_fail(c,
             "OOM command not allowed when used memory > 'maxmemory'. "
             "(%s: a new request waits until memory is freed)",
             c->name);
}

int rtm_reply_error(rtm_call *c) { return rtm.ReplyWithError(c->ctx, c->err); }

RedisModuleCallReply *rtm_checked(rtm_call *c, const char *cmd,
                                  RedisModuleCallReply *r) {
  if (r == NULL)
    rtm_fail(c, "ERR %s: %s could not run (%s)", c->name, cmd, strerror(errno));
  if (rtm.CallReplyType(r) == RTM_REPLY_ERROR) {
    size_t len;
    const char *e = rtm.CallReplyStringPtr(r, &len);
    if (e != NULL && len > 0 && e[0] == '-') {
      e++;
      len--;
    }
    rtm_fail(c, "%.*s", (int)(e != NULL ? len : 0), e != NULL ? e : "");
  }
  return r;
}

long long rtm_int(RedisModuleCallReply *r) { return rtm.CallReplyInteger(r); }

rtm_str rtm_string(RedisModuleCallReply *r) {
  rtm_str s = {NULL, 0};
  if (r != NULL && rtm.CallReplyType(r) == RTM_REPLY_STRING)
    s.p = rtm.CallReplyStringPtr(r, &s.len);
  return s;
}

int rtm_eq(rtm_str s, rtm_str b) {
  return s.p != NULL && b.p != NULL && s.len == b.len &&
         memcmp(s.p, b.p, s.len) == 0;
}

int rtm_eqc(rtm_str s, const char *lit) {
  return rtm_eq(s, (rtm_str){lit, strlen(lit)});
}

/* Bytes put one after another into a fixed buffer, without snprintf's
 * cost on the hot path; over is set when they did not fit. */
typedef struct putbuf {
  char *p;
  size_t len, cap;
  int over;
} putbuf;

static void put_bytes(putbuf *b, const char *s, size_t n) {
  if (b->over || n > b->cap - b->len) {
    b->over = 1;
    return;
  }
  memcpy(b->p + b->len, s, n);
  b->len += n;
}

size_t rtm_fmt_i64(char *out, int64_t v) {
  char tmp[24];
  size_t n = sizeof(tmp);
  uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
  do {
    tmp[--n] = (char)('0' + u % 10);
    u /= 10;
  } while (u != 0);
  if (v < 0)
    tmp[--n] = '-';
  memcpy(out, tmp + n, sizeof(tmp) - n);
  return sizeof(tmp) - n;
}

static void put_i64(putbuf *b, int64_t v) {
  char tmp[24];
  put_bytes(b, tmp, rtm_fmt_i64(tmp, v));
}

/* ":<v>" */
static void put_field(putbuf *b, int64_t v) {
  put_bytes(b, ":", 1);
  put_i64(b, v);
}

/* rtm_num: a number the protocol wrote into a record (prelude.h). */
int64_t rtm_num(rtm_call *c, const char *p, size_t len, const char *what) {
  long long v;
  if (rtm_parse_ll((rtm_str){p, len}, &v) != 0)
    rtm_fail(c, "ERR %s: malformed %s '%.*s'", c->name, what,
             (int)(len > 64 ? 64 : len), p);
  return v;
}

/* ---- arguments --------------------------------------------------------- */

/* split_prefix(ARGV[1]): 0, or -1 for a failover hold over
 * RT_PROTO_LEASE_MAX_MS (the scripts' words in msg). */
static int split_prefix(rtm_call *c, char *msg, size_t cap) {
  rtm_str a = c->argv[0];
  const char *z = memchr(a.p, '\0', a.len);
  c->epoch_arg = (rtm_str){NULL, 0};
  c->hold_ms = 0;
  if (z == NULL) {
    c->chan = a;
    return 0;
  }
  c->chan = (rtm_str){a.p, (size_t)(z - a.p)};
  rtm_str rest = {z + 1, a.len - (size_t)(z + 1 - a.p)};
  c->epoch_arg = rest;
  /* '^([^/]*)/(%d+)$': the first '/' followed by digits to the end. */
  const char *slash = memchr(rest.p, '/', rest.len);
  if (slash == NULL)
    return 0;
  size_t ndig = rest.len - (size_t)(slash + 1 - rest.p);
  if (ndig == 0)
    return 0;
  double ms = 0;
  for (size_t i = 0; i < ndig; i++) {
    char d = slash[1 + i];
    if (d < '0' || d > '9')
      return 0;
    ms = ms * 10 + (d - '0');
  }
  if (ndig > 16 || ms > (double)RT_PROTO_LEASE_MAX_MS) {
    /* As split_prefix() in lua/lib/prelude.lua, to the letter. */
    snprintf(msg, cap,
             "ERR the failover hold must be a whole number of ms up to "
             "10^15, not '%.*s'",
             (int)(ndig > 32 ? 32 : ndig), slash + 1);
    return -1;
  }
  c->epoch_arg = (rtm_str){rest.p, (size_t)(slash - rest.p)};
  c->hold_ms = ms;
  return 0;
}

/* The keys must be one resource's: "<base>:<s>" for each suffix s of
 * c->suffixes (q h m for a mutex, Q h M D for a pool resource), with one
 * base that ends in its hash tag "{...}" (what about() names in grant
 * notices, as the script's '({[^{}]*}):[^:]*$'). So they are different
 * keys of one slot, checked before any key is opened: no two key handles
 * of a call ever refer to one key, and a grant never fails on q's shape
 * after a waiter was popped. Sets c->tag; 0 when the keys are fine, else
 * -1 with the error in msg. */
static int check_keys(rtm_call *c, RedisModuleString **names, char *msg,
                      size_t cap, const char *usage) {
  rtm_str k[RTM_KEYS_MAX];
  const char *suffix = c->suffixes;
  int n = (int)strlen(suffix);
  for (int i = 0; i < n; i++)
    k[i].p = rtm.StringPtrLen(names[i], &k[i].len);
  rtm_str q = k[0];
  size_t base = q.len >= 2 ? q.len - 2 : 0;
  const char *open = NULL;
  if (base >= 2 && q.p[base] == ':' && q.p[base - 1] == '}')
    for (size_t i = base - 1; i > 0; i--) {
      if (q.p[i - 1] == '}')
        break;
      if (q.p[i - 1] == '{') {
        open = q.p + i - 1;
        break;
      }
    }
  if (open == NULL) {
    snprintf(msg, cap,
             "ERR %s: the key '%.*s' is not a resource's queue key: it has no "
             "hash tag before its suffix (<base>{<tag>}:%c) (%s)",
             c->name, (int)(q.len > 64 ? 64 : q.len), q.p, suffix[0], usage);
    return -1;
  }
  for (int i = 0; i < n; i++)
    if (k[i].len != q.len || memcmp(k[i].p, q.p, base + 1) != 0 ||
        k[i].p[base + 1] != suffix[i]) {
      /* "the keys must be <base>:q <base>:h <base>:m" */
      char shape[64] = "";
      for (int j = 0, at = 0; j < n; j++)
        at += snprintf(shape + at, sizeof(shape) - (size_t)at, "%s<base>:%c",
                       j ? " " : "", suffix[j]);
      snprintf(msg, cap,
               "ERR %s: key %d '%.*s' is not the resource's '%c' key: the "
               "keys must be %s of one resource, here <base> is '%.*s' (%s)",
               c->name, i + 1, (int)(k[i].len > 64 ? 64 : k[i].len), k[i].p,
               suffix[i], shape, (int)(base > 64 ? 64 : base), q.p, usage);
      return -1;
    }
  c->tag = (rtm_str){open, (size_t)(q.p + base - open)};
  return 0;
}

int rtm_call_init(rtm_call *c, RedisModuleCtx *ctx, const char *name,
                  const char *suffixes, RedisModuleString **argv, int argc,
                  int min_args, const char *usage) {
  memset(c, 0, sizeof(*c));
  c->ctx = ctx;
  c->name = name;
  c->suffixes = suffixes;
  int nkeys = (int)strlen(suffixes);
  c->settling_now = -1;
  rtm.AutoMemory(ctx);
  if (argc < 2)
    return rtm.WrongArity(ctx);
  char msg[512];
  rtm_str nk;
  nk.p = rtm.StringPtrLen(argv[1], &nk.len);
  long long numkeys;
  /* As FCALL reads it: digits only, no space or sign before them. */
  if (nk.len == 0 || nk.p[0] < '0' || nk.p[0] > '9' ||
      rtm_parse_ll(nk, &numkeys) != 0) {
    snprintf(msg, sizeof(msg),
             "ERR %s: numkeys must be an integer (%s), not '%.*s'", name, usage,
             (int)(nk.len > 32 ? 32 : nk.len), nk.p);
  } else if (numkeys < nkeys) {
    snprintf(msg, sizeof(msg),
             "ERR %s: numkeys is %lld, but the resource has %d keys (%s)", name,
             numkeys, nkeys, usage);
  } else if (numkeys > argc - 2) {
    snprintf(msg, sizeof(msg),
             "ERR %s: numkeys is %lld, but only %d arguments follow it", name,
             numkeys, argc - 2);
  } else if (argc - 2 - numkeys < min_args) {
    snprintf(msg, sizeof(msg),
             "ERR wrong number of arguments for '%s': %lld after the keys, "
             "it needs at least %d (%s)",
             name, argc - 2 - numkeys, min_args, usage);
  } else {
    c->q = argv[2];
    c->h = argv[3];
    c->m = argv[4];
    c->d = nkeys > 3 ? argv[5] : NULL;
    c->qname.p = rtm.StringPtrLen(c->q, &c->qname.len);
    if (check_keys(c, argv + 2, msg, sizeof(msg), usage) != 0)
      goto refuse;
    c->nargs = (int)(argc - 2 - numkeys);
    if (c->nargs > RTM_ARGS_MAX)
      c->nargs = RTM_ARGS_MAX; /* the scripts read no more */
    for (int i = 0; i < c->nargs; i++)
      c->argv[i].p = rtm.StringPtrLen(argv[2 + numkeys + i], &c->argv[i].len);
    if (split_prefix(c, msg, sizeof(msg)) != 0)
      goto refuse;
    return 0;
  }
refuse:
  for (char *p = msg; *p != '\0'; p++)
    if (*p == '\r' || *p == '\n')
      *p = ' ';
  rtm.ReplyWithError(ctx, msg);
  return -1;
}

/* ---- records ----------------------------------------------------------- */

/* describe(kind) */
void rtm_describe(rtm_str kind, char *out, size_t cap) {
  if (rtm_eqc(kind, "mutex"))
    snprintf(out, cap, "a mutex");
  else if (rtm_eqc(kind, "rw"))
    snprintf(out, cap, "a read-write lock");
  else if (rtm_eqc(kind, "e"))
    snprintf(out, cap, "an election");
  else
    snprintf(out, cap, "a semaphore of %.*s permits",
             (int)(kind.len > 2 ? (kind.len > 40 ? 38 : kind.len - 2) : 0),
             kind.len > 2 ? kind.p + 2 : "");
}

/* refuse_h(err): a failed GET of h. A pool resource's HASH is a
 * WRONGKIND, anything else the error GET raised. */
static void refuse_h(rtm_call *c, const char *err) {
  char saved[sizeof(c->err)];
  snprintf(saved, sizeof(saved), "%s", err);
  rtm_str t = rtm_string(NULL);
  RedisModuleCallReply *r = RTM_CALL(c, "TYPE", "s", c->h);
  size_t tl;
  t.p = rtm.CallReplyStringPtr(r, &tl);
  t.len = tl;
  if (rtm_eqc(t, "hash")) {
    rtm_str kind = rtm_string(RTM_CALL(c, "HGET", "sc", c->h, "*"));
    if (kind.p != NULL) {
      char is[64];
      rtm_describe(kind, is, sizeof(is));
      rtm_fail(c, "WRONGKIND the resource is %s, not a mutex", is);
    }
  }
  rtm_fail(c, "%s", saved);
}

/* holder(now) */
void rtm_holder_get(rtm_call *c, int64_t now, rtm_holder *out) {
  memset(out, 0, sizeof(*out));
  RedisModuleKey *k = c->hk;
  if (k == NULL) {
    k = rtm.OpenKey(c->ctx, c->h,
                    c->hk_write ? RTM_READ | RTM_WRITE : RTM_READ);
    if (k == NULL)
      return;
    if (c->hk_write)
      c->hk = k;
  }
  int t = rtm.KeyType(k);
  if (t == RTM_KEYTYPE_EMPTY) {
    if (k != c->hk)
      rtm.CloseKey(k);
    return;
  }
  if (t != RTM_KEYTYPE_STRING) {
    if (k != c->hk)
      rtm.CloseKey(k);
    rtm_call_done(c);
    refuse_h(c, rtm_wrongtype);
  }
  /* A copy: the record's key is rewritten later in the call. */
  rtm_str v;
  const char *dma = rtm.StringDMA(k, &v.len, RTM_READ);
  char *copy = rtm.PoolAlloc(c->ctx, v.len + 1);
  memcpy(copy, dma, v.len);
  copy[v.len] = '\0';
  v.p = copy;
  if (k != c->hk)
    rtm.CloseKey(k);
  const char *end = v.p + v.len;
  const char *a = memchr(v.p, ':', v.len);
  const char *b = a ? memchr(a + 1, ':', (size_t)(end - a - 1)) : NULL;
  const char *d = b ? memchr(b + 1, ':', (size_t)(end - b - 1)) : NULL;
  if (d == NULL)
    rtm_fail(c, "ERR %s: malformed holder record", c->name);
  int64_t deadline = rtm_num(c, a + 1, (size_t)(b - a - 1), "holder deadline");
  if (deadline <= now)
    return;
  /* The label starts at a ':' after the id's "<32 hex>:" and digits. */
  const char *e = NULL;
  if (end - d > 34)
    e = memchr(d + 34, ':', (size_t)(end - d - 34));
  out->id = (rtm_str){d + 1, (size_t)((e ? e : end) - d - 1)};
  out->fence = rtm_num(c, v.p, (size_t)(a - v.p), "holder fence");
  out->deadline = deadline;
  out->granted = rtm_num(c, b + 1, (size_t)(d - b - 1), "holder grant time");
  out->label = e ? (rtm_str){e + 1, (size_t)(end - e - 1)} : (rtm_str){"", 0};
}

/* member(v) */
void rtm_member(rtm_call *c, rtm_str v, int64_t *ticket, int64_t *ttl,
                rtm_str *label) {
  const char *end = v.p + v.len;
  const char *a = memchr(v.p, ':', v.len);
  if (a == NULL)
    rtm_fail(c, "ERR %s: malformed member value", c->name);
  const char *b = memchr(a + 1, ':', (size_t)(end - a - 1));
  *ticket = rtm_num(c, v.p, (size_t)(a - v.p), "member ticket");
  if (ttl != NULL)
    *ttl = rtm_num(c, a + 1, (size_t)((b ? b : end) - a - 1), "member lease");
  if (label != NULL)
    *label = b ? (rtm_str){b + 1, (size_t)(end - b - 1)} : (rtm_str){"", 0};
}

/* epoch() */
static double epoch(rtm_call *c) {
  if (!c->have_epoch) {
    double e = 0;
    if (rtm_eqc(c->epoch_arg, "c")) {
      /* As the script's pcall: a server without cluster support has 0. */
      rtm_str info = rtm_string(rtm.Call(c->ctx, "CLUSTER", "c", "INFO"));
      static const char field[] = "cluster_my_epoch:";
      const char *f = NULL;
      for (size_t i = 0; info.p != NULL && i + sizeof(field) - 1 <= info.len;
           i++)
        if (memcmp(info.p + i, field, sizeof(field) - 1) == 0) {
          f = info.p + i + sizeof(field) - 1;
          break;
        }
      if (f != NULL && f < info.p + info.len && *f >= '0' && *f <= '9')
        for (e = 0; f < info.p + info.len && *f >= '0' && *f <= '9'; f++)
          e = e * 10 + (*f - '0');
    } else if (c->epoch_arg.p != NULL) {
      /* tonumber(epoch_arg) or 0 */
      char buf[64];
      if (c->epoch_arg.len > 0 && c->epoch_arg.len < sizeof(buf)) {
        memcpy(buf, c->epoch_arg.p, c->epoch_arg.len);
        buf[c->epoch_arg.len] = '\0';
        char *end;
        double v = strtod(buf, &end);
        while (*end == ' ' || (*end >= '\t' && *end <= '\r'))
          end++;
        if (end != buf && *end == '\0' && !isnan(v))
          e = v;
      }
    }
    c->fence_epoch = fmin(fmax(e, 0), EPOCH_MAX);
    c->have_epoch = 1;
  }
  return c->fence_epoch;
}

/* next_fence(last, now_us): computed in doubles as the script does (both
 * terms stay below 2^53, so exactly). */
int64_t rtm_next_fence(rtm_call *c, const int64_t *last, int64_t now_us) {
  double after = (double)(last != NULL ? *last : 0) + 1;
  double mine = (double)now_us + epoch(c) * EPOCH_US;
  return (int64_t)fmax(after, mine);
}

/* touch(left) */
void rtm_touch(rtm_call *c, int64_t left) {
  long long ms = (long long)(left > 0 ? left : 0) + RTM_GRACE_MS;
  rtm_pexpire(c, c->q, ms);
  rtm_pexpire(c, c->m, ms);
}

/* set_holder(id, ttl, fence, deadline, granted, label) */
void rtm_set_holder(rtm_call *c, rtm_str id, int64_t ttl, int64_t fence,
                    int64_t deadline, int64_t granted, rtm_str label) {
  size_t cap = 3 * NUM_CAP + id.len + label.len + 2;
  char *rec = rtm.PoolAlloc(c->ctx, cap);
  putbuf b = {rec, 0, cap, 0};
  put_i64(&b, fence); /* "<fence>:<deadline>:<granted>:<id>[:<label>]" */
  put_field(&b, deadline);
  put_field(&b, granted);
  put_bytes(&b, ":", 1);
  put_bytes(&b, id.p, id.len);
  if (label.len > 0) {
    put_bytes(&b, ":", 1);
    put_bytes(&b, label.p, label.len);
  }
  size_t n = b.len;
  /* The script's SET h rec PX ttl, written in place: every grant and
   * extend does it, and a command costs Redis more than the write. Its
   * effect goes to replicas and the AOF as Redis propagates that SET
   * itself (SET ... PXAT <expiry>); deadline = now + ttl is the expiry. */
  (void)ttl;
  RedisModuleKey *k =
      c->hk != NULL ? c->hk : rtm.OpenKey(c->ctx, c->h, RTM_READ | RTM_WRITE);
  int ok = rtm.StringSet(k, rtm.CreateString(c->ctx, rec, n)) == RTM_OK &&
           rtm.SetAbsExpire(k, deadline) == RTM_OK;
  if (k != c->hk)
    rtm.CloseKey(k);
  if (!ok)
    rtm_fail(c, "ERR %s: could not write the holder record", c->name);
  rtm.Replicate(c->ctx, "SET", "sbcl", c->h, rec, n, "PXAT",
                (long long)deadline);
  rtm.NotifyKeyspaceEvent(c->ctx, RTM_NOTIFY_STRING, "set", c->h);
  rtm.NotifyKeyspaceEvent(c->ctx, RTM_NOTIFY_GENERIC, "expire", c->h);
}

/* take_free(id, ttl, now, now_us, label) */
void rtm_take_free(rtm_call *c, rtm_str id, int64_t ttl, int64_t now,
                   int64_t now_us, rtm_str label, int64_t *fence,
                   int64_t *deadline) {
  rtm_del(c, c->m);
  *fence = rtm_next_fence(c, NULL, now_us);
  *deadline = now + ttl;
  rtm_set_holder(c, id, ttl, *fence, *deadline, now, label);
}

/* The first 32 bytes of s (string.sub(s, 1, 32)) and the rest from byte
 * 34 (string.sub(s, 34)). */
static rtm_str head32(rtm_str s) {
  return (rtm_str){s.p, s.len < 32 ? s.len : 32};
}
static rtm_str from34(rtm_str s) {
  return s.len > 33 ? (rtm_str){s.p + 33, s.len - 33} : (rtm_str){"", 0};
}

/* notify(id, kind, rest): the subscribers that got it. */
static long long notify(rtm_call *c, rtm_str id, char kind, const char *rest,
                        size_t rest_len) {
  rtm_str who = head32(id), seq = from34(id);
  char *ch = rtm.PoolAlloc(c->ctx, c->chan.len + who.len + 1);
  char *msg = rtm.PoolAlloc(c->ctx, seq.len + rest_len + 3);
  memcpy(ch, c->chan.p, c->chan.len);
  memcpy(ch + c->chan.len, who.p, who.len);
  msg[0] = kind;
  msg[1] = ':';
  memcpy(msg + 2, seq.p, seq.len);
  memcpy(msg + 2 + seq.len, rest, rest_len);
  return rtm_int(RTM_CALL(c, "SPUBLISH", "!bb", ch, c->chan.len + who.len, msg,
                          2 + seq.len + rest_len));
}

/* about(kind): ":<kind>:{tag}" (kind "" for a mutex), the last {...} of
 * q before its last ':' (checked by rtm_call_init: c->tag). */
rtm_str rtm_about(rtm_call *c, rtm_str kind) {
  size_t n = 2 + kind.len + c->tag.len;
  char *out = rtm.PoolAlloc(c->ctx, n);
  out[0] = ':';
  memcpy(out + 1, kind.p, kind.len);
  out[1 + kind.len] = ':';
  memcpy(out + 2 + kind.len, c->tag.p, c->tag.len);
  return (rtm_str){out, n};
}

/* settle_start(now) */
int64_t rtm_settle_start(rtm_call *c, int64_t now) {
  rtm_str at = rtm_hget(c, (rtm_str){"@", 1});
  size_t me = strlen(run_id);
  if (at.p != NULL && at.len > me && memcmp(at.p, run_id, me) == 0 &&
      at.p[me] == ':')
    return rtm_num(c, at.p + me + 1, at.len - me - 1, "settle stamp");
  char v[96];
  int n = snprintf(v, sizeof(v), "%s:%" PRId64, run_id, now);
  RTM_CALL(c, "HSET", "!scb", c->m, "@", v, (size_t)n);
  return now;
}

/* settling(): its own clock reading, as the script's. */
static int settling(rtm_call *c) {
  if (c->settling_now < 0) {
    int64_t now, now_us;
    rtm_clock(&now, &now_us);
    int64_t since = rtm_settle_start(c, now);
    c->settling_now = since > 0 && now - since < RTM_SETTLE_MS;
  }
  return c->settling_now;
}

/* reaches(id, kind, rest) */
int rtm_reaches(rtm_call *c, rtm_str id, char kind, const char *rest,
                size_t rest_len) {
  return notify(c, id, kind, rest, rest_len) > 0 || settling(c);
}

/* pop(): 1 with *id and *v (v.p NULL: canceled), 0 when q is empty. */
int rtm_pop(rtm_call *c, rtm_str *id, rtm_str *v) {
  *id = rtm_lpop(c);
  v->p = NULL;
  v->len = 0;
  if (id->p == NULL) {
    rtm_del(c, c->m);
    return 0;
  }
  rtm_count_pop(c);
  *v = rtm_hget(c, *id);
  if (v->p != NULL)
    rtm_hdel(c, *id);
  return 1;
}

/* held_off(now) */
int64_t rtm_held_off(rtm_call *c, int64_t now) {
  if (!c->have_held) {
    c->have_held = 1;
    c->held_left = 0;
    if (c->hold_ms > 0) {
      char *key = rtm.PoolAlloc(c->ctx, c->chan.len + 4);
      memcpy(key, c->chan.p, c->chan.len);
      memcpy(key + c->chan.len, "era", 3);
      RedisModuleServerInfoData *info =
          rtm.GetServerInfo(c->ctx, "replication");
      const char *replid =
          info != NULL ? rtm.ServerInfoGetFieldC(info, "master_replid") : NULL;
      char id[160];
      int idn = snprintf(id, sizeof(id), "%s%s", run_id,
                         replid != NULL ? replid : "");
      if (info != NULL)
        rtm.FreeServerInfo(c->ctx, info);
      rtm_str at = rtm_string(RTM_CALL(c, "GET", "b", key, c->chan.len + 3));
      double since = (double)now;
      if (at.p != NULL && at.len > (size_t)idn &&
          memcmp(at.p, id, (size_t)idn) == 0 && at.p[idn] == ':') {
        since = (double)rtm_num(c, at.p + idn + 1, at.len - (size_t)idn - 1,
                                "era stamp"); /* the same era */
      } else {
        char v[200];
        int n = snprintf(v, sizeof(v), "%s:%" PRId64, id, now);
        RTM_CALL(c, "SET", "!bb", key, c->chan.len + 3, v, (size_t)n);
      }
      c->held_left = (int64_t)fmax(since + c->hold_ms - (double)now, 0);
    }
  }
  return c->held_left;
}

/* tell_next(holder_id, deadline, budget) */
void rtm_tell_next(rtm_call *c, rtm_str holder_id, int64_t deadline,
                   int budget) {
  char rest[NUM_CAP + 1];
  putbuf b = {rest, 0, sizeof(rest), 0};
  put_field(&b, deadline);
  size_t rn = b.len;
  while (budget > 0) {
    rtm_str id = rtm_front(c);
    if (id.p == NULL) {
      rtm_del(c, c->m);
      return;
    }
    if (rtm_eq(head32(id), head32(holder_id)))
      return;
    if (rtm_hget(c, id).p != NULL &&
        rtm_reaches(c, id, RT_PROTO_NOTICE_NEXT, rest, rn))
      return;
    rtm_str pid, pv;
    rtm_pop(c, &pid, &pv);
    budget--;
  }
}

/* grant_next(now, now_us, last, quiet) */
void rtm_grant_next(rtm_call *c, int64_t now, int64_t now_us,
                    const int64_t *last, rtm_str quiet, rtm_grant *out) {
  memset(out, 0, sizeof(*out));
  int budget = RTM_SKIP_MAX;
  int64_t skipped;
  if (rtm_held_off(c, now) > 0) {
    /* Held off: the front waiter is told when the hold ends. */
    rtm_touch(c, rtm_held_off(c, now));
    rtm_tell_next(c, quiet.p != NULL ? quiet : (rtm_str){"", 0},
                  now + rtm_held_off(c, now), budget);
    return;
  }
  while (budget > 0) {
    rtm_str id, v;
    if (!rtm_pop(c, &id, &v))
      return;
    if (v.p != NULL) {
      int64_t ticket, ttl;
      rtm_str label;
      rtm_member(c, v, &ticket, &ttl, &label);
      int64_t fence = rtm_next_fence(c, last, now_us);
      int64_t deadline = now + ttl;
      int granted = rtm_eq(id, quiet);
      if (!granted) {
        rtm_str ab = rtm_about(c, (rtm_str){"", 0});
        size_t cap = 3 * NUM_CAP + ab.len;
        char *rest = rtm.PoolAlloc(c->ctx, cap);
        putbuf b = {rest, 0, cap, 0};
        put_field(&b, fence); /* ":<fence>:<lease>:<deadline>" */
        put_field(&b, ttl);
        put_field(&b, deadline);
        put_bytes(&b, ab.p, ab.len);
        granted = rtm_reaches(c, id, RT_PROTO_NOTICE_GRANTED, rest, b.len);
      }
      if (granted) {
        rtm_set_holder(c, id, ttl, fence, deadline, now, label);
        rtm_touch(c, ttl); /* waiters may stay behind it */
        rtm_tell_next(c, id, deadline, budget);
        out->id = id;
        out->fence = fence;
        out->deadline = deadline;
        out->ttl = ttl;
        return;
      }
      /* Its notice went out (a replica's subscribers hear it): the next
       * grant's fence must be above it. */
      skipped = fence;
      last = &skipped;
    }
    budget--;
  }
  out->more = RTM_MORE;
}

/* place(mv, head, len): 1 with *pos when the waiter is still in q. */
int rtm_place(rtm_call *c, rtm_str mv, rtm_str head, long long len,
              long long *pos) {
  if (mv.p == NULL)
    return 0;
  int64_t ticket;
  rtm_member(c, mv, &ticket, NULL, NULL);
  long long h = 0;
  if (head.p != NULL && rtm_parse_ll(head, &h) != 0)
    h = 0;
  long long p = ticket - h;
  if (p < 0 || p >= len)
    return 0;
  *pos = p;
  return 1;
}
