/* Finding the master through Sentinel, the way DNS finds a host: ask the
 * Sentinels of a redis-sentinel:// URL in turn for the address of the
 * master they know by name, and watch one of them for +switch-master.
 * Each Sentinel gets its own link (src/link.c), with TLS for
 * rediss-sentinel://; conn.c uses this for its resolve step. */
#ifndef RT_SENTINEL_H
#define RT_SENTINEL_H

#include <uv.h>

#include "common.h"
#include "link.h"

typedef struct rt__sentinel rt__sentinel;

/* At most this many Sentinels in a URL (url.c's limit). */
#define RT__SENTINEL_ORDER 16
/* The longest a failover keeps its old master avoided (Sentinel's own
 * failover-timeout defaults to 3 minutes; most end within seconds). */
#define RT__SENTINEL_AVOID_MS 60000

/* The answer to rt__sentinel_ask: status 0 and the master's address
 * (host: numeric text as Sentinel gave it, valid during the call), or
 * RT_ECONNECT with the reason in s->error. */
typedef void (*rt__sentinel_found_fn)(rt__sentinel *s, int status,
                                      const char *host, int port);
/* A +switch-master for our master: the new master's address. */
typedef void (*rt__sentinel_switch_fn)(rt__sentinel *s, const char *host,
                                       int port);
/* A failover of our master (at host:port, as the Sentinel knows it) began:
 * a Sentinel published one of its first steps; or (host NULL) every
 * Sentinel that had begun the failover rt__sentinel_avoid names gave it up
 * (then the avoid is lifted already). */
typedef void (*rt__sentinel_failover_fn)(rt__sentinel *s, const char *host,
                                         int port);

/* One Sentinel being talked to: the ask in flight or the watch. */
typedef struct rt__sentinel_peer {
  rt__sentinel *s;
  rt__link *link;   /* NULL: none open */
  uv_timer_t timer; /* ask: the per-Sentinel deadline; watch: the pause
                         before the next Sentinel */
  unsigned gen;     /* bumped when the link is dropped: a resolution of
                         an older one is stale */
  int auth_pending; /* the AUTH reply is still to come */
  size_t at;        /* position in s->order being tried */
  size_t tried;     /* Sentinels tried in this round */
  int watch;        /* 1: the +switch-master subscription */
  int alert;        /* 1: the failover-steps subscription on the one
                         Sentinel cfg->sentinels[at] */
  int failing;      /* alert: that Sentinel runs a failover of our master */
} rt__sentinel_peer;

struct rt__sentinel {
  uv_loop_t *loop;
  const rt__config *cfg;
  rt__tls_ctx *tls; /* the connection's TLS settings, or NULL */
  void *owner;
  rt__sentinel_found_fn found; /* NULL: no ask in flight */
  rt__sentinel_switch_fn on_switch;
  rt__sentinel_failover_fn on_failover;
  void (*closed)(rt__sentinel *s);
  /* Indexes into cfg->sentinels, the one that answered last first (the
   * Sentinel client guidelines). */
  size_t order[RT__SENTINEL_ORDER];
  rt__sentinel_peer ask, watch;
  /* One failover-steps subscription per Sentinel of the URL: only the
   * Sentinel that runs a failover publishes its steps. */
  rt__sentinel_peer alerts[RT__SENTINEL_ORDER];
  size_t nalerts;
  /* The config-epoch of the master the last successful ask named. */
  uint64_t epoch;
  /* While a failover of the master avoid_host:avoid_port (config-epoch
   * avoid_epoch) is under way, until avoid_until (rt__mono_ms), an ask
   * refuses a Sentinel that still names it (avoid_port 0: none). */
  char avoid_host[64];
  int avoid_port;
  uint64_t avoid_epoch;
  uint64_t avoid_until;
  unsigned open; /* handles, links and resolutions not yet closed */
  int closing;
  int watching;
  int nil_answers; /* Sentinels that do not know the master's name */
  char error[512];
};

/* Prepare s (two timers; no I/O). tls may be NULL; it must outlive s. */
void rt__sentinel_init(rt__sentinel *s, uv_loop_t *loop, const rt__config *cfg,
                       void *owner, rt__sentinel_switch_fn on_switch,
                       rt__sentinel_failover_fn on_failover);
void rt__sentinel_set_tls(rt__sentinel *s, rt__tls_ctx *tls);
/* Ask the Sentinels in turn for the master's address; found() runs once,
 * from the loop. An ask in flight is dropped for the new one. */
void rt__sentinel_ask(rt__sentinel *s, rt__sentinel_found_fn found);
/* Refuse, in the asks to come, a Sentinel that names host:port with a
 * config-epoch of epoch or less, for at most RT__SENTINEL_AVOID_MS or until
 * an ask finds another master (a failover of it is under way). */
void rt__sentinel_avoid(rt__sentinel *s, const char *host, int port,
                        uint64_t epoch);
/* Whether rt__sentinel_avoid is in force. */
int rt__sentinel_avoiding(const rt__sentinel *s);
/* Drop the ask in flight (found() will not run). */
void rt__sentinel_cancel(rt__sentinel *s);
/* Subscribe to +switch-master on one Sentinel (another one when it is
 * lost), and to the first steps of a failover on every Sentinel;
 * idempotent. */
void rt__sentinel_watch(rt__sentinel *s);
/* How long one Sentinel may take to answer an ask: the connect timeout
 * shared among the Sentinels (at least 100 ms), so that a silent one
 * leaves time for the others. */
int64_t rt__sentinel_timeout_ms(const rt__sentinel *s);
/* Close everything; closed() runs from the loop once every handle closed. */
void rt__sentinel_close(rt__sentinel *s, void (*closed)(rt__sentinel *s));

#endif /* RT_SENTINEL_H */
