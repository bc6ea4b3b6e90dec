-- Join the queue.  ARGV[2] request id, ARGV[3] lease ms, ARGV[4] "1" when
-- this is a retry (a reply was lost, or the client checks a wait it fears
-- vanished): the request is then found wherever it is, and queued again
-- only if Redis lost it; ARGV[5] its label ('' or absent: none), kept in
-- its member value and, once it holds, in h. Every enqueue is idempotent
-- by request id.
-- Returns {GRANTED, fence, lease ms, deadline, now} when the request holds
-- the lock, else {QUEUED, position (entries ahead, holder included),
-- holder's lease ms left (0: none), now, MORE or 0}.
local id, ttl, label = ARGV[2], lease_arg(ARGV[3]), ARGV[5]
local now, now_us = clock()
local hid, fence, deadline = holder(now)
if hid == id then
  return {GRANTED, fence, deadline - now, deadline, now}
end
local len = redis.call('LLEN', q)
if not hid and len == 0 then
  -- A new request (nobody holds or waits), whether it takes the lock or
  -- waits out a failover hold: refused out of memory before held_off's
  -- first write (the era key).
  local no = refuse_to_add(RT_AGAIN)
  if no then
    return no
  end
end
if not hid and len == 0 and held_off(now) == 0 then
  -- Free, nobody waits: the uncontended case.
  fence, deadline = take_free(id, ttl, now, now_us, label)
  return {GRANTED, fence, ttl, deadline, now}
end
local mv = redis.call('HMGET', m, id, '#')
local pos = place(mv[1], mv[2], len)
if not pos then
  local no = refuse_to_add(RT_AGAIN)
  if no then
    return no
  end
end
if ARGV[4] == '1' and mv[2] then
  settle_start(now) -- a client back after a reconnect: maybe on a new server
end
if not pos then
  -- New, or a member Redis lost from q (its HSET below replaces it).
  local head = tonumber(mv[2]) or 0
  len = redis.call('RPUSH', q, id)
  pos = len - 1
  local ticket = int(head + pos) .. ':' .. ARGV[3] .. labeled(label)
  if len > 1 and mv[2] then
    redis.call('HSET', m, id, ticket)
  else
    -- q or m was just made (m always has '#'), without an expiry yet;
    -- once set, an expiry lasts the holder's lease (every grant and
    -- extend renews it), so later enqueues need not touch them.
    redis.call('HSET', m, id, ticket, '#', int(head), '@', settled_stamp())
    if hid then
      touch(deadline - now)
    end
  end
end
if hid then
  return {QUEUED, pos + 1, deadline - now, now, 0}
end
-- Nobody holds the lock (its lease ended): the first live waiter gets it,
-- maybe this one, which then learns it from this reply.
local g, more
g, fence, deadline, ttl, more = grant_next(now, now_us, nil, id)
if g == id then
  return {GRANTED, fence, ttl, deadline, now}
end
local left = g and deadline - now or held_off(now)
mv = redis.call('HMGET', m, id, '#')
pos = place(mv[1], mv[2], redis.call('LLEN', q))
return {QUEUED, (pos or 0) + (g and 1 or 0), left, now, more or 0}
