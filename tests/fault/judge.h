/* The split-brain judge of the fault-injection suite (see README.md here,
 * "The split-brain judge").
 *
 * With --judge, every worker "writes" through a fence-checking store shared
 * by all workers (store.log and store.fences in the run's directory, under
 * an flock): at its grant and again just before its release, as long as it
 * believes it holds. The store refuses a write whose fence is lower than the
 * highest it accepted for that resource, and logs every write. The judge
 * reads that log (and driver.log for key loss and failovers) and counts
 * accepted split-brain writes (violations) and refused stale writes (the
 * fences at work; reported, not violations). */
#ifndef RT_FAULT_JUDGE_H
#define RT_FAULT_JUDGE_H

#include <stdint.h>
#include <stdio.h>

/* The store's files in a run's directory. */
#define RTF_STORE_LOG "store.log"
#define RTF_STORE_FENCES "store.fences"

/* Judge the store log in dir, if there is one (0 and nothing printed if
 * not). Prints each violation ("VIOLATION [split-brain] ...",
 * "VIOLATION [store] ...") and the judge's counts to out; returns the
 * number of violations, or -1 if the log cannot be read. clock_ms is the
 * checker's clock tolerance (rtf_tol.clock_ms). */
long rtf_judge(const char *dir, int64_t clock_ms, FILE *out);

#endif /* RT_FAULT_JUDGE_H */
