-- admit GCRA (Generic Cell Rate Algorithm) on one Redis key: the same arithmetic as admit's local limiter
-- (include/admit/detail/gcra_math.hpp), in microseconds of the server's own clock.
--
-- KEYS[1]  the limiter key; its value is TAT, the theoretical arrival time (integer microseconds since the Unix
--          epoch, as TIME gives them): the limiter is full again at TAT. Absent = full.
-- ARGV[1]  T, the emission interval (1 / rate), integer microseconds >= 1
-- ARGV[2]  burst, integer >= 1 (tolerance tau = burst * T)
-- ARGV[3]  n, the request's cost, integer >= 0
-- Returns  {admitted (0/1), remaining, retry_after_us (-1: never), reset_after_us, now_us}
--
-- Why microseconds: Lua numbers here are IEEE doubles, exact for integers below 2^53 (~9.0e15). Microseconds since
-- the epoch (~1.8e15) fit, with room for TAT = now + tau (the client keeps tau <= 2^51); nanoseconds (~1.8e18) do not.
-- Time is read with TIME only: the clients' clocks never enter the state. Under effects replication (the only mode of
-- Redis 7) the replicas receive the resulting SET, never the script, so TIME needs no redis.replicate_commands.
-- A refusal (and n = 0) writes nothing. An admission writes TAT with PXAT at TAT (rounded up to the millisecond):
-- the key disappears once the limiter is full again, when its value would carry no information.
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local n = tonumber(ARGV[3])
if not interval or interval < 1 or not burst or burst < 1 or not n then
  return redis.error_reply('ERR admit gcra: bad arguments (interval, burst, n)')
end
local tau = burst * interval

local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000000 + tonumber(time[2])

local tat = now
local stored = redis.call('GET', KEYS[1])
if stored then
  tat = tonumber(stored)
  if not tat then
    return redis.error_reply('ERR admit gcra: key does not hold an integer TAT')
  end
  if tat < now then tat = now end
end

local admitted = 0
local wait = 0
if n > burst then
  wait = -1 -- larger than the burst: never (admit's oversize_policy::reject)
elseif n > 0 then
  local ready = tat - tau + n * interval -- the time from which n fit
  if ready > now then
    wait = ready - now
  else
    admitted = 1
    tat = tat + n * interval
    redis.call('SET', KEYS[1], string.format('%.0f', tat), 'PXAT', string.format('%.0f', math.ceil(tat / 1000)))
  end
else
  admitted = 1 -- n = 0: a query, always admitted, writes nothing
end

-- remaining = min(floor((now + tau - tat) / T), burst), exactly (a double quotient near 2^52 could round up).
local remaining = 0
local spare = now + tau - tat
if spare > 0 then
  remaining = math.floor(spare / interval)
  if remaining * interval > spare then
    remaining = remaining - 1
  elseif (remaining + 1) * interval <= spare then
    remaining = remaining + 1
  end
  if remaining > burst then remaining = burst end
end
return {admitted, remaining, wait, tat - now, now}
