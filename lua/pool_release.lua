-- Release the permits held by ARGV[2] on a pool resource (ARGV[3] its
-- kind) and grant the waiters they let in; or, if ARGV[2] still waits,
-- cancel it
-- (it leaves M; its entry is dropped when it reaches the front, at once
-- if it is the front, which may let the ones behind it in).
-- Returns {RELEASED, MORE or 0}, {CANCELED, MORE or 0} or {0, MORE or 0}
-- when ARGV[2] neither holds nor waits (its lease ended: lost).
local RELEASED, CANCELED = 1, 2
local id = ARGV[2]
local st = load_state(ARGV[3])
local result = 0
local rec = redis.call('HGET', h, id)
if rec then
  drop_holder(st, id, rec)
  result = RELEASED
elseif redis.call('HDEL', m, id) == 1 then
  result = CANCELED
  if redis.call('LINDEX', q, 0) == id then
    pop()
    st.dirty = true
  end
else
  redis.call('ZREM', D, id) -- a holder whose record was lost
end
if st.dirty then
  grant_waiters(st, nil, true)
  finish(st)
end
return {result, st.more or 0}
