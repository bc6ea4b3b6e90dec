/* Key slots and per-slot channel tags: see topology.h. */
#include <string.h>

#include "topology.h"

uint16_t rt__crc16(const void *p, size_t len) {
  const unsigned char *b = p;
  unsigned crc = 0;

  for (size_t i = 0; i < len; i++) {
    crc ^= (unsigned)b[i] << 8;
    for (int bit = 0; bit < 8; bit++)
      crc = crc & 0x8000u ? (crc << 1) ^ 0x1021u : crc << 1;
    crc &= 0xffffu;
  }
  return (uint16_t)crc;
}

int rt__key_slot(const void *key, size_t len) {
  const char *k = key;
  const char *open = len > 0 ? memchr(k, '{', len) : NULL;

  if (open != NULL) {
    size_t after = (size_t)(open - k) + 1;
    const char *close = memchr(open + 1, '}', len - after);
    if (close != NULL && close > open + 1)
      return rt__crc16(open + 1, (size_t)(close - open - 1)) % RT__SLOTS;
  }
  return rt__crc16(k, len) % RT__SLOTS;
}

/* A tag is RT__SLOT_TAG_LEN bytes 0x40 | v, v's 4 bits free: 16 free bits.
 * CRC16/XMODEM is linear over messages of one length (crc(a ^ b) =
 * crc(a) ^ crc(b)), so the slot of a tag is the slot of "@@@@" xor a
 * linear map of the free bits, whose 14 slot bits have full rank (checked
 * for every slot by tests/unit/unit_slot.c). Solving that small linear system
 * per call finds the tag of any slot with no table and no state. */
#define TAG_BASE 0x40
#define TAG_BITS (4 * RT__SLOT_TAG_LEN)

static void tag_bytes(unsigned bits, char out[RT__SLOT_TAG_LEN]) {
  for (int i = 0; i < RT__SLOT_TAG_LEN; i++)
    out[i] = (char)(TAG_BASE | ((bits >> (4 * i)) & 0xfu));
}

static unsigned tag_slot(unsigned bits) {
  char t[RT__SLOT_TAG_LEN];
  tag_bytes(bits, t);
  return rt__crc16(t, sizeof(t)) % RT__SLOTS;
}

void rt__slot_tag(int slot, char out[RT__SLOT_TAG_LEN + 1]) {
  /* Gaussian elimination over GF(2): vec[i] is the slot change of the
   * combination of free bits comb[i]; at most one vector per pivot bit. */
  unsigned vec[14] = {0}, comb[14] = {0};
  unsigned base = tag_slot(0);

  for (int b = 0; b < TAG_BITS; b++) {
    unsigned v = tag_slot(1u << b) ^ base, c = 1u << b;
    for (int p = 13; p >= 0 && v != 0; p--) {
      if (!(v >> p & 1u))
        continue;
      if (vec[p] == 0) {
        vec[p] = v;
        comb[p] = c;
        break;
      }
      v ^= vec[p];
      c ^= comb[p];
    }
  }
  unsigned want = ((unsigned)slot % RT__SLOTS) ^ base, bits = 0;
  for (int p = 13; p >= 0; p--) {
    if (want >> p & 1u) {
      want ^= vec[p];
      bits ^= comb[p];
    }
  }
  tag_bytes(bits, out);
  out[RT__SLOT_TAG_LEN] = '\0';
}
