/* The Lua scripts themselves, called directly with hiredis: the protocol's
 * rules under conditions that are hard to time through the client (expired
 * leases met by retries, lost keys, dead and canceled entries, observers on
 * the channels) are set up here exactly. */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_scripts.h"
#include "rt_test.h"

static redisContext *rc;
static char qkey[128], hkey[128], mkey[128], chan[128];

static void setup(void) {
  rc = rtt_redis();
  snprintf(qkey, sizeof(qkey), "%s:{res}:q", rtt_prefix());
  snprintf(hkey, sizeof(hkey), "%s:{res}:h", rtt_prefix());
  snprintf(mkey, sizeof(mkey), "%s:{res}:m", rtt_prefix());
  snprintf(chan, sizeof(chan), "%s:c:", rtt_prefix());
}

/* rtt_cleanup() closes rc too. */
TestSuite(scripts, .init = setup, .fini = rtt_cleanup, .timeout = 60);

/* EVAL script with the resource's keys and channel prefix, then the
 * string arguments in ap. */
static redisReply *veval(int script, va_list ap) {
  const char *argv[16] = {
      "EVAL", rt__scripts[script].body, "3", qkey, hkey, mkey, chan};
  size_t lens[16] = {4,
                     rt__scripts[script].len,
                     1,
                     strlen(qkey),
                     strlen(hkey),
                     strlen(mkey),
                     strlen(chan)};
  int argc = 7;
  for (const char *a; (a = va_arg(ap, const char *)) != NULL; argc++) {
    argv[argc] = a;
    lens[argc] = strlen(a);
  }
  redisReply *r = redisCommandArgv(rc, argc, argv, lens);
  cr_assert_not_null(r);
  cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "script error: %s",
               r->type == REDIS_REPLY_ERROR ? r->str : "?");
  return r;
}

/* veval() with NULL-terminated arguments; the caller frees the answer. */
static redisReply *eval(int script, ...) {
  va_list ap;
  va_start(ap, script);
  redisReply *r = veval(script, ap);
  va_end(ap);
  return r;
}

/* eval() for its effect only. */
static void run(int script, ...) {
  va_list ap;
  va_start(ap, script);
  freeReplyObject(veval(script, ap));
  va_end(ap);
}

static long long at(const redisReply *r, size_t i) {
  cr_assert_gt(r->elements, i);
  return r->element[i]->integer;
}

/* Run a script and return element i of its answer. */
#define EVAL_AT(i, ...)                                                        \
  ({                                                                           \
    redisReply *r_ = eval(__VA_ARGS__, NULL);                                  \
    long long v_ = at(r_, i);                                                  \
    freeReplyObject(r_);                                                       \
    v_;                                                                        \
  })

static long long llen(void) { return rtt_int(rc, "LLEN %s", qkey); }

/* Live waiters: members of m but its '#' and '@' fields. */
static long long members(void) {
  return rtt_int(rc, "HLEN %s", mkey) - rtt_int(rc, "HEXISTS %s #", mkey) -
         rtt_int(rc, "HEXISTS %s @", mkey);
}

/* The server rc talks to: the shared one, or a test's own. */
static int port;

/* A connection subscribed (shard channel) as client id would be. */
static redisContext *subscriber(const char *client) {
  redisContext *s = port != 0 ? rtt_redis_at(port) : rtt_redis();
  freeReplyObject(rtt_cmd(s, "SSUBSCRIBE %s%s", chan, client));
  return s;
}

/* The next message on a subscribed connection (fails after 2 s). */
static void next_message(redisContext *s, char *out, size_t cap) {
  struct timeval tv = {2, 0};
  redisSetTimeout(s, tv);
  redisReply *m = NULL;
  cr_assert_eq(redisGetReply(s, (void **)&m), REDIS_OK, "no notice came");
  cr_assert(m->type == REDIS_REPLY_ARRAY && m->elements == 3);
  snprintf(out, cap, "%s", m->element[2]->str);
  freeReplyObject(m);
}

#define CA "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define CB "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define CC "cccccccccccccccccccccccccccccccc"
#define HOLDER CA ":1"
#define WAITER CB ":1"

enum { QUEUED = 0, GRANTED = 1, RELEASED = 1, CANCELED = 2 };

Test(scripts, a_retried_enqueue_never_reports_a_lease_that_already_ended) {
  cr_assert_eq(EVAL_AT(0, RT__SCRIPT_ENQUEUE, HOLDER, "100", "0"), GRANTED);
  rtt_sleep_ms(150); /* the lease ends; the reply was lost */

  /* The retry must not say "granted" with the old, ended lease: the
   * request is queued again (here the lock is free: granted anew, with a
   * full lease). */
  redisReply *r = eval(RT__SCRIPT_ENQUEUE, HOLDER, "100", "1", NULL);
  cr_assert_eq(at(r, 0), GRANTED);
  cr_assert_eq(at(r, 2), 100, "a fresh lease, not %lld", at(r, 2));
  freeReplyObject(r);
}

Test(scripts, a_retried_enqueue_whose_holder_expired_is_granted_in_its_reply) {
  run(RT__SCRIPT_ENQUEUE, HOLDER, "100", "0", NULL);
  cr_assert_eq(EVAL_AT(0, RT__SCRIPT_ENQUEUE, WAITER, "1000", "0"), QUEUED);
  long long f1 = rtt_hfield(rc, rtt_prefix(), "res", 3, "f");
  rtt_sleep_ms(150); /* the holder's lease runs out, nobody reaps */

  /* Nothing is published to the caller, so the reply must say it. */
  redisReply *r = eval(RT__SCRIPT_ENQUEUE, WAITER, "1000", "1", NULL);
  cr_assert_eq(at(r, 0), GRANTED, "the retried enqueue must report the grant");
  cr_assert_gt(at(r, 1), f1, "with a larger fence");
  cr_assert_eq(at(r, 2), 1000, "and the waiter's full lease");
  freeReplyObject(r);
  cr_assert_eq(llen(), 0);
  cr_assert_eq(members(), 0);
}

Test(scripts, enqueues_are_idempotent_by_request_id_in_constant_work) {
  run(RT__SCRIPT_ENQUEUE, HOLDER, "10000", "0", NULL);
  /* The original and a duplicate (a late copy, a retry): one entry. */
  for (int i = 0; i < 3; i++) {
    redisReply *r =
        eval(RT__SCRIPT_ENQUEUE, WAITER, "1000", i ? "1" : "0", NULL);
    cr_assert_eq(at(r, 0), QUEUED);
    cr_assert_eq(at(r, 1), 1, "position behind the holder");
    cr_assert_gt(at(r, 2), 0, "the holder's lease left");
    freeReplyObject(r);
  }
  cr_assert_eq(llen(), 1, "no second entry");
  cr_assert_eq(members(), 1);
  /* A try by the holder's id is the same request: granted, not busy. */
  cr_assert_eq(EVAL_AT(0, RT__SCRIPT_TRY, HOLDER, "10000", NULL), GRANTED);
}

Test(scripts, a_cancel_is_constant_work_and_the_entry_is_skipped_later) {
  redisContext *sc = subscriber(CC);
  run(RT__SCRIPT_ENQUEUE, HOLDER, "10000", "0", NULL);
  run(RT__SCRIPT_ENQUEUE, WAITER, "1000", "0", NULL);
  run(RT__SCRIPT_ENQUEUE, CC ":1", "1000", "0", NULL);
  /* Not the first waiter: it only leaves m (its list entry stays). */
  cr_assert_eq(EVAL_AT(0, RT__SCRIPT_RELEASE, CC ":1", NULL), CANCELED);
  cr_assert_eq(llen(), 2);
  cr_assert_eq(members(), 1);
  cr_assert_eq(rtt_qlen(rc, rtt_prefix(), "res", 3), 2, "holder + 1 waiter");
  /* A retried cancel finds nothing; the holder stays in place. */
  cr_assert_eq(EVAL_AT(0, RT__SCRIPT_RELEASE, CC ":1", NULL), 0);
  char q[4][RTT_ID_MAX];
  rtt_queue(rc, rtt_prefix(), "res", 3, q, 4);
  cr_assert_str_eq(q[0], HOLDER);
  cr_assert(rtt_int(rc, "PTTL %s", qkey) > 0, "the queue keeps its expiry");
  rtt_redis_close(sc);
}

Test(scripts, a_try_on_an_ended_lease_grants_the_waiters_first) {
  run(RT__SCRIPT_ENQUEUE, HOLDER, "100", "0", NULL);
  redisContext *sc = subscriber(CB);
  cr_assert_eq(EVAL_AT(0, RT__SCRIPT_ENQUEUE, WAITER, "5000", "0"), QUEUED);
  rtt_sleep_ms(150); /* the lease ends; nobody reaps */
  /* The try hands the lock on (its script must not fail on the way). */
  redisReply *r = eval(RT__SCRIPT_TRY, CC ":1", "1000", NULL);
  cr_assert_eq(at(r, 0), 0, "the waiter comes first");
  cr_assert_gt(at(r, 1), 4000, "the waiter's lease is left");
  freeReplyObject(r);
  char note[128];
  next_message(sc, note, sizeof(note));
  cr_assert_eq(note[0], 'g', "the waiter is told: %s", note);
  cr_assert_eq(rtt_hfield(rc, rtt_prefix(), "res", 3, "f") > 0, 1);
  rtt_redis_close(sc);
}

Test(scripts, missing_keys_never_read_as_free_while_a_lease_runs) {
  run(RT__SCRIPT_ENQUEUE, HOLDER, "10000", "0", NULL);
  run(RT__SCRIPT_ENQUEUE, WAITER, "1000", "0", NULL);
  /* An operator (or a bug) deletes the queue and the member hash: the
   * holder's own key still holds the lock. */
  rtt_int(rc, "DEL %s %s", qkey, mkey);
  cr_assert_eq(EVAL_AT(0, RT__SCRIPT_TRY, CC ":1", "1000", NULL), 0,
               "try granted while a lease runs");
  cr_assert_eq(EVAL_AT(0, RT__SCRIPT_ENQUEUE, CC ":2", "1000", "0"), QUEUED);
  /* The lost waiter asks (reap with its id): Redis says it is gone. */
  redisReply *r = eval(RT__SCRIPT_REAP, WAITER, NULL);
  cr_assert_gt(at(r, 0), 0, "holder lease left");
  cr_assert_eq(at(r, 1), 0, "the lost waiter must read as gone");
  freeReplyObject(r);
  /* ...and a retried enqueue puts it back, behind CC:2. */
  r = eval(RT__SCRIPT_ENQUEUE, WAITER, "1000", "1", NULL);
  cr_assert_eq(at(r, 0), QUEUED);
  cr_assert_eq(at(r, 1), 2);
  freeReplyObject(r);
}

Test(scripts, an_entry_removed_from_the_list_alone_reads_as_gone) {
  run(RT__SCRIPT_ENQUEUE, HOLDER, "10000", "0", NULL);
  run(RT__SCRIPT_ENQUEUE, WAITER, "1000", "0", NULL);
  rtt_int(rc, "LREM %s 0 %s", qkey, WAITER);
  redisReply *r = eval(RT__SCRIPT_REAP, WAITER, NULL);
  cr_assert_eq(at(r, 1), 0, "a member no longer in q must read as gone");
  freeReplyObject(r);
}

Test(scripts, fences_never_go_backwards_even_when_every_key_is_lost) {
  long long last = 0;
  for (int i = 0; i < 5; i++) {
    char id[64];
    snprintf(id, sizeof(id), CA ":%d", i + 1);
    long long f = EVAL_AT(1, RT__SCRIPT_ENQUEUE, id, "10000", "0");
    cr_assert_gt(f, last, "fence %lld after %lld", f, last);
    last = f;
    /* Every second round the resource's keys all vanish. */
    if (i % 2)
      rtt_int(rc, "DEL %s %s %s", qkey, hkey, mkey);
    else
      run(RT__SCRIPT_RELEASE, id, NULL);
  }
}

/* The fence of an enqueue of id whose channel prefix carries epoch ("c":
 * the node's configEpoch; NULL: none), and the server's us clock before. */
static long long fence_at_epoch(const char *id, const char *epoch,
                                long long *now_us) {
  char ch[160];
  size_t n = (size_t)snprintf(ch, sizeof(ch), "%s", chan);
  if (epoch != NULL)
    n += 1 + (size_t)snprintf(ch + n + 1, sizeof(ch) - n - 1, "%s", epoch);
  redisReply *t = rtt_cmd(rc, "TIME");
  *now_us = atoll(t->element[0]->str) * 1000000LL + atoll(t->element[1]->str);
  freeReplyObject(t);
  const char *argv[] = {"EVAL",  rt__scripts[RT__SCRIPT_ENQUEUE].body,
                        "3",     qkey,
                        hkey,    mkey,
                        ch,      id,
                        "10000", "0"};
  size_t lens[] = {4,
                   rt__scripts[RT__SCRIPT_ENQUEUE].len,
                   1,
                   strlen(qkey),
                   strlen(hkey),
                   strlen(mkey),
                   n,
                   strlen(id),
                   5,
                   1};
  redisReply *r = redisCommandArgv(rc, 10, argv, lens);
  cr_assert(r != NULL && r->type == REDIS_REPLY_ARRAY, "enqueue failed: %s",
            r != NULL && r->type == REDIS_REPLY_ERROR ? r->str : "?");
  long long f = at(r, 1);
  cr_assert_eq(at(r, 0), GRANTED);
  freeReplyObject(r);
  run(RT__SCRIPT_RELEASE, id, NULL);
  return f;
}

Test(scripts, a_fence_carries_the_failover_epoch_above_the_clock) {
  const long long E = 1099511627776LL; /* 2^40 us per epoch */
  long long now, f0, f3, f2, f4, fc;
  f0 = fence_at_epoch(CA ":1", NULL, &now);
  cr_assert(f0 >= now && f0 < now + 60000000LL, "no epoch: the us clock");
  f3 = fence_at_epoch(CA ":2", "3", &now);
  cr_assert(f3 >= now + 3 * E && f3 < now + 3 * E + 60000000LL,
            "epoch 3: the clock plus 3 * 2^40 (%lld, now %lld)", f3, now);
  /* A demoted master's client (epoch 2) after the keys expired: its fence
   * is below every fence of epoch 3 (a storage refuses it)... */
  rtt_int(rc, "DEL %s %s %s", qkey, hkey, mkey);
  f2 = fence_at_epoch(CA ":3", "2", &now);
  cr_assert_lt(f2, f3);
  /* ...while the keys last, the resource's fences never go back. */
  f4 = fence_at_epoch(CA ":4", "4", &now);
  cr_assert_gt(f4, f3 + E - 60000000LL);
  fc = fence_at_epoch(CA ":5", "9999", &now);
  cr_assert_lt(fc, (1LL << 53), "epochs above 4095 count as 4095");
  cr_assert_geq(fc, now + 4095 * E);
  /* "c" on a server without cluster support: epoch 0. */
  rtt_int(rc, "DEL %s %s %s", qkey, hkey, mkey);
  f0 = fence_at_epoch(CA ":6", "c", &now);
  cr_assert(f0 >= now && f0 < now + 60000000LL);
}

Test(scripts, an_idle_resource_leaves_no_key_behind) {
  run(RT__SCRIPT_ENQUEUE, HOLDER, "10000", "0", NULL);
  run(RT__SCRIPT_ENQUEUE, WAITER, "1000", "0", NULL);
  run(RT__SCRIPT_RELEASE, WAITER, NULL); /* cancel */
  cr_assert_eq(EVAL_AT(0, RT__SCRIPT_RELEASE, HOLDER, NULL), RELEASED);
  cr_assert_eq(rtt_int(rc, "EXISTS %s %s %s", qkey, hkey, mkey), 0);
}

Test(scripts, pattern_subscribers_do_not_keep_a_dead_waiter_alive) {
  /* An operator watches every channel with a pattern. */
  redisContext *watcher = rtt_redis();
  freeReplyObject(rtt_cmd(watcher, "PSUBSCRIBE %s*", chan));
  redisContext *sc = subscriber(CC);
  run(RT__SCRIPT_ENQUEUE, HOLDER, "10000", "0", NULL);
  run(RT__SCRIPT_ENQUEUE, WAITER, "1000", "0", NULL); /* nobody listens */
  run(RT__SCRIPT_ENQUEUE, CC ":1", "1000", "0", NULL);
  run(RT__SCRIPT_RELEASE, HOLDER, NULL);
  char q[4][RTT_ID_MAX];
  cr_assert_eq(rtt_queue(rc, rtt_prefix(), "res", 3, q, 4), 1);
  cr_assert_str_eq(q[0], CC ":1", "the dead waiter was granted");
  char msg[128];
  next_message(sc, msg, sizeof(msg));
  cr_assert_eq(strncmp(msg, "g:1:", 4), 0, "notice %s", msg);
  rtt_redis_close(sc);
  rtt_redis_close(watcher);
}

/* The run id of the server rc talks to. */
static void server_run_id(char *out, size_t cap) {
  redisReply *r = rtt_cmd(rc, "INFO server");
  const char *p = strstr(r->str, "run_id:");
  cr_assert(p != NULL);
  snprintf(out, cap, "%.40s", p + 7);
  freeReplyObject(r);
}

/* The waiter's client has no subscriber on this server. Whether a release
 * drops it as dead depends on m's '@': the queue came from another server
 * (a failover, a restart, a moved slot), so its clients may still be
 * subscribing here, or the queue was made here, where they subscribed
 * before queuing, or the change is more than the settle window old. */
static int silent_waiter_granted(const char *stamp) {
  redisContext *sc = subscriber(CC);
  run(RT__SCRIPT_ENQUEUE, HOLDER, "10000", "0", NULL);
  run(RT__SCRIPT_ENQUEUE, WAITER, "10000", "0", NULL); /* nobody listens */
  run(RT__SCRIPT_ENQUEUE, CC ":1", "10000", "0", NULL);
  if (stamp != NULL)
    rtt_ok(rc, "HSET %s @ %s", mkey, stamp);
  run(RT__SCRIPT_RELEASE, HOLDER, NULL);
  char q[3][RTT_ID_MAX];
  cr_assert_geq(rtt_queue(rc, rtt_prefix(), "res", 3, q, 3), 1);
  rtt_redis_close(sc);
  rtt_ok(rc, "DEL %s %s %s", qkey, hkey, mkey);
  return strcmp(q[0], WAITER) == 0;
}

Test(scripts, a_silent_waiter_is_kept_while_clients_may_still_be_subscribing) {
  char me[64], stamp[128];
  server_run_id(me, sizeof(me));
  cr_assert_eq(silent_waiter_granted(NULL), 0,
               "a queue made on this server: its silent waiter is dead");
  cr_assert_eq(silent_waiter_granted("0123456789abcdef:0"), 1,
               "a queue from another server: its waiter may be subscribing");
  long long now = (long long)rtt_redis_time_ms(rc);
  snprintf(stamp, sizeof(stamp), "%s:%lld", me, now - 1000);
  cr_assert_eq(silent_waiter_granted(stamp), 1,
               "1 s after the queue came here: still settling");
  snprintf(stamp, sizeof(stamp), "%s:%lld", me, now - 6000);
  cr_assert_eq(silent_waiter_granted(stamp), 0,
               "6 s after the queue came here: silence means gone");
}

/* A retried enqueue comes from a client back after a reconnect: if the
 * queue came from another server, the settle window starts with it. */
Test(scripts, a_retried_enqueue_marks_when_this_server_took_the_queue_over) {
  char me[64], at[128];
  server_run_id(me, sizeof(me));
  run(RT__SCRIPT_ENQUEUE, HOLDER, "10000", "0", NULL);
  run(RT__SCRIPT_ENQUEUE, WAITER, "10000", "0", NULL);
  redisReply *r = rtt_cmd(rc, "HGET %s @", mkey);
  snprintf(at, sizeof(at), "%s:0", me);
  cr_assert_str_eq(r->str, at, "a queue made here is settled");
  freeReplyObject(r);
  rtt_ok(rc, "HSET %s @ 0123456789abcdef:0", mkey);
  long long now = (long long)rtt_redis_time_ms(rc);
  run(RT__SCRIPT_ENQUEUE, WAITER, "10000", "1", NULL);
  r = rtt_cmd(rc, "HGET %s @", mkey);
  cr_assert_eq(strncmp(r->str, me, strlen(me)), 0, "%s", r->str);
  long long since = atoll(r->str + strlen(me) + 1);
  cr_assert(since >= now && since < now + 1000, "since %lld, now %lld", since,
            now);
  freeReplyObject(r);
}

Test(scripts, a_handoff_tells_the_next_in_line_the_new_deadline) {
  redisContext *sb = subscriber(CB), *sc = subscriber(CC);
  run(RT__SCRIPT_ENQUEUE, HOLDER, "10000", "0", NULL);
  run(RT__SCRIPT_ENQUEUE, WAITER, "300", "0", NULL);
  run(RT__SCRIPT_ENQUEUE, CC ":1", "1000", "0", NULL);
  run(RT__SCRIPT_RELEASE, HOLDER, NULL);
  char msg[128], want[64];
  next_message(sb, msg, sizeof(msg));
  cr_assert_eq(strncmp(msg, "g:1:", 4), 0, "grant %s", msg);
  long long d = rtt_hfield(rc, rtt_prefix(), "res", 3, "d");
  snprintf(want, sizeof(want), "n:1:%lld", d);
  next_message(sc, msg, sizeof(msg));
  cr_assert_str_eq(msg, want, "the next in line must learn the deadline");
  rtt_redis_close(sb);
  rtt_redis_close(sc);
}

Test(scripts, dead_entries_are_dropped_a_bounded_number_per_call) {
  enum { DEAD = 250 };
  redisContext *sc = subscriber(CC);
  run(RT__SCRIPT_ENQUEUE, HOLDER, "10000", "0", NULL);
  for (int i = 0; i < DEAD; i++) {
    char id[64];
    snprintf(id, sizeof(id), CB ":%d", i + 1);
    run(RT__SCRIPT_ENQUEUE, id, "1000", "0", NULL);
  }
  run(RT__SCRIPT_ENQUEUE, CC ":1", "1000", "0", NULL);
  /* The release drops at most 100 dead entries and says "more". */
  redisReply *r = eval(RT__SCRIPT_RELEASE, HOLDER, NULL);
  cr_assert_eq(at(r, 0), RELEASED);
  cr_assert_eq(at(r, 1), 1, "more work must be left for a reap");
  freeReplyObject(r);
  cr_assert_geq(llen(), DEAD + 1 - 100);
  int calls = 0;
  long long more = 1;
  while (more && calls < 10) {
    r = eval(RT__SCRIPT_REAP, "", NULL);
    more = at(r, 4);
    freeReplyObject(r);
    calls++;
  }
  cr_assert_eq(calls, 2, "%d reaps to get through %d dead entries", calls,
               DEAD);
  char q[2][RTT_ID_MAX];
  cr_assert_eq(rtt_queue(rc, rtt_prefix(), "res", 3, q, 2), 1);
  cr_assert_str_eq(q[0], CC ":1");
  rtt_redis_close(sc);
}

/* ---- labels ---------------------------------------------------------------------- */

/* GET of a key as a string ("" if missing). */
static void get_string(const char *key, char *out, size_t cap) {
  redisReply *r = rtt_cmd(rc, "GET %s", key);
  snprintf(out, cap, "%s", r->type == REDIS_REPLY_STRING ? r->str : "");
  freeReplyObject(r);
}

/* 1 if s ends with tail. */
/* inspect's holder id and label, and its first waiter's id and label. */
static void inspect_labels(char *hid, char *hlabel, char *wid, char *wlabel) {
  redisReply *r = eval(RT__SCRIPT_INSPECT, "10", NULL);
  cr_assert_eq(r->elements, 9, "inspect answers %zu elements", r->elements);
  snprintf(hid, RTT_ID_MAX, "%s", r->element[5]->str);
  snprintf(hlabel, RTT_ID_MAX, "%s", r->element[7]->str);
  cr_assert_eq(r->element[6]->elements, r->element[8]->elements);
  int any = r->element[6]->elements > 0;
  snprintf(wid, RTT_ID_MAX, "%s", any ? r->element[6]->element[0]->str : "");
  snprintf(wlabel, RTT_ID_MAX, "%s", any ? r->element[8]->element[0]->str : "");
  freeReplyObject(r);
}

Test(scripts, a_label_rides_with_its_request_through_a_handoff_and_an_extend) {
  redisContext *sb = subscriber(CB);
  char v[256], hid[RTT_ID_MAX], hl[RTT_ID_MAX], wid[RTT_ID_MAX], wl[RTT_ID_MAX];
  run(RT__SCRIPT_ENQUEUE, HOLDER, "10000", "0", "first", NULL);
  run(RT__SCRIPT_ENQUEUE, WAITER, "1000", "0", "host-7:4242", NULL);
  get_string(hkey, v, sizeof(v));
  cr_assert(rtt_ends_with(v, ":" HOLDER ":first"), "holder record %s", v);
  redisReply *r = rtt_cmd(rc, "HGET %s %s", mkey, WAITER);
  cr_assert_str_eq(r->str, "0:1000:host-7:4242", "the waiter's member");
  freeReplyObject(r);
  inspect_labels(hid, hl, wid, wl);
  cr_assert_str_eq(hid, HOLDER);
  cr_assert_str_eq(hl, "first");
  cr_assert_str_eq(wid, WAITER);
  cr_assert_str_eq(wl, "host-7:4242");

  /* The handoff carries the waiter's label into h; an extend keeps it. */
  run(RT__SCRIPT_RELEASE, HOLDER, NULL);
  char msg[128];
  next_message(sb, msg, sizeof(msg));
  cr_assert_eq(msg[0], 'g', "not granted: %s", msg);
  get_string(hkey, v, sizeof(v));
  cr_assert(rtt_ends_with(v, ":" WAITER ":host-7:4242"), "holder record %s", v);
  cr_assert_eq(EVAL_AT(0, RT__SCRIPT_EXTEND, WAITER, "5000", NULL), 1,
               "the labeled holder must be found by its id");
  get_string(hkey, v, sizeof(v));
  cr_assert(rtt_ends_with(v, ":" WAITER ":host-7:4242"), "after extend: %s", v);
  inspect_labels(hid, hl, wid, wl);
  cr_assert_str_eq(hid, WAITER);
  cr_assert_str_eq(hl, "host-7:4242");
  cr_assert_str_eq(wid, "");
  /* Its retried enqueue is the same request: its grant, not a new one. */
  cr_assert_eq(
      EVAL_AT(0, RT__SCRIPT_ENQUEUE, WAITER, "1000", "1", "host-7:4242"),
      GRANTED);
  cr_assert_eq(EVAL_AT(0, RT__SCRIPT_RELEASE, WAITER, NULL), RELEASED);

  /* try stores it as well. */
  cr_assert_eq(EVAL_AT(0, RT__SCRIPT_TRY, CC ":1", "1000", "cron"), GRANTED);
  get_string(hkey, v, sizeof(v));
  cr_assert(rtt_ends_with(v, ":" CC ":1:cron"), "holder record %s", v);
  rtt_redis_close(sb);
}

Test(scripts, records_without_a_label_still_parse) {
  redisContext *sb = subscriber(CB);
  char v[256], hid[RTT_ID_MAX], hl[RTT_ID_MAX], wid[RTT_ID_MAX], wl[RTT_ID_MAX];
  run(RT__SCRIPT_ENQUEUE, HOLDER, "10000", "0", "", NULL);
  run(RT__SCRIPT_ENQUEUE, WAITER, "1000", "0", NULL); /* no argument */
  get_string(hkey, v, sizeof(v));
  cr_assert(rtt_ends_with(v, ":" HOLDER), "no label, no ':': %s", v);
  redisReply *r = rtt_cmd(rc, "HGET %s %s", mkey, WAITER);
  cr_assert_str_eq(r->str, "0:1000", "no label, not a byte more");
  freeReplyObject(r);
  inspect_labels(hid, hl, wid, wl);
  cr_assert_str_eq(hid, HOLDER);
  cr_assert_str_eq(hl, "");
  cr_assert_str_eq(wl, "");
  run(RT__SCRIPT_RELEASE, HOLDER, NULL);
  char msg[128];
  next_message(sb, msg, sizeof(msg));
  get_string(hkey, v, sizeof(v));
  cr_assert(rtt_ends_with(v, ":" WAITER), "holder record %s", v);
  cr_assert_eq(EVAL_AT(0, RT__SCRIPT_EXTEND, WAITER, "5000", NULL), 1);
  cr_assert_eq(EVAL_AT(0, RT__SCRIPT_RELEASE, WAITER, NULL), RELEASED);
  rtt_redis_close(sb);
}

/* ---- what a grant costs Redis ------------------------------------------------ */

/* Commands Redis ran so far, scripts' redis.call()s included, less the
 * EVALs and INFOs themselves (INFO commandstats counts every command). */
static long long commands_run(void) {
  redisReply *r = rtt_cmd(rc, "INFO commandstats");
  cr_assert_eq(r->type, REDIS_REPLY_STRING);
  long long total = 0;
  for (const char *p = r->str; (p = strstr(p, "cmdstat_")) != NULL; p++) {
    const char *name = p + 8, *colon = strchr(name, ':');
    const char *calls = strstr(name, "calls=");
    cr_assert(colon != NULL && calls != NULL);
    size_t len = (size_t)(colon - name);
    if ((len == 4 &&
         (!strncmp(name, "eval", 4) || !strncmp(name, "info", 4))) ||
        (len == 7 && !strncmp(name, "evalsha", 7)))
      continue;
    total += atoll(calls + 6);
  }
  freeReplyObject(r);
  return total;
}

/* The commands one script call runs. */
static long long cost_of(int script, const char *a1, const char *a2,
                         const char *a3, const char *a4) {
  long long before = commands_run();
  run(script, a1, a2, a3, a4, NULL);
  return commands_run() - before;
}

/* Every redis.call is Redis work a shared server pays per grant: the
 * uncontended cycle and the handoff stay within these counts, labels or
 * not (the requests here have labels). On a server
 * of its own, so that nobody else's commands are counted. */
Test(scripts, a_grant_costs_redis_a_bounded_number_of_commands) {
  rtt_server srv;
  rtt_server_start(&srv, NULL);
  rtt_redis_close(rc);
  port = srv.port;
  rc = rtt_redis_at(port);
  /* Uncontended: TIME, GET h, LLEN q, DEL m, SET h; then TIME, GET h,
   * LPOP q, DEL m, DEL h. */
  cr_assert_leq(cost_of(RT__SCRIPT_ENQUEUE, HOLDER, "10000", "0", "a"), 5);
  cr_assert_leq(cost_of(RT__SCRIPT_RELEASE, HOLDER, NULL, NULL, NULL), 5);
  cr_assert_eq(rtt_int(rc, "EXISTS %s %s %s", qkey, hkey, mkey), 0);

  /* A handoff: the waiter queues behind the holder (TIME, GET h, LLEN q,
   * HMGET m, RPUSH q, HSET m, PEXPIRE q and m: the queue is new; its INFO
   * for the server's run id is not counted), then the
   * release grants it (TIME, GET h, LPOP q, HINCRBY m, HGET m, HDEL m,
   * SPUBLISH g, SET h, PEXPIRE q and m) and tells the one behind it
   * (LINDEX q, HEXISTS m, SPUBLISH n). */
  redisContext *sb = subscriber(CB), *sc = subscriber(CC);
  run(RT__SCRIPT_ENQUEUE, HOLDER, "10000", "0", "a", NULL);
  cr_assert_leq(cost_of(RT__SCRIPT_ENQUEUE, WAITER, "10000", "0", "b:1"), 8);
  cr_assert_leq(cost_of(RT__SCRIPT_ENQUEUE, CC ":1", "10000", "0", "c"), 6,
                "a second waiter: the queue's expiry is set already");
  cr_assert_leq(cost_of(RT__SCRIPT_RELEASE, HOLDER, NULL, NULL, NULL), 13);
  char msg[128];
  next_message(sb, msg, sizeof(msg));
  cr_assert_eq(msg[0], 'g', "the waiter was not granted: %s", msg);
  next_message(sc, msg, sizeof(msg));
  cr_assert_eq(msg[0], 'n', "the next in line was not told: %s", msg);
  rtt_redis_close(sb);
  rtt_redis_close(sc);
  rtt_server_stop(&srv);
}
