/* Security, on a private redis-server: passwords (by option and in the
 * URL) and ACL users, a least-privilege ACL rule (and that every permission in it is needed),
 * crafted resource names that must stay inside their own keys. */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "redturn.h"
#include "rt_test.h"

RTT_LOOP_SUITE(security, 60);

/* Open a client with these credentials and return its connect status; on
 * success it also takes and releases a lock. A wait made before the
 * connect completes shares the connect's fate. */
static int try_credentials(int port, const char *url, const char *user,
                           const char *pass) {
  rt_options_t o;
  rtt_client a;
  rtt_req early = {0};
  rtt_options_at(&o, port);
  o.url = url;
  o.username = user;
  o.password = pass;
  rtt_open(&a, &loop, &o);
  cr_assert_eq(rtt_wait(a.c, "res", 5000, RT_FOREVER, &early), 0);
  cr_assert(rtt_run_until(&loop, &a.connects, 1, 5000), "no connect result");
  cr_assert(rtt_run_until(&loop, &early.calls, 1, 5000), "the wait hangs");
  if (a.connect_status == 0) {
    cr_assert_eq(early.status, 0, "wait: %s", rt_err_name(early.status));
    rtt_release(&loop, &early, 0);
  } else {
    cr_assert_eq(early.status, a.connect_status, "wait %s, connect %s",
                 rt_err_name(early.status), rt_err_name(a.connect_status));
    rtt_req late = {0};
    cr_assert_eq(rtt_wait(a.c, "res", 5000, RT_FOREVER, &late),
                 a.connect_status);
  }
  rtt_close(&a);
  cr_assert(rtt_run_until(&loop, &a.closes, 1, 5000));
  rtt_run_for(&loop, 10);
  cr_assert_eq(a.connects, 1);
  return a.connect_status;
}

/* A password by option or in the URL (percent-encoded, with ':', '@' and
 * '%' in it): the right one works, a wrong or missing one is RT_EAUTH. */
Test(security, a_wrong_or_missing_password_is_eauth_and_the_right_one_works) {
  static const char *const args[] = {"--requirepass", "pa:ss@w%rd", NULL};
  rtt_server srv;
  rtt_server_start(&srv, args);
  int st;
  st = try_credentials(srv.port, NULL, NULL, "wrong");
  cr_assert_eq(st, RT_EAUTH, "wrong password: %s", rt_err_name(st));
  st = try_credentials(srv.port, NULL, NULL, NULL);
  cr_assert_eq(st, RT_EAUTH, "no password: %s", rt_err_name(st));
  st = try_credentials(srv.port, NULL, NULL, "pa:ss@w%rd");
  cr_assert_eq(st, 0, "right password: %s", rt_err_name(st));

  char url[128];
  snprintf(url, sizeof(url), "redis://:pa%%3Ass%%40w%%25rd@127.0.0.1:%d",
           srv.port);
  st = try_credentials(srv.port, url, NULL, NULL);
  cr_assert_eq(st, 0, "password in the URL: %s", rt_err_name(st));
  snprintf(url, sizeof(url), "redis://:wrong@127.0.0.1:%d", srv.port);
  st = try_credentials(srv.port, url, NULL, NULL);
  cr_assert_eq(st, RT_EAUTH, "wrong password in the URL: %s", rt_err_name(st));
  rtt_loop_finish(&loop);
  rtt_server_stop(&srv);
}

Test(security, acl_users_authenticate_by_name_and_password) {
  rtt_server srv;
  rtt_server_start(&srv, NULL);
  redisContext *adm = rtt_redis_at(srv.port);
  rtt_ok(adm, "ACL SETUSER alice on >alicepw ~* &* +@all");
  /* bob may not run scripts (nor, where the server has the module, its
   * commands). */
  rtt_ok(adm, rtt_module_mode()
                  ? "ACL SETUSER bob on >bobpw ~* &* +@all -eval -evalsha "
                    "-fcall -fcall_ro -redturn.enqueue -redturn.try "
                    "-redturn.release -redturn.reap -redturn.extend "
                    "-redturn.inspect"
                  : "ACL SETUSER bob on >bobpw ~* &* +@all -eval -evalsha "
                    "-fcall -fcall_ro");
  rtt_ok(adm, "ACL SETUSER default off");

  int st = try_credentials(srv.port, NULL, "alice", "alicepw");
  cr_assert_eq(st, 0, "alice: %s", rt_err_name(st));
  st = try_credentials(srv.port, NULL, "alice", "bobpw");
  cr_assert_eq(st, RT_EAUTH, "alice with a wrong password: %s",
               rt_err_name(st));
  st = try_credentials(srv.port, NULL, "mallory", "alicepw");
  cr_assert_eq(st, RT_EAUTH, "unknown user: %s", rt_err_name(st));

  char url[128];
  snprintf(url, sizeof(url), "redis://alice:alicepw@127.0.0.1:%d", srv.port);
  st = try_credentials(srv.port, url, NULL, NULL);
  cr_assert_eq(st, 0, "alice by URL: %s", rt_err_name(st));
  snprintf(url, sizeof(url), "redis://alice:wrong@127.0.0.1:%d", srv.port);
  st = try_credentials(srv.port, url, NULL, NULL);
  cr_assert_eq(st, RT_EAUTH, "alice by URL, wrong password: %s",
               rt_err_name(st));

  /* Connected, but every script call is denied. */
  rt_options_t o;
  rtt_client b;
  rtt_req w = {0};
  rtt_options_at(&o, srv.port);
  o.username = "bob";
  o.password = "bobpw";
  rtt_open_ready(&b, &loop, &o);
  cr_assert_eq(rtt_wait(b.c, "res", 5000, RT_FOREVER, &w), 0);
  cr_assert(rtt_run_until(&loop, &w.calls, 1, 5000));
  cr_assert_eq(w.status, RT_ENOPERM, "bob's wait: %s", rt_err_name(w.status));
  rtt_close(&b);
  rtt_loop_finish(&loop);
  rtt_redis_close(adm);
}

/* The least-privilege rule: only keys under the prefix, only the prefix's
 * client channels, and only the commands the library sends (in the
 * handshakes INFO, CLIENT SETNAME, CLIENT ID, CLIENT KILL of the client's
 * previous connection and FUNCTION LOAD (SCRIPT LOAD on the eval path), on
 * the subscriber SSUBSCRIBE and SUBSCRIBE; FCALL and FCALL_RO, or EVALSHA
 * and EVAL after a NOSCRIPT) plus those its scripts
 * call (SPUBLISH among them). AUTH needs no permission; SELECT is needed
 * only for a db other than 0. The test below proves that every entry of
 * acl_perms is needed, and that the library uses every entry of
 * acl_optional but still works when it is refused (CLIENT ID and CLIENT
 * KILL only serve the kill of a previous connection, whose failure the
 * library ignores). When the scripts change, keep these lists (and the
 * documented rule) in step. */
/* The script path's own commands come first: the Functions library's
 * (FUNCTION LOAD in the handshake and after "Function not found", FCALL,
 * FCALL_RO for inspect) or, on the eval path, EVALSHA, EVAL, SCRIPT LOAD. */
#define NPATH 3
static const char *const acl_fn_perms[NPATH] = {"+function|load", "+fcall",
                                                "+fcall_ro"};
static const char *const acl_eval_perms[NPATH] = {"+evalsha", "+eval",
                                                  "+script|load"};
static const char *const acl_common[] = {
    "+client|setname", "+info",     "+ssubscribe", "+subscribe",
    "+time",           "+get",      "+set",        "+del",
    "+pexpire",        "+spublish", "+lpop",       "+rpush",
    "+lindex",         "+llen",     "+lrange",     "+hget",
    "+hmget",          "+hset",     "+hdel",       "+hincrby",
    "+hexists",        "+hlen"};
#define NPERMS (NPATH + sizeof(acl_common) / sizeof(acl_common[0]))
static const char *const acl_optional[] = {"+client|id", "+client|kill"};
#define NOPTIONAL (sizeof(acl_optional) / sizeof(acl_optional[0]))

/* Entry i of the needed permissions (the path's, then the common ones),
 * then of acl_optional. */
static const char *acl_perm(size_t i) {
  if (i < NPATH)
    return rtt_script_path() == RT_SCRIPT_PATH_EVAL ? acl_eval_perms[i]
                                                    : acl_fn_perms[i];
  return i < NPERMS ? acl_common[i - NPATH] : acl_optional[i - NPERMS];
}

/* The rule for user, without entry skip of the lists (-1: complete). */
static void acl_rule(redisContext *adm, const char *user, int skip) {
  char cmd[1024];
  int n = snprintf(cmd, sizeof(cmd),
                   "ACL SETUSER %s reset on >pw ~%s:* &%s:c:* -@all", user,
                   rtt_prefix(), rtt_prefix());
  for (size_t i = 0; i < NPERMS + NOPTIONAL; i++)
    if ((int)i != skip)
      n += snprintf(cmd + n, sizeof(cmd) - (size_t)n, " %s", acl_perm(i));
  cr_assert_lt((size_t)n, sizeof(cmd));
  rtt_ok(adm, cmd);
}

/* A field of one ACL LOG entry (a flat list of name, value pairs in
 * RESP2), or NULL. */
static const redisReply *acl_log_field(const redisReply *e, const char *name) {
  if (e->type != REDIS_REPLY_ARRAY)
    return NULL;
  for (size_t i = 0; i + 1 < e->elements; i += 2)
    if (e->element[i]->type == REDIS_REPLY_STRING &&
        strcmp(e->element[i]->str, name) == 0)
      return e->element[i + 1];
  return NULL;
}

/* How many refusals ACL LOG holds for user; the objects refused (commands,
 * keys or channels) go into what, e.g. "client|kill,ft:c:..". */
static long long acl_refusals(redisContext *adm, const char *user, char *what,
                              size_t cap) {
  redisReply *r = rtt_cmd(adm, "ACL LOG");
  cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
  long long n = 0;
  size_t len = 0;
  what[0] = '\0';
  for (size_t i = 0; i < r->elements; i++) {
    const redisReply *u = acl_log_field(r->element[i], "username");
    const redisReply *obj = acl_log_field(r->element[i], "object");
    const redisReply *cnt = acl_log_field(r->element[i], "count");
    if (u == NULL || u->type != REDIS_REPLY_STRING || strcmp(u->str, user) != 0)
      continue;
    n += cnt != NULL && cnt->type == REDIS_REPLY_INTEGER ? cnt->integer : 1;
    if (obj != NULL && obj->type == REDIS_REPLY_STRING && len < cap)
      len += (size_t)snprintf(what + len, cap - len, "%s%s", len ? "," : "",
                              obj->str);
  }
  freeReplyObject(r);
  return n;
}

/* rt_inspect's answer: value 1 if it saw a holder and one waiter. */
static void inspect_cb(rt_client_t *c, int status, const rt_queue_info_t *info,
                       void *data) {
  rtt_answer *a = data;
  (void)c;
  a->calls++;
  a->status = status;
  a->value = status == 0 && info->locked && info->holder != NULL &&
             info->nwaiters == 1;
  a->at_ms = rtt_now_ms();
}

/* Everything a program does with the library; returns "" or the first
 * step that failed. */
static const char *acl_scenario(const rtt_server *s, redisContext *adm,
                                const char *user) {
  rt_options_t o;
  rtt_client a, b;
  rtt_req x1 = {0}, x2 = {0}, y1 = {0}, y2 = {0}, z1 = {0}, z2 = {0}, w2 = {0};
  rtt_answer lk = {0}, ins = {0};
  const char *fail = "";
  rtt_ok(adm, "FLUSHALL");
  rtt_ok(adm, "ACL LOG RESET");
  rtt_options_at(&o, s->port);
  o.script_path = rtt_lua_path(); /* the rule is the Lua path's */
  o.username = user;
  o.password = "pw";
  o.command_timeout_ms = 1000;
  rtt_open(&a, &loop, &o);
  rtt_open(&b, &loop, &o);
  RTT_RUN_UNTIL(&loop, a.connects && b.connects, 5000);
#define STEP(name, cond)                                                       \
  if (!*fail && !(cond))                                                       \
  fail = name
  STEP("connect", a.connect_status == 0 && b.connect_status == 0);
  /* Mid-session script cache loss: the next calls go through EVAL (the
   * eval path), or load the library again (Functions). */
  rtt_ok(adm, "SCRIPT FLUSH");
  rtt_ok(adm, "FUNCTION FLUSH");
  /* A fresh queue (grant at once); one behind it. */
  if (!*fail) {
    cr_assert_eq(rtt_wait(a.c, "x", 10000, 3000, &x1), 0);
    RTT_RUN_UNTIL(&loop, x1.calls, 3000);
  }
  STEP("wait on an empty queue", x1.calls && x1.status == 0);
  if (!*fail) {
    cr_assert_eq(rtt_wait(b.c, "x", 10000, 5000, &x2), 0);
    RTT_RUN_UNTIL(&loop, x2.calls || rt_lock_position(x2.lock) > 0, 3000);
  }
  STEP("wait behind a holder", !x2.calls && rt_lock_position(x2.lock) > 0);
  /* Extend, query. */
  if (!*fail) {
    rtt_extend(&x1, 10000);
    RTT_RUN_UNTIL(&loop, x1.ext_calls, 3000);
  }
  STEP("extend", x1.ext_calls && x1.ext_status == 0);
  if (!*fail) {
    rt_locked(b.c, "x", 1, rtt_locked_cb, &lk);
    RTT_RUN_UNTIL(&loop, lk.calls, 3000);
  }
  STEP("locked", lk.calls && lk.status == 0 && lk.value == 1);
  if (!*fail) {
    rt_inspect(b.c, "x", 1, 10, inspect_cb, &ins);
    RTT_RUN_UNTIL(&loop, ins.calls, 3000);
  }
  STEP("inspect", ins.calls && ins.status == 0 && ins.value == 1);
  /* Handoff (SPUBLISH to the other client), then the last release. */
  if (!*fail) {
    cr_assert_eq(rtt_signal(&x1), 0);
    RTT_RUN_UNTIL(&loop, x1.sig_calls && x2.calls, 3000);
  }
  STEP("release with handoff",
       x1.sig_status == 0 && x2.calls && x2.status == 0);
  if (!*fail) {
    cr_assert_eq(rtt_signal(&x2), 0);
    RTT_RUN_UNTIL(&loop, x2.sig_calls, 3000);
  }
  STEP("last release", x2.sig_calls && x2.sig_status == 0);
  /* A cancel behind a holder. */
  if (!*fail) {
    cr_assert_eq(rtt_wait(a.c, "y", 10000, 3000, &y1), 0);
    RTT_RUN_UNTIL(&loop, y1.calls, 3000);
    cr_assert_eq(rtt_wait(b.c, "y", 10000, 5000, &y2), 0);
    RTT_RUN_UNTIL(&loop, y2.calls || rt_lock_position(y2.lock) > 0, 3000);
    if (!y2.calls)
      rt_cancel(y2.lock);
    RTT_RUN_UNTIL(&loop, y2.calls, 3000);
  }
  STEP("cancel", y2.calls && y2.status == RT_ECANCELED);
  /* A lease that runs out: the watchdog reaps it. */
  if (!*fail) {
    cr_assert_eq(rtt_wait(a.c, "z", 150, 3000, &z1), 0);
    RTT_RUN_UNTIL(&loop, z1.calls, 3000);
    cr_assert_eq(rtt_wait(b.c, "z", 10000, 3000, &z2), 0);
    RTT_RUN_UNTIL(&loop, z2.calls, 3000);
  }
  STEP("reap an expired lease", z2.calls && z2.status == 0);
  /* A retried enqueue after the command connection is killed (the new
   * connection kills the old one again: CLIENT ID, CLIENT KILL). */
  if (!*fail) {
    cr_assert_eq(rtt_wait(b.c, "y", 10000, 5000, &w2), 0);
    RTT_RUN_UNTIL(&loop, w2.calls || rt_lock_position(w2.lock) > 0, 3000);
    rtt_kill_conn(adm, "cmd", rt_client_id(b.c));
    RTT_RUN_UNTIL(&loop, w2.calls || rtt_reconnects(b.c) >= 1, 3000);
    rtt_run_for(&loop, 200);
    if (!w2.calls && y1.lock != NULL) {
      cr_assert_eq(rtt_signal(&y1), 0);
      RTT_RUN_UNTIL(&loop, w2.calls, 3000);
    }
  }
  STEP("re-enqueue after a reconnect", w2.calls && w2.status == 0);
#undef STEP
  rtt_close(&a);
  rtt_close(&b);
  RTT_RUN_UNTIL(&loop, a.closes && b.closes, 10000);
  return fail;
}

/* Redis 7.0 words ACL refusals inside scripts without the NOPERM code:
 * "No permissions"; Valkey 8 "has no permissions". */
static int refused(const char *err) {
  return strstr(err, "NOPERM") != NULL ||
         strstr(err, "No permissions") != NULL ||
         strstr(err, "no permissions") != NULL || strstr(err, "can't") != NULL;
}

/* Run body as a script of the user of u, on the rule's path: EVAL, or
 * FCALL of a function adm loads (that rule has no EVAL). Returns its
 * integer answer, or -1 with the error in err. */
static long long as_script(redisContext *adm, redisContext *u, const char *body,
                           const char *key, char *err, size_t cap) {
  redisReply *r;
  const char *name = rtt_script_path() == RT_SCRIPT_PATH_EVAL ? NULL : "probe";
  if (name != NULL) {
    char lib[512];
    snprintf(lib, sizeof(lib),
             "#!lua name=rtt_probe\nredis.register_function('rtt_probe', "
             "function(KEYS, ARGV) %s end)",
             body);
    rtt_ok(adm, "FUNCTION LOAD REPLACE %s", lib);
    r = key != NULL ? redisCommand(u, "FCALL rtt_probe 1 %s", key)
                    : redisCommand(u, "FCALL rtt_probe 0");
  } else {
    r = key != NULL ? redisCommand(u, "EVAL %s 1 %s", body, key)
                    : redisCommand(u, "EVAL %s 0", body);
  }
  cr_assert_not_null(r);
  long long v = -1;
  err[0] = '\0';
  if (r->type == REDIS_REPLY_ERROR)
    snprintf(err, cap, "%s", r->str);
  else if (r->type == REDIS_REPLY_INTEGER)
    v = r->integer;
  freeReplyObject(r);
  return v;
}

Test(security, a_least_privilege_acl_user_works_and_is_refused_elsewhere,
     .timeout = 120) {
  rtt_server s;
  char err[256];
  /* The Lua path's rule (the module's is module/README.md's): a server
   * without the module, also in the tests' module mode. */
  rtt_server_start_lua(&s, NULL);
  redisContext *adm = rtt_redis_at(s.port);
  acl_rule(adm, "locker", -1);
  char what[512];
  const char *fail = acl_scenario(&s, adm, "locker");
  cr_assert_str_eq(fail, "", "under the least-privilege rule, '%s' failed",
                   fail);
  /* Nothing the library did was refused, not even a command whose error
   * it ignores. */
  cr_assert_eq(acl_refusals(adm, "locker", what, sizeof(what)), 0,
               "the rule refused the library: %s", what);

  /* The same user is refused everything else. */
  redisContext *u = rtt_redis_at(s.port);
  rtt_ok(u, "AUTH locker pw");
  rtt_err(u, err, sizeof(err), "SET other 1");
  cr_assert(refused(err), "%s", err);
  /* A command outside the rule, even on its own keys. */
  rtt_err(u, err, sizeof(err), "HGETALL %s:{x}:m", rtt_prefix());
  cr_assert(refused(err), "%s", err);
  rtt_err(u, err, sizeof(err), "SUBSCRIBE other:c:1");
  cr_assert(refused(err), "%s", err);
  rtt_err(u, err, sizeof(err), "SSUBSCRIBE other:c:1");
  cr_assert(refused(err), "%s", err);
  as_script(adm, u, "return redis.call('RPUSH', KEYS[1], 'v')", "other:{x}:q",
            err, sizeof(err));
  cr_log_info("a script touching another key: %s", err);
  cr_assert(refused(err), "%s", err);
  as_script(adm, u, "return redis.call('SPUBLISH', 'other:c:1', 'v')", NULL,
            err, sizeof(err));
  cr_log_info("a script publishing elsewhere: %s", err);
  cr_assert(refused(err), "%s", err);
  as_script(adm, u, "return redis.call('FLUSHALL')", NULL, err, sizeof(err));
  cr_log_info("a script calling a forbidden command: %s", err);
  cr_assert(refused(err), "%s", err);
  /* ...while its own keys and channels are fine through a script. */
  char own[160];
  snprintf(own, sizeof(own), "%s:{probe}:q", rtt_prefix());
  cr_assert_eq(as_script(adm, u, "return redis.call('RPUSH', KEYS[1], 'v')",
                         own, err, sizeof(err)),
               1, "%s", err);
  snprintf(own, sizeof(own), "return redis.call('SPUBLISH', '%s:c:1', 'v')",
           rtt_prefix());
  cr_assert_eq(as_script(adm, u, own, NULL, err, sizeof(err)), 0, "%s", err);
  rtt_redis_close(u);

  /* A client with another prefix gets a clear error. */
  rt_options_t o;
  rtt_client other;
  rtt_options_at(&o, s.port);
  o.script_path = rtt_lua_path();
  o.prefix = "other";
  o.username = "locker";
  o.password = "pw";
  rtt_open_wait(&other, &loop, &o);
  cr_expect_eq(other.connect_status, RT_ENOPERM,
               "a client whose channel the ACL refuses failed to connect with "
               "%s, not RT_ENOPERM",
               rt_err_name(other.connect_status));
  rtt_close(&other);
  RTT_RUN_UNTIL(&loop, other.closes > 0, 10000);
  cr_assert_eq(other.closes, 1, "close callback did not run");

  /* Every permission of the rule is needed... */
  for (size_t i = 0; i < NPERMS; i++) {
    char user[32];
    snprintf(user, sizeof(user), "lk%zu", i);
    acl_rule(adm, user, (int)i);
    fail = acl_scenario(&s, adm, user);
    cr_log_info("without %s: '%s' fails", acl_perm(i), fail);
    cr_expect_str_neq(fail, "",
                      "the scenario works without %s: the rule is not minimal",
                      acl_perm(i));
  }
  /* ...and every optional one is used (Redis logs its refusal), but the
   * library gets by without it. */
  for (size_t i = 0; i < NOPTIONAL; i++) {
    char user[32];
    snprintf(user, sizeof(user), "lko%zu", i);
    acl_rule(adm, user, (int)(NPERMS + i));
    fail = acl_scenario(&s, adm, user);
    long long n = acl_refusals(adm, user, what, sizeof(what));
    cr_log_info("without %s: %lld refusals (%s)", acl_optional[i], n, what);
    cr_expect_str_eq(fail, "", "without the optional %s, '%s' failed",
                     acl_optional[i], fail);
    cr_expect_gt(n, 0, "the library never sent what %s allows: drop it",
                 acl_optional[i]);
    cr_expect_not_null(strstr(what, acl_optional[i] + 1),
                       "without %s, Redis refused %s", acl_optional[i], what);
  }
  rtt_loop_finish(&loop);
  rtt_redis_close(adm);
  rtt_server_stop(&s);
}

static int all_called(const rtt_req *r, int n) {
  for (int i = 0; i < n; i++)
    if (r[i].calls == 0)
      return 0;
  return 1;
}

/* Decode "%25", "%7B", "%7D" (the documented escapes). */
static size_t unescape(const char *s, size_t len, char *out) {
  size_t n = 0;
  for (size_t i = 0; i < len; i++) {
    if (s[i] == '%' && i + 2 < len) {
      if (s[i + 1] == '2' && s[i + 2] == '5')
        out[n++] = '%';
      else if (s[i + 1] == '7' && s[i + 2] == 'B')
        out[n++] = '{';
      else if (s[i + 1] == '7' && s[i + 2] == 'D')
        out[n++] = '}';
      else
        cr_assert_fail("bad escape in %.*s", (int)len, s);
      i += 2;
    } else {
      out[n++] = s[i];
    }
  }
  return n;
}

/* Every name is its own resource, and every key of it stays inside the
 * prefix and inside its own hash tag: a holder on each name (granted at
 * once, position 0: no name shares a holder with another) and a waiter on
 * each (position 1: no name shares a queue with another), so that every
 * name has all three keys, q, h and m; then every key in the server must
 * decode to exactly one name, once per suffix. */
Test(security, crafted_resource_names_stay_inside_their_own_keys) {
  static const struct {
    const char *s;
    size_t len;
  } names[] = {{"x", 1},     {"x}:q", 4}, {"x}:h", 4}, {"}{", 2},   {"{", 1},
               {"}", 1},     {"%7D", 3},  {"%7B", 3},  {"%25", 3},  {"%", 1},
               {"a{b}c", 5}, {"{x}", 3},  {"x\0y", 3}, {"x\0z", 3}, {":", 1},
               {"x:h", 3},   {"}:q", 3},  {"{}", 2},   {"%%7D", 4}, {"*", 1},
               {"x}:m", 4},  {"x:m", 3},  {"}:m", 3}};
  enum { N = sizeof(names) / sizeof(names[0]) };
  static const char suffixes[] = "qhm";
  rtt_private p;
  rtt_client a, b;
  rtt_req r[N], w[N];
  const char *pfx = rtt_prefix();
  rtt_private_start(&p, NULL);
  rtt_open_ready(&a, &loop, &p.opts);
  rtt_open_ready(&b, &loop, &p.opts);
  redisContext *adm = p.adm;

  for (int i = 0; i < N; i++) {
    memset(&r[i], 0, sizeof(r[i]));
    cr_assert_eq(rtt_wait_n(a.c, names[i].s, names[i].len, 20000, 5000, &r[i]),
                 0);
  }
  RTT_RUN_UNTIL(&loop, all_called(r, N), 5000);
  for (int i = 0; i < N; i++) {
    cr_assert_eq(r[i].calls, 1, "name %d not granted", i);
    cr_assert_eq(r[i].status, 0, "name %d: %s", i, rt_err_name(r[i].status));
    /* Granted at once: nobody held it, so it shares no keys with a name
     * granted before it. */
    cr_assert_eq(rt_lock_position(r[i].lock), 0,
                 "name %d shares keys with another", i);
  }
  for (int i = 0; i < N; i++) {
    memset(&w[i], 0, sizeof(w[i]));
    cr_assert_eq(
        rtt_wait_n(b.c, names[i].s, names[i].len, 20000, RT_FOREVER, &w[i]), 0);
  }
  uint64_t end = rtt_now_ms() + 5000;
  for (int i = 0; i < N; i++) {
    RTT_RUN_UNTIL(&loop, w[i].calls > 0 || rt_lock_position(w[i].lock) > 0,
                  end > rtt_now_ms() ? end - rtt_now_ms() : 1);
    cr_assert_eq(w[i].calls, 0, "name %d: the waiter ended: %s", i,
                 rt_err_name(w[i].status));
    /* Behind its own holder only: no other name's waiter is in its
     * queue. */
    cr_assert_eq(rt_lock_position(w[i].lock), 1,
                 "name %d shares its queue with another", i);
    cr_assert_eq(rtt_qlen(adm, pfx, names[i].s, names[i].len), 2, "name %d", i);
  }

  /* Every key: "<prefix>:{<esc>}:q", ":h" or ":m", esc free of braces (so
   * the hash tag, and with it the slot, is exactly esc: the three keys of
   * a name are in one slot), decoding to one of the names; each exactly
   * once. */
  int seen[N][3];
  memset(seen, 0, sizeof(seen));
  redisReply *rep = rtt_cmd(adm, "SCAN 0 MATCH * COUNT 10000");
  redisReply *keys = rep->element[1];
  cr_assert_eq(keys->elements, 3 * N, "%zu keys for %d names", keys->elements,
               (int)N);
  for (size_t k = 0; k < keys->elements; k++) {
    const char *key = keys->element[k]->str;
    size_t kl = keys->element[k]->len;
    size_t pl = strlen(pfx) + 2;
    cr_assert(kl > pl + 3 && memcmp(key, pfx, pl - 2) == 0 &&
                  memcmp(key + pl - 2, ":{", 2) == 0,
              "key outside the prefix: %.*s", (int)kl, key);
    const char *suffix = memchr(suffixes, key[kl - 1], 3);
    cr_assert(memcmp(key + kl - 3, "}:", 2) == 0 && suffix != NULL,
              "bad key end: %.*s", (int)kl, key);
    const char *esc = key + pl;
    size_t el = kl - pl - 3;
    cr_assert_null(memchr(esc, '{', el), "brace in %.*s", (int)kl, key);
    cr_assert_null(memchr(esc, '}', el), "brace in %.*s", (int)kl, key);
    char dec[64];
    size_t dl = unescape(esc, el, dec);
    int found = -1;
    for (int i = 0; i < N; i++)
      if (names[i].len == dl && memcmp(names[i].s, dec, dl) == 0)
        found = i;
    cr_assert_geq(found, 0, "key %.*s belongs to no name", (int)kl, key);
    seen[found][suffix - suffixes]++;
  }
  for (int i = 0; i < N; i++)
    cr_assert(seen[i][0] == 1 && seen[i][1] == 1 && seen[i][2] == 1,
              "name %d: q %d, h %d, m %d", i, seen[i][0], seen[i][1],
              seen[i][2]);
  freeReplyObject(rep);

  /* Each handoff stays inside its name: every waiter is granted. */
  for (int i = 0; i < N; i++)
    rtt_release(&loop, &r[i], 0);
  RTT_RUN_UNTIL(&loop, all_called(w, N), 5000);
  for (int i = 0; i < N; i++) {
    cr_assert_eq(w[i].calls, 1, "name %d: the waiter was not granted", i);
    cr_assert_eq(w[i].status, 0, "name %d: %s", i, rt_err_name(w[i].status));
    cr_assert_gt(w[i].fence, r[i].fence, "name %d", i);
  }
  for (int i = 0; i < N; i++)
    rtt_release(&loop, &w[i], 0);
  cr_assert_eq(rtt_int(adm, "DBSIZE"), 0, "keys left after the last release");
  rtt_close_all(&loop, &a, &b, NULL);
  rtt_private_stop(&p);
}
