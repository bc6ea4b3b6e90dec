-- Prepended by the build to every script in lua/, so the grant rules live
-- in one place. Every script gets:
--   KEYS[1]  q: the waiters, a LIST of request ids "<client id>:<seq>"
--            (32 hex characters, ':', decimal), oldest first. The holder is
--            not in it. Canceled waiters stay in it until they reach the
--            front (so a cancel is O(1)); they are no members of m.
--   KEYS[2]  h: the holder, a STRING "<fence>:<deadline>:<granted>:<id>"
--            or, when its request has a label, "...:<id>:<label>" (server
--            ms) whose own PX is the lease: while the key exists a
--            lease runs, so missing keys never read as a lease that ended
--            early, and an idle resource leaves nothing behind.
--   KEYS[3]  m: a HASH of the live waiters, id -> "<ticket>:<ttl ms>" or
--            "<ticket>:<ttl ms>:<label>",
--            plus '#' -> how many entries ever left the front of q (set
--            when m is made, so a missing '#' means m was lost), and
--            '@' -> "<run id>:<since ms>": the server that serves the
--            resource and since when its waiters' clients may still be
--            subscribing there (0: all of them are; see settling). An
--            entry's place in q is ticket - '#': membership, position and
--            "still in q" are O(1).
--   ARGV[1]  the channel prefix; a client's channel is ARGV[1] .. client id.
--            It may end in a NUL byte and the fence epoch: "c" (a cluster
--            node: the epoch is the node's own configEpoch) or a decimal number
--            (the master's config epoch as the Sentinels named it), then
--            maybe "/<ms>": the failover hold (see held_off). No NUL:
--            epoch 0, no hold. See next_fence.
-- Notices go out with SPUBLISH: its count is exact (pattern subscribers
-- never match a shard channel), so 0 means the client is gone.
-- Time is always the Redis server's clock, never a client's.
local q, h, m = KEYS[1], KEYS[2], KEYS[3]
-- ARGV[1] split: the channel prefix; after a NUL (a channel prefix is a C
-- string: it never holds one) the fence epoch (nil: none) and, after a
-- '/', the failover hold in ms (0: none).
-- The longest lease, and failover hold: 10^15 ms. A longer hold fails
-- the call before anything ran, with the module's words.
local LEASE_MAX_MS = 1000000000000000
local function split_prefix(arg)
  local z = string.find(arg, '\0', 1, true)
  if not z then
    return arg, nil, 0
  end
  local rest = string.sub(arg, z + 1)
  local e, ms = string.match(rest, '^([^/]*)/(%d+)$')
  if e then
    if #ms > 16 or tonumber(ms) > LEASE_MAX_MS then
      error(redis.error_reply("ERR the failover hold must be a whole number "
            .. "of ms up to 10^15, not '" .. string.sub(ms, 1, 32) .. "'"))
    end
    return string.sub(arg, 1, z - 1), e, tonumber(ms)
  end
  return string.sub(arg, 1, z - 1), rest, 0
end
local chan, epoch_arg, hold_ms = split_prefix(ARGV[1])

-- Keys of a resource whose lease ran out this long ago expire by
-- themselves, so abandoned queues need no client to clean them up.
local GRACE_MS = 10000
-- Most entries one call drops (canceled, or whose client is gone): a queue
-- of dead entries costs several calls, never one long one.
local SKIP_MAX = 100

-- A waiter's client may be alive yet not subscribed to this server: when
-- the server starts serving a resource whose waiters queued elsewhere (a
-- failover, a restart, a slot moved here), their clients are still
-- reconnecting, with a backoff of up to 2.5 s (src/conn.c). For this long
-- after such a change, a notice that reaches nobody is no proof of death.
local SETTLE_MS = 5000

-- Reply codes (protocol/constants.txt; src/ and module/ take them from there).
local GRANTED, QUEUED, MORE = 1, 0, 1

-- The server clock in ms and in us.
local function clock()
  local t = redis.call('TIME')
  local s, us = tonumber(t[1]), tonumber(t[2])
  return s * 1000 + math.floor(us / 1000), s * 1000000 + us
end

-- Integers go to redis.call and into messages as strings formatted once:
-- Redis would format each Lua number with %.17g.
local function int(n)
  return string.format('%d', n)
end

-- A lease argument: decimal digits only, 1 ms to LEASE_MAX_MS (see
-- split_prefix for its value; the client sends 1 to RT_TTL_MAX). Anything
-- else ('0', '-5', '1e3', ' 5') fails the call before its first write,
-- with the module's words.
local function lease_arg(s)
  local n = type(s) == 'string' and string.match(s, '^%d+$') and tonumber(s)
  if not n or n < 1 or n > LEASE_MAX_MS then
    error(redis.error_reply("ERR the lease must be a positive whole number "
          .. "of ms, not '" .. string.sub(tostring(s), 1, 32) .. "'"))
  end
  return n
end

-- A label (printable ASCII, ':' allowed, '' for none) goes last in a
-- record: ':' and the label, or nothing at all.
local function labeled(label)
  if label == nil or label == '' then
    return ''
  end
  return ':' .. label
end

-- The kinds of resource, as a pool resource stores its own ('*' in
-- its h and M, lua/lib/pool.lua): "s:<N>" a semaphore of N permits,
-- "rw" a read-write lock, "e" an election; "mutex" is what a STRING h is.
local function describe(kind)
  if kind == 'mutex' then
    return 'a mutex'
  elseif kind == 'rw' then
    return 'a read-write lock'
  elseif kind == 'e' then
    return 'an election'
  end
  return 'a semaphore of ' .. string.sub(kind, 3) .. ' permits'
end

-- Fail the script: the resource is in use as another kind than asked.
local function wrong_kind(is, asked)
  error(redis.error_reply('WRONGKIND the resource is ' .. describe(is)
                          .. ', not ' .. describe(asked)))
end

-- A failed read of h (its type is not STRING): a pool resource's
-- HASH is a WRONGKIND, anything else the WRONGTYPE it raised. Only this
-- error path pays for the look, so a mutex's commands stay as they are.
local function refuse_h(err)
  if redis.call('TYPE', h)['ok'] == 'hash' then
    local kind = redis.call('HGET', h, '*')
    if kind then
      wrong_kind(kind, 'mutex')
    end
  end
  error(redis.error_reply(type(err) == 'table' and err.err or tostring(err)))
end

-- The holder record: id, fence, deadline, grant time, label ('' if none);
-- nil if nobody holds a lease that runs after now (Redis keeps a key
-- through its last millisecond: a lease with 0 ms left is over). An id is
-- 32 hex characters, ':' and digits, so a ':' after its digits starts the
-- label.
local function holder(now)
  local ok, v = pcall(redis.call, 'GET', h)
  if not ok then
    refuse_h(v)
  end
  if not v then
    return nil
  end
  local a = string.find(v, ':', 1, true)
  local b = string.find(v, ':', a + 1, true)
  local c = string.find(v, ':', b + 1, true)
  local deadline = tonumber(string.sub(v, a + 1, b - 1))
  if deadline <= now then
    return nil
  end
  local e = string.find(v, ':', c + 34, true)
  return string.sub(v, c + 1, (e or 0) - 1), tonumber(string.sub(v, 1, a - 1)),
         deadline, tonumber(string.sub(v, b + 1, c - 1)),
         e and string.sub(v, e + 1) or ''
end

-- A member value "<ticket>:<ttl>[:<label>]": its ticket, ttl and label
-- ('' if none).
local function member(v)
  local c = string.find(v, ':', 1, true)
  local d = string.find(v, ':', c + 1, true)
  return tonumber(string.sub(v, 1, c - 1)),
         tonumber(string.sub(v, c + 1, (d or 0) - 1)),
         d and string.sub(v, d + 1) or ''
end

-- A failover epoch is worth this many microseconds of clock in a fence:
-- 2^40 us, 12.7 days. Epochs above EPOCH_MAX count as EPOCH_MAX, so a
-- fence stays below 2^52 (the us clock until 2112) + 4095 * 2^40 < 2^53:
-- an exact integer in a Lua number (a double).
local EPOCH_US, EPOCH_MAX = 1099511627776, 4095

-- The fence epoch of this call (asked once): 0 without one, the node's
-- own configEpoch (CLUSTER INFO cluster_my_epoch) for "c", else the number
-- the client passed. A promoted replica's epoch is above its old master's,
-- on a cluster (it won the election with a configEpoch above every other
-- node's) as through Sentinel (the failover's new config epoch, which the
-- client learned with the new master's address). configEpoch, not the
-- node's currentEpoch: a master cut off one way (it still hears the
-- others) takes their higher currentEpoch from every reply, while its own
-- configEpoch stays that of the configuration under which it holds its
-- slots, below its successor's.
local fence_epoch
local function epoch()
  if fence_epoch == nil then
    local e = 0
    if epoch_arg == 'c' then
      -- pcall: a server without cluster support has epoch 0.
      local ok, info = pcall(redis.call, 'CLUSTER', 'INFO')
      e = ok and tonumber(string.match(info, 'cluster_my_epoch:(%d+)')) or 0
    elseif epoch_arg then
      e = tonumber(epoch_arg) or 0
      if e ~= e then -- 'nan' reads as a number: it is none, as the module's
        e = 0
      end
    end
    fence_epoch = math.min(math.max(e, 0), EPOCH_MAX)
  end
  return fence_epoch
end

-- Fences come from the server's microsecond clock plus the epoch's worth
-- (EPOCH_US per epoch) and never repeat: even if every key of the
-- resource was lost, the next fence is larger than any issued before (as
-- long as the server clock does not go back and the epoch does not drop).
-- Each failover raises the epoch, so a new master's fences are above any
-- its demoted predecessor issues for the next 12.7 days (minus clock
-- skew): a fence-checking storage refuses the old master's late holders.
local function next_fence(last, now_us)
  return math.max((last or 0) + 1, now_us + epoch() * EPOCH_US)
end

-- Keep q and m for as long as a lease may run, plus GRACE_MS.
local function touch(left)
  local ms = int(math.max(left, 0) + GRACE_MS)
  redis.call('PEXPIRE', q, ms)
  redis.call('PEXPIRE', m, ms)
end

-- Write the holder record; its key expires with the lease.
local function set_holder(id, ttl, fence, deadline, granted, label)
  redis.call('SET', h, int(fence) .. ':' .. int(deadline) .. ':'
             .. int(granted) .. ':' .. id .. labeled(label), 'PX', int(ttl))
end

-- A retried enqueue runs as "<name>_again" (cmake/embed_lua.cmake:
-- AGAIN_SCRIPTS), with flags allow-oom and `local RT_AGAIN = true`: when
-- used memory is over maxmemory (noeviction) Redis refuses a script
-- without that flag outright, and a request Redis has must still find its
-- place, or learn that it holds. Such a script refuses, in Redis's words,
-- only what adds a request (out_of_memory: Redis's own test of used
-- memory, less what eviction does not count, against maxmemory).
local RT_AGAIN = false
local OOM_ERR = "OOM command not allowed when used memory > 'maxmemory'."
local function out_of_memory()
  local info = redis.call('INFO', 'memory')
  local max = tonumber(string.match(info, '\nmaxmemory:(%d+)')) or 0
  if max == 0 then
    return false
  end
  local used = tonumber(string.match(info, 'used_memory:(%d+)')) or 0
  local uncounted =
    tonumber(string.match(info, '\nmem_not_counted_for_evict:(%d+)')) or 0
  return used - uncounted > max
end
-- A retry that would add a request (a new holder or a new entry): an
-- error reply while memory is short, else nil. again: the calling
-- script's RT_AGAIN (the prelude's own is always false).
local function refuse_to_add(again)
  if again and out_of_memory() then
    return redis.error_reply(OOM_ERR)
  end
  return nil
end

-- Make id (with its label) the holder of a free resource that nobody
-- waits for; returns its fence and deadline. m only serves q, so with q
-- empty any member left in m is stale (its q was lost) and goes; q and m
-- do not exist then, so there is no expiry to renew.
local function take_free(id, ttl, now, now_us, label)
  redis.call('DEL', m)
  local fence, deadline = next_fence(nil, now_us), now + ttl
  set_holder(id, ttl, fence, deadline, now, label)
  return fence, deadline
end

-- Publish "<kind>:<seq><rest>" to the client that queued id: kind 'g'
-- (granted; rest ":<fence>:<lease ms>:<deadline>" and `about` below) or
-- 'n' (next in line; rest ":<holder's deadline>"). Returns how many
-- subscribers got it.
local function notify(id, kind, rest)
  return redis.call('SPUBLISH', chan .. string.sub(id, 1, 32),
                    kind .. ':' .. string.sub(id, 34) .. rest)
end

-- What a grant notice names after its deadline: ":<kind>:{<esc>}", the
-- resource's kind ('' for a mutex, as the pool scripts take it)
-- and its hash tag, so a client that no longer knows the request (it gave
-- up on it before stale state brought it back: a failover to a replica
-- that missed the cancel) gives the grant back at once instead of leaving
-- it to run out its lease. The tag is the last {...} of q (the escaped
-- name has no braces).
local function about(kind)
  return ':' .. kind .. ':' .. string.match(q, '({[^{}]*}):[^:]*$')
end

-- This server's run id: it differs between servers and across restarts.
local function run_id()
  return string.match(redis.call('INFO', 'server'), 'run_id:(%x+)')
end

-- m's '@' for an m made here: every waiter in it queued on this server,
-- after subscribing to it.
local function settled_stamp()
  return run_id() .. ':0'
end

-- Since when clients may be subscribing to this server for the resource:
-- 0 if every waiter queued here, else when this server was first seen
-- serving it (by a retried enqueue after a client's reconnect, or by a
-- notice that reached nobody): until then m's '@' named another server.
local function settle_start(now)
  local me, at = run_id(), redis.call('HGET', m, '@')
  if at and string.sub(at, 1, #me + 1) == me .. ':' then
    return tonumber(string.sub(at, #me + 2))
  end
  redis.call('HSET', m, '@', me .. ':' .. int(now))
  return now
end

-- Whether clients may still be subscribing to this server (asked once per
-- call): for SETTLE_MS after settle_start.
local settling_now
local function settling()
  if settling_now == nil then
    local now = clock()
    local since = settle_start(now)
    settling_now = since > 0 and now - since < SETTLE_MS
  end
  return settling_now
end

-- Publish as notify does; whether id's client is live: it got the notice,
-- or it may not have subscribed to this server yet. Such a client learns
-- a grant from its next enqueue (a retry after its reconnect), so a grant
-- to a client that is in fact gone costs its lease, as a holder's crash.
local function reaches(id, kind, rest)
  return notify(id, kind, rest) > 0 or settling()
end

-- Take the front entry out of q: its id and member value (false if it was
-- canceled), or nil when q is empty (then m, which only counts for q,
-- goes too).
local function pop()
  local id = redis.call('LPOP', q)
  if not id then
    redis.call('DEL', m)
    return nil
  end
  redis.call('HINCRBY', m, '#', 1)
  local v = redis.call('HGET', m, id)
  if v then
    redis.call('HDEL', m, id)
  end
  return id, v
end

-- The failover hold (opt-in: rt_options_t.failover_fence_ms, hold_ms
-- here): a grant this server did not replicate from its predecessor may
-- still run elsewhere, for up to the longest lease a client uses. So for
-- hold_ms after this server began serving as a new master, counted from
-- the first call that saw it, nothing is granted. Its era is its run id
-- (new at each start) and replication id (new at each promotion). The
-- key "<channel prefix>era" ("<run id><replid>:<since ms>", no expiry;
-- in the resource's slot on a cluster) records it; it replicates, so a
-- promoted replica finds its old master's era there, and a restarted
-- master its own of before. Returns the ms left (0: grant freely), asked
-- once per call.
local held_left
local function held_off(now)
  if held_left == nil then
    held_left = 0
    if hold_ms > 0 then
      local key = chan .. 'era'
      local info = redis.call('INFO', 'server', 'replication')
      local id = string.match(info, 'run_id:(%x+)')
                 .. string.match(info, 'master_replid:(%x+)')
      local at = redis.call('GET', key)
      local since = now
      if at and string.sub(at, 1, #id + 1) == id .. ':' then
        since = tonumber(string.sub(at, #id + 2)) -- the same era
      else
        redis.call('SET', key, id .. ':' .. int(now)) -- a new era begins
      end
      held_left = math.max(since + hold_ms - now, 0)
    end
  end
  return held_left
end

-- Tell the first live waiter that it is next, and when the lease in front
-- of it ends, so its client's watchdog (the only one that needs to watch
-- closely) reaps on time. A waiter of the holder's own client needs no
-- notice: that client learns the deadline from the grant. Drops dead
-- entries on the way, using what is left of budget.
local function tell_next(holder_id, deadline, budget)
  while budget > 0 do
    local id = redis.call('LINDEX', q, 0)
    if not id then
      redis.call('DEL', m)
      return
    end
    if string.sub(id, 1, 32) == string.sub(holder_id, 1, 32) then
      return
    end
    if redis.call('HEXISTS', m, id) == 1 and
       reaches(id, 'n', ':' .. int(deadline)) then
      return
    end
    pop()
    budget = budget - 1
  end
end

-- Nobody holds the lock: grant the first live waiter and tell its client,
-- unless it is `quiet` (the caller answers that request in its own reply);
-- then tell the one behind it. A waiter whose client is no longer
-- subscribed (its process died, so Redis closed its connection) receives
-- nothing: it is dropped, costs no fence, and the next one is tried
-- (unless clients may still be subscribing: see settling).
-- last is the fence issued before, if known. Returns the new holder (false
-- if none), its fence, deadline and lease, and MORE when the skip budget
-- ran out before a live waiter was found (the caller must reap again).
local function grant_next(now, now_us, last, quiet)
  local budget = SKIP_MAX
  if held_off(now) > 0 then
    -- Held off: the front waiter is told when the hold ends (its client
    -- reaps then), and the queue lives until then.
    touch(held_off(now))
    tell_next(quiet or '', now + held_off(now), budget)
    return false
  end
  while budget > 0 do
    local id, v = pop()
    if not id then
      return false
    end
    if v then
      local _, ttl, label = member(v)
      local fence = next_fence(last, now_us)
      local deadline = now + ttl
      if id == quiet or reaches(id, 'g', ':' .. int(fence) .. ':' .. int(ttl)
                                .. ':' .. int(deadline) .. about('')) then
        set_holder(id, ttl, fence, deadline, now, label)
        touch(ttl) -- waiters may stay behind it
        tell_next(id, deadline, budget)
        return id, fence, deadline, ttl
      end
      -- Its notice went out (a replica's subscribers hear it): the next
      -- grant's fence must be above it.
      last = fence
    end
    budget = budget - 1
  end
  return false, nil, nil, nil, MORE
end

-- Where id stands: its place in q (0 = front) if it is a live waiter that
-- is still in q, else nil. mv and head are HMGET m id '#'; len is LLEN q.
local function place(mv, head, len)
  if not mv then
    return nil
  end
  local pos = member(mv) - (tonumber(head) or 0)
  if pos < 0 or pos >= len then
    return nil
  end
  return pos
end
