-- Push the lease of holder ARGV[2] to ARGV[3] ms from now.
-- Returns {1, lease ms, deadline, now}, or {0, now} when ARGV[2] does not
-- hold an unexpired lease.
local id, ttl = ARGV[2], tonumber(ARGV[3])
local now = clock()
local hid, fence, _, granted = holder(now)
if hid ~= id then
  return {0, now}
end
redis.call('SET', h, int(fence) .. ':' .. int(now + ttl) .. ':' ..
           int(granted) .. ':' .. id, 'PX', ARGV[3])
touch(ttl)
return {1, ttl, now + ttl, now}
