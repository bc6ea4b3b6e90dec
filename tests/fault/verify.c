/* The driver's own checks: TLS on every worker connection, the eviction
 * run (filling the server, a refusing client) and the key space after
 * the run. */
#include "fault.h"

/* ---- TLS: the workers' connections ------------------------------------- */

/* With --tls, every connection of a worker (named redturn-cmd-<id> or
 * redturn-sub-<id>) must be on the TLS port: the run proves nothing about
 * TLS otherwise. Checked in CLIENT LIST (laddr is the server's end). */
void tls_check_clients(void) {
  redisContext *rc = admin();
  if (rc == NULL)
    return;
  redisReply *r = redisCommand(rc, "CLIENT LIST");
  long on_tls = 0, other = 0;
  char laddr[40];
  snprintf(laddr, sizeof(laddr), " laddr=127.0.0.1:%d ", P.tls_port);
  if (r != NULL && r->type == REDIS_REPLY_STRING) {
    for (char *line = r->str; line != NULL && *line != '\0';) {
      char *eol = strchr(line, '\n');
      if (eol != NULL)
        *eol = '\0';
      if (strstr(line, " name=redturn-") != NULL) {
        if (strstr(line, laddr) != NULL)
          on_tls++;
        else
          other++;
      }
      line = eol != NULL ? eol + 1 : NULL;
    }
  }
  if (r != NULL)
    freeReplyObject(r);
  redisFree(rc);
  dlogf("Y %" PRId64 " tls: %ld worker connections on the TLS port, %ld "
        "elsewhere",
        real_us(), on_tls, other);
  if (on_tls == 0 || other != 0)
    violation("with --tls, %ld worker connections on the TLS port and %ld "
              "elsewhere",
              on_tls, other);
}

/* ---- the eviction run ------------------------------------------------------ */

/* With --evict the server runs with allkeys-lru and a small maxmemory, the
 * workers set allow_eviction, and the driver keeps writing filler keys
 * (outside the prefix), so Redis evicts keys all along, lock keys among
 * them. No other fault is injected. The library promises little then
 * (an evicted holder record frees a lock early): the checker holds it to
 * fences that never go backwards and waits that always end. */
redisContext *filler;
long long fill_n;

void fill_tick(void) {
  static char val[4096];
  if (filler == NULL) {
    memset(val, 'x', sizeof(val));
    filler = admin();
    if (filler == NULL)
      return;
  }
  for (int i = 0; i < 4; i++)
    redisAppendCommand(filler, "SET rtfill:%lld %b", fill_n++, val,
                       sizeof(val));
  for (int i = 0; i < 4; i++) {
    void *r = NULL;
    if (redisGetReply(filler, &r) != REDIS_OK) {
      redisFree(filler);
      filler = NULL;
      return;
    }
    freeReplyObject(r);
  }
}

/* A client without allow_eviction must refuse such a server. */
void check_refusal(void) {
  rt_options_t o;
  rt_options_init(&o);
  o.host = "127.0.0.1";
  o.port = P.port;
  o.prefix = PREFIX;
  o.connect_timeout_ms = 2000;
  rt_blocking_t *b = NULL;
  int err = rt_blocking_open(&o, &b);
  if (err == 0) {
    rt_blocking_close(b);
    violation("a client without allow_eviction accepted maxmemory-policy "
              "allkeys-lru");
  } else if (err != RT_EEVICTION) {
    violation("a client without allow_eviction failed with %s, not "
              "RT_EEVICTION",
              rt_err_name(err));
  } else {
    dlogf("Y %" PRId64 " without allow_eviction: %s", real_us(),
          rt_err_name(err));
  }
}

long long evicted_keys(void) {
  redisContext *rc = admin();
  long long n = -1;
  if (rc == NULL)
    return n;
  redisReply *r = redisCommand(rc, "INFO stats");
  if (r != NULL && r->type == REDIS_REPLY_STRING) {
    const char *p = strstr(r->str, "evicted_keys:");
    if (p != NULL)
      n = atoll(p + 13);
  }
  if (r != NULL)
    freeReplyObject(r);
  redisFree(rc);
  return n;
}

/* ---- the end ------------------------------------------------------------- */

/* After the run, when every lease ended: every key of the prefix must
 * expire by itself (an idle resource leaves nothing behind), within the
 * longest lease plus the scripts' 10 s grace. */
static void check_keyspace_at(int port) {
  redisContext *rc = admin_at(port);
  if (rc == NULL) {
    violation("cannot connect to redis-server for the key space check");
    return;
  }
  long nkeys[4] = {0, 0, 0, 0}; /* q, h, m, other */
  long long max_pttl = 0;
  int64_t limit = max_lease() + 10000;
  if (P.cluster) {
    /* A replica (a killed master comes back as one) answers its master's
     * keys' PTTL only after READONLY, else with -MOVED. */
    redisReply *ro = redisCommand(rc, "READONLY");
    if (ro != NULL)
      freeReplyObject(ro);
  }
  char cursor[32] = "0";
  do {
    redisReply *r =
        redisCommand(rc, "SCAN %s MATCH %s:* COUNT 1000", cursor, PREFIX);
    if (r == NULL || r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
      violation("SCAN failed");
      if (r != NULL)
        freeReplyObject(r);
      break;
    }
    snprintf(cursor, sizeof(cursor), "%s", r->element[0]->str);
    redisReply *keys = r->element[1];
    for (size_t i = 0; i < keys->elements; i++) {
      const char *k = keys->element[i]->str;
      size_t kl = keys->element[i]->len;
      int kind = 3;
      /* q, h, m; the other kinds' Q, D (with h) and M */
      char last = kl > 2 && k[kl - 2] == ':' ? k[kl - 1] : 0;
      if (last == 'q' || last == 'Q')
        kind = 0;
      else if (last == 'h' || last == 'D')
        kind = 1;
      else if (last == 'm' || last == 'M')
        kind = 2;
      nkeys[kind]++;
      redisReply *t = redisCommand(rc, "PTTL %b", k, kl);
      long long pttl =
          t != NULL && t->type == REDIS_REPLY_INTEGER ? t->integer : -3;
      if (t != NULL)
        freeReplyObject(t);
      if (pttl > max_pttl)
        max_pttl = pttl;
      if (kind == 3)
        violation("unexpected key %.*s (PTTL %lld)", (int)kl, k, pttl);
      else if (pttl == -2)
        continue; /* expired between SCAN and PTTL */
      else if (pttl <= 0 || pttl > limit)
        violation("key %.*s left with PTTL %lld after every lease ended "
                  "(want 0 < PTTL <= %" PRId64 ")",
                  (int)kl, k, pttl, limit);
    }
    freeReplyObject(r);
  } while (strcmp(cursor, "0") != 0);
  dlogf("Y %" PRId64 " keyspace: %ld q, %ld h, %ld m (max PTTL %lld ms), "
        "%ld other",
        real_us(), nkeys[0], nkeys[1], nkeys[2], max_pttl, nkeys[3]);
  printf("key space after the run on %d: %ld q, %ld h, %ld m, all expiring by "
         "themselves (max PTTL %lld ms); %ld other keys\n",
         port, nkeys[0], nkeys[1], nkeys[2], max_pttl, nkeys[3]);
  redisFree(rc);
}

/* The key space check on the server, or on every node of the cluster
 * (replicas included: their copies must expire too). */
void check_keyspace(void) {
  if (P.sentinel) {
    check_keyspace_at(grp.primary.port);
    for (int i = 0; i < grp.nreplicas; i++)
      check_keyspace_at(grp.replicas[i].port);
    return;
  }
  if (!P.cluster) {
    check_keyspace_at(P.port);
    return;
  }
  for (int i = 0; i < cl.nnodes; i++)
    if (cl.node[i].server.pid > 0)
      check_keyspace_at(cl.node[i].server.port);
}
