/* The split-brain pair of the failover tests: processes' worth of clients
 * (threads, each with its own blocking client and URL) take a 1 s-lease
 * mutex in a loop, hold it 10 ms and write once per hold through a
 * fence-checking store, which refuses a fence lower than the highest it
 * saw (the rule a storage applies). rtt_split_judge() then counts, from
 * the holds in grant order, the holds of two clients that overlapped and
 * the writes the store accepted from a holder after an overlapping holder
 * of the other side wrote (a stale fence let through). */
#ifndef RTT_SPLIT_H
#define RTT_SPLIT_H

#include <pthread.h>
#include <stdint.h>

#define RTT_SPLIT_MAX 4096

typedef struct rtt_split_hold {
  int who;
  uint64_t granted_us, released_us, fence;
  int accepted;
} rtt_split_hold;

typedef struct rtt_split_run {
  pthread_mutex_t mu;
  rtt_split_hold holds[RTT_SPLIT_MAX];
  int n;
  uint64_t highest; /* the store's highest fence seen */
  volatile int stop;
} rtt_split_run;

typedef struct rtt_split_proc {
  rtt_split_run *run;
  int who; /* 0: side A, 1: side B */
  char url[512];
  pthread_t thread;
  int errors; /* waits that failed (each retried after 20 ms) */
} rtt_split_proc;

/* What rtt_split_judge() found. */
typedef struct rtt_split_figures {
  int holds, of_b;
  int overlaps;        /* pairs (A, B) overlapping, A granted after since */
  int stale;           /* A's writes accepted after an overlapping B's */
  uint64_t longest_us; /* the longest double hold */
  uint64_t gap_us;     /* the longest time without any grant */
  int a_after_b;       /* A's writes accepted after B's first accepted
                         * one (an A that stays on the old master) */
  uint64_t last_a_us;  /* A's last grant (0: none) */
  uint64_t first_b_us; /* B's first grant (0: none) */
} rtt_split_figures;

/* CLOCK_MONOTONIC in microseconds, the clock of the holds. */
uint64_t rtt_split_now_us(void);
/* Zero run and init its mutex. */
void rtt_split_init(rtt_split_run *run);
/* Start p's loop on its thread (p->run, p->who and p->url set). */
void rtt_split_start(rtt_split_proc *p);
/* Stop every loop of the run and join the n threads of procs. */
void rtt_split_stop(rtt_split_run *run, rtt_split_proc *const *procs, int n);
/* Judge the holds; overlaps counts pairs whose A hold was granted after
 * since_us. */
void rtt_split_judge(rtt_split_run *run, uint64_t since_us,
                     rtt_split_figures *f);

#endif /* RTT_SPLIT_H */
