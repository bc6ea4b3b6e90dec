/* What options and resource names resolve to, for tools that talk to Redis
 * themselves (the CLI's evict, the benchmark): the same URL parser and key
 * mapping the clients use, behind the public API. */
#include <string.h>

#include "common.h"

/* Room for s and its NUL at *next; returns the copy (NULL for NULL). */
static const char *put(char **next, const char *s) {
  if (s == NULL)
    return NULL;
  size_t n = strlen(s) + 1;
  char *at = *next;
  memcpy(at, s, n);
  *next += n;
  return at;
}

static size_t room(const char *s) { return s != NULL ? strlen(s) + 1 : 0; }

int rt_options_resolve(const rt_options_t *opts, rt_options_t **out) {
  rt__config cfg;
  if (out == NULL)
    return RT_EINVAL;
  int err = rt__config_init(&cfg, opts);
  if (err != 0)
    return err;
  /* One block: the struct, then its strings. */
  /* A Sentinel URL names no master: only asking the Sentinels does. */
  const char *url = cfg.nsentinels > 0 ? opts->url : NULL;
  size_t strings = room(url) + room(cfg.sentinel_username) +
                   room(cfg.sentinel_password) + room(cfg.host) +
                   room(cfg.username) + room(cfg.password) + room(cfg.prefix) +
                   room(cfg.label) + room(cfg.tls_ca_file) +
                   room(cfg.tls_ca_dir) + room(cfg.tls_cert_file) +
                   room(cfg.tls_key_file) + room(cfg.tls_server_name);
  rt_options_t *o = rt__malloc(sizeof(*o) + strings);
  if (o == NULL) {
    rt__config_free(&cfg);
    return RT_ENOMEM;
  }
  char *next = (char *)(o + 1);
  rt_options_init(o);
  o->host = put(&next, cfg.host);
  o->port = cfg.port;
  o->db = cfg.db;
  o->username = put(&next, cfg.username);
  o->password = put(&next, cfg.password);
  o->prefix = put(&next, cfg.prefix);
  o->default_ttl_ms = cfg.default_ttl_ms;
  o->connect_timeout_ms = cfg.connect_timeout_ms;
  o->command_timeout_ms = cfg.command_timeout_ms;
  o->allow_eviction = cfg.allow_eviction;
  o->retry_first_connect = cfg.retry_first_connect;
  o->label = put(&next, cfg.label);
  o->tls = cfg.tls;
  o->tls_ca_file = put(&next, cfg.tls_ca_file);
  o->tls_ca_dir = put(&next, cfg.tls_ca_dir);
  o->tls_cert_file = put(&next, cfg.tls_cert_file);
  o->tls_key_file = put(&next, cfg.tls_key_file);
  o->tls_server_name = put(&next, cfg.tls_server_name);
  o->tls_insecure = cfg.tls_insecure;
  o->url = put(&next, url);
  o->sentinel_username = put(&next, cfg.sentinel_username);
  o->sentinel_password = put(&next, cfg.sentinel_password);
  o->wait_replicas = cfg.wait_replicas;
  o->wait_replicas_timeout_ms = cfg.wait_replicas_timeout_ms;
  o->script_path = cfg.script_path;
  rt__config_free(&cfg);
  *out = o;
  return 0;
}

void rt_options_free(rt_options_t *opts) { rt__free(opts); }

size_t rt_key_base(const char *prefix, const void *name, size_t len, char *buf,
                   size_t cap) {
  size_t n = 0;
  if (prefix == NULL || (name == NULL && len > 0))
    return 0;
  char *base = rt__key_base(prefix, strlen(prefix), name, len, &n);
  if (base == NULL)
    return 0;
  if (buf != NULL && cap > 0) {
    size_t k = n < cap ? n : cap - 1;
    memcpy(buf, base, k);
    buf[k] = '\0';
  }
  rt__free(base);
  return n;
}
