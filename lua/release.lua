-- Release the lock held by ARGV[2] and grant the next waiter; or, if
-- ARGV[2] is still waiting, cancel it (O(1): it leaves m; its entry in q
-- is dropped when it reaches the front).
-- Returns {RELEASED, MORE or 0}, {CANCELED, MORE or 0} or {0, MORE or 0}
-- when ARGV[2] neither holds nor waits (its lease ended: lost).
local RELEASED, CANCELED = 1, 2
local id = ARGV[2]
local now, now_us = clock()
local hid, fence, deadline = holder(now)
local more
if hid == id then
  -- The next holder's record replaces this one; with none, it goes.
  local g, _, _, _, skipped = grant_next(now, now_us, fence, nil)
  if not g then
    redis.call('DEL', h)
  end
  return {RELEASED, skipped or 0}
end
local result = 0
if redis.call('HDEL', m, id) == 1 then
  result = CANCELED
  if hid and redis.call('LINDEX', q, 0) == id then
    -- It was next in line: the one behind it watches the holder now.
    pop()
    tell_next(hid, deadline, SKIP_MAX)
  end
end
if not hid then
  -- Nobody holds the lock (a lease ran out): hand it on now.
  more = select(5, grant_next(now, now_us, nil, nil))
end
return {result, more or 0}
