/* The fault driver's state and its means: its log, admin connections,
 * the server under test, starting and reaping workers, and the pattern
 * observer. */
#include "fault.h"

const char *const nf_name[] = {"none", "delay", "hold", "partition"};

slot_t slots[MAX_WORKERS];
net_t nets[MAX_WORKERS];
int dlog = -1;
uint64_t drnd;
rts_server redis; /* the server under test */
rts_cluster cl;   /* --cluster: the cluster under test */
static long driver_violations;
int stopping_phase;
char self_exe[1024];

void dlogf(const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  logf_fd(dlog, "%s", buf);
}

void violation(const char *fmt, ...) {
  char buf[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  driver_violations++;
  dlogf("V %" PRId64 " %s", real_us(), buf);
  fprintf(stderr, "fault: VIOLATION: %s\n", buf);
}

static void set_cloexec(int fd) {
  int fl = fcntl(fd, F_GETFD);
  if (fl >= 0)
    fcntl(fd, F_SETFD, fl | FD_CLOEXEC);
}

redisContext *admin_at(int port) {
  struct timeval tv = {0, 500000};
  redisContext *rc = redisConnectWithTimeout("127.0.0.1", port, tv);
  if (rc == NULL)
    return NULL;
  if (rc->err) {
    redisFree(rc);
    return NULL;
  }
  set_cloexec(rc->fd);
  struct timeval ctv = {2, 0};
  redisSetTimeout(rc, ctv);
  return rc;
}

redisContext *admin(void) { return admin_at(P.port); }

char redis_dir[512];

/* --cluster: 3 masters, each with a replica; P.port is the first master's
 * (the driver's own connections start there), P.seeds the masters'. */
int cluster_start(void) {
  char err[1600];
  if (rts_cluster_start(&cl, 3, 1, 0, err, sizeof(err)) != 0) {
    fprintf(stderr, "fault: %s\n", err);
    return -1;
  }
  P.port = cl.node[0].server.port;
  size_t n = 0;
  for (int i = 0; i < cl.nmasters; i++)
    n += (size_t)snprintf(P.seeds + n, sizeof(P.seeds) - n, "%s%d",
                          i ? "," : "", cl.node[i].server.port);
  return 0;
}

/* Start the server (10 s at most until it answers and is done loading);
 * everything the child does between fork and exec is async-signal-safe
 * (tools/rtserver.h), as this process has the proxies' threads. */
int redis_start(void) {
  const char *args[10 + RTT_TLS_NARGS] = {"--appendonly",
                                          P.persist ? "yes" : "no",
                                          "--appendfsync",
                                          "everysec",
                                          "--maxmemory",
                                          P.evict ? "4mb" : "512mb",
                                          "--maxmemory-policy",
                                          P.evict ? "allkeys-lru"
                                                  : "noeviction",
                                          "--notify-keyspace-events",
                                          P.evict ? "Ee" : ""};
  char tls_port[16];
  rts_options o;
  char err[1600];
  memset(&o, 0, sizeof(o));
  o.dir = redis_dir;
  o.extra = args;
  /* A free TLS port may be taken by another process before the server
   * binds it (test commands side by side): then another one. */
  for (int attempt = 1;; attempt++) {
    if (P.tls && tls_server_args(args + 10, tls_port, sizeof(tls_port)) != 0)
      return -1;
    if (rts_start(&redis, &o, err, sizeof(err)) == 0)
      break;
    if (!P.tls || attempt == 5 || !strstr(err, "Address already in use")) {
      fprintf(stderr, "fault: %s\n", err);
      return -1;
    }
  }
  P.port = redis.port;
  return 0;
}

/* The same server again: its port, directory (AOF) and arguments. */
int redis_start_again(void) {
  if (rts_respawn(&redis) != 0)
    return -1;
  return rts_wait_ready(&redis, 10000) == 1 ? 0 : -1;
}

/* The port of Redis the workers use: its TLS port with --tls. */
int redis_client_port(void) { return P.tls ? P.tls_port : P.port; }

/* The port worker s connects to: its proxy, or Redis itself. */
static int worker_port(int s) {
  return nets[s].p != NULL ? rtt_proxy_port(nets[s].p) : redis_client_port();
}

void worker_spawn(int s) {
  slot_t *sl = &slots[s];
  int fds[2];
  if (pipe(fds) != 0) {
    sl->restart_at = mono_ms() + 200;
    return;
  }
  set_cloexec(fds[0]);
  set_cloexec(fds[1]);
  sl->gen++;
  /* The worker's command line: the driver's options in worker mode. */
  char a_slot[16], a_gen[16], a_fd[16], a_port[16], a_lanes[16], a_res[16],
      a_lease[24], a_seed[24], a_tmo[24];
  snprintf(a_slot, sizeof(a_slot), "%d", s);
  snprintf(a_gen, sizeof(a_gen), "%d", sl->gen);
  snprintf(a_fd, sizeof(a_fd), "%d", fds[1]);
  snprintf(a_port, sizeof(a_port), "%d", worker_port(s));
  snprintf(a_lanes, sizeof(a_lanes), "%d", P.lanes);
  snprintf(a_res, sizeof(a_res), "%d", P.resources);
  snprintf(a_lease, sizeof(a_lease), "%" PRId64, P.lease_ms);
  snprintf(a_seed, sizeof(a_seed), "%" PRIu64, P.seed);
  snprintf(a_tmo, sizeof(a_tmo), "%" PRId64, P.cmd_timeout_ms);
  const char *argv[32] = {
      self_exe,      "--worker",      a_slot,    a_gen,     a_fd,
      a_port,        "--dir",         P.dir,     "--lanes", a_lanes,
      "--resources", a_res,           "--lease", a_lease,   "--seed",
      a_seed,        "--cmd-timeout", a_tmo};
  /* The flags last, those that are set. */
  int argc = 18;
  if (P.slow)
    argv[argc++] = "--slow";
  if (P.evict)
    argv[argc++] = "--evict";
  if (P.tls)
    argv[argc++] = "--tls";
  if (P.mixed)
    argv[argc++] = "--mixed";
  if (P.multi)
    argv[argc++] = "--multi";
  if (P.observe)
    argv[argc++] = "--observe";
  if (judge_on)
    argv[argc++] = "--judge";
  if (P.cluster || P.sentinel) {
    argv[argc++] = P.cluster ? "--cluster" : "--sentinel";
    argv[argc++] = "--seeds";
    argv[argc++] = P.seeds;
  }
  char a_wait[16];
  if (P.wait_replicas > 0) {
    snprintf(a_wait, sizeof(a_wait), "%d", P.wait_replicas);
    argv[argc++] = "--wait-replicas";
    argv[argc++] = a_wait;
  }
  argv[argc] = NULL;
  /* The child keeps SIGTERM blocked (over the exec) until its handler is
   * installed. */
  sigset_t term, old;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  sigprocmask(SIG_BLOCK, &term, &old);
  pid_t pid = fork();
  if (pid == 0) {
    die_with_parent();
    fcntl(fds[1], F_SETFD, 0); /* the id pipe survives the exec */
    execv(self_exe, (char *const *)argv);
    _exit(127);
  }
  sigprocmask(SIG_SETMASK, &old, NULL);
  close(fds[1]);
  if (pid < 0) {
    close(fds[0]);
    sl->restart_at = mono_ms() + 200;
    return;
  }
  fcntl(fds[0], F_SETFL, O_NONBLOCK);
  sl->pid = pid;
  sl->idfd = fds[0];
  sl->cid[0] = '\0';
  sl->killed = 0;
  sl->restart_at = 0;
  dlogf("W %" PRId64 " %d %d %d", real_us(), s, sl->gen, (int)pid);
}

void read_ids(void) {
  for (int s = 0; s < P.workers; s++) {
    slot_t *sl = &slots[s];
    if (sl->idfd < 0)
      continue;
    char buf[64];
    ssize_t n = read(sl->idfd, buf, sizeof(buf) - 1);
    if (n >= 32) {
      memcpy(sl->cid, buf, 32);
      sl->cid[32] = '\0';
    }
    if (n > 0 || (n == 0) || (n < 0 && errno != EAGAIN && errno != EINTR)) {
      close(sl->idfd);
      sl->idfd = -1;
    }
  }
}

/* ---- the pattern observer -------------------------------------------------- */

static redisContext *obs;
long obs_messages, obs_subscribes;
long evicted_lock_keys; /* eviction run: keys of the prefix evicted */
static int64_t obs_retry_at;

void observer_open(void) {
  if (obs != NULL || mono_ms() < obs_retry_at)
    return;
  obs_retry_at = mono_ms() + 200;
  redisContext *rc = admin();
  if (rc == NULL)
    return;
  redisReply *r = redisCommand(rc, "PSUBSCRIBE %s:*", PREFIX);
  if (r == NULL || r->type != REDIS_REPLY_ARRAY) {
    if (r != NULL)
      freeReplyObject(r);
    redisFree(rc);
    return;
  }
  freeReplyObject(r);
  if (P.evict) {
    /* The eviction run also counts the lock keys Redis evicts. */
    r = redisCommand(rc, "PSUBSCRIBE __keyevent@*__:evicted");
    if (r != NULL)
      freeReplyObject(r);
  }
  obs = rc;
  obs_subscribes++;
  dlogf("J %" PRId64 " psubscribe %s:*", real_us(), PREFIX);
}

/* Close the observer's connection (after its last drain). */
void observer_close(void) {
  if (obs != NULL)
    redisFree(obs);
  obs = NULL;
}

/* Read whatever the observer got, without blocking. */
void observer_drain(void) {
  if (obs == NULL) {
    observer_open();
    return;
  }
  for (;;) {
    struct pollfd pfd = {obs->fd, POLLIN, 0};
    if (poll(&pfd, 1, 0) <= 0)
      break;
    if (redisBufferRead(obs) != REDIS_OK) {
      redisFree(obs); /* the server restarted: subscribe again */
      obs = NULL;
      return;
    }
    void *reply = NULL;
    while (redisGetReplyFromReader(obs, &reply) == REDIS_OK && reply != NULL) {
      redisReply *r = reply;
      if (r->type == REDIS_REPLY_ARRAY && r->elements == 4 &&
          r->element[0]->type == REDIS_REPLY_STRING &&
          strcmp(r->element[0]->str, "pmessage") == 0 &&
          r->element[1]->type == REDIS_REPLY_STRING &&
          r->element[3]->type == REDIS_REPLY_STRING) {
        if (strncmp(r->element[1]->str, "__keyevent", 10) != 0)
          obs_messages++;
        else if (strncmp(r->element[3]->str, PREFIX ":", sizeof(PREFIX)) == 0)
          evicted_lock_keys++;
      }
      freeReplyObject(r);
      reply = NULL;
    }
  }
}

/* ---- reaping ------------------------------------------------------------- */

long n_connect_fail;

/* Collect exited workers; schedule restarts. */
void reap_workers(void) {
  for (int s = 0; s < P.workers; s++) {
    slot_t *sl = &slots[s];
    int st;
    if (sl->pid <= 0 || waitpid(sl->pid, &st, WNOHANG) != sl->pid)
      continue;
    int64_t now = real_us();
    if (WIFSIGNALED(st)) {
      int sig = WTERMSIG(st);
      dlogf("D %" PRId64 " %d %d %d signal %d %s", now, s, sl->gen,
            (int)sl->pid, sig,
            sl->killed && sig == SIGKILL ? "expected" : "unexpected");
      if (!(sl->killed && sig == SIGKILL))
        violation("worker %d.%d (pid %d) died of signal %d", s, sl->gen,
                  (int)sl->pid, sig);
    } else {
      int code = WEXITSTATUS(st);
      dlogf("D %" PRId64 " %d %d %d exit %d %s", now, s, sl->gen, (int)sl->pid,
            code, code == 0 && stopping_phase ? "expected" : "unexpected");
      if (code == 3 && !stopping_phase)
        n_connect_fail++; /* first connect failed (server restarting) */
      else if (code != 0 || !stopping_phase)
        violation("worker %d.%d (pid %d) exited with code %d%s", s, sl->gen,
                  (int)sl->pid, code,
                  code == 23 ? " (LeakSanitizer found leaks)" : "");
    }
    net_end(s, 1);
    if (sl->idfd >= 0) {
      close(sl->idfd);
      sl->idfd = -1;
    }
    sl->pid = 0;
    if (!stopping_phase)
      sl->restart_at = mono_ms() + 50 + (int64_t)(next_rand(&drnd) % 250);
  }
}

int slot_of_client(const char *cid, size_t len) {
  for (int s = 0; s < P.workers; s++)
    if (slots[s].pid > 0 && len >= 32 && slots[s].cid[0] &&
        memcmp(slots[s].cid, cid, 32) == 0)
      return s;
  return -1;
}
