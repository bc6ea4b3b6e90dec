/* A bad-input fuzz of the module's commands on a server of its own:
 * the mutex's and the pool resources' commands with random argument
 * vectors (numkeys variants, aliased keys, keys of two hash tags or none,
 * huge and binary values, leases, kinds, permits and prefixes out of
 * contract) on keys of the right and of the wrong types, with corrupt
 * records. Any reply is fine; the server must answer every command and be
 * alive at the end. Seeded (REDTURN_FUZZ_SEED, else the clock; printed)
 * and bounded: REDTURN_FUZZ_SECONDS (default 20) and 20000 commands. In
 * an AddressSanitizer build of the server a memory error kills it, and
 * the test fails at the next command. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_test.h"

#ifndef RTT_MODULE_PATH
#define RTT_MODULE_PATH ""
#endif

TestSuite(module_fuzz, .fini = rtt_cleanup, .timeout = 120);

static uint64_t state;

static uint64_t next(void) { /* xorshift64* */
  state ^= state >> 12;
  state ^= state << 25;
  state ^= state >> 27;
  return state * 2685821657736338717ULL;
}

static size_t pick(size_t n) { return (size_t)(next() % n); }

/* An argument: bytes and length (kept in a pool of buffers). */
typedef struct arg {
  const char *p;
  size_t len;
} arg;

#define BIG (70 * 1024)
static char big[BIG], bin[64];

static arg lit(const char *s) { return (arg){s, strlen(s)}; }

static const char *const key_pool[] = {
    "rt:{a}:q",      "rt:{a}:h", "rt:{a}:m", "rt:{b}:q", "rt:{b}:h", "rt:{b}:m",
    "rt:{a}:hm",     "rt:{}:q",  "rt:{}:h",  "rt:{}:m",  "plain:q",  "plain:h",
    "plain:m",       "rt:{a}:",  "{a}:q",    "rt:{a}:Q", "rt:{a:q",  "rt:a}:q",
    "rt:{a}:q:more", "c:era",    "rt:{a}:M", "rt:{a}:D", "rt:{b}:Q", "rt:{b}:M",
    "rt:{b}:D",      "rt:{a}:o",
};

/* One of the keys, a huge one or a binary one. */
static arg any_key(void) {
  size_t r = pick(100);
  if (r < 3)
    return (arg){big, 1 + pick(BIG)};
  if (r < 6)
    return (arg){bin, pick(sizeof(bin))};
  return lit(key_pool[pick(sizeof(key_pool) / sizeof(key_pool[0]))]);
}

static const char *const value_pool[] = {
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa:1",
    "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb:1",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa:2",
    "",
    "x",
    "1",
    "60000",
    "0",
    "-1",
    "1e3",
    "1.5",
    " 5",
    "99999999999999999999",
    "9223372036854775807",
    "-9223372036854775808",
    "nan",
    "inf",
    "c:",
    "rt:{a}:c:",
    "#",
    "@",
    "::{a}",
    "1:2:3:",
    ":::::",
    "s:3",
    "s:1",
    "s:0",
    "s:1000000001",
    "rw",
    "e",
    "mutex",
    "0x10",
    "1099511627776",
};

static const char *const prefix_pool[] = {"c:\0nan",
                                          "c:\0c",
                                          "c:\0-5/9223372036854775808",
                                          "c:\0/1",
                                          "c:\0"
                                          "1e9/99999999999999999999",
                                          "c:\0inf/5000",
                                          "\0\0\0"};
static const size_t prefix_len[] = {6, 4, 26, 5, 27, 11, 3};

static arg any_value(void) {
  size_t r = pick(100);
  if (r < 4)
    return (arg){big, pick(BIG)};
  if (r < 10)
    return (arg){bin, pick(sizeof(bin))};
  if (r < 20) {
    size_t i = pick(sizeof(prefix_len) / sizeof(prefix_len[0]));
    return (arg){prefix_pool[i], prefix_len[i]};
  }
  return lit(value_pool[pick(sizeof(value_pool) / sizeof(value_pool[0]))]);
}

static const char *const cmds[] = {
    "redturn.enqueue",      "redturn.try",          "redturn.release",
    "redturn.reap",         "redturn.extend",       "redturn.inspect",
    "redturn.version",      "redturn.enqueue",      "redturn.release",
    "redturn.pool_enqueue", "redturn.pool_try",     "redturn.pool_release",
    "redturn.pool_reap",    "redturn.pool_extend",  "redturn.pool_inspect",
    "redturn.proclaim",     "redturn.pool_enqueue", "redturn.pool_release"};
static const char *const numkeys_pool[] = {
    "3", "3", "3", "3",          " 3", "+3", "-1", "0",
    "2", "4", "5", "9999999999", "x",  "",   "3 ", "-9223372036854775808"};
/* A pool command's own numkeys, mostly. */
static const char *const pool_numkeys_pool[] = {"4", "4", "4", "4", "3", "5"};
/* The kinds a pool command asks for, mostly valid ones. */
static const char *const kind_pool[] = {"s:3", "s:1", "rw", "e",
                                        "s:2", "",    "x",  "s:0"};

/* Shape the keys: wrong types, corrupt records, huge queues. */
static void mess_with_keys(redisContext *rc) {
  static const char *const setups[] = {
      "DEL rt:{a}:q rt:{a}:h rt:{a}:m",
      "SET rt:{a}:q x",
      "HSET rt:{a}:h * mutex",
      "HSET rt:{a}:h * s:4",
      "LPUSH rt:{a}:m x",
      "SET rt:{a}:h garbage",
      "SET rt:{a}:h 1:99999999999999:3:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa:1",
      "SET rt:{a}:h 1:99999999999999:3:",
      "SET rt:{a}:h ::::",
      "HSET rt:{a}:m # 9223372036854775807",
      "HSET rt:{a}:m # x",
      "HSET rt:{a}:m # -5",
      "HSET rt:{a}:m bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb:1 garbage",
      "HSET rt:{a}:m bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb:1 99:x",
      "HSET rt:{a}:m @ x:y",
      "RPUSH rt:{a}:q bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb:1",
      "RPUSH rt:{a}:q x",
      "SET c:era garbage",
      "FLUSHALL",
      "DEL rt:{a}:Q rt:{a}:M rt:{a}:D",
      "SET rt:{a}:D x",
      "HSET rt:{a}:D x y",
      "ZADD rt:{a}:D 1 aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa:1",
      "ZADD rt:{a}:D 99999999999999 bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb:1",
      "ZADD rt:{a}:D inf x",
      "HSET rt:{a}:h aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa:1 garbage",
      "HSET rt:{a}:h aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa:1 1:2",
      "HSET rt:{a}:h bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb:1 1:2:x:lab",
      "HSET rt:{a}:h + x f y",
      "HSET rt:{a}:h + -5 f 9223372036854775807",
      "HSET rt:{a}:h * rw",
      "HSET rt:{a}:h * e",
      "HSET rt:{a}:h * s:99999999999999999999",
      "HSET rt:{a}:M * s:3 # 0 @ x:0",
      "HSET rt:{a}:M bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb:1 0:1000",
      "HSET rt:{a}:M bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb:1 0:1000:x",
      "HSET rt:{a}:M bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb:1 0:1000:1:l",
      "RPUSH rt:{a}:Q bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb:1",
      "RPUSH rt:{a}:Q aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa:1",
      "SET rt:{a}:Q x",
      "LPUSH rt:{a}:M x",
  };
  redisReply *r =
      redisCommand(rc, setups[pick(sizeof(setups) / sizeof(setups[0]))]);
  cr_assert_not_null(r, "the server stopped answering (setup)");
  freeReplyObject(r);
}

/* A pool command's argument vector in the contract (numkeys 4, one
 * resource's keys, a lease of digits, a kind, permits), with ids and
 * kinds from small sets, so calls queue, grant, hand on, cancel and reap
 * on records mess_with_keys corrupts now and then: argv[0] is the
 * command; returns argc. */
static int pool_vector(const char **argv, size_t *lens) {
  static const char *const ids[] = {"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa:1",
                                    "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb:1",
                                    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa:2",
                                    "cccccccccccccccccccccccccccccccc:7"};
  static const char *const leases[] = {"1", "50", "60000"};
  static const char *const kinds[] = {"s:3", "s:1", "rw", "e"};
  static const char *const permits[] = {"0", "1", "2"};
  const char *res = pick(2) ? "a" : "b";
  static char keys[4][16];
  int argc = 1;
  argv[argc++] = "4";
  for (int i = 0; i < 4; i++) {
    snprintf(keys[i], sizeof(keys[i]), "rt:{%s}:%c", res, "QhMD"[i]);
    argv[argc++] = keys[i];
  }
  /* ARGV[1]: the channel prefix, or with an epoch and a failover hold
   * after its NUL (8 bytes: "c:", NUL, "5/100"). */
  int held = pick(4) == 0;
  argv[argc++] = held ? "c:\0"
                        "5/100"
                      : "c:";
  lens[argc - 1] = held ? 8 : 2;
  /* Mostly one kind per resource (another is a WRONGKIND). */
  const char *cmd = argv[0],
             *kind = pick(5) ? (res[0] == 'a' ? "s:3" : "rw") : kinds[pick(4)];
  argv[argc++] = strcmp(cmd, "redturn.pool_inspect") == 0 ? "10" : ids[pick(4)];
  if (strcmp(cmd, "redturn.pool_enqueue") == 0 ||
      strcmp(cmd, "redturn.pool_try") == 0 ||
      strcmp(cmd, "redturn.pool_extend") == 0)
    argv[argc++] = leases[pick(3)];
  if (strcmp(cmd, "redturn.pool_enqueue") == 0)
    argv[argc++] = pick(2) ? "1" : "0";
  if (strcmp(cmd, "redturn.pool_enqueue") == 0 ||
      strcmp(cmd, "redturn.pool_try") == 0 ||
      strcmp(cmd, "redturn.proclaim") == 0)
    argv[argc++] = pick(2) ? "" : "lab:el";
  argv[argc++] = kind;
  if (strcmp(cmd, "redturn.pool_enqueue") == 0 ||
      strcmp(cmd, "redturn.pool_try") == 0)
    argv[argc++] = permits[pick(3)];
  for (int i = 1; i < argc; i++)
    if (i != 6)
      lens[i] = strlen(argv[i]);
  return argc;
}

Test(module_fuzz, any_argument_vector_gets_a_reply) {
  if (RTT_MODULE_PATH[0] == '\0')
    cr_skip_test("the module is not built (REDTURN_MODULE=OFF)");
  const char *s = getenv("REDTURN_FUZZ_SEED");
  state = s != NULL ? strtoull(s, NULL, 10) : rtt_now_ms();
  if (state == 0)
    state = 1;
  uint64_t seed = state;
  const char *secs = getenv("REDTURN_FUZZ_SECONDS");
  uint64_t budget_ms = (secs != NULL ? strtoull(secs, NULL, 10) : 20) * 1000;
  fprintf(stderr,
          "module fuzz: seed %llu (REDTURN_FUZZ_SEED=%llu repeats it)\n",
          (unsigned long long)seed, (unsigned long long)seed);
  memset(big, '{', BIG);
  for (size_t i = 0; i < sizeof(bin); i++)
    bin[i] = (char)(i * 37 % 256);
  bin[3] = '\0';
  bin[7] = '\r';
  bin[8] = '\n';
  /* REDTURN_FUZZ_MODULE: another build of the module (the ASan one). */
  const char *module = getenv("REDTURN_FUZZ_MODULE");
  const char *const extra[] = {"--loadmodule",
                               module != NULL ? module : RTT_MODULE_PATH, NULL};
  rtt_private p;
  rtt_private_start(&p, extra);
  redisContext *rc = p.adm;
  /* First the vectors known to have broken a module: aliased h and m (a
   * release deleted the key through one handle, read it through the
   * other). */
  static const char *const known[] = {
      "redturn.enqueue 3 rt:{r}:q rt:{r}:hm rt:{r}:hm rt:c: "
      "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa:1 60000",
      "redturn.release 3 rt:{r}:q rt:{r}:hm rt:{r}:hm rt:c: "
      "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa:1",
      "redturn.enqueue 3 rt:{r}:q rt:{r}:h rt:{r}:h rt:c: "
      "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa:1 60000",
      "redturn.release 3 rt:{r}:q rt:{r}:h rt:{r}:h rt:c: "
      "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa:1",
      "redturn.pool_enqueue 4 rt:{r}:Q rt:{r}:h rt:{r}:M rt:{r}:M rt:c: "
      "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa:1 60000 0 x s:2 1",
      "redturn.pool_release 4 rt:{r}:Q rt:{r}:h rt:{r}:h rt:{r}:D rt:c: "
      "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa:1 s:2",
      "redturn.version",
  };
  for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
    redisReply *r = redisCommand(rc, known[i]);
    cr_assert_not_null(r, "the server stopped answering after '%s': %s",
                       known[i], rc->errstr);
    freeReplyObject(r);
  }
  uint64_t until = rtt_now_ms() + budget_ms;
  int n = 0, pool_ran = 0;
  for (; n < 20000 && rtt_now_ms() < until; n++) {
    if (pick(10) == 0)
      mess_with_keys(rc);
    const char *argv[16];
    size_t lens[16];
    int argc = 0;
    argv[argc] = cmds[pick(sizeof(cmds) / sizeof(cmds[0]))];
    lens[argc] = strlen(argv[argc]);
    /* A pool resource's command: keys Q h M D, the kind among its
     * arguments. */
    int pool = strncmp(argv[argc], "redturn.pool_", 13) == 0 ||
               strcmp(argv[argc], "redturn.proclaim") == 0;
    const char *suffixes = pool ? "QhMD" : "qhm";
    int nkeys = pool ? 4 : 3;
    argc++;
    if (pick(20) != 0) {
      argv[argc] = pool && pick(4) != 0
                       ? pool_numkeys_pool[pick(sizeof(pool_numkeys_pool) /
                                                sizeof(pool_numkeys_pool[0]))]
                       : numkeys_pool[pick(sizeof(numkeys_pool) /
                                           sizeof(numkeys_pool[0]))];
      lens[argc] = strlen(argv[argc]);
      argc++;
    }
    /* Mostly a resource's own keys, or one of them changed. */
    int own = pick(3) != 0;
    const char *res = pick(2) ? "a" : "b";
    char own_keys[4][16];
    for (int i = 0; i < nkeys && argc < 16; i++) {
      arg k;
      if (own && pick(8) != 0) {
        snprintf(own_keys[i], sizeof(own_keys[i]), "rt:{%s}:%c", res,
                 suffixes[i]);
        k = lit(own_keys[i]);
      } else {
        k = any_key();
      }
      argv[argc] = k.p;
      lens[argc++] = k.len;
    }
    int more = (int)pick(pool ? 9 : 8);
    for (int i = 0; i < more && argc < 16; i++) {
      arg v = i == 0 && pick(2) ? lit("c:") : any_value();
      /* A pool command reads its kind third to fifth after the prefix,
       * then maybe permits: mostly real kinds and small numbers there. */
      if (pool && i >= 2 && pick(2) == 0)
        v = lit(kind_pool[pick(sizeof(kind_pool) / sizeof(kind_pool[0]))]);
      else if (pool && i >= 3 && pick(3) == 0)
        v = lit(pick(2) ? "1" : "0");
      argv[argc] = v.p;
      lens[argc++] = v.len;
    }
    if (pool && pick(2) == 0)
      argc = pool_vector(argv, lens); /* deep in the grant rules */
    else if (pick(30) == 0)
      argc = 1 + (int)pick((size_t)argc);
    redisReply *r = redisCommandArgv(rc, argc, argv, lens);
    if (r == NULL) /* the vector, to repeat it by hand */
      for (int i = 0; i < argc; i++)
        fprintf(stderr, "module fuzz: argv[%d] (%zu bytes): %.*s\n", i, lens[i],
                (int)(lens[i] > 80 ? 80 : lens[i]), argv[i]);
    cr_assert_not_null(r,
                       "seed %llu: the server stopped answering at command "
                       "%d (%s, %d arguments): %s",
                       (unsigned long long)seed, n, argv[0], argc, rc->errstr);
    if (pool && r->type == REDIS_REPLY_ARRAY)
      pool_ran++;
    freeReplyObject(r);
  }
  cr_assert_eq(rtt_int(rc, "redturn.version"), 2,
               "seed %llu: the server is alive after %d commands",
               (unsigned long long)seed, n);
  fprintf(stderr,
          "module fuzz: %d commands (%d of a pool resource ran through), "
          "seed %llu\n",
          n, pool_ran, (unsigned long long)seed);
  rtt_private_stop(&p);
}
