-- Release the lock held by ARGV[2] and grant the next request, or, if
-- ARGV[2] is still waiting, take it out of the queue (cancel).
-- Returns {1} released, {3} released but its lease had already run out,
-- {2} removed while waiting, {0} not in the queue (lost: it was evicted).
local entry = ARGV[2]
local st = state()
local front = redis.call('LRANGE', q, 0, 1) -- the head and who is next
if front[1] ~= entry then
  return {redis.call('LREM', q, 1, entry) == 1 and 2 or 0}
end
redis.call('LPOP', q)
local now = now_ms()
local deadline = tonumber(st[1])
grant_head(now, nil, tonumber(st[2]) or 0, front[2] or false)
if deadline and now < deadline then
  return {1}
end
return {3}
