/* The performance targets of docs/PERFORMANCE.md, checked on one run:
 * ratios within the run, per script path of the client (the module's
 * native commands, the Functions library, EVALSHA) and per kind on the
 * module, MET or MISSED. */
#define _GNU_SOURCE
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "driver.h"
#include "redturn.h" /* RT_SCRIPT_PATH_* */

static void verdict(FILE *f, const char *what, int known, int met,
                    const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void verdict(FILE *f, const char *what, int known, int met,
                    const char *fmt, ...) {
  va_list ap;
  fprintf(f, "  %-8s %-50s ", known ? (met ? "MET" : "MISSED") : "n/a", what);
  va_start(ap, fmt);
  vfprintf(f, fmt, ap);
  va_end(ap);
  fputc('\n', f);
}

/* What a path must reach; NaN: no such target for it. */
typedef struct path_targets {
  int path;
  double spread_grants; /* x spin grants/s at spread and many */
  double spread_cpu;    /* x spin Redis CPU per grant at spread and many */
  double hot_ping;      /* x ping grants/s at hot */
  double hot_cpu;       /* x spin Redis CPU per grant at hot */
  double solo_trips;    /* ping round trips per solo cycle, at most */
} path_targets;

static const path_targets paths[] = {
    {RT_SCRIPT_PATH_MODULE, 0.8, 1.0, 0.6, 1.0, 2.2},
    {RT_SCRIPT_PATH_FUNCTIONS, NAN, 3.0, NAN, NAN, NAN},
    {RT_SCRIPT_PATH_EVAL, NAN, NAN, NAN, NAN, NAN},
    {RT_SCRIPT_PATH_AUTO, NAN, NAN, NAN, NAN, NAN},
};

/* " (instructions 1.23 x)": the callgrind count's ratio, when both rows
 * have one, else "". */
static const char *instr_ratio(const rtb_row *r, const rtb_row *s, char *buf,
                               size_t cap) {
  buf[0] = '\0';
  if (!isnan(r->instr_per_grant) && !isnan(s->instr_per_grant))
    snprintf(buf, cap, " (instructions %.0f vs %.0f: %.2f x)",
             r->instr_per_grant, s->instr_per_grant,
             r->instr_per_grant / s->instr_per_grant);
  return buf;
}

/* "<what>: redis cpu/grant <= limit x spin": row r's Redis CPU per grant
 * against spin's row s. */
static void cpu_vs_spin(FILE *f, const char *what, double limit,
                        const rtb_row *r, const rtb_row *s) {
  char text[128], ins[96];
  double c = r->redis_cpu_us_per_grant / s->redis_cpu_us_per_grant;
  snprintf(text, sizeof(text), "%s: redis cpu/grant <= %.1f x spin", what,
           limit);
  verdict(f, text, !isnan(c), c <= limit, "%.1f vs %.1f us: %.2f x%s",
          r->redis_cpu_us_per_grant, s->redis_cpu_us_per_grant, c,
          instr_ratio(r, s, ins, sizeof(ins)));
}

/* Grants/s and Redis CPU per grant against spin's at point p. */
static void vs_spin(const rtb_run *run, FILE *f, const char *pname,
                    const path_targets *t, const char *p) {
  rtb_kind k = {RTB_MUTEX, 0, t->path};
  const rtb_row *r = rtb_find_row(run, p, RTB_FAIR, &k, 0),
                *s = rtb_find_row(run, p, RTB_SPIN, NULL, 0);
  char what[96];
  if (r == NULL || s == NULL)
    return;
  double g = r->grants_per_s / s->grants_per_s;
  if (!isnan(t->spread_grants)) {
    snprintf(what, sizeof(what), "%s %s: >= %.1f x spin grants/s", pname, p,
             t->spread_grants);
    verdict(f, what, !isnan(g), g >= t->spread_grants, "%.0f vs %.0f: %.2f x",
            r->grants_per_s, s->grants_per_s, g);
  }
  if (!isnan(t->spread_cpu)) {
    snprintf(what, sizeof(what), "%s %s", pname, p);
    cpu_vs_spin(f, what, t->spread_cpu, r, s);
  }
}

/* The hot key and the solo cycle. */
static void hot_solo(const rtb_run *run, FILE *f, const char *pname,
                     const path_targets *t) {
  rtb_kind k = {RTB_MUTEX, 0, t->path};
  const rtb_row *h = rtb_find_row(run, "hot", RTB_FAIR, &k, 0),
                *hs = rtb_find_row(run, "hot", RTB_SPIN, NULL, 0),
                *so = rtb_find_row(run, "solo", RTB_FAIR, &k, 0);
  char what[96];
  if (h != NULL && !isnan(t->hot_ping)) {
    snprintf(what, sizeof(what), "%s hot: >= %.1f x ping", pname, t->hot_ping);
    verdict(f, what, !isnan(h->ratio_to_ping), h->ratio_to_ping >= t->hot_ping,
            "%.0f vs %.0f grants/s: %.2f x", h->grants_per_s, h->ping_per_s,
            h->ratio_to_ping);
  }
  if (h != NULL && hs != NULL && !isnan(t->hot_cpu)) {
    snprintf(what, sizeof(what), "%s hot", pname);
    cpu_vs_spin(f, what, t->hot_cpu, h, hs);
  }
  if (so != NULL && !isnan(t->solo_trips)) {
    double trips = 1.0 / so->ratio_to_ping;
    snprintf(what, sizeof(what), "%s solo: cycle <= %.1f ping round trips",
             pname, t->solo_trips);
    verdict(f, what, !isnan(trips), trips <= t->solo_trips, "%.2f round trips",
            trips);
  }
}

/* What every path must do at every point, for every kind: 2 client
 * commands per grant, FIFO, no overlap, small queued entries, nothing left
 * when idle. */
static void every_path(const rtb_run *run, FILE *f, const char *pname,
                       int path) {
  int any = 0, fifo_known = 1;
  double cmds = 0, entry = NAN, idle = NAN;
  uint64_t ovl = 0;
  int64_t inv = 0;
  for (size_t i = 0; i < run->nrows; i++) {
    const rtb_row *r = &run->rows[i];
    if (r->mode != RTB_FAIR || r->kind.path != path || r->shards != 0)
      continue;
    any = 1;
    if (r->cmds_per_grant > cmds)
      cmds = r->cmds_per_grant;
    ovl += r->f.overlaps;
    if (r->verified && r->f.fifo_inversions > 0)
      inv += r->f.fifo_inversions;
    fifo_known &= r->verified;
    if (!isnan(r->redis_bytes_per_entry) &&
        (isnan(entry) || r->redis_bytes_per_entry > entry))
      entry = r->redis_bytes_per_entry;
    if (!isnan(r->redis_bytes_idle) &&
        (isnan(idle) || r->redis_bytes_idle > idle))
      idle = r->redis_bytes_idle;
  }
  if (!any)
    return;
  char what[96];
  snprintf(what, sizeof(what), "%s: <= 2 client commands per grant, all",
           pname);
  verdict(f, what, 1, cmds <= 2.0, "worst %.3f", cmds);
  snprintf(what, sizeof(what), "%s: 0 fifo inversions, 0 overlaps, all", pname);
  verdict(f, what, fifo_known || inv > 0 || ovl > 0, inv == 0 && ovl == 0,
          "%lld, %llu%s", (long long)inv, (unsigned long long)ovl,
          fifo_known ? "" : " (FIFO not verified everywhere)");
  snprintf(what, sizeof(what), "%s: Redis <= 80 bytes per queued entry", pname);
  verdict(f, what, !isnan(entry), entry <= 80, "%.0f%s", entry,
          isnan(entry) ? " (memory probe: deep, many)" : "");
  snprintf(what, sizeof(what), "%s: 0 bytes per idle resource", pname);
  verdict(f, what, !isnan(idle), idle == 0, "%.1f", idle);
}

/* The deep queue: as fast as the hot key, small client waiters. */
static void deep(const rtb_run *run, FILE *f, const char *pname, int path) {
  rtb_kind k = {RTB_MUTEX, 0, path};
  const rtb_row *d = rtb_find_row(run, "deep", RTB_FAIR, &k, 0),
                *h = rtb_find_row(run, "hot", RTB_FAIR, &k, 0);
  char what[96];
  if (d != NULL && h != NULL) {
    snprintf(what, sizeof(what), "%s deep: >= 0.9 x hot grants/s", pname);
    verdict(f, what, 1, d->grants_per_s >= 0.9 * h->grants_per_s,
            "%.0f vs %.0f: %.2f x", d->grants_per_s, h->grants_per_s,
            d->grants_per_s / h->grants_per_s);
  }
  if (d != NULL) {
    snprintf(what, sizeof(what), "%s deep: client bytes per waiter <= 400",
             pname);
    verdict(f, what, !isnan(d->client_bytes_per_waiter),
            d->client_bytes_per_waiter <= 400, "%.0f",
            d->client_bytes_per_waiter);
  }
}

/* The kinds beside the mutex on the module's native commands (the module
 * path, or auto on a server with the module): at spread a read-write lock's
 * and a semaphore's grants/s against the mutex's, at spread and many every
 * kind's Redis CPU per grant against spin's, at the hot key an election's
 * handoff against the mutex's. */
static void kinds_on_module(const rtb_run *run, FILE *f) {
  for (size_t i = 0; i < run->nrows; i++) {
    const rtb_row *r = &run->rows[i];
    if (r->mode != RTB_FAIR || r->shards != 0 || r->kind.type == RTB_MUTEX ||
        !(r->kind.path == RT_SCRIPT_PATH_MODULE ||
          (r->kind.path == RT_SCRIPT_PATH_AUTO && run->tgt->module)))
      continue;
    rtb_kind mk = {RTB_MUTEX, 0, r->kind.path};
    const rtb_row *m = rtb_find_row(run, r->point, RTB_FAIR, &mk, 0),
                  *s = rtb_find_row(run, r->point, RTB_SPIN, NULL, 0);
    char kname[32], what[96];
    rtb_kind_name(&r->kind, kname, sizeof(kname));
    int spread = strcmp(r->point, "spread") == 0;
    if (spread && m != NULL && r->kind.type != RTB_ELECTION) {
      double g = r->grants_per_s / m->grants_per_s;
      snprintf(what, sizeof(what), "%s spread: >= 0.9 x mutex grants/s", kname);
      verdict(f, what, !isnan(g), g >= 0.9, "%.0f vs %.0f: %.2f x",
              r->grants_per_s, m->grants_per_s, g);
    }
    if ((spread || strcmp(r->point, "many") == 0) && s != NULL) {
      snprintf(what, sizeof(what), "%s %s", kname, r->point);
      cpu_vs_spin(f, what, 1.0, r, s);
    }
    if (strcmp(r->point, "hot") == 0 && r->kind.type == RTB_ELECTION &&
        m != NULL && r->f.handoffs > 0 && m->f.handoffs > 0) {
      double h = r->f.handoff_us_p50 / m->f.handoff_us_p50;
      snprintf(what, sizeof(what), "%s hot: handoff p50 <= 1.0 x mutex's",
               kname);
      verdict(f, what, 1, h <= 1.0, "%.0f vs %.0f us: %.2f x",
              r->f.handoff_us_p50, m->f.handoff_us_p50, h);
    }
  }
}

void rtb_print_targets(const rtb_run *run, FILE *f) {
  fprintf(f, "targets (ratios within this run):\n");
  if (run->module_note[0])
    fprintf(f, "  (%s)\n", run->module_note);
  for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
    const path_targets *t = &paths[i];
    const char *pname = rtb_path_name(t->path);
    vs_spin(run, f, pname, t, "spread");
    vs_spin(run, f, pname, t, "many");
    hot_solo(run, f, pname, t);
    deep(run, f, pname, t->path);
    every_path(run, f, pname, t->path);
  }
  kinds_on_module(run, f);
}
