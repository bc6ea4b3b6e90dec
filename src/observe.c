/* Observers of elections (rt_observe). The scripts publish every change
 * of an election's leader on the resource's observe channel "<key
 * base>o" (DESIGN.md section 13, Several holders); the observers of one client listen on
 * one subscriber connection of their own, made with the first observer
 * and closed once the last one stopped. After every subscribe an observer
 * reads the resource once (pool_inspect, the reconcile) and reports the
 * leader if it differs from what it reported last; when the lease of the
 * leader it knows runs out it reads once more, since a lease that ends
 * with nobody waiting makes no script run, so nothing is published. A
 * read goes over the command connection and the notices over this one: a
 * PING here orders the two (on_read). On a Redis Cluster each observer has
 * a connection of its own to the master serving its slot, and moves to
 * the new one (a new connection, subscribe, read) when its subscription
 * answers MOVED, is dropped by the server (the slot moved) or its
 * connection is lost while the map names another master. */
#include <stdio.h>
#include <string.h>

#include "observe.h"

/* After the lease end by the client's conservative clock, before the
 * read that finds it over. */
#define OBS_SLACK_MS 5
/* A failed read, or a lease end that is already past, is read again
 * after this long. */
#define OBS_RETRY_MS 200
/* A node that dropped an observer's channel (its slot moved away) is not
 * subscribed on again for this long: a map loaded meanwhile may still name
 * it, and a demoted master accepts the subscription as a replica yet gets
 * no notice until its new master learns it is its replica (a notice lost
 * for good). A master again by then is subscribed on after the wait. */
#define OBS_SHUN_MS 3000

typedef struct rt__observing {
  rt_client_t *client;
  struct rt__observing *next; /* the client's other sets (a cluster's) */
  rt__node *node;             /* the cluster node it talks to, or NULL */
  rt__conn conn;
  char *channel; /* the connection's own: "<prefix>:o:<client id>" */
  rt__queue observers;
  rt__later check;       /* closes the connection if nobody observes */
  uint64_t pings, pongs; /* PINGs sent and answered on this connection */
  int closing;
} rt__observing;

/* One state of an election: a leader, or nobody. */
typedef struct state {
  int leader;
  uint64_t fence;
  int64_t deadline_ms;
  const char *id, *value;
  size_t id_len, value_len;
} state;

/* A state kept by an observer (its strings its own). */
typedef struct kept {
  int leader;
  uint64_t fence;
  int64_t deadline_ms;
  size_t value_len;
  char id[RT__ENTRY_MAX];
  char value[RT_VALUE_MAX + 1];
} kept;

struct rt_observer_s {
  rt__observing *set; /* NULL once stopped */
  rt__queue node;     /* set->observers */
  rt__res *res;
  rt_observe_cb cb;
  void *data;
  char *channel; /* "<key base>o" */
  size_t channel_len;
  rt__op *read;            /* the reconcile read in flight, or NULL */
  rt__timeout timer;       /* the lease end, or a failed read's retry */
  rt__timeout move;        /* a cluster's: look up its slot's master */
  int slot;                /* of its keys (a cluster's observers) */
  unsigned shunned;        /* node index + 1 that dropped its channel */
  uint64_t shun_until;     /* rt__mono_ms() until which it is passed over */
  rt__later later;         /* frees it */
  unsigned subscribed : 1; /* the subscription is confirmed and lives */
  unsigned heard : 1;      /* a notice came since the read was sent */
  unsigned reread : 1;     /* read again once the read in flight ends */
  unsigned down_told : 1;  /* the lost subscription was reported */
  unsigned stopped : 1;    /* no more callbacks; freed from the loop */
  unsigned told : 1;       /* last holds the state reported last */
  unsigned pending : 1;    /* seen waits for the answer to PING ping_no */
  uint64_t ping_no;
  kept last;
  kept seen; /* a read's state waiting for its PING */
};

static rt_client_t *obs_client(const rt_observer_t *o) {
  return o->res->client;
}

/* ---- life of an observer ------------------------------------------------ */

static void obs_free_later(rt__later *l) {
  rt_observer_t *o = rt__container_of(l, rt_observer_t, later);
  rt__res_unref(o->res);
  rt__free(o->channel);
  rt__free(o);
}

static void set_close(rt__observing *set) {
  if (set->closing)
    return;
  set->closing = 1;
  for (rt__observing **p = &set->client->observing; *p != NULL; p = &(*p)->next)
    if (*p == set) {
      *p = set->next;
      break;
    }
  rt__defer_cancel(&set->check);
  rt__conn_close(&set->conn);
}

static void set_check_later(rt__later *l) {
  rt__observing *set = rt__container_of(l, rt__observing, check);
  if (rt__queue_empty(&set->observers))
    set_close(set);
}

/* A set nobody observes on closes from the loop (one may join before). */
static void close_if_empty(rt__observing *set) {
  if (set != NULL && !set->closing && rt__queue_empty(&set->observers) &&
      rt__queue_empty(&set->check.node))
    rt__defer(&set->client->lp, &set->check, set_check_later);
}

/* No more callbacks: out of its set, no timer, no read; freed from the
 * loop. Its subscription stays until the connection closes (a
 * SUNSUBSCRIBE answers as a push, not in the order of the replies): its
 * messages find no observer. */
static void detach(rt_observer_t *o) {
  rt_client_t *c = obs_client(o);
  rt__observing *set = o->set;
  o->stopped = 1;
  o->set = NULL;
  rt__queue_remove(&o->node);
  rt__timeout_clear(&c->lp, &o->timer);
  rt__timeout_clear(&c->lp, &o->move);
  if (o->read != NULL) {
    o->read->data = NULL; /* its completion only frees it */
    o->read = NULL;
  }
  rt__defer(&c->lp, &o->later, obs_free_later);
  close_if_empty(set);
}

static void report(rt_observer_t *o, int status, const rt_leader_t *leader) {
  if (!o->stopped)
    o->cb(o, status, leader, o->data);
}

/* The last callback, with status (RT_EDISCONNECTED tells a loss the
 * observer outlives: a first connect that failed so is RT_ECONNECT). */
static void end(rt_observer_t *o, int status) {
  if (o->stopped)
    return;
  if (status == RT_EDISCONNECTED)
    status = RT_ECONNECT;
  detach(o);
  o->cb(o, status, NULL, o->data);
}

/* fn(o, arg, p) on every observer of set; fn may stop any of them, or
 * start new ones (those are not visited). */
typedef void (*each_fn)(rt_observer_t *o, int arg, const void *p);
static void each(rt__observing *set, each_fn fn, int arg, const void *p) {
  rt__queue todo;
  rt__queue_init(&todo);
  rt__queue_move(&set->observers, &todo);
  while (!rt__queue_empty(&todo)) {
    rt__queue *q = todo.next;
    rt__queue_remove(q);
    rt__queue_insert_tail(&set->observers, q);
    fn(rt__queue_data(q, rt_observer_t, node), arg, p);
  }
}

/* ---- states and what is reported ----------------------------------------- */

/* Is s after what o reported last? Notices of one resource come in fence
 * order; within one fence a leader's value may change (proclaim), then
 * the leader may go (a notice of nobody carries the last fence). */
static int newer(const rt_observer_t *o, const state *s) {
  const kept *k = &o->last;
  if (!o->told || s->fence > k->fence)
    return 1;
  if (s->fence < k->fence || !k->leader)
    return 0;
  if (!s->leader)
    return 1;
  return s->id_len != strlen(k->id) || memcmp(s->id, k->id, s->id_len) != 0 ||
         s->value_len != k->value_len ||
         memcmp(s->value, k->value, s->value_len) != 0;
}

static void keep(kept *k, const state *s) {
  k->leader = s->leader;
  k->fence = s->fence;
  k->deadline_ms = s->deadline_ms;
  snprintf(k->id, sizeof(k->id), "%.*s", (int)s->id_len, s->id);
  k->value_len = s->value_len;
  memcpy(k->value, s->value, s->value_len);
  k->value[s->value_len] = '\0';
}

static void view(const kept *k, state *s) {
  s->leader = k->leader;
  s->fence = k->fence;
  s->deadline_ms = k->deadline_ms;
  s->id = k->id;
  s->id_len = strlen(k->id);
  s->value = k->value;
  s->value_len = k->value_len;
}

static void timer_fire(rt__timeout *t);

/* Read again just after the lease ending at deadline_ms (Redis clock) may
 * have ended (a read too early finds it held and arms this again). */
static void arm_lease_end(rt_observer_t *o, int64_t deadline_ms) {
  rt_client_t *c = obs_client(o);
  uint64_t end = rt__clock_local(c, deadline_ms), now = rt__mono_ms();
  int64_t ms = end > now ? (int64_t)(end - now) + OBS_SLACK_MS : OBS_RETRY_MS;
  rt__timeout_set(&c->lp, &o->timer, timer_fire, ms);
}

/* A state from a notice or a read: reported if it is newer than the last
 * one reported. */
static void offer(rt_observer_t *o, const state *s) {
  rt_client_t *c = obs_client(o);
  if (!newer(o, s)) {
    /* The same leader, maybe extended: its lease ends later. */
    if (s->leader && o->told && o->last.leader && s->fence == o->last.fence)
      arm_lease_end(o, s->deadline_ms);
    return;
  }
  o->told = 1;
  keep(&o->last, s);
  if (s->leader)
    arm_lease_end(o, s->deadline_ms);
  else
    rt__timeout_clear(&c->lp, &o->timer);
  rt_leader_t l = {s->leader ? o->last.id : NULL, o->last.value,
                   o->last.value_len, s->fence, s->leader ? s->deadline_ms : 0};
  report(o, 0, &l);
}

/* An observe notice (rt__notice_parse) as a state. */
static int parse_notice(const char *m, size_t len, state *s) {
  rt__notice n;
  memset(s, 0, sizeof(*s));
  if (rt__notice_parse(m, len, &n) != 0 || n.kind != 'o')
    return -1;
  s->fence = n.fence;
  s->deadline_ms = n.deadline_ms;
  s->id = n.leader;
  s->id_len = n.leader_len;
  s->leader = n.leader_len > 0;
  s->value = n.value;
  s->value_len = n.value_len;
  return 0;
}

/* The state a read found: its first holder leads. Nobody leads: the last
 * fence as Redis still has it, but never below the fence of the leader
 * reported last (its lease ended and its keys went with it). */
static void read_state(const rt_observer_t *o, const rt__pool_inspect *in,
                       state *s) {
  memset(s, 0, sizeof(*s));
  s->id = s->value = "";
  if (in->nholders > 0) {
    s->leader = 1;
    s->id = in->holders.ids[0]->str;
    s->id_len = in->holders.ids[0]->len;
    s->fence = (uint64_t)in->holders.fences[0]->integer;
    s->deadline_ms = in->holders.deadlines[0]->integer;
    s->value = in->holders.labels[0]->str;
    s->value_len = in->holders.labels[0]->len;
    if (s->id_len >= RT__ENTRY_MAX || s->value_len > RT_VALUE_MAX)
      s->id_len = s->value_len = 0;
    return;
  }
  s->fence = (uint64_t)in->fence;
  if (o->told && s->fence < o->last.fence)
    s->fence = o->last.fence;
}

/* ---- the reconcile read ----------------------------------------------------- */

static void on_read(rt__call *call, int status, const rt__answer *a);

static void start_read(rt_observer_t *o) {
  rt_client_t *c = obs_client(o);
  if (o->read != NULL) {
    o->reread = 1;
    return;
  }
  rt__op *op = rt__op_new(c, RT__CALL_POOL_INSPECT, o->res, NULL, on_read);
  if (op == NULL) {
    rt__timeout_set(&c->lp, &o->timer, timer_fire, OBS_RETRY_MS);
    return;
  }
  op->call.res_kind = "e"; /* another kind answers WRONGKIND: RT_EKIND */
  op->call.num = 1;        /* the leader is the only holder */
  op->data = o;
  o->read = op;
  o->heard = 0;
  rt__call_send(&op->call);
}

/* The lease end, or a retry: read if subscribed (else the subscribe will). */
static void timer_fire(rt__timeout *t) {
  rt_observer_t *o = rt__container_of(t, rt_observer_t, timer);
  if (o->subscribed)
    start_read(o);
}

/* What Redis refused ends the observer (it would refuse again); trouble
 * on the way is reported as RT_EDISCONNECTED (the client's last error
 * says which) and the read is made again; no memory, again quietly. */
static void read_failed(rt_observer_t *o, int status) {
  rt_client_t *c = obs_client(o);
  int gone = rt__client_usable(c);
  if (gone != 0) {
    end(o, gone == RT_ECLOSED ? RT_ECANCELED : gone);
  } else if (status == RT_EKIND || status == RT_EWRONGTYPE ||
             status == RT_ENOPERM || status == RT_EREDIS ||
             status == RT_EPROTO) {
    end(o, status);
  } else {
    rt__timeout_set(&c->lp, &o->timer, timer_fire, OBS_RETRY_MS);
    if (status != RT_ENOMEM)
      report(o, RT_EDISCONNECTED, NULL);
  }
}

static void ping(rt_observer_t *o);
static void move_each(rt_observer_t *o, int arg, const void *p);
static void move_later(rt_observer_t *o, int arg, const void *p);
static void close_if_empty(rt__observing *set);

/* A read that crossed a notice (or a lost subscription) is dropped: the
 * notices since the subscribe cover every change after it. Its state waits
 * for a PING on the observers' connection: Redis ran the PING after the
 * read, so its answer comes after every notice published before the
 * read; if none came by then, nothing changed between the subscribe and
 * the read, and every later notice is newer than the read. */
static void on_read(rt__call *call, int status, const rt__answer *a) {
  rt__op *op = rt__container_of(call, rt__op, call);
  rt_observer_t *o = op->data;
  if (o != NULL) {
    o->read = NULL;
    if (o->reread) {
      o->reread = 0;
      if (o->subscribed)
        start_read(o);
    } else if (status != 0) {
      read_failed(o, status);
    } else if (o->subscribed && !o->heard) {
      state s;
      read_state(o, &a->u.pool_inspect, &s);
      keep(&o->seen, &s); /* the answer goes below */
      ping(o);
    }
  }
  rt__op_free(op);
}

/* ---- the connection of the observers ---------------------------------- */

static void subscribe(rt_observer_t *o, int arg, const void *p) {
  RT__UNUSED(arg);
  RT__UNUSED(p);
  rt__conn *conn = &o->set->conn;
  const char *argv[2] = {"SSUBSCRIBE", o->channel};
  size_t lens[2] = {10, o->channel_len};
  o->subscribed = 0;
  if (rt__conn_command(conn, 2, argv, lens, NULL) != 0 &&
      conn->state == RT__CONN_UP)
    rt__conn_drop_soon(conn, RT_ENOMEM, "observe: out of memory subscribing");
}

static void ping(rt_observer_t *o) {
  rt__observing *set = o->set;
  const char *argv[1] = {"PING"};
  size_t lens[1] = {4};
  if (rt__conn_command(&set->conn, 1, argv, lens, NULL) != 0) {
    if (set->conn.state == RT__CONN_UP)
      rt__conn_drop_soon(&set->conn, RT_ENOMEM, "observe: out of memory");
    return; /* the subscribe after the reconnect reads again */
  }
  o->pending = 1;
  o->ping_no = ++set->pings;
}

/* A PING answered: the reads waiting for it are reported, unless a notice
 * came meanwhile. */
static void ponged(rt_observer_t *o, int arg, const void *p) {
  state s;
  RT__UNUSED(arg);
  RT__UNUSED(p);
  if (!o->pending || o->ping_no > o->set->pongs)
    return;
  o->pending = 0;
  if (o->subscribed && !o->heard) {
    view(&o->seen, &s);
    offer(o, &s);
  }
}

static void end_each(rt_observer_t *o, int status, const void *p) {
  RT__UNUSED(p);
  end(o, status);
}

static void end_set(rt__observing *set, int status) {
  set_close(set);
  each(set, end_each, status, NULL);
}

static void set_up(rt__conn *conn) {
  rt__observing *set = conn->owner;
  if (set->closing)
    return;
  set->pings = set->pongs = 0;
  if (conn->cluster_enabled && set->node == NULL)
    each(set, move_each, 0, NULL); /* a seed: to each slot's master */
  else
    each(set, subscribe, 0, NULL);
}

/* Told as RT_EDISCONNECTED whatever the cause (the client's last error
 * has it), so that every other status is a last call. */
static void lost(rt_observer_t *o, int status, const void *p) {
  RT__UNUSED(status);
  RT__UNUSED(p);
  int tell = o->subscribed || !o->down_told;
  o->subscribed = 0;
  o->pending = 0;
  o->down_told = 1;
  if (tell)
    report(o, RT_EDISCONNECTED, NULL);
}

static void set_down(rt__conn *conn, int status) {
  rt__observing *set = conn->owner;
  if (set->closing)
    return;
  snprintf(set->client->last_error, sizeof(set->client->last_error),
           "observe: %.200s", conn->error);
  each(set, lost, status, NULL);
  if (set->client->cluster != NULL)
    each(set, move_later, 0, NULL); /* its slot may have moved on */
  if (!set->closing)
    rt__conn_retry_later(conn);
}

/* A channel name as the replies and messages give it. */
typedef struct chan {
  const char *s;
  size_t len;
} chan;

static int on_channel(const rt_observer_t *o, const chan *ch) {
  return o->channel_len == ch->len && memcmp(o->channel, ch->s, ch->len) == 0;
}

static void confirmed(rt_observer_t *o, int arg, const void *p) {
  RT__UNUSED(arg);
  if (o->subscribed || !on_channel(o, p))
    return;
  o->subscribed = 1;
  o->down_told = 0;
  start_read(o);
}

static void refused(rt_observer_t *o, int status, const void *p) {
  RT__UNUSED(p);
  if (!o->subscribed)
    end(o, status);
}

/* The answer to a PING, or to an SSUBSCRIBE: it names its channel. An
 * error names none: a cluster's redirect (MOVED, ASK, TRYAGAIN,
 * CLUSTERDOWN) moves the observers on; any other (an ACL that denies the
 * channel) ends every observer still waiting for its subscription. */
static void set_reply(rt__conn *conn, redisReply *r, int status, void *arg) {
  rt__observing *set = conn->owner;
  RT__UNUSED(status);
  RT__UNUSED(arg);
  if (r == NULL || set->closing)
    return;
  if (r->type == REDIS_REPLY_ERROR) {
    snprintf(set->client->last_error, sizeof(set->client->last_error),
             "observe: SSUBSCRIBE: %.*s", (int)r->len, r->str);
    if (set->client->cluster != NULL &&
        rt__cluster_sub_refused(set->client->cluster, conn, r) >
            RT__REDIRECT_NONE) {
      /* the slot is served elsewhere, or not now: subscribe again there */
      each(set, move_later, 0, NULL);
    } else {
      each(set, refused, rt__reply_error(r->str, r->len), NULL);
    }
  } else if (r->type == REDIS_REPLY_ARRAY && r->elements >= 2 &&
             r->element[0]->type == REDIS_REPLY_STRING &&
             strcmp(r->element[0]->str, "ssubscribe") == 0 &&
             r->element[1]->type == REDIS_REPLY_STRING) {
    chan ch = {r->element[1]->str, r->element[1]->len};
    each(set, confirmed, 0, &ch);
  } else if (r->type == REDIS_REPLY_ARRAY && r->elements >= 1 &&
             r->element[0]->type == REDIS_REPLY_STRING &&
             strcmp(r->element[0]->str, "pong") == 0) {
    set->pongs++;
    each(set, ponged, 0, NULL);
  }
}

static void heard(rt_observer_t *o, int arg, const void *p) {
  const void *const *sp = p; /* {channel, state} */
  RT__UNUSED(arg);
  if (!o->subscribed || !on_channel(o, sp[0]))
    return;
  o->heard = 1;
  offer(o, sp[1]);
}

static void set_message(rt__conn *conn, const char *channel, size_t clen,
                        const char *msg, size_t len) {
  rt__observing *set = conn->owner;
  state s;
  chan ch = {channel, clen};
  if (set->closing || parse_notice(msg, len, &s) != 0)
    return;
  const void *p[2] = {&ch, &s};
  each(set, heard, 0, p);
}

static void set_plain_message(rt__conn *conn, const char *msg, size_t len) {
  RT__UNUSED(conn);
  RT__UNUSED(msg);
  RT__UNUSED(len);
}

/* The server dropped a channel of ours: its slot moved to another master. */
static void dropped(rt_observer_t *o, int arg, const void *p) {
  RT__UNUSED(arg);
  if (!on_channel(o, p))
    return;
  if (o->set != NULL && o->set->node != NULL) {
    o->shunned = o->set->node->index + 1;
    o->shun_until = rt__mono_ms() + OBS_SHUN_MS;
  }
  lost(o, 0, NULL);
  move_later(o, 0, NULL);
}

static void set_unsubscribed(rt__conn *conn, const char *channel, size_t len) {
  rt__observing *set = conn->owner;
  chan ch = {channel, len};
  if (set->closing || set->client->cluster == NULL)
    return;
  rt__cluster_refresh_in(set->client->cluster, 0);
  each(set, dropped, 0, &ch);
}

static void set_closed(rt__conn *conn) {
  rt__observing *set = conn->owner;
  rt_client_t *c = set->client;
  rt__defer_cancel(&set->check);
  rt__free(set->channel);
  rt__free(set);
  c->conns_open--;
  if (c->observing_closed != NULL)
    c->observing_closed(c);
}

static const rt__conn_events set_events = {
    set_up,     set_down,         set_reply,  set_plain_message,
    set_closed, set_unsubscribed, set_message};

/* A set whose connection (started here) goes to node (a cluster's) or,
 * for NULL, where the client's own go. */
static rt__observing *set_new(rt_client_t *c, rt__node *node) {
  size_t len = c->cfg.prefix_len + 3 + RT__CLIENT_ID_LEN;
  rt__observing *set = rt__calloc(1, sizeof(*set));
  char *ch = rt__malloc(len + 1);
  if (set == NULL || ch == NULL) {
    rt__free(set);
    rt__free(ch);
    return NULL;
  }
  snprintf(ch, len + 1, "%s:o:%s", c->cfg.prefix, c->id);
  set->client = c;
  set->node = node;
  set->channel = ch;
  rt__queue_init(&set->observers);
  rt__queue_init(&set->check.node);
  char name[48];
  snprintf(name, sizeof(name), "redturn-obs-%s", c->id);
  rt__conn_init(&set->conn, c->loop, node != NULL ? &node->cfg : &c->cfg,
                &set_events, set, name, ch, len);
  c->conns_open++;
  set->next = c->observing;
  c->observing = set;
  rt__conn_connect(&set->conn);
  return set;
}

/* The master serving slot by the cluster map, or NULL (not known yet). */
static rt__node *slot_master(rt_client_t *c, int slot) {
  return c->cluster != NULL ? rt__cluster_slot_node(c->cluster, slot) : NULL;
}

/* The set o joins: on a cluster, a new one to its slot's master; else
 * (also while the map does not say: its connection to the seed moves it
 * on) the client's shared one. NULL without memory. */
static rt__observing *set_for(rt_client_t *c, const rt_observer_t *o) {
  rt__node *n = slot_master(c, o->slot);
  if (n != NULL)
    return set_new(c, n);
  for (rt__observing *set = c->observing; set != NULL; set = set->next)
    if (set->node == NULL && !set->closing)
      return set;
  return set_new(c, NULL);
}

static void move_fire(rt__timeout *t);

/* A cluster's observer onto a connection to its slot's master: a new one,
 * unless its set talks to that master already; while the map does not
 * say, again after OBS_RETRY_MS. Its old set closes once empty. */
static void move(rt_observer_t *o) {
  rt_client_t *c = obs_client(o);
  rt__observing *old = o->set, *set;
  rt__node *n = slot_master(c, o->slot);
  if (o->stopped)
    return;
  if (n != NULL && n->index + 1 == o->shunned && rt__mono_ms() < o->shun_until)
    n = NULL; /* the map is older than the drop: ask again */
  if (n != NULL && old != NULL && old->node == n) {
    if (old->conn.state == RT__CONN_UP && !o->subscribed)
      subscribe(o, 0, NULL);
    return;
  }
  if (n == NULL || (set = set_new(c, n)) == NULL) {
    if (c->cluster != NULL)
      rt__cluster_refresh_in(c->cluster, 0);
    rt__timeout_set(&c->lp, &o->move, move_fire, OBS_RETRY_MS);
    return;
  }
  rt__queue_remove(&o->node);
  rt__queue_insert_tail(&set->observers, &o->node);
  o->set = set;
  o->subscribed = 0;
  o->pending = 0;
  close_if_empty(old);
}

static void move_fire(rt__timeout *t) {
  move(rt__container_of(t, rt_observer_t, move));
}

static void move_each(rt_observer_t *o, int arg, const void *p) {
  RT__UNUSED(arg);
  RT__UNUSED(p);
  move(o);
}

/* Move o once the cluster map had time to learn where its slot went. */
static void move_later(rt_observer_t *o, int arg, const void *p) {
  RT__UNUSED(arg);
  RT__UNUSED(p);
  rt__timeout_set(&obs_client(o)->lp, &o->move, move_fire, OBS_RETRY_MS);
}

/* ---- public ------------------------------------------------------------------ */

int rt_observe(rt_client_t *c, const void *name, size_t len, rt_observe_cb cb,
               void *data, rt_observer_t **out) {
  int err = rt__check_request(c, name, len, 0, (const void *)cb, NULL);
  if (err != 0)
    return err;
  rt_observer_t *o = rt__calloc(1, sizeof(*o));
  rt__res *res = o != NULL ? rt__res_get(c, name, len) : NULL;
  char *ch = res != NULL ? rt__malloc(res->key_len + 1) : NULL;
  if (ch != NULL)
    o->slot = rt__key_slot(res->keys, res->key_len);
  rt__observing *set = ch != NULL ? set_for(c, o) : NULL;
  if (set == NULL) {
    rt__free(ch);
    if (res != NULL)
      rt__res_unref(res);
    rt__free(o);
    return RT_ENOMEM;
  }
  /* The resource's first key is "<key base>q": its base, then 'o'. */
  memcpy(ch, res->keys, res->key_len - 1);
  ch[res->key_len - 1] = 'o';
  ch[res->key_len] = '\0';
  o->set = set;
  o->res = res;
  o->cb = cb;
  o->data = data;
  o->channel = ch;
  o->channel_len = res->key_len;
  rt__queue_init(&o->later.node);
  rt__queue_insert_tail(&set->observers, &o->node);
  if (set->conn.state == RT__CONN_UP && set->node == NULL &&
      set->conn.cluster_enabled)
    move(o);
  else if (set->conn.state == RT__CONN_UP)
    subscribe(o, 0, NULL);
  if (out != NULL)
    *out = o;
  return 0;
}

int rt_observe_stop(rt_observer_t *o) {
  if (o == NULL)
    return RT_EINVAL;
  if (!o->stopped)
    detach(o);
  return 0;
}

void rt__observe_end_all(rt_client_t *c, int status) {
  while (c->observing != NULL)
    end_set(c->observing, status); /* which takes it off the list */
}
