/* Bad input gets its own error code, no callback, and loses nothing:
 * options, request arguments, and keys of the wrong Redis type. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_test.h"

RTT_SUITE(errors);

static void count_cb(rt_lock_t *l, int status, void *data) {
  (void)l;
  (void)status;
  (*(int *)data)++;
}

/* rt_client_open must fail with want and leave *out alone. */
static void assert_open_fails(const rt_options_t *o, int want) {
  rt_client_t *sentinel = (rt_client_t *)&loop;
  rt_client_t *out = sentinel;
  int err = rt_client_open(&loop, o, NULL, NULL, &out);
  cr_assert_eq(err, want, "open: %s, want %s", rt_err_name(err),
               rt_err_name(want));
  cr_assert_eq(out, sentinel, "*out was written on error");
}

Test(errors, bad_options_are_refused_at_open_with_their_own_codes) {
  static const char *const bad_urls[] = {
      "http://127.0.0.1:6379",   "redis://",       "redis://127.0.0.1:notaport",
      "redis://127.0.0.1:99999", "127.0.0.1:6379", "redis://127.0.0.1:6379/x",
  };
  rt_options_t o;
  for (size_t i = 0; i < sizeof(bad_urls) / sizeof(bad_urls[0]); i++) {
    rtt_options(&o);
    o.url = bad_urls[i];
    rt_client_t *out = NULL;
    int err = rt_client_open(&loop, &o, NULL, NULL, &out);
    cr_assert_eq(err, RT_EURL, "url \"%s\": %s", bad_urls[i], rt_err_name(err));
    cr_assert_null(out);
  }

  static const char *const bad_prefixes[] = {"a{b", "{", "}", "x}", ""};
  for (size_t i = 0; i < sizeof(bad_prefixes) / sizeof(bad_prefixes[0]); i++) {
    rtt_options(&o);
    o.prefix = bad_prefixes[i];
    assert_open_fails(&o, RT_EPREFIX);
  }
  char long_prefix[RT_PREFIX_MAX + 2];
  memset(long_prefix, 'p', sizeof(long_prefix) - 1);
  long_prefix[RT_PREFIX_MAX + 1] = '\0';
  rtt_options(&o);
  o.prefix = long_prefix;
  assert_open_fails(&o, RT_EPREFIX);

  rtt_options(&o);
  o.default_ttl_ms = 0;
  assert_open_fails(&o, RT_ETTL);
  o.default_ttl_ms = RT_TTL_MAX + 1;
  assert_open_fails(&o, RT_ETTL);

  rt_client_t *out = NULL;
  cr_assert_eq(rt_client_open(NULL, &o, NULL, NULL, &out), RT_EINVAL);
  rtt_options(&o);
  cr_assert_eq(rt_client_open(&loop, &o, NULL, NULL, NULL), RT_EINVAL);
  cr_assert_eq(rt_client_close(NULL, NULL, NULL), RT_EINVAL);

  /* Nothing was created: the loop closes at once. */
  rtt_loop_finish(&loop);
}

Test(errors, a_prefix_of_rt_prefix_max_bytes_works) {
  char prefix[RT_PREFIX_MAX + 1];
  snprintf(prefix, sizeof(prefix), "%s", rtt_prefix());
  size_t n = strlen(prefix);
  memset(prefix + n, 'p', RT_PREFIX_MAX - n);
  prefix[RT_PREFIX_MAX] = '\0';
  rt_options_t o;
  rtt_options(&o);
  o.prefix = prefix;
  rtt_client a;
  rtt_req r = {0};
  rtt_open_ready(&a, &loop, &o);
  rtt_acquire(&loop, a.c, "res", 5000, &r);
  cr_assert_eq(rtt_qlen(rc, prefix, "res", 3), 1);
  rtt_release(&loop, &r, 0);
  rtt_close(&a);
  rtt_loop_finish(&loop);
}

Test(errors, bad_request_arguments_get_distinct_codes_and_no_callback) {
  rtt_client a;
  int calls = 0;
  char *big = malloc(RT_NAME_MAX + 1);
  memset(big, 'x', RT_NAME_MAX + 1);
  rtt_open_ready(&a, &loop, NULL);
  rt_client_t *c = a.c;

  /* rt_wait */
  cr_assert_eq(rt_wait(c, "", 0, 1000, RT_FOREVER, count_cb, &calls, NULL),
               RT_ENAMEEMPTY);
  cr_assert_eq(rt_wait(c, NULL, 0, 1000, RT_FOREVER, count_cb, &calls, NULL),
               RT_ENAMEEMPTY);
  cr_assert_eq(rt_wait(c, NULL, 5, 1000, RT_FOREVER, count_cb, &calls, NULL),
               RT_ENAMEEMPTY);
  cr_assert_eq(rt_wait(c, big, RT_NAME_MAX + 1, 1000, RT_FOREVER, count_cb,
                       &calls, NULL),
               RT_ENAMETOOLONG);
  cr_assert_eq(rt_wait(c, "r", 1, 0, RT_FOREVER, count_cb, &calls, NULL),
               RT_ETTL);
  cr_assert_eq(rt_wait(c, "r", 1, -5, RT_FOREVER, count_cb, &calls, NULL),
               RT_ETTL);
  cr_assert_eq(
      rt_wait(c, "r", 1, RT_TTL_MAX + 1, RT_FOREVER, count_cb, &calls, NULL),
      RT_ETTL);
  cr_assert_eq(rt_wait(c, "r", 1, 1000, 0, count_cb, &calls, NULL),
               RT_ETIMEOUTARG);
  cr_assert_eq(rt_wait(c, "r", 1, 1000, -7, count_cb, &calls, NULL),
               RT_ETIMEOUTARG);
  cr_assert_eq(rt_wait(c, "r", 1, 1000, RT_FOREVER, NULL, NULL, NULL),
               RT_ENOCB);
  cr_assert_eq(rt_wait(NULL, "r", 1, 1000, RT_FOREVER, count_cb, &calls, NULL),
               RT_EINVAL);
  rt_lock_t *untouched = (rt_lock_t *)&calls;
  cr_assert_eq(rt_wait(c, "r", 1, 0, RT_FOREVER, count_cb, &calls, &untouched),
               RT_ETTL);
  cr_assert_eq(untouched, (rt_lock_t *)&calls, "*out written on error");

  /* rt_try_lock */
  cr_assert_eq(rt_try_lock(c, "", 0, 1000, count_cb, &calls), RT_ENAMEEMPTY);
  cr_assert_eq(rt_try_lock(c, big, RT_NAME_MAX + 1, 1000, count_cb, &calls),
               RT_ENAMETOOLONG);
  cr_assert_eq(rt_try_lock(c, "r", 1, 0, count_cb, &calls), RT_ETTL);
  cr_assert_eq(rt_try_lock(c, "r", 1, -5, count_cb, &calls), RT_ETTL);
  cr_assert_eq(rt_try_lock(c, "r", 1, RT_TTL_MAX + 1, count_cb, &calls),
               RT_ETTL);
  cr_assert_eq(rt_try_lock(c, "r", 1, 1000, NULL, NULL), RT_ENOCB);
  cr_assert_eq(rt_try_lock(NULL, "r", 1, 1000, count_cb, &calls), RT_EINVAL);

  /* Every code is distinct and has its own message. */
  const int codes[] = {RT_ENAMEEMPTY,  RT_ENAMETOOLONG, RT_ETTL,
                       RT_ETIMEOUTARG, RT_ENOCB,        RT_EINVAL};
  for (size_t i = 0; i < 6; i++)
    for (size_t j = i + 1; j < 6; j++) {
      cr_assert_neq(codes[i], codes[j]);
      cr_assert_str_neq(rt_strerror(codes[i]), rt_strerror(codes[j]));
    }

  rtt_run_for(&loop, 100);
  cr_assert_eq(calls, 0, "a refused call called back");
  cr_assert_eq(rt_client_locks(c, NULL, 0), 0);

  /* Nothing of that reached Redis, and the client still works. */
  cr_assert_eq(rtt_qlen(rc, rtt_prefix(), "r", 1), 0);
  rtt_req r = {0};
  rtt_acquire(&loop, c, "r", RT_TTL_DEFAULT, &r);
  cr_assert_eq(r.lease_ms, 30000, "RT_TTL_DEFAULT is the client default");
  rtt_release(&loop, &r, 0);
  rtt_close(&a);
  rtt_loop_finish(&loop);
  free(big);
}

Test(errors, the_longest_ttl_and_the_default_ttl_option_are_accepted) {
  rt_options_t o;
  rtt_options(&o);
  o.default_ttl_ms = 1234;
  rtt_client a;
  rtt_req def = {0}, longest = {0};
  rtt_open_ready(&a, &loop, &o);
  rtt_acquire(&loop, a.c, "d", RT_TTL_DEFAULT, &def);
  cr_assert_eq(def.lease_ms, 1234);
  rtt_acquire(&loop, a.c, "m", RT_TTL_MAX, &longest);
  cr_assert_eq(longest.lease_ms, RT_TTL_MAX);
  rtt_release(&loop, &def, 0);
  rtt_release(&loop, &longest, 0);
  rtt_close(&a);
  rtt_loop_finish(&loop);
}

/* ---- keys of the wrong type ----------------------------------------------- */

typedef struct answer {
  int calls, status;
} answer;

static void locked_cb(rt_client_t *c, int status, int locked, void *data) {
  answer *a = data;
  (void)c;
  (void)locked;
  a->calls++;
  a->status = status;
}

static void inspect_cb(rt_client_t *c, int status, const rt_queue_info_t *info,
                       void *data) {
  answer *a = data;
  (void)c;
  (void)info;
  a->calls++;
  a->status = status;
}

Test(errors, a_queue_key_of_the_wrong_type_gives_ewrongtype) {
  rtt_client a;
  rtt_req w = {0}, t = {0}, ok = {0};
  answer lk = {0}, in = {0};
  char key[256];
  size_t kl = rtt_key(key, sizeof(key), rtt_prefix(), "res", 3, 'q');
  rtt_ok(rc, "SET %b not-a-list", key, kl);

  rtt_open_ready(&a, &loop, NULL);
  cr_assert_eq(rtt_wait(a.c, "res", 5000, RT_FOREVER, &w), 0);
  cr_assert(rtt_run_until(&loop, &w.calls, 1, 5000));
  cr_assert_eq(w.status, RT_EWRONGTYPE, "wait: %s", rt_err_name(w.status));

  cr_assert_eq(rtt_try(a.c, "res", 5000, &t), 0);
  cr_assert(rtt_run_until(&loop, &t.calls, 1, 5000));
  cr_assert_eq(t.status, RT_EWRONGTYPE, "try: %s", rt_err_name(t.status));

  cr_assert_eq(rt_locked(a.c, "res", 3, locked_cb, &lk), 0);
  cr_assert_eq(rt_inspect(a.c, "res", 3, 5, inspect_cb, &in), 0);
  cr_assert(rtt_run_until(&loop, &in.calls, 1, 5000));
  cr_assert(rtt_run_until(&loop, &lk.calls, 1, 5000));
  cr_assert_eq(lk.status, RT_EWRONGTYPE, "locked: %s", rt_err_name(lk.status));
  cr_assert_eq(in.status, RT_EWRONGTYPE, "inspect: %s", rt_err_name(in.status));

  /* The user's value is untouched, and other resources still work. */
  redisReply *v = rtt_cmd(rc, "GET %b", key, kl);
  cr_assert_eq(v->type, REDIS_REPLY_STRING);
  cr_assert_str_eq(v->str, "not-a-list");
  freeReplyObject(v);
  rtt_acquire(&loop, a.c, "other", 5000, &ok);
  rtt_release(&loop, &ok, 0);
  rtt_run_for(&loop, 50);
  cr_assert_eq(w.calls, 1);
  cr_assert_eq(t.calls, 1);
  rtt_close(&a);
  rtt_loop_finish(&loop);
}

Test(errors, a_state_key_of_the_wrong_type_gives_ewrongtype) {
  rtt_client a;
  rtt_req w = {0}, t = {0};
  answer in = {0};
  char key[256];
  size_t kl = rtt_key(key, sizeof(key), rtt_prefix(), "res", 3, 'h');
  cr_assert_eq(rtt_int(rc, "RPUSH %b x", key, kl), 1);

  rtt_open_ready(&a, &loop, NULL);
  cr_assert_eq(rtt_wait(a.c, "res", 5000, RT_FOREVER, &w), 0);
  cr_assert(rtt_run_until(&loop, &w.calls, 1, 5000));
  cr_assert_eq(w.status, RT_EWRONGTYPE, "wait: %s", rt_err_name(w.status));

  cr_assert_eq(rtt_try(a.c, "res", 5000, &t), 0);
  cr_assert(rtt_run_until(&loop, &t.calls, 1, 5000));
  cr_assert_eq(t.status, RT_EWRONGTYPE, "try: %s", rt_err_name(t.status));

  cr_assert_eq(rt_inspect(a.c, "res", 3, 5, inspect_cb, &in), 0);
  cr_assert(rtt_run_until(&loop, &in.calls, 1, 5000));
  cr_assert_eq(in.status, RT_EWRONGTYPE, "inspect: %s", rt_err_name(in.status));
  cr_assert_eq(rt_client_locks(a.c, NULL, 0), 0);
  rtt_close(&a);
  rtt_loop_finish(&loop);
}
