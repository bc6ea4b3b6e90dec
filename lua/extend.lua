-- Push the lease of holder ARGV[2] to ARGV[3] ms from now.
-- Returns {1, lease ms, deadline} or {0} when ARGV[2] does not hold an unexpired lease.
local entry, ttl = ARGV[2], tonumber(ARGV[3])
if redis.call('LINDEX', q, 0) ~= entry then
  return {0}
end
local now = now_ms()
local deadline = tonumber(redis.call('HGET', h, 'd'))
if not deadline or now >= deadline then
  return {0}
end
redis.call('HSET', h, 'd', int(now + ttl))
redis.call('PEXPIRE', q, int(ttl + GRACE_MS))
return {1, ttl, now + ttl}
