-- An operator's forced release (rt_evict): the holder loses the lock
-- whatever its lease, its client hears of it ('l' notice), and the next
-- waiter is granted exactly as a release does, with the next fence.
--   ARGV[2]  the request id that must still be the holder ('' = whoever is)
-- Returns {NOBODY, now, 0} when nobody holds the lock, {REFUSED, now, 0,
-- holder} when ARGV[2] is not the holder (nothing changed), or {EVICTED,
-- now, more, evicted, next holder or '', its fence or 0}.
local NOBODY, EVICTED, REFUSED = 0, 1, 2
local want = ARGV[2]
local now, now_us = clock()
local hid, fence = holder(now)
redis.call('LLEN', q) -- before any write: a key of the wrong type changes nothing
redis.call('HLEN', m)
if not hid then
  return {NOBODY, now, 0}
end
if want ~= '' and hid ~= want then
  return {REFUSED, now, 0, hid}
end
redis.call('DEL', h)
notify(hid, 'l', '')
local nxt, next_fence, _, _, more = grant_next(now, now_us, fence, nil)
return {EVICTED, now, more or 0, hid, nxt or '', next_fence or 0}
