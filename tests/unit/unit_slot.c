/* Redis Cluster key slots (CRC16/XMODEM of the hash tag) and the per-slot
 * channel tags. it_topology.c checks rt__key_slot against a real server's
 * CLUSTER KEYSLOT. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "rt_test.h"
#include "topology.h"

static int slot_of(const char *key) {
  char *k = rtt_exact(key, strlen(key));
  int slot = rt__key_slot(k, strlen(key));
  free(k);
  return slot;
}

Test(slot, crc16_is_xmodem) {
  cr_assert_eq(rt__crc16("123456789", 9), 0x31c3);
  cr_assert_eq(rt__crc16("", 0), 0);
}

Test(slot, keys_map_to_the_slots_redis_documents) {
  /* Values from the Redis Cluster specification and CLUSTER KEYSLOT. */
  cr_assert_eq(slot_of("foo"), 12182);
  cr_assert_eq(slot_of("bar"), 5061);
  cr_assert_eq(slot_of("somekey"), 11058);
  cr_assert_eq(slot_of("hello"), 866);
  cr_assert_eq(slot_of(""), 0);
}

Test(slot, the_first_non_empty_hash_tag_decides) {
  cr_assert_eq(slot_of("{user1000}.following"), slot_of("user1000"));
  cr_assert_eq(slot_of("{user1000}.followers"), slot_of("user1000"));
  cr_assert_eq(slot_of("rt:{job:42}:q"), slot_of("job:42"));
  /* An empty tag: the whole key. */
  cr_assert_eq(slot_of("foo{}{bar}"), rt__crc16("foo{}{bar}", 10) % 16384);
  /* Only the first '{' counts, up to the first '}' after it. */
  cr_assert_eq(slot_of("foo{{bar}}zap"), slot_of("{bar"));
  cr_assert_eq(slot_of("foo{bar}{zap}"), slot_of("bar"));
  /* No closing brace: the whole key. */
  cr_assert_eq(slot_of("a{b"), rt__crc16("a{b", 3) % 16384);
  cr_assert_eq(slot_of("}{"), rt__crc16("}{", 2) % 16384);
}

Test(slot, a_brace_at_the_very_end_reads_nothing_past_the_key) {
  cr_assert_eq(slot_of("{"), rt__crc16("{", 1) % 16384);
  cr_assert_eq(slot_of("abc{"), rt__crc16("abc{", 4) % 16384);
}

Test(slot, every_slot_has_a_printable_brace_free_tag_of_its_own) {
  char tag[RT__SLOT_TAG_LEN + 1];
  for (int slot = 0; slot < RT__SLOTS; slot++) {
    rt__slot_tag(slot, tag);
    cr_assert_eq(strlen(tag), RT__SLOT_TAG_LEN);
    for (int i = 0; i < RT__SLOT_TAG_LEN; i++)
      cr_assert(tag[i] >= '@' && tag[i] <= 'O', "slot %d tag %s", slot, tag);
    cr_assert_eq(rt__crc16(tag, RT__SLOT_TAG_LEN) % RT__SLOTS, (unsigned)slot,
                 "slot %d got tag %s", slot, tag);
  }
}

Test(slot, a_channel_with_the_tag_lives_in_the_resource_slot) {
  char tag[RT__SLOT_TAG_LEN + 1], channel[128];
  const char *key = "app:locks:{job:42}:q";
  int slot = slot_of(key);
  rt__slot_tag(slot, tag);
  snprintf(channel, sizeof(channel), "app:locks:{%s}:%032x", tag, 7);
  cr_assert_eq(slot_of(channel), slot);
}

Test(slot, the_same_slot_always_gives_the_same_tag) {
  char a[RT__SLOT_TAG_LEN + 1], b[RT__SLOT_TAG_LEN + 1];
  rt__slot_tag(4242, a);
  rt__slot_tag(4242, b);
  cr_assert_str_eq(a, b);
}
