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

#include "module_pair.h"
#include "rt_scripts.h"

TestSuite(module, .fini = rtt_cleanup, .timeout = 90);

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
