/* Sentinel discovery and the +switch-master watch, each on its own link to
 * one Sentinel at a time. */
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
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
  return &p->s->cfg->sentinels[p->s->order[p->at]];
}

/* Append one Sentinel's failure to s->error ("; " between them). */
static void note(rt__sentinel_peer *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void note(rt__sentinel_peer *p, const char *fmt, ...) {
  rt__sentinel *s = p->s;
  size_t n = strlen(s->error);
  if (p->watch || n + 8 >= sizeof(s->error))
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

/* AUTH with the Sentinels' own credentials, then the ask or the watch. */
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
  } else if (err == 0) {
    const char *argv[3] = {"SENTINEL", "GET-MASTER-ADDR-BY-NAME",
                           cfg->sentinel_master};
    err = peer_send(p, 3, argv);
  }
  return err;
}

static void ask_reply(rt__sentinel_peer *p, redisReply *r) {
  rt__sentinel *s = p->s;
  rt__node_addr addr;
  int err = rt__sentinel_master_addr(r, &addr);
  if (err == 1) {
    s->nil_answers++;
    note(p, "does not know a master named \"%s\"", s->cfg->sentinel_master);
    peer_next(p);
    return;
  }
  if (err != 0) {
    note(p, "unexpected reply to SENTINEL GET-MASTER-ADDR-BY-NAME");
    peer_next(p);
    return;
  }
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

static void link_reply(rt__link *l, redisReply *r) {
  rt__sentinel_peer *p = rt__link_data(l);
  if (p->link != l)
    return;
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
  if (!p->watch)
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
  p->watch = watch;
  uv_timer_init(s->loop, &p->timer);
  p->timer.data = p;
  s->open++;
}

void rt__sentinel_init(rt__sentinel *s, uv_loop_t *loop, const rt__config *cfg,
                       void *owner, rt__sentinel_switch_fn on_switch) {
  memset(s, 0, sizeof(*s));
  s->loop = loop;
  s->cfg = cfg;
  s->owner = owner;
  s->on_switch = on_switch;
  for (size_t i = 0; i < cfg->nsentinels && i < RT__SENTINEL_ORDER; i++)
    s->order[i] = i;
  peer_init(s, &s->ask, 0);
  peer_init(s, &s->watch, 1);
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
}
