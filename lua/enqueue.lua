-- Join the queue.  ARGV[2] request id, ARGV[3] lease ms, ARGV[4] "1" when
-- this is a retry (a reply was lost, or the client checks a wait it fears
-- vanished): the request is then found wherever it is, and queued again
-- only if Redis lost it. Every enqueue is idempotent by request id.
-- Returns {GRANTED, fence, lease ms, deadline, now} when the request holds
-- the lock, else {QUEUED, position (entries ahead, holder included),
-- holder's lease ms left (0: none), now, MORE or 0}.
local id, ttl = ARGV[2], tonumber(ARGV[3])
local now, now_us = clock()
local hid, fence, deadline = holder(now)
local mv = redis.call('HMGET', m, id, '#')
local len = redis.call('LLEN', q)
if hid == id then
  return {GRANTED, fence, deadline - now, deadline, now}
end
local pos = place(mv[1], mv[2], len)
if not pos then
  if mv[1] then
    redis.call('HDEL', m, id) -- a member Redis lost from q: queue again
  end
  if not hid and len == 0 then
    fence, deadline = hold(id, ttl, now, now_us, nil)
    return {GRANTED, fence, ttl, deadline, now}
  end
  local head = tonumber(mv[2]) or 0
  len = redis.call('RPUSH', q, id)
  redis.call('HSET', m, id, int(head + len - 1) .. ':' .. ARGV[3])
  pos = len - 1
end
if hid then
  touch(deadline - now)
  return {QUEUED, pos + 1, deadline - now, now, 0}
end
-- Nobody holds the lock (its lease ended): the first live waiter gets it,
-- maybe this one, which then learns it from this reply.
local g, more
g, fence, deadline, ttl, more = grant_next(now, now_us, nil, id)
if g == id then
  return {GRANTED, fence, ttl, deadline, now}
end
local left = g and deadline - now or 0
mv = redis.call('HMGET', m, id, '#')
pos = place(mv[1], mv[2], redis.call('LLEN', q))
return {QUEUED, (pos or 0) + (g and 1 or 0), left, now, more or 0}
