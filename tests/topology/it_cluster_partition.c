/* Cluster, partition: master X of a 3-master cluster (1 replica each) is
 * cut off on the cluster bus while side A, a client seeded at X, still
 * reaches X's client port; side B is seeded at another master. Both write
 * through a fence-checking store (rtt_split.h). The exclusion figures are
 * printed; what must hold is asserted: no write of A fenced by X accepted
 * once B wrote on X's successor (X's fences carry its own configEpoch,
 * below the promoted replica's), and B makes progress.
 *
 * Every node announces a proxy (rtt_proxy.h) as its bus port
 * (cluster-announce-bus-port), so the others dial node n's bus through
 * n's proxy, while n dials them through theirs. Three cuts of X:
 * - both ways: every link of X's proxy, and in the others' proxies the
 *   link X dialled (told apart by making X redial it, DEBUG CLUSTERLINK
 *   KILL), held silent, redials refused;
 * - into X: only the links the others dial to X (X still dials them);
 * - X unheard: on every link, what X sends is held, what X receives is
 *   delivered.
 * The client ports are not proxied: A keeps reaching X (and, through the
 * slot map X hands out, the others), and X's replica keeps its
 * replication link: the bus alone decides a failover. */
#include <criterion/criterion.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "rt_test.h"
#include "rtt_cluster.h"
#include "rtt_proxy.h"
#include "rtt_split.h"
#include "rttopo.h"

#define NODE_TIMEOUT_MS 1500

static rts_cluster cluster;
static rtt_proxy *to_bus[RTS_MAX_NODES];

static void stop_all(void) {
  rts_cluster_stop(&cluster);
  for (int i = 0; i < RTS_MAX_NODES; i++) {
    rtt_proxy_stop(to_bus[i]);
    to_bus[i] = NULL;
  }
  rtt_cleanup();
}

TestSuite(cluster_partition, .fini = stop_all, .timeout = 180);

/* rts_cluster_options.announce_bus: node i's bus behind a proxy. */
static int proxy_bus(void *arg, int i, int bus_port) {
  (void)arg;
  to_bus[i] = rtt_proxy_start(bus_port);
  return rtt_proxy_port(to_bus[i]);
}

static void start_cluster(void) {
  char err[1024];
  rts_cluster_options o = {.nmasters = 3,
                           .replicas_each = 1,
                           .node_timeout_ms = NODE_TIMEOUT_MS,
                           .announce_bus = proxy_bus};
  cr_assert_eq(rts_cluster_start_with(&cluster, &o, err, sizeof(err)), 0, "%s",
               err);
}

/* The number, in node y's proxy, of the link node x dials to y: x is made
 * to drop it and redial (the only new connection there meanwhile). */
static int link_of(int x, int y) {
  for (int attempt = 0; attempt < 5; attempt++) {
    int before = rtt_proxy_conn_count(to_bus[y]);
    redisReply *r =
        rts_command(rtt_cluster_port(&cluster, x),
                    "DEBUG CLUSTERLINK KILL to %s", cluster.node[y].id);
    cr_assert(r != NULL && r->type == REDIS_REPLY_STATUS,
              "DEBUG CLUSTERLINK KILL: %s",
              r != NULL && r->type == REDIS_REPLY_ERROR ? r->str : "no reply");
    freeReplyObject(r);
    rtt_proxy_wait_conns(to_bus[y], before + 1, 5000);
    rtt_sleep_ms(300);
    if (rtt_proxy_conn_count(to_bus[y]) == before + 1 &&
        rtt_proxy_is_open(to_bus[y], before))
      return before;
  }
  cr_assert_fail("node %d's link to node %d not told apart", x, y);
  return -1;
}

/* Does node n answer CLUSTER INFO with cluster_state:fail? */
static int cluster_down(int n) {
  redisReply *r = rts_command(rtt_cluster_port(&cluster, n), "CLUSTER INFO");
  int down = r != NULL && r->type == REDIS_REPLY_STRING &&
             strstr(r->str, "cluster_state:fail") != NULL;
  if (r != NULL)
    freeReplyObject(r);
  return down;
}

/* What the watcher saw, in rtt_split_now_us() (0: never). */
typedef struct seen {
  uint64_t promoted_us;  /* a majority master names X's replica for the slot */
  uint64_t x_down_us;    /* X reports cluster_state:fail */
  uint64_t x_lost_us;    /* X names another node for the slot */
  uint64_t x_demoted_us; /* X answers ROLE as a replica */
} seen;

static int is_replica(int n) {
  return rts_role_is(rtt_cluster_port(&cluster, n), "slave");
}

static void look(seen *s, int x, int xr, int y, int slot) {
  uint64_t now = rtt_split_now_us();
  if (s->promoted_us == 0 && rts_cluster_slot_owner(&cluster, y, slot) == xr)
    s->promoted_us = now;
  if (s->x_down_us == 0 && cluster_down(x))
    s->x_down_us = now;
  int owner = rts_cluster_slot_owner(&cluster, x, slot);
  if (s->x_lost_us == 0 && owner >= 0 && owner != x)
    s->x_lost_us = now;
  if (s->x_demoted_us == 0 && is_replica(x))
    s->x_demoted_us = now;
}

/* ms after the cut, or -1 for never. */
static long long after(uint64_t us, uint64_t cut_us) {
  return us == 0 ? -1 : ((long long)us - (long long)cut_us) / 1000;
}

/* The configEpoch a fence carries (fence = Redis clock in us + epoch *
 * 2^40; the clock read at the grant, this machine's own). */
static long long fence_epoch(const rtt_split_hold *h) {
  struct timespec rt;
  clock_gettime(CLOCK_REALTIME, &rt);
  long long real_now =
      (long long)rt.tv_sec * 1000000 + (long long)rt.tv_nsec / 1000;
  long long real_then =
      real_now - (long long)(rtt_split_now_us() - h->granted_us);
  return ((long long)h->fence - real_then + (1LL << 39)) >> 40;
}

/* The grants by the epoch of their fences: of A's fenced by X, those
 * accepted after B's first accepted write fenced by another master (must
 * be none) and the last; how many of A's and of B's carry X's epoch ex
 * and the promoted replica's exr (ex while it was not promoted). */
typedef struct by_epoch {
  int x_after_b; /* A's, fenced by X, accepted after B's on another */
  uint64_t last_x_us;
  int a_on[2], b_on[2]; /* [0]: X's epoch, [1]: the promoted replica's */
} by_epoch;

static void judge_epochs(rtt_split_run *run, long long ex, long long exr,
                         by_epoch *e) {
  int b_wrote = 0;
  memset(e, 0, sizeof(*e));
  for (int i = 0; i < run->n; i++) {
    const rtt_split_hold *h = &run->holds[i];
    long long epoch = fence_epoch(h);
    int *on = h->who == 0 ? e->a_on : e->b_on;
    on[0] += epoch == ex;
    on[1] += epoch == exr && exr != ex;
    b_wrote |= h->who == 1 && h->accepted && epoch != ex;
    if (h->who != 0 || epoch != ex)
      continue;
    e->last_x_us = h->granted_us;
    e->x_after_b += b_wrote && h->accepted;
  }
}

static void start_a(rtt_split_run *run, rtt_split_proc *a, int x) {
  rtt_split_init(run);
  a->run = run;
  a->who = 0;
  snprintf(a->url, sizeof(a->url), "redis://127.0.0.1:%d",
           rtt_cluster_port(&cluster, x));
  rtt_split_start(a);
  uint64_t t0 = rtt_now_ms();
  while (run->n < 20 && rtt_now_ms() - t0 < 10000)
    rtt_sleep_ms(20);
  cr_assert_geq(run->n, 20, "A is granted before the partition");
}

static int b_grants(rtt_split_run *run) {
  int n = 0;
  pthread_mutex_lock(&run->mu);
  for (int i = 0; i < run->n; i++)
    n += run->holds[i].who == 1;
  pthread_mutex_unlock(&run->mu);
  return n;
}

/* What the partition cuts: every link of X's both ways; the links the
 * others dial to X; or, on every link, what X sends (X hears everyone,
 * no one hears X). */
enum { BOTH_WAYS, INTO_X, X_UNHEARD };
static const char *const cut_name[] = {"both ways", "into X",
                                       "X unheard, hearing"};

/* Cut X's bus, silently as a network does (bytes held, nothing closed).
 * X's proxy: every link both ways, redials refused (both ways, into X);
 * or what X answers, on every link, redials too (X unheard). The others'
 * proxies (both ways, X unheard): the link X dialled (told apart just
 * before; again if X redialled since, after a stall), both ways or what
 * X sends on it, and redials refused (X's, and any other node's). */
static void cut_bus(int x, int cut) {
  int link[RTS_MAX_NODES];
  int dir = cut == X_UNHEARD ? RTT_UP : RTT_BOTH;
  for (int n = 0; n < cluster.nnodes && cut != INTO_X; n++)
    if (n != x)
      link[n] = link_of(x, n);
  for (int n = 0; n < cluster.nnodes; n++) {
    if (n == x && cut == X_UNHEARD) {
      rtt_proxy_set(to_bus[n], RTT_ALL, RTT_DOWN, RTT_HOLD, 0);
    } else if (n == x) {
      rtt_proxy_refuse(to_bus[n], 1);
      rtt_proxy_set(to_bus[n], RTT_ALL, RTT_BOTH, RTT_HOLD, 0);
    } else if (cut != INTO_X) {
      if (rtt_proxy_conn_count(to_bus[n]) != link[n] + 1)
        link[n] = link_of(x, n);
      rtt_proxy_refuse(to_bus[n], 1);
      rtt_proxy_set(to_bus[n], link[n], dir, RTT_HOLD, 0);
    }
  }
}

/* A granted on X, X's bus cut; B (seeded at another master) starts once
 * a majority master names X's replica for the slot (into X: at once, as
 * none does); both run until 3 s after B's first grant and for at least
 * watch_ms since the cut. B is granted within 20 s: the failover takes
 * 3-4 s here (the node timeout, the FAIL report, the replica's 0.5-1 s
 * delay, its election); a lost election is retried after 6 s (twice the
 * 3 s auth timeout, 2 node timeouts), so 20 s covers one retry and a
 * loaded machine. */
static void partition_run(int cut, int64_t watch_ms) {
  start_cluster();
  int x = rtt_cluster_owner(&cluster, "sb");
  cr_assert(x >= 0 && x < cluster.nmasters);
  int xr = rtt_cluster_replica_of(&cluster, x), y = (x + 1) % cluster.nmasters;
  int slot = rtt_cluster_slot("sb");
  int px = rtt_cluster_port(&cluster, x);
  long long ex = rtt_cluster_info_ll(px, "cluster_my_epoch");
  long long cx = rtt_cluster_info_ll(px, "cluster_current_epoch");

  static rtt_split_run run;
  rtt_split_proc a = {0}, b = {.run = &run, .who = 1};
  start_a(&run, &a, x);
  snprintf(b.url, sizeof(b.url), "redis://127.0.0.1:%d",
           rtt_cluster_port(&cluster, y));
  cut_bus(x, cut);
  uint64_t cut_us = rtt_split_now_us();
  seen s = {0};
  uint64_t t0 = rtt_now_ms();
  if (cut != INTO_X) {
    while (s.promoted_us == 0 && rtt_now_ms() - t0 < 30000) {
      look(&s, x, xr, y, slot);
      rtt_sleep_ms(20);
    }
    cr_assert_neq(s.promoted_us, 0, "the majority promotes X's replica");
  }
  rtt_split_start(&b);
  while (b_grants(&run) == 0 && rtt_now_ms() - t0 < 30000) {
    look(&s, x, xr, y, slot);
    rtt_sleep_ms(20);
  }
  uint64_t t1 = rtt_now_ms();
  while (rtt_now_ms() - t1 < 3000 || (int64_t)(rtt_now_ms() - t0) < watch_ms) {
    look(&s, x, xr, y, slot);
    rtt_sleep_ms(50);
  }
  rtt_split_proc *procs[] = {&a, &b};
  rtt_split_stop(&run, procs, 2);

  rtt_split_figures f;
  rtt_split_judge(&run, cut_us, &f);
  long long exr =
      rtt_cluster_info_ll(rtt_cluster_port(&cluster, xr), "cluster_my_epoch");
  by_epoch e;
  judge_epochs(&run, ex, exr, &e);
  int others_refused = 0;
  for (int n = 0; n < cluster.nnodes; n++)
    others_refused += n != x ? rtt_proxy_refused(to_bus[n]) : 0;
  printf("cluster: partition, %s (node timeout %d ms, watched %lld ms): X "
         "down (cluster_state:fail) %lld ms after the cut, replica promoted "
         "%lld ms after it, X lost the slot (its own view) %lld ms after it, "
         "X a replica %lld ms after it; "
         "A's last grant fenced by X %lld ms, B's first grant %lld ms after "
         "the cut; %d holds, A's fenced by X/by the replica %d/%d, B's "
         "%d/%d; %d overlapping pairs, longest double hold %llu ms; A's "
         "writes accepted after B's first: %d (%d fenced by X; stale, "
         "overlapping: %d); configEpoch X %lld, replica %lld; currentEpoch "
         "X %lld before, %lld after; redials refused by X's proxy %d, by the "
         "others' %d; "
         "errors A %d B %d\n",
         cut_name[cut], NODE_TIMEOUT_MS, (long long)(rtt_now_ms() - t0),
         after(s.x_down_us, cut_us), after(s.promoted_us, cut_us),
         after(s.x_lost_us, cut_us), after(s.x_demoted_us, cut_us),
         after(e.last_x_us, cut_us), after(f.first_b_us, cut_us), f.holds,
         e.a_on[0], e.a_on[1], e.b_on[0], e.b_on[1], f.overlaps,
         (unsigned long long)f.longest_us / 1000, f.a_after_b, e.x_after_b,
         f.stale, ex, exr, cx, rtt_cluster_info_ll(px, "cluster_current_epoch"),
         rtt_proxy_refused(to_bus[x]), others_refused, a.errors, b.errors);
  cr_assert_gt(f.of_b, 0, "B is granted");
  cr_assert_lt(after(f.first_b_us, cut_us), 20000,
               "B is granted within 20 s of the cut");
  cr_assert_eq(e.x_after_b, 0,
               "no write fenced by X may be accepted after B's first on the "
               "new master");
  cr_assert_eq(f.stale, 0);
  if (s.promoted_us != 0)
    cr_assert_gt(exr, ex, "the promoted replica's configEpoch is above X's");
  pthread_mutex_destroy(&run.mu);
}

/* X cut off both ways: the majority fails it over to its replica. */
Test(cluster_partition, both_ways_the_cut_off_masters_side_is_fenced_off) {
  partition_run(BOTH_WAYS, 0);
}

/* The others cannot dial X, X still dials them. */
Test(cluster_partition, into_the_master_only) {
  partition_run(INTO_X, 8 * NODE_TIMEOUT_MS);
}

/* The majority hears nothing from X, X hears all of them. */
Test(cluster_partition, the_master_unheard_but_hearing) {
  partition_run(X_UNHEARD, 8 * NODE_TIMEOUT_MS);
}
