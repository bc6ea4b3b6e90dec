-- Set the lease of holder ARGV[3] of a multi-holder resource to ARGV[4] ms
-- from now (its fence, permits and label stay).
-- Returns {1, lease ms, deadline, now}, or {0, now} when ARGV[3] does not
-- hold an unexpired lease.
local id, ttl = ARGV[3], tonumber(ARGV[4])
local st = load_state()
if redis.call('HEXISTS', h, id) == 0 then
  if st.dirty then
    grant_waiters(st, nil, true)
    finish(st)
  end
  return {0, st.now}
end
redis.call('ZADD', D, int(st.now + ttl), id)
grant_waiters(st, nil, st.dirty)
finish(st)
return {1, ttl, st.now + ttl, st.now}
