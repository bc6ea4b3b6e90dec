-- Push the lease of holder ARGV[2] to ARGV[3] ms from now (fence, grant
-- time and label stay).
-- Returns {1, lease ms, deadline, now}, or {0, now} when ARGV[2] does not
-- hold an unexpired lease.
local id, ttl = ARGV[2], lease_arg(ARGV[3])
local now = clock()
local hid, fence, _, granted, label = holder(now)
if hid ~= id then
  return {0, now}
end
set_holder(id, ttl, fence, now + ttl, granted, label)
touch(ttl)
return {1, ttl, now + ttl, now}
