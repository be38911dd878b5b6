-- admit distributed admission (admit::redis::semaphore, admit::redis::admission): leases on the server's clock,
-- fencing tokens, a FIFO queue of waiters served by hand-off, and optionally a rate: a token bucket that a request
-- must find n tokens in, together with its n permits, to be admitted (reserve-then-commit: a waiter holds neither).
-- A semaphore is an admission without a rate. One script; ARGV[1] names the operation. Not a limiter script: no
-- common.lua.
-- This file defines call(KEYS, ARGV), which runs one call, and makes no Redis call at its top level: the library
-- (redis::script::library) runs it as a script (this file, then `return call(KEYS, ARGV)`) or registers call as the
-- function of a Redis Functions library, whose top level — every helper below — Redis runs once, at FUNCTION LOAD.
-- The state of a call lives in the locals declared at the top level, which call() sets first: one call runs at a
-- time, and each starts from its own keys, time and meta fields.
--
-- KEYS (every key shares the semaphore's hash tag {name}, so a Redis Cluster keeps them in one slot):
--   KEYS[1] meta     hash: capacity, free (capacity minus the permits held; negative after a cut), fence (the last
--                    fencing token), seq (the last arrival number), next (no lease or waiter expires before this
--                    time, µs: the sweep runs only from then on); with a rate also interval (µs one token costs,
--                    >= 1), burst (tokens the bucket holds at most, >= 1) and tat (the bucket's theoretical arrival
--                    time, µs: it holds min(burst, (now - tat) / interval) tokens; absent: full); definition (the
--                    stored definition, as ARGV[2] writes it); with classes also classes (their numbers, as in
--                    ARGV[2]) and held:k, queued:k, atat:k per class k (1-based), and with a rate alone queued:1. A
--                    capacity of 2^50 is no concurrency limit (an admission's max_in_flight 0).
--   KEYS[2] holders  sorted set: lease id -> the lease's expiry (µs since the Unix epoch, server time)
--   KEYS[3] leases   hash: lease id -> "n:token", or "n:token:class" with classes
--   KEYS[4] waiting  list: the queue, one record "id:n:lease_ttl_us:wake_key" per waiter in arrival order (its head is
--                    served first); a record whose id is not in expiry is a waiter that left (cancelled, expired):
--                    dropped when it reaches the head. Ids never contain ':' and wake keys are never empty (the
--                    library's ids are 32 hex digits): a record that cannot be read back loses its waiter
--   KEYS[5] expiry   sorted set: waiter id -> the waiter's expiry (µs); the waiters, whatever their place: a waiter
--                    that stops polling leaves the queue
--   KEYS[6] waiters  (with a rate or classes) hash: waiter id -> "class:n:arrival"
--   KEYS[5 + k]      (with classes, k >= 2) class k - 1's queue, as KEYS[4] is class 0's; KEYS[6] and these are
--                    found by their names ("{name}:waiters", "{name}:waiting:<class>") when a caller gives only five
-- The queue is a list, not a sorted set: joining it and serving its head are O(1) (a sorted set's insert is O(log N),
-- and below 128 members a scan of a packed array), and a waiter's record travels in it, so that serving the head is
-- one LPOP and one ZREM. A waiter leaves from the middle in O(log N) by leaving expiry; its record stays in the list
-- until it reaches the head, and the list is compacted once it holds more than twice as many records as there are
-- waiters (plus 32), so its length stays within that bound at O(1) amortized cost. The price: a head whose request
-- does not fit yet is popped and pushed back (LPOP, ZSCORE, LPUSH) whenever the queue is served with a permit free.
-- A waiter granted by a release becomes a lease under the same id, and the grant is pushed on its wake list (a list
-- under the same hash tag that its process waits on with BLMPOP): one LPUSH per grant, nobody else woken. A grant to
-- a waiter whose wake list is the caller's own (release, cancel and set_capacity name theirs) is returned in the reply
-- instead: the caller's process hands it over without a round trip.
--
-- ARGV[1] the operation, ARGV[2] the definition: a semaphore's capacity, to start with when the semaphore does not
-- exist yet (meta absent; an existing one keeps its own), or an admission's "capacity/interval/burst[/classes]"
-- (interval 0 and burst 0: no rate; classes below, at parse_definition), which must be the stored one: an acquire that names another is refused with status 7 and the
-- stored definition (set_limits changes it; releases, polls and cancels are never refused); then the operation's own
-- arguments (below); or ARGV[1] 'batch': several operations of one process, one after the
-- other (see the end of the script). Every call first sweeps when something may have expired (meta's next has
-- passed): leases past their expiry free their permits, waiters past theirs leave the queue; then the head waiters
-- are granted while their requests fit. The work per operation is O(log N) in the number N of holders and waiters,
-- plus O(log N) per lease or waiter expired, granted or dropped (and, amortized, O(1) per waiter that left, for the
-- queue's compaction).
-- Time is TIME only, in integer microseconds (doubles are exact below 2^53; now is ~1.8e15).
-- Replies: {status, ...}; status 0 GRANTED (or done), 1 QUEUED, 2 UNAVAILABLE (try_acquire), 3 FULL (the queue),
-- 4 TOO_LARGE (exceeds capacity or the burst), 5 UNKNOWN (no such lease or waiter: released, expired, cancelled, never
-- existed), 6 LEFT (cancelled: left the queue, or gave back the grant that came first), 7 CONFLICT (another definition,
-- see ARGV[2]), 8 TOO_LATE (the rate cannot give the request its tokens, after those of the waiters ahead of it,
-- within its deadline).
-- The call's keys, operation and time, set at the start of every call by call() (at the end): the functions below read
-- them, and the call's state further down, as upvalues. Loaded as a function library (FUNCTION LOAD), the functions
-- are made once, when the library is loaded; run as a script (EVALSHA), at every call.
local meta, holders, leases, queue, expiry, op, now

-- The reply statuses (above; the C++ side's sem_status in src/redis/semaphore/core.hpp, which a test holds to these).
local GRANTED, QUEUED, UNAVAILABLE, FULL, TOO_LARGE, UNKNOWN, LEFT, CONFLICT, TOO_LATE = 0, 1, 2, 3, 4, 5, 6, 7, 8

local function int(x)
  -- %d (a C long) is several times faster than %.0f, whose 16-digit times take glibc's multi-precision path;
  -- %.0f only beyond 2^53, where a double is no longer an exact integer anyway.
  if x > -9007199254740992 and x < 9007199254740992 then return string.format('%d', x) end
  return string.format('%.0f', x)
end

local function num(x, what)
  local v = tonumber(x)
  if not v or v ~= math.floor(v) then
    error('admit semaphore: ' .. what .. ' must be an integer, got ' .. tostring(x))
  end
  return v
end

-- meta, read once and written once at the end (dirty fields only)
local capacity, free, fence, next_due, seq, interval, burst, tat, class_text, stored_definition, queued_one
local dirty -- the meta fields to write at the end of the call
-- An admission's definition "capacity/interval/burst[/classes]" (nil for a semaphore's plain capacity, or when it
-- cannot be read); classes "g:ai:ab,..." per priority class: its guaranteed permits, its assured bucket's interval (µs;
-- 0: none) and burst. One class: no classes part.
local function parse_definition(text)
  local c, i, b, rest = string.match(text, '^(%d+)/(%d+)/(%d+)(.*)$')
  if not c or (tonumber(i) == 0) ~= (tonumber(b) == 0) then return nil end
  local classes = nil
  if rest ~= '' then
    classes = string.match(rest, '^/(%d+:%d+:%d+[%d:,]*)$')
    if not classes then return nil end
  end
  return tonumber(c), tonumber(i), tonumber(b), classes
end
-- The stored definition, as ARGV[2] writes it.
local function definition()
  local d = string.format('%d/%d/%d', capacity, interval, burst)
  if class_text then d = d .. '/' .. class_text end
  return d
end
-- Priority classes (more than one): cls[k] for class k - 1, {g, ai, ab, held, queued (permits its waiters ask),
-- atat (its assured bucket's state, µs), list (its queue's key)}, kept in meta as held:k, queued:k and atat:k. Class 0's
-- queue is KEYS[4]; with classes, KEYS[6] is the waiters hash (id -> "class:n:arrival") and KEYS[5 + k] class k - 1's
-- queue for k >= 2, named "{name}:waiters" and "{name}:waiting:<class>": a caller that gives only the five keys
-- (inspect_semaphore, a semaphore of the same name) reaches them by those names, in the same slot.
local cls, multi, waiters_hash, tracked, differs

local function save()
  local args = {}
  if dirty.capacity then args[#args + 1] = 'capacity'; args[#args + 1] = int(capacity) end
  if dirty.capacity or dirty.rate then args[#args + 1] = 'definition'; args[#args + 1] = definition() end
  if dirty.free then args[#args + 1] = 'free'; args[#args + 1] = int(free) end
  if dirty.fence then args[#args + 1] = 'fence'; args[#args + 1] = int(fence) end
  if dirty.next then args[#args + 1] = 'next'; args[#args + 1] = int(next_due) end
  if dirty.seq then args[#args + 1] = 'seq'; args[#args + 1] = int(seq) end
  if dirty.rate then
    args[#args + 1] = 'interval'; args[#args + 1] = int(interval)
    args[#args + 1] = 'burst'; args[#args + 1] = int(burst)
  end
  if dirty.tat then args[#args + 1] = 'tat'; args[#args + 1] = int(tat) end
  if dirty.rate then
    if class_text then
      args[#args + 1] = 'classes'; args[#args + 1] = class_text
    else
      redis.call('HDEL', meta, 'classes')
    end
  end
  if dirty.classes and not multi then
    args[#args + 1] = 'queued:1'; args[#args + 1] = int(cls[1].queued)
  elseif dirty.classes then
    for k = 1, #cls do
      args[#args + 1] = 'held:' .. k; args[#args + 1] = int(cls[k].held)
      args[#args + 1] = 'queued:' .. k; args[#args + 1] = int(cls[k].queued)
      args[#args + 1] = 'atat:' .. k; args[#args + 1] = int(cls[k].atat)
    end
  end
  if #args > 0 then redis.call('HSET', meta, unpack(args)) end
end
local function take(n)
  free = free - n
  dirty.free = true
end
local function due(at) -- something expires at `at`: the sweep must run from then on
  if at < next_due then
    next_due = at
    dirty.next = true
  end
end

-- The rate's token bucket, as admit::token_bucket counts (detail/token_bucket_math.hpp) in µs: µs from now until it
-- holds n tokens (0: now); n never above the burst.
local function token_wait(n)
  if interval == 0 then return 0 end
  local ready = math.max(tat, now - burst * interval) + n * interval
  if ready <= now then return 0 end
  return ready - now
end
local function take_tokens(n)
  if interval == 0 then return end
  tat = math.max(tat, now - burst * interval) + n * interval
  dirty.tat = true
end
-- Too large ever to be admitted: above the capacity, or above the burst.
local function too_large(n)
  return n > capacity or (interval > 0 and n > burst)
end

-- A fencing token: strictly increasing per semaphore, and at least the server's time in µs, so that tokens keep
-- increasing even after Redis lost the semaphore's state (a restart without persistence), while its clock does.
-- `k`: the class (1-based) with classes, whose held permits count it; the lease records it.
local function grant(id, n, ttl, k)
  fence = math.max(fence + 1, now)
  dirty.fence = true
  local expires = now + ttl
  redis.call('ZADD', holders, int(expires), id)
  if k then
    cls[k].held = cls[k].held + n
    dirty.classes = true
    redis.call('HSET', leases, id, int(n) .. ':' .. int(fence) .. ':' .. int(k - 1))
  else
    redis.call('HSET', leases, id, int(n) .. ':' .. int(fence))
  end
  due(expires)
  return fence, expires
end

-- A queue record "id:n:lease_ttl_us:wake_key": id, n, ttl, wake; only its id (or nil) when the rest is unreadable.
local function parse_waiter(record)
  local id, n, ttl, wake = string.match(record, '^([^:]+):(%d+):(%d+):(.+)$')
  if id then return id, tonumber(n), tonumber(ttl), wake end
  return string.match(record, '^[^:]+')
end

-- Waiter `id` leaves the queue (its record stays in the list until the head or a compaction); whether it was waiting.
local function drop_waiter(id)
  if redis.call('ZREM', expiry, id) ~= 1 then return false end
  if tracked then
    local w = redis.call('HGET', waiters_hash, id)
    redis.call('HDEL', waiters_hash, id)
    local k, n = string.match(w or '', '^(%d+):(%d+):')
    if k and cls[tonumber(k) + 1] then
      local c = cls[tonumber(k) + 1]
      c.queued = math.max(0, c.queued - tonumber(n))
      dirty.classes = true
    end
  end
  return true
end

-- Rebuilds a queue list from the records of the waiters still waiting, in order, once the lists hold more than twice
-- as many records as there are waiters (plus 32): O(N), at most once per N/2 departures.
local function compact_list(list)
  local records = redis.call('LRANGE', list, 0, -1)
  redis.call('DEL', list)
  for first = 1, #records, 500 do
    local chunk, ids = {}, {}
    for i = first, math.min(first + 499, #records) do
      chunk[#chunk + 1] = records[i]
      ids[#ids + 1] = parse_waiter(records[i]) or ''
    end
    local live = {}
    for i, score in ipairs(redis.call('ZMSCORE', expiry, unpack(ids))) do
      if score then live[#live + 1] = chunk[i] end
    end
    if #live > 0 then redis.call('RPUSH', list, unpack(live)) end
  end
end
local function compact()
  local length = redis.call('LLEN', queue)
  if multi then
    for k = 2, #cls do length = length + redis.call('LLEN', cls[k].list) end
  end
  if length <= 2 * redis.call('ZCARD', expiry) + 32 then return end
  compact_list(queue)
  if multi then
    for k = 2, #cls do compact_list(cls[k].list) end
  end
end

-- The permits of lease `id` (nil when there is no such lease), which is removed. `n`: its permits when the caller
-- knows them (the lease's own release), else read.
local function take_lease(id, n)
  if n and not multi then
    if redis.call('ZREM', holders, id) == 0 then return nil end
    redis.call('HDEL', leases, id)
    return n
  end
  local v = redis.call('HGET', leases, id)
  if not v then return nil end
  redis.call('HDEL', leases, id)
  redis.call('ZREM', holders, id)
  local held, k = string.match(v, '^(%d+):%d+:?(%d*)$')
  held = tonumber(held)
  if multi and held and k ~= '' and cls[tonumber(k) + 1] then -- its class holds that many fewer
    local c = cls[tonumber(k) + 1]
    c.held = math.max(0, c.held - held)
    dirty.classes = true
  end
  return held
end

-- Expired leases and waiters go, once `next` has passed; `next` becomes the earliest expiry left.
local function sweep()
  if now < next_due then return end
  while true do
    local dead = redis.call('ZRANGEBYSCORE', holders, '-inf', int(now), 'LIMIT', 0, 100)
    for _, id in ipairs(dead) do
      local n = take_lease(id)
      if n then take(-n) end
      redis.call('ZREM', holders, id)
    end
    if #dead < 100 then break end
  end
  local left = false
  while true do
    local gone = redis.call('ZRANGEBYSCORE', expiry, '-inf', int(now), 'LIMIT', 0, 100)
    for _, id in ipairs(gone) do
      left = drop_waiter(id) or left
    end
    if #gone < 100 then break end
  end
  if left then compact() end
  local h = redis.call('ZRANGE', holders, 0, 0, 'WITHSCORES')
  local w = redis.call('ZRANGE', expiry, 0, 0, 'WITHSCORES')
  next_due = math.min(tonumber(h[2]) or math.huge, tonumber(w[2]) or math.huge)
  if next_due == math.huge then next_due = 2 ^ 52 end
  dirty.next = true
end

-- The grant's wake-up, "id:n:token:expiry:now" (the waiter needs no call to learn it): into `handed` when the waiter's
-- wake list is `mine`, else pushed on its wake list.
local function deliver(id, n, token, expires, wake, mine, handed)
  local g = id .. ':' .. int(n) .. ':' .. int(token) .. ':' .. int(expires) .. ':' .. int(now)
  if handed and wake == mine then
    handed[#handed + 1] = g
  else
    redis.call('LPUSH', wake, g)
    redis.call('PEXPIRE', wake, 60000)
  end
end

-- The head waiters are granted, in order, while their requests fit (a head that does not fit holds back everyone
-- behind it: no overtaking, so large requests cannot starve). A grant to a waiter on wake list `mine` goes into
-- `handed` (returned to the caller) instead of its wake list. Stops as soon as no permit is free, unless `all` (then
-- a head larger than the capacity is dropped even so). Returns whether anyone is still queued (nil: not looked).
local function serve_one(mine, handed, all)
  while true do
    if free <= 0 and not all then return nil end
    local record = redis.call('LPOP', queue)
    if not record then return false end
    local id, n, ttl, wake = parse_waiter(record)
    if not n then
      -- an unreadable record: its waiter leaves (never an error: an error would leave the sweep half done)
      if id then drop_waiter(id) end
    elseif too_large(n) then
      -- Larger than the capacity or the burst (cut since it queued): it could never be granted and would hold everyone
      -- back. It leaves the queue; its unreadable wake-up makes it poll, find itself unknown and ask again:
      -- exceeds_capacity.
      if drop_waiter(id) then
        redis.call('LPUSH', wake, id .. ':')
        redis.call('PEXPIRE', wake, 60000)
      end
    elseif n > free or token_wait(n) > 0 then
      -- does not fit yet (permits or tokens): a waiter keeps its place at the head (one that left is dropped)
      if redis.call('ZSCORE', expiry, id) then
        redis.call('LPUSH', queue, record)
        return true
      end
    elseif drop_waiter(id) then -- else it left: dropped
      take(n)
      take_tokens(n)
      local token, expires = grant(id, n, ttl)
      deliver(id, n, token, expires, wake, mine, handed)
    end
  end
end

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
    local ready = math.max(c.atat, now - c.ab * c.ai) + c.ai
    return ready > now and ready - now or 0
  end
  assured_charge = function(c, n)
    c.atat = math.max(c.atat, now - c.ab * c.ai) + n * c.ai
    dirty.classes = true
  end
  -- Class k's live head, or nil; records of waiters that left are dropped on the way, and a head too large ever to be
  -- admitted leaves (its wake-up unreadable, as serve_one does).
  head_of = function(k)
    local list = cls[k].list
    while true do
      local record = redis.call('LINDEX', list, 0)
      if not record then return nil end
      local id, n, ttl, wake = parse_waiter(record)
      local w = id and redis.call('HGET', waiters_hash, id)
      if not n or not w then
        redis.call('LPOP', list)
        if id then drop_waiter(id) end
      elseif too_large(n) then
        redis.call('LPOP', list)
        if drop_waiter(id) then
          redis.call('LPUSH', wake, id .. ':')
          redis.call('PEXPIRE', wake, 60000)
        end
      else
        return { id = id, n = n, ttl = ttl, wake = wake, arrival = tonumber(string.match(w, ':(%d+)$')) or 0, k = k }
      end
    end
  end
  stand = function(h)
    local c = cls[h.k]
    h.permit_entitled = capacity >= unlimited or c.held < c.g
    h.token_entitled = interval == 0 or assured_wait(c) == 0
    h.permit_claim = h.permit_entitled and math.min(c.queued, c.g - c.held) or 0
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
              permits = permits + (h.permit_entitled and o.n or math.max(o.n, o.permit_claim))
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
  -- Admits h (out of its queue, or never in it): its permits, its tokens, and its class's share of both.
  admit_head = function(h)
    take(h.n)
    if interval > 0 and h.token_entitled then assured_charge(cls[h.k], h.n) end
    take_tokens(h.n)
    return grant(h.id, h.n, h.ttl, h.k)
  end
  serve_multi = function(mine, handed, all)
    while true do
      if free <= 0 and not all then return nil end
      local heads = heads_now(nil)
      if #heads == 0 then return false end
      local h = pick(heads)
      if not h then return true end
      redis.call('LPOP', cls[h.k].list)
      drop_waiter(h.id)
      local token, expires = admit_head(h)
      deliver(h.id, h.n, token, expires, h.wake, mine, handed)
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
    local records = redis.call('LRANGE', list, at, at + 99)
    if #records == 0 then return sum end
    local ids, ns = {}, {}
    for i, record in ipairs(records) do
      local wid, n = parse_waiter(record)
      ids[i], ns[i] = wid or '', n or 0
    end
    for i, score in ipairs(redis.call('ZMSCORE', expiry, unpack(ids))) do
      if score then
        sum = sum + ns[i]
        if ids[i] == id then return sum end
      end
    end
    at = at + #records
  end
end

-- With a rate: µs until waiter `id` may be admitted by time alone — the tokens of the waiters of its class up to it,
-- or (with classes) its class's assured bucket's next token, whichever is sooner; 0 when neither is short.
local function rate_wait(id)
  if not multi then
    if token_wait(cls[1].queued) == 0 then return 0 end -- the tokens of every waiter are there: not the rate
    return token_wait(queued_through(id, queue))
  end
  local w = redis.call('HGET', waiters_hash, id)
  local k = w and tonumber(string.match(w, '^(%d+):'))
  local c = k and cls[k + 1]
  if not c then return 0 end
  local wait = token_wait(c.queued) == 0 and 0 or token_wait(queued_through(id, c.list))
  local a = assured_wait(c)
  if a and a > 0 and (wait == 0 or a < wait) then wait = a end
  return wait
end

-- {status, a, now, grants handed to the caller...}
local function with_grants(status, a, handed)
  local r = { status, a, now }
  for _, g in ipairs(handed) do r[#r + 1] = g end
  return r
end

local function lease_reply(id)
  local v = redis.call('HGET', leases, id)
  if not v then return nil end
  local n, token = string.match(v, '^(%d+):(%d+)')
  return { GRANTED, tonumber(n), tonumber(token), tonumber(redis.call('ZSCORE', holders, id)), now }
end

-- An acquire with classes: the newcomer is admitted at once when its class has nobody waiting and the share rule
-- picks it among the heads (the others already served); otherwise it queues in its class, FIFO. Replies as acquire's.
-- A deadline fails at once when the global bucket cannot give it its tokens, after those of its class's waiters.
-- A request of class k (1-based; 1 without classes) that was not admitted joins its class's queue: {3, free, now} when
-- max_waiters (A[7]; negative: no limit) already wait, {8, µs, now} when the rate cannot give it its tokens after those
-- of its class's waiters by its deadline (A[10]), else {1, seq, now, µs until the rate can admit it (0: not the rate)}.
-- An id already waiting keeps its place and its first request; a new one joins the tail. (Ids are never reused: one
-- that left and came back would find its old place, and its old request, if its record were still queued.)
local function join(A, id, n, ttl, k)
  local most = num(A[7], 'max waiters')
  if most >= 0 and redis.call('ZCARD', expiry) >= most then return { FULL, free, now } end
  local ready = 0
  if interval > 0 then
    ready = token_wait(cls[k].queued + n)
    local budget = tonumber(A[10] or '-1') or -1
    if budget >= 0 and ready > budget then return { TOO_LATE, ready, now } end
  end
  local until_us = now + num(A[8], 'waiter ttl')
  seq = seq + 1
  dirty.seq = true
  if redis.call('ZADD', expiry, int(until_us), id) == 1 then
    redis.call('RPUSH', cls and cls[k].list or queue, id .. ':' .. int(n) .. ':' .. int(ttl) .. ':' .. A[9])
    if tracked then
      redis.call('HSET', waiters_hash, id, int(k - 1) .. ':' .. int(n) .. ':' .. int(seq))
      cls[k].queued = cls[k].queued + n
      dirty.classes = true
    end
  end
  due(until_us)
  -- With classes, its class's assured bucket may be what holds it back: it asks again when either could let it in.
  if multi then
    local a = assured_wait(cls[k])
    if a and a > 0 and (ready == 0 or a < ready) then ready = a end
  end
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
        return { GRANTED, n, token, expires, now }
      end
    end
    if A[6] ~= '1' then return { UNAVAILABLE, free, now } end
    return join(A, id, n, ttl, k)
  end
end

-- The operations. Each takes A, its arguments laid out as ARGV is for a call of that one operation (A[1] its name,
-- A[2] the initial capacity, then its own), and returns its reply; the meta fields are saved once, after the call's
-- last operation.
local run = {}

function run.acquire(A)
  -- A[3] id, [4] n, [5] lease ttl µs, [6] 1 to wait / 0 not, [7] max waiters, [8] waiter ttl µs, [9] wake key,
  -- [10] (optional) the µs the caller waits at most, -1: no deadline. Queued: {1, seq, now, µs until the rate can
  -- admit it after the waiters ahead (0: no rate, or it is not the rate that holds it back)}.
  -- With classes, [11] the request's class (its priority, from 0).
  if differs then return { CONFLICT, 0, now, definition() } end
  local id, n, ttl = A[3], num(A[4], 'n'), num(A[5], 'lease ttl')
  if multi then return acquire_in_class(A, id, n, ttl) end
  -- Free permits go to the queue first; with none free, n <= free cannot hold and the queue need not be read.
  local others_first = free > 0 and serve(nil, nil)
  if too_large(n) then return { TOO_LARGE, capacity, now } end
  if not others_first and n <= free and token_wait(n) == 0 then
    take(n)
    take_tokens(n)
    local token, expires = grant(id, n, ttl)
    return { GRANTED, n, token, expires, now }
  end
  if A[6] ~= '1' then return { UNAVAILABLE, free, now } end
  return join(A, id, n, ttl, 1)
end

function run.poll(A)
  -- A[3] id, [4] waiter ttl µs: granted (the lease), still queued (its expiry pushed back), or unknown
  local id = A[3]
  if free > 0 then serve(nil, nil) end
  local l = lease_reply(id)
  if l then return l end
  if redis.call('ZSCORE', expiry, id) then
    redis.call('ZADD', expiry, int(now + num(A[4], 'waiter ttl')), id)
    return { QUEUED, 0, now, interval > 0 and rate_wait(id) or 0 }
  end
  return { UNKNOWN, 0, now }
end

function run.cancel(A)
  -- A[3] id, [4] the caller's wake key: leaves the queue, and a grant that came first goes back as its release would
  -- (the caller gave up: nobody will use that lease). Whole here, so that a cancel whose reply is lost, or that
  -- reaches Redis after its caller stopped waiting for the answer, leaves nothing behind.
  local id = A[3]
  local n = take_lease(id)
  if n then
    take(-n)
    local handed = {}
    serve(A[4], handed)
    return with_grants(LEFT, n, handed)
  end
  if drop_waiter(id) then
    compact()
    local handed = {}
    serve(A[4], handed) -- the head may have been the one holding the others back
    return with_grants(LEFT, 0, handed)
  end
  return { UNKNOWN, 0, now }
end

function run.release(A)
  -- A[3] id, [4] the caller's wake key, [5] the lease's permits (optional): they go to the head waiters, or back to
  -- the free count
  local n = take_lease(A[3], A[5] and num(A[5], 'n'))
  if not n then return { UNKNOWN, 0, now } end
  take(-n)
  local handed = {}
  serve(A[4], handed)
  return with_grants(GRANTED, n, handed)
end

function run.renew(A)
  -- A[3] id, [4] lease ttl µs: a lease still held (not past its expiry) is extended to now + ttl
  local id = A[3]
  if free > 0 then serve(nil, nil) end
  if not redis.call('ZSCORE', holders, id) then return { UNKNOWN, 0, now } end
  local expires = now + num(A[4], 'lease ttl')
  redis.call('ZADD', holders, 'XX', int(expires), id)
  return { GRANTED, expires, now }
end

function run.set_capacity(A)
  -- A[3] the new capacity, [4] the caller's wake key: permits held beyond it are a debt that releases pay before
  -- anyone is granted
  local c = num(A[3], 'capacity')
  take(capacity - c)
  capacity = c
  dirty.capacity = true
  local handed = {}
  serve(A[4], handed, true)
  return with_grants(GRANTED, capacity, handed)
end

function run.set_limits(A)
  -- A[3] the new definition "capacity/interval/burst[/classes]", [4] the caller's wake key: the capacity as
  -- set_capacity sets it; the bucket keeps the tokens it holds, up to the new burst (a new rate starts full); the
  -- classes' guarantees change, what they hold and their queues stay (their number cannot change: status 7)
  local c, i, b, classes = parse_definition(A[3])
  if not c then return redis.error_reply('ERR admit semaphore: bad definition ' .. tostring(A[3])) end
  local count = 1
  if classes then count = select(2, string.gsub(classes, ',', ',')) + 1 end
  if count ~= (cls and #cls or 1) then return { CONFLICT, 0, now, definition() } end
  if multi then
    local k = 0
    for g, ai, ab in string.gmatch(classes, '(%d+):(%d+):(%d+)') do
      k = k + 1
      cls[k].g, cls[k].ai, cls[k].ab = tonumber(g), tonumber(ai), tonumber(ab)
    end
  end
  class_text = classes
  take(capacity - c)
  capacity = c
  dirty.capacity = true
  if not multi and (interval == 0) ~= (i == 0) then
    -- Counting the waiters' permits (see `tracked`) starts or stops with the rate: from the queue as it is.
    redis.call('DEL', waiters_hash)
    local sum = 0
    if i > 0 then
      for _, record in ipairs(redis.call('LRANGE', queue, 0, -1)) do
        local id, n = parse_waiter(record)
        if n and redis.call('ZSCORE', expiry, id) then
          redis.call('HSET', waiters_hash, id, '0:' .. int(n) .. ':0')
          sum = sum + n
        end
      end
    end
    cls = { { g = 0, ai = 0, ab = 0, held = 0, atat = 0, list = queue, queued = sum } }
    tracked = i > 0
    dirty.classes = true
  end
  if interval == 0 or i == 0 then
    tat = 0
  else
    local tokens = math.min(burst, (now - tat) / interval)
    tat = math.floor(now - math.min(tokens, b) * i)
  end
  interval, burst = i, b
  dirty.rate, dirty.tat = true, true
  local handed = {}
  serve(A[4], handed, true)
  return with_grants(GRANTED, capacity, handed)
end

function run.inspect(A)
  -- A[3] the most holders and waiters to list: {0, capacity, free, fence, now, holders, queue, holder count, waiter
  -- count, interval, burst, tokens}, holders as {id, n, token, expiry}, the queue in order as {id, n, waiter expiry};
  -- interval, burst and tokens (whole tokens in the bucket now) are 0 without a rate; with classes each holder and
  -- waiter also has its class (the queue in arrival order over all classes), and the last element is {held, queued}
  -- per class
  if free > 0 then serve(nil, nil) end
  local most = num(A[3], 'limit')
  local hs = {}
  local ids = redis.call('ZRANGE', holders, 0, most - 1, 'WITHSCORES')
  for i = 1, #ids, 2 do
    local v = redis.call('HGET', leases, ids[i]) or '0:0'
    local n, token, k = string.match(v, '^(%d+):(%d+):?(%d*)')
    hs[#hs + 1] = { ids[i], tonumber(n), tonumber(token), tonumber(ids[i + 1]), tonumber(k) or 0 }
  end
  local qs = {}
  local lists = { queue }
  if multi then
    for k = 2, #cls do lists[k] = cls[k].list end
  end
  for k, list in ipairs(lists) do
    local at = 0
    while #qs < most * k do -- the first `most` waiters still waiting of each class, in order
      local records = redis.call('LRANGE', list, at, at + most - 1)
      for _, record in ipairs(records) do
        local id, n = parse_waiter(record)
        local until_us = id and redis.call('ZSCORE', expiry, id)
        if n and until_us and #qs < most * k then qs[#qs + 1] = { id, n, tonumber(until_us), k - 1 } end
      end
      if #records < most then break end
      at = at + most
    end
  end
  if multi then -- the first `most` of all classes, in arrival order
    local arrival = {}
    for _, q in ipairs(qs) do
      arrival[q[1]] = tonumber(string.match(redis.call('HGET', waiters_hash, q[1]) or '', ':(%d+)$')) or 0
    end
    table.sort(qs, function(a, b) return arrival[a[1]] < arrival[b[1]] end)
    for i = #qs, most + 1, -1 do qs[i] = nil end
  end
  local tokens = 0
  if interval > 0 then tokens = math.floor(math.min(burst, (now - tat) / interval)) end
  local per_class = {}
  if multi then
    for k = 1, #cls do per_class[k] = { cls[k].held, cls[k].queued } end
  end
  return { GRANTED, capacity, free, fence, now, hs, qs, redis.call('ZCARD', holders), redis.call('ZCARD', expiry), interval,
    burst, tokens, per_class }
end

local function perform(A)
  local f = run[A[1]]
  if not f then return redis.error_reply('ERR admit semaphore: unknown operation ' .. tostring(A[1])) end
  return f(A)
end

-- One call: its keys and arguments as KEYS and ARGV are a script's. Reads the state, takes the short way or the
-- operation(s), writes the state back once.
local function call(KEYS, ARGV)
  meta, holders, leases, queue, expiry = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
  op = ARGV[1]
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  dirty = {}
  do
    local m = redis.call('HMGET', meta, 'capacity', 'free', 'fence', 'next', 'seq', 'interval', 'burst', 'tat',
      'classes', 'definition', 'queued:1')
    capacity, free, fence, next_due = tonumber(m[1]), tonumber(m[2]), tonumber(m[3]) or 0, tonumber(m[4]) or 0
    seq = tonumber(m[5]) or 0
    interval, burst, tat = tonumber(m[6]) or 0, tonumber(m[7]) or 0, tonumber(m[8]) or 0
    class_text, stored_definition, queued_one = m[9] or nil, m[10] or nil, tonumber(m[11]) or 0
    if not capacity then
      if op == 'inspect' then return { UNKNOWN, 0, now } end -- no such semaphore: nothing is created by looking
      local c, i, b, classes = tonumber(ARGV[2]), 0, 0, nil
      if not c then
        c, i, b, classes = parse_definition(ARGV[2] or '')
        if not c then return redis.error_reply('ERR admit semaphore: bad definition ' .. tostring(ARGV[2])) end
      end
      capacity = num(c, 'capacity')
      free = capacity
      interval, burst, class_text = i, b, classes
      dirty.capacity, dirty.free, dirty.rate = true, true, interval > 0 or class_text ~= nil
    end
  end
  cls, multi = nil, false
  if class_text then
    cls = {}
    for g, ai, ab in string.gmatch(class_text, '(%d+):(%d+):(%d+)') do
      cls[#cls + 1] = { g = tonumber(g), ai = tonumber(ai), ab = tonumber(ab) }
    end
    multi = #cls > 1
    if multi then
      local fields = {}
      for k = 1, #cls do
        fields[#fields + 1] = 'held:' .. k
        fields[#fields + 1] = 'queued:' .. k
        fields[#fields + 1] = 'atat:' .. k
      end
      local v = redis.call('HMGET', meta, unpack(fields))
      for k = 1, #cls do
        cls[k].held, cls[k].queued, cls[k].atat = tonumber(v[3 * k - 2]) or 0, tonumber(v[3 * k - 1]) or 0,
          tonumber(v[3 * k]) or 0
        cls[k].list = k == 1 and queue or KEYS[5 + k] or (queue .. ':' .. (k - 1))
      end
    end
  end
  waiters_hash = KEYS[6] or (string.sub(meta, 1, -5) .. 'waiters')
  -- With a rate or classes, each waiter's class, n and arrival are kept in the waiters hash, and each class's queued
  -- permits in meta (queued:k), so that the tokens the waiters ahead of a request ask for are known without reading the
  -- queue. One class with a rate: cls[1] holds only that count.
  tracked = multi or interval > 0
  if tracked and not multi then
    cls = { { g = 0, ai = 0, ab = 0, held = 0, atat = 0, list = queue,
      queued = queued_one } }
  end
  -- An admission that names another definition than the stored one (see ARGV[2]); never a semaphore. The stored text
  -- is kept in meta's definition field whenever the capacity or the rate changes (older semaphores: computed).
  differs = not tonumber(ARGV[2]) and ARGV[2] ~= (stored_definition or definition())

  -- The two commonest calls take a short way: a free permit taken, and a lease given back, while nobody waits and
  -- nothing can have expired. Their effects and replies are exactly those of run.acquire and run.release below (a
  -- batch, which takes the long way, is tested to agree with them), without the general machinery (and, run as a
  -- script, without making the helpers: in Redis's Lua, making those two dozen closures costs about as much as these
  -- calls' own commands).
  if capacity and not differs and not multi and now < next_due
      and (op == 'acquire' or (op == 'release' and ARGV[5])) and redis.call('ZCARD', expiry) == 0 then
    local id = ARGV[3]
    if op == 'release' then
      local n = num(ARGV[5], 'n')
      if redis.call('ZREM', holders, id) == 0 then return { UNKNOWN, 0, now } end
      redis.call('HDEL', leases, id)
      redis.call('HSET', meta, 'free', int(free + n))
      return { GRANTED, n, now }
    end
    local n, ttl = num(ARGV[4], 'n'), num(ARGV[5], 'lease ttl')
    local fits, new_tat = n <= free and n <= capacity, nil
    if fits and interval > 0 then -- the tokens too, as token_wait() and take_tokens() below
      new_tat = math.max(tat, now - burst * interval) + n * interval
      fits = n <= burst and new_tat <= now
    end
    if fits then
      fence = math.max(fence + 1, now) -- as grant() below
      local expires = now + ttl
      redis.call('ZADD', holders, int(expires), id)
      redis.call('HSET', leases, id, int(n) .. ':' .. int(fence))
      local fields = { 'free', int(free - n), 'fence', int(fence) }
      if expires < next_due then fields[#fields + 1] = 'next'; fields[#fields + 1] = int(expires) end
      if new_tat then fields[#fields + 1] = 'tat'; fields[#fields + 1] = int(new_tat) end
      redis.call('HSET', meta, unpack(fields))
      return { GRANTED, n, fence, expires, now }
    end
  end
  if multi and not acquire_in_class then -- made once (a library) or only with classes (a script)
    make_class_helpers()
    make_class_acquire()
  end
  sweep()

  local reply
  if op == 'batch' then
    -- Several operations of one process in one call, in order, as if each were a call of its own made one after the
    -- other at the same time: ARGV[3] how many, then each as its argument count c followed by c arguments (its name,
    -- then its own arguments: A[3] onwards). The reply is the array of their replies.
    reply = {}
    local at = 4
    for k = 1, num(ARGV[3], 'batch size') do
      local c = num(ARGV[at], 'argument count')
      local A = { ARGV[at + 1], ARGV[2] }
      for j = 2, c do A[j + 1] = ARGV[at + j] end
      reply[k] = perform(A)
      at = at + c + 1
    end
  else
    reply = perform(ARGV)
  end
  save()
  return reply
end
