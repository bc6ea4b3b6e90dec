-- A snapshot of the resource: ARGV[2] is how many waiters to list.
-- Returns {server ms, live waiters, fence, deadline, grant time, holder id
-- or '', {waiter 1, ...}, holder's label or '', {label of waiter 1, ...}}
-- (a label is '' when its request has none); fence, deadline and grant
-- time are 0 without a holder. Canceled entries still in q are not listed (and at most
-- SKIP_MAX chunks of them are looked at).
local now = clock()
local hid, fence, deadline, granted, hlabel = holder(now)
redis.call('LLEN', q) -- every key is read, so a wrong type always shows
local n = redis.call('HLEN', m)
n = n - redis.call('HEXISTS', m, '#') - redis.call('HEXISTS', m, '@')
local want = tonumber(ARGV[2])
local listed, labels = {}, {}
local start, chunks = 0, 0
while #listed < want and chunks < SKIP_MAX do
  local ids = redis.call('LRANGE', q, start, start + math.min(want - #listed, 1000) - 1)
  if #ids == 0 then
    break
  end
  local live = redis.call('HMGET', m, unpack(ids))
  for i = 1, #ids do
    if live[i] then
      listed[#listed + 1] = ids[i]
      labels[#listed] = select(3, member(live[i]))
    end
  end
  start, chunks = start + #ids, chunks + 1
end
return {now, n, fence or 0, deadline or 0, granted or 0, hid or '', listed,
        hlabel or '', labels}
