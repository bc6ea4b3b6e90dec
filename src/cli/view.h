/* Queue snapshots for inspect and watch (inspect.c), and their rendering
 * as text, JSON lines and Prometheus metrics (render.c). */
#ifndef RT_CLI_VIEW_H
#define RT_CLI_VIEW_H

#include "cli.h"

/* One resource as one rt_inspect() saw it, copied out of the callback. */
typedef struct snap {
  const char *name; /* the resource (not owned) */
  size_t len;
  int status; /* 0, or the RT_E* error of the inspect */
  int locked;
  char *holder;       /* NULL if the queue is empty */
  char *holder_label; /* NULL without a holder, "" if it has no label */
  char holder_client[33];
  uint64_t fence;
  int64_t lease_left_ms;
  int64_t held_ms;
  size_t queue_len;
  size_t nwaiters;
  char **waiters;
  char **waiter_labels; /* of waiters[i], "" if none */
  int64_t server_time_ms;
  const char *stall_reason; /* NULL: not stalled */
  /* A semaphore or read-write lock: its kind ("s:<N>", "rw"; NULL for a
   * mutex), permits, and every holder (holder above is the first). */
  char *kind;
  uint64_t permits, permits_used;
  size_t nholders;
  char **holders;
  char **holder_labels;
  uint64_t *holder_permits;
  uint64_t *waiter_permits; /* nwaiters entries, NULL for a mutex */
  int script_path;          /* how it was read (rt_script_path_t) */
} snap_t;

/* Fill s from info (status 0) or record the error; stall_after_ms <= 0
 * means no "held too long" rule. 0 or RT_ENOMEM. */
int snap_set(snap_t *s, int status, const rt_queue_info_t *info,
             int64_t stall_after_ms);
void snap_clear(snap_t *s);
/* Whether a and b differ in what a watcher cares about (not the clocks). */
int snap_changed(const snap_t *a, const snap_t *b);

void render_text(FILE *f, const snap_t *s);
void render_json(FILE *f, const snap_t *s);
/* Every family once, with one sample per resource that could be read. */
void render_prom(FILE *f, const snap_t *snaps, size_t n);

#endif /* RT_CLI_VIEW_H */
