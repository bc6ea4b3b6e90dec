-- redturn evict: an operator's forced release. The build prepends
-- lua/lib/*.lua (the library's prelude: q, h, chan, now_ms, state, notify,
-- grant_head), so the next waiter is granted exactly as a release does.
--   ARGV[2]  the request id that must still be the head ('' = whoever is)
-- Returns {0} when the queue is empty, {-1, head} when ARGV[2] is not the
-- head (nothing changed), or {1, evicted, next head or '', its fence or 0}.
local want = ARGV[2]
local st = state() -- before any write: a key of the wrong type changes nothing
local head = redis.call('LINDEX', q, 0)
if not head then
  return {0}
end
if want ~= '' and head ~= want then
  return {-1, head}
end
redis.call('LPOP', q)
notify(head, 'l', '')
local nxt, fence = grant_head(now_ms(), nil, tonumber(st[2]) or 0)
if not nxt then
  return {1, head, '', 0}
end
return {1, head, nxt, fence}
