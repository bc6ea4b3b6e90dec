/* The client's internal state, shared by client.c (life cycle, events),
 * ops.c (script calls) and lock.c (the lock state machine). */
#ifndef RT_CLIENT_H
#define RT_CLIENT_H

#include "common.h"
#include "conn.h"
#include "loop.h"
#include "queue.h"

/* Slack added to a lease before the watchdog asks Redis to reap, plus a
 * per-client jitter so that clients watching one resource do not all call
 * reap at the same instant. The client whose waiter is next in line knows
 * the deadline in front of it exactly (Redis tells it at each handoff);
 * clients further back only reap as a safety net, RT__REAP_BACKUP_MS
 * later, should the one in front have died too. */
#define RT__REAP_SLACK_MS 2
#define RT__REAP_JITTER_MS 8
#define RT__REAP_BACKUP_MS 250
/* A script call that could not be written on a live connection (out of
 * memory) is tried again after this long, not left for a reconnect. */
#define RT__WRITE_RETRY_MS 50

/* How fast the Redis clock may run ahead of ours between two samples (per
 * mille): the local lease estimate stays conservative under that drift. */
#define RT__DRIFT_PER_MILLE 1

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
  char *name;         /* map key (NUL-terminated copy) */
  char *keys;         /* RT__KEYS keys of key_len bytes, back to back:
                       * "<prefix>:{<esc>}:" and one of RT__KEY_SUFFIXES */
  rt__queue waiters;  /* this client's queued locks here, in enqueue order */
  rt__timeout watchdog;
  uint64_t last_release_ns; /* our last rt_signal() here, for handoff stats */
  uint32_t len;       /* <= RT_NAME_MAX */
  uint32_t key_len;
  uint32_t refs;      /* locks and ops using it */
} rt__res;

enum rt__op_kind {
  RT__OP_ENQUEUE,
  RT__OP_RELEASE,
  RT__OP_EXTEND,
  RT__OP_TRY,
  RT__OP_REAP,
  RT__OP_INSPECT
};

/* What an inspect op is for. */
enum { RT__ASK_OWNED, RT__ASK_LOCKED, RT__ASK_INSPECT };

/* One script call, from creation until its reply was handled. */
typedef struct rt__op {
  rt__queue node;     /* client->outbox while not sent */
  rt__timeout timeout;/* outbox deadline (ops that do not wait forever) */
  rt__later later;    /* completion without Redis */
  rt_client_t *client;
  rt__res *res;
  rt_lock_t *lock;    /* NULL for resource queries */
  int kind;
  int ask;            /* RT__ASK_* for RT__OP_INSPECT; 1 for an automatic
                       * renewal (RT__OP_EXTEND) */
  int64_t arg;        /* extend ttl, inspect max, retry flag */
  uint64_t sent_ms;   /* monotonic ms when written (clock samples) */
  int status;         /* for completion without Redis */
  int evaled;         /* resent with EVAL after NOSCRIPT */
  int in_flight;
  union {
    rt_lock_cb lock;
    rt_owned_cb owned;
    rt_locked_cb locked;
    rt_inspect_cb inspect;
  } cb;
  void *data;
} rt__op;

typedef struct rt__sync rt__sync;

struct rt_lock_s {
  rt_client_t *client;
  rt__res *res;
  rt__queue res_node; /* res->waiters while queued */
  rt__queue node;     /* client->pending while queued, ->held once granted */
  rt__queue all_node; /* client->all until freed */
  /* The wait's deadline, then the report of its end; once held, the local
   * end of the lease (then the lock turns LOST). */
  rt__timeout deadline;
  uint64_t seq;       /* key in client->locks */
  rt__op *enqueue;    /* the enqueue op while it exists */
  rt_lock_cb cb;      /* wait / try callback */
  void *data;
  rt__sync *sync;
  rt_lost_cb lost_cb;
  uint64_t fence;
  uint64_t local_end_ms; /* monotonic ms by which the lease surely ended */
  int64_t deadline_ms; /* lease end by the Redis clock */
  uint64_t since_ns;   /* rt_wait() call, then the grant (statistics) */
  /* Small fields last, packed: a client may have many pending waits. */
  int32_t lease_ms;    /* <= RT_TTL_MAX */
  int32_t ttl_ms;      /* the lease asked for (or by the last extend) */
  /* Automatic renewal: 0 off, RT__RENEW_THIRD every third of ttl_ms, else
   * the period in ms. */
  int32_t renew_ms;
  uint32_t position;
  uint32_t ops;        /* ops alive for this lock */
  int16_t end_status;  /* what a cancel reports to the wait callback */
  uint16_t id_len;     /* < RT__ENTRY_MAX */
  uint8_t state;       /* rt_lock_state_t */
  unsigned enqueued : 1; /* an enqueue reached the wire: Redis may have it */
  unsigned is_try : 1;
  unsigned reported : 1; /* the wait callback ran */
  unsigned finished : 1; /* the user is done with the handle */
  unsigned renew_due : 1; /* the held lock's timer is for a renewal */
  unsigned renewing : 1;  /* a renewal is in flight */
  unsigned lost_counted : 1; /* in stats.lost already */
  char id[]; /* the request id, as queued in Redis (NUL-terminated) */
};

struct rt_client_s {
  uv_loop_t *loop;
  rt__config cfg;
  char id[RT__CLIENT_ID_LEN + 1];
  char *channel;     /* "<prefix>:c:<id>" */
  size_t channel_len;
  size_t chan_prefix_len; /* "<prefix>:c:" */
  rt__conn cmd;
  rt__conn sub;
  int state;
  int fail_status;
  int ever_ready;
  int connect_reported; /* connect_cb ran */
  int close_started;    /* close_later ran: releases are out */
  uint64_t next_seq;
  uint64_t rand;
  /* An upper bound of (Redis clock - monotonic clock) in ms, from the
   * replies: Redis ran a command after we sent it. */
  int64_t offset_ms;
  uint64_t offset_at_ms; /* when it was sampled; 0: never */
  rt__map locks;     /* seq -> live lock */
  rt__map resources; /* name -> rt__res */
  rt__queue pending; /* queued locks */
  rt__queue held;    /* held locks, oldest grant first */
  rt__queue all;     /* every lock not yet freed */
  rt__queue outbox;  /* ops waiting for the connection */
  rt__timeout outbox_retry; /* a write failed on a live connection */
  rt__loop lp;       /* timeouts and deferred completions */
  rt__later closing; /* starts the close from the loop */
  unsigned in_flight;
  unsigned conns_open;
  rt_connect_cb connect_cb;
  void *connect_data;
  rt_close_cb close_cb;
  void *close_data;
  void *data;
  rt_stats_t stats;
  char last_error[256]; /* rt_client_last_error() */
};

/* client.c */
rt__res *rt__res_get(rt_client_t *c, const void *name, size_t len);
void rt__res_unref(rt__res *r);
int rt__client_usable(const rt_client_t *c);
/* Record a failure in words for rt_client_last_error(). */
void rt__client_error(rt_client_t *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Called by ops.c after each reply while closing. */
void rt__client_close_step(rt_client_t *c);
/* A reply says Redis' clock read now_ms; the command left at sent_ms. */
void rt__clock_sample(rt_client_t *c, int64_t now_ms, uint64_t sent_ms);
/* The monotonic ms by which Redis' clock surely passed redis_ms. */
uint64_t rt__clock_local(const rt_client_t *c, int64_t redis_ms);

/* ops.c */
rt__op *rt__op_new(rt_client_t *c, int kind, rt__res *res, rt_lock_t *lock);
void rt__op_send(rt__op *op);
void rt__op_free(rt__op *op);
void rt__op_reply(rt__conn *conn, redisReply *reply, int status, void *arg);
void rt__outbox_flush(rt_client_t *c);
void rt__outbox_fail(rt_client_t *c, int status);

/* lock.c */
void rt__lock_on_reply(rt__op *op, const redisReply *reply, int status);
void rt__lock_on_notice(rt_client_t *c, const rt__notice *n);
void rt__lock_reconcile(rt_client_t *c);
void rt__lock_close_all(rt_client_t *c);
void rt__lock_free_all(rt_client_t *c);
void rt__lock_maybe_free(rt_lock_t *l);

/* stats.c */
void rt__hist_add(rt_histogram_t *h, uint64_t us);

/* sync.c */
void rt__sync_cancel(rt_lock_t *l);
void rt__sync_free(rt_lock_t *l);

#endif /* RT_CLIENT_H */
