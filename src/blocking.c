/* The blocking API: one client on a private libuv loop that runs only
 * inside the calls, in the calling thread, until the request's callback
 * fired. Every callback of a request completes inside the call that made
 * it, so nothing is left pending between calls.
 *
 * Background renewal (rt_blocking_auto_renew) adds a helper thread that
 * runs the same loop between calls. The loop belongs to one thread at a
 * time: a call takes it (stopping the helper's uv_run with an async handle
 * and waiting until it returned), runs it, and gives it back; the mutex
 * handing it over orders every access of the two threads. */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "common.h"

/* The outcome of the call in progress. */
typedef struct call {
  int done;
  int status;
  int flag; /* owned / locked */
  rt_lock_t *lock;
} call_t;

struct rt_blocking_s {
  uv_loop_t loop;
  uv_async_t wake; /* rt_blocking_interrupt() from anywhere */
  rt_client_t *client;
  call_t *call;             /* the call in progress, or NULL */
  rt_lock_t *waiting;       /* the wait in progress, for interrupts */
  rt_multi_t *waiting_all;  /* the multi-lock wait in progress */
  rt_observer_t *watching;  /* rt_blocking_leader_change's observer */
  rt_leader_copy_t *leader; /* what it compares with and fills in */
  uv_timer_t timer;         /* rt_blocking_leader_change's deadline */
  atomic_int interrupted;   /* an interrupt nobody consumed yet */
  int closed;               /* the client's close callback ran */
  int has_helper;           /* the helper thread and what follows exist */
  uv_thread_t helper;
  uv_async_t pause; /* stops the helper's uv_run */
  uv_mutex_t mu;    /* guards the fields below */
  uv_cond_t cv;
  int in_call;   /* the calling thread has the loop */
  int running;   /* the helper is in uv_run */
  int quit;      /* the helper must end */
  unsigned turn; /* calls ended: the helper runs once after each */
};

/* ---- the loop between two threads ---------------------------------------- */

static void on_pause(uv_async_t *async) { uv_stop(async->loop); }

/* Run the loop whenever no call has it, until told to quit. */
static void helper_main(void *arg) {
  rt_blocking_t *b = arg;
  unsigned seen = 0; /* it starts inside a call: turn is still 0 */
  uv_mutex_lock(&b->mu);
  while (!b->quit) {
    if (b->in_call || b->turn == seen) {
      uv_cond_wait(&b->cv, &b->mu);
      continue;
    }
    seen = b->turn;
    b->running = 1;
    uv_mutex_unlock(&b->mu);
    uv_run(&b->loop, UV_RUN_DEFAULT); /* until on_pause */
    uv_mutex_lock(&b->mu);
    b->running = 0;
    uv_cond_broadcast(&b->cv);
  }
  uv_mutex_unlock(&b->mu);
}

/* The calling thread takes the loop from the helper (if any), and brings
 * the loop's clock up to date: it stood still since the last call. */
static void take_loop(rt_blocking_t *b) {
  if (b->has_helper) {
    uv_mutex_lock(&b->mu);
    b->in_call = 1;
    if (b->running)
      uv_async_send(&b->pause);
    while (b->running)
      uv_cond_wait(&b->cv, &b->mu);
    uv_mutex_unlock(&b->mu);
  }
  uv_update_time(&b->loop);
}

static void give_loop(rt_blocking_t *b) {
  if (b->has_helper) {
    uv_mutex_lock(&b->mu);
    b->in_call = 0;
    b->turn++;
    uv_cond_broadcast(&b->cv);
    uv_mutex_unlock(&b->mu);
  }
}

/* Called with the loop taken; the helper starts when it is given back. */
static int start_helper(rt_blocking_t *b) {
  if (uv_mutex_init(&b->mu) != 0)
    return RT_ENOMEM;
  if (uv_cond_init(&b->cv) != 0) {
    uv_mutex_destroy(&b->mu);
    return RT_ENOMEM;
  }
  if (uv_async_init(&b->loop, &b->pause, on_pause) != 0)
    goto fail;
  uv_unref((uv_handle_t *)&b->pause);
  b->in_call = 1;
  if (uv_thread_create(&b->helper, helper_main, b) != 0) {
    uv_close((uv_handle_t *)&b->pause, NULL);
    goto fail;
  }
  b->has_helper = 1;
  return 0;
fail:
  uv_cond_destroy(&b->cv);
  uv_mutex_destroy(&b->mu);
  return RT_ENOMEM;
}

/* With the loop taken: end the helper thread. */
static void stop_helper(rt_blocking_t *b) {
  uv_mutex_lock(&b->mu);
  b->quit = 1;
  uv_cond_broadcast(&b->cv);
  uv_mutex_unlock(&b->mu);
  uv_thread_join(&b->helper);
  uv_close((uv_handle_t *)&b->pause, NULL);
  uv_cond_destroy(&b->cv);
  uv_mutex_destroy(&b->mu);
  b->has_helper = 0;
}

/* Make call the one in progress, with the loop (whose clock is brought up
 * to date, or every timeout the call starts would count the idle time
 * since the last call as already spent). First the loop takes in what
 * came while it stood still: a failover's first step on a Sentinel link
 * must drop the connection to the old master before the call is sent
 * there (it still takes writes: a release there is lost, a grant there
 * overlaps the new master's). */
static void begin_call(rt_blocking_t *b, call_t *call) {
  take_loop(b);
  uv_run(&b->loop, UV_RUN_NOWAIT);
  b->call = call;
}

/* The call is over: the loop goes back to the helper, if any. */
static void end_call(rt_blocking_t *b) {
  b->call = NULL;
  b->waiting = NULL;
  b->waiting_all = NULL;
  give_loop(b);
}

/* Run the private loop until the call's callback ran. An open client keeps
 * the loop alive, so uv_run() only runs dry if the client is gone: then the
 * callback can never come. */
static int run_call(rt_blocking_t *b, call_t *call) {
  while (!call->done) {
    if (uv_run(&b->loop, UV_RUN_ONCE) == 0 && !call->done) {
      call->status = RT_ECLOSED;
      break;
    }
  }
  end_call(b);
  return call->status;
}

static void finish(rt_blocking_t *b, int status) {
  if (b->call != NULL) {
    b->call->status = status;
    b->call->done = 1;
  }
}

/* Run a call that start_err says started (0), or end it with that error. */
static int run_started(rt_blocking_t *b, call_t *call, int start_err) {
  if (start_err != 0) {
    end_call(b);
    return start_err;
  }
  return run_call(b, call);
}

/* ---- callbacks (data is always b: lock handles outlive any one call) ----- */

static void on_connect(rt_client_t *client, int status, void *data) {
  RT__UNUSED(client);
  finish(data, status);
}

static void on_close(rt_client_t *client, void *data) {
  rt_blocking_t *b = data;
  RT__UNUSED(client);
  b->closed = 1;
}

static void on_lock(rt_lock_t *lock, int status, void *data) {
  rt_blocking_t *b = data;
  if (b->call != NULL)
    b->call->lock = lock;
  finish(b, status);
}

static void on_owned(rt_lock_t *lock, int status, int owned, void *data) {
  rt_blocking_t *b = data;
  RT__UNUSED(lock);
  if (b->call != NULL)
    b->call->flag = owned;
  finish(b, status);
}

static void on_multi(rt_multi_t *multi, int status, void *data) {
  RT__UNUSED(multi);
  finish(data, status);
}

static void on_locked(rt_client_t *client, int status, int locked, void *data) {
  rt_blocking_t *b = data;
  RT__UNUSED(client);
  if (b->call != NULL)
    b->call->flag = locked;
  finish(b, status);
}

/* An interrupt ends the wait in progress; with none in progress it stays
 * set for the next wait (a signal that came a moment too early is not
 * lost). */
static void on_wake(uv_async_t *async) {
  rt_blocking_t *b = async->data;
  if (b->call == NULL || b->call->done)
    return;
  if (b->waiting != NULL && rt_lock_state(b->waiting) == RT_LOCK_QUEUED &&
      atomic_exchange(&b->interrupted, 0))
    rt_cancel(b->waiting);
  else if (b->waiting_all != NULL && atomic_exchange(&b->interrupted, 0))
    rt_cancel_all(b->waiting_all);
  else if (b->watching != NULL && atomic_exchange(&b->interrupted, 0))
    finish(b, RT_ECANCELED);
}

static void wake_closed(uv_handle_t *h) { RT__UNUSED(h); }

/* Close the client (if any) and every handle, then the loop, then b. */
static void destroy(rt_blocking_t *b) {
  take_loop(b); /* as begin_call: closing sends commands */
  if (b->has_helper)
    stop_helper(b);
  if (b->client != NULL && rt_client_close(b->client, on_close, b) == 0) {
    while (!b->closed && uv_run(&b->loop, UV_RUN_ONCE) != 0) {
    }
  }
  uv_close((uv_handle_t *)&b->wake, wake_closed);
  uv_close((uv_handle_t *)&b->timer, wake_closed);
  uv_run(&b->loop, UV_RUN_DEFAULT);
  uv_loop_close(&b->loop);
  rt__free(b);
}

/* ---- public API ---------------------------------------------------------- */

int rt_blocking_open(const rt_options_t *opts, rt_blocking_t **out) {
  if (out == NULL)
    return RT_EINVAL;
  rt_blocking_t *b = rt__calloc(1, sizeof(*b));
  if (b == NULL)
    return RT_ENOMEM;
  atomic_init(&b->interrupted, 0);
  /* uv_loop_init fails only without memory or file descriptors. */
  if (uv_loop_init(&b->loop) != 0) {
    rt__free(b);
    return RT_ENOMEM;
  }
  if (uv_async_init(&b->loop, &b->wake, on_wake) != 0) {
    uv_loop_close(&b->loop);
    rt__free(b);
    return RT_ENOMEM;
  }
  b->wake.data = b;
  uv_unref((uv_handle_t *)&b->wake);  /* only the client keeps the loop up */
  uv_timer_init(&b->loop, &b->timer); /* cannot fail */
  b->timer.data = b;

  call_t call = {0};
  begin_call(b, &call);
  int err = rt_client_open(&b->loop, opts, on_connect, b, &b->client);
  if (err != 0) {
    b->client = NULL;
    end_call(b);
    destroy(b);
    return err;
  }
  err = run_call(b, &call);
  if (err != 0) {
    destroy(b);
    return err;
  }
  *out = b;
  return 0;
}

int rt_blocking_close(rt_blocking_t *b) {
  if (b == NULL || b->call != NULL)
    return RT_EINVAL;
  destroy(b);
  return 0;
}

rt_client_t *rt_blocking_client(const rt_blocking_t *b) {
  return b != NULL ? b->client : NULL;
}

void rt_blocking_interrupt(rt_blocking_t *b) {
  if (b == NULL)
    return;
  atomic_store(&b->interrupted, 1);
  uv_async_send(&b->wake);
}

/* A call may start: b exists and no call is running on it (a call made
 * from inside another one, e.g. from a signal handler, is refused). */
static int can_call(const rt_blocking_t *b) {
  return b != NULL && b->call == NULL ? 0 : RT_EINVAL;
}

/* lock must be one of b's. */
static int check_lock(const rt_blocking_t *b, const rt_lock_t *lock) {
  int err = can_call(b);
  if (err == 0 && (lock == NULL || rt_lock_client(lock) != b->client))
    err = RT_EINVAL;
  return err;
}

/* A wait starts (the call begun) if b is free and has_out; an interrupt
 * that came before it ends it at once with RT_ECANCELED. */
static int wait_start(rt_blocking_t *b, int has_out, call_t *call) {
  int err = can_call(b);
  if (err == 0 && !has_out)
    err = RT_EINVAL;
  if (err == 0 && atomic_exchange(&b->interrupted, 0))
    err = RT_ECANCELED;
  if (err == 0)
    begin_call(b, call);
  return err;
}

int rt_blocking_wait(rt_blocking_t *b, const void *name, size_t len,
                     int64_t ttl_ms, int64_t timeout_ms, rt_lock_t **out) {
  return rt_blocking_wait_ex(b, name, len, NULL, ttl_ms, timeout_ms, out);
}

int rt_blocking_wait_ex(rt_blocking_t *b, const void *name, size_t len,
                        const rt_request_t *req, int64_t ttl_ms,
                        int64_t timeout_ms, rt_lock_t **out) {
  call_t call = {0};
  rt_lock_t *lock;
  if (out != NULL)
    *out = NULL;
  int err = wait_start(b, out != NULL, &call);
  if (err != 0)
    return err;
  err = rt_wait_ex(b->client, name, len, req, ttl_ms, timeout_ms, on_lock, b,
                   &lock);
  if (err != 0) {
    end_call(b);
    return err;
  }
  b->waiting = lock;
  err = run_call(b, &call);
  if (err == 0)
    *out = lock;
  return err;
}

int rt_blocking_try_lock(rt_blocking_t *b, const void *name, size_t len,
                         int64_t ttl_ms, rt_lock_t **out) {
  return rt_blocking_try_lock_ex(b, name, len, NULL, ttl_ms, out);
}

int rt_blocking_try_lock_ex(rt_blocking_t *b, const void *name, size_t len,
                            const rt_request_t *req, int64_t ttl_ms,
                            rt_lock_t **out) {
  int err = can_call(b);
  if (err == 0 && out == NULL)
    err = RT_EINVAL;
  if (err != 0)
    return err;
  *out = NULL;
  call_t call = {0};
  begin_call(b, &call);
  err = rt_try_lock_ex(b->client, name, len, req, ttl_ms, on_lock, b);
  if (err != 0) {
    end_call(b);
    return err;
  }
  err = run_call(b, &call);
  if (err == 0)
    *out = call.lock;
  return err;
}

int rt_blocking_signal(rt_blocking_t *b, rt_lock_t *lock) {
  int err = check_lock(b, lock);
  if (err != 0)
    return err;
  call_t call = {0};
  begin_call(b, &call);
  err = rt_signal(lock, on_lock, b);
  if (err != 0) {
    end_call(b);
    return err;
  }
  return run_call(b, &call);
}

int rt_blocking_extend(rt_blocking_t *b, rt_lock_t *lock, int64_t ttl_ms) {
  int err = check_lock(b, lock);
  if (err != 0)
    return err;
  call_t call = {0};
  begin_call(b, &call);
  err = rt_extend(lock, ttl_ms, on_lock, b);
  if (err != 0) {
    end_call(b);
    return err;
  }
  return run_call(b, &call);
}

int rt_blocking_owned(rt_blocking_t *b, rt_lock_t *lock, int *owned) {
  int err = check_lock(b, lock);
  if (err == 0 && owned == NULL)
    err = RT_EINVAL;
  if (err != 0)
    return err;
  *owned = 0;
  call_t call = {0};
  begin_call(b, &call);
  err = rt_owned(lock, on_owned, b);
  if (err != 0) {
    end_call(b);
    return err;
  }
  err = run_call(b, &call);
  if (err == 0)
    *owned = call.flag;
  return err;
}

int rt_blocking_locked(rt_blocking_t *b, const void *name, size_t len,
                       int *locked) {
  int err = can_call(b);
  if (err == 0 && locked == NULL)
    err = RT_EINVAL;
  if (err != 0)
    return err;
  *locked = 0;
  call_t call = {0};
  begin_call(b, &call);
  err = rt_locked(b->client, name, len, on_locked, b);
  if (err != 0) {
    end_call(b);
    return err;
  }
  err = run_call(b, &call);
  if (err == 0)
    *locked = call.flag;
  return err;
}

int rt_blocking_auto_renew(rt_blocking_t *b, rt_lock_t *lock,
                           int64_t every_ms) {
  int err = check_lock(b, lock);
  if (err != 0)
    return err;
  take_loop(b);
  err = rt_lock_auto_renew(lock, every_ms);
  if (err == 0 && every_ms != RT_RENEW_OFF && !b->has_helper) {
    err = start_helper(b);
    if (err != 0)
      rt_lock_auto_renew(lock, RT_RENEW_OFF);
  }
  give_loop(b);
  return err;
}

int64_t rt_blocking_lease_left_ms(rt_blocking_t *b, const rt_lock_t *lock) {
  if (check_lock(b, lock) != 0)
    return 0;
  take_loop(b);
  int64_t left = rt_lock_lease_left_ms(lock);
  give_loop(b);
  return left;
}

/* ---- elections and multi-locks ---------------------------------------- */

int rt_blocking_proclaim(rt_blocking_t *b, rt_lock_t *lock, const char *value,
                         size_t value_len) {
  int err = check_lock(b, lock);
  if (err != 0)
    return err;
  call_t call = {0};
  begin_call(b, &call);
  return run_started(b, &call, rt_proclaim(lock, value, value_len, on_lock, b));
}

int rt_blocking_wait_all(rt_blocking_t *b, const void *const *names,
                         const size_t *lens, size_t n, int64_t ttl_ms,
                         int64_t timeout_ms, rt_multi_t **out) {
  call_t call = {0};
  rt_multi_t *multi = NULL;
  if (out != NULL)
    *out = NULL;
  int err = wait_start(b, out != NULL, &call);
  if (err != 0)
    return err;
  err = rt_wait_all(b->client, names, lens, n, ttl_ms, timeout_ms, on_multi, b,
                    &multi);
  b->waiting_all = err == 0 ? multi : NULL;
  err = run_started(b, &call, err);
  if (err == 0)
    *out = multi;
  return err;
}

int rt_blocking_signal_all(rt_blocking_t *b, rt_multi_t *multi) {
  int err = can_call(b);
  if (err == 0 && multi == NULL)
    err = RT_EINVAL;
  if (err != 0)
    return err;
  call_t call = {0};
  begin_call(b, &call);
  return run_started(b, &call, rt_signal_all(multi, on_multi, b));
}

/* Whether l is news to the copy c, by the rule one observer follows
 * (observe.c, newer): each call has an observer of its own, whose first
 * report is a read that knows nothing of what the caller saw before, so
 * the copy stands for what was reported last. A zeroed copy takes any
 * other state. Else a higher fence is news and a lower one is not (a read
 * of a resource whose keys went reads fence 0), except a leader's going:
 * nobody after a leader is news whatever the fence the read found. At
 * the same fence (one leader's term), a value or a leader's going is. */
static int leader_differs(const rt_leader_t *l, const rt_leader_copy_t *c) {
  const char *id = l->id != NULL ? l->id : "";
  if (c->fence == 0 && c->id[0] == '\0')
    return l->fence != 0 || id[0] != '\0' || l->value_len != c->value_len ||
           memcmp(l->value, c->value, l->value_len) != 0;
  if (l->fence > c->fence)
    return 1;
  if (c->id[0] == '\0')
    return 0; /* nobody, and nothing newer */
  if (l->id == NULL)
    return 1; /* the leader went */
  return l->fence == c->fence &&
         (strcmp(id, c->id) != 0 || l->value_len != c->value_len ||
          memcmp(l->value, c->value, l->value_len) != 0);
}

static void on_leader(rt_observer_t *obs, int status, const rt_leader_t *l,
                      void *data) {
  rt_blocking_t *b = data;
  RT__UNUSED(obs);
  if (b->watching == NULL || b->call == NULL || b->call->done)
    return;
  if (status != 0 && status != RT_EDISCONNECTED) {
    b->watching = NULL; /* its last call: the handle goes */
    finish(b, status);
  } else if (status == 0 && leader_differs(l, b->leader)) {
    rt_leader_copy_t *c = b->leader;
    snprintf(c->id, sizeof(c->id), "%s", l->id != NULL ? l->id : "");
    memcpy(c->value, l->value, l->value_len);
    c->value[l->value_len] = '\0';
    c->value_len = l->value_len;
    /* Nobody leads: never a fence below the one seen last (its keys went
     * with the last lease), as one observer reports it. */
    if (l->fence > c->fence || l->id != NULL)
      c->fence = l->fence;
    c->deadline_ms = l->deadline_ms;
    finish(b, 0);
  }
}

static void on_leader_timeout(uv_timer_t *t) {
  finish(t->data, RT_EWAITTIMEOUT);
}

int rt_blocking_leader_change(rt_blocking_t *b, const void *name, size_t len,
                              int64_t timeout_ms, rt_leader_copy_t *state) {
  call_t call = {0};
  if (timeout_ms < 0 && timeout_ms != RT_FOREVER)
    return RT_EINVAL;
  int err = wait_start(b, state != NULL, &call);
  if (err != 0)
    return err;
  b->leader = state;
  err = rt_observe(b->client, name, len, on_leader, b, &b->watching);
  if (err == 0 && timeout_ms != RT_FOREVER)
    uv_timer_start(&b->timer, on_leader_timeout, (uint64_t)timeout_ms, 0);
  if (err != 0)
    b->watching = NULL;
  err = run_started(b, &call, err);
  uv_timer_stop(&b->timer);
  if (b->watching != NULL) /* not ended by its last call */
    rt_observe_stop(b->watching);
  b->watching = NULL;
  b->leader = NULL;
  return err;
}
