/* The header of the locks layer (src/layers.txt): the client's internal
 * state (the client, its resources and its locks) as the lock state
 * machine and the files above it (query.c, sync.c, multi.c, observe.c,
 * client.c) share it, then a section per file of the layer: res.c,
 * handle.c, lock.c, election.c, request.c, notice.c.
 * Below it are the script calls (calls.h), the transport (conn.h) and the
 * loop services (loop.h). */
#ifndef RT_LOCKS_H
#define RT_LOCKS_H

#include "calls.h"
#include "common.h"
#include "queue.h"

/* ---- shared state: the client, its resources and its locks ------------ */

/* Slack added to a lease before the watchdog asks Redis to reap, plus a
 * per-client jitter so that clients watching one resource do not all call
 * reap at the same instant. The client whose waiter is next in line knows
 * the deadline in front of it exactly (Redis tells it at each handoff);
 * clients further back only reap as a safety net, RT__REAP_BACKUP_MS
 * later, should the one in front have died too. */
#define RT__REAP_SLACK_MS 2
#define RT__REAP_JITTER_MS 8
#define RT__REAP_BACKUP_MS 250
/* rt_lock_s.renew_ms for RT_RENEW_DEFAULT (a third of the lease). A
 * renewal never waits longer than half the lease left, nor (after a failed
 * one) less than RT__RENEW_MIN_MS unless the lease ends sooner. */
#define RT__RENEW_THIRD (-1)
#define RT__RENEW_MIN_MS 5

/* Longest a canceled or expired wait waits for Redis to confirm its entry
 * left the queue before the callback runs anyway. */
#define RT__ABORT_GRACE_MS 100

enum rt__client_state {
  RT__C_CONNECTING = 0, /* first connect in progress */
  RT__C_READY,          /* both connections up, channel subscribed */
  RT__C_RECOVERING,     /* was ready, a connection is being re-made */
  RT__C_FAILED,         /* the first connect failed: only close is left */
  RT__C_CLOSING
};

/* What the client knows about one resource it touches. */
typedef struct rt__res { /* one allocation: the struct, name, keys */
  rt_client_t *client;
  char *name; /* map key (NUL-terminated copy) */
  char *keys; /* RT__KEYS + RT__POOL_KEYS keys of key_len bytes,
                       * back to back: "<prefix>:{<esc>}:" and one of
                       * RT__KEY_SUFFIXES, then of RT__POOL_KEY_SUFFIXES */
  /* The kind its locks of this client use: "" a mutex, else the
   * pool scripts' kind ("s:<N>", "rw"); set by the first lock
   * while none uses it (kind_locks). */
  char kind[RT__KIND_MAX];
  uint32_t kind_locks;
  rt__queue waiters; /* this client's queued locks here, in enqueue order */
  rt__timeout watchdog;
  uint64_t last_release_ns; /* our last rt_signal() here, for handoff stats */
  uint32_t len;             /* <= RT_NAME_MAX */
  uint32_t key_len;
  uint32_t refs; /* locks and ops using it */
} rt__res;

/* A script call of the lock layer: the call, the resource whose keys it
 * uses, the lock it is for, and the user's callback. */
typedef struct rt__op {
  rt__call call; /* its completion gets the op by container_of */
  rt__res *res;
  rt_lock_t *lock; /* NULL for resource queries */
  int renewal;     /* extend: an automatic renewal */
  int retried;     /* release: resent after a lost reply */
  /* replicas: the grant waiting for the acknowledgements (handoff: it came
   * in a notice), or the release's outcome (status) */
  uint64_t fence;
  int64_t lease_ms, deadline_ms;
  int handoff;
  int status;
  char *copy; /* evict: the request id it names, freed with the op */
  union {
    rt_lock_cb lock;
    rt_owned_cb owned;
    rt_locked_cb locked;
    rt_inspect_cb inspect;
    rt_evict_cb evict;
  } cb;
  void *data;
} rt__op;

/* What a helper layered on a lock (rt_synchronize) must hear: the client
 * closes while the lock is held, and the lock object is freed. */
typedef struct rt__lock_hooks {
  void (*closing)(rt_lock_t *l);
  void (*freed)(rt_lock_t *l);
} rt__lock_hooks;

struct rt_lock_s {
  rt_client_t *client;
  rt__res *res;
  rt__queue res_node; /* res->waiters while queued */
  rt__queue node;     /* client->pending while queued, ->held once granted */
  rt__queue all_node; /* client->all until freed */
  /* The wait's deadline, then the report of its end; once held, the local
   * end of the lease (then the lock turns LOST). */
  rt__timeout deadline;
  uint64_t seq;    /* key in client->locks */
  rt__op *enqueue; /* the enqueue op while it exists */
  rt_lock_cb cb;   /* wait / try callback */
  void *data;
  const rt__lock_hooks *hooks; /* NULL, or the helper's (sync.c) */
  void *hooks_data;
  rt_lost_cb lost_cb;
  uint64_t fence;
  uint64_t local_end_ms; /* monotonic ms at which the lease may end */
  int64_t deadline_ms;   /* lease end by the Redis clock */
  uint64_t since_ns;     /* rt_wait() call, then the grant (statistics) */
  /* Small fields last, packed: a client may have many pending waits. */
  int32_t lease_ms; /* <= RT_TTL_MAX */
  int32_t ttl_ms;   /* the lease asked for (or by the last extend) */
  /* Automatic renewal: 0 off, RT__RENEW_THIRD every third of ttl_ms, else
   * the period in ms. */
  int32_t renew_ms;
  uint32_t position;
  uint32_t permits;   /* pool: permits it takes (0: all) */
  uint32_t reentries; /* reentrant grants of it not signaled yet */
  const char *value;  /* an election candidate's value (after id[]), or
                        * NULL: the client's label goes with it */
  uint32_t value_len;
  uint32_t ops;          /* ops alive for this lock */
  int16_t end_status;    /* what a cancel reports to the wait callback */
  uint16_t id_len;       /* < RT__ENTRY_MAX */
  uint8_t state;         /* rt_lock_state_t */
  unsigned enqueued : 1; /* an enqueue reached the wire: Redis may have it
                          * (also while l->enqueue is alive: its
                          * call.written) */
  unsigned is_try : 1;
  unsigned reported : 1;     /* the wait callback ran */
  unsigned finished : 1;     /* the user is done with the handle */
  unsigned renew_due : 1;    /* the held lock's timer is for a renewal */
  unsigned renewing : 1;     /* a renewal is in flight */
  unsigned lost_counted : 1; /* in stats.lost already */
  unsigned reentrant : 1;    /* asked for as reentrant */
  unsigned acking : 1;       /* wait_replicas: a grant waits for the replicas */
  unsigned recheck_due : 1;  /* ask Redis again once the enqueue in flight
                              * is answered (it may predate a grant) */
  char id[]; /* the request id, as queued in Redis (NUL-terminated) */
};

struct rt_client_s {
  uv_loop_t *loop;
  rt__config cfg;
  char id[RT__CLIENT_ID_LEN + 1];
  char *channel; /* "<prefix>:c:<id>" */
  size_t channel_len;
  size_t chan_prefix_len; /* "<prefix>:c:" */
  rt__conn cmd;
  rt__conn sub;
  int state;
  int fail_status;
  int ever_ready;
  int connect_reported;   /* connect_cb ran */
  unsigned seed_failures; /* first connects failed, seed after seed */
  /* Connections dropped since the last ready because the Sentinels named
   * each a different master (client.c one_master); a first connect gives
   * up after RT__MASTER_REASKS of them. reasking: 1 cmd, 2 sub, while
   * such a drop is on its way to conn_down. */
  unsigned master_reasks;
  unsigned reasking;
  int close_started; /* close_later ran: releases are out */
  uint64_t next_seq;
  uint64_t rand;
  rt__map locks;     /* seq -> live lock */
  rt__map resources; /* name -> rt__res */
  rt__queue pending; /* queued locks */
  rt__queue held;    /* held locks, oldest grant first */
  rt__queue all;     /* every lock not yet freed */
  rt__loop lp;       /* timeouts and deferred completions */
  rt__calls calls;   /* script calls on cmd (or on the cluster's nodes) */
  /* The seed answered cluster_enabled:1: cmd and sub served only to find
   * that out, and the cluster's node connections carry everything. */
  rt__cluster *cluster;
  rt__later reconcile; /* a cluster lost subscriptions: reconcile once */
  rt__later closing;   /* starts the close from the loop */
  unsigned conns_open;
  /* rt_observe's connection and observers (observe.c), or NULL; a
   * connection of observers that is closing counts in conns_open and
   * calls observing_closed once closed. */
  struct rt__observing *observing;
  void (*observing_closed)(rt_client_t *c);
  rt_connect_cb connect_cb;
  void *connect_data;
  rt_close_cb close_cb;
  void *close_data;
  void *data;
  rt_stats_t stats;
  char last_error[256]; /* rt_client_last_error() */
};

/* The client can take requests: 0, RT_ECLOSED, or why it failed. */
static inline int rt__client_usable(const rt_client_t *c) {
  if (c->state == RT__C_CLOSING)
    return RT_ECLOSED;
  if (c->state == RT__C_FAILED)
    return c->fail_status;
  return 0;
}

/* The earliest monotonic ms at which Redis's clock may reach redis_ms: a
 * lease counted to here ends early, never late. */
static inline uint64_t rt__clock_local(const rt_client_t *c, int64_t redis_ms) {
  return rt__calls_clock_local(&c->calls, redis_ms);
}

/* ---- res.c: the resource table ----------------------------------------- */

/* The resource name[0..len), with a reference taken; NULL on ENOMEM. */
rt__res *rt__res_get(rt_client_t *c, const void *name, size_t len);
void rt__res_unref(rt__res *r);

/* ---- handle.c: the lock handle and its ops -------------------------------- */

/* A call of kind on res for lock (NULL: none), taking a reference on both;
 * done is its completion, which ends with rt__op_free. NULL on ENOMEM. The
 * call's id and num are the lock's id and lease. */
rt__op *rt__op_new(rt_client_t *c, rt__call_kind kind, rt__res *res,
                   rt_lock_t *lock, rt__call_cb done);
void rt__op_free(rt__op *op);
/* The op a completion's call belongs to. */
static inline rt__op *rt__op_of(rt__call *call) {
  return rt__container_of(call, rt__op, call);
}
/* Send a call of kind for l, with done as its completion and the user's
 * cb and data for it to report to. 0 or RT_ENOMEM. */
int rt__op_send(rt_lock_t *l, rt__call_kind kind, rt__call_cb done,
                rt_lock_cb cb, void *data);
/* Free l now; free it once the user is done and no op refers to it. */
void rt__lock_free(rt_lock_t *l);
void rt__lock_maybe_free(rt_lock_t *l);
/* For client.c: every lock of c freed (the client's end). */
void rt__lock_free_all(rt_client_t *c);
/* Stop waiting: out of the resource's waiters, no deadline. */
void rt__lock_leave_queue(rt_lock_t *l);
/* Count a lock found lost, once; turn a held lock LOST and tell the user. */
void rt__lock_count_lost(rt_lock_t *l);
void rt__lock_turn_lost(rt_lock_t *l);
/* The wait ended without a grant: tell the user once (report_end), and
 * let go of it as well (wait_end). */
void rt__lock_report_end(rt_lock_t *l, int status);
void rt__lock_wait_end(rt_lock_t *l, int status);
/* Argument checks of a call on a granted lock. */
int rt__check_held(const rt_lock_t *l);

/* ---- lock.c: the lock state machine ------------------------------------ */

/* Ask Redis to queue l (retry: again, idempotently). 0 or RT_ENOMEM. */
int rt__lock_enqueue(rt_lock_t *l, int retry);
/* Ask Redis again where a wait of ours stands. */
void rt__lock_recheck(rt_lock_t *l);
/* Take l's entry out of Redis (a release that also cancels a wait). */
void rt__lock_release(rt_lock_t *l, rt_lock_cb cb, void *data);
/* Abandon a queued wait with status (cancel, deadline, close). */
void rt__lock_abort(rt_lock_t *l, int status);
/* Redis granted l (handoff: by a notice). */
void rt__lock_granted(rt_lock_t *l, uint64_t fence, int64_t lease_ms,
                      int64_t deadline_ms, int handoff);
/* Arm a held lock's one timer (its next renewal or the end of its lease);
 * the callback of a lock's one timeout. */
void rt__lock_arm_held(rt_lock_t *l);
void rt__lock_timeout(rt__timeout *t);
/* Arm r's watchdog for a holder lease with left_ms to run (next: our
 * waiter is next in line). */
void rt__watchdog_arm_lease(rt__res *r, int64_t left_ms, int next);
/* What every completion does first: the dead entries that a script's
 * answer on r reported are reaped. */
void rt__watchdog_answered(rt__res *r, int status, const rt__answer *a);
/* The completions of a try, a release and an extend. */
void rt__lock_on_try(rt__call *call, int status, const rt__answer *a);
void rt__lock_on_release(rt__call *call, int status, const rt__answer *a);
void rt__lock_on_extend(rt__call *call, int status, const rt__answer *a);

/* ---- election.c: elections --------------------------------------------- */

/* An election value: printable ASCII, at most RT_VALUE_MAX bytes. 0 or
 * RT_EINVAL. */
int rt__election_check_value(const char *value, size_t len);

/* ---- request.c: the entry points ------------------------------------------ */

/* Argument checks of a request on a resource (ttl NULL: none taken). */
int rt__check_request(rt_client_t *c, const void *name, size_t len,
                      int64_t ttl_ms, const void *cb, int64_t *ttl);

/* ---- notice.c: notices, reconcile, close ------------------------------- */

/* The call that asks Redis whether l holds its resource: an inspect (a
 * mutex) or a reap with l's id (a pool resource). */
rt__call_kind rt__lock_owned_call(const rt_lock_t *l);
/* Its answer (call as sent, a its answer): 1 if l holds the resource;
 * else the lock turns LOST (when it was held) and 0. */
int rt__lock_owns(rt_lock_t *l, const rt__call *call, const rt__answer *a);
/* For client.c: a notice on our channel, after a reconnect, at close. */
void rt__lock_on_notice(rt_client_t *c, const rt__notice *n);
void rt__lock_reconcile(rt_client_t *c);
void rt__lock_close_all(rt_client_t *c);

#endif /* RT_LOCKS_H */
