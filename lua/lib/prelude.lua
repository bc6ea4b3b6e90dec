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

-- Make entry the holder from now on; returns its fence and lease.
local function grant(entry, now)
  local ttl = tonumber(string.match(entry, ':(%d+)$'))
  local fence = redis.call('HINCRBY', h, 'f', 1)
  redis.call('HSET', h, 'd', now + ttl, 'g', now)
  return fence, ttl
end

-- Publish "<kind>:<seq><rest>" to the client that queued entry:
-- kind 'g' (granted) or 'l' (lost its lease).
local function notify(entry, kind, rest)
  local client, seq = string.match(entry, '^(%x+):(%d+):')
  redis.call('PUBLISH', chan .. client, kind .. ':' .. seq .. rest)
end

-- Grant whoever is head now and tell its client, unless the head is
-- `quiet` (the caller answers that request in its own reply).
-- Returns the head (or false), its fence and lease.
local function grant_head(now, quiet)
  local head = redis.call('LINDEX', q, 0)
  if not head then return false end
  local fence, ttl = grant(head, now)
  if head ~= quiet then
    notify(head, 'g', ':' .. fence .. ':' .. ttl)
  end
  return head, fence, ttl
end

-- Evict the head if, by the Redis clock, its lease is over, and grant the
-- next. Returns the head after that (false if none), its fence and the
-- lease it has left.
local function reap(now, quiet)
  local head = redis.call('LINDEX', q, 0)
  if not head then return false end
  local st = redis.call('HMGET', h, 'd', 'f')
  local deadline = tonumber(st[1])
  if deadline and now < deadline then
    return head, tonumber(st[2]), deadline - now
  end
  redis.call('LPOP', q)
  notify(head, 'l', '')
  return grant_head(now, quiet)
end
