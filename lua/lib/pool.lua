-- Pool resources: semaphores, read-write locks and elections, on
-- keys of their own so that the mutex's scripts and their costs stay as
-- they are. Their scripts (lua/pool_*.lua, lua/proclaim.lua) get
--   KEYS[1]  Q: the waiters, a LIST of request ids, as q (so q above is Q)
--   KEYS[2]  h: the holders, a HASH (the mutex's h is a STRING: the same
--            key name makes one resource one kind at a time for free):
--            id -> "<fence>:<granted>:<permits>" or "...:<permits>:<label>",
--            '*' -> the kind, '+' -> permits in use, 'f' -> the last fence.
--            Its expiry is the latest holder deadline, so when every lease
--            ran out it goes by itself.
--   KEYS[3]  M: the live waiters, as m (so m above is M), id ->
--            "<ticket>:<ttl ms>:<permits>" or "...:<permits>:<label>",
--            '#' and '@' as in m, '*' -> the kind.
--   KEYS[4]  D: a ZSET, holder id -> deadline (server ms): whose lease
--            ended is one range query, however many hold.
--   ARGV     as the mutex counterpart of the script takes them (ARGV[1]
--            the channel prefix, ARGV[2] the request id, ...), then the
--            kind the caller asks for, then the permits if it asks for any
--            (each script passes its kind to load_state).
-- A holder's lease runs while its deadline is after now. Capacity: a
-- semaphore's N, 1 for an election, RW_ALL for a read-write lock (a reader
-- takes 1, a writer all). A request for 0 permits asks for all of them.
local D = KEYS[4]
local KIND, USED, LAST = '*', '+', 'f'
-- Fields of h that are no holder.
local META = 3
local RW_ALL = 1099511627776 -- 2^40: readers never run out
local SEM_MAX = 1000000000

-- The permits a kind has, or nil if the kind is not one.
local function capacity(kind)
  if kind == 'rw' then
    return RW_ALL
  elseif kind == 'e' then
    return 1
  end
  local n = tonumber(string.match(kind, '^s:([1-9]%d*)$'))
  if n and n <= SEM_MAX then
    return n
  end
  return nil
end

-- A member value of M: ticket, ttl, permits, label ('' if none).
local function waiter(v)
  local ticket, ttl, rest = member(v)
  local c = string.find(rest, ':', 1, true)
  return ticket, ttl, tonumber(string.sub(rest, 1, (c or 0) - 1)),
         c and string.sub(rest, c + 1) or ''
end

-- A holder record of h: fence, grant time, permits, label ('' if none).
local function held(v)
  local a = string.find(v, ':', 1, true)
  local b = string.find(v, ':', a + 1, true)
  local c = string.find(v, ':', b + 1, true)
  return tonumber(string.sub(v, 1, a - 1)), tonumber(string.sub(v, a + 1, b - 1)),
         tonumber(string.sub(v, b + 1, (c or 0) - 1)),
         c and string.sub(v, c + 1) or ''
end

-- THE RULE FOR A LOST D (the deadlines). Every holder in h must have its
-- deadline in D: h's expiry is set from D's latest deadline (finish), so a
-- holder that D does not list would have its lease cut short by the next
-- holder's shorter lease (h expires, every permit frees while it holds).
-- So before anything else, each call counts the holders of h (its fields
-- less the META ones present) against ZCARD D; if h has more, D was lost
-- since they were granted (every grant, extend, release and reap writes
-- both keys, so after any one key loss either every holder of h is in D
-- or every entry of D is in h), and each holder of h that D lacks gets
-- back, as its deadline, h's own expiry at that moment: the latest
-- deadline any lease had when h was last written, so never earlier than
-- its real one. Its permits stay taken until then (at most one longest
-- lease too long; its own extend or release puts its true deadline back or
-- frees them at once). O(holders), and only in the first call after a loss.
-- A lost h is a forced release instead (DESIGN.md section 13): D's entries
-- without a record in h only keep h's expiry later until they are reaped.
local function restore_deadlines(st, meta, listed)
  local holders = redis.call('HLEN', h) - meta
  if holders <= listed then
    return
  end
  local left = math.max(redis.call('PTTL', h), 1)
  local bound = int(st.now + left)
  local args = {}
  for _, f in ipairs(redis.call('HKEYS', h)) do
    if f ~= KIND and f ~= USED and f ~= LAST then
      args[#args + 1] = bound
      args[#args + 1] = f
      if #args >= 1000 then -- unpack() has a stack limit
        redis.call('ZADD', D, 'NX', unpack(args))
        args = {}
      end
    end
  end
  if #args > 0 then
    redis.call('ZADD', D, 'NX', unpack(args))
  end
  -- D expires with h, as finish sets it, also if this call writes no more.
  redis.call('PEXPIRE', D, int(left))
end

-- The permits a request asks for (ARGV "0": all), checked against st.cap.
local function permits(st, arg)
  local k = tonumber(arg)
  if not k or k < 0 or k ~= math.floor(k) or k > st.cap then
    error(redis.error_reply('ERR a request for ' .. tostring(arg)
                            .. ' permits of ' .. describe(st.kind)))
  end
  return k == 0 and st.cap or k
end

-- The resource's state for one call, after checking its kind: st.kind,
-- st.cap, st.used (permits in use), st.last (last fence or nil), st.now,
-- st.now_us, st.freed (permits of leases found ended), st.dirty (keys to
-- write back), st.moved (the holders changed), st.more. Reads every key before any
-- write, so a key of another type fails the call with nothing changed;
-- a STRING h (a mutex holds it) is a WRONGKIND, and so is a kind other
-- than the one stored in h or, with no holder, in M. asked: the kind the
-- caller asks for; want: the permits it asks for (a request's ARGV, nil
-- for a call that asks none), checked after the kind and before any
-- write, as every argument is: st.k. new: a retried enqueue's request id
-- (its RT_AGAIN form), refused out of memory before any write when it
-- neither holds nor waits (a new request, refuse_to_add).
local function load_state(asked, want, new)
  local st = {kind = asked, cap = capacity(asked), freed = 0}
  if not st.cap then
    error(redis.error_reply('ERR unknown kind of resource: ' .. asked))
  end
  st.now, st.now_us = clock()
  local ok, v = pcall(redis.call, 'HMGET', h, KIND, USED, LAST)
  if not ok then
    if redis.call('TYPE', h)['ok'] == 'string' then
      wrong_kind('mutex', asked)
    end
    error(redis.error_reply(type(v) == 'table' and v.err or tostring(v)))
  end
  local stored = v[1] or redis.call('HGET', m, KIND)
  if v[1] then
    redis.call('HLEN', m) -- still read: a wrong type fails before writes
  end
  redis.call('LLEN', q)
  local listed = redis.call('ZCARD', D)
  if stored and stored ~= asked then
    wrong_kind(stored, asked)
  end
  if want then
    st.k = permits(st, want)
  end
  if new and redis.call('HEXISTS', h, new) == 0 then
    local mv = redis.call('HMGET', m, new, '#')
    if not place(mv[1], mv[2], redis.call('LLEN', q)) then
      local no = refuse_to_add(true)
      if no then
        error(no)
      end
    end
  end
  st.used, st.last = tonumber(v[2]) or 0, tonumber(v[3])
  restore_deadlines(st, (v[1] and 1 or 0) + (v[2] and 1 or 0)
                        + (v[3] and 1 or 0), listed)
  -- Leases that ended leave, at most SKIP_MAX per call.
  local gone = redis.call('ZRANGEBYSCORE', D, '-inf', int(st.now), 'LIMIT',
                          0, SKIP_MAX)
  for _, id in ipairs(gone) do
    local rec = redis.call('HGET', h, id)
    if rec then
      local _, _, k = held(rec)
      redis.call('HDEL', h, id)
      st.freed, st.used = st.freed + k, st.used - k
    end
  end
  if #gone > 0 then
    redis.call('ZREM', D, unpack(gone))
    st.dirty, st.moved = true, true
    if #gone == SKIP_MAX then
      st.more = MORE
    end
  end
  return st
end

-- The earliest holder deadline (when permits free up next) and the latest
-- (when the last lease ends), or nil when nobody holds.
local function deadlines()
  local first = redis.call('ZRANGE', D, 0, 0, 'WITHSCORES')
  if #first == 0 then
    return nil, nil
  end
  local last = redis.call('ZRANGE', D, -1, -1, 'WITHSCORES')
  return tonumber(first[2]), tonumber(last[2])
end

-- The grant of holder id (record rec) as a reply: {GRANTED, fence, lease
-- ms left, deadline, now}. Its deadline is in D; if D was lost, h's own
-- expiry (the latest deadline) bounds it.
local function grant_reply(st, id, rec)
  local fence = held(rec)
  local deadline = tonumber(redis.call('ZSCORE', D, id))
  if not deadline then
    deadline = st.now + math.max(redis.call('PTTL', h), 1)
  end
  return {GRANTED, fence, deadline - st.now, deadline, st.now}
end

-- Make id a holder of k permits; returns its fence and deadline.
local function add_holder(st, id, k, ttl, label)
  local fence = next_fence(st.last, st.now_us)
  local deadline = st.now + ttl
  redis.call('HSET', h, id, int(fence) .. ':' .. int(st.now) .. ':' .. int(k)
             .. labeled(label))
  redis.call('ZADD', D, int(deadline), id)
  st.used, st.last, st.dirty, st.moved = st.used + k, fence, true, true
  st.leader = {id, fence, deadline, label}
  return fence, deadline
end

-- Remove holder id (its record rec); frees its permits.
local function drop_holder(st, id, rec)
  local _, _, k = held(rec)
  redis.call('HDEL', h, id)
  redis.call('ZREM', D, id)
  st.used, st.dirty, st.moved = st.used - k, true, true
end

-- Grant from the front of Q while the front's permits fit: strictly in
-- order, so a large request at the front is never overtaken. Canceled
-- entries are dropped; so is a waiter whose client is gone (its grant or
-- next-in-line notice reaches nobody). The blocked
-- front is told when the first lease in front of it ends (n:) if `tell`
-- (something changed) or the front moved. The `quiet` request learns its
-- grant from the caller's reply. Returns quiet's fence, deadline and ttl
-- if it was granted.
local function grant_waiters(st, quiet, tell)
  local budget = SKIP_MAX
  if held_off(st.now) > 0 then
    -- Held off (the failover hold): nobody is granted; the front waiter
    -- (unless quiet: it learns from the reply) is told when the hold ends.
    local id = redis.call('LINDEX', q, 0)
    if id and id ~= quiet then
      reaches(id, 'n', ':' .. int(st.now + held_off(st.now)))
    end
    st.dirty = true -- Q and M must last through the hold (finish)
    return
  end
  while budget > 0 do
    local id = redis.call('LINDEX', q, 0)
    if not id then
      redis.call('DEL', m)
      return
    end
    local v = redis.call('HGET', m, id)
    if not v then
      pop()
      budget = budget - 1
    else
      local _, ttl, k, label = waiter(v)
      if st.used + k > st.cap then
        if not tell or id == quiet or
           reaches(id, 'n', ':' .. int(deadlines() or st.now)) then
          return
        end
        pop() -- gone: the one behind it may fit
      else
        pop()
        local fence = next_fence(st.last, st.now_us)
        if id == quiet or reaches(id, 'g', ':' .. int(fence) .. ':' .. int(ttl)
                                  .. ':' .. int(st.now + ttl)
                                  .. about(st.kind)) then
          local _, deadline = add_holder(st, id, k, ttl, label)
          tell = true
          if id == quiet then
            st.granted = {fence, deadline, ttl}
          end
        else
          -- Its notice went out (a replica's subscribers hear it): the
          -- next grant's fence must be above it.
          st.last = fence
        end
      end
      budget = budget - 1
    end
  end
  st.more = MORE
end

-- Write the counters back and set the expiries: h and D live until the
-- latest lease ends, Q and M GRACE_MS longer; with no holder and nobody
-- waiting nothing stays. An election tells its observers the leader
-- when it changed (channel "<key base>:o", the resource's own slot).
local function finish(st)
  local _, last = deadlines()
  if not last and st.used > 0 then
    -- D was lost while leases run: h's own expiry (the latest deadline)
    -- keeps their permits taken until then.
    redis.call('HSET', h, KIND, st.kind, USED, int(st.used), LAST,
               int(st.last or 0))
    touch(redis.call('PTTL', h))
  elseif not last then
    redis.call('DEL', D)
    if redis.call('EXISTS', q) == 0 then
      redis.call('DEL', h, m)
    else
      redis.call('HSET', h, KIND, st.kind, USED, '0', LAST, int(st.last or 0))
      redis.call('PEXPIRE', h, int(GRACE_MS))
      touch(held_off(st.now))
    end
  else
    -- No last fence when h was lost while D lists leases (nobody granted
    -- since): as for a lost h above, the clock's next fence is above it.
    redis.call('HSET', h, KIND, st.kind, USED, int(st.used), LAST,
               int(st.last or 0))
    redis.call('PEXPIREAT', h, int(last))
    redis.call('PEXPIREAT', D, int(last))
    touch(math.max(last - st.now, held_off(st.now)))
  end
  if st.kind == 'e' and st.moved then
    local l = st.leader
    if not l and last then
      -- The holder that stays: h's one holder (capacity 1), if any; an
      -- entry of D without a record in h (h was lost) holds nothing.
      for _, id in ipairs(redis.call('HKEYS', h)) do
        if id ~= KIND and id ~= USED and id ~= LAST then
          local f, _, _, label = held(redis.call('HGET', h, id))
          l = {id, f, tonumber(redis.call('ZSCORE', D, id)), label}
        end
      end
    end
    local msg = l and ('o:' .. int(l[2]) .. ':' .. int(l[3]) .. ':' .. l[1]
                       .. ':' .. l[4])
                or ('o:' .. int(st.last or 0) .. ':0::')
    redis.call('SPUBLISH', string.sub(h, 1, -2) .. 'o', msg)
  end
end

-- Where waiter id stands (0 = front), or nil if it is no live waiter in Q.
local function waiting_at(id)
  local mv = redis.call('HMGET', m, id, '#')
  return place(mv[1], mv[2], redis.call('LLEN', q))
end

