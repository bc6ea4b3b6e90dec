-- A snapshot of a pool resource; read-only. ARGV[2] how many holders and
-- waiters to list, as inspect.lua; ARGV[3] the kind ('' for whatever it
-- is).
-- Returns {now, kind or '' (unused), permits (capacity; 0 unused),
-- permits in use, last fence, live waiters,
--   {holder id, ...}, {its permits, ...}, {its fence, ...},
--   {its deadline, ...}, {its label, ...},
--   {waiter id, ...}, {its permits, ...}, {its label, ...}}.
-- Holders are listed by deadline, waiters in queue order; leases that
-- ended but were not reaped yet are not listed nor counted.
local want = tonumber(ARGV[2])
local now = clock()
local ok, v = pcall(redis.call, 'HMGET', h, '*', 'f')
if not ok then
  if redis.call('TYPE', h)['ok'] == 'string' then
    return redis.error_reply('WRONGKIND the resource is a mutex')
  end
  return redis.error_reply(type(v) == 'table' and v.err or tostring(v))
end
local kind = v[1] or redis.call('HGET', m, '*') or ''
if ARGV[3] ~= '' and kind ~= '' and kind ~= ARGV[3] then
  wrong_kind(kind, ARGV[3])
end
redis.call('LLEN', q)
local ids = redis.call('ZRANGEBYSCORE', D, '(' .. int(now), '+inf',
                       'WITHSCORES', 'LIMIT', 0, want)
local hid, hk, hf, hd, hl = {}, {}, {}, {}, {}
local used = 0
for i = 1, #ids, 2 do
  local rec = redis.call('HGET', h, ids[i])
  if rec then
    local f, _, k, label = held(rec)
    local j = #hid + 1
    hid[j], hk[j], hf[j], hd[j], hl[j] = ids[i], k, f, tonumber(ids[i + 1]),
                                         label
  end
end
-- Holders of h that a lost D no longer lists: listed (after the others)
-- with the deadline the next call that writes gives them back, h's own
-- expiry (restore_deadlines in lua/lib/pool.lua), so a read between
-- the loss and that call never shows a holder gone whose lease runs.
local orphans = 0
if redis.call('HLEN', h) - redis.call('HEXISTS', h, '*')
     - redis.call('HEXISTS', h, '+') - redis.call('HEXISTS', h, 'f')
   > redis.call('ZCARD', D) then
  local bound = now + math.max(redis.call('PTTL', h), 1)
  for _, f in ipairs(redis.call('HKEYS', h)) do
    if f ~= '*' and f ~= '+' and f ~= 'f' and
       not redis.call('ZSCORE', D, f) then
      orphans = orphans + 1
      if #hid < want then
        local fe, _, k, label = held(redis.call('HGET', h, f))
        local j = #hid + 1
        hid[j], hk[j], hf[j], hd[j], hl[j] = f, k, fe, bound, label
      end
    end
  end
end
-- Permits in use by live leases: all of them when every holder is listed.
local live = redis.call('ZCOUNT', D, '(' .. int(now), '+inf') + orphans
for i = 1, #hk do
  used = used + hk[i]
end
if live > #hid or orphans > 0 then
  used = tonumber(redis.call('HGET', h, '+')) or used
end
local n = redis.call('HLEN', m)
n = n - redis.call('HEXISTS', m, '#') - redis.call('HEXISTS', m, '@')
      - redis.call('HEXISTS', m, '*')
local wid, wk, wl = {}, {}, {}
local start, chunks = 0, 0
while #wid < want and chunks < SKIP_MAX do
  local entries = redis.call('LRANGE', q, start,
                             start + math.min(want - #wid, 1000) - 1)
  if #entries == 0 then
    break
  end
  local vals = redis.call('HMGET', m, unpack(entries))
  for i = 1, #entries do
    if vals[i] then
      local _, _, k, label = waiter(vals[i])
      local j = #wid + 1
      wid[j], wk[j], wl[j] = entries[i], k, label
    end
  end
  start, chunks = start + #entries, chunks + 1
end
local cap = kind ~= '' and capacity(kind) or 0
return {now, kind, cap, used, tonumber(v[2]) or 0, n, hid, hk, hf, hd, hl,
        wid, wk, wl}
