/* redturn run: the command never outlives redturn or the lock (its
 * process group, signals, evict, Redis gone while it runs), with marker
 * files in a scratch directory.
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

/* ---- run: the command never outlives redturn or the lock ---------------- */

/* Is the process gone (no such pid, or a zombie nobody reaps)? */
static int pid_gone(pid_t pid) {
  char path[64], stat[512];
  snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (f == NULL)
    return 1;
  size_t n = fread(stat, 1, sizeof(stat) - 1, f);
  fclose(f);
  stat[n] = '\0';
  const char *paren = strrchr(stat, ')');
  return paren == NULL || paren[2] == 'Z' || paren[2] == 'X';
}

static pid_t read_pid(const char *file) {
  char buf[32];
  rtt_scratch_read(file, buf, sizeof(buf));
  pid_t pid = (pid_t)atoi(buf);
  cr_assert_gt(pid, 1, "no pid in %s: <%s>", file, buf);
  return pid;
}

/* The largest number on the lines of a scratch file. */
static long long last_stamp(const char *file) {
  static char buf[1 << 16];
  long long max = 0;
  rtt_scratch_read(file, buf, sizeof(buf));
  for (char *line = buf; *line != '\0';) {
    long long v = strtoll(line, &line, 10);
    if (v > max)
      max = v;
    while (*line == '\n')
      line++;
  }
  return max;
}

Test(cli, sigkill_of_redturn_kills_the_commands_group_and_no_run_overlaps) {
  char cmd[512];
  rtt_proc first, second;
  rtt_scratch_dir();
  /* The worker is a grandchild of what redturn starts (a subshell in the
   * background): PR_SET_PDEATHSIG on the direct child alone would leave
   * it running. It stamps a file every 10 ms while it lives. */
  rtt_cli_start(
      &first, 1,
      RTT_ARGS("run", "--ttl", "1s", "job", "-c",
               rtt_script(cmd, sizeof(cmd),
                          "(while :; do date +%s%N >> D/a; sleep 0.01; done) & "
                          "echo $! > D/pid; wait")));
  rtt_scratch_await(&loop, "pid");
  rtt_scratch_await(&loop, "a");
  pid_t worker = read_pid("pid");
  rtt_cli_start(&second, 1,
                RTT_ARGS("run", "job", "-c",
                         rtt_script(cmd, sizeof(cmd), "date +%s%N > D/b")));
  rtt_run_until_queued(&loop, rc, "job", 2);

  uint64_t t0 = rtt_now_ms();
  kill(first.pid, SIGKILL);
  while (!pid_gone(worker) && rtt_now_ms() - t0 < 5000)
    rtt_sleep_ms(1);
  uint64_t died = rtt_now_ms() - t0;
  printf("SIGKILL of redturn -> the command's grandchild gone: %llu ms\n",
         (unsigned long long)died);
  cr_assert(pid_gone(worker), "the command outlived redturn by 5 s");
  cr_assert_lt(died, 1000, "the command died %llu ms after redturn",
               (unsigned long long)died);
  rtt_cli_wait(&first, 5000);
  RTT_ASSERT_CODE(&first, 128 + SIGKILL);

  /* The second run gets the lock once the first lease ran out, and
   * starts after the last stamp of the first command. */
  rtt_cli_wait(&second, 10000);
  RTT_ASSERT_CODE(&second, 0);
  long long a = last_stamp("a"), b = last_stamp("b");
  cr_assert_gt(a, 0);
  cr_assert_gt(b, a,
               "the second command started %lld us before the first "
               "one's last stamp",
               (a - b) / 1000);
  rtt_scratch_remove();
}

static void assert_signal_stops_the_command(int signo) {
  char cmd[512], got[64];
  rtt_proc p;
  rtt_scratch_dir();
  rtt_cli_start(&p, 1,
                RTT_ARGS("run", "job", "-c",
                         rtt_script(cmd, sizeof(cmd),
                                    "trap 'echo TERM > D/got; exit 0' TERM; "
                                    "echo > D/ready; sleep 30 & wait")));
  rtt_scratch_await(&loop, "ready");
  cr_assert_eq(rtt_queue_len(rc, "job"), 1);
  kill(p.pid, signo);
  rtt_cli_wait(&p, 10000);
  RTT_ASSERT_CODE(&p, 128 + signo);
  rtt_scratch_read("got", got, sizeof(got));
  cr_assert_str_eq(got, "TERM\n", "the command did not get SIGTERM");
  cr_assert_eq(rtt_queue_len(rc, "job"), 0, "the lock was not released");
  rtt_assert_has(p.err, "stopping the command");
  rtt_scratch_remove();
}

Test(cli, sigterm_of_redturn_stops_the_command_and_releases) {
  assert_signal_stops_the_command(SIGTERM);
}

Test(cli, sigusr1_of_redturn_stops_the_command_and_releases) {
  assert_signal_stops_the_command(SIGUSR1);
}

Test(cli, sighup_of_redturn_stops_the_command_and_releases) {
  assert_signal_stops_the_command(SIGHUP);
}

Test(cli, the_command_inherits_only_stdin_stdout_and_stderr) {
  rtt_proc p;
  /* redturn itself inherits this test's descriptors (Redis connections,
   * the loop), and has its own Redis sockets. */
  rtt_cli(&p, RTT_ARGS("run", "job", "-c", "ls /proc/$$/fd"));
  RTT_ASSERT_CODE(&p, 0);
  cr_assert_str_eq(p.out, "0\n1\n2\n");
}

Test(cli, evict_sends_the_command_sigterm_at_once) {
  char cmd[512], ids[1][RTT_ID_MAX];
  rtt_proc holder, ev;
  rtt_scratch_dir();
  rtt_cli_start(&holder, 1,
                RTT_ARGS("run", "--ttl", "60s", "job", "-c",
                         rtt_script(cmd, sizeof(cmd),
                                    "trap 'date +%s%N > D/got; exit 0' TERM; "
                                    "echo > D/ready; sleep 30 & wait")));
  rtt_scratch_await(&loop, "ready");
  cr_assert_eq(rtt_queue(rc, rtt_prefix(), "job", 3, ids, 1), 1);
  int64_t before = rtt_realtime_us();
  rtt_cli(&ev, RTT_ARGS("evict", "job", "--holder", ids[0]));
  int64_t after = rtt_realtime_us();
  RTT_ASSERT_CODE(&ev, 0);
  rtt_cli_wait(&holder, 5000);
  RTT_ASSERT_CODE(&holder, 70);
  long long got = last_stamp("got") / 1000;
  cr_assert_gt(got, 0, "the command got no SIGTERM");
  printf("evict -> the command's SIGTERM: %.1f ms from starting `redturn "
         "evict` (%.1f ms from its exit)\n",
         (double)(got - before) / 1000, (double)(got - after) / 1000);
  /* Not a poll of the lease (renewal every 20 s): the notice. */
  cr_assert_lt(got - before, 1000000, "SIGTERM came %lld ms after evict",
               (got - before) / 1000);
  rtt_scratch_remove();
}

Test(cli, redis_gone_while_the_command_runs_bounds_the_exit) {
  char url[64], cmd[512];
  rtt_server s;
  rtt_proc p;
  rtt_private_url(&s, url, sizeof(url));
  rtt_scratch_dir();
  rtt_cli_start(
      &p, 1,
      RTT_ARGS("run", "--url", url, "job", "-c",
               rtt_script(cmd, sizeof(cmd),
                          "echo > D/ready; sleep 1; date +%s%N > D/end")));
  rtt_scratch_await(&loop, "ready");
  rtt_server_stop(&s);
  rtt_cli_wait(&p, 15000);
  int64_t exited = rtt_realtime_us();
  long long end = last_stamp("end") / 1000;
  cr_assert_gt(end, 0, "the command did not finish");
  RTT_ASSERT_CODE(&p, 0);
  printf("Redis gone: redturn exited %.0f ms after its command\n",
         (double)(exited - end) / 1000);
  /* The release gives up after 2 s. */
  cr_assert_lt(exited - end, 3500000, "redturn hung %lld ms",
               (exited - end) / 1000);
  rtt_scratch_remove();
}

Test(cli, a_lease_that_runs_out_while_redis_is_gone_stops_the_command) {
  char url[64];
  rtt_server s;
  rtt_proc p;
  rtt_private_url(&s, url, sizeof(url));
  rtt_cli_start(&p, 1,
                RTT_ARGS("run", "--url", url, "--ttl", "1s", "--grace", "100ms",
                         "job", "--", "sleep", "30"));
  /* Granted, then Redis goes away: no renewal can get through. */
  redisContext *priv = rtt_redis_at(s.port);
  uint64_t until = rtt_now_ms() + 10000;
  while (rtt_hfield(priv, rtt_prefix(), "job", 3, "f") < 0 &&
         rtt_now_ms() < until)
    rtt_sleep_ms(10);
  rtt_redis_close(priv);
  uint64_t t0 = rtt_now_ms();
  rtt_server_stop(&s);
  rtt_cli_wait(&p, 10000);
  RTT_ASSERT_CODE(&p, 70);
  rtt_assert_has(p.err, "lost the lock");
  /* lease (1 s) + release bound (2 s) + slack for a loaded machine; not
   * the 30 s a lease of the default TTL would take */
  cr_assert_lt(p.ended_ms - t0, 6000);
}
