-- Take the lock only if nobody holds it and nobody waits for it; never
-- queue.  ARGV[2] request id, ARGV[3] lease ms, ARGV[4] its label ('' or
-- absent: none).
-- Returns {GRANTED, fence, lease ms, deadline, now} or {0, holder's lease
-- ms left (0: none), now, MORE or 0}.
local id, ttl = ARGV[2], lease_arg(ARGV[3])
local now, now_us = clock()
local hid, fence, deadline = holder(now)
local len = redis.call('LLEN', q)
if hid == id then -- a retry of a try that was granted
  return {GRANTED, fence, deadline - now, deadline, now}
end
local more, _
if not hid and len > 0 then
  -- A lease ended with waiters behind it: they come first.
  hid, _, deadline, _, more = grant_next(now, now_us, nil, nil)
  len = hid and 1 or redis.call('LLEN', q)
end
if hid or len > 0 or held_off(now) > 0 then -- busy, or held off
  return {0, hid and deadline - now or held_off(now), now, more or 0}
end
fence, deadline = take_free(id, ttl, now, now_us, ARGV[4])
return {GRANTED, fence, ttl, deadline, now}
