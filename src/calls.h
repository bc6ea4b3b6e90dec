/* Script calls: every Redis request of the client is one FCALL of the
 * Functions library (or, on the eval path, EVALSHA) of a script from lua/
 * on the command connection, or, for a mutex's calls where the server has
 * the redturn module, its native command of the same name and
 * arguments; made from a row of the
 * script table in calls.c (the script, its number of keys, its argument
 * builder, its answer parser). A call carries its completion {cb, data}
 * and the caller's memory, like a libuv request: the completion runs
 * exactly once, with the script's typed answer (reply.h). A NOSCRIPT reply
 * is answered by sending the same call as EVAL, "Function not found" by
 * FUNCTION LOAD and the same call again; while the connection is
 * down, calls wait in the outbox. Each answer also bounds the offset of
 * the Redis clock from ours. */
#ifndef RT_CALLS_H
#define RT_CALLS_H

#include "cluster.h"
#include "conn.h"
#include "loop.h"
#include "reply.h"

/* The scripts the client calls: one row each in calls.c's table. */
typedef enum {
  RT__CALL_ENQUEUE,
  RT__CALL_TRY,
  RT__CALL_RELEASE,
  RT__CALL_EXTEND,
  RT__CALL_REAP,
  RT__CALL_INSPECT,
  RT__CALL_EVICT, /* an operator's forced release (call->id: the holder
                   * it must be, "" for any) */
  /* The same calls on a pool resource (lua/pool_*.lua): the same
   * answers, the resource's kind and the request's permits added. */
  RT__CALL_POOL_ENQUEUE,
  RT__CALL_POOL_TRY,
  RT__CALL_POOL_RELEASE,
  RT__CALL_POOL_EXTEND,
  RT__CALL_POOL_REAP,
  RT__CALL_POOL_INSPECT, /* its own answer (rt__pool_inspect) */
  RT__CALL_PROCLAIM,     /* an election's new value (call->label) */
  /* Not a script: PUBLISH to "<chan prefix>ack" (a write that replicates,
   * ordered after every write the master ran before it, whoever sent
   * them) and WAIT cfg->wait_replicas cfg->wait_replicas_timeout_ms. Its
   * completion finds the replicas that acknowledged in call->num. */
  RT__CALL_REPLICAS,
  RT__CALL_COUNT
} rt__call_kind;

/* The pool counterpart of a call kind (a kind without one: the
 * same). */
rt__call_kind rt__call_pool(rt__call_kind kind);
/* 1 if a call of kind is one of a pool resource's scripts (its
 * keys follow the mutex's in a resource's key block). */
int rt__call_is_pool(rt__call_kind kind);

/* A script call that could not be written on a live connection (out of
 * memory) is tried again after this long, not left for a reconnect. */
#define RT__WRITE_RETRY_MS 50

/* How fast the Redis clock may run ahead of ours between two samples (per
 * mille): the local lease estimate stays conservative under that drift. */
#define RT__DRIFT_PER_MILLE 1

typedef struct rt__calls rt__calls;
typedef struct rt__call rt__call;

/* status 0: a holds the script's answer (a->u.<script>). Else a negative
 * code, and call->replied says whether Redis answered (an error reply, or
 * an answer of the wrong shape) or not (the connection went away, the
 * outbox deadline passed, the calls are refused: closing or failed). */
typedef void (*rt__call_cb)(rt__call *call, int status, const rt__answer *a);

/* One script call, from rt__call_init until its completion ran. The
 * caller fills the arguments its script takes, keeps keys and id alive
 * until then, and may send the same call again from its completion. */
struct rt__call {
  rt__queue node;      /* calls->outbox while not sent or to be resent */
  rt__timeout timeout; /* outbox deadline (calls that are not patient), or
                          a cluster's resend after a retry answer */
  rt__later later;     /* completion without Redis */
  rt__calls *calls;
  rt__call_cb cb;
  void *data;       /* the caller's */
  const char *keys; /* the script's keys of key_len bytes, back to back */
  uint32_t key_len;
  uint32_t id_len;
  const char *id;       /* request id (reap: "" for none) */
  int64_t num;          /* lease ms (enqueue, try, extend); max (inspect) */
  const char *res_kind; /* POOL_*: the resource's kind (NUL-terminated) */
  uint32_t permits;     /* POOL_ENQUEUE, POOL_TRY: permits asked (0: all) */
  const char *label;    /* the request's label; NULL: the client's */
  size_t label_len;
  uint64_t sent_ms;      /* monotonic ms when last written */
  int kind;              /* rt__call_kind */
  int status;            /* of a completion without Redis */
  uint16_t redirects;    /* cluster: MOVED, ASK, TRYAGAIN followed so far */
  uint32_t down_tries;   /* cluster: a wait's TRYAGAIN, CLUSTERDOWN retried */
  unsigned retry : 1;    /* enqueue: a resend after a lost reply */
  unsigned evaled : 1;   /* resent with EVAL after NOSCRIPT */
  unsigned fcall : 1;    /* last written as FCALL (the Functions library) */
  unsigned native : 1;   /* last written as the module's command */
  unsigned reloaded : 1; /* resent after "Function not found" */
  unsigned in_flight : 1;
  unsigned written : 1; /* reached the wire at least once */
  unsigned replied : 1; /* the completion has Redis' reply */
};

/* The client's script calls. The owner sets open and refuse as its state
 * changes. */
struct rt__calls {
  rt__loop *lp;
  rt__conn *conn; /* the command connection (one server) */
  /* A Redis Cluster: each call goes to the node of its keys' slot, with
   * the channel prefix of that slot; NULL: one server, conn. */
  rt__cluster *cluster;
  const rt__config *cfg;   /* label, command timeout */
  const char *chan_prefix; /* "<prefix>:c:", every script's ARGV[1] */
  size_t chan_prefix_len;
  int open;         /* 1: write while the connection is up; 0: use the outbox */
  int refuse;       /* not 0: every call not written completes with this;
                     * closing or failed, so no wait retries a cluster down
                     * past the redirect bound (a close ends) */
  rt__queue outbox; /* calls waiting for the connection */
  rt__timeout outbox_retry; /* a write failed on a live connection */
  unsigned in_flight;
  uint64_t fcalls, evals; /* calls written as FCALL[_RO], as EVAL[SHA] */
  uint64_t module_calls;  /* calls written as the module's commands */
  int script_path;        /* of the latest call written (rt_script_path_t) */
  int lua_path;           /* of the latest script call (FUNCTIONS, EVAL) */
  /* An upper bound of (Redis clock - monotonic clock) in ms, from the
   * answers: Redis ran a script after we sent it. */
  int64_t offset_ms;
  uint64_t offset_at_ms; /* when it was sampled; 0: never */
  char *error;           /* Redis' last error reply in words goes here */
  size_t error_cap;
  /* After a completion, once no call is in flight (closing waits on it). */
  void (*idle)(rt__calls *calls);
};

void rt__calls_init(rt__calls *cs, rt__loop *lp, rt__conn *conn,
                    const rt__config *cfg, const char *chan_prefix,
                    size_t chan_prefix_len, char *error, size_t error_cap,
                    void (*idle)(rt__calls *calls));
/* Prepare a call of script kind on the given keys (no I/O). */
void rt__call_init(rt__call *call, rt__calls *cs, rt__call_kind kind,
                   const char *keys, uint32_t key_len, rt__call_cb cb,
                   void *data);
/* Write it now, or keep it in the outbox, or (refused) complete it from
 * the loop. */
void rt__call_send(rt__call *call);
/* Take back a call that is not in flight: out of the outbox, no deadline,
 * no deferred completion. Its completion will not run. */
void rt__call_abandon(rt__call *call);
/* The command connection's reply event (rt__conn_events.reply). */
void rt__calls_on_reply(rt__conn *conn, redisReply *reply, int status,
                        void *arg);
/* Send every call of the outbox (the connection is back), or complete
 * every one with status (<0). */
void rt__calls_flush(rt__calls *cs);
void rt__calls_fail(rt__calls *cs, int status);

/* The earliest monotonic ms at which the Redis clock may reach redis_ms
 * (now, before any answer gave a sample): a lease counted to here ends
 * early, never late. */
uint64_t rt__calls_clock_local(const rt__calls *cs, int64_t redis_ms);

#endif /* RT_CALLS_H */
