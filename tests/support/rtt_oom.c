/* The checks of the out-of-memory tests (see rtt_oom.h). */
#include "rtt_oom.h"

#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "redturn.h"

int rtt_oom_in_call;
int rtt_oom_rc;
long rtt_oom_k;

static int violations;
static char first_violation[256];

void rtt_oom_violation(const char *fmt, ...) {
  if (violations++ == 0) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(first_violation, sizeof(first_violation), fmt, ap);
    va_end(ap);
  }
}

void rtt_oom_check_no_violation(const char *when) {
  cr_assert_eq(violations, 0, "%s: %d broken promise(s), the first: %s", when,
               violations, first_violation);
}

int rtt_oom_known_status(int st) {
  return st == 0 || (st < 0 && strcmp(rt_err_name(st), "RT_EUNKNOWN") != 0);
}

void rtt_oom_check_callback(const char *what, int status) {
  if (rtt_oom_in_call)
    rtt_oom_violation(
        "k=%ld: %s callback (status %s) ran inside a library call", rtt_oom_k,
        what, rt_err_name(status));
  if (!rtt_oom_known_status(status))
    rtt_oom_violation("k=%ld: %s callback got status %d, not an RT_E* code",
                      rtt_oom_k, what, status);
}

rtt_oom_nth_t rtt_oom_nth;

int rtt_oom_fail_nth(const char *name, int *failnum, void **failinfo,
                     unsigned int *flags) {
  (void)name;
  (void)failnum;
  (void)failinfo;
  (void)flags;
  if (!rtt_oom_nth.armed)
    return 0;
  if (++rtt_oom_nth.calls != rtt_oom_nth.fail_at)
    return 0;
  rtt_oom_nth.fired = 1;
  return 1;
}
