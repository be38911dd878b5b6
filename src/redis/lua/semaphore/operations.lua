-- semaphore.lua, part 4 of 5 (joined in order by cmake/redis.cmake; part 1, core.lua, states the protocol): the
-- operations that ARGV[1] names.

-- The operations. Each takes A, its arguments laid out as ARGV is for a call of that one operation (A[1] its name,
-- A[2] the initial capacity, then its own), and returns its reply; the meta fields are saved once, after the call's
-- last operation.
local run = {}

function run.acquire(A)
  -- A[3] id, [4] n, [5] lease ttl µs (both in decimal digits: see digits()), [6] 1 to wait / 0 not, [7] max waiters, [8] waiter ttl µs, [9] wake key,
  -- [10] (optional) the µs the caller waits at most, -1: no deadline. Granted: {0, n, token, expires, now, free after
  -- it}. Queued: {1, seq, now, µs until the rate can
  -- admit it after the waiters ahead (0: no rate, or it is not the rate that holds it back)}.
  -- With classes, [11] the request's class (its priority, from 0).
  if differs then return { CONFLICT, 0, now, definition() } end
  local id, n, ttl = A[3], digits(A[4], 'n'), digits(A[5], 'lease ttl')
  if multi then return acquire_in_class(A, id, n, ttl) end
  -- Free permits go to the queue first; with none free, n <= free cannot hold and the queue need not be read.
  local others_first = free > 0 and serve(nil, nil)
  if too_large(n) then return { TOO_LARGE, capacity, now } end
  if not others_first and n <= free and token_wait(n) == 0 then
    take(n)
    take_tokens(n)
    local token, expires = grant(id, n, ttl, nil, A[4])
    return { GRANTED, n, token, expires, now, free }
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
  if rcall('ZSCORE', expiry, id) then
    local until_us = now + num(A[4], 'waiter ttl')
    rcall('ZADD', expiry, int(until_us), id)
    wrote(expiry, until_us)
    local c = multi and class_of(id)
    return { QUEUED, 0, now, ask_again_in(id, c and c.list or queue, interval > 0 and rate_wait(id, c) or 0) }
  end
  return { UNKNOWN, 0, now }
end

function run.cancel(A)
  -- A[3] id, [4] the caller's wake key: leaves the queue, and a grant that came first goes back as its release would,
  -- its tokens too (the caller gave up: nobody will use that lease). Whole here, so that a cancel whose reply is lost, or that
  -- reaches Redis after its caller stopped waiting for the answer, leaves nothing behind.
  local id = A[3]
  local n, charged = take_lease(id)
  if n then
    take(-n)
    refund(n, charged)
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
  flush_writes()
  if not rcall('ZSCORE', holders, id) then return { UNKNOWN, 0, now } end
  local expires = now + num(A[4], 'lease ttl')
  rcall('ZADD', holders, 'XX', int(expires), id)
  wrote(holders, expires)
  due(expires) -- (earlier than before only when Redis's clock stepped back: the sweep must not come after it)
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

-- The classes start anew as `count` classes (their numbers come after, from the definition): the meta fields and
-- queues of the old ones go. Only while nobody holds or waits: a lease or a waiter keeps its class's number.
local function reclass(count)
  local old = multi and #cls or 1
  local fields = { 'queued:1' }
  for k = 1, old do
    fields[#fields + 1] = 'held:' .. k
    fields[#fields + 1] = 'atat:' .. k
    if k > 1 then
      fields[#fields + 1] = 'queued:' .. k
      rcall('DEL', cls[k].list)
    end
  end
  rcall('HDEL', meta, unpack(fields))
  rcall('DEL', queue, waiters_hash) -- (records of waiters that left, and the marks of leases that ended)
  multi = count > 1
  cls = nil
  if multi then
    cls = {}
    for k = 1, count do
      cls[k] = { g = 0, ai = 0, ab = 0, held = 0, queued = 0, atat = 0,
        list = k == 1 and queue or (queue .. ':' .. (k - 1)) }
    end
    if not acquire_in_class then -- (as call() makes them)
      make_class_helpers()
      make_class_acquire()
    end
    dirty.classes = true
  elseif interval > 0 then
    cls = { { g = 0, ai = 0, ab = 0, held = 0, atat = 0, list = queue, queued = 0 } }
    dirty.classes = true
  else
    dirty.classes = false -- (nothing to count: save() writes no class field)
  end
  tracked = multi or interval > 0
end

function run.set_limits(A)
  -- A[3] the new definition "capacity/interval/burst[/classes]", [4] the caller's wake key: the capacity as
  -- set_capacity sets it; the bucket keeps the tokens it holds, up to the new burst (a new rate starts full); the
  -- classes' guarantees change, what they hold and their queues stay; their number changes only while nobody holds or
  -- waits (else status 7: a lease or a waiter keeps its class's number)
  local c, i, b, classes = parse_definition(A[3])
  if not c then return redis.error_reply('ERR admit semaphore: bad definition ' .. tostring(A[3])) end
  local count = 1
  if classes then count = select(2, string.gsub(classes, ',', ',')) + 1 end
  if count ~= (multi and #cls or 1) then
    flush_writes()
    if rcall('ZCARD', holders) > 0 or rcall('ZCARD', expiry) > 0 then return { CONFLICT, 0, now, definition() } end
    reclass(count)
  end
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
    rcall('DEL', waiters_hash)
    local sum = 0
    if i > 0 then
      for _, record in ipairs(rcall('LRANGE', queue, 0, -1)) do
        local id, n = parse_waiter(record)
        if n and rcall('ZSCORE', expiry, id) then
          rcall('HSET', waiters_hash, id, '0:' .. int(n) .. ':0')
          wrote(waiters_hash)
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
    local tokens = min(burst, (now - tat) / interval)
    tat = floor(now - min(tokens, b) * i)
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
  -- waiter also has its class (the queue in arrival order over all classes), and the 13th element is {held, queued}
  -- per class; the 14th the µs until the bucket holds one more whole token (0 when it is full, or without a rate)
  if free > 0 then serve(nil, nil) end
  flush_writes()
  local most = num(A[3], 'limit')
  local hs = {}
  local ids = rcall('ZRANGE', holders, 0, most - 1, 'WITHSCORES')
  for i = 1, #ids, 2 do
    local v = rcall('HGET', leases, ids[i]) or '0:0'
    local n, token, k = match(v, '^(%d+):(%d+):?(%d*)')
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
      local records = rcall('LRANGE', list, at, at + most - 1)
      for _, record in ipairs(records) do
        local id, n = parse_waiter(record)
        local until_us = id and rcall('ZSCORE', expiry, id)
        if n and until_us and #qs < most * k then qs[#qs + 1] = { id, n, tonumber(until_us), k - 1 } end
      end
      if #records < most then break end
      at = at + most
    end
  end
  if multi then -- the first `most` of all classes, in arrival order
    local arrival = {}
    for _, q in ipairs(qs) do
      arrival[q[1]] = tonumber(match(rcall('HGET', waiters_hash, q[1]) or '', ':(%d+)$')) or 0
    end
    table.sort(qs, function(a, b) return arrival[a[1]] < arrival[b[1]] end)
    for i = #qs, most + 1, -1 do qs[i] = nil end
  end
  local tokens, next_token = 0, 0
  if interval > 0 then
    local held = min(burst, (now - tat) / interval)
    tokens = floor(held)
    if tokens < burst then next_token = math.ceil((tokens + 1 - held) * interval) end
  end
  local per_class = {}
  if multi then
    for k = 1, #cls do per_class[k] = { cls[k].held, cls[k].queued } end
  end
  return { GRANTED, capacity, free, fence, now, hs, qs, rcall('ZCARD', holders), rcall('ZCARD', expiry), interval,
    burst, tokens, per_class, next_token }
end

local function perform(A)
  local f = run[A[1]]
  if not f then return redis.error_reply('ERR admit semaphore: unknown operation ' .. tostring(A[1])) end
  return f(A)
end
