/* Multi-locks: several resources taken all-or-nothing, one fair wait at a
 * time in one global order (the names' byte order), so two multi-locks
 * sharing resources never wait for each other in a cycle. Built on the
 * public lock calls only. */
#include <string.h>

#include "locks.h"

struct rt_multi_s {
  rt_client_t *client;
  rt_multi_cb cb; /* the wait's, then rt_signal_all's */
  void *data;
  int64_t ttl_ms;
  uint64_t deadline; /* monotonic ms; 0: none */
  size_t n;
  size_t next;        /* the wait in flight, in order[] */
  size_t pending;     /* releases not answered yet */
  int status;         /* the first error of the wait or the releases */
  int held;           /* every resource was granted */
  rt_lock_t *waiting; /* the wait in flight, to cancel it */
  size_t *order;      /* indexes into names, in acquiring order */
  rt_lock_t **locks;  /* by the caller's index; NULL: not held */
  const char **names; /* copies, by the caller's index */
  size_t *lens;
};

/* The name copies and arrays live in the same block as the struct. */
static rt_multi_t *multi_new(size_t n, const void *const *names,
                             const size_t *lens) {
  size_t bytes = 0;
  for (size_t i = 0; i < n; i++)
    bytes += lens[i];
  rt_multi_t *m = rt__calloc(
      1, sizeof(*m) +
             n * (2 * sizeof(size_t) + sizeof(rt_lock_t *) + sizeof(char *)) +
             bytes);
  if (m == NULL)
    return NULL;
  m->n = n;
  m->order = (size_t *)(m + 1);
  m->lens = m->order + n;
  m->locks = (rt_lock_t **)(m->lens + n);
  m->names = (const char **)(m->locks + n);
  char *p = (char *)(m->names + n);
  for (size_t i = 0; i < n; i++) {
    memcpy(p, names[i], lens[i]);
    m->names[i] = p;
    m->lens[i] = lens[i];
    m->order[i] = i;
    p += lens[i];
  }
  return m;
}

static int name_cmp(const rt_multi_t *m, size_t a, size_t b) {
  size_t la = m->lens[a], lb = m->lens[b];
  int c = memcmp(m->names[a], m->names[b], la < lb ? la : lb);
  return c != 0 ? c : (la > lb) - (la < lb);
}

/* order[] by name (insertion sort: multi-locks are small); RT_EINVAL if a
 * name repeats (the second wait would queue behind the first for ever). */
static int sort_names(rt_multi_t *m) {
  for (size_t i = 1; i < m->n; i++) {
    size_t x = m->order[i], j = i;
    for (; j > 0 && name_cmp(m, m->order[j - 1], x) > 0; j--)
      m->order[j] = m->order[j - 1];
    m->order[j] = x;
  }
  for (size_t i = 1; i < m->n; i++)
    if (name_cmp(m, m->order[i - 1], m->order[i]) == 0)
      return RT_EINVAL;
  return 0;
}

/* A release of one resource answered; the last one reports. */
static void on_released(rt_lock_t *l, int status, void *data) {
  rt_multi_t *m = data;
  RT__UNUSED(l);
  if (m->status == 0)
    m->status = status;
  if (--m->pending > 0)
    return;
  m->cb(m, m->status, m->data);
  rt__free(m);
}

/* Release every resource held (the wait failed, or rt_signal_all); the
 * callback comes with m->status once all are answered. */
static void release_held(rt_multi_t *m) {
  m->pending = 1; /* until every release is sent */
  for (size_t i = 0; i < m->n; i++) {
    if (m->locks[i] == NULL)
      continue;
    if (rt_signal(m->locks[i], on_released, m) == 0)
      m->pending++;
    else if (m->status == 0)
      m->status = RT_ELOST; /* closing: the client gives them back */
    m->locks[i] = NULL;
  }
  on_released(NULL, 0, m);
}

static void wait_next(rt_multi_t *m);

static void on_granted(rt_lock_t *l, int status, void *data) {
  rt_multi_t *m = data;
  m->waiting = NULL;
  if (status != 0) {
    m->status = status;
    release_held(m);
    return;
  }
  m->locks[m->order[m->next++]] = l;
  /* Keep its lease running while the rest are waited for (all or
   * nothing: a lease that ends meanwhile would hand it to someone else). */
  if (m->next < m->n)
    (void)rt_lock_auto_renew(l, RT_RENEW_DEFAULT);
  wait_next(m);
}

/* One extend of the check before reporting answered; the last one
 * reports: 0 only if every lock is still ours with a fresh lease. */
static void on_checked(rt_lock_t *l, int status, void *data) {
  rt_multi_t *m = data;
  RT__UNUSED(l);
  if (m->status == 0)
    m->status = status;
  if (--m->pending > 0)
    return;
  if (m->status != 0) {
    release_held(m); /* reports m->status (RT_ELOST: one was lost) */
    return;
  }
  m->held = 1;
  m->cb(m, 0, m->data);
}

/* Every resource was granted: the ones taken before the last stop renewing
 * and get a full lease again, with Redis' word that each is still ours
 * (rt_extend refuses a lease that ended: RT_ELOST). So 0 is reported only
 * with every lock held and its lease running from about now; else all are
 * released and the first error reported. */
static void check_held(rt_multi_t *m) {
  m->pending = 1; /* until every extend is sent */
  for (size_t k = 0; k + 1 < m->n; k++) {
    rt_lock_t *l = m->locks[m->order[k]];
    (void)rt_lock_auto_renew(l, RT_RENEW_OFF);
    int err = rt_lock_state(l) == RT_LOCK_HELD
                  ? rt_extend(l, m->ttl_ms, on_checked, m)
                  : RT_ELOST;
    if (err == 0)
      m->pending++;
    else if (m->status == 0)
      m->status = err;
  }
  on_checked(NULL, 0, m);
}

/* Wait for the next resource in order, with what is left of the deadline;
 * or, all held, report. */
static void wait_next(rt_multi_t *m) {
  if (m->next == m->n) {
    check_held(m);
    return;
  }
  int64_t timeout = RT_FOREVER;
  if (m->deadline != 0) {
    uint64_t now = rt__mono_ms();
    timeout = m->deadline > now ? (int64_t)(m->deadline - now) : 1;
  }
  size_t i = m->order[m->next];
  int err = rt_wait(m->client, m->names[i], m->lens[i], m->ttl_ms, timeout,
                    on_granted, m, &m->waiting);
  if (err != 0) {
    m->status = err;
    release_held(m);
  }
}

int rt_wait_all(rt_client_t *c, const void *const *names, const size_t *lens,
                size_t n, int64_t ttl_ms, int64_t timeout_ms, rt_multi_cb cb,
                void *data, rt_multi_t **out) {
  if (names == NULL || lens == NULL || n == 0 || n > RT_MULTI_MAX)
    return RT_EINVAL;
  /* The first wait checks the rest of what every wait would check. */
  int64_t ttl;
  int err =
      rt__check_request(c, names[0], lens[0], ttl_ms, (const void *)cb, &ttl);
  for (size_t i = 1; err == 0 && i < n; i++)
    err = rt__check_name(names[i], lens[i]);
  if (err == 0)
    err = rt__check_timeout(timeout_ms);
  if (err != 0)
    return err;
  rt_multi_t *m = multi_new(n, names, lens);
  if (m == NULL)
    return RT_ENOMEM;
  if ((err = sort_names(m)) != 0) {
    rt__free(m);
    return err;
  }
  m->client = c;
  m->cb = cb;
  m->data = data;
  m->ttl_ms = ttl;
  if (timeout_ms != RT_FOREVER)
    m->deadline = rt__mono_ms() + (uint64_t)timeout_ms;
  size_t first = m->order[0];
  err = rt_wait(c, m->names[first], m->lens[first], ttl, timeout_ms, on_granted,
                m, &m->waiting);
  if (err != 0) {
    rt__free(m);
    return err;
  }
  if (out != NULL)
    *out = m;
  return 0;
}

int rt_cancel_all(rt_multi_t *m) {
  if (m == NULL)
    return RT_EINVAL;
  if (m->held)
    return RT_EHELD;
  if (m->waiting == NULL)
    return RT_ERELEASED;
  return rt_cancel(m->waiting);
}

int rt_signal_all(rt_multi_t *m, rt_multi_cb cb, void *data) {
  if (m == NULL || cb == NULL)
    return m == NULL ? RT_EINVAL : RT_ENOCB;
  if (!m->held)
    return m->waiting != NULL ? RT_ENOTHELD : RT_ERELEASED;
  if (m->client->state == RT__C_CLOSING) {
    rt__free(m); /* the close gives the locks back */
    return RT_ECLOSED;
  }
  m->held = 0;
  m->cb = cb;
  m->data = data;
  release_held(m);
  return 0;
}

rt_lock_t *rt_multi_lock(const rt_multi_t *m, size_t i) {
  return m != NULL && i < m->n ? m->locks[i] : NULL;
}
