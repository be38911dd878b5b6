// The semaphore's op_batcher alone (src/redis/semaphore/op_batcher.hpp), with a sender that records each call and
// answers it when the test says: an operation leaves at once, alone, while fewer than two calls are unanswered; later
// ones wait and leave together, in order, at most max_batch to a call, when a call is answered; an operation whose
// deadline passed while it waited completes with errc::timeout, never sent; a batch's array reply is cut into each
// operation's own, and a failed call or an error reply is every operation's outcome; calls reach the sender in the
// order they formed, even when two threads answer calls at once.
#include "op_batcher.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <future>
#include <latch>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "admit/asio/error_code.hpp"
#include "admit/errc.hpp"
#include "admit/redis/client/reply.hpp"

namespace {

using admit::redis::reply;
using admit::redis::detail::op_batcher;
using steady = std::chrono::steady_clock;

// One call the batcher sent: the operations' names and first arguments, its deadline, and how to answer it.
struct sent_call {
  std::vector<std::string> ops;  // "name:first argument" of each operation, in order
  std::optional<steady::time_point> deadline;
  op_batcher::completion answer;
};

// An operation's outcome, as its completion saw it.
struct outcome {
  bool done = false;
  boost::system::error_code ec;
  reply r;
};

class OpBatcher : public ::testing::Test {
 protected:
  op_batcher batcher{[this](const std::vector<op_batcher::op>& ops, std::optional<steady::time_point> deadline,
                            op_batcher::completion answered) {
    sent_call c{{}, deadline, std::move(answered)};
    for (const auto& o : ops) c.ops.push_back(o.args.at(0) + ":" + o.args.at(1));
    calls.push_back(std::move(c));
  }};
  std::vector<sent_call> calls;
  std::vector<std::shared_ptr<outcome>> outcomes;
  std::shared_ptr<int> owner = std::make_shared<int>(0);

  // Submits operation `name` with argument `arg`; its outcome is outcomes.back().
  void submit(const std::string& name, const std::string& arg,
              std::optional<steady::time_point> deadline = steady::now() + std::chrono::hours(1)) {
    auto o = std::make_shared<outcome>();
    outcomes.push_back(o);
    batcher.submit({{name, arg},
                    deadline,
                    [o](boost::system::error_code ec, reply r) {
                      EXPECT_FALSE(o->done) << "completed twice";
                      o->done = true;
                      o->ec = ec;
                      o->r = std::move(r);
                    }},
                   owner);
  }
  static reply status(std::int64_t s) { return reply::array({reply::integer(s)}); }
  // A batch call's reply (semaphore.lua's `batch`): each operation's reply as its length and its elements, an error
  // reply as -1 and the error.
  static reply batch(const std::vector<reply>& each) {
    std::vector<reply> flat;
    for (const auto& r : each) {
      if (r.is_error()) {
        flat.push_back(reply::integer(-1));
        flat.push_back(r);
        continue;
      }
      flat.push_back(reply::integer(static_cast<std::int64_t>(r.elements().size())));
      flat.insert(flat.end(), r.elements().begin(), r.elements().end());
    }
    return reply::array(std::move(flat));
  }
};

TEST_F(OpBatcher, ALoneOperationLeavesAtOnceAlone) {
  submit("release", "a");
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].ops, (std::vector<std::string>{"release:a"}));
  calls[0].answer({}, status(0));
  ASSERT_TRUE(outcomes[0]->done);
  EXPECT_FALSE(outcomes[0]->ec);
  EXPECT_EQ(outcomes[0]->r.elements().at(0).integer(), 0);
  // Nothing in flight again: the next one leaves at once too.
  submit("acquire", "b");
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[1].ops, (std::vector<std::string>{"acquire:b"}));
  EXPECT_EQ(batcher.sent(), (std::pair<std::size_t, std::size_t>{2, 2}));
}

TEST_F(OpBatcher, OperationsBehindTwoUnansweredCallsLeaveTogetherInOrder) {
  submit("acquire", "1");
  submit("acquire", "2");
  ASSERT_EQ(calls.size(), 2u);  // two calls in flight, one operation each
  submit("release", "3");
  submit("cancel", "4");
  submit("poll", "5");
  EXPECT_EQ(calls.size(), 2u);  // waiting
  for (std::size_t i = 2; i < 5; ++i) EXPECT_FALSE(outcomes[i]->done);

  // The second call's answer sends what waited, as one call, before completing its own operation.
  calls[1].answer({}, status(1));
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls[2].ops, (std::vector<std::string>{"release:3", "cancel:4", "poll:5"}));
  EXPECT_TRUE(outcomes[1]->done);
  EXPECT_FALSE(outcomes[0]->done);

  // The batch's reply: each operation gets its own, an error in its place included.
  calls[2].answer({}, batch({status(0), reply::error("ERR admit semaphore: unknown operation cancel"), status(5)}));
  EXPECT_EQ(outcomes[2]->r.elements().size(), 1u);
  EXPECT_EQ(outcomes[2]->r.elements().at(0).integer(), 0);
  EXPECT_TRUE(outcomes[3]->r.is_error());
  EXPECT_EQ(outcomes[4]->r.elements().at(0).integer(), 5);
  calls[0].answer({}, status(1));
  EXPECT_TRUE(outcomes[0]->done);
  EXPECT_EQ(batcher.sent(), (std::pair<std::size_t, std::size_t>{3, 5}));
  // Both slots free again.
  submit("acquire", "6");
  submit("acquire", "7");
  EXPECT_EQ(calls.size(), 5u);
}

TEST_F(OpBatcher, ACallCarriesAtMostMaxBatchOperations) {
  submit("acquire", "x");
  submit("acquire", "y");
  const std::size_t waiting = op_batcher::max_batch + 5;
  for (std::size_t i = 0; i < waiting; ++i) submit("release", std::to_string(i));
  calls[0].answer({}, status(0));
  ASSERT_EQ(calls.size(), 3u);
  ASSERT_EQ(calls[2].ops.size(), op_batcher::max_batch);
  EXPECT_EQ(calls[2].ops.front(), "release:0");
  calls[1].answer({}, status(0));
  ASSERT_EQ(calls.size(), 4u);
  ASSERT_EQ(calls[3].ops.size(), 5u);
  EXPECT_EQ(calls[3].ops.front(), "release:" + std::to_string(op_batcher::max_batch));
}

TEST_F(OpBatcher, AnOperationPastItsDeadlineIsNeverSent) {
  submit("acquire", "1");
  submit("acquire", "2");
  submit("acquire", "late", steady::now() - std::chrono::seconds(1));
  submit("acquire", "on time");
  calls[0].answer({}, status(1));
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls[2].ops, (std::vector<std::string>{"acquire:on time"}));
  ASSERT_TRUE(outcomes[2]->done);
  EXPECT_EQ(outcomes[2]->ec, admit::errc::timeout);

  // Behind two unanswered calls, only a late operation waits: when a call is answered it is dropped, not sent, and
  // the slot is free again.
  submit("acquire", "late 2", steady::now() - std::chrono::seconds(1));
  EXPECT_FALSE(outcomes.back()->done);
  calls[1].answer({}, status(1));
  ASSERT_TRUE(outcomes.back()->done);
  EXPECT_EQ(outcomes.back()->ec, admit::errc::timeout);
  EXPECT_EQ(calls.size(), 3u);
  submit("acquire", "next");
  ASSERT_EQ(calls.size(), 4u);
  EXPECT_EQ(calls[3].ops, (std::vector<std::string>{"acquire:next"}));
}

TEST_F(OpBatcher, ACallsFailureIsEveryOperationsOutcome) {
  submit("acquire", "1");
  submit("acquire", "2");
  submit("release", "3");
  submit("release", "4");
  calls[0].answer(admit::asio::to_error_code(admit::errc::outcome_unknown), reply());
  ASSERT_EQ(calls.size(), 3u);
  calls[2].answer(admit::asio::to_error_code(admit::errc::connection_lost), reply());
  EXPECT_EQ(outcomes[2]->ec, admit::errc::connection_lost);
  EXPECT_EQ(outcomes[3]->ec, admit::errc::connection_lost);

  EXPECT_EQ(outcomes[0]->ec, admit::errc::outcome_unknown);

  // An error reply to the whole call: each operation gets the call's reply.
  submit("acquire", "5");  // goes at once: two in flight again
  submit("release", "6");
  submit("release", "7");
  ASSERT_EQ(calls.size(), 4u);
  calls[1].answer({}, status(0));
  ASSERT_EQ(calls.size(), 5u);
  EXPECT_EQ(calls[4].ops, (std::vector<std::string>{"release:6", "release:7"}));
  submit("release", "8");  // waits behind calls 3 and 4
  submit("release", "9");
  calls[4].answer({}, reply::error("ERR admit semaphore: n must be an integer, got x"));
  EXPECT_TRUE(outcomes[5]->r.is_error());
  EXPECT_TRUE(outcomes[6]->r.is_error());
  // A reply of another shape (one operation's reply short of the call's two) is an error for each: never read as
  // theirs, where its first element, a length, would pass for a status.
  ASSERT_EQ(calls.size(), 6u);
  EXPECT_EQ(calls[5].ops, (std::vector<std::string>{"release:8", "release:9"}));
  calls[5].answer({}, batch({status(0)}));
  ASSERT_TRUE(outcomes[7]->done && outcomes[8]->done);
  EXPECT_TRUE(outcomes[7]->r.is_error());
  EXPECT_TRUE(outcomes[8]->r.is_error());
}

// One thread's release, then its cancel (queued behind two calls), must reach the connection in that order, even
// when the answer that takes the release is slower to send it than another answer that takes the cancel. Here the
// release's sending is held up in the sender until the other answer has had every chance to send the cancel.
// A sender that answers each call at once, within the send and on its own thread (as a connection that is closed
// does): the answer is handled once the send returns, so each operation completes once and in order, and what a
// completion submits is sent in turn. Handled within the send, the answer would take the send lock again on the thread
// that holds it.
TEST(OpBatcherInline, ACallAnsweredWithinItsSendIsHandledAfterIt) {
  std::vector<std::string> sent;
  op_batcher b{
      [&](const std::vector<op_batcher::op>& ops, std::optional<steady::time_point>, op_batcher::completion answered) {
        for (const auto& o : ops) sent.push_back(o.args.at(0));
        answered({}, reply::array({reply::integer(0)}));
      }};
  const auto owner = std::make_shared<int>(0);
  std::vector<int> completed;
  std::function<void(int)> submit_next = [&](int k) {
    b.submit({{"op" + std::to_string(k), "x"},
              std::nullopt,
              [&, k](boost::system::error_code ec, reply) {
                EXPECT_FALSE(ec);
                completed.push_back(k);
                if (k < 5) submit_next(k + 1);  // from within a completion
              }},
             owner);
  };
  submit_next(1);
  EXPECT_EQ(completed, (std::vector<int>{1, 2, 3, 4, 5}));
  EXPECT_EQ(sent, (std::vector<std::string>{"op1", "op2", "op3", "op4", "op5"}));
  EXPECT_EQ(b.sent(), (std::pair<std::size_t, std::size_t>{5, 5}));
  // A slot taken alone and given back: nothing waited, nothing is sent; the next operation still goes at once.
  ASSERT_TRUE(b.begin_alone());
  b.end_alone(owner);
  submit_next(5);
  EXPECT_EQ(completed.size(), 6u);
}

TEST(OpBatcherOrder, CallsLeaveInTheOrderTheyFormedWhenTwoAnswersRace) {
  std::mutex m;
  std::vector<std::string> order;               // guarded by m
  std::vector<op_batcher::completion> answers;  // guarded by m
  std::promise<void> release_in_sender;
  std::latch go_on{1};
  op_batcher batcher{
      [&](const std::vector<op_batcher::op>& ops, std::optional<steady::time_point>, op_batcher::completion answered) {
        const std::string first = ops.at(0).args.at(0);
        if (first == "release") {
          release_in_sender.set_value();
          go_on.wait();  // taken from the queue, not on the connection yet
        }
        const std::lock_guard lock(m);
        for (const auto& o : ops) order.push_back(o.args.at(0));
        answers.push_back(std::move(answered));
      }};
  const auto owner = std::make_shared<int>(0);
  const auto noop = [](boost::system::error_code, reply) {};
  const auto later = steady::now() + std::chrono::hours(1);
  batcher.submit({{"acquire", "x"}, later, noop}, owner);
  batcher.submit({{"acquire", "y"}, later, noop}, owner);
  batcher.submit({{"release", "a"}, later, noop}, owner);  // queued: two in flight
  op_batcher::completion first, second;
  {
    const std::lock_guard lock(m);
    ASSERT_EQ(answers.size(), 2u);
    first = answers[0];
    second = answers[1];
  }
  // Thread 1 answers the first call: it takes the release and is held in the sender.
  std::jthread one([&] { first({}, reply::array({})); });
  release_in_sender.get_future().wait();
  batcher.submit({{"cancel", "a"}, later, noop}, owner);  // the same caller's next operation: queued
  // Thread 2 answers the second call: it must not send the cancel before the release is sent.
  auto two = std::async(std::launch::async, [&] { second({}, reply::array({})); });
  // Without the order kept, it sends the cancel at once and returns; with it, it waits for thread 1.
  (void)two.wait_for(std::chrono::milliseconds(200));
  go_on.count_down();
  two.get();
  one.join();
  std::vector<std::string> sent;
  {
    const std::lock_guard lock(m);
    sent = order;
    // The calls never answered are dropped while the batcher lives (as a dead executor drops them): their
    // completions must not outlive it.
    answers.clear();
  }
  ASSERT_EQ(sent.size(), 4u);
  EXPECT_EQ(sent[2], "release");
  EXPECT_EQ(sent[3], "cancel");
}

}  // namespace
