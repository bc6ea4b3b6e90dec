/* The fault-injecting TCP proxy: see rtt_proxy.h.
 *
 * Everything below the control API runs in the proxy thread only; the
 * control calls hand a command to it (a mutex-protected list plus
 * uv_async_send) and sleep on a condition variable until it was applied. */
#include "rtt_proxy.h"

#include <criterion/criterion.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uv.h>

/* Bytes read at a time (one chunk at most). */
#define RTT_CHUNK_CAP 65536

struct rtt_conn;

/* A run of bytes read from one side, or the end of that side's stream.
 * Once handed to uv_write it is owned by its write request. */
typedef struct rtt_chunk {
  struct rtt_chunk *next;
  uv_write_t req;
  uint64_t due_ms; /* not before (rtt_ms() clock) */
  int held;
  int eof;
  size_t len;
  char data[];
} rtt_chunk;

/* One direction of a connection: what src sent, on its way to dst. */
typedef struct rtt_pdir {
  struct rtt_conn *c;
  int dir; /* RTT_UP or RTT_DOWN */
  uv_tcp_t *src, *dst;
  rtt_chunk *head, *tail;
  uv_timer_t timer; /* wakes the pump when the head's delay is over */
  uv_shutdown_t shut;
  int ready;    /* dst can be written to */
  int eof_read; /* src ended: no more chunks */
  int eof_sent; /* the shutdown of dst was issued */
  int eof_done; /* ... and completed */
} rtt_pdir;

typedef struct rtt_conn {
  struct rtt_proxy *p;
  int index;
  uv_tcp_t client, server;
  uv_connect_t connect;
  rtt_pdir up, down;
  int closing;
  int handles; /* not yet closed: client, server, two timers */
} rtt_conn;

/* A fault setting for one direction. */
typedef struct rtt_setting {
  int set; /* per-connection entries: overrides the default */
  rtt_fault fault;
  int64_t ms;
} rtt_setting;

enum {
  OP_SET,
  OP_RELEASE,
  OP_CUT,
  OP_REFUSE,
  OP_RESET,
  OP_COUNT,
  OP_OPEN,
  OP_REFUSED,
  OP_BYTES,
  OP_HELD,
  OP_STOP
};

/* One control call, on the caller's stack until done is set. */
typedef struct rtt_cmd {
  struct rtt_cmd *next;
  int op, conn, dir;
  rtt_fault fault;
  int64_t ms;
  uint64_t result;
  int done;
} rtt_cmd;

struct rtt_proxy {
  /* Shared with the control threads (under mu). */
  uv_mutex_t mu;
  uv_cond_t cv;
  rtt_cmd *cmds, *cmds_tail;
  uv_async_t async;
  uv_thread_t thread;
  int port;
  int loop_close; /* uv_loop_close()'s answer, set by the thread */

  /* The proxy thread's own. */
  uv_loop_t loop;
  uv_tcp_t listener;
  struct sockaddr_in target;
  rtt_conn **conns; /* by index; NULL once freed */
  int nconns, conns_cap;
  rtt_setting def[2];    /* [0] up, [1] down */
  rtt_setting (*per)[2]; /* per connection index */
  int nper;
  int refuse, refused;
  int stopping;
  uint64_t bytes[2];
};

/* ---- helpers ------------------------------------------------------------- */

/* Precise monotonic ms: the loop's cached clock may lag by a few ms, and
 * a delay must never come out shorter than asked. */
static uint64_t rtt_ms(void) { return uv_hrtime() / 1000000u; }

static int dir_slot(int dir) { return dir == RTT_UP ? 0 : 1; }

static void *xcalloc(size_t n, size_t size) {
  void *m = calloc(n, size);
  if (m == NULL)
    abort(); /* the proxy thread cannot fail a Criterion test */
  return m;
}

/* The fault in force for direction dir of connection index. */
static rtt_setting setting_for(rtt_proxy *p, int index, int dir) {
  int s = dir_slot(dir);
  if (index < p->nper && p->per[index][s].set)
    return p->per[index][s];
  return p->def[s];
}

static void free_chunks(rtt_pdir *d) {
  while (d->head != NULL) {
    rtt_chunk *ch = d->head;
    d->head = ch->next;
    free(ch);
  }
  d->tail = NULL;
}

/* ---- closing ------------------------------------------------------------- */

static void conn_closed_cb(uv_handle_t *h) {
  rtt_conn *c = ((rtt_pdir *)h->data)->c; /* every handle's data: a direction */
  if (--c->handles > 0)
    return;
  c->p->conns[c->index] = NULL;
  free(c);
}

/* Close both sides now; whatever is queued is dropped. Pending write,
 * shutdown and connect requests complete (canceled) before the close
 * callbacks, so the last of those may free the connection. */
static void conn_close(rtt_conn *c) {
  if (c->closing)
    return;
  c->closing = 1;
  free_chunks(&c->up);
  free_chunks(&c->down);
  uv_close((uv_handle_t *)&c->client, conn_closed_cb);
  uv_close((uv_handle_t *)&c->server, conn_closed_cb);
  uv_close((uv_handle_t *)&c->up.timer, conn_closed_cb);
  uv_close((uv_handle_t *)&c->down.timer, conn_closed_cb);
}

/* Both directions passed their end on: nothing more can happen. */
static void maybe_finished(rtt_conn *c) {
  if (c->up.eof_done && c->down.eof_done)
    conn_close(c);
}

/* ---- forwarding ---------------------------------------------------------- */

static void pump(rtt_pdir *d);

static void write_cb(uv_write_t *req, int status) {
  /* Either stream's data is one of the connection's directions. */
  rtt_conn *c = ((rtt_pdir *)req->handle->data)->c;
  free(req->data);
  /* A peer that went away: give up the whole connection (EPIPE does not
   * kill us, the thread blocks SIGPIPE). Canceled writes of a closing
   * connection land here too; conn_close() is then a no-op. */
  if (status < 0)
    conn_close(c);
}

static void shutdown_cb(uv_shutdown_t *req, int status) {
  rtt_pdir *d = req->data;
  if (status < 0) {
    conn_close(d->c);
    return;
  }
  d->eof_done = 1;
  maybe_finished(d->c);
}

static void timer_cb(uv_timer_t *t) { pump(t->data); }

/* Forward every chunk at the head that is neither held nor early. */
static void pump(rtt_pdir *d) {
  rtt_conn *c = d->c;
  while (!c->closing && d->ready && d->head != NULL && !d->head->held) {
    rtt_chunk *ch = d->head;
    uint64_t now = rtt_ms();
    if (ch->due_ms > now) {
      uv_timer_start(&d->timer, timer_cb, ch->due_ms - now, 0);
      return;
    }
    d->head = ch->next;
    if (d->head == NULL)
      d->tail = NULL;
    if (ch->eof) {
      free(ch);
      d->shut.data = d;
      d->eof_sent = 1;
      if (uv_shutdown(&d->shut, (uv_stream_t *)d->dst, shutdown_cb) != 0)
        conn_close(c);
      return; /* the end is always the last chunk */
    }
    ch->req.data = ch;
    uv_buf_t b = uv_buf_init(ch->data, (unsigned)ch->len);
    size_t len = ch->len;
    if (uv_write(&ch->req, (uv_stream_t *)d->dst, &b, 1, write_cb) != 0) {
      free(ch);
      conn_close(c);
      return;
    }
    c->p->bytes[dir_slot(d->dir)] += len;
  }
}

static void enqueue(rtt_pdir *d, rtt_chunk *ch) {
  rtt_setting s = setting_for(d->c->p, d->c->index, d->dir);
  ch->next = NULL;
  ch->held = s.fault == RTT_HOLD;
  ch->due_ms =
      rtt_ms() + (s.fault == RTT_DELAY && s.ms > 0 ? (uint64_t)s.ms : 0);
  if (s.fault == RTT_DROP && !ch->eof) {
    free(ch);
    return;
  }
  if (d->tail != NULL)
    d->tail->next = ch;
  else
    d->head = ch;
  d->tail = ch;
  pump(d);
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  (void)h;
  (void)suggested;
  rtt_chunk *ch = malloc(sizeof(*ch) + RTT_CHUNK_CAP);
  *buf =
      ch == NULL ? uv_buf_init(NULL, 0) : uv_buf_init(ch->data, RTT_CHUNK_CAP);
}

static void read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
  rtt_pdir *d = s->data;
  rtt_chunk *ch = buf->base == NULL
                      ? NULL
                      : (rtt_chunk *)(buf->base - offsetof(rtt_chunk, data));
  if (nread == 0) {
    free(ch);
    return;
  }
  if (nread < 0) {
    /* EOF or a reset alike: the end of this side's stream, passed on behind
     * what was read before. */
    free(ch);
    uv_read_stop(s);
    if (d->eof_read)
      return;
    d->eof_read = 1;
    ch = xcalloc(1, sizeof(*ch));
    ch->eof = 1;
    enqueue(d, ch);
    return;
  }
  if ((size_t)nread < RTT_CHUNK_CAP / 2) {
    /* Held bytes may stay a while: do not keep 64 KiB per small read. */
    rtt_chunk *small = realloc(ch, sizeof(*ch) + (size_t)nread);
    if (small != NULL)
      ch = small;
  }
  ch->eof = 0;
  ch->len = (size_t)nread;
  enqueue(d, ch);
}

static void connect_cb(uv_connect_t *req, int status) {
  rtt_conn *c = req->data;
  if (status < 0) {
    conn_close(c); /* Redis unreachable: the client sees EOF */
    return;
  }
  if (c->closing)
    return;
  uv_tcp_nodelay(&c->server, 1);
  c->up.ready = 1;
  if (uv_read_start((uv_stream_t *)&c->server, alloc_cb, read_cb) != 0) {
    conn_close(c);
    return;
  }
  pump(&c->up); /* what the client sent meanwhile */
}

static void refused_closed_cb(uv_handle_t *h) { free(h); }

/* A connection uv_accept() failed on: it never got a number. */
static void unaccepted_closed_cb(uv_handle_t *h) { free(h->data); }

static void init_dir(rtt_conn *c, rtt_pdir *d, int dir, uv_tcp_t *src,
                     uv_tcp_t *dst) {
  d->c = c;
  d->dir = dir;
  d->src = src;
  d->dst = dst;
  src->data = d;
  uv_timer_init(&c->p->loop, &d->timer);
  d->timer.data = d;
}

static void on_connection(uv_stream_t *server, int status) {
  rtt_proxy *p = server->data;
  if (status < 0 || p->stopping)
    return;
  if (p->refuse) {
    uv_tcp_t *h = xcalloc(1, sizeof(*h));
    uv_tcp_init(&p->loop, h);
    if (uv_accept(server, (uv_stream_t *)h) == 0) {
      p->refused++;
      uv_tcp_close_reset(h, refused_closed_cb);
    } else {
      uv_close((uv_handle_t *)h, refused_closed_cb);
    }
    return;
  }
  rtt_conn *c = xcalloc(1, sizeof(*c));
  c->p = p;
  c->index = -1;
  uv_tcp_init(&p->loop, &c->client);
  c->client.data = c;
  if (uv_accept(server, (uv_stream_t *)&c->client) != 0) {
    uv_close((uv_handle_t *)&c->client, unaccepted_closed_cb);
    return;
  }
  uv_tcp_init(&p->loop, &c->server);
  init_dir(c, &c->up, RTT_UP, &c->client, &c->server);
  init_dir(c, &c->down, RTT_DOWN, &c->server, &c->client);
  c->down.ready = 1; /* the client is connected already */
  c->handles = 4;
  if (p->nconns == p->conns_cap) {
    int cap = p->conns_cap == 0 ? 16 : 2 * p->conns_cap;
    rtt_conn **a = realloc(p->conns, (size_t)cap * sizeof(*a));
    if (a == NULL)
      abort();
    p->conns = a;
    p->conns_cap = cap;
  }
  c->index = p->nconns++;
  p->conns[c->index] = c;
  uv_tcp_nodelay(&c->client, 1);
  c->connect.data = c;
  if (uv_tcp_connect(&c->connect, &c->server,
                     (const struct sockaddr *)&p->target, connect_cb) != 0 ||
      uv_read_start((uv_stream_t *)&c->client, alloc_cb, read_cb) != 0)
    conn_close(c);
}

/* ---- commands (proxy thread) --------------------------------------------- */

/* Make room for per-connection settings up to index. */
static void grow_per(rtt_proxy *p, int index) {
  if (index < p->nper)
    return;
  int n = index + 16;
  rtt_setting(*a)[2] = realloc(p->per, (size_t)n * sizeof(*a));
  if (a == NULL)
    abort();
  memset(a + p->nper, 0, (size_t)(n - p->nper) * sizeof(*a));
  p->per = a;
  p->nper = n;
}

static void release_dir(rtt_pdir *d) {
  for (rtt_chunk *ch = d->head; ch != NULL; ch = ch->next)
    ch->held = 0;
  pump(d);
}

static uint64_t held_in(const rtt_pdir *d) {
  uint64_t n = 0;
  for (const rtt_chunk *ch = d->head; ch != NULL; ch = ch->next)
    if (ch->held)
      n += ch->len;
  return n;
}

/* The open connections a command is about: one, or all. */
static int first_conn(int conn) { return conn < 0 ? 0 : conn; }
static int end_conn(rtt_proxy *p, int conn) {
  if (conn < 0)
    return p->nconns;
  return conn < p->nconns ? conn + 1 : conn;
}
static rtt_conn *open_conn(rtt_proxy *p, int i) {
  rtt_conn *c = i < p->nconns ? p->conns[i] : NULL;
  return c != NULL && !c->closing ? c : NULL;
}

static void apply(rtt_proxy *p, rtt_cmd *cmd) {
  int lo = first_conn(cmd->conn), hi = end_conn(p, cmd->conn);
  switch (cmd->op) {
  case OP_SET:
    for (int dir = RTT_UP; dir <= RTT_DOWN; dir <<= 1) {
      if (!(cmd->dir & dir))
        continue;
      rtt_setting s = {1, cmd->fault, cmd->ms};
      int slot = dir_slot(dir);
      if (cmd->conn < 0) {
        p->def[slot] = s;
        for (int i = 0; i < p->nper; i++)
          p->per[i][slot].set = 0;
      } else {
        grow_per(p, cmd->conn);
        p->per[cmd->conn][slot] = s;
      }
    }
    break;
  case OP_RELEASE:
    for (int i = lo; i < hi; i++) {
      rtt_conn *c = open_conn(p, i);
      if (c != NULL && (cmd->dir & RTT_UP))
        release_dir(&c->up);
      c = open_conn(p, i); /* releasing may have closed it */
      if (c != NULL && (cmd->dir & RTT_DOWN))
        release_dir(&c->down);
    }
    break;
  case OP_CUT:
    for (int i = lo; i < hi; i++) {
      rtt_conn *c = open_conn(p, i);
      if (c != NULL)
        conn_close(c);
    }
    break;
  case OP_REFUSE:
    p->refuse = cmd->conn;
    break;
  case OP_RESET:
    memset(p->def, 0, sizeof(p->def));
    free(p->per);
    p->per = NULL;
    p->nper = 0;
    p->refuse = 0;
    break;
  case OP_COUNT:
    cmd->result = (uint64_t)p->nconns;
    break;
  case OP_OPEN:
    for (int i = lo; i < hi; i++)
      cmd->result += open_conn(p, i) != NULL;
    break;
  case OP_REFUSED:
    cmd->result = (uint64_t)p->refused;
    break;
  case OP_BYTES:
    cmd->result = ((cmd->dir & RTT_UP) ? p->bytes[0] : 0) +
                  ((cmd->dir & RTT_DOWN) ? p->bytes[1] : 0);
    break;
  case OP_HELD:
    for (int i = lo; i < hi; i++) {
      rtt_conn *c = open_conn(p, i);
      if (c != NULL)
        cmd->result += ((cmd->dir & RTT_UP) ? held_in(&c->up) : 0) +
                       ((cmd->dir & RTT_DOWN) ? held_in(&c->down) : 0);
    }
    break;
  case OP_STOP:
    p->stopping = 1;
    uv_close((uv_handle_t *)&p->listener, NULL);
    for (int i = 0; i < p->nconns; i++)
      if (p->conns[i] != NULL)
        conn_close(p->conns[i]);
    uv_close((uv_handle_t *)&p->async, NULL);
    break;
  }
}

static void async_cb(uv_async_t *a) {
  rtt_proxy *p = a->data;
  uv_mutex_lock(&p->mu);
  rtt_cmd *list = p->cmds;
  p->cmds = p->cmds_tail = NULL;
  uv_mutex_unlock(&p->mu);
  while (list != NULL) {
    rtt_cmd *next = list->next; /* list is gone once done is set */
    apply(p, list);
    uv_mutex_lock(&p->mu);
    list->done = 1;
    uv_cond_broadcast(&p->cv);
    uv_mutex_unlock(&p->mu);
    list = next;
  }
}

static void thread_main(void *arg) {
  rtt_proxy *p = arg;
  /* libuv writes with write()/writev(), so a write to a peer that reset
   * raises SIGPIPE. The signal goes to the writing thread: blocking it here
   * (the mask is per thread) turns it into EPIPE without touching the
   * test process's disposition. */
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &set, NULL);
  uv_run(&p->loop, UV_RUN_DEFAULT);
  p->loop_close = uv_loop_close(&p->loop);
}

/* ---- control API (any thread) -------------------------------------------- */

static uint64_t call(rtt_proxy *p, rtt_cmd *cmd) {
  cmd->next = NULL;
  cmd->done = 0;
  cmd->result = 0;
  uv_mutex_lock(&p->mu);
  if (p->cmds_tail != NULL)
    p->cmds_tail->next = cmd;
  else
    p->cmds = cmd;
  p->cmds_tail = cmd;
  uv_mutex_unlock(&p->mu);
  uv_async_send(&p->async);
  uv_mutex_lock(&p->mu);
  while (!cmd->done)
    uv_cond_wait(&p->cv, &p->mu);
  uv_mutex_unlock(&p->mu);
  return cmd->result;
}

static uint64_t simple(rtt_proxy *p, int op, int conn, int dir) {
  cr_assert_not_null(p, "rtt_proxy: NULL proxy");
  cr_assert_geq(conn, -1, "rtt_proxy: bad connection %d", conn);
  cr_assert(dir >= RTT_UP && dir <= RTT_BOTH, "rtt_proxy: bad direction %d",
            dir);
  rtt_cmd cmd = {.op = op, .conn = conn, .dir = dir};
  return call(p, &cmd);
}

rtt_proxy *rtt_proxy_start(int target_port) {
  cr_assert(target_port > 0 && target_port < 65536, "rtt_proxy_start: port %d",
            target_port);
  rtt_proxy *p = calloc(1, sizeof(*p));
  cr_assert_not_null(p);
  int err = uv_loop_init(&p->loop);
  cr_assert_eq(err, 0, "uv_loop_init: %s", uv_strerror(err));
  uv_ip4_addr("127.0.0.1", target_port, &p->target);

  struct sockaddr_in sa;
  uv_ip4_addr("127.0.0.1", 0, &sa);
  uv_tcp_init(&p->loop, &p->listener);
  p->listener.data = p;
  err = uv_tcp_bind(&p->listener, (const struct sockaddr *)&sa, 0);
  if (err == 0)
    err = uv_listen((uv_stream_t *)&p->listener, 128, on_connection);
  cr_assert_eq(err, 0, "rtt_proxy_start: listen: %s", uv_strerror(err));
  int len = sizeof(sa);
  err = uv_tcp_getsockname(&p->listener, (struct sockaddr *)&sa, &len);
  cr_assert_eq(err, 0, "uv_tcp_getsockname: %s", uv_strerror(err));
  p->port = ntohs(sa.sin_port);

  uv_async_init(&p->loop, &p->async, async_cb);
  p->async.data = p;
  uv_mutex_init(&p->mu);
  uv_cond_init(&p->cv);
  /* Everything above was set up before the thread exists; from here on
   * only the thread touches the loop. */
  err = uv_thread_create(&p->thread, thread_main, p);
  cr_assert_eq(err, 0, "uv_thread_create: %s", uv_strerror(err));
  return p;
}

int rtt_proxy_port(const rtt_proxy *p) { return p->port; }

void rtt_proxy_stop(rtt_proxy *p) {
  if (p == NULL)
    return;
  rtt_cmd cmd = {.op = OP_STOP};
  call(p, &cmd);
  uv_thread_join(&p->thread);
  int closed = p->loop_close;
  uv_cond_destroy(&p->cv);
  uv_mutex_destroy(&p->mu);
  free(p->conns);
  free(p->per);
  free(p);
  cr_assert_eq(closed, 0, "rtt_proxy_stop: uv_loop_close: %s",
               uv_strerror(closed));
}

void rtt_proxy_set(rtt_proxy *p, int conn, int dir, rtt_fault fault,
                   int64_t ms) {
  cr_assert_not_null(p, "rtt_proxy: NULL proxy");
  cr_assert_geq(conn, -1, "rtt_proxy_set: bad connection %d", conn);
  cr_assert_lt(conn, 1 << 20, "rtt_proxy_set: bad connection %d", conn);
  cr_assert(dir >= RTT_UP && dir <= RTT_BOTH, "rtt_proxy_set: direction %d",
            dir);
  cr_assert(fault >= RTT_PASS && fault <= RTT_HOLD, "rtt_proxy_set: fault %d",
            (int)fault);
  cr_assert_geq(ms, 0, "rtt_proxy_set: negative delay");
  rtt_cmd cmd = {
      .op = OP_SET, .conn = conn, .dir = dir, .fault = fault, .ms = ms};
  call(p, &cmd);
}

void rtt_proxy_release(rtt_proxy *p, int conn, int dir) {
  simple(p, OP_RELEASE, conn, dir);
}

void rtt_proxy_cut(rtt_proxy *p, int conn) {
  simple(p, OP_CUT, conn, RTT_BOTH);
}

void rtt_proxy_refuse(rtt_proxy *p, int on) {
  simple(p, OP_REFUSE, on != 0, RTT_BOTH);
}

void rtt_proxy_reset(rtt_proxy *p) { simple(p, OP_RESET, -1, RTT_BOTH); }

int rtt_proxy_conn_count(rtt_proxy *p) {
  return (int)simple(p, OP_COUNT, -1, RTT_BOTH);
}

int rtt_proxy_is_open(rtt_proxy *p, int conn) {
  return (int)simple(p, OP_OPEN, conn, RTT_BOTH);
}

int rtt_proxy_refused(rtt_proxy *p) {
  return (int)simple(p, OP_REFUSED, -1, RTT_BOTH);
}

int rtt_proxy_wait_conns(rtt_proxy *p, int n, int64_t max_ms) {
  uint64_t end = rtt_ms() + (uint64_t)(max_ms > 0 ? max_ms : 0);
  for (;;) {
    if (rtt_proxy_conn_count(p) >= n)
      return 1;
    if (rtt_ms() >= end)
      return 0;
    struct timespec ts = {0, 2000000L};
    nanosleep(&ts, NULL);
  }
}

uint64_t rtt_proxy_bytes(rtt_proxy *p, int dir) {
  return simple(p, OP_BYTES, -1, dir);
}

uint64_t rtt_proxy_held(rtt_proxy *p, int conn, int dir) {
  return simple(p, OP_HELD, conn, dir);
}
