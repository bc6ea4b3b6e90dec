/* Tests that need a redis-server of their own: unreachable Redis, script
 * cache loss (SCRIPT FLUSH, FUNCTION FLUSH) and clients on both script
 * paths, and counting the commands a waiting client sends (none: no
 * polling). Authentication is in api/it_security.c, stalled servers in
 * it_stalls.c. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "rt_test.h"

RTT_LOOP_SUITE(server, 30);

/* ---- unreachable ------------------------------------------------------------ */

Test(server, unreachable_redis_fails_connect_queued_waits_and_later_calls) {
  rt_options_t o;
  rtt_client a;
  rtt_req early = {0}, tr = {0};
  rtt_answer lk = {0};
  rtt_snapshot in = {0};
  rtt_options_at(&o, rtt_free_port());
  o.connect_timeout_ms = 2000;
  rtt_open(&a, &loop, &o);
  /* Made before the connect failed: queued, then failed with it. */
  cr_assert_eq(rtt_wait(a.c, "res", 5000, RT_FOREVER, &early), 0);
  cr_assert(rtt_run_until(&loop, &a.connects, 1, 5000), "no connect result");
  cr_assert_eq(a.connect_status, RT_ECONNECT, "connect: %s",
               rt_err_name(a.connect_status));
  cr_assert(rtt_run_until(&loop, &early.calls, 1, 5000));
  cr_assert_eq(early.status, RT_ECONNECT, "queued wait: %s",
               rt_err_name(early.status));

  /* Afterwards every request is refused with the same error. */
  rt_lock_t *l = NULL;
  cr_assert_eq(rt_wait(a.c, "res", 3, 5000, RT_FOREVER, rtt_lock_cb, &tr, &l),
               RT_ECONNECT);
  cr_assert_eq(rtt_try(a.c, "res", 5000, &tr), RT_ECONNECT);
  cr_assert_eq(rt_locked(a.c, "res", 3, rtt_locked_cb, &lk), RT_ECONNECT);
  cr_assert_eq(rt_inspect(a.c, "res", 3, 1, rtt_inspect_cb, &in), RT_ECONNECT);
  rtt_run_for(&loop, 300);
  cr_assert_eq(tr.calls + lk.calls + in.calls, 0);
  cr_assert_eq(a.connects, 1);
  cr_assert_eq(early.calls, 1);

  rtt_close(&a);
  rtt_loop_finish(&loop);
  cr_assert_eq(a.closes, 1);
}

/* ---- script cache loss -------------------------------------------------------- */

/* Every kind of call, each after "<flush> FLUSH" (SCRIPT or FUNCTION: the
 * server's scripts or functions are gone), on the script path path; the clients' stats on
 * it go into *st. */
static void recover_after_flush(const char *flush, int path, rt_stats_t *st) {
  rtt_server srv;
  rtt_server_start(&srv, NULL);
  redisContext *adm = rtt_redis_at(srv.port);
  rt_options_t o;
  rtt_client a, b;
  rtt_req held = {0}, waiter = {0}, tr = {0}, busy = {0};
  rtt_answer lk = {0}, ow = {0};
  rtt_snapshot in = {0};
  rtt_options_at(&o, srv.port);
  o.script_path = path;
  rtt_ok(adm, "%s FLUSH", flush);
  rtt_open_ready(&a, &loop, &o);
  rtt_open_ready(&b, &loop, &o);

  rtt_ok(adm, "%s FLUSH", flush);
  rtt_acquire(&loop, a.c, "res", 5000, &held);

  rtt_ok(adm, "%s FLUSH", flush);
  cr_assert_eq(rtt_extend(&held, 6000), 0);
  cr_assert(rtt_run_until(&loop, &held.ext_calls, 1, 5000));
  cr_assert_eq(held.ext_status, 0, "extend: %s", rt_err_name(held.ext_status));
  cr_assert_eq(held.ext_lease_ms, 6000);

  rtt_ok(adm, "%s FLUSH", flush);
  cr_assert_eq(rt_inspect(b.c, "res", 3, 5, rtt_inspect_cb, &in), 0);
  cr_assert(rtt_run_until(&loop, &in.calls, 1, 5000));
  cr_assert_eq(in.status, 0, "inspect: %s", rt_err_name(in.status));
  cr_assert_str_eq(in.holder, held.id);

  rtt_ok(adm, "%s FLUSH", flush);
  cr_assert_eq(rt_locked(b.c, "res", 3, rtt_locked_cb, &lk), 0);
  cr_assert(rtt_run_until(&loop, &lk.calls, 1, 5000));
  cr_assert_eq(lk.status, 0);
  cr_assert_eq(lk.value, 1);

  rtt_ok(adm, "%s FLUSH", flush);
  cr_assert_eq(rt_owned(held.lock, rtt_owned_cb, &ow), 0);
  cr_assert(rtt_run_until(&loop, &ow.calls, 1, 5000));
  cr_assert_eq(ow.status, 0);
  cr_assert_eq(ow.value, 1);

  rtt_ok(adm, "%s FLUSH", flush);
  cr_assert_eq(rtt_try(b.c, "other", 5000, &tr), 0);
  cr_assert(rtt_run_until(&loop, &tr.calls, 1, 5000));
  cr_assert_eq(tr.status, 0, "try: %s", rt_err_name(tr.status));
  rtt_ok(adm, "%s FLUSH", flush);
  cr_assert_eq(rtt_try(b.c, "res", 5000, &busy), 0);
  cr_assert(rtt_run_until(&loop, &busy.calls, 1, 5000));
  cr_assert_eq(busy.status, RT_EBUSY, "try on held: %s",
               rt_err_name(busy.status));

  rtt_ok(adm, "%s FLUSH", flush);
  cr_assert_eq(rtt_wait(b.c, "res", 5000, RT_FOREVER, &waiter), 0);
  rtt_run_until_queued(&loop, adm, "res", 2);

  rtt_ok(adm, "%s FLUSH", flush);
  rtt_release(&loop, &held, 0);
  cr_assert(rtt_run_until(&loop, &waiter.calls, 1, 5000));
  cr_assert_eq(waiter.status, 0);
  cr_assert_gt(waiter.fence, held.fence);

  rtt_ok(adm, "%s FLUSH", flush);
  rtt_release(&loop, &waiter, 0);
  rtt_release(&loop, &tr, 0);
  cr_assert_eq(rtt_qlen(adm, rtt_prefix(), "res", 3), 0);
  /* The scripts really were gone: the client had to send them again. */
  if (path == RT_SCRIPT_PATH_EVAL)
    cr_assert_gt(rtt_cmdstat_calls(adm, "eval"), 0);
  else
    cr_assert_gt(rtt_cmdstat_calls(adm, "function|load"), 2,
                 "the library was not loaded again");
  rt_client_stats(b.c, st);

  rtt_close(&a);
  rtt_close(&b);
  rtt_loop_finish(&loop);
  rtt_redis_close(adm);
}

Test(server, every_call_recovers_from_noscript_after_script_flush) {
  rt_stats_t st;
  recover_after_flush("SCRIPT", RT_SCRIPT_PATH_EVAL, &st);
  cr_assert_eq(st.script_path, RT_SCRIPT_PATH_EVAL);
  cr_assert_eq(st.fcalls, 0);
}

/* FUNCTION FLUSH (or a restart without persistence, a failover to a
 * server that never had the library): "Function not found" loads the
 * library again and the call is sent again, still by FCALL. */
Test(server, every_call_recovers_after_function_flush) {
  rt_stats_t st;
  recover_after_flush("FUNCTION", RT_SCRIPT_PATH_FUNCTIONS, &st);
  cr_assert_eq(st.script_path, RT_SCRIPT_PATH_FUNCTIONS);
  cr_assert_gt(st.fcalls, 0);
  cr_assert_eq(st.evals, 0, "%llu calls fell back to EVAL",
               (unsigned long long)st.evals);
}

/* Clients forced to different script paths share one resource: one FIFO
 * queue, each handoff to the next in line whatever its path, fences rising. */
Test(server, clients_on_both_paths_share_a_resource_in_fifo_order) {
  rtt_server srv;
  rtt_server_start(&srv, NULL);
  redisContext *adm = rtt_redis_at(srv.port);
  rt_options_t o;
  rtt_client c[2];
  rtt_req r[6];
  memset(r, 0, sizeof(r));
  for (int i = 0; i < 2; i++) {
    rtt_options_at(&o, srv.port);
    o.script_path = i == 0 ? RT_SCRIPT_PATH_EVAL : RT_SCRIPT_PATH_FUNCTIONS;
    rtt_open_ready(&c[i], &loop, &o);
  }
  /* r[k] waits through c[k % 2]: the paths alternate along the queue. */
  rtt_acquire(&loop, c[0].c, "res", 10000, &r[0]);
  for (int k = 1; k < 6; k++) {
    cr_assert_eq(rtt_wait(c[k % 2].c, "res", 10000, RT_FOREVER, &r[k]), 0);
    rtt_run_until_queued(&loop, adm, "res", k + 1);
  }
  for (int k = 0; k < 5; k++) {
    rtt_release(&loop, &r[k], 0);
    cr_assert(rtt_run_until(&loop, &r[k + 1].calls, 1, 5000),
              "waiter %d not granted", k + 1);
    cr_assert_eq(r[k + 1].status, 0);
    cr_assert_gt(r[k + 1].fence, r[k].fence);
    for (int j = k + 2; j < 6; j++)
      cr_assert_eq(r[j].calls, 0, "waiter %d granted before %d", j, k + 1);
  }
  rtt_release(&loop, &r[5], 0);
  cr_assert_eq(rtt_qlen(adm, rtt_prefix(), "res", 3), 0);
  rt_stats_t st[2];
  for (int i = 0; i < 2; i++)
    rt_client_stats(c[i].c, &st[i]);
  cr_assert_eq(st[0].script_path, RT_SCRIPT_PATH_EVAL);
  cr_assert_eq(st[0].fcalls, 0);
  cr_assert_eq(st[1].script_path, RT_SCRIPT_PATH_FUNCTIONS);
  cr_assert_eq(st[1].evals, 0);
  rtt_close(&c[0]);
  rtt_close(&c[1]);
  rtt_loop_finish(&loop);
  rtt_redis_close(adm);
  rtt_server_stop(&srv);
}

/* ---- no polling --------------------------------------------------------------- */

/* Script calls the server ran, on either path. */
static long long script_calls(redisContext *adm) {
  return rtt_script_calls(adm);
}

Test(server, waiting_clients_send_no_commands_and_a_handoff_costs_one_call) {
  rtt_server srv;
  rtt_server_start(&srv, NULL);
  redisContext *adm = rtt_redis_at(srv.port);
  rt_options_t o;
  rtt_client a, b, c;
  rtt_req holder = {0}, w[3];
  memset(w, 0, sizeof(w));
  rtt_options_at(&o, srv.port);
  rtt_open_ready(&a, &loop, &o);
  rtt_open_ready(&b, &loop, &o);
  rtt_open_ready(&c, &loop, &o);
  /* Load every script once (a fresh server answers NOSCRIPT first). */
  rtt_req warm = {0}, warm2 = {0};
  rtt_acquire(&loop, a.c, "warm", 10000, &warm);
  cr_assert_eq(rtt_wait(b.c, "warm", 10000, RT_FOREVER, &warm2), 0);
  rtt_run_until_queued(&loop, adm, "warm", 2);
  rtt_release(&loop, &warm, 0);
  cr_assert(rtt_run_until(&loop, &warm2.calls, 1, 5000));
  rtt_release(&loop, &warm2, 0);

  rtt_acquire(&loop, a.c, "res", 10000, &holder);
  for (int i = 0; i < 3; i++) {
    cr_assert_eq(rtt_wait(i == 2 ? c.c : b.c, "res", 10000, RT_FOREVER, &w[i]),
                 0);
  }
  rtt_run_until_queued(&loop, adm, "res", 4);
  rtt_run_for(&loop, 100);

  /* What our own INFO costs. */
  long long i0 = rtt_info_ll(adm, "stats", "total_commands_processed");
  long long i1 = rtt_info_ll(adm, "stats", "total_commands_processed");
  long long own = i1 - i0;
  long long scripts0 = script_calls(adm);
  long long t0 = rtt_info_ll(adm, "stats", "total_commands_processed");
  rtt_run_for(&loop, 1500);
  long long t1 = rtt_info_ll(adm, "stats", "total_commands_processed");
  long long scripts1 = script_calls(adm);
  long long others = t1 - t0 - own;
  cr_assert_leq(others, 2,
                "%lld commands in 1.5 s while 3 waiters wait: polling?",
                others);
  cr_assert_eq(scripts1, scripts0, "%lld script calls while waiting",
               scripts1 - scripts0);
  for (int i = 0; i < 3; i++)
    cr_assert_eq(w[i].calls, 0);

  /* The handoff: one script call (the release) and one SPUBLISH (the next
   * in line, w[1], is the new holder's own client: no notice for it). */
  long long pub0 = rtt_cmdstat_calls(adm, "spublish");
  cr_assert_eq(rtt_signal(&holder), 0);
  cr_assert(rtt_run_until(&loop, &w[0].calls, 1, 5000));
  cr_assert(rtt_run_until(&loop, &holder.sig_calls, 1, 5000));
  rtt_run_for(&loop, 200);
  long long scripts2 = script_calls(adm);
  long long pub1 = rtt_cmdstat_calls(adm, "spublish");
  cr_assert_eq(w[0].status, 0);
  cr_assert_eq(holder.sig_status, 0);
  cr_assert_eq(scripts2 - scripts1, 1, "%lld script calls for one handoff",
               scripts2 - scripts1);
  cr_assert_eq(pub1 - pub0, 1, "%lld SPUBLISH for one handoff", pub1 - pub0);
  cr_assert_eq(w[1].calls + w[2].calls, 0);

  rtt_release(&loop, &w[0], 0);
  cr_assert(rtt_run_until(&loop, &w[1].calls, 1, 5000));
  rtt_release(&loop, &w[1], 0);
  cr_assert(rtt_run_until(&loop, &w[2].calls, 1, 5000));
  rtt_release(&loop, &w[2], 0);
  rtt_close(&a);
  rtt_close(&b);
  rtt_close(&c);
  rtt_loop_finish(&loop);
  rtt_redis_close(adm);
}
