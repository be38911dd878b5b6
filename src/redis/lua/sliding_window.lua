-- admit sliding window counter on one Redis key: the same arithmetic as admit's local sliding_window
-- (include/admit/sliding_window.hpp), in microseconds of the server's own clock. common.lua comes before this text.
--
--   estimate(now) = previous_count * (window - elapsed) / window + current_count;  n fits iff estimate + n <= limit
--
-- Windows are [j * window, (j + 1) * window) in microseconds since the Unix epoch.
-- KEYS[1+i] the state, a string "start:window:previous:current": the start of the newest window that admitted anything
--          (µs), the window length it was written with (µs), and the counts of the window before it and of it.
--          Absent = no requests in the last two windows.
-- ARGV[2]  window, integer microseconds >= 1
-- ARGV[3]  limit, integer >= 1 (limit * window < 2^52: the products below stay exact)
-- A refusal (and n = 0) writes nothing. An admission writes the state with PXAT at the end of the window after the
-- current one (rounded up to the millisecond): from then on both counts have left the estimate.
-- A state written with another window length is carried over conservatively: all its requests count as the current
-- window's if its window ended after the current window's start, as the previous window's if it ended during that
-- one, and are forgotten otherwise.
-- call(KEYS, ARGV): one call of the script (the code is a script and a function library at once: common.lua).
local function call(KEYS, ARGV)
  local w, limit = admit_window_parameters(ARGV, 'sliding_window')
  if not w then return limit end
  local now = admit_now()

  local fdiv = admit_fdiv

  -- ceil(p * (w - e) / w): the previous window's share of the estimate, rounded up.
  local function weighted(p, e)
    local num = p * (w - e)
    local q = fdiv(num, w)
    if q * w < num then q = q + 1 end
    return q
  end
  -- The earliest e in [0, w) with p * (w - e) <= room * w, or w when there is none. p > 0, room >= 0.
  local function first_fit(p, room)
    local q = fdiv(room * w, p)
    if q >= w then return 0 end
    return w - q
  end

  local cur_start = fdiv(now, w) * w

  local function decide(key, n, k)
    local start, elapsed, prev, cur = cur_start, now - cur_start, 0, 0
    local stored, failed = admit_get_state(key, 'sliding_window', 'a window state')
    if failed then return nil, failed end
    if stored then
      local s, sw, sp, sc = string.match(stored, '^(%d+):(%d+):(%d+):(%d+)$')
      if not s then
        return nil, admit_state_error('sliding_window', key, 'a window state')
      end
      s, sw, sp, sc = tonumber(s), tonumber(sw), tonumber(sp), tonumber(sc)
      if sw == w then
        if s > cur_start then
          start, elapsed, prev, cur = s, 0, sp, sc -- behind the newest window (a clock gone back): judge at its start
        elseif s == cur_start then
          prev, cur = sp, sc
        elseif s == cur_start - w then
          prev = sc
        end
      elseif s + sw > cur_start then
        cur = sp + sc
      elseif s + sw > cur_start - w then
        prev = sp + sc
      end
    end

    local available = limit - cur - weighted(prev, elapsed)
    local admitted, granted, wait = 0, 0, 0
    if n > limit then
      wait = -1 -- larger than the limit: never
    elseif n > 0 then
      if n > available then
        local ready
        if n <= limit - cur and prev > 0 and first_fit(prev, limit - cur - n) < w then
          ready = start + first_fit(prev, limit - cur - n) -- later in this window, as the previous one's weight decays
        elseif cur == 0 then
          ready = start + w
        elseif first_fit(cur, limit - n) < w then
          ready = start + w + first_fit(cur, limit - n) -- in the next window, this one's count becoming the previous
        else
          ready = start + 2 * w -- n == limit with counts in this window: the window after the next starts empty
        end
        wait = math.max(0, ready - now)
      else
        admitted = 1
        granted = math.min(k, available)
        cur = cur + granted
        available = available - granted
        redis.call('SET', key, admit_int(start) .. ':' .. admit_int(w) .. ':' .. admit_int(prev) .. ':' .. admit_int(cur),
          'PXAT', admit_int(math.ceil((start + 2 * w) / 1000)))
      end
    else
      admitted = 1 -- n = 0: a query, always admitted, writes nothing
    end
    local zero_at = now
    if cur > 0 then
      zero_at = start + 2 * w
    elseif prev > 0 then
      zero_at = start + w
    end
    return admitted, granted, math.max(0, available), wait, math.max(0, zero_at - now), math.ceil((start + 2 * w) / 1000)
  end

  return admit_batch(KEYS, ARGV, now, decide)
end
