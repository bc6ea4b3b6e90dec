-- The watchdog's call: evict the head if its lease is over by the Redis
-- clock, granting the next request.  Never evicts early.
-- Returns {1, lease ms left to the head now} or {0} when the queue is empty.
local head, _, left = reap(now_ms(), nil)
if not head then
  return {0}
end
return {1, left}
