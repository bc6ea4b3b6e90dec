/* Parsers of what describes a topology: CLUSTER SLOTS and CLUSTER SHARDS
 * replies, -MOVED / -ASK / -TRYAGAIN / -CLUSTERDOWN errors, Sentinel's
 * replies and +switch-master messages. Replies are built by hiredis's own
 * reader from RESP text, as the client receives them; texts are
 * exact-size copies, so reading past len is caught by AddressSanitizer.
 * it_topology.c parses the same replies from a real cluster. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "rt_test.h"
#include "topology.h"

static redisReply *resp(const char *text) {
  redisReader *rd = redisReaderCreate();
  void *r = NULL;
  cr_assert_not_null(rd);
  cr_assert_eq(redisReaderFeed(rd, text, strlen(text)), REDIS_OK);
  cr_assert_eq(redisReaderGetReply(rd, &r), REDIS_OK, "%s", rd->errstr);
  cr_assert_not_null(r, "incomplete RESP: %s", text);
  redisReaderFree(rd);
  return r;
}

/* ---- CLUSTER SLOTS ------------------------------------------------------- */

/* Two ranges given out of order, the second with a replica; Redis 7 adds
 * a metadata map (a flat array in RESP2) to each node. */
#define SLOTS_REPLY                                                            \
  "*2\r\n"                                                                     \
  "*4\r\n:8192\r\n:16383\r\n"                                                  \
  "*4\r\n$9\r\n127.0.0.1\r\n:7001\r\n$3\r\nid2\r\n*0\r\n"                      \
  "*4\r\n$9\r\n127.0.0.1\r\n:7004\r\n$3\r\nid4\r\n*2\r\n"                      \
  "$8\r\nhostname\r\n$5\r\nhost4\r\n"                                          \
  "*3\r\n:0\r\n:8191\r\n"                                                      \
  "*3\r\n$9\r\n127.0.0.1\r\n:7000\r\n$3\r\nid1\r\n"

Test(topology, cluster_slots_become_a_sorted_slot_map) {
  redisReply *r = resp(SLOTS_REPLY);
  rt__slot_map m;
  cr_assert_eq(rt__slot_map_from_slots(r, &m), 0);
  cr_assert_eq(m.n, 2);
  cr_assert_eq(m.ranges[0].first, 0);
  cr_assert_eq(m.ranges[0].last, 8191);
  cr_assert_eq(m.ranges[0].primary.port, 7000);
  cr_assert_eq(m.ranges[0].nreplicas, 0);
  cr_assert_eq(m.ranges[1].primary.port, 7001);
  cr_assert_str_eq(m.ranges[1].primary.host, "127.0.0.1");
  cr_assert_eq(m.ranges[1].nreplicas, 1);
  cr_assert_eq(m.ranges[1].replicas[0].port, 7004);

  cr_assert_eq(rt__slot_map_find(&m, 0)->primary.port, 7000);
  cr_assert_eq(rt__slot_map_find(&m, 8191)->primary.port, 7000);
  cr_assert_eq(rt__slot_map_find(&m, 8192)->primary.port, 7001);
  cr_assert_eq(rt__slot_map_find(&m, 16383)->primary.port, 7001);
  rt__slot_map_free(&m);
  freeReplyObject(r);
}

Test(topology, a_slot_nobody_serves_is_not_found) {
  redisReply *r = resp("*1\r\n*3\r\n:10\r\n:20\r\n*2\r\n$1\r\nh\r\n:1\r\n");
  rt__slot_map m;
  cr_assert_eq(rt__slot_map_from_slots(r, &m), 0);
  cr_assert_null(rt__slot_map_find(&m, 9));
  cr_assert_not_null(rt__slot_map_find(&m, 15));
  cr_assert_null(rt__slot_map_find(&m, 21));
  rt__slot_map_free(&m);
  freeReplyObject(r);
}

Test(topology, an_unknown_endpoint_reads_as_an_empty_host) {
  redisReply *r = resp("*2\r\n*3\r\n:0\r\n:1\r\n*2\r\n$-1\r\n:7000\r\n"
                       "*3\r\n:2\r\n:3\r\n*2\r\n$1\r\n?\r\n:7001\r\n");
  rt__slot_map m;
  cr_assert_eq(rt__slot_map_from_slots(r, &m), 0);
  cr_assert_str_eq(m.ranges[0].primary.host, "");
  cr_assert_str_eq(m.ranges[1].primary.host, "");
  rt__slot_map_free(&m);
  freeReplyObject(r);
}

static void assert_bad_slots(const char *text) {
  redisReply *r = resp(text);
  rt__slot_map m;
  cr_assert_eq(rt__slot_map_from_slots(r, &m), RT_EPROTO, "%s", text);
  cr_assert_null(m.ranges);
  freeReplyObject(r);
}

Test(topology, malformed_cluster_slots_are_refused) {
  assert_bad_slots("+OK\r\n");
  assert_bad_slots("-ERR This instance has cluster support disabled\r\n");
  assert_bad_slots("*1\r\n*2\r\n:0\r\n:1\r\n"); /* no node */
  assert_bad_slots("*1\r\n*3\r\n:5\r\n:4\r\n*2\r\n$1\r\nh\r\n:1\r\n");
  assert_bad_slots("*1\r\n*3\r\n:0\r\n:16384\r\n*2\r\n$1\r\nh\r\n:1\r\n");
  assert_bad_slots("*1\r\n*3\r\n:-1\r\n:3\r\n*2\r\n$1\r\nh\r\n:1\r\n");
  assert_bad_slots("*1\r\n*3\r\n:0\r\n:3\r\n*2\r\n$1\r\nh\r\n:70000\r\n");
  assert_bad_slots("*1\r\n*3\r\n:0\r\n:3\r\n*1\r\n$1\r\nh\r\n");
  assert_bad_slots("*1\r\n*3\r\n:0\r\n:3\r\n*2\r\n:1\r\n:1\r\n");
  /* A broken replica after a good primary: nothing leaks. */
  assert_bad_slots("*1\r\n*4\r\n:0\r\n:3\r\n*2\r\n$1\r\nh\r\n:1\r\n:9\r\n");
  /* Overlapping ranges. */
  assert_bad_slots("*2\r\n*3\r\n:0\r\n:10\r\n*2\r\n$1\r\nh\r\n:1\r\n"
                   "*3\r\n:10\r\n:20\r\n*2\r\n$1\r\nh\r\n:2\r\n");
}

/* ---- CLUSTER SHARDS ------------------------------------------------------ */

static const char *shard_node(char *buf, size_t cap, const char *role, int port,
                              const char *health) {
  snprintf(
      buf, cap,
      "*14\r\n$2\r\nid\r\n$3\r\nabc\r\n$4\r\nport\r\n:%d\r\n"
      "$2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n"
      "$4\r\nrole\r\n$%zu\r\n%s\r\n"
      "$18\r\nreplication-offset\r\n:100\r\n"
      "$6\r\nhealth\r\n$%zu\r\n%s\r\n",
      port, strlen(role), role, strlen(health), health);
  return buf;
}

Test(topology, cluster_shards_become_a_slot_map) {
  char a[512], b[512], c[512], d[512], e[512], text[4096];
  snprintf(text, sizeof(text),
           "*3\r\n"
           /* two ranges, a master and a replica */
           "*4\r\n$5\r\nslots\r\n*4\r\n:0\r\n:99\r\n:200\r\n:299\r\n"
           "$5\r\nnodes\r\n*2\r\n%s%s"
           /* a failed master without slots: skipped */
           "*4\r\n$5\r\nslots\r\n*0\r\n$5\r\nnodes\r\n*1\r\n%s"
           /* the replica listed first, then the master */
           "*4\r\n$5\r\nslots\r\n*2\r\n:100\r\n:199\r\n"
           "$5\r\nnodes\r\n*2\r\n%s%s",
           shard_node(a, sizeof(a), "master", 7000, "online"),
           shard_node(b, sizeof(b), "replica", 7003, "online"),
           shard_node(c, sizeof(c), "master", 7009, "failed"),
           shard_node(d, sizeof(d), "replica", 7004, "loading"),
           shard_node(e, sizeof(e), "master", 7001, "online"));
  redisReply *r = resp(text);
  rt__slot_map m;
  cr_assert_eq(rt__slot_map_from_shards(r, &m), 0);
  cr_assert_eq(m.n, 3);
  cr_assert_eq(rt__slot_map_find(&m, 50)->primary.port, 7000);
  cr_assert_eq(rt__slot_map_find(&m, 250)->primary.port, 7000);
  const rt__slot_range *mid = rt__slot_map_find(&m, 150);
  cr_assert_eq(mid->primary.port, 7001);
  cr_assert_eq(mid->nreplicas, 1);
  cr_assert_eq(mid->replicas[0].port, 7004);
  cr_assert_eq(mid->replicas[0].healthy, 0);
  cr_assert_eq(rt__slot_map_find(&m, 250)->replicas[0].healthy, 1);
  cr_assert_null(rt__slot_map_find(&m, 300));
  rt__slot_map_free(&m);
  freeReplyObject(r);
}

Test(topology, a_shard_with_no_online_master_is_a_hole_in_the_map) {
  char a[512], b[512], c[512], text[2048];
  /* Master and replica down (cluster-require-full-coverage no keeps the
   * cluster up): its slots map to nobody; the other shard is served. */
  snprintf(text, sizeof(text),
           "*2\r\n*4\r\n$5\r\nslots\r\n*2\r\n:0\r\n:9\r\n"
           "$5\r\nnodes\r\n*2\r\n%s%s"
           "*4\r\n$5\r\nslots\r\n*2\r\n:10\r\n:19\r\n"
           "$5\r\nnodes\r\n*1\r\n%s",
           shard_node(a, sizeof(a), "master", 7000, "failed"),
           shard_node(b, sizeof(b), "replica", 7003, "failed"),
           shard_node(c, sizeof(c), "master", 7001, "online"));
  redisReply *r = resp(text);
  rt__slot_map m;
  cr_assert_eq(rt__slot_map_from_shards(r, &m), 0);
  cr_assert_eq(m.n, 1);
  cr_assert_null(rt__slot_map_find(&m, 5));
  cr_assert_eq(rt__slot_map_find(&m, 15)->primary.port, 7001);
  rt__slot_map_free(&m);
  freeReplyObject(r);
  /* A shard with no node at all is a hole too; an odd slot list is not a
   * shard. */
  r = resp("*1\r\n*4\r\n$5\r\nslots\r\n*2\r\n:0\r\n:9\r\n"
           "$5\r\nnodes\r\n*0\r\n");
  cr_assert_eq(rt__slot_map_from_shards(r, &m), 0);
  cr_assert_eq(m.n, 0);
  rt__slot_map_free(&m);
  freeReplyObject(r);
  r = resp("*1\r\n*4\r\n$5\r\nslots\r\n*1\r\n:0\r\n$5\r\nnodes\r\n*0\r\n");
  cr_assert_eq(rt__slot_map_from_shards(r, &m), RT_EPROTO);
  freeReplyObject(r);
}

Test(topology, a_shard_listing_no_slots_names_its_online_master_idle) {
  char a[512], b[512], c[512], text[2048];
  /* Redis 7.4.1 after a failover: the shard's slots are its failed
   * master's (none), its promoted replica is an online master. */
  snprintf(text, sizeof(text),
           "*2\r\n*4\r\n$5\r\nslots\r\n*0\r\n"
           "$5\r\nnodes\r\n*2\r\n%s%s"
           "*4\r\n$5\r\nslots\r\n*2\r\n:10\r\n:19\r\n"
           "$5\r\nnodes\r\n*1\r\n%s",
           shard_node(a, sizeof(a), "master", 7000, "fail"),
           shard_node(b, sizeof(b), "master", 7003, "online"),
           shard_node(c, sizeof(c), "master", 7001, "online"));
  redisReply *r = resp(text);
  rt__slot_map m;
  cr_assert_eq(rt__slot_map_from_shards(r, &m), 0);
  cr_assert_eq(m.n, 1);
  cr_assert_null(rt__slot_map_find(&m, 5));
  cr_assert_eq(m.nidle, 1);
  cr_assert_eq(m.idle[0].port, 7003);
  cr_assert_str_eq(m.idle[0].host, "127.0.0.1");
  rt__slot_map_free(&m);
  cr_assert_eq(m.nidle, 0);
  freeReplyObject(r);
  /* No online master in a shard with no slots: nothing idle. */
  snprintf(text, sizeof(text),
           "*1\r\n*4\r\n$5\r\nslots\r\n*0\r\n"
           "$5\r\nnodes\r\n*1\r\n%s",
           shard_node(a, sizeof(a), "master", 7000, "fail"));
  r = resp(text);
  cr_assert_eq(rt__slot_map_from_shards(r, &m), 0);
  cr_assert_eq(m.n, 0);
  cr_assert_eq(m.nidle, 0);
  rt__slot_map_free(&m);
  freeReplyObject(r);
}

/* ---- redirects ------------------------------------------------------------ */

static int redirect(const char *text, rt__redirect *out) {
  char *s = rtt_exact(text, strlen(text));
  int rc = rt__redirect_parse(s, strlen(text), out);
  if (rc == 0 && out->host_len > 0) {
    /* Point into the caller's text, which outlives the copy. */
    out->host = text + (out->host - s);
  }
  free(s);
  return rc;
}

Test(topology, moved_and_ask_name_the_slot_and_the_node) {
  rt__redirect r;
  cr_assert_eq(redirect("MOVED 3999 127.0.0.1:6381", &r), 0);
  cr_assert_eq(r.kind, RT__REDIRECT_MOVED);
  cr_assert_eq(r.slot, 3999);
  cr_assert_eq(r.host_len, 9);
  cr_assert_arr_eq(r.host, "127.0.0.1", 9);
  cr_assert_eq(r.port, 6381);

  cr_assert_eq(redirect("ASK 16383 ::1:7000", &r), 0);
  cr_assert_eq(r.kind, RT__REDIRECT_ASK);
  cr_assert_eq(r.slot, 16383);
  cr_assert_eq(r.host_len, 3);
  cr_assert_arr_eq(r.host, "::1", 3);
  cr_assert_eq(r.port, 7000);

  cr_assert_eq(redirect("MOVED 0 :6380", &r), 0, "unknown endpoint");
  cr_assert_eq(r.host_len, 0);
  cr_assert_eq(r.port, 6380);
}

Test(topology, tryagain_and_clusterdown_are_recognized) {
  rt__redirect r;
  cr_assert_eq(redirect("TRYAGAIN Multiple keys request during rehashing "
                        "of slot",
                        &r),
               0);
  cr_assert_eq(r.kind, RT__REDIRECT_TRYAGAIN);
  cr_assert_eq(redirect("CLUSTERDOWN The cluster is down", &r), 0);
  cr_assert_eq(r.kind, RT__REDIRECT_CLUSTERDOWN);
  cr_assert_eq(redirect("CLUSTERDOWN", &r), 0);
  cr_assert_eq(r.kind, RT__REDIRECT_CLUSTERDOWN);
}

Test(topology, other_errors_are_no_redirect) {
  rt__redirect r;
  const char *others[] = {"ERR unknown command",
                          "MOVEDX 1 h:1",
                          "ASKING",
                          "WRONGTYPE Operation",
                          "",
                          "READONLY You can't"};
  for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++) {
    cr_assert_eq(redirect(others[i], &r), 0, "%s", others[i]);
    cr_assert_eq(r.kind, RT__REDIRECT_NONE, "%s", others[i]);
  }
}

Test(topology, malformed_moved_and_ask_are_protocol_errors) {
  rt__redirect r;
  const char *bad[] = {"MOVED",           "MOVED ",          "ASK 1",
                       "MOVED 16384 h:1", "MOVED -1 h:1",    "MOVED 1 h",
                       "MOVED 1 h:",      "MOVED 1 h:0",     "MOVED 1 h:65536",
                       "MOVED x h:1",     "ASK 1 h:1 extra", "MOVED 1 h:1x"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    cr_assert_eq(redirect(bad[i], &r), RT_EPROTO, "%s", bad[i]);
}

/* ---- Sentinel --------------------------------------------------------------- */

Test(topology, sentinel_master_gives_the_address_epoch_and_a_failover_flag) {
  rt__node_addr a = {0};
  uint64_t epoch = 0;
  int failing = -1;
  redisReply *r = resp("*8\r\n$4\r\nname\r\n$1\r\nm\r\n$2\r\nip\r\n"
                       "$9\r\n127.0.0.1\r\n$4\r\nport\r\n$4\r\n6380\r\n"
                       "$12\r\nconfig-epoch\r\n$2\r\n17\r\n");
  cr_assert_eq(rt__sentinel_master_info(r, &a, &epoch, &failing), RT_EPROTO,
               "no flags");
  freeReplyObject(r);
  const char *flags[] = {"master", "master,failover_in_progress",
                         "failover_in_progress_x,master"};
  for (int i = 0; i < 3; i++) {
    char buf[512];
    snprintf(buf, sizeof(buf),
             "*10\r\n$4\r\nname\r\n$1\r\nm\r\n$2\r\nip\r\n"
             "$9\r\n127.0.0.1\r\n$4\r\nport\r\n$4\r\n6380\r\n"
             "$5\r\nflags\r\n$%zu\r\n%s\r\n"
             "$12\r\nconfig-epoch\r\n$2\r\n17\r\n",
             strlen(flags[i]), flags[i]);
    r = resp(buf);
    cr_assert_eq(rt__sentinel_master_info(r, &a, &epoch, &failing), 0);
    cr_assert_str_eq(a.host, "127.0.0.1");
    cr_assert_eq(a.port, 6380);
    cr_assert_eq(epoch, 17);
    cr_assert_eq(failing, i == 1, "%s", flags[i]);
    free(a.host);
    a.host = NULL;
    freeReplyObject(r);
  }
  r = resp("-ERR No such master with that name\r\n");
  cr_assert_eq(rt__sentinel_master_info(r, &a, &epoch, &failing), 1);
  freeReplyObject(r);
  r = resp("-ERR unknown command\r\n");
  cr_assert_eq(rt__sentinel_master_info(r, &a, &epoch, &failing), RT_EPROTO);
  freeReplyObject(r);
}

Test(topology, sentinel_names_the_master_or_does_not_know_it) {
  rt__node_addr a = {0};
  redisReply *r = resp("*2\r\n$9\r\n127.0.0.1\r\n$4\r\n6380\r\n");
  cr_assert_eq(rt__sentinel_master_addr(r, &a), 0);
  cr_assert_str_eq(a.host, "127.0.0.1");
  cr_assert_eq(a.port, 6380);
  rt__node_addrs_free(NULL, 0);
  free(a.host);
  freeReplyObject(r);

  r = resp("*-1\r\n");
  cr_assert_eq(rt__sentinel_master_addr(r, &a), 1);
  freeReplyObject(r);
  r = resp("$-1\r\n");
  cr_assert_eq(rt__sentinel_master_addr(r, &a), 1);
  freeReplyObject(r);

  const char *bad[] = {"*1\r\n$1\r\nh\r\n", "*2\r\n$1\r\nh\r\n$1\r\nx\r\n",
                       "*2\r\n$1\r\nh\r\n$1\r\n0\r\n",
                       "*2\r\n$0\r\n\r\n$1\r\n1\r\n", "-IDONTKNOW\r\n"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    r = resp(bad[i]);
    cr_assert_eq(rt__sentinel_master_addr(r, &a), RT_EPROTO, "%s", bad[i]);
    freeReplyObject(r);
  }
}

Test(topology, sentinel_peers_are_read_from_their_fields) {
  redisReply *r =
      resp("*2\r\n"
           "*6\r\n$4\r\nname\r\n$2\r\nab\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n"
           "$4\r\nport\r\n$5\r\n26380\r\n"
           "*4\r\n$4\r\nport\r\n$5\r\n26381\r\n$2\r\nip\r\n$3\r\n::1\r\n");
  rt__node_addr *peers;
  size_t n;
  cr_assert_eq(rt__sentinel_peers(r, &peers, &n), 0);
  cr_assert_eq(n, 2);
  cr_assert_str_eq(peers[0].host, "127.0.0.1");
  cr_assert_eq(peers[0].port, 26380);
  cr_assert_str_eq(peers[1].host, "::1");
  cr_assert_eq(peers[1].port, 26381);
  rt__node_addrs_free(peers, n);
  freeReplyObject(r);

  r = resp("*0\r\n");
  cr_assert_eq(rt__sentinel_peers(r, &peers, &n), 0);
  cr_assert_eq(n, 0);
  cr_assert_null(peers);
  freeReplyObject(r);

  r = resp("*2\r\n*4\r\n$2\r\nip\r\n$1\r\nh\r\n$4\r\nport\r\n$1\r\n1\r\n"
           "*2\r\n$2\r\nip\r\n$1\r\nh\r\n");
  cr_assert_eq(rt__sentinel_peers(r, &peers, &n), RT_EPROTO);
  cr_assert_null(peers);
  freeReplyObject(r);
}

static int switch_master(const char *text, rt__switch_master *out) {
  char *s = rtt_exact(text, strlen(text));
  int rc = rt__switch_master_parse(s, strlen(text), out);
  if (rc == 0) {
    out->name = text + (out->name - s);
    out->host = text + (out->host - s);
  }
  free(s);
  return rc;
}

Test(topology, switch_master_names_the_new_master) {
  rt__switch_master m;
  cr_assert_eq(switch_master("mymaster 127.0.0.1 6379 127.0.0.1 6380", &m), 0);
  cr_assert_eq(m.name_len, 8);
  cr_assert_arr_eq(m.name, "mymaster", 8);
  cr_assert_eq(m.host_len, 9);
  cr_assert_arr_eq(m.host, "127.0.0.1", 9);
  cr_assert_eq(m.port, 6380);

  const char *bad[] = {"",
                       "mymaster",
                       "127.0.0.1 6379 127.0.0.1 6380",
                       " 127.0.0.1 6379 127.0.0.1 6380",
                       "m 127.0.0.1 6379 127.0.0.1 x",
                       "m 127.0.0.1 x 127.0.0.1 6380",
                       "m 127.0.0.1 6379 127.0.0.1 0",
                       "m 127.0.0.1 6379 127.0.0.1 6380 ",
                       "m 127.0.0.1 6379  6380"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    cr_assert_eq(switch_master(bad[i], &m), RT_EPROTO, "'%s'", bad[i]);
}
