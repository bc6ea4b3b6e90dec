/* The module's number parser (module/prelude.c rtm_parse_ll), which reads
 * every holder record and lease: it must accept and refuse exactly what
 * strtoll(s, 10) over the whole string does (the parser it replaced),
 * overflow included. Pure logic: no Redis. */
#include <criterion/criterion.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prelude.h"

/* What strtoll over all of s[0..len) says: 0 and *out, or -1. */
static int reference(const char *s, size_t len, long long *out) {
  char buf[32];
  if (len == 0 || len >= sizeof(buf))
    return -1;
  memcpy(buf, s, len);
  buf[len] = '\0';
  char *end;
  errno = 0;
  long long v = strtoll(buf, &end, 10);
  if (errno != 0 || *end != '\0' || end == buf)
    return -1;
  *out = v;
  return 0;
}

static void same(const char *s, size_t len) {
  long long a = 0, b = 0;
  int ra = rtm_parse_ll((rtm_str){s, len}, &a);
  int rb = reference(s, len, &b);
  cr_assert_eq(ra, rb, "'%.*s': rtm_parse_ll %d, strtoll %d", (int)len, s, ra,
               rb);
  if (ra == 0)
    cr_assert_eq(a, b, "'%.*s': %lld, strtoll %lld", (int)len, s, a, b);
}

Test(module_numbers, the_edges_parse_as_strtoll_does) {
  static const char *const cases[] = {"0",
                                      "7",
                                      "-7",
                                      "+7",
                                      " 7",
                                      "\t\n7",
                                      "7 ",
                                      "",
                                      " ",
                                      "-",
                                      "+",
                                      "--1",
                                      "1x",
                                      "x1",
                                      "0x10",
                                      "1e3",
                                      "1.5",
                                      "007",
                                      "-0",
                                      "9223372036854775807",
                                      "9223372036854775808",
                                      "-9223372036854775808",
                                      "-9223372036854775809",
                                      "99999999999999999999",
                                      "1700000030000123",
                                      "000000000000000000000000000000",
                                      "123456789012345678",
                                      "1234567890123456789",
                                      "-1234567890123456789"};
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
    same(cases[i], strlen(cases[i]));
  long long v = 1;
  cr_assert_eq(rtm_parse_ll((rtm_str){NULL, 0}, &v), -1);
  cr_assert_eq(v, 1, "a refused number leaves the output alone");
}

Test(module_numbers, random_strings_parse_as_strtoll_does) {
  static const char alphabet[] = "0123456789999 +-\tx";
  uint64_t x = 88172645463325252ull; /* xorshift64: the same run each time */
  char s[31];
  for (int n = 0; n < 200000; n++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    size_t len = (size_t)(x % sizeof(s));
    for (size_t i = 0; i < len; i++) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      /* mostly digits, so long numbers (and overflows) come up */
      s[i] = x % 4 != 0 ? (char)('0' + x / 4 % 10)
                        : alphabet[x / 4 % (sizeof(alphabet) - 1)];
    }
    same(s, len);
  }
}
