/* Figures from the grant records of all processes of one pass.
 *
 * Every record is one grant: request call, grant callback and release call,
 * stamped with CLOCK_REALTIME (one clock for all processes of the machine).
 *  - overlaps: pairs of grants on one resource whose [grant, release call)
 *    intervals overlap. Each such interval lies inside the interval during
 *    which Redis considered the request the holder (the callback runs after
 *    Redis granted, the release call comes before Redis released), so an
 *    overlap here is a real breach of mutual exclusion as the user saw it.
 *  - handoff: release call of one holder to the grant callback of the next
 *    holder of the same resource. fair: "next" is the grant with the next
 *    fence (fences are issued by Redis, in grant order); spin: the next
 *    grant in time (spin holds never overlap, see above).
 *  - FIFO inversions: pairs of granted requests on one resource whose grant
 *    order (fence order; for spin, time order) is the opposite of the order
 *    in which Redis executed their enqueue (first RPUSH of the request id;
 *    for spin its first SET NX), as MONITOR reported it.
 * Overlaps and inversions are counted by the shared checker
 * (tools/rtcheck.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "rtcheck.h"

/* ---- enqueue order: (proc, seq) -> rank -------------------------------- */

struct rtb_order {
  uint64_t *keys; /* 0 = empty */
  int64_t *ranks;
  size_t cap, len;
};

static uint64_t order_key(uint32_t proc, uint64_t seq) {
  return ((uint64_t)(proc + 1) << 48) | (seq & 0xffffffffffffull);
}

static size_t order_slot(const rtb_order *o, uint64_t key) {
  uint64_t h = key * 0x9e3779b97f4a7c15ull;
  size_t i = (size_t)(h >> 20) & (o->cap - 1);
  while (o->keys[i] != 0 && o->keys[i] != key)
    i = (i + 1) & (o->cap - 1);
  return i;
}

rtb_order *rtb_order_new(void) {
  rtb_order *o = calloc(1, sizeof(*o));
  if (o == NULL)
    return NULL;
  o->cap = 1024;
  o->keys = calloc(o->cap, sizeof(*o->keys));
  o->ranks = calloc(o->cap, sizeof(*o->ranks));
  if (o->keys == NULL || o->ranks == NULL) {
    rtb_order_free(o);
    return NULL;
  }
  return o;
}

void rtb_order_free(rtb_order *o) {
  if (o == NULL)
    return;
  free(o->keys);
  free(o->ranks);
  free(o);
}

static int order_grow(rtb_order *o) {
  rtb_order n = {NULL, NULL, o->cap * 2, 0};
  n.keys = calloc(n.cap, sizeof(*n.keys));
  n.ranks = calloc(n.cap, sizeof(*n.ranks));
  if (n.keys == NULL || n.ranks == NULL) {
    free(n.keys);
    free(n.ranks);
    return -1;
  }
  for (size_t i = 0; i < o->cap; i++) {
    if (o->keys[i] == 0)
      continue;
    size_t j = order_slot(&n, o->keys[i]);
    n.keys[j] = o->keys[i];
    n.ranks[j] = o->ranks[i];
  }
  free(o->keys);
  free(o->ranks);
  o->keys = n.keys;
  o->ranks = n.ranks;
  o->cap = n.cap;
  return 0;
}

void rtb_order_add(rtb_order *o, uint32_t proc, uint64_t seq) {
  if ((o->len + 1) * 2 > o->cap && order_grow(o) != 0)
    return;
  uint64_t key = order_key(proc, seq);
  size_t i = order_slot(o, key);
  if (o->keys[i] == key)
    return; /* a retry: the first enqueue counts */
  o->keys[i] = key;
  o->ranks[i] = (int64_t)o->len++;
}

int64_t rtb_order_rank(const rtb_order *o, uint32_t proc, uint64_t seq) {
  uint64_t key = order_key(proc, seq);
  size_t i = order_slot(o, key);
  return o->keys[i] == key ? o->ranks[i] : -1;
}

size_t rtb_order_len(const rtb_order *o) { return o->len; }

/* ---- helpers -------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static int cmp_res_time(const void *a, const void *b) {
  const rtb_rec *x = a, *y = b;
  if (x->res != y->res)
    return x->res < y->res ? -1 : 1;
  if (x->t_grant != y->t_grant)
    return x->t_grant < y->t_grant ? -1 : 1;
  return 0;
}

static int cmp_res_fence(const void *a, const void *b) {
  const rtb_rec *x = a, *y = b;
  if (x->res != y->res)
    return x->res < y->res ? -1 : 1;
  if (x->fence != y->fence)
    return x->fence < y->fence ? -1 : 1;
  return 0;
}

double rtb_quantile(const double *sorted, size_t n, double q) {
  if (n == 0)
    return NAN;
  double r = ceil(q * (double)n);
  size_t i = r < 1 ? 0 : (size_t)r - 1;
  return sorted[i < n ? i : n - 1];
}

/* The permits a hold took and its resource's count, as the shared
 * checker's permits rule reads them (tools/rtcheck.h). */
static void hold_permits(const rtb_kind *kind, const rtb_rec *r, rtc_grant *g) {
  g->permits = g->capacity = 0; /* a mutex */
  if (kind != NULL && kind->type == RTB_RW) {
    g->capacity = RTC_RW_ALL;
    g->permits = r->shared ? 1 : RTC_RW_ALL;
  } else if (kind != NULL && kind->type == RTB_SEM) {
    g->capacity = kind->param;
    g->permits = 1;
  }
}

/* The records as the shared checker's grants (tools/rtcheck.h): the hold
 * from grant callback to release call, the enqueue's rank in Redis's
 * order (from MONITOR) when it was seen. NULL when out of memory. */
static rtc_grant *as_grants(const rtb_rec *recs, size_t n, const rtb_kind *kind,
                            const rtb_order *order) {
  rtc_grant *g = malloc((n + 1) * sizeof(*g));
  if (g == NULL)
    return NULL;
  for (size_t i = 0; i < n; i++) {
    int64_t rank =
        order != NULL ? rtb_order_rank(order, recs[i].proc, recs[i].seq) : -1;
    g[i].res = recs[i].res;
    g[i].fence = recs[i].fence;
    g[i].start = recs[i].t_grant;
    g[i].end = recs[i].t_rel; /* 0: never released (error path) */
    g[i].asked = g[i].queued = rank >= 0 ? rank : RTC_UNKNOWN;
    hold_permits(kind, &recs[i], &g[i]);
  }
  return g;
}

static int several_holders(const rtb_kind *kind) {
  return kind != NULL && kind->type != RTB_MUTEX && kind->type != RTB_ELECTION;
}

/* Overlapping pairs over every record (for the kinds with several holders
 * at once: holds beyond the permits), and FIFO inversions in grant order
 * (fence order when fair, else time). */
void rtb_check(rtb_rec *recs, size_t n, const rtb_kind *kind,
               const rtb_order *order, uint64_t *overlaps, int64_t *inv,
               uint64_t *checked, uint64_t *unmatched) {
  rtc_grant *g = as_grants(recs, n, kind, order);
  *inv = -1;
  *checked = *unmatched = 0;
  if (g == NULL) {
    *overlaps = UINT64_MAX;
    return;
  }
  *overlaps = several_holders(kind) ? rtc_permits_exceeded(g, n, 0, NULL, NULL)
                                    : rtc_overlaps(g, n, 0, NULL, NULL);
  if (order != NULL) {
    rtc_fifo fifo;
    rtc_fifo_check(g, n, kind != NULL, 0, &fifo, NULL, NULL);
    *inv = fifo.inversions == UINT64_MAX ? -1 : (int64_t)fifo.inversions;
    *checked = fifo.checked;
    *unmatched = fifo.unknown;
  }
  free(g);
}

void rtb_analyze(rtb_rec *recs, size_t n, const rtb_kind *kind, int64_t t_go,
                 int64_t t_stop, unsigned nwaiters, const rtb_order *order,
                 rtb_figures *f, double **handoff_out) {
  memset(f, 0, sizeof(*f));
  f->fifo_inversions = -1;
  f->wall_s = (double)(t_stop - t_go) / 1e9;
  uint64_t *per = calloc(nwaiters ? nwaiters : 1, sizeof(*per));
  double *acq = malloc((n + 1) * sizeof(*acq));
  double *hand = malloc((n + 1) * sizeof(*hand));
  uint64_t attempts = 0;
  size_t na = 0, nh = 0;
  if (per == NULL || acq == NULL || hand == NULL) {
    free(per);
    free(acq);
    free(hand);
    return;
  }
  for (size_t i = 0; i < n; i++) {
    const rtb_rec *r = &recs[i];
    if (r->t_grant > t_stop)
      continue;
    acq[na++] = (double)(r->t_grant - r->t_req) / 1e6;
    attempts += r->attempts;
    if (r->waiter < nwaiters)
      per[r->waiter]++;
  }
  f->grants = na;
  qsort(acq, na, sizeof(*acq), cmp_double);
  f->acquire_ms_p50 = rtb_quantile(acq, na, 0.50);
  f->acquire_ms_p99 = rtb_quantile(acq, na, 0.99);
  f->acquire_ms_max = na ? acq[na - 1] : NAN;
  f->attempts_per_grant = na ? (double)attempts / (double)na : NAN;

  double sum = 0, sq = 0;
  f->per_waiter_min = UINT64_MAX;
  for (unsigned w = 0; w < nwaiters; w++) {
    sum += (double)per[w];
    sq += (double)per[w] * (double)per[w];
    if (per[w] < f->per_waiter_min)
      f->per_waiter_min = per[w];
    if (per[w] > f->per_waiter_max)
      f->per_waiter_max = per[w];
  }
  if (nwaiters == 0)
    f->per_waiter_min = 0;
  f->jain = sq > 0 ? sum * sum / ((double)nwaiters * sq) : NAN;

  /* Overlaps over every record (the window does not matter for safety). */
  rtb_check(recs, n, kind, order, &f->overlaps, &f->fifo_inversions,
            &f->fifo_checked, &f->fifo_unmatched);
  /* Handoffs: from each release to the next grant of its resource (none
   * where several hold at once: the next grant need not wait for it). */
  qsort(recs, n, sizeof(*recs), kind != NULL ? cmp_res_fence : cmp_res_time);
  for (size_t i = 0; i + 1 < n && !several_holders(kind); i++) {
    const rtb_rec *a = &recs[i], *b = &recs[i + 1];
    if (a->res != b->res || a->t_rel == 0 || b->t_grant > t_stop)
      continue;
    hand[nh++] = (double)(b->t_grant - a->t_rel) / 1e3;
    f->handoffs_same_waiter += b->waiter == a->waiter;
    f->handoffs_same_proc += b->proc == a->proc;
  }
  qsort(hand, nh, sizeof(*hand), cmp_double);
  f->handoffs = nh;
  f->handoff_us_p50 = rtb_quantile(hand, nh, 0.50);
  f->handoff_us_p99 = rtb_quantile(hand, nh, 0.99);
  free(per);
  free(acq);
  if (handoff_out != NULL)
    *handoff_out = hand;
  else
    free(hand);
}
