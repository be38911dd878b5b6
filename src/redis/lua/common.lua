-- admit: the part every limiter script shares, placed before each script's own text at build time (embed.cmake).
-- Each algorithm's text defines `call(KEYS, ARGV)`, one call, and runs nothing at its top level, so that the code is
-- a Redis Functions library (registered as one function, named after the code's SHA1: admit/redis/client/script.hpp)
-- whose helpers below Redis makes once, when it loads the library, and also, followed by `return call(KEYS, ARGV)`,
-- a script for EVALSHA (Redis older than 7.0, or an ACL user without FCALL).
--
-- One call decides a batch of m >= 1 requests of one limiter, in order, at one instant (the client puts the
-- decisions that callers ask for while earlier calls are in flight into one call: see src/redis/limiter/batcher.hpp).
-- The calling convention of every admit limiter script:
--   KEYS[1]        the limiter's epoch key "{name}": a hash {id, seq} that tells a loss of state apart from an idle
--                  limiter
--   KEYS[1 + i]    the state key of request i's limited key, "{name}:key" (i = 1..m; a key may repeat)
--   ARGV[1]        "1" to keep the epoch (lost-state detection), "0" not to touch KEYS[1]
--   ARGV[2 .. 1 + p]  the algorithm's p parameters (p = 2 unless the script says otherwise)
--   ARGV[2 + p + 2(i - 1)], ARGV[3 + p + 2(i - 1)]   n_i, the request's cost (integer >= 0), and k_i >= n_i, the most
--                  the script may take when it admits (local token leasing; k = n without it)
-- and every call returns admit_batch(KEYS, ARGV, ...):
--   {r_1, ..., r_m, now_us, epoch_id, epoch_seq}, where r_i is {admitted (0/1), granted, remaining,
--   retry_after_us (-1: never), reset_after_us} or an error reply for request i alone.
--
-- Time is read with TIME only, once per call (the server's clock, never a client's); under effects replication
-- (Redis 7) replicas receive the resulting writes, never the script. Numbers are IEEE doubles: integers are exact
-- below 2^53, which is why time is in microseconds (~1.8e15 now) and not nanoseconds (~1.8e18).
local function admit_now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- floor(a / b) for integers 0 <= a < 2^53, b >= 1, exactly (a double quotient near an integer could round up).
local function admit_fdiv(a, b)
  local q = math.floor(a / b)
  if q * b > a then
    q = q - 1
  elseif (q + 1) * b <= a then
    q = q + 1
  end
  return q
end

-- Integer decimal text of a double holding an integer (tostring would print 1e+15).
local function admit_int(x)
  -- %d (a C long) is several times faster than %.0f, whose 16-digit times take glibc's multi-precision path;
  -- %.0f only beyond 2^53, where a double is no longer an exact integer anyway.
  if x > -9007199254740992 and x < 9007199254740992 then return string.format('%d', x) end
  return string.format('%.0f', x)
end

-- The error for a state key whose value is not `algorithm`'s state (`what` it should hold), naming the key and the
-- likely cause: another algorithm's limiter of the same name, or a value written by something else.
local function admit_state_error(algorithm, key, what)
  return 'ERR admit ' .. algorithm .. ': key ' .. key .. ' does not hold ' .. what
    .. ' (another algorithm\'s state, or a value admit did not write)'
end

-- The error of a command on a state key that failed (`e`, redis.pcall's error table): a key of another Redis type is
-- answered WRONGTYPE, which names no key, and is said as admit_state_error says it; any other error (NOPERM, OOM) as
-- it is.
local function admit_state_call_error(e, algorithm, key, what)
  if string.sub(e.err, 1, 9) == 'WRONGTYPE' then return admit_state_error(algorithm, key, what) end
  return e.err
end

-- The string state of `key` (false: none), or nil and the error (admit_state_call_error) when the key holds another
-- type: the state read of every algorithm that keeps a string.
local function admit_get_state(key, algorithm, what)
  local stored = redis.pcall('GET', key)
  if type(stored) == 'table' then return nil, admit_state_call_error(stored, algorithm, key, what) end
  return stored
end

-- The rate algorithms' parameters: ARGV[2] the interval T (integer µs >= 1), ARGV[3] the burst (integer >= 1), ARGV[4]
-- "1" to charge refused requests. Returns interval, burst, charge; or nil and the error reply naming `algorithm`.
local function admit_rate_parameters(ARGV, algorithm)
  local interval, burst = tonumber(ARGV[2]), tonumber(ARGV[3])
  if not interval or interval < 1 or not burst or burst < 1 then
    return nil, redis.error_reply('ERR admit ' .. algorithm .. ': bad arguments (interval, burst)')
  end
  return interval, burst, ARGV[4] == '1'
end

-- The window algorithms' parameters: ARGV[2] the window (integer µs >= 1), ARGV[3] the limit (integer >= 1). Returns
-- window, limit; or nil and the error reply naming `algorithm`.
local function admit_window_parameters(ARGV, algorithm)
  local w, limit = tonumber(ARGV[2]), tonumber(ARGV[3])
  if not w or w < 1 or not limit or limit < 1 then
    return nil, redis.error_reply('ERR admit ' .. algorithm .. ': bad arguments (window, limit)')
  end
  return w, limit
end

-- Runs decide(key, n, k) for each request of the batch and returns the reply above. decide returns admitted (0/1),
-- granted, remaining, retry_after_us, reset_after_us, the time (ms since the Unix epoch) until which what it wrote
-- lives, and whether it wrote although it granted nothing (a refusal charged to the key); or nil and an error message.
-- p: the number of the algorithm's parameters (2 when nil).
--
-- The epoch: `id` is the server time at which the hash was created, `seq` counts the calls that wrote state (admitted
-- something, or charged a refusal). Only those write it (any other refusal, and a query, writes nothing anywhere).
-- The hash expires no earlier than any state key written under it (the state keys' own expiry), so a client that sees
-- a new id while state it wrote should still exist, or a seq lower than one it saw, knows that Redis lost state (a
-- restart without persistence, a flush, a failover to a replica that had not received the latest writes).
local function admit_batch(KEYS, ARGV, now, decide, p)
  p = p or 2
  local m = #KEYS - 1
  if m < 1 or #ARGV ~= 1 + p + 2 * m then
    return redis.error_reply('ERR admit: bad arguments (' .. #KEYS .. ' keys, ' .. #ARGV .. ' arguments)')
  end
  local out = {}
  local admitted_any, expire_at_ms = false, 0
  for i = 1, m do
    local n, k = tonumber(ARGV[p + 2 * i]), tonumber(ARGV[1 + p + 2 * i])
    if not n or n < 0 or not k or k < n then
      out[i] = { err = 'ERR admit: bad arguments (n, k)' }
    else
      -- pcall: an error raised inside one decision (WRONGTYPE: the key holds another type) is that decision's alone;
      -- the decisions before it in the batch have written already and stand.
      local ok, admitted, granted, remaining, wait, reset, expire_at, charged = pcall(decide, KEYS[1 + i], n, k)
      if not ok then
        out[i] = { err = type(admitted) == 'table' and admitted.err or tostring(admitted) }
      elseif admitted == nil then
        out[i] = { err = granted }
      else
        out[i] = { admitted, granted, remaining, wait, reset }
        if granted > 0 or charged then
          admitted_any = true
          if expire_at > expire_at_ms then expire_at_ms = expire_at end
        end
      end
    end
  end
  local id, seq = '', 0
  if ARGV[1] == '1' then
    if admitted_any then
      id = redis.call('HGET', KEYS[1], 'id')
      local at = admit_int(expire_at_ms)
      if not id then
        id, seq = admit_int(now), 1
        redis.call('HSET', KEYS[1], 'id', id, 'seq', seq)
        redis.call('PEXPIREAT', KEYS[1], at)
      else
        seq = redis.call('HINCRBY', KEYS[1], 'seq', 1)
        redis.call('PEXPIREAT', KEYS[1], at, 'GT')
      end
    else
      local e = redis.call('HMGET', KEYS[1], 'id', 'seq')
      id, seq = e[1] or '', tonumber(e[2]) or 0
    end
  end
  out[m + 1] = now
  out[m + 2] = id
  out[m + 3] = seq
  return out
end
