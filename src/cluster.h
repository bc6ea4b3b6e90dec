/* A Redis Cluster seen from one client: the slot map (CLUSTER SHARDS), a
 * table of nodes with a command connection and a subscriber connection
 * each (both made when first needed), the route of a slot to its node,
 * redirects applied to the map, the client's shard channel of each slot
 * subscribed on the node that owns it, and topology refreshes after a
 * redirect or a lost node. Script calls (calls.c) sit on top of it; what
 * it reports goes up through the hooks it was handed. */
#ifndef RT_CLUSTER_H
#define RT_CLUSTER_H

#include "conn.h"
#include "loop.h"
#include "topology.h"

/* How long a TRYAGAIN, CLUSTERDOWN or an ASK to a node not connected yet
 * waits before the call is sent again; how often a refresh that found no
 * node to ask is tried again. */
#define RT__CLUSTER_RETRY_MS 50
/* Most nodes one client keeps (a cluster of 128 primaries). */
#define RT__CLUSTER_NODES_MAX 128

typedef struct rt__cluster rt__cluster;

typedef struct rt__cluster_hooks {
  /* The reply to a command written on a node's command connection by
   * rt__cluster_connect_route's caller (rt__conn_events.reply's contract). */
  void (*reply)(rt__conn *conn, redisReply *reply, int status, void *arg);
  /* A message on one of the client's shard channels. */
  void (*message)(rt__cluster *cl, const char *msg, size_t len);
  /* The first slot map is loaded (status 0), or could not be (status <0,
   * cl->error says why). */
  void (*loaded)(rt__cluster *cl, int status);
  /* A route may have opened: a node connected, a channel subscribed, the
   * map changed. Calls waiting for one are sent again. */
  void (*routes)(rt__cluster *cl);
  /* Some slots lost the client's subscription (their node went away or
   * the slot moved): waits there may have missed their notices. */
  void (*lost)(rt__cluster *cl);
  /* rt__cluster_close finished: every connection closed. */
  void (*closed)(rt__cluster *cl);
} rt__cluster_hooks;

typedef struct rt__node {
  rt__cluster *cl;
  rt__config cfg; /* the client's, with this node's host and port (shallow:
                     never freed) */
  char host[RT__HOST_MAX + 1]; /* any host a URL may name */
  int port;
  unsigned index;
  int owns;    /* slots the map gives it */
  int started; /* its command connection was started once */
  int sub_started;
  int idle; /* the last map's online master with no slots (see load_map) */
  rt__conn cmd;
  rt__conn sub;
} rt__node;

enum { RT__SUB_NONE = 0, RT__SUB_PENDING, RT__SUB_DONE };

struct rt__cluster {
  rt__loop *lp;
  const rt__config *cfg;
  const rt__cluster_hooks *hooks;
  void *owner;
  const char *client_id; /* 32 hex digits */
  const char *channel;   /* plain SUBSCRIBE of each subscriber */
  size_t channel_len;
  rt__node *nodes[RT__CLUSTER_NODES_MAX];
  unsigned nnodes;
  unsigned conns_open;
  uint16_t *owner_of;  /* slot -> node index + 1 (0: unknown) */
  uint16_t *sub_node;  /* slot -> node index + 1 its subscription is on */
  uint8_t *sub_state;  /* slot -> RT__SUB_* */
  rt__timeout refresh; /* the next topology refresh */
  int refreshing;      /* a CLUSTER SHARDS is in flight */
  int refresh_again;   /* another was asked for meanwhile */
  int loaded;          /* a map was loaded once */
  int closing;
  int refresh_arg, ignore_arg, slots_arg; /* told apart in replies */
  uint64_t refreshes;                     /* maps loaded */
  char error[256];
};

/* Prepare cl (no I/O). 0 or RT_ENOMEM. */
int rt__cluster_init(rt__cluster *cl, rt__loop *lp, const rt__config *cfg,
                     const rt__cluster_hooks *hooks, void *owner,
                     const char *client_id, const char *channel,
                     size_t channel_len);
/* Connect to the seed host:port and load the map (hooks->loaded); the
 * URL's other seeds are known nodes from the start. */
void rt__cluster_start(rt__cluster *cl, const char *host, int port);
/* The master the map names for slot, or NULL: no map loaded yet, or none
 * known for slot. */
rt__node *rt__cluster_slot_node(const rt__cluster *cl, int slot);
/* The command connection serving slot, up (and, when need_sub, with the
 * client's channel of that slot subscribed there), or NULL: then what is
 * missing is started and hooks->routes runs when it is there. */
rt__conn *rt__cluster_connect_route(rt__cluster *cl, int slot, int need_sub);
/* A MOVED from conn: the map says so at once and a refresh follows. */
void rt__cluster_moved(rt__cluster *cl, const rt__conn *conn,
                       const rt__redirect *rd);
/* The error r answering an SSUBSCRIBE on conn (a node's subscriber
 * connection, or another subscriber's connection to a node): a MOVED is
 * applied as rt__cluster_moved does. Returns rt__redirect_parse's kind
 * (RT__REDIRECT_NONE: any other error), or RT_EPROTO for a malformed
 * MOVED or ASK. */
int rt__cluster_sub_refused(rt__cluster *cl, const rt__conn *conn,
                            const redisReply *r);
/* An ASK from conn: the target's command connection with ASKING written
 * on it (the next command there is let in), or NULL if it is not up yet
 * (it is being connected). */
rt__conn *rt__cluster_asking(rt__cluster *cl, const rt__conn *conn,
                             const rt__redirect *rd);
/* Schedule a topology refresh in ms. */
void rt__cluster_refresh_in(rt__cluster *cl, int64_t ms);
/* "<prefix>:{<tag of slot>}:" into out (room for prefix_len + 9 bytes);
 * returns its length. */
size_t rt__cluster_chan_prefix(const rt__config *cfg, int slot, char *out);
/* Close every connection; hooks->closed runs once all closed. Idempotent. */
void rt__cluster_close(rt__cluster *cl);
/* Free the memory after hooks->closed (or when never started). */
void rt__cluster_free(rt__cluster *cl);

#endif /* RT_CLUSTER_H */
