/* --instructions: the instructions redis-server executes per grant, a
 * figure the machine's load cannot move (the timings and the CPU seconds
 * of a shared 2-core machine move by a factor of five within minutes).
 *
 * The server runs under valgrind's callgrind (perf's hardware counters are
 * not available in this virtual machine: `perf stat -e instructions` says
 * "not supported"). callgrind_control zeroes its counters at a pass's go
 * and dumps them at its stop; the dump's "summary:" line is the count of
 * the window. callgrind slows the server down some 50 times, so these
 * passes run a fixed, smaller number of grants (--instructions-n) on a
 * server of their own, after the timed passes. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "driver.h"

/* Run "callgrind_control <flag> <pid>", its output thrown away. 0 if it
 * exited with 0. */
static int control(const rtb_target *t, const char *flag) {
  char pid[24];
  snprintf(pid, sizeof(pid), "%d", (int)t->srv.own.pid);
  pid_t c = fork();
  if (c < 0)
    return -1;
  if (c == 0) {
    int fd = open("/dev/null", O_RDWR);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    execlp("callgrind_control", "callgrind_control", flag, pid, (char *)NULL);
    _exit(127);
  }
  int st;
  while (waitpid(c, &st, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

int rtb_instr_start(const rtb_run *run, rtb_target *t) {
  memset(t, 0, sizeof(*t));
  const char *tmp = getenv("TMPDIR");
  snprintf(t->cg_dir, sizeof(t->cg_dir), "%s/redturn-bench-cg.XXXXXX",
           tmp != NULL && tmp[0] ? tmp : "/tmp");
  if (mkdtemp(t->cg_dir) == NULL) {
    perror("redturn-bench: mkdtemp");
    t->cg_dir[0] = '\0';
    return -1;
  }
  /* rtserver.h starts an executable with the server's arguments: this
   * one puts valgrind in front of redis-server (exec keeps the pid, which
   * callgrind_control addresses). */
  char wrapper[600];
  snprintf(wrapper, sizeof(wrapper), "%s/redis-callgrind", t->cg_dir);
  FILE *f = fopen(wrapper, "w");
  if (f == NULL) {
    perror(wrapper);
    return -1;
  }
  fprintf(f,
          "#!/bin/sh\nexec valgrind -q --tool=callgrind "
          "--callgrind-out-file='%s/callgrind.out' '%s' \"$@\"\n",
          t->cg_dir, run->opt.redis_server);
  fclose(f);
  chmod(wrapper, 0700);

  char err[1600];
  const char *extra[3] = {NULL, NULL, NULL};
  if (run->opt.module != NULL) {
    extra[0] = "--loadmodule";
    extra[1] = run->opt.module;
  }
  rts_options o;
  memset(&o, 0, sizeof(o));
  o.exe = wrapper;
  o.dir_prefix = "redturn-bench";
  o.extra = extra;
  o.no_module = 1;
  o.wait_ms = 120000; /* valgrind's start takes seconds */
  snprintf(t->srv.host, sizeof(t->srv.host), "127.0.0.1");
  if (rts_start(&t->srv.own, &o, err, sizeof(err)) != 0) {
    fprintf(stderr, "redturn-bench: redis-server under callgrind: %s\n", err);
    return -1;
  }
  t->srv.port = t->srv.own.port;
  t->own = 1;
  t->callgrind = 1;
  snprintf(t->url, sizeof(t->url), "redis://127.0.0.1:%d", t->srv.port);
  if ((t->nodes[0] = rtb_sync_open(&t->srv)) == NULL)
    return -1;
  t->nnodes = 1;
  return 0;
}

void rtb_instr_stop(rtb_target *t) {
  if (t->nnodes > 0)
    rtb_sync_close(t->nodes[0]);
  t->nnodes = 0;
  if (t->own)
    rtb_server_stop(&t->srv);
  t->own = 0;
  if (t->cg_dir[0] != '\0') {
    char path[700];
    for (unsigned i = 0; i <= t->cg_dumps; i++) {
      if (i == 0)
        snprintf(path, sizeof(path), "%s/callgrind.out", t->cg_dir);
      else
        snprintf(path, sizeof(path), "%s/callgrind.out.%u", t->cg_dir, i);
      unlink(path);
    }
    snprintf(path, sizeof(path), "%s/redis-callgrind", t->cg_dir);
    unlink(path);
    rmdir(t->cg_dir);
    t->cg_dir[0] = '\0';
  }
}

int rtb_instr_zero(const rtb_target *t) { return control(t, "-z"); }

double rtb_instr_read(rtb_target *t) {
  if (control(t, "-d") != 0)
    return NAN;
  char path[700], line[256];
  snprintf(path, sizeof(path), "%s/callgrind.out.%u", t->cg_dir, ++t->cg_dumps);
  FILE *f = fopen(path, "r");
  if (f == NULL) {
    perror(path);
    return NAN;
  }
  double v = NAN;
  while (fgets(line, sizeof(line), f) != NULL)
    if (strncmp(line, "summary:", 8) == 0)
      v = strtod(line + 8, NULL);
  fclose(f);
  unlink(path); /* a dump is megabytes; the count is all we keep */
  return v;
}
