/* A throwaway redis-server for `redturn demo` and the benchmark: on a free
 * loopback port, without persistence, in its own temporary directory,
 * stopped by pid. */
#include <errno.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "server.h"

static int find_on_path(const char *name, char *out, size_t cap) {
  const char *path = getenv("PATH");
  if (path == NULL || path[0] == '\0')
    path = "/usr/local/bin:/usr/bin:/bin";
  while (*path != '\0') {
    const char *end = strchr(path, ':');
    size_t len = end != NULL ? (size_t)(end - path) : strlen(path);
    if (len == 0)
      snprintf(out, cap, "./%s", name);
    else
      snprintf(out, cap, "%.*s/%s", (int)len, path, name);
    struct stat st;
    if (stat(out, &st) == 0 && S_ISREG(st.st_mode) && access(out, X_OK) == 0)
      return 0;
    path += len;
    if (*path == ':')
      path++;
  }
  return -1;
}

/* A loopback port nobody listens on right now (the kernel's pick). */
static int free_port(void) {
  struct sockaddr_in sa;
  socklen_t sl = sizeof(sa);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0)
    return -1;
  memset(&sa, 0, sizeof(sa));
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int port = -1;
  if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
      getsockname(fd, (struct sockaddr *)&sa, &sl) == 0)
    port = ntohs(sa.sin_port);
  close(fd);
  return port;
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, ms % 1000 * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* Does the server on port answer PING, and is it our pid? */
static int answers(int port, pid_t pid) {
  struct timeval tv = {0, 200000};
  redisContext *rc = redisConnectWithTimeout("127.0.0.1", port, tv);
  int ok = 0;
  if (rc != NULL && !rc->err) {
    redisReply *r = redisCommand(rc, "INFO server");
    if (r != NULL && r->type == REDIS_REPLY_STRING) {
      char want[48];
      snprintf(want, sizeof(want), "process_id:%ld\r", (long)pid);
      ok = strstr(r->str, want) != NULL;
    }
    freeReplyObject(r);
  }
  redisFree(rc);
  return ok;
}

static pid_t spawn(const char *exe, int port, const char *dir) {
  char port_s[16];
  snprintf(port_s, sizeof(port_s), "%d", port);
  pid_t pid = fork();
  if (pid != 0)
    return pid;
  /* Child: its own process group (a Ctrl-C meant for the demo does not
   * take the server down under it; we stop it), and gone with us. */
  setpgid(0, 0);
#ifdef __linux__
  prctl(PR_SET_PDEATHSIG, SIGTERM);
#endif
  int null = open("/dev/null", O_RDWR);
  if (null >= 0) {
    dup2(null, STDIN_FILENO);
    dup2(null, STDOUT_FILENO);
    dup2(null, STDERR_FILENO);
  }
  execl(exe, exe, "--port", port_s, "--bind", "127.0.0.1", "--save", "",
        "--appendonly", "no", "--daemonize", "no", "--dir", dir, "--logfile",
        "", (char *)NULL);
  _exit(127);
}

int cli_server_start(cli_server *s, const char *path, char *err,
                     size_t errcap) {
  char exe[PATH_MAX];
  memset(s, 0, sizeof(*s));
  err[0] = '\0';
  if (path == NULL)
    path = "redis-server";
  if (strchr(path, '/') != NULL) {
    snprintf(exe, sizeof(exe), "%s", path);
  } else if (find_on_path(path, exe, sizeof(exe)) != 0) {
    snprintf(err, errcap, "%s not found on PATH", path);
    return -1;
  }
  const char *tmp = getenv("TMPDIR");
  snprintf(s->dir, sizeof(s->dir), "%s/redturn-demo.XXXXXX",
           tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp");
  if (mkdtemp(s->dir) == NULL) {
    snprintf(err, errcap, "cannot create a directory for redis-server: %s",
             strerror(errno));
    s->dir[0] = '\0';
    return -1;
  }
  for (int attempt = 0; attempt < 5; attempt++) {
    int port = free_port();
    if (port <= 0)
      continue;
    pid_t pid = spawn(exe, port, s->dir);
    if (pid < 0) {
      snprintf(err, errcap, "cannot fork: %s", strerror(errno));
      break;
    }
    /* 10 s at most; give up on this port at once if the server died
     * (someone else took the port in between). */
    for (int i = 0; i < 200; i++) {
      int st;
      if (waitpid(pid, &st, WNOHANG) == pid) {
        pid = 0;
        break;
      }
      if (answers(port, pid)) {
        s->pid = pid;
        s->port = port;
        snprintf(s->url, sizeof(s->url), "redis://127.0.0.1:%d", port);
        return 0;
      }
      sleep_ms(50);
    }
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, NULL, 0);
    }
  }
  if (s->pid == 0 && err[0] == '\0')
    snprintf(err, errcap, "redis-server (%s) did not start", exe);
  cli_server_stop(s);
  return -1;
}

void cli_server_stop(cli_server *s) {
  if (s->pid > 0) {
    kill(s->pid, SIGTERM);
    int i;
    for (i = 0; i < 100; i++) {
      if (waitpid(s->pid, NULL, WNOHANG) == s->pid)
        break;
      sleep_ms(50);
    }
    if (i == 100) {
      kill(s->pid, SIGKILL);
      waitpid(s->pid, NULL, 0);
    }
    s->pid = 0;
  }
  if (s->dir[0] != '\0') {
    char path[PATH_MAX + 16];
    snprintf(path, sizeof(path), "%s/dump.rdb", s->dir);
    unlink(path);
    rmdir(s->dir);
    s->dir[0] = '\0';
  }
}
