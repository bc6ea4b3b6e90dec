/* Client options: defaults, validation with a message naming what is wrong,
 * the Redis URL parser, and the argument checks shared by every request
 * (name, TTL, timeout). */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
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

/* Format a message into msg (if any) and return err. */
static int why(char *msg, size_t cap, int err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int why(char *msg, size_t cap, int err, const char *fmt, ...) {
  va_list ap;
  if (msg == NULL || cap == 0)
    return err;
  va_start(ap, fmt);
  vsnprintf(msg, cap, fmt, ap);
  va_end(ap);
  return err;
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
    return why(msg, cap, RT_EURL, "url: empty");
  while (n < 32 && (is_host_char(url[n]) || url[n] == '+') && url[n] != '.' &&
         url[n] != '_')
    n++;
  if (strncmp(url + n, "://", 3) != 0)
    return why(msg, cap, RT_EURL,
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
    return why(msg, cap, RT_EURL,
               "url: %s:// (a Unix socket) is not supported: use "
               "redis://host:port",
               lower);
  return why(msg, cap, RT_EURL,
             "url: unknown scheme \"%s://\": use redis:// or rediss://", lower);
}

/* Spaces and control bytes are never valid in a URL; rejecting them
 * before parsing catches pasted whitespace before it becomes a host name. */
static int reject_controls(const char *url, char *msg, size_t cap) {
  char b[8];
  for (const char *q = url; *q != '\0'; q++) {
    unsigned char c = (unsigned char)*q;
    if (c <= 0x20 || c == 0x7f)
      return why(msg, cap, RT_EURL,
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
    why(msg, cap, err,
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
      return why(msg, cap, err, "url: IPv6 address without its closing ']'");
    for (q = host + 1; q < close; q++) {
      if (!is_v6_char(*q))
        break;
      colons += *q == ':';
    }
    if (q < close || colons == 0)
      return why(msg, cap, err, "url: not an IPv6 address between '[' and ']'");
    after = close + 1;
    host_end = close;
    host++;
    if (after < e && *after != ':')
      return why(msg, cap, err, "url: %s after the IPv6 address (want ':port')",
                 show_byte(*after, b));
  } else {
    host_end = host;
    while (host_end < e && is_host_char(*host_end))
      host_end++;
    if (host_end == host && (host_end == e || *host_end == ':'))
      return why(msg, cap, err, "url: the host is missing");
    if (host_end - host > RT__HOST_MAX)
      return why(msg, cap, err, "url: the host is longer than %d bytes",
                 RT__HOST_MAX);
    if (host_end < e && *host_end != ':')
      return why(msg, cap, err,
                 "url: invalid character %s in the host (want letters, "
                 "digits, '-', '.', '_' or [IPv6])",
                 show_byte(*host_end, b));
    after = host_end;
  }

  if (after < e) { /* ":port" */
    int r = parse_bounded(after + 1, (size_t)(e - after - 1), 65535, port);
    if (r != 0 || *port == 0) {
      if (after + 1 == e)
        return why(msg, cap, err, "url: the port after ':' is empty");
      if (r == -1)
        return why(msg, cap, err, "url: the port is not a number");
      return why(msg, cap, err, "url: port out of range (1..65535)");
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
  return why(msg, cap, RT_EURL,
             "url: %s before the last '@': a '/', '?' or '#' in the "
             "username or password must be percent-encoded (%%2F, %%3F, "
             "%%23)",
             show_byte(*s, b));
}

/* ---- Sentinel URLs ------------------------------------------------------- */

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
      err = why(msg, cap, RT_EURL, "url: more than %d %s", RT__ENDPOINTS_MAX,
                many);
    else if (item_end == s)
      err = why(msg, cap, RT_EURL,
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
    return why(msg, cap, RT_EURL, "url: the db after '/' is not a number");
  if (r != 0)
    return why(msg, cap, RT_EURL, "url: db out of range (0..%d)", INT_MAX);
  return 0;
}

/* The query string s[0..e) after its '?':
 * "script_path=auto|functions|eval|module" (the one URL parameter) into
 * *script_path. */
static int parse_query(const char *s, const char *e, int *script_path,
                       char *msg, size_t cap) {
  static const char key[] = "script_path=";
  /* Indexed by rt_script_path_t. */
  static const char *const paths[] = {"auto", "functions", "eval", "module"};
  size_t klen = sizeof(key) - 1, n = (size_t)(e - s);
  if (n < klen || memcmp(s, key, klen) != 0)
    return why(msg, cap, RT_EURL,
               "url: query parameter \"%.*s\" is not supported (only "
               "script_path=auto|module|functions|eval)",
               (int)strcspn(s, "=&#"), s);
  s += klen;
  n -= klen;
  for (int i = 0; i < 4; i++)
    if (n == strlen(paths[i]) && memcmp(s, paths[i], n) == 0) {
      *script_path = i;
      return 0;
    }
  return why(msg, cap, RT_EURL,
             "url: script_path=%.*s: not auto, module, functions or eval",
             (int)n, s);
}

/* "[/db][?query]" in s[0..e) (nothing, "/" or "/<db>") into *db (left when
 * absent) and *script_path. */
static int parse_sentinel_db(const char *s, const char *e, long *db,
                             int *script_path, char *msg, size_t cap) {
  const char *q = memchr(s, '?', (size_t)(e - s));
  if (q != NULL) {
    int err = parse_query(q + 1, e, script_path, msg, cap);
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
  int path = cfg->script_path;
  int err = reject_controls(url, msg, cap);

  if (err != 0)
    return err;
  if (hash == NULL || hash + 1 == end)
    return why(msg, cap, RT_EURL,
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
    err = parse_sentinel_db(auth_end, hash, &db, &path, msg, cap);
  if (err == 0) {
    err = decode_part(hash + 1, (size_t)(end - hash - 1), &name);
    if (err == RT_EURL)
      why(msg, cap, err, "url: bad percent-escape in the master's name");
  }
  if (err != 0) {
    if (err == RT_ENOMEM)
      why(msg, cap, err, "out of memory");
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
  cfg->script_path = path;
  adopt_db_and_credentials(cfg, db, user, pass);
  return 0;
}

/* ---- redis:// URLs ------------------------------------------------------- */

/* What follows the host in a redis:// URL, s[0..e): nothing, "/" or
 * "/<db>" (*db: -1 for nothing, 0 for "/"); a query string or a fragment
 * is refused. 0 or RT_EURL with the reason in msg. */
static int parse_db_path(const char *s, const char *e, long *db,
                         int *script_path, char *msg, size_t cap) {
  const char *q = s;
  *db = -1;
  if (s == e)
    return 0;
  if (memchr(s, '#', (size_t)(e - s)) != NULL)
    return why(msg, cap, RT_EURL, "url: fragments (#...) are not supported");
  while (q < e && *q != '?')
    q++;
  if (q < e) {
    int err = parse_query(q + 1, e, script_path, msg, cap);
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
  int err, tls = 0, path = cfg != NULL ? cfg->script_path : 0;

  if (url == NULL || cfg == NULL)
    return why(msg, cap, RT_EURL, "url: NULL");
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
  err = parse_db_path(auth_end, end, &db, &path, msg, cap);
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
  cfg->script_path = path;
  if (port > 0)
    cfg->port = (int)port;
  adopt_db_and_credentials(cfg, db, user, pass);
  return 0;

fail:
  if (err == RT_ENOMEM)
    why(msg, cap, err, "out of memory");
  rt__endpoints_free(seeds, nseeds);
  rt__free(user);
  rt__free(pass);
  return err;
}

int rt__parse_url(const char *url, rt__config *cfg) {
  return rt__parse_url_why(url, cfg, NULL, 0);
}

/* ---- Options ----------------------------------------------------------- */

static int check_prefix(const char *prefix, char *msg, size_t cap) {
  size_t len;

  if (prefix == NULL)
    return why(msg, cap, RT_EPREFIX, "prefix: NULL");
  len = strlen(prefix);
  if (len == 0)
    return why(msg, cap, RT_EPREFIX, "prefix: empty");
  if (len > RT_PREFIX_MAX)
    return why(msg, cap, RT_EPREFIX,
               "prefix: %zu bytes, longer than RT_PREFIX_MAX (%d)", len,
               RT_PREFIX_MAX);
  /* A brace in the prefix would become the key's hash tag and put every
   * resource in one cluster slot, or split a resource across slots. */
  if (strpbrk(prefix, "{}") != NULL)
    return why(msg, cap, RT_EPREFIX, "prefix: contains '{' or '}'");
  return 0;
}

/* A label rides last in the records of lua/lib/prelude.lua: printable
 * ASCII, ':' included (the parsers take the rest of a record). */
static int check_label(const char *label, char *msg, size_t cap) {
  size_t len = label != NULL ? strlen(label) : 0;
  if (len > RT_LABEL_MAX)
    return why(msg, cap, RT_EINVAL,
               "label: %zu bytes, longer than RT_LABEL_MAX (%d)", len,
               RT_LABEL_MAX);
  for (size_t i = 0; i < len; i++)
    if (label[i] < 0x20 || label[i] > 0x7e)
      return why(msg, cap, RT_EINVAL,
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
    return why(msg, cap, RT_EINVAL,
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
    return why(msg, cap, RT_EINVAL, "%s: %s: %s", what, path, strerror(errno));
  if (dir && !S_ISDIR(st.st_mode))
    return why(msg, cap, RT_EINVAL, "%s: %s is not a directory", what, path);
  if (!dir && S_ISDIR(st.st_mode))
    return why(msg, cap, RT_EINVAL, "%s: %s is a directory, not a file", what,
               path);
  if (access(path, dir ? R_OK | X_OK : R_OK) != 0)
    return why(msg, cap, RT_EINVAL, "%s: %s: %s", what, path, strerror(errno));
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
      return why(msg, cap, RT_EINVAL,
                 "tls: 1, but the url says %s:// (no TLS): write %s://",
                 cfg->sentinels != NULL ? "redis-sentinel" : "redis",
                 cfg->sentinels != NULL ? "rediss-sentinel" : "rediss");
    cfg->tls = 1;
  }
  if (!cfg->tls)
    return set == NULL ? 0
                       : why(msg, cap, RT_EINVAL,
                             "%s: set, but TLS is off: use a rediss:// url "
                             "or tls = 1",
                             set);
  int has_cert = o->tls_cert_file != NULL && o->tls_cert_file[0] != '\0';
  int has_key = o->tls_key_file != NULL && o->tls_key_file[0] != '\0';
  if (has_cert != has_key)
    return why(msg, cap, RT_EINVAL, "%s: given without %s",
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
    err = why(msg, cap, RT_EINVAL, "tls_server_name: longer than 253 bytes");
  for (size_t i = 0; err == 0 && name != NULL && name[i] != '\0'; i++)
    if (name[i] <= 0x20 || name[i] > 0x7e)
      err = why(msg, cap, RT_EINVAL,
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
    return why(msg, cap, RT_EINVAL,
               "options: size is 0: initialise rt_options_t with "
               "rt_options_init()");
  if (opts->size < RT__OPTIONS_SIZE_MIN)
    return why(msg, cap, RT_EINVAL,
               "options: size %zu is smaller than any rt_options_t",
               opts->size);
  if (opts->size > sizeof(*o)) {
    const unsigned char *extra = (const unsigned char *)opts + sizeof(*o);
    for (size_t i = 0; i < opts->size - sizeof(*o); i++)
      if (extra[i] != 0)
        return why(msg, cap, RT_EINVAL,
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
    return why(msg, cap, RT_EINVAL,
               "script_path: %d is not RT_SCRIPT_PATH_AUTO, _MODULE, "
               "_FUNCTIONS or _EVAL",
               o->script_path);
  if (o->script_path != RT_SCRIPT_PATH_AUTO &&
      cfg->script_path != RT_SCRIPT_PATH_AUTO &&
      cfg->script_path != o->script_path)
    return why(msg, cap, RT_EINVAL,
               "script_path: %d differs from the url's script_path",
               o->script_path);
  if (o->script_path != RT_SCRIPT_PATH_AUTO)
    cfg->script_path = o->script_path;
  return 0;
}

/* wait_replicas and its timeout; failover_fence_ms. */
static int load_wait(rt__config *cfg, const rt_options_t *o, char *msg,
                     size_t cap) {
  if (o->wait_replicas < 0)
    return why(msg, cap, RT_EINVAL, "wait_replicas: %d is negative",
               o->wait_replicas);
  if (o->wait_replicas_timeout_ms <= 0)
    return why(msg, cap, RT_ETIMEOUTARG,
               "wait_replicas_timeout_ms: %lld is not positive",
               (long long)o->wait_replicas_timeout_ms);
  if (o->wait_replicas > 0 &&
      o->wait_replicas_timeout_ms >= o->command_timeout_ms)
    return why(msg, cap, RT_EINVAL,
               "wait_replicas_timeout_ms: %lld is not below "
               "command_timeout_ms (%lld): WAIT would outlast the command "
               "deadline",
               (long long)o->wait_replicas_timeout_ms,
               (long long)o->command_timeout_ms);
  cfg->wait_replicas = o->wait_replicas;
  cfg->wait_replicas_timeout_ms = o->wait_replicas_timeout_ms;
  if (o->failover_fence_ms < 0 || o->failover_fence_ms > RT_TTL_MAX)
    return why(msg, cap, RT_EINVAL,
               "failover_fence_ms: %lld is out of range (0..%lld)",
               (long long)o->failover_fence_ms, (long long)RT_TTL_MAX);
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
    return why(msg, cap, RT_ETTL,
               "default_ttl_ms: %lld is out of range (1..%lld)",
               (long long)o->default_ttl_ms, (long long)RT_TTL_MAX);
  if (o->connect_timeout_ms <= 0)
    return why(msg, cap, RT_ETIMEOUTARG,
               "connect_timeout_ms: %lld is not positive",
               (long long)o->connect_timeout_ms);
  if (o->command_timeout_ms <= 0)
    return why(msg, cap, RT_ETIMEOUTARG,
               "command_timeout_ms: %lld is not positive",
               (long long)o->command_timeout_ms);
  err = check_label(o->label, msg, cap);
  if (err != 0)
    return err;
  /* The URL replaces host, port and db as a whole, so those fields are
   * only checked when there is no URL. */
  if (o->url == NULL) {
    if (o->host == NULL || o->host[0] == '\0')
      return why(msg, cap, RT_EINVAL, "host: empty");
    if (strlen(o->host) > RT__HOST_MAX)
      return why(msg, cap, RT_EINVAL, "host: longer than %d bytes",
                 RT__HOST_MAX);
    if (o->port < 1 || o->port > 65535)
      return why(msg, cap, RT_EINVAL, "port: %d is out of range (1..65535)",
                 o->port);
    if (o->db < 0)
      return why(msg, cap, RT_EINVAL, "db: %d is negative", o->db);
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
    return why(msg, cap, RT_EINVAL, "NULL configuration");
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
    err = why(msg, cap, RT_EINVAL,
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
    why(msg, cap, err, "out of memory");
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
