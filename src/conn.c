/* A connection to Redis: connect (resolving the host name, or asking the
 * Sentinels for the master), deadlines, reconnects and close, over the byte
 * stream of src/link.c. The handshake is handshake.c's, the ring of
 * unanswered commands ring.c's. */
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "conn.h"
#include "reply.h"
#include "tls.h"

/* Reconnect backoff: 50 ms doubling up to 2 s, plus up to 25% jitter. */
#define RT__BACKOFF_MIN_MS 50

#define RT__BACKOFF_MAX_MS 2000

/* One host name resolution. The conn forgets one it gave up on (timeout,
 * close): its callback then only frees it. */
typedef struct rt__resolve {
  uv_getaddrinfo_t req;
  rt__conn *conn;
} rt__resolve;

static void maybe_closed(rt__conn *c) {
  if (c->state == RT__CONN_CLOSING && c->timer_closed && c->links_open == 0 &&
      c->link == NULL && c->reqs_open == 0 && !c->sentinel_open) {
    c->state = RT__CONN_CLOSED;
    rt__tls_ctx_free(c->tls);
    c->tls = NULL;
    c->ev->closed(c);
  }
}

/* Let go of the link (closing it) and answer every unanswered command with
 * NULL, in send order. */
static void detach(rt__conn *c) {
  rt__link *l = c->link;
  c->link = NULL;
  c->close_when_idle = 0;
  if (l != NULL)
    rt__link_close(l);
  while (c->sent_len > 0) {
    rt__sent e = rt__conn_sent_pop(c);
    e.fn(c, NULL, e.arg);
  }
}

/* ---- timer: connect deadline, command deadline, backoff -----------------*/

static void timer_cb(uv_timer_t *t);

static void close_timer(rt__conn *c);

static void arm_command_deadline(rt__conn *c) {
  if (c->state != RT__CONN_UP && c->state != RT__CONN_CLOSING)
    return;
  if (c->sent_len == 0) {
    uv_timer_stop(&c->timer);
    return;
  }
  uint64_t due =
      c->sent[c->sent_head].ms + (uint64_t)c->cfg->command_timeout_ms;
  uint64_t now = rt__mono_ms();
  uv_timer_start(&c->timer, timer_cb, due > now ? due - now : 0, 0);
}

/* Mark the connection down and tell the owner (never re-entrantly from an
 * rt__conn_* call: callers make sure of that). */
static void report_down(rt__conn *c, int status) {
  c->sent_len = 0;
  c->sent_head = 0;
  if (c->state == RT__CONN_CLOSING) {
    close_timer(c);
    maybe_closed(c);
    return;
  }
  c->state = RT__CONN_DOWN;
  uv_timer_stop(&c->timer);
  c->ev->down(c, status);
}

/* Abort the connection ourselves. Unanswered commands get status. */
static void drop(rt__conn *c, int status) {
  c->drop_status = status;
  if (c->link == NULL)
    return;
  detach(c);
  report_down(c, status);
}

/* Forget the resolution in flight (its callback only frees it). */
static void abandon_resolve(rt__conn *c) {
  if (c->resolving == NULL)
    return;
  uv_cancel((uv_req_t *)&c->resolving->req);
  c->resolving = NULL;
}

static void timer_cb(uv_timer_t *t) {
  rt__conn *c = t->data;
  if (c->report_pending) {
    int status = c->report_pending;
    c->report_pending = 0;
    report_down(c, status);
  } else if (c->state == RT__CONN_DOWN) {
    rt__conn_connect(c);
  } else if (c->state == RT__CONN_CONNECTING) {
    long long ms = (long long)c->cfg->connect_timeout_ms;
    if (c->cfg->nsentinels > 0 && c->sentinel.found != NULL) {
      rt__sentinel_cancel(&c->sentinel);
      rt__conn_set_error(c,
                         "Sentinels: no address of master \"%s\" within "
                         "connect_timeout_ms (%lld ms)",
                         c->cfg->sentinel_master, ms);
      report_down(c, RT_ECONNECT);
      return;
    }
    if (c->resolving != NULL) {
      rt__conn_set_error(
          c, "resolve %s: no answer within connect_timeout_ms (%lld ms)",
          c->host, ms);
      abandon_resolve(c);
      report_down(c, RT_ECONNECT);
      return;
    }
    static const char *const missing[] = {"no connection", "no TLS handshake",
                                          "no answer to the handshake"};
    int stage = c->link != NULL ? rt__link_stage(c->link) : 0;
    rt__conn_set_error(
        c, "connect %s: %s within connect_timeout_ms (%lld ms)%s", c->peer,
        missing[stage], ms,
        stage == RT__LINK_TLS ? " (is it a plain port? then use redis://)"
                              : "");
    if (c->link != NULL)
      drop(c, RT_ECONNECT);
    else
      report_down(c, RT_ECONNECT);
  } else if (c->state == RT__CONN_UP || c->state == RT__CONN_CLOSING) {
    uint64_t now = rt__mono_ms();
    if (c->sent_len > 0 && now - c->sent[c->sent_head].ms >=
                               (uint64_t)c->cfg->command_timeout_ms) {
      rt__conn_set_error(c,
                         "%s: no reply within command_timeout_ms (%lld ms): "
                         "connection dropped",
                         c->peer, (long long)c->cfg->command_timeout_ms);
      drop(c, RT_ETIMEDOUT);
    } else {
      arm_command_deadline(c);
    }
  }
}

/* ---- link events --------------------------------------------------------*/

static void connect_next(rt__conn *c);

static void finish_close(rt__conn *c);

static void master_switched(rt__sentinel *s, const char *host, int port);

static void failover_begun(rt__sentinel *s, const char *host, int port);

static void link_ready(rt__link *l) { RT__UNUSED(l); }

/* A subscriber's pub/sub push (a message, or the server unsubscribing
 * us), which answers no command. */
static int is_push(const rt__conn *c, const redisReply *r) {
  static const char *const kinds[] = {"smessage", "message", "sunsubscribe",
                                      "unsubscribe"};
  if (c->channel == NULL || r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
      r->element[0]->type != REDIS_REPLY_STRING)
    return 0;
  for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
    if (strcmp(r->element[0]->str, kinds[i]) == 0)
      return 1;
  return 0;
}

static void link_reply(rt__link *l, redisReply *r) {
  rt__conn *c = rt__link_data(l);
  if (is_push(c, r)) {
    /* Notices come on the shard channel (SSUBSCRIBE): SPUBLISH counts its
     * subscribers exactly. */
    int smessage = strcmp(r->element[0]->str, "smessage") == 0 &&
                   r->elements >= 3 &&
                   r->element[1]->type == REDIS_REPLY_STRING &&
                   r->element[2]->type == REDIS_REPLY_STRING;
    if (smessage && c->ev->channel_message != NULL)
      c->ev->channel_message(c, r->element[1]->str, r->element[1]->len,
                             r->element[2]->str, r->element[2]->len);
    else if (smessage)
      c->ev->message(c, r->element[2]->str, r->element[2]->len);
    else if (strcmp(r->element[0]->str, "sunsubscribe") == 0 &&
             r->elements >= 2 && r->element[1]->type == REDIS_REPLY_STRING &&
             c->ev->unsubscribed != NULL)
      c->ev->unsubscribed(c, r->element[1]->str, r->element[1]->len);
    return;
  }
  c->answered = 1;
  if (c->sent_len == 0) {
    rt__conn_set_error(c, "%s: a reply to no command: connection dropped",
                       c->peer);
    drop(c, RT_EPROTO);
    return;
  }
  rt__sent e = rt__conn_sent_pop(c);
  e.fn(c, r, e.arg);
  if (c->close_when_idle && c->sent_len == 0)
    finish_close(c);
}

static void link_failed(rt__link *l, int status, const char *why) {
  rt__conn *c = rt__link_data(l);
  if (c->state == RT__CONN_CONNECTING && rt__link_stage(l) != RT__LINK_READY) {
    /* The next address of the host, if any, is tried within the same
     * deadline (not after a TLS failure, which names the server). */
    rt__conn_set_error(c, "connect %s: %s", c->peer, why);
    detach(c);
    if (status == 0 && c->next_addr < c->naddrs)
      connect_next(c);
    else
      report_down(c, status != 0 ? status : RT_ECONNECT);
    return;
  }
  /* A TLS port closes on the plain bytes of a handshake. */
  const char *hint =
      c->state == RT__CONN_CONNECTING && !c->answered && !c->cfg->tls
          ? " (is it a TLS port? then use rediss://)"
          : "";
  rt__conn_set_error(c, "connection to %s lost: %s%s", c->peer, why, hint);
  /* Lost before its handshake was done: the connect failed (RT_ECONNECT,
   * as the other first-connect failures), nothing that was up went down. */
  if (status == 0)
    status = c->state == RT__CONN_CONNECTING ? RT_ECONNECT : RT_EDISCONNECTED;
  detach(c);
  report_down(c, status);
}

static void link_closed(rt__link *l) {
  rt__conn *c = rt__link_data(l);
  c->links_open--;
  maybe_closed(c);
}

const rt__link_events link_events = {link_ready, link_reply, link_failed,
                                     link_closed};

static void went_up(rt__conn *c) {
  c->state = RT__CONN_UP;
  c->attempt = 0;
  if (c->cfg->nsentinels > 0)
    rt__sentinel_watch(&c->sentinel);
  arm_command_deadline(c);
  c->ev->up(c);
}

/* ---- the end of the handshake -------------------------------------------*/

/* The handshake's completion (handshake.c): up, or dropped with status. */
static void handshake_over(rt__conn *c, int status) {
  if (status == 0)
    went_up(c);
  else
    drop(c, status);
}

static void command_reply(rt__conn *c, redisReply *r, void *arg) {
  if (r == NULL) {
    c->ev->reply(c, NULL, c->drop_status ? c->drop_status : RT_EDISCONNECTED,
                 arg);
    return;
  }
  arm_command_deadline(c);
  c->ev->reply(c, r, 0, arg);
}

/* ---- public (internal) API ----------------------------------------------*/

void rt__conn_init(rt__conn *c, uv_loop_t *loop, const rt__config *cfg,
                   const rt__conn_events *ev, void *owner, const char *name,
                   const char *channel, size_t channel_len) {
  memset(c, 0, sizeof(*c));
  c->loop = loop;
  c->cfg = cfg;
  c->ev = ev;
  c->owner = owner;
  c->handshake_over = handshake_over;
  c->channel = channel;
  c->channel_len = channel_len;
  if (channel == NULL) {
    c->scripts = rt__scripts;
    c->nscripts = RT__SCRIPT_COUNT;
  }
  snprintf(c->name, sizeof(c->name), "%s", name);
  c->host = cfg->host;
  c->port = cfg->port;
  if (cfg->nsentinels > 0) {
    rt__sentinel_init(&c->sentinel, loop, cfg, c, master_switched,
                      failover_begun);
    c->sentinel_open = 1;
  }
  c->rand = ((uint64_t)(uintptr_t)c ^ uv_hrtime() ^ 0x9e3779b97f4a7c15ull) | 1;
  uv_timer_init(loop, &c->timer);
  c->timer.data = c;
}

/* Report status from the loop, not from inside an rt__conn_* call. */
static void fail_soon(rt__conn *c, int status) {
  c->report_pending = status;
  uv_timer_start(&c->timer, timer_cb, 0, 0);
}

/* Start connecting to the numeric address addr: 0, or an error with the
 * reason in c->error. */
static int start_connect(rt__conn *c, const char *addr) {
  int port = c->port;
  const char *v6 = strchr(addr, ':') != NULL ? "[" : "";
  if (strcmp(addr, c->host) == 0)
    snprintf(c->peer, sizeof(c->peer), "%s%s%s:%d", v6, addr, *v6 ? "]" : "",
             port);
  else
    snprintf(c->peer, sizeof(c->peer), "%.40s:%d (%s)", c->host, port, addr);
  char why[128];
  c->sent_len = 0;
  c->sent_head = 0;
  c->answered = 0;
  const char *name =
      c->cfg->tls_server_name != NULL ? c->cfg->tls_server_name : c->host;
  int err = rt__link_open(&c->link, c->loop, addr, port, c->tls, name,
                          &link_events, c, why, sizeof(why));
  if (err != 0) {
    rt__conn_set_error(c, "connect %s: %s", c->peer, why);
    return err;
  }
  c->links_open++;
  if (rt__conn_handshake(c) == 0)
    return 0;
  detach(c); /* the handshake replies' functions ignore NULL */
  rt__conn_set_error(c, "connect %s: out of memory", c->peer);
  return RT_ENOMEM;
}

/* Try the host's addresses in turn until one starts connecting; when
 * none does, report the last reason from the loop. */
static void connect_next(rt__conn *c) {
  while (c->next_addr < c->naddrs)
    if (start_connect(c, c->addrs[c->next_addr++]) == 0)
      return;
  fail_soon(c, RT_ECONNECT);
}

/* Keep the numeric addresses of res, IPv4 before IPv6 (as hiredis does
 * with a name), without repeats. */
static void take_addresses(rt__conn *c, const struct addrinfo *res) {
  static const int families[2] = {AF_INET, AF_INET6};
  c->naddrs = 0;
  c->next_addr = 0;
  for (int f = 0; f < 2; f++) {
    for (const struct addrinfo *ai = res; ai != NULL; ai = ai->ai_next) {
      char buf[48];
      if (ai->ai_family != families[f] || c->naddrs == RT__CONN_ADDRS)
        continue;
      if (f == 0 ? uv_ip4_name((const struct sockaddr_in *)ai->ai_addr, buf,
                               sizeof(buf))
                 : uv_ip6_name((const struct sockaddr_in6 *)ai->ai_addr, buf,
                               sizeof(buf)))
        continue;
      unsigned i = 0;
      while (i < c->naddrs && strcmp(c->addrs[i], buf) != 0)
        i++;
      if (i == c->naddrs)
        memcpy(c->addrs[c->naddrs++], buf, sizeof(buf));
    }
  }
}

static void resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res) {
  rt__resolve *r = rt__container_of(req, rt__resolve, req);
  rt__conn *c = r->conn;
  int current = c->resolving == r;
  rt__free(r);
  c->reqs_open--;
  if (!current) { /* given up on: timed out, or the conn is closing */
    uv_freeaddrinfo(res);
    maybe_closed(c);
    return;
  }
  c->resolving = NULL;
  if (status == 0)
    take_addresses(c, res);
  uv_freeaddrinfo(res);
  if (status != 0 || c->naddrs == 0) {
    rt__conn_set_error(c, "resolve %s: %s", c->host,
                       status != 0 ? uv_strerror(status)
                                   : "no IPv4 or IPv6 address");
    report_down(c, RT_ECONNECT);
    return;
  }
  connect_next(c);
}

/* Resolve the host name on libuv's thread pool. */
static void resolve(rt__conn *c) {
  struct addrinfo hints;
  rt__resolve *r = rt__malloc(sizeof(*r));
  int err = UV_ENOMEM;
  memset(&hints, 0, sizeof(hints));
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (r != NULL) {
    r->conn = c;
    err = uv_getaddrinfo(c->loop, &r->req, resolved, c->host, NULL, &hints);
  }
  if (err != 0) {
    rt__free(r);
    rt__conn_set_error(c, "resolve %s: %s", c->host, uv_strerror(err));
    fail_soon(c, RT_ECONNECT);
    return;
  }
  c->resolving = r;
  c->reqs_open++;
}

/* Connect to c->host: a numeric address at once, a name once resolved. */
static void connect_host(rt__conn *c) {
  char buf[sizeof(struct in6_addr)];
  if (uv_inet_pton(AF_INET, c->host, buf) == 0 ||
      uv_inet_pton(AF_INET6, c->host, buf) == 0) {
    snprintf(c->addrs[0], sizeof(c->addrs[0]), "%s", c->host);
    c->naddrs = 1;
    connect_next(c);
  } else {
    resolve(c);
  }
}

/* The Sentinels' answer: the master's address, or why there is none. */
static void master_found(rt__sentinel *s, int status, const char *host,
                         int port) {
  rt__conn *c = s->owner;
  if (c->state != RT__CONN_CONNECTING)
    return;
  if (status != 0) {
    rt__conn_set_error(c, "%s", s->error);
    report_down(c, status);
    return;
  }
  snprintf(c->master_host, sizeof(c->master_host), "%s", host);
  c->host = c->master_host;
  c->port = port;
  c->epoch = s->epoch;
  snprintf(c->peer, sizeof(c->peer), "%.60s:%d", c->host, c->port);
  connect_host(c);
}

/* A Sentinel says our master moved: reconnect there (unless we are on it
 * already; an attempt in progress starts over). */
static void master_switched(rt__sentinel *s, const char *host, int port) {
  rt__conn *c = s->owner;
  if (c->report_pending)
    return; /* down is reported already */
  if (c->host == c->master_host && strcmp(c->master_host, host) == 0 &&
      c->port == port && c->state == RT__CONN_UP)
    return;
  if (c->state == RT__CONN_DOWN && c->attempt > 0) {
    rt__conn_connect(c); /* no need to wait out the backoff */
    return;
  }
  if (c->state != RT__CONN_UP && c->state != RT__CONN_CONNECTING)
    return;
  rt__conn_set_error(c, "master \"%s\" switched to %s:%d: reconnecting",
                     c->cfg->sentinel_master, host, port);
  if (c->link != NULL) {
    drop(c, RT_EDISCONNECTED);
  } else {
    rt__sentinel_cancel(&c->sentinel);
    abandon_resolve(c);
    report_down(c, RT_EDISCONNECTED);
  }
}

/* A Sentinel began a failover of our master (host NULL: gave it up). The
 * master may be demoted, and a replica promoted, at any moment: from now
 * on nothing goes through it (a grant there could overlap the successor's
 * grants), and the reconnect waits until the Sentinels name the outcome.
 * What was sent and not answered is sent again there (a retried enqueue
 * finds its grant or its place): no grant of the old master that reaches
 * us after this moment is reported from its reply. */
static void failover_begun(rt__sentinel *s, const char *host, int port) {
  rt__conn *c = s->owner;
  if (host == NULL) { /* given up: back to the master, without backoff */
    if (c->state == RT__CONN_DOWN && c->attempt > 0 && !c->report_pending)
      rt__conn_connect(c);
    return;
  }
  if (c->host != c->master_host || c->port != port ||
      strcmp(c->master_host, host) != 0)
    return; /* not the master we use (or a late step of a past failover) */
  rt__sentinel_avoid(s, host, port, c->epoch);
  if (c->report_pending || c->link == NULL ||
      (c->state != RT__CONN_UP && c->state != RT__CONN_CONNECTING))
    return;
  rt__conn_set_error(
      c, "master \"%s\" at %s:%d is being failed over: reconnecting",
      c->cfg->sentinel_master, host, port);
  drop(c, RT_EDISCONNECTED);
}

void rt__conn_connect(rt__conn *c) {
  if (c->state != RT__CONN_DOWN)
    return;
  if (c->cfg->nsentinels == 0) { /* the owner may have moved it (seeds) */
    c->host = c->cfg->host;
    c->port = c->cfg->port;
  }
  c->drop_status = 0;
  c->sent_len = 0;
  c->sent_head = 0;
  c->state = RT__CONN_CONNECTING;
  c->naddrs = 0;
  c->next_addr = 0;
  snprintf(c->peer, sizeof(c->peer), "%.40s:%d", c->host, c->port);
  /* One deadline for the whole attempt: resolution, connect, handshake;
   * counted from now, not from the loop's cached time (rt_client_open may
   * come long after the loop last ran). */
  uv_update_time(c->loop);
  uv_timer_start(&c->timer, timer_cb, (uint64_t)c->cfg->connect_timeout_ms, 0);
  if (c->cfg->tls && c->tls == NULL) {
    char why[200];
    int err = rt__tls_ctx_new(&c->tls, c->cfg, why, sizeof(why));
    if (err != 0) {
      rt__conn_set_error(c, "connect %s: %s", c->peer, why);
      fail_soon(c, err);
      return;
    }
  }
  if (c->cfg->nsentinels > 0) {
    rt__sentinel_set_tls(&c->sentinel, c->tls);
    snprintf(c->peer, sizeof(c->peer), "master \"%.40s\"",
             c->cfg->sentinel_master);
    rt__sentinel_ask(&c->sentinel, master_found);
    return;
  }
  connect_host(c);
}

void rt__conn_retry_later(rt__conn *c) {
  if (c->state != RT__CONN_DOWN)
    return;
  unsigned shift = c->attempt < 6 ? c->attempt : 6;
  uint64_t delay = (uint64_t)RT__BACKOFF_MIN_MS << shift;
  if (delay > RT__BACKOFF_MAX_MS)
    delay = RT__BACKOFF_MAX_MS;
  delay += rt__xorshift(&c->rand) % (delay / 4 + 1);
  c->attempt++;
  uv_timer_start(&c->timer, timer_cb, delay, 0);
}

int rt__conn_command(rt__conn *c, int argc, const char **argv,
                     const size_t *argvlen, void *arg) {
  if (c->state != RT__CONN_UP || c->link == NULL)
    return RT_EDISCONNECTED;
  int err = rt__conn_send(c, command_reply, arg, argc, argv, argvlen);
  if (err != 0)
    return err;
  if (c->sent_len == 1)
    arm_command_deadline(c);
  return 0;
}

static void timer_closed(uv_handle_t *h) {
  rt__conn *c = h->data;
  c->timer_closed = 1;
  rt__free(c->sent);
  c->sent = NULL;
  maybe_closed(c);
}

static void close_timer(rt__conn *c) {
  if (!uv_is_closing((uv_handle_t *)&c->timer))
    uv_close((uv_handle_t *)&c->timer, timer_closed);
}

/* The last reply of a close that waited for them is in: disconnect. */
static void finish_close(rt__conn *c) {
  detach(c);
  report_down(c, RT_EDISCONNECTED);
}

static void sentinel_closed(rt__sentinel *s) {
  rt__conn *c = s->owner;
  c->sentinel_open = 0;
  maybe_closed(c);
}

void rt__conn_drop_soon(rt__conn *c, int status, const char *why) {
  if (c->link == NULL || c->state != RT__CONN_UP || c->report_pending)
    return;
  rt__conn_set_error(c, "%s: %s", c->peer, why);
  c->drop_status = status;
  detach(c);
  c->state = RT__CONN_CONNECTING; /* nothing more is sent on it */
  fail_soon(c, status);
}

void rt__conn_close(rt__conn *c) {
  if (c->state == RT__CONN_CLOSING || c->state == RT__CONN_CLOSED)
    return;
  int was = c->state;
  c->state = RT__CONN_CLOSING;
  c->report_pending = 0;
  abandon_resolve(c);
  if (c->sentinel_open)
    rt__sentinel_close(&c->sentinel, sentinel_closed);
  if (c->link != NULL && was == RT__CONN_UP && c->channel == NULL &&
      c->sent_len > 0) {
    /* Let the answers to what we sent arrive (bounded by the command
     * deadline, which drops the connection), then disconnect. */
    arm_command_deadline(c);
    c->close_when_idle = 1;
    return;
  }
  close_timer(c);
  if (c->link != NULL) {
    c->drop_status = RT_ECANCELED;
    detach(c);
  }
  maybe_closed(c);
}
