/* The URL parser (src/url.c): redis://, rediss://, seeds, redis-sentinel://
 * and the query parameters, every valid form into its parts, every
 * malformed one refused with a message naming the part and why, cfg left
 * as it was. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "common.h"

static void assert_opt_str(const char *got, const char *want) {
  if (want == NULL)
    cr_assert_null(got, "expected NULL, got \"%s\"", got ? got : "");
  else {
    cr_assert_not_null(got, "expected \"%s\", got NULL", want);
    cr_assert_str_eq(got, want);
  }
}

/* ---- URL table ----------------------------------------------------------- */

struct good_url {
  const char *url;
  const char *host;
  int port;
  int db;
  const char *user;
  const char *pass;
};

static const struct good_url good_urls[] = {
    {"redis://localhost", "localhost", 6379, 0, NULL, NULL},
    {"redis://localhost:6380", "localhost", 6380, 0, NULL, NULL},
    {"redis://localhost:6380/2", "localhost", 6380, 2, NULL, NULL},
    {"redis://localhost/5", "localhost", 6379, 5, NULL, NULL},
    {"redis://h/", "h", 6379, 0, NULL, NULL},
    {"redis://h:1/0", "h", 1, 0, NULL, NULL},
    {"redis://h:65535/2147483647", "h", 65535, 2147483647, NULL, NULL},
    {"redis://h:06379/007", "h", 6379, 7, NULL, NULL},
    {"redis://10.0.0.1:7000", "10.0.0.1", 7000, 0, NULL, NULL},
    {"redis://my-host.example_net", "my-host.example_net", 6379, 0, NULL, NULL},
    {"redis://:secret@h", "h", 6379, 0, NULL, "secret"},
    {"redis://user:pass@host:6380/2", "host", 6380, 2, "user", "pass"},
    {"redis://user@host", "host", 6379, 0, "user", NULL},
    {"redis://user:@host", "host", 6379, 0, "user", NULL},
    {"redis://@host", "host", 6379, 0, NULL, NULL},
    {"redis://user:pa:ss@h", "h", 6379, 0, "user", "pa:ss"},
    {"redis://user:p@ss@h", "h", 6379, 0, "user", "p@ss"},
    {"redis://u%40x:p%3Aw%25%2f@h", "h", 6379, 0, "u@x", "p:w%/"},
    {"redis://[::1]:6380/0", "::1", 6380, 0, NULL, NULL},
    {"redis://[::1]", "::1", 6379, 0, NULL, NULL},
    {"redis://[2001:db8::7]/3", "2001:db8::7", 6379, 3, NULL, NULL},
    {"redis://[::ffff:10.0.0.1]:1", "::ffff:10.0.0.1", 1, 0, NULL, NULL},
    {"redis://a:b@[::1]:7/1", "::1", 7, 1, "a", "b"},
    {"REDIS://Host", "Host", 6379, 0, NULL, NULL},
    {"rediss://h:6380/1", "h", 6380, 1, NULL, NULL},
    {"REDISS://u:p@[::1]", "::1", 6379, 0, "u", "p"},
};

Test(url, every_valid_form_parses_into_its_parts) {
  size_t i;

  for (i = 0; i < sizeof(good_urls) / sizeof(good_urls[0]); i++) {
    const struct good_url *g = &good_urls[i];
    rt__config cfg;
    int err;

    memset(&cfg, 0, sizeof(cfg));
    cfg.port = 6379;
    err = rt__parse_url(g->url, &cfg);
    cr_assert_eq(err, 0, "%s: %s", g->url, rt_err_name(err));
    cr_assert_str_eq(cfg.host, g->host, "%s", g->url);
    cr_assert_eq(cfg.tls, g->url[5] == 's' || g->url[5] == 'S', "%s", g->url);
    cr_assert_eq(cfg.port, g->port, "%s: port %d", g->url, cfg.port);
    cr_assert_eq(cfg.db, g->db, "%s: db %d", g->url, cfg.db);
    assert_opt_str(cfg.username, g->user);
    assert_opt_str(cfg.password, g->pass);
    rt__config_free(&cfg);
  }
}

static const char *const bad_urls[] = {
    "",
    "unix://redis.sock",
    "localhost:6379",
    "//localhost",
    "http://h",
    "redis:/h",
    "redis:h",
    "redis://",
    "redis:///0",
    "redis://:6379",
    "redis://user:pass@",
    "redis://user@:6379",
    "redis://h:0",
    "redis://h:65536",
    "redis://h:99999999999999999999999",
    "redis://h:",
    "redis://h:/1",
    "redis://h:63a9",
    "redis://h:-1",
    "redis://h:+6379",
    "redis://h:6379:1",
    "redis://h/-1",
    "redis://h/+1",
    "redis://h/x",
    "redis://h/1x",
    "redis://h/0/",
    "redis://h//",
    "redis://h/2147483648",
    "redis://h/99999999999999999999999",
    "redis://h?db=1",
    "redis://h/0?x=1",
    "redis://h?script_path=",
    "redis://h/0?script_path=eval&x=1",
    "redis://h?wait_replicas=",
    "redis://h?wait_replicas=x",
    "redis://h?wait_replicas=-1",
    "redis://h?wait_replicas=2147483648",
    "redis://h?failover_fence_ms=86400001",
    "redis://h?failover_fence_ms=1.5",
    "redis://h?wait_replicas=1&",
    "redis://h?wait_replicas",
    "redis://h#frag",
    "redis://h/0#frag",
    "redis://h x",
    "redis:// h",
    "redis://h ",
    "redis://h\n",
    "redis://h\t:1",
    "redis://ho%20st",
    "redis://ho[st",
    "redis://[::1",
    "redis://[]",
    "redis://[::1]x",
    "redis://[::1]:",
    "redis://[::1]:6380:1",
    "redis://[abc]",
    "redis://[::g]",
    "redis://[::1]]",
    "redis://u%zz@h",
    "redis://u%2@h",
    "redis://u%@h",
    "redis://:p%@h",
    "redis://:p%0@h",
    "redis://:p%00@h",
    "redis://:p%g1@h",
};

Test(url, every_malformed_form_is_rejected_and_leaves_cfg_unchanged) {
  size_t i;

  for (i = 0; i < sizeof(bad_urls) / sizeof(bad_urls[0]); i++) {
    rt__config cfg;
    char *host, *user, *pass;
    int err;

    memset(&cfg, 0, sizeof(cfg));
    cfg.host = host = rt__strdup("before");
    cfg.username = user = rt__strdup("u0");
    cfg.password = pass = rt__strdup("p0");
    cfg.port = 1111;
    cfg.db = 7;
    err = rt__parse_url(bad_urls[i], &cfg);
    cr_assert_eq(err, RT_EURL, "\"%s\": got %s", bad_urls[i], rt_err_name(err));
    cr_assert_eq(cfg.host, host);
    cr_assert_eq(cfg.username, user);
    cr_assert_eq(cfg.password, pass);
    cr_assert_str_eq(cfg.host, "before");
    cr_assert_eq(cfg.port, 1111);
    cr_assert_eq(cfg.db, 7);
    rt__config_free(&cfg);
  }
}

/* "?script_path=" sets the option; the option and the URL must agree when
 * both are given. */
Test(url, script_path_parameter_sets_the_option) {
  static const struct {
    const char *url;
    int db, path;
  } ok[] = {
      {"redis://h?script_path=eval", 0, RT_SCRIPT_PATH_EVAL},
      {"redis://h/3?script_path=functions", 3, RT_SCRIPT_PATH_FUNCTIONS},
      {"redis://h/?script_path=auto", 0, RT_SCRIPT_PATH_AUTO},
      {"redis://h?script_path=module", 0, RT_SCRIPT_PATH_MODULE},
      {"redis-sentinel://a/2?script_path=eval#m", 2, RT_SCRIPT_PATH_EVAL}};
  for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
    rt_options_t o;
    rt__config cfg;
    char msg[256];
    rt_options_init(&o);
    o.url = ok[i].url;
    cr_assert_eq(rt__config_load(&cfg, &o, msg, sizeof(msg)), 0, "%s: %s",
                 ok[i].url, msg);
    cr_assert_eq(cfg.db, ok[i].db, "%s", ok[i].url);
    cr_assert_eq(cfg.script_path, ok[i].path, "%s", ok[i].url);
    rt__config_free(&cfg);
  }
  rt_options_t o;
  rt__config cfg;
  char msg[256];
  rt_options_init(&o);
  o.script_path = RT_SCRIPT_PATH_EVAL;
  cr_assert_eq(rt__config_load(&cfg, &o, msg, sizeof(msg)), 0, "%s", msg);
  cr_assert_eq(cfg.script_path, RT_SCRIPT_PATH_EVAL);
  rt__config_free(&cfg);
  o.url = "redis://h?script_path=eval";
  cr_assert_eq(rt__config_load(&cfg, &o, msg, sizeof(msg)), 0, "%s", msg);
  rt__config_free(&cfg);
  o.url = "redis://h?script_path=functions";
  cr_assert_eq(rt__config_load(&cfg, &o, msg, sizeof(msg)), RT_EINVAL);
  cr_assert(strstr(msg, "script_path") != NULL, "%s", msg);
  o.url = NULL;
  o.script_path = RT_SCRIPT_PATH_MODULE + 1;
  cr_assert_eq(rt__config_load(&cfg, &o, msg, sizeof(msg)), RT_EINVAL);
  cr_assert(strstr(msg, "script_path: 4") != NULL, "%s", msg);
}

/* "?wait_replicas=" and "?failover_fence_ms=" set those options (an option
 * left at 0 takes the URL's; both given must agree), and a query may carry
 * several parameters. */
Test(url, wait_replicas_and_failover_fence_ms_parameters_set_the_options) {
  rt_options_t o;
  rt__config cfg;
  char msg[256];
  rt_options_init(&o);
  o.url = "redis://h/1?wait_replicas=2&failover_fence_ms=5000&script_path=eval";
  cr_assert_eq(rt__config_load(&cfg, &o, msg, sizeof(msg)), 0, "%s", msg);
  cr_assert_eq(cfg.db, 1);
  cr_assert_eq(cfg.wait_replicas, 2);
  cr_assert_eq(cfg.failover_fence_ms, 5000);
  cr_assert_eq(cfg.script_path, RT_SCRIPT_PATH_EVAL);
  rt__config_free(&cfg);
  o.url = "redis-sentinel://a,b/2?failover_fence_ms=3000#m";
  cr_assert_eq(rt__config_load(&cfg, &o, msg, sizeof(msg)), 0, "%s", msg);
  cr_assert_eq(cfg.failover_fence_ms, 3000);
  cr_assert_eq(cfg.wait_replicas, 0);
  rt__config_free(&cfg);
  /* The same value in both places; an option left at 0 takes the URL's. */
  o.url = "redis://h?wait_replicas=1";
  o.wait_replicas = 1;
  cr_assert_eq(rt__config_load(&cfg, &o, msg, sizeof(msg)), 0, "%s", msg);
  cr_assert_eq(cfg.wait_replicas, 1);
  rt__config_free(&cfg);
  o.wait_replicas = 2;
  cr_assert_eq(rt__config_load(&cfg, &o, msg, sizeof(msg)), RT_EINVAL);
  cr_assert(strstr(msg, "wait_replicas: 2 differs from the url's "
                        "wait_replicas=1") != NULL,
            "%s", msg);
  o.wait_replicas = 0;
  o.url = "redis://h?failover_fence_ms=5000";
  o.failover_fence_ms = 4000;
  cr_assert_eq(rt__config_load(&cfg, &o, msg, sizeof(msg)), RT_EINVAL);
  cr_assert(strstr(msg, "failover_fence_ms: 4000 differs") != NULL, "%s", msg);
  /* The URL's wait_replicas meets the same checks as the option's. */
  o.failover_fence_ms = 0;
  o.url = "redis://h?wait_replicas=1";
  o.wait_replicas_timeout_ms = o.command_timeout_ms;
  cr_assert_eq(rt__config_load(&cfg, &o, msg, sizeof(msg)), RT_EINVAL);
  cr_assert(strstr(msg, "wait_replicas_timeout_ms") != NULL, "%s", msg);
  /* An unknown parameter is named. */
  rt_options_init(&o);
  o.url = "redis://h?wait_replicas=1&retries=3";
  cr_assert_eq(rt__config_load(&cfg, &o, msg, sizeof(msg)), RT_EURL);
  cr_assert(strstr(msg, "\"retries\" is not supported") != NULL, "%s", msg);
}

Test(url, null_url_is_rejected) {
  rt__config cfg;

  memset(&cfg, 0, sizeof(cfg));
  cr_assert_eq(rt__parse_url(NULL, &cfg), RT_EURL);
}

Test(url, absent_parts_keep_their_values_and_present_ones_replace_them) {
  rt__config cfg;

  memset(&cfg, 0, sizeof(cfg));
  cfg.host = rt__strdup("old");
  cfg.username = rt__strdup("olduser");
  cfg.password = rt__strdup("oldpass");
  cfg.port = 1234;
  cfg.db = 5;
  cr_assert_eq(rt__parse_url("redis://new", &cfg), 0);
  cr_assert_str_eq(cfg.host, "new");
  cr_assert_eq(cfg.port, 1234);
  cr_assert_eq(cfg.db, 5);
  cr_assert_str_eq(cfg.username, "olduser");
  cr_assert_str_eq(cfg.password, "oldpass");
  cr_assert_eq(rt__parse_url("redis://nu:np@newer:99/1", &cfg), 0);
  cr_assert_str_eq(cfg.host, "newer");
  cr_assert_str_eq(cfg.username, "nu");
  cr_assert_str_eq(cfg.password, "np");
  cr_assert_eq(cfg.port, 99);
  cr_assert_eq(cfg.db, 1);
  rt__config_free(&cfg);
}

/* ---- messages: which part is wrong and why ------------------------------ */

struct url_msg {
  const char *url;
  const char *says;
};

static const struct url_msg url_msgs[] = {
    {"", "url: empty"},
    {"unix:///tmp/redis.sock", "unix:// (a Unix socket) is not supported"},
    {"http://h", "unknown scheme \"http://\""},
    {"localhost:6379", "no scheme"},
    {"redis:/h", "no scheme"},
    {"redis://", "the host is missing"},
    {"redis://:6379", "the host is missing"},
    {"redis://u:secret@", "the host is missing"},
    {"redis://h:", "the port after ':' is empty"},
    {"redis://h:notaport", "the port is not a number"},
    {"redis://h:6379:1", "the port is not a number"},
    {"redis://h:0", "port out of range (1..65535)"},
    {"redis://h:99999", "port out of range (1..65535)"},
    {"redis://h:99999999999999999999", "port out of range (1..65535)"},
    {"redis://h/x", "the db after '/' is not a number"},
    {"redis://h/2147483648", "db out of range (0..2147483647)"},
    {"redis://h?db=1", "query parameter \"db\" is not supported"},
    {"redis://h/1?script_path=lua",
     "script_path=lua: not auto, module, functions"},
    {"redis://h/0#frag", "fragments (#...) are not supported"},
    {"redis://h x", "a space or control character (\\x20) at offset 9"},
    {"redis://ho%20st", "invalid character '%' in the host"},
    {"redis://ho[st", "invalid character '[' in the host"},
    {"redis://[::1", "IPv6 address without its closing ']'"},
    {"redis://[]", "not an IPv6 address"},
    {"redis://[abc]", "not an IPv6 address"},
    {"redis://[::1]x", "'x' after the IPv6 address"},
    {"redis://u%zz@h", "bad percent-escape in the username"},
    {"redis://:p%00@h", "bad percent-escape in the password"},
    {"redis://"
     "h123456789h123456789h123456789h123456789h123456789h123456789h123456789"
     "h123456789h123456789h123456789h123456789h123456789h123456789h123456789"
     "h123456789h123456789h123456789h123456789h123456789h123456789h123456789"
     "h123456789h123456789h123456789h123456789h123456789",
     "the host is longer than 255 bytes"},
    /* A raw '#', '/' or '?' in a password cuts the URL before its '@'. */
    {"redis://user:pa#ss@h:6379",
     "'#' before the last '@': a '/', '?' or '#' in the username or "
     "password must be percent-encoded (%2F, %3F, %23)"},
    {"redis://:pa/ss@h", "'/' before the last '@'"},
    {"redis://:pa?ss@h/1", "'?' before the last '@'"},
    {"redis-sentinel://:pa/ss@h#m", "'/' before the last '@'"},
    {"redis-sentinel://:pa#ss@h#m", "'#' before the last '@'"},
};

Test(url, every_error_message_names_the_part_and_why) {
  for (size_t i = 0; i < sizeof(url_msgs) / sizeof(url_msgs[0]); i++) {
    rt__config cfg;
    char msg[256];
    memset(&cfg, 0, sizeof(cfg));
    memset(msg, 'x', sizeof(msg));
    int err = rt__parse_url_why(url_msgs[i].url, &cfg, msg, sizeof(msg));
    cr_assert_eq(err, RT_EURL, "\"%s\": %s", url_msgs[i].url, rt_err_name(err));
    cr_assert(strstr(msg, url_msgs[i].says) != NULL,
              "\"%s\": message \"%s\", want \"%s\"", url_msgs[i].url, msg,
              url_msgs[i].says);
    cr_assert(strncmp(msg, "url: ", 5) == 0, "%s", msg);
    rt__config_free(&cfg);
  }
}

Test(url, a_message_never_repeats_the_password) {
  char msg[256];
  rt_options_t o;
  rt_options_init(&o);
  o.url = "redis://user:hunter2@h:99999";
  cr_assert_eq(rt_options_check(&o, msg, sizeof(msg)), RT_EURL);
  cr_assert_str_eq(msg, "url: port out of range (1..65535)");
}

/* ---- Sentinel URLs ------------------------------------------------------- */

struct sentinel_url {
  const char *url;
  size_t n;
  const char *hosts[3];
  int ports[3];
  const char *master;
  int db;
  const char *user, *pass;
  int tls;
};

static const struct sentinel_url sentinel_urls[] = {
    {"redis-sentinel://h#mymaster",
     1,
     {"h"},
     {26379},
     "mymaster",
     0,
     NULL,
     NULL,
     0},
    {"redis-sentinel://a:1,b,c:3/2#m",
     3,
     {"a", "b", "c"},
     {1, 26379, 3},
     "m",
     2,
     NULL,
     NULL,
     0},
    {"redis-sentinel://:pw@[::1]:5000,10.0.0.2/#m%20x",
     2,
     {"::1", "10.0.0.2"},
     {5000, 26379},
     "m x",
     0,
     NULL,
     "pw",
     0},
    {"redis-sentinel://u:p@ss@h:7#m", 1, {"h"}, {7}, "m", 0, "u", "p@ss", 0},
    {"REDISS-SENTINEL://u@h#m", 1, {"h"}, {26379}, "m", 0, "u", NULL, 1},
};

Test(sentinel_url, every_valid_form_parses_into_sentinels_and_a_master) {
  for (size_t i = 0; i < sizeof(sentinel_urls) / sizeof(sentinel_urls[0]);
       i++) {
    const struct sentinel_url *g = &sentinel_urls[i];
    rt__config cfg;
    memset(&cfg, 0, sizeof(cfg));
    int err = rt__parse_url(g->url, &cfg);
    cr_assert_eq(err, 0, "%s: %s", g->url, rt_err_name(err));
    cr_assert_eq(cfg.nsentinels, g->n, "%s", g->url);
    for (size_t k = 0; k < g->n; k++) {
      cr_assert_str_eq(cfg.sentinels[k].host, g->hosts[k], "%s", g->url);
      cr_assert_eq(cfg.sentinels[k].port, g->ports[k], "%s", g->url);
    }
    cr_assert_str_eq(cfg.sentinel_master, g->master, "%s", g->url);
    cr_assert_eq(cfg.db, g->db, "%s", g->url);
    cr_assert_eq(cfg.sentinel_tls, g->tls, "%s", g->url);
    cr_assert_null(cfg.host, "%s: no host of its own", g->url);
    assert_opt_str(cfg.username, g->user);
    assert_opt_str(cfg.password, g->pass);
    rt__config_free(&cfg);
  }
}

static const struct url_msg sentinel_msgs[] = {
    {"redis-sentinel://h", "the master's name is missing"},
    {"redis-sentinel://h#", "the master's name is missing"},
    {"redis-sentinel://#m", "Sentinel 1 of the list is empty"},
    {"redis-sentinel://a,,b#m", "Sentinel 2 of the list is empty"},
    {"redis-sentinel://a,#m", "Sentinel 2 of the list is empty"},
    {"redis-sentinel://a,b:0#m", "port out of range (1..65535)"},
    {"redis-sentinel://a:x#m", "the port is not a number"},
    {"redis-sentinel://a:#m", "the port after ':' is empty"},
    {"redis-sentinel://a%b#m", "invalid character '%' in the host"},
    {"redis-sentinel://[::1#m", "IPv6 address without its closing ']'"},
    {"redis-sentinel://a/x#m", "the db after '/' is not a number"},
    {"redis-sentinel://a/1/#m", "the db after '/' is not a number"},
    {"redis-sentinel://a?x=1#m", "query parameter \"x\" is not supported"},
    {"redis-sentinel://a#m%00", "bad percent-escape in the master's name"},
    {"redis-sentinel://u%zz@a#m", "bad percent-escape in the username"},
    {"redis-sentinel://a b#m", "a space or control character"},
    {"redis-sentinel://a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q#m",
     "more than 16 Sentinels"},
};

Test(sentinel_url, every_malformed_form_names_the_part_and_leaves_cfg) {
  for (size_t i = 0; i < sizeof(sentinel_msgs) / sizeof(sentinel_msgs[0]);
       i++) {
    rt__config cfg;
    char msg[256];
    memset(&cfg, 0, sizeof(cfg));
    cfg.host = rt__strdup("before");
    cfg.db = 7;
    int err = rt__parse_url_why(sentinel_msgs[i].url, &cfg, msg, sizeof(msg));
    cr_assert_eq(err, RT_EURL, "\"%s\": %s", sentinel_msgs[i].url,
                 rt_err_name(err));
    cr_assert(strstr(msg, sentinel_msgs[i].says) != NULL,
              "\"%s\": message \"%s\", want \"%s\"", sentinel_msgs[i].url, msg,
              sentinel_msgs[i].says);
    cr_assert_str_eq(cfg.host, "before");
    cr_assert_eq(cfg.db, 7);
    cr_assert_null(cfg.sentinels);
    cr_assert_null(cfg.sentinel_master);
    rt__config_free(&cfg);
  }
}

Test(sentinel_url, is_accepted_with_the_sentinels_own_credentials) {
  rt_options_t o;
  rt__config cfg;
  char msg[256];
  rt_options_init(&o);
  o.url = "rediss-sentinel://:secret@a,b:26380#mymaster";
  o.sentinel_password = "sentinel-secret";
  o.tls_insecure = 1;
  cr_assert_eq(rt__config_load(&cfg, &o, msg, sizeof(msg)), 0, "%s", msg);
  cr_assert_eq(cfg.tls, 1);
  cr_assert_str_eq(cfg.password, "secret");
  cr_assert_str_eq(cfg.sentinel_password, "sentinel-secret");
  cr_assert_null(cfg.sentinel_username);
  cr_assert_str_eq(cfg.host, "a");
  cr_assert_eq(cfg.port, 26379);
  rt__config_free(&cfg);

  o.url = "redis://h";
  o.tls_insecure = 0;
  cr_assert_eq(rt_options_check(&o, msg, sizeof(msg)), RT_EINVAL);
  cr_assert(strstr(msg, "the url is not redis-sentinel://") != NULL, "%s", msg);
}

/* ---- cluster seeds: "redis://a[:port],b[:port]..." -------------------------- */

Test(seed_url, seeds_after_the_first_host_parse_in_order) {
  rt__config cfg;
  memset(&cfg, 0, sizeof(cfg));
  cfg.port = 6379;
  int err = rt__parse_url("rediss://u:p@a:7000,b,[::1]:7002/0", &cfg);
  cr_assert_eq(err, 0, "%s", rt_err_name(err));
  cr_assert_str_eq(cfg.host, "a");
  cr_assert_eq(cfg.port, 7000);
  cr_assert_eq(cfg.tls, 1);
  cr_assert_eq(cfg.nseeds, 2);
  cr_assert_str_eq(cfg.seeds[0].host, "b");
  cr_assert_eq(cfg.seeds[0].port, 6379);
  cr_assert_str_eq(cfg.seeds[1].host, "::1");
  cr_assert_eq(cfg.seeds[1].port, 7002);
  assert_opt_str(cfg.password, "p");
  rt__config_free(&cfg);

  memset(&cfg, 0, sizeof(cfg));
  cr_assert_eq(rt__parse_url("redis://solo:7001", &cfg), 0);
  cr_assert_eq(cfg.nseeds, 0);
  cr_assert_null(cfg.seeds);
  rt__config_free(&cfg);
}

static const struct url_msg seed_msgs[] = {
    {"redis://a,,b", "seed 2 of the list is empty"},
    {"redis://a,", "seed 2 of the list is empty"},
    {"redis://a,b:0", "port out of range (1..65535)"},
    {"redis://,a", "the host is missing"},
    {"redis://a,b%c", "invalid character '%' in the host"},
    {"redis://a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q,r", "more than 16 seeds"},
};

Test(seed_url, every_malformed_seed_list_names_the_part_and_leaves_cfg) {
  for (size_t i = 0; i < sizeof(seed_msgs) / sizeof(seed_msgs[0]); i++) {
    rt__config cfg;
    char msg[256];
    memset(&cfg, 0, sizeof(cfg));
    cfg.host = rt__strdup("before");
    int err = rt__parse_url_why(seed_msgs[i].url, &cfg, msg, sizeof(msg));
    cr_assert_eq(err, RT_EURL, "\"%s\": %s", seed_msgs[i].url,
                 rt_err_name(err));
    cr_assert(strstr(msg, seed_msgs[i].says) != NULL,
              "\"%s\": message \"%s\", want \"%s\"", seed_msgs[i].url, msg,
              seed_msgs[i].says);
    cr_assert_str_eq(cfg.host, "before");
    cr_assert_null(cfg.seeds);
    rt__config_free(&cfg);
  }
}
