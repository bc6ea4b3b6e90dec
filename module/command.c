/* The native commands' shared frame (command.h): each command's body runs
 * in rtm_run, which sets up its call and turns a failure into the error
 * reply. */
#include "command.h"

#include <setjmp.h>
#include <string.h>

long long rtm_number_arg(rtm_call *c, int i, const char *what, int positive) {
  long long v;
  rtm_str s = c->argv[i];
  /* Digits only, as lease_arg() in lua/lib/prelude.lua. */
  if (s.p == NULL || s.len == 0 || s.p[0] < '0' || s.p[0] > '9' ||
      rtm_parse_ll(s, &v) != 0 || (positive && v <= 0) ||
      v > RT_PROTO_LEASE_MAX_MS) {
    int n = (int)(s.len > 32 ? 32 : s.len);
    const char *p = s.p != NULL ? s.p : "";
    /* A lease: the script's words, to the letter (it_diff compares). */
    if (positive)
      rtm_fail(c, "ERR %s must be a positive whole number of ms, not '%.*s'",
               what, n, p);
    rtm_fail(c,
             "ERR %s must be a whole number, not '%.*s' (%s, argument %d "
             "after the keys)",
             what, n, p, c->name, i + 1);
  }
  return v;
}

rtm_str rtm_opt_arg(const rtm_call *c, int i) {
  return i < c->nargs ? c->argv[i] : (rtm_str){"", 0};
}

void rtm_reply_ints(RedisModuleCtx *ctx, const long long *v, int n) {
  rtm.ReplyWithArray(ctx, n);
  for (int i = 0; i < n; i++)
    rtm.ReplyWithLongLong(ctx, v[i]);
}

/* Redis 7.0 finds a module command's keys for Cluster routing through the
 * getkeys-api (key specs serve COMMAND GETKEYS and ACLs): argv[1] is
 * numkeys, the keys follow. Bad numkeys: no keys (the call then fails). */
static void key_positions(RedisModuleCtx *ctx, RedisModuleString **argv,
                          int argc) {
  rtm_str nk;
  long long n;
  nk.p = rtm.StringPtrLen(argv[1], &nk.len);
  if (rtm_parse_ll(nk, &n) != 0 || n < 0 || n > argc - 2)
    return;
  for (int i = 0; i < n; i++)
    rtm.KeyAtPos(ctx, 2 + i);
}

int rtm_run(RedisModuleCtx *ctx, RedisModuleString **argv, int argc,
            const char *name, const char *suffixes, int min_args,
            const char *usage, void (*body)(rtm_call *)) {
  if (rtm.IsKeysPositionRequest(ctx)) {
    if (argc >= 2)
      key_positions(ctx, argv, argc);
    return RTM_OK;
  }
  rtm_call c;
  if (rtm_call_init(&c, ctx, name, suffixes, argv, argc, min_args, usage) != 0)
    return RTM_OK;
  /* h is opened to read, and again to write only when a write happens:
   * a key closed after an open for writing counts as modified (WATCH
   * would abort for a call that changed nothing). */
  c.hk_write = 0;
  if (setjmp(c.fail) != 0) {
    rtm_call_done(&c);
    return rtm_reply_error(&c);
  }
  body(&c);
  rtm_call_done(&c);
  return RTM_OK;
}
