-- redturn evict: an operator's forced release. The build prepends
-- lua/lib/*.lua (the library's prelude: q, h, m, chan, clock, holder,
-- notify, grant_next), so the next waiter is granted exactly as a release
-- does.
--   ARGV[2]  the request id that must still be the holder ('' = whoever is)
-- Returns {0} when nobody holds the lock, {-1, holder} when ARGV[2] is not
-- the holder (nothing changed), or {1, evicted, next holder or '', its
-- fence or 0}.
local want = ARGV[2]
local now, now_us = clock()
local hid, fence = holder(now)
redis.call('LLEN', q) -- before any write: a key of the wrong type changes nothing
redis.call('HLEN', m)
if not hid then
  return {0}
end
if want ~= '' and hid ~= want then
  return {-1, hid}
end
redis.call('DEL', h)
notify(hid, 'l', '')
local nxt, next_fence = grant_next(now, now_us, fence, nil)
if not nxt then
  return {1, hid, '', 0}
end
return {1, hid, nxt, next_fence}
