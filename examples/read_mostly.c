/* Grants per second of one resource under contention, as a mutex, as a
 * read-write lock with 90 % shared requests, and as a semaphore of 4
 * permits (one permit per request):
 *
 *   redturn-read_mostly [-w WAITERS] [-s SECONDS] [-H HOLD_MS] [URL]
 *
 * WAITERS requests (default 16, spread over 4 clients on one loop) each
 * loop wait -> hold HOLD_MS (default 1) -> release for SECONDS (default 3)
 * per kind. With several holders at once a read-mostly workload is
 * granted more often than a mutex, which serializes every hold. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <redturn.h>

#define CLIENTS 4
#define MAX_WAITERS 256

typedef struct waiter {
  uv_timer_t hold;
  rt_client_t *client;
  rt_lock_t *lock;
  unsigned rnd;
  struct run *run;
} waiter;

typedef struct run {
  uv_loop_t loop;
  rt_client_t *clients[CLIENTS];
  waiter w[MAX_WAITERS];
  int nwaiters, connected, stopping, closed;
  int hold_ms;
  int kind; /* 0 mutex, 1 read-mostly, 2 semaphore of 4 */
  char name[32];
  unsigned long grants, errors;
} run_t;

static void next_wait(waiter *w);

static void released(rt_lock_t *l, int status, void *data) {
  waiter *w = data;
  (void)l;
  w->run->errors += status != 0;
  next_wait(w);
}

static void hold_over(uv_timer_t *t) {
  waiter *w = t->data;
  if (rt_signal(w->lock, released, w) != 0)
    w->run->errors++;
}

static void granted(rt_lock_t *l, int status, void *data) {
  waiter *w = data;
  if (status != 0) {
    w->run->errors += status != RT_ECANCELED;
    return;
  }
  w->lock = l;
  w->run->grants++;
  uv_timer_start(&w->hold, hold_over, (uint64_t)w->run->hold_ms, 0);
}

static void next_wait(waiter *w) {
  run_t *r = w->run;
  if (r->stopping)
    return;
  rt_request_t req = {RT_KIND_MUTEX, 0, 0, 0, NULL, 0};
  w->rnd = w->rnd * 1103515245u + 12345u;
  if (r->kind == 1)
    req.kind = (w->rnd >> 8) % 10 == 0 ? RT_KIND_EXCLUSIVE : RT_KIND_SHARED;
  else if (r->kind == 2)
    req = (rt_request_t){RT_KIND_SEMAPHORE, 1, 4, 0, NULL, 0};
  if (rt_wait_ex(w->client, r->name, strlen(r->name), &req, 10000, RT_FOREVER,
                 granted, w, NULL) != 0)
    r->errors++;
}

static void connected(rt_client_t *c, int status, void *data) {
  run_t *r = data;
  (void)c;
  if (status != 0) {
    fprintf(stderr, "connect: %s\n", rt_strerror(status));
    exit(1);
  }
  if (++r->connected < CLIENTS)
    return;
  for (int i = 0; i < r->nwaiters; i++)
    next_wait(&r->w[i]);
}

static void closed(rt_client_t *c, void *data) {
  (void)c;
  ((run_t *)data)->closed++;
}

static void stop(uv_timer_t *t) {
  run_t *r = t->data;
  r->stopping = 1;
  for (int i = 0; i < CLIENTS; i++)
    rt_client_close(r->clients[i], closed, r);
  for (int i = 0; i < r->nwaiters; i++)
    uv_close((uv_handle_t *)&r->w[i].hold, NULL);
  uv_close((uv_handle_t *)t, NULL);
}

/* One kind for seconds: grants per second. */
static double measure(const rt_options_t *o, int kind, int waiters, int seconds,
                      int hold_ms) {
  static run_t r;
  uv_timer_t end;
  memset(&r, 0, sizeof(r));
  r.nwaiters = waiters;
  r.hold_ms = hold_ms;
  r.kind = kind;
  snprintf(r.name, sizeof(r.name), "read-mostly-%d-%d", kind, (int)getpid());
  uv_loop_init(&r.loop);
  for (int i = 0; i < CLIENTS; i++)
    if (rt_client_open(&r.loop, o, connected, &r, &r.clients[i]) != 0)
      exit(1);
  for (int i = 0; i < waiters; i++) {
    r.w[i].run = &r;
    r.w[i].client = r.clients[i % CLIENTS];
    r.w[i].rnd = (unsigned)(i + 1) * 2654435761u;
    uv_timer_init(&r.loop, &r.w[i].hold);
    r.w[i].hold.data = &r.w[i];
  }
  uv_timer_init(&r.loop, &end);
  end.data = &r;
  uv_timer_start(&end, stop, (uint64_t)seconds * 1000, 0);
  uv_run(&r.loop, UV_RUN_DEFAULT);
  uv_loop_close(&r.loop);
  if (r.errors != 0)
    fprintf(stderr, "%lu errors\n", r.errors);
  return (double)r.grants / seconds;
}

int main(int argc, char **argv) {
  int waiters = 16, seconds = 3, hold_ms = 1, opt;
  while ((opt = getopt(argc, argv, "w:s:H:")) != -1) {
    if (opt == 'w')
      waiters = atoi(optarg);
    else if (opt == 's')
      seconds = atoi(optarg);
    else if (opt == 'H')
      hold_ms = atoi(optarg);
    else
      return 64;
  }
  if (waiters < 1 || waiters > MAX_WAITERS || seconds < 1 || hold_ms < 0)
    return 64;
  rt_options_t o;
  rt_options_init(&o);
  o.url = optind < argc ? argv[optind] : "redis://127.0.0.1:6379";
  static const char *const kinds[] = {"mutex", "read-write, 90% shared",
                                      "semaphore of 4, 1 permit each"};
  printf("%d waiters, hold %d ms, %d s each\n", waiters, hold_ms, seconds);
  for (int k = 0; k < 3; k++)
    printf("%-32s %8.0f grants/s\n", kinds[k],
           measure(&o, k, waiters, seconds, hold_ms));
  return 0;
}
