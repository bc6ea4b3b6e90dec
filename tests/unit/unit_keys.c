/* Resource name to key mapping (injective, one hash tag per resource),
 * queue entries and the strict number parsers (the notices are
 * unit_notice_parse.c's). Inputs are
 * copied into buffers of their exact size, so reading past len is caught
 * by AddressSanitizer or valgrind. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "rt_test.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15u;
static uint64_t rng(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

/* ---- key base -------------------------------------------------------------- */

static void assert_key(const char *prefix, const char *name, size_t len,
                       const char *want, size_t want_len) {
  size_t out_len = 0;
  char *k = rt__key_base(prefix, strlen(prefix), name, len, &out_len);

  cr_assert_not_null(k);
  cr_assert_eq(out_len, want_len, "length %zu, want %zu", out_len, want_len);
  cr_assert_arr_eq(k, want, want_len);
  cr_assert_eq(k[out_len], '\0');
  free(k);
}

Test(keys, plain_names_map_to_prefix_tag_and_colon) {
  assert_key("rt", "foo", 3, "rt:{foo}:", 9);
  assert_key("app:locks", "job:42", 6, "app:locks:{job:42}:", 19);
}

Test(keys, percent_and_braces_are_escaped) {
  assert_key("rt", "a}", 2, "rt:{a%7D}:", 10);
  assert_key("rt", "{a}", 3, "rt:{%7Ba%7D}:", 13);
  assert_key("rt", "%7B", 3, "rt:{%257B}:", 11);
  assert_key("rt", "%", 1, "rt:{%25}:", 9);
}

Test(keys, nul_bytes_are_copied_as_they_are) {
  assert_key("rt", "a\0b", 3, "rt:{a\0b}:", 9);
  assert_key("rt", "\0", 1, "rt:{\0}:", 7);
}

Test(keys, buffer_has_room_to_append_a_suffix_in_place) {
  size_t len;
  char *k = rt__key_base("rt", 2, "x", 1, &len);

  cr_assert_not_null(k);
  k[len] = 'q';
  k[len + 1] = '\0';
  cr_assert_str_eq(k, "rt:{x}:q");
  free(k);
}

/* The hash tag Redis Cluster uses: the bytes between the first '{' and the
 * first '}' after it, if non-empty; otherwise the whole key. */
static void cluster_tag(const char *key, size_t len, const char **tag,
                        size_t *tag_len) {
  const char *open = memchr(key, '{', len), *close;

  *tag = key;
  *tag_len = len;
  if (open == NULL)
    return;
  close = memchr(open + 1, '}', len - (size_t)(open + 1 - key));
  if (close == NULL || close == open + 1)
    return;
  *tag = open + 1;
  *tag_len = (size_t)(close - open - 1);
}

struct pair {
  const char *name;
  size_t nlen;
  char *key;
  size_t klen;
};

static int cmp_key(const void *a, const void *b) {
  const struct pair *x = a, *y = b;
  size_t n = x->klen < y->klen ? x->klen : y->klen;
  int c = memcmp(x->key, y->key, n);
  if (c != 0)
    return c;
  return (x->klen > y->klen) - (x->klen < y->klen);
}

#define MAX_NAMES 12000
static struct pair pairs[MAX_NAMES];
static char pool[MAX_NAMES * 24];
static size_t npairs, pool_used;

static void add_name(const void *name, size_t len) {
  cr_assert_lt(npairs, MAX_NAMES);
  cr_assert_leq(pool_used + len, sizeof(pool));
  memcpy(pool + pool_used, name, len);
  pairs[npairs].name = pool + pool_used;
  pairs[npairs].nlen = len;
  pool_used += len;
  npairs++;
}

static void check_one(const char *prefix, const struct pair *p) {
  size_t plen = strlen(prefix), esc_len, tq_len, th_len, i, braces = 0;
  const char *tq, *th, *esc;
  char qkey[200], hkey[200], decoded[200];
  long n;

  /* "<prefix>:{" ... "}:" with the only braces being the tag's own. */
  cr_assert_gt(p->klen, plen + 4);
  cr_assert_arr_eq(p->key, prefix, plen);
  cr_assert_eq(p->key[plen], ':');
  cr_assert_eq(p->key[plen + 1], '{');
  cr_assert_eq(p->key[p->klen - 2], '}');
  cr_assert_eq(p->key[p->klen - 1], ':');
  for (i = 0; i < p->klen; i++)
    braces += p->key[i] == '{' || p->key[i] == '}';
  cr_assert_eq(braces, 2);
  esc = p->key + plen + 2;
  esc_len = p->klen - plen - 4;

  /* The q and h keys both hash by exactly the escaped name. */
  cr_assert_lt(p->klen + 1, sizeof(qkey));
  memcpy(qkey, p->key, p->klen);
  memcpy(hkey, p->key, p->klen);
  qkey[p->klen] = 'q';
  hkey[p->klen] = 'h';
  cluster_tag(qkey, p->klen + 1, &tq, &tq_len);
  cluster_tag(hkey, p->klen + 1, &th, &th_len);
  cr_assert_gt(tq_len, 0);
  cr_assert_eq(tq_len, esc_len);
  cr_assert_eq(th_len, esc_len);
  cr_assert_arr_eq(tq, esc, esc_len);
  cr_assert_arr_eq(th, esc, esc_len);

  n = rt__unescape_name(esc, esc_len, decoded);
  cr_assert_eq(n, (long)p->nlen);
  cr_assert_arr_eq(decoded, p->name, p->nlen);
}

static void check_mapping(const char *prefix) {
  size_t i;

  for (i = 0; i < npairs; i++) {
    pairs[i].key = rt__key_base(prefix, strlen(prefix), pairs[i].name,
                                pairs[i].nlen, &pairs[i].klen);
    cr_assert_not_null(pairs[i].key);
    check_one(prefix, &pairs[i]);
  }
  /* Sorted by key, equal neighbours must come from equal names. */
  qsort(pairs, npairs, sizeof(pairs[0]), cmp_key);
  for (i = 1; i < npairs; i++) {
    if (cmp_key(&pairs[i - 1], &pairs[i]) == 0) {
      cr_assert_eq(pairs[i - 1].nlen, pairs[i].nlen,
                   "two distinct names share a key base");
      cr_assert_arr_eq(pairs[i - 1].name, pairs[i].name, pairs[i].nlen,
                       "two distinct names share a key base");
    }
  }
  for (i = 0; i < npairs; i++)
    free(pairs[i].key);
}

static void generate_names(void) {
  static const char *const tricky[] = {
      "a}",  "}a",  "{",      "}",    "{}",    "}{",    "a:{b}:q",
      "%7B", "%7D", "%25",    "{a}",  "%",     "%%",    "%7",
      "a",   "aa",  "aaa",    "aaaa", "a:",    "a:q",   "a}:q",
      "q",   "h",   ":",      "::",   "{a}:h", "%257B", "%7B%7D",
      "rt:", "}:",  "rt:{x}", "%7b",  "%7d",   "{{",    "}}",
  };
  static const char interesting[] = {'%', '{', '}', '7',  'B', 'D',
                                     '2', '5', 'a', '\0', ':'};
  const size_t ni = sizeof(interesting);
  unsigned char buf[16];
  size_t i, j, k;

  npairs = pool_used = 0;
  for (i = 0; i < sizeof(tricky) / sizeof(tricky[0]); i++)
    add_name(tricky[i], strlen(tricky[i]));
  /* Names with embedded NULs and names that are prefixes of each other. */
  add_name("a\0", 2);
  add_name("a\0\0", 3);
  add_name("\0a", 2);
  add_name("\0\0", 2);
  add_name("a\0}", 3);
  add_name("a\0%7D", 5);
  for (i = 0; i < 256; i++) {
    buf[0] = (unsigned char)i;
    add_name(buf, 1);
  }
  for (i = 0; i < ni; i++)
    for (j = 0; j < ni; j++) {
      buf[0] = (unsigned char)interesting[i];
      buf[1] = (unsigned char)interesting[j];
      add_name(buf, 2);
      for (k = 0; k < ni; k++) {
        buf[2] = (unsigned char)interesting[k];
        add_name(buf, 3);
      }
    }
  /* Random strings, half drawn from the interesting bytes so that escape
   * look-alikes ("%7B" and friends) come up often. */
  while (npairs < MAX_NAMES) {
    size_t len = 1 + (size_t)(rng() % sizeof(buf));
    int any = rng() & 1;
    for (i = 0; i < len; i++)
      buf[i] =
          any ? (unsigned char)rng() : (unsigned char)interesting[rng() % ni];
    add_name(buf, len);
  }
}

Test(keys, mapping_is_injective_keeps_one_hash_tag_and_round_trips) {
  generate_names();
  check_mapping("rt");
  generate_names();
  check_mapping("app:locks:v1");
}

Test(keys, unescape_rejects_what_key_base_never_writes) {
  static const char *const bad[] = {"%",   "%2", "%26",  "%7b", "%7d",
                                    "{",   "}",  "%%25", "a%7", "%7C",
                                    "a{b", "x}", "%0",   "%2F"};
  char out[16];
  size_t i;

  for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    char *s = rtt_exact(bad[i], strlen(bad[i]));
    cr_assert_eq(rt__unescape_name(s, strlen(bad[i]), out), -1, "\"%s\"",
                 bad[i]);
    free(s);
  }
}

Test(keys, unescape_decodes_and_never_reads_past_len) {
  char out[16];
  char *s = rtt_exact("a%7B%25%7D", 10);

  cr_assert_eq(rt__unescape_name(s, 10, out), 4);
  cr_assert_arr_eq(out, "a{%}", 4);
  cr_assert_eq(rt__unescape_name(s, 0, out), 0);
  cr_assert_eq(rt__unescape_name(s, 1, out), 1);
  cr_assert_eq(rt__unescape_name(s, 3, out), -1); /* "a%7" cut short */
  free(s);
}

/* ---- entries ----------------------------------------------------------- */

#define ID "0123456789abcdef0123456789abcdef"

Test(entries, format_and_parse_round_trip) {
  static const uint64_t seqs[] = {0, 1, 42, UINT64_MAX};
  size_t i;

  for (i = 0; i < sizeof(seqs) / sizeof(seqs[0]); i++) {
    char buf[RT__ENTRY_MAX], id[RT__CLIENT_ID_LEN + 1];
    uint64_t seq = 7;
    size_t n = rt__entry_format(buf, ID, seqs[i]);
    char *s = rtt_exact(buf, n);

    cr_assert_eq(n, strlen(buf));
    cr_assert_lt(n, RT__ENTRY_MAX);
    cr_assert_eq(rt__entry_parse(s, n, id, &seq), 0, "%s", buf);
    cr_assert_str_eq(id, ID);
    cr_assert_eq(seq, seqs[i]);
    free(s);
  }
}

Test(entries, format_writes_the_documented_text) {
  char buf[RT__ENTRY_MAX];

  cr_assert_eq(rt__entry_format(buf, ID, 17), 35);
  cr_assert_str_eq(buf, ID ":17");
}

Test(entries, every_malformed_entry_is_rejected) {
  static const char *const bad[] = {
      "",
      ":",
      "::",
      ID,
      ID ":",
      ID "::5",
      ID ":1:2",
      ID ":1:",
      ID ":18446744073709551616",
      ID ":-1",
      ID ":+1",
      ID ": 1",
      ID ":1 ",
      ID ":1x",
      ID ":0x1",
      "0123456789abcdef0123456789abcde:1",   /* 31 chars */
      "0123456789abcdef0123456789abcdef0:1", /* 33 chars */
      "0123456789ABCDEF0123456789abcdef:1",  /* uppercase */
      "0123456789abcdeg0123456789abcdef:1",  /* not hex */
      ":" ID ":1",
      "1:5",
  };
  size_t i;

  for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    char id[RT__CLIENT_ID_LEN + 1] = "untouched";
    uint64_t seq = 7;
    size_t len = strlen(bad[i]);
    char *s = rtt_exact(bad[i], len);

    cr_assert_eq(rt__entry_parse(s, len, id, &seq), RT_EPROTO, "\"%s\"",
                 bad[i]);
    cr_assert_str_eq(id, "untouched");
    cr_assert_eq(seq, 7);
    free(s);
  }
}

Test(entries, embedded_nul_is_rejected) {
  static const char s[] = ID ":1\0";
  char id[RT__CLIENT_ID_LEN + 1];
  uint64_t seq;

  cr_assert_eq(rt__entry_parse(s, sizeof(s) - 1, id, &seq), RT_EPROTO);
}

Test(entries, parse_stops_at_len) {
  static const char full[] = ID ":1234";
  const size_t seq_at = strlen(ID ":");
  char id[RT__CLIENT_ID_LEN + 1];
  uint64_t seq;
  size_t k;

  /* Prefixes without a seq digit are incomplete; longer ones carry the seq
   * digits inside the prefix only. */
  for (k = 0; k < sizeof(full); k++) {
    char *s = rtt_exact(full, k);
    int err = rt__entry_parse(s, k, id, &seq);
    if (k <= seq_at) {
      cr_assert_eq(err, RT_EPROTO, "prefix of %zu bytes", k);
    } else {
      uint64_t want = 0;
      size_t d;
      cr_assert_eq(err, 0, "prefix of %zu bytes", k);
      for (d = seq_at; d < k; d++)
        want = want * 10 + (uint64_t)(full[d] - '0');
      cr_assert_eq(seq, want);
    }
    free(s);
  }
}

Test(entries, split_fields_takes_exactly_the_fields_asked_for) {
  const char *f[3];
  size_t fl[3];
  char *s = rtt_exact("a::bc", 5);

  cr_assert_eq(rt__split_fields(s, 5, f, fl, 3), 0);
  cr_assert_eq(f[0], s);
  cr_assert_eq(fl[0], 1);
  cr_assert_eq(fl[1], 0);
  cr_assert_eq(f[2], s + 3);
  cr_assert_eq(fl[2], 2);
  cr_assert_eq(rt__split_fields(s, 5, f, fl, 2), RT_EPROTO); /* one too many */
  cr_assert_eq(rt__split_fields(s, 2, f, fl, 3), RT_EPROTO); /* too few */
  free(s);
}

/* ---- numbers ----------------------------------------------------------- */

Test(numbers, u64_accepts_digits_only_without_overflow) {
  static const char *const bad[] = {"",
                                    "-1",
                                    "+1",
                                    " 1",
                                    "1 ",
                                    "1a",
                                    "0x10",
                                    "18446744073709551616",
                                    "99999999999999999999",
                                    "1.0",
                                    "-"};
  uint64_t v = 5;
  size_t i;

  cr_assert_eq(rt__parse_u64("0", 1, &v), 0);
  cr_assert_eq(v, 0);
  cr_assert_eq(rt__parse_u64("18446744073709551615", 20, &v), 0);
  cr_assert_eq(v, UINT64_MAX);
  cr_assert_eq(rt__parse_u64("0042", 4, &v), 0);
  cr_assert_eq(v, 42);
  cr_assert_eq(rt__parse_u64("123", 2, &v), 0);
  cr_assert_eq(v, 12);
  for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    char *s = rtt_exact(bad[i], strlen(bad[i]));
    v = 5;
    cr_assert_eq(rt__parse_u64(s, strlen(bad[i]), &v), RT_EPROTO, "\"%s\"",
                 bad[i]);
    cr_assert_eq(v, 5);
    free(s);
  }
}

Test(numbers, i64_accepts_one_leading_minus_and_the_full_range) {
  static const char *const bad[] = {"",
                                    "-",
                                    "+1",
                                    "--1",
                                    " 1",
                                    "1 ",
                                    "-a",
                                    "1-",
                                    "- 1",
                                    "9223372036854775808",
                                    "-9223372036854775809",
                                    "-18446744073709551616"};
  int64_t v = 5;
  size_t i;

  cr_assert_eq(rt__parse_i64("-1", 2, &v), 0);
  cr_assert_eq(v, -1);
  cr_assert_eq(rt__parse_i64("-0", 2, &v), 0);
  cr_assert_eq(v, 0);
  cr_assert_eq(rt__parse_i64("9223372036854775807", 19, &v), 0);
  cr_assert_eq(v, INT64_MAX);
  cr_assert_eq(rt__parse_i64("-9223372036854775808", 20, &v), 0);
  cr_assert_eq(v, INT64_MIN);
  for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    char *s = rtt_exact(bad[i], strlen(bad[i]));
    v = 5;
    cr_assert_eq(rt__parse_i64(s, strlen(bad[i]), &v), RT_EPROTO, "\"%s\"",
                 bad[i]);
    cr_assert_eq(v, 5);
    free(s);
  }
}
