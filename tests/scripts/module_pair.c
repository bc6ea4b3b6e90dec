/* The side-by-side harness of it_module and it_module_pool
 * (module_pair.h): two servers, the module's and the scripts', the same
 * calls on both, and their replies, notices, events and keys compared. */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "module_pair.h"
#include "rt_scripts.h"

static const char *const module_args[] = {"--loadmodule", RTT_MODULE_PATH,
                                          NULL};

void need_module(void) {
  if (RTT_MODULE_PATH[0] == '\0')
    cr_skip_test("the module is not built (REDTURN_MODULE=OFF)");
}

const char *const clients[5] = {CA, CB, CC, CD, CE};

void info_field(redisContext *rc, const char *field, char *out, size_t cap) {
  redisReply *r = rtt_cmd(rc, "INFO");
  const char *f = strstr(r->str, field);
  cr_assert_not_null(f, "INFO has no %s", field);
  f += strlen(field) + 1;
  size_t n = strcspn(f, "\r\n");
  snprintf(out, cap, "%.*s", (int)n, f);
  freeReplyObject(r);
}

void side_start_with(side *s, int module, const char *const *extra) {
  memset(s, 0, sizeof(*s));
  s->module = module;
  rtt_private_start(&s->p, extra);
  info_field(s->p.adm, "run_id", s->run_id, sizeof(s->run_id));
  info_field(s->p.adm, "master_replid", s->replid, sizeof(s->replid));
}

void side_start(side *s, int module, int load) {
  side_start_with(s, module, load ? module_args : NULL);
}

/* Whether the AOF files of s hold text (waits up to 3 s for it). */
int aof_has(const side *s, const char *text) {
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
char qkey[96], hkey[96], mkey[96], chan[96];
char pq[96], pm[96], pd[96], ochan[96];

void names(const char *res) {
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

void subscribe(side *s, int who) {
  s->sub[who] = rtt_redis_at(s->p.srv.port);
  freeReplyObject(rtt_cmd(s->sub[who], "SSUBSCRIBE %s%s", chan, clients[who]));
}

/* ARGV[1]: the channel prefix, maybe with "\0<epoch part>". */
char prefix_arg[128];
size_t prefix_len;

void set_prefix(const char *epoch_part) {
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

redisReply *call(redisContext *rc, int module, int script, ...) {
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
redisReply *drain(redisContext *s) {
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
void one_grant_notice(redisContext *sub, const char *has, const char *has2) {
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
void watch_events(side *s) {
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
void same_keys(const char *what, side *a, side *b) {
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
redisReply *step(side *a, side *b, int script, ...) {
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

/* Two servers: the module's and the scripts' (no module loaded there). */
side mod, lua;

/* The module's server alone, on resource res (ARGV[1] without an epoch). */
void mod_start(const char *res) {
  need_module();
  side_start(&mod, 1, 1);
  names(res);
  set_prefix(NULL);
}

void pair_start(const char *res, const char *epoch_part) {
  need_module();
  side_start(&mod, 1, 1);
  side_start(&lua, 0, 0);
  names(res);
  set_prefix(epoch_part);
}

/* Make replica a replica of master and wait until it has synced. */
void replicate(side *replica, const side *master) {
  rtt_ok(replica->p.adm, "REPLICAOF 127.0.0.1 %d", master->p.srv.port);
  char link[16] = "";
  for (uint64_t until = rtt_now_ms() + 10000;
       strcmp(link, "up") != 0 && rtt_now_ms() < until; rtt_sleep_ms(50))
    info_field(replica->p.adm, "master_link_status", link, sizeof(link));
  cr_assert_str_eq(link, "up", "the replica never synced");
}

/* maxmemory below what is used, noeviction: nothing is evicted, every
 * deny-oom command is refused. */
void memory_short(redisContext *rc) {
  rtt_ok(rc, "CONFIG SET maxmemory-policy noeviction");
  char used[32];
  info_field(rc, "used_memory", used, sizeof(used));
  rtt_ok(rc, "CONFIG SET maxmemory %lld", atoll(used) / 2);
  redisReply *r = rtt_cmd(rc, "SET fill x");
  cr_assert_eq(r->type, REDIS_REPLY_ERROR, "memory is short");
  cr_assert(strncmp(r->str, "OOM", 3) == 0, "%s", r->str);
  freeReplyObject(r);
}
