/* The fault driver's small helpers (clocks, random numbers, log lines)
 * and the TLS certificates of a --tls run, for the driver and the
 * workers alike. */
#include "fault.h"

/* ---- small helpers ---------------------------------------------------------- */

int64_t real_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void sleep_ms(int64_t ms) {
  struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

uint64_t next_rand(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

int write_all(int fd, const char *buf, size_t len) {
  while (len > 0) {
    ssize_t n = write(fd, buf, len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return -1;
    buf += n;
    len -= (size_t)n;
  }
  return 0;
}

/* One log line, written with one write(2) so a SIGKILL never leaves half a
 * line behind. */
void logf_fd(int fd, const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof(buf) - 1, fmt, ap);
  va_end(ap);
  if (n < 0)
    return;
  if ((size_t)n > sizeof(buf) - 2)
    n = (int)sizeof(buf) - 2;
  buf[n++] = '\n';
  (void)write_all(fd, buf, (size_t)n);
}

void die_with_parent(void) {
#ifdef __linux__
  prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
}

void res_name(int r, char *buf, size_t cap) { snprintf(buf, cap, "r%d", r); }

/* ---- TLS (--tls) -------------------------------------------------------- */

/* The certificates of a --tls run (tests/support/rtt_tls.h), made by the
 * driver into DIR/tls: the server serves TLS with them and demands a
 * client certificate; every worker, a process of its own, finds them in
 * the same place. */
rtt_tls certs;

static int tls_certs_dir(char *buf, size_t cap) {
  int n = snprintf(buf, cap, "%s/tls", P.dir);
  return n > 0 && (size_t)n < cap ? 0 : -1;
}

/* A worker: TLS to the port it was given (its proxy passes the bytes
 * through unchanged), trusting the run's CA, with the client certificate.
 * 0, or -1 when the paths do not fit. */
int tls_worker_options(rt_options_t *o) {
  char dir[RTT_TLS_PATH];
  if (tls_certs_dir(dir, sizeof(dir)) != 0 || rtt_tls_paths(&certs, dir) != 0)
    return -1;
  o->tls = 1;
  o->tls_ca_file = certs.ca;
  o->tls_cert_file = certs.client_cert;
  o->tls_key_file = certs.client_key;
  return 0;
}

/* The driver: the certificates, a free port for TLS (P.tls_port) and the
 * server's TLS arguments into args (pointing into certs and port, which
 * must last until the server started; rtserver keeps copies for the
 * restart). The plain port stays open for the driver's own connections
 * (hiredis 0.14 has no TLS) and the readiness check. 0, or -1 with a
 * message on stderr. */
int tls_server_args(const char *args[RTT_TLS_NARGS], char *port,
                    size_t portcap) {
  char dir[RTT_TLS_PATH], err[700];
  if (tls_certs_dir(dir, sizeof(dir)) != 0 ||
      rtt_tls_make_certs(&certs, dir, err, sizeof(err)) != 0) {
    fprintf(stderr, "fault: TLS certificates: %s\n",
            certs.dir[0] ? err : "the directory's name is too long");
    return -1;
  }
  P.tls_port = rts_free_port();
  if (P.tls_port <= 0) {
    fprintf(stderr, "fault: no free port for TLS\n");
    return -1;
  }
  snprintf(port, portcap, "%d", P.tls_port);
  rtt_tls_server_args(&certs, port, "yes", args);
  return 0;
}
