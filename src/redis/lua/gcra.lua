-- admit GCRA (Generic Cell Rate Algorithm) on one Redis key: the same arithmetic as admit's local limiter
-- (include/admit/detail/gcra_math.hpp), in microseconds of the server's own clock. common.lua comes before this text.
--
-- KEYS[1+i] the state: TAT, the theoretical arrival time (integer microseconds since the Unix epoch, as TIME gives
--          them): the limiter is full again at TAT. Absent = full.
-- ARGV[2]  T, the emission interval (1 / rate), integer microseconds >= 1
-- ARGV[3]  burst, integer >= 1 (tolerance tau = burst * T)
-- ARGV[4]  "1" to charge refused requests (limiter_options::charge_refused), "0" not to
-- Admission takes g tokens, n <= g <= k, as many as fit (k > n only with local token leasing).
-- A refusal (and n = 0) writes nothing, unless refusals are charged: then a refused request of n adds n * T to TAT
-- all the same (the key goes into debt: TAT beyond now + tau), and while in debt n = 0 is refused too. An admission writes TAT with PXAT at TAT (rounded up to the millisecond): the
-- key disappears once the limiter is full again, when its value would carry no information.
-- call(KEYS, ARGV): one call of the script (the code is a script and a function library at once: common.lua).
local function call(KEYS, ARGV)
  local interval, burst, charge = admit_rate_parameters(ARGV, 'gcra')
  if not interval then return burst end
  local tau = burst * interval
  local now = admit_now()

  -- fit(tat) = min(floor((now + tau - tat) / T), burst): how many tokens are available, computed exactly.
  local function fit(t)
    local spare = now + tau - t
    if spare <= 0 then return 0 end
    return math.min(admit_fdiv(spare, interval), burst)
  end

  local function decide(key, n, k)
    local tat = now
    local stored, failed = admit_get_state(key, 'gcra', 'an integer TAT')
    if failed then return nil, failed end
    if stored then
      tat = tonumber(stored)
      if not tat then
        return nil, admit_state_error('gcra', key, 'an integer TAT')
      end
      if tat < now then tat = now end
    end

    local admitted, granted, wait, charged = 0, 0, 0, false
    if charge and (n > 0 and (n > burst or fit(tat) < n) or n == 0 and tat > now + tau) then
      -- refused, and charged: the request's cost goes on TAT all the same; the wait is until the debt is repaid
      if n > 0 then
        -- the debt (TAT beyond now + tau) is capped at 2^51 µs, 71 years: every time stays an exact integer
        tat = math.min(math.max(tat, now) + n * interval, now + tau + 2251799813685248)
        charged = true
        redis.call('SET', key, admit_int(tat), 'PXAT', admit_int(math.ceil(tat / 1000)))
      end
      wait = tat - tau - now
    elseif n > burst then
      wait = -1 -- larger than the burst: never (admit's oversize_policy::reject)
    elseif n > 0 then
      local available = fit(tat)
      if available < n then
        wait = tat - tau + n * interval - now -- until the time from which n fit
      else
        admitted = 1
        granted = math.min(k, available)
        tat = tat + granted * interval
        redis.call('SET', key, admit_int(tat), 'PXAT', admit_int(math.ceil(tat / 1000)))
      end
    else
      admitted = 1 -- n = 0: a query, always admitted, writes nothing
    end
    return admitted, granted, fit(tat), wait, tat - now, math.ceil(tat / 1000), charged
  end

  return admit_batch(KEYS, ARGV, now, decide, 3)
end
