/* The Lua scripts themselves, called directly with hiredis: cases that are
 * hard to time through the client (a retried enqueue that meets an expired
 * holder) are set up here exactly. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "rt_scripts.h"
#include "rt_test.h"

static redisContext *rc;
static char qkey[128], hkey[128], chan[128];

static void setup(void) {
  rc = rtt_redis();
  snprintf(qkey, sizeof(qkey), "%s:{res}:q", rtt_prefix());
  snprintf(hkey, sizeof(hkey), "%s:{res}:h", rtt_prefix());
  snprintf(chan, sizeof(chan), "%s:c:", rtt_prefix());
}

static void teardown(void) {
  if (rc != NULL)
    rtt_redis_close(rc);
  rtt_cleanup();
}

TestSuite(scripts, .init = setup, .fini = teardown, .timeout = 30);

/* EVAL script with the resource's keys and channel prefix, then args. */
static redisReply *eval(int script, const char *a1, const char *a2) {
  const char *argv[8] = {"EVAL", rt__scripts[script].body, "2", qkey, hkey,
                         chan, a1, a2};
  size_t lens[8] = {4, rt__scripts[script].len, 1, strlen(qkey),
                    strlen(hkey), strlen(chan), a1 ? strlen(a1) : 0,
                    a2 ? strlen(a2) : 0};
  int argc = a2 != NULL ? 8 : 7;
  redisReply *r = redisCommandArgv(rc, argc, argv, lens);
  cr_assert_not_null(r);
  cr_assert_eq(r->type, REDIS_REPLY_ARRAY, "script error: %s",
               r->type == REDIS_REPLY_ERROR ? r->str : "?");
  return r;
}

static long long at(const redisReply *r, size_t i) {
  cr_assert_gt(r->elements, i);
  return r->element[i]->integer;
}

#define HOLDER "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa:1:100"
#define WAITER "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb:1:1000"

Test(scripts, a_retried_enqueue_that_evicts_an_expired_holder_is_granted) {
  redisReply *r = eval(RT__SCRIPT_ENQUEUE, HOLDER, "0");
  cr_assert_eq(at(r, 0), 1, "the first request is granted");
  freeReplyObject(r);
  r = eval(RT__SCRIPT_ENQUEUE, WAITER, "0");
  cr_assert_eq(at(r, 0), 0, "the second request waits");
  freeReplyObject(r);

  rtt_sleep_ms(150); /* the holder's 100 ms lease runs out, nobody reaps */

  /* The waiter's client reconnects and asks again (retry flag): its reap
   * evicts the holder and makes the waiter the head. Nothing is published
   * to the caller, so the reply itself must say "granted". */
  r = eval(RT__SCRIPT_ENQUEUE, WAITER, "1");
  cr_assert_eq(at(r, 0), 1, "the retried enqueue must report the grant");
  cr_assert_eq(at(r, 1), 2, "with the next fence");
  cr_assert_eq(at(r, 2), 1000, "and the waiter's full lease");
  freeReplyObject(r);

  r = redisCommand(rc, "LRANGE %s 0 -1", qkey);
  cr_assert_eq(r->elements, 1);
  cr_assert_str_eq(r->element[0]->str, WAITER);
  freeReplyObject(r);
}

Test(scripts, a_retried_enqueue_behind_a_live_holder_stays_queued_once) {
  redisReply *r = eval(RT__SCRIPT_ENQUEUE, HOLDER, "0");
  freeReplyObject(r);
  r = eval(RT__SCRIPT_ENQUEUE, WAITER, "0");
  freeReplyObject(r);
  r = eval(RT__SCRIPT_ENQUEUE, WAITER, "1");
  cr_assert_eq(at(r, 0), 0);
  cr_assert_eq(at(r, 1), 1, "position behind the holder");
  cr_assert_gt(at(r, 2), 0, "the holder's lease left");
  freeReplyObject(r);
  r = redisCommand(rc, "LLEN %s", qkey);
  cr_assert_eq(r->integer, 2, "no second entry");
  freeReplyObject(r);
}

Test(scripts, a_release_by_a_waiter_leaves_the_holder_in_place) {
  redisReply *r = eval(RT__SCRIPT_ENQUEUE, HOLDER, "0");
  freeReplyObject(r);
  r = eval(RT__SCRIPT_ENQUEUE, WAITER, "0");
  freeReplyObject(r);
  r = eval(RT__SCRIPT_RELEASE, WAITER, NULL);
  cr_assert_eq(at(r, 0), 2, "removed while waiting");
  freeReplyObject(r);
  r = redisCommand(rc, "LRANGE %s 0 -1", qkey);
  cr_assert_eq(r->elements, 1);
  cr_assert_str_eq(r->element[0]->str, HOLDER);
  freeReplyObject(r);
  r = redisCommand(rc, "PTTL %s", qkey);
  cr_assert_gt(r->integer, 0, "the queue keeps its expiry");
  freeReplyObject(r);
}
