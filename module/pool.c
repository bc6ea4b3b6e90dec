/* The pool resources' commands (semaphores, read-write locks, elections):
 * redturn.pool_enqueue, .pool_try, .pool_release, .pool_reap,
 * .pool_extend, .pool_inspect and .proclaim, each lua/<name>.lua in C on
 * lua/lib/pool.lua's rules (below, step for step) and prelude.c's
 * helpers. Called like FCALL without the function name (numkeys, Q h M D,
 * then the script's ARGV), answering what the script answers, element for
 * element. The prelude's q and m are Q and M here (c->q, c->m), as in
 * pool.lua; h (a HASH here) and D are read and written with their
 * commands through RedisModule_Call, writes with "!" (replicated as
 * those commands, in the call's MULTI/EXEC). */
#include "pool.h"

#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "command.h"
#include "prelude.h"

/* Constants of lua/lib/pool.lua. */
#define RW_ALL 1099511627776LL /* 2^40: readers never run out */
#define SEM_MAX 1000000000LL
/* Integers in records and messages: at most 20 characters each. */
#define NUM_CAP 24

/* The state of one call (load_state's st). */
typedef struct pool_st {
  rtm_str kind; /* the kind asked for */
  int64_t cap;  /* its permits */
  int64_t used; /* permits in use */
  int64_t last; /* the last fence, when have_last */
  int have_last;
  int64_t now, now_us;
  int64_t freed; /* permits of leases found ended */
  int dirty, moved, more;
  /* st.leader: {id, fence, deadline (have_deadline), label} */
  int have_leader, leader_has_deadline;
  rtm_str leader_id, leader_label;
  int64_t leader_fence, leader_deadline;
  /* A holder record add_holder has yet to write, the one drop_holder has
   * yet to delete (p NULL: none) */
  rtm_str pend_id, pend_rec, pend_del;
  /* st.granted: the quiet request's {fence, deadline, ttl} */
  int granted;
  int64_t g_fence, g_deadline, g_ttl;
  /* load_state's reads, for its writes (reap_ended): h's fields that are
   * no holder and all of them, D's size and first and last scores */
  long long meta, h_len, listed;
  int64_t first, latest;
} pool_st;

/* ---- small helpers ----------------------------------------------------- */

/* "<n>" into a pooled buffer. */
static rtm_str fmt_ll(rtm_call *c, long long n) {
  char *b = rtm.PoolAlloc(c->ctx, NUM_CAP);
  return (rtm_str){b, rtm_fmt_i64(b, n)};
}

/* Lua 5.1's tonumber() of a string: strtod (hexadecimal too), white space
 * around, the string read as C reads it (up to a NUL). 0 on success. */
static int lua_number(rtm_call *c, rtm_str s, double *out) {
  if (s.p == NULL)
    return -1;
  const char *z = memchr(s.p, '\0', s.len);
  size_t n = z != NULL ? (size_t)(z - s.p) : s.len;
  char *buf = rtm.PoolAlloc(c->ctx, n + 1);
  memcpy(buf, s.p, n);
  buf[n] = '\0';
  char *end;
  double v = strtod(buf, &end);
  if (end == buf)
    return -1;
  if (*end == 'x' || *end == 'X')
    v = (double)strtoul(buf, &end, 16);
  while (isspace((unsigned char)*end))
    end++;
  if (*end != '\0')
    return -1;
  *out = v;
  return 0;
}

/* tonumber(s) of a number the protocol wrote; *out unchanged when s is
 * nil or no number (the caller's "or" default). */
static void lua_int_or(rtm_call *c, rtm_str s, int64_t *out) {
  long long n;
  double v;
  if (rtm_parse_ll(s, &n) == 0) /* what the protocol writes */
    *out = n;
  else if (lua_number(c, s, &v) == 0 && isfinite(v))
    *out = (int64_t)v;
}

/* capacity(kind): the permits a kind has, 0 when it is no kind. */
static int64_t capacity(rtm_str kind) {
  if (rtm_eqc(kind, "rw"))
    return RW_ALL;
  if (rtm_eqc(kind, "e"))
    return 1;
  /* '^s:([1-9]%d*)$', at most SEM_MAX */
  if (kind.p == NULL || kind.len < 3 || kind.len > 12 || kind.p[0] != 's' ||
      kind.p[1] != ':' || kind.p[2] < '1' || kind.p[2] > '9')
    return 0;
  int64_t n = 0;
  for (size_t i = 2; i < kind.len; i++) {
    if (kind.p[i] < '0' || kind.p[i] > '9')
      return 0;
    n = n * 10 + (kind.p[i] - '0');
  }
  return n <= SEM_MAX ? n : 0;
}

/* wrong_kind(is, asked) */
static void wrong_kind(rtm_call *c, rtm_str is, rtm_str asked) {
  char a[64], b[64];
  rtm_describe(is, a, sizeof(a));
  rtm_describe(asked, b, sizeof(b));
  rtm_fail(c, "WRONGKIND the resource is %s, not %s", a, b);
}

/* held(rec): a holder record "<fence>:<granted>:<permits>[:<label>]". */
static void held(rtm_call *c, rtm_str v, int64_t *fence, int64_t *granted,
                 int64_t *k, rtm_str *label) {
  const char *end = v.p + v.len;
  const char *a = memchr(v.p, ':', v.len);
  const char *b = a ? memchr(a + 1, ':', (size_t)(end - a - 1)) : NULL;
  if (b == NULL)
    rtm_fail(c, "ERR %s: malformed holder record", c->name);
  const char *d = memchr(b + 1, ':', (size_t)(end - b - 1));
  if (fence != NULL)
    *fence = rtm_num(c, v.p, (size_t)(a - v.p), "holder fence");
  if (granted != NULL)
    *granted = rtm_num(c, a + 1, (size_t)(b - a - 1), "holder grant time");
  if (k != NULL)
    *k = rtm_num(c, b + 1, (size_t)((d ? d : end) - b - 1), "holder permits");
  if (label != NULL)
    *label = d ? (rtm_str){d + 1, (size_t)(end - d - 1)} : (rtm_str){"", 0};
}

/* waiter(v): a member value of M "<ticket>:<ttl>:<permits>[:<label>]". */
static void waiter(rtm_call *c, rtm_str v, int64_t *ttl, int64_t *k,
                   rtm_str *label) {
  int64_t ticket;
  rtm_str rest;
  rtm_member(c, v, &ticket, ttl, &rest);
  const char *d = memchr(rest.p, ':', rest.len);
  *k = rtm_num(c, rest.p, (size_t)(d ? d - rest.p : (ptrdiff_t)rest.len),
               "member permits");
  if (label != NULL)
    *label = d ? (rtm_str){d + 1, (size_t)(rest.p + rest.len - d - 1)}
               : (rtm_str){"", 0};
}

/* HGET h field */
static rtm_str h_get(rtm_call *c, rtm_str field) {
  return rtm_hget_in(c, c->h, field);
}

/* PTTL h */
static long long h_pttl(rtm_call *c) {
  return rtm_int(RTM_CALL(c, "PTTL", "s", c->h));
}

/* A score of D as a number. */
static int64_t score(rtm_call *c, RedisModuleCallReply *r) {
  rtm_str s = rtm_string(r);
  double v = 0;
  if (lua_number(c, s, &v) != 0)
    rtm_fail(c, "ERR %s: malformed deadline", c->name);
  return (int64_t)v;
}

/* deadlines(): the earliest and latest holder deadline; 0 when nobody
 * holds. */
static int deadlines(rtm_call *c, int64_t *first, int64_t *last) {
  int64_t l;
  return rtm_zends(c, first, last != NULL ? last : &l) > 0;
}

/* ---- load_state ---------------------------------------------------------
 * Split in two: its reads and checks (load_read), then its writes
 * (reap_ended: deadlines a lost D lacks, leases that ended), so a
 * command checks its arguments between them, before any write. */

static void load_read(rtm_call *c, pool_st *st, rtm_str asked) {
  memset(st, 0, sizeof(*st));
  st->kind = asked;
  st->cap = capacity(asked);
  if (st->cap == 0)
    rtm_fail(c, "ERR unknown kind of resource: %.*s",
             (int)(asked.len > 64 ? 64 : asked.len), asked.p);
  rtm_now(c, &st->now, &st->now_us);
  /* HMGET h '*' '+' 'f': a STRING h (a mutex's) is a WRONGKIND. */
  static const char *const fields[] = {"*", "+", "f"};
  rtm_str v[3];
  if (rtm_hmget(c, c->h, 3, fields, v, &st->h_len) == RTM_KEYTYPE_STRING)
    wrong_kind(c, (rtm_str){"mutex", 5}, asked);
  rtm_str k = v[0], u = v[1], f = v[2];
  rtm_str stored = k;
  if (k.p == NULL)
    stored = rtm_hget(c, (rtm_str){"*", 1});
  else
    rtm_length(c, c->m, RTM_KEYTYPE_HASH); /* still read: a wrong type fails */
  rtm_llen(c);
  st->listed = rtm_zends(c, &st->first, &st->latest);
  if (stored.p != NULL && !rtm_eq(stored, asked))
    wrong_kind(c, stored, asked);
  lua_int_or(c, u, &st->used);
  if (f.p != NULL) {
    st->last = INT64_MIN;
    lua_int_or(c, f, &st->last);
    st->have_last = st->last != INT64_MIN;
  }
  st->meta = (k.p != NULL) + (u.p != NULL) + (f.p != NULL);
}

/* Whether field is one of h's that is no holder. */
static int is_meta(rtm_str f) {
  return f.len == 1 && (f.p[0] == '*' || f.p[0] == '+' || f.p[0] == 'f');
}

/* restore_deadlines(st, meta, listed) */
static void restore_deadlines(rtm_call *c, pool_st *st) {
  long long holders = st->h_len - st->meta;
  if (holders <= st->listed)
    return;
  long long left = h_pttl(c);
  if (left < 1)
    left = 1;
  rtm_str b = fmt_ll(c, st->now + left);
  RedisModuleString *bound = rtm.CreateString(c->ctx, b.p, b.len);
  RedisModuleCallReply *keys = RTM_CALL(c, "HKEYS", "s", c->h);
  size_t n = rtm.CallReplyLength(keys);
  RedisModuleString **args =
      rtm.PoolAlloc(c->ctx, 1000 * sizeof(RedisModuleString *));
  size_t na = 0;
  for (size_t i = 0; i < n; i++) {
    rtm_str f = rtm_string(rtm.CallReplyArrayElement(keys, i));
    if (f.p == NULL || is_meta(f))
      continue;
    args[na++] = bound;
    args[na++] = rtm.CreateString(c->ctx, f.p, f.len);
    if (na >= 1000) { /* as the script's batches */
      RTM_CALL(c, "ZADD", "!scv", c->d, "NX", args, na);
      na = 0;
    }
  }
  if (na > 0)
    RTM_CALL(c, "ZADD", "!scv", c->d, "NX", args, na);
  RTM_CALL(c, "PEXPIRE", "!sl", c->d, left);
}

static void reap_ended(rtm_call *c, pool_st *st) {
  restore_deadlines(c, st);
  /* Leases that ended leave, at most SKIP_MAX per call (none when the
   * first deadline D had is after now: restore_deadlines adds none
   * before it). */
  if (st->listed == 0 || st->first > st->now)
    return;
  rtm_str gone[RTM_SKIP_MAX];
  size_t n = rtm_zrange(c, 0, (double)st->now, RTM_SKIP_MAX, gone, NULL);
  if (n == 0)
    return;
  for (size_t i = 0; i < n; i++) {
    rtm_str rec = h_get(c, gone[i]);
    if (rec.p != NULL) {
      int64_t k;
      held(c, rec, NULL, NULL, &k, NULL);
      rtm_hdel_in(c, c->h, gone[i], 1);
      st->freed += k;
      st->used -= k;
    }
  }
  rtm_zrem(c, gone, n);
  st->dirty = st->moved = 1;
  if (n == RTM_SKIP_MAX)
    st->more = RTM_MORE;
}

/* ---- pool.lua's other rules ---------------------------------------------- */

/* grant_reply(st, id, rec) */
static void grant_reply(rtm_call *c, pool_st *st, rtm_str id, rtm_str rec) {
  int64_t fence;
  held(c, rec, &fence, NULL, NULL, NULL);
  int64_t deadline;
  if (!rtm_zscore(c, id, &deadline)) {
    long long left = h_pttl(c);
    deadline = st->now + (left > 1 ? left : 1);
  }
  long long v[] = {RTM_GRANTED, fence, deadline - st->now, deadline, st->now};
  rtm_reply_ints(c->ctx, v, 5);
}

/* Write what add_holder and drop_holder left pending to h (their events
 * went out). */
static void flush_pending(rtm_call *c, pool_st *st) {
  if (st->pend_del.p != NULL)
    rtm_hdel_in(c, c->h, st->pend_del, 0);
  st->pend_del.p = NULL;
  if (st->pend_id.p == NULL)
    return;
  rtm_str fv[] = {st->pend_id, st->pend_rec};
  rtm_hset(c, c->h, 1, fv, 0);
  st->pend_id.p = NULL;
}

/* add_holder(st, id, k, ttl, label): its fence; *deadline. */
static int64_t add_holder(rtm_call *c, pool_st *st, rtm_str id, int64_t k,
                          int64_t ttl, rtm_str label, int64_t *deadline) {
  int64_t fence =
      rtm_next_fence(c, st->have_last ? &st->last : NULL, st->now_us);
  *deadline = st->now + ttl;
  /* "<fence>:<granted>:<permits>[:<label>]" */
  char *rec = rtm.PoolAlloc(c->ctx, 3 * NUM_CAP + label.len + 1);
  size_t n = rtm_fmt_i64(rec, fence);
  rec[n++] = ':';
  n += rtm_fmt_i64(rec + n, st->now);
  rec[n++] = ':';
  n += rtm_fmt_i64(rec + n, k);
  if (label.len > 0) {
    rec[n++] = ':';
    memcpy(rec + n, label.p, label.len);
    n += label.len;
  }
  /* HSET h id rec: its event now, its write with the next one to h (the
   * counters finish writes, or the next grant's), so one HSET replicates
   * both. */
  flush_pending(c, st);
  rtm.NotifyKeyspaceEvent(c->ctx, RTM_NOTIFY_HASH, "hset", c->h);
  st->pend_id = id;
  st->pend_rec = (rtm_str){rec, n};
  rtm_zadd(c, *deadline, id);
  st->used += k;
  st->last = fence;
  st->have_last = 1;
  st->dirty = st->moved = 1;
  st->have_leader = st->leader_has_deadline = 1;
  st->leader_id = id;
  st->leader_fence = fence;
  st->leader_deadline = *deadline;
  st->leader_label = label;
  return fence;
}

/* drop_holder(st, id, rec) */
static void drop_holder(rtm_call *c, pool_st *st, rtm_str id, rtm_str rec) {
  int64_t k;
  held(c, rec, NULL, NULL, &k, NULL);
  /* HDEL h id: its event now, the write before the next one to h, or
   * none when finish deletes h (what the replicas get ends the same). */
  flush_pending(c, st);
  rtm.NotifyKeyspaceEvent(c->ctx, RTM_NOTIFY_HASH, "hdel", c->h);
  st->pend_del = id;
  rtm_zrem(c, &id, 1);
  st->used -= k;
  st->dirty = st->moved = 1;
}

/* reaches(id, 'n', ':' .. int(at)) */
static int tell(rtm_call *c, rtm_str id, int64_t at) {
  char rest[NUM_CAP + 1];
  int n = snprintf(rest, sizeof(rest), ":%" PRId64, at);
  return rtm_reaches(c, id, RT_PROTO_NOTICE_NEXT, rest, (size_t)n);
}

/* grant_waiters(st, quiet, tell) */
static void grant_waiters(rtm_call *c, pool_st *st, rtm_str quiet,
                          int telling) {
  int budget = RTM_SKIP_MAX;
  if (rtm_held_off(c, st->now) > 0) {
    /* Held off: nobody is granted; the front waiter (unless quiet) is
     * told when the hold ends. */
    rtm_str id = rtm_front(c);
    if (id.p != NULL && !rtm_eq(id, quiet))
      tell(c, id, st->now + rtm_held_off(c, st->now));
    st->dirty = 1; /* Q and M must last through the hold (finish) */
    return;
  }
  while (budget > 0) {
    rtm_str id = rtm_front(c);
    if (id.p == NULL) {
      rtm_del(c, c->m);
      return;
    }
    /* A grant's record is written before anything that may fail. */
    flush_pending(c, st);
    rtm_str v = rtm_hget(c, id), pid, pv;
    if (v.p == NULL) {
      rtm_pop(c, &pid, &pv);
      budget--;
      continue;
    }
    int64_t ttl, k;
    rtm_str label;
    waiter(c, v, &ttl, &k, &label);
    if (st->used + k > st->cap) {
      if (!telling || rtm_eq(id, quiet))
        return;
      int64_t first;
      if (tell(c, id, deadlines(c, &first, NULL) ? first : st->now))
        return;
      rtm_pop(c, &pid, &pv); /* gone: the one behind it may fit */
    } else {
      rtm_pop(c, &pid, &pv);
      int64_t fence =
          rtm_next_fence(c, st->have_last ? &st->last : NULL, st->now_us);
      int granted = rtm_eq(id, quiet);
      if (!granted) {
        rtm_str ab = rtm_about(c, st->kind);
        size_t cap = 3 * NUM_CAP + ab.len;
        char *rest = rtm.PoolAlloc(c->ctx, cap);
        int n = snprintf(rest, cap, ":%" PRId64 ":%" PRId64 ":%" PRId64, fence,
                         ttl, st->now + ttl);
        memcpy(rest + n, ab.p, ab.len);
        granted = rtm_reaches(c, id, RT_PROTO_NOTICE_GRANTED, rest,
                              (size_t)n + ab.len);
      }
      if (granted) {
        int64_t deadline;
        add_holder(c, st, id, k, ttl, label, &deadline);
        telling = 1;
        if (rtm_eq(id, quiet)) {
          st->granted = 1;
          st->g_fence = fence;
          st->g_deadline = deadline;
          st->g_ttl = ttl;
        }
      } else {
        /* Its notice went out (a replica's subscribers hear it): the next
         * grant's fence must be above it. */
        st->last = fence;
        st->have_last = 1;
      }
    }
    budget--;
  }
  st->more = RTM_MORE;
}

/* HSET h '*' kind '+' used 'f' last */
static void write_counts(rtm_call *c, pool_st *st, int64_t used, int64_t last) {
  if (st->pend_del.p != NULL) {
    rtm_hdel_in(c, c->h, st->pend_del, 0);
    st->pend_del.p = NULL;
  }
  rtm_str fv[] = {st->pend_id, st->pend_rec,    {"*", 1}, st->kind,
                  {"+", 1},    fmt_ll(c, used), {"f", 1}, fmt_ll(c, last)};
  /* With the holder record add_holder left pending (first, as the
   * script writes it first), in one HSET. */
  int pend = st->pend_id.p != NULL;
  rtm_hset(c, c->h, 3 + pend, fv + (pend ? 0 : 2), 1);
  st->pend_id.p = NULL;
}

/* PEXPIREAT name at: in place when at is after now (a time before it
 * deletes the key: the command does that). */
static void expire_at(rtm_call *c, pool_st *st, RedisModuleString *name,
                      int64_t at) {
  if (at > st->now)
    rtm_pexpireat(c, name, at);
  else
    RTM_CALL(c, "PEXPIREAT", "!sl", name, (long long)at);
}

/* finish(st) */
static void finish(rtm_call *c, pool_st *st) {
  int64_t first, last;
  int held_any = deadlines(c, &first, &last);
  if (!held_any && st->used > 0) {
    /* D was lost while leases run: h's own expiry keeps their permits
     * taken until then. */
    write_counts(c, st, st->used, st->have_last ? st->last : 0);
    rtm_touch(c, h_pttl(c));
  } else if (!held_any) {
    rtm_del(c, c->d);
    if (!rtm.KeyExists(c->ctx, c->q)) {
      st->pend_del.p = NULL; /* h goes as a whole */
      rtm_del(c, c->h);
      rtm_del(c, c->m);
    } else {
      write_counts(c, st, 0, st->have_last ? st->last : 0);
      rtm_pexpire(c, c->h, RTM_GRACE_MS);
      rtm_touch(c, rtm_held_off(c, st->now));
    }
  } else {
    /* No last fence when h was lost while D lists leases: 0. */
    write_counts(c, st, st->used, st->have_last ? st->last : 0);
    expire_at(c, st, c->h, last);
    expire_at(c, st, c->d, last);
    int64_t off = rtm_held_off(c, st->now);
    rtm_touch(c, last - st->now > off ? last - st->now : off);
  }
  if (!rtm_eqc(st->kind, "e") || !st->moved)
    return;
  /* An election tells its observers the leader: "<key base>:o". */
  if (!st->have_leader && held_any) {
    /* The holder that stays: h's one holder (capacity 1), if any; an
     * entry of D without a record in h (h was lost) holds nothing. */
    RedisModuleCallReply *keys = RTM_CALL(c, "HKEYS", "s", c->h);
    size_t n = rtm.CallReplyLength(keys);
    for (size_t i = 0; i < n; i++) {
      rtm_str id = rtm_string(rtm.CallReplyArrayElement(keys, i));
      if (id.p == NULL || is_meta(id))
        continue;
      rtm_str rec = h_get(c, id);
      st->have_leader = 1;
      st->leader_id = id;
      held(c, rec, &st->leader_fence, NULL, NULL, &st->leader_label);
      st->leader_has_deadline = rtm_zscore(c, id, &st->leader_deadline);
    }
  }
  size_t hl;
  const char *h = rtm.StringPtrLen(c->h, &hl);
  char *chan = rtm.PoolAlloc(c->ctx, hl + 1);
  memcpy(chan, h, hl);
  chan[hl - 1] = 'o'; /* the observe channel <base>:o */
  size_t cap = 3 * NUM_CAP + 8 + st->leader_id.len + st->leader_label.len;
  char *msg = rtm.PoolAlloc(c->ctx, cap);
  int n;
  if (st->have_leader) {
    if (!st->leader_has_deadline) /* int(nil) in the script */
      rtm_fail(c, "ERR %s: the leader has no deadline", c->name);
    n = snprintf(msg, cap, "o:%" PRId64 ":%" PRId64 ":", st->leader_fence,
                 st->leader_deadline);
    memcpy(msg + n, st->leader_id.p, st->leader_id.len);
    n += (int)st->leader_id.len;
    msg[n++] = ':';
    memcpy(msg + n, st->leader_label.p, st->leader_label.len);
    n += (int)st->leader_label.len;
  } else {
    n = snprintf(msg, cap, "o:%" PRId64 ":0::", st->have_last ? st->last : 0);
  }
  RTM_CALL(c, "SPUBLISH", "!bb", chan, hl, msg, (size_t)n);
}

/* waiting_at(id): 1 with *pos when id is a live waiter in Q. */
static int waiting_at(rtm_call *c, rtm_str id, long long *pos) {
  rtm_str mv, head;
  rtm_hget2(c, id, "#", &mv, &head);
  return rtm_place(c, mv, head, rtm_llen(c), pos);
}

/* permits(st, arg): ARGV[i + 1], 0 for all of them. */
static int64_t permits(rtm_call *c, pool_st *st, int i) {
  rtm_str a = c->argv[i];
  double k;
  if (lua_number(c, a, &k) != 0 || isnan(k) || k < 0 || k != floor(k) ||
      k > (double)st->cap) {
    char is[64];
    rtm_describe(st->kind, is, sizeof(is));
    rtm_fail(c, "ERR a request for %.*s permits of %s",
             (int)(a.len > 64 ? 64 : a.len), a.p, is);
  }
  return k == 0 ? st->cap : (int64_t)k;
}

/* The grant waiters of a call whose reads found leases ended, written
 * back (the scripts' "if st.dirty then grant_waiters(st, nil, true)
 * finish(st) end"). */
static void settle(rtm_call *c, pool_st *st) {
  if (st->dirty) {
    grant_waiters(c, st, (rtm_str){NULL, 0}, 1);
    finish(c, st);
  }
}

static const rtm_str no_id = {NULL, 0};

/* ---- the commands -------------------------------------------------------- */

/* A request's arguments (pool_enqueue's and pool_try's): ARGV[2] the id,
 * ARGV[3] the lease, the label, kind and permits at ARGV[i + 1], i + 2,
 * i + 3; the state read (load_read). Returns the permits asked for. */
static int64_t request(rtm_call *c, pool_st *st, int i, rtm_str *id,
                       rtm_str *label, int64_t *ttl) {
  *id = c->argv[1];
  *label = rtm_opt_arg(c, i);
  *ttl = rtm_number_arg(c, 2, "the lease", 1);
  load_read(c, st, c->argv[i + 1]);
  return permits(c, st, i + 2);
}

/* lua/pool_enqueue.lua */
static void pool_enqueue(rtm_call *c) {
  rtm_str id, label;
  int64_t ttl;
  pool_st st;
  int64_t k = request(c, &st, 4, &id, &label, &ttl);
  if (rtm.GetUsedMemoryRatio() > 1) {
    /* Out of memory: a new request (neither a holder nor a waiter in Q)
     * is refused before anything is written. */
    long long pos;
    if (h_get(c, id).p == NULL && !waiting_at(c, id, &pos))
      rtm_refuse_new_if_oom(c);
  }
  reap_ended(c, &st);
  rtm_str rec = h_get(c, id);
  if (rec.p != NULL) {
    /* A retry of a request that holds: leases found ended free their
     * permits, for the waiters first. */
    settle(c, &st);
    grant_reply(c, &st, id, rec);
    return;
  }
  long long len = rtm_llen(c);
  int64_t deadline;
  if (len == 0 && st.used + k <= st.cap && rtm_held_off(c, st.now) == 0) {
    /* Nobody waits and the permits are free: the uncontended grant. */
    rtm_del(c, c->m);
    int64_t fence = add_holder(c, &st, id, k, ttl, label, &deadline);
    finish(c, &st);
    long long v[] = {RTM_GRANTED, fence, ttl, deadline, st.now};
    rtm_reply_ints(c->ctx, v, 5);
    return;
  }
  rtm_str mv, head;
  rtm_hget2(c, id, "#", &mv, &head);
  if (rtm_eqc(rtm_opt_arg(c, 3), "1") && head.p != NULL)
    rtm_settle_start(c, st.now); /* a client back after a reconnect */
  long long pos;
  if (!rtm_place(c, mv, head, len, &pos)) {
    int64_t h = 0;
    lua_int_or(c, head, &h);
    len = rtm_int(RTM_CALL(c, "RPUSH", "!sb", c->q, id.p, id.len));
    rtm_str lease = c->argv[2];
    size_t cap = 2 * NUM_CAP + lease.len + label.len + 3;
    char *ticket = rtm.PoolAlloc(c->ctx, cap);
    int n = snprintf(ticket, cap, "%" PRId64 ":%.*s:%" PRId64,
                     (int64_t)(h + len - 1), (int)lease.len, lease.p, k);
    if (label.len > 0) {
      ticket[n++] = ':';
      memcpy(ticket + n, label.p, label.len);
      n += (int)label.len;
    }
    rtm_str fv[] = {id,       {ticket, (size_t)n}, {"#", 1}, fmt_ll(c, h),
                    {"@", 1}, rtm_settled_stamp(), {"*", 1}, st.kind};
    if (len > 1 && head.p != NULL) {
      rtm_hset(c, c->m, 1, fv, 1);
    } else {
      rtm_hset(c, c->m, 4, fv, 1);
      st.dirty = 1; /* Q and M need their expiry */
    }
  }
  /* Leases that ended may have freed permits for the front. */
  grant_waiters(c, &st, id, st.freed > 0);
  if (st.dirty)
    finish(c, &st);
  if (st.granted) {
    long long v[] = {RTM_GRANTED, st.g_fence, st.g_ttl, st.g_deadline, st.now};
    rtm_reply_ints(c->ctx, v, 5);
    return;
  }
  int64_t first;
  int any = deadlines(c, &first, NULL);
  if (!waiting_at(c, id, &pos))
    pos = 0;
  long long v[] = {RTM_QUEUED, pos + 1,
                   any ? first - st.now : rtm_held_off(c, st.now), st.now,
                   st.more};
  rtm_reply_ints(c->ctx, v, 5);
}

/* lua/pool_try.lua */
static void pool_try(rtm_call *c) {
  rtm_str id, label;
  int64_t ttl;
  pool_st st;
  int64_t k = request(c, &st, 3, &id, &label, &ttl);
  reap_ended(c, &st);
  rtm_str rec = h_get(c, id);
  if (rec.p != NULL) { /* a retry of a try that was granted */
    settle(c, &st);
    grant_reply(c, &st, id, rec);
    return;
  }
  if (st.dirty) /* leases ended: the waiters they let in come first */
    grant_waiters(c, &st, no_id, 1);
  if (rtm_llen(c) > 0 || st.used + k > st.cap ||
      rtm_held_off(c, st.now) > 0) { /* busy, or held off */
    if (st.dirty)
      finish(c, &st);
    int64_t first;
    int any = deadlines(c, &first, NULL);
    long long v[] = {0, any ? first - st.now : rtm_held_off(c, st.now), st.now,
                     st.more};
    rtm_reply_ints(c->ctx, v, 4);
    return;
  }
  if (rtm.GetUsedMemoryRatio() > 1) {
    /* Out of memory: what ran so far is written back, the new holder is
     * refused. */
    if (st.dirty)
      finish(c, &st);
    rtm_refuse_new_if_oom(c);
  }
  rtm_del(c, c->m);
  int64_t deadline;
  int64_t fence = add_holder(c, &st, id, k, ttl, label, &deadline);
  finish(c, &st);
  long long v[] = {RTM_GRANTED, fence, ttl, deadline, st.now};
  rtm_reply_ints(c->ctx, v, 5);
}

/* lua/pool_release.lua */
static void pool_release(rtm_call *c) {
  enum { RELEASED = 1, CANCELED = 2 };
  rtm_str id = c->argv[1];
  pool_st st;
  load_read(c, &st, c->argv[2]);
  reap_ended(c, &st);
  long long result = 0;
  rtm_str rec = h_get(c, id);
  if (rec.p != NULL) {
    drop_holder(c, &st, id, rec);
    result = RELEASED;
  } else if (rtm_hdel(c, id)) {
    result = CANCELED;
    if (rtm_eq(rtm_front(c), id)) {
      rtm_str pid, pv;
      rtm_pop(c, &pid, &pv);
      st.dirty = 1;
    }
  } else {
    rtm_zrem(c, &id, 1); /* a lost record's */
  }
  settle(c, &st);
  long long v[] = {result, st.more};
  rtm_reply_ints(c->ctx, v, 2);
}

/* lua/pool_reap.lua */
static void pool_reap(rtm_call *c) {
  rtm_str id = c->argv[1];
  pool_st st;
  load_read(c, &st, c->argv[2]);
  reap_ended(c, &st);
  if (st.dirty || rtm_llen(c) > 0)
    grant_waiters(c, &st, no_id, st.dirty);
  if (st.dirty)
    finish(c, &st);
  int64_t first;
  long long left = deadlines(c, &first, NULL) ? first - st.now : -1;
  long long v[] = {left, 0, 0, st.now, st.more};
  long long pos;
  if (id.len == 0) {
    /* nobody asked about */
  } else if (h_get(c, id).p != NULL) {
    v[1] = 2;
  } else if (waiting_at(c, id, &pos)) {
    v[1] = 1;
    v[2] = pos + 1;
  }
  rtm_reply_ints(c->ctx, v, 5);
}

/* lua/pool_extend.lua */
static void pool_extend(rtm_call *c) {
  rtm_str id = c->argv[1];
  int64_t ttl = rtm_number_arg(c, 2, "the lease", 1);
  pool_st st;
  load_read(c, &st, c->argv[3]);
  reap_ended(c, &st);
  if (h_get(c, id).p == NULL) {
    settle(c, &st);
    long long v[] = {0, st.now};
    rtm_reply_ints(c->ctx, v, 2);
    return;
  }
  rtm_zadd(c, st.now + ttl, id);
  grant_waiters(c, &st, no_id, st.dirty);
  finish(c, &st);
  long long v[] = {1, ttl, st.now + ttl, st.now};
  rtm_reply_ints(c->ctx, v, 4);
}

/* lua/proclaim.lua */
static void proclaim(rtm_call *c) {
  rtm_str id = c->argv[1], value = c->argv[2];
  pool_st st;
  load_read(c, &st, c->argv[3]);
  reap_ended(c, &st);
  rtm_str rec = h_get(c, id);
  if (rec.p == NULL || !rtm_eqc(st.kind, "e")) {
    settle(c, &st);
    long long v[] = {0, st.now};
    rtm_reply_ints(c->ctx, v, 2);
    return;
  }
  int64_t fence, granted, k;
  held(c, rec, &fence, &granted, &k, NULL);
  size_t cap = 3 * NUM_CAP + value.len + 1;
  char *nrec = rtm.PoolAlloc(c->ctx, cap);
  int n = snprintf(nrec, cap, "%" PRId64 ":%" PRId64 ":%" PRId64, fence,
                   granted, k);
  if (value.len > 0) {
    nrec[n++] = ':';
    memcpy(nrec + n, value.p, value.len);
    n += (int)value.len;
  }
  rtm_str fv[] = {id, {nrec, (size_t)n}};
  rtm_hset(c, c->h, 1, fv, 1);
  st.have_leader = 1;
  st.leader_has_deadline = rtm_zscore(c, id, &st.leader_deadline);
  st.leader_id = id;
  st.leader_fence = fence;
  st.leader_label = value;
  st.dirty = st.moved = 1;
  finish(c, &st);
  long long v[] = {1, fence, st.now};
  rtm_reply_ints(c->ctx, v, 3);
}

/* lua/pool_inspect.lua: read-only. The reply is collected first and
 * written after, so a malformed record fails the call before the reply
 * begins. */
static void pool_inspect(rtm_call *c) {
  long long want = rtm_number_arg(c, 1, "the number to list", 0);
  rtm_str asked = c->argv[2];
  int64_t now, now_us;
  rtm_now(c, &now, &now_us);
  RedisModuleCallReply *v = rtm.Call(c->ctx, "HMGET", "scc", c->h, "*", "f");
  if (v == NULL || rtm.CallReplyType(v) == RTM_REPLY_ERROR) {
    if (rtm_eqc(rtm_string(RTM_CALL(c, "TYPE", "s", c->h)), "string"))
      rtm_fail(c, "WRONGKIND the resource is a mutex");
    rtm_checked(c, "HMGET", v);
  }
  rtm_str kind = rtm_string(rtm.CallReplyArrayElement(v, 0));
  rtm_str f = rtm_string(rtm.CallReplyArrayElement(v, 1));
  if (kind.p == NULL)
    kind = rtm_hget(c, (rtm_str){"*", 1});
  if (kind.p == NULL)
    kind = (rtm_str){"", 0};
  if (asked.len > 0 && kind.len > 0 && !rtm_eq(kind, asked))
    wrong_kind(c, kind, asked);
  rtm_llen(c);
  char from[NUM_CAP + 2];
  snprintf(from, sizeof(from), "(%" PRId64, now);
  RedisModuleCallReply *ids =
      RTM_CALL(c, "ZRANGEBYSCORE", "sccccll", c->d, from, "+inf", "WITHSCORES",
               "LIMIT", 0LL, want);
  size_t nids = rtm.CallReplyLength(ids) / 2;
  long long n_h = rtm_int(RTM_CALL(c, "HLEN", "s", c->h));
  /* Holders listed: the live ones by deadline, then those a lost D lacks. */
  size_t hcap = nids + (size_t)(n_h > 0 ? n_h : 0) + 1;
  rtm_str *hid = rtm.PoolAlloc(c->ctx, hcap * sizeof(rtm_str));
  rtm_str *hl = rtm.PoolAlloc(c->ctx, hcap * sizeof(rtm_str));
  int64_t *hk = rtm.PoolAlloc(c->ctx, hcap * sizeof(int64_t));
  int64_t *hf = rtm.PoolAlloc(c->ctx, hcap * sizeof(int64_t));
  int64_t *hd = rtm.PoolAlloc(c->ctx, hcap * sizeof(int64_t));
  size_t nh = 0;
  for (size_t i = 0; i < nids; i++) {
    rtm_str id = rtm_string(rtm.CallReplyArrayElement(ids, 2 * i));
    rtm_str rec = h_get(c, id);
    if (rec.p == NULL)
      continue;
    held(c, rec, &hf[nh], NULL, &hk[nh], &hl[nh]);
    hid[nh] = id;
    hd[nh++] = score(c, rtm.CallReplyArrayElement(ids, 2 * i + 1));
  }
  long long orphans = 0;
  long long holders = n_h - rtm_int(RTM_CALL(c, "HEXISTS", "sc", c->h, "*")) -
                      rtm_int(RTM_CALL(c, "HEXISTS", "sc", c->h, "+")) -
                      rtm_int(RTM_CALL(c, "HEXISTS", "sc", c->h, "f"));
  if (holders > rtm_int(RTM_CALL(c, "ZCARD", "s", c->d))) {
    long long left = h_pttl(c);
    int64_t bound = now + (left > 1 ? left : 1);
    RedisModuleCallReply *keys = RTM_CALL(c, "HKEYS", "s", c->h);
    for (size_t i = 0; i < rtm.CallReplyLength(keys); i++) {
      rtm_str fl = rtm_string(rtm.CallReplyArrayElement(keys, i));
      if (fl.p == NULL || is_meta(fl) ||
          rtm_string(RTM_CALL(c, "ZSCORE", "sb", c->d, fl.p, fl.len)).p != NULL)
        continue;
      orphans++;
      if ((long long)nh < want && nh < hcap) {
        held(c, h_get(c, fl), &hf[nh], NULL, &hk[nh], &hl[nh]);
        hid[nh] = fl;
        hd[nh++] = bound;
      }
    }
  }
  /* Permits in use by live leases: all of them when every holder is
   * listed. */
  long long live =
      rtm_int(RTM_CALL(c, "ZCOUNT", "scc", c->d, from, "+inf")) + orphans;
  int64_t used = 0;
  for (size_t i = 0; i < nh; i++)
    used += hk[i];
  if (live > (long long)nh || orphans > 0)
    lua_int_or(c, h_get(c, (rtm_str){"+", 1}), &used);
  long long n = rtm_int(RTM_CALL(c, "HLEN", "s", c->m));
  n -= rtm_int(RTM_CALL(c, "HEXISTS", "sc", c->m, "#"));
  n -= rtm_int(RTM_CALL(c, "HEXISTS", "sc", c->m, "@"));
  n -= rtm_int(RTM_CALL(c, "HEXISTS", "sc", c->m, "*"));
  /* Waiters in queue order, in chunks of at most 1000. */
  size_t wcap = 0, nw = 0;
  rtm_str *wid = NULL, *wl = NULL;
  int64_t *wk = NULL;
  long long start = 0;
  for (int chunks = 0; (long long)nw < want && chunks < RTM_SKIP_MAX;
       chunks++) {
    long long take = want - (long long)nw < 1000 ? want - (long long)nw : 1000;
    RedisModuleCallReply *entries =
        RTM_CALL(c, "LRANGE", "sll", c->q, start, start + take - 1);
    size_t ne = rtm.CallReplyLength(entries);
    if (ne == 0)
      break;
    RedisModuleString **args =
        rtm.PoolAlloc(c->ctx, (ne + 1) * sizeof(RedisModuleString *));
    args[0] = c->m;
    for (size_t i = 0; i < ne; i++) {
      rtm_str s = rtm_string(rtm.CallReplyArrayElement(entries, i));
      args[1 + i] = rtm.CreateString(c->ctx, s.p, s.len);
    }
    RedisModuleCallReply *vals = RTM_CALL(c, "HMGET", "v", args, ne + 1);
    if (nw + ne > wcap) {
      size_t ncap = 2 * (nw + ne);
      rtm_str *a = rtm.PoolAlloc(c->ctx, ncap * sizeof(rtm_str));
      rtm_str *b = rtm.PoolAlloc(c->ctx, ncap * sizeof(rtm_str));
      int64_t *d = rtm.PoolAlloc(c->ctx, ncap * sizeof(int64_t));
      if (nw > 0) {
        memcpy(a, wid, nw * sizeof(rtm_str));
        memcpy(b, wl, nw * sizeof(rtm_str));
        memcpy(d, wk, nw * sizeof(int64_t));
      }
      wid = a, wl = b, wk = d, wcap = ncap;
    }
    for (size_t i = 0; i < ne; i++) {
      rtm_str val = rtm_string(rtm.CallReplyArrayElement(vals, i));
      if (val.p == NULL)
        continue;
      int64_t ttl;
      waiter(c, val, &ttl, &wk[nw], &wl[nw]);
      wid[nw++] = rtm_string(rtm.CallReplyArrayElement(entries, i));
    }
    start += (long long)ne;
  }
  int64_t last = 0;
  lua_int_or(c, f, &last);
  RedisModuleCtx *ctx = c->ctx;
  rtm.ReplyWithArray(ctx, 14);
  rtm.ReplyWithLongLong(ctx, now);
  rtm.ReplyWithStringBuffer(ctx, kind.p, kind.len);
  rtm.ReplyWithLongLong(ctx, kind.len > 0 ? capacity(kind) : 0);
  rtm.ReplyWithLongLong(ctx, used);
  rtm.ReplyWithLongLong(ctx, last);
  rtm.ReplyWithLongLong(ctx, n);
  const rtm_str *strs[] = {hid, hl};
  const int64_t *ints[] = {hk, hf, hd};
  rtm.ReplyWithArray(ctx, (long)nh);
  for (size_t i = 0; i < nh; i++)
    rtm.ReplyWithStringBuffer(ctx, strs[0][i].p, strs[0][i].len);
  for (int a = 0; a < 3; a++) {
    rtm.ReplyWithArray(ctx, (long)nh);
    for (size_t i = 0; i < nh; i++)
      rtm.ReplyWithLongLong(ctx, ints[a][i]);
  }
  rtm.ReplyWithArray(ctx, (long)nh);
  for (size_t i = 0; i < nh; i++)
    rtm.ReplyWithStringBuffer(ctx, strs[1][i].p, strs[1][i].len);
  rtm.ReplyWithArray(ctx, (long)nw);
  for (size_t i = 0; i < nw; i++)
    rtm.ReplyWithStringBuffer(ctx, wid[i].p, wid[i].len);
  rtm.ReplyWithArray(ctx, (long)nw);
  for (size_t i = 0; i < nw; i++)
    rtm.ReplyWithLongLong(ctx, wk[i]);
  rtm.ReplyWithArray(ctx, (long)nw);
  for (size_t i = 0; i < nw; i++)
    rtm.ReplyWithStringBuffer(ctx, wl[i].p, wl[i].len);
}

#define POOL_CMD(fn, cmd, min, usage, body)                                    \
  int fn(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {            \
    return rtm_run(ctx, argv, argc, cmd, RTM_POOL_KEYS, min, usage, body);     \
  }

POOL_CMD(rtm_cmd_pool_enqueue, "redturn.pool_enqueue", 7,
         "4 Q h M D prefix id lease retry label kind permits", pool_enqueue)
POOL_CMD(rtm_cmd_pool_try, "redturn.pool_try", 6,
         "4 Q h M D prefix id lease label kind permits", pool_try)
POOL_CMD(rtm_cmd_pool_release, "redturn.pool_release", 3,
         "4 Q h M D prefix id kind", pool_release)
POOL_CMD(rtm_cmd_pool_reap, "redturn.pool_reap", 3, "4 Q h M D prefix id kind",
         pool_reap)
POOL_CMD(rtm_cmd_pool_extend, "redturn.pool_extend", 4,
         "4 Q h M D prefix id lease kind", pool_extend)
POOL_CMD(rtm_cmd_pool_inspect, "redturn.pool_inspect", 3,
         "4 Q h M D prefix count kind", pool_inspect)
POOL_CMD(rtm_cmd_proclaim, "redturn.proclaim", 4,
         "4 Q h M D prefix id value kind", proclaim)
