/* The client's life cycle: open, the two connections' events, the heap of
 * resource table, and close. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <uuid/uuid.h>

#include "client.h"

/* ---- the Redis clock seen from here --------------------------------------- */

/* Each sample bounds the offset from above (Redis read its clock after we
 * sent); an older bound may have drifted, so it ages by the allowed drift
 * and the smaller bound wins. */
static int64_t offset_bound(const rt_client_t *c, uint64_t at_ms) {
  uint64_t age = at_ms > c->offset_at_ms ? at_ms - c->offset_at_ms : 0;
  return c->offset_ms + (int64_t)(age * RT__DRIFT_PER_MILLE / 1000) + 1;
}

void rt__clock_sample(rt_client_t *c, int64_t now_ms, uint64_t sent_ms) {
  if (now_ms <= 0 || sent_ms == 0)
    return;
  int64_t sample = now_ms - (int64_t)sent_ms;
  if (c->offset_at_ms == 0 || sample < offset_bound(c, sent_ms)) {
    c->offset_ms = sample;
    c->offset_at_ms = sent_ms;
  }
}

uint64_t rt__clock_local(const rt_client_t *c, int64_t redis_ms) {
  uint64_t now = rt__mono_ms();
  if (c->offset_at_ms == 0)
    return now; /* no sample yet: assume it passed already */
  int64_t local = redis_ms - offset_bound(c, now);
  return local > 0 ? (uint64_t)local : 0;
}

/* ---- resources --------------------------------------------------------- */

rt__res *rt__res_get(rt_client_t *c, const void *name, size_t len) {
  rt__res *r = rt__map_get(&c->resources, name, len);
  if (r != NULL) {
    r->refs++;
    return r;
  }
  size_t base_len;
  char *base = rt__key_base(c->cfg.prefix, c->cfg.prefix_len, name, len,
                            &base_len);
  if (base == NULL)
    return NULL;
  /* One block: the struct, the name (NUL-terminated), the keys. Made
   * once here, so sending a script call never allocates for its keys. */
  size_t key_len = base_len + 1;
  r = rt__malloc(sizeof(*r) + len + 1 + RT__KEYS * key_len);
  if (r == NULL) {
    rt__free(base);
    return NULL;
  }
  memset(r, 0, sizeof(*r));
  r->name = (char *)(r + 1);
  memcpy(r->name, name, len);
  r->name[len] = '\0';
  r->keys = r->name + len + 1;
  for (size_t i = 0; i < RT__KEYS; i++) {
    memcpy(r->keys + i * key_len, base, base_len);
    r->keys[i * key_len + base_len] = RT__KEY_SUFFIXES[i];
  }
  r->key_len = (uint32_t)key_len;
  rt__free(base);
  if (rt__map_put(&c->resources, r->name, len, r) != 0) {
    rt__free(r);
    return NULL;
  }
  r->client = c;
  r->len = (uint32_t)len;
  r->refs = 1;
  rt__queue_init(&r->waiters);
  return r;
}

void rt__res_unref(rt__res *r) {
  if (--r->refs > 0)
    return;
  rt_client_t *c = r->client;
  rt__timeout_clear(&c->lp, &r->watchdog);
  rt__map_del(&c->resources, r->name, r->len);
  rt__free(r);
}

/* ---- connection events --------------------------------------------------- */

int rt__client_usable(const rt_client_t *c) {
  if (c->state == RT__C_CLOSING)
    return RT_ECLOSED;
  if (c->state == RT__C_FAILED)
    return c->fail_status;
  return 0;
}

void rt__client_error(rt_client_t *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->last_error, sizeof(c->last_error), fmt, ap);
  va_end(ap);
}

/* connect_cb runs exactly once: on the first success, the first failure,
 * or with RT_ECANCELED when the client is closed before either. */
static void report_connect(rt_client_t *c, int status) {
  if (c->connect_reported)
    return;
  c->connect_reported = 1;
  if (c->connect_cb != NULL)
    c->connect_cb(c, status, c->connect_data);
}

static void became_ready(rt_client_t *c) {
  int again = c->ever_ready;
  c->state = RT__C_READY;
  c->ever_ready = 1;
  rt__outbox_flush(c);
  if (again) {
    c->stats.reconnects++;
    rt__lock_reconcile(c); /* grants sent while we were away */
  } else {
    report_connect(c, 0);
  }
}

static void conn_up(rt__conn *conn) {
  rt_client_t *c = conn->owner;
  if (c->state == RT__C_CLOSING)
    return;
  if (c->cmd.state == RT__CONN_UP && c->sub.state == RT__CONN_UP)
    became_ready(c);
}

static void conn_down(rt__conn *conn, int status) {
  rt_client_t *c = conn->owner;
  if (c->state == RT__C_CLOSING)
    return;
  rt__client_error(c, "%s", conn->error);
  if (!c->ever_ready && c->cfg.retry_first_connect) {
    /* Keep trying as after a lost connection; connect_cb waits. */
    rt__conn_retry_later(conn);
    return;
  }
  if (!c->ever_ready) {
    /* The first connect failed: report it and give up; the user closes. */
    if (c->state == RT__C_FAILED)
      return;
    c->state = RT__C_FAILED;
    c->fail_status = status;
    rt__conn_close(&c->cmd);
    rt__conn_close(&c->sub);
    report_connect(c, status);
    rt__outbox_fail(c, status); /* the queued waits fail with it */
    return;
  }
  c->state = RT__C_RECOVERING;
  rt__conn_retry_later(conn);
}

static void conn_message(rt__conn *conn, const char *msg, size_t len) {
  rt_client_t *c = conn->owner;
  rt__notice n;
  if (rt__notice_parse(msg, len, &n) == 0)
    rt__lock_on_notice(c, &n);
}

static void loop_closed(rt__loop *lp);

/* The last step of closing, once both connections are closed (a client
 * whose first connect failed has them closed long before the user closes
 * it). */
static void finish_close(rt_client_t *c) {
  if (c->state != RT__C_CLOSING || c->conns_open > 0)
    return;
  rt__loop_close(&c->lp, loop_closed);
}

static void conn_closed(rt__conn *conn) {
  rt_client_t *c = conn->owner;
  c->conns_open--;
  finish_close(c);
}

static const rt__conn_events conn_events = {
    conn_up, conn_down, rt__op_reply, conn_message, conn_closed};

/* ---- open ------------------------------------------------------------------ */

static void client_free(rt_client_t *c) {
  rt__lock_free_all(c);
  rt__map_free(&c->locks);
  rt__map_free(&c->resources);
  rt__free(c->channel);
  rt__config_free(&c->cfg);
  rt__free(c);
}

int rt_client_open(uv_loop_t *loop, const rt_options_t *opts,
                   rt_connect_cb connect_cb, void *data, rt_client_t **out) {
  if (loop == NULL || out == NULL)
    return RT_EINVAL;
  rt_client_t *c = rt__calloc(1, sizeof(*c));
  if (c == NULL)
    return RT_ENOMEM;
  int err = rt__config_init(&c->cfg, opts);
  if (err != 0) {
    rt__free(c);
    return err;
  }
  c->loop = loop;
  c->connect_cb = connect_cb;
  c->connect_data = data;
  c->data = data;
  rt__map_init(&c->locks);
  rt__map_init(&c->resources);
  rt__queue_init(&c->pending);
  rt__queue_init(&c->held);
  rt__queue_init(&c->all);
  rt__queue_init(&c->outbox);

  uuid_t uu;
  uuid_generate_random(uu);
  for (int i = 0; i < 16; i++)
    snprintf(c->id + 2 * i, 3, "%02x", uu[i]);
  memcpy(&c->rand, uu, sizeof(c->rand));
  c->rand |= 1;

  c->chan_prefix_len = c->cfg.prefix_len + 3;
  c->channel_len = c->chan_prefix_len + RT__CLIENT_ID_LEN;
  c->channel = rt__malloc(c->channel_len + 1);
  if (c->channel == NULL) {
    client_free(c);
    return RT_ENOMEM;
  }
  snprintf(c->channel, c->channel_len + 1, "%s:c:%s", c->cfg.prefix, c->id);

  /* uv_timer_init cannot fail on a live loop; nothing to unwind. */
  char name[48];
  snprintf(name, sizeof(name), "redturn-cmd-%s", c->id);
  rt__conn_init(&c->cmd, loop, &c->cfg, &conn_events, c, name, NULL, 0);
  snprintf(name, sizeof(name), "redturn-sub-%s", c->id);
  rt__conn_init(&c->sub, loop, &c->cfg, &conn_events, c, name, c->channel,
                c->channel_len);
  c->conns_open = 2;
  rt__loop_init(&c->lp, loop);
  rt__conn_connect(&c->cmd);
  rt__conn_connect(&c->sub);
  *out = c;
  return 0;
}

/* ---- close ------------------------------------------------------------------ */

static void loop_closed(rt__loop *lp) {
  rt_client_t *c = rt__container_of(lp, rt_client_t, lp);
  rt_close_cb cb = c->close_cb;
  void *data = c->close_data;
  if (cb != NULL)
    cb(c, data);
  client_free(c);
}

/* Called after each reply while closing: once nothing is in flight the
 * command connection can go too. */
void rt__client_close_step(rt_client_t *c) {
  if (c->state == RT__C_CLOSING && c->close_started && c->in_flight == 0)
    rt__conn_close(&c->cmd);
}

static void close_later(rt__later *l) {
  rt_client_t *c = rt__container_of(l, rt_client_t, closing);
  c->close_started = 1;
  report_connect(c, RT_ECANCELED);
  rt__outbox_fail(c, RT_ECANCELED);
  rt__lock_close_all(c); /* cancel waits, release held locks */
  rt__conn_close(&c->sub);
  rt__client_close_step(c);
  finish_close(c);
}

int rt_client_close(rt_client_t *c, rt_close_cb close_cb, void *data) {
  if (c == NULL)
    return RT_EINVAL;
  if (c->state == RT__C_CLOSING)
    return RT_ECLOSED;
  c->state = RT__C_CLOSING;
  c->close_cb = close_cb;
  c->close_data = data;
  rt__defer(&c->lp, &c->closing, close_later);
  return 0;
}

/* ---- accessors ---------------------------------------------------------- */

const char *rt_client_last_error(const rt_client_t *c) {
  return c->last_error;
}
const char *rt_client_id(const rt_client_t *c) { return c->id; }
void *rt_client_get_data(const rt_client_t *c) { return c->data; }
void rt_client_set_data(rt_client_t *c, void *data) { c->data = data; }
uv_loop_t *rt_client_loop(const rt_client_t *c) { return c->loop; }

size_t rt_client_locks(const rt_client_t *c, rt_lock_t **out, size_t max) {
  size_t n = 0;
  for (rt__queue *q = c->held.next; q != &c->held; q = q->next) {
    if (n < max && out != NULL)
      out[n] = rt__queue_data(q, rt_lock_t, node);
    n++;
  }
  return n;
}
