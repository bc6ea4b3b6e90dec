/* Script calls: every Redis request of the client is one EVALSHA of a
 * script from lua/ on the command connection. A NOSCRIPT reply (server
 * restart, SCRIPT FLUSH) is answered by sending the same call as EVAL, which
 * also puts the script back in the server's cache. While the connection is
 * down, calls wait in the outbox; lock.c decides what a reply means. */
#include <stdio.h>
#include <string.h>

#include "client.h"
#include "reply.h"
#include "rt_scripts.h"

static int script_of(int kind) {
  switch (kind) {
  case RT__OP_ENQUEUE:
    return RT__SCRIPT_ENQUEUE;
  case RT__OP_RELEASE:
    return RT__SCRIPT_RELEASE;
  case RT__OP_EXTEND:
    return RT__SCRIPT_EXTEND;
  case RT__OP_TRY:
    return RT__SCRIPT_TRY;
  case RT__OP_REAP:
    return RT__SCRIPT_REAP;
  default:
    return RT__SCRIPT_INSPECT;
  }
}

rt__op *rt__op_new(rt_client_t *c, int kind, rt__res *res, rt_lock_t *lock) {
  rt__op *op = rt__calloc(1, sizeof(*op));
  if (op == NULL)
    return NULL;
  op->client = c;
  op->kind = kind;
  op->res = res;
  op->lock = lock;
  res->refs++;
  if (lock != NULL)
    lock->ops++;
  rt__queue_init(&op->node);
  return op;
}

void rt__op_free(rt__op *op) {
  rt_lock_t *lock = op->lock;
  rt__queue_remove(&op->node);
  rt__timeout_clear(op->client, &op->timeout);
  rt__res_unref(op->res);
  rt__free(op);
  if (lock != NULL) {
    lock->ops--;
    rt__lock_maybe_free(lock);
  }
}

static int op_write(rt__op *op) {
  rt_client_t *c = op->client;
  const rt__script *s = &rt__scripts[script_of(op->kind)];
  const rt__res *r = op->res;
  const char *argv[8];
  size_t lens[8];
  char num[24];
  int argc = 6;
  /* The resource keeps one key base; its two keys are made here (hiredis
   * copies the arguments before this returns). */
  char small[2 * 160];
  size_t klen = (size_t)r->base_len + 1;
  char *keys = 2 * klen <= sizeof(small) ? small : rt__malloc(2 * klen);
  if (keys == NULL)
    return RT_ENOMEM;
  memcpy(keys, r->base, r->base_len);
  keys[r->base_len] = 'q';
  memcpy(keys + klen, r->base, r->base_len);
  keys[klen + r->base_len] = 'h';

  argv[0] = op->evaled ? "EVAL" : "EVALSHA";
  lens[0] = op->evaled ? 4 : 7;
  argv[1] = op->evaled ? s->body : s->sha;
  lens[1] = op->evaled ? s->len : 40;
  argv[2] = "2";
  lens[2] = 1;
  argv[3] = keys;
  lens[3] = klen;
  argv[4] = keys + klen;
  lens[4] = klen;
  argv[5] = c->channel;
  lens[5] = c->chan_prefix_len;
  if (op->kind != RT__OP_REAP && op->kind != RT__OP_INSPECT) {
    argv[argc] = op->lock->id;
    lens[argc++] = op->lock->id_len;
  }
  if (op->kind == RT__OP_ENQUEUE) {
    argv[argc] = op->arg ? "1" : "0";
    lens[argc++] = 1;
  } else if (op->kind == RT__OP_EXTEND || op->kind == RT__OP_INSPECT) {
    argv[argc] = num;
    lens[argc++] = (size_t)snprintf(num, sizeof(num), "%lld", (long long)op->arg);
  }
  int err = rt__conn_command(&c->cmd, argc, argv, lens, op);
  if (keys != small)
    rt__free(keys);
  return err;
}

static void complete_later(rt__later *l) {
  rt__op *op = rt__container_of(l, rt__op, later);
  rt__lock_on_reply(op, NULL, op->status);
}

void rt__op_send(rt__op *op) {
  rt_client_t *c = op->client;
  if (c->cmd.state == RT__CONN_UP &&
      (c->state == RT__C_READY || c->state == RT__C_CLOSING) &&
      op_write(op) == 0) {
    op->in_flight = 1;
    c->in_flight++;
    if (op->kind == RT__OP_ENQUEUE)
      op->lock->enqueued = 1;
    return;
  }
  if (c->state == RT__C_CLOSING || c->state == RT__C_FAILED) {
    op->status = c->state == RT__C_FAILED ? c->fail_status : RT_ECANCELED;
    rt__defer(c, &op->later, complete_later);
    return;
  }
  rt__queue_insert_tail(&c->outbox, &op->node);
  /* Waits have their own deadline and releases must not be dropped; any
   * other call gives up after the command timeout. */
  if (op->kind != RT__OP_ENQUEUE && op->kind != RT__OP_RELEASE)
    rt__timeout_set(c, &op->timeout, RT__TO_OUTBOX, c->cfg.command_timeout_ms);
}

void rt__op_reply(rt__conn *conn, redisReply *reply, int status, void *arg) {
  rt__op *op = arg;
  rt_client_t *c = op->client;
  (void)conn;
  op->in_flight = 0;
  c->in_flight--;
  if (rt__reply_is_noscript(reply) && !op->evaled) {
    op->evaled = 1;
    rt__op_send(op);
    return;
  }
  rt__lock_on_reply(op, reply, status);
  rt__client_close_step(c);
}

void rt__op_timeout(rt__op *op) {
  rt__queue_remove(&op->node);
  rt__lock_on_reply(op, NULL, RT_ETIMEDOUT);
}

/* Take every op out of the outbox; send or fail them. */
static void outbox_drain(rt_client_t *c, int status) {
  rt__queue q;
  rt__queue_init(&q);
  rt__queue_move(&c->outbox, &q);
  while (!rt__queue_empty(&q)) {
    rt__op *op = rt__queue_data(q.next, rt__op, node);
    rt__queue_remove(&op->node);
    rt__timeout_clear(c, &op->timeout);
    if (status == 0)
      rt__op_send(op);
    else
      rt__lock_on_reply(op, NULL, status);
  }
}

void rt__outbox_flush(rt_client_t *c) { outbox_drain(c, 0); }

void rt__outbox_fail(rt_client_t *c, int status) { outbox_drain(c, status); }
