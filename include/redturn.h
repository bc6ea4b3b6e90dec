/* redturn: fair, first-come-first-served locks through Redis, on libuv.
 *
 * A lock request joins a per-resource FIFO queue in Redis; the first request
 * holds the lock. Releasing the lock hands it to the next request with one
 * notice to that request's client, so nobody polls. Needs Redis 7.0 or newer. Leases are measured
 * by the Redis server clock; every grant carries a fencing token that strictly
 * increases per resource.
 *
 * Conventions (as in libuv):
 *  - Functions return 0 or a negative RT_E* code; rt_strerror() explains it.
 *  - If a function that takes a callback returns an error, the callback is
 *    never called. If it returns 0, the callback runs exactly once, later,
 *    from the loop, never from inside the call.
 *  - Nothing here is thread-safe: use a client only from its loop's thread.
 *  - No global state, no hidden threads (the blocking API runs a private loop
 *    in the calling thread; only its opt-in background renewal,
 *    rt_blocking_auto_renew, starts a thread).
 *
 * The one header to include: its parts in redturn/ (options.h, blocking.h)
 * are included from here, as uv.h includes uv/unix.h.
 */
#ifndef REDTURN_H
#define REDTURN_H

/* uv.h needs POSIX declarations (pthread_rwlock_t, struct addrinfo) that a
 * strict ISO C mode (-std=c11, -std=c99) hides. When none of the feature
 * test macros is set, ask for POSIX.1-2008 here: that works when this
 * header comes before every system header of the file. Otherwise define
 * _POSIX_C_SOURCE=200809L yourself (or use -std=gnu11). */
#if defined(__STRICT_ANSI__) && !defined(__cplusplus) &&                       \
    !defined(_POSIX_C_SOURCE) && !defined(_XOPEN_SOURCE) &&                    \
    !defined(_GNU_SOURCE) && !defined(_DEFAULT_SOURCE) &&                      \
    !defined(_BSD_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif

#include <stddef.h>
#include <stdint.h>

#if defined(__GLIBC__) && !defined(__USE_XOPEN2K) && !defined(__USE_UNIX98)
/* One line, as the compiler prints it. */
/* clang-format off */
#error "redturn.h (uv.h) needs POSIX: include redturn.h before any system header, or compile with -D_POSIX_C_SOURCE=200809L or -std=gnu11"
/* clang-format on */
#endif

#include <uv.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) || defined(__clang__)
#define RT_EXTERN __attribute__((visibility("default")))
#else
#define RT_EXTERN
#endif

/* ---- Version --------------------------------------------------------- */

/* The version of this header: major, minor, patch, and the three as one
 * number (0xMMmmpp) for comparisons in #if. */
#define RT_VERSION_MAJOR 0
#define RT_VERSION_MINOR 2
#define RT_VERSION_PATCH 0
#define RT_VERSION_HEX                                                         \
  ((RT_VERSION_MAJOR << 16) | (RT_VERSION_MINOR << 8) | RT_VERSION_PATCH)

/* RT_VERSION_HEX of the library actually linked. */
RT_EXTERN unsigned int rt_version(void);
/* "MAJOR.MINOR.PATCH" of the library actually linked. */
RT_EXTERN const char *rt_version_string(void);

/* ---- Errors ----------------------------------------------------------- */

/* Every error the library reports: name, value, message. The values are
 * negative and outside libuv's (which go down to -4095), so the two can be
 * told apart in a program that handles both. RT_ENOTSUP is reserved: no
 * call of this version returns it (it keeps its value for the ABI). */
#define RT_ERRNO_MAP(XX)                                                       \
  XX(EINVAL, -5001, "invalid argument")                                        \
  XX(ENOCB, -5002, "callback must not be NULL")                                \
  XX(ENAMEEMPTY, -5003, "resource name is empty")                              \
  XX(ENAMETOOLONG, -5004, "resource name is longer than RT_NAME_MAX bytes")    \
  XX(ETTL, -5005, "lease TTL must be between 1 ms and RT_TTL_MAX")             \
  XX(ETIMEOUTARG, -5006, "wait timeout must be positive or RT_FOREVER")        \
  XX(EURL, -5007, "malformed Redis URL")                                       \
  XX(EPREFIX, -5008, "key prefix is empty, too long or contains '{' or '}'")   \
  XX(ENOMEM, -5009, "out of memory")                                           \
  XX(ECLOSED, -5010, "client is closing or closed")                            \
  XX(ECANCELED, -5011, "operation canceled")                                   \
  XX(EWAITTIMEOUT, -5012, "the wait timed out before the lock was granted")    \
  XX(EBUSY, -5013, "resource is locked by another request")                    \
  XX(ERELEASED, -5014, "lock was already released")                            \
  XX(ENOTHELD, -5015, "lock is not held yet (still waiting)")                  \
  XX(EHELD, -5016, "lock is held: release it with rt_signal")                  \
  XX(ELOST, -5017, "lock lost: lease expired or holder evicted")               \
  XX(ECONNECT, -5018, "cannot connect to Redis")                               \
  XX(EAUTH, -5019, "Redis authentication failed")                              \
  XX(ETIMEDOUT, -5020, "Redis command timed out")                              \
  XX(EDISCONNECTED, -5021, "connection to Redis lost")                         \
  XX(EWRONGTYPE, -5022, "a Redis key of this resource holds the wrong type")   \
  XX(EREDIS, -5023, "Redis replied with an error")                             \
  XX(EPROTO, -5024, "unexpected reply from Redis")                             \
  XX(ENOPERM, -5025, "Redis ACL denied a command or key")                      \
  XX(EEVICTION, -5026,                                                         \
     "Redis maxmemory-policy may evict lock keys: set noeviction "             \
     "(or opt out with allow_eviction)")                                       \
  XX(ESERVER, -5027, "Redis server too old: redturn needs Redis 7.0 or newer") \
  XX(ETLS, -5028, "TLS setup, handshake or protocol failure")                  \
  XX(ETLSVERIFY, -5029, "TLS certificate verification failed")                 \
  XX(ENOTSUP, -5030, "not supported by this version of redturn")               \
  XX(EKIND, -5031,                                                             \
     "resource is in use as another kind of lock (mutex, semaphore of "        \
     "another count, read-write lock, election)")                              \
  XX(EREADONLY, -5032,                                                         \
     "Redis server is a replica or not serving writes (READONLY, "             \
     "MASTERDOWN, LOADING)")                                                   \
  XX(EREPLICAS, -5033,                                                         \
     "fewer replicas than wait_replicas acknowledged in time")                 \
  XX(ENOMODULE, -5034,                                                         \
     "script_path module: the Redis server has no redturn module of this "     \
     "version loaded (redis-server --loadmodule "                              \
     "<libdir>/redturn/redturn_module.so)")

/* The error codes as an enum: RT_EINVAL, RT_ENOCB, ... (RT_ERRNO_MAP). */
typedef enum {
#define RT__ERR_ENUM(name, value, msg) RT_##name = (value),
  RT_ERRNO_MAP(RT__ERR_ENUM)
#undef RT__ERR_ENUM
      RT_ERRNO_END_ = -5999 /* not an error; keeps the list open-ended */
} rt_errno_t;

/* Message for an RT_E* code (or 0). Never NULL; unknown codes get a generic
 * message. The string is static. */
RT_EXTERN const char *rt_strerror(int err);
/* Symbolic name for an RT_E* code, e.g. "RT_ELOST". Never NULL. */
RT_EXTERN const char *rt_err_name(int err);

/* ---- Limits and special values ---------------------------------------- */

/* Longest resource name, in bytes. Names are arbitrary bytes (NUL, ':',
 * '{' and '}' included); they are never split or interpreted. */
#define RT_NAME_MAX 4096
/* Longest lease, in milliseconds (24 hours). */
#define RT_TTL_MAX ((int64_t)24 * 3600 * 1000)
/* Longest key prefix, in bytes. */
#define RT_PREFIX_MAX 256
/* Longest request label (rt_options_t.label), in bytes. */
#define RT_LABEL_MAX 64
/* Most permits of a semaphore (rt_request_t.of). */
#define RT_PERMITS_MAX 1000000000u
/* ttl_ms value meaning "the client's default_ttl_ms". */
#define RT_TTL_DEFAULT ((int64_t)-1)
/* timeout_ms value meaning "wait without a timeout": the largest one, so
 * no value means two things (-1 is the default of a lease or renewal, 0 is
 * "none": docs/DESIGN.md's glossary). */
#define RT_FOREVER INT64_MAX

/* The client configuration: rt_options_t and the rt_options_* calls. */
#include "redturn/options.h"

/* ---- Types ------------------------------------------------------------ */

typedef struct rt_client_s rt_client_t; /* one Redis client: opaque */
typedef struct rt_lock_s rt_lock_t;     /* one lock request: opaque */

/* The kind of lock a request asks for (rt_request_t.kind). A resource is
 * one kind at a time: while anybody holds or waits for it, a request of
 * another kind, or for a semaphore with another count, fails with
 * RT_EKIND. Every kind queues its requests in one FIFO queue, grants only
 * its front, and gives each holder its own lease and fence. */
typedef enum {
  RT_KIND_MUTEX = 0, /* one holder at a time: rt_wait()'s kind */
  /* A counting semaphore of `of` permits; the request takes `permits` of
   * them (0: all). A request at the front that does not fit waits for
   * permits to come back, and the requests behind it wait behind it. */
  RT_KIND_SEMAPHORE,
  /* A read-write lock, shared: holds together with the other shared
   * requests at the front of the queue. */
  RT_KIND_SHARED,
  /* A read-write lock, exclusive: holds alone; it waits for the shared
   * holders ahead of it, and the shared requests behind it wait for it. */
  RT_KIND_EXCLUSIVE,
  /* An election: the holder is the leader (one at a time, candidates
   * granted in FIFO order); rt_request_t.value is the candidate's value.
   * Campaign with rt_wait_ex(), change the value with rt_proclaim(),
   * resign with rt_signal(). Every change of leader or value is published
   * on the resource's observe channel (DESIGN.md section 13, Several holders). */
  RT_KIND_ELECTION
} rt_kind_t;

/* Longest election value (rt_request_t.value, rt_proclaim), in bytes. */
#define RT_VALUE_MAX 1024

/* What a request of rt_wait_ex() / rt_try_lock_ex() asks for. Zeroed (or
 * NULL) it is a mutex request, as rt_wait(). */
typedef struct rt_request_s {
  rt_kind_t kind;
  uint32_t permits; /* RT_KIND_SEMAPHORE: 1..of, or 0 for all of them */
  uint32_t of;      /* RT_KIND_SEMAPHORE: 1..RT_PERMITS_MAX */
  /* 1: reentrant. If this client holds the resource (HELD) with a lock
   * that was itself asked for as reentrant, of the same kind and permits,
   * the request is that lock again: the callback gets the same handle
   * with 0 (from the loop, no Redis call), and each such grant needs its
   * own rt_signal(); only the last one releases in Redis (one lease, one
   * fence; a lost lease loses every count: those signals get RT_ELOST).
   * Otherwise, and by default (0), a request is a new one, queued behind
   * whatever holds the resource, this client's own locks included. */
  int reentrant;
  /* RT_KIND_ELECTION: the candidate's value, value_len bytes of printable
   * ASCII (at most RT_VALUE_MAX; NULL or 0: none), stored in Redis as the
   * request's label (in place of rt_options_t.label). */
  const char *value;
  size_t value_len;
} rt_request_t;

/* Lock life cycle, as rt_lock_state() reports it. */
typedef enum {
  RT_LOCK_QUEUED = 0, /* waiting in the Redis queue (or about to be sent) */
  RT_LOCK_HELD,       /* granted: this request holds the lock */
  RT_LOCK_RELEASING,  /* rt_signal() or rt_cancel() is in flight */
  RT_LOCK_LOST        /* was held, and the lease ran out or the lock was taken
                       * away (every cause: see rt_lock_on_lost) */
} rt_lock_state_t;

/* Runs once both connections are up and the client's channel is
 * subscribed (status 0), or when that failed (RT_ECONNECT, also when
 * connect_timeout_ms passed; RT_EAUTH, RT_ESERVER for a server older than
 * 7.0, RT_EEVICTION for a maxmemory-policy that may evict keys, ...;
 * rt_client_last_error() says what happened), or with RT_ECANCELED when
 * the client is closed first. With retry_first_connect, failures are
 * retried instead of reported. Requests made before it are queued, not
 * lost. */
typedef void (*rt_connect_cb)(rt_client_t *client, int status, void *data);
/* Runs after every handle of the client closed; the client is freed when
 * it returns. */
typedef void (*rt_close_cb)(rt_client_t *client, void *data);
/* Result of rt_wait, rt_try_lock, rt_signal, rt_extend. The lock handle is
 * valid during the callback; see rt_wait() for how long after. */
typedef void (*rt_lock_cb)(rt_lock_t *lock, int status, void *data);
/* A held lock turned RT_LOCK_LOST (see rt_lock_on_lost). */
typedef void (*rt_lost_cb)(rt_lock_t *lock, void *data);
/* Result of rt_owned: owned is 1 if the lock is still held per Redis. */
typedef void (*rt_owned_cb)(rt_lock_t *lock, int status, int owned, void *data);
/* Result of rt_locked: locked is 1 if some request holds an unexpired
 * lease on the resource. */
typedef void (*rt_locked_cb)(rt_client_t *client, int status, int locked,
                             void *data);

/* A snapshot of one resource's queue, as Redis saw it at one instant. */
typedef struct rt_queue_info_s {
  int locked;             /* 1: some request holds a running lease */
  const char *holder;     /* holder's request id, or NULL if nobody holds */
  char holder_client[33]; /* client id of the holder ("" if none) */
  uint64_t fence;         /* the holder's fencing token (0 if none) */
  int64_t lease_left_ms; /* holder's lease left by the Redis clock; 0 if none */
  int64_t held_ms;       /* how long the holder has held the lock */
  size_t queue_len;      /* the holder (if any) plus the live waiters */
  size_t nwaiters;       /* entries in waiters[] (capped by max_waiters) */
  const char *const *waiters; /* live waiting request ids, in order */
  int64_t server_time_ms;     /* Redis clock at the snapshot */
  /* The holder's label (its client's rt_options_t.label), "" if it has
   * none; NULL if nobody holds. */
  const char *holder_label;
  /* waiter_labels[i] is the label of waiters[i], "" if it has none
   * (nwaiters entries; NULL when nwaiters is 0). */
  const char *const *waiter_labels;
  /* The kind of a resource of several holders (rt_wait_ex): "semaphore"
   * (permits: how many), "rwlock" (a read-write lock) or "election"; NULL
   * for a mutex.
   * Then holder, holder_label, fence and lease_left_ms describe the holder
   * whose lease ends first (held_ms is 0), queue_len counts holders and
   * waiters, and the lists below give every holder, by lease end (at most
   * max_waiters of them). */
  const char *kind;
  uint64_t permits;      /* the kind's permits (a read-write lock: 2^40) */
  uint64_t permits_used; /* taken by running leases */
  size_t nholders;
  const char *const *holders;       /* holder request ids */
  const uint64_t *holder_permits;   /* the permits each holds */
  const char *const *holder_labels; /* "" if none */
  const uint64_t *waiter_permits;   /* per waiter; NULL for a mutex */
  /* How this snapshot was read (rt_script_path_t): the module's
   * redturn.inspect (a mutex, where the server has the module), FCALL_RO
   * of the Functions library, or EVALSHA. */
  int script_path;
} rt_queue_info_t;

/* Result of rt_inspect; info is valid only during the callback. */
typedef void (*rt_inspect_cb)(rt_client_t *client, int status,
                              const rt_queue_info_t *info, void *data);

/* What rt_evict found and did, as Redis saw it at one instant. */
typedef struct rt_evict_info_s {
  int evicted;        /* 1: holder lost the lock; 0: nothing changed */
  const char *holder; /* the holder found (request id); NULL: nobody held */
  const char *next;   /* evicted: the waiter granted; NULL: queue empty */
  uint64_t fence;     /* next's fencing token (0 without next) */
} rt_evict_info_t;

/* Result of rt_evict; info is valid only during the callback. */
typedef void (*rt_evict_cb)(rt_client_t *client, int status,
                            const rt_evict_info_t *info, void *data);

/* Called by rt_synchronize() while the lock is held. The body must call
 * rt_done(lock, status) exactly once, now or later. */
typedef void (*rt_body_cb)(rt_lock_t *lock, void *data);
/* Called by rt_synchronize() when everything is over: status is the first
 * error among acquiring, the body's rt_done() status, and releasing. The
 * lock handle the body got is still valid during this call (and only
 * then): keep it from the body to read rt_lock_fence() and the other
 * rt_lock_* accessors here. */
typedef void (*rt_done_cb)(rt_client_t *client, int status, void *data);

/* ---- Client ------------------------------------------------------------ */

/* Create a client on loop and start connecting (a command connection and a
 * subscriber connection). On success *out is the client and connect_cb
 * (which may be NULL) runs once. Returns RT_EINVAL (NULL loop/out, or a
 * bad option), RT_EURL, RT_EPREFIX, RT_ETTL, RT_ETIMEOUTARG, RT_ENOMEM or
 * RT_ENOTSUP (no random source for the client id: a kernel without
 * getrandom), with nothing allocated and *out untouched; rt_options_check() gives the
 * reason for an option error in words. Like an open libuv stream, an open
 * client keeps its loop alive until rt_client_close() (or until its first
 * connect failed: it then holds no handle open, but must still be closed). */
RT_EXTERN int rt_client_open(uv_loop_t *loop, const rt_options_t *opts,
                             rt_connect_cb connect_cb, void *data,
                             rt_client_t **out);

/* Close the client. Pending waits fail with RT_ECANCELED (their Redis
 * entries are removed), held locks are released in Redis, then both
 * connections close; close_cb (may be NULL) runs after every handle closed.
 * Lock handles of this client become invalid when close_cb returns.
 * Calling it again, or any request after it, gives RT_ECLOSED. Safe to call
 * from inside any redturn callback. */
RT_EXTERN int rt_client_close(rt_client_t *client, rt_close_cb close_cb,
                              void *data);

/* What the client's last failure was, in words: Redis's own error text
 * when Redis refused something ("AUTH: WRONGPASS invalid username-password
 * pair or user is disabled."), the system's reason behind a failed
 * connect ("connect 127.0.0.1:1: Connection refused"), a failed name
 * resolution, the reason behind RT_EEVICTION or RT_ESERVER, a timeout, a
 * lost connection. "" while nothing failed. Every failure the client
 * meets is recorded, including reconnect attempts and error replies to
 * requests, and replaces the previous text. The string belongs to the
 * client: it stays valid until the next failure is recorded (in the loop,
 * never during your own code between two loop callbacks) or the client is
 * freed, whichever comes first; copy it to keep it. Never NULL. */
RT_EXTERN const char *rt_client_last_error(const rt_client_t *client);

/* This client's id: 32 lowercase hex characters, NUL-terminated. */
RT_EXTERN const char *rt_client_id(const rt_client_t *client);
/* The user's pointer, as given to rt_client_open() or set here. */
RT_EXTERN void *rt_client_get_data(const rt_client_t *client);
RT_EXTERN void rt_client_set_data(rt_client_t *client, void *data);
/* The loop the client runs on. */
RT_EXTERN uv_loop_t *rt_client_loop(const rt_client_t *client);

/* Locks this client holds now (local bookkeeping, no Redis call), oldest
 * grant first. Writes at most max handles to out (out may be NULL when max
 * is 0) and returns how many are held. */
RT_EXTERN size_t rt_client_locks(const rt_client_t *client, rt_lock_t **out,
                                 size_t max);

/* The start "<prefix>:{<escaped name>}:" that every Redis key of resource
 * name[0..len) shares (each key adds one letter: docs/DESIGN.md). Writes
 * it NUL-terminated into buf[0..cap), truncated to fit, and returns its
 * length (as snprintf does: a result >= cap means it did not fit); 0 for
 * a NULL prefix or when out of memory. */
RT_EXTERN size_t rt_key_base(const char *prefix, const void *name, size_t len,
                             char *buf, size_t cap);

/* ---- Locks --------------------------------------------------------------- */

/* Request the lock on resource name[0..len) with a lease of ttl_ms
 * (RT_TTL_DEFAULT for the client's default), waiting at most timeout_ms
 * from this call (RT_FOREVER: no timeout). The request joins the resource's FIFO queue;
 * cb runs once with 0 when it becomes the holder, or with an error:
 * RT_EWAITTIMEOUT (at most 100 ms after the timeout fired, even if Redis
 * is unreachable), RT_ECANCELED (rt_cancel or client closed), RT_EWRONGTYPE,
 * RT_ENOPERM, RT_EREDIS, or the first connect's failure (RT_ECONNECT,
 * RT_EAUTH, ...). A connection lost later does not fail a wait: it is sent
 * again and reconciled after the reconnect (a request whose client was
 * away when its turn came is queued again at the tail).
 * If out is not NULL it receives the handle at once (to cancel it).
 * The handle lives until cb reported an error, or, once granted, until the
 * callback of rt_signal() returned (every granted lock needs exactly one
 * rt_signal(), lost or not), or until the client's close_cb.
 * Returns RT_ECLOSED, RT_ENOCB, RT_ENAMEEMPTY, RT_ENAMETOOLONG, RT_ETTL,
 * RT_ETIMEOUTARG, RT_EINVAL or RT_ENOMEM. */
RT_EXTERN int rt_wait(rt_client_t *client, const void *name, size_t len,
                      int64_t ttl_ms, int64_t timeout_ms, rt_lock_cb cb,
                      void *data, rt_lock_t **out);

/* Grant the lock only if nobody holds it (a lease that ended does not
 * count) and nobody waits for it; never queues. cb gets 0 and a held lock,
 * or RT_EBUSY, or a command error (RT_ETIMEDOUT if it could not be sent
 * within command_timeout_ms, RT_EDISCONNECTED: then a release is sent in
 * case Redis granted it; RT_ECANCELED on close, an error reply, the first
 * connect's failure); after an error the handle is freed after cb. Same
 * argument errors as rt_wait. */
RT_EXTERN int rt_try_lock(rt_client_t *client, const void *name, size_t len,
                          int64_t ttl_ms, rt_lock_cb cb, void *data);

/* rt_wait() for the kind of lock req asks for (NULL: a mutex): a
 * semaphore's permits or a read-write lock's shared or exclusive side, on
 * the same FIFO queue, leases and fences (each holder its own). The lock
 * handle works as rt_wait()'s: rt_signal() gives its permits back,
 * rt_extend(), rt_owned(), rt_cancel() and automatic renewal act on its
 * own lease. cb also gets RT_EKIND when Redis has the resource as another
 * kind. Returns rt_wait()'s errors, and RT_EINVAL for a kind or counts
 * out of range, RT_EKIND when this client uses the resource as another
 * kind right now. */
RT_EXTERN int rt_wait_ex(rt_client_t *client, const void *name, size_t len,
                         const rt_request_t *req, int64_t ttl_ms,
                         int64_t timeout_ms, rt_lock_cb cb, void *data,
                         rt_lock_t **out);

/* rt_try_lock() for the kind req asks for (NULL: a mutex): granted only if
 * its permits are free and nobody waits. Errors as rt_wait_ex(). */
RT_EXTERN int rt_try_lock_ex(rt_client_t *client, const void *name, size_t len,
                             const rt_request_t *req, int64_t ttl_ms,
                             rt_lock_cb cb, void *data);

/* Release a held lock (or a lost one: every granted lock needs exactly one
 * rt_signal) and hand it to the next waiter. Stops automatic renewal. cb
 * (may be NULL) gets 0, or RT_ELOST if the lease had already expired or
 * the holder was evicted (the lock was not ours any more), or RT_ECANCELED
 * if the client closed before Redis answered, or an error reply
 * (RT_EWRONGTYPE, RT_ENOPERM, RT_EREDIS, RT_EPROTO). A connection lost in
 * between does not fail it: the release is sent again after the reconnect.
 * The handle is freed after cb. Returns RT_EINVAL (NULL), RT_ECLOSED,
 * RT_ENOTHELD (still waiting: use rt_cancel), RT_ERELEASED (signal or
 * cancel already called) or RT_ENOMEM. */
RT_EXTERN int rt_signal(rt_lock_t *lock, rt_lock_cb cb, void *data);

/* Push the lease of a held lock forward to ttl_ms from now (Redis clock;
 * RT_TTL_DEFAULT for the default); later automatic renewals use this TTL.
 * A lease that already ended is not revived. cb (may be NULL) gets 0 with
 * rt_lock_lease_ms() and rt_lock_deadline_ms() updated, or RT_ELOST (not
 * the holder of a running lease: the lock turns RT_LOCK_LOST; also when
 * the answer comes after the lock turned LOST by the local clock), or a
 * command error (RT_ETIMEDOUT, RT_EDISCONNECTED, RT_ECANCELED on close, an
 * error reply). Returns RT_EINVAL, RT_ECLOSED, RT_ENOTHELD, RT_ERELEASED,
 * RT_ETTL or RT_ENOMEM. */
RT_EXTERN int rt_extend(rt_lock_t *lock, int64_t ttl_ms, rt_lock_cb cb,
                        void *data);

/* Abandon a pending wait: its entry leaves the Redis queue and the wait's
 * callback gets RT_ECANCELED, once Redis confirmed the removal or after at
 * most 100 ms (the removal then goes on in the background, e.g. while Redis
 * is unreachable). If the grant crossed the cancel in flight,
 * the lock is released to the next waiter, and the callback still gets
 * RT_ECANCELED. Returns RT_EHELD (already granted: use rt_signal),
 * RT_ERELEASED (already canceling), RT_ECLOSED, or RT_EINVAL (NULL, or a
 * lock of rt_try_lock). */
RT_EXTERN int rt_cancel(rt_lock_t *lock);

/* Ask Redis whether this lock is still held (the holder, with a running
 * lease); if not, a RT_LOCK_HELD lock turns RT_LOCK_LOST. cb gets status 0
 * and owned 1 or 0, or a command error (RT_ETIMEDOUT, RT_EDISCONNECTED,
 * RT_ECANCELED on close, an error reply) and owned 0. The handle must stay
 * valid until cb: do not signal it in between. Returns RT_EINVAL (NULL),
 * RT_ECLOSED, RT_ENOTHELD (still waiting), RT_ERELEASED, RT_ENOCB or
 * RT_ENOMEM. */
RT_EXTERN int rt_owned(rt_lock_t *lock, rt_owned_cb cb, void *data);

/* Ask Redis whether anyone holds the resource now. cb gets 0 and locked 1
 * or 0, or a command error (as rt_owned) and locked 0. Returns RT_EINVAL
 * (NULL client), RT_ECLOSED (or the first connect's failure), RT_ENOCB,
 * RT_ENAMEEMPTY, RT_ENAMETOOLONG or RT_ENOMEM. */
RT_EXTERN int rt_locked(rt_client_t *client, const void *name, size_t len,
                        rt_locked_cb cb, void *data);

/* Snapshot of the resource's queue: holder, fence, lease left, held for,
 * length and up to max_waiters (at most 100000) waiting request ids in
 * order, with the labels of the holder and of those waiters; for a
 * semaphore or read-write lock also its kind and every holder (a second
 * Redis call). cb gets 0 and the snapshot, or a command error (as rt_owned, or
 * RT_ENOMEM) and NULL. Returns the errors of rt_locked. */
RT_EXTERN int rt_inspect(rt_client_t *client, const void *name, size_t len,
                         size_t max_waiters, rt_inspect_cb cb, void *data);

/* An operator's forced release of a mutex's holder, whatever its lease
 * left: the holder's client hears of it (that lock turns RT_LOCK_LOST),
 * the oldest live waiter is granted as by a release, and fences keep
 * increasing. holder NULL evicts whoever holds; a request id (as in
 * rt_queue_info_t.holder) evicts only that request, and with another
 * holder changes nothing (info->evicted 0, info->holder the one found).
 * Works on every topology the client does (the call goes to the master,
 * or the shard owning the resource). cb gets 0 and info, or a command
 * error (as rt_owned; RT_EKIND for a semaphore, read-write lock or
 * election: their holders end by release or lease) and NULL. Not sent
 * again after a lost reply: RT_EDISCONNECTED or RT_ETIMEDOUT leave open
 * whether it ran (rt_inspect tells). Returns the errors of rt_locked, or
 * RT_EINVAL for an empty holder. */
RT_EXTERN int rt_evict(rt_client_t *client, const void *name, size_t len,
                       const char *holder, rt_evict_cb cb, void *data);

/* Fencing token of a held lock: strictly increases per resource with every
 * grant, and never goes back even if Redis lost the resource's keys (it is
 * at least the server's microsecond clock at the grant). 0 while not
 * granted. */
RT_EXTERN uint64_t rt_lock_fence(const rt_lock_t *lock);
/* Lease left when the lock was granted (or last extended or renewed), as
 * Redis measured it at that moment, in ms. 0 while not granted. */
RT_EXTERN int64_t rt_lock_lease_ms(const rt_lock_t *lock);
/* When the lease ends by the Redis server clock (ms since the Unix epoch),
 * as of the grant or the last extend or renewal. 0 while not granted. */
RT_EXTERN int64_t rt_lock_deadline_ms(const rt_lock_t *lock);
/* Requests ahead of this one (the holder included) as Redis last reported
 * it: by the enqueue reply, or by the enqueue sent again after a
 * reconnect. 0 until the enqueue reply arrives, and 0 if the first enqueue
 * granted the lock at once. A lock granted by a handoff before its enqueue
 * reply arrived reads 1 until that reply brings the exact position. */
RT_EXTERN size_t rt_lock_position(const rt_lock_t *lock);
/* The resource name; *len (if len is not NULL) gets its size. The copy is
 * NUL-terminated, but a name may itself contain NUL bytes: use *len. */
RT_EXTERN const void *rt_lock_resource(const rt_lock_t *lock, size_t *len);
/* The request id as stored in Redis, NUL-terminated: "<client id>:<seq>",
 * the client's id (rt_client_id), ':' and a per-client counter from 1 in
 * decimal. It names the request in rt_queue_info_t and in the CLI. It
 * holds nothing else (no lease: the lease lives in Redis, so an extend
 * never makes the id stale). */
RT_EXTERN const char *rt_lock_id(const rt_lock_t *lock);
/* The state as the client knows it now: RT_LOCK_LOST as soon as the
 * lease left (rt_lock_lease_left_ms) is 0, even before the lost callback
 * has run (it runs from the loop). */
RT_EXTERN rt_lock_state_t rt_lock_state(const rt_lock_t *lock);
/* "queued", "held", "releasing" or "lost" for a state, "unknown" for any
 * other value. Never NULL; the string is static. */
RT_EXTERN const char *rt_lock_state_name(rt_lock_state_t state);
/* The client that made the request. */
RT_EXTERN rt_client_t *rt_lock_client(const rt_lock_t *lock);
/* The lock's data pointer: the data given to rt_wait()/rt_try_lock()/
 * rt_synchronize(), or the last one set with rt_lock_set_data(). */
RT_EXTERN void *rt_lock_get_data(const rt_lock_t *lock);
/* Replace the lock's data pointer: the callbacks that take the lock's data
 * (the wait or try callback if it has not run yet, the lost callback) get
 * the new one. Callbacks of rt_signal/rt_extend/rt_owned keep their own. */
RT_EXTERN void rt_lock_set_data(rt_lock_t *lock, void *data);

/* Call cb (with the lock's data) once, when this lock turns RT_LOCK_LOST
 * while held, whatever the cause:
 *  - its lease ran out by the client's own conservative clock (see
 *    rt_lock_lease_left_ms) without a successful rt_extend or automatic
 *    renewal, Redis reachable or not;
 *  - Redis said it is not the holder any more: a failed rt_extend or
 *    automatic renewal, rt_owned answering no, or the check after a
 *    reconnect;
 *  - Redis granted the same request again under another fence (it lost
 *    the first grant with its keys, and another client may have held in
 *    between);
 *  - an operator evicted the holder (redturn evict: an eviction notice).
 * A lock never turns LOST by rt_signal: its callback reports RT_ELOST
 * instead. The handle stays valid: still call rt_signal(). cb NULL removes
 * it. Returns RT_EINVAL for a NULL lock. */
RT_EXTERN int rt_lock_on_lost(rt_lock_t *lock, rt_lost_cb cb);

/* every_ms for rt_lock_auto_renew(): renew every third of the lease (-1,
 * the default, as RT_TTL_DEFAULT). */
#define RT_RENEW_DEFAULT ((int64_t)-1)
/* every_ms for rt_lock_auto_renew(): stop renewing (0: none). */
#define RT_RENEW_OFF ((int64_t)0)

/* Automatic lease renewal (a watchdog, like Redisson's), opt-in per lock:
 * call it on a queued lock (e.g. on the handle rt_wait() put in *out) or on
 * a held one. While the lock is held, the client extends the lease every
 * every_ms (RT_RENEW_DEFAULT: a third of the lock's TTL) to the lock's TTL
 * (the ttl_ms of the wait, or of the last successful rt_extend), with the
 * same script call as rt_extend; never later than halfway through the lease
 * left by the client's conservative clock. A renewal that gets no answer (a
 * timeout, a dropped connection) is tried again while the lease lasts. If
 * Redis says the lock is not ours any more, or the local lease deadline
 * passes before a renewal succeeded (e.g. Redis unreachable), the lock
 * turns RT_LOCK_LOST and the lost callback (rt_lock_on_lost) runs, once;
 * renewal ends there. It also ends with rt_signal(), a cancel, the client's
 * close, or RT_RENEW_OFF. A lock without it costs nothing more (the same
 * two script calls per grant). Renewing with an interval much shorter than
 * the round trip to Redis gives no more safety.
 * Returns RT_EINVAL (NULL lock, every_ms below RT_RENEW_DEFAULT, or not less
 * than the lock's TTL), RT_ECLOSED, RT_ERELEASED (rt_signal or rt_cancel
 * was called) or RT_ELOST (already lost). */
RT_EXTERN int rt_lock_auto_renew(rt_lock_t *lock, int64_t every_ms);

/* Milliseconds of lease left now by the client's conservative estimate,
 * counted from when the request (or the last extend or renewal) was sent,
 * never from when a possibly late reply or notice arrived: Redis ends the
 * lease no earlier than this says. 0 when over or not held. */
RT_EXTERN int64_t rt_lock_lease_left_ms(const rt_lock_t *lock);

/* Set the value of the leader of an election (a lock of rt_wait_ex() with
 * RT_KIND_ELECTION that holds it): value_len bytes of printable ASCII, at
 * most RT_VALUE_MAX. The observers are told. cb (may be NULL) gets 0, or
 * RT_ELOST (no longer the leader: the lock turns RT_LOCK_LOST), or a
 * command error. Returns RT_EINVAL (NULL, not an election, a bad value),
 * RT_ECLOSED, RT_ENOTHELD, RT_ERELEASED or RT_ENOMEM. */
RT_EXTERN int rt_proclaim(rt_lock_t *lock, const char *value, size_t value_len,
                          rt_lock_cb cb, void *data);

/* ---- Observing an election ------------------------------------------------ */

/* One observer of an election (rt_observe). */
typedef struct rt_observer_s rt_observer_t;

/* An election's state as an observer is told it; valid only during the
 * callback. */
typedef struct rt_leader_s {
  /* The leader's request id (rt_lock_id of its lock), NUL-terminated;
   * NULL when nobody leads. */
  const char *id;
  /* The leader's value (rt_request_t.value, rt_proclaim), value_len bytes
   * of printable ASCII, NUL-terminated; "" when it has none or nobody
   * leads. */
  const char *value;
  size_t value_len;
  /* The leader's fencing token. Nobody leads: the last leader's, as far
   * as Redis still knows it (0 when the resource was idle long enough to
   * leave no key). */
  uint64_t fence;
  /* When the leader's lease ends by the Redis clock (ms since the Unix
   * epoch), as of the change; its extends are not reported. 0 when nobody
   * leads. */
  int64_t deadline_ms;
} rt_leader_t;

/* A change of leader (status 0, leader set), or news about the observer
 * (leader NULL):
 *  - RT_EDISCONNECTED: its subscription was lost or a read failed on the
 *    way (rt_client_last_error says how); it goes on, and once subscribed
 *    again it reports the leader of then if that is not the one it
 *    reported last;
 *  - any other status is the last call, after which the handle is freed
 *    when cb returns: RT_ECANCELED (the client is closing), RT_EKIND (the
 *    resource is in use as another kind of lock), an error Redis answered
 *    its subscription or a read with (RT_EWRONGTYPE, RT_ENOPERM: an ACL
 *    that denies the channel, RT_EREDIS, RT_EPROTO), or the client's first
 *    connect failure (RT_ECONNECT, RT_EAUTH, ...). */
typedef void (*rt_observe_cb)(rt_observer_t *obs, int status,
                              const rt_leader_t *leader, void *data);

/* Watch the election name[0..len): cb runs with the current state (a
 * leader, or nobody) once the observer is subscribed, then once per
 * change of leader or of its value, in fence order, without polling (the
 * scripts publish every change on the resource's observe channel). After
 * a lost subscription it subscribes again and reports the state of then
 * if it differs from the last it reported: changes made meanwhile
 * collapse to the latest. Nobody leading is reported when a leader
 * resigns, and when its lease ends (one read of the resource when the
 * lease it was told runs out). All observers of one client share one
 * extra Redis connection (CLIENT SETNAME redturn-obs-<client id>), made
 * with the first and closed with the last; on a Redis Cluster each
 * observer has one to the master serving its resource's slot, and moves
 * with the slot (a failover, a reshard: reported as RT_EDISCONNECTED, then
 * reconciled there). A resource nobody uses is an
 * election to an observer; a mutex, semaphore or read-write lock ends it
 * with RT_EKIND. If out is not NULL it receives the handle at once.
 * Returns RT_EINVAL (NULL client), RT_ENOCB, RT_ENAMEEMPTY,
 * RT_ENAMETOOLONG, RT_ECLOSED (or the client's first connect failure) or
 * RT_ENOMEM. */
RT_EXTERN int rt_observe(rt_client_t *client, const void *name, size_t len,
                         rt_observe_cb cb, void *data, rt_observer_t **out);

/* Stop observing: cb is not called again, and the handle is freed from
 * the loop (so it is safe from inside cb, also from its last call; not
 * after the last call returned). Returns RT_EINVAL for NULL. */
RT_EXTERN int rt_observe_stop(rt_observer_t *obs);

/* ---- Multi-locks -------------------------------------------------------- */

/* Several resources taken all-or-nothing (rt_wait_all). */
typedef struct rt_multi_s rt_multi_t;
/* The multi-lock's wait or release ended: status 0, or the first error. */
typedef void (*rt_multi_cb)(rt_multi_t *multi, int status, void *data);
/* Most resources of one multi-lock. */
#define RT_MULTI_MAX 1024

/* Wait for every one of the n resources names[i][0..lens[i]) (mutexes,
 * each with its own lease ttl_ms), all or nothing, within timeout_ms in
 * all (RT_FOREVER: no timeout). The waits are made one at a time in the
 * byte order of the names, the same for every client, so multi-locks that
 * share resources never deadlock, and each wait is fair in its own queue.
 * While it waits for the rest, the resources taken are renewed (as
 * rt_lock_auto_renew), and once the last is granted the others are
 * extended to ttl_ms again, which Redis refuses for a lease that ended: so
 * 0 means every resource is held, each lease running about ttl_ms from
 * then (no renewal after that unless asked for). cb runs once: 0 with
 * every resource held (rt_multi_lock() gives each lock: its fence, lease,
 * lost state), or the first error, after every resource taken so far was
 * released (RT_EWAITTIMEOUT, RT_ECANCELED, the errors of rt_wait's callback,
 * RT_ELOST if one was lost all the same, e.g. Redis unreachable for a
 * lease, or an extend's command error); after an error multi is freed
 * when cb
 * returns. Once held, release them all with rt_signal_all(). If out is
 * not NULL it receives the handle at once (to cancel it). Returns
 * rt_wait()'s argument errors, and RT_EINVAL for no names, more than
 * RT_MULTI_MAX or a name given twice. */
RT_EXTERN int rt_wait_all(rt_client_t *client, const void *const *names,
                          const size_t *lens, size_t n, int64_t ttl_ms,
                          int64_t timeout_ms, rt_multi_cb cb, void *data,
                          rt_multi_t **out);
/* Abandon a multi-lock's wait: cb gets RT_ECANCELED after the resources
 * taken so far were released. Returns RT_EHELD (all granted: use
 * rt_signal_all), RT_ERELEASED (ending already) or RT_EINVAL (NULL). */
RT_EXTERN int rt_cancel_all(rt_multi_t *multi);
/* Release every resource of a held multi-lock; cb gets 0, or RT_ELOST if
 * any lease had ended (as rt_signal), once every release was answered;
 * multi is freed when cb returns. Returns RT_EINVAL (NULL), RT_ENOCB,
 * RT_ENOTHELD (still waiting), RT_ERELEASED, or RT_ECLOSED (the client is
 * closing: it releases them; multi is freed). */
RT_EXTERN int rt_signal_all(rt_multi_t *multi, rt_multi_cb cb, void *data);
/* The lock of names[i] while the multi-lock holds it, else NULL. */
RT_EXTERN rt_lock_t *rt_multi_lock(const rt_multi_t *multi, size_t i);

/* ---- Statistics ----------------------------------------------------------- */

/* Buckets of an rt_histogram_t: log-linear, RT_HIST_SUB per power of two.
 * buckets[i] for i < RT_HIST_SUB counts exactly i us; above, each power of
 * two [2^e, 2^(e+1)) us (e >= 5) is cut into RT_HIST_SUB buckets of width
 * 2^(e-5): buckets[RT_HIST_SUB * (e - 4) + (v >> (e - 5)) - RT_HIST_SUB]
 * counts v. A bucket is at most 1/32 (3.1 %) of its lower bound wide; the
 * last one also takes every value from 2^36 us (19 h) on. */
#define RT_HIST_SUB 32
#define RT_HIST_BUCKETS 1024

/* A latency histogram in microseconds: how many values, their sum, the
 * smallest and the largest, and the buckets above (8 KB in all). */
typedef struct rt_histogram_s {
  uint64_t count;
  uint64_t sum_us;
  uint64_t min_us; /* 0 while count is 0 */
  uint64_t max_us;
  uint64_t buckets[RT_HIST_BUCKETS];
} rt_histogram_t;

/* Counters of one client since it was opened (local, no Redis call). */
typedef struct rt_stats_s {
  uint64_t waits;         /* rt_wait() calls accepted */
  uint64_t tries;         /* rt_try_lock() calls accepted */
  uint64_t grants;        /* locks granted (waits and tries) */
  uint64_t busy;          /* try-locks refused with RT_EBUSY */
  uint64_t releases;      /* rt_signal() completions, whatever the status */
  uint64_t lost;          /* locks found lost, each once (RT_LOCK_LOST, or
                        * RT_ELOST from rt_signal or rt_extend) */
  uint64_t cancels;       /* waits ended with RT_ECANCELED */
  uint64_t timeouts;      /* waits ended with RT_EWAITTIMEOUT */
  uint64_t failures;      /* waits ended with any other error */
  uint64_t reaps;         /* reap calls the watchdog sent */
  uint64_t reconnects;    /* times the client became ready again after a loss */
  uint64_t pending;       /* waits pending now */
  uint64_t held;          /* locks held now */
  rt_histogram_t acquire; /* rt_wait() call to grant callback */
  rt_histogram_t hold;    /* grant to rt_signal() call */
  /* This client's rt_signal() call to this client's next grant of the same
   * resource (a handoff between two waiters of one process). */
  rt_histogram_t handoff;
  /* The script path (rt_script_path_t) of the latest connect:
   * RT_SCRIPT_PATH_MODULE (every call but the evict; that on lua_path),
   * RT_SCRIPT_PATH_FUNCTIONS or RT_SCRIPT_PATH_EVAL (on a cluster, of the
   * latest node connected); RT_SCRIPT_PATH_AUTO before the first. */
  int script_path;
  uint64_t fcalls; /* script calls sent as FCALL or FCALL_RO */
  uint64_t evals;  /* script calls sent as EVALSHA or EVAL */
  /* The path of the calls the module does not run (RT_SCRIPT_PATH_
   * FUNCTIONS or _EVAL; _AUTO before the first connect). */
  int lua_path;
  /* What the latest connect found of the module (rt_module_state_t),
   * and the version it answered (0 if none): why a client that could
   * use the module does not. */
  int module;
  int module_version;
  uint64_t module_calls; /* calls sent as the module's commands */
  /* Grants the client heard but could not report: by its clock the lease
   * may have ended when the notice came (the process stalled), or fewer
   * replicas than wait_replicas confirmed them in time. Each is asked
   * about again; one whose lease had ended queues again at the tail. */
  uint64_t late_grants;
} rt_stats_t;

/* Copy the client's counters into out[0..size): call it as
 * rt_client_stats(client, out), which passes the sizeof(rt_stats_t) your
 * program was compiled with. rt_stats_t only grows at its end: counters a
 * shorter (older) struct lacks are left out, and those a longer (newer)
 * struct has that this library does not are set to 0. */
RT_EXTERN void rt_client_stats_size(const rt_client_t *client, rt_stats_t *out,
                                    size_t size);
/* Copy the client's counters into *out. */
#define rt_client_stats(client, out)                                           \
  rt_client_stats_size((client), (out), sizeof(rt_stats_t))
/* Quantile q of h in us: the value of rank ceil(q * count), interpolated
 * within its bucket (so within 3.1 % of a value recorded at that rank) and
 * never below min_us nor above max_us; q <= 0 gives min_us, q >= 1 max_us,
 * an empty h (or NULL, or q NaN) 0. */
RT_EXTERN uint64_t rt_histogram_quantile(const rt_histogram_t *h, double q);

/* ---- Scoped helper ------------------------------------------------------- */

/* Acquire the lock (as rt_wait), run body while holding it, and release it
 * once the body calls rt_done(); then call done with the first error among
 * acquiring, the body's status and releasing. If acquiring fails, body is
 * not called and done gets the error. done always runs exactly once
 * (RT_ECANCELED if the client closes first). Argument errors as rt_wait,
 * plus RT_ENOCB if body or done is NULL. */
RT_EXTERN int rt_synchronize(rt_client_t *client, const void *name, size_t len,
                             int64_t ttl_ms, int64_t timeout_ms,
                             rt_body_cb body, rt_done_cb done, void *data);

/* End the body of rt_synchronize() with the body's status (0 or any
 * negative value, passed on to done). Returns RT_EINVAL if lock did not come
 * from rt_synchronize, RT_ERELEASED if rt_done was already called (or the
 * client closed under the body), or RT_ENOMEM (nothing started: call it
 * again). */
RT_EXTERN int rt_done(rt_lock_t *lock, int status);

/* The blocking API: rt_blocking_t and the rt_blocking_* calls. */
#include "redturn/blocking.h"

#ifdef __cplusplus
}
#endif

#endif /* REDTURN_H */
