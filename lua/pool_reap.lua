-- The watchdog's call on a pool resource: holders whose lease
-- ended leave (by the Redis clock, never early) and the waiters their
-- permits let in are granted. ARGV[2] is the caller's oldest waiting
-- request there ('' if none), so the client learns whether Redis still has
-- it, as in reap.lua; ARGV[3] the kind.
-- Returns {ms until the first lease ends (-1: nobody holds), state of
-- ARGV[2] (0 gone, 1 waiting, 2 holder), its position, now, MORE or 0}.
local id = ARGV[2]
local st = load_state(ARGV[3])
if st.dirty or redis.call('LLEN', q) > 0 then
  grant_waiters(st, nil, st.dirty)
end
if st.dirty then
  finish(st)
end
local first = deadlines()
local left = first and first - st.now or -1
if id == '' then
  return {left, 0, 0, st.now, st.more or 0}
end
if redis.call('HEXISTS', h, id) == 1 then
  return {left, 2, 0, st.now, st.more or 0}
end
local pos = waiting_at(id)
if not pos then
  return {left, 0, 0, st.now, st.more or 0}
end
return {left, 1, pos + 1, st.now, st.more or 0}
