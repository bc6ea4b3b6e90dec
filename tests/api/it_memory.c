/* A long-lived client's memory stays flat: after a warm-up, rounds of wait
 * and release cycles, waits cancelled while another request holds the
 * resource, and leases left to run out (then released) keep no memory,
 * counted by malloc itself (glibc's mallinfo2: every byte the process has
 * allocated and not freed, so fragmentation and caching do not count).
 * Prints what it measured. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "rt_test.h"

RTT_SUITE_TIMEOUT(memory, 120);

static rt_client_t *client;
static int done, failures, first_failure;

static void count(int status, int want) {
  if (status != want && failures++ == 0)
    first_failure = status;
  done++;
}

static void on_released(rt_lock_t *l, int status, void *data) {
  (void)l;
  (void)data;
  count(status, 0);
}

static void on_cycle(rt_lock_t *l, int status, void *data) {
  (void)data;
  if (status != 0) {
    count(status, 0);
    return;
  }
  if (rt_signal(l, on_released, NULL) != 0)
    count(-1, 0);
}

static void on_cancelled(rt_lock_t *l, int status, void *data) {
  (void)l;
  (void)data;
  count(status, RT_ECANCELED);
}

/* A lost lock's release: 0 or RT_ELOST, whichever the lock knew. */
static void on_released_lost(rt_lock_t *l, int status, void *data) {
  (void)l;
  (void)data;
  count(status == RT_ELOST ? 0 : status, 0);
}

static void on_lost(rt_lock_t *l, void *data) {
  (void)data;
  if (rt_signal(l, on_released_lost, NULL) != 0)
    count(-1, 0);
}

static void on_short(rt_lock_t *l, int status, void *data) {
  (void)data;
  if (status != 0 || rt_lock_on_lost(l, on_lost) != 0)
    count(status ? status : -1, 0);
}

enum { CYCLES = 1000, CANCELS = 500, LOST = 200 };

/* One round: CYCLES wait + release in series, CANCELS waits on the held
 * resource cancelled at once, LOST 50 ms leases at once, left to run out. */
static void round_of(int r) {
  int target = done;
  for (int i = 0; i < CYCLES; i++) {
    cr_assert_eq(
        rt_wait(client, "cycle", 5, 10000, RT_FOREVER, on_cycle, NULL, NULL),
        0);
    target++;
    cr_assert(rtt_run_until(&loop, &done, target, 10000), "cycle %d", i);
  }
  for (int i = 0; i < CANCELS; i++) {
    rt_lock_t *w;
    cr_assert_eq(
        rt_wait(client, "held", 4, 10000, RT_FOREVER, on_cancelled, NULL, &w),
        0);
    cr_assert_eq(rt_cancel(w), 0);
  }
  target += CANCELS;
  cr_assert(rtt_run_until(&loop, &done, target, 10000));
  for (int i = 0; i < LOST; i++) {
    char name[32];
    int len = snprintf(name, sizeof(name), "lost:%d:%d", r, i);
    cr_assert_eq(rt_wait(client, name, (size_t)len, 50, RT_FOREVER, on_short,
                         NULL, NULL),
                 0);
  }
  target += LOST;
  cr_assert(rtt_run_until(&loop, &done, target, 20000));
  cr_assert_eq(failures, 0, "the first: %s", rt_err_name(first_failure));
}

/* malloc's count of the bytes allocated and not freed; 0 where there is
 * no glibc mallinfo2, or under AddressSanitizer (its allocator is not
 * glibc's). */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RTT_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define RTT_ASAN 1
#endif
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 33) &&          \
    !defined(RTT_ASAN)
static size_t live_bytes(void) {
  struct mallinfo2 m = mallinfo2();
  return m.uordblks + m.hblkhd;
}
#else
static size_t live_bytes(void) { return 0; }
#endif

Test(memory, cycles_cancels_and_lost_leases_keep_no_memory) {
  if (live_bytes() == 0)
    cr_skip_test("no glibc mallinfo2 (or a sanitizer's allocator)");
  rtt_client tc;
  rtt_client holder;
  rtt_open_ready(&tc, &loop, NULL);
  rtt_open_ready(&holder, &loop, NULL);
  client = tc.c;
  rtt_req held = {0};
  cr_assert_eq(
      rt_wait(holder.c, "held", 4, 60000, RT_FOREVER, rtt_lock_cb, &held, NULL),
      0);
  cr_assert(rtt_run_until(&loop, &held.calls, 1, 10000));
  done = failures = 0;
  enum { WARM = 2, ROUNDS = 12 };
  for (int r = 0; r < WARM; r++)
    round_of(r);
  /* Measured once what is in flight (the cancels' and releases' replies)
   * has come back. */
  rtt_run_for(&loop, 200);
  size_t before = live_bytes();
  for (int r = WARM; r < WARM + ROUNDS; r++)
    round_of(r);
  rtt_run_for(&loop, 200);
  size_t after = live_bytes();
  long long grew = (long long)after - (long long)before;
  printf("memory: %d operations after the warm-up; live bytes %zu -> %zu "
         "(%+lld)\n",
         ROUNDS * (CYCLES + CANCELS + LOST), before, after, grew);
  /* 20 400 operations: a kept allocation of 8 bytes per operation is
   * 163 KB; what the client's tables and buffers settle to moves the count
   * by up to about 35 KB either way. */
  cr_assert_lt(grew, 64 * 1024, "live memory grew %lld bytes", grew);
  cr_assert_eq(rt_signal(held.lock, NULL, NULL), 0);
  rtt_close_all(&loop, &tc, &holder, NULL);
}
