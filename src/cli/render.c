/* Snapshots of a resource's queue, and how they are printed: for people,
 * as JSON lines, and in the Prometheus text exposition format. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "view.h"

/* ---- snapshots ----------------------------------------------------------- */

void snap_clear(snap_t *s) {
  for (size_t i = 0; i < s->nwaiters; i++) {
    free(s->waiters[i]);
    free(s->waiter_labels[i]);
  }
  for (size_t i = 0; i < s->nholders; i++) {
    free(s->holders[i]);
    free(s->holder_labels[i]);
  }
  free(s->holders);
  free(s->holder_labels);
  free(s->holder_permits);
  free(s->waiter_permits);
  free(s->kind);
  free(s->waiters);
  free(s->waiter_labels);
  free(s->holder);
  free(s->holder_label);
  const char *name = s->name;
  size_t len = s->len;
  memset(s, 0, sizeof(*s));
  s->name = name;
  s->len = len;
}

/* The kind, permits and holders of a semaphore or read-write lock. */
static int snap_set_multi(snap_t *s, const rt_queue_info_t *info) {
  size_t n = info->nholders, w = info->nwaiters;
  s->kind = strdup(info->kind);
  s->permits = info->permits;
  s->permits_used = info->permits_used;
  s->holders = calloc(n + 1, sizeof(*s->holders));
  s->holder_labels = calloc(n + 1, sizeof(*s->holder_labels));
  s->holder_permits = calloc(n + 1, sizeof(*s->holder_permits));
  s->waiter_permits = calloc(w + 1, sizeof(*s->waiter_permits));
  if (s->kind == NULL || s->holders == NULL || s->holder_labels == NULL ||
      s->holder_permits == NULL || s->waiter_permits == NULL)
    return -1;
  for (size_t i = 0; i < n; i++) {
    s->holders[i] = strdup(info->holders[i]);
    s->holder_labels[i] = strdup(info->holder_labels[i]);
    s->holder_permits[i] = info->holder_permits[i];
    s->nholders++;
    if (s->holders[i] == NULL || s->holder_labels[i] == NULL)
      return -1;
  }
  for (size_t i = 0; i < w; i++)
    s->waiter_permits[i] = info->waiter_permits[i];
  return 0;
}

int snap_set(snap_t *s, int status, const rt_queue_info_t *info,
             int64_t stall_after_ms) {
  snap_clear(s);
  s->status = status;
  if (status != 0)
    return 0;
  s->locked = info->locked;
  s->fence = info->fence;
  s->lease_left_ms = info->lease_left_ms;
  s->held_ms = info->held_ms;
  s->queue_len = info->queue_len;
  s->server_time_ms = info->server_time_ms;
  s->script_path = info->script_path;
  if (info->holder != NULL) {
    s->holder = strdup(info->holder);
    s->holder_label = strdup(info->holder_label);
    memcpy(s->holder_client, info->holder_client, sizeof(s->holder_client));
    s->holder_client[sizeof(s->holder_client) - 1] = '\0';
    if (s->holder == NULL || s->holder_label == NULL)
      goto nomem;
  }
  if (info->nwaiters > 0) {
    s->waiters = calloc(info->nwaiters, sizeof(*s->waiters));
    s->waiter_labels = calloc(info->nwaiters, sizeof(*s->waiter_labels));
    if (s->waiters == NULL || s->waiter_labels == NULL)
      goto nomem;
    for (size_t i = 0; i < info->nwaiters; i++) {
      s->waiters[i] = strdup(info->waiters[i]);
      s->waiter_labels[i] = strdup(info->waiter_labels[i]);
      s->nwaiters++;
      if (s->waiters[i] == NULL || s->waiter_labels[i] == NULL)
        goto nomem;
    }
  }
  if (info->kind != NULL && snap_set_multi(s, info) != 0)
    goto nomem;
  /* Waiters but no holder: a lease ended and nobody granted the next one
   * yet (the next waiter's watchdog is due). */
  if (s->holder == NULL && s->queue_len > 0)
    s->stall_reason = "lease_expired";
  else if (s->holder != NULL && stall_after_ms > 0 &&
           s->held_ms >= stall_after_ms)
    s->stall_reason = "held_too_long";
  return 0;

nomem:
  snap_clear(s);
  s->status = RT_ENOMEM;
  return RT_ENOMEM;
}

static int str_differs(const char *a, const char *b) {
  if (a == NULL || b == NULL)
    return a != b;
  return strcmp(a, b) != 0;
}

int snap_changed(const snap_t *a, const snap_t *b) {
  if (a->status != b->status || a->locked != b->locked ||
      a->fence != b->fence || a->queue_len != b->queue_len ||
      a->nwaiters != b->nwaiters || str_differs(a->holder, b->holder) ||
      str_differs(a->stall_reason, b->stall_reason))
    return 1;
  for (size_t i = 0; i < a->nwaiters; i++)
    if (strcmp(a->waiters[i], b->waiters[i]) != 0)
      return 1;
  if (a->nholders != b->nholders || a->permits_used != b->permits_used)
    return 1;
  for (size_t i = 0; i < a->nholders; i++)
    if (strcmp(a->holders[i], b->holders[i]) != 0)
      return 1;
  return 0;
}

/* Requests waiting behind the holders (all of the queue when free). */
static size_t waiting_of(const snap_t *s) {
  if (s->kind != NULL)
    return s->queue_len - s->nholders;
  return s->queue_len - (s->holder != NULL);
}

/* ---- text ---------------------------------------------------------------- */

/* A request id, then its label in quotes if it has one. */
static void put_request(FILE *f, const char *id, const char *label) {
  fputs(id, f);
  if (label != NULL && label[0] != '\0') {
    fputc(' ', f);
    cli_put_text(f, label, strlen(label));
  }
  fputc('\n', f);
}

/* "a read-write lock", "a semaphore of 4 permits". */
static void put_kind(FILE *f, const snap_t *s) {
  if (strcmp(s->kind, "election") == 0)
    fprintf(f, "kind:        election (the holder leads; its label is its "
               "value)\n");
  else if (strcmp(s->kind, "rwlock") == 0 && s->permits_used >= s->permits)
    fprintf(f, "kind:        read-write lock (held by a writer)\n");
  else if (strcmp(s->kind, "rwlock") == 0)
    fprintf(f, "kind:        read-write lock (held by %" PRIu64 " readers)\n",
            s->permits_used);
  else
    fprintf(f,
            "kind:        semaphore of %" PRIu64 " permits (%" PRIu64
            " in use)\n",
            s->permits, s->permits_used);
}

/* One holder of a semaphore or read-write lock per line. */
static void put_holders(FILE *f, const snap_t *s) {
  int rw = strcmp(s->kind, "rwlock") == 0, e = strcmp(s->kind, "election") == 0;
  for (size_t i = 0; i < s->nholders; i++) {
    fprintf(f, "%s %3zu. ", i == 0 ? "holders:   " : "           ", i + 1);
    if (e)
      fputs("leader    ", f);
    else if (rw)
      fputs(s->holder_permits[i] == 1 ? "shared    " : "exclusive ", f);
    else
      fprintf(f, "%3" PRIu64 " of %" PRIu64 " ", s->holder_permits[i],
              s->permits);
    put_request(f, s->holders[i], s->holder_labels[i]);
  }
}

/* The client is (or may be) reconnecting: said as such, not as a failure
 * of the resource. */
static int reconnecting(int status) {
  return status == RT_EDISCONNECTED || status == RT_ETIMEDOUT ||
         status == RT_ECONNECT;
}

void render_text(FILE *f, const snap_t *s) {
  char a[32];
  fputs("resource:    ", f);
  cli_put_text(f, s->name, s->len);
  fputc('\n', f);
  if (reconnecting(s->status)) {
    fprintf(f, "state:       reconnecting to Redis (%s)\n",
            rt_strerror(s->status));
    return;
  }
  if (s->status != 0) {
    fprintf(f, "error:       %s (%s)\n", rt_strerror(s->status),
            rt_err_name(s->status));
    return;
  }
  size_t waiting = waiting_of(s);
  if (s->holder == NULL) {
    fprintf(f, "state:       %s\n",
            waiting > 0 ? "free, not yet granted to the next waiter" : "free");
  } else if (s->kind != NULL) {
    fprintf(f, "state:       locked\n");
    put_kind(f, s);
    put_holders(f, s);
    fprintf(f, "fence:       %" PRIu64 " (first to end)\n", s->fence);
    cli_fmt_ms(a, sizeof(a), s->lease_left_ms);
    fprintf(f, "lease left:  %s (first to end)\n", a);
  } else {
    fprintf(f, "state:       locked\n");
    fputs("holder:      ", f);
    put_request(f, s->holder, s->holder_label);
    fprintf(f, "client:      %s\n", s->holder_client);
    fprintf(f, "fence:       %" PRIu64 "\n", s->fence);
    cli_fmt_ms(a, sizeof(a), s->held_ms);
    fprintf(f, "held for:    %s\n", a);
    cli_fmt_ms(a, sizeof(a), s->lease_left_ms);
    fprintf(f, "lease left:  %s\n", a);
  }
  if (s->queue_len == 0) {
    fprintf(f, "queue:       empty\n");
    return;
  }
  if (s->kind != NULL)
    fprintf(f, "queue:       %zu (%zu holding + %zu waiting)\n", s->queue_len,
            s->nholders, waiting);
  else
    fprintf(f, "queue:       %zu (%s%zu waiting)\n", s->queue_len,
            s->holder != NULL ? "holder + " : "", waiting);
  for (size_t i = 0; i < s->nwaiters; i++) {
    fprintf(f, "%s %3zu. ", i == 0 ? "waiters:   " : "           ", i + 1);
    put_request(f, s->waiters[i], s->waiter_labels[i]);
  }
  if (s->nwaiters < waiting)
    fprintf(f, "             ... and %zu more\n", waiting - s->nwaiters);
  fprintf(f, "read by:     %s\n",
          s->script_path == RT_SCRIPT_PATH_MODULE
              ? (s->kind != NULL ? "redturn.pool_inspect (the redturn module)"
                                 : "redturn.inspect (the redturn module)")
          : s->script_path == RT_SCRIPT_PATH_FUNCTIONS
              ? "FCALL_RO (the Functions library)"
              : "EVALSHA (the eval path)");
  if (s->stall_reason == NULL) {
    fprintf(f, "stalled:     no\n");
  } else if (strcmp(s->stall_reason, "lease_expired") == 0) {
    fprintf(f, "stalled:     YES: the lease ended, the next waiter is not "
               "granted yet\n");
  } else {
    cli_fmt_ms(a, sizeof(a), s->held_ms);
    fprintf(f, "stalled:     YES: held for %s (--stall-after)\n", a);
  }
}

/* ---- JSON lines ---------------------------------------------------------- */

/* rt_queue_info_t.script_path as the JSON field says it. */
static const char *script_path_name(int path) {
  return path == RT_SCRIPT_PATH_MODULE      ? "module"
         : path == RT_SCRIPT_PATH_FUNCTIONS ? "functions"
                                            : "eval";
}

/* NULL, and "" (a label of nobody), are null. */
static void json_str_or_null(FILE *f, const char *s) {
  if (s == NULL || s[0] == '\0')
    fputs("null", f);
  else
    cli_put_json(f, s, strlen(s));
}

/* A JSON array of n strings, each as json_str_or_null. */
static void json_list(FILE *f, char *const *v, size_t n) {
  fputc('[', f);
  for (size_t i = 0; i < n; i++) {
    if (i > 0)
      fputc(',', f);
    json_str_or_null(f, v[i]);
  }
  fputc(']', f);
}

void render_json(FILE *f, const snap_t *s) {
  fputs("{\"resource\":", f);
  cli_put_json(f, s->name, s->len);
  if (s->status != 0) {
    fprintf(f, ",\"error\":\"%s\",\"message\":", rt_err_name(s->status));
    cli_put_json(f, rt_strerror(s->status), strlen(rt_strerror(s->status)));
    fprintf(f, ",\"reconnecting\":%s}\n",
            reconnecting(s->status) ? "true" : "false");
    return;
  }
  int held = s->holder != NULL;
  fprintf(f, ",\"locked\":%s,\"holder\":", s->locked ? "true" : "false");
  json_str_or_null(f, s->holder);
  fputs(",\"holder_label\":", f);
  json_str_or_null(f, s->holder_label);
  fputs(",\"holder_client\":", f);
  json_str_or_null(f, held ? s->holder_client : NULL);
  fprintf(f, ",\"fence\":%" PRIu64, s->fence);
  if (held)
    fprintf(f, ",\"held_ms\":%" PRId64 ",\"lease_left_ms\":%" PRId64,
            s->held_ms, s->lease_left_ms);
  else
    fputs(",\"held_ms\":null,\"lease_left_ms\":null", f);
  fprintf(f, ",\"queue_length\":%zu,\"waiters\":", s->queue_len);
  json_list(f, s->waiters, s->nwaiters);
  fputs(",\"waiter_labels\":", f);
  json_list(f, s->waiter_labels, s->nwaiters);
  if (s->kind != NULL) {
    fputs(",\"kind\":", f);
    cli_put_json(f, s->kind, strlen(s->kind));
    fprintf(
        f, ",\"permits\":%" PRIu64 ",\"permits_used\":%" PRIu64 ",\"holders\":",
        s->permits, s->permits_used);
    json_list(f, s->holders, s->nholders);
    fputs(",\"holder_permits\":[", f);
    for (size_t i = 0; i < s->nholders; i++)
      fprintf(f, "%s%" PRIu64, i > 0 ? "," : "", s->holder_permits[i]);
    fputs("],\"waiter_permits\":[", f);
    for (size_t i = 0; i < s->nwaiters; i++)
      fprintf(f, "%s%" PRIu64, i > 0 ? "," : "", s->waiter_permits[i]);
    fputc(']', f);
  }
  fprintf(f, ",\"waiters_truncated\":%s,\"stalled\":%s,\"stall_reason\":",
          s->nwaiters < waiting_of(s) ? "true" : "false",
          s->stall_reason != NULL ? "true" : "false");
  json_str_or_null(f, s->stall_reason);
  fprintf(f, ",\"server_time_ms\":%" PRId64 ",\"script_path\":\"%s\"}\n",
          s->server_time_ms, script_path_name(s->script_path));
}

/* ---- Prometheus ---------------------------------------------------------- */

enum { M_LOCKED, M_QLEN, M_WAITERS, M_FENCE, M_HELD, M_LEASE, M_STALLED, M_N };

static const struct {
  const char *name;
  const char *help;
} metrics[M_N] = {
    {"redturn_locked", "1 if a request holds a running lease."},
    {"redturn_queue_length", "The holder (if any) plus the waiting requests."},
    {"redturn_waiters", "Requests waiting for the lock."},
    {"redturn_fence", "The holder's fencing token (0 when free)."},
    {"redturn_held_ms",
     "Milliseconds the current holder has held the lock (0 when free)."},
    {"redturn_lease_left_ms",
     "Lease left to the holder by the Redis clock, in milliseconds "
     "(0 when free)."},
    {"redturn_stalled",
     "1 if a lease ended and the next waiter is not granted yet, or the "
     "holder held the lock longer than --stall-after."},
};

static int64_t metric_value(const snap_t *s, int m) {
  int held = s->holder != NULL;
  switch (m) {
  case M_LOCKED:
    return s->locked;
  case M_QLEN:
    return (int64_t)s->queue_len;
  case M_WAITERS:
    return (int64_t)waiting_of(s);
  case M_FENCE:
    return (int64_t)s->fence;
  case M_HELD:
    return held ? s->held_ms : 0;
  case M_LEASE:
    return held ? s->lease_left_ms : 0;
  default:
    return s->stall_reason != NULL;
  }
}

void render_prom(FILE *f, const snap_t *snaps, size_t n) {
  for (int m = 0; m < M_N; m++) {
    fprintf(f, "# HELP %s %s\n# TYPE %s gauge\n", metrics[m].name,
            metrics[m].help, metrics[m].name);
    for (size_t i = 0; i < n; i++) {
      if (snaps[i].status != 0)
        continue;
      fprintf(f, "%s{resource=\"", metrics[m].name);
      cli_put_prom(f, snaps[i].name, snaps[i].len);
      fprintf(f, "\"} %" PRId64 "\n", metric_value(&snaps[i], m));
    }
  }
  /* Who holds each lock, as an info metric: a new series per holder, so
   * the gauges above keep theirs. */
  fputs("# HELP redturn_holder_info The holder's request id and label "
        "(1 while a request holds the lock).\n"
        "# TYPE redturn_holder_info gauge\n",
        f);
  for (size_t i = 0; i < n; i++) {
    const snap_t *s = &snaps[i];
    if (s->status != 0 || s->holder == NULL)
      continue;
    fputs("redturn_holder_info{resource=\"", f);
    cli_put_prom(f, s->name, s->len);
    fprintf(f, "\",holder=\"%s\",label=\"", s->holder);
    cli_put_prom(f, s->holder_label, strlen(s->holder_label));
    fputs("\"} 1\n", f);
  }
}
