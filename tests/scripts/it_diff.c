/* The scripts and the module, equal by machine: random operation sequences
 * run on one server against the scripts (FCALL of the Functions library,
 * or EVALSHA; database 0, keys "kA:{<name>}:<suffix>", channel prefix
 * "dA:c:") and against the module's commands (database 1, "kB:...",
 * "dB:c:"), and after every step the two sides' replies, notices (grant
 * 'g', next in line 'n'), an election's leader changes (its observe
 * channel "<base>:o"), keyspace events and keys must agree.
 *
 * The steps: every command of the table below, the mutex's (q h m) and the
 * pool resources' (Q h M D), with its arguments drawn from a few clients
 * and request ids; each resource is one kind per episode (a mutex, a
 * semaphore "s:<N>" of 1 to 5 permits with requests of 0 to N, a
 * read-write lock "rw" with shared and exclusive requests, an election
 * "e" with candidate and proclaimed values), now and then called as
 * another kind (WRONGKIND) or an unknown one, or for permits out of
 * range; leases that end (short leases and sleeps), keys lost (DEL, D
 * too), keys of the wrong type (SET, RPUSH, HSET), clients gone (their
 * subscriber closed), names up to the library's limit (4096 bytes), out
 * of memory (maxmemory 1 with noeviction for a few steps), a WATCH by
 * another client across a command (does its EXEC abort?), a command
 * inside MULTI/EXEC, a failover epoch or hold in the channel prefix,
 * arguments out of contract.
 *
 * Both sides' commands of a step go in one pipeline, so they run back to
 * back; active expiry is off (keys expire when touched, as both sides
 * touch them alike), and no step runs within GUARD_MS of a key's expiry or
 * a settle window's end. Values read from the clock are compared by
 * relation: a fence as the order in which its side issued it ("F3", "F3+1"
 * for a skipped one's successor in one call), a server time as ms from the
 * side's own TIME taken just before its command ("T+150"), a lease left as
 * "L<ms>"; times agree within TOL_MS, leases left within twice that.
 * Errors agree without the text a script error adds (" script: ...") and,
 * for OOM, by their code.
 *
 * REDTURN_DIFF_SEED repeats a run (the seed is printed);
 * REDTURN_DIFF_SECONDS bounds it (default 40); REDTURN_DIFF_MODULE loads
 * another build of the module (e.g. an old one);
 * REDTURN_DIFF_KEEP_GOING=1 reports every difference (each ends its
 * episode) instead of stopping at the first. */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_protocol.h"
#include "rt_scripts.h"
#include "rt_test.h"

#ifndef RTT_MODULE_PATH
#define RTT_MODULE_PATH ""
#endif

TestSuite(diff, .fini = rtt_cleanup, .timeout = 240);

#define GUARD_MS 12
/* Each side's time is counted from its own TIME just before its command;
 * a loaded machine may deschedule the server between the two, and a key's
 * expiry set in an earlier step carries that step's offset too: two
 * offsets of up to about 10 ms each on a machine running three test
 * commands. The protocol's own times (GRACE_MS, SETTLE_MS) are seconds. */
#define TOL_MS 25
#define NCLIENTS 4
#define NRES 2

/* ---- the random source -------------------------------------------------- */

static uint64_t rng;
static uint64_t next(void) { /* xorshift64* */
  rng ^= rng >> 12;
  rng ^= rng << 25;
  rng ^= rng >> 27;
  return rng * 2685821657736338717ULL;
}
static int pick(int n) { return (int)(next() % (uint64_t)n); }

/* ---- growing text ------------------------------------------------------- */

typedef struct text {
  char *p;
  size_t len, cap;
} text;

static void put(text *t, const char *s, size_t n) {
  if (t->len + n + 1 > t->cap) {
    t->cap = (t->len + n + 1) * 2;
    t->p = realloc(t->p, t->cap);
    cr_assert_not_null(t->p);
  }
  memcpy(t->p + t->len, s, n);
  t->len += n;
  t->p[t->len] = '\0';
}
static void putf(text *t, const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  put(t, buf, (size_t)(n < (int)sizeof(buf) ? n : (int)sizeof(buf) - 1));
}

/* ---- the commands ------------------------------------------------------- */

/* A command the module has natively and the scripts have as lua/<script>:
 * how to draw its arguments after ARGV[1], and which integers of its reply
 * are a lease left (ms, compared within TOL_MS). A pool command's
 * builder gets the kind it asks for (the resource's, or another: see
 * ask_kind). */
typedef struct op_args {
  const char *v[8];
  size_t n;
  char buf[8][48];
} op_args;
typedef struct command {
  const char *script;
  const char *suffixes; /* the keys, in order, after the resource's base */
  void (*args)(op_args *a, int oom, const char *kind);
  int (*left_at)(const redisReply *r, size_t i);
} command;

static const char *const clients[NCLIENTS] = {
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
    "cccccccccccccccccccccccccccccccc", "dddddddddddddddddddddddddddddddd"};
static unsigned fresh_seq = 100;

static const char *arg_buf(op_args *a, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(a->buf[a->n], sizeof(a->buf[a->n]), fmt, ap);
  va_end(ap);
  a->v[a->n] = a->buf[a->n];
  return a->v[a->n++];
}
static void arg_lit(op_args *a, const char *s) { a->v[a->n++] = s; }

/* A request id: mostly one of a few per client (so calls meet the same
 * request again: retries, releases of waiters and holders); a fresh one
 * when out of memory (see command_args). */
static void arg_id(op_args *a, int fresh) {
  if (fresh)
    arg_buf(a, "%s:%u", clients[pick(NCLIENTS)], fresh_seq++);
  else
    arg_buf(a, "%s:%d", clients[pick(NCLIENTS)], 1 + pick(4));
}
static void arg_lease(op_args *a) {
  static const char *const leases[] = {"30",  "60",  "120",
                                       "250", "900", "60000"};
  static const char *const bad[] = {"0", "-5", "1e3", " 5", "1000000000000001",
                                    ""};
  if (pick(40) == 0)
    arg_lit(a, bad[pick(6)]);
  else
    arg_lit(a, leases[pick(6)]);
}
static void arg_label(op_args *a) {
  int r = pick(6);
  if (r == 0)
    arg_lit(a, "");
  else if (r == 1)
    arg_lit(a, "job:7");
}

/* A retried enqueue (ARGV[4] "1") goes to the script's retry form,
 * "<script>_again" (allow-oom), as the client sends it: out of memory, it
 * and the module's command both run for a request Redis has and both
 * refuse to add one. A first enqueue out of memory is refused by FCALL up
 * front (no allow-oom) while the module reads the keys first: then only
 * fresh requests, which both refuse. So does a try that finds the lock
 * busy (the module answers BUSY): out of memory, no try at all (the test's
 * main loop). */
static void args_enqueue(op_args *a, int oom, const char *kind) {
  (void)kind;
  int r = pick(4);
  arg_id(a, oom && r != 0);
  arg_lease(a);
  if (r == 0) {
    arg_lit(a, "1");
    arg_label(a);
  } else if (r == 1) {
    arg_lit(a, "");
    arg_label(a);
  }
}
/* 1 when c is a try (a mutex's or a pool resource's). */
static int is_try(const command *c) {
  return strcmp(c->script, "try") == 0 || strcmp(c->script, "pool_try") == 0;
}
/* 1 when c is an enqueue (a mutex's or a pool resource's). */
static int is_enqueue(const command *c) {
  return strcmp(c->script, "enqueue") == 0 ||
         strcmp(c->script, "pool_enqueue") == 0;
}
/* 1 when the call is an enqueue's retry (its ARGV[4] is "1"). */
static int is_retry(const command *c, const op_args *a) {
  return is_enqueue(c) && a->n > 2 && strcmp(a->v[2], "1") == 0;
}
static void args_try(op_args *a, int oom, const char *kind) {
  (void)kind;
  arg_id(a, oom);
  arg_lease(a);
  arg_label(a);
}
static void args_id(op_args *a, int oom, const char *kind) {
  (void)kind;
  (void)oom;
  arg_id(a, 0);
}
static void args_reap(op_args *a, int oom, const char *kind) {
  (void)kind;
  (void)oom;
  if (pick(4) == 0)
    arg_lit(a, "");
  else
    arg_id(a, 0);
}
static void args_extend(op_args *a, int oom, const char *kind) {
  (void)kind;
  (void)oom;
  arg_id(a, 0);
  arg_lease(a);
}
static void args_inspect(op_args *a, int oom, const char *kind) {
  (void)kind;
  (void)oom;
  static const char *const counts[] = {"0", "1", "3", "100"};
  arg_lit(a, counts[pick(4)]);
}

/* A pool resource's permits asked for: of a semaphore "s:<N>" 0 (all) to
 * N, of a read-write lock 1 (shared) or 0 (exclusive), of an election 0
 * or 1; now and then out of contract (more than N, negative, not a
 * number). */
static void arg_permits(op_args *a, const char *kind) {
  static const char *const bad[] = {"-1", "x", "", "1.5", "99", "1e0"};
  if (pick(40) == 0) {
    arg_lit(a, bad[pick(6)]);
    return;
  }
  int n = strncmp(kind, "s:", 2) == 0 ? atoi(kind + 2) : 1;
  if (n < 1 || n > 5)
    n = 1;
  if (pick(30) == 0)
    arg_buf(a, "%d", n + 1);
  else
    arg_buf(a, "%d", pick(n + 1));
}
/* An election's candidate or proclaimed value, or a label. */
static void arg_value(op_args *a, const char *kind) {
  static const char *const values[] = {"", "host-a:7000", "host b", "v"};
  if (strcmp(kind, "e") == 0)
    arg_lit(a, values[pick(4)]);
  else
    arg_lit(a, pick(3) == 0 ? "job:7" : "");
}
/* pool_enqueue: id lease retry label kind permits (every one: the pool
 * scripts read them by place). A retry goes to pool_enqueue_again, as for
 * the mutex (args_enqueue). */
static void args_pool_enqueue(op_args *a, int oom, const char *kind) {
  int r = pick(3);
  arg_id(a, oom && r != 0);
  arg_lease(a);
  arg_lit(a, r == 0 ? "1" : "");
  arg_value(a, kind);
  arg_lit(a, kind);
  arg_permits(a, kind);
}
/* pool_try: id lease label kind permits */
static void args_pool_try(op_args *a, int oom, const char *kind) {
  arg_id(a, oom);
  arg_lease(a);
  arg_value(a, kind);
  arg_lit(a, kind);
  arg_permits(a, kind);
}
/* pool_release: id kind */
static void args_pool_id(op_args *a, int oom, const char *kind) {
  (void)oom;
  arg_id(a, 0);
  arg_lit(a, kind);
}
/* pool_reap: id ('' for none) kind */
static void args_pool_reap(op_args *a, int oom, const char *kind) {
  args_reap(a, oom, kind);
  arg_lit(a, kind);
}
/* pool_extend: id lease kind */
static void args_pool_extend(op_args *a, int oom, const char *kind) {
  args_extend(a, oom, kind);
  arg_lit(a, kind);
}
/* pool_inspect: count kind ('' for whatever it is) */
static void args_pool_inspect(op_args *a, int oom, const char *kind) {
  args_inspect(a, oom, kind);
  arg_lit(a, pick(4) == 0 ? "" : kind);
}
/* proclaim: id value kind */
static void args_proclaim(op_args *a, int oom, const char *kind) {
  (void)oom;
  arg_id(a, 0);
  arg_value(a, "e");
  arg_lit(a, kind);
}

static long long code_of(const redisReply *r) {
  return r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
                 r->element[0]->type == REDIS_REPLY_INTEGER
             ? r->element[0]->integer
             : -1;
}
/* {GRANTED, fence, left, ...} or {QUEUED, position, holder's left, ...} */
static int left_enqueue(const redisReply *r, size_t i) {
  (void)r;
  return i == 2;
}
/* {GRANTED, fence, left, ...} or {BUSY, left, ...} */
static int left_try(const redisReply *r, size_t i) {
  return code_of(r) == RT_PROTO_GRANTED ? i == 2 : i == 1;
}
/* {left, mine, position, now, more} */
static int left_reap(const redisReply *r, size_t i) {
  (void)r;
  return i == 0;
}

/* The mutex's commands first, then the pool resources' (their keys
 * Q h M D: POOL_SUFFIXES). Replies of a pool command put a lease left
 * where its mutex counterpart does. */
#define MUTEX_SUFFIXES "qhm"
#define POOL_SUFFIXES "QhMD"
static const command commands[] = {
    {"enqueue", MUTEX_SUFFIXES, args_enqueue, left_enqueue},
    {"try", MUTEX_SUFFIXES, args_try, left_try},
    {"release", MUTEX_SUFFIXES, args_id, NULL},
    {"reap", MUTEX_SUFFIXES, args_reap, left_reap},
    {"extend", MUTEX_SUFFIXES, args_extend, NULL},
    {"inspect", MUTEX_SUFFIXES, args_inspect, NULL},
    {"pool_enqueue", POOL_SUFFIXES, args_pool_enqueue, left_enqueue},
    {"pool_try", POOL_SUFFIXES, args_pool_try, left_try},
    {"pool_release", POOL_SUFFIXES, args_pool_id, NULL},
    {"pool_reap", POOL_SUFFIXES, args_pool_reap, left_reap},
    {"pool_extend", POOL_SUFFIXES, args_pool_extend, NULL},
    {"pool_inspect", POOL_SUFFIXES, args_pool_inspect, NULL},
    {"proclaim", POOL_SUFFIXES, args_proclaim, NULL},
};
#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))
#define NMUTEX 6 /* commands[0..NMUTEX): the mutex's */

static int is_pool(const command *c) { return c >= commands + NMUTEX; }

/* ---- the run's state ------------------------------------------------------ */

typedef struct side {
  int db;
  const char *prefix;          /* the channel prefix, "dA:c:" or "dB:c:" */
  const char *keys;            /* the keys' prefix, "kA:" or "kB:" */
  redisContext *sub[NCLIENTS]; /* SSUBSCRIBEd as each client; NULL: gone */
  redisContext *events;        /* PSUBSCRIBEd to its keyevents */
  redisContext *observer;      /* SSUBSCRIBEd to the resources' "<base>:o" */
  redisContext *watcher;       /* WATCHes for the other client's command */
  int64_t ref_ms;              /* TIME before its command in this step */
  long long fences[512];       /* in the order first seen */
  int nfences;
  long long top; /* the largest fence seen */
} side;

static struct run {
  rtt_private p;
  redisContext *rc; /* both sides' commands, one pipeline per step */
  side s[2];
  char *names[NRES]; /* the resources' names (escaped form: no braces) */
  size_t name_len[NRES];
  const char *kinds[NRES]; /* each one's kind this episode (NULL: a mutex) */
  int oom;                 /* steps left out of memory */
  int64_t ends[256]; /* server ms at which a key expires or a window ends */
  int nends;
  int64_t server_ms; /* the last TIME, and when it was read (local ms) */
  uint64_t server_at;
  uint64_t seed;
  int differences;
  int64_t stall_ms; /* the longest gap inside this step's pipeline */
  int end_inside;   /* a noted end fell within GUARD_MS of the step */
  int inconclusive;
  /* What the scripts' side heard and answered, for the summary: grant
   * and next-in-line notices, leader changes, WRONGKIND errors. */
  int grants, nexts, leaders, wrongkinds;
  int have_pool; /* the module has the pool commands (an old one may not) */
} R;

static redisReply *get_reply(void) {
  void *r = NULL;
  cr_assert_eq(redisGetReply(R.rc, &r), REDIS_OK, "seed %llu: %s",
               (unsigned long long)R.seed, R.rc->errstr);
  return r;
}

static void append_argv(int argc, const char **argv, const size_t *lens) {
  cr_assert_eq(redisAppendCommandArgv(R.rc, argc, argv, lens), REDIS_OK);
}

static void append_select(int db) {
  cr_assert_eq(redisAppendCommand(R.rc, "SELECT %d", db), REDIS_OK);
}

/* ---- normalizing ---------------------------------------------------------- */

/* A fence's name on side s: its place in the order s issued them. */
static void put_fence(text *t, side *s, long long v) {
  for (int i = 0; i < s->nfences; i++) {
    long long d = v - s->fences[i];
    if (d == 0) {
      putf(t, "F%d", i);
      return;
    }
    if (d > 0 && d <= RT_PROTO_SKIP_MAX) { /* a skipped notice's successor */
      putf(t, "F%d+%lld", i, d);
      return;
    }
  }
  if (s->nfences < 512)
    s->fences[s->nfences] = v;
  putf(t, "F%d%s", s->nfences, v < s->top ? "<" : "");
  s->nfences++;
  if (v > s->top)
    s->top = v;
}

/* A number: a fence (the us clock), a server time (the ms clock) or
 * itself. */
static void put_number(text *t, side *s, long long v, int left) {
  if (v >= 100000000000000LL)
    put_fence(t, s, v);
  else if (v >= 1000000000000LL)
    putf(t, "T%+lld", v - s->ref_ms);
  else if (left)
    putf(t, "L%lld", v);
  else
    putf(t, "%lld", v);
}

/* A string: the resources' names become R0, R1, the side's prefix P:,
 * its keys' prefix K:;
 * each ':'-separated number as put_number; spaces become '_' (tokens are
 * separated by spaces). */
static void put_string(text *t, side *s, const char *p, size_t len) {
  text tmp = {0};
  size_t plen = strlen(s->prefix);
  for (size_t i = 0; i < len;) {
    int done = 0;
    for (int r = 0; r < NRES && !done; r++)
      if (R.names[r] != NULL && len - i >= R.name_len[r] + 2 && p[i] == '{' &&
          memcmp(p + i + 1, R.names[r], R.name_len[r]) == 0 &&
          p[i + 1 + R.name_len[r]] == '}') {
        putf(&tmp, "{R%d}", r);
        i += R.name_len[r] + 2;
        done = 1;
      }
    if (!done && len - i >= plen && memcmp(p + i, s->prefix, plen) == 0) {
      put(&tmp, "P:", 2);
      i += plen;
      done = 1;
    }
    if (!done && len - i >= 3 && memcmp(p + i, s->keys, 3) == 0) {
      put(&tmp, "K:", 2);
      i += 3;
      done = 1;
    }
    if (!done) {
      char c = p[i] == ' ' ? '_' : p[i];
      put(&tmp, &c, 1);
      i++;
    }
  }
  for (size_t i = 0; tmp.p != NULL && i <= tmp.len;) {
    size_t e = i;
    while (e < tmp.len && tmp.p[e] != ':')
      e++;
    char *end;
    long long v = strtoll(tmp.p + i, &end, 10);
    if (e > i && end == tmp.p + e && e - i < 19)
      put_number(t, s, v, 0);
    else
      put(t, tmp.p + i, e - i);
    if (e < tmp.len)
      put(t, ":", 1);
    i = e + 1;
  }
  free(tmp.p);
}

/* Where a Lua run-time error names its place ("user_script:147:"), or
 * NULL. */
static const char *lua_at(const char *err) {
  const char *p = strstr(err, "user_script:");
  return p != NULL ? p : strstr(err, "user_function:");
}

static void put_reply(text *t, side *s, const redisReply *r, const command *c) {
  switch (r->type) {
  case REDIS_REPLY_INTEGER:
    put_number(t, s, r->integer, 0);
    break;
  case REDIS_REPLY_NIL:
    put(t, "nil", 3);
    break;
  case REDIS_REPLY_ERROR: {
    /* A script's error ends in " script: <name>, on @user_...:<line>.";
     * an OOM refusal compares by its code (the module says which command
     * and why). */
    size_t n = r->len;
    const char *tail = strstr(r->str, " script: ");
    if (tail != NULL)
      n = (size_t)(tail - r->str);
    if (strncmp(r->str, "OOM ", 4) == 0)
      n = 3;
    put(t, "ERR<", 4);
    if (s == &R.s[0] && strncmp(r->str, "WRONGKIND ", 10) == 0)
      R.wrongkinds++;
    if (R.oom > 0 && c != NULL && is_enqueue(c))
      /* Out of memory, FCALL refuses every enqueue before it runs; the
       * module reads the keys first: a key of the wrong type answers
       * WRONGTYPE there. Both refuse and change nothing (the keys are
       * compared). */
      put(t, "refused", 7);
    else if ((lua_at(r->str) != NULL && tail != NULL &&
              lua_at(r->str) < tail) ||
             strstr(r->str, ": malformed ") != NULL)
      /* A corrupt record (SET h x): Lua fails on it at run time, the
       * module names it malformed. */
      put(t, "corrupt", 7);
    else
      put_string(t, s, r->str, n);
    put(t, ">", 1);
    break;
  }
  case REDIS_REPLY_ARRAY:
    put(t, "[", 1);
    for (size_t i = 0; i < r->elements; i++) {
      if (i > 0)
        put(t, " ", 1);
      const redisReply *e = r->element[i];
      if (e->type == REDIS_REPLY_INTEGER && c != NULL && c->left_at != NULL &&
          c->left_at(r, i))
        put_number(t, s, e->integer, 1);
      else
        put_reply(t, s, e, NULL);
    }
    put(t, "]", 1);
    break;
  default:
    put_string(t, s, r->str, r->len);
  }
}

/* ---- the server's clock and the guard --------------------------------------- */

static int64_t time_ms(const redisReply *r) {
  cr_assert(r->type == REDIS_REPLY_ARRAY && r->elements == 2);
  return atoll(r->element[0]->str) * 1000 + atoll(r->element[1]->str) / 1000;
}

static void note_time(int64_t ms) {
  R.server_ms = ms;
  R.server_at = rtt_now_ms();
}

static void note_end(int64_t ms) {
  if (ms > 0 && R.nends < 256)
    R.ends[R.nends++] = ms;
}

/* Order a flat name-value array (HGETALL, ZRANGE WITHSCORES) by name. */
static void sort_pairs(redisReply *v) {
  for (size_t a = 2; a + 1 < v->elements; a += 2)
    for (size_t b = a;
         b > 0 && strcmp(v->element[b - 2]->str, v->element[b]->str) > 0;
         b -= 2)
      for (size_t x = 0; x < 2; x++) {
        redisReply *e = v->element[b + x];
        v->element[b + x] = v->element[b - 2 + x];
        v->element[b - 2 + x] = e;
      }
}

/* guard() places work by the local clock; a loaded server may run it
 * later: R.end_inside when a noted end is within GUARD_MS of the server's
 * [from, to] (ms) that the work really ran in. */
static void note_ends_within(int64_t from, int64_t to) {
  for (int i = 0; i < R.nends; i++)
    if (R.ends[i] > from - GUARD_MS && R.ends[i] < to + GUARD_MS)
      R.end_inside = 1;
}

/* Wait until no key expires and no settle window ends within GUARD_MS of
 * now (by the server's clock): then both sides, a moment apart, see the
 * same keys and windows. */
static void guard(void) {
  for (int again = 1; again;) {
    again = 0;
    int64_t now = R.server_ms + (int64_t)(rtt_now_ms() - R.server_at);
    for (int i = 0; i < R.nends; i++)
      if (R.ends[i] > now - GUARD_MS && R.ends[i] < now + GUARD_MS) {
        rtt_sleep_ms(R.ends[i] + GUARD_MS - now);
        again = 1;
        break;
      }
  }
}

/* ---- notices, events and keys ---------------------------------------------- */

/* Messages a subscriber got so far (a PING after them comes back after
 * every message published before it); with their channel if channel. */
static void put_messages(text *t, side *s, redisContext *c, const char *who,
                         int channel) {
  cr_assert_eq(redisAppendCommand(c, "PING"), REDIS_OK);
  for (;;) {
    void *m = NULL;
    cr_assert_eq(redisGetReply(c, &m), REDIS_OK);
    redisReply *r = m;
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    if (r->elements == 2) { /* pong */
      freeReplyObject(r);
      return;
    }
    putf(t, " %s:", who);
    if (r->elements == 4) { /* pmessage pattern channel key: the event */
      const char *ev = strrchr(r->element[2]->str, ':');
      putf(t, "%s=", ev != NULL ? ev + 1 : r->element[2]->str);
      put_string(t, s, r->element[3]->str, r->element[3]->len);
    } else {
      const char *msg = r->element[2]->str;
      if (s == &R.s[0]) {
        R.grants += msg[0] == RT_PROTO_NOTICE_GRANTED && !channel;
        R.nexts += msg[0] == RT_PROTO_NOTICE_NEXT && !channel;
        R.leaders += channel;
      }
      if (channel) {
        put_string(t, s, r->element[1]->str, r->element[1]->len);
        put(t, "=", 1);
      }
      put_string(t, s, r->element[2]->str, r->element[2]->len);
    }
    freeReplyObject(r);
  }
}

static void put_notices(text *t, side *s) {
  for (int k = 0; k < NCLIENTS; k++)
    if (s->sub[k] != NULL) {
      char who[8];
      snprintf(who, sizeof(who), "to%d", k);
      put_messages(t, s, s->sub[k], who, 0);
    }
  if (s->observer != NULL) /* an election's leader changes */
    put_messages(t, s, s->observer, "ob", 1);
  put_messages(t, s, s->events, "ev", 0);
}

/* The key of resource res on side s: "kA:{<name>}:<suffix>". Each side
 * has its own key names (not only its database): an election tells its
 * observers on "<base>:o", and a channel is the server's, not a
 * database's. */
static void key_name(char *out, size_t cap, const side *s, int res,
                     char suffix) {
  snprintf(out, cap, "%s{%s}:%c", s->keys, R.names[res], suffix);
}

/* The suffixes of resource res's keys (a mutex's or a pool resource's). */
static const char *res_suffixes(int res) {
  return R.kinds[res] == NULL ? MUTEX_SUFFIXES : POOL_SUFFIXES;
}

#define KEYS_PER_RES 6 /* q h m Q M D */
#define NKEYS (NRES * KEYS_PER_RES + 1)
static char key_names[NKEYS][RT_PROTO_NAME_MAX + 16];

static void state_keys(const side *s) {
  for (int r = 0; r < NRES; r++)
    for (int k = 0; k < KEYS_PER_RES; k++)
      key_name(key_names[r * KEYS_PER_RES + k], sizeof(key_names[0]), s, r,
               "qhmQMD"[k]);
  snprintf(key_names[NKEYS - 1], sizeof(key_names[0]), "%sera", s->prefix);
}

/* Each key of both resources (and the failover hold's era key): its type,
 * its expiry and its contents. Two pipelines: types and expiries, then
 * contents by type. */
static void put_keys(text t[2]) {
  redisReply *type[2][NKEYS], *exp[2][NKEYS];
  guard();
  /* The server's time before and after both reads: a key that expires in
   * between reads differently on the two sides. */
  cr_assert_eq(redisAppendCommand(R.rc, "TIME"), REDIS_OK);
  for (int i = 0; i < 2; i++) {
    state_keys(&R.s[i]);
    append_select(R.s[i].db);
    for (int k = 0; k < NKEYS; k++) {
      cr_assert_eq(redisAppendCommand(R.rc, "TYPE %s", key_names[k]), REDIS_OK);
      cr_assert_eq(redisAppendCommand(R.rc, "PEXPIRETIME %s", key_names[k]),
                   REDIS_OK);
    }
  }
  redisReply *tr = get_reply();
  int64_t read_from = time_ms(tr);
  freeReplyObject(tr);
  for (int i = 0; i < 2; i++) {
    freeReplyObject(get_reply());
    for (int k = 0; k < NKEYS; k++) {
      type[i][k] = get_reply();
      exp[i][k] = get_reply();
    }
  }
  R.nends = 0;
  for (int i = 0; i < 2; i++) {
    state_keys(&R.s[i]);
    append_select(R.s[i].db);
    for (int k = 0; k < NKEYS; k++) {
      const char *ty = type[i][k]->str;
      const char *fmt = strcmp(ty, "string") == 0 ? "GET %s"
                        : strcmp(ty, "list") == 0 ? "LRANGE %s 0 -1"
                        : strcmp(ty, "hash") == 0 ? "HGETALL %s"
                        : strcmp(ty, "zset") == 0 ? "ZRANGE %s 0 -1 WITHSCORES"
                        : strcmp(ty, "set") == 0  ? "SMEMBERS %s"
                                                  : "EXISTS %s";
      cr_assert_eq(redisAppendCommand(R.rc, fmt, key_names[k]), REDIS_OK);
    }
  }
  cr_assert_eq(redisAppendCommand(R.rc, "TIME"), REDIS_OK);
  for (int i = 0; i < 2; i++) {
    freeReplyObject(get_reply());
    for (int k = 0; k < NKEYS; k++) {
      redisReply *v = get_reply();
      put(&t[i], "\n  key", 6);
      putf(&t[i], "%d %s exp ", k, type[i][k]->str);
      put_number(&t[i], &R.s[i], exp[i][k]->integer, 0);
      note_end(exp[i][k]->integer);
      put(&t[i], " ", 1);
      /* A hash's fields, a zset's members in order of their names: not
       * the hash's order, nor the scores' (two leases ending within the
       * time tolerance may fall either way on the two sides). */
      if (strcmp(type[i][k]->str, "hash") == 0 ||
          strcmp(type[i][k]->str, "zset") == 0)
        sort_pairs(v);
      if (strcmp(type[i][k]->str, "hash") == 0) {
        for (size_t a = 0; a < v->elements / 2; a++) {
          const redisReply *f = v->element[2 * a];
          const redisReply *fv = v->element[2 * a + 1];
          put_string(&t[i], &R.s[i], f->str, f->len);
          put(&t[i], "=", 1);
          put_string(&t[i], &R.s[i], fv->str, fv->len);
          put(&t[i], " ", 1);
          /* A settle stamp "<run id>:<since>": its window ends later. */
          if (f->len == 1 && f->str[0] == '@') { /* "<run id>:<since>" */
            const char *c = strchr(fv->str, ':');
            if (c != NULL && atoll(c + 1) > 0)
              note_end(atoll(c + 1) + RT_PROTO_SETTLE_MS);
          }
        }
      } else {
        put_reply(&t[i], &R.s[i], v, NULL);
        /* A zset of leases (D): each holder's lease ends at its score. */
        if (strcmp(type[i][k]->str, "zset") == 0)
          for (size_t a = 1; a < v->elements; a += 2)
            note_end(atoll(v->element[a]->str));
        /* The era key "<run id><replid>:<since>": the "1/40" hold ends. */
        if (k == NKEYS - 1 && v->type == REDIS_REPLY_STRING) {
          const char *c = strrchr(v->str, ':');
          if (c != NULL)
            note_end(atoll(c + 1) + 40);
        }
      }
      freeReplyObject(v);
      freeReplyObject(type[i][k]);
      freeReplyObject(exp[i][k]);
    }
  }
  redisReply *tr2 = get_reply();
  int64_t read_to = time_ms(tr2);
  freeReplyObject(tr2);
  note_ends_within(read_from, read_to);
}

/* ---- comparing ------------------------------------------------------------- */

/* Whether two transcripts agree: byte for byte, but a time ("T+150") or a
 * lease left ("L900") at the start of a token may differ by TOL_MS (a
 * lease left by 2 * TOL_MS). */
static int timed_at(const char *start, const char *x) {
  return (*x == 'T' || *x == 'L') && (x == start || strchr(" \n[:=", x[-1])) &&
         ((x[1] >= '0' && x[1] <= '9') ||
          ((x[1] == '+' || x[1] == '-') && x[2] >= '0' && x[2] <= '9'));
}

static int same(const char *a, const char *b) {
  const char *x = a, *y = b;
  while (*x != '\0' && *y != '\0') {
    if (timed_at(a, x) && timed_at(b, y) && *x == *y) {
      char *xe, *ye;
      long long vx = strtoll(x + 1, &xe, 10), vy = strtoll(y + 1, &ye, 10);
      /* A lease left is a difference of two times (a deadline a former
       * step set, this command's clock), each within TOL_MS. */
      if (llabs(vx - vy) > (*x == 'L' ? 2 * TOL_MS : TOL_MS))
        return 0;
      x = xe;
      y = ye;
    } else if (*x++ != *y++) {
      return 0;
    }
  }
  return *x == *y;
}

/* ---- the steps ---------------------------------------------------------------- */

static void subscribe(side *s, int k) {
  s->sub[k] = rtt_redis_at(R.p.srv.port);
  redisReply *r = rtt_cmd(s->sub[k], "SSUBSCRIBE %s%s", s->prefix, clients[k]);
  freeReplyObject(r);
}

static void episode_reset(void) {
  freeReplyObject(rtt_cmd(R.p.adm, "CONFIG SET maxmemory 0"));
  freeReplyObject(rtt_cmd(R.p.adm, "FLUSHALL"));
  R.oom = 0;
  R.nends = 0;
  for (int i = 0; i < 2; i++) {
    side *s = &R.s[i];
    s->nfences = 0;
    s->top = 0;
    for (int k = 0; k < NCLIENTS; k++)
      if (s->sub[k] == NULL)
        subscribe(s, k);
    text junk = {0};
    put_notices(&junk, s);
    free(junk.p);
  }
  for (int r = 0; r < NRES; r++) {
    /* Mostly short names; some around the 355 bytes a fixed buffer once
     * held; some up to the library's limit. */
    int kind = pick(20);
    size_t len = kind < 12   ? 1 + (size_t)pick(12)
                 : kind < 17 ? 340 + (size_t)pick(80)
                             : RT_PROTO_NAME_MAX - (size_t)pick(64);
    free(R.names[r]);
    R.names[r] = malloc(len + 1);
    for (size_t i = 0; i < len; i++)
      R.names[r][i] = "abcdefghijklmnopqrstuvwxyz0123456789%:-_"[pick(
          i % 7 == 3 ? 40 : 36)];
    R.names[r][len] = '\0';
    R.name_len[r] = len;
    /* One kind per resource per episode: a mutex, a semaphore of 1 to 5
     * permits, a read-write lock, an election. */
    static const char *const kinds[] = {NULL,  NULL,  NULL, "s:1", "s:2", "s:3",
                                        "s:4", "s:5", "rw", "rw",  "e",   "e"};
    R.kinds[r] = R.have_pool ? kinds[pick(12)] : NULL;
  }
  /* The observers of the resources' leader changes, on their new names. */
  for (int i = 0; i < 2; i++) {
    side *s = &R.s[i];
    if (s->observer != NULL)
      rtt_redis_close(s->observer);
    s->observer = rtt_redis_at(R.p.srv.port);
    for (int r = 0; r < NRES; r++) {
      char ch[RT_PROTO_NAME_MAX + 16];
      key_name(ch, sizeof(ch), s, r, 'o');
      freeReplyObject(rtt_cmd(s->observer, "SSUBSCRIBE %s", ch));
    }
  }
}

/* The kind a pool command on resource res asks for: the resource's; now
 * and then another kind (WRONGKIND, or an unknown kind: an error before
 * any write). */
static const char *ask_kind(int res) {
  static const char *const valid[] = {"s:1", "s:2", "s:3", "s:5", "rw", "e"};
  static const char *const bad[] = {"s:0", "s:x", "mutex", "", "E", "s:01"};
  int r = pick(60);
  if (r == 0)
    return bad[pick(6)];
  if (r < 3 || R.kinds[res] == NULL)
    return valid[pick(6)];
  return R.kinds[res];
}

/* One call of command c on resource res on both sides, in one pipeline:
 * bare, inside MULTI/EXEC (wrap 1), or with another client's WATCH on one
 * of the resource's keys across it (wrap 2). */
static void step_command(text t[2], const command *c, int res, int wrap) {
  op_args a = {0};
  const char *kind = is_pool(c) ? ask_kind(res) : "";
  c->args(&a, R.oom > 0, kind);
  /* ARGV[1]: the prefix, maybe with a fence epoch or a failover hold. */
  static const char *const epochs[] = {"3", "c", "nan", "1/40"};
  const char *epoch = pick(12) == 0 ? epochs[pick(4)] : NULL;
  int evalsha = R.oom == 0 && pick(3) == 0;
  char keys[4][RT_PROTO_NAME_MAX + 16];
  size_t nk = strlen(c->suffixes);
  char watch_key[RT_PROTO_NAME_MAX + 16];
  char watched = c->suffixes[pick((int)nk)];
  if (wrap == 2)
    for (int i = 0; i < 2; i++) {
      key_name(watch_key, sizeof(watch_key), &R.s[i], res, watched);
      freeReplyObject(rtt_cmd(R.s[i].watcher, "WATCH %s", watch_key));
    }
  /* Out of memory, FCALL refuses a first enqueue without touching its
   * keys, while the module reads them (and so expires those whose time
   * passed, with their "expired" events): both sides touch them first. */
  int touch = R.oom > 0 && is_enqueue(c) && !is_retry(c, &a);
  guard();
  for (int i = 0; i < 2; i++) {
    side *s = &R.s[i];
    for (size_t k = 0; k < nk; k++)
      key_name(keys[k], sizeof(keys[k]), s, res, c->suffixes[k]);
    const char *argv[20];
    size_t lens[20];
    int argc = 0;
    char name[64], numkeys[24], prefix[64];
    if (i == 1) {
      snprintf(name, sizeof(name), "redturn.%s", c->script);
      argv[argc++] = name;
    } else {
      char script[64];
      snprintf(script, sizeof(script), "%s%s", c->script,
               is_retry(c, &a) ? "_again" : "");
      int sc = -1;
      for (int k = 0; k < RT__SCRIPT_COUNT; k++)
        if (strcmp(rt__scripts[k].name, script) == 0)
          sc = k;
      cr_assert(sc >= 0, "no script %s", script);
      argv[argc++] = evalsha ? "EVALSHA" : "FCALL";
      argv[argc++] = evalsha ? rt__scripts[sc].sha : rt__scripts[sc].fn;
    }
    for (int k = 0; k < argc; k++)
      lens[k] = strlen(argv[k]);
    snprintf(numkeys, sizeof(numkeys), "%zu", nk);
    argv[argc] = numkeys;
    lens[argc++] = strlen(numkeys);
    for (size_t k = 0; k < nk; k++) {
      argv[argc] = keys[k];
      lens[argc++] = strlen(keys[k]);
    }
    size_t pl = (size_t)snprintf(prefix, sizeof(prefix), "%s", s->prefix);
    if (epoch != NULL) {
      prefix[pl++] = '\0';
      pl += (size_t)snprintf(prefix + pl, sizeof(prefix) - pl, "%s", epoch);
    }
    argv[argc] = prefix;
    lens[argc++] = pl;
    for (size_t k = 0; k < a.n; k++) {
      argv[argc] = a.v[k];
      lens[argc++] = strlen(a.v[k]);
    }
    append_select(s->db);
    if (touch) {
      const char *ev[6] = {"EXISTS"};
      size_t el[6] = {6};
      for (size_t k = 0; k < nk; k++) {
        ev[k + 1] = keys[k];
        el[k + 1] = strlen(keys[k]);
      }
      append_argv((int)nk + 1, ev, el);
    }
    cr_assert_eq(redisAppendCommand(R.rc, "TIME"), REDIS_OK);
    if (wrap == 1)
      cr_assert_eq(redisAppendCommand(R.rc, "MULTI"), REDIS_OK);
    append_argv(argc, argv, lens);
    if (wrap == 1)
      cr_assert_eq(redisAppendCommand(R.rc, "EXEC"), REDIS_OK);
    cr_assert_eq(redisAppendCommand(R.rc, "TIME"), REDIS_OK);
  }
  int64_t before[2], after[2];
  for (int i = 0; i < 2; i++) {
    side *s = &R.s[i];
    freeReplyObject(get_reply());
    if (touch)
      freeReplyObject(get_reply());
    redisReply *tr = get_reply();
    s->ref_ms = time_ms(tr);
    note_time(s->ref_ms);
    freeReplyObject(tr);
    if (wrap == 1)
      freeReplyObject(get_reply()); /* +OK */
    redisReply *r = get_reply();
    if (wrap == 1)
      freeReplyObject(r), r = get_reply(); /* QUEUED; then EXEC's */
    tr = get_reply();
    after[i] = time_ms(tr);
    before[i] = s->ref_ms;
    freeReplyObject(tr);
    put(&t[i], "reply ", 6);
    if (wrap == 1 && r->type == REDIS_REPLY_ARRAY && r->elements == 1)
      put_reply(&t[i], s, r->element[0], c);
    else
      put_reply(&t[i], s, r, c);
    freeReplyObject(r);
  }
  /* Both sides' commands should run within a few ms: a longer gap (a
   * loaded machine stalled the server) may put a lease's end between
   * them. */
  R.stall_ms = after[0] - before[0];
  if (after[1] - before[1] > R.stall_ms)
    R.stall_ms = after[1] - before[1];
  if (before[1] - after[0] > R.stall_ms)
    R.stall_ms = before[1] - after[0];
  note_ends_within(before[0], after[1]);
  if (wrap == 2)
    for (int i = 0; i < 2; i++) {
      redisContext *w = R.s[i].watcher;
      freeReplyObject(rtt_cmd(w, "MULTI"));
      freeReplyObject(rtt_cmd(w, "PING"));
      redisReply *r = rtt_cmd(w, "EXEC");
      putf(&t[i], " watch(%c):%s", watched,
           r->type == REDIS_REPLY_NIL ? "EXEC-aborted" : "EXEC-ran");
      freeReplyObject(r);
    }
  putf(&t[0], " (%s%s%s)", evalsha ? "evalsha" : "fcall",
       epoch != NULL ? " epoch " : "", epoch != NULL ? epoch : "");
  putf(&t[1], " (%s%s%s)", evalsha ? "evalsha" : "fcall",
       epoch != NULL ? " epoch " : "", epoch != NULL ? epoch : "");
  /* What was asked, for the report. */
  for (int i = 0; i < 2; i++) {
    putf(&t[i], "\n  asked %s%s R%d", c->script,
         wrap == 1   ? " in MULTI"
         : wrap == 2 ? " across a WATCH"
                     : "",
         res);
    for (size_t k = 0; k < a.n; k++)
      putf(&t[i], " '%s'", a.v[k]);
  }
}

/* The same plain command on both sides' keys. */
static void step_keys(text t[2], const char *verb, const char *tail) {
  int res = pick(NRES);
  char key[RT_PROTO_NAME_MAX + 16];
  const char *suffixes = res_suffixes(res);
  char suffix = suffixes[pick((int)strlen(suffixes))];
  guard();
  for (int i = 0; i < 2; i++) {
    key_name(key, sizeof(key), &R.s[i], res, suffix);
    append_select(R.s[i].db);
    const char *argv[4] = {verb, key, tail, "x"};
    size_t lens[4] = {strlen(verb), strlen(key), tail ? strlen(tail) : 0, 1};
    int argc = tail == NULL ? 2 : strcmp(verb, "HSET") == 0 ? 4 : 3;
    append_argv(argc, argv, lens);
  }
  for (int i = 0; i < 2; i++) {
    freeReplyObject(get_reply());
    redisReply *r = get_reply();
    putf(&t[i], "%s R%d:%c ", verb, res, suffix);
    put_reply(&t[i], &R.s[i], r, NULL);
    freeReplyObject(r);
  }
}

static void report(int n, const text t[2]) {
  fprintf(stderr,
          "diff: seed %llu, step %d: the two sides differ "
          "(REDTURN_DIFF_SEED=%llu repeats it)\n"
          "--- scripts (db 0):\n%s\n--- module (db 1):\n%s\n",
          (unsigned long long)R.seed, n, (unsigned long long)R.seed, t[0].p,
          t[1].p);
}

Test(diff, scripts_and_module_agree_on_random_sequences) {
  const char *module = getenv("REDTURN_DIFF_MODULE");
  if (module == NULL || module[0] == '\0')
    module = RTT_MODULE_PATH;
  if (module[0] == '\0')
    cr_skip_test("the module is not built (REDTURN_MODULE=OFF)");
  const char *s = getenv("REDTURN_DIFF_SEED");
  R.seed = s != NULL ? strtoull(s, NULL, 10) : (uint64_t)rtt_realtime_us();
  rng = R.seed != 0 ? R.seed : 1;
  const char *secs = getenv("REDTURN_DIFF_SECONDS");
  uint64_t budget = (secs != NULL ? strtoull(secs, NULL, 10) : 40) * 1000;
  const char *kg = getenv("REDTURN_DIFF_KEEP_GOING");
  int keep_going = kg != NULL && kg[0] == '1';
  fprintf(stderr,
          "diff: seed %llu (REDTURN_DIFF_SEED=%llu repeats it), module %s\n",
          (unsigned long long)R.seed, (unsigned long long)R.seed, module);

  const char *const extra[] = {"--loadmodule", module, "--maxmemory-policy",
                               "noeviction", NULL};
  rtt_private_start(&R.p, extra);
  redisContext *adm = R.p.adm;
  freeReplyObject(rtt_cmd(adm, "CONFIG SET notify-keyspace-events KEA"));
  freeReplyObject(rtt_cmd(adm, "DEBUG SET-ACTIVE-EXPIRE 0"));
  /* The scripts: the Functions library and every script for EVALSHA. */
  redisReply *lr =
      rtt_cmd(adm, "FUNCTION LOAD REPLACE %b", rt__library, rt__library_len);
  cr_assert_neq(lr->type, REDIS_REPLY_ERROR, "FUNCTION LOAD: %s", lr->str);
  freeReplyObject(lr);
  for (int k = 0; k < RT__SCRIPT_COUNT; k++)
    freeReplyObject(rtt_cmd(adm, "SCRIPT LOAD %b", rt__scripts[k].body,
                            rt__scripts[k].len));
  /* Commands of the table the module has; the scripts it has no command
   * for are skipped (said once). */
  int have[NCOMMANDS];
  for (size_t c = 0; c < NCOMMANDS; c++) {
    redisReply *r = rtt_cmd(adm, "COMMAND INFO redturn.%s", commands[c].script);
    have[c] = r->type == REDIS_REPLY_ARRAY && r->elements == 1 &&
              r->element[0]->type == REDIS_REPLY_ARRAY;
    if (!have[c])
      fprintf(stderr, "diff: the module has no redturn.%s: skipped\n",
              commands[c].script);
    freeReplyObject(r);
  }
  R.have_pool = have[NMUTEX];
  for (int k = 0; k < RT__SCRIPT_COUNT; k++) {
    /* A retry form ("<script>_again") is compared with its script's
     * command, for retries. */
    const char *nm = rt__scripts[k].name;
    size_t len = strlen(nm);
    size_t base =
        len > 6 && strcmp(nm + len - 6, "_again") == 0 ? len - 6 : len;
    int listed = 0;
    for (size_t c = 0; c < NCOMMANDS; c++)
      listed |= strlen(commands[c].script) == base &&
                strncmp(commands[c].script, nm, base) == 0;
    if (!listed)
      fprintf(
          stderr,
          "diff: lua/%s.lua: no module command in the table: not compared\n",
          rt__scripts[k].name);
  }

  R.rc = rtt_redis_at(R.p.srv.port);
  for (int i = 0; i < 2; i++) {
    side *sd = &R.s[i];
    sd->db = i;
    sd->prefix = i == 0 ? "dA:c:" : "dB:c:";
    sd->keys = i == 0 ? "kA:" : "kB:";
    sd->events = rtt_redis_at(R.p.srv.port);
    freeReplyObject(
        rtt_cmd(sd->events, "PSUBSCRIBE __keyevent@%d__:*", sd->db));
    sd->watcher = rtt_redis_at(R.p.srv.port);
    freeReplyObject(rtt_cmd(sd->watcher, "SELECT %d", sd->db));
  }
  note_time(rtt_redis_time_ms(adm));
  episode_reset();

  uint64_t until = rtt_now_ms() + budget;
  int n = 0, episodes = 1, in_episode = 0;
  int counts[8] = {0}, calls[NCOMMANDS] = {0};
  for (; rtt_now_ms() < until && n < 100000; n++) {
    text t[2] = {{0}, {0}};
    int kind = pick(100);
    R.stall_ms = 0;
    R.end_inside = 0;
    if (in_episode > 60 + pick(120)) {
      episode_reset();
      episodes++;
      in_episode = 0;
    }
    in_episode++;
    if (R.oom > 0 && --R.oom == 0)
      freeReplyObject(rtt_cmd(adm, "CONFIG SET maxmemory 0"));
    if (kind < 62) { /* a command */
      const command *c;
      int ci, res = pick(NRES);
      /* One of the resource's kind's commands; now and then one of the
       * other family's (WRONGKIND). */
      int pool = R.have_pool && (R.kinds[res] != NULL) != (pick(30) == 0);
      do
        ci = pool ? NMUTEX + pick((int)NCOMMANDS - NMUTEX) : pick(NMUTEX);
      while (!have[ci] || (R.oom > 0 && is_try(&commands[ci])));
      c = &commands[ci];
      calls[ci]++;
      /* Out of memory, FCALL refuses a function without allow-oom when
       * MULTI queues it, which aborts the EXEC; the module's command is
       * queued and refuses inside it: no MULTI then. */
      int wrap = pick(12) == 0 ? 2 : R.oom == 0 && pick(16) == 0 ? 1 : 0;
      step_command(t, c, res, wrap);
      counts[wrap]++;
    } else if (kind < 74) { /* time passes: leases end */
      static const int naps[] = {5, 20, 45, 90, 160, 300};
      int ms = naps[pick(6)];
      rtt_sleep_ms(ms);
      putf(&t[0], "slept %d", ms);
      putf(&t[1], "slept %d", ms);
    } else if (kind < 80) { /* a key lost */
      step_keys(t, "DEL", NULL);
      counts[3]++;
    } else if (kind < 84) { /* a key of the wrong type */
      static const char *const how[][2] = {
          {"SET", "x"}, {"RPUSH", "x"}, {"HSET", "*"}};
      int w = pick(3);
      step_keys(t, how[w][0], how[w][1]);
      counts[4]++;
    } else if (kind < 90) { /* a client goes, or comes back */
      int k = pick(NCLIENTS);
      for (int i = 0; i < 2; i++) {
        if (R.s[i].sub[k] != NULL) {
          rtt_redis_close(R.s[i].sub[k]);
          R.s[i].sub[k] = NULL;
        } else {
          subscribe(&R.s[i], k);
        }
      }
      putf(&t[0], "client %d %s", k, R.s[0].sub[k] ? "back" : "gone");
      putf(&t[1], "client %d %s", k, R.s[1].sub[k] ? "back" : "gone");
    } else if (kind < 93 && R.oom == 0) { /* out of memory for a few steps */
      R.oom = 3 + pick(8);
      freeReplyObject(rtt_cmd(adm, "CONFIG SET maxmemory 1"));
      putf(&t[0], "out of memory for %d steps", R.oom);
      putf(&t[1], "out of memory for %d steps", R.oom);
      counts[5]++;
    } else {
      int res = pick(NRES); /* enqueue more */
      step_command(t, &commands[R.kinds[res] != NULL ? NMUTEX : 0], res, 0);
    }
    for (int i = 0; i < 2; i++) {
      put(&t[i], "\n  heard", 8);
      put_notices(&t[i], &R.s[i]);
    }
    put_keys(t);
    if (!same(t[0].p, t[1].p) && (R.stall_ms >= GUARD_MS || R.end_inside)) {
      /* Not a difference of the code: the clock moved too far between
       * the sides, or a lease or key ended between them. The episode
       * starts again. */
      fprintf(stderr,
              "diff: step %d: %s %lld ms inside the step and the sides "
              "differ: inconclusive, a new episode\n",
              n,
              R.end_inside ? "an end fell within GUARD_MS, the step took"
                           : "the server stalled",
              (long long)R.stall_ms);
      R.inconclusive++;
      episode_reset();
      episodes++;
      in_episode = 0;
    } else if (!same(t[0].p, t[1].p)) {
      report(n, t);
      R.differences++;
      if (!keep_going) {
        free(t[0].p);
        free(t[1].p);
        break;
      }
      episode_reset();
      episodes++;
      in_episode = 0;
    }
    free(t[0].p);
    free(t[1].p);
  }
  freeReplyObject(rtt_cmd(adm, "CONFIG SET maxmemory 0"));
  fprintf(stderr,
          "diff: %d steps in %d episodes (%d commands, %d in MULTI, %d across "
          "a WATCH; %d keys lost, %d of the wrong type, %d times out of "
          "memory), %d differences, %d inconclusive, seed %llu\n",
          n, episodes, counts[0] + counts[1] + counts[2], counts[1], counts[2],
          counts[3], counts[4], counts[5], R.differences, R.inconclusive,
          (unsigned long long)R.seed);
  for (size_t c = 0; c < NCOMMANDS; c++)
    fprintf(stderr, "%s%s %d", c == 0 ? "diff: calls:" : ",",
            commands[c].script, calls[c]);
  fprintf(stderr,
          "\ndiff: heard %d grants, %d next-in-line notices, %d leader "
          "changes; %d WRONGKIND errors\n",
          R.grants, R.nexts, R.leaders, R.wrongkinds);
  cr_assert_eq(R.differences, 0,
               "seed %llu: %d differences between the scripts and the module "
               "(above; REDTURN_DIFF_SEED=%llu repeats the run)",
               (unsigned long long)R.seed, R.differences,
               (unsigned long long)R.seed);
  for (int r = 0; r < NRES; r++)
    free(R.names[r]);
  for (int i = 0; i < 2; i++)
    rtt_redis_close(R.s[i].observer);
  rtt_redis_close(R.rc);
  rtt_private_stop(&R.p);
}
