// The priority classes of the host-local limit of `admit run` (src/cli/common/local_limit.hpp): the same decisions
// as admit::admission's, checked side by side on one random sequence of arrivals and releases (each request a thread
// that holds what it is given until the test releases it), with a concurrency limit and with a rate whose tokens do
// not come back within the test (so that both sides see the same tokens whatever their clocks say). Also: the
// classes are part of the definition, and `inspect_local` reports them.
#include <gtest/gtest.h>

#include <atomic>
#include <deque>
#include <functional>
#include <initializer_list>
#include <map>
#include <random>
#include <semaphore>
#include <set>

#include "admit/admission.hpp"
#include "local_limit_testing.hpp"

namespace local_classes_testing {

using namespace admit::cli::local_limit_testing;

// One request held on a thread: admitted (or not), then released when the test says so.
class held_request {
 public:
  // `acquire(stop)` waits for admission and returns something that converts to bool (admitted) and releases what it
  // holds when destroyed.
  template <class Acquire>
  explicit held_request(Acquire acquire)
      : thread_([this, acquire = std::move(acquire)](std::stop_token stop) {
          auto held = acquire(stop);
          if (!held) return;
          admitted_ = true;
          release_.acquire();
          { [[maybe_unused]] auto gone = std::move(*held); }
          released_ = true;
        }) {}
  held_request(const held_request&) = delete;
  held_request& operator=(const held_request&) = delete;
  ~held_request() {
    thread_.request_stop();
    release_.release();
  }
  bool admitted() const noexcept { return admitted_; }
  bool released() const noexcept { return released_; }
  void release() { release_.release(); }

 private:
  std::atomic<bool> admitted_{false}, released_{false};
  std::binary_semaphore release_{0};
  std::jthread thread_;  // last: it uses the members above
};

struct differential_case {
  std::int64_t capacity = 4;
  std::optional<std::chrono::nanoseconds> interval = {};  // the rate's; nullopt: none
  std::int64_t burst = 1;
  std::uint32_t seed = 1;
};

class LocalLimitClasses : public LocalLimit {
 protected:
  const std::vector<admit::priority_class> classes_{{"a", 0.5}, {"b", 0.25}, {"c", 0.25}};

  local_limit_config classed(const differential_case& d, std::size_t priority, std::int64_t n) const {
    auto c = config(d.capacity, n);
    c.interval = d.interval;
    c.burst = d.burst;
    c.classes = classes_;
    c.priority = priority;
    return c;
  }

  // 40 random steps, the same on both sides: an arrival of 1 or 2 in a random class, or the release of a random
  // admitted request. After each step, both sides have settled (every request admitted or queued, every release
  // done) and admitted the same requests.
  void differential(const differential_case& d) {
    admit::admission_options o;
    o.max_in_flight = d.capacity;
    if (d.interval) {
      o.rate = admit::rate::every(*d.interval);
      o.burst = d.burst;
    }
    o.classes = classes_;
    admit::admission library(o);
    (void)local_limit(classed(d, 0, 1));  // creates the limit's directory
    std::deque<held_request> by_library, by_file;
    std::set<std::size_t> released;
    std::mt19937 random(d.seed);
    std::size_t most_waiting = 0;
    const auto admitted = [](const std::deque<held_request>& side) {
      std::set<std::size_t> ids;
      for (std::size_t i = 0; i < side.size(); ++i) {
        if (side[i].admitted()) ids.insert(i);
      }
      return ids;
    };
    const auto library_settled = [&] {
      std::size_t done = 0;
      for (const auto& r : by_library) done += r.admitted();
      return library.waiting() + done == by_library.size();
    };
    for (int step = 0; step < 40; ++step) {
      std::vector<std::size_t> holding;
      for (auto id : admitted(by_library)) {
        if (!released.contains(id)) holding.push_back(id);
      }
      if (holding.empty() || random() % 5 < 3) {
        const std::size_t cls = random() % classes_.size();
        const std::int64_t n = 1 + static_cast<std::int64_t>(random() % 2);
        by_library.emplace_back([&library, cls, n](std::stop_token stop) { return library.acquire(stop, cls, n); });
        ASSERT_TRUE(eventually(library_settled)) << "step " << step;
        by_file.emplace_back([c = classed(d, cls, n)](std::stop_token stop) {
          return local_limit(c).acquire(std::nullopt, false, stop);
        });
        // Its entry exists: it has its place in the queue before anything else happens.
        ASSERT_TRUE(eventually([&] { return files("w.") + files("h.") == by_file.size() - released.size(); }))
            << "step " << step;
      } else {
        const std::size_t id = holding[random() % holding.size()];
        released.insert(id);
        by_library[id].release();
        by_file[id].release();
        ASSERT_TRUE(eventually([&] { return by_library[id].released() && by_file[id].released(); }));
        ASSERT_TRUE(eventually(library_settled)) << "step " << step;
      }
      most_waiting = std::max(most_waiting, library.waiting());
      const auto expected = admitted(by_library);
      ASSERT_TRUE(eventually([&] { return admitted(by_file) == expected && waiters() == library.waiting(); }))
          << "step " << step << ": the library admitted " << ::testing::PrintToString(expected) << " with "
          << library.waiting() << " waiting, the local limit " << ::testing::PrintToString(admitted(by_file))
          << " with " << waiters();
    }
    // Requests waited in several classes at once: the rule was exercised, not only free capacity.
    EXPECT_GE(most_waiting, 3u);
  }
  // differential(d) with each seed, each in a directory of its own.
  void differential_over(differential_case d, std::initializer_list<std::uint32_t> seeds) {
    for (std::uint32_t seed : seeds) {
      SCOPED_TRACE(seed);
      d.seed = seed;
      differential(d);
      TearDown();
      SetUp();
    }
  }
};

TEST_F(LocalLimitClasses, DecidesAsTheLibraryWithAConcurrencyLimit) { differential_over({.capacity = 4}, {1u, 2u}); }

// One token every 1000 s: over the test the buckets gain less than 0.01 of a token, so they stay short of every whole
// token they do not hold at the start, on both sides.
TEST_F(LocalLimitClasses, DecidesAsTheLibraryWithARateAndAConcurrencyLimit) {
  differential_over({.capacity = 4, .interval = 1000s, .burst = 20}, {3u, 4u});
}

// A rate alone: the tokens run out, and the classes' assured buckets (charged by the admissions within them) decide
// who gets the last ones.
TEST_F(LocalLimitClasses, DecidesAsTheLibraryWithARateAlone) {
  differential_over({.capacity = 0, .interval = 1000s, .burst = 12}, {5u, 6u});
}

// The rate's shares: class a has used its assured tokens (2 of a burst of 4 at half the rate) and borrowed one more;
// its next request (2) waits for tokens that do not come within the test. Class b, within its assured share, takes
// the last token although it arrived later: a class beyond its share holds back nobody entitled. The library decides
// the same.
TEST_F(LocalLimitClasses, AClassBeyondItsRateShareDoesNotHoldBackAnEntitledOne) {
  differential_case d{.capacity = 0, .interval = 1000s, .burst = 4};
  auto two = [&](std::size_t priority, std::int64_t n) {
    auto c = classed(d, priority, n);
    c.classes = {{"a", 0.5}, {"b", 0.5}};
    return c;
  };
  admit::admission library({.rate = admit::rate::every(1000s), .burst = 4, .classes = {{"a", 0.5}, {"b", 0.5}}});
  std::vector<local_permit> held;
  std::vector<admit::permit> held_by_library;
  for (std::int64_t n : {2, 1}) {
    auto p = local_limit(two(0, n)).acquire(std::nullopt, true, {});
    ASSERT_TRUE(p) << n;
    held.push_back(std::move(*p));
    auto q = library.try_acquire(0, n);
    ASSERT_TRUE(q) << n;
    held_by_library.push_back(std::move(*q));
  }
  held_request waiting([&](std::stop_token stop) { return local_limit(two(0, 2)).acquire(std::nullopt, false, stop); });
  ASSERT_TRUE(eventually([&] { return waiters() == 1; }));
  held_request waiting_in_library([&](std::stop_token stop) { return library.acquire(stop, 0, 2); });
  ASSERT_TRUE(eventually([&] { return library.waiting() == 1; }));
  EXPECT_TRUE(local_limit(two(1, 1)).acquire(std::nullopt, true, {}));
  EXPECT_TRUE(library.try_acquire(1, 1));
  EXPECT_FALSE(waiting.admitted());
  EXPECT_FALSE(waiting_in_library.admitted());
  EXPECT_EQ(inspect_local(dir_, "db").tokens, 0);
}

// A class within its guarantee goes before an earlier arrival of a class that borrows.
TEST_F(LocalLimitClasses, AnEntitledClassGoesBeforeAnEarlierBorrower) {
  const differential_case d{.capacity = 4};
  std::vector<local_permit> batch;
  for (int k = 0; k < 4; ++k) {  // class c holds all 4 permits, 3 of them borrowed
    auto p = local_limit(classed(d, 2, 1)).acquire(std::nullopt, true, {});
    ASSERT_TRUE(p);
    batch.push_back(std::move(*p));
  }
  held_request borrower(
      [&](std::stop_token stop) { return local_limit(classed(d, 2, 1)).acquire(std::nullopt, false, stop); });
  ASSERT_TRUE(eventually([&] { return waiters() == 1; }));
  held_request entitled(
      [&](std::stop_token stop) { return local_limit(classed(d, 0, 1)).acquire(std::nullopt, false, stop); });
  ASSERT_TRUE(eventually([&] { return waiters() == 2; }));
  const auto seen = inspect_local(dir_, "db");
  ASSERT_TRUE(seen.definition);
  EXPECT_EQ(seen.definition->classes.size(), 3u);
  EXPECT_EQ(seen.snapshot.waiters.at(0).priority, 2u);
  EXPECT_EQ(seen.snapshot.waiters.at(1).priority, 0u);
  batch.pop_back();
  ASSERT_TRUE(eventually([&] { return entitled.admitted(); }));
  EXPECT_FALSE(borrower.admitted());
  EXPECT_EQ(waiters(), 1u);
  batch.pop_back();
  ASSERT_TRUE(eventually([&] { return borrower.admitted(); }));
}

TEST_F(LocalLimitClasses, ClassesArePartOfTheDefinition) {
  const differential_case d{.capacity = 2};
  auto held = local_limit(classed(d, 1, 1)).acquire(std::nullopt, true, {});
  ASSERT_TRUE(held);
  try {
    (void)local_limit(config(2)).acquire(std::nullopt, true, {});
    FAIL() << "a definition without the classes was accepted";
  } catch (const definition_conflict& e) {
    EXPECT_NE(std::string(e.what()).find("in use with --concurrency 2 --classes a=0.5,b=0.25,c=0.25"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("not --concurrency 2:"), std::string::npos) << e.what();
  }
  auto c = classed(d, 0, 1);
  c.classes[1].share = 0.5;
  c.classes[2].share = 0;
  EXPECT_THROW((void)local_limit(c).acquire(std::nullopt, true, {}), definition_conflict);
  auto bad = classed(d, 3, 1);
  EXPECT_THROW((void)local_limit{bad}, std::invalid_argument);
  bad = classed(d, 0, 1);
  bad.classes = {{"only", 1.0}};
  EXPECT_THROW((void)local_limit{bad}, std::invalid_argument);
  bad.classes = {{"a", 0.75}, {"b", 0.5}};
  EXPECT_THROW((void)local_limit{bad}, std::invalid_argument);
}

}  // namespace local_classes_testing
