/* Resource names to Redis keys, the strict numbers of our text formats, and
 * queue entries (the notices are notice_parse.c's). No I/O here; every
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

int rt__split_fields(const char *s, size_t len, const char **fields,
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

  if (s == NULL || rt__split_fields(s, len, f, fl, 2) != 0)
    return RT_EPROTO;
  if (!is_client_id(f[0], fl[0]) || rt__parse_u64(f[1], fl[1], &q) != 0)
    return RT_EPROTO;
  memcpy(client_id, f[0], RT__CLIENT_ID_LEN);
  client_id[RT__CLIENT_ID_LEN] = '\0';
  *seq = q;
  return 0;
}
