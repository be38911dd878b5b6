-- admit fixed window counter on one Redis key: the same decisions as admit's local fixed_window
-- (include/admit/fixed_window.hpp), in microseconds of the server's own clock. common.lua comes before this text.
--
-- Windows are [j * window, (j + 1) * window) in microseconds since the Unix epoch; each admits up to `limit`.
-- KEYS[1+i] the state, a string "start:window:count": the start of the newest window that admitted anything (µs), the
--          window length it was written with (µs), and its count. Absent = the current window is unused.
-- ARGV[2]  window, integer microseconds >= 1
-- ARGV[3]  limit, integer >= 1
-- A refusal (and n = 0) writes nothing. An admission writes the state with PXAT at the end of its window (rounded up
-- to the millisecond): from then on the count carries no information.
-- A count written with another window length is kept if its window ended after the current window began (it counts
-- against the current window), and forgotten otherwise.
-- call(KEYS, ARGV): one call of the script (the code is a script and a function library at once: common.lua).
local function call(KEYS, ARGV)
  local w, limit = admit_window_parameters(ARGV, 'fixed_window')
  if not w then return limit end
  local now = admit_now()

  local fdiv = admit_fdiv

  local function decide(key, n, k)
    local start = fdiv(now, w) * w
    local count = 0
    local stored, failed = admit_get_state(key, 'fixed_window', 'a window state')
    if failed then return nil, failed end
    if stored then
      local s, sw, c = string.match(stored, '^(%d+):(%d+):(%d+)$')
      if not s then
        return nil, admit_state_error('fixed_window', key, 'a window state')
      end
      s, sw, c = tonumber(s), tonumber(sw), tonumber(c)
      if sw == w and s > start then
        start, count = s, c -- a later window than now's (a clock gone back): count against it
      elseif s + sw > start then
        count = c
      end
    end
    local to_next = start + w - now

    local admitted, granted, wait = 0, 0, 0
    if n > limit then
      wait = -1 -- larger than the limit: never
    elseif n > 0 then
      if n > limit - count then
        wait = to_next -- until the next window starts
      else
        admitted = 1
        granted = math.min(k, limit - count)
        count = count + granted
        redis.call('SET', key, admit_int(start) .. ':' .. admit_int(w) .. ':' .. admit_int(count),
          'PXAT', admit_int(math.ceil((start + w) / 1000)))
      end
    else
      admitted = 1 -- n = 0: a query, always admitted, writes nothing
    end
    local reset = 0
    if count > 0 then reset = to_next end
    return admitted, granted, math.max(0, limit - count), wait, reset, math.ceil((start + w) / 1000)
  end

  return admit_batch(KEYS, ARGV, now, decide)
end
