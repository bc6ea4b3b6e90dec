/* Reading a run's logs (driver.log, w<slot>-<gen>.log; formats at the
 * top of fault.c) into a history. */
#include "history.h"

/* ---- status codes ----------------------------------------------------------- */

int known_status(int st) {
  if (st == 0)
    return 1;
#define RTF_KNOWN(name, value, msg)                                            \
  if (st == (value))                                                           \
    return 1;
  RT_ERRNO_MAP(RTF_KNOWN)
#undef RTF_KNOWN
  return 0;
}

/* ---- parsing ------------------------------------------------------------- */

static req *find_req(hist *h, wfile *f, const char *id) {
  for (size_t i = f->n; i > 0; i--) {
    req *r = &h->reqs[f->first + i - 1];
    if (strcmp(r->id, id) == 0)
      return r;
  }
  return NULL;
}

/* "E ...": a new request of file fi. */
static void read_enqueue(hist *h, size_t fi, const char *line, int ln) {
  h->reqs = rtf_grow(h->reqs, &h->capreqs, h->nreqs + 1, sizeof(req));
  req *r = &h->reqs[h->nreqs];
  memset(r, 0, sizeof(*r));
  int lane;
  uint64_t rc;
  int n = sscanf(line,
                 "E %" SCNd64 " %d %d %79s %" SCNd64 " %" SCNd64 " %" SCNu64
                 " %d %" SCNd64 " %" SCNd64,
                 &r->e_us, &lane, &r->res, r->id, &r->timeout_ms, &r->ttl_ms,
                 &rc, &r->kind, &r->permits, &r->of);
  if (n != 7 && n != 10)
    return;
  if (n == 7)
    r->kind = 0;
  r->rc_e = rc;
  r->rc_end = rc;
  r->wf = (int)fi;
  r->e_line = ln;
  r->g_left = r->s_left = -1;
  h->nreqs++;
  h->files[fi].n++;
}

/* "G ...": r was granted. */
static void read_grant(req *r, const char *line, int64_t t, int ln) {
  uint64_t rc = 0;
  int64_t left = -1;
  sscanf(line,
         "G %*d %*s %" SCNu64 " %" SCNd64 " %" SCNd64 " %ld %" SCNu64
         " %" SCNd64,
         &r->fence, &r->deadline_ms, &r->lease_ms, &r->pos, &rc, &left);
  r->granted = 1;
  r->g_us = t;
  r->rc_end = rc;
  r->gms = r->deadline_ms - r->ttl_ms;
  r->g_line = ln;
  r->g_left = left;
}

/* "Q", "G", "F", "S", "R" or "L": an event of a request of file f. */
static void read_event(hist *h, wfile *f, const char *line, int ln, FILE *out) {
  int64_t t = 0;
  char id[96];
  char kind = line[0];
  if (sscanf(line + 2, "%" SCNd64 " %95s", &t, id) != 2)
    return;
  req *r = find_req(h, f, id);
  if (r == NULL) {
    fprintf(out, "check: %s:%d: event for an unknown request %s\n", f->name, ln,
            id);
    return;
  }
  if (kind == 'Q') {
    r->q_us = t;
    sscanf(line, "Q %*d %*s %ld", &r->pos);
  } else if (kind == 'G') {
    read_grant(r, line, t, ln);
  } else if (kind == 'F') {
    uint64_t rc = 0;
    int at = 0;
    sscanf(line, "F %*d %*s %d %" SCNu64 " %n", &r->fstatus, &rc, &at);
    if (at > 0)
      snprintf(r->fwhy, sizeof(r->fwhy), "%.*s", (int)strcspn(line + at, "\n"),
               line + at);
    r->failed = 1;
    r->f_us = t;
    r->rc_end = rc;
    r->f_line = ln;
  } else if (kind == 'S') {
    int64_t left = -1;
    int n = sscanf(line, "S %*d %*s %d %d %" SCNd64, &r->overstay, &r->s_lost,
                   &left);
    r->s_ext = n == 3;
    r->s_left = n == 3 ? left : -1;
    r->signaled = 1;
    r->s_us = t;
    r->s_line = ln;
  } else if (kind == 'M') {
    sscanf(line, "M %*d %*s %d", &r->multi);
  } else if (kind == 'D') {
    sscanf(line, "D %*d %*s %" SCNd64, &r->deadline_ms);
    r->d_us = t;
  } else if (kind == 'L') {
    if (r->l_us == 0)
      r->l_us = t;
    h->lost_seen++;
  } else {
    sscanf(line, "R %*d %*s %d", &r->rstatus);
    r->released = 1;
    r->r_us = t;
    r->r_line = ln;
  }
}

/* "I", "U", "N", "C", "X" or "Y": a line about the worker process
 * itself. */
static void read_process(wfile *f, const char *line) {
  uint64_t rc = 0;
  switch (line[0]) {
  case 'I':
    sscanf(line, "I %" SCNd64 " %*d %*d %d", &f->start_us, &f->pid);
    break;
  case 'U':
    f->connect_failed = 1;
    break;
  case 'N':
    if (sscanf(line, "N %*d %" SCNu64, &rc) == 1 && rc > f->max_rc)
      f->max_rc = rc;
    break;
  case 'C':
    sscanf(line, "C %" SCNd64, &f->close_us);
    break;
  case 'X':
    sscanf(line, "X %" SCNd64 " %*u %" SCNu64, &f->exit_us, &rc);
    if (rc > f->max_rc)
      f->max_rc = rc;
    break;
  case 'Y': {
    int64_t t, ms;
    if (sscanf(line, "Y %" SCNd64 " %" SCNd64, &t, &ms) != 2 || ms <= 0)
      break;
    f->stalls =
        rtf_grow(f->stalls, &f->capstalls, f->nstalls + 1, sizeof(*f->stalls));
    f->stalls[f->nstalls].to_us = t;
    f->stalls[f->nstalls++].ms = ms;
    break;
  }
  default:
    break;
  }
}

static mset *find_mset(hist *h, size_t fi, int mid) {
  for (size_t i = h->nmsets; i > 0; i--) {
    mset *m = &h->msets[i - 1];
    if ((size_t)m->wf == fi && m->mid == mid)
      return m;
  }
  return NULL;
}

/* "A t mid timeout ttl n res...", "Z t mid status", "z t mid status". */
static void read_multi(hist *h, size_t fi, const char *line, int ln) {
  int64_t t = 0;
  int mid = 0, st = 0;
  if (line[0] == 'A') {
    h->msets = rtf_grow(h->msets, &h->capmsets, h->nmsets + 1, sizeof(mset));
    mset *m = &h->msets[h->nmsets];
    memset(m, 0, sizeof(*m));
    if (sscanf(line, "A %" SCNd64 " %d %*d %*d %d %d %d", &m->a_us, &m->mid,
               &m->n, &m->res[0], &m->res[1]) != 5)
      return;
    m->wf = (int)fi;
    m->a_line = ln;
    h->nmsets++;
    return;
  }
  if (sscanf(line + 2, "%" SCNd64 " %d %d", &t, &mid, &st) != 3)
    return;
  mset *m = find_mset(h, fi, mid);
  if (m == NULL || line[0] != 'Z')
    return;
  m->z_us = t;
  m->zstatus = st;
  m->done = 1;
  m->z_line = ln;
}

/* "W t res status id fence deadline_ms". */
static void read_observe(hist *h, size_t fi, const char *line, int ln) {
  h->oevs = rtf_grow(h->oevs, &h->capoevs, h->noevs + 1, sizeof(oev));
  oev *o = &h->oevs[h->noevs];
  memset(o, 0, sizeof(*o));
  if (sscanf(line, "W %" SCNd64 " %d %d %79s %" SCNu64 " %" SCNd64, &o->t_us,
             &o->res, &o->status, o->id, &o->fence, &o->deadline_ms) != 6)
    return;
  o->wf = (int)fi;
  o->line = ln;
  h->noevs++;
}

int read_worker(hist *h, const char *dir, const char *name, FILE *out) {
  char path[1024];
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  FILE *fp = fopen(path, "r");
  if (fp == NULL)
    return -1;
  h->files = rtf_grow(h->files, &h->capfiles, h->nfiles + 1, sizeof(wfile));
  size_t fi = h->nfiles++;
  wfile *f = &h->files[fi];
  memset(f, 0, sizeof(*f));
  snprintf(f->name, sizeof(f->name), "%s", name);
  if (sscanf(name, "w%d-%d.log", &f->slot, &f->gen) != 2)
    f->slot = f->gen = -1;
  f->first = h->nreqs;
  char line[600];
  int ln = 0;
  while (fgets(line, sizeof(line), fp) != NULL) {
    ln++;
    if (line[0] == 'E')
      read_enqueue(h, fi, line, ln);
    else if (strchr("QGFSRLMD", line[0]) != NULL && line[0] != '\0')
      read_event(h, &h->files[fi], line, ln, out);
    else if (strchr("AZz", line[0]) != NULL && line[0] != '\0')
      read_multi(h, fi, line, ln);
    else if (line[0] == 'W')
      read_observe(h, fi, line, ln);
    else
      read_process(&h->files[fi], line);
  }
  fclose(fp);
  return 0;
}

static wfile *file_of(hist *h, int slot, int gen) {
  for (size_t i = 0; i < h->nfiles; i++)
    if (h->files[i].slot == slot && h->files[i].gen == gen)
      return &h->files[i];
  return NULL;
}

/* K ... holder res id fence deadline grant: a ghost hold if the worker
 * never reported an outcome for that request. */
static void ghost_from_kill(hist *h, wfile *f, const char *rest, int64_t t,
                            int line) {
  int res;
  char id[96];
  uint64_t fence;
  int64_t deadline, grant;
  if (f == NULL || sscanf(rest, "%d %95s %" SCNu64 " %" SCNd64 " %" SCNd64,
                          &res, id, &fence, &deadline, &grant) != 5)
    return;
  req *r = find_req(h, f, id);
  if (r == NULL || r->res != res || r->granted || r->failed)
    return;
  r->granted = 1;
  r->ghost = 1;
  r->fence = fence;
  r->deadline_ms = deadline;
  r->gms = grant;
  r->lease_ms = deadline - grant;
  r->g_us = t; /* the driver saw it then */
  r->g_line = -line;
}

/* "K ...": the driver killed a worker (a holder, a waiter, or another). */
static void read_kill(hist *h, const char *line, int ln) {
  int64_t t = 0;
  int slot, gen, off = 0;
  char why[32];
  if (sscanf(line, "K %" SCNd64 " %d %d %*d %31s %n", &t, &slot, &gen, why,
             &off) < 4)
    return;
  wfile *f = file_of(h, slot, gen);
  if (f != NULL && (f->kill_us == 0 || t < f->kill_us))
    f->kill_us = t;
  h->kills++;
  if (strcmp(why, "holder") == 0) {
    h->kills_holder++;
    if (off > 0)
      ghost_from_kill(h, f, line + off, t, ln);
  } else if (strcmp(why, "waiter") == 0) {
    h->kills_waiter++;
  }
}

/* "D ...": the driver reaped a worker (killed or exited). */
static void read_reap(hist *h, const char *line) {
  int64_t t = 0;
  int slot, gen;
  if (sscanf(line, "D %" SCNd64 " %d %d", &t, &slot, &gen) < 3)
    return;
  wfile *f = file_of(h, slot, gen);
  if (f != NULL && f->reap_us == 0)
    f->reap_us = t;
}

/* "Z ...": a network fault on a worker's proxy begins (open_net: the open
 * span of each slot). */
/* "L t slot gen kind client-id": a CLIENT KILL; kept for a subscriber
 * connection (its notices in flight go with it). */
static void read_conn_kill(hist *h, const char *line) {
  int64_t t = 0;
  int slot, gen;
  char kind[16];
  if (sscanf(line, "L %" SCNd64 " %d %d %15s", &t, &slot, &gen, kind) != 4 ||
      strcmp(kind, "sub") != 0)
    return;
  h->subkills =
      rtf_grow(h->subkills, &h->capsubkills, h->nsubkills + 1, sizeof(ckill));
  h->subkills[h->nsubkills++] = (ckill){slot, gen, t};
}

static void read_net(hist *h, const char *line, int *open_net) {
  int64_t t = 0, a = 0, b = 0;
  int slot, gen;
  char kind[32];
  int n = sscanf(line, "Z %" SCNd64 " %d %d %31s %" SCNd64 " %" SCNd64, &t,
                 &slot, &gen, kind, &a, &b);
  if (n < 4 || slot < 0 || slot >= MAX_SLOTS)
    return;
  h->nets = rtf_grow(h->nets, &h->capnets, h->nnets + 1, sizeof(nspan));
  nspan *s = &h->nets[h->nnets];
  memset(s, 0, sizeof(*s));
  s->slot = slot;
  s->from_us = t;
  if (strcmp(kind, "delay") == 0) {
    s->kind = 0;
    s->delay_ms = a;
    s->to_us = t + (b + a) * 1000; /* until z says otherwise */
  } else if (strcmp(kind, "hold") == 0) {
    s->kind = 1;
    s->to_us = t + a * 1000;
  } else if (strcmp(kind, "partition") == 0) {
    s->kind = 2;
    s->to_us = t + a * 1000;
  } else {
    s->kind = 3;
    s->to_us = t;
  }
  h->net_kind[s->kind]++;
  if (s->kind != 3) {
    s->open = 1;
    open_net[slot] = (int)h->nnets;
  }
  h->nnets++;
}

/* "z ...": the end of a network fault. What was held is delivered now (or
 * dropped); delayed bytes keep arriving for one more delay. */
static void read_net_end(hist *h, const char *line, int *open_net) {
  int64_t t = 0;
  int slot;
  if (sscanf(line, "z %" SCNd64 " %d", &t, &slot) == 2 && slot >= 0 &&
      slot < MAX_SLOTS && open_net[slot] >= 0) {
    nspan *s = &h->nets[open_net[slot]];
    s->to_us = t + (s->delay_ms + 50) * 1000;
    s->open = 0;
    open_net[slot] = -1;
  }
}

/* "X ...": keys of a resource (or all keys) were lost. */
static void read_loss(hist *h, const char *line, int ln) {
  int64_t t = 0, t1 = 0;
  int res;
  char kind[32];
  if (sscanf(line, "X %" SCNd64 " %" SCNd64 " %d %31s", &t, &t1, &res, kind) !=
      4)
    return;
  h->losses = rtf_grow(h->losses, &h->caplosses, h->nlosses + 1, sizeof(lspan));
  lspan *l = &h->losses[h->nlosses++];
  l->res = res;
  l->from_us = t;
  l->to_us = t1;
  l->line = ln;
  /* Losses of the holder record (h, every key) free its holders, as the
   * docs say; q, m and a pool resource's D free nothing. */
  l->all = strcmp(kind, "all") == 0 || strcmp(kind, "flushall") == 0 ||
           strcmp(kind, "h") == 0;
  h->loss_kind[strcmp(kind, "q") == 0     ? 0
               : strcmp(kind, "m") == 0   ? 1
               : strcmp(kind, "all") == 0 ? 2
               : strcmp(kind, "h") == 0   ? 4
               : strcmp(kind, "d") == 0   ? 5
                                          : 3]++;
}

/* "Y t cluster-<kind> begin ... (r<res>, ...)" opens a move (so does
 * "Y t cluster-crash slot ..."), the next "Y t cluster-<kind> end ..."
 * closes it. A reshard moves res's slot alone; a failover or a crash moves
 * every slot of that master, maybe other resources' too: res -1. */
static void read_cluster_event(hist *h, const char *line) {
  int64_t t;
  int res;
  char kind[32], word[16];
  if (sscanf(line, "Y %" SCNd64 " cluster-%31s %15s", &t, kind, word) != 3)
    return;
  const char *r = strstr(line, "(r");
  if (strncmp(word, "end", 3) == 0) {
    if (h->nmoves > 0 && h->moves[h->nmoves - 1].to_us == INT64_MAX)
      h->moves[h->nmoves - 1].to_us = t;
  } else if (r != NULL && sscanf(r, "(r%d", &res) == 1 && h->nmoves < 16) {
    h->moves[h->nmoves].res = strcmp(kind, "reshard") == 0 ? res : -1;
    h->moves[h->nmoves].from_us = t;
    h->moves[h->nmoves].to_us = INT64_MAX;
    h->nmoves++;
  }
}

/* "A", "B", "S", "H": a pause of the server, or its restart. */
static void read_server_event(hist *h, const char *line) {
  int64_t t = 0;
  int ms;
  if (line[0] == 'A') {
    if (sscanf(line, "A %" SCNd64 " %d", &t, &ms) == 2 && h->npauses < 256) {
      h->pauses[h->npauses].from_us = t;
      h->pauses[h->npauses].to_us = t + (int64_t)ms * 1000;
      h->npauses++;
      h->nserver_stalls += strstr(line, " stall") != NULL;
    }
  } else if (line[0] == 'B') {
    if (sscanf(line, "B %" SCNd64, &t) == 1 && h->nrestarts < 8) {
      h->restarts[h->nrestarts].from_us = t;
      h->restarts[h->nrestarts].to_us = INT64_MAX;
      h->restarts[h->nrestarts].down_us = 0;
      h->nrestarts++;
    }
  } else if (line[0] == 'S') {
    if (sscanf(line, "S %" SCNd64, &t) == 1 && h->nrestarts > 0)
      h->restarts[h->nrestarts - 1].down_us = t;
  } else if (sscanf(line, "H %" SCNd64, &t) == 1 && h->nrestarts > 0) {
    h->restarts[h->nrestarts - 1].to_us = t;
  }
}

int read_driver(hist *h, const char *dir, FILE *out) {
  char path[1024];
  snprintf(path, sizeof(path), "%s/driver.log", dir);
  FILE *fp = fopen(path, "r");
  if (fp == NULL)
    return -1;
  char line[600];
  int ln = 0;
  int open_net[MAX_SLOTS];
  for (int i = 0; i < MAX_SLOTS; i++)
    open_net[i] = -1;
  while (fgets(line, sizeof(line), fp) != NULL) {
    ln++;
    switch (line[0]) {
    case 'P': {
      const char *w;
      h->persist = strstr(line, "persist=none") == NULL;
      h->evict = strstr(line, " evict=1") != NULL;
      if ((w = strstr(line, " wait_replicas=")) != NULL)
        h->wait_replicas = atoi(w + strlen(" wait_replicas="));
      break;
    }
    case 'K':
      read_kill(h, line, ln);
      break;
    case 'D':
      read_reap(h, line);
      break;
    case 'L':
      h->conn_kills++;
      read_conn_kill(h, line);
      break;
    case 'Z':
      read_net(h, line, open_net);
      break;
    case 'z':
      read_net_end(h, line, open_net);
      break;
    case 'X':
      read_loss(h, line, ln);
      break;
    case 'J':
      h->observer++;
      break;
    case 'Y':
      read_cluster_event(h, line);
      break;
    case 'A':
    case 'B':
    case 'S':
    case 'H':
      read_server_event(h, line);
      break;
    case 'V':
      h->driver_v++;
      fprintf(out, "VIOLATION [driver] %s", line + 2);
      break;
    default:
      break;
    }
  }
  fclose(fp);
  return 0;
}
