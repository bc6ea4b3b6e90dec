/* The smallest complete redturn program: connect, wait for the lock on
 * "example", extend its lease once, release it, close.
 *
 *   redturn-basic [redis://host:port]      (default: $REDTURN_URL, then
 *                                           redis://127.0.0.1:6379)
 *
 * Every step is a callback on one libuv loop; the first error ends the run
 * with a message from rt_strerror() and exit status 1. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include <redturn.h>

static const char resource[] = "example";

typedef struct app {
  rt_client_t *client;
  int status; /* first error, or 0 */
} app_t;

/* Remember the first error and close the client: that ends the loop. */
static void finish(app_t *app, const char *what, int status) {
  if (status < 0) {
    fprintf(stderr, "basic: %s: %s (%s)\n", what, rt_strerror(status),
            rt_err_name(status));
    if (app->status == 0)
      app->status = status;
  }
  rt_client_close(app->client, NULL, NULL);
}

static void on_signaled(rt_lock_t *lock, int status, void *data) {
  (void)lock;
  if (status == 0)
    printf("released\n");
  finish(data, "rt_signal", status);
}

/* Release the lock; a lock that was granted needs exactly one rt_signal. */
static void release(app_t *app, rt_lock_t *lock) {
  int err = rt_signal(lock, on_signaled, app);
  if (err != 0)
    finish(app, "rt_signal", err);
}

static void on_extended(rt_lock_t *lock, int status, void *data) {
  app_t *app = data;
  if (status != 0) {
    /* RT_ELOST: the lease ran out first. Still signal the lock. */
    fprintf(stderr, "basic: rt_extend: %s\n", rt_strerror(status));
    app->status = status;
  } else {
    printf("extended: lease %" PRId64 " ms\n", rt_lock_lease_ms(lock));
  }
  release(app, lock);
}

static void on_granted(rt_lock_t *lock, int status, void *data) {
  app_t *app = data;
  if (status != 0) {
    finish(app, "rt_wait", status);
    return;
  }
  printf("granted: fence %" PRIu64 ", lease %" PRId64 " ms\n",
         rt_lock_fence(lock), rt_lock_lease_ms(lock));
  /* Work that takes longer than planned would extend the lease here. */
  int err = rt_extend(lock, 20000, on_extended, app);
  if (err != 0) {
    fprintf(stderr, "basic: rt_extend: %s\n", rt_strerror(err));
    app->status = err;
    release(app, lock);
  }
}

static void on_connected(rt_client_t *client, int status, void *data) {
  app_t *app = data;
  if (status != 0) {
    finish(app, "connect", status);
    return;
  }
  printf("connected as client %s\n", rt_client_id(client));
  /* A 10 s lease; wait at most 5 s for the grant. */
  int err = rt_wait(client, resource, sizeof(resource) - 1, 10000, 5000,
                    on_granted, app, NULL);
  if (err != 0)
    finish(app, "rt_wait", err);
}

int main(int argc, char **argv) {
  uv_loop_t loop;
  rt_options_t opts;
  app_t app = {NULL, 0};

  rt_options_init(&opts);
  opts.url = argc > 1 ? argv[1] : getenv("REDTURN_URL");
  if (opts.url == NULL)
    opts.url = "redis://127.0.0.1:6379";

  if (uv_loop_init(&loop) != 0)
    return 1;
  int err = rt_client_open(&loop, &opts, on_connected, &app, &app.client);
  if (err != 0) {
    fprintf(stderr, "basic: rt_client_open(%s): %s\n", opts.url,
            rt_strerror(err));
    uv_loop_close(&loop);
    return 1;
  }
  uv_run(&loop, UV_RUN_DEFAULT);

  /* The client closed every handle it had: the loop must close cleanly. */
  if (uv_loop_close(&loop) != 0) {
    fprintf(stderr, "basic: uv_loop_close: handles left open\n");
    return 1;
  }
  return app.status == 0 ? 0 : 1;
}
