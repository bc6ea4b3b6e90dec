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
    g[i].queued =
        g[i].asked == RTC_UNKNOWN ? RTC_UNKNOWN : g[i].asked + rnd(20);
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
  rtc_grant ok[4] = {{0, 1, 10, 20, 0, 0, 0, 0},
                     {0, 2, 20, 30, 0, 0, 0, 0},
                     {1, 1, 15, 25, 0, 0, 0, 0},
                     {0, 3, 30, 40, 0, 0, 0, 0}};
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
              before(&g[b], &g[a], by_fence) && g[a].queued + 3 < g[b].asked)
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

/* ---- several holders at once ------------------------------------------------ */

/* Random holds of semaphores of 1..4 permits taking 1..capacity each. */
static void random_permit_grants(rtc_grant *g, size_t n) {
  random_grants(g, n);
  for (size_t i = 0; i < n; i++) {
    g[i].capacity = 1 + g[i].res;
    g[i].permits = 1 + rnd(g[i].capacity);
  }
}

Test(rtcheck, permits_exceeded_matches_brute_force) {
  static rtc_grant g[N];
  for (int round = 0; round < 20; round++) {
    random_permit_grants(g, N);
    uint64_t bad = 0;
    for (size_t b = 0; b < N; b++) {
      int64_t used = g[b].permits;
      for (size_t a = 0; a < N; a++)
        if (a != b && g[a].res == g[b].res && before(&g[a], &g[b], 0) &&
            g[a].end > g[a].start && g[b].start + 5 < g[a].end)
          used += g[a].permits;
      bad += used > g[b].capacity;
    }
    cr_assert_eq(rtc_permits_exceeded(g, N, 5, NULL, NULL), bad);
  }
}

static void count_report(void *ctx, size_t earlier, size_t later) {
  size_t *seen = ctx;
  seen[0]++;
  seen[1] = earlier;
  seen[2] = later;
}

Test(rtcheck, a_semaphore_holding_more_permits_than_it_has_is_caught) {
  /* A semaphore of 4: 3 + 1 at once is fine, a third hold of 1 is not. */
  rtc_grant g[3] = {{0, 1, 10, 50, 0, 0, 3, 4},
                    {0, 2, 20, 60, 0, 0, 1, 4},
                    {0, 3, 30, 70, 0, 0, 1, 4}};
  size_t seen[3] = {0};
  cr_assert_eq(rtc_permits_exceeded(g, 2, 0, NULL, NULL), 0);
  cr_assert_eq(rtc_permits_exceeded(g, 3, 0, count_report, seen), 1);
  cr_assert_eq(seen[0], 1);
  cr_assert_eq(seen[2], 2, "the third hold is the violation");
  cr_assert(seen[1] < 2, "proved by a hold live then");
  g[2].start = 50; /* after the first ended: 1 + 1 of 4 */
  cr_assert_eq(rtc_permits_exceeded(g, 3, 0, NULL, NULL), 0);
}

Test(rtcheck,
     a_reader_next_to_a_writer_is_caught_and_readers_together_are_not) {
  rtc_grant g[4] = {
      {0, 1, 10, 50, 0, 0, 1, RTC_RW_ALL},          /* reader */
      {0, 2, 12, 60, 0, 0, 1, RTC_RW_ALL},          /* reader */
      {0, 3, 60, 80, 0, 0, RTC_RW_ALL, RTC_RW_ALL}, /* writer after both */
      {0, 4, 81, 90, 0, 0, 1, RTC_RW_ALL},          /* reader after it */
  };
  cr_assert_eq(rtc_permits_exceeded(g, 4, 0, NULL, NULL), 0);
  g[3].start = 79; /* a reader while the writer holds */
  cr_assert_eq(rtc_permits_exceeded(g, 4, 0, NULL, NULL), 1);
  g[3].start = 81;
  g[2].start = 55; /* the writer while a reader holds */
  cr_assert_eq(rtc_permits_exceeded(g, 4, 0, NULL, NULL), 1);
}

Test(rtcheck, two_leaders_at_once_are_caught) {
  /* An election is a resource of one permit: the mutex rule. */
  rtc_grant g[2] = {{0, 1, 10, 50, 0, 0, 0, 0}, {0, 2, 40, 60, 0, 0, 0, 0}};
  cr_assert_eq(rtc_permits_exceeded(g, 2, 0, NULL, NULL), 1);
  cr_assert_eq(rtc_overlaps(g, 2, 0, NULL, NULL), 1);
  g[1].start = 50;
  cr_assert_eq(rtc_permits_exceeded(g, 2, 0, NULL, NULL), 0);
}

Test(rtcheck, fence_order_matches_brute_force) {
  static rtc_grant g[N];
  for (int round = 0; round < 20; round++) {
    random_permit_grants(g, N);
    uint64_t bad = 0;
    for (size_t b = 0; b < N; b++) {
      int found = 0;
      for (size_t a = 0; a < N && !found; a++)
        found = a != b && g[a].res == g[b].res && g[b].asked != RTC_UNKNOWN &&
                g[a].start <= g[b].asked && g[a].fence >= g[b].fence;
      bad += found;
    }
    cr_assert_eq(rtc_fence_order(g, N, NULL, NULL), bad);
  }
}

Test(rtcheck,
     readers_granted_together_may_be_seen_in_any_order_but_fences_grow_after) {
  /* Two readers of one batch (asked at 1 and 2) seen in the opposite order
   * of their fences: no regression; a writer that asked after both were
   * seen, with a lower fence than one: one. */
  rtc_grant g[3] = {{0, 11, 10, 30, 1, 1, 1, RTC_RW_ALL},
                    {0, 10, 11, 35, 2, 2, 1, RTC_RW_ALL},
                    {0, 12, 40, 50, 20, 20, RTC_RW_ALL, RTC_RW_ALL}};
  cr_assert_eq(rtc_fence_order(g, 3, NULL, NULL), 0);
  cr_assert_eq(rtc_fence_regressions(g, 3, NULL, NULL), 1,
               "the mutex's rule would flag the batch");
  g[2].fence = 11;
  size_t seen[3] = {0};
  cr_assert_eq(rtc_fence_order(g, 3, count_report, seen), 1);
  cr_assert_eq(seen[1], 0, "the earlier hold with the highest fence");
  cr_assert_eq(seen[2], 2);
}

Test(rtcheck, observers_that_skip_or_reorder_a_leader_change_are_caught) {
  const uint64_t leaders[] = {30, 10, 20, 40};
  const uint64_t every[] = {10, 20, 20, 30, 40, 40}; /* proclaims repeat */
  rtc_observed o;
  rtc_observe_check(leaders, 4, every, 6, &o);
  cr_assert(o.missed == 0 && o.out_of_order == 0);
  const uint64_t late[] = {20, 30, 40}; /* subscribed after the first */
  rtc_observe_check(leaders, 4, late, 3, &o);
  cr_assert(o.missed == 0 && o.out_of_order == 0);
  const uint64_t skipped[] = {10, 30, 40};
  rtc_observe_check(leaders, 4, skipped, 3, &o);
  cr_assert_eq(o.missed, 1);
  const uint64_t reordered[] = {10, 30, 20, 40};
  rtc_observe_check(leaders, 4, reordered, 4, &o);
  cr_assert_eq(o.out_of_order, 1);
  cr_assert_eq(o.missed, 0);
}

Test(rtcheck,
     a_small_request_granted_before_a_large_one_queued_earlier_is_caught) {
  /* FIFO holds for every kind: the large request (4 of 4) was queued at
   * rank 1, a small one at rank 2, but the small one got the lower fence. */
  rtc_grant g[2] = {{0, 20, 100, 110, 1, 1, 4, 4}, {0, 10, 50, 60, 2, 2, 1, 4}};
  rtc_fifo f;
  rtc_fifo_check(g, 2, 1, 0, &f, NULL, NULL);
  cr_assert_eq(f.inversions, 1);
  g[1].fence = 30;
  rtc_fifo_check(g, 2, 1, 0, &f, NULL, NULL);
  cr_assert_eq(f.inversions, 0);
}
