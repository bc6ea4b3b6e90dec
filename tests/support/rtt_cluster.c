/* Test helpers for a Redis Cluster (see rtt_cluster.h). */
#include "rtt_cluster.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "topology.h"

void rtt_cluster_start(rts_cluster *c, int masters, int replicas_each) {
  char err[1024];
  int rc = rts_cluster_start(c, masters, replicas_each, 1000, err, sizeof(err));
  cr_assert_eq(rc, 0, "%s", err);
}

int rtt_cluster_port(const rts_cluster *c, int i) {
  return c->node[i].server.port;
}

void rtt_cluster_options(rt_options_t *o, char *url, size_t cap,
                         const rts_cluster *c, int i) {
  rtt_options(o);
  snprintf(url, cap, "redis://127.0.0.1:%d", rtt_cluster_port(c, i));
  o->url = url;
}

int rtt_cluster_slot(const char *name) {
  char key[256];
  size_t n = rtt_key(key, sizeof(key), rtt_prefix(), name, strlen(name), 'h');
  return rt__key_slot(key, n);
}

int rtt_cluster_owner(const rts_cluster *c, const char *name) {
  return rts_cluster_slot_owner(c, 0, rtt_cluster_slot(name));
}

void rtt_cluster_names(const rts_cluster *c, const char *stem,
                       char (*out)[RTT_CLUSTER_NAME_MAX]) {
  int found = 0;
  for (int m = 0; m < c->nmasters; m++)
    out[m][0] = '\0';
  for (int k = 0; k < 10000 && found < c->nmasters; k++) {
    char name[RTT_CLUSTER_NAME_MAX];
    snprintf(name, sizeof(name), "%s-%d", stem, k);
    int m = rtt_cluster_owner(c, name);
    if (m >= 0 && m < c->nmasters && out[m][0] == '\0') {
      snprintf(out[m], RTT_CLUSTER_NAME_MAX, "%s", name);
      found++;
    }
  }
  cr_assert_eq(found, c->nmasters, "no %s-* name on some master", stem);
}

long long rtt_cluster_subscribers(int port, const rt_client_t *cl, int slot) {
  char tag[RT__SLOT_TAG_LEN + 1], chan[256];
  rt__slot_tag(slot, tag);
  snprintf(chan, sizeof(chan), "%s:{%s}:%s", rtt_prefix(), tag,
           rt_client_id(cl));
  redisReply *r = rts_command(port, "PUBSUB SHARDNUMSUB %s", chan);
  cr_assert(r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2);
  long long n = r->element[1]->integer;
  freeReplyObject(r);
  return n;
}

int rtt_cluster_replica_of(const rts_cluster *c, int m) {
  for (int i = c->nmasters; i < c->nnodes; i++)
    if (c->node[i].master == m)
      return i;
  cr_assert_fail("master %d has no replica", m);
  return -1;
}
