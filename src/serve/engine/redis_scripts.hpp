// serve/engine/redis_scripts.hpp — the Lua scripts of `admit serve`'s Redis backend (redis_backend.hpp) that
// admit::redis's limiters do not provide: envoyproxy/ratelimit's fixed window for a batch of counters, and the
// concurrency leases. Private to redis_backend.cpp.
#pragma once

#include "admit/redis/client/script.hpp"

namespace admit::serve::detail {

// envoyproxy/ratelimit's fixed window, for m >= 1 counters in one call (its INCRBY + EXPIRE per descriptor, at once):
//   KEYS[i]          the counter of hit i (a key may repeat: each hit counts after the previous ones)
//   ARGV[3i - 2]     the hits to add (integer >= 0)
//   ARGV[3i - 1]     the counter's lifetime in seconds: the unit
//   ARGV[3i]         -1: every hit is added, even over the limit (envoyproxy/ratelimit's way, over_limit_hits:
//                    count); else the limit (over_limit_hits: drop): hits that would take the count above it are not
//                    added
// Returns {count_1, ..., count_m}: each counter after its hits (under drop, for hits not added: the count they would
// have made, above the limit), or an error reply for that counter alone (a key holding something else).
// The expiry is set when the counter is created (its count is then the hits just added), not again at every hit as
// envoyproxy/ratelimit does: the counter then lives a unit after its window's first hit instead of its last, which
// is still past the window's end (the key names the window: no decision can tell), and the server does half the
// work per hit.
inline const redis::script& fixed_window_script() {
  static const redis::script s(R"lua(-- admit serve: envoyproxy/ratelimit's fixed window (INCRBY, EXPIRE when created)
local out = {}
for i = 1, #KEYS do
  local n, limit = ARGV[3 * i - 2], tonumber(ARGV[3 * i])
  local count = redis.pcall('INCRBY', KEYS[i], n)
  if type(count) == 'number' then
    if limit >= 0 and count > limit then
      -- drop: not counted (the reply still says how far over it would have gone); a counter just made goes again
      if count == tonumber(n) then redis.call('DEL', KEYS[i]) else redis.call('DECRBY', KEYS[i], n) end
    elseif count == tonumber(n) then
      redis.call('EXPIRE', KEYS[i], ARGV[3 * i - 1])
    end
  end
  out[i] = count
end
return out
)lua");
  return s;
}

// Concurrency leases of one counter, on Redis's clock (milliseconds):
//   KEYS[1]  zset: lease id -> expiry (ms since the Unix epoch)
//   KEYS[2]  hash: lease id -> permits it holds
//   ARGV[1]  "acquire" or "release"; ARGV[2] the lease id;
//   acquire: ARGV[3] permits (>= 0), ARGV[4] the limit, ARGV[5] the lease's lifetime (ms)
// Expired leases are dropped first. acquire returns {1, held after} (granted; n = 0 writes nothing) or {0, held}
// (refused: held + n > limit); release returns 1 when the lease was held, 0 otherwise. Both keys expire with their
// longest lease.
inline const redis::script& concurrency_script() {
  static const redis::script s(R"lua(-- admit serve: concurrency leases
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)
for _, id in ipairs(expired) do redis.call('HDEL', KEYS[2], id) end
if #expired > 0 then redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now) end
if ARGV[1] == 'release' then
  local removed = redis.call('ZREM', KEYS[1], ARGV[2])
  redis.call('HDEL', KEYS[2], ARGV[2])
  return removed
end
local held = 0
for _, v in ipairs(redis.call('HVALS', KEYS[2])) do held = held + tonumber(v) end
local n, limit, ttl = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
if not n or not limit or not ttl or n < 0 or ttl < 1 then
  return redis.error_reply('ERR admit serve concurrency: bad arguments')
end
if held + n > limit then return {0, held} end
if n > 0 then
  local at = now + ttl
  redis.call('ZADD', KEYS[1], string.format('%.0f', at), ARGV[2])
  redis.call('HSET', KEYS[2], ARGV[2], n)
  local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
  local expire_at = string.format('%.0f', math.max(at, tonumber(last[2])))
  redis.call('PEXPIREAT', KEYS[1], expire_at)
  redis.call('PEXPIREAT', KEYS[2], expire_at)
end
return {1, held + n}
)lua");
  return s;
}

}  // namespace admit::serve::detail
