/* The history checker of the fault-injection suite (see README.md here).
 *
 * It reads the logs a run of redturn_fault left in a directory (driver.log
 * and one w<slot>-<gen>.log per worker process), merges them, and checks the
 * rules listed in check.c over the whole history. */
#ifndef RT_FAULT_CHECK_H
#define RT_FAULT_CHECK_H

#include <stdint.h>
#include <stdio.h>

/* Tolerances, in milliseconds. Their meaning and why they are sound is
 * explained at the top of check.c. */
typedef struct rtf_tol {
  int64_t clock_ms;    /* Redis clock vs CLOCK_REALTIME on one machine */
  int64_t deadline_ms; /* a wait's outcome after its deadline */
  int64_t crash_ms;    /* next grant after a crashed holder's lease end */
  int64_t kill_ms;     /* how long Redis may take to see a killed process's
                          death once the driver reaped it */
} rtf_tol;

/* Defaults for a plain build; a sanitizer build doubles them. */
void rtf_tol_default(rtf_tol *tol, int slow);

/* What the history holds. */
typedef struct rtf_counts {
  long requests;     /* rt_wait calls */
  long grants;       /* grants the workers reported */
  long ghosts;       /* grants known from a killed holder's record only */
  long releases;     /* rt_signal completions */
  long lost;         /* releases answered RT_ELOST */
  long lost_seen;    /* rt_lock_on_lost callbacks */
  long overstays;    /* holds that ran past their lease on purpose */
  long deadlines;    /* waits that ended with RT_EWAITTIMEOUT */
  long canceled;     /* waits ended by closing the client */
  long other_fail;   /* waits that ended with any other status */
  long killed_open;  /* requests whose process was killed before the end */
  long kills;        /* SIGKILLs sent by the driver */
  long kills_holder; /* ... aimed at a holder */
  long kills_waiter; /* ... aimed at a waiter */
  long conn_kills;   /* CLIENT KILLs */
  long pauses;       /* CLIENT PAUSEs */
  long stalls;       /* server stalls the driver's probe saw */
  long restarts;     /* redis-server restarts */
  long net[4];       /* network faults: delay, hold, partition, cut */
  long keyloss[6]; /* DEL of q, of m, of every key; FLUSHALL; DEL of h, of D */
  long lossy;      /* holds live when their holder record was deleted */
  long observer;   /* (re)subscriptions of the PSUBSCRIBE observer */
  long reconnects; /* sum of rt_client_stats().reconnects over processes */
  long connect_fail;   /* workers whose first connect failed (restarted) */
  long fifo_pairs;     /* request pairs the FIFO rule could judge */
  long handoffs;       /* releases the handoff rule could judge */
  long handoffs_kinds; /* ... of which not of a mutex */
  long crashes;        /* crashed holds the crash rule could judge */
  long crashes_ghost;  /* ... of which ghost holds */
  long crashes_kinds;  /* ... of which not of a mutex */
  int64_t max_handoff_gap_ms; /* worst crashed-holder lease end -> next grant */
  int64_t max_late_ms;        /* worst wait outcome after its deadline */
  int64_t max_late_calm_ms;   /* ... away from pauses and restarts */
  long late_in_stall;         /* waits reported late while Redis stalled */
  long multis;                /* multi-locks (rt_wait_all) begun */
  long multis_held;           /* ... that reported every lock held */
  long multis_failed;         /* ... that reported an error */
  long multi_losses;      /* key losses of a multi-lock's resource while it was
                       * half-taken (a lock granted, the set not reported) */
  long multi_lost_unseen; /* locks of a set reported held whose record a
                           * key loss took after their last confirmation */
  long obs_reports;       /* observer reports of a leader */
  long obs_nobody;        /* ... of nobody leading */
  long obs_judged;        /* leader reports judged against the grant */
  long violations;
} rtf_counts;

/* Check the history in dir. Every violation is printed to out (one line
 * each, with the log lines that prove it); returns the number of
 * violations, or -1 if the logs cannot be read. */
long rtf_check(const char *dir, const rtf_tol *tol, FILE *out,
               rtf_counts *counts);

/* Print the counts (one "name: value" per line). */
void rtf_print_counts(FILE *out, const rtf_counts *c);

#endif /* RT_FAULT_CHECK_H */
