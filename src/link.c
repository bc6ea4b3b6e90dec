/* A byte stream to Redis on a uv_tcp_t (see link.h).
 *
 * SIGPIPE: a write to a socket whose peer is gone raises SIGPIPE, which
 * kills a host that keeps the default action, and process-wide dispositions
 * are the host's. Every write of a link is one uv_try_write() made with
 * SIGPIPE blocked in this thread, taking back the SIGPIPE it raised (the
 * write itself then fails with EPIPE). libuv is never handed bytes to write
 * later from inside the loop, where no such guard is possible: what the
 * socket does not take at once stays queued here and is tried again on the
 * next reply or after a short timer (1 ms doubling to 16 ms), which only
 * runs while the kernel's send buffer is full. */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
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

#include "common.h"
#include "link.h"
#include "tls.h"

/* TCP keepalive: a connection that died silently (peer gone, no RST) is
 * noticed without any traffic of ours: probes after 15 s idle, 3 of them
 * 5 s apart (hiredis' choice), so within about 30 s. */
#define RT__KEEPALIVE_S 15
#define RT__KEEPALIVE_PROBES 3
#define RT__WRITE_RETRY_MAX_MS 16

/* A byte queue: data[off, len) is still to go. */
typedef struct rt__bytes {
  char *data;
  size_t off, len, cap;
} rt__bytes;

struct rt__link {
  uv_tcp_t tcp;
  uv_connect_t connect;
  uv_timer_t flush; /* writes queued bytes on the next loop turn */
  const rt__link_events *ev;
  void *data;
  redisReader *reader;
  rt__bytes out;  /* commands not yet written (not yet encrypted, with TLS) */
  rt__bytes wire; /* TLS records not yet written */
  rt__tls *tls;   /* NULL: plain TCP */
  int stage;
  int dead;          /* failed: nothing more is reported */
  int connect_error; /* uv_tcp_connect() refused at once: reported soon */
  int closing;
  int handles_open;
  unsigned retry_ms; /* the next write retry's delay; 0: none due */
  char rbuf[16384];
};

/* ---- byte queues ------------------------------------------------------- */

static int bytes_add(rt__bytes *b, const char *p, size_t n) {
  if (b->off == b->len)
    b->off = b->len = 0;
  if (b->len + n > b->cap && b->off > 0) {
    memmove(b->data, b->data + b->off, b->len - b->off);
    b->len -= b->off;
    b->off = 0;
  }
  if (b->len + n > b->cap) {
    size_t cap = b->cap ? b->cap * 2 : 4096;
    if (cap < b->len + n)
      cap = b->len + n;
    char *d = rt__realloc(b->data, cap);
    if (d == NULL)
      return RT_ENOMEM;
    b->data = d;
    b->cap = cap;
  }
  memcpy(b->data + b->len, p, n);
  b->len += n;
  return 0;
}

static void bytes_free(rt__bytes *b) {
  rt__free(b->data);
  memset(b, 0, sizeof(*b));
}

/* ---- failure and close ----------------------------------------------- */

/* The words for a libuv status: errno's own text where there is one (as
 * hiredis words it), "Server closed the connection" for an orderly close. */
static const char *status_words(int status) {
  if (status == UV_EOF)
    return "Server closed the connection";
  if (status < 0 && status > -4000)
    return strerror(-status);
  return uv_strerror(status);
}

static void fail(rt__link *l, int status, const char *why) {
  if (l->closing || l->dead)
    return;
  l->dead = 1;
  uv_read_stop((uv_stream_t *)&l->tcp);
  uv_timer_stop(&l->flush);
  l->ev->failed(l, status, why);
}

static void handle_closed(uv_handle_t *h) {
  rt__link *l = h->data;
  if (--l->handles_open > 0)
    return;
  if (l->reader != NULL)
    redisReaderFree(l->reader);
  bytes_free(&l->out);
  bytes_free(&l->wire);
  rt__tls_free(l->tls);
  l->ev->closed(l);
  rt__free(l);
}

void rt__link_close(rt__link *l) {
  if (l->closing)
    return;
  l->closing = 1;
  uv_close((uv_handle_t *)&l->tcp, handle_closed);
  uv_close((uv_handle_t *)&l->flush, handle_closed);
}

/* ---- writing ------------------------------------------------------------ */

static void flush_cb(uv_timer_t *t);

/* One uv_try_write of buf with SIGPIPE blocked in this thread; a SIGPIPE
 * the write raised is taken back. The number of bytes written, UV_EAGAIN
 * or an error. */
static int write_without_sigpipe(rt__link *l, const uv_buf_t *buf) {
  static const struct timespec zero = {0, 0};
  sigset_t pipe_set, old_mask, pending;
  int was_pending, n;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old_mask);
  sigpending(&pending);
  was_pending = sigismember(&pending, SIGPIPE);
  /* Fault point "redturn/write" (tests, FIU_ENABLE builds only): make this
   * write fail for real. With the socket shut for writing the write fails
   * with EPIPE, raising the SIGPIPE taken back below, as when the peer is
   * gone. */
  uv_os_fd_t fd;
  if (uv_fileno((uv_handle_t *)&l->tcp, &fd) == 0) {
    fiu_do_on("redturn/write", shutdown(fd, SHUT_WR));
  }
  n = uv_try_write((uv_stream_t *)&l->tcp, buf, 1);
  if (!was_pending && sigpending(&pending) == 0 &&
      sigismember(&pending, SIGPIPE)) {
    int saved = errno;
    while (sigtimedwait(&pipe_set, NULL, &zero) < 0 && errno == EINTR) {
    }
    errno = saved;
  }
  pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
  return n;
}

/* Write what the socket takes of b; the rest waits for a retry. 0, or
 * the link failed. */
static int write_bytes(rt__link *l, rt__bytes *b) {
  while (b->off < b->len) {
    uv_buf_t buf = uv_buf_init(b->data + b->off, (unsigned)(b->len - b->off));
    int n = write_without_sigpipe(l, &buf);
    if (n == UV_EAGAIN) {
      l->retry_ms = l->retry_ms == 0 ? 1 : l->retry_ms * 2;
      if (l->retry_ms > RT__WRITE_RETRY_MAX_MS)
        l->retry_ms = RT__WRITE_RETRY_MAX_MS;
      uv_timer_start(&l->flush, flush_cb, l->retry_ms, 0);
      return 0;
    }
    if (n < 0) {
      fail(l, 0, status_words(n));
      return -1;
    }
    b->off += (size_t)n;
  }
  b->off = b->len = 0;
  l->retry_ms = 0;
  return 0;
}

/* Encrypt the queued commands (once the TLS handshake is done) and move
 * every record the session wrote to the wire queue: 0, or the link
 * failed. */
static int encrypt_out(rt__link *l) {
  char why[256];
  rt__bytes *o = &l->out;
  if (l->stage == RT__LINK_READY && o->off < o->len) {
    int r = rt__tls_write(l->tls, o->data + o->off, o->len - o->off, why,
                          sizeof(why));
    if (r < 0) {
      fail(l, r, why);
      return -1;
    }
    if (r == 1)
      o->off = o->len = 0;
  }
  for (size_t n; (n = rt__tls_pending(l->tls)) > 0;) {
    char buf[4096];
    size_t got = rt__tls_take(l->tls, buf, n < sizeof(buf) ? n : sizeof(buf));
    if (got == 0 || bytes_add(&l->wire, buf, got) != 0) {
      fail(l, 0, "out of memory queueing a TLS record");
      return -1;
    }
  }
  return 0;
}

static void flush(rt__link *l) {
  if (l->closing || l->dead || l->stage == RT__LINK_CONNECTING)
    return;
  if (l->tls == NULL) {
    if (l->stage == RT__LINK_READY)
      write_bytes(l, &l->out);
  } else if (encrypt_out(l) == 0) {
    write_bytes(l, &l->wire);
  }
}

static void flush_cb(uv_timer_t *t) {
  rt__link *l = t->data;
  if (l->connect_error != 0)
    fail(l, 0, status_words(l->connect_error));
  else
    flush(l);
}

int rt__link_send(rt__link *l, const char *bytes, size_t len) {
  if (bytes_add(&l->out, bytes, len) != 0)
    return RT_ENOMEM;
  /* Commands added during one loop turn leave in one write at the start
   * of the next. A zero timer rather than a prepare handle: timers run in
   * the order they were started, so commands of several clients keep
   * their call order. */
  if (l->stage == RT__LINK_READY && l->retry_ms == 0 &&
      !uv_is_active((uv_handle_t *)&l->flush))
    uv_timer_start(&l->flush, flush_cb, 0, 0);
  return 0;
}

/* ---- reading ------------------------------------------------------------ */

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  rt__link *l = h->data;
  RT__UNUSED(suggested);
  *buf = uv_buf_init(l->rbuf, sizeof(l->rbuf));
}

/* Hand every complete reply in the reader up, in order. */
static void take_replies(rt__link *l, const char *bytes, size_t n) {
  if (redisReaderFeed(l->reader, bytes, n) != REDIS_OK) {
    fail(l, 0, "out of memory reading a reply");
    return;
  }
  while (!l->closing && !l->dead) {
    void *reply = NULL;
    if (redisReaderGetReply(l->reader, &reply) != REDIS_OK) {
      fail(l, 0, l->reader->errstr[0] ? l->reader->errstr : "bad reply");
      return;
    }
    if (reply == NULL)
      return;
    l->ev->reply(l, reply);
    freeReplyObject(reply);
  }
}

static void became_ready(rt__link *l);

/* TLS records received: drive the handshake, then decrypt what came. */
static void take_records(rt__link *l, const char *bytes, size_t n) {
  char why[256], plain[16384];
  int status = 0;
  if (rt__tls_feed(l->tls, bytes, n) != 0) {
    fail(l, 0, "out of memory reading a TLS record");
    return;
  }
  if (l->stage == RT__LINK_TLS) {
    int r = rt__tls_handshake(l->tls, why, sizeof(why));
    if (r < 0) {
      fail(l, r, why);
      return;
    }
    if (r == 0)
      return;
    became_ready(l);
  }
  while (!l->closing && !l->dead) {
    long got =
        rt__tls_read(l->tls, plain, sizeof(plain), &status, why, sizeof(why));
    if (got < 0)
      fail(l, status, why);
    if (got <= 0)
      return;
    take_replies(l, plain, (size_t)got);
  }
}

static void read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
  rt__link *l = s->data;
  if (l->closing || l->dead)
    return;
  if (nread < 0) {
    /* A close in the middle of the TLS handshake is the server refusing
     * it (a certificate it wants and did not get, a plain port). */
    if (l->stage == RT__LINK_TLS)
      fail(l, RT_ETLS,
           nread == UV_EOF ? "TLS handshake: the server closed the connection"
                           : status_words((int)nread));
    else
      fail(l, 0, status_words((int)nread));
    return;
  }
  if (l->tls != NULL)
    take_records(l, buf->base, (size_t)nread);
  else
    take_replies(l, buf->base, (size_t)nread);
  /* With TLS, reading may have written records (the handshake, a key
   * update). Else a reply means the server reads again: retry a write the
   * socket could not take now rather than at the timer. */
  if (l->tls != NULL || l->retry_ms != 0)
    flush(l);
}

/* ---- connecting --------------------------------------------------------- */

static void became_ready(rt__link *l) {
  l->stage = RT__LINK_READY;
  if (l->out.len > l->out.off)
    uv_timer_start(&l->flush, flush_cb, 0, 0);
  l->ev->ready(l);
}

/* libuv sets only the idle time; the interval and count are the
 * system's (75 s and 9 on Linux) unless set here. */
static void keepalive(rt__link *l) {
  uv_tcp_keepalive(&l->tcp, 1, RT__KEEPALIVE_S);
#if defined(TCP_KEEPINTVL) && defined(TCP_KEEPCNT)
  uv_os_fd_t fd;
  int interval = RT__KEEPALIVE_S / RT__KEEPALIVE_PROBES;
  int count = RT__KEEPALIVE_PROBES;
  if (uv_fileno((uv_handle_t *)&l->tcp, &fd) == 0) {
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof(interval));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
  }
#endif
}

static void connect_cb(uv_connect_t *req, int status) {
  rt__link *l = req->data;
  if (l->closing)
    return;
  if (status < 0) {
    fail(l, 0, status_words(status));
    return;
  }
  uv_tcp_nodelay(&l->tcp, 1);
  keepalive(l);
  int err = uv_read_start((uv_stream_t *)&l->tcp, alloc_cb, read_cb);
  if (err != 0) {
    fail(l, 0, status_words(err));
    return;
  }
  if (l->tls == NULL) {
    became_ready(l);
    return;
  }
  l->stage = RT__LINK_TLS;
  char why[256];
  int r = rt__tls_handshake(l->tls, why, sizeof(why)); /* the ClientHello */
  if (r < 0)
    fail(l, r, why);
  else
    flush(l);
}

int rt__link_open(rt__link **out, uv_loop_t *loop, const char *addr, int port,
                  rt__tls_ctx *tls, const char *server_name,
                  const rt__link_events *ev, void *data, char *why,
                  size_t cap) {
  struct sockaddr_storage sa;
  *out = NULL;
  if (uv_ip4_addr(addr, port, (struct sockaddr_in *)&sa) != 0 &&
      uv_ip6_addr(addr, port, (struct sockaddr_in6 *)&sa) != 0) {
    snprintf(why, cap, "not a numeric address");
    return RT_ECONNECT;
  }
  rt__link *l = rt__calloc(1, sizeof(*l));
  if (l == NULL || (l->reader = redisReaderCreate()) == NULL ||
      (tls != NULL && (l->tls = rt__tls_new(tls, server_name)) == NULL)) {
    if (l != NULL && l->reader != NULL)
      redisReaderFree(l->reader);
    rt__free(l);
    snprintf(why, cap, "out of memory");
    return RT_ENOMEM;
  }
  l->data = data;
  l->stage = RT__LINK_CONNECTING;
  uv_tcp_init(loop, &l->tcp);
  uv_timer_init(loop, &l->flush);
  l->tcp.data = l;
  l->flush.data = l;
  l->connect.data = l;
  l->handles_open = 2;
  l->ev = ev;
  *out = l;
  /* A connect refused at once (no socket left, ...) is reported from the
   * loop like any other, so the link is closed like any other. */
  int err =
      uv_tcp_connect(&l->connect, &l->tcp, (struct sockaddr *)&sa, connect_cb);
  if (err != 0) {
    l->connect_error = err;
    uv_timer_start(&l->flush, flush_cb, 0, 0);
  }
  return 0;
}

int rt__link_stage(const rt__link *l) { return l->stage; }

void *rt__link_data(const rt__link *l) { return l->data; }
