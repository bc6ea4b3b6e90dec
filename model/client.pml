/* The client side of the model (included by redturn.pml after
 * scripts.pml): src/lock.c and src/notice.c as one process per client. */

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
     :: st[c] == QUEUED && ra[c] == REAP_GONE -> send(c, C_ENQR)
     :: st[c] == QUEUED && ra[c] != REAP_GONE && rd[c] >= 0 -> wd_arm(c, rd[c])
     :: else -> skip
     fi
  :: rk[c] == R_EXT ->
     if
     :: st[c] == HELD && ra[c] == EXTEND_EXTENDED -> lend[c] = rd[c]
     :: st[c] == HELD && ra[c] == EXTEND_NOT_HELD -> st[c] = LOST
     :: else -> skip
     fi
  :: rk[c] == R_PROC ->
     if :: st[c] == HELD && ra[c] == PROCLAIM_NOT_LEADER -> st[c] = LOST :: else -> skip fi
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
#define OWNED(c) pool_reap(c); rk[c] = R_OWN; ra[c] = (ra[c] == REAP_HOLDER)
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
