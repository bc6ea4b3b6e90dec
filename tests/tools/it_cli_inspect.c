/* redturn inspect (text, JSON, Prometheus, labels, stalled holders) and
 * redturn watch.
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

/* ---- inspect ------------------------------------------------------------- */

Test(cli, inspect_json_shows_holder_fence_lease_and_waiters) {
  rtt_client a, b;
  rtt_req held = {0}, waiting = {0};
  rtt_proc p;
  rtt_open_ready(&a, &loop, NULL);
  rtt_open_ready(&b, &loop, NULL);
  rtt_acquire(&loop, a.c, "job", 20000, &held);
  cr_assert_eq(rtt_wait(b.c, "job", 5000, RT_FOREVER, &waiting), 0);
  rtt_run_until_queued(&loop, rc, "job", 2);

  rtt_cli(&p, RTT_ARGS("inspect", "job", "free-one", "--json"));
  RTT_ASSERT_CODE(&p, 0);
  char *second = strchr(p.out, '\n');
  cr_assert_not_null(second);
  *second++ = '\0';
  char want[256];
  rtt_assert_has(p.out, "{\"resource\":\"job\",\"locked\":true");
  snprintf(want, sizeof(want), "\"holder\":\"%s\"", held.id);
  rtt_assert_has(p.out, want);
  snprintf(want, sizeof(want), "\"holder_client\":\"%s\"", rt_client_id(a.c));
  rtt_assert_has(p.out, want);
  cr_assert_eq(rtt_json_num(p.out, "fence"), (long long)held.fence);
  cr_assert_eq(rtt_json_num(p.out, "queue_length"), 2);
  snprintf(want, sizeof(want), "\"waiters\":[\"%s\"]", waiting.id);
  rtt_assert_has(p.out, want);
  long long lease = rtt_json_num(p.out, "lease_left_ms");
  cr_assert(lease > 10000 && lease <= 20000, "lease %lld", lease);
  cr_assert_geq(rtt_json_num(p.out, "held_ms"), 0);
  rtt_assert_has(p.out, "\"stalled\":false,\"stall_reason\":null");
  cr_assert_gt(rtt_json_num(p.out, "server_time_ms"), 0);
  /* The CLI's client takes the default path: the Functions library. */
  /* The CLI's client takes the module where the shared server has it
   * (the tests' module mode). */
  rtt_assert_has(p.out, rtt_module_mode() ? "\"script_path\":\"module\""
                                          : "\"script_path\":\"functions\"");

  rtt_assert_has(second, "{\"resource\":\"free-one\",\"locked\":false,"
                         "\"holder\":null,\"holder_label\":null,"
                         "\"holder_client\":null,\"fence\":0");
  rtt_assert_has(second, "\"queue_length\":0,\"waiters\":[]");

  /* The text form says the same for people. */
  rtt_cli(&p, RTT_ARGS("inspect", "job"));
  RTT_ASSERT_CODE(&p, 0);
  rtt_assert_has(p.out, held.id);
  rtt_assert_has(p.out, waiting.id);
  rtt_assert_has(p.out, "queue:       2 (holder + 1 waiting)");
  rtt_assert_has(p.out,
                 rtt_module_mode()
                     ? "read by:     redturn.inspect (the redturn module)"
                     : "read by:     FCALL_RO (the Functions library)");

  rtt_release(&loop, &held, 0);
  cr_assert(rtt_run_until(&loop, &waiting.calls, 1, 5000));
  rtt_release(&loop, &waiting, 0);
  rtt_close(&a);
  rtt_close(&b);
  rtt_loop_finish(&loop);
}

Test(cli, run_labels_its_request_and_inspect_shows_the_labels) {
  rtt_proc holder, waiter, p;
  char ids[2][RTT_ID_MAX], want[512], host[256] = "";
  rtt_cli_start(
      &holder, 1,
      RTT_ARGS("run", "--label", "build-42", "lab", "--", "sleep", "20"));
  rtt_run_until_queued(&loop, rc, "lab", 1);
  rtt_cli_start(&waiter, 1,
                RTT_ARGS("run", "lab", "--", "true")); /* no --label */
  rtt_run_until_queued(&loop, rc, "lab", 2);
  cr_assert_eq(rtt_queue(rc, rtt_prefix(), "lab", 3, ids, 2), 2);
  gethostname(host, sizeof(host) - 1);
  char dflt[300];
  snprintf(dflt, sizeof(dflt), "%s:%d", host, (int)waiter.pid);

  rtt_cli(&p, RTT_ARGS("inspect", "lab"));
  RTT_ASSERT_CODE(&p, 0);
  snprintf(want, sizeof(want), "holder:      %s \"build-42\"\n", ids[0]);
  rtt_assert_has(p.out, want);
  snprintf(want, sizeof(want), "  1. %s \"%s\"\n", ids[1], dflt);
  rtt_assert_has(p.out, want);

  rtt_cli(&p, RTT_ARGS("inspect", "lab", "--json"));
  RTT_ASSERT_CODE(&p, 0);
  snprintf(want, sizeof(want),
           "\"holder\":\"%s\",\"holder_label\":\"build-42\"", ids[0]);
  rtt_assert_has(p.out, want);
  snprintf(want, sizeof(want), "\"waiter_labels\":[\"%s\"]", dflt);
  rtt_assert_has(p.out, want);

  rtt_cli(&p, RTT_ARGS("inspect", "lab", "--prom"));
  RTT_ASSERT_CODE(&p, 0);
  snprintf(want, sizeof(want),
           "redturn_holder_info{resource=\"lab\",holder=\"%s\","
           "label=\"build-42\"} 1\n",
           ids[0]);
  rtt_assert_has(p.out, want);

  kill(holder.pid, SIGTERM);
  rtt_cli_wait(&holder, 10000);
  RTT_ASSERT_CODE(&holder, 128 + SIGTERM);
  rtt_cli_wait(&waiter, 10000);
  RTT_ASSERT_CODE(&waiter, 0);

  /* Not printable ASCII, or too long: refused before connecting. */
  rtt_cli(&p, RTT_ARGS("run", "--label", "tab\there", "lab", "true"));
  RTT_ASSERT_CODE(&p, 64);
  rtt_assert_has(p.err, "label: byte 3 (0x09) is not printable ASCII");
}

Test(cli, inspect_flags_stalled_holders) {
  rtt_client a;
  rtt_req shortlived = {0}, longlived = {0};
  rtt_proc p;
  rtt_open_ready(&a, &loop, NULL);
  rtt_acquire(&loop, a.c, "short", 200, &shortlived);
  rtt_acquire(&loop, a.c, "long", 20000, &longlived);
  /* Nobody waits, so nobody reaps: still the holder's record ends with its
   * lease by itself, and an expired lease is no stalled holder but a free
   * resource. */
  rtt_sleep_ms(400);

  rtt_cli(&p, RTT_ARGS("inspect", "--json", "short"));
  RTT_ASSERT_CODE(&p, 0);
  rtt_assert_has(p.out, "{\"resource\":\"short\",\"locked\":false,"
                        "\"holder\":null");
  rtt_assert_has(p.out, "\"lease_left_ms\":null,\"queue_length\":0");
  rtt_assert_has(p.out, "\"stalled\":false,\"stall_reason\":null");

  rtt_cli(&p, RTT_ARGS("inspect", "--json", "long"));
  rtt_assert_has(p.out, "\"stalled\":false");
  rtt_cli(&p, RTT_ARGS("inspect", "--json", "--stall-after", "300ms", "long"));
  RTT_ASSERT_CODE(&p, 0);
  rtt_assert_has(p.out, "\"stalled\":true,\"stall_reason\":\"held_too_long\"");

  rtt_cli(&p, RTT_ARGS("inspect", "short", "--stall-after", "1s"));
  RTT_ASSERT_CODE(&p, 0);
  rtt_assert_has(p.out, "state:       free");
  cr_assert_null(strstr(p.out, "stalled:     YES"), "%s", p.out);
  rtt_cli(&p, RTT_ARGS("inspect", "long", "--stall-after", "1ms"));
  RTT_ASSERT_CODE(&p, 0);
  rtt_assert_has(p.out, "stalled:     YES");

  rtt_release(&loop, &shortlived, RT_ELOST);
  rtt_release(&loop, &longlived, 0);
  rtt_close(&a);
  rtt_loop_finish(&loop);
}

Test(cli, inspect_prom_prints_gauges_with_escaped_resource_labels) {
  static const char name[] = "a\"b\\c\nd\001";
  rtt_client a;
  rtt_req held = {0};
  rtt_proc p;
  rtt_open_ready(&a, &loop, NULL);
  rtt_acquire(&loop, a.c, name, 20000, &held);

  rtt_cli(&p, RTT_ARGS("inspect", "--prom", name, "other"));
  RTT_ASSERT_CODE(&p, 0);
  rtt_assert_has(p.out, "# TYPE redturn_queue_length gauge\n");
  rtt_assert_has(p.out, "# HELP redturn_lease_left_ms ");
  rtt_assert_has(
      p.out, "redturn_queue_length{resource=\"a\\\"b\\\\c\\nd\\\\x01\"} 1\n");
  rtt_assert_has(p.out,
                 "redturn_locked{resource=\"a\\\"b\\\\c\\nd\\\\x01\"} 1\n");
  rtt_assert_has(p.out, "redturn_stalled{resource=\"other\"} 0\n");
  char want[128];
  snprintf(want, sizeof(want),
           "redturn_fence{resource=\"a\\\"b\\\\c\\nd\\\\x01\"} %llu\n",
           (unsigned long long)held.fence);
  rtt_assert_has(p.out, want);
  /* Every line is a comment or "name{labels} value": nothing else. */
  for (char *line = p.out; *line != '\0';) {
    char *nl = strchr(line, '\n');
    cr_assert_not_null(nl, "unterminated line: %s", line);
    cr_assert(line[0] == '#' || strncmp(line, "redturn_", 8) == 0,
              "stray line: %.*s", (int)(nl - line), line);
    line = nl + 1;
  }

  rtt_release(&loop, &held, 0);
  rtt_close(&a);
  rtt_loop_finish(&loop);
}

/* ---- watch --------------------------------------------------------------- */

Test(cli, watch_prints_a_snapshot_when_something_changes) {
  rtt_client a;
  rtt_req held = {0};
  rtt_proc p;
  rtt_open_ready(&a, &loop, NULL);

  rtt_cli_start(&p, 1,
                RTT_ARGS("watch", "job", "--json", "--interval", "50ms"));
  rtt_lines_goal g = {&p, 1};
  cr_assert(rtt_run_until_fn(&loop, rtt_cli_has_lines, &g, 5000),
            "no first line");
  rtt_acquire(&loop, a.c, "job", 20000, &held);
  g.n = 2;
  cr_assert(rtt_run_until_fn(&loop, rtt_cli_has_lines, &g, 5000),
            "no second line");
  rtt_release(&loop, &held, 0);
  g.n = 3;
  cr_assert(rtt_run_until_fn(&loop, rtt_cli_has_lines, &g, 5000),
            "no third line");
  rtt_run_for(&loop, 300); /* unchanged refreshes print nothing */
  kill(p.pid, SIGINT);
  rtt_cli_wait(&p, 5000);
  RTT_ASSERT_CODE(&p, 0);
  /* free, held, free again: three lines, not one per refresh. */
  cr_assert_eq(rtt_count_lines(p.out), 3, "stdout:\n%s", p.out);
  rtt_assert_has(p.out, held.id);
  rtt_close(&a);
  rtt_loop_finish(&loop);
}

Test(cli, watch_stops_cleanly_on_sigint) {
  rtt_proc p;
  rtt_cli_start(&p, 1, RTT_ARGS("watch", "job", "--interval", "0.05"));
  rtt_sleep_ms(300);
  kill(p.pid, SIGINT);
  rtt_cli_wait(&p, 5000);
  RTT_ASSERT_CODE(&p, 0);
  rtt_assert_has(p.out, "resource:    \"job\"");
}

typedef struct text_goal {
  rtt_proc *p;
  const char *text;
} text_goal;

static int has_text(void *arg) {
  text_goal *g = arg;
  rtt_cli_poll(g->p);
  return strstr(g->p->out, g->text) != NULL;
}

Test(cli, watch_says_reconnecting_at_once_when_redis_goes_away) {
  char url[64];
  rtt_server s;
  rtt_proc p;
  rtt_private_url(&s, url, sizeof(url));
  rtt_cli_start(&p, 1,
                RTT_ARGS("watch", "--url", url, "job", "--interval", "100ms"));
  text_goal g = {&p, "state:       free"};
  cr_assert(rtt_run_until_fn(&loop, has_text, &g, 5000), "no first snapshot");
  uint64_t t0 = rtt_now_ms();
  rtt_server_stop(&s);
  /* A request made while the client reconnects waits 5 s (the command
   * timeout) before it fails: the view must not wait for that. */
  g.text = "state:       reconnecting to Redis";
  cr_assert(rtt_run_until_fn(&loop, has_text, &g, 10000),
            "never said reconnecting; stdout:\n%s", p.out);
  uint64_t said = rtt_now_ms() - t0;
  cr_assert_lt(said, 2000, "said reconnecting after %llu ms",
               (unsigned long long)said);
  kill(p.pid, SIGINT);
  rtt_cli_wait(&p, 5000);
  RTT_ASSERT_CODE(&p, 0);
}
