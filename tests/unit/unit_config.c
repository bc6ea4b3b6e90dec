/* Options defaults and validation and the request argument checks (name,
 * TTL, timeout); the URL parser has unit_url.c. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "common.h"

/* What "on error *cfg holds nothing to free" looks like. */
static int is_zeroed(const rt__config *cfg) {
  return cfg->host == NULL && cfg->username == NULL && cfg->password == NULL &&
         cfg->prefix == NULL && cfg->port == 0 && cfg->db == 0 &&
         cfg->prefix_len == 0;
}

/* ---- defaults ---------------------------------------------------------- */

Test(options, init_fills_the_documented_defaults) {
  rt_options_t o;

  memset(&o, 0xa5, sizeof(o));
  rt_options_init(&o);
  cr_assert_null(o.url);
  cr_assert_str_eq(o.host, "127.0.0.1");
  cr_assert_eq(o.port, 6379);
  cr_assert_eq(o.db, 0);
  cr_assert_null(o.username);
  cr_assert_null(o.password);
  cr_assert_str_eq(o.prefix, "rt");
  cr_assert_eq(o.default_ttl_ms, 30000);
  cr_assert_eq(o.connect_timeout_ms, 5000);
  cr_assert_eq(o.command_timeout_ms, 5000);
}

Test(options, init_with_null_does_nothing) { rt_options_init(NULL); }

Test(config, null_options_give_the_defaults) {
  rt__config cfg;

  cr_assert_eq(rt__config_init(&cfg, NULL), 0);
  cr_assert_str_eq(cfg.host, "127.0.0.1");
  cr_assert_eq(cfg.port, 6379);
  cr_assert_eq(cfg.db, 0);
  cr_assert_null(cfg.username);
  cr_assert_null(cfg.password);
  cr_assert_str_eq(cfg.prefix, "rt");
  cr_assert_eq(cfg.prefix_len, 2);
  cr_assert_eq(cfg.default_ttl_ms, 30000);
  cr_assert_eq(cfg.connect_timeout_ms, 5000);
  cr_assert_eq(cfg.command_timeout_ms, 5000);
  rt__config_free(&cfg);
  cr_assert(is_zeroed(&cfg));
  rt__config_free(&cfg); /* a second free is harmless */
}

Test(config, strings_are_copied_not_borrowed) {
  char host[] = "redis.local", user[] = "alice", pass[] = "s3cret",
       prefix[] = "app:locks";
  rt_options_t o;
  rt__config cfg;

  rt_options_init(&o);
  o.host = host;
  o.port = 7000;
  o.db = 3;
  o.username = user;
  o.password = pass;
  o.prefix = prefix;
  o.default_ttl_ms = 1234;
  o.connect_timeout_ms = 10;
  o.command_timeout_ms = 20;
  cr_assert_eq(rt__config_init(&cfg, &o), 0);
  memset(host, 'x', strlen(host));
  memset(user, 'x', strlen(user));
  memset(pass, 'x', strlen(pass));
  memset(prefix, 'x', strlen(prefix));
  cr_assert_str_eq(cfg.host, "redis.local");
  cr_assert_eq(cfg.port, 7000);
  cr_assert_eq(cfg.db, 3);
  cr_assert_str_eq(cfg.username, "alice");
  cr_assert_str_eq(cfg.password, "s3cret");
  cr_assert_str_eq(cfg.prefix, "app:locks");
  cr_assert_eq(cfg.prefix_len, 9);
  cr_assert_eq(cfg.default_ttl_ms, 1234);
  cr_assert_eq(cfg.connect_timeout_ms, 10);
  cr_assert_eq(cfg.command_timeout_ms, 20);
  rt__config_free(&cfg);
}

Test(config, empty_username_and_password_mean_none) {
  rt_options_t o;
  rt__config cfg;

  rt_options_init(&o);
  o.username = "";
  o.password = "";
  cr_assert_eq(rt__config_init(&cfg, &o), 0);
  cr_assert_null(cfg.username);
  cr_assert_null(cfg.password);
  rt__config_free(&cfg);
}

Test(config, url_wins_over_host_port_db) {
  rt_options_t o;
  rt__config cfg;

  rt_options_init(&o);
  o.url = "redis://db.example:6390";
  o.host = "ignored";
  o.port = 7777;
  o.db = 9;
  cr_assert_eq(rt__config_init(&cfg, &o), 0);
  cr_assert_str_eq(cfg.host, "db.example");
  cr_assert_eq(cfg.port, 6390);
  cr_assert_eq(cfg.db, 0);
  cr_assert_null(cfg.username);
  cr_assert_null(cfg.password);
  rt__config_free(&cfg);
}

/* A password (or username) option next to a URL is never dropped: it
 * fills what the URL lacks, and a different one in both is refused. */
Test(config, credentials_next_to_a_url_merge_or_are_refused) {
  rt_options_t o;
  rt__config cfg;
  char msg[256];

  rt_options_init(&o);
  o.url = "redis://db.example:6390/2";
  o.username = "alice";
  o.password = "from-env";
  cr_assert_eq(rt__config_init(&cfg, &o), 0);
  cr_assert_str_eq(cfg.username, "alice");
  cr_assert_str_eq(cfg.password, "from-env");
  cr_assert_eq(cfg.db, 2);
  rt__config_free(&cfg);

  o.url = "redis://:from-env@h"; /* the same password twice is fine */
  o.username = NULL;
  cr_assert_eq(rt__config_init(&cfg, &o), 0);
  cr_assert_str_eq(cfg.password, "from-env");
  cr_assert_null(cfg.username);
  rt__config_free(&cfg);

  o.url = "redis://bob@h"; /* user from the URL, password from the field */
  cr_assert_eq(rt__config_init(&cfg, &o), 0);
  cr_assert_str_eq(cfg.username, "bob");
  cr_assert_str_eq(cfg.password, "from-env");
  rt__config_free(&cfg);

  o.url = "redis://:in-url@h";
  memset(&cfg, 0x5a, sizeof(cfg));
  cr_assert_eq(rt__config_load(&cfg, &o, msg, sizeof(msg)), RT_EINVAL);
  cr_assert(is_zeroed(&cfg));
  cr_assert(strstr(msg, "password") != NULL, "%s", msg);
  cr_assert(strstr(msg, "in-url") == NULL && strstr(msg, "from-env") == NULL,
            "the message repeats a password: %s", msg);

  o.url = "redis://carol:p@h";
  o.username = "alice";
  o.password = NULL;
  cr_assert_eq(rt__config_load(&cfg, &o, msg, sizeof(msg)), RT_EINVAL);
  cr_assert(strstr(msg, "username") != NULL, "%s", msg);
}

Test(config, url_makes_invalid_host_fields_irrelevant) {
  rt_options_t o;
  rt__config cfg;

  rt_options_init(&o);
  o.url = "redis://u:p@h/4";
  o.host = NULL;
  o.port = 0;
  o.db = -1;
  cr_assert_eq(rt__config_init(&cfg, &o), 0);
  cr_assert_str_eq(cfg.host, "h");
  cr_assert_eq(cfg.port, 6379);
  cr_assert_eq(cfg.db, 4);
  cr_assert_str_eq(cfg.username, "u");
  cr_assert_str_eq(cfg.password, "p");
  rt__config_free(&cfg);
}

/* ---- each validation error --------------------------------------------- */

struct bad_opts {
  const char *what;
  int expect;
  void (*mutate)(rt_options_t *o);
};

static char long_prefix[RT_PREFIX_MAX + 2];
static char max_prefix[RT_PREFIX_MAX + 1];

static void m_url_bad(rt_options_t *o) { o->url = "unix://h"; }
static void m_url_empty(rt_options_t *o) { o->url = ""; }
static void m_prefix_null(rt_options_t *o) { o->prefix = NULL; }
static void m_prefix_empty(rt_options_t *o) { o->prefix = ""; }
static void m_prefix_long(rt_options_t *o) {
  memset(long_prefix, 'p', RT_PREFIX_MAX + 1);
  o->prefix = long_prefix;
}
static void m_prefix_open(rt_options_t *o) { o->prefix = "a{b"; }
static void m_prefix_close(rt_options_t *o) { o->prefix = "ab}"; }
static void m_prefix_tag(rt_options_t *o) { o->prefix = "{rt}"; }
static void m_ttl_zero(rt_options_t *o) { o->default_ttl_ms = 0; }
static void m_ttl_neg(rt_options_t *o) { o->default_ttl_ms = -1; }
static void m_ttl_big(rt_options_t *o) { o->default_ttl_ms = RT_TTL_MAX + 1; }
static void m_conn_zero(rt_options_t *o) { o->connect_timeout_ms = 0; }
static void m_conn_neg(rt_options_t *o) { o->connect_timeout_ms = -1; }
static void m_cmd_zero(rt_options_t *o) { o->command_timeout_ms = 0; }
static void m_cmd_neg(rt_options_t *o) { o->command_timeout_ms = INT64_MIN; }
static void m_port_zero(rt_options_t *o) { o->port = 0; }
static void m_port_neg(rt_options_t *o) { o->port = -1; }
static void m_port_big(rt_options_t *o) { o->port = 65536; }
static void m_db_neg(rt_options_t *o) { o->db = -1; }
static void m_host_null(rt_options_t *o) { o->host = NULL; }
static void m_host_empty(rt_options_t *o) { o->host = ""; }

static const struct bad_opts bad_opts[] = {
    {"unix url", RT_EURL, m_url_bad},
    {"empty url", RT_EURL, m_url_empty},
    {"NULL prefix", RT_EPREFIX, m_prefix_null},
    {"empty prefix", RT_EPREFIX, m_prefix_empty},
    {"prefix over RT_PREFIX_MAX", RT_EPREFIX, m_prefix_long},
    {"prefix with '{'", RT_EPREFIX, m_prefix_open},
    {"prefix with '}'", RT_EPREFIX, m_prefix_close},
    {"prefix that is a hash tag", RT_EPREFIX, m_prefix_tag},
    {"ttl 0", RT_ETTL, m_ttl_zero},
    {"ttl -1", RT_ETTL, m_ttl_neg},
    {"ttl over RT_TTL_MAX", RT_ETTL, m_ttl_big},
    {"connect timeout 0", RT_ETIMEOUTARG, m_conn_zero},
    {"connect timeout -1", RT_ETIMEOUTARG, m_conn_neg},
    {"command timeout 0", RT_ETIMEOUTARG, m_cmd_zero},
    {"command timeout INT64_MIN", RT_ETIMEOUTARG, m_cmd_neg},
    {"port 0", RT_EINVAL, m_port_zero},
    {"port -1", RT_EINVAL, m_port_neg},
    {"port 65536", RT_EINVAL, m_port_big},
    {"db -1", RT_EINVAL, m_db_neg},
    {"NULL host", RT_EINVAL, m_host_null},
    {"empty host", RT_EINVAL, m_host_empty},
};

Test(config, each_invalid_option_gives_its_error_and_leaves_nothing) {
  size_t i;

  for (i = 0; i < sizeof(bad_opts) / sizeof(bad_opts[0]); i++) {
    rt_options_t o;
    rt__config cfg;
    int err;

    rt_options_init(&o);
    bad_opts[i].mutate(&o);
    memset(&cfg, 0x5a, sizeof(cfg));
    err = rt__config_init(&cfg, &o);
    cr_assert_eq(err, bad_opts[i].expect, "%s: got %s, want %s",
                 bad_opts[i].what, rt_err_name(err),
                 rt_err_name(bad_opts[i].expect));
    cr_assert(is_zeroed(&cfg), "%s: cfg not cleared", bad_opts[i].what);
  }
}

Test(config, limits_themselves_are_accepted) {
  rt_options_t o;
  rt__config cfg;

  rt_options_init(&o);
  memset(max_prefix, 'p', RT_PREFIX_MAX);
  o.prefix = max_prefix;
  o.default_ttl_ms = RT_TTL_MAX;
  o.port = 65535;
  o.db = 2147483647;
  o.connect_timeout_ms = 1;
  o.command_timeout_ms = INT64_MAX;
  cr_assert_eq(rt__config_init(&cfg, &o), 0);
  cr_assert_eq(cfg.prefix_len, RT_PREFIX_MAX);
  cr_assert_eq(cfg.default_ttl_ms, RT_TTL_MAX);
  cr_assert_eq(cfg.port, 65535);
  rt__config_free(&cfg);

  rt_options_init(&o);
  o.prefix = "x";
  o.default_ttl_ms = 1;
  o.port = 1;
  cr_assert_eq(rt__config_init(&cfg, &o), 0);
  cr_assert_eq(cfg.prefix_len, 1);
  cr_assert_eq(cfg.default_ttl_ms, 1);
  cr_assert_eq(cfg.port, 1);
  rt__config_free(&cfg);
}

/* ---- request arguments --------------------------------------------------- */

Test(args, names_must_be_non_empty_and_at_most_RT_NAME_MAX_bytes) {
  static char name[RT_NAME_MAX + 1];

  cr_assert_eq(rt__check_name(name, 0), RT_ENAMEEMPTY);
  cr_assert_eq(rt__check_name(NULL, 0), RT_ENAMEEMPTY);
  cr_assert_eq(rt__check_name(NULL, 5), RT_ENAMEEMPTY);
  cr_assert_eq(rt__check_name(name, 1), 0); /* a single NUL byte is a name */
  cr_assert_eq(rt__check_name(name, RT_NAME_MAX), 0);
  cr_assert_eq(rt__check_name(name, RT_NAME_MAX + 1), RT_ENAMETOOLONG);
  cr_assert_eq(rt__check_name(name, SIZE_MAX), RT_ENAMETOOLONG);
}

Test(args, ttl_default_resolves_and_only_1_to_RT_TTL_MAX_is_kept) {
  int64_t out = 42;

  cr_assert_eq(rt__resolve_ttl(RT_TTL_DEFAULT, 30000, &out), 0);
  cr_assert_eq(out, 30000);
  cr_assert_eq(rt__resolve_ttl(1, 30000, &out), 0);
  cr_assert_eq(out, 1);
  cr_assert_eq(rt__resolve_ttl(RT_TTL_MAX, 30000, &out), 0);
  cr_assert_eq(out, RT_TTL_MAX);

  out = 42;
  cr_assert_eq(rt__resolve_ttl(0, 30000, &out), RT_ETTL);
  cr_assert_eq(rt__resolve_ttl(-2, 30000, &out), RT_ETTL);
  cr_assert_eq(rt__resolve_ttl(RT_TTL_MAX + 1, 30000, &out), RT_ETTL);
  cr_assert_eq(rt__resolve_ttl(INT64_MIN, 30000, &out), RT_ETTL);
  cr_assert_eq(rt__resolve_ttl(INT64_MAX, 30000, &out), RT_ETTL);
  cr_assert_eq(out, 42, "out must be untouched on error");
}

Test(args, ttl_default_is_checked_too) {
  int64_t out = 42;

  cr_assert_eq(rt__resolve_ttl(RT_TTL_DEFAULT, 0, &out), RT_ETTL);
  cr_assert_eq(rt__resolve_ttl(RT_TTL_DEFAULT, RT_TTL_MAX + 1, &out), RT_ETTL);
  cr_assert_eq(out, 42);
}

Test(args, timeouts_must_be_positive_or_forever) {
  cr_assert_eq(rt__check_timeout(RT_FOREVER), 0);
  cr_assert_eq(rt__check_timeout(1), 0);
  cr_assert_eq(rt__check_timeout(INT64_MAX), 0);
  cr_assert_eq(rt__check_timeout(0), RT_ETIMEOUTARG);
  cr_assert_eq(rt__check_timeout(-2), RT_ETIMEOUTARG);
  cr_assert_eq(rt__check_timeout(INT64_MIN), RT_ETIMEOUTARG);
  /* -1 is "the default" of a lease and a renewal, never of a timeout. */
  cr_assert_eq(rt__check_timeout(-1), RT_ETIMEOUTARG);
}
Test(check, options_check_gives_the_code_and_the_reason) {
  rt_options_t o;
  char msg[128];

  cr_assert_eq(rt_options_check(NULL, msg, sizeof(msg)), 0);
  cr_assert_str_eq(msg, "");
  rt_options_init(&o);
  memset(msg, 'x', sizeof(msg));
  cr_assert_eq(rt_options_check(&o, msg, sizeof(msg)), 0);
  cr_assert_str_eq(msg, "");

  o.url = "unix://h";
  cr_assert_eq(rt_options_check(&o, msg, sizeof(msg)), RT_EURL);
  cr_assert_str_eq(msg, "url: unix:// (a Unix socket) is not supported: use "
                        "redis://host:port");
  /* Truncated to fit, always terminated; no buffer at all is fine. */
  cr_assert_eq(rt_options_check(&o, msg, 8), RT_EURL);
  cr_assert_str_eq(msg, "url: un");
  cr_assert_eq(rt_options_check(&o, NULL, 0), RT_EURL);

  rt_options_init(&o);
  o.url = "redis://h";
  o.tls = 1;
  cr_assert_eq(rt_options_check(&o, msg, sizeof(msg)), RT_EINVAL);
  cr_assert_str_eq(msg, "tls: 1, but the url says redis:// (no TLS): write "
                        "rediss://");
  o.url = "redis-sentinel://h#m";
  cr_assert_eq(rt_options_check(&o, msg, sizeof(msg)), RT_EINVAL);
  cr_assert_str_eq(msg, "tls: 1, but the url says redis-sentinel:// (no TLS): "
                        "write rediss-sentinel://");

  rt_options_init(&o);
  o.port = 70000;
  cr_assert_eq(rt_options_check(&o, msg, sizeof(msg)), RT_EINVAL);
  cr_assert_str_eq(msg, "port: 70000 is out of range (1..65535)");
  rt_options_init(&o);
  o.prefix = "a{b";
  cr_assert_eq(rt_options_check(&o, msg, sizeof(msg)), RT_EPREFIX);
  cr_assert_str_eq(msg, "prefix: contains '{' or '}'");
  rt_options_init(&o);
  o.default_ttl_ms = 0;
  cr_assert_eq(rt_options_check(&o, msg, sizeof(msg)), RT_ETTL);
  cr_assert(strncmp(msg, "default_ttl_ms: 0 is out of range", 33) == 0, "%s",
            msg);
  rt_options_init(&o);
  o.command_timeout_ms = -3;
  cr_assert_eq(rt_options_check(&o, msg, sizeof(msg)), RT_ETIMEOUTARG);
  cr_assert_str_eq(msg, "command_timeout_ms: -3 is not positive");
}

/* ---- the options struct can grow ----------------------------------------- */

Test(size, init_records_the_callers_size) {
  rt_options_t o;
  memset(&o, 0xa5, sizeof(o));
  rt_options_init(&o);
  cr_assert_eq(o.size, sizeof(rt_options_t));
  cr_assert_eq(o.retry_first_connect, 0);
  cr_assert_eq(o.allow_eviction, 0);
}

Test(size, a_struct_not_made_by_init_is_refused) {
  rt_options_t o;
  char msg[128];
  rt_options_init(&o);
  o.size = 0;
  cr_assert_eq(rt_options_check(&o, msg, sizeof(msg)), RT_EINVAL);
  cr_assert(strstr(msg, "rt_options_init()") != NULL, "%s", msg);
  o.size = sizeof(size_t) + 1;
  cr_assert_eq(rt_options_check(&o, msg, sizeof(msg)), RT_EINVAL);
  cr_assert(strstr(msg, "smaller") != NULL, "%s", msg);
}

/* A program built against a newer header: fields this library does not
 * know are fine while zero (their defaults), refused once set. */
Test(size, a_longer_struct_works_while_the_unknown_fields_are_zero) {
  struct {
    rt_options_t known;
    int64_t future_field;
  } newer;
  char msg[128];
  rt__config cfg;

  memset(&newer, 0xa5, sizeof(newer));
  rt_options_init_size(&newer.known, sizeof(newer));
  cr_assert_eq(newer.known.size, sizeof(newer));
  cr_assert_eq(newer.future_field, 0);
  cr_assert_str_eq(newer.known.host, "127.0.0.1");
  newer.known.port = 7001;
  cr_assert_eq(rt__config_init(&cfg, &newer.known), 0);
  cr_assert_eq(cfg.port, 7001);
  rt__config_free(&cfg);

  newer.future_field = 1;
  cr_assert_eq(rt_options_check(&newer.known, msg, sizeof(msg)), RT_EINVAL);
  cr_assert(strstr(msg, "newer redturn") != NULL, "%s", msg);
}

Test(options, wait_replicas_is_checked) {
  rt_options_t o;
  rt__config cfg;
  char msg[256];
  rt_options_init(&o);
  cr_assert_eq(o.wait_replicas, 0);
  cr_assert_eq(o.wait_replicas_timeout_ms, 1000);
  o.wait_replicas = -1;
  cr_assert_eq(rt_options_check(&o, msg, sizeof(msg)), RT_EINVAL);
  cr_assert_str_eq(msg, "wait_replicas: -1 is negative");
  o.wait_replicas = 2;
  o.wait_replicas_timeout_ms = 0;
  cr_assert_eq(rt_options_check(&o, msg, sizeof(msg)), RT_ETIMEOUTARG);
  o.wait_replicas_timeout_ms = 5000;
  cr_assert_eq(rt_options_check(&o, msg, sizeof(msg)), RT_EINVAL);
  cr_assert(strstr(msg, "is not below command_timeout_ms (5000)") != NULL, "%s",
            msg);
  o.wait_replicas_timeout_ms = 500;
  cr_assert_eq(rt__config_load(&cfg, &o, msg, sizeof(msg)), 0, "%s", msg);
  cr_assert_eq(cfg.wait_replicas, 2);
  cr_assert_eq(cfg.wait_replicas_timeout_ms, 500);
  rt__config_free(&cfg);
}

Test(options, failover_fence_ms_is_checked) {
  rt_options_t o;
  rt__config cfg;
  char msg[256];
  rt_options_init(&o);
  cr_assert_eq(o.failover_fence_ms, 0, "off by default");
  o.failover_fence_ms = -1;
  cr_assert_eq(rt_options_check(&o, msg, sizeof(msg)), RT_EINVAL);
  char want[128];
  snprintf(want, sizeof(want),
           "failover_fence_ms: -1 is out of range (0..%lld)",
           (long long)RT_TTL_MAX);
  cr_assert_str_eq(msg, want);
  o.failover_fence_ms = RT_TTL_MAX;
  cr_assert_eq(rt__config_load(&cfg, &o, msg, sizeof(msg)), 0, "%s", msg);
  cr_assert_eq(cfg.failover_fence_ms, RT_TTL_MAX);
  rt__config_free(&cfg);
}
