-- admit sliding log on one Redis sorted set: the same decisions as admit's local sliding_log
-- (include/admit/sliding_log.hpp), in microseconds of the server's own clock. common.lua comes before this text.
--
-- n fits at `now` iff the requests admitted in (now - window, now] plus n are at most `limit`; exactly, no estimate.
-- KEYS[1+i] the log, a sorted set: one member per admitted unit (a request of n adds n members), scored with the time
--          it was recorded at (µs since the Unix epoch), named "<time>:<sequence>" (the sequence, zero-padded, counts
--          the members recorded at the same time, so names are unique whatever the callers).
-- ARGV[2]  window, integer microseconds >= 1
-- ARGV[3]  limit, integer >= 1
-- A refusal (and n = 0) writes nothing: it only counts. An admission removes the members that have left the window,
-- adds its own, and sets the expiry to the moment the newest member leaves the window (rounded up to the
-- millisecond), when the log carries no information. Members in the window never exceed the limit after an
-- admission (an admission needs in-window + n <= limit), so the set holds at most `limit` members (after a lowered
-- limit, at most the old limit until they leave the window).
-- Members are recorded at max(now, the newest recorded time), so the log stays in time order when the server's clock
-- goes back (as the local limiter).
-- call(KEYS, ARGV): one call of the script (the code is a script and a function library at once: common.lua).
local function call(KEYS, ARGV)
  local w, limit = admit_window_parameters(ARGV, 'sliding_log')
  if not w then return limit end
  local now = admit_now()
  local cutoff = now - w -- members at or before it have left the window

  local function decide(key, n, k)
    -- (pcall: a key of another type, as a GCRA's string, is answered WRONGTYPE, which names no key)
    local in_window = redis.pcall('ZCOUNT', key, '(' .. admit_int(cutoff), '+inf')
    if type(in_window) == 'table' then
      return nil, admit_state_call_error(in_window, 'sliding_log', key, 'a sorted set of admitted requests')
    end
    -- Units of one that fit: how many of the last `limit` admitted units have left the window.
    local available = limit - math.min(limit, in_window)
    local newest, newest_member = nil, nil
    local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
    if last[1] then
      newest_member, newest = last[1], tonumber(last[2])
    end

    local admitted, granted, wait = 0, 0, 0
    if n > limit then
      wait = -1 -- larger than the limit: never
    elseif n > 0 then
      if n > available then
        -- The n-th oldest of the last `limit` units must leave the window first: index m - limit + n - 1 of the set.
        local m = redis.call('ZCARD', key)
        local e = redis.call('ZRANGE', key, m - limit + n - 1, m - limit + n - 1, 'WITHSCORES')
        wait = tonumber(e[2]) + w - now
      else
        admitted = 1
        granted = math.min(k, available)
        local record, seq = now, 0
        if newest and newest >= now then
          record = newest
          seq = tonumber(string.match(newest_member, ':(%d+)$')) or 0
        end
        redis.call('ZREMRANGEBYSCORE', key, '-inf', admit_int(cutoff))
        local prefix_score = admit_int(record)
        local prefix = prefix_score .. ':'
        local args = {}
        for i = 1, granted do
          args[#args + 1] = prefix_score
          args[#args + 1] = prefix .. string.format('%09d', seq + i)
          if #args >= 1000 or i == granted then
            redis.call('ZADD', key, unpack(args))
            args = {}
          end
        end
        newest = record
        available = available - granted
        redis.call('PEXPIREAT', key, admit_int(math.ceil((newest + w) / 1000)))
      end
    else
      admitted = 1 -- n = 0: a query, always admitted, writes nothing
    end
    local reset, expire_at = 0, 0
    if newest then
      reset = math.max(0, newest + w - now)
      expire_at = math.ceil((newest + w) / 1000)
    end
    return admitted, granted, available, wait, reset, expire_at
  end

  return admit_batch(KEYS, ARGV, now, decide)
end
