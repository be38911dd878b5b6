-- admit distributed admission (admit::redis::semaphore, admit::redis::admission): leases on the server's clock,
-- fencing tokens, a FIFO queue of waiters served by hand-off, and optionally a rate: a token bucket that a request
-- must find n tokens in, together with its n permits, to be admitted (reserve-then-commit: a waiter holds neither).
-- A semaphore is an admission without a rate. One script; ARGV[1] names the operation. Not a limiter script: no
-- common.lua.
--
-- KEYS (every key shares the semaphore's hash tag {name}, so a Redis Cluster keeps them in one slot):
--   KEYS[1] meta     hash: capacity, free (capacity minus the permits held; negative after a cut), fence (the last
--                    fencing token), seq (the last arrival number), next (no lease or waiter expires before this
--                    time, µs: the sweep runs only from then on); with a rate also interval (µs one token costs,
--                    >= 1), burst (tokens the bucket holds at most, >= 1) and tat (the bucket's theoretical arrival
--                    time, µs: it holds min(burst, (now - tat) / interval) tokens; absent: full). A capacity of 2^50
--                    is no concurrency limit (an admission's max_in_flight 0).
--   KEYS[2] holders  sorted set: lease id -> the lease's expiry (µs since the Unix epoch, server time)
--   KEYS[3] leases   hash: lease id -> "n:token"
--   KEYS[4] waiting  list: the queue, one record "id:n:lease_ttl_us:wake_key" per waiter in arrival order (its head is
--                    served first); a record whose id is not in expiry is a waiter that left (cancelled, expired):
--                    dropped when it reaches the head. Ids never contain ':' and wake keys are never empty (the
--                    library's ids are 32 hex digits): a record that cannot be read back loses its waiter
--   KEYS[5] expiry   sorted set: waiter id -> the waiter's expiry (µs); the waiters, whatever their place: a waiter
--                    that stops polling leaves the queue
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
-- exist yet (meta absent; an existing one keeps its own), or an admission's "capacity/interval/burst" (interval 0 and
-- burst 0: no rate), which must be the stored one: an acquire that names another is refused with status 7 and the
-- stored definition (set_limits changes it; releases, polls and cancels are never refused); then the operation's own
-- arguments (below); or ARGV[1] 'batch': several operations of one process, one after the
-- other (see the end of the script). Every call first sweeps when something may have expired (meta's next has
-- passed): leases past their expiry free their permits, waiters past theirs leave the queue; then the head waiters
-- are granted while their requests fit. The work per operation is O(log N) in the number N of holders and waiters,
-- plus O(log N) per lease or waiter expired, granted or dropped (and, amortized, O(1) per waiter that left, for the
-- queue's compaction).
-- Time is TIME only, in integer microseconds (doubles are exact below 2^53; now is ~1.8e15).
-- Replies: {status, ...}; status 0 granted / done, 1 queued, 2 unavailable (try_acquire), 3 queue full,
-- 4 exceeds capacity (or the burst), 5 unknown (no such lease or waiter: released, expired, cancelled, never existed),
-- 6 cancelled (left the queue, or gave back the grant that came first), 7 another definition (see ARGV[2]), 8 too late
-- (the rate cannot give the request its tokens, after those of the waiters ahead of it, within its deadline).
local meta, holders, leases, queue, expiry = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local op = ARGV[1]

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])

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
local capacity, free, fence, next_due, seq, interval, burst, tat
local dirty = {}
-- An admission's definition "capacity/interval/burst" (nil for a semaphore's plain capacity).
local function parse_definition(text)
  local c, i, b = string.match(text, '^(%d+)/(%d+)/(%d+)$')
  if not c then return nil end
  return tonumber(c), tonumber(i), tonumber(b)
end
local asked_capacity, asked_interval, asked_burst = tonumber(ARGV[2]), 0, 0
if not asked_capacity and ARGV[2] then
  asked_capacity, asked_interval, asked_burst = parse_definition(ARGV[2])
  if not asked_capacity or (asked_interval == 0) ~= (asked_burst == 0) then
    return redis.error_reply('ERR admit semaphore: bad definition ' .. tostring(ARGV[2]))
  end
end
do
  local m = redis.call('HMGET', meta, 'capacity', 'free', 'fence', 'next', 'seq', 'interval', 'burst', 'tat')
  capacity, free, fence, next_due = tonumber(m[1]), tonumber(m[2]), tonumber(m[3]) or 0, tonumber(m[4]) or 0
  seq = tonumber(m[5]) or 0
  interval, burst, tat = tonumber(m[6]) or 0, tonumber(m[7]) or 0, tonumber(m[8]) or 0
  if not capacity then
    if op == 'inspect' then return { 5, 0, now } end -- no such semaphore: nothing is created by looking
    capacity = num(asked_capacity, 'capacity')
    free = capacity
    interval, burst = asked_interval, asked_burst
    dirty.capacity, dirty.free, dirty.rate = true, true, interval > 0
  end
end
-- The stored definition, as ARGV[2] writes it.
local function definition()
  return string.format('%d/%d/%d', capacity, interval, burst)
end
-- An admission that names another definition than the stored one (see ARGV[2]); never a semaphore.
local differs = not tonumber(ARGV[2]) and ARGV[2] ~= definition()

-- The two commonest calls take a short way: a free permit taken, and a lease given back, while nobody waits and
-- nothing can have expired. Their effects and replies are exactly those of run.acquire and run.release below (a
-- batch, which takes the long way, is tested to agree with them), without making the helpers below: in Redis's Lua,
-- making those two dozen closures costs about as much as these calls' own commands.
if capacity and not differs and now < next_due
    and (op == 'acquire' or (op == 'release' and ARGV[5])) and redis.call('ZCARD', expiry) == 0 then
  local id = ARGV[3]
  if op == 'release' then
    local n = num(ARGV[5], 'n')
    if redis.call('ZREM', holders, id) == 0 then return { 5, 0, now } end
    redis.call('HDEL', leases, id)
    redis.call('HSET', meta, 'free', int(free + n))
    return { 0, n, now }
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
    return { 0, n, fence, expires, now }
  end
end

local function save()
  local args = {}
  if dirty.capacity then args[#args + 1] = 'capacity'; args[#args + 1] = int(capacity) end
  if dirty.free then args[#args + 1] = 'free'; args[#args + 1] = int(free) end
  if dirty.fence then args[#args + 1] = 'fence'; args[#args + 1] = int(fence) end
  if dirty.next then args[#args + 1] = 'next'; args[#args + 1] = int(next_due) end
  if dirty.seq then args[#args + 1] = 'seq'; args[#args + 1] = int(seq) end
  if dirty.rate then
    args[#args + 1] = 'interval'; args[#args + 1] = int(interval)
    args[#args + 1] = 'burst'; args[#args + 1] = int(burst)
  end
  if dirty.tat then args[#args + 1] = 'tat'; args[#args + 1] = int(tat) end
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
local function grant(id, n, ttl)
  fence = math.max(fence + 1, now)
  dirty.fence = true
  local expires = now + ttl
  redis.call('ZADD', holders, int(expires), id)
  redis.call('HSET', leases, id, int(n) .. ':' .. int(fence))
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
  return redis.call('ZREM', expiry, id) == 1
end

-- Rebuilds the list from the records of the waiters still waiting, in order, once it holds more than twice as many
-- records as there are waiters (plus 32): O(N), at most once per N/2 departures.
local function compact()
  local length = redis.call('LLEN', queue)
  if length <= 2 * redis.call('ZCARD', expiry) + 32 then return end
  local records = redis.call('LRANGE', queue, 0, -1)
  redis.call('DEL', queue)
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
    if #live > 0 then redis.call('RPUSH', queue, unpack(live)) end
  end
end

-- The permits of lease `id` (nil when there is no such lease), which is removed. `n`: its permits when the caller
-- knows them (the lease's own release), else read.
local function take_lease(id, n)
  if n then
    if redis.call('ZREM', holders, id) == 0 then return nil end
    redis.call('HDEL', leases, id)
    return n
  end
  local v = redis.call('HGET', leases, id)
  if not v then return nil end
  redis.call('HDEL', leases, id)
  redis.call('ZREM', holders, id)
  return tonumber(string.match(v, '^(%d+):'))
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

-- The head waiters are granted, in order, while their requests fit (a head that does not fit holds back everyone
-- behind it: no overtaking, so large requests cannot starve). A grant to a waiter on wake list `mine` goes into
-- `handed` (returned to the caller) instead of its wake list. Stops as soon as no permit is free, unless `all` (then
-- a head larger than the capacity is dropped even so). Returns whether anyone is still queued (nil: not looked).
local function serve(mine, handed, all)
  while true do
    if free <= 0 and not all then return nil end
    local record = redis.call('LPOP', queue)
    if not record then return false end
    local id, n, ttl, wake = parse_waiter(record)
    if not n then
      -- an unreadable record: its waiter leaves (never an error: an error would leave the sweep half done)
      if id then drop_waiter(id) end
    elseif too_large(n) then
      -- Larger than the capacity or the burst (cut since it queued): it could never be granted and would hold everyone back. It
      -- leaves the queue; its unreadable wake-up makes it poll, find itself unknown and ask again: exceeds_capacity.
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
      -- The wake-up carries the grant, "id:n:token:expiry:now", so that the waiter needs no call to learn it.
      local g = id .. ':' .. int(n) .. ':' .. int(token) .. ':' .. int(expires) .. ':' .. int(now)
      if handed and wake == mine then
        handed[#handed + 1] = g
      else
        redis.call('LPUSH', wake, g)
        redis.call('PEXPIRE', wake, 60000)
      end
    end
  end
end

-- The permits the live waiters up to and including `id` ask for (all of them when `id` is nil or not queued): with a
-- rate, the tokens that must come before `id` can be admitted. O(its place in the queue).
local function queued_through(id)
  local sum, at = 0, 0
  while true do
    local records = redis.call('LRANGE', queue, at, at + 99)
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

-- {status, a, now, grants handed to the caller...}
local function with_grants(status, a, handed)
  local r = { status, a, now }
  for _, g in ipairs(handed) do r[#r + 1] = g end
  return r
end

local function lease_reply(id)
  local v = redis.call('HGET', leases, id)
  if not v then return nil end
  local n, token = string.match(v, '^(%d+):(%d+)$')
  return { 0, tonumber(n), tonumber(token), tonumber(redis.call('ZSCORE', holders, id)), now }
end

-- The operations. Each takes A, its arguments laid out as ARGV is for a call of that one operation (A[1] its name,
-- A[2] the initial capacity, then its own), and returns its reply; the meta fields are saved once, after the call's
-- last operation.
local run = {}

function run.acquire(A)
  -- A[3] id, [4] n, [5] lease ttl µs, [6] 1 to wait / 0 not, [7] max waiters, [8] waiter ttl µs, [9] wake key,
  -- [10] (optional) the µs the caller waits at most, -1: no deadline. Queued: {1, seq, now, µs until the rate can
  -- admit it after the waiters ahead (0: no rate, or it is not the rate that holds it back)}.
  if differs then return { 7, 0, now, definition() } end
  local id, n, ttl = A[3], num(A[4], 'n'), num(A[5], 'lease ttl')
  -- Free permits go to the queue first; with none free, n <= free cannot hold and the queue need not be read.
  local others_first = free > 0 and serve(nil, nil)
  if too_large(n) then return { 4, capacity, now } end
  if not others_first and n <= free and token_wait(n) == 0 then
    take(n)
    take_tokens(n)
    local token, expires = grant(id, n, ttl)
    return { 0, n, token, expires, now }
  end
  if A[6] ~= '1' then return { 2, free, now } end
  local most = num(A[7], 'max waiters') -- negative: no limit
  if most >= 0 and redis.call('ZCARD', expiry) >= most then return { 3, free, now } end
  local ready = 0
  if interval > 0 then
    ready = token_wait(queued_through(nil) + n)
    local budget = tonumber(A[10] or '-1') or -1
    if budget >= 0 and ready > budget then return { 8, ready, now } end
  end
  -- An id already waiting keeps its place and its first request; a new one joins the tail. (Ids are never reused:
  -- one that left and came back would find its old place, and its old request, if its record were still queued.)
  local until_us = now + num(A[8], 'waiter ttl')
  if redis.call('ZADD', expiry, int(until_us), id) == 1 then
    redis.call('RPUSH', queue, id .. ':' .. int(n) .. ':' .. int(ttl) .. ':' .. A[9])
  end
  seq = seq + 1
  dirty.seq = true
  due(until_us)
  return { 1, seq, now, ready }
end

function run.poll(A)
  -- A[3] id, [4] waiter ttl µs: granted (the lease), still queued (its expiry pushed back), or unknown
  local id = A[3]
  if free > 0 then serve(nil, nil) end
  local l = lease_reply(id)
  if l then return l end
  if redis.call('ZSCORE', expiry, id) then
    redis.call('ZADD', expiry, int(now + num(A[4], 'waiter ttl')), id)
    return { 1, 0, now, interval > 0 and token_wait(queued_through(id)) or 0 }
  end
  return { 5, 0, now }
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
    return with_grants(6, n, handed)
  end
  if drop_waiter(id) then
    compact()
    local handed = {}
    serve(A[4], handed) -- the head may have been the one holding the others back
    return with_grants(6, 0, handed)
  end
  return { 5, 0, now }
end

function run.release(A)
  -- A[3] id, [4] the caller's wake key, [5] the lease's permits (optional): they go to the head waiters, or back to
  -- the free count
  local n = take_lease(A[3], A[5] and num(A[5], 'n'))
  if not n then return { 5, 0, now } end
  take(-n)
  local handed = {}
  serve(A[4], handed)
  return with_grants(0, n, handed)
end

function run.renew(A)
  -- A[3] id, [4] lease ttl µs: a lease still held (not past its expiry) is extended to now + ttl
  local id = A[3]
  if free > 0 then serve(nil, nil) end
  if not redis.call('ZSCORE', holders, id) then return { 5, 0, now } end
  local expires = now + num(A[4], 'lease ttl')
  redis.call('ZADD', holders, 'XX', int(expires), id)
  return { 0, expires, now }
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
  return with_grants(0, capacity, handed)
end

function run.set_limits(A)
  -- A[3] the new definition "capacity/interval/burst", [4] the caller's wake key: the capacity as set_capacity sets
  -- it; the bucket keeps the tokens it holds, up to the new burst (a new rate starts full)
  local c, i, b = parse_definition(A[3])
  if not c or (i == 0) ~= (b == 0) then
    return redis.error_reply('ERR admit semaphore: bad definition ' .. tostring(A[3]))
  end
  take(capacity - c)
  capacity = c
  dirty.capacity = true
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
  return with_grants(0, capacity, handed)
end

function run.inspect(A)
  -- A[3] the most holders and waiters to list: {0, capacity, free, fence, now, holders, queue, holder count, waiter
  -- count, interval, burst, tokens}, holders as {id, n, token, expiry}, the queue in order as {id, n, waiter expiry};
  -- interval, burst and tokens (whole tokens in the bucket now) are 0 without a rate
  if free > 0 then serve(nil, nil) end
  local most = num(A[3], 'limit')
  local hs = {}
  local ids = redis.call('ZRANGE', holders, 0, most - 1, 'WITHSCORES')
  for i = 1, #ids, 2 do
    local v = redis.call('HGET', leases, ids[i]) or '0:0'
    local n, token = string.match(v, '^(%d+):(%d+)$')
    hs[#hs + 1] = { ids[i], tonumber(n), tonumber(token), tonumber(ids[i + 1]) }
  end
  local qs = {}
  local at = 0
  while #qs < most do -- the records of the waiters still waiting, in order
    local records = redis.call('LRANGE', queue, at, at + most - 1)
    for _, record in ipairs(records) do
      local id, n = parse_waiter(record)
      local until_us = id and redis.call('ZSCORE', expiry, id)
      if n and until_us and #qs < most then qs[#qs + 1] = { id, n, tonumber(until_us) } end
    end
    if #records < most then break end
    at = at + most
  end
  local tokens = 0
  if interval > 0 then tokens = math.floor(math.min(burst, (now - tat) / interval)) end
  return { 0, capacity, free, fence, now, hs, qs, redis.call('ZCARD', holders), redis.call('ZCARD', expiry), interval,
    burst, tokens }
end

local function perform(A)
  local f = run[A[1]]
  if not f then return redis.error_reply('ERR admit semaphore: unknown operation ' .. tostring(A[1])) end
  return f(A)
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
