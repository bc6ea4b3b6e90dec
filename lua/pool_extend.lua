-- Set the lease of holder ARGV[2] of a pool resource to ARGV[3] ms
-- from now (its fence, permits and label stay), as extend.lua; ARGV[4] the
-- kind.
-- Returns {1, lease ms, deadline, now}, or {0, now} when ARGV[2] does not
-- hold an unexpired lease.
local id, ttl = ARGV[2], lease_arg(ARGV[3])
local st = load_state(ARGV[4])
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
