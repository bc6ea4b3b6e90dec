/* A throwaway redis-server: see rtserver.h. */
#define _GNU_SOURCE
#include "rtserver.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#define RTS_DEFAULT_WAIT_MS 10000
#define RTS_TERM_WAIT_MS 10000
#define RTS_ATTEMPTS 5

/* libuv's monotonic clock, in ms. */
static int64_t mono_ms(void) { return (int64_t)(uv_hrtime() / 1000000u); }

static void set_cloexec(int fd) {
  int fl = fcntl(fd, F_GETFD);
  if (fl >= 0)
    fcntl(fd, F_SETFD, fl | FD_CLOEXEC);
}

/* name on PATH (the first executable regular file), into out: 0 or -1. */
static int find_on_path(const char *name, char *out, size_t cap) {
  const char *path = getenv("PATH");
  if (path == NULL || path[0] == '\0')
    path = "/usr/local/bin:/usr/bin:/bin";
  while (*path != '\0') {
    const char *end = strchr(path, ':');
    size_t len = end != NULL ? (size_t)(end - path) : strlen(path);
    int n = len == 0 ? snprintf(out, cap, "./%s", name)
                     : snprintf(out, cap, "%.*s/%s", (int)len, path, name);
    struct stat st;
    if (n > 0 && (size_t)n < cap && stat(out, &st) == 0 &&
        S_ISREG(st.st_mode) && access(out, X_OK) == 0)
      return 0;
    path += len;
    if (*path == ':')
      path++;
  }
  return -1;
}

/* port bound on loopback (0: any the kernel picks): the port, or -1. */
static int bind_loopback(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -1;
  struct sockaddr_in sa;
  socklen_t sl = sizeof(sa);
  memset(&sa, 0, sizeof(sa));
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  sa.sin_port = htons((uint16_t)port);
  int got = -1;
  if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
      getsockname(fd, (struct sockaddr *)&sa, &sl) == 0)
    got = ntohs(sa.sin_port);
  close(fd);
  return got;
}

/* The first port the kernel gives outgoing connections (32768 when it
 * cannot be read). */
static int ephemeral_low(void) {
  int low = 32768, high;
  FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
  if (f != NULL) {
    if (fscanf(f, "%d %d", &low, &high) != 2)
      low = 32768;
    fclose(f);
  }
  return low;
}

/* A free port below the range of outgoing connections' ports: a server
 * stopped and started again on it cannot find it taken by the local end
 * of some connection (those come from that range, as do the ports bind
 * picks for port 0). Random, so that test commands running side by side
 * rarely try the same one; port 0 when the range starts too low. */
int rts_free_port(void) {
  int low = ephemeral_low();
  if (low > 12000) {
    unsigned seed = (unsigned)getpid() ^ (unsigned)uv_hrtime();
    for (int i = 0; i < 64; i++) {
      int port = 10000 + rand_r(&seed) % (low - 10000);
      if (bind_loopback(port) == port)
        return port;
    }
  }
  return bind_loopback(0);
}

void rts_url(const rts_server *s, char *buf, size_t cap) {
  snprintf(buf, cap, "redis://127.0.0.1:%d", s->port);
}

/* ---- directories ------------------------------------------------------------ */

/* Remove name (relative to the directory parent) and, if it is a
 * directory, everything in it. Never follows symbolic links. 0 or -1. */
static int remove_tree_at(int parent, const char *name, int depth) {
  if (unlinkat(parent, name, 0) == 0 || errno == ENOENT)
    return 0;
  if ((errno != EISDIR && errno != EPERM) || depth > 8)
    return -1;
  int fd =
      openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return -1;
  DIR *d = fdopendir(fd);
  if (d == NULL) {
    close(fd);
    return -1;
  }
  int err = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
      continue;
    if (remove_tree_at(dirfd(d), e->d_name, depth + 1) != 0)
      err = -1;
  }
  closedir(d);
  if (unlinkat(parent, name, AT_REMOVEDIR) != 0 && errno != ENOENT)
    err = -1;
  return err;
}

int rts_remove_tree(const char *dir) {
  return remove_tree_at(AT_FDCWD, dir, 0);
}

void rts_log_tail(const char *dir, char *buf, size_t cap) {
  static const char *const files[] = {"stdout.log", "redis.log"};
  size_t used = 0;
  if (cap == 0)
    return;
  buf[0] = '\0';
  for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
    char path[RTS_PATH_CAP + 16], tail[512];
    snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
    FILE *f = fopen(path, "re");
    if (f == NULL)
      continue;
    if (fseek(f, -(long)(sizeof(tail) - 1), SEEK_END) != 0)
      rewind(f);
    size_t n = fread(tail, 1, sizeof(tail) - 1, f);
    fclose(f);
    tail[n] = '\0';
    if (n > 0 && used < cap) {
      int w =
          snprintf(buf + used, cap - used, "\n--- end of %s:\n%s", path, tail);
      used += w > 0 ? (size_t)w : 0;
    }
  }
}

/* s->dir: the given one (made if missing) or a new temporary one. */
static int make_dir(rts_server *s, const rts_options *o, char *err,
                    size_t errcap) {
  if (o->dir != NULL) {
    snprintf(s->dir, sizeof(s->dir), "%s", o->dir);
    if (mkdir(s->dir, 0700) == 0 || errno == EEXIST)
      return 0;
  } else {
    const char *tmp = getenv("TMPDIR");
    snprintf(s->dir, sizeof(s->dir), "%s/%s.XXXXXX",
             tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp",
             o->dir_prefix != NULL ? o->dir_prefix : "redturn-redis");
    if (mkdtemp(s->dir) != NULL)
      return 0;
  }
  snprintf(err, errcap, "cannot create %s for redis-server: %s", s->dir,
           strerror(errno));
  s->dir[0] = '\0';
  return -1;
}

/* ---- the process -------------------------------------------------------------- */

/* Fork and exec the server on s->port in s->dir with s's extra arguments;
 * its pid, or -1. Everything the child needs is prepared before the fork:
 * the child makes async-signal-safe calls only. */
static pid_t spawn(const rts_server *s) {
  const char *argv[22 + RTS_MAX_ARGS];
  char port[16], logfile[RTS_PATH_CAP + 16], out[RTS_PATH_CAP + 16];
  int n = 0;
  snprintf(port, sizeof(port), "%d", s->port);
  snprintf(logfile, sizeof(logfile), "%s/redis.log", s->dir);
  snprintf(out, sizeof(out), "%s/stdout.log", s->dir);
  argv[n++] = s->exe;
  if (s->conf[0] != '\0')
    argv[n++] = s->conf; /* Redis takes a config file only as argv[1] */
  if (s->sentinel)
    argv[n++] = "--sentinel";
  argv[n++] = "--port";
  argv[n++] = port;
  argv[n++] = "--bind";
  argv[n++] = "127.0.0.1";
  argv[n++] = "--save";
  argv[n++] = "";
  argv[n++] = "--appendonly";
  argv[n++] = "no";
  argv[n++] = "--daemonize";
  argv[n++] = "no";
  argv[n++] = "--dir";
  argv[n++] = s->dir;
  argv[n++] = "--logfile";
  argv[n++] = logfile;
  argv[n++] = "--enable-debug-command";
  argv[n++] = "local";
  const char *a = s->args;
  for (int i = 0; i < s->nargs; i++) {
    argv[n++] = a;
    a += strlen(a) + 1;
  }
  argv[n] = NULL;
  long maxfd = sysconf(_SC_OPEN_MAX);
  if (maxfd < 0 || maxfd > 65536)
    maxfd = 65536;
  sigset_t none;
  sigemptyset(&none);
  pid_t parent = getpid();

  pid_t pid = fork();
  if (pid != 0)
    return pid;
  setpgid(0, 0);
#ifdef __linux__
  prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
  if (getppid() != parent)
    _exit(127); /* the parent died before prctl */
  sigprocmask(SIG_SETMASK, &none, NULL);
  /* Appended: a restarted server keeps what the first one wrote. */
  int fd = open(out, O_WRONLY | O_CREAT | O_APPEND, 0600);
  if (fd >= 0) {
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
  }
  int nul = open("/dev/null", O_RDONLY);
  if (nul >= 0)
    dup2(nul, STDIN_FILENO);
  for (long i = 3; i < maxfd; i++)
    close((int)i);
  execv(s->exe, (char *const *)argv);
  _exit(127);
}

int rts_ready(const rts_server *s) {
  if (s->pid <= 0)
    return 0;
  struct timeval tv = {0, 200000};
  redisContext *rc = redisConnectWithTimeout("127.0.0.1", s->port, tv);
  int ok = 0;
  if (rc == NULL || rc->err) {
    if (rc != NULL)
      redisFree(rc);
    return 0;
  }
  set_cloexec(rc->fd);
  redisSetTimeout(rc, (struct timeval){2, 0});
  /* A Sentinel has no keys; a cluster node without the probe's slot
   * answers -CLUSTERDOWN or -MOVED, which come after -LOADING. */
  redisReply *r = redisCommand(rc, s->sentinel ? "PING" : "EXISTS rts:probe");
  int answered = r != NULL && (r->type == REDIS_REPLY_INTEGER ||
                               r->type == REDIS_REPLY_STATUS ||
                               (r->type == REDIS_REPLY_ERROR &&
                                (strncmp(r->str, "CLUSTERDOWN", 11) == 0 ||
                                 strncmp(r->str, "MOVED", 5) == 0)));
  if (r != NULL && r->type == REDIS_REPLY_ERROR &&
      strncmp(r->str, "NOAUTH", 6) == 0) {
    ok = 1;
  } else if (answered) {
    redisReply *info = redisCommand(rc, "INFO server");
    char want[48];
    snprintf(want, sizeof(want), "process_id:%ld\r\n", (long)s->pid);
    ok = info != NULL && info->type == REDIS_REPLY_STRING &&
         strstr(info->str, want) != NULL;
    if (info != NULL)
      freeReplyObject(info);
  }
  if (r != NULL)
    freeReplyObject(r);
  redisFree(rc);
  return ok;
}

int rts_wait_ready(rts_server *s, int64_t max_ms) {
  int64_t until = mono_ms() + max_ms;
  for (;;) {
    if (rts_ready(s))
      return 1;
    if (s->pid <= 0 || waitpid(s->pid, NULL, WNOHANG) == s->pid) {
      s->pid = 0; /* e.g. someone took the port first */
      return -1;
    }
    if (mono_ms() >= until)
      return 0;
    uv_sleep(20);
  }
}

void rts_terminate(rts_server *s) {
  pid_t pid = s->pid;
  if (pid <= 0)
    return;
  s->pid = 0;
  kill(pid, SIGTERM);
  int64_t until = mono_ms() + RTS_TERM_WAIT_MS;
  while (mono_ms() < until) {
    pid_t r = waitpid(pid, NULL, WNOHANG);
    if (r == pid || (r < 0 && errno == ECHILD))
      return;
    uv_sleep(10);
  }
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
}

void rts_stop(rts_server *s) {
  rts_terminate(s);
  /* REDTURN_KEEP_SERVER_DIRS=1 keeps each server's files (its redis.log:
   * what a Sentinel decided, when a replica synced) to read after a
   * failed run. */
  const char *keep = getenv("REDTURN_KEEP_SERVER_DIRS");
  if (keep != NULL && strcmp(keep, "1") == 0 && s->dir[0] != '\0') {
    fprintf(stderr, "rtserver: kept %s\n", s->dir);
    s->dir[0] = '\0';
  }
  if (s->dir[0] != '\0') {
    if (rts_remove_tree(s->dir) != 0)
      fprintf(stderr, "rtserver: could not remove %s: %s\n", s->dir,
              strerror(errno));
    s->dir[0] = '\0';
  }
}

int rts_respawn(rts_server *s) {
  s->pid = spawn(s);
  if (s->pid > 0)
    return 0;
  s->pid = 0;
  return -1;
}

/* ---- start ------------------------------------------------------------------------ */

static int copy_args(rts_server *s, const char *const *extra, char *err,
                     size_t errcap) {
  size_t used = 0;
  for (int i = 0; extra != NULL && extra[i] != NULL; i++) {
    size_t len = strlen(extra[i]) + 1;
    if (s->nargs == RTS_MAX_ARGS || used + len > sizeof(s->args)) {
      snprintf(err, errcap, "too many or too long redis-server arguments");
      return -1;
    }
    memcpy(s->args + used, extra[i], len);
    used += len;
    s->nargs++;
  }
  return 0;
}

/* The tests' module mode (rtserver.h): "--loadmodule $REDTURN_TEST_MODULE"
 * after the extra arguments. 0, or -1 if they do not fit. */
static int add_test_module(rts_server *s, const rts_options *o, char *err,
                           size_t errcap) {
  const char *m = getenv("REDTURN_TEST_MODULE");
  if (m == NULL || m[0] == '\0' || o->sentinel || o->no_module)
    return 0;
  for (int i = 0; o->extra != NULL && o->extra[i] != NULL; i++)
    if (strcmp(o->extra[i], "--loadmodule") == 0)
      return 0;
  const char *const args[] = {"--loadmodule", m, NULL};
  size_t used = 0;
  for (int i = 0; i < s->nargs; i++)
    used += strlen(s->args + used) + 1;
  for (int i = 0; args[i] != NULL; i++) {
    size_t len = strlen(args[i]) + 1;
    if (s->nargs == RTS_MAX_ARGS || used + len > sizeof(s->args)) {
      snprintf(err, errcap, "too many or too long redis-server arguments");
      return -1;
    }
    memcpy(s->args + used, args[i], len);
    used += len;
    s->nargs++;
  }
  return 0;
}

static int find_exe(rts_server *s, const char *exe, char *err, size_t errcap) {
  if (exe == NULL)
    exe = "redis-server";
  if (strchr(exe, '/') != NULL) {
    snprintf(s->exe, sizeof(s->exe), "%s", exe);
    return 0;
  }
  if (find_on_path(exe, s->exe, sizeof(s->exe)) == 0)
    return 0;
  snprintf(err, errcap, "%s not found on PATH", exe);
  return -1;
}

/* o->config into s->dir/redis.conf, named in s->conf. */
static int write_config(rts_server *s, const rts_options *o, char *err,
                        size_t errcap) {
  if (o->config == NULL && !o->sentinel)
    return 0;
  snprintf(s->conf, sizeof(s->conf), "%s/redis.conf", s->dir);
  FILE *f = fopen(s->conf, "we");
  const char *text = o->config != NULL ? o->config : "";
  if (f != NULL && fputs(text, f) >= 0 && fclose(f) == 0)
    return 0;
  if (f != NULL)
    fclose(f);
  snprintf(err, errcap, "cannot write %s: %s", s->conf, strerror(errno));
  return -1;
}

int rts_start(rts_server *s, const rts_options *o, char *err, size_t errcap) {
  rts_options defaults;
  memset(s, 0, sizeof(*s));
  memset(&defaults, 0, sizeof(defaults));
  if (o == NULL)
    o = &defaults;
  err[0] = '\0';
  if (find_exe(s, o->exe, err, errcap) != 0 ||
      copy_args(s, o->extra, err, errcap) != 0 ||
      add_test_module(s, o, err, errcap) != 0 ||
      make_dir(s, o, err, errcap) != 0)
    return -1;
  s->sentinel = o->sentinel != 0;
  if (write_config(s, o, err, errcap) != 0) {
    rts_stop(s);
    return -1;
  }
  int64_t wait_ms = o->wait_ms > 0 ? o->wait_ms : RTS_DEFAULT_WAIT_MS;
  int up = -1;
  for (int attempt = 0; attempt < RTS_ATTEMPTS && up != 1; attempt++) {
    s->port = o->port > 0 ? o->port : rts_free_port();
    if (s->port <= 0)
      continue;
    if (rts_respawn(s) != 0) {
      snprintf(err, errcap, "cannot fork: %s", strerror(errno));
      break;
    }
    up = rts_wait_ready(s, wait_ms);
    if (up == 0) { /* not answering: SIGKILL, as nothing is worth keeping */
      kill(s->pid, SIGKILL);
      waitpid(s->pid, NULL, 0);
      s->pid = 0;
    }
    if (o->port > 0)
      break; /* another try on the same port would fail the same way */
  }
  if (up == 1)
    return 0;
  if (err[0] == '\0') {
    char tail[1200];
    rts_log_tail(s->dir, tail, sizeof(tail));
    snprintf(err, errcap, "redis-server (%s) did not start%s", s->exe, tail);
  }
  rts_stop(s);
  s->port = 0;
  return -1;
}
