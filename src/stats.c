/* Client statistics: counters and log2 latency histograms. */
#include <string.h>

#include "client.h"

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

void rt_client_stats_size(const rt_client_t *c, rt_stats_t *out, size_t size) {
  rt_stats_t s = c->stats;
  s.pending = 0;
  for (const rt__queue *q = c->pending.next; q != &c->pending; q = q->next)
    if (rt__queue_data(q, rt_lock_t, node)->state == RT_LOCK_QUEUED)
      s.pending++;
  s.held = rt_client_locks(c, NULL, 0);
  /* The caller's struct may be older (shorter) or newer (longer) than
   * ours: fill what both know, zero the rest. */
  memcpy(out, &s, size < sizeof(s) ? size : sizeof(s));
  if (size > sizeof(s))
    memset((char *)out + sizeof(s), 0, size - sizeof(s));
}
