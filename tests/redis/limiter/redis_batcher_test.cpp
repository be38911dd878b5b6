// The batcher alone (src/redis/limiter/batcher.hpp) with a recording sink, and the script call's wire format
// (script_call.hpp): the first decision schedules one flush; a queue of min(max_batch, 8) leaves at once; a flush
// sends the rest in order as one call; completed decisions are never sent; a batch's command and
// its reply cut into each decision's own; replies that contradict the request are rejected.
#include "batcher.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "admit/redis/client/reply.hpp"
#include "admit/redis/client/script.hpp"
#include "script_call.hpp"

namespace {

using admit::redis::reply;
using admit::redis::detail::batch_entry;
using admit::redis::detail::batch_sink;
using admit::redis::detail::batcher;
using admit::redis::detail::decision_reply;
using admit::redis::detail::limiter_algorithm;
using admit::redis::detail::member_reply;
using admit::redis::detail::parse_decision;
using admit::redis::detail::request_base;

// A request that only records whether it was completed (the batcher reads done()).
class recorded_request final : public request_base {
 private:
  void deliver(boost::system::error_code, reply&&) noexcept override {}
};

// Records what the batcher asks of it.
struct recording_sink final : batch_sink {
  int flushes_scheduled = 0;
  std::vector<std::vector<std::string>> calls;  // the state keys of each call, in order
  void schedule_flush() override { ++flushes_scheduled; }
  void send(std::vector<batch_entry> batch) override {
    std::vector<std::string> keys;
    for (const auto& e : batch) keys.push_back(e.state_key);
    calls.push_back(std::move(keys));
  }
};

batch_entry entry(const std::string& key, std::shared_ptr<request_base> req = std::make_shared<recorded_request>()) {
  return {std::move(req), key, 1, 1, std::nullopt};
}

TEST(RedisBatcher, TheFirstDecisionSchedulesOneFlushThatSendsTheQueueInOrder) {
  batcher b(64);
  recording_sink sink;
  for (const char* k : {"a", "b", "c"}) b.submit(entry(k), sink);
  EXPECT_EQ(sink.flushes_scheduled, 1);
  EXPECT_TRUE(sink.calls.empty());
  b.flush(sink);
  ASSERT_EQ(sink.calls.size(), 1u);
  EXPECT_EQ(sink.calls[0], (std::vector<std::string>{"a", "b", "c"}));
  b.flush(sink);  // nothing queued: nothing sent
  EXPECT_EQ(sink.calls.size(), 1u);
  b.submit(entry("d"), sink);  // after a flush, the next decision schedules another
  EXPECT_EQ(sink.flushes_scheduled, 2);
}

TEST(RedisBatcher, AQueueOfEightLeavesAtOnce) {
  batcher b(64);
  recording_sink sink;
  for (int i = 0; i < 8; ++i) b.submit(entry(std::to_string(i)), sink);
  ASSERT_EQ(sink.calls.size(), 1u);
  EXPECT_EQ(sink.calls[0].size(), batcher::stream_batch);
  b.submit(entry("8"), sink);  // a flush is still scheduled: not scheduled again
  EXPECT_EQ(sink.flushes_scheduled, 1);
  b.flush(sink);
  ASSERT_EQ(sink.calls.size(), 2u);
  EXPECT_EQ(sink.calls[1], (std::vector<std::string>{"8"}));
}

TEST(RedisBatcher, MaxBatchBoundsEveryCall) {
  batcher one(1);
  recording_sink sink;
  for (int i = 0; i < 3; ++i) one.submit(entry(std::to_string(i)), sink);
  EXPECT_EQ(sink.calls.size(), 3u);  // each alone, at once
  EXPECT_EQ(sink.flushes_scheduled, 0);

  // Below stream_batch, a queue of max_batch leaves at once; the flush sends the rest, fewer than max_batch.
  batcher three(3);
  recording_sink s3;
  for (int i = 0; i < 7; ++i) three.submit(entry(std::to_string(i)), s3);
  ASSERT_EQ(s3.calls.size(), 2u);
  EXPECT_EQ(s3.calls[0], (std::vector<std::string>{"0", "1", "2"}));
  EXPECT_EQ(s3.calls[1], (std::vector<std::string>{"3", "4", "5"}));
  EXPECT_EQ(s3.flushes_scheduled, 1);  // by "0"; "6" finds it still pending
  three.flush(s3);
  ASSERT_EQ(s3.calls.size(), 3u);
  EXPECT_EQ(s3.calls[2], (std::vector<std::string>{"6"}));
}

TEST(RedisBatcher, ADecisionCompletedWhileQueuedIsNeverSent) {
  batcher b(64);
  recording_sink sink;
  auto cancelled = std::make_shared<recorded_request>();
  b.submit(entry("a"), sink);
  b.submit(entry("b", cancelled), sink);
  b.submit(entry("c"), sink);
  ASSERT_TRUE(cancelled->try_finish({}, reply()));
  b.flush(sink);
  ASSERT_EQ(sink.calls.size(), 1u);
  EXPECT_EQ(sink.calls[0], (std::vector<std::string>{"a", "c"}));

  // All completed: no call at all.
  batcher c(64);
  recording_sink none;
  auto gone = std::make_shared<recorded_request>();
  c.submit(entry("x", gone), none);
  ASSERT_TRUE(gone->try_finish({}, reply()));
  c.flush(none);
  EXPECT_TRUE(none.calls.empty());
}

// ---- the script call's wire format ----

reply decision_of(std::int64_t admitted, std::int64_t granted, std::int64_t remaining, std::int64_t wait) {
  return reply::array({reply::integer(admitted), reply::integer(granted), reply::integer(remaining),
                       reply::integer(wait), reply::integer(1000)});
}

TEST(RedisScriptCall, ABatchIsOneCommandWithKeysThenArguments) {
  static const admit::redis::script lua{"return 1"};
  limiter_algorithm a;
  a.lua = &lua;
  a.params = {"1000", "5"};
  std::vector<batch_entry> batch{entry("{l}:a"), entry("{l}:b")};
  batch[1].n = 2;
  batch[1].k = 4;
  const auto c = admit::redis::detail::batch_command(a, "{l}", true, batch);
  const std::vector<std::string> expected{"EVALSHA", lua.sha1(), "3", "{l}", "{l}:a", "{l}:b", "1",
                                          "1000",    "5",        "1", "1",   "2",     "4"};
  EXPECT_EQ(c.args(), expected);
}

TEST(RedisScriptCall, EachDecisionGetsItsOwnReplyWithTheSharedTail) {
  const reply batch = reply::array({decision_of(1, 1, 4, 0), reply::error("ERR bad key"), decision_of(0, 0, 0, 7),
                                    reply::integer(123), reply::string("e1"), reply::integer(9)});
  const reply first = member_reply(batch, 0, 3);
  ASSERT_TRUE(first.is_array());
  ASSERT_EQ(first.elements().size(), 8u);
  EXPECT_EQ(first.elements()[5].integer(), 123);
  EXPECT_EQ(first.elements()[6].str(), "e1");
  const reply second = member_reply(batch, 1, 3);
  EXPECT_TRUE(second.is_error());  // that decision's failure alone
  const auto third = parse_decision(member_reply(batch, 2, 3), 1, 1, 5);
  ASSERT_TRUE(third.has_value());
  EXPECT_FALSE(third->admitted);
  EXPECT_EQ(third->retry_after_us, 7);
  EXPECT_EQ(third->now_us, 123);
  EXPECT_EQ(third->epoch_id, "e1");
  EXPECT_EQ(third->epoch_seq, 9);
  // A reply of another shape (an error for the whole call) reaches every decision as it is.
  EXPECT_TRUE(member_reply(reply::error("NOSCRIPT"), 1, 3).is_error());
}

TEST(RedisScriptCall, RepliesThatContradictTheRequestAreRejected) {
  const auto one = [](std::int64_t admitted, std::int64_t granted, std::int64_t remaining, std::int64_t wait) {
    const reply batch = reply::array(
        {decision_of(admitted, granted, remaining, wait), reply::integer(1), reply::string(""), reply::integer(0)});
    return member_reply(batch, 0, 1);
  };
  // n = 2, k = 4, limit 5.
  EXPECT_TRUE(parse_decision(one(1, 2, 3, 0), 2, 4, 5));
  EXPECT_TRUE(parse_decision(one(1, 4, 1, 0), 2, 4, 5));
  EXPECT_TRUE(parse_decision(one(0, 0, 0, -1), 2, 4, 5));  // never
  EXPECT_FALSE(parse_decision(one(1, 1, 3, 0), 2, 4, 5));  // granted fewer than asked
  EXPECT_FALSE(parse_decision(one(1, 5, 0, 0), 2, 4, 5));  // more than k
  EXPECT_FALSE(parse_decision(one(1, 2, 3, 5), 2, 4, 5));  // admitted with a wait
  EXPECT_FALSE(parse_decision(one(0, 1, 0, 5), 2, 4, 5));  // refused but granted
  EXPECT_FALSE(parse_decision(one(1, 2, 6, 0), 2, 4, 5));  // remaining above the limit
  EXPECT_FALSE(parse_decision(one(2, 2, 3, 0), 2, 4, 5));  // admitted neither 0 nor 1
  EXPECT_FALSE(parse_decision(one(0, 0, 0, -2), 2, 4, 5));
  EXPECT_TRUE(parse_decision(one(1, 0, 5, 0), 0, 0, 5));  // a query grants nothing
  EXPECT_FALSE(parse_decision(one(1, 1, 4, 0), 0, 0, 5));
  EXPECT_FALSE(parse_decision(reply::integer(1), 1, 1, 5));
  EXPECT_FALSE(parse_decision(reply::array({reply::integer(1)}), 1, 1, 5));
}

}  // namespace
