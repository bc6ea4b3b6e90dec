/* Client options: defaults, validation, the Redis URL parser, and the
 * argument checks shared by every request (name, TTL, timeout). */
#include <limits.h>
#include <string.h>

#include "common.h"

void rt_options_init(rt_options_t *opts) {
  if (opts == NULL)
    return;
  memset(opts, 0, sizeof(*opts));
  opts->url = NULL;
  opts->host = "127.0.0.1";
  opts->port = 6379;
  opts->db = 0;
  opts->username = NULL;
  opts->password = NULL;
  opts->prefix = "rt";
  opts->default_ttl_ms = 30000;
  opts->connect_timeout_ms = 5000;
  opts->command_timeout_ms = 5000;
}

/* ---- URL parsing ------------------------------------------------------- */

static int is_digit(char c) { return c >= '0' && c <= '9'; }

static int hex_value(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

/* Decimal digits only, at least one, value <= max. */
static int parse_bounded(const char *s, size_t len, long max, long *out) {
  long v = 0;
  size_t i;

  if (len == 0)
    return -1;
  for (i = 0; i < len; i++) {
    if (!is_digit(s[i]))
      return -1;
    if (v > (max - (s[i] - '0')) / 10)
      return -1;
    v = v * 10 + (s[i] - '0');
  }
  *out = v;
  return 0;
}

/* Percent-decode s[0..len) into a new string. An empty result is "absent"
 * (*out = NULL): an empty user or password means no credential. A decoded
 * NUL could not travel in a C string, so it is malformed like a bad escape. */
static int decode_part(const char *s, size_t len, char **out) {
  char *buf;
  size_t i, n = 0;

  *out = NULL;
  if (len == 0)
    return 0;
  buf = rt__malloc(len + 1);
  if (buf == NULL)
    return RT_ENOMEM;
  for (i = 0; i < len; i++) {
    if (s[i] == '%') {
      int hi, lo;
      if (len - i < 3)
        goto bad;
      hi = hex_value(s[i + 1]);
      lo = hex_value(s[i + 2]);
      if (hi < 0 || lo < 0 || (hi == 0 && lo == 0))
        goto bad;
      buf[n++] = (char)(hi * 16 + lo);
      i += 2;
    } else {
      buf[n++] = s[i];
    }
  }
  buf[n] = '\0';
  *out = buf;
  return 0;

bad:
  rt__free(buf);
  return RT_EURL;
}

static int is_host_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c) ||
         c == '-' || c == '.' || c == '_';
}

static int is_v6_char(char c) {
  return hex_value(c) >= 0 || c == ':' || c == '.';
}

int rt__parse_url(const char *url, rt__config *cfg) {
  static const char scheme[] = "redis://";
  const size_t scheme_len = sizeof(scheme) - 1;
  const char *p, *end, *auth_end, *at, *host, *host_end, *after;
  char *user = NULL, *pass = NULL, *host_copy = NULL;
  long port = -1, db = -1;
  size_t i;
  int err;

  if (url == NULL || cfg == NULL)
    return RT_EURL;
  /* Schemes are case-insensitive (RFC 3986); only plain TCP is supported:
   * "rediss://" (TLS) and "unix://" fail here. */
  for (i = 0; i < scheme_len; i++) {
    char c = url[i];
    if (c >= 'A' && c <= 'Z')
      c = (char)(c - 'A' + 'a');
    if (c != scheme[i])
      return RT_EURL;
  }
  p = url + scheme_len;
  end = p + strlen(p);
  /* Spaces and control bytes are never valid in a URL; rejecting them
   * here catches pasted whitespace before it becomes a host name. */
  for (auth_end = p; auth_end < end; auth_end++) {
    unsigned char c = (unsigned char)*auth_end;
    if (c <= 0x20 || c == 0x7f)
      return RT_EURL;
  }
  auth_end = p;
  while (auth_end < end && *auth_end != '/' && *auth_end != '?' &&
         *auth_end != '#')
    auth_end++;

  /* The last '@' ends the userinfo: a host never contains '@', so a raw
   * '@' in a password is still read the way the user meant it. */
  at = NULL;
  for (host = p; host < auth_end; host++)
    if (*host == '@')
      at = host;
  if (at != NULL) {
    const char *colon = memchr(p, ':', (size_t)(at - p));
    if (colon != NULL) {
      err = decode_part(p, (size_t)(colon - p), &user);
      if (err == 0)
        err = decode_part(colon + 1, (size_t)(at - colon - 1), &pass);
    } else {
      err = decode_part(p, (size_t)(at - p), &user);
    }
    if (err != 0)
      goto fail;
    host = at + 1;
  } else {
    host = p;
  }

  err = RT_EURL;
  if (host < auth_end && *host == '[') {
    const char *close = memchr(host, ']', (size_t)(auth_end - host));
    const char *q;
    int colons = 0;
    if (close == NULL || close == host + 1)
      goto fail;
    for (q = host + 1; q < close; q++) {
      if (!is_v6_char(*q))
        goto fail;
      colons += *q == ':';
    }
    if (colons == 0)
      goto fail;
    after = close + 1;
    host_end = close;
    host++;
  } else {
    host_end = host;
    while (host_end < auth_end && is_host_char(*host_end))
      host_end++;
    if (host_end == host)
      goto fail;
    after = host_end;
  }

  if (after < auth_end) {
    if (*after != ':' ||
        parse_bounded(after + 1, (size_t)(auth_end - after - 1), 65535,
                      &port) != 0 ||
        port == 0)
      goto fail;
  }

  if (auth_end < end) {
    if (*auth_end != '/')
      goto fail; /* query strings and fragments are not supported */
    if (auth_end + 1 < end &&
        parse_bounded(auth_end + 1, (size_t)(end - auth_end - 1), INT_MAX,
                      &db) != 0)
      goto fail;
    if (db < 0)
      db = 0; /* "redis://host/" */
  }

  host_copy = rt__memdup(host, (size_t)(host_end - host));
  if (host_copy == NULL) {
    err = RT_ENOMEM;
    goto fail;
  }

  /* Only now, with everything parsed, touch cfg: a failed parse leaves it
   * as it was. */
  rt__free(cfg->host);
  cfg->host = host_copy;
  if (port > 0)
    cfg->port = (int)port;
  if (db >= 0)
    cfg->db = (int)db;
  if (user != NULL) {
    rt__free(cfg->username);
    cfg->username = user;
  }
  if (pass != NULL) {
    rt__free(cfg->password);
    cfg->password = pass;
  }
  return 0;

fail:
  rt__free(user);
  rt__free(pass);
  return err;
}

/* ---- Options ----------------------------------------------------------- */

static int check_prefix(const char *prefix) {
  size_t len;

  if (prefix == NULL)
    return RT_EPREFIX;
  len = strlen(prefix);
  /* A brace in the prefix would become the key's hash tag and put every
   * resource in one cluster slot, or split a resource across slots. */
  if (len == 0 || len > RT_PREFIX_MAX || strpbrk(prefix, "{}") != NULL)
    return RT_EPREFIX;
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

int rt__config_init(rt__config *cfg, const rt_options_t *opts) {
  rt_options_t defaults;
  int err;

  if (cfg == NULL)
    return RT_EINVAL;
  memset(cfg, 0, sizeof(*cfg));
  if (opts == NULL) {
    rt_options_init(&defaults);
    opts = &defaults;
  }

  err = check_prefix(opts->prefix);
  if (err != 0)
    return err;
  if (opts->default_ttl_ms < 1 || opts->default_ttl_ms > RT_TTL_MAX)
    return RT_ETTL;
  if (opts->connect_timeout_ms <= 0 || opts->command_timeout_ms <= 0)
    return RT_ETIMEOUTARG;
  /* The URL replaces host, port, db and credentials as a whole, so those
   * fields are only checked when there is no URL. */
  if (opts->url == NULL) {
    if (opts->host == NULL || opts->host[0] == '\0')
      return RT_EINVAL;
    if (opts->port < 1 || opts->port > 65535 || opts->db < 0)
      return RT_EINVAL;
  }

  cfg->default_ttl_ms = opts->default_ttl_ms;
  cfg->connect_timeout_ms = opts->connect_timeout_ms;
  cfg->command_timeout_ms = opts->command_timeout_ms;
  cfg->allow_eviction = opts->allow_eviction != 0;
  cfg->prefix_len = strlen(opts->prefix);
  cfg->prefix = rt__memdup(opts->prefix, cfg->prefix_len);
  if (cfg->prefix == NULL)
    goto nomem;

  if (opts->url != NULL) {
    /* What the URL leaves out takes the library defaults, not the other
     * option fields: "redis://h" means port 6379, db 0, no AUTH. */
    cfg->port = 6379;
    cfg->db = 0;
    err = rt__parse_url(opts->url, cfg);
    if (err != 0)
      goto fail;
  } else {
    cfg->port = opts->port;
    cfg->db = opts->db;
    cfg->host = rt__strdup(opts->host);
    if (cfg->host == NULL)
      goto nomem;
    err = copy_optional(opts->username, &cfg->username);
    if (err == 0)
      err = copy_optional(opts->password, &cfg->password);
    if (err != 0)
      goto fail;
  }
  return 0;

nomem:
  err = RT_ENOMEM;
fail:
  rt__config_free(cfg);
  return err;
}

void rt__config_free(rt__config *cfg) {
  if (cfg == NULL)
    return;
  rt__free(cfg->host);
  rt__free(cfg->username);
  rt__free(cfg->password);
  rt__free(cfg->prefix);
  memset(cfg, 0, sizeof(*cfg));
}

/* ---- Request arguments ------------------------------------------------- */

int rt__check_name(const void *name, size_t len) {
  if (name == NULL || len == 0)
    return RT_ENAMEEMPTY;
  if (len > RT_NAME_MAX)
    return RT_ENAMETOOLONG;
  return 0;
}

int rt__resolve_ttl(int64_t ttl_ms, int64_t dflt, int64_t *out) {
  if (ttl_ms == RT_TTL_DEFAULT)
    ttl_ms = dflt;
  if (ttl_ms < 1 || ttl_ms > RT_TTL_MAX)
    return RT_ETTL;
  *out = ttl_ms;
  return 0;
}

int rt__check_timeout(int64_t timeout_ms) {
  if (timeout_ms == RT_FOREVER || timeout_ms > 0)
    return 0;
  return RT_ETIMEOUTARG;
}
