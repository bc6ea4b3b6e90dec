/*
 * redturn's protocol as a Promela model, checked by SPIN (model/README.md).
 *
 * One resource, NC clients with one request each (request id = client
 * number). Each script of lua/ is one d_step (Redis runs a script
 * atomically), written branch by branch after the Lua; the labels in the
 * comments (S_...) are the rows of docs/DESIGN.md's model table. A change
 * to a script changes its model here in the same commit.
 *
 * Time is discrete ticks and relative: every deadline and key expiry is
 * kept as the ticks left (a key with 0 left still exists this tick, as
 * Redis keeps a key through its last millisecond, and is gone at the next
 * tick). So the state space is finite without a bound on the clock.
 *
 * Configuration (spin -D...):
 *   MUTEX                 the mutex's scripts (q, m, STRING h); else the
 *                         pool scripts (Q, M, HASH h, D)
 *   NC                    clients (2 or 3)
 *   CAP                   permits (pool); an election is CAP 1,
 *                         a read-write lock CAP NC with the writer taking
 *                         all (RW), a semaphore any CAP
 *   RW                    client 0 is a writer (all permits), the others
 *                         readers (1)
 *   K0 K1 K2, L0 L1 L2    permits and lease (ticks) of each client
 *   KEYLOSS DROPS CRASHES NOTEFAULTS CANCELS EXTENDS TRIES EVICTS
 *                         how many of each fault or action a run may have
 *   DEFECT1               put defect 1 (a lost D) back: no restore of the
 *                         deadlines of holders that a lost D no longer lists
 *                         (pool.lua before the fix)
 *   DEFECT_USED           put the '+' leak back: a retried pool_enqueue or
 *                         pool_try of a holder answers without writing back
 *                         the permits of leases it found ended (the
 *                         scripts before the fix)
 */

#ifndef DEFECT_USED
#define DEFECT_USED 0
#endif
#ifndef NC
#define NC 3
#endif
#ifndef CAP
#define CAP 3
#endif
#ifndef K0
#define K0 1
#endif
#ifndef K1
#define K1 1
#endif
#ifndef K2
#define K2 3
#endif
#ifndef L0
#define L0 1
#endif
#ifndef L1
#define L1 3
#endif
#ifndef L2
#define L2 1
#endif
#ifndef KEYLOSS
#define KEYLOSS 1
#endif
#ifndef DROPS
#define DROPS 1
#endif
#ifndef CRASHES
#define CRASHES 1
#endif
#ifndef NOTEFAULTS
#define NOTEFAULTS 1
#endif
#ifndef CANCELS
#define CANCELS 1
#endif
#ifndef EXTENDS
#define EXTENDS 1
#endif
#ifndef TRIES
#define TRIES 0
#endif
#ifndef EVICTS
#define EVICTS 0
#endif

#define GRACE 1    /* GRACE_MS: q/m outlive the lease by this */
#define SETTLE 1   /* SETTLE_MS */
#define NOEXP 255  /* a key without an expiry */
#define NONE 255   /* no request id */
#define NB 2       /* notices a client's socket buffers (more are lost) */

/* ---- Redis: the resource's keys ------------------------------------------ */

/* q / Q: the waiters, oldest first. */
byte q[NC + 2];
byte qlen;
byte q_ttl = NOEXP;
/* m / M: members (ticket relative to '#', which is kept at 0 after each
 * script: only differences matter), '#' present, '@' (0 none, 1 "here:0",
 * 2 "here:<since>" with m_sl ticks of settle window left), '*' (M). */
bool mem[NC];
short tk[NC];
bool m_headp;
short m_head;
byte m_at;
byte m_sl;
bool m_kind;
byte m_ttl = NOEXP;
#define M_EXISTS (m_headp || m_at != 0 || m_kind || mem[0] || mem[1] || memx2)
#if NC > 2
#define memx2 mem[2]
#else
#define memx2 0
#endif

#ifdef MUTEX
/* h: STRING "<fence>:<deadline>:<granted>:<id>", PX = lease. */
bool h_ex;
byte h_id;
byte h_f;
byte h_left; /* deadline - now; the key's own expiry is the same */
#else
/* h: HASH id -> "<fence>:<granted>:<permits>", '*', '+', 'f'. */
bool hr[NC];
byte hf[NC];
bool h_kind, h_usedp, h_lastp;
byte h_used, h_last;
byte h_ttl = NOEXP;
/* D: ZSET id -> deadline. */
bool d[NC];
byte dl[NC];
byte d_ttl = NOEXP;
#endif

/* ---- clients -------------------------------------------------------------- */

#define IDLE 0
#define QUEUED 1
#define HELD 2
#define LOST 3
#define RELG 4 /* RELEASING: a cancel, deadline or signal waits for Redis */
#define DONE 5
#define CRASHED 6

#define C_NONE 0
#define C_ENQ 1
#define C_ENQR 2 /* enqueue with the retry flag */
#define C_REL 3
#define C_REAP 4
#define C_EXT 5
#define C_OWN 6 /* reconcile of a held lock: inspect / pool_reap with its id */
#define C_TRY 7
#define C_PROC 8 /* proclaim (an election's leader sets its value) */

#define R_NONE 0
#define R_GRANT 1 /* enqueue or try: granted, rf fence, rd lease left */
#define R_QUEUED 2 /* enqueue: queued, rd holder/first lease left */
#define R_REL 3
#define R_REAP 4 /* rd lease left (-1 nobody), ra mine (0 gone 1 waiting 2 holder) */
#define R_EXT 5 /* ra 1 extended (rd lease), 0 not the holder */
#define R_OWN 6 /* ra 1 still the holder */
#define R_BUSY 7 /* try: not granted */
#define R_PROC 8 /* proclaim: ra 1 done, 0 not the leader */

byte st[NC];
byte cmd[NC];
bool cmd_dead[NC]; /* sent on a connection now down: may still run, unanswered */
bool recheck_due[NC];
byte rk[NC];
byte ra[NC];
byte rf[NC];
short rd[NC];
bool up[NC]; /* its connections (command and subscriber) are up */
byte lend[NC]; /* local end of the lease (ticks left) */
bool wd_on[NC];
byte wd[NC]; /* watchdog: ticks until it fires */
byte K[NC];
byte L[NC];
bool trying[NC];

/* Notices on their way to a client: kind, fence, deadline (ticks left). */
#define N_G 1
#define N_N 2
#define N_L 3
typedef Notice {
  byte nk;
  byte nf;
  byte nd
}
Notice nb[NC * NB];

/* ---- fault budgets -------------------------------------------------------- */
byte keyloss = KEYLOSS;
byte drops = DROPS;
byte crashes = CRASHES;
byte notefaults = NOTEFAULTS;
byte cancels = CANCELS;
byte extends = EXTENDS;
byte tries = TRIES;
byte evicts = EVICTS;

/* ---- ghosts: what the properties are judged by ---------------------------- */
byte glease[NC]; /* the lease Redis promised r: ticks left (0: none) */
bool forced[NC]; /* r's lease was ended by force (its record lost, evicted) */
bool gw[NC];     /* r is a live waiter in q: pushed, not popped, not canceled */
byte ahead[NC];  /* bit w: w was a live waiter in q when r was pushed */
byte gmaxf;      /* the largest fence issued */
byte gfence[NC]; /* the fence of r's latest grant */

/* ---- scratch of the running script (reset after each) --------------------- */
byte s_id, s_g, s_i, s_j, s_quiet, s_last, s_fence, s_res, s_mine;
bool s_hid_p, s_tell, s_dirty, s_moved, s_granted, s_stl_p, s_stl, s_lastp;
short s_left, s_pos, s_used, s_first, s_lastd;
byte s_freed, s_tmp;

#define CLIENT(r) (r)

/* ---- invariants ------------------------------------------------------------ */

#define LIVE(r) (glease[r] > 0)
#define PERMITS_LIVE ((LIVE(0) -> K[0] : 0) + (LIVE(1) -> K[1] : 0) + PL2)
#if NC > 2
#define PL2 (LIVE(2) -> K[2] : 0)
#else
#define PL2 0
#endif
#ifdef MUTEX
#define CAPACITY 1
#else
#define CAPACITY CAP
#endif
/* A client that counts itself the holder has a lease Redis promised it,
 * unless Redis ended it by force (allowed: docs/DESIGN.md sections 9, 13). */
#define BELIEF_OK(c) (!(st[c] == HELD && lend[c] > 0) || glease[c] > 0 || forced[c] || \
  cmd[c] == C_EXT || rk[c] == R_EXT)
/* (An extend in flight is exempt: its reply may shorten the lease the
 * client counts, model/README.md.) */
#if NC > 2
#define BELIEFS (BELIEF_OK(0) && BELIEF_OK(1) && BELIEF_OK(2))
#else
#define BELIEFS (BELIEF_OK(0) && BELIEF_OK(1))
#endif

/* Each grant: exclusion, FIFO, a fresh fence, a lease that runs. */
inline grant_checks(r, f, ttl) {
  assert(ttl > 0);                 /* no grant of an expired lease */
  assert(f > gmaxf);               /* fences strictly increase */
  gmaxf = f;
  gfence[r] = f;
  glease[r] = ttl;
  forced[r] = 0;
  /* FIFO: nobody who was a live waiter ahead of r still is */
  s_j = 0;
  do
  :: s_j < NC ->
     assert(!((ahead[r] >> s_j) & 1) || !gw[s_j]);
     s_j++
  :: else -> break
  od;
  s_j = 0;
  assert(PERMITS_LIVE <= CAPACITY) /* never more permits than exist */
}

#if NC > 2
#define memx2w gw[2]
#else
#define memx2w 0
#endif

/* A grant with no waiter pushed (take_free, try): nobody may wait. */
inline nobody_waits() {
  assert(!gw[0] && !gw[1] && !memx2w)
}

/* ---- notices ----------------------------------------------------------- */

/* SPUBLISH to r's client: delivered (count 1) if its subscriber is up; a
 * full buffer loses it (the count was 1 all the same). */
inline publish(r, kind, f, dd) {
  if
  :: up[CLIENT(r)] ->
     s_res = 1;
     if
     :: nb[CLIENT(r) * NB].nk == 0 ->
        nb[CLIENT(r) * NB].nk = kind; nb[CLIENT(r) * NB].nf = f; nb[CLIENT(r) * NB].nd = dd
     :: nb[CLIENT(r) * NB].nk != 0 && nb[CLIENT(r) * NB + 1].nk == 0 ->
        nb[CLIENT(r) * NB + 1].nk = kind; nb[CLIENT(r) * NB + 1].nf = f; nb[CLIENT(r) * NB + 1].nd = dd
     :: else -> skip
     fi
  :: else -> s_res = 0
  fi
}

/* The two slots of a buffer are a bag (the client takes either first):
 * keep them sorted so that equal bags are one state. */
inline nb_sort(b) {
  if
  :: nb[b].nk < nb[b + 1].nk || (nb[b].nk == nb[b + 1].nk && nb[b].nd < nb[b + 1].nd) ->
     s_tmp = nb[b].nk; nb[b].nk = nb[b + 1].nk; nb[b + 1].nk = s_tmp;
     s_tmp = nb[b].nf; nb[b].nf = nb[b + 1].nf; nb[b + 1].nf = s_tmp;
     s_tmp = nb[b].nd; nb[b].nd = nb[b + 1].nd; nb[b + 1].nd = s_tmp;
     s_tmp = 0
  :: else -> skip
  fi
}

/* settle_start / settling(): '@' missing (m lost and remade by HINCRBY or
 * HSET) starts a settle window; "here:0" never settles. */
inline settle_start() {
  if
  :: m_at == 0 -> m_at = 2; m_sl = SETTLE
  :: else -> skip
  fi
}
inline settling() {
  if
  :: !s_stl_p -> settle_start(); s_stl = (m_at == 2 && m_sl > 0); s_stl_p = 1
  :: else -> skip
  fi
}
/* reaches(): notified, or clients may still be subscribing */
inline reaches(r, kind, f, dd) {
  publish(r, kind, f, dd);
  if
  :: s_res == 0 -> settling(); s_res = s_stl
  :: else -> skip
  fi
}

/* ---- prelude ------------------------------------------------------------ */

inline m_del() {
  mem[0] = 0; mem[1] = 0; mem[NC - 1] = 0;
  m_headp = 0; m_head = 0; m_at = 0; m_sl = 0; m_kind = 0; m_ttl = NOEXP
}

/* touch(left): PEXPIRE q, m (only keys that exist) */
inline touch(left) {
  if :: qlen > 0 -> q_ttl = left + GRACE :: else -> skip fi;
  if :: M_EXISTS -> m_ttl = left + GRACE :: else -> skip fi
}

/* pop(): the front of q: s_id (NONE if q is empty: m goes), s_res live */
inline pop() {
  if
  :: qlen == 0 -> s_id = NONE; m_del()
  :: else ->
     s_id = q[0];
     s_j = 0;
     do
     :: s_j + 1 < qlen -> q[s_j] = q[s_j + 1]; s_j++
     :: else -> break
     od;
     q[qlen - 1] = 0;
     qlen--;
     s_j = 0;
     if :: qlen == 0 -> q_ttl = NOEXP :: else -> skip fi;
     /* HINCRBY m '#' 1: makes m (without '@' or an expiry) if it was lost */
     if :: m_headp -> m_head++ :: else -> m_headp = 1; m_head = 1 fi;
     s_res = mem[s_id];
     mem[s_id] = 0;
     gw[s_id] = 0
  fi
}

/* place(r): s_pos = its place in q, or -1 */
inline place(r) {
  if
  :: mem[r] ->
     s_pos = tk[r] - (m_headp -> m_head : 0);
     if :: s_pos < 0 || s_pos >= qlen -> s_pos = -1 :: else -> skip fi
  :: else -> s_pos = -1
  fi
}

/* RPUSH r, and its member; FIFO ghost: who is ahead of it */
inline push(r) {
  s_left = (m_headp -> m_head : 0);
  q[qlen] = r;
  qlen++;
  s_pos = qlen - 1;
  if
  :: qlen > 1 && m_headp -> mem[r] = 1; tk[r] = s_left + s_pos
  :: else ->
     mem[r] = 1; tk[r] = s_left + s_pos; m_headp = 1; m_head = s_left;
     if :: m_at == 0 -> m_at = 1 :: else -> m_at = 1 fi
  fi;
  ahead[r] = 0;
  s_j = 0;
  do
  :: s_j < NC ->
     if :: gw[s_j] -> ahead[r] = ahead[r] | (1 << s_j) :: else -> skip fi;
     ahead[s_j] = ahead[s_j] & ~(1 << r);
     s_j++
  :: else -> break
  od;
  s_j = 0;
  gw[r] = 1
}

/* fence: next_fence(last, now_us); now_us is above every fence issued
 * before (the server clock does not go back, and a grant takes more than a
 * microsecond: docs/DESIGN.md section 7) */
inline next_fence(lastp, last) {
  s_fence = gmaxf + 1;
  if :: lastp && last + 1 > s_fence -> s_fence = last + 1 :: else -> skip fi
}

#ifdef MUTEX

/* holder(now): s_hid_p, s_id=h_id */
#define HOLDER (h_ex && h_left > 0)

inline set_holder(r, ttl, f) {
  h_ex = 1; h_id = r; h_f = f; h_left = ttl
}

/* take_free */
inline take_free(r) {
  m_del();
  nobody_waits();
  next_fence(0, 0);
  set_holder(r, L[r], s_fence);
  grant_checks(r, s_fence, L[r])
}

/* tell_next(holder, deadline) */
inline tell_next(hold, dd) {
  do
  :: qlen == 0 -> m_del(); break
  :: else ->
     if
     :: CLIENT(q[0]) == CLIENT(hold) -> break
     :: else -> skip
     fi;
     if
     :: mem[q[0]] ->
        reaches(q[0], N_N, 0, dd);
        if :: s_res -> break :: else -> skip fi
     :: else -> skip
     fi;
     pop()
  od
}

/* grant_next(last, quiet): s_g the new holder or NONE */
inline grant_next(lastp, last, quiet) {
  s_g = NONE;
  do
  :: pop();
     if
     :: s_id == NONE -> break
     :: else -> skip
     fi;
     if
     :: s_res ->
        next_fence(lastp, last);
        if
        :: s_id == quiet -> s_res = 1
        :: else -> reaches(s_id, N_G, s_fence, L[s_id])
        fi;
        if
        :: s_res ->
           set_holder(s_id, L[s_id], s_fence);
           grant_checks(s_id, s_fence, L[s_id]);
           touch(L[s_id]);
           s_g = s_id;
           tell_next(s_g, L[s_g]);
           break
        :: else -> skip
        fi
     :: else -> skip
     fi
  od
}

/* S_ENQ: lua/enqueue.lua */
inline enqueue(r, retry) {
  if
  :: HOLDER && h_id == r -> /* S_ENQ_HELD */
     rk[r] = R_GRANT; rf[r] = h_f; rd[r] = h_left
  :: else ->
     if
     :: !HOLDER && qlen == 0 -> /* S_ENQ_FREE */
        take_free(r);
        rk[r] = R_GRANT; rf[r] = s_fence; rd[r] = L[r]
     :: else ->
        if :: retry && m_headp -> settle_start() :: else -> skip fi;
        place(r);
        if
        :: s_pos < 0 -> /* S_ENQ_PUSH */
           s_mine = (qlen > 0 && m_headp);
           push(r);
           /* q or m just made: their expiry lasts the holder's lease */
           if :: !s_mine && HOLDER -> touch(h_left) :: else -> skip fi
        :: else -> skip
        fi;
        if
        :: HOLDER -> /* S_ENQ_QUEUED */
           rk[r] = R_QUEUED; rd[r] = h_left
        :: else -> /* S_ENQ_GRANT_NEXT */
           grant_next(0, 0, r);
           if
           :: s_g == r -> rk[r] = R_GRANT; rf[r] = s_fence; rd[r] = L[r]
           :: else -> rk[r] = R_QUEUED; rd[r] = (s_g != NONE -> L[s_g] : 0)
           fi
        fi
     fi
  fi
}

/* S_REL: lua/release.lua */
inline release(r) {
  if
  :: HOLDER && h_id == r -> /* S_REL_HOLDER */
     glease[r] = 0;
     s_last = h_f;
     grant_next(1, s_last, NONE);
     if :: s_g == NONE -> h_ex = 0; h_left = 0; h_id = 0; h_f = 0 :: else -> skip fi;
     rk[r] = R_REL
  :: else ->
     s_hid_p = HOLDER;
     if
     :: mem[r] -> /* S_REL_CANCEL */
        mem[r] = 0; gw[r] = 0;
        if
        :: s_hid_p && qlen > 0 && q[0] == r -> /* S_REL_CANCEL_FRONT */
           pop(); tell_next(h_id, h_left)
        :: else -> skip
        fi
     :: else -> skip
     fi;
     if
     :: !s_hid_p -> grant_next(0, 0, NONE) /* S_REL_HANDON */
     :: else -> skip
     fi;
     rk[r] = R_REL
  fi
}

/* S_REAP: lua/reap.lua (also the reconcile's owned check: inspect.lua) */
inline reap(r) {
  if
  :: !HOLDER && qlen > 0 -> grant_next(0, 0, NONE) /* S_REAP_GRANT */
  :: else -> skip
  fi;
  rk[r] = R_REAP;
  rd[r] = (HOLDER -> h_left : -1);
  if
  :: HOLDER && h_id == r -> ra[r] = 2
  :: else -> place(r); ra[r] = (s_pos >= 0 -> 1 : 0)
  fi
}

/* S_EXT: lua/extend.lua */
inline extend(r) {
  if
  :: HOLDER && h_id == r -> /* S_EXT_OK */
     h_left = L[r]; glease[r] = L[r]; touch(L[r]);
     rk[r] = R_EXT; ra[r] = 1; rd[r] = L[r]
  :: else -> rk[r] = R_EXT; ra[r] = 0 /* S_EXT_NOT */
  fi
}

/* S_TRY: lua/try.lua */
inline try(r) {
  if
  :: HOLDER && h_id == r -> rk[r] = R_GRANT; rf[r] = h_f; rd[r] = h_left /* S_TRY_HELD */
  :: else ->
     s_g = NONE;
     if
     :: !HOLDER && qlen > 0 -> grant_next(0, 0, NONE) /* S_TRY_GRANT_NEXT */
     :: else -> skip
     fi;
     if
     :: HOLDER || qlen > 0 -> rk[r] = R_BUSY /* S_TRY_BUSY */
     :: else -> take_free(r); rk[r] = R_GRANT; rf[r] = s_fence; rd[r] = L[r] /* S_TRY_FREE */
     fi
  fi
}

/* S_OWN: lua/inspect.lua, read-only: is r the holder */
inline owned(r) {
  rk[r] = R_OWN; ra[r] = (HOLDER && h_id == r)
}

/* S_EVICT: lua/evict.lua, an operator's forced release of whoever holds */
inline evict() {
  if
  :: HOLDER ->
     s_i = h_id;
     glease[s_i] = 0; forced[s_i] = 1;
     s_last = h_f;
     h_ex = 0; h_left = 0; h_id = 0; h_f = 0;
     publish(s_i, N_L, 0, 0);
     grant_next(1, s_last, NONE)
  :: else -> skip /* S_EVICT_NOBODY */
  fi
}

#else /* pool */

#define H_EXISTS (h_kind || h_usedp || h_lastp || hr[0] || hr[1] || hrx2)
#if NC > 2
#define hrx2 hr[2]
#define dx2 d[2]
#else
#define hrx2 0
#define dx2 0
#endif
#define D_EXISTS (d[0] || d[1] || dx2)

/* load_state() */
inline load_state() {
  s_used = (h_usedp -> h_used : 0);
  s_lastp = h_lastp;
  s_last = h_last;
  s_freed = 0;
#ifndef DEFECT1
  /* restore_deadlines: holders of h that D does not list get h's expiry */
  s_i = 0; s_j = 0;
  do
  :: s_i < NC -> s_j = s_j + hr[s_i]; s_i++
  :: else -> break
  od;
  s_i = 0; s_pos = 0;
  do
  :: s_i < NC -> s_pos = s_pos + d[s_i]; s_i++
  :: else -> break
  od;
  if
  :: s_j > s_pos ->
     s_left = (h_ttl == NOEXP -> 1 : (h_ttl > 1 -> h_ttl : 1));
     s_i = 0;
     do
     :: s_i < NC ->
        if
        :: hr[s_i] && !d[s_i] ->
           d[s_i] = 1; dl[s_i] = s_left;
           if :: glease[s_i] < s_left -> glease[s_i] = s_left :: else -> skip fi
        :: else -> skip
        fi;
        s_i++
     :: else -> break
     od;
     if :: D_EXISTS -> d_ttl = s_left :: else -> skip fi
  :: else -> skip
  fi;
  s_i = 0; s_j = 0; s_pos = 0; s_left = 0;
#endif
  /* leases that ended leave */
  s_i = 0;
  do
  :: s_i < NC ->
     if
     :: d[s_i] && dl[s_i] == 0 ->
        if
        :: hr[s_i] -> hr[s_i] = 0; hf[s_i] = 0; s_freed = s_freed + K[s_i]; s_used = s_used - K[s_i]
        :: else -> skip
        fi;
        d[s_i] = 0;
        s_dirty = 1; s_moved = 1
     :: else -> skip
     fi;
     s_i++
  :: else -> break
  od;
  s_i = 0;
  if :: !D_EXISTS -> d_ttl = NOEXP :: else -> skip fi;
  if :: !H_EXISTS -> h_ttl = NOEXP :: else -> skip fi
}

/* deadlines(): s_first, s_lastd (-1: none) */
inline deadlines() {
  s_first = -1; s_lastd = -1; s_i = 0;
  do
  :: s_i < NC ->
     if
     :: d[s_i] ->
        if :: s_first < 0 || dl[s_i] < s_first -> s_first = dl[s_i] :: else -> skip fi;
        if :: dl[s_i] > s_lastd -> s_lastd = dl[s_i] :: else -> skip fi
     :: else -> skip
     fi;
     s_i++
  :: else -> break
  od;
  s_i = 0
}

/* grant_reply(): the grant of a holder, its deadline from D or h's PTTL */
inline grant_reply(r) {
  rk[r] = R_GRANT; rf[r] = hf[r];
  if
  :: d[r] -> rd[r] = dl[r]
  :: else -> rd[r] = (h_ttl == NOEXP -> 1 : (h_ttl > 1 -> h_ttl : 1))
  fi;
  /* the lease Redis now promises r */
  if :: glease[r] < rd[r] -> glease[r] = rd[r] :: else -> skip fi;
  assert(PERMITS_LIVE <= CAPACITY)
}

inline add_holder(r) {
  next_fence(s_lastp, s_last);
  hr[r] = 1; hf[r] = s_fence;
  d[r] = 1; dl[r] = L[r];
  s_used = s_used + K[r]; s_last = s_fence; s_lastp = 1;
  s_dirty = 1; s_moved = 1;
  grant_checks(r, s_fence, L[r])
}

inline drop_holder(r) {
  hr[r] = 0; hf[r] = 0; d[r] = 0; dl[r] = 0;
  s_used = s_used - K[r]; s_dirty = 1; s_moved = 1;
  if :: !D_EXISTS -> d_ttl = NOEXP :: else -> skip fi
}

/* grant_waiters(quiet, tell) */
inline grant_waiters(quiet, tell) {
  s_tell = tell;
  do
  :: qlen == 0 -> m_del(); break
  :: else ->
     s_g = q[0];
     if
     :: !mem[s_g] -> pop()
     :: else ->
        if
        :: s_used + K[s_g] > CAP ->
           if
           :: !s_tell || s_g == quiet -> break
           :: else ->
              deadlines();
              if :: s_first < 0 -> s_first = 0 :: else -> skip fi;
              reaches(s_g, N_N, 0, s_first);
              if :: s_res -> break :: else -> skip fi;
              pop()
           fi
        :: else ->
           pop();
           next_fence(s_lastp, s_last);
           if
           :: s_g == quiet -> s_res = 1
           :: else -> reaches(s_g, N_G, s_fence, L[s_g])
           fi;
           if
           :: s_res ->
              add_holder(s_g);
              s_tell = 1;
              if :: s_g == quiet -> s_granted = 1 :: else -> skip fi
           :: else -> skip
           fi
        fi
     fi
  od;
  s_g = 0
}

inline write_meta() {
  h_kind = 1; h_usedp = 1; h_used = s_used; h_lastp = 1; h_last = (s_lastp -> s_last : 0)
}

/* finish(): write the counters back, set the expiries */
inline finish() {
  deadlines();
  if
  :: s_lastd < 0 && s_used > 0 -> /* S_FIN_DLOST: D lost while leases run */
     write_meta();
     touch((h_ttl == NOEXP -> 0 : h_ttl))
  :: s_lastd < 0 && s_used <= 0 ->
     d_ttl = NOEXP;
     if
     :: qlen == 0 -> /* S_FIN_IDLE */
        h_kind = 0; h_usedp = 0; h_used = 0; h_lastp = 0; h_last = 0;
        hr[0] = 0; hr[1] = 0; hr[NC - 1] = 0; h_ttl = NOEXP; m_del()
     :: else -> /* S_FIN_WAITERS */
        write_meta(); h_used = 0; h_ttl = GRACE; touch(0)
     fi
  :: else -> /* S_FIN_HOLDERS */
     write_meta();
     h_ttl = s_lastd; d_ttl = s_lastd;
     touch(s_lastd)
  fi
}

/* S_SENQ: lua/pool_enqueue.lua */
inline pool_enqueue(r, retry) {
  load_state();
  if
  :: hr[r] -> /* S_SENQ_HELD: ended leases free their permits first */
     if :: s_dirty && !DEFECT_USED -> grant_waiters(NONE, 1); finish() :: else -> skip fi;
     grant_reply(r)
  :: else ->
     if
     :: qlen == 0 && s_used + K[r] <= CAP -> /* S_SENQ_FREE */
        m_del();
        nobody_waits();
        add_holder(r);
        finish();
        rk[r] = R_GRANT; rf[r] = s_fence; rd[r] = L[r]
     :: else ->
        if :: retry && m_headp -> settle_start() :: else -> skip fi;
        place(r);
        if
        :: s_pos < 0 -> /* S_SENQ_PUSH */
           s_mine = (qlen > 0 && m_headp);
           push(r);
           if :: !s_mine -> m_kind = 1; s_dirty = 1 :: else -> skip fi
        :: else -> skip
        fi;
        grant_waiters(r, s_freed > 0); /* S_SENQ_GRANT */
        if :: s_dirty -> finish() :: else -> skip fi;
        if
        :: s_granted -> rk[r] = R_GRANT; rf[r] = gfence[r]; rd[r] = L[r]
        :: else -> deadlines(); rk[r] = R_QUEUED; rd[r] = (s_first >= 0 -> s_first : 0)
        fi
     fi
  fi
}

/* S_SREL: lua/pool_release.lua */
inline pool_release(r) {
  load_state();
  if
  :: hr[r] -> glease[r] = 0; drop_holder(r) /* S_SREL_HOLDER */
  :: else ->
     if
     :: mem[r] -> /* S_SREL_CANCEL */
        mem[r] = 0; gw[r] = 0;
        if
        :: qlen > 0 && q[0] == r -> pop(); s_dirty = 1 /* S_SREL_CANCEL_FRONT */
        :: else -> skip
        fi
     :: else -> /* S_SREL_NEITHER: ZREM D id */
        if :: d[r] -> d[r] = 0; dl[r] = 0 :: else -> skip fi;
        if :: !D_EXISTS -> d_ttl = NOEXP :: else -> skip fi
     fi
  fi;
  if
  :: s_dirty -> grant_waiters(NONE, 1); finish()
  :: else -> skip
  fi;
  rk[r] = R_REL
}

/* S_SREAP: lua/pool_reap.lua (also the reconcile's owned check) */
inline pool_reap(r) {
  load_state();
  if
  :: s_dirty || qlen > 0 -> grant_waiters(NONE, s_dirty)
  :: else -> skip
  fi;
  if :: s_dirty -> finish() :: else -> skip fi;
  deadlines();
  rk[r] = R_REAP;
  rd[r] = s_first;
  if
  :: hr[r] -> ra[r] = 2
  :: else -> place(r); ra[r] = (s_pos >= 0 -> 1 : 0)
  fi
}

/* S_SEXT: lua/pool_extend.lua */
inline pool_extend(r) {
  load_state();
  if
  :: !hr[r] -> /* S_SEXT_NOT */
     if :: s_dirty -> grant_waiters(NONE, 1); finish() :: else -> skip fi;
     rk[r] = R_EXT; ra[r] = 0
  :: else -> /* S_SEXT_OK */
     d[r] = 1; dl[r] = L[r]; glease[r] = L[r];
     grant_waiters(NONE, s_dirty);
     finish();
     rk[r] = R_EXT; ra[r] = 1; rd[r] = L[r]
  fi
}

/* S_STRY: lua/pool_try.lua */
inline pool_try(r) {
  load_state();
  if
  :: hr[r] -> /* S_STRY_HELD: ended leases free their permits first */
     if :: s_dirty && !DEFECT_USED -> grant_waiters(NONE, 1); finish() :: else -> skip fi;
     grant_reply(r)
  :: else ->
     if :: s_dirty -> grant_waiters(NONE, 1) :: else -> skip fi;
     if
     :: qlen > 0 || s_used + K[r] > CAP -> /* S_STRY_BUSY */
        if :: s_dirty -> finish() :: else -> skip fi;
        rk[r] = R_BUSY
     :: else -> /* S_STRY_FREE */
        m_del();
        nobody_waits();
        add_holder(r);
        finish();
        rk[r] = R_GRANT; rf[r] = s_fence; rd[r] = L[r]
     fi
  fi
}

/* S_PROC: lua/proclaim.lua */
inline proclaim(r) {
  load_state();
  if
  :: !hr[r] -> /* S_PROC_NOT */
     if :: s_dirty -> grant_waiters(NONE, 1); finish() :: else -> skip fi;
     rk[r] = R_PROC; ra[r] = 0
  :: else -> /* S_PROC_OK: the record's label changes, fence stays */
     s_dirty = 1; s_moved = 1;
     finish();
     rk[r] = R_PROC; ra[r] = 1
  fi
}

#endif

/* Fences only need their order: renumber the ones stored anywhere to
 * 1, 2, ... (so long runs do not grow them). */
inline fmap(x) {
  if :: x == s_i -> x = s_j :: else -> skip fi
}
#define FUSED(v) (gfence[0] == v || gfence[1] == v || gfence[NC - 1] == v || rf[0] == v || rf[1] == v || \
  rf[NC - 1] == v || nb[0].nf == v || nb[1].nf == v || nb[2].nf == v || nb[3].nf == v || \
  nb[NC * NB - 2].nf == v || nb[NC * NB - 1].nf == v || HFUSED(v) || v == gmaxf)
#ifdef MUTEX
#define HFUSED(v) (h_f == v)
#else
#define HFUSED(v) (hf[0] == v || hf[1] == v || hf[NC - 1] == v || h_last == v)
#endif
inline compress_fences() {
  s_i = 1; s_j = 1;
  do
  :: s_i <= gmaxf ->
     if
     :: FUSED(s_i) ->
        if
        :: s_i != s_j ->
           fmap(gfence[0]); fmap(gfence[1]); fmap(gfence[NC - 1]);
           fmap(rf[0]); fmap(rf[1]); fmap(rf[NC - 1]);
           fmap(nb[0].nf); fmap(nb[1].nf); fmap(nb[2].nf); fmap(nb[3].nf);
           fmap(nb[NC * NB - 2].nf); fmap(nb[NC * NB - 1].nf);
#ifdef MUTEX
           fmap(h_f);
#else
           fmap(hf[0]); fmap(hf[1]); fmap(hf[NC - 1]); fmap(h_last);
#endif
           if :: gmaxf == s_i -> gmaxf = s_j; s_i = s_j :: else -> skip fi
        :: else -> skip
        fi;
        s_j++
     :: else -> skip
     fi;
     s_i++
  :: else -> break
  od;
  s_i = 0; s_j = 0
}

/* Reset the scratch and keep m's '#' at 0 (tickets relative to it). */
inline script_end() {
  if
  :: m_headp && m_head != 0 ->
     s_i = 0;
     do
     :: s_i < NC -> if :: mem[s_i] -> tk[s_i] = tk[s_i] - m_head :: else -> tk[s_i] = 0 fi; s_i++
     :: else -> break
     od;
     m_head = 0
  :: else -> skip
  fi;
  s_i = 0;
  do
  :: s_i < NC -> if :: !mem[s_i] -> tk[s_i] = 0 :: else -> skip fi; s_i++
  :: else -> break
  od;
  if :: !M_EXISTS -> m_ttl = NOEXP; m_sl = 0 :: else -> skip fi;
  if :: m_at != 2 -> m_sl = 0 :: else -> skip fi;
  if :: qlen == 0 -> q_ttl = NOEXP :: else -> skip fi;
#ifndef MUTEX
  /* '+' is the permits of the records in h (see model/README.md) */
  assert(!h_usedp || h_used == (hr[0] -> K[0] : 0) + (hr[1] -> K[1] : 0) + (hrx2 -> K[NC - 1] : 0));
  if :: !H_EXISTS -> h_ttl = NOEXP :: else -> skip fi;
  if :: !D_EXISTS -> d_ttl = NOEXP :: else -> skip fi;
  s_i = 0;
  do
  :: s_i < NC -> if :: !d[s_i] -> dl[s_i] = 0 :: else -> skip fi; if :: !hr[s_i] -> hf[s_i] = 0 :: else -> skip fi; s_i++
  :: else -> break
  od;
#endif
  compress_fences();
  nb_sort(0); nb_sort(NB);
#if NC > 2
  nb_sort(2 * NB);
#endif
  s_id = 0; s_g = 0; s_i = 0; s_j = 0; s_quiet = 0; s_last = 0; s_fence = 0; s_res = 0;
  s_mine = 0; s_hid_p = 0; s_tell = 0; s_dirty = 0; s_moved = 0; s_granted = 0;
  s_stl_p = 0; s_stl = 0; s_lastp = 0; s_left = 0; s_pos = 0; s_used = 0;
  s_first = 0; s_lastd = 0; s_freed = 0
}

/* ---- the client: src/lock.c ------------------------------------------------ */

inline send(c, what) {
  cmd[c] = what
}

inline clear_reply(c) {
  rk[c] = R_NONE; ra[c] = 0; rf[c] = 0; rd[c] = 0
}

/* watchdog_arm: only ever earlier */
inline wd_arm(c, ticks) {
  if
  :: st[c] == QUEUED && (!wd_on[c] || ticks < wd[c]) -> wd_on[c] = 1; wd[c] = ticks
  :: else -> skip
  fi
}

/* recheck(): ask Redis again, idempotently */
inline recheck(c) {
  if
  :: st[c] == QUEUED && (cmd[c] == C_ENQ || cmd[c] == C_ENQR) -> recheck_due[c] = 1
  :: st[c] == QUEUED && cmd[c] == C_NONE -> send(c, C_ENQR)
  :: st[c] == QUEUED && cmd[c] != C_NONE && cmd[c] != C_ENQ && cmd[c] != C_ENQR -> recheck_due[c] = 1
  :: else -> skip
  fi
}

/* granted() / report_grant() */
inline granted(c, f, dd) {
  if
  :: st[c] == QUEUED && dd > 0 ->
     assert(f <= gfence[c]); /* a fence issued to it (a late notice may carry an older one) */
     st[c] = HELD; lend[c] = dd; wd_on[c] = 0; wd[c] = 0;
     assert(BELIEF_OK(c))
  :: st[c] == QUEUED && dd <= 0 -> recheck(c)
  :: else -> skip /* a cancel crossed the grant: its release hands it on */
  fi
}

/* A reply arrives (on_enqueue, on_release, on_reap, on_extend, on_owned,
 * on_try). */
inline on_reply(c) {
  if
  :: rk[c] == R_GRANT && !trying[c] ->
     if
     :: st[c] == RELG -> send(c, C_REL)
     :: else -> granted(c, rf[c], rd[c])
     fi
  :: rk[c] == R_GRANT && trying[c] ->
     trying[c] = 0;
     if
     :: st[c] == QUEUED && rd[c] > 0 -> granted(c, rf[c], rd[c])
     :: else -> st[c] = RELG; send(c, C_REL)
     fi
  :: rk[c] == R_BUSY -> trying[c] = 0; st[c] = DONE
  :: rk[c] == R_QUEUED ->
     if
     :: st[c] == RELG -> send(c, C_REL)
     :: else -> wd_arm(c, rd[c])
     fi
  :: rk[c] == R_REL -> st[c] = DONE
  :: rk[c] == R_REAP ->
     if
     :: st[c] == QUEUED && ra[c] == 0 -> send(c, C_ENQR)
     :: st[c] == QUEUED && ra[c] != 0 && rd[c] >= 0 -> wd_arm(c, rd[c])
     :: else -> skip
     fi
  :: rk[c] == R_EXT ->
     if
     :: st[c] == HELD && ra[c] == 1 -> lend[c] = rd[c]
     :: st[c] == HELD && ra[c] == 0 -> st[c] = LOST
     :: else -> skip
     fi
  :: rk[c] == R_PROC ->
     if :: st[c] == HELD && ra[c] == 0 -> st[c] = LOST :: else -> skip fi
  :: rk[c] == R_OWN ->
     if :: st[c] == HELD && !ra[c] -> st[c] = LOST :: else -> skip fi
  fi;
  clear_reply(c);
  if
  :: recheck_due[c] && cmd[c] == C_NONE -> recheck_due[c] = 0; recheck(c)
  :: else -> skip
  fi;
  if
  :: st[c] == RELG && cmd[c] == C_NONE -> send(c, C_REL)
  :: else -> skip
  fi
}

/* A notice arrives (rt__lock_on_notice). */
inline on_notice(c, i) {
  if
  :: nb[i].nk == N_N -> wd_arm(c, nb[i].nd)
  :: nb[i].nk == N_L -> if :: st[c] == HELD -> st[c] = LOST :: else -> skip fi
  :: nb[i].nk == N_G -> granted(c, nb[i].nf, nb[i].nd)
  fi;
  nb[i].nk = 0; nb[i].nf = 0; nb[i].nd = 0;
  nb_sort(c * NB)
}

/* Both connections back: the lost command's fate and the reconcile. */
inline reconnect(c) {
  up[c] = 1;
  cmd_dead[c] = 0;
  if
  :: trying[c] -> /* on_try without a reply: release in case it was granted */
     trying[c] = 0; st[c] = RELG; cmd[c] = C_REL
  :: else -> skip
  fi;
  if
  :: cmd[c] == C_ENQ || cmd[c] == C_ENQR ->
     cmd[c] = C_NONE;
     if
     :: st[c] == QUEUED -> send(c, C_ENQR)
     :: st[c] == RELG -> send(c, C_REL)
     :: else -> skip
     fi
  :: cmd[c] == C_REL -> skip /* sent again (retried) */
  :: cmd[c] == C_REAP -> cmd[c] = C_NONE; wd_arm(c, 1)
  :: cmd[c] == C_EXT || cmd[c] == C_OWN || cmd[c] == C_PROC -> cmd[c] = C_NONE
  :: cmd[c] == C_NONE -> skip
  fi;
  /* rt__lock_reconcile */
  if
  :: cmd[c] == C_NONE && st[c] == QUEUED -> send(c, C_ENQR)
  :: cmd[c] == C_NONE && st[c] == HELD -> send(c, C_OWN)
  :: cmd[c] == C_NONE && st[c] == RELG -> send(c, C_REL)
  :: else -> skip
  fi
}

/* After client c's command ran in Redis: a dead command's reply goes
 * nowhere. */
inline ran(c) {
  script_end();
  cmd[c] = C_NONE;
  if
  :: cmd_dead[c] || st[c] == CRASHED -> cmd_dead[c] = 0; rk[c] = R_NONE; ra[c] = 0; rf[c] = 0; rd[c] = 0
  :: else -> on_reply(c)
  fi
}

#ifdef MUTEX
#define ENQUEUE(c, retry) enqueue(c, retry)
#define RELEASE(c) release(c)
#define REAP(c) reap(c)
#define OWNED(c) owned(c)
#define EXTEND(c) extend(c)
#define TRY(c) try(c)
#else
#define ENQUEUE(c, retry) pool_enqueue(c, retry)
#define RELEASE(c) pool_release(c)
#define REAP(c) pool_reap(c)
#define OWNED(c) pool_reap(c); rk[c] = R_OWN; ra[c] = (ra[c] == 2)
#define EXTEND(c) pool_extend(c)
#define TRY(c) pool_try(c)
#endif

proctype client(byte c) {
  /* start: rt_wait (or rt_try_lock) */
  atomic {
    if
    :: tries > 0 -> tries--; trying[c] = 1; send(c, C_TRY)
    :: true -> send(c, C_ENQ)
    fi;
    st[c] = QUEUED
  }
  do
  /* Redis runs the command (possibly late: after the connection dropped)
   * and, on a live connection, its reply is handled (a reply that waits in
   * the socket is the same as a client that is slow to read it: the lease
   * it counts only gets shorter) */
  :: d_step { cmd[c] == C_ENQ && rk[c] == R_NONE -> ENQUEUE(c, 0); ran(c) }
  :: d_step { cmd[c] == C_ENQR && rk[c] == R_NONE -> ENQUEUE(c, 1); ran(c) }
  :: d_step { cmd[c] == C_REL && rk[c] == R_NONE -> RELEASE(c); ran(c) }
  :: d_step { cmd[c] == C_REAP && rk[c] == R_NONE -> REAP(c); ran(c) }
  :: d_step { cmd[c] == C_OWN && rk[c] == R_NONE -> OWNED(c); ran(c) }
  :: d_step { cmd[c] == C_EXT && rk[c] == R_NONE -> EXTEND(c); ran(c) }
  :: d_step { cmd[c] == C_TRY && rk[c] == R_NONE -> TRY(c); ran(c) }
#if !defined(MUTEX) && CAP == 1
  :: d_step { cmd[c] == C_PROC && rk[c] == R_NONE -> proclaim(c); ran(c) }
#endif
  /* a notice arrives, in any order */
  :: d_step { nb[c * NB].nk != 0 && st[c] != CRASHED -> on_notice(c, c * NB) }
  :: d_step { nb[c * NB + 1].nk != 0 && st[c] != CRASHED -> on_notice(c, c * NB + 1) }
  /* the watchdog fires: reap with our wait */
  :: d_step { st[c] == QUEUED && wd_on[c] && wd[c] == 0 && cmd[c] == C_NONE && up[c] && !trying[c] ->
       wd_on[c] = 0; send(c, C_REAP) }
  /* rt_cancel or the wait's deadline */
  :: d_step { st[c] == QUEUED && cancels > 0 && !trying[c] ->
       cancels--; st[c] = RELG; wd_on[c] = 0; wd[c] = 0;
       if :: cmd[c] == C_NONE && up[c] -> send(c, C_REL) :: else -> skip fi }
  /* rt_signal: release a held or lost lock */
  :: d_step { (st[c] == HELD || st[c] == LOST) && cmd[c] == C_NONE && up[c] ->
       st[c] = RELG; send(c, C_REL) }
  /* rt_extend */
  :: d_step { st[c] == HELD && extends > 0 && cmd[c] == C_NONE && up[c] && lend[c] > 0 ->
       extends--; send(c, C_EXT) }
#if !defined(MUTEX) && CAP == 1
  /* rt_proclaim (an election): a reply 0 turns the lock LOST, as extend's */
  :: d_step { st[c] == HELD && extends > 0 && cmd[c] == C_NONE && up[c] && lend[c] > 0 ->
       extends--; send(c, C_PROC) }
#endif
  /* the local end of the lease: LOST */
  :: d_step { st[c] == HELD && lend[c] == 0 -> st[c] = LOST }
  /* the connections drop: the reply and notices in flight are lost; the
   * command may still run until the reconnect kills the old connection */
  :: d_step { drops > 0 && up[c] && st[c] != DONE && st[c] != CRASHED ->
       drops--; up[c] = 0; clear_reply(c);
       if :: cmd[c] != C_NONE -> cmd_dead[c] = 1 :: else -> skip fi;
       nb[c * NB].nk = 0; nb[c * NB].nf = 0; nb[c * NB].nd = 0;
       nb[c * NB + 1].nk = 0; nb[c * NB + 1].nf = 0; nb[c * NB + 1].nd = 0 }
  :: d_step { !up[c] && st[c] != CRASHED -> reconnect(c) }
  /* the process dies */
  :: d_step { crashes > 0 && st[c] != DONE && st[c] != CRASHED ->
       crashes--; st[c] = CRASHED; up[c] = 0; clear_reply(c); recheck_due[c] = 0;
       wd_on[c] = 0; wd[c] = 0; lend[c] = 0; trying[c] = 0;
       nb[c * NB].nk = 0; nb[c * NB].nf = 0; nb[c * NB].nd = 0;
       nb[c * NB + 1].nk = 0; nb[c * NB + 1].nf = 0; nb[c * NB + 1].nd = 0 }
  /* a dead process's command that Redis never read */
  :: d_step { st[c] == CRASHED && cmd[c] != C_NONE -> cmd[c] = C_NONE; cmd_dead[c] = 0 }
  :: (st[c] == DONE || st[c] == CRASHED) && cmd[c] == C_NONE -> break
  od
}

/* ---- the environment: the clock, key loss, notice faults, an operator ---- */

inline dec(x) {
  if :: x > 0 -> x-- :: else -> skip fi
}
/* a key's expiry counts down; NOEXP stays */
inline kdec(x) {
  if :: x > 0 && x != NOEXP -> x-- :: else -> skip fi
}
/* a key's expiry: 0 left now, so it goes at this tick */
#define EXPIRES(ttl) (ttl != NOEXP && ttl == 0)

#define ANY_TIMER_C(c) (lend[c] > 0 || (wd_on[c] && wd[c] > 0) || rd[c] > 0 || glease[c] > 0 || \
  nb[c * NB].nd > 0 || nb[c * NB + 1].nd > 0)
#if NC > 2
#define ANY_TIMER_CS (ANY_TIMER_C(0) || ANY_TIMER_C(1) || ANY_TIMER_C(2))
#else
#define ANY_TIMER_CS (ANY_TIMER_C(0) || ANY_TIMER_C(1))
#endif
#ifdef MUTEX
#define ANY_TIMER_K (q_ttl != NOEXP || m_ttl != NOEXP || h_ex || m_sl > 0)
#else
#define ANY_TIMER_K (q_ttl != NOEXP || m_ttl != NOEXP || h_ttl != NOEXP || d_ttl != NOEXP || \
  m_sl > 0 || dl[0] > 0 || dl[1] > 0 || dl[NC - 1] > 0)
#endif

inline lose_q() {
  do
  :: qlen > 0 -> q[qlen - 1] = 0; qlen-- 
  :: else -> break
  od;
  q_ttl = NOEXP;
  gw[0] = 0; gw[1] = 0; gw[NC - 1] = 0
}
inline lose_m() {
  m_del(); tk[0] = 0; tk[1] = 0; tk[NC - 1] = 0;
  gw[0] = 0; gw[1] = 0; gw[NC - 1] = 0
}
#ifdef MUTEX
inline lose_h() {
  if :: h_ex -> forced[h_id] = 1; glease[h_id] = 0 :: else -> skip fi;
  h_ex = 0; h_id = 0; h_f = 0; h_left = 0
}
#else
inline lose_h() {
  s_i = 0;
  do
  :: s_i < NC -> if :: hr[s_i] && glease[s_i] > 0 -> forced[s_i] = 1; glease[s_i] = 0 :: else -> skip fi;
                 hr[s_i] = 0; hf[s_i] = 0; s_i++
  :: else -> break
  od;
  s_i = 0;
  h_kind = 0; h_usedp = 0; h_used = 0; h_lastp = 0; h_last = 0; h_ttl = NOEXP
}
inline lose_d() {
  d[0] = 0; d[1] = 0; d[NC - 1] = 0; dl[0] = 0; dl[1] = 0; dl[NC - 1] = 0; d_ttl = NOEXP
}
#endif

inline tick() {
  /* keys whose time is up go */
  if :: EXPIRES(q_ttl) -> lose_q() :: else -> kdec(q_ttl) fi;
  if :: EXPIRES(m_ttl) -> lose_m() :: else -> kdec(m_ttl) fi;
  dec(m_sl);
#ifdef MUTEX
  if
  :: h_ex && h_left == 0 -> h_ex = 0; h_id = 0; h_f = 0
  :: else -> dec(h_left)
  fi;
#else
  if
  :: EXPIRES(h_ttl) ->
     /* h's own expiry: every record goes (a running lease in it would be
      * a violation, found by the exclusion check at the next grant) */
     h_kind = 0; h_usedp = 0; h_used = 0; h_lastp = 0; h_last = 0; h_ttl = NOEXP;
     hr[0] = 0; hr[1] = 0; hr[NC - 1] = 0; hf[0] = 0; hf[1] = 0; hf[NC - 1] = 0
  :: else -> kdec(h_ttl)
  fi;
  if :: EXPIRES(d_ttl) -> lose_d() :: else -> kdec(d_ttl) fi;
  dec(dl[0]); dec(dl[1]);
#if NC > 2
  dec(dl[2]);
#endif
#endif
  s_i = 0;
  do
  :: s_i < NC ->
     dec(lend[s_i]); dec(glease[s_i]);
     if :: wd_on[s_i] -> dec(wd[s_i]) :: else -> skip fi;
     if :: rk[s_i] == R_GRANT || rk[s_i] == R_QUEUED || rk[s_i] == R_EXT || rk[s_i] == R_REAP -> 
          if :: rd[s_i] > 0 -> rd[s_i]-- :: else -> skip fi
        :: else -> skip fi;
     dec(nb[s_i * NB].nd); dec(nb[s_i * NB + 1].nd); nb_sort(s_i * NB);
     s_i++
  :: else -> break
  od;
  s_i = 0
}

active proctype env() {
end:
  do
  :: d_step { ANY_TIMER_K || ANY_TIMER_CS -> tick() }
  /* one key lost (any key, at any moment), or all of them */
  :: d_step { keyloss > 0 && qlen > 0 -> keyloss--; lose_q() }
  :: d_step { keyloss > 0 && M_EXISTS -> keyloss--; lose_m() }
#ifdef MUTEX
  :: d_step { keyloss > 0 && h_ex -> keyloss--; lose_h() }
  :: d_step { keyloss > 0 && (h_ex || qlen > 0 || M_EXISTS) -> keyloss--; lose_q(); lose_m(); lose_h() }
  :: d_step { evicts > 0 && HOLDER -> evicts--; evict(); script_end() }
#else
  :: d_step { keyloss > 0 && H_EXISTS -> keyloss--; lose_h() }
  :: d_step { keyloss > 0 && D_EXISTS -> keyloss--; lose_d() }
  :: d_step { keyloss > 0 && (H_EXISTS || D_EXISTS || qlen > 0 || M_EXISTS) ->
       keyloss--; lose_q(); lose_m(); lose_h(); lose_d() }
#endif
  /* a notice lost, or delivered twice */
  :: d_step { notefaults > 0 && nb[0].nk != 0 -> notefaults--; nb[0].nk = 0; nb[0].nf = 0; nb[0].nd = 0; nb_sort(0) }
  :: d_step { notefaults > 0 && nb[0].nk != 0 && nb[1].nk == 0 ->
       notefaults--; nb[1].nk = nb[0].nk; nb[1].nf = nb[0].nf; nb[1].nd = nb[0].nd; nb_sort(0) }
  :: d_step { notefaults > 0 && nb[NB].nk != 0 -> notefaults--; nb[NB].nk = 0; nb[NB].nf = 0; nb[NB].nd = 0; nb_sort(NB) }
  :: d_step { notefaults > 0 && nb[NB].nk != 0 && nb[NB + 1].nk == 0 ->
       notefaults--; nb[NB + 1].nk = nb[NB].nk; nb[NB + 1].nf = nb[NB].nf; nb[NB + 1].nd = nb[NB].nd }
#if NC > 2
  :: d_step { notefaults > 0 && nb[2 * NB].nk != 0 -> notefaults--; nb[2 * NB].nk = 0; nb[2 * NB].nf = 0; nb[2 * NB].nd = 0; nb_sort(2 * NB) }
  :: d_step { notefaults > 0 && nb[2 * NB].nk != 0 && nb[2 * NB + 1].nk == 0 ->
       notefaults--; nb[2 * NB + 1].nk = nb[2 * NB].nk; nb[2 * NB + 1].nf = nb[2 * NB].nf; nb[2 * NB + 1].nd = nb[2 * NB].nd }
#endif
  od
}

/* Checked in every state: exclusion over the leases Redis promised, and
 * every client that counts itself the holder has one. */
active proctype monitor() {
end:
  atomic { !(PERMITS_LIVE <= CAPACITY && BELIEFS) -> assert(PERMITS_LIVE <= CAPACITY && BELIEFS) }
}

init {
  atomic {
    K[0] = K0; K[1] = K1; L[0] = L0; L[1] = L1;
#if NC > 2
    K[2] = K2; L[2] = L2;
#endif
#ifdef RW
    K[0] = CAP; K[1] = 1;
#if NC > 2
    K[2] = 1;
#endif
#endif
#ifdef MUTEX
    K[0] = 1; K[1] = 1;
#if NC > 2
    K[2] = 1;
#endif
#endif
    up[0] = 1; up[1] = 1;
#if NC > 2
    up[2] = 1;
#endif
    run client(0);
    run client(1);
#if NC > 2
    run client(2);
#endif
  }
}
