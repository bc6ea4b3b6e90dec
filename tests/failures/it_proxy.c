/* The fault-injecting proxy of the test support library (rtt_proxy.h),
 * between synchronous hiredis connections and a private redis-server: each
 * fault is checked by what a client and Redis really see.
 *
 * Requests are sent with redisAppendCommand + redisBufferWrite and replies
 * awaited with poll(), so "no reply within N ms" leaves the hiredis context
 * usable for reading the reply after a release. */
#include <criterion/criterion.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "rt_test.h"
#include "rtt_proxy.h"

static rtt_server srv;
static rtt_proxy *px;
static redisContext *direct; /* straight to Redis, for checks */

static void setup(void) {
  rtt_server_start(&srv, NULL);
  direct = rtt_redis_at(srv.port);
  px = rtt_proxy_start(srv.port);
}

static void teardown(void) {
  rtt_proxy_stop(px);
  px = NULL;
  rtt_cleanup(); /* connections, then the server */
}

TestSuite(proxy, .init = setup, .fini = teardown, .timeout = 20);

/* A connection through the proxy with a read timeout of timeout_ms. */
static redisContext *via_proxy(int64_t timeout_ms) {
  redisContext *c = rtt_redis_at(rtt_proxy_port(px));
  struct timeval tv = {(time_t)(timeout_ms / 1000),
                       (suseconds_t)(timeout_ms % 1000) * 1000};
  redisSetTimeout(c, tv);
  return c;
}

/* Send a command without waiting for its reply. */
static void send_cmd(redisContext *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int err = redisvAppendCommand(c, fmt, ap);
  va_end(ap);
  cr_assert_eq(err, REDIS_OK, "append: %s", c->errstr);
  int done = 0;
  while (!done)
    cr_assert_eq(redisBufferWrite(c, &done), REDIS_OK, "write: %s", c->errstr);
}

/* Does something (a reply, EOF) arrive on c within ms? */
static int arrives_within(redisContext *c, int ms) {
  struct pollfd pf = {.fd = c->fd, .events = POLLIN};
  return poll(&pf, 1, ms) == 1;
}

/* The bytes connection 0's proxy holds (held) or the proxy forwarded in
 * direction dir, once they reach n or 10 s passed: its thread counts them
 * once it has read them, which on a loaded machine may come long after
 * they were sent. */
enum { FORWARDED, HELD };
static uint64_t proxy_count(int held, int dir) {
  return held ? rtt_proxy_held(px, 0, dir) : rtt_proxy_bytes(px, dir);
}

static uint64_t count_becomes(int held, int dir, uint64_t n) {
  uint64_t t0 = rtt_now_ms();
  while (proxy_count(held, dir) < n && rtt_now_ms() - t0 < 10000)
    rtt_sleep_ms(10);
  return proxy_count(held, dir);
}

/* The reply to a command sent by send_cmd(): it must come. */
static redisReply *get_reply(redisContext *c) {
  void *r = NULL;
  cr_assert_eq(redisGetReply(c, &r), REDIS_OK, "no reply: %s", c->errstr);
  cr_assert_not_null(r);
  return r;
}

static void expect_status(redisReply *r, const char *want) {
  cr_assert(r->type == REDIS_REPLY_STATUS && strcmp(r->str, want) == 0,
            "want %s, got type %d %s", want, r->type, r->str ? r->str : "");
  freeReplyObject(r);
}

static void expect_int(redisReply *r, long long want) {
  cr_assert_eq(r->type, REDIS_REPLY_INTEGER, "type %d %s", r->type,
               r->str ? r->str : "");
  cr_assert_eq(r->integer, want);
  freeReplyObject(r);
}

static void ping_ok(redisContext *c) {
  expect_status(rtt_cmd(c, "PING"), "PONG");
}

/* GET key through the direct connection: its integer value, -1 if unset. */
static long long value_of(const char *key) {
  redisReply *r = rtt_cmd(direct, "GET %s", key);
  long long v = r->type == REDIS_REPLY_STRING ? atoll(r->str) : -1;
  freeReplyObject(r);
  return v;
}

/* Poll Redis until key has value want (at most max_ms). */
static int value_becomes(const char *key, long long want, int64_t max_ms) {
  uint64_t end = rtt_now_ms() + (uint64_t)max_ms;
  do {
    if (value_of(key) == want)
      return 1;
    rtt_sleep_ms(5);
  } while (rtt_now_ms() < end);
  return 0;
}

/* Wait until connection conn of the proxy is closed (at most max_ms). */
static int closes_within(int conn, int64_t max_ms) {
  uint64_t end = rtt_now_ms() + (uint64_t)max_ms;
  while (rtt_proxy_is_open(px, conn)) {
    if (rtt_now_ms() >= end)
      return 0;
    rtt_sleep_ms(5);
  }
  return 1;
}

/* A command on a failed connection: no reply, an error on the context. */
static void expect_failure(redisContext *c, const char *cmd) {
  redisReply *r = redisCommand(c, cmd);
  cr_assert_null(r, "\"%s\" answered through a broken connection", cmd);
  cr_assert_neq(c->err, 0);
}

Test(proxy, forwards_commands_and_counts_bytes_both_ways) {
  cr_assert_eq(rtt_proxy_bytes(px, RTT_BOTH), 0);
  redisContext *c = via_proxy(1000);
  ping_ok(c);
  expect_int(rtt_cmd(c, "INCR k"), 1);
  cr_assert_eq(value_of("k"), 1);
  uint64_t up = rtt_proxy_bytes(px, RTT_UP);
  uint64_t down = rtt_proxy_bytes(px, RTT_DOWN);
  /* "*1\r\n$4\r\nPING\r\n" + "*2\r\n$4\r\nINCR\r\n$1\r\nk\r\n" up,
   * "+PONG\r\n" + ":1\r\n" */
  cr_assert_eq(up, 14 + 21, "up %llu", (unsigned long long)up);
  cr_assert_eq(down, 7 + 4, "down %llu", (unsigned long long)down);
  cr_assert_eq(rtt_proxy_bytes(px, RTT_BOTH), up + down);
  cr_assert_eq(rtt_proxy_conn_count(px), 1);
  cr_assert_eq(rtt_proxy_is_open(px, 0), 1);
}

Test(proxy, delays_requests_by_the_given_time_keeping_their_order) {
  redisContext *c = via_proxy(2000);
  ping_ok(c); /* connected and accepted */
  rtt_proxy_set(px, RTT_ALL, RTT_UP, RTT_DELAY, 300);
  uint64_t t0 = rtt_now_ms();
  ping_ok(c);
  uint64_t took = rtt_now_ms() - t0;
  cr_assert_geq(took, 300, "took %llu ms", (unsigned long long)took);
  cr_assert_lt(took, 900, "took %llu ms", (unsigned long long)took);

  /* Separate chunks, each delayed, arrive in order. */
  t0 = rtt_now_ms();
  for (int i = 0; i < 3; i++) {
    send_cmd(c, "RPUSH l %d", i);
    rtt_sleep_ms(20);
  }
  for (int i = 0; i < 3; i++)
    expect_int(get_reply(c), i + 1);
  took = rtt_now_ms() - t0;
  cr_assert_geq(took, 340, "took %llu ms", (unsigned long long)took);
  redisReply *r = rtt_cmd(direct, "LRANGE l 0 -1");
  cr_assert_eq(r->elements, 3);
  for (size_t i = 0; i < 3; i++)
    cr_assert_eq(atoi(r->element[i]->str), (int)i);
  freeReplyObject(r);
}

Test(proxy, delays_both_directions_additively) {
  redisContext *c = via_proxy(2000);
  rtt_proxy_set(px, RTT_ALL, RTT_BOTH, RTT_DELAY, 150);
  uint64_t t0 = rtt_now_ms();
  ping_ok(c);
  uint64_t took = rtt_now_ms() - t0;
  cr_assert_geq(took, 300, "took %llu ms", (unsigned long long)took);
  cr_assert_lt(took, 900, "took %llu ms", (unsigned long long)took);
}

/* Dropping may cut a command in half and so corrupt the stream, so the
 * connection is not reused: only that nothing reaches Redis is checked. */
Test(proxy, dropped_requests_never_reach_redis) {
  redisContext *c = via_proxy(1000);
  ping_ok(c);
  uint64_t up = rtt_proxy_bytes(px, RTT_UP);
  rtt_proxy_set(px, RTT_ALL, RTT_UP, RTT_DROP, 0);
  send_cmd(c, "INCR k");
  cr_assert_not(arrives_within(c, 300), "a dropped request was answered");
  cr_assert_eq(value_of("k"), -1);
  cr_assert_eq(rtt_proxy_bytes(px, RTT_UP), up);
  cr_assert_eq(rtt_proxy_held(px, RTT_ALL, RTT_BOTH), 0);
  cr_assert_eq(rtt_proxy_is_open(px, 0), 1);
}

Test(proxy, dropped_replies_leave_the_command_executed_unanswered) {
  redisContext *c = via_proxy(1000);
  ping_ok(c);
  uint64_t down = rtt_proxy_bytes(px, RTT_DOWN);
  rtt_proxy_set(px, RTT_ALL, RTT_DOWN, RTT_DROP, 0);
  send_cmd(c, "INCR k");
  cr_assert(value_becomes("k", 1, 5000), "the request did not arrive");
  cr_assert_not(arrives_within(c, 300), "a dropped reply arrived");
  cr_assert_eq(rtt_proxy_bytes(px, RTT_DOWN), down);
}

Test(proxy, holds_requests_until_released) {
  redisContext *c = via_proxy(1000);
  rtt_proxy_set(px, RTT_ALL, RTT_UP, RTT_HOLD, 0);
  send_cmd(c, "INCR k");
  cr_assert_not(arrives_within(c, 300), "a held request was answered");
  cr_assert_eq(value_of("k"), -1);
  cr_assert_eq(rtt_proxy_bytes(px, RTT_UP), 0);
  cr_assert_eq(count_becomes(HELD, RTT_UP, 21), 21);
  cr_assert_eq(rtt_proxy_held(px, 0, RTT_DOWN), 0);

  rtt_proxy_release(px, RTT_ALL, RTT_UP);
  cr_assert(arrives_within(c, 5000), "no reply after the release");
  expect_int(get_reply(c), 1);
  cr_assert_eq(rtt_proxy_held(px, RTT_ALL, RTT_BOTH), 0);
  cr_assert_eq(rtt_proxy_bytes(px, RTT_UP), 21);

  /* The hold stays in force for later bytes. */
  send_cmd(c, "INCR k");
  cr_assert_not(arrives_within(c, 200));
  cr_assert_eq(value_of("k"), 1);
  rtt_proxy_release(px, 0, RTT_UP);
  expect_int(get_reply(c), 2);
}

Test(proxy, holds_replies_until_released) {
  redisContext *c = via_proxy(1000);
  rtt_proxy_set(px, RTT_ALL, RTT_DOWN, RTT_HOLD, 0);
  send_cmd(c, "INCR k");
  cr_assert(value_becomes("k", 1, 5000), "the request did not arrive");
  cr_assert_not(arrives_within(c, 300), "a held reply arrived");
  cr_assert_eq(count_becomes(HELD, RTT_DOWN, 4), 4);
  cr_assert_not(arrives_within(c, 0), "a held reply arrived");
  rtt_proxy_release(px, 0, RTT_DOWN);
  cr_assert(arrives_within(c, 5000), "no reply after the release");
  expect_int(get_reply(c), 1);
  cr_assert_eq(rtt_proxy_bytes(px, RTT_DOWN), 4);
}

/* The late-delivery fault: the client gives up on a held request, closes
 * and retries on a new connection; the old request still executes when
 * released, after the retry. */
Test(proxy, a_request_held_past_its_client_timeout_executes_late_on_release) {
  rtt_proxy_set(px, 0, RTT_UP, RTT_HOLD, 0); /* the first connection only */
  redisContext *a = via_proxy(200);
  redisReply *r = redisCommand(a, "INCR k");
  cr_assert_null(r, "a held request was answered");
  cr_assert_eq(a->err, REDIS_ERR_IO, "err %d %s", a->err, a->errstr);
  rtt_redis_close(a); /* gives up: its FIN is held behind the request */

  redisContext *b = via_proxy(1000);
  expect_int(rtt_cmd(b, "INCRBY k 10"), 10); /* the retry, on connection 1 */
  rtt_sleep_ms(100);
  cr_assert_eq(value_of("k"), 10, "the held request executed early");
  cr_assert_eq(rtt_proxy_is_open(px, 0), 1, "held bytes need the connection");

  rtt_proxy_release(px, 0, RTT_UP);
  cr_assert(value_becomes("k", 11, 5000), "the late request did not execute");
  /* Redis saw the end of the stream after it and closed: so does the
   * proxy (its reply meets a closed client). */
  cr_assert(closes_within(0, 5000), "connection 0 stayed open");
  cr_assert_eq(rtt_proxy_is_open(px, 1), 1);
  ping_ok(b);
}

Test(proxy, a_cut_fails_the_next_command_and_new_connections_work) {
  redisContext *c = via_proxy(1000);
  ping_ok(c);
  rtt_proxy_cut(px, RTT_ALL);
  cr_assert_eq(rtt_proxy_is_open(px, 0), 0);
  expect_failure(c, "PING");

  redisContext *d = via_proxy(1000);
  ping_ok(d);
  cr_assert_eq(rtt_proxy_conn_count(px), 2);
  cr_assert_eq(rtt_proxy_is_open(px, 1), 1);
  cr_assert_eq(rtt_proxy_is_open(px, RTT_ALL), 1);
}

/* The proxy resets refused connections at once: depending on timing,
 * hiredis's connect already fails or the first command does. */
Test(proxy, refused_connections_fail_unnumbered_until_refusing_stops) {
  rtt_proxy_refuse(px, 1);
  redisContext *c = redisConnectWithTimeout("127.0.0.1", rtt_proxy_port(px),
                                            (struct timeval){1, 0});
  cr_assert_not_null(c);
  int failed = c->err != 0;
  if (!failed) {
    redisSetTimeout(c, (struct timeval){1, 0});
    redisReply *r = redisCommand(c, "PING");
    failed = r == NULL && c->err != 0;
    if (r != NULL)
      freeReplyObject(r);
  }
  redisFree(c);
  cr_assert(failed, "a refused connection worked");
  cr_assert_eq(rtt_proxy_refused(px), 1);
  cr_assert_eq(rtt_proxy_conn_count(px), 0);
  cr_assert_eq(rtt_proxy_bytes(px, RTT_BOTH), 0);

  rtt_proxy_refuse(px, 0);
  ping_ok(via_proxy(1000));
  cr_assert_eq(rtt_proxy_conn_count(px), 1);
  cr_assert_eq(rtt_proxy_refused(px), 1);
}

Test(proxy, a_fault_on_one_connection_leaves_the_others_alone) {
  redisContext *c0 = via_proxy(1000), *c1 = via_proxy(1000);
  ping_ok(c0);
  ping_ok(c1);
  cr_assert_eq(rtt_proxy_conn_count(px), 2);
  rtt_proxy_set(px, 1, RTT_UP, RTT_HOLD, 0);
  /* A delay far above what a loaded machine adds to a round trip. */
  rtt_proxy_set(px, 2, RTT_DOWN, RTT_DELAY, 1500); /* not accepted yet */

  send_cmd(c1, "PING");
  uint64_t t0 = rtt_now_ms();
  ping_ok(c0);
  cr_assert_lt(rtt_now_ms() - t0, 1000);
  cr_assert_not(arrives_within(c1, 200), "connection 1 was not held");

  redisContext *c2 = via_proxy(5000);
  t0 = rtt_now_ms();
  ping_ok(c2);
  cr_assert_geq(rtt_now_ms() - t0, 1500);

  /* RTT_ALL replaces the per-connection settings. */
  rtt_proxy_set(px, RTT_ALL, RTT_BOTH, RTT_PASS, 0);
  t0 = rtt_now_ms();
  ping_ok(c2);
  cr_assert_lt(rtt_now_ms() - t0, 1000);
  cr_assert_eq(rtt_proxy_held(px, 1, RTT_UP), 14, "held bytes stay held");
  rtt_proxy_release(px, 1, RTT_BOTH);
  expect_status(get_reply(c1), "PONG");
}

Test(proxy, reset_forwards_again_but_keeps_held_bytes_until_released) {
  redisContext *c = via_proxy(1000);
  rtt_proxy_set(px, RTT_ALL, RTT_UP, RTT_HOLD, 0);
  send_cmd(c, "INCR k");
  cr_assert_not(arrives_within(c, 200));
  rtt_proxy_reset(px);
  /* Queued behind the held request (TCP order), not overtaking it. */
  send_cmd(c, "INCR k");
  cr_assert_not(arrives_within(c, 200));
  cr_assert_eq(value_of("k"), -1);
  rtt_proxy_release(px, RTT_ALL, RTT_BOTH);
  expect_int(get_reply(c), 1);
  expect_int(get_reply(c), 2);
  /* Nothing is held any more. */
  expect_int(rtt_cmd(c, "INCR k"), 3);
}

/* libuv writes with writev(): writing to a client that closed (its kernel
 * answered the first write with a reset) raises SIGPIPE. The proxy thread
 * blocks it (this process keeps the default action, which would kill it),
 * so the test lives on and the connection is closed on EPIPE. */
Test(proxy, survives_writing_to_a_client_that_went_away) {
  signal(SIGPIPE, SIG_DFL); /* whatever the runner chose: this process only */
  rtt_proxy_set(px, RTT_ALL, RTT_DOWN, RTT_DELAY, 2000);
  redisContext *c = via_proxy(1000);
  send_cmd(c, "PING");
  rtt_sleep_ms(100);
  send_cmd(c, "PING"); /* its reply is written 100 ms after the first */
  /* Both forwarded before the close: a request still unread when the
   * first reply's write meets the reset would be lost with the socket. */
  cr_assert_eq(count_becomes(FORWARDED, RTT_UP, 2 * 14), 2 * 14);
  rtt_redis_close(c); /* before either reply arrives */
  cr_assert(closes_within(0, 5000), "connection 0 stayed open");
  rtt_proxy_reset(px);
  ping_ok(via_proxy(1000));
}

Test(proxy, a_client_closing_closes_its_redis_connection) {
  redisContext *c = via_proxy(1000);
  ping_ok(c);
  cr_assert_eq(rtt_info_ll(direct, "clients", "connected_clients"), 2);
  rtt_redis_close(c);
  cr_assert(closes_within(0, 5000));
  uint64_t end = rtt_now_ms() + 1000;
  while (rtt_info_ll(direct, "clients", "connected_clients") != 1 &&
         rtt_now_ms() < end)
    rtt_sleep_ms(5);
  cr_assert_eq(rtt_info_ll(direct, "clients", "connected_clients"), 1);
}

Test(proxy, an_unreachable_redis_closes_the_client) {
  rtt_proxy *dead = rtt_proxy_start(rtt_free_port());
  redisContext *c = rtt_redis_at(rtt_proxy_port(dead));
  redisSetTimeout(c, (struct timeval){1, 0});
  expect_failure(c, "PING");
  /* The proxy thread counts the connection it accepted on its own time. */
  uint64_t end = rtt_now_ms() + 1000;
  while (rtt_proxy_conn_count(dead) != 1 && rtt_now_ms() < end)
    rtt_sleep_ms(5);
  cr_assert_eq(rtt_proxy_conn_count(dead), 1);
  cr_assert_eq(rtt_proxy_is_open(dead, 0), 0);
  rtt_proxy_stop(dead);
}

/* LeakSanitizer (ASan build) checks that nothing is left behind. */
Test(proxy, stops_cleanly_with_connections_open_and_bytes_held) {
  rtt_proxy *other = rtt_proxy_start(srv.port); /* two at once */
  cr_assert_neq(rtt_proxy_port(other), rtt_proxy_port(px));
  redisContext *a = via_proxy(1000);
  redisContext *b = rtt_redis_at(rtt_proxy_port(other));
  ping_ok(a);
  ping_ok(b);
  rtt_proxy_set(px, RTT_ALL, RTT_UP, RTT_HOLD, 0);
  rtt_proxy_set(other, RTT_ALL, RTT_DOWN, RTT_HOLD, 0);
  rtt_proxy_set(other, RTT_ALL, RTT_UP, RTT_DELAY, 5000);
  send_cmd(a, "PING");
  send_cmd(b, "PING");
  send_cmd(b, "PING");
  cr_assert_eq(count_becomes(HELD, RTT_UP, 14), 14);
  cr_assert_eq(rtt_proxy_is_open(other, 0), 1);

  rtt_proxy_stop(other);
  expect_failure(b, "PING"); /* EOF: the proxy closed it */
  rtt_proxy_reset(px);
  ping_ok(via_proxy(1000)); /* the first proxy still works */
  rtt_proxy_stop(px);
  px = NULL;
  expect_failure(a, "PING");
}
