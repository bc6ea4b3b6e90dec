/* The server-stall probe: a thread of the driver that PINGs the server
 * every 20 ms on a connection of its own and logs every stretch in which
 * the server did not answer for 200 ms or more as "A t ms stall", a pause
 * nobody asked for. A server starved of CPU or blocked on its AOF's
 * fsync on a busy machine, or this process starved with its proxies,
 * stops every worker's traffic just as CLIENT PAUSE does; the checker
 * allows for both alike. Plain runs only (one server, on one port for the
 * whole run); a restart breaks the connection, which is opened again. */
#include "fault.h"

#include <netinet/in.h>
#include <poll.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#define PROBE_EVERY_MS 20
#define PROBE_STALL_MS 200

static struct {
  uv_thread_t thread;
  int port;
  int running;
  atomic_int stop;
  atomic_long stalls;
  atomic_long longest_ms;
} probe;

static int probe_connect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -1;
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_port = htons((uint16_t)port),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

/* One PING and its "+PONG\r\n" (or an error reply while the server
 * loads: an answer all the same); 0 if answered, -1 if the connection
 * broke or stayed silent for 30 s. */
static int probe_ping(int fd) {
  if (send(fd, "PING\r\n", 6, MSG_NOSIGNAL) != 6)
    return -1;
  char buf[64];
  size_t got = 0;
  int64_t until = mono_ms() + 30000;
  while (got == 0 || buf[got - 1] != '\n') {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int64_t left = until - mono_ms();
    if (left <= 0 || poll(&p, 1, (int)(left < 100 ? left : 100)) < 0)
      return -1;
    if (atomic_load(&probe.stop))
      return -1;
    if (!(p.revents & (POLLIN | POLLHUP | POLLERR)))
      continue;
    ssize_t n = recv(fd, buf + got, sizeof(buf) - got, 0);
    if (n <= 0)
      return -1;
    got += (size_t)n;
    if (got == sizeof(buf))
      got = 0; /* not one short reply: keep reading to its end */
  }
  return 0;
}

static void probe_main(void *arg) {
  (void)arg;
  int fd = -1;
  int64_t seen_us = 0; /* when the server last answered */
  while (!atomic_load(&probe.stop)) {
    if (fd < 0) {
      fd = probe_connect(probe.port);
      seen_us = 0;
      if (fd < 0) {
        sleep_ms(100);
        continue;
      }
    }
    if (probe_ping(fd) != 0) {
      close(fd);
      fd = -1;
      continue;
    }
    int64_t now = real_us();
    long ms = seen_us > 0 ? (long)((now - seen_us) / 1000) : 0;
    if (ms >= PROBE_STALL_MS) {
      dlogf("A %" PRId64 " %ld stall", seen_us, ms);
      atomic_fetch_add(&probe.stalls, 1);
      if (ms > atomic_load(&probe.longest_ms))
        atomic_store(&probe.longest_ms, ms);
    }
    seen_us = now;
    sleep_ms(PROBE_EVERY_MS);
  }
  if (fd >= 0)
    close(fd);
}

void probe_start(int port) {
  probe.port = port;
  atomic_store(&probe.stop, 0);
  probe.running = uv_thread_create(&probe.thread, probe_main, NULL) == 0;
}

/* Stops the probe and prints what it saw; the stalls it logged, -1 if it
 * did not run. */
long probe_stop(void) {
  if (!probe.running)
    return -1;
  atomic_store(&probe.stop, 1);
  uv_thread_join(&probe.thread);
  probe.running = 0;
  printf("fault: server stalls (no PONG for %d ms or more, probed every %d "
         "ms): %ld, the longest %ld ms\n",
         PROBE_STALL_MS, PROBE_EVERY_MS, atomic_load(&probe.stalls),
         atomic_load(&probe.longest_ms));
  return atomic_load(&probe.stalls);
}
