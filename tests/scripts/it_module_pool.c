/* The Redis module's pool commands (module/pool.c: semaphores, read-write
 * locks, elections) against the pool scripts, their reference, side by
 * side as in it_module (module_pair.h): the same replies, notices, events
 * and keys; clients of both paths on one resource; WATCH, memory, key
 * shapes, long names; a replica without the module. */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "module_pair.h"
#include "rt_scripts.h"

TestSuite(module_pool, .fini = rtt_cleanup, .timeout = 90);

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

Test(module_pool,
     a_semaphore_queues_grants_cancels_and_hands_on_as_the_scripts) {
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

Test(module_pool,
     an_election_proclaims_and_tells_its_observers_as_the_scripts) {
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

Test(module_pool,
     a_pool_resource_held_off_fences_with_its_epoch_as_the_scripts) {
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
Test(module_pool,
     module_and_script_clients_share_pool_resources_in_fifo_order) {
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
Test(module_pool, pool_calls_that_change_nothing_abort_no_watch) {
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
Test(module_pool, out_of_memory_refuses_only_new_pool_requests) {
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

/* Keys that are not one pool resource's Q h M D are refused before any
 * key is opened. */
Test(module_pool, pool_keys_of_another_shape_are_refused_before_any_write) {
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
Test(module_pool, the_longest_name_hands_on_a_pool_resource) {
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
Test(module_pool, a_replica_without_the_module_follows_pool_resources) {
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

/* Out of memory, a retried pool enqueue of a request Redis does not have
 * (the scripts' pool_enqueue_again, the module's command) is refused
 * before any write: a lease that ended stays for the next call to hand
 * on, and '+' counts it until then (the script handed it on first and
 * left '+' counting its permit: it_diff). */
Test(module_pool, out_of_memory_a_new_retried_pool_request_writes_nothing) {
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
