/* redturn run: the command's status and environment, the wait deadline,
 * unreachable Redis, renewal, a lost lock, cancel on a signal, flock(1)
 * options, run --all over several resources.
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

/* ---- run ----------------------------------------------------------------- */

/* Has the tool printed a whole "fence|resource|holder\n" line? */
static int has_line(void *arg) {
  rtt_proc *p = arg;
  rtt_cli_poll(p);
  return strchr(p->out, '\n') != NULL || p->done;
}

Test(cli, run_exits_with_the_commands_status_and_gives_it_the_fence) {
  rtt_proc p;
  /* The command prints what it was given, then holds the lock a while, so
   * the test can compare it with Redis' holder record (a released lock
   * leaves no record behind). */
  rtt_cli_start(&p, 1,
                RTT_ARGS("run", "job", "--", "sh", "-c",
                         "printf '%s|%s|%s\\n' \"$REDTURN_FENCE\" "
                         "\"$REDTURN_RESOURCE\" \"$REDTURN_HOLDER\"; "
                         "sleep 1; exit 7"));
  cr_assert(rtt_run_until_fn(&loop, has_line, &p, 5000),
            "the command printed nothing; stderr:\n%s", p.err);
  cr_assert_eq(p.done, 0, "redturn exited early: %d\n%s", p.code, p.err);
  unsigned long long fence = 0;
  char res[64] = "", holder[96] = "";
  cr_assert_eq(sscanf(p.out, "%llu|%63[^|]|%95s", &fence, res, holder), 3,
               "stdout: %s", p.out);
  cr_assert_geq(fence, 1);
  cr_assert_eq(fence,
               (unsigned long long)rtt_hfield(rc, rtt_prefix(), "job", 3, "f"));
  cr_assert_str_eq(res, "job");
  cr_assert_eq(strlen(holder) > 33 && holder[32] == ':', 1, "holder %s",
               holder);
  char ids[2][RTT_ID_MAX];
  cr_assert_eq(rtt_queue(rc, rtt_prefix(), "job", 3, ids, 2), 1);
  cr_assert_str_eq(ids[0], holder, "REDTURN_HOLDER is not the holder");
  rtt_cli_wait(&p, 10000);
  RTT_ASSERT_CODE(&p, 7);
  cr_assert_eq(rtt_queue_len(rc, "job"), 0, "released after the command");
  cr_assert_eq(rtt_hfield(rc, rtt_prefix(), "job", 3, "f"), -1);

  rtt_cli(&p, RTT_ARGS("run", "job", "true"));
  RTT_ASSERT_CODE(&p, 0);
  rtt_cli(&p, RTT_ARGS("run", "job", "--", "sh", "-c", "kill -TERM $$"));
  RTT_ASSERT_CODE(&p, 128 + SIGTERM);
  cr_assert_eq(rtt_queue_len(rc, "job"), 0);
}

Test(cli, run_reports_a_command_that_cannot_start) {
  rtt_proc p;
  rtt_cli(&p,
          RTT_ARGS("run", "job", "--", "/nonexistent/redturn-test-command"));
  RTT_ASSERT_CODE(&p, 127);
  rtt_assert_has(p.err, "cannot run");
  cr_assert_eq(rtt_queue_len(rc, "job"), 0, "the lock was released");
}

Test(cli, run_exits_69_when_redis_is_unreachable) {
  char url[64];
  rtt_proc p;
  snprintf(url, sizeof(url), "redis://127.0.0.1:%d", rtt_free_port());
  rtt_cli(&p, RTT_ARGS("run", "--url", url, "job", "--", "true"));
  RTT_ASSERT_CODE(&p, 69);
  rtt_assert_has(p.err, "cannot use Redis");
  rtt_assert_has(p.err, "Connection refused"); /* the errno behind it */
  rtt_cli(&p, RTT_ARGS("inspect", "--url", url, "job"));
  RTT_ASSERT_CODE(&p, 69);
  rtt_cli(&p, RTT_ARGS("evict", "--url", url, "job"));
  RTT_ASSERT_CODE(&p, 69);
}

/* Start `redturn run ARGS... job -- echo ran` through a proxy whose first
 * connection is answered nothing and then closed, as a CLIENT KILL of a
 * connection still in its handshake would; wait for its exit. */
static void run_with_first_connection_lost(rtt_proc *p, const char *wait) {
  char url[64];
  rtt_proxy *px = rtt_proxy_start(rtt_port());
  rtt_proxy_set(px, 0, RTT_UP, RTT_HOLD, 0);
  snprintf(url, sizeof(url), "redis://127.0.0.1:%d", rtt_proxy_port(px));
  rtt_cli_start(p, 0,
                RTT_ARGS("--url", url, "--prefix", rtt_prefix(), "run", wait,
                         "job", "--", "echo", "ran"));
  uint64_t t0 = rtt_now_ms();
  while (rtt_proxy_conn_count(px) < 1 && rtt_now_ms() - t0 < 10000)
    rtt_sleep_ms(5);
  cr_assert_geq(rtt_proxy_conn_count(px), 1, "redturn never connected");
  rtt_sleep_ms(50);
  rtt_proxy_cut(px, 0);
  rtt_cli_wait(p, 20000);
  rtt_proxy_stop(px);
}

Test(cli, run_retries_a_first_connect_lost_within_its_wait_budget) {
  rtt_proc p;
  run_with_first_connection_lost(&p, "-w60s");
  RTT_ASSERT_CODE(&p, 0);
  cr_assert_str_eq(p.out, "ran\n");
  cr_assert_eq(rtt_queue_len(rc, "job"), 0, "the lock was released");
  /* Without a budget (-n) it gives up, saying it once. */
  run_with_first_connection_lost(&p, "-n");
  RTT_ASSERT_CODE(&p, 69);
  rtt_assert_has(p.err, "cannot use Redis at redis://127.0.0.1:");
  rtt_assert_has(p.err, "lost: ");
  cr_assert_null(strstr(p.err, "connection to Redis lost"), "%s", p.err);
  const char *lost = strstr(p.err, " lost");
  cr_assert(lost != NULL && strstr(lost + 1, " lost") == NULL, "said twice: %s",
            p.err);
}

Test(cli, run_gives_up_at_the_wait_deadline_with_the_conflict_code) {
  rtt_client a;
  rtt_req held = {0};
  rtt_proc p;
  rtt_open_ready(&a, &loop, NULL);
  rtt_acquire(&loop, a.c, "job", 20000, &held);

  rtt_cli(&p, RTT_ARGS("run", "--wait-timeout", "300ms", "job", "--", "true"));
  RTT_ASSERT_CODE(&p, 1);
  cr_assert_geq(p.ended_ms - p.started_ms, 280);
  rtt_assert_has(p.err, "gave up waiting");
  cr_assert_eq(rtt_queue_len(rc, "job"), 1, "the waiter left the queue");

  rtt_cli(&p, RTT_ARGS("run", "--wait-timeout", "0", "job", "--", "true"));
  RTT_ASSERT_CODE(&p, 1);
  cr_assert_eq(rtt_queue_len(rc, "job"), 1);

  rtt_release(&loop, &held, 0);
  rtt_close(&a);
  rtt_loop_finish(&loop);
}

static void assert_signal_cancels_wait(int signo) {
  rtt_client a;
  rtt_req held = {0};
  rtt_proc p;
  rtt_open_ready(&a, &loop, NULL);
  rtt_acquire(&loop, a.c, "job", 20000, &held);

  rtt_cli_start(&p, 1, RTT_ARGS("run", "job", "--", "true"));
  rtt_run_until_queued(&loop, rc, "job", 2);
  kill(p.pid, signo);
  rtt_cli_wait(&p, 5000);
  RTT_ASSERT_CODE(&p, 128 + signo);
  cr_assert_eq(rtt_queue_len(rc, "job"), 1,
               "the canceled entry is still queued");
  char ids[4][RTT_ID_MAX];
  cr_assert_eq(rtt_queue(rc, rtt_prefix(), "job", 3, ids, 4), 1);
  cr_assert_str_eq(ids[0], held.id);

  rtt_release(&loop, &held, 0);
  rtt_close(&a);
  rtt_loop_finish(&loop);
}

Test(cli, sigint_while_waiting_takes_the_request_out_of_the_queue) {
  assert_signal_cancels_wait(SIGINT);
}

Test(cli, sigterm_while_waiting_takes_the_request_out_of_the_queue) {
  assert_signal_cancels_wait(SIGTERM);
}

Test(cli, run_renews_the_lease_while_the_command_outlives_its_ttl) {
  rtt_client a;
  rtt_req next = {0};
  rtt_proc p;
  rtt_open_ready(&a, &loop, NULL);

  rtt_cli_start(&p, 1,
                RTT_ARGS("run", "--ttl", "1s", "job", "--", "sleep", "3.5"));
  rtt_run_until_queued(&loop, rc, "job", 1);
  uint64_t fence = (uint64_t)rtt_hfield(rc, rtt_prefix(), "job", 3, "f");
  cr_assert_eq(rtt_wait(a.c, "job", 5000, RT_FOREVER, &next), 0);
  /* The waiter's watchdog would evict an expired holder: over two TTLs
   * pass and the command still holds the lock. */
  rtt_run_until_fn(&loop, rtt_cli_poll, &p, 2500);
  cr_assert_eq(p.done, 0, "redturn exited early: %d\n%s", p.code, p.err);
  cr_assert_eq(next.calls, 0, "the waiter got the lock while the command ran");
  cr_assert(rtt_run_until_fn(&loop, rtt_cli_poll, &p, 5000));
  RTT_ASSERT_CODE(&p, 0);
  cr_assert(rtt_run_until(&loop, &next.calls, 1, 5000));
  cr_assert_eq(next.status, 0);
  cr_assert_gt(next.fence, fence);
  cr_assert_geq(next.at_ms, p.started_ms + 3400);

  rtt_release(&loop, &next, 0);
  rtt_close(&a);
  rtt_loop_finish(&loop);
}

Test(cli, a_lost_lock_stops_the_command_and_exits_70) {
  rtt_client a;
  rtt_req next = {0};
  rtt_proc p;
  rtt_open_ready(&a, &loop, NULL);

  rtt_cli_start(&p, 1,
                RTT_ARGS("run", "--ttl", "1s", "--no-renew", "--grace", "300ms",
                         "job", "--", "sleep", "10"));
  rtt_run_until_queued(&loop, rc, "job", 1);
  cr_assert_eq(rtt_wait(a.c, "job", 5000, RT_FOREVER, &next), 0);
  cr_assert(rtt_run_until_fn(&loop, rtt_cli_poll, &p, 5000),
            "redturn still runs; stderr:\n%s", p.err);
  RTT_ASSERT_CODE(&p, 70);
  cr_assert_lt(p.ended_ms - p.started_ms, 4000);
  rtt_assert_has(p.err, "lost the lock");
  cr_assert(rtt_run_until(&loop, &next.calls, 1, 5000));
  cr_assert_eq(next.status, 0, "the waiter got the lock");

  rtt_release(&loop, &next, 0);
  rtt_close(&a);
  rtt_loop_finish(&loop);
}

/* ---- run: flock(1) options ------------------------------------------------ */

Test(cli, flock_options_timeout_nonblock_conflict_code_and_command_string) {
  rtt_client a;
  rtt_req held = {0};
  rtt_proc p;
  rtt_open_ready(&a, &loop, NULL);
  rtt_acquire(&loop, a.c, "job", 20000, &held);

  /* -w SECONDS, fractional: gives up after 0.3 s with 1, as flock. */
  rtt_cli(&p, RTT_ARGS("run", "-w", "0.3", "job", "true"));
  RTT_ASSERT_CODE(&p, 1);
  cr_assert_geq(p.ended_ms - p.started_ms, 280);
  cr_assert_lt(p.ended_ms - p.started_ms, 3000);
  rtt_cli(&p, RTT_ARGS("run", "--timeout", "300ms", "-E", "7", "job", "true"));
  RTT_ASSERT_CODE(&p, 7);
  /* -n: not at all (one try-lock: no deadline to wait for). */
  rtt_cli(&p, RTT_ARGS("run", "-n", "job", "true"));
  RTT_ASSERT_CODE(&p, 1);
  rtt_assert_has(p.err, "is locked");
  cr_assert_lt(p.ended_ms - p.started_ms, 2000);
  rtt_cli(&p, RTT_ARGS("run", "-n", "-E", "7", "job", "true"));
  RTT_ASSERT_CODE(&p, 7);
  rtt_cli(&p, RTT_ARGS("run", "--nonblock", "--conflict-exit-code=0", "job",
                       "true"));
  RTT_ASSERT_CODE(&p, 0);
  cr_assert_eq(rtt_queue_len(rc, "job"), 1, "a conflict left a request queued");
  /* Other failures keep their own codes. */
  rtt_cli(&p, RTT_ARGS("run", "-n", "-E", "7", "--url", "redis://127.0.0.1:1",
                       "x", "true"));
  RTT_ASSERT_CODE(&p, 69);
  rtt_release(&loop, &held, 0);

  /* -c STRING runs through sh -c. */
  rtt_cli(&p, RTT_ARGS("run", "-c", "echo $((6 * 7)) | tr 4 x; exit 5", "job"));
  RTT_ASSERT_CODE(&p, 5);
  cr_assert_str_eq(p.out, "x2\n");
  rtt_cli(&p, RTT_ARGS("run", "-n", "job", "-c", "echo \"$REDTURN_RESOURCE\""));
  RTT_ASSERT_CODE(&p, 0);
  cr_assert_str_eq(p.out, "job\n");
  rtt_close(&a);
  rtt_loop_finish(&loop);
}

/* ---- run --all: several resources --------------------------------------- */

Test(cli, run_all_sharing_a_resource_never_overlap) {
  static const char *const lists[] = {"a,shared", "shared,b", "shared,a",
                                      "b,shared"};
  char cmd[512], bad[256], runs[256];
  rtt_proc p[4];
  rtt_scratch_dir();
  /* mkdir is atomic: it fails if another command is inside. */
  rtt_script(cmd, sizeof(cmd),
             "mkdir D/in || echo overlap >> D/bad; sleep 0.2; rmdir D/in; "
             "echo $REDTURN_RESOURCE >> D/runs");
  for (int i = 0; i < 4; i++)
    rtt_cli_start(&p[i], 1, RTT_ARGS("run", "--all", lists[i], "-c", cmd));
  for (int i = 0; i < 4; i++) {
    rtt_cli_wait(&p[i], 20000);
    RTT_ASSERT_CODE(&p[i], 0);
  }
  rtt_scratch_read("bad", bad, sizeof(bad));
  rtt_scratch_read("runs", runs, sizeof(runs));
  cr_assert_str_empty(bad, "two runs holding \"shared\" overlapped");
  for (int i = 0; i < 4; i++)
    rtt_assert_has(runs, lists[i]);
  cr_assert_eq(rtt_queue_len(rc, "shared"), 0);
  rtt_scratch_remove();
}

Test(cli, run_all_blocks_a_run_on_one_of_its_names_and_lists_its_fences) {
  char cmd[512], env[512];
  rtt_proc holder, p;
  rtt_scratch_dir();
  rtt_cli_start(
      &holder, 1,
      RTT_ARGS("run", "--all", "m2,m1", "-c",
               rtt_script(cmd, sizeof(cmd),
                          "echo $REDTURN_RESOURCE $REDTURN_FENCE "
                          "$REDTURN_HOLDER > D/env; echo up > D/up; sleep 2")));
  rtt_scratch_await(&loop, "up");
  rtt_cli(&p, RTT_ARGS("run", "-w", "300ms", "m1", "--", "true"));
  RTT_ASSERT_CODE(&p, 1); /* m1 is held by the multi-lock */
  rtt_cli(&p, RTT_ARGS("run", "-n", "m3", "--", "true"));
  RTT_ASSERT_CODE(&p, 0); /* not in the list */
  rtt_cli(&p, RTT_ARGS("run", "-w", "8s", "m2", "--", "true"));
  RTT_ASSERT_CODE(&p, 0); /* granted once the multi-lock's command ended */
  rtt_cli_wait(&holder, 5000);
  RTT_ASSERT_CODE(&holder, 0);
  rtt_scratch_read("env", env, sizeof(env));
  char names[64], fences[128], ids[256];
  cr_assert_eq(sscanf(env, "%63s %127s %255s", names, fences, ids), 3, "%s",
               env);
  cr_assert_str_eq(names, "m2,m1");
  unsigned long long f1, f2;
  cr_assert_eq(sscanf(fences, "%llu,%llu", &f1, &f2), 2, "%s", fences);
  cr_assert(f1 > 0 && f2 > 0);
  cr_assert_not_null(strchr(ids, ','), "%s", ids);
  rtt_scratch_remove();
}

Test(cli, run_all_refuses_empty_and_repeated_names_and_other_kinds) {
  rtt_proc p;
  rtt_cli(&p, RTT_ARGS("run", "--all", "a,,b", "--", "true"));
  RTT_ASSERT_CODE(&p, 64);
  rtt_assert_has(p.err, "has an empty resource name");
  rtt_cli(&p, RTT_ARGS("run", "--all", "a,", "--", "true"));
  RTT_ASSERT_CODE(&p, 64);
  rtt_assert_has(p.err, "has an empty resource name");
  rtt_cli(&p, RTT_ARGS("run", "--all", "a,b,a", "--", "true"));
  RTT_ASSERT_CODE(&p, 64);
  rtt_assert_has(p.err, "names \"a\" twice");
  rtt_cli(&p, RTT_ARGS("run", "-s", "--all", "a,b", "--", "true"));
  RTT_ASSERT_CODE(&p, 64);
  rtt_assert_has(p.err, "takes mutexes only");
  rtt_cli(&p, RTT_ARGS("run", "-n", "--all", "a,b", "--", "true"));
  RTT_ASSERT_CODE(&p, 64);
  rtt_assert_has(p.err, "instead of -n");
  rtt_cli(&p, RTT_ARGS("run", "x", "--all", "a,b", "--", "true"));
  RTT_ASSERT_CODE(&p, 64);
  rtt_assert_has(p.err, "not both");
  cr_assert_eq(rtt_queue_len(rc, "a"), 0);
}
