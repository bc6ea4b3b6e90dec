/* Latency histograms of the client statistics: log-linear buckets of
 * microseconds, RT_HIST_SUB per power of two (pure logic). */
#include "common.h"

/* Bits of a value's bucket below its leading one: log2(RT_HIST_SUB). */
#define HIST_SUB_BITS 5
/* The power of two whose start the last bucket's range ends at. */
#define HIST_TOP_EXP (HIST_SUB_BITS + RT_HIST_BUCKETS / RT_HIST_SUB - 1)

_Static_assert(RT_HIST_SUB == 1 << HIST_SUB_BITS, "RT_HIST_SUB is 2^5");
_Static_assert(RT_HIST_BUCKETS % RT_HIST_SUB == 0,
               "whole powers of two of buckets");

/* floor(log2(v)) for v > 0. */
static unsigned log2_floor(uint64_t v) {
  unsigned e = 0;
  for (unsigned step = 32; step > 0; step /= 2)
    if (v >> step) {
      v >>= step;
      e += step;
    }
  return e;
}

size_t rt__hist_index(uint64_t us) {
  if (us < RT_HIST_SUB)
    return (size_t)us;
  unsigned e = log2_floor(us);
  if (e >= HIST_TOP_EXP)
    return RT_HIST_BUCKETS - 1;
  return (size_t)RT_HIST_SUB * (e - HIST_SUB_BITS + 1) +
         (size_t)(us >> (e - HIST_SUB_BITS)) - RT_HIST_SUB;
}

void rt__hist_bounds(size_t i, uint64_t *lo, uint64_t *width) {
  if (i < RT_HIST_SUB) {
    *lo = i;
    *width = 1;
    return;
  }
  unsigned shift = (unsigned)(i / RT_HIST_SUB) - 1;
  *lo = (uint64_t)(RT_HIST_SUB + i % RT_HIST_SUB) << shift;
  *width = (uint64_t)1 << shift;
}

void rt__hist_add(rt_histogram_t *h, uint64_t us) {
  h->buckets[rt__hist_index(us)]++;
  if (h->count == 0 || us < h->min_us)
    h->min_us = us;
  if (us > h->max_us)
    h->max_us = us;
  h->count++;
  h->sum_us += us;
}

uint64_t rt_histogram_quantile(const rt_histogram_t *h, double q) {
  if (h == NULL || h->count == 0 || q != q)
    return 0;
  if (q <= 0)
    return h->min_us;
  if (q >= 1)
    return h->max_us;
  /* The rank of the value: ceil(q * count), within 1..count. */
  double r = q * (double)h->count;
  uint64_t rank = (uint64_t)r;
  if ((double)rank < r)
    rank++;
  if (rank < 1)
    rank = 1;
  if (rank > h->count)
    rank = h->count;
  uint64_t seen = 0;
  for (size_t i = 0; i < RT_HIST_BUCKETS; i++) {
    uint64_t n = h->buckets[i];
    if (seen + n < rank) {
      seen += n;
      continue;
    }
    /* The n values of this bucket taken as spread evenly over it: the
     * k-th sits at the middle of its 1/n of the bucket. */
    uint64_t lo, width;
    rt__hist_bounds(i, &lo, &width);
    double k = (double)(rank - seen) - 0.5;
    uint64_t v = lo + (uint64_t)((double)width * k / (double)n);
    if (v < h->min_us)
      v = h->min_us;
    if (v > h->max_us)
      v = h->max_us;
    return v;
  }
  return h->max_us; /* buckets that do not add up to count */
}
