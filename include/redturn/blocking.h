/* redturn/blocking.h: the blocking API, part of redturn.h.
 *
 * rt_blocking_t and the rt_blocking_* calls, for programs without a libuv
 * loop. Not a header of its own: include <redturn.h>, which includes this
 * one at its end (as uv.h includes uv/unix.h), after the types and calls
 * these build on.
 */
#ifndef REDTURN_BLOCKING_H
#define REDTURN_BLOCKING_H

#ifndef REDTURN_H
#error "include redturn.h, not redturn/blocking.h"
#endif

/* ---- Blocking API -------------------------------------------------------- */

/* For programs without a libuv loop. An rt_blocking_t is a client on a
 * private loop that runs only inside the rt_blocking_* calls, in the calling
 * thread, until the request is answered; between calls nothing runs (no
 * reconnect, no notice handling, no lease renewal: those happen during the
 * next call), unless background renewal was asked for with
 * rt_blocking_auto_renew(): then a helper thread runs the loop between
 * calls (see there).
 *
 * Threads: calls on one rt_blocking_t must never overlap. Use one
 * rt_blocking_t per thread (they share nothing and may run in parallel), or
 * serialize every call on a shared one, and on its locks, with your own
 * mutex. Only rt_blocking_interrupt() may be called from any thread or from
 * a signal handler.
 *
 * Locks returned here are ordinary rt_lock_t handles of rt_blocking_client():
 * the rt_lock_* accessors work on them (but see rt_blocking_auto_renew;
 * rt_lock_get_data() returns b unless rt_lock_set_data() replaced it), and
 * each granted lock needs exactly one rt_blocking_signal(), lost or not. */
typedef struct rt_blocking_s rt_blocking_t;

/* Connect (both connections, channel subscribed) and return the client in
 * *out. Returns 0, an option error (RT_EURL, RT_EPREFIX, RT_ETTL, ...), or
 * why connecting failed (RT_ECONNECT, also when connect_timeout_ms passed;
 * RT_EAUTH, ...); on error nothing is left allocated and *out is
 * untouched. */
RT_EXTERN int rt_blocking_open(const rt_options_t *opts, rt_blocking_t **out);

/* Release held locks and remove waiting entries in Redis (as
 * rt_client_close), end b's helper thread if it has one, close the
 * connections and free b. Handles of b's locks become invalid. RT_EINVAL if
 * b is NULL or a call is running on it. */
RT_EXTERN int rt_blocking_close(rt_blocking_t *b);

/* Wait for the lock as rt_wait() does, at most timeout_ms (RT_FOREVER: no
 * timeout). Returns 0 with the held lock in *out, or an error with *out
 * NULL: RT_EWAITTIMEOUT, RT_ECANCELED (rt_blocking_interrupt), the argument
 * errors of rt_wait, connection errors. After an error the request has
 * been taken out of the queue, as rt_cancel() does. */
RT_EXTERN int rt_blocking_wait(rt_blocking_t *b, const void *name, size_t len,
                               int64_t ttl_ms, int64_t timeout_ms,
                               rt_lock_t **out);

/* Take the lock only if it is free now: 0 with *out, or RT_EBUSY. */
RT_EXTERN int rt_blocking_try_lock(rt_blocking_t *b, const void *name,
                                   size_t len, int64_t ttl_ms, rt_lock_t **out);

/* rt_blocking_wait() and rt_blocking_try_lock() for the kind of lock req
 * asks for (NULL: a mutex), as rt_wait_ex() and rt_try_lock_ex(): a
 * semaphore's permits, a read-write lock's shared or exclusive side. */
RT_EXTERN int rt_blocking_wait_ex(rt_blocking_t *b, const void *name,
                                  size_t len, const rt_request_t *req,
                                  int64_t ttl_ms, int64_t timeout_ms,
                                  rt_lock_t **out);
RT_EXTERN int rt_blocking_try_lock_ex(rt_blocking_t *b, const void *name,
                                      size_t len, const rt_request_t *req,
                                      int64_t ttl_ms, rt_lock_t **out);

/* Release lock and hand it on; the handle is freed. Returns 0, or RT_ELOST
 * if the lease had ended (or the holder was evicted) before the release,
 * or rt_signal's errors. */
RT_EXTERN int rt_blocking_signal(rt_blocking_t *b, rt_lock_t *lock);

/* Push the lease of a held lock to ttl_ms from now (Redis clock). Returns 0
 * or RT_ELOST (the lock is not ours any more: still call
 * rt_blocking_signal), or rt_extend's errors. */
RT_EXTERN int rt_blocking_extend(rt_blocking_t *b, rt_lock_t *lock,
                                 int64_t ttl_ms);

/* Ask Redis whether lock is still held: *owned is 1 or 0. */
RT_EXTERN int rt_blocking_owned(rt_blocking_t *b, rt_lock_t *lock, int *owned);

/* Ask Redis whether anyone holds name[0..len) now: *locked is 1 or 0. */
RT_EXTERN int rt_blocking_locked(rt_blocking_t *b, const void *name, size_t len,
                                 int *locked);

/* Renew a held lock of b in the background, as rt_lock_auto_renew() does
 * (every_ms: the period, RT_RENEW_DEFAULT for a third of the lease,
 * RT_RENEW_OFF to stop), also while the calling thread is in its own code.
 * The first call that turns renewal on starts b's helper thread, which
 * lives until rt_blocking_close(): it runs b's private loop whenever no
 * rt_blocking_* call runs on b (each call takes the loop over, and gives
 * it back when it returns), so renewals, reconnects and notices are
 * handled between calls. If a renewal fails (Redis says the lock is not
 * ours, or its lease ends by the local clock while Redis is unreachable)
 * the lock turns RT_LOCK_LOST: rt_blocking_lease_left_ms() then reads 0,
 * rt_blocking_signal() reports RT_ELOST, and a callback set with
 * rt_lock_on_lost() runs, on the helper thread if no call was running.
 * Once the helper runs, the client and its locks change between calls: do
 * not call other rt_lock_* / rt_client_* functions on them then, except
 * those answering what a grant fixed (rt_lock_fence, rt_lock_id,
 * rt_lock_resource, rt_lock_client, rt_client_id); ask through
 * rt_blocking_* calls. Returns rt_lock_auto_renew()'s errors, RT_EINVAL
 * (not b's lock, or a call is running) or RT_ENOMEM (no thread). */
RT_EXTERN int rt_blocking_auto_renew(rt_blocking_t *b, rt_lock_t *lock,
                                     int64_t every_ms);

/* rt_lock_lease_left_ms() of b's lock, safe while b's helper thread runs:
 * 0 once the lock is lost or not held (or for a bad argument). */
RT_EXTERN int64_t rt_blocking_lease_left_ms(rt_blocking_t *b,
                                            const rt_lock_t *lock);

/* End the wait in progress on b with RT_ECANCELED (its entry leaves the
 * queue). With no wait in progress, the next rt_blocking_wait() returns
 * RT_ECANCELED at once instead (an interrupt is never lost, and is consumed
 * by one wait). Safe from any thread and from signal handlers, while b is
 * open. */
RT_EXTERN void rt_blocking_interrupt(rt_blocking_t *b);

/* rt_proclaim() on b's election lock: the new value is set (0) or
 * RT_ELOST (no longer the leader), or rt_proclaim's errors. */
RT_EXTERN int rt_blocking_proclaim(rt_blocking_t *b, rt_lock_t *lock,
                                   const char *value, size_t value_len);

/* rt_wait_all() on b: 0 with every resource held in *out (release them
 * with rt_blocking_signal_all), or the first error with *out NULL after
 * the resources taken so far were released (RT_EWAITTIMEOUT, RT_ECANCELED
 * from rt_blocking_interrupt, RT_ELOST as rt_wait_all's, rt_wait_all's
 * argument errors). */
RT_EXTERN int rt_blocking_wait_all(rt_blocking_t *b, const void *const *names,
                                   const size_t *lens, size_t n, int64_t ttl_ms,
                                   int64_t timeout_ms, rt_multi_t **out);
/* rt_signal_all() on b: 0, or RT_ELOST if any lease had ended; multi is
 * freed. */
RT_EXTERN int rt_blocking_signal_all(rt_blocking_t *b, rt_multi_t *multi);

/* An election's state, copied (rt_blocking_leader_change). */
typedef struct rt_leader_copy_s {
  char id[64];                  /* the leader's request id; "" for nobody */
  char value[RT_VALUE_MAX + 1]; /* its value, NUL-terminated */
  size_t value_len;
  uint64_t fence;      /* as rt_leader_t */
  int64_t deadline_ms; /* as rt_leader_t; 0 for nobody */
} rt_leader_copy_t;

/* Wait, at most timeout_ms (RT_FOREVER: no timeout), until the state of
 * the election name[0..len) differs from *state (another leader, fence or
 * value, or nobody leading), through rt_observe(), and copy it into
 * *state. A zeroed *state that differs from the current one returns that
 * at once: a loop of calls sees every change an observer would, changes
 * between two calls collapsing to the latest, judged as one observer
 * does: a state with a lower fence than *state is no news (never the same
 * state twice, fences never backwards), except nobody after a leader,
 * which keeps *state's fence (the last one). Returns 0, RT_EWAITTIMEOUT
 * (*state unchanged), RT_ECANCELED (rt_blocking_interrupt), RT_EINVAL
 * (NULL state, a negative timeout), or rt_observe's errors and last
 * statuses (RT_EKIND, ...). */
RT_EXTERN int rt_blocking_leader_change(rt_blocking_t *b, const void *name,
                                        size_t len, int64_t timeout_ms,
                                        rt_leader_copy_t *state);

/* The underlying client, for rt_client_id(), rt_client_stats() and
 * rt_client_locks(). Do not close it or run its loop yourself. */
RT_EXTERN rt_client_t *rt_blocking_client(const rt_blocking_t *b);
#endif /* REDTURN_BLOCKING_H */
