-- Join the queue of a pool resource (lua/lib/pool.lua).
-- ARGV[2] request id, ARGV[3] lease ms, ARGV[4] "1" when a retry, ARGV[5]
-- label ('' for none; an election's candidate value), as enqueue.lua (and
-- as there idempotent by request id either way); then ARGV[6] the kind,
-- ARGV[7] permits (0: all).
-- Returns {GRANTED, fence, lease ms, deadline, now} when the request holds
-- its permits, else {QUEUED, position (1: next to be granted), ms until
-- the first lease in front ends (0: none), now, MORE or 0}.
local id, ttl, label = ARGV[2], lease_arg(ARGV[3]), ARGV[5]
-- Out of memory, a new request is refused before any write (load_state).
local st = load_state(ARGV[6], ARGV[7], RT_AGAIN and id)
local k = st.k
local rec = redis.call('HGET', h, id)
if rec then
  -- A retry of a request that holds. Leases load_state found ended free
  -- their permits, for the waiters first, as in any call; else '+' would
  -- keep counting them until h expires.
  if st.dirty then
    grant_waiters(st, nil, true)
    finish(st)
  end
  return grant_reply(st, id, rec)
end
local len = redis.call('LLEN', q)
if len == 0 and st.used + k <= st.cap and held_off(st.now) == 0 then
  -- Nobody waits and the permits are free: the uncontended grant.
  redis.call('DEL', m)
  local fence, deadline = add_holder(st, id, k, ttl, label)
  finish(st)
  return {GRANTED, fence, ttl, deadline, st.now}
end
local mv = redis.call('HMGET', m, id, '#')
local placed = place(mv[1], mv[2], len)
if ARGV[4] == '1' and mv[2] then
  settle_start(st.now) -- a client back after a reconnect: maybe on a new server
end
if not placed then
  local head = tonumber(mv[2]) or 0
  len = redis.call('RPUSH', q, id)
  local ticket = int(head + len - 1) .. ':' .. ARGV[3] .. ':' .. int(k)
                 .. labeled(label)
  if len > 1 and mv[2] then
    redis.call('HSET', m, id, ticket)
  else
    redis.call('HSET', m, id, ticket, '#', int(head), '@', settled_stamp(),
               KIND, st.kind)
    st.dirty = true -- Q and M need their expiry
  end
end
-- Leases that ended may have freed permits for the front (maybe this one).
grant_waiters(st, id, st.freed > 0)
if st.dirty then
  finish(st)
end
if st.granted then
  local g = st.granted
  return {GRANTED, g[1], g[3], g[2], st.now}
end
local first = deadlines()
return {QUEUED, (waiting_at(id) or 0) + 1,
        first and first - st.now or held_off(st.now),
        st.now, st.more or 0}
