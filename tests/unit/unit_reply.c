/* Each script's answer parser (src/reply.c): the shapes of the scripts in
 * lua/ read into typed answers with named codes, and everything else
 * refused with RT_EPROTO or the mapped error code. Replies are built by
 * hand, as hiredis would hand them over. */
#include <criterion/criterion.h>
#include <string.h>

#include "reply.h"

/* An array reply of up to 9 elements, built in place. */
typedef struct built {
  redisReply top;
  redisReply el[9];
  redisReply *ptr[9];
} built;

static const redisReply *ints(built *b, size_t n, const long long *v) {
  memset(b, 0, sizeof(*b));
  b->top.type = REDIS_REPLY_ARRAY;
  b->top.elements = n;
  b->top.element = b->ptr;
  for (size_t i = 0; i < n; i++) {
    b->el[i].type = REDIS_REPLY_INTEGER;
    b->el[i].integer = v[i];
    b->ptr[i] = &b->el[i];
  }
  return &b->top;
}

#define INTS(b, ...)                                                           \
  ints(b, sizeof((long long[]){__VA_ARGS__}) / sizeof(long long),              \
       (long long[]){__VA_ARGS__})

Test(reply, an_enqueue_grant_is_read_with_its_fence_lease_and_deadline) {
  built b;
  rt__answer a;
  cr_assert_eq(rt__parse_enqueue(INTS(&b, 1, 7, 5000, 123456, 118456), &a), 0);
  cr_assert_eq(a.u.enqueue.code, RT__ENQUEUE_GRANTED);
  cr_assert_eq(a.u.enqueue.grant.fence, 7);
  cr_assert_eq(a.u.enqueue.grant.lease_ms, 5000);
  cr_assert_eq(a.u.enqueue.grant.deadline_ms, 123456);
  cr_assert_eq(a.now_ms, 118456);
  cr_assert_eq(a.more, 0);
}

Test(reply, a_queued_enqueue_says_its_position_and_the_lease_in_front) {
  built b;
  rt__answer a;
  cr_assert_eq(rt__parse_enqueue(INTS(&b, 0, 2, 300, 1000, 1), &a), 0);
  cr_assert_eq(a.u.enqueue.code, RT__ENQUEUE_QUEUED);
  cr_assert_eq(a.u.enqueue.position, 2);
  cr_assert_eq(a.u.enqueue.holder_left_ms, 300);
  cr_assert_eq(a.now_ms, 1000);
  cr_assert_eq(a.more, 1);
}

Test(reply, a_grant_without_fence_or_lease_or_an_unknown_code_is_refused) {
  built b;
  rt__answer a;
  cr_assert_eq(rt__parse_enqueue(INTS(&b, 1, 0, 5000, 1, 1), &a), RT_EPROTO);
  cr_assert_eq(rt__parse_enqueue(INTS(&b, 1, 3, 0, 1, 1), &a), RT_EPROTO);
  cr_assert_eq(rt__parse_enqueue(INTS(&b, 2, 3, 10, 1, 1), &a), RT_EPROTO);
  cr_assert_eq(rt__parse_enqueue(INTS(&b, 0, 3, 10, 1), &a), RT_EPROTO);
  cr_assert_eq(rt__parse_try(INTS(&b, 1, 0, 10, 1, 1), &a), RT_EPROTO);
}

Test(reply, try_reads_a_grant_or_busy) {
  built b;
  rt__answer a;
  cr_assert_eq(rt__parse_try(INTS(&b, 1, 9, 200, 1200, 1000), &a), 0);
  cr_assert_eq(a.u.try.code, RT__TRY_GRANTED);
  cr_assert_eq(a.u.try.grant.fence, 9);
  cr_assert_eq(rt__parse_try(INTS(&b, 0, 40, 1000, 1), &a), 0);
  cr_assert_eq(a.u.try.code, RT__TRY_BUSY);
  cr_assert_eq(a.u.try.holder_left_ms, 40);
  cr_assert_eq(a.more, 1);
  /* A busy answer has four fields, a grant five. */
  cr_assert_eq(rt__parse_try(INTS(&b, 0, 40, 1000, 1, 0), &a), RT_EPROTO);
}

Test(reply, release_names_released_canceled_and_not_found) {
  built b;
  rt__answer a;
  cr_assert_eq(rt__parse_release(INTS(&b, 1, 0), &a), 0);
  cr_assert_eq(a.u.release.code, RT__RELEASE_RELEASED);
  cr_assert_eq(rt__parse_release(INTS(&b, 2, 1), &a), 0);
  cr_assert_eq(a.u.release.code, RT__RELEASE_CANCELED);
  cr_assert_eq(a.more, 1);
  cr_assert_eq(rt__parse_release(INTS(&b, 0, 0), &a), 0);
  cr_assert_eq(a.u.release.code, RT__RELEASE_NOT_FOUND);
  cr_assert_eq(rt__parse_release(INTS(&b, 3, 0), &a), RT_EPROTO);
  cr_assert_eq(rt__parse_release(INTS(&b, 1), &a), RT_EPROTO);
}

Test(reply, extend_reads_the_new_lease_or_not_held) {
  built b;
  rt__answer a;
  cr_assert_eq(rt__parse_extend(INTS(&b, 1, 500, 1500, 1000), &a), 0);
  cr_assert_eq(a.u.extend.code, RT__EXTEND_EXTENDED);
  cr_assert_eq(a.u.extend.lease_ms, 500);
  cr_assert_eq(a.u.extend.deadline_ms, 1500);
  cr_assert_eq(a.now_ms, 1000);
  cr_assert_eq(rt__parse_extend(INTS(&b, 0, 1000), &a), 0);
  cr_assert_eq(a.u.extend.code, RT__EXTEND_NOT_HELD);
  cr_assert_eq(rt__parse_extend(INTS(&b, 1, 1000), &a), RT_EPROTO);
  cr_assert_eq(rt__parse_extend(INTS(&b, 0, 1, 2, 3), &a), RT_EPROTO);
}

Test(reply, reap_says_where_the_callers_oldest_wait_stands) {
  built b;
  rt__answer a;
  cr_assert_eq(rt__parse_reap(INTS(&b, -1, 0, 0, 1000, 0), &a), 0);
  cr_assert_eq(a.u.reap.mine, RT__REAP_GONE);
  cr_assert_eq(a.u.reap.holder_left_ms, -1);
  cr_assert_eq(rt__parse_reap(INTS(&b, 250, 1, 1, 1000, 1), &a), 0);
  cr_assert_eq(a.u.reap.mine, RT__REAP_WAITING);
  cr_assert_eq(a.u.reap.position, 1);
  cr_assert_eq(a.more, 1);
  cr_assert_eq(rt__parse_reap(INTS(&b, 250, 2, 0, 1000, 0), &a), 0);
  cr_assert_eq(a.u.reap.mine, RT__REAP_HOLDER);
  cr_assert_eq(rt__parse_reap(INTS(&b, 250, 3, 0, 1000, 0), &a), RT_EPROTO);
}

Test(reply, an_error_reply_maps_to_its_code_in_every_parser) {
  static const rt__answer_parser parsers[] = {
      rt__parse_enqueue, rt__parse_try,     rt__parse_release, rt__parse_extend,
      rt__parse_reap,    rt__parse_inspect, rt__parse_evict};
  char text[] = "ERR Error running script: WRONGTYPE Operation against a key";
  redisReply err;
  memset(&err, 0, sizeof(err));
  err.type = REDIS_REPLY_ERROR;
  err.str = text;
  err.len = strlen(text);
  for (size_t i = 0; i < sizeof(parsers) / sizeof(parsers[0]); i++) {
    rt__answer a;
    cr_assert_eq(parsers[i](&err, &a), RT_EWRONGTYPE, "parser %zu", i);
    cr_assert_eq(parsers[i](NULL, &a), RT_EPROTO, "parser %zu", i);
  }
}

Test(reply, inspect_reads_the_holder_and_the_waiters_in_order) {
  built b;
  redisReply holder, hlabel, list, labels, w[2], wl[2];
  redisReply *wp[2] = {&w[0], &w[1]}, *wlp[2] = {&wl[0], &wl[1]};
  char hid[] = "h:1", hl[] = "me", w0[] = "a:2", w1[] = "b:3", empty[] = "";
  INTS(&b, 1000, 2, 7, 1500, 900, 0, 0, 0, 0);
  memset(&holder, 0, sizeof(holder));
  holder.type = REDIS_REPLY_STRING;
  holder.str = hid;
  holder.len = 3;
  hlabel = holder;
  hlabel.str = hl;
  hlabel.len = 2;
  for (int i = 0; i < 2; i++) {
    w[i] = holder;
    w[i].str = i == 0 ? w0 : w1;
    wl[i] = holder;
    wl[i].str = empty;
    wl[i].len = 0;
  }
  memset(&list, 0, sizeof(list));
  list.type = REDIS_REPLY_ARRAY;
  list.elements = 2;
  list.element = wp;
  labels = list;
  labels.element = wlp;
  b.ptr[5] = &holder;
  b.ptr[6] = &list;
  b.ptr[7] = &hlabel;
  b.ptr[8] = &labels;
  rt__answer a;
  cr_assert_eq(rt__parse_inspect(&b.top, &a), 0);
  cr_assert_eq(a.now_ms, 1000);
  cr_assert_eq(a.u.inspect.fence, 7);
  cr_assert_str_eq(a.u.inspect.holder->str, "h:1");
  cr_assert_str_eq(a.u.inspect.holder_label->str, "me");
  cr_assert_eq(a.u.inspect.nentries, 2);
  cr_assert_str_eq(a.u.inspect.entries[1]->str, "b:3");
  /* More waiters listed than live: refused. */
  b.el[1].integer = 1;
  cr_assert_eq(rt__parse_inspect(&b.top, &a), RT_EPROTO);
}

/* A string element of b at i. */
static void str_at(built *b, size_t i, char *s) {
  b->el[i].type = REDIS_REPLY_STRING;
  b->el[i].str = s;
  b->el[i].len = strlen(s);
}

Test(reply, evict_reads_nobody_a_refusal_or_the_evicted_and_next_holder) {
  built b;
  rt__answer a;
  char held[] = "h:1", next[] = "n:2", none[] = "";
  cr_assert_eq(rt__parse_evict(INTS(&b, 0, 1000, 0), &a), 0);
  cr_assert_eq(a.u.evict.code, RT__EVICT_NOBODY);
  cr_assert_null(a.u.evict.holder);
  cr_assert_eq(a.now_ms, 1000);

  INTS(&b, 2, 1000, 0, 0);
  str_at(&b, 3, held);
  cr_assert_eq(rt__parse_evict(&b.top, &a), 0);
  cr_assert_eq(a.u.evict.code, RT__EVICT_REFUSED);
  cr_assert_str_eq(a.u.evict.holder->str, "h:1");

  INTS(&b, 1, 1000, 1, 0, 0, 8);
  str_at(&b, 3, held);
  str_at(&b, 4, next);
  cr_assert_eq(rt__parse_evict(&b.top, &a), 0);
  cr_assert_eq(a.u.evict.code, RT__EVICT_EVICTED);
  cr_assert_str_eq(a.u.evict.holder->str, "h:1");
  cr_assert_str_eq(a.u.evict.next->str, "n:2");
  cr_assert_eq(a.u.evict.fence, 8);
  cr_assert(a.more);
  /* A next holder without a fence, or a fence without one: refused. */
  b.el[5].integer = 0;
  cr_assert_eq(rt__parse_evict(&b.top, &a), RT_EPROTO);
  str_at(&b, 4, none);
  cr_assert_eq(rt__parse_evict(&b.top, &a), 0);
  cr_assert_eq(a.u.evict.next->len, 0);
  b.el[5].integer = 8;
  cr_assert_eq(rt__parse_evict(&b.top, &a), RT_EPROTO);
  /* An evicted holder that is not a string, a wrong length, a bad code. */
  b.el[3].type = REDIS_REPLY_INTEGER;
  cr_assert_eq(rt__parse_evict(&b.top, &a), RT_EPROTO);
  cr_assert_eq(rt__parse_evict(INTS(&b, 1, 1000, 0), &a), RT_EPROTO);
  cr_assert_eq(rt__parse_evict(INTS(&b, 3, 1000, 0), &a), RT_EPROTO);
  cr_assert_eq(rt__parse_evict(INTS(&b, -1, 1000, 0), &a), RT_EPROTO);
}

Test(reply, a_server_that_takes_no_writes_is_told_apart) {
  static const char *const yes[] = {
      "READONLY You can't write against a read only replica.",
      "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is "
      "set to 'no'.",
      "LOADING Redis is loading the dataset in memory",
      "ERR Error running script (call to f_0): @user_script:1: @user_script: "
      "1: -READONLY You can't write against a read only replica."};
  static const char *const no[] = {"ERR unknown command", "NOSCRIPT No script",
                                   "WRONGTYPE Operation against a key",
                                   "ERR value is not LOADING"};
  for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
    cr_assert_eq(rt__reply_not_master(yes[i], strlen(yes[i])), 1, "%s", yes[i]);
    cr_assert_eq(rt__reply_error(yes[i], strlen(yes[i])), RT_EREADONLY);
  }
  for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
    cr_assert_eq(rt__reply_not_master(no[i], strlen(no[i])), 0, "%s", no[i]);
}

/* A pool_inspect answer: 2 holders, 1 waiter, each column in place. */
typedef struct pool_built {
  redisReply top, el[14], col[8], cell[8][2];
  redisReply *ptr[14], *colptr[8][2];
} pool_built;

static void cell(redisReply *r, int type, const char *s, long long v) {
  r->type = type;
  r->str = (char *)s;
  r->len = s != NULL ? strlen(s) : 0;
  r->integer = v;
}

Test(reply, pool_inspect_reads_holders_and_waiters_by_column_name) {
  static const int types[8] = {REDIS_REPLY_STRING,  REDIS_REPLY_INTEGER,
                               REDIS_REPLY_INTEGER, REDIS_REPLY_INTEGER,
                               REDIS_REPLY_STRING,  REDIS_REPLY_STRING,
                               REDIS_REPLY_INTEGER, REDIS_REPLY_STRING};
  static const char *const strs[8][2] = {{"a:1", "b:2"}, {0},     {0}, {0},
                                         {"la", "lb"},   {"c:3"}, {0}, {"lc"}};
  static const long long nums[8][2] = {{0}, {1, 2}, {7, 8}, {900, 950},
                                       {0}, {0},    {3},    {0}};
  static const long long heads[6] = {100, 0, 4, 3, 8, 1}; /* [1]: kind */
  pool_built b;
  rt__answer a;
  memset(&b, 0, sizeof(b));
  b.top.type = REDIS_REPLY_ARRAY;
  b.top.elements = 14;
  b.top.element = b.ptr;
  for (size_t i = 0; i < 14; i++)
    b.ptr[i] = &b.el[i];
  for (size_t i = 0; i < 6; i++)
    cell(&b.el[i], REDIS_REPLY_INTEGER, NULL, heads[i]);
  cell(&b.el[1], REDIS_REPLY_STRING, "s:4", 0);
  for (size_t c = 0; c < 8; c++) {
    size_t n = c < 5 ? 2 : 1;
    b.el[6 + c].type = REDIS_REPLY_ARRAY;
    b.el[6 + c].elements = n;
    b.el[6 + c].element = b.colptr[c];
    for (size_t i = 0; i < n; i++) {
      cell(&b.cell[c][i], types[c], strs[c][i], nums[c][i]);
      b.colptr[c][i] = &b.cell[c][i];
    }
  }
  cr_assert_eq(rt__parse_pool_inspect(&b.top, &a), 0);
  const rt__pool_inspect *in = &a.u.pool_inspect;
  cr_assert_eq(a.now_ms, 100);
  cr_assert_str_eq(in->kind->str, "s:4");
  cr_assert_eq(in->capacity, 4);
  cr_assert_eq(in->used, 3);
  cr_assert_eq(in->fence, 8);
  cr_assert_eq(in->nholders, 2);
  cr_assert_eq(in->nentries, 1);
  cr_assert_str_eq(in->holders.ids[1]->str, "b:2");
  cr_assert_eq(in->holders.permits[1]->integer, 2);
  cr_assert_eq(in->holders.fences[0]->integer, 7);
  cr_assert_eq(in->holders.deadlines[0]->integer, 900);
  cr_assert_str_eq(in->holders.labels[1]->str, "lb");
  cr_assert_str_eq(in->waiters.ids[0]->str, "c:3");
  cr_assert_eq(in->waiters.permits[0]->integer, 3);
  cr_assert_str_eq(in->waiters.labels[0]->str, "lc");

  /* A column of the wrong type, or fewer live waiters than listed. */
  b.cell[2][1].type = REDIS_REPLY_STRING;
  cr_assert_eq(rt__parse_pool_inspect(&b.top, &a), RT_EPROTO);
  b.cell[2][1].type = REDIS_REPLY_INTEGER;
  b.el[5].integer = 0;
  cr_assert_eq(rt__parse_pool_inspect(&b.top, &a), RT_EPROTO);
}
