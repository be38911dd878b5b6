// The semaphore's op_batcher alone (src/redis/semaphore/op_batcher.hpp), with a sender that records each call and
// answers it when the test says, and an executor whose posted tasks run when the test says: an operation leaves at
// once, alone, while no call is unanswered and nothing waits; later ones wait and leave together, in order, at most
// max_batch to a call, when a flush runs (at most two calls unanswered, as the semaphore's; one test at three), or when
// an answer finds them waiting, or after an answer to several operations (what their completions ask for never leaves
// alone); a wave alone is split in two; an operation whose deadline passed while it waited
// completes with errc::timeout, never sent; a batch's array reply is cut into each operation's own, and a failed call
// or an error reply is every operation's outcome; a flush that never runs drops what waited; calls reach the sender
// in the order they formed, even when two threads send at once.
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

// An executor's queue of posted tasks, run when the test says.
struct manual_executor {
  std::vector<std::function<void()>> posted;
  op_batcher::poster poster() {
    return [this](std::function<void()> task) { posted.push_back(std::move(task)); };
  }
  // Runs the tasks posted so far and those they post, in order, until none is left; returns how many ran.
  std::size_t run() {
    std::size_t ran = 0;
    while (!posted.empty()) {
      auto task = std::move(posted.front());
      posted.erase(posted.begin());
      task();
      ++ran;
    }
    return ran;
  }
};

// How many turns after an answer its completions' callers ask for their next operations (as the semaphore's).
constexpr int reach = 2;

class OpBatcher : public ::testing::Test {
 protected:
  manual_executor executor;
  op_batcher batcher{[this](const std::vector<op_batcher::op>& ops, std::optional<steady::time_point> deadline,
                            op_batcher::completion answered) {
                       sent_call c{{}, deadline, std::move(answered)};
                       for (const auto& o : ops) c.ops.push_back(o.args.at(0) + ":" + o.args.at(1));
                       calls.push_back(std::move(c));
                     },
                     executor.poster(), reach, 2};
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

TEST_F(OpBatcher, WhatIsAskedForWhileACallIsInFlightLeavesTogetherWhenTheFlushRuns) {
  submit("acquire", "1");
  ASSERT_EQ(calls.size(), 1u);
  submit("release", "2");
  submit("cancel", "3");
  submit("poll", "4");
  EXPECT_EQ(calls.size(), 1u);  // waiting for the flush, posted once
  EXPECT_EQ(executor.posted.size(), 1u);
  EXPECT_EQ(executor.run(), 1u);
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[1].ops, (std::vector<std::string>{"release:2", "cancel:3", "poll:4"}));

  // Two calls unanswered: the next flush leaves what waits for an answer.
  submit("release", "5");
  submit("release", "6");
  executor.run();
  EXPECT_EQ(calls.size(), 2u);
  // The batch's reply: each operation gets its own, an error in its place included. The answer finds 5 and 6 waiting
  // while call 0 is in flight: they leave with what its completions ask for, after `reach` more turns.
  calls[1].answer({}, batch({status(0), reply::error("ERR admit semaphore: unknown operation cancel"), status(5)}));
  EXPECT_EQ(outcomes[1]->r.elements().size(), 1u);
  EXPECT_EQ(outcomes[1]->r.elements().at(0).integer(), 0);
  EXPECT_TRUE(outcomes[2]->r.is_error());
  EXPECT_EQ(outcomes[3]->r.elements().at(0).integer(), 5);
  EXPECT_EQ(calls.size(), 2u);
  submit("acquire", "7");  // asked for by a completion's handler, a turn later
  EXPECT_EQ(executor.run(), static_cast<std::size_t>(reach + 1));
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls[2].ops, (std::vector<std::string>{"release:5", "release:6", "acquire:7"}));
  calls[0].answer({}, status(1));
  EXPECT_TRUE(outcomes[0]->done);
  calls[2].answer({}, batch({status(0), status(0), status(1)}));
  EXPECT_EQ(batcher.sent(), (std::pair<std::size_t, std::size_t>{3, 7}));
  // The answer to several operations posted a flush for what their completions ask for: that waits for it.
  submit("acquire", "8");
  EXPECT_EQ(calls.size(), 3u);
  EXPECT_EQ(executor.run(), static_cast<std::size_t>(reach + 1));
  ASSERT_EQ(calls.size(), 4u);
  EXPECT_EQ(calls[3].ops, (std::vector<std::string>{"acquire:8"}));
  // The answer to one operation posts nothing: with nothing in flight or waiting, the next leaves at once, alone.
  calls[3].answer({}, status(0));
  submit("acquire", "9");
  EXPECT_EQ(calls.size(), 5u);
  EXPECT_TRUE(executor.posted.empty());
}

TEST_F(OpBatcher, WhatTheCompletionsOfTwoAnswersReadTogetherAskForNeverLeavesAlone) {
  // Two calls of two operations each in flight.
  submit("acquire", "a");
  submit("release", "b");
  submit("release", "c");
  executor.run();
  calls[0].answer({}, status(0));
  submit("release", "d");
  submit("release", "e");
  executor.run();
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls[1].ops, (std::vector<std::string>{"release:b", "release:c"}));
  EXPECT_EQ(calls[2].ops, (std::vector<std::string>{"release:d", "release:e"}));
  // Both answered back to back, as when one read brings both replies; then what their completions ask for.
  calls[1].answer({}, batch({status(0), status(0)}));
  calls[2].answer({}, batch({status(0), status(0)}));
  for (const char* id : {"f", "g", "h", "i"}) submit("acquire", id);
  // Nothing in flight, yet none left alone (the first would have, with the rest right behind it: one wave again).
  EXPECT_EQ(calls.size(), 3u);
  executor.run();
  // One flush: a wave alone, split in two; the other half leaves at that call's answer.
  ASSERT_EQ(calls.size(), 4u);
  EXPECT_EQ(calls[3].ops, (std::vector<std::string>{"acquire:f", "acquire:g"}));
  calls[3].answer({}, batch({status(1), status(1)}));
  ASSERT_EQ(calls.size(), 5u);
  EXPECT_EQ(calls[4].ops, (std::vector<std::string>{"acquire:h", "acquire:i"}));
}

TEST_F(OpBatcher, AWaveAloneIsSplitInTwo) {
  submit("acquire", "a");
  submit("release", "b");
  std::size_t calls_at_completion = 0;  // when c's completion runs
  batcher.submit(
      {{"release", "c"}, std::nullopt, [&](boost::system::error_code, reply) { calls_at_completion = calls.size(); }},
      owner);
  submit("release", "d");
  submit("release", "e");
  // The only call is answered before the flush runs: Redis has nothing, and four operations wait. Half leave now.
  calls[0].answer({}, status(0));
  executor.run();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[1].ops, (std::vector<std::string>{"release:b", "release:c"}));
  submit("acquire", "f");  // waits with the other half, for that call's answer: no flush
  EXPECT_TRUE(executor.posted.empty());
  // That answer was the only call unanswered: what waited leaves at once, before the answer's completions run.
  calls[1].answer({}, batch({status(0), status(0)}));
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls[2].ops, (std::vector<std::string>{"release:d", "release:e", "acquire:f"}));
  EXPECT_EQ(calls_at_completion, 3u);
  EXPECT_TRUE(executor.posted.empty());
}

TEST_F(OpBatcher, ACallCarriesAtMostMaxBatchOperations) {
  submit("acquire", "x");
  const std::size_t waiting = op_batcher::max_batch + 5;
  for (std::size_t i = 0; i < waiting; ++i) submit("release", std::to_string(i));
  executor.run();
  ASSERT_EQ(calls.size(), 2u);
  ASSERT_EQ(calls[1].ops.size(), op_batcher::max_batch);
  EXPECT_EQ(calls[1].ops.front(), "release:0");
  calls[0].answer({}, status(0));  // the other call still in flight: the rest leave after the completions' turns
  EXPECT_EQ(calls.size(), 2u);
  executor.run();
  ASSERT_EQ(calls.size(), 3u);
  ASSERT_EQ(calls[2].ops.size(), 5u);
  EXPECT_EQ(calls[2].ops.front(), "release:" + std::to_string(op_batcher::max_batch));
}

TEST_F(OpBatcher, AnOperationPastItsDeadlineIsNeverSent) {
  submit("acquire", "1");
  submit("acquire", "late", steady::now() - std::chrono::seconds(1));
  submit("acquire", "on time");
  executor.run();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[1].ops, (std::vector<std::string>{"acquire:on time"}));
  ASSERT_TRUE(outcomes[1]->done);
  EXPECT_EQ(outcomes[1]->ec, admit::errc::timeout);

  // Behind two unanswered calls, only a late operation waits: when it is taken it is dropped, not sent, and the slot
  // it would have had is free again.
  submit("acquire", "late 2", steady::now() - std::chrono::seconds(1));
  executor.run();
  EXPECT_FALSE(outcomes.back()->done);
  calls[0].answer({}, status(1));
  executor.run();
  ASSERT_TRUE(outcomes.back()->done);
  EXPECT_EQ(outcomes.back()->ec, admit::errc::timeout);
  EXPECT_EQ(calls.size(), 2u);
  calls[1].answer({}, status(1));
  submit("acquire", "next");  // nothing in flight: at once
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls[2].ops, (std::vector<std::string>{"acquire:next"}));
}

TEST_F(OpBatcher, ACallsFailureIsEveryOperationsOutcome) {
  submit("acquire", "1");
  submit("release", "2");
  submit("release", "3");
  executor.run();
  ASSERT_EQ(calls.size(), 2u);
  calls[0].answer(admit::asio::to_error_code(admit::errc::outcome_unknown), reply());
  EXPECT_EQ(outcomes[0]->ec, admit::errc::outcome_unknown);
  calls[1].answer(admit::asio::to_error_code(admit::errc::connection_lost), reply());
  EXPECT_EQ(outcomes[1]->ec, admit::errc::connection_lost);
  EXPECT_EQ(outcomes[2]->ec, admit::errc::connection_lost);

  // (The flush the answer to two operations posted finds nothing waiting.)
  EXPECT_EQ(executor.run(), static_cast<std::size_t>(reach + 1));
  EXPECT_EQ(calls.size(), 2u);

  // An error reply to the whole call: each operation gets the call's reply.
  submit("acquire", "4");  // nothing in flight: at once
  submit("release", "5");
  submit("release", "6");
  executor.run();
  ASSERT_EQ(calls.size(), 4u);
  EXPECT_EQ(calls[3].ops, (std::vector<std::string>{"release:5", "release:6"}));
  calls[3].answer({}, reply::error("ERR admit semaphore: n must be an integer, got x"));
  EXPECT_TRUE(outcomes[4]->r.is_error());
  EXPECT_TRUE(outcomes[5]->r.is_error());
  // A reply of another shape (one operation's reply short of the call's two) is an error for each: never read as
  // theirs, where its first element, a length, would pass for a status.
  submit("release", "7");
  submit("release", "8");
  executor.run();
  ASSERT_EQ(calls.size(), 5u);
  EXPECT_EQ(calls[4].ops, (std::vector<std::string>{"release:7", "release:8"}));
  calls[4].answer({}, batch({status(0)}));
  ASSERT_TRUE(outcomes[6]->done && outcomes[7]->done);
  EXPECT_TRUE(outcomes[6]->r.is_error());
  EXPECT_TRUE(outcomes[7]->r.is_error());
}

// A batcher that keeps up to three calls unanswered (the semaphore keeps two): a flush halves what waits while fewer
// than two are, sends it all at two, and holds it at three until an answer.
TEST(OpBatcherThreeCalls, AFlushHalvesBelowTwoCallsInFlightSendsAllAtTwoAndHoldsAtThree) {
  manual_executor executor;
  std::vector<sent_call> calls;
  op_batcher batcher{[&](const std::vector<op_batcher::op>& ops, std::optional<steady::time_point> deadline,
                         op_batcher::completion answered) {
                       sent_call c{{}, deadline, std::move(answered)};
                       for (const auto& o : ops) c.ops.push_back(o.args.at(0) + ":" + o.args.at(1));
                       calls.push_back(std::move(c));
                     },
                     executor.poster(), reach, 3};
  const auto owner = std::make_shared<int>(0);
  const auto submit = [&](const std::string& id) {
    batcher.submit({{"release", id}, std::nullopt, [](boost::system::error_code, reply) {}}, owner);
  };
  submit("a");  // alone
  submit("b");
  submit("c");
  executor.run();  // one call in flight: half of what waits leaves
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[1].ops, (std::vector<std::string>{"release:b"}));
  submit("d");  // c waits for an answer with it: no flush
  EXPECT_TRUE(executor.posted.empty());
  calls[0].answer({}, reply::array({reply::integer(0)}));  // another call in flight: c and d leave after the turns
  submit("e");
  executor.run();  // one call in flight again: half
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls[2].ops, (std::vector<std::string>{"release:c", "release:d"}));
  calls[1].answer({}, reply::array({reply::integer(0)}));
  executor.run();  // one call in flight: half of e alone is e
  ASSERT_EQ(calls.size(), 4u);
  EXPECT_EQ(calls[3].ops, (std::vector<std::string>{"release:e"}));
  // Two calls in flight: a flush sends everything.
  submit("f");
  submit("g");
  executor.run();
  ASSERT_EQ(calls.size(), 5u);
  EXPECT_EQ(calls[4].ops, (std::vector<std::string>{"release:f", "release:g"}));
  // Three: it holds them for an answer, which sends them with what its completions ask for.
  submit("h");
  executor.run();
  EXPECT_EQ(calls.size(), 5u);
  calls[2].answer({}, reply::array({reply::integer(1), reply::integer(0), reply::integer(1), reply::integer(0)}));
  submit("i");
  executor.run();
  ASSERT_EQ(calls.size(), 6u);
  EXPECT_EQ(calls[5].ops, (std::vector<std::string>{"release:h", "release:i"}));
  calls.clear();  // the calls never answered go while the batcher lives: their completions must not outlive it
}

// An executor destroyed with a flush pending never runs it: what waited is dropped — its completions destroyed, not
// called (they may hold the semaphore, which holds the batcher) — and the batcher works on.
TEST_F(OpBatcher, AFlushThatNeverRunsDropsWhatWaited) {
  submit("acquire", "1");
  const auto held_by_completion = std::make_shared<int>(0);
  bool called = false;
  batcher.submit({{"release", "2"},
                  std::nullopt,
                  [&called, held_by_completion](boost::system::error_code, reply) { called = true; }},
                 owner);
  ASSERT_EQ(executor.posted.size(), 1u);
  EXPECT_EQ(held_by_completion.use_count(), 2);
  executor.posted.clear();  // destroyed, never run
  EXPECT_EQ(held_by_completion.use_count(), 1);
  EXPECT_FALSE(called);
  calls[0].answer({}, status(0));
  submit("acquire", "3");  // nothing in flight, nothing waiting: at once
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[1].ops, (std::vector<std::string>{"acquire:3"}));
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
  manual_executor executor;
  op_batcher b{
      [&](const std::vector<op_batcher::op>& ops, std::optional<steady::time_point>, op_batcher::completion answered) {
        for (const auto& o : ops) sent.push_back(o.args.at(0));
        answered({}, reply::array({reply::integer(0)}));
      },
      executor.poster(), reach, 2};
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
  EXPECT_TRUE(executor.posted.empty());  // each went alone
}

TEST(OpBatcherOrder, CallsLeaveInTheOrderTheyFormedWhenTwoFlushesRace) {
  std::mutex m;
  std::vector<std::string> order;               // guarded by m
  std::vector<op_batcher::completion> answers;  // guarded by m
  std::promise<void> release_in_sender;
  std::latch go_on{1};
  manual_executor executor;  // its tasks taken out and run by the threads below, one each
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
      },
      executor.poster(), reach, 2};
  const auto owner = std::make_shared<int>(0);
  const auto noop = [](boost::system::error_code, reply) {};
  const auto later = steady::now() + std::chrono::hours(1);
  batcher.submit({{"acquire", "x"}, later, noop}, owner);
  batcher.submit({{"release", "a"}, later, noop}, owner);  // queued behind the acquire: a flush posted
  op_batcher::completion acquire_answer;
  {
    const std::lock_guard lock(m);
    ASSERT_EQ(answers.size(), 1u);
    acquire_answer = answers[0];
  }
  acquire_answer({}, reply::array({}));  // nothing in flight when the flushes run: each may send
  ASSERT_EQ(executor.posted.size(), 1u);
  auto first_flush = std::move(executor.posted.front());
  executor.posted.clear();
  // Thread 1 runs the first flush: it takes the release and is held in the sender.
  std::jthread one([&] { first_flush(); });
  release_in_sender.get_future().wait();
  batcher.submit({{"cancel", "a"}, later, noop}, owner);  // the same caller's next operation: another flush
  ASSERT_EQ(executor.posted.size(), 1u);
  auto second_flush = std::move(executor.posted.front());
  executor.posted.clear();
  // Thread 2 runs the second flush: it must not send the cancel before the release is sent.
  auto two = std::async(std::launch::async, [&] { second_flush(); });
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
  ASSERT_EQ(sent.size(), 3u);
  EXPECT_EQ(sent[1], "release");
  EXPECT_EQ(sent[2], "cancel");
}

}  // namespace
