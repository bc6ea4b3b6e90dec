-- A snapshot of the resource: ARGV[2] is how many waiters to list.
-- Returns {server ms, queue length, fence, deadline, grant time,
--          {head, waiter 1, ...}}; deadline and grant time are 0 when unset.
local now = now_ms()
local st = redis.call('HMGET', h, 'f', 'd', 'g')
return {now, redis.call('LLEN', q), tonumber(st[1]) or 0,
        tonumber(st[2]) or 0, tonumber(st[3]) or 0,
        redis.call('LRANGE', q, 0, tonumber(ARGV[2]))}
