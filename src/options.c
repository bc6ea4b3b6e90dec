/* Client options: defaults, and validation with a message naming what is
 * wrong (the URL in them is parsed by url.c), copied into the client's
 * configuration. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"

/* The smallest rt_options_t accepted: up to retry_first_connect. Fields
 * after it (label, and whatever later versions append) take their defaults
 * when a caller's struct ends before them. Never raise it: programs built
 * with such a struct must keep working. */
#define RT__OPTIONS_SIZE_MIN                                                   \
  (offsetof(rt_options_t, retry_first_connect) + sizeof(int))

void rt_options_init_size(rt_options_t *opts, size_t size) {
  rt_options_t d;

  if (opts == NULL || size < sizeof(size_t))
    return;
  memset(&d, 0, sizeof(d));
  d.host = "127.0.0.1";
  d.port = 6379;
  d.prefix = "rt";
  d.default_ttl_ms = 30000;
  d.connect_timeout_ms = 5000;
  d.command_timeout_ms = 5000;
  d.wait_replicas_timeout_ms = 1000;
  /* A caller built against an older header has a shorter struct: write
   * only its part; a newer one a longer struct: zero what we do not know. */
  memcpy(opts, &d, size < sizeof(d) ? size : sizeof(d));
  if (size > sizeof(d))
    memset((char *)opts + sizeof(d), 0, size - sizeof(d));
  opts->size = size;
}

static int check_prefix(const char *prefix, char *msg, size_t cap) {
  size_t len;

  if (prefix == NULL)
    return rt__why(msg, cap, RT_EPREFIX, "prefix: NULL");
  len = strlen(prefix);
  if (len == 0)
    return rt__why(msg, cap, RT_EPREFIX, "prefix: empty");
  if (len > RT_PREFIX_MAX)
    return rt__why(msg, cap, RT_EPREFIX,
                   "prefix: %zu bytes, longer than RT_PREFIX_MAX (%d)", len,
                   RT_PREFIX_MAX);
  /* A brace in the prefix would become the key's hash tag and put every
   * resource in one cluster slot, or split a resource across slots. */
  if (strpbrk(prefix, "{}") != NULL)
    return rt__why(msg, cap, RT_EPREFIX, "prefix: contains '{' or '}'");
  return 0;
}

/* A label rides last in the records of lua/lib/prelude.lua: printable
 * ASCII, ':' included (the parsers take the rest of a record). */
static int check_label(const char *label, char *msg, size_t cap) {
  size_t len = label != NULL ? strlen(label) : 0;
  if (len > RT_LABEL_MAX)
    return rt__why(msg, cap, RT_EINVAL,
                   "label: %zu bytes, longer than RT_LABEL_MAX (%d)", len,
                   RT_LABEL_MAX);
  for (size_t i = 0; i < len; i++)
    if (label[i] < 0x20 || label[i] > 0x7e)
      return rt__why(msg, cap, RT_EINVAL,
                     "label: byte %zu (0x%02x) is not printable ASCII", i,
                     (unsigned)(unsigned char)label[i]);
  return 0;
}

/* An empty credential string means "none", as in the URL. */
static int copy_optional(const char *s, char **out) {
  *out = NULL;
  if (s == NULL || *s == '\0')
    return 0;
  *out = rt__strdup(s);
  return *out == NULL ? RT_ENOMEM : 0;
}

/* The username or password option next to a URL: taken when the URL has
 * none, refused when the URL has a different one. */
static int merge_credential(char **from_url, const char *option,
                            const char *what, char *msg, size_t cap) {
  if (option == NULL || option[0] == '\0')
    return 0;
  if (*from_url == NULL)
    return copy_optional(option, from_url);
  if (strcmp(*from_url, option) != 0)
    return rt__why(msg, cap, RT_EINVAL,
                   "%s: given both in url and in rt_options_t.%s, and they "
                   "differ: give it once",
                   what, what);
  return 0;
}

/* A TLS file (or directory) option: there, of its kind, readable. */
static int check_path(const char *path, const char *what, int dir, char *msg,
                      size_t cap) {
  struct stat st;
  if (stat(path, &st) != 0)
    return rt__why(msg, cap, RT_EINVAL, "%s: %s: %s", what, path,
                   strerror(errno));
  if (dir && !S_ISDIR(st.st_mode))
    return rt__why(msg, cap, RT_EINVAL, "%s: %s is not a directory", what,
                   path);
  if (!dir && S_ISDIR(st.st_mode))
    return rt__why(msg, cap, RT_EINVAL, "%s: %s is a directory, not a file",
                   what, path);
  if (access(path, dir ? R_OK | X_OK : R_OK) != 0)
    return rt__why(msg, cap, RT_EINVAL, "%s: %s: %s", what, path,
                   strerror(errno));
  return 0;
}

static int copy_path(const char *path, const char *what, int dir, char **out,
                     char *msg, size_t cap) {
  *out = NULL;
  if (path == NULL || path[0] == '\0')
    return 0;
  int err = check_path(path, what, dir, msg, cap);
  return err != 0 ? err : copy_optional(path, out);
}

/* The TLS options, once the url (which may say rediss://) is parsed. */
static int load_tls(rt__config *cfg, const rt_options_t *o, char *msg,
                    size_t cap) {
  static const char *const names[] = {"tls_ca_file", "tls_ca_dir",
                                      "tls_cert_file", "tls_key_file",
                                      "tls_server_name"};
  const char *vals[] = {o->tls_ca_file, o->tls_ca_dir, o->tls_cert_file,
                        o->tls_key_file, o->tls_server_name};
  const char *set = o->tls_insecure ? "tls_insecure" : NULL;
  for (int i = 4; i >= 0; i--)
    if (vals[i] != NULL && vals[i][0] != '\0')
      set = names[i];
  if (o->tls && !cfg->tls) {
    if (o->url != NULL)
      return rt__why(msg, cap, RT_EINVAL,
                     "tls: 1, but the url says %s:// (no TLS): write %s://",
                     cfg->sentinels != NULL ? "redis-sentinel" : "redis",
                     cfg->sentinels != NULL ? "rediss-sentinel" : "rediss");
    cfg->tls = 1;
  }
  if (!cfg->tls)
    return set == NULL ? 0
                       : rt__why(msg, cap, RT_EINVAL,
                                 "%s: set, but TLS is off: use a rediss:// url "
                                 "or tls = 1",
                                 set);
  int has_cert = o->tls_cert_file != NULL && o->tls_cert_file[0] != '\0';
  int has_key = o->tls_key_file != NULL && o->tls_key_file[0] != '\0';
  if (has_cert != has_key)
    return rt__why(msg, cap, RT_EINVAL, "%s: given without %s",
                   has_cert ? "tls_cert_file" : "tls_key_file",
                   has_cert ? "tls_key_file" : "tls_cert_file");
  int err = copy_path(o->tls_ca_file, names[0], 0, &cfg->tls_ca_file, msg, cap);
  if (err == 0)
    err = copy_path(o->tls_ca_dir, names[1], 1, &cfg->tls_ca_dir, msg, cap);
  if (err == 0)
    err =
        copy_path(o->tls_cert_file, names[2], 0, &cfg->tls_cert_file, msg, cap);
  if (err == 0)
    err = copy_path(o->tls_key_file, names[3], 0, &cfg->tls_key_file, msg, cap);
  const char *name = o->tls_server_name;
  if (err == 0 && name != NULL && strlen(name) > 253)
    err =
        rt__why(msg, cap, RT_EINVAL, "tls_server_name: longer than 253 bytes");
  for (size_t i = 0; err == 0 && name != NULL && name[i] != '\0'; i++)
    if (name[i] <= 0x20 || name[i] > 0x7e)
      err = rt__why(msg, cap, RT_EINVAL,
                    "tls_server_name: byte %zu (0x%02x) is not a printable "
                    "ASCII character other than space",
                    i, (unsigned)(unsigned char)name[i]);
  if (err == 0)
    err = copy_optional(name, &cfg->tls_server_name);
  cfg->tls_insecure = o->tls_insecure != 0;
  return err;
}

/* The caller's options as this library's struct: a shorter (older) struct
 * gets the defaults for the fields it lacks; a longer (newer) one must not
 * set anything this version does not know. */
static int take_options(const rt_options_t *opts, rt_options_t *o, char *msg,
                        size_t cap) {
  rt_options_init(o);
  if (opts == NULL)
    return 0;
  if (opts->size == 0)
    return rt__why(msg, cap, RT_EINVAL,
                   "options: size is 0: initialise rt_options_t with "
                   "rt_options_init()");
  if (opts->size < RT__OPTIONS_SIZE_MIN)
    return rt__why(msg, cap, RT_EINVAL,
                   "options: size %zu is smaller than any rt_options_t",
                   opts->size);
  if (opts->size > sizeof(*o)) {
    const unsigned char *extra = (const unsigned char *)opts + sizeof(*o);
    for (size_t i = 0; i < opts->size - sizeof(*o); i++)
      if (extra[i] != 0)
        return rt__why(msg, cap, RT_EINVAL,
                       "options: a field of a newer redturn is set (byte %zu): "
                       "this library is %s",
                       sizeof(*o) + i, rt_version_string());
  }
  memcpy(o, opts, opts->size < sizeof(*o) ? opts->size : sizeof(*o));
  o->size = sizeof(*o);
  return 0;
}

/* A redis-sentinel:// URL: TLS as its scheme says, host and port of the
 * first Sentinel (for messages), the Sentinels' own credentials. */
static int adopt_sentinels(rt__config *cfg, const rt_options_t *o) {
  cfg->tls = cfg->sentinel_tls;
  cfg->port = cfg->sentinels[0].port;
  rt__free(cfg->host);
  cfg->host = rt__strdup(cfg->sentinels[0].host);
  int err = cfg->host == NULL ? RT_ENOMEM : 0;
  if (err == 0)
    err = copy_optional(o->sentinel_username, &cfg->sentinel_username);
  if (err == 0)
    err = copy_optional(o->sentinel_password, &cfg->sentinel_password);
  return err;
}

/* script_path: the option, or the URL's "?script_path=" (both: the same). */
static int load_script_path(rt__config *cfg, const rt_options_t *o, char *msg,
                            size_t cap) {
  if (o->script_path < RT_SCRIPT_PATH_AUTO ||
      o->script_path > RT_SCRIPT_PATH_MODULE)
    return rt__why(msg, cap, RT_EINVAL,
                   "script_path: %d is not RT_SCRIPT_PATH_AUTO, _MODULE, "
                   "_FUNCTIONS or _EVAL",
                   o->script_path);
  if (o->script_path != RT_SCRIPT_PATH_AUTO &&
      cfg->script_path != RT_SCRIPT_PATH_AUTO &&
      cfg->script_path != o->script_path)
    return rt__why(msg, cap, RT_EINVAL,
                   "script_path: %d differs from the url's script_path",
                   o->script_path);
  if (o->script_path != RT_SCRIPT_PATH_AUTO)
    cfg->script_path = o->script_path;
  return 0;
}

/* wait_replicas and its timeout; failover_fence_ms. Each also from the
 * URL's query ("?wait_replicas=", "?failover_fence_ms="): an option left
 * at 0 takes the URL's; both set must agree. */
static int load_wait(rt__config *cfg, const rt_options_t *o, char *msg,
                     size_t cap) {
  if (o->wait_replicas < 0)
    return rt__why(msg, cap, RT_EINVAL, "wait_replicas: %d is negative",
                   o->wait_replicas);
  if (o->wait_replicas != 0 && cfg->wait_replicas != 0 &&
      o->wait_replicas != cfg->wait_replicas)
    return rt__why(msg, cap, RT_EINVAL,
                   "wait_replicas: %d differs from the url's wait_replicas=%d",
                   o->wait_replicas, cfg->wait_replicas);
  int wait = o->wait_replicas != 0 ? o->wait_replicas : cfg->wait_replicas;
  if (o->wait_replicas_timeout_ms <= 0)
    return rt__why(msg, cap, RT_ETIMEOUTARG,
                   "wait_replicas_timeout_ms: %lld is not positive",
                   (long long)o->wait_replicas_timeout_ms);
  if (wait > 0 && o->wait_replicas_timeout_ms >= o->command_timeout_ms)
    return rt__why(msg, cap, RT_EINVAL,
                   "wait_replicas_timeout_ms: %lld is not below "
                   "command_timeout_ms (%lld): WAIT would outlast the command "
                   "deadline",
                   (long long)o->wait_replicas_timeout_ms,
                   (long long)o->command_timeout_ms);
  cfg->wait_replicas = wait;
  cfg->wait_replicas_timeout_ms = o->wait_replicas_timeout_ms;
  if (o->failover_fence_ms < 0 || o->failover_fence_ms > RT_TTL_MAX)
    return rt__why(msg, cap, RT_EINVAL,
                   "failover_fence_ms: %lld is out of range (0..%lld)",
                   (long long)o->failover_fence_ms, (long long)RT_TTL_MAX);
  if (o->failover_fence_ms != 0 && cfg->failover_fence_ms != 0 &&
      o->failover_fence_ms != cfg->failover_fence_ms)
    return rt__why(msg, cap, RT_EINVAL,
                   "failover_fence_ms: %lld differs from the url's "
                   "failover_fence_ms=%lld",
                   (long long)o->failover_fence_ms,
                   (long long)cfg->failover_fence_ms);
  if (o->failover_fence_ms != 0)
    cfg->failover_fence_ms = o->failover_fence_ms;
  return 0;
}

/* The options that need no allocation: prefix, TTL, timeouts, label, and
 * host, port and db when there is no URL. */
static int check_scalars(const rt_options_t *o, char *msg, size_t cap) {
  int err = check_prefix(o->prefix, msg, cap);
  if (err != 0)
    return err;
  if (o->default_ttl_ms < 1 || o->default_ttl_ms > RT_TTL_MAX)
    return rt__why(msg, cap, RT_ETTL,
                   "default_ttl_ms: %lld is out of range (1..%lld)",
                   (long long)o->default_ttl_ms, (long long)RT_TTL_MAX);
  if (o->connect_timeout_ms <= 0)
    return rt__why(msg, cap, RT_ETIMEOUTARG,
                   "connect_timeout_ms: %lld is not positive",
                   (long long)o->connect_timeout_ms);
  if (o->command_timeout_ms <= 0)
    return rt__why(msg, cap, RT_ETIMEOUTARG,
                   "command_timeout_ms: %lld is not positive",
                   (long long)o->command_timeout_ms);
  err = check_label(o->label, msg, cap);
  if (err != 0)
    return err;
  /* The URL replaces host, port and db as a whole, so those fields are
   * only checked when there is no URL. */
  if (o->url == NULL) {
    if (o->host == NULL || o->host[0] == '\0')
      return rt__why(msg, cap, RT_EINVAL, "host: empty");
    if (strlen(o->host) > RT__HOST_MAX)
      return rt__why(msg, cap, RT_EINVAL, "host: longer than %d bytes",
                     RT__HOST_MAX);
    if (o->port < 1 || o->port > 65535)
      return rt__why(msg, cap, RT_EINVAL, "port: %d is out of range (1..65535)",
                     o->port);
    if (o->db < 0)
      return rt__why(msg, cap, RT_EINVAL, "db: %d is negative", o->db);
  }
  return 0;
}

/* Where to connect and as whom: from the URL, or from host, port, db and
 * the credentials. 0, RT_ENOMEM or the URL's error (cfg keeps what it
 * took; the caller frees it). */
static int load_address(rt__config *cfg, const rt_options_t *o, char *msg,
                        size_t cap) {
  int err;
  if (o->url != NULL) {
    /* What the URL leaves out takes the library defaults, not the host,
     * port and db fields: "redis://h" means port 6379, db 0. Credentials
     * are the exception: a username or password option fills what the
     * URL lacks (a secret kept apart from the address). */
    cfg->port = 6379;
    cfg->db = 0;
    err = rt__parse_url_why(o->url, cfg, msg, cap);
    if (err == 0 && cfg->sentinel_master != NULL)
      err = adopt_sentinels(cfg, o);
    if (err == 0)
      err = merge_credential(&cfg->username, o->username, "username", msg, cap);
    if (err == 0)
      err = merge_credential(&cfg->password, o->password, "password", msg, cap);
    return err;
  }
  cfg->port = o->port;
  cfg->db = o->db;
  cfg->host = rt__strdup(o->host);
  if (cfg->host == NULL)
    return RT_ENOMEM;
  err = copy_optional(o->username, &cfg->username);
  if (err == 0)
    err = copy_optional(o->password, &cfg->password);
  return err;
}

static int is_set(const char *s) { return s != NULL && s[0] != '\0'; }

int rt__config_load(rt__config *cfg, const rt_options_t *opts, char *msg,
                    size_t cap) {
  rt_options_t o;
  int err;

  if (msg != NULL && cap > 0)
    msg[0] = '\0';
  if (cfg == NULL)
    return rt__why(msg, cap, RT_EINVAL, "NULL configuration");
  memset(cfg, 0, sizeof(*cfg));
  err = take_options(opts, &o, msg, cap);
  if (err == 0)
    err = check_scalars(&o, msg, cap);
  if (err != 0)
    return err;

  cfg->default_ttl_ms = o.default_ttl_ms;
  cfg->connect_timeout_ms = o.connect_timeout_ms;
  cfg->command_timeout_ms = o.command_timeout_ms;
  cfg->allow_eviction = o.allow_eviction != 0;
  cfg->retry_first_connect = o.retry_first_connect != 0;
  cfg->prefix_len = strlen(o.prefix);
  cfg->prefix = rt__memdup(o.prefix, cfg->prefix_len);
  err = cfg->prefix == NULL ? RT_ENOMEM : 0;
  if (err == 0 && is_set(o.label)) {
    cfg->label_len = strlen(o.label);
    cfg->label = rt__memdup(o.label, cfg->label_len);
    err = cfg->label == NULL ? RT_ENOMEM : 0;
  }
  if (err == 0)
    err = load_address(cfg, &o, msg, cap);
  if (err == 0 && cfg->nsentinels == 0 &&
      (is_set(o.sentinel_username) || is_set(o.sentinel_password)))
    err =
        rt__why(msg, cap, RT_EINVAL,
                "sentinel_username/sentinel_password: set, but the url is not "
                "redis-sentinel://");
  if (err == 0)
    err = load_tls(cfg, &o, msg, cap);
  if (err == 0)
    err = load_wait(cfg, &o, msg, cap);
  if (err == 0)
    err = load_script_path(cfg, &o, msg, cap);
  if (err == 0)
    return 0;
  if (err == RT_ENOMEM)
    rt__why(msg, cap, err, "out of memory");
  rt__config_free(cfg);
  return err;
}

int rt__config_init(rt__config *cfg, const rt_options_t *opts) {
  return rt__config_load(cfg, opts, NULL, 0);
}

int rt_options_check(const rt_options_t *opts, char *msg, size_t len) {
  rt__config cfg;
  int err = rt__config_load(&cfg, opts, msg, len);
  if (err == 0)
    rt__config_free(&cfg);
  return err;
}

void rt__config_free(rt__config *cfg) {
  if (cfg == NULL)
    return;
  rt__free(cfg->host);
  rt__free(cfg->username);
  rt__free(cfg->password);
  rt__free(cfg->prefix);
  rt__free(cfg->label);
  rt__endpoints_free(cfg->sentinels, cfg->nsentinels);
  rt__endpoints_free(cfg->seeds, cfg->nseeds);
  rt__free(cfg->sentinel_master);
  rt__free(cfg->sentinel_username);
  rt__free(cfg->sentinel_password);
  rt__free(cfg->tls_ca_file);
  rt__free(cfg->tls_ca_dir);
  rt__free(cfg->tls_cert_file);
  rt__free(cfg->tls_key_file);
  rt__free(cfg->tls_server_name);
  memset(cfg, 0, sizeof(*cfg));
}
