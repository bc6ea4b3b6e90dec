/* The checks of the out-of-memory tests (tests/failures/it_oom*.c, faults
 * injected with libfiu): the library's promises about callbacks, checked
 * inside them and reported after the loop ran (an assertion inside a
 * callback would unwind through the library). */
#ifndef RTT_OOM_H
#define RTT_OOM_H

/* > 0 while the test is inside a library call: a callback must never run
 * then. RTT_API(call) makes the call so, and is its return value. */
extern int rtt_oom_in_call;
extern int rtt_oom_rc;
#define RTT_API(call)                                                          \
  (rtt_oom_in_call++, rtt_oom_rc = (call), rtt_oom_in_call--, rtt_oom_rc)

/* The run of the test (the failing allocation's number), for messages. */
extern long rtt_oom_k;

/* Note a broken promise (the first one's text is kept). */
void rtt_oom_violation(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
/* Fails the test if a promise was broken; when says where. */
void rtt_oom_check_no_violation(const char *when);
/* 0 or one of the library's codes? 1 or 0. */
int rtt_oom_known_status(int st);
/* In a callback of what: not inside a library call, with a known status. */
void rtt_oom_check_callback(const char *what, int status);

/* A libfiu external callback for "redturn/alloc" (fiu_enable_external):
 * it fails exactly the fail_at-th allocation made while armed, and notes
 * that it fired. */
typedef struct rtt_oom_nth_t {
  int armed;
  long calls;
  long fail_at;
  int fired;
} rtt_oom_nth_t;
extern rtt_oom_nth_t rtt_oom_nth;
int rtt_oom_fail_nth(const char *name, int *failnum, void **failinfo,
                     unsigned int *flags);

#endif /* RTT_OOM_H */
