/* The FIFO / overlap / fence checker shared by `redturn demo`, the
 * benchmark and the fault suite: given the grants of a run, count
 *
 *  - overlaps: holds of one resource that were live at the same time;
 *  - permits exceeded: holds of a semaphore or read-write lock that began
 *    while the permits in use would go beyond the resource's count (a
 *    reader next to a writer, for a read-write lock);
 *  - fence order: holds whose fence is not above that of every hold of
 *    their resource that was granted before they asked (for resources
 *    with several holders at once);
 *  - fence regressions: grants whose fence is not above the fence of the
 *    grant before them on their resource (in grant time order);
 *  - FIFO inversions: pairs of grants of one resource granted in the
 *    opposite order of their enqueues, where the enqueue order is certain.
 *
 * Every time is in one unit on one clock shared by all grants (e.g.
 * CLOCK_REALTIME in microseconds, which all processes of a machine share),
 * or, for the enqueue, a rank (the order Redis executed the enqueues in,
 * from MONITOR). The grants are never reordered: the functions sort an
 * index of their own. Each violation can be reported to a callback with
 * the two grants (indexes into the caller's array) that prove it. */
#ifndef RT_TOOLS_RTCHECK_H
#define RT_TOOLS_RTCHECK_H

#include <stddef.h>
#include <stdint.h>

#define RTC_UNKNOWN INT64_MIN

typedef struct rtc_grant {
  int64_t res;    /* only grants with the same res are compared */
  uint64_t fence; /* the lock's fencing token (0: none) */
  int64_t start;  /* the hold began no later than this (grant seen) */
  int64_t end;    /* and ended no earlier than this (release called);
                      end <= start: unknown, not counted as an earlier
                      hold by rtc_overlaps */
  /* The enqueue happened within [asked, queued] (asked: before the
   * request was sent; queued: its reply seen); both the rank when the
   * order is known exactly. RTC_UNKNOWN: not known (rtc_fifo skips it). */
  int64_t asked, queued;
  /* Only rtc_permits_exceeded reads these two (0 and 0: a mutex). */
  int64_t permits;  /* permits the hold took (0: 1) */
  int64_t capacity; /* its resource's permit count (0: 1) */
} rtc_grant;

/* A read-write lock as permits: its capacity, which a writer takes whole
 * (a reader takes 1). */
#define RTC_RW_ALL INT64_C(1099511627776)

/* earlier and later index the caller's grants: the violation's proof. */
typedef void (*rtc_report_fn)(void *ctx, size_t earlier, size_t later);

/* Holds granted (start + slack) before the end of an earlier hold of their
 * resource. Returns the number of such pairs; report (may be NULL) is
 * called once per later hold, with the earlier one that ends last. */
uint64_t rtc_overlaps(const rtc_grant *g, size_t n, int64_t slack,
                      rtc_report_fn report, void *ctx);

/* Per resource in grant time order (start, then fence): grants whose fence
 * is not strictly above the previous one's; report gets the two. */
uint64_t rtc_fence_regressions(const rtc_grant *g, size_t n,
                               rtc_report_fn report, void *ctx);

/* Holds granted (start + slack) while the permits of the earlier holds of
 * their resource still live then (end after that instant), plus their
 * own, exceed the resource's capacity. Returns how many; report (may be
 * NULL) gets each such hold with one of the earlier holds live then. With
 * permits and capacity 0 (a mutex) it counts the holds that overlap an
 * earlier one. */
uint64_t rtc_permits_exceeded(const rtc_grant *g, size_t n, int64_t slack,
                              rtc_report_fn report, void *ctx);

/* Holds whose fence is not strictly above the fence of every hold of their
 * resource that was seen granted (start) no later than they asked (asked
 * known): Redis granted that one first, so its fence must be lower, even
 * where several hold at once and grants are seen in any order. report
 * gets the hold and the earlier one with the highest fence. */
uint64_t rtc_fence_order(const rtc_grant *g, size_t n, rtc_report_fn report,
                         void *ctx);

/* An election's observers: the fences of the leader changes one observer
 * was told, in the order it got them (a notice without a leader carries
 * the last leader's fence), against the fences of every leadership that
 * Redis granted. */
typedef struct rtc_observed {
  uint64_t out_of_order; /* notices with a lower fence than one before */
  uint64_t missed;       /* leaderships from the observer's first notice to its
                      highest that it was never told */
} rtc_observed;

/* leaders: every leadership's fence (any order, no duplicates); seen: one
 * observer's notices in arrival order. */
void rtc_observe_check(const uint64_t *leaders, size_t nleaders,
                       const uint64_t *seen, size_t nseen, rtc_observed *out);

typedef struct rtc_fifo {
  uint64_t inversions; /* pairs: b granted before a although a's enqueue
                          was answered (queued + slack) before b asked */
  uint64_t overtaken;  /* grants a that at least one such b went before */
  uint64_t checked;    /* grants with a known enqueue */
  uint64_t unknown;    /* grants without (asked or queued RTC_UNKNOWN) */
} rtc_fifo;

/* FIFO over the grant order: fence order if by_fence, else start time.
 * report is called once per overtaken grant (later: it; earlier: the grant
 * that went before it and asked last). */
void rtc_fifo_check(const rtc_grant *g, size_t n, int by_fence, int64_t slack,
                    rtc_fifo *out, rtc_report_fn report, void *ctx);

#endif /* RT_TOOLS_RTCHECK_H */
