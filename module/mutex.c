/* The mutex's commands: redturn.enqueue, .try, .release, .reap, .extend and
 * .inspect, each lua/<name>.lua in C on prelude.c's helpers, called like
 * FCALL without the function name (numkeys, q h m, then the script's ARGV)
 * and answering what the script answers, element for element. */
#include "mutex.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "command.h"
#include "prelude.h"

/* HMGET m id '#': the member value and the head count (p NULL: nil). */
static void hmget_id_head(rtm_call *c, rtm_str id, rtm_str *mv, rtm_str *head) {
  rtm_hget2(c, id, "#", mv, head);
}

static long long llen(rtm_call *c) { return rtm_llen(c); }

/* lua/enqueue.lua */
static void enqueue(rtm_call *c) {
  rtm_str id = c->argv[1], label = rtm_opt_arg(c, 4);
  int64_t ttl = rtm_number_arg(c, 2, "the lease", 1);
  int64_t now, now_us;
  rtm_now(c, &now, &now_us);
  rtm_holder hd;
  rtm_holder_get(c, now, &hd);
  if (rtm_eq(hd.id, id)) {
    long long v[] = {RTM_GRANTED, hd.fence, hd.deadline - now, hd.deadline,
                     now};
    rtm_reply_ints(c->ctx, v, 5);
    return;
  }
  long long len = llen(c);
  if (hd.id.p == NULL && len == 0)
    /* A new request, whether it takes the lock or waits out a failover
     * hold: refused before held_off's first write (the era key). */
    rtm_refuse_new_if_oom(c);
  if (hd.id.p == NULL && len == 0 && rtm_held_off(c, now) == 0) {
    /* Free, nobody waits: the uncontended case. */
    int64_t fence, deadline;
    rtm_take_free(c, id, ttl, now, now_us, label, &fence, &deadline);
    long long v[] = {RTM_GRANTED, fence, ttl, deadline, now};
    rtm_reply_ints(c->ctx, v, 5);
    return;
  }
  rtm_str mv, head;
  hmget_id_head(c, id, &mv, &head);
  long long pos;
  int placed = rtm_place(c, mv, head, len, &pos);
  if (!placed)
    rtm_refuse_new_if_oom(c); /* before the first write */
  if (rtm_eqc(rtm_opt_arg(c, 3), "1") && head.p != NULL)
    rtm_settle_start(c, now); /* a client back after a reconnect */
  if (!placed) {
    /* New, or a member Redis lost from q (its HSET below replaces it). */
    long long h = 0;
    if (head.p != NULL && rtm_parse_ll(head, &h) != 0)
      h = 0;
    len = rtm_int(RTM_CALL(c, "RPUSH", "!sb", c->q, id.p, id.len));
    pos = len - 1;
    rtm_str lease = c->argv[2];
    size_t cap = 24 + lease.len + 1 + label.len + 1;
    char *ticket = rtm.PoolAlloc(c->ctx, cap);
    int n =
        snprintf(ticket, cap, "%lld:%.*s", h + pos, (int)lease.len, lease.p);
    if (label.len > 0)
      n += snprintf(ticket + n, cap - (size_t)n, ":%.*s", (int)label.len,
                    label.p);
    if (len > 1 && head.p != NULL) {
      RTM_CALL(c, "HSET", "!sbb", c->m, id.p, id.len, ticket, (size_t)n);
    } else {
      /* q or m was just made (m always has '#'). */
      char hs[24];
      int hn = snprintf(hs, sizeof(hs), "%lld", h);
      rtm_str st = rtm_settled_stamp();
      RTM_CALL(c, "HSET", "!sbbcbcb", c->m, id.p, id.len, ticket, (size_t)n,
               "#", hs, (size_t)hn, "@", st.p, st.len);
      if (hd.id.p != NULL)
        rtm_touch(c, hd.deadline - now);
    }
  }
  if (hd.id.p != NULL) {
    long long v[] = {RTM_QUEUED, pos + 1, hd.deadline - now, now, 0};
    rtm_reply_ints(c->ctx, v, 5);
    return;
  }
  /* Nobody holds the lock: the first live waiter gets it, maybe this one. */
  rtm_grant g;
  rtm_grant_next(c, now, now_us, NULL, id, &g);
  if (rtm_eq(g.id, id)) {
    long long v[] = {RTM_GRANTED, g.fence, g.ttl, g.deadline, now};
    rtm_reply_ints(c->ctx, v, 5);
    return;
  }
  long long left = g.id.p != NULL ? g.deadline - now : rtm_held_off(c, now);
  hmget_id_head(c, id, &mv, &head);
  if (!rtm_place(c, mv, head, llen(c), &pos))
    pos = 0;
  long long v[] = {RTM_QUEUED, pos + (g.id.p != NULL ? 1 : 0), left, now,
                   g.more};
  rtm_reply_ints(c->ctx, v, 5);
}

/* lua/try.lua */
static void try_(rtm_call *c) {
  rtm_str id = c->argv[1];
  int64_t ttl = rtm_number_arg(c, 2, "the lease", 1);
  int64_t now, now_us;
  rtm_now(c, &now, &now_us);
  rtm_holder hd;
  rtm_holder_get(c, now, &hd);
  long long len = llen(c);
  if (rtm_eq(hd.id, id)) { /* a retry of a try that was granted */
    long long v[] = {RTM_GRANTED, hd.fence, hd.deadline - now, hd.deadline,
                     now};
    rtm_reply_ints(c->ctx, v, 5);
    return;
  }
  int more = 0, held = hd.id.p != NULL;
  int64_t deadline = hd.deadline;
  if (!held && len > 0) {
    /* A lease ended with waiters behind it: they come first. */
    rtm_grant g;
    rtm_grant_next(c, now, now_us, NULL, (rtm_str){NULL, 0}, &g);
    held = g.id.p != NULL;
    deadline = g.deadline;
    more = g.more;
    len = held ? 1 : llen(c);
  }
  if (held || len > 0 || rtm_held_off(c, now) > 0) { /* busy, or held off */
    long long v[] = {RT_PROTO_TRY_BUSY,
                     held ? deadline - now : rtm_held_off(c, now), now, more};
    rtm_reply_ints(c->ctx, v, 4);
    return;
  }
  int64_t fence;
  rtm_refuse_new_if_oom(c);
  rtm_take_free(c, id, ttl, now, now_us, rtm_opt_arg(c, 3), &fence, &deadline);
  long long v[] = {RTM_GRANTED, fence, ttl, deadline, now};
  rtm_reply_ints(c->ctx, v, 5);
}

/* lua/release.lua */
static void release(rtm_call *c) {
  enum {
    RELEASED = RT_PROTO_RELEASE_RELEASED,
    CANCELED = RT_PROTO_RELEASE_CANCELED
  };
  rtm_str id = c->argv[1];
  int64_t now, now_us;
  rtm_now(c, &now, &now_us);
  rtm_holder hd;
  rtm_holder_get(c, now, &hd);
  rtm_grant g;
  if (rtm_eq(hd.id, id)) {
    /* The next holder's record replaces this one; with none, it goes. */
    rtm_grant_next(c, now, now_us, &hd.fence, (rtm_str){NULL, 0}, &g);
    if (g.id.p == NULL)
      rtm_del_h(c);
    long long v[] = {RELEASED, g.more};
    rtm_reply_ints(c->ctx, v, 2);
    return;
  }
  long long result = RT_PROTO_RELEASE_NOT_FOUND, more = 0;
  if (rtm_hdel(c, id)) {
    result = CANCELED;
    if (hd.id.p != NULL && rtm_eq(rtm_front(c), id)) {
      /* It was next in line: the one behind it watches the holder now. */
      rtm_str pid, pv;
      rtm_pop(c, &pid, &pv);
      rtm_tell_next(c, hd.id, hd.deadline, RTM_SKIP_MAX);
    }
  }
  if (hd.id.p == NULL) {
    /* Nobody holds the lock (a lease ran out): hand it on now. */
    rtm_grant_next(c, now, now_us, NULL, (rtm_str){NULL, 0}, &g);
    more = g.more;
  }
  long long v[] = {result, more};
  rtm_reply_ints(c->ctx, v, 2);
}

/* lua/reap.lua */
static void reap(rtm_call *c) {
  rtm_str id = c->argv[1];
  int64_t now, now_us;
  rtm_now(c, &now, &now_us);
  rtm_holder hd;
  rtm_holder_get(c, now, &hd);
  int more = 0;
  rtm_str hid = hd.id;
  int64_t deadline = hd.deadline;
  if (hid.p == NULL && llen(c) > 0) {
    rtm_grant g;
    rtm_grant_next(c, now, now_us, NULL, (rtm_str){NULL, 0}, &g);
    hid = g.id;
    deadline = g.deadline;
    more = g.more;
  }
  long long left = hid.p != NULL ? deadline - now : -1;
  long long v[] = {left, RT_PROTO_REAP_GONE, 0, now, more};
  if (id.len == 0) {
    rtm_reply_ints(c->ctx, v, 5);
    return;
  }
  if (rtm_eq(hid, id)) {
    v[1] = RT_PROTO_REAP_HOLDER;
    rtm_reply_ints(c->ctx, v, 5);
    return;
  }
  rtm_str mv, head;
  hmget_id_head(c, id, &mv, &head);
  long long pos;
  if (rtm_place(c, mv, head, llen(c), &pos)) {
    v[1] = RT_PROTO_REAP_WAITING;
    v[2] = pos + (hid.p != NULL ? 1 : 0);
  }
  rtm_reply_ints(c->ctx, v, 5);
}

/* lua/extend.lua */
static void extend(rtm_call *c) {
  rtm_str id = c->argv[1];
  int64_t ttl = rtm_number_arg(c, 2, "the lease", 1);
  int64_t now, now_us;
  rtm_now(c, &now, &now_us);
  rtm_holder hd;
  rtm_holder_get(c, now, &hd);
  if (!rtm_eq(hd.id, id)) {
    long long v[] = {RT_PROTO_EXTEND_NOT_HELD, now};
    rtm_reply_ints(c->ctx, v, 2);
    return;
  }
  rtm_set_holder(c, id, ttl, hd.fence, now + ttl, hd.granted, hd.label);
  rtm_touch(c, ttl);
  long long v[] = {RT_PROTO_EXTEND_EXTENDED, ttl, now + ttl, now};
  rtm_reply_ints(c->ctx, v, 4);
}

/* lua/inspect.lua */
static void inspect(rtm_call *c) {
  long long want = rtm_number_arg(c, 1, "the number of waiters to list", 0);
  int64_t now, now_us;
  rtm_now(c, &now, &now_us);
  rtm_holder hd;
  rtm_holder_get(c, now, &hd);
  llen(c); /* every key is read, so a wrong type always shows */
  long long n = rtm_int(RTM_CALL(c, "HLEN", "s", c->m));
  n -= rtm_int(RTM_CALL(c, "HEXISTS", "sc", c->m, "#"));
  n -= rtm_int(RTM_CALL(c, "HEXISTS", "sc", c->m, "@"));
  /* Listed waiters and labels point into replies kept until return; the
   * reply is written after the walk, so the arrays are collected first. */
  RedisModuleCallReply *chunks[RTM_SKIP_MAX], *lives[RTM_SKIP_MAX];
  long long listed = 0, start = 0;
  int nchunks = 0;
  while (listed < want && nchunks < RTM_SKIP_MAX) {
    long long take = want - listed < 1000 ? want - listed : 1000;
    RedisModuleCallReply *ids =
        RTM_CALL(c, "LRANGE", "sll", c->q, start, start + take - 1);
    size_t k = rtm.CallReplyLength(ids);
    if (k == 0)
      break;
    RedisModuleString *args[1001];
    args[0] = c->m;
    for (size_t i = 0; i < k; i++) {
      rtm_str s = rtm_string(rtm.CallReplyArrayElement(ids, i));
      args[1 + i] = rtm.CreateString(c->ctx, s.p, s.len);
    }
    RedisModuleCallReply *live = RTM_CALL(c, "HMGET", "v", args, k + 1);
    for (size_t i = 0; i < k; i++) {
      rtm_str v = rtm_string(rtm.CallReplyArrayElement(live, i));
      if (v.p == NULL)
        continue;
      /* Read now, as the reply will: a malformed member fails the call
       * here, before the reply has begun (failing inside the reply's
       * arrays sent a broken reply, and the client waited for the rest). */
      int64_t ticket, ttl;
      rtm_str label;
      rtm_member(c, v, &ticket, &ttl, &label);
      listed++;
    }
    chunks[nchunks] = ids;
    lives[nchunks++] = live;
    start += (long long)k;
  }
  RedisModuleCtx *ctx = c->ctx;
  rtm.ReplyWithArray(ctx, 9);
  rtm.ReplyWithLongLong(ctx, now);
  rtm.ReplyWithLongLong(ctx, n);
  rtm.ReplyWithLongLong(ctx, hd.id.p ? hd.fence : 0);
  rtm.ReplyWithLongLong(ctx, hd.id.p ? hd.deadline : 0);
  rtm.ReplyWithLongLong(ctx, hd.id.p ? hd.granted : 0);
  rtm.ReplyWithStringBuffer(ctx, hd.id.p ? hd.id.p : "", hd.id.len);
  for (int pass = 0; pass < 2; pass++) {
    if (pass == 1)
      rtm.ReplyWithStringBuffer(ctx, hd.id.p ? hd.label.p : "",
                                hd.id.p ? hd.label.len : 0);
    rtm.ReplyWithArray(ctx, listed);
    for (int j = 0; j < nchunks; j++)
      for (size_t i = 0; i < rtm.CallReplyLength(chunks[j]); i++) {
        rtm_str v = rtm_string(rtm.CallReplyArrayElement(lives[j], i));
        if (v.p == NULL)
          continue;
        if (pass == 0) {
          rtm_str id = rtm_string(rtm.CallReplyArrayElement(chunks[j], i));
          rtm.ReplyWithStringBuffer(ctx, id.p, id.len);
        } else {
          int64_t ticket, ttl;
          rtm_str label;
          rtm_member(c, v, &ticket, &ttl, &label);
          rtm.ReplyWithStringBuffer(ctx, label.p, label.len);
        }
      }
  }
}

int rtm_cmd_enqueue(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
  return rtm_run(ctx, argv, argc, "redturn.enqueue", RTM_MUTEX_KEYS, 3,
                 "3 q h m prefix id lease [retry [label]]", enqueue);
}

int rtm_cmd_try(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
  return rtm_run(ctx, argv, argc, "redturn.try", RTM_MUTEX_KEYS, 3,
                 "3 q h m prefix id lease [label]", try_);
}

int rtm_cmd_release(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
  return rtm_run(ctx, argv, argc, "redturn.release", RTM_MUTEX_KEYS, 2,
                 "3 q h m prefix id", release);
}

int rtm_cmd_reap(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
  return rtm_run(ctx, argv, argc, "redturn.reap", RTM_MUTEX_KEYS, 2,
                 "3 q h m prefix id", reap);
}

int rtm_cmd_extend(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
  return rtm_run(ctx, argv, argc, "redturn.extend", RTM_MUTEX_KEYS, 3,
                 "3 q h m prefix id lease", extend);
}

int rtm_cmd_inspect(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
  return rtm_run(ctx, argv, argc, "redturn.inspect", RTM_MUTEX_KEYS, 2,
                 "3 q h m prefix count", inspect);
}
