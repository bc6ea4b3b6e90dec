/* The Redis module (module/) against the Lua scripts, its reference: the
 * same calls through the module on one server and through EVAL of the
 * scripts on another give the same replies, notices and keys; module and
 * script calls interleaved on one resource keep FIFO order and rising
 * fences; a replica without the module ends with the master's keys; the
 * commands declare their keys; bad input gets an error, not a crash. */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_scripts.h"
#include "rt_test.h"

#ifndef RTT_MODULE_PATH
#define RTT_MODULE_PATH ""
#endif

TestSuite(module, .fini = rtt_cleanup, .timeout = 90);

#define CA "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define CB "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define CC "cccccccccccccccccccccccccccccccc"
#define CD "dddddddddddddddddddddddddddddddd"
#define CE "eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee"

/* Times in replies and records: the two servers' calls run a moment
 * apart, so values that are clock readings or leases left may differ by
 * this much (ms; us for fences). A loaded machine can stall a call. */
#define TOL_MS 500
#define TOL_US 500000LL

static const char *const module_args[] = {"--loadmodule", RTT_MODULE_PATH,
                                          NULL};

static void need_module(void) {
  if (RTT_MODULE_PATH[0] == '\0')
    cr_skip_test("the module is not built (REDTURN_MODULE=OFF)");
}

/* One server of a comparison: how it runs the commands, its connection,
 * its run id and replication id (normalized away when comparing). */
typedef struct side {
  rtt_private p;
  int module; /* 1: redturn.<script>; 0: EVAL of the script */
  char run_id[64], replid[64];
  redisContext *sub[5]; /* SSUBSCRIBEd as client CA..CE, or NULL */
  redisContext *events; /* PSUBSCRIBEd to keyspace events, or NULL */
  redisContext *obs;    /* SSUBSCRIBEd to the election's observers */
} side;

static const char *const clients[5] = {CA, CB, CC, CD, CE};

static void info_field(redisContext *rc, const char *field, char *out,
                       size_t cap) {
  redisReply *r = rtt_cmd(rc, "INFO");
  const char *f = strstr(r->str, field);
  cr_assert_not_null(f, "INFO has no %s", field);
  f += strlen(field) + 1;
  size_t n = strcspn(f, "\r\n");
  snprintf(out, cap, "%.*s", (int)n, f);
  freeReplyObject(r);
}

static void side_start_with(side *s, int module, const char *const *extra) {
  memset(s, 0, sizeof(*s));
  s->module = module;
  rtt_private_start(&s->p, extra);
  info_field(s->p.adm, "run_id", s->run_id, sizeof(s->run_id));
  info_field(s->p.adm, "master_replid", s->replid, sizeof(s->replid));
}

static void side_start(side *s, int module, int load) {
  side_start_with(s, module, load ? module_args : NULL);
}

/* Whether the AOF files of s hold text (waits up to 3 s for it). */
static int aof_has(const side *s, const char *text) {
  char cmd[RTS_PATH_CAP + 64];
  snprintf(cmd, sizeof(cmd), "cat %s/appendonlydir/*.aof 2>/dev/null",
           s->p.srv.dir);
  for (uint64_t until = rtt_now_ms() + 3000;; rtt_sleep_ms(50)) {
    static char buf[1 << 16];
    FILE *f = popen(cmd, "r");
    cr_assert_not_null(f);
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    pclose(f);
    buf[n] = '\0';
    for (size_t i = 0; i < n; i++)
      if (buf[i] == '\0')
        buf[i] = ' ';
    if (strstr(buf, text) != NULL)
      return 1;
    if (rtt_now_ms() >= until)
      return 0;
  }
}

/* The resource's keys and channel prefix (ARGV[1] without its epoch): a
 * mutex's q h m, a pool resource's Q h M D (lua/lib/pool.lua), and the
 * election observers' channel. */
static char qkey[96], hkey[96], mkey[96], chan[96];
static char pq[96], pm[96], pd[96], ochan[96];

static void names(const char *res) {
  snprintf(qkey, sizeof(qkey), "%s:{%s}:q", rtt_prefix(), res);
  snprintf(hkey, sizeof(hkey), "%s:{%s}:h", rtt_prefix(), res);
  snprintf(mkey, sizeof(mkey), "%s:{%s}:m", rtt_prefix(), res);
  snprintf(pq, sizeof(pq), "%s:{%s}:Q", rtt_prefix(), res);
  snprintf(pm, sizeof(pm), "%s:{%s}:M", rtt_prefix(), res);
  snprintf(pd, sizeof(pd), "%s:{%s}:D", rtt_prefix(), res);
  snprintf(ochan, sizeof(ochan), "%s:{%s}:o", rtt_prefix(), res);
  snprintf(chan, sizeof(chan), "%s:c:", rtt_prefix());
}

/* Whether script (RT__SCRIPT_*) is a pool resource's: its keys are Q h M
 * D. */
static int pool_script(int script) {
  return strncmp(rt__scripts[script].name, "pool_", 5) == 0 ||
         script == RT__SCRIPT_PROCLAIM;
}

static void subscribe(side *s, int who) {
  s->sub[who] = rtt_redis_at(s->p.srv.port);
  freeReplyObject(rtt_cmd(s->sub[who], "SSUBSCRIBE %s%s", chan, clients[who]));
}

/* ARGV[1]: the channel prefix, maybe with "\0<epoch part>". */
static char prefix_arg[128];
static size_t prefix_len;

static void set_prefix(const char *epoch_part) {
  prefix_len = (size_t)snprintf(prefix_arg, sizeof(prefix_arg), "%s", chan);
  if (epoch_part != NULL) {
    prefix_arg[prefix_len++] = '\0';
    prefix_len +=
        (size_t)snprintf(prefix_arg + prefix_len,
                         sizeof(prefix_arg) - prefix_len, "%s", epoch_part);
  }
}

/* Call script (RT__SCRIPT_*) on s with the string arguments in ap after
 * ARGV[1]: the module command or EVAL of the script's body. */
static redisReply *vcall(redisContext *rc, int module, int script, va_list ap) {
  const char *argv[16];
  size_t lens[16];
  int argc = 0;
  char name[64];
  if (module) {
    snprintf(name, sizeof(name), "redturn.%s", rt__scripts[script].name);
    argv[argc] = name;
    lens[argc++] = strlen(name);
  } else {
    argv[argc] = "EVAL";
    lens[argc++] = 4;
    argv[argc] = rt__scripts[script].body;
    lens[argc++] = rt__scripts[script].len;
  }
  const char *mutex_keys[] = {"3", qkey, hkey, mkey};
  const char *pool_keys[] = {"4", pq, hkey, pm, pd};
  int pool = pool_script(script);
  const char **keys = pool ? pool_keys : mutex_keys;
  for (int i = 0; i < (pool ? 5 : 4); i++) {
    argv[argc] = keys[i];
    lens[argc++] = strlen(keys[i]);
  }
  argv[argc] = prefix_arg;
  lens[argc++] = prefix_len;
  for (const char *a; (a = va_arg(ap, const char *)) != NULL; argc++) {
    argv[argc] = a;
    lens[argc] = strlen(a);
  }
  redisReply *r = redisCommandArgv(rc, argc, argv, lens);
  cr_assert_not_null(r);
  return r;
}

static redisReply *call(redisContext *rc, int module, int script, ...) {
  va_list ap;
  va_start(ap, script);
  redisReply *r = vcall(rc, module, script, ap);
  va_end(ap);
  return r;
}

/* Whether two tokens agree: equal after the server's ids are named
 * alike, or numbers within the clock tolerance. */
static int token_eq(const char *a, size_t al, const side *sa, const char *b,
                    size_t bl, const side *sb) {
  char x[512], y[512];
  const side *ss[2] = {sa, sb};
  const char *in[2] = {a, b};
  size_t inl[2] = {al, bl};
  char *out[2] = {x, y};
  for (int k = 0; k < 2; k++) {
    /* "<run id><replid>" (the era) and "<run id>" (settle stamps). */
    char full[160];
    snprintf(full, sizeof(full), "%s%s", ss[k]->run_id, ss[k]->replid);
    const char *t = in[k];
    size_t tl = inl[k];
    if (tl == strlen(full) && memcmp(t, full, tl) == 0)
      t = "RUNREPL", tl = 7;
    else if (tl == strlen(ss[k]->run_id) && memcmp(t, ss[k]->run_id, tl) == 0)
      t = "RUN", tl = 3;
    snprintf(out[k], 512, "%.*s", (int)tl, t);
  }
  if (strcmp(x, y) == 0)
    return 1;
  char *ex, *ey;
  long long vx = strtoll(x, &ex, 10), vy = strtoll(y, &ey, 10);
  if (*x == '\0' || *y == '\0' || *ex != '\0' || *ey != '\0')
    return 0;
  long long tol = (vx > 100000000000000LL) ? TOL_US : TOL_MS;
  return vx > 100 && vy > 100 && llabs(vx - vy) <= tol;
}

/* Strings agree token by token (':'-separated). */
static int str_eq(const char *a, size_t al, const side *sa, const char *b,
                  size_t bl, const side *sb) {
  size_t i = 0, j = 0;
  for (;;) {
    size_t ie = i, je = j;
    while (ie < al && a[ie] != ':')
      ie++;
    while (je < bl && b[je] != ':')
      je++;
    if (!token_eq(a + i, ie - i, sa, b + j, je - j, sb))
      return 0;
    if (ie == al || je == bl)
      return ie == al && je == bl;
    i = ie + 1;
    j = je + 1;
  }
}

static int reply_eq(const redisReply *a, const side *sa, const redisReply *b,
                    const side *sb) {
  if (a->type != b->type)
    return 0;
  if (a->type == REDIS_REPLY_ERROR) {
    /* A script's error ends in " script: <sha>, on @user_script:<line>."
     * (which script, where): the module's is the text before it. */
    const char *tail = strstr(b->str, " script: ");
    size_t bl = tail != NULL ? (size_t)(tail - b->str) : b->len;
    return a->len == bl && memcmp(a->str, b->str, bl) == 0;
  }
  switch (a->type) {
  case REDIS_REPLY_INTEGER: {
    char x[32], y[32];
    int xl = snprintf(x, sizeof(x), "%lld", a->integer);
    int yl = snprintf(y, sizeof(y), "%lld", b->integer);
    return token_eq(x, (size_t)xl, sa, y, (size_t)yl, sb);
  }
  case REDIS_REPLY_STRING:
  case REDIS_REPLY_STATUS:
    return str_eq(a->str, a->len, sa, b->str, b->len, sb);
  case REDIS_REPLY_ARRAY:
    if (a->elements != b->elements)
      return 0;
    for (size_t i = 0; i < a->elements; i++)
      if (!reply_eq(a->element[i], sa, b->element[i], sb))
        return 0;
    return 1;
  default:
    return 1;
  }
}

/* A reply as text, for failure messages. */
static void show(const redisReply *r, char *out, size_t cap) {
  size_t n = strlen(out);
  if (n + 64 >= cap)
    return;
  switch (r->type) {
  case REDIS_REPLY_INTEGER:
    snprintf(out + n, cap - n, "%lld ", r->integer);
    break;
  case REDIS_REPLY_NIL:
    snprintf(out + n, cap - n, "nil ");
    break;
  case REDIS_REPLY_ARRAY:
    snprintf(out + n, cap - n, "[");
    for (size_t i = 0; i < r->elements; i++)
      show(r->element[i], out, cap);
    n = strlen(out);
    snprintf(out + n, cap - n, "] ");
    break;
  default:
    snprintf(out + n, cap - n, "'%.*s' ", (int)(r->len > 120 ? 120 : r->len),
             r->str);
  }
}

static void expect_same(const char *what, redisReply *a, const side *sa,
                        redisReply *b, const side *sb) {
  if (!reply_eq(a, sa, b, sb)) {
    char x[2048] = "", y[2048] = "";
    show(a, x, sizeof(x));
    show(b, y, sizeof(y));
    cr_assert_fail("%s: module %s, scripts %s", what, x, y);
  }
}

/* The messages a subscriber got so far: a PING after them is answered
 * after every message published before it (one connection, in order).
 * A notice is its payload; a keyspace event "<channel> <key>". */
static redisReply *drain(redisContext *s) {
  size_t cap = 16;
  redisReply *all = calloc(1, sizeof(*all));
  all->type = REDIS_REPLY_ARRAY;
  all->element = calloc(cap, sizeof(redisReply *));
  cr_assert_eq(redisAppendCommand(s, "PING"), REDIS_OK);
  for (;;) {
    void *m = NULL;
    cr_assert_eq(redisGetReply(s, &m), REDIS_OK);
    redisReply *r = m;
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
    if (r->elements == 2) { /* the PING's "pong" */
      freeReplyObject(r);
      return all;
    }
    cr_assert(r->elements == 3 || r->elements == 4);
    if (all->elements == cap) {
      cap *= 2;
      all->element = realloc(all->element, cap * sizeof(redisReply *));
    }
    redisReply *keep;
    if (r->elements == 3) {
      keep = r->element[2];
      r->element[2] = NULL;
      r->elements = 2;
    } else { /* pmessage: pattern, channel, payload */
      keep = calloc(1, sizeof(*keep));
      keep->type = REDIS_REPLY_STRING;
      keep->len = r->element[2]->len + 1 + r->element[3]->len;
      keep->str = malloc(keep->len + 1);
      snprintf(keep->str, keep->len + 1, "%s %s", r->element[2]->str,
               r->element[3]->str);
    }
    all->element[all->elements++] = keep;
    freeReplyObject(r);
  }
}

/* The subscriber got one notice since it was last drained: a grant of
 * request 1 of its client, naming has and has2 (NULL: anything). */
static void one_grant_notice(redisContext *sub, const char *has,
                             const char *has2) {
  redisReply *n = drain(sub);
  cr_assert_eq(n->elements, 1, "the grant notice");
  const char *got = n->element[0]->str;
  cr_assert(strncmp(got, "g:1:", 4) == 0, "%.80s", got);
  cr_assert(has == NULL || strstr(got, has) != NULL, "%.80s", got);
  cr_assert(has2 == NULL || strstr(got, has2) != NULL, "%.80s", got);
  freeReplyObject(n);
}

/* Compare the notices both sides' subscribers got since the last step,
 * and the keyspace events if they are watched. */
static void same_notices(const char *what, side *a, side *b) {
  for (int w = 0; w < 7; w++) {
    redisContext *x_sub = w < 5 ? a->sub[w] : w == 5 ? a->events : a->obs;
    redisContext *y_sub = w < 5 ? b->sub[w] : w == 5 ? b->events : b->obs;
    if (x_sub == NULL)
      continue;
    redisReply *x = drain(x_sub), *y = drain(y_sub);
    char label[128];
    snprintf(label, sizeof(label), "%s: %s %d", what,
             w < 5    ? "notices to client"
             : w == 5 ? "keyspace events"
                      : "observer notices",
             w);
    expect_same(label, x, a, y, b);
    freeReplyObject(x);
    freeReplyObject(y);
  }
}

/* Watch both sides' keyspace events (string, list, hash, sorted set and
 * generic ones; not "expired", which each server's own expiry cycle
 * times). */
static void watch_events(side *s) {
  rtt_ok(s->p.adm, "CONFIG SET notify-keyspace-events E$lhgz");
  s->events = rtt_redis_at(s->p.srv.port);
  freeReplyObject(rtt_cmd(s->events, "PSUBSCRIBE __keyevent@0__:*"));
}

/* Compare the fields of the hash key on both sides, one by one (HGETALL's
 * order is the hash's). */
static void same_hash(const char *what, side *a, side *b, const char *key) {
  redisReply *x = rtt_cmd(a->p.adm, "HGETALL %s", key);
  redisReply *y = rtt_cmd(b->p.adm, "HGETALL %s", key);
  cr_assert_eq(x->type, y->type, "%s: HGETALL %s types", what, key);
  if (x->type != REDIS_REPLY_ARRAY) {
    expect_same(what, x, a, y, b);
  } else {
    cr_assert_eq(x->elements, y->elements, "%s: %s sizes", what, key);
    for (size_t k = 0; k < x->elements; k += 2) {
      redisReply *v = rtt_cmd(b->p.adm, "HGET %s %b", key, x->element[k]->str,
                              x->element[k]->len);
      char label[256];
      snprintf(label, sizeof(label), "%s: %s field %s", what, key,
               x->element[k]->str);
      expect_same(label, x->element[k + 1], a, v, b);
      freeReplyObject(v);
    }
  }
  freeReplyObject(x);
  freeReplyObject(y);
}

/* Compare the resource's keys on both sides: q, m, h (and their PTTLs)
 * and the failover hold's era key; for a pool resource Q, M, h, D. */
static void same_keys(const char *what, side *a, side *b) {
  char era[160];
  snprintf(era, sizeof(era), "%sera", chan);
  int pool = rtt_int(a->p.adm, "EXISTS %s %s %s", pq, pm, pd) > 0 ||
             rtt_int(b->p.adm, "EXISTS %s %s %s", pq, pm, pd) > 0;
  const char *mutex_reads[][2] = {
      {"LRANGE %s 0 -1", qkey}, {"HGETALL %s", mkey}, {"GET %s", hkey},
      {"PTTL %s", qkey},        {"PTTL %s", mkey},    {"PTTL %s", hkey},
      {"GET %s", era},          {"TYPE %s", hkey}};
  const char *pool_reads[][2] = {
      {"LRANGE %s 0 -1", pq}, {"HGETALL %s", pm},
      {"HGETALL %s", hkey},   {"ZRANGE %s 0 -1 WITHSCORES", pd},
      {"PTTL %s", pq},        {"PTTL %s", pm},
      {"PTTL %s", hkey},      {"PTTL %s", pd},
      {"GET %s", era},        {"TYPE %s", hkey}};
  size_t nreads = pool ? sizeof(pool_reads) / sizeof(pool_reads[0])
                       : sizeof(mutex_reads) / sizeof(mutex_reads[0]);
  for (size_t i = 0; i < nreads; i++) {
    const char *cmd = pool ? pool_reads[i][0] : mutex_reads[i][0];
    const char *key = pool ? pool_reads[i][1] : mutex_reads[i][1];
    if (cmd[0] == 'H') {
      same_hash(what, a, b, key);
      continue;
    }
    redisReply *x = rtt_cmd(a->p.adm, cmd, key);
    redisReply *y = rtt_cmd(b->p.adm, cmd, key);
    if (strncmp(cmd, "PTTL", 4) == 0) {
      /* Any time left may differ by the tolerance, also a short one
       * (token_eq takes only numbers above 100 for times). */
      cr_assert(x->type == REDIS_REPLY_INTEGER &&
                    y->type == REDIS_REPLY_INTEGER &&
                    (x->integer == y->integer ||
                     (x->integer >= 0 && y->integer >= 0 &&
                      llabs(x->integer - y->integer) <= TOL_MS)),
                "%s: PTTL %s: module %lld, scripts %lld", what, key, x->integer,
                y->integer);
    } else {
      char label[256];
      snprintf(label, sizeof(label), "%s: %s", what, cmd);
      expect_same(label, x, a, y, b);
    }
    freeReplyObject(x);
    freeReplyObject(y);
  }
}

/* One step on both sides: the same call, then the same reply, notices and
 * keys. Returns side a's reply (the caller frees it). */
static redisReply *step(side *a, side *b, int script, ...) {
  va_list ap, ap2;
  va_start(ap, script);
  va_copy(ap2, ap);
  redisReply *x = vcall(a->p.adm, a->module, script, ap);
  redisReply *y = vcall(b->p.adm, b->module, script, ap2);
  va_end(ap2);
  va_end(ap);
  char what[96];
  snprintf(what, sizeof(what), "%s", rt__scripts[script].name);
  expect_same(what, x, a, y, b);
  same_notices(what, a, b);
  same_keys(what, a, b);
  freeReplyObject(y);
  return x;
}

#define STEP(...) freeReplyObject(step(&mod, &lua, __VA_ARGS__, NULL))
#define STEP_AT(i, ...)                                                        \
  ({                                                                           \
    redisReply *r_ = step(&mod, &lua, __VA_ARGS__, NULL);                      \
    cr_assert_eq(r_->type, REDIS_REPLY_ARRAY, "%s",                            \
                 r_->type == REDIS_REPLY_ERROR ? r_->str : "");                \
    cr_assert_gt(r_->elements, (size_t)(i));                                   \
    long long v_ = r_->element[i]->integer;                                    \
    freeReplyObject(r_);                                                       \
    v_;                                                                        \
  })

enum { QUEUED = 0, GRANTED = 1, RELEASED = 1, CANCELED = 2 };

/* Two servers: the module's and the scripts' (no module loaded there). */
static side mod, lua;

/* The module's server alone, on resource res (ARGV[1] without an epoch). */
static void mod_start(const char *res) {
  need_module();
  side_start(&mod, 1, 1);
  names(res);
  set_prefix(NULL);
}

static void pair_start(const char *res, const char *epoch_part) {
  need_module();
  side_start(&mod, 1, 1);
  side_start(&lua, 0, 0);
  names(res);
  set_prefix(epoch_part);
}

Test(module, queue_grant_cancel_extend_and_hand_on_as_the_scripts) {
  pair_start("basic", NULL);
  watch_events(&mod);
  watch_events(&lua);
  for (int w = 0; w < 4; w++) {
    subscribe(&mod, w);
    subscribe(&lua, w);
  }
  cr_assert_eq(STEP_AT(0, RT__SCRIPT_ENQUEUE, CA ":1", "4000", "0"), GRANTED);
  cr_assert_eq(STEP_AT(0, RT__SCRIPT_ENQUEUE, CA ":1", "4000", "1"), GRANTED,
               "a retry of the holder");
  cr_assert_eq(STEP_AT(1, RT__SCRIPT_ENQUEUE, CB ":1", "2000", "0", "lab:el"),
               1);
  cr_assert_eq(STEP_AT(1, RT__SCRIPT_ENQUEUE, CC ":7", "9000", "0"), 2);
  cr_assert_eq(STEP_AT(1, RT__SCRIPT_ENQUEUE, CD ":1", "3000", "0", ""), 3);
  cr_assert_eq(STEP_AT(1, RT__SCRIPT_ENQUEUE, CB ":1", "2000", "1", "lab:el"),
               1, "a retried waiter keeps its place");
  STEP(RT__SCRIPT_INSPECT, "10");
  STEP(RT__SCRIPT_INSPECT, "2");
  cr_assert_eq(STEP_AT(0, RT__SCRIPT_TRY, CE ":1", "1000"), 0, "busy");
  cr_assert_eq(STEP_AT(0, RT__SCRIPT_EXTEND, CA ":1", "8000"), 1);
  cr_assert_eq(STEP_AT(0, RT__SCRIPT_EXTEND, CB ":1", "8000"), 0);
  STEP(RT__SCRIPT_REAP, "");
  cr_assert_eq(STEP_AT(2, RT__SCRIPT_REAP, CC ":7"), 2);
  cr_assert_eq(STEP_AT(1, RT__SCRIPT_REAP, CA ":1"), 2);
  cr_assert_eq(STEP_AT(1, RT__SCRIPT_REAP, CE ":9"), 0);
  /* Cancel one behind the front, then the front (its successor is told). */
  cr_assert_eq(STEP_AT(0, RT__SCRIPT_RELEASE, CC ":7"), CANCELED);
  cr_assert_eq(STEP_AT(0, RT__SCRIPT_RELEASE, CB ":1"), CANCELED);
  cr_assert_eq(STEP_AT(0, RT__SCRIPT_RELEASE, CE ":1"), 0, "neither");
  /* The holder goes: D is granted (a notice), with the fence after A's. */
  cr_assert_eq(STEP_AT(0, RT__SCRIPT_RELEASE, CA ":1"), RELEASED);
  cr_assert_eq(STEP_AT(1, RT__SCRIPT_REAP, CD ":1"), 2);
  cr_assert_eq(STEP_AT(0, RT__SCRIPT_RELEASE, CD ":1"), RELEASED);
  cr_assert_eq(rtt_int(mod.p.adm, "EXISTS %s %s %s", qkey, hkey, mkey), 0,
               "an idle resource leaves nothing behind");
  cr_assert_eq(STEP_AT(0, RT__SCRIPT_TRY, CE ":2", "1000", "tl"), GRANTED);
  cr_assert_eq(STEP_AT(0, RT__SCRIPT_TRY, CE ":2", "1000", "tl"), GRANTED,
               "a retried try");
  STEP(RT__SCRIPT_INSPECT, "5");
}

Test(module, expired_holders_and_dead_waiters_are_reaped_as_the_scripts) {
  pair_start("reap", NULL);
  watch_events(&mod);
  watch_events(&lua);
  for (int w = 1; w < 3; w++) { /* D (3) is dead: nobody listens */
    subscribe(&mod, w);
    subscribe(&lua, w);
  }
  cr_assert_eq(STEP_AT(0, RT__SCRIPT_ENQUEUE, CA ":1", "300", "0"), GRANTED);
  cr_assert_eq(STEP_AT(0, RT__SCRIPT_ENQUEUE, CD ":1", "2000", "0"), QUEUED);
  cr_assert_eq(STEP_AT(0, RT__SCRIPT_ENQUEUE, CB ":1", "2000", "0", "x"),
               QUEUED);
  cr_assert_eq(STEP_AT(0, RT__SCRIPT_ENQUEUE, CC ":1", "2000", "0"), QUEUED);
  rtt_sleep_ms(400); /* A's lease ends; nobody reaps */
  /* D's notice reaches nobody: D is dropped, B is granted. */
  cr_assert_eq(STEP_AT(1, RT__SCRIPT_REAP, ""), 0);
  cr_assert_eq(STEP_AT(1, RT__SCRIPT_REAP, CB ":1"), 2);
  cr_assert_eq(STEP_AT(0, RT__SCRIPT_EXTEND, CB ":1", "300"), 1);
  rtt_sleep_ms(400);
  /* An enqueue that finds the lease ended hands on to C first; A, whose
   * client does not listen, is dropped when told it is next. */
  cr_assert_eq(STEP_AT(1, RT__SCRIPT_ENQUEUE, CA ":2", "2000", "0"), 1);
  cr_assert_eq(STEP_AT(1, RT__SCRIPT_REAP, CA ":2"), 0);
  cr_assert_eq(STEP_AT(0, RT__SCRIPT_RELEASE, CC ":1"), RELEASED);
  cr_assert_eq(STEP_AT(0, RT__SCRIPT_RELEASE, CA ":2"), 0);
  /* A try on an ended lease with waiters behind it grants them. */
  cr_assert_eq(STEP_AT(0, RT__SCRIPT_ENQUEUE, CE ":1", "300", "0"), GRANTED);
  cr_assert_eq(STEP_AT(0, RT__SCRIPT_ENQUEUE, CB ":2", "2000", "0"), QUEUED);
  rtt_sleep_ms(400);
  cr_assert_eq(STEP_AT(0, RT__SCRIPT_TRY, CC ":2", "1000"), 0);
  cr_assert_eq(STEP_AT(0, RT__SCRIPT_RELEASE, CB ":2"), RELEASED);
}

Test(module,
     dead_entries_are_dropped_a_bounded_number_per_call_as_the_scripts) {
  pair_start("skip", NULL);
  subscribe(&mod, 1);
  subscribe(&lua, 1);
  /* A's lease outlasts the queueing below on a busy machine, and what is
   * left of it when B queues is compared within the clock tolerance
   * (only numbers above 100 are taken as times). */
  cr_assert_eq(STEP_AT(0, RT__SCRIPT_ENQUEUE, CA ":1", "3000", "0"), GRANTED);
  /* 130 waiters whose clients are gone (nobody listens), then B; every
   * third one canceled. */
  side *both[] = {&mod, &lua};
  for (int i = 0; i < 130; i++) {
    char id[48];
    snprintf(id, sizeof(id), "%032x:%d", 0x900 + i, i);
    for (int k = 0; k < 2; k++) {
      freeReplyObject(call(both[k]->p.adm, both[k]->module, RT__SCRIPT_ENQUEUE,
                           id, "2000", "0", NULL));
      if (i % 3 == 0)
        freeReplyObject(call(both[k]->p.adm, both[k]->module,
                             RT__SCRIPT_RELEASE, id, NULL));
    }
  }
  same_keys("queued", &mod, &lua);
  cr_assert_eq(STEP_AT(0, RT__SCRIPT_ENQUEUE, CB ":1", "2000", "0"), QUEUED);
  STEP(RT__SCRIPT_INSPECT, "200");
  rtt_sleep_ms(3100); /* A's lease ends */
  /* The first reap drops SKIP_MAX dead entries and says there is more. */
  cr_assert_eq(STEP_AT(4, RT__SCRIPT_REAP, ""), 1);
  cr_assert_eq(STEP_AT(4, RT__SCRIPT_REAP, CB ":1"), 0);
  cr_assert_eq(STEP_AT(1, RT__SCRIPT_REAP, CB ":1"), 2);
  cr_assert_eq(STEP_AT(0, RT__SCRIPT_RELEASE, CB ":1"), RELEASED);
}

Test(module, retries_settle_the_hold_and_epochs_fence_as_the_scripts) {
  /* Epoch 3 and a failover hold of 600 ms. */
  pair_start("hold", "3/600");
  watch_events(&mod);
  watch_events(&lua);
  for (int w = 0; w < 3; w++) {
    subscribe(&mod, w);
    subscribe(&lua, w);
  }
  /* Held off: nothing is granted, the first waiter learns when it ends. */
  cr_assert_eq(STEP_AT(0, RT__SCRIPT_ENQUEUE, CA ":1", "2000", "0"), QUEUED);
  cr_assert_eq(STEP_AT(0, RT__SCRIPT_ENQUEUE, CB ":1", "2000", "0"), QUEUED);
  cr_assert_eq(STEP_AT(0, RT__SCRIPT_TRY, CC ":1", "2000"), 0);
  STEP(RT__SCRIPT_REAP, CA ":1");
  rtt_sleep_ms(700);
  cr_assert_eq(STEP_AT(1, RT__SCRIPT_REAP, CA ":1"), 2);
  long long fence = rtt_hfield(mod.p.adm, rtt_prefix(), "hold", 4, "f");
  cr_assert_geq(fence, 3LL << 40, "the epoch's worth is in the fence");
  /* A retry after a "reconnect": m's '@' names another server, so this
   * one starts settling; a waiter that misses its notice now stays. */
  rtt_ok(mod.p.adm, "HSET %s @ %s", mkey, "ffff:0");
  rtt_ok(lua.p.adm, "HSET %s @ %s", mkey, "ffff:0");
  cr_assert_eq(STEP_AT(1, RT__SCRIPT_ENQUEUE, CB ":1", "2000", "1"), 1);
  cr_assert_eq(STEP_AT(0, RT__SCRIPT_ENQUEUE, CD ":1", "2000", "0"), QUEUED);
  cr_assert_eq(STEP_AT(0, RT__SCRIPT_RELEASE, CA ":1"), RELEASED);
  cr_assert_eq(STEP_AT(0, RT__SCRIPT_RELEASE, CB ":1"), RELEASED);
  /* D is not subscribed, but the server is settling: D is granted. */
  cr_assert_eq(STEP_AT(1, RT__SCRIPT_REAP, CD ":1"), 2);
  cr_assert_gt(rtt_hfield(mod.p.adm, rtt_prefix(), "hold", 4, "f"), fence);
  STEP(RT__SCRIPT_INSPECT, "3");
}

Test(module, wrong_kinds_and_types_are_refused_as_the_scripts) {
  pair_start("kinds", NULL);
  side *both[] = {&mod, &lua};
  for (int i = 0; i < 2; i++)
    rtt_ok(both[i]->p.adm, "HSET %s * s:3", hkey);
  STEP(RT__SCRIPT_ENQUEUE, CA ":1", "1000", "0");
  STEP(RT__SCRIPT_INSPECT, "3");
  for (int i = 0; i < 2; i++) {
    rtt_ok(both[i]->p.adm, "DEL %s", hkey);
    rtt_ok(both[i]->p.adm, "SADD %s x", hkey);
  }
  STEP(RT__SCRIPT_TRY, CA ":1", "1000");
}

/* Module and script calls on one resource: FIFO order and fences. */
Test(module, module_and_script_clients_share_a_resource_in_fifo_order) {
  need_module();
  side_start(&mod, 1, 1);
  names("mixed");
  set_prefix(NULL);
  enum { N = 12 };
  char ids[N][48];
  for (int i = 0; i < N; i++) {
    /* Each client subscribed, so grants reach it. */
    snprintf(ids[i], sizeof(ids[i]), "%032x:%d", i + 1, i + 1);
    redisContext *s = rtt_redis_at(mod.p.srv.port);
    char who[40];
    snprintf(who, sizeof(who), "%032x", i + 1);
    freeReplyObject(rtt_cmd(s, "SSUBSCRIBE %s%s", chan, who));
  }
  for (int i = 0; i < N; i++) {
    redisReply *r =
        call(mod.p.adm, i % 2, RT__SCRIPT_ENQUEUE, ids[i], "5000", "0", NULL);
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s",
                 r->type == REDIS_REPLY_ERROR ? r->str : "");
    cr_assert_eq(r->element[0]->integer, i == 0 ? GRANTED : QUEUED);
    if (i > 0)
      cr_assert_eq(r->element[1]->integer, i, "position of waiter %d", i);
    freeReplyObject(r);
  }
  long long last = 0;
  for (int i = 0; i < N; i++) {
    long long f = rtt_hfield(mod.p.adm, rtt_prefix(), "mixed", 5, "f");
    cr_assert_gt(f, last, "fences rise: %lld after %lld", f, last);
    last = f;
    redisReply *h = rtt_cmd(mod.p.adm, "GET %s", hkey);
    cr_assert_not_null(strstr(h->str, ids[i]), "grant %d went to %s", i,
                       h->str);
    freeReplyObject(h);
    /* A try by someone else, then the holder's release; paths alternate. */
    redisReply *t =
        call(mod.p.adm, i % 3 == 0, RT__SCRIPT_TRY, CE ":1", "1000", NULL);
    cr_assert_eq(t->element[0]->integer, 0);
    freeReplyObject(t);
    redisReply *r =
        call(mod.p.adm, (i / 2) % 2, RT__SCRIPT_RELEASE, ids[i], NULL);
    cr_assert_eq(r->element[0]->integer, RELEASED);
    freeReplyObject(r);
  }
  cr_assert_eq(rtt_int(mod.p.adm, "EXISTS %s %s %s", qkey, hkey, mkey), 0);
}

/* Make replica a replica of master and wait until it has synced. */
static void replicate(side *replica, const side *master) {
  rtt_ok(replica->p.adm, "REPLICAOF 127.0.0.1 %d", master->p.srv.port);
  char link[16] = "";
  for (uint64_t until = rtt_now_ms() + 10000;
       strcmp(link, "up") != 0 && rtt_now_ms() < until; rtt_sleep_ms(50))
    info_field(replica->p.adm, "master_link_status", link, sizeof(link));
  cr_assert_str_eq(link, "up", "the replica never synced");
}

/* Effects replicate as commands: a replica without the module follows. */
Test(module, a_replica_without_the_module_ends_with_the_masters_keys) {
  need_module();
  const char *const aof[] = {"--loadmodule", RTT_MODULE_PATH, "--appendonly",
                             "yes", NULL};
  side_start_with(&mod, 1, aof);
  side_start(&lua, 0, 0); /* the replica */
  names("repl");
  set_prefix(NULL);
  replicate(&lua, &mod);
  subscribe(&mod, 1);
  freeReplyObject(
      call(mod.p.adm, 1, RT__SCRIPT_ENQUEUE, CA ":1", "5000", "0", NULL));
  freeReplyObject(
      call(mod.p.adm, 1, RT__SCRIPT_ENQUEUE, CB ":1", "5000", "0", "lb", NULL));
  freeReplyObject(
      call(mod.p.adm, 1, RT__SCRIPT_ENQUEUE, CC ":1", "5000", "0", NULL));
  freeReplyObject(call(mod.p.adm, 1, RT__SCRIPT_EXTEND, CA ":1", "9000", NULL));
  freeReplyObject(call(mod.p.adm, 1, RT__SCRIPT_RELEASE, CA ":1", NULL));
  cr_assert_eq(rtt_int(mod.p.adm, "WAIT 1 5000"), 1);
  /* The replica's keys are the master's (run ids aside: one run's). */
  memcpy(lua.run_id, mod.run_id, sizeof(lua.run_id));
  same_keys("replica", &mod, &lua);
  redisReply *h = rtt_cmd(lua.p.adm, "GET %s", hkey);
  cr_assert_eq(h->type, REDIS_REPLY_STRING, "the replica has the holder");
  cr_assert_not_null(strstr(h->str, CB ":1:lb"));
  freeReplyObject(h);
  /* C's client does not listen: dropped when told it is next. */
  cr_assert_eq(rtt_int(lua.p.adm, "EXISTS %s %s", qkey, mkey), 0);
  cr_assert_gt(rtt_cmdstat_calls(lua.p.adm, "set"), 0, "effects as commands");
  /* The AOF has the effects, as Redis writes them, and no module command:
   * a server without the module can load it. */
  cr_assert(aof_has(&mod, "PXAT"), "SET ... PXAT in the AOF");
  cr_assert(aof_has(&mod, "HINCRBY"), "HINCRBY in the AOF");
  cr_assert(aof_has(&mod, "PEXPIREAT"), "PEXPIREAT in the AOF");
  cr_assert_not(aof_has(&mod, "redturn."), "no module command in the AOF");
}

Test(module, commands_declare_their_keys_and_handshake) {
  need_module();
  side_start(&mod, 1, 1);
  names("keys");
  redisReply *r = rtt_cmd(
      mod.p.adm, "COMMAND GETKEYS redturn.enqueue 3 %s %s %s c: id 1000", qkey,
      hkey, mkey);
  cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s",
               r->type == REDIS_REPLY_ERROR ? r->str : "");
  cr_assert_eq(r->elements, 3);
  cr_assert_str_eq(r->element[0]->str, qkey);
  cr_assert_str_eq(r->element[2]->str, mkey);
  freeReplyObject(r);
  cr_assert_eq(rtt_int(mod.p.adm, "redturn.version"), 2);
  r = rtt_cmd(mod.p.adm, "MODULE LIST");
  cr_assert_eq(r->elements, 1);
  cr_assert_str_eq(r->element[0]->element[1]->str, "redturn");
  cr_assert_eq(r->element[0]->element[3]->integer, 2);
  freeReplyObject(r);
  /* An ACL key pattern applies to the declared keys. */
  rtt_ok(mod.p.adm, "ACL SETUSER u on >pw ~other:* +redturn.enqueue");
  redisContext *u = rtt_redis_at(mod.p.srv.port);
  rtt_ok(u, "AUTH u pw");
  char err[256];
  rtt_err(u, err, sizeof(err), "redturn.enqueue 3 %s %s %s c: %s 1000 0", qkey,
          hkey, mkey, CA ":1");
  cr_assert(strncmp(err, "NOPERM", 6) == 0, "%s", err);
  rtt_ok(mod.p.adm, "ACL SETUSER u ~%s:*", rtt_prefix());
  rtt_ok(u, "redturn.enqueue 3 %s %s %s c: %s 1000 0", qkey, hkey, mkey,
         CA ":1");
  /* inspect is read-only: a replica serves it. */
  r = rtt_cmd(mod.p.adm, "COMMAND INFO redturn.inspect");
  cr_assert_str_eq(r->element[0]->element[2]->element[0]->str, "readonly");
  freeReplyObject(r);
}

Test(module, bad_input_gets_an_error_naming_it) {
  need_module();
  side_start(&mod, 1, 1);
  names("bad");
  redisContext *rc = mod.p.adm;
  char err[512];
  rtt_err(rc, err, sizeof(err), "redturn.enqueue 3 %s %s", qkey, hkey);
  cr_assert_not_null(strstr(err, "wrong number of arguments"), "%s", err);
  rtt_err(rc, err, sizeof(err), "redturn.enqueue x %s %s %s c: id 1", qkey,
          hkey, mkey);
  cr_assert_not_null(strstr(err, "numkeys must be an integer"), "%s", err);
  rtt_err(rc, err, sizeof(err), "redturn.enqueue 2 %s %s %s c: id 1", qkey,
          hkey, mkey);
  cr_assert_not_null(strstr(err, "numkeys is 2"), "%s", err);
  rtt_err(rc, err, sizeof(err), "redturn.enqueue 9 %s %s %s c: id 1", qkey,
          hkey, mkey);
  cr_assert_not_null(strstr(err, "only 6 arguments"), "%s", err);
  rtt_err(rc, err, sizeof(err), "redturn.release 3 %s %s %s c:", qkey, hkey,
          mkey);
  cr_assert_not_null(strstr(err, "needs at least 2"), "%s", err);
  const char *leases[] = {"soon",  "-5", "0", "1.5", "", "99999999999999999999",
                          "5000x", "-"};
  for (size_t i = 0; i < sizeof(leases) / sizeof(leases[0]); i++) {
    rtt_err(rc, err, sizeof(err), "redturn.enqueue 3 %s %s %s c: %s %s 0", qkey,
            hkey, mkey, CA ":1", leases[i]);
    cr_assert_not_null(strstr(err, "the lease must be a positive whole number"),
                       "%s", err);
    rtt_err(rc, err, sizeof(err), "redturn.extend 3 %s %s %s c: %s %s", qkey,
            hkey, mkey, CA ":1", leases[i]);
    cr_assert_not_null(strstr(err, "positive whole number"), "%s", err);
  }
  rtt_err(rc, err, sizeof(err), "redturn.inspect 3 %s %s %s c: many", qkey,
          hkey, mkey);
  cr_assert_not_null(strstr(err, "number of waiters"), "%s", err);
  /* A malformed holder record is an error, not a crash. */
  rtt_ok(rc, "SET %s garbage", hkey);
  rtt_err(rc, err, sizeof(err), "redturn.reap 3 %s %s %s c: %s", qkey, hkey,
          mkey, CA ":1");
  cr_assert_not_null(strstr(err, "malformed holder record"), "%s", err);
  rtt_ok(rc, "SET %s 1:notanumber:3:%s", hkey, CA ":1");
  rtt_err(rc, err, sizeof(err), "redturn.reap 3 %s %s %s c: %s", qkey, hkey,
          mkey, CA ":1");
  cr_assert_not_null(strstr(err, "malformed holder deadline"), "%s", err);
  /* A key without a hash tag: grants cannot name it. */
  rtt_ok(rc, "DEL %s", hkey);
  rtt_ok(rc, "RPUSH q-plain %s", CB ":1");
  rtt_ok(rc, "HSET m-plain %s 0:1000 # 0 @ x:0", CB ":1");
  rtt_err(rc, err, sizeof(err), "redturn.reap 3 q-plain h-plain m-plain c: x");
  cr_assert_not_null(strstr(err, "no hash tag"), "%s", err);
  cr_assert_eq(rtt_int(rc, "redturn.version"), 2, "the server is alive");
}

/* A one-node cluster: the key specs route the commands (keys of two
 * slots are refused), and the "c" epoch is the node's own configEpoch. */
Test(module, a_cluster_routes_by_the_declared_keys_and_fences_with_its_epoch) {
  need_module();
  char bus[16];
  snprintf(bus, sizeof(bus), "%d", rtt_free_port());
  const char *const extra[] = {"--cluster-enabled",
                               "yes",
                               "--cluster-config-file",
                               "nodes.conf",
                               "--cluster-port",
                               bus,
                               "--loadmodule",
                               RTT_MODULE_PATH,
                               NULL};
  rtt_private_start(&mod.p, extra);
  rtt_ok(mod.p.adm, "CLUSTER ADDSLOTSRANGE 0 16383");
  rtt_ok(mod.p.adm, "CLUSTER BUMPEPOCH");
  for (uint64_t until = rtt_now_ms() + 10000;; rtt_sleep_ms(50)) {
    redisReply *r = rtt_cmd(mod.p.adm, "CLUSTER INFO");
    int ok = strstr(r->str, "cluster_state:ok") != NULL;
    freeReplyObject(r);
    if (ok)
      break;
    cr_assert_lt(rtt_now_ms(), until, "the cluster never got ok");
  }
  long long epoch = rtt_cluster_info_ll(mod.p.srv.port, "cluster_my_epoch");
  cr_assert_geq(epoch, 1);
  char err[256];
  rtt_err(mod.p.adm, err, sizeof(err),
          "redturn.enqueue 3 a:{x}:q a:{y}:h a:{z}:m c: %s 1000 0", CA ":1");
  cr_assert(strncmp(err, "CROSSSLOT", 9) == 0, "%s", err);
  /* The channels of the resource's slot (as the client makes them). */
  names("clu");
  snprintf(chan, sizeof(chan), "%s:{clu}:c:", rtt_prefix());
  set_prefix("c");
  for (int module = 1; module >= 0; module--) {
    rtt_ok(mod.p.adm, "DEL %s %s %s", qkey, hkey, mkey);
    subscribe(&mod, 1);
    redisReply *r =
        call(mod.p.adm, module, RT__SCRIPT_ENQUEUE, CA ":1", "5000", "0", NULL);
    cr_assert_eq(r->element[0]->integer, GRANTED);
    long long fence = r->element[1]->integer;
    long long now_us = r->element[4]->integer * 1000;
    freeReplyObject(r);
    long long epoch_part = fence - now_us;
    cr_assert(epoch_part > (epoch << 40) - 5000000 &&
                  epoch_part < (epoch << 40) + 5000000,
              "fence %lld carries epoch %lld (%s)", fence, epoch,
              module ? "module" : "script");
    freeReplyObject(call(mod.p.adm, module, RT__SCRIPT_ENQUEUE, CB ":1", "5000",
                         "0", NULL));
    r = call(mod.p.adm, module, RT__SCRIPT_RELEASE, CA ":1", NULL);
    cr_assert_eq(r->element[0]->integer, RELEASED);
    freeReplyObject(r);
    redisReply *n = drain(mod.sub[1]);
    cr_assert_eq(n->elements, 1, "the grant notice");
    cr_assert(strncmp(n->element[0]->str, "g:1:", 4) == 0, "%s",
              n->element[0]->str);
    cr_assert_not_null(strstr(n->element[0]->str, "::{clu}"));
    freeReplyObject(n);
    rtt_redis_close(mod.sub[1]);
  }
}

/* Argument vector of a module command on keys q h m (NULL-terminated
 * string arguments after them); the reply. */
static redisReply *cmd_keys(redisContext *rc, const char *cmd, const char *q,
                            const char *h, const char *m, ...) {
  const char *argv[16] = {cmd, "3", q, h, m};
  size_t lens[16];
  int argc = 5;
  va_list ap;
  va_start(ap, m);
  for (const char *a; (a = va_arg(ap, const char *)) != NULL;)
    argv[argc++] = a;
  va_end(ap);
  for (int i = 0; i < argc; i++)
    lens[i] = strlen(argv[i]);
  redisReply *r = redisCommandArgv(rc, argc, argv, lens);
  cr_assert_not_null(r);
  return r;
}

/* Keys that are not one resource's q, h and m (two of them one key, keys
 * of two hash tags, wrong suffixes) are refused before any key is
 * opened: no two key handles of a call refer to one key (a release that
 * deleted h through one handle read it through the other, freed). */
Test(module, keys_of_another_shape_are_refused_before_any_write) {
  need_module();
  side_start(&mod, 1, 1);
  redisContext *rc = mod.p.adm;
  const char *const bad[][3] = {
      {"rt:{r}:q", "rt:{r}:hm", "rt:{r}:hm"},
      {"rt:{r}:q", "rt:{r}:h", "rt:{r}:h"},
      {"rt:{r}:q", "rt:{r}:q", "rt:{r}:m"},
      {"rt:{r}:q", "rt:{r}:m", "rt:{r}:h"},
      {"rt:{r}:q", "rt:{s}:h", "rt:{s}:m"},
      {"rt:{r}:q", "rt:{r}:h", "xx:{r}:m"},
      {"rt:{r}:q", "rt:{r}:h", "rt:{r}:mm"},
      {"rt:{r}:q", "rt:{r}:h", ""},
      {"{r}:q", "{r}:h", "{r}:q"},
  };
  const char *const cmds[] = {"redturn.enqueue", "redturn.try",
                              "redturn.release", "redturn.reap",
                              "redturn.extend",  "redturn.inspect"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    for (size_t j = 0; j < sizeof(cmds) / sizeof(cmds[0]); j++) {
      redisReply *r = cmd_keys(rc, cmds[j], bad[i][0], bad[i][1], bad[i][2],
                               "c:", j == 5 ? "10" : CA ":1", "60000", NULL);
      cr_assert_eq(r->type, REDIS_REPLY_ERROR, "%s %s %s %s: not refused",
                   cmds[j], bad[i][0], bad[i][1], bad[i][2]);
      cr_assert_not_null(strstr(r->str, "the keys must be <base>:q"), "%s",
                         r->str);
      freeReplyObject(r);
    }
  redisReply *r = rtt_cmd(rc, "DBSIZE");
  cr_assert_eq(r->integer, 0, "nothing written");
  freeReplyObject(r);
  /* The resource's own keys still work. */
  r = cmd_keys(rc, "redturn.enqueue", "rt:{r}:q", "rt:{r}:h", "rt:{r}:m",
               "c:", CA ":1", "60000", NULL);
  cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s", r->str);
  freeReplyObject(r);
  cr_assert_eq(rtt_int(rc, "redturn.version"), 2, "the server is alive");
}

/* A name of the library's longest (4096 bytes) hands on through the
 * module: the grant notice names its hash tag, however long. */
Test(module, the_longest_name_hands_on) {
  need_module();
  side_start(&mod, 1, 1);
  size_t n = 4096;
  size_t cap = n + 32;
  char *q = malloc(cap), *h = malloc(cap), *m = malloc(cap);
  char *tag = malloc(n + 3);
  tag[0] = '{';
  memset(tag + 1, 'n', n);
  tag[n + 1] = '}';
  tag[n + 2] = '\0';
  snprintf(q, cap, "rt:%s:q", tag);
  snprintf(h, cap, "rt:%s:h", tag);
  snprintf(m, cap, "rt:%s:m", tag);
  redisContext *rc = mod.p.adm;
  redisContext *sub = rtt_redis_at(mod.p.srv.port);
  freeReplyObject(rtt_cmd(sub, "SSUBSCRIBE c:%s", CB));
  redisReply *r = cmd_keys(rc, "redturn.enqueue", q, h, m, "c:", CA ":1",
                           "60000", "0", NULL);
  cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s", r->str);
  cr_assert_eq(r->element[0]->integer, GRANTED);
  freeReplyObject(r);
  r = cmd_keys(rc, "redturn.enqueue", q, h, m, "c:", CB ":1", "60000", "0",
               NULL);
  cr_assert_eq(r->element[0]->integer, 0, "queued");
  freeReplyObject(r);
  r = cmd_keys(rc, "redturn.release", q, h, m, "c:", CA ":1", NULL);
  cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s", r->str);
  cr_assert_eq(r->element[0]->integer, RELEASED);
  freeReplyObject(r);
  one_grant_notice(sub, tag, NULL);
  r = rtt_cmd(rc, "GET %s", h);
  cr_assert_eq(r->type, REDIS_REPLY_STRING);
  cr_assert_not_null(strstr(r->str, CB ":1"), "B holds: %s", r->str);
  freeReplyObject(r);
  rtt_redis_close(sub);
  free(q);
  free(h);
  free(m);
  free(tag);
}

/* maxmemory below what is used, noeviction: nothing is evicted, every
 * deny-oom command is refused. */
static void memory_short(redisContext *rc) {
  rtt_ok(rc, "CONFIG SET maxmemory-policy noeviction");
  char used[32];
  info_field(rc, "used_memory", used, sizeof(used));
  rtt_ok(rc, "CONFIG SET maxmemory %lld", atoll(used) / 2);
  redisReply *r = rtt_cmd(rc, "SET fill x");
  cr_assert_eq(r->type, REDIS_REPLY_ERROR, "memory is short");
  cr_assert(strncmp(r->str, "OOM", 3) == 0, "%s", r->str);
  freeReplyObject(r);
}

/* Out of memory (maxmemory reached, noeviction): a holder's retried
 * enqueue, a reap, an extend and a release run, and the release hands on
 * to a waiter queued before; only a new request is refused, with Redis's
 * OOM error, before anything is written. */
Test(module, out_of_memory_refuses_only_new_requests) {
  mod_start("oom");
  redisContext *rc = mod.p.adm;
  subscribe(&mod, 1);
  redisReply *r = call(rc, 1, RT__SCRIPT_ENQUEUE, CA ":1", "60000", "0", NULL);
  cr_assert_eq(r->element[0]->integer, GRANTED);
  freeReplyObject(r);
  r = call(rc, 1, RT__SCRIPT_ENQUEUE, CB ":1", "60000", "0", NULL);
  cr_assert_eq(r->element[0]->integer, QUEUED);
  freeReplyObject(r);
  memory_short(rc);
  /* A new request: refused, nothing written. */
  r = call(rc, 1, RT__SCRIPT_ENQUEUE, CC ":1", "60000", "0", NULL);
  cr_assert_eq(r->type, REDIS_REPLY_ERROR);
  cr_assert(strncmp(r->str, "OOM ", 4) == 0, "%s", r->str);
  freeReplyObject(r);
  r = rtt_cmd(rc, "HEXISTS %s %s", mkey, CC ":1");
  cr_assert_eq(r->integer, 0, "the refused request is not queued");
  freeReplyObject(r);
  /* The holder's retry, a reap, an extend: they run. */
  r = call(rc, 1, RT__SCRIPT_ENQUEUE, CA ":1", "60000", "1", NULL);
  cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s", r->str);
  cr_assert_eq(r->element[0]->integer, GRANTED);
  freeReplyObject(r);
  r = call(rc, 1, RT__SCRIPT_ENQUEUE, CB ":1", "60000", "1", NULL);
  cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s", r->str);
  cr_assert_eq(r->element[0]->integer, QUEUED, "the waiter's retry");
  freeReplyObject(r);
  r = call(rc, 1, RT__SCRIPT_REAP, "", NULL);
  cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s", r->str);
  freeReplyObject(r);
  r = call(rc, 1, RT__SCRIPT_EXTEND, CA ":1", "30000", NULL);
  cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s", r->str);
  cr_assert_eq(r->element[0]->integer, 1);
  freeReplyObject(r);
  /* The release hands on to the waiter queued before memory ran out. */
  r = call(rc, 1, RT__SCRIPT_RELEASE, CA ":1", NULL);
  cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s", r->str);
  cr_assert_eq(r->element[0]->integer, RELEASED);
  freeReplyObject(r);
  one_grant_notice(mod.sub[1], NULL, NULL);
  r = rtt_cmd(rc, "GET %s", hkey);
  cr_assert_eq(r->type, REDIS_REPLY_STRING);
  cr_assert_not_null(strstr(r->str, CB ":1"), "B holds: %s", r->str);
  freeReplyObject(r);
  rtt_ok(rc, "CONFIG SET maxmemory 0");
}

/* WATCH on a resource's keys: a call that changes nothing (a reap while
 * the lock is held, the holder's retried enqueue, a release of a request
 * that is not there) aborts no transaction, on the module as with the
 * scripts; a call that writes does. */
Test(module, calls_that_change_nothing_abort_no_watch) {
  need_module();
  side_start(&mod, 1, 1);
  redisContext *rc = mod.p.adm;
  redisContext *w = rtt_redis_at(mod.p.srv.port);
  for (int module = 1; module >= 0; module--) {
    names(module ? "watch-mod" : "watch-lua");
    set_prefix(NULL);
    redisReply *r =
        call(rc, module, RT__SCRIPT_ENQUEUE, CA ":1", "60000", "0", NULL);
    cr_assert_eq(r->element[0]->integer, GRANTED);
    freeReplyObject(r);
    r = call(rc, module, RT__SCRIPT_ENQUEUE, CB ":1", "60000", "0", NULL);
    cr_assert_eq(r->element[0]->integer, QUEUED);
    freeReplyObject(r);
    const char *path = module ? "module" : "script";
    for (int step = 0; step < 4; step++) {
      rtt_ok(w, "WATCH %s %s %s", qkey, hkey, mkey);
      if (step == 0)
        r = call(rc, module, RT__SCRIPT_REAP, "", NULL);
      else if (step == 1)
        r = call(rc, module, RT__SCRIPT_REAP, CB ":1", NULL);
      else if (step == 2)
        r = call(rc, module, RT__SCRIPT_ENQUEUE, CA ":1", "60000", "1", NULL);
      else
        r = call(rc, module, RT__SCRIPT_RELEASE, CC ":1", NULL);
      cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s", r->str);
      freeReplyObject(r);
      rtt_ok(w, "MULTI");
      freeReplyObject(rtt_cmd(w, "PING"));
      r = rtt_cmd(w, "EXEC");
      cr_assert_eq(r->type, REDIS_REPLY_ARRAY,
                   "%s: step %d aborted the transaction", path, step);
      freeReplyObject(r);
    }
    /* A write does abort it. */
    rtt_ok(w, "WATCH %s %s %s", qkey, hkey, mkey);
    freeReplyObject(call(rc, module, RT__SCRIPT_RELEASE, CA ":1", NULL));
    rtt_ok(w, "MULTI");
    freeReplyObject(rtt_cmd(w, "PING"));
    r = rtt_cmd(w, "EXEC");
    cr_assert_eq(r->type, REDIS_REPLY_NIL, "%s: a release aborts it", path);
    freeReplyObject(r);
  }
  rtt_redis_close(w);
}

/* Out-of-contract input the scripts' callers (FCALL, EVAL) refuse or
 * fail on, the module does the same, with the same keys after it:
 * numkeys with a space or a sign; a '#' counter at LLONG_MAX (HINCRBY's
 * overflow error, not a wrap). */
Test(module, out_of_contract_input_ends_as_with_the_scripts) {
  need_module();
  side_start(&mod, 1, 1);
  redisContext *rc = mod.p.adm;
  names("contract");
  const char *const bad_numkeys[] = {" 3", "+3", "3 ", "03x", ""};
  for (size_t i = 0; i < sizeof(bad_numkeys) / sizeof(bad_numkeys[0]); i++) {
    const char *mod_argv[] = {
        "redturn.enqueue", bad_numkeys[i], qkey, hkey, mkey, "c:",
        CA ":1",           "1000"};
    const char *lua_argv[] = {"EVAL", "return 1", bad_numkeys[i], qkey,  hkey,
                              mkey,   "c:",       CA ":1",        "1000"};
    redisReply *a = redisCommandArgv(rc, 8, mod_argv, NULL);
    redisReply *b = redisCommandArgv(rc, 9, lua_argv, NULL);
    cr_assert_eq(b->type, REDIS_REPLY_ERROR, "EVAL took numkeys '%s'",
                 bad_numkeys[i]);
    cr_assert_eq(a->type, REDIS_REPLY_ERROR, "the module took numkeys '%s'",
                 bad_numkeys[i]);
    freeReplyObject(a);
    freeReplyObject(b);
  }
  /* Leases out of contract: the same error on both, nothing written. */
  set_prefix(NULL);
  const char *const leases[] = {
      "0",  "-5", "1e3", "1.5",  " 5",
      "+5", "5 ", "",    "0x10", "99999999999999999999"};
  const int scripts[] = {RT__SCRIPT_ENQUEUE, RT__SCRIPT_TRY, RT__SCRIPT_EXTEND};
  for (size_t i = 0; i < sizeof(leases) / sizeof(leases[0]); i++)
    for (int s = 0; s < 3; s++)
      for (int module = 1; module >= 0; module--) {
        redisReply *e =
            call(rc, module, scripts[s], CA ":1", leases[i], "0", NULL);
        cr_assert_eq(e->type, REDIS_REPLY_ERROR, "%s took lease '%s' (%s)",
                     module ? "the module" : "the script", leases[i],
                     rt__scripts[scripts[s]].name);
        char want[96];
        snprintf(want, sizeof(want),
                 "ERR the lease must be a positive whole number of ms, not "
                 "'%s'",
                 leases[i]);
        cr_assert(strncmp(e->str, want, strlen(want)) == 0, "%s", e->str);
        freeReplyObject(e);
      }
  redisReply *r = rtt_cmd(rc, "DBSIZE");
  cr_assert_eq(r->integer, 0, "nothing written");
  freeReplyObject(r);
  /* '#' at LLONG_MAX: a release's pop fails as HINCRBY does, on both. */
  char q[2][96], h[2][96], m[2][96];
  for (int module = 1; module >= 0; module--) {
    names(module ? "max-mod" : "max-lua");
    set_prefix(NULL);
    snprintf(q[module], sizeof(q[module]), "%s", qkey);
    snprintf(h[module], sizeof(h[module]), "%s", hkey);
    snprintf(m[module], sizeof(m[module]), "%s", mkey);
    freeReplyObject(
        call(rc, module, RT__SCRIPT_ENQUEUE, CA ":1", "60000", "0", NULL));
    freeReplyObject(
        call(rc, module, RT__SCRIPT_ENQUEUE, CB ":1", "60000", "0", NULL));
    rtt_ok(rc, "HSET %s # 9223372036854775807", mkey);
    r = call(rc, module, RT__SCRIPT_RELEASE, CA ":1", NULL);
    cr_assert_eq(r->type, REDIS_REPLY_ERROR, "%s: %d",
                 module ? "module" : "lua", r->type);
    cr_assert_not_null(strstr(r->str, "increment or decrement would overflow"),
                       "%s", r->str);
    freeReplyObject(r);
  }
  const char *const reads[] = {"LRANGE %s 0 -1", "HGETALL %s"};
  for (int i = 0; i < 2; i++) {
    redisReply *a = rtt_cmd(rc, reads[i], i == 0 ? q[1] : m[1]);
    redisReply *b = rtt_cmd(rc, reads[i], i == 0 ? q[0] : m[0]);
    cr_assert_eq(a->elements, b->elements, "%s", reads[i]);
    for (size_t j = 0; j < a->elements; j++)
      cr_assert_str_eq(a->element[j]->str, b->element[j]->str);
    freeReplyObject(a);
    freeReplyObject(b);
  }
  cr_assert_eq(rtt_int(rc, "EXISTS %s", h[1]), rtt_int(rc, "EXISTS %s", h[0]));
}

/* An epoch part that reads as no number ("nan", "x") is epoch 0 on both
 * paths: the fence is the server's microsecond clock, not 1. */
Test(module, an_epoch_of_no_number_fences_from_the_clock) {
  need_module();
  side_start(&mod, 1, 1);
  redisContext *rc = mod.p.adm;
  const char *const epochs[] = {"nan", "-nan", "NaN", "x"};
  for (size_t i = 0; i < sizeof(epochs) / sizeof(epochs[0]); i++)
    for (int module = 1; module >= 0; module--) {
      char res[32];
      snprintf(res, sizeof(res), "nan-%zu-%d", i, module);
      names(res);
      set_prefix(epochs[i]);
      redisReply *r =
          call(rc, module, RT__SCRIPT_ENQUEUE, CA ":1", "5000", "0", NULL);
      cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s", r->str);
      cr_assert_eq(r->element[0]->integer, GRANTED);
      long long fence = r->element[1]->integer;
      long long now_us = r->element[4]->integer * 1000;
      cr_assert(fence >= now_us && fence < now_us + 2000000,
                "%s: epoch '%s' gave fence %lld (now %lld us)",
                module ? "module" : "script", epochs[i], fence, now_us);
      freeReplyObject(r);
    }
}

/* A failover hold is at most 10^15 ms, as a lease: a longer one (2^63 ms
 * read as no hold, or an overflow, before) fails the call before anything
 * is written, in the same words on both paths; 10^15 itself holds off. */
Test(module, a_failover_hold_over_the_longest_lease_is_refused_alike) {
  need_module();
  side_start(&mod, 1, 1);
  redisContext *rc = mod.p.adm;
  const char *const holds[] = {"9223372036854775808", "1000000000000001",
                               "00000000000000000001"};
  for (size_t i = 0; i < sizeof(holds) / sizeof(holds[0]); i++) {
    char epoch[64], text[2][256];
    snprintf(epoch, sizeof(epoch), "1/%s", holds[i]);
    for (int module = 1; module >= 0; module--) {
      char res[32];
      snprintf(res, sizeof(res), "hold-%zu-%d", i, module);
      names(res);
      set_prefix(epoch);
      redisReply *r =
          call(rc, module, RT__SCRIPT_ENQUEUE, CA ":1", "5000", "0", NULL);
      cr_assert_eq(r->type, REDIS_REPLY_ERROR, "%s: hold %s was taken",
                   module ? "module" : "script", holds[i]);
      size_t n = strcspn(r->str, "\r\n");
      const char *tail = strstr(r->str, " script: ");
      if (tail != NULL)
        n = (size_t)(tail - r->str);
      snprintf(text[module], sizeof(text[module]), "%.*s", (int)n, r->str);
      freeReplyObject(r);
      cr_assert_eq(rtt_int(rc, "EXISTS %s %s %s %sera", qkey, hkey, mkey, chan),
                   0, "%s wrote before refusing", module ? "module" : "script");
    }
    cr_assert_str_eq(text[1], text[0]);
    cr_assert(strstr(text[0], "failover hold") != NULL, "%s", text[0]);
  }
  for (int module = 1; module >= 0; module--) {
    names(module ? "hold-max-1" : "hold-max-0");
    set_prefix("1/1000000000000000");
    redisReply *r =
        call(rc, module, RT__SCRIPT_ENQUEUE, CA ":1", "5000", "0", NULL);
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s", r->str);
    cr_assert_eq(r->element[0]->integer, QUEUED, "held off: not granted");
    freeReplyObject(r);
  }
}

/* ---- pool resources: semaphores, read-write locks, elections ---------- */

#define SEM "s:3"

/* pair_start, both sides' keyspace events watched, clients CA up to
 * (not including) client `upto` subscribed, and the election's observers
 * if `observers`. */
static void pair_watched(const char *res, const char *epoch_part, int upto,
                         int observers) {
  pair_start(res, epoch_part);
  side *both[] = {&mod, &lua};
  for (int i = 0; i < 2; i++) {
    watch_events(both[i]);
    for (int w = 0; w < upto; w++)
      subscribe(both[i], w);
    if (observers) {
      both[i]->obs = rtt_redis_at(both[i]->p.srv.port);
      freeReplyObject(rtt_cmd(both[i]->obs, "SSUBSCRIBE %s", ochan));
    }
  }
}

Test(module, a_semaphore_queues_grants_cancels_and_hands_on_as_the_scripts) {
  pair_watched("sem", NULL, 4, 0);
  enum { P = RT__SCRIPT_POOL_ENQUEUE };
  cr_assert_eq(STEP_AT(0, P, CA ":1", "4000", "0", "", SEM, "2"), GRANTED);
  cr_assert_eq(STEP_AT(0, P, CA ":1", "4000", "1", "", SEM, "2"), GRANTED,
               "a retry of the holder");
  cr_assert_eq(STEP_AT(1, P, CB ":1", "2000", "0", "lab:el", SEM, "2"), 1);
  cr_assert_eq(STEP_AT(1, P, CC ":7", "9000", "0", "", SEM, "1"), 2,
               "the free permit waits behind B (FIFO)");
  cr_assert_eq(STEP_AT(1, P, CD ":1", "3000", "0", "d", SEM, "0"), 3);
  cr_assert_eq(STEP_AT(1, P, CB ":1", "2000", "1", "lab:el", SEM, "2"), 1,
               "a retried waiter keeps its place");
  STEP(RT__SCRIPT_POOL_INSPECT, "10", SEM);
  STEP(RT__SCRIPT_POOL_INSPECT, "1", "");
  cr_assert_eq(STEP_AT(0, RT__SCRIPT_POOL_TRY, CE ":1", "1000", "", SEM, "1"),
               0, "busy: others wait");
  cr_assert_eq(STEP_AT(0, RT__SCRIPT_POOL_EXTEND, CA ":1", "8000", SEM), 1);
  cr_assert_eq(STEP_AT(0, RT__SCRIPT_POOL_EXTEND, CB ":1", "8000", SEM), 0);
  STEP(RT__SCRIPT_POOL_REAP, "", SEM);
  cr_assert_eq(STEP_AT(1, RT__SCRIPT_POOL_REAP, CC ":7", SEM), 1);
  cr_assert_eq(STEP_AT(1, RT__SCRIPT_POOL_REAP, CA ":1", SEM), 2);
  cr_assert_eq(STEP_AT(1, RT__SCRIPT_POOL_REAP, CE ":9", SEM), 0);
  /* Out of the kind: other kinds, too many permits, a mutex's call. */
  STEP(P, CE ":1", "1000", "0", "", "rw", "1");
  STEP(P, CE ":1", "1000", "0", "", SEM, "4");
  STEP(P, CE ":1", "1000", "0", "", SEM, "1.5");
  STEP(P, CE ":1", "1000", "0", "", "s:0", "1");
  STEP(RT__SCRIPT_ENQUEUE, CE ":1", "1000", "0");
  STEP(RT__SCRIPT_PROCLAIM, CA ":1", "v", SEM);
  /* Cancel one behind the front, then the front; release the holder: B
   * is granted (a notice), then D (all 3) waits for B. */
  cr_assert_eq(STEP_AT(0, RT__SCRIPT_POOL_RELEASE, CC ":7", SEM), CANCELED);
  cr_assert_eq(STEP_AT(0, RT__SCRIPT_POOL_RELEASE, CE ":1", SEM), 0);
  cr_assert_eq(STEP_AT(0, RT__SCRIPT_POOL_RELEASE, CA ":1", SEM), RELEASED);
  cr_assert_eq(STEP_AT(1, RT__SCRIPT_POOL_REAP, CB ":1", SEM), 2);
  STEP(RT__SCRIPT_POOL_INSPECT, "10", SEM);
  cr_assert_eq(STEP_AT(0, RT__SCRIPT_POOL_RELEASE, CB ":1", SEM), RELEASED);
  cr_assert_eq(STEP_AT(1, RT__SCRIPT_POOL_REAP, CD ":1", SEM), 2);
  cr_assert_eq(STEP_AT(0, RT__SCRIPT_POOL_RELEASE, CD ":1", SEM), RELEASED);
  cr_assert_eq(rtt_int(mod.p.adm, "EXISTS %s %s %s %s", pq, hkey, pm, pd), 0,
               "an idle resource leaves nothing behind");
  cr_assert_eq(STEP_AT(0, RT__SCRIPT_POOL_TRY, CE ":2", "1000", "tl", SEM, "0"),
               GRANTED);
  cr_assert_eq(STEP_AT(0, RT__SCRIPT_POOL_TRY, CE ":2", "1000", "tl", SEM, "0"),
               GRANTED, "a retried try");
  STEP(RT__SCRIPT_POOL_INSPECT, "5", SEM);
}

Test(module,
     a_read_write_lock_reaps_ended_leases_and_dead_waiters_as_the_scripts) {
  pair_watched("rw", NULL, 3, 0); /* D (3) is dead: nobody listens */
  enum { P = RT__SCRIPT_POOL_ENQUEUE };
  /* Readers share, a writer (all permits) waits for them, a reader
   * behind the writer waits too. */
  cr_assert_eq(STEP_AT(0, P, CA ":1", "300", "0", "", "rw", "1"), GRANTED);
  cr_assert_eq(STEP_AT(0, P, CB ":1", "2000", "0", "", "rw", "1"), GRANTED);
  cr_assert_eq(STEP_AT(0, P, CD ":1", "2000", "0", "", "rw", "0"), QUEUED);
  cr_assert_eq(STEP_AT(0, P, CC ":1", "2000", "0", "", "rw", "1"), QUEUED);
  cr_assert_eq(STEP_AT(1, P, CB ":2", "2000", "0", "", "rw", "0"), 3);
  STEP(RT__SCRIPT_POOL_INSPECT, "10", "rw");
  rtt_sleep_ms(400); /* A's lease ends; nobody reaps */
  STEP(RT__SCRIPT_POOL_REAP, "", "rw");
  STEP(RT__SCRIPT_POOL_INSPECT, "10", "rw");
  /* B goes: D (the writer) is dead, dropped when its grant reaches
   * nobody; C is granted, then B's writer waits for it. */
  cr_assert_eq(STEP_AT(0, RT__SCRIPT_POOL_RELEASE, CB ":1", "rw"), RELEASED);
  cr_assert_eq(STEP_AT(1, RT__SCRIPT_POOL_REAP, CC ":1", "rw"), 2);
  cr_assert_eq(STEP_AT(1, RT__SCRIPT_POOL_REAP, CD ":1", "rw"), 0);
  cr_assert_eq(STEP_AT(0, RT__SCRIPT_POOL_EXTEND, CC ":1", "300", "rw"), 1);
  rtt_sleep_ms(400);
  /* An enqueue that finds C's lease ended grants the writer first. */
  cr_assert_eq(STEP_AT(0, P, CA ":2", "2000", "0", "", "rw", "1"), QUEUED);
  cr_assert_eq(STEP_AT(1, RT__SCRIPT_POOL_REAP, CB ":2", "rw"), 2);
  cr_assert_eq(STEP_AT(0, RT__SCRIPT_POOL_TRY, CC ":2", "1000", "", "rw", "1"),
               0);
  cr_assert_eq(STEP_AT(0, RT__SCRIPT_POOL_RELEASE, CB ":2", "rw"), RELEASED);
  cr_assert_eq(STEP_AT(1, RT__SCRIPT_POOL_REAP, CA ":2", "rw"), 2);
  /* A lost D: the holders get h's expiry back as their deadline. */
  for (int i = 0; i < 2; i++)
    rtt_ok((i ? &lua : &mod)->p.adm, "DEL %s", pd);
  STEP(RT__SCRIPT_POOL_INSPECT, "10", "rw");
  STEP(RT__SCRIPT_POOL_REAP, CA ":2", "rw");
  cr_assert_eq(STEP_AT(0, RT__SCRIPT_POOL_RELEASE, CA ":2", "rw"), RELEASED);
}

Test(module, an_election_proclaims_and_tells_its_observers_as_the_scripts) {
  pair_watched("elect", NULL, 3, 1);
  enum { P = RT__SCRIPT_POOL_ENQUEUE };
  cr_assert_eq(STEP_AT(0, P, CA ":1", "4000", "0", "va", "e", "1"), GRANTED);
  cr_assert_eq(STEP_AT(0, P, CB ":1", "4000", "0", "vb", "e", "1"), QUEUED);
  cr_assert_eq(STEP_AT(0, RT__SCRIPT_PROCLAIM, CA ":1", "new:value", "e"), 1);
  cr_assert_eq(STEP_AT(0, RT__SCRIPT_PROCLAIM, CB ":1", "x", "e"), 0);
  STEP(RT__SCRIPT_POOL_INSPECT, "5", "e");
  cr_assert_eq(STEP_AT(0, RT__SCRIPT_POOL_EXTEND, CA ":1", "6000", "e"), 1);
  cr_assert_eq(STEP_AT(0, RT__SCRIPT_POOL_RELEASE, CA ":1", "e"), RELEASED);
  cr_assert_eq(STEP_AT(1, RT__SCRIPT_POOL_REAP, CB ":1", "e"), 2);
  cr_assert_eq(STEP_AT(0, RT__SCRIPT_PROCLAIM, CB ":1", "", "e"), 1);
  cr_assert_eq(STEP_AT(0, RT__SCRIPT_POOL_RELEASE, CB ":1", "e"), RELEASED);
  cr_assert_eq(STEP_AT(0, RT__SCRIPT_POOL_TRY, CC ":1", "300", "vc", "e", "1"),
               GRANTED);
  rtt_sleep_ms(400); /* the leader's lease ends: a reap tells the observers */
  STEP(RT__SCRIPT_POOL_REAP, "", "e");
  STEP(RT__SCRIPT_POOL_INSPECT, "5", "");
}

Test(module, a_pool_resource_held_off_fences_with_its_epoch_as_the_scripts) {
  pair_watched("phold", "3/600", 3, 0);
  enum { P = RT__SCRIPT_POOL_ENQUEUE };
  cr_assert_eq(STEP_AT(0, P, CA ":1", "2000", "0", "", "s:2", "1"), QUEUED);
  cr_assert_eq(STEP_AT(0, P, CB ":1", "2000", "0", "", "s:2", "1"), QUEUED);
  cr_assert_eq(STEP_AT(0, RT__SCRIPT_POOL_TRY, CC ":1", "2000", "", "s:2", "1"),
               0);
  STEP(RT__SCRIPT_POOL_REAP, CA ":1", "s:2");
  rtt_sleep_ms(700);
  cr_assert_eq(STEP_AT(1, RT__SCRIPT_POOL_REAP, CA ":1", "s:2"), 2);
  cr_assert_eq(STEP_AT(1, RT__SCRIPT_POOL_REAP, CB ":1", "s:2"), 2);
  redisReply *f = rtt_cmd(mod.p.adm, "HGET %s f", hkey);
  cr_assert_geq(atoll(f->str), 3LL << 40, "the epoch's worth is in the fence");
  freeReplyObject(f);
  /* A retry after a "reconnect" starts settling: a waiter that misses
   * its notice now stays. */
  cr_assert_eq(STEP_AT(0, P, CD ":1", "2000", "0", "", "s:2", "1"), QUEUED);
  rtt_ok(mod.p.adm, "HSET %s @ %s", pm, "ffff:0");
  rtt_ok(lua.p.adm, "HSET %s @ %s", pm, "ffff:0");
  cr_assert_eq(STEP_AT(1, P, CD ":1", "2000", "1", "", "s:2", "1"), 1);
  cr_assert_eq(STEP_AT(0, RT__SCRIPT_POOL_RELEASE, CA ":1", "s:2"), RELEASED);
  STEP(RT__SCRIPT_POOL_INSPECT, "3", "s:2");
}

/* Clients on both paths share one semaphore, one read-write lock and one
 * election on one server: FIFO order, rising fences, never more holders
 * than permits, a writer alone. */
Test(module, module_and_script_clients_share_pool_resources_in_fifo_order) {
  need_module();
  side_start(&mod, 1, 1);
  set_prefix(NULL);
  const char *const kinds[] = {"s:2", "rw", "e"};
  const char *const res[] = {"msem", "mrw", "melect"};
  enum { N = 10 };
  char ids[N][48];
  redisContext *subs[N];
  names("msem");
  set_prefix(NULL);
  for (int i = 0; i < N; i++) {
    snprintf(ids[i], sizeof(ids[i]), "%032x:%d", i + 1, i + 1);
    subs[i] = rtt_redis_at(mod.p.srv.port);
    char who[40];
    snprintf(who, sizeof(who), "%032x", i + 1);
    freeReplyObject(rtt_cmd(subs[i], "SSUBSCRIBE %s%s", chan, who));
  }
  for (int k = 0; k < 3; k++) {
    names(res[k]);
    long long cap = k == 0 ? 2 : k == 1 ? 1LL << 40 : 1;
    /* Readers (1) and writers (0: all) alternate on the rw lock. */
    for (int i = 0; i < N; i++) {
      const char *permits = k == 1 && i % 3 == 2 ? "0" : "1";
      redisReply *r = call(mod.p.adm, i % 2, RT__SCRIPT_POOL_ENQUEUE, ids[i],
                           "5000", "0", "", kinds[k], permits, NULL);
      cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s",
                   r->type == REDIS_REPLY_ERROR ? r->str : "");
      freeReplyObject(r);
    }
    long long last = 0;
    int next = 0; /* the next request in enqueue order to be granted */
    for (int round = 0; round < N && next < N; round++) {
      /* Everyone who holds now: a prefix of the enqueue order. */
      redisReply *h = rtt_cmd(mod.p.adm, "HGETALL %s", hkey);
      long long used = 0;
      int holders = 0, writer = 0, first = N;
      for (size_t j = 0; j + 1 < h->elements; j += 2) {
        const char *f = h->element[j]->str;
        if (strlen(f) < 32)
          continue;
        int who = (int)strtol(f + 33, NULL, 10) - 1;
        long long fence = atoll(h->element[j + 1]->str);
        const char *p = strchr(strchr(h->element[j + 1]->str, ':') + 1, ':');
        long long k_ = atoll(p + 1);
        used += k_;
        writer |= k_ == cap && cap > 1;
        holders++;
        if (who < first)
          first = who;
        cr_assert_geq(who, next, "%s: %s holds before its turn", kinds[k], f);
        if (fence > last)
          last = fence;
      }
      freeReplyObject(h);
      cr_assert_leq(used, cap, "%s: %lld permits of %lld in use", kinds[k],
                    used, cap);
      cr_assert(!writer || holders == 1, "%s: a writer is not alone", kinds[k]);
      cr_assert_gt(holders, 0, "%s: round %d, nobody holds", kinds[k], round);
      /* The longest holder releases, on the paths in turn. */
      redisReply *r = call(mod.p.adm, round % 2, RT__SCRIPT_POOL_RELEASE,
                           ids[first], kinds[k], NULL);
      cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s",
                   r->type == REDIS_REPLY_ERROR ? r->str : "");
      cr_assert_eq(r->element[0]->integer, RELEASED);
      freeReplyObject(r);
      redisReply *f = rtt_cmd(mod.p.adm, "HGET %s f", hkey);
      if (f->type == REDIS_REPLY_STRING)
        cr_assert_geq(atoll(f->str), last, "%s: fences rise", kinds[k]);
      freeReplyObject(f);
      next = first + 1;
    }
    /* The rest release in order. */
    for (int i = next; i < N; i++)
      freeReplyObject(call(mod.p.adm, i % 2, RT__SCRIPT_POOL_RELEASE, ids[i],
                           kinds[k], NULL));
    cr_assert_eq(rtt_int(mod.p.adm, "EXISTS %s %s %s %s", pq, hkey, pm, pd), 0,
                 "%s: nothing left", kinds[k]);
  }
  for (int i = 0; i < N; i++)
    rtt_redis_close(subs[i]);
}

/* Calls on a pool resource that change nothing abort no WATCH, on the
 * module as with the scripts; a write does. */
Test(module, pool_calls_that_change_nothing_abort_no_watch) {
  need_module();
  side_start(&mod, 1, 1);
  redisContext *rc = mod.p.adm;
  redisContext *w = rtt_redis_at(mod.p.srv.port);
  subscribe(&mod, 1);
  for (int module = 1; module >= 0; module--) {
    names(module ? "pwatch-mod" : "pwatch-lua");
    set_prefix(NULL);
    const char *const ks[] = {"s:1", "rw", "e"};
    for (int k = 0; k < 3; k++) {
      const char *kind = ks[k];
      rtt_ok(rc, "DEL %s %s %s %s", pq, hkey, pm, pd);
      redisReply *r = call(rc, module, RT__SCRIPT_POOL_ENQUEUE, CA ":1",
                           "60000", "0", "", kind, "0", NULL);
      cr_assert_eq(r->element[0]->integer, GRANTED);
      freeReplyObject(r);
      r = call(rc, module, RT__SCRIPT_POOL_ENQUEUE, CB ":1", "60000", "0", "",
               kind, "1", NULL);
      cr_assert_eq(r->element[0]->integer, QUEUED);
      freeReplyObject(r);
      const char *path = module ? "module" : "script";
      for (int step = 0; step < 8; step++) {
        rtt_ok(w, "WATCH %s %s %s %s", pq, hkey, pm, pd);
        if (step == 0)
          r = call(rc, module, RT__SCRIPT_POOL_REAP, "", kind, NULL);
        else if (step == 1)
          r = call(rc, module, RT__SCRIPT_POOL_REAP, CB ":1", kind, NULL);
        else if (step == 2)
          r = call(rc, module, RT__SCRIPT_POOL_ENQUEUE, CA ":1", "60000", "1",
                   "", kind, "0", NULL);
        else if (step == 3)
          r = call(rc, module, RT__SCRIPT_POOL_ENQUEUE, CB ":1", "60000", "1",
                   "", kind, "1", NULL);
        else if (step == 4)
          r = call(rc, module, RT__SCRIPT_POOL_RELEASE, CC ":1", kind, NULL);
        else if (step == 5)
          r = call(rc, module, RT__SCRIPT_POOL_EXTEND, CC ":1", "1000", kind,
                   NULL);
        else if (step == 6)
          r = call(rc, module, RT__SCRIPT_PROCLAIM, CB ":1", "v", kind, NULL);
        else
          r = call(rc, module, RT__SCRIPT_POOL_INSPECT, "10", kind, NULL);
        cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s %s step %d: %s", path,
                     kind, step, r->str);
        freeReplyObject(r);
        rtt_ok(w, "MULTI");
        freeReplyObject(rtt_cmd(w, "PING"));
        r = rtt_cmd(w, "EXEC");
        cr_assert_eq(r->type, REDIS_REPLY_ARRAY,
                     "%s %s: step %d aborted the transaction", path, kind,
                     step);
        freeReplyObject(r);
      }
      /* A write does abort it. */
      rtt_ok(w, "WATCH %s %s %s %s", pq, hkey, pm, pd);
      freeReplyObject(
          call(rc, module, RT__SCRIPT_POOL_RELEASE, CA ":1", kind, NULL));
      rtt_ok(w, "MULTI");
      freeReplyObject(rtt_cmd(w, "PING"));
      r = rtt_cmd(w, "EXEC");
      cr_assert_eq(r->type, REDIS_REPLY_NIL, "%s %s: a release aborts it", path,
                   kind);
      freeReplyObject(r);
    }
  }
  rtt_redis_close(w);
}

/* Out of memory: on a pool resource a holder's and a waiter's retries, a
 * reap, an extend, a proclaim and a release run, the release hands on;
 * a new request (enqueue, or a try that would take permits) is refused
 * with Redis's OOM error, with nothing written. */
Test(module, out_of_memory_refuses_only_new_pool_requests) {
  mod_start("poom");
  redisContext *rc = mod.p.adm;
  subscribe(&mod, 1);
  enum { P = RT__SCRIPT_POOL_ENQUEUE };
  redisReply *r = call(rc, 1, P, CA ":1", "60000", "0", "", "e", "1", NULL);
  cr_assert_eq(r->element[0]->integer, GRANTED);
  freeReplyObject(r);
  r = call(rc, 1, P, CB ":1", "60000", "0", "", "e", "1", NULL);
  cr_assert_eq(r->element[0]->integer, QUEUED);
  freeReplyObject(r);
  memory_short(rc);
  r = call(rc, 1, P, CC ":1", "60000", "0", "", "e", "1", NULL);
  cr_assert_eq(r->type, REDIS_REPLY_ERROR);
  cr_assert(strncmp(r->str, "OOM ", 4) == 0, "%s", r->str);
  freeReplyObject(r);
  cr_assert_eq(rtt_int(rc, "HEXISTS %s %s", pm, CC ":1"), 0, "not queued");
  cr_assert_eq(rtt_int(rc, "LLEN %s", pq), 1, "nothing written");
  /* A busy try adds nothing: its answer, not an error. */
  r = call(rc, 1, RT__SCRIPT_POOL_TRY, CC ":2", "60000", "", "e", "1", NULL);
  cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s", r->str);
  cr_assert_eq(r->element[0]->integer, 0);
  freeReplyObject(r);
  r = call(rc, 1, P, CA ":1", "60000", "1", "", "e", "1", NULL);
  cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s", r->str);
  cr_assert_eq(r->element[0]->integer, GRANTED, "the holder's retry");
  freeReplyObject(r);
  r = call(rc, 1, P, CB ":1", "60000", "1", "", "e", "1", NULL);
  cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s", r->str);
  cr_assert_eq(r->element[0]->integer, QUEUED, "the waiter's retry");
  freeReplyObject(r);
  r = call(rc, 1, RT__SCRIPT_POOL_REAP, "", "e", NULL);
  cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s", r->str);
  freeReplyObject(r);
  r = call(rc, 1, RT__SCRIPT_POOL_EXTEND, CA ":1", "30000", "e", NULL);
  cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s", r->str);
  cr_assert_eq(r->element[0]->integer, 1);
  freeReplyObject(r);
  r = call(rc, 1, RT__SCRIPT_PROCLAIM, CA ":1", "v", "e", NULL);
  cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s", r->str);
  cr_assert_eq(r->element[0]->integer, 1);
  freeReplyObject(r);
  r = call(rc, 1, RT__SCRIPT_POOL_RELEASE, CA ":1", "e", NULL);
  cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s", r->str);
  cr_assert_eq(r->element[0]->integer, RELEASED);
  freeReplyObject(r);
  one_grant_notice(mod.sub[1], NULL, NULL);
  cr_assert_eq(rtt_int(rc, "HEXISTS %s %s", hkey, CB ":1"), 1, "B holds");
  r = call(rc, 1, RT__SCRIPT_POOL_RELEASE, CB ":1", "e", NULL);
  cr_assert_eq(r->element[0]->integer, RELEASED);
  freeReplyObject(r);
  /* Free now: a try would take it, a new holder: refused. */
  r = call(rc, 1, RT__SCRIPT_POOL_TRY, CC ":3", "60000", "", "e", "1", NULL);
  cr_assert_eq(r->type, REDIS_REPLY_ERROR);
  cr_assert(strncmp(r->str, "OOM ", 4) == 0, "%s", r->str);
  freeReplyObject(r);
  cr_assert_eq(rtt_int(rc, "EXISTS %s", hkey), 0, "nobody holds");
  rtt_ok(rc, "CONFIG SET maxmemory 0");
}

/* Out of memory, a retried pool enqueue of a request Redis does not have
 * (the scripts' pool_enqueue_again, the module's command) is refused
 * before any write: a lease that ended stays for the next call to hand
 * on, and '+' counts it until then (the script handed it on first and
 * left '+' counting its permit: it_diff). */
Test(module, out_of_memory_a_new_retried_pool_request_writes_nothing) {
  mod_start("pnew");
  redisContext *rc = mod.p.adm;
  for (int module = 0; module < 2; module++) {
    int script =
        module ? RT__SCRIPT_POOL_ENQUEUE : RT__SCRIPT_POOL_ENQUEUE_AGAIN;
    redisReply *r =
        call(rc, module, script, CA ":1", "60000", "0", "", "s:2", "1", NULL);
    cr_assert_eq(r->element[0]->integer, GRANTED);
    freeReplyObject(r);
    r = call(rc, module, script, CB ":1", "100", "0", "", "s:2", "1", NULL);
    cr_assert_eq(r->element[0]->integer, GRANTED);
    freeReplyObject(r);
    rtt_sleep_ms(250); /* B's lease ended */
    memory_short(rc);
    r = call(rc, module, script, CC ":1", "60000", "1", "", "s:2", "1", NULL);
    cr_assert_eq(r->type, REDIS_REPLY_ERROR, "module %d", module);
    cr_assert(strncmp(r->str, "OOM ", 4) == 0, "%s", r->str);
    freeReplyObject(r);
    rtt_ok(rc, "CONFIG SET maxmemory 0");
    cr_assert_eq(rtt_int(rc, "HEXISTS %s %s", hkey, CB ":1"), 1,
                 "module %d: written before the refusal", module);
    cr_assert_eq(rtt_int(rc, "ZCARD %s", pd), 2, "module %d", module);
    rtt_int(rc, "DEL %s %s %s %s", pq, hkey, pm, pd);
  }
}

/* Keys that are not one pool resource's Q h M D are refused before any
 * key is opened. */
Test(module, pool_keys_of_another_shape_are_refused_before_any_write) {
  need_module();
  side_start(&mod, 1, 1);
  redisContext *rc = mod.p.adm;
  const char *const bad[][4] = {
      {"rt:{r}:Q", "rt:{r}:h", "rt:{r}:M", "rt:{r}:M"},
      {"rt:{r}:Q", "rt:{r}:h", "rt:{r}:h", "rt:{r}:D"},
      {"rt:{r}:Q", "rt:{r}:Q", "rt:{r}:M", "rt:{r}:D"},
      {"rt:{r}:Q", "rt:{r}:h", "rt:{r}:D", "rt:{r}:M"},
      {"rt:{r}:Q", "rt:{s}:h", "rt:{s}:M", "rt:{s}:D"},
      {"rt:{r}:Q", "rt:{r}:h", "rt:{r}:M", "xx:{r}:D"},
      {"rt:{r}:Q", "rt:{r}:h", "rt:{r}:M", "rt:{r}:DD"},
      {"rt:{r}:q", "rt:{r}:h", "rt:{r}:m", "rt:{r}:D"},
      {"rt:{r}:Q", "rt:{r}:h", "rt:{r}:M", ""},
  };
  const char *const cmds[] = {"redturn.pool_enqueue", "redturn.pool_try",
                              "redturn.pool_release", "redturn.pool_reap",
                              "redturn.pool_extend",  "redturn.pool_inspect",
                              "redturn.proclaim"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    for (size_t j = 0; j < sizeof(cmds) / sizeof(cmds[0]); j++) {
      const char *argv[] = {cmds[j],   "4",   bad[i][0], bad[i][1], bad[i][2],
                            bad[i][3], "c:",  CA ":1",   "60000",   "0",
                            "",        "s:2", "1"};
      size_t lens[13];
      for (int k = 0; k < 13; k++)
        lens[k] = strlen(argv[k]);
      redisReply *r = redisCommandArgv(rc, 13, argv, lens);
      cr_assert_not_null(r);
      cr_assert_eq(r->type, REDIS_REPLY_ERROR, "%s %s %s %s %s: not refused",
                   cmds[j], bad[i][0], bad[i][1], bad[i][2], bad[i][3]);
      cr_assert_not_null(strstr(r->str, "the keys must be <base>:Q <base>:h "
                                        "<base>:M <base>:D"),
                         "%s", r->str);
      freeReplyObject(r);
    }
  cr_assert_eq(rtt_int(rc, "DBSIZE"), 0, "nothing written");
  /* Three keys (a mutex's) are too few. */
  char err[512];
  rtt_err(rc, err, sizeof(err),
          "redturn.pool_reap 3 rt:{r}:Q rt:{r}:h rt:{r}:M c: x s:2");
  cr_assert_not_null(strstr(err, "has 4 keys"), "%s", err);
  cr_assert_eq(rtt_int(rc, "redturn.version"), 2, "the server is alive");
}

/* A name of the library's longest (4096 bytes): a semaphore hands on and
 * an election tells its observers, through the module. */
Test(module, the_longest_name_hands_on_a_pool_resource) {
  need_module();
  side_start(&mod, 1, 1);
  size_t n = 4096, cap = n + 32;
  char *k[4], *o = malloc(cap);
  char *tag = malloc(n + 3);
  tag[0] = '{';
  memset(tag + 1, 'n', n);
  tag[n + 1] = '}';
  tag[n + 2] = '\0';
  for (int i = 0; i < 4; i++) {
    k[i] = malloc(cap);
    snprintf(k[i], cap, "rt:%s:%c", tag, "QhMD"[i]);
  }
  snprintf(o, cap, "rt:%s:o", tag);
  redisContext *rc = rtt_redis_at(mod.p.srv.port);
  redisContext *sub = rtt_redis_at(mod.p.srv.port);
  freeReplyObject(rtt_cmd(sub, "SSUBSCRIBE c:%s", CB));
  redisContext *obs = rtt_redis_at(mod.p.srv.port);
  freeReplyObject(rtt_cmd(obs, "SSUBSCRIBE %s", o));
  const char *const kinds[] = {"s:1", "e"};
  for (int j = 0; j < 2; j++) {
    const char *lab = j ? "leader" : "";
    redisReply *r =
        rtt_cmd(rc, "redturn.pool_enqueue 4 %s %s %s %s c: %s 60000 0 %b %s 1",
                k[0], k[1], k[2], k[3], CA ":1", lab, strlen(lab), kinds[j]);
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s", r->str);
    cr_assert_eq(r->element[0]->integer, GRANTED);
    freeReplyObject(r);
    r = rtt_cmd(rc, "redturn.pool_enqueue 4 %s %s %s %s c: %s 60000 0 b %s 1",
                k[0], k[1], k[2], k[3], CB ":1", kinds[j]);
    cr_assert_eq(r->element[0]->integer, QUEUED);
    freeReplyObject(r);
    r = rtt_cmd(rc, "redturn.pool_release 4 %s %s %s %s c: %s %s", k[0], k[1],
                k[2], k[3], CA ":1", kinds[j]);
    cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "%s", r->str);
    cr_assert_eq(r->element[0]->integer, RELEASED);
    freeReplyObject(r);
    one_grant_notice(sub, tag, kinds[j]); /* it names both */
    cr_assert_eq(rtt_int(rc, "HEXISTS %s %s", k[1], CB ":1"), 1, "B holds");
    r = rtt_cmd(rc, "redturn.pool_release 4 %s %s %s %s c: %s %s", k[0], k[1],
                k[2], k[3], CB ":1", kinds[j]);
    cr_assert_eq(r->element[0]->integer, RELEASED);
    freeReplyObject(r);
  }
  redisReply *got = drain(obs);
  cr_assert_eq(got->elements, 3, "A leads, B leads, nobody leads");
  cr_assert_not_null(strstr(got->element[0]->str, CA ":1:leader"));
  cr_assert_not_null(strstr(got->element[1]->str, CB ":1:b"));
  freeReplyObject(got);
  rtt_redis_close(obs);
  rtt_redis_close(sub);
  rtt_redis_close(rc);
  for (int i = 0; i < 4; i++)
    free(k[i]);
  free(o);
  free(tag);
}

/* Effects on pool resources replicate as commands: a replica without the
 * module ends with the master's keys (holders added, released, reaped,
 * extended, proclaimed; h deleted as a whole). */
Test(module, a_replica_without_the_module_follows_pool_resources) {
  need_module();
  side_start(&mod, 1, 1);
  side_start(&lua, 0, 0); /* the replica */
  set_prefix(NULL);
  replicate(&lua, &mod);
  memcpy(lua.run_id, mod.run_id, sizeof(lua.run_id));
  names("repl");
  subscribe(&mod, 1);
  subscribe(&mod, 2);
  const char *const kinds[] = {"s:2", "rw", "e"};
  enum { P = RT__SCRIPT_POOL_ENQUEUE };
  redisContext *rc = mod.p.adm;
  for (int k = 0; k < 3; k++) {
    char res[16];
    snprintf(res, sizeof(res), "repl%d", k);
    names(res);
    const char *kd = kinds[k];
    freeReplyObject(call(rc, 1, P, CA ":1", "300", "0", "a", kd, "1", NULL));
    freeReplyObject(call(rc, 1, P, CB ":1", "5000", "0", "b", kd, "0", NULL));
    freeReplyObject(call(rc, 1, P, CC ":1", "5000", "0", "", kd, "1", NULL));
    freeReplyObject(
        call(rc, 1, RT__SCRIPT_POOL_EXTEND, CA ":1", "400", kd, NULL));
    freeReplyObject(call(rc, 1, RT__SCRIPT_PROCLAIM, CA ":1", "v", kd, NULL));
    rtt_sleep_ms(500); /* A's lease ends: a reap hands on */
    freeReplyObject(call(rc, 1, RT__SCRIPT_POOL_REAP, "", kd, NULL));
    cr_assert_eq(rtt_int(rc, "WAIT 1 5000"), 1);
    same_keys("replica, held", &mod, &lua);
    freeReplyObject(call(rc, 1, RT__SCRIPT_POOL_RELEASE, CB ":1", kd, NULL));
    freeReplyObject(call(rc, 1, RT__SCRIPT_POOL_RELEASE, CC ":1", kd, NULL));
    cr_assert_eq(rtt_int(rc, "WAIT 1 5000"), 1);
    same_keys("replica, released", &mod, &lua);
    cr_assert_eq(rtt_int(lua.p.adm, "EXISTS %s %s %s %s", pq, hkey, pm, pd), 0,
                 "%s: nothing left on the replica", kd);
  }
}
