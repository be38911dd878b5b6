-- semaphore.lua, part 3 of 5 (joined in order by cmake/redis.cmake; part 1, core.lua, states the protocol): priority
-- classes (made only when a semaphore has them), serving the queue, joining it.

local unlimited = 1125899906842624 -- 2^50, an admission's capacity without a concurrency limit
-- Made only with classes: in Redis's Lua, making a closure costs about as much as a command, on every call.
local has_tokens, assured_wait, assured_charge, head_of, stand, claims, pick, heads_now, admit_head, serve_multi
local function make_class_helpers()
  -- With classes: the share rule of admit::admission (include/admit/detail/admission_rule.hpp states it; admission_pick
  -- and admission_claims are its code), on Redis's clock. A head is {id, n, ttl, wake, arrival, k} and its standing.
  has_tokens = function(n)
    return interval == 0 or (n <= burst and token_wait(n) == 0)
  end
  -- µs until class c's assured bucket holds a whole token (0: now; nil: never, a share of 0).
  assured_wait = function(c)
    if c.ab < 1 then return nil end
    local ready = max(c.atat, now - c.ab * c.ai) + c.ai
    return ready > now and ready - now or 0
  end
  assured_charge = function(c, n)
    c.atat = max(c.atat, now - c.ab * c.ai) + n * c.ai
    dirty.classes = true
  end
  -- Class k's live head, or nil; records of waiters that left are dropped on the way, and a head too large ever to be
  -- admitted leaves (its wake-up unreadable, as serve_one does).
  head_of = function(k)
    local list = cls[k].list
    while true do
      local record = rcall('LINDEX', list, 0)
      if not record then return nil end
      local id, n, ttl, wake = parse_waiter(record)
      local w = id and rcall('HGET', waiters_hash, id)
      if not n or not w then
        rcall('LPOP', list)
        if id then drop_waiter(id) end
      elseif too_large(n) then
        rcall('LPOP', list)
        if drop_waiter(id) then push_wake(wake, id .. ':') end
      else
        return { id = id, n = n, ttl = ttl, wake = wake, arrival = tonumber(match(w, ':(%d+)$')) or 0, k = k }
      end
    end
  end
  stand = function(h)
    local c = cls[h.k]
    h.permit_entitled = capacity >= unlimited or c.held < c.g
    h.token_entitled = interval == 0 or assured_wait(c) == 0
    h.permit_claim = h.permit_entitled and min(c.queued, c.g - c.held) or 0
    h.permits_free = h.n <= free
    h.tokens_free = has_tokens(h.n)
    return h
  end
  -- Whether head o's claim on permits (else tokens) counts against head c (admission_claims).
  claims = function(o, c, on_permits)
    if on_permits then
      if not o.permit_entitled or not o.tokens_free then return false end
    elseif not o.token_entitled or not o.permits_free then
      return false
    end
    if o.arrival < c.arrival then return true end
    if on_permits then
      if c.permit_entitled then return false end
      return not (c.token_entitled and c.permits_free and not has_tokens(o.n + c.n))
    end
    if c.token_entitled then return false end
    return not (c.permit_entitled and c.tokens_free and not (o.n + c.n <= free))
  end
  -- The head to admit next (admission_pick), or nil.
  pick = function(heads)
    local best = nil
    for _, h in ipairs(heads) do
      if not best or h.arrival < best.arrival then
        local permits, tokens = h.n, h.n
        for _, o in ipairs(heads) do
          if o ~= h then
            if claims(o, h, true) then
              permits = permits + (h.permit_entitled and o.n or max(o.n, o.permit_claim))
            end
            if claims(o, h, false) then tokens = tokens + o.n end
          end
        end
        if permits <= free and has_tokens(tokens) then best = h end
      end
    end
    return best
  end
  -- The classes' heads and their standing, but class `except`'s.
  heads_now = function(except)
    local heads = {}
    for k = 1, #cls do
      if k ~= except then
        local h = head_of(k)
        if h then heads[#heads + 1] = stand(h) end
      end
    end
    return heads
  end
  -- Admits h (out of its queue, or never in it): its permits, its tokens, and its class's share of both. A grant
  -- that charged its class's assured bucket is marked so in the waiters hash ("c:<id>", see take_lease), so that a
  -- cancel that gives the grant back can refund that charge too.
  admit_head = function(h)
    take(h.n)
    local charged = interval > 0 and h.token_entitled
    if charged then assured_charge(cls[h.k], h.n) end
    take_tokens(h.n)
    local token, expires, granted = grant(h.id, h.n, h.ttl, h.k)
    if charged then
      rcall('HSET', waiters_hash, 'c:' .. h.id, '1')
      wrote(waiters_hash)
    end
    return token, expires, granted
  end
  serve_multi = function(mine, handed, all)
    while true do
      if free <= 0 and not all then return nil end
      local heads = heads_now(nil)
      if #heads == 0 then return false end
      local h = pick(heads)
      if not h then return true end
      rcall('LPOP', cls[h.k].list)
      drop_waiter(h.id)
      local _, _, granted = admit_head(h)
      deliver(h.id, granted, h.wake, mine, handed)
    end
  end
end

local function serve(mine, handed, all)
  if multi then return serve_multi(mine, handed, all) end
  return serve_one(mine, handed, all)
end

-- The permits the live waiters of queue `list` up to and including `id` ask for (all of them when `id` is nil or not
-- queued there): with a rate, the tokens that must come before `id` can be admitted. O(its place in the queue).
local function queued_through(id, list)
  local sum, at = 0, 0
  while true do
    local records = rcall('LRANGE', list, at, at + 99)
    if #records == 0 then return sum end
    local ids, ns = {}, {}
    for i, record in ipairs(records) do
      local wid, n = parse_waiter(record)
      ids[i], ns[i] = wid or '', n or 0
    end
    for i, score in ipairs(rcall('ZMSCORE', expiry, unpack(ids))) do
      if score then
        sum = sum + ns[i]
        if ids[i] == id then return sum end
      end
    end
    at = at + #records
  end
end

-- With classes: the class (an element of cls) of waiter `id`, or nil when its record is gone.
local function class_of(id)
  local w = rcall('HGET', waiters_hash, id)
  local k = w and tonumber(match(w, '^(%d+):'))
  return k and cls[k + 1]
end

-- With a rate: µs until waiter `id` (with classes, of class c: class_of(id)) may be admitted by time alone — the
-- tokens of the waiters of its class up to it, or (with classes) its class's assured bucket's next token, whichever
-- is sooner; 0 when neither is short.
local function rate_wait(id, c)
  if not multi then
    if token_wait(cls[1].queued) == 0 then return 0 end -- the tokens of every waiter are there: not the rate
    return token_wait(queued_through(id, queue))
  end
  if not c then return 0 end
  local wait = token_wait(c.queued) == 0 and 0 or token_wait(queued_through(id, c.list))
  local a = assured_wait(c)
  if a and a > 0 and (wait == 0 or a < wait) then wait = a end
  return wait
end

-- µs after which waiter `id`, queued in `list` (its class's queue), asks again: the queued reply's fourth element. The
-- rate's wait `ready` (rate_wait; 0: not the rate), or, when the waiter heads its queue under a concurrency limit and
-- (without classes) the permits are what it lacks, the time until the earliest lease expires (and the sweep runs) if
-- that is sooner: a holder that died is then granted away when its lease expires, not at the head's next poll (up to
-- poll_interval later). Only the head watches the leases, so a lease's expiry brings one poll per queue, not one per
-- waiter; a waiter that becomes the head by a grant to the one before it watches from its next poll on. 0 when
-- neither applies: the waiter polls at its poll_interval. Records of departed waiters at the head are dropped on the
-- way, as serving the head drops them. `list` nil: the caller knows the waiter heads it and asks for `n` permits.
local function ask_again_in(id, list, ready, n)
  if capacity >= unlimited then return ready end
  while list do
    local head = rcall('LINDEX', list, 0)
    if not head then return ready end
    local head_id, head_n = parse_waiter(head)
    if head_id == id then
      n = head_n
      break
    end
    if rcall('ZSCORE', expiry, head_id or '') then return ready end -- a waiter ahead of it
    rcall('LPOP', list)
  end
  if not multi and n and n <= free then return ready end -- not the permits (the rate): no lease's expiry helps
  flush_writes() -- (the leases this call granted so far)
  local first = rcall('ZRANGE', holders, 0, 0, 'WITHSCORES')
  if not first[2] then return ready end
  -- (Not before the sweep runs, at next; a time already past, whatever made it so, is left to the poll.)
  local at = max(first[2] + 0, next_due)
  if at <= now then return ready end
  if ready == 0 or at - now < ready then return at - now end
  return ready
end

-- {status, a, now, grants handed to the caller...}
local function with_grants(status, a, handed)
  return { status, a, now, unpack(handed) } -- (one constructor: the table made at its size)
end

-- A lease that cannot be read back (its record damaged, or its expiry gone: a key changed from outside) is an error
-- in its own reply, never a reply with a hole in it (Redis ends an array at its first nil, and a batch's reply would
-- lose the operations after it).
local function lease_reply(id)
  flush_writes()
  local v = rcall('HGET', leases, id)
  if not v then return nil end
  local n, token = match(v, '^(%d+):(%d+)')
  local expires = rcall('ZSCORE', holders, id)
  if not n or not expires then
    return redis.error_reply('ERR admit semaphore: lease ' .. id .. ' cannot be read (' .. v .. ')')
  end
  return { GRANTED, n + 0, token + 0, expires + 0, now }
end

-- An acquire with classes: the newcomer is admitted at once when its class has nobody waiting and the share rule
-- picks it among the heads (the others already served); otherwise it queues in its class, FIFO. Replies as acquire's.
-- A deadline fails at once when the global bucket cannot give it its tokens, after those of its class's waiters.
-- A request of class k (1-based; 1 without classes) that was not admitted joins its class's queue: {3, free, now} when
-- max_waiters (A[7]; negative: no limit) already wait, {8, µs, now} when the rate cannot give it its tokens after those
-- of its class's waiters by its deadline (A[10]), else {1, seq, now, µs after which it asks again (see ask_again_in;
-- 0: at its poll_interval)}.
-- An id already waiting keeps its place and its first request; a new one joins the tail. (Ids are never reused: one
-- that left and came back would find its old place, and its old request, if its record were still queued.)
local function join(A, id, n, ttl, k)
  local most = num(A[7], 'max waiters')
  if most >= 0 and rcall('ZCARD', expiry) >= most then return { FULL, free, now } end
  local ready = 0
  if interval > 0 then
    ready = token_wait(cls[k].queued + n)
    local budget = tonumber(A[10] or '-1') or -1
    if budget >= 0 and ready > budget then return { TOO_LATE, ready, now } end
  end
  local until_us = now + num(A[8], 'waiter ttl')
  seq = seq + 1
  dirty.seq = true
  wrote(expiry, until_us) -- a waiter already queued under this id has its expiry moved too
  local first = false -- whether it joined an empty queue: its head (a queue of departed waiters' records aside)
  if rcall('ZADD', expiry, join_expiry_of(until_us), id) == 1 then
    -- (n and the ttl as the caller wrote them, A[4] and A[5]: plain digits, as run.acquire checked)
    first = rcall('RPUSH', cls and cls[k].list or queue, waiter_record(id, n, A[4], ttl, A[5], A[9])) == 1
    wrote(cls and cls[k].list or queue)
    if tracked then
      rcall('HSET', waiters_hash, id, int(k - 1) .. ':' .. int(n) .. ':' .. int(seq))
      wrote(waiters_hash)
      cls[k].queued = cls[k].queued + n
      dirty.classes = true
    end
    if seq % 32 == 0 then -- see unpack_key (meta exists unless this call makes it: then save() converts it)
      unpack_key(expiry, 'zset')
      unpack_key(holders, 'zset')
      unpack_key(leases, 'hash')
      if tracked then unpack_key(waiters_hash, 'hash') end
      if not dirty.created then unpack_key(meta, 'hash') end
    end
  end
  due(until_us)
  -- With classes, its class's assured bucket may be what holds it back: it asks again when either could let it in.
  if multi then
    local a = assured_wait(cls[k])
    if a and a > 0 and (ready == 0 or a < ready) then ready = a end
  end
  -- (The tail of an empty queue is its head.)
  if first then ready = ask_again_in(id, nil, ready, n) end
  return { QUEUED, seq, now, ready }
end

local acquire_in_class
local function make_class_acquire()
  acquire_in_class = function(A, id, n, ttl)
    local k = num(A[11] or '0', 'priority') + 1
    local c = cls[k]
    if not c then return redis.error_reply('ERR admit semaphore: priority ' .. tostring(A[11]) .. ' out of range') end
    if too_large(n) then return { TOO_LARGE, capacity, now } end
    if free > 0 then serve(nil, nil) end
    if not head_of(k) then
      local heads = heads_now(k)
      local me = stand({ id = id, n = n, ttl = ttl, arrival = seq + 1, k = k })
      heads[#heads + 1] = me
      if pick(heads) == me then
        seq = seq + 1
        dirty.seq = true
        local token, expires = admit_head(me)
        -- What it took can settle a conflict between two other heads (admission_claims): serve them, as dispatch does.
        if free > 0 then serve(nil, nil) end
        return { GRANTED, n, token, expires, now, free }
      end
    end
    if A[6] ~= '1' then return { UNAVAILABLE, free, now } end
    return join(A, id, n, ttl, k)
  end
end
