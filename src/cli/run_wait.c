/* redturn run until the lock is held: the connect, retried within the
 * wait budget after a transient failure; the wait and its progress. */
#include "run.h"

/* ---- waiting ------------------------------------------------------------- */

/* The wait (or the try) ended with status, not 0: say why and exit. */
static void wait_failed(run_t *r, int status) {
  char msg[160];
  r->lock = NULL;
  r->multi = NULL;
  if (r->signo != 0 && status == RT_ECANCELED) {
    run_finish(r, CLI_SIGNAL_BASE + r->signo);
  } else if (status == RT_EWAITTIMEOUT) {
    cli_fmt_ms(msg, sizeof(msg), r->wait_ms);
    char after[200];
    snprintf(after, sizeof(after), " after %s (-w/--timeout)", msg);
    run_say(r, "gave up waiting for ", after);
    run_finish(r, r->conflict_code);
  } else if (status == RT_EBUSY) {
    run_say(r, "", " is locked (not waiting: -n, or a timeout of 0)");
    run_finish(r, r->conflict_code);
  } else {
    char why[512], after[600];
    snprintf(after, sizeof(after), " failed: %s",
             cli_why(r->client, status, why, sizeof(why)));
    run_say(r, "waiting for ", after);
    run_finish(r, cli_exit_for(status));
  }
}

/* Everything is held (r->lock or r->multi): run the command. */
static void acquired(run_t *r) {
  if (r->signo != 0) {
    /* A signal came while a try-lock was in flight. */
    r->exit_code = CLI_SIGNAL_BASE + r->signo;
    run_release(r);
    return;
  }
  if (r->ever_shown) {
    char waited[32], after[96];
    cli_fmt_ms(waited, sizeof(waited), (int64_t)(cli_now_ms() - r->wait_start));
    snprintf(after, sizeof(after), " (fence %llu) after %s",
             (unsigned long long)rt_lock_fence(r->lock), waited);
    fprintf(stderr, "redturn: acquired ");
    cli_put_name(stderr, r->name, r->len);
    fprintf(stderr, "%s\n", after);
  }
  run_start_command(r);
}

static void on_all_granted(rt_multi_t *multi, int status, void *data) {
  run_t *r = data;
  if (r->state != S_WAITING) {
    /* Closing: the client gives the locks back (RT_ECLOSED frees the
     * handle; after a failure the library frees it). */
    if (status == 0)
      rt_signal_all(multi, run_on_all_released, r);
    return;
  }
  if (status != 0) {
    wait_failed(r, status);
    return;
  }
  r->multi = multi;
  acquired(r);
}

static void on_granted(rt_lock_t *lock, int status, void *data) {
  run_t *r = data;
  uv_timer_stop(&r->tick);
  run_clear_progress(r);
  if (r->state != S_WAITING)
    return; /* closing: the client's close cleans up */
  if (status != 0) {
    wait_failed(r, status);
    return;
  }
  r->lock = lock;
  acquired(r);
}

static void on_info(rt_client_t *c, int status, const rt_queue_info_t *info,
                    void *data) {
  run_t *r = data;
  (void)c;
  r->asking = 0;
  if (r->state != S_WAITING || r->lock == NULL || status != 0)
    return;
  const char *me = rt_lock_id(r->lock);
  long ahead = -1;
  if (info->holder != NULL && strcmp(info->holder, me) == 0)
    ahead = 0;
  for (size_t i = 0; ahead < 0 && i < info->nwaiters; i++)
    if (strcmp(info->waiters[i], me) == 0)
      ahead = (long)i + 1;
  if (ahead < 0 && r->hint < MAX_HINT)
    r->hint *= 2;
  r->ahead = ahead;
  r->has_holder = info->holder != NULL;
  snprintf(r->holder_label, sizeof(r->holder_label), "%s",
           info->holder != NULL ? info->holder_label : "");
  r->held_ms = info->held_ms;
  r->lease_left_ms = info->lease_left_ms;
  r->info_at = cli_now_ms();
  r->have_info = 1;
  run_draw(r);
}

static void on_tick_waiting(uv_timer_t *t) {
  run_t *r = t->data;
  if (r->state != S_WAITING || r->lock == NULL)
    return;
  uint64_t now = cli_now_ms();
  if (!r->asking && (!r->have_info || now - r->asked_at >= ASK_EVERY_MS)) {
    if (r->hint == 0)
      r->hint = rt_lock_position(r->lock) + 16;
    if (rt_inspect(r->client, r->name, r->len, r->hint, on_info, r) == 0) {
      r->asking = 1;
      r->asked_at = now;
    }
  }
  run_draw(r);
}

/* The wait budget left (RT_FOREVER, or ms; 0: none). */
static int64_t budget_left(const run_t *r) {
  if (r->wait_ms == RT_FOREVER)
    return RT_FOREVER;
  int64_t used = (int64_t)(cli_now_ms() - r->start_ms);
  return r->wait_ms > used ? r->wait_ms - used : 0;
}

static void connect_again(uv_timer_t *t) {
  run_t *r = t->data;
  if (r->state != S_CONNECTING)
    return;
  int err = rt_client_open(&r->loop, &r->opts, run_on_connected, r, &r->client);
  if (err != 0) {
    r->client = NULL;
    run_finish(r, cli_options_error("redturn run", r->common, err));
  }
}

/* The failed client closed: connect again after the backoff (50 ms
 * doubling to 1 s). */
static void on_failed_closed(rt_client_t *c, void *data) {
  run_t *r = data;
  (void)c;
  if (r->state == S_CONNECTING)
    uv_timer_start(&r->retry, connect_again, (uint64_t)r->retry_ms, 0);
}

/* Lost first connects retried in a row at most: a loss that keeps coming
 * back is no accident (a plain connect to a TLS port is lost every time,
 * and its message says so). */
#define RUN_LOST_RETRIES 5

/* A failure of the first connect that the next one may not meet: the
 * server was reached and the connection lost in the handshake (a CLIENT
 * KILL, a restart: RT_ECONNECT, whose message conn.c words "connection to
 * ... lost"), or it did not answer in time. A refused connection, a bad
 * password or a wrong server are no reason to wait. */
static int transient(const run_t *r, rt_client_t *c, int status) {
  if (status == RT_EDISCONNECTED || status == RT_ETIMEDOUT)
    return 1;
  const char *why = rt_client_last_error(c);
  return status == RT_ECONNECT && r->retries < RUN_LOST_RETRIES &&
         why != NULL && strstr(why, " lost: ") != NULL;
}

void run_on_connected(rt_client_t *c, int status, void *data) {
  run_t *r = data;
  int err;
  if (r->state != S_CONNECTING)
    return;
  if (status != 0) {
    int64_t left = budget_left(r);
    int64_t next = r->retries == 0 ? 50 : r->retry_ms * 2;
    if (transient(r, c, status) && (left == RT_FOREVER || left > next)) {
      /* Within the wait budget, as flock: a transient failure is no reason
       * to give up. */
      r->retries++;
      r->retry_ms = next > 1000 ? 1000 : next;
      r->client = NULL;
      rt_client_close(c, on_failed_closed, r);
      return;
    }
    run_clear_progress(r);
    run_finish(r, cli_connect_error("redturn run", r->common, c, status));
    return;
  }
  r->state = S_WAITING;
  r->wait_start = cli_now_ms();
  int64_t wait_ms = r->wait_ms;
  if (r->retries > 0 && wait_ms > 0) {
    /* The connects took part of the budget. */
    wait_ms = budget_left(r);
    if (wait_ms < 1)
      wait_ms = 1;
  }
  if (r->nnames > 0) {
    err = rt_wait_all(c, r->names, r->lens, r->nnames, r->ttl_ms, wait_ms,
                      on_all_granted, r, &r->multi);
  } else if (r->wait_ms == 0) {
    err = rt_try_lock_ex(c, r->name, r->len, &r->req, r->ttl_ms, on_granted, r);
  } else {
    err = rt_wait_ex(c, r->name, r->len, &r->req, r->ttl_ms, wait_ms,
                     on_granted, r, &r->lock);
    if (err == 0 && r->progress)
      uv_timer_start(&r->tick, on_tick_waiting, DRAW_EVERY_MS, DRAW_EVERY_MS);
  }
  if (err != 0) {
    char msg[160];
    snprintf(msg, sizeof(msg), ": %s", rt_strerror(err));
    run_say(r, "cannot wait for ", msg);
    run_finish(r, cli_exit_for(err));
  }
}
