/* TLS with OpenSSL through memory BIOs: no I/O here. src/link.c moves the
 * records between these buffers and its libuv stream, so TLS rides the
 * same transport as plain TCP. */
#ifndef RT_TLS_H
#define RT_TLS_H

#include <stddef.h>

#include "common.h"

typedef struct rt__tls_ctx rt__tls_ctx;
typedef struct rt__tls rt__tls;

/* The client side of TLS as cfg says (CA file or directory, else the
 * system's; client certificate and key; verification unless tls_insecure).
 * Returns 0 and *out, or RT_ETLS / RT_ENOMEM with OpenSSL's reason in
 * why[0..cap). */
int rt__tls_ctx_new(rt__tls_ctx **out, const rt__config *cfg, char *why,
                    size_t cap);
void rt__tls_ctx_free(rt__tls_ctx *ctx);

/* A session to a server known as name (SNI, and the name or IP address its
 * certificate must carry). NULL when out of memory. */
rt__tls *rt__tls_new(rt__tls_ctx *ctx, const char *name);
void rt__tls_free(rt__tls *t);

/* Bytes received from the server: 0 or RT_ENOMEM. */
int rt__tls_feed(rt__tls *t, const char *bytes, size_t len);
/* Drive the handshake: 1 done, 0 more bytes needed, or RT_ETLS /
 * RT_ETLSVERIFY with the reason in why[0..cap). */
int rt__tls_handshake(rt__tls *t, char *why, size_t cap);
/* Decrypted bytes into buf: how many (0: none yet), or -1 with the reason
 * in why (*status RT_ETLS, or 0 for the server's orderly close). */
long rt__tls_read(rt__tls *t, char *buf, size_t len, int *status, char *why,
                  size_t cap);
/* Encrypt len bytes: 1 done, 0 not now (the session waits for the server:
 * call again after the next bytes received), or RT_ETLS with the reason. */
int rt__tls_write(rt__tls *t, const char *bytes, size_t len, char *why,
                  size_t cap);
/* Bytes to send to the server: how many are waiting, and take len of them
 * into buf (returns how many were taken). */
size_t rt__tls_pending(rt__tls *t);
size_t rt__tls_take(rt__tls *t, char *buf, size_t len);

#endif /* RT_TLS_H */
