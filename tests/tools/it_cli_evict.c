/* redturn evict, redturn demo, and run and evict over TLS.
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

/* ---- evict --------------------------------------------------------------- */

Test(cli, evict_refuses_a_wrong_holder_and_hands_the_lock_to_the_next_waiter) {
  rtt_client a, b;
  rtt_req held = {0}, waiting = {0};
  rtt_proc p;
  rtt_open_ready(&a, &loop, NULL);
  rtt_open_ready(&b, &loop, NULL);
  rtt_acquire(&loop, a.c, "job", 20000, &held);
  cr_assert_eq(rtt_wait(b.c, "job", 5000, RT_FOREVER, &waiting), 0);
  rtt_run_until_queued(&loop, rc, "job", 2);

  rtt_cli(&p, RTT_ARGS("evict", "job", "--holder", waiting.id));
  RTT_ASSERT_CODE(&p, 1);
  rtt_assert_has(p.err, "refused");
  cr_assert_eq(rtt_queue_len(rc, "job"), 2,
               "a refused evict changed the queue");
  cr_assert_eq(rtt_hfield(rc, rtt_prefix(), "job", 3, "f"),
               (long long)held.fence);

  rtt_cli(&p, RTT_ARGS("evict", "job", "--holder", held.id));
  RTT_ASSERT_CODE(&p, 0);
  rtt_assert_has(p.out, held.id);
  rtt_assert_has(p.out, waiting.id);
  cr_assert(rtt_run_until(&loop, &waiting.calls, 1, 5000),
            "the next waiter was not granted");
  cr_assert_eq(waiting.status, 0);
  cr_assert_gt(waiting.fence, held.fence);
  cr_assert_eq(rtt_queue_len(rc, "job"), 1);
  /* The evicted holder hears of it. */
  cr_assert_eq(rtt_extend(&held, 5000), 0);
  cr_assert(rtt_run_until(&loop, &held.ext_calls, 1, 5000));
  cr_assert_eq(held.ext_status, RT_ELOST);
  rtt_release(&loop, &held, RT_ELOST);

  /* Without --holder: whoever holds it. */
  rtt_cli(&p, RTT_ARGS("evict", "job"));
  RTT_ASSERT_CODE(&p, 0);
  rtt_assert_has(p.out, "the queue is now empty");
  cr_assert_eq(rtt_queue_len(rc, "job"), 0);
  rtt_cli(&p, RTT_ARGS("evict", "job"));
  RTT_ASSERT_CODE(&p, 1);
  rtt_assert_has(p.err, "nobody holds");

  rtt_release(&loop, &waiting, RT_ELOST);
  rtt_close(&a);
  rtt_close(&b);
  rtt_loop_finish(&loop);
}

Test(cli, evict_stops_a_running_command_which_exits_70) {
  rtt_proc holder, ev;
  rtt_cli_start(&holder, 1,
                RTT_ARGS("run", "--ttl", "10s", "--grace", "200ms", "job", "--",
                         "sleep", "10"));
  rtt_run_until_queued(&loop, rc, "job", 1);
  char ids[1][RTT_ID_MAX];
  cr_assert_eq(rtt_queue(rc, rtt_prefix(), "job", 3, ids, 1), 1);
  rtt_cli(&ev, RTT_ARGS("evict", "job", "--holder", ids[0]));
  RTT_ASSERT_CODE(&ev, 0);
  rtt_cli_wait(&holder, 5000);
  RTT_ASSERT_CODE(&holder, 70);
  rtt_assert_has(holder.err, "lost the lock");
}

/* ---- demo ---------------------------------------------------------------- */

Test(cli, demo_runs_its_workers_fairly_on_the_test_server) {
  rtt_proc p;
  rtt_cli_start(
      &p, 1,
      RTT_ARGS("demo", "--workers", "3", "--rounds", "3", "--hold", "30ms"));
  rtt_cli_wait(&p, 30000);
  RTT_ASSERT_CODE(&p, 0);
  rtt_assert_has(p.out, "9 of 9 grants");
  rtt_assert_has(p.out, "fences strictly increase:    ok");
  rtt_assert_has(p.out, "holds never overlap:         ok");
  rtt_assert_has(p.out, "first come, first served:    ok");
  rtt_assert_has(p.out, "handoff latency:");
}

Test(cli, demo_starts_its_own_redis_server_without_a_url) {
  rtt_proc p;
  rtt_cli_start(&p, 0, RTT_ARGS("demo", "--workers", "2", "--rounds", "2"));
  rtt_cli_wait(&p, 30000);
  RTT_ASSERT_CODE(&p, 0);
  rtt_assert_has(p.out, "started redis-server");
  rtt_assert_has(p.out, "4 of 4 grants");
  rtt_assert_has(p.out, "stopped redis-server");
}

/* ---- TLS ------------------------------------------------------------------ */

Test(cli, run_over_rediss_trusts_the_ca_given_with_tls_ca) {
  rtt_tls t;
  rtt_proc p;
  rtt_tls_start(&t, "no");
  rtt_cli_bare(&p, RTT_ARGS("--url", t.url, "--tls-ca", t.ca, "--prefix",
                            rtt_prefix(), "run", "res", "--", "sh", "-c",
                            "exit 3"));
  RTT_ASSERT_CODE(&p, 3);
  /* Without the CA the server is not trusted: the certificate check's
   * words, and "Redis unreachable". */
  rtt_cli_bare(&p, RTT_ARGS("--url", t.url, "--prefix", rtt_prefix(), "run",
                            "res", "--", "true"));
  RTT_ASSERT_CODE(&p, 69);
  rtt_assert_has(p.err, "certificate verification failed");
  rtt_tls_stop(&t);
}

Test(cli, evict_over_rediss_hands_the_lock_to_the_next_waiter) {
  rtt_tls t;
  rtt_client a, b;
  rtt_req held = {0}, waiting = {0};
  rt_options_t o;
  rtt_proc p;
  rtt_tls_start(&t, "no");
  rtt_tls_options(&t, &o);
  rtt_open_ready(&a, &loop, &o);
  rtt_open_ready(&b, &loop, &o);
  rtt_acquire(&loop, a.c, "job", 20000, &held);
  rtt_wait_queued(&loop, b.c, "job", 20000, &waiting);

  rtt_cli_bare(&p, RTT_ARGS("--url", t.url, "--tls-ca", t.ca, "--prefix",
                            rtt_prefix(), "evict", "job", "--holder", held.id));
  RTT_ASSERT_CODE(&p, 0);
  rtt_expect_evicted(&loop, &held, &waiting, p.out);
  rtt_close(&a);
  rtt_close(&b);
  rtt_loop_finish(&loop);
  rtt_tls_stop(&t);
}

Test(cli, evict_refuses_a_semaphore_saying_only_a_mutex_can_be_evicted) {
  rtt_client a;
  rtt_req held = {0};
  rtt_proc p;
  rtt_open_ready(&a, &loop, NULL);
  const rt_request_t one = {RT_KIND_SEMAPHORE, 1, 2, 0, NULL, 0};
  cr_assert_eq(rt_wait_ex(a.c, "sem", 3, &one, 20000, RT_FOREVER, rtt_lock_cb,
                          &held, &held.lock),
               0);
  cr_assert(rtt_run_until(&loop, &held.calls, 1, 5000));
  cr_assert_eq(held.status, 0);
  rtt_cli(&p, RTT_ARGS("evict", "sem"));
  RTT_ASSERT_CODE(&p, 76);
  rtt_assert_has(p.err, "only a mutex's holder can be evicted");
  rtt_assert_has(p.err, "semaphore of 2 permits");
  rtt_release(&loop, &held, 0);
  rtt_close(&a);
  rtt_loop_finish(&loop);
}
