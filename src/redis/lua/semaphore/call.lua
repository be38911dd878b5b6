-- semaphore.lua, the last part (joined in order by cmake/redis.cmake; part 1, core.lua, states the protocol): call(),
-- the entry point: one call, or a batch of operations.

-- The keys found by their names from meta's (see KEYS in core.lua: a call may give KEYS[1] alone, and gives KEYS[6]
-- only with classes or for a rate limiter's queue), kept for the next call on the same semaphore (loaded as a library;
-- a script makes them at every call).
local named_for, named_holders, named_leases, named_queue, named_expiry, named_waiters
local none = {} -- (an empty table: unpack(none, 1, k) is k nils)

-- ARGV[2] as the last call gave it, and what it says: a caller sends the same text call after call (Lua's strings are
-- interned: comparing two is comparing two pointers), where reading it again takes two searches and a conversion.
-- `kind`: nil (a semaphore's or an admission's own definition), the rate limiter's kind ('gcra', 'token_bucket'), or
-- false (a suffix that names neither: a bad definition). `plain`: the definition is a bare capacity (a semaphore's).
local given = { text = nil, defined = nil, idle = 0, kind = nil, plain = false }
-- The stored definition last read, and whether it has neither a rate nor classes.
local stored = { text = nil, bare = false }

-- The call's keys, time and state, read into the locals of core.lua: an error reply when the call can go no further
-- (no such key, a bad definition, inspecting a semaphore that does not exist), else nil.
local function read_state(KEYS, ARGV)
  meta = KEYS[1]
  if meta ~= named_for then -- (Lua's strings are interned: one comparison of two pointers)
    if not KEYS[2] and sub(meta, -5) ~= ':meta' then
      return redis.error_reply('ERR admit semaphore: one key given, ' .. tostring(meta) .. ', which is not a meta key')
    end
    local prefix = sub(meta, 1, -5)
    named_for, named_holders, named_leases = meta, prefix .. 'holders', prefix .. 'leases'
    named_queue, named_expiry, named_waiters = prefix .. 'waiting', prefix .. 'expiry', prefix .. 'waiters'
  end
  if KEYS[2] then
    holders, leases = KEYS[2], KEYS[3] or named_leases
    queue, expiry = KEYS[4] or named_queue, KEYS[5] or named_expiry
  else
    holders, leases, queue, expiry = named_holders, named_leases, named_queue, named_expiry
  end
  op = ARGV[1]
  now = server_time()
  now_formatted = nil
  -- (These four may be set below, and dirty.idle is; the rest are reset by read_classes(): the short way writes what
  -- it changes itself.)
  dirty.capacity, dirty.free, dirty.rate, dirty.created = false, false, false, false
  touched, latest = nil, 0
  if ARGV[2] ~= given.text then
    -- (A plain search first: most definitions have neither suffix, and a pattern costs more.)
    local defined, idle_text, kind = ARGV[2], nil, nil
    if defined and find(defined, '~', 1, true) then
      defined, idle_text = match(defined, '^([^~]*)~(%d+)$')
      if not defined then defined = ARGV[2] end
    end
    -- A rate limiter's queue: the definition ends in "@gcra" or "@token_bucket", and the rate's state is that
    -- limiter's key, KEYS[7] (see rate_key in core.lua).
    if defined and find(defined, '@', 1, true) then
      local d, k = match(defined, '^(.-)@(%a[%a_]*)$')
      if d then
        defined, kind = d, (k == 'gcra' or k == 'token_bucket') and k
      end
    end
    given.text, given.defined, given.idle, given.kind = ARGV[2], defined, tonumber(idle_text) or 0, kind
    given.plain = tonumber(defined) ~= nil
  end
  local defined = given.defined
  rate_key, rate_kind = nil, nil
  if given.kind ~= nil then
    if not given.kind or not KEYS[7] then
      return redis.error_reply('ERR admit semaphore: bad definition ' .. tostring(ARGV[2]))
    end
    rate_key, rate_kind = KEYS[7], given.kind
  end
  do
    -- The fields every call needs; the rate's and the classes' only when the stored definition has either (one
    -- without a rate or classes ends in "/0/0": the classes' part has no '/'), or when there is none (a semaphore made
    -- by an older admit, which kept no definition; or none yet). Each field asked for costs Redis about 1,500
    -- instructions, there or not: a fifth of the fields is a twelfth of a semaphore's call without waiters.
    local m = rcall('HMGET', meta, 'capacity', 'free', 'fence', 'next', 'seq', 'definition', 'idle', 'kept')
    -- The longest idle time any caller gave is kept: a caller without one (or with a shorter one) still moves the
    -- keys' expiry past its own leases.
    -- The numbers are read by arithmetic (`x + 0`), which converts a text once where tonumber() converts it twice.
    -- A field that is not a number (a key damaged from outside) fails the call with Lua's error: never read as
    -- absent, which for the capacity would make the semaphore anew under the leases it holds.
    -- The capacity, the free count and the idle times take few values: read through num()'s table of texts already
    -- read (the same text call after call); the others are new texts at almost every call.
    local stored_idle = m[7] and (integers[m[7]] or num(m[7], 'idle')) or 0
    idle = given.idle
    dirty.idle = idle > stored_idle
    if not dirty.idle then idle = stored_idle end
    kept = m[8] and (integers[m[8]] or num(m[8], 'kept')) or 0
    capacity = m[1] and (integers[m[1]] or num(m[1], 'capacity'))
    free = m[2] and (integers[m[2]] or num(m[2], 'free'))
    fence, next_due, seq = stored_number(m[3]), stored_number(m[4]), stored_number(m[5])
    stored_definition = m[6] or nil
    if stored_definition and stored_definition ~= stored.text then
      stored.text, stored.bare = stored_definition, sub(stored_definition, -4) == '/0/0'
    end
    if stored_definition and stored.bare then
      interval, burst, tat, class_text, queued_one = 0, 0, 0, nil, 0
    else
      local r = rcall('HMGET', meta, 'interval', 'burst', 'tat', 'classes', 'queued:1')
      interval, burst, tat = r[1] and r[1] + 0 or 0, r[2] and r[2] + 0 or 0, r[3] and r[3] + 0 or 0
      class_text, queued_one = r[4] or nil, r[5] and r[5] + 0 or 0
    end
    if not capacity then
      if op == 'inspect' then return { UNKNOWN, 0, now } end -- no such semaphore: nothing is created by looking
      local c, i, b, classes = tonumber(defined), 0, 0, nil
      if not c then
        c, i, b, classes = parse_definition(defined or '')
        if not c then return redis.error_reply('ERR admit semaphore: bad definition ' .. tostring(ARGV[2])) end
      end
      capacity = num(c, 'capacity')
      free = capacity
      interval, burst, class_text = i, b, classes
      dirty.capacity, dirty.free, dirty.rate = true, true, interval > 0 or class_text ~= nil
      dirty.created = true
    end
  end
  if rate_key then tat = rate_key_tat() end
  -- What keep_alive() reads, which the short way calls too: as read_classes() sets it for a limit without classes
  -- (the short way takes none), so that nothing of another semaphore's last call is left in these locals.
  waiters_hash, multi, cls, tracked = KEYS[6] or named_waiters, false, nil, interval > 0
  -- An admission that names another definition than the stored one (see ARGV[2]); never a semaphore. The stored text
  -- is kept in meta's definition field whenever the capacity or the rate changes (older semaphores: computed).
  differs = not given.plain and defined ~= (stored_definition or definition())
end

-- The rest of the call's state, which only the long way needs (the short way below takes neither classes nor
-- waiters, and writes what it changes itself): the classes and their counts, and the fields save() writes.
local function read_classes(KEYS)
  -- (Writes left waiting only by a call that failed halfway: they are not this call's.)
  grants_waiting, ended_waiting = 0, 0
  dirty.fence, dirty.seq, dirty.next, dirty.tat, dirty.classes = false, false, false, false, false
  if class_text then -- (cls and multi are read_state()'s: none, false)
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
      local v = rcall('HMGET', meta, unpack(fields))
      for k = 1, #cls do
        local held, queued, atat = v[3 * k - 2], v[3 * k - 1], v[3 * k] -- (read as meta's fields above)
        cls[k].held, cls[k].queued, cls[k].atat = held and held + 0 or 0, queued and queued + 0 or 0,
          atat and atat + 0 or 0
        cls[k].list = k == 1 and queue or KEYS[5 + k] or (queue .. ':' .. (k - 1))
      end
    end
  end
  -- With a rate or classes, each waiter's class, n and arrival are kept in the waiters hash, and each class's queued
  -- permits in meta (queued:k), so that the tokens the waiters ahead of a request ask for are known without reading the
  -- queue. One class with a rate: cls[1] holds only that count.
  tracked = multi or interval > 0
  if tracked and not multi then
    cls = { { g = 0, ai = 0, ab = 0, held = 0, atat = 0, list = queue,
      queued = queued_one } }
  end
end

-- The two commonest calls take a short way: a free permit taken, and a lease given back, while nobody waits and
-- nothing can have expired. Their effects and replies are exactly those of run.acquire and run.release below (a
-- batch, which takes the long way, is tested to agree with them), without the general machinery (and, run as a
-- script, without making the helpers: in Redis's Lua, making those two dozen closures costs about as much as these
-- calls' own commands).
-- Returns the reply, or nil for the long way.
local function short_way(ARGV)
  if capacity and not differs and not class_text and now < next_due and not dirty.idle
      and (op == 'acquire' or (op == 'release' and ARGV[5])) and rcall('ZCARD', expiry) == 0 then
    local id = ARGV[3]
    if op == 'release' then
      local n = num(ARGV[5], 'n')
      if rcall('ZREM', holders, id) == 0 then return { UNKNOWN, 0, now } end
      rcall('HDEL', leases, id)
      rcall('HSET', meta, 'free', int(free + n))
      keep_alive()
      return { GRANTED, n, now }
    end
    local n, ttl = digits(ARGV[4], 'n'), digits(ARGV[5], 'lease ttl')
    local fits, new_tat = n <= free and n <= capacity, nil
    if fits and interval > 0 then -- the tokens too, as token_wait() and take_tokens() below
      new_tat = max(tat, now - burst * interval) + n * interval
      fits = n <= burst and new_tat <= now
    end
    if fits then
      fence = max(fence + 1, now) -- as grant() below
      local expires = now + ttl
      local fence_text, expires_text = recall(int(fence), fence), int(expires)
      rcall('ZADD', holders, expires_text, id)
      rcall('HSET', leases, id, ARGV[4] .. ':' .. fence_text) -- (n as the caller wrote it: plain digits)
      wrote(holders, expires)
      wrote(leases)
      local fields = { 'free', int(free - n), 'fence', fence_text }
      if expires < next_due then
        fields[#fields + 1] = 'next'; fields[#fields + 1] = recall(expires_text, expires)
      end
      if new_tat and rate_key then
        tat = new_tat
        save_rate_key()
      elseif new_tat then
        fields[#fields + 1] = 'tat'; fields[#fields + 1] = int(new_tat)
      end
      rcall('HSET', meta, unpack(fields))
      keep_alive()
      return { GRANTED, n, fence, expires, now, free - n }
    end
  end
end

-- Several operations of one process in one call, in order, as if each were a call of its own made one after the
-- other at the same time: ARGV[3] how many; ARGV[4] to ARGV[7] what every operation of the caller sends alike —
-- its wake key, lease ttl, max waiters and waiter ttl, as an acquire's A[9], A[5], A[7] and A[8]; then each
-- operation as its argument count c followed by c arguments, its name first. An acquire, a release, a cancel and
-- a poll leave out what ARGV[4] to ARGV[7] give: an acquire sends its id, n, whether it waits, and optionally its
-- deadline and then its class (A[3], A[4], A[6], A[10], A[11]); a release its id and optionally n; a cancel and a
-- poll their id. Any other operation sends its own arguments, A[3] onwards. The reply is their replies one after
-- the other, each as its length followed by its elements, or an error reply as -1 followed by the error: one
-- array, which Redis writes out for a fraction of what an array per operation costs it.
local function run_batch(ARGV)
  local size = num(ARGV[3], 'batch size')
  -- (Made with room for about as many elements as the replies have — an acquire's has at most six — where filling an
  -- empty table grows it again at every power of two; the slots are empty, and the reply ends at its last element.
  -- Room for 32 operations at most, admit's largest batch: unpack() cannot give many more values.)
  local reply = { unpack(none, 1, 6 * min(size, 32)) }
  local m = 0 -- the reply's elements so far
  local wake, lease_ttl, most, waiter_ttl = ARGV[4], ARGV[5], ARGV[6], ARGV[7]
  local at = 8
  for k = 1, size do
    local c = num(ARGV[at], 'argument count')
    local name = ARGV[at + 1]
    local A -- (each made by one constructor, at its size)
    if name == 'acquire' and c >= 4 and c <= 6 then
      A = { name, ARGV[2], ARGV[at + 2], ARGV[at + 3], lease_ttl, ARGV[at + 4], most, waiter_ttl, wake,
        c >= 5 and ARGV[at + 5] or nil, c == 6 and ARGV[at + 6] or nil }
    elseif name == 'release' and (c == 2 or c == 3) then
      A = { name, ARGV[2], ARGV[at + 2], wake, c == 3 and ARGV[at + 3] or nil }
    elseif name == 'cancel' and c == 2 then
      A = { name, ARGV[2], ARGV[at + 2], wake }
    elseif name == 'poll' and c == 2 then
      A = { name, ARGV[2], ARGV[at + 2], waiter_ttl }
    elseif name ~= 'acquire' and name ~= 'release' and name ~= 'cancel' and name ~= 'poll' then
      A = { name, ARGV[2], unpack(ARGV, at + 2, at + c) }
    end
    -- (An operation that cannot be read is answered with an error in its place, as an unknown one is: the others
    -- still run, and their changes are saved.)
    local r = A and perform(A)
      or redis.error_reply('ERR admit semaphore: batch operation ' .. tostring(name) .. ' with ' .. c .. ' arguments')
    if r.err then
      reply[m + 1], reply[m + 2] = -1, r
      m = m + 2
    else
      local length = #r
      reply[m + 1] = length
      for i = 1, length do reply[m + 1 + i] = r[i] end
      m = m + 1 + length
    end
    at = at + c + 1
  end
  return reply
end

-- One call: its keys and arguments as KEYS and ARGV are a script's. Reads the state, takes the short way or the
-- operation(s), writes the state back once.
local function call(KEYS, ARGV)
  if not rcall then bind_library() end
  local early = read_state(KEYS, ARGV)
  if early then return early end
  local short = short_way(ARGV)
  if short then return short end
  read_classes(KEYS)
  if multi and not acquire_in_class then -- made once (a library) or only with classes (a script)
    make_class_helpers()
    make_class_acquire()
  end
  sweep()

  local reply
  if op == 'batch' then
    reply = run_batch(ARGV)
  else
    reply = perform(ARGV)
  end
  flush_writes()
  save()
  keep_alive() -- inspect too: its sweep and its grants can write keys
  return reply
end
