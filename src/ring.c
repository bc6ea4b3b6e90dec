/* What a connection sends: each command is formatted onto its link and
 * remembered in the ring of unanswered commands (replies come back in send
 * order, so the ring says whose reply each one is); and the words of the
 * connection's last failure. */
#include <stdarg.h>
#include <stdio.h>

#include "conn.h"

void rt__conn_set_error(rt__conn *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->error, sizeof(c->error), fmt, ap);
  va_end(ap);
}

static int sent_push(rt__conn *c, rt__conn_reply_fn fn, void *arg) {
  if (c->sent_len == c->sent_cap) {
    size_t cap = c->sent_cap ? c->sent_cap * 2 : 16;
    rt__sent *n = rt__reallocarray(NULL, cap, sizeof(*n));
    if (n == NULL)
      return RT_ENOMEM;
    for (size_t i = 0; i < c->sent_len; i++)
      n[i] = c->sent[(c->sent_head + i) % c->sent_cap];
    rt__free(c->sent);
    c->sent = n;
    c->sent_cap = cap;
    c->sent_head = 0;
  }
  rt__sent *e = &c->sent[(c->sent_head + c->sent_len) % c->sent_cap];
  e->ms = rt__mono_ms();
  e->fn = fn;
  e->arg = arg;
  c->sent_len++;
  return 0;
}

rt__sent rt__conn_sent_pop(rt__conn *c) {
  rt__sent e = c->sent[c->sent_head];
  c->sent_head = (c->sent_head + 1) % c->sent_cap;
  c->sent_len--;
  return e;
}

/* Format one command and queue it on the link; its reply goes to fn. */
int rt__conn_send(rt__conn *c, rt__conn_reply_fn fn, void *arg, int argc,
                  const char **argv, const size_t *lens) {
  char *cmd;
  int err = sent_push(c, fn, arg);
  if (err != 0)
    return err;
  int n = redisFormatCommandArgv(&cmd, argc, argv, lens);
  err = n < 0 ? RT_ENOMEM : rt__link_send(c->link, cmd, (size_t)n);
  if (n >= 0)
    redisFreeCommand(cmd);
  if (err != 0)
    c->sent_len--; /* take back the entry just pushed */
  return err;
}
