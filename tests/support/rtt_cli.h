/* Running the redturn command in tests (tests/tools/it_cli_*.c): start it
 * as a child with the test's --url and --prefix, collect its output and
 * exit code; scratch files for the commands it runs; a private server to
 * stop while it runs.
 *
 * The tool is $REDTURN_CLI, else "redturn" in the build directory (the
 * parent of the test's directory). */
#ifndef RTT_CLI_H
#define RTT_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "rt_test.h"

#define RTT_OUT_MAX 65536

/* One run of the tool. */
typedef struct rtt_proc {
  pid_t pid;
  int fds[2]; /* stdout, stderr (read ends) */
  char out[RTT_OUT_MAX];
  char err[RTT_OUT_MAX];
  size_t lens[2];
  int code; /* exit status, or 128 + signal */
  int done;
  uint64_t started_ms, ended_ms;
} rtt_proc;

/* The arguments of a run, NULL-terminated. */
#define RTT_ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* Fails the test unless p exited with want (prints its output). */
#define RTT_ASSERT_CODE(p, want)                                               \
  cr_assert_eq((p)->code, (want),                                              \
               "exit %d, want %d; stdout:\n%s\nstderr:\n%s", (p)->code,        \
               (want), (p)->out, (p)->err)

/* The tool's path (fails the test if it is not built). */
const char *rtt_cli_path(void);
/* Start the tool with args (NULL-terminated); with conn, "--url <test url>
 * --prefix <test prefix>" come first. REDTURN_URL is removed from its
 * environment, so the tool's default is tested only on purpose. */
void rtt_cli_start(rtt_proc *p, int conn, const char *const *args);
/* Read what p wrote, waiting up to timeout_ms for something. */
void rtt_cli_drain(rtt_proc *p, int timeout_ms);
/* Has the rtt_proc arg exited? (reads its output meanwhile; a predicate
 * for rtt_run_until_fn) */
int rtt_cli_poll(void *arg);
/* Wait for p to exit (killing it and failing the test after timeout_ms);
 * returns its code. */
int rtt_cli_wait(rtt_proc *p, int64_t timeout_ms);
/* Run with the test's --url/--prefix and wait (10 s at most). */
int rtt_cli(rtt_proc *p, const char *const *args);
/* Run with no connection options and wait (20 s at most). */
int rtt_cli_bare(rtt_proc *p, const char *const *args);

/* p has printed n lines at least (p is polled); a predicate for
 * rtt_run_until_fn over an rtt_lines_goal. */
typedef struct rtt_lines_goal {
  rtt_proc *p;
  int n;
} rtt_lines_goal;
int rtt_cli_has_lines(void *arg);
/* The number of newlines in s. */
int rtt_count_lines(const char *s);

/* The number after "key": in a JSON text; fails the test if it is not
 * there. */
long long rtt_json_num(const char *json, const char *key);
/* Fails the test unless text contains want. */
void rtt_assert_has(const char *text, const char *want);

/* ---- scratch files of the commands a test runs ---------------------------- */

/* Make a fresh scratch directory (one per test process at a time) and
 * return its path; rtt_scratch_remove() removes it. */
const char *rtt_scratch_dir(void);
void rtt_scratch_remove(void);
/* The path of file in the scratch directory. */
void rtt_scratch_path(char *buf, size_t cap, const char *file);
/* The contents of a scratch file ("" if it does not exist). */
void rtt_scratch_read(const char *file, char *buf, size_t cap);
/* Run loop until the scratch file has a whole line (10 s at most). */
void rtt_scratch_await(uv_loop_t *loop, const char *file);
/* A command for sh -c: text with "D" (followed by '/' or the end) replaced
 * by the scratch directory, into buf. */
const char *rtt_script(char *buf, size_t cap, const char *text);

/* A redis-server of the test's own, to stop while redturn uses it; its
 * URL into url. */
void rtt_private_url(rtt_server *s, char *url, size_t cap);

#endif /* RTT_CLI_H */
