/* The fault kinds other than the network: SIGKILL of holders, waiters
 * and random workers, CLIENT KILL, CLIENT PAUSE, key loss, the restart;
 * and the choice of the next fault. */
#include "fault.h"

const char *const fk_name[FK_COUNT] = {
    "kill-holder", "kill-waiter", "kill-random",   "client-kill", "pause",
    "net-delay",   "net-hold",    "net-partition", "net-cut",     "del-q",
    "del-m",       "del-all",     "flushall",      "del-h",       "del-d"};
/* How often each kind is picked, in percent (after every kind was injected
 * once: see inject_fault). */
static const int fk_weight[FK_COUNT] = {16, 12, 5, 12, 4, 10, 9, 5,
                                        8,  6,  5, 4,  1, 2,  1};
/* --keyloss: key loss of each key alone, next to crashed holders (whose
 * leases run on) so that a lost key that freed permits early shows. */
static const int fk_weight_keyloss[FK_COUNT] = {25, 3,  0,  3, 0, 0,  0, 0,
                                                0,  10, 10, 4, 1, 14, 30};
long fk_done[FK_COUNT];
/* ---- Redis Cluster (--cluster) ----------------------------------------- */

/* The slot of resource name's keys (they share the hash tag {name}), asked
 * of a running node; -1 on error. */
int cluster_res_slot(const char *name) {
  int slot = -1;
  for (int i = 0; i < cl.nnodes && slot < 0; i++) {
    if (cl.node[i].server.pid <= 0)
      continue;
    redisReply *r = rts_command(cl.node[i].server.port,
                                "CLUSTER KEYSLOT %s:{%s}:h", PREFIX, name);
    if (r != NULL && r->type == REDIS_REPLY_INTEGER)
      slot = (int)r->integer;
    if (r != NULL)
      freeReplyObject(r);
  }
  return slot;
}

/* The index in cl.node of the node serving slot, as a running node sees
 * it; -1 if none answers. */
int cluster_owner(int slot) {
  for (int i = 0; i < cl.nnodes; i++) {
    if (cl.node[i].server.pid <= 0)
      continue;
    int owner = rts_cluster_slot_owner(&cl, i, slot);
    if (owner >= 0)
      return owner;
  }
  return -1;
}

/* A connection to the server holding resource name's keys: the node
 * serving its slot in a cluster, the server otherwise. */
redisContext *admin_for_res(const char *name) {
  if (!P.cluster)
    return admin();
  int owner = cluster_owner(cluster_res_slot(name));
  return owner < 0 ? NULL : admin_at(cl.node[owner].server.port);
}

/* A random running node's port (the server's without --cluster). */
static int random_node_port(void) {
  if (!P.cluster)
    return P.port;
  int i = (int)(next_rand(&drnd) % (uint64_t)cl.nnodes);
  for (int k = 0; k < cl.nnodes; k++, i = (i + 1) % cl.nnodes)
    if (cl.node[i].server.pid > 0)
      return cl.node[i].server.port;
  return P.port;
}

static long n_kills, n_kill_holder, n_kill_waiter, n_conn_kills, n_pauses;
/* CLIENT PAUSEs of 250 ms or more: the stall probe must see them. */
long n_long_pauses;

/* SIGKILL the worker of slot s; what says why (and what it held). */
static int kill_slot(int s, const char *what) {
  slot_t *sl = &slots[s];
  if (sl->pid <= 0 || sl->killed)
    return 0;
  dlogf("K %" PRId64 " %d %d %d %s", real_us(), s, sl->gen, (int)sl->pid, what);
  kill(sl->pid, SIGKILL);
  sl->killed = 1;
  n_kills++;
  /* A dead host's connections close: held or delayed bytes never arrive. */
  net_end(s, 1);
  return 1;
}

/* Kill the process holding mutex r (name): the request in the record h,
 * "<fence>:<deadline>:<grant>:<id>". 1 if one was killed. */
static int kill_mutex_holder(redisContext *rc, int r, const char *name) {
  char what[200];
  int done = 0;
  redisReply *h = redisCommand(rc, "GET %s:{%s}:h", PREFIX, name);
  if (h != NULL && h->type == REDIS_REPLY_STRING) {
    /* Three ':' before the id; the id itself contains one. */
    const char *p = h->str, *end = h->str + h->len;
    int colons = 0;
    while (p < end && colons < 3)
      if (*p++ == ':')
        colons++;
    uint64_t fence = 0;
    long long deadline = 0, grant = 0;
    if (colons == 3 && sscanf(h->str, "%" SCNu64 ":%lld:%lld:", &fence,
                              &deadline, &grant) == 3) {
      int s = slot_of_client(p, (size_t)(end - p));
      if (s >= 0 && !slots[s].killed) {
        snprintf(what, sizeof(what), "holder %d %.*s %" PRIu64 " %lld %lld", r,
                 (int)(end - p), p, fence, deadline, grant);
        done = kill_slot(s, what);
      }
    }
  }
  if (h != NULL)
    freeReplyObject(h);
  return done;
}

/* Kill the process of one random holder of the pool resource r
 * (name): the hash h maps each holder id to "<fence>:<granted>:<permits>
 * [:<label>]" (its other fields are one byte long), the zset D to its
 * deadline. Logged as a mutex holder's record. 1 if one was killed. */
static int kill_multi_holder(redisContext *rc, int r, const char *name,
                             int latest) {
  char what[200];
  int done = 0;
  redisReply *h = redisCommand(rc, "HGETALL %s:{%s}:h", PREFIX, name);
  if (h == NULL || h->type != REDIS_REPLY_ARRAY || h->elements < 2) {
    if (h != NULL)
      freeReplyObject(h);
    return 0;
  }
  size_t holders = 0;
  for (size_t i = 0; i + 1 < h->elements; i += 2)
    holders += h->element[i]->len > 1;
  size_t pick = holders ? (size_t)(next_rand(&drnd) % holders) : 0;
  /* latest: the holder whose lease ends last (the longest left to run). */
  redisReply *last =
      latest ? redisCommand(rc, "ZRANGE %s:{%s}:D -1 -1", PREFIX, name) : NULL;
  int want_last =
      last != NULL && last->type == REDIS_REPLY_ARRAY && last->elements == 1;
  for (size_t i = 0; i + 1 < h->elements && holders; i += 2) {
    const redisReply *id = h->element[i], *rec = h->element[i + 1];
    if (id->len <= 1)
      continue;
    if (want_last ? id->len != last->element[0]->len ||
                        memcmp(id->str, last->element[0]->str, id->len) != 0
                  : pick-- > 0)
      continue;
    uint64_t fence = 0;
    long long grant = 0;
    redisReply *d =
        redisCommand(rc, "ZSCORE %s:{%s}:D %b", PREFIX, name, id->str, id->len);
    long long deadline =
        d != NULL && d->type == REDIS_REPLY_STRING ? atoll(d->str) : 0;
    int s = slot_of_client(id->str, id->len);
    if (deadline > 0 && s >= 0 && !slots[s].killed &&
        sscanf(rec->str, "%" SCNu64 ":%lld:", &fence, &grant) == 2) {
      snprintf(what, sizeof(what), "holder %d %.*s %" PRIu64 " %lld %lld", r,
               (int)id->len, id->str, fence, deadline, grant);
      done = kill_slot(s, what);
    }
    if (d != NULL)
      freeReplyObject(d);
    break;
  }
  if (last != NULL)
    freeReplyObject(last);
  freeReplyObject(h);
  return done;
}

static int kill_holder(redisContext *rc, int r, const char *name) {
  return res_kind(r) == RK_MUTEX ? kill_mutex_holder(rc, r, name)
                                 : kill_multi_holder(rc, r, name, 0);
}

/* Kill the process of a random live waiter of resource r (name): the
 * members of m, in q order. 1 if one was killed. */
static int kill_waiter(redisContext *rc, int r, const char *name) {
  char what[200];
  int done = 0;
  /* A mutex queues in q and m, the other kinds in Q and M. */
  int multi = res_kind(r) != RK_MUTEX;
  redisReply *q = redisCommand(rc, "LRANGE %s:{%s}:%s 0 -1", PREFIX, name,
                               multi ? "Q" : "q");
  if (q != NULL && q->type == REDIS_REPLY_ARRAY && q->elements > 0) {
    /* HMGET m id... : the live ones (canceled entries stay in q). */
    size_t n = q->elements;
    const char **argv = calloc(n + 2, sizeof(char *));
    size_t *lens = calloc(n + 2, sizeof(size_t));
    char key[64];
    int kl = snprintf(key, sizeof(key), "%s:{%s}:%s", PREFIX, name,
                      multi ? "M" : "m");
    redisReply *m = NULL;
    if (argv != NULL && lens != NULL) {
      argv[0] = "HMGET";
      lens[0] = 5;
      argv[1] = key;
      lens[1] = (size_t)kl;
      for (size_t i = 0; i < n; i++) {
        argv[i + 2] = q->element[i]->str;
        lens[i + 2] = q->element[i]->len;
      }
      m = redisCommandArgv(rc, (int)n + 2, argv, lens);
    }
    if (m != NULL && m->type == REDIS_REPLY_ARRAY && m->elements == n) {
      size_t live = 0;
      for (size_t i = 0; i < n; i++)
        live += m->element[i]->type == REDIS_REPLY_STRING;
      if (live > 0) {
        size_t pick = (size_t)(next_rand(&drnd) % live);
        for (size_t i = 0; i < n; i++) {
          if (m->element[i]->type != REDIS_REPLY_STRING)
            continue;
          if (pick-- > 0)
            continue;
          int s = slot_of_client(q->element[i]->str, q->element[i]->len);
          if (s >= 0 && !slots[s].killed) {
            snprintf(what, sizeof(what), "waiter %d %s", r, q->element[i]->str);
            done = kill_slot(s, what);
          }
          break;
        }
      }
    }
    if (m != NULL)
      freeReplyObject(m);
    free(argv);
    free(lens);
  }
  if (q != NULL)
    freeReplyObject(q);
  return done;
}

/* Kill the holder (want_holder) or a waiter of a random resource. */
static int kill_in_queue(int want_holder) {
  int r = (int)(next_rand(&drnd) % (uint64_t)P.resources);
  char name[16];
  res_name(r, name, sizeof(name));
  redisContext *rc = admin_for_res(name);
  if (rc == NULL)
    return 0;
  int done = want_holder ? kill_holder(rc, r, name) : kill_waiter(rc, r, name);
  if (done && want_holder)
    n_kill_holder++;
  else if (done)
    n_kill_waiter++;
  redisFree(rc);
  return done;
}

static int kill_random(void) {
  int s = (int)(next_rand(&drnd) % (uint64_t)P.workers);
  return kill_slot(s, "random");
}

/* CLIENT KILL worker s's connection of kind (cmd or sub) on the server at
 * port, if it has one there. */
static int kill_connection_at(int port, int s, const char *kind) {
  slot_t *sl = &slots[s];
  redisContext *rc = admin_at(port);
  if (rc == NULL)
    return 0;
  char want[64];
  snprintf(want, sizeof(want), " name=redturn-%s-%s ", kind, sl->cid);
  redisReply *r = redisCommand(rc, "CLIENT LIST");
  long long id = -1;
  int done = 0;
  if (r != NULL && r->type == REDIS_REPLY_STRING) {
    const char *p = strstr(r->str, want);
    if (p != NULL) {
      /* The line starts with "id=N". */
      const char *line = p;
      while (line > r->str && line[-1] != '\n')
        line--;
      if (strncmp(line, "id=", 3) == 0)
        id = strtoll(line + 3, NULL, 10);
    }
  }
  if (r != NULL)
    freeReplyObject(r);
  if (id >= 0) {
    int64_t t = real_us();
    r = redisCommand(rc, "CLIENT KILL ID %lld", id);
    if (r != NULL && r->type == REDIS_REPLY_INTEGER && r->integer == 1) {
      dlogf("L %" PRId64 " %d %d %s %s", t, s, sl->gen, kind, sl->cid);
      n_conn_kills++;
      done = 1;
    }
    if (r != NULL)
      freeReplyObject(r);
  }
  redisFree(rc);
  return done;
}

/* CLIENT KILL one connection of a random worker; in a cluster, on the
 * first node (from a random one) where it has one of that kind. */
static int kill_connection(void) {
  int s = (int)(next_rand(&drnd) % (uint64_t)P.workers);
  if (slots[s].pid <= 0 || !slots[s].cid[0])
    return 0;
  const char *kind = next_rand(&drnd) % 2 ? "cmd" : "sub";
  if (!P.cluster)
    return kill_connection_at(P.port, s, kind);
  int i = (int)(next_rand(&drnd) % (uint64_t)cl.nnodes);
  for (int k = 0; k < cl.nnodes; k++, i = (i + 1) % cl.nnodes)
    if (cl.node[i].server.pid > 0 &&
        kill_connection_at(cl.node[i].server.port, s, kind))
      return 1;
  return 0;
}

/* CLIENT PAUSE of the server, in a cluster of a random node. */
static int pause_server(void) {
  redisContext *rc = admin_at(random_node_port());
  if (rc == NULL)
    return 0;
  int ms = 100 + (int)(next_rand(&drnd) % 300);
  int64_t t = real_us();
  redisReply *r = redisCommand(rc, "CLIENT PAUSE %d", ms);
  int done = 0;
  if (r != NULL && r->type == REDIS_REPLY_STATUS) {
    dlogf("A %" PRId64 " %d", t, ms);
    n_pauses++;
    n_long_pauses += ms >= 250;
    done = 1;
  }
  if (r != NULL)
    freeReplyObject(r);
  redisFree(rc);
  return done;
}

/* ---- key loss ------------------------------------------------------------ */

/* A resource of a pool kind for del-d (D only exists there): one
 * with holders right now if any (its D is what a loss could hurt). */
static int multi_res(redisContext *probe) {
  int first = -1;
  for (int i = 0; i < P.resources; i++) {
    int r = (int)((next_rand(&drnd) + (uint64_t)i) % (uint64_t)P.resources);
    if (res_kind(r) == RK_MUTEX)
      continue;
    if (first < 0)
      first = r;
    char name[16];
    res_name(r, name, sizeof(name));
    redisReply *x = probe != NULL
                        ? redisCommand(probe, "EXISTS %s:{%s}:D", PREFIX, name)
                        : NULL;
    int held = x != NULL && x->type == REDIS_REPLY_INTEGER && x->integer > 0;
    if (x != NULL)
      freeReplyObject(x);
    if (held)
      return r;
  }
  return first;
}

static int key_loss(int kind) {
  int r = kind == FK_FLUSHALL ? -1
                              : (int)(next_rand(&drnd) % (uint64_t)P.resources);
  if (kind == FK_DEL_D) {
    char first[16];
    res_name(0, first, sizeof(first));
    redisContext *probe = admin_for_res(first);
    r = multi_res(probe);
    if (probe != NULL)
      redisFree(probe);
    if (r < 0)
      return 0;
  }
  char name[16];
  res_name(r < 0 ? 0 : r, name, sizeof(name));
  redisContext *rc = admin_for_res(name);
  if (rc == NULL)
    return 0;
  const char *what = kind == FK_DEL_Q     ? "q"
                     : kind == FK_DEL_M   ? "m"
                     : kind == FK_DEL_H   ? "h"
                     : kind == FK_DEL_D   ? "d"
                     : kind == FK_DEL_ALL ? "all"
                                          : "flushall";
  /* The other kinds' queue and members are Q and M, their holders the
   * hash h, and D their deadlines. A lost h is a forced release of its
   * holders (as a mutex's); a lost D frees nothing while a lease may run
   * (lua/lib/pool.lua, restore_deadlines). */
  int multi = r >= 0 && res_kind(r) != RK_MUTEX;
  /* --keyloss: half the time its holder whose lease ends last crashes
   * first, so a lease runs on that only h and D know of, and then D goes:
   * any lease granted after it is shorter. */
  if (kind == FK_DEL_D && P.keyloss && next_rand(&drnd) % 2 &&
      kill_multi_holder(rc, r, name, 1))
    n_kill_holder++;
  int64_t t0 = real_us();
  redisReply *x;
  if (kind == FK_DEL_H)
    x = redisCommand(rc, "DEL %s:{%s}:h", PREFIX, name);
  else if (kind == FK_DEL_D)
    x = redisCommand(rc, "DEL %s:{%s}:D", PREFIX, name);
  else if (kind == FK_DEL_Q)
    x = redisCommand(rc, "DEL %s:{%s}:%s", PREFIX, name, multi ? "Q" : "q");
  else if (kind == FK_DEL_M)
    x = redisCommand(rc, "DEL %s:{%s}:%s", PREFIX, name, multi ? "M" : "m");
  else if (kind == FK_DEL_ALL && multi)
    x = redisCommand(rc, "DEL %s:{%s}:Q %s:{%s}:h %s:{%s}:M %s:{%s}:D", PREFIX,
                     name, PREFIX, name, PREFIX, name, PREFIX, name);
  else if (kind == FK_DEL_ALL)
    x = redisCommand(rc, "DEL %s:{%s}:q %s:{%s}:h %s:{%s}:m", PREFIX, name,
                     PREFIX, name, PREFIX, name);
  else
    x = redisCommand(rc, "FLUSHALL");
  int64_t t1 = real_us();
  int done = 0;
  if (x != NULL &&
      (x->type == REDIS_REPLY_INTEGER || x->type == REDIS_REPLY_STATUS)) {
    dlogf("X %" PRId64 " %" PRId64 " %d %s %lld", t0, t1, r, what,
          x->type == REDIS_REPLY_INTEGER ? x->integer : -1LL);
    done = 1;
  }
  if (x != NULL)
    freeReplyObject(x);
  redisFree(rc);
  return done;
}

long n_restarts;

int restart_server(void) {
  dlogf("B %" PRId64, real_us());
  /* SIGTERM: the server saves its AOF and exits. */
  rts_terminate(&redis);
  /* The server keeps serving for a while after SIGTERM: only now are its
   * grants over. */
  dlogf("S %" PRId64, real_us());
  if (redis_start_again() != 0) {
    violation("redis-server did not come back on port %d", P.port);
    return -1;
  }
  dlogf("H %" PRId64, real_us());
  n_restarts++;
  return 0;
}

/* Whether fault kind applies to this run: the network faults need the
 * proxies; FLUSHALL is one server's (a cluster run has no such fault). */
int kind_applies(int k) {
  if (P.direct && k >= FK_NET_DELAY && k <= FK_NET_CUT)
    return 0;
  if (k == FK_DEL_D && !P.mixed)
    return 0; /* only the pool kinds have D */
  return !(P.cluster && k == FK_FLUSHALL);
}

static int try_fault(int kind) {
  switch (kind) {
  case FK_KILL_HOLDER:
    return kill_in_queue(1);
  case FK_KILL_WAITER:
    return kill_in_queue(0);
  case FK_KILL_RANDOM:
    return kill_random();
  case FK_CONN_KILL:
    return kill_connection();
  case FK_PAUSE:
    return pause_server();
  case FK_NET_DELAY:
  case FK_NET_HOLD:
  case FK_NET_PARTITION:
  case FK_NET_CUT:
    return P.direct ? 0 : net_fault(kind);
  default:
    return key_loss(kind);
  }
}

/* One fault. Until every kind was injected once, the first kind not yet
 * injected is tried (so that every run, even a short one, has each kind);
 * after that, kinds by weight. A fault that finds nothing to act on (no
 * holder right now) falls back to a CLIENT KILL. */
void inject_fault(void) {
  int kind = -1;
  for (int k = 0; k < FK_COUNT && kind < 0; k++)
    if (fk_done[k] == 0 && kind_applies(k))
      kind = k;
  if (kind < 0) {
    const int *weight = P.keyloss ? fk_weight_keyloss : fk_weight;
    int pick = (int)(next_rand(&drnd) % 100);
    for (kind = 0; kind < FK_COUNT - 1 && pick >= weight[kind]; kind++)
      pick -= weight[kind];
    if (!kind_applies(kind))
      kind = FK_CONN_KILL;
  }
  if (try_fault(kind))
    fk_done[kind]++;
  else if (kill_connection())
    fk_done[FK_CONN_KILL]++;
}
