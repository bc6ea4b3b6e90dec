/* A hiredis async connection driven by the client's libuv loop.
 *
 * We attach hiredis to libuv ourselves (rather than with adapters/libuv.h)
 * so that closing can wait for the poll handle's close callback: a client's
 * close callback must only run once all of its handles are closed. */
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

/* libfiu fault points: real ones with FIU_ENABLE (fiu-local.h then pulls in
 * fiu.h), nothing otherwise, without needing libfiu's headers. */
#ifdef FIU_ENABLE
#include <fiu-local.h>
#else
#define fiu_do_on(name, action)
#endif

#include "conn.h"
#include "reply.h"

/* Reconnect backoff: 50 ms doubling up to 2 s, plus up to 25% jitter. */
#define RT__BACKOFF_MIN_MS 50
#define RT__BACKOFF_MAX_MS 2000

typedef struct rt__poll {
  uv_poll_t handle;
  uv_timer_t flush;      /* writes queued commands on the next loop turn */
  redisAsyncContext *ac; /* NULL once hiredis let go of it */
  rt__conn *conn;
  int events;
  int flushing; /* inside flush_cb: a write that did not finish polls */
  int open;     /* handles of this struct not yet closed */
} rt__poll;

/* One host name resolution. The conn forgets one it gave up on (timeout,
 * close): its callback then only frees it. */
typedef struct rt__resolve {
  uv_getaddrinfo_t req;
  rt__conn *conn;
} rt__resolve;

static void maybe_closed(rt__conn *c) {
  if (c->state == RT__CONN_CLOSING && c->timer_closed && c->polls_open == 0 &&
      c->ac == NULL && c->reqs_open == 0) {
    c->state = RT__CONN_CLOSED;
    c->ev->closed(c);
  }
}

/* Record the connection's last failure in words. */
static void set_error(rt__conn *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void set_error(rt__conn *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->error, sizeof(c->error), fmt, ap);
  va_end(ap);
}

/* ---- hiredis <-> libuv ------------------------------------------------- */

/* hiredis writes with write(2), which raises SIGPIPE on a socket whose peer
 * is gone, and that kills a host that keeps the default action. Process-wide
 * dispositions are the host's, so block it in this thread for the write and
 * take back the one the write raised; hiredis then sees EPIPE and reports a
 * disconnect as usual. This is the only place hiredis writes. */
static void write_without_sigpipe(redisAsyncContext *ac) {
  static const struct timespec zero = {0, 0};
  sigset_t pipe_set, old_mask, pending;
  int was_pending;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old_mask);
  sigpending(&pending);
  was_pending = sigismember(&pending, SIGPIPE);
  /* Fault point "redturn/write" (tests, FIU_ENABLE builds only): make this
   * write fail for real. With the socket shut for writing, write(2) fails
   * with EPIPE (raising the SIGPIPE taken back below) and hiredis takes its
   * error path, as when the peer is gone. Only a connected socket with
   * bytes to send counts as a write (hiredis' output buffer is RESP text,
   * so a non-empty one starts with a non-NUL byte). */
  if ((ac->c.flags & REDIS_CONNECTED) && ac->c.obuf != NULL &&
      ac->c.obuf[0] != '\0') {
    fiu_do_on("redturn/write", shutdown(ac->c.fd, SHUT_WR));
  }
  redisAsyncHandleWrite(ac);
  if (!was_pending && sigpending(&pending) == 0 &&
      sigismember(&pending, SIGPIPE)) {
    int saved = errno;
    while (sigtimedwait(&pipe_set, NULL, &zero) < 0 && errno == EINTR) {
    }
    errno = saved;
  }
  pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
}

static void poll_cb(uv_poll_t *handle, int status, int events) {
  rt__poll *p = handle->data;
  /* On a poll error let hiredis read: it finds the socket error itself. */
  if (status < 0)
    events = UV_READABLE;
  if (p->ac != NULL && (events & UV_READABLE))
    redisAsyncHandleRead(p->ac);
  if (p->ac != NULL && (events & UV_WRITABLE))
    write_without_sigpipe(p->ac);
}

static void poll_update(rt__poll *p, int add, int del) {
  int events = (p->events | add) & ~del;
  /* hiredis asks for reads after every write: uv_poll_start on an
   * unchanged set would still cost epoll_ctl calls each time. */
  if (events == p->events &&
      (events == 0 || uv_is_active((uv_handle_t *)&p->handle)))
    return;
  p->events = events;
  if (events)
    uv_poll_start(&p->handle, events, poll_cb);
  else
    uv_poll_stop(&p->handle);
}

/* Commands added during one loop turn leave in one write at the start of
 * the next, without first waiting for a writable event (each switch of
 * the poll between readable and writable costs two epoll_ctl calls). A
 * zero timer rather than a prepare handle: timers run in the order they
 * were started, so commands of several clients keep their call order. */
static void flush_cb(uv_timer_t *handle) {
  rt__poll *p = handle->data;
  if (p->ac == NULL)
    return;
  p->flushing = 1;
  write_without_sigpipe(p->ac);
  p->flushing = 0;
}

static void poll_add_read(void *d) { poll_update(d, UV_READABLE, 0); }
static void poll_del_read(void *d) { poll_update(d, 0, UV_READABLE); }

static void poll_add_write(void *d) {
  rt__poll *p = d;
  /* Connecting, or a write the socket could not take whole: wait until it
   * is writable. */
  if (p->flushing || !(p->ac->c.flags & REDIS_CONNECTED))
    poll_update(p, UV_WRITABLE, 0);
  else if (!uv_is_active((uv_handle_t *)&p->flush))
    uv_timer_start(&p->flush, flush_cb, 0, 0);
}

static void poll_del_write(void *d) {
  rt__poll *p = d;
  uv_timer_stop(&p->flush);
  poll_update(p, 0, UV_WRITABLE);
}

static void poll_closed(uv_handle_t *handle) {
  rt__poll *p = handle->data;
  rt__conn *c = p->conn;
  if (--p->open > 0)
    return;
  rt__free(p);
  c->polls_open--;
  maybe_closed(c);
}

static void poll_cleanup(void *d) {
  rt__poll *p = d;
  p->ac = NULL;
  uv_close((uv_handle_t *)&p->handle, poll_closed);
  uv_close((uv_handle_t *)&p->flush, poll_closed);
}

static int poll_attach(rt__conn *c, redisAsyncContext *ac) {
  rt__poll *p = rt__calloc(1, sizeof(*p));
  if (p == NULL)
    return RT_ENOMEM;
  if (uv_poll_init(c->loop, &p->handle, ac->c.fd) != 0) {
    rt__free(p);
    return RT_ECONNECT;
  }
  uv_timer_init(c->loop, &p->flush);
  p->handle.data = p;
  p->flush.data = p;
  p->open = 2;
  p->ac = ac;
  p->conn = c;
  ac->ev.data = p;
  ac->ev.addRead = poll_add_read;
  ac->ev.delRead = poll_del_read;
  ac->ev.addWrite = poll_add_write;
  ac->ev.delWrite = poll_del_write;
  ac->ev.cleanup = poll_cleanup;
  c->polls_open++;
  return 0;
}

/* ---- the ring of send times (replies come back in send order) ---------- */

/* Send times use the monotonic clock, not the loop's cached time: a loop
 * blocked before a send must not make that command time out early. */
uint64_t rt__mono_ms(void) { return uv_hrtime() / 1000000; }

static int sent_push(rt__conn *c) {
  if (c->sent_len == c->sent_cap) {
    size_t cap = c->sent_cap ? c->sent_cap * 2 : 16;
    uint64_t *n = rt__reallocarray(NULL, cap, sizeof(*n));
    if (n == NULL)
      return RT_ENOMEM;
    for (size_t i = 0; i < c->sent_len; i++)
      n[i] = c->sent[(c->sent_head + i) % c->sent_cap];
    rt__free(c->sent);
    c->sent = n;
    c->sent_cap = cap;
    c->sent_head = 0;
  }
  c->sent[(c->sent_head + c->sent_len) % c->sent_cap] = rt__mono_ms();
  c->sent_len++;
  return 0;
}

static void sent_pop(rt__conn *c) {
  if (c->sent_len == 0)
    return;
  c->sent_head = (c->sent_head + 1) % c->sent_cap;
  c->sent_len--;
}

/* ---- timer: connect deadline, command deadline, backoff --------------- */

static void timer_cb(uv_timer_t *t);
static void close_timer(rt__conn *c);

static void arm_command_deadline(rt__conn *c) {
  if (c->state != RT__CONN_UP && c->state != RT__CONN_CLOSING)
    return;
  if (c->sent_len == 0) {
    uv_timer_stop(&c->timer);
    return;
  }
  uint64_t due = c->sent[c->sent_head] + (uint64_t)c->cfg->command_timeout_ms;
  uint64_t now = rt__mono_ms();
  uv_timer_start(&c->timer, timer_cb, due > now ? due - now : 0, 0);
}

/* Mark the connection down and tell the owner (never re-entrantly from an
 * rt__conn_* call: callers make sure of that). */
static void report_down(rt__conn *c, int status) {
  c->ac = NULL;
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
  redisAsyncContext *ac = c->ac;
  int was_connected = ac != NULL && (ac->c.flags & REDIS_CONNECTED);
  c->drop_status = status;
  if (ac == NULL)
    return;
  redisAsyncFree(ac); /* runs pending callbacks with NULL replies */
  /* hiredis reports a disconnect only for connections that were up. */
  if (!was_connected && c->ac == ac)
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
    if (c->resolving != NULL) {
      set_error(c, "resolve %s: no answer within connect_timeout_ms (%lld ms)",
                c->cfg->host, ms);
      abandon_resolve(c);
      report_down(c, RT_ECONNECT);
      return;
    }
    set_error(c, "connect %s: %s within connect_timeout_ms (%lld ms)", c->peer,
              c->ac != NULL && (c->ac->c.flags & REDIS_CONNECTED)
                  ? "no answer to the handshake"
                  : "no connection",
              ms);
    if (c->ac != NULL)
      drop(c, RT_ECONNECT);
    else
      report_down(c, RT_ECONNECT);
  } else if (c->state == RT__CONN_UP || c->state == RT__CONN_CLOSING) {
    uint64_t now = rt__mono_ms();
    if (c->sent_len > 0 &&
        now - c->sent[c->sent_head] >= (uint64_t)c->cfg->command_timeout_ms) {
      set_error(c,
                "%s: no reply within command_timeout_ms (%lld ms): "
                "connection dropped",
                c->peer, (long long)c->cfg->command_timeout_ms);
      drop(c, RT_ETIMEDOUT);
    } else {
      arm_command_deadline(c);
    }
  }
}

/* ---- hiredis callbacks ------------------------------------------------- */

static void connect_next(rt__conn *c);

static void on_connect(const redisAsyncContext *ac, int status) {
  rt__conn *c = ac->data;
  if (status != REDIS_OK && c->ac == ac) {
    /* hiredis frees the context after this returns, without a disconnect
     * callback; the queued handshake callbacks see c->ac != ac. The next
     * address of the host, if any, is tried within the same deadline. */
    set_error(c, "connect %s: %s", c->peer, ac->errstr);
    c->ac = NULL;
    if (c->next_addr < c->naddrs)
      connect_next(c);
    else
      report_down(c, RT_ECONNECT);
  }
}

static void on_disconnect(const redisAsyncContext *ac, int status) {
  rt__conn *c = ac->data;
  RT__UNUSED(status);
  if (c->ac != ac)
    return;
  int why = c->drop_status;
  /* hiredis drops a subscriber on an error reply (an ACL refusing our
   * channel) and leaves its text in errstr. */
  if (why == 0 && ac->err == REDIS_ERR_OTHER) {
    why = rt__reply_error(ac->errstr, strlen(ac->errstr));
    if (why == RT_EREDIS)
      why = 0;
  }
  if (c->drop_status == 0)
    set_error(c, "connection to %s lost: %s", c->peer,
              ac->err != 0 ? ac->errstr : "closed");
  report_down(c, why ? why : RT_EDISCONNECTED);
}

static void went_up(rt__conn *c) {
  c->state = RT__CONN_UP;
  c->attempt = 0;
  arm_command_deadline(c);
  c->ev->up(c);
}

/* The command connection is up once every handshake reply is in (the
 * subscriber once its SUBSCRIBE is answered). */
static void handshake_step(rt__conn *c) {
  if (c->channel == NULL && c->sent_len == 0 && c->state == RT__CONN_CONNECTING)
    went_up(c);
}

/* A handshake reply; NULL when it is stale or the disconnect path reports. */
static redisReply *handshake_take(redisAsyncContext *ac, void *r, rt__conn *c) {
  if (c->ac != ac || r == NULL)
    return NULL;
  sent_pop(c);
  return r;
}

/* Drop the connection for an error reply to a handshake command, keeping
 * Redis's own words. */
static void handshake_refused(rt__conn *c, const char *what,
                              const redisReply *reply) {
  int err = rt__reply_error(reply->str, reply->len);
  set_error(c, "%s: %.*s", what, (int)reply->len, reply->str);
  drop(c, err == RT_EREDIS ? RT_ECONNECT : err);
}

static void handshake_answer(redisAsyncContext *ac, void *r, rt__conn *c,
                             const char *what) {
  redisReply *reply = handshake_take(ac, r, c);
  if (reply == NULL)
    return;
  if (reply->type == REDIS_REPLY_ERROR) {
    handshake_refused(c, what, reply);
    return;
  }
  handshake_step(c);
}

static void auth_reply(redisAsyncContext *ac, void *r, void *privdata) {
  handshake_answer(ac, r, privdata, "AUTH");
}

static void select_reply(redisAsyncContext *ac, void *r, void *privdata) {
  rt__conn *c = privdata;
  char what[24];
  snprintf(what, sizeof(what), "SELECT %d", c->cfg->db);
  handshake_answer(ac, r, c, what);
}

static void setname_reply(redisAsyncContext *ac, void *r, void *privdata) {
  handshake_answer(ac, r, privdata, "CLIENT SETNAME");
}

static void load_reply(redisAsyncContext *ac, void *r, void *privdata) {
  handshake_answer(ac, r, privdata, "SCRIPT LOAD");
}

/* CLIENT KILL of our previous connection: "No such client" (it is gone
 * already) and an ACL refusal are both fine. */
static void kill_reply(redisAsyncContext *ac, void *r, void *privdata) {
  rt__conn *c = privdata;
  if (handshake_take(ac, r, c) != NULL)
    handshake_step(c);
}

static void id_reply(redisAsyncContext *ac, void *r, void *privdata) {
  rt__conn *c = privdata;
  redisReply *reply = handshake_take(ac, r, c);
  if (reply == NULL)
    return;
  if (reply->type == REDIS_REPLY_INTEGER)
    c->redis_id = reply->integer;
  handshake_step(c);
}

/* The value of "field:" in an INFO text, up to the line end, or NULL. */
static const char *info_field(const char *info, const char *field,
                              size_t *len) {
  size_t n = strlen(field);
  for (const char *p = info; (p = strstr(p, field)) != NULL; p += n) {
    if ((p == info || p[-1] == '\n') && p[n] == ':') {
      *len = strcspn(p + n + 1, "\r\n");
      return p + n + 1;
    }
  }
  return NULL;
}

static void sub_reply(redisAsyncContext *ac, void *r, void *privdata);
static int handshake_send(rt__conn *c, redisCallbackFn *cb, int argc,
                          const char **argv, const size_t *lens);

/* The rest of the handshake, sent once INFO told which server this is: the
 * kill of our previous connection (only on the same server run: ids start
 * again after a restart), CLIENT ID, and for the subscriber the channel
 * (a subscribed connection may send nothing else). */
static int handshake_rest(rt__conn *c, const char *run_id, size_t run_len) {
  int err = 0;
  if (c->redis_id != 0 && run_len == strlen(c->run_id) &&
      memcmp(run_id, c->run_id, run_len) == 0) {
    char id[24];
    int n = snprintf(id, sizeof(id), "%lld", c->redis_id);
    const char *argv[4] = {"CLIENT", "KILL", "ID", id};
    size_t lens[4] = {6, 4, 2, (size_t)n};
    err = handshake_send(c, kill_reply, 4, argv, lens);
  }
  c->redis_id = 0;
  snprintf(c->run_id, sizeof(c->run_id), "%.*s", (int)run_len, run_id);
  if (err == 0) {
    const char *argv[2] = {"CLIENT", "ID"};
    size_t lens[2] = {6, 2};
    err = handshake_send(c, id_reply, 2, argv, lens);
  }
  if (err == 0 && c->channel != NULL) {
    const char *argv[2] = {"SSUBSCRIBE", c->channel};
    size_t lens[2] = {10, c->channel_len};
    err = handshake_send(c, sub_reply, 2, argv, lens);
  }
  if (err == 0 && c->channel != NULL) {
    const char *argv[2] = {"SUBSCRIBE", c->channel};
    size_t lens[2] = {9, c->channel_len};
    err = handshake_send(c, sub_reply, 2, argv, lens);
  }
  return err;
}

/* INFO server and memory: SPUBLISH needs Redis 7, and a policy that may
 * evict keys could free a lock early (an evicted holder key). */
static void info_reply(redisAsyncContext *ac, void *r, void *privdata) {
  rt__conn *c = privdata;
  redisReply *reply = handshake_take(ac, r, c);
  size_t len, run_len = 0;
  if (reply == NULL)
    return;
  if (reply->type == REDIS_REPLY_ERROR) {
    handshake_refused(c, "INFO", reply);
    return;
  }
  if (reply->type != REDIS_REPLY_STRING) {
    set_error(c, "INFO: the reply is not a string");
    drop(c, RT_EPROTO);
    return;
  }
  const char *v = info_field(reply->str, "redis_version", &len);
  if (v == NULL || atoi(v) < 7) {
    set_error(c, "%s runs Redis %.*s: redturn needs Redis 7.0 or newer",
              c->peer, v != NULL ? (int)(len < 32 ? len : 32) : 7,
              v != NULL ? v : "unknown");
    drop(c, RT_ESERVER);
    return;
  }
  v = info_field(reply->str, "maxmemory_policy", &len);
  if (!c->cfg->allow_eviction &&
      (v == NULL || len != 10 || memcmp(v, "noeviction", 10) != 0)) {
    set_error(c,
              "%s has maxmemory-policy %.*s: Redis may evict lock keys, and "
              "an evicted holder key frees its lock early; set "
              "maxmemory-policy noeviction (or allow_eviction)",
              c->peer, v != NULL ? (int)(len < 32 ? len : 32) : 7,
              v != NULL ? v : "unknown");
    drop(c, RT_EEVICTION);
    return;
  }
  const char *run_id = info_field(reply->str, "run_id", &run_len);
  if (handshake_rest(c, run_id != NULL ? run_id : "", run_len) != 0) {
    set_error(c, "connect %s: out of memory queueing the handshake", c->peer);
    drop(c, RT_ECONNECT);
    return;
  }
  handshake_step(c);
}

static void sub_reply(redisAsyncContext *ac, void *r, void *privdata) {
  rt__conn *c = privdata;
  redisReply *reply = r;
  if (c->ac != ac || reply == NULL)
    return;
  if (reply->type == REDIS_REPLY_ERROR) {
    sent_pop(c);
    set_error(c, "subscribing to the client's channel: %.*s", (int)reply->len,
              reply->str);
    drop(c, rt__reply_error(reply->str, reply->len));
    return;
  }
  if (reply->type != REDIS_REPLY_ARRAY || reply->elements < 3 ||
      reply->element[0]->type != REDIS_REPLY_STRING)
    return;
  /* Notices come on the shard channel (SSUBSCRIBE): SPUBLISH counts its
   * subscribers exactly. The plain SUBSCRIBE to the same name only makes
   * hiredis 0.14, which knows no shard channels, route them to us. */
  const char *kind = reply->element[0]->str;
  if (strcmp(kind, "smessage") == 0 &&
      reply->element[2]->type == REDIS_REPLY_STRING) {
    c->ev->message(c, reply->element[2]->str, reply->element[2]->len);
  } else if (strcmp(kind, "ssubscribe") == 0) {
    sent_pop(c);
  } else if (strcmp(kind, "subscribe") == 0 &&
             c->state == RT__CONN_CONNECTING) {
    sent_pop(c);
    went_up(c);
  }
}

static void command_reply(redisAsyncContext *ac, void *r, void *privdata) {
  rt__conn *c = ac->data;
  sent_pop(c);
  if (r == NULL) {
    c->ev->reply(c, NULL, c->drop_status ? c->drop_status : RT_EDISCONNECTED,
                 privdata);
    return;
  }
  arm_command_deadline(c);
  c->ev->reply(c, r, 0, privdata);
}

/* ---- public (internal) API ------------------------------------------ */

void rt__conn_init(rt__conn *c, uv_loop_t *loop, const rt__config *cfg,
                   const rt__conn_events *ev, void *owner, const char *name,
                   const char *channel, size_t channel_len) {
  memset(c, 0, sizeof(*c));
  c->loop = loop;
  c->cfg = cfg;
  c->ev = ev;
  c->owner = owner;
  c->channel = channel;
  c->channel_len = channel_len;
  if (channel == NULL) {
    c->scripts = rt__scripts;
    c->nscripts = RT__SCRIPT_COUNT;
  }
  snprintf(c->name, sizeof(c->name), "%s", name);
  c->rand = ((uint64_t)(uintptr_t)c ^ uv_hrtime() ^ 0x9e3779b97f4a7c15ull) | 1;
  uv_timer_init(loop, &c->timer);
  c->timer.data = c;
}

/* Queue one handshake command; its reply goes to cb. */
static int handshake_send(rt__conn *c, redisCallbackFn *cb, int argc,
                          const char **argv, const size_t *lens) {
  if (redisAsyncCommandArgv(c->ac, cb, c, argc, argv, lens) != REDIS_OK)
    return RT_ECONNECT;
  return sent_push(c);
}

static int handshake(rt__conn *c) {
  const rt__config *cfg = c->cfg;
  int err = 0;
  if (cfg->password != NULL) {
    const char *argv[3] = {"AUTH", cfg->username, cfg->password};
    size_t lens[3] = {4, 0, strlen(cfg->password)};
    if (cfg->username != NULL) {
      lens[1] = strlen(cfg->username);
      err = handshake_send(c, auth_reply, 3, argv, lens);
    } else {
      argv[1] = cfg->password;
      lens[1] = lens[2];
      err = handshake_send(c, auth_reply, 2, argv, lens);
    }
  }
  if (err == 0 && c->channel == NULL && cfg->db != 0) {
    char db[16];
    int n = snprintf(db, sizeof(db), "%d", cfg->db);
    const char *argv[2] = {"SELECT", db};
    size_t lens[2] = {6, (size_t)n};
    err = handshake_send(c, select_reply, 2, argv, lens);
  }
  if (err == 0) {
    const char *argv[3] = {"INFO", "server", "memory"};
    size_t lens[3] = {4, 6, 6};
    err = handshake_send(c, info_reply, 3, argv, lens);
  }
  if (err == 0) {
    const char *argv[3] = {"CLIENT", "SETNAME", c->name};
    size_t lens[3] = {6, 7, strlen(c->name)};
    err = handshake_send(c, setname_reply, 3, argv, lens);
  }
  /* Loading the scripts up front keeps NOSCRIPT (and the resend it costs,
   * which lands behind later commands) for a SCRIPT FLUSH mid-session. */
  for (size_t i = 0; err == 0 && i < c->nscripts; i++) {
    const char *argv[3] = {"SCRIPT", "LOAD", c->scripts[i].body};
    size_t lens[3] = {6, 4, c->scripts[i].len};
    err = handshake_send(c, load_reply, 3, argv, lens);
  }
  return err;
}

/* Report status from the loop, not from inside an rt__conn_* call. */
static void fail_soon(rt__conn *c, int status) {
  c->report_pending = status;
  uv_timer_start(&c->timer, timer_cb, 0, 0);
}

/* Start connecting to the numeric address addr: 0, or an error with the
 * reason in c->error. */
static int start_connect(rt__conn *c, const char *addr) {
  int port = c->cfg->port;
  const char *v6 = strchr(addr, ':') != NULL ? "[" : "";
  if (strcmp(addr, c->cfg->host) == 0)
    snprintf(c->peer, sizeof(c->peer), "%s%s%s:%d", v6, addr, *v6 ? "]" : "",
             port);
  else
    snprintf(c->peer, sizeof(c->peer), "%.40s:%d (%s)", c->cfg->host, port,
             addr);
  c->sent_len = 0;
  c->sent_head = 0;
  redisAsyncContext *ac = redisAsyncConnect(addr, port);
  if (ac == NULL) {
    set_error(c, "connect %s: out of memory", c->peer);
    return RT_ENOMEM;
  }
  if (ac->err != 0) {
    set_error(c, "connect %s: %s", c->peer, ac->errstr);
    redisAsyncFree(ac);
    return RT_ECONNECT;
  }
  ac->data = c;
  /* TCP keepalive: a connection that died silently (peer gone, no RST)
   * is noticed without any traffic of ours. */
  redisEnableKeepAlive(&ac->c);
  int err = poll_attach(c, ac);
  if (err == 0) {
    c->ac = ac;
    redisAsyncSetConnectCallback(ac, on_connect);
    redisAsyncSetDisconnectCallback(ac, on_disconnect);
    if (handshake(c) == 0)
      return 0;
    /* Out of memory queueing the handshake: free the context below (its
     * queued callbacks see c->ac != ac). */
    c->ac = NULL;
    c->sent_len = 0;
    c->sent_head = 0;
    err = RT_ENOMEM;
  }
  set_error(c, "connect %s: %s", c->peer,
            err == RT_ENOMEM ? "out of memory" : "cannot poll the socket");
  redisAsyncFree(ac);
  return err;
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
    set_error(c, "resolve %s: %s", c->cfg->host,
              status != 0 ? uv_strerror(status) : "no IPv4 or IPv6 address");
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
    err =
        uv_getaddrinfo(c->loop, &r->req, resolved, c->cfg->host, NULL, &hints);
  }
  if (err != 0) {
    rt__free(r);
    set_error(c, "resolve %s: %s", c->cfg->host, uv_strerror(err));
    fail_soon(c, RT_ECONNECT);
    return;
  }
  c->resolving = r;
  c->reqs_open++;
}

void rt__conn_connect(rt__conn *c) {
  char buf[sizeof(struct in6_addr)];
  const char *host = c->cfg->host;
  if (c->state != RT__CONN_DOWN)
    return;
  c->drop_status = 0;
  c->sent_len = 0;
  c->sent_head = 0;
  c->state = RT__CONN_CONNECTING;
  c->naddrs = 0;
  c->next_addr = 0;
  snprintf(c->peer, sizeof(c->peer), "%.40s:%d", host, c->cfg->port);
  /* One deadline for the whole attempt: resolution, connect, handshake;
   * counted from now, not from the loop's cached time (rt_client_open may
   * come long after the loop last ran). */
  uv_update_time(c->loop);
  uv_timer_start(&c->timer, timer_cb, (uint64_t)c->cfg->connect_timeout_ms, 0);
  if (uv_inet_pton(AF_INET, host, buf) == 0 ||
      uv_inet_pton(AF_INET6, host, buf) == 0) {
    snprintf(c->addrs[0], sizeof(c->addrs[0]), "%s", host);
    c->naddrs = 1;
    connect_next(c);
  } else {
    resolve(c);
  }
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
  if (c->state != RT__CONN_UP)
    return RT_EDISCONNECTED;
  if (sent_push(c) != 0)
    return RT_ENOMEM;
  if (redisAsyncCommandArgv(c->ac, command_reply, arg, argc, argv, argvlen) !=
      REDIS_OK) {
    c->sent_len--;
    return RT_EDISCONNECTED;
  }
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

void rt__conn_close(rt__conn *c) {
  if (c->state == RT__CONN_CLOSING || c->state == RT__CONN_CLOSED)
    return;
  int was = c->state;
  c->state = RT__CONN_CLOSING;
  c->report_pending = 0;
  abandon_resolve(c);
  redisAsyncContext *ac = c->ac;
  if (ac != NULL && was == RT__CONN_UP && c->channel == NULL &&
      c->sent_len > 0) {
    /* Let the answers to what we sent arrive (bounded by the command
     * deadline, which drops the connection), then disconnect. */
    arm_command_deadline(c);
    redisAsyncDisconnect(ac);
    return;
  }
  close_timer(c);
  if (ac != NULL) {
    c->drop_status = RT_ECANCELED;
    c->ac = NULL;
    redisAsyncFree(ac);
  }
  maybe_closed(c);
}
