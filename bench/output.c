/* The benchmark's output: progress on stderr, the table, the targets
 * checked on this run, one JSON object per row, and the plot data. */
#define _GNU_SOURCE
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "driver.h"
#include "redturn.h" /* RT_SCRIPT_PATH_* */

/* ---- progress on stderr (the passes' and the run's) ----------------------- */

double rtb_elapsed_s(int64_t since) {
  return (double)(rtb_now_ns() - since) / 1e9;
}

void rtb_progress(const rtb_run *run, const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "[%6.1fs] ", rtb_elapsed_s(run->start));
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}

static void json_num(FILE *f, const char *name, double v, int prec) {
  if (isnan(v) || isinf(v))
    fprintf(f, ",\"%s\":null", name);
  else
    fprintf(f, ",\"%s\":%.*f", name, prec, v);
}

/* A row's kind as the table and JSON name it: the fair kind, "-" else. */
static const char *row_kind(const rtb_row *r, char *buf, size_t cap) {
  if (r->mode != RTB_FAIR)
    return "-";
  return rtb_kind_name(&r->kind, buf, cap);
}

void rtb_json_row(const rtb_run *run, FILE *f, const rtb_row *r) {
  const rtb_figures *g = &r->f;
  char kname[32];
  fprintf(f,
          "{\"mode\":\"%s\",\"kind\":\"%s\",\"shards\":%d,\"point\":\"%s\","
          "\"procs\":%u,\"waiters\":%u,\"keys\":%u,\"hold_us\":%u,"
          "\"n_target\":%" PRIu64 ",\"grants\":%" PRIu64,
          rtb_mode_names[r->mode], row_kind(r, kname, sizeof(kname)), r->shards,
          r->point, r->procs, r->waiters, r->keys, r->hold_us, r->n_target,
          g->grants);
  json_num(f, "wall_s", g->wall_s, 3);
  json_num(f, "grants_per_s", r->grants_per_s, 1);
  json_num(f, "ratio_to_ping", r->ratio_to_ping, 3);
  json_num(f, "ping_per_s",
           r->mode == RTB_PING ? r->grants_per_s : r->ping_per_s, 1);
  json_num(f, "acquire_ms_p50", g->acquire_ms_p50, 3);
  json_num(f, "acquire_ms_p99", g->acquire_ms_p99, 3);
  json_num(f, "acquire_ms_max", g->acquire_ms_max, 3);
  json_num(f, "handoff_us_p50", g->handoff_us_p50, 1);
  json_num(f, "handoff_us_p99", g->handoff_us_p99, 1);
  json_num(f, "redis_cmds_per_grant", r->cmds_per_grant, 3);
  json_num(f, "redis_cmds_per_grant_server", r->server_cmds_per_grant, 3);
  json_num(f, "redis_cpu_us_per_grant", r->redis_cpu_us_per_grant, 2);
  json_num(f, "client_cpu_us_per_grant", r->client_cpu_us_per_grant, 2);
  if (r->verified && g->fifo_inversions >= 0)
    fprintf(f, ",\"fifo_inversions\":%" PRId64, g->fifo_inversions);
  else
    fprintf(f, ",\"fifo_inversions\":null");
  fprintf(f,
          ",\"fifo_checked_grants\":%" PRIu64 ",\"overlaps\":%" PRIu64
          ",\"per_waiter_min\":%" PRIu64 ",\"per_waiter_max\":%" PRIu64,
          g->fifo_checked, g->overlaps, g->per_waiter_min, g->per_waiter_max);
  json_num(f, "jain_index", g->jain, 4);
  fprintf(f, ",\"client_rss_kb\":%lld,\"redis_used_memory_kb\":%lld",
          r->client_rss_kb, r->redis_used_memory_kb);
  json_num(f, "client_bytes_per_waiter", r->client_bytes_per_waiter, 0);
  json_num(f, "redis_bytes_per_entry", r->redis_bytes_per_entry, 0);
  json_num(f, "redis_bytes_per_resource", r->redis_bytes_per_resource, 0);
  json_num(f, "redis_bytes_per_idle_resource", r->redis_bytes_idle, 1);
  json_num(f, "redis_instructions_per_grant", r->instr_per_grant, 0);
  if (!isnan(r->instr_per_grant))
    fprintf(f, ",\"instructions_grants\":%" PRIu64, r->instr_grants);
  json_num(f, "handoffs", (double)g->handoffs, 0);
  json_num(f, "handoffs_same_waiter",
           g->handoffs ? (double)g->handoffs_same_waiter / (double)g->handoffs
                       : NAN,
           3);
  json_num(f, "handoffs_same_proc",
           g->handoffs ? (double)g->handoffs_same_proc / (double)g->handoffs
                       : NAN,
           3);
  json_num(f, "attempts_per_grant",
           r->mode == RTB_SPIN ? g->attempts_per_grant : NAN, 2);
  if (r->mode == RTB_SPIN)
    fprintf(f, ",\"spin_retry_ms\":%u", run->opt.retry_ms);
  fprintf(f, ",\"repeats\":%u,\"errors\":%" PRIu64 ",\"lost\":%" PRIu64 "}\n",
          r->repeats, r->errors, r->lost);
}

static void cell(char *buf, size_t cap, double v, int prec) {
  if (isnan(v))
    snprintf(buf, cap, "-");
  else
    snprintf(buf, cap, "%.*f", prec, v);
}

void rtb_print_table(const rtb_run *run, FILE *f) {
  if (run->opt.repeat > 1)
    fprintf(f,
            "(timing figures: medians of %u alternating repeats; inv, "
            "memory: first repeat; ovl: all)\n",
            run->opt.repeat);
  fprintf(f,
          "%-6s %-4s %-15s %2s %2s %4s %5s %4s %6s %6s %8s %5s %7s %7s %8s %7s "
          "%8s %5s %6s %6s %6s %4s %3s %4s %4s %6s %7s %7s %7s %5s\n",
          "point", "mode", "kind", "sh", "P", "W", "K", "H", "grants", "wall_s",
          "grants/s", "/ping", "acq_p50", "acq_p99", "acq_max", "ho_p50",
          "ho_p99", "cmd/g", "srv/g", "rcpu/g", "ccpu/g", "inv", "ovl", "wmin",
          "wmax", "jain", "rss_kb", "redisKB", "kinstr", "idleB");
  for (size_t i = 0; i < run->nrows; i++) {
    const rtb_row *r = &run->rows[i];
    const rtb_figures *g = &r->f;
    char c[16][24], kname[32], sh[8];
    snprintf(sh, sizeof(sh), r->shards > 0 ? "%d" : "-", r->shards);
    cell(c[0], 24, g->wall_s, 2);
    cell(c[1], 24, r->grants_per_s, 0);
    cell(c[2], 24, r->ratio_to_ping, 2);
    cell(c[3], 24, g->acquire_ms_p50, 2);
    cell(c[4], 24, g->acquire_ms_p99, 2);
    cell(c[5], 24, g->acquire_ms_max, 1);
    cell(c[6], 24, g->handoff_us_p50, 0);
    cell(c[7], 24, g->handoff_us_p99, 0);
    cell(c[8], 24, r->cmds_per_grant, 2);
    cell(c[9], 24, r->server_cmds_per_grant, 1);
    cell(c[10], 24, r->redis_cpu_us_per_grant, 1);
    cell(c[11], 24, r->client_cpu_us_per_grant, 1);
    cell(c[12], 24, g->jain, 3);
    cell(c[14], 24, r->instr_per_grant / 1000, 1);
    cell(c[15], 24, r->redis_bytes_idle, 0);
    if (r->verified && g->fifo_inversions >= 0)
      snprintf(c[13], 24, "%" PRId64, g->fifo_inversions);
    else
      snprintf(c[13], 24, "-");
    fprintf(f,
            "%-6s %-4s %-15s %2s %2u %4u %5u %4u %6" PRIu64 " %6s %8s %5s %7s "
            "%7s %8s %7s %8s %5s %6s %6s %6s %4s %3" PRIu64 " %4" PRIu64
            " %4" PRIu64 " %6s %7lld %7lld %7s %5s\n",
            r->point, rtb_mode_names[r->mode],
            row_kind(r, kname, sizeof(kname)), sh, r->procs, r->waiters,
            r->keys, r->hold_us, g->grants, c[0], c[1], c[2], c[3], c[4], c[5],
            c[6], c[7], c[8], c[9], c[10], c[11], c[13], g->overlaps,
            g->per_waiter_min, g->per_waiter_max, c[12], r->client_rss_kb,
            r->redis_used_memory_kb, c[14], c[15]);
  }
  for (size_t i = 0; i < run->nrows; i++) {
    const rtb_row *r = &run->rows[i];
    char kname[32];
    if (!isnan(r->client_bytes_per_waiter))
      fprintf(f,
              "memory (%s, %s %s): %.0f client bytes per pending waiter, "
              "%.0f Redis bytes per queued entry, %.0f Redis bytes per "
              "locked resource\n",
              r->point, rtb_mode_names[r->mode],
              row_kind(r, kname, sizeof(kname)), r->client_bytes_per_waiter,
              r->redis_bytes_per_entry, r->redis_bytes_per_resource);
  }
}

void rtb_print_instructions(const rtb_run *run, FILE *f) {
  if (run->ninstr == 0)
    return;
  fprintf(f,
          "instructions executed by redis-server per grant (callgrind; a "
          "server of its own,\n%lld grants per pass, less its idle %.0f "
          "instructions/s over the pass):\n",
          run->opt.instructions_n, run->instr_idle_per_s);
  for (size_t i = 0; i < run->ninstr; i++) {
    const rtb_row *r = &run->instr[i], *s = NULL;
    char kname[32];
    for (size_t j = 0; j < run->ninstr; j++)
      if (run->instr[j].mode == RTB_SPIN &&
          strcmp(run->instr[j].point, r->point) == 0)
        s = &run->instr[j];
    fprintf(f, "  %-6s %-4s %-16s %9.0f", r->point, rtb_mode_names[r->mode],
            row_kind(r, kname, sizeof(kname)), r->instr_per_grant);
    if (s != NULL)
      fprintf(f, "  %5.2f x spin", r->instr_per_grant / s->instr_per_grant);
    fprintf(f, "  (%" PRIu64 " grants)\n", r->instr_grants);
  }
}

/* The row of mode at point with kind (NULL: the mutex) on a target of
 * shards (0: one redis-server). */
const rtb_row *rtb_find_row(const rtb_run *run, const char *point, int mode,
                            const rtb_kind *kind, int shards) {
  for (size_t i = 0; i < run->nrows; i++) {
    const rtb_row *r = &run->rows[i];
    int type = kind != NULL ? kind->type : RTB_MUTEX;
    unsigned param = kind != NULL ? kind->param : 0;
    int path = kind != NULL ? kind->path : 0;
    if (r->mode == mode && strcmp(r->point, point) == 0 &&
        r->shards == shards && r->kind.type == type && r->kind.param == param &&
        r->kind.path == path)
      return r;
  }
  return NULL;
}

/* The targets compare the mutex on one redis-server. */
static const rtb_row *find_row(const rtb_run *run, const char *point,
                               int mode) {
  return rtb_find_row(run, point, mode, NULL, 0);
}

/* Each fair kind's grants/s over the mutex's of the same script path at
 * the same point and target. */
static void kind_ratios(const rtb_run *run, FILE *f, int *header) {
  for (size_t i = 0; i < run->nrows; i++) {
    const rtb_row *r = &run->rows[i], *m;
    char kname[32];
    rtb_kind mutex = {RTB_MUTEX, 0, r->kind.path};
    if (r->mode != RTB_FAIR || r->kind.type == RTB_MUTEX ||
        (m = rtb_find_row(run, r->point, RTB_FAIR, &mutex, r->shards)) == NULL)
      continue;
    if (!(*header)++)
      fprintf(f, "ratios (grants/s within this run):\n");
    char where[24] = "";
    if (r->shards > 0)
      snprintf(where, sizeof(where), " (%d shard%s)", r->shards,
               r->shards > 1 ? "s" : "");
    fprintf(f, "  %-6s %-6s %8.0f vs mutex %8.0f grants/s: %.2f x%s\n",
            r->point, rtb_kind_name(&r->kind, kname, sizeof(kname)),
            r->grants_per_s, m->grants_per_s, r->grants_per_s / m->grants_per_s,
            where);
    /* An election hands over as a mutex does: one leader, then the next. */
    if (r->kind.type == RTB_ELECTION && r->f.handoffs > 0 && m->f.handoffs > 0)
      fprintf(f,
              "  %-6s %-6s handoff p50 %.0f vs mutex %.0f us: %.2f x the "
              "mutex's time%s\n",
              r->point, kname, r->f.handoff_us_p50, m->f.handoff_us_p50,
              r->f.handoff_us_p50 / m->f.handoff_us_p50, where);
  }
}

/* Grants/s of each fair row on the big cluster over the small one's. */
static void shard_ratios(const rtb_run *run, FILE *f, int *header) {
  for (size_t i = 0; i < run->nrows; i++) {
    const rtb_row *r = &run->rows[i], *one;
    char kname[32];
    if (r->mode != RTB_FAIR || r->shards != RTB_CLUSTER_BIG ||
        (one = rtb_find_row(run, r->point, RTB_FAIR, &r->kind,
                            RTB_CLUSTER_SMALL)) == NULL)
      continue;
    if (!(*header)++)
      fprintf(f, "ratios (grants/s within this run):\n");
    fprintf(f,
            "  %-6s %-6s %8.0f on %d shards vs %8.0f on %d grants/s: %.2f x\n",
            r->point, rtb_kind_name(&r->kind, kname, sizeof(kname)),
            r->grants_per_s, RTB_CLUSTER_BIG, one->grants_per_s,
            RTB_CLUSTER_SMALL, r->grants_per_s / one->grants_per_s);
  }
}

void rtb_print_ratios(const rtb_run *run, FILE *f) {
  int header = 0;
  kind_ratios(run, f, &header);
  shard_ratios(run, f, &header);
  if (header)
    fputc('\n', f);
}

void rtb_write_data(const rtb_run *run) {
  if (run->opt.data_dir == NULL)
    return;
  char path[512];
  snprintf(path, sizeof(path), "%s/grants.dat", run->opt.data_dir);
  FILE *f = fopen(path, "w");
  if (f == NULL) {
    perror(path);
    return;
  }
  /* Fixed columns (bench/plot.gp reads them by position); NaN where the
   * run has no such row. */
  fprintf(f, "# point ping module functions eval spin (grants per second)\n");
  const int cols[] = {RTB_PATH_MODULE, RT_SCRIPT_PATH_FUNCTIONS,
                      RT_SCRIPT_PATH_EVAL};
  for (size_t p = 0; p < run->opt.npoints; p++) {
    const char *name = run->opt.points[p].name;
    const rtb_row *rs[5];
    rs[0] = find_row(run, name, RTB_PING);
    for (int c = 0; c < 3; c++) {
      rtb_kind k = {RTB_MUTEX, 0, cols[c]};
      rs[1 + c] = rtb_find_row(run, name, RTB_FAIR, &k, 0);
    }
    rs[4] = find_row(run, name, RTB_SPIN);
    fprintf(f, "%s", name);
    for (int c = 0; c < 5; c++) {
      if (rs[c] != NULL && !isnan(rs[c]->grants_per_s))
        fprintf(f, " %.1f", rs[c]->grants_per_s);
      else
        fprintf(f, " NaN");
    }
    fputc('\n', f);
  }
  fclose(f);
}

void rtb_write_handoffs(const rtb_run *run, const rtb_row *r, const double *h,
                        size_t n) {
  if (run->opt.data_dir == NULL || n == 0)
    return;
  char path[600], shards[24] = "", how[48] = "";
  if (r->shards > 0)
    snprintf(shards, sizeof(shards), "-%dshard", r->shards);
  /* fair on a forced path: "-functions", "-eval", "-module" */
  if (r->mode == RTB_FAIR && r->kind.path != RT_SCRIPT_PATH_AUTO)
    snprintf(how, sizeof(how), "-%s", rtb_path_name(r->kind.path));
  snprintf(path, sizeof(path), "%s/handoff-%s-%s%s%s.dat", run->opt.data_dir,
           r->point, rtb_mode_names[r->mode], how, shards);
  FILE *f = fopen(path, "w");
  if (f == NULL) {
    perror(path);
    return;
  }
  fprintf(f, "# handoff latency CDF: fraction, microseconds (%zu handoffs)\n",
          n);
  for (int i = 1; i <= 400; i++) {
    double q = i / 400.0;
    fprintf(f, "%.4f %.1f\n", q, rtb_quantile(h, n, q));
  }
  fclose(f);
}
