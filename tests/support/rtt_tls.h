/* A throwaway TLS setup for the tests: a CA (also as a hashed directory),
 * a server certificate for 127.0.0.1 and localhost, a client certificate,
 * and a second CA that signed none of them, made with the openssl command
 * into a temporary directory; and a private redis-server serving TLS on a
 * port of its own (the plain port stays, for the readiness check and for
 * test commands).
 *
 * rtt_tls_start() is for Criterion tests (it fails the test). The parts
 * below it never assert, for programs that are not Criterion tests (the
 * fault suite's driver and its workers). */
#ifndef RTT_TLS_H
#define RTT_TLS_H

#include <redturn.h>

#include "rt_test.h"

#define RTT_TLS_PATH 320

typedef struct rtt_tls {
  char dir[RTT_TLS_PATH];
  char ca[RTT_TLS_PATH];       /* the CA that signed the certificates */
  char ca_dir[RTT_TLS_PATH];   /* a hashed directory (c_rehash) of it */
  char other_ca[RTT_TLS_PATH]; /* a CA that signed none of them */
  char client_cert[RTT_TLS_PATH];
  char client_key[RTT_TLS_PATH];
  char server_cert[RTT_TLS_PATH];
  char server_key[RTT_TLS_PATH];
  rtt_server server;
  int tls_port;
  char url[64]; /* "rediss://127.0.0.1:<tls_port>" */
} rtt_tls;

/* Make the certificates and start the server with tls-auth-clients
 * auth_clients ("no", "yes" or "optional"). Fails the test if it cannot. */
void rtt_tls_start(rtt_tls *t, const char *auth_clients);
/* Stop the server and remove the certificates. Safe twice. */
void rtt_tls_stop(rtt_tls *t);
/* Test options (rtt_options) for the TLS port: the url, and the CA. */
void rtt_tls_options(const rtt_tls *t, rt_options_t *o);

/* Make the certificates into dir (made; an earlier one's files are removed
 * first), or, dir NULL, into a new temporary directory; set t's paths. 0,
 * or -1 with the reason in err. rtt_tls_stop() removes the directory. */
int rtt_tls_make_certs(rtt_tls *t, const char *dir, char *err, size_t cap);
/* Set t's paths to the certificates rtt_tls_make_certs() made in dir (for
 * another process using them), without touching the files. 0, or -1 when
 * dir is too long. */
int rtt_tls_paths(rtt_tls *t, const char *dir);

/* The redis-server arguments that serve TLS on port with t's certificates
 * and tls-auth-clients auth_clients: RTT_TLS_NARGS - 1 strings and a NULL,
 * pointing into t, port and auth_clients (which must outlive args). */
#define RTT_TLS_NARGS 11
void rtt_tls_server_args(const rtt_tls *t, const char *port,
                         const char *auth_clients,
                         const char *args[RTT_TLS_NARGS]);

#endif /* RTT_TLS_H */
