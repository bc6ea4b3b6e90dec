-- Take permits of a pool resource only if they are free and
-- nobody waits; never queue. ARGV[2] request id, ARGV[3] lease ms, ARGV[4]
-- label ('' for none), as try.lua; then ARGV[5] the kind, ARGV[6] permits
-- (0: all).
-- Returns {GRANTED, fence, lease ms, deadline, now} or {0, ms until the
-- first lease ends (0: none), now, MORE or 0}.
local id, ttl, label = ARGV[2], lease_arg(ARGV[3]), ARGV[4]
local st = load_state(ARGV[5], ARGV[6])
local k = st.k
local rec = redis.call('HGET', h, id)
if rec then
  -- A retry of a try that was granted: leases found ended free their
  -- permits first (see pool_enqueue.lua).
  if st.dirty then
    grant_waiters(st, nil, true)
    finish(st)
  end
  return grant_reply(st, id, rec)
end
if st.dirty then
  -- Leases ended: the waiters they let in come first.
  grant_waiters(st, nil, true)
end
if redis.call('LLEN', q) > 0 or st.used + k > st.cap or
   held_off(st.now) > 0 then -- busy, or held off
  if st.dirty then
    finish(st)
  end
  local first = deadlines()
  return {0, first and first - st.now or held_off(st.now), st.now,
          st.more or 0}
end
redis.call('DEL', m)
local fence, deadline = add_holder(st, id, k, ttl, label)
finish(st)
return {GRANTED, fence, ttl, deadline, st.now}
