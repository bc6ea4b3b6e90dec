-- Set the value of the leader of an election (kind "e"): ARGV[3] the
-- leader's request id, ARGV[4] the new value (kept as its label), only
-- while its lease runs; the observers are told.
-- Returns {1, fence, now}, or {0, now} when ARGV[3] is not the leader.
local id, value = ARGV[3], ARGV[4]
local st = load_state()
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
