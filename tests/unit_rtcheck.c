/* The shared FIFO / overlap / fence checker (tools/rtcheck.h) against
 * brute force on random histories. */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "rtcheck.h"

#define N 300

static unsigned rnd_state = 12345;

static int64_t rnd(int64_t max) {
  rnd_state = rnd_state * 1103515245u + 12345u;
  return (int64_t)((rnd_state >> 8) % (unsigned)max);
}

static void random_grants(rtc_grant *g, size_t n) {
  for (size_t i = 0; i < n; i++) {
    g[i].res = rnd(3);
    g[i].fence = (uint64_t)rnd(1000) + 1;
    g[i].start = rnd(10000);
    g[i].end = rnd(4) == 0 ? 0 : g[i].start + rnd(50);
    g[i].asked = rnd(10) == 0 ? RTC_UNKNOWN : rnd(10000);
    g[i].queued = g[i].asked == RTC_UNKNOWN ? RTC_UNKNOWN
                                            : g[i].asked + rnd(20);
  }
}

/* a granted before b in the given order (ties as rtcheck.c breaks them). */
static int before(const rtc_grant *a, const rtc_grant *b, int by_fence) {
  if (by_fence && a->fence != b->fence)
    return a->fence < b->fence;
  if (a->start != b->start)
    return a->start < b->start;
  return a->fence < b->fence;
}

Test(rtcheck, overlap_pairs_and_fence_regressions_match_brute_force) {
  static rtc_grant g[N];
  for (int round = 0; round < 20; round++) {
    random_grants(g, N);
    uint64_t pairs = 0;
    for (size_t i = 0; i < N; i++)
      for (size_t j = 0; j < N; j++)
        if (i != j && g[i].res == g[j].res && before(&g[i], &g[j], 0) &&
            g[i].end > g[i].start && g[j].start + 5 < g[i].end)
          pairs++;
    cr_assert_eq(rtc_overlaps(g, N, 5, NULL, NULL), pairs);
  }
  rtc_grant ok[4] = {{0, 1, 10, 20, 0, 0}, {0, 2, 20, 30, 0, 0},
                     {1, 1, 15, 25, 0, 0}, {0, 3, 30, 40, 0, 0}};
  cr_assert_eq(rtc_overlaps(ok, 4, 0, NULL, NULL), 0);
  cr_assert_eq(rtc_fence_regressions(ok, 4, NULL, NULL), 0);
  ok[3].fence = 2; /* equal to the one before it */
  ok[1].end = 31;  /* ends after the next one's start */
  cr_assert_eq(rtc_overlaps(ok, 4, 0, NULL, NULL), 1);
  cr_assert_eq(rtc_fence_regressions(ok, 4, NULL, NULL), 1);
}

Test(rtcheck, fifo_inversions_match_brute_force) {
  static rtc_grant g[N];
  for (int round = 0; round < 20; round++) {
    random_grants(g, N);
    for (int by_fence = 0; by_fence < 2; by_fence++) {
      uint64_t pairs = 0, unknown = 0;
      for (size_t a = 0; a < N; a++) {
        if (g[a].asked == RTC_UNKNOWN) {
          unknown++;
          continue;
        }
        for (size_t b = 0; b < N; b++)
          if (b != a && g[b].asked != RTC_UNKNOWN && g[a].res == g[b].res &&
              before(&g[b], &g[a], by_fence) &&
              g[a].queued + 3 < g[b].asked)
            pairs++;
      }
      rtc_fifo f;
      rtc_fifo_check(g, N, by_fence, 3, &f, NULL, NULL);
      cr_assert_eq(f.inversions, pairs, "by_fence %d", by_fence);
      cr_assert_eq(f.unknown, unknown);
      cr_assert_eq(f.checked, N - unknown);
    }
  }
}
