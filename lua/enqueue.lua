-- Join the queue.  ARGV[2] request id, ARGV[3] "1" when this is a retry
-- of an enqueue whose reply was lost (then an existing entry is reused, so
-- a retry never queues twice).
-- Returns {1, fence, lease ms, deadline} when granted at once, else
-- {0, position, lease ms left to the current holder}.
local entry = ARGV[2]
local now = now_ms()
local st = state()
if ARGV[3] == '1' then
  local pos = redis.call('LPOS', q, entry)
  if pos == 0 then
    local deadline = tonumber(st[1]) or now
    return {1, tonumber(st[2]) or 0, deadline - now, deadline}
  elseif pos then
    -- The reap may evict an expired holder and make this entry the head:
    -- granted quietly, so the answer is here.
    local head, fence, left = reap(now, entry, st)
    if head == entry then
      return {1, fence, left, now + left}
    end
    return {0, pos, left or 0}
  end
end
local n = redis.call('RPUSH', q, entry)
if n == 1 then
  local fence, ttl = grant(entry, now, st[2])
  return {1, fence, ttl, now + ttl}
end
local head, fence, left = reap(now, entry, st)
if head == entry then
  return {1, fence, left, now + left}
elseif head ~= true then -- the head was evicted: count again
  n = redis.call('LLEN', q)
end
return {0, n - 1, left}
