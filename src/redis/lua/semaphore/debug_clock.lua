-- semaphore.lua's debug clock: joined before call.lua in the library's debug builds only (cmake/redis.cmake,
-- CMAKE_BUILD_TYPE Debug; never in any other). A semaphore whose meta hash holds the field debug_now (µs since
-- the Unix epoch, written by a test) runs on that time instead of the server's clock, so that a test can move its time
-- as it moves a manual clock — the differential tests against the local admission. Without the field: TIME, one HGET
-- more per call.
server_time = function()
  local t = rcall('HGET', meta, 'debug_now')
  if t then return tonumber(t) end
  local s = rcall('TIME')
  return tonumber(s[1]) * 1000000 + tonumber(s[2])
end
