/* Network faults: delay, hold, partition or cut a worker's connections
 * through its proxy (tests/support/rtt_proxy.h). */
#include "fault.h"

/* The open connections of s's proxy (at most max). */
static int open_conns(net_t *n, int *out, int max) {
  int count = rtt_proxy_conn_count(n->p), k = 0;
  for (int i = 0; i < count && k < max; i++)
    if (rtt_proxy_is_open(n->p, i))
      out[k++] = i;
  return k;
}

/* End the network fault of slot s: release (deliver what was held, late)
 * or, when its worker died, cut (drop it: a dead host's bytes do not
 * arrive later, and Redis must see its connections close). */
void net_end(int s, int cut) {
  net_t *n = &nets[s];
  if (n->p == NULL || n->kind == NF_NONE)
    return;
  uint64_t held = rtt_proxy_held(n->p, RTT_ALL, RTT_BOTH);
  if (cut) {
    rtt_proxy_reset(n->p);
    rtt_proxy_cut(n->p, RTT_ALL);
  } else if (n->kind == NF_HOLD) {
    for (int i = 0; i < n->nconns; i++) {
      rtt_proxy_set(n->p, n->conns[i], RTT_BOTH, RTT_PASS, 0);
      rtt_proxy_release(n->p, n->conns[i], RTT_BOTH);
    }
  } else {
    rtt_proxy_set(n->p, RTT_ALL, RTT_BOTH, RTT_PASS, 0);
    rtt_proxy_release(n->p, RTT_ALL, RTT_BOTH);
  }
  dlogf("z %" PRId64 " %d %d %s %s %" PRIu64, real_us(), s, slots[s].gen,
        nf_name[n->kind], cut ? "cut" : "release", held);
  n->kind = NF_NONE;
  n->nconns = 0;
}

/* A slot whose worker runs, is connected and has no network fault. */
static int net_pick(void) {
  int s = (int)(next_rand(&drnd) % (uint64_t)P.workers);
  for (int k = 0; k < P.workers; k++, s = (s + 1) % P.workers) {
    if (nets[s].p != NULL && nets[s].kind == NF_NONE && slots[s].pid > 0 &&
        !slots[s].killed && slots[s].cid[0])
      return s;
  }
  return -1;
}

int net_fault(int kind) {
  int s = net_pick();
  if (s < 0)
    return 0;
  net_t *n = &nets[s];
  int64_t t = real_us();
  if (kind == FK_NET_DELAY) {
    int64_t ms = 50 + (int64_t)(next_rand(&drnd) % 251);
    int64_t dur = 1000 + (int64_t)(next_rand(&drnd) % 2000);
    rtt_proxy_set(n->p, RTT_ALL, RTT_BOTH, RTT_DELAY, ms);
    n->kind = NF_DELAY;
    n->end_at = mono_ms() + dur;
    dlogf("Z %" PRId64 " %d %d delay %" PRId64 " %" PRId64, t, s, slots[s].gen,
          ms, dur);
  } else if (kind == FK_NET_HOLD) {
    /* The open connections only: the reconnect goes through. */
    n->nconns = open_conns(n, n->conns, MAX_HELD_CONNS);
    if (n->nconns == 0)
      return 0;
    for (int i = 0; i < n->nconns; i++)
      rtt_proxy_set(n->p, n->conns[i], RTT_BOTH, RTT_HOLD, 0);
    int64_t dur = P.cmd_timeout_ms + 300 + (int64_t)(next_rand(&drnd) % 1200);
    n->kind = NF_HOLD;
    n->end_at = mono_ms() + dur;
    dlogf("Z %" PRId64 " %d %d hold %" PRId64 " %d", t, s, slots[s].gen, dur,
          n->nconns);
  } else if (kind == FK_NET_PARTITION) {
    rtt_proxy_set(n->p, RTT_ALL, RTT_BOTH, RTT_HOLD, 0);
    int64_t dur = P.cmd_timeout_ms + 400 + (int64_t)(next_rand(&drnd) % 1300);
    n->kind = NF_PARTITION;
    n->end_at = mono_ms() + dur;
    dlogf("Z %" PRId64 " %d %d partition %" PRId64, t, s, slots[s].gen, dur);
  } else {
    int open[MAX_HELD_CONNS];
    int k = open_conns(n, open, MAX_HELD_CONNS);
    if (k == 0)
      return 0;
    int all = next_rand(&drnd) % 2;
    if (all)
      rtt_proxy_cut(n->p, RTT_ALL);
    else
      rtt_proxy_cut(n->p, open[next_rand(&drnd) % (uint64_t)k]);
    dlogf("Z %" PRId64 " %d %d cut %d", t, s, slots[s].gen, all ? k : 1);
  }
  return 1;
}

void net_tick(void) {
  int64_t now = mono_ms();
  for (int s = 0; s < P.workers; s++)
    if (nets[s].kind != NF_NONE && now >= nets[s].end_at)
      net_end(s, 0);
}
