/* A bad-input fuzz of the module's commands on a server of its own:
 * random argument vectors (numkeys variants, aliased keys, keys of two
 * hash tags or none, huge and binary values, leases and prefixes out of
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
    "rt:{a}:q", "rt:{a}:h",  "rt:{a}:m", "rt:{b}:q",      "rt:{b}:h",
    "rt:{b}:m", "rt:{a}:hm", "rt:{}:q",  "rt:{}:h",       "rt:{}:m",
    "plain:q",  "plain:h",   "plain:m",  "rt:{a}:",       "{a}:q",
    "rt:{a}:Q", "rt:{a:q",   "rt:a}:q",  "rt:{a}:q:more", "c:era",
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
    "redturn.enqueue", "redturn.try",     "redturn.release",
    "redturn.reap",    "redturn.extend",  "redturn.inspect",
    "redturn.version", "redturn.enqueue", "redturn.release"};
static const char *const numkeys_pool[] = {
    "3", "3", "3", "3",          " 3", "+3", "-1", "0",
    "2", "4", "5", "9999999999", "x",  "",   "3 ", "-9223372036854775808"};

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
  };
  redisReply *r =
      redisCommand(rc, setups[pick(sizeof(setups) / sizeof(setups[0]))]);
  cr_assert_not_null(r, "the server stopped answering (setup)");
  freeReplyObject(r);
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
      "redturn.version",
  };
  for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
    redisReply *r = redisCommand(rc, known[i]);
    cr_assert_not_null(r, "the server stopped answering after '%s': %s",
                       known[i], rc->errstr);
    freeReplyObject(r);
  }
  uint64_t until = rtt_now_ms() + budget_ms;
  int n = 0;
  for (; n < 20000 && rtt_now_ms() < until; n++) {
    if (pick(10) == 0)
      mess_with_keys(rc);
    const char *argv[16];
    size_t lens[16];
    int argc = 0;
    argv[argc] = cmds[pick(sizeof(cmds) / sizeof(cmds[0]))];
    lens[argc] = strlen(argv[argc]);
    argc++;
    if (pick(20) != 0) {
      argv[argc] =
          numkeys_pool[pick(sizeof(numkeys_pool) / sizeof(numkeys_pool[0]))];
      lens[argc] = strlen(argv[argc]);
      argc++;
    }
    /* Mostly a resource's own keys, or one of them changed. */
    int own = pick(3) != 0;
    const char *res = pick(2) ? "a" : "b";
    char own_keys[3][16];
    for (int i = 0; i < 3 && argc < 16; i++) {
      arg k;
      if (own && pick(8) != 0) {
        snprintf(own_keys[i], sizeof(own_keys[i]), "rt:{%s}:%c", res, "qhm"[i]);
        k = lit(own_keys[i]);
      } else {
        k = any_key();
      }
      argv[argc] = k.p;
      lens[argc++] = k.len;
    }
    int more = (int)pick(8);
    for (int i = 0; i < more && argc < 16; i++) {
      arg v = i == 0 && pick(2) ? lit("c:") : any_value();
      argv[argc] = v.p;
      lens[argc++] = v.len;
    }
    if (pick(30) == 0)
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
    freeReplyObject(r);
  }
  cr_assert_eq(rtt_int(rc, "redturn.version"), 1,
               "seed %llu: the server is alive after %d commands",
               (unsigned long long)seed, n);
  fprintf(stderr, "module fuzz: %d commands, seed %llu\n", n,
          (unsigned long long)seed);
  rtt_private_stop(&p);
}
