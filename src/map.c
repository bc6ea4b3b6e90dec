/* Hash map from byte strings to pointers: open addressing with linear
 * probing over a power-of-two table. Deleted slots become tombstones so
 * probe chains stay intact; a rehash (which also drops the tombstones)
 * happens when live entries plus tombstones reach 70% of the table. */
#include <string.h>

#include "common.h"

/* Private sentinels: their addresses can never be a caller's key. */
static const char map_tomb;
static const char map_empty_key;
#define RT__MAP_TOMB ((const void *)&map_tomb)

#define MAP_MIN_CAP 8

static uint32_t hash_bytes(const void *key, size_t len) {
  /* 64-bit FNV-1a: simple, no alignment needs, fine for short names. */
  const unsigned char *p = key;
  uint64_t h = 14695981039346656037u;
  size_t i;

  for (i = 0; i < len; i++) {
    h ^= p[i];
    h *= 1099511628211u;
  }
  /* FNV's low bits mix poorly and the table indexes by low bits; fold the
   * high half in. */
  return (uint32_t)(h ^ (h >> 32));
}

static int is_live(const rt__map_slot *s) {
  return s->key != NULL && s->key != RT__MAP_TOMB;
}

void rt__map_init(rt__map *m) { memset(m, 0, sizeof(*m)); }

void rt__map_free(rt__map *m) {
  rt__free(m->slots);
  rt__map_init(m);
}

/* Index of the live slot holding key, or SIZE_MAX. */
static size_t find(const rt__map *m, const void *key, size_t klen,
                   uint32_t hash) {
  size_t mask, i;

  if (m->cap == 0)
    return SIZE_MAX;
  mask = m->cap - 1;
  /* The load limit guarantees an empty slot, so the loop ends. */
  for (i = (size_t)hash & mask;; i = (i + 1) & mask) {
    const rt__map_slot *s = &m->slots[i];
    if (s->key == NULL)
      return SIZE_MAX;
    if (s->key != RT__MAP_TOMB && s->hash == hash && s->klen == klen &&
        (klen == 0 || memcmp(s->key, key, klen) == 0))
      return i;
  }
}

/* Move every live entry into a fresh table sized so that it is at most
 * half full after the next insert; this may also shrink the table. */
static int rehash(rt__map *m) {
  rt__map_slot *slots;
  size_t cap = MAP_MIN_CAP, i;

  while ((m->len + 1) * 2 > cap) {
    if (cap > SIZE_MAX / 2 / sizeof(*slots))
      return RT_ENOMEM;
    cap *= 2;
  }
  slots = rt__calloc(cap, sizeof(*slots));
  if (slots == NULL)
    return RT_ENOMEM;
  for (i = 0; i < m->cap; i++) {
    const rt__map_slot *s = &m->slots[i];
    size_t j;
    if (!is_live(s))
      continue;
    for (j = (size_t)s->hash & (cap - 1); slots[j].key != NULL;
         j = (j + 1) & (cap - 1))
      ;
    slots[j] = *s;
  }
  rt__free(m->slots);
  m->slots = slots;
  m->cap = cap;
  m->used = m->len;
  return 0;
}

void *rt__map_get(const rt__map *m, const void *key, size_t klen) {
  size_t i = find(m, key, klen, hash_bytes(key, klen));
  return i == SIZE_MAX ? NULL : m->slots[i].value;
}

int rt__map_put(rt__map *m, const void *key, size_t klen, void *value) {
  uint32_t hash = hash_bytes(key, klen);
  size_t i, mask;

  if (klen > UINT32_MAX)
    return RT_EINVAL;
  i = find(m, key, klen, hash);
  if (i != SIZE_MAX) {
    /* The new value may carry its own copy of the key while the old one
     * is about to be freed: keep the caller's latest key pointer. */
    if (key != NULL)
      m->slots[i].key = key;
    m->slots[i].value = value;
    return 0;
  }
  if (m->cap == 0 || (m->used + 1) * 10 > m->cap * 7) {
    int err = rehash(m);
    if (err != 0)
      return err;
  }
  /* A NULL key would read as an empty slot; an empty key needs no bytes,
   * so any private non-NULL address stands in for it. */
  if (key == NULL)
    key = &map_empty_key;
  mask = m->cap - 1;
  for (i = (size_t)hash & mask; is_live(&m->slots[i]); i = (i + 1) & mask)
    ;
  if (m->slots[i].key == NULL)
    m->used++;
  m->slots[i].key = key;
  m->slots[i].klen = (uint32_t)klen;
  m->slots[i].hash = hash;
  m->slots[i].value = value;
  m->len++;
  return 0;
}

void *rt__map_del(rt__map *m, const void *key, size_t klen) {
  size_t i, mask;
  void *value;

  i = find(m, key, klen, hash_bytes(key, klen));
  if (i == SIZE_MAX)
    return NULL;
  value = m->slots[i].value;
  m->slots[i].key = RT__MAP_TOMB;
  m->slots[i].value = NULL;
  m->len--;
  /* A tombstone just before an empty slot ends no probe chain that the
   * empty slot would not end too, so such a run can be emptied. This
   * keeps tables with queue-like churn from filling with tombstones. */
  mask = m->cap - 1;
  if (m->slots[(i + 1) & mask].key == NULL) {
    while (m->slots[i].key == RT__MAP_TOMB) {
      m->slots[i].key = NULL;
      m->used--;
      i = (i - 1) & mask;
    }
  }
  return value;
}

void *rt__map_next(const rt__map *m, size_t *pos) {
  size_t i;

  for (i = *pos; i < m->cap; i++) {
    if (is_live(&m->slots[i])) {
      *pos = i + 1;
      return m->slots[i].value;
    }
  }
  *pos = m->cap;
  return NULL;
}
