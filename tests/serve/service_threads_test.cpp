// A stress test of serve/engine/service.hpp under std::thread (run under ThreadSanitizer): eight callers on one hot
// descriptor while another thread reloads the configuration over and over; every call is answered, exactly the limit
// is admitted per fixed window (reloads of an unchanged rule keep its counter), and the metrics count every hit. And,
// with a backend that holds its decisions: a decision in flight at a reload finishes on the configuration it began
// with.
#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "serve/engine/in_process_backend.hpp"
#include "serve/engine/service.hpp"
#include "transport/held_backend.hpp"

namespace admit::serve {
// This file's names in a namespace of their own: a folder's tests are compiled a few to a translation unit.
namespace service_threads_test {

using sys = std::chrono::system_clock;
constexpr std::int64_t base_s = 1'699'920'000;

std::shared_ptr<const configuration> load() {
  std::vector<std::pair<std::string, std::string>> files{{"hot.yaml", R"(domain: hot
descriptors:
  - key: k
    rate_limit:
      unit: second
      requests_per_unit: 250
)"}};
  return configuration::load(files);
}

TEST(ServiceThreads, EightCallersAndReloadsAdmitExactlyTheLimitPerWindow) {
  constexpr int callers = 8, windows = 10, tries = 100, limit = 250;
  service svc{std::make_unique<in_process_backend>(), load(), {}};
  std::vector<std::atomic<int>> admitted(windows);
  std::atomic<int> answered{0}, failures{0};
  std::atomic<bool> stop{false};
  std::thread reloader([&] {
    while (!stop.load()) svc.reload(load());
  });
  std::barrier sync(callers);
  std::vector<std::thread> pool;
  for (int c = 0; c < callers; ++c) {
    pool.emplace_back([&, c] {
      for (int w = 0; w < windows; ++w) {
        sync.arrive_and_wait();
        for (int i = 0; i < tries; ++i) {
          rls_request r{"hot", {{{{"k", "v"}}, std::nullopt, std::nullopt}}, 0};
          const auto now = sys::time_point{std::chrono::seconds{base_s + w} + std::chrono::microseconds{c * tries + i}};
          svc.should_rate_limit_at(std::move(r), now, [&, w](rls_result x) {
            ++answered;
            if (x.failure) ++failures;
            if (!x.failure && x.response.overall_code == rls_code::ok) ++admitted[static_cast<std::size_t>(w)];
          });
        }
      }
    });
  }
  for (auto& t : pool) t.join();
  stop = true;
  reloader.join();
  EXPECT_EQ(answered.load(), callers * windows * tries);
  EXPECT_EQ(failures.load(), 0);
  for (int w = 0; w < windows; ++w) EXPECT_EQ(admitted[static_cast<std::size_t>(w)].load(), limit) << "window " << w;
  const std::string m = svc.metrics_text();
  EXPECT_NE(m.find("admit_serve_hits_total{domain=\"hot\",rule=\"hot.k\"} " +
                   std::to_string(callers * windows * tries) + "\n"),
            std::string::npos)
      << m;
}

TEST(ServiceReload, ADecisionInFlightFinishesOnTheConfigurationItBeganWith) {
  auto held = std::make_unique<testing::held_backend>();
  testing::held_backend& backend = *held;
  service svc(std::move(held), testing::one_rule(), {});  // d/k: 5 a second
  rls_request request;
  request.domain = "d";
  request.descriptors.emplace_back().entries.push_back({"k", "v"});
  std::promise<rls_result> before, after;
  svc.should_rate_limit(request, [&](rls_result r) { before.set_value(std::move(r)); });
  backend.wait_held(1);
  std::vector<std::pair<std::string, std::string>> files{
      {"t.yaml",
       "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: minute\n"
       "      requests_per_unit: 9\n"}};
  svc.reload(configuration::load(files));
  svc.should_rate_limit(request, [&](rls_result r) { after.set_value(std::move(r)); });
  backend.wait_held(2);
  backend.release_all();
  const rls_result old_one = before.get_future().get(), new_one = after.get_future().get();
  ASSERT_FALSE(old_one.failure);
  ASSERT_FALSE(new_one.failure);
  ASSERT_TRUE(old_one.response.statuses.at(0).current_limit);
  ASSERT_TRUE(new_one.response.statuses.at(0).current_limit);
  EXPECT_EQ(old_one.response.statuses[0].current_limit->requests_per_unit, 5u);
  EXPECT_EQ(old_one.response.statuses[0].current_limit->per, unit::second);
  EXPECT_EQ(new_one.response.statuses[0].current_limit->requests_per_unit, 9u);
  EXPECT_EQ(new_one.response.statuses[0].current_limit->per, unit::minute);
}

}  // namespace service_threads_test
}  // namespace admit::serve
