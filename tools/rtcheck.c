/* The FIFO / overlap / fence checker: see rtcheck.h. */
#define _GNU_SOURCE
#include "rtcheck.h"

#include <stdlib.h>
#include <string.h>

static int cmp_i64(int64_t a, int64_t b) { return a < b ? -1 : a > b; }

/* (res, start, fence) */
static int by_time(const void *pa, const void *pb, void *arg) {
  const rtc_grant *g = arg;
  const rtc_grant *x = &g[*(const size_t *)pa], *y = &g[*(const size_t *)pb];
  int c = cmp_i64(x->res, y->res);
  if (c == 0)
    c = cmp_i64(x->start, y->start);
  if (c == 0)
    c = x->fence < y->fence ? -1 : x->fence > y->fence;
  return c;
}

/* (res, fence, start) */
static int by_fence(const void *pa, const void *pb, void *arg) {
  const rtc_grant *g = arg;
  const rtc_grant *x = &g[*(const size_t *)pa], *y = &g[*(const size_t *)pb];
  int c = cmp_i64(x->res, y->res);
  if (c == 0)
    c = x->fence < y->fence ? -1 : x->fence > y->fence;
  if (c == 0)
    c = cmp_i64(x->start, y->start);
  return c;
}

/* 0..n-1 sorted by cmp, or NULL when out of memory. */
static size_t *sorted_index(const rtc_grant *g, size_t n,
                            int (*cmp)(const void *, const void *, void *)) {
  size_t *ix = malloc((n + 1) * sizeof(*ix));
  if (ix == NULL)
    return NULL;
  for (size_t i = 0; i < n; i++)
    ix[i] = i;
  qsort_r(ix, n, sizeof(*ix), cmp, (void *)g);
  return ix;
}

/* The end of the run of grants of ix[from]'s resource. */
static size_t run_end(const rtc_grant *g, const size_t *ix, size_t n,
                      size_t from) {
  size_t e = from;
  while (e < n && g[ix[e]].res == g[ix[from]].res)
    e++;
  return e;
}

/* ---- overlaps -------------------------------------------------------------- */

uint64_t rtc_overlaps(const rtc_grant *g, size_t n, int64_t slack,
                      rtc_report_fn report, void *ctx) {
  size_t *ix = sorted_index(g, n, by_time);
  uint64_t pairs = 0;
  if (ix == NULL)
    return UINT64_MAX;
  for (size_t s = 0; s < n;) {
    size_t e = run_end(g, ix, n, s);
    size_t last = SIZE_MAX; /* the earlier hold that ends last */
    for (size_t i = s; i < e; i++) {
      const rtc_grant *b = &g[ix[i]];
      if (last != SIZE_MAX && b->start + slack < g[last].end && report)
        report(ctx, last, ix[i]);
      if (b->end > b->start && (last == SIZE_MAX || b->end > g[last].end))
        last = ix[i];
      if (b->end <= b->start)
        continue;
      /* Pairs: the later grants that start (+ slack) before b ends. */
      size_t lo = i + 1, hi = e;
      while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (g[ix[mid]].start + slack < b->end)
          lo = mid + 1;
        else
          hi = mid;
      }
      pairs += lo - (i + 1);
    }
    s = e;
  }
  free(ix);
  return pairs;
}

/* ---- fences ------------------------------------------------------------------ */

uint64_t rtc_fence_regressions(const rtc_grant *g, size_t n,
                               rtc_report_fn report, void *ctx) {
  size_t *ix = sorted_index(g, n, by_time);
  uint64_t bad = 0;
  if (ix == NULL)
    return UINT64_MAX;
  for (size_t k = 1; k < n; k++) {
    const rtc_grant *a = &g[ix[k - 1]], *b = &g[ix[k]];
    if (a->res != b->res || a->fence < b->fence)
      continue;
    bad++;
    if (report)
      report(ctx, ix[k - 1], ix[k]);
  }
  free(ix);
  return bad;
}

/* ---- permits ------------------------------------------------------------------ */

static int64_t permits_of(const rtc_grant *x) {
  return x->permits > 0 ? x->permits : 1;
}

static int64_t capacity_of(const rtc_grant *x) {
  return x->capacity > 0 ? x->capacity : 1;
}

/* A min-heap of grant indexes by end: the holds live at the sweep's
 * instant. */
typedef struct live_heap {
  size_t *ix;
  size_t n;
} live_heap;

static void heap_swap(size_t *a, size_t *b) {
  size_t t = *a;
  *a = *b;
  *b = t;
}

static void heap_push(live_heap *h, const rtc_grant *g, size_t i) {
  size_t k = h->n++;
  h->ix[k] = i;
  while (k > 0 && g[h->ix[(k - 1) / 2]].end > g[h->ix[k]].end) {
    heap_swap(&h->ix[(k - 1) / 2], &h->ix[k]);
    k = (k - 1) / 2;
  }
}

static void heap_pop(live_heap *h, const rtc_grant *g) {
  h->ix[0] = h->ix[--h->n];
  for (size_t k = 0;;) {
    size_t c = 2 * k + 1;
    if (c >= h->n)
      break;
    if (c + 1 < h->n && g[h->ix[c + 1]].end < g[h->ix[c]].end)
      c++;
    if (g[h->ix[k]].end <= g[h->ix[c]].end)
      break;
    heap_swap(&h->ix[k], &h->ix[c]);
    k = c;
  }
}

uint64_t rtc_permits_exceeded(const rtc_grant *g, size_t n, int64_t slack,
                              rtc_report_fn report, void *ctx) {
  size_t *ix = sorted_index(g, n, by_time);
  live_heap live = {malloc((n + 1) * sizeof(size_t)), 0};
  uint64_t bad = 0;
  if (ix == NULL || live.ix == NULL) {
    free(ix);
    free(live.ix);
    return UINT64_MAX;
  }
  for (size_t s = 0; s < n;) {
    size_t e = run_end(g, ix, n, s);
    int64_t used = 0;
    live.n = 0;
    for (size_t i = s; i < e; i++) {
      const rtc_grant *b = &g[ix[i]];
      while (live.n > 0 && g[live.ix[0]].end <= b->start + slack) {
        used -= permits_of(&g[live.ix[0]]);
        heap_pop(&live, g);
      }
      if (used + permits_of(b) > capacity_of(b)) {
        bad++;
        if (report)
          report(ctx, live.ix[0], ix[i]);
      }
      if (b->end > b->start) {
        heap_push(&live, g, ix[i]);
        used += permits_of(b);
      }
    }
    s = e;
  }
  free(ix);
  free(live.ix);
  return bad;
}

/* ---- fence order ------------------------------------------------------------ */

/* (res, asked) */
static int by_asked(const void *pa, const void *pb, void *arg) {
  const rtc_grant *g = arg;
  const rtc_grant *x = &g[*(const size_t *)pa], *y = &g[*(const size_t *)pb];
  int c = cmp_i64(x->res, y->res);
  return c != 0 ? c : cmp_i64(x->asked, y->asked);
}

uint64_t rtc_fence_order(const rtc_grant *g, size_t n, rtc_report_fn report,
                         void *ctx) {
  size_t *starts = sorted_index(g, n, by_time);
  size_t *asks = sorted_index(g, n, by_asked);
  uint64_t bad = 0;
  if (starts == NULL || asks == NULL) {
    free(starts);
    free(asks);
    return UINT64_MAX;
  }
  /* Both indexes list the resources in the same order: walk them together,
   * folding in the holds seen granted by each request's asking. The two
   * highest fences so far, so that a hold is never its own proof. */
  size_t j = 0;
  for (size_t s = 0; s < n;) {
    size_t e = run_end(g, asks, n, s);
    int64_t res = g[asks[s]].res;
    while (j < n && g[starts[j]].res < res)
      j++;
    size_t top = SIZE_MAX, second = SIZE_MAX;
    for (size_t i = s; i < e; i++) {
      const rtc_grant *b = &g[asks[i]];
      if (b->asked == RTC_UNKNOWN)
        continue;
      for (; j < n && g[starts[j]].res == res && g[starts[j]].start <= b->asked;
           j++) {
        size_t a = starts[j];
        if (top == SIZE_MAX || g[a].fence > g[top].fence) {
          second = top;
          top = a;
        } else if (second == SIZE_MAX || g[a].fence > g[second].fence) {
          second = a;
        }
      }
      size_t proof = top == asks[i] ? second : top;
      if (proof != SIZE_MAX && b->fence <= g[proof].fence) {
        bad++;
        if (report)
          report(ctx, proof, asks[i]);
      }
    }
    s = e;
  }
  free(starts);
  free(asks);
  return bad;
}

/* ---- observers -------------------------------------------------------------- */

static int cmp_u64(const void *pa, const void *pb) {
  uint64_t a = *(const uint64_t *)pa, b = *(const uint64_t *)pb;
  return a < b ? -1 : a > b;
}

void rtc_observe_check(const uint64_t *leaders, size_t nleaders,
                       const uint64_t *seen, size_t nseen, rtc_observed *out) {
  memset(out, 0, sizeof(*out));
  if (nseen == 0)
    return;
  uint64_t *told = malloc(nseen * sizeof(*told));
  if (told == NULL) {
    out->missed = out->out_of_order = UINT64_MAX;
    return;
  }
  uint64_t high = seen[0];
  for (size_t i = 0; i < nseen; i++) {
    if (seen[i] < high)
      out->out_of_order++;
    high = seen[i] > high ? seen[i] : high;
    told[i] = seen[i];
  }
  qsort(told, nseen, sizeof(*told), cmp_u64);
  /* Every leadership from the first notice to the highest must be among
   * the notices. */
  for (size_t k = 0; k < nleaders; k++)
    if (leaders[k] >= seen[0] && leaders[k] <= high &&
        bsearch(&leaders[k], told, nseen, sizeof(*told), cmp_u64) == NULL)
      out->missed++;
  free(told);
}

/* ---- FIFO ------------------------------------------------------------------ */

/* Pairs i < j with asked[i] > queued[j] + slack, over the sequence in
 * grant order; sorts both arrays (each on its own: the count across two
 * halves depends only on the values in each), tmp holds n values. */
static uint64_t inversions(int64_t *asked, int64_t *queued, int64_t *tmp,
                           size_t n, int64_t slack) {
  if (n < 2)
    return 0;
  size_t h = n / 2;
  uint64_t c = inversions(asked, queued, tmp, h, slack) +
               inversions(asked + h, queued + h, tmp, n - h, slack);
  /* asked[0..h) and queued[h..n) are sorted: for each j, the i with
   * asked[i] > queued[j] + slack are a tail of the left half. */
  size_t i = 0;
  for (size_t j = h; j < n; j++) {
    while (i < h && asked[i] <= queued[j] + slack)
      i++;
    c += h - i;
  }
  for (int pass = 0; pass < 2; pass++) {
    int64_t *v = pass == 0 ? asked : queued;
    size_t a = 0, b = h, k = 0;
    while (a < h && b < n)
      tmp[k++] = v[a] <= v[b] ? v[a++] : v[b++];
    while (a < h)
      tmp[k++] = v[a++];
    while (b < n)
      tmp[k++] = v[b++];
    memcpy(v, tmp, n * sizeof(*v));
  }
  return c;
}

void rtc_fifo_check(const rtc_grant *g, size_t n, int by_fence_order,
                    int64_t slack, rtc_fifo *out, rtc_report_fn report,
                    void *ctx) {
  memset(out, 0, sizeof(*out));
  size_t *ix = sorted_index(g, n, by_fence_order ? by_fence : by_time);
  int64_t *buf = malloc((3 * n + 1) * sizeof(*buf));
  if (ix == NULL || buf == NULL) {
    free(ix);
    free(buf);
    out->inversions = UINT64_MAX;
    return;
  }
  int64_t *asked = buf, *queued = buf + n, *tmp = buf + 2 * n;
  for (size_t s = 0; s < n;) {
    size_t e = run_end(g, ix, n, s), m = 0;
    size_t last = SIZE_MAX; /* granted earlier and asked last */
    for (size_t i = s; i < e; i++) {
      const rtc_grant *a = &g[ix[i]];
      if (a->asked == RTC_UNKNOWN || a->queued == RTC_UNKNOWN) {
        out->unknown++;
        continue;
      }
      if (last != SIZE_MAX && a->queued + slack < g[last].asked) {
        out->overtaken++;
        if (report)
          report(ctx, last, ix[i]);
      }
      if (last == SIZE_MAX || a->asked > g[last].asked)
        last = ix[i];
      asked[m] = a->asked;
      queued[m++] = a->queued;
    }
    out->checked += m;
    out->inversions += inversions(asked, queued, tmp, m, slack);
    s = e;
  }
  free(ix);
  free(buf);
}
