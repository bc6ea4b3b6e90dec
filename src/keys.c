/* Resource names to Redis keys, and the two small text formats that come
 * back from Redis: queue entries and grant notices. No I/O here; every
 * parser takes an explicit length and never reads past it, because Redis
 * replies are not NUL-terminated. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common.h"

/* ---- Keys -------------------------------------------------------------- */

/* Bytes of the escaped form of name[0..len), or SIZE_MAX on overflow. */
static size_t escaped_len(const unsigned char *name, size_t len) {
  size_t i, n = len;

  for (i = 0; i < len; i++) {
    if (name[i] == '%' || name[i] == '{' || name[i] == '}') {
      if (n > SIZE_MAX - 2)
        return SIZE_MAX;
      n += 2;
    }
  }
  return n;
}

char *rt__key_base(const char *prefix, size_t prefix_len, const void *name,
                   size_t len, size_t *out_len) {
  const unsigned char *src = name;
  size_t esc, total, i;
  char *buf, *p;

  esc = escaped_len(src, len);
  /* "<prefix>:{" + esc + "}:" plus room for a suffix byte and a NUL, so
   * the caller can finish the key in place. */
  if (esc > SIZE_MAX - 6 || prefix_len > SIZE_MAX - 6 - esc)
    return NULL;
  total = prefix_len + esc + 4;
  buf = rt__malloc(total + 2);
  if (buf == NULL)
    return NULL;

  p = buf;
  if (prefix_len > 0)
    memcpy(p, prefix, prefix_len);
  p += prefix_len;
  *p++ = ':';
  *p++ = '{';
  for (i = 0; i < len; i++) {
    switch (src[i]) {
    case '%':
      memcpy(p, "%25", 3);
      p += 3;
      break;
    case '{':
      memcpy(p, "%7B", 3);
      p += 3;
      break;
    case '}':
      memcpy(p, "%7D", 3);
      p += 3;
      break;
    default:
      *p++ = (char)src[i];
    }
  }
  *p++ = '}';
  *p++ = ':';
  *p = '\0';
  if (out_len != NULL)
    *out_len = total;
  return buf;
}

long rt__unescape_name(const char *esc, size_t len, char *out) {
  size_t i, n = 0;

  for (i = 0; i < len; i++) {
    char c = esc[i];
    if (c == '{' || c == '}')
      return -1;
    if (c == '%') {
      /* Only the three escapes rt__key_base writes, spelled exactly as it
       * writes them: anything else did not come from us. */
      if (len - i < 3)
        return -1;
      if (esc[i + 1] == '2' && esc[i + 2] == '5')
        c = '%';
      else if (esc[i + 1] == '7' && esc[i + 2] == 'B')
        c = '{';
      else if (esc[i + 1] == '7' && esc[i + 2] == 'D')
        c = '}';
      else
        return -1;
      i += 2;
    }
    out[n++] = c;
  }
  return (long)n;
}

/* ---- Numbers ----------------------------------------------------------- */

int rt__parse_u64(const char *s, size_t len, uint64_t *out) {
  uint64_t v = 0;
  size_t i;

  if (s == NULL || len == 0)
    return RT_EPROTO;
  for (i = 0; i < len; i++) {
    unsigned d;
    if (s[i] < '0' || s[i] > '9')
      return RT_EPROTO;
    d = (unsigned)(s[i] - '0');
    if (v > (UINT64_MAX - d) / 10)
      return RT_EPROTO;
    v = v * 10 + d;
  }
  *out = v;
  return 0;
}

int rt__parse_i64(const char *s, size_t len, int64_t *out) {
  uint64_t mag;
  int neg = 0;

  if (s != NULL && len > 0 && s[0] == '-') {
    neg = 1;
    s++;
    len--;
  }
  if (rt__parse_u64(s, len, &mag) != 0)
    return RT_EPROTO;
  if (neg) {
    /* INT64_MIN's magnitude is one more than INT64_MAX. */
    if (mag > (uint64_t)INT64_MAX + 1)
      return RT_EPROTO;
    *out = mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag;
  } else {
    if (mag > (uint64_t)INT64_MAX)
      return RT_EPROTO;
    *out = (int64_t)mag;
  }
  return 0;
}

/* A non-negative int64: digits only, like every number in our formats. */
static int parse_nonneg_i64(const char *s, size_t len, int64_t *out) {
  uint64_t v;

  if (rt__parse_u64(s, len, &v) != 0 || v > (uint64_t)INT64_MAX)
    return RT_EPROTO;
  *out = (int64_t)v;
  return 0;
}

/* Split s[0..len) at ':' into exactly nfields fields. */
static int split_fields(const char *s, size_t len, const char **fields,
                        size_t *lens, size_t nfields) {
  size_t k;

  for (k = 0; k < nfields; k++) {
    const char *colon = len > 0 ? memchr(s, ':', len) : NULL;
    size_t flen = colon != NULL ? (size_t)(colon - s) : len;
    fields[k] = s;
    lens[k] = flen;
    if (k + 1 < nfields) {
      if (colon == NULL)
        return RT_EPROTO;
      s = colon + 1;
      len -= flen + 1;
    } else if (colon != NULL) {
      return RT_EPROTO; /* extra fields */
    }
  }
  return 0;
}

/* ---- Queue entries ----------------------------------------------------- */

size_t rt__entry_format(char *buf, const char *client_id, uint64_t seq) {
  int n = snprintf(buf, RT__ENTRY_MAX, "%.*s:%" PRIu64, RT__CLIENT_ID_LEN,
                   client_id, seq);
  return n < 0 ? 0 : (size_t)n;
}

static int is_client_id(const char *s, size_t len) {
  size_t i;

  if (len != RT__CLIENT_ID_LEN)
    return 0;
  for (i = 0; i < len; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
      return 0;
  return 1;
}

int rt__entry_parse(const char *s, size_t len, char *client_id, uint64_t *seq) {
  const char *f[2];
  size_t fl[2];
  uint64_t q;

  if (s == NULL || split_fields(s, len, f, fl, 2) != 0)
    return RT_EPROTO;
  if (!is_client_id(f[0], fl[0]) || rt__parse_u64(f[1], fl[1], &q) != 0)
    return RT_EPROTO;
  memcpy(client_id, f[0], RT__CLIENT_ID_LEN);
  client_id[RT__CLIENT_ID_LEN] = '\0';
  *seq = q;
  return 0;
}

/* ---- Notices ----------------------------------------------------------- */

/* The ":<kind>:{<esc>}" that ends the grant notice s[0..len), whose first
 * '{' is at brace, into n. */
static int parse_resource(const char *s, size_t len, const char *brace,
                          rt__notice *n) {
  const char *esc = brace + 1, *end = s + len - 1;
  if (*end != '}' || brace - s < 3 || brace[-1] != ':' ||
      memchr(esc, '{', (size_t)(end - esc)) != NULL ||
      memchr(esc, '}', (size_t)(end - esc)) != NULL)
    return RT_EPROTO;
  /* The kind starts after the fifth ':' (the one after the deadline). */
  const char *kind = s;
  for (int colons = 0; colons < 5; kind++) {
    if (kind == brace)
      return RT_EPROTO;
    if (*kind == ':')
      colons++;
  }
  if ((size_t)(brace - 1 - kind) >= RT__KIND_MAX)
    return RT_EPROTO;
  n->res_kind = kind;
  n->res_kind_len = (size_t)(brace - 1 - kind);
  n->res_esc = esc;
  n->res_esc_len = (size_t)(end - esc);
  return 0;
}

/* The part of an observe notice after "o:":
 * "<fence>:<deadline>:<leader id>:<value>" (or "<fence>:0::"). */
static int parse_leader(const char *s, size_t len, rt__notice *n) {
  const char *c1 = memchr(s, ':', len);
  const char *c2 =
      c1 != NULL ? memchr(c1 + 1, ':', len - (size_t)(c1 + 1 - s)) : NULL;
  if (c2 == NULL || rt__parse_u64(s, (size_t)(c1 - s), &n->fence) != 0 ||
      parse_nonneg_i64(c1 + 1, (size_t)(c2 - c1 - 1), &n->deadline_ms) != 0)
    return RT_EPROTO;
  const char *id = c2 + 1, *end = s + len;
  const char *colon = memchr(id, ':', (size_t)(end - id));
  if (colon != NULL && colon != id) /* an id has a ':' of its own */
    colon = memchr(colon + 1, ':', (size_t)(end - colon - 1));
  if (colon == NULL)
    return RT_EPROTO;
  n->leader = id;
  n->leader_len = (size_t)(colon - id);
  n->value = colon + 1;
  n->value_len = (size_t)(end - n->value);
  if (n->leader_len >= RT__ENTRY_MAX || n->value_len > RT_VALUE_MAX)
    return RT_EPROTO;
  return 0;
}

int rt__notice_parse(const char *s, size_t len, rt__notice *out) {
  const char *f[4];
  size_t fl[4];
  rt__notice n;

  if (s == NULL || len < 2 || s[1] != ':')
    return RT_EPROTO;
  memset(&n, 0, sizeof(n));
  n.kind = s[0];
  if (n.kind == RT_PROTO_NOTICE_GRANTED) {
    /* The resource after the deadline: ":<kind>:{<esc>}". */
    const char *brace = memchr(s, '{', len);
    if (brace != NULL && parse_resource(s, len, brace, &n) != 0)
      return RT_EPROTO;
    if (brace != NULL)
      len = (size_t)(n.res_kind - s) - 1;
    if (split_fields(s + 2, len - 2, f, fl, 4) != 0 ||
        rt__parse_u64(f[0], fl[0], &n.seq) != 0 ||
        rt__parse_u64(f[1], fl[1], &n.fence) != 0 || n.fence == 0 ||
        parse_nonneg_i64(f[2], fl[2], &n.lease_ms) != 0 ||
        parse_nonneg_i64(f[3], fl[3], &n.deadline_ms) != 0)
      return RT_EPROTO;
  } else if (n.kind == RT_PROTO_NOTICE_LOST) {
    if (split_fields(s + 2, len - 2, f, fl, 1) != 0 ||
        rt__parse_u64(f[0], fl[0], &n.seq) != 0)
      return RT_EPROTO;
  } else if (n.kind == RT_PROTO_NOTICE_OBSERVED) {
    if (parse_leader(s + 2, len - 2, &n) != 0)
      return RT_EPROTO;
  } else if (n.kind == RT_PROTO_NOTICE_NEXT) {
    if (split_fields(s + 2, len - 2, f, fl, 2) != 0 ||
        rt__parse_u64(f[0], fl[0], &n.seq) != 0 ||
        parse_nonneg_i64(f[1], fl[1], &n.deadline_ms) != 0)
      return RT_EPROTO;
  } else {
    return RT_EPROTO;
  }
  *out = n;
  return 0;
}
