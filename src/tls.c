/* TLS sessions on memory BIOs (see tls.h). */
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <string.h>

#include "tls.h"

struct rt__tls_ctx {
  SSL_CTX *ssl_ctx;
  int verify;
};

struct rt__tls {
  SSL *ssl;
  BIO *in;  /* records from the server, for OpenSSL to read */
  BIO *out; /* records OpenSSL wrote, for the server */
};

/* OpenSSL's reason for the last failure of this thread (its error queue
 * emptied), or dflt when it recorded none. */
static const char *openssl_reason(const char *dflt) {
  unsigned long e = ERR_peek_last_error();
  const char *r = e != 0 ? ERR_reason_error_string(e) : NULL;
  ERR_clear_error();
  return r != NULL ? r : dflt;
}

static int ctx_fail(SSL_CTX *ssl_ctx, const char *what, const char *file,
                    char *why, size_t cap) {
  snprintf(why, cap, "TLS setup: %s %s: %s", what, file,
           openssl_reason("failed"));
  SSL_CTX_free(ssl_ctx);
  return RT_ETLS;
}

int rt__tls_ctx_new(rt__tls_ctx **out, const rt__config *cfg, char *why,
                    size_t cap) {
  rt__tls_ctx *ctx = rt__calloc(1, sizeof(*ctx));
  SSL_CTX *s = SSL_CTX_new(TLS_client_method());
  *out = NULL;
  if (ctx == NULL || s == NULL) {
    rt__free(ctx);
    SSL_CTX_free(s);
    snprintf(why, cap, "TLS setup: out of memory");
    return RT_ENOMEM;
  }
  SSL_CTX_set_min_proto_version(s, TLS1_2_VERSION);
  /* Bytes go to memory BIOs: a record is always written whole. */
  SSL_CTX_set_mode(s, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  if (cfg->tls_ca_file != NULL || cfg->tls_ca_dir != NULL) {
    if (SSL_CTX_load_verify_locations(s, cfg->tls_ca_file, cfg->tls_ca_dir) !=
        1) {
      rt__free(ctx);
      return ctx_fail(s, "loading the CA",
                      cfg->tls_ca_file != NULL ? cfg->tls_ca_file
                                               : cfg->tls_ca_dir,
                      why, cap);
    }
  } else if (SSL_CTX_set_default_verify_paths(s) != 1) {
    rt__free(ctx);
    return ctx_fail(s, "loading the system's CAs", "", why, cap);
  }
  if (cfg->tls_cert_file != NULL &&
      SSL_CTX_use_certificate_chain_file(s, cfg->tls_cert_file) != 1) {
    rt__free(ctx);
    return ctx_fail(s, "loading the certificate", cfg->tls_cert_file, why, cap);
  }
  if (cfg->tls_key_file != NULL &&
      (SSL_CTX_use_PrivateKey_file(s, cfg->tls_key_file, SSL_FILETYPE_PEM) !=
           1 ||
       SSL_CTX_check_private_key(s) != 1)) {
    rt__free(ctx);
    return ctx_fail(s, "loading the key", cfg->tls_key_file, why, cap);
  }
  ctx->verify = !cfg->tls_insecure;
  SSL_CTX_set_verify(s, ctx->verify ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, NULL);
  ctx->ssl_ctx = s;
  *out = ctx;
  return 0;
}

void rt__tls_ctx_free(rt__tls_ctx *ctx) {
  if (ctx == NULL)
    return;
  SSL_CTX_free(ctx->ssl_ctx);
  rt__free(ctx);
}

/* The server's certificate must name host: an IP address (v4, or v6 with
 * or without brackets) as an IP SAN, anything else as a DNS name, which
 * also goes out as SNI. */
static int set_name(SSL *ssl, const char *host, int verify) {
  char ip[64];
  size_t n = strlen(host);
  if (n >= 2 && n < sizeof(ip) && host[0] == '[' && host[n - 1] == ']') {
    memcpy(ip, host + 1, n - 2);
    ip[n - 2] = '\0';
    host = ip;
  }
  ASN1_OCTET_STRING *a = a2i_IPADDRESS(host);
  if (a != NULL) {
    ASN1_OCTET_STRING_free(a);
    return !verify ||
           X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host) == 1;
  }
  ERR_clear_error();
  if (SSL_set_tlsext_host_name(ssl, host) != 1)
    return 0;
  return !verify || SSL_set1_host(ssl, host) == 1;
}

rt__tls *rt__tls_new(rt__tls_ctx *ctx, const char *name) {
  rt__tls *t = rt__calloc(1, sizeof(*t));
  if (t == NULL)
    return NULL;
  t->ssl = SSL_new(ctx->ssl_ctx);
  t->in = BIO_new(BIO_s_mem());
  t->out = BIO_new(BIO_s_mem());
  if (t->ssl == NULL || t->in == NULL || t->out == NULL) {
    BIO_free(t->in);
    BIO_free(t->out);
    SSL_free(t->ssl);
    rt__free(t);
    ERR_clear_error();
    return NULL;
  }
  /* An empty memory BIO asks to be read again later, not end-of-file. */
  BIO_set_mem_eof_return(t->in, -1);
  SSL_set_bio(t->ssl, t->in, t->out); /* the SSL owns both BIOs now */
  SSL_set_connect_state(t->ssl);
  if (!set_name(t->ssl, name, ctx->verify)) {
    rt__tls_free(t);
    ERR_clear_error();
    return NULL;
  }
  return t;
}

void rt__tls_free(rt__tls *t) {
  if (t == NULL)
    return;
  SSL_free(t->ssl);
  rt__free(t);
}

int rt__tls_feed(rt__tls *t, const char *bytes, size_t len) {
  if (len > 0 && BIO_write(t->in, bytes, (int)len) != (int)len) {
    ERR_clear_error();
    return RT_ENOMEM;
  }
  return 0;
}

/* Why the last call on the session failed, as an RT_E* code and words. */
static int session_error(rt__tls *t, int ret, char *why, size_t cap) {
  int e = SSL_get_error(t->ssl, ret);
  long v = SSL_get_verify_result(t->ssl);
  if (v != X509_V_OK) {
    snprintf(why, cap, "TLS certificate verification failed: %s",
             X509_verify_cert_error_string(v));
    ERR_clear_error();
    return RT_ETLSVERIFY;
  }
  if (e == SSL_ERROR_SYSCALL || e == SSL_ERROR_ZERO_RETURN)
    snprintf(why, cap, "TLS: %s",
             openssl_reason("the server closed the connection"));
  else
    snprintf(why, cap, "TLS: %s", openssl_reason("protocol error"));
  return RT_ETLS;
}

int rt__tls_handshake(rt__tls *t, char *why, size_t cap) {
  int r = SSL_do_handshake(t->ssl);
  if (r == 1)
    return 1;
  int e = SSL_get_error(t->ssl, r);
  if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
    return 0;
  return session_error(t, r, why, cap);
}

long rt__tls_read(rt__tls *t, char *buf, size_t len, int *status, char *why,
                  size_t cap) {
  int n = SSL_read(t->ssl, buf, len > INT32_MAX ? INT32_MAX : (int)len);
  if (n > 0)
    return n;
  int e = SSL_get_error(t->ssl, n);
  if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
    return 0;
  if (e == SSL_ERROR_ZERO_RETURN) {
    snprintf(why, cap, "Server closed the connection");
    *status = 0;
    return -1;
  }
  *status = session_error(t, n, why, cap);
  return -1;
}

int rt__tls_write(rt__tls *t, const char *bytes, size_t len, char *why,
                  size_t cap) {
  int n = SSL_write(t->ssl, bytes, len > INT32_MAX ? INT32_MAX : (int)len);
  if (n > 0)
    return 1;
  int e = SSL_get_error(t->ssl, n);
  if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
    return 0;
  return session_error(t, n, why, cap);
}

size_t rt__tls_pending(rt__tls *t) { return BIO_ctrl_pending(t->out); }

size_t rt__tls_take(rt__tls *t, char *buf, size_t len) {
  int n = BIO_read(t->out, buf, len > INT32_MAX ? INT32_MAX : (int)len);
  return n > 0 ? (size_t)n : 0;
}
