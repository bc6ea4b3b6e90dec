/* rt_synchronize(): acquire, run the user's body, release when the body
 * says it is done, and report one final status, on every path. */
#include "locks.h"

typedef struct rt__sync {
  rt_body_cb body;
  rt_done_cb done;
  void *data;
  int status;    /* the body's status from rt_done() */
  int releasing; /* rt_done() was called */
  int finished;  /* done() ran */
} rt__sync;

static void closing(rt_lock_t *l);
static void freed(rt_lock_t *l);

/* What the lock state machine tells us about a lock of rt_synchronize. */
static const rt__lock_hooks sync_hooks = {closing, freed};

/* The helper of l, or NULL if l is not one of rt_synchronize's. */
static rt__sync *sync_of(const rt_lock_t *l) {
  return l != NULL && l->hooks == &sync_hooks ? l->hooks_data : NULL;
}

static void finish(rt_lock_t *l, rt__sync *s, int status) {
  s->finished = 1;
  s->done(l->client, status, s->data);
}

static void released(rt_lock_t *l, int status, void *data) {
  rt__sync *s = data;
  finish(l, s, s->status != 0 ? s->status : status);
}

static void acquired(rt_lock_t *l, int status, void *data) {
  rt__sync *s = sync_of(l);
  RT__UNUSED(data);
  if (status < 0)
    finish(l, s, status);
  else
    s->body(l, s->data);
}

int rt_synchronize(rt_client_t *c, const void *name, size_t len, int64_t ttl_ms,
                   int64_t timeout_ms, rt_body_cb body, rt_done_cb done,
                   void *data) {
  if (c == NULL)
    return RT_EINVAL;
  if (body == NULL || done == NULL)
    return rt__client_usable(c) != 0 ? rt__client_usable(c) : RT_ENOCB;
  rt__sync *s = rt__calloc(1, sizeof(*s));
  if (s == NULL)
    return RT_ENOMEM;
  s->body = body;
  s->done = done;
  s->data = data;
  rt_lock_t *l;
  int err = rt_wait(c, name, len, ttl_ms, timeout_ms, acquired, data, &l);
  if (err != 0) {
    rt__free(s);
    return err;
  }
  /* Before any callback: none runs inside rt_wait. */
  l->hooks = &sync_hooks;
  l->hooks_data = s;
  return 0;
}

int rt_done(rt_lock_t *l, int status) {
  rt__sync *s = sync_of(l);
  if (s == NULL)
    return RT_EINVAL;
  if (s->releasing || s->finished)
    return RT_ERELEASED;
  s->releasing = 1;
  s->status = status;
  int err = rt_signal(l, released, s);
  if (err != 0)
    s->releasing = 0; /* nothing started: the body may call rt_done again */
  return err;
}

/* The client closes under a running body: done() gets RT_ECANCELED now,
 * and a later rt_done() reports RT_ERELEASED. */
static void closing(rt_lock_t *l) {
  rt__sync *s = sync_of(l);
  if (!s->finished) {
    s->releasing = 1;
    finish(l, s, RT_ECANCELED);
  }
}

static void freed(rt_lock_t *l) {
  rt__free(l->hooks_data);
  l->hooks = NULL;
  l->hooks_data = NULL;
}
