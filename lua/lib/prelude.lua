-- Prepended by the build to every script in lua/ (so the grant and reap
-- rules live in one place). Every script gets:
--   KEYS[1]  the resource's FIFO queue: a LIST of request ids
--            "<client id>:<seq>:<ttl ms>"; the head holds the lock.
--   KEYS[2]  the resource's state: a HASH with d (lease deadline, server ms),
--            g (grant time, server ms) and f (last fencing token).
--   ARGV[1]  the channel prefix; a client's channel is ARGV[1] .. client id.
-- Time is always the Redis server's clock, never a client's.
local q, h, chan = KEYS[1], KEYS[2], ARGV[1]

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- A queue whose holder's lease ran out this long ago disappears by itself
-- (key TTL), so abandoned queues need no client to clean them up.
local GRACE_MS = 10000

-- An entry is "<32 hex client id>:<seq>:<ttl>"; plain finds, no patterns.
local function seq_end(entry)
  return string.find(entry, ':', 34, true) - 1
end

local function ttl_str(entry)
  return string.sub(entry, seq_end(entry) + 2)
end

local function ttl_of(entry)
  return tonumber(ttl_str(entry))
end

-- Integers go to redis.call and into messages as strings formatted once:
-- Redis would format each Lua number with %.17g.
local function int(n)
  return string.format('%d', n)
end

-- Record that the head holds the lock from now for ttl ms with fence
-- (fence and deadline already formatted).
local function hold(now, ttl, fence, deadline)
  redis.call('HSET', h, 'd', deadline, 'g', int(now), 'f', fence)
  redis.call('PEXPIRE', q, int(ttl + GRACE_MS))
end

-- Make entry (the head, answered in the caller's reply) the holder; last
-- is the fence issued before.
local function grant(entry, now, last)
  local ttl = ttl_of(entry)
  local fence = (tonumber(last) or 0) + 1
  hold(now, ttl, int(fence), int(now + ttl))
  return fence, ttl
end

-- Publish "<kind>:<seq><rest>" to the client that queued entry: kind 'g'
-- (granted; rest is ":<fence>:<lease ms>:<deadline ms>") or 'l' (lost its
-- lease). Returns how many subscribers got it.
local function notify(entry, kind, rest)
  return redis.call('PUBLISH', chan .. string.sub(entry, 1, 32),
                    kind .. ':' .. string.sub(entry, 34, seq_end(entry)) .. rest)
end

-- Grant whoever is head now (last is the fence issued before; head, when
-- the caller already read it: false for none) and tell its client, unless
-- the head is `quiet` (the caller answers that request in its own reply).
-- A waiter whose client is no longer subscribed (its process died, so Redis
-- closed its connection) receives nothing: it is dropped and the next one
-- gets the lock (and the fence nobody saw).
-- Returns the head (or false), its fence and lease.
local function grant_head(now, quiet, last, head)
  local fence = last + 1
  local fence_s = int(fence)
  while true do
    if head == nil then
      head = redis.call('LINDEX', q, 0)
    end
    if not head then
      redis.call('HDEL', h, 'd', 'g') -- only the fence stays behind
      return false
    end
    local ttl_s = ttl_str(head)
    local ttl = tonumber(ttl_s)
    local deadline = int(now + ttl)
    if head == quiet or
       notify(head, 'g', ':' .. fence_s .. ':' .. ttl_s .. ':' .. deadline) > 0
    then
      hold(now, ttl, fence_s, deadline)
      return head, fence, ttl
    end
    redis.call('LPOP', q)
    head = nil
  end
end

-- The state hash's deadline and fence. Scripts read it before writing
-- anything, so a key of the wrong type fails the script with no change.
local function state()
  return redis.call('HMGET', h, 'd', 'f')
end

-- Evict the head if, by the Redis clock, its lease is over, and grant the
-- next. st is state() if the caller has it. Returns false if the queue is
-- empty; true and the lease left when the head keeps the lock; else the
-- new head, its fence and lease.
local function reap(now, quiet, st)
  st = st or state()
  local deadline = tonumber(st[1])
  if deadline and now < deadline then
    return true, nil, deadline - now
  end
  local head = redis.call('LPOP', q)
  if head then
    notify(head, 'l', '')
  end
  return grant_head(now, quiet, tonumber(st[2]) or 0)
end
