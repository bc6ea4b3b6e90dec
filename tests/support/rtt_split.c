/* The split-brain pair of the failover tests (rtt_split.h). */
#include "rtt_split.h"

#include <string.h>
#include <time.h>

#include "rt_test.h"

uint64_t rtt_split_now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

void rtt_split_init(rtt_split_run *run) {
  memset(run, 0, sizeof(*run));
  pthread_mutex_init(&run->mu, NULL);
}

/* One hold: record it and what the store made of its write. */
static rtt_split_hold *record(rtt_split_proc *p, uint64_t fence) {
  rtt_split_run *run = p->run;
  pthread_mutex_lock(&run->mu);
  int i = run->n < RTT_SPLIT_MAX ? run->n++ : RTT_SPLIT_MAX - 1;
  rtt_split_hold *h = &run->holds[i];
  h->who = p->who;
  h->granted_us = rtt_split_now_us();
  h->fence = fence;
  h->accepted = fence >= run->highest;
  if (h->accepted)
    run->highest = fence;
  pthread_mutex_unlock(&run->mu);
  return h;
}

static void *loop(void *arg) {
  rtt_split_proc *p = arg;
  rt_options_t o;
  rt_blocking_t *b = NULL;
  rt_options_init(&o);
  o.url = p->url;
  o.prefix = rtt_prefix();
  o.script_path = rtt_script_path();
  o.connect_timeout_ms = 3000;
  o.command_timeout_ms = 3000;
  o.retry_first_connect = 1;
  if (rt_blocking_open(&o, &b) != 0) {
    p->errors++;
    return NULL;
  }
  while (!p->run->stop) {
    rt_lock_t *l = NULL;
    if (rt_blocking_wait(b, "sb", 2, 1000, 2000, &l) != 0) {
      p->errors++;
      rtt_sleep_ms(20);
      continue;
    }
    rtt_split_hold *h = record(p, rt_lock_fence(l));
    rtt_sleep_ms(10);
    h->released_us = rtt_split_now_us();
    rt_blocking_signal(b, l);
  }
  rt_blocking_close(b);
  return NULL;
}

void rtt_split_start(rtt_split_proc *p) {
  pthread_create(&p->thread, NULL, loop, p);
}

void rtt_split_stop(rtt_split_run *run, rtt_split_proc *const *procs, int n) {
  run->stop = 1;
  for (int i = 0; i < n; i++)
    pthread_join(procs[i]->thread, NULL);
}

void rtt_split_judge(rtt_split_run *run, uint64_t since_us,
                     rtt_split_figures *f) {
  memset(f, 0, sizeof(*f));
  f->holds = run->n;
  uint64_t prev = 0;
  for (int i = 0; i < run->n; i++) {
    rtt_split_hold *x = &run->holds[i];
    f->of_b += x->who == 1;
    if (x->who == 0)
      f->last_a_us = x->granted_us;
    if (x->who == 1 && f->first_b_us == 0)
      f->first_b_us = x->granted_us;
    f->a_after_b += x->who == 0 && x->accepted && f->first_b_us != 0;
    /* holds[] is in grant order: the longest time without a grant. */
    if (prev != 0 && x->granted_us - prev > f->gap_us)
      f->gap_us = x->granted_us - prev;
    prev = x->granted_us;
    for (int j = 0; j < run->n; j++) {
      rtt_split_hold *y = &run->holds[j];
      if (x->who != 0 || y->who != 1 || x->granted_us >= y->released_us ||
          y->granted_us >= x->released_us)
        continue;
      f->overlaps += x->granted_us > since_us;
      /* B wrote first, yet A's later write got through: a stale fence. */
      f->stale += y->granted_us < x->granted_us && x->accepted && y->accepted;
      uint64_t from =
          x->granted_us > y->granted_us ? x->granted_us : y->granted_us;
      uint64_t to =
          x->released_us < y->released_us ? x->released_us : y->released_us;
      if (to - from > f->longest_us)
        f->longest_us = to - from;
    }
  }
}
