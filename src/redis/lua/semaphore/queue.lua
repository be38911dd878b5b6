-- semaphore.lua, part 2 of 5 (joined in order by cmake/redis.cmake; part 1, core.lua, states the protocol): the
-- queue's records, a lease taken back, the sweep of what expired, and the grants served from the queue's head.

-- Queue records this code wrote, and what each holds ({id, n, ttl, wake, n's digits}): a waiter's record is read back
-- by the call that serves it, usually a few calls after the one that queued it, and matching it against its pattern
-- (a character at a time through its id and wake key) costs Redis about 5,700 instructions, a lookup a few hundred.
-- Kept across calls when the code is loaded as a function library; two generations of up to 256 records, the older
-- dropped when the newer fills, so that a record is remembered for at least its next 256 joins. Only what the pattern
-- would read the same way is kept (an id without ':', a wake key that is not empty).
local records, older_records, recorded = {}, {}, 0
-- The queue record of a waiter (n and ttl as the caller wrote them: plain digits, checked by digits()).
local function waiter_record(id, n, n_text, ttl, ttl_text, wake)
  local record = id .. ':' .. n_text .. ':' .. ttl_text .. ':' .. wake
  if wake ~= '' and not find(id, ':', 1, true) then
    if recorded >= 256 then records, older_records, recorded = {}, records, 0 end
    recorded = recorded + 1
    records[record] = { id, n, ttl, wake, n_text }
  end
  return record
end
-- A queue record "id:n:lease_ttl_us:wake_key": id, n, ttl, wake and n's digits; only its id (or nil) when the rest is
-- unreadable.
local function parse_waiter(record)
  local known = records[record] or older_records[record]
  if known then return known[1], known[2], known[3], known[4], known[5] end
  local id, n, ttl, wake = match(record, '^([^:]+):(%d+):(%d+):(.+)$')
  if id then return id, decimal(n), decimal(ttl), wake, n end -- (digits only, matched above)
  return match(record, '^[^:]+')
end

-- Waiter `id` leaves the queue (its record stays in the list until the head or a compaction); whether it was waiting.
local function drop_waiter(id)
  if rcall('ZREM', expiry, id) ~= 1 then return false end
  if tracked then
    local w = rcall('HGET', waiters_hash, id)
    rcall('HDEL', waiters_hash, id)
    local k, n = match(w or '', '^(%d+):(%d+):')
    if k and cls[tonumber(k) + 1] then
      local c = cls[tonumber(k) + 1]
      c.queued = max(0, c.queued - tonumber(n))
      dirty.classes = true
    end
  end
  return true
end

-- Rebuilds a queue list from the records of the waiters still waiting, in order, once the lists hold more than twice
-- as many records as there are waiters (plus 32): O(N), at most once per N/2 departures.
local function compact_list(list)
  local records = rcall('LRANGE', list, 0, -1)
  rcall('DEL', list)
  for first = 1, #records, 500 do
    local chunk, ids = {}, {}
    for i = first, min(first + 499, #records) do
      chunk[#chunk + 1] = records[i]
      ids[#ids + 1] = parse_waiter(records[i]) or ''
    end
    local live = {}
    for i, score in ipairs(rcall('ZMSCORE', expiry, unpack(ids))) do
      if score then live[#live + 1] = chunk[i] end
    end
    if #live > 0 then
      rcall('RPUSH', list, unpack(live))
      wrote(list)
    end
  end
end
local function compact()
  local length = rcall('LLEN', queue)
  if multi then
    for k = 2, #cls do length = length + rcall('LLEN', cls[k].list) end
  end
  if length <= 2 * rcall('ZCARD', expiry) + 32 then return end
  compact_list(queue)
  if multi then
    for k = 2, #cls do compact_list(cls[k].list) end
  end
end

-- The permits of lease `id` (nil when there is no such lease), which is removed, and — with classes and a rate —
-- its class when its grant charged the class's assured bucket (admit_head's mark, removed with the lease; a lease
-- granted by an older admit has none). `n`: its permits when the caller knows them (the lease's own release), else
-- read.
local function take_lease(id, n)
  -- (A few grants wait at most: comparing ids compares two pointers, where a table of them would cost an insert and a
  -- removal per grant.)
  for i = 1, 2 * grants_waiting, 2 do
    if grant_leases[i] == id then
      flush_writes()
      break
    end
  end
  if n and not multi then
    if rcall('ZREM', holders, id) == 0 then return nil end
    ended_waiting = ended_waiting + 1
    ended[ended_waiting] = id
    if ended_waiting == 64 then flush_writes() end
    return n
  end
  flush_writes()
  local v = rcall('HGET', leases, id)
  if not v then return nil end
  rcall('HDEL', leases, id)
  rcall('ZREM', holders, id)
  local held, k = match(v, '^(%d+):%d+:?(%d*)$')
  held = held and held + 0
  if multi and held and k ~= '' and cls[tonumber(k) + 1] then -- its class holds that many fewer
    local c = cls[tonumber(k) + 1]
    c.held = max(0, c.held - held)
    dirty.classes = true
    if interval > 0 and rcall('HDEL', waiters_hash, 'c:' .. id) == 1 then return held, c end
  end
  return held
end

-- A grant given back unused (its waiter gave up first: run.cancel) returns its n tokens to the rate's bucket, and to
-- class `charged`'s assured bucket when the grant charged it (take_lease), as if it had never been made: a request
-- that timed out or was cancelled takes nothing.
local function refund(n, charged)
  if interval > 0 then
    tat = tat - n * interval
    dirty.tat = true
  end
  if charged then
    charged.atat = charged.atat - n * charged.ai
    dirty.classes = true
  end
end

-- Expired leases and waiters go, once `next` has passed; `next` becomes the earliest expiry left.
local function sweep()
  if now < next_due then return end
  flush_writes()
  while true do
    local dead = rcall('ZRANGEBYSCORE', holders, '-inf', now_text(), 'LIMIT', 0, 100)
    for _, id in ipairs(dead) do
      local n = take_lease(id)
      if n then take(-n) end
      rcall('ZREM', holders, id)
    end
    if #dead < 100 then break end
  end
  local left = false
  while true do
    local gone = rcall('ZRANGEBYSCORE', expiry, '-inf', now_text(), 'LIMIT', 0, 100)
    for _, id in ipairs(gone) do
      left = drop_waiter(id) or left
    end
    if #gone < 100 then break end
  end
  if left then compact() end
  local h = rcall('ZRANGE', holders, 0, 0, 'WITHSCORES')
  local w = rcall('ZRANGE', expiry, 0, 0, 'WITHSCORES')
  next_due = min(tonumber(h[2]) or math.huge, tonumber(w[2]) or math.huge)
  if next_due == math.huge then next_due = 2 ^ 52 end
  dirty.next = true
end

-- Pushes `text` on wake list `wake` (kept a minute). The wake key '-' names a waiter that nobody wakes (a rate
-- limiter's wait, which has no wake-up loop): it learns of its grant by its poll, and nothing is pushed.
local function push_wake(wake, text)
  if wake == '-' then return end
  rcall('LPUSH', wake, text)
  rcall('PEXPIRE', wake, 60000)
end

-- The grant's wake-up, "id:n:token:expiry:now" (the waiter needs no call to learn it; `granted` is grant()'s
-- "n:token:expiry"): into `handed` when the waiter's wake list is `mine`, else pushed on its wake list.
local function deliver(id, granted, wake, mine, handed)
  if wake == '-' then return end
  local g = id .. ':' .. granted .. ':' .. now_text()
  if handed and wake == mine then
    handed[#handed + 1] = g
  else
    push_wake(wake, g)
  end
end

-- The head waiters are granted, in order, while their requests fit (a head that does not fit holds back everyone
-- behind it: no overtaking, so large requests cannot starve). A grant to a waiter on wake list `mine` goes into
-- `handed` (returned to the caller) instead of its wake list. Stops as soon as no permit is free, unless `all` (then
-- a head larger than the capacity is dropped even so). Returns whether anyone is still queued (nil: not looked).
local function serve_one(mine, handed, all)
  while true do
    if free <= 0 and not all then return nil end
    local record = rcall('LPOP', queue)
    if not record then return false end
    local id, n, ttl, wake, n_text = parse_waiter(record)
    if not n then
      -- an unreadable record: its waiter leaves (never an error: an error would leave the sweep half done)
      if id then drop_waiter(id) end
    elseif too_large(n) then
      -- Larger than the capacity or the burst (cut since it queued): it could never be granted and would hold everyone
      -- back. It leaves the queue; its unreadable wake-up makes it poll, find itself unknown and ask again:
      -- exceeds_capacity.
      if drop_waiter(id) then push_wake(wake, id .. ':') end
    elseif n > free or token_wait(n) > 0 then
      -- does not fit yet (permits or tokens): a waiter keeps its place at the head (one that left is dropped)
      if rcall('ZSCORE', expiry, id) then
        rcall('LPUSH', queue, record)
        wrote(queue)
        return true
      end
    elseif drop_waiter(id) then -- else it left: dropped
      take(n)
      take_tokens(n)
      local _, _, granted = grant(id, n, ttl, nil, n_text)
      deliver(id, granted, wake, mine, handed)
    end
  end
end
