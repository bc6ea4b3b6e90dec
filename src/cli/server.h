/* A throwaway redis-server for `redturn demo` (server.c). */
#ifndef RT_CLI_SERVER_H
#define RT_CLI_SERVER_H

#include <limits.h>
#include <stddef.h>
#include <sys/types.h>

typedef struct cli_server {
  pid_t pid; /* 0: not running */
  int port;
  char url[64];
  char dir[PATH_MAX];
} cli_server;

/* Find redis-server on PATH and start it on a free loopback port with no
 * persistence; returns once it answers. 0, or -1 with a message in err. */
/* Start path (NULL: "redis-server"; a name without '/' is looked up on
 * PATH). 0, or -1 with a message in err. */
int cli_server_start(cli_server *s, const char *path, char *err,
                     size_t errcap);
/* Stop it (SIGTERM, SIGKILL after 5 s) and remove its directory. */
void cli_server_stop(cli_server *s);

#endif /* RT_CLI_SERVER_H */
