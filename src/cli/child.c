/* The command `redturn run` starts, in its own process group, under a
 * keeper process that outlives redturn just long enough to kill that group.
 *
 * redturn -> keeper (group leader, PR_SET_PDEATHSIG) -> the command
 *
 * A direct child with PR_SET_PDEATHSIG alone would not do: `sh -c 'a; b'`
 * runs a and b as grandchildren, which would go on running, without the
 * lock, after a `kill -9` of redturn. The keeper gets a signal when redturn
 * dies (however it dies), kills the whole group and exits. Otherwise it
 * only waits for the command and exits with its status (or dies of its
 * signal), so redturn sees the command's status as the keeper's.
 *
 * The keeper is forked from a process that may have threads (libuv's pool),
 * so it only makes async-signal-safe calls: no malloc, no stdio. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "cli.h"

/* The keeper's death signal: any catchable one would do, since the keeper
 * checks getppid() whenever it wakes. */
#define PARENT_DIED SIGTERM

/* Close every descriptor from 3 up except keep: the keeper must not hold
 * redturn's Redis sockets open (Redis would not see them close when
 * redturn exits), and the command gets only 0, 1 and 2. */
static void close_from_3(int keep) {
  struct rlimit nofile;
  if ((keep == 3 || close_range(3, (unsigned)keep - 1, 0) == 0) &&
      close_range((unsigned)keep + 1, ~0u, 0) == 0)
    return;
  /* Kernels before 5.9 have no close_range. */
  if (getrlimit(RLIMIT_NOFILE, &nofile) != 0 || nofile.rlim_cur > 65536)
    nofile.rlim_cur = 65536;
  for (int fd = 3; fd < (int)nofile.rlim_cur; fd++)
    if (fd != keep)
      close(fd);
}

/* Exit as the command did: with its code, or killed by its signal. */
static void exit_like(int status) {
  if (WIFEXITED(status))
    _exit(WEXITSTATUS(status));
  int sig = WTERMSIG(status);
  struct rlimit no_core = {0, 0};
  sigset_t one;
  setrlimit(RLIMIT_CORE, &no_core); /* the command dumped one already */
  sigemptyset(&one);
  sigaddset(&one, sig);
  kill(getpid(), sig);
  sigprocmask(SIG_UNBLOCK, &one, NULL);
  _exit(CLI_SIGNAL_BASE + sig); /* a signal that does not kill */
}

/* Tell redturn why the command could not start. */
static void tell(int fd, int err) {
  ssize_t n = write(fd, &err, sizeof(err));
  (void)n; /* redturn then reads end-of-file and learns nothing more */
}

static void keeper(pid_t redturn, int err_fd, int tty_fd, char *const *argv,
                   char *const *envp, const sigset_t *mask) {
  struct sigaction dfl;
  sigset_t wake;
  int err;

  /* Everything is blocked since before the fork; drop libuv's handlers
   * before anything could be delivered. */
  dfl.sa_handler = SIG_DFL;
  dfl.sa_flags = 0;
  sigemptyset(&dfl.sa_mask);
  for (int s = 1; s < NSIG; s++)
    sigaction(s, &dfl, NULL);
  close_from_3(err_fd);
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, PARENT_DIED);
  if (getppid() != redturn)
    _exit(CLI_OSERR); /* redturn died already: start nothing */
  if (tty_fd >= 0)
    tcsetpgrp(tty_fd, getpid()); /* SIGTTOU is blocked: allowed */

  pid_t self = getpid();
  pid_t cmd = fork();
  if (cmd == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* should the keeper be killed */
    if (getppid() != self)
      _exit(CLI_OSERR);
    sigprocmask(SIG_SETMASK, mask, NULL);
    execvpe(argv[0], argv, envp);
    err = errno;
    tell(err_fd, err);
    _exit(err == ENOENT ? CLI_NOT_FOUND : CLI_CANNOT_EXEC);
  }
  if (cmd < 0) {
    tell(err_fd, errno);
    _exit(CLI_OSERR);
  }
  close(err_fd);

  sigemptyset(&wake);
  sigaddset(&wake, SIGCHLD);
  sigaddset(&wake, PARENT_DIED);
  for (;;) {
    int status;
    sigwaitinfo(&wake, NULL);
    if (getppid() != redturn) {
      kill(-getpid(), SIGKILL); /* the group, the keeper included */
      _exit(CLI_SIGNAL_BASE + SIGKILL);
    }
    if (waitpid(cmd, &status, WNOHANG | WUNTRACED) != cmd)
      continue;
    if (WIFSTOPPED(status)) {
      /* Ctrl-Z: a suspended command would hold the lock with nobody able
       * to resume it (the shell knows only redturn's group). */
      if (WSTOPSIG(status) == SIGTSTP)
        kill(-getpid(), SIGCONT);
      continue;
    }
    exit_like(status);
  }
}

/* Is redturn the only process of its process group? Not in a pipeline
 * (`redturn run ... | less`: less reads the terminal too) nor in a script
 * run without job control (the shell shares the group). */
static int alone_in_group(void) {
  pid_t me = getpid(), group = getpgrp();
  int alone = 1;
  DIR *proc = opendir("/proc");
  struct dirent *e;
  if (proc == NULL)
    return 0;
  while (alone && (e = readdir(proc)) != NULL) {
    char path[300], stat[512];
    long pid = strtol(e->d_name, NULL, 10);
    if (pid <= 0 || pid == me)
      continue;
    snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
    FILE *f = fopen(path, "r");
    if (f == NULL)
      continue; /* gone meanwhile */
    size_t n = fread(stat, 1, sizeof(stat) - 1, f);
    fclose(f);
    stat[n] = '\0';
    /* "pid (comm) state ppid pgrp ...": comm may hold anything, so count
     * from its last ')'. */
    const char *paren = strrchr(stat, ')');
    long ppid, pgrp;
    char state;
    if (paren != NULL &&
        sscanf(paren + 1, " %c %ld %ld", &state, &ppid, &pgrp) == 3 &&
        pgrp == group)
      alone = 0;
  }
  closedir(proc);
  return alone;
}

/* The terminal (one of 0, 1, 2) to hand to the command's group, or -1:
 * when redturn is the whole foreground job of a terminal (a command typed
 * at a shell prompt), so that Ctrl-C and reads from the terminal reach the
 * command as they would without redturn. */
static int foreground_tty(void) {
  for (int fd = 0; fd < 3; fd++)
    if (isatty(fd) && tcgetpgrp(fd) == getpgrp())
      return alone_in_group() ? fd : -1;
  return -1;
}

int cli_child_start(cli_child *ch, char *const *argv, char *const *envp) {
  int ep[2], err = 0;
  sigset_t all, old;
  pid_t me = getpid();

  ch->pid = 0;
  ch->tty_fd = foreground_tty();
  if (pipe2(ep, O_CLOEXEC) != 0)
    return errno;
  sigfillset(&all);
  sigprocmask(SIG_SETMASK, &all, &old);
  pid_t pid = fork();
  if (pid == 0)
    keeper(me, ep[1], ch->tty_fd, argv, envp, &old);
  if (pid < 0)
    err = errno;
  sigprocmask(SIG_SETMASK, &old, NULL);
  close(ep[1]);
  if (pid < 0) {
    close(ep[0]);
    return err;
  }
  /* Also here, so that a kill of the group right after this call cannot
   * miss it (the keeper may not have run yet). */
  setpgid(pid, pid);
  ch->pid = pid;
  /* The pipe closes when the command's exec succeeded (close-on-exec) and
   * the keeper closed its end; before, an errno if it failed. */
  ssize_t n;
  do
    n = read(ep[0], &err, sizeof(err));
  while (n < 0 && errno == EINTR);
  close(ep[0]);
  return n == (ssize_t)sizeof(err) ? err : 0;
}

void cli_child_kill(const cli_child *ch, int sig) {
  if (ch->pid > 0)
    kill(-ch->pid, sig);
}

int cli_child_reap(cli_child *ch, int *code) {
  int status;
  if (ch->pid <= 0 || waitpid(ch->pid, &status, WNOHANG) != ch->pid)
    return 0;
  /* Whatever the command left behind in its group would run without the
   * lock once it is released. */
  kill(-ch->pid, SIGKILL);
  ch->pid = 0;
  if (ch->tty_fd >= 0) {
    tcsetpgrp(ch->tty_fd, getpgrp()); /* redturn ignores SIGTTOU */
    ch->tty_fd = -1;
  }
  *code = WIFEXITED(status) ? WEXITSTATUS(status)
                            : CLI_SIGNAL_BASE + WTERMSIG(status);
  return 1;
}
