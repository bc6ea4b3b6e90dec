/* The notices Redis publishes on a client's channel and on an election's
 * observe channel (common.h has their grammar), parsed: no I/O; the parser
 * takes an explicit length and never reads past it, because a message is
 * not NUL-terminated. What the client does with a notice is notice.c's
 * (locks) and observe.c's (on-locks). */
#include <string.h>

#include "common.h"

/* A non-negative int64: digits only, like every number in our formats. */
static int parse_nonneg_i64(const char *s, size_t len, int64_t *out) {
  uint64_t v;

  if (rt__parse_u64(s, len, &v) != 0 || v > (uint64_t)INT64_MAX)
    return RT_EPROTO;
  *out = (int64_t)v;
  return 0;
}

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
    if (rt__split_fields(s + 2, len - 2, f, fl, 4) != 0 ||
        rt__parse_u64(f[0], fl[0], &n.seq) != 0 ||
        rt__parse_u64(f[1], fl[1], &n.fence) != 0 || n.fence == 0 ||
        parse_nonneg_i64(f[2], fl[2], &n.lease_ms) != 0 ||
        parse_nonneg_i64(f[3], fl[3], &n.deadline_ms) != 0)
      return RT_EPROTO;
  } else if (n.kind == RT_PROTO_NOTICE_LOST) {
    if (rt__split_fields(s + 2, len - 2, f, fl, 1) != 0 ||
        rt__parse_u64(f[0], fl[0], &n.seq) != 0)
      return RT_EPROTO;
  } else if (n.kind == RT_PROTO_NOTICE_OBSERVED) {
    if (parse_leader(s + 2, len - 2, &n) != 0)
      return RT_EPROTO;
  } else if (n.kind == RT_PROTO_NOTICE_NEXT) {
    if (rt__split_fields(s + 2, len - 2, f, fl, 2) != 0 ||
        rt__parse_u64(f[0], fl[0], &n.seq) != 0 ||
        parse_nonneg_i64(f[1], fl[1], &n.deadline_ms) != 0)
      return RT_EPROTO;
  } else {
    return RT_EPROTO;
  }
  *out = n;
  return 0;
}
