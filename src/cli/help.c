/* The --help text of every subcommand. */
#include "cli.h"

#define COMMON_OPTIONS                                                         \
  "Connection options (every subcommand):\n"                                   \
  "  --url URL        Redis to use: "                                          \
  "redis://[[user]:password@]host[:port][/db]\n"                               \
  "                   (rediss://... for TLS; default: $REDTURN_URL,\n"         \
  "                   else " CLI_DEFAULT_URL ")\n"                             \
  "  --prefix PREFIX  key and channel prefix shared with the library\n"        \
  "                   (default \"" CLI_DEFAULT_PREFIX "\")\n"                  \
  "  --tls-ca FILE    CA certificates (PEM) to trust (default: the "           \
  "system's)\n"                                                                \
  "  --tls-ca-dir DIR directory of hashed CA certificates\n"                   \
  "  --tls-cert FILE  client certificate (PEM), with --tls-key FILE its key\n" \
  "  --tls-server-name NAME\n"                                                 \
  "                   name the certificate must carry (default: the host)\n"   \
  "  --tls-insecure   skip every certificate check (tests only)\n"             \
  "                   (defaults: $REDTURN_TLS_CA, _CA_DIR, _CERT, _KEY,\n"     \
  "                   _SERVER_NAME, _INSECURE=1)\n"                            \
  "  -h, --help       show this help and exit\n"

void cli_help_main(FILE *f) {
  fprintf(f,
          "Usage: redturn [--url URL] [--prefix PREFIX] COMMAND [ARGS...]\n"
          "\n"
          "Fair, first-come-first-served locks through Redis (redturn %s).\n"
          "\n"
          "Commands:\n"
          "  run RESOURCE [options] -- COMMAND [ARGS...]\n"
          "                 wait for the lock, run COMMAND while holding it\n"
          "  inspect RESOURCE...   show holder, fence, lease and queue\n"
          "  watch RESOURCE...     live view of the same, until Ctrl-C\n"
          "  evict RESOURCE [--holder ID]\n"
          "                 force the holder out and hand the lock on\n"
          "  leader RESOURCE  print the election's current leader\n"
          "  demo           fair-queue demo (starts its own redis-server)\n"
          "  help [COMMAND] show help (same as COMMAND --help)\n"
          "\n" COMMON_OPTIONS "  --version        print the version and exit\n"
          "\n"
          "Exit codes: 0 success; 1 evict refused, or run found the lock\n"
          "busy or gave up waiting (run -E sets that code); 64 usage error;\n"
          "69 Redis unreachable; 70 lock lost while the command ran; 71\n"
          "internal error; 76 Redis error reply; 77 authentication or ACL\n"
          "failure; 126/127 command cannot run / not found; 128+N killed by\n"
          "(or stopped on) signal N. 'run' otherwise exits with the\n"
          "command's own status.\n"
          "\n"
          "Run 'redturn COMMAND --help' for the details of a command.\n",
          rt_version_string());
}

void cli_help_run(FILE *f) {
  fputs(
      "Usage: redturn run RESOURCE [options] [--] COMMAND [ARGS...]\n"
      "       redturn run RESOURCE [options] -c STRING\n"
      "\n"
      "Wait for the lock on RESOURCE (joining its first-come-first-served\n"
      "queue in Redis), run COMMAND while holding it, release it when the\n"
      "command exits, and exit with the command's status. Like flock(1),\n"
      "across machines, with flock's -w, -n, -E and -c.\n"
      "\n"
      "Options:\n"
      "  -w, --timeout DURATION   give up waiting after this long (exit 1,\n"
      "                           or -E); 0 is -n (--wait-timeout is the\n"
      "                           same; default: wait forever)\n"
      "  -n, --nonblock           do not wait: take the lock only if it is\n"
      "                           free now, else exit 1 (or -E)\n"
      "  -E, --conflict-exit-code N\n"
      "                           exit code when the lock is busy (-n) or\n"
      "                           the wait timed out (-w): 0 to 255\n"
      "                           (default 1, as flock)\n"
      "  -c, --command STRING     run STRING with /bin/sh -c instead of\n"
      "                           COMMAND\n"
      "  --ttl DURATION           lease, 1s to 24h; renewed every third of\n"
      "                           it while the command runs (default 30s)\n"
      "  --no-renew               never renew the lease: the command must\n"
      "                           finish within --ttl, or the lock counts as\n"
      "                           lost (exit 70)\n"
      "  --grace DURATION         how long the command has between SIGTERM\n"
      "                           and SIGKILL when it must stop (default 5s)\n"
      "  -q, --quiet              no progress display while waiting\n"
      "  --label TEXT             who waits and holds, as inspect and watch\n"
      "                           show it: up to 64 bytes of printable\n"
      "                           ASCII, '' for none (default HOST:PID)\n"
      "  -s, --shared             a read lock: hold together with the other\n"
      "                           --shared requests at the front of the\n"
      "                           queue (RESOURCE is a read-write lock)\n"
      "  -x, --exclusive          a write lock: hold alone, after the\n"
      "                           readers ahead; readers behind wait\n"
      "  --permits K --of N       take K of the N permits of a semaphore\n"
      "                           (K 0: all of them; --of alone: K is 1);\n"
      "                           the queue is first come, first served: a\n"
      "                           large request is never overtaken\n"
      "  --elect VALUE            campaign: run COMMAND while this request\n"
      "                           leads the election RESOURCE, with VALUE\n"
      "                           (printable ASCII) for 'inspect' and the\n"
      "                           observers to see\n"
      "                           (no progress display with these four)\n"
      "\n" COMMON_OPTIONS "\n"
      "DURATION is seconds, as in flock (fractions allowed: 0.5), or a\n"
      "number with a unit: 300ms, 1.5s, 2m, 1h.\n"
      "\n"
      "The command's environment gets:\n"
      "  REDTURN_FENCE     the fencing token of this grant (increases with\n"
      "                    every grant of RESOURCE: pass it to storage that\n"
      "                    can reject writes from an older holder)\n"
      "  REDTURN_RESOURCE  the resource name\n"
      "  REDTURN_HOLDER    the request id holding the lock (for 'evict')\n"
      "\n"
      "While waiting on a terminal, stderr shows the position in the queue,\n"
      "the holder's label and how long it has held the lock, updated in\n"
      "place (one small Redis query per second). Nothing is shown when\n"
      "stderr is not a terminal, or with --quiet.\n"
      "\n"
      "The command runs in its own process group, with descriptors 0, 1\n"
      "and 2 only (it takes over the terminal when redturn is the whole\n"
      "foreground job). It never outlives the lock:\n"
      "  - lost lock (evicted, or the lease ran out before a renewal got\n"
      "    through): the group gets SIGTERM at once, SIGKILL after --grace,\n"
      "    and redturn exits 70;\n"
      "  - a fatal signal to redturn (SIGTERM, SIGINT, SIGHUP, SIGQUIT,\n"
      "    SIGUSR1, SIGUSR2, SIGPIPE, SIGALRM, ...): the same, then release,\n"
      "    exit 128+N; a second signal sends SIGKILL at once;\n"
      "  - redturn killed (even by SIGKILL): the group gets SIGKILL;\n"
      "  - the command exits: what it left in its group gets SIGKILL, then\n"
      "    the lock is released.\n"
      "Releasing and closing take at most 2 s (Redis down): then redturn\n"
      "exits anyway and the lease ends by itself. While waiting, a fatal\n"
      "signal cancels the wait (the request leaves the queue): exit 128+N.\n"
      "\n"
      "Exit status: the command's status (128+N if a signal N killed it);\n"
      "1 (or -E) the lock was busy or the wait timed out; 64 usage error;\n"
      "69 Redis unreachable; 70 lock lost; 71 cannot fork; 76 Redis error;\n"
      "77 authentication failed; 126 command cannot be run; 127 command\n"
      "not found; 128+N redturn got signal N.\n"
      "\n"
      "Examples:\n"
      "  redturn run --ttl 10s deploy-prod -- ./deploy.sh v42\n"
      "  redturn run -w 5 nightly -c 'backup && prune'\n",
      f);
}

void cli_help_inspect(FILE *f) {
  fputs(
      "Usage: redturn inspect RESOURCE... [options]\n"
      "\n"
      "Show, for each RESOURCE, what Redis holds right now: the holder's\n"
      "request id, label and client id, the fencing token, how long the\n"
      "holder has held the lock, its lease left (by the Redis clock), the\n"
      "queue length and the waiters (with their labels) in order. A holder\n"
      "is flagged STALLED when its lease is over but nobody evicted it\n"
      "yet, or when it has held the lock for longer than --stall-after.\n"
      "\n"
      "Options:\n"
      "  --json                one JSON object per resource, one per line\n"
      "  --prom                Prometheus text format (gauges, one sample\n"
      "                        per resource)\n"
      "  --stall-after DURATION  flag holders that held the lock this long\n"
      "                        (seconds, or with a unit: 300ms, 10m, 2h)\n"
      "  --max-waiters N       list at most N waiters (default 100)\n"
      "\n" COMMON_OPTIONS "\n"
      "JSON fields: resource, locked, holder, holder_label, holder_client,\n"
      "fence, held_ms, lease_remaining_ms, queue_length, waiters,\n"
      "waiter_labels, waiters_truncated, stalled, stall_reason\n"
      "(\"lease_expired\", \"held_too_long\" or null), server_time_ms.\n"
      "Holder fields are null when the queue is empty; a label is null when\n"
      "its request has none. Resource names that are not valid UTF-8\n"
      "have their stray bytes written as \\u00NN.\n"
      "\n"
      "Prometheus metrics, each labelled resource=\"NAME\": redturn_locked,\n"
      "redturn_queue_length, redturn_waiters, redturn_fence, redturn_held_ms,\n"
      "redturn_lease_remaining_ms, redturn_stalled; and, while a request\n"
      "holds the lock, redturn_holder_info{resource,holder,label} 1 (the\n"
      "holder's request id and label). Label values escape\n"
      "\\, \" and newline as the text format requires; other control bytes\n"
      "and invalid UTF-8 become the four characters \\xNN.\n"
      "\n"
      "Exit status: 0; 64 usage error; 69 Redis unreachable; 76 a key of\n"
      "the resource has the wrong type or Redis answered an error; 77\n"
      "authentication failed.\n"
      "\n"
      "Example:\n"
      "  redturn inspect deploy-prod --stall-after 10m\n",
      f);
}

void cli_help_watch(FILE *f) {
  fputs("Usage: redturn watch RESOURCE... [options]\n"
        "\n"
        "A live view of 'redturn inspect', refreshed every --interval until\n"
        "interrupted (Ctrl-C exits 0). On a terminal the screen is redrawn;\n"
        "otherwise (or with --json) a new snapshot is printed only when the\n"
        "holder, fence, queue or stalled flag changed.\n"
        "\n"
        "Options:\n"
        "  --interval DURATION     time between refreshes (default 250ms;\n"
        "                          a bare number is seconds)\n"
        "  --count N               stop after N refreshes (default: never)\n"
        "  --json                  print snapshots as JSON lines\n"
        "  --stall-after DURATION  as for inspect\n"
        "  --max-waiters N         as for inspect (default 20)\n"
        "\n" COMMON_OPTIONS "\n"
        "If Redis goes away or does not answer within 0.5 s, every resource\n"
        "shows \"reconnecting\" (JSON: \"reconnecting\":true) until it is\n"
        "back; the client reconnects by itself.\n"
        "\n"
        "Exit status: 0 (interrupted, or --count reached); 64 usage error;\n"
        "69 Redis unreachable at start; 77 authentication failed.\n"
        "\n"
        "Example:\n"
        "  redturn watch deploy-prod deploy-staging\n",
        f);
}

void cli_help_evict(FILE *f) {
  fputs("Usage: redturn evict RESOURCE [--holder ID]\n"
        "\n"
        "An operator's forced release: delete the holder's record of RESOURCE\n"
        "and grant the lock to the next waiter, exactly as a release would\n"
        "(next fencing token, one notice to that waiter; waiters whose\n"
        "process is gone are skipped). The evicted holder's client is told\n"
        "it lost the lock ('redturn run' then stops its command and exits\n"
        "70).\n"
        "\n"
        "Options:\n"
        "  --holder ID   evict only if request ID (as shown by inspect) is\n"
        "                still the holder; without it, whoever holds the lock\n"
        "                when the command reaches Redis is evicted, so naming\n"
        "                the holder is safer\n"
        "\n" COMMON_OPTIONS "\n"
        "The check and the eviction are one Lua script: nothing changes when\n"
        "it refuses.\n"
        "\n"
        "Exit status: 0 evicted; 1 refused (ID is not the holder, or nobody\n"
        "holds the lock); 64 usage error; 69 Redis unreachable; 76 Redis\n"
        "error; 77 authentication failed.\n"
        "\n"
        "Example:\n"
        "  redturn inspect deploy-prod     # find the stalled holder's id\n"
        "  redturn evict deploy-prod --holder 5f0c...:3\n",
        f);
}

void cli_help_demo(FILE *f) {
  fputs("Usage: redturn demo [options]\n"
        "\n"
        "The fair-queue demo: start worker processes that each take the lock\n"
        "on one resource several times, then print every grant in order with\n"
        "its fencing token, the worker, how long it waited and the handoff\n"
        "latency (previous holder's release call to this grant), and check\n"
        "that fences increase, holds never overlap and no request was\n"
        "overtaken.\n"
        "\n"
        "Without --url and without $REDTURN_URL, the demo starts its own\n"
        "redis-server (found on PATH) on a free loopback port, without\n"
        "persistence, and stops it at the end.\n"
        "\n"
        "Options:\n"
        "  --workers N          worker processes (default 4)\n"
        "  --rounds N           grants per worker (default 3)\n"
        "  --hold DURATION      how long each grant holds the lock (default "
        "50ms)\n"
        "  --resource NAME      resource to contend on (default demo-PID)\n"
        "\n" COMMON_OPTIONS "\n"
        "Exit status: 0 all checks passed; 1 a check failed or a worker\n"
        "failed; 64 usage error; 69 Redis unreachable or redis-server could\n"
        "not be started.\n",
        f);
}

void cli_help_leader(FILE *f) {
  fputs("Usage: redturn leader RESOURCE [options]\n"
        "\n"
        "Print the current leader of the election RESOURCE (candidates\n"
        "campaign with 'redturn run --elect VALUE'), as Redis holds it now:\n"
        "  leader <request id> fence <fencing token> value \"<value>\"\n"
        "or 'no leader'.\n"
        "\n"
        "Options:\n" COMMON_OPTIONS "\n"
        "Exit codes: 0 a leader was printed; 1 no leader; 64 bad arguments,\n"
        "or RESOURCE is not an election; 69 Redis unreachable.\n",
        f);
}
