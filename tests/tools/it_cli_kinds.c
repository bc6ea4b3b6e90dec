/* redturn with the other kinds: read-write locks (run -s / -x),
 * semaphores (--permits), elections (run --elect, leader, leader watch).
 * Each run gets --url and --prefix of this test (tests/support/rtt_cli.h),
 * so tests never see each other's keys. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rt_test.h"
#include "rtt_cli.h"
#include "rtt_proxy.h"
#include "rtt_tls.h"

RTT_SUITE_TIMEOUT(cli, 60);

/* ---- read-write locks and semaphores ------------------------------------------ */

Test(cli, run_shared_holds_with_readers_and_exclusive_waits_for_them) {
  rtt_client a;
  rtt_req reader = {0};
  rtt_proc p;
  rtt_open_ready(&a, &loop, NULL);
  const rt_request_t shared = {RT_KIND_SHARED, 0, 0, 0, NULL, 0};
  cr_assert_eq(rt_wait_ex(a.c, "rw", 2, &shared, 20000, RT_FOREVER, rtt_lock_cb,
                          &reader, &reader.lock),
               0);
  cr_assert(rtt_run_until(&loop, &reader.calls, 1, 5000));
  cr_assert_eq(reader.status, 0);

  rtt_cli(&p,
          RTT_ARGS("run", "-s", "rw", "--", "sh", "-c", "echo $REDTURN_FENCE"));
  RTT_ASSERT_CODE(&p, 0);
  cr_assert_gt(atoll(p.out), 0, "a reader's fence: %s", p.out);
  rtt_cli(&p, RTT_ARGS("run", "-x", "-w", "300ms", "rw", "--", "true"));
  RTT_ASSERT_CODE(&p, 1); /* the writer waits for the reader */
  rtt_cli(&p,
          RTT_ARGS("run", "--permits", "1", "--of", "2", "-n", "rw", "true"));
  RTT_ASSERT_CODE(&p, 76);
  rtt_assert_has(p.err, "another kind of lock");

  rtt_release(&loop, &reader, 0);
  rtt_cli(&p, RTT_ARGS("run", "--exclusive", "-w", "5s", "rw", "--", "true"));
  RTT_ASSERT_CODE(&p, 0);
  rtt_close(&a);
  rtt_loop_finish(&loop);
}

Test(cli, run_permits_takes_k_of_n_and_no_more) {
  rtt_client a;
  rtt_req held = {0};
  rtt_proc p;
  rtt_open_ready(&a, &loop, NULL);
  const rt_request_t two = {RT_KIND_SEMAPHORE, 2, 3, 0, NULL, 0};
  cr_assert_eq(rt_wait_ex(a.c, "sem", 3, &two, 20000, RT_FOREVER, rtt_lock_cb,
                          &held, &held.lock),
               0);
  cr_assert(rtt_run_until(&loop, &held.calls, 1, 5000));
  rtt_cli(&p,
          RTT_ARGS("run", "--permits", "1", "--of", "3", "-n", "sem", "true"));
  RTT_ASSERT_CODE(&p, 0);
  rtt_cli(&p,
          RTT_ARGS("run", "--permits", "2", "--of", "3", "-n", "sem", "true"));
  RTT_ASSERT_CODE(&p, 1);
  rtt_cli(&p, RTT_ARGS("run", "--of", "4", "-n", "sem", "true"));
  RTT_ASSERT_CODE(&p, 76); /* a semaphore of another count */
  rtt_cli(&p, RTT_ARGS("run", "--permits", "4", "--of", "3", "sem", "true"));
  RTT_ASSERT_CODE(&p, 64);
  rtt_cli(&p, RTT_ARGS("run", "--permits", "1", "sem", "true"));
  RTT_ASSERT_CODE(&p, 64);
  rtt_cli(&p, RTT_ARGS("run", "-s", "-x", "sem", "true"));
  RTT_ASSERT_CODE(&p, 64);
  rtt_release(&loop, &held, 0);
  rtt_close(&a);
  rtt_loop_finish(&loop);
}

Test(cli, inspect_shows_the_holders_of_a_read_write_lock_and_a_semaphore) {
  rtt_client a;
  rtt_req r1 = {0}, r2 = {0}, s1 = {0};
  rtt_proc p;
  rtt_open_ready(&a, &loop, NULL);
  const rt_request_t shared = {RT_KIND_SHARED, 0, 0, 0, NULL, 0};
  const rt_request_t two = {RT_KIND_SEMAPHORE, 2, 5, 0, NULL, 0};
  cr_assert_eq(rt_wait_ex(a.c, "rwi", 3, &shared, 20000, RT_FOREVER,
                          rtt_lock_cb, &r1, &r1.lock),
               0);
  cr_assert_eq(rt_wait_ex(a.c, "rwi", 3, &shared, 20000, RT_FOREVER,
                          rtt_lock_cb, &r2, &r2.lock),
               0);
  cr_assert_eq(rt_wait_ex(a.c, "semi", 4, &two, 20000, RT_FOREVER, rtt_lock_cb,
                          &s1, &s1.lock),
               0);
  cr_assert(rtt_run_until(&loop, &r2.calls, 1, 5000));
  cr_assert(rtt_run_until(&loop, &s1.calls, 1, 5000));

  rtt_cli(&p, RTT_ARGS("inspect", "rwi"));
  RTT_ASSERT_CODE(&p, 0);
  rtt_assert_has(p.out, "kind:        read-write lock (held by 2 readers)");
  rtt_assert_has(p.out, "shared    ");
  rtt_assert_has(p.out, r1.id);
  rtt_assert_has(p.out, r2.id);
  rtt_assert_has(p.out,
                 rtt_module_mode()
                     ? "read by:     redturn.pool_inspect (the redturn module)"
                     : "read by:     FCALL_RO (the Functions library)");
  rtt_cli(&p, RTT_ARGS("inspect", "--json", "semi"));
  RTT_ASSERT_CODE(&p, 0);
  rtt_assert_has(p.out,
                 "\"kind\":\"semaphore\",\"permits\":5,\"permits_used\":2");
  rtt_assert_has(p.out, "\"holder_permits\":[2]");

  rtt_release(&loop, &r1, 0);
  rtt_release(&loop, &r2, 0);
  rtt_release(&loop, &s1, 0);
  rtt_close(&a);
  rtt_loop_finish(&loop);
}

Test(cli, run_elect_leads_one_at_a_time_and_inspect_shows_the_leader) {
  rtt_client a;
  rtt_req leader = {0};
  rtt_proc p;
  rtt_open_ready(&a, &loop, NULL);
  const rt_request_t campaign = {RT_KIND_ELECTION, 0, 0, 0, "host-a:80", 9};
  cr_assert_eq(rt_wait_ex(a.c, "el", 2, &campaign, 20000, RT_FOREVER,
                          rtt_lock_cb, &leader, &leader.lock),
               0);
  cr_assert(rtt_run_until(&loop, &leader.calls, 1, 5000));
  rtt_cli(&p,
          RTT_ARGS("run", "--elect", "host-b:80", "-w", "300ms", "el", "true"));
  RTT_ASSERT_CODE(&p, 1); /* one leader at a time */
  rtt_cli(&p, RTT_ARGS("inspect", "el"));
  RTT_ASSERT_CODE(&p, 0);
  rtt_assert_has(p.out, "kind:        election");
  rtt_assert_has(p.out, "leader    ");
  rtt_assert_has(p.out, "\"host-a:80\"");
  rtt_cli(&p, RTT_ARGS("run", "--elect", "bad\x01", "el", "true"));
  RTT_ASSERT_CODE(&p, 64);
  rtt_assert_has(p.err, "--elect VALUE: byte 3 (0x01) is not printable ASCII");
  rtt_release(&loop, &leader, 0);
  rtt_cli(&p, RTT_ARGS("run", "--elect", "host-b:80", "-w", "5s", "el", "--",
                       "sh", "-c", "echo leading with $REDTURN_FENCE"));
  RTT_ASSERT_CODE(&p, 0);
  rtt_assert_has(p.out, "leading with ");
  rtt_close(&a);
  rtt_loop_finish(&loop);
}

Test(cli, leader_watch_prints_each_change_until_sigint) {
  rtt_client a;
  rtt_req leader = {0};
  rtt_proc p;
  char want[128];
  rtt_open_ready(&a, &loop, NULL);
  rtt_cli_start(&p, 1, RTT_ARGS("leader", "el", "--watch"));
  rtt_lines_goal g = {&p, 1};
  cr_assert(rtt_run_until_fn(&loop, rtt_cli_has_lines, &g, 5000),
            "no first line");
  rtt_assert_has(p.out, "no leader");

  const rt_request_t campaign = {RT_KIND_ELECTION, 0, 0, 0, "host-a:80", 9};
  cr_assert_eq(rt_wait_ex(a.c, "el", 2, &campaign, 20000, RT_FOREVER,
                          rtt_lock_cb, &leader, &leader.lock),
               0);
  cr_assert(rtt_run_until(&loop, &leader.calls, 1, 5000));
  g.n = 2;
  cr_assert(rtt_run_until_fn(&loop, rtt_cli_has_lines, &g, 5000),
            "no second line");
  snprintf(want, sizeof(want),
           "leader %s fence %" PRIu64 " value \"host-a:80\"\n",
           rt_lock_id(leader.lock), rt_lock_fence(leader.lock));
  rtt_assert_has(p.out, want);
  rtt_release(&loop, &leader, 0);
  g.n = 3;
  cr_assert(rtt_run_until_fn(&loop, rtt_cli_has_lines, &g, 5000),
            "no third line");
  rtt_run_for(&loop, 200);
  kill(p.pid, SIGINT);
  rtt_cli_wait(&p, 5000);
  RTT_ASSERT_CODE(&p, 0);
  cr_assert_eq(rtt_count_lines(p.out), 3, "stdout:\n%s", p.out);
  cr_assert(strncmp(p.out + strlen(p.out) - 10, "no leader\n", 10) == 0,
            "stdout:\n%s", p.out);
  cr_assert_eq(p.lens[1], 0, "stderr:\n%s", p.err);
  rtt_close(&a);
  rtt_loop_finish(&loop);
}

Test(cli, leader_watch_refuses_a_mutex_and_says_a_lost_connection) {
  char url[64];
  rtt_server s;
  rtt_client a;
  rtt_req held = {0};
  rtt_proc p;
  rtt_open_ready(&a, &loop, NULL);
  rtt_acquire(&loop, a.c, "mtx", 20000, &held);
  rtt_cli(&p, RTT_ARGS("leader", "mtx", "--watch"));
  RTT_ASSERT_CODE(&p, 64);
  rtt_assert_has(p.err, "not an election");
  rtt_release(&loop, &held, 0);

  rtt_private_url(&s, url, sizeof(url));
  rtt_cli_start(&p, 1, RTT_ARGS("leader", "--url", url, "el", "-w"));
  rtt_lines_goal g = {&p, 1};
  cr_assert(rtt_run_until_fn(&loop, rtt_cli_has_lines, &g, 5000),
            "no first line");
  redisContext *adm = rtt_redis_at(s.port);
  freeReplyObject(rtt_cmd(adm, "CLIENT KILL TYPE pubsub"));
  rtt_redis_close(adm);
  RTT_RUN_UNTIL(
      &loop, (rtt_cli_poll(&p), strstr(p.err, "watching again") != NULL), 5000);
  rtt_assert_has(p.err, "watching again once reconnected");
  kill(p.pid, SIGTERM);
  rtt_cli_wait(&p, 5000);
  RTT_ASSERT_CODE(&p, 0);
  rtt_close(&a);
  rtt_loop_finish(&loop);
}

Test(cli, leader_prints_the_current_leader_its_fence_and_value) {
  rtt_client a;
  rtt_req leader = {0}, sem = {0};
  rtt_proc p;
  char want[128];
  rtt_open_ready(&a, &loop, NULL);
  rtt_cli(&p, RTT_ARGS("leader", "el"));
  RTT_ASSERT_CODE(&p, 1);
  rtt_assert_has(p.out, "no leader");

  const rt_request_t campaign = {RT_KIND_ELECTION, 0, 0, 0, "host-a:80", 9};
  cr_assert_eq(rt_wait_ex(a.c, "el", 2, &campaign, 20000, RT_FOREVER,
                          rtt_lock_cb, &leader, &leader.lock),
               0);
  cr_assert(rtt_run_until(&loop, &leader.calls, 1, 5000));
  rtt_cli(&p, RTT_ARGS("leader", "el"));
  RTT_ASSERT_CODE(&p, 0);
  snprintf(want, sizeof(want),
           "leader %s fence %" PRIu64 " value \"host-a:80\"",
           rt_lock_id(leader.lock), rt_lock_fence(leader.lock));
  rtt_assert_has(p.out, want);

  rtt_release(&loop, &leader, 0);
  rtt_cli(&p, RTT_ARGS("leader", "el"));
  RTT_ASSERT_CODE(&p, 1);
  rtt_assert_has(p.out, "no leader");

  /* A semaphore is not an election: refused with its kind. */
  const rt_request_t permits = {RT_KIND_SEMAPHORE, 1, 2, 0, NULL, 0};
  cr_assert_eq(rt_wait_ex(a.c, "sem", 3, &permits, 20000, RT_FOREVER,
                          rtt_lock_cb, &sem, &sem.lock),
               0);
  cr_assert(rtt_run_until(&loop, &sem.calls, 1, 5000));
  rtt_cli(&p, RTT_ARGS("leader", "sem"));
  RTT_ASSERT_CODE(&p, 64);
  rtt_assert_has(p.err, "not an election");
  rtt_release(&loop, &sem, 0);
  rtt_close(&a);
  rtt_loop_finish(&loop);
}
