/* Moves of the data under the workers: the reshard, CLUSTER FAILOVER and
 * master crash of a --cluster run; the SENTINEL FAILOVER and master crash
 * of a --sentinel run. */
#include "topology.h"
#include "fault.h"

/* ---- Redis Cluster: reshard and failover ------------------------------- */

long n_reshards, n_failovers, n_crashes;

/* Wait up to 2 s until resource name has a holder and a live waiter, so
 * the cluster fault meets both; says which it found. */
static const char *hot_state(const char *name) {
  int64_t until = mono_ms() + 2000;
  int held = 0, waited = 0;
  while (!(held && waited) && mono_ms() < until) {
    redisContext *rc = admin_for_res(name);
    if (rc != NULL) {
      redisReply *h = redisCommand(rc, "EXISTS %s:{%s}:h", PREFIX, name);
      redisReply *m = redisCommand(rc, "HLEN %s:{%s}:m", PREFIX, name);
      held = h != NULL && h->type == REDIS_REPLY_INTEGER && h->integer > 0;
      waited = m != NULL && m->type == REDIS_REPLY_INTEGER && m->integer > 0;
      if (h != NULL)
        freeReplyObject(h);
      if (m != NULL)
        freeReplyObject(m);
      redisFree(rc);
    }
    if (!(held && waited))
      sleep_ms(5);
  }
  return held && waited ? "held+waited"
         : held         ? "held"
         : waited       ? "waited"
                        : "idle";
}

/* One command that must succeed (+OK, or any non-error reply). */
static int must(int port, const char *what, redisReply *r) {
  int ok = r != NULL && r->type != REDIS_REPLY_ERROR;
  if (!ok)
    violation("cluster %s on port %d failed: %s", what, port,
              r != NULL ? r->str : "no reply");
  if (r != NULL)
    freeReplyObject(r);
  return ok;
}

/* Move the slot of resource r0 (the hot one: every lane uses it) to
 * another master, keys and all, as redis-cli --cluster reshard does:
 * IMPORTING on the target, MIGRATING on the source, MIGRATE of each key,
 * then SETSLOT NODE everywhere. Logged "Y t cluster-reshard ..." before
 * and after. */
int cluster_reshard(void) {
  char name[16];
  res_name(0, name, sizeof(name));
  const char *state = hot_state(name);
  int slot = cluster_res_slot(name), from = cluster_owner(slot);
  if (slot < 0 || from < 0)
    return 0;
  int to = -1;
  for (int i = 0; i < cl.nnodes && to < 0; i++)
    if (i != from && cl.node[i].server.pid > 0 && cl.node[i].master < 0)
      to = i;
  if (to < 0)
    return 0;
  int fp = cl.node[from].server.port, tp = cl.node[to].server.port;
  const char *fid = cl.node[from].id, *tid = cl.node[to].id;
  dlogf("Y %" PRId64 " cluster-reshard begin slot %d (%s, %s) from %d to %d",
        real_us(), slot, name, state, fp, tp);
  int ok =
      must(tp, "IMPORTING",
           rts_command(tp, "CLUSTER SETSLOT %d IMPORTING %s", slot, fid)) &&
      must(fp, "MIGRATING",
           rts_command(fp, "CLUSTER SETSLOT %d MIGRATING %s", slot, tid));
  long moved = 0;
  redisReply *keys =
      ok ? rts_command(fp, "CLUSTER GETKEYSINSLOT %d 100", slot) : NULL;
  for (size_t i = 0; keys != NULL && keys->type == REDIS_REPLY_ARRAY &&
                     i < keys->elements && ok;
       i++, moved++)
    ok = must(fp, "MIGRATE",
              rts_command(fp, "MIGRATE 127.0.0.1 %d %b 0 5000", tp,
                          keys->element[i]->str, keys->element[i]->len));
  if (keys != NULL)
    freeReplyObject(keys);
  /* The target first, then the source, then the other masters (the
   * masters are the first nodes until a failover, which comes later). */
  int order[RTS_MAX_MASTERS + 1], norder = 0;
  order[norder++] = to;
  order[norder++] = from;
  for (int i = 0; i < cl.nmasters; i++)
    if (i != to && i != from)
      order[norder++] = i;
  for (int k = 0; ok && k < norder; k++) {
    int port = cl.node[order[k]].server.port;
    ok = must(port, "SETSLOT NODE",
              rts_command(port, "CLUSTER SETSLOT %d NODE %s", slot, tid));
  }
  dlogf("Y %" PRId64 " cluster-reshard end slot %d: %ld keys moved, %s",
        real_us(), slot, moved, ok ? "ok" : "failed");
  n_reshards += ok;
  return ok;
}

/* CLUSTER FAILOVER on a replica of the master serving r0's slot; waits
 * (10 s at most) until the replica serves it and the cluster agrees.
 * Logged "Y t cluster-failover ..." before and after. */
int cluster_failover(void) {
  char name[16], err[1024];
  res_name(0, name, sizeof(name));
  const char *state = hot_state(name);
  int slot = cluster_res_slot(name), owner = cluster_owner(slot), heir = -1;
  for (int i = 0; i < cl.nnodes && heir < 0 && owner >= 0; i++)
    if (i != owner && cl.node[i].server.pid > 0 &&
        rts_cluster_slot_owner(&cl, i, slot) == owner) {
      redisReply *r = rts_command(cl.node[i].server.port, "ROLE");
      if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements >= 3 &&
          strcmp(r->element[0]->str, "slave") == 0 &&
          r->element[2]->type == REDIS_REPLY_INTEGER &&
          r->element[2]->integer == cl.node[owner].server.port)
        heir = i;
      if (r != NULL)
        freeReplyObject(r);
    }
  if (heir < 0)
    return 0;
  int hp = cl.node[heir].server.port;
  dlogf("Y %" PRId64 " cluster-failover begin slot %d (%s, %s): replica %d "
        "takes over from %d",
        real_us(), slot, name, state, hp, cl.node[owner].server.port);
  int ok = must(hp, "FAILOVER", rts_command(hp, "CLUSTER FAILOVER"));
  int64_t until = mono_ms() + 10000;
  while (ok && rts_cluster_slot_owner(&cl, heir, slot) != heir &&
         mono_ms() < until)
    sleep_ms(10);
  dlogf("Y %" PRId64 " cluster-failover end: replica %d %s", real_us(), hp,
        rts_cluster_slot_owner(&cl, heir, slot) == heir ? "serves the slot"
                                                        : "did not take over");
  if (rts_cluster_wait_ok(&cl, 10000, err, sizeof(err)) != 0)
    violation("cluster not ok after the failover: %s", err);
  ok = ok && rts_cluster_slot_owner(&cl, heir, slot) == heir;
  n_failovers += ok;
  return ok;
}

/* SIGKILL of the master serving r0's slot (a crash: writes its replica did
 * not get yet are lost with it); its replica takes over after the node
 * timeout and an election. Logged as a restart of the server (B at the
 * kill, S once reaped, H when the replica serves the slot), so the
 * checker allows for the stall as for a restart; exclusion and fencing are
 * checked across it as with AOF. The dead node stays down. */
int cluster_crash_master(void) {
  char name[16], err[1024];
  res_name(0, name, sizeof(name));
  const char *state = hot_state(name);
  int slot = cluster_res_slot(name), owner = cluster_owner(slot);
  if (owner < 0)
    return 0;
  rts_server *victim = &cl.node[owner].server;
  dlogf("Y %" PRId64 " cluster-crash slot %d (%s, %s): kill -9 of master %d",
        real_us(), slot, name, state, victim->port);
  dlogf("B %" PRId64, real_us());
  kill(victim->pid, SIGKILL);
  waitpid(victim->pid, NULL, 0);
  victim->pid = 0;
  dlogf("S %" PRId64, real_us());
  int64_t until = mono_ms() + 20000;
  int heir = -1;
  while (heir < 0 && mono_ms() < until) {
    int o = cluster_owner(slot);
    if (o >= 0 && o != owner)
      heir = o;
    else
      sleep_ms(20);
  }
  if (heir < 0) {
    violation("no replica took over slot %d within 20 s of the kill", slot);
    return 0;
  }
  dlogf("H %" PRId64, real_us());
  dlogf("Y %" PRId64 " cluster-crash end: %d serves slot %d", real_us(),
        cl.node[heir].server.port, slot);
  if (rts_cluster_wait_ok(&cl, 10000, err, sizeof(err)) != 0)
    violation("cluster not ok after the kill of a master: %s", err);
  return 1;
}

/* ---- Sentinel (--sentinel) --------------------------------------------- */

rts_replicated grp; /* the primary and its 2 replicas */
rts_sentinels sen;  /* 3 Sentinels watching them */
long n_sentinel_failovers, n_master_kills;

/* Any server of the group may become the master: its replicas' full
 * syncs then start at once, not after the default 5 s wait for more
 * replicas (which would leave wait_replicas without an acknowledgement
 * that long). */
static void sync_at_once(int port) {
  redisReply *r = rts_command(port, "CONFIG SET repl-diskless-sync-delay 0");
  if (r != NULL)
    freeReplyObject(r);
}

/* A primary with 2 replicas watched by 3 Sentinels; P.port follows the
 * master (the driver's own connections go there), P.seeds holds the
 * Sentinels' ports. */
int sentinel_start(void) {
  char err[1600];
  if (rts_replicated_start(&grp, 2, err, sizeof(err)) != 0 ||
      rts_sentinels_start(&sen, grp.primary.port, 3, 2, NULL, err,
                          sizeof(err)) != 0) {
    fprintf(stderr, "fault: %s\n", err);
    rts_replicated_stop(&grp);
    return -1;
  }
  P.port = grp.primary.port;
  for (int i = 0; i < grp.nreplicas; i++)
    sync_at_once(grp.replicas[i].port);
  size_t n = 0;
  for (int i = 0; i < sen.n; i++)
    n += (size_t)snprintf(P.seeds + n, sizeof(P.seeds) - n, "%s%d",
                          i ? "," : "", sen.s[i].port);
  return 0;
}

/* The server of the group on port, or NULL. */
static rts_server *group_server(int port) {
  if (grp.primary.port == port)
    return &grp.primary;
  for (int i = 0; i < grp.nreplicas; i++)
    if (grp.replicas[i].port == port)
      return &grp.replicas[i];
  return NULL;
}

/* Whether the server on port says role:master. */
static int is_master(int port) { return rts_role_is(port, "master"); }

/* Point every other running server of the group at the new master at
 * once, as the Sentinels will (REPLICAOF, then CLIENT KILL of its normal
 * and pubsub clients, so they reconnect to the master): replicas that take
 * seconds to reattach leave wait_replicas without an acknowledgement that
 * long. */
static void point_replicas_at(int master) {
  rts_server *all[1 + RTS_MAX_REPLICAS] = {&grp.primary};
  for (int i = 0; i < grp.nreplicas; i++)
    all[1 + i] = &grp.replicas[i];
  for (int i = 0; i <= grp.nreplicas; i++) {
    if (all[i]->pid <= 0 || all[i]->port == master)
      continue;
    static const char *const cmds[] = {"REPLICAOF 127.0.0.1 %d",
                                       "CLIENT KILL TYPE normal",
                                       "CLIENT KILL TYPE pubsub"};
    for (int k = 0; k < 3; k++) {
      redisReply *r = rts_command(all[i]->port, cmds[k], master);
      if (r != NULL)
        freeReplyObject(r);
    }
  }
}

/* How long the driver waits for the Sentinels to fail over or settle. A
 * Sentinel whose timer ran late by 2 s or more (a loaded machine) enters
 * TILT mode and does nothing for 30 s (sentinel.c, SENTINEL_TILT_PERIOD);
 * a failover it leads resumes after that, within failover-timeout (5 s,
 * tools/rttopo.c). */
#define SENTINEL_SETTLE_MS 60000

/* Whether Sentinel i says it is in TILT mode (INFO sentinel). */
static int sentinel_tilted(int i) {
  redisReply *r = rts_command(sen.s[i].port, "INFO sentinel");
  int tilt = r != NULL && r->type == REDIS_REPLY_STRING &&
             strstr(r->str, "sentinel_tilt:1") != NULL;
  if (r != NULL)
    freeReplyObject(r);
  return tilt;
}

/* Log once per wait each Sentinel that is in TILT mode (bit i of *seen). */
static void log_tilts(unsigned *seen) {
  for (int i = 0; i < sen.n; i++)
    if (!(*seen & (1u << i)) && sentinel_tilted(i)) {
      *seen |= 1u << i;
      dlogf("Y %" PRId64 " sentinel-tilt: the Sentinel on port %d is in TILT "
            "mode",
            real_us(), sen.s[i].port);
    }
}

/* Wait (SENTINEL_SETTLE_MS at most) until a Sentinel names a master other
 * than old and that server says it is one; P.port follows, and the other
 * servers replicate it. 1 if so. */
static int await_new_master(int old) {
  int64_t until = mono_ms() + SENTINEL_SETTLE_MS, next_tilt_check = 0;
  unsigned tilts = 0;
  while (mono_ms() < until) {
    for (int i = 0; i < sen.n; i++) {
      int port = rts_sentinel_master_port(&sen, i);
      if (port > 0 && port != old && is_master(port)) {
        P.port = port;
        point_replicas_at(port);
        return 1;
      }
    }
    if (mono_ms() >= next_tilt_check) {
      log_tilts(&tilts);
      next_tilt_check = mono_ms() + 1000;
    }
    sleep_ms(20);
  }
  return 0;
}

/* How many worker subscriber connections the server on port has (-1: it
 * does not answer): after a failover, those on the old master hear its
 * replayed notices, and the new master counts them as gone. */
static int worker_subs_at(int port) {
  redisReply *r = rts_command(port, "CLIENT LIST TYPE pubsub");
  int n = -1;
  if (r != NULL && r->type == REDIS_REPLY_STRING) {
    n = 0;
    for (const char *p = r->str; (p = strstr(p, " name=redturn-sub-")); p++)
      n++;
  }
  if (r != NULL)
    freeReplyObject(r);
  return n;
}

/* SENTINEL FAILOVER while r0 is held and waited (if it gets so within
 * 2 s): the master turns replica and a replica takes over, without the
 * Sentinels' agreement that it failed. Logged as a restart (B, S at the
 * command, H once a Sentinel names the new master), so the checker
 * allows for the stall; exclusion and fencing are checked across it. */
static int sentinel_failover(void) {
  char name[16];
  res_name(0, name, sizeof(name));
  const char *state = hot_state(name);
  int old = P.port;
  dlogf("Y %" PRId64 " sentinel-failover begin (%s, %s): master %d", real_us(),
        name, state, old);
  dlogf("B %" PRId64, real_us());
  redisReply *r =
      rts_command(sen.s[0].port, "SENTINEL FAILOVER %s", sen.master_name);
  int ok = must(sen.s[0].port, "SENTINEL FAILOVER", r);
  dlogf("S %" PRId64, real_us());
  if (ok && !await_new_master(old)) {
    violation("no Sentinel failover within %d s of SENTINEL FAILOVER",
              SENTINEL_SETTLE_MS / 1000);
    return 0;
  }
  dlogf("H %" PRId64, real_us());
  dlogf("Y %" PRId64 " sentinel-failover end: master %d; worker subscribers: "
        "%d on the new master, %d on the old one",
        real_us(), P.port, worker_subs_at(P.port), worker_subs_at(old));
  return ok;
}

/* The killed master comes back as a replica of the new one, without the
 * data it had (its copy of an old sync, if any, is removed first). */
static void restart_as_replica(rts_server *victim) {
  char path[RTS_PATH_CAP + 16];
  snprintf(path, sizeof(path), "%s/dump.rdb", victim->dir);
  unlink(path);
  if (rts_respawn(victim) != 0 || rts_wait_ready(victim, 10000) != 1) {
    violation("the killed master on port %d did not come back", victim->port);
    return;
  }
  sync_at_once(victim->port);
  point_replicas_at(P.port);
  dlogf("Y %" PRId64 " sentinel-crash: %d is back as a replica of %d",
        real_us(), victim->port, P.port);
}

/* kill -9 of the master while r0 is held and waited (if it gets so within
 * 2 s): writes its replicas did not get are lost with it; the Sentinels
 * fail over after down-after-milliseconds. Logged as a restart (B at the
 * kill, S once reaped, H once a Sentinel names the new master). Then the
 * killed server comes back as a replica. */
static int sentinel_kill_master(void) {
  char name[16];
  res_name(0, name, sizeof(name));
  const char *state = hot_state(name);
  rts_server *victim = group_server(P.port);
  if (victim == NULL || victim->pid <= 0)
    return 0;
  int old = P.port;
  dlogf("Y %" PRId64 " sentinel-crash (%s, %s): kill -9 of master %d",
        real_us(), name, state, old);
  dlogf("B %" PRId64, real_us());
  kill(victim->pid, SIGKILL);
  waitpid(victim->pid, NULL, 0);
  victim->pid = 0;
  dlogf("S %" PRId64, real_us());
  if (!await_new_master(old)) {
    violation("no Sentinel failover within %d s of killing the master",
              SENTINEL_SETTLE_MS / 1000);
    return 0;
  }
  dlogf("H %" PRId64, real_us());
  dlogf("Y %" PRId64 " sentinel-crash end: master %d", real_us(), P.port);
  restart_as_replica(victim);
  return 1;
}

/* What Sentinel i says of the master (the library's own reading of
 * SENTINEL MASTER): its port (-1: no answer) and whether a failover of it
 * is under way. */
static int sentinel_view(int i, int *failing) {
  redisReply *r =
      rts_command(sen.s[i].port, "SENTINEL MASTER %s", sen.master_name);
  rt__node_addr a = {0};
  uint64_t epoch;
  int port = -1;
  *failing = 0;
  if (r != NULL && rt__sentinel_master_info(r, &a, &epoch, failing) == 0) {
    port = a.port;
    rt__free(a.host);
  }
  if (r != NULL)
    freeReplyObject(r);
  return port;
}

/* A failover the driver did not ask for (the Sentinels took a master
 * starved of CPU for longer than down-after-milliseconds for dead):
 * logged as one (B when first seen, H once every Sentinel names one
 * master that says it is one and none is failing over), so the checker
 * allows for it as for the planned ones. Asked every 100 ms. */
static void sentinel_watch(void) {
  static int64_t next;
  int64_t now = mono_ms();
  if (now < next)
    return;
  next = now + 100;
  int seen = 0, named = -1;
  for (int i = 0; i < sen.n && !seen; i++) {
    int failing, port = sentinel_view(i, &failing);
    if (port > 0 && (failing || port != P.port)) {
      seen = 1;
      named = port;
    }
  }
  if (!seen)
    return;
  int old = P.port;
  dlogf("Y %" PRId64 " sentinel-unplanned begin: master %d (a Sentinel names "
        "%d or fails it over)",
        real_us(), old, named);
  dlogf("B %" PRId64, real_us());
  int64_t until = mono_ms() + SENTINEL_SETTLE_MS, next_tilt_check = 0;
  unsigned tilts = 0;
  char views[160];
  for (;;) {
    int agreed = -1, settled = 1;
    size_t used = 0;
    for (int i = 0; i < sen.n; i++) {
      int failing, port = sentinel_view(i, &failing);
      used += (size_t)snprintf(views + used, sizeof(views) - used, "%s%d%s",
                               i ? ", " : "", port, failing ? " failing" : "");
      if (used >= sizeof(views))
        used = sizeof(views) - 1;
      if (port <= 0)
        continue;
      if (failing || (agreed > 0 && port != agreed))
        settled = 0;
      agreed = port;
    }
    if (settled && agreed > 0 && is_master(agreed)) {
      P.port = agreed;
      if (agreed != old)
        point_replicas_at(agreed);
      break;
    }
    if (mono_ms() >= until) {
      violation("an unplanned Sentinel failover of %d did not settle within "
                "%d s (the Sentinels name: %s)",
                old, SENTINEL_SETTLE_MS / 1000, views);
      break;
    }
    if (mono_ms() >= next_tilt_check) {
      log_tilts(&tilts);
      next_tilt_check = mono_ms() + 1000;
    }
    sleep_ms(20);
  }
  dlogf("H %" PRId64, real_us());
  dlogf("Y %" PRId64 " sentinel-unplanned end: master %d", real_us(), P.port);
}

/* --sentinel: a SENTINEL FAILOVER at 30% of the run, a kill -9 of the
 * master at 60% (each once), and any failover the Sentinels make on their
 * own logged as one. */
void sentinel_tick(int64_t t0) {
  static int failed_over, crashed;
  sentinel_watch();
  int64_t now = mono_ms(), run = (int64_t)P.seconds * 1000;
  if (!failed_over && now >= t0 + run * 30 / 100) {
    failed_over = 1;
    n_sentinel_failovers += sentinel_failover();
  }
  if (!crashed && now >= t0 + run * 60 / 100) {
    crashed = 1;
    n_master_kills += sentinel_kill_master();
  }
}
