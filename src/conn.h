/* One connection to Redis on the client's libuv loop (its bytes go through
 * src/link.c): the host name resolved with uv_getaddrinfo (the link then
 * connects to a numeric address, so nothing blocks the loop), the
 * handshake (AUTH, SELECT,
 * CLIENT KILL of our previous connection, CLIENT SETNAME, CLIENT ID; for
 * the command connection a check of the server's version and eviction
 * policy and SCRIPT LOAD, for the subscriber SSUBSCRIBE), a connect
 * deadline, a deadline on the oldest unanswered
 * command, reconnects with capped exponential backoff, and a close that
 * reports once every libuv handle it used has closed. With a
 * redis-sentinel:// URL the host comes from the Sentinels (sentinel.c),
 * the handshake checks ROLE, and a +switch-master for our master drops
 * the connection (the reconnect asks the Sentinels again).
 *
 * The header of three files of the transport layer, a section each:
 * ring.c (what a connection sends), handshake.c (the handshake) and
 * conn.c (the connection's life). */
#ifndef RT_CONN_H
#define RT_CONN_H

#include <hiredis/hiredis.h>
#include <uv.h>

#include "common.h"
#include "link.h"
#include "loop.h"
#include "rt_scripts.h"
#include "sentinel.h"

typedef struct rt__conn rt__conn;

/* What to do with the reply to one command sent (NULL: the connection went
 * away first). */
typedef void (*rt__conn_reply_fn)(rt__conn *conn, redisReply *reply, void *arg);

/* One command sent and not answered yet. */
typedef struct rt__sent {
  uint64_t ms; /* when it was sent (rt__mono_ms) */
  rt__conn_reply_fn fn;
  void *arg;
} rt__sent;

/* Addresses of one host name tried per connect attempt. */
#define RT__CONN_ADDRS 8

/* The version of the redturn module's command contract this client
 * speaks (module/README.md; redturn.version answers the server's). */
#define RT__MODULE_VERSION RT_PROTO_MODULE_VERSION

typedef struct rt__conn_events {
  /* Connected and handshake done: commands may be sent. */
  void (*up)(rt__conn *conn);
  /* A connect attempt failed or the connection was lost (status says why:
   * RT_ECONNECT, RT_EAUTH, RT_ENOPERM, RT_ETIMEDOUT, RT_EDISCONNECTED...;
   * conn->error says it in words). Never called from inside rt__conn_*
   * calls. */
  void (*down)(rt__conn *conn, int status);
  /* Reply to rt__conn_command(); reply is NULL when the connection went
   * away first, with status saying why (RT_EDISCONNECTED, RT_ETIMEDOUT). */
  void (*reply)(rt__conn *conn, redisReply *reply, int status, void *arg);
  /* A message on the subscribed channel (subscriber connections). */
  void (*message)(rt__conn *conn, const char *msg, size_t len);
  /* rt__conn_close() finished: every handle is closed. */
  void (*closed)(rt__conn *conn);
  /* The server dropped our subscription to a shard channel (its slot
   * moved to another node); NULL: not wanted. */
  void (*unsubscribed)(rt__conn *conn, const char *channel, size_t len);
  /* A message on a shard channel with the channel's name, in place of
   * message() (a subscriber to several channels); NULL: message(). */
  void (*channel_message)(rt__conn *conn, const char *channel,
                          size_t channel_len, const char *msg, size_t len);
} rt__conn_events;

enum {
  RT__CONN_DOWN = 0,   /* not connected; maybe a retry is scheduled */
  RT__CONN_CONNECTING, /* connecting or in the handshake */
  RT__CONN_UP,
  RT__CONN_CLOSING,
  RT__CONN_CLOSED
};

struct rt__conn {
  uv_loop_t *loop;
  const rt__config *cfg;
  const rt__conn_events *ev;
  void *owner;
  /* The end of the handshake (handshake.c): 0 up, else drop with it. */
  void (*handshake_over)(rt__conn *conn, int status);
  rt__link *link;      /* the stream of this attempt, or NULL */
  rt__tls_ctx *tls;    /* TLS settings, made at the first connect; or NULL */
  int answered;        /* the server answered on this attempt's link */
  const char *channel; /* subscriber: the channel; NULL: command connection */
  const rt__script *scripts; /* loaded in the handshake (command connection) */
  size_t nscripts;
  /* The script path this connection's handshake chose
   * (RT_SCRIPT_PATH_FUNCTIONS: the library is loaded, calls go FCALL;
   * RT_SCRIPT_PATH_EVAL: EVALSHA); RT_SCRIPT_PATH_AUTO until then. */
  int script_path;
  /* What the handshake found of the redturn module (rt_module_state_t;
   * RT_MODULE_USED: a mutex's calls go to its commands) and the version
   * it answered (0: none). */
  int module;
  int module_version;
  size_t channel_len;
  char name[48]; /* CLIENT SETNAME, so operators can find (and kill) us */
  /* CLIENT ID of the connection Redis last knew as ours (0: none). A new
   * connection kills the old one first, so bytes of the old one that are
   * still on their way (a slow network, a proxy) are never run late. */
  long long redis_id;
  char run_id[41]; /* of the server that gave redis_id (ids restart) */
  /* INFO said cluster_enabled:1. A subscriber then skips the SSUBSCRIBE of
   * its channel (a shard channel is served by one node only): the cluster
   * layer subscribes per slot. */
  int cluster_enabled;
  int state;
  int drop_status;     /* why we dropped the connection ourselves */
  int report_pending;  /* a down(report_pending) is due from the timer */
  unsigned attempt;    /* reconnect attempts since the last success */
  uint64_t rand;       /* jitter for backoff */
  uv_timer_t timer;    /* connect deadline, command deadline or backoff */
  unsigned links_open; /* links not yet closed */
  int timer_closed;
  int close_when_idle; /* closing: disconnect once every reply is in */
  rt__sent *sent;      /* ring of unanswered commands, in send order */
  size_t sent_head, sent_len, sent_cap;
  /* The addresses of the host for this attempt (numeric, IPv4 first), the
   * next one to try, and the resolution in flight (NULL: none). */
  char addrs[RT__CONN_ADDRS][48];
  unsigned naddrs, next_addr;
  struct rt__resolve *resolving;
  unsigned reqs_open; /* resolutions not yet called back (stale ones too) */
  char peer[96];      /* "host:port" or "name:port (address)" being tried */
  /* The server to connect to: the configured host and port, or the
   * master the Sentinels named (redis-sentinel:// URLs). */
  const char *host;
  int port;
  char master_host[64];
  /* That master's config-epoch as the Sentinels named it (0 for any other
   * URL): the scripts fold it into fences (lua/lib/prelude.lua). */
  uint64_t epoch;
  /* Sentinel discovery and the +switch-master watch (cfg->nsentinels > 0);
   * sentinel_open: not yet closed. */
  rt__sentinel sentinel;
  int sentinel_open;
  /* The last failure of this connection in words (see
   * rt_client_last_error). */
  char error[256];
};

/* ---- ring.c: what a connection sends ----------------------------------- */

/* Record the connection's last failure in words (conn->error). */
void rt__conn_set_error(rt__conn *conn, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Format one command and queue it on the link, remembering fn (and arg)
 * for its reply in the ring. 0, RT_ENOMEM or the link's error. */
int rt__conn_send(rt__conn *conn, rt__conn_reply_fn fn, void *arg, int argc,
                  const char **argv, const size_t *lens);
/* The oldest unanswered command, taken out of the ring (sent_len > 0). */
rt__sent rt__conn_sent_pop(rt__conn *conn);

/* ---- handshake.c: the handshake of a new connection ---------------------- */

/* Queue the handshake on conn's new link: 0, or RT_ENOMEM. Its end comes
 * through conn->handshake_over. */
int rt__conn_handshake(rt__conn *conn);

/* ---- conn.c: a connection's life ----------------------------------------- */

/* Prepare conn (no I/O). channel NULL makes a command connection, which
 * loads the Functions library (rt__library) or every script of rt__scripts
 * in its handshake, as cfg->script_path says. */
void rt__conn_init(rt__conn *conn, uv_loop_t *loop, const rt__config *cfg,
                   const rt__conn_events *ev, void *owner, const char *name,
                   const char *channel, size_t channel_len);
/* Start a connect attempt now (resolving the host name again); the
 * outcome comes through up() or down(). */
void rt__conn_connect(rt__conn *conn);
/* Schedule a connect attempt after a capped exponential backoff. */
void rt__conn_retry_later(rt__conn *conn);
/* Send a command (binary-safe argv). 0, or RT_EDISCONNECTED when the
 * connection is not up (then reply() will not be called). */
int rt__conn_command(rt__conn *conn, int argc, const char **argv,
                     const size_t *argvlen, void *arg);
/* Drop an up connection from inside a reply or an event (a reply that
 * says the server cannot take writes): unanswered commands get NULL now,
 * down(status) comes from the loop, and the reconnect asks the Sentinels
 * again. why is kept in conn->error. */
void rt__conn_drop_soon(rt__conn *conn, int status, const char *why);
/* Let unanswered commands finish (within the command timeout), then close;
 * closed() runs when every handle closed. */
void rt__conn_close(rt__conn *conn);

#endif /* RT_CONN_H */
