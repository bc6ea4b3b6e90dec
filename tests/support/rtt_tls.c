/* Throwaway certificates and a TLS redis-server (see rtt_tls.h). */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

/* dir/file into out; 0, or -1 when it does not fit. */
static int path(char *out, const char *dir, const char *file) {
  int n = snprintf(out, RTT_TLS_PATH, "%s/%s", dir, file);
  return n > 0 && n < RTT_TLS_PATH ? 0 : -1;
}

int rtt_tls_paths(rtt_tls *t, const char *dir) {
  int n = snprintf(t->dir, sizeof(t->dir), "%s", dir);
  if (n <= 0 || n >= RTT_TLS_PATH || path(t->ca, dir, "ca.crt") != 0 ||
      path(t->ca_dir, dir, "cadir") != 0 ||
      path(t->other_ca, dir, "other-ca.crt") != 0 ||
      path(t->client_cert, dir, "client.crt") != 0 ||
      path(t->client_key, dir, "client.key") != 0 ||
      path(t->server_cert, dir, "server.crt") != 0 ||
      path(t->server_key, dir, "server.key") != 0) {
    t->dir[0] = '\0';
    return -1;
  }
  return 0;
}

/* A new directory under TMPDIR (or /tmp) into buf; 0 or -1. */
static int temp_dir(char *buf, size_t cap) {
  const char *tmp = getenv("TMPDIR");
  snprintf(buf, cap, "%s/redturn-tls.XXXXXX",
           tmp != NULL && tmp[0] != '\0' && strlen(tmp) < 150 ? tmp : "/tmp");
  return mkdtemp(buf) != NULL ? 0 : -1;
}

int rtt_tls_make_certs(rtt_tls *t, const char *dir, char *err, size_t cap) {
  char made[RTT_TLS_PATH], cmd[2048];
  memset(t, 0, sizeof(*t));
  if (dir == NULL) {
    if (temp_dir(made, sizeof(made)) != 0) {
      snprintf(err, cap, "mkdtemp %s: %s", made, strerror(errno));
      return -1;
    }
    dir = made;
  } else if ((rts_remove_tree(dir) != 0 && errno != ENOENT) ||
             mkdir(dir, 0700) != 0) {
    snprintf(err, cap, "cannot make %s: %s", dir, strerror(errno));
    return -1;
  }
  /* Paths are checked (and the directory owned by t) before the shell
   * sees them. */
  if (rtt_tls_paths(t, dir) != 0 || strchr(dir, '\'') != NULL) {
    snprintf(err, cap, "unusable certificate directory %s", dir);
    rts_remove_tree(dir);
    return -1;
  }
  snprintf(cmd, sizeof(cmd), "cd '%s' && { %s; } >/dev/null", t->dir,
           make_certs);
  if (system(cmd) != 0) {
    snprintf(err, cap, "making certificates with openssl in %s failed", t->dir);
    rts_remove_tree(t->dir);
    t->dir[0] = '\0';
    return -1;
  }
  return 0;
}

void rtt_tls_server_args(const rtt_tls *t, const char *port,
                         const char *auth_clients,
                         const char *args[RTT_TLS_NARGS]) {
  const char *list[RTT_TLS_NARGS] = {"--tls-port",
                                     port,
                                     "--tls-cert-file",
                                     t->server_cert,
                                     "--tls-key-file",
                                     t->server_key,
                                     "--tls-ca-cert-file",
                                     t->ca,
                                     "--tls-auth-clients",
                                     auth_clients,
                                     NULL};
  memcpy(args, list, sizeof(list));
}

void rtt_tls_start(rtt_tls *t, const char *auth_clients) {
  char err[1600], port[16];
  const char *extra[RTT_TLS_NARGS];
  cr_assert_eq(rtt_tls_make_certs(t, NULL, err, sizeof(err)), 0, "%s", err);
  /* A free port may be taken by another process before the server binds
   * it (tests side by side): then another port. */
  for (int attempt = 1;; attempt++) {
    t->tls_port = rtt_free_port();
    snprintf(port, sizeof(port), "%d", t->tls_port);
    rtt_tls_server_args(t, port, auth_clients, extra);
    if (rtt_server_try_start(&t->server, extra, err, sizeof(err)) == 0)
      break;
    cr_assert(attempt < 5 && strstr(err, "Address already in use") != NULL,
              "could not start redis-server: %s", err);
  }
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
