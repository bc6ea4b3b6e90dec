-- Set the value of the leader of an election: ARGV[2] the leader's
-- request id, ARGV[3] the new value (kept as its label), only while its
-- lease runs; the observers are told. ARGV[4] the kind ("e").
-- Returns {1, fence, now}, or {0, now} when ARGV[2] is not the leader.
local id, value = ARGV[2], ARGV[3]
local st = load_state(ARGV[4])
local rec = redis.call('HGET', h, id)
if not rec or st.kind ~= 'e' then
  if st.dirty then
    grant_waiters(st, nil, true)
    finish(st)
  end
  return {0, st.now}
end
local fence, granted, k = held(rec)
redis.call('HSET', h, id, int(fence) .. ':' .. int(granted) .. ':' .. int(k)
           .. labeled(value))
st.leader = {id, fence, tonumber(redis.call('ZSCORE', D, id)), value}
st.dirty, st.moved = true, true
finish(st)
return {1, fence, st.now}
