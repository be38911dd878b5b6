-- admit token bucket on one Redis key: the same arithmetic as admit's local token bucket
-- (include/admit/detail/token_bucket_math.hpp), in microseconds of the server's own clock. common.lua comes before
-- this text.
--
-- KEYS[1+i] the state: the instant the bucket was (or will be) empty, integer microseconds since the Unix epoch, so
--          that tokens(now) = min(burst, (now - empty_at) / interval). Absent = full.
-- ARGV[2]  the refill interval (1 / rate), integer microseconds >= 1
-- ARGV[3]  burst, integer >= 1
-- ARGV[4]  "1" to charge refused requests (limiter_options::charge_refused), "0" not to
-- Admission takes g tokens, n <= g <= k, as many as the bucket holds (k > n only with local token leasing).
-- A refusal (and n = 0) writes nothing, unless refusals are charged: then a refused request of n takes its n tokens
-- all the same (the bucket goes into debt: empty_at beyond now), and while in debt n = 0 is refused too. An admission writes the state with PXAT at the instant the bucket is full
-- again (empty_at + burst * interval, rounded up to the millisecond): then the key carries no information.
-- New parameters apply to the stored instant as it is: the tokens are recounted at the new interval (capped at the
-- new burst) from the same empty instant.
-- call(KEYS, ARGV): one call of the script (the code is a script and a function library at once: common.lua).
local function call(KEYS, ARGV)
  local interval, burst, charge = admit_rate_parameters(ARGV, 'token_bucket')
  if not interval then return burst end
  local tol = burst * interval
  local now = admit_now()

  -- Whole tokens held at `now` for the state e: floor((now - e) / interval) in [0, burst], computed exactly.
  local function tokens(e)
    local spare = now - e
    if spare >= tol then return burst end
    if spare <= 0 then return 0 end
    return admit_fdiv(spare, interval)
  end

  local function decide(key, n, k)
    local empty_at = now - tol -- a full bucket
    local stored, failed = admit_get_state(key, 'token_bucket', 'an integer time')
    if failed then return nil, failed end
    if stored then
      empty_at = tonumber(stored)
      if not empty_at then
        return nil, admit_state_error('token_bucket', key, 'an integer time')
      end
    end

    local admitted, granted, wait, charged = 0, 0, 0, false
    if charge and (n > 0 and (n > burst or math.max(empty_at, now - tol) + n * interval > now) or
        n == 0 and empty_at > now) then
      -- refused, and charged: the tokens are taken all the same; the wait is until the debt is repaid
      if n > 0 then
        -- the debt (empty_at beyond now) is capped at 2^51 µs, 71 years: every time stays an exact integer
        empty_at = math.min(math.max(empty_at, now - tol) + n * interval, now + 2251799813685248)
        charged = true
        redis.call('SET', key, admit_int(empty_at), 'PXAT', admit_int(math.ceil((empty_at + tol) / 1000)))
      end
      wait = empty_at - now
    elseif n > burst then
      wait = -1 -- larger than the burst: never (admit's oversize_policy::reject)
    elseif n > 0 then
      local base = math.max(empty_at, now - tol)
      local ready = base + n * interval
      if ready > now then
        wait = ready - now -- until the n-th token has refilled
      else
        admitted = 1
        granted = math.min(k, tokens(base))
        empty_at = base + granted * interval
        redis.call('SET', key, admit_int(empty_at), 'PXAT', admit_int(math.ceil((empty_at + tol) / 1000)))
      end
    else
      admitted = 1 -- n = 0: a query, always admitted, writes nothing
    end
    local full_at = empty_at + tol
    return admitted, granted, tokens(empty_at), wait, math.max(0, full_at - now), math.ceil(full_at / 1000), charged
  end

  return admit_batch(KEYS, ARGV, now, decide, 3)
end
