/* libFuzzer target for everything the client parses from Redis:
 *
 *  - the input is fed to hiredis's reply reader; every reply it yields (and,
 *    recursively, every element) goes through rt__reply_ints (with each
 *    min/max the client uses), every script's answer parser
 *    (rt__parse_*), rt__reply_is_noscript and
 *    rt__reply_error, the cluster slot map and Sentinel reply parsers
 *    (src/topology.h), and every string in it through the notice, entry,
 *    redirect and +switch-master parsers (a pub/sub "smessage" array carries
 *    the notice as its third element);
 *  - the raw bytes also go straight to rt__notice_parse, rt__entry_parse,
 *    rt__reply_error, the number parsers and rt__unescape_name (exact-size
 *    copies, so reading past the end is caught).
 *
 * Build: cmake -DREDTURN_FUZZ=ON -DCMAKE_C_COMPILER=clang; run:
 *   fuzz_reply -max_total_time=30 NEW_DIR tests/fuzz/corpus
 * (libFuzzer writes new inputs to the first directory). */
#include <hiredis/hiredis.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "reply.h"
#include "topology.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Bytes parsed as a notice, an entry, an error text, numbers, a name. */
static void parse_text(const char *s, size_t len) {
  rt__notice n;
  char cid[RT__CLIENT_ID_LEN + 1];
  uint64_t u;
  int64_t i;
  if (rt__notice_parse(s, len, &n) == 0) {
    /* What the parser promises. */
    if (n.kind != 'g' && n.kind != 'l' && n.kind != 'n' && n.kind != 'o')
      abort();
    if (n.kind == 'g' && (n.fence == 0 || n.lease_ms < 0 || n.deadline_ms < 0))
      abort();
    if (n.kind == 'o' && (n.deadline_ms < 0 || n.leader_len >= RT__ENTRY_MAX ||
                          n.value_len > RT_VALUE_MAX || n.leader < s ||
                          n.leader + n.leader_len > s + len || n.value < s ||
                          n.value + n.value_len != s + len))
      abort();
  }
  if (rt__entry_parse(s, len, cid, &u) == 0) {
    if (strlen(cid) != RT__CLIENT_ID_LEN)
      abort();
  }
  int e = rt__reply_error(s, len);
  if (e != RT_EWRONGTYPE && e != RT_ENOPERM && e != RT_EAUTH &&
      e != RT_EREDIS && e != RT_EKIND && e != RT_EREADONLY)
    abort();
  rt__parse_u64(s, len, &u);
  rt__parse_i64(s, len, &i);
  rt__redirect rd;
  if (rt__redirect_parse(s, len, &rd) == 0 &&
      (rd.kind == RT__REDIRECT_MOVED || rd.kind == RT__REDIRECT_ASK) &&
      (rd.slot < 0 || rd.slot >= RT__SLOTS || rd.port < 1 || rd.port > 65535 ||
       rd.host + rd.host_len > s + len))
    abort();
  rt__switch_master sw;
  if (rt__switch_master_parse(s, len, &sw) == 0 &&
      (sw.name_len == 0 || sw.host + sw.host_len > s + len || sw.port < 1))
    abort();
  if (rt__key_slot(s, len) >= RT__SLOTS)
    abort();
  char *out = malloc(len + 1);
  if (out != NULL) {
    long k = rt__unescape_name(s, len, out);
    if (k > (long)len)
      abort();
    free(out);
  }
}

/* Slot maps and Sentinel replies: what the parsers promise. */
static void check_topology(const redisReply *r) {
  rt__slot_map m;
  for (int shards = 0; shards < 2; shards++) {
    int err = shards ? rt__slot_map_from_shards(r, &m)
                     : rt__slot_map_from_slots(r, &m);
    for (size_t k = 0; err == 0 && k < m.n; k++) {
      const rt__slot_range *g = &m.ranges[k];
      if (g->first > g->last || g->last >= RT__SLOTS ||
          (k > 0 && g->first <= m.ranges[k - 1].last) ||
          rt__slot_map_find(&m, g->first) != g || g->primary.host == NULL)
        abort();
    }
    if (err == 0)
      rt__slot_map_free(&m);
  }
  rt__node_addr a, *peers;
  size_t n;
  if (rt__sentinel_master_addr(r, &a) == 0) {
    if (a.port < 1 || a.host == NULL)
      abort();
    rt__free(a.host);
  }
  if (rt__sentinel_peers(r, &peers, &n) == 0)
    rt__node_addrs_free(peers, n);
}

static void check_reply(const redisReply *r, int depth) {
  static const size_t bounds[][2] = {{3, 4}, {1, 1}, {1, 3},
                                     {2, 4}, {1, 2}, {0, 8}};
  long long v[8];
  for (size_t k = 0; k < sizeof(bounds) / sizeof(bounds[0]); k++) {
    int n = rt__reply_ints(r, v, bounds[k][0], bounds[k][1]);
    if (n >= 0 && ((size_t)n < bounds[k][0] || (size_t)n > bounds[k][1]))
      abort();
  }
  /* Every script's answer: what the parser promises. */
  rt__answer a;
  if (rt__parse_enqueue(r, &a) == 0 &&
      ((a.u.enqueue.code != RT__ENQUEUE_QUEUED &&
        a.u.enqueue.code != RT__ENQUEUE_GRANTED) ||
       (a.u.enqueue.code == RT__ENQUEUE_GRANTED &&
        (a.u.enqueue.grant.fence == 0 || a.u.enqueue.grant.lease_ms <= 0))))
    abort();
  if (rt__parse_try(r, &a) == 0 &&
      ((a.u.try.code != RT__TRY_BUSY && a.u.try.code != RT__TRY_GRANTED) ||
       (a.u.try.code == RT__TRY_GRANTED &&
        (a.u.try.grant.fence == 0 || a.u.try.grant.lease_ms <= 0))))
    abort();
  if (rt__parse_release(r, &a) == 0 &&
      a.u.release.code != RT__RELEASE_NOT_FOUND &&
      a.u.release.code != RT__RELEASE_RELEASED &&
      a.u.release.code != RT__RELEASE_CANCELED)
    abort();
  if (rt__parse_extend(r, &a) == 0 && a.u.extend.code != RT__EXTEND_NOT_HELD &&
      a.u.extend.code != RT__EXTEND_EXTENDED)
    abort();
  if (rt__parse_reap(r, &a) == 0 && a.u.reap.mine != RT__REAP_GONE &&
      a.u.reap.mine != RT__REAP_WAITING && a.u.reap.mine != RT__REAP_HOLDER)
    abort();
  if (rt__parse_evict(r, &a) == 0 && a.u.evict.code != RT__EVICT_NOBODY &&
      (a.u.evict.holder->type != REDIS_REPLY_STRING ||
       (a.u.evict.code == RT__EVICT_EVICTED &&
        (a.u.evict.next->len > 0) != (a.u.evict.fence > 0))))
    abort();
  if (rt__parse_inspect(r, &a) == 0) {
    const rt__inspect *in = &a.u.inspect;
    size_t total = 0;
    if (in->holder_label->type != REDIS_REPLY_STRING)
      abort();
    for (size_t k = 0; k < in->nentries; k++) {
      if (in->entries[k]->type != REDIS_REPLY_STRING ||
          in->labels[k]->type != REDIS_REPLY_STRING)
        abort();
      /* touch every entry and label */
      total += in->entries[k]->len + in->labels[k]->len;
    }
    (void)total;
  }
  (void)rt__reply_is_noscript(r);
  check_topology(r);
  if (r->type == REDIS_REPLY_ERROR || r->type == REDIS_REPLY_STRING ||
      r->type == REDIS_REPLY_STATUS)
    parse_text(r->str, r->len);
  if (r->type == REDIS_REPLY_ARRAY && depth < 8)
    for (size_t k = 0; k < r->elements; k++)
      if (r->element[k] != NULL)
        check_reply(r->element[k], depth + 1);
}

/* hiredis 0.14 allocates an array for the announced element count before
 * the elements arrive (and takes the count as an int): a huge count is a
 * hiredis allocation, not our parsing. Redis never sends us more than a
 * few elements; skip inputs announcing more than 4096. Any '*' counts, not
 * only one at a line start: hiredis skips the two bytes after a bulk
 * string without checking that they are CRLF. */
static int announces_huge_array(const uint8_t *d, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (d[i] != '*')
      continue;
    size_t j = i + 1;
    if (j < n && d[j] == '-')
      continue;
    unsigned long long v = 0;
    while (j < n && d[j] >= '0' && d[j] <= '9' && v <= 4096)
      v = v * 10 + (unsigned)(d[j++] - '0');
    if (v > 4096)
      return 1;
  }
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* Raw bytes, in an exact-size heap copy. */
  char *copy = malloc(size ? size : 1);
  if (copy == NULL)
    return 0;
  memcpy(copy, data, size);
  parse_text(copy, size);
  free(copy);

  if (announces_huge_array(data, size))
    return 0;
  redisReader *rd = redisReaderCreate();
  if (rd == NULL)
    return 0;
  /* Feed in two pieces, as replies arrive split across reads. */
  size_t half = size / 2;
  void *reply = NULL;
  if (redisReaderFeed(rd, (const char *)data, half) == REDIS_OK &&
      redisReaderFeed(rd, (const char *)data + half, size - half) == REDIS_OK) {
    while (redisReaderGetReply(rd, &reply) == REDIS_OK && reply != NULL) {
      check_reply(reply, 0);
      freeReplyObject(reply);
      reply = NULL;
    }
  }
  redisReaderFree(rd);
  return 0;
}
