// src/redis/client/reply_reader.hpp — hiredis's RESP2 parser building admit::redis::reply values directly (private to
// src/redis/client/).
//
//   redisReader* r = make_reply_reader();       // redisReaderFree(r) when done, as any hiredis reader
//   redisReaderFeed(r, bytes, n);
//   void* raw = nullptr;
//   if (redisReaderGetReply(r, &raw) == REDIS_OK && raw != nullptr) reply value = take_reply(raw);
//
// hiredis's own reader makes a redisReply per element (and its element array), which a client would then copy into
// its own values and free: two allocations and a copy per element, for replies that are mostly arrays of integers.
// This reader makes each element once, in place in its parent's elements. An allocation that fails makes hiredis's
// reader fail with its out-of-memory error (REDIS_ERR_OOM), as its own does.
#pragma once

#include <hiredis/read.h>

#include "admit/redis/client/reply.hpp"

namespace admit::redis::detail {

// A hiredis reader whose replies are admit::redis::reply objects (nullptr when memory ran out).
redisReader* make_reply_reader();

// The reply redisReaderGetReply gave (non-null) from such a reader, taken over: `raw` is freed.
reply take_reply(void* raw);

}  // namespace admit::redis::detail
