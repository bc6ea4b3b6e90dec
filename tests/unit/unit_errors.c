/* rt_strerror / rt_err_name over every code of RT_ERRNO_MAP, unknown codes,
 * and the version functions. */
#include <criterion/criterion.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "common.h"

struct code {
  int value;
  const char *name;
  const char *msg;
};

static const struct code codes[] = {
#define XX(name, value, msg) {RT_##name, "RT_" #name, msg},
    RT_ERRNO_MAP(XX)
#undef XX
};
#define NCODES (sizeof(codes) / sizeof(codes[0]))

Test(errors, every_code_has_its_own_message_and_name) {
  size_t i;

  cr_assert_gt(NCODES, 20);
  for (i = 0; i < NCODES; i++) {
    cr_assert_str_eq(rt_strerror(codes[i].value), codes[i].msg);
    cr_assert_str_eq(rt_err_name(codes[i].value), codes[i].name);
    cr_assert_str_neq(rt_strerror(codes[i].value), "unknown error");
    cr_assert_str_neq(rt_err_name(codes[i].value), "RT_EUNKNOWN");
  }
}

Test(errors, codes_messages_and_names_are_all_distinct) {
  size_t i, j;

  for (i = 0; i < NCODES; i++) {
    for (j = i + 1; j < NCODES; j++) {
      cr_assert_neq(codes[i].value, codes[j].value, "%s and %s share a value",
                    codes[i].name, codes[j].name);
      cr_assert_str_neq(rt_strerror(codes[i].value),
                        rt_strerror(codes[j].value));
      cr_assert_str_neq(rt_err_name(codes[i].value),
                        rt_err_name(codes[j].value));
    }
  }
}

Test(errors, codes_are_negative_and_clear_of_libuv_and_errno_values) {
  size_t i;

  /* libuv's codes lie in [-4095, -1] (UV_EAI_* at -3000..-3014). */
  for (i = 0; i < NCODES; i++) {
    cr_assert_lt(codes[i].value, -4095);
    cr_assert_gt(codes[i].value, RT_ERRNO_END_);
  }
}

Test(errors, zero_is_success) {
  cr_assert_str_eq(rt_strerror(0), "success");
  cr_assert_str_eq(rt_err_name(0), "OK");
}

Test(errors, unknown_codes_get_a_generic_message_and_name) {
  static const int unknown[] = {1,     -1,      -3001,   -5000,  -5035,
                                -4095, INT_MIN, INT_MAX, -12345, RT_ERRNO_END_};
  size_t i;

  for (i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
    cr_assert_str_eq(rt_strerror(unknown[i]), "unknown error");
    cr_assert_str_eq(rt_err_name(unknown[i]), "RT_EUNKNOWN");
  }
}

Test(version, runtime_version_matches_the_header) {
  char expect[32];

  cr_assert_eq(rt_version(), (unsigned)RT_VERSION_HEX);
  snprintf(expect, sizeof(expect), "%d.%d.%d", RT_VERSION_MAJOR,
           RT_VERSION_MINOR, RT_VERSION_PATCH);
  cr_assert_str_eq(rt_version_string(), expect);
  cr_assert_eq(rt_version() >> 16, (unsigned)RT_VERSION_MAJOR);
  cr_assert_eq((rt_version() >> 8) & 0xff, (unsigned)RT_VERSION_MINOR);
  cr_assert_eq(rt_version() & 0xff, (unsigned)RT_VERSION_PATCH);
}
