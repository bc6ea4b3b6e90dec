/* rt_options_resolve() and rt_key_base(): what tools outside the library
 * get from the public API is what the clients use inside it. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

Test(resolve, a_url_becomes_explicit_fields_with_its_own_strings) {
  char url[] = "redis://us%3Aer:pa%40ss@example.org:6390/3";
  rt_options_t o, *r = NULL;
  rt_options_init(&o);
  o.url = url;
  o.prefix = "app";
  cr_assert_eq(rt_options_resolve(&o, &r), 0);
  memset(url, 'x', sizeof(url) - 1); /* the result keeps no pointer into o */
  cr_assert_null(r->url);
  cr_assert_str_eq(r->host, "example.org");
  cr_assert_eq(r->port, 6390);
  cr_assert_eq(r->db, 3);
  cr_assert_str_eq(r->username, "us:er");
  cr_assert_str_eq(r->password, "pa@ss");
  cr_assert_str_eq(r->prefix, "app");
  cr_assert_eq(r->command_timeout_ms, 5000);
  cr_assert_eq(r->size, sizeof(rt_options_t));
  rt_options_free(r);
}

Test(resolve, tls_settings_come_along) {
  char ca[] = "/tmp/unit_resolve_ca.XXXXXX"; /* checked: must be readable */
  int fd = mkstemp(ca);
  cr_assert_geq(fd, 0);
  close(fd);
  char expect[sizeof(ca)];
  memcpy(expect, ca, sizeof(ca));
  rt_options_t o, *r = NULL;
  rt_options_init(&o);
  o.url = "rediss://example.org:6390";
  o.tls_ca_file = ca;
  o.tls_server_name = "redis.example.org";
  cr_assert_eq(rt_options_resolve(&o, &r), 0);
  unlink(ca);
  memset(ca, 'x', sizeof(ca) - 1);
  cr_assert_eq(r->tls, 1);
  cr_assert_str_eq(r->tls_ca_file, expect);
  cr_assert_str_eq(r->tls_server_name, "redis.example.org");
  cr_assert_null(r->tls_cert_file);
  cr_assert_eq(r->tls_insecure, 0);
  rt_options_free(r);
}

Test(resolve, defaults_resolve_to_the_documented_ones) {
  rt_options_t *r = NULL;
  cr_assert_eq(rt_options_resolve(NULL, &r), 0);
  cr_assert_str_eq(r->host, "127.0.0.1");
  cr_assert_eq(r->port, 6379);
  cr_assert_null(r->username);
  cr_assert_null(r->password);
  cr_assert_null(r->label);
  rt_options_free(r);
}

Test(resolve, a_bad_url_is_refused_as_rt_options_check_refuses_it) {
  rt_options_t o, *r = (rt_options_t *)&o;
  char msg[128];
  rt_options_init(&o);
  o.url = "redis://127.0.0.1:99999";
  cr_assert_eq(rt_options_resolve(&o, &r), RT_EURL);
  cr_assert_eq(rt_options_check(&o, msg, sizeof(msg)), RT_EURL);
  cr_assert_eq(r, &o, "*out was written on error");
  cr_assert_eq(rt_options_resolve(&o, NULL), RT_EINVAL);
}

Test(resolve, key_base_is_the_clients_key_mapping) {
  static const char name[] = "a{b}%\0c";
  size_t len = sizeof(name) - 1, want_len = 0;
  char *want = rt__key_base("rt", 2, name, len, &want_len);
  char buf[64];
  cr_assert_not_null(want);
  cr_assert_eq(rt_key_base("rt", name, len, NULL, 0), want_len);
  cr_assert_eq(rt_key_base("rt", name, len, buf, sizeof(buf)), want_len);
  cr_assert_eq(memcmp(buf, want, want_len), 0);
  cr_assert_eq(buf[want_len], '\0');
  /* Too small: truncated, NUL-terminated, and the length says so. */
  cr_assert_eq(rt_key_base("rt", name, len, buf, 5), want_len);
  cr_assert_eq(strlen(buf), 4);
  cr_assert_eq(memcmp(buf, want, 4), 0);
  cr_assert_eq(rt_key_base(NULL, name, len, buf, sizeof(buf)), 0);
  rt__free(want);
}

Test(resolve, a_sentinel_url_stays_a_url_with_the_sentinels_credentials) {
  rt_options_t o, *r = NULL;
  rt_options_init(&o);
  o.url = "redis-sentinel://:pw@s1:26380,s2#locks";
  o.sentinel_password = "spw";
  o.wait_replicas = 1;
  cr_assert_eq(rt_options_resolve(&o, &r), 0);
  cr_assert_str_eq(r->url, o.url);
  cr_assert(r->url != o.url);
  cr_assert_str_eq(r->host, "s1");
  cr_assert_eq(r->port, 26380);
  cr_assert_str_eq(r->password, "pw");
  cr_assert_str_eq(r->sentinel_password, "spw");
  cr_assert_eq(r->wait_replicas, 1);
  cr_assert_eq(r->wait_replicas_timeout_ms, 1000);
  char msg[128];
  cr_assert_eq(rt_options_check(r, msg, sizeof(msg)), 0, "%s", msg);
  rt_options_free(r);
}
