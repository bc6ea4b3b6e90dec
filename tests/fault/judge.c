/* The split-brain judge (README.md here, "The split-brain judge").
 *
 * Input: store.log, one line per write a worker made through the shared
 * fence-checking store, in the order the store took them (appended under
 * its flock, so file order is real-time order):
 *
 *   W t res holder fence deadline_ms lease_ms ok before why
 *
 * t: CLOCK_REALTIME (us) read while the store was locked; holder: the
 * request id; ok: 1 accepted, 0 refused; before: the highest fence the
 * store had for res when it decided; why: g (at the grant) or s (just
 * before rt_signal, only while the lock was not lost and its lease left
 * was above 0). The grant happened in Redis' millisecond
 * gms = deadline_ms - lease_ms (the suite never extends), on the same
 * clock as t, so it is over by gu = gms * 1000 + 999 us.
 *
 * Definitions (per resource):
 *   - an accepted split-brain write: an accepted write of holder X at t,
 *     with another holder Y such that t > gu(Y) (X wrote after Y was
 *     granted) and Y has an accepted write at t' > gu(X) (Y wrote after X
 *     was granted). Each holder writes only while it believes it holds, so
 *     then both believed they held at once and the store took writes from
 *     both: the two holds were live together and the fences did not
 *     separate them. Violation [split-brain], unless a loss of the
 *     resource's holder key h or of every key (DEL of all its keys,
 *     FLUSHALL) or a restart without persistence fell between the two
 *     grants (a forced release: exclusion is not promised then; counted
 *     as exempt).
 *   - a refused stale write: a write refused because a higher fence was
 *     accepted before: its holder believed it held after another holder,
 *     with a higher fence, had written. Not a violation: that is the fence
 *     doing its job. Counted, and the first ones printed with the holder
 *     whose write made the store refuse.
 *   - the store's rule: replaying the log, a write is accepted exactly when
 *     its fence is at least the highest accepted before; the times never go
 *     back. Otherwise violation [store] (a stale acceptance if an accepted
 *     fence is lower). A worker killed between the store's update and its
 *     log line leaves a "before" above the replayed highest: counted as an
 *     unlogged write, and the replay follows the store.
 * Every count is also given per failover of the run (the 10 s after each
 * "Y ... failover begin" / "crash" line of driver.log). */
#include "judge.h"
#include "mem.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define JW_PRINT 25           /* lines printed per kind */
#define JW_WINDOW_US 10000000 /* a failover's window for the counts */
#define JW_MAX_EVENTS 16

typedef struct jwrite {
  int64_t t;
  int res;
  char holder[80];
  uint64_t fence, before;
  int64_t gms;
  int ok, line;
  char why;
  int split, exempt; /* an accepted split-brain write (exempt or not) */
  long cause;        /* refused: the write whose fence made it so (-1) */
} jwrite;

typedef struct jholder {
  const char *id;
  int res;
  int64_t gms, gu;
  uint64_t fence;
  int64_t last_ok; /* its last accepted write's time; 0: none */
  size_t *w;       /* its writes (indexes), in time order */
  size_t nw, capw;
} jholder;

typedef struct jevent {
  int64_t t;
  char what[40];
  long accepted, refused, split;
} jevent;

typedef struct jspan {
  int res; /* -1: every resource */
  int64_t from_us, to_us;
} jspan;

typedef struct judge {
  jwrite *w;
  size_t nw, capw;
  jholder *h;
  size_t nh;
  jspan *cuts; /* losses of h or every key; restarts without persistence */
  size_t ncuts, capcuts;
  jevent ev[JW_MAX_EVENTS];
  int nev;
  int persist;
} judge;

static int read_store(judge *j, const char *dir) {
  char path[1024];
  snprintf(path, sizeof(path), "%s/%s", dir, RTF_STORE_LOG);
  FILE *fp = fopen(path, "r");
  if (fp == NULL)
    return -1;
  char line[512];
  int ln = 0;
  while (fgets(line, sizeof(line), fp) != NULL) {
    ln++;
    jwrite x;
    memset(&x, 0, sizeof(x));
    int64_t deadline, lease;
    if (sscanf(line,
               "W %" SCNd64 " %d %79s %" SCNu64 " %" SCNd64 " %" SCNd64
               " %d %" SCNu64 " %c",
               &x.t, &x.res, x.holder, &x.fence, &deadline, &lease, &x.ok,
               &x.before, &x.why) != 9)
      continue;
    x.gms = deadline - lease;
    x.line = ln;
    x.cause = -1;
    j->w = rtf_grow(j->w, &j->capw, j->nw + 1, sizeof(jwrite));
    j->w[j->nw++] = x;
  }
  fclose(fp);
  return 0;
}

/* Losses of h or every key (X ... h|all|flushall), restarts (B; they cut only
 * without persistence) and the failovers to count by (Y lines). */
static void read_driver_events(judge *j, const char *dir) {
  char path[1024];
  snprintf(path, sizeof(path), "%s/driver.log", dir);
  FILE *fp = fopen(path, "r");
  if (fp == NULL)
    return;
  char line[600];
  j->persist = 1;
  while (fgets(line, sizeof(line), fp) != NULL) {
    int64_t t = 0, t1 = 0;
    int res;
    char kind[32];
    if (line[0] == 'P' && strstr(line, "persist=none") != NULL)
      j->persist = 0;
    if (line[0] == 'X' &&
        sscanf(line, "X %" SCNd64 " %" SCNd64 " %d %31s", &t, &t1, &res,
               kind) == 4 &&
        (strcmp(kind, "h") == 0 || strcmp(kind, "all") == 0 ||
         strcmp(kind, "flushall") == 0)) {
      j->cuts = rtf_grow(j->cuts, &j->capcuts, j->ncuts + 1, sizeof(jspan));
      j->cuts[j->ncuts++] = (jspan){res, t, t1};
    }
    if (line[0] == 'B' && !j->persist && sscanf(line, "B %" SCNd64, &t) == 1) {
      j->cuts = rtf_grow(j->cuts, &j->capcuts, j->ncuts + 1, sizeof(jspan));
      j->cuts[j->ncuts++] = (jspan){-1, t, t};
    }
    static const char *const kinds[][2] = {
        {"sentinel-failover begin", "SENTINEL FAILOVER"},
        {"sentinel-crash (", "kill -9 of the Sentinel master"},
        {"cluster-failover begin", "CLUSTER FAILOVER"},
        {"cluster-crash slot", "kill -9 of the cluster master"},
        {"cluster-reshard begin", "cluster reshard"}};
    char word[64];
    if (line[0] == 'Y' && sscanf(line, "Y %" SCNd64 " %63s", &t, word) == 2 &&
        j->nev < JW_MAX_EVENTS)
      for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
        const char *p = strchr(line + 2, ' ');
        if (p != NULL &&
            strncmp(p + 1, kinds[k][0], strlen(kinds[k][0])) == 0) {
          jevent *e = &j->ev[j->nev++];
          memset(e, 0, sizeof(*e));
          e->t = t;
          snprintf(e->what, sizeof(e->what), "%s", kinds[k][1]);
        }
      }
  }
  fclose(fp);
}

static const judge *sort_j;

static int cmp_write_holder(const void *a, const void *b) {
  const jwrite *x = &sort_j->w[*(const size_t *)a];
  const jwrite *y = &sort_j->w[*(const size_t *)b];
  if (x->res != y->res)
    return x->res < y->res ? -1 : 1;
  int c = strcmp(x->holder, y->holder);
  if (c != 0)
    return c;
  return *(const size_t *)a < *(const size_t *)b ? -1 : 1;
}

/* Group the writes by (resource, holder). */
static void build_holders(judge *j) {
  size_t *idx = malloc((j->nw + 1) * sizeof(size_t));
  j->h = calloc(j->nw + 1, sizeof(jholder));
  if (idx == NULL || j->h == NULL) {
    fprintf(stderr, "judge: out of memory\n");
    exit(2);
  }
  for (size_t i = 0; i < j->nw; i++)
    idx[i] = i;
  sort_j = j;
  qsort(idx, j->nw, sizeof(size_t), cmp_write_holder);
  for (size_t k = 0; k < j->nw; k++) {
    const jwrite *x = &j->w[idx[k]];
    jholder *h = j->nh > 0 ? &j->h[j->nh - 1] : NULL;
    if (h == NULL || h->res != x->res || strcmp(h->id, x->holder) != 0) {
      h = &j->h[j->nh++];
      h->id = x->holder;
      h->res = x->res;
      h->gms = x->gms;
      h->gu = x->gms * 1000 + 999;
      h->fence = x->fence;
    }
    h->w = rtf_grow(h->w, &h->capw, h->nw + 1, sizeof(size_t));
    h->w[h->nw++] = idx[k];
    if (x->ok && x->t > h->last_ok)
      h->last_ok = x->t;
  }
  free(idx);
}

/* Replay the store's rule over the log; [store] violations. */
static long replay(judge *j, FILE *out, long *unlogged) {
  long v = 0, printed = 0;
  uint64_t *top = NULL;
  long *top_at = NULL;
  int nres = 0;
  for (size_t i = 0; i < j->nw; i++)
    if (j->w[i].res + 1 > nres)
      nres = j->w[i].res + 1;
  top = calloc((size_t)nres + 1, sizeof(uint64_t));
  top_at = malloc(((size_t)nres + 1) * sizeof(long));
  if (top == NULL || top_at == NULL) {
    fprintf(stderr, "judge: out of memory\n");
    exit(2);
  }
  for (int r = 0; r <= nres; r++)
    top_at[r] = -1;
  int64_t last_t = 0;
  for (size_t i = 0; i < j->nw; i++) {
    jwrite *x = &j->w[i];
    if (x->res < 0) {
      v++;
      if (printed++ < JW_PRINT && out != NULL)
        fprintf(out, "VIOLATION [store] %s:%d: resource %d\n", RTF_STORE_LOG,
                x->line, x->res);
      continue;
    }
    if (x->t < last_t) {
      v++;
      if (printed++ < JW_PRINT && out != NULL)
        fprintf(out,
                "VIOLATION [store] %s:%d: time %" PRId64
                " before the previous write's %" PRId64 "\n",
                RTF_STORE_LOG, x->line, x->t, last_t);
    }
    last_t = x->t;
    if (x->before > top[x->res]) { /* a write whose line never came */
      (*unlogged)++;
      top[x->res] = x->before;
      top_at[x->res] = -1;
    }
    int want = x->fence >= top[x->res];
    if (x->ok != want || x->before != top[x->res]) {
      v++;
      if (printed++ < JW_PRINT && out != NULL)
        fprintf(out,
                "VIOLATION [store] %s:%d: holder %s fence %" PRIu64
                " %s while the highest accepted fence was %" PRIu64
                "%s (the store said %" PRIu64 ")\n",
                RTF_STORE_LOG, x->line, x->holder, x->fence,
                x->ok ? "accepted" : "refused", top[x->res],
                x->ok && !want ? ": a stale acceptance" : "", x->before);
    }
    if (!x->ok)
      x->cause = top_at[x->res];
    else if (x->fence >= top[x->res]) {
      top[x->res] = x->fence;
      top_at[x->res] = (long)i;
    }
  }
  free(top);
  free(top_at);
  return v;
}

/* A loss of h or every key of res, or a restart without persistence, in
 * [from, to]? */
static int cut_between(const judge *j, int res, int64_t from_us,
                       int64_t to_us) {
  for (size_t i = 0; i < j->ncuts; i++) {
    const jspan *c = &j->cuts[i];
    if ((c->res == res || c->res < 0) && c->from_us <= to_us &&
        from_us <= c->to_us)
      return 1;
  }
  return 0;
}

static jevent *event_of(judge *j, int64_t t) {
  jevent *best = NULL;
  for (int i = 0; i < j->nev; i++)
    if (j->ev[i].t <= t && t <= j->ev[i].t + JW_WINDOW_US)
      best = &j->ev[i];
  return best;
}

static void print_event_at(const judge *j, int64_t t, FILE *out) {
  const jevent *best = NULL;
  for (int i = 0; i < j->nev; i++)
    if (j->ev[i].t <= t)
      best = &j->ev[i];
  if (best != NULL)
    fprintf(out, " (%.3f s after the %s)", (double)(t - best->t) / 1e6,
            best->what);
}

/* Mark the accepted split-brain writes: X's accepted writes after Y's
 * grant, when Y also has an accepted write after X's grant. */
static void find_splits(judge *j, int64_t clk_us) {
  for (size_t a = 0; a < j->nh; a++) {
    jholder *x = &j->h[a];
    if (x->last_ok == 0)
      continue;
    for (size_t b = 0; b < j->nh; b++) {
      jholder *y = &j->h[b];
      if (b == a || y->res != x->res || y->last_ok == 0 ||
          x->last_ok <= y->gu || y->last_ok <= x->gu)
        continue;
      int64_t lo = (x->gms < y->gms ? x->gms : y->gms) * 1000 - clk_us;
      int64_t hi = (x->gu > y->gu ? x->gu : y->gu) + clk_us;
      int exempt = cut_between(j, x->res, lo, hi);
      for (size_t k = 0; k < x->nw; k++) {
        jwrite *w = &j->w[x->w[k]];
        if (w->ok && w->t > y->gu) {
          if (exempt)
            w->exempt = 1;
          else
            w->split = 1;
        }
      }
    }
  }
}

/* The other holder of a split-brain write (the first found). */
static const jholder *split_partner(const judge *j, const jholder *x,
                                    const jwrite *w) {
  for (size_t b = 0; b < j->nh; b++) {
    const jholder *y = &j->h[b];
    if (y != x && y->res == x->res && y->last_ok > x->gu && w->t > y->gu)
      return y;
  }
  return NULL;
}

static void print_split(const judge *j, const jholder *x, const jwrite *w,
                        FILE *out) {
  const jholder *y = split_partner(j, x, w);
  fprintf(out,
          "VIOLATION [split-brain] %s:%d: r%d holder %s (fence %" PRIu64
          ", granted at %" PRId64 " ms) had a write accepted at %" PRId64 " us",
          RTF_STORE_LOG, w->line, w->res, x->id, x->fence, x->gms, w->t);
  if (y != NULL)
    fprintf(out,
            ", %.3f ms after holder %s (fence %" PRIu64 ") was granted at "
            "%" PRId64 " ms, which had a write accepted at %" PRId64 " us",
            (double)(w->t - y->gms * 1000) / 1e3, y->id, y->fence, y->gms,
            y->last_ok);
  print_event_at(j, w->t, out);
  fputc('\n', out);
}

static void print_refusal(const judge *j, const jwrite *w, FILE *out) {
  fprintf(out,
          "judge: refused stale write %s:%d: r%d holder %s fence %" PRIu64
          " (granted at %" PRId64 " ms, write at %c) at %" PRId64 " us",
          RTF_STORE_LOG, w->line, w->res, w->holder, w->fence, w->gms, w->why,
          w->t);
  if (w->cause >= 0) {
    const jwrite *c = &j->w[w->cause];
    fprintf(out,
            "; the store had accepted fence %" PRIu64 " of %s (granted at "
            "%" PRId64 " ms) at %" PRId64 " us",
            c->fence, c->holder, c->gms, c->t);
  }
  print_event_at(j, w->t, out);
  fputc('\n', out);
}

/* Whether a refused write's holder x lost its record to a loss of every
 * key (or a restart without persistence) before the holder whose fence
 * made the store refuse was granted: then no failover is needed for it. */
static int refused_after_cut(const judge *j, const jholder *x, const jwrite *w,
                             int64_t clk_us) {
  if (w->cause < 0)
    return 0;
  const jwrite *c = &j->w[w->cause];
  return cut_between(j, x->res, x->gms * 1000 - clk_us,
                     c->gms * 1000 + 999 + clk_us);
}

long rtf_judge(const char *dir, int64_t clock_ms, FILE *out) {
  judge j;
  memset(&j, 0, sizeof(j));
  char path[1024];
  snprintf(path, sizeof(path), "%s/%s", dir, RTF_STORE_LOG);
  FILE *probe = fopen(path, "r");
  if (probe == NULL)
    return 0; /* not a judged run */
  fclose(probe);
  if (read_store(&j, dir) != 0)
    return -1;
  read_driver_events(&j, dir);
  long unlogged = 0;
  long v = replay(&j, out, &unlogged);
  build_holders(&j);
  find_splits(&j, clock_ms * 1000);

  long accepted = 0, refused = 0, split = 0, exempt = 0, holders_refused = 0;
  long refused_cut = 0;
  long printed_split = 0, printed_ref = 0;
  for (size_t a = 0; a < j.nh; a++) {
    const jholder *x = &j.h[a];
    int any_refused = 0;
    for (size_t k = 0; k < x->nw; k++) {
      const jwrite *w = &j.w[x->w[k]];
      jevent *e = event_of(&j, w->t);
      if (w->ok) {
        accepted++;
        if (e != NULL)
          e->accepted++;
      } else {
        refused++;
        any_refused = 1;
        refused_cut += refused_after_cut(&j, x, w, clock_ms * 1000);
        if (e != NULL)
          e->refused++;
        if (printed_ref++ < JW_PRINT && out != NULL)
          print_refusal(&j, w, out);
      }
      if (w->exempt && !w->split)
        exempt++;
      if (w->split) {
        split++;
        if (e != NULL)
          e->split++;
        if (printed_split++ < JW_PRINT && out != NULL)
          print_split(&j, x, w, out);
      }
    }
    holders_refused += any_refused;
  }
  v += split;
  if (out != NULL) {
    fprintf(out,
            "judge: %zu writes by %zu holders through the fence-checking "
            "store: %ld accepted, %ld refused\n"
            "judge: accepted split-brain writes: %ld (exempt after a loss of "
            "h or every key: %ld)\n"
            "judge: refused stale writes: %ld (of %ld holders; the fences "
            "at work; %ld after a loss of h or every key of the resource)\n"
            "judge: writes whose log line a kill cut off: %ld\n",
            j.nw, j.nh, accepted, refused, split, exempt, refused,
            holders_refused, refused_cut, unlogged);
    for (int i = 0; i < j.nev; i++)
      fprintf(out,
              "judge: %s at %" PRId64 " us, in the %d s after: %ld writes "
              "accepted, %ld refused stale, %ld split-brain\n",
              j.ev[i].what, j.ev[i].t, JW_WINDOW_US / 1000000, j.ev[i].accepted,
              j.ev[i].refused, j.ev[i].split);
  }
  for (size_t a = 0; a < j.nh; a++)
    free(j.h[a].w);
  free(j.h);
  free(j.w);
  free(j.cuts);
  return v;
}
