// serve/engine/redis_scripts.hpp — the Lua scripts of `admit serve`'s Redis backend (redis_backend.hpp) that
// admit::redis's limiters do not provide: envoyproxy/ratelimit's fixed window for a batch of counters, and the
// concurrency leases. Private to redis_backend.cpp.
#pragma once

#include "admit/redis/client/script.hpp"

namespace admit::serve::detail {

// envoyproxy/ratelimit's fixed window, for m >= 1 counters in one call (its INCRBY + EXPIRE per descriptor, at once):
//   KEYS[i]          the counter of hit i (a key may repeat: each hit counts after the previous ones)
//   ARGV[5i - 4]     n, the hits to add (integer >= 0)
//   ARGV[5i - 3]     the counter's lifetime in seconds: the unit
//   ARGV[5i - 2]     the limit
//   ARGV[5i - 1]     "count": a hit over the limit is added all the same (envoyproxy/ratelimit's way); "drop": it is
//   not ARGV[5i]         take >= n: when the n hits fit, up to `take` are added (never beyond the limit) — the surplus,
//                    take − n at most, is prefetched by the caller (the rule extension `prefetch`)
// Returns {{count_1, extra_1}, ..., {count_m, extra_m}}: each counter after its n hits (for hits over the limit under
// drop, the count they would have made), and the hits added beyond n; or an error reply for that counter alone (a
// key holding something else).
// The expiry is set when the counter is created (its count is then the hits just added), not again at every hit as
// envoyproxy/ratelimit does: the counter then lives a unit after its window's first hit instead of its last, which
// is still past the window's end (the key names the window: no decision can tell), and the server does half the
// work per hit. A counter is never created by hits that are not added.
inline const redis::script& fixed_window_script() {
  static const redis::script s(R"lua(-- admit serve: envoyproxy/ratelimit's fixed window (INCRBY, EXPIRE when created)
local function add(key, n, ttl)
  local count = redis.call('INCRBY', key, n)
  if count == n then redis.call('EXPIRE', key, ttl) end
  return count
end
local function decide(key, n, ttl, limit, mode, take)
  if mode == 'count' and take == n then return {add(key, n, ttl), 0} end
  local count = tonumber(redis.call('GET', key) or '0')
  if not count then return redis.error_reply('ERR admit serve: the counter ' .. key .. ' does not hold a count') end
  if count + n > limit then
    if mode == 'count' and n > 0 then add(key, n, ttl) end
    return {count + n, 0}
  end
  local taken = math.min(take, limit - count)
  if taken > 0 then add(key, taken, ttl) end
  return {count + n, taken - n}
end
local out = {}
for i = 1, #KEYS do
  local b = 5 * (i - 1)
  local ok, r = pcall(decide, KEYS[i], tonumber(ARGV[b + 1]), ARGV[b + 2], tonumber(ARGV[b + 3]), ARGV[b + 4],
                      tonumber(ARGV[b + 5]))
  out[i] = ok and r or {err = type(r) == 'table' and r.err or tostring(r)}
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
