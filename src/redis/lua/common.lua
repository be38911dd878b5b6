-- admit: the part every limiter script shares, placed before each script's own text at build time (embed.cmake), so
-- that each EVALSHA script is one self-contained source.
--
-- The calling convention of every admit limiter script:
--   KEYS[1]  the limiter's epoch key "{name}": a hash {id, seq} that tells a loss of state apart from an idle limiter
--   KEYS[2]  the state key of the limited key, "{name}:key"
--   ARGV[1]  n, the request's cost, integer >= 0
--   ARGV[2]  k >= n, the most the script may take when it admits (local token leasing; k = n without it)
--   ARGV[3]  "1" to keep the epoch (lost-state detection), "0" not to touch KEYS[1]
--   ARGV[4..] the algorithm's parameters
-- and every script returns admit_reply(...):
--   {admitted (0/1), granted, remaining, retry_after_us (-1: never), reset_after_us, now_us, epoch_id, epoch_seq}
--
-- Time is read with TIME only (the server's clock, never a client's); under effects replication (Redis 7) replicas
-- receive the resulting writes, never the script. Numbers are IEEE doubles: integers are exact below 2^53, which is
-- why time is in microseconds (~1.8e15 now) and not nanoseconds (~1.8e18).
local admit_n = tonumber(ARGV[1])
local admit_k = tonumber(ARGV[2])
if not admit_n or admit_n < 0 or not admit_k or admit_k < admit_n then
  return redis.error_reply('ERR admit: bad arguments (n, k)')
end

local function admit_now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- Integer decimal text of a double holding an integer (tostring would print 1e+15).
local function admit_int(x)
  return string.format('%.0f', x)
end

-- The epoch: `id` is the server time at which the hash was created, `seq` counts admissions. Only admissions write it
-- (a refusal or a query writes nothing anywhere). The hash expires no earlier than any state key written under it
-- (expire_at_ms must be at or after now + reset_after, the state key's own expiry), so a client that sees a new id
-- while state it wrote should still exist, or a seq lower than one it saw, knows that Redis lost state (a restart
-- without persistence, a flush, a failover to a replica that had not received the latest writes).
local function admit_reply(admitted, granted, remaining, retry_after, reset_after, now, expire_at_ms)
  local id, seq = '', 0
  if ARGV[3] == '1' then
    if granted > 0 then
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
  return {admitted, granted, remaining, retry_after, reset_after, now, id, seq}
end
