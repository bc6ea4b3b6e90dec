/* Loop services of one client, on the user's libuv loop: a heap of
 * timeouts behind one uv timer (each timeout carries its own callback, as
 * a uv_timer_t does), and deferred completions that run from the loop
 * rather than inside an API call. Knows libuv and nothing of Redis or
 * locks. */
#ifndef RT_LOOP_H
#define RT_LOOP_H

#include <uv.h>

#include "common.h"
#include "queue.h"

/* Work that must run from the loop rather than inside an API call. */
typedef struct rt__later rt__later;
typedef void (*rt__later_fn)(rt__later *later);
struct rt__later {
  rt__queue node;
  rt__later_fn fn;
};

/* An entry in the heap of timeouts: fn runs when it is due. Zero it before
 * its first use. */
typedef struct rt__timeout rt__timeout;
typedef void (*rt__timeout_fn)(rt__timeout *t);
struct rt__timeout {
  rt__heap_node hn; /* hn.key: the loop time it is due at, while armed */
  rt__timeout_fn fn;
  int armed;
};

typedef struct rt__loop rt__loop;
typedef void (*rt__loop_closed_fn)(rt__loop *lp);
struct rt__loop {
  uv_loop_t *uv;
  rt__heap timeouts;
  uv_timer_t timer; /* the earliest timeout */
  uv_timer_t tick;  /* runs deferred completions */
  rt__queue later;  /* deferred completions, oldest first */
  unsigned handles_open;
  int closing;
  rt__loop_closed_fn closed;
};

/* Start the services on uv (two timers; cannot fail on a live loop). */
void rt__loop_init(rt__loop *lp, uv_loop_t *uv);
/* Run fn(later) from the loop, after the completions deferred before it. */
void rt__defer(rt__loop *lp, rt__later *later, rt__later_fn fn);
/* Take a deferred completion back before it ran (no-op if it is not
 * queued, once later->node was initialized). */
void rt__defer_cancel(rt__later *later);
/* Run fn(t) ms from now (at once if ms <= 0); re-arms an armed t. */
void rt__timeout_set(rt__loop *lp, rt__timeout *t, rt__timeout_fn fn,
                     int64_t ms);
/* Disarm t (no-op if it is not armed). */
void rt__timeout_clear(rt__loop *lp, rt__timeout *t);
/* The loop's time (ms), brought up to the present: a timeout set now is
 * due at it plus its ms. */
int64_t rt__loop_now(const rt__loop *lp);
/* Run the completions still deferred (and those they defer), then close
 * the two timers; closed(lp) runs once both closed. Called again (from one
 * of those completions, or later) it does nothing. */
void rt__loop_close(rt__loop *lp, rt__loop_closed_fn closed);

/* The one clock: monotonic ms (uv_hrtime), for times that must not lag
 * like the loop's cached uv_now (a loop blocked before a send must not
 * make that command time out early). */
uint64_t rt__mono_ms(void);

#endif /* RT_LOOP_H */
