// serve/engine/redis_scripts.hpp — the Lua scripts of `admit serve`'s Redis backend (redis_backend.hpp) that
// admit::redis's limiters do not provide: envoyproxy/ratelimit's fixed window for a batch of counters. Private to
// redis_counting.cpp.
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

}  // namespace admit::serve::detail
