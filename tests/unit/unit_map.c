/* The byte-keyed hash map, checked against a plain array that records
 * which keys are present, through long random runs of puts and deletes. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

static uint64_t rng_state = 0x2545f4914f6cdd1du;
static uint64_t rng(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

/* One possible key: its bytes (binary, may hold NULs, may be empty) and,
 * in the reference, whether it is in the map and with which value. */
struct ref {
  unsigned char key[12];
  size_t klen;
  int present;
  int value; /* the map stores &value */
};

#define NKEYS 4000
static struct ref refs[NKEYS];

static void make_keys(void) {
  size_t i, j;

  /* Index i's bytes encode i, so keys are distinct; the padding is NUL or
   * a few bytes, so many keys differ only after a NUL or in length. */
  for (i = 0; i < NKEYS; i++) {
    struct ref *r = &refs[i];
    memset(r, 0, sizeof(*r));
    r->klen = 2 + i % 9;
    r->key[0] = (unsigned char)(i & 0xff);
    r->key[1] = (unsigned char)(i >> 8);
    for (j = 2; j < r->klen; j++)
      r->key[j] = (unsigned char)((i / 7 + j) % 3 == 0 ? 0 : j);
  }
}

static void check_all(const rt__map *m) {
  size_t i, live = 0, pos = 0, seen = 0;
  void *v;

  for (i = 0; i < NKEYS; i++) {
    void *got = rt__map_get(m, refs[i].key, refs[i].klen);
    if (refs[i].present) {
      live++;
      cr_assert_eq(got, &refs[i].value, "key %zu", i);
    } else {
      cr_assert_null(got, "key %zu should be absent", i);
    }
  }
  cr_assert_eq(m->len, live);
  while ((v = rt__map_next(m, &pos)) != NULL) {
    struct ref *r = rt__container_of(v, struct ref, value);
    cr_assert(r->present);
    seen++;
  }
  cr_assert_eq(seen, live, "iteration saw %zu of %zu", seen, live);
}

Test(map, empty_map_finds_nothing) {
  rt__map m;
  size_t pos = 0;

  rt__map_init(&m);
  cr_assert_null(rt__map_get(&m, "a", 1));
  cr_assert_null(rt__map_del(&m, "a", 1));
  cr_assert_null(rt__map_next(&m, &pos));
  rt__map_free(&m);
  rt__map_free(&m);
}

Test(map, agrees_with_a_reference_over_random_puts_and_deletes) {
  rt__map m;
  size_t op, inserts = 0, dels = 0;

  make_keys();
  rt__map_init(&m);
  for (op = 0; op < 600000; op++) {
    size_t i = (size_t)(rng() % NKEYS);
    struct ref *r = &refs[i];
    /* Drift between mostly-inserting and mostly-deleting phases, so the
     * table both grows and carries many tombstones. */
    int insert_pct = (op / 20000) % 2 ? 70 : 30;

    if ((int)(rng() % 100) < insert_pct) {
      r->value = (int)op;
      cr_assert_eq(rt__map_put(&m, r->key, r->klen, &r->value), 0);
      inserts += !r->present;
      r->present = 1;
    } else {
      void *got = rt__map_del(&m, r->key, r->klen);
      cr_assert_eq(got, r->present ? &r->value : NULL, "del of key %zu", i);
      dels += r->present;
      r->present = 0;
    }
    cr_assert_leq(m.used * 10, m.cap * 7);
    cr_assert_leq(m.len, m.used);
    if (op % 20011 == 0)
      check_all(&m);
  }
  check_all(&m);
  cr_assert_gt(inserts, 100000, "only %zu inserts", inserts);
  cr_assert_gt(dels, 100000, "only %zu deletes", dels);
  rt__map_free(&m);
}

Test(map, binary_keys_differing_after_a_nul_or_in_length_are_distinct) {
  static const struct {
    const char *k;
    size_t len;
  } keys[] = {{"a", 1},    {"a\0", 2},  {"a\0b", 3},  {"a\0c", 3},
              {"\0", 1},   {"\0\0", 2}, {"", 0},      {"ab", 2},
              {"b\0a", 3}, {"\xff", 1}, {"a\0b\0", 4}};
  const size_t n = sizeof(keys) / sizeof(keys[0]);
  int values[sizeof(keys) / sizeof(keys[0])];
  rt__map m;
  size_t i;

  rt__map_init(&m);
  for (i = 0; i < n; i++)
    cr_assert_eq(rt__map_put(&m, keys[i].k, keys[i].len, &values[i]), 0);
  cr_assert_eq(m.len, n);
  for (i = 0; i < n; i++)
    cr_assert_eq(rt__map_get(&m, keys[i].k, keys[i].len), &values[i]);
  /* The same bytes at another address find the same entry. */
  {
    char copy[] = {'a', '\0', 'c'};
    cr_assert_eq(rt__map_get(&m, copy, 3), &values[3]);
  }
  cr_assert_eq(rt__map_del(&m, "a\0b", 3), &values[2]);
  cr_assert_null(rt__map_get(&m, "a\0b", 3));
  cr_assert_eq(rt__map_get(&m, "a\0", 2), &values[1]);
  cr_assert_eq(rt__map_get(&m, "a\0c", 3), &values[3]);
  rt__map_free(&m);
}

Test(map, empty_key_works_even_with_a_null_pointer) {
  rt__map m;
  int v1, v2;
  size_t pos = 0;

  rt__map_init(&m);
  cr_assert_eq(rt__map_put(&m, NULL, 0, &v1), 0);
  cr_assert_eq(rt__map_get(&m, "", 0), &v1);
  cr_assert_eq(rt__map_put(&m, "", 0, &v2), 0);
  cr_assert_eq(m.len, 1);
  cr_assert_eq(rt__map_get(&m, NULL, 0), &v2);
  cr_assert_eq(rt__map_next(&m, &pos), &v2);
  cr_assert_eq(rt__map_del(&m, NULL, 0), &v2);
  cr_assert_eq(m.len, 0);
  rt__map_free(&m);
}

Test(map, replacing_a_value_adopts_the_new_key_memory) {
  rt__map m;
  char *k1 = malloc(4), *k2 = malloc(4);
  int v1, v2;

  memcpy(k1, "key", 4);
  memcpy(k2, "key", 4);
  rt__map_init(&m);
  cr_assert_eq(rt__map_put(&m, k1, 3, &v1), 0);
  cr_assert_eq(rt__map_put(&m, k2, 3, &v2), 0);
  cr_assert_eq(m.len, 1);
  /* The old value owned k1; once it is gone the entry must not use it. */
  free(k1);
  cr_assert_eq(rt__map_get(&m, "key", 3), &v2);
  cr_assert_eq(rt__map_del(&m, "key", 3), &v2);
  free(k2);
  rt__map_free(&m);
}

Test(map, queue_like_churn_does_not_grow_the_table) {
  static char keys[100000][8];
  int value = 0;
  rt__map m;
  size_t i;

  rt__map_init(&m);
  for (i = 0; i < 100000; i++) {
    memcpy(keys[i], &i, sizeof(i) < 8 ? sizeof(i) : 8);
    cr_assert_eq(rt__map_put(&m, keys[i], 8, &value), 0);
    if (i >= 10)
      cr_assert_eq(rt__map_del(&m, keys[i - 10], 8), &value);
    cr_assert_leq(m.len, 11);
  }
  cr_assert_eq(m.len, 10);
  cr_assert_leq(m.cap, 64, "cap %zu after churn", m.cap);
  rt__map_free(&m);
}

Test(map, deleting_the_returned_entry_while_iterating_visits_each_once) {
  struct ref *r;
  rt__map m;
  size_t i, pos = 0, visited = 0;
  void *v;

  make_keys();
  rt__map_init(&m);
  for (i = 0; i < 1000; i++) {
    refs[i].present = 1;
    cr_assert_eq(rt__map_put(&m, refs[i].key, refs[i].klen, &refs[i].value), 0);
  }
  /* present: 1 = not visited yet, 2 = visited and kept, 0 = deleted. */
  while ((v = rt__map_next(&m, &pos)) != NULL) {
    r = rt__container_of(v, struct ref, value);
    cr_assert_eq(r->present, 1, "entry visited twice or after deletion");
    visited++;
    if (visited % 2 == 0) {
      cr_assert_eq(rt__map_del(&m, r->key, r->klen), v);
      r->present = 0;
    } else {
      r->present = 2;
    }
  }
  cr_assert_eq(visited, 1000);
  cr_assert_eq(m.len, 500);
  for (i = 0; i < 1000; i++)
    refs[i].present = refs[i].present != 0;
  check_all(&m);
  rt__map_free(&m);
}
