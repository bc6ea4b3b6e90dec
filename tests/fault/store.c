/* The split-brain judge's store (--judge): the driver resets it, every
 * worker writes through it; judge.c judges its log. */
#include "fault.h"

/* ---- the split-brain judge's store (--judge) ---------------------------- */

/* With --judge every worker "writes" through one fence-checking store
 * shared by all of them, as a storage behind the lock would: it refuses a
 * write whose fence is lower than the highest it accepted for the
 * resource. The store is DIR/store.fences (the highest fence of each
 * resource, 8 bytes at 8 * res) under an flock, and DIR/store.log, one
 * line per write, appended while the lock is held, so the log is in
 * real-time order: "W t res holder fence deadline_ms lease_ms ok before
 * why" (t read under the lock; before: the highest fence then; why: g at
 * the grant, s just before rt_signal). A worker writes only while it
 * believes it holds: not RT_LOCK_LOST and lease left above 0. judge.c
 * reads the log. Mutexes only (refused with --mixed and --evict). */
int judge_on;
static int store_fences = -1, store_log = -1; /* a worker's */

/* The driver: remove an earlier run's store; make an empty one if
 * judging. */
int judge_store_reset(void) {
  char path[600];
  snprintf(path, sizeof(path), "%s/%s", P.dir, RTF_STORE_LOG);
  unlink(path);
  int fd =
      judge_on ? open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644) : 0;
  if (fd < 0)
    return -1;
  if (judge_on)
    close(fd);
  snprintf(path, sizeof(path), "%s/%s", P.dir, RTF_STORE_FENCES);
  unlink(path);
  fd =
      judge_on ? open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644) : 0;
  if (fd < 0)
    return -1;
  if (judge_on)
    close(fd);
  return 0;
}

/* A worker: open the store (0, or -1). */
int judge_store_open(void) {
  if (!judge_on)
    return 0;
  char path[600];
  snprintf(path, sizeof(path), "%s/%s", P.dir, RTF_STORE_FENCES);
  store_fences = open(path, O_RDWR | O_CLOEXEC);
  snprintf(path, sizeof(path), "%s/%s", P.dir, RTF_STORE_LOG);
  store_log = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
  return store_fences >= 0 && store_log >= 0 ? 0 : -1;
}

/* A worker that believes it holds lock writes through the store. */
void judge_write(worker *w, rt_lock_t *lock, char why) {
  if (!judge_on || store_fences < 0 || store_log < 0)
    return;
  if (rt_lock_state(lock) != RT_LOCK_HELD || rt_lock_lease_left_ms(lock) <= 0)
    return; /* it does not believe it holds: no write */
  size_t len;
  const char *name = rt_lock_resource(lock, &len);
  int res = len > 1 && name[0] == 'r' ? atoi(name + 1) : -1;
  if (res < 0 || res >= MAX_RES)
    return;
  uint64_t fence = rt_lock_fence(lock), top = 0;
  off_t off = (off_t)res * (off_t)sizeof(top);
  if (flock(store_fences, LOCK_EX) != 0) {
    logf_fd(w->fd, "Y %" PRId64 " store: flock: %s", real_us(),
            strerror(errno));
    return;
  }
  if (pread(store_fences, &top, sizeof(top), off) != (ssize_t)sizeof(top))
    top = 0; /* never written */
  int64_t t = real_us();
  int ok = fence >= top;
  if (ok && fence > top &&
      pwrite(store_fences, &fence, sizeof(fence), off) !=
          (ssize_t)sizeof(fence))
    ok = 0; /* not stored: not accepted */
  char line[256];
  int n = snprintf(line, sizeof(line),
                   "W %" PRId64 " %d %s %" PRIu64 " %" PRId64 " %" PRId64
                   " %d %" PRIu64 " %c\n",
                   t, res, rt_lock_id(lock), fence, rt_lock_deadline_ms(lock),
                   rt_lock_lease_ms(lock), ok, top, why);
  (void)write_all(store_log, line, (size_t)n);
  flock(store_fences, LOCK_UN);
}
