/* One byte stream to Redis on a libuv TCP handle: connect to a numeric
 * address, an optional TLS session on top (src/tls.c), RESP replies parsed
 * with hiredis's reader, and writes gathered per loop turn. No handshake,
 * no deadlines, no reconnects: src/conn.c does those. */
#ifndef RT_LINK_H
#define RT_LINK_H

#include <hiredis/hiredis.h>
#include <stddef.h>
#include <uv.h>

typedef struct rt__link rt__link;
typedef struct rt__tls_ctx rt__tls_ctx;

typedef struct rt__link_events {
  /* The stream is ready for commands (TCP connected and, with TLS, the TLS
   * handshake done). Bytes sent before are written then. */
  void (*ready)(rt__link *link);
  /* One reply, in arrival order; the link frees it when this returns. */
  void (*reply)(rt__link *link, redisReply *reply);
  /* The stream failed (connect refused, reset, closed by the server, an
   * unreadable reply, a TLS failure...): status is 0, or an RT_E* code
   * when the failure has one of its own (RT_ETLS, RT_ETLSVERIFY); why says
   * it in words. Nothing more is called but closed() after
   * rt__link_close(). */
  void (*failed)(rt__link *link, int status, const char *why);
  /* rt__link_close() finished: every handle closed; the link is freed when
   * this returns. */
  void (*closed)(rt__link *link);
} rt__link_events;

/* How far a link got (also when it failed), for the words of a deadline. */
enum { RT__LINK_CONNECTING = 0, RT__LINK_TLS, RT__LINK_READY };

/* Start connecting to the numeric address addr (IPv4 or IPv6 text). tls is
 * NULL for plain TCP, or the context to open a TLS session with, naming
 * the server server_name (SNI and certificate check). Returns 0 and the
 * link in *out (a failure to connect then comes through failed(), from
 * the loop), or RT_ENOMEM / RT_ECONNECT (addr is not numeric) with the
 * reason in why[0..cap), and nothing to close. */
int rt__link_open(rt__link **out, uv_loop_t *loop, const char *addr, int port,
                  rt__tls_ctx *tls, const char *server_name,
                  const rt__link_events *ev, void *data, char *why, size_t cap);
/* Queue the bytes of one formatted command: 0 or RT_ENOMEM. They leave in
 * one write per loop turn, once the link is ready. */
int rt__link_send(rt__link *link, const char *bytes, size_t len);
/* Close the link (at most once): queued bytes are dropped; closed() runs
 * from the loop after every handle closed. */
void rt__link_close(rt__link *link);
/* RT__LINK_CONNECTING, RT__LINK_TLS or RT__LINK_READY. */
int rt__link_stage(const rt__link *link);
/* The data pointer given to rt__link_open. */
void *rt__link_data(const rt__link *link);

#endif /* RT_LINK_H */
