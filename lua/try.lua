-- Take the lock only if nobody holds it now (an expired holder is evicted
-- first); never queue.  ARGV[2] request id.
-- Returns {1, fence, lease ms, deadline} or {0, lease ms left to the holder}.
local entry = ARGV[2]
local now = now_ms()
local st = state()
local head, _, left = reap(now, nil, st)
if head then
  return {0, left}
end
redis.call('RPUSH', q, entry)
local fence, ttl = grant(entry, now, st[2])
return {1, fence, ttl, now + ttl}
