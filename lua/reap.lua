-- The watchdog's call: if the holder's lease ended (its key expired by
-- the Redis clock), grant the next waiter. Never evicts early. ARGV[2] is
-- the caller's oldest waiting request on this resource ('' if none), so
-- the client learns whether Redis still has it.
-- Returns {holder's lease ms left (-1: nobody holds), state of ARGV[2]
-- (0 gone, 1 waiting, 2 holder), its position, now, MORE or 0}.
local id = ARGV[2]
local now, now_us = clock()
local hid, _, deadline = holder(now)
local more
if not hid and redis.call('LLEN', q) > 0 then
  hid, _, deadline, _, more = grant_next(now, now_us, nil, nil)
end
local left = hid and deadline - now or -1
if id == '' then
  return {left, 0, 0, now, more or 0}
end
if hid == id then
  return {left, 2, 0, now, more or 0}
end
local mv = redis.call('HMGET', m, id, '#')
local pos = place(mv[1], mv[2], redis.call('LLEN', q))
if not pos then
  return {left, 0, 0, now, more or 0}
end
return {left, 1, pos + (hid and 1 or 0), now, more or 0}
