/* What the files of the test support library share and the tests do not
 * see (rt_test.h is theirs). */
#ifndef RTT_INTERNAL_H
#define RTT_INTERNAL_H

#include <sys/types.h>

#include "rt_test.h"

/* rt_test.c: fork a child that dies with the test process (even if the
 * parent died between fork and prctl: then it exits with code at once). */
pid_t rtt__fork_tied(int code);
/* rt_test.c: in a forked child, the private servers are the parent's:
 * rtt_cleanup() there stops none of them. */
void rtt__forget_servers(void);
/* rtt_redis.c: free this process's rtt_redis() connections. */
void rtt__redis_close_all(void);

#endif /* RTT_INTERNAL_H */
