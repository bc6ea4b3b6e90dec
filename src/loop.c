/* Loop services: the heap of timeouts behind one uv timer and the deferred
 * completions, in the manner of libuv's timer.c. */
#include "loop.h"

/* ---- deferred completions ------------------------------------------------ */

static void tick_cb(uv_timer_t *t) {
  rt__loop *lp = t->data;
  rt__queue now;
  rt__queue_init(&now);
  /* Completions queued while these run wait for the next tick. */
  rt__queue_move(&lp->later, &now);
  while (!rt__queue_empty(&now)) {
    rt__later *l = rt__queue_data(now.next, rt__later, node);
    rt__queue_remove(&l->node);
    l->fn(l);
  }
}

void rt__defer(rt__loop *lp, rt__later *later, rt__later_fn fn) {
  later->fn = fn;
  rt__queue_insert_tail(&lp->later, &later->node);
  if (!uv_is_active((uv_handle_t *)&lp->tick))
    uv_timer_start(&lp->tick, tick_cb, 0, 0);
}

void rt__defer_cancel(rt__later *later) { rt__queue_remove(&later->node); }

/* ---- timeouts ---------------------------------------------------------- */

static void timer_cb(uv_timer_t *t);

/* Start the uv timer for the earliest timeout; now is the loop's time
 * just read (rt__loop_now), which uv_timer_start counts from. */
static void timeouts_rearm(rt__loop *lp, int64_t now) {
  rt__heap_node *n = rt__heap_min(&lp->timeouts);
  if (n == NULL) {
    return;
  }
  uv_timer_start(&lp->timer, timer_cb,
                 n->key > now ? (uint64_t)(n->key - now) : 0, 0);
}

/* libuv's now is the start of this loop iteration: code that ran long
 * before (the application's, or a starved process) would make a timeout
 * set now end early. Every time-out counts from its call. */
int64_t rt__loop_now(const rt__loop *lp) {
  uv_update_time(lp->uv);
  return (int64_t)uv_now(lp->uv);
}

void rt__timeout_clear(rt__loop *lp, rt__timeout *t) {
  if (!t->armed)
    return;
  t->armed = 0;
  rt__heap_remove(&lp->timeouts, &t->hn);
  timeouts_rearm(lp, rt__loop_now(lp));
}

void rt__timeout_set(rt__loop *lp, rt__timeout *t, rt__timeout_fn fn,
                     int64_t ms) {
  if (t->armed) {
    t->armed = 0;
    rt__heap_remove(&lp->timeouts, &t->hn);
  }
  t->fn = fn;
  int64_t now = rt__loop_now(lp);
  t->hn.key = now + (ms > 0 ? ms : 0);
  rt__heap_push(&lp->timeouts, &t->hn);
  t->armed = 1;
  timeouts_rearm(lp, now);
}

static void timer_cb(uv_timer_t *timer) {
  rt__loop *lp = timer->data;
  int64_t now = rt__loop_now(lp);
  rt__heap_node *n;
  while ((n = rt__heap_min(&lp->timeouts)) != NULL && n->key <= now) {
    rt__timeout *t = rt__container_of(n, rt__timeout, hn);
    rt__heap_remove(&lp->timeouts, n);
    t->armed = 0;
    t->fn(t);
  }
  timeouts_rearm(lp, rt__loop_now(lp)); /* the callbacks took time */
}

/* ---- life cycle ------------------------------------------------------------ */

void rt__loop_init(rt__loop *lp, uv_loop_t *uv) {
  lp->uv = uv;
  rt__heap_init(&lp->timeouts);
  rt__queue_init(&lp->later);
  uv_timer_init(uv, &lp->timer);
  uv_timer_init(uv, &lp->tick);
  lp->timer.data = lp;
  lp->tick.data = lp;
  lp->handles_open = 2;
}

static void handle_closed(uv_handle_t *h) {
  rt__loop *lp = h->data;
  if (--lp->handles_open == 0)
    lp->closed(lp);
}

void rt__loop_close(rt__loop *lp, rt__loop_closed_fn closed) {
  if (lp->closing)
    return;
  /* Completions still queued run now: the tick timer is about to close.
   * One of them may close the loop itself, which gets here again first. */
  while (!rt__queue_empty(&lp->later))
    tick_cb(&lp->tick);
  if (lp->closing)
    return;
  lp->closing = 1;
  lp->closed = closed;
  uv_close((uv_handle_t *)&lp->timer, handle_closed);
  uv_close((uv_handle_t *)&lp->tick, handle_closed);
}

uint64_t rt__mono_ms(void) { return uv_hrtime() / 1000000; }
