/* Latency histograms of the client statistics: log2 buckets of
 * microseconds (pure logic). */
#include "common.h"

void rt__hist_add(rt_histogram_t *h, uint64_t us) {
  unsigned i = 0;
  while (i + 1 < RT_HIST_BUCKETS && us >= ((uint64_t)1 << i))
    i++;
  h->buckets[i]++;
  h->count++;
  h->sum_us += us;
  if (us > h->max_us)
    h->max_us = us;
}

uint64_t rt_histogram_quantile(const rt_histogram_t *h, double q) {
  if (h == NULL || h->count == 0)
    return 0;
  uint64_t rank = (uint64_t)(q * (double)h->count);
  if (rank == 0)
    rank = 1;
  uint64_t seen = 0;
  for (unsigned i = 0; i < RT_HIST_BUCKETS; i++) {
    seen += h->buckets[i];
    if (seen >= rank) {
      uint64_t bound = i == 0 ? 0 : ((uint64_t)1 << i) - 1;
      return bound < h->max_us ? bound : h->max_us;
    }
  }
  return h->max_us;
}
