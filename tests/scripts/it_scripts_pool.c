/* The pool scripts (semaphores, read-write locks, elections:
 * lua/pool_*.lua, lua/proclaim.lua, lua/lib/pool.lua) called directly
 * with hiredis against a real server: strict FIFO with requests of mixed
 * sizes, reader batches and writer exclusion, a lease per holder, crashed
 * holders and dead waiters, fences, observers of an election, and one
 * resource used as two kinds. */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_scripts.h"
#include "rt_test.h"

static redisContext *rc;
static char qkey[128], hkey[128], mkey[128], dkey[128], chan[128];
static char mq[128], mm[128]; /* the mutex's q and m of the same resource */
static char ochan[128];       /* the resource's observe channel */

static void setup(void) {
  rc = rtt_redis();
  const char *p = rtt_prefix();
  snprintf(qkey, sizeof(qkey), "%s:{res}:Q", p);
  snprintf(hkey, sizeof(hkey), "%s:{res}:h", p);
  snprintf(mkey, sizeof(mkey), "%s:{res}:M", p);
  snprintf(dkey, sizeof(dkey), "%s:{res}:D", p);
  snprintf(mq, sizeof(mq), "%s:{res}:q", p);
  snprintf(mm, sizeof(mm), "%s:{res}:m", p);
  snprintf(ochan, sizeof(ochan), "%s:{res}:o", p);
  snprintf(chan, sizeof(chan), "%s:c:", p);
}

TestSuite(pool, .init = setup, .fini = rtt_cleanup, .timeout = 60);

/* How many arguments a pool script takes before the kind: those of its
 * mutex counterpart (the request id, the lease, ...; lua/pool_*.lua). */
static int args_before_kind(int script) {
  switch (script) {
  case RT__SCRIPT_POOL_ENQUEUE:
    return 4; /* id, lease, retry flag, label */
  case RT__SCRIPT_POOL_TRY:
    return 3; /* id, lease, label */
  case RT__SCRIPT_POOL_EXTEND:
  case RT__SCRIPT_PROCLAIM:
    return 2; /* id, lease or value */
  default:
    return 1; /* release, reap: the id; inspect: how many to list */
  }
}

/* EVAL a pool script on the resource as kind, with the string arguments
 * in ap (those of its mutex counterpart, then the permits where it takes
 * them; the kind goes between, as the scripts take it); returns the
 * reply, which may be an error. */
static redisReply *vcall(int script, const char *kind, va_list ap) {
  const char *argv[20] = {
      "EVAL", rt__scripts[script].body, "4", qkey, hkey, mkey, dkey, chan};
  size_t lens[20];
  int argc = 8, before = args_before_kind(script), n = 0;
  for (const char *a; (a = va_arg(ap, const char *)) != NULL; n++) {
    if (n == before)
      argv[argc++] = kind;
    argv[argc++] = a;
  }
  if (n <= before)
    argv[argc++] = kind;
  for (int i = 0; i < argc; i++)
    lens[i] = i == 1 ? rt__scripts[script].len : strlen(argv[i]);
  redisReply *r = redisCommandArgv(rc, argc, argv, lens);
  cr_assert_not_null(r);
  return r;
}

/* vcall() that must answer an array; the caller frees it. */
static redisReply *call(int script, const char *kind, ...) {
  va_list ap;
  va_start(ap, kind);
  redisReply *r = vcall(script, kind, ap);
  va_end(ap);
  cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "script error: %s",
               r->type == REDIS_REPLY_ERROR ? r->str : "?");
  return r;
}

/* The error text a call answers (fails if it answers anything else). */
static void call_error(char *out, size_t cap, int script, const char *kind,
                       ...) {
  va_list ap;
  va_start(ap, kind);
  redisReply *r = vcall(script, kind, ap);
  va_end(ap);
  cr_assert_eq(r->type, REDIS_REPLY_ERROR, "no error (type %d)", r->type);
  snprintf(out, cap, "%s", r->str);
  freeReplyObject(r);
}

/* A command that answers a number as a string (HGET, ZSCORE). */
static long long num(const char *fmt, const char *a, const char *b) {
  redisReply *r = rtt_cmd(rc, fmt, a, b);
  cr_assert_eq(r->type, REDIS_REPLY_STRING, "%s %s", a, b);
  long long v = atoll(r->str);
  freeReplyObject(r);
  return v;
}

static long long at(const redisReply *r, size_t i) {
  cr_assert_gt(r->elements, i);
  return r->element[i]->integer;
}

/* Element i of a call's answer. */
#define CALL_AT(i, ...)                                                        \
  ({                                                                           \
    redisReply *r_ = call(__VA_ARGS__, NULL);                                  \
    long long v_ = at(r_, i);                                                  \
    freeReplyObject(r_);                                                       \
    v_;                                                                        \
  })

/* enqueue (ttl ms, permits) as kind; returns element 0 (GRANTED/QUEUED). */
static long long enq(const char *kind, const char *id, const char *ttl,
                     const char *permits) {
  return CALL_AT(0, RT__SCRIPT_POOL_ENQUEUE, kind, id, ttl, "0", "", permits);
}

static long long release(const char *kind, const char *id) {
  return CALL_AT(0, RT__SCRIPT_POOL_RELEASE, kind, id);
}

/* A connection subscribed to a shard channel. */
static redisContext *listen_on(const char *channel) {
  redisContext *s = rtt_redis();
  freeReplyObject(rtt_cmd(s, "SSUBSCRIBE %s", channel));
  return s;
}

/* A connection subscribed as client id would be. */
static redisContext *subscriber(const char *client) {
  char c[160];
  snprintf(c, sizeof(c), "%s%s", chan, client);
  return listen_on(c);
}

/* The next message on a subscribed connection; 0 if none came in ms (the
 * connection is unusable then). */
static int next_message_in(redisContext *s, char *out, size_t cap, int ms) {
  struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
  redisSetTimeout(s, tv);
  redisReply *m = NULL;
  if (redisGetReply(s, (void **)&m) != REDIS_OK)
    return 0;
  cr_assert(m->type == REDIS_REPLY_ARRAY && m->elements == 3);
  snprintf(out, cap, "%s", m->element[2]->str);
  freeReplyObject(m);
  return 1;
}

static void next_message(redisContext *s, char *out, size_t cap) {
  cr_assert(next_message_in(s, out, cap, 2000), "no notice came");
}

/* Nothing was published on channel (s listens there) since the last
 * message read: a marker published now is the next message. A read that
 * times out would break the connection, hence the marker. */
static void assert_no_message(redisContext *s, const char *channel) {
  rtt_int(rc, "SPUBLISH %s marker", channel);
  char msg[256];
  next_message(s, msg, sizeof(msg));
  cr_assert_str_eq(msg, "marker", "a notice came: %s", msg);
}

/* The holder ids and the permits in use, from pool_inspect. */
static long long in_use(const char *kind, char (*ids)[RTT_ID_MAX], size_t max,
                        size_t *n) {
  redisReply *r = call(RT__SCRIPT_POOL_INSPECT, kind, "100", NULL);
  cr_assert_eq(r->elements, 14);
  long long used = at(r, 3);
  const redisReply *hid = r->element[6];
  *n = hid->elements;
  for (size_t i = 0; i < hid->elements && i < max; i++)
    snprintf(ids[i], RTT_ID_MAX, "%s", hid->element[i]->str);
  freeReplyObject(r);
  return used;
}

/* Whether id is among the n ids. */
static int has(char (*ids)[RTT_ID_MAX], size_t n, const char *id) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(ids[i], id) == 0)
      return 1;
  return 0;
}

#define CA "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define CB "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define CC "cccccccccccccccccccccccccccccccc"
#define CD "dddddddddddddddddddddddddddddddd"
#define SEM4 "s:4"

enum { QUEUED = 0, GRANTED = 1, RELEASED = 1, CANCELED = 2 };

/* ---- semaphores ------------------------------------------------------------ */

Test(pool, a_large_request_at_the_front_is_not_overtaken_by_small_ones) {
  redisContext *sb = subscriber(CB), *sc = subscriber(CC);
  cr_assert_eq(enq(SEM4, CA ":1", "10000", "3"), GRANTED);
  /* B wants 2 of the 1 left: it waits; C wants 1, which is free, but B is
   * in front of it. */
  redisReply *r =
      call(RT__SCRIPT_POOL_ENQUEUE, SEM4, CB ":1", "10000", "0", "", "2", NULL);
  cr_assert_eq(at(r, 0), QUEUED);
  cr_assert_eq(at(r, 1), 1, "next to be granted");
  cr_assert_gt(at(r, 2), 9000, "told when the lease in front ends");
  freeReplyObject(r);
  cr_assert_eq(enq(SEM4, CC ":1", "10000", "1"), QUEUED,
               "a small request overtook a large one");
  cr_assert_eq(CALL_AT(0, RT__SCRIPT_POOL_TRY, SEM4, CD ":1", "1000", "", "1"),
               0, "try overtook the waiters");
  char ids[8][RTT_ID_MAX];
  size_t n;
  cr_assert_eq(in_use(SEM4, ids, 8, &n), 3);
  cr_assert_eq(n, 1);

  /* A's release lets both in, in one call: 2 + 1 of 4. */
  cr_assert_eq(release(SEM4, CA ":1"), RELEASED);
  char msg[128];
  next_message(sb, msg, sizeof(msg));
  cr_assert_eq(strncmp(msg, "g:1:", 4), 0, "B: %s", msg);
  next_message(sc, msg, sizeof(msg));
  cr_assert_eq(strncmp(msg, "g:1:", 4), 0, "C: %s", msg);
  cr_assert_eq(in_use(SEM4, ids, 8, &n), 3);
  cr_assert(n == 2 && has(ids, n, CB ":1") && has(ids, n, CC ":1"));
  rtt_redis_close(sb);
  rtt_redis_close(sc);
}

Test(pool, permits_in_use_never_exceed_the_count) {
  redisContext *s = subscriber(CB);
  char id[64], ids[16][RTT_ID_MAX];
  size_t n;
  /* Requests of 1..3 permits queue and release in turns; at every step
   * the holders' permits stay within 4. */
  for (int i = 1; i <= 12; i++) {
    snprintf(id, sizeof(id), CB ":%d", i);
    char k[4];
    snprintf(k, sizeof(k), "%d", 1 + i % 3);
    enq(SEM4, id, "10000", k);
    cr_assert_leq(in_use(SEM4, ids, 16, &n), 4);
    if (i % 2 == 0) {
      cr_assert_gt(n, 0);
      cr_assert_eq(release(SEM4, ids[0]), RELEASED);
      cr_assert_leq(in_use(SEM4, ids, 16, &n), 4);
    }
  }
  rtt_redis_close(s);
}

Test(pool, a_request_for_more_permits_than_there_are_is_refused) {
  char err[256];
  call_error(err, sizeof(err), RT__SCRIPT_POOL_ENQUEUE, SEM4, CA ":1", "1000",
             "0", "", "5", NULL);
  cr_assert(strstr(err, "5 permits of a semaphore of 4 permits") != NULL, "%s",
            err);
  call_error(err, sizeof(err), RT__SCRIPT_POOL_ENQUEUE, "s:0", CA ":1", "1000",
             "0", "", "1", NULL);
  cr_assert(strstr(err, "unknown kind") != NULL, "%s", err);
  cr_assert_eq(rtt_int(rc, "EXISTS %s %s %s %s", qkey, hkey, mkey, dkey), 0);
}

/* The permits are checked with the other arguments, before any write: a
 * bad request after D was lost leaves D lost (the next valid call
 * restores it) and a lease that ended unreaped. */
Test(pool, a_bad_permit_count_is_refused_before_any_write) {
  cr_assert_eq(enq("s:2", CA ":1", "20000", "1"), GRANTED);
  cr_assert_eq(enq("s:2", CB ":1", "100", "1"), GRANTED);
  rtt_sleep_ms(250); /* B's lease ended */
  rtt_int(rc, "DEL %s", dkey);
  char err[256];
  call_error(err, sizeof(err), RT__SCRIPT_POOL_TRY, "s:2", CC ":1", "1000", "",
             "3", NULL);
  cr_assert(strstr(err, "3 permits of a semaphore of 2 permits") != NULL, "%s",
            err);
  cr_assert_eq(rtt_int(rc, "EXISTS %s", dkey), 0, "D was written back");
  cr_assert_eq(rtt_int(rc, "HEXISTS %s %s", hkey, CB ":1"), 1,
               "the ended lease was reaped");
}

/* h lost while D lists leases (a forced release: DESIGN.md section 13):
 * a call that finds one of them ended and grants nobody writes h's
 * counters back with no last fence; it failed on it (int(nil)), and so
 * did every call after it until the last lease in D ended. */
Test(pool, a_lost_holder_set_with_leases_listed_fails_no_call) {
  cr_assert_eq(enq("s:3", CA ":1", "20000", "1"), GRANTED);
  cr_assert_eq(enq("s:3", CB ":1", "100", "1"), GRANTED);
  rtt_int(rc, "DEL %s", hkey);
  rtt_sleep_ms(250); /* B's lease ended; A's is still listed in D */
  redisReply *r = call(RT__SCRIPT_POOL_REAP, "s:3", "", NULL);
  cr_assert_gt(at(r, 0), 15000, "A's lease, as D lists it");
  freeReplyObject(r);
  cr_assert_eq(num("HGET %s %s", hkey, "f"), 0);
  r = call(RT__SCRIPT_POOL_ENQUEUE, "s:3", CC ":1", "1000", "0", "", "1", NULL);
  cr_assert_eq(at(r, 0), GRANTED);
  cr_assert_gt(at(r, 1), 0, "a fence from the clock");
  freeReplyObject(r);
}

Test(pool, each_holder_has_its_own_lease_by_the_redis_clock) {
  redisContext *sc = subscriber(CC);
  cr_assert_eq(enq("s:2", CA ":1", "150", "1"), GRANTED); /* crashes */
  cr_assert_eq(enq("s:2", CB ":1", "10000", "1"), GRANTED);
  cr_assert_eq(enq("s:2", CC ":1", "10000", "1"), QUEUED);
  /* Not early: the first lease still runs. */
  redisReply *r = call(RT__SCRIPT_POOL_REAP, "s:2", CC ":1", NULL);
  cr_assert_eq(at(r, 1), 1, "still waiting");
  cr_assert_gt(at(r, 0), 0, "the first lease ends in %lld ms", at(r, 0));
  cr_assert_leq(at(r, 0), 150);
  freeReplyObject(r);
  rtt_sleep_ms(200);
  /* The watchdog's reap after that lease ended grants C; B keeps its own. */
  r = call(RT__SCRIPT_POOL_REAP, "s:2", CC ":1", NULL);
  cr_assert_eq(at(r, 1), 2, "C holds");
  freeReplyObject(r);
  char msg[128], ids[4][RTT_ID_MAX];
  next_message(sc, msg, sizeof(msg));
  cr_assert_eq(msg[0], 'g', "%s", msg);
  size_t n;
  cr_assert_eq(in_use("s:2", ids, 4, &n), 2);
  cr_assert(has(ids, n, CB ":1") && has(ids, n, CC ":1") &&
            !has(ids, n, CA ":1"));
  cr_assert_eq(CALL_AT(0, RT__SCRIPT_POOL_EXTEND, "s:2", CA ":1", "1000"), 0,
               "an ended lease cannot be extended");
  cr_assert_eq(release("s:2", CA ":1"), 0, "an ended lease reads as lost");
  rtt_redis_close(sc);
}

Test(pool, the_keys_expire_with_the_last_lease_when_every_client_is_gone) {
  cr_assert_eq(enq("s:2", CA ":1", "100", "1"), GRANTED);
  cr_assert_eq(enq("s:2", CB ":1", "300", "1"), GRANTED);
  long long ttl = rtt_int(rc, "PTTL %s", hkey);
  cr_assert(ttl > 200 && ttl <= 300, "h expires with the last lease: %lld",
            ttl);
  cr_assert(rtt_int(rc, "PTTL %s", dkey) > 200);
  rtt_sleep_ms(350);
  cr_assert_eq(rtt_int(rc, "EXISTS %s %s %s %s", qkey, hkey, mkey, dkey), 0);
}

Test(pool, an_idle_resource_leaves_no_key_behind) {
  cr_assert_eq(enq(SEM4, CA ":1", "10000", "4"), GRANTED);
  cr_assert_eq(enq(SEM4, CB ":1", "10000", "1"), QUEUED);
  cr_assert_eq(release(SEM4, CB ":1"), CANCELED);
  cr_assert_eq(release(SEM4, CA ":1"), RELEASED);
  cr_assert_eq(rtt_int(rc, "EXISTS %s %s %s %s", qkey, hkey, mkey, dkey), 0);
}

Test(pool, enqueues_are_idempotent_by_request_id) {
  cr_assert_eq(enq(SEM4, CA ":1", "10000", "4"), GRANTED);
  for (int i = 0; i < 3; i++) {
    redisReply *r = call(RT__SCRIPT_POOL_ENQUEUE, SEM4, CB ":1", "1000",
                         i ? "1" : "0", "", "2", NULL);
    cr_assert_eq(at(r, 0), QUEUED);
    cr_assert_eq(at(r, 1), 1);
    freeReplyObject(r);
  }
  cr_assert_eq(rtt_int(rc, "LLEN %s", qkey), 1, "no second entry");
  /* The holder's retry gets its grant back, with the lease left. */
  redisReply *r =
      call(RT__SCRIPT_POOL_ENQUEUE, SEM4, CA ":1", "10000", "1", "", "4", NULL);
  cr_assert_eq(at(r, 0), GRANTED);
  cr_assert_leq(at(r, 2), 10000);
  freeReplyObject(r);
}

Test(pool, a_dead_waiter_is_skipped_at_its_turn_and_when_told_it_is_next) {
  redisContext *sd = subscriber(CD);
  cr_assert_eq(enq(SEM4, CA ":1", "10000", "4"), GRANTED);
  cr_assert_eq(enq(SEM4, CB ":1", "10000", "3"), QUEUED); /* nobody listens */
  cr_assert_eq(enq(SEM4, CC ":1", "10000", "4"), QUEUED); /* nobody listens */
  cr_assert_eq(enq(SEM4, CD ":1", "10000", "2"), QUEUED);
  /* The release grants B (dead: dropped, no fence), then C would not fit
   * and is told it is next (dead: dropped), then D fits. */
  cr_assert_eq(release(SEM4, CA ":1"), RELEASED);
  char msg[128], ids[4][RTT_ID_MAX];
  next_message(sd, msg, sizeof(msg));
  cr_assert_eq(strncmp(msg, "g:1:", 4), 0, "D: %s", msg);
  size_t n;
  cr_assert_eq(in_use(SEM4, ids, 4, &n), 2);
  cr_assert(n == 1 && has(ids, n, CD ":1"));
  cr_assert_eq(rtt_int(rc, "EXISTS %s", qkey), 0, "the queue is empty");
  rtt_redis_close(sd);
}

Test(pool, fences_strictly_increase_within_a_batch_and_across_calls) {
  redisContext *s = subscriber(CB);
  cr_assert_eq(enq("rw", CA ":1", "10000", "0"), GRANTED);
  for (int i = 1; i <= 5; i++) {
    char id[64];
    snprintf(id, sizeof(id), CB ":%d", i);
    cr_assert_eq(enq("rw", id, "10000", "1"), QUEUED);
  }
  long long last = num("HGET %s %s", hkey, "f");
  cr_assert_eq(release("rw", CA ":1"), RELEASED);
  for (int i = 1; i <= 5; i++) {
    char msg[128];
    next_message(s, msg, sizeof(msg));
    unsigned long long fence = 0;
    int seq = 0;
    cr_assert_eq(sscanf(msg, "g:%d:%llu:", &seq, &fence), 2, "%s", msg);
    cr_assert_eq(seq, i, "granted in queue order");
    cr_assert_gt((long long)fence, last, "fence %llu after %lld", fence, last);
    last = (long long)fence;
  }
  /* Every key lost: fences still go up (the server clock). */
  rtt_int(rc, "DEL %s %s %s %s", qkey, hkey, mkey, dkey);
  redisReply *r =
      call(RT__SCRIPT_POOL_ENQUEUE, "rw", CA ":2", "1000", "0", "", "0", NULL);
  cr_assert_eq(at(r, 0), GRANTED);
  cr_assert_gt(at(r, 1), last);
  freeReplyObject(r);
  rtt_redis_close(s);
}

/* ---- read-write locks ---------------------------------------------------------- */

Test(
    pool,
    readers_hold_together_and_a_writer_waits_for_them_and_blocks_readers_behind) {
  redisContext *sc = subscriber(CC), *sd = subscriber(CD);
  cr_assert_eq(enq("rw", CA ":1", "10000", "1"), GRANTED);
  cr_assert_eq(enq("rw", CB ":1", "10000", "1"), GRANTED, "readers share");
  cr_assert_eq(enq("rw", CC ":1", "10000", "0"), QUEUED, "the writer waits");
  cr_assert_eq(enq("rw", CD ":1", "10000", "1"), QUEUED,
               "a reader behind a writer waits");
  cr_assert_eq(enq("rw", CD ":2", "10000", "1"), QUEUED);
  /* The first reader leaves: the writer still waits, told the new first
   * deadline. */
  cr_assert_eq(release("rw", CA ":1"), RELEASED);
  char msg[128], ids[4][RTT_ID_MAX];
  next_message(sc, msg, sizeof(msg));
  cr_assert_eq(msg[0], 'n', "the writer: %s", msg);
  /* The last reader hands over to the writer in one call. */
  cr_assert_eq(release("rw", CB ":1"), RELEASED);
  next_message(sc, msg, sizeof(msg));
  cr_assert_eq(strncmp(msg, "g:1:", 4), 0, "the writer: %s", msg);
  size_t n;
  in_use("rw", ids, 4, &n);
  cr_assert(n == 1 && has(ids, n, CC ":1"), "the writer holds alone");
  next_message(sd, msg, sizeof(msg));
  cr_assert_eq(strncmp(msg, "n:1:", 4), 0, "the reader is next: %s", msg);
  /* The writer hands over to the batch of readers behind it, one call. */
  cr_assert_eq(release("rw", CC ":1"), RELEASED);
  next_message(sd, msg, sizeof(msg));
  cr_assert_eq(strncmp(msg, "g:1:", 4), 0, "reader 1: %s", msg);
  next_message(sd, msg, sizeof(msg));
  cr_assert_eq(strncmp(msg, "g:2:", 4), 0, "reader 2: %s", msg);
  cr_assert_eq(in_use("rw", ids, 4, &n), 2);
  rtt_redis_close(sc);
  rtt_redis_close(sd);
}

Test(pool, a_writer_canceled_at_the_front_lets_the_readers_behind_it_in) {
  redisContext *sd = subscriber(CD);
  cr_assert_eq(enq("rw", CA ":1", "10000", "1"), GRANTED);
  cr_assert_eq(enq("rw", CC ":1", "10000", "0"), QUEUED);
  cr_assert_eq(enq("rw", CD ":1", "10000", "1"), QUEUED);
  cr_assert_eq(release("rw", CC ":1"), CANCELED);
  char msg[128];
  next_message(sd, msg, sizeof(msg));
  cr_assert_eq(strncmp(msg, "g:1:", 4), 0, "the reader: %s", msg);
  rtt_redis_close(sd);
}

Test(pool, a_crashed_writer_is_evicted_after_its_lease_and_readers_go_on) {
  redisContext *sb = subscriber(CB);
  cr_assert_eq(enq("rw", CA ":1", "100", "0"), GRANTED);
  cr_assert_eq(enq("rw", CB ":1", "10000", "1"), QUEUED);
  cr_assert_eq(enq("rw", CB ":2", "10000", "1"), QUEUED);
  rtt_sleep_ms(150);
  /* A new reader's enqueue finds the ended lease: the queue goes first. */
  cr_assert_eq(enq("rw", CC ":1", "10000", "1"), GRANTED);
  char msg[128], ids[4][RTT_ID_MAX];
  next_message(sb, msg, sizeof(msg));
  cr_assert_eq(strncmp(msg, "g:1:", 4), 0, "%s", msg);
  next_message(sb, msg, sizeof(msg));
  cr_assert_eq(strncmp(msg, "g:2:", 4), 0, "%s", msg);
  size_t n;
  cr_assert_eq(in_use("rw", ids, 4, &n), 3);
  rtt_redis_close(sb);
}

/* ---- kinds ---------------------------------------------------------------------- */

Test(pool, one_resource_is_one_kind_at_a_time) {
  char err[256];
  cr_assert_eq(enq(SEM4, CA ":1", "10000", "1"), GRANTED);
  /* The mutex's scripts meet the semaphore's HASH at h. */
  const char *argv[] = {"EVAL", rt__scripts[RT__SCRIPT_ENQUEUE].body,
                        "3",    mq,
                        hkey,   mm,
                        chan,   CB ":1",
                        "1000", "0",
                        ""};
  size_t lens[11];
  for (int i = 0; i < 11; i++)
    lens[i] = i == 1 ? rt__scripts[RT__SCRIPT_ENQUEUE].len : strlen(argv[i]);
  redisReply *r = redisCommandArgv(rc, 11, argv, lens);
  cr_assert_eq(r->type, REDIS_REPLY_ERROR);
  cr_assert_eq(strncmp(r->str,
                       "WRONGKIND the resource is a semaphore of 4 permits, "
                       "not a mutex",
                       63),
               0, "%s", r->str);
  freeReplyObject(r);
  call_error(err, sizeof(err), RT__SCRIPT_POOL_ENQUEUE, "s:8", CB ":1", "1000",
             "0", "", "1", NULL);
  cr_assert(strstr(err, "WRONGKIND the resource is a semaphore of 4 permits, "
                        "not a semaphore of 8 permits") == err,
            "%s", err);
  call_error(err, sizeof(err), RT__SCRIPT_POOL_ENQUEUE, "rw", CB ":1", "1000",
             "0", "", "1", NULL);
  cr_assert(strstr(err, "not a read-write lock") != NULL, "%s", err);
  cr_assert_eq(release(SEM4, CA ":1"), RELEASED);

  /* A mutex holds it: the pool scripts refuse. */
  rtt_ok(rc, "SET %s 1:99999999999999:1:" CA ":9 PX 10000", hkey);
  call_error(err, sizeof(err), RT__SCRIPT_POOL_ENQUEUE, "rw", CB ":1", "1000",
             "0", "", "1", NULL);
  cr_assert(strstr(err, "WRONGKIND the resource is a mutex, not a read-write "
                        "lock") == err,
            "%s", err);
  rtt_int(rc, "DEL %s", hkey);
  /* A waiter keeps the kind while nobody holds (M has it). */
  cr_assert_eq(enq("e", CA ":1", "100", "1"), GRANTED);
  cr_assert_eq(enq("e", CB ":1", "10000", "1"), QUEUED);
  rtt_int(rc, "DEL %s", hkey);
  call_error(err, sizeof(err), RT__SCRIPT_POOL_ENQUEUE, SEM4, CC ":1", "1000",
             "0", "", "1", NULL);
  cr_assert(strstr(err, "the resource is an election") != NULL, "%s", err);
  /* A hash that is not ours is the WRONGTYPE it always was. */
  rtt_int(rc, "DEL %s %s %s %s", qkey, hkey, mkey, dkey);
  rtt_int(rc, "HSET %s x y", hkey);
  r = redisCommandArgv(rc, 11, argv, lens);
  cr_assert(r->type == REDIS_REPLY_ERROR && strstr(r->str, "WRONGTYPE"), "%s",
            r->str);
  freeReplyObject(r);
}

/* ---- elections ---------------------------------------------------------------- */

Test(pool, observers_see_every_leader_change_in_order) {
  redisContext *obs = listen_on(ochan), *sb = subscriber(CB);
  char msg[256];
  redisReply *r = call(RT__SCRIPT_POOL_ENQUEUE, "e", CA ":1", "10000", "0",
                       "host-a:80", "1", NULL);
  cr_assert_eq(at(r, 0), GRANTED);
  long long fa = at(r, 1);
  freeReplyObject(r);
  next_message(obs, msg, sizeof(msg));
  char want[256];
  long long d = num("ZSCORE %s %s", dkey, CA ":1");
  snprintf(want, sizeof(want), "o:%lld:%lld:" CA ":1:host-a:80", fa, d);
  cr_assert_str_eq(msg, want);
  /* A candidate waits; proclaim changes the leader's value. */
  cr_assert_eq(CALL_AT(0, RT__SCRIPT_POOL_ENQUEUE, "e", CB ":1", "10000", "0",
                       "host-b", "1"),
               QUEUED);
  assert_no_message(obs, ochan); /* a waiting candidate is no change */
  cr_assert_eq(CALL_AT(0, RT__SCRIPT_PROCLAIM, "e", CA ":1", "host-a:81"), 1);
  next_message(obs, msg, sizeof(msg));
  snprintf(want, sizeof(want), "o:%lld:%lld:" CA ":1:host-a:81", fa, d);
  cr_assert_str_eq(msg, want);
  cr_assert_eq(CALL_AT(0, RT__SCRIPT_PROCLAIM, "e", CB ":1", "x"), 0,
               "only the leader proclaims");
  /* Resign: the candidate leads. */
  cr_assert_eq(release("e", CA ":1"), RELEASED);
  next_message(obs, msg, sizeof(msg));
  cr_assert(strstr(msg, ":" CB ":1:host-b") != NULL, "%s", msg);
  long long fb = 0;
  cr_assert_eq(sscanf(msg, "o:%lld:", &fb), 1);
  cr_assert_gt(fb, fa);
  next_message(sb, msg, sizeof(msg));
  cr_assert_eq(msg[0], 'g');
  /* The last leader resigns: nobody leads. */
  cr_assert_eq(release("e", CB ":1"), RELEASED);
  next_message(obs, msg, sizeof(msg));
  snprintf(want, sizeof(want), "o:%lld:0::", fb);
  cr_assert_str_eq(msg, want);
  rtt_redis_close(obs);
  rtt_redis_close(sb);
}

Test(pool, a_leader_whose_lease_ended_is_replaced_and_observers_are_told) {
  redisContext *obs = listen_on(ochan), *sb = subscriber(CB);
  char msg[256];
  cr_assert_eq(enq("e", CA ":1", "100", "1"), GRANTED);
  next_message(obs, msg, sizeof(msg));
  cr_assert_eq(enq("e", CB ":1", "10000", "1"), QUEUED);
  rtt_sleep_ms(150);
  redisReply *r = call(RT__SCRIPT_POOL_REAP, "e", CB ":1", NULL);
  cr_assert_eq(at(r, 1), 2, "the candidate leads");
  freeReplyObject(r);
  next_message(obs, msg, sizeof(msg));
  cr_assert(strstr(msg, ":" CB ":1:") != NULL, "%s", msg);
  assert_no_message(obs, ochan); /* one change, one notice */
  /* A reader of the election sees the same leader. */
  r = call(RT__SCRIPT_POOL_INSPECT, "", "10", NULL);
  cr_assert_str_eq(r->element[1]->str, "e");
  cr_assert_eq(r->element[6]->elements, 1);
  cr_assert_str_eq(r->element[6]->element[0]->str, CB ":1");
  freeReplyObject(r);
  rtt_redis_close(obs);
  rtt_redis_close(sb);
}

/* ---- inspect ------------------------------------------------------------------ */

Test(pool, inspect_lists_holders_and_waiters_with_their_permits) {
  cr_assert_eq(CALL_AT(0, RT__SCRIPT_POOL_ENQUEUE, SEM4, CA ":1", "10000", "0",
                       "lab-a", "3"),
               GRANTED);
  cr_assert_eq(
      CALL_AT(0, RT__SCRIPT_POOL_ENQUEUE, SEM4, CB ":1", "10000", "0", "", "2"),
      QUEUED);
  redisReply *r = call(RT__SCRIPT_POOL_INSPECT, "", "10", NULL);
  cr_assert_eq(r->elements, 14);
  cr_assert_str_eq(r->element[1]->str, SEM4);
  cr_assert_eq(at(r, 2), 4, "capacity");
  cr_assert_eq(at(r, 3), 3, "in use");
  cr_assert_gt(at(r, 4), 0, "last fence");
  cr_assert_eq(at(r, 5), 1, "live waiters");
  cr_assert_str_eq(r->element[6]->element[0]->str, CA ":1");
  cr_assert_eq(r->element[7]->element[0]->integer, 3);
  cr_assert_eq((long long)r->element[8]->element[0]->integer, at(r, 4));
  cr_assert_str_eq(r->element[10]->element[0]->str, "lab-a");
  cr_assert_str_eq(r->element[11]->element[0]->str, CB ":1");
  cr_assert_eq(r->element[12]->element[0]->integer, 2);
  cr_assert_str_eq(r->element[13]->element[0]->str, "");
  freeReplyObject(r);
}

/* ---- try, extend, lost keys, bounded work ------------------------------------- */

Test(pool, try_takes_free_permits_only_when_nobody_waits) {
  cr_assert_eq(CALL_AT(0, RT__SCRIPT_POOL_TRY, SEM4, CA ":1", "10000", "", "2"),
               GRANTED);
  cr_assert_eq(CALL_AT(0, RT__SCRIPT_POOL_TRY, SEM4, CB ":1", "10000", "", "2"),
               GRANTED, "2 + 2 of 4");
  redisReply *r =
      call(RT__SCRIPT_POOL_TRY, SEM4, CC ":1", "1000", "", "1", NULL);
  cr_assert_eq(at(r, 0), 0, "busy");
  cr_assert_gt(at(r, 1), 9000, "when the first lease ends");
  freeReplyObject(r);
  cr_assert_eq(CALL_AT(0, RT__SCRIPT_POOL_TRY, SEM4, CA ":1", "10000", "", "2"),
               GRANTED, "a retried try that was granted");
  cr_assert_eq(rtt_int(rc, "EXISTS %s", qkey), 0, "try never queues");
}

Test(pool, extend_sets_one_holders_lease_and_keeps_the_keys_alive) {
  cr_assert_eq(enq(SEM4, CA ":1", "200", "1"), GRANTED);
  cr_assert_eq(enq(SEM4, CB ":1", "200", "1"), GRANTED);
  redisReply *r = call(RT__SCRIPT_POOL_EXTEND, SEM4, CA ":1", "5000", NULL);
  cr_assert_eq(at(r, 0), 1);
  cr_assert_eq(at(r, 1), 5000);
  freeReplyObject(r);
  cr_assert_gt(rtt_int(rc, "PTTL %s", hkey), 4000, "h lives with A's lease");
  rtt_sleep_ms(300);
  char ids[4][RTT_ID_MAX];
  size_t n;
  cr_assert_eq(in_use(SEM4, ids, 4, &n), 1, "B's lease ended, A's runs");
  cr_assert(n == 1 && has(ids, n, CA ":1"));
  cr_assert_eq(CALL_AT(0, RT__SCRIPT_POOL_EXTEND, SEM4, CB ":1", "5000"), 0);
}

Test(pool, a_lost_deadline_set_never_frees_permits_while_a_lease_may_run) {
  cr_assert_eq(enq("s:1", CA ":1", "10000", "1"), GRANTED);
  rtt_int(rc, "DEL %s", dkey);
  /* h still has the holder and its expiry: the permit stays taken. */
  cr_assert_eq(CALL_AT(0, RT__SCRIPT_POOL_TRY, "s:1", CB ":1", "1000", "", "1"),
               0, "a permit was granted twice");
  redisReply *r = call(RT__SCRIPT_POOL_ENQUEUE, "s:1", CA ":1", "10000", "1",
                       "", "1", NULL);
  cr_assert_eq(at(r, 0), GRANTED, "the holder's retry still finds it");
  cr_assert_gt(at(r, 2), 9000, "with the lease h's expiry bounds");
  freeReplyObject(r);
}

/* The case: after D was lost, a short lease granted beside a long
 * one must not bring h's expiry (and with it the long holder's permits)
 * forward to the short lease's end. */
static void short_lease_after_lost_deadlines(const char *kind, const char *held,
                                             const char *short_one,
                                             const char *asked) {
  cr_assert_eq(enq(kind, CB ":1", "20000", held), GRANTED);
  rtt_int(rc, "DEL %s", dkey);
  cr_assert_eq(enq(kind, CA ":1", "1000", short_one), GRANTED);
  cr_assert_gt(rtt_int(rc, "PTTL %s", hkey), 15000,
               "h's expiry fell below the long lease");
  rtt_sleep_ms(1300); /* the short lease has ended */
  cr_assert_eq(enq(kind, CC ":1", "1000", asked), QUEUED,
               "granted beside a holder with 18 s of lease left");
  /* The long holder is still one, with its lease bounded by h's expiry
   * (its deadline was lost with D, so the bound may be later, never
   * earlier). */
  redisReply *r = call(RT__SCRIPT_POOL_ENQUEUE, kind, CB ":1", "20000", "1", "",
                       held, NULL);
  cr_assert_eq(at(r, 0), GRANTED, "the long holder lost its permits");
  cr_assert_gt(at(r, 2), 17000);
  freeReplyObject(r);
  cr_assert_eq(release(kind, CB ":1"), 1);
}

Test(pool, a_short_lease_after_a_lost_deadline_set_frees_no_other_permit) {
  short_lease_after_lost_deadlines("s:3", "1", "1", "3");
}

Test(pool, a_short_reader_after_a_lost_deadline_set_lets_no_writer_in) {
  short_lease_after_lost_deadlines("rw", "1", "1", "0");
}

Test(pool, a_leader_whose_deadline_was_lost_still_proclaims_and_leads) {
  cr_assert_eq(enq("e", CB ":1", "20000", "1"), GRANTED);
  rtt_int(rc, "DEL %s", dkey);
  /* A read before any call wrote: the leader is still listed (observers
   * read with pool_inspect), with h's expiry as its deadline. */
  char ids[2][RTT_ID_MAX];
  size_t n;
  cr_assert_eq(in_use("e", ids, 2, &n), 1);
  cr_assert(n == 1 && has(ids, n, CB ":1"), "the leader vanished from a read");
  redisReply *r =
      call(RT__SCRIPT_PROCLAIM, "e", CB ":1", "v2", NULL); /* needs D */
  cr_assert_eq(at(r, 0), 1);
  freeReplyObject(r);
  cr_assert_eq(enq("e", CC ":1", "1000", "1"), QUEUED, "two leaders");
}

/* A retried enqueue (or try) of a holder, after another holder's lease
 * ended: the permits of the ended lease are freed by that call as by any
 * other, so '+' counts only the leases that run and the next request fits
 * (the protocol model's trail: a grant reply lost, a short lease ending,
 * the retry). */
static void retry_of_a_holder_frees_ended_permits(int try) {
  cr_assert_eq(enq("s:2", CB ":1", "20000", "1"), GRANTED);
  cr_assert_eq(enq("s:2", CA ":1", "100", "1"), GRANTED);
  rtt_sleep_ms(250); /* A's lease ended; nothing ran since */
  if (try)
    cr_assert_eq(
        CALL_AT(0, RT__SCRIPT_POOL_TRY, "s:2", CB ":1", "20000", "", "1"),
        GRANTED, "the retried try");
  else
    cr_assert_eq(CALL_AT(0, RT__SCRIPT_POOL_ENQUEUE, "s:2", CB ":1", "20000",
                         "1", "", "1"),
                 GRANTED, "the retried enqueue");
  cr_assert_eq(num("HGET %s %s", hkey, "+"), 1,
               "'+' still counts the permit of the lease that ended");
  cr_assert_eq(CALL_AT(0, RT__SCRIPT_POOL_TRY, "s:2", CC ":1", "1000", "", "1"),
               GRANTED, "1 of 2 permits is free");
}

Test(pool, a_retried_enqueue_of_a_holder_frees_the_permits_of_ended_leases) {
  retry_of_a_holder_frees_ended_permits(0);
}

Test(pool, a_retried_try_of_a_holder_frees_the_permits_of_ended_leases) {
  retry_of_a_holder_frees_ended_permits(1);
}

Test(pool, a_batch_of_readers_is_granted_a_bounded_number_per_call) {
  enum { READERS = 150 };
  redisContext *s = subscriber(CB);
  cr_assert_eq(enq("rw", CA ":1", "10000", "0"), GRANTED);
  for (int i = 1; i <= READERS; i++) {
    char id[64];
    snprintf(id, sizeof(id), CB ":%d", i);
    cr_assert_eq(enq("rw", id, "10000", "1"), QUEUED);
  }
  redisReply *r = call(RT__SCRIPT_POOL_RELEASE, "rw", CA ":1", NULL);
  cr_assert_eq(at(r, 0), RELEASED);
  cr_assert_eq(at(r, 1), 1, "more: the caller reaps for the rest");
  freeReplyObject(r);
  char ids[4][RTT_ID_MAX];
  size_t n;
  cr_assert_eq(in_use("rw", ids, 4, &n), 100);
  r = call(RT__SCRIPT_POOL_REAP, "rw", "", NULL);
  cr_assert_eq(at(r, 4), 0, "done");
  freeReplyObject(r);
  cr_assert_eq(in_use("rw", ids, 4, &n), READERS);
  rtt_redis_close(s);
}
