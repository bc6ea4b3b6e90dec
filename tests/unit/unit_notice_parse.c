/* The notices the scripts publish (grants, next in line, evictions, an
 * election's leader): what parses and what is refused. Inputs are copied
 * into buffers of their exact size, so reading past len is caught by
 * AddressSanitizer or valgrind. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "rt_test.h"

static int parse_notice(const char *text, size_t len, rt__notice *n) {
  char *s = rtt_exact(text, len);
  int err = rt__notice_parse(s, len, n);
  free(s);
  return err;
}

Test(notices, grant_and_next_notices_parse) {
  rt__notice n;

  cr_assert_eq(parse_notice("g:1:2:3:4", 9, &n), 0);
  cr_assert_eq(n.kind, 'g');
  cr_assert_eq(n.seq, 1);
  cr_assert_eq(n.fence, 2);
  cr_assert_eq(n.lease_ms, 3);
  cr_assert_eq(n.deadline_ms, 4);

  cr_assert_eq(parse_notice("n:7:9", 5, &n), 0);
  cr_assert_eq(n.kind, 'n');
  cr_assert_eq(n.seq, 7);
  cr_assert_eq(n.deadline_ms, 9);
  cr_assert_eq(n.fence, 0);
  cr_assert_eq(n.lease_ms, 0);

  cr_assert_eq(parse_notice("l:7", 3, &n), 0);
  cr_assert_eq(n.kind, 'l');
  cr_assert_eq(n.seq, 7);

  cr_assert_eq(parse_notice("g:0:1:0:0", 9, &n), 0);
  cr_assert_eq(n.seq, 0);
  cr_assert_eq(n.fence, 1);
  cr_assert_eq(n.lease_ms, 0);
}

Test(notices, a_grant_names_its_resource_kind_and_escaped_name) {
  rt__notice n;
  static const char mutex[] = "g:1:2:3:4::{a:b%7D}";
  static const char sem[] = "g:5:6:7:8:s:3:{x}";

  /* The resource points into the text: parsed in place. */
  cr_assert_eq(rt__notice_parse(mutex, sizeof(mutex) - 1, &n), 0);
  cr_assert_eq(n.seq, 1);
  cr_assert_eq(n.deadline_ms, 4);
  cr_assert_eq(n.res_kind_len, 0);
  cr_assert_eq(n.res_esc_len, 6);
  cr_assert_eq(memcmp(n.res_esc, "a:b%7D", 6), 0);
  cr_assert_eq(rt__notice_parse(sem, sizeof(sem) - 1, &n), 0);
  cr_assert_eq(n.seq, 5);
  cr_assert_eq(n.fence, 6);
  cr_assert_eq(n.lease_ms, 7);
  cr_assert_eq(n.deadline_ms, 8);
  cr_assert_eq(n.res_kind_len, 3);
  cr_assert_eq(memcmp(n.res_kind, "s:3", 3), 0);
  cr_assert_eq(n.res_esc_len, 1);
  cr_assert_eq(n.res_esc[0], 'x');
  /* Without a resource (an older script's notice) there is none. */
  cr_assert_eq(parse_notice("g:1:2:3:4", 9, &n), 0);
  cr_assert_null(n.res_esc);

  static const char *const bad[] = {
      "g:1:2:3:4:{x}",    "g:1:2:3:{x}",
      "g:1:2:3:4::{x",    "g:1:2:3:4::{x}}",
      "g:1:2:3:4::{x{y}", "g:1:2:3:4::x}",
      "g:1:2:3:4x::{x}",  "g:1:2:3:4:0123456789abcdef:{x}",
      "{g:1:2:3:4::x}",   "n:1:2::{x}"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    cr_assert_eq(parse_notice(bad[i], strlen(bad[i]), &n), RT_EPROTO, "%s",
                 bad[i]);
}

Test(notices, largest_values_parse) {
  static const char s[] =
      "g:18446744073709551615:18446744073709551615:9223372036854775807:"
      "9223372036854775807";
  rt__notice n;

  cr_assert_eq(parse_notice(s, sizeof(s) - 1, &n), 0);
  cr_assert_eq(n.seq, UINT64_MAX);
  cr_assert_eq(n.fence, UINT64_MAX);
  cr_assert_eq(n.lease_ms, INT64_MAX);
  cr_assert_eq(n.deadline_ms, INT64_MAX);
  cr_assert_eq(
      parse_notice("n:18446744073709551615:9223372036854775807", 42, &n), 0);
  cr_assert_eq(n.seq, UINT64_MAX);
  cr_assert_eq(n.deadline_ms, INT64_MAX);
}

Test(notices, every_malformed_notice_is_rejected) {
  static const char *const bad[] = {
      "",
      "g",
      "l",
      "n",
      "n:1",
      "n:1:",
      "n::1",
      "n:1:2:3",
      "n:1:-2",
      "g:",
      "n::5",
      ":",
      ":1",
      "x:1",
      "G:1:2:3:4",
      "N:1:5",
      "gg:1:2:3:4",
      "g;1:2:3:4",
      "g1:2:3:4",
      "n:1:2:5",
      "n:1::5",
      "n::1:5",
      "g:1",
      "g:1:2",
      "g:1:2:3",
      "g:1:2:3:",
      "g:1:2:3:4:",
      "g:1:2:3:4:5",
      "g::2:3:4",
      "g:1::3:4",
      "g:1:2::4",
      "g:1:0:3:4",
      "g:+1:2:3:4",
      "g:-1:2:3:4",
      "g:1:+2:3:4",
      "g:1:2:-3:4",
      "g:1:2:+3:4",
      "g:1:2:3:-4",
      "g:1:2:3:+4",
      "n:+1:5",
      "n:-1:5",
      "n: 1:5",
      "n:1 :5",
      " n:1:5",
      "n:0x1:5",
      "n:1a:5",
      "n:18446744073709551616:5",
      "n:99999999999999999999999:5",
      "g:18446744073709551616:1:1:1",
      "g:1:18446744073709551616:1:1",
      "g:1:2:9223372036854775808:1",
      "g:1:2:3:9223372036854775808",
  };
  size_t i;

  for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    rt__notice n;
    memset(&n, 0x5a, sizeof(n));
    cr_assert_eq(parse_notice(bad[i], strlen(bad[i]), &n), RT_EPROTO, "\"%s\"",
                 bad[i]);
    cr_assert_eq(n.kind, 0x5a, "output written on error for \"%s\"", bad[i]);
  }
}

Test(notices, embedded_nul_is_rejected) {
  rt__notice n;

  cr_assert_eq(parse_notice("n:1:5\0", 6, &n), RT_EPROTO);
  cr_assert_eq(parse_notice("g:1:\0002:3:4", 10, &n), RT_EPROTO);
  cr_assert_eq(parse_notice("\0:1", 3, &n), RT_EPROTO);
}

Test(notices, parse_never_reads_past_len) {
  static const char full[] = "g:12:34:56:78";
  rt__notice n;
  size_t k;

  /* Every prefix is tried from an exact-size buffer: up to "g:12:34:56:"
   * they are incomplete, after that the deadline is read from the prefix
   * only. */
  for (k = 0; k <= sizeof(full) - 1; k++) {
    int err = parse_notice(full, k, &n);
    if (k <= 11) {
      cr_assert_eq(err, RT_EPROTO, "prefix of %zu bytes", k);
    } else {
      cr_assert_eq(err, 0);
      cr_assert_eq(n.deadline_ms, k == 12 ? 7 : 78);
    }
  }
  cr_assert_eq(rt__notice_parse(NULL, 0, &n), RT_EPROTO);
}

Test(notices, an_observe_notice_names_the_leader_and_its_value) {
  static const char leader[] = "o:12:3456:abc:7:host:80";
  static const char nobody[] = "o:12:0::";
  static const char empty[] = "o:1:2:abc:7:";
  rt__notice n;

  /* The id is "<client id>:<seq>"; the value (after the id's second ':')
   * may hold ':' itself. Both point into the text: parsed in place. */
  cr_assert_eq(rt__notice_parse(leader, sizeof(leader) - 1, &n), 0);
  cr_assert_eq(n.kind, 'o');
  cr_assert_eq(n.fence, 12);
  cr_assert_eq(n.deadline_ms, 3456);
  cr_assert_eq(n.leader_len, 5);
  cr_assert_eq(memcmp(n.leader, "abc:7", 5), 0);
  cr_assert_eq(n.value_len, 7);
  cr_assert_eq(memcmp(n.value, "host:80", 7), 0);

  /* Nobody leads: the last fence, no id, no value. */
  cr_assert_eq(rt__notice_parse(nobody, sizeof(nobody) - 1, &n), 0);
  cr_assert_eq(n.fence, 12);
  cr_assert_eq(n.deadline_ms, 0);
  cr_assert_eq(n.leader_len, 0);
  cr_assert_eq(n.value_len, 0);

  /* A leader with an empty value. */
  cr_assert_eq(rt__notice_parse(empty, sizeof(empty) - 1, &n), 0);
  cr_assert_eq(n.leader_len, 5);
  cr_assert_eq(n.value_len, 0);
}

Test(notices, a_malformed_observe_notice_is_refused) {
  static const char *const bad[] = {"o:",
                                    "o:12",
                                    "o:12:0",
                                    "o:12:0:",
                                    "o::0::",
                                    "o:12::::",
                                    "o:x:0::",
                                    "o:12:-1::",
                                    "o:12:3:abc",
                                    "o:12:3:abc:7",
                                    "o:1:2:3:4:5:6:7:8:9:0:1:2:3:4:5:6:7:8"};
  rt__notice n;
  char id[RT__ENTRY_MAX + 16], value[RT_VALUE_MAX + 32];

  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    int err = parse_notice(bad[i], strlen(bad[i]), &n);
    /* The last one parses: its id is "3:4" and the rest is a value. */
    if (i + 1 == sizeof(bad) / sizeof(bad[0]))
      cr_assert_eq(err, 0, "%s", bad[i]);
    else
      cr_assert_eq(err, RT_EPROTO, "%s", bad[i]);
  }
  /* An id of RT__ENTRY_MAX bytes or more, a value over RT_VALUE_MAX. */
  memset(id, 'a', sizeof(id));
  int n1 = snprintf(id, sizeof(id), "o:1:2:%0*d:1:v", RT__ENTRY_MAX, 0);
  cr_assert_eq(parse_notice(id, (size_t)n1, &n), RT_EPROTO);
  int n2 =
      snprintf(value, sizeof(value), "o:1:2:abc:7:%0*d", RT_VALUE_MAX + 1, 0);
  cr_assert_eq(parse_notice(value, (size_t)n2, &n), RT_EPROTO);
  n2 = snprintf(value, sizeof(value), "o:1:2:abc:7:%0*d", RT_VALUE_MAX, 0);
  cr_assert_eq(parse_notice(value, (size_t)n2, &n), 0);
  cr_assert_eq(n.value_len, RT_VALUE_MAX);
}
