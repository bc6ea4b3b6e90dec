/* Work that must not grow with the queue: no script call may take time
 * proportional to the queue length, on a private server whose slow log
 * records every call. Prints what it measured. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "rt_scripts.h"
#include "rt_test.h"

static uv_loop_t loop;
static rtt_server srv;
static redisContext *adm;

static void setup(void) {
  static const char *const args[] = {"--slowlog-log-slower-than", "0",
                                     "--slowlog-max-len", "100000", NULL};
  rtt_server_start(&srv, args);
  adm = rtt_redis_at(srv.port);
  cr_assert_eq(uv_loop_init(&loop), 0);
}

TestSuite(scale, .init = setup, .fini = rtt_cleanup, .timeout = 240);

/* The longest call in the slow log since the last reset, in us, and its
 * command name. */
static long long slowest(char *name, size_t cap) {
  redisReply *r = rtt_cmd(adm, "SLOWLOG GET -1");
  long long max = 0;
  for (size_t i = 0; i < r->elements; i++) {
    redisReply *e = r->element[i];
    const char *cmd = e->element[3]->element[0]->str;
    if (strcasecmp(cmd, "evalsha") != 0 && strcasecmp(cmd, "eval") != 0 &&
        strcasecmp(cmd, "fcall") != 0 && strcasecmp(cmd, "fcall_ro") != 0)
      continue; /* only our scripts: not SLOWLOG, INFO, ... */
    if (e->element[2]->integer > max) {
      max = e->element[2]->integer;
      /* The script (by its first bytes) and the request id. */
      const redisReply *args = e->element[3];
      snprintf(name, cap, "%s %.12s ... %s", args->element[0]->str,
               args->element[1]->str,
               args->elements > 7 ? args->element[7]->str : "");
    }
  }
  freeReplyObject(r);
  return max;
}

static double redis_cpu_s(void) {
  redisReply *r = rtt_cmd(adm, "INFO cpu");
  double user = 0, sys = 0;
  const char *u = strstr(r->str, "used_cpu_user:");
  const char *s = strstr(r->str, "used_cpu_sys:");
  cr_assert(u != NULL && s != NULL);
  sscanf(u, "used_cpu_user:%lf", &user);
  sscanf(s, "used_cpu_sys:%lf", &sys);
  freeReplyObject(r);
  return user + sys;
}

/* Run a script for resource "deep" through adm, pipelined n times with
 * ids "<client>:<i>" and the enqueue arguments ttl and retry (NULL for
 * other scripts); replies are read and dropped. */
static void pipeline(int script, const char *client, int from, int n,
                     const char *ttl, const char *retry) {
  char q[64], h[64], m[64], ch[64], id[64];
  snprintf(q, sizeof(q), "%s:{deep}:q", rtt_prefix());
  snprintf(h, sizeof(h), "%s:{deep}:h", rtt_prefix());
  snprintf(m, sizeof(m), "%s:{deep}:m", rtt_prefix());
  snprintf(ch, sizeof(ch), "%s:c:", rtt_prefix());
  for (int i = 0; i < n; i++) {
    snprintf(id, sizeof(id), "%s:%d", client, from + i);
    if (ttl != NULL)
      redisAppendCommand(adm, "EVALSHA %s 3 %s %s %s %s %s %s %s",
                         rt__scripts[script].sha, q, h, m, ch, id, ttl, retry);
    else
      redisAppendCommand(adm, "EVALSHA %s 3 %s %s %s %s %s",
                         rt__scripts[script].sha, q, h, m, ch, id);
  }
  for (int i = 0; i < n; i++) {
    redisReply *r = NULL;
    cr_assert_eq(redisGetReply(adm, (void **)&r), REDIS_OK);
    cr_assert_neq(r->type, REDIS_REPLY_ERROR, "%s", r->str);
    freeReplyObject(r);
  }
}

#define DEAD "dddddddddddddddddddddddddddddddd"
#define LIVE "eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee"

enum { DEPTH = 50000 };

/* One round of the deep queue below, on fresh keys: how many calls the
 * release and the reaps took, and the longest one (us, and its name). */
static int deep_round(long long *us, char *name, size_t cap) {
  freeReplyObject(rtt_cmd(adm, "DEL %s:{deep}:q %s:{deep}:h %s:{deep}:m",
                          rtt_prefix(), rtt_prefix(), rtt_prefix()));
  /* A holder, 50 000 waiters whose clients are gone, one live waiter.
   * Every lease outlasts the test: the queue's keys live as long as the
   * leases in it, and on a loaded machine 1 s ones ran out while the
   * 50 000 were queued (the keys expired: "dropped in 21 calls"); a 10 s
   * holder's did too (14.9 s), and the enqueues after it handed on,
   * dropping the dead entries 100 a call ("dropped in 2 calls"). */
  pipeline(RT__SCRIPT_ENQUEUE, LIVE, 0, 1, "60000", "0");
  for (int k = 0; k < DEPTH; k += 5000)
    pipeline(RT__SCRIPT_ENQUEUE, DEAD, k, 5000, "60000", "0");
  redisContext *sub = rtt_redis_at(srv.port);
  char chan[64];
  snprintf(chan, sizeof(chan), "%s:c:" LIVE, rtt_prefix());
  freeReplyObject(rtt_cmd(sub, "SSUBSCRIBE %s", chan));
  /* A lease long enough to outlast the reaps below on a loaded machine. */
  pipeline(RT__SCRIPT_ENQUEUE, LIVE, 1, 1, "60000", "0");
  rtt_ok(adm, "SLOWLOG RESET");

  /* The release, then reaps while it says "more": each call does bounded
   * work, however deep the queue. */
  pipeline(RT__SCRIPT_RELEASE, LIVE, 0, 1, NULL, NULL);
  int calls = 1;
  for (;;) {
    char q[64], h[64], m[64], ch[64];
    snprintf(q, sizeof(q), "%s:{deep}:q", rtt_prefix());
    snprintf(h, sizeof(h), "%s:{deep}:h", rtt_prefix());
    snprintf(m, sizeof(m), "%s:{deep}:m", rtt_prefix());
    snprintf(ch, sizeof(ch), "%s:c:", rtt_prefix());
    redisReply *r = rtt_cmd(adm, "EVALSHA %s 3 %s %s %s %s %s",
                            rt__scripts[RT__SCRIPT_REAP].sha, q, h, m, ch, "");
    long long more = r->element[4]->integer;
    freeReplyObject(r);
    calls++;
    if (!more)
      break;
    cr_assert_lt(calls, DEPTH, "the reaps never end");
  }
  *us = slowest(name, cap);
  char want[64];
  snprintf(want, sizeof(want), ":%s:1", LIVE);
  redisReply *r = rtt_cmd(adm, "GET %s:{deep}:h", rtt_prefix());
  cr_assert_eq(r->type, REDIS_REPLY_STRING, "nobody was granted");
  cr_assert_not_null(strstr(r->str, want), "granted to %s", r->str);
  freeReplyObject(r);
  rtt_redis_close(sub);
  return calls;
}

Test(scale, a_deep_queue_of_dead_waiters_costs_no_long_script_call) {
  for (int i = 0; i < RT__SCRIPT_COUNT; i++)
    freeReplyObject(rtt_cmd(adm, "SCRIPT LOAD %s", rt__scripts[i].body));
  /* A call's time is wall time (SLOWLOG), which a loaded machine
   * stretches when it deschedules Redis; work that grew with the queue
   * would be slow in every round, so a round with a slow call is run once
   * more. */
  char name[128] = "?";
  long long us = 0;
  int calls = 0;
  for (int round = 1; round <= 2; round++) {
    calls = deep_round(&us, name, sizeof(name));
    printf("scale: %d dead entries dropped in %d calls, longest call %lld us "
           "(%s), round %d\n",
           DEPTH, calls, us, name, round);
    if (us < 200000)
      break;
  }
  /* The work is bounded per call (at most 100 entries each), and no call
   * comes near the 400 ms one call took when it dropped them all. */
  cr_assert_geq(calls, DEPTH / 100, "%d entries dropped in %d calls", DEPTH,
                calls);
  cr_assert_lt(us, 200000, "a call ran %lld us", us);
}

Test(scale, a_reconnect_with_ten_thousand_waiters_costs_redis_little) {
  enum { N = 10000 };
  rt_options_t o;
  rtt_client a, b;
  rtt_req h = {0};
  static rtt_req w[N];
  rtt_options(&o);
  o.url = NULL;
  o.port = srv.port;
  rtt_open_ready(&a, &loop, &o);
  rtt_open_ready(&b, &loop, &o);
  rtt_acquire(&loop, a.c, "many", 60000, &h);
  for (int i = 0; i < N; i++)
    cr_assert_eq(rtt_wait(b.c, "many", 60000, RT_FOREVER, &w[i]), 0);
  while (rtt_int(adm, "LLEN %s:{many}:q", rtt_prefix()) < N)
    rtt_run_for(&loop, 20);
  /* The command connection dies: every wait is asked about again. A
   * call's time is wall time (SLOWLOG), which a loaded machine stretches
   * when it deschedules Redis; work that grew with the queue would be slow
   * in every round, so a round with a slow call is measured once more. */
  double cpu = 0;
  long long us = 0;
  char slow[128] = "?";
  for (int round = 1; round <= 2; round++) {
    rtt_ok(adm, "SLOWLOG RESET");
    long long calls0 = rtt_script_calls(adm);
    double cpu0 = redis_cpu_s();
    cr_assert(rtt_kill_conn(adm, "cmd", rt_client_id(b.c)),
              "no command connection of client b to kill");
    while (rtt_script_calls(adm) - calls0 < N)
      rtt_run_for(&loop, 20);
    cpu = redis_cpu_s() - cpu0;
    us = slowest(slow, sizeof(slow));
    printf("scale: a reconnect with %d waiters cost Redis %.3f s of CPU, "
           "longest call %lld us (%s), round %d\n",
           N, cpu, us, slow, round);
    if (us < 200000)
      break;
  }
  cr_assert_lt(cpu, 1.0, "%.3f s of Redis CPU", cpu);
  cr_assert_lt(us, 200000, "a call ran %lld us", us);
  cr_assert_eq(rtt_int(adm, "LLEN %s:{many}:q", rtt_prefix()), N,
               "a retried enqueue queued twice");
  rtt_close(&a);
  rtt_close(&b);
  /* b's close cancels its 10 000 waits in Redis, one call each: 1-2 s,
   * more than 10 s beside two other test commands on 2 cores. */
  rtt_loop_finish_within(&loop, 60000);
}
