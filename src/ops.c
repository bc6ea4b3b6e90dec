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
  rt__timeout_clear(&op->client->lp, &op->timeout);
  rt__res_unref(op->res);
  rt__free(op);
  if (lock != NULL) {
    lock->ops--;
    rt__lock_maybe_free(lock);
  }
}

/* The arguments after the channel prefix, per kind (see the scripts). */
static int op_args(const rt__op *op, const char **argv, size_t *lens,
                   char (*num)[24]) {
  const rt_lock_t *l = op->lock;
  int argc = 0;
  switch (op->kind) {
  case RT__OP_INSPECT: /* max waiters */
    argv[argc] = num[0];
    lens[argc++] = (size_t)snprintf(num[0], 24, "%lld", (long long)op->arg);
    return argc;
  case RT__OP_REAP: /* our oldest waiter here, or "" */
    argv[argc] = l != NULL ? l->id : "";
    lens[argc++] = l != NULL ? l->id_len : 0;
    return argc;
  default: /* request id */
    argv[argc] = l->id;
    lens[argc++] = l->id_len;
    break;
  }
  if (op->kind == RT__OP_ENQUEUE || op->kind == RT__OP_TRY ||
      op->kind == RT__OP_EXTEND) { /* lease ms */
    int64_t ttl = op->kind == RT__OP_EXTEND ? op->arg : l->ttl_ms;
    argv[argc] = num[1];
    lens[argc++] = (size_t)snprintf(num[1], 24, "%lld", (long long)ttl);
  }
  if (op->kind == RT__OP_ENQUEUE) { /* retry */
    argv[argc] = op->arg ? "1" : "0";
    lens[argc++] = 1;
  }
  if (op->kind == RT__OP_ENQUEUE || op->kind == RT__OP_TRY) { /* label */
    const rt__config *cfg = &op->client->cfg;
    argv[argc] = cfg->label != NULL ? cfg->label : "";
    lens[argc++] = cfg->label_len;
  }
  return argc;
}

static int op_write(rt__op *op) {
  rt_client_t *c = op->client;
  const rt__script *s = &rt__scripts[script_of(op->kind)];
  const rt__res *r = op->res;
  const char *argv[8 + RT__KEYS];
  size_t lens[8 + RT__KEYS];
  char num[2][24];
  int argc = 0;
  argv[argc] = op->evaled ? "EVAL" : "EVALSHA";
  lens[argc++] = op->evaled ? 4 : 7;
  argv[argc] = op->evaled ? s->body : s->sha;
  lens[argc++] = op->evaled ? s->len : 40;
  argv[argc] = "3";
  lens[argc++] = 1;
  for (int i = 0; i < RT__KEYS; i++) {
    argv[argc] = r->keys + (size_t)i * r->key_len;
    lens[argc++] = r->key_len;
  }
  argv[argc] = c->channel;
  lens[argc++] = c->chan_prefix_len;
  argc += op_args(op, argv + argc, lens + argc, num);
  return rt__conn_command(&c->cmd, argc, argv, lens, op);
}

static void op_timeout(rt__timeout *t) {
  rt__op *op = rt__container_of(t, rt__op, timeout);
  rt__queue_remove(&op->node);
  rt__lock_on_reply(op, NULL, RT_ETIMEDOUT);
}

static void complete_later(rt__later *l) {
  rt__op *op = rt__container_of(l, rt__op, later);
  rt__lock_on_reply(op, NULL, op->status);
}

static void outbox_retry(rt__timeout *t) {
  rt_client_t *c = rt__container_of(t, rt_client_t, outbox_retry);
  rt__outbox_flush(c);
}

void rt__op_send(rt__op *op) {
  rt_client_t *c = op->client;
  if (c->cmd.state == RT__CONN_UP &&
      (c->state == RT__C_READY || c->state == RT__C_CLOSING) &&
      op_write(op) == 0) {
    op->in_flight = 1;
    op->sent_ms = rt__mono_ms();
    c->in_flight++;
    if (op->kind == RT__OP_ENQUEUE)
      op->lock->enqueued = 1;
    return;
  }
  if (c->state == RT__C_CLOSING || c->state == RT__C_FAILED) {
    op->status = c->state == RT__C_FAILED ? c->fail_status : RT_ECANCELED;
    rt__defer(&c->lp, &op->later, complete_later);
    return;
  }
  rt__queue_insert_tail(&c->outbox, &op->node);
  if (c->cmd.state == RT__CONN_UP && !c->outbox_retry.armed)
    rt__timeout_set(&c->lp, &c->outbox_retry, outbox_retry, RT__WRITE_RETRY_MS);
  /* Waits have their own deadline and releases must not be dropped; any
   * other call gives up after the command timeout. */
  if (op->kind != RT__OP_ENQUEUE && op->kind != RT__OP_RELEASE)
    rt__timeout_set(&c->lp, &op->timeout, op_timeout, c->cfg.command_timeout_ms);
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
  if (reply != NULL && reply->type == REDIS_REPLY_ERROR)
    rt__client_error(c, "%s script: %.*s",
                     rt__scripts[script_of(op->kind)].name, (int)reply->len,
                     reply->str);
  rt__lock_on_reply(op, reply, status);
  rt__client_close_step(c);
}

/* Take every op out of the outbox; send or fail them. */
static void outbox_drain(rt_client_t *c, int status) {
  rt__queue q;
  rt__queue_init(&q);
  rt__queue_move(&c->outbox, &q);
  while (!rt__queue_empty(&q)) {
    rt__op *op = rt__queue_data(q.next, rt__op, node);
    rt__queue_remove(&op->node);
    rt__timeout_clear(&c->lp, &op->timeout);
    if (status == 0)
      rt__op_send(op);
    else
      rt__lock_on_reply(op, NULL, status);
  }
}

void rt__outbox_flush(rt_client_t *c) { outbox_drain(c, 0); }

void rt__outbox_fail(rt_client_t *c, int status) { outbox_drain(c, status); }
