/* Sentinel discovery and the +switch-master watch, each on its own link to
 * one Sentinel at a time, and the failover alerts, on a link to each
 * Sentinel. */
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "sentinel.h"
#include "topology.h"

/* After every Sentinel failed the watch, wait this long before the next
 * round. */
#define RT__WATCH_PAUSE_MS 500

/* One host name resolution; a stale one (gen differs) only frees itself. */
typedef struct rt__sresolve {
  uv_getaddrinfo_t req;
  rt__sentinel_peer *p;
  unsigned gen;
} rt__sresolve;

static void maybe_closed(rt__sentinel *s) {
  if (s->closing && s->open == 0 && s->closed != NULL) {
    void (*cb)(rt__sentinel *) = s->closed;
    s->closed = NULL;
    cb(s);
  }
}

static const rt__endpoint *peer_endpoint(const rt__sentinel_peer *p) {
  if (p->alert)
    return &p->s->cfg->sentinels[p->at];
  return &p->s->cfg->sentinels[p->s->order[p->at]];
}

/* Append one Sentinel's failure to s->error ("; " between them). */
static void note(rt__sentinel_peer *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void note(rt__sentinel_peer *p, const char *fmt, ...) {
  rt__sentinel *s = p->s;
  size_t n = strlen(s->error);
  if (p->watch || p->alert || n + 8 >= sizeof(s->error))
    return;
  const rt__endpoint *ep = peer_endpoint(p);
  n += (size_t)snprintf(s->error + n, sizeof(s->error) - n,
                        "%s%s:%d: ", n ? "; " : "", ep->host, ep->port);
  if (n >= sizeof(s->error))
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s->error + n, sizeof(s->error) - n, fmt, ap);
  va_end(ap);
}

static void peer_drop_link(rt__sentinel_peer *p) {
  rt__link *l = p->link;
  p->link = NULL;
  p->gen++;
  p->auth_pending = 0;
  if (l != NULL)
    rt__link_close(l);
  uv_timer_stop(&p->timer);
}

static void peer_start(rt__sentinel_peer *p);

static void ask_finish(rt__sentinel *s, int status, const char *host,
                       int port) {
  rt__sentinel_found_fn found = s->found;
  s->found = NULL;
  peer_drop_link(&s->ask);
  if (found != NULL)
    found(s, status, host, port);
}

static void pause_done(uv_timer_t *t) { peer_start(t->data); }

/* This Sentinel failed us: try the next one, or end the round (the ask
 * fails; the watch pauses, then starts over). */
static void peer_next(rt__sentinel_peer *p) {
  rt__sentinel *s = p->s;
  peer_drop_link(p);
  if (p->alert) { /* always this same Sentinel, after a pause */
    uv_timer_start(&p->timer, pause_done, RT__WATCH_PAUSE_MS, 0);
    return;
  }
  p->at = (p->at + 1) % s->cfg->nsentinels;
  if (++p->tried < s->cfg->nsentinels) {
    peer_start(p);
    return;
  }
  p->tried = 0;
  if (p->watch) {
    uv_timer_start(&p->timer, pause_done, RT__WATCH_PAUSE_MS, 0);
    return;
  }
  char why[sizeof(s->error)];
  int n;
  if (s->nil_answers == (int)s->cfg->nsentinels)
    n = snprintf(why, sizeof(why),
                 "no Sentinel knows a master named \"%.64s\" (%zu asked)",
                 s->cfg->sentinel_master, s->cfg->nsentinels);
  else
    n = snprintf(why, sizeof(why),
                 "no Sentinel gave the address of master \"%.64s\": ",
                 s->cfg->sentinel_master);
  if (s->nil_answers != (int)s->cfg->nsentinels && n > 0 &&
      (size_t)n < sizeof(why))
    memcpy(why + n, s->error, sizeof(why) - (size_t)n - 1);
  why[sizeof(why) - 1] = '\0';
  memcpy(s->error, why, sizeof(why));
  ask_finish(s, RT_ECONNECT, NULL, 0);
}

static int peer_send(rt__sentinel_peer *p, int argc, const char **argv) {
  char *cmd;
  int n = redisFormatCommandArgv(&cmd, argc, argv, NULL);
  if (n < 0)
    return RT_ENOMEM;
  int err = rt__link_send(p->link, cmd, (size_t)n);
  redisFreeCommand(cmd);
  return err;
}

/* The first steps of a failover, as the Sentinel that runs it publishes
 * them (the others only learn its outcome, seconds later, from its hello
 * messages): from the first, the old master may be promoted's rival at
 * any moment. */
#define RT__NSTEPS 8
static const char *const steps[RT__NSTEPS] = {
    "+try-failover",
    "+elected-leader",
    "+failover-state-select-slave",
    "+selected-slave",
    "+failover-state-send-slaveof-noone",
    "+failover-state-wait-promotion",
    "+promoted-slave",
    "+failover-state-reconf-slaves"};
/* ...and how a Sentinel's failover ends without a switch. */
#define RT__NENDS 5
static const char *const ends[RT__NENDS] = {
    "-failover-abort-not-elected", "-failover-abort-no-good-slave",
    "-failover-abort-slave-timeout", "+failover-end-for-timeout",
    "+failover-end"};

/* AUTH with the Sentinels' own credentials, then the ask, the watch or
 * the alert subscription. */
static int peer_commands(rt__sentinel_peer *p) {
  const rt__config *cfg = p->s->cfg;
  int err = 0;
  if (cfg->sentinel_password != NULL) {
    const char *argv[3] = {"AUTH", cfg->sentinel_username,
                           cfg->sentinel_password};
    if (cfg->sentinel_username == NULL)
      argv[1] = cfg->sentinel_password;
    err = peer_send(p, cfg->sentinel_username != NULL ? 3 : 2, argv);
    p->auth_pending = 1;
  }
  if (err == 0 && p->watch) {
    const char *argv[2] = {"SUBSCRIBE", "+switch-master"};
    err = peer_send(p, 2, argv);
  } else if (err == 0 && p->alert) {
    const char *argv[1 + RT__NSTEPS + RT__NENDS];
    argv[0] = "SUBSCRIBE";
    memcpy(argv + 1, steps, sizeof(steps));
    memcpy(argv + 1 + RT__NSTEPS, ends, sizeof(ends));
    err = peer_send(p, 1 + RT__NSTEPS + RT__NENDS, argv);
  } else if (err == 0) {
    const char *argv[3] = {"SENTINEL", "MASTER", cfg->sentinel_master};
    err = peer_send(p, 3, argv);
  }
  return err;
}

int rt__sentinel_avoiding(const rt__sentinel *s) {
  return s->avoid_port != 0 && uv_now(s->loop) < s->avoid_until;
}

void rt__sentinel_avoid(rt__sentinel *s, const char *host, int port,
                        uint64_t epoch) {
  snprintf(s->avoid_host, sizeof(s->avoid_host), "%s", host);
  s->avoid_port = port;
  s->avoid_epoch = epoch;
  uv_update_time(s->loop);
  s->avoid_until = uv_now(s->loop) + RT__SENTINEL_AVOID_MS;
}

static void ask_reply(rt__sentinel_peer *p, redisReply *r) {
  rt__sentinel *s = p->s;
  rt__node_addr addr;
  uint64_t epoch;
  int failing;
  int err = rt__sentinel_master_info(r, &addr, &epoch, &failing);
  if (err == 1) {
    s->nil_answers++;
    note(p, "does not know a master named \"%s\"", s->cfg->sentinel_master);
    peer_next(p);
    return;
  }
  if (err != 0) {
    note(p, "unexpected reply to SENTINEL MASTER");
    peer_next(p);
    return;
  }
  /* A master being failed over may be demoted (and its rival promoted) at
   * any moment: granting through it could overlap its successor's grants.
   * Wait for a Sentinel that names the outcome. */
  int old = rt__sentinel_avoiding(s) && epoch <= s->avoid_epoch &&
            addr.port == s->avoid_port && strcmp(addr.host, s->avoid_host) == 0;
  if (failing || old) {
    note(p, "names %s:%d, whose failover is under way", addr.host, addr.port);
    rt__free(addr.host);
    peer_next(p);
    return;
  }
  s->avoid_port = 0;
  s->epoch = epoch;
  /* The Sentinel that answered goes first next time. */
  size_t idx = s->order[p->at];
  memmove(s->order + 1, s->order, p->at * sizeof(s->order[0]));
  s->order[0] = idx;
  char host[64];
  snprintf(host, sizeof(host), "%s", addr.host);
  rt__free(addr.host);
  ask_finish(s, 0, host, addr.port);
}

static void watch_reply(rt__sentinel_peer *p, redisReply *r) {
  rt__sentinel *s = p->s;
  rt__switch_master sm;
  if (r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
      r->element[0]->type != REDIS_REPLY_STRING)
    return;
  if (strcmp(r->element[0]->str, "subscribe") == 0) {
    p->tried = 0;
    return;
  }
  if (strcmp(r->element[0]->str, "message") != 0 ||
      r->element[2]->type != REDIS_REPLY_STRING ||
      rt__switch_master_parse(r->element[2]->str, r->element[2]->len, &sm) != 0)
    return;
  const char *name = s->cfg->sentinel_master;
  if (sm.name_len != strlen(name) || memcmp(sm.name, name, sm.name_len) != 0)
    return;
  char host[64];
  snprintf(host, sizeof(host), "%.*s", (int)sm.host_len, sm.host);
  s->on_switch(s, host, sm.port);
}

/* Whether a Sentinel event's text is about our master: "master <name>
 * <ip> <port> ..." or "<instance> ... @ <name> <ip> <port>"; if so, the
 * master's address as that Sentinel knows it into host and *port. */
static int about_us(const rt__sentinel *s, const char *msg, size_t len,
                    char *host, size_t cap, int *port) {
  const char *name = s->cfg->sentinel_master, *at = NULL;
  size_t nlen = strlen(name);
  if (len > 7 && memcmp(msg, "master ", 7) == 0) {
    at = msg + 7;
  } else {
    for (size_t i = 0; i + 3 <= len && at == NULL; i++)
      if (memcmp(msg + i, " @ ", 3) == 0)
        at = msg + i + 3;
  }
  if (at == NULL || (size_t)(msg + len - at) <= nlen ||
      memcmp(at, name, nlen) != 0 || at[nlen] != ' ')
    return 0;
  /* The text is NUL-terminated (hiredis). */
  const char *ip = at + nlen + 1, *sp = strchr(ip, ' ');
  if (sp == NULL || (size_t)(sp - ip) >= cap)
    return 0;
  memcpy(host, ip, (size_t)(sp - ip));
  host[sp - ip] = '\0';
  *port = atoi(sp + 1);
  return *port > 0;
}

static void alert_reply(rt__sentinel_peer *p, redisReply *r) {
  rt__sentinel *s = p->s;
  if (r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
      r->element[0]->type != REDIS_REPLY_STRING ||
      strcmp(r->element[0]->str, "message") != 0 ||
      r->element[1]->type != REDIS_REPLY_STRING ||
      r->element[2]->type != REDIS_REPLY_STRING)
    return;
  char host[64];
  int port;
  if (!about_us(s, r->element[2]->str, r->element[2]->len, host, sizeof(host),
                &port))
    return;
  int start = r->element[1]->str[0] == '+' &&
              strcmp(r->element[1]->str, "+failover-end") != 0 &&
              strcmp(r->element[1]->str, "+failover-end-for-timeout") != 0;
  p->failing = start;
  if (start) {
    s->on_failover(s, host, port);
    return;
  }
  /* A failover given up: the old master is the master still, unless
   * another Sentinel runs a failover of it (two may try at once). */
  for (size_t i = 0; i < s->nalerts; i++)
    if (s->alerts[i].failing)
      return;
  if (strcmp(r->element[1]->str, "+failover-end") != 0 &&
      rt__sentinel_avoiding(s) && port == s->avoid_port &&
      strcmp(host, s->avoid_host) == 0) {
    s->avoid_port = 0;
    s->on_failover(s, NULL, 0);
  }
}

static void link_reply(rt__link *l, redisReply *r) {
  rt__sentinel_peer *p = rt__link_data(l);
  if (p->link != l)
    return;
  static const char unknown[] = "ERR No such master";
  if (r->type == REDIS_REPLY_ERROR && !p->watch && !p->alert &&
      !p->auth_pending && r->len >= sizeof(unknown) - 1 &&
      memcmp(r->str, unknown, sizeof(unknown) - 1) == 0) {
    ask_reply(p, r); /* it does not know the name */
    return;
  }
  if (r->type == REDIS_REPLY_ERROR) {
    note(p, "%s: %.*s", p->auth_pending ? "AUTH" : "refused", (int)r->len,
         r->str);
    peer_next(p);
    return;
  }
  if (p->auth_pending) {
    p->auth_pending = 0;
    return;
  }
  if (p->watch)
    watch_reply(p, r);
  else if (p->alert)
    alert_reply(p, r);
  else
    ask_reply(p, r);
}

static void link_ready(rt__link *l) { (void)l; }

static void link_failed(rt__link *l, int status, const char *why) {
  rt__sentinel_peer *p = rt__link_data(l);
  (void)status;
  if (p->link != l)
    return;
  note(p, "%s", why);
  peer_next(p);
}

static void link_closed(rt__link *l) {
  rt__sentinel_peer *p = rt__link_data(l);
  p->s->open--;
  maybe_closed(p->s);
}

static const rt__link_events link_events = {link_ready, link_reply, link_failed,
                                            link_closed};

static void peer_connect(rt__sentinel_peer *p, const char *addr) {
  rt__sentinel *s = p->s;
  const rt__endpoint *ep = peer_endpoint(p);
  char why[128];
  if (rt__link_open(&p->link, s->loop, addr, ep->port, s->tls, ep->host,
                    &link_events, p, why, sizeof(why)) != 0) {
    p->link = NULL;
    note(p, "%s", why);
    peer_next(p);
    return;
  }
  s->open++;
  if (peer_commands(p) != 0) {
    note(p, "out of memory");
    peer_next(p);
  }
}

static void resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res) {
  rt__sresolve *r = rt__container_of(req, rt__sresolve, req);
  rt__sentinel_peer *p = r->p;
  int current = r->gen == p->gen && !p->s->closing;
  rt__free(r);
  p->s->open--;
  char addr[48] = "";
  if (current && status == 0 && res != NULL) {
    if (res->ai_family == AF_INET)
      uv_ip4_name((const struct sockaddr_in *)res->ai_addr, addr, sizeof(addr));
    else if (res->ai_family == AF_INET6)
      uv_ip6_name((const struct sockaddr_in6 *)res->ai_addr, addr,
                  sizeof(addr));
  }
  uv_freeaddrinfo(res);
  if (!current) {
    maybe_closed(p->s);
    return;
  }
  if (addr[0] == '\0') {
    note(p, "resolve: %s", status != 0 ? uv_strerror(status) : "no address");
    peer_next(p);
    return;
  }
  peer_connect(p, addr);
}

static void ask_timeout(uv_timer_t *t) {
  rt__sentinel_peer *p = t->data;
  note(p, "no answer within %lld ms", (long long)rt__sentinel_timeout_ms(p->s));
  peer_next(p);
}

/* Talk to the Sentinel at p->at: resolve its name if it has one. */
static void peer_start(rt__sentinel_peer *p) {
  rt__sentinel *s = p->s;
  const rt__endpoint *ep = peer_endpoint(p);
  char buf[sizeof(struct in6_addr)];
  if (!p->watch && !p->alert)
    uv_timer_start(&p->timer, ask_timeout, (uint64_t)rt__sentinel_timeout_ms(s),
                   0);
  if (uv_inet_pton(AF_INET, ep->host, buf) == 0 ||
      uv_inet_pton(AF_INET6, ep->host, buf) == 0) {
    peer_connect(p, ep->host);
    return;
  }
  struct addrinfo hints;
  memset(&hints, 0, sizeof(hints));
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  rt__sresolve *r = rt__malloc(sizeof(*r));
  int err = UV_ENOMEM;
  if (r != NULL) {
    r->p = p;
    r->gen = p->gen;
    err = uv_getaddrinfo(s->loop, &r->req, resolved, ep->host, NULL, &hints);
  }
  if (err != 0) {
    rt__free(r);
    note(p, "resolve: %s", uv_strerror(err));
    peer_next(p);
    return;
  }
  s->open++;
}

int64_t rt__sentinel_timeout_ms(const rt__sentinel *s) {
  int64_t ms = s->cfg->connect_timeout_ms / (int64_t)(s->cfg->nsentinels + 1);
  return ms < 100 ? 100 : ms;
}

/* ---- internal API ------------------------------------------------------- */

static void peer_init(rt__sentinel *s, rt__sentinel_peer *p, int watch) {
  p->s = s;
  p->watch = watch == 1;
  p->alert = watch == 2;
  uv_timer_init(s->loop, &p->timer);
  p->timer.data = p;
  s->open++;
}

void rt__sentinel_init(rt__sentinel *s, uv_loop_t *loop, const rt__config *cfg,
                       void *owner, rt__sentinel_switch_fn on_switch,
                       rt__sentinel_failover_fn on_failover) {
  memset(s, 0, sizeof(*s));
  s->loop = loop;
  s->cfg = cfg;
  s->owner = owner;
  s->on_switch = on_switch;
  s->on_failover = on_failover;
  for (size_t i = 0; i < cfg->nsentinels && i < RT__SENTINEL_ORDER; i++)
    s->order[i] = i;
  peer_init(s, &s->ask, 0);
  peer_init(s, &s->watch, 1);
  s->nalerts = cfg->nsentinels < RT__SENTINEL_ORDER ? cfg->nsentinels
                                                    : RT__SENTINEL_ORDER;
  for (size_t i = 0; i < s->nalerts; i++) {
    peer_init(s, &s->alerts[i], 2);
    s->alerts[i].at = i;
  }
}

void rt__sentinel_set_tls(rt__sentinel *s, rt__tls_ctx *tls) { s->tls = tls; }

void rt__sentinel_ask(rt__sentinel *s, rt__sentinel_found_fn found) {
  if (s->closing)
    return;
  rt__sentinel_cancel(s);
  s->found = found;
  s->error[0] = '\0';
  s->nil_answers = 0;
  s->ask.at = 0;
  s->ask.tried = 0;
  peer_start(&s->ask);
}

void rt__sentinel_cancel(rt__sentinel *s) {
  s->found = NULL;
  peer_drop_link(&s->ask);
}

void rt__sentinel_watch(rt__sentinel *s) {
  if (s->closing || s->watching)
    return;
  s->watching = 1;
  s->watch.at = 0;
  s->watch.tried = 0;
  peer_start(&s->watch);
  for (size_t i = 0; i < s->nalerts; i++)
    peer_start(&s->alerts[i]);
}

static void timer_closed(uv_handle_t *h) {
  rt__sentinel_peer *p = h->data;
  p->s->open--;
  maybe_closed(p->s);
}

void rt__sentinel_close(rt__sentinel *s, void (*closed)(rt__sentinel *s)) {
  if (s->closing)
    return;
  s->closing = 1;
  s->closed = closed;
  s->found = NULL;
  peer_drop_link(&s->ask);
  peer_drop_link(&s->watch);
  uv_close((uv_handle_t *)&s->ask.timer, timer_closed);
  uv_close((uv_handle_t *)&s->watch.timer, timer_closed);
  for (size_t i = 0; i < s->nalerts; i++) {
    peer_drop_link(&s->alerts[i]);
    uv_close((uv_handle_t *)&s->alerts[i].timer, timer_closed);
  }
}
