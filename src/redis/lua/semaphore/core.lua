-- semaphore.lua, part 1 of 5: admit distributed admission (admit::redis::semaphore, admit::redis::admission): leases
-- on the server's clock, fencing tokens, a FIFO queue of waiters served by hand-off, and optionally a rate: a token
-- bucket that a request must find n tokens in, together with its n permits, to be admitted (reserve-then-commit: a
-- waiter holds neither).
-- A semaphore is an admission without a rate. One script; ARGV[1] names the operation. Not a limiter script: no
-- common.lua.
-- The script is this folder's files joined in order (cmake/redis.cmake: core, queue, classes, operations, call; in
-- debug builds debug_clock before call), embedded as lua::semaphore ("semaphore.lua" in the C++ side's comments). It
-- defines call(KEYS, ARGV), which runs one call, and makes no Redis call at its top level: the library
-- (redis::script::library) runs it as a script (the text, then `return call(KEYS, ARGV)`) or registers call as the
-- function of a Redis Functions library, whose top level — every helper — Redis runs once, at FUNCTION LOAD.
-- The state of a call lives in the locals declared at the top level, which call() sets first: one call runs at a
-- time, and each starts from its own keys, time and meta fields.
--
-- KEYS (every key shares the semaphore's hash tag {name}, so a Redis Cluster keeps them in one slot):
--   KEYS[1] meta     hash: capacity, free (capacity minus the permits held; negative after a cut), fence (the last
--                    fencing token), seq (the last arrival number), next (no lease or waiter expires before this
--                    time, µs: the sweep runs only from then on), idle (µs, see keep_alive: only when a caller gave
--                    one) and kept (the expiry every key has then, ms); with a rate also interval (µs one token costs,
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
--   KEYS[6] waiters  (with a rate or classes) hash: waiter id -> "class:n:arrival"; with classes and a rate also
--                    "c:<lease id>" -> 1 for a lease whose grant charged its class's assured bucket (see take_lease)
--   KEYS[5 + k]      (with classes, k >= 2) class k - 1's queue, as KEYS[4] is class 0's; KEYS[6] and these are
--                    found by their names ("{name}:waiters", "{name}:waiting:<class>") when a caller gives only five
--                    keys, or one
--   KEYS[7]          (a rate limiter's queue, ARGV[2] ending in "@gcra" or "@token_bucket"; no classes) the limiter's
--                    key for the queue's key, which holds the rate's state instead of meta's tat (see rate_key)
-- A caller may give KEYS[1] alone ("{name}:meta"; another name is refused): KEYS[2] to KEYS[6] are then found by
-- their names, meta's with "meta" replaced ("{name}:holders", "{name}:leases", "{name}:waiting", "{name}:expiry",
-- "{name}:waiters"), all in meta's slot. Fewer keys make a cheaper call: Redis makes a Lua string and a table slot for
-- each key it is given. But only a standalone server may be called so: on a Redis Cluster, Redis checks the keys a
-- call declares before running it (ASK or TRYAGAIN while their slot moves), and a key the call did not declare that
-- has moved already would fail the call halfway through, its first writes made.
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
-- (interval 0 and burst 0: no rate; classes below, at parse_definition), either followed by "~µs", the idle time after
-- which an unused semaphore's keys expire (see keep_alive), which must be the stored one: an acquire that names another is refused with status 7 and the
-- stored definition (set_limits changes it; releases, polls and cancels are never refused); then the operation's own
-- arguments (below); or ARGV[1] 'batch': several operations of one process, one after the
-- other (see the end of the script). Every call first sweeps when something may have expired (meta's next has
-- passed): leases past their expiry free their permits, waiters past theirs leave the queue; then the head waiters
-- are granted while their requests fit. The work per operation is O(log N) in the number N of holders and waiters,
-- plus O(log N) per lease or waiter expired, granted or dropped (and, amortized, O(1) per waiter that left, for the
-- queue's compaction).
-- Time is TIME only, in integer microseconds (doubles are exact below 2^53; now is ~1.8e15) — but in the library's
-- debug builds, where a semaphore whose meta has the field debug_now runs on that time instead (debug_clock.lua).
-- Replies: {status, ...}; status 0 GRANTED (or done), 1 QUEUED, 2 UNAVAILABLE (try_acquire), 3 FULL (the queue),
-- 4 TOO_LARGE (exceeds capacity or the burst), 5 UNKNOWN (no such lease or waiter: released, expired, cancelled, never
-- existed), 6 LEFT (cancelled: left the queue, or gave back the grant that came first), 7 CONFLICT (another definition,
-- see ARGV[2]), 8 TOO_LATE (the rate cannot give the request its tokens, after those of the waiters ahead of it,
-- within its deadline).
-- The call's keys, operation and time, set at the start of every call by call() (at the end): the functions below read
-- them, and the call's state further down, as upvalues. Loaded as a function library (FUNCTION LOAD), the functions
-- are made once, when the library is loaded; run as a script (EVALSHA), at every call.
local meta, holders, leases, queue, expiry, op, now

-- The library's functions the code calls most, as upvalues: in a function library each global's lookup goes through
-- its globals table (about 10 ns more than an upvalue for `redis.call`, measured in a function library; a grant makes
-- about fifteen such lookups). Bound by call() at its first run: at FUNCTION LOAD none of them exists yet (run as a
-- script, at every call).
local rcall, format, find, match, sub, max, min, floor
local function bind_library()
  rcall, format, find, match, sub = redis.call, string.format, string.find, string.match, string.sub
  max, min, floor = math.max, math.min, math.floor
end

-- The reply statuses (above; the C++ side's sem_status in src/redis/semaphore/core.hpp, which a test holds to these).
local GRANTED, QUEUED, UNAVAILABLE, FULL, TOO_LARGE, UNKNOWN, LEFT, CONFLICT, TOO_LATE = 0, 1, 2, 3, 4, 5, 6, 7, 8

-- The texts of the integers 0 to 1023 made so far: counts (free permits, n) are written at almost every call, and a
-- lookup costs a tenth of formatting one. Kept across calls when the code is loaded as a function library.
local small_texts = {}
local function int(x)
  if x >= 0 and x < 1024 then
    local t = small_texts[x]
    if t then return t end
    if x % 1 == 0 then
      t = format('%d', x)
      small_texts[x] = t
      return t
    end
  end
  -- %d (a C long) is several times faster than %.0f, whose 16-digit times take glibc's multi-precision path;
  -- %.0f only beyond 2^53, where a double is no longer an exact integer anyway.
  if x > -9007199254740992 and x < 9007199254740992 then return format('%d', x) end
  return format('%.0f', x)
end

-- The texts of the times and the token a call writes more than once, each kept until another value comes: every grant
-- of a call expires at the same time (now + the lease ttl), every join's waiter too (now + the waiter ttl), and the
-- last grant's fencing token is meta's fence when the call ends. Formatting a 16-digit number costs about 1,800 of
-- Redis's instructions; a comparison, a few.
local grant_expiry, grant_expiry_text, join_expiry, join_expiry_text, last_fence, last_fence_text
local function join_expiry_of(until_us)
  if until_us ~= join_expiry then join_expiry, join_expiry_text = until_us, int(until_us) end
  return join_expiry_text
end

-- Texts already read as numbers, and their values: most of a call's numbers are the same texts call after call (n,
-- the TTLs, max waiters, a batch's argument counts), and a table lookup costs a tenth of reading a text (glibc's
-- strtod). Kept across calls when the code is loaded as a function library (one per run as a script); emptied when it
-- holds 256, so that texts seen once (times, counters) cannot make it grow. `integers` holds what num() accepted,
-- `decimals` what digits() accepted (plain decimal digits: an integer too).
local integers, decimals, remembered = {}, {}, 0
local function remember(is_decimal, x, v) -- (into decimals, else into integers)
  if remembered >= 256 then integers, decimals, remembered = {}, {}, 0 end -- (before choosing the table: its new one)
  remembered = remembered + 1
  if is_decimal then decimals[x] = v else integers[x] = v end
  return v
end
-- An argument that must be an integer. (Arithmetic converts a text once, tonumber() twice; a text that is not a
-- number at all fails with Lua's own error, which names the line. The C++ side never sends one.)
local function num(x, what)
  local v = integers[x] or decimals[x]
  if v then return v end
  v = x and x + 0
  if not v or v % 1 ~= 0 then -- (not math.floor: a call; and infinity is no integer)
    error('admit semaphore: ' .. what .. ' must be an integer, got ' .. tostring(x))
  end
  return remember(false, x, v)
end
-- A text known to be plain decimal digits (checked by digits(), or matched by a pattern), read as a number.
local function decimal(x)
  return decimals[x] or remember(true, x, x + 0)
end
-- An argument that is written into a lease's or a queue record as it was sent (n, the lease ttl): a whole number in
-- plain decimal digits, which is how those records are read back ("1.0" or " 1" would pass num() and make a record
-- that cannot be read, its permits lost). One search costs less than formatting the number again.
local function digits(x, what)
  local v = decimals[x]
  if v then return v end
  if not x or not find(x, '^%d+$') then
    error('admit semaphore: ' .. what .. ' must be a whole number in decimal digits, got ' .. tostring(x))
  end
  return decimal(x)
end

-- meta's fence, next and seq: texts read or written lately, and their values. A call mostly reads back what the call
-- before it wrote, a 16-digit time or token each, which reading again takes glibc's strtod (several hundred
-- instructions) where a lookup finds it by one hash. Emptied when it holds 64 (each grant writes new texts).
local recent, recent_count = {}, 0
local function recall(x, v)
  if recent_count >= 64 then recent, recent_count = {}, 0 end
  recent_count = recent_count + 1
  recent[x] = v
  return x
end
-- One of them as meta holds it (absent: 0). A text that is not a number fails the call, as num() does.
local function stored_number(x)
  if not x then return 0 end
  local v = recent[x]
  if v then return v end
  v = x + 0
  recall(x, v)
  return v
end

-- The call's time: the server's clock, in µs. (Replaced by debug_clock.lua in the library's debug builds.)
-- The seconds' text of the last call and its value in µs: it changes once a second, and reading a text costs Redis's
-- Lua a strtod (a few hundred instructions) where comparing two texts compares two pointers (Lua's strings are
-- interned). Kept across calls when the code is loaded as a function library.
local seconds_text, seconds_us
local function server_time()
  local t = rcall('TIME')
  local s = t[1]
  if s ~= seconds_text then seconds_text, seconds_us = s, s * 1000000 end
  return seconds_us + t[2] -- (arithmetic reads a text once; tonumber() reads it twice: a check, then the value)
end
-- now as int() writes it, made at most once per call (call() resets now_formatted).
local now_formatted
local function now_text()
  if not now_formatted then now_formatted = int(now) end
  return now_formatted
end

-- meta, read once and written once at the end (dirty fields only)
local capacity, free, fence, next_due, seq, interval, burst, tat, class_text, stored_definition, queued_one
-- The meta fields to write at the end of the call: one table for every call (a library's; a script makes it at each
-- call), each of its fields set to false at the start of each call that saves — by read_state() and read_classes() in
-- call.lua (no other field is ever set) — so that no call makes and collects a table of its own.
local dirty = { idle = false, free = false, fence = false, seq = false, next = false, capacity = false, rate = false,
  created = false, tat = false, classes = false }
-- An admission's definition "capacity/interval/burst[/classes]" (nil for a semaphore's plain capacity, or when it
-- cannot be read); classes "g:ai:ab,..." per priority class: its guaranteed permits, its assured bucket's interval (µs;
-- 0: none) and burst. One class: no classes part.
local function parse_definition(text)
  local c, i, b, rest = match(text, '^(%d+)/(%d+)/(%d+)(.*)$')
  if not c or (tonumber(i) == 0) ~= (tonumber(b) == 0) then return nil end
  local classes = nil
  if rest ~= '' then
    classes = match(rest, '^/(%d+:%d+:%d+[%d:,]*)$')
    if not classes then return nil end
  end
  return tonumber(c), tonumber(i), tonumber(b), classes
end
-- The stored definition, as ARGV[2] writes it.
local function definition()
  local d = format('%d/%d/%d', capacity, interval, burst)
  if class_text then d = d .. '/' .. class_text end
  return d
end
-- Priority classes (more than one): cls[k] for class k - 1, {g, ai, ab, held, queued (permits its waiters ask),
-- atat (its assured bucket's state, µs), list (its queue's key)}, kept in meta as held:k, queued:k and atat:k. Class 0's
-- queue is KEYS[4]; with classes, KEYS[6] is the waiters hash (id -> "class:n:arrival") and KEYS[5 + k] class k - 1's
-- queue for k >= 2, named "{name}:waiters" and "{name}:waiting:<class>": a caller that gives only the five keys
-- (inspect_semaphore, a semaphore of the same name), or only meta's, reaches them by those names, in the same slot.
local cls, multi, waiters_hash, tracked, differs

-- The idle time (ARGV[2]'s suffix "~µs", or the longest any caller gave, kept in meta's idle; 0: none). With one,
-- every key of the semaphore is set to expire that long after the last of its leases and waiters can (and up to a
-- quarter of it more): once nobody holds or waits, Redis deletes it then, and the next caller makes it anew from its
-- own definition, as if it had never existed. No lease or waiter outlives its keys. Meta's kept (ms) is the expiry
-- every key has: a call that needs no later one (its leases and waiters, and now, plus idle, are within it) only gives
-- it to the keys it may have made anew (wrote(); HSET, ZADD and RPUSH keep an existing key's expiry, and a key that
-- became empty was deleted); one that needs later gives every key kept = what it needs + idle / 4, so that such a
-- call comes at most once per quarter of idle while the semaphore is in use.
local idle, kept
-- The keys this call wrote in a way that may have made them anew, and the latest lease or waiter expiry (µs) it wrote.
local touched, latest -- (touched: nil until the call writes a key)
local function wrote(key, expires)
  if idle == 0 then return end -- (keep_alive does nothing then)
  if not touched then touched = {} end
  touched[key] = true
  if expires and expires > latest then latest = expires end
end
local function keep_alive()
  if idle == 0 then return end
  local need = floor((max(latest, now) + idle) / 1000) + 1 -- milliseconds, rounded up
  -- meta's own expiry must still be kept: a call of an older admit (which sets every key to exactly what it needs)
  -- may have moved it earlier. (PTTL, not PEXPIRETIME: Redis 6 has no PEXPIRETIME.)
  if need <= kept and floor(now / 1000) + rcall('PTTL', meta) > need then
    for key in pairs(touched or {}) do rcall('PEXPIREAT', key, int(kept)) end
    return
  end
  kept = need + floor(idle / 4000)
  rcall('HSET', meta, 'kept', int(kept))
  local keys = { meta, holders, leases, queue, expiry }
  if tracked then keys[#keys + 1] = waiters_hash end -- only a rate or classes use it
  if multi then
    for k = 2, #cls do keys[#keys + 1] = cls[k].list end
  end
  for _, key in ipairs(keys) do rcall('PEXPIREAT', key, int(kept)) end
end

-- A rate limiter's queue (admit::redis::gcra's and token_bucket's waiting forms): its rate is the limiter's, and its
-- state is the limiter's own key rate_key (KEYS[7]), which the limiter's decide() reads and writes too, so that both
-- spend one budget. rate_kind says how that key holds it: 'token_bucket' as tat (the instant the bucket was empty, µs;
-- token_bucket.lua), 'gcra' as the GCRA's TAT, which is tat + burst * interval (gcra.lua). Absent: full. It is written
-- as those scripts write it, expiring when the bucket is full again.
local rate_key, rate_kind
local function rate_key_tat()
  local v = rcall('GET', rate_key)
  if not v then return 0 end
  v = v + 0 -- (not a number: the call fails, as the limiter's own script does on that key)
  if rate_kind == 'gcra' then return v - burst * interval end
  return v
end
local function save_rate_key()
  local v = tat
  if rate_kind == 'gcra' then v = tat + burst * interval end
  rcall('SET', rate_key, int(v), 'PXAT', int(math.ceil((tat + burst * interval) / 1000)))
end

-- Redis keeps a small hash or sorted set packed in one array (a listpack: by default up to 128 entries of up to 64
-- bytes), where every lookup, insert and removal scans the whole array. meta, whose fields every call reads one by
-- one, and under contention the waiters' expiry set and hash (tens of waiters, each joining and leaving) and the
-- holders' set and leases (a lease made and ended at every hand-off) cost less in Redis's general encodings, a hash
-- table and a skip list: in a profile of 64 callers on 8 permits, 11 % fewer of Redis's instructions per
-- acquire-and-release cycle for meta and the waiters' keys, 6.4 % more for the holders' keys; 4.5 % per call without
-- waiters for meta. A field or member longer than a
-- listpack takes converts a key, and Redis never converts it back while the key exists (a key emptied is deleted, and
-- made anew packed). unpack_key() adds such a name and removes it at once, within the call: nobody ever sees it. It
-- contains ':', which no lease or waiter id does. Called for meta when a call creates it, and for meta, the waiters'
-- and the holders' keys at every 32nd waiter that joins (a key that holds few entries then is converted too: harmless).
-- Performance only: a server whose listpack limits are set above the name's 200 bytes keeps the keys packed.
local long_name -- made at the first use: at FUNCTION LOAD the string library is not there yet
local function unpack_key(key, kind)
  if not long_name then long_name = 'admit:' .. string.rep('-', 194) end
  if kind == 'zset' then
    rcall('ZADD', key, 0, long_name)
    rcall('ZREM', key, long_name)
  else
    rcall('HSET', key, long_name, '')
    rcall('HDEL', key, long_name)
  end
end
local function save()
  -- (Made with room for 16 values, which most calls write no more than: a table grows again at every power of two.)
  local args = { nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil }
  if dirty.capacity then args[#args + 1] = 'capacity'; args[#args + 1] = int(capacity) end
  if dirty.capacity or dirty.rate then args[#args + 1] = 'definition'; args[#args + 1] = definition() end
  if dirty.free then args[#args + 1] = 'free'; args[#args + 1] = int(free) end
  if dirty.fence then
    args[#args + 1] = 'fence'; args[#args + 1] = recall(fence == last_fence and last_fence_text or int(fence), fence)
  end
  if dirty.next then args[#args + 1] = 'next'; args[#args + 1] = recall(int(next_due), next_due) end
  if dirty.seq then args[#args + 1] = 'seq'; args[#args + 1] = recall(int(seq), seq) end
  if dirty.rate then
    args[#args + 1] = 'interval'; args[#args + 1] = int(interval)
    args[#args + 1] = 'burst'; args[#args + 1] = int(burst)
  end
  if dirty.tat and rate_key then
    save_rate_key()
  elseif dirty.tat then
    args[#args + 1] = 'tat'; args[#args + 1] = int(tat)
  end
  if dirty.idle then args[#args + 1] = 'idle'; args[#args + 1] = int(idle) end
  if dirty.rate then
    if class_text then
      args[#args + 1] = 'classes'; args[#args + 1] = class_text
    else
      rcall('HDEL', meta, 'classes')
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
  if #args > 0 then rcall('HSET', meta, unpack(args)) end
  if dirty.created then unpack_key(meta, 'hash') end
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
  local ready = max(tat, now - burst * interval) + n * interval
  if ready <= now then return 0 end
  return ready - now
end
local function take_tokens(n)
  if interval == 0 then return end
  tat = max(tat, now - burst * interval) + n * interval
  dirty.tat = true
end
-- Too large ever to be admitted: above the capacity, or above the burst.
local function too_large(n)
  return n > capacity or (interval > 0 and n > burst)
end

-- What a call writes to holders and leases that nothing in the call reads back, written together when the call ends
-- (flush_writes, before save), where each command a script calls costs Redis about as much as a grant's own work (a
-- call at 64 callers on 8 permits makes four grants and four releases): its grants, one ZADD to holders and one HSET to
-- leases for all of them; and the leases it ended by their own release (the holder's entry removed at once: its ZREM
-- says whether the lease was there), one HDEL from leases. Whatever reads holders or leases writes them first:
-- lease_reply, renew, inspect, the sweep, and take_lease when it reads a lease's record or takes one granted in this
-- call. At most 64 of each wait (unpack() has a limit). The arrays are reused from call to call (a library's): only
-- their first slots, as the counts say, are this call's.
local grant_scores, grant_leases, grants_waiting = {}, {}, 0
local ended, ended_waiting = {}, 0
local function flush_writes()
  if ended_waiting > 0 then -- (first: an id is never ended and granted in one call, but the grant would win)
    rcall('HDEL', leases, unpack(ended, 1, ended_waiting))
    ended_waiting = 0
  end
  if grants_waiting == 0 then return end
  local last = 2 * grants_waiting
  rcall('ZADD', holders, unpack(grant_scores, 1, last))
  rcall('HSET', leases, unpack(grant_leases, 1, last))
  grants_waiting = 0
end

-- A fencing token: strictly increasing per semaphore, and at least the server's time in µs, so that tokens keep
-- increasing even after Redis lost the semaphore's state (a restart without persistence), while its clock does.
-- `k`: the class (1-based) with classes, whose held permits count it; the lease records it. Returns the token, the
-- lease's expiry, and the grant as its wake-up carries it, "n:token:expiry" (deliver): each number is formatted once.
-- `n_text`: n as the caller or the queue record wrote it, when known (formatting a number costs a sprintf).
local function grant(id, n, ttl, k, n_text)
  fence = max(fence + 1, now)
  dirty.fence = true
  local expires = now + ttl
  if expires ~= grant_expiry then grant_expiry, grant_expiry_text = expires, int(expires) end
  last_fence, last_fence_text = fence, int(fence)
  local expires_text, held = grant_expiry_text, (n_text or int(n)) .. ':' .. last_fence_text
  wrote(holders, expires)
  wrote(leases)
  grants_waiting = grants_waiting + 1
  local at = 2 * grants_waiting
  grant_scores[at - 1], grant_scores[at] = expires_text, id
  grant_leases[at - 1] = id
  if k then
    cls[k].held = cls[k].held + n
    dirty.classes = true
    grant_leases[at] = held .. ':' .. int(k - 1)
  else
    grant_leases[at] = held
  end
  if grants_waiting == 64 then flush_writes() end
  due(expires)
  return fence, expires, held .. ':' .. expires_text
end
