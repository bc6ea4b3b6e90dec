/* The Redis side of the model (included by redturn.pml, which declares
 * the keys, the clients' state and the ghosts these steps use): notices,
 * the prelude, and every script of lua/ as one atomic step. */

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

/* fence: next_fence(last, now_us); now_us, read once per call, is above
 * every fence issued before the call (the server clock does not go back,
 * and a grant takes more than a microsecond: docs/DESIGN.md section 7) */
inline next_fence(lastp, last) {
  if :: !s_nowp -> s_nowus = gmaxf + 1; s_nowp = 1 :: else -> skip fi;
  s_fence = s_nowus;
  if :: lastp && last + 1 > s_fence -> s_fence = last + 1 :: else -> skip fi
}

/* A grant notice reached nobody (the waiter is skipped): it went out all
 * the same (a replica's subscribers hear it), so its fence counts as
 * issued, and the next grant of this call must be above it (the scripts'
 * last = fence). */
inline skipped_fence() {
  gmaxf = s_fence;
  if :: !DEFECT_SKIPF -> s_last = s_fence; s_lastp = 1 :: else -> skip fi
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

/* grant_next(last, quiet), last in s_lastp/s_last: s_g the new holder or
 * NONE */
inline grant_next(quiet) {
  s_g = NONE;
  do
  :: pop();
     if
     :: s_id == NONE -> break
     :: else -> skip
     fi;
     if
     :: s_res ->
        next_fence(s_lastp, s_last);
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
        :: else -> skipped_fence()
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
           grant_next(r);
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
     s_last = h_f; s_lastp = 1;
     grant_next(NONE);
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
     :: !s_hid_p -> grant_next(NONE) /* S_REL_HANDON */
     :: else -> skip
     fi;
     rk[r] = R_REL
  fi
}

/* S_REAP: lua/reap.lua (also the reconcile's owned check: inspect.lua) */
inline reap(r) {
  if
  :: !HOLDER && qlen > 0 -> grant_next(NONE) /* S_REAP_GRANT */
  :: else -> skip
  fi;
  rk[r] = R_REAP;
  rd[r] = (HOLDER -> h_left : -1);
  if
  :: HOLDER && h_id == r -> ra[r] = REAP_HOLDER
  :: else -> place(r); ra[r] = (s_pos >= 0 -> REAP_WAITING : REAP_GONE)
  fi
}

/* S_EXT: lua/extend.lua */
inline extend(r) {
  if
  :: HOLDER && h_id == r -> /* S_EXT_OK */
     h_left = L[r]; glease[r] = L[r]; touch(L[r]);
     rk[r] = R_EXT; ra[r] = EXTEND_EXTENDED; rd[r] = L[r]
  :: else -> rk[r] = R_EXT; ra[r] = EXTEND_NOT_HELD /* S_EXT_NOT */
  fi
}

/* S_TRY: lua/try.lua */
inline try(r) {
  if
  :: HOLDER && h_id == r -> rk[r] = R_GRANT; rf[r] = h_f; rd[r] = h_left /* S_TRY_HELD */
  :: else ->
     s_g = NONE;
     if
     :: !HOLDER && qlen > 0 -> grant_next(NONE) /* S_TRY_GRANT_NEXT */
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
     s_last = h_f; s_lastp = 1;
     h_ex = 0; h_left = 0; h_id = 0; h_f = 0;
     publish(s_i, N_L, 0, 0);
     grant_next(NONE)
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
           :: else -> skipped_fence()
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
  :: hr[r] -> ra[r] = REAP_HOLDER
  :: else -> place(r); ra[r] = (s_pos >= 0 -> REAP_WAITING : REAP_GONE)
  fi
}

/* S_SEXT: lua/pool_extend.lua */
inline pool_extend(r) {
  load_state();
  if
  :: !hr[r] -> /* S_SEXT_NOT */
     if :: s_dirty -> grant_waiters(NONE, 1); finish() :: else -> skip fi;
     rk[r] = R_EXT; ra[r] = EXTEND_NOT_HELD
  :: else -> /* S_SEXT_OK */
     d[r] = 1; dl[r] = L[r]; glease[r] = L[r];
     grant_waiters(NONE, s_dirty);
     finish();
     rk[r] = R_EXT; ra[r] = EXTEND_EXTENDED; rd[r] = L[r]
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
     rk[r] = R_PROC; ra[r] = PROCLAIM_NOT_LEADER
  :: else -> /* S_PROC_OK: the record's label changes, fence stays */
     s_dirty = 1; s_moved = 1;
     finish();
     rk[r] = R_PROC; ra[r] = PROCLAIM_DONE
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
  s_first = 0; s_lastd = 0; s_freed = 0; s_nowus = 0; s_nowp = 0
}
