/* Resource names are arbitrary bytes: NUL, ':', '{', '}' and '%' included.
 * Every name gets its own queue, and all keys of a resource share one
 * Redis Cluster hash tag (so one slot). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_test.h"

RTT_SUITE(names);

typedef struct name {
  const char *bytes;
  size_t len;
} name;

#define N(s)                                                                   \
  { s, sizeof(s) - 1 }
static const name odd[] = {
    N("a"),    N("a\0"),  N("\0a"),   N("a\0b"),     N("a\0c"), N("\0"),
    N("\0\0"), N("a:b"),  N("a:b:q"), N(":"),        N("{"),    N("}"),
    N("{}"),   N("a}b{"), N("%7B"),   N("%7D"),      N("%"),    N("%25"),
    N("{a}"),  N("}:q"),  N("x}:h{"), N("\xff\xfe"),
};
#undef N
#define NODD (sizeof(odd) / sizeof(odd[0]))

/* The hash tag of a key by the Redis Cluster rules: the bytes between the
 * first '{' and the first '}' after it, if there are any. *len 0: none. */
static const char *hash_tag(const char *key, size_t klen, size_t *len) {
  const char *open = memchr(key, '{', klen);
  *len = 0;
  if (open == NULL)
    return NULL;
  const char *close = memchr(open + 1, '}', klen - (size_t)(open + 1 - key));
  if (close == NULL || close == open + 1)
    return NULL;
  *len = (size_t)(close - open - 1);
  return open + 1;
}

/* CRC16-CCITT (XMODEM), as Redis Cluster uses for key slots. */
static unsigned crc16(const char *s, size_t len) {
  unsigned crc = 0;
  for (size_t i = 0; i < len; i++) {
    crc ^= (unsigned)(unsigned char)s[i] << 8;
    for (int b = 0; b < 8; b++)
      crc =
          (crc & 0x8000) ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc;
}

static unsigned key_slot(const char *key, size_t klen) {
  size_t tl;
  const char *tag = hash_tag(key, klen, &tl);
  return tag != NULL ? crc16(tag, tl) % 16384 : crc16(key, klen) % 16384;
}

Test(names, crc16_matches_the_redis_cluster_reference) {
  /* Values from the Redis Cluster specification. */
  cr_assert_eq(crc16("123456789", 9), 0x31C3);
  cr_assert_eq(key_slot("{user1000}.following", 20),
               key_slot("{user1000}.followers", 20));
  cr_assert_eq(key_slot("foo{}{bar}", 10), crc16("foo{}{bar}", 10) % 16384);
}

Test(names, odd_names_each_get_their_own_queue_and_lock_at_once) {
  rtt_client a;
  rtt_req r[NODD];
  memset(r, 0, sizeof(r));
  rtt_open_ready(&a, &loop, NULL);
  for (size_t i = 0; i < NODD; i++)
    cr_assert_eq(
        rt_try_lock(a.c, odd[i].bytes, odd[i].len, 5000, rtt_lock_cb, &r[i]),
        0);
  for (size_t i = 0; i < NODD; i++) {
    cr_assert(rtt_run_until(&loop, &r[i].calls, 1, 5000));
    cr_assert_eq(r[i].status, 0, "try on name #%zu: %s", i,
                 rt_err_name(r[i].status));
    size_t len;
    const void *got = rt_lock_resource(r[i].lock, &len);
    cr_assert_eq(len, odd[i].len);
    cr_assert_arr_eq(got, odd[i].bytes, len);
    /* Its own queue, under the documented key. */
    char q[2][RTT_ID_MAX];
    cr_assert_eq(rtt_queue(rc, rtt_prefix(), odd[i].bytes, odd[i].len, q, 2), 1,
                 "name #%zu: not alone in its queue", i);
    cr_assert_str_eq(q[0], r[i].id);
  }
  cr_assert_eq(rt_client_locks(a.c, NULL, 0), NODD);

  /* Every key of ours, found by SCAN. Keys of a resource carry a hash tag
   * that ends right before ":<suffix>"; grouped by tag, each group holds the
   * resource's q and h (so they share one slot), one group per name. */
  char match[128];
  snprintf(match, sizeof(match), "%s:*", rtt_prefix());
  char cursor[32] = "0";
  struct group {
    char tag[64];
    size_t tl;
    int q, h;
    unsigned slot;
  } groups[NODD];
  size_t ngroups = 0;
  do {
    redisReply *sr = rtt_cmd(rc, "SCAN %s MATCH %s COUNT 1000", cursor, match);
    cr_assert_eq(sr->type, REDIS_REPLY_ARRAY);
    snprintf(cursor, sizeof(cursor), "%s", sr->element[0]->str);
    redisReply *keys = sr->element[1];
    for (size_t k = 0; k < keys->elements; k++) {
      const char *key = keys->element[k]->str;
      size_t kl = keys->element[k]->len;
      if (memchr(key, '{', kl) == NULL)
        continue; /* not a resource key */
      size_t tl;
      const char *tag = hash_tag(key, kl, &tl);
      cr_assert_not_null(tag, "key %.*s has no non-empty hash tag", (int)kl,
                         key);
      cr_assert(kl >= 2 && tag + tl + 1 == key + kl - 2 && key[kl - 2] == ':',
                "key %.*s: the hash tag does not run up to its suffix", (int)kl,
                key);
      cr_assert_lt(tl, sizeof(groups[0].tag));
      size_t g;
      for (g = 0; g < ngroups; g++)
        if (groups[g].tl == tl && memcmp(groups[g].tag, tag, tl) == 0)
          break;
      if (g == ngroups) {
        cr_assert_lt(ngroups, NODD, "more resources than names");
        memset(&groups[g], 0, sizeof(groups[g]));
        memcpy(groups[g].tag, tag, tl);
        groups[g].tl = tl;
        groups[g].slot = key_slot(key, kl);
        ngroups++;
      }
      cr_assert_eq(key_slot(key, kl), groups[g].slot);
      if (key[kl - 1] == 'q')
        groups[g].q++;
      else if (key[kl - 1] == 'h')
        groups[g].h++;
    }
    freeReplyObject(sr);
  } while (strcmp(cursor, "0") != 0);
  cr_assert_eq(ngroups, NODD, "%zu resources for %zu names", ngroups, NODD);
  for (size_t g = 0; g < ngroups; g++)
    /* Held at once: a holder key and no queue. */
    cr_assert(groups[g].q == 0 && groups[g].h == 1,
              "tag %.*s: %d q and %d h keys", (int)groups[g].tl, groups[g].tag,
              groups[g].q, groups[g].h);

  for (size_t i = 0; i < NODD; i++)
    rtt_release(&loop, &r[i], 0);
  rtt_close(&a);
  rtt_loop_finish(&loop);
}

Test(names, a_held_name_does_not_block_its_look_alikes) {
  static const name pairs[][2] = {
      {{"a\0b", 3}, {"a\0c", 3}}, {{"a", 1}, {"a\0", 2}},
      {{"%7B", 3}, {"{", 1}},     {{"%7D", 3}, {"}", 1}},
      {{"a:b", 3}, {"a", 1}},     {{"}", 1}, {"{", 1}},
  };
  rtt_client a, b;
  rtt_open_ready(&a, &loop, NULL);
  rtt_open_ready(&b, &loop, NULL);
  for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
    rtt_req held = {0}, other = {0};
    cr_assert_eq(rtt_wait_n(a.c, pairs[i][0].bytes, pairs[i][0].len, 5000,
                            RT_FOREVER, &held),
                 0);
    cr_assert(rtt_run_until(&loop, &held.calls, 1, 5000));
    cr_assert_eq(held.status, 0);
    /* Another client waits on the look-alike: granted at once. */
    cr_assert_eq(
        rtt_wait_n(b.c, pairs[i][1].bytes, pairs[i][1].len, 5000, 1000, &other),
        0);
    cr_assert(rtt_run_until(&loop, &other.calls, 1, 5000));
    cr_assert_eq(other.status, 0, "pair %zu: %s", i, rt_err_name(other.status));
    cr_assert_eq(other.position, 0);
    rtt_release(&loop, &other, 0);
    rtt_release(&loop, &held, 0);
  }
  rtt_close(&a);
  rtt_close(&b);
  rtt_loop_finish(&loop);
}

Test(names, a_name_of_rt_name_max_escaped_bytes_works) {
  char *big = malloc(RT_NAME_MAX);
  cr_assert_not_null(big);
  for (size_t i = 0; i < RT_NAME_MAX; i++)
    big[i] = "{}%\0"[i % 4];
  rtt_client a;
  rtt_req r = {0};
  rtt_open_ready(&a, &loop, NULL);
  cr_assert_eq(rtt_wait_n(a.c, big, RT_NAME_MAX, 5000, RT_FOREVER, &r), 0);
  cr_assert(rtt_run_until(&loop, &r.calls, 1, 5000));
  cr_assert_eq(r.status, 0, "%s", rt_err_name(r.status));
  cr_assert_eq(rtt_qlen(rc, rtt_prefix(), big, RT_NAME_MAX), 1);
  size_t len;
  const void *got = rt_lock_resource(r.lock, &len);
  cr_assert_eq(len, RT_NAME_MAX);
  cr_assert_arr_eq(got, big, RT_NAME_MAX);
  rtt_release(&loop, &r, 0);
  cr_assert_eq(rtt_qlen(rc, rtt_prefix(), big, RT_NAME_MAX), 0);
  rtt_close(&a);
  rtt_loop_finish(&loop);
  free(big);
}
