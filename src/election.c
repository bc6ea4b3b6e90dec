/* Elections on top of the lock state machine: a candidate's value and
 * rt_proclaim, which changes the value a leader stands for. */
#include <string.h>

#include "locks.h"
#include "reply.h"

/* An election value: printable ASCII (it rides last in Redis records and
 * notices, as a label does), at most RT_VALUE_MAX bytes. */
int rt__election_check_value(const char *value, size_t len) {
  if (len > RT_VALUE_MAX || (len > 0 && value == NULL))
    return RT_EINVAL;
  for (size_t i = 0; i < len; i++)
    if (value[i] < 0x20 || value[i] > 0x7e)
      return RT_EINVAL;
  return 0;
}

static void on_proclaim(rt__call *call, int status, const rt__answer *a) {
  rt__op *op = rt__op_of(call);
  rt_lock_t *l = op->lock;
  int st = status;
  rt__watchdog_answered(op->res, status, a);
  rt__free((void *)call->label); /* rt_proclaim's copy */
  if (status == 0 && a->u.proclaim.code != RT__PROCLAIM_DONE) {
    st = RT_ELOST;
    rt__lock_turn_lost(l);
  }
  if (op->cb.lock != NULL)
    op->cb.lock(l, st, op->data);
  rt__op_free(op);
}

int rt_proclaim(rt_lock_t *l, const char *value, size_t value_len,
                rt_lock_cb cb, void *data) {
  int err = rt__check_held(l);
  if (err == 0 && (strcmp(l->res->kind, "e") != 0 ||
                   rt__election_check_value(value, value_len) != 0))
    err = RT_EINVAL;
  if (err != 0)
    return err;
  char *copy = rt__malloc(value_len + 1);
  rt__op *op = copy != NULL ? rt__op_new(l->client, RT__CALL_PROCLAIM, l->res,
                                         l, on_proclaim)
                            : NULL;
  if (op == NULL) {
    rt__free(copy);
    return RT_ENOMEM;
  }
  if (value_len > 0)
    memcpy(copy, value, value_len);
  copy[value_len] = '\0';
  op->call.label = copy;
  op->call.label_len = value_len;
  op->cb.lock = cb;
  op->data = data;
  rt__call_send(&op->call);
  return 0;
}
