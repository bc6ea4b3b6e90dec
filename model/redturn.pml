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
 *   DEFECT_SKIPF          put the skipped fence back: a grant made in the
 *                         call that skipped a waiter reuses the fence of the
 *                         skipped waiter's published notice
 */

#ifndef DEFECT_USED
#define DEFECT_USED 0
#endif
#ifndef DEFECT_SKIPF
#define DEFECT_SKIPF 0
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
#define R_REAP 4 /* rd lease left (-1 nobody), ra mine (REAP_*) */
#define R_EXT 5 /* ra EXTEND_EXTENDED (rd lease) or EXTEND_NOT_HELD */
#define R_OWN 6 /* ra 1 still the holder */
#define R_BUSY 7 /* try: not granted */
#define R_PROC 8 /* proclaim: ra PROCLAIM_DONE or PROCLAIM_NOT_LEADER */
/* The scripts' codes that ra carries (protocol/constants.txt; the ctest
 * protocol compares these copies with it). */
#define REAP_GONE 0
#define REAP_WAITING 1
#define REAP_HOLDER 2
#define EXTEND_NOT_HELD 0
#define EXTEND_EXTENDED 1
#define PROCLAIM_NOT_LEADER 0
#define PROCLAIM_DONE 1

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
byte gmaxf;      /* the largest fence issued (granted, or published in a
                  * grant notice that reached nobody) */
byte gfence[NC]; /* the fence of r's latest grant */

/* ---- scratch of the running script (reset after each) --------------------- */
byte s_id, s_g, s_i, s_j, s_quiet, s_last, s_fence, s_res, s_mine, s_nowus;
bool s_hid_p, s_tell, s_dirty, s_moved, s_granted, s_stl_p, s_stl, s_lastp;
bool s_nowp;
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

/* The scripts (Redis's side) and the clients: files of their own. */
#include "scripts.pml"
#include "client.pml"

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
