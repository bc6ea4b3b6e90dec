/* The Redis URL grammar: redis:// and rediss:// URLs (seeds, credentials,
 * db, the script path query) and redis-sentinel:// ones (Sentinels, the
 * master's name), parsed into a configuration with a message naming what
 * is wrong. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "common.h"

/* ---- URL parsing --------------------------------------------------------*/

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

/* Decimal digits only, at least one, value <= max: 0; -1 for no digits or
 * another character, -2 for a value over max. */
static int parse_bounded(const char *s, size_t len, long max, long *out) {
  long v = 0;
  size_t i;

  if (len == 0)
    return -1;
  for (i = 0; i < len; i++)
    if (!is_digit(s[i]))
      return -1;
  for (i = 0; i < len; i++) {
    if (v > (max - (s[i] - '0')) / 10)
      return -2;
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

/* A byte for a message: itself if printable ASCII, else "\xNN". */
static const char *show_byte(char c, char buf[8]) {
  unsigned char u = (unsigned char)c;
  if (u > 0x20 && u < 0x7f)
    snprintf(buf, 8, "'%c'", c);
  else
    snprintf(buf, 8, "\\x%02x", u);
  return buf;
}

/* The scheme: "redis://" or "rediss://" (TLS; any case, RFC 3986).
 * Returns the length of the scheme with "://" and *tls, or an error with
 * the reason in msg. */
static int check_scheme(const char *url, int *tls, char *msg, size_t cap) {
  size_t n = 0;

  if (url[0] == '\0')
    return rt__why(msg, cap, RT_EURL, "url: empty");
  while (n < 32 && (is_host_char(url[n]) || url[n] == '+') && url[n] != '.' &&
         url[n] != '_')
    n++;
  if (strncmp(url + n, "://", 3) != 0)
    return rt__why(msg, cap, RT_EURL,
                   "url: no scheme: write redis://host[:port][/db]");
  char lower[33];
  for (size_t i = 0; i < n; i++)
    lower[i] =
        (char)(url[i] >= 'A' && url[i] <= 'Z' ? url[i] - 'A' + 'a' : url[i]);
  lower[n] = '\0';
  if (strcmp(lower, "redis") == 0 || strcmp(lower, "rediss") == 0) {
    *tls = n == 6;
    return (int)(n + 3);
  }
  if (strcmp(lower, "unix") == 0 || strcmp(lower, "redis+unix") == 0)
    return rt__why(msg, cap, RT_EURL,
                   "url: %s:// (a Unix socket) is not supported: use "
                   "redis://host:port",
                   lower);
  return rt__why(msg, cap, RT_EURL,
                 "url: unknown scheme \"%s://\": use redis:// or rediss://",
                 lower);
}

/* Spaces and control bytes are never valid in a URL; rejecting them
 * before parsing catches pasted whitespace before it becomes a host name. */
static int reject_controls(const char *url, char *msg, size_t cap) {
  char b[8];
  for (const char *q = url; *q != '\0'; q++) {
    unsigned char c = (unsigned char)*q;
    if (c <= 0x20 || c == 0x7f)
      return rt__why(msg, cap, RT_EURL,
                     "url: a space or control character (%s) at offset %zu",
                     show_byte((char)c, b), (size_t)(q - url));
  }
  return 0;
}

/* "[user][:password]" in s[0..at), percent-decoded into *user and *pass
 * (NULL when empty). */
static int parse_userinfo(const char *s, const char *at, char **user,
                          char **pass, char *msg, size_t cap) {
  const char *colon = memchr(s, ':', (size_t)(at - s));
  const char *what = "username";
  int err;

  if (colon != NULL) {
    err = decode_part(s, (size_t)(colon - s), user);
    if (err == 0) {
      what = "password";
      err = decode_part(colon + 1, (size_t)(at - colon - 1), pass);
    }
  } else {
    err = decode_part(s, (size_t)(at - s), user);
  }
  if (err == RT_EURL)
    rt__why(msg, cap, err,
            "url: bad percent-escape in the %s (want %%XX with two hex "
            "digits, not %%00)",
            what);
  if (err != 0) {
    rt__free(*user);
    *user = NULL;
  }
  return err;
}

/* "host[:port]" or "[v6addr][:port]" in s[0..e): the host's bytes are
 * [*h, *h_end), the port goes to *port (left as it is when absent). 0 or
 * RT_EURL with the reason in msg. */
static int parse_host_port(const char *s, const char *e, const char **h,
                           const char **h_end, long *port, char *msg,
                           size_t cap) {
  const char *host = s, *host_end, *after;
  char b[8];
  int err = RT_EURL;

  if (host < e && *host == '[') {
    const char *close = memchr(host, ']', (size_t)(e - host));
    const char *q;
    int colons = 0;
    if (close == NULL)
      return rt__why(msg, cap, err,
                     "url: IPv6 address without its closing ']'");
    for (q = host + 1; q < close; q++) {
      if (!is_v6_char(*q))
        break;
      colons += *q == ':';
    }
    if (q < close || colons == 0)
      return rt__why(msg, cap, err,
                     "url: not an IPv6 address between '[' and ']'");
    after = close + 1;
    host_end = close;
    host++;
    if (after < e && *after != ':')
      return rt__why(msg, cap, err,
                     "url: %s after the IPv6 address (want ':port')",
                     show_byte(*after, b));
  } else {
    host_end = host;
    while (host_end < e && is_host_char(*host_end))
      host_end++;
    if (host_end == host && (host_end == e || *host_end == ':'))
      return rt__why(msg, cap, err, "url: the host is missing");
    if (host_end - host > RT__HOST_MAX)
      return rt__why(msg, cap, err, "url: the host is longer than %d bytes",
                     RT__HOST_MAX);
    if (host_end < e && *host_end != ':')
      return rt__why(msg, cap, err,
                     "url: invalid character %s in the host (want letters, "
                     "digits, '-', '.', '_' or [IPv6])",
                     show_byte(*host_end, b));
    after = host_end;
  }

  if (after < e) { /* ":port" */
    int r = parse_bounded(after + 1, (size_t)(e - after - 1), 65535, port);
    if (r != 0 || *port == 0) {
      if (after + 1 == e)
        return rt__why(msg, cap, err, "url: the port after ':' is empty");
      if (r == -1)
        return rt__why(msg, cap, err, "url: the port is not a number");
      return rt__why(msg, cap, err, "url: port out of range (1..65535)");
    }
  }
  *h = host;
  *h_end = host_end;
  return 0;
}

/* A parsed URL's db (when >= 0), user and password (when not NULL, taken
 * over) replace cfg's. */
static void adopt_db_and_credentials(rt__config *cfg, long db, char *user,
                                     char *pass) {
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
}

/* An '@' in s[0..e), after the '/', '?' or '#' at s that ended the part
 * before the host: that character was meant inside the username or
 * password, raw, where it cuts the URL short (its host would then be read
 * from inside the password). RT_EURL naming it and the fix, else 0. */
static int raw_delimiter_in_userinfo(const char *s, const char *e, char *msg,
                                     size_t cap) {
  char b[8];
  if (s >= e || memchr(s, '@', (size_t)(e - s)) == NULL)
    return 0;
  return rt__why(msg, cap, RT_EURL,
                 "url: %s before the last '@': a '/', '?' or '#' in the "
                 "username or password must be percent-encoded (%%2F, %%3F, "
                 "%%23)",
                 show_byte(*s, b));
}

/* ---- Sentinel URLs ------------------------------------------------------*/

#define RT__SENTINEL_PORT 26379

/* 0 for "redis-sentinel://", 1 for "rediss-sentinel://" (any case), -1
 * for another scheme. */
static int sentinel_scheme(const char *url) {
  if (strncasecmp(url, "redis-sentinel://", 17) == 0)
    return 0;
  if (strncasecmp(url, "rediss-sentinel://", 18) == 0)
    return 1;
  return -1;
}

void rt__endpoints_free(rt__endpoint *list, size_t n) {
  for (size_t i = 0; list != NULL && i < n; i++)
    rt__free(list[i].host);
  rt__free(list);
}

/* At most this many Sentinels, or seeds after a cluster URL's first. */
#define RT__ENDPOINTS_MAX 16

/* "host[:port][,host[:port]...]" in s[0..e) into a new array, port
 * default_port unless given. Errors name an item "<item> <number>", the
 * first numbered first_number, and too many "more than 16 <many>". */
static int parse_endpoints(const char *s, const char *e, int default_port,
                           const char *item, size_t first_number,
                           const char *many, rt__endpoint **out, size_t *n,
                           char *msg, size_t cap) {
  rt__endpoint *list = rt__calloc(RT__ENDPOINTS_MAX, sizeof(*list));
  int err = list == NULL ? RT_ENOMEM : 0;

  *n = 0;
  while (err == 0) {
    const char *comma = memchr(s, ',', (size_t)(e - s));
    const char *item_end = comma != NULL ? comma : e, *h, *h_end;
    long port = default_port;
    if (*n == RT__ENDPOINTS_MAX)
      err = rt__why(msg, cap, RT_EURL, "url: more than %d %s",
                    RT__ENDPOINTS_MAX, many);
    else if (item_end == s)
      err = rt__why(msg, cap, RT_EURL,
                    "url: %s %zu of the list is empty (write "
                    "host[:port],host[:port])",
                    item, *n + first_number);
    else
      err = parse_host_port(s, item_end, &h, &h_end, &port, msg, cap);
    if (err != 0)
      break;
    list[*n].host = rt__memdup(h, (size_t)(h_end - h));
    list[*n].port = (int)port;
    if (list[(*n)++].host == NULL)
      err = RT_ENOMEM;
    if (comma == NULL)
      break;
    s = comma + 1;
  }
  if (err != 0) {
    rt__endpoints_free(list, *n);
    *n = 0;
    return err;
  }
  *out = list;
  return 0;
}

/* The db number s[0..e) after a URL's '/' into *db. 0 or RT_EURL. */
static int parse_db_number(const char *s, const char *e, long *db, char *msg,
                           size_t cap) {
  int r = parse_bounded(s, (size_t)(e - s), INT_MAX, db);
  if (r == -1)
    return rt__why(msg, cap, RT_EURL, "url: the db after '/' is not a number");
  if (r != 0)
    return rt__why(msg, cap, RT_EURL, "url: db out of range (0..%d)", INT_MAX);
  return 0;
}

/* What a URL's query string sets: "script_path=", "wait_replicas=" and
 * "failover_fence_ms=", each at most once, joined by '&'; the same names
 * and values as rt_options_t's fields (rt_options_t sets them too: both
 * must then agree, see options.c). */
typedef struct url_query {
  int script_path;
  int wait_replicas;
  int64_t failover_fence_ms;
} url_query;

/* One "key=value" s[0..n) of a query into *q. */
static int parse_param(const char *s, size_t n, url_query *q, char *msg,
                       size_t cap) {
  /* Indexed by rt_script_path_t. */
  static const char *const paths[] = {"auto", "functions", "eval", "module"};
  const char *eq = memchr(s, '=', n);
  size_t klen = eq != NULL ? (size_t)(eq - s) : n;
  const char *v = eq != NULL ? eq + 1 : s + n;
  size_t vlen = n - klen - (eq != NULL);
  long num;
  if (klen == 11 && memcmp(s, "script_path", 11) == 0) {
    for (int i = 0; i < 4; i++)
      if (vlen == strlen(paths[i]) && memcmp(v, paths[i], vlen) == 0) {
        q->script_path = i;
        return 0;
      }
    return rt__why(msg, cap, RT_EURL,
                   "url: script_path=%.*s: not auto, module, functions or eval",
                   (int)vlen, v);
  }
  if (klen == 13 && memcmp(s, "wait_replicas", 13) == 0) {
    if (parse_bounded(v, vlen, INT_MAX, &num) != 0)
      return rt__why(msg, cap, RT_EURL,
                     "url: wait_replicas=%.*s: not a number of replicas "
                     "(0..%d)",
                     (int)vlen, v, INT_MAX);
    q->wait_replicas = (int)num;
    return 0;
  }
  if (klen == 17 && memcmp(s, "failover_fence_ms", 17) == 0) {
    if (parse_bounded(v, vlen, (long)RT_TTL_MAX, &num) != 0)
      return rt__why(msg, cap, RT_EURL,
                     "url: failover_fence_ms=%.*s: not a number of "
                     "milliseconds (0..%lld)",
                     (int)vlen, v, (long long)RT_TTL_MAX);
    q->failover_fence_ms = num;
    return 0;
  }
  return rt__why(msg, cap, RT_EURL,
                 "url: query parameter \"%.*s\" is not supported (only "
                 "script_path, wait_replicas and failover_fence_ms)",
                 (int)klen, s);
}

/* The query string s[0..e) after its '?' into *q. */
static int parse_query(const char *s, const char *e, url_query *q, char *msg,
                       size_t cap) {
  for (;;) {
    const char *amp = memchr(s, '&', (size_t)(e - s));
    const char *stop = amp != NULL ? amp : e;
    int err = parse_param(s, (size_t)(stop - s), q, msg, cap);
    if (err != 0 || amp == NULL)
      return err;
    s = amp + 1;
  }
}

/* q's values into cfg (a parse that succeeded). */
static void adopt_query(rt__config *cfg, const url_query *q) {
  cfg->script_path = q->script_path;
  cfg->wait_replicas = q->wait_replicas;
  cfg->failover_fence_ms = q->failover_fence_ms;
}

/* cfg's values, for a query to change. */
static url_query query_of(const rt__config *cfg) {
  url_query q = {cfg->script_path, cfg->wait_replicas, cfg->failover_fence_ms};
  return q;
}

/* "[/db][?query]" in s[0..e) (nothing, "/" or "/<db>") into *db (left when
 * absent) and *query. */
static int parse_sentinel_db(const char *s, const char *e, long *db,
                             url_query *query, char *msg, size_t cap) {
  const char *q = memchr(s, '?', (size_t)(e - s));
  if (q != NULL) {
    int err = parse_query(q + 1, e, query, msg, cap);
    if (err != 0)
      return err;
    e = q;
  }
  if (s == e)
    return 0;
  if (s + 1 == e)
    return 0;
  return parse_db_number(s + 1, e, db, msg, cap);
}

/* "redis-sentinel://[[user]:password@]host[:port][,host[:port]...][/db]
 * #master" (Lettuce's form): the Sentinels, the master's name, and the
 * master's credentials and db. */
static int sentinel_url_parse(const char *url, int tls, rt__config *cfg,
                              char *msg, size_t cap) {
  const char *p = url + (tls ? 18 : 17), *end = p + strlen(p);
  const char *hash = memchr(p, '#', (size_t)(end - p)), *auth_end = p;
  const char *at = NULL;
  char *user = NULL, *pass = NULL, *name = NULL;
  rt__endpoint *list = NULL;
  size_t n = 0;
  long db = -1;
  url_query query = query_of(cfg);
  int err = reject_controls(url, msg, cap);

  if (err != 0)
    return err;
  if (hash == NULL || hash + 1 == end)
    return rt__why(msg, cap, RT_EURL,
                   "url: the master's name is missing: write %s://host[:port]"
                   "[,host[:port]...][/db]#<master name>",
                   tls ? "rediss-sentinel" : "redis-sentinel");
  while (auth_end < hash && *auth_end != '/' && *auth_end != '?')
    auth_end++;
  err = raw_delimiter_in_userinfo(auth_end, hash, msg, cap);
  if (err == 0 && memchr(hash + 1, '#', (size_t)(end - hash - 1)) != NULL)
    err = raw_delimiter_in_userinfo(hash, strrchr(hash, '#'), msg, cap);
  if (err != 0)
    return err;
  for (const char *q = p; q < auth_end; q++)
    if (*q == '@')
      at = q;
  if (at != NULL)
    err = parse_userinfo(p, at, &user, &pass, msg, cap);
  if (err == 0)
    err = parse_endpoints(at != NULL ? at + 1 : p, auth_end, RT__SENTINEL_PORT,
                          "Sentinel", 1, "Sentinels", &list, &n, msg, cap);
  if (err == 0)
    err = parse_sentinel_db(auth_end, hash, &db, &query, msg, cap);
  if (err == 0) {
    err = decode_part(hash + 1, (size_t)(end - hash - 1), &name);
    if (err == RT_EURL)
      rt__why(msg, cap, err, "url: bad percent-escape in the master's name");
  }
  if (err != 0) {
    if (err == RT_ENOMEM)
      rt__why(msg, cap, err, "out of memory");
    rt__free(user);
    rt__free(pass);
    rt__endpoints_free(list, n);
    return err;
  }

  rt__endpoints_free(cfg->sentinels, cfg->nsentinels);
  rt__free(cfg->sentinel_master);
  cfg->sentinels = list;
  cfg->nsentinels = n;
  cfg->sentinel_master = name;
  cfg->sentinel_tls = tls;
  adopt_query(cfg, &query);
  adopt_db_and_credentials(cfg, db, user, pass);
  return 0;
}

/* ---- redis:// URLs ------------------------------------------------------*/

/* What follows the host in a redis:// URL, s[0..e): nothing, "/" or
 * "/<db>" (*db: -1 for nothing, 0 for "/"); a query string or a fragment
 * is refused. 0 or RT_EURL with the reason in msg. */
static int parse_db_path(const char *s, const char *e, long *db,
                         url_query *query, char *msg, size_t cap) {
  const char *q = s;
  *db = -1;
  if (s == e)
    return 0;
  if (memchr(s, '#', (size_t)(e - s)) != NULL)
    return rt__why(msg, cap, RT_EURL,
                   "url: fragments (#...) are not supported");
  while (q < e && *q != '?')
    q++;
  if (q < e) {
    int err = parse_query(q + 1, e, query, msg, cap);
    if (err != 0)
      return err;
    e = q;
    if (s == e)
      return 0;
  }
  *db = 0; /* "redis://host/" */
  if (s + 1 == e)
    return 0;
  return parse_db_number(s + 1, e, db, msg, cap);
}

int rt__parse_url_why(const char *url, rt__config *cfg, char *msg, size_t cap) {
  const char *p, *end, *auth_end, *at, *host, *host_end, *seeds_at;
  rt__endpoint *seeds = NULL;
  size_t nseeds = 0;
  char *user = NULL, *pass = NULL, *host_copy = NULL;
  long port = -1, db = -1;
  int err, tls = 0;
  url_query query;

  if (url == NULL || cfg == NULL)
    return rt__why(msg, cap, RT_EURL, "url: NULL");
  query = query_of(cfg);
  int sentinel_tls = sentinel_scheme(url);
  if (sentinel_tls >= 0)
    return sentinel_url_parse(url, sentinel_tls, cfg, msg, cap);
  err = check_scheme(url, &tls, msg, cap);
  if (err < 0)
    return err;
  p = url + err;
  end = p + strlen(p);
  err = reject_controls(url, msg, cap);
  if (err != 0)
    return err;
  auth_end = p;
  while (auth_end < end && *auth_end != '/' && *auth_end != '?' &&
         *auth_end != '#')
    auth_end++;
  err = raw_delimiter_in_userinfo(auth_end, end, msg, cap);
  if (err != 0)
    return err;

  /* The last '@' ends the userinfo: a host never contains '@', so a raw
   * '@' in a password is still read the way the user meant it. */
  at = NULL;
  for (host = p; host < auth_end; host++)
    if (*host == '@')
      at = host;
  if (at != NULL) {
    err = parse_userinfo(p, at, &user, &pass, msg, cap);
    if (err != 0)
      goto fail;
    host = at + 1;
  } else {
    host = p;
  }

  seeds_at = memchr(host, ',', (size_t)(auth_end - host));
  if (seeds_at == NULL)
    seeds_at = auth_end;
  err = parse_host_port(host, seeds_at, &host, &host_end, &port, msg, cap);
  if (err == 0 && seeds_at < auth_end)
    err = parse_endpoints(seeds_at + 1, auth_end, 6379, "seed", 2,
                          "seeds after the first", &seeds, &nseeds, msg, cap);
  if (err != 0)
    goto fail;
  err = parse_db_path(auth_end, end, &db, &query, msg, cap);
  if (err != 0)
    goto fail;

  host_copy = rt__memdup(host, (size_t)(host_end - host));
  if (host_copy == NULL) {
    err = RT_ENOMEM;
    goto fail;
  }

  /* Only now, with everything parsed, touch cfg: a failed parse leaves it
   * as it was. */
  rt__free(cfg->host);
  cfg->host = host_copy;
  rt__endpoints_free(cfg->seeds, cfg->nseeds);
  cfg->seeds = seeds;
  cfg->nseeds = nseeds;
  cfg->tls = tls;
  adopt_query(cfg, &query);
  if (port > 0)
    cfg->port = (int)port;
  adopt_db_and_credentials(cfg, db, user, pass);
  return 0;

fail:
  if (err == RT_ENOMEM)
    rt__why(msg, cap, err, "out of memory");
  rt__endpoints_free(seeds, nseeds);
  rt__free(user);
  rt__free(pass);
  return err;
}

int rt__parse_url(const char *url, rt__config *cfg) {
  return rt__parse_url_why(url, cfg, NULL, 0);
}
