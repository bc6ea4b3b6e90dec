/* The benchmark's command line: the scale points and the options that
 * override them. */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "driver.h"
#include "redturn.h" /* RT_PERMITS_MAX, RT_SCRIPT_PATH_* */

/* The scale points of the contract, "solo" (one waiter: the uncontended
 * wait + signal cycle), and k4/k4hold, which with hot, hold and solo make
 * the workload other lock libraries publish (P=4 W=8, K=1 and 4, H=0 and
 * 1000 us). N is scaled down where a mode can only be slow (holds of 1 ms,
 * one sequential waiter). */
static const rtb_point default_points[] = {
    {"hot", 4, 8, 1, 0, 20000},      {"spread", 4, 8, 64, 0, 20000},
    {"deep", 4, 25000, 1, 0, 20000}, {"many", 4, 2500, 10000, 0, 100000},
    {"hold", 4, 8, 1, 1000, 5000},   {"solo", 1, 1, 1, 0, 5000},
    {"k4", 4, 8, 4, 0, 20000},       {"k4hold", 4, 8, 4, 1000, 5000},
};
_Static_assert(sizeof(default_points) / sizeof(default_points[0]) ==
                   RTB_NPOINTS,
               "RTB_NPOINTS counts the default points");

static void usage(FILE *f) {
  fprintf(
      f,
      "usage: redturn-bench [options]\n"
      "\n"
      "Runs ping (round trips/s), fair (redturn, once per --kinds kind) and "
      "spin\n"
      "(SET NX PX + retry) against one redis-server, at every scale point, "
      "and\n"
      "prints a table and one JSON object per (mode, kind, point). Without "
      "--url\n"
      "it starts its own redis-server on a free loopback port (no "
      "persistence)\n"
      "and stops it after; with --cluster, two Redis Clusters instead.\n"
      "\n"
      "  --url URL          use this server (redis://[:password@]host:port)\n"
      "  --redis-server P   redis-server binary to start (default: from PATH)\n"
      "  --points LIST      scale points, comma-separated (default: all):\n"
      "                       hot    P=4 W=8    K=1     H=0    N=20000\n"
      "                       spread P=4 W=8    K=64    H=0    N=20000\n"
      "                       deep   P=4 W=25000 K=1    H=0    N=20000\n"
      "                       many   P=4 W=2500 K=10000 H=0    N=100000\n"
      "                       hold   P=4 W=8    K=1     H=1000 N=5000\n"
      "                       solo   P=1 W=1    K=1     H=0    N=5000\n"
      "                       k4     P=4 W=8    K=4     H=0    N=20000\n"
      "                       k4hold P=4 W=8    K=4     H=1000 N=5000\n"
      "  --modes LIST       ping,fair,spin (default: all three)\n"
      "  --kinds LIST       what fair requests ask for, one fair row per "
      "kind,\n"
      "                     comma-separated (default: the mutex once per "
      "script\n"
      "                     path: mutex@module (when the server has the "
      "module),\n"
      "                     mutex@functions,mutex@eval):\n"
      "                       mutex   one holder at a time\n"
      "                       rw:PCT  a read-write lock, PCT %% of the "
      "requests\n"
      "                               shared (0..100), the rest exclusive\n"
      "                       sem:N   a semaphore of N permits, one per "
      "request\n"
      "                       election  an election: a candidate leads "
      "until it\n"
      "                               resigns\n"
      "                     each optionally followed by @module, @functions "
      "or\n"
      "                     @eval:\n"
      "                     the clients' script path (rt_options_t."
      "script_path;\n"
      "                     auto: what the client picks), e.g.\n"
      "                     --kinds mutex,rw:90@eval\n"
      "  --module PATH      load this redturn module (redturn_module.so) "
      "into the\n"
      "                     server the run starts (default: "
      "module/redturn_module.so\n"
      "                     of the build tree, when built; none: no "
      "module)\n"
      "  --instructions     also count the instructions redis-server "
      "executes per\n"
      "                     grant (valgrind's callgrind, a server of its "
      "own) at hot\n"
      "                     and spread, those of --points, for each fair "
      "kind and spin\n"
      "  --instructions-n N grants per callgrind pass (default 5000)\n"
      "  --cluster          run fair against a Redis Cluster of 1 shard and "
      "one of\n"
      "                     3 shards (no replicas, started and stopped by "
      "the run),\n"
      "                     each pass on both in turn, and print the 3/1 "
      "ratios;\n"
      "                     points spread,many unless --points; no "
      "MONITOR\n"
      "                     verification (holds are still checked), no "
      "memory probe;\n"
      "                     not with --url\n"
      "  -P N               processes (overrides the points' value)\n"
      "  -W N               waiters per process\n"
      "  -K N               resources (waiter i uses resource i %% K)\n"
      "  -H US              hold time in microseconds\n"
      "  -N N               grants to reach (the pass stops at N or at the "
      "cap)\n"
      "                     -P/-W/-K/-H without --points run one point, "
      "'custom'\n"
      "  --cap-s S          wall-clock cap per pass (default 10; ping: 2)\n"
      "  --repeat R         run every point R times, modes alternating, and "
      "report\n"
      "                     the median of each timing figure (default 1); the "
      "FIFO\n"
      "                     check and the memory probe run in the first "
      "repeat\n"
      "  --retry-ms MS      spin retry delay (default 5)\n"
      "  --ttl-ms MS        lease TTL (default 10000)\n"
      "  --no-verify        skip the FIFO verification passes (MONITOR)\n"
      "  --verify-n N       grants per verification pass (default 2000)\n"
      "  --verify-s S       cap of a verification pass (default 3; at least 1 "
      "s\n"
      "                     per 5000 waiters)\n"
      "  --no-probe         skip the memory probes (fair, P*W >= 1000)\n"
      "  --json FILE        also write the JSON lines to FILE\n"
      "  --data DIR         write plot data (grants.dat, handoff-*.dat) into "
      "DIR\n"
      "  -v, --verbose      per-pass details (commandstats, MONITOR counts)\n"
      "  -h, --help         this help\n"
      "\n"
      "Exit status: 0; 3 if a worker reported errors; 4 if holds overlapped\n"
      "(beyond the permits, for rw and sem); 2 on bad options.\n");
}

static long parse_long(const char *s, const char *what, long min) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno != 0 || *end != '\0' || v < min) {
    fprintf(stderr, "redturn-bench: bad %s: %s\n", what, s);
    exit(2);
  }
  return v;
}

/* The defaults the usage text lists. */
static void set_defaults(rtb_options *opt) {
  opt->procs = opt->waiters = opt->keys = opt->hold_us = -1;
  opt->n = -1;
  opt->cap_s = 10;
  opt->retry_ms = 5;
  opt->ttl_ms = 10000;
  opt->verify = 1;
  opt->verify_n = 2000;
  opt->verify_s = 3;
  opt->probe = 1;
  opt->repeat = 1;
  opt->redis_server = "redis-server";
  opt->instructions_n = 5000;
}

const char *rtb_path_name(int path) {
  switch (path) {
  case RT_SCRIPT_PATH_FUNCTIONS:
    return "functions";
  case RT_SCRIPT_PATH_EVAL:
    return "eval";
  case RT_SCRIPT_PATH_MODULE:
    return "module";
  default:
    return "auto";
  }
}

const char *rtb_kind_name(const rtb_kind *k, char *buf, size_t cap) {
  if (k->type == RTB_RW)
    snprintf(buf, cap, "rw:%u", k->param);
  else if (k->type == RTB_SEM)
    snprintf(buf, cap, "sem:%u", k->param);
  else if (k->type == RTB_ELECTION)
    snprintf(buf, cap, "election");
  else
    snprintf(buf, cap, "mutex");
  size_t n = strlen(buf);
  if (k->path != RT_SCRIPT_PATH_AUTO && n < cap)
    snprintf(buf + n, cap - n, "@%s", rtb_path_name(k->path));
  return buf;
}

/* One --kinds item into *k; -1 if it is none of them. */
static int parse_kind(char *t, rtb_kind *k) {
  char *end, *at = strchr(t, '@');
  unsigned long v = 0;
  memset(k, 0, sizeof(*k));
  if (at != NULL) {
    *at++ = '\0';
    if (strcmp(at, "functions") == 0)
      k->path = RT_SCRIPT_PATH_FUNCTIONS;
    else if (strcmp(at, "eval") == 0)
      k->path = RT_SCRIPT_PATH_EVAL;
    else if (strcmp(at, "module") == 0)
      k->path = RT_SCRIPT_PATH_MODULE;
    else if (strcmp(at, "auto") != 0)
      return -1;
  }
  if (strcmp(t, "mutex") == 0)
    return 0;
  if (strcmp(t, "election") == 0) {
    k->type = RTB_ELECTION;
    return 0;
  }
  if (strncmp(t, "rw:", 3) == 0) {
    k->type = RTB_RW;
    v = strtoul(t + 3, &end, 10);
    if (end == t + 3 || *end != '\0' || v > 100)
      return -1;
  } else if (strncmp(t, "sem:", 4) == 0) {
    k->type = RTB_SEM;
    v = strtoul(t + 4, &end, 10);
    if (end == t + 4 || *end != '\0' || v < 1 || v > RT_PERMITS_MAX)
      return -1;
  } else {
    return -1;
  }
  k->param = (unsigned)v;
  return 0;
}

/* --kinds (NULL: the mutex alone) into opt->kinds. */
static void parse_kinds(rtb_options *opt, const char *kinds) {
  opt->nkinds = 0;
  char *copy = strdup(kinds != NULL ? kinds : "mutex"), *save = NULL;
  for (char *t = strtok_r(copy, ",", &save); t;
       t = strtok_r(NULL, ",", &save)) {
    if (opt->nkinds == RTB_MAX_KINDS ||
        parse_kind(t, &opt->kinds[opt->nkinds]) != 0) {
      fprintf(
          stderr,
          "redturn-bench: bad kind %s (mutex, rw:0..100, sem:N, election; at "
          "most %d)\n",
          t, RTB_MAX_KINDS);
      exit(2);
    }
    opt->nkinds++;
  }
  free(copy);
  if (opt->nkinds == 0) {
    fprintf(stderr, "redturn-bench: --kinds names no kind\n");
    exit(2);
  }
}

/* --modes: a bit per mode named in the list (NULL: all three; with
 * --cluster fair, the one mode a cluster runs). */
static unsigned parse_modes(const rtb_options *opt, const char *modes) {
  unsigned bits = 0;
  if (modes == NULL)
    return opt->cluster ? 1u << RTB_FAIR : 7;
  char *copy = strdup(modes), *save = NULL;
  for (char *t = strtok_r(copy, ",", &save); t;
       t = strtok_r(NULL, ",", &save)) {
    int found = 0;
    for (int m = 0; m < RTB_NMODES; m++)
      if (strcmp(t, rtb_mode_names[m]) == 0) {
        bits |= 1u << m;
        found = 1;
      }
    if (!found) {
      fprintf(stderr, "redturn-bench: unknown mode %s\n", t);
      exit(2);
    }
  }
  free(copy);
  if (bits == 0) {
    fprintf(stderr, "redturn-bench: --modes names no mode\n");
    exit(2);
  }
  if (opt->cluster && bits != 1u << RTB_FAIR) {
    fprintf(stderr, "redturn-bench: --cluster runs the fair mode only (ping "
                    "and spin talk to one server)\n");
    exit(2);
  }
  return bits;
}

/* --points (NULL: all, or 'custom' when -P/-W/-K/-H are given) into
 * opt->points, with -P/-W/-K/-H/-N applied to each. */
static void pick_points(rtb_options *opt, const char *points) {
  int custom = points == NULL && (opt->procs >= 0 || opt->waiters >= 0 ||
                                  opt->keys >= 0 || opt->hold_us >= 0);
  if (custom) {
    opt->points[0] = default_points[0];
    opt->points[0].name = "custom";
    opt->npoints = 1;
  } else if (points == NULL && opt->cluster) {
    /* Spread keys: what sharding can speed up (a hot key lives on one). */
    opt->points[0] = default_points[1];
    opt->points[1] = default_points[3];
    opt->npoints = 2;
  } else if (points == NULL || strcmp(points, "all") == 0) {
    memcpy(opt->points, default_points, sizeof(default_points));
    opt->npoints = RTB_NPOINTS;
  } else {
    char *copy = strdup(points), *save = NULL;
    for (char *t = strtok_r(copy, ",", &save); t;
         t = strtok_r(NULL, ",", &save)) {
      size_t i;
      for (i = 0; i < RTB_NPOINTS; i++)
        if (strcmp(t, default_points[i].name) == 0)
          break;
      if (i == RTB_NPOINTS || opt->npoints == RTB_NPOINTS) {
        fprintf(stderr, "redturn-bench: unknown or repeated point %s\n", t);
        exit(2);
      }
      opt->points[opt->npoints++] = default_points[i];
    }
    free(copy);
  }
  for (size_t i = 0; i < opt->npoints; i++) {
    rtb_point *p = &opt->points[i];
    if (opt->procs >= 0)
      p->procs = (unsigned)opt->procs;
    if (opt->waiters >= 0)
      p->waiters = (unsigned)opt->waiters;
    if (opt->keys >= 0)
      p->keys = (unsigned)opt->keys;
    if (opt->hold_us >= 0)
      p->hold_us = (unsigned)opt->hold_us;
    if (opt->n >= 0)
      p->n = (uint64_t)opt->n;
  }
}

/* The long options without a short form. */
enum {
  O_URL = 256,
  O_SERVER,
  O_POINTS,
  O_MODES,
  O_CAP,
  O_RETRY,
  O_TTL,
  O_NOVERIFY,
  O_VN,
  O_VS,
  O_NOPROBE,
  O_JSON,
  O_DATA,
  O_REPEAT,
  O_KINDS,
  O_CLUSTER,
  O_MODULE,
  O_INSTR,
  O_INSTR_N
};

static const struct option longs[] = {
    {"url", required_argument, NULL, O_URL},
    {"redis-server", required_argument, NULL, O_SERVER},
    {"points", required_argument, NULL, O_POINTS},
    {"modes", required_argument, NULL, O_MODES},
    {"cap-s", required_argument, NULL, O_CAP},
    {"retry-ms", required_argument, NULL, O_RETRY},
    {"ttl-ms", required_argument, NULL, O_TTL},
    {"no-verify", no_argument, NULL, O_NOVERIFY},
    {"verify-n", required_argument, NULL, O_VN},
    {"verify-s", required_argument, NULL, O_VS},
    {"no-probe", no_argument, NULL, O_NOPROBE},
    {"json", required_argument, NULL, O_JSON},
    {"data", required_argument, NULL, O_DATA},
    {"repeat", required_argument, NULL, O_REPEAT},
    {"kinds", required_argument, NULL, O_KINDS},
    {"cluster", no_argument, NULL, O_CLUSTER},
    {"module", required_argument, NULL, O_MODULE},
    {"instructions", no_argument, NULL, O_INSTR},
    {"instructions-n", required_argument, NULL, O_INSTR_N},
    {"verbose", no_argument, NULL, 'v'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0}};

/* The options given as lists, parsed once every option is known. */
typedef struct lists {
  const char *points, *modes, *kinds;
} lists;

/* One long option of getopt_long's: into *opt, or *ls. */
static void take_long_option(rtb_options *opt, int c, lists *ls) {
  switch (c) {
  case O_URL:
    opt->url = optarg;
    break;
  case O_SERVER:
    opt->redis_server = optarg;
    break;
  case O_POINTS:
    ls->points = optarg;
    break;
  case O_MODES:
    ls->modes = optarg;
    break;
  case O_KINDS:
    ls->kinds = optarg;
    opt->kinds_given = 1;
    break;
  case O_MODULE:
    opt->no_module = strcmp(optarg, "none") == 0;
    opt->module = opt->no_module ? NULL : optarg;
    break;
  case O_INSTR:
    opt->instructions = 1;
    break;
  case O_INSTR_N:
    opt->instructions_n = parse_long(optarg, "--instructions-n", 1);
    break;
  case O_CLUSTER:
    opt->cluster = 1;
    break;
  case O_CAP:
    opt->cap_s = strtod(optarg, NULL);
    break;
  case O_RETRY:
    opt->retry_ms = (unsigned)parse_long(optarg, "--retry-ms", 0);
    break;
  case O_TTL:
    opt->ttl_ms = parse_long(optarg, "--ttl-ms", 1);
    break;
  case O_NOVERIFY:
    opt->verify = 0;
    break;
  case O_VN:
    opt->verify_n = parse_long(optarg, "--verify-n", 1);
    break;
  case O_VS:
    opt->verify_s = strtod(optarg, NULL);
    break;
  case O_NOPROBE:
    opt->probe = 0;
    break;
  case O_JSON:
    opt->json = optarg;
    break;
  case O_DATA:
    opt->data_dir = optarg;
    break;
  case O_REPEAT:
    opt->repeat = (unsigned)parse_long(optarg, "--repeat", 1);
    if (opt->repeat > 64) {
      fprintf(stderr, "redturn-bench: --repeat is at most 64\n");
      exit(2);
    }
    break;
  default:
    usage(stderr);
    exit(2);
  }
}

/* One option of getopt_long's: into *opt, or *ls. */
static void take_option(rtb_options *opt, int c, lists *ls) {
  switch (c) {
  case 'P':
    opt->procs = parse_long(optarg, "-P", 1);
    if (opt->procs > RTB_MAX_PROCS) {
      fprintf(stderr, "redturn-bench: -P is at most %d\n", RTB_MAX_PROCS);
      exit(2);
    }
    break;
  case 'W':
    opt->waiters = parse_long(optarg, "-W", 1);
    break;
  case 'K':
    opt->keys = parse_long(optarg, "-K", 1);
    break;
  case 'H':
    opt->hold_us = parse_long(optarg, "-H", 0);
    break;
  case 'N':
    opt->n = parse_long(optarg, "-N", 1);
    break;
  case 'v':
    opt->verbose = 1;
    break;
  case 'h':
    usage(stdout);
    exit(0);
  default:
    take_long_option(opt, c, ls);
  }
}

void rtb_parse_options(int argc, char **argv, rtb_options *opt) {
  lists ls = {NULL, NULL, NULL};
  int c;

  set_defaults(opt);
  while ((c = getopt_long(argc, argv, "P:W:K:H:N:vh", longs, NULL)) != -1)
    take_option(opt, c, &ls);
  if (optind < argc || !(opt->cap_s > 0) || !(opt->verify_s > 0)) {
    usage(stderr);
    exit(2);
  }
  if (opt->instructions && opt->cluster) {
    fprintf(stderr, "redturn-bench: --instructions counts one "
                    "redis-server's: not with --cluster\n");
    exit(2);
  }
  if (opt->cluster && opt->url != NULL) {
    fprintf(stderr, "redturn-bench: --cluster starts its own clusters: "
                    "not with --url\n");
    exit(2);
  }

  opt->modes = parse_modes(opt, ls.modes);
  parse_kinds(opt, ls.kinds);
  pick_points(opt, ls.points);
}

/* "redturn-bench --worker PROC CTL OUT SHM": one worker process. */
