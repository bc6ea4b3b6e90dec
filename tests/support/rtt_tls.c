/* Throwaway certificates and a TLS redis-server (see rtt_tls.h). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rtserver.h"
#include "rtt_tls.h"

/* The commands, run by sh in the directory: P-256 keys (quick to make), a
 * CA per trust root, certificates valid for two days. */
static const char make_certs[] =
    "set -e; "
    "key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 "
    "-out $1.key 2>/dev/null; }; "
    "ca() { key $1; openssl req -x509 -new -key $1.key -days 2 -subj /CN=$1 "
    "-out $1.crt; }; "
    "cert() { key $1; openssl req -new -key $1.key -subj /CN=$1 -out $1.csr; "
    "printf '%s\\n' \"$3\" > $1.ext; "
    "openssl x509 -req -in $1.csr -CA $2.crt -CAkey $2.key -CAcreateserial "
    "-days 2 -extfile $1.ext -out $1.crt 2>/dev/null; }; "
    "ca ca; ca other-ca; "
    "cert server ca 'subjectAltName=IP:127.0.0.1,DNS:localhost'; "
    "cert client ca 'extendedKeyUsage=clientAuth'; "
    "mkdir cadir; cp ca.crt cadir/; openssl rehash cadir";

static void path(char *out, const rtt_tls *t, const char *file) {
  int n = snprintf(out, RTT_TLS_PATH, "%.200s/%s", t->dir, file);
  cr_assert(n > 0 && n < RTT_TLS_PATH, "path too long: %s", t->dir);
}

void rtt_tls_start(rtt_tls *t, const char *auth_clients) {
  char cmd[2048], cert[RTT_TLS_PATH], key[RTT_TLS_PATH], port[16];
  memset(t, 0, sizeof(*t));
  const char *tmp = getenv("TMPDIR");
  snprintf(t->dir, 200, "%s/redturn-tls.XXXXXX",
           tmp != NULL && tmp[0] != '\0' && strlen(tmp) < 150 ? tmp : "/tmp");
  cr_assert_not_null(mkdtemp(t->dir), "mkdtemp %s", t->dir);
  snprintf(cmd, sizeof(cmd), "cd '%s' && { %s; } >/dev/null", t->dir,
           make_certs);
  cr_assert_eq(system(cmd), 0, "making certificates with openssl failed");
  path(t->ca, t, "ca.crt");
  path(t->ca_dir, t, "cadir");
  path(t->other_ca, t, "other-ca.crt");
  path(t->client_cert, t, "client.crt");
  path(t->client_key, t, "client.key");
  path(cert, t, "server.crt");
  path(key, t, "server.key");
  t->tls_port = rtt_free_port();
  snprintf(port, sizeof(port), "%d", t->tls_port);
  const char *extra[] = {"--tls-port",        port,
                         "--tls-cert-file",   cert,
                         "--tls-key-file",    key,
                         "--tls-ca-cert-file", t->ca,
                         "--tls-auth-clients", auth_clients,
                         NULL};
  rtt_server_start(&t->server, extra);
  snprintf(t->url, sizeof(t->url), "rediss://127.0.0.1:%d", t->tls_port);
}

void rtt_tls_stop(rtt_tls *t) {
  rtt_server_stop(&t->server);
  if (t->dir[0] != '\0')
    rts_remove_tree(t->dir);
  t->dir[0] = '\0';
}

void rtt_tls_options(const rtt_tls *t, rt_options_t *o) {
  rtt_options_at(o, t->tls_port);
  o->url = t->url;
  o->tls_ca_file = t->ca;
}
