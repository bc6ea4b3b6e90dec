/* Latency histograms: the bucket layout the header documents, and
 * quantiles of known distributions within the promised error. */
#include <criterion/criterion.h>
#include <math.h> /* NAN, fabs: no libm */
#include <stdlib.h>

#include "common.h"

static uint64_t rng_state = 0x2545f4914f6cdd1du;
static uint64_t rng(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

static rt_histogram_t *hist(void) {
  rt_histogram_t *h = calloc(1, sizeof(*h));
  cr_assert_not_null(h);
  return h;
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* The exact quantile of sorted v[0..n): the value of rank ceil(q * n). */
static uint64_t exact(const uint64_t *v, size_t n, double q) {
  double r = q * (double)n;
  size_t rank = (size_t)r;
  if ((double)rank < r)
    rank++;
  return v[(rank < 1 ? 1 : rank) - 1];
}

/* Every quantile in 0.01 steps, and the tails, within 1/32 of the exact one
 * and within [min, max]. */
static void check_all(const rt_histogram_t *h, uint64_t *v, size_t n) {
  qsort(v, n, sizeof(*v), cmp_u64);
  static const double tails[] = {0.001, 0.5, 0.999, 0.9999};
  for (int i = 1; i <= 99 + 4; i++) {
    double q = i <= 99 ? i / 100.0 : tails[i - 100];
    uint64_t want = exact(v, n, q);
    uint64_t got = rt_histogram_quantile(h, q);
    double err = fabs((double)got - (double)want);
    cr_assert_leq(err, (double)want / 32 + 0.5, "q %.4f: %llu, exactly %llu", q,
                  (unsigned long long)got, (unsigned long long)want);
    cr_assert_geq(got, v[0]);
    cr_assert_leq(got, v[n - 1]);
  }
}

Test(stats, buckets_follow_the_documented_layout) {
  /* Exact below RT_HIST_SUB, then RT_HIST_SUB per power of two. */
  for (uint64_t v = 0; v < RT_HIST_SUB; v++)
    cr_assert_eq(rt__hist_index(v), v);
  cr_assert_eq(rt__hist_index(32), 32);
  cr_assert_eq(rt__hist_index(63), 63);
  cr_assert_eq(rt__hist_index(64), 64);
  cr_assert_eq(rt__hist_index(65), 64);
  cr_assert_eq(rt__hist_index(66), 65);
  cr_assert_eq(rt__hist_index(((uint64_t)1 << 36) - 1), RT_HIST_BUCKETS - 1);
  cr_assert_eq(rt__hist_index((uint64_t)1 << 36), RT_HIST_BUCKETS - 1);
  cr_assert_eq(rt__hist_index(UINT64_MAX), RT_HIST_BUCKETS - 1);
  /* Each value lies in its bucket's range; a bucket is at most 1/32 of its
   * lower bound wide; the ranges tile [0, 2^36) without gaps. */
  uint64_t next = 0;
  for (size_t i = 0; i < RT_HIST_BUCKETS; i++) {
    uint64_t lo, width;
    rt__hist_bounds(i, &lo, &width);
    cr_assert_eq(lo, next, "bucket %zu starts at %llu", i,
                 (unsigned long long)lo);
    cr_assert(width == 1 || width * 32 <= lo, "bucket %zu", i);
    cr_assert_eq(rt__hist_index(lo), i);
    cr_assert_eq(rt__hist_index(lo + width - 1), i);
    next = lo + width;
  }
  cr_assert_eq(next, (uint64_t)1 << 36);
  for (int k = 0; k < 100000; k++) {
    uint64_t v = rng() >> (rng() % 64);
    size_t i = rt__hist_index(v);
    uint64_t lo, width;
    rt__hist_bounds(i, &lo, &width);
    cr_assert(v >= lo && (v < lo + width || i == RT_HIST_BUCKETS - 1),
              "%llu in bucket %zu", (unsigned long long)v, i);
  }
}

Test(stats, an_empty_histogram_reads_0_and_bad_quantiles_are_clamped) {
  rt_histogram_t *h = hist();
  cr_assert_eq(rt_histogram_quantile(h, 0.5), 0);
  cr_assert_eq(rt_histogram_quantile(NULL, 0.5), 0);
  rt__hist_add(h, 700);
  rt__hist_add(h, 9000);
  cr_assert_eq(h->min_us, 700);
  cr_assert_eq(h->max_us, 9000);
  cr_assert_eq(rt_histogram_quantile(h, 0), 700);
  cr_assert_eq(rt_histogram_quantile(h, -3), 700);
  cr_assert_eq(rt_histogram_quantile(h, 1), 9000);
  cr_assert_eq(rt_histogram_quantile(h, 7), 9000);
  cr_assert_eq(rt_histogram_quantile(h, NAN), 0);
  free(h);
}

Test(stats, one_value_is_every_quantile) {
  rt_histogram_t *h = hist();
  for (int i = 0; i < 1000; i++)
    rt__hist_add(h, 9300);
  /* The bucket of 9300 is [9216, 9472): min and max pin it. */
  cr_assert_eq(rt_histogram_quantile(h, 0.01), 9300);
  cr_assert_eq(rt_histogram_quantile(h, 0.5), 9300);
  cr_assert_eq(rt_histogram_quantile(h, 0.99), 9300);
  free(h);
}

Test(stats, uniform_1_to_10000_us_p50_is_5000_and_each_quantile_is_close) {
  rt_histogram_t *h = hist();
  size_t n = 10000;
  uint64_t *v = malloc(n * sizeof(*v));
  cr_assert_not_null(v);
  for (size_t i = 0; i < n; i++) {
    v[i] = i + 1;
    rt__hist_add(h, v[i]);
  }
  uint64_t p50 = rt_histogram_quantile(h, 0.5);
  cr_assert(p50 >= 4750 && p50 <= 5250, "p50 %llu", (unsigned long long)p50);
  uint64_t p99 = rt_histogram_quantile(h, 0.99);
  cr_assert(p99 >= 9405 && p99 <= 9900, "p99 %llu", (unsigned long long)p99);
  check_all(h, v, n);
  free(v);
  free(h);
}

Test(stats, bimodal_p50_and_p99_are_each_in_their_mode) {
  /* 98 % of the waits near 0.2 ms, 2 % near 9.3 ms: p50 is the first
   * mode, p99 the second, and neither is the maximum. */
  rt_histogram_t *h = hist();
  size_t n = 20000;
  uint64_t *v = malloc(n * sizeof(*v));
  cr_assert_not_null(v);
  for (size_t i = 0; i < n; i++) {
    v[i] = i % 50 == 0 ? 9000 + rng() % 600 : 150 + rng() % 100;
    rt__hist_add(h, v[i]);
  }
  uint64_t p50 = rt_histogram_quantile(h, 0.5);
  uint64_t p99 = rt_histogram_quantile(h, 0.99);
  cr_assert(p50 >= 150 && p50 < 250, "p50 %llu", (unsigned long long)p50);
  cr_assert(p99 >= 9000 && p99 < 9600, "p99 %llu", (unsigned long long)p99);
  cr_assert_lt(p99, h->max_us);
  check_all(h, v, n);
  free(v);
  free(h);
}

Test(stats, spread_over_nine_decades_stays_within_1_32) {
  /* A uniform value cut down by a uniform power of two: from 1 us to about
   * 17 min, every bucket width up to there. */
  rt_histogram_t *h = hist();
  size_t n = 50000;
  uint64_t *v = malloc(n * sizeof(*v));
  cr_assert_not_null(v);
  for (size_t i = 0; i < n; i++) {
    v[i] = (rng() % ((uint64_t)1 << 30)) >> (rng() % 30);
    rt__hist_add(h, v[i]);
  }
  check_all(h, v, n);
  free(v);
  free(h);
}
