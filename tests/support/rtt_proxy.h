/* A fault-injecting TCP proxy for the integration tests: it sits between
 * the code under test and a real redis-server on loopback and delays,
 * drops, holds (and later releases) or cuts the bytes of each connection,
 * per direction, or refuses new connections.
 *
 * It runs in its own thread on its own private uv_loop_t, so it keeps
 * forwarding while the test's thread blocks (in uv_run, in a synchronous
 * hiredis call, in a sleep). Every rtt_proxy_* call may come from any
 * thread; it is carried out by the proxy thread and returns once it was
 * applied: after rtt_proxy_set(..., RTT_HOLD, ...) returns, every byte the
 * proxy reads in that direction from then on is held.
 *
 * Connections are numbered in accept order: 0, 1, 2, ... Faults are chosen
 * per chunk at the moment the proxy reads it. Within one direction of one
 * connection bytes are always forwarded in order (as TCP would): a chunk
 * waits behind an earlier held or delayed one.
 *
 * The end of a stream (EOF, or a reset, from one side) travels like a chunk
 * behind the bytes read before it and is passed on as a half close
 * (shutdown): it is delayed and held like data (not dropped), so a request
 * held while its client gave up is still delivered, and executed, on
 * release. A connection is closed once both directions have passed their
 * end on, on any write error, by rtt_proxy_cut() or by rtt_proxy_stop().
 * The proxy never dies of SIGPIPE (its thread blocks it) and leaves the
 * process's signal dispositions alone.
 *
 * Buffering is unbounded (no backpressure): fine for tests, not for bulk
 * traffic. Failures of start/stop and misuse fail the Criterion test. */
#ifndef RTT_PROXY_H
#define RTT_PROXY_H

#include <stddef.h>
#include <stdint.h>

typedef struct rtt_proxy rtt_proxy;

/* Directions (a bit mask): client -> Redis, Redis -> client, both. */
enum { RTT_UP = 1, RTT_DOWN = 2, RTT_BOTH = 3 };

/* conn argument meaning every connection, open or accepted later. */
#define RTT_ALL (-1)

typedef enum rtt_fault {
  RTT_PASS = 0, /* forward at once (the default) */
  RTT_DELAY,    /* forward each chunk ms milliseconds after it was read */
  RTT_DROP,     /* read and discard the bytes (a stream end still passes) */
  RTT_HOLD      /* read and keep the bytes until rtt_proxy_release() */
} rtt_fault;

/* Listen on 127.0.0.1, on a free port, and forward each connection to
 * 127.0.0.1:target_port. */
rtt_proxy *rtt_proxy_start(int target_port);
/* The port it listens on. */
int rtt_proxy_port(const rtt_proxy *p);
/* Close every connection (dropping whatever is held), stop the thread,
 * free everything. NULL is a no-op. */
void rtt_proxy_stop(rtt_proxy *p);

/* Set the fault of direction(s) dir (RTT_UP/RTT_DOWN/RTT_BOTH) of
 * connection conn, or of all (RTT_ALL: also replaces every per-connection
 * setting of dir, and applies to connections accepted later). conn may
 * name a connection not accepted yet. ms is used by RTT_DELAY only. */
void rtt_proxy_set(rtt_proxy *p, int conn, int dir, rtt_fault fault,
                   int64_t ms);
/* Deliver every byte (and stream end) held so far in dir of conn (or of
 * all connections). The fault stays: later bytes are held again unless it
 * was changed. */
void rtt_proxy_release(rtt_proxy *p, int conn, int dir);
/* Close both sides of conn (or of every open connection) now, dropping
 * whatever is queued: both peers see EOF (or a reset). */
void rtt_proxy_cut(rtt_proxy *p, int conn);
/* on: from now on accept each new connection and reset it at once (like
 * a Redis that is down: the client's connect, or its first read or write,
 * fails); such connections get no number. off: forward them again. */
void rtt_proxy_refuse(rtt_proxy *p, int on);
/* Back to plain forwarding for every connection and direction, refuse off.
 * Bytes already held stay held (and later bytes of that direction queue
 * behind them, keeping TCP order) until rtt_proxy_release(). */
void rtt_proxy_reset(rtt_proxy *p);

/* Connections accepted and forwarded so far (closed ones included). */
int rtt_proxy_conn_count(rtt_proxy *p);
/* Is connection conn still open? With RTT_ALL: how many are open. */
int rtt_proxy_is_open(rtt_proxy *p, int conn);
/* Connections reset because of rtt_proxy_refuse(). */
int rtt_proxy_refused(rtt_proxy *p);
/* Wait (sleeping, without running any loop) until at least n connections
 * were accepted or max_ms passed; returns whether they were. */
int rtt_proxy_wait_conns(rtt_proxy *p, int n, int64_t max_ms);
/* Bytes forwarded (passed on toward the receiver) in dir, all connections
 * together, since the start (RTT_BOTH: both directions summed). */
uint64_t rtt_proxy_bytes(rtt_proxy *p, int dir);
/* Bytes held right now in dir of conn (or of all connections). */
uint64_t rtt_proxy_held(rtt_proxy *p, int conn, int dir);

#endif /* RTT_PROXY_H */
