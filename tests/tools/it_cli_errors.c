/* The redturn command's help, usage errors (exit 64) and messages: long
 * names cut, what is wrong said; a key of the wrong type reported; a
 * server that does not suit (exit 78).
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

/* ---- help and usage ------------------------------------------------------ */

Test(cli, every_subcommand_has_help_that_exits_0) {
  static const char *const cmds[] = {"run",   "inspect", "watch",
                                     "evict", "leader",  "demo"};
  rtt_proc p;
  char usage[64];
  for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
    snprintf(usage, sizeof(usage), "Usage: redturn %s", cmds[i]);
    rtt_cli_bare(&p, RTT_ARGS(cmds[i], "--help"));
    RTT_ASSERT_CODE(&p, 0);
    rtt_assert_has(p.out, usage);
    rtt_cli_bare(&p, RTT_ARGS("help", cmds[i]));
    RTT_ASSERT_CODE(&p, 0);
    rtt_assert_has(p.out, usage);
    rtt_cli_bare(&p, RTT_ARGS(cmds[i], "-h"));
    RTT_ASSERT_CODE(&p, 0);
  }
  rtt_cli_bare(&p, RTT_ARGS("--help"));
  RTT_ASSERT_CODE(&p, 0);
  rtt_assert_has(p.out, "Exit codes");
  rtt_cli_bare(&p, RTT_ARGS("--version"));
  RTT_ASSERT_CODE(&p, 0);
  rtt_assert_has(p.out, rt_version_string());
}

Test(cli, usage_errors_exit_64) {
  const char *const *const cases[] = {
      RTT_ARGS("nonsense"),
      RTT_ARGS("run"),
      RTT_ARGS("run", "res"),
      RTT_ARGS("run", "--ttl", "soon", "res", "--", "true"),
      RTT_ARGS("run", "--ttl", "0", "res", "--", "true"),
      RTT_ARGS("run", "--bogus", "res", "--", "true"),
      RTT_ARGS("run", "", "--", "true"),
      RTT_ARGS("inspect"),
      RTT_ARGS("leader"),
      RTT_ARGS("leader", "a", "b"),
      RTT_ARGS("leader", ""),
      RTT_ARGS("inspect", "res", "--max-waiters", "-1"),
      RTT_ARGS("watch", "res", "--interval"),
      RTT_ARGS("evict"),
      RTT_ARGS("evict", "a", "b"),
      RTT_ARGS("demo", "--workers", "0"),
      RTT_ARGS("--url", "http://example", "run", "res", "--", "true"),
      RTT_ARGS("--url", "redis-sentinel://h", "inspect", "res"),
      RTT_ARGS("--prefix", "a{b", "inspect", "res"),
      /* durations: a bare number is seconds; nothing else is guessed */
      RTT_ARGS("run", "-w", "1x", "res", "--", "true"),
      RTT_ARGS("run", "-w", "-1", "res", "--", "true"),
      RTT_ARGS("run", "-w", ".5", "res", "--", "true"),
      RTT_ARGS("run", "-w", "0.0001", "res", "--", "true"),
      RTT_ARGS("run", "-w", "99999999999999999999", "res", "--", "true"),
      RTT_ARGS("run", "--ttl", "500ms", "res", "--", "true"), /* too short */
      RTT_ARGS("run", "--ttl", "25h", "res", "--", "true"),
      RTT_ARGS("run", "-E", "256", "res", "--", "true"),
      RTT_ARGS("run", "-E", "x", "res", "--", "true"),
      RTT_ARGS("run", "-c", "true", "res", "true"),
      RTT_ARGS("run", "-c"),
      RTT_ARGS("inspect", "res", "--json", "--prom"),
      RTT_ARGS("--url", "unix:///run/redis.sock", "inspect", "res"),
  };
  rtt_proc p;
  rtt_cli_bare(&p, (const char *const[]){NULL});
  RTT_ASSERT_CODE(&p, 64);
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    rtt_cli_bare(&p, cases[i]);
    cr_assert_eq(p.code, 64, "case %zu (%s %s): exit %d; stderr:\n%s", i,
                 cases[i][0], cases[i][1] ? cases[i][1] : "", p.code, p.err);
    cr_assert_gt(p.lens[1], 0, "case %zu: no message on stderr", i);
  }
}

/* ---- messages ------------------------------------------------------------ */

Test(cli, messages_cut_long_names_and_say_what_is_wrong) {
  static char name[RT_NAME_MAX + 1];
  rtt_client a;
  rtt_req held = {0};
  rtt_proc p;
  memset(name, 'n', RT_NAME_MAX);
  rtt_open_ready(&a, &loop, NULL);
  rtt_acquire(&loop, a.c, name, 20000, &held);
  rtt_cli(&p, RTT_ARGS("run", "-n", name, "true"));
  RTT_ASSERT_CODE(&p, 1);
  rtt_assert_has(p.err, "nnn\"... (4096 bytes) is locked");
  cr_assert_lt(p.lens[1], 300, "stderr:\n%s", p.err);
  rtt_release(&loop, &held, 0);
  rtt_close(&a);
  rtt_loop_finish(&loop);

  rtt_cli_bare(
      &p, RTT_ARGS("--url", "redis+unix://u:secret@localhost", "inspect", "x"));
  RTT_ASSERT_CODE(&p, 64);
  rtt_assert_has(p.err, "(a Unix socket) is not supported");
  cr_assert_null(strstr(p.err, "secret"), "%s", p.err);
  rtt_cli_bare(&p,
               RTT_ARGS("--url", "redis://localhost:0", "run", "x", "true"));
  RTT_ASSERT_CODE(&p, 64);
  rtt_assert_has(p.err, "url: port");
  rtt_cli_bare(&p, RTT_ARGS("--url", "redis://localhost/db1", "evict", "x"));
  RTT_ASSERT_CODE(&p, 64);
  rtt_assert_has(p.err, "url: the db after '/'");
  rtt_cli_bare(&p, RTT_ARGS("--url", "redis-sentinel://:secret@h1,h2#mymaster",
                            "inspect", "x"));
  RTT_ASSERT_CODE(&p, 69);
  rtt_assert_has(p.err, "no Sentinel gave the address of master \"mymaster\": "
                        "h1:26379: resolve: ");
  cr_assert_null(strstr(p.err, "secret"), "%s", p.err);

  /* Redis's own words for a refused AUTH. */
  char url[128];
  snprintf(url, sizeof(url), "redis://nobody:wrong@%s:%d", rtt_host(),
           rtt_port());
  rtt_cli_bare(&p, RTT_ARGS("--url", url, "inspect", "x"));
  RTT_ASSERT_CODE(&p, 77);
  rtt_assert_has(p.err, "WRONGPASS");
  cr_assert_null(strstr(p.err, "wrong@"), "%s", p.err);
}

/* ?script_path=module on a server without the module: exit 69, saying
that the module is missing and how to load it (not "server too old"). */
Test(cli, the_module_path_without_the_module_says_so) {
  rtt_server srv;
  rtt_server_start_lua(&srv, NULL);
  char url[128];
  snprintf(url, sizeof(url), "redis://127.0.0.1:%d/?script_path=module",
           srv.port);
  rtt_proc p;
  rtt_cli_bare(&p, RTT_ARGS("--url", url, "run", "x", "--", "true"));
  RTT_ASSERT_CODE(&p, 69);
  rtt_assert_has(p.err, "has no redturn module");
  rtt_assert_has(p.err, "--loadmodule");
  cr_assert_null(strstr(p.err, "too old"), "%s", p.err);
  rtt_server_stop(&srv);
}

Test(cli, a_key_of_the_wrong_type_is_reported_and_nothing_changes) {
  char q[128], h[128];
  rtt_proc p;
  rtt_key(q, sizeof(q), rtt_prefix(), "job", 3, 'q');
  rtt_key(h, sizeof(h), rtt_prefix(), "job", 3, 'h');
  rtt_ok(rc, "SET %s x", q);
  rtt_cli(&p, RTT_ARGS("inspect", "job"));
  RTT_ASSERT_CODE(&p, 76);
  rtt_assert_has(p.err, "wrong type");
  rtt_cli(&p, RTT_ARGS("evict", "job"));
  RTT_ASSERT_CODE(&p, 76);

  /* A holder and a waiter, and a member hash that is not a hash: the
   * holder record (a STRING with its own PX) is valid, so only the type
   * check before any write keeps evict from removing it. Read raw: the
   * helpers cannot read a resource with a key of the wrong type. */
  char m[128], rec[160];
  rtt_key(m, sizeof(m), rtt_prefix(), "job", 3, 'm');
  rtt_ok(rc, "DEL %s", q);
  rtt_ok(rc, "RPUSH %s 0123456789abcdef0123456789abcdef:2", q);
  long long now = rtt_redis_time_ms(rc);
  snprintf(rec, sizeof(rec), "7:%lld:%lld:0123456789abcdef0123456789abcdee:1",
           now + 20000, now);
  rtt_ok(rc, "SET %s %s PX 20000", h, rec);
  rtt_ok(rc, "SET %s x", m);
  rtt_cli(&p, RTT_ARGS("evict", "job"));
  RTT_ASSERT_CODE(&p, 76);
  redisReply *r = rtt_cmd(rc, "GET %s", h);
  cr_assert_eq(r->type, REDIS_REPLY_STRING,
               "the failed evict removed the holder");
  cr_assert_str_eq(r->str, rec, "the failed evict changed the holder");
  freeReplyObject(r);
  cr_assert_eq(rtt_int(rc, "LLEN %s", q), 1,
               "the failed evict popped a waiter");
  r = rtt_cmd(rc, "GET %s", m);
  cr_assert_eq(r->type, REDIS_REPLY_STRING);
  cr_assert_str_eq(r->str, "x");
  freeReplyObject(r);
  rtt_ok(rc, "DEL %s %s %s", q, h, m);
}

/* A server redturn cannot use as configured (RT_EEVICTION here; RT_ESERVER
 * alike): EX_CONFIG, not the internal error of exit 71. */
Test(cli, a_server_that_may_evict_keys_exits_78_and_says_why) {
  rtt_server srv;
  rtt_server_start(&srv, RTT_ARGS("--maxmemory-policy", "allkeys-lru"));
  char url[64];
  snprintf(url, sizeof(url), "redis://127.0.0.1:%d", srv.port);
  rtt_proc p;
  rtt_cli_bare(&p, RTT_ARGS("inspect", "--url", url, "job"));
  RTT_ASSERT_CODE(&p, 78);
  rtt_assert_has(p.err, "maxmemory-policy");
  rtt_server_stop(&srv);
}
