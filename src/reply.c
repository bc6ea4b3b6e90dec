/* Turning Redis replies into RT_E* codes and plain values. Kept free of
 * I/O so the fuzz target and unit tests can drive it with any reply. */
#include <string.h>

#include "reply.h"

static int contains(const char *s, size_t len, const char *word) {
  size_t n = strlen(word);
  for (size_t i = 0; i + n <= len; i++)
    if (memcmp(s + i, word, n) == 0)
      return 1;
  return 0;
}

int rt__reply_error(const char *str, size_t len) {
  if (str == NULL)
    return RT_EREDIS;
  /* The scripts' own refusal of a resource used as another kind. */
  if (contains(str, len, "WRONGKIND"))
    return RT_EKIND;
  if (contains(str, len, "WRONGTYPE"))
    return RT_EWRONGTYPE;
  /* Redis 7.0 words ACL refusals inside scripts without NOPERM. */
  if (contains(str, len, "NOPERM") ||
      contains(str, len, "user executing the script can't") ||
      contains(str, len, "No permissions to"))
    return RT_ENOPERM;
  if (rt__reply_not_master(str, len))
    return RT_EREADONLY;
  if (contains(str, len, "NOAUTH") || contains(str, len, "WRONGPASS") ||
      contains(str, len, "invalid password") ||
      contains(str, len, "invalid username-password"))
    return RT_EAUTH;
  return RT_EREDIS;
}

int rt__reply_not_master(const char *str, size_t len) {
  static const char *const codes[] = {"READONLY", "MASTERDOWN", "LOADING"};
  for (size_t i = 0; str != NULL && i < sizeof(codes) / sizeof(codes[0]); i++) {
    size_t n = strlen(codes[i]);
    if (len >= n && memcmp(str, codes[i], n) == 0)
      return 1;
    /* A script's error reply wraps Redis's: "ERR Error running script
     * ...: READONLY You can't write against a read only replica." */
    if (contains(str, len, codes[i]) && contains(str, len, "script"))
      return 1;
  }
  return 0;
}

int rt__reply_is_noscript(const redisReply *r) {
  return r != NULL && r->type == REDIS_REPLY_ERROR && r->len >= 8 &&
         memcmp(r->str, "NOSCRIPT", 8) == 0;
}

int rt__reply_is_nofunction(const redisReply *r) {
  return r != NULL && r->type == REDIS_REPLY_ERROR &&
         contains(r->str, r->len, "Function not found");
}

int rt__reply_is_unknown_command(const redisReply *r) {
  return r != NULL && r->type == REDIS_REPLY_ERROR && r->len >= 19 &&
         memcmp(r->str, "ERR unknown command", 19) == 0;
}

int rt__reply_is_library_exists(const redisReply *r) {
  return r != NULL && r->type == REDIS_REPLY_ERROR &&
         contains(r->str, r->len, "already exists");
}

int rt__reply_is_oom(const redisReply *r) {
  return r != NULL && r->type == REDIS_REPLY_ERROR &&
         contains(r->str, r->len, "OOM command not allowed");
}

int rt__reply_ints(const redisReply *r, long long *out, size_t min,
                   size_t max) {
  if (r == NULL)
    return RT_EPROTO;
  if (r->type == REDIS_REPLY_ERROR)
    return rt__reply_error(r->str, r->len);
  if (r->type != REDIS_REPLY_ARRAY || r->elements < min || r->elements > max)
    return RT_EPROTO;
  for (size_t i = 0; i < r->elements; i++) {
    if (r->element[i] == NULL || r->element[i]->type != REDIS_REPLY_INTEGER)
      return RT_EPROTO;
    out[i] = r->element[i]->integer;
  }
  return (int)r->elements;
}

/* The reply of a script that answers with integers only: between min and
 * max of them into v; a is zeroed. */
static int ints(const redisReply *r, rt__answer *a, long long *v, size_t min,
                size_t max) {
  memset(a, 0, sizeof(*a));
  return rt__reply_ints(r, v, min, max);
}

/* {GRANTED, fence, lease ms, deadline, now}: enqueue's and try's grant. */
static int grant_of(const long long *v, rt__grant *g, rt__answer *a) {
  g->fence = (uint64_t)v[1];
  g->lease_ms = v[2];
  g->deadline_ms = v[3];
  a->now_ms = v[4];
  return g->fence > 0 && g->lease_ms > 0 ? 0 : RT_EPROTO;
}

/* {GRANTED, fence, lease, deadline, now} or {QUEUED, position, holder's
 * lease left, now, more}. */
int rt__parse_enqueue(const redisReply *r, rt__answer *a) {
  long long v[5];
  int n = ints(r, a, v, 5, 5);
  rt__enqueue_answer *e = &a->u.enqueue;
  if (n < 0)
    return n;
  if (v[0] == RT__ENQUEUE_GRANTED) {
    e->code = RT__ENQUEUE_GRANTED;
    return grant_of(v, &e->grant, a);
  }
  if (v[0] != RT__ENQUEUE_QUEUED)
    return RT_EPROTO;
  e->code = RT__ENQUEUE_QUEUED;
  e->position = v[1];
  e->holder_left_ms = v[2];
  a->now_ms = v[3];
  a->more = v[4] != 0;
  return 0;
}

/* {GRANTED, fence, lease, deadline, now} or {BUSY, holder's lease left,
 * now, more}. */
int rt__parse_try(const redisReply *r, rt__answer *a) {
  long long v[5];
  int n = ints(r, a, v, 4, 5);
  rt__try_answer *t = &a->u.try;
  if (n < 0)
    return n;
  if (n == 5 && v[0] == RT__TRY_GRANTED) {
    t->code = RT__TRY_GRANTED;
    return grant_of(v, &t->grant, a);
  }
  if (n != 4 || v[0] != RT__TRY_BUSY)
    return RT_EPROTO;
  t->code = RT__TRY_BUSY;
  t->holder_left_ms = v[1];
  a->now_ms = v[2];
  a->more = v[3] != 0;
  return 0;
}

/* {RELEASED, CANCELED or NOT_FOUND, more}. */
int rt__parse_release(const redisReply *r, rt__answer *a) {
  long long v[2];
  int n = ints(r, a, v, 2, 2);
  if (n < 0)
    return n;
  if (v[0] != RT__RELEASE_NOT_FOUND && v[0] != RT__RELEASE_RELEASED &&
      v[0] != RT__RELEASE_CANCELED)
    return RT_EPROTO;
  a->u.release.code = (rt__release_code)v[0];
  a->more = v[1] != 0;
  return 0;
}

/* {EXTENDED, lease, deadline, now} or {NOT_HELD, now}. */
int rt__parse_extend(const redisReply *r, rt__answer *a) {
  long long v[4];
  int n = ints(r, a, v, 2, 4);
  rt__extend_answer *x = &a->u.extend;
  if (n < 0)
    return n;
  if (n == 4 && v[0] == RT__EXTEND_EXTENDED) {
    x->code = RT__EXTEND_EXTENDED;
    x->lease_ms = v[1];
    x->deadline_ms = v[2];
    a->now_ms = v[3];
    return 0;
  }
  if (n != 2 || v[0] != RT__EXTEND_NOT_HELD)
    return RT_EPROTO;
  x->code = RT__EXTEND_NOT_HELD;
  a->now_ms = v[1];
  return 0;
}

/* {holder's lease left or -1, mine, position, now, more}. */
int rt__parse_reap(const redisReply *r, rt__answer *a) {
  long long v[5];
  int n = ints(r, a, v, 5, 5);
  rt__reap_answer *p = &a->u.reap;
  if (n < 0)
    return n;
  if (v[1] != RT__REAP_GONE && v[1] != RT__REAP_WAITING &&
      v[1] != RT__REAP_HOLDER)
    return RT_EPROTO;
  p->holder_left_ms = v[0];
  p->mine = (rt__reap_mine)v[1];
  p->position = v[2];
  a->now_ms = v[3];
  a->more = v[4] != 0;
  return 0;
}

int rt__parse_inspect(const redisReply *r, rt__answer *a) {
  memset(a, 0, sizeof(*a));
  rt__inspect *out = &a->u.inspect;
  if (r == NULL)
    return RT_EPROTO;
  if (r->type == REDIS_REPLY_ERROR)
    return rt__reply_error(r->str, r->len);
  if (r->type != REDIS_REPLY_ARRAY || r->elements != 9)
    return RT_EPROTO;
  long long *fields[5] = {&out->now, &out->len, &out->fence, &out->deadline,
                          &out->granted};
  for (size_t i = 0; i < 5; i++) {
    if (r->element[i]->type != REDIS_REPLY_INTEGER)
      return RT_EPROTO;
    *fields[i] = r->element[i]->integer;
  }
  if (r->element[5]->type != REDIS_REPLY_STRING ||
      r->element[7]->type != REDIS_REPLY_STRING)
    return RT_EPROTO;
  out->holder = r->element[5];
  out->holder_label = r->element[7];
  const redisReply *list = r->element[6], *labels = r->element[8];
  if (list->type != REDIS_REPLY_ARRAY || labels->type != REDIS_REPLY_ARRAY ||
      labels->elements != list->elements)
    return RT_EPROTO;
  for (size_t i = 0; i < list->elements; i++)
    if (list->element[i]->type != REDIS_REPLY_STRING ||
        labels->element[i]->type != REDIS_REPLY_STRING)
      return RT_EPROTO;
  if (out->len < 0 || (size_t)out->len < list->elements)
    return RT_EPROTO;
  out->nentries = list->elements;
  out->entries = (const redisReply *const *)list->element;
  out->labels = (const redisReply *const *)labels->element;
  a->now_ms = out->now;
  return 0;
}

/* An array reply of n elements, each of the given type. */
static int list_of(const redisReply *l, size_t n, int type) {
  if (l->type != REDIS_REPLY_ARRAY || l->elements != n)
    return 0;
  for (size_t i = 0; i < n; i++)
    if (l->element[i]->type != type)
      return 0;
  return 1;
}

int rt__parse_pool_inspect(const redisReply *r, rt__answer *a) {
  static const int types[8] = {REDIS_REPLY_STRING,  REDIS_REPLY_INTEGER,
                               REDIS_REPLY_INTEGER, REDIS_REPLY_INTEGER,
                               REDIS_REPLY_STRING,  REDIS_REPLY_STRING,
                               REDIS_REPLY_INTEGER, REDIS_REPLY_STRING};
  memset(a, 0, sizeof(*a));
  rt__pool_inspect *out = &a->u.pool_inspect;
  if (r == NULL)
    return RT_EPROTO;
  if (r->type == REDIS_REPLY_ERROR)
    return rt__reply_error(r->str, r->len);
  if (r->type != REDIS_REPLY_ARRAY || r->elements != 14 ||
      r->element[1]->type != REDIS_REPLY_STRING ||
      r->element[6]->type != REDIS_REPLY_ARRAY ||
      r->element[11]->type != REDIS_REPLY_ARRAY)
    return RT_EPROTO;
  long long *fields[5] = {&out->now, &out->capacity, &out->used, &out->fence,
                          &out->len};
  static const size_t at[5] = {0, 2, 3, 4, 5};
  for (size_t i = 0; i < 5; i++) {
    if (r->element[at[i]]->type != REDIS_REPLY_INTEGER)
      return RT_EPROTO;
    *fields[i] = r->element[at[i]]->integer;
  }
  out->kind = r->element[1];
  out->nholders = r->element[6]->elements;
  out->nentries = r->element[11]->elements;
  rt__column *columns[8] = {&out->holders.ids,     &out->holders.permits,
                            &out->holders.fences,  &out->holders.deadlines,
                            &out->holders.labels,  &out->waiters.ids,
                            &out->waiters.permits, &out->waiters.labels};
  for (size_t i = 0; i < 8; i++) {
    const redisReply *l = r->element[6 + i];
    if (!list_of(l, i < 5 ? out->nholders : out->nentries, types[i]))
      return RT_EPROTO;
    *columns[i] = (rt__column)l->element;
  }
  if (out->len < 0 || (size_t)out->len < out->nentries)
    return RT_EPROTO;
  a->now_ms = out->now;
  return 0;
}

/* {1, fence, now} or {0, now} */
int rt__parse_proclaim(const redisReply *r, rt__answer *a) {
  long long v[3];
  memset(a, 0, sizeof(*a));
  int n = rt__reply_ints(r, v, 2, 3);
  if (n < 0)
    return n;
  if ((v[0] == 1 && n != 3) || (v[0] == 0 && n != 2) || v[0] < 0 || v[0] > 1)
    return RT_EPROTO;
  a->u.proclaim.code = (rt__proclaim_code)v[0];
  a->now_ms = v[n - 1];
  return 0;
}

static int is_string(const redisReply *r) {
  return r->type == REDIS_REPLY_STRING;
}

/* {NOBODY, now, more}, {REFUSED, now, more, holder} or {EVICTED, now,
 * more, holder, next or "", its fence or 0}. */
int rt__parse_evict(const redisReply *r, rt__answer *a) {
  static const size_t sizes[3] = {3, 6, 4}; /* by code */
  memset(a, 0, sizeof(*a));
  rt__evict_answer *e = &a->u.evict;
  if (r == NULL)
    return RT_EPROTO;
  if (r->type == REDIS_REPLY_ERROR)
    return rt__reply_error(r->str, r->len);
  if (r->type != REDIS_REPLY_ARRAY || r->elements < 3)
    return RT_EPROTO;
  for (size_t i = 0; i < 3; i++)
    if (r->element[i]->type != REDIS_REPLY_INTEGER)
      return RT_EPROTO;
  long long code = r->element[0]->integer;
  if (code < 0 || code > 2 || r->elements != sizes[code])
    return RT_EPROTO;
  e->code = (rt__evict_code)code;
  a->now_ms = r->element[1]->integer;
  a->more = r->element[2]->integer != 0;
  if (code == RT__EVICT_NOBODY)
    return 0;
  if (!is_string(r->element[3]) || r->element[3]->len == 0)
    return RT_EPROTO;
  e->holder = r->element[3];
  if (code == RT__EVICT_REFUSED)
    return 0;
  if (!is_string(r->element[4]) || r->element[5]->type != REDIS_REPLY_INTEGER)
    return RT_EPROTO;
  e->next = r->element[4];
  e->fence = r->element[5]->integer;
  if ((e->next->len > 0) != (e->fence > 0))
    return RT_EPROTO;
  return 0;
}
