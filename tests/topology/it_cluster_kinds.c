/* The pool kinds on a real Redis Cluster (tools/rttopo.h: 3
 * masters with a replica each, on loopback, stopped by pid): a read-write
 * lock, a semaphore and an election on resources served by different
 * shards, their grants through each shard's per-slot notice channel and
 * the election's observe channel published in its own slot, a multi-lock
 * over names in different slots (taken one at a time in order: no
 * cross-slot script), and a crashed shared holder skipped after its
 * lease. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "rt_test.h"
#include "rtt_cluster.h"

static rts_cluster cluster;

static void stop_all(void) {
  rts_cluster_stop(&cluster);
  rtt_cleanup();
}

TestSuite(cluster_kinds, .fini = stop_all, .timeout = 180);

static const rt_request_t SHARED = {RT_KIND_SHARED, 0, 0, 0, NULL, 0};
static const rt_request_t EXCLUSIVE = {RT_KIND_EXCLUSIVE, 0, 0, 0, NULL, 0};

/* Two clients on one loop, seeded by different nodes. */
typedef struct pair {
  uv_loop_t loop;
  rtt_client a, b;
  rt_options_t oa, ob;
  char ua[64], ub[64];
} pair;

static void pair_open(pair *p) {
  cr_assert_eq(uv_loop_init(&p->loop), 0);
  rtt_cluster_options(&p->oa, p->ua, sizeof(p->ua), &cluster, 0);
  rtt_cluster_options(&p->ob, p->ub, sizeof(p->ub), &cluster, 1);
  rtt_open_ready(&p->a, &p->loop, &p->oa);
  rtt_open_ready(&p->b, &p->loop, &p->ob);
}

static void pair_close(pair *p) {
  rtt_close(&p->a);
  rtt_close(&p->b);
  rtt_loop_finish(&p->loop);
}

static int queued(void *arg) {
  const rtt_req *r = arg;
  return r->calls > 0 || rt_lock_position(r->lock) > 0;
}

/* Run until r's enqueue was answered (r queued behind someone): two
 * clients' requests reach a shard in no set order, each once its client's
 * channel of the slot is subscribed there. */
static void expect_queued(uv_loop_t *loop, rtt_req *r, const char *what) {
  cr_assert(rtt_run_until_fn(loop, queued, r, 5000), "%s: no answer", what);
  cr_assert_eq(r->calls, 0, "%s was not kept waiting", what);
}

static void expect_waiting(pair *p, const rtt_req *r, const char *what) {
  rtt_run_for(&p->loop, 150);
  cr_assert_eq(r->calls, 0, "%s was not kept waiting", what);
}

/* The port of the master serving name. */
static int owner_port(const char *name) {
  int m = rtt_cluster_owner(&cluster, name);
  cr_assert(m >= 0 && m < cluster.nmasters, "no master serves %s", name);
  return rtt_cluster_port(&cluster, m);
}

/* Readers hold together, the writer waits for both, and a reader behind
 * the writer waits for it; b hears its grants on its channel of the slot,
 * on the shard that owns it. */
static void read_write_lock_on_its_shard(pair *p, const char *name) {
  rtt_req r1 = {0}, r2 = {0}, w = {0}, r3 = {0};
  cr_assert_eq(rtt_wait_ex(p->a.c, name, &SHARED, 20000, RT_FOREVER, &r1), 0);
  cr_assert_eq(rtt_wait_ex(p->b.c, name, &SHARED, 20000, RT_FOREVER, &r2), 0);
  rtt_expect_grant(&p->loop, &r1, 5000, "the first reader");
  rtt_expect_grant(&p->loop, &r2, 5000, "the second reader, beside it");
  cr_assert_eq(rtt_wait_ex(p->b.c, name, &EXCLUSIVE, 20000, RT_FOREVER, &w), 0);
  expect_queued(&p->loop, &w, "the writer behind two readers");
  cr_assert_eq(rtt_wait_ex(p->a.c, name, &SHARED, 20000, RT_FOREVER, &r3), 0);
  expect_waiting(p, &r3, "a reader behind the writer");
  cr_assert_eq(
      rtt_cluster_subscribers(owner_port(name), p->b.c, rtt_cluster_slot(name)),
      1);
  rtt_release(&p->loop, &r1, 0);
  expect_waiting(p, &w, "the writer behind one reader");
  rtt_release(&p->loop, &r2, 0);
  rtt_expect_grant(&p->loop, &w, 3000, "the writer after the last reader");
  cr_assert_gt(w.fence, r2.fence);
  cr_assert_eq(r3.calls, 0, "a reader beside the writer");
  rtt_release(&p->loop, &w, 0);
  rtt_expect_grant(&p->loop, &r3, 3000, "the reader after the writer");
  cr_assert_gt(r3.fence, w.fence);
  rtt_release(&p->loop, &r3, 0);
}

/* A semaphore of 3: a request for 2 waits behind 2 taken, and a request
 * for 1 behind it is not let past it although 1 permit is free. */
static void semaphore_on_its_shard(pair *p, const char *name) {
  const rt_request_t two = {RT_KIND_SEMAPHORE, 2, 3, 0, NULL, 0};
  const rt_request_t one = {RT_KIND_SEMAPHORE, 1, 3, 0, NULL, 0};
  rtt_req s1 = {0}, s2 = {0}, s3 = {0};
  cr_assert_eq(rtt_wait_ex(p->a.c, name, &two, 20000, RT_FOREVER, &s1), 0);
  rtt_expect_grant(&p->loop, &s1, 5000, "2 of 3 permits");
  cr_assert_eq(rtt_wait_ex(p->b.c, name, &two, 20000, RT_FOREVER, &s2), 0);
  expect_queued(&p->loop, &s2, "2 more of 3 permits");
  cr_assert_eq(rtt_wait_ex(p->b.c, name, &one, 20000, RT_FOREVER, &s3), 0);
  expect_waiting(p, &s3, "1 permit behind a request for 2");
  rtt_release(&p->loop, &s1, 0);
  rtt_expect_grant(&p->loop, &s2, 3000, "2 permits given back");
  rtt_expect_grant(&p->loop, &s3, 3000, "the last permit, in the same call");
  cr_assert_gt(s3.fence, s2.fence);
  rtt_release(&p->loop, &s2, 0);
  rtt_release(&p->loop, &s3, 0);
}

/* The observe channel "<prefix>:{<name>}:o" is in the resource's slot: an
 * observer subscribed on the shard that serves it hears every change. */
static void election_on_its_shard(pair *p, const char *name) {
  char chan[128], msg[256];
  rt_request_t ca = {RT_KIND_ELECTION, 0, 0, 0, "host-a", 6};
  rt_request_t cb = {RT_KIND_ELECTION, 0, 0, 0, "host-b", 6};
  rtt_req la = {0}, lb = {0};
  redisContext *obs = rtt_redis_at(owner_port(name));
  snprintf(chan, sizeof(chan), "%s:{%s}:o", rtt_prefix(), name);
  freeReplyObject(rtt_cmd(obs, "SSUBSCRIBE %s", chan));
  cr_assert_eq(rtt_wait_ex(p->a.c, name, &ca, 20000, RT_FOREVER, &la), 0);
  rtt_expect_grant(&p->loop, &la, 5000, "the first candidate");
  rtt_next_message(obs, msg, sizeof(msg));
  cr_assert(strncmp(msg, "o:", 2) == 0 && strstr(msg, ":host-a") != NULL, "%s",
            msg);
  cr_assert_eq(rtt_wait_ex(p->b.c, name, &cb, 20000, RT_FOREVER, &lb), 0);
  expect_queued(&p->loop, &lb, "a second candidate");
  cr_assert_eq(rt_proclaim(la.lock, "host-a2", 7, rtt_extend_cb, &la), 0);
  cr_assert(rtt_run_until(&p->loop, &la.ext_calls, 1, 5000));
  cr_assert_eq(la.ext_status, 0);
  rtt_next_message(obs, msg, sizeof(msg));
  cr_assert(strstr(msg, ":host-a2") != NULL, "%s", msg);
  rtt_release(&p->loop, &la, 0); /* resign: b leads in the same call */
  rtt_expect_grant(&p->loop, &lb, 3000, "the next candidate");
  cr_assert_gt(lb.fence, la.fence);
  rtt_next_message(obs, msg, sizeof(msg));
  cr_assert(strstr(msg, ":host-b") != NULL, "%s", msg);
  rtt_release(&p->loop, &lb, 0);
  rtt_next_message(obs, msg, sizeof(msg));
  cr_assert(strstr(msg, ":0::") != NULL, "nobody leads: %s", msg);
  rtt_redis_close(obs);
}

Test(cluster_kinds, a_read_write_lock_a_semaphore_and_an_election_per_shard) {
  char names[RTS_MAX_MASTERS][RTT_CLUSTER_NAME_MAX];
  pair p;
  rtt_cluster_start(&cluster, 3, 1);
  pair_open(&p);
  rtt_cluster_names(&cluster, "kind", names);
  read_write_lock_on_its_shard(&p, names[0]);
  semaphore_on_its_shard(&p, names[1]);
  election_on_its_shard(&p, names[2]);
  pair_close(&p);
}

/* ---- multi-locks ------------------------------------------------------- */

typedef struct multi_req {
  rt_multi_t *m;
  int calls, status;
} multi_req;

static void multi_cb(rt_multi_t *m, int status, void *data) {
  multi_req *r = data;
  r->m = status == 0 ? m : NULL;
  r->calls++;
  r->status = status;
}

static void wait_all(rt_client_t *c, const char *const *names, size_t n,
                     multi_req *r) {
  size_t lens[8];
  for (size_t i = 0; i < n; i++)
    lens[i] = strlen(names[i]);
  cr_assert_eq(rt_wait_all(c, (const void *const *)names, lens, n, 20000, 10000,
                           multi_cb, r, &r->m),
               0);
}

Test(cluster_kinds, a_multi_lock_takes_names_of_different_slots_in_order) {
  char names[RTS_MAX_MASTERS][RTT_CLUSTER_NAME_MAX];
  multi_req ma = {0}, mb = {0}, done = {0};
  pair p;
  rtt_cluster_start(&cluster, 3, 1);
  pair_open(&p);
  rtt_cluster_names(&cluster, "multi", names);
  const char *all[] = {names[0], names[1], names[2]};
  const char *two[] = {names[2], names[1]};
  wait_all(p.a.c, all, 3, &ma);
  cr_assert(rtt_run_until(&p.loop, &ma.calls, 1, 5000));
  cr_assert_eq(ma.status, 0);
  uint64_t fences[3];
  for (int i = 0; i < 3; i++) {
    fences[i] = rt_lock_fence(rt_multi_lock(ma.m, (size_t)i));
    redisContext *rc = rtt_redis_at(owner_port(names[i]));
    cr_assert_eq(rtt_qlen(rc, rtt_prefix(), names[i], strlen(names[i])), 1,
                 "%s is not held on the shard that serves it", names[i]);
    rtt_redis_close(rc);
  }
  wait_all(p.b.c, two, 2, &mb);
  rtt_run_for(&p.loop, 200);
  cr_assert_eq(mb.calls, 0, "b holds names a holds");
  cr_assert_eq(rt_signal_all(ma.m, multi_cb, &done), 0);
  cr_assert(rtt_run_until(&p.loop, &done.calls, 1, 5000));
  cr_assert_eq(done.status, 0);
  cr_assert(rtt_run_until(&p.loop, &mb.calls, 1, 5000));
  cr_assert_eq(mb.status, 0);
  cr_assert_gt(rt_lock_fence(rt_multi_lock(mb.m, 0)), fences[2]);
  cr_assert_gt(rt_lock_fence(rt_multi_lock(mb.m, 1)), fences[1]);
  done.calls = 0;
  cr_assert_eq(rt_signal_all(mb.m, multi_cb, &done), 0);
  cr_assert(rtt_run_until(&p.loop, &done.calls, 1, 5000));
  cr_assert_eq(done.status, 0);
  pair_close(&p);
}

/* ---- a crashed shared holder ----------------------------------------------- */

/* A reader whose client stops (its loop never runs again) holds a lease
 * of 1500 ms (time for the writer to queue behind it on a slow machine):
 * the writer queued behind it is granted once that lease ended by the
 * Redis clock, and a reader behind the writer after it. */
Test(cluster_kinds, a_crashed_shared_holder_is_skipped_after_its_lease) {
  char names[RTS_MAX_MASTERS][RTT_CLUSTER_NAME_MAX];
  uv_loop_t dead_loop;
  rtt_client dead;
  rtt_req rd = {0}, w = {0}, r = {0};
  pair p;
  rtt_cluster_start(&cluster, 3, 1);
  pair_open(&p);
  cr_assert_eq(uv_loop_init(&dead_loop), 0);
  rtt_open_ready(&dead, &dead_loop, &p.oa);
  rtt_cluster_names(&cluster, "crash", names);
  const char *name = names[2];
  cr_assert_eq(rtt_wait_ex(dead.c, name, &SHARED, 1500, RT_FOREVER, &rd), 0);
  rtt_expect_grant(&dead_loop, &rd, 5000, "the reader that will crash");
  uint64_t held_at = rd.at_ms;
  cr_assert_eq(rtt_wait_ex(p.a.c, name, &EXCLUSIVE, 20000, RT_FOREVER, &w), 0);
  expect_queued(&p.loop, &w, "the writer behind a reader");
  cr_assert_eq(rtt_wait_ex(p.b.c, name, &SHARED, 20000, RT_FOREVER, &r), 0);
  rtt_expect_grant(&p.loop, &w, 3000, "the writer behind a crashed reader");
  int64_t after = (int64_t)(w.at_ms - held_at);
  cr_assert(after >= 1450 && after < 2500,
            "the writer came %lld ms after the crashed reader's grant",
            (long long)after);
  cr_assert_gt(w.fence, rd.fence);
  cr_assert_eq(r.calls, 0, "a reader beside the writer");
  rtt_release(&p.loop, &w, 0);
  rtt_expect_grant(&p.loop, &r, 3000, "the reader after the writer");
  rtt_release(&p.loop, &r, 0);
  pair_close(&p);
  rtt_close(&dead); /* its lease is over: the release reports it lost */
  rtt_loop_finish(&dead_loop);
}
